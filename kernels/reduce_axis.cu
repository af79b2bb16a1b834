// reduce_axis.cu - reductions over some axes of an array, keeping the others.
//
// The host brings every axis reduction to a view of shape (B, K, R), strides in elements:
//
//   out[s * out_split_stride + b * K + k] = Op over r in split s of in[b * batch_stride
//                                                                     + k * k_stride
//                                                                     + r * r_stride]
//
// b and k run over the kept axes (b over the leading ones that do not merge with the rest), r
// over the reduced ones. R may be split into gridDim.y parts of `split` elements each, so that
// a few long rows or columns still fill the GPU; the host then reduces the (splits, B * K)
// partials with reduce_cols, whose reads along the splits are coalesced. Every kernel has the
// signature
//
//   reduce_<kind><Op, In, Acc, Out, BLOCK>(in, out, K, R, batch_stride, k_stride, r_stride,
//                                          split, out_split_stride)
//
// with blockIdx.y the split and blockIdx.z the batch b (the host offsets `in` and `out` for
// batches past gridDim.z's 65535). Out is Acc, or the result dtype where the conversion is one
// rounding (float64 -> float32 sums, float32 -> float16), so that no separate cast launch
// follows. Like reduce.cu: a fixed order of combines, so the same input always gives bitwise the
// same result.
//
// Which kernel: the one whose threads read neighbouring elements.
//   reduce_rows        r is the fast axis (|r_stride| <= |k_stride|), rows of 32 elements or
//                      more: a warp per row, 16-byte words when r_stride is 1, warp shuffles.
//   reduce_short_rows  the same layout with short rows (NumPy's (10**6, 2).sum(axis=1)): a
//                      warp per row would leave most lanes idle, so a thread takes a row; a
//                      warp still reads one contiguous stretch of memory.
//   reduce_cols        k is the fast axis: a thread per column accumulates down the rows, so a
//                      warp reads consecutive elements of one row. blockDim = (KT, P): KT
//                      columns side by side, P threads per column splitting its rows, folded
//                      in shared memory. Narrow arrays (K = 2) use P = BLOCK / 2.
#include "reduce_common.cuh"

__device__ __forceinline__ i64 gk_smaller(i64 a, i64 b) { return a < b ? a : b; }

// ---------------------------------------------------------------------------------------------
// reduce_rows: warp (threadIdx.x >> 5) of the block reduces row k of split blockIdx.y. The warp's
// lanes read the row together (gk_slice_reduce: 16-byte words when contiguous), then fold their
// values with shuffles. No shared memory, no barrier.
// ---------------------------------------------------------------------------------------------
template <typename Op, typename In, typename Acc, typename Out, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
reduce_rows(const In* __restrict__ in, Out* __restrict__ out, i64 K, i64 R, i64 batch_stride,
            i64 k_stride, i64 r_stride, i64 split, i64 out_split_stride) {
    const i64 k = (i64)blockIdx.x * (BLOCK / 32) + (threadIdx.x >> 5);
    if (k >= K) return;  // whole warps leave together: the shuffles below need all 32 lanes
    const int lane = threadIdx.x & 31;
    const i64 start = (i64)blockIdx.y * split;
    const i64 n = gk_smaller(split, R - start);
    const In* row = in + (i64)blockIdx.z * batch_stride + k * k_stride + start * r_stride;
    Acc acc = gk_slice_reduce<Op, In, Acc>(row, n, r_stride, lane, 32);
    acc = gk_warp_reduce<Op>(acc);
    if (lane == 0) {
        out[(i64)blockIdx.y * out_split_stride + (i64)blockIdx.z * K + k] = to_acc<Out>(acc);
    }
}

// ---------------------------------------------------------------------------------------------
// reduce_short_rows: thread k reduces row k of split blockIdx.y alone, in order.
// ---------------------------------------------------------------------------------------------
template <typename Op, typename In, typename Acc, typename Out, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
reduce_short_rows(const In* __restrict__ in, Out* __restrict__ out, i64 K, i64 R,
                  i64 batch_stride, i64 k_stride, i64 r_stride, i64 split, i64 out_split_stride) {
    const i64 k = (i64)blockIdx.x * BLOCK + threadIdx.x;
    if (k >= K) return;
    const i64 start = (i64)blockIdx.y * split;
    const i64 n = gk_smaller(split, R - start);
    const In* element = in + (i64)blockIdx.z * batch_stride + k * k_stride + start * r_stride;
    Acc acc = Op::template identity<Acc>();
    for (i64 r = 0; r < n; ++r, element += r_stride) {
        acc = Op::combine(acc, to_acc<Acc>(*element));
    }
    out[(i64)blockIdx.y * out_split_stride + (i64)blockIdx.z * K + k] = to_acc<Out>(acc);
}

// ---------------------------------------------------------------------------------------------
// reduce_cols: thread (x, y) accumulates column k = blockIdx.x * KT + x over rows start + y,
// start + y + P, ... of split blockIdx.y; ROWS_PER_STEP rows per step are loaded before they are
// combined (loads in flight). The P partial values of a column are then folded in shared
// memory, a tree over y. P is a power of two.
// ---------------------------------------------------------------------------------------------
constexpr int ROWS_PER_STEP = 8;

template <typename Op, typename In, typename Acc, typename Out, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
reduce_cols(const In* __restrict__ in, Out* __restrict__ out, i64 K, i64 R, i64 batch_stride,
            i64 k_stride, i64 r_stride, i64 split, i64 out_split_stride) {
    __shared__ Acc scratch[BLOCK];
    const int columns = blockDim.x, lanes = blockDim.y;  // KT and P
    const int x = threadIdx.x, y = threadIdx.y;
    const i64 k = (i64)blockIdx.x * columns + x;
    const i64 start = (i64)blockIdx.y * split;
    const i64 end = gk_smaller(start + split, R);
    Acc acc = Op::template identity<Acc>();
    if (k < K) {
        const In* element =
            in + (i64)blockIdx.z * batch_stride + k * k_stride + (start + y) * r_stride;
        const i64 step = (i64)lanes * r_stride;
        i64 r = start + y;
        for (; r + (ROWS_PER_STEP - 1) * lanes < end;
             r += ROWS_PER_STEP * lanes, element += ROWS_PER_STEP * step) {
            In v[ROWS_PER_STEP];
#pragma unroll
            for (int i = 0; i < ROWS_PER_STEP; ++i) v[i] = element[i * step];
            Acc folded = to_acc<Acc>(v[0]);
#pragma unroll
            for (int i = 1; i < ROWS_PER_STEP; ++i) folded = Op::combine(folded, to_acc<Acc>(v[i]));
            acc = Op::combine(acc, folded);
        }
        for (; r < end; r += lanes, element += step) acc = Op::combine(acc, to_acc<Acc>(*element));
    }
    scratch[y * columns + x] = acc;
    __syncthreads();
    for (int s = lanes / 2; s > 0; s >>= 1) {
        if (y < s) {
            scratch[y * columns + x] =
                Op::combine(scratch[y * columns + x], scratch[(y + s) * columns + x]);
        }
        __syncthreads();
    }
    if (y == 0 && k < K) {
        out[(i64)blockIdx.y * out_split_stride + (i64)blockIdx.z * K + k] = to_acc<Out>(scratch[x]);
    }
}
