"""What the tools need to know about transpose: inputs, the NumPy reference, the benchmark spec."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy

from ..._core import device as _device
from ..._core.compare import same_bits
from ..._core.inputs import random_array
from ..._core.ladder import OPERATIONS, BenchSpec
from ..._core.launch import INDEX_SCALARS, index_type
from . import rungs

__all__ = ["inputs", "reference", "copy_ceiling", "BENCH"]


def inputs(shape: tuple, dtype: Any, rng: Any, *, xp: Any = numpy,
           integer_valued: bool = False) -> tuple:
    """``((x,), {})``: a fresh random array of ``shape`` (``(..., M, N)``), on the host
    (``xp=numpy``) or the device (``xp=cupy``)."""
    return (random_array(shape, dtype, rng, xp=xp, integer_valued=integer_valued),), {}


def reference(x: Any, *, xp: Any = numpy) -> tuple[Any, None]:
    """``swapaxes(x, -1, -2)`` as a C-contiguous array; exact (no error bound)."""
    return xp.ascontiguousarray(xp.swapaxes(x, -1, -2)), None


def copy_ceiling(x: Any, kind: str = "row") -> Any:
    """Copy a C-contiguous 2-D array with the row- or column-order copy kernel of the bandwidth
    study (the seed documents): one element per thread in 16 x 16 blocks. Reference points for
    the naive rungs, not bounds on them (the rungs' narrower blocks run faster;
    benchmarks/NOTES.md, item 19)."""
    x = _device.as_device_array(x, "x")
    if x.ndim != 2 or not x.flags.c_contiguous:
        raise ValueError("copy_ceiling needs a C-contiguous 2-D array")
    if kind not in rungs.COPY_KINDS:
        raise ValueError(f"kind must be one of {rungs.COPY_KINDS}")
    rows, cols = x.shape
    with x.device:
        result = _device.cupy.empty_like(x)
        if x.size:
            index = index_type(x.size)
            to_index = INDEX_SCALARS[index]
            launch = rungs.copy_launch(kind, x.itemsize, rows, cols, index)
            launch.call((x, result, to_index(rows), to_index(cols)), f"copy_{kind}")()
    return result


# --- the benchmark ------------------------------------------------------------------------------------

def _cases(operation: str, *, sizes: Sequence[int], dtypes: Sequence[Any],
           shapes: Sequence[tuple]) -> list:
    from ...benchmark.sweep import Case

    cases = []
    for dtype in dtypes:
        name = numpy.dtype(dtype).name
        cases += [Case(operation, (n, n), name, "size") for n in sorted(sizes)]
        cases += [Case(operation, tuple(s), name, "stacked" if len(s) > 2 else "odd")
                  for s in shapes]
    return cases


def _main_cases(operation: str, quick: bool) -> list:
    from ...benchmark.sweep import Case

    shapes = [(2048, 2048), (3, 1 << 20)] if quick else [(8192, 8192), (8191, 8193), (3, 1 << 24)]
    return [Case(operation, shape, "float32", "main", (("seed_copies", True),))
            for shape in shapes]


def _candidates(case: Any, methods: tuple[str, ...], seed: int) -> tuple[list, float, dict]:
    from ...benchmark.sweep import Candidate

    cupy = _device.cupy
    op = OPERATIONS[case.operation]
    (x,), _ = inputs(case.shape, case.dtype, seed, xp=cupy)
    want, _ = reference(x, xp=cupy)
    copy_out = cupy.empty_like(x)

    def device_copy() -> None:
        copy_out.data.copy_from_device_async(x.data, x.nbytes)

    def check(out: Any) -> bool:
        return same_bits(out, want)

    candidates = [Candidate("device copy", "ceiling", device_copy, None)]
    if case.kwargs.get("seed_copies") and x.ndim == 2:
        candidates += [Candidate(f"copy_{kind}", "ceiling",
                                 functools.partial(copy_ceiling, x, kind), None)
                       for kind in rungs.COPY_KINDS]
    for method in methods:
        if op.supports(method, x):
            candidates.append(Candidate(method, "rung",
                                        functools.partial(op.function, x, method=method),
                                        check))
        else:
            candidates.append(Candidate(method, "rung", None, None,
                                        f"{method} does not take {case.dtype} {case.shape}"))
    candidates.append(Candidate("cupy.ascontiguousarray(x.T)", "library",
                                lambda: cupy.ascontiguousarray(cupy.swapaxes(x, -1, -2)), check))
    return candidates, 2 * x.nbytes / 1e9, {"input_bytes": x.nbytes}


BENCH = BenchSpec(
    unit="GB/s", work="bytes read + written",
    ceiling="a device-to-device copy of the same bytes",
    peers="cupy.ascontiguousarray(x.T)",
    defaults={"sizes": (1024, 2048, 4096, 8192, 16384),
              "dtypes": ("int8", "float16", "float32", "float64"),
              "shapes": ((8191, 8193), (64, 1024, 1024), (64, 3, 50176), (33, 1048576))},
    quick={"sizes": (256, 512, 1024), "shapes": ((129, 67), (3, 64, 48), (2, 3, 700))},
    cases=_cases, candidates=_candidates, main_cases=_main_cases,
    title="Transpose: achieved bandwidth against input size")
