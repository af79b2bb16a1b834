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
    const T* a = A + b * a_batch_stride + m * a_row_stride;      // A[b, m, 0]
    const T* b_col = B + b * b_batch_stride + n * b_col_stride;  // B[b, 0, n]
    T acc = 0;
    for (Index k = 0; k < K; ++k) acc = fma(a[k * a_col_stride], b_col[k * b_row_stride], acc);
    C[(b * M + m) * N + n] = acc;
}

// ---------------------------------------------------------------------------------------------
// Rung 2 - tiled: the block computes a TILE x TILE tile of C. For each step along K it stages a
// TILE x TILE tile of A and one of B in shared memory (one element per thread, zero-filled past
// the matrix edges, so any M, N, K works; only edge tiles pay for the checks), then every thread
// runs TILE FMAs out of shared memory.
// Each global element is now loaded M/TILE or N/TILE times instead of M or N times. Two barriers
// per step: the first before the tiles are read, the second before they are overwritten.
// Launch with blockDim = (TILE, TILE). The launch bounds ask for as many resident blocks as the SM
// has threads for (two on sm_80/sm_90, i.e. at most 32 registers a thread for TILE = 32): with a
// single resident block, every barrier leaves the SM idle.
// ---------------------------------------------------------------------------------------------
template <typename T, typename Index, int TILE>
__global__ void __launch_bounds__(TILE * TILE, GK_THREADS_PER_SM / (TILE * TILE))
matmul_tiled(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, Index M, Index N,
             Index K, Index batch, Index a_batch_stride, Index a_row_stride, Index a_col_stride,
             Index b_batch_stride, Index b_row_stride, Index b_col_stride) {
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
    // Tiles wholly inside C and K skip the bounds checks (3% of the time at 4096^3).
    const bool interior = m0 + TILE <= M && (Index)blockIdx.x * TILE + TILE <= N;
    T acc = 0;
    for (Index k0 = 0; k0 < K; k0 += TILE) {
        if (interior && k0 + TILE <= K) {  // the same branch for the whole block
            a_tile[ty][tx] = *a_next;
            b_tile[ty][tx] = *b_next;
        } else {
            a_tile[ty][tx] = (m < M && k0 + tx < K) ? *a_next : T(0);
            b_tile[ty][tx] = (k0 + ty < K && n < N) ? *b_next : T(0);
        }
        a_next += a_step;
        b_next += b_step;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) acc = fma(a_tile[ty][k], b_tile[k][tx], acc);
        __syncthreads();
    }
    if (m < M && n < N) C[(b * M + m) * N + n] = acc;
}
