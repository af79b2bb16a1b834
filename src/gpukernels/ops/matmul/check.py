"""What the tools need to know about matmul: inputs, the reference and its error bound, and the
benchmark spec."""

from __future__ import annotations

import functools
import math
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
           integer_valued: bool = False, a_transposed: bool = False,
           b_transposed: bool = False) -> tuple:
    """``((a, b), kwargs)`` for ``shape`` = (M, K, N), or (B, M, K, N) for a stack of B
    products: fresh random operands of [B x] M x K and [B x] K x N, on the host
    (``xp=numpy``) or the device (``xp=cupy``); ``dtype`` ``"tf32"`` gives float32 operands
    and ``precision="tf32"``. ``a_transposed``: a is the transposed view of a row-major
    [B x] K x M array, as ``X.T`` in ``X.T @ Y`` (a Gram matrix, a weight's gradient).
    ``b_transposed``: b is the transposed view of a row-major [B x] N x K array, as ``W.T``
    in a linear layer's ``x @ W.T``."""
    *batch, m, k, n = shape
    kwargs = {"precision": TF32} if dtype == TF32 else {}
    dtype = numpy.float32 if dtype == TF32 else dtype
    if not isinstance(rng, numpy.random.Generator):
        rng = numpy.random.default_rng(rng)
    if a_transposed:
        x = random_array((*batch, k, m), dtype, rng, xp=xp, integer_valued=integer_valued)
        a = x.swapaxes(-1, -2)
    else:
        a = random_array((*batch, m, k), dtype, rng, xp=xp, integer_valued=integer_valued)
    if b_transposed:
        w = random_array((*batch, n, k), dtype, rng, xp=xp, integer_valued=integer_valued)
        b = w.swapaxes(-1, -2)
    else:
        b = random_array((*batch, k, n), dtype, rng, xp=xp, integer_valued=integer_valued)
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


#: The shapes people multiply (M, K, N): cubes, an LLM's MLP, a tall-skinny product, decode
#: steps (one and 16 rows: B, 128 MiB, is read once, so the copy bandwidth bounds them).
NAMED_SHAPES = ((8192, 8192, 8192), (4096, 4096, 4096), (2048, 2048, 2048), (1024, 1024, 1024),
                (4096, 4096, 14336), (16384, 4096, 128), (1, 8192, 8192), (16, 8192, 8192))
#: The extents of the sweep: 64 to 8192, each power of two and the point halfway between.
SWEEP_EXTENTS = (64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192)


def suite_shapes() -> tuple[tuple[int, int, int], ...]:
    """The shape suite: :data:`NAMED_SHAPES`, then a sweep of (M, K, N) over
    :data:`SWEEP_EXTENTS`: every (M, N) pair once (225 products), each with a K that runs
    through the extents in a different order for each M, so that every extent of K meets every
    extent of M and of N somewhere in the sweep.

    Examples
    --------
    >>> from gpukernels.ops.matmul.check import suite_shapes
    >>> shapes = suite_shapes()
    >>> len(shapes), shapes[8]
    (233, (64, 64, 64))
    """
    n = len(SWEEP_EXTENTS)
    sweep = tuple((SWEEP_EXTENTS[i], SWEEP_EXTENTS[(i * 7 + j * 2) % n], SWEEP_EXTENTS[j])
                  for i in range(n) for j in range(n))
    return NAMED_SHAPES + sweep


def _cases(operation: str, *, sizes: Sequence[int], dtypes: Sequence[Any],
           shapes: Sequence[tuple], suite: bool = False, a_transposed: bool = False,
           b_transposed: bool = False) -> list:
    from ...benchmark.sweep import Case

    options = (((A_OPTION, A_TRANSPOSED),) if a_transposed else ()) + \
        (((B_OPTION, B_TRANSPOSED),) if b_transposed else ())
    cases = []
    if suite:  # the shape suite replaces the size sweep
        named = set(NAMED_SHAPES)
        return [Case(operation, shape, _dtype_name(dtype), "named" if shape in named else "suite",
                     options)
                for dtype in dtypes for shape in suite_shapes() + tuple(map(tuple, shapes))]
    for dtype in dtypes:
        name = _dtype_name(dtype)
        for shape, sweep in [((n, n, n), "size") for n in sorted(sizes)] + \
                [(tuple(s), "odd") for s in shapes]:
            if len(shape) not in (3, 4):
                raise ValueError(f"a matmul shape is (M, K, N), for a of M x K and b of K x N, "
                                 f"or (B, M, K, N) for a stack of B of them; got {shape}")
            cases.append(Case(operation, shape, name, sweep, options))
    return cases


#: A benchmark case's options (and their values) for an A given as the transposed view of a
#: row-major (K, M) array (``bench matmul --a-transposed``) and a B given as that of a
#: row-major (N, K) array (``--b-transposed``).
A_OPTION, A_TRANSPOSED = "a", "X.T"
B_OPTION, B_TRANSPOSED = "b", "W.T"


def _dtype_name(dtype: Any) -> str:
    return TF32 if str(dtype) == TF32 else numpy.dtype(dtype).name


def _main_cases(operation: str, quick: bool) -> list:
    from ...benchmark.sweep import Case

    n = 1024 if quick else 4096
    return [Case(operation, (n, n, n), dtype, "main") for dtype in ("float32", "float16")]


def _candidates(case: Any, methods: tuple[str, ...], seed: int, **_: Any
                ) -> tuple[list, float, dict]:
    from ...benchmark.sweep import Candidate

    cupy = _device.cupy
    op = OPERATIONS[case.operation]
    a_transposed = dict(case.options).get(A_OPTION) == A_TRANSPOSED
    b_transposed = dict(case.options).get(B_OPTION) == B_TRANSPOSED
    (a, b), kwargs = inputs(case.shape, case.dtype, seed, xp=cupy, a_transposed=a_transposed,
                            b_transposed=b_transposed)
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
    *batch, m, k, n = case.shape
    notes: dict = {"input_bytes": a.nbytes + b.nbytes}
    if a_transposed:
        notes[A_OPTION] = A_TRANSPOSED
    if b_transposed:
        notes[B_OPTION] = B_TRANSPOSED
    if not batch and min(m, n) <= DECODE_ROWS:  # bound by reading its operands: time a copy
        notes["moved_bytes"] = a.nbytes + b.nbytes + m * n * dtype.itemsize
        notes["copy_gbps"] = _copy_rate(b if b.nbytes >= a.nbytes else a)
    return candidates, 2.0 * math.prod(batch) * m * n * k / 1e12, notes


#: Products with at most this many rows (or columns) of C are "decode" shapes: reading the
#: large operand once is their floor, so they are also given as a fraction of a device copy.
DECODE_ROWS = 16


def _copy_rate(x: Any) -> float:
    """GB/s of a device-to-device copy of ``x`` (bytes read + written), the median of
    ``cupyx.profiler.benchmark``'s device times."""
    from cupyx.profiler import benchmark as cupy_benchmark

    if not x.flags.c_contiguous:  # a transposed view: copy its row-major base
        x = x.swapaxes(-1, -2)
    copy = _device.cupy.empty_like(x)
    times = cupy_benchmark(copy.__setitem__, (Ellipsis, x), n_repeat=50, n_warmup=5).gpu_times
    return 2 * x.nbytes / float(numpy.median(times)) / 1e9


def suite_summary(rows: Sequence[Any]) -> str:
    """The shape suite in a few figures: per dtype and rung, the minimum and geometric mean of
    the ratio to the ceiling (held and per call) over the suite's products, with the worst
    shape; then each decode product timed, in the suite or not (``--shapes``), as a fraction
    of a device copy (bytes read + written)."""
    timed = [r for r in rows if r.status == "ok" and math.isfinite(r.ratio) and r.ratio > 0]
    suite = [r for r in timed if r.sweep in ("suite", "named")]
    decode = [r for r in timed if "copy_gbps" in r.notes]
    lines = []
    if suite:
        lines += ["", "Shape suite: ratio to the ceiling over every product (held / per call)",
                  f"{'dtype':9} {'method':26} {'shapes':>6}  {'min held':>8} "
                  f"{'geomean held':>12}  {'min call':>8} {'geomean call':>12}  "
                  "worst shape (held)"]
    for dtype in dict.fromkeys(r.dtype for r in suite):
        for method in dict.fromkeys(r.method for r in suite if r.dtype == dtype):
            mine = [r for r in suite if r.dtype == dtype and r.method == method]
            held = [r.ratio for r in mine]
            call = [r.call_ratio for r in mine if math.isfinite(r.call_ratio) and r.call_ratio > 0]
            worst = min(mine, key=lambda r: r.ratio)
            lines.append(f"{dtype:9} {method:26} {len(mine):6d}  {min(held):8.2f} "
                         f"{_geomean(held):12.2f}  {min(call, default=math.nan):8.2f} "
                         f"{_geomean(call):12.2f}  {worst.case}")
    if decode:
        lines += ["", "Decode products: bytes read + written per second, as a fraction of a "
                      "device copy (held / per call)"]
        for r in decode:
            copy = r.notes["copy_gbps"]
            held = r.notes["moved_bytes"] / (r.time_ms / 1e3) / 1e9 / copy
            call = r.notes["moved_bytes"] / (r.call_ms / 1e3) / 1e9 / copy
            lines.append(f"{r.dtype:9} {r.method:26} {r.case:18} {held:5.2f} / {call:5.2f} "
                         f"(copy {copy:.0f} GB/s)")
    return "\n".join(lines)


def _geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


BENCH = BenchSpec(
    unit="TFLOP/s", work="2·M·N·K flops",
    ceiling="cuBLAS (cupy.matmul; for TF32, torch.matmul with TF32 allowed; for bfloat16, "
            "torch.matmul)",
    peers="",
    defaults={"sizes": (512, 1024, 2048, 4096, 8192),
              "dtypes": ("float32", "float16", "bfloat16", TF32),
              "shapes": ((4095, 4097, 4099), (256, 128, 256, 128)), "suite": False,
              "a_transposed": False, "b_transposed": False},
    quick={"sizes": (128, 256, 512), "shapes": ((127, 65, 129), (3, 33, 65, 17))},
    cases=_cases, candidates=_candidates, main_cases=_main_cases,
    options=("suite", "a_transposed", "b_transposed"),
    title="Matmul: achieved TFLOP/s against problem size", x_axis="cube",
    summary=suite_summary)
