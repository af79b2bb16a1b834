// reduce.cu - reductions with an associative operator: sum, prod, min and max, each an Op type
// with an identity and a combine, so every rung serves every operator.
//
// Every rung reads n elements in[0], in[stride], ..., converts each to Acc (see to_acc in
// common.cuh) and combines them:
//
//   reduce_two_pass<Op, In, Acc, Out, BLOCK>(in, out, n, stride)       one value per block in out
//   reduce_shuffle<Op, In, Acc, Out, BLOCK>(in, out, n, stride)        one value per block in out
//   reduce_one_pass<Op, In, Acc, Out, BLOCK, STRIDED>(in, out, n, stride,  out[0]
//                                            segment, partials, counter)
//
// Launched with one block, the first two reduce their whole input to out[0]; the host launches
// them a second time over the per-block partials (written as Acc). Out is Acc or the result
// dtype (to_acc<Out> converts once at the end), so no separate cast launch follows. The order of the combines depends only on n,
// the input's alignment and the launch configuration, so the same input always gives bitwise the
// same result: no floating-point atomics (one_pass counts finished blocks with an integer one).
// The operators and the warp, block and 16-byte-word helpers are in common.cuh, shared
// with the axis reductions (axis.cu).
#include "common.cuh"
// ---------------------------------------------------------------------------------------------
// Rung 1 - two_pass: each thread accumulates a grid-stride slice of the input in a register
// (coalesced: consecutive threads read consecutive elements), the block folds its BLOCK values
// with a tree in shared memory that halves the active threads each step, and thread 0 writes
// one partial per block. The host launches the same kernel a second time, with one block, over
// the partials: the launch boundary is the grid-wide synchronisation, instead of atomics.
// One barrier per tree step suffices: in a step, the threads that write (tid < s) and the slots
// that are read (tid + s >= s) are disjoint. BLOCK must be a power of two.
// ---------------------------------------------------------------------------------------------
template <typename Op, typename In, typename Acc, typename Out, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
reduce_two_pass(const In* __restrict__ in, Out* __restrict__ out, i64 n, i64 stride) {
    __shared__ Acc partial[BLOCK];
    const int tid = threadIdx.x;
    Acc acc = Op::template identity<Acc>();
    const i64 step = (i64)gridDim.x * BLOCK;
    for (i64 i = (i64)blockIdx.x * BLOCK + tid; i < n; i += step) {
        acc = Op::combine(acc, gk_element<Op, Acc>(in[i * stride], i));
    }
    partial[tid] = acc;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (tid < s) partial[tid] = Op::combine(partial[tid], partial[tid + s]);
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = to_acc<Out>(partial[0]);
}

// ---------------------------------------------------------------------------------------------
// Rung 2 - shuffle: 16-byte loads and warp shuffles.
// two_pass issues one load of 1 to 16 bytes per element, and its shared-memory tree costs a
// barrier per halving. Here a contiguous input is read as 16-byte words (16 int8 or 4 float32
// per load, the widest access the hardware has; a scalar head and tail handle the unaligned
// ends, strided inputs keep scalar loads), so a warp's request moves 512 bytes. A block folds
// its values with __shfl_down_sync inside each warp (registers, no barrier), then one warp folds
// the per-warp results: one barrier in all. Still two launches, like two_pass.
// ---------------------------------------------------------------------------------------------
template <typename Op, typename In, typename Acc, typename Out, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
reduce_shuffle(const In* __restrict__ in, Out* __restrict__ out, i64 n, i64 stride) {
    __shared__ Acc scratch[BLOCK / 32];
    const Acc value =
        gk_block_reduce<Op, Acc, BLOCK>(gk_thread_reduce<Op, In, Acc, BLOCK>(in, n, stride), scratch);
    if (threadIdx.x == 0) out[blockIdx.x] = to_acc<Out>(value);
}

// ---------------------------------------------------------------------------------------------
// Rung 3 - one_pass: the last block to finish combines the partials, in the same launch, and
// each block reads one contiguous segment of the input.
// A second launch costs a few microseconds of launch latency and a grid-wide drain, which is a
// visible share of a reduction that takes tens of microseconds (10^7 elements). Each block
// writes its partial, makes it visible device-wide (__threadfence) and takes a ticket from an
// integer counter; the block that draws the last ticket knows every partial is written, folds
// them in index order (so the result does not depend on which block came last) and resets the
// counter to 0 for the next launch. `counter` must be 0 at launch and must not be shared by
// launches that can run at the same time (the host keeps one per device and stream).
// Segments: block b reduces elements [b * segment, (b + 1) * segment), and large inputs get up
// to 32 waves of blocks instead of one grid-stride wave. SMs do not all draw memory at the same
// rate; with one wave the grid ends when the slowest SM does, while with several, SMs that run
// ahead start more blocks. The host launches it with 1024 threads per block: two blocks per SM
// read two streams of addresses where eight blocks of 256 read eight (2^28 float32 on an H100:
// 0.994 -> 1.010 of cupy.sum, which is CUB; benchmarks/NOTES.md, items 31 and 36). The mean's
// wider accumulator leaves room for one such block an SM: its blocks are of 256 threads, five
// an SM (2^26 float32, held: 2501 -> 2843 GB/s; items 143 and 145).
// The segment is a whole number of block steps (16-byte words when contiguous), so every
// segment of an aligned input starts aligned. STRIDED: the blocks read shuffle's single
// grid-stride wave instead of segments (var's moments and float argmin/argmax from 2^25
// elements, where segments ran below shuffle), and the last block folds the partials as here:
// shuffle's reads in one launch (2^26 float32 argmax, held: segments 2486, shuffle 2705-2742,
// this 2803-2806 GB/s; NOTES, items 148 and 151).
// ---------------------------------------------------------------------------------------------
template <typename Op, typename In, typename Acc, typename Out, int BLOCK, bool STRIDED = false>
__global__ void __launch_bounds__(BLOCK)
reduce_one_pass(const In* __restrict__ in, Out* __restrict__ out, i64 n, i64 stride, i64 segment,
                Acc* __restrict__ partials, unsigned int* __restrict__ counter) {
    __shared__ Acc scratch[BLOCK / 32];
    __shared__ bool is_last;
    Acc value;
    if constexpr (STRIDED) {  // shuffle's one grid-stride wave (segment unused)
        value = gk_thread_reduce<Op, In, Acc, BLOCK>(in, n, stride);
    } else {
        const i64 begin = (i64)blockIdx.x * segment;
        const i64 count = n - begin < segment ? n - begin : segment;
        value = gk_slice_reduce<Op, In, Acc>(in + begin * stride, count, stride, threadIdx.x,
                                             BLOCK, begin);
    }
    value = gk_block_reduce<Op, Acc, BLOCK>(value, scratch);
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = value;
        __threadfence();  // the partial is visible to every block before the ticket is taken
        is_last = atomicAdd(counter, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!is_last) return;
    __threadfence();  // see the other blocks' partials
    value = Op::template identity<Acc>();
    unsigned int k = threadIdx.x;
    // Segments leave thousands of partials: 8 loads in flight. One strided wave leaves a few
    // a thread, and 8 in flight would cost var's moments 40 registers in the whole kernel
    // (80 against shuffle's 40: three blocks an SM, not six).
    constexpr int IN_FLIGHT = STRIDED ? 1 : 8;
    for (; k + (IN_FLIGHT - 1) * BLOCK < gridDim.x; k += IN_FLIGHT * BLOCK) {
        Acc part[IN_FLIGHT];
#pragma unroll
        for (int i = 0; i < IN_FLIGHT; ++i) part[i] = gk_load_l2(partials + k + i * BLOCK);
#pragma unroll
        for (int i = 0; i < IN_FLIGHT; ++i) value = Op::combine(value, part[i]);
    }
    for (; k < gridDim.x; k += BLOCK) value = Op::combine(value, gk_load_l2(partials + k));
    __syncthreads();  // scratch is reused
    value = gk_block_reduce<Op, Acc, BLOCK>(value, scratch);
    if (threadIdx.x == 0) {
        out[0] = to_acc<Out>(value);
        *counter = 0;
    }
}
