"""``python -m gpukernels``: check and time every rung; ``bench``, ``describe`` and ``plot``.

The operations, ladders and rungs offered here are read from the registry
(:data:`gpukernels._core.ladder.OPERATIONS`).
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

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
  Every rung of each chosen operation, its ceiling and its library equivalents, on each input
  of the sweep. Each output is checked on the device against an independent result on the same
  data before it is timed. Two times, CUDA events, median after warm-up: "call ms", one call
  from Python on an idle GPU, its host time included (what a user's code sees), and "held ms",
  the device work alone (the stream held while the call is enqueued). Rates and ratios to the
  ceiling are given for both.

examples:
  python -m gpukernels bench all --json out/bench.json --plot out/bench.png
  python -m gpukernels bench matmul --sizes 1024 4096 --shapes 4095x4097x4099
  python -m gpukernels bench sum --sizes 2**24 2**28 1e7 --dtypes float32 int32 --no-axis
  python -m gpukernels bench transpose --methods naive shared --quick
"""

WIDTH = 88


def _wrap(text: str) -> str:
    """A description for RawDescriptionHelpFormatter: paragraphs wrapped to WIDTH."""
    return "\n\n".join(textwrap.fill(paragraph, WIDTH) for paragraph in text.split("\n\n"))


def _registry() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(operations, bench targets), from the registry."""
    from ._core.ladder import OPERATIONS
    from .benchmark import targets

    return tuple(OPERATIONS), targets()


def _sweep_lines() -> str:
    """One line per operation: its ceiling and what else is timed (for bench --help)."""
    from ._core.ladder import OPERATIONS

    lines = []
    for name, op in OPERATIONS.items():
        spec = op.bench
        peers = f"; also {spec.peers}" if spec.peers else ""
        lines.append(textwrap.fill(f"{name}: {spec.unit} counting {spec.work}; ceiling "
                                   f"{spec.ceiling}{peers}", WIDTH, initial_indent="  ",
                                   subsequent_indent="    "))
    return "per operation:\n" + "\n".join(lines) + "\n\n"


def _add_main_options(parser: argparse.ArgumentParser, targets: tuple[str, ...]) -> None:
    parser.add_argument(
        "--ops", nargs="+", choices=targets, default=["all"], metavar="OP",
        help=f"what to check and time: {', '.join(targets)} (default: all)")
    parser.add_argument("--quick", dest="main_quick", action="store_true",
                        help="small sizes for a smoke run (they fit in the L2: not for reporting)")
    parser.add_argument("--json", dest="main_json", metavar="PATH",
                        help="also write every measurement, the device and library versions to PATH")


def _add_bench(subparsers: Any, targets: tuple[str, ...]) -> None:
    bench = subparsers.add_parser(
        "bench", help="sweep sizes and dtypes; table, JSON and plots",
        description=_wrap("Time every rung of a ladder over a sweep of sizes and dtypes, next to "
                          "the ceiling and the library equivalents measured in the same run. "
                          "Prints a table; --json and --plot save the measurements and a PNG "
                          "per ladder. Exits 1 if any rung gave a wrong result."),
        epilog=_sweep_lines() + BENCH_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    bench.add_argument("target", nargs="*", default=["all"], metavar="TARGET",
                       help=f"what to time: {', '.join(targets)} (default: all), or 'dask' "
                            "alone: gpukernels.dask against one array and Dask's own path")
    inputs = bench.add_argument_group("inputs (each operation has its defaults)")
    inputs.add_argument(
        "--sizes", nargs="+", metavar="N",
        help=("the sweep: the side n of n x n matrices (transpose), of n x n x n products "
              "(matmul), or element counts (reductions); 4096, 2**28, 2^28 and 1e7 all work"))
    inputs.add_argument(
        "--shapes", nargs="*", metavar="SHAPE",
        help=("extra inputs outside the sweep, plotted as markers: MxN or BxMxN (transpose), "
              "MxKxN or BxMxKxN (matmul: a is [B x] MxK, b is [B x] KxN), any shape reduced "
              "in full (reductions); "
              "--shapes alone: none"))
    inputs.add_argument("--dtypes", nargs="+", metavar="DTYPE",
                        help=("dtypes to time (matmul also takes tf32: float32 data on the TF32 "
                              "tensor cores, against cuBLAS TF32 through PyTorch; bfloat16 is "
                              "timed against torch.matmul)"))
    inputs.add_argument("--methods", nargs="+", metavar="RUNG",
                        help=("rungs to time (default: every rung; see "
                              "'python -m gpukernels describe OP'); ceilings are always timed"))
    inputs.add_argument("--axis", action=argparse.BooleanOptionalAction, default=True,
                        help=("reductions: also time partial reductions: (8192, 8192) and "
                              "(10**6, 2) over either axis, (1, 2**24) and more (default: on)"))
    inputs.add_argument("--torch", action=argparse.BooleanOptionalAction, default=True,
                        help="reductions: also time PyTorch's, when it imports (default: on)")
    inputs.add_argument("--suite", action="store_true",
                        help=("matmul: time the shape suite instead of the size sweep (233 "
                              "products: the shapes people use, decode steps among them, and "
                              "a sweep of M, K and N over 64..8192), in float16 and bfloat16 "
                              "with method auto unless --dtypes or --methods say otherwise; "
                              "prints the minimum and geometric mean of the ratio to cuBLAS"))
    inputs.add_argument("--a-transposed", action="store_true",
                        help=("matmul: a is the transposed view of a row-major K x M array, as "
                              "X.T in X.T @ Y (default: a row-major M x K a)"))
    inputs.add_argument("--b-transposed", action="store_true",
                        help=("matmul: b is the transposed view of a row-major N x K array, as "
                              "W.T in a linear layer's x @ W.T (default: a row-major K x N b)"))
    inputs.add_argument("--quick", action="store_true",
                        help="small default inputs and few repeats, for a smoke run")
    timing = bench.add_argument_group("timing")
    timing.add_argument("--repeat", type=int, metavar="N",
                        help="held timings per measurement at most; the median is kept (default: 200)")
    timing.add_argument("--call-repeat", type=int, metavar="N",
                        help="per-call timings per measurement at most (default: 100)")
    timing.add_argument("--warmup", type=int, metavar="N",
                        help="untimed calls first (default: 3; 1 for calls over 20 ms)")
    timing.add_argument("--max-time", type=float, metavar="SECONDS",
                        help="stop timing a measurement after this long (default: 0.5)")
    timing.add_argument("--max-call-ms", type=float, metavar="MS",
                        help=("skip a rung at a size where its time at the previous size "
                              "predicts more than MS per call (default: 1000; 'inf' never "
                              "skips)"))
    timing.add_argument("--seed", type=int, help="seed of the random inputs (default: fresh)")
    on_dask = bench.add_argument_group("bench dask (the 'gpukernels[dask]' extra)")
    on_dask.add_argument("--scheduler", default="cuda", metavar="WHERE",
                         help="where the Dask tasks run: 'cuda' (a LocalCUDACluster started for "
                              "the run, one worker per GPU; default), 'threads' (Dask's threaded "
                              "scheduler in this process) or a scheduler's address "
                              "(tcp://host:8786)")
    on_dask.add_argument("--gpus", metavar="LIST",
                         help="with --scheduler cuda: the GPUs that get a worker, as "
                              "CUDA_VISIBLE_DEVICES lists them (e.g. 0,1; default: every GPU)")
    on_dask.add_argument("--protocol", choices=("tcp", "ucx"),
                         help="with --scheduler cuda: how workers send blocks to each other "
                              "(default tcp, through host memory; ucx: GPU to GPU, needs "
                              "distributed-ucxx)")
    output = bench.add_argument_group("output")
    output.add_argument("--json", metavar="PATH",
                        help="write every measurement with the device, clocks, versions and date")
    output.add_argument("--plot", metavar="PATH",
                        help=("write a PNG of rate against size per ladder; with several "
                              "ladders the ladder is added to the name: bench.png -> "
                              "bench-transpose.png, bench-matmul.png, bench-reduce.png"))
    output.add_argument("--markdown", metavar="PATH", help="also write the table as Markdown")
    output.add_argument("--no-progress", action="store_true", help="no progress bar")


def _add_describe(subparsers: Any, operations: tuple[str, ...]) -> None:
    describe = subparsers.add_parser(
        "describe", help="a rung's summary, CUDA source, registers and launch configuration",
        description=_wrap("Show what a rung changes against the rung below, its CUDA source as "
                          "written in kernels/, and, for an input (--shape), the kernel instance "
                          "the wrapper would launch, its grid and block, registers per thread "
                          "and shared memory. Without a rung: the whole ladder as a table. "
                          "Summary and source need no GPU; --shape does (nothing is computed: "
                          "launches are switched off)."),
        epilog=("examples:\n"
                "  python -m gpukernels describe matmul\n"
                "  python -m gpukernels describe transpose shared --shape 8191 8193 --dtype float64\n"
                "  python -m gpukernels describe sum two_pass --shape 2**28 --dtype int32\n"
                "  python -m gpukernels describe sum --shape 8192 8192 --axis 0\n"
                "  python -m gpukernels describe matmul --shape 4096 4096 4096   (M K N)\n"),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    describe.add_argument("operation", choices=operations, metavar="OPERATION",
                          help=f"one of {', '.join(operations)}")
    describe.add_argument("method", nargs="?", metavar="RUNG",
                          help="a rung of the ladder, or 'auto' with --shape (default: every rung)")
    describe.add_argument("--shape", nargs="+", metavar="N",
                          help="input shape for the launch configuration; M K N for matmul")
    describe.add_argument("--dtype", default=None,
                          help="input dtype with --shape (default: float32)")
    describe.add_argument("--axis", nargs="+", type=int, metavar="AXIS",
                          help="reductions and scans, with --shape: the axes to reduce or scan along")
    describe.add_argument("--no-source", action="store_true", help="leave out the CUDA source")


def _add_plot(subparsers: Any) -> None:
    plot = subparsers.add_parser(
        "plot", help="draw the PNGs of a saved benchmark again (no GPU needed)",
        description=_wrap("Read a JSON file written by 'bench --json' (or by the default "
                          "command's --json) and write its plots: one PNG per ladder, the "
                          "ladder's name added to the file name when there are several "
                          "(out.png -> out-transpose.png, out-matmul.png, ...)."),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    plot.add_argument("json", metavar="JSON", help="the measurements")
    plot.add_argument("--out", metavar="PATH",
                      help="the PNG (default: the JSON's name with .png); several ladders add "
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
    from . import __version__

    operations, targets = _registry()
    parser = argparse.ArgumentParser(
        prog="python -m gpukernels",
        description=_wrap(
            "Hand-written CUDA kernels, each operation a ladder of rungs from the textbook "
            "kernel up. Without a command: validate every rung of every operation against "
            "NumPy on fresh random data, then time it (CUDA events, median after warm-up) next "
            "to the device's own ceiling measured in the same run: a device-to-device copy for "
            "transpose, cuBLAS (cupy.matmul) for matmul, CuPy's reduction (CUB) for reductions. "
            "Prints one table; exits 1 if any rung gave a wrong answer.\n\n"
            "Without a GPU, 'describe' (summaries and CUDA sources) and 'plot' still work."),
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"gpukernels {__version__}")
    _add_main_options(parser, targets)
    subparsers = parser.add_subparsers(dest="command", title="commands", metavar="COMMAND",
                                       help="run 'python -m gpukernels COMMAND --help' for more")
    _add_bench(subparsers, targets)
    ladder_names = tuple(t for t in targets if t != "all" and t not in operations)
    _add_describe(subparsers, operations + ladder_names)
    _add_plot(subparsers)
    return parser


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of a subcommand (for errors in its own usage)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[name]
    return parser


def _run_main_job(args: argparse.Namespace) -> int:
    from ._core.compile import REPORT
    from ._core.device import gpu_available
    from .benchmark import BenchResult, environment, main_job

    if gpu_available():  # without one, main_job's NoGPUError says what happened
        _say(REPORT.summary())
    rows = main_job(tuple(args.ops), quick=args.main_quick, progress=True)
    result = BenchResult(rows, environment())
    print(result)
    if args.main_json:
        result.save_json(args.main_json)
        _say(f"wrote {args.main_json}")
    return _verdict(result)


def _verdict(result: Any) -> int:
    wrong = result.wrong
    if wrong:
        print(f"\n{len(wrong)} wrong result(s): "
              + ", ".join(f"{r.operation}/{r.method} {r.case} {r.dtype}" for r in wrong))
        return 1
    return 0


def _check_plotting_available(parser: argparse.ArgumentParser) -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        parser.error("--plot needs matplotlib: pip install 'gpukernels[bench]'")


def _run_bench_dask(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .benchmark import environment
    from .benchmark.on_dask import bench_dask, format_rows, save_rows

    ignored = [flag for flag, value in (("--sizes", args.sizes), ("--shapes", args.shapes),
                                        ("--dtypes", args.dtypes), ("--methods", args.methods),
                                        ("--plot", args.plot), ("--markdown", args.markdown))
               if value is not None]
    if ignored:
        parser.error(f"{', '.join(ignored)} do not apply to 'bench dask' (its cases are fixed; "
                     "--quick makes them smaller)")
    if args.repeat is not None and args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.scheduler != "cuda" and (args.gpus is not None or args.protocol is not None):
        parser.error("--gpus and --protocol choose how the LocalCUDACluster starts: they need "
                     "--scheduler cuda")
    try:
        rows = bench_dask(quick=args.quick, scheduler=args.scheduler, repeat=args.repeat,
                          seed=args.seed or 0, gpus=args.gpus, protocol=args.protocol,
                          progress=None if args.no_progress else _say)
    except ImportError as exc:
        parser.error(str(exc))
    print(format_rows(rows))
    if args.json:
        save_rows(rows, args.json, environment())
        _say(f"wrote {args.json}")
    wrong = [row.case for row in rows if not row.correct]
    if wrong:
        print(f"\n{len(wrong)} wrong result(s): {', '.join(wrong)}")
    return 1 if wrong else 0


def _run_bench(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from . import benchmark

    if "dask" in args.target:
        if args.target != ["dask"]:
            parser.error("'dask' is a target of its own: run 'bench dask' separately")
        return _run_bench_dask(args, parser)
    if args.gpus is not None or args.protocol is not None:
        parser.error("--gpus and --protocol apply to 'bench dask' only")
    if args.plot:
        _check_plotting_available(parser)
    try:
        sizes = None if args.sizes is None else tuple(benchmark.parse_size(s) for s in args.sizes)
        shapes = None if args.shapes is None else tuple(benchmark.parse_shape(s)
                                                        for s in args.shapes)
        operations = benchmark.resolve_targets(args.target)
    except ValueError as exc:
        parser.error(str(exc))
    given = {"repeat": args.repeat, "call_repeat": args.call_repeat, "warmup": args.warmup,
             "max_seconds": args.max_time, "max_call_ms": args.max_call_ms}
    timing = replace(benchmark.QUICK_TIMING if args.quick else benchmark.Timing(),
                     **{k: v for k, v in given.items() if v is not None})
    options: dict = {}
    reductions = [op for op in operations if "axis_cases" in op.bench.options]
    if reductions:
        options["torch"] = args.torch
        if not args.axis:
            options["axis_cases"] = ()
    for flag, name in (("--a-transposed", "a_transposed"), ("--b-transposed", "b_transposed")):
        if getattr(args, name):
            if not any(name in op.bench.options for op in operations):
                parser.error(f"{flag} is matmul's: give the target matmul")
            options[name] = True
    if args.suite:
        if not any("suite" in op.bench.options for op in operations):
            parser.error("--suite is matmul's shape suite: give the target matmul")
        options["suite"] = True
        args.dtypes = args.dtypes or ["float16", "bfloat16"]
        args.methods = args.methods or ["auto"]
    try:
        result = benchmark.bench(args.target, sizes=sizes, shapes=shapes, dtypes=args.dtypes,
                                 methods=args.methods, quick=args.quick, timing=timing,
                                 progress=not args.no_progress, seed=args.seed, **options)
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    print(result)
    summary = result.summary()
    if summary:
        print(summary)
    _write_outputs(result, json_path=args.json, plot_path=args.plot, markdown_path=args.markdown)
    return _verdict(result)


def _write_outputs(result: Any, *, json_path: Any = None, plot_path: Any = None,
                   markdown_path: Any = None) -> None:
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


def _run_describe(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .benchmark import parse_size
    from .introspect import describe

    if args.dtype is not None and args.shape is None:
        parser.error("--dtype goes with --shape (the input describe works out launches for)")
    if args.axis is not None and args.shape is None:
        parser.error("--axis goes with --shape (the input describe works out launches for)")
    kwargs: dict = {}
    if args.axis is not None:
        kwargs["axis"] = args.axis[0] if len(args.axis) == 1 else tuple(args.axis)
    try:
        shape = None if args.shape is None else tuple(parse_size(s) for s in args.shape)
        info = describe(args.operation, args.method, shape=shape, dtype=args.dtype, **kwargs)
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    if args.method is None or args.no_source:
        print(repr(info))
    else:
        print(str(info))
    return 0


def _run_plot(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .benchmark import BenchResult

    _check_plotting_available(parser)
    try:
        result = BenchResult.load(args.json)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        parser.error(f"cannot read {args.json}: {exc}")
    out = args.out or str(Path(args.json).with_suffix(".png"))
    _write_outputs(result, plot_path=out, markdown_path=args.markdown)
    return 0


def _refuse_main_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The default command's options with a subcommand would be ignored: say so instead."""
    given = [flag for flag, value in (("--ops", args.ops != ["all"]),
                                      ("--quick", args.main_quick),
                                      ("--json", args.main_json is not None)) if value]
    if given:
        parser.error(f"{', '.join(given)} before '{args.command}' belong to the default command; "
                     f"put them after it (python -m gpukernels {args.command} ... "
                     f"{' '.join(given)}) or see 'python -m gpukernels {args.command} --help'")
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    Parameters
    ----------
    argv : list of str, optional
        The arguments (``sys.argv[1:]`` by default).

    Returns
    -------
    int
        0 on success, 1 when a rung gave a wrong result or no GPU is present (2 for a usage
        error, from argparse).

    Examples
    --------
    >>> from gpukernels.__main__ import main
    >>> main(["describe", "sum", "--no-source"])  # doctest: +SKIP
    0
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    from ._core.device import NoGPUError

    if args.command is not None:
        _refuse_main_options(parser, args)
    try:
        if args.command == "bench":
            return _run_bench(args, _subparser(parser, "bench"))
        if args.command == "describe":
            return _run_describe(args, _subparser(parser, "describe"))
        if args.command == "plot":
            return _run_plot(args, _subparser(parser, "plot"))
        return _run_main_job(args)
    except NoGPUError as exc:
        _say(f"error: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
