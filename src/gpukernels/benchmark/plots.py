"""Figures of benchmark results: rate against input size, one line per rung, the ceiling dashed.

Used by :meth:`gpukernels.benchmark.BenchResult.plot`; needs matplotlib (the ``bench`` extra).
Titles and axes come from each operation's benchmark spec in the registry.
Figures are made without pyplot, so scripts need no display and nothing accumulates in
pyplot's figure list; in IPython they display inline like any figure.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._core.ladder import BenchSpec
    from .results import BenchResult, Measurement

MARKERS_FOR_EXTRA_CASES = ("D", "s", "^", "v", "P", "*", "X", "h")
PANEL_SIZE = (5.4, 3.9)  # inches
RUNG_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
               "#17becf", "#bcbd22", "#7f7f7f")
CEILING_COLOR = "black"
LIBRARY_COLOR = "0.5"



def _spec(operation: str) -> BenchSpec | None:
    """The benchmark spec of an operation, or None for one this version does not have."""
    from .._core.ladder import OPERATIONS

    op = OPERATIONS.get(operation)
    return op.bench if op is not None else None


def _y_label(rows: Sequence[Measurement]) -> str:
    spec = _spec(rows[0].operation)
    unit = rows[0].unit
    return f"{unit} ({spec.work})" if spec is not None else unit


def _is_cube(row: Measurement) -> bool:
    spec = _spec(row.operation)
    return spec.x_axis == "cube" if spec is not None else row.unit == "TFLOP/s"


def _require_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ImportError(
            "plotting needs matplotlib: pip install 'gpukernels[bench]' (or pip install "
            "matplotlib)") from None


def _enable_inline_display() -> None:
    """In IPython, make sure figures display as PNG even if pyplot was never imported."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return
    from IPython.core.pylabtools import print_figure
    from matplotlib.figure import Figure

    formatter = shell.display_formatter.formatters["image/png"]
    try:
        formatter.lookup_by_type(Figure)
    except KeyError:
        formatter.for_type(Figure, lambda fig: print_figure(fig, "png", bbox_inches="tight"))


# --- what goes where -------------------------------------------------------------------------------

def _panels(result: BenchResult, ladder: str) -> list[tuple[int, int, str, str, list]]:
    """(row, column, kind of panel, title, measurements) for each panel of a ladder's grid: a
    row per operation when several share the ladder, a panel per dtype, and a bar chart of the
    inputs reduced over some axes; a ladder timed on named inputs alone (the permutations) is
    one bar chart of them."""
    rows = [r for r in result if (r.ladder or r.operation) == ladder]
    operations = list(dict.fromkeys(r.operation for r in rows))
    panels = []
    if len(operations) > 1 or any(r.axis is not None for r in rows):
        for i, operation in enumerate(operations):
            mine = [r for r in rows if r.operation == operation]
            full = [r for r in mine if r.axis is None]
            column = 0
            for dtype in dict.fromkeys(r.dtype for r in full):
                panels.append((i, column, "sweep", f"{operation}, {dtype}",
                               [r for r in full if r.dtype == dtype]))
                column += 1
            partial = [r for r in mine if r.axis is not None]
            if partial:
                listed = ", ".join(dict.fromkeys(r.dtype for r in partial))
                panels.append((i, column, "axis", f"{operation} over some axes, {listed}",
                               partial))
        return panels
    suite = any(r.sweep == "suite" for r in rows)  # matmul's shape suite: ratios, not rates
    if rows and not suite and not any(r.sweep == "size" for r in rows):
        listed = ", ".join(dict.fromkeys(r.dtype for r in rows))  # named inputs: a bar each
        return [(0, 0, "axis", f"{operations[0]} by input, {listed}", rows)]
    dtypes = list(dict.fromkeys(r.dtype for r in rows))
    columns = 2 if len(dtypes) > 2 else len(dtypes)
    for i, dtype in enumerate(dtypes):
        mine = [r for r in rows if r.dtype == dtype]
        ceiling = next((r.method for r in mine if r.role == "ceiling"), "the ceiling")
        panels.append((i // columns, i % columns, "suite" if suite else "sweep",
                       f"{dtype}, ratio to {ceiling}" if suite else dtype, mine))
    return panels


def _x(row: Measurement) -> float:
    if _is_cube(row):
        return math.prod(row.shape) ** (1 / 3)
    return float(row.size_bytes)


def _format_bytes(value: float, _position: Any = None) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size:
            number = value / size
            return f"{number:.0f} {unit}" if number >= 1 and number == round(number) \
                else f"{number:.3g} {unit}"
    return f"{value:.0f} B"


def _method_order(rows: Sequence, ladder: Sequence[str]) -> list[tuple[str, str]]:
    """(method, role): ceilings, then rungs bottom first, then library calls."""
    seen = dict.fromkeys((r.method, r.role) for r in rows)
    rank = {"ceiling": 0, "rung": 1, "library": 2}

    def key(item):
        method, role = item
        position = ladder.index(method) if method in ladder else len(ladder)
        return rank.get(role, 3), position

    return sorted(seen, key=key)


def _style(method: str, role: str, ladder: Sequence[str], first_ceiling: bool) -> dict:
    if role == "ceiling":
        if first_ceiling:
            return {"color": CEILING_COLOR, "linestyle": "--", "linewidth": 2.2, "marker": None}
        return {"color": "0.35", "linestyle": ":", "linewidth": 1.2, "marker": None}
    if role == "library":
        return {"color": LIBRARY_COLOR, "linestyle": ":", "linewidth": 1.8, "marker": "s",
                "markersize": 4}
    index = ladder.index(method) if method in ladder else len(ladder)
    return {"color": RUNG_COLORS[index % len(RUNG_COLORS)], "linestyle": "-", "linewidth": 1.8,
            "marker": "o", "markersize": 4}


def _legend_rank(method: str, role: str, ladder: Sequence[str]) -> tuple[int, int]:
    """Legend order: ceilings, rungs bottom first, library calls, then the L2 and markers."""
    if role == "rung":
        return 1, ladder.index(method) if method in ladder else len(ladder)
    return (0, 0) if role == "ceiling" else (2, 0)


def _label(method: str, role: str, several_operations: bool) -> str:
    """A legend label; where several operations share a panel grid (the reductions), library
    calls are named by their library, so that cupy.sum and cupy.min share one entry."""
    if several_operations and role != "rung":
        library = "CuPy" if method.startswith("cupy.") else method.split(".")[0].capitalize()
        if library == "Torch":
            library = "PyTorch"
        return f"{library}" + (" (ceiling)" if role == "ceiling" else "")
    if role != "ceiling":
        return method
    return f"{method}, ceiling" if "(" in method else f"{method} (ceiling)"


# --- drawing ---------------------------------------------------------------------------------------

def _draw_sweep(ax: Any, rows: Sequence, several: bool, ladder: Sequence[str], environment: dict,
                legend: dict, extra_markers: dict) -> None:
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

    sweeps = [r.sweep for r in rows]
    line_sweep = "size" if "size" in sweeps else max(set(sweeps), key=sweeps.count)
    first_ceiling = True
    cube = _is_cube(rows[0])
    for method, role in _method_order(rows, ladder):
        mine = [r for r in rows if r.method == method and r.role == role]
        style = _style(method, role, ladder, first_ceiling)
        if role == "ceiling":
            first_ceiling = False
        label = _label(method, role, several)
        missing = [r for r in mine if r.sweep == line_sweep and not math.isfinite(r.rate)]
        if missing:  # e.g. "naive (skipped at 8192)": the line stops short
            statuses = ", ".join(dict.fromkeys(r.status for r in missing))
            where = ", ".join(str(round(_x(r))) if cube else r.case
                              for r in sorted(missing, key=_x))
            label += f" ({statuses} at {where})"
        line = sorted((r for r in mine if r.sweep == line_sweep), key=_x)
        if line:
            (handle,) = ax.plot([_x(r) for r in line], [r.rate for r in line], **style)
            legend.setdefault(label, (_legend_rank(method, role, ladder), handle))
        for r in mine:
            if r.sweep == line_sweep or not math.isfinite(r.rate):
                continue
            marker = extra_markers.setdefault(
                r.case, MARKERS_FOR_EXTRA_CASES[len(extra_markers) % len(MARKERS_FOR_EXTRA_CASES)])
            ax.plot([_x(r)], [r.rate], linestyle="none", marker=marker, markersize=7,
                    markerfacecolor="none", markeredgewidth=1.5, color=style["color"])
        for r in mine:
            if r.correct is False and math.isfinite(r.rate):
                (handle,) = ax.plot([_x(r)], [r.rate], linestyle="none", marker="x",
                                    markersize=11, markeredgewidth=2.5, color="red")
                legend.setdefault("wrong result", ((5, 0), handle))

    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)
    ax.grid(True, which="major", alpha=0.3)
    if cube:
        sizes = sorted({round(_x(r)) for r in rows if r.sweep == line_sweep})
        ax.xaxis.set_major_locator(FixedLocator(sizes))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f}"))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("n (an n x n by n x n product)")
    else:
        ax.xaxis.set_major_locator(LogLocator(base=4))
        ax.xaxis.set_major_formatter(FuncFormatter(_format_bytes))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("input size")
        l2 = environment.get("l2_bytes")
        if l2:
            handle = ax.axvline(l2, color="0.6", linestyle="-.", linewidth=1)
            legend.setdefault(f"L2 cache ({_format_bytes(l2)})", ((4, 0), handle))
    ax.set_ylabel(_y_label(rows))


def _draw_suite(ax: Any, rows: Sequence, ladder: Sequence[str], legend: dict) -> None:
    """The shape suite: each rung's ratio to the ceiling against the product's work (2·M·N·K),
    held as filled dots, per call as rings; the ceiling is the line at 1."""
    from matplotlib.ticker import LogLocator, NullLocator

    handle = ax.axhline(1.0, color=CEILING_COLOR, linestyle="--", linewidth=1)
    legend.setdefault("ceiling (ratio 1)", ((0, 0), handle))
    for method, role in _method_order(rows, ladder):
        if role == "ceiling":
            continue
        mine = [r for r in rows if r.method == method and r.role == role and r.status == "ok"
                and math.isfinite(r.ratio)]
        if not mine:
            continue
        color = _style(method, role, ladder, False)["color"]
        flops = [2.0 * math.prod(r.shape) for r in mine]
        (held,) = ax.plot(flops, [r.ratio for r in mine], linestyle="none", marker="o",
                          markersize=4, color=color, alpha=0.8)
        (call,) = ax.plot(flops, [r.call_ratio for r in mine], linestyle="none", marker="o",
                          markersize=5, markerfacecolor="none", color=color, alpha=0.6)
        legend.setdefault(f"{method}, held", (_legend_rank(method, role, ladder), held))
        legend.setdefault(f"{method}, per call", (_legend_rank(method, role, ladder), call))
    ax.set_xscale("log", base=10)
    ax.xaxis.set_major_locator(LogLocator(base=10))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_yscale("log", base=2)
    ax.grid(True, which="major", alpha=0.3)
    ax.set_xlabel("work of the product (2·M·N·K flops)")
    ax.set_ylabel("ratio to the ceiling")


def _draw_axis_cases(ax: Any, rows: Sequence, several: bool, ladder: Sequence[str],
                     legend: dict) -> None:
    cases = list(dict.fromkeys(r.case for r in rows))
    methods = _method_order(rows, ladder)
    height = 0.8 / max(len(methods), 1)
    first_ceiling = True
    for j, (method, role) in enumerate(methods):
        style = _style(method, role, ladder, first_ceiling)
        if role == "ceiling":
            first_ceiling = False
        color = "0.25" if role == "ceiling" else style["color"]
        label = _label(method, role, several)
        for i, case in enumerate(cases):
            match = [r for r in rows if r.case == case and r.method == method and r.role == role]
            if not match:
                continue
            r = match[0]
            y = i - 0.4 + height * (j + 0.5)
            if math.isfinite(r.rate):
                bars = ax.barh(y, r.rate, height=height * 0.9, color=color,
                               hatch="//" if role == "library" else None,
                               edgecolor="white" if role == "library" else color)
                legend.setdefault(label, (_legend_rank(method, role, ladder), bars))
                if r.correct is False:
                    ax.plot([r.rate], [y], marker="x", color="red", markersize=9,
                            markeredgewidth=2)
    for i, case in enumerate(cases):  # one note per case for the rungs that did not run
        missing: dict[str, list[str]] = {}
        for r in rows:
            if r.case == case and not math.isfinite(r.rate):
                missing.setdefault(r.status, []).append(r.method)
        if missing:
            note = "; ".join(f"{status}: {', '.join(methods)}"
                             for status, methods in missing.items())
            ax.text(0, i, f" {note}", va="center", fontsize=7.5, color="0.35")
    ax.set_yticks(range(len(cases)), cases)
    ax.invert_yaxis()
    ax.set_xlim(left=0)
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_xlabel(_y_label(rows))


def _draw_ladder(container: Any, result: BenchResult, ladder_name: str) -> None:
    from .._core.ladder import OPERATIONS

    panels = _panels(result, ladder_name)
    several = len({p[4][0].operation for p in panels}) > 1
    nrows = max(p[0] for p in panels) + 1
    ncols = max(p[1] for p in panels) + 1
    axes = container.subplots(nrows, ncols, squeeze=False)
    legend: dict = {}
    extra_markers: dict = {}
    used = set()
    for row, column, panel, title, rows in panels:
        ax = axes[row][column]
        used.add((row, column))
        op = OPERATIONS.get(rows[0].operation)
        if op is not None:
            ladder = op.ladder.names
        else:  # a result from another version: order rungs as they come
            ladder = tuple(dict.fromkeys(r.method for r in rows if r.role == "rung"))
        if panel == "axis":
            _draw_axis_cases(ax, rows, several, ladder, legend)
        elif panel == "suite":
            _draw_suite(ax, rows, ladder, legend)
        else:
            _draw_sweep(ax, rows, several, ladder, result.environment, legend, extra_markers)
        ax.set_title(title, fontsize=11)
    for row in range(nrows):
        for column in range(ncols):
            if (row, column) not in used:
                axes[row][column].set_visible(False)

    from matplotlib.lines import Line2D

    ordered = sorted(legend.items(), key=lambda item: item[1][0])
    handles = [handle for _, (_, handle) in ordered]
    labels = [label for label, _ in ordered]
    for case, marker in extra_markers.items():
        handles.append(Line2D([], [], linestyle="none", marker=marker, markerfacecolor="none",
                              markeredgewidth=1.5, color="0.3", markersize=7))
        labels.append(f"{case} (outside the sweep)")
    container.legend(handles, labels, loc="outside right center", fontsize=9, frameon=False)
    env = result.environment
    subtitle = " · ".join(str(part) for part in (env.get("device"), env.get("date", "")[:10])
                          if part)
    spec = _spec(panels[0][4][0].operation)
    title = spec.title if spec is not None and spec.title else ladder_name
    if panels[0][2] == "suite":
        title = f"{ladder_name}: the shape suite, each product's ratio to the ceiling"
    container.suptitle(f"{title}\n{subtitle}" if subtitle else title, fontsize=12)


def figure(result: BenchResult, ladders: Sequence[str]) -> Any:
    """A figure with a block of panels per ladder (see BenchResult.plot)."""
    _require_matplotlib()
    from matplotlib.figure import Figure

    _enable_inline_display()
    shapes = []
    for ladder in ladders:
        panels = _panels(result, ladder)
        if not panels:
            raise ValueError(f"the result has no {ladder} measurements")
        shapes.append((max(p[0] for p in panels) + 1, max(p[1] for p in panels) + 1))
    width = max(columns for _, columns in shapes) * PANEL_SIZE[0] + 2.6
    heights = [rows * PANEL_SIZE[1] + 0.9 for rows, _ in shapes]
    fig = Figure(figsize=(width, sum(heights)), layout="constrained")
    if len(ladders) == 1:
        _draw_ladder(fig, result, ladders[0])
    else:
        # Two or more rows: an array of SubFigures (one row would be a SubFigure).
        subfigures: Any = fig.subfigures(len(ladders), 1, height_ratios=heights)
        for subfigure, ladder in zip(subfigures, ladders):
            _draw_ladder(subfigure, result, ladder)
    return fig
