"""What the tools need to know about permute_dims: inputs, the NumPy reference, the benchmark."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy

from ..._core import device as _device
from ..._core.compare import same_bits
from ..._core.inputs import random_array
from ..._core.ladder import OPERATIONS, BenchSpec

__all__ = ["inputs", "reference", "default_axes", "BENCH", "CASES"]


def default_axes(ndim: int) -> tuple[int, ...]:
    """The permutation the tools use when none is given: every axis but the last reversed, the
    last kept (``(2, 1, 0, 3)`` for 4 axes), a layout every rung takes (``rows`` needs the
    contiguous axis last)."""
    return tuple(reversed(range(ndim - 1))) + ((ndim - 1,) if ndim else ())


def inputs(shape: tuple, dtype: Any, rng: Any, *, xp: Any = numpy,
           integer_valued: bool = False) -> tuple:
    """``((x,), {"axes": ...})``: a fresh random array of ``shape`` and :func:`default_axes`."""
    x = random_array(shape, dtype, rng, xp=xp, integer_valued=integer_valued)
    return (x,), {"axes": default_axes(len(shape))}


def reference(x: Any, axes: Any = None, *, xp: Any = numpy) -> tuple[Any, None]:
    """``x.transpose(axes)`` as a C-contiguous array (a 0-d one stays 0-d); exact."""
    return xp.transpose(x, axes).copy(order="C"), None


# --- the benchmark ------------------------------------------------------------------------------

#: The fixed cases, 256 MB each (the odd float16 one 134 MB, the images 154 MB): the layouts
#: people permute, last a batch of 3-channel images to channels-last and back.
CASES = (
    ((256, 512, 512), "float32", (2, 0, 1)),
    ((256, 512, 512), "float32", (1, 0, 2)),
    ((32, 64, 128, 256), "float32", (0, 2, 1, 3)),
    ((32, 64, 128, 256), "float32", (3, 2, 1, 0)),
    ((512, 512, 512), "int8", (2, 1, 0)),
    ((255, 513, 511), "float16", (1, 2, 0)),
    ((256, 3, 224, 224), "float32", (0, 2, 3, 1)),
    ((256, 224, 224, 3), "float32", (0, 3, 1, 2)),
    ((1024, 3, 224, 224), "uint8", (0, 2, 3, 1)),
)


def _cases(operation: str, *, sizes: Sequence[int], dtypes: Sequence[Any],
           shapes: Sequence[tuple]) -> list:
    """Without sizes (the default), the fixed :data:`CASES`, in the dtypes asked for (their own
    by default); with sizes, n x n x n cubes reversed instead. Then any extra shapes, reversed."""
    from ...benchmark.sweep import Case

    cases = []
    for shape, dtype, axes in (() if sizes else CASES):
        for name in (dtypes or (dtype,)):
            cases.append(Case(operation, shape, numpy.dtype(name).name, "shape",
                              (("axes", axes),)))
    for name in (dtypes or ("float32",)):
        cases += [Case(operation, (n, n, n), numpy.dtype(name).name, "size",
                       (("axes", (2, 1, 0)),)) for n in sorted(sizes)]
        cases += [Case(operation, tuple(s), numpy.dtype(name).name, "odd",
                       (("axes", tuple(reversed(range(len(s))))),)) for s in shapes]
    return cases


def _main_cases(operation: str, quick: bool) -> list:
    from ...benchmark.sweep import Case

    if quick:  # a matrix transpose once merged, and one that keeps the last axis (rows)
        return [Case(operation, (64, 128, 128), "float32", "main", (("axes", axes),))
                for axes in ((2, 0, 1), (1, 0, 2))]
    return [Case(operation, shape, dtype, "main", (("axes", axes),))
            for shape, dtype, axes in CASES[:2] + CASES[3:5]]


def _candidates(case: Any, methods: tuple[str, ...], seed: int) -> tuple[list, float, dict]:
    from ...benchmark.sweep import Candidate

    cupy = _device.cupy
    op = OPERATIONS[case.operation]
    axes = case.kwargs.get("axes", default_axes(len(case.shape)))
    (x,), _ = inputs(case.shape, case.dtype, seed, xp=cupy)
    want, _ = reference(x, axes, xp=cupy)
    copy_out = cupy.empty_like(x)

    def device_copy() -> None:
        copy_out.data.copy_from_device_async(x.data, x.nbytes)

    def check(out: Any) -> bool:
        return same_bits(out, want)

    candidates = [Candidate("device copy", "ceiling", device_copy, None)]
    # "auto" too: it sends merged matrix transposes to the transpose ladder, not to a rung here.
    for method in methods + (("auto",) if "auto" not in methods else ()):
        if op.supports(method, x, axes=axes):
            candidates.append(Candidate(method, "rung",
                                        functools.partial(op.function, x, axes, method=method),
                                        check))
        else:
            candidates.append(Candidate(method, "rung", None, None,
                                        f"{method} does not take {case.dtype} {case.shape} "
                                        f"with axes {axes}"))
    candidates.append(Candidate("cupy.ascontiguousarray(x.transpose(axes))", "library",
                                lambda: cupy.ascontiguousarray(x.transpose(axes)), check))
    torch = _device.torch_on_gpu()
    if torch is not None:
        try:
            tensor = torch.from_dlpack(x)
        except Exception:  # a dtype torch cannot take through DLPack
            tensor = None
        if tensor is not None:
            candidates.append(Candidate("torch permute().contiguous()", "library",
                                        lambda: tensor.permute(*axes).contiguous(),
                                        lambda out: check(cupy.from_dlpack(out))))
    return candidates, 2 * x.nbytes / 1e9, {"input_bytes": x.nbytes,
                                            "axes": list(axes)}


BENCH = BenchSpec(
    unit="GB/s", work="bytes read + written",
    ceiling="a device-to-device copy of the same bytes",
    peers="cupy.ascontiguousarray(x.transpose(axes)); torch permute().contiguous()",
    defaults={"sizes": (), "dtypes": (), "shapes": ()},
    quick={"sizes": (64, 128), "shapes": ((3, 5, 7, 9),), "dtypes": ("float32",)},
    cases=_cases, candidates=_candidates, main_cases=_main_cases,
    title="Permutations: achieved bandwidth per input")
