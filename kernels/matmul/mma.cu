// mma.cu - rungs 7 and 10 of the matmul ladder: the tensor cores through warp-wide mma.sync
// (sm_80 and newer). Rung 10 (gemv, products of a few rows) is at the end of the file, with its
// own signature and contract. Rung 7 has the same signature and grid mapping as the rungs in
// simt.cu, with the launch geometry as template arguments:
//
//   matmul_mma<T, Index, ALIGNED, THREADS, BM, BN, STAGES, SHARED_BYTES>(A, B, C, M, N, K, batch,
//       a_batch_stride, a_row_stride, a_col_stride, b_batch_stride, b_row_stride, b_col_stride)
//
// T is gk_half (float16 products), gk_bfloat16 (bfloat16) or float (TF32 products); all accumulate
// in float32. Launch contract (set in one place on the host, ops/matmul/rungs.py, and checked
// against the layout below by static_assert; the same for every T):
//   threads per block      : THREADS = 256, blockDim = (256, 1, 1)       GK_MMA_THREADS
//   block tile of C        : BM x BN = 128 x 128                         GK_MMA_BM, GK_MMA_BN
//   grid                   : (ceil(N / 128), ceil(M / 128), batch)
//   dynamic shared memory  : SHARED_BYTES = STAGES x (BM + BN) x 64 = 65536 bytes
//                            (4 stages x (8 KiB of A + 8 KiB of B)), over the 48 KiB default:
//                            the host raises the function's limit before launching.
//   K per stage            : 32 for the 16-bit types, 16 for float (64 bytes of a row of A).
// The kernel runs only on sm_80 and newer (cp.async, ldmatrix, m16n8k16 / tf32 mma); compiled for
// an older GPU its body is a trap, and the host does not launch it there.
#include "../common.cuh"
#include "store.cuh"

constexpr int GK_MMA_THREADS = 256;  // 8 warps: 2 along M x 4 along N
constexpr int GK_MMA_BM = 128;       // rows of C per block
constexpr int GK_MMA_BN = 128;       // columns of C per block
constexpr int GK_MMA_STAGES = 4;     // shared-memory pipeline depth (cp.async path)
constexpr int GK_MMA_ROW_BYTES = 64;                               // one row of an A tile
constexpr int GK_MMA_A_BYTES = GK_MMA_BM * GK_MMA_ROW_BYTES;       // 8192: BM x BK
constexpr int GK_MMA_B_BYTES = GK_MMA_ROW_BYTES * GK_MMA_BN;       // 8192: BK x BN
constexpr int GK_MMA_STAGE_BYTES = GK_MMA_A_BYTES + GK_MMA_B_BYTES;
constexpr int GK_MMA_SMEM_BYTES = GK_MMA_STAGES * GK_MMA_STAGE_BYTES;  // 65536
static_assert(GK_MMA_SMEM_BYTES == 65536, "4 stages of 8 KiB of A and 8 KiB of B");

// --- shared-memory layout ----------------------------------------------------------------------
// A stage holds A[m0:m0+128, k0:k0+BK] (row-major, 64-byte rows) and then B[k0:k0+BK, n0:n0+128]
// (row-major, 256-byte rows for float16, 512-byte rows for float32). Both are stored in 16-byte
// chunks whose position inside the row is XORed with a few bits of the row index, so that the
// 8 rows one ldmatrix phase reads (or the 4 rows of a TF32 B fragment) sit in different banks.
//
// A: chunk c (0..3) of row r goes to chunk c ^ ((r >> 1) & 3). Two 64-byte rows share one
//    128-byte bank line; over 8 consecutive rows (r & 1, (r >> 1) & 3) takes 8 distinct values,
//    so ldmatrix's 8 row reads of one logical chunk hit 8 distinct 16-byte bank groups.
// All swizzles are XOR-linear in r (swz(r ^ s) == swz(r) ^ swz(s)), which the generic loader uses.
__device__ __forceinline__ int gk_mma_a_swz(int r) { return (r >> 1) & 3; }
__device__ __forceinline__ unsigned gk_mma_a_off(int r, int c) {
    return (unsigned)(r * GK_MMA_ROW_BYTES + ((c ^ gk_mma_a_swz(r)) << 4));
}

// Per element type: the K extent of a stage, the elements per 16-byte chunk, the bytes of a B-tile
// row and the B-tile swizzle. One mma step covers K = 16 (float16) or 8 (TF32): two per stage.
template <typename T>
struct GkMma;

template <>
struct GkMma<gk_half> {
    typedef unsigned short Bits;
    static constexpr int BK = 32;    // K per stage
    static constexpr int VEC = 8;    // elements per 16-byte chunk
    static constexpr int B_ROW = GK_MMA_BN * 2;  // 256 bytes
    // B: chunk c (0..15) of row r goes to c ^ (r & 7): ldmatrix.trans reads one chunk from each
    // of 8 consecutive rows, all 256 bytes apart; the XOR spreads them over the 8 chunk slots
    // of a 128-byte bank line.
    static __device__ __forceinline__ int b_swz(int r) { return r & 7; }
    static __device__ __forceinline__ unsigned b_off(int r, int c) {
        return (unsigned)(r * B_ROW + ((c ^ b_swz(r)) << 4));
    }
};

// bfloat16 tiles are laid out as float16 ones (16-bit elements).
template <>
struct GkMma<gk_bfloat16> : GkMma<gk_half> {};

template <>
struct GkMma<float> {
    typedef unsigned Bits;
    static constexpr int BK = 16;
    static constexpr int VEC = 4;
    static constexpr int B_ROW = GK_MMA_BN * 4;  // 512 bytes
    // B: chunk c (0..31) of row r goes to c ^ ((r & 3) << 1). A TF32 B fragment is read with
    // 32-bit loads: lane (g, t) reads row k + t, column n + g, so one load touches rows k..k+3
    // (k a multiple of 4) and two adjacent chunks (n a multiple of 8); XORing with 0, 2, 4, 6
    // gives those 4 x 2 chunks 8 distinct slots, and each slot serves 4 lanes in 4 banks.
    static __device__ __forceinline__ int b_swz(int r) { return (r & 3) << 1; }
    static __device__ __forceinline__ unsigned b_off(int r, int c) {
        return (unsigned)(r * B_ROW + ((c ^ b_swz(r)) << 4));
    }
};

// --- inline PTX (sm_80+) ------------------------------------------------------------------------
// The memory operations are `asm volatile` so the compiler keeps them in program order with
// respect to __syncthreads() and the cp.async waits; the mma and cvt are pure arithmetic. The
// cp.async copies themselves are common.cuh's (gk_copy16_async_zfill, gk_copy_commit/wait).
__device__ __forceinline__ void gk_mma_ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void gk_mma_ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ unsigned gk_mma_lds32(unsigned addr) {
    unsigned v;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr));
    return v;
}
__device__ __forceinline__ void gk_mma_sts(unsigned addr, unsigned short v) {
    asm volatile("st.shared.b16 [%0], %1;\n" ::"r"(addr), "h"(v) : "memory");
}
__device__ __forceinline__ void gk_mma_sts(unsigned addr, unsigned v) {
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

// float32 -> TF32 (10-bit mantissa), rounding to nearest, ties away from zero; low 13 bits zero.
__device__ __forceinline__ unsigned gk_mma_to_tf32(unsigned x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(__uint_as_float(x)));
    return r;
}

// d += a (16x16, row) * b (16x8, col), float16 (or bfloat16) inputs, float32 accumulators.
__device__ __forceinline__ void gk_mma_k16(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                           unsigned b1, gk_half) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void gk_mma_k16(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                           unsigned b1, gk_bfloat16) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// d += a (16x8, row) * b (8x8, col), TF32 inputs, float32 accumulators.
__device__ __forceinline__ void gk_mma_tf32(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                            unsigned b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// --- one warp's work on one stage ---------------------------------------------------------------
// Warp (wm, wn) owns C rows wm*64 .. +63 and columns wn*32 .. +31 of the block tile: 4 x 4 mma
// tiles of 16 x 8, acc[mi][ni][0..3]. In every mma fragment, lane = 4*g + t (g = lane >> 2,
// t = lane & 3); accumulator c0, c1 sit at (row g, columns 2t, 2t+1) and c2, c3 at row g + 8.
//
// A (both types) comes from ldmatrix.x4: lane l gives the address of row (l & 15), 16-byte chunk
// (l >> 4) of the 16-row slice; matrix j (rows 8*(j&1).., chunk j>>1) lands in register j, lane
// (g, t) receiving row g, bytes 4t..4t+3 of its 16-byte row. That is the mma A fragment:
//   float16 m16n8k16: a0 = A[g][2t, 2t+1], a1 = A[g+8][2t, 2t+1], a2 = A[g][2t+8, 2t+9],
//                     a3 = A[g+8][2t+8, 2t+9]
//   TF32    m16n8k8 : a0 = A[g][t], a1 = A[g+8][t], a2 = A[g][t+4], a3 = A[g+8][t+4]
// (a 16-byte chunk is 8 halves or 4 floats; a 32-bit "pair of b16" is one float, unchanged).
// The 16-bit types (gk_half, gk_bfloat16) share one fragment layout; float (TF32) has its own.
template <typename T>
struct GkMmaWarp {
    unsigned a_ld[2];  // A-tile byte offset of this lane's ldmatrix row, k16 steps 0 and 1
    unsigned b_ld[2];  // B-tile byte offset of this lane's ldmatrix.trans row, columns +0 / +16

    __device__ __forceinline__ GkMmaWarp(int wm, int wn, int lane) {
        const int r = wm * 64 + (lane & 15);
#pragma unroll
        for (int ks = 0; ks < 2; ++ks) a_ld[ks] = gk_mma_a_off(r, 2 * ks + (lane >> 4));
        // B is K x N row-major in shared memory; ldmatrix.trans of the 8 x 8 block at rows
        // k..k+7, columns n..n+7 gives lane (g, t) B[k+2t][n+g] and B[k+2t+1][n+g]: the mma
        // B fragment b0 (b1 is the block at rows k+8..k+15). Lane l addresses row (l & 15) and
        // chunk (l >> 4): registers 0..3 = (b0, b1) of columns n..n+7, then of n+8..n+15.
#pragma unroll
        for (int nj = 0; nj < 2; ++nj)
            b_ld[nj] = GkMma<T>::b_off(lane & 15, wn * 4 + nj * 2 + (lane >> 4));
    }

    // k16 step ks (0 or 1) of the 32-wide stage.
    __device__ __forceinline__ void step(float (&acc)[4][4][4], unsigned a_tile, unsigned b_tile,
                                         int ks) const {
        unsigned a[4][4], b[4][2];
#pragma unroll
        for (int mi = 0; mi < 4; ++mi)
            gk_mma_ldmatrix_x4(a[mi], a_tile + a_ld[ks] + mi * 16 * GK_MMA_ROW_BYTES);
#pragma unroll
        for (int nj = 0; nj < 2; ++nj) {
            unsigned r[4];
            // rows ks*16 .. +15: the XOR term (r & 7) is unchanged by the +16*ks.
            gk_mma_ldmatrix_x4_trans(r, b_tile + b_ld[nj] + ks * 16 * GkMma<T>::B_ROW);
            b[2 * nj][0] = r[0];
            b[2 * nj][1] = r[1];
            b[2 * nj + 1][0] = r[2];
            b[2 * nj + 1][1] = r[3];
        }
#pragma unroll
        for (int mi = 0; mi < 4; ++mi)
#pragma unroll
            for (int ni = 0; ni < 4; ++ni) gk_mma_k16(acc[mi][ni], a[mi], b[ni][0], b[ni][1], T());
    }
    __device__ __forceinline__ void compute(float (&acc)[4][4][4], unsigned a_tile,
                                            unsigned b_tile) const {
        step(acc, a_tile, b_tile, 0);
        step(acc, a_tile, b_tile, 1);
    }
};

template <>
struct GkMmaWarp<float> {
    unsigned a_ld[2];  // as for float16: k8 steps 0 and 1 of the 16-wide stage
    unsigned b_ld[4];  // B-tile byte offset of B[t][wn*32 + ni*8 + g], per ni

    __device__ __forceinline__ GkMmaWarp(int wm, int wn, int lane) {
        const int r = wm * 64 + (lane & 15);
#pragma unroll
        for (int ks = 0; ks < 2; ++ks) a_ld[ks] = gk_mma_a_off(r, 2 * ks + (lane >> 4));
        // ldmatrix.trans would transpose 16-bit halves, not floats, so the TF32 B fragment
        // (b0 = B[k+t][n+g], b1 = B[k+t+4][n+g]) is read with two 32-bit loads. Rows k+t and
        // k+t+4 (k a multiple of 8) have the same swizzle bits (r & 3) = t.
        const int g = lane >> 2, t = lane & 3;
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
            const int n = wn * 32 + ni * 8 + g;
            b_ld[ni] = GkMma<float>::b_off(t, n >> 2) + (n & 3) * 4;
        }
    }

    // k8 step ks (0 or 1) of the 16-wide stage.
    __device__ __forceinline__ void step(float (&acc)[4][4][4], unsigned a_tile, unsigned b_tile,
                                         int ks) const {
        unsigned a[4][4], b[4][2];
#pragma unroll
        for (int mi = 0; mi < 4; ++mi) {
            gk_mma_ldmatrix_x4(a[mi], a_tile + a_ld[ks] + mi * 16 * GK_MMA_ROW_BYTES);
#pragma unroll
            for (int j = 0; j < 4; ++j) a[mi][j] = gk_mma_to_tf32(a[mi][j]);
        }
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
            const unsigned p = b_tile + b_ld[ni] + ks * 8 * GkMma<float>::B_ROW;
            b[ni][0] = gk_mma_to_tf32(gk_mma_lds32(p));
            b[ni][1] = gk_mma_to_tf32(gk_mma_lds32(p + 4 * GkMma<float>::B_ROW));
        }
#pragma unroll
        for (int mi = 0; mi < 4; ++mi)
#pragma unroll
            for (int ni = 0; ni < 4; ++ni)
                gk_mma_tf32(acc[mi][ni], a[mi], b[ni][0], b[ni][1]);
    }
    __device__ __forceinline__ void compute(float (&acc)[4][4][4], unsigned a_tile,
                                            unsigned b_tile) const {
        step(acc, a_tile, b_tile, 0);
        step(acc, a_tile, b_tile, 1);
    }
};

// A copy of x that the compiler cannot see through, so nothing computed from it is hoisted out
// of the K loop. The generic loader recomputes its per-element offsets from a few such values
// each stage (one or two integer ops per element) instead of keeping 16+ precomputed addresses
// live across the loop, which would not fit beside the 64 accumulators.
__device__ __forceinline__ int gk_mma_opaque(int x) {
    asm volatile("" : "+r"(x));
    return x;
}
__device__ __forceinline__ long long gk_mma_opaque(long long x) {
    asm volatile("" : "+l"(x));
    return x;
}
__device__ __forceinline__ unsigned gk_mma_opaque(unsigned x) {
    asm volatile("" : "+r"(x));
    return x;
}

// Loader of the generic (not ALIGNED) path. Per stage each thread loads E = BK/2 elements of
// A and E of B (16 for float16, 8 for float32) with scalar loads into registers and stores them
// to a shared stage. Element i of A sits at tile position (ar0 + i*ADR, ac0 + i*ADC), of B at
// (br0 + i*BDR, bc0 + i*BDC); one of each step pair is 0 and the thread part is below the
// nonzero step, so the two parts occupy disjoint bits: r = r0 | i*DR. Since the swizzles are
// XOR-linear, the shared address splits into a per-thread part and a compile-time part per
// element. The stage is moved in two halves (elements 0..H-1, then H..E-1) so that only
// 16 (float16) or 8 (float32) loaded values are live beside the accumulators at a time.
// A_KFAST: threads run along K in A (else along M); B_NFAST: along N in B (else along K).
template <typename T, typename Index, bool A_KFAST, bool B_NFAST>
struct GkMmaGenericLoader {
    typedef GkMma<T> Cfg;
    typedef typename Cfg::Bits Bits;
    static constexpr int BK = Cfg::BK, VEC = Cfg::VEC, SZ = (int)sizeof(T);
    static constexpr int E = GK_MMA_BM * BK / GK_MMA_THREADS;  // = BK * GK_MMA_BN / threads
    static constexpr int H = E / 2;
    static constexpr int ADR = A_KFAST ? GK_MMA_THREADS / BK : 0;
    static constexpr int ADC = A_KFAST ? 0 : GK_MMA_THREADS / GK_MMA_BM;
    static constexpr int BDR = B_NFAST ? GK_MMA_THREADS / GK_MMA_BN : 0;
    static constexpr int BDC = B_NFAST ? 0 : GK_MMA_THREADS / BK;

    int ar0, ac0, br0, bc0;
    unsigned a_p, a_q, b_p, b_q;  // shared offset of element i: P + i*DR*ROW + .. + (Q ^ ..)
    const Bits* a_ptr;            // element 0 of this thread in the stage at k_load
    const Bits* b_ptr;
    Index a_step, b_step;         // element i is at ptr + i*step
    Index a_kstep, b_kstep;       // one stage along K
    int a_rows, b_cols;           // rows of A and columns of B inside the block tile
    Index K, k_inner, k_load;     // stages starting below k_inner are wholly inside
    Bits ra[H], rb[H];

    __device__ __forceinline__ GkMmaGenericLoader(const T* Ab, const T* Bb, Index M, Index N,
                                                  Index K_, Index m0, Index n0, Index a_rs,
                                                  Index a_cs, Index b_rs, Index b_cs, int tid) {
        ar0 = A_KFAST ? tid / BK : tid % GK_MMA_BM;
        ac0 = A_KFAST ? tid % BK : tid / GK_MMA_BM;
        br0 = B_NFAST ? tid / GK_MMA_BN : tid % BK;
        bc0 = B_NFAST ? tid % GK_MMA_BN : tid / BK;
        a_p = (unsigned)(ar0 * GK_MMA_ROW_BYTES + (ac0 % VEC) * SZ);
        a_q = (unsigned)(((ac0 / VEC) ^ gk_mma_a_swz(ar0)) << 4);
        b_p = (unsigned)(GK_MMA_A_BYTES + br0 * Cfg::B_ROW + (bc0 % VEC) * SZ);
        b_q = (unsigned)(((bc0 / VEC) ^ Cfg::b_swz(br0)) << 4);
        a_step = (Index)ADR * a_rs + (Index)ADC * a_cs;
        b_step = (Index)BDR * b_rs + (Index)BDC * b_cs;
        a_ptr = reinterpret_cast<const Bits*>(Ab + (m0 + ar0) * a_rs + (Index)ac0 * a_cs);
        b_ptr = reinterpret_cast<const Bits*>(Bb + (Index)br0 * b_rs + (n0 + bc0) * b_cs);
        a_kstep = (Index)BK * a_cs;
        b_kstep = (Index)BK * b_rs;
        a_rows = M - m0 < GK_MMA_BM ? (int)(M - m0) : GK_MMA_BM;
        b_cols = N - n0 < GK_MMA_BN ? (int)(N - n0) : GK_MMA_BN;
        K = K_;
        k_inner = a_rows == GK_MMA_BM && b_cols == GK_MMA_BN ? K - K % BK : 0;
        k_load = 0;
    }

    // Global -> registers: half h of the stage at k_load (zero outside the matrices). Half 1
    // then moves on to the next stage.
    template <int h>
    __device__ __forceinline__ void load() {
        const Index as = gk_mma_opaque(a_step), bs = gk_mma_opaque(b_step);
        const Bits* p = a_ptr + (Index)(h * H) * as;
        const Bits* q = b_ptr + (Index)(h * H) * bs;
        if (k_load < k_inner) {  // whole stage inside both matrices: no checks
#pragma unroll
            for (int j = 0; j < H; ++j, p += as) ra[j] = *p;
#pragma unroll
            for (int j = 0; j < H; ++j, q += bs) rb[j] = *q;
        } else {
            const int k_left = K - k_load < BK ? (int)(K - k_load) : BK;
            const int a_r = gk_mma_opaque(a_rows - ar0), a_k = k_left - ac0;
            const int b_k = k_left - br0, b_c = gk_mma_opaque(b_cols - bc0);
#pragma unroll
            for (int j = 0; j < H; ++j, p += as) {
                const int i = h * H + j;
                ra[j] = (i * ADR < a_r && i * ADC < a_k) ? *p : (Bits)0;
            }
#pragma unroll
            for (int j = 0; j < H; ++j, q += bs) {
                const int i = h * H + j;
                rb[j] = (i * BDR < b_k && i * BDC < b_c) ? *q : (Bits)0;
            }
        }
        if (h == 1) {
            a_ptr += a_kstep;
            b_ptr += b_kstep;
            k_load += BK;
        }
    }

    // Registers -> shared stage (swizzled like the cp.async path).
    template <int h>
    __device__ __forceinline__ void store(unsigned stage) const {
        const unsigned ap = stage + a_p, aq = gk_mma_opaque(a_q);
        const unsigned bp = stage + b_p, bq = gk_mma_opaque(b_q);
#pragma unroll
        for (int j = 0; j < H; ++j) {
            const int i = h * H + j;
            const int y = ((i * ADC) / VEC) ^ gk_mma_a_swz(i * ADR);
            gk_mma_sts(ap + i * ADR * GK_MMA_ROW_BYTES + ((i * ADC) % VEC) * SZ + (aq ^ (y << 4)),
                       ra[j]);
        }
#pragma unroll
        for (int j = 0; j < H; ++j) {
            const int i = h * H + j;
            const int y = ((i * BDC) / VEC) ^ Cfg::b_swz(i * BDR);
            gk_mma_sts(bp + i * BDR * Cfg::B_ROW + ((i * BDC) % VEC) * SZ + (bq ^ (y << 4)), rb[j]);
        }
    }
};

// K loop of the generic path: two shared stages; the next stage's halves are loaded while the
// warps run the current stage's two mma k-steps, and stored after each.
template <typename T, typename Index, bool A_KFAST, bool B_NFAST>
__device__ __forceinline__ void gk_mma_generic_loop(float (&acc)[4][4][4],
                                                    const GkMmaWarp<T>& frag, unsigned smem,
                                                    const T* Ab, const T* Bb, Index M, Index N,
                                                    Index K, Index m0, Index n0, Index a_rs,
                                                    Index a_cs, Index b_rs, Index b_cs, int tid) {
    GkMmaGenericLoader<T, Index, A_KFAST, B_NFAST> ld(Ab, Bb, M, N, K, m0, n0, a_rs, a_cs, b_rs,
                                                      b_cs, tid);
    ld.template load<0>();
    ld.template store<0>(smem);
    ld.template load<1>();
    ld.template store<1>(smem);
    unsigned tile = smem, next = smem + GK_MMA_STAGE_BYTES;
    for (;;) {
        // Stage `tile` is complete, and every warp is done with stage `next` (read in the
        // previous iteration), which the stores below overwrite.
        __syncthreads();
        const bool more = ld.k_load < K;  // k_load: start of the stage after `tile`
        if (more) ld.template load<0>();  // in flight during the first k-step
        frag.step(acc, tile, tile + GK_MMA_A_BYTES, 0);
        if (more) {
            ld.template store<0>(next);
            ld.template load<1>();
        }
        frag.step(acc, tile, tile + GK_MMA_A_BYTES, 1);
        if (!more) break;
        ld.template store<1>(next);
        const unsigned t = tile;
        tile = next;
        next = t;
    }
}

// ---------------------------------------------------------------------------------------------
// Rung 7 - mma: the block computes a 128 x 128 tile of C on the tensor cores with warp-wide
// mma.sync instructions. A SIMT kernel issues one FMA per thread per instruction; one
// mma.m16n8k16 does 16 x 8 x 16 = 2048 multiply-adds for the warp, and the tensor cores are
// rated at many times the FMA throughput of the CUDA cores (on an H100, about 15x for float16
// and 7x for TF32 against float32 FMA, per NVIDIA's datasheet). What limits the kernel is how
// fast operands reach them:
//  * 8 warps (2 x 4) each own a 64 x 32 tile of C: 4 x 4 mma tiles, 64 float32 accumulators
//    per thread. Per k16 step a warp loads 4 A fragments and 4 B fragments and issues 16 mmas.
//  * ldmatrix.x4 loads four 8 x 8 blocks of 16-bit values from shared memory into the mma
//    fragment layout in one instruction; .trans transposes on the way, so B can stay K x N
//    row-major. Shared tiles are XOR-swizzled in 16-byte chunks so ldmatrix is bank-conflict
//    free without padding.
//  * ALIGNED (the host guarantees unit column strides, row and batch strides that are
//    multiples of 16 bytes and 16-byte aligned bases): 16-byte cp.async copies go straight
//    from global to shared memory, without registers, into a 4-stage ring. While the warps
//    multiply stage s, the copies of the 3 stages ahead are in flight, and one barrier per
//    stage orders them. The src-size operand zero-fills chunks past M, N or K (a chunk partly
//    past K copies only its in-range bytes), so edge tiles need no separate code path.
//  * Not ALIGNED (transposed or odd-strided views, rows that are not 16-byte aligned, such as
//    K = 4097): each thread loads its share of the next stage with scalar loads (zero outside
//    the matrix; no checks for stages wholly inside) into registers, half a stage during each
//    of the current stage's two mma k-steps, and stores it to the other of two shared stages.
//    Consecutive threads walk along the operand's unit-stride axis when it has one (row-major
//    or column-major A and B each get their own compiled loop). Slower, correct for any
//    strides, including negative and zero ones.
// float16 and bfloat16: the inputs enter the mma exactly; products accumulate into float32 (the
// summation inside one mma is the hardware's), and each result is rounded once (cvt.rn).
// float32 runs in TF32 mode: A and B fragments are rounded to TF32 (cvt.rna.tf32.f32: 10-bit
// mantissa, relative rounding error at most 2^-11 per operand) and multiplied with mma.m16n8k8
// into float32 accumulators. Each term a_k * b_k is then off by up to about 2 * 2^-11 of
// |a_k| |b_k|, so C is accurate to about 2^-10 (|A| @ |B|) elementwise, not to float32
// precision: with |a|, |b| <= 1 the error bound grows like K * 2^-11 per rounded operand,
// against about K * 2^-24 for a float32 FMA loop. Tests need a TF32 tolerance.
// Accumulation order is fixed (K in increasing 16- or 8-wide steps; no atomics, no split-K),
// so results are bitwise reproducible on one GPU model. Launch: see the contract at the top.
// Measured (H200): float16 0.42 (4096^3) and 0.49 (8192^3) of cuBLAS, 1.03 at 4095x4097x4099;
// TF32 0.33-0.36 of cuBLAS TF32. cuBLAS uses Hopper's wgmma, which mma.sync cannot reach.
// ---------------------------------------------------------------------------------------------
template <typename T, typename Index, bool ALIGNED, int THREADS, int BM, int BN, int STAGES,
          int SHARED_BYTES>
__global__ void __launch_bounds__(THREADS, 2)
    matmul_mma(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, Index M,
               Index N, Index K, Index batch, Index a_batch_stride, Index a_row_stride,
               Index a_col_stride, Index b_batch_stride, Index b_row_stride,
               Index b_col_stride) {
    static_assert(THREADS == GK_MMA_THREADS && BM == GK_MMA_BM && BN == GK_MMA_BN &&
                      STAGES == GK_MMA_STAGES && SHARED_BYTES == GK_MMA_SMEM_BYTES,
                  "the host's geometry is the layout this kernel is written for");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    typedef GkMma<T> Cfg;
    constexpr int BK = Cfg::BK, VEC = Cfg::VEC;
    extern __shared__ __align__(128) unsigned char gk_mma_smem[];

    const Index b = blockIdx.z;
    if (b >= batch) return;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp >> 2, wn = warp & 3;
    const Index m0 = (Index)blockIdx.y * GK_MMA_BM;
    const Index n0 = (Index)blockIdx.x * GK_MMA_BN;
    const T* Ab = A + b * a_batch_stride;
    const T* Bb = B + b * b_batch_stride;
    const unsigned smem = gk_shared_address(gk_mma_smem);

    float acc[4][4][4];
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[mi][ni][j] = 0.0f;
    const GkMmaWarp<T> frag(wm, wn, lane);

    if constexpr (ALIGNED) {
        // Each thread copies 2 chunks of A and 2 of B per stage (512 + 512 chunks of 16 bytes).
        // A: chunk a_c (0..3) along K of rows a_r and a_r + 64.
        // B: chunk b_c along N of rows b_r and b_r + B_RSTEP (16 rows apart for float16,
        //    8 for float32); the second of each pair is 4096 bytes after the first in shared
        //    memory (the swizzle bits repeat).
        constexpr int BCH = GK_MMA_BN / VEC;           // chunks per B row: 16 or 32
        constexpr int B_RSTEP = GK_MMA_THREADS / BCH;  // 16 or 8
        const int a_c = tid & 3, a_r = tid >> 2;
        const int b_c = tid % BCH, b_r = tid / BCH;
        const unsigned a_dst = gk_mma_a_off(a_r, a_c);
        const unsigned b_dst = GK_MMA_A_BYTES + Cfg::b_off(b_r, b_c);
        const T* a_src[2];
        bool a_in[2];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const Index m = m0 + a_r + 64 * i;
            a_in[i] = m < M;
            a_src[i] = Ab + m * a_row_stride + a_c * VEC;  // dereferenced only if a_in[i]
        }
        const T* b_src = Bb + (Index)b_r * b_row_stride + n0 + b_c * VEC;
        const Index b_rstep = (Index)B_RSTEP * b_row_stride;
        const Index b_kstep = (Index)BK * b_row_stride;
        const Index n_left = N - (n0 + b_c * VEC);  // B columns from this chunk to the edge
        const int b_bytes = n_left >= VEC ? 16 : (n_left > 0 ? (int)n_left * (int)sizeof(T) : 0);
        const Index ktiles = (K + BK - 1) / BK;
        Index k_load = 0;  // first k of the next stage to copy

        auto load_stage = [&](unsigned stage) {
            const Index a_k_left = K - (k_load + a_c * VEC);
            const int a_bytes =
                a_k_left >= VEC ? 16 : (a_k_left > 0 ? (int)a_k_left * (int)sizeof(T) : 0);
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                const int bytes = a_in[i] ? a_bytes : 0;
                gk_copy16_async_zfill(stage + a_dst + i * 64 * GK_MMA_ROW_BYTES,
                                  bytes ? a_src[i] : Ab, bytes);
                a_src[i] += BK;  // a_col_stride == 1
            }
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                const int bytes = k_load + b_r + B_RSTEP * i < K ? b_bytes : 0;
                gk_copy16_async_zfill(stage + b_dst + i * B_RSTEP * Cfg::B_ROW,
                                  bytes ? b_src + i * b_rstep : Bb, bytes);
            }
            b_src += b_kstep;
            k_load += BK;
        };

        // Prologue: stages 0 .. STAGES-2 in flight, one commit group each (empty past K, so
        // the group count, and with it wait_group's meaning, never depends on K).
#pragma unroll
        for (int s = 0; s < GK_MMA_STAGES - 1; ++s) {
            if (s < ktiles) load_stage(smem + s * GK_MMA_STAGE_BYTES);
            gk_copy_commit();
        }
        int read = 0, write = GK_MMA_STAGES - 1;
        for (Index kt = 0; kt < ktiles; ++kt) {
            // This thread's copies into stage `read` are complete once at most STAGES-2 newer
            // groups are pending; the barrier makes every thread's copies visible and ensures
            // all warps have finished stage `write` (read one iteration ago) before it is
            // overwritten below.
            gk_copy_wait<GK_MMA_STAGES - 2>();
            __syncthreads();
            if (kt + GK_MMA_STAGES - 1 < ktiles) load_stage(smem + write * GK_MMA_STAGE_BYTES);
            gk_copy_commit();
            const unsigned tile = smem + read * GK_MMA_STAGE_BYTES;
            frag.compute(acc, tile, tile + GK_MMA_A_BYTES);
            read = read + 1 == GK_MMA_STAGES ? 0 : read + 1;
            write = write + 1 == GK_MMA_STAGES ? 0 : write + 1;
        }
        gk_copy_wait<0>();  // only empty groups remain; nothing outlives the block
    } else {
        // Consecutive threads run along K in A unless A is column-major (unit row stride, so
        // they run along M), and along N in B unless B is column-major (they run along K).
        // The choice is uniform over the grid; each variant has its own compiled loop.
        const bool a_kfast = !(a_row_stride == 1 && a_col_stride != 1);
        const bool b_nfast = !(b_row_stride == 1 && b_col_stride != 1);
        if (a_kfast) {
            if (b_nfast)
                gk_mma_generic_loop<T, Index, true, true>(acc, frag, smem, Ab, Bb, M, N, K, m0, n0,
                                                          a_row_stride, a_col_stride, b_row_stride,
                                                          b_col_stride, tid);
            else
                gk_mma_generic_loop<T, Index, true, false>(acc, frag, smem, Ab, Bb, M, N, K, m0, n0,
                                                           a_row_stride, a_col_stride,
                                                           b_row_stride, b_col_stride, tid);
        } else {
            if (b_nfast)
                gk_mma_generic_loop<T, Index, false, true>(acc, frag, smem, Ab, Bb, M, N, K, m0, n0,
                                                           a_row_stride, a_col_stride,
                                                           b_row_stride, b_col_stride, tid);
            else
                gk_mma_generic_loop<T, Index, false, false>(acc, frag, smem, Ab, Bb, M, N, K, m0,
                                                            n0, a_row_stride, a_col_stride,
                                                            b_row_stride, b_col_stride, tid);
        }
    }

    // Epilogue: lane (g, t) holds C[row + g (+8)][col + 2t, 2t+1] of each mma tile. Pairs go out
    // as one 4-byte (float16) or 8-byte (float32) store when N is even and C is aligned for it.
    const int g = lane >> 2, t = lane & 3;
    T* Cb = C + b * M * N;
    const bool pair = (N & 1) == 0 &&
                      (reinterpret_cast<unsigned long long>(C) & (2 * sizeof(T) - 1)) == 0;
#pragma unroll
    for (int mi = 0; mi < 4; ++mi) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const Index m = m0 + wm * 64 + mi * 16 + h * 8 + g;
            if (m >= M) continue;
            T* row = Cb + m * N;
#pragma unroll
            for (int ni = 0; ni < 4; ++ni) {
                const Index n = n0 + wn * 32 + ni * 8 + 2 * t;
                gk_mma_store2(row + n, acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1], n < N,
                              n + 1 < N, pair);
            }
        }
    }
#else
    asm volatile("trap;");  // the host launches this rung on sm_80 and newer only
#endif
}

// ---------------------------------------------------------------------------------------------
// Rung 10 - gemv: products with a few rows of A (decode steps: M of 1 to 16), bound by reading
// B once. Rung 7's 128 x 128 tiles (and rung 9's 64-row ones) compute rows of zeros there and
// stage B through shared memory; here each warp streams 16 rows x 64 columns of B straight
// from global memory into registers (four 16-byte loads a lane, every 128-byte line whole) and
// feeds them to mma.sync as the *A* operand of D^T = B^T A^T: a lane's two rows of one column
// pair up into the 16-bit pairs the fragment wants (byte permutes), and which of the tile's
// k and n each fragment slot stands for is this kernel's own numbering, the same for B and A,
// so the sums are those of C = A B. A (8 or 16 rows of the tile, MT = 1 or 2 mma columns) is
// the B operand: each step's 16 columns of it staged in the warp's own rows of shared memory.
// Launch contract (ops/matmul/rungs.py, GEMV_GEOMETRY; by MT):
//   threads per block : THREADS = 512 (16 warps along K) for MT = 1, 256 (8) for MT = 2 (its
//                       warp sums take 32 KiB at 8 warps), blockDim = (THREADS, 1, 1)
//   steps in flight   : DEPTH = 3 for MT = 1, 2 for MT = 2 (each step 4 words of B a lane);
//                       2 for LAYOUT 3 (8 words a lane)
//   blocks an SM      : BLOCKS = 1 (MT = 1) or 2 (MT = 2), the launch bounds' minimum
//   grid              : (ceil(N / 64), splits, matrices x ceil(M / (8 MT)))
//   a block           : 64 columns of C, 8 MT rows, rows [split * k_split, + k_split) of K
// The warps' tiles are summed in shared memory in warp order; with one split the block writes
// C, else its float32 tile goes to partials and the last of the tile's blocks to finish (an
// integer ticket, as reduce_one_pass) adds the splits in split order and writes C, resetting
// the ticket. Every sum has one order: results are bitwise reproducible. B's layout (LAYOUT,
// the host checks it): 0 any strides, element by element; 1 unit column stride and 16-byte
// aligned rows, a lane's 8 columns of one row in a word; 2 unit row stride and 8-byte aligned
// columns (B = W^T of a row-major W, as in x @ W.T): a lane loads k = 4t .. 4t + 3 of each of
// its 8 columns as one word, its fragment slots 2t, 2t + 1, 2t + 8 and 2t + 9 standing for
// those four k (A's staged words read in that order too), so the four lanes of a column read
// 32 contiguous bytes and the pairs need no permutes; 3 the same columns 16-byte aligned: a
// warp's step takes 32 rows of B (two mmas), a lane loading k = 8t .. 8t + 7 of each of its 8
// columns as one word, mma q of a product taking its words 2q and 2q + 1 (k = 8t + 4q .. + 3),
// DEPTH 2 (a step is 8 words a lane; rungs.py, GEMV_COLUMN_WORDS_DEPTH), and the splits of K
// whole steps of 32 rows a warp. The main loop has two forms, chosen per block: where B is
// read in words, the block's 64 columns lie inside N, A's rows are whole words and K is a
// multiple of 8, every load of B and A is one instruction under one predicate (B's through
// the non-coherent path, not kept in L1: each block reads its B once); other blocks check
// each word's edges and read partial words element by element. With that code in the one
// loop, a pass of three steps took about 2000 instructions (sm_90) against
// 330 now; the new form takes 8-11% less time held (level at 16 x 4096 x 4096; x @ W^T 3-19%),
// of which the cache hint is 1.5-4.5 points (NOTES 216).
// Measured (H100, float16, 8192 x 8192; NOTES 154): held, of cuBLAS, one row 0.89 -> 0.91-0.92
// with the geometry by MT above (256 threads and three steps in flight before), level with
// rung 9's split_k; sixteen rows 0.82 -> 0.83-0.84 (split_k 0.88-0.90). One launch where
// split_k takes two: per call 3-6% ahead of it at 1 and 8 rows, so auto takes this rung for
// up to 8 rows on Hopper too; of a device copy, one row 0.93 held, 0.81 per call. LAYOUT 2
// (x @ W.T, NOTES 161): 1 x 8192 x 8192 0.093 -> 0.061 ms held (cuBLAS 0.049), level with
// cuBLAS per call; the Hopper rungs copy such a B every call (0.56 ms). The loop of whole words
// (H200, NOTES 216), held: 1 x 8192 x 8192 42.3 -> 39.0 us (0.79 -> 0.86 of a device copy;
// bench: 0.91 held, 0.78 per call), 16 rows 47.1 -> 42.9, 1 x 4096 x 14336 44.2 -> 40.1, the
// same through W^T 59.8 -> 48.7. LAYOUT 3 (H200, NOTES 219), held, against LAYOUT 2 on the same
// B: 1 x 8192 x 8192 through W^T 50.3 -> 39.6 us (0.65 -> 0.83 of a device copy; cuBLAS 38.6),
// 16 rows 58.3 -> 45.2, 1 x 4096 x 14336 47.7 -> 37.7.
// ---------------------------------------------------------------------------------------------
// 8 consecutive 16-bit elements of one row of B (zeros past N or outside the K range).
template <typename T, bool ALIGNED>
__device__ __forceinline__ uint4 gk_gemv_load_b(const T* __restrict__ row, int n, int N,
                                                i64 col_stride, bool in) {
    uint4 w = make_uint4(0u, 0u, 0u, 0u);
    if (!in) return w;
    if (ALIGNED && n + 8 <= N) return __ldg(reinterpret_cast<const uint4*>(row + n));
    unsigned short h[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        h[i] = n + i < N ? __ldg(reinterpret_cast<const unsigned short*>(row + (n + i) * col_stride))
                         : (unsigned short)0;
    }
    w.x = h[0] | ((unsigned)h[1] << 16);
    w.y = h[2] | ((unsigned)h[3] << 16);
    w.z = h[4] | ((unsigned)h[5] << 16);
    w.w = h[6] | ((unsigned)h[7] << 16);
    return w;
}

// row[k], row[k + 1] of a row of A as one pair (zeros outside [k, k_end)).
template <typename T>
__device__ __forceinline__ unsigned gk_gemv_load_a_pair(const T* __restrict__ row, int k,
                                                        int k_end, i64 col_stride) {
    const unsigned short* p = reinterpret_cast<const unsigned short*>(row);
    const unsigned lo = k < k_end ? __ldg(p + k * col_stride) : 0u;
    const unsigned hi = k + 1 < k_end ? __ldg(p + (k + 1) * col_stride) : 0u;
    return lo | (hi << 16);
}

// A word of B, which each block reads once: through the non-coherent path, not kept in L1.
__device__ __forceinline__ uint4 gk_gemv_stream16(const void* p) {
    uint4 w;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(w.x), "=r"(w.y), "=r"(w.z), "=r"(w.w) : "l"(p));
    return w;
}

__device__ __forceinline__ uint2 gk_gemv_stream8(const void* p) {
    uint2 w;
    asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(w.x), "=r"(w.y)
                 : "l"(p));
    return w;
}

__device__ __forceinline__ unsigned gk_gemv_word(const uint4& w, int j) {
    return j == 0 ? w.x : j == 1 ? w.y : j == 2 ? w.z : w.w;
}

// 4 consecutive 16-bit elements k .. k + 3 of one column of B (K-contiguous), zeros past
// k_end or outside the column range.
__device__ __forceinline__ uint2 gk_gemv_load_b_kmajor(const unsigned short* __restrict__ col,
                                                       int k, int k_end, bool in) {
    uint2 w = make_uint2(0u, 0u);
    if (!in) return w;
    if (k + 4 <= k_end) return __ldg(reinterpret_cast<const uint2*>(col + k));
    unsigned short h[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = k + i < k_end ? __ldg(col + k + i) : (unsigned short)0;
    w.x = h[0] | ((unsigned)h[1] << 16);
    w.y = h[2] | ((unsigned)h[3] << 16);
    return w;
}

// 8 consecutive 16-bit elements k .. k + 7 of one column of B (K-contiguous), zeros past
// k_end or outside the column range.
__device__ __forceinline__ uint4 gk_gemv_load_b_kmajor16(const unsigned short* __restrict__ col,
                                                         int k, int k_end, bool in) {
    uint4 w = make_uint4(0u, 0u, 0u, 0u);
    if (!in) return w;
    if (k + 8 <= k_end) return __ldg(reinterpret_cast<const uint4*>(col + k));
    unsigned short h[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) h[i] = k + i < k_end ? __ldg(col + k + i) : (unsigned short)0;
    w.x = h[0] | ((unsigned)h[1] << 16);
    w.y = h[2] | ((unsigned)h[3] << 16);
    w.z = h[4] | ((unsigned)h[5] << 16);
    w.w = h[6] | ((unsigned)h[7] << 16);
    return w;
}

template <typename T, int THREADS, int MT, int DEPTH, int BLOCKS, int LAYOUT>
__global__ void __launch_bounds__(THREADS, BLOCKS)
matmul_gemv(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M, int N,
            int K, int m_blocks, int k_split, i64 a_batch_stride, i64 a_row_stride,
            i64 a_col_stride, i64 b_batch_stride, i64 b_row_stride, i64 b_col_stride,
            float* __restrict__ partials, unsigned int* __restrict__ tickets) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    constexpr int GK_GEMV_COLS = 64;  // columns of C a block: 8 lanes x 8, 128-byte rows of B
    // rows of B a warp takes per step: an mma's K; LAYOUT 3 two mmas' (a 16-byte word a column)
    constexpr int GK_GEMV_ROWS = LAYOUT == 3 ? 32 : 16;
    constexpr int WORDS = LAYOUT == 3 ? 8 : 4;   // 16-byte words of B a lane loads per step
    constexpr int A_PARTS = GK_GEMV_ROWS / 8;    // 16-byte words of a row of A per step
    constexpr int A_ROW = A_PARTS + 1;           // a staged row of A, padded by one word
    constexpr int WARPS = THREADS / 32, MB = 8 * MT, TILE = MB * GK_GEMV_COLS;
    static_assert(THREADS % 32 == 0 && TILE % THREADS == 0, "whole warps; whole tile passes");
    static_assert(WARPS * (TILE * 4 + MB * A_ROW * 16) <= 48 * 1024 && DEPTH >= 2,
                  "the warp sums and A's staged rows fit static shared memory; a ring");
    __shared__ float warp_sums[WARPS][TILE];
    __shared__ bool is_last;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int matrix = blockIdx.z / m_blocks, m0 = (blockIdx.z % m_blocks) * MB;
    const int n0 = blockIdx.x * GK_GEMV_COLS, n = n0 + 8 * g;
    const int k_begin = blockIdx.y * k_split;
    const int k_end = min(K, k_begin + k_split);
    const T* Am = A + matrix * a_batch_stride + (i64)m0 * a_row_stride;
    const T* Bm = B + matrix * b_batch_stride;
    float acc[MT][4][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[mt][j][i] = 0.f;
    // The lane's rows of a step: kb + 2t, kb + 2t + 1 (its fragment's pair t) and kb + 2t + 8,
    // + 9 (pair t + 4); its columns n .. n + 7. A ring of DEPTH steps: the loads of the step
    // DEPTH - 1 ahead go out before each step's products.
    // LAYOUT 2: r[i] holds k = kb + 4t .. + 3 of columns n + 2i (x, y) and n + 2i + 1 (z, w).
    // LAYOUT 3: r[i] holds k = kb + 8t .. + 7 of column n + i.
    auto load = [&](uint4 (&r)[WORDS], int kb, bool whole) {
        if (LAYOUT == 3 && whole) {
            const unsigned short* col = reinterpret_cast<const unsigned short*>(Bm) +
                                        (i64)n * b_col_stride + kb + 8 * t;
            const bool in = kb + 8 * t < k_end;
#pragma unroll
            for (int i = 0; i < WORDS; ++i) {
                r[i] = in ? gk_gemv_stream16(col + i * b_col_stride) : make_uint4(0u, 0u, 0u, 0u);
            }
        } else if constexpr (LAYOUT == 3) {
            const unsigned short* col = reinterpret_cast<const unsigned short*>(Bm) +
                                        (i64)n * b_col_stride;
#pragma unroll
            for (int i = 0; i < WORDS; ++i) {
                r[i] = gk_gemv_load_b_kmajor16(col + i * b_col_stride, kb + 8 * t, k_end,
                                               n + i < N);
            }
        } else if (LAYOUT == 2 && whole) {
            const unsigned short* col = reinterpret_cast<const unsigned short*>(Bm) +
                                        (i64)n * b_col_stride + kb + 4 * t;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                uint2 lo = make_uint2(0u, 0u), hi = make_uint2(0u, 0u);
                if (kb + 4 * t < k_end) {
                    lo = gk_gemv_stream8(col + 2 * i * b_col_stride);
                    hi = gk_gemv_stream8(col + (2 * i + 1) * b_col_stride);
                }
                r[i] = make_uint4(lo.x, lo.y, hi.x, hi.y);
            }
        } else if (LAYOUT == 1 && whole) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int k = kb + 2 * t + (i & 1) + 8 * (i >> 1);
                r[i] = k < k_end ? gk_gemv_stream16(Bm + k * b_row_stride + n)
                                 : make_uint4(0u, 0u, 0u, 0u);
            }
        } else if constexpr (LAYOUT == 2) {
            const unsigned short* col = reinterpret_cast<const unsigned short*>(Bm) +
                                        (i64)n * b_col_stride;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const uint2 lo = gk_gemv_load_b_kmajor(col + 2 * i * b_col_stride, kb + 4 * t,
                                                       k_end, n + 2 * i < N);
                const uint2 hi = gk_gemv_load_b_kmajor(col + (2 * i + 1) * b_col_stride,
                                                       kb + 4 * t, k_end, n + 2 * i + 1 < N);
                r[i] = make_uint4(lo.x, lo.y, hi.x, hi.y);
            }
        } else {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int k = kb + 2 * t + (i & 1) + 8 * (i >> 1);
                r[i] = gk_gemv_load_b<T, LAYOUT == 1>(Bm + k * b_row_stride, n, N,
                                                      b_col_stride, k < k_end);
            }
        }
    };
    // A's 8 MT rows x 16 columns of a step (LAYOUT 3: 32), staged in the warp's own rows of 48
    // bytes (80) (lane (g, t) then reads words 12 g + t and 12 g + t + 4: distinct banks;
    // LAYOUT 3 words 20 g + 4 t + 2 q, two lanes to a bank at most): one 16-byte load a lane
    // and word where A's rows are whole words, its elements one at a time otherwise.
    __shared__ uint4 a_tiles[WARPS][MB][A_ROW];
    const bool a_words = a_col_stride == 1 && a_row_stride % 8 == 0 &&
                         reinterpret_cast<unsigned long long>(Am) % 16 == 0;
    auto stage_a = [&](int kb, bool whole) {
        __syncwarp();  // every lane has read the step before
#pragma unroll
        for (int pass = 0; pass < (A_PARTS * MB + 31) / 32; ++pass) {
            const int e = 32 * pass + lane;
            if (e >= A_PARTS * MB) break;
            const int row = e / A_PARTS, part = e % A_PARTS, k = kb + 8 * part;
            uint4 w = make_uint4(0u, 0u, 0u, 0u);
            if (row < M - m0) {
                const T* p = Am + row * a_row_stride;
                if (whole) {
                    if (k < k_end) w = __ldg(reinterpret_cast<const uint4*>(p + k));
                } else if (a_words && k + 8 <= k_end) {
                    w = __ldg(reinterpret_cast<const uint4*>(p + k));
                } else {
                    w.x = gk_gemv_load_a_pair(p, k, k_end, a_col_stride);
                    w.y = gk_gemv_load_a_pair(p, k + 2, k_end, a_col_stride);
                    w.z = gk_gemv_load_a_pair(p, k + 4, k_end, a_col_stride);
                    w.w = gk_gemv_load_a_pair(p, k + 6, k_end, a_col_stride);
                }
            }
            a_tiles[warp][row][part] = w;
        }
        __syncwarp();
    };
    auto step = [&](const uint4 (&r)[WORDS], int kb, bool whole) {
        stage_a(kb, whole);
        const unsigned* a_rows = reinterpret_cast<const unsigned*>(a_tiles[warp]);
        if constexpr (LAYOUT == 3) {
            // Two mmas a product, q = 0 and 1: their k pairs t and t + 4 are k = kb + 8t + 4q
            // (+1) and kb + 8t + 4q + 2 (+3), words 2q and 2q + 1 of the lane's 16-byte word of
            // each column; fragment rows g and g + 8 of product j are columns n + 2j and n + 2j
            // + 1, as in the other layouts.
#pragma unroll
            for (int q = 0; q < 2; ++q) {
                unsigned b[MT][2];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    const int word = (8 * mt + g) * 4 * A_ROW + 4 * t + 2 * q;
                    b[mt][0] = a_rows[word];
                    b[mt][1] = a_rows[word + 1];
                }
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const uint4& lo = r[2 * j];
                    const uint4& hi = r[2 * j + 1];
                    unsigned a[4];
                    a[0] = q ? lo.z : lo.x, a[1] = q ? hi.z : hi.x;
                    a[2] = q ? lo.w : lo.y, a[3] = q ? hi.w : hi.y;
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        gk_mma_k16(acc[mt][j], a, b[mt][0], b[mt][1], T());
                    }
                }
            }
        } else {
            // A's pairs: rows m0 + 8 mt + g; columns kb + 2t (+ 8) (LAYOUT 2: kb + 4t (+ 2))
            unsigned b[MT][2];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                const int word = (8 * mt + g) * 4 * A_ROW + (LAYOUT == 2 ? 2 * t : t);
                b[mt][0] = a_rows[word];
                b[mt][1] = a_rows[word + (LAYOUT == 2 ? 1 : 4)];
            }
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                // Fragment rows g and g + 8 of product j are columns n + 2j and n + 2j + 1; its
                // k pairs t and t + 4 are rows kb + 2t (+1) and kb + 2t + 8 (+9) (LAYOUT 2: kb +
                // 4t (+1) and kb + 4t + 2 (+3), one word each).
                unsigned a[4];
                if constexpr (LAYOUT == 2) {
                    a[0] = r[j].x, a[1] = r[j].z, a[2] = r[j].y, a[3] = r[j].w;
                } else {
                    const unsigned w0 = gk_gemv_word(r[0], j), w1 = gk_gemv_word(r[1], j);
                    const unsigned w2 = gk_gemv_word(r[2], j), w3 = gk_gemv_word(r[3], j);
                    a[0] = __byte_perm(w0, w1, 0x5410), a[1] = __byte_perm(w0, w1, 0x7632);
                    a[2] = __byte_perm(w2, w3, 0x5410), a[3] = __byte_perm(w2, w3, 0x7632);
                }
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) gk_mma_k16(acc[mt][j], a, b[mt][0], b[mt][1], T());
            }
        }
    };
    constexpr int STEP = WARPS * GK_GEMV_ROWS;
    const int first = k_begin + warp * GK_GEMV_ROWS;
    auto main_loop = [&](bool whole) {
        uint4 ring[DEPTH][WORDS];
#pragma unroll
        for (int d = 0; d < DEPTH - 1; ++d) load(ring[d], first + d * STEP, whole);
        for (int kb = first; kb < k_end; kb += DEPTH * STEP) {
#pragma unroll
            for (int d = 0; d < DEPTH; ++d) {  // steps past k_end load nothing and add zeros
                load(ring[(d + DEPTH - 1) % DEPTH], kb + (d + DEPTH - 1) * STEP, whole);
                step(ring[d], kb + d * STEP, whole);
            }
        }
    };
    // Blocks of whole words take the loop whose every load is one instruction under one
    // predicate: B read in words (LAYOUT 1, 2 or 3) with all 64 columns inside N, A's rows whole
    // words, and K a multiple of 8 (a step's words then lie wholly inside or outside [k_begin,
    // k_end)). Other blocks check each word's edges and load element by element where needed.
    if (LAYOUT != 0 && n0 + GK_GEMV_COLS <= N && a_words && K % 8 == 0) {
        main_loop(true);
    } else {
        main_loop(false);
    }
    // acc[mt][j]: (column n + 2j, row m0 + 8 mt + 2t), (n + 2j, + 1), (n + 2j + 1, 2t),
    // (n + 2j + 1, 2t + 1); the tile's element (row r, column c) is warp_sums[.][r * 64 + c].
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        const int row = 8 * mt + 2 * t;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int col = 8 * g + 2 * j;
            warp_sums[warp][row * GK_GEMV_COLS + col] = acc[mt][j][0];
            warp_sums[warp][(row + 1) * GK_GEMV_COLS + col] = acc[mt][j][1];
            warp_sums[warp][row * GK_GEMV_COLS + col + 1] = acc[mt][j][2];
            warp_sums[warp][(row + 1) * GK_GEMV_COLS + col + 1] = acc[mt][j][3];
        }
    }
    __syncthreads();
    float sums[TILE / THREADS];
#pragma unroll
    for (int e = 0; e < TILE / THREADS; ++e) {
        const int i = e * THREADS + threadIdx.x;
        float s = warp_sums[0][i];
#pragma unroll
        for (int w = 1; w < WARPS; ++w) s += warp_sums[w][i];
        sums[e] = s;
    }
    T* Cm = C + ((i64)matrix * M + m0) * N;
    const i64 tile = (i64)blockIdx.z * gridDim.x + blockIdx.x;
    if (gridDim.y > 1) {
        float* mine = partials + (tile * gridDim.y + blockIdx.y) * TILE;
#pragma unroll
        for (int e = 0; e < TILE / THREADS; ++e) mine[e * THREADS + threadIdx.x] = sums[e];
        __threadfence();  // the partial is visible to every block before the ticket is taken
        __syncthreads();
        if (threadIdx.x == 0) is_last = atomicAdd(tickets + tile, 1u) == gridDim.y - 1;
        __syncthreads();
        if (!is_last) return;
        __threadfence();  // see the other splits' partials
        const float* all = partials + tile * gridDim.y * TILE;
#pragma unroll
        for (int e = 0; e < TILE / THREADS; ++e) {
            const int i = e * THREADS + threadIdx.x;
            float s = __ldcg(all + i);
            for (int split = 1; split < (int)gridDim.y; ++split) s += __ldcg(all + split * TILE + i);
            sums[e] = s;
        }
        if (threadIdx.x == 0) tickets[tile] = 0u;
    }
#pragma unroll
    for (int e = 0; e < TILE / THREADS; ++e) {
        const int i = e * THREADS + threadIdx.x, row = i / GK_GEMV_COLS, col = n0 + i % GK_GEMV_COLS;
        if (m0 + row < M && col < N) Cm[(i64)row * N + col] = gk_round<T>(sums[e]);
    }
#else
    asm volatile("trap;");  // the host launches this rung on sm_80 and newer only
#endif
}
