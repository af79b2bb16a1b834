"""Run a rung on fresh random data and compare it with the NumPy reference."""

from __future__ import annotations

from dataclasses import dataclass

import numpy

from . import _device, reference
from .ops.matmul import matmul
from .ops.reduce import sum as gk_sum
from .ops.transpose import transpose

__all__ = ["CheckResult", "check", "poisoned"]

OPERATIONS = ("transpose", "matmul", "sum")


@dataclass(frozen=True)
class CheckResult:
    """Outcome of :func:`check`.

    ``max_excess`` is the largest ``|error| / bound`` over the output (0 for exact comparisons
    that match); the check passes when every element is within its bound and nothing is NaN
    where the reference is not.
    """

    operation: str
    method: str
    shape: tuple
    dtype: str
    ok: bool
    max_error: float
    max_excess: float

    def __str__(self) -> str:
        verdict = "ok" if self.ok else "WRONG"
        return (f"{self.operation:9s} {self.method:10s} {str(self.shape):22s} {self.dtype:10s} "
                f"{verdict} (max error {self.max_error:.3g}, {self.max_excess:.3g} of the bound)")


def poisoned(shape, dtype):
    """A GPU array whose every byte is 0xFF: NaN for floats, -1 or the maximum for integers,
    so an element the kernel forgot to write cannot pass for a result."""
    cupy = _device.cupy
    out = cupy.empty(shape, dtype=dtype)
    out.reshape(-1).view(numpy.uint8)[...] = 0xFF  # reshape: a 0-d array cannot change itemsize
    return out


def _compare(got: numpy.ndarray, want: numpy.ndarray, bound) -> tuple[bool, float, float]:
    if got.shape != want.shape:
        return False, float("inf"), float("inf")
    if got.size == 0:
        return True, 0.0, 0.0
    if got.dtype.kind in "biu" or numpy.all(bound == 0):
        wrong = got != want
        return not wrong.any(), float(wrong.sum()), float(wrong.any())
    error = numpy.abs(got.astype(want.dtype) - want)
    excess = error / numpy.maximum(bound, numpy.finfo(numpy.float64).tiny)
    ok = bool(numpy.all(error <= bound)) and not numpy.isnan(error).any()
    return ok, float(numpy.nanmax(error)), float(numpy.nanmax(excess))


def check(operation: str, method: str, shape, dtype, *, seed: int | None = None,
          integer_valued: bool = False) -> CheckResult:
    """Run ``method`` of ``operation`` on fresh random data and compare with the reference.

    Parameters
    ----------
    operation : {"transpose", "matmul", "sum"}
    method : str
        A rung name (see :func:`gpukernels.methods`) or ``"auto"``.
    shape : tuple
        Input shape: ``(..., M, N)`` for transpose, ``(M, K, N)`` for matmul (``a`` is M x K,
        ``b`` is K x N), any shape for sum (a full reduction).
    dtype : dtype
        Input dtype.
    seed : int, optional
        Seed of the random generator; fresh entropy when None.
    integer_valued : bool
        Draw floats as integers in [-8, 8], so float results must match exactly (while sums and
        products stay below 2**24).

    Returns
    -------
    CheckResult

    Examples
    --------
    >>> from gpukernels.validation import check
    >>> check("matmul", "tiled", (100, 37, 61), "float32").ok
    True
    """
    cupy = _device.cupy
    _device.require_gpu()
    rng = numpy.random.default_rng(seed)
    dtype = numpy.dtype(dtype)
    shape = tuple(shape)
    if operation == "transpose":
        x = reference.random_array(shape, dtype, rng)
        want = reference.transpose(x)
        out = poisoned(want.shape, dtype)
        got = cupy.asnumpy(transpose(cupy.asarray(x), method=method, out=out))
        ok, err, excess = _compare(got, want, 0)
    elif operation == "matmul":
        m, k, n = shape
        a = reference.random_array((m, k), dtype, rng, integer_valued=integer_valued)
        b = reference.random_array((k, n), dtype, rng, integer_valued=integer_valued)
        want = reference.matmul(a, b)
        out = poisoned(want.shape, numpy.result_type(a, b))
        got = cupy.asnumpy(matmul(cupy.asarray(a), cupy.asarray(b), method=method, out=out))
        bound = 0 if integer_valued else reference.matmul_error_bound(a, b, out.dtype)
        ok, err, excess = _compare(got, want, bound)
    elif operation == "sum":
        x = reference.random_array(shape, dtype, rng, integer_valued=integer_valued)
        want, result_dtype = reference.sum(x)
        out = poisoned((), result_dtype)
        got = cupy.asnumpy(gk_sum(cupy.asarray(x), method=method, out=out))
        bound = 0 if integer_valued else reference.sum_error_bound(x, result_dtype)
        ok, err, excess = _compare(got, numpy.asarray(want), bound)
    else:
        raise ValueError(f"unknown operation {operation!r}; choose one of {', '.join(OPERATIONS)}")
    return CheckResult(operation, method, shape, dtype.name, ok, err, excess)
