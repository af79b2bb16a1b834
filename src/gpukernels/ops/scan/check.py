"""What the tools need to know about the scans: inputs, references and error bounds, and the
benchmark spec (one for cumsum and cumprod, made per operation)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy

from ..._core import device as _device
from ..._core.compare import same_bits, within
from ..._core.ladder import OPERATIONS, BenchSpec
from ..reduce.check import inputs, size_and_axis_cases
from ..reduce.dtypes import reduction_result_dtype
from . import rungs

__all__ = ["inputs", "make_reference", "make_bench", "depth"]


def depth(n: int) -> int:
    """The most roundings on any element's path through the kernels for scans of ``n``: up to
    ``n / 128`` tiles folded one after another (columns' tiles are 128 rows; the others'
    longer), plus the in-tile steps (16 in a thread, then trees of warps and words)."""
    return n // 128 + 64


def make_reference(operation: str) -> Callable[..., tuple]:
    """The reference of one scan (see the returned function's docstring)."""

    def reference(x: Any, *, xp: Any = numpy, axis: Any = None, dtype: Any = None) -> tuple:
        """NumPy's result, exactly for integer and bool results (no bound), in float64
        (complex128) for floats, with the error bound of a correct float result:

        * cumsum: ``(2 eps_out + depth(n) eps_acc) cumsum(|x|)``: the output rounded at most
          twice (the textbook rung rounds a tile's part, then the sum with its carry), and the
          accumulator's roundings along the longest chain of combines;
        * cumprod: ``(2 eps_out + 2 depth(n) eps_acc) |cumprod(x)|`` and the smallest normal
          number absolute, near underflow.

        eps_acc is the accumulator's: float32 for float16 and complex64, float64 otherwise.
        """
        result_dtype = reduction_result_dtype(operation, x.dtype, dtype)
        function = getattr(xp, operation)
        if result_dtype.kind == "b":
            return function(x.astype(bool), axis=axis) != 0, None
        if result_dtype.kind in "iu":  # NumPy wraps the same way, whatever the order
            source = x if x.dtype.kind in "biu" else x.astype(result_dtype)
            return function(source, axis=axis, dtype=result_dtype), None
        wide = numpy.complex128 if result_dtype.kind == "c" else numpy.float64
        source = x.astype(result_dtype).astype(wide)
        want = function(source, axis=axis)
        n = x.size if axis is None or x.ndim == 0 else x.shape[axis]
        real = numpy.dtype(result_dtype.char.lower()) if result_dtype.kind == "c" else result_dtype
        eps_out = float(numpy.finfo(real).eps)
        acc = rungs.accumulator(result_dtype)[0]
        eps_acc = float(numpy.finfo(acc.char.lower() if acc.kind == "c" else acc).eps)
        if operation == "cumsum":
            bound = (2.0 * eps_out + depth(n) * eps_acc) * xp.cumsum(abs(source), axis=axis)
        else:
            tiny = float(numpy.finfo(real).tiny)
            bound = (2.0 * eps_out + 2.0 * depth(n) * eps_acc) * abs(want) + tiny
        return want, bound

    return reference


# --- the benchmark ------------------------------------------------------------------------------

#: Scans along an axis: the issue's column case, both axes of a square matrix, many short rows,
#: long rows of a large input, and few columns that are not a power of two (24; xyz
#: coordinates).
AXIS_CASES = (((2**20, 16), 0), ((8192, 8192), 0), ((8192, 8192), 1), ((2**20, 16), 1),
              ((256, 2**20), 1), ((2**20, 24), 0), ((2**22, 3), 0))


def _main_cases(operation: str, quick: bool) -> list:
    from ...benchmark.sweep import Case

    # Without PyTorch, as for the reductions: torch.cumsum along axis 0 of (2**20, 16) takes
    # a third of a second a call, longer than the rest of the main job's scans together.
    no_torch = (("torch", False),)
    if quick:
        return [Case(operation, (2**20,), "float32", "main", no_torch),
                Case(operation, (4096, 16), "float32", "main", (("axis", 0),) + no_torch)]
    return [Case(operation, (2**28,), "float32", "main", no_torch),
            Case(operation, (2**28,), "int32", "main", no_torch),
            Case(operation, (2**20, 16), "float32", "main", (("axis", 0),) + no_torch)]


def _candidates(case: Any, methods: tuple[str, ...], seed: int, *, torch: bool = True,
                **_: Any) -> tuple[list, float, dict]:
    from ...benchmark.sweep import Candidate

    cupy = _device.cupy
    operation = case.operation
    op = OPERATIONS[operation]
    axis = dict(case.options).get("axis")
    kwargs = {} if axis is None else {"axis": axis}
    (x,), _ = inputs(case.shape, case.dtype, seed, xp=cupy)
    if operation == "cumprod" and x.dtype.kind in "fc":  # factors near 1: no underflow to 0
        x = (1.0 + x / max(x.size, 1)).astype(x.dtype)
    result_dtype = reduction_result_dtype(operation, x.dtype)
    want, bound = op.reference(x, xp=cupy, **kwargs)
    out_bytes = x.size * result_dtype.itemsize

    def check(out: Any, bound: Any = bound) -> bool:
        out = cupy.asarray(out)
        if out.shape != want.shape or out.dtype != result_dtype:
            return False
        return same_bits(out, want.astype(result_dtype)) if bound is None \
            else within(out, want, bound)

    # The peers accumulate floats in the input's precision, one element after another at worst
    # (NumPy does): their results are checked against that bound, not the kernels' tighter one.
    peer_check = check if bound is None else functools.partial(
        check, bound=_sequential_bound(operation, x.reshape(-1) if axis is None else x, want,
                                       0 if axis is None else axis, result_dtype, cupy))

    half = (x.nbytes + out_bytes) // 2  # a copy of this many bytes reads + writes as many
    source, target = cupy.empty(half, numpy.uint8), cupy.empty(half, numpy.uint8)

    def device_copy() -> None:
        target.data.copy_from_device_async(source.data, half)

    candidates = [Candidate("device copy", "ceiling", device_copy, None)]
    inner = 1 if axis is None else math.prod(x.shape[axis % x.ndim + 1:])
    for method in methods:
        if method == "columns" and inner == 1:
            candidates.append(Candidate(method, "rung", None, None,
                                        "columns scans along an axis before the last"))
            continue
        candidates.append(Candidate(method, "rung",
                                    functools.partial(op.function, x, method=method, **kwargs),
                                    check))
    if "auto" not in methods:
        candidates.append(Candidate("auto", "rung",
                                    functools.partial(op.function, x, **kwargs), check))
    library = getattr(cupy, operation)
    candidates.append(Candidate(f"cupy.{operation}", "library", lambda: library(x, **kwargs),
                                peer_check))
    library_torch = _device.torch_on_gpu() if torch and dict(case.options).get("torch", True) \
        else None
    if library_torch is not None:
        tensor = library_torch.from_dlpack(x)
        torch_fn = getattr(library_torch, operation)
        dim = -1 if axis is None else axis
        flat = tensor.reshape(-1) if axis is None else tensor
        candidates.append(Candidate(f"torch.{operation}", "library",
                                    lambda: torch_fn(flat, dim=dim),
                                    lambda out: peer_check(cupy.from_dlpack(out))))
    notes: dict = {"input_bytes": x.nbytes, "output_bytes": out_bytes}
    if axis is not None:
        notes["axis"] = axis
    return candidates, (x.nbytes + out_bytes) / 1e9, notes


def _sequential_bound(operation: str, x: Any, want: Any, axis: int, result_dtype: numpy.dtype,
                      xp: Any) -> Any:
    """The error bound of a float scan of ``x`` along ``axis`` accumulated in the result's own
    precision (float32 for float16), one element after another: NumPy's way, and the worst a
    library peer may do."""
    part = numpy.dtype(result_dtype.char.lower()) if result_dtype.kind == "c" else result_dtype
    eps_out = float(numpy.finfo(part).eps)
    eps_acc = float(numpy.finfo(numpy.float32 if part.itemsize <= 4 else numpy.float64).eps)
    n = x.shape[axis]
    if operation == "cumsum":
        wide = x.astype(numpy.complex128 if x.dtype.kind == "c" else numpy.float64)
        return (2 * eps_out + n * eps_acc) * xp.cumsum(abs(wide), axis=axis)
    return (2 * eps_out + 2 * n * eps_acc) * abs(want) + float(numpy.finfo(part).tiny)


def make_bench(operation: str) -> BenchSpec:
    """The benchmark spec of one scan: a device copy of the same bytes as the ceiling, CuPy's
    and PyTorch's scans as peers, flat scans of 2^20 to 2^28 elements and scans along an axis."""
    return BenchSpec(
        unit="GB/s", work="bytes read + written", ceiling="a device-to-device copy of the same bytes",
        peers=f"cupy.{operation}; torch.{operation} on the same memory via DLPack, when PyTorch "
              "imports",
        defaults={"sizes": (2**20, 2**24, 2**26, 2**28), "dtypes": ("float32", "int32"),
                  "shapes": (), "axis_cases": AXIS_CASES, "axis_dtype": "float32", "torch": True},
        quick={"sizes": (2**10, 2**14, 10**5), "axis_cases": (((4096, 16), 0), ((512, 512), 1))},
        cases=size_and_axis_cases, candidates=_candidates, main_cases=_main_cases,
        options=("axis_cases", "axis_dtype", "torch"),
        title="Scans: achieved bandwidth against input size")
