// reduce.cu - reductions with an associative operator (sum today; the same kernels serve any
// operator given as an Op type with an identity and a combine).
//
// Every rung has the same signature so one registry dispatches them by name:
//
//   reduce_<rung><Op, In, Acc, BLOCK>(in, out, n, stride)
//
// reads n elements in[0], in[stride], ..., converts each to Acc (see to_acc in common.cuh) and
// writes one Acc per block to out[blockIdx.x]. Launched with one block, a rung reduces its whole
// input to out[0]. The order of the combines depends only on n and the launch configuration, so
// the same input always gives bitwise the same result: no atomics anywhere.
#include "common.cuh"

struct SumOp {
    template <typename T>
    static __device__ __forceinline__ T identity() { return to_acc<T>(0); }
    template <typename T>
    static __device__ __forceinline__ T combine(T a, T b) { return a + b; }
};
template <>
__device__ __forceinline__ gk_complex<float> SumOp::identity<gk_complex<float> >() {
    gk_complex<float> z = {0.0f, 0.0f};
    return z;
}
template <>
__device__ __forceinline__ gk_complex<double> SumOp::identity<gk_complex<double> >() {
    gk_complex<double> z = {0.0, 0.0};
    return z;
}

// ---------------------------------------------------------------------------------------------
// Rung 1 - two_pass: each thread accumulates a grid-stride slice of the input in a register
// (coalesced: consecutive threads read consecutive elements), the block folds its BLOCK values
// with a tree in shared memory that halves the active threads each step, and thread 0 writes
// one partial per block. The host launches the same kernel a second time, with one block, over
// the partials: the launch boundary is the grid-wide synchronisation, instead of atomics.
// One barrier per tree step suffices: in a step, the threads that write (tid < s) and the slots
// that are read (tid + s >= s) are disjoint. BLOCK must be a power of two.
// ---------------------------------------------------------------------------------------------
template <typename Op, typename In, typename Acc, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
reduce_two_pass(const In* __restrict__ in, Acc* __restrict__ out, i64 n, i64 stride) {
    __shared__ Acc partial[BLOCK];
    const int tid = threadIdx.x;
    Acc acc = Op::template identity<Acc>();
    const i64 step = (i64)gridDim.x * BLOCK;
    for (i64 i = (i64)blockIdx.x * BLOCK + tid; i < n; i += step) {
        acc = Op::combine(acc, to_acc<Acc>(in[i * stride]));
    }
    partial[tid] = acc;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (tid < s) partial[tid] = Op::combine(partial[tid], partial[tid + s]);
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = partial[0];
}
