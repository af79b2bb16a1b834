// scan/scan.cu - inclusive scans with an associative operator: cumsum (SumOp) and cumprod
// (ProdOp), the operators of reduce/common.cuh, so every rung serves both.
//
// A problem is `rows` scans of n elements each; scan r's element i is at
//
//   in[(r / inner) * n * inner + r % inner + i * inner]
//
// inner = 1: scans along the last axis, rows of contiguous elements one after another (a
// flattened array is one row); inner > 1: along another axis of a C-contiguous array, n its
// length and inner the product of the lengths after it. The output (C-contiguous, the same
// shape) is laid out alike. Every rung has one signature:
//
//   scan_<rung><Op, In, Acc, Out, ...>(in, out, n, rows, inner, control, flags, values, capacity)
//
// It reads In, combines in Acc (to_acc, common.cuh) and writes Out. `control`, `flags` and
// `values` are the single-pass rungs' scratch (see look_back); the textbook rung takes its tile
// totals in `values` and no other scratch. The order of the combines depends only on the shape
// and the launch configuration, never on timing: the same input gives bitwise the same output
// (look_back says how its look-back keeps that).
#include "../reduce/common.cuh"

// Address of scan r's element i (see the top of the file).
__device__ __forceinline__ i64 gk_scan_address(i64 r, i64 i, i64 n, i64 inner) {
    return inner == 1 ? r * n + i : (r / inner) * n * inner + r % inner + i * inner;
}

// One word of a tile's input: PER_WORD elements of the scan sequence from `at` (those before
// `total`) into `word` (a union of 16 bytes and its elements), one 16-byte load where the input
// is contiguous and aligned (`whole_words`) and the word is whole, element by element
// otherwise. Shared by look_back, blocked and pipelined (gk_stage_tile).
template <typename In, int PER_WORD, typename Word>
__device__ __forceinline__ void gk_load_word(Word& word, const In* __restrict__ in, i64 at,
                                             i64 total, i64 n, i64 inner, bool whole_words) {
    if (whole_words && at + PER_WORD <= total) {
        word.bits = reinterpret_cast<const uint4*>(in + at)[0];
    } else {
#pragma unroll
        for (int k = 0; k < PER_WORD; ++k) {
            const i64 e = at + k;
            if (e < total) {
                word.elem[k] = in[inner == 1 ? e : gk_scan_address(e / n, e % n, n, inner)];
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Rung 1 - hillis_steele: the textbook scan. A block of BLOCK threads scans BLOCK elements of one
// row, one per thread, in shared memory: in step d every thread adds the value d places to its
// left (d = 1, 2, 4, ...), log2(BLOCK) steps with a barrier each, double-buffered so that a
// step reads only the previous step's values. The last thread writes the tile's total to
// values[r * tiles + tile] (tiles = gridDim.x; nothing when the row is one tile). The host scans
// those totals with the same kernel (recursively, while a row has more than one tile) and
// scan_add_carries adds each tile's carry, the scanned total of the tiles before it: the input
// is read once, the output written twice. Rows go to blockIdx.y (grid-stride past 65535).
// 2^28 float32 on an H100: 0.22 of a device copy per call
// (benchmarks/results/2026-11-25-h100-scan.txt).
// ---------------------------------------------------------------------------------------------
template <typename Op, typename In, typename Acc, typename Out, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
scan_hillis_steele(const In* __restrict__ in, Out* __restrict__ out, i64 n, i64 rows, i64 inner,
                   u64* __restrict__ control, u64* __restrict__ flags, char* __restrict__ values,
                   i64 capacity) {
    __shared__ Acc buffer[2][BLOCK];
    Acc* totals = reinterpret_cast<Acc*>(values);
    const int tid = threadIdx.x;
    const i64 i = (i64)blockIdx.x * BLOCK + tid;
    for (i64 r = blockIdx.y; r < rows; r += gridDim.y) {
        const i64 address = gk_scan_address(r, i, n, inner);
        buffer[0][tid] = i < n ? to_acc<Acc>(in[address]) : Op::template identity<Acc>();
        __syncthreads();
        int current = 0;
        for (int offset = 1; offset < BLOCK; offset *= 2) {
            Acc value = buffer[current][tid];
            if (tid >= offset) value = Op::combine(buffer[current][tid - offset], value);
            buffer[current ^ 1][tid] = value;
            current ^= 1;
            __syncthreads();
        }
        if (i < n) out[address] = to_acc<Out>(buffer[current][tid]);
        if (tid == BLOCK - 1 && totals != nullptr) {
            totals[r * gridDim.x + blockIdx.x] = buffer[current][tid];
        }
        __syncthreads();  // the next row overwrites the buffers
    }
}

// The textbook rung's second pass: tile t >= 1 of each row combines every element with the
// carry of the tiles before it, carries[r * (gridDim.x + 1) + t - 1] (an inclusive scan of the
// tile totals). The output is read back as Acc (a second rounding for float results).
template <typename Op, typename Acc, typename Out, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
scan_add_carries(Out* __restrict__ out, const Acc* __restrict__ carries, i64 n, i64 rows,
                 i64 inner) {
    const i64 tile = (i64)blockIdx.x + 1;
    const i64 i = tile * BLOCK + threadIdx.x;
    if (i >= n) return;
    for (i64 r = blockIdx.y; r < rows; r += gridDim.y) {
        const i64 address = gk_scan_address(r, i, n, inner);
        const Acc carry = carries[r * (gridDim.x + 1) + tile - 1];
        out[address] = to_acc<Out>(Op::combine(carry, to_acc<Acc>(out[address])));
    }
}

// ---------------------------------------------------------------------------------------------
// The single-pass rungs' look-back (CUB's decoupled look-back, made deterministic).
//
// Tiles take their numbers from control[0] in the order blocks claim them, so every tile that a
// tile waits for belongs to a running block (pipelined's blocks claim the next tile before they
// finish the last; the aggregate of a claimed tile waits for no prefix, so it always comes).
// Each tile publishes its aggregate (the combination of its own elements) as soon as it has it.
// flags[k] says what tile k has published: epoch * 32 plus the bits of GK_FLAG below (the
// aggregate; an inclusive prefix too; whether a scan starts in the tile; for a group's last
// tile, the group's total and whether a scan starts in the group);
// epoch is control[2], advanced by the last block of each launch, so flags left by earlier
// launches count as empty and need no clearing. The aggregate, the inclusive prefix and the
// group total of tile k are Acc values at values + k * sizeof(Acc), values + capacity * 16 +
// k * sizeof(Acc) and values + capacity * 32 + k * sizeof(Acc). A flag is written with a
// release store after its value and read with an acquire load, so no fence stands in the
// look-back's chain of waits (the fences they replaced cost the single-pass rungs 10-20% of
// their rate: benchmarks/NOTES.md, item 66).
//
// Determinism. CUB combines the aggregates it finds in a tree whose shape depends on which
// tiles have finished, so float results vary from run to run. Here every prefix has one
// definition, whoever computes it. Tiles form groups of 32; W_g(i), for i < 31, is the
// inclusive scan of the aggregates of group g's tiles 0..i across a warp (Hillis-Steele, whose
// lane i depends only on lanes 0..i), and the group's total W_g(31) is W_g(30) + the last tile's
// aggregate (so the last tile needs its own aggregate only after its look-back); Q_g, the prefix
// through the end of group g, is Q_{g-1} + W_g(31), folded left to right. The last tile of group
// g publishes Q_g as its inclusive prefix. Tile i of group g needs Q_{g-1}: it takes the
// nearest published Q_m and folds W_{m+1}(31) ... W_{g-1}(31) onto it, which is how those Q
// were defined, so the bits are the same whichever Q_m it found. Its exclusive prefix is then
// Q_{g-1} + W_g(i - 1). The last tile of each group publishes W_g(31) as soon as its group's
// aggregates are in, so a fold over groups is one load per group (a lane each) and a shuffle per
// group: the nearest published Q lies a dozen groups back while their tiles load, and folding
// them by scanning each group's 32 aggregates again kept whole blocks waiting at their second
// barrier (benchmarks/NOTES.md, items 48 and 50).
// ---------------------------------------------------------------------------------------------
enum : u64 {
    GK_AGGREGATE = 1,    // the tile's aggregate is published
    GK_INCLUSIVE = 2,    // so is its inclusive prefix (Q of its group, for a group's last tile)
    GK_START = 4,        // a scan starts in the tile
    GK_GROUP = 8,        // the group's total is published (a group's last tile)
    GK_GROUP_START = 16  // a scan starts in the group
};
constexpr u64 GK_EPOCH = 32;  // flags[k] = epoch * GK_EPOCH + bits
constexpr unsigned GK_BACKOFF_NS = 100;  // see gk_backoff
// look_back's blocks per SM: its registers are capped so that this many fit.
constexpr int LOOK_BACK_MIN_BLOCKS = 4;

template <typename Acc>
__device__ __forceinline__ Acc* gk_tile_aggregate(char* values, i64 k) {
    return reinterpret_cast<Acc*>(values) + k;
}
template <typename Acc>
__device__ __forceinline__ Acc* gk_tile_inclusive(char* values, i64 capacity, i64 k) {
    return reinterpret_cast<Acc*>(values + capacity * 16) + k;
}
template <typename Acc>
__device__ __forceinline__ Acc* gk_group_total(char* values, i64 capacity, i64 k) {
    return reinterpret_cast<Acc*>(values + capacity * 32) + k;
}

// Store a value, then the flag that says it is there: a release store, so whoever sees the
// flag through an acquire load (gk_read_flag) sees the value too, with no fence on either side.
__device__ __forceinline__ void gk_set_flag(u64* flags, i64 k, u64 flag) {
    asm volatile("st.release.gpu.global.u64 [%0], %1;\n" ::"l"(flags + k), "l"(flag) : "memory");
}
template <typename Acc>
__device__ __forceinline__ void gk_publish(u64* flags, Acc* slot, i64 k, Acc value, u64 flag) {
    *slot = value;
    gk_set_flag(flags, k, flag);
}

// A flag, read with acquire semantics: the values published before it are read after it.
__device__ __forceinline__ u64 gk_read_flag(const u64* flags, i64 k) {
    u64 flag;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];\n" : "=l"(flag) : "l"(flags + k) : "memory");
    return flag;
}

// Between two reads of a flag that was not there yet: a pause, so that waiting lanes do not
// flood the L2 with reads (they took two thirds of its throughput on 2^26 float32 while the
// DRAM ran at 29%).
__device__ __forceinline__ void gk_backoff() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    __nanosleep(GK_BACKOFF_NS);
#endif
}

// Wait until tile k has published its aggregate in this launch; its flag.
__device__ __forceinline__ u64 gk_wait_flag(const u64* flags, i64 k, u64 epoch) {
    u64 flag = gk_read_flag(flags, k);
    while (flag < epoch * GK_EPOCH + GK_AGGREGATE) {
        gk_backoff();
        flag = gk_read_flag(flags, k);
    }
    return flag;
}

__device__ __forceinline__ bool gk_has_inclusive(u64 flag, u64 epoch) {
    return flag >= epoch * GK_EPOCH && (flag & 3) == GK_INCLUSIVE;
}

// Wait until the group total of the group whose last tile is k is published; its flag.
__device__ __forceinline__ u64 gk_wait_group(const u64* flags, i64 k, u64 epoch) {
    u64 flag = gk_read_flag(flags, k);
    while (flag < epoch * GK_EPOCH || (flag & GK_GROUP) == 0) {
        gk_backoff();
        flag = gk_read_flag(flags, k);
    }
    return flag;
}

// A value, and whether the start of a scan is among what it combines: the segmented operator
// lets one tile span the ends of several rows.
template <typename Acc>
struct gk_segment {
    Acc value;
    int start;
};

template <typename Op, typename Acc>
__device__ __forceinline__ gk_segment<Acc> gk_segment_combine(gk_segment<Acc> a,
                                                              gk_segment<Acc> b) {
    gk_segment<Acc> c;
    c.value = b.start ? b.value : Op::combine(a.value, b.value);
    c.start = a.start | b.start;
    return c;
}

template <typename Op, typename Acc>
__device__ __forceinline__ gk_segment<Acc> gk_segment_identity() {
    gk_segment<Acc> s;
    s.value = Op::template identity<Acc>();
    s.start = 0;
    return s;
}

template <typename Acc>
__device__ __forceinline__ gk_segment<Acc> gk_segment_from(gk_segment<Acc> s, int lane) {
    gk_segment<Acc> t;
    t.value = gk_shfl_from(s.value, lane);
    t.start = __shfl_sync(0xffffffffu, s.start, lane);
    return t;
}

// Inclusive segmented scan across the warp of `s` (Hillis-Steele: lane i depends on lanes 0..i
// only, always in the same order).
template <typename Op, typename Acc>
__device__ __forceinline__ gk_segment<Acc> gk_warp_scan(gk_segment<Acc> s) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
        gk_segment<Acc> left;
        left.value = gk_shfl_up(s.value, d);
        left.start = __shfl_up_sync(0xffffffffu, s.start, d);
        if (lane >= d) s = gk_segment_combine<Op>(left, s);
    }
    return s;
}

// W_group(lane) in each lane (whole warp): the group's aggregates through tile 32 * group +
// last scanned across the warp, lane `own` taking `own_value` instead of waiting for it.
template <typename Op, typename Acc>
__device__ gk_segment<Acc> gk_group_scan(const u64* flags, char* values, i64 group, int last,
                                         int own, gk_segment<Acc> own_value, u64 epoch) {
    const int lane = threadIdx.x & 31;
    gk_segment<Acc> s = gk_segment_identity<Op, Acc>();
    if (lane == own) {
        s = own_value;
    } else if (lane <= last) {
        const i64 k = group * 32 + lane;
        const u64 flag = gk_wait_flag(flags, k, epoch);
        s.value = gk_load_l2(gk_tile_aggregate<Acc>(values, k));
        s.start = (flag & GK_START) != 0;
    }
    return gk_warp_scan<Op>(s);
}

// The nearest group before `group` whose Q is published (-1: none, fold from the first group),
// by one whole warp: 32 groups' flags at a time, nearest first.
__device__ __forceinline__ i64 gk_nearest_q(const u64* flags, i64 group, u64 epoch) {
    const int lane = threadIdx.x & 31;
    for (i64 end = group; end > 0; end -= 32) {
        const i64 m = end - 1 - lane;
        const bool published = m >= 0 && gk_has_inclusive(gk_read_flag(flags, m * 32 + 31), epoch);
        const unsigned mask = __ballot_sync(0xffffffffu, published);
        if (mask != 0) return end - __ffs(mask);
    }
    return -1;
}

// Q_{group - 1}, by one whole warp: Q of group `found` (gk_nearest_q), then the totals of the
// groups between, a lane each, folded in order.
template <typename Op, typename Acc>
__device__ __forceinline__ gk_segment<Acc> gk_fold_groups(const u64* flags, char* values,
                                                          i64 capacity, i64 found, i64 group,
                                                          u64 epoch) {
    typedef gk_segment<Acc> Segment;
    const int lane = threadIdx.x & 31;
    Segment q = gk_segment_identity<Op, Acc>();
    if (found >= 0) {
        // One lane acquired the flag (the ballot orders this load after its read); the value
        // was in the L2, read here past L1, before the flag was.
        q.value = gk_load_l2(gk_tile_inclusive<Acc>(values, capacity, found * 32 + 31));
        q.start = 1;
    }
    for (i64 first = found + 1; first < group; first += 32) {
        const i64 m = first + lane;
        Segment total = gk_segment_identity<Op, Acc>();
        if (m < group) {
            const u64 flag = gk_wait_group(flags, m * 32 + 31, epoch);
            total.value = gk_load_l2(gk_group_total<Acc>(values, capacity, m * 32 + 31));
            total.start = (flag & GK_GROUP_START) != 0;
        }
        const int count = group - first < 32 ? (int)(group - first) : 32;
        for (int j = 0; j < count; ++j) q = gk_segment_combine<Op>(q, gk_segment_from(total, j));
    }
    return q;
}

// The look-back in three parts, each by one whole warp, so that a tile can learn what it needs
// from its predecessors before its own aggregate is known (pipelined's look-back warp):
//   gk_group_before  W_g(i - 1), the aggregates of its group's tiles before it, scanned;
//   gk_group_q       Q_{g - 1}, the prefix through the group before;
//   gk_publish_group the last tile of a group publishes its group's total, W_g(31) =
//                    W_g(30) + its aggregate, then Q_g = Q_{g - 1} + W_g(31) (one definition:
//                    only that tile computes them).
// The tile's exclusive prefix is Q_{g - 1} + W_g(i - 1); Q_{g - 1} is needed only where no
// scan starts in the group's tiles before it.
template <typename Op, typename Acc>
__device__ __forceinline__ gk_segment<Acc> gk_group_before(const u64* flags, char* values,
                                                           i64 tile, u64 epoch) {
    const int position = (int)(tile % 32);
    if (position == 0) return gk_segment_identity<Op, Acc>();
    const gk_segment<Acc> scan = gk_group_scan<Op>(flags, values, tile / 32, position - 1, -1,
                                                   gk_segment_identity<Op, Acc>(), epoch);
    return gk_segment_from(scan, position - 1);
}

template <typename Op, typename Acc>
__device__ __forceinline__ gk_segment<Acc> gk_group_q(const u64* flags, char* values,
                                                      i64 capacity, i64 tile, u64 epoch) {
    const i64 group = tile / 32;
    return gk_fold_groups<Op, Acc>(flags, values, capacity, gk_nearest_q(flags, group, epoch),
                                   group, epoch);
}

// The group's total (W_g(30) in `before`, the tile's own `aggregate`): published at once, with
// the flag bits `own` (epoch and the tile's start); returns it for gk_publish_q.
template <typename Op, typename Acc>
__device__ __forceinline__ gk_segment<Acc> gk_publish_group(u64* flags, char* values,
                                                            i64 capacity, i64 tile,
                                                            gk_segment<Acc> before,
                                                            gk_segment<Acc> aggregate, u64 own) {
    const gk_segment<Acc> through = gk_segment_combine<Op>(before, aggregate);
    if ((threadIdx.x & 31) == 0) {
        gk_publish(flags, gk_group_total<Acc>(values, capacity, tile), tile, through.value,
                   own + GK_GROUP + (through.start ? GK_GROUP_START : 0) + GK_AGGREGATE);
    }
    return through;
}

// Q_g = Q_{g - 1} (`q`) + the group's total (`through`), published by the group's last tile.
template <typename Op, typename Acc>
__device__ __forceinline__ void gk_publish_q(u64* flags, char* values, i64 capacity, i64 tile,
                                             gk_segment<Acc> q, gk_segment<Acc> through,
                                             u64 own) {
    if ((threadIdx.x & 31) == 0) {
        const gk_segment<Acc> inclusive = gk_segment_combine<Op>(q, through);
        gk_publish(flags, gk_tile_inclusive<Acc>(values, capacity, tile), tile, inclusive.value,
                   own + GK_GROUP + (through.start ? GK_GROUP_START : 0) + GK_INCLUSIVE);
    }
}

// The rest of tile `tile`'s look-back once `before` (W_g(i - 1)) is known, by one whole warp:
// the last tile of a group publishes the group's total and then Q of its group, with the flag
// bits `own`; returns Q_{g - 1} (the tile's exclusive prefix is Q_{g - 1} + W_g(i - 1)), read
// only for a tile that `continues` its row with no scan starting before it in its group.
// `aggregate()` gives the tile's own aggregate; only a group's last tile asks it.
template <typename Op, typename Acc, typename Aggregate>
__device__ __forceinline__ gk_segment<Acc> gk_look_back_q(u64* flags, char* values,
                                                          i64 capacity, i64 tile, u64 epoch,
                                                          u64 own, bool continues,
                                                          gk_segment<Acc> before,
                                                          Aggregate aggregate) {
    typedef gk_segment<Acc> Segment;
    const bool last = tile % 32 == 31;
    Segment through = before;
    if (last) {
        through = gk_publish_group<Op>(flags, values, capacity, tile, before, aggregate(), own);
    }
    const Segment q = tile >= 32 && continues && !before.start
                          ? gk_group_q<Op, Acc>(flags, values, capacity, tile, epoch)
                          : gk_segment_identity<Op, Acc>();
    if (last) gk_publish_q<Op>(flags, values, capacity, tile, q, through, own);
    return q;
}

// Tile `tile`'s exclusive prefix, by one whole warp (every lane returns it), the three parts in
// a row; the last tile of a group also publishes the group's total and then Q of its group.
// `aggregate` is the tile's own.
template <typename Op, typename Acc>
__device__ Acc gk_look_back(u64* flags, char* values, i64 capacity, i64 tile,
                            gk_segment<Acc> aggregate, u64 epoch) {
    const u64 own = epoch * GK_EPOCH + (aggregate.start ? GK_START : 0);
    const gk_segment<Acc> before = gk_group_before<Op, Acc>(flags, values, tile, epoch);
    const gk_segment<Acc> q = gk_look_back_q<Op>(flags, values, capacity, tile, epoch, own,
                                                 true, before, [&] { return aggregate; });
    return gk_segment_combine<Op>(q, before).value;
}

// A block's tile number, claimed in the order blocks start, and the launch's epoch: thread 0
// reads them into the block's shared `tile_shared` and `epoch_shared`, then a barrier.
__device__ __forceinline__ void gk_claim_tile(u64* control, i64& tile_shared, u64& epoch_shared) {
    if (threadIdx.x == 0) {
        tile_shared = (i64)atomicAdd(control, 1ull);
        epoch_shared = gk_load_l2(control + 2);
    }
    __syncthreads();
}

// The last block of a launch to count itself finished resets the tile numbers and advances the
// epoch. One thread of each block counts it, once the block claims no more tiles.
__device__ __forceinline__ void gk_count_finished_block(u64* control, u64 epoch) {
    __threadfence();
    if (atomicAdd(control + 1, 1ull) == (u64)gridDim.x * gridDim.y * gridDim.z - 1) {
        control[0] = 0;
        control[1] = 0;
        control[2] = epoch + 1;
        __threadfence();
    }
}
// The same by thread 0, at the block's end.
__device__ __forceinline__ void gk_finish_launch(u64* control, u64 epoch) {
    if (threadIdx.x == 0) gk_count_finished_block(control, epoch);
}

// striped's tile aggregates, and pipelined's where gk_pipelined_records says (short rows, small
// inputs), as 16-byte records {value, flag} (sm_90, accumulators of up to 8 bytes), after the
// flags (record k at flags + capacity + 2k; rungs.scratch zeroes three words a tile): written
// with one relaxed 128-bit atomic exchange and read with 128-bit atomic compare-and-swap, so a
// value and its flag arrive together and no fence stands on the data warps' path. A release
// store is a MEMBAR.ALL.GPU, which cost the striped data path 0.03-0.09 of a copy
// (benchmarks/NOTES.md, item 181). Flags of the same epoch rules as gk_set_flag's.
template <typename Acc>
__device__ constexpr bool gk_uses_records() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    return sizeof(Acc) <= 8;
#else
    return false;
#endif
}
template <typename Acc>
__device__ __forceinline__ u64 gk_bits(Acc value) {
    u64 bits = 0;
    memcpy(&bits, &value, sizeof(Acc));
    return bits;
}
template <typename Acc>
__device__ __forceinline__ Acc gk_from_bits(u64 bits) {
    Acc value;
    memcpy(&value, &bits, sizeof(Acc));
    return value;
}
__device__ __forceinline__ void gk_record_store(u64* record, u64 bits, u64 flag) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("{\n .reg .b128 d, b;\n mov.b128 b, {%0, %1};\n"
                 " atom.relaxed.gpu.global.exch.b128 d, [%2], b;\n}\n"
                 ::"l"(bits), "l"(flag), "l"(record) : "memory");
#endif
}
__device__ __forceinline__ void gk_record_load(u64* record, u64& bits, u64& flag) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    // a compare-and-swap of zeros with zeros: the record, read atomically, left as it was
    asm volatile("{\n .reg .b128 d, c;\n mov.b128 c, {%2, %2};\n"
                 " atom.relaxed.gpu.global.cas.b128 d, [%3], c, c;\n mov.b128 {%0, %1}, d;\n}\n"
                 : "=l"(bits), "=l"(flag) : "l"(0ull), "l"(record) : "memory");
#else
    bits = 0;
    flag = 0;
#endif
}

// A tile's record once published in this launch (`epoch`): its value's bits and its flag.
__device__ __forceinline__ void gk_wait_record(u64* record, u64 epoch, u64& bits, u64& flag) {
    gk_record_load(record, bits, flag);
    while (flag < epoch * GK_EPOCH + GK_AGGREGATE) {
        gk_backoff();
        gk_record_load(record, bits, flag);
    }
}

// gk_group_before from the records: W_g(i - 1) of tile `tile` (i its place in the group), the
// same warp scan of the same values, so the same bits.
template <typename Op, typename Acc>
__device__ __forceinline__ gk_segment<Acc> gk_group_before_records(u64* records, i64 tile,
                                                                   u64 epoch) {
    const int position = (int)(tile % 32), lane = threadIdx.x & 31;
    if (position == 0) return gk_segment_identity<Op, Acc>();
    gk_segment<Acc> s = gk_segment_identity<Op, Acc>();
    if (lane < position) {
        u64 bits, flag;
        gk_wait_record(records + 2 * (tile - position + lane), epoch, bits, flag);
        s.value = gk_from_bits<Acc>(bits);
        s.start = (flag & GK_START) != 0;
    }
    return gk_segment_from(gk_warp_scan<Op>(s), position - 1);
}

// The data warps' publication of a tile's aggregate in this launch (`epoch`): its record
// (`records`: gk_uses_records, and for pipelined gk_pipelined_records), or its value and then
// its flag with a release store.
template <typename Acc>
__device__ __forceinline__ void gk_publish_aggregate(u64* flags, char* values, i64 capacity,
                                                     i64 tile, const gk_segment<Acc>& aggregate,
                                                     u64 epoch, bool records) {
    const u64 flag = epoch * GK_EPOCH + (aggregate.start ? GK_START : 0) + GK_AGGREGATE;
    if (records) {
        gk_record_store(flags + capacity + 2 * tile, gk_bits(aggregate.value), flag);
    } else {
        gk_publish(flags, gk_tile_aggregate<Acc>(values, tile), tile, aggregate.value, flag);
    }
}

// A tile's aggregate as the data warps published it (`records` as gk_publish_aggregate's):
// its record or its flag and value, waited for.
template <typename Acc>
__device__ __forceinline__ gk_segment<Acc> gk_published_aggregate(u64* flags, char* values,
                                                                  i64 capacity, i64 tile,
                                                                  u64 epoch, bool records) {
    gk_segment<Acc> aggregate;
    if (records) {
        u64 bits, flag;
        gk_wait_record(flags + capacity + 2 * tile, epoch, bits, flag);
        aggregate.value = gk_from_bits<Acc>(bits);
        aggregate.start = (flag & GK_START) != 0;
    } else {
        aggregate.start = (gk_wait_flag(flags, tile, epoch) & GK_START) != 0;
        aggregate.value = gk_load_l2(gk_tile_aggregate<Acc>(values, tile));
    }
    return aggregate;
}

// ---------------------------------------------------------------------------------------------
// Rung 2 - look_back: one pass, one launch. hillis_steele reads the input once but writes the
// output twice and reads it back (and launches once per level); here each tile learns the
// combination of everything before it from its predecessors' published values (the
// look-back above) while it holds its own elements in registers, so the input is read once and
// the output written once: the traffic of a copy.
// A tile is BLOCK threads x ITEMS elements, read as 16-byte words (PER_WORD elements) where the
// input is contiguous and aligned: word j of thread t is the tile's word j * BLOCK + t, so each
// load instruction of a warp reads 512 consecutive bytes. Each thread scans its words in
// registers; the block scans the threads' word totals with warp shuffles and one barrier.
// Rows (inner = 1) are laid end to end and scanned as one sequence with a segmented operator
// that restarts at each row's first element, so short rows share tiles and long ones span
// several; the words are the same whatever the row length. Strided scans (inner > 1) take the
// same path with one element per load (use the columns rung for them).
// 2^28 float32 on an H100: 0.40 of a device copy per call (cupy.cumsum 0.33, torch.cumsum 0.70);
// int32 0.42; (8192, 8192) along axis 1 0.46 (benchmarks/NOTES.md, items 48-50 and 66).
// ---------------------------------------------------------------------------------------------
template <typename Op, typename In, typename Acc, typename Out, int BLOCK, int ITEMS>
__global__ void __launch_bounds__(BLOCK, LOOK_BACK_MIN_BLOCKS)
scan_look_back(const In* __restrict__ in, Out* __restrict__ out, i64 n, i64 rows, i64 inner,
               u64* __restrict__ control, u64* __restrict__ flags, char* __restrict__ values,
               i64 capacity) {
    constexpr int PER_WORD = (int)(16 / sizeof(In)) < ITEMS ? (int)(16 / sizeof(In)) : ITEMS;
    constexpr int WORDS = ITEMS / PER_WORD;
    constexpr int WARPS = BLOCK / 32;
    constexpr int OUT_WORDS = PER_WORD * (int)sizeof(Out) / 16;  // 16-byte stores per word
    static_assert(ITEMS % PER_WORD == 0 && BLOCK % 32 == 0, "whole words, whole warps");
    typedef gk_segment<Acc> Segment;
    union Word {
        uint4 bits;
        In elem[PER_WORD];
    };
    __shared__ i64 tile_shared;
    __shared__ u64 epoch_shared;
    __shared__ Segment warp_totals[WORDS][WARPS];
    __shared__ Acc prefix_shared;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    gk_claim_tile(control, tile_shared, epoch_shared);
    const i64 tile = tile_shared;
    const u64 epoch = epoch_shared;
    const i64 total = n * rows;
    const i64 base = tile * (i64)(BLOCK * ITEMS);
    const bool words_in = inner == 1 && reinterpret_cast<u64>(in) % 16 == 0;
    const bool words_out = inner == 1 && OUT_WORDS * 16 == PER_WORD * (int)sizeof(Out) &&
                           reinterpret_cast<u64>(out) % 16 == 0;

    // Each word as read (kept in registers: 16 bytes, where its scanned values in Acc would
    // take up to 128), which of its elements start a row, and the combination of its elements
    // since the last start (`scanned`, becoming each thread's prefix within the tile).
    Word word[WORDS];
    unsigned starts[WORDS];
    Segment scanned[WORDS];
#pragma unroll
    for (int w = 0; w < WORDS; ++w) {
        const i64 first = base + (i64)(w * BLOCK + tid) * PER_WORD;
        gk_load_word<In, PER_WORD>(word[w], in, first, total, n, inner, words_in);
        // Row starts among the word's elements: first % n == 0, then every n.
        unsigned mask = 0;
        if (first < total) {
            const i64 position = rows == 1 ? first : first % n;
            for (i64 k = position == 0 ? 0 : n - position; k < PER_WORD; k += n) mask |= 1u << k;
        }
        if (first + PER_WORD > total) mask &= (1u << (total - first)) - 1;  // (first < total)
        starts[w] = mask;
        Segment running = gk_segment_identity<Op, Acc>();
#pragma unroll
        for (int k = 0; k < PER_WORD; ++k) {
            if (first + k < total) {
                const Acc x = to_acc<Acc>(word[w].elem[k]);
                running.value = (mask >> k) & 1 ? x : Op::combine(running.value, x);
            }
        }
        running.start = mask != 0;
        scanned[w] = running;
    }

    // The block's scan of the word totals, word by word: within each warp by shuffles (each
    // lane keeps the lanes before it), then the warps' totals through shared memory.
#pragma unroll
    for (int w = 0; w < WORDS; ++w) {
        const Segment s = gk_warp_scan<Op>(scanned[w]);
        Segment before;
        before.value = gk_shfl_up(s.value, 1);
        before.start = __shfl_up_sync(0xffffffffu, s.start, 1);
        scanned[w] = lane == 0 ? gk_segment_identity<Op, Acc>() : before;
        if (lane == 31) warp_totals[w][warp] = s;
    }
    __syncthreads();
    // Each thread's prefix within the tile, per word: the words before (all warps), the warps
    // before, the lanes before, in that order.
    Segment tile_running = gk_segment_identity<Op, Acc>();
#pragma unroll
    for (int w = 0; w < WORDS; ++w) {
        Segment prefix = tile_running;
        for (int v = 0; v < WARPS; ++v) {
            const Segment t = warp_totals[w][v];
            if (v < warp) prefix = gk_segment_combine<Op>(prefix, t);
            tile_running = gk_segment_combine<Op>(tile_running, t);
        }
        scanned[w] = gk_segment_combine<Op>(prefix, scanned[w]);
    }
    const Segment aggregate = tile_running;  // the same in every thread

    // Publish the aggregate; the tile's exclusive prefix, if its first element continues a row
    // begun in earlier tiles (and Q of its group, if it is the group's last tile).
    const bool continues = base % n != 0;
    if (warp == 0) {
        if (lane == 0) {
            gk_publish(flags, gk_tile_aggregate<Acc>(values, tile), tile, aggregate.value,
                       epoch * GK_EPOCH + (aggregate.start ? GK_START : 0) + GK_AGGREGATE);
        }
        if (continues || tile % 32 == 31) {
            const Acc prefix = gk_look_back<Op, Acc>(flags, values, capacity, tile, aggregate,
                                                     epoch);
            if (lane == 0) prefix_shared = prefix;
        }
    }
    __syncthreads();

    // Write: each word scanned again from its elements, after the thread's prefix, and after
    // the tile's prefix unless a row started between the tile's first element and it.
    const Acc tile_prefix = continues ? prefix_shared : Op::template identity<Acc>();
#pragma unroll
    for (int w = 0; w < WORDS; ++w) {
        const i64 first = base + (i64)(w * BLOCK + tid) * PER_WORD;
        Segment running = scanned[w];
        union {
            uint4 bits[OUT_WORDS > 0 ? OUT_WORDS : 1];
            Out elem[PER_WORD];
        } result;
#pragma unroll
        for (int k = 0; k < PER_WORD; ++k) {
            const Acc x = first + k < total ? to_acc<Acc>(word[w].elem[k])
                                            : Op::template identity<Acc>();
            const bool start = (starts[w] >> k) & 1;
            running.value = start ? x : Op::combine(running.value, x);
            running.start |= start;
            result.elem[k] = to_acc<Out>(running.start ? running.value
                                                       : Op::combine(tile_prefix, running.value));
        }
        if (words_out && first + PER_WORD <= total) {
            uint4* target = reinterpret_cast<uint4*>(out + first);
#pragma unroll
            for (int j = 0; j < OUT_WORDS; ++j) target[j] = result.bits[j];
        } else {
#pragma unroll
            for (int k = 0; k < PER_WORD; ++k) {
                const i64 e = first + k;
                if (e < total) {
                    out[inner == 1 ? e : gk_scan_address(e / n, e % n, n, inner)] = result.elem[k];
                }
            }
        }
    }
    gk_finish_launch(control, epoch);
}

// ---------------------------------------------------------------------------------------------
// Rung 3 - blocked: look_back's single pass, with each thread scanning a run of consecutive
// elements. In look_back thread t holds the tile's words t, t + BLOCK, ... (a striped
// arrangement, in CUB's terms), so the block scans each word position separately: four
// segmented warp scans of 8-byte accumulators per thread and tile, 15 shuffles each, and
// registers for all of it (it spills at the 64 that four blocks per SM leave). Its rows case,
// where tiles hardly look back, reaches only half of a copy: the tile's own work, not the wait
// for other tiles, is its limit (benchmarks/NOTES.md, item 64). Here the block stages the tile
// in shared memory, read and written in whole 16-byte words striped across the threads as
// before, and each thread takes ITEMS consecutive elements from it (a blocked arrangement):
// one sequential scan in registers, one warp scan of the runs' totals, the warps' totals
// through shared memory, the look-back, then the run scanned again after its prefix and
// written back to shared memory for the striped stores. Shared memory holds a word at slot
// i + i / 8 (16 bytes of padding after every 128), so neither arrangement meets a bank twice
// in a quarter-warp. Outputs wider than the input (int32 summed into int64) take the input's
// end of the buffer while every thread reads its run, then the whole of it. With fewer
// registers per thread, six blocks per SM fit where look_back has four (inputs of 8 bytes or
// more keep four: their runs spill at six's 40 registers a thread; gk_blocked_min_blocks).
// 2^28 float32 on an H100: 0.55 of a device copy per call (look_back 0.40, cupy.cumsum 0.33,
// torch.cumsum 0.70); int32 0.67 (torch 0.36); int8 0.57 (look_back 0.20); (8192, 8192) along
// axis 1 0.69; (2^20, 16) along axis 1 0.73 (benchmarks/NOTES.md, item 66); 256 MB of float64
// 0.69, int64 0.68, complex64 0.70, complex128 0.65 (0.46-0.51 at six blocks; item 133).
// ---------------------------------------------------------------------------------------------
template <typename T>
union gk_scan_word {
    uint4 bits;
    T elem[16 / sizeof(T)];
};

__device__ __forceinline__ int gk_padded_slot(int word) { return word + (word >> 3); }

// The padding words of such a tile (slots 9m + 8, which no word of the tile takes; an input
// staged at the buffer's end starts a multiple of nine slots in, so it leaves them too), as one
// T a data thread: where pipelined keeps each thread's prefix between the round that scans its
// tile and the round that finishes it (no static array for it, so that three blocks of 8-byte
// outputs fit an H100's SM, not two).
template <typename T>
__device__ __forceinline__ T* gk_padding_value(uint4* words, int tid) {
    constexpr int PER_WORD = (int)(16 / sizeof(T));
    return reinterpret_cast<T*>(words + (tid / PER_WORD) * 9 + 8) + tid % PER_WORD;
}

// A tile's input, elements [base, base + BLOCK * WORDS * per-word) of the scan sequence (those
// before `total`), staged in `words` (padded slots): word i = w * BLOCK + tid, 16 bytes at a time
// where the input is contiguous (inner == 1) and aligned, so every load instruction of a warp
// reads 512 consecutive bytes; element by element otherwise.
// WHOLE: the tile is whole and its input contiguous and aligned (the caller knows), so every
// word is one unconditional 16-byte load.
template <typename In, int BLOCK, int WORDS, bool WHOLE = false>
__device__ __forceinline__ void gk_stage_tile(const In* __restrict__ in, uint4* words, i64 base,
                                              i64 total, i64 n, i64 inner, int tid) {
    constexpr int PER_WORD = 16 / (int)sizeof(In);
    const bool whole_words = inner == 1 && reinterpret_cast<u64>(in) % 16 == 0;
    gk_scan_word<In> word[WORDS];
#pragma unroll
    for (int w = 0; w < WORDS; ++w) {
        if (WHOLE) {
            word[w].bits = reinterpret_cast<const uint4*>(in + base)[w * BLOCK + tid];
        } else {
            gk_load_word<In, PER_WORD>(word[w], in, base + (i64)(w * BLOCK + tid) * PER_WORD,
                                       total, n, inner, whole_words);
        }
    }
#pragma unroll
    for (int w = 0; w < WORDS; ++w) words[gk_padded_slot(w * BLOCK + tid)] = word[w].bits;
}

// The tile's outputs, staged in `words` the same way, to the same elements of `out` (WHOLE:
// as gk_stage_tile's).
template <typename Out, int BLOCK, int WORDS, bool WHOLE = false>
__device__ __forceinline__ void gk_store_tile(const uint4* words, Out* __restrict__ out, i64 base,
                                              i64 total, i64 n, i64 inner, int tid) {
    constexpr int PER_WORD = 16 / (int)sizeof(Out);
    const bool whole_words = inner == 1 && reinterpret_cast<u64>(out) % 16 == 0;
#pragma unroll
    for (int w = 0; w < WORDS; ++w) {
        const int i = w * BLOCK + tid;
        if (WHOLE) {
            reinterpret_cast<uint4*>(out + base)[i] = words[gk_padded_slot(i)];
            continue;
        }
        const i64 at = base + (i64)i * PER_WORD;
        if (at >= total) continue;
        gk_scan_word<Out> result;
        result.bits = words[gk_padded_slot(i)];
        if (whole_words && at + PER_WORD <= total) {
            reinterpret_cast<uint4*>(out + at)[0] = result.bits;
        } else {
#pragma unroll
            for (int k = 0; k < PER_WORD; ++k) {
                const i64 e = at + k;
                if (e < total) {
                    out[inner == 1 ? e : gk_scan_address(e / n, e % n, n, inner)] = result.elem[k];
                }
            }
        }
    }
}

// The blocks per SM that a rung's registers are capped for (its __launch_bounds__ minimum):
// NARROW for inputs of up to 4 bytes, WIDE for wider ones, SM75 when compiled for sm_75.
template <typename In, int NARROW, int WIDE, int SM75>
__host__ __device__ constexpr int gk_min_blocks() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    return SM75;
#else
    return sizeof(In) >= 8 ? WIDE : NARROW;
#endif
}

// blocked's blocks per SM: its registers are capped so that this many fit (its shared memory,
// at most 37 KB a block, allows six for every dtype). Six (40 registers a thread) for inputs
// of up to 4 bytes; four (64) for wider ones, whose runs spill at 40 (256 MB of float64 per
// call: 0.50 of a copy at six, 0.63 at five, 0.69 at four; float32 0.55, 0.54, 0.49; NOTES
// item 133). sm_75 runs at most 1024 threads per SM: four.
template <typename In>
__host__ __device__ constexpr int gk_blocked_min_blocks() {
    return gk_min_blocks<In, 6, 4, 4>();
}

// A data thread's run: elements first .. first + ITEMS - 1 of the scan sequence, `valid` of them
// before its end, `starts` those that begin a row (first % n == 0, then every n).
struct gk_run {
    int valid;
    unsigned starts;
};

template <int ITEMS>
__device__ __forceinline__ gk_run gk_run_at(i64 first, i64 total, i64 n, i64 rows) {
    gk_run run;
    run.valid = first >= total ? 0 : (total - first < ITEMS ? (int)(total - first) : ITEMS);
    run.starts = 0;
    if (run.valid > 0) {
        const i64 position = rows == 1 ? first : first % n;
        for (i64 k = position == 0 ? 0 : n - position; k < run.valid; k += n) {
            run.starts |= 1u << k;
        }
    }
    return run;
}

// blocked's and pipelined's tile body, in three steps with the block's barriers between them
// (the caller's: all threads, or the data warps alone).
//   gk_run_scan    the run's combination from its staged words, scanned across the warp; lane
//                  31 leaves the warp's total in warp_totals. Returns the lanes before this one.
//   gk_tile_scan   after a barrier: this run's prefix within the tile (the warps before, then
//                  the lanes before) and the tile's aggregate.
//   gk_write_run   the run again after its prefixes, into `words` as 16-byte words of Out (the
//                  caller has read the run's input words into `held`, and met the others at a
//                  barrier first where the outputs are wider and would overwrite them).
template <typename Op, typename In, typename Acc, int IN_WORDS>
__device__ __forceinline__ gk_segment<Acc> gk_run_scan(const uint4* in_words, gk_run run,
                                                       gk_segment<Acc>* warp_totals, int tid) {
    constexpr int IN_PER_WORD = (int)(16 / sizeof(In));
    gk_segment<Acc> total = gk_segment_identity<Op, Acc>();
#pragma unroll
    for (int j = 0; j < IN_WORDS; ++j) {
        gk_scan_word<In> word;
        word.bits = in_words[gk_padded_slot(tid * IN_WORDS + j)];
#pragma unroll
        for (int k = 0; k < IN_PER_WORD; ++k) {
            const int item = j * IN_PER_WORD + k;
            if (item < run.valid) {
                const Acc x = to_acc<Acc>(word.elem[k]);
                total.value = (run.starts >> item) & 1 ? x : Op::combine(total.value, x);
            }
        }
    }
    total.start = run.starts != 0;
    const gk_segment<Acc> inclusive = gk_warp_scan<Op>(total);
    gk_segment<Acc> before;
    before.value = gk_shfl_up(inclusive.value, 1);
    before.start = __shfl_up_sync(0xffffffffu, inclusive.start, 1);
    if ((tid & 31) == 31) warp_totals[tid >> 5] = inclusive;
    return before;
}

template <typename Op, typename Acc, int WARPS>
__device__ __forceinline__ void gk_tile_scan(const gk_segment<Acc>* warp_totals,
                                             gk_segment<Acc> before, int tid,
                                             gk_segment<Acc>& running,
                                             gk_segment<Acc>& aggregate) {
    const int warp = tid >> 5;
    running = gk_segment_identity<Op, Acc>();
    aggregate = running;
    for (int v = 0; v < WARPS; ++v) {
        const gk_segment<Acc> t = warp_totals[v];
        if (v < warp) running = gk_segment_combine<Op>(running, t);
        aggregate = gk_segment_combine<Op>(aggregate, t);
    }
    if ((tid & 31) > 0) running = gk_segment_combine<Op>(running, before);
}

template <typename Op, typename In, typename Acc, typename Out, int IN_WORDS, int OUT_WORDS>
__device__ __forceinline__ void gk_write_run(uint4* words, const gk_scan_word<In> (&held)[IN_WORDS],
                                             gk_run run, gk_segment<Acc> running,
                                             Acc tile_prefix, int tid) {
    constexpr int IN_PER_WORD = (int)(16 / sizeof(In)), OUT_PER_WORD = (int)(16 / sizeof(Out));
#pragma unroll
    for (int j = 0; j < OUT_WORDS; ++j) {
        gk_scan_word<Out> result;
#pragma unroll
        for (int k = 0; k < OUT_PER_WORD; ++k) {
            const int item = j * OUT_PER_WORD + k;
            const Acc x = item < run.valid
                              ? to_acc<Acc>(held[item / IN_PER_WORD].elem[item % IN_PER_WORD])
                              : Op::template identity<Acc>();
            const bool start = (run.starts >> item) & 1;
            running.value = start ? x : Op::combine(running.value, x);
            running.start |= start;
            result.elem[k] = to_acc<Out>(running.start ? running.value
                                                       : Op::combine(tile_prefix, running.value));
        }
        words[gk_padded_slot(tid * OUT_WORDS + j)] = result.bits;
    }
}

template <typename Op, typename In, typename Acc, typename Out, int BLOCK, int ITEMS>
__global__ void __launch_bounds__(BLOCK, gk_blocked_min_blocks<In>())
scan_blocked(const In* __restrict__ in, Out* __restrict__ out, i64 n, i64 rows, i64 inner,
             u64* __restrict__ control, u64* __restrict__ flags, char* __restrict__ values,
             i64 capacity) {
    constexpr int IN_PER_WORD = (int)(16 / sizeof(In)), OUT_PER_WORD = (int)(16 / sizeof(Out));
    constexpr int IN_WORDS = ITEMS / IN_PER_WORD, OUT_WORDS = ITEMS / OUT_PER_WORD;  // a run's
    constexpr int WARPS = BLOCK / 32;
    static_assert(ITEMS % IN_PER_WORD == 0 && ITEMS % OUT_PER_WORD == 0 && ITEMS <= 32,
                  "runs of whole words, starts in one 32-bit mask");
    static_assert(BLOCK % 32 == 0 && sizeof(Out) >= sizeof(In), "whole warps; outputs as wide");
    constexpr int IN_SLOTS = BLOCK * IN_WORDS + BLOCK * IN_WORDS / 8;
    constexpr int OUT_SLOTS = BLOCK * OUT_WORDS + BLOCK * OUT_WORDS / 8;
    typedef gk_segment<Acc> Segment;
    __shared__ uint4 buffer[OUT_SLOTS];  // the output tile; the input's tile at its end
    __shared__ Segment warp_totals[WARPS];
    __shared__ i64 tile_shared;
    __shared__ u64 epoch_shared;
    __shared__ Acc prefix_shared;
    uint4* const in_words = buffer + (OUT_SLOTS - IN_SLOTS);

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    gk_claim_tile(control, tile_shared, epoch_shared);
    const i64 tile = tile_shared;
    const u64 epoch = epoch_shared;
    const i64 total = n * rows;
    const i64 base = tile * (i64)(BLOCK * ITEMS);

    // Load: the tile's words into shared memory (16 bytes at a time where the input allows).
    gk_stage_tile<In, BLOCK, IN_WORDS>(in, in_words, base, total, n, inner, tid);
    __syncthreads();

    // This thread's run; the runs' totals scanned across the warp, then the warps' totals in
    // order: each run's prefix within the tile, and the tile's aggregate.
    const gk_run run = gk_run_at<ITEMS>(base + (i64)tid * ITEMS, total, n, rows);
    const Segment before = gk_run_scan<Op, In, Acc, IN_WORDS>(in_words, run, warp_totals, tid);
    __syncthreads();
    Segment running, aggregate;
    gk_tile_scan<Op, Acc, WARPS>(warp_totals, before, tid, running, aggregate);

    // Publish the aggregate; the tile's exclusive prefix if its first element continues a row
    // begun in earlier tiles (and Q of its group, if it is the group's last tile).
    const bool continues = base % n != 0;
    if (warp == 0) {
        if (lane == 0) {
            gk_publish(flags, gk_tile_aggregate<Acc>(values, tile), tile, aggregate.value,
                       epoch * GK_EPOCH + (aggregate.start ? GK_START : 0) + GK_AGGREGATE);
        }
        if (continues || tile % 32 == 31) {
            const Acc prefix = gk_look_back<Op, Acc>(flags, values, capacity, tile, aggregate,
                                                     epoch);
            if (lane == 0) prefix_shared = prefix;
        }
    }
    __syncthreads();
    const Acc tile_prefix = continues ? prefix_shared : Op::template identity<Acc>();

    // The run again, after its prefix: outputs into the buffer (over the run's own input
    // words when they are as wide; else after every thread has read its run), then stores.
    gk_scan_word<In> held[IN_WORDS];
#pragma unroll
    for (int j = 0; j < IN_WORDS; ++j) held[j].bits = in_words[gk_padded_slot(tid * IN_WORDS + j)];
    if (sizeof(Out) > sizeof(In)) __syncthreads();
    gk_write_run<Op, In, Acc, Out, IN_WORDS, OUT_WORDS>(buffer, held, run, running, tile_prefix,
                                                        tid);
    __syncthreads();
    gk_store_tile<Out, BLOCK, OUT_WORDS>(buffer, out, base, total, n, inner, tid);
    gk_finish_launch(control, epoch);
}

// ---------------------------------------------------------------------------------------------
// Rung 4 - pipelined: blocked's tile, with the wait for the look-back taken off the tile's path.
// blocked holds a tile's block until its exclusive prefix is known; that prefix waits for the
// slowest earlier tile still loading, and meanwhile the block issues no loads: one row of 2^28
// float32 runs at 0.50 of a copy per call, the same bytes as rows of 16 (no tile looks back)
// at 0.72. Here blocks stay resident (as many as fit at once) and take tile after tile, two in
// flight: in each round the data warps load and scan a new tile, publishing its aggregate at
// once, and then finish the tile of the round before, whose prefix a warp of its own (the
// look-back warp) has been looking back for since that tile was claimed. So a tile's
// look-back has a whole round to finish, and no tile's aggregate waits for any prefix. Two
// tile buffers per block (dynamic shared memory), each laid out as blocked's; each data
// thread's prefix within a tile waits for the next round in that tile's padding words. The
// look-back warp and the data warps meet only on named barriers, alternating by the round's
// parity so that neither runs two rounds ahead: CLAIM (the next tile's number is known) and
// PREFIX (a tile's prefix is in); a group's last tile takes its own aggregate as the tiles
// after it do, from its published flag and value. Tried and not kept (benchmarks/NOTES.md,
// item 137): a look-back warp in blocked alone (0.55 -> 0.54), three buffers fed by cp.async
// (three blocks an SM: 0.48), five blocks an SM (0.61: spills at 40 registers).
// float16 tiles take 32 elements a thread, not blocked's 16: as many bytes as float32's, so the
// look-back and the barriers cost half as much per byte (2^28: 0.48 -> 0.68-0.70; NOTES 139).
// A plain tile (whole, inside one row, input and output aligned: every tile of a long row but
// its first and last; gk_tile_kind) is loaded, scanned and stored with no test per element or
// word, and whether a tile continues a row is worked out once, by the thread that claims it
// (every thread took that 64-bit remainder each round before): 2^28 int32 0.71 -> 0.73-0.74,
// int8 0.61 -> 0.66, float64 0.75 -> 0.79, (8192, 8192) along axis 1 0.72 -> 0.76-0.78,
// float32 unchanged (NOTES 171). Tried there and not kept (float32 2^28 unless named): tiles
// copied into a third buffer two rounds ahead, by the Tensor Memory Accelerator (0.53) or by
// cp.async (0.43); the next tile claimed at the start of a round (0.50: its aggregate then
// waits for the prefix the round waits for); a third buffer so that a tile is finished two
// rounds after its scan (0.70-0.71, float16 0.76, but rows of 16 0.66-0.68, and 8-byte
// outputs at two blocks an SM).
// What holds float32 at 0.7 (NOTES 178-183): the body alone (the rows case, no look-back) runs
// at 0.69-0.72, where a striped tile (every warp access 512 consecutive bytes, no staging)
// runs at 0.92. Built on striped tiles, a timeline of every tile showed the data warps hardly
// waiting for the look-back, and the data path slowed beside it: thread 0's release store of
// each aggregate (a MEMBAR) cost 0.03-0.09 of a copy, the look-back warps' polling 0.04, and
// the look-back's presence 0.12 more, unlocated. This rung publishes and polls the same way.
// H100, per call, of a device copy (NOTES 138 and 171): 2^28 float32 0.69 (blocked 0.50;
// torch.cumsum 0.70), int32 0.73-0.74 (blocked 0.63), int16 0.66, int8 0.66, float64 0.79;
// (8192, 8192) along axis 1 0.76-0.78; (2^20, 16) along axis 1 0.69-0.72.
// On sm_90 the data warps publish each aggregate of rows of up to GK_RECORD_ROWS elements (and
// of any row in inputs of up to GK_RECORD_INPUT) as striped's 16-byte record, with no fence on
// their path; where the blocks are as many as the tiles, no block claims a second tile; and a
// block's look-back warp counts it finished (gk_count_finished_block) once it claims no more,
// while its data warps finish. H200, held (NOTES 203): (8192, 8192) along axis 1 206 -> 178
// us, (1024, 2^17) 393 -> 305, (4096, 4096) 61 -> 59, 2^20 float32 13.4 -> 12.6-13.3. Long
// rows of large inputs slowed with the records, not understood ((64, 2^21) along axis 1 453 ->
// 505 us, one row of 2^28 float32 914 -> 1030-1060; NOTES 205), so rows of more than
// GK_RECORD_ROWS elements in inputs of more than GK_RECORD_INPUT publish flags and values as
// before (gk_pipelined_records; NOTES 206: (64, 2^21) 452-456, 2^28 939-949, (1024, 2^17)
// 304-307; NOTES 209). auto gives most long rows of large inputs to striped
// (rungs.striped_min_row). Tiles that are whole and aligned but not plain take forms of their
// own (gk_pipelined_kind): the first tile of a row inside it has one start, thread 0's first
// element, and needs no 64-bit remainders; any whole aligned tile is loaded and stored in
// 16-byte words with no test per word. H200, held (NOTES 221): (4096, 4096) along axis 1
// float32 58.5 -> 46.7 us, int32 78.5 -> 62, float64 92.4 -> 83, (4096, 8192) float16 60 ->
// 44.5, (8192, 8192) float32 177 -> 159.5; rows of 16 of int32 81 -> 75, of float32 level.
// ---------------------------------------------------------------------------------------------
// pipelined's blocks per SM: its registers are capped so that this many fit. Four (56
// registers a thread) for inputs of up to 4 bytes; three (72) for wider ones, whose runs and
// look-back spill 270-350 bytes at 56 and 56-100 at 72. Two tile buffers of 8-byte outputs
// (72 KiB) allow three blocks on an H100 in any case, so integers summed into int64 run three
// there too, under the register cap of four. The rung runs on sm_80 and newer; compiled for
// sm_75, whose SMs hold 1024 threads, three.
template <typename In>
__host__ __device__ constexpr int gk_pipelined_min_blocks() {
    return gk_min_blocks<In, 4, 3, 3>();
}

// Whether pipelined publishes its aggregates as records (gk_uses_records) in a launch of `total`
// elements in rows of n: in rows of up to GK_RECORD_ROWS, and in inputs of up to
// GK_RECORD_INPUT elements. Records took rows of 2^17 and fewer 3-22% faster (held, H200), but
// rows of 2^20 and more in inputs of 2^27 elements and more 6-14% slower (NOTES 203 and 205).
// In inputs of up to 2^24 elements longer rows gain from them too (held, H200, flags ->
// records; NOTES 209): one row of 2^20 float32 13.1 -> 12.7-12.8 us, of 2^23 37.2-37.9 ->
// 35.2-35.8, of 2^24 float64 103.7-104.0 -> 100.3-100.8, (16, 2^20) float32 63.6-64.7 ->
// 61.3-61.4. Every block of a launch agrees, so a tile's aggregate is read where it was written.
constexpr i64 GK_RECORD_ROWS = (i64)1 << 18;
constexpr i64 GK_RECORD_INPUT = (i64)1 << 24;
template <typename Acc>
__device__ __forceinline__ bool gk_pipelined_records(i64 n, i64 total) {
    return gk_uses_records<Acc>() && (n <= GK_RECORD_ROWS || total <= GK_RECORD_INPUT);
}

// A barrier of `count` threads (a multiple of 32) on barrier `id`, and an arrival at one that
// does not wait (barrier 0 is __syncthreads).
__device__ __forceinline__ void gk_bar_sync(unsigned id, unsigned count) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void gk_bar_arrive(unsigned id, unsigned count) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

// What striped's data warps need to know of a tile besides its number, worked out once by the
// thread that claims it: whether it continues a row begun in earlier tiles, and whether it is
// plain: whole, inside one row (so no run has a start or an end), its input and output
// contiguous and 16-byte aligned. A plain tile's runs are scanned without a test per element
// and its words are loaded and stored without one per word: every tile of a long row but its
// first and last. pipelined tells more forms apart (gk_pipelined_kind).
enum : unsigned { GK_CONTINUES = 1, GK_PLAIN = 2 };

__device__ __forceinline__ unsigned gk_tile_kind(i64 tile, i64 tiles, i64 tile_size, i64 total,
                                                 i64 n, bool aligned) {
    if (tile >= tiles) return 0;
    const i64 base = tile * tile_size, position = base % n;
    if (position == 0) return 0;
    return GK_CONTINUES +
           (aligned && base + tile_size <= total && position + tile_size <= n ? GK_PLAIN : 0);
}

// pipelined's forms of a tile (gk_pipelined_kind's bits 1-2), from the most checked to the
// least: ANY, element by element where a word is partial or the input not contiguous and
// aligned; WORDS, whole and aligned (every word one 16-byte load and store) with rows starting
// inside it; ROW_START, whole, aligned and the first of a row it lies in (one start, thread 0's
// first element); PLAIN, as gk_tile_kind's. Each form gives the same bits as ANY.
enum : int { GK_FORM_ANY = 0, GK_FORM_WORDS = 1, GK_FORM_ROW_START = 2, GK_FORM_PLAIN = 3 };

__device__ __forceinline__ unsigned gk_pipelined_kind(i64 tile, i64 tiles, i64 tile_size,
                                                      i64 total, i64 n, bool aligned) {
    if (tile >= tiles) return 0;
    const i64 base = tile * tile_size, position = base % n;
    const bool whole = aligned && base + tile_size <= total;
    const int form = !whole ? GK_FORM_ANY
                     : position + tile_size > n ? GK_FORM_WORDS
                     : position == 0 ? GK_FORM_ROW_START : GK_FORM_PLAIN;
    return (position != 0 ? GK_CONTINUES : 0u) | (unsigned)form << 1;
}

// A data thread's run in a tile of pipelined's FORM.
template <int FORM, int ITEMS>
__device__ __forceinline__ gk_run gk_form_run(i64 base, i64 total, i64 n, i64 rows, int tid) {
    if (FORM == GK_FORM_PLAIN) return gk_run{ITEMS, 0u};
    if (FORM == GK_FORM_ROW_START) return gk_run{ITEMS, tid == 0 ? 1u : 0u};
    return gk_run_at<ITEMS>(base + (i64)tid * ITEMS, total, n, rows);
}

// pipelined's barriers (bar.sync ids; the round's parity is added to PREFIX and CLAIM).
enum : unsigned { GK_BAR_DATA = 1, GK_BAR_PREFIX = 2, GK_BAR_CLAIM = 4 };

// pipelined's data warps, round r's first half: load and scan the tile at `base` into `words`
// (its input at `in_words`); each thread's prefix within the tile waits in the padding words,
// and whether it starts a row is returned as the warp's ballot; the tile's aggregate is left in
// `aggregate`. FORM: see gk_pipelined_kind.
template <typename Op, typename In, typename Acc, int BLOCK, int ITEMS, int FORM>
__device__ __forceinline__ unsigned gk_pipelined_scan(const In* __restrict__ in, uint4* words,
                                                      uint4* in_words, i64 base, i64 total, i64 n,
                                                      i64 rows, i64 inner,
                                                      gk_segment<Acc>* warp_totals,
                                                      gk_segment<Acc>& aggregate, int tid) {
    constexpr int IN_WORDS = ITEMS / (int)(16 / sizeof(In));
    constexpr bool WHOLE = FORM != GK_FORM_ANY;
    gk_stage_tile<In, BLOCK, IN_WORDS, WHOLE>(in, in_words, base, total, n, inner, tid);
    gk_bar_sync(GK_BAR_DATA, BLOCK);
    const gk_run run = gk_form_run<FORM, ITEMS>(base, total, n, rows, tid);
    const gk_segment<Acc> before =
        gk_run_scan<Op, In, Acc, IN_WORDS>(in_words, run, warp_totals, tid);
    gk_bar_sync(GK_BAR_DATA, BLOCK);
    gk_segment<Acc> running;
    gk_tile_scan<Op, Acc, BLOCK / 32>(warp_totals, before, tid, running, aggregate);
    *gk_padding_value<Acc>(words, tid) = running.value;  // until the tile is finished
    return __ballot_sync(0xffffffffu, running.start);
}

// The second half: finish the tile of the round before (at `base`, in `words`), whose prefix is
// `tile_prefix`: its runs again after their prefixes, then the stores. `starts` is the ballot
// gk_pipelined_scan returned for this warp.
template <typename Op, typename In, typename Acc, typename Out, int BLOCK, int ITEMS, int FORM>
__device__ __forceinline__ void gk_pipelined_finish(Out* __restrict__ out, uint4* words,
                                                    const uint4* in_words, i64 base, i64 total,
                                                    i64 n, i64 rows, i64 inner, Acc tile_prefix,
                                                    unsigned starts, int tid) {
    constexpr int IN_WORDS = ITEMS / (int)(16 / sizeof(In));
    constexpr int OUT_WORDS = ITEMS / (int)(16 / sizeof(Out));
    const gk_run run = gk_form_run<FORM, ITEMS>(base, total, n, rows, tid);
    gk_segment<Acc> running;
    running.value = *gk_padding_value<Acc>(words, tid);
    running.start = FORM == GK_FORM_PLAIN ? 0 : (starts >> (tid & 31)) & 1;
    gk_scan_word<In> held[IN_WORDS];
#pragma unroll
    for (int j = 0; j < IN_WORDS; ++j) held[j].bits = in_words[gk_padded_slot(tid * IN_WORDS + j)];
    if (sizeof(Out) > sizeof(In)) gk_bar_sync(GK_BAR_DATA, BLOCK);
    gk_write_run<Op, In, Acc, Out, IN_WORDS, OUT_WORDS>(words, held, run, running, tile_prefix,
                                                        tid);
    gk_bar_sync(GK_BAR_DATA, BLOCK);
    gk_store_tile<Out, BLOCK, OUT_WORDS, FORM != GK_FORM_ANY>(words, out, base, total, n, inner,
                                                            tid);
}

template <typename Op, typename In, typename Acc, typename Out, int BLOCK, int ITEMS>
__global__ void __launch_bounds__(BLOCK + 32, gk_pipelined_min_blocks<In>())
scan_pipelined(const In* __restrict__ in, Out* __restrict__ out, i64 n, i64 rows, i64 inner,
               u64* __restrict__ control, u64* __restrict__ flags, char* __restrict__ values,
               i64 capacity) {
    constexpr int IN_PER_WORD = (int)(16 / sizeof(In)), OUT_PER_WORD = (int)(16 / sizeof(Out));
    constexpr int IN_WORDS = ITEMS / IN_PER_WORD, OUT_WORDS = ITEMS / OUT_PER_WORD;  // a run's
    constexpr int WARPS = BLOCK / 32;  // the data warps; warp WARPS looks back
    constexpr int TILE = BLOCK * ITEMS;
    static_assert(ITEMS % IN_PER_WORD == 0 && ITEMS % OUT_PER_WORD == 0 && ITEMS <= 32,
                  "runs of whole words, starts in one 32-bit mask");
    static_assert(BLOCK % 32 == 0 && sizeof(Out) >= sizeof(In), "whole warps; outputs as wide");
    static_assert(sizeof(Acc) <= 2 * OUT_WORDS && 16 % sizeof(Acc) == 0,
                  "a tile's padding words hold each data thread's prefix");
    constexpr int IN_SLOTS = BLOCK * IN_WORDS + BLOCK * IN_WORDS / 8;
    constexpr int OUT_SLOTS = BLOCK * OUT_WORDS + BLOCK * OUT_WORDS / 8;
    constexpr unsigned THREADS = BLOCK + 32;
    typedef gk_segment<Acc> Segment;
    extern __shared__ uint4 gk_pipelined_tiles[];  // two tiles of OUT_SLOTS words
    __shared__ Segment warp_totals[WARPS];
    __shared__ i64 tile_shared[4];  // round r's tile at r % 4
    __shared__ unsigned kind_shared[4];  // and its gk_pipelined_kind
    __shared__ u64 epoch_shared;
    __shared__ Acc prefix_shared[2];
    __shared__ unsigned run_starts[2][WARPS];  // whether each thread's prefix starts a row

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const i64 total = n * rows;
    const i64 tiles = (total + TILE - 1) / TILE;
    const bool aligned = inner == 1 && reinterpret_cast<u64>(in) % 16 == 0 &&
                         reinterpret_cast<u64>(out) % 16 == 0;
    const bool records = gk_pipelined_records<Acc>(n, total);
    if (tid == 0) {
        tile_shared[0] = (i64)atomicAdd(control, 1ull);
        kind_shared[0] = gk_pipelined_kind(tile_shared[0], tiles, TILE, total, n, aligned);
        epoch_shared = gk_load_l2(control + 2);
    }
    __syncthreads();
    const u64 epoch = epoch_shared;

    if (warp == WARPS) {
        // The look-back warp: round r's tile from its claim, while the data warps load it and
        // finish the tile before it.
        for (int r = 0;; ++r) {
            if (r > 0) gk_bar_sync(GK_BAR_CLAIM + (r & 1), THREADS);
            const i64 tile = tile_shared[r & 3];
            if (tile >= tiles) break;
            const i64 base = tile * TILE;
            const bool continues = (kind_shared[r & 3] & GK_CONTINUES) != 0;
            const bool last = tile % 32 == 31;
            if (continues || last) {
                const i64 end = total - base < TILE ? total : base + TILE;
                const bool starts_here = !continues || base / n != (end - 1) / n;
                const u64 own = epoch * GK_EPOCH + (starts_here ? GK_START : 0);
                const Segment before =
                    records
                        ? gk_group_before_records<Op, Acc>(flags + capacity, tile, epoch)
                        : gk_group_before<Op, Acc>(flags, values, tile, epoch);
                const Segment q = gk_look_back_q<Op>(
                    flags, values, capacity, tile, epoch, own, continues, before, [&] {
                        // the tile's aggregate, once the data warps have published it
                        return gk_published_aggregate<Acc>(flags, values, capacity, tile,
                                                            epoch, records);
                    });
                if (continues && lane == 0) {
                    prefix_shared[r & 1] = gk_segment_combine<Op>(q, before).value;
                }
            }
            gk_bar_arrive(GK_BAR_PREFIX + (r & 1), THREADS);
        }
        // The block claims no more tiles: it counts itself finished here, while the data
        // warps finish its last tile, not after them.
        if (lane == 0) gk_count_finished_block(control, epoch);
        return;
    }

    for (int r = 0;; ++r) {
        const i64 tile = tile_shared[r & 3];
        const i64 prev = r > 0 ? tile_shared[(r - 1) & 3] : tiles;
        if (tile >= tiles && prev >= tiles) break;
        if (tile < tiles) {
            // Load and scan round r's tile; publish its aggregate.
            uint4* const words = gk_pipelined_tiles + (r & 1) * OUT_SLOTS;
            uint4* const in_words = words + (OUT_SLOTS - IN_SLOTS);
            const i64 base = tile * TILE;
            Segment aggregate;
            unsigned starts;
#define GK_PIPELINED_SCAN(FORM)                                                                 \
    starts = gk_pipelined_scan<Op, In, Acc, BLOCK, ITEMS, FORM>(                               \
        in, words, in_words, base, total, n, rows, inner, warp_totals, aggregate, tid)
            switch (kind_shared[r & 3] >> 1) {  // one instance of the tile's code a form
                case GK_FORM_PLAIN: GK_PIPELINED_SCAN(GK_FORM_PLAIN); break;
                case GK_FORM_ROW_START: GK_PIPELINED_SCAN(GK_FORM_ROW_START); break;
                case GK_FORM_WORDS: GK_PIPELINED_SCAN(GK_FORM_WORDS); break;
                default: GK_PIPELINED_SCAN(GK_FORM_ANY);
            }
#undef GK_PIPELINED_SCAN
            if (lane == 0) run_starts[r & 1][warp] = starts;
            if (tid == 0) {
                gk_publish_aggregate(flags, values, capacity, tile, aggregate, epoch, records);
            }
        }
        if (prev < tiles) {
            // Finish round r - 1's tile: its run again after its prefixes, then the stores.
            const int p = (r - 1) & 1;
            uint4* const words = gk_pipelined_tiles + p * OUT_SLOTS;
            const uint4* const in_words = words + (OUT_SLOTS - IN_SLOTS);
            const i64 base = prev * TILE;
            const unsigned kind = kind_shared[(r - 1) & 3];
            gk_bar_sync(GK_BAR_PREFIX + p, THREADS);
            const Acc tile_prefix =
                kind & GK_CONTINUES ? prefix_shared[p] : Op::template identity<Acc>();
#define GK_PIPELINED_FINISH(FORM)                                                               \
    gk_pipelined_finish<Op, In, Acc, Out, BLOCK, ITEMS, FORM>(                                 \
        out, words, in_words, base, total, n, rows, inner, tile_prefix, run_starts[p][warp], tid)
            switch (kind >> 1) {
                case GK_FORM_PLAIN: GK_PIPELINED_FINISH(GK_FORM_PLAIN); break;
                case GK_FORM_ROW_START: GK_PIPELINED_FINISH(GK_FORM_ROW_START); break;
                case GK_FORM_WORDS: GK_PIPELINED_FINISH(GK_FORM_WORDS); break;
                default: GK_PIPELINED_FINISH(GK_FORM_ANY);
            }
#undef GK_PIPELINED_FINISH
        }
        // Claim round r + 1's tile; once every data warp is past here, round r - 1's buffer is
        // free for it and its number is known to all (the look-back warp learns it on CLAIM).
        // Where the blocks are as many as the tiles, their first claims took every tile.
        if (tid == 0) {
            const i64 next =
                tile < tiles && gridDim.x < tiles ? (i64)atomicAdd(control, 1ull) : tiles;
            tile_shared[(r + 1) & 3] = next;
            kind_shared[(r + 1) & 3] = gk_pipelined_kind(next, tiles, TILE, total, n, aligned);
        }
        gk_bar_sync(GK_BAR_DATA, BLOCK);
        if (tile < tiles) gk_bar_arrive(GK_BAR_CLAIM + ((r + 1) & 1), THREADS);
    }
}

// ---------------------------------------------------------------------------------------------
// Rung 5 - striped: pipelined's schedule, with the tile kept where its threads load it and more
// than one look-back warp. Thread t holds words w * BLOCK + t (w < WORDS, 16 bytes of the input
// each) of its tile, so every load and store of a warp covers 512 consecutive bytes of the
// input and nothing is staged: each word's elements are combined in registers, the block scans
// each word position (WORDS warp scans), and after one barrier every warp scans the WORDS x
// WARPS warp totals itself. A tile is finished DEPTH - 1 rounds after its scan, from the words
// and prefixes held in dynamic shared memory between the two: each thread's own, or where the
// outputs are wider than the input its neighbours' too (the words go into their slot after the
// scan's barrier, which orders them after the slot's last finish; NOTES 189). LOOKERS look-back
// warps take the rounds in turn, each tile's once the data warps have scanned it and published
// its aggregate (a group's last tile reads its own back from the L2); on sm_90 the data warps
// publish it as one 128-bit record (gk_uses_records), with no fence. Why (NOTES 178-183): a
// striped body runs at 0.92 of a copy alone, pipelined's at 0.69-0.72; with the look-back the
// data warps never wait for it, but its release store of each aggregate cost them 0.03-0.09
// and look-back warps polling from each claim on another 0.04 (2^28 float32 per launch: as
// first built 0.70-0.72, its publish relaxed and its look-backs 3 us after each claim 0.78;
// pipelined 0.67-0.69). This form, on an H100, per call (NOTES 187-189; pipelined's figure in
// brackets): 2^28 float32 0.86 of a copy (0.69; torch.cumsum 0.69), float64 2^26 0.78 (0.78),
// int32 into int64 0.94 (0.72) and int8 at 2^26 0.70 (0.65), its plain tiles of wider outputs
// written 512 bytes a warp store (NOTES 188); rows of 8192 0.61 (0.76). Its handoffs in forms
// racecheck can check cost 0.02-0.03 of these (NOTES 189: 2^28 float32 0.88, float64 0.79-0.81,
// float16 0.93 (0.71) before them). auto takes it for items of up to 4 bytes in rows of 2^22
// elements or more (2^25 of 1-byte items), and in inputs of 2^24 elements or more for rows
// longer than a look-back group of pipelined's tiles, where pipelined looks back past its
// group: H200, held, from level to 0.67 of pipelined's time (rungs.striped_min_row; NOTES
// 207). On the H200 it ran 7-56% behind pipelined for 8-byte items. Each block's ring of
// posted tiles starts from rounds it never asks for: shared memory keeps what an earlier
// block left there.
// Tiles are claimed in the order blocks run (thread 0 claims round r + 1's at the end of round
// r), and posted in a ring of shared words, each the round, the tile's gk_tile_kind and its
// number in one 64-bit atomic exchange: the data warps read it after a barrier, the look-back
// warps poll for it.
// ---------------------------------------------------------------------------------------------
constexpr int GK_STRIPED_RING = 8;  // posted tiles; at least DEPTH + LOOKERS (see scan_striped)

// striped's blocks per SM: its registers are capped so that this many fit (its shared memory
// allows three on an H100 for accumulators of up to 8 bytes, two for complex128). The rung
// runs on sm_80 and newer; compiled for sm_75, two.
template <typename In>
__host__ __device__ constexpr int gk_striped_min_blocks() {
    return gk_min_blocks<In, 3, 2, 2>();
}

// A posted tile: round r modulo 2^22 (bits 42 and up: a slot is reused every few rounds), its
// gk_tile_kind (bits 40-41) and its number.
__device__ __forceinline__ u64 gk_post(int r, unsigned kind, i64 tile) {
    return ((u64)r << 42) | ((u64)kind << 40) | (u64)tile;
}
// Slot k's first word: round k - GK_STRIPED_RING modulo 2^22, which no block reaches.
__device__ __forceinline__ u64 gk_post_unasked(int k) {
    return (u64)((k - GK_STRIPED_RING) & ((1 << 22) - 1)) << 42;
}
__device__ __forceinline__ bool gk_posted_round(u64 word, int r) {
    return (word >> 42) == ((u64)r & ((1ull << 22) - 1));
}
// Posts and polls are shared-memory atomics: a word polled while another thread stores it is
// a race in the memory model (and to compute-sanitizer's racecheck) unless both are atomic.
// Lane 0 polls for its warp, every lane of which must call it.
__device__ __forceinline__ void gk_post_at(u64* ring, int r, unsigned kind, i64 tile) {
    atomicExch(ring + r % GK_STRIPED_RING, gk_post(r, kind, tile));
}
__device__ __forceinline__ u64 gk_posted(u64* ring, int r) {
    u64* const slot = ring + r % GK_STRIPED_RING;
    u64 word = 0;
    if ((threadIdx.x & 31) == 0) {
        word = atomicAdd(slot, 0ull);  // an atomic read
        while (!gk_posted_round(word, r)) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
            __nanosleep(32);
#endif
            word = atomicAdd(slot, 0ull);
        }
    }
    return __shfl_sync(0xffffffffu, word, 0);
}
__device__ __forceinline__ i64 gk_posted_tile(u64 word) { return (i64)(word & ((1ull << 40) - 1)); }
__device__ __forceinline__ unsigned gk_posted_kind(u64 word) { return (unsigned)(word >> 40) & 3u; }

// A striped block's start, by thread 0: its ring of posts reset, its first tile claimed and
// posted (kind_of(tile): the post's gk_tile_kind bits), and where there is none, a tile past the
// last for each look-back warp's first round; then the launch's epoch.
template <int LOOKERS, typename Kind>
__device__ __forceinline__ void gk_striped_first(u64* control, u64* ring, i64 tiles,
                                                 u64& epoch_shared, Kind kind_of) {
    // Shared memory keeps what an earlier block on this SM left there, posts of its rounds
    // among it: each slot starts with a round no wait of this block's asks for (r < 2^22)
    for (int k = 0; k < GK_STRIPED_RING; ++k) ring[k] = gk_post_unasked(k);
    const i64 first = (i64)atomicAdd(control, 1ull);
    gk_post_at(ring, 0, kind_of(first), first);
    for (int k = 1; k < LOOKERS && first >= tiles; ++k) gk_post_at(ring, k, 0, tiles);
    epoch_shared = gk_load_l2(control + 2);
}

// Thread 0 at the end of round r: round r + 1's tile claimed and posted (and, at the end, a tile
// past the last for every look-back warp's next round). Where the blocks are as many as the
// tiles, their first claims took every tile.
template <int LOOKERS, typename Kind>
__device__ __forceinline__ void gk_striped_claim_next(u64* control, u64* ring, int r, i64 tiles,
                                                      Kind kind_of) {
    const i64 next = gridDim.x < tiles ? (i64)atomicAdd(control, 1ull) : tiles;
    gk_post_at(ring, r + 1, kind_of(next), next);
    for (int k = 2; k <= LOOKERS && next >= tiles; ++k) gk_post_at(ring, r + k, 0, tiles);
}

// The data warps' post of round r: the tile thread 0 posted at the end of round r - 1, read
// after a barrier of the data warps, not polled (polling the ring's atomics cost 0.06 of a copy
// at 2^28 float32; benchmarks/NOTES.md, item 189), or one past the last once the block's tiles
// have `ended` (so has every later round's); `last_finish` becomes the round that finishes the
// last tile scanned so far. The barrier also orders a round's writes of the block's shared
// memory after the data warps' reads of it in earlier rounds.
template <int BLOCK, int DEPTH>
__device__ __forceinline__ u64 gk_striped_post(const u64* ring, int r, i64 tiles, bool& ended,
                                               int& last_finish) {
    if (!ended && r > 0) gk_bar_sync(GK_BAR_DATA, BLOCK);
    const u64 posted = ended ? gk_post(r, 0, tiles) : ring[r % GK_STRIPED_RING];
    ended = gk_posted_tile(posted) >= tiles;
    if (!ended) last_finish = r + DEPTH - 1;
    return posted;
}

// Bits k (k < PER) of the elements at .. at + PER - 1 of the scan sequence that begin a row;
// how many of those elements lie before `total`.
template <int PER>
__device__ __forceinline__ unsigned gk_word_starts(i64 at, i64 n) {
    const i64 position = at % n;
    unsigned bits = 0;
    for (i64 k = position == 0 ? 0 : n - position; k < PER; k += n) bits |= 1u << k;
    return bits;
}
template <int PER>
__device__ __forceinline__ int gk_word_valid(i64 at, i64 total) {
    return at >= total ? 0 : (total - at < PER ? (int)(total - at) : PER);
}

// gk_warp_scan where no element starts a row (a plain tile): the values alone, combined in the
// same order, so the bits are gk_warp_scan's.
template <typename Op, typename Acc>
__device__ __forceinline__ gk_segment<Acc> gk_warp_scan_plain(gk_segment<Acc> s) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
        const Acc left = gk_shfl_up(s.value, d);
        if (lane >= d) s.value = Op::combine(left, s.value);
    }
    return s;
}

// striped's data warps, round r's scan of the tile at `base`: its words loaded, each word's
// elements combined, the word positions scanned across the block (one barrier, the totals at
// `totals`), the words and each word's prefix within the tile left in this round's slot of
// shared memory (`held_words`, `held_prefix`, `held_starts`); returns the tile's aggregate.
// PLAIN: see gk_tile_kind (no starts, every word whole, input and output aligned).
template <typename Op, typename In, typename Acc, int BLOCK, int WORDS, bool PLAIN>
__device__ __forceinline__ gk_segment<Acc> gk_striped_scan(
        const In* __restrict__ in, i64 base, i64 total, i64 n, i64 inner, bool whole_words,
        uint4* held_words, Acc* held_prefix, unsigned char* held_starts,
        gk_segment<Acc> (*totals)[BLOCK / 32], int tid) {
    constexpr int PER = (int)(16 / sizeof(In)), WARPS = BLOCK / 32;
    static_assert(WORDS * WARPS == 32, "a lane per warp total");
    typedef gk_segment<Acc> Segment;
    const int lane = tid & 31, warp = tid >> 5;
    gk_scan_word<In> word[WORDS];
#pragma unroll
    for (int w = 0; w < WORDS; ++w) {
        const int i = w * BLOCK + tid;
        if (PLAIN) {
            word[w].bits = reinterpret_cast<const uint4*>(in + base)[i];
        } else {
            word[w].bits = make_uint4(0, 0, 0, 0);
            gk_load_word<In, PER>(word[w], in, base + (i64)i * PER, total, n, inner, whole_words);
        }
    }
    Segment before[WORDS];
#pragma unroll
    for (int w = 0; w < WORDS; ++w) {
        const i64 at = base + (i64)(w * BLOCK + tid) * PER;
        const unsigned starts = PLAIN ? 0u : gk_word_starts<PER>(at, n);
        const int valid = PLAIN ? PER : gk_word_valid<PER>(at, total);
        Segment s = gk_segment_identity<Op, Acc>();
#pragma unroll
        for (int k = 0; k < PER; ++k) {
            if (k < valid) {
                const Acc x = to_acc<Acc>(word[w].elem[k]);
                s.value = (starts >> k) & 1 ? x : Op::combine(s.value, x);
            }
        }
        s.start = (starts & ((1u << valid) - 1u)) != 0;
        const Segment inclusive = PLAIN ? gk_warp_scan_plain<Op>(s) : gk_warp_scan<Op>(s);
        before[w].value = gk_shfl_up(inclusive.value, 1);
        before[w].start = PLAIN ? 0 : __shfl_up_sync(0xffffffffu, inclusive.start, 1);
        if (lane == 31) totals[w][warp] = inclusive;
    }
    gk_bar_sync(GK_BAR_DATA, BLOCK);
    // The words go into the slot only now: the finish of outputs wider than the input reads
    // other threads' words of the tile that held this slot DEPTH rounds before, and every data
    // thread has finished that tile once it has passed this barrier.
#pragma unroll
    for (int w = 0; w < WORDS; ++w) held_words[w * BLOCK + tid] = word[w].bits;
    // The tile's WORDS x WARPS totals in the tile's order (word position, then warp), scanned.
    const Segment scanned = gk_warp_scan<Op>((&totals[0][0])[lane]);
    unsigned prefix_starts = 0;
#pragma unroll
    for (int w = 0; w < WORDS; ++w) {
        const int at = w * WARPS + warp;
        Segment prefix = gk_segment_from(scanned, (at + 31) & 31);
        if (at == 0) prefix = gk_segment_identity<Op, Acc>();
        if (lane > 0) prefix = gk_segment_combine<Op>(prefix, before[w]);
        held_prefix[w * BLOCK + tid] = prefix.value;
        prefix_starts |= (unsigned)prefix.start << w;
    }
    held_starts[tid] = (unsigned char)prefix_starts;
    return gk_segment_from(scanned, 31);
}

// The finish of a tile scanned DEPTH - 1 rounds before, whose prefix is `tile_prefix`: each
// word's elements after their prefix within the tile, written as 16-byte words of Out where
// the output allows (PLAIN, or aligned, contiguous and whole), element by element otherwise.
template <typename Op, typename In, typename Acc, typename Out, int BLOCK, int WORDS, bool PLAIN>
__device__ __forceinline__ void gk_striped_finish(
        Out* __restrict__ out, i64 base, i64 total, i64 n, i64 inner, bool whole_words,
        const uint4* held_words, const Acc* held_prefix, const unsigned char* held_starts,
        Acc tile_prefix, int tid) {
    constexpr int PER = (int)(16 / sizeof(In)), OUT_PER = (int)(16 / sizeof(Out));
    constexpr int OUT_WORDS = PER / OUT_PER;  // 16-byte words of Out a word of In gives
    if constexpr (PLAIN && OUT_WORDS > 1) {
        // Outputs wider than the input (int32 summed into int64): thread tid writes the tile's
        // output words c * BLOCK + tid, so that a warp's store covers 512 consecutive bytes
        // (its own word's OUT_WORDS would leave every store of a warp 1 / OUT_WORDS of each
        // sector); output word j is part q = j % OUT_WORDS of input word j / OUT_WORDS,
        // finished from that word as held, in the same order of combines, so the same bits.
        static_assert(BLOCK % OUT_WORDS == 0, "a thread's part is the same in every word");
        const int q = tid % OUT_WORDS;
#pragma unroll 4  // wholly unrolled, int32's instance spilled 36 bytes
        for (int c = 0; c < WORDS * OUT_WORDS; ++c) {
            const int j = c * BLOCK + tid, i = j / OUT_WORDS;
            gk_scan_word<In> word;
            word.bits = held_words[i];
            gk_segment<Acc> running;
            running.value = held_prefix[i];
            running.start = (held_starts[i % BLOCK] >> (i / BLOCK)) & 1;
            Out value[PER];
#pragma unroll
            for (int k = 0; k < PER; ++k) {
                running.value = Op::combine(running.value, to_acc<Acc>(word.elem[k]));
                value[k] = to_acc<Out>(running.start ? running.value
                                                     : Op::combine(tile_prefix, running.value));
            }
            gk_scan_word<Out> result;
#pragma unroll
            for (int m = 0; m < OUT_PER; ++m) {
                result.elem[m] = value[m];
#pragma unroll
                for (int part = 1; part < OUT_WORDS; ++part) {
                    if (q == part) result.elem[m] = value[part * OUT_PER + m];
                }
            }
            reinterpret_cast<uint4*>(out + base)[j] = result.bits;
        }
        return;
    }
    const unsigned prefix_starts = held_starts[tid];
#pragma unroll
    for (int w = 0; w < WORDS; ++w) {
        const int i = w * BLOCK + tid;
        const i64 at = base + (i64)i * PER;
        gk_scan_word<In> word;
        word.bits = held_words[i];
        const unsigned starts = PLAIN ? 0u : gk_word_starts<PER>(at, n);
        const int valid = PLAIN ? PER : gk_word_valid<PER>(at, total);
        gk_segment<Acc> running;
        running.value = held_prefix[i];
        running.start = (prefix_starts >> w) & 1;
        gk_scan_word<Out> result[OUT_WORDS];
#pragma unroll
        for (int k = 0; k < PER; ++k) {
            const Acc x = k < valid ? to_acc<Acc>(word.elem[k]) : Op::template identity<Acc>();
            const bool start = (starts >> k) & 1;
            running.value = start ? x : Op::combine(running.value, x);
            running.start |= start;
            const Acc value =
                running.start ? running.value : Op::combine(tile_prefix, running.value);
            result[k / OUT_PER].elem[k % OUT_PER] = to_acc<Out>(value);
        }
        if (PLAIN || (whole_words && valid == PER)) {
#pragma unroll
            for (int q = 0; q < OUT_WORDS; ++q) {
                reinterpret_cast<uint4*>(out + at)[q] = result[q].bits;
            }
        } else {
#pragma unroll
            for (int k = 0; k < PER; ++k) {
                const i64 e = at + k;
                if (k < valid) {
                    out[inner == 1 ? e : gk_scan_address(e / n, e % n, n, inner)] =
                        result[k / OUT_PER].elem[k % OUT_PER];
                }
            }
        }
    }
}

template <typename Op, typename In, typename Acc, typename Out, int BLOCK, int WORDS, int DEPTH,
          int LOOKERS>
__global__ void __launch_bounds__(BLOCK + 32 * LOOKERS, gk_striped_min_blocks<In>())
scan_striped(const In* __restrict__ in, Out* __restrict__ out, i64 n, i64 rows, i64 inner,
             u64* __restrict__ control, u64* __restrict__ flags, char* __restrict__ values,
             i64 capacity) {
    constexpr int PER = (int)(16 / sizeof(In)), WARPS = BLOCK / 32;
    constexpr int TILE = BLOCK * WORDS * PER;
    constexpr unsigned PREFIX_THREADS = BLOCK + 32;  // the data warps and one look-back warp
    constexpr unsigned BAR_AGGREGATE = GK_BAR_PREFIX + 4;  // + r % DEPTH: round r's aggregate
    static_assert(DEPTH >= 2 && DEPTH <= 4 && BAR_AGGREGATE + DEPTH <= 16, "named barriers");
    static_assert(DEPTH + LOOKERS <= GK_STRIPED_RING, "a posted tile outlives its readers");
    static_assert(WORDS <= 8 && sizeof(Out) >= sizeof(In), "starts in a byte; outputs as wide");
    typedef gk_segment<Acc> Segment;
    // DEPTH slots, each the tile's words (WORDS x BLOCK) and then each word's prefix
    extern __shared__ uint4 gk_striped_slots[];
    __shared__ Segment totals[2][WORDS][WARPS];  // round r's at r % 2
    __shared__ unsigned char prefix_starts[DEPTH][BLOCK];
    __shared__ Acc prefix_shared[DEPTH];
    __shared__ u64 ring[GK_STRIPED_RING];
    __shared__ u64 epoch_shared;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const i64 total = n * rows;
    const i64 tiles = (total + TILE - 1) / TILE;
    const bool in_words = inner == 1 && reinterpret_cast<u64>(in) % 16 == 0;
    const bool out_words = inner == 1 && reinterpret_cast<u64>(out) % 16 == 0;
    const bool aligned = in_words && out_words;
    constexpr int SLOT_WORDS = WORDS * BLOCK + (WORDS * BLOCK * (int)sizeof(Acc) + 15) / 16;
    const auto kind_of = [&](i64 t) { return gk_tile_kind(t, tiles, TILE, total, n, aligned); };
    if (tid == 0) gk_striped_first<LOOKERS>(control, ring, tiles, epoch_shared, kind_of);
    __syncthreads();
    const u64 epoch = epoch_shared;

    if (warp >= WARPS) {
        // A look-back warp: rounds warp - WARPS, + LOOKERS, ..., each tile's look-back once the
        // data warps have scanned it. Its neighbours, claimed just before it, publish at about
        // the same time, so it reads little before what it waits for is there: warps that read
        // from the claim on cost the data path 0.04 of a copy in polls (NOTES 183).
        for (int r = warp - WARPS;; r += LOOKERS) {
            const u64 posted = gk_posted(ring, r);
            const i64 tile = gk_posted_tile(posted);
            if (tile >= tiles) break;
            // Wait for the data warps to have scanned round r's tile (and finished the tile
            // that held this round's slot DEPTH rounds before, before they scanned this one).
            gk_bar_sync(BAR_AGGREGATE + r % DEPTH, PREFIX_THREADS);
            const bool continues = (gk_posted_kind(posted) & GK_CONTINUES) != 0;
            const bool last = tile % 32 == 31;
            Acc prefix = Op::template identity<Acc>();
            if (continues || last) {
                const i64 base = tile * TILE, end = total - base < TILE ? total : base + TILE;
                const bool starts_here = !continues || base / n != (end - 1) / n;
                const u64 own = epoch * GK_EPOCH + (starts_here ? GK_START : 0);
                const Segment before =
                    gk_uses_records<Acc>()
                        ? gk_group_before_records<Op, Acc>(flags + capacity, tile, epoch)
                        : gk_group_before<Op, Acc>(flags, values, tile, epoch);
                const Segment q = gk_look_back_q<Op>(
                    flags, values, capacity, tile, epoch, own, continues, before, [&] {
                        // the tile's aggregate, as the data warps published it (before the
                        // barrier): read back from the L2, one tile in 32
                        return gk_published_aggregate<Acc>(flags, values, capacity, tile,
                                                            epoch, gk_uses_records<Acc>());
                    });
                prefix = gk_segment_combine<Op>(q, before).value;
            }
            if (lane == 0) prefix_shared[r % DEPTH] = prefix;
            gk_bar_arrive(GK_BAR_PREFIX + r % DEPTH, PREFIX_THREADS);
        }
        // A round past the last tile is posted once the block claims no more: the first
        // look-back warp counts the block finished, while the data warps finish its tiles.
        if (warp == WARPS && lane == 0) gk_count_finished_block(control, epoch);
        return;
    }

    bool ended = false;  // a round's tile was past the last: so is every later round's
    int last_finish = -1;  // the round that finishes the last tile scanned so far
    for (int r = 0;; ++r) {
        const u64 posted = gk_striped_post<BLOCK, DEPTH>(ring, r, tiles, ended, last_finish);
        const i64 tile = gk_posted_tile(posted);
        if (r > last_finish) break;  // every tile the block took is finished
        const int finished = r - (DEPTH - 1);  // the round whose tile is finished in this one
        // (posted DEPTH - 1 rounds ago, before barriers every data thread has passed since: a
        // plain read)
        const u64 posted_before =
            finished >= 0 ? ring[finished % GK_STRIPED_RING] : gk_post(0, 0, tiles);
        const i64 prev = gk_posted_tile(posted_before);
        if (tile < tiles) {
            uint4* const slot = gk_striped_slots + (r % DEPTH) * SLOT_WORDS;
            Acc* const slot_prefix = reinterpret_cast<Acc*>(slot + WORDS * BLOCK);
            const i64 base = tile * TILE;
            const Segment aggregate =
                gk_posted_kind(posted) & GK_PLAIN
                    ? gk_striped_scan<Op, In, Acc, BLOCK, WORDS, true>(
                          in, base, total, n, inner, in_words, slot, slot_prefix,
                          prefix_starts[r % DEPTH], totals[r & 1], tid)
                    : gk_striped_scan<Op, In, Acc, BLOCK, WORDS, false>(
                          in, base, total, n, inner, in_words, slot, slot_prefix,
                          prefix_starts[r % DEPTH], totals[r & 1], tid);
            if (tid == 0) {
                gk_publish_aggregate(flags, values, capacity, tile, aggregate, epoch,
                                     gk_uses_records<Acc>());
            }
            gk_bar_arrive(BAR_AGGREGATE + r % DEPTH, PREFIX_THREADS);
        }
        if (prev < tiles) {
            const int s = finished % DEPTH;
            const uint4* const slot = gk_striped_slots + s * SLOT_WORDS;
            const Acc* const slot_prefix = reinterpret_cast<const Acc*>(slot + WORDS * BLOCK);
            gk_bar_sync(GK_BAR_PREFIX + s, PREFIX_THREADS);
            const unsigned kind = gk_posted_kind(posted_before);
            const Acc tile_prefix =
                kind & GK_CONTINUES ? prefix_shared[s] : Op::template identity<Acc>();
            if (kind & GK_PLAIN) {
                gk_striped_finish<Op, In, Acc, Out, BLOCK, WORDS, true>(
                    out, prev * TILE, total, n, inner, out_words, slot, slot_prefix,
                    prefix_starts[s], tile_prefix, tid);
            } else {
                gk_striped_finish<Op, In, Acc, Out, BLOCK, WORDS, false>(
                    out, prev * TILE, total, n, inner, out_words, slot, slot_prefix,
                    prefix_starts[s], tile_prefix, tid);
            }
        }
        if (tid == 0 && tile < tiles) {
            gk_striped_claim_next<LOOKERS>(control, ring, r, tiles, kind_of);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Rung 6 - columns: scans along an axis that is not the last (inner > 1), such as axis 0 of a
// matrix. look_back reads such a scan one element per load with a stride of inner elements: a
// warp's load touches 32 separate sectors. Here lane c of each warp takes column c of a chunk of
// 32 neighbouring columns, so a warp's load is one row of the chunk (128 contiguous bytes of
// float32), and walks ROWS rows down it, scanning in registers (each output is the running
// value: the tile's prefix, then the column's elements one by one). A tile is WARPS x ROWS rows of
// the chunk: the warps' column totals are scanned through shared memory, and each column looks
// back along its own chain of tiles (lane c of warp 0 for column c), with the same flags and
// the same left-to-right fold as look_back, so results are deterministic.
// Tiles are numbered column chunk fastest, then row tile, then the axes before (outer), so a
// tile's predecessor in its column is `chunks` tiles before it: claimed that much earlier, it
// has usually published its inclusive prefix already when there are many chunks (numbered row
// tile fastest, each tile waited on the one claimed just before it: (8192, 8192) along axis 0
// 0.24 -> 0.41 of a copy, benchmarks/NOTES.md, item 67). With fewer chunks (the host's
// COLUMNS_GROUPED_CHUNKS) that predecessor is still running, and instances with GROUPED take
// look_back's groups along each column instead (gk_columns_group_look_back). Columns past inner
// idle.
// Narrow arrays (inner up to 32: instances with NARROW) take another path, gk_columns_narrow
// below: their rows are short, so a tile of consecutive whole rows is contiguous memory. On
// sm_90, float32 and float64 arrays of rows of 1 to 8 words of 16 bytes (or of 2 to 7 columns in
// row groups of 1, 3, 5 or 7 words) with one scan per column take a kernel of their own,
// scan_columns_striped (at the end of this file).
// Measured on an H100 (float32 along axis 0, per call, of a device copy): (8192, 8192) 0.52-0.54
// (look_back 0.10, cupy.cumsum 0.03); (2^20, 16) 0.48 (0.123 ms) on the narrow path with
// 16 x 24 tiles and one look-back per tile (0.30 with blocked's 8 x 16 and a look-back per
// column, 0.08 before the narrow path, half the lanes idle; cupy.cumsum 0.04, torch.cumsum
// 371 ms) (benchmarks/NOTES.md, items 73, 127 and 128); with lanes idle, (2^20, 24) 0.30 and
// (2^22, 3) 0.35 (0.19 and 0.03 on the wide path, which took them before; item 174).
// ---------------------------------------------------------------------------------------------

// The columns rung on narrow arrays, inner = C up to 32. A row of the tile takes CP lanes, C
// rounded up to a power of two (lanes past C idle: none where C is a power of two); a tile is
// BLOCK / CP x ITEMS whole rows (ITEMS: the instance's ROWS; the host's narrow_geometry takes
// 16 warps of up to 24 where their outputs fit sm_75's 64 KiB of shared memory, blocked's tile
// otherwise), consecutive elements, loaded and stored as blocked does (16-byte words striped
// across the threads, staged in the padded buffer, dynamic shared memory).
// Thread t takes column t % CP and ITEMS consecutive rows of it; the threads of a column scan
// across the warp by shuffles of CP, 2 CP, ... lanes and across warps through `totals`. The
// tile looks back once for all its columns: one flag per tile, each column's values in its
// own slice of the scratch (values + c * capacity * 48); warp 0 waits for the flags and warp w
// folds columns w, w + WARPS, ... in look_back's grouped, deterministic order (a look-back
// per column, each polling its own flags, had every tile send C times the flag reads to the
// L2).
template <typename Op, typename In, typename Acc, typename Out, int BLOCK, int ITEMS>
__device__ __forceinline__ void gk_columns_narrow(
        const In* __restrict__ in, Out* __restrict__ out, i64 n, i64 rows, int C, i64 tile,
        u64 epoch, u64* __restrict__ flags, char* __restrict__ values, i64 capacity,
        uint4* buffer, Acc (*totals)[32], int (*total_starts)[32], Acc* prefix_shared) {
    constexpr int IN_PER_WORD = (int)(16 / sizeof(In)), OUT_PER_WORD = (int)(16 / sizeof(Out));
    constexpr int IN_WORDS = ITEMS / IN_PER_WORD, OUT_WORDS = ITEMS / OUT_PER_WORD;
    constexpr int WARPS = BLOCK / 32;
    static_assert(ITEMS % IN_PER_WORD == 0 && ITEMS % OUT_PER_WORD == 0 && ITEMS <= 32,
                  "runs of whole words, starts in one 32-bit mask");
    static_assert(sizeof(Out) >= sizeof(In), "outputs as wide as the inputs");
    constexpr int IN_SLOTS = BLOCK * IN_WORDS + BLOCK * IN_WORDS / 8;
    constexpr int OUT_SLOTS = BLOCK * OUT_WORDS + BLOCK * OUT_WORDS / 8;
    typedef gk_segment<Acc> Segment;
    uint4* const in_words = buffer + (OUT_SLOTS - IN_SLOTS);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int shift = C <= 1 ? 0 : 32 - __clz(C - 1), CP = 1 << shift;  // CP lanes a row
    const int tile_rows = (BLOCK >> shift) * ITEMS;  // whole words: ITEMS is whole words
    const i64 total = n * rows;  // rows = the scans, outer x C
    const i64 row_count = total / C;
    const i64 base = tile * tile_rows * C;
    const i64 end = min(total, base + (i64)tile_rows * C);  // the tile's elements end here
    gk_stage_tile<In, BLOCK, IN_WORDS>(in, in_words, base, end, n, 1, tid);  // contiguous
    __syncthreads();

    // This thread's run: column `column`, rows first_row .. first_row + ITEMS - 1 of the
    // outer x n rows, `valid` of them before the end (none for an idle lane), `starts` those
    // that begin a scan.
    const int column = tid & (CP - 1), group = tid >> shift;
    const i64 first_row = tile * tile_rows + (i64)group * ITEMS;
    const int valid = column >= C || first_row >= row_count ? 0
                    : (row_count - first_row < ITEMS ? (int)(row_count - first_row) : ITEMS);
    unsigned starts = 0;
    if (valid > 0) {
        const i64 position = first_row % n;
        for (i64 k = position == 0 ? 0 : n - position; k < valid; k += n) starts |= 1u << k;
    }
    const In* const tile_in = reinterpret_cast<const In*>(in_words);
    Segment run = gk_segment_identity<Op, Acc>();
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        if (k < valid) {
            const int i = (group * ITEMS + k) * C + column;  // the tile's element i
            const Acc x = to_acc<Acc>(tile_in[gk_padded_slot(i / IN_PER_WORD) * IN_PER_WORD +
                                              i % IN_PER_WORD]);
            run.value = (starts >> k) & 1 ? x : Op::combine(run.value, x);
        }
    }
    run.start = starts != 0;

    // The runs of a column scanned across the warp (lanes CP apart), then the warps' totals.
    Segment inclusive = run;
    for (int d = CP; d < 32; d *= 2) {
        Segment left;
        left.value = gk_shfl_up(inclusive.value, d);
        left.start = __shfl_up_sync(0xffffffffu, inclusive.start, d);
        if (lane >= d) inclusive = gk_segment_combine<Op>(left, inclusive);
    }
    Segment before = gk_segment_identity<Op, Acc>();
    {
        const Acc value = gk_shfl_up(inclusive.value, CP & 31);
        const int start = __shfl_up_sync(0xffffffffu, inclusive.start, CP & 31);
        if (lane >= CP) {
            before.value = value;
            before.start = start;
        }
    }
    if (lane >= 32 - CP) {  // (an idle lane's column, past C, is never read)
        totals[warp][column] = inclusive.value;
        total_starts[warp][column] = inclusive.start;
    }
    __syncthreads();
    Segment running = gk_segment_identity<Op, Acc>();
    for (int v = 0; v < warp; ++v) {
        Segment t;
        t.value = totals[v][column];
        t.start = total_starts[v][column];
        running = gk_segment_combine<Op>(running, t);
    }
    if (lane >= CP) running = gk_segment_combine<Op>(running, before);

    // One look-back for the tile, all columns at once: the columns' aggregates are published
    // behind one flag per tile (a scan starts in a tile in every column or in none), warp 0
    // waits for the flags, and warp w folds the values of columns w, w + WARPS, ... in
    // look_back's order, so the bits are those of a look-back per column.
    __shared__ Segment column_aggregates[32], column_before[32], column_through[32];
    __shared__ unsigned group_starts;
    __shared__ i64 nearest_q;
    const bool continues = tile * tile_rows % n != 0;
    const i64 tile_group = tile / 32;
    const int position = (int)(tile % 32);
    const bool last = position == 31;
    for (int c = warp; c < C; c += WARPS) {
        Segment aggregate = gk_segment_identity<Op, Acc>();
        for (int v = 0; v < WARPS; ++v) {
            Segment t;
            t.value = totals[v][c];
            t.start = total_starts[v][c];
            aggregate = gk_segment_combine<Op>(aggregate, t);
        }
        if (lane == 0) {
            column_aggregates[c] = aggregate;
            *gk_tile_aggregate<Acc>(values + c * capacity * 48, tile) = aggregate.value;
            __threadfence();  // before thread 0's flag, past the barrier
        }
    }
    __syncthreads();
    const u64 own = epoch * GK_EPOCH + (column_aggregates[0].start ? GK_START : 0);
    if (tid == 0) gk_set_flag(flags, tile, own + GK_AGGREGATE);
    if (continues || last) {
        if (warp == 0) {  // this group's tiles before this one: their aggregates are in
            int start = lane == position ? column_aggregates[0].start : 0;
            if (lane < position) {
                start = (gk_wait_flag(flags, tile_group * 32 + lane, epoch) & GK_START) != 0;
            }
            const unsigned starts_mask = __ballot_sync(0xffffffffu, start);
            if (lane == 0) group_starts = starts_mask;
        }
        __syncthreads();
        for (int c = warp; c < C; c += WARPS) {  // W_group of each column, as gk_group_scan
            char* const column_values = values + c * capacity * 48;
            Segment w = gk_segment_identity<Op, Acc>();
            if (lane == position) {
                w = column_aggregates[c];
            } else if (lane < position) {
                const i64 k = tile_group * 32 + lane;
                w.value = gk_load_l2(gk_tile_aggregate<Acc>(column_values, k));
                w.start = (group_starts >> lane) & 1;
            }
            const Segment scan = gk_warp_scan<Op>(w);
            const Segment before = position == 0 ? gk_segment_identity<Op, Acc>()
                                                 : gk_segment_from(scan, position - 1);
            const Segment through = gk_segment_from(scan, position);
            if (lane == 0) {
                column_before[c] = before;
                column_through[c] = through;
                if (last) {
                    *gk_group_total<Acc>(column_values, capacity, tile) = through.value;
                    __threadfence();
                }
            }
        }
        __syncthreads();
        const bool through_start = column_through[0].start;
        const u64 group_bits = last ? GK_GROUP + (through_start ? GK_GROUP_START : 0) : 0;
        if (last && tid == 0) gk_set_flag(flags, tile, own + group_bits + GK_AGGREGATE);
        const bool needs_q =
            tile_group > 0 && (!column_before[0].start || (last && !through_start));
        if (needs_q && warp == 0) {
            const i64 found = gk_nearest_q(flags, tile_group, epoch);
            if (lane == 0) nearest_q = found;
        }
        __syncthreads();
        for (int c = warp; c < C; c += WARPS) {
            char* const column_values = values + c * capacity * 48;
            const Segment q = needs_q ? gk_fold_groups<Op, Acc>(flags, column_values, capacity,
                                                                nearest_q, tile_group, epoch)
                                      : gk_segment_identity<Op, Acc>();
            if (lane == 0) {
                prefix_shared[c] = gk_segment_combine<Op>(q, column_before[c]).value;
                if (last) {
                    *gk_tile_inclusive<Acc>(column_values, capacity, tile) =
                        gk_segment_combine<Op>(q, column_through[c]).value;
                    __threadfence();
                }
            }
        }
        __syncthreads();
        if (last && tid == 0) gk_set_flag(flags, tile, own + group_bits + GK_INCLUSIVE);
    }
    const Acc tile_prefix = continues && column < C ? prefix_shared[column]
                                                    : Op::template identity<Acc>();

    // The run again, after its prefix: read again (every thread's, before outputs wider than
    // the inputs overwrite them), into the buffer element by element, then stored in words.
    In held[ITEMS];
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int i = (group * ITEMS + k) * C + column;
        if (k < valid) held[k] = tile_in[gk_padded_slot(i / IN_PER_WORD) * IN_PER_WORD +
                                         i % IN_PER_WORD];
    }
    if (sizeof(Out) > sizeof(In)) __syncthreads();
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        if (k < valid) {
            const Acc x = to_acc<Acc>(held[k]);
            const bool start = (starts >> k) & 1;
            running.value = start ? x : Op::combine(running.value, x);
            running.start |= start;
            const int i = (group * ITEMS + k) * C + column;
            reinterpret_cast<Out*>(buffer + gk_padded_slot(i / OUT_PER_WORD))[i % OUT_PER_WORD] =
                to_acc<Out>(running.start ? running.value
                                          : Op::combine(tile_prefix, running.value));
        }
    }
    __syncthreads();
    gk_store_tile<Out, BLOCK, OUT_WORDS>(buffer, out, base, end, n, 1, tid);
}

// The narrow path's threads per SM: its registers are capped so that blocks of this many
// threads in all fit (64 registers a thread).
constexpr int NARROW_THREADS_PER_SM = 1024;

// The wide path's look-back where column chunks are few (fewer than the host's
// COLUMNS_GROUPED_CHUNKS: instances with GROUPED). There a tile's predecessor in its column was
// claimed just before it and is still looking back itself, and walking back a tile at a time to
// the nearest inclusive prefix made each column's chain serial ((2^20, 24) float32 along axis 0,
// which took this path then: 0.05 of a copy, 183 ns a tile). With more chunks that predecessor is
// as many claims older and has usually published its inclusive prefix: one step back, where the
// groups cost a dozen round trips a tile. This is look_back's grouped look-back along each
// column's chain (tiles `stride` apart, `position` along it), by warp 0 whole, lane c for column c
// of the chunk (`active` where it exists): one flag a tile (at slot tile * 32), each column's
// values in its lane's slot; the flags of the group's tiles before this one waited for a lane
// each, their aggregates folded left to right with eight loads in flight; Q_{g-1} from the nearest
// published Q (gk_nearest_q's search, over this chain's group ends) and the group totals after it.
// Returns the tile's exclusive prefix (identity at position 0). Deterministic: each value is
// defined once, as in look_back.
template <typename Op, typename Acc>
__device__ Acc gk_columns_group_look_back(u64* flags, char* values, i64 capacity, i64 tile,
                                          i64 stride, i64 position, bool active, Acc aggregate,
                                          u64 epoch) {
    const int lane = threadIdx.x & 31;
    const Acc identity = Op::template identity<Acc>();
    auto tile_at = [&](i64 p) { return tile - (position - p) * stride; };
    const i64 group = position / 32;
    const int index = (int)(position % 32);
    const bool last = index == 31;
    const u64 own = epoch * GK_EPOCH;
    if (active) *gk_tile_aggregate<Acc>(values, tile * 32 + lane) = aggregate;
    __threadfence();
    __syncwarp();
    if (lane == 0) gk_set_flag(flags, tile * 32, own + GK_AGGREGATE);
    // W_g(index - 1)
    if (lane < index) gk_wait_flag(flags, tile_at(group * 32 + lane) * 32, epoch);
    __syncwarp();
    Acc before = identity;
    for (int k0 = 0; k0 < index; k0 += 8) {
        Acc w[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            w[j] = identity;
            if (k0 + j < index && active) {
                w[j] = gk_load_l2(gk_tile_aggregate<Acc>(
                    values, tile_at(group * 32 + k0 + j) * 32 + lane));
            }
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            if (k0 + j < index) before = Op::combine(before, w[j]);
        }
    }
    Acc through = before;
    if (last) {  // W_g(31), the group's total
        through = Op::combine(before, aggregate);
        if (active) *gk_group_total<Acc>(values, capacity, tile * 32 + lane) = through;
        __threadfence();
        __syncwarp();
        if (lane == 0) gk_set_flag(flags, tile * 32, own + GK_GROUP + GK_AGGREGATE);
    }
    Acc q = identity;  // Q_{g-1}
    if (group > 0) {
        i64 found = -1;  // the nearest group with its Q published, 32 groups' flags at a time
        for (i64 end = group; end > 0; end -= 32) {
            const i64 m = end - 1 - lane;
            const bool published =
                m >= 0 && gk_has_inclusive(gk_read_flag(flags, tile_at(m * 32 + 31) * 32), epoch);
            const unsigned mask = __ballot_sync(0xffffffffu, published);
            if (mask != 0) {
                found = end - __ffs(mask);
                break;
            }
        }
        if (found >= 0 && active) {
            q = gk_load_l2(gk_tile_inclusive<Acc>(values, capacity,
                                                  tile_at(found * 32 + 31) * 32 + lane));
        }
        for (i64 m = found + 1; m < group; ++m) {
            const i64 end_tile = tile_at(m * 32 + 31);
            gk_wait_group(flags, end_tile * 32, epoch);
            if (active) {
                q = Op::combine(q, gk_load_l2(gk_group_total<Acc>(values, capacity,
                                                                  end_tile * 32 + lane)));
            }
        }
    }
    if (last) {  // Q_g
        if (active) *gk_tile_inclusive<Acc>(values, capacity, tile * 32 + lane) =
            Op::combine(q, through);
        __threadfence();
        __syncwarp();
        if (lane == 0) gk_set_flag(flags, tile * 32, own + GK_GROUP + GK_INCLUSIVE);
    }
    return Op::combine(q, before);
}

// The wide path's blocks per SM (of 256 threads) that its registers are capped for, by
// accumulator. Three for 8-byte floating ones (80 registers, 8-16 bytes of spills): uncapped,
// float32 and float64 (double accumulators) and complex64 took 90-95 and ran two blocks
// ((8192, 8192) float32 along axis 0 0.43 -> 0.52-0.54 of a copy, float64 0.76 -> 0.89-0.90;
// NOTES 139). Two for complex128 (128, not 148 and one block). Integer (u64) accumulators
// uncapped (64-80 registers: three or four blocks already) where the look-back walks, three
// where it takes groups (102-120 uncapped). float16's float accumulator uncapped: 64 registers,
// four blocks (a cap of three took it to 75 and three blocks, 0.46 -> 0.39-0.42).
template <typename Acc, bool GROUPED>
__host__ __device__ constexpr int gk_columns_wide_min_blocks() {
    return sizeof(Acc) > 8 ? 2 : (sizeof(Acc) == 8 ? 3 : 0);
}
template <>
__host__ __device__ constexpr int gk_columns_wide_min_blocks<u64, false>() {
    return 0;
}

template <typename Op, typename In, typename Acc, typename Out, int WARPS, int ROWS, bool NARROW,
          bool GROUPED>
__global__ void __launch_bounds__(WARPS * 32, NARROW ? NARROW_THREADS_PER_SM / (WARPS * 32)
                                                     : gk_columns_wide_min_blocks<Acc, GROUPED>())
scan_columns(const In* __restrict__ in, Out* __restrict__ out, i64 n, i64 rows, i64 inner,
             u64* __restrict__ control, u64* __restrict__ flags, char* __restrict__ values,
             i64 capacity) {
    extern __shared__ uint4 gk_narrow_tile[];  // the narrow path's (none for the other)
    __shared__ i64 tile_shared;
    __shared__ u64 epoch_shared;
    __shared__ Acc warp_totals[WARPS][32];
    __shared__ int warp_starts[NARROW ? WARPS : 1][32];
    __shared__ Acc prefix_shared[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    gk_claim_tile(control, tile_shared, epoch_shared);
    const i64 tile = tile_shared;
    const u64 epoch = epoch_shared;
    if constexpr (NARROW) {  // the host sends only inner of at most 32 here
        gk_columns_narrow<Op, In, Acc, Out, WARPS * 32, ROWS>(
            in, out, n, rows, (int)inner, tile, epoch, flags, values, capacity, gk_narrow_tile,
            warp_totals, warp_starts, prefix_shared);
        gk_finish_launch(control, epoch);
        return;
    }
    const i64 row_tiles = (n + WARPS * ROWS - 1) / (WARPS * ROWS);
    const i64 chunks = (inner + 31) / 32;
    const i64 chunk = tile % chunks;
    const i64 row_tile = tile / chunks % row_tiles;
    const i64 outer = tile / chunks / row_tiles;
    const i64 column = chunk * 32 + lane;
    const bool active = column < inner;
    const i64 first_row = row_tile * (WARPS * ROWS) + (i64)warp * ROWS;
    const i64 origin = outer * n * inner + column;

    In element[ROWS];  // as read: fewer registers than their running values in Acc
    Acc running = Op::template identity<Acc>();
#pragma unroll
    for (int k = 0; k < ROWS; ++k) {
        const i64 row = first_row + k;
        if (active && row < n) {
            element[k] = in[origin + row * inner];
            running = Op::combine(running, to_acc<Acc>(element[k]));
        }
    }
    warp_totals[warp][lane] = running;
    __syncthreads();
    Acc warp_prefix = Op::template identity<Acc>();
    for (int v = 0; v < warp; ++v) warp_prefix = Op::combine(warp_prefix, warp_totals[v][lane]);

    const i64 slot = tile * 32 + lane;  // this column's flag and values
    if constexpr (GROUPED) {
        if (warp == 0) {
            Acc aggregate = warp_totals[0][lane];
            for (int v = 1; v < WARPS; ++v) {
                aggregate = Op::combine(aggregate, warp_totals[v][lane]);
            }
            prefix_shared[lane] = gk_columns_group_look_back<Op, Acc>(
                flags, values, capacity, tile, chunks, row_tile, active, aggregate, epoch);
        }
    } else if (warp == 0 && active) {
        Acc aggregate = warp_totals[0][lane];
        for (int v = 1; v < WARPS; ++v) aggregate = Op::combine(aggregate, warp_totals[v][lane]);
        if (row_tile == 0) {
            gk_publish(flags, gk_tile_inclusive<Acc>(values, capacity, slot), slot, aggregate,
                       epoch * GK_EPOCH + GK_INCLUSIVE);
        } else {
            gk_publish(flags, gk_tile_aggregate<Acc>(values, slot), slot, aggregate,
                       epoch * GK_EPOCH + GK_AGGREGATE);
            // The nearest tile above with its inclusive prefix published, then the aggregates
            // below it, folded in order.
            i64 found = tile - chunks;
            while (!gk_has_inclusive(gk_wait_flag(flags, found * 32 + lane, epoch), epoch)) {
                found -= chunks;
            }
            Acc prefix = gk_load_l2(gk_tile_inclusive<Acc>(values, capacity, found * 32 + lane));
            for (i64 k = found + chunks; k < tile; k += chunks) {
                prefix = Op::combine(prefix,
                                     gk_load_l2(gk_tile_aggregate<Acc>(values, k * 32 + lane)));
            }
            prefix_shared[lane] = prefix;
            gk_publish(flags, gk_tile_inclusive<Acc>(values, capacity, slot), slot,
                       Op::combine(prefix, aggregate), epoch * GK_EPOCH + GK_INCLUSIVE);
        }
    }
    __syncthreads();
    if (active) {
        Acc value = row_tile == 0 ? warp_prefix : Op::combine(prefix_shared[lane], warp_prefix);
#pragma unroll
        for (int k = 0; k < ROWS; ++k) {
            const i64 row = first_row + k;
            if (row < n) {
                value = Op::combine(value, to_acc<Acc>(element[k]));
                out[origin + row * inner] = to_acc<Out>(value);
            }
        }
    }
    gk_finish_launch(control, epoch);
}

// ---------------------------------------------------------------------------------------------
// The columns rung's striped path: striped's schedule for one scan down each column of a narrow
// array, (n, C) with a row of C elements 1 to 8 words of 16 bytes long (WPR = C x sizeof(In) / 16
// words; its PER columns a word are a column group), in blocks of a multiple of WPR warps (the
// host sends nothing else); rows that are not whole words, below. A tile is BLOCK x RUN words,
// BLOCK x RUN / WPR whole rows. The data warps load it as striped does (word w * BLOCK + t by
// thread t, a warp's access 512 consecutive bytes) into shared memory, where each thread then
// reads a run of RUN rows of one column group and scans it in registers: a warp takes column
// group `group` = warp % WPR, its lanes the runs `part` x 32 .. `part` x 32 + 31 of that group
// in order (`part` = warp / WPR). A warp scan across the lanes (PER values a lane) and a fold of
// the warp totals of the group give each run its prefix within the tile; the tile's column
// aggregates go through shared memory (an atomic exchange, an atomic read: a handoff racecheck
// can check) to a look-back warp, which publishes them and looks back along the one chain of
// tiles for all C columns at once (lane c for column c: gk_columns_group_look_back, the wide
// path's grouped look-back, so the fences stay off the data warps). The tile is finished DEPTH -
// 1 rounds after its scan: each thread scans its run again from its prefix (kept in shared
// memory with the tile's words) and the tile's, writes the outputs over its words, and after a
// barrier the block stores the tile as it loaded it. The words' slots are swizzled
// (gk_columns_slot; rows of whole words) so that both accesses are free of bank conflicts. The
// data warps never wait for a look-back.
// sm_90 and newer, one scan per column (no axes before), outputs as wide as the inputs
// (float32, float64).
// Why runs: the first form of this path held the tile as loaded and scanned rows across lanes
// WPR apart, three to five shuffles an element and an 8-byte value an element held in shared
// memory: 0.39 of a copy for (2^20, 16) float32 on an H200, 0.49 with no look-back at all.
// A run takes RUN x PER elements in registers and a warp scan of PER values (NOTES 194).
// Measured on an H200 (per call, of a device copy; NOTES 194), against that first form and the
// narrow path (gk_columns_narrow): (2^20, 16) float32 0.55-0.57 (0.39, 0.34), (2^19, 32) 0.54-0.58
// (0.40, 0.30), (2^24, 16) 0.58 (0.37, 0.33), (2^22, 4) 0.51 (0.36, 0.36); float64 (2^20, 16) 0.58
// (narrow 0.41), (2^23, 2) 0.54 (0.44); the same data path with no look-back 0.51-0.77.
// Rows of 3, 5, 6 or 7 words (NOTES 195): (2^20, 24) float32 0.44 (narrow 0.23 in the run
// before), float64 of 10 to 14 columns 0.43-0.53 (0.32-0.39).
// Rows that are not whole words (COLUMNS > 0, gk_columns_rows; NOTES 198): 2 to 7 columns whose
// groups of 2 or 4 rows make 1, 3, 5 or 7 words, such as xyz coordinates (n, 3). A thread then
// takes whole row groups, all their columns (a run of RUN words, an odd number, so unswizzled
// slots are free of bank conflicts), every warp a part of the one group; the last word of the
// array may be in part, loaded and stored element by element. Measured on an H200 against the
// narrow path, where a row takes a power of two of lanes: float32 (2^24 / C, C) 0.48 (0.37) for
// 2 columns, 0.50 (0.32) for 3, 0.40 (0.26) for 5, 0.46 (0.30) for 6, 0.43 (0.34) for 7; float64
// 0.51 (0.36) for 3, 0.39 (0.32) for 5, 0.46 (0.41) for 7.
// ---------------------------------------------------------------------------------------------

// Slot of word i of a tile in the path's shared memory, for runs of `run_words` = RUN x WPR
// words (a multiple of 8): the word's place, its low three bits XORed with its run's number.
// The 8 lanes of each quarter of a warp then meet 8 different 16-byte bank groups both where
// they access 8 consecutive words (the loads and stores, all of one run) and where they access
// the same word of 8 consecutive runs (the scans). Runs of an odd number of words (ODD: rows
// that are not whole words, below) need no swizzle: 8 runs' words at the same place in each
// lie in 8 different bank groups as they are.
template <bool ODD>
__device__ __forceinline__ int gk_columns_slot(int i, int run_words) {
    return ODD ? i : i ^ ((i / run_words) & 7);
}

// The layout of scan_columns_striped's rows. COLUMNS = 0: rows of whole 16-byte words, C =
// inner read at run time; a word's PER elements are PER columns of one row (a column group).
// COLUMNS > 0: rows of COLUMNS elements that are not whole words; GROUP rows make WPR words (a
// row group), and a word's element e of a group's word w is column (w x PER + e) % COLUMNS of
// row (w x PER + e) / COLUMNS of the group.
__host__ __device__ constexpr int gk_gcd(int a, int b) { return b == 0 ? a : gk_gcd(b, a % b); }
template <typename In, int COLUMNS>
struct gk_columns_rows {
    static constexpr int PER = (int)(16 / sizeof(In));
    static constexpr int ROW_BYTES = COLUMNS * (int)sizeof(In);
    // the fewest rows that make whole words (the host's rungs.columns_striped_layout)
    static constexpr int GROUP = COLUMNS == 0 ? 1 : 16 / gk_gcd(ROW_BYTES, 16);
    static constexpr int WPR = COLUMNS == 0 ? 0 : ROW_BYTES * GROUP / 16;  // 0: run time
    static constexpr int VALUES = COLUMNS == 0 ? PER : COLUMNS;  // a thread's columns
};

template <typename Op, typename In, typename Acc, typename Out, int BLOCK, int RUN, int DEPTH,
          int LOOKERS, int COLUMNS>
__global__ void __launch_bounds__(BLOCK + 32 * LOOKERS, 2)
scan_columns_striped(const In* __restrict__ in, Out* __restrict__ out, i64 n, i64 rows,
                     i64 inner, u64* __restrict__ control, u64* __restrict__ flags,
                     char* __restrict__ values, i64 capacity) {
    typedef gk_columns_rows<In, COLUMNS> Rows;
    constexpr int PER = Rows::PER, VALUES = Rows::VALUES, WARPS = BLOCK / 32;
    constexpr bool GROUPED = COLUMNS > 0;  // rows that are not whole words
    constexpr int TILE_WORDS = BLOCK * RUN, TILE = TILE_WORDS * PER;
    constexpr int SLOT_WORDS = TILE_WORDS + (BLOCK * VALUES * (int)sizeof(Acc) + 15) / 16;
    constexpr unsigned PREFIX_THREADS = BLOCK + 32;  // the data warps and one look-back warp
    constexpr unsigned BAR_AGGREGATE = GK_BAR_PREFIX + 4;  // + r % DEPTH: round r's aggregate
    static_assert(DEPTH >= 2 && DEPTH <= 4 && BAR_AGGREGATE + DEPTH <= 16, "named barriers");
    static_assert(DEPTH + LOOKERS <= GK_STRIPED_RING, "a posted tile outlives its readers");
    static_assert(sizeof(Out) == sizeof(In), "outputs written over the words as loaded");
    static_assert(GROUPED ? RUN % Rows::WPR == 0 && RUN % 2 == 1 : RUN % 8 == 0,
                  "runs of whole row groups, an odd number of words (gk_columns_slot); or of 8 "
                  "words or more");
    static_assert(!GROUPED || (Rows::WPR <= 8 && COLUMNS <= 32), "a lane per column");
    static_assert(sizeof(Acc) <= 8, "an aggregate's bits in one word");
    // DEPTH slots, each a tile's words (at gk_columns_slot) and then each thread's run
    // prefixes (column k of its group at k * BLOCK + t)
    extern __shared__ uint4 gk_striped_slots[];
    __shared__ Acc totals[WARPS][VALUES];  // each warp's total of each column of its group
    __shared__ u64 aggregate_shared[DEPTH][32];  // round r's column aggregates (their bits)
    __shared__ Acc prefix_shared[DEPTH][32];  // and its tile's prefix of each column
    __shared__ u64 ring[GK_STRIPED_RING];
    __shared__ u64 epoch_shared;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int C = GROUPED ? COLUMNS : (int)inner;  // the host sends nothing else
    // Words a row (group), column groups (warps % groups == 0: the host's block), and each
    // data thread's part of a tile: its group, and its run of that group's rows. A row group
    // of rows that are not whole words is all of a thread's: one group, every warp a part.
    const int WPR = GROUPED ? Rows::WPR : C / PER, groups = GROUPED ? 1 : WPR;
    const int parts = WARPS / groups, run_words = GROUPED ? RUN : RUN * WPR;
    const int group = warp % groups, part = warp / groups;
    const int run = part * 32 + lane;  // this thread's run of its group's rows in a tile
    const i64 total = n * C, full_words = total / PER;
    const i64 total_words = GROUPED ? (total + PER - 1) / PER : full_words;
    const i64 tiles = (total + TILE - 1) / TILE;
    const bool aligned =
        reinterpret_cast<u64>(in) % 16 == 0 && reinterpret_cast<u64>(out) % 16 == 0;
    const auto kind_of = [](i64) { return 0u; };  // no row starts or ends inside a tile
    if (tid == 0) gk_striped_first<LOOKERS>(control, ring, tiles, epoch_shared, kind_of);
    __syncthreads();
    const u64 epoch = epoch_shared;

    if (warp >= WARPS) {
        // A look-back warp: rounds warp - WARPS, + LOOKERS, ..., each tile's once the data
        // warps have scanned it; it publishes the tile's aggregates, then waits for what it
        // needs of the tiles before.
        for (int r = warp - WARPS;; r += LOOKERS) {
            const i64 tile = gk_posted_tile(gk_posted(ring, r));
            if (tile >= tiles) break;
            gk_bar_sync(BAR_AGGREGATE + r % DEPTH, PREFIX_THREADS);
            // an atomic read of what the data warps left with an atomic exchange: an
            // aggregate handed over through a plain shared slot and an arrive/sync pair is
            // what racecheck reported in striped (NOTES 189), and here too (NOTES 191)
            const u64 bits = atomicAdd(&aggregate_shared[r % DEPTH][lane], 0ull);
            const Acc aggregate = lane < C ? gk_from_bits<Acc>(bits) : Op::template identity<Acc>();
            const Acc prefix = gk_columns_group_look_back<Op, Acc>(
                flags, values, capacity, tile, 1, tile, lane < C, aggregate, epoch);
            prefix_shared[r % DEPTH][lane] = prefix;
            gk_bar_arrive(GK_BAR_PREFIX + r % DEPTH, PREFIX_THREADS);
        }
        // as in scan_striped: the block claims no more tiles
        if (warp == WARPS && lane == 0) gk_count_finished_block(control, epoch);
        return;
    }

    // Word j of this thread's run in a tile, and (GROUPED) the column of its element k (word
    // rows have Rows::WPR = 0: the inner guard keeps the branch they never take defined)
    const auto run_word = [&](int j) {
        return GROUPED ? run * RUN + j : (run * RUN + j) * WPR + group;
    };
    const auto column_of = [](int j, int k) {
        return GROUPED ? ((j % (GROUPED ? Rows::WPR : 1)) * PER + k) % VALUES : k;
    };
    bool ended = false;  // a round's tile was past the last: so is every later round's
    int last_finish = -1;  // the round that finishes the last tile scanned so far
    for (int r = 0;; ++r) {
        const u64 posted = gk_striped_post<BLOCK, DEPTH>(ring, r, tiles, ended, last_finish);
        const i64 tile = gk_posted_tile(posted);
        if (r > last_finish) break;
        const int finished = r - (DEPTH - 1);
        const i64 prev =
            finished >= 0 ? gk_posted_tile(ring[finished % GK_STRIPED_RING]) : tiles;
        if (tile < tiles) {
            uint4* const slot = gk_striped_slots + (r % DEPTH) * SLOT_WORDS;
            Acc* const run_prefix = reinterpret_cast<Acc*>(slot + TILE_WORDS);
            const i64 first_word = tile * TILE_WORDS;
#pragma unroll
            for (int w = 0; w < RUN; ++w) {
                const int i = w * BLOCK + tid;
                const i64 at = first_word + i;
                gk_scan_word<In> word;
                word.bits = make_uint4(0, 0, 0, 0);
                if (at < total_words) {  // a word in part only where rows are not words
                    if (aligned && (!GROUPED || at < full_words)) {
                        word.bits = reinterpret_cast<const uint4*>(in)[at];
                    } else {
#pragma unroll
                        for (int k = 0; k < PER; ++k) {
                            if (!GROUPED || at * PER + k < total) word.elem[k] = in[at * PER + k];
                        }
                    }
                }
                slot[gk_columns_slot<GROUPED>(i, run_words)] = word.bits;
            }
            gk_bar_sync(GK_BAR_DATA, BLOCK);
            // The run's totals, then the runs of the warp scanned (lane order is row order).
            // Elements past the array's end (in its last tile) are left out: (GROUPED) those
            // of the run from `live` on, or the rows from `first_row + j == n` on.
            const i64 left = total - (first_word + run_word(0)) * PER;
            const int live = (int)(left < 0 ? 0 : left < RUN * PER ? left : RUN * PER);
            const i64 first_row = tile * (TILE_WORDS / WPR) + (i64)run * RUN;
            Acc sum[VALUES];
#pragma unroll
            for (int k = 0; k < VALUES; ++k) sum[k] = Op::template identity<Acc>();
#pragma unroll
            for (int j = 0; j < RUN; ++j) {
                gk_scan_word<In> word;
                word.bits = slot[gk_columns_slot<GROUPED>(run_word(j), run_words)];
#pragma unroll
                for (int k = 0; k < PER; ++k) {
                    if (GROUPED ? j * PER + k < live : first_row + j < n) {
                        const int c = column_of(j, k);
                        sum[c] = Op::combine(sum[c], to_acc<Acc>(word.elem[k]));
                    }
                }
            }
            Acc before[VALUES];  // the runs before this one in the warp, combined
#pragma unroll
            for (int k = 0; k < VALUES; ++k) {
                Acc s = sum[k];
#pragma unroll
                for (int d = 1; d < 32; d *= 2) {
                    const Acc left = gk_shfl_up(s, d);
                    if (lane >= d) s = Op::combine(left, s);
                }
                before[k] = gk_shfl_up(s, 1);
                if (lane == 31) totals[warp][k] = s;
            }
            gk_bar_sync(GK_BAR_DATA, BLOCK);
            // The group's warp totals folded in row order: this warp's prefix, the aggregate
#pragma unroll
            for (int k = 0; k < VALUES; ++k) {
                Acc folded = Op::template identity<Acc>(), warp_prefix = folded;
                for (int u = 0; u < parts; ++u) {
                    if (u == part) warp_prefix = folded;
                    folded = Op::combine(folded, totals[u * groups + group][k]);
                }
                run_prefix[k * BLOCK + tid] =
                    lane == 0 ? warp_prefix : Op::combine(warp_prefix, before[k]);
                if (part == 0 && lane == 0) {
                    atomicExch(&aggregate_shared[r % DEPTH][group * VALUES + k],
                               gk_bits(folded));
                }
            }
            gk_bar_arrive(BAR_AGGREGATE + r % DEPTH, PREFIX_THREADS);
        }
        if (prev < tiles) {
            const int s = finished % DEPTH;
            uint4* const slot = gk_striped_slots + s * SLOT_WORDS;
            const Acc* const run_prefix = reinterpret_cast<const Acc*>(slot + TILE_WORDS);
            gk_bar_sync(GK_BAR_PREFIX + s, PREFIX_THREADS);
            // The run scanned again from its prefix, its outputs over its words (which only
            // this thread reads in this round)
            Acc running[VALUES];
#pragma unroll
            for (int k = 0; k < VALUES; ++k) {
                running[k] = run_prefix[k * BLOCK + tid];
                if (prev != 0) {
                    running[k] = Op::combine(prefix_shared[s][group * VALUES + k], running[k]);
                }
            }
#pragma unroll
            for (int j = 0; j < RUN; ++j) {
                uint4& held = slot[gk_columns_slot<GROUPED>(run_word(j), run_words)];
                gk_scan_word<In> word;
                word.bits = held;
                gk_scan_word<Out> result;
#pragma unroll
                for (int k = 0; k < PER; ++k) {
                    const int c = column_of(j, k);
                    running[c] = Op::combine(running[c], to_acc<Acc>(word.elem[k]));
                    result.elem[k] = to_acc<Out>(running[c]);
                }
                held = result.bits;
            }
            gk_bar_sync(GK_BAR_DATA, BLOCK);
            const i64 first_word = prev * TILE_WORDS;
#pragma unroll
            for (int w = 0; w < RUN; ++w) {
                const int i = w * BLOCK + tid;
                const i64 at = first_word + i;
                if (at >= total_words) continue;
                gk_scan_word<Out> result;
                result.bits = slot[gk_columns_slot<GROUPED>(i, run_words)];
                if (aligned && (!GROUPED || at < full_words)) {
                    reinterpret_cast<uint4*>(out)[at] = result.bits;
                } else {
#pragma unroll
                    for (int k = 0; k < PER; ++k) {
                        if (!GROUPED || at * PER + k < total) out[at * PER + k] = result.elem[k];
                    }
                }
            }
        }
        if (tid == 0 && tile < tiles) {
            gk_striped_claim_next<LOOKERS>(control, ring, r, tiles, kind_of);
        }
    }
}
