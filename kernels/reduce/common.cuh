// reduce/common.cuh - the operators and block-level building blocks shared by the full
// reductions (reduce.cu) and the axis reductions (axis.cu).
#pragma once
#include "../common.cuh"

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

// var and std: the count, mean and sum of squared deviations from the mean (m2) of the elements
// seen, in double whatever the input, merged with Chan, Golub and LeVeque's pairwise update. No
// sum of squares is ever formed, so the variance stays accurate when the mean is large against
// the spread. An element is the moments {1, x, 0}; the identity has count 0.
struct gk_moments {
    double count, mean, m2;
};
#define GK_MOMENTS_OF(T)                                                                   \
    template <>                                                                            \
    struct ToAcc<gk_moments, T> {                                                          \
        static __device__ __forceinline__ gk_moments apply(T x) {                          \
            gk_moments m = {1.0, to_acc<double>(x), 0.0};                                  \
            return m;                                                                      \
        }                                                                                  \
    };
GK_MOMENTS_OF(bool)
GK_MOMENTS_OF(signed char)
GK_MOMENTS_OF(unsigned char)
GK_MOMENTS_OF(short)
GK_MOMENTS_OF(unsigned short)
GK_MOMENTS_OF(int)
GK_MOMENTS_OF(unsigned int)
GK_MOMENTS_OF(long long)
GK_MOMENTS_OF(unsigned long long)
GK_MOMENTS_OF(gk_half)
GK_MOMENTS_OF(float)
GK_MOMENTS_OF(double)
#undef GK_MOMENTS_OF
template <>
struct ToAcc<gk_moments, gk_moments> {
    static __device__ __forceinline__ gk_moments apply(gk_moments x) { return x; }
};

struct MomentsOp {
    template <typename T>
    static __device__ __forceinline__ T identity() {
        T m = {0.0, 0.0, 0.0};
        return m;
    }
    template <typename T>
    static __device__ __forceinline__ T combine(T a, T b) {
        if (b.count == 0.0) return a;
        if (a.count == 0.0) return b;
        T m;
        m.count = a.count + b.count;
        const double delta = b.mean - a.mean;
        const double b_share = b.count / m.count;
        m.mean = a.mean + delta * b_share;
        m.m2 = (a.m2 + b.m2) + delta * delta * a.count * b_share;
        return m;
    }
};

// var and std in one launch: the moments' last write (to_acc<gk_spread<...> >) divides m2 by
// max(count - DDOF, 0) and, for std (ROOT), takes the square root, then rounds once to T
// (float16, float32 or float64): the double operations of moments/moments.cu's finish, which
// a second launch runs where this does not (complex or integer data, other ddof or dtype=).
// A gk_spread is a T's bytes; the wrapper allocates the result as T.
template <typename T, int DDOF, bool ROOT>
struct gk_spread {
    T value;
};
template <typename T>
__device__ __forceinline__ T gk_round_double(double x) { return static_cast<T>(x); }
template <>
__device__ __forceinline__ gk_half gk_round_double<gk_half>(double x) {
    gk_half h;
    asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h.bits) : "d"(x));  // one rounding, as NumPy's cast
    return h;
}
template <typename T, int DDOF, bool ROOT>
struct ToAcc<gk_spread<T, DDOF, ROOT>, gk_moments> {
    static __device__ __forceinline__ gk_spread<T, DDOF, ROOT> apply(gk_moments m) {
        double value = m.m2 / fmax(m.count - DDOF, 0.0);
        if (ROOT) value = sqrt(value);
        gk_spread<T, DDOF, ROOT> s = {gk_round_double<T>(value)};
        return s;
    }
};

// mean: the sum and the count of the elements seen, in double, divided at the last write (one
// rounding to the result dtype), so a mean is one launch like a sum. Aligned to its 16 bytes, so
// that partials move as one 16-byte access each (gk_load_l2), not four of 4 bytes.
struct __align__(16) gk_mean {
    double sum, count;
};
#define GK_MEAN_OF(T)                                                                      \
    template <>                                                                            \
    struct ToAcc<gk_mean, T> {                                                             \
        static __device__ __forceinline__ gk_mean apply(T x) {                             \
            gk_mean m = {to_acc<double>(x), 1.0};                                          \
            return m;                                                                      \
        }                                                                                  \
    };
GK_MEAN_OF(bool)
GK_MEAN_OF(signed char)
GK_MEAN_OF(unsigned char)
GK_MEAN_OF(short)
GK_MEAN_OF(unsigned short)
GK_MEAN_OF(int)
GK_MEAN_OF(unsigned int)
GK_MEAN_OF(long long)
GK_MEAN_OF(unsigned long long)
GK_MEAN_OF(gk_half)
GK_MEAN_OF(float)
GK_MEAN_OF(double)
#undef GK_MEAN_OF
template <>
struct ToAcc<gk_mean, gk_mean> {
    static __device__ __forceinline__ gk_mean apply(gk_mean m) { return m; }
};
template <typename T>  // the result (float16, float32 or float64): one rounding of the quotient
struct ToAcc<T, gk_mean> {
    static __device__ __forceinline__ T apply(gk_mean m) {
        return gk_round_double<T>(m.sum / m.count);
    }
};

struct MeanOp {
    template <typename T>
    static __device__ __forceinline__ T identity() {
        T m = {0.0, 0.0};
        return m;
    }
    template <typename T>
    static __device__ __forceinline__ T combine(T a, T b) {
        T m = {a.sum + b.sum, a.count + b.count};
        return m;
    }
};

// argmin and argmax: the extreme value seen and the first index where it occurs. V is the type
// values are compared in (float16 in float32, exactly). Combining keeps the smaller index on
// ties, so the result does not depend on the order of the combines; NaN counts as the extreme,
// as in NumPy, and the first NaN wins.
template <typename V>
struct gk_arg {
    V value;
    i64 index;
};
template <typename V>
struct ToAcc<gk_arg<V>, gk_arg<V> > {
    static __device__ __forceinline__ gk_arg<V> apply(gk_arg<V> a) { return a; }
};
template <typename V>
struct ToAcc<long long, gk_arg<V> > {  // the result: the index
    static __device__ __forceinline__ long long apply(gk_arg<V> a) { return a.index; }
};

template <bool MAX>
struct GkArgOp {
    static constexpr bool indexed = true;
    template <typename T>
    static __device__ __forceinline__ T identity() {
        T a;
        a.value = MAX ? gk_limits<decltype(a.value)>::lowest()
                      : gk_limits<decltype(a.value)>::highest();
        a.index = 9223372036854775807ll;
        return a;
    }
    // Input element `index` as the accumulator.
    template <typename T, typename In>
    static __device__ __forceinline__ T element(In x, i64 index) {
        T a;
        a.value = to_acc<decltype(a.value)>(x);
        a.index = index;
        return a;
    }
    template <typename T>
    static __device__ __forceinline__ T combine(T a, T b) {
        const bool a_nan = gk_isnan(a.value), b_nan = gk_isnan(b.value);
        if (a_nan || b_nan) return (a_nan && (!b_nan || a.index < b.index)) ? a : b;
        const bool b_wins = MAX ? b.value > a.value : b.value < a.value;
        return (b_wins || (b.value == a.value && b.index < a.index)) ? b : a;
    }
};
typedef GkArgOp<false> ArgMinOp;
typedef GkArgOp<true> ArgMaxOp;

// Whether an operator keeps the index of each input element (Op::indexed; false when absent).
template <typename Op>
struct gk_indexed {
    template <typename O>
    static constexpr __device__ bool test(decltype(O::indexed)*) { return O::indexed; }
    template <typename O>
    static constexpr __device__ bool test(...) { return false; }
    static constexpr bool value = test<Op>(nullptr);
};
template <typename A, typename B>
struct gk_same {
    static constexpr bool value = false;
};
template <typename A>
struct gk_same<A, A> {
    static constexpr bool value = true;
};

// Input element x, whose index along what the kernel reduces is `index`, as the accumulator:
// to_acc, or the operator's own conversion for the arg-reductions, which keep the index.
// Partial results (In is Acc) pass as they are.
template <typename Op, typename Acc, typename In>
__device__ __forceinline__ Acc gk_element(In x, i64 index) {
    if constexpr (gk_indexed<Op>::value && !gk_same<In, Acc>::value) {
        return Op::template element<Acc>(x, index);
    } else {
        return to_acc<Acc>(x);
    }
}

// Any type across the warp, `shuffle` (an int -> int warp shuffle) applied to each of its
// 4-byte pieces; 1- and 2-byte types (bool, char, short in min and max) go as one int.
template <typename T, typename Shuffle>
__device__ __forceinline__ T gk_shfl_pieces(T value, Shuffle shuffle) {
    if constexpr (sizeof(T) % 4 == 0) {
        union {
            T value;
            int words[sizeof(T) / 4];
        } u;
        u.value = value;
#pragma unroll
        for (int i = 0; i < (int)(sizeof(T) / 4); ++i) u.words[i] = shuffle(u.words[i]);
        return u.value;
    } else {
        return (T)shuffle((int)value);
    }
}

template <typename T>
__device__ __forceinline__ T gk_shfl_down(T value, int offset) {
    return gk_shfl_pieces(value,
                          [offset](int w) { return __shfl_down_sync(0xffffffffu, w, offset); });
}

template <typename T>
__device__ __forceinline__ T gk_shfl_up(T value, int offset) {
    return gk_shfl_pieces(value,
                          [offset](int w) { return __shfl_up_sync(0xffffffffu, w, offset); });
}

template <typename T>
__device__ __forceinline__ T gk_shfl_from(T value, int lane) {
    return gk_shfl_pieces(value, [lane](int w) { return __shfl_sync(0xffffffffu, w, lane); });
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

// Thread `thread` of `threads` reading in[0], in[stride], ..., in[(n - 1) * stride] together:
// its share combined in registers, with 16-byte words when the input is contiguous (a scalar
// head up to the first 16-byte boundary and a scalar tail), scalar loads otherwise. Element i
// goes to the same thread on every call; its index (for argmin and argmax) is base + i.
template <typename Op, typename In, typename Acc>
__device__ __forceinline__ Acc gk_slice_reduce(const In* __restrict__ in, i64 n, i64 stride,
                                               i64 thread, i64 threads, i64 base = 0) {
    Acc acc = Op::template identity<Acc>();
    constexpr int PER_WORD = sizeof(In) <= 16 ? 16 / sizeof(In) : 1;
    const unsigned long long address = reinterpret_cast<unsigned long long>(in);
    if (stride != 1 || PER_WORD == 1 || address % sizeof(In) != 0) {
        for (i64 i = thread; i < n; i += threads) {
            acc = Op::combine(acc, gk_element<Op, Acc>(in[i * stride], base + i));
        }
        return acc;
    }
    // Elements before the first 16-byte boundary, then whole words, then the rest.
    i64 head = (i64)((16 - address % 16) % 16 / sizeof(In));
    if (head > n) head = n;
    if (thread < head) acc = Op::combine(acc, gk_element<Op, Acc>(in[thread], base + thread));
    const i64 words = (n - head) / PER_WORD;
    union Word {
        uint4 bits;
        In elem[PER_WORD];
    };
    const uint4* word_ptr = reinterpret_cast<const uint4*>(in + head);
    i64 w = thread;
    // A word's elements are folded in Acc: float32 summed in float64 converts every element
    // (free at memory speed on an H100; folding the four floats in float32 first left errors
    // that could exceed NumPy's pairwise sum's on mixed magnitudes).
    // (word w's first element is element head + w * PER_WORD)
    auto fold_word = [](const Word& word, i64 first) {
        Acc folded = gk_element<Op, Acc>(word.elem[0], first);
#pragma unroll
        for (int k = 1; k < PER_WORD; ++k) {
            folded = Op::combine(folded, gk_element<Op, Acc>(word.elem[k], first + k));
        }
        return folded;
    };
    const i64 first = base + head;
    for (; w + threads < words; w += 2 * threads) {  // two loads in flight per thread
        Word a, b;
        a.bits = word_ptr[w];
        b.bits = word_ptr[w + threads];
        acc = Op::combine(acc, fold_word(a, first + w * PER_WORD));
        acc = Op::combine(acc, fold_word(b, first + (w + threads) * PER_WORD));
    }
    if (w < words) {
        Word a;
        a.bits = word_ptr[w];
        acc = Op::combine(acc, fold_word(a, first + w * PER_WORD));
    }
    const i64 tail = head + words * PER_WORD + thread;
    if (tail < n) {  // fewer than PER_WORD remain
        acc = Op::combine(acc, gk_element<Op, Acc>(in[tail], base + tail));
    }
    return acc;
}

// The grid's threads share the input: thread blockIdx.x * BLOCK + threadIdx.x.
template <typename Op, typename In, typename Acc, int BLOCK>
__device__ __forceinline__ Acc gk_thread_reduce(const In* __restrict__ in, i64 n, i64 stride) {
    return gk_slice_reduce<Op, In, Acc>(in, n, stride, (i64)blockIdx.x * BLOCK + threadIdx.x,
                                        (i64)gridDim.x * BLOCK);
}

// A load that bypasses L1, which may hold a stale copy of what another SM wrote: one 16-byte
// piece at a time for 16-byte aligned accumulators (gk_mean), so that a warp reading consecutive
// ones asks the L2 once per 16 bytes, not four times; 4-byte pieces otherwise (8-byte pieces
// cost the float32 sum's split column kernel two registers, 32 -> 34, a block per SM on sm_90).
template <typename Piece, typename T>
__device__ __forceinline__ T gk_load_l2_pieces(const T* p) {
    union {
        T value;
        Piece pieces[sizeof(T) / sizeof(Piece)];
    } u;
#pragma unroll
    for (int i = 0; i < (int)(sizeof(T) / sizeof(Piece)); ++i) {
        u.pieces[i] = __ldcg(reinterpret_cast<const Piece*>(p) + i);
    }
    return u.value;
}
template <typename T>
__device__ __forceinline__ T gk_load_l2(const T* p) {
    static_assert(sizeof(T) % 4 == 0 || sizeof(T) < 4, "4-byte pieces or a small integer");
    if constexpr (sizeof(T) % 16 == 0 && alignof(T) % 16 == 0) {
        return gk_load_l2_pieces<int4>(p);
    } else if constexpr (sizeof(T) % 4 == 0) {
        return gk_load_l2_pieces<int>(p);
    } else {
        return *static_cast<const volatile T*>(p);
    }
}

