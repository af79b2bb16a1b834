// transpose.cu - out[b, j, i] = in[b, i, j] for a stack of `batch` matrices of rows x cols.
//
// Every rung has the same signature so one registry dispatches them by name:
//
//   transpose_<rung><T>(in, out, rows, cols, batch, in_batch_stride, in_row_stride, in_col_stride)
//
// `in` may be any strided view (strides in elements, possibly negative); `out` is C-contiguous,
// shape (batch, cols, rows). T is a carrier type of the element's size: a transpose moves bits,
// so bool/int8/uint8 share `unsigned char`, float32/int32 share `unsigned int`, and so on.
//
// Grid mapping shared by all rungs: blockIdx.x walks column tiles (gridDim.x may reach 2^31 - 1);
// blockIdx.y and blockIdx.z walk row tiles and matrices with grid-stride loops, because gridDim.y
// and gridDim.z stop at 65535 and a (10**8, 1) array has 3 million row tiles.
#include "common.cuh"

// ---------------------------------------------------------------------------------------------
// Rung 1 - naive: one thread per element, reads along rows, writes along columns.
// Neighbouring threads (threadIdx.x) read neighbouring input elements, so reads coalesce; their
// writes land `rows` elements apart, so each warp store touches 32 different memory sectors.
// ---------------------------------------------------------------------------------------------
template <typename T>
__global__ void transpose_naive(const T* __restrict__ in, T* __restrict__ out, i64 rows, i64 cols,
                                i64 batch, i64 in_batch_stride, i64 in_row_stride,
                                i64 in_col_stride) {
    const i64 col = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 row_tiles = (rows + blockDim.y - 1) / blockDim.y;
    for (i64 b = blockIdx.z; b < batch; b += gridDim.z) {
        for (i64 tile = blockIdx.y; tile < row_tiles; tile += gridDim.y) {
            const i64 row = tile * blockDim.y + threadIdx.y;
            if (row < rows && col < cols) {
                out[(b * cols + col) * rows + row] =
                    in[b * in_batch_stride + row * in_row_stride + col * in_col_stride];
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Rung 2 - naive_col: reads along columns, writes along rows (the two indices of rung 1 swapped).
// Now the stores coalesce and the loads are strided. Loads tolerate scattering better than
// stores: a load's unused sector bytes can still be hit later from L1/L2, whereas a partial
// store costs a read-modify-write of the sector, so this is the faster of the two naive kernels.
// ---------------------------------------------------------------------------------------------
template <typename T>
__global__ void transpose_naive_col(const T* __restrict__ in, T* __restrict__ out, i64 rows,
                                    i64 cols, i64 batch, i64 in_batch_stride, i64 in_row_stride,
                                    i64 in_col_stride) {
    const i64 row = (i64)blockIdx.x * blockDim.x + threadIdx.x;  // x walks output columns
    const i64 col_tiles = (cols + blockDim.y - 1) / blockDim.y;
    for (i64 b = blockIdx.z; b < batch; b += gridDim.z) {
        for (i64 tile = blockIdx.y; tile < col_tiles; tile += gridDim.y) {
            const i64 col = tile * blockDim.y + threadIdx.y;
            if (row < rows && col < cols) {
                out[(b * cols + col) * rows + row] =
                    in[b * in_batch_stride + row * in_row_stride + col * in_col_stride];
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Rung 3 - shared: a TILE x TILE tile staged through shared memory, one thread per element.
// The block reads a tile along rows (coalesced), and after a barrier writes the transposed tile
// along rows of the output (coalesced too): the transposition happens inside shared memory.
// Reading the tile column-wise would put a warp's 32 accesses in one bank (a row is 32 words);
// one padding column shifts each row by a bank so the column read is conflict-free.
// Launch with blockDim = (TILE, TILE).
// ---------------------------------------------------------------------------------------------
template <typename T, int TILE>
__global__ void transpose_shared(const T* __restrict__ in, T* __restrict__ out, i64 rows,
                                 i64 cols, i64 batch, i64 in_batch_stride, i64 in_row_stride,
                                 i64 in_col_stride) {
    __shared__ T tile[TILE][TILE + 1];
    const i64 col0 = (i64)blockIdx.x * TILE;
    const i64 row_tiles = (rows + TILE - 1) / TILE;
    for (i64 b = blockIdx.z; b < batch; b += gridDim.z) {
        for (i64 t = blockIdx.y; t < row_tiles; t += gridDim.y) {
            const i64 row0 = t * TILE;
            // Load: thread (x, y) reads in[row0 + y, col0 + x].
            const i64 in_row = row0 + threadIdx.y;
            const i64 in_col = col0 + threadIdx.x;
            if (in_row < rows && in_col < cols) {
                tile[threadIdx.y][threadIdx.x] =
                    in[b * in_batch_stride + in_row * in_row_stride + in_col * in_col_stride];
            }
            __syncthreads();
            // Store: thread (x, y) writes out[col0 + y, row0 + x] = in[row0 + x, col0 + y].
            const i64 out_row = col0 + threadIdx.y;
            const i64 out_col = row0 + threadIdx.x;
            if (out_row < cols && out_col < rows) {
                out[(b * cols + out_row) * rows + out_col] = tile[threadIdx.x][threadIdx.y];
            }
            __syncthreads();  // the tile is refilled by the next iteration
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Ceilings for the benchmark (not rungs): the row and column copies of the bandwidth study that
// the naive kernels are measured against. Same access pattern as naive / naive_col, no transpose:
// copy_row reads and writes along rows (the best a one-element-per-thread kernel can do), copy_col
// reads and writes along columns. Contiguous rows x cols matrices only.
// ---------------------------------------------------------------------------------------------
template <typename T>
__global__ void copy_row(const T* __restrict__ in, T* __restrict__ out, i64 rows, i64 cols) {
    const i64 col = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 row_tiles = (rows + blockDim.y - 1) / blockDim.y;
    for (i64 tile = blockIdx.y; tile < row_tiles; tile += gridDim.y) {
        const i64 row = tile * blockDim.y + threadIdx.y;
        if (row < rows && col < cols) out[row * cols + col] = in[row * cols + col];
    }
}

template <typename T>
__global__ void copy_col(const T* __restrict__ in, T* __restrict__ out, i64 rows, i64 cols) {
    const i64 row = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 col_tiles = (cols + blockDim.y - 1) / blockDim.y;
    for (i64 tile = blockIdx.y; tile < col_tiles; tile += gridDim.y) {
        const i64 col = tile * blockDim.y + threadIdx.y;
        if (row < rows && col < cols) out[row * cols + col] = in[row * cols + col];
    }
}
