// simt.cu - C[b] = A[b] @ B[b] for a stack of `batch` products, A[b] M x K, B[b] K x N: rungs 1
// to 6 of the matmul ladder, on the CUDA cores. Rung 7 (mma, tensor cores) is in mma.cu, rung 8
// (wgmma, Hopper only) in wgmma.cu.
//
// Every rung in this file has the same signature so one registry dispatches them by name:
//
//   matmul_<rung><T, Index[, ALIGNED], geometry...>(A, B, C, M, N, K, batch,
//                                                   a_batch_stride, a_row_stride, a_col_stride,
//                                                   b_batch_stride, b_row_stride, b_col_stride)
//
// A and B may be any strided views (strides in elements; a batch stride of 0 broadcasts one
// matrix over the stack); C is C-contiguous, shape (batch, M, N). These rungs accumulate in T with
// one fused multiply-add per term, in increasing k (integers: modular arithmetic in unsigned 32- or
// 64-bit types, see gk_madd). Index is the type of all index arithmetic: `int` when the host has
// checked that every offset fits in 31 bits, else `long long`. Rungs with an ALIGNED flag use
// 16-byte accesses when the host has checked unit column strides and 16-byte aligned rows. The
// block tile of C (BM x BN) and the threads per block come in as template arguments, set in one
// place on the host (ops/matmul/rungs.py); each kernel static_asserts the layout it is written for.
//
// Grid mapping shared by all rungs: blockIdx.x walks column tiles of C, blockIdx.y row tiles and
// blockIdx.z matrices. gridDim.y and gridDim.z stop at 65535: the host splits larger problems
// into several launches. The kernels have no grid-stride loops: wrapping the k loop in loops over
// rows and matrices cost the naive kernel 40% on an H100 (3.3 against 5.6 TFLOP/s).
#include "../common.cuh"

// gk_madd(a, b, acc) = acc + a * b: one fused multiply-add (a single rounding) for the floating
// types; for the unsigned types that carry every integer product, arithmetic modulo 2^32 or 2^64,
// which gives NumPy's wrap-around for signed and unsigned integers alike.
__device__ __forceinline__ float gk_madd(float a, float b, float acc) { return fmaf(a, b, acc); }
__device__ __forceinline__ double gk_madd(double a, double b, double acc) { return fma(a, b, acc); }
__device__ __forceinline__ unsigned gk_madd(unsigned a, unsigned b, unsigned acc) {
    return acc + a * b;
}
__device__ __forceinline__ u64 gk_madd(u64 a, u64 b, u64 acc) { return acc + a * b; }

// 16 bytes of T: the unit of the vector loads and stores below (4 floats or 2 doubles).
template <typename T>
struct alignas(16) gk_vec16 {
    static constexpr int size = 16 / sizeof(T);
    T v[size];
};

// Registers <-> memory in 16-byte accesses: COUNT elements, COUNT * sizeof(T) a multiple of 16,
// the memory side 16-byte aligned. The registers are plain arrays: each 16-byte word goes through
// a gk_vec16 value, so the arrays stay in registers after unrolling.
template <int COUNT, typename T>
__device__ __forceinline__ void gk_load16(T (&dst)[COUNT], const T* __restrict__ src) {
    constexpr int V = gk_vec16<T>::size;
#pragma unroll
    for (int i = 0; i < COUNT / V; ++i) {
        const gk_vec16<T> word = reinterpret_cast<const gk_vec16<T>*>(src)[i];
#pragma unroll
        for (int j = 0; j < V; ++j) dst[i * V + j] = word.v[j];
    }
}

template <int COUNT, typename T>
__device__ __forceinline__ void gk_store16(T* __restrict__ dst, const T (&src)[COUNT]) {
    constexpr int V = gk_vec16<T>::size;
#pragma unroll
    for (int i = 0; i < COUNT / V; ++i) {
        gk_vec16<T> word;
#pragma unroll
        for (int j = 0; j < V; ++j) word.v[j] = src[i * V + j];
        reinterpret_cast<gk_vec16<T>*>(dst)[i] = word;
    }
}

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
    for (Index k = 0; k < K; ++k) acc = gk_madd(a[k * a_col_stride], b_col[k * b_row_stride], acc);
    C[m * N + n] = acc;
}

// One step of the tiled rungs: acc + (row ty of a_tile) . (column tx of b_tile), in increasing k.
template <typename T, int TILE>
__device__ __forceinline__ T gk_tile_row_dot(const T (&a_tile)[TILE][TILE],
                                             const T (&b_tile)[TILE][TILE], int ty, int tx, T acc) {
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc = gk_madd(a_tile[ty][k], b_tile[k][tx], acc);
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

// ---------------------------------------------------------------------------------------------
// Rung 3 - blocked_1d: register blocking in one dimension. The block computes a 64x64 tile of C
// with 512 threads; each thread keeps the sums of 8 consecutive rows of one column in registers.
// Per step of k a thread reads one element of B from shared memory and uses it for 8 FMAs; the 8
// elements of A it reads are the same for its whole warp (one broadcast each). Shared-memory
// traffic per FMA falls from two loads (tiled) to about 9/8 warp-wide loads of which 8 are
// broadcasts, and each barrier now covers 8 FMAs per thread and k instead of 1.
// The 64x8 tile of A and the 8x64 tile of B take one element per thread each; as in the tiled
// rung, interior blocks skip the bounds checks on every full step of K.
// Measured (H200, 4096^3 float32): 15.0 TFLOP/s, 0.30 of cuBLAS (tiled: 8.8, 0.17).
// ---------------------------------------------------------------------------------------------
template <typename T, typename Index, int BM, int BN, int THREADS>
__global__ void __launch_bounds__(THREADS)
    matmul_blocked_1d(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, Index M,
                      Index N, Index K, Index batch, Index a_batch_stride, Index a_row_stride,
                      Index a_col_stride, Index b_batch_stride, Index b_row_stride,
                      Index b_col_stride) {
    constexpr int BK = 8, TM = 8;
    static_assert(THREADS == BM * BN / TM && THREADS == BM * BK && THREADS == BK * BN,
                  "a thread per 8 sums of C, and per element of the A and B tiles of a step");
    __shared__ T a_tile[BM][BK];
    __shared__ T b_tile[BK][BN];
    const int t = threadIdx.x;
    const int col = t % BN, row0 = (t / BN) * TM;  // this thread: rows row0..row0+7 of `col`
    const int a_row = t / BK, a_k = t % BK;        // the element of A this thread stages
    const int b_k = t / BN, b_col = t % BN;        // and the element of B
    const Index b = blockIdx.z;
    const Index m0 = (Index)blockIdx.y * BM, n0 = (Index)blockIdx.x * BN;
    const T* a_next = A + b * a_batch_stride + (m0 + a_row) * a_row_stride + a_k * a_col_stride;
    const T* b_next = B + b * b_batch_stride + b_k * b_row_stride + (n0 + b_col) * b_col_stride;
    const Index a_step = BK * a_col_stride, b_step = BK * b_row_stride;
    const bool interior = m0 + BM <= M && n0 + BN <= N;
    const Index k_full = interior ? K - K % BK : 0;  // steps that need no bounds checks
    T acc[TM];
#pragma unroll
    for (int i = 0; i < TM; ++i) acc[i] = T(0);
    for (Index k0 = 0; k0 < K; k0 += BK) {
        if (k0 < k_full) {
            a_tile[a_row][a_k] = *a_next;
            b_tile[b_k][b_col] = *b_next;
        } else {
            a_tile[a_row][a_k] = (m0 + a_row < M && k0 + a_k < K) ? *a_next : T(0);
            b_tile[b_k][b_col] = (k0 + b_k < K && n0 + b_col < N) ? *b_next : T(0);
        }
        a_next += a_step;
        b_next += b_step;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const T b_value = b_tile[k][col];
#pragma unroll
            for (int i = 0; i < TM; ++i) acc[i] = gk_madd(a_tile[row0 + i][k], b_value, acc[i]);
        }
        __syncthreads();
    }
    const Index n = n0 + col;
    if (n >= N) return;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const Index m = m0 + row0 + i;
        if (m < M) C[(b * M + m) * N + n] = acc[i];
    }
}

// Staging of one step of K (BK = 8) for the register-blocked rungs, 256 threads: thread t copies
// groups of 4 consecutive elements of A along k (group q = t + 256 v: row q / 2, columns
// 4 * (q % 2) of the step) and of B along n (row q / (BN / 4), columns 4 * (q % (BN / 4))),
// through registers, into shared memory with A transposed - a_tile[k][m] - so that the compute
// loop reads consecutive rows of A as one 16-byte load. With ALIGNED (the host checked unit
// column strides and 16-byte aligned rows) the global loads are 16 bytes wide; otherwise they
// follow the strides one element at a time.
template <typename T, typename Index, bool ALIGNED, int BM, int BN>
struct gk_stage {
    static constexpr int THREADS = 256, BK = 8, A_PITCH = BM + 4;
    static constexpr int A_GROUPS = BM * BK / 4 / THREADS, B_GROUPS = BK * BN / 4 / THREADS;
    static constexpr int A_ROWS_APART = THREADS / 2, B_ROWS_APART = THREADS / (BN / 4);
    T a[A_GROUPS][4], b[B_GROUPS][4];
    int a_row, a_k, b_k, b_col;  // of group 0

    __device__ __forceinline__ gk_stage(int t)
        : a_row(t / 2), a_k(4 * (t % 2)), b_k(t / (BN / 4)), b_col(4 * (t % (BN / 4))) {}

    // Loads of one step. CHECK_K: zeros past K (the last step); CHECK_MN: zeros past M and N too
    // (edge blocks). a_src / b_src point at group 0; k_left = K - k0.
    template <bool CHECK_K, bool CHECK_MN>
    __device__ __forceinline__ void load(const T* a_src, const T* b_src, Index a_row_stride,
                                         Index a_col_stride, Index b_row_stride, Index b_col_stride,
                                         Index k_left, Index a_rows_left, Index b_cols_left) {
#pragma unroll
        for (int v = 0; v < A_GROUPS; ++v) {
            const T* src = a_src + v * A_ROWS_APART * a_row_stride;
            if (!CHECK_K && !CHECK_MN && ALIGNED) {
                gk_load16(a[v], src);
            } else {
                const bool row_in = !CHECK_MN || v * A_ROWS_APART < a_rows_left;
#pragma unroll
                for (int i = 0; i < 4; ++i)
                    a[v][i] = (row_in && (!CHECK_K || a_k + i < k_left)) ? src[i * a_col_stride]
                                                                          : T(0);
            }
        }
#pragma unroll
        for (int v = 0; v < B_GROUPS; ++v) {
            const T* src = b_src + v * B_ROWS_APART * b_row_stride;
            if (!CHECK_K && !CHECK_MN && ALIGNED) {
                gk_load16(b[v], src);
            } else {
                const bool row_in = !CHECK_K || b_k + v * B_ROWS_APART < k_left;
#pragma unroll
                for (int i = 0; i < 4; ++i)
                    b[v][i] = (row_in && (!CHECK_MN || i < b_cols_left)) ? src[i * b_col_stride]
                                                                          : T(0);
            }
        }
    }

    __device__ __forceinline__ void store(T (*a_tile)[A_PITCH], T (*b_tile)[BN]) const {
#pragma unroll
        for (int v = 0; v < A_GROUPS; ++v)
#pragma unroll
            for (int i = 0; i < 4; ++i) a_tile[a_k + i][a_row + v * A_ROWS_APART] = a[v][i];
#pragma unroll
        for (int v = 0; v < B_GROUPS; ++v) gk_store16(&b_tile[b_k + v * B_ROWS_APART][b_col], b[v]);
    }
};

// ---------------------------------------------------------------------------------------------
// Rung 4 - blocked_2d: register blocking in two dimensions. A 128x128 tile of C per block of 256
// threads, each thread an 8x8 square of it: per step of k it reads 8 elements of A and 8 of B from
// shared memory and does 64 FMAs with them, 4 times the reuse of blocked_1d, so shared memory is
// no longer the limit. A is stored transposed in shared memory, so both operands reach registers
// as 16-byte loads (two per operand and k), and global loads are 16 bytes wide when the host has
// checked the alignment (ALIGNED). The B loads of a warp are spread over 512 bytes (16 threads,
// 32 bytes each), twice the width the hardware serves at once: the next rung removes that.
// Measured (H200, 4096^3 float32): 34.8 TFLOP/s, 0.68 of cuBLAS.
// ---------------------------------------------------------------------------------------------
template <typename T, typename Index, bool ALIGNED, int BM, int BN, int THREADS>
__global__ void __launch_bounds__(THREADS)
    matmul_blocked_2d(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, Index M,
                      Index N, Index K, Index batch, Index a_batch_stride, Index a_row_stride,
                      Index a_col_stride, Index b_batch_stride, Index b_row_stride,
                      Index b_col_stride) {
    constexpr int TM = 8, TN = 8;
    static_assert(BM == 128 && BN == 128 && THREADS == 256,
                  "16 x 16 threads of 8 x 8 sums; gk_stage stages with 256 threads");
    typedef gk_stage<T, Index, ALIGNED, BM, BN> Stage;
    constexpr int BK = Stage::BK;
    __shared__ alignas(16) T a_tile[BK][Stage::A_PITCH];
    __shared__ alignas(16) T b_tile[BK][BN];
    const int t = threadIdx.x;
    const int row0 = (t / 16) * TM, col0 = (t % 16) * TN;  // this thread's 8x8 square of C
    Stage stage(t);
    const Index b = blockIdx.z;
    const Index m0 = (Index)blockIdx.y * BM, n0 = (Index)blockIdx.x * BN;
    const T* a_next = A + b * a_batch_stride + (m0 + stage.a_row) * a_row_stride +
                      stage.a_k * a_col_stride;
    const T* b_next = B + b * b_batch_stride + stage.b_k * b_row_stride +
                      (n0 + stage.b_col) * b_col_stride;
    const Index a_step = BK * a_col_stride, b_step = BK * b_row_stride;
    const bool interior = m0 + BM <= M && n0 + BN <= N;
    T acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = T(0);
    for (Index k0 = 0; k0 < K; k0 += BK) {
        if (interior && k0 + BK <= K)
            stage.template load<false, false>(a_next, b_next, a_row_stride, a_col_stride,
                                              b_row_stride, b_col_stride, 0, 0, 0);
        else
            stage.template load<true, true>(a_next, b_next, a_row_stride, a_col_stride,
                                            b_row_stride, b_col_stride, K - k0,
                                            M - m0 - stage.a_row, N - n0 - stage.b_col);
        a_next += a_step;
        b_next += b_step;
        stage.store(a_tile, b_tile);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            T a_frag[TM], b_frag[TN];
            gk_load16(a_frag, &a_tile[k][row0]);
            gk_load16(b_frag, &b_tile[k][col0]);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = gk_madd(a_frag[i], b_frag[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const Index m = m0 + row0 + i;
        T* c_row = C + (b * M + m) * N + n0 + col0;
        if (ALIGNED && interior) {
            gk_store16(c_row, acc[i]);
        } else if (m < M) {
#pragma unroll
            for (int j = 0; j < TN; ++j)
                if (n0 + col0 + j < N) c_row[j] = acc[i][j];
        }
    }
}

// The main loop of the warp-tiled rungs for one block: TM x 8 sums per thread as (TM / 4) x 2
// squares of 4x4, 32 rows and 16 columns apart; warps 2 x 4 over a (16 TM) x 128 tile of C.
// EDGE: the block crosses the edge of C, so every load is checked; otherwise only the loads of a
// last, partial step of K are. The kernel owns the two stages of shared memory (a_tile, b_tile),
// so that its interior and edge copies of this loop share them.
template <typename T, typename Index, bool ALIGNED, int TM, bool EDGE>
__device__ __forceinline__ void gk_warp_tiled_block(
    const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, Index M, Index N, Index K,
    Index a_row_stride, Index a_col_stride, Index b_row_stride, Index b_col_stride, Index m0,
    Index n0, T (*a_tile)[8][16 * TM + 4], T (*b_tile)[8][128]) {
    constexpr int BM = 16 * TM, BN = 128, SQ_M = TM / 4;
    typedef gk_stage<T, Index, ALIGNED, BM, BN> Stage;
    constexpr int BK = Stage::BK;
    const int t = threadIdx.x, warp = t / 32, lane = t % 32;
    const int row0 = (warp / 4) * (8 * TM) + (lane / 4) * 4;  // first row of the first square
    const int col0 = (warp % 4) * 32 + (lane % 4) * 4;        // its first column
    Stage stage(t);
    const T* a_next = A + (m0 + stage.a_row) * a_row_stride + stage.a_k * a_col_stride;
    const T* b_next = B + stage.b_k * b_row_stride + (n0 + stage.b_col) * b_col_stride;
    const Index a_step = BK * a_col_stride, b_step = BK * b_row_stride;
    const Index a_rows_left = M - m0 - stage.a_row, b_cols_left = N - n0 - stage.b_col;

    auto fetch = [&](Index k0) {  // the step at k0 into registers
        if (EDGE)
            stage.template load<true, true>(a_next, b_next, a_row_stride, a_col_stride,
                                            b_row_stride, b_col_stride, K - k0, a_rows_left,
                                            b_cols_left);
        else if (k0 + BK <= K)
            stage.template load<false, false>(a_next, b_next, a_row_stride, a_col_stride,
                                              b_row_stride, b_col_stride, 0, 0, 0);
        else
            stage.template load<true, false>(a_next, b_next, a_row_stride, a_col_stride,
                                             b_row_stride, b_col_stride, K - k0, 0, 0);
        a_next += a_step;
        b_next += b_step;
    };

    T acc[TM][2][4];  // [row][column square][column]
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j / 4][j % 4] = T(0);
    fetch(0);
    stage.store(a_tile[0], b_tile[0]);
    __syncthreads();
    int current = 0;
    for (Index k0 = 0; k0 < K; k0 += BK) {
        const bool more = k0 + BK < K;
        if (more) fetch(k0 + BK);
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            T a_frag[SQ_M][4], b_frag[2][4];  // [square][element]
#pragma unroll
            for (int s = 0; s < SQ_M; ++s) gk_load16(a_frag[s], &a_tile[current][k][row0 + 32 * s]);
            gk_load16(b_frag[0], &b_tile[current][k][col0]);
            gk_load16(b_frag[1], &b_tile[current][k][col0 + 16]);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j)
                    acc[i][j / 4][j % 4] =
                        gk_madd(a_frag[i / 4][i % 4], b_frag[j / 4][j % 4], acc[i][j / 4][j % 4]);
        }
        if (more) stage.store(a_tile[current ^ 1], b_tile[current ^ 1]);
        __syncthreads();
        current ^= 1;
    }
    // acc[i][h][j]: row row0 + (i / 4) * 32 + i % 4, column col0 + h * 16 + j.
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const Index m = m0 + row0 + (i / 4) * 32 + i % 4;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const Index n = n0 + col0 + h * 16;
            T* c = C + m * N + n;
            if (ALIGNED && !EDGE) {
                gk_store16(c, acc[i][h]);
            } else if (!EDGE || m < M) {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (!EDGE || n + j < N) c[j] = acc[i][h][j];
            }
        }
    }
}

// The body of the warp-tiled kernels: the block's matrix, then the interior or the edge copy of
// the loop, both on the kernel's two stages of shared memory.
template <typename T, typename Index, bool ALIGNED, int TM>
__device__ __forceinline__ void gk_warp_tiled_kernel(const T* __restrict__ A, const T* __restrict__ B,
                                                     T* __restrict__ C, Index M, Index N, Index K,
                                                     Index a_batch_stride, Index a_row_stride,
                                                     Index a_col_stride, Index b_batch_stride,
                                                     Index b_row_stride, Index b_col_stride) {
    constexpr int BM = 16 * TM, BN = 128;
    __shared__ alignas(16) T a_tile[2][8][BM + 4];  // two stages of gk_stage's layout
    __shared__ alignas(16) T b_tile[2][8][BN];
    const Index b = blockIdx.z;
    const Index m0 = (Index)blockIdx.y * BM, n0 = (Index)blockIdx.x * BN;
    A += b * a_batch_stride;
    B += b * b_batch_stride;
    C += b * M * N;
    if (m0 + BM <= M && n0 + BN <= N)
        gk_warp_tiled_block<T, Index, ALIGNED, TM, false>(A, B, C, M, N, K, a_row_stride,
                                                           a_col_stride, b_row_stride,
                                                           b_col_stride, m0, n0, a_tile, b_tile);
    else
        gk_warp_tiled_block<T, Index, ALIGNED, TM, true>(A, B, C, M, N, K, a_row_stride,
                                                          a_col_stride, b_row_stride, b_col_stride,
                                                          m0, n0, a_tile, b_tile);
}

// ---------------------------------------------------------------------------------------------
// Rung 5 - warp_tiled: the same 128x128 tile and 8x8 sums per thread, arranged for the hardware.
// * Warp tiling: the 8 warps split the tile 2 x 4 into 64x32 sub-tiles, and each thread's 8x8
//   sums are four 4x4 squares 32 rows and 16 columns apart. A warp's shared-memory loads of a step
//   then cover 128 contiguous bytes of A and 64 of B, each served in one pass (blocked_2d needed
//   two for B), and the 32 threads of a warp read only 8 + 4 distinct 16-byte words.
// * Double buffering: two stages of shared memory. The loads of the next step of K are issued
//   into registers before the FMAs of the current one, and land in the other stage after them,
//   so global-memory latency hides behind 512 FMAs per thread and one barrier per step suffices.
// * Interior blocks run a loop without bounds checks (only a last partial step of K is checked);
//   blocks on the edge of C run a separate, fully checked copy of it, so the checks cost the
//   interior neither instructions nor registers. Two blocks fit per SM (128 registers) for
//   4-byte types.
// Measured (H200, 4096^3 float32): 40.5 TFLOP/s, 0.80 of cuBLAS.
// ---------------------------------------------------------------------------------------------
template <typename T, typename Index, bool ALIGNED, int BM, int BN, int THREADS>
__global__ void __launch_bounds__(THREADS, 8 / sizeof(T))
    matmul_warp_tiled(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, Index M,
                      Index N, Index K, Index batch, Index a_batch_stride, Index a_row_stride,
                      Index a_col_stride, Index b_batch_stride, Index b_row_stride,
                      Index b_col_stride) {
    static_assert(BM == 128 && BN == 128 && THREADS == 256, "8 warps, 2 x 4 over 128 x 128");
    gk_warp_tiled_kernel<T, Index, ALIGNED, 8>(A, B, C, M, N, K, a_batch_stride, a_row_stride,
                                               a_col_stride, b_batch_stride, b_row_stride,
                                               b_col_stride);
}

// ---------------------------------------------------------------------------------------------
// Rung 6 - large_tile: warp_tiled with twice the rows per thread (4-byte types): 16x8 sums per
// thread, a 256x128 tile of C per block. Per step of k a thread now does 128 FMAs for 6 16-byte
// shared-memory loads (warp_tiled: 64 for 4), and each element staged from global memory feeds
// twice the FMAs along one side. It takes about 230 registers, so one block of 8 warps runs per
// SM; the extra independent FMAs per warp hide latency that the second block hid before.
// 8-byte types keep 8x8 sums (16x8 would need 512 registers): for them this is warp_tiled.
// Measured (H200, float32): 0.90 of cuBLAS at 4096^3 (45.9 TFLOP/s), 0.92 at 8192^3, 0.83 at
// 4095x4097x4099; below about one tile per SM warp_tiled is faster (benchmarks/NOTES.md 22).
// ---------------------------------------------------------------------------------------------
template <typename T, typename Index, bool ALIGNED, int BM, int BN, int THREADS>
__global__ void __launch_bounds__(THREADS, 1)
    matmul_large_tile(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, Index M,
                      Index N, Index K, Index batch, Index a_batch_stride, Index a_row_stride,
                      Index a_col_stride, Index b_batch_stride, Index b_row_stride,
                      Index b_col_stride) {
    static_assert(BM == (sizeof(T) == 4 ? 256 : 128) && BN == 128 && THREADS == 256,
                  "8 warps, 2 x 4 over (16 TM) x 128: TM = 16 for 4-byte types, 8 for 8-byte");
    gk_warp_tiled_kernel<T, Index, ALIGNED, BM / 16>(
        A, B, C, M, N, K, a_batch_stride, a_row_stride, a_col_stride, b_batch_stride,
        b_row_stride, b_col_stride);
}
