"""Benchmark results: measurements, the environment they were taken in, tables, JSON and plots."""

from __future__ import annotations

import datetime
import html
import json
import math
import platform
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy

from .._core import device as _device

__all__ = ["Measurement", "BenchResult", "format_table", "environment", "write_json"]

ROLES = ("ceiling", "rung", "library")


@dataclass
class Measurement:
    """One timed row: a rung, a ceiling or a library call on one input.

    Attributes
    ----------
    operation : str
        ``"transpose"``, ``"matmul"``, ``"sum"``, ...
    method : str
        The rung's name, or the ceiling's or library call's, e.g. ``"device copy"``.
    shape : tuple
        The input's shape; ``(M, K, N)`` for matmul.
    dtype : str
        The input's dtype, or a label such as ``"tf32"`` (float32 data on TF32 tensor cores).
    correct : bool or None
        Whether the output matched the independent result on the same data; None when not
        checked (the copy ceiling, or a candidate that did not run).
    time_ms : float
        Held time: the median device time of one call, its host time hidden (NaN when it did
        not run). See :mod:`gpukernels.benchmark.timing`.
    rate : float
        The work over ``time_ms``: GB/s or TFLOP/s (see ``unit``).
    unit : str
        ``"GB/s"`` or ``"TFLOP/s"``.
    ratio : float
        ``rate`` over the ceiling's held rate on the same input.
    ceiling : str
        The method ``ratio`` and ``call_ratio`` divide by.
    role : str
        ``"rung"``, ``"ceiling"`` or ``"library"``.
    notes : dict
        Extra facts: ``axis`` for reductions, ``runs`` and ``call_runs`` (timed calls),
        ``min_ms``, ``held`` (False when the call waits on the device, so ``time_ms`` is per
        call), ``input_bytes``, the reason a candidate was skipped or failed.
    status : str
        ``"ok"``, ``"wrong"``, ``"not supported"``, ``"skipped"`` (predicted too slow) or
        ``"error"`` (an exception).
    sweep : str
        Which series the case belongs to: ``"size"`` for the size sweep, else a label such as
        ``"odd"``, ``"stacked"``, ``"axis"`` or ``"main"``.
    ladder : str
        The operation's ladder (``"reduce"`` for sum, prod, min and max).
    call_ms : float
        Per-call time: the median of one call from Python, its host time included.
    call_rate, call_ratio : float
        The rate from ``call_ms``, and its ratio to the ceiling's per-call rate.
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
    role: str = "rung"
    notes: dict = field(default_factory=dict)
    status: str = "ok"
    sweep: str = "size"
    ladder: str = ""
    call_ms: float = float("nan")
    call_rate: float = float("nan")
    call_ratio: float = float("nan")

    @property
    def axis(self) -> Any:
        """The reduction axis (None for full reductions and other operations)."""
        axis = self.notes.get("axis")
        return tuple(axis) if isinstance(axis, list) else axis

    @property
    def case(self) -> str:
        """The input as one label, e.g. ``"8192x8192"``, ``"8192x8192 axis=0"``, for a
        permutation ``"256x512x512 axes=(2, 0, 1)"``, for a product whose operands are
        transposed views ``"1x8192x8192 b=W.T"`` or ``"4096x4096x4096 a=X.T b=W.T"``."""
        label = "x".join(str(s) for s in self.shape)
        if self.notes.get("axes") is not None:
            label += f" axes={tuple(self.notes['axes'])}"
        for operand in ("a", "b"):
            if self.notes.get(operand) is not None:
                label += f" {operand}={self.notes[operand]}"
        return label if self.axis is None else f"{label} axis={self.axis}"

    @property
    def size_bytes(self) -> int:
        """Bytes of the input (both operands for matmul)."""
        if "input_bytes" in self.notes:
            return int(self.notes["input_bytes"])
        itemsize = numpy.dtype("float32" if self.dtype == "tf32" else self.dtype).itemsize
        return math.prod(self.shape) * itemsize


def _status_label(row: Measurement) -> str:
    if row.status == "ok":
        return "-" if row.correct is None else ("yes" if row.correct else "NO")
    return {"wrong": "NO", "not supported": "n/s", "skipped": "skip",
            "error": "ERROR"}.get(row.status, row.status)


def _rate_text(rate: float, unit: str) -> str:
    if not math.isfinite(rate):
        return ""
    return f"{rate:.1f} {unit}" if rate < 100 else f"{rate:.0f} {unit}"


def _number(value: float, digits: int) -> str:
    return f"{value:.{digits}f}" if math.isfinite(value) else ""


def format_table(rows: Iterable[Measurement]) -> str:
    """A plain-text table: one line per measurement, with held and per-call times and ratios.

    Examples
    --------
    >>> from gpukernels.benchmark import Measurement, format_table
    >>> row = Measurement("sum", "two_pass", (2**28,), "int32", True, 0.395, 2718.6, "GB/s",
    ...                   ratio=1.275, ceiling="cupy.sum", call_ms=0.401, call_ratio=1.25)
    >>> print(format_table([row]).splitlines()[-1])
    sum        two_pass                      268435456           int32     yes          0.395      0.401         2719 GB/s      1.275      1.250
    """
    header = (f"{'operation':9s}  {'method':28s}  {'shape':18s}  {'dtype':8s}  {'correct':7s}  "
              f"{'held ms':>9s}  {'call ms':>9s}  {'rate (held)':>16s}  {'x ceil':>9s}  "
              f"{'per call':>9s}")
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(f"{r.operation:9s}  {r.method:28s}  {r.case:18s}  {r.dtype:8s}  "
                     f"{_status_label(r):7s}  {_number(r.time_ms, 3):>9s}  "
                     f"{_number(r.call_ms, 3):>9s}  {_rate_text(r.rate, r.unit):>16s}  "
                     f"{_number(r.ratio, 3):>9s}  {_number(r.call_ratio, 3):>9s}")
    return "\n".join(lines)


def _jsonable(value: Any) -> Any:
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


def _json_number(value: Any) -> Any:
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


_FLOAT_FIELDS = ("time_ms", "rate", "ratio", "call_ms", "call_rate", "call_ratio")


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
    ...                     2848.0, "GB/s", role="ceiling", ladder="transpose"),
    ...         Measurement("transpose", "shared", (8192, 8192), "float32", True, 0.25,
    ...                     2125.0, "GB/s", ratio=0.746, ceiling="device copy",
    ...                     ladder="transpose")]
    >>> result = BenchResult(rows, {"device": "NVIDIA H100 80GB HBM3"})
    >>> len(result), result.wrong
    (2, [])
    >>> result.filter(role="rung")[0].method
    'shared'
    """

    def __init__(self, measurements: Iterable[Measurement], environment: dict | None = None,
                 settings: dict | None = None) -> None:
        self.measurements = list(measurements)
        self.environment = dict(environment or {})
        self.settings = dict(settings or {})

    def __iter__(self):
        return iter(self.measurements)

    def __len__(self) -> int:
        return len(self.measurements)

    def __getitem__(self, index: Any) -> Any:
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
        settings: dict = {}
        for result in results:
            settings.update(result.settings)
        return cls(rows, environment, settings)

    @property
    def ladders(self) -> tuple[str, ...]:
        """The ladders present, in the order of their first row."""
        return tuple(dict.fromkeys(row.ladder or row.operation for row in self))

    @property
    def wrong(self) -> list[Measurement]:
        """Rows whose output was wrong or that raised an unexpected exception."""
        return [row for row in self if row.correct is False or row.status in ("wrong", "error")]

    def filter(self, **fields: Any) -> BenchResult:
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
        ladders = ", ".join(self.ladders) or "nothing"
        return f"<BenchResult: {len(self)} measurements ({ladders}) on {self.header()}>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # IPython's text display
        printer.text(repr(self) if cycle else str(self))

    def _repr_html_(self) -> str:
        columns = ["operation", "method", "shape", "dtype", "check", "held (ms)", "call (ms)",
                   "rate (held)", "x ceiling (held)", "x ceiling (per call)"]
        head = "".join(f"<th style='text-align:{'left' if i < 5 else 'right'}'>{c}</th>"
                       for i, c in enumerate(columns))
        body = []
        previous_case = None
        for row in self:
            case = (row.operation, row.case, row.dtype)
            border = "border-top:2px solid #999;" if previous_case not in (None, case) else ""
            previous_case = case
            method = html.escape(row.method) + ("" if row.role == "rung" else
                                                f" <small>({row.role})</small>")
            status = _status_label(row)
            color = {"NO": "#c00", "ERROR": "#c00", "n/s": "#888", "skip": "#888"}.get(status, "")
            reason = row.notes.get("error") or row.notes.get("reason") or ""
            status_html = (f"<span style='color:{color}' title='{html.escape(reason, True)}'>"
                           f"{status}</span>")
            ratios = []
            for value in (row.ratio, row.call_ratio):
                if math.isfinite(value):
                    width = min(value, 1.5) / 1.5 * 100
                    bar_color = "#4c72b0" if row.role == "rung" else "#aaa"
                    ratios.append(f"<div style='background:linear-gradient(to right,{bar_color}55 "
                                  f"{width:.0f}%,transparent {width:.0f}%);padding:0 4px'>"
                                  f"{value:.3f}</div>")
                else:
                    ratios.append("")
            cells = [row.operation, method, html.escape(row.case), row.dtype, status_html,
                     _number(row.time_ms, 3), _number(row.call_ms, 3),
                     _rate_text(row.rate, row.unit), *ratios]
            body.append(f"<tr style='{border}'>" + "".join(
                f"<td style='text-align:{'left' if i < 5 else 'right'}'>{c}</td>"
                for i, c in enumerate(cells)) + "</tr>")
        note = ("held: device time of one call, the host's time hidden; call: one call from "
                "Python on an idle GPU, host time included (what a user's code sees). x ceiling: "
                "the rate over the in-run ceiling's on the same input (device copy, cuBLAS, or "
                "CuPy's reduction), held and per call. check: the output matched an independent "
                "result on the same data (n/s: not supported, skip: predicted too slow).")
        return (f"<div><p><b>{html.escape(self.header())}</b></p>"
                f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
                f"<p><small>{note}</small></p></div>")

    def summary(self) -> str:
        """What the operations' benchmark specs sum up beyond the table ("" for nothing): for
        matmul's shape suite, the minimum and geometric mean of each rung's ratio to cuBLAS and
        the decode steps against a device copy.

        Examples
        --------
        >>> from gpukernels.benchmark import BenchResult
        >>> print(BenchResult.load("suite.json").summary())  # doctest: +SKIP
        """
        from .._core.ladder import OPERATIONS

        texts = []
        for name in dict.fromkeys(r.operation for r in self):
            op = OPERATIONS.get(name)
            if op is not None and op.bench.summary is not None:
                text = op.bench.summary([r for r in self if r.operation == name])
                if text:
                    texts.append(text)
        return "\n".join(texts)

    def to_markdown(self) -> str:
        """The rows as a Markdown table (for a README or a report).

        Examples
        --------
        >>> from gpukernels.benchmark import BenchResult
        >>> print(BenchResult([]).to_markdown())
        | operation | method | shape | dtype | check | held (ms) | call (ms) | rate (held) | x ceiling (held) | x ceiling (per call) |
        | --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |
        """
        lines = ["| operation | method | shape | dtype | check | held (ms) | call (ms) | "
                 "rate (held) | x ceiling (held) | x ceiling (per call) |",
                 "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
        for row in self:
            method = row.method if row.role == "rung" else f"{row.method} ({row.role})"
            method = method.replace("|", "\\|")
            lines.append(f"| {row.operation} | {method} | {row.case} | {row.dtype} | "
                         f"{_status_label(row)} | {_number(row.time_ms, 3)} | "
                         f"{_number(row.call_ms, 3)} | {_rate_text(row.rate, row.unit)} | "
                         f"{_number(row.ratio, 3)} | {_number(row.call_ratio, 3)} |")
        return "\n".join(lines)

    # JSON
    def to_dict(self) -> dict:
        """``{"environment", "settings", "measurements"}``, ready for :func:`json.dump`."""
        rows = []
        for row in self:
            entry = asdict(row)
            entry["shape"] = list(row.shape)
            for key in _FLOAT_FIELDS:
                entry[key] = _json_number(entry[key])
            entry["notes"] = _jsonable(entry["notes"])
            rows.append(entry)
        return {"environment": self.environment, "settings": _jsonable(self.settings),
                "measurements": rows}

    def save_json(self, path: Any) -> Path:
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
    def load(cls, path: Any) -> BenchResult:
        """Read a file written by :meth:`save_json` (or by ``--json``), e.g. to plot it again.

        Files from earlier versions load too (their ``kind`` is the ``role``, their per-call
        time is in the notes).

        Examples
        --------
        >>> from gpukernels.benchmark import BenchResult
        >>> result = BenchResult.load("benchmarks/results/bench.json")  # doctest: +SKIP
        >>> result.save_plots("bench.png")  # doctest: +SKIP
        """
        data = json.loads(Path(path).read_text())
        names = set(Measurement.__dataclass_fields__)
        rows = []
        for entry in data.get("measurements", []):
            entry = dict(entry)
            if "kind" in entry and "role" not in entry:
                entry["role"] = entry.pop("kind")
            if "call_ms" not in entry and "call_ms" in entry.get("notes", {}):
                entry["call_ms"] = entry["notes"]["call_ms"]
            entry = {k: v for k, v in entry.items() if k in names}
            entry["shape"] = tuple(entry["shape"])
            for key in _FLOAT_FIELDS:
                if entry.get(key) is None:
                    entry[key] = float("nan")
            rows.append(Measurement(**entry))
        if rows and not any(row.ladder for row in rows):  # an earlier version's file
            from .sweep import ladder_of

            for row in rows:
                row.ladder = ladder_of(row.operation)
        return cls(rows, data.get("environment", {}), data.get("settings", {}))

    # plots
    def plot(self, ladder: str | None = None) -> Any:
        """A matplotlib figure: rate against input size, one line per rung, the ceiling dashed.

        Parameters
        ----------
        ladder : str, optional
            Which ladder to draw (``"transpose"``, ``"matmul"``, ``"reduce"``); by default
            every ladder present, one row of panels each.

        Returns
        -------
        matplotlib.figure.Figure
            One panel per dtype (per operation and dtype for reductions, plus a bar chart of
            the axis cases). Size axes are logarithmic; the L2 size is marked. Inputs outside
            the sweep (odd shapes, stacks) appear as unconnected markers; a wrong result as a
            red cross.

        Examples
        --------
        >>> from gpukernels.benchmark import BenchResult
        >>> fig = BenchResult.load("bench.json").plot("transpose")  # doctest: +SKIP
        >>> fig.savefig("transpose.png")  # doctest: +SKIP
        """
        from . import plots

        ladders = self.ladders if ladder is None else (ladder,)
        for name in ladders:
            if name not in self.ladders:
                raise ValueError(f"the result has no {name!r} measurements; it has "
                                 f"{', '.join(self.ladders) or 'none'}")
        if not ladders:
            raise ValueError("nothing to plot: the result has no measurements")
        return plots.figure(self, ladders)

    def save_plots(self, path: Any, *, dpi: int = 120) -> list[Path]:
        """Write one PNG per ladder; return the paths.

        With a single ladder the file is ``path``; with several, the ladder's name is added to
        the stem: ``bench.png`` becomes ``bench-transpose.png``, ``bench-matmul.png``, ...

        Examples
        --------
        >>> from gpukernels.benchmark import BenchResult
        >>> BenchResult.load("bench.json").save_plots("out/bench.png")  # doctest: +SKIP
        [PosixPath('out/bench-transpose.png'), PosixPath('out/bench-matmul.png')]
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        ladders = self.ladders
        if not ladders:
            raise ValueError("nothing to plot: the result has no measurements")
        written = []
        for ladder in ladders:
            target = path if len(ladders) == 1 else \
                path.with_name(f"{path.stem}-{ladder}{path.suffix or '.png'}")
            self.plot(ladder).savefig(target, dpi=dpi, bbox_inches="tight")
            written.append(target)
        return written

    def plot_paths(self, path: Any) -> list[Path]:
        """The files :meth:`save_plots` would write for ``path``."""
        path = Path(path)
        if len(self.ladders) == 1:
            return [path]
        return [path.with_name(f"{path.stem}-{ladder}{path.suffix or '.png'}")
                for ladder in self.ladders]


def write_json(rows: Iterable[Measurement], path: Any, environment_: dict | None = None) -> None:
    """Write measurements with the environment they were taken in (the current one by default).

    Examples
    --------
    >>> from gpukernels.benchmark import main_job, write_json
    >>> write_json(main_job(quick=True), "main.json")  # doctest: +SKIP
    """
    BenchResult(rows, environment_ if environment_ is not None else environment()).save_json(path)


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
    from .. import __version__

    env.update({
        "driver": cupy.cuda.runtime.driverGetVersion(),
        "runtime": cupy.cuda.runtime.runtimeGetVersion(),
        "nvrtc": ".".join(map(str, cupy.cuda.nvrtc.getVersion())),
        "gpukernels": __version__,
        "cupy": cupy.__version__,
        "numpy": numpy.__version__,
        "python": platform.python_version(),
    })
    if "torch" in sys.modules:
        env["torch"] = sys.modules["torch"].__version__
    return env


def _nvml_clocks(device: Any) -> dict:
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
