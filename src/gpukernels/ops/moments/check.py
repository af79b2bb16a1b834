"""What the tools need to know about mean, var and std: inputs, references and error bounds,
and the benchmark spec."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy

from ..._core import device as _device
from ..._core.compare import within
from ..._core.ladder import BenchSpec
from ..reduce.check import REDUCE_AXIS_CASES, inputs, one_read_bench
from ..reduce.dtypes import (
    mean_result_dtype,
    normalize_axis,
    real_part,
    reduction_result_dtype,
)

__all__ = ["inputs", "mean_reference", "make_spread_reference", "make_bench"]

EPS64 = float(numpy.finfo(numpy.float64).eps)


def _wide(x: Any) -> Any:
    return x.astype(numpy.complex128 if x.dtype.kind == "c" else numpy.float64)


def _eps(dtype: numpy.dtype) -> float:
    dtype = numpy.dtype(dtype)
    return float(numpy.finfo(real_part(dtype) if dtype.kind == "c" else dtype).eps)


def _count(x: Any, axis: Any) -> int:
    return math.prod(x.shape[ax] for ax in normalize_axis(axis, x.ndim))


def _rounding(want: Any, dtype: numpy.dtype) -> Any:
    """The result's rounding: two units of ``dtype``'s epsilon relative, and its smallest
    subnormal absolute (float16 variances of small data are subnormal)."""
    real = real_part(dtype) if dtype.kind == "c" else dtype
    return 2.0 * _eps(dtype) * abs(want) + float(numpy.finfo(real).smallest_subnormal)


def _chains(count: int) -> float:
    """The longest chain of additions, sqrt(n) + log2(n) + 1 (see the sums' reference)."""
    count = max(count, 1)
    return math.sqrt(count) + math.log2(count) + 1


def mean_reference(x: Any, *, xp: Any = numpy, axis: Any = None, dtype: Any = None,
                   keepdims: bool = False, accumulated_in: Any = None) -> tuple:
    """NumPy's mean of ``x`` in float64 (complex128), with the error bound of a correct result:
    the sum's bound over the count, ``2 eps_acc (sqrt(n) + log2(n) + 1) mean(|x|)``, and the
    result's rounding, ``2 eps_out |mean|`` and the smallest subnormal. eps_acc is float64's for real results (the
    kernels sum them in float64), the result's for complex ones, or ``accumulated_in``'s (the
    libraries, which sum float32 in float32 as NumPy does)."""
    result_dtype = mean_result_dtype(x.dtype, dtype)
    source = _wide(x)
    want = xp.mean(source, axis=axis, keepdims=keepdims)
    eps_acc = _eps(accumulated_in) if accumulated_in is not None else \
        _eps(result_dtype) if result_dtype.kind == "c" else EPS64
    magnitude = xp.mean(abs(source), axis=axis, keepdims=keepdims)
    bound = 2.0 * eps_acc * _chains(_count(x, axis)) * magnitude + _rounding(want, result_dtype)
    return want, bound


def make_spread_reference(operation: str) -> Callable[..., tuple]:
    """The reference of var or std (see the returned function's docstring)."""

    def reference(x: Any, *, xp: Any = numpy, axis: Any = None, dtype: Any = None,
                  keepdims: bool = False, ddof: Any = 0, accumulated_in: Any = None) -> tuple:
        """NumPy's var (or std) of ``x`` in float64 (two passes: accurate), with the error
        bound of a correct result. Merging moments in float64 along chains of at most n
        elements errs by at most about ``n eps64 sqrt(mean(|x|^2) var)`` in the variance
        (Chan, Golub and LeVeque's bound for the updating algorithm); the result's rounding
        adds ``2 eps_out |var|`` and the smallest subnormal. With ``accumulated_in`` (the libraries, which work in
        float32 for float32 data as NumPy does: a mean, then a sum of squared deviations),
        ``2 eps_acc (sqrt(n) + log2(n) + 1) mean(|x|^2)`` instead of the merges' term. For
        std, ``sqrt`` of the variance's bound (|sqrt a - sqrt b| <= sqrt|a - b|) plus its own
        rounding."""
        result_dtype = reduction_result_dtype("var", x.dtype, dtype)
        source = _wide(x)
        count = _count(x, axis)
        want = xp.var(source, axis=axis, keepdims=keepdims, ddof=ddof)
        mean_square = xp.mean(abs(source) ** 2, axis=axis, keepdims=keepdims)
        scale = count / max(count - ddof, 1)
        if accumulated_in is None:
            accumulation = 4.0 * max(count, 1) * EPS64 * xp.sqrt(mean_square * abs(want))
        else:
            accumulation = 2.0 * _eps(accumulated_in) * _chains(count) * mean_square
        bound = accumulation * scale + _rounding(want, result_dtype)
        if operation == "std":
            want = xp.sqrt(want)
            bound = xp.sqrt(bound) + _rounding(want, result_dtype)
        return want, bound

    return reference


# --- the benchmark ------------------------------------------------------------------------------------

def _checks(op: Any, x: Any, kwargs: dict) -> tuple:
    """The rungs' check (the kernels' bound) and the peers' (NumPy's: the libraries accumulate
    float32 in float32, as NumPy does)."""
    result_dtype = op.result_dtype(x)
    want, bound = op.reference(x, xp=_device.cupy, **kwargs)
    _, peer_bound = op.reference(x, xp=_device.cupy, accumulated_in=result_dtype, **kwargs)

    def check(out: Any, bound: Any = bound) -> bool:
        out = _device.cupy.asarray(out)
        return out.shape == want.shape and out.dtype == result_dtype and within(out, want, bound)

    return check, lambda out: check(out, peer_bound)


def _torch_options(operation: str, x: Any) -> dict | None:
    """torch.mean, var and std take floating-point and complex tensors only; var and std with
    NumPy's default ddof of 0."""
    if x.dtype.kind not in "fc":
        return None
    return {} if operation == "mean" else {"correction": 0}


def make_bench(operation: str) -> BenchSpec:
    """The benchmark spec of mean, var or std (see
    :func:`gpukernels.ops.reduce.check.one_read_bench`)."""
    return one_read_bench(operation, checks=_checks,
                          torch_options=functools.partial(_torch_options, operation),
                          main_dtypes=("float32",), dtypes=("float32",),
                          axis_cases=REDUCE_AXIS_CASES[:6])
