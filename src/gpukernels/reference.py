"""NumPy references for every operation, and the error bounds results are checked against.

References compute in float64 (complex128) or exact integers; the bounds say how far a correct
float32/float64 kernel may be from them.
"""

from __future__ import annotations

import math

import numpy

__all__ = ["transpose", "matmul", "matmul_error_bound", "sum", "sum_error_bound",
           "random_array"]


def transpose(x: numpy.ndarray) -> numpy.ndarray:
    """``(..., M, N) -> (..., N, M)``, C-contiguous."""
    return numpy.ascontiguousarray(numpy.swapaxes(x, -1, -2))


def matmul(a: numpy.ndarray, b: numpy.ndarray) -> numpy.ndarray:
    """``a @ b`` computed in float64 (complex128 for complex inputs)."""
    wide = numpy.complex128 if numpy.result_type(a, b).kind == "c" else numpy.float64
    return numpy.matmul(a.astype(wide), b.astype(wide))


def matmul_error_bound(a: numpy.ndarray, b: numpy.ndarray, dtype, c: float = 2.0) -> numpy.ndarray:
    """Elementwise bound ``c * K * eps * (|a| @ |b|)`` on the error of a ``dtype`` product.

    The classic bound for a dot product of length K accumulated in precision eps (Higham,
    *Accuracy and Stability of Numerical Algorithms*, 3.1), plus one rounding of the result.
    """
    eps = numpy.finfo(dtype).eps
    k = a.shape[-1]
    magnitude = numpy.matmul(numpy.abs(a).astype(numpy.float64), numpy.abs(b).astype(numpy.float64))
    return (c * max(k, 1) * eps + eps) * magnitude


def sum(x: numpy.ndarray, axis=None, dtype=None, keepdims: bool = False):
    """The sum NumPy's rules define: exact for integers (NumPy wraps the same way), float64 or
    complex128 for floats. Returns ``(reference, result_dtype)``."""
    result_dtype = numpy.sum(numpy.zeros(1, dtype=x.dtype), dtype=dtype).dtype
    if result_dtype.kind in "biu":
        return numpy.sum(x, axis=axis, dtype=result_dtype, keepdims=keepdims), result_dtype
    wide = numpy.complex128 if result_dtype.kind == "c" else numpy.float64
    source = x.astype(result_dtype).astype(wide) if x.dtype.kind == "c" and result_dtype.kind != "c" \
        else x.astype(wide)
    return numpy.sum(source, axis=axis, keepdims=keepdims), result_dtype


def sum_error_bound(x: numpy.ndarray, result_dtype, c: float = 2.0) -> float:
    """Bound on the error of a float sum of ``x`` computed in parallel and stored as ``result_dtype``.

    ``c * eps_acc * (sqrt(n) + log2(n) + 1) * sum(|x|) + eps_result * |sum(x)|``: the worst-case
    error when the n terms are split into chains of at most sqrt(n) sequential additions joined by
    a tree, which the kernels do; eps_acc is float32's for float16 data (accumulated in float32).
    """
    result_dtype = numpy.dtype(result_dtype)
    n = x.size
    if n == 0 or result_dtype.kind in "biu":
        return 0.0
    real = numpy.dtype(result_dtype.char.lower()) if result_dtype.kind == "c" else result_dtype
    eps_result = float(numpy.finfo(real).eps)
    eps_acc = float(numpy.finfo(numpy.float32 if real.itemsize <= 4 else numpy.float64).eps)
    wide = x.astype(numpy.complex128 if x.dtype.kind == "c" else numpy.float64)
    chains = math.sqrt(n) + math.log2(n) + 1
    return c * eps_acc * chains * float(numpy.abs(wide).sum()) + eps_result * float(abs(wide.sum()))


def random_array(shape, dtype, rng: numpy.random.Generator, *, integer_valued: bool = False):
    """Fresh random data of ``dtype``, as an array of ``shape``: uniform(-1, 1) for floats
    (integers in [-8, 8] when ``integer_valued``, whose sums and products are exact), the full
    range for integers, and a fair coin for bool. Not a constant fill, so wrong indexing shows;
    a tiny array can still come out all zeros by chance."""
    dtype = numpy.dtype(dtype)
    if dtype.kind == "b":
        return numpy.asarray(rng.random(shape) < 0.5)
    if dtype.kind in "iu":
        info = numpy.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    real = numpy.dtype(dtype.char.lower()) if dtype.kind == "c" else dtype

    def draw():
        if integer_valued:
            return rng.integers(-8, 9, size=shape).astype(real)
        return rng.uniform(-1.0, 1.0, size=shape).astype(real)

    if dtype.kind == "c":
        return numpy.asarray(draw() + 1j * draw()).astype(dtype)
    return numpy.asarray(draw())
