// store.cuh - the epilogue store of the tensor-core rungs (mma.cu, wgmma.cu): two adjacent
// float32 sums of a row of C, rounded to C's type; and bfloat16, which only these rungs compute.
#pragma once
#include "../common.cuh"

// bfloat16 as ml_dtypes and PyTorch store it: the high 16 bits of a float32. The tensor cores
// read it as they read float16 (mma/wgmma .bf16 operands), and results are rounded to it once.
struct gk_bfloat16 {
    unsigned short bits;
};

// Two adjacent results of row-major C: (p[0], p[1]) = (v0, v1), as far as they lie inside the
// row. `pair` says the two may be written as one aligned 4- or 8-byte store.
struct __align__(8) gk_mma_float2 {
    float x, y;
};
__device__ __forceinline__ void gk_mma_store2(float* p, float v0, float v1, bool in0, bool in1,
                                              bool pair) {
    if (pair && in1) {
        *reinterpret_cast<gk_mma_float2*>(p) = gk_mma_float2{v0, v1};
    } else {
        if (in0) p[0] = v0;
        if (in1) p[1] = v1;
    }
}
__device__ __forceinline__ void gk_mma_store2(gk_half* p, float v0, float v1, bool in0, bool in1,
                                              bool pair) {
    if (pair && in1) {
        unsigned h2;  // v0 in the low half: the lower address
        asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(h2) : "f"(v1), "f"(v0));
        *reinterpret_cast<unsigned*>(p) = h2;
    } else {
        if (in0) p[0] = to_acc<gk_half>(v0);
        if (in1) p[1] = to_acc<gk_half>(v1);
    }
}
__device__ __forceinline__ void gk_mma_store2(gk_bfloat16* p, float v0, float v1, bool in0,
                                              bool in1, bool pair) {
    // cvt.rn.bf16x2.f32 rounds to nearest even (NaN stays NaN), as the float16 store does.
    unsigned h2;  // v0 in the low half: the lower address
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(h2) : "f"(v1), "f"(v0));
    if (pair && in1) {
        *reinterpret_cast<unsigned*>(p) = h2;
    } else {
        if (in0) p[0].bits = (unsigned short)(h2 & 0xFFFFu);
        if (in1) p[1].bits = (unsigned short)(h2 >> 16);
    }
}

// One float32 sum rounded to nearest even as T (float: as it is).
template <typename T>
__device__ __forceinline__ T gk_round(float v);
template <>
__device__ __forceinline__ float gk_round<float>(float v) {
    return v;
}
template <>
__device__ __forceinline__ gk_half gk_round<gk_half>(float v) {
    return to_acc<gk_half>(v);
}
template <>
__device__ __forceinline__ gk_bfloat16 gk_round<gk_bfloat16>(float v) {
    gk_bfloat16 h;
    asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(h.bits) : "f"(v));
    return h;
}
