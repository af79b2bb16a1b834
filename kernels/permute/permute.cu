// permute.cu - out = x.transpose(axes), C-contiguous: the permutation ladder.
//
// The host describes a permutation by the output's axes after merging (ops/permute/__init__.py):
// size-1 axes dropped, and neighbouring output axes joined where the input walks them in the same
// order with no gap. What is left, at most GK_PERMUTE_RANK axes, comes in a gk_permute_dims by
// value: the output's lengths in its axis order (the last is the fastest) and, for each output
// axis, the input's stride along it in elements (any sign). Every rung has the signature
//
//   permute_<rung><T, Index, geometry...>(in, out, dims)
//
// T is a carrier type of the element's size (a permutation moves bits, as a transpose does);
// Index the integer type of all offsets (`int` when the host has checked that they fit in 31
// bits, `long long` otherwise). The geometry comes in as template arguments, set in one place on
// the host (ops/permute/rungs.py). Decoding a linear index into coordinates divides once per
// axis: gather decodes every element, tiled and vector the folded axes once per tile, rows a
// row's offset once per word it copies (up to 16 bytes).
#include "../common.cuh"

#define GK_PERMUTE_RANK 8

struct gk_permute_dims {
    i64 length[GK_PERMUTE_RANK];     // the output's lengths, its last axis fastest
    i64 in_stride[GK_PERMUTE_RANK];  // the input's stride along each output axis, in elements
    int rank;                        // axes in use, 1 to GK_PERMUTE_RANK
    int tile_axis;                   // permute_tiled: the axis tiled with the last one
};

// The input offset of the element whose coordinates along the axes other than skip_a and skip_b
// are those of `linear`, read row-major over those axes (the skipped axes at 0).
template <typename Index>
__device__ __forceinline__ Index gk_permute_offset(const gk_permute_dims& dims, Index linear,
                                                   int skip_a, int skip_b) {
    Index offset = 0;
    for (int axis = dims.rank - 1; axis >= 0; --axis) {
        if (axis == skip_a || axis == skip_b) continue;
        const Index length = (Index)dims.length[axis];
        offset += (linear % length) * (Index)dims.in_stride[axis];
        linear /= length;
    }
    return offset;
}

// The output's stride of `axis`, in elements (the output is C-contiguous).
template <typename Index>
__device__ __forceinline__ Index gk_permute_out_stride(const gk_permute_dims& dims, int axis) {
    Index stride = 1;
    for (int later = dims.rank - 1; later > axis; --later) stride *= (Index)dims.length[later];
    return stride;
}

// How many tiles the tiled rungs fold into blockIdx.z: the product of the lengths of the axes
// whose bits in `tiled` are clear (the tiled axes' bits are set).
template <typename Index>
__device__ __forceinline__ Index gk_permute_folds(const gk_permute_dims& dims, unsigned tiled) {
    Index others = 1;
    for (int axis = 0; axis < dims.rank; ++axis) {
        if (!(tiled >> axis & 1u)) others *= (Index)dims.length[axis];
    }
    return others;
}

// The input offset and the output offset of fold number `fold`: the coordinates along the axes
// not in `tiled` that it stands for, read row-major.
template <typename Index>
__device__ __forceinline__ void gk_permute_fold(const gk_permute_dims& dims, unsigned tiled,
                                                Index fold, Index& in_base, Index& out_base) {
    Index rest = fold, out_stride = 1;
    in_base = 0;
    out_base = 0;
    for (int axis = dims.rank - 1; axis >= 0; --axis) {
        const Index length = (Index)dims.length[axis];
        if (!(tiled >> axis & 1u)) {
            const Index c = rest % length;
            rest /= length;
            in_base += c * (Index)dims.in_stride[axis];
            out_base += c * out_stride;
        }
        out_stride *= length;
    }
}

// ---------------------------------------------------------------------------------------------
// Rung 1 - gather: one thread per output element, in output order. Each thread decodes its index
// into coordinates (a division per axis) and reads the input element there. Writes coalesce;
// reads coalesce only where the output's last axis is the input's fastest. The textbook kernel
// (any permutation, any strides), and the reference point of the ladder: on an H100, 0.28 of a
// copy for (256, 512, 512) float32 with axes (2, 0, 1), 0.13 for (32, 64, 128, 256) with
// (3, 2, 1, 0), 0.06 for int8 (512,)*3 with (2, 1, 0), as slow as CuPy's strided copy.
// ---------------------------------------------------------------------------------------------
template <typename T, typename Index>
__global__ void permute_gather(const T* __restrict__ in, T* __restrict__ out,
                               gk_permute_dims dims) {
    Index total = 1;
    for (int axis = 0; axis < dims.rank; ++axis) total *= (Index)dims.length[axis];
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (Index)gridDim.x * blockDim.x) {
        out[i] = in[gk_permute_offset<Index>(dims, i, -1, -1)];
    }
}

// ---------------------------------------------------------------------------------------------
// Rung 2 - tiled: a TILE x TILE tile over two axes staged through shared memory, as the 2-D
// `shared` transpose does: the output's last axis (P, written along) and the input's fastest axis
// among the others (Q = dims.tile_axis, read along). Both the loads and the stores of a warp then
// touch consecutive addresses; every other axis is folded into blockIdx.z (a grid-stride loop
// over their product), decoded once per tile. 32 x ROWS threads, TILE * TILE / (32 ROWS)
// elements each; a padding word per row keeps the column reads free of bank conflicts.
// On an H100 (held): 0.90 of a copy for (32, 64, 128, 256) float32 with (3, 2, 1, 0), 0.94 for
// (256, 512, 512) with (2, 0, 1); 1- and 2-byte items only 0.53 (int8) and 0.45 (float16):
// a warp moves one item per lane, 32 or 64 bytes an access.
// Launch with blockDim = (32, ROWS); gridDim.x over Q tiles, y over P tiles (grid-stride).
// ---------------------------------------------------------------------------------------------
template <typename T, typename Index, int TILE, int ROWS>
__global__ void __launch_bounds__(32 * ROWS)
permute_tiled(const T* __restrict__ in, T* __restrict__ out, gk_permute_dims dims) {
    static_assert(TILE % 32 == 0 && TILE % ROWS == 0, "whole warps across, whole rows down");
    // Rows padded by one 4-byte word (one element for larger items): a column read then hits
    // 32 banks. One byte of padding would leave 1-byte tiles 2-way conflicted.
    constexpr int PAD = sizeof(T) >= 4 ? 1 : 4 / (int)sizeof(T);
    __shared__ T tile[TILE][TILE + PAD];
    const int P = dims.rank - 1, Q = dims.tile_axis;
    const Index p_length = (Index)dims.length[P], q_length = (Index)dims.length[Q];
    const Index p_in = (Index)dims.in_stride[P], q_in = (Index)dims.in_stride[Q];
    const Index q_out = gk_permute_out_stride<Index>(dims, Q);
    const unsigned tiled = 1u << P | 1u << Q;
    const Index others = gk_permute_folds<Index>(dims, tiled);
    const Index q0 = (Index)blockIdx.x * TILE;
    for (Index fold = blockIdx.z; fold < others; fold += gridDim.z) {
        Index in_base, out_base;
        gk_permute_fold<Index>(dims, tiled, fold, in_base, out_base);
        for (Index p0 = (Index)blockIdx.y * TILE; p0 < p_length; p0 += (Index)gridDim.y * TILE) {
            // Load: lanes along Q (the input's fastest), rows along P.
#pragma unroll
            for (int j0 = 0; j0 < TILE; j0 += ROWS) {
#pragma unroll
                for (int k0 = 0; k0 < TILE; k0 += 32) {
                    const int j = j0 + threadIdx.y, k = k0 + threadIdx.x;
                    const Index q = q0 + k, p = p0 + j;
                    if (q < q_length && p < p_length) {
                        tile[j][k] = in[in_base + q * q_in + p * p_in];
                    }
                }
            }
            __syncthreads();
            // Store: lanes along P (the output's last axis), rows along Q.
#pragma unroll
            for (int j0 = 0; j0 < TILE; j0 += ROWS) {
#pragma unroll
                for (int k0 = 0; k0 < TILE; k0 += 32) {
                    const int j = j0 + threadIdx.y, k = k0 + threadIdx.x;
                    const Index q = q0 + j, p = p0 + k;
                    if (q < q_length && p < p_length) {
                        out[out_base + q * q_out + p] = tile[k][j];
                    }
                }
            }
            __syncthreads();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Rung 3 - vector: tiled's tile in V x V blocks of elements transposed in registers, as the 2-D
// `vector` transpose does, so that every global access moves a 16-byte word (V = 16 / sizeof(T);
// V = 1 where the layout allows no words: then tiled's scheme in this kernel's tile shape).
// tiled moves one element per lane and access, 32 to 128 bytes a warp request: for 1- and 2-byte
// items the load/store units, not DRAM, set its pace. Each thread loads V words from V
// consecutive rows along P (a block of V x V elements along P and Q), swaps the block's rows and
// columns in registers, and stores its V columns to V planes of the shared tile; after the
// barrier each thread writes words of a plane along output rows (along P). Planes are padded to
// an odd pitch of words, so the stores along Q hit distinct banks.
// P is joined to the output axis before it, R (unless R is Q): the output is contiguous across
// the two, so the tile's TILE_P blocks run along R x P. A short output row (P of 32 float32, as
// in (3, 2, 1, 0) of (32, 64, 128, 256)) then still fills the tile, and each tile writes runs of
// TILE_P words: 256 bytes there, in 3% less time than a tile short along P and long along Q,
// 18% less for P of 16 float32 (benchmarks/NOTES.md, item 140). The loads decode each row's R
// coordinate (a division a row). On an H100 (held / per call, of a copy, one run): (32, 64, 128,
// 256) float32 with (3, 2, 1, 0) 0.95 / 0.92 (tiled 0.90 / 0.88); int8 and float16 of the same
// 0.90-0.93 held (tiled 0.34-0.35, another run).
// Requirements for V > 1, checked by the host: the input contiguous along Q (in_stride 1); the
// lengths of P and Q and every other in_stride multiples of V; both base addresses aligned to
// V * sizeof(T) bytes. Then every output stride is a multiple of V too.
// Launch with THREADS threads; gridDim.x over Q tiles, y over the tiles of R x P (grid-stride),
// z over the other axes (grid-stride).
// ---------------------------------------------------------------------------------------------
template <typename T, typename Index, int V, int TILE_P, int TILE_Q, int THREADS>
__global__ void __launch_bounds__(THREADS)
permute_vector(const T* __restrict__ in, T* __restrict__ out, gk_permute_dims dims) {
    typedef typename gk_block_word<T, V>::type Word;
    typedef gk_block_row<T, V> BlockRow;
    static_assert(THREADS % TILE_Q == 0 && TILE_P % (THREADS / TILE_Q) == 0,
                  "the loads cover the tile in whole rows of Q blocks");
    static_assert(THREADS % TILE_P == 0 && TILE_Q % (THREADS / TILE_P) == 0,
                  "the stores cover the tile in whole rows of P blocks");
    constexpr int PITCH = TILE_P | 1;
    __shared__ Word tile[V][TILE_Q][PITCH];
    const int P = dims.rank - 1, Q = dims.tile_axis;
    const bool joined = P - 1 != Q;  // rank 2 (the host pads to two axes at least): Q is P - 1
    const int R = joined ? P - 1 : P;
    const Index row_blocks = (Index)dims.length[P] / V;  // blocks along P, for each R
    const Index p_blocks = row_blocks * (joined ? (Index)dims.length[R] : 1);
    const Index q_blocks = (Index)dims.length[Q] / V;
    const Index p_in = (Index)dims.in_stride[P], q_in = (Index)dims.in_stride[Q];
    const Index r_in = (Index)dims.in_stride[R];
    const Index q_out = gk_permute_out_stride<Index>(dims, Q);
    const unsigned tiled = 1u << P | 1u << Q | 1u << R;
    const Index others = gk_permute_folds<Index>(dims, tiled);
    // Load: thread t reads Q block t % TILE_Q of P block rows t / TILE_Q, + THREADS / TILE_Q, ...
    const int load_q = threadIdx.x % TILE_Q, load_p = threadIdx.x / TILE_Q;
    // Store: thread t writes P block t % TILE_P of the output rows of Q blocks t / TILE_P, ...
    const int store_p = threadIdx.x % TILE_P, store_q = threadIdx.x / TILE_P;
    const Index q0 = (Index)blockIdx.x * TILE_Q;
    for (Index fold = blockIdx.z; fold < others; fold += gridDim.z) {
        Index in_base, out_base;
        gk_permute_fold<Index>(dims, tiled, fold, in_base, out_base);
        for (Index p0 = (Index)blockIdx.y * TILE_P; p0 < p_blocks; p0 += (Index)gridDim.y * TILE_P) {
#pragma unroll
            for (int j = load_p; j < TILE_P; j += THREADS / TILE_Q) {
                const Index p = p0 + j, q = q0 + load_q;
                if (p < p_blocks && q < q_blocks) {
                    const Index r = p / row_blocks;  // 0 unless joined
                    const T* row = in + in_base + r * r_in + (p - r * row_blocks) * V * p_in;
                    BlockRow block[V];
#pragma unroll
                    for (int i = 0; i < V; ++i) {  // for V > 1 the host has checked q_in == 1
                        const T* src = row + i * p_in + (V == 1 ? q * q_in : q * V);
                        block[i].word = *reinterpret_cast<const Word*>(src);
                    }
#pragma unroll
                    for (int c = 0; c < V; ++c) {  // column c of the block: output row q * V + c
                        BlockRow column;
#pragma unroll
                        for (int i = 0; i < V; ++i) column.elem[i] = block[i].elem[c];
                        tile[c][load_q][j] = column.word;
                    }
                }
            }
            __syncthreads();
            // Output offsets: R's output stride is P's length, so block p of R x P is at p * V.
#pragma unroll
            for (int k = store_q; k < TILE_Q; k += THREADS / TILE_P) {
                const Index q = q0 + k, p = p0 + store_p;
                if (p < p_blocks && q < q_blocks) {
#pragma unroll
                    for (int c = 0; c < V; ++c) {
                        *reinterpret_cast<Word*>(out + out_base + (q * V + c) * q_out + p * V) =
                            tile[c][k][store_p];
                    }
                }
            }
            __syncthreads();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Rung 4 - rows: for permutations that keep the input's fastest axis last (e.g. (1, 0, 2)), the
// output is whole rows of the input, each contiguous: a strided copy of rows. T is a word of the
// widest size (up to 16 bytes) that every row start, the row length and both pointers allow;
// the host expresses lengths and strides in those words. A block of X x Y threads (X * Y =
// THREADS, X the row's words rounded up to a power of two) copies chunks of X words of Y rows;
// gridDim.x walks a row's chunks, y the rows (grid-stride). Each thread decodes the input offset
// of its row (a division per axis) for the one word it copies there. On an H100 (held): 0.98
// of a copy for (256, 512, 512) float32 with (1, 0, 2), 1.00 for (32, 64, 128, 256) with
// (0, 2, 1, 3).
// ---------------------------------------------------------------------------------------------
template <typename T, typename Index, int THREADS>
__global__ void __launch_bounds__(THREADS)
permute_rows(const T* __restrict__ in, T* __restrict__ out, gk_permute_dims dims) {
    const int last = dims.rank - 1;
    const Index row_length = (Index)dims.length[last];
    const Index last_stride = (Index)dims.in_stride[last];
    Index rows = 1;
    for (int axis = 0; axis < last; ++axis) rows *= (Index)dims.length[axis];
    const Index column = (Index)blockIdx.x * blockDim.x + threadIdx.x;
    if (column >= row_length) return;
    for (Index row = (Index)blockIdx.y * blockDim.y + threadIdx.y; row < rows;
         row += (Index)gridDim.y * blockDim.y) {
        out[row * row_length + column] =
            in[gk_permute_offset<Index>(dims, row, last, -1) + column * last_stride];
    }
}
