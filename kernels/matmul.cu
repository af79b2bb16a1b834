// matmul.cu - C[b] = A[b] @ B[b] for a stack of `batch` products, A[b] M x K, B[b] K x N.
//
// Every rung has the same signature so one registry dispatches them by name:
//
//   matmul_<rung><T>(A, B, C, M, N, K, batch,
//                    a_batch_stride, a_row_stride, a_col_stride,
//                    b_batch_stride, b_row_stride, b_col_stride)
//
// A and B may be any strided views (strides in elements; a batch stride of 0 broadcasts one
// matrix over the stack); C is C-contiguous, shape (batch, M, N). Every product accumulates in T
// with one fused multiply-add per term, in increasing k.
//
// Grid mapping shared by all rungs: blockIdx.x walks column tiles of C, blockIdx.y and blockIdx.z
// walk row tiles and matrices with grid-stride loops (gridDim.y and gridDim.z stop at 65535).
#include "common.cuh"

// ---------------------------------------------------------------------------------------------
// Rung 1 - naive: one thread per element of C, reading its row of A and column of B straight from
// global memory. Each element of A is fetched N times and each element of B M times: 2 loads per
// FMA, so the kernel is bound by cache bandwidth, not arithmetic.
// ---------------------------------------------------------------------------------------------
template <typename T>
__global__ void matmul_naive(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C,
                             i64 M, i64 N, i64 K, i64 batch, i64 a_batch_stride,
                             i64 a_row_stride, i64 a_col_stride, i64 b_batch_stride,
                             i64 b_row_stride, i64 b_col_stride) {
    const i64 n = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 row_tiles = (M + blockDim.y - 1) / blockDim.y;
    for (i64 b = blockIdx.z; b < batch; b += gridDim.z) {
        for (i64 tile = blockIdx.y; tile < row_tiles; tile += gridDim.y) {
            const i64 m = tile * blockDim.y + threadIdx.y;
            if (m < M && n < N) {
                const T* a = A + b * a_batch_stride + m * a_row_stride;
                const T* bcol = B + b * b_batch_stride + n * b_col_stride;
                T acc = 0;
                for (i64 k = 0; k < K; ++k) acc = fma(a[k * a_col_stride], bcol[k * b_row_stride], acc);
                C[(b * M + m) * N + n] = acc;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Rung 2 - tiled: the block computes a TILE x TILE tile of C. For each step along K it stages a
// TILE x TILE tile of A and one of B in shared memory (one element per thread, zero-filled past
// the matrix edges, so any M, N, K works), then every thread runs TILE FMAs out of shared memory.
// Each global element is now loaded M/TILE or N/TILE times instead of M or N times. Two barriers
// per step: the first before the tiles are read, the second before they are overwritten.
// Launch with blockDim = (TILE, TILE).
// ---------------------------------------------------------------------------------------------
template <typename T, int TILE>
__global__ void matmul_tiled(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C,
                             i64 M, i64 N, i64 K, i64 batch, i64 a_batch_stride,
                             i64 a_row_stride, i64 a_col_stride, i64 b_batch_stride,
                             i64 b_row_stride, i64 b_col_stride) {
    __shared__ T a_tile[TILE][TILE];
    __shared__ T b_tile[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const i64 n = (i64)blockIdx.x * TILE + tx;
    const i64 row_tiles = (M + TILE - 1) / TILE;
    for (i64 b = blockIdx.z; b < batch; b += gridDim.z) {
        const T* a_mat = A + b * a_batch_stride;
        const T* b_mat = B + b * b_batch_stride;
        for (i64 tile = blockIdx.y; tile < row_tiles; tile += gridDim.y) {
            const i64 m = tile * TILE + ty;
            T acc = 0;
            for (i64 k0 = 0; k0 < K; k0 += TILE) {
                // Thread (tx, ty) loads A[m, k0 + tx] and B[k0 + ty, n]: both coalesce along x.
                const i64 ka = k0 + tx, kb = k0 + ty;
                a_tile[ty][tx] = (m < M && ka < K) ? a_mat[m * a_row_stride + ka * a_col_stride] : T(0);
                b_tile[ty][tx] = (kb < K && n < N) ? b_mat[kb * b_row_stride + n * b_col_stride] : T(0);
                __syncthreads();
#pragma unroll
                for (int k = 0; k < TILE; ++k) acc = fma(a_tile[ty][k], b_tile[k][tx], acc);
                __syncthreads();
            }
            if (m < M && n < N) C[(b * M + m) * N + n] = acc;
        }
    }
}
