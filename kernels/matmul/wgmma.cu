// wgmma.cu - rungs 8, 9 and 11 of the matmul ladder: Hopper's warpgroup MMAs (sm_90a only). It is
// its own source because it is compiled with -arch=sm_90a, which runs on compute capability 9.0 and
// nothing else; the rungs run there only. They share the epilogue store with rung 7 (store.cuh).
//
//   matmul_wgmma<T, THREADS, BM, BN, STAGES, SHARED_BYTES, B_K_MAJOR, A_M_MAJOR>(a_map, b_map,
//                                    C, M, N, K, tiles_m, tiles_n, a_batched, b_batched)
//   matmul_split_k<...>(a_map, b_map, partial, ..., b_batched, k_steps): the same, each block
//       over k_steps of K (blockIdx.z: which), float32 partial tiles; then
//   matmul_split_k_sum<T, THREADS>(partial, C, count, splits): C = the partials' sum.
//   matmul_multicast<...>(a_map, b_map, C, ...): rung 8's signature; clusters of two blocks.
//
// Operands (the host builds one CUtensorMap per operand, 3-D: columns, rows, matrices):
//   A: (batch, M, K), K contiguous (K-major), box BM rows x 128 bytes; or, where A_M_MAJOR
//      (A = X^T of a row-major X, as in X.T @ Y; 16-bit types), X's (batch, K, M), M
//      contiguous, boxes of 64 rows of K x 64 columns of M, BM / 64 of them, read M-major as
//      an N-contiguous B is (no copy of such an A).
//   B: T = gk_half or gk_bfloat16: (batch, K, N), N contiguous (MN-major: wgmma reads it
//      transposed), boxes of 64 rows x 64 columns, BN / 64 of them per stage; or, where
//      B_K_MAJOR (B = W^T of a row-major W, as in x @ W.T), W's (batch, N, K), K contiguous,
//      boxes of 64 rows of N x 128 bytes of K, BN / 64 of them, read K-major as A is (no copy
//      of such a B: float16 8192^3 x @ W.T 1.71 ms per call on an H200, 2.05 through a copy,
//      1.70 with a row-major B; NOTES 223);
//      T = float (TF32): (batch, K, N) as it is, boxes of 32 rows x 32 columns, BN / 32 of them
//      per stage (TF32's wgmma has no transposed shared operand: gk_wg_tf32_block loads B into
//      registers).
//   C: (batch, M, N) C-contiguous T; float32 sums, rounded once when T is a 16-bit type.
// Launch contract (set in one place on the host, ops/matmul/rungs.py, and checked against the
// layout below by static_assert):
//   threads per block      : THREADS = 384 (3 warpgroups)             GK_WG_THREADS
//   block tile of C        : BM x BN = 128 x 256; 128 x 192 (16-bit types) or 128 x 128
//                            where their waves over the SMs cost less or N <= 192 or 128;
//                            128 x 64 where N <= 64; BM = 64 where M <= 64 and BN is 256 or
//                            128                                      gk_wg_shape
//                            TF32 (gk_wg_tf32_block): 256 x 128 in place of 128 x 256 (128 x
//                            128 where M <= 128), 64 x 128 in place of 64-row tiles
//   grid                   : (tiles_m * tiles_n, batch, splits); blockIdx.x is a tile in groups
//                            of GK_WG_GROUP row tiles (neighbouring blocks share panels of A and
//                            B in L2); splits = 1 for rung 8. Rung 8's 16-bit types where N
//                            is a multiple of 8: (min(tiles_m * tiles_n, SMs), batch, 1), block
//                            b taking tiles b, b + gridDim.x, ... (gk_wg_block). Rung 11:
//                            (2 x min(pairs of row tiles x tiles_n, the clusters of two the
//                            GPU runs at once), batch, 1), clusters of 2 blocks along x
//   stages                 : BM = 128: 4 (BN = 256), 5 (192), 6 (128) or 8 (64);
//                            BM = 64: 5 (BN = 256) or 8 (BN = 128); BM = 256: 4
//   dynamic shared memory  : SHARED_BYTES = STAGES x (BM + BN) x 128 + 18432 (the epilogue's
//                            buffer) + 1024 (for alignment); TF32's tiles stage C in the ring
//                            after their last products and leave that buffer unused
//   a_batched, b_batched   : 1 if the operand has a matrix per batch entry, 0 if one is broadcast.
//   M, N, K                : below 2^31 (the host checks); K > 0 (K = 0 needs no kernel).
#include "../common.cuh"
#include "store.cuh"

// The driver's CUtensorMap: 128 opaque bytes, 64-byte aligned, passed by value as a
// __grid_constant__ parameter so that TMA can read it from parameter space.
struct alignas(64) gk_tensor_map {
    u64 words[16];
};

constexpr int GK_WG_THREADS = 384;
constexpr int GK_WG_ROW_BYTES = 128;  // K extent of a stage: 128 bytes
constexpr int GK_WG_GROUP = 8;

// The tile, BM x BN, and the ring's stages: every size that follows from them. BM = 128: the
// two consumer warpgroups take rows 0-63 and 64-127, all BN columns each. BM = 64 (M of at
// most 64, where rows 64-127 would be zeros): both take the 64 rows, and half the columns
// each (SPLIT_N).
template <int BM_, int BN_, int STAGES_>
struct gk_wg_shape {
    static constexpr int BM = BM_, BN = BN_, STAGES = STAGES_;
    static constexpr bool SPLIT_N = BM == 64;
    static constexpr int WG_COLS = SPLIT_N ? BN / 2 : BN;  // columns of one consumer warpgroup
    static constexpr int A_BYTES = BM * GK_WG_ROW_BYTES;   // 16 or 8 KiB
    static constexpr int B_BYTES = BN * GK_WG_ROW_BYTES;   // 32, 24, 16 or 8 KiB
    static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
    // The epilogue's buffer, after the ring: a consumer warpgroup's 64 rows of 128 bytes of C
    // (64 16-bit or 32 float32 columns) and 16 bytes of padding each (gk_wg_store_tile).
    static constexpr int STAGED_PITCH_BYTES = GK_WG_ROW_BYTES + 16;
    static constexpr int STAGED_BYTES = 2 * 64 * STAGED_PITCH_BYTES;  // 18 KiB
    static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + STAGED_BYTES + 1024;  // 1 KiB: align
    static constexpr int SUMS = WG_COLS / 2;  // float32 sums a consumer thread: 64 x WG_COLS / 128
};

// Whether a Hopper kernel's template geometry (the host's, from ops/matmul/rungs.py) is one
// this code is written for: a tile and its stages from the launch contract above.
template <int THREADS, int BM, int BN, int STAGES, int SHARED_BYTES>
__device__ constexpr bool gk_wg_geometry() {
    return THREADS == GK_WG_THREADS &&
           ((BM == 128 && BN == 256 && STAGES == 4) || (BM == 128 && BN == 192 && STAGES == 5) ||
            (BM == 128 && BN == 128 && STAGES == 6) ||
            (BM == 128 && BN == 64 && STAGES == 8) || (BM == 64 && BN == 256 && STAGES == 5) ||
            (BM == 64 && BN == 128 && STAGES == 8) || (BM == 256 && BN == 128 && STAGES == 4)) &&
           SHARED_BYTES == gk_wg_shape<BM, BN, STAGES>::SMEM_BYTES && SHARED_BYTES <= 227 * 1024;
}

// --- inline PTX (sm_90a) -------------------------------------------------------------------------
__device__ __forceinline__ void gk_wg_bar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Arrive once and add `bytes` to the transaction count the phase waits for (the TMA copies
// complete it).
__device__ __forceinline__ void gk_wg_bar_expect(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void gk_wg_bar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Wait until the barrier's phase with this parity has completed.
__device__ __forceinline__ void gk_wg_bar_wait(unsigned bar, unsigned parity) {
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "WAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT;\n"
        "}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
}
// --- clusters of blocks (rung 11) ----------------------------------------------------------------
// This block's rank in its cluster.
__device__ __forceinline__ unsigned gk_wg_cluster_rank() {
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    return rank;
}
// Every thread of every block of the cluster arrives, then waits for all the others.
__device__ __forceinline__ void gk_wg_cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
// Arrive on the barrier at shared address `bar` of the cluster's block `rank` (the arrive's
// default order, release at the block's scope: the form with release at the cluster's scope
// made rung 11 run at 0.58 of rung 8 on an H200; NOTES 212).
__device__ __forceinline__ void gk_wg_bar_arrive_in(unsigned bar, unsigned rank) {
    asm volatile(
        "{\n"
        ".reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
        "}\n" ::"r"(bar),
        "r"(rank)
        : "memory");
}

// A block's ring of STAGES stages: the 1024-byte aligned start of its buffers in the dynamic
// shared memory (128-byte swizzled tiles need that alignment), and the shared addresses of its
// "full" and "empty" barriers (one each per stage, 8 bytes apart).
struct gk_wg_ring {
    unsigned smem, full0, empty0;
};
// The ring of the calling kernel: its barriers (static shared memory), set up by thread 0 while
// the block waits.
// In a cluster of CLUSTER blocks (rung 11) a stage is released by the consumers of every block
// of the cluster (the producers copy B into all of them), and no block copies into its peer's
// ring before the peer's barriers exist.
template <int STAGES, int CLUSTER = 1>
__device__ __forceinline__ gk_wg_ring gk_wg_ring_init() {
    extern __shared__ unsigned char gk_wg_smem[];
    __shared__ __align__(8) u64 full[STAGES], empty[STAGES];
    const gk_wg_ring ring = {(gk_shared_address(gk_wg_smem) + 1023u) & ~1023u,
                             gk_shared_address(full), gk_shared_address(empty)};
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            gk_wg_bar_init(ring.full0 + 8 * s, 1);  // the producer's arrive + the TMA bytes
            // one arrive per consumer warpgroup of the cluster
            gk_wg_bar_init(ring.empty0 + 8 * s, 2 * CLUSTER);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    if constexpr (CLUSTER > 1) gk_wg_cluster_sync();
    else __syncthreads();
    return ring;
}
// One box of a 3-D tensor map to shared memory; completion is reported to `bar` in bytes.
__device__ __forceinline__ void gk_wg_tma_load(unsigned dst, const gk_tensor_map* map, int c0,
                                               int c1, int c2, unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
        "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
        : "memory");
}
// The same box into the shared memory of every block of the cluster in `blocks` (a bit per
// rank), at address `dst` of each; each block's barrier at `bar` counts the bytes it receives.
__device__ __forceinline__ void gk_wg_tma_multicast(unsigned dst, const gk_tensor_map* map,
                                                    int c0, int c1, int c2, unsigned bar,
                                                    unsigned short blocks) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        ".multicast::cluster [%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(dst),
        "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar), "h"(blocks)
        : "memory");
}

// One stage's loads: A's tile (BM rows of M, 128 bytes of K) at `a_tile`, then BOXES boxes of
// B right after it, BOX_BYTES each, box j holding columns n0 + BOX_COLS j .. + BOX_COLS - 1 of
// the stage's K: from an N-contiguous B (B_K_MAJOR false: the box's rows are the stage's K,
// the map's coordinates (n, k)) or from a K-contiguous one (B_K_MAJOR true, B = W^T of a
// row-major (N, K) W, whose map is W's: the box's rows are columns of B, 128 bytes of K each,
// coordinates (k, n); the boxes then lie as A's tile does, BN rows of 128 bytes). A's tile is
// one box of BM rows of 128 bytes of K (K-contiguous A, coordinates (k, m)) or, where
// A_M_MAJOR (A = X^T of a row-major (K, M) X, as in X.T @ Y), BM / 64 boxes of X, each the
// stage's K rows x 64 columns of M (coordinates (m, k)), laid out as an N-contiguous B's boxes
// are. In a cluster of CLUSTER blocks, which share B's tile, the block of rank `rank` loads
// its share of the boxes into every block of the cluster.
template <int A_BYTES, int BOXES, int BOX_COLS, int BOX_BYTES, int CLUSTER = 1,
          bool B_K_MAJOR = false, bool A_M_MAJOR = false>
__device__ __forceinline__ void gk_wg_load_stage(unsigned a_tile, const gk_tensor_map* a_map,
                                                 const gk_tensor_map* b_map, int k, int m0,
                                                 int n0, int a_matrix, int b_matrix,
                                                 unsigned bar, unsigned rank = 0) {
    if constexpr (A_M_MAJOR) {
        static_assert(A_BYTES % BOX_BYTES == 0, "A's tile: whole boxes of 64 columns of M");
#pragma unroll
        for (int j = 0; j < A_BYTES / BOX_BYTES; ++j)
            gk_wg_tma_load(a_tile + j * BOX_BYTES, a_map, m0 + BOX_COLS * j, k, a_matrix, bar);
    } else {
        gk_wg_tma_load(a_tile, a_map, k, m0, a_matrix, bar);
    }
    static_assert(BOXES % CLUSTER == 0, "B's boxes shared evenly by the cluster's blocks");
    constexpr int SHARE = BOXES / CLUSTER;
#pragma unroll
    for (int i = 0; i < SHARE; ++i) {
        const int j = rank * SHARE + i, n = n0 + BOX_COLS * j;
        const int c0 = B_K_MAJOR ? k : n, c1 = B_K_MAJOR ? n : k;
        if constexpr (CLUSTER == 1) {
            gk_wg_tma_load(a_tile + A_BYTES + j * BOX_BYTES, b_map, c0, c1, b_matrix, bar);
        } else {
            gk_wg_tma_multicast(a_tile + A_BYTES + j * BOX_BYTES, b_map, c0, c1, b_matrix, bar,
                                (1u << CLUSTER) - 1);
        }
    }
}
// The producer: thread 0 of warpgroup 0 (whose registers the caller has lowered to 40 with
// setmaxnreg) keeps STAGES stages in flight. Its stages are numbered from `first` on, across
// the block's tiles: stage i takes buffers i % STAGES and waits for their "empty" (the
// consumers' release of stage i - STAGES), arms their "full" with STAGE_BYTES and loads A's and
// B's tiles of K (from (k_begin + j) * BK for the j-th of `steps`) into them (gk_wg_load_stage's
// A_BYTES, BOXES, BOX_COLS, BOX_BYTES, B_K_MAJOR, A_M_MAJOR).
template <int STAGES, int STAGE_BYTES, int BK, int A_BYTES, int BOXES, int BOX_COLS,
          int BOX_BYTES, int CLUSTER = 1, bool B_K_MAJOR = false, bool A_M_MAJOR = false>
__device__ __forceinline__ void gk_wg_produce(const gk_wg_ring& ring, int first, int steps,
                                              int k_begin, const gk_tensor_map& a_map,
                                              const gk_tensor_map& b_map, int m0, int n0,
                                              int a_matrix, int b_matrix, unsigned rank = 0) {
    for (int j = 0; j < steps; ++j) {
        const int i = first + j, s = i % STAGES, k = (k_begin + j) * BK;
        if (i >= STAGES) gk_wg_bar_wait(ring.empty0 + 8 * s, (i / STAGES - 1) & 1);
        const unsigned tiles = ring.smem + s * STAGE_BYTES;
        const unsigned bar = ring.full0 + 8 * s;
        gk_wg_bar_expect(bar, STAGE_BYTES);
        gk_wg_load_stage<A_BYTES, BOXES, BOX_COLS, BOX_BYTES, CLUSTER, B_K_MAJOR, A_M_MAJOR>(
            tiles, &a_map, &b_map, k, m0, n0, a_matrix, b_matrix, bar, rank);
    }
}

// Shared-memory matrix descriptor, 128-byte swizzle: start address, leading and stride byte
// offsets (all in 16-byte units). K-major tiles (8 rows of 128 bytes per swizzle atom): the
// stride offset is 1024 bytes from one group of 8 rows to the next, the leading offset unused.
// The MN-major float16 B tile (64 columns x 64 rows per box): leading offset 8192 bytes from
// one box (64 columns of N) to the next, stride offset 1024 bytes per 8 rows of K; an M-major
// A tile alike (a warpgroup's 64 rows of M are one box).
__device__ __forceinline__ u64 gk_wg_desc(unsigned addr, unsigned leading, unsigned stride) {
    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(leading >> 4) << 16) |
           ((u64)(stride >> 4) << 32) | (1ull << 62);
}
// The descriptor of `desc`'s tile moved by `bytes` (a multiple of 16). The start address is
// the low 14 bits, in 16-byte units, and every shared address lies below 256 KiB, so the
// field never carries into the next: one 32-bit add to the low word, where gk_wg_desc masks,
// shifts and ors. The consumers build a descriptor per operand once and move it per stage and
// k-step (NOTES 136).
__device__ __forceinline__ u64 gk_wg_desc_at(u64 desc, unsigned bytes) {
    u64 moved;
    asm("mov.b64 %0, {%1, %2};"
        : "=l"(moved)
        : "r"((unsigned)desc + (bytes >> 4)), "r"((unsigned)(desc >> 32)));
    return moved;
}

__device__ __forceinline__ void gk_wg_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void gk_wg_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int PENDING>
__device__ __forceinline__ void gk_wg_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory");
}
// Keeps the compiler from moving accumulator reads or writes across a wgmma wait.
template <int SUMS>
__device__ __forceinline__ void gk_wg_pin(float (&d)[SUMS]) {
#pragma unroll
    for (int i = 0; i < SUMS; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define GK_WG_D8(i)                                                                         \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
        "+f"(d[i + 6]), "+f"(d[i + 7])
#define GK_WG_D32 GK_WG_D8(0), GK_WG_D8(8), GK_WG_D8(16), GK_WG_D8(24)
#define GK_WG_D64                                                                            \
    GK_WG_D8(0), GK_WG_D8(8), GK_WG_D8(16), GK_WG_D8(24), GK_WG_D8(32), GK_WG_D8(40),          \
        GK_WG_D8(48), GK_WG_D8(56)
#define GK_WG_D96                                                                            \
    GK_WG_D8(0), GK_WG_D8(8), GK_WG_D8(16), GK_WG_D8(24), GK_WG_D8(32), GK_WG_D8(40),          \
        GK_WG_D8(48), GK_WG_D8(56), GK_WG_D8(64), GK_WG_D8(72), GK_WG_D8(80), GK_WG_D8(88)
#define GK_WG_D128                                                                           \
    GK_WG_D8(0), GK_WG_D8(8), GK_WG_D8(16), GK_WG_D8(24), GK_WG_D8(32), GK_WG_D8(40),          \
        GK_WG_D8(48), GK_WG_D8(56), GK_WG_D8(64), GK_WG_D8(72), GK_WG_D8(80), GK_WG_D8(88),    \
        GK_WG_D8(96), GK_WG_D8(104), GK_WG_D8(112), GK_WG_D8(120)
#define GK_WG_REGS32 \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15," \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define GK_WG_REGS64 \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15," \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31," \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47," \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define GK_WG_REGS96 \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15," \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31," \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47," \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63," \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79," \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define GK_WG_REGS128 \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15," \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31," \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47," \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63," \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79," \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95," \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111," \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"

// The two products of one width N of B (SUMS = N / 2 float32 sums a thread, held in the
// registers GK_WG_REGS<SUMS> lists and GK_WG_D<SUMS> binds):
// d += A(64 x 16) @ B(16 x N) with float16 or bfloat16 operands; float32 sums. A is K-major
// where A_M_MAJOR is false, M-major (wgmma's transposed operand, laid out as an N-contiguous
// B's boxes) where it is true; B is MN-major (transposed) where B_K_MAJOR is false, K-major
// (laid out as A's tile) where it is true. A, B, TA and TB are the operand numbers of the two
// descriptors and of the two transpose flags.
#define GK_WG_MMA_16BIT(N, SUMS, A, B, TA, TB, TYPE, PTX_TYPE)                                \
    template <bool B_K_MAJOR, bool A_M_MAJOR>                                                 \
    __device__ __forceinline__ void gk_wg_mma(float(&d)[SUMS], u64 a_desc, u64 b_desc, TYPE) { \
        asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX_TYPE "." PTX_TYPE  \
                     " {" GK_WG_REGS##SUMS "}, %" #A ", %" #B ", 1, 1, 1, %" #TA ", %" #TB    \
                     ";\n"                                                                    \
                     : GK_WG_D##SUMS                                                         \
                     : "l"(a_desc), "l"(b_desc), "n"(A_M_MAJOR ? 1 : 0),                     \
                       "n"(B_K_MAJOR ? 0 : 1));                                              \
    }
#define GK_WG_MMA_OF_WIDTH(N, SUMS, A, B, TA, TB)                                              \
    GK_WG_MMA_16BIT(N, SUMS, A, B, TA, TB, gk_half, "f16")                                     \
    GK_WG_MMA_16BIT(N, SUMS, A, B, TA, TB, gk_bfloat16, "bf16")
GK_WG_MMA_OF_WIDTH(256, 128, 128, 129, 130, 131)
GK_WG_MMA_OF_WIDTH(192, 96, 96, 97, 98, 99)
GK_WG_MMA_OF_WIDTH(128, 64, 64, 65, 66, 67)
GK_WG_MMA_OF_WIDTH(64, 32, 32, 33, 34, 35)
#undef GK_WG_MMA_OF_WIDTH
#undef GK_WG_MMA_16BIT

// Named barrier `id` over `count` threads (barrier 0 is __syncthreads's).
__device__ __forceinline__ void gk_wg_named_barrier(int id, int count) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

// The consumers' epilogue: C's tile (rounded to Out) through shared memory to global memory.
// Warp w of a warpgroup holds rows 16w + g and 16w + g + 8 (g = lane / 4), columns 8i + 2t and
// 8i + 2t + 1 (t = lane % 4) in d[4i .. 4i + 3]. Stored straight from those registers, a warp
// instruction writes 16 bytes into each of 8 rows: half-used sectors, and 64 instructions a
// thread for a 128 x 256 half-precision tile. Here each warp stages its 16 rows in chunks of
// 128 bytes of C (64 16-bit or 32 float32 columns) in its own part of the epilogue's buffer,
// which lies after the ring (Shape::STAGED_BYTES), so the producer may already fill the ring
// with the block's next tile; rows padded by 16 bytes, so that the 32 lanes' pairs fall in 32
// distinct banks. Then the warp writes four rows of 128 contiguous bytes per instruction, 16
// bytes a lane (element by element where a row of C is not 16-byte aligned). A warp reads
// only what it staged itself, so __syncwarp is all the synchronisation it needs.
template <typename Out, typename Shape>
__device__ __forceinline__ void gk_wg_store_tile(const float (&d)[Shape::SUMS],
                                                 Out* __restrict__ Cb, int M, int N, int m0,
                                                 int n0, int warpgroup, unsigned smem) {
    constexpr int COLS = GK_WG_ROW_BYTES / (int)sizeof(Out);             // a chunk's columns
    constexpr int PITCH = Shape::STAGED_PITCH_BYTES / (int)sizeof(Out);  // per staged row
    constexpr int CHUNK = 16 / (int)sizeof(Out);  // elements per 16-byte store
    constexpr int CHUNKS = COLS / CHUNK;          // 16-byte stores per row of a chunk: 8
    static_assert(Shape::WG_COLS % COLS == 0, "a warpgroup's columns in whole chunks");
    extern __shared__ unsigned char gk_wg_smem[];
    const int lane = threadIdx.x & 31, w = (threadIdx.x >> 5) & 3;
    const int g = lane >> 2, t = lane & 3;
    // This warp's 16 staged rows, after the ring's 1024-aligned buffers.
    unsigned char* const buffers = gk_wg_smem + (smem - gk_shared_address(gk_wg_smem));
    Out* const staged = reinterpret_cast<Out*>(
        buffers + Shape::STAGES * Shape::STAGE_BYTES +
        ((warpgroup - 1) * 64 + w * 16) * Shape::STAGED_PITCH_BYTES);
    const bool whole = N % CHUNK == 0 && (reinterpret_cast<u64>(Cb) & 15) == 0;
    const int first_row = m0 + (Shape::SPLIT_N ? 0 : (warpgroup - 1) * 64) + w * 16;
    const int first_col = n0 + (Shape::SPLIT_N ? (warpgroup - 1) * Shape::WG_COLS : 0);
#pragma unroll
    for (int chunk = 0; chunk < Shape::WG_COLS / COLS; ++chunk) {
        __syncwarp();  // the warp has read the previous chunk
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            Out* const row = staged + (h * 8 + g) * PITCH + 2 * t;
#pragma unroll
            for (int i = 0; i < COLS / 8; ++i) {
                const int sum = 4 * (chunk * COLS / 8 + i) + 2 * h;
                gk_mma_store2(row + 8 * i, d[sum], d[sum + 1], true, true, true);
            }
        }
        __syncwarp();  // this chunk's 16 rows are staged
#pragma unroll
        for (int c = lane; c < 16 * CHUNKS; c += 32) {
            const int r = c / CHUNKS, n = first_col + chunk * COLS + c % CHUNKS * CHUNK;
            const int m = first_row + r;
            if (m >= M || n >= N) continue;
            const Out* const from = staged + r * PITCH + c % CHUNKS * CHUNK;
            Out* const to = Cb + (i64)m * N + n;
            if (whole) {  // N a multiple of CHUNK: the chunk is inside the row, and aligned
                *reinterpret_cast<uint4*>(to) = *reinterpret_cast<const uint4*>(from);
            } else {
                for (int e = 0; e < CHUNK && n + e < N; ++e) to[e] = from[e];
            }
        }
    }
}

// The tile of C that block column `tile` covers: groups of GROUP row tiles, column tiles
// within a group, rows fastest.
template <int BM, int BN, int GROUP = GK_WG_GROUP>
__device__ __forceinline__ void gk_wg_tile_origin(int tile, int tiles_m, int tiles_n, int& m0,
                                                  int& n0) {
    const int per_group = GROUP * tiles_n;
    const int first_m = tile / per_group * GROUP;
    const int rows_here = min(tiles_m - first_m, GROUP);
    m0 = (first_m + tile % per_group % rows_here) * BM;
    n0 = tile % per_group / rows_here * BN;
}

// --- one block's work, shared by rungs 8, 9 and 11 -----------------------------------------------
// A consumer warpgroup's release of the stage whose "empty" barrier is `bar`: to its own block,
// and in a cluster to every other block (whose producer copies into this block's ring too).
template <int CLUSTER>
__device__ __forceinline__ void gk_wg_release(unsigned bar, unsigned rank) {
    gk_wg_bar_arrive(bar);
#pragma unroll
    for (unsigned other = 1; other < CLUSTER; ++other)
        gk_wg_bar_arrive_in(bar, (rank + other) % CLUSTER);
}
// The tile of C of the walk's `unit`: a tile, or in a cluster this block's tile of a group of
// CLUSTER row tiles (groups of GK_WG_GROUP / CLUSTER of them, so a group covers as many rows).
template <int BM, int BN, int CLUSTER>
__device__ __forceinline__ void gk_wg_unit_origin(int unit, int units_m, int tiles_n,
                                                  unsigned rank, int& m0, int& n0) {
    gk_wg_tile_origin<BM * CLUSTER, BN, GK_WG_GROUP / CLUSTER>(unit, units_m, tiles_n, m0, n0);
    m0 += rank * BM;
}
// The tiles of C numbered first_tile, first_tile + gridDim.x, ... below tiles_m * tiles_n
// (gk_wg_tile_origin), each over k-steps [k_begin, k_end) of BK, 16-bit operands (TF32's tiles:
// gk_wg_tf32_block): float32 sums stored to the matrix Cb, rounded to Out (T for rung 8, float
// partial sums for rung 9). The ring's stages are numbered across the tiles, so the producer
// fills the ring with a tile's first stages while the consumers store the previous tile.
// Rung 11 (CLUSTER = 2): the blocks of a cluster walk pairs of row tiles instead (the cluster's
// number is first_tile, the clusters' count gridDim.x / 2), the block of rank r taking row tile
// r of the pair; both share each stage's B, half of it loaded by each into both rings.
// B_K_MAJOR: B's map is that of a row-major (N, K) W (B = W^T, as in x @ W.T), its tile in
// shared memory BN rows of 128 bytes of K as A's is, read by wgmma K-major (gk_wg_load_stage).
// A_M_MAJOR: A's map is that of a row-major (K, M) X (A = X^T, as in X.T @ Y), its tile boxes
// of 64 columns of M as an N-contiguous B's, read by wgmma M-major.
template <typename T, typename Out, typename Shape, int CLUSTER = 1, bool B_K_MAJOR = false,
          bool A_M_MAJOR = false>
__device__ __forceinline__ void gk_wg_block(const gk_tensor_map& a_map, const gk_tensor_map& b_map,
                                            Out* __restrict__ Cb, int M, int N, int tiles_m,
                                            int tiles_n, int first_tile, int a_matrix,
                                            int b_matrix, int k_begin, int k_end) {
    static_assert(sizeof(T) == 2, "float16 or bfloat16 operands");
    constexpr int BK = GK_WG_ROW_BYTES / (int)sizeof(T);  // 64 of K per stage
    constexpr int K_STEP_BYTES = 32;                       // K of one wgmma: 16 elements
    constexpr int STAGES = Shape::STAGES, STAGE_BYTES = Shape::STAGE_BYTES;
    const int steps = k_end - k_begin;
    // The walk's units: tiles, or groups of CLUSTER row tiles (rows past M: zeros, not stored).
    const int units_m = (tiles_m + CLUSTER - 1) / CLUSTER, units = units_m * tiles_n;
    const int stride = gridDim.x / CLUSTER;
    const unsigned rank = CLUSTER > 1 ? gk_wg_cluster_rank() : 0;

    const gk_wg_ring ring = gk_wg_ring_init<STAGES, CLUSTER>();
    const unsigned smem = ring.smem, full0 = ring.full0, empty0 = ring.empty0;

    const int warpgroup = threadIdx.x / 128;
    if (warpgroup == 0) {
        // Producer: one thread keeps STAGES stages of A and B in flight, tile after tile.
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (threadIdx.x == 0) {
            for (int unit = first_tile, i = 0; unit < units; unit += stride, i += steps) {
                int m0, n0;
                gk_wg_unit_origin<Shape::BM, Shape::BN, CLUSTER>(unit, units_m, tiles_n, rank,
                                                                 m0, n0);
                gk_wg_produce<STAGES, STAGE_BYTES, BK, Shape::A_BYTES, Shape::BN / 64, 64,
                              64 * GK_WG_ROW_BYTES, CLUSTER, B_K_MAJOR, A_M_MAJOR>(
                    ring, i, steps, k_begin, a_map, b_map, m0, n0, a_matrix, b_matrix, rank);
            }
        }
        // In a cluster, no block leaves while its peer may still copy into it or release its
        // stages.
        if constexpr (CLUSTER > 1) gk_wg_cluster_sync();
        return;
    }
    // Consumers: warpgroup 1 multiplies rows 0-63 of the tile, warpgroup 2 rows 64-127; with
    // SPLIT_N both multiply rows 0-63, warpgroup 2 the second half of the columns.
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const unsigned a_rows = Shape::SPLIT_N ? 0 : (warpgroup - 1) * 64 * GK_WG_ROW_BYTES;
    // This warpgroup's first column of B: whole 64-column boxes of 8 KiB (B N-contiguous), or
    // its row of 128 bytes (K-major: whole groups of 8 rows, as A's).
    const int b_col = Shape::SPLIT_N ? (warpgroup - 1) * Shape::WG_COLS : 0;
    const unsigned b_cols = B_K_MAJOR ? b_col * GK_WG_ROW_BYTES : b_col / 64 * 64 * GK_WG_ROW_BYTES;
    // Stage 0's descriptors of this warpgroup's A rows (64 rows of 128 bytes of K, or one box
    // of 64 columns of M) and B columns, at the first k-step.
    const u64 a_desc0 = A_M_MAJOR ? gk_wg_desc(smem + a_rows, 64 * GK_WG_ROW_BYTES, 1024)
                                  : gk_wg_desc(smem + a_rows, 16, 1024);
    const u64 b_desc0 = B_K_MAJOR ? gk_wg_desc(smem + Shape::A_BYTES + b_cols, 16, 1024)
                                  : gk_wg_desc(smem + Shape::A_BYTES + b_cols,
                                               64 * GK_WG_ROW_BYTES, 1024);
    // A k-step (16 of K) moves 32 bytes along K-major rows, 16 rows of 128 bytes (2 KiB) into
    // MN-major boxes.
    constexpr unsigned MN_STEP_BYTES = K_STEP_BYTES / sizeof(T) * GK_WG_ROW_BYTES;
    constexpr unsigned A_STEP_BYTES = A_M_MAJOR ? MN_STEP_BYTES : K_STEP_BYTES;
    constexpr unsigned B_STEP_BYTES = B_K_MAJOR ? K_STEP_BYTES : MN_STEP_BYTES;
    for (int unit = first_tile, i = 0; unit < units; unit += stride) {
        int m0, n0;
        gk_wg_unit_origin<Shape::BM, Shape::BN, CLUSTER>(unit, units_m, tiles_n, rank, m0, n0);
        float d[Shape::SUMS];
#pragma unroll
        for (int j = 0; j < Shape::SUMS; ++j) d[j] = 0.0f;
        for (int j = 0; j < steps; ++j, ++i) {
            const int s = i % STAGES;
            gk_wg_bar_wait(full0 + 8 * s, (i / STAGES) & 1);
            gk_wg_fence();
#pragma unroll
            for (int kk = 0; kk < GK_WG_ROW_BYTES / K_STEP_BYTES; ++kk) {
                // k-step kk: A_STEP_BYTES into A's tile, B_STEP_BYTES into B's
                gk_wg_mma<B_K_MAJOR, A_M_MAJOR>(
                    d, gk_wg_desc_at(a_desc0, s * STAGE_BYTES + kk * A_STEP_BYTES),
                    gk_wg_desc_at(b_desc0, s * STAGE_BYTES + kk * B_STEP_BYTES), T());
            }
            gk_wg_commit();
            // Keep this stage's products in flight; the previous stage's are done, so its
            // buffers go back to the producer.
            gk_wg_wait<1>();
            gk_wg_pin(d);
            if (j > 0 && threadIdx.x % 128 == 0)
                gk_wg_release<CLUSTER>(empty0 + 8 * ((i - 1) % STAGES), rank);
        }
        gk_wg_wait<0>();
        gk_wg_pin(d);
        // The tile's last stage goes back too: the producer's next tile may take it.
        if (steps > 0 && threadIdx.x % 128 == 0)
            gk_wg_release<CLUSTER>(empty0 + 8 * ((i - 1) % STAGES), rank);
        gk_wg_store_tile<Out, Shape>(d, Cb, M, N, m0, n0, warpgroup, smem);
    }
    if constexpr (CLUSTER > 1) gk_wg_cluster_sync();
}

// --- TF32's tiles: one block's work, B read as it is (rungs 8 and 9) -----------------------------
// gk_wg_tf32_block: TF32's wgmma reads an operand from shared memory K-major only, and B
// (K x N, N contiguous) is N-major, so gk_wg_block would need B transposed into a (N, K) copy
// first, a launch that moves 2 x 4KN bytes (0.19 ms of 3.3 at 8192^3 on an H100; NOTES 119).
// Here the roles swap: each consumer warpgroup computes a 64 x BM tile of C^T = B^T A^T.
// B^T's 64 rows (64 columns of C) are wgmma's A operand, loaded from B's tile in shared memory
// into registers (wgmma's register-sourced form takes them in any layout the loads make); A's
// tile, K-major as it is, is wgmma's B operand through a descriptor. The block's tile of C is
// 256 x 128 (BM x BN; 4 stages of 32 + 16 KiB), so the tiles and their waves over the SMs are
// those of the 128 x 256 tile for square products; 128 x 128 (6 stages of 16 + 16 KiB;
// m64n128 products) where the host takes that tile; 128 x 64 where N is at most 64 (8 stages
// of 16 + 8 KiB: both warpgroups take the whole tile, each over half of every stage's
// k-steps, m64n128 products, their sums added in the epilogue: per product a warpgroup
// loads half the fragments of B into registers that a split of the rows made it load; H100,
// held of cuBLAS TF32, NOTES 130: 4096x1536x64 0.79 -> 1.00, 8192x1024x64 0.86 -> 1.10);
// where M is at most 64, 64 x 128 (8 stages of 8 + 16 KiB; m64n64 products), in
// place of the 64-row tiles. For a decode step (1 x 8192 x 8192) a transposed copy of B would
// move twice the bytes the product reads. Rung 9 runs the same block over a slice of K into
// its float32 partial tiles.
//  * B arrives by TMA in boxes of 32 rows of K x 32 columns of N (128 bytes, 128-byte
//    swizzle), BN / 32 of them per stage. A thread's four fragment words of a k-step are
//    B^T(16w + g (+8), t (+4)) (w its warp, g = lane / 4, t = lane % 4): within one box, row
//    k, 16-byte chunk (n / 4) ^ (k % 8). The loads of a warp fall two to a bank.
//  * A stage's products may still read their fragment registers while the next stage's
//    loads run: ptxas keeps the two stages' registers apart, and where it cannot it
//    serializes the products and says so in its log (C7513), which the compile tests refuse.
//  * The epilogue stages C's BM x 64 columns of a warpgroup transposed into the stage
//    buffers (rows of 68 floats: the lanes' words fall in 32 distinct banks), then writes
//    rows of C 16 bytes a lane, as gk_wg_store_tile does.
// Accumulation order is fixed (increasing k): bitwise reproducible on one GPU model.
// Measured (H100, of cuBLAS TF32 through torch, transposed copy -> this tile; NOTES 120): held
// 2048^3 0.82 -> 1.03, 4096^3 0.85 -> 0.87-0.92, 4095x4097x4099 1.31 -> 1.39; per call 4096^3
// 0.87 -> 0.96. At 8192^3 held 0.90-0.93 -> 0.92-0.94, per call 0.88-0.90 -> 0.90: the
// copy's 6% saved, and about as much lost in the products. The 64 x 128 tile and rung 9's use
// of both (NOTES 124): 1 x 8192 x 8192 0.32 -> 0.96 held, 0.34 -> 0.95 per call; 64 x 6144 x
// 8192 0.38 -> 1.03 held. The 128 x 128 tile (NOTES 125): 256 x 3072 x 8192 0.44 -> 1.17
// held, 384 x 8192 x 4096 0.56 -> 1.10; the shape suite's geometric mean 0.84 -> 0.95 held.

// d += A(64 x 8, registers: tf32 words) @ B(8 x N, K-major, descriptor) for N = 256, 128, 64
// (SUMS = N / 2 a thread); float32 sums. A0 is the operand number of the first A word.
#define GK_WG_MMA_RS(N, SUMS, A0, A1, A2, A3, B)                                              \
    __device__ __forceinline__ void gk_wg_mma_rs(float(&d)[SUMS], const unsigned(&a)[4],     \
                                                 u64 b_desc) {                               \
        asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k8.f32.tf32.tf32 {"             \
                     GK_WG_REGS##SUMS "}, {%" #A0 ", %" #A1 ", %" #A2 ", %" #A3 "}, %" #B    \
                     ", 1, 1, 1;\n"                                                          \
                     : GK_WG_D##SUMS                                                         \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));             \
    }
GK_WG_MMA_RS(256, 128, 128, 129, 130, 131, 132)
GK_WG_MMA_RS(128, 64, 64, 65, 66, 67, 68)
GK_WG_MMA_RS(64, 32, 32, 33, 34, 35, 36)
#undef GK_WG_MMA_RS

__device__ __forceinline__ unsigned gk_wg_lds(unsigned address) {
    unsigned word;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(word) : "r"(address));
    return word;
}

// The tile of C at (m0, n0) over k-steps [k_begin, k_end) of 32, B read as it is: float32 sums
// stored to the matrix Cb (rung 8's C, or rung 9's partial sums).
template <int BM, int BN, int STAGES>
__device__ __forceinline__ void gk_wg_tf32_block(const gk_tensor_map& a_map,
                                                 const gk_tensor_map& b_map,
                                                 float* __restrict__ Cb, int M, int N, int m0,
                                                 int n0, int a_matrix, int b_matrix, int k_begin,
                                                 int k_end) {
    static_assert((BN == 128 && ((BM == 256 && STAGES == 4) || (BM == 128 && STAGES == 6) ||
                                 (BM == 64 && STAGES == 8))) ||
                      (BN == 64 && BM == 128 && STAGES == 8),
                  "TF32's tiles: 256 x 128 with 4 stages, 128 x 128 with 6, 64 x 128 and "
                  "128 x 64 with 8");
    // 64 columns (SPLIT_K): both warpgroups take the whole 64 x BM tile of C^T, each over half
    // of every stage's k-steps, and their sums are added in the epilogue.
    constexpr bool SPLIT_K = BN == 64;
    constexpr int WG_ROWS = BM;                     // rows of C a warpgroup: wgmma's n
    constexpr int K_STEPS = SPLIT_K ? 2 : 4;        // k-steps of 8 a warpgroup takes per stage
    constexpr int BK = GK_WG_ROW_BYTES / 4;         // 32 floats of K per stage
    constexpr int A_BYTES = BM * GK_WG_ROW_BYTES;   // BM rows of A, K-major: 32, 16 or 8 KiB
    constexpr int BOX_BYTES = BK * 32 * 4;          // a box of B: 32 rows of K x 32 columns
    constexpr int STAGE_BYTES = A_BYTES + BN / 32 * BOX_BYTES;
    constexpr int SUMS = WG_ROWS / 2;               // a thread's sums: 64 x WG_ROWS / 128
    constexpr int PITCH = 64 + 4;                   // floats per staged row of C (epilogue)
    static_assert(2 * WG_ROWS * PITCH * 4 <= STAGES * STAGE_BYTES, "C's tiles fit in the stages");
    extern __shared__ unsigned char gk_wg_smem[];
    const int steps = k_end - k_begin;

    const gk_wg_ring ring = gk_wg_ring_init<STAGES>();
    const unsigned smem = ring.smem, full0 = ring.full0, empty0 = ring.empty0;

    const int warpgroup = threadIdx.x / 128;
    if (warpgroup == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (threadIdx.x == 0) {
            gk_wg_produce<STAGES, STAGE_BYTES, BK, A_BYTES, BN / 32, 32, BOX_BYTES>(
                ring, 0, steps, k_begin, a_map, b_map, m0, n0, a_matrix, b_matrix);
        }
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    float d[SUMS];
#pragma unroll
    for (int i = 0; i < SUMS; ++i) d[i] = 0.0f;
    const int lane = threadIdx.x & 31, w = (threadIdx.x >> 5) & 3;
    const int g = lane >> 2, t = lane & 3;
    // This warpgroup's first column of the tile and first k-step of a stage; this thread's
    // columns (rows of B^T): n and n + 8, in the same box.
    const int col0 = SPLIT_K ? 0 : 64 * (warpgroup - 1);
    const int kk0 = SPLIT_K ? K_STEPS * (warpgroup - 1) : 0;
    const int n = col0 + 16 * w + g;
    const unsigned box = n / 32 * BOX_BYTES;
    const int c0 = n % 32, c1 = c0 + 8;
    // Byte offsets in a stage's B of a0 (n, t), a1 (n + 8, t), a2 (n, t + 4), a3 (n + 8, t + 4)
    // of this warpgroup's first k-step (kk0 x 8 rows of K into the stage's boxes).
    const unsigned first = box + kk0 * 8 * 128;
    const unsigned offsets[4] = {
        first + t * 128 + (((c0 >> 2) ^ t) << 4) + ((c0 & 3) << 2),
        first + t * 128 + (((c1 >> 2) ^ t) << 4) + ((c1 & 3) << 2),
        first + (t + 4) * 128 + (((c0 >> 2) ^ (t + 4)) << 4) + ((c0 & 3) << 2),
        first + (t + 4) * 128 + (((c1 >> 2) ^ (t + 4)) << 4) + ((c1 & 3) << 2)};
    // A's tile in stage 0 at this warpgroup's first k-step (32 bytes of each row a k-step).
    const u64 a_desc0 = gk_wg_desc(smem + kk0 * 32, 16, 1024);
    for (int i = 0, s = 0, phase = 0; i < steps; ++i) {
        gk_wg_bar_wait(full0 + 8 * s, phase);
        const unsigned b_tile = smem + s * STAGE_BYTES + A_BYTES;
        unsigned fragments[K_STEPS][4];  // per k-step: a0 .. a3
#pragma unroll
        for (int kk = 0; kk < K_STEPS; ++kk)
#pragma unroll
            for (int r = 0; r < 4; ++r)
                fragments[kk][r] = gk_wg_lds(b_tile + kk * 8 * 128 + offsets[r]);
        gk_wg_fence();
#pragma unroll
        for (int kk = 0; kk < K_STEPS; ++kk)
            gk_wg_mma_rs(d, fragments[kk], gk_wg_desc_at(a_desc0, s * STAGE_BYTES + kk * 32));
        gk_wg_commit();
        gk_wg_wait<1>();
        gk_wg_pin(d);
        if (i > 0 && threadIdx.x % 128 == 0)
            gk_wg_bar_arrive(empty0 + 8 * (s == 0 ? STAGES - 1 : s - 1));
        if (++s == STAGES) s = 0, phase ^= 1;
    }
    gk_wg_wait<0>();
    gk_wg_pin(d);

    // Epilogue: d[4i + 2h + e] is C(m = 8i + 2t + e, n = col0 + 16w + g + 8h) of this
    // warpgroup's WG_ROWS x 64; staged as rows of m, then written 16 bytes a lane (SPLIT_K:
    // both warpgroups' sums of one element added, the first's k-steps before the second's).
    float* const staged0 =
        reinterpret_cast<float*>(gk_wg_smem + (smem - gk_shared_address(gk_wg_smem)));
    float* const staged = staged0 + (warpgroup - 1) * WG_ROWS * PITCH;
    gk_wg_named_barrier(1, 256);  // both warpgroups' products are done with the stages
#pragma unroll
    for (int i = 0; i < WG_ROWS / 8; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int e = 0; e < 2; ++e)
                staged[(8 * i + 2 * t + e) * PITCH + 16 * w + g + 8 * h] = d[4 * i + 2 * h + e];
    if constexpr (SPLIT_K) gk_wg_named_barrier(1, 256);  // both halves of every sum staged
    else gk_wg_named_barrier(1 + warpgroup, 128);
    const bool whole = N % 4 == 0 && (reinterpret_cast<u64>(Cb) & 15) == 0;
    const int first_col = n0 + col0;
    // SPLIT_K: each warpgroup writes half of the tile's rows, the two warpgroups' sums added.
    constexpr int ROWS_WRITTEN = SPLIT_K ? WG_ROWS / 2 : WG_ROWS;
    const int r0 = SPLIT_K ? ROWS_WRITTEN * (warpgroup - 1) : 0;
    const float* const source = SPLIT_K ? staged0 : staged;
#pragma unroll 4
    for (int c = threadIdx.x & 127; c < ROWS_WRITTEN * 16; c += 128) {
        const int r = r0 + c / 16, col = first_col + c % 16 * 4, m = m0 + r;
        if (m >= M || col >= N) continue;
        const float* const from = source + r * PITCH + c % 16 * 4;
        float* const to = Cb + (i64)m * N + col;
        if constexpr (SPLIT_K) {
            const float* const more = from + WG_ROWS * PITCH;  // the second warpgroup's
            float4 sums = *reinterpret_cast<const float4*>(from);
            const float4 second = *reinterpret_cast<const float4*>(more);
            sums.x += second.x, sums.y += second.y, sums.z += second.z, sums.w += second.w;
            if (whole) {
                *reinterpret_cast<float4*>(to) = sums;
            } else {
                const float summed[4] = {sums.x, sums.y, sums.z, sums.w};
                for (int e = 0; e < 4 && col + e < N; ++e) to[e] = summed[e];
            }
        } else if (whole) {
            *reinterpret_cast<float4*>(to) = *reinterpret_cast<const float4*>(from);
        } else {
            for (int e = 0; e < 4 && col + e < N; ++e) to[e] = from[e];
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Rung 8 - wgmma: the 128 x 256 tile of C is computed by Hopper's warpgroup MMAs. Rung 7's
// mma.sync does 16x8x16 per warp instruction with every fragment loaded through registers
// (ldmatrix), and the warps also issue the cp.async copies and their address arithmetic; on an
// H100 that stops near half of cuBLAS. Here:
//  * The Tensor Memory Accelerator copies each stage's tiles of A and B (cp.async.bulk.tensor):
//    one thread issues a few instructions per stage, no registers hold the data, rows and
//    columns past M, N or K arrive as zeros (edge tiles run the same loop), and the tiles land
//    in the 128-byte swizzled layout that wgmma reads without bank conflicts.
//  * wgmma.mma_async: the 4 warps of a warpgroup issue one 64xBNx16 product reading both
//    operands from shared memory through descriptors (TF32's tiles take B^T from registers:
//    gk_wg_tf32_block); it runs asynchronously, so a warpgroup keeps one stage's products in
//    flight while it waits for the next stage.
//  * Warp specialisation: warpgroup 0 (its register budget lowered to 40 with setmaxnreg) only
//    loads; warpgroups 1 and 2 (raised to 232: 128 float32 sums each) only multiply. Four
//    stages with a "full" and an "empty" mbarrier each: the producer waits for "empty", arms
//    "full" with the stage's byte count and issues the copies; a consumer waits for "full"
//    and, once the products of a stage are done, arrives on its "empty".
//  * Tiles are numbered in groups of 8 row tiles, so the blocks resident at one time share
//    panels of A and B in L2.
//  * The epilogue goes through shared memory (gk_wg_store_tile): a warp writes four rows of 128
//    contiguous bytes of C per instruction instead of 16 bytes into each of 8 rows.
//  * 16-bit types: one block per SM, each walking the tiles b, b + gridDim.x, ... (where rows
//    of C are whole 16-byte words). The ring's stages are numbered across tiles and the
//    epilogue has a buffer of its own, so the producer fills the ring with the next tile while
//    the consumers store the last; a block per tile waits for its first stages to arrive and
//    stores with the ring idle (NOTES 135, H100, held of cuBLAS: 3072x64x8192 0.78 -> 1.08,
//    8192x256x6144 0.72 -> 0.98, 1536x4096x4096 0.82 -> 1.01; the suite's geometric mean
//    0.84 -> 0.86; 8192^3 and 4096^3 within noise).
//  * Where 128 x 256 tiles would leave many SMs idle (their waves over the SMs end well short
//    of full), the host takes 128 x 128 tiles (m64n128 products, 64 sums a thread, 6 stages
//    of 32 KiB): twice the blocks, each with half the work (NOTES 94); for the 16-bit types
//    128 x 192 (m64n192 products, 96 sums a thread, 5 stages of 40 KiB) where its waves cost
//    less than either's, as where 72 wide tiles fill one wave on 132 SMs and 96 of 192
//    columns fill more of it (NOTES 132: 768x3072x3072 0.70 -> 0.85-0.87 held, 1536x8192x6144
//    0.73 -> 0.85-0.92). Where N is at most 192, 128 or 64, the narrowest
//    tile that covers it (128 x 64: m64n64, 8 stages of 24 KiB), so no product multiplies
//    columns of zeros (NOTES 97, 101). Where M is at most 64, 64-row tiles
//    whose two consumer warpgroups split the columns (SPLIT_N), so neither multiplies rows of
//    zeros (NOTES 102).
// Accumulation order is fixed (increasing k, no atomics): results are bitwise reproducible on
// one GPU model. Measured (H100, held / per call, of cuBLAS; NOTES 94-95): 8192^3 0.96 / 0.96,
// 4096^3 0.94 / 0.94, 2048^3 0.99 / 1.17, 1024^3 0.81 / 1.18 (0.54 with 128 x 256 tiles only);
// output-bound products (8192x64x3072) 0.82 / 1.02; geometric mean over the shape suite 0.75 /
// 1.13; 0.20 held where a few tiles walk a long K (128x8192x64: rung 9's case). The 128 x 64
// and 64-row tiles (H200, held, before -> after; NOTES 103): 2048x2048x64 0.55 -> 0.74,
// 8192x1024x64 0.77 -> 0.98, 64x1536x4096 0.57 -> 0.76, 64x6144x8192 0.65 -> 1.02.
// B_K_MAJOR (16-bit types; rungs 9 and 11 too): B = W^T of a row-major W, as in x @ W.T, read
// through W's own map in boxes of 64 rows of N x 128 bytes of K, which land as A's tile does
// and which wgmma reads K-major (its transpose flag off): before, the host copied such a B
// into an N-contiguous stack on every call (H200, NOTES 222: 1024^3 at 0.22 of cuBLAS per
// call, 8192^3 at 0.89); now within 1-3% of a row-major B (H200, per call, float16 1024^3
// 0.022 ms, 8192^3 1.71; NOTES 223).
// A_M_MAJOR (16-bit types; rungs 9 and 11 too): A = X^T of a row-major X, as in X.T @ Y,
// read through X's own map in boxes of 64 rows of K x 64 columns of M, laid out as an
// N-contiguous B's, which wgmma reads M-major (its A transpose flag on): the host copied such
// an A into a K-contiguous stack on every call (H200, per call, float16 512^3 0.109 ms, 8192^3
// 2.01); now within 1-3% of a row-major A (0.017 and 1.67 ms; NOTES 224).
template <typename T, int THREADS, int BM, int BN, int STAGES, int SHARED_BYTES,
          bool B_K_MAJOR = false, bool A_M_MAJOR = false>
__global__ void __launch_bounds__(THREADS, 1)
    matmul_wgmma(const __grid_constant__ gk_tensor_map a_map,
                 const __grid_constant__ gk_tensor_map b_map, T* __restrict__ C, int M, int N,
                 int K, int tiles_m, int tiles_n, int a_batched, int b_batched) {
    static_assert(gk_wg_geometry<THREADS, BM, BN, STAGES, SHARED_BYTES>(),
                  "the host's geometry is the layout this kernel is written for");
    static_assert(sizeof(T) == 2 || !(B_K_MAJOR || A_M_MAJOR),
                  "a K-major B or an M-major A: 16-bit types only");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int BK = GK_WG_ROW_BYTES / (int)sizeof(T);
    const int matrix = blockIdx.y;
    if constexpr (sizeof(T) == 4) {  // TF32: B read as it is, into registers; a tile a block
        int m0, n0;
        gk_wg_tile_origin<BM, BN>(blockIdx.x, tiles_m, tiles_n, m0, n0);
        gk_wg_tf32_block<BM, BN, STAGES>(a_map, b_map, C + (i64)matrix * M * N, M, N, m0, n0,
                                         a_batched ? matrix : 0, b_batched ? matrix : 0, 0,
                                         (K + BK - 1) / BK);
    } else {  // tiles blockIdx.x, blockIdx.x + gridDim.x, ...
        static_assert(BM != 256, "the 256 x 128 tile is TF32's");
        gk_wg_block<T, T, gk_wg_shape<BM, BN, STAGES>, 1, B_K_MAJOR, A_M_MAJOR>(
            a_map, b_map, C + (i64)matrix * M * N, M, N, tiles_m, tiles_n, blockIdx.x,
            a_batched ? matrix : 0, b_batched ? matrix : 0, 0, (K + BK - 1) / BK);
    }
#else
    asm volatile("trap;");  // sm_90a only: the host launches this rung on compute capability 9.0
#endif
}

// ---------------------------------------------------------------------------------------------
// Rung 9 - split_k: rung 8's block over a slice of K. Where the tiles of C are fewer than the
// SMs and K is long (128 x 8192 x 64 is one tile: rung 8 runs it on one SM of 132, at 0.11 of
// cuBLAS), blockIdx.z splits K into slices of k_steps stages; each block writes its tile's
// float32 partial sums to its own slice of a workspace (partial[split][matrix], M x N each),
// and a second launch (matmul_split_k_sum) adds the slices in split order and rounds once to
// T. Every sum has one order whatever the timing (no atomics): results are bitwise
// reproducible, and as accurate as rung 8's (float32 sums, one rounding). The cost is the
// workspace's round trip, splits x M x N x 4 bytes written and read, mostly in L2 at the sizes
// where the host picks this rung. Where N is at most 128 its tile is 128 x 128, 128 x 64 where
// N is at most 64, and 64 rows where M is at most 64, as rung 8's (NOTES 97, 101, 102); TF32
// takes rung 8's tiles, B read as it is (gk_wg_tf32_block).
// Measured (H100, held, of cuBLAS, rung 8 -> this rung; NOTES 62, 97): 128x8192x64 0.20 ->
// 0.73, 512x8192x96 0.27 -> 0.93, 64x8192x768 0.25 -> 0.69, decode 1x8192x8192 0.61 -> 0.89;
// 1024^3 0.80 -> 0.46 (the workspace and the second launch cost more than the slices save).
// With the narrower tiles (H200, held; NOTES 103): 128x8192x64 0.73 -> 0.87, 64x8192x768
// 0.62 -> 0.78, decode 1x8192x8192 0.88 -> 0.99 and 16x8192x8192 0.92 -> 0.98.
template <typename T, int THREADS, int BM, int BN, int STAGES, int SHARED_BYTES,
          bool B_K_MAJOR = false, bool A_M_MAJOR = false>
__global__ void __launch_bounds__(THREADS, 1)
    matmul_split_k(const __grid_constant__ gk_tensor_map a_map,
                   const __grid_constant__ gk_tensor_map b_map, float* __restrict__ partial,
                   int M, int N, int K, int tiles_m, int tiles_n, int a_batched, int b_batched,
                   int k_steps) {
    static_assert(gk_wg_geometry<THREADS, BM, BN, STAGES, SHARED_BYTES>(),
                  "the host's geometry is the layout this kernel is written for");
    static_assert(sizeof(T) == 2 || !(B_K_MAJOR || A_M_MAJOR),
                  "a K-major B or an M-major A: 16-bit types only");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int BK = GK_WG_ROW_BYTES / (int)sizeof(T);
    const int matrix = blockIdx.y, split = blockIdx.z;
    const int k_begin = split * k_steps;
    const int k_end = min(k_begin + k_steps, (K + BK - 1) / BK);  // an empty slice stores zeros
    float* const slice = partial + ((i64)split * gridDim.y + matrix) * M * N;
    if constexpr (sizeof(T) == 4) {  // TF32: B read as it is, into registers
        int m0, n0;
        gk_wg_tile_origin<BM, BN>(blockIdx.x, tiles_m, tiles_n, m0, n0);
        gk_wg_tf32_block<BM, BN, STAGES>(a_map, b_map, slice, M, N, m0, n0,
                                         a_batched ? matrix : 0, b_batched ? matrix : 0, k_begin,
                                         max(k_begin, k_end));
    } else {  // a tile a block: gridDim.x is the tiles' count
        static_assert(BM != 256, "the 256 x 128 tile is TF32's");
        gk_wg_block<T, float, gk_wg_shape<BM, BN, STAGES>, 1, B_K_MAJOR, A_M_MAJOR>(
            a_map, b_map, slice, M, N, tiles_m, tiles_n, blockIdx.x, a_batched ? matrix : 0,
            b_batched ? matrix : 0, k_begin, max(k_begin, k_end));
    }
#else
    asm volatile("trap;");  // sm_90a only: the host launches this rung on compute capability 9.0
#endif
}

// C[i] = partial[0][i] + partial[1][i] + ... + partial[splits - 1][i], in that order, rounded
// once to T; count = the elements of C (every matrix). A thread per element, grid-stride.
template <typename T, int THREADS>
__global__ void __launch_bounds__(THREADS)
    matmul_split_k_sum(const float* __restrict__ partial, T* __restrict__ C, i64 count,
                       int splits) {
    for (i64 i = (i64)blockIdx.x * THREADS + threadIdx.x; i < count;
         i += (i64)gridDim.x * THREADS) {
        float sum = partial[i];
        for (int s = 1; s < splits; ++s) sum += partial[s * count + i];
        C[i] = gk_round<T>(sum);
    }
}

// ---------------------------------------------------------------------------------------------
// Rung 11 - multicast: rung 8's walking blocks in clusters of two that share B. Each block of
// rung 8 loads its own 48 KiB a stage (16 of A, 32 of B) from L2; two blocks whose tiles of C
// lie one above the other read the same 32 KiB of B. Here the two form a cluster
// (__cluster_dims__, launched as any kernel), walk pairs of row tiles together, and each loads
// its half of B's boxes once into both blocks' rings (TMA multicast): 32 KiB a stage a block
// leave L2 instead of 48. A stage goes back to a producer only when the consumers of both
// blocks are done with it (its "empty" barrier counts four warpgroups, two of them arriving from
// the peer), and neither block exits while its peer may still copy into it or release its
// stages. Same 128 x 256 tile, stages, epilogue and accumulation order as rung 8: results are
// bitwise rung 8's. Measured (H200, NOTES 212): held / per call of cuBLAS in one bench run,
// float16 8192^3 0.98 / 0.96 (rung 8 0.96 / 0.88), 4096 x 4096 x 14336 1.00 / 0.94 (0.99 /
// 0.96), 4096^3 0.87 / 0.96 (0.89 / 1.01); bfloat16 8192^3 0.97 / 0.92 (0.93 / 0.86). Timed in
// turn with rung 8 over 16 products, it ran 0.89-1.04 times as fast held and led in no product
// by more than the spread between rounds: `auto` does not take it. Releasing the peer's stages
// with release at the cluster's scope ran at 0.53-0.62 of rung 8.
constexpr int GK_WG_CLUSTER = 2;
template <typename T, int THREADS, int BM, int BN, int STAGES, int SHARED_BYTES,
          bool B_K_MAJOR = false, bool A_M_MAJOR = false>
__global__ void __cluster_dims__(GK_WG_CLUSTER, 1, 1) __launch_bounds__(THREADS, 1)
    matmul_multicast(const __grid_constant__ gk_tensor_map a_map,
                     const __grid_constant__ gk_tensor_map b_map, T* __restrict__ C, int M,
                     int N, int K, int tiles_m, int tiles_n, int a_batched, int b_batched) {
    static_assert(gk_wg_geometry<THREADS, BM, BN, STAGES, SHARED_BYTES>() && BM == 128 &&
                      BN == 256 && sizeof(T) == 2,
                  "the host's geometry is the layout this kernel is written for: 16-bit types, "
                  "128 x 256 tiles");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int BK = GK_WG_ROW_BYTES / (int)sizeof(T);
    const int matrix = blockIdx.y;
    gk_wg_block<T, T, gk_wg_shape<BM, BN, STAGES>, GK_WG_CLUSTER, B_K_MAJOR, A_M_MAJOR>(
        a_map, b_map, C + (i64)matrix * M * N, M, N, tiles_m, tiles_n,
        blockIdx.x / GK_WG_CLUSTER, a_batched ? matrix : 0, b_batched ? matrix : 0, 0,
        (K + BK - 1) / BK);
#else
    asm volatile("trap;");  // sm_90a only: the host launches this rung on compute capability 9.0
#endif
}
