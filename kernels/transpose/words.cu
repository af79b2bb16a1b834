// words.cu - rungs 5 and 6 of the transpose ladder: 1- and 2-byte elements whose rows are not whole
// 4-byte words, moved in aligned words all the same. Same signature, grid mapping and carrier
// types as the rungs in transpose.cu:
//
//   transpose_words<T, Index, THREADS, TR, TC, LOAD_GROUPS, MIN_BLOCKS>(in, out, rows, cols,
//       in_batch_stride, in_row_stride, in_col_stride, out_batch_stride, out_row_stride)
//   transpose_words_async<T, Index, THREADS, TR, TC, SHARED_BYTES>(...the same...)
//
// TR x TC is the tile of input rows x columns (256 x 128 bytes), THREADS the block, SHARED_BYTES
// the dynamic shared memory the host passes: all set in one place on the host
// (ops/transpose/rungs.py) and checked here by static_assert.
#include "../common.cuh"

// ---------------------------------------------------------------------------------------------
// Rung 5 - words: 4-byte words with per-row shifts, for 1- and 2-byte elements whose rows are not
// whole words (8191 x 8193 int8: each input row and each output row starts at its own offset
// within a 4-byte word). transpose_vector then falls back to V = 1, one element per access,
// which caps these at 0.45 (int8) and 0.72 (float16) of a copy on an H100: the load/store
// units, not DRAM, set the pace. Here every interior global access is an aligned 4-byte word
// again, whatever the offsets, and shared memory is read and written in whole words too:
//  * Load: a warp reads one input row's 128-byte stretch of the tile as the 33 aligned words
//    that cover it (lane i word i, lane 31 also word 32) and funnel-shifts each pair of
//    neighbouring words (__shfl_down) by the row's offset: lane i then holds bytes
//    [4i, 4i + 4) of the stretch, W = 4 / sizeof(T) elements of W columns. A warp loads W
//    consecutive rows at a time, LOAD_GROUPS such groups before using any, so each lane ends
//    with a W x W block of elements and transposes it in registers (byte or half-word
//    permutes, 2 per word for bytes): one word per column, holding W consecutive rows.
//  * Shared tile, column-major: the staged rows of a tile column are a word string of PITCH
//    words, rows W q to W q + W - 1 in word q. Lane i's column n (input column W i + n) is
//    tile column 32 n + i, so the 32 words a warp stores at once are PITCH words apart: with
//    PITCH odd, 32 distinct banks.
//  * Store: output row j's segment starts on a 32-byte sector boundary (SKEW, as above: the
//    tile stages SECTOR - 1 extra input rows), f elements into the staged rows. Lane k reads
//    words k and k + 32 of column j's string from the word holding row f on (consecutive
//    words: no bank conflicts), and a funnel shift with the next lane's words by f's offset
//    within a word gives output words k and k + 32, aligned and written whole.
//  * Row tiles: tile t stages rows [TR t, TR t + TR + SECTOR / E), and none starts before row
//    0: the first tile also stores the f elements before each output row's first segment, and
//    the last tile, which reaches the last row, the ones after its segments. That is
//    max(1, ceil((rows - SECTOR / E) / TR)) tiles. (An extra, nearly empty row of tiles before
//    row 0 held those f elements before: 3 row tiles for 255 float16 rows instead of 2.)
//  * Side by side: where an output row ends inside a 32-byte sector, the last row tile writes
//    the sector's first part and the first row tile its second. With row tiles along y, the
//    two parts were written half a launch apart, the L2 had written the first back by then,
//    and the DRAM got both as partial sectors (a read-modify-write each); with few rows (255:
//    one sector in 16) that cost a quarter. So with 2 to 16 row tiles the host launches them
//    side by side along x, a column tile's row tiles next to each other (the kernel tells by
//    a grid of more blocks along x than column tiles), and the parts meet in the L2.
// The tile is 128 bytes of input columns by 256 bytes of output rows (256 x 128 int8 or
// 128 x 64 float16, plus 31 or 15 staged rows). Edges: words past a row's last column are
// assembled from element loads, and output words not wholly inside the output row from element
// stores; tiles wholly inside the matrix take a path without those checks, with all
// LOAD_GROUPS * W row loads of a batch issued back to back, each asking the L2 for its whole
// 128-byte line (gk_load_line: the other bytes of a row's first and last lines are the
// neighbouring column tiles'; float16 8191 x 8193 +1.5%, item 35). MIN_BLOCKS bounds registers so
// that enough blocks fit on an SM (int8: 4, float16: 8). Row and output addresses step from
// one row to the next instead of being recomputed. What holds int8 below float16 is the wait
// between a tile's load and store phases at 4 blocks per SM, not the instructions it issues
// (benchmarks/NOTES.md, item 31).
// Needs in_col_stride == 1 (the host checks) and any row and batch strides. Launch with
// 256 threads: grid (ceil(cols / TC), row tiles (grid-stride), batch), or (ceil(cols / TC) *
// row tiles, 1, batch) side by side.
// Measured on an H100 (8191 x 8193, ratio to a device copy): int8 0.83 and float16 0.90,
// against 0.45 and 0.72 with V = 1 (benchmarks/NOTES.md, items 30 and 31); float16 0.92 with
// whole-line loads (item 35). Tiles followed by less than a word of their rows take the checked
// path (item 42): int8 0.77, float16 0.91 (2026-11-23).
// Without the row of tiles before row 0 (item 84): (255, 513, 511) float16 to axes (1, 2, 0)
// 0.58 -> 0.62 per call. Side by side (item 104), held: (255, 262143) float16 0.63 -> 0.82,
// (511, 131071) 0.68 -> 0.86, (1023, 65535) 0.75 -> 0.87; 2047 rows and more unchanged.
// ---------------------------------------------------------------------------------------------
// Aligned word i of a row stretch that starts `shift` bytes into a word: the stretch's bytes
// [4i - shift, 4i - shift + 4), of which the first `valid` exist in this tile. Read as one word
// if all it holds is in the tile, or (not at the right edge) in the row's next columns; a tail
// word at the row's end is assembled from element reads, so no read passes the array's end.
template <typename T>
__device__ __forceinline__ unsigned gk_shifted_word(const unsigned char* start, int shift, int i,
                                                    int valid, bool right_edge) {
    const int first = 4 * i - shift;
    if (first >= valid) return 0u;
    if (first + 3 < valid || !right_edge) {
        return reinterpret_cast<const unsigned*>(start - shift)[i];
    }
    unsigned value = 0;
    for (int b = first < 0 ? -first : 0; b < 4 && first + b < valid; b += (int)sizeof(T)) {
        const T element = *reinterpret_cast<const T*>(start + first + b);
        value |= (unsigned)element << (8 * b);
    }
    return value;
}

// Word `word`, W elements of type T, to out_row[out_col, out_col + W), of which only the
// elements inside [0, rows) are written: one word store when all are, element stores otherwise.
template <typename T, typename Index>
__device__ __forceinline__ void gk_store_word_clipped(T* out_row, Index out_col, Index rows,
                                                      unsigned word) {
    constexpr int E = sizeof(T), W = 4 / E;
    if (out_col >= 0 && out_col + W <= rows) {
        *reinterpret_cast<unsigned*>(out_row + out_col) = word;
        return;
    }
#pragma unroll
    for (int m = 0; m < W; ++m) {
        if (out_col + m >= 0 && out_col + m < rows) out_row[out_col + m] = (T)(word >> (8 * E * m));
    }
}

// The W x W block whose rows are the words rows[0..W-1], transposed: element m of columns[n] is
// element n of rows[m]. Bytes take 8 permutes for 4 words (rows interleaved in pairs, then the
// pairs joined), half-words 2 for 2.
template <int W>
__device__ __forceinline__ void gk_block_transpose(const unsigned (&rows)[W],
                                                   unsigned (&columns)[W]) {
    if constexpr (W == 4) {
        // low01: bytes 0 and 1 of rows 0 and 1, interleaved; high01: bytes 2 and 3.
        const unsigned low01 = __byte_perm(rows[0], rows[1], 0x5140u);
        const unsigned high01 = __byte_perm(rows[0], rows[1], 0x7362u);
        const unsigned low23 = __byte_perm(rows[2], rows[3], 0x5140u);
        const unsigned high23 = __byte_perm(rows[2], rows[3], 0x7362u);
        columns[0] = __byte_perm(low01, low23, 0x5410u);
        columns[1] = __byte_perm(low01, low23, 0x7632u);
        columns[2] = __byte_perm(high01, high23, 0x5410u);
        columns[3] = __byte_perm(high01, high23, 0x7632u);
    } else {
        columns[0] = __byte_perm(rows[0], rows[1], 0x5410u);
        columns[1] = __byte_perm(rows[0], rows[1], 0x7632u);
    }
}

// Blocks of 256 threads an SM holds at most: MIN_BLOCKS is capped by it, since a bound past it
// is out of range for ptxas (2048 threads per SM on sm_80, sm_90 and sm_100, 1024 on sm_75,
// 1536 on the others).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 750
#define GK_MAX_BLOCKS_OF_256 4
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ != 800 && __CUDA_ARCH__ != 900 && __CUDA_ARCH__ != 1000
#define GK_MAX_BLOCKS_OF_256 6
#else
#define GK_MAX_BLOCKS_OF_256 8
#endif

// The word rungs' tiles and grid (the host's _word_grid). Row tile t stages input rows
// [t TR, t TR + STAGED) and the last reaches the last row: row_tiles of them. A block per column
// tile along x and the row tiles along y, or (a grid of more blocks along x than column tiles)
// the row tiles of each column tile side by side along x. This block's column tile, and its
// steps over the row tiles: first_step, first_step + step_stride, ... below row_tiles.
template <typename Index>
struct GkWordGrid {
    Index row_tiles, col_tile, first_step, step_stride;
    __device__ __forceinline__ GkWordGrid(Index rows, Index cols, int TR, int TC, int STAGED) {
        row_tiles = rows > STAGED - TR ? (rows - (STAGED - TR) + TR - 1) / TR : 1;
        const Index col_tiles = cols / TC + (cols % TC != 0);
        const bool side_by_side = (Index)gridDim.x > col_tiles;
        col_tile = side_by_side ? (Index)blockIdx.x / row_tiles : (Index)blockIdx.x;
        first_step = side_by_side ? (Index)blockIdx.x % row_tiles : (Index)blockIdx.y;
        step_stride = side_by_side ? row_tiles : (Index)gridDim.y;
    }
};

// The tiles of transpose_words and transpose_words_async: 128 bytes of input columns
// by 256 bytes of output rows, with SECTOR (32) bytes of extra rows, in words of W elements.
template <typename T>
struct GkWordTile {
    static_assert(sizeof(T) == 1 || sizeof(T) == 2, "1- and 2-byte elements");
    enum : int {
        E = sizeof(T),         // bytes per element
        W = 4 / E,             // elements per word
        TC = 128 / E,          // input columns per tile (128 bytes)
        TR = 256 / E,          // input rows per tile (256 bytes of an output row)
        WORDS = (256 + 32) / 4 // words of a staged column: TR + SECTOR rows
    };
};

template <typename T, typename Index, int THREADS, int TR, int TC, int LOAD_GROUPS, int MIN_BLOCKS>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS < GK_MAX_BLOCKS_OF_256 ? MIN_BLOCKS
                                                                             : GK_MAX_BLOCKS_OF_256)
transpose_words(const T* __restrict__ in, T* __restrict__ out, Index rows, Index cols,
                Index in_batch_stride, Index in_row_stride, Index in_col_stride,
                Index out_batch_stride, Index out_row_stride) {
    using Tile = GkWordTile<T>;
    static_assert(TR == Tile::TR && TC == Tile::TC, "tiles of 256 x 128 bytes (rows x columns)");
    static_assert(THREADS == 256, "8 warps; MIN_BLOCKS counts blocks of 256 threads");
    constexpr int E = Tile::E, W = Tile::W, WORDS = Tile::WORDS;
    constexpr int PITCH = WORDS | 1;         // odd: see the bank note above
    constexpr int WARPS = THREADS / 32;
    constexpr bool EVEN = WORDS % (WARPS * LOAD_GROUPS) == 0;  // every batch of groups is whole
    __shared__ unsigned tile[TC * PITCH];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

    in += (Index)blockIdx.z * in_batch_stride;  // signed: the stride may be negative
    out += (Index)blockIdx.z * out_batch_stride;
    constexpr int STAGED = WORDS * W;
    const GkWordGrid<Index> grid(rows, cols, TR, TC, STAGED);
    const Index row_tiles = grid.row_tiles;
    const Index c0 = grid.col_tile * TC;
    const int ncols = (int)(cols - c0 < TC ? cols - c0 : TC);
    const int nbytes = ncols * E;  // bytes of an input row inside this tile
    // Whole words may reach up to 3 bytes past the tile's columns: only where a word of the row
    // follows (else the last row's words could pass the array's end).
    const bool right_edge = ncols < TC || (cols - c0 - TC) * E < 4;
    const long long row_bytes = (long long)in_row_stride * E;  // signed
    unsigned* const lane_column = tile + lane * PITCH;  // + n * 32 * PITCH: tile column 32 n + lane
    for (Index tile_row = grid.first_step; tile_row < row_tiles; tile_row += grid.step_stride) {
        const Index r0 = tile_row * TR;  // first staged input row
        const bool first_tile = tile_row == 0, last_tile = tile_row == row_tiles - 1;
        const bool rows_inside = !right_edge && r0 + STAGED <= rows;    // loads without checks
        const bool interior = rows_inside && !first_tile && !last_tile;  // stores without checks
        // Load: warp w stages row groups w, w + 8, ...: rows W g to W g + W - 1 of group g.
        for (int g_first = warp; g_first < WORDS; g_first += WARPS * LOAD_GROUPS) {
            unsigned low[LOAD_GROUPS][W], high[LOAD_GROUPS][W];  // word lane, and word 32
            unsigned shift[LOAD_GROUPS][W];  // bytes from a row stretch's start back to a word's
            if (rows_inside) {  // every row inside the matrix and every word whole: no checks
#pragma unroll
                for (int u = 0; u < LOAD_GROUPS; ++u) {
                    // Byte 4 * lane of the group's first row stretch; the next rows are row_bytes
                    // on. Its word, rounded down, is the row's aligned word `lane`.
                    const Index first_row = r0 + (Index)(g_first + u * WARPS) * W;
                    u64 address =
                        reinterpret_cast<u64>(in + first_row * in_row_stride + c0) + 4 * lane;
#pragma unroll
                    for (int m = 0; m < W; ++m, address += row_bytes) {
                        shift[u][m] = (unsigned)address & 3u;
                        const unsigned* word = reinterpret_cast<const unsigned*>(address & ~3ull);
                        low[u][m] = gk_load_line(word);
                        high[u][m] = (lane == 31 && shift[u][m]) ? word[1] : 0u;
                    }
                }
            } else {
#pragma unroll
                for (int u = 0; u < LOAD_GROUPS; ++u) {
#pragma unroll
                    for (int m = 0; m < W; ++m) {
                        const int r = (g_first + u * WARPS) * W + m;
                        const Index row = r0 + r;
                        low[u][m] = high[u][m] = 0u;
                        shift[u][m] = 0u;
                        if ((EVEN || r < WORDS * W) && row >= 0 && row < rows) {  // uniform
                            const unsigned char* start = reinterpret_cast<const unsigned char*>(
                                in + row * in_row_stride + c0);
                            shift[u][m] = (unsigned)(reinterpret_cast<u64>(start) & 3);
                            const int offset = (int)shift[u][m];
                            low[u][m] = gk_shifted_word<T>(start, offset, lane, nbytes, right_edge);
                            if (lane == 31 && shift[u][m]) {
                                high[u][m] =
                                    gk_shifted_word<T>(start, offset, 32, nbytes, right_edge);
                            }
                        }
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < LOAD_GROUPS; ++u) {
                const int g = g_first + u * WARPS;
                if (!EVEN && g >= WORDS) break;  // uniform over the warp
                // block[m]: bytes [4 lane, 4 lane + 4) of row W g + m; columns[n]: its column n
                unsigned block[W], columns[W];
#pragma unroll
                for (int m = 0; m < W; ++m) {
                    const unsigned next = __shfl_down_sync(0xffffffffu, low[u][m], 1);
                    block[m] = __funnelshift_r(low[u][m], lane == 31 ? high[u][m] : next,
                                               8 * shift[u][m]);
                }
                gk_block_transpose<W>(block, columns);
#pragma unroll
                for (int n = 0; n < W; ++n) lane_column[n * 32 * PITCH + g] = columns[n];
            }
        }
        __syncthreads();
        // Store: warp w writes output rows (input columns of the tile) jl = w, w + 8, ...: tile
        // column (jl % W) * 32 + jl / W, whose first is `column`. Output word k of the row's
        // segment holds staged rows f + W k to f + W k + W - 1: bytes [E f + 4 k, E f + 4 k + 4)
        // of the column's string.
        T* out_row = out + (c0 + warp) * out_row_stride;
        const unsigned* column = tile + ((warp % W) * 32 + warp / W) * PITCH;
        const long long out_step = (long long)WARPS * out_row_stride;
        for (int jl = warp; jl < ncols;
             jl += WARPS, out_row += out_step, column += (WARPS / W) * PITCH) {
            T* segment = out_row + r0;  // where staged row 0 would go
            const int f = (int)(((0ull - reinterpret_cast<u64>(segment)) & 31) / E);
            const int bits = 8 * E * (f % W);  // f's offset within its word, in bits
            const unsigned* string = column + f / W;
            const unsigned first = string[lane], second = string[32 + lane];
            const unsigned after = (lane == 31 && bits) ? string[64] : 0u;
            const unsigned first_next = __shfl_sync(0xffffffffu, first, (lane + 1) & 31);
            const unsigned second_next = __shfl_sync(0xffffffffu, second, (lane + 1) & 31);
            const unsigned words[2] = {
                __funnelshift_r(first, lane < 31 ? first_next : second_next, bits),
                __funnelshift_r(second, lane < 31 ? second_next : after, bits)};
            if (interior) {  // the segment's 64 words all inside the output row
                unsigned* aligned = reinterpret_cast<unsigned*>(segment + f) + lane;
                aligned[0] = words[0];
                aligned[32] = words[1];
                continue;
            }
#pragma unroll
            for (int h = 0; h < 2; ++h) {  // element 0 of words[h] is input row r0 + f + W k
                gk_store_word_clipped(out_row, r0 + f + W * (lane + 32 * h), rows, words[h]);
            }
            // Outside the segment, fewer than SECTOR bytes each: rows [0, f) in the first tile,
            // rows from r0 + f + TR in the last. Lane k stores the k-th, from the column's
            // string (staged row q in word q / W).
            if (first_tile && lane < f && lane < rows) {
                out_row[lane] = (T)(column[lane / W] >> (8 * E * (lane % W)));
            }
            const int past = f + TR + lane;  // staged row
            if (last_tile && past < STAGED && r0 + past < rows) {
                out_row[r0 + past] = (T)(column[past / W] >> (8 * E * (past % W)));
            }
        }
        if (tile_row + grid.step_stride < row_tiles) __syncthreads();  // before the next refill
    }
}

// ---------------------------------------------------------------------------------------------
// Rung 6 - words_async: rung 5 with the rows copied to shared memory asynchronously, for 1-byte
// elements on sm_80 and newer. The same tiles and column-major shared tile, but the input rows
// reach shared memory by asynchronous copies (cp.async) of the aligned 16-byte chunks that
// cover them, and 16 warps, not 8, transpose and store them. transpose_words waits on its own
// row loads with 4 blocks of 8 warps per SM and spends about 40 instructions per input word;
// here a thread issues a copy per 16 bytes and goes on, and the byte shifts happen in shared
// memory.
//  * Stage: row r of the tile (input row r0 + r, bytes [c0, c0 + 128)) starts s_r = its address
//    mod 16 bytes into a 16-byte chunk; its 9 chunks from that one go to raw row r (36 words).
//    Thread t copies chunk t % 9 of rows t / 9, t / 9 + 56, ... Rows outside the matrix are
//    zeros. A chunk that passes the row's end in the tile is still copied whole (the bytes
//    past it fill tile columns that are never stored) unless it would pass the array's last
//    byte; such a chunk, in the last row in memory only, is read byte by byte. (Reading every
//    short chunk byte by byte cost 4% at 8191 x 8193 and 12% at 4095 x 4097; the copy's own
//    zero-fill still reads 16 bytes, as compute-sanitizer's memcheck reports.) A chunk that
//    only holds bytes past the tile (when s_r = 0) is skipped. The copies go out in two
//    groups of rows (PARTS): the first 160 rows are transposed while the other 128 are on
//    their way (+1% to +5% over one group). Each copy asks the L2 for its whole 128-byte line
//    (.L2::128B): a row's stretch covers parts of two or three lines, whose other bytes the
//    neighbouring column tiles copy soon after (8191 x 8193: +3.5%; benchmarks/NOTES.md, item 35).
//  * Transform: lane i of a warp reads words s_r / 4 + i and + i + 1 of raw row r and
//    funnel-shifts them by s_r mod 4 bytes: bytes [4 i, 4 i + 4) of the row's stretch, the
//    word that transpose_words assembles from global loads and a shuffle. 4 rows
//    make a 4 x 4 block, transposed and stored to the column-major tile as there. The tile is
//    kept in two halves (below): the first part's rows (tile words 0 to 39 of each column)
//    go to `low`, the second part's (words 40 to 71) to `high`, and words 32 to 39 are then
//    copied from `low` to `high`.
//  * Store: as in transpose_words, with the word after a lane's read from shared
//    memory instead of a shuffle, and (in tiles wholly inside the matrix) two output rows in
//    flight per warp.
//  * Row tiles: as in transpose_words, tile t stages rows [256 t, 256 t + 288), the first and
//    the last also storing the elements outside the segments: ceil((rows - 32) / 256) tiles
//    (8193 x 8192: 32, against 34 with a tile before row 0, as transpose_words had until item
//    84). The two edge tiles of a column run first, so that the grid does not end on them
//    (8193 x 8192: +4%, 8191 x 8193: +1.5%; item 35). With 2 to 16 row tiles they run side by
//    side, as in transpose_words (item 104, held: (511, 131071) int8 0.69 -> 0.79, (1023,
//    65535) 0.75 -> 0.87, (2047, 32767) 0.85 -> 0.89).
// Shared memory: 288 raw rows of 144 bytes (41472 bytes), then `low`, 128 columns of 41 words
// (20992). `high`, the same size, lies over the first part's raw rows, which are dead once
// the first part is transformed: 62464 bytes per block, so three blocks of 512 threads fit
// in an H100's 228 KiB per SM, where one 128 x 73-word tile after the raw rows (78848 bytes)
// let two fit (8191 x 8193: 0.879 against 0.870; 8193 x 8192: 0.85 against 0.83).
// A store reads words k and k + 1 (k < 39) and k + 32 and k + 33 of a column: the first pair
// from `low`, the second from `high`. A block does one tile: a block that loops over tiles and
// copies the next one while storing this one ran slower (3% to 18% at 8191 x 8193, item 35,
// with two blocks per SM for the two raw buffers). The copies need sm_80 (compiled for sm_75
// they trap): the rung needs compute capability 8.0, and `auto` takes rung 5 below that.
// Needs in_col_stride == 1 (the host checks) and any row and batch strides. Launch with 512
// threads, SHARED_BYTES of dynamic shared memory, grid (ceil(cols / 128),
// max(1, ceil((rows - 32) / 256)) (grid-stride), batch), or side by side as transpose_words'.
// Measured on an H100 through `bench transpose` (ratio to a device copy; benchmarks/NOTES.md,
// items 32, 33 and 35): 8191 x 8193 0.92, 8193 x 8192 0.88, 4095 x 4097 0.80, 16385 x 16383
// 0.88; transpose_words had 0.83, 0.83, 0.58 and 0.85 before item 35. For 2-byte
// elements it was slower (0.88 against 0.90 in raw launches, before item 35), so
// transpose_words stays their kernel (the rung takes 1-byte elements only).
// ---------------------------------------------------------------------------------------------
// The first `bytes` (0 to 15) bytes at `src`, zero-extended to 16, stored to `dst` at once: a
// chunk that a 16-byte read would take past the row's end, and perhaps past the array's.
__device__ __forceinline__ void gk_copy_chunk_part(void* dst, const unsigned char* src, int bytes) {
    unsigned words[4] = {0u, 0u, 0u, 0u};
#pragma unroll
    for (int b = 0; b < 16; ++b) {
        if (b < bytes) words[b / 4] |= (unsigned)src[b] << (8 * (b % 4));
    }
    *reinterpret_cast<uint4*>(dst) = make_uint4(words[0], words[1], words[2], words[3]);
}

// Registers for three blocks per SM (40 each: no spills). sm_75 runs at most 1024 threads per
// SM, and the rung does not run there (`auto` takes transpose_words).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define GK_WORDS_ASYNC_MIN_BLOCKS 1
#else
#define GK_WORDS_ASYNC_MIN_BLOCKS 3
#endif
template <typename T, typename Index, int THREADS, int TR, int TC, int SHARED_BYTES>
__global__ void __launch_bounds__(THREADS, GK_WORDS_ASYNC_MIN_BLOCKS)
transpose_words_async(const T* __restrict__ in, T* __restrict__ out, Index rows, Index cols,
                      Index in_batch_stride, Index in_row_stride, Index in_col_stride,
                      Index out_batch_stride, Index out_row_stride) {
    using Tile = GkWordTile<T>;
    static_assert(TR == Tile::TR && TC == Tile::TC, "tiles of 256 x 128 bytes (rows x columns)");
    static_assert(THREADS == 512, "16 warps; GK_WORDS_ASYNC_MIN_BLOCKS is set for 512 threads");
    constexpr int E = Tile::E, W = Tile::W, WORDS = Tile::WORDS;
    constexpr int STAGED = WORDS * W;        // staged input rows
    constexpr int CHUNKS = 9;                // 16-byte chunks per raw row: 128 bytes + s_r
    constexpr int RAW_PITCH = 4 * CHUNKS;    // words
    constexpr int WARPS = THREADS / 32;
    constexpr int ROW_STEP = THREADS / CHUNKS;  // rows between a thread's copies
    constexpr int PARTS = 2;                    // groups of copies, waited for one by one
    constexpr int FIRST_WORDS = 40;             // tile words (groups of W rows) of the first part
    // The tile in two halves: words [0, 40) of each column in `low`, [32, 72) in `high`, so
    // that a store's first two words come from `low` and its last two from `high`.
    constexpr int HIGH_FIRST = 32, HALF_WORDS = 40;
    constexpr int HALF_PITCH = HALF_WORDS | 1;  // odd: lanes storing a column hit distinct banks
    static_assert(TC % (2 * WARPS) == 0, "whole batches of rows and columns");
    static_assert(HIGH_FIRST + HALF_WORDS == WORDS && FIRST_WORDS == HALF_WORDS, "halves");
    static_assert(TC * HALF_PITCH <= FIRST_WORDS * W * RAW_PITCH, "high fits in part 1's rows");
    static_assert(SHARED_BYTES == 4 * (STAGED * RAW_PITCH + TC * HALF_PITCH),
                  "the host's dynamic shared memory: raw rows, then `low`");
    extern __shared__ uint4 gk_words_async_shared[];
    unsigned* const raw = reinterpret_cast<unsigned*>(gk_words_async_shared);
    unsigned* const low = raw + STAGED * RAW_PITCH;
    unsigned* const high = raw;  // over the first part's raw rows, once they are transformed
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

    // One past the last byte of the launch's highest element: a 16-byte chunk that ends by
    // there and holds one of its bytes is inside the array's allocation, wherever it starts.
    long long highest = cols - 1;  // elements past `in`
    if (in_row_stride > 0) highest += (long long)(rows - 1) * in_row_stride;
    if (in_batch_stride > 0) highest += (long long)(gridDim.z - 1) * in_batch_stride;
    const long long array_end = (long long)reinterpret_cast<u64>(in + highest) + E;
    in += (Index)blockIdx.z * in_batch_stride;  // signed: the stride may be negative
    out += (Index)blockIdx.z * out_batch_stride;
    const GkWordGrid<Index> grid(rows, cols, TR, TC, STAGED);
    const Index row_tiles = grid.row_tiles;
    const Index c0 = grid.col_tile * TC;
    const int ncols = (int)(cols - c0 < TC ? cols - c0 : TC);
    const int nbytes = ncols * E;  // bytes of an input row inside this tile
    const bool right_edge = ncols < TC || c0 + TC == cols;
    // Every chunk of a row ends inside the row: no copy is cut short.
    const bool whole_chunks = (cols - c0) * E >= CHUNKS * 16;
    const long long row_bytes = (long long)in_row_stride * E;  // signed
    const long long tile_start = (long long)reinterpret_cast<u64>(in + c0);  // row 0's stretch
    const int copy_chunk = threadIdx.x % CHUNKS, copy_row = threadIdx.x / CHUNKS;
    for (Index step = grid.first_step; step < row_tiles; step += grid.step_stride) {
        // The two edge tiles (the last, then the first) first: they run longer than the
        // others and would otherwise be the grid's last blocks.
        const Index tile_row = step == 0 ? row_tiles - 1 : step - 1;
        const Index r0 = tile_row * TR;  // first staged input row
        const bool first = tile_row == 0, last = tile_row == row_tiles - 1;
        const bool rows_inside = r0 + STAGED <= rows;
        const bool interior = !right_edge && !first && !last;
        // Stage. `chunk` is where this thread's chunk would start if the row's stretch were
        // aligned; rounded down to 16 bytes, it is the chunk itself.
        if (copy_row < ROW_STEP) {
            long long chunk = tile_start + 16 * copy_chunk + (long long)(r0 + copy_row) * row_bytes;
            const long long chunk_step = ROW_STEP * row_bytes;
            unsigned* to = raw + copy_row * RAW_PITCH + 4 * copy_chunk;
            int r = copy_row;
#pragma unroll
            for (int part = 1; part <= PARTS; ++part) {
                const int end = part == 1 ? FIRST_WORDS * W : STAGED;
                if (whole_chunks && rows_inside) {
                    for (; r < end; r += ROW_STEP, chunk += chunk_step, to += ROW_STEP * RAW_PITCH) {
                        if (copy_chunk < CHUNKS - 1 || (chunk & 15)) {
                            gk_copy16_async_line(gk_shared_address(to),
                                                 reinterpret_cast<const void*>(chunk & ~15ll));
                        }
                    }
                } else {
                    for (; r < end; r += ROW_STEP, chunk += chunk_step, to += ROW_STEP * RAW_PITCH) {
                        const Index row = r0 + r;
                        const long long aligned = chunk & ~15ll;
                        long long bytes = chunk - 16 * copy_chunk + nbytes - aligned;  // left in the row
                        bytes = bytes < 0 ? 0 : bytes > 16 ? 16 : bytes;
                        if (row < 0 || row >= rows) bytes = 0;
                        if (bytes == 16 || (bytes > 0 && aligned + 16 <= array_end)) {
                            gk_copy16_async_line(gk_shared_address(to),
                                                 reinterpret_cast<const void*>(aligned));
                        } else {
                            gk_copy_chunk_part(to, reinterpret_cast<const unsigned char*>(aligned),
                                               (int)bytes);
                        }
                    }
                }
                gk_copy_commit();
            }
        } else {
#pragma unroll
            for (int part = 1; part <= PARTS; ++part) gk_copy_commit();
        }
        // Transform, part by part. Only the low 4 bits of a row's address matter: 32-bit
        // arithmetic keeps them.
        const unsigned first_address = (unsigned)tile_start + (unsigned)r0 * (unsigned)row_bytes;
#pragma unroll
        for (int part = 0; part < PARTS; ++part) {
            if (part == 0) {
                gk_copy_wait<PARTS - 1>();
            } else {
                gk_copy_wait<0>();
            }
            __syncthreads();  // this part's rows are in raw, from every thread's copies
            const int g_begin = part == 0 ? 0 : FIRST_WORDS, g_end = part == 0 ? FIRST_WORDS : WORDS;
            // Tile column 32 n + lane, word g: lane_column[n * 32 * HALF_PITCH + g - half_first].
            const int half_first = part == 0 ? 0 : HIGH_FIRST;
            unsigned* const lane_column = (part == 0 ? low : high) + lane * HALF_PITCH;
            for (int g0 = g_begin + warp; g0 < g_end; g0 += 2 * WARPS) {
                unsigned block[2][W], columns[W];
#pragma unroll
                for (int h = 0; h < 2; ++h) {  // two groups of W rows in flight
                    const int g = g0 + h * WARPS < g_end ? g0 + h * WARPS : g0;
                    unsigned address = first_address + (unsigned)(W * g) * (unsigned)row_bytes;
#pragma unroll
                    for (int m = 0; m < W; ++m, address += (unsigned)row_bytes) {
                        const unsigned shift = address & 15u;  // s_r
                        const unsigned* from = raw + (W * g + m) * RAW_PITCH + (shift >> 2) + lane;
                        block[h][m] = __funnelshift_r(from[0], from[1], 8 * (shift & 3u));
                    }
                }
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int g = g0 + h * WARPS;
                    if (g >= g_end) break;  // uniform over the warp
                    gk_block_transpose<W>(block[h], columns);
#pragma unroll
                    for (int n = 0; n < W; ++n) {
                        lane_column[n * 32 * HALF_PITCH + g - half_first] = columns[n];
                    }
                }
            }
            if (part == PARTS - 1) {  // words [32, 40) are in both halves: `high` gets low's
                constexpr int SHARED = FIRST_WORDS - HIGH_FIRST;
                for (int i = threadIdx.x; i < TC * SHARED; i += THREADS) {
                    const int column = i / SHARED, word = i % SHARED;
                    high[column * HALF_PITCH + word] = low[column * HALF_PITCH + HIGH_FIRST + word];
                }
            }
        }
        __syncthreads();  // the tile is whole in low and high (high still covers raw rows)
        // Store: tile column jl is output row c0 + jl; its segment starts f elements into the
        // staged rows (SKEW), and lane k writes the segment's words k and k + 32.
        if (interior) {
            for (int j0 = warp; j0 < TC; j0 += 2 * WARPS) {
                unsigned words[2][4];
                int bits[2];
                T* segment[2];
#pragma unroll
                for (int h = 0; h < 2; ++h) {  // two output rows in flight
                    const int jl = j0 + h * WARPS;
                    segment[h] = out + (c0 + jl) * out_row_stride + r0;
                    const int f = (int)(((0ull - reinterpret_cast<u64>(segment[h])) & 31) / E);
                    bits[h] = 8 * E * (f % W);
                    segment[h] += f;
                    const int at = ((jl % W) * 32 + jl / W) * HALF_PITCH + f / W + lane;
                    words[h][0] = low[at];
                    words[h][1] = low[at + 1];
                    words[h][2] = high[at];  // word at + 32 of the column
                    words[h][3] = high[at + 1];
                }
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    unsigned* aligned = reinterpret_cast<unsigned*>(segment[h]) + lane;
                    aligned[0] = __funnelshift_r(words[h][0], words[h][1], bits[h]);
                    aligned[32] = __funnelshift_r(words[h][2], words[h][3], bits[h]);
                }
            }
        } else {
            for (int jl = warp; jl < ncols; jl += WARPS) {
                T* out_row = out + (c0 + jl) * out_row_stride;
                const int f = (int)(((0ull - reinterpret_cast<u64>(out_row + r0)) & 31) / E);
                const int bits = 8 * E * (f % W);
                const int column = ((jl % W) * 32 + jl / W) * HALF_PITCH;
                const int at = column + f / W + lane;
                const unsigned words[2] = {__funnelshift_r(low[at], low[at + 1], bits),
                                           __funnelshift_r(high[at], high[at + 1], bits)};
#pragma unroll
                for (int h = 0; h < 2; ++h) {  // element 0 of words[h] is input row r0 + f + W k
                    gk_store_word_clipped(out_row, r0 + f + W * (lane + 32 * h), rows, words[h]);
                }
                // Outside the segment, at most SECTOR elements each: rows [0, f) in the first
                // tile (words 0 to 7, in `low`), rows from r0 + f + TR in the last (words 64
                // to 71, in `high`). Lane k stores the k-th.
                if (first && lane < f && lane < rows) {
                    out_row[lane] = (T)(low[column + lane / W] >> (8 * E * (lane % W)));
                }
                const int after = f + TR + lane;  // staged row
                if (last && after < STAGED && r0 + after < rows) {
                    const unsigned word = high[column + after / W - HIGH_FIRST];
                    out_row[r0 + after] = (T)(word >> (8 * E * (after % W)));
                }
            }
        }
        if (step + grid.step_stride < row_tiles) __syncthreads();  // before the next refill
    }
}

