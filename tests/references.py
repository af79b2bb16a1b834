"""Host references for the tests, taken from the library's own: each operation's reference and
error bound live once, with the operation (``gpukernels/ops/<name>/check.py``); these are the
shapes the tests ask for them in."""

from __future__ import annotations

import numpy

from gpukernels._core.inputs import random_array
from gpukernels._core.ladder import OPERATIONS

__all__ = ["random_array", "transpose", "matmul", "matmul_error_bound", "sum", "sum_error_bound",
           "reduction"]


def transpose(x: numpy.ndarray) -> numpy.ndarray:
    """``(..., M, N) -> (..., N, M)``, C-contiguous."""
    return OPERATIONS["transpose"].reference(x)[0]


def _wide(x: numpy.ndarray) -> numpy.ndarray:
    return x.astype(numpy.complex128 if x.dtype.kind == "c" else numpy.float64)


def matmul(a: numpy.ndarray, b: numpy.ndarray) -> numpy.ndarray:
    """``a @ b`` computed in float64 (complex128 for complex inputs), integers included."""
    return OPERATIONS["matmul"].reference(_wide(a), _wide(b))[0]


def matmul_error_bound(a: numpy.ndarray, b: numpy.ndarray, dtype, precision: str = "highest"):
    """The library's elementwise bound on the error of a ``dtype`` product of ``a`` and ``b``."""
    dtype = numpy.dtype(dtype)
    return OPERATIONS["matmul"].reference(a.astype(dtype), b.astype(dtype),
                                          precision=precision)[1]


def reduction(operation: str, x: numpy.ndarray, **kwargs):
    """``(reference, bound)`` of a reduction (bound None: exact)."""
    return OPERATIONS[operation].reference(x, **kwargs)


def sum(x: numpy.ndarray, axis=None, dtype=None, keepdims: bool = False):
    """``(reference, result_dtype)``: exact for integers (NumPy wraps the same way), float64 or
    complex128 for floats."""
    want, _ = OPERATIONS["sum"].reference(x, axis=axis, dtype=dtype, keepdims=keepdims)
    return want, OPERATIONS["sum"].result_dtype(x, dtype=dtype)


def sum_error_bound(x: numpy.ndarray, result_dtype) -> float:
    """The bound on a correct full float sum of ``x`` computed to ``result_dtype`` (0 for exact
    results)."""
    if x.size == 0:
        return 0.0
    _, bound = OPERATIONS["sum"].reference(x, dtype=result_dtype)
    return 0.0 if bound is None else float(bound)
