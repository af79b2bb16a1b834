// transpose.cu - out[b, j, i] = in[b, i, j] for a stack of `batch` matrices of rows x cols:
// rungs 1 to 4, 7 and 8 of the transpose ladder, and the benchmark's copy kernels. Rungs 5 and 6,
// the word kernels for 1- and 2-byte elements, are in words.cu.
//
// Every rung has the same signature so one registry dispatches them by name:
//
//   transpose_<rung><T, Index, geometry...>(in, out, rows, cols, in_batch_stride, in_row_stride,
//                                          in_col_stride, out_batch_stride, out_row_stride)
//
// `in` may be any strided view (strides in elements, possibly negative); `out` has rows of `rows`
// contiguous elements: out[b, j, i] is out + b * out_batch_stride + j * out_row_stride + i (both
// positive; rows and rows * cols for a C-contiguous (gridDim.z, cols, rows) stack, other values
// when the matrices are planes of a larger permutation, such as axes (2, 1, 0)). T is a carrier
// type of the element's size: a transpose moves bits, so bool/int8/uint8 share `unsigned char`,
// float32/int32 share `unsigned int`, and so on.
// Index is the integer type of all index arithmetic: `int` when the host has checked that every
// offset fits in 31 bits, `long long` otherwise. These kernels move one to four elements per
// thread, so the few instructions a 64-bit multiply costs over a 32-bit one are a visible share
// of the time. The launch geometry (tiles, threads) comes in as template arguments, set in one
// place on the host (ops/transpose/rungs.py).
//
// Grid mapping shared by all rungs: blockIdx.x walks column tiles (gridDim.x may reach 2^31 - 1),
// blockIdx.z picks the matrix, and blockIdx.y walks row tiles with a grid-stride loop, because
// gridDim.y stops at 65535 and a (10**8, 1) array has 3 million row tiles. The loop steps by
// gridDim, so no thread divides. gridDim.z stops at 65535 too: the host splits larger stacks into
// several launches.
#include "../common.cuh"

// ---------------------------------------------------------------------------------------------
// Rung 1 - naive: one thread per element, reads along rows, writes along columns.
// Neighbouring threads (threadIdx.x) read neighbouring input elements, so reads coalesce; their
// writes land `rows` elements apart. How much that costs depends on the block's shape: a 16 x 16
// block puts 16 columns of 2 rows in a warp, and its store touches 16 sectors to write 2
// elements in each (0.30 of a copy for float32 on an H100). The host launches narrow blocks,
// 4 x 64 threads: a warp covers 4 columns of 8 rows, so its store writes 8 consecutive
// elements into each of 4 output rows, a whole 32-byte sector for 4-byte types (0.61 of a copy).
// ---------------------------------------------------------------------------------------------
template <typename T, typename Index>
__global__ void transpose_naive(const T* __restrict__ in, T* __restrict__ out, Index rows,
                                Index cols, Index in_batch_stride, Index in_row_stride,
                                Index in_col_stride, Index out_batch_stride,
                                Index out_row_stride) {
    const Index col = (Index)blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= cols) return;
    in += (Index)blockIdx.z * in_batch_stride;  // signed: the stride may be negative
    out += (Index)blockIdx.z * out_batch_stride;
    for (Index row = (Index)blockIdx.y * blockDim.y + threadIdx.y; row < rows;
         row += (Index)gridDim.y * blockDim.y) {
        out[col * out_row_stride + row] = in[row * in_row_stride + col * in_col_stride];
    }
}

// ---------------------------------------------------------------------------------------------
// Rung 2 - naive_col: reads along columns, writes along rows (the two indices of rung 1 swapped).
// Now the stores coalesce and the loads are strided. Loads tolerate scattering better than
// stores: the other bytes of a loaded sector stay in L1/L2 for the neighbouring columns, whereas
// a partial store costs a read-modify-write of its sector, so this is the faster naive kernel.
// The host's blocks are 8 x 32 threads for 4- to 16-byte types (16 x 16 for 1 and 2 bytes):
// a warp stores 8 consecutive elements into each of 4 output rows and reads 8 input rows.
// ---------------------------------------------------------------------------------------------
template <typename T, typename Index>
__global__ void transpose_naive_col(const T* __restrict__ in, T* __restrict__ out, Index rows,
                                    Index cols, Index in_batch_stride, Index in_row_stride,
                                    Index in_col_stride, Index out_batch_stride,
                                    Index out_row_stride) {
    const Index row = (Index)blockIdx.x * blockDim.x + threadIdx.x;  // x walks output columns
    if (row >= rows) return;
    in += (Index)blockIdx.z * in_batch_stride;  // signed: the stride may be negative
    out += (Index)blockIdx.z * out_batch_stride;
    for (Index col = (Index)blockIdx.y * blockDim.y + threadIdx.y; col < cols;
         col += (Index)gridDim.y * blockDim.y) {
        out[col * out_row_stride + row] = in[row * in_row_stride + col * in_col_stride];
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
                 Index in_batch_stride, Index in_row_stride, Index in_col_stride,
                 Index out_batch_stride, Index out_row_stride) {
    static_assert(TILE % ROWS == 0, "each thread moves TILE / ROWS elements");
    __shared__ T tile[TILE][TILE + 1];
    in += (Index)blockIdx.z * in_batch_stride;  // signed: the stride may be negative
    out += (Index)blockIdx.z * out_batch_stride;
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
                out[out_row * out_row_stride + out_col] = tile[threadIdx.x][threadIdx.y + j];
            }
        }
        if (row0 + (Index)gridDim.y * TILE < rows) __syncthreads();  // before the next refill
    }
}

// ---------------------------------------------------------------------------------------------
// Rung 4 - vector: V x V blocks of elements transposed in registers, so that every global access
// moves a 16-byte word (or a 4-byte one where rows are not 16-byte multiples), and output rows
// written in whole 32-byte sectors even when their starts are not aligned.
// `shared` moves 4-byte elements at best, 1 byte for int8: a warp's request then carries 32 to
// 128 bytes and the load/store units, not DRAM, set the pace (0.29 of a copy for int8, 0.74 for
// float32 on the H100). Here each thread loads V words from V consecutive rows (a V x V block of
// elements), swaps the block's rows and columns in registers, and stores the V resulting words to
// V planes of the shared tile at the block's transposed position; after the barrier each thread
// reads words back along a plane and writes them along output rows. Every access of global
// memory is a word of V * sizeof(T) bytes, and a warp's request covers whole 128-byte lines.
// The tile is TILE x TILE blocks, each plane padded so the column-wise stores hit distinct banks.
//
// SKEW (for outputs whose row pitch is not a multiple of 32 bytes, such as 8191 x 8193 float32):
// a store that covers part of a 32-byte sector makes the memory system read the sector back and
// merge it, which cost a third of the speed on odd shapes. With SKEW, the segment of output row r
// that a tile writes starts at the first sector boundary of the row, shifted by that row's
// misalignment f_r (0 <= f_r < E words, E = words per sector): the tile stages E - 1 extra block
// rows of the input so every row finds its shifted segment in shared memory, and one extra tile
// row at the end covers what the shift pushed past it. Each element is still written once.
//
// TALL: a tile covers TALL * TILE block rows of the input by TILE block columns. The E - 1 extra
// rows are then staged once per TALL * TILE rows instead of once per TILE. On an H100,
// 8191 x 8193 float32 went from 0.82 of a copy (32 x 32 tiles, 7 extra rows per 32) to 0.91
// (TALL = 8, 32 x 32 threads); int8, 31 extra rows per 32, from 0.34 to 0.46
// (benchmarks/NOTES.md, item 25).
//
// Requirements, checked by the host: rows and cols are multiples of V; for V > 1 the input's rows
// are contiguous (in_col_stride == 1) and every word it reads or writes is aligned to V * sizeof(T)
// bytes (the output strides too). With V = 1 any strides work. Launch with blockDim = (TILE, ROWS).
// 1- and 2-byte rows that are not whole words leave V = 1 here (int8 0.45 and float16 0.72 of a
// copy at 8191 x 8193); rungs 5 and 6 (words.cu) move such rows in words, and `auto` takes them.
// Latest (H100, held time, ratio to a device copy): 8192 x 8192 int8 0.95, float16 0.96,
// float32 0.97, float64 0.98; 8191 x 8193 float32 0.91.
// ---------------------------------------------------------------------------------------------
template <typename T, typename Index, int V, int TILE, int ROWS, bool SKEW, int TALL>
__global__ void __launch_bounds__(TILE * ROWS)
transpose_vector(const T* __restrict__ in, T* __restrict__ out, Index rows, Index cols,
                 Index in_batch_stride, Index in_row_stride, Index in_col_stride,
                 Index out_batch_stride, Index out_row_stride) {
    typedef typename gk_block_word<T, V>::type Word;
    typedef gk_block_row<T, V> BlockRow;
    constexpr int WORD_BYTES = sizeof(T) * V;
    constexpr int SECTOR_WORDS = WORD_BYTES >= 32 ? 1 : 32 / WORD_BYTES;  // E
    constexpr int TILE_ROWS = TALL * TILE;  // block rows of the input a tile covers
    constexpr int STAGED = SKEW ? TILE_ROWS + SECTOR_WORDS - 1 : TILE_ROWS;  // block rows held
    constexpr int PITCH = STAGED | 1;  // odd, so lanes storing a column hit distinct banks
    __shared__ Word tile[V][TILE][PITCH];

    in += (Index)blockIdx.z * in_batch_stride;  // signed: the stride may be negative
    out += (Index)blockIdx.z * out_batch_stride;
    const Index block_rows = rows / V, block_cols = cols / V;
    const Index col0 = (Index)blockIdx.x * TILE;  // first block column of the tile
    const Index in_col = col0 + threadIdx.x;
    const Index row_tiles = (block_rows + TILE_ROWS - 1) / TILE_ROWS + (SKEW ? 1 : 0);
    for (Index tile_row = blockIdx.y; tile_row < row_tiles; tile_row += gridDim.y) {
        const Index row0 = (tile_row - (SKEW ? 1 : 0)) * TILE_ROWS;  // first staged block row, may be < 0
        const bool interior = row0 >= 0 && row0 + STAGED <= block_rows && col0 + TILE <= block_cols;
        // Load: thread (x, y) reads blocks (row0 + j, col0 + x) for j = y, y + ROWS, ...
#pragma unroll
        for (int j0 = 0; j0 < STAGED; j0 += ROWS) {
            const int j = j0 + threadIdx.y;
            const Index in_row = row0 + j;
            if ((STAGED % ROWS == 0 || j < STAGED) &&
                (interior || (in_row >= 0 && in_row < block_rows && in_col < block_cols))) {
                BlockRow block[V];
#pragma unroll
                for (int i = 0; i < V; ++i) {
                    // For V > 1 the host has checked that in_col_stride == 1.
                    const T* src = in + (in_row * V + i) * in_row_stride +
                                   (V == 1 ? in_col * in_col_stride : in_col * V);
                    block[i].word = *reinterpret_cast<const Word*>(src);
                }
#pragma unroll
                for (int p = 0; p < V; ++p) {  // column p of the block: row p of its transpose
                    BlockRow column;
#pragma unroll
                    for (int i = 0; i < V; ++i) column.elem[i] = block[i].elem[p];
                    tile[p][threadIdx.x][j] = column.word;
                }
            }
        }
        __syncthreads();
        // Store: output block row c = col0 + y + j, plane p is output row c * V + p. Its words
        // [row0 + f, row0 + f + TILE_ROWS) come from staged block rows [f, f + TILE_ROWS).
#pragma unroll
        for (int j = 0; j < TILE; j += ROWS) {
            const int c_local = threadIdx.y + j;
            const Index c = col0 + c_local;
#pragma unroll
            for (int p = 0; p < V; ++p) {
                T* out_row = out + (c * V + p) * out_row_stride;
                int f = 0;
                if (SKEW) {  // words from this row's start to its first sector boundary
                    const unsigned long long word_address =
                        reinterpret_cast<unsigned long long>(out_row) / WORD_BYTES;
                    f = (int)((0ull - word_address) & (SECTOR_WORDS - 1));
                }
#pragma unroll
                for (int t = 0; t < TALL; ++t) {
                    const int staged = f + threadIdx.x + t * TILE;
                    const Index out_col = row0 + staged;  // a block row of the input
                    if (interior || (c < block_cols && out_col >= 0 && out_col < block_rows)) {
                        *reinterpret_cast<Word*>(out_row + out_col * V) = tile[p][c_local][staged];
                    }
                }
            }
        }
        if (tile_row + gridDim.y < row_tiles) __syncthreads();  // before the next refill
    }
}

// ---------------------------------------------------------------------------------------------
// Rung 7 - narrow: matrices with at most a few rows or a few columns, such as the (C, H * W) planes
// of a channels-first image batch with C = 3, which become its channels-last layout
// (permute_dims(x, (0, 2, 3, 1))), and the reverse. The tiles of rungs 3 to 6 are 32 to 256
// elements along both sides, so with 3 rows nearly all of each tile is empty: the vector rung ran
// (64, 3, 224, 224) float32 to channels-last at 0.02 of a copy on an H100. Here a tile takes the
// whole narrow side (N elements, at most 128; 79 of 8 bytes, 64 of 16) and P elements of the long
// side, N x P about TILE elements (P a multiple of 32), staged in shared memory as N rows of P: the
// block reads the tile in the input's order and writes it in the output's, element by element, so
// both walks are coalesced, whichever side is narrow. The output rows of N elements (narrow rows)
// are then consecutive in memory, as are the input rows of N elements (narrow columns). A walk
// steps its (outer, inner) position by the block's stride with one compare instead of a division
// per element. The staged rows' pitch is P plus the inverse of N's odd part modulo 32, so the walk
// along the narrow side meets 32 distinct banks (4-byte elements, odd N). Launch with THREADS
// threads, grid (min(tiles, 2^31 - 1), 1, batch) with tiles = ceil(long / P), and N * (P + 31) *
// sizeof(T) bytes of dynamic shared memory (ops/transpose/rungs.py). Measured on an H100 (per call,
// of a copy; benchmarks/NOTES.md, item 76): (64, 3, 224, 224) float32 to channels-last 0.87 (vector
// 0.02, torch 0.83) and back 0.84 (0.26, torch 0.86); uint8 0.48 and 0.53 (0.02, 0.08); over narrow
// sides of 1 to 16 elements uint8 0.37-0.43, float16 0.62-0.65, float32 0.79-0.87, float64
// 0.95-1.02. WORDS (below) moves the global side of 1- and 2-byte items in words: uint8 0.41-0.49
// and uint8 images to channels-last 0.35 per call (0.31 without), float16 unchanged (item 80), so
// what holds the small types is likely the shared-memory traffic, one element per access. With 17
// to 128 rows about the same (items 81 and 83), where vector's tiles fall to 0.1-0.55 unless N rows
// fill whole 32-byte sectors. INTERLEAVE (below) moves 1 to 8 rows or columns of 1-, 2- and 4-byte
// items in 16-byte words permuted in registers where the layout is 16-byte aligned: uint8 images
// to channels-last 0.25 -> 0.70-0.90 per call of a copy, and back 0.29 -> 0.68-0.97, float16
// 0.57 -> 0.87, float32 0.81-0.82 -> 0.86-0.94, int16 stereo audio to planes and back 0.56-0.58
// -> 0.93-0.97 (item 166); 5 to 8 channels (uint8, float16, float32 images, int16 audio of 8)
// 0.37-0.81 -> 0.93-0.97 to channels-last and 0.42-0.56 -> 0.89-0.95 back (item 169).
// ---------------------------------------------------------------------------------------------
// Elements of the long side in a tile of the narrow rung: TILE / n rounded down to a multiple of
// 32, at least 32. The host's plan uses the same formula (ops/transpose/rungs.py).
__device__ __forceinline__ int gk_narrow_length(int tile, int n) {
    const int length = (tile / n) & ~31;
    return length < 32 ? 32 : length;
}

// The pitch of the staged rows: length (a multiple of 32) plus k, k * odd(n) = 1 modulo 32.
__device__ __forceinline__ int gk_narrow_pitch(int length, int n) {
    const int odd = n >> (__ffs(n) - 1);
    int k = 1;
    while ((odd * k & 31) != 1) k += 2;
    return length + k;
}

// Position (outer, inner) = divmod(i, extent) of a walk that starts at i = start and steps by
// `step`: stepped with one compare (step / extent and step % extent worked out once).
struct GkNarrowWalk {
    int outer, inner;
    int step_outer, step_inner, extent;
    __device__ __forceinline__ GkNarrowWalk(int start, int step, int extent_)
        : outer(start / extent_), inner(start % extent_), step_outer(step / extent_),
          step_inner(step % extent_), extent(extent_) {}
    __device__ __forceinline__ void next() {
        inner += step_inner;
        outer += step_outer;
        if (inner >= extent) {
            inner -= extent;
            ++outer;
        }
    }
};

// WORDS (1- and 2-byte elements, layouts the host has checked): the side of the tile that is
// one contiguous run in memory, the input's or the output's rows of the long side and the
// other side's run of whole narrow rows, moves in aligned 4-byte words of W elements; shared
// memory keeps elements. A word that would pass the end of its run moves element by element.
template <typename T, int W>
union gk_narrow_word {
    unsigned bits;
    T elem[W];
};

// INTERLEAVE = N (1 to 8 rows or columns of 1-, 2- or 4-byte items, 16-byte aligned layouts the
// host has checked: ops/transpose/rungs.py, narrow_interleaves): one side is N planes of the long
// side (the input's rows with narrow rows, the output's with narrow columns), the other one run
// of the long side's N-element rows. A thread takes V = 16 / sizeof(T) elements of the long side,
// one 16-byte word of each plane and N 16-byte words of the run, and permutes them in registers;
// each thread does UNROLL such groups, their loads issued together. The staged path below moves
// one element per shared-memory access, which held uint8 images at 0.35-0.48 of a copy (item 80).
// A lane's N run words lie N * 16 bytes apart from the next lane's, so from N = 5 a store of one
// word a lane would touch 32 lines: with planes in, the run goes out through a slice of shared
// memory a warp (one padding word every 8, so the lanes' 16-byte writes meet no bank twice at
// N = 8), each store then 512 contiguous bytes. (Loads of the run the other way round, which the
// L1 keeps, need nothing.) From N = 5 a thread takes one group at a time: 76-126 registers where
// two took 114-195 (sm_90), and 1-3% faster. The host sizes the grid for GK_NARROW_UNROLL groups a
// thread, one from GK_NARROW_STAGED_RUN planes (rungs.interleave_unroll); the warp-uniform
// grid-stride loop covers the long side whatever the grid.
#define GK_NARROW_UNROLL 2
#define GK_NARROW_STAGED_RUN 5  // from this many planes: the run through shared memory, one group
template <typename T, typename Index, int N, int THREADS, int UNROLL>
__device__ __forceinline__ void gk_narrow_interleave(const T* __restrict__ in, T* __restrict__ out,
                                                     Index rows, Index cols,
                                                     Index in_batch_stride, Index in_row_stride,
                                                     Index in_col_stride, Index out_batch_stride,
                                                     Index out_row_stride) {
    static_assert(N >= 1 && N <= 8, "1 to 8 planes");
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4, "1-, 2- or 4-byte items");
    static_assert(THREADS % 32 == 0, "whole warps");
    constexpr int V = 16 / (int)sizeof(T);  // elements of the long side a group takes
    constexpr bool STAGED = N >= GK_NARROW_STAGED_RUN;
    // A warp's run words w = lane * N + c at slot w + w / 8 (STAGED only).
    constexpr int SLICE = STAGED ? 32 * N + 4 * N : 1;
    __shared__ uint4 gk_narrow_slices[STAGED ? THREADS / 32 : 1][SLICE];
    union Word {
        uint4 bits;
        T elem[V];
    };
    (void)in_col_stride;  // 1: the host's check
    in += (Index)blockIdx.z * in_batch_stride;  // signed: the stride may be negative
    out += (Index)blockIdx.z * out_batch_stride;
    const bool narrow_rows = rows <= cols;  // the staged kernel's rule
    const Index length = narrow_rows ? cols : rows;
    // Planes: element l of plane c at plane + c * plane_stride + l; the run: (l, c) at l * N + c.
    const T* const in_plane = in;
    T* const out_plane = out;
    const Index plane_stride = narrow_rows ? in_row_stride : out_row_stride;
    const Index groups = length / V;  // whole groups; the rest element by element
    const int lane = (int)threadIdx.x % 32;
    const Index step = (Index)gridDim.x * THREADS * UNROLL;
    // Lane t's group is the warp's first plus t: every lane of a warp takes the same turns.
    for (Index w0 = (Index)blockIdx.x * THREADS * UNROLL + (threadIdx.x - lane); w0 < groups;
         w0 += step) {
        const Index g0 = w0 + lane;
        Word plane[UNROLL][N], run[UNROLL][N];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const Index g = g0 + (Index)u * THREADS;
            if (g < groups) {
#pragma unroll
                for (int c = 0; c < N; ++c) {
                    if (narrow_rows) {
                        plane[u][c].bits = *reinterpret_cast<const uint4*>(
                            in_plane + (Index)c * plane_stride + g * V);
                    } else {
                        run[u][c].bits = *reinterpret_cast<const uint4*>(in + g * V * N + c * V);
                    }
                }
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const Index g = g0 + (Index)u * THREADS;
            if (g < groups) {
                // Element k of the group's run is (l, c) = (k / N, k % N): plane c's element l.
#pragma unroll
                for (int k = 0; k < N * V; ++k) {
                    if (narrow_rows) {
                        run[u][k / V].elem[k % V] = plane[u][k % N].elem[k / N];
                    } else {
                        plane[u][k % N].elem[k / N] = run[u][k / V].elem[k % V];
                    }
                }
            }
            if (STAGED && narrow_rows) {  // the warp's run words, 32 a store, in order
                uint4* const slice = gk_narrow_slices[STAGED ? threadIdx.x / 32 : 0];
                const Index first = w0 + (Index)u * THREADS;  // the warp's first group
                const Index left = groups - first;  // groups of the warp that exist, if < 32
                const int words = (left < 32 ? (int)(left > 0 ? left : 0) : 32) * N;
                if (g < groups) {
#pragma unroll
                    for (int c = 0; c < N; ++c) {
                        const int w = lane * N + c;
                        slice[w + w / 8] = run[u][c].bits;
                    }
                }
                __syncwarp();
#pragma unroll
                for (int c = 0; c < N; ++c) {
                    const int w = c * 32 + lane;
                    if (w < words) {
                        *reinterpret_cast<uint4*>(out + (first * N + w) * V) = slice[w + w / 8];
                    }
                }
                __syncwarp();  // the slice is read before the next group's words land
            } else if (g < groups) {
#pragma unroll
                for (int c = 0; c < N; ++c) {
                    if (narrow_rows) {
                        *reinterpret_cast<uint4*>(out + g * V * N + c * V) = run[u][c].bits;
                    } else {
                        *reinterpret_cast<uint4*>(out_plane + (Index)c * plane_stride + g * V) =
                            plane[u][c].bits;
                    }
                }
            }
        }
    }
    // The last length % V elements of the long side, element by element, by block 0.
    if (blockIdx.x == 0) {
        const Index tail = groups * V;
        for (Index i = threadIdx.x; i < (length - tail) * N; i += THREADS) {
            const Index l = tail + i / N;
            const int c = (int)(i % N);
            if (narrow_rows) {
                out[l * N + c] = in_plane[(Index)c * plane_stride + l];
            } else {
                out_plane[(Index)c * plane_stride + l] = in[l * N + c];
            }
        }
    }
}

template <typename T, typename Index, int THREADS, int TILE, int INTERLEAVE, bool WORDS>
__global__ void __launch_bounds__(THREADS)
transpose_narrow(const T* __restrict__ in, T* __restrict__ out, Index rows, Index cols,
                 Index in_batch_stride, Index in_row_stride, Index in_col_stride,
                 Index out_batch_stride, Index out_row_stride) {
    static_assert(TILE % 32 == 0 && TILE >= 32, "a tile of whole warps' worth of elements");
    static_assert(!WORDS || sizeof(T) <= 2, "words of several 1- or 2-byte elements");
    if constexpr (INTERLEAVE > 0) {
        gk_narrow_interleave<T, Index, INTERLEAVE, THREADS,
                             INTERLEAVE >= GK_NARROW_STAGED_RUN ? 1 : GK_NARROW_UNROLL>(
            in, out, rows, cols, in_batch_stride, in_row_stride, in_col_stride, out_batch_stride,
            out_row_stride);
        return;
    }
    constexpr int W = WORDS ? 4 / (int)sizeof(T) : 1;  // elements per word
    typedef gk_narrow_word<T, W> Word;
    extern __shared__ uint4 gk_narrow_shared[];
    T* const tile = reinterpret_cast<T*>(gk_narrow_shared);
    in += (Index)blockIdx.z * in_batch_stride;  // signed: the stride may be negative
    out += (Index)blockIdx.z * out_batch_stride;
    const bool narrow_rows = rows <= cols;  // the host's rule: the narrow side is the shorter
    const int n = (int)(narrow_rows ? rows : cols);
    const Index long_extent = narrow_rows ? cols : rows;
    const int length = gk_narrow_length(TILE, n);
    const int pitch = gk_narrow_pitch(length, n);
    // Input and output strides of the narrow and the long index.
    const Index in_narrow = narrow_rows ? in_row_stride : in_col_stride;
    const Index in_long = narrow_rows ? in_col_stride : in_row_stride;
    const Index out_narrow = narrow_rows ? 1 : out_row_stride;
    const Index out_long = narrow_rows ? out_row_stride : 1;
    const Index tiles = (long_extent + length - 1) / length;
    for (Index t = blockIdx.x; t < tiles; t += gridDim.x) {
        const Index first = t * length;
        const int here = (int)(long_extent - first < length ? long_extent - first : length);
        const int count = n * here;
        const T* const in_tile = in + first * in_long;
        T* const out_tile = out + first * out_long;
        // Read: input rows are the narrow side's (narrow rows: the long index fastest) or the
        // long side's (narrow columns: the narrow index fastest).
        if (WORDS && narrow_rows) {  // rows of `here` elements, in_long == 1
            const int row_words = (here + W - 1) / W;
            GkNarrowWalk w(threadIdx.x, THREADS, row_words);  // (narrow, word of the row)
            for (int i = threadIdx.x; i < n * row_words; i += THREADS, w.next()) {
                const T* const src = in_tile + (Index)w.outer * in_narrow + w.inner * W;
                T* const dst = tile + w.outer * pitch + w.inner * W;
                if ((w.inner + 1) * W <= here) {
                    Word word;
                    word.bits = *reinterpret_cast<const unsigned*>(src);
#pragma unroll
                    for (int k = 0; k < W; ++k) dst[k] = word.elem[k];
                } else {
                    for (int k = 0; w.inner * W + k < here; ++k) dst[k] = src[k];
                }
            }
        } else if (WORDS) {  // one run of `here` rows of n elements: in_long == n
            const int run_words = (count + W - 1) / W;
            GkNarrowWalk w(threadIdx.x * W, THREADS * W, n);  // (long, narrow) of a first element
            for (int i = threadIdx.x; i < run_words; i += THREADS, w.next()) {
                Word word;
                if ((i + 1) * W <= count) {
                    word.bits = reinterpret_cast<const unsigned*>(in_tile)[i];
                } else {
                    for (int k = 0; i * W + k < count; ++k) word.elem[k] = in_tile[i * W + k];
                }
                int p = w.outer, q = w.inner;
#pragma unroll
                for (int k = 0; k < W; ++k) {
                    if (i * W + k < count) tile[q * pitch + p] = word.elem[k];
                    if (++q == n) {
                        q = 0;
                        ++p;
                    }
                }
            }
        } else if (narrow_rows) {
            GkNarrowWalk w(threadIdx.x, THREADS, here);  // (narrow, long)
#pragma unroll 4
            for (int i = threadIdx.x; i < count; i += THREADS, w.next()) {
                tile[w.outer * pitch + w.inner] =
                    in_tile[(Index)w.outer * in_narrow + (Index)w.inner * in_long];
            }
        } else {
            GkNarrowWalk w(threadIdx.x, THREADS, n);  // (long, narrow)
#pragma unroll 4
            for (int i = threadIdx.x; i < count; i += THREADS, w.next()) {
                tile[w.inner * pitch + w.outer] =
                    in_tile[(Index)w.outer * in_long + (Index)w.inner * in_narrow];
            }
        }
        __syncthreads();
        // Write: output rows are the long side's elements for one narrow index (narrow
        // columns: the long index fastest) or the narrow side's (narrow rows: narrow fastest).
        if (WORDS && narrow_rows) {  // one run of `here` rows of n elements: out_long == n
            const int run_words = (count + W - 1) / W;
            GkNarrowWalk w(threadIdx.x * W, THREADS * W, n);  // (long, narrow) of a first element
            for (int i = threadIdx.x; i < run_words; i += THREADS, w.next()) {
                Word word;
                int p = w.outer, q = w.inner;
#pragma unroll
                for (int k = 0; k < W; ++k) {
                    word.elem[k] = i * W + k < count ? tile[q * pitch + p] : T();
                    if (++q == n) {
                        q = 0;
                        ++p;
                    }
                }
                if ((i + 1) * W <= count) {
                    reinterpret_cast<unsigned*>(out_tile)[i] = word.bits;
                } else {
                    for (int k = 0; i * W + k < count; ++k) out_tile[i * W + k] = word.elem[k];
                }
            }
        } else if (WORDS) {  // rows of `here` elements, out_long == 1
            const int row_words = (here + W - 1) / W;
            GkNarrowWalk w(threadIdx.x, THREADS, row_words);  // (narrow, word of the row)
            for (int i = threadIdx.x; i < n * row_words; i += THREADS, w.next()) {
                T* const dst = out_tile + (Index)w.outer * out_narrow + w.inner * W;
                const T* const src = tile + w.outer * pitch + w.inner * W;
                if ((w.inner + 1) * W <= here) {
                    Word word;
#pragma unroll
                    for (int k = 0; k < W; ++k) word.elem[k] = src[k];
                    *reinterpret_cast<unsigned*>(dst) = word.bits;
                } else {
                    for (int k = 0; w.inner * W + k < here; ++k) dst[k] = src[k];
                }
            }
        } else if (narrow_rows) {
            GkNarrowWalk w(threadIdx.x, THREADS, n);  // (long, narrow)
#pragma unroll 4
            for (int i = threadIdx.x; i < count; i += THREADS, w.next()) {
                out_tile[(Index)w.outer * out_long + (Index)w.inner * out_narrow] =
                    tile[w.inner * pitch + w.outer];
            }
        } else {
            GkNarrowWalk w(threadIdx.x, THREADS, here);  // (narrow, long)
#pragma unroll 4
            for (int i = threadIdx.x; i < count; i += THREADS, w.next()) {
                out_tile[(Index)w.outer * out_narrow + (Index)w.inner * out_long] =
                    tile[w.outer * pitch + w.inner];
            }
        }
        if (t + gridDim.x < tiles) __syncthreads();  // before the next refill
    }
}

// ---------------------------------------------------------------------------------------------
// Rung 8 - runs: up to RUNS_MAX (256) rows of 1-, 2- or 4-byte items that vector cannot move in
// words, such as the (255, 513 * 511) float16 matrix that permute_dims(x, (1, 2, 0)) of a
// (255, 513, 511) array becomes. The output rows have n = rows elements and are adjacent, so the
// SEGMENT columns a tile takes are one run of SEGMENT * n elements in the output. The tile is
// staged in shared memory in that output order and written as one run of aligned 16-byte words:
// each output sector is written once, whole, by one block (the word rung splits the sector where
// an output row ends between two row tiles, narrow moves one element an access). The input side
// reads each row's SEGMENT elements (128 bytes) as aligned 4-byte words, a warp a row (words
// shifted by where the row starts), and each word's elements go to their places in the run,
// stride n apart: distinct banks for odd n, two-way conflicts for n = 2 modulo 4 (multiples of
// 4 meet more; `auto` leaves them to the other rungs). The shared run starts at the output's
// address modulo 16 so its 16-byte words line up with the output's. Blocks take tile after
// tile. With ASYNC (sm_80 and newer, at most 176 rows: ops/transpose/rungs.py) each tile's rows
// are copied by cp.async, in the aligned 16-byte chunks that cover each row's segment, into a
// ring of two slots in shared memory two tiles ahead, and the words are taken from there: a
// block's next loads are in flight while it stages a tile as well as while it writes one, and
// no registers hold them. Without it the next tile's words are loaded into registers while a
// tile is written. Launch with THREADS threads, grid (min(tiles, RUNS_BLOCKS), 1, batch),
// tiles = ceil(cols / SEGMENT), and rows * SEGMENT * sizeof(T) + 16 bytes of dynamic shared
// memory, plus 2 * rows * 36 * 4 with ASYNC. Host checks: rows <= cols, rows <= MAX_ROWS, the
// input's rows contiguous (in_col_stride == 1), out_row_stride == rows. Measured on an H100
// (128 MiB matrices, per call, of a copy; benchmarks/NOTES.md, items 162 and 165): 255 rows
// uint8 0.89, float16 0.87, float32 0.86 (what auto took before runs, words_async, words and
// vector: 0.68, 0.76, 0.66); with the ring 25-161 rows 5-100% faster than without: 127 rows
// uint8 0.87 (0.73 without, narrow 0.34), float16 0.84 (0.72, words 0.71), 65 rows float32 0.80
// (0.71, narrow 0.73); permute_dims of (255, 513, 511) float16 to (1, 2, 0) 0.83-0.89 per call,
// 0.86-0.88 held since results are built after their launch (item 168; 0.76-0.82 per call
// before; words 0.74 and 0.81).
// ---------------------------------------------------------------------------------------------
// The W elements of a row segment from `start` (a 4-byte aligned address), where they lie in
// [0, here), if `active`: one 4-byte load where the word lies within the row's columns
// [0, cols) (`first` is the segment's first column), element by element at the row's two ends.
template <typename T, typename Index, int W>
__device__ __forceinline__ gk_narrow_word<T, W> gk_runs_word(bool active, const T* segment,
                                                            int start, int here, Index first,
                                                            Index cols) {
    gk_narrow_word<T, W> word;
    word.bits = 0;
    if (active && start < here) {
        if (first + start >= 0 && first + start + W <= cols) {
            word.bits = *reinterpret_cast<const unsigned*>(segment + start);
        } else {
#pragma unroll
            for (int x = 0; x < W; ++x) {
                if (start + x >= 0 && start + x < here) word.elem[x] = segment[start + x];
            }
        }
    }
    return word;
}

template <typename T, typename Index, int THREADS, int SEGMENT, int MAX_ROWS, int MIN_BLOCKS,
          bool ASYNC>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
transpose_runs(const T* __restrict__ in, T* __restrict__ out, Index rows, Index cols,
               Index in_batch_stride, Index in_row_stride, Index in_col_stride,
               Index out_batch_stride, Index out_row_stride) {
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4, "1-, 2- or 4-byte items");
    constexpr int W = 4 / (int)sizeof(T);   // elements of a 4-byte word
    constexpr int C = 16 / (int)sizeof(T);  // elements of a 16-byte word
    constexpr int WARPS = THREADS / 32;
    constexpr int ROWS_PER_WARP = (MAX_ROWS + WARPS - 1) / WARPS;
    // ASYNC: a row's window in a ring slot, the 16-byte chunks from the one that holds the
    // segment's first element: 128 bytes and up to 15 before them.
    constexpr int CHUNKS = 9;
    constexpr int PITCH = 4 * CHUNKS;  // words of a row in a ring slot
    // Elements before and after a tile's segments that its reads may touch: an interior tile's
    // reads stay within each row.
    constexpr int MARGIN = ASYNC ? C : W;
    static_assert(SEGMENT == 32 * W, "a segment is one 4-byte word a lane");
    static_assert(MAX_ROWS <= THREADS, "a thread a row for the words past the 32nd");
    typedef gk_narrow_word<T, W> Word;
    extern __shared__ uint4 gk_runs_shared[];
    (void)in_col_stride;   // 1: the host's check
    (void)out_row_stride;  // rows: the host's check
    in += (Index)blockIdx.z * in_batch_stride;  // signed: the stride may be negative
    out += (Index)blockIdx.z * out_batch_stride;
    const int n = (int)rows;
    // The run's 16-byte words line up with the output's: a tile's run starts at out + first * n,
    // and first * n * sizeof(T) = t * 128 * n bytes, so every tile of a matrix has one shift.
    const int shift = (int)((reinterpret_cast<unsigned long long>(out) & 15) / sizeof(T));
    T* const run = reinterpret_cast<T*>(gk_runs_shared) + shift;
    // ASYNC: a ring of two slots after the run (n * SEGMENT * sizeof(T) + 16 bytes, a multiple
    // of 16), each a tile's rows as copied, row i's window at slot + i * PITCH.
    unsigned* const ring = reinterpret_cast<unsigned*>(gk_runs_shared) + n * (SEGMENT / W) + 4;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const bool row_thread = (int)threadIdx.x < n;  // takes word 32 of row threadIdx.x
    // m(i): elements of row i's first word before the tile's segment, from the address of the
    // tile's first element in row 0 and the row stride, both modulo W (W is a power of two).
    const int stride_mod = (int)(in_row_stride & (W - 1));
    const Index tiles = (cols + SEGMENT - 1) / SEGMENT;
    // Words of a tile inside the matrix (every word the tile reads lies within its row), loaded
    // a tile ahead (ASYNC: two): warp w's rows w, w + WARPS, ..., lane k's word k of each, which
    // holds segment elements [k W - m, k W - m + W); and word 32 of row threadIdx.x, which holds
    // the segment's last m elements.
    Word words[ROWS_PER_WARP], extra;
    auto interior = [&](Index t) {
        return t * SEGMENT >= MARGIN && t * SEGMENT + SEGMENT + MARGIN <= cols;
    };
    auto m0_of = [&](Index t) {
        return (int)((reinterpret_cast<unsigned long long>(in + t * SEGMENT) / sizeof(T)) &
                     (W - 1));
    };
    auto load = [&](Index t) {
        const T* const segment0 = in + t * SEGMENT;
        const int m0 = m0_of(t);
#pragma unroll
        for (int r = 0; r < ROWS_PER_WARP; ++r) {
            const int i = warp + r * WARPS;
            const int m = (m0 + i * stride_mod) & (W - 1);
            if (i < n) {
                words[r].bits = *reinterpret_cast<const unsigned*>(
                    segment0 + (Index)i * in_row_stride + (lane * W - m));
            }
        }
        const int m = (m0 + (int)threadIdx.x * stride_mod) & (W - 1);
        if (row_thread && m > 0) {
            extra.bits = *reinterpret_cast<const unsigned*>(
                segment0 + (Index)threadIdx.x * in_row_stride + (32 * W - m));
        }
    };
    // ASYNC: tile t's row windows into slot `parity` of the ring by 16-byte cp.async copies
    // (through the L2 alone, each whole 128-byte line fetched: the neighbouring tiles, which
    // other blocks take at the same time, read the rest of the lines a window cuts), if t is an
    // interior tile; one group of copies a call (empty for other tiles), so gk_copy_wait<1>
    // finds the older one.
    auto load_async = [&](Index t, int parity) {
        if (t < tiles && interior(t)) {
            const T* const segment0 = in + t * SEGMENT;
            unsigned* const slot = ring + parity * n * PITCH;
            for (int c = threadIdx.x; c < n * CHUNKS; c += THREADS) {
                const int i = c / CHUNKS, k = c - i * CHUNKS;
                const unsigned long long row = reinterpret_cast<unsigned long long>(
                    segment0 + (Index)i * in_row_stride);
                gk_copy16_async_line(gk_shared_address(slot + i * PITCH + 4 * k),
                                     reinterpret_cast<const void*>((row & ~15ull) + 16 * k));
            }
        }
        gk_copy_commit();
    };
    // ASYNC: where lane 0's word of row i starts in its window, in words: the window starts
    // (segment address mod 16) bytes before the segment, the word m elements before it.
    auto window_word = [&](const T* segment0, int i, int m) {
        const int d = (int)(reinterpret_cast<unsigned long long>(
                                segment0 + (Index)i * in_row_stride) & 15);
        return (d - m * (int)sizeof(T)) >> 2;
    };
    Index t = blockIdx.x;
    bool loaded = false;
    if constexpr (ASYNC) {
        load_async(t, 0);
        load_async(t + gridDim.x, 1);
    } else {
        loaded = t < tiles && interior(t);
        if (loaded) load(t);
    }
    for (int round = 0; t < tiles; t += gridDim.x, ++round) {
        const Index first = t * SEGMENT;
        const int here = (int)(cols - first < SEGMENT ? cols - first : SEGMENT);
        const T* const segment0 = in + first;  // row 0's segment
        const int m0 = m0_of(t);
        const int parity = round & 1;
        // Into the run: element j of row i's segment goes to run[j * n + i].
        auto place = [&](Word word, int i, int m) {
#pragma unroll
            for (int x = 0; x < W; ++x) {
                const int j = lane * W - m + x;  // < SEGMENT: at most 32 W - 1 - m
                if (j >= 0) run[j * n + i] = word.elem[x];
            }
        };
        if constexpr (ASYNC) {
            gk_copy_wait<1>();  // this tile's copies (the next tile's may still be in flight)
            __syncthreads();    // every thread's copies seen; the last tile's run written out
            loaded = interior(t);
            if (loaded) {  // each word from the ring to the run
                const unsigned* const slot = ring + parity * n * PITCH;
#pragma unroll
                for (int r = 0; r < ROWS_PER_WARP; ++r) {
                    const int i = warp + r * WARPS;
                    const int m = (m0 + i * stride_mod) & (W - 1);
                    if (i < n) {
                        Word word;
                        word.bits = slot[i * PITCH + window_word(segment0, i, m) + lane];
                        place(word, i, m);
                    }
                }
                const int m = (m0 + (int)threadIdx.x * stride_mod) & (W - 1);
                if (row_thread && m > 0) {
                    extra.bits = slot[threadIdx.x * PITCH +
                                      window_word(segment0, threadIdx.x, m) + 32];
                }
            }
        } else if (loaded) {
#pragma unroll
            for (int r = 0; r < ROWS_PER_WARP; ++r) {
                const int i = warp + r * WARPS;
                const int m = (m0 + i * stride_mod) & (W - 1);
                if (i < n) place(words[r], i, m);
            }
        }
        if (!loaded) {  // the first and last tiles: row by row, element by element at its ends
#pragma unroll 1
            for (int i = warp; i < n; i += WARPS) {
                const int m = (m0 + i * stride_mod) & (W - 1);
                const Word word = gk_runs_word<T, Index, W>(
                    true, segment0 + (Index)i * in_row_stride, lane * W - m, here, first, cols);
#pragma unroll
                for (int x = 0; x < W; ++x) {
                    const int j = lane * W - m + x;
                    if (j >= 0 && j < here) run[j * n + i] = word.elem[x];
                }
            }
            const int m = (m0 + (int)threadIdx.x * stride_mod) & (W - 1);
            extra = gk_runs_word<T, Index, W>(row_thread,
                                              segment0 + (Index)threadIdx.x * in_row_stride,
                                              32 * W - m, here, first, cols);
        }
        if (row_thread) {
            const int m = (m0 + (int)threadIdx.x * stride_mod) & (W - 1);
#pragma unroll
            for (int x = 0; x < W; ++x) {
                const int j = 32 * W - m + x;
                if (j < here) run[j * n + threadIdx.x] = extra.elem[x];
            }
        }
        __syncthreads();
        // The next tiles' loads are in flight while this one is written (ASYNC: into the slot
        // this tile's words have just left).
        if constexpr (ASYNC) {
            load_async(t + 2 * (Index)gridDim.x, parity);
        } else {
            loaded = t + gridDim.x < tiles && interior(t + gridDim.x);
            if (loaded) load(t + gridDim.x);
        }
        // Store: the run of here * n elements at out + first * n, in 16-byte words from its first
        // 16-byte boundary q0; the elements before q0 and after the last whole word one by one.
        T* const out_run = out + first * (Index)n;
        const int count = here * n;
        const int q0 = (C - shift) % C;
        const int chunks = count > q0 ? (count - q0) / C : 0;
        const int head = q0 < count ? q0 : count;
        const int tail = count > q0 ? q0 + chunks * C : count;
        for (int c = threadIdx.x; c < chunks; c += THREADS) {
            *reinterpret_cast<uint4*>(out_run + q0 + c * C) =
                *reinterpret_cast<const uint4*>(run + q0 + c * C);
        }
        for (int q = threadIdx.x; q < head + (count - tail); q += THREADS) {
            const int at = q < head ? q : tail + (q - head);
            out_run[at] = run[at];
        }
        if constexpr (!ASYNC) __syncthreads();  // before the next refill (ASYNC: at the top)
    }
    if constexpr (ASYNC) gk_copy_wait<0>();  // no copy outlives the block
}

// ---------------------------------------------------------------------------------------------
// Reference copies for the benchmark (not rungs): the row and column copies of the bandwidth
// study, launched in its 16 x 16 blocks. copy_row reads and writes along rows, copy_col along
// columns. They show what one element per thread costs in either order; the naive rungs, whose
// narrower blocks fill whole sectors, run faster than both. Contiguous rows x cols matrices only.
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
