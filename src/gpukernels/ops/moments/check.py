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
from ..._core.ladder import OPERATIONS, BenchSpec
from ..reduce.axis import PLAN_NAME
from ..reduce.check import REDUCE_AXIS_CASES, inputs, size_and_axis_cases
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

#: The libraries' functions timed beside the rungs.
_TORCH = {"mean": "mean", "var": "var", "std": "std"}


def _main_cases(operation: str, quick: bool) -> list:
    from ...benchmark.sweep import Case

    inputs_ = [((2**22,), "float32")] if quick else [((2**28,), "float32")]
    return [Case(operation, shape, dtype, "main", (("torch", False),)) for shape, dtype in inputs_]


def _candidates(case: Any, methods: tuple[str, ...], seed: int, *, torch: bool = True,
                **_: Any) -> tuple[list, float, dict]:
    from ...benchmark.sweep import Candidate

    cupy = _device.cupy
    operation = case.operation
    op = OPERATIONS[operation]
    kwargs = {k: v for k, v in case.options if k == "axis"}
    use_torch = torch and dict(case.options).get("torch", True)
    (x,), _ = inputs(case.shape, case.dtype, seed, xp=cupy)
    result_dtype = op.result_dtype(x)
    want, bound = op.reference(x, xp=cupy, **kwargs)
    # the libraries accumulate float32 in float32, as NumPy does: held to that bound
    _, peer_bound = op.reference(x, xp=cupy, accumulated_in=result_dtype, **kwargs)

    def check(out: Any, bound: Any = bound) -> bool:
        out = cupy.asarray(out)
        return out.shape == want.shape and out.dtype == result_dtype and within(out, want, bound)

    def check_peer(out: Any) -> bool:
        return check(out, peer_bound)

    # The ceiling: CUB's sum of the same input, which reads it once at the memory's speed.
    candidates = [Candidate("cupy.sum (CUB)", "ceiling", lambda: cupy.sum(x, **kwargs),
                            lambda out: True)]
    library = getattr(cupy, operation)
    candidates.append(Candidate(f"cupy.{operation}", "library", lambda: library(x, **kwargs),
                                check_peer))
    # torch.mean, var and std take floating-point and complex tensors only
    library_torch = _device.torch_on_gpu() if use_torch and x.dtype.kind in "fc" else None
    if library_torch is not None:
        tensor = library_torch.from_dlpack(x)  # the same device memory: no copy
        torch_fn = getattr(library_torch, _TORCH[operation])
        axis = kwargs.get("axis")
        torch_kwargs: dict = {} if axis is None else {"dim": axis}
        if operation != "mean":
            torch_kwargs["correction"] = 0
        candidates.append(Candidate(f"torch.{_TORCH[operation]}", "library",
                                    lambda: torch_fn(tensor, **torch_kwargs),
                                    lambda out: check_peer(cupy.from_dlpack(out))))
    if "axis" not in kwargs:
        candidates += [Candidate(m, "rung", functools.partial(op.function, x, method=m), check)
                       for m in methods]
    else:  # every rung sends these to the same row and column kernels
        candidates.append(Candidate(PLAN_NAME, "rung",
                                    lambda: op.function(x, axis=kwargs["axis"]), check))
    notes = {"input_bytes": x.nbytes}
    if "axis" in kwargs:
        notes["axis"] = kwargs["axis"]
    return candidates, x.nbytes / 1e9, notes


def make_bench(operation: str) -> BenchSpec:
    """The benchmark spec of mean, var or std: CUB's sum of the same input as the ceiling (one
    read of the data), CuPy's and PyTorch's functions as peers."""
    return BenchSpec(
        unit="GB/s", work="bytes read", ceiling="cupy.sum (CUB) of the same input",
        peers=f"cupy.{operation}; torch.{_TORCH[operation]} on the same memory via DLPack, when "
              "PyTorch imports",
        defaults={"sizes": (2**16, 2**20, 2**24, 2**26, 2**28), "dtypes": ("float32",),
                  "shapes": (), "axis_cases": REDUCE_AXIS_CASES[:6], "axis_dtype": "float32",
                  "torch": True},
        quick={"sizes": (2**10, 10**5),
               "axis_cases": (((512, 512), 0), ((512, 512), 1), ((1000, 2), 1))},
        cases=size_and_axis_cases, candidates=_candidates, main_cases=_main_cases,
        options=("axis_cases", "axis_dtype", "torch"),
        title=f"{operation}: achieved bandwidth against input size")
