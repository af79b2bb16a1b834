// timing.cu - a kernel for the benchmark, not a rung: it holds the stream while the host enqueues.
//
// CUDA events around one call time from the start event to the end event, and on an idle GPU
// the start event completes at once: the Python wrapper's host time before its launch (10 to
// 20 us) is then counted as device time. That is a third of a 64 MB transpose. The benchmark
// launches this kernel first, records the start event, enqueues the call and the end event, and
// only then releases the kernel through a flag in pinned host memory: the events then measure
// the work the call put on the stream, back to back, as it runs when the host keeps ahead
// (a loop of calls, a framework's queue). nvbench measures kernels the same way.
//
// flags[0] is the release flag the host sets; the kernel writes flags[1] = 1 if it gave up
// after `timeout_ns` (a call that waits on the device itself would otherwise never let it go),
// so the host can tell a held measurement from one that was not.
#include "common.cuh"

__global__ void gk_hold_stream(u64 flags_address, u64 timeout_ns) {
    volatile int* flags = reinterpret_cast<volatile int*>(flags_address);
    u64 start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (flags[0] == 0) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start > timeout_ns) {
            flags[1] = 1;
            break;
        }
        __nanosleep(1000);
    }
}
