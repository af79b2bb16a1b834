"""``python -m gpukernels``: check and time every rung; ``bench``, ``describe`` and ``plot``."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

EXAMPLES = """\
examples:
  python -m gpukernels                      check and time every rung (exit 1 if one is wrong)
  python -m gpukernels bench transpose --sizes 2048 8192 --dtypes float32
  python -m gpukernels bench all --json out/bench.json --plot out/bench.png
  python -m gpukernels describe transpose                      the ladder, one line per rung
  python -m gpukernels describe transpose shared --shape 8192 8192   source, registers, launch
  python -m gpukernels plot out/bench.json --out out/bench.png       plot a saved run again
"""

BENCH_EPILOG = """\
what is timed:
  transpose  every rung, a device-to-device copy of the same bytes (the ceiling) and
             cupy.ascontiguousarray(x.T); GB/s count bytes read plus bytes written
  matmul     every rung and cuBLAS (cupy.matmul, the ceiling); TFLOP/s count 2*M*N*K
  reduce     every rung of each reduction (sum; prod, min, max where they exist), CuPy's
             reduction (the ceiling) and PyTorch's when it imports; GB/s count bytes read;
             plus partial reductions ("axis kernels": the row and column kernels)
  Each output is checked on the device against an independent result on the same data before
  it is timed (CUDA events, warm-up, median). The table gives each rate over the ceiling's.

examples:
  python -m gpukernels bench all --json out/bench.json --plot out/bench.png
  python -m gpukernels bench matmul --sizes 1024 4096 --shapes 4095x4097x4099
  python -m gpukernels bench sum --sizes 2**24 2**28 1e7 --dtypes float32 int32 --no-axis
  python -m gpukernels bench transpose --methods naive shared --quick
"""


def _operations() -> tuple[str, ...]:
    from .introspect import operations

    return operations()


def _add_main_options(parser: argparse.ArgumentParser, reductions: tuple[str, ...]) -> None:
    choices = ("transpose", "matmul", "reduce") + reductions
    parser.add_argument(
        "--ops", nargs="+", choices=choices, default=["transpose", "matmul", "reduce"],
        metavar="OP",
        help=("operations to check and time: transpose, matmul, reduce (every reduction) or "
              f"one reduction ({', '.join(reductions)}); default: all"))
    parser.add_argument("--quick", dest="main_quick", action="store_true",
                        help="small sizes for a smoke run (they fit in the L2: not for reporting)")
    parser.add_argument("--json", dest="main_json", metavar="PATH",
                        help="also write every measurement, the device and library versions to PATH")


def _add_bench(subparsers, reductions: tuple[str, ...]) -> None:
    targets = ("all", "transpose", "matmul", "reduce") + reductions
    bench = subparsers.add_parser(
        "bench", help="sweep sizes and dtypes; table, JSON and plots",
        description=("Time every rung of a ladder over a sweep of sizes and dtypes, next to the "
                     "ceiling and the library equivalents measured in the same run. Prints a "
                     "table; --json and --plot save the measurements and a PNG per family. "
                     "Exits 1 if any rung gave a wrong result."),
        epilog=BENCH_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    bench.add_argument("target", nargs="?", default="all", choices=targets, metavar="TARGET",
                       help=f"what to time: {', '.join(targets)} (default: all)")
    inputs = bench.add_argument_group("inputs (each has a per-family default)")
    inputs.add_argument(
        "--sizes", nargs="+", metavar="N",
        help=("the sweep: the side n of n x n matrices (transpose), of n x n x n products "
              "(matmul), or element counts (reductions); 4096, 2**28, 2^28 and 1e7 all work. "
              "Defaults: 1024..16384, 512..8192, 2**16..2**28 and 10**7"))
    inputs.add_argument(
        "--shapes", nargs="*", metavar="SHAPE",
        help=("extra inputs outside the sweep, plotted as markers: MxN or BxMxN (transpose), "
              "MxKxN (matmul: a is MxK, b is KxN), any shape reduced in full (reductions). "
              "Defaults: 8191x8193 64x1024x1024, 4095x4097x4099, none. --shapes alone: none"))
    inputs.add_argument("--dtypes", nargs="+", metavar="DTYPE",
                        help=("dtypes to time. Defaults: int8 float16 float32 float64 "
                              "(transpose), float32 float16 tf32 (matmul; tf32: float32 data on the TF32 "
                              "tensor cores, against cuBLAS TF32 through PyTorch), float32 int32 "
                              "(reductions)"))
    inputs.add_argument("--methods", nargs="+", metavar="RUNG",
                        help=("rungs to time (default: every rung; see "
                              "'python -m gpukernels describe OP'); ceilings are always timed"))
    inputs.add_argument("--axis", action=argparse.BooleanOptionalAction, default=True,
                        help=("reductions: also time partial reductions: (8192, 8192) and "
                              "(10**6, 2) over either axis, (1, 2**24) and more (default: on)"))
    inputs.add_argument("--torch", action=argparse.BooleanOptionalAction, default=True,
                        help="reductions: also time PyTorch's, when it imports (default: on)")
    inputs.add_argument("--quick", action="store_true",
                        help="small default inputs and few repeats, for a smoke run")
    timing = bench.add_argument_group("timing")
    timing.add_argument("--repeat", type=int, metavar="N",
                        help="timed calls per measurement at most; the median is kept (default: 200)")
    timing.add_argument("--warmup", type=int, metavar="N",
                        help="untimed calls first (default: 3; 1 for calls over 20 ms)")
    timing.add_argument("--max-time", type=float, metavar="SECONDS",
                        help="stop timing a measurement after this long (default: 0.5)")
    timing.add_argument("--max-call-ms", type=float, metavar="MS",
                        help=("skip a rung at a size where its time at the previous size "
                              "predicts more than MS per call (default: 1000; 'inf' never "
                              "skips)"))
    timing.add_argument("--seed", type=int, help="seed of the random inputs (default: fresh)")
    output = bench.add_argument_group("output")
    output.add_argument("--json", metavar="PATH",
                        help="write every measurement with the device, clocks, versions and date")
    output.add_argument("--plot", metavar="PATH",
                        help=("write a PNG of rate against size per family; with several "
                              "families the family is added to the name: bench.png -> "
                              "bench-transpose.png, bench-matmul.png, bench-reduce.png"))
    output.add_argument("--markdown", metavar="PATH", help="also write the table as Markdown")
    output.add_argument("--no-progress", action="store_true", help="no progress bar")


def _add_describe(subparsers, operations: tuple[str, ...]) -> None:
    describe = subparsers.add_parser(
        "describe", help="a rung's summary, CUDA source, registers and launch configuration",
        description=("Show what a rung changes against the rung below, its CUDA source as "
                     "written in kernels/, and, for an input (--shape), the kernel instance the "
                     "wrapper would launch, its grid and block, registers per thread and shared "
                     "memory. Without a rung: the whole ladder as a table. Summary and source "
                     "need no GPU; --shape does (nothing is computed: launches are switched off)."),
        epilog=("examples:\n"
                "  python -m gpukernels describe matmul\n"
                "  python -m gpukernels describe transpose shared --shape 8191 8193 --dtype float64\n"
                "  python -m gpukernels describe sum two_pass --shape 2**28 --dtype int32\n"
                "  python -m gpukernels describe matmul --shape 4096 4096 4096   (M K N)\n"),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    describe.add_argument("operation", choices=operations, metavar="OPERATION",
                          help=f"one of {', '.join(operations)}")
    describe.add_argument("method", nargs="?", metavar="RUNG",
                          help="a rung of the ladder, or 'auto' with --shape (default: every rung)")
    describe.add_argument("--shape", nargs="+", metavar="N",
                          help="input shape for the launch configuration; M K N for matmul")
    describe.add_argument("--dtype", default=None, help="input dtype with --shape (default: float32)")
    describe.add_argument("--axis", type=int, help="reductions: the axis to reduce over")
    describe.add_argument("--no-source", action="store_true", help="leave out the CUDA source")


def _add_plot(subparsers) -> None:
    plot = subparsers.add_parser(
        "plot", help="draw the PNGs of a saved benchmark again (no GPU needed)",
        description=("Read a JSON file written by 'bench --json' (or by the default command's "
                     "--json) and write its plots, one PNG per family."))
    plot.add_argument("json", metavar="JSON", help="the measurements")
    plot.add_argument("--out", metavar="PATH",
                      help="the PNG (default: the JSON's name with .png); several families add "
                           "their name: bench.png -> bench-transpose.png, ...")
    plot.add_argument("--markdown", metavar="PATH", help="also write the table as Markdown")


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m gpukernels``.

    Examples
    --------
    >>> from gpukernels.__main__ import build_parser
    >>> build_parser().parse_args(["bench", "matmul", "--sizes", "4096"]).sizes
    ['4096']
    """
    from .introspect import REDUCTIONS

    operations = _operations()
    reductions = tuple(op for op in operations if op in REDUCTIONS)
    parser = argparse.ArgumentParser(
        prog="python -m gpukernels",
        description=(
            "Hand-written CUDA kernels, each operation a ladder of rungs from the textbook "
            "kernel up. Without a command: validate every rung of every operation against "
            "NumPy on fresh random data, then time it (CUDA events, median after warm-up) next "
            "to the device's own ceiling measured in the same run: a device-to-device copy for "
            "transpose, cuBLAS (cupy.matmul) for matmul, CuPy's reduction (CUB) for reductions. "
            "Prints one table; exits 1 if any rung gave a wrong answer."),
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_main_options(parser, reductions)
    subparsers = parser.add_subparsers(dest="command", title="commands", metavar="COMMAND",
                                       help="run 'python -m gpukernels COMMAND --help' for more")
    _add_bench(subparsers, reductions)
    _add_describe(subparsers, operations + ("reduce",) if "sum" in operations else operations)
    _add_plot(subparsers)
    return parser


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _run_main_job(args) -> int:
    from . import benchmark

    rows = benchmark.main_job(tuple(args.ops), quick=args.main_quick, progress=True)
    result = benchmark.BenchResult(rows, benchmark.environment())
    print(result)
    if args.main_json:
        result.save_json(args.main_json)
        _say(f"wrote {args.main_json}")
    return _verdict(result)


def _verdict(result) -> int:
    wrong = result.wrong
    if wrong:
        print(f"\n{len(wrong)} wrong result(s): "
              + ", ".join(f"{r.operation}/{r.method} {r.case} {r.dtype}" for r in wrong))
        return 1
    return 0


def _check_plotting_available() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SystemExit("error: --plot needs matplotlib: pip install 'gpukernels[bench]'") from None


def _run_bench(args, parser: argparse.ArgumentParser) -> int:
    from . import benchmark
    from .introspect import REDUCTIONS

    if args.plot:
        _check_plotting_available()
    try:
        sizes = None if args.sizes is None else tuple(benchmark.parse_size(s) for s in args.sizes)
        shapes = None if args.shapes is None else tuple(benchmark.parse_shape(s) for s in args.shapes)
    except ValueError as exc:
        parser.error(str(exc))
    given = {"repeat": args.repeat, "warmup": args.warmup, "max_seconds": args.max_time,
             "max_call_ms": args.max_call_ms}
    timing = replace(benchmark.QUICK_TIMING if args.quick else benchmark.Timing(),
                     **{k: v for k, v in given.items() if v is not None})
    families = benchmark.FAMILIES if args.target == "all" else \
        ("reduce",) if args.target in REDUCTIONS else (args.target,)
    options = {"sizes": sizes, "shapes": shapes, "dtypes": args.dtypes, "methods": args.methods}
    if "reduce" in families:
        options["operations"] = (args.target,) if args.target in REDUCTIONS else None
        options["torch"] = args.torch
        if not args.axis:
            options["axis_cases"] = ()
    try:
        result = benchmark.bench(families, quick=args.quick, timing=timing,
                                 progress=not args.no_progress, seed=args.seed, **options)
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    print(result)
    _write_outputs(result, json_path=args.json, plot_path=args.plot, markdown_path=args.markdown)
    return _verdict(result)


def _write_outputs(result, *, json_path=None, plot_path=None, markdown_path=None) -> None:
    if json_path:
        result.save_json(json_path)
        _say(f"wrote {json_path}")
    if markdown_path:
        Path(markdown_path).parent.mkdir(parents=True, exist_ok=True)
        Path(markdown_path).write_text(result.to_markdown() + "\n")
        _say(f"wrote {markdown_path}")
    if plot_path:
        for path in result.save_plots(plot_path):
            _say(f"wrote {path}")


def _run_describe(args, parser: argparse.ArgumentParser) -> int:
    from . import benchmark
    from .introspect import describe

    kwargs = {} if args.axis is None else {"axis": args.axis}
    try:
        shape = None if args.shape is None else tuple(benchmark.parse_size(s) for s in args.shape)
        info = describe(args.operation, args.method, shape=shape, dtype=args.dtype, **kwargs)
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    except NotImplementedError as exc:
        print(f"{args.operation} / {args.method}: not supported for this input: {exc}")
        return 1
    if args.method is None or args.no_source:
        print(repr(info))
    else:
        print(str(info))
    return 0


def _run_plot(args, parser: argparse.ArgumentParser) -> int:
    from .benchmark import BenchResult

    _check_plotting_available()
    try:
        result = BenchResult.load(args.json)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        parser.error(f"cannot read {args.json}: {exc}")
    out = args.out or str(Path(args.json).with_suffix(".png"))
    _write_outputs(result, plot_path=out, markdown_path=args.markdown)
    return 0


def main(argv=None) -> int:
    """Run the command line; returns the exit status.

    Parameters
    ----------
    argv : list of str, optional
        The arguments (``sys.argv[1:]`` by default).

    Returns
    -------
    int
        0 on success, 1 when a rung gave a wrong result or no GPU is present.

    Examples
    --------
    >>> from gpukernels.__main__ import main
    >>> main(["describe", "sum", "--no-source"])  # doctest: +SKIP
    0
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    from ._device import NoGPUError

    try:
        if args.command == "bench":
            return _run_bench(args, parser)
        if args.command == "describe":
            return _run_describe(args, parser)
        if args.command == "plot":
            return _run_plot(args, parser)
        return _run_main_job(args)
    except NoGPUError as exc:
        _say(f"error: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
