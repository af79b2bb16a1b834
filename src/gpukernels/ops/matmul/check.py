"""What the tools need to know about matmul: inputs, the reference and its error bound, and the
benchmark spec."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy

from ..._core import device as _device
from ..._core import floats
from ..._core.compare import within
from ..._core.inputs import random_array
from ..._core.ladder import OPERATIONS, BenchSpec

__all__ = ["inputs", "reference", "TF32"]

#: A benchmark "dtype" that is float32 data multiplied on the TF32 tensor cores.
TF32 = "tf32"


def inputs(shape: tuple, dtype: Any, rng: Any, *, xp: Any = numpy,
           integer_valued: bool = False) -> tuple:
    """``((a, b), kwargs)`` for ``shape`` = (M, K, N): fresh random operands of M x K and
    K x N, on the host (``xp=numpy``) or the device (``xp=cupy``); ``dtype`` ``"tf32"`` gives
    float32 operands and ``precision="tf32"``."""
    m, k, n = shape
    kwargs = {"precision": TF32} if dtype == TF32 else {}
    dtype = numpy.float32 if dtype == TF32 else dtype
    if not isinstance(rng, numpy.random.Generator):
        rng = numpy.random.default_rng(rng)
    a = random_array((m, k), dtype, rng, xp=xp, integer_valued=integer_valued)
    b = random_array((k, n), dtype, rng, xp=xp, integer_valued=integer_valued)
    return (a, b), kwargs


def reference(a: Any, b: Any, *, xp: Any = numpy, precision: str = "highest") -> tuple:
    """``a @ b`` and the elementwise error bound of a correct result.

    Integer and bool products are exact (``xp.matmul`` in the result dtype wraps as NumPy
    does): no bound. Floating-point products are computed in float64, with the classic bound
    ``c K eps_acc (|a| @ |b|) + eps_out |a @ b|`` of a length-K dot product accumulated in
    precision ``eps_acc`` (float32's for float16 and float32, whose sums are float32) and rounded
    once to the result (Higham, *Accuracy and Stability of Numerical Algorithms*, 3.1); c is 2,
    and 4 for float16 and bfloat16 (the tensor cores' own summation order) and float64 (the
    reference then rounds like the result). TF32 rounds each operand to 10 mantissa bits: ``2**-9 (|a| @ |b|)``
    more.
    """
    dtype = numpy.result_type(a.dtype, b.dtype)
    if dtype.kind in "biu":
        return xp.matmul(a.astype(dtype), b.astype(dtype)), None
    wide_a, wide_b = a.astype(numpy.float64), b.astype(numpy.float64)
    want = xp.matmul(wide_a, wide_b)
    magnitude = xp.matmul(abs(wide_a), abs(wide_b))
    k = max(a.shape[-1], 1)
    eps_out = floats.eps(dtype)
    eps_acc = float(numpy.finfo(numpy.float64 if dtype.itemsize == 8 else numpy.float32).eps)
    c = 4.0 if dtype.itemsize in (2, 8) else 2.0
    bound = c * k * eps_acc * magnitude + eps_out * abs(want)
    if precision == "tf32":
        bound += 2.0**-9 * magnitude
    return want, bound


# --- the benchmark ------------------------------------------------------------------------------------

def _torch_matmul(a: Any, b: Any, tf32: bool) -> Any:
    """cuBLAS's product through PyTorch, or None: for TF32 (CuPy offers no per-call switch) and
    bfloat16."""
    torch = _device.torch_on_gpu()
    if torch is None:
        return None
    ta, tb = torch.from_dlpack(a), torch.from_dlpack(b)

    def run() -> Any:
        allowed = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            return _device.cupy.from_dlpack(torch.matmul(ta, tb))
        finally:
            torch.backends.cuda.matmul.allow_tf32 = allowed

    return run


def _cases(operation: str, *, sizes: Sequence[int], dtypes: Sequence[Any],
           shapes: Sequence[tuple]) -> list:
    from ...benchmark.sweep import Case

    cases = []
    for dtype in dtypes:
        name = TF32 if str(dtype) == TF32 else numpy.dtype(dtype).name
        for shape, sweep in [((n, n, n), "size") for n in sorted(sizes)] + \
                [(tuple(s), "odd") for s in shapes]:
            if len(shape) != 3:
                raise ValueError(f"a matmul shape is (M, K, N), for a of M x K and b of K x N; "
                                 f"got {shape}")
            cases.append(Case(operation, shape, name, sweep))
    return cases


def _main_cases(operation: str, quick: bool) -> list:
    from ...benchmark.sweep import Case

    n = 1024 if quick else 4096
    return [Case(operation, (n, n, n), dtype, "main") for dtype in ("float32", "float16")]


def _candidates(case: Any, methods: tuple[str, ...], seed: int) -> tuple[list, float, dict]:
    from ...benchmark.sweep import Candidate

    cupy = _device.cupy
    op = OPERATIONS[case.operation]
    (a, b), kwargs = inputs(case.shape, case.dtype, seed, xp=cupy)
    dtype = numpy.result_type(a.dtype, b.dtype)
    want, bound = reference(a, b, xp=cupy, **kwargs)

    def check(out: Any) -> bool:
        return out.shape == want.shape and out.dtype == dtype and within(out, want, bound)

    if kwargs.get("precision") == TF32:
        library = _torch_matmul(a, b, tf32=True)
        candidates = [Candidate("torch.matmul TF32 (cuBLAS)", "ceiling", library, check,
                                "PyTorch is not installed")]
    elif floats.is_bfloat16(dtype):
        library = _torch_matmul(a, b, tf32=False)
        candidates = [Candidate("torch.matmul (cuBLAS)", "ceiling", library, check,
                                "PyTorch is not installed")]
    else:
        candidates = [Candidate("cupy.matmul (cuBLAS)", "ceiling", lambda: cupy.matmul(a, b),
                                check)]
    for method in methods:  # (support is decided here, outside the timed calls)
        if op.supports(method, a, b, **kwargs):
            candidates.append(Candidate(method, "rung",
                                        functools.partial(op.function, a, b, method=method,
                                                          **kwargs),
                                        check))
        else:
            candidates.append(Candidate(method, "rung", None, None,
                                        f"{method} does not compute {case.dtype} products"))
    m, k, n = case.shape
    return candidates, 2.0 * m * n * k / 1e12, {"input_bytes": a.nbytes + b.nbytes}


BENCH = BenchSpec(
    unit="TFLOP/s", work="2·M·N·K flops",
    ceiling="cuBLAS (cupy.matmul; for TF32, torch.matmul with TF32 allowed; for bfloat16, "
            "torch.matmul)",
    peers="",
    defaults={"sizes": (512, 1024, 2048, 4096, 8192), "dtypes": ("float32", "float16", "bfloat16", TF32),
              "shapes": ((4095, 4097, 4099),)},
    quick={"sizes": (128, 256, 512), "shapes": ((127, 65, 129),)},
    cases=_cases, candidates=_candidates, main_cases=_main_cases,
    title="Matmul: achieved TFLOP/s against problem size", x_axis="cube")
