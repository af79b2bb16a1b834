// reduce.cu - reductions with an associative operator: sum, prod, min and max, each an Op type
// with an identity and a combine, so every rung serves every operator.
//
// Every rung reads n elements in[0], in[stride], ..., converts each to Acc (see to_acc in
// common.cuh) and combines them:
//
//   reduce_two_pass<Op, In, Acc, BLOCK>(in, out, n, stride)            one Acc per block in out
//   reduce_shuffle<Op, In, Acc, BLOCK>(in, out, n, stride)             one Acc per block in out
//   reduce_one_pass<Op, In, Acc, BLOCK>(in, out, n, stride, partials, counter)    out[0]
//
// Launched with one block, the first two reduce their whole input to out[0]; the host launches
// them a second time over the per-block partials. The order of the combines depends only on n,
// the input's alignment and the launch configuration, so the same input always gives bitwise the
// same result: no floating-point atomics (one_pass counts finished blocks with an integer one).
#include "common.cuh"

// Largest and smallest values of each accumulator type: the identities of min and max.
template <typename T> struct gk_limits;
#define GK_LIMITS(T, LOWEST, HIGHEST)                                          \
    template <> struct gk_limits<T> {                                          \
        static __device__ __forceinline__ T lowest() { return LOWEST; }      \
        static __device__ __forceinline__ T highest() { return HIGHEST; }    \
    };
GK_LIMITS(bool, false, true)
GK_LIMITS(signed char, -128, 127)
GK_LIMITS(unsigned char, 0, 255)
GK_LIMITS(short, -32768, 32767)
GK_LIMITS(unsigned short, 0, 65535)
GK_LIMITS(int, -2147483647 - 1, 2147483647)
GK_LIMITS(unsigned int, 0u, 4294967295u)
GK_LIMITS(long long, -9223372036854775807ll - 1, 9223372036854775807ll)
GK_LIMITS(unsigned long long, 0ull, 18446744073709551615ull)
GK_LIMITS(float, __int_as_float(0xff800000), __int_as_float(0x7f800000))  // -inf, +inf
GK_LIMITS(double, __longlong_as_double(0xfff0000000000000ll), __longlong_as_double(0x7ff0000000000000ll))
#undef GK_LIMITS

// x != x only for NaN; integers never are.
template <typename T>
__device__ __forceinline__ bool gk_isnan(T x) { return x != x; }

struct SumOp {
    template <typename T>
    static __device__ __forceinline__ T identity() { return to_acc<T>(0); }
    template <typename T>
    static __device__ __forceinline__ T combine(T a, T b) { return a + b; }
};
template <>
__device__ __forceinline__ gk_complex<float> SumOp::identity<gk_complex<float> >() {
    gk_complex<float> z = {0.0f, 0.0f};
    return z;
}
template <>
__device__ __forceinline__ gk_complex<double> SumOp::identity<gk_complex<double> >() {
    gk_complex<double> z = {0.0, 0.0};
    return z;
}

struct ProdOp {
    template <typename T>
    static __device__ __forceinline__ T identity() { return to_acc<T>(1); }
    template <typename T>
    static __device__ __forceinline__ T combine(T a, T b) { return a * b; }
};
template <>
__device__ __forceinline__ gk_complex<float> ProdOp::identity<gk_complex<float> >() {
    gk_complex<float> z = {1.0f, 0.0f};
    return z;
}
template <>
__device__ __forceinline__ gk_complex<double> ProdOp::identity<gk_complex<double> >() {
    gk_complex<double> z = {1.0, 0.0};
    return z;
}

// min and max propagate NaN as NumPy does: once either operand is NaN, so is the result.
struct MinOp {
    template <typename T>
    static __device__ __forceinline__ T identity() { return gk_limits<T>::highest(); }
    template <typename T>
    static __device__ __forceinline__ T combine(T a, T b) {
        return gk_isnan(a) ? a : (gk_isnan(b) || b < a) ? b : a;
    }
};

struct MaxOp {
    template <typename T>
    static __device__ __forceinline__ T identity() { return gk_limits<T>::lowest(); }
    template <typename T>
    static __device__ __forceinline__ T combine(T a, T b) {
        return gk_isnan(a) ? a : (gk_isnan(b) || b > a) ? b : a;
    }
};

// ---------------------------------------------------------------------------------------------
// Rung 1 - two_pass: each thread accumulates a grid-stride slice of the input in a register
// (coalesced: consecutive threads read consecutive elements), the block folds its BLOCK values
// with a tree in shared memory that halves the active threads each step, and thread 0 writes
// one partial per block. The host launches the same kernel a second time, with one block, over
// the partials: the launch boundary is the grid-wide synchronisation, instead of atomics.
// One barrier per tree step suffices: in a step, the threads that write (tid < s) and the slots
// that are read (tid + s >= s) are disjoint. BLOCK must be a power of two.
// ---------------------------------------------------------------------------------------------
template <typename Op, typename In, typename Acc, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
reduce_two_pass(const In* __restrict__ in, Acc* __restrict__ out, i64 n, i64 stride) {
    __shared__ Acc partial[BLOCK];
    const int tid = threadIdx.x;
    Acc acc = Op::template identity<Acc>();
    const i64 step = (i64)gridDim.x * BLOCK;
    for (i64 i = (i64)blockIdx.x * BLOCK + tid; i < n; i += step) {
        acc = Op::combine(acc, to_acc<Acc>(in[i * stride]));
    }
    partial[tid] = acc;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (tid < s) partial[tid] = Op::combine(partial[tid], partial[tid + s]);
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = partial[0];
}

// ---------------------------------------------------------------------------------------------
// Rung 2 - shuffle: 16-byte loads and warp shuffles.
// two_pass issues one load of 1 to 16 bytes per element, and its shared-memory tree costs a
// barrier per halving. Here a contiguous input is read as 16-byte words (16 int8 or 4 float32
// per load, the widest access the hardware has; a scalar head and tail handle the unaligned
// ends, strided inputs keep scalar loads), so a warp's request moves 512 bytes. A block folds
// its values with __shfl_down_sync inside each warp (registers, no barrier), then one warp folds
// the per-warp results: one barrier in all. Still two launches, like two_pass.
// ---------------------------------------------------------------------------------------------

// Shuffle any accumulator type down the warp: 4-byte pieces for 4-, 8- and 16-byte types,
// an int for the 1- and 2-byte ones (bool, char, short in min and max).
template <typename T>
__device__ __forceinline__ T gk_shfl_down(T value, int offset) {
    if constexpr (sizeof(T) % 4 == 0) {
        union {
            T value;
            int words[sizeof(T) / 4];
        } u;
        u.value = value;
#pragma unroll
        for (int i = 0; i < (int)(sizeof(T) / 4); ++i) {
            u.words[i] = __shfl_down_sync(0xffffffffu, u.words[i], offset);
        }
        return u.value;
    } else {
        return (T)__shfl_down_sync(0xffffffffu, (int)value, offset);
    }
}

template <typename Op, typename Acc>
__device__ __forceinline__ Acc gk_warp_reduce(Acc value) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        value = Op::combine(value, gk_shfl_down(value, offset));
    }
    return value;  // lane 0 holds the warp's result
}

// The block's BLOCK values folded into one, valid in thread 0. One barrier; `scratch` is reused
// by the caller only after another barrier.
template <typename Op, typename Acc, int BLOCK>
__device__ __forceinline__ Acc gk_block_reduce(Acc value, Acc* scratch) {
    static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "whole warps, at most 32 of them");
    value = gk_warp_reduce<Op>(value);
    if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = value;
    __syncthreads();
    if (threadIdx.x < 32) {
        value = threadIdx.x < BLOCK / 32 ? scratch[threadIdx.x] : Op::template identity<Acc>();
        value = gk_warp_reduce<Op>(value);
    }
    return value;
}

// The type a 16-byte word's elements are folded in before joining the thread's accumulator:
// the accumulator's, except float32 summed in float64, where converting every element would make
// the conversion unit (a quarter of the FP32 rate) the bottleneck; the word's four floats are
// added in float32 (an error of at most 3 ulp of their magnitude) and converted once.
template <typename In, typename Acc>
struct gk_word_acc { typedef Acc type; };
template <>
struct gk_word_acc<float, double> { typedef float type; };

// This thread's share of the input, combined in registers: 16-byte words when the input is
// contiguous, scalar loads otherwise. Element i goes to the same thread on every call.
template <typename Op, typename In, typename Acc, int BLOCK>
__device__ __forceinline__ Acc gk_thread_reduce(const In* __restrict__ in, i64 n, i64 stride) {
    const i64 thread = (i64)blockIdx.x * BLOCK + threadIdx.x;
    const i64 threads = (i64)gridDim.x * BLOCK;
    Acc acc = Op::template identity<Acc>();
    constexpr int PER_WORD = sizeof(In) <= 16 ? 16 / sizeof(In) : 1;
    const unsigned long long address = reinterpret_cast<unsigned long long>(in);
    if (stride != 1 || PER_WORD == 1 || address % sizeof(In) != 0) {
        for (i64 i = thread; i < n; i += threads) acc = Op::combine(acc, to_acc<Acc>(in[i * stride]));
        return acc;
    }
    // Elements before the first 16-byte boundary, then whole words, then the rest.
    i64 head = (i64)((16 - address % 16) % 16 / sizeof(In));
    if (head > n) head = n;
    if (thread < head) acc = Op::combine(acc, to_acc<Acc>(in[thread]));
    const i64 words = (n - head) / PER_WORD;
    union Word {
        uint4 bits;
        In elem[PER_WORD];
    };
    const uint4* word_ptr = reinterpret_cast<const uint4*>(in + head);
    i64 w = thread;
    typedef typename gk_word_acc<In, Acc>::type WordAcc;
    auto fold_word = [](const Word& word) {
        WordAcc folded = to_acc<WordAcc>(word.elem[0]);
#pragma unroll
        for (int k = 1; k < PER_WORD; ++k) folded = Op::combine(folded, to_acc<WordAcc>(word.elem[k]));
        return to_acc<Acc>(folded);
    };
    for (; w + threads < words; w += 2 * threads) {  // two loads in flight per thread
        Word a, b;
        a.bits = word_ptr[w];
        b.bits = word_ptr[w + threads];
        acc = Op::combine(acc, fold_word(a));
        acc = Op::combine(acc, fold_word(b));
    }
    if (w < words) {
        Word a;
        a.bits = word_ptr[w];
        acc = Op::combine(acc, fold_word(a));
    }
    const i64 tail = head + words * PER_WORD + thread;
    if (tail < n) acc = Op::combine(acc, to_acc<Acc>(in[tail]));  // fewer than PER_WORD remain
    return acc;
}

template <typename Op, typename In, typename Acc, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
reduce_shuffle(const In* __restrict__ in, Acc* __restrict__ out, i64 n, i64 stride) {
    __shared__ Acc scratch[BLOCK / 32];
    const Acc value =
        gk_block_reduce<Op, Acc, BLOCK>(gk_thread_reduce<Op, In, Acc, BLOCK>(in, n, stride), scratch);
    if (threadIdx.x == 0) out[blockIdx.x] = value;
}

// ---------------------------------------------------------------------------------------------
// Rung 3 - one_pass: the last block to finish combines the partials, in the same launch.
// A second launch costs a few microseconds of launch latency and a grid-wide drain, which is a
// visible share of a reduction that takes tens of microseconds (10^7 elements). Each block
// writes its partial, makes it visible device-wide (__threadfence) and takes a ticket from an
// integer counter; the block that draws the last ticket knows every partial is written, folds
// them in index order (so the result does not depend on which block came last) and resets the
// counter to 0 for the next launch. `counter` must be 0 at launch and must not be shared by
// launches that can run at the same time (the host keeps one per device and stream).
// ---------------------------------------------------------------------------------------------
// A load that bypasses L1, which may hold a stale copy of what another SM wrote (4-byte pieces,
// so it works for every accumulator type).
template <typename T>
__device__ __forceinline__ T gk_load_l2(const T* p) {
    static_assert(sizeof(T) % 4 == 0 || sizeof(T) < 4, "4-byte pieces or a small integer");
    if constexpr (sizeof(T) % 4 == 0) {
        union {
            T value;
            int words[sizeof(T) / 4];
        } u;
#pragma unroll
        for (int i = 0; i < (int)(sizeof(T) / 4); ++i) {
            u.words[i] = __ldcg(reinterpret_cast<const int*>(p) + i);
        }
        return u.value;
    } else {
        return *static_cast<const volatile T*>(p);
    }
}

template <typename Op, typename In, typename Acc, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
reduce_one_pass(const In* __restrict__ in, Acc* __restrict__ out, i64 n, i64 stride,
                Acc* __restrict__ partials, unsigned int* __restrict__ counter) {
    __shared__ Acc scratch[BLOCK / 32];
    __shared__ bool is_last;
    Acc value =
        gk_block_reduce<Op, Acc, BLOCK>(gk_thread_reduce<Op, In, Acc, BLOCK>(in, n, stride), scratch);
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = value;
        __threadfence();  // the partial is visible to every block before the ticket is taken
        is_last = atomicAdd(counter, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!is_last) return;
    __threadfence();  // see the other blocks' partials
    value = Op::template identity<Acc>();
    for (unsigned int k = threadIdx.x; k < gridDim.x; k += BLOCK) {
        value = Op::combine(value, gk_load_l2(partials + k));
    }
    value = gk_block_reduce<Op, Acc, BLOCK>(value, scratch);
    if (threadIdx.x == 0) {
        out[0] = value;
        *counter = 0;
    }
}
