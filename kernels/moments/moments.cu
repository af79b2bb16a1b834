// moments.cu - the last step of var and std where the reduction's last write does not take it
// (complex or integer data, ddof other than 0 and 1, another result dtype, two_pass and shuffle).
// The reduction kernels (reduce/reduce.cu, reduce/axis.cu with MomentsOp) leave, per result,
// `parts` moments {count, mean, m2} in float64: one part for real data, two (the real and the
// imaginary part) for complex data, whose variances add. This kernel divides the summed m2 by
// n - ddof (the same for every result), takes the square root for std (ROOT), and rounds once
// to the result dtype:
//
//   moments_finish<Out, ROOT>(states, out, results, parts, divisor)
//
// One thread per result; the launch is a small share of a reduction's time (results are at
// most as many as the elements read).
// gk_round_double: the one rounding to the result type that var's last write also makes
#include "../reduce/common.cuh"

template <typename Out, bool ROOT>
__global__ void __launch_bounds__(256)
moments_finish(const double* __restrict__ states, Out* __restrict__ out, i64 results, int parts,
               double divisor) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= results) return;
    double m2 = 0.0;
    for (int p = 0; p < parts; ++p) m2 += states[(i * parts + p) * 3 + 2];
    double value = m2 / divisor;
    if (ROOT) value = sqrt(value);
    out[i] = gk_round_double<Out>(value);
}
