"""Benchmark sweeps: every rung of every ladder, timed against ceilings measured in the same run.

A *case* is one input: a shape, a dtype and, for reductions, an axis. For each case the input is
allocated once; then every *candidate* (each rung of the operation's ladder, found at run time
with :func:`gpukernels.methods`, plus the ceiling and the library equivalents) runs once, its
output is checked on the device against an independent result on the same data, and then it is
timed over CUDA events (warm-up, medians) twice: one call as :func:`cupyx.profiler.benchmark`
times it, the host's time before the launch included (``call ms``), and its device work alone,
the stream held while the host enqueues it (``time ms``, which the rates and ratios use; see
:class:`_StreamHold`). A rung that is fast but wrong is flagged, never hidden.

=========  ==========================================  =========================================
family     ceiling (ratios are to this)                library equivalents, same run
=========  ==========================================  =========================================
transpose  device-to-device copy of the same bytes     ``cupy.ascontiguousarray(x.T)``
matmul     cuBLAS (``cupy.matmul``)                     -
reduce     ``cupy.sum`` (``prod``, ``min``, ``max``)    ``torch.sum`` (...) when torch imports
=========  ==========================================  =========================================

Rates: transpose GB/s count bytes read plus bytes written; reduction GB/s count bytes read;
matmul TFLOP/s count ``2 * M * N * K`` flops. The functions return a :class:`BenchResult`, which
prints as a table, renders as one in Jupyter, plots itself and saves to JSON.

Examples
--------
>>> from gpukernels.benchmark import bench_transpose
>>> result = bench_transpose(sizes=(2048, 8192), dtypes=("float32",))  # doctest: +SKIP
>>> result                      # a table in Jupyter: time, GB/s and ratio to the copy  # doctest: +SKIP
>>> result.plot()               # GB/s against size, one line per rung  # doctest: +SKIP
"""

from __future__ import annotations

import datetime
import html
import importlib.util
import json
import math
import platform
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy

from . import _compile, _device
from .introspect import ladder_methods, operation_function, reduction_operations

__all__ = ["Measurement", "Timing", "BenchResult", "bench", "bench_transpose", "bench_matmul",
           "bench_reduce", "main_job", "environment", "format_table", "write_json", "parse_size",
           "parse_shape", "split_methods", "FAMILIES"]

#: The benchmark families and the operations each one times.
FAMILIES = ("transpose", "matmul", "reduce")

TRANSPOSE_SIZES = (1024, 2048, 4096, 8192, 16384)
TRANSPOSE_DTYPES = ("int8", "float16", "float32", "float64")
TRANSPOSE_SHAPES = ((8191, 8193), (64, 1024, 1024))
MATMUL_SIZES = (512, 1024, 2048, 4096, 8192)
MATMUL_DTYPES = ("float32", "float16", "tf32")
MATMUL_SHAPES = ((4095, 4097, 4099),)
REDUCE_SIZES = (2**16, 2**18, 2**20, 2**22, 2**24, 10**7, 2**26, 2**28)
REDUCE_DTYPES = ("float32", "int32")
REDUCE_AXIS_CASES = (((8192, 8192), 0), ((8192, 8192), 1), ((10**6, 2), 1), ((10**6, 2), 0),
                     ((1, 2**24), 1), ((64, 2**20), 1), ((2**20, 64), 0), ((256, 256, 256), 1),
                     ((256, 256, 256), (0, 2)))
#: The name partial reductions are reported under: every rung sends them to the same row and
#: column kernels (kernels/reduce_axis.cu).
AXIS_METHOD = "axis kernels"
REDUCE_AXIS_DTYPE = "float32"

#: Smaller inputs for a smoke run (``quick=True``): they fit in the L2, so not for reporting.
QUICK = {
    "transpose": {"sizes": (256, 512, 1024), "shapes": ((129, 67), (3, 64, 48))},
    "matmul": {"sizes": (128, 256, 512), "shapes": ((127, 65, 129),)},
    "reduce": {"sizes": (2**10, 2**14, 10**5),
               "axis_cases": (((512, 512), 0), ((512, 512), 1), ((1000, 2), 1), ((1, 4096), 1))},
}

_COPY = "device copy"
_CUBLAS = "cupy.matmul (cuBLAS)"
_CUBLAS_TF32 = "torch.matmul TF32 (cuBLAS)"
_CUPY_TRANSPOSE = "cupy.ascontiguousarray(x.T)"
# Library reductions: the ceiling (CuPy, CUB underneath) and PyTorch's, by operation.
_CUPY_REDUCTIONS = {"sum": "sum", "prod": "prod", "min": "min", "max": "max"}
_TORCH_REDUCTIONS = {"sum": "sum", "prod": "prod", "min": "amin", "max": "amax"}


# --- measurements ---------------------------------------------------------------------------------

@dataclass
class Measurement:
    """One timed row: a rung, a ceiling or a library call on one input.

    Attributes
    ----------
    operation : str
        ``"transpose"``, ``"matmul"``, ``"sum"``, ``"prod"``, ``"min"`` or ``"max"``.
    method : str
        The rung's name, or the ceiling's or library call's, e.g. ``"device copy"``.
    shape : tuple
        The input's shape; ``(M, K, N)`` for matmul.
    dtype : str
        The input's dtype.
    correct : bool or None
        Whether the output matched the independent result on the same data; None when not
        checked (the copy ceiling, or a candidate that did not run).
    time_ms : float
        Median device time of one call, the host's time before its launch hidden (NaN when it
        did not run); ``notes["call_ms"]`` is the median of one call with that host time.
    rate : float
        GB/s or TFLOP/s (see ``unit``).
    unit : str
        ``"GB/s"`` or ``"TFLOP/s"``.
    ratio : float
        ``rate`` over the ceiling's rate in the same case.
    ceiling : str
        The method whose rate ``ratio`` divides by.
    kind : str
        ``"rung"``, ``"ceiling"`` or ``"library"``.
    notes : dict
        Extra facts: ``axis`` for reductions, ``runs`` (timed calls), ``min_ms``, ``call_ms``,
        ``held`` (False when the call waits on the device, so ``time_ms`` is per call), the
        reason a candidate was skipped or failed.
    status : str
        ``"ok"``, ``"wrong"``, ``"not supported"`` (it raised NotImplementedError),
        ``"skipped"`` (predicted too slow) or ``"error"`` (any other exception).
    sweep : str
        Which series of the family the case belongs to: ``"size"`` for the size sweep, else a
        label such as ``"odd"``, ``"stacked"`` or ``"axis"``.
    """

    operation: str
    method: str
    shape: tuple
    dtype: str
    correct: bool | None
    time_ms: float
    rate: float
    unit: str
    ratio: float = float("nan")
    ceiling: str = ""
    kind: str = "rung"
    notes: dict = field(default_factory=dict)
    status: str = "ok"
    sweep: str = "size"

    @property
    def family(self) -> str:
        """``"transpose"``, ``"matmul"`` or ``"reduce"``."""
        return _family(self.operation)

    @property
    def axis(self):
        """The reduction axis (None for full reductions and other operations)."""
        axis = self.notes.get("axis")
        return tuple(axis) if isinstance(axis, list) else axis

    @property
    def case(self) -> str:
        """The input as one label, e.g. ``"8192x8192"`` or ``"8192x8192 axis=0"``."""
        label = "x".join(str(s) for s in self.shape)
        return label if self.axis is None else f"{label} axis={self.axis}"

    @property
    def size_bytes(self) -> int:
        """Bytes of the input (both operands for matmul)."""
        itemsize = numpy.dtype("float32" if self.dtype == TF32 else self.dtype).itemsize
        if self.operation == "matmul":
            m, k, n = self.shape
            return (m * k + k * n) * itemsize
        return math.prod(self.shape) * itemsize

    @property
    def call_ms(self) -> float:
        """Median time of one call from Python, the host's time before its launch included."""
        return float(self.notes.get("call_ms", float("nan")))


def _family(operation: str) -> str:
    return "reduce" if operation in _CUPY_REDUCTIONS else operation


@dataclass(frozen=True)
class Timing:
    """How each candidate is timed.

    Parameters
    ----------
    repeat : int
        Held timings at most (the median is the reported time; see :func:`_time_call`).
    call_repeat : int
        Timed single calls at most, host time included (their median is ``notes["call_ms"]``).
    warmup : int
        Untimed calls first; one when a single call takes longer than 20 ms.
    max_seconds : float
        Stop timing a candidate after this many seconds (at least one timed call).
    max_call_ms : float
        Skip a candidate at a size where its time at the previous size of the same series,
        scaled by the work, predicts more than this many milliseconds per call (a slow rung
        at a large size). ``inf`` never skips.

    Examples
    --------
    >>> from gpukernels.benchmark import Timing
    >>> Timing(repeat=20, max_seconds=0.1)
    Timing(repeat=20, call_repeat=20, warmup=3, max_seconds=0.1, max_call_ms=1000.0)
    """

    repeat: int = 200
    call_repeat: int = 20
    warmup: int = 3
    max_seconds: float = 0.5
    max_call_ms: float = 1000.0


QUICK_TIMING = Timing(repeat=10, call_repeat=5, warmup=1, max_seconds=0.05)


@dataclass
class _Candidate:
    method: str
    kind: str
    run: Callable[[], Any]
    check: Callable[[Any], bool] | None  # None: not checked (a copy has no output to check)


class _Predictor:
    """Time per call of each series at its last size, to skip candidates predicted too slow."""

    def __init__(self) -> None:
        self._last: dict[tuple, tuple[float, float]] = {}

    def predict_ms(self, key: tuple, work: float) -> float:
        last = self._last.get(key)
        if last is None or work <= last[0]:
            return 0.0
        return last[1] * work / last[0]

    def record(self, key: tuple, work: float, ms: float) -> None:
        if math.isfinite(ms):
            self._last[key] = (work, ms)


def _synchronize() -> None:
    _device.cupy.cuda.Device().synchronize()


# The hold kernel (kernels/timing.cu): compiled on first use, not at import.
TIMING_KERNELS = _compile.register("timing.cu", ["gk_hold_stream"])
_HOLD_TIMEOUT_NS = 200_000_000  # 0.2 s: far beyond any host enqueue time


class _StreamHold:
    """Device time of a call, its host time hidden: the stream waits on a flag while it enqueues.

    :func:`cupyx.profiler.benchmark` records its start event and then calls the function; on
    an idle GPU the event completes at once, so the call's host time before its first launch
    is counted as device time. Here a kernel that spins on a flag in pinned host memory runs
    first: the start event, the call's work and the end event queue behind it, and the flag is
    released only after the call returned. The events then time the work on the stream alone,
    including the gaps between its launches (nvbench's method).
    """

    def __init__(self) -> None:
        cupy = _device.cupy
        self._memory = cupy.cuda.alloc_pinned_memory(8)  # mapped: the device reads it directly
        self._flags = numpy.frombuffer(self._memory, numpy.int32, 2)
        self._kernel = TIMING_KERNELS.function("gk_hold_stream")
        self._start, self._end = cupy.cuda.Event(), cupy.cuda.Event()

    def time_ms(self, fn: Callable[[], Any]) -> float | None:
        """Milliseconds of ``fn``'s device work, or None if the call waited on the device."""
        cupy = _device.cupy
        self._flags[:] = 0
        self._kernel((1,), (1,), (numpy.uint64(self._memory.ptr), numpy.uint64(_HOLD_TIMEOUT_NS)))
        self._start.record()
        fn()
        self._end.record()
        self._flags[0] = 1
        self._end.synchronize()
        if self._flags[1]:
            return None  # the hold gave up: fn synchronised, so its time is not a held time
        return cupy.cuda.get_elapsed_time(self._start, self._end)


_HOLDS: dict[int, _StreamHold] = {}


def _stream_hold() -> _StreamHold:
    device = _device.cupy.cuda.runtime.getDevice()
    hold = _HOLDS.get(device)
    if hold is None:
        hold = _HOLDS[device] = _StreamHold()
    return hold


def _time_call(fn: Callable[[], Any], timing: Timing, first_call_ms: float) -> tuple[float, dict]:
    """Median seconds of ``fn()``'s device work, and notes on the timing.

    Two measurements over CUDA events, medians of each: ``call_ms``, one call as
    :func:`cupyx.profiler.benchmark` times it (the host's time before the launch included: what
    a single call costs from Python), and the held time (see :class:`_StreamHold`), which the
    rates and ratios use. If the call waits on the device itself, the per-call time is used
    and ``notes["held"]`` is False.
    """
    from cupyx.profiler import benchmark

    warmup = timing.warmup if first_call_ms < 20 else min(timing.warmup, 1)
    result = benchmark(fn, (), n_repeat=max(1, timing.call_repeat), n_warmup=warmup,
                       max_duration=timing.max_seconds)
    call_times = numpy.asarray(result.gpu_times[0])
    notes = {"call_ms": float(numpy.median(call_times) * 1e3)}
    hold = _stream_hold()
    held: list[float] = []
    deadline = time.perf_counter() + timing.max_seconds
    while len(held) < max(1, timing.repeat) and (not held or time.perf_counter() < deadline):
        ms = hold.time_ms(fn)
        if ms is None:  # fn waited on the device: only the per-call time is meaningful
            notes.update(held=False, runs=int(call_times.size),
                         min_ms=float(call_times.min() * 1e3))
            return float(numpy.median(call_times)), notes
        held.append(ms)
    times = numpy.asarray(held) / 1e3
    notes.update(held=True, runs=int(times.size), min_ms=float(times.min() * 1e3))
    return float(numpy.median(times)), notes


def _run_case(operation: str, shape: tuple, dtype: numpy.dtype, candidates: list[_Candidate],
              work: float, unit: str, timing: Timing, predictor: _Predictor, *, sweep: str,
              notes: dict | None = None, dtype_label: str | None = None) -> list[Measurement]:
    """Run, check and time every candidate of one case; ratios are to its first ceiling.

    ``work`` is the case's GB (moved or read) or TFLOP; rate = work / seconds. ``dtype_label``
    replaces the dtype's name in the rows (``"tf32"`` for float32 data on TF32 tensor cores).
    """
    rows = []
    dtype_name = dtype_label or dtype.name
    for candidate in candidates:
        row = Measurement(operation, candidate.method, tuple(shape), dtype_name, None,
                          float("nan"), float("nan"), unit, kind=candidate.kind,
                          notes=dict(notes or {}), sweep=sweep)
        rows.append(row)
        key = (operation, candidate.method, dtype_name, sweep, repr(row.axis))
        predicted = predictor.predict_ms(key, work)
        if predicted > timing.max_call_ms:
            row.status = "skipped"
            row.notes["reason"] = (f"predicted {predicted:.0f} ms per call from the previous size "
                                   f"(limit {timing.max_call_ms:g} ms)")
            continue
        try:
            start = time.perf_counter()
            output = candidate.run()
            _synchronize()
            first_call_ms = (time.perf_counter() - start) * 1e3
        except NotImplementedError as exc:
            row.status = "not supported"
            row.notes["reason"] = str(exc)
            continue
        except Exception as exc:  # a crashing rung is reported, and the sweep goes on
            row.status = "error"
            row.correct = False
            row.notes["error"] = f"{type(exc).__name__}: {exc}"
            _synchronize()
            continue
        if candidate.check is not None:
            row.correct = bool(candidate.check(output))
            row.status = "ok" if row.correct else "wrong"
        del output
        seconds, timing_notes = _time_call(candidate.run, timing, first_call_ms)
        row.notes.update(timing_notes)
        row.time_ms = seconds * 1e3
        row.rate = work / seconds
        predictor.record(key, work, row.time_ms)
    ceiling = next((r for r in rows if r.kind == "ceiling" and math.isfinite(r.rate)), None)
    for row in rows:
        if ceiling is not None:
            row.ratio = row.rate / ceiling.rate
            row.ceiling = ceiling.method
    return rows


# --- inputs and checks on the device ----------------------------------------------------------------

def _random(shape: tuple, dtype: numpy.dtype, seed: int):
    """A fresh device array: uniform(-1, 1) floats, random bits for integers, a coin for bool."""
    cupy = _device.cupy
    state = cupy.random.RandomState(seed)
    count = math.prod(shape)
    if dtype.kind == "f":
        sample_dtype = numpy.float64 if dtype.itemsize == 8 else numpy.float32
        values = state.uniform(-1.0, 1.0, size=count, dtype=sample_dtype)
        return values.astype(dtype, copy=False).reshape(shape)
    if dtype.kind == "c":
        real = numpy.float64 if dtype.itemsize == 16 else numpy.float32
        parts = state.uniform(-1.0, 1.0, size=2 * count, dtype=real)
        return parts.view(dtype).reshape(shape)
    if dtype.kind == "b":
        return (state.random_sample(count, dtype=numpy.float32) < 0.5).reshape(shape)
    words = state.randint(0, 2**32, size=-(-count * dtype.itemsize // 4), dtype=numpy.uint32)
    return words.view(numpy.uint8)[:count * dtype.itemsize].view(dtype).reshape(shape)


def _same_bits(a, b) -> bool:
    """Exact equality, bit for bit (so NaN payloads and signed zeros count)."""
    cupy = _device.cupy
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    carriers = {1: numpy.uint8, 2: numpy.uint16, 4: numpy.uint32, 8: numpy.uint64}
    if a.dtype.itemsize in carriers:
        a, b = a.view(carriers[a.dtype.itemsize]), b.view(carriers[b.dtype.itemsize])
    return bool(cupy.all(a == b))


def _within(got, want, bound) -> bool:
    cupy = _device.cupy
    error = cupy.abs(got.astype(want.dtype) - want)
    return bool(cupy.all(error <= bound)) and not bool(cupy.isnan(error).any())


# --- transpose ---------------------------------------------------------------------------------------

def _transpose_case(shape: tuple, dtype: numpy.dtype, methods: Sequence[str], timing: Timing,
                    predictor: _Predictor, *, sweep: str, seed: int,
                    seed_copies: bool = False) -> list[Measurement]:
    from .ops.transpose import copy_ceiling, transpose

    cupy = _device.cupy
    x = _random(shape, dtype, seed)
    want = cupy.swapaxes(x, -1, -2)  # a view: the check reads it in place
    copy_out = cupy.empty_like(x)

    def device_copy():
        copy_out.data.copy_from_device_async(x.data, x.nbytes)

    def check(out) -> bool:
        return _same_bits(out, want)

    candidates = [_Candidate(_COPY, "ceiling", device_copy, None)]
    if seed_copies and x.ndim == 2:
        candidates += [_Candidate(f"copy_{k}", "ceiling", lambda k=k: copy_ceiling(x, k), None)
                       for k in ("row", "col")]
    candidates += [_Candidate(m, "rung", lambda m=m: transpose(x, method=m), check)
                   for m in methods]
    candidates.append(_Candidate(_CUPY_TRANSPOSE, "library",
                                 lambda: cupy.ascontiguousarray(cupy.swapaxes(x, -1, -2)), check))
    return _run_case("transpose", shape, dtype, candidates, 2 * x.nbytes / 1e9, "GB/s", timing,
                     predictor, sweep=sweep)


def _transpose_sweep_label(shape: tuple) -> str:
    return "stacked" if len(shape) > 2 else "odd"


def _plan_transpose(sizes, dtypes, methods, shapes, *, seed_copies: bool = False):
    rungs = _select_methods("transpose", methods)
    plan = []
    for dtype in dtypes:
        dtype = numpy.dtype(dtype)
        for shape, sweep in [((n, n), "size") for n in sorted(sizes)] + \
                [(tuple(s), _transpose_sweep_label(tuple(s))) for s in shapes]:
            label = f"transpose {'x'.join(map(str, shape))} {dtype.name}"
            plan.append((label, lambda timing, predictor, seed, shape=shape, dtype=dtype,
                         sweep=sweep: _transpose_case(shape, dtype, rungs, timing, predictor,
                                                      sweep=sweep, seed=seed,
                                                      seed_copies=seed_copies)))
    return plan


# --- matmul ------------------------------------------------------------------------------------------

#: A matmul benchmark "dtype" that is float32 data multiplied on the TF32 tensor cores.
TF32 = "tf32"


def _torch_tf32_matmul(a, b):
    """cuBLAS's TF32 product through PyTorch (CuPy offers no per-call switch), or None."""
    torch = _torch()
    if torch is None:
        return None
    ta, tb = torch.from_dlpack(a), torch.from_dlpack(b)

    def run():
        allowed = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return _device.cupy.from_dlpack(torch.matmul(ta, tb))
        finally:
            torch.backends.cuda.matmul.allow_tf32 = allowed

    return run


def _matmul_case(shape: tuple, dtype_name: str, methods: Sequence[str], timing: Timing,
                 predictor: _Predictor, *, sweep: str, seed: int) -> list[Measurement]:
    from .ops.matmul import matmul, supports

    cupy = _device.cupy
    precision = "tf32" if dtype_name == TF32 else "highest"
    dtype = numpy.dtype(numpy.float32 if dtype_name == TF32 else dtype_name)
    m, k, n = shape
    a = _random((m, k), dtype, seed)
    b = _random((k, n), dtype, seed + 1)
    # The reference in float64 (cuBLAS), and the classic bound c * K * eps * (|a| @ |b|); float64
    # inputs get twice the bound, since the reference then rounds like the result. float16 sums
    # in float32 and rounds once; TF32 rounds each operand to 10 mantissa bits (2**-10 of |a||b|
    # per term, allowed twice that).
    wide_a, wide_b = a.astype(numpy.float64), b.astype(numpy.float64)
    want = cupy.matmul(wide_a, wide_b)
    magnitude = cupy.matmul(cupy.abs(wide_a), cupy.abs(wide_b))
    del wide_a, wide_b
    eps = float(numpy.finfo(dtype).eps)
    eps32 = float(numpy.finfo(numpy.float32).eps)
    if dtype == numpy.float16:
        bound = 4.0 * max(k, 1) * eps32 * magnitude + eps * cupy.abs(want)
    else:
        c = 4.0 if dtype.itemsize == 8 else 2.0
        bound = (c * max(k, 1) * eps + eps) * magnitude
        if precision == "tf32":
            bound += 2.0**-9 * magnitude
    del magnitude

    def check(out) -> bool:
        return out.shape == want.shape and out.dtype == dtype and _within(out, want, bound)

    def rung(method):  # (support is decided here, outside the timed calls)
        if supports(method, dtype, precision):
            return lambda: matmul(a, b, method=method, precision=precision)

        def unsupported():
            raise NotImplementedError(f"{method} does not compute {dtype_name} products")
        return unsupported

    if precision == "tf32":
        library = _torch_tf32_matmul(a, b)
        candidates = [_Candidate(_CUBLAS_TF32, "ceiling", library, check)] if library else []
    else:
        candidates = [_Candidate(_CUBLAS, "ceiling", lambda: cupy.matmul(a, b), check)]
    candidates += [_Candidate(meth, "rung", rung(meth), check) for meth in methods]
    return _run_case("matmul", shape, dtype, candidates, 2.0 * m * n * k / 1e12, "TFLOP/s",
                     timing, predictor, sweep=sweep, dtype_label=dtype_name)


def _plan_matmul(sizes, dtypes, methods, shapes):
    rungs = _select_methods("matmul", methods)
    plan = []
    for dtype in dtypes:
        name = TF32 if str(dtype) == TF32 else numpy.dtype(dtype).name
        for shape, sweep in [((n, n, n), "size") for n in sorted(sizes)] + \
                [(tuple(s), "odd") for s in shapes]:
            if len(shape) != 3:
                raise ValueError(f"a matmul shape is (M, K, N); got {shape}")
            label = f"matmul {'x'.join(map(str, shape))} {name}"
            plan.append((label, lambda timing, predictor, seed, shape=shape, name=name,
                         sweep=sweep: _matmul_case(shape, name, rungs, timing, predictor,
                                                   sweep=sweep, seed=seed)))
    return plan


# --- reductions ---------------------------------------------------------------------------------------

def _torch():
    """PyTorch, if it imports (it is optional); None otherwise."""
    if importlib.util.find_spec("torch") is None:
        return None
    try:
        import torch
    except Exception:  # a broken install is the same as none, for a benchmark
        return None
    return torch if torch.cuda.is_available() else None


def _reduction_reference(operation: str, x, axis, result_dtype: numpy.dtype):
    """(reference, bound) for checking a reduction of ``x``: exact results get bound None."""
    cupy = _device.cupy
    if operation in ("min", "max"):
        return getattr(cupy, operation)(x, axis=axis), None
    if result_dtype.kind in "biu":  # integer + and * wrap modulo 2**64 whatever the order
        return getattr(cupy, operation)(x, axis=axis, dtype=result_dtype), None
    wide = x.astype(numpy.complex128 if x.dtype.kind == "c" else numpy.float64)
    want = getattr(cupy, operation)(wide, axis=axis)
    count = x.size if axis is None else math.prod(
        x.shape[ax] for ax in (axis if isinstance(axis, tuple) else (axis,)))
    real = numpy.dtype(result_dtype.char.lower()) if result_dtype.kind == "c" else result_dtype
    eps_result = float(numpy.finfo(real).eps)
    eps_acc = float(numpy.finfo(numpy.float32 if real.itemsize <= 4 else numpy.float64).eps)
    if operation == "sum":  # the bound of reference.sum_error_bound, per output element
        chains = math.sqrt(count) + math.log2(max(count, 1)) + 1
        bound = 2.0 * eps_acc * chains * cupy.abs(wide).sum(axis=axis) + eps_result * cupy.abs(want)
    else:  # a product of n factors: n roundings, relative; absolute near underflow
        tiny = float(numpy.finfo(real).tiny)
        bound = (2.0 * count * eps_acc + eps_result) * cupy.abs(want) + tiny
    return want, bound


def _reduce_case(operation: str, shape: tuple, dtype: numpy.dtype, axis, methods: Sequence[str],
                 timing: Timing, predictor: _Predictor, *, sweep: str, seed: int,
                 use_torch: bool = True) -> list[Measurement]:
    cupy = _device.cupy
    x = _random(shape, dtype, seed)
    result_dtype = getattr(numpy, operation)(numpy.zeros((1,) * len(shape), dtype), axis=axis).dtype
    want, bound = _reduction_reference(operation, x, axis, result_dtype)
    axis_kwargs = {} if axis is None else {"axis": axis}

    def check(out) -> bool:
        out = cupy.asarray(out)
        if out.shape != want.shape or out.dtype != result_dtype:
            return False
        return _same_bits(out, want.astype(result_dtype)) if bound is None \
            else _within(out, want, bound)

    library = getattr(cupy, _CUPY_REDUCTIONS[operation])
    candidates = [_Candidate(f"cupy.{operation}", "ceiling", lambda: library(x, **axis_kwargs),
                             check)]
    torch = _torch() if use_torch else None
    if torch is not None and isinstance(axis, tuple) and operation == "prod":
        torch = None  # torch.prod takes one dim, not a tuple
    if torch is not None:
        tensor = torch.from_dlpack(x)  # the same device memory: no copy
        torch_fn = getattr(torch, _TORCH_REDUCTIONS[operation])
        torch_kwargs = {} if axis is None else {"dim": axis}
        candidates.append(_Candidate(
            f"torch.{_TORCH_REDUCTIONS[operation]}", "library",
            lambda: torch_fn(tensor, **torch_kwargs),
            lambda out: check(cupy.from_dlpack(out))))
    gk_fn = operation_function(operation)
    if axis is None:
        candidates += [_Candidate(m, "rung", lambda m=m: gk_fn(x, method=m), check)
                       for m in methods]
    else:
        candidates.append(_Candidate(AXIS_METHOD, "rung", lambda: gk_fn(x, axis=axis), check))
    notes = {} if axis is None else {"axis": axis}
    return _run_case(operation, shape, dtype, candidates, x.nbytes / 1e9, "GB/s", timing,
                     predictor, sweep=sweep, notes=notes)


def _plan_reduce(sizes, dtypes, methods, operations, shapes, axis_cases, axis_dtype, *,
                 use_torch: bool = True):
    plan = []
    for operation in operations:
        rungs = _select_methods(operation, methods)
        cases = []
        for dtype in dtypes:
            cases += [((n,), numpy.dtype(dtype), None, "size") for n in sorted(sizes)]
            cases += [(tuple(s), numpy.dtype(dtype), None, "shape") for s in shapes]
        cases += [(tuple(s), numpy.dtype(axis_dtype), ax, "axis") for s, ax in axis_cases]
        for shape, dtype, axis, sweep in cases:
            label = f"{operation} {'x'.join(map(str, shape))} {dtype.name}"
            if axis is not None:
                label += f" axis={axis}"
            plan.append((label, lambda timing, predictor, seed, op=operation, shape=shape,
                         dtype=dtype, axis=axis, sweep=sweep, rungs=rungs:
                         _reduce_case(op, shape, dtype, axis, rungs, timing, predictor,
                                      sweep=sweep, seed=seed, use_torch=use_torch)))
    return plan


# --- running a plan -----------------------------------------------------------------------------------

def _select_methods(operation: str, requested: Iterable[str] | None) -> tuple[str, ...]:
    """The ladder of ``operation``, or the requested subset of it (in ladder order)."""
    ladder = ladder_methods(operation)
    if requested is None:
        return ladder
    requested = tuple(requested)
    unknown = [m for m in requested if m not in ladder and m != "auto"]
    if unknown:
        raise ValueError(f"unknown {operation} method(s) {', '.join(unknown)}; the ladder is "
                         f"{', '.join(ladder)}")
    return tuple(m for m in ladder + ("auto",) if m in requested)


class _Progress:
    """A progress bar (tqdm.auto: a widget in notebooks, text elsewhere), text lines, or nothing."""

    def __init__(self, total: int, progress, description: str) -> None:
        self._bar = None
        self._print = None
        if callable(progress):
            self._print = progress
        elif progress:
            try:
                with warnings.catch_warnings():  # no widget library: tqdm falls back to text
                    warnings.simplefilter("ignore")
                    from tqdm.auto import tqdm
            except ImportError:
                self._print = lambda message: print(message, file=sys.stderr, flush=True)
            else:
                self._bar = tqdm(total=total, desc=description, unit="case", dynamic_ncols=True)

    def start(self, label: str) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(label, refresh=True)
        elif self._print is not None:
            self._print(f"{label} ...")

    def done(self) -> None:
        if self._bar is not None:
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _execute(plan, timing: Timing, progress, description: str, seed: int | None,
             settings: dict) -> BenchResult:
    _device.require_gpu()
    cupy = _device.cupy
    seeds = numpy.random.SeedSequence(seed)
    predictor = _Predictor()
    rows: list[Measurement] = []
    bar = _Progress(len(plan), progress, description)
    try:
        for (label, run), case_seed in zip(plan, seeds.generate_state(max(len(plan), 1))):
            bar.start(label)
            rows += run(timing, predictor, int(case_seed))
            cupy.get_default_memory_pool().free_all_blocks()  # each case starts with free memory
            bar.done()
    finally:
        bar.close()
    settings = dict(settings, timing=asdict(timing), seed=seeds.entropy)
    return BenchResult(rows, environment(), settings)


def _defaults(family: str, quick: bool, **given):
    """The family's default inputs, with the caller's where given (None keeps the default)."""
    defaults = {
        "transpose": {"sizes": TRANSPOSE_SIZES, "dtypes": TRANSPOSE_DTYPES,
                      "shapes": TRANSPOSE_SHAPES},
        "matmul": {"sizes": MATMUL_SIZES, "dtypes": MATMUL_DTYPES, "shapes": MATMUL_SHAPES},
        "reduce": {"sizes": REDUCE_SIZES, "dtypes": REDUCE_DTYPES, "shapes": (),
                   "axis_cases": REDUCE_AXIS_CASES},
    }[family]
    if quick:
        defaults.update(QUICK[family])
    return {key: tuple(defaults[key] if value is None else value) for key, value in given.items()}


def bench_transpose(sizes: Iterable[int] | None = None, dtypes: Iterable[Any] | None = None,
                    methods: Iterable[str] | None = None, *,
                    shapes: Iterable[tuple] | None = None, timing: Timing | None = None,
                    quick: bool = False, progress=True, seed: int | None = None) -> BenchResult:
    """Time every transpose rung against a device copy of the same bytes, over a size sweep.

    Parameters
    ----------
    sizes : iterable of int, optional
        Sides of the square matrices of the sweep; by default 1024 to 16384 (4 MB, inside the
        H100's 50 MB L2, to 1 GB of float32).
    dtypes : iterable of dtype, optional
        By default int8, float16, float32 and float64: every item size of 1 to 8 bytes.
    methods : iterable of str, optional
        Rungs to time (by default the whole ladder, ``gpukernels.methods("transpose")``).
        The ceiling and ``cupy.ascontiguousarray(x.T)`` are always timed.
    shapes : iterable of tuple, optional
        Extra inputs outside the sweep, by default ``(8191, 8193)`` (odd sides) and
        ``(64, 1024, 1024)`` (a stack). ``()`` for none.
    timing : Timing, optional
        Repeats, warm-up and time limits.
    quick : bool
        Small default inputs for a smoke run (they fit in the L2: not for reporting).
    progress : bool or callable
        A progress bar (``tqdm.auto``) when True; a callable receives one line per case.
    seed : int, optional
        Seed of the random inputs (recorded in the result's settings).

    Returns
    -------
    BenchResult
        GB/s count bytes read plus bytes written; ratios are to the device copy.

    Examples
    --------
    >>> from gpukernels.benchmark import bench_transpose
    >>> result = bench_transpose(sizes=(4096, 8192), dtypes=("float32",), shapes=())  # doctest: +SKIP
    >>> [row.method for row in result if row.shape == (8192, 8192)]  # doctest: +SKIP
    ['device copy', 'naive', 'naive_col', 'shared', 'cupy.ascontiguousarray(x.T)']
    >>> result.plot()  # doctest: +SKIP
    """
    inputs = _defaults("transpose", quick, sizes=sizes, dtypes=dtypes, shapes=shapes)
    plan = _plan_transpose(inputs["sizes"], inputs["dtypes"], methods, inputs["shapes"])
    return _execute(plan, timing or (QUICK_TIMING if quick else Timing()), progress,
                    "transpose", seed, _jsonable(dict(inputs, methods=methods)))


def bench_matmul(sizes: Iterable[int] | None = None, dtypes: Iterable[Any] | None = None,
                 methods: Iterable[str] | None = None, *, shapes: Iterable[tuple] | None = None,
                 timing: Timing | None = None, quick: bool = False, progress=True,
                 seed: int | None = None) -> BenchResult:
    """Time every matmul rung against cuBLAS (``cupy.matmul``), over a size sweep.

    Parameters
    ----------
    sizes : iterable of int, optional
        ``n`` of the ``n x n x n`` products of the sweep; by default 512 to 8192.
    dtypes : iterable of dtype, optional
        float32 (the default) and/or float64.
    methods : iterable of str, optional
        Rungs to time (by default ``gpukernels.methods("matmul")``); cuBLAS is always timed.
    shapes : iterable of (M, K, N), optional
        Extra products outside the sweep, by default ``(4095, 4097, 4099)``. ``()`` for none.
    timing : Timing, optional
        Repeats, warm-up and time limits. ``Timing.max_call_ms`` skips a rung at a size where
        its time at the previous size predicts a longer call (a second by default; the naive
        rung takes about a third of one at 8192 on an H100).
    quick, progress, seed
        As for :func:`bench_transpose`.

    Returns
    -------
    BenchResult
        TFLOP/s count ``2 * M * N * K``; ratios are to cuBLAS. Each output is checked against
        a float64 product within ``2 K eps (|A| @ |B|)``.

    Examples
    --------
    >>> from gpukernels.benchmark import bench_matmul
    >>> result = bench_matmul(sizes=(1024, 4096), shapes=())  # doctest: +SKIP
    >>> print(result)  # doctest: +SKIP
    """
    inputs = _defaults("matmul", quick, sizes=sizes, dtypes=dtypes, shapes=shapes)
    plan = _plan_matmul(inputs["sizes"], inputs["dtypes"], methods, inputs["shapes"])
    return _execute(plan, timing or (QUICK_TIMING if quick else Timing()), progress, "matmul",
                    seed, _jsonable(dict(inputs, methods=methods)))


def bench_reduce(sizes: Iterable[int] | None = None, dtypes: Iterable[Any] | None = None,
                 methods: Iterable[str] | None = None, *,
                 operations: Iterable[str] | None = None, shapes: Iterable[tuple] | None = None,
                 axis_cases: Iterable[tuple[tuple, Any]] | None = None,
                 axis_dtype: Any = REDUCE_AXIS_DTYPE, torch: bool = True,
                 timing: Timing | None = None, quick: bool = False, progress=True,
                 seed: int | None = None) -> BenchResult:
    """Time every reduction rung against CuPy's (CUB's) and PyTorch's reductions.

    Parameters
    ----------
    sizes : iterable of int, optional
        Element counts of the full-reduction sweep; by default 2**16 to 2**28, and 10**7.
    dtypes : iterable of dtype, optional
        By default float32 and int32.
    methods : iterable of str, optional
        Rungs to time (by default the whole reduction ladder).
    operations : iterable of str, optional
        Reductions to time, by default every one the package has (``sum``, and ``prod``,
        ``min``, ``max`` where they exist).
    shapes : iterable of tuple, optional
        Extra inputs reduced in full (none by default).
    axis_cases : iterable of (shape, axis), optional
        Partial reductions (the axis an int or a tuple), timed through the row and column
        kernels (reported as ``"axis kernels"``) and compared with ``cupy.sum(x, axis)`` and
        ``torch.sum(x, dim)``; by default :data:`REDUCE_AXIS_CASES`: ``(8192, 8192)`` over
        either axis, ``(10**6, 2)`` over either axis, ``(1, 2**24)``, ``(64, 2**20)`` over axis
        1, ``(2**20, 64)`` over axis 0, and ``(256, 256, 256)`` over axis 1 and over (0, 2).
        ``()`` for none.
    axis_dtype : dtype
        dtype of the axis cases (float32).
    torch : bool
        Time PyTorch's reduction too when it imports and sees the GPU (on the same memory,
        through DLPack).
    timing, quick, progress, seed
        As for :func:`bench_transpose`.

    Returns
    -------
    BenchResult
        GB/s count bytes read; ratios are to CuPy's reduction.

    Examples
    --------
    >>> from gpukernels.benchmark import bench_reduce
    >>> result = bench_reduce(sizes=(2**24, 2**28), dtypes=("float32",), axis_cases=())  # doctest: +SKIP
    >>> result.plot()  # doctest: +SKIP
    """
    inputs = _defaults("reduce", quick, sizes=sizes, dtypes=dtypes, shapes=shapes,
                       axis_cases=axis_cases)
    available = reduction_operations()
    operations = available if operations is None else tuple(operations)
    for operation in operations:
        if operation not in available:
            raise ValueError(f"unknown reduction {operation!r}; this version has "
                             f"{', '.join(available)}")
    plan = _plan_reduce(inputs["sizes"], inputs["dtypes"], methods, operations, inputs["shapes"],
                        inputs["axis_cases"], axis_dtype, use_torch=torch)
    settings = dict(inputs, methods=methods, operations=operations, axis_dtype=str(axis_dtype))
    return _execute(plan, timing or (QUICK_TIMING if quick else Timing()), progress, "reduce",
                    seed, _jsonable(settings))


def bench(families: Iterable[str] = FAMILIES, *, quick: bool = False, timing: Timing | None = None,
          progress=True, seed: int | None = None, **options) -> BenchResult:
    """Run several families' default sweeps and join their results.

    Parameters
    ----------
    families : iterable of str
        Among ``"transpose"``, ``"matmul"`` and ``"reduce"`` (all by default).
    quick, timing, progress, seed
        As for :func:`bench_transpose`.
    **options
        Passed to :func:`bench_transpose`, :func:`bench_matmul` and :func:`bench_reduce`
        (``sizes``, ``dtypes``, ``methods``, ``shapes``; ``operations`` and ``axis_cases`` go
        to the reductions alone).

    Returns
    -------
    BenchResult

    Examples
    --------
    >>> from gpukernels.benchmark import bench
    >>> result = bench(quick=True)  # doctest: +SKIP
    >>> result.save_plots("bench.png")  # doctest: +SKIP
    ['bench-transpose.png', 'bench-matmul.png', 'bench-reduce.png']
    """
    functions = {"transpose": bench_transpose, "matmul": bench_matmul, "reduce": bench_reduce}
    reduce_only = {"operations", "axis_cases", "axis_dtype", "torch"}
    families = tuple(families)
    for family in families:
        if family not in functions:
            raise ValueError(f"unknown family {family!r}; choose from {', '.join(FAMILIES)}")
    methods = split_methods(families, options.pop("methods", None))
    results = []
    for family in families:
        if methods[family] == ():  # the requested rungs are all in other ladders
            continue
        kwargs = {k: v for k, v in options.items() if family == "reduce" or k not in reduce_only}
        results.append(functions[family](methods=methods[family], quick=quick, timing=timing,
                                         progress=progress, seed=seed, **kwargs))
    return BenchResult.join(results)


def split_methods(families: Sequence[str], methods: Iterable[str] | None) -> dict:
    """Each family's share of a list of rung names (None: every rung of every family).

    A name may belong to several ladders (``naive``); one that belongs to none raises ValueError.

    Examples
    --------
    >>> from gpukernels.benchmark import split_methods
    >>> split_methods(["transpose", "matmul"], ["naive", "shared"])
    {'transpose': ('naive', 'shared'), 'matmul': ('naive',)}
    """
    if methods is None:
        return {family: None for family in families}
    methods = tuple(methods)
    ladders = {family: set(_family_methods(family)) | {"auto"} for family in families}
    unknown = [m for m in methods if not any(m in ladder for ladder in ladders.values())]
    if unknown:
        known = sorted(set().union(*ladders.values()))
        raise ValueError(f"unknown method(s) {', '.join(unknown)}; the ladders of "
                         f"{', '.join(families)} have {', '.join(known)}")
    return {family: tuple(m for m in methods if m in ladders[family]) for family in families}


def _family_methods(family: str) -> tuple[str, ...]:
    operations = reduction_operations() if family == "reduce" else (family,)
    return tuple(dict.fromkeys(m for op in operations for m in ladder_methods(op)))


# --- the table of `python -m gpukernels` ----------------------------------------------------------------

MAIN_CASES = {
    "transpose": [(8192, 8192), (8191, 8193)],
    "matmul": [(4096, 4096, 4096)],
    "reduce": [((2**28,), "int32"), ((2**28,), "float32"), ((10**7,), "int32")],
}
MAIN_QUICK_CASES = {
    "transpose": [(2048, 2048)],
    "matmul": [(1024, 1024, 1024)],
    "reduce": [((2**22,), "int32"), ((2**22,), "float32")],
}
# Small odd inputs on which each rung is also compared with NumPy (fresh data, host reference).
_NUMPY_CHECK_SHAPES = {"transpose": (1023, 1025), "matmul": (255, 129, 257), "reduce": (10**6 + 3,)}


def main_job(operations: Iterable[str] = ("transpose", "matmul", "sum"), *, quick: bool = False,
             progress=print, timing: Timing | None = None) -> list[Measurement]:
    """The table of ``python -m gpukernels``: every rung checked and timed next to its ceiling.

    Each rung is checked on the timed data, and again against NumPy on a small odd input
    (:func:`gpukernels.validation.check`). Transposes also get the seed documents' row and
    column copies as ceilings for the naive rungs.

    Parameters
    ----------
    operations : iterable of str
        ``"transpose"``, ``"matmul"``, and reductions: ``"sum"`` (``"prod"``, ``"min"``,
        ``"max"`` where they exist) or ``"reduce"`` for all of them.
    quick : bool
        Sizes that fit in the L2, for a smoke run.
    progress : bool or callable
        As for :func:`bench_transpose`; by default one line per case through ``print``.
    timing : Timing, optional
        By default 30 timed calls per candidate.

    Returns
    -------
    list of Measurement

    Examples
    --------
    >>> from gpukernels.benchmark import main_job, format_table
    >>> print(format_table(main_job(["sum"], quick=True)))  # doctest: +SKIP
    """
    _device.require_gpu()
    operations = tuple(operations)
    reductions = [op for op in reduction_operations()
                  if op in operations or "reduce" in operations]
    cases = MAIN_QUICK_CASES if quick else MAIN_CASES
    plan = []
    if "transpose" in operations:
        plan += _plan_transpose([], ["float32"], None, cases["transpose"], seed_copies=True)
    if "matmul" in operations:
        plan += _plan_matmul([], ["float32", "float16"], None, cases["matmul"])
    for operation in reductions:
        for shape, dtype in cases["reduce"]:
            plan += _plan_reduce([], [dtype], None, [operation], [shape], [], dtype,
                                 use_torch=False)
    timing = timing or Timing(repeat=30, warmup=5, max_seconds=2.0, max_call_ms=math.inf)
    rows = _execute(plan, timing, progress, "checking", None, {}).measurements
    for row in rows:
        row.sweep = "main"
    _numpy_checks(rows)
    return rows


def _numpy_checks(rows: list[Measurement]) -> None:
    """Also compare each rung with NumPy on a small odd input, once per (operation, rung, dtype)."""
    from . import validation

    verdicts: dict[tuple, Any] = {}
    for row in rows:
        if row.kind != "rung" or row.status not in ("ok", "wrong") or row.dtype == TF32:
            continue  # (TF32 has its own bound, checked on the timed data only)
        key = (row.operation, row.method, row.dtype)
        if key not in verdicts:
            try:
                verdicts[key] = validation.check(row.operation, row.method,
                                                 _NUMPY_CHECK_SHAPES[row.family], row.dtype)
            except ValueError:  # validation does not know this operation
                verdicts[key] = None
        verdict = verdicts[key]
        if verdict is not None:
            row.notes["numpy_check"] = str(verdict)
            if not verdict.ok:
                row.correct = False
                row.status = "wrong"


# --- environment ----------------------------------------------------------------------------------

def environment() -> dict:
    """The device, its clocks, the library versions and the date of a measurement.

    Returns
    -------
    dict
        ``date``, ``device``, ``compute_capability``, ``multiprocessors``, ``l2_bytes``,
        ``memory_bytes``, ``sm_clock_max_mhz``, ``memory_clock_max_mhz``, ``memory_bus_bits``;
        the clocks NVML reads now (``sm_clock_mhz``, ``memory_clock_mhz``) where
        ``nvidia-ml-py`` is installed; ``driver``, ``runtime``, ``nvrtc`` versions;
        ``gpukernels``, ``cupy``, ``numpy``, ``torch`` (if imported) and ``python``.

    Examples
    --------
    >>> from gpukernels.benchmark import environment
    >>> environment()["device"]  # doctest: +SKIP
    'NVIDIA H100 80GB HBM3'
    """
    _device.require_gpu()
    cupy = _device.cupy
    device = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(device.id)
    attributes = device.attributes
    env = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": props["name"].decode(),
        "compute_capability": f"{props['major']}.{props['minor']}",
        "multiprocessors": props["multiProcessorCount"],
        "l2_bytes": props["l2CacheSize"],
        "memory_bytes": props["totalGlobalMem"],
        "sm_clock_max_mhz": attributes.get("ClockRate", 0) // 1000,
        "memory_clock_max_mhz": attributes.get("MemoryClockRate", 0) // 1000,
        "memory_bus_bits": attributes.get("GlobalMemoryBusWidth", 0),
    }
    env.update(_nvml_clocks(device))  # NVML's clocks where it answers
    env.update({
        "driver": cupy.cuda.runtime.driverGetVersion(),
        "runtime": cupy.cuda.runtime.runtimeGetVersion(),
        "nvrtc": ".".join(map(str, cupy.cuda.nvrtc.getVersion())),
        "gpukernels": _package_version(),
        "cupy": cupy.__version__,
        "numpy": numpy.__version__,
        "python": platform.python_version(),
    })
    if "torch" in sys.modules:
        env["torch"] = sys.modules["torch"].__version__
    return env


def _package_version() -> str:
    from . import __version__

    return __version__


def _nvml_clocks(device) -> dict:
    """Current SM and memory clocks from NVML, when nvidia-ml-py is installed; else nothing."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            try:
                handle = pynvml.nvmlDeviceGetHandleByPciBusId(device.pci_bus_id)
            except (TypeError, AttributeError):  # older bindings take bytes
                handle = pynvml.nvmlDeviceGetHandleByPciBusId(device.pci_bus_id.encode())
            return {
                "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
                "memory_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
                "sm_clock_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM),
                "memory_clock_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(handle,
                                                                         pynvml.NVML_CLOCK_MEM),
            }
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no NVML, or a driver that refuses: the clocks are a nicety
        return {}


# --- results ---------------------------------------------------------------------------------------

def _jsonable(value):
    """Tuples to lists, dtypes to names, recursively, for JSON."""
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, numpy.dtype) or isinstance(value, type):
        return numpy.dtype(value).name
    if isinstance(value, numpy.generic):
        return value.item()
    return value


def _json_number(value: float):
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def _status_label(row: Measurement) -> str:
    if row.status == "ok":
        return "-" if row.correct is None else ("yes" if row.correct else "NO")
    return {"wrong": "NO", "not supported": "n/s", "skipped": "skip",
            "error": "ERROR"}.get(row.status, row.status)


def _rate_text(row: Measurement) -> str:
    if not math.isfinite(row.rate):
        return ""
    return f"{row.rate:.1f} {row.unit}" if row.rate < 100 else f"{row.rate:.0f} {row.unit}"


class BenchResult:
    """Measurements with the environment they were taken in: a table, a plot and a JSON file.

    Iterating gives the :class:`Measurement` rows. In Jupyter the result renders as an HTML
    table; ``print`` gives the same table as text.

    Parameters
    ----------
    measurements : list of Measurement
    environment : dict
        See :func:`environment`.
    settings : dict, optional
        The inputs and timing the sweep was run with.

    Examples
    --------
    >>> from gpukernels.benchmark import BenchResult, Measurement
    >>> rows = [Measurement("transpose", "device copy", (8192, 8192), "float32", None, 0.19,
    ...                     2848.0, "GB/s", kind="ceiling"),
    ...         Measurement("transpose", "shared", (8192, 8192), "float32", True, 0.25,
    ...                     2125.0, "GB/s", ratio=0.746, ceiling="device copy")]
    >>> result = BenchResult(rows, {"device": "NVIDIA H100 80GB HBM3"})
    >>> len(result), result.wrong
    (2, [])
    >>> result.filter(kind="rung")[0].method
    'shared'
    """

    def __init__(self, measurements: Iterable[Measurement], environment: dict | None = None,
                 settings: dict | None = None) -> None:
        self.measurements = list(measurements)
        self.environment = dict(environment or {})
        self.settings = dict(settings or {})

    # sequence behaviour
    def __iter__(self):
        return iter(self.measurements)

    def __len__(self) -> int:
        return len(self.measurements)

    def __getitem__(self, index):
        return self.measurements[index]

    @classmethod
    def join(cls, results: Sequence[BenchResult]) -> BenchResult:
        """One result holding the rows of several (the last one's environment).

        Examples
        --------
        >>> from gpukernels.benchmark import BenchResult
        >>> len(BenchResult.join([BenchResult([]), BenchResult([])]))
        0
        """
        rows = [row for result in results for row in result]
        environment = results[-1].environment if results else {}
        settings = {family: result.settings for result in results for family in result.families}
        return cls(rows, environment, settings)

    @property
    def families(self) -> tuple[str, ...]:
        """The families present, in the order of :data:`FAMILIES`."""
        present = {row.family for row in self}
        return tuple(f for f in FAMILIES if f in present)

    @property
    def wrong(self) -> list[Measurement]:
        """Rows whose output was wrong or that raised an unexpected exception."""
        return [row for row in self if row.correct is False or row.status in ("wrong", "error")]

    def filter(self, **fields) -> BenchResult:
        """The rows whose attributes equal every given value (a tuple/list/set: any of them).

        Examples
        --------
        >>> from gpukernels.benchmark import BenchResult
        >>> BenchResult([]).filter(operation="transpose", dtype=("float32", "int8")).measurements
        []
        """
        def keep(row: Measurement) -> bool:
            for name, wanted in fields.items():
                value = getattr(row, name)
                if isinstance(wanted, (list, set, frozenset)) or \
                        (isinstance(wanted, tuple) and name != "shape"):
                    if value not in wanted:
                        return False
                elif value != wanted:
                    return False
            return True

        return BenchResult([row for row in self if keep(row)], self.environment, self.settings)

    # text, HTML, Markdown
    def header(self) -> str:
        """One line: the device, CuPy's version and the date."""
        env = self.environment
        if "device" not in env:
            return "gpukernels benchmark"
        parts = [env["device"]]
        if "compute_capability" in env:
            parts[0] += (f" (sm_{env['compute_capability'].replace('.', '')}, "
                         f"{env.get('multiprocessors', '?')} SMs)")
        if "cupy" in env:
            parts.append(f"CuPy {env['cupy']}")
        if "date" in env:
            parts.append(env["date"])
        return ", ".join(parts)

    def __str__(self) -> str:
        return f"{self.header()}\n{format_table(self.measurements)}"

    def __repr__(self) -> str:
        families = ", ".join(self.families) or "no families"
        return f"<BenchResult: {len(self)} measurements ({families}) on {self.header()}>"

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython's text display: the table
        printer.text(repr(self) if cycle else str(self))

    def _repr_html_(self) -> str:
        columns = ["operation", "method", "shape", "dtype", "check", "time (ms)", "call (ms)",
                   "rate", "x ceiling"]
        head = "".join(f"<th style='text-align:{'left' if i < 5 else 'right'}'>{c}</th>"
                       for i, c in enumerate(columns))
        body = []
        previous_case = None
        for row in self:
            case = (row.operation, row.case, row.dtype)
            border = "border-top:2px solid #999;" if previous_case not in (None, case) else ""
            previous_case = case
            method = html.escape(row.method) + ("" if row.kind == "rung" else
                                                f" <small>({row.kind})</small>")
            status = _status_label(row)
            color = {"NO": "#c00", "ERROR": "#c00", "n/s": "#888", "skip": "#888"}.get(status, "")
            reason = row.notes.get("error") or row.notes.get("reason") or ""
            status_html = (f"<span style='color:{color}' title='{html.escape(reason, True)}'>"
                           f"{status}</span>")
            ratio = ""
            if math.isfinite(row.ratio):
                width = min(row.ratio, 1.5) / 1.5 * 100
                bar_color = "#4c72b0" if row.kind == "rung" else "#aaa"
                ratio = (f"<div style='background:linear-gradient(to right,{bar_color}55 "
                         f"{width:.0f}%,transparent {width:.0f}%);padding:0 4px'>"
                         f"{row.ratio:.3f}</div>")
            time_ms = f"{row.time_ms:.3f}" if math.isfinite(row.time_ms) else ""
            call_ms = f"{row.call_ms:.3f}" if math.isfinite(row.call_ms) else ""
            cells = [row.operation, method, html.escape(row.case), row.dtype, status_html,
                     time_ms, call_ms, _rate_text(row), ratio]
            body.append(f"<tr style='{border}'>" + "".join(
                f"<td style='text-align:{'left' if i < 5 else 'right'}'>{c}</td>"
                for i, c in enumerate(cells)) + "</tr>")
        note = ("time: device time of one call, the host's time before the launch hidden; call: "
                "one call from Python, that host time included. x ceiling: rate (from time) over "
                "the in-run ceiling of the same input (device copy, cuBLAS, "
                "or CuPy's reduction). check: the output matched an independent result on the "
                "same data (n/s: not supported, skip: predicted too slow).")
        return (f"<div><p><b>{html.escape(self.header())}</b></p>"
                f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
                f"<p><small>{note}</small></p></div>")

    def to_markdown(self) -> str:
        """The rows as a Markdown table (for a README or a report).

        Examples
        --------
        >>> from gpukernels.benchmark import BenchResult
        >>> print(BenchResult([]).to_markdown())
        | operation | method | shape | dtype | check | time (ms) | call (ms) | rate | x ceiling |
        | --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: |
        """
        lines = ["| operation | method | shape | dtype | check | time (ms) | call (ms) | rate | "
                 "x ceiling |", "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: |"]
        for row in self:
            method = row.method if row.kind == "rung" else f"{row.method} ({row.kind})"
            method = method.replace("|", "\\|")
            time_ms = f"{row.time_ms:.3f}" if math.isfinite(row.time_ms) else ""
            call_ms = f"{row.call_ms:.3f}" if math.isfinite(row.call_ms) else ""
            ratio = f"{row.ratio:.3f}" if math.isfinite(row.ratio) else ""
            lines.append(f"| {row.operation} | {method} | {row.case} | {row.dtype} | "
                         f"{_status_label(row)} | {time_ms} | {call_ms} | {_rate_text(row)} | "
                         f"{ratio} |")
        return "\n".join(lines)

    # JSON
    def to_dict(self) -> dict:
        """``{"environment", "settings", "measurements"}``, ready for :func:`json.dump`."""
        rows = []
        for row in self:
            entry = asdict(row)
            entry["shape"] = list(row.shape)
            for key in ("time_ms", "rate", "ratio"):
                entry[key] = _json_number(entry[key])
            entry["notes"] = _jsonable(entry["notes"])
            rows.append(entry)
        return {"environment": self.environment, "settings": _jsonable(self.settings),
                "measurements": rows}

    def save_json(self, path) -> Path:
        """Write :meth:`to_dict` to ``path`` (indented JSON); return the path.

        Examples
        --------
        >>> from gpukernels.benchmark import BenchResult
        >>> BenchResult([]).save_json("bench.json")  # doctest: +SKIP
        PosixPath('bench.json')
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        return path

    @classmethod
    def load(cls, path) -> BenchResult:
        """Read a file written by :meth:`save_json` (or by ``--json``), e.g. to plot it again.

        Examples
        --------
        >>> from gpukernels.benchmark import BenchResult
        >>> result = BenchResult.load("benchmarks/results/bench.json")  # doctest: +SKIP
        >>> result.save_plots("bench.png")  # doctest: +SKIP
        """
        data = json.loads(Path(path).read_text())
        names = {f for f in Measurement.__dataclass_fields__}
        rows = []
        for entry in data.get("measurements", []):
            entry = {k: v for k, v in entry.items() if k in names}
            entry["shape"] = tuple(entry["shape"])
            for key in ("time_ms", "rate", "ratio"):
                if entry.get(key) is None:
                    entry[key] = float("nan")
            rows.append(Measurement(**entry))
        return cls(rows, data.get("environment", {}), data.get("settings", {}))

    # plots
    def plot(self, family: str | None = None):
        """A matplotlib figure: rate against input size, one line per rung, the ceiling dashed.

        Parameters
        ----------
        family : {"transpose", "matmul", "reduce"}, optional
            Which family to draw; by default every family present, one row of panels each.

        Returns
        -------
        matplotlib.figure.Figure
            One panel per dtype (per reduction and dtype for reductions, plus a bar chart of
            the axis cases). Size axes are logarithmic; the L2 size is marked. Inputs outside
            the sweep (odd shapes, stacks) appear as unconnected markers; a wrong result as a
            red cross.

        Examples
        --------
        >>> from gpukernels.benchmark import BenchResult
        >>> fig = BenchResult.load("bench.json").plot("transpose")  # doctest: +SKIP
        >>> fig.savefig("transpose.png")  # doctest: +SKIP
        """
        from . import _benchplot

        families = self.families if family is None else (family,)
        for name in families:
            if name not in FAMILIES:
                raise ValueError(f"unknown family {name!r}; choose from {', '.join(FAMILIES)}")
        if not families:
            raise ValueError("nothing to plot: the result has no measurements")
        return _benchplot.figure(self, families)

    def save_plots(self, path, *, dpi: int = 120) -> list[Path]:
        """Write one PNG per family; return the paths.

        With a single family the file is ``path``; with several, the family's name is added
        to the stem: ``bench.png`` becomes ``bench-transpose.png``, ``bench-matmul.png``, ...

        Examples
        --------
        >>> from gpukernels.benchmark import BenchResult
        >>> BenchResult.load("bench.json").save_plots("out/bench.png")  # doctest: +SKIP
        [PosixPath('out/bench-transpose.png'), PosixPath('out/bench-matmul.png')]
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        families = self.families
        if not families:
            raise ValueError("nothing to plot: the result has no measurements")
        written = []
        for family in families:
            target = path if len(families) == 1 else \
                path.with_name(f"{path.stem}-{family}{path.suffix or '.png'}")
            figure = self.plot(family)
            figure.savefig(target, dpi=dpi, bbox_inches="tight")
            written.append(target)
        return written


def format_table(rows: Iterable[Measurement]) -> str:
    """A plain-text table: one line per measurement, ratios to the in-run ceiling.

    Examples
    --------
    >>> from gpukernels.benchmark import Measurement, format_table
    >>> row = Measurement("sum", "two_pass", (2**28,), "int32", True, 0.395, 2718.6, "GB/s",
    ...                   ratio=1.275, ceiling="cupy.sum", notes={"call_ms": 0.401})
    >>> print(format_table([row]).splitlines()[-1])
    sum        two_pass                      268435456           int32     yes          0.395      0.401         2719 GB/s      1.275
    """
    header = (f"{'operation':9s}  {'method':28s}  {'shape':18s}  {'dtype':8s}  {'correct':7s}  "
              f"{'time ms':>9s}  {'call ms':>9s}  {'rate':>16s}  {'x ceiling':>9s}")
    lines = [header, "-" * len(header)]
    for r in rows:
        time_ms = f"{r.time_ms:9.3f}" if math.isfinite(r.time_ms) else f"{'':9s}"
        call_ms = f"{r.call_ms:9.3f}" if math.isfinite(r.call_ms) else f"{'':9s}"
        ratio = f"{r.ratio:9.3f}" if math.isfinite(r.ratio) else f"{'':9s}"
        lines.append(f"{r.operation:9s}  {r.method:28s}  {r.case:18s}  {r.dtype:8s}  "
                     f"{_status_label(r):7s}  {time_ms}  {call_ms}  {_rate_text(r):>16s}  {ratio}")
    return "\n".join(lines)


def write_json(rows: Iterable[Measurement], path, environment_: dict | None = None) -> None:
    """Write measurements with the environment they were taken in (the current one by default).

    Examples
    --------
    >>> from gpukernels.benchmark import main_job, write_json
    >>> write_json(main_job(quick=True), "main.json")  # doctest: +SKIP
    """
    BenchResult(rows, environment_ if environment_ is not None else environment()).save_json(path)


def parse_size(text: str) -> int:
    """An input size written as ``4096``, ``2**28``, ``2^28``, ``1e7`` or ``10**7``.

    Examples
    --------
    >>> from gpukernels.benchmark import parse_size
    >>> parse_size("2**28"), parse_size("2^10"), parse_size("1e7"), parse_size("8192")
    (268435456, 1024, 10000000, 8192)
    """
    text = text.strip().replace("^", "**")
    try:
        if "**" in text:
            base, exponent = text.split("**")
            value = int(base) ** int(exponent)
        elif "e" in text.lower():
            number = float(text)
            if number != int(number):
                raise ValueError
            value = int(number)
        else:
            value = int(text)
    except ValueError:
        raise ValueError(f"not a size: {text!r} (write e.g. 4096, 2**28 or 1e7)") from None
    if value < 1:
        raise ValueError(f"a size must be positive, not {text!r}")
    return value


def parse_shape(text: str) -> tuple[int, ...]:
    """A shape written as ``8191x8193`` or ``64x1024x1024`` (sizes as in :func:`parse_size`).

    Examples
    --------
    >>> from gpukernels.benchmark import parse_shape
    >>> parse_shape("64x1024x1024"), parse_shape("1x2**24")
    ((64, 1024, 1024), (1, 16777216))
    """
    parts = text.lower().replace(",", "x").split("x")
    return tuple(parse_size(part) for part in parts if part.strip())
