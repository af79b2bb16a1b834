// common.cuh - types and helpers shared by every kernel family.
//
// The loader inlines this file into each .cu source (with #line markers), so NVRTC needs no
// include path and CuPy's cache key, a hash of the source text, changes whenever this file does.
// Nothing here includes a system header: NVRTC ships none by default.
#pragma once

typedef long long i64;
typedef unsigned long long u64;

// Element types that the kernels move or accumulate. NumPy's float16 and complex dtypes have no
// NVRTC built-in type without headers, so they get small structs with the same size and layout.
struct gk_half {
    unsigned short bits;  // IEEE binary16, as NumPy stores it
};

template <typename R>
struct gk_complex {
    R re, im;  // NumPy's complex64 / complex128 layout: real part first
};

// 16-byte payload for moving complex128 without interpreting it (transpose). Two 8-byte words
// keep the alignment requirement at 8 bytes, which every complex128 array satisfies.
struct gk_bytes16 {
    u64 lo, hi;
};

// An unsigned word of BYTES bytes, for moving several elements in one access.
template <int BYTES> struct gk_word;
template <> struct gk_word<1> { typedef unsigned char type; };
template <> struct gk_word<2> { typedef unsigned short type; };
template <> struct gk_word<4> { typedef unsigned int type; };
template <> struct gk_word<8> { typedef uint2 type; };
template <> struct gk_word<16> { typedef uint4 type; };

// The word a thread moves when it transposes V x V blocks in registers (transpose_vector,
// permute_vector): V elements as one vector word, or the element itself for V = 1 (complex128
// arrays are only 8-byte aligned, so a lone 16-byte element is not a uint4).
template <typename T, int V>
struct gk_block_word { typedef typename gk_word<sizeof(T) * V>::type type; };
template <typename T>
struct gk_block_word<T, 1> { typedef T type; };

// V elements of type T viewed as one word: registers, so swapping a block's rows and columns
// is free renames (4- and 8-byte elements) or byte permutes (1- and 2-byte ones).
template <typename T, int V>
union gk_block_row {
    typename gk_block_word<T, V>::type word;
    T elem[V];
};

__device__ __forceinline__ float gk_half_to_float(gk_half h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
    return f;
}

template <typename R>
__device__ __forceinline__ gk_complex<R> operator+(gk_complex<R> a, gk_complex<R> b) {
    gk_complex<R> c;
    c.re = a.re + b.re;
    c.im = a.im + b.im;
    return c;
}

template <typename R>
__device__ __forceinline__ gk_complex<R> operator*(gk_complex<R> a, gk_complex<R> b) {
    gk_complex<R> c;
    c.re = a.re * b.re - a.im * b.im;
    c.im = a.re * b.im + a.im * b.re;
    return c;
}

// to_acc<Acc>(x): one input element converted to the accumulator type. Integers widen to
// unsigned 64-bit, where overflow wraps modulo 2^64 without undefined behaviour; truncating the
// final value to the result width gives NumPy's wrap-around for every integer dtype.
template <typename Acc, typename In>
struct ToAcc {
    static __device__ __forceinline__ Acc apply(In x) { return static_cast<Acc>(x); }
};
template <typename Acc>
struct ToAcc<Acc, gk_half> {
    static __device__ __forceinline__ Acc apply(gk_half x) {
        return static_cast<Acc>(gk_half_to_float(x));
    }
};
// A bool is any byte, as NumPy stores it: nonzero is true. (A C++ bool holding 2 or 255 would
// otherwise convert to that value.)
template <typename Acc>
struct ToAcc<Acc, bool> {
    static __device__ __forceinline__ Acc apply(bool x) {
        union {
            bool flag;
            unsigned char byte;
        } u;
        u.flag = x;
        return static_cast<Acc>(u.byte != 0);
    }
};
// float32 to float16, rounding to nearest even (a float16 result of a float32 accumulation).
template <>
struct ToAcc<gk_half, float> {
    static __device__ __forceinline__ gk_half apply(float x) {
        gk_half h;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(x));
        return h;
    }
};
template <typename R>
struct ToAcc<gk_complex<R>, gk_complex<R> > {
    static __device__ __forceinline__ gk_complex<R> apply(gk_complex<R> x) { return x; }
};

template <typename Acc, typename In>
__device__ __forceinline__ Acc to_acc(In x) {
    return ToAcc<Acc, In>::apply(x);
}

// A 4-byte load through the read-only path whose L2 fetches the whole 128-byte line that holds it
// from DRAM, not only its sector (.L2::128B): for reads whose neighbouring bytes other threads
// read soon after. `p` must not be written while the kernel runs.
__device__ __forceinline__ unsigned gk_load_line(const unsigned* p) {
    unsigned value;
    asm volatile("ld.global.nc.L2::128B.u32 %0, [%1];\n" : "=r"(value) : "l"(p));
    return value;
}

// Asynchronous copies from global to shared memory (cp.async, sm_80 and newer). A thread issues
// copies and goes on; gk_copy_commit() closes its group of copies issued so far, and
// gk_copy_wait<N>() waits until at most N of its groups are still in flight (then a barrier
// makes every thread's copies visible to the block). They are `asm volatile` with a memory
// clobber, so the compiler keeps them in program order with respect to __syncthreads().
// Compiled for an older GPU they trap: kernels that use them are launched on sm_80 and newer.
__device__ __forceinline__ unsigned gk_shared_address(const void* p) {
    return (unsigned)__cvta_generic_to_shared(p);
}

// 16 bytes from `src` to shared address `dst`, both 16-byte aligned. With .L2::128B the L2 fetches
// the whole 128-byte line that holds them from DRAM, not only their sector: for copies whose
// neighbouring bytes other copies read soon after (rows cut at unaligned columns).
__device__ __forceinline__ void gk_copy16_async_line(unsigned dst, const void* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;\n" ::"r"(dst), "l"(src)
                 : "memory");
#else
    __trap();
#endif
}

// 16 bytes to shared address `dst`, of which only the first `bytes` (0 to 16) are read from
// `src`: the rest are zeros. Both 16-byte aligned.
__device__ __forceinline__ void gk_copy16_async_zfill(unsigned dst, const void* src, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(bytes)
                 : "memory");
#else
    __trap();
#endif
}

__device__ __forceinline__ void gk_copy_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#else
    __trap();
#endif
}

template <int PENDING>
__device__ __forceinline__ void gk_copy_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
#else
    __trap();
#endif
}
