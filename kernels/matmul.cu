// matmul.cu - C[b] = A[b] @ B[b] for a stack of `batch` products, A[b] M x K, B[b] K x N.
//
// Every rung has the same signature so one registry dispatches them by name:
//
//   matmul_<rung><T, Index>(A, B, C, M, N, K, batch,
//                           a_batch_stride, a_row_stride, a_col_stride,
//                           b_batch_stride, b_row_stride, b_col_stride)
//
// A and B may be any strided views (strides in elements; a batch stride of 0 broadcasts one
// matrix over the stack); C is C-contiguous, shape (batch, M, N). Every product accumulates in T
// with one fused multiply-add per term, in increasing k. Index is the type of all index
// arithmetic: `int` when the host has checked that every offset fits in 31 bits, else `long long`.
//
// Grid mapping shared by all rungs: blockIdx.x walks column tiles of C, blockIdx.y row tiles and
// blockIdx.z matrices. gridDim.y and gridDim.z stop at 65535: the host splits larger problems
// into several launches. The kernels have no grid-stride loops: wrapping the k loop in loops over
// rows and matrices cost the naive kernel 40% on an H100 (3.3 against 5.6 TFLOP/s).
#include "common.cuh"

// ---------------------------------------------------------------------------------------------
// Rung 1 - naive: one thread per element of C, reading its row of A and column of B straight from
// global memory. A warp spans 32 columns of one row of C: it reads one element of A (a broadcast)
// and 32 consecutive elements of B per step. Each element of A is fetched N times and each element
// of B M times, mostly from cache: 2 loads per FMA, so the kernel is bound by load bandwidth.
// ---------------------------------------------------------------------------------------------
template <typename T, typename Index>
__global__ void matmul_naive(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C,
                             Index M, Index N, Index K, Index batch, Index a_batch_stride,
                             Index a_row_stride, Index a_col_stride, Index b_batch_stride,
                             Index b_row_stride, Index b_col_stride) {
    const Index n = (Index)blockIdx.x * blockDim.x + threadIdx.x;
    const Index m = (Index)blockIdx.y * blockDim.y + threadIdx.y;
    const Index b = blockIdx.z;
    if (n >= N || m >= M || b >= batch) return;
    // Move to matrix b first. Folding the batch offset into the row and column pointers below
    // instead made NVCC issue fewer loads ahead of the FMAs: 4.0 against 5.7 TFLOP/s (H100).
    A += b * a_batch_stride;
    B += b * b_batch_stride;
    C += b * M * N;
    const T* a = A + m * a_row_stride;      // A[b, m, 0]
    const T* b_col = B + n * b_col_stride;  // B[b, 0, n]
    T acc = 0;
    for (Index k = 0; k < K; ++k) acc = fma(a[k * a_col_stride], b_col[k * b_row_stride], acc);
    C[m * N + n] = acc;
}

// One step of the tiled rungs: acc + (row ty of a_tile) . (column tx of b_tile), in increasing k.
template <typename T, int TILE>
__device__ __forceinline__ T gk_tile_row_dot(const T (&a_tile)[TILE][TILE],
                                             const T (&b_tile)[TILE][TILE], int ty, int tx, T acc) {
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc = fma(a_tile[ty][k], b_tile[k][tx], acc);
    return acc;
}

// ---------------------------------------------------------------------------------------------
// Rung 2 - tiled: the block computes a TILE x TILE tile of C. For each step along K it stages a
// TILE x TILE tile of A and one of B in shared memory (one element per thread, zero-filled past
// the matrix edges, so any M, N, K works; only edge tiles pay for the checks), then every thread
// runs TILE FMAs out of shared memory.
// Each global element is now loaded M/TILE or N/TILE times instead of M or N times. Two barriers
// per step: the first before the tiles are read, the second before they are overwritten.
// Launch with blockDim = (TILE, TILE). Two blocks must be resident per SM on sm_80/sm_90 (at most
// 32 registers a thread for TILE = 32): with a single one, every barrier leaves the SM idle. The
// kernel fits without launch bounds (a GPU test checks the register count); asking for two blocks
// through __launch_bounds__ changed NVCC's schedule and cost 1.3%.
// Interior blocks run their whole K steps in a loop without bounds checks, so the common case is
// the textbook loop; the checked loop takes edge blocks and the last partial step of K.
// ---------------------------------------------------------------------------------------------
template <typename T, typename Index, int TILE>
__global__ void matmul_tiled(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C,
                             Index M, Index N, Index K, Index batch, Index a_batch_stride,
                             Index a_row_stride, Index a_col_stride, Index b_batch_stride,
                             Index b_row_stride, Index b_col_stride) {
    __shared__ T a_tile[TILE][TILE];
    __shared__ T b_tile[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const Index n = (Index)blockIdx.x * TILE + tx;
    const Index b = blockIdx.z;
    const Index m0 = (Index)blockIdx.y * TILE;
    const Index m = m0 + ty;
    // Thread (tx, ty) loads A[m, k0 + tx] and B[k0 + ty, n]: both coalesce along x. The
    // pointers advance by one tile per step; they are dereferenced only inside the matrix.
    const T* a_next = A + b * a_batch_stride + m * a_row_stride + tx * a_col_stride;
    const T* b_next = B + b * b_batch_stride + ty * b_row_stride + n * b_col_stride;
    const Index a_step = TILE * a_col_stride, b_step = TILE * b_row_stride;
    const bool interior = m0 + TILE <= M && (Index)blockIdx.x * TILE + TILE <= N;
    T acc = 0;
    const Index k_full = interior ? K - K % TILE : 0;  // steps that need no bounds checks
    Index k0 = 0;
    for (; k0 < k_full; k0 += TILE) {
        a_tile[ty][tx] = *a_next;
        b_tile[ty][tx] = *b_next;
        a_next += a_step;
        b_next += b_step;
        __syncthreads();
        acc = gk_tile_row_dot<T, TILE>(a_tile, b_tile, ty, tx, acc);
        __syncthreads();
    }
    for (; k0 < K; k0 += TILE) {
        a_tile[ty][tx] = (m < M && k0 + tx < K) ? *a_next : T(0);
        b_tile[ty][tx] = (k0 + ty < K && n < N) ? *b_next : T(0);
        a_next += a_step;
        b_next += b_step;
        __syncthreads();
        acc = gk_tile_row_dot<T, TILE>(a_tile, b_tile, ty, tx, acc);
        __syncthreads();
    }
    if (m < M && n < N) C[(b * M + m) * N + n] = acc;
}
