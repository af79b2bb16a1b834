"""Sweeps: every rung of every operation, timed against ceilings measured in the same run.

A :class:`Case` is one input of one operation: a shape, a dtype and options (a reduction's axis,
a product's precision). For each case the operation's benchmark spec
(:class:`~gpukernels._core.ladder.BenchSpec`, in ``ops/<name>/check.py``) allocates the data
once and gives the *candidates*: the ceiling, each rung of the ladder and the library peers,
each with a check of its output against an independent result on the same data. Every
candidate runs once and is checked, then timed per call and held
(:mod:`~gpukernels.benchmark.timing`); a rung that is fast but wrong is flagged, never hidden.
Nothing here names an operation: the sweeps iterate :data:`gpukernels._core.ladder.OPERATIONS`.
"""

from __future__ import annotations

import math
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy

from .._core import device as _device
from .._core.ladder import OPERATIONS, Operation, ladders
from .results import BenchResult, Measurement, _jsonable, environment
from .timing import QUICK_TIMING, Timing, synchronize, time_call

__all__ = ["Case", "Candidate", "bench", "main_job", "targets", "resolve_targets",
           "split_methods", "parse_size", "parse_shape", "ladder_of", "run_case"]


@dataclass(frozen=True)
class Case:
    """One input of one operation.

    Attributes
    ----------
    operation : str
    shape : tuple
        The input's shape; ``(M, K, N)`` for matmul.
    dtype : str
        A dtype name, or a label the operation understands (``"tf32"``).
    sweep : str
        The series: ``"size"`` for the size sweep, else ``"odd"``, ``"stacked"``, ``"axis"``,
        ``"shape"`` or ``"main"``.
    options : tuple of (name, value)
        The operation's other arguments for this input, e.g. ``(("axis", 0),)``.
    """

    operation: str
    shape: tuple
    dtype: str
    sweep: str = "size"
    options: tuple = ()

    @property
    def kwargs(self) -> dict:
        return dict(self.options)

    @property
    def label(self) -> str:
        text = f"{self.operation} {'x'.join(map(str, self.shape))} {self.dtype}"
        extra = ", ".join(f"{k}={v}" for k, v in self.options)
        return f"{text} {extra}" if extra else text


@dataclass
class Candidate:
    """Something timed on a case: a rung, the ceiling or a library call.

    ``run`` is None when the candidate does not take this input (``reason`` says why); ``check``
    is None when there is no output to check (a device copy).
    """

    method: str
    role: str
    run: Callable[[], Any] | None
    check: Callable[[Any], bool] | None
    reason: str = ""


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


def ladder_of(operation: str) -> str:
    """The ladder an operation belongs to (its own name if the package does not know it)."""
    op = OPERATIONS.get(operation)
    return op.ladder.name if op is not None else operation


def run_case(case: Case, candidates: list[Candidate], work: float, unit: str, timing: Timing,
             predictor: _Predictor, notes: dict | None = None) -> list[Measurement]:
    """Run, check and time every candidate of one case; ratios are to its first ceiling.

    ``work`` is the case's GB (moved or read) or TFLOP; rate = work / seconds.
    """
    rows = []
    ladder = ladder_of(case.operation)
    for candidate in candidates:
        row = Measurement(case.operation, candidate.method, tuple(case.shape), case.dtype, None,
                          float("nan"), float("nan"), unit, role=candidate.role,
                          notes=dict(notes or {}), sweep=case.sweep, ladder=ladder)
        rows.append(row)
        if candidate.run is None:
            row.status = "not supported"
            row.notes["reason"] = candidate.reason
            continue
        key = (case.operation, candidate.method, case.dtype, case.sweep, repr(row.axis))
        predicted = predictor.predict_ms(key, work)
        if predicted > timing.max_call_ms:
            row.status = "skipped"
            row.notes["reason"] = (f"predicted {predicted:.0f} ms per call from the previous size "
                                   f"(limit {timing.max_call_ms:g} ms)")
            continue
        try:
            start = time.perf_counter()
            output = candidate.run()
            synchronize()
            first_call_ms = (time.perf_counter() - start) * 1e3
        except Exception as exc:  # a crashing rung is reported, and the sweep goes on
            row.status = "error"
            row.correct = False
            row.notes["error"] = f"{type(exc).__name__}: {exc}"
            synchronize()
            continue
        if candidate.check is not None:
            row.correct = bool(candidate.check(output))
            row.status = "ok" if row.correct else "wrong"
        del output
        timed = time_call(candidate.run, timing, first_call_ms)
        row.time_ms, row.call_ms = timed.pop("time_ms"), timed.pop("call_ms")
        row.notes.update(timed)
        row.rate = work / (row.time_ms / 1e3)
        row.call_rate = work / (row.call_ms / 1e3)
        predictor.record(key, work, row.time_ms)
    ceiling = next((r for r in rows if r.role == "ceiling" and math.isfinite(r.rate)), None)
    if ceiling is not None:
        for row in rows:
            row.ceiling = ceiling.method
            row.ratio = row.rate / ceiling.rate
            row.call_ratio = row.call_rate / ceiling.call_rate
    return rows


# --- choosing what to run ------------------------------------------------------------------------

def targets() -> tuple[str, ...]:
    """What ``bench`` accepts: ``"all"``, every ladder and every operation."""
    names = ["all"] + list(ladders())
    return tuple(dict.fromkeys(names + list(OPERATIONS)))


def resolve_targets(names: Iterable[str] | str) -> tuple[Operation, ...]:
    """The operations that targets name: ``"all"``, a ladder (``"reduce"``: its operations) or
    an operation; ValueError for anything else."""
    if isinstance(names, str):
        names = (names,)
    chosen: dict[str, Operation] = {}
    for name in names:
        if name == "all":
            chosen.update(OPERATIONS)
        elif name in OPERATIONS:
            chosen[name] = OPERATIONS[name]
        elif name in ladders():
            chosen.update((op.name, op) for op in OPERATIONS.values() if op.ladder.name == name)
        else:
            raise ValueError(f"unknown benchmark target {name!r}; choose from "
                             f"{', '.join(targets())}")
    return tuple(chosen.values())


def split_methods(operations: Sequence[str], methods: Iterable[str] | None) -> dict:
    """Each operation's share of a list of rung names (None: every rung of every operation).

    A name may belong to several ladders (``naive``); one that belongs to none raises ValueError.

    Examples
    --------
    >>> from gpukernels.benchmark import split_methods
    >>> split_methods(["transpose", "matmul"], ["naive", "shared"])
    {'transpose': ('naive', 'shared'), 'matmul': ('naive',)}
    """
    if methods is None:
        return {name: None for name in operations}
    methods = tuple(methods)
    rungs = {name: set(OPERATIONS[name].ladder.names) | {"auto"} for name in operations}
    unknown = [m for m in methods if not any(m in names for names in rungs.values())]
    if unknown:
        known = sorted(set().union(*rungs.values()))
        raise ValueError(f"unknown method(s) {', '.join(unknown)}; the ladders of "
                         f"{', '.join(operations)} have {', '.join(known)}")
    return {name: tuple(m for m in OPERATIONS[name].ladder.names + ("auto",) if m in methods)
            for name in operations}


class _Progress:
    """A progress bar (tqdm.auto: a widget in notebooks, text elsewhere), text lines, or nothing."""

    def __init__(self, total: int, progress: Any, description: str) -> None:
        self._bar = None
        self._print: Callable[[str], Any] | None = None
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


def _execute(work: list[tuple[Operation, Case, tuple[str, ...], dict]], timing: Timing,
             progress: Any, description: str, seed: int | None, settings: dict) -> BenchResult:
    _device.require_gpu()
    cupy = _device.cupy
    seeds = numpy.random.SeedSequence(seed)
    predictor = _Predictor()
    rows: list[Measurement] = []
    bar = _Progress(len(work), progress, description)
    try:
        for (op, case, methods, options), case_seed in zip(
                work, seeds.generate_state(max(len(work), 1))):
            bar.start(case.label)
            candidates, amount, notes = op.bench.candidates(case, methods, int(case_seed),
                                                            **options)
            rows += run_case(case, candidates, amount, op.bench.unit, timing, predictor, notes)
            del candidates
            cupy.get_default_memory_pool().free_all_blocks()  # each case starts with free memory
            bar.done()
    finally:
        bar.close()
    settings = dict(settings, timing=asdict(timing), seed=seeds.entropy)
    return BenchResult(rows, environment(), settings)


def _ladder_methods(op: Operation, requested: tuple[str, ...] | None) -> tuple[str, ...]:
    if requested is None:
        return op.ladder.names
    return tuple(m for m in op.ladder.names + ("auto",) if m in requested)


def bench(target: Iterable[str] | str = "all", *, sizes: Iterable[int] | None = None,
          dtypes: Iterable[Any] | None = None, methods: Iterable[str] | None = None,
          shapes: Iterable[tuple] | None = None, timing: Timing | None = None,
          quick: bool = False, progress: Any = True, seed: int | None = None,
          **options: Any) -> BenchResult:
    """Time every rung of the chosen operations over their sweeps, next to the ceiling and the
    library equivalents measured in the same run.

    Parameters
    ----------
    target : str or iterable of str
        ``"all"`` (default), a ladder (``"transpose"``, ``"matmul"``, ``"reduce"``: every
        reduction) or an operation (``"sum"``, ...); several may be given.
    sizes : iterable of int, optional
        The sweep: the side n of n x n matrices (transpose), of n x n x n products (matmul),
        or element counts (reductions). Each operation has its default.
    dtypes : iterable of dtype, optional
        By default each operation's (``"tf32"`` for matmul: float32 data on the TF32 tensor
        cores, against cuBLAS TF32 through PyTorch).
    methods : iterable of str, optional
        Rungs to time (by default every rung); ceilings and peers are always timed.
    shapes : iterable of tuple, optional
        Extra inputs outside the sweep (plotted as markers); ``()`` for none.
    timing : Timing, optional
        Repeats, warm-up and time limits.
    quick : bool
        Small default inputs and few repeats, for a smoke run (they fit in the L2: not for
        reporting).
    progress : bool or callable
        A progress bar (``tqdm.auto``) when True; a callable receives one line per case.
    seed : int, optional
        Seed of the random inputs (recorded in the result's settings).
    **options
        An operation's own options, e.g. for reductions ``axis_cases``, ``axis_dtype`` and
        ``torch``, for matmul ``suite``, ``a_transposed`` (A as the transposed view of a
        row-major K x M array: ``X.T @ Y``) and ``b_transposed`` (B as that of a row-major N x
        K array: ``x @ W.T``); see ``python -m gpukernels bench --help``. An
        operation ignores the ones it does not declare.

    Returns
    -------
    BenchResult
        Held and per-call times, rates and ratios to the in-run ceiling, one row per candidate
        and input.

    Examples
    --------
    >>> from gpukernels import benchmark
    >>> result = benchmark.bench("transpose", sizes=(2048, 8192), dtypes=("float32",))  # doctest: +SKIP
    >>> result                      # a table in Jupyter: times, GB/s, ratios to the copy  # doctest: +SKIP
    >>> result.plot()               # GB/s against size, one line per rung  # doctest: +SKIP
    """
    operations = resolve_targets(target)
    wanted = split_methods([op.name for op in operations], methods)
    given = {"sizes": sizes, "dtypes": dtypes, "shapes": shapes}
    work = []
    settings: dict = {}
    for op in operations:
        spec = op.bench
        if wanted[op.name] == ():  # the requested rungs are all in other ladders
            continue
        inputs = dict(spec.defaults)
        if quick:
            inputs.update(spec.quick)
        inputs.update({k: v for k, v in given.items() if v is not None})
        inputs.update({k: v for k, v in options.items() if k in spec.options})
        inputs = {k: tuple(v) if isinstance(v, (list, tuple)) else v for k, v in inputs.items()}
        methods_here = _ladder_methods(op, wanted[op.name])
        case_options = {k: v for k, v in inputs.items() if k in spec.options}
        for case in spec.cases(op.name, **inputs):
            work.append((op, case, methods_here, case_options))
        settings[op.name] = _jsonable(dict(inputs, methods=methods_here))
    unknown = set(options) - {name for op in operations for name in op.bench.options}
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join(sorted(unknown))} for "
                         f"{', '.join(op.name for op in operations)}")
    description = ", ".join(dict.fromkeys(op.ladder.name for op in operations))
    return _execute(work, timing or (QUICK_TIMING if quick else Timing()), progress,
                    description, seed, settings)


def main_job(target: Iterable[str] | str = "all", *, quick: bool = False, progress: Any = print,
             timing: Timing | None = None) -> list[Measurement]:
    """The table of ``python -m gpukernels``: every rung of every operation checked against
    NumPy and timed next to its ceiling.

    Each rung is checked on the timed data, and again against NumPy on a small odd input of
    fresh random data (:func:`gpukernels.validation.check`): a wrong rung is marked ``NO``.

    Parameters
    ----------
    target : str or iterable of str
        As for :func:`bench`; every operation by default.
    quick : bool
        Sizes that fit in the L2, for a smoke run.
    progress : bool or callable
        As for :func:`bench`; by default one line per case through ``print``.
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
    operations = resolve_targets(target)
    work: list[tuple[Operation, Case, tuple[str, ...], dict]] = [
        (op, case, op.ladder.names, {}) for op in operations
            for case in op.bench.main_cases(op.name, quick)]
    timing = timing or Timing(repeat=30, call_repeat=30, warmup=5, max_seconds=2.0,
                              max_call_ms=math.inf)
    rows = _execute(work, timing, progress, "checking", None, {}).measurements
    _numpy_checks(rows)
    return rows


def _numpy_checks(rows: list[Measurement]) -> None:
    """Also compare each rung with NumPy on a small odd input, once per (operation, rung,
    dtype), and each rung the timed rows missed (a rung that does not take the timed input)
    on the operation's own check dtypes."""
    from ..validation import check

    verdicts: dict[tuple, Any] = {}
    for row in rows:
        if row.role != "rung" or row.status not in ("ok", "wrong"):
            continue
        op = OPERATIONS[row.operation]
        key = (row.operation, row.method, row.dtype)
        if key not in verdicts:
            shape = op.check_shapes.get(row.method, op.check_shape)
            verdicts[key] = check(row.operation, row.method, shape, row.dtype)
        verdict = verdicts[key]
        row.notes["numpy_check"] = str(verdict)
        if not verdict.ok:
            row.correct = False
            row.status = "wrong"


# --- sizes and shapes on the command line ------------------------------------------------------------

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
