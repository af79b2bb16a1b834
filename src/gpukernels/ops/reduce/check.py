"""What the tools need to know about the reductions: inputs, references and error bounds, and
the benchmark spec (one for sum, prod, min and max, made per operation)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy

from ..._core import device as _device
from ..._core.compare import same_bits, within
from ..._core.inputs import random_array
from ..._core.ladder import OPERATIONS, BenchSpec
from .axis import PLAN_NAME
from .dtypes import normalize_axis, reduction_result_dtype

__all__ = ["inputs", "make_reference", "make_bench", "size_and_axis_cases", "one_read_bench"]

#: The library reductions timed beside the rungs: CuPy's (the ceiling) and PyTorch's names.
_CUPY = {"sum": "sum", "prod": "prod", "min": "min", "max": "max"}
_TORCH = {"sum": "sum", "prod": "prod", "min": "amin", "max": "amax"}


def inputs(shape: tuple, dtype: Any, rng: Any, *, xp: Any = numpy,
           integer_valued: bool = False) -> tuple:
    """``((x,), {})``: a fresh random array (reduced in full, or scanned flattened, by default),
    on the host (``xp=numpy``) or the device (``xp=cupy``)."""
    return (random_array(shape, dtype, rng, xp=xp, integer_valued=integer_valued),), {}


def make_reference(operation: str) -> Callable[..., tuple]:
    """The reference of one reduction (see the returned function's docstring)."""

    def reference(x: Any, *, xp: Any = numpy, axis: Any = None, dtype: Any = None,
                  keepdims: bool = False) -> tuple:
        """NumPy's result of the reduction, exactly for integers, bool, min and max (no bound),
        in float64 (complex128) for floats, with the error bound of a correct float result:

        * sum: ``2 eps_acc (sqrt(n) + log2(n) + 1) sum(|x|) + eps_out |sum(x)|``, the worst-case
          error when the n terms are split into chains of at most sqrt(n) sequential additions
          joined by a tree, which the kernels do; eps_acc is float32's for float16 data
          (accumulated in float32);
        * prod: ``(2 n eps_acc + eps_out) |prod(x)|``, n roundings, relative (and the smallest
          normal number absolute, near underflow).
        """
        result_dtype = reduction_result_dtype(operation, x.dtype, dtype)
        function = getattr(xp, operation)
        if operation in ("min", "max"):
            return function(x, axis=axis, keepdims=keepdims), None
        if result_dtype.kind in "biu":  # NumPy wraps the same way, whatever the order
            return function(x, axis=axis, dtype=result_dtype, keepdims=keepdims), None
        wide = numpy.complex128 if result_dtype.kind == "c" else numpy.float64
        source = x.astype(result_dtype).astype(wide) if x.dtype.kind == "c" and \
            result_dtype.kind != "c" else x.astype(wide)
        want = function(source, axis=axis, keepdims=keepdims)
        axes = normalize_axis(axis, x.ndim)
        count = math.prod(x.shape[ax] for ax in axes)
        real = numpy.dtype(result_dtype.char.lower()) if result_dtype.kind == "c" else result_dtype
        eps_out = float(numpy.finfo(real).eps)
        eps_acc = float(numpy.finfo(numpy.float32 if real.itemsize <= 4 else numpy.float64).eps)
        if operation == "sum":
            chains = math.sqrt(count) + math.log2(max(count, 1)) + 1
            magnitude = xp.sum(abs(source), axis=axis, keepdims=keepdims)
            bound = 2.0 * eps_acc * chains * magnitude + eps_out * abs(want)
        else:
            tiny = float(numpy.finfo(real).tiny)
            bound = (2.0 * count * eps_acc + eps_out) * abs(want) + tiny
        return want, bound

    return reference


# --- the benchmark ------------------------------------------------------------------------------------

def size_and_axis_cases(operation: str, *, sizes: Sequence[int], dtypes: Sequence[Any],
                        shapes: Sequence[tuple], axis_cases: Sequence[tuple] = (),
                        axis_dtype: str = "float32", torch: bool = True) -> list:
    """The sweep of an operation that takes ``axis``: flat inputs of each size and dtype, the
    extra shapes, then ``(shape, axis)`` cases in ``axis_dtype`` (reductions and scans)."""
    from ...benchmark.sweep import Case

    cases = []
    for dtype in dtypes:
        name = numpy.dtype(dtype).name
        cases += [Case(operation, (n,), name, "size") for n in sorted(sizes)]
        cases += [Case(operation, tuple(s), name, "shape") for s in shapes]
    cases += [Case(operation, tuple(s), numpy.dtype(axis_dtype).name, "axis", (("axis", ax),))
              for s, ax in axis_cases]
    return cases


def _main_cases(operation: str, quick: bool) -> list:
    from ...benchmark.sweep import Case

    inputs_ = [((2**22,), "int32"), ((2**22,), "float32")] if quick else \
        [((2**28,), "int32"), ((2**28,), "float32"), ((10**7,), "int32")]
    return [Case(operation, shape, dtype, "main", (("torch", False),)) for shape, dtype in inputs_]


def _case_input(case: Any, seed: int, torch: bool) -> tuple[Any, dict, bool, Any]:
    """(operation, its axis keyword, whether to time torch, the input on the device) of a
    reduction's benchmark case."""
    kwargs = {k: v for k, v in case.options if k == "axis"}
    use_torch = torch and dict(case.options).get("torch", True)
    (x,), _ = inputs(case.shape, case.dtype, seed, xp=_device.cupy)
    return OPERATIONS[case.operation], kwargs, use_torch, x


def _rungs_work_notes(candidates: list, op: Any, x: Any, kwargs: dict,
                      methods: tuple[str, ...], check: Callable[[Any], bool]
                      ) -> tuple[list, float, dict]:
    """``candidates`` with a row per rung (along an axis, the one plan every rung sends to the
    row and column kernels), the case's work (GB read) and its notes."""
    from ...benchmark.sweep import Candidate

    if "axis" not in kwargs:
        candidates += [Candidate(m, "rung", functools.partial(op.function, x, method=m), check)
                       for m in methods]
    else:
        candidates.append(Candidate(PLAN_NAME, "rung",
                                    lambda: op.function(x, axis=kwargs["axis"]), check))
    notes = {"input_bytes": x.nbytes}
    if "axis" in kwargs:
        notes["axis"] = kwargs["axis"]
    return candidates, x.nbytes / 1e9, notes


def _candidates(case: Any, methods: tuple[str, ...], seed: int, *, torch: bool = True,
                **_: Any) -> tuple[list, float, dict]:
    from ...benchmark.sweep import Candidate

    cupy = _device.cupy
    operation = case.operation
    op, kwargs, use_torch, x = _case_input(case, seed, torch)
    result_dtype = reduction_result_dtype(operation, x.dtype)
    want, bound = op.reference(x, xp=cupy, **kwargs)

    def check(out: Any) -> bool:
        out = cupy.asarray(out)
        if out.shape != want.shape or out.dtype != result_dtype:
            return False
        return same_bits(out, want.astype(result_dtype)) if bound is None \
            else within(out, want, bound)

    library = getattr(cupy, _CUPY[operation])
    candidates = [Candidate(f"cupy.{_CUPY[operation]}", "ceiling", lambda: library(x, **kwargs),
                            check)]
    axis = kwargs.get("axis")
    library_torch = _device.torch_on_gpu() if use_torch else None
    if library_torch is not None and not (isinstance(axis, tuple) and operation == "prod"):
        tensor = library_torch.from_dlpack(x)  # the same device memory: no copy
        torch_fn = getattr(library_torch, _TORCH[operation])
        torch_kwargs = {} if axis is None else {"dim": axis}
        candidates.append(Candidate(f"torch.{_TORCH[operation]}", "library",
                                    lambda: torch_fn(tensor, **torch_kwargs),
                                    lambda out: check(cupy.from_dlpack(out))))
    return _rungs_work_notes(candidates, op, x, kwargs, methods, check)


REDUCE_AXIS_CASES = (((8192, 8192), 0), ((8192, 8192), 1), ((10**6, 2), 1), ((10**6, 2), 0),
                     ((1, 2**24), 1), ((64, 2**20), 1), ((2**20, 64), 0), ((256, 256, 256), 1),
                     ((256, 256, 256), (0, 2)))


def make_bench(operation: str) -> BenchSpec:
    """The benchmark spec of one reduction: ``cupy.<operation>`` as the ceiling (CUB), PyTorch's
    as a peer when it imports, full reductions of 2^16 to 2^28 elements and partial ones."""
    return BenchSpec(
        unit="GB/s", work="bytes read", ceiling=f"cupy.{_CUPY[operation]} (CUB)",
        peers=f"torch.{_TORCH[operation]} on the same memory via DLPack, when PyTorch imports",
        defaults={"sizes": (2**16, 2**18, 2**20, 2**22, 2**24, 10**7, 2**26, 2**28),
                  "dtypes": ("float32", "int32"), "shapes": (),
                  "axis_cases": REDUCE_AXIS_CASES, "axis_dtype": "float32", "torch": True},
        quick={"sizes": (2**10, 2**14, 10**5),
               "axis_cases": (((512, 512), 0), ((512, 512), 1), ((1000, 2), 1), ((1, 4096), 1))},
        cases=size_and_axis_cases, candidates=_candidates, main_cases=_main_cases,
        options=("axis_cases", "axis_dtype", "torch"),
        title="Reductions: achieved bandwidth against input size")


# --- operations measured against one read of their input (mean, var, std, argmin, argmax) -----

def _against_one_read(case: Any, methods: tuple[str, ...], seed: int, *, torch: bool = True,
                      checks: Callable[..., tuple], torch_options: Callable[[Any], dict | None],
                      **_: Any) -> tuple[list, float, dict]:
    """Candidates of an operation whose ceiling is CUB's sum of the same input (one read at the
    memory's speed): ``cupy.<operation>`` and ``torch.<operation>`` as peers, the rungs (or the
    axis kernels). ``checks(op, x, kwargs)`` gives the (rungs', peers') output checks;
    ``torch_options(x)`` torch's keyword arguments beyond ``dim``, or None where torch does not
    take the input."""
    from ...benchmark.sweep import Candidate

    cupy = _device.cupy
    operation = case.operation
    op, kwargs, use_torch, x = _case_input(case, seed, torch)
    check, check_peer = checks(op, x, kwargs)
    candidates = [Candidate("cupy.sum (CUB)", "ceiling", lambda: cupy.sum(x, **kwargs),
                            lambda out: True)]
    library = getattr(cupy, operation)
    candidates.append(Candidate(f"cupy.{operation}", "library", lambda: library(x, **kwargs),
                                check_peer))
    options = torch_options(x)
    library_torch = _device.torch_on_gpu() if use_torch and options is not None else None
    if library_torch is not None and options is not None:
        tensor = library_torch.from_dlpack(x)  # the same device memory: no copy
        torch_fn = getattr(library_torch, operation)
        torch_kwargs = {**options, **({"dim": kwargs["axis"]} if "axis" in kwargs else {})}
        candidates.append(Candidate(f"torch.{operation}", "library",
                                    lambda: torch_fn(tensor, **torch_kwargs),
                                    lambda out: check_peer(cupy.from_dlpack(out))))
    return _rungs_work_notes(candidates, op, x, kwargs, methods, check)


def one_read_bench(operation: str, *, checks: Callable[..., tuple],
                   torch_options: Callable[[Any], dict | None], main_dtypes: Sequence[str],
                   dtypes: Sequence[str], axis_cases: Sequence[tuple]) -> BenchSpec:
    """The benchmark spec of an operation measured against CUB's sum of the same input (one read
    of the data), with CuPy's and PyTorch's functions of its name as peers (see
    :func:`_against_one_read`); the main job times 2^28 elements of each of ``main_dtypes``."""

    def main_cases(name: str, quick: bool) -> list:
        from ...benchmark.sweep import Case

        inputs_ = [((2**22,), "float32")] if quick else [((2**28,), d) for d in main_dtypes]
        return [Case(name, shape, dtype, "main", (("torch", False),)) for shape, dtype in inputs_]

    return BenchSpec(
        unit="GB/s", work="bytes read", ceiling="cupy.sum (CUB) of the same input",
        peers=f"cupy.{operation}; torch.{operation} on the same memory via DLPack, when "
              "PyTorch imports",
        defaults={"sizes": (2**16, 2**20, 2**24, 2**26, 2**28), "dtypes": tuple(dtypes),
                  "shapes": (), "axis_cases": tuple(axis_cases), "axis_dtype": "float32",
                  "torch": True},
        quick={"sizes": (2**10, 10**5),
               "axis_cases": (((512, 512), 0), ((512, 512), 1), ((1000, 2), 1))},
        cases=size_and_axis_cases,
        candidates=functools.partial(_against_one_read, checks=checks,
                                     torch_options=torch_options),
        main_cases=main_cases, options=("axis_cases", "axis_dtype", "torch"),
        title=f"{operation}: achieved bandwidth against input size")
