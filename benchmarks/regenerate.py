"""Regenerate the committed results: the benchmark sweeps, their plots and the executed notebook.

Run on the GPU the results should describe (an H100 for the committed ones), from the
repository root, with the ``bench`` and ``test`` extras installed:

    python benchmarks/regenerate.py

It writes ``benchmarks/results/bench.json`` (every measurement, with the device, clocks,
versions and date), ``bench.txt`` (the table), ``bench.md`` (the README's summary of it),
``bench-transpose.png``, ``bench-matmul.png``, ``bench-reduce.png``, and executes
``notebooks/ladders.ipynb`` in place, so it is saved with its outputs. ``--out DIR`` and
``--notebook PATH`` write elsewhere; ``--quick`` runs the small sizes (for trying the script,
not for committing); ``--tables-only`` redoes the tables and plots from ``bench.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "ladders.ipynb"


#: Operations whose largest float32 input and (8192, 8192) along each axis the README shows.
ONE_READ = ("mean", "var", "std", "argmin", "argmax")


def headline(result):
    """The rows the README's table shows: the largest square transposes of each dtype and the
    shapes outside the sweep; every permutation; the largest square matmuls of each dtype and
    the odd one; full sums of the largest size and of 10**7 elements, and the sums over one
    axis; the largest float32 input of the moments and arg-reductions and (8192, 8192) along
    each axis; the largest cumsum of each dtype and every scan along an axis."""
    def largest(rows):
        return max((r.shape for r in rows if r.sweep == "size"), key=lambda s: s[0], default=None)

    transposes = result.filter(operation="transpose")
    products = result.filter(operation="matmul")
    n = largest(transposes)
    cases = {("transpose", n, dtype) for dtype in ("int8", "float32", "float64")}
    cases |= {("matmul", largest(products), dtype)
              for dtype in ("float32", "float16", "bfloat16", "tf32")}
    cases |= {(r.operation, r.shape, r.dtype) for r in transposes
              if r.sweep != "size" and r.dtype == "float32"}
    cases |= {(r.operation, r.shape, r.dtype) for r in products
              if r.sweep != "size" and r.dtype == "float32"}
    for operation, dtypes in (("sum", ("float32", "int32")), ("cumsum", ("float32", "int32"))):
        cases |= {(operation, largest(result.filter(operation=operation)), dtype)
                  for dtype in dtypes}
    cases |= {("sum", (10**7,), "int32")}
    cases |= {(operation, largest(result.filter(operation=operation)), "float32")
              for operation in ONE_READ}

    def shown(r):
        if (r.operation, r.shape, r.dtype) in cases:
            return True
        if r.operation in ("sum", "cumsum") and r.sweep == "axis":
            return True
        if r.operation in ONE_READ and r.sweep == "axis":
            return r.shape == (8192, 8192)
        return r.operation == "permute_dims"

    return type(result)([r for r in result if shown(r)], result.environment)


def _cell(row, role: str) -> str:
    """A table cell: the ceiling's per-call rate, or a candidate's ratios to it (per call /
    held)."""
    if row is None:
        return ""
    if row.status != "ok" or row.correct is False:
        return {"not supported": "n/s", "skipped": "skipped"}.get(row.status, row.status.upper())
    if role == "ceiling":
        rate = row.call_rate
        return f"{rate:.0f} {row.unit}" if rate >= 100 else f"{rate:.1f} {row.unit}"
    return f"{row.call_ratio:.2f} / {row.ratio:.2f}"


def summary_tables(result) -> str:
    """Markdown tables of :func:`headline`'s cases, one per operation: a row per input, the
    ceiling's per-call rate, then every other candidate as a fraction of the ceiling, per call
    and held."""
    tables = []
    selected = headline(result)
    order = {"ceiling": 0, "rung": 1}
    for operation in dict.fromkeys(r.operation for r in selected):
        rows = [r for r in selected if r.operation == operation]
        columns = list(dict.fromkeys(
            (r.method, r.role) for r in sorted(rows, key=lambda r: order.get(r.role, 2))))
        header = [f"{operation} input"] + [
            f"{method} (ceiling, per call)" if role == "ceiling" else method
            for method, role in columns]
        lines = ["| " + " | ".join(header) + " |",
                 "| --- |" + " ---: |" * len(columns)]
        for case in dict.fromkeys((r.case, r.dtype) for r in rows):
            cells = [f"{case[0]} {case[1]}"]
            for method, role in columns:
                match = [r for r in rows if (r.case, r.dtype, r.method) == (*case, method)]
                cells.append(_cell(match[0] if match else None, role))
            lines.append("| " + " | ".join(cells) + " |")
        tables.append("\n".join(lines))
    return "\n\n".join(tables)


#: The committed sweeps' timing: enough calls for stable medians, a few minutes in all.
TIMING = {"repeat": 100, "call_repeat": 100, "max_seconds": 0.2}


def run_sweeps(out: Path, quick: bool) -> int:
    from gpukernels import benchmark

    start = time.perf_counter()
    result = benchmark.bench(quick=quick,
                             timing=None if quick else benchmark.Timing(**TIMING))
    out.mkdir(parents=True, exist_ok=True)
    result.save_json(out / "bench.json")
    (out / "bench.txt").write_text(str(result) + "\n")
    (out / "bench.md").write_text(summary_tables(result) + "\n")
    written = result.save_plots(out / "bench.png")
    print(f"sweeps: {len(result)} measurements in {time.perf_counter() - start:.0f} s; wrote "
          f"{out / 'bench.json'}, {out / 'bench.txt'}, {out / 'bench.md'}, "
          + ", ".join(map(str, written)))
    for row in result.wrong:
        print(f"WRONG: {row.operation}/{row.method} {row.case} {row.dtype} {row.notes}")
    return 1 if result.wrong else 0


def redo_tables(out: Path) -> None:
    """Rewrite bench.txt, bench.md and the plots from bench.json (no GPU needed)."""
    from gpukernels.benchmark import BenchResult

    result = BenchResult.load(out / "bench.json")
    (out / "bench.txt").write_text(str(result) + "\n")
    (out / "bench.md").write_text(summary_tables(result) + "\n")
    result.save_plots(out / "bench.png")


def execute_notebook(source: Path, target: Path, timeout: int = 900) -> None:
    import nbclient
    import nbformat

    start = time.perf_counter()
    notebook = nbformat.read(source, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                                     resources={"metadata": {"path": str(ROOT)}})
    client.execute()
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)
    print(f"notebook: executed {source.name} in {time.perf_counter() - start:.0f} s; "
          f"wrote {target}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results",
                        help="folder for bench.json, bench.txt and the PNGs")
    parser.add_argument("--notebook", type=Path, default=NOTEBOOK,
                        help="where to write the executed notebook (default: in place)")
    parser.add_argument("--quick", action="store_true", help="small sizes, to try the script")
    parser.add_argument("--skip-sweeps", action="store_true", help="only execute the notebook")
    parser.add_argument("--skip-notebook", action="store_true", help="only run the sweeps")
    parser.add_argument("--tables-only", action="store_true",
                        help="only rewrite bench.txt, bench.md and the plots from bench.json")
    args = parser.parse_args(argv)
    if args.tables_only:
        redo_tables(args.out)
        return 0
    status = 0
    if not args.skip_sweeps:
        status = run_sweeps(args.out, args.quick)
    if not args.skip_notebook:
        execute_notebook(NOTEBOOK, args.notebook)
    return status


if __name__ == "__main__":
    sys.exit(main())
