// axis.cu - reductions over some axes of an array, keeping the others.
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
// partials with reduce_cols, whose reads along the splits are coalesced (reduce_cols_folded
// folds them in the same launch). Every kernel has the signature
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
//                      in shared memory. Narrow arrays (K = 2) use P = BLOCK / 2. The host
//                      runs it with 512 threads where the column blocks alone cover every
//                      SM (columns of 256 then get P = 2), else with 256.
//   reduce_cols_folded reduce_cols with the splits of each column folded in the same launch
//                      (two more arguments: partials and tickets).
#include "common.cuh"

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
    Acc acc = gk_slice_reduce<Op, In, Acc>(row, n, r_stride, lane, 32, start);
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
        acc = Op::combine(acc, gk_element<Op, Acc>(*element, start + r));
    }
    out[(i64)blockIdx.y * out_split_stride + (i64)blockIdx.z * K + k] = to_acc<Out>(acc);
}

// ---------------------------------------------------------------------------------------------
// reduce_cols: thread (x, y) accumulates column k = blockIdx.x * KT + x over rows start + y,
// start + y + P, ... of split blockIdx.y; gk_rows_per_step<In>() rows per step are loaded before
// they are combined (loads in flight). The P partial values of a column are then folded in
// shared memory, a tree over y. P is a power of two.
// ---------------------------------------------------------------------------------------------
constexpr int ROWS_PER_STEP = 8;

// Rows loaded per step: ROWS_PER_STEP, or 64 bytes' worth of wider items (the folds of var's
// 24-byte moments and mean's 16-byte sums: eight in flight held 100 registers a thread, two
// blocks of 256 per SM; benchmarks/NOTES.md, item 107).
template <typename In>
__host__ __device__ constexpr int gk_rows_per_step() {
    return sizeof(In) <= 8 ? ROWS_PER_STEP : sizeof(In) >= 64 ? 1 : (int)(64 / sizeof(In));
}

// The block's part of a column reduction: thread (x, y) folds rows y, y + P, ... (below `rows`)
// of the column that starts at `column` (rows r_stride apart, the first one row `first_row` of
// the reduced axis), gk_rows_per_step<In>() loads at a time; on return (after a barrier) scratch[x]
// holds column x's value. Inactive threads (columns past K) contribute the identity. L2_LOADS
// reads through L2 only (values other blocks wrote during this launch).
template <typename Op, typename In, typename Acc, int BLOCK, bool L2_LOADS>
__device__ __forceinline__ void gk_cols_block(const In* column, bool active, i64 rows,
                                              i64 r_stride, i64 first_row, Acc* scratch) {
    const int columns = blockDim.x, lanes = blockDim.y;  // KT and P
    const int x = threadIdx.x, y = threadIdx.y;
    auto load = [](const In* p) -> In {
        if constexpr (L2_LOADS) return gk_load_l2(p);
        else return *p;
    };
    constexpr int STEP = gk_rows_per_step<In>();
    Acc acc = Op::template identity<Acc>();
    if (active) {
        const In* element = column + y * r_stride;
        const i64 step = (i64)lanes * r_stride;
        i64 r = y;
        for (; r + (STEP - 1) * lanes < rows; r += STEP * lanes, element += STEP * step) {
            In v[STEP];
#pragma unroll
            for (int i = 0; i < STEP; ++i) v[i] = load(element + i * step);
            Acc folded = gk_element<Op, Acc>(v[0], first_row + r);
#pragma unroll
            for (int i = 1; i < STEP; ++i) {
                folded = Op::combine(folded, gk_element<Op, Acc>(v[i], first_row + r + i * lanes));
            }
            acc = Op::combine(acc, folded);
        }
        for (; r < rows; r += lanes, element += step) {
            acc = Op::combine(acc, gk_element<Op, Acc>(load(element), first_row + r));
        }
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
}

template <typename Op, typename In, typename Acc, typename Out, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
reduce_cols(const In* __restrict__ in, Out* __restrict__ out, i64 K, i64 R, i64 batch_stride,
            i64 k_stride, i64 r_stride, i64 split, i64 out_split_stride) {
    __shared__ Acc scratch[BLOCK];
    const i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 start = (i64)blockIdx.y * split;
    gk_cols_block<Op, In, Acc, BLOCK, false>(
        in + (i64)blockIdx.z * batch_stride + k * k_stride + start * r_stride, k < K,
        gk_smaller(split, R - start), r_stride, start, scratch);
    if (threadIdx.y == 0 && k < K) {
        out[(i64)blockIdx.y * out_split_stride + (i64)blockIdx.z * K + k] =
            to_acc<Out>(scratch[threadIdx.x]);
    }
}

// ---------------------------------------------------------------------------------------------
// reduce_cols_folded: reduce_cols for split columns, with the splits folded in the same launch
// (one_pass's method, per column tile). The second launch that reduce_cols needs to fold the
// (splits, B * K) partials costs a launch and a drain of the grid: on an H100 the (8192, 8192)
// float32 sum over axis 0 ran at 0.90 of a full sum's bandwidth that way. Each block writes its
// column values to `partials` (row blockIdx.y, out_split_stride apart), makes them visible
// device-wide and takes a ticket for its column tile; the block that draws the last of the
// gridDim.y tickets folds the splits of its columns with the same block-wide column reduction
// (a fixed order: the result does not depend on which block came last) and resets the ticket. `tickets` holds gridDim.x * gridDim.z
// counters, 0 at launch, not shared with launches that can run at the same time. Signature:
// reduce_cols's, then partials and tickets.
// ---------------------------------------------------------------------------------------------
template <typename Op, typename In, typename Acc, typename Out, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
reduce_cols_folded(const In* __restrict__ in, Out* __restrict__ out, i64 K, i64 R,
                   i64 batch_stride, i64 k_stride, i64 r_stride, i64 split, i64 out_split_stride,
                   Acc* __restrict__ partials, unsigned int* __restrict__ tickets) {
    __shared__ Acc scratch[BLOCK];
    __shared__ bool is_last;
    const i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 start = (i64)blockIdx.y * split;
    gk_cols_block<Op, In, Acc, BLOCK, false>(
        in + (i64)blockIdx.z * batch_stride + k * k_stride + start * r_stride, k < K,
        gk_smaller(split, R - start), r_stride, start, scratch);
    const bool writer = threadIdx.y == 0;
    const i64 column = (i64)blockIdx.z * K + k;  // this launch's output index
    if (writer && k < K) partials[(i64)blockIdx.y * out_split_stride + column] = scratch[threadIdx.x];
    __threadfence();  // each writer's partial is visible to every block before the ticket
    __syncthreads();
    unsigned int* ticket = tickets + (blockIdx.z * gridDim.x + blockIdx.x);
    if (threadIdx.x == 0 && threadIdx.y == 0) is_last = atomicAdd(ticket, 1u) == gridDim.y - 1;
    __syncthreads();
    if (!is_last) return;
    __threadfence();  // see the other blocks' partials
    // The same block-wide column reduction, over the splits of the partials (through L2).
    __syncthreads();  // scratch is reused
    gk_cols_block<Op, Acc, Acc, BLOCK, true>(partials + column, k < K, gridDim.y,
                                             out_split_stride, 0, scratch);
    if (writer && k < K) out[column] = to_acc<Out>(scratch[threadIdx.x]);
    if (threadIdx.x == 0 && threadIdx.y == 0) *ticket = 0;
}
