"""What the tools need to know about argmin and argmax: inputs, references (exact) and the
benchmark spec."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy

from ..._core import device as _device
from ..._core.compare import same_bits
from ..._core.ladder import OPERATIONS, BenchSpec
from ..reduce.axis import PLAN_NAME
from ..reduce.check import REDUCE_AXIS_CASES, inputs, size_and_axis_cases

__all__ = ["inputs", "make_reference", "make_bench"]


def make_reference(operation: str) -> Callable[..., tuple]:
    """The reference of argmin or argmax: NumPy's indices, exactly (no bound)."""

    def reference(x: Any, *, xp: Any = numpy, axis: Any = None, keepdims: bool = False) -> tuple:
        """NumPy's (or CuPy's, with ``xp``) ``{operation}`` of ``x``: int64 indices, exact."""
        return getattr(xp, operation)(x, axis=axis, keepdims=keepdims).astype(numpy.int64), None

    return reference


def _main_cases(operation: str, quick: bool) -> list:
    from ...benchmark.sweep import Case

    inputs_ = [((2**22,), "float32")] if quick else [((2**28,), "float32"), ((2**28,), "int32")]
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
    want, _ = op.reference(x, xp=cupy, **kwargs)

    def check(out: Any) -> bool:
        out = cupy.asarray(out)
        return out.shape == want.shape and out.dtype == numpy.int64 and same_bits(out, want)

    # The ceiling: CUB's sum of the same input, which reads it once at the memory's speed.
    candidates = [Candidate("cupy.sum (CUB)", "ceiling", lambda: cupy.sum(x, **kwargs),
                            lambda out: True)]
    library = getattr(cupy, operation)
    candidates.append(Candidate(f"cupy.{operation}", "library", lambda: library(x, **kwargs),
                                check))
    library_torch = _device.torch_on_gpu() if use_torch else None
    if library_torch is not None:
        tensor = library_torch.from_dlpack(x)  # the same device memory: no copy
        torch_fn = getattr(library_torch, operation)
        torch_kwargs = {} if "axis" not in kwargs else {"dim": kwargs["axis"]}
        candidates.append(Candidate(f"torch.{operation}", "library",
                                    lambda: torch_fn(tensor, **torch_kwargs),
                                    lambda out: check(cupy.from_dlpack(out))))
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


#: One axis at a time (NumPy's argmin and argmax take one).
ARG_AXIS_CASES = tuple(case for case in REDUCE_AXIS_CASES[:6] if isinstance(case[1], int))


def make_bench(operation: str) -> BenchSpec:
    """The benchmark spec of argmin or argmax: CUB's sum of the same input as the ceiling (one
    read of the data), CuPy's and PyTorch's functions as peers."""
    return BenchSpec(
        unit="GB/s", work="bytes read", ceiling="cupy.sum (CUB) of the same input",
        peers=f"cupy.{operation}; torch.{operation} on the same memory via DLPack, when "
              "PyTorch imports",
        defaults={"sizes": (2**16, 2**20, 2**24, 2**26, 2**28), "dtypes": ("float32", "int32"),
                  "shapes": (), "axis_cases": ARG_AXIS_CASES, "axis_dtype": "float32",
                  "torch": True},
        quick={"sizes": (2**10, 10**5),
               "axis_cases": (((512, 512), 0), ((512, 512), 1), ((1000, 2), 1))},
        cases=size_and_axis_cases, candidates=_candidates, main_cases=_main_cases,
        options=("axis_cases", "axis_dtype", "torch"),
        title=f"{operation}: achieved bandwidth against input size")
