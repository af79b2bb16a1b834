// transpose.cu - out[b, j, i] = in[b, i, j] for a stack of `batch` matrices of rows x cols.
//
// Every rung has the same signature so one registry dispatches them by name:
//
//   transpose_<rung><T, Index>(in, out, rows, cols, in_batch_stride, in_row_stride, in_col_stride)
//
// `in` may be any strided view (strides in elements, possibly negative); `out` is C-contiguous,
// shape (gridDim.z, cols, rows). T is a carrier type of the element's size: a transpose moves bits,
// so bool/int8/uint8 share `unsigned char`, float32/int32 share `unsigned int`, and so on.
// Index is the integer type of all index arithmetic: `int` when the host has checked that every
// offset fits in 31 bits, `long long` otherwise. These kernels move one to four elements per
// thread, so the few instructions a 64-bit multiply costs over a 32-bit one are a visible share
// of the time.
//
// Grid mapping shared by all rungs: blockIdx.x walks column tiles (gridDim.x may reach 2^31 - 1),
// blockIdx.z picks the matrix, and blockIdx.y walks row tiles with a grid-stride loop, because
// gridDim.y stops at 65535 and a (10**8, 1) array has 3 million row tiles. The loop steps by
// gridDim, so no thread divides. gridDim.z stops at 65535 too: the host splits larger stacks into
// several launches.
#include "common.cuh"

// ---------------------------------------------------------------------------------------------
// Rung 1 - naive: one thread per element, reads along rows, writes along columns.
// Neighbouring threads (threadIdx.x) read neighbouring input elements, so reads coalesce; their
// writes land `rows` elements apart, so each warp store touches 32 different memory sectors.
// ---------------------------------------------------------------------------------------------
template <typename T, typename Index>
__global__ void transpose_naive(const T* __restrict__ in, T* __restrict__ out, Index rows,
                                Index cols, Index in_batch_stride, Index in_row_stride,
                                Index in_col_stride) {
    const Index col = (Index)blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= cols) return;
    in += (Index)blockIdx.z * in_batch_stride;  // signed: the stride may be negative
    out += (Index)blockIdx.z * cols * rows;
    for (Index row = (Index)blockIdx.y * blockDim.y + threadIdx.y; row < rows;
         row += (Index)gridDim.y * blockDim.y) {
        out[col * rows + row] = in[row * in_row_stride + col * in_col_stride];
    }
}

// ---------------------------------------------------------------------------------------------
// Rung 2 - naive_col: reads along columns, writes along rows (the two indices of rung 1 swapped).
// Now the stores coalesce and the loads are strided. Loads tolerate scattering better than
// stores: the other bytes of a loaded sector stay in L1/L2 for the neighbouring columns, whereas
// a partial store costs a read-modify-write of its sector, so this is the faster naive kernel.
// ---------------------------------------------------------------------------------------------
template <typename T, typename Index>
__global__ void transpose_naive_col(const T* __restrict__ in, T* __restrict__ out, Index rows,
                                    Index cols, Index in_batch_stride, Index in_row_stride,
                                    Index in_col_stride) {
    const Index row = (Index)blockIdx.x * blockDim.x + threadIdx.x;  // x walks output columns
    if (row >= rows) return;
    in += (Index)blockIdx.z * in_batch_stride;  // signed: the stride may be negative
    out += (Index)blockIdx.z * cols * rows;
    for (Index col = (Index)blockIdx.y * blockDim.y + threadIdx.y; col < cols;
         col += (Index)gridDim.y * blockDim.y) {
        out[col * rows + row] = in[row * in_row_stride + col * in_col_stride];
    }
}

// ---------------------------------------------------------------------------------------------
// Rung 3 - shared: a TILE x TILE tile staged through shared memory.
// The block reads a tile along rows (coalesced), and after a barrier writes the transposed tile
// along rows of the output (coalesced too): the transposition happens inside shared memory.
// Reading the tile column-wise would put a warp's 32 accesses in one bank (a row is 32 words);
// one padding column shifts each row by a bank so the column read is conflict-free.
// The block has TILE x ROWS threads and each thread moves TILE / ROWS elements (rows y, y + ROWS,
// ...): with one element per thread, a 32 x 32 block has a single load per thread in flight
// before its barrier, and on an H200 that capped the kernel near 1650 GB/s, 40% of a copy.
// Launch with blockDim = (TILE, ROWS).
// ---------------------------------------------------------------------------------------------
template <typename T, typename Index, int TILE, int ROWS>
__global__ void __launch_bounds__(TILE * ROWS)
transpose_shared(const T* __restrict__ in, T* __restrict__ out, Index rows, Index cols,
                 Index in_batch_stride, Index in_row_stride, Index in_col_stride) {
    static_assert(TILE % ROWS == 0, "each thread moves TILE / ROWS elements");
    __shared__ T tile[TILE][TILE + 1];
    in += (Index)blockIdx.z * in_batch_stride;  // signed: the stride may be negative
    out += (Index)blockIdx.z * cols * rows;
    const Index col0 = (Index)blockIdx.x * TILE;
    const Index in_col = col0 + threadIdx.x;
    for (Index row0 = (Index)blockIdx.y * TILE; row0 < rows; row0 += (Index)gridDim.y * TILE) {
        // Load: thread (x, y) reads in[row0 + y + j, col0 + x] for j = 0, ROWS, 2 ROWS, ...
#pragma unroll
        for (int j = 0; j < TILE; j += ROWS) {
            const Index in_row = row0 + threadIdx.y + j;
            if (in_row < rows && in_col < cols) {
                tile[threadIdx.y + j][threadIdx.x] =
                    in[in_row * in_row_stride + in_col * in_col_stride];
            }
        }
        __syncthreads();
        // Store: thread (x, y) writes out[col0 + y + j, row0 + x] = in[row0 + x, col0 + y + j].
        const Index out_col = row0 + threadIdx.x;
#pragma unroll
        for (int j = 0; j < TILE; j += ROWS) {
            const Index out_row = col0 + threadIdx.y + j;
            if (out_row < cols && out_col < rows) {
                out[out_row * rows + out_col] = tile[threadIdx.x][threadIdx.y + j];
            }
        }
        if (row0 + (Index)gridDim.y * TILE < rows) __syncthreads();  // before the next refill
    }
}

// ---------------------------------------------------------------------------------------------
// Ceilings for the benchmark (not rungs): the row and column copies of the bandwidth study that
// the naive kernels are measured against. Same access pattern as naive / naive_col, no transpose:
// copy_row reads and writes along rows (the best a one-element-per-thread kernel can do), copy_col
// reads and writes along columns. Contiguous rows x cols matrices only.
// ---------------------------------------------------------------------------------------------
template <typename T, typename Index>
__global__ void copy_row(const T* __restrict__ in, T* __restrict__ out, Index rows, Index cols) {
    const Index col = (Index)blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= cols) return;
    for (Index row = (Index)blockIdx.y * blockDim.y + threadIdx.y; row < rows;
         row += (Index)gridDim.y * blockDim.y) {
        out[row * cols + col] = in[row * cols + col];
    }
}

template <typename T, typename Index>
__global__ void copy_col(const T* __restrict__ in, T* __restrict__ out, Index rows, Index cols) {
    const Index row = (Index)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    for (Index col = (Index)blockIdx.y * blockDim.y + threadIdx.y; col < cols;
         col += (Index)gridDim.y * blockDim.y) {
        out[row * cols + col] = in[row * cols + col];
    }
}
