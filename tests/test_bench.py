"""The benchmark harness and the command line: parsing, tables, JSON, plots, and (GPU) sweeps.

The CPU tests build results from synthetic measurements; the GPU tests run the smallest sweeps
and check what they record, never how fast anything is.
"""

from __future__ import annotations

import dataclasses
import json
import math
import struct

import numpy
import pytest

import gpukernels as gk
from gpukernels import benchmark
from gpukernels.__main__ import build_parser, main
from gpukernels._core.ladder import OPERATIONS
from gpukernels.benchmark import BenchResult, Measurement, Timing
from gpukernels.benchmark import sweep as _sweep
from gpukernels.benchmark import timing as _timing

GPU = gk.gpu_available()
TRANSPOSE_RUNGS = gk.methods("transpose")
MATMUL_RUNGS = gk.methods("matmul")
TENSOR_METHODS = ("mma", "wgmma", "split_k")
REDUCE_RUNGS = gk.methods("sum")
REDUCTIONS = tuple(name for name, op in OPERATIONS.items() if op.ladder.name == "reduce")
ENVIRONMENT = {"device": "NVIDIA H100 80GB HBM3", "date": "2026-11-22T10:00:00+00:00",
               "l2_bytes": 50 * 2**20, "compute_capability": "9.0", "multiprocessors": 132,
               "cupy": "14.2.0"}


def row(operation, method, shape, rate, *, dtype="float32", role="rung", sweep="size",
        correct=True, status="ok", unit=None, **notes):
    unit = unit or ("TFLOP/s" if operation == "matmul" else "GB/s")
    finite = math.isfinite(rate)
    return Measurement(operation, method, tuple(shape), dtype,
                       correct if role != "ceiling" else None, 1.0 if finite else math.nan, rate,
                       unit, ratio=rate / 3000 if finite else math.nan, role=role, notes=notes,
                       status=status, sweep=sweep, ladder=_sweep.ladder_of(operation),
                       call_ms=1.1 if finite else math.nan,
                       call_ratio=rate / 3300 if finite else math.nan)


def synthetic_result() -> BenchResult:
    """Measurements shaped like a real sweep of every family, with every kind of row."""
    rows = []
    for dtype in ("int8", "float32"):
        for n in (1024, 4096, 16384):
            rows.append(row("transpose", "device copy", (n, n), 2900.0, dtype=dtype, role="ceiling"))
            rows += [row("transpose", m, (n, n), 500.0 * (i + 1), dtype=dtype)
                     for i, m in enumerate(TRANSPOSE_RUNGS)]
            rows.append(row("transpose", "cupy.ascontiguousarray(x.T)", (n, n), 950.0,
                            dtype=dtype, role="library"))
        rows.append(row("transpose", "device copy", (8191, 8193), 2800.0, dtype=dtype,
                        role="ceiling", sweep="odd"))
        rows += [row("transpose", m, (8191, 8193), 400.0 * (i + 1), dtype=dtype, sweep="odd")
                 for i, m in enumerate(TRANSPOSE_RUNGS)]
    rows[1] = row("transpose", TRANSPOSE_RUNGS[0], (1024, 1024), 450.0, dtype="int8",
                  correct=False, status="wrong")
    for n in (512, 2048, 8192):
        rows.append(row("matmul", "cupy.matmul (cuBLAS)", (n, n, n), 51.0, role="ceiling"))
        rows += [row("matmul", m, (n, n, n), 3.0 * (i + 1)) for i, m in enumerate(MATMUL_RUNGS)]
    rows[-len(MATMUL_RUNGS)] = row("matmul", MATMUL_RUNGS[0], (8192,) * 3, math.nan,
                                   correct=None, status="skipped", reason="predicted 330 ms")
    for n in (2**16, 2**28):
        rows.append(row("sum", "cupy.sum", (n,), 3000.0, role="ceiling"))
        rows.append(row("sum", "torch.sum", (n,), 2950.0, role="library"))
        rows += [row("sum", m, (n,), 2700.0) for m in REDUCE_RUNGS]
    for shape, axis in (((8192, 8192), 0), ((10**6, 2), 1)):
        rows.append(row("sum", "cupy.sum", shape, 1500.0, role="ceiling", sweep="axis", axis=axis))
        rows += [row("sum", m, shape, math.nan, sweep="axis", correct=None,
                     status="not supported", axis=axis, reason="partial reduction")
                 for m in REDUCE_RUNGS]
    return BenchResult(rows, ENVIRONMENT, {"timing": {"repeat": 100}})


# --- sizes and shapes ----------------------------------------------------------------------------

@pytest.mark.parametrize("text, value", [("4096", 4096), ("2**28", 2**28), ("2^10", 1024),
                                         ("1e7", 10**7), ("10**7", 10**7), (" 7 ", 7)])
def test_parse_size(text, value):
    assert benchmark.parse_size(text) == value


@pytest.mark.parametrize("text", ["", "x", "1.5", "0", "-4", "2**", "1e-3", "4k"])
def test_parse_size_rejects(text):
    with pytest.raises(ValueError, match="size"):
        benchmark.parse_size(text)


def test_parse_shape():
    assert benchmark.parse_shape("8191x8193") == (8191, 8193)
    assert benchmark.parse_shape("64x1024x1024") == (64, 1024, 1024)
    assert benchmark.parse_shape("1x2**24") == (1, 2**24)
    assert benchmark.parse_shape("4095X4097X4099") == (4095, 4097, 4099)


# --- the command line ------------------------------------------------------------------------------

def help_text(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def test_help(capsys):
    text = help_text(capsys)
    for word in ("bench", "describe", "plot", "--ops", "--quick", "--json", "exits 1", "examples"):
        assert word in text


def test_bench_help(capsys):
    text = help_text(capsys, "bench")
    for word in ("transpose", "matmul", "reduce", "--sizes", "--shapes", "--dtypes", "--methods",
                 "--json", "--plot", "--no-axis", "--max-call-ms", "ceiling", "2**28"):
        assert word in text, word


def test_describe_and_plot_help(capsys):
    assert "--shape" in help_text(capsys, "describe")
    assert "--out" in help_text(capsys, "plot")


def test_parse_bench_arguments():
    args = build_parser().parse_args(["bench", "transpose", "--sizes", "1024", "2**12",
                                      "--dtypes", "float32", "--methods", "naive", "--no-axis",
                                      "--json", "out.json", "--plot", "out.png"])
    assert (args.command, args.target, args.sizes, args.dtypes) == \
        ("bench", ["transpose"], ["1024", "2**12"], ["float32"])
    assert (args.methods, args.axis, args.json, args.plot) == (["naive"], False, "out.json", "out.png")
    default = build_parser().parse_args(["bench"])
    assert default.target == ["all"] and default.shapes is None and default.axis
    several = build_parser().parse_args(["bench", "sum", "max"])
    assert several.target == ["sum", "max"]


def test_parse_main_arguments_keep_working():
    args = build_parser().parse_args(["--ops", "transpose", "sum", "--quick", "--json", "x.json"])
    assert args.command is None
    assert (args.ops, args.main_quick, args.main_json) == (["transpose", "sum"], True, "x.json")
    assert build_parser().parse_args([]).ops == ["all"]


def test_choices_come_from_the_registry(capsys):
    assert benchmark.targets() == ("all", "transpose", "permute", "matmul", "reduce", "scan",
                                   "permute_dims", "sum", "prod", "min", "max", "mean", "var",
                                   "std", "argmin", "argmax", "cumsum", "cumprod")
    text = help_text(capsys, "describe")
    assert all(name in text for name in OPERATIONS)
    text = help_text(capsys, "bench")
    for op in OPERATIONS.values():
        assert op.bench.ceiling.split()[0] in text


@pytest.mark.parametrize("argv, message", [
    (["bench", "transpose", "--sizes", "huge"], "not a size"),
    (["bench", "nothing"], "unknown benchmark target"),
    (["bench", "transpose", "--methods", "bogus"], "bogus"),
    (["describe", "transpose", "bogus"], "bogus"),
    (["--ops", "nothing"], "invalid choice"),
    (["describe", "transpose", "naive", "--dtype", "int8"], "--dtype goes with --shape"),
    (["describe", "sum", "--axis", "0"], "--axis goes with --shape"),
    (["--json", "x.json", "describe", "sum"], "belong to the default command"),
    (["--quick", "bench", "sum"], "belong to the default command"),
])
def test_bad_arguments(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    if argv[0] in ("bench", "describe"):  # a subcommand's error shows its own usage
        assert f"python -m gpukernels {argv[0]}" in err.splitlines()[0]


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"gpukernels {gk.__version__}"


def test_help_lines_are_wrapped(capsys):
    for argv in ((), ("bench",), ("describe",), ("plot",)):
        assert max(len(line) for line in help_text(capsys, *argv).splitlines()) <= 100, argv


@pytest.mark.skipif(GPU, reason="checks the message without a GPU")
@pytest.mark.parametrize("argv", [[], ["--quick"], ["bench", "transpose", "--quick"],
                                  ["describe", "transpose", "naive", "--shape", "64", "64"]])
def test_commands_without_gpu(capsys, argv):
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "needs a CUDA GPU" in err and "describe" in err  # what works without one
    assert "loaded" not in err and "compiled" not in err  # no report of kernels it never had


@pytest.mark.skipif(GPU, reason="checks the report without a GPU")
def test_compile_report_without_gpu_claims_nothing():
    from gpukernels._core.compile import REPORT

    assert REPORT.summary() == "no kernel was compiled or loaded: no usable GPU"


def test_compile_report_names_kernel_groups_however_the_import_went(monkeypatch):
    # the bench's report line (and test_main_job_quick) says "kernel group" whether the import
    # compiled the eager groups, loaded them from CuPy's cache, or deferred them to first use
    import types

    from gpukernels._core import compile as _compile
    from gpukernels._core import device as _device

    fake_cupy = types.SimpleNamespace(
        cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: 0)))
    monkeypatch.setattr(_device, "gpu_available", lambda: True)
    monkeypatch.setattr(_device, "compute_capability", lambda *_: 90)
    monkeypatch.setattr(_device, "cupy", fake_cupy)
    cold = _compile.CompileReport(at_import=[("scan/scan.cu [scan_pipelined float]", 7, 0.5)],
                                  import_seconds=1.5)
    warm = _compile.CompileReport(import_seconds=0.25)
    deferred = _compile.CompileReport(deferred=True)
    for report in (cold, warm, deferred):
        assert "kernel group" in report.summary()
    assert cold.summary().startswith("compiled 1 kernel group (7 instances) at import in 1.5 s")


def test_describe_command_needs_no_gpu(capsys):
    assert main(["describe", "transpose"]) == 0
    out = capsys.readouterr().out
    assert all(rung in out for rung in TRANSPOSE_RUNGS)
    assert main(["describe", "matmul", MATMUL_RUNGS[-1]]) == 0
    out = capsys.readouterr().out
    assert f"matmul_{MATMUL_RUNGS[-1]}(" in out and "__global__" in out
    assert main(["describe", "reduce"]) == 0  # a ladder's name describes its operations' rungs
    out = capsys.readouterr().out
    assert all(rung in out for rung in REDUCE_RUNGS)
    assert main(["describe", "sum", REDUCE_RUNGS[0], "--no-source"]) == 0
    assert "__global__" not in capsys.readouterr().out


# --- measurements and results -----------------------------------------------------------------------

def test_measurement_properties():
    r = row("sum", "two_pass", (8192, 8192), 1.0, axis=0)
    assert (r.ladder, r.axis, r.case, r.size_bytes) == ("reduce", 0, "8192x8192 axis=0", 8192**2 * 4)
    m = row("matmul", "tiled", (2, 3, 4), 1.0, input_bytes=(6 + 12) * 4)
    assert (m.ladder, m.axis, m.case, m.size_bytes) == ("matmul", None, "2x3x4", (6 + 12) * 4)
    # two permutations of one shape are two cases (tables and plots keep them apart)
    p = [row("permute_dims", "auto", (4, 5, 6), 1.0, axes=axes) for axes in ([2, 0, 1], [1, 0, 2])]
    assert [x.case for x in p] == ["4x5x6 axes=(2, 0, 1)", "4x5x6 axes=(1, 0, 2)"]
    w = row("matmul", "gemv", (1, 64, 32), 1.0, b="W.T")
    assert w.case == "1x64x32 b=W.T"
    assert row("matmul", "auto", (64, 64, 32), 1.0, a="X.T").case == "64x64x32 a=X.T"
    assert row("matmul", "auto", (64, 64, 32), 1.0, a="X.T", b="W.T").case == "64x64x32 a=X.T b=W.T"


def test_split_methods():
    split = benchmark.split_methods(["transpose", "matmul", "sum"], ["naive", REDUCE_RUNGS[0]])
    assert split == {"transpose": ("naive",), "matmul": ("naive",), "sum": (REDUCE_RUNGS[0],)}
    assert benchmark.split_methods(["matmul"], None) == {"matmul": None}
    with pytest.raises(ValueError, match="bogus"):
        benchmark.split_methods(["transpose"], ["bogus"])


def test_targets_name_operations_and_ladders():
    assert [op.name for op in benchmark.resolve_targets("reduce")] == list(REDUCTIONS)
    assert [op.name for op in benchmark.resolve_targets(["sum", "transpose"])] == ["sum",
                                                                                  "transpose"]
    assert [op.name for op in benchmark.resolve_targets("all")] == list(OPERATIONS)
    with pytest.raises(ValueError, match="unknown benchmark target"):
        benchmark.resolve_targets("fft")


def test_predictor_scales_with_work():
    predictor = _sweep._Predictor()
    assert predictor.predict_ms(("a",), 8.0) == 0.0
    predictor.record(("a",), 1.0, 40.0)
    assert predictor.predict_ms(("a",), 8.0) == pytest.approx(320.0)
    assert predictor.predict_ms(("a",), 0.5) == 0.0
    predictor.record(("a",), 2.0, math.nan)  # a failed measurement predicts nothing
    assert predictor.predict_ms(("a",), 8.0) == pytest.approx(320.0)


def test_sweeps_come_from_each_operations_spec():
    spec = OPERATIONS["transpose"].bench
    full = spec.cases("transpose", **{k: spec.defaults[k] for k in ("sizes", "dtypes", "shapes")})
    squares = [c.shape for c in full if c.sweep == "size"]
    assert squares[0][0] ** 2 * 4 < 50 * 2**20 < squares[-1][0] ** 2 * 4
    assert {"int8", "float16", "float32", "float64"} <= {c.dtype for c in full}
    assert {"odd", "stacked"} <= {c.sweep for c in full}
    reduce_spec = OPERATIONS["sum"].bench
    assert max(reduce_spec.quick["sizes"]) < 2**20
    cases = reduce_spec.cases("sum", sizes=(), dtypes=(), shapes=(),
                              axis_cases=reduce_spec.defaults["axis_cases"])
    axes = {(c.shape, c.kwargs["axis"]) for c in cases}
    assert {((8192, 8192), 0), ((8192, 8192), 1), ((10**6, 2), 1), ((1, 2**24), 1)} <= axes
    matmul = OPERATIONS["matmul"].bench.cases("matmul", sizes=(3,), dtypes=("tf32",), shapes=())
    assert [(c.shape, c.dtype) for c in matmul] == [((3, 3, 3), "tf32")]
    # a stack of products is (B, M, K, N); anything else is refused before any timing
    stacked = OPERATIONS["matmul"].bench.cases("matmul", sizes=(), dtypes=("float32",),
                                               shapes=((256, 128, 256, 128),))
    assert [c.shape for c in stacked] == [(256, 128, 256, 128)]
    with pytest.raises(ValueError, match="stack of B"):
        OPERATIONS["matmul"].bench.cases("matmul", sizes=(), dtypes=("float32",),
                                         shapes=((2, 2, 3, 4, 5),))
    from gpukernels.ops.matmul.check import inputs

    (a, b), _ = inputs((2, 3, 4, 5), "float32", 0)
    assert a.shape == (2, 3, 4) and b.shape == (2, 4, 5)
    for op in OPERATIONS.values():  # every operation is in the main job
        assert op.bench.main_cases(op.name, True) and op.bench.main_cases(op.name, False)


def test_result_sequence_filter_and_wrong():
    result = synthetic_result()
    assert result.ladders == ("transpose", "matmul", "reduce")
    assert len(result) == len(result.measurements) and result[0] is result.measurements[0]
    assert [r.status for r in result.wrong] == ["wrong"]
    rungs = result.filter(operation="transpose", dtype=("int8",), role="rung")
    assert {r.method for r in rungs} == set(TRANSPOSE_RUNGS)
    assert result.filter(shape=(8191, 8193), role="ceiling").measurements[0].dtype == "int8"
    joined = BenchResult.join([result.filter(operation="matmul"), result.filter(operation="sum")])
    assert joined.ladders == ("matmul", "reduce")


def test_text_table():
    text = str(synthetic_result())
    lines = text.splitlines()
    assert lines[0].startswith("NVIDIA H100 80GB HBM3 (sm_90, 132 SMs), CuPy 14.2.0")
    assert "x ceil" in lines[1] and "per call" in lines[1] and "held ms" in lines[1]
    body = "\n".join(lines[3:])
    for word in ("NO", "skip", "n/s", "8192x8192 axis=0", "GB/s", "TFLOP/s", "device copy"):
        assert word in body, word
    assert "nan" not in body.lower()


def test_html_and_markdown():
    result = synthetic_result()
    page = result._repr_html_()
    assert page.count("<tr") == len(result) + 1
    assert "NVIDIA H100" in page and "cupy.ascontiguousarray(x.T)" in page
    markdown = result.to_markdown().splitlines()
    assert len(markdown) == len(result) + 2
    assert all(line.startswith("| ") and line.endswith(" |") for line in markdown)
    assert "<BenchResult: " in repr(result)


def test_json_round_trip(tmp_path):
    result = synthetic_result()
    path = result.save_json(tmp_path / "sub" / "bench.json")
    data = json.loads(path.read_text())  # strict JSON: NaN is written as null
    assert data["environment"] == ENVIRONMENT
    assert len(data["measurements"]) == len(result)
    skipped = next(m for m in data["measurements"] if m["status"] == "skipped")
    assert skipped["time_ms"] is None and skipped["notes"]["reason"]
    loaded = BenchResult.load(path)
    assert len(loaded) == len(result)
    for before, after in zip(result, loaded):
        assert (after.operation, after.method, after.shape, after.status, after.axis,
                after.role, after.ladder) == (before.operation, before.method, before.shape,
                                              before.status, before.axis, before.role,
                                              before.ladder)
        assert math.isnan(after.rate) == math.isnan(before.rate)
        assert math.isnan(after.call_ratio) == math.isnan(before.call_ratio)


def test_earlier_results_load(tmp_path):
    # A file of an earlier version: "kind", the per-call time in the notes, no ladder.
    entry = {"operation": "sum", "method": "one_pass", "shape": [16], "dtype": "int32",
             "correct": True, "time_ms": 0.01, "rate": 3000.0, "unit": "GB/s", "ratio": 1.0,
             "ceiling": "cupy.sum", "kind": "rung", "notes": {"call_ms": 0.02},
             "status": "ok", "sweep": "size"}
    (tmp_path / "old.json").write_text(json.dumps({"environment": {}, "measurements": [entry]}))
    (loaded,) = BenchResult.load(tmp_path / "old.json")
    assert (loaded.role, loaded.ladder, loaded.call_ms) == ("rung", "reduce", 0.02)


def test_legacy_write_json(tmp_path):
    benchmark.write_json(synthetic_result().measurements[:3], tmp_path / "legacy.json", ENVIRONMENT)
    assert len(BenchResult.load(tmp_path / "legacy.json")) == 3


def test_progress_lines_and_bar(capsys):
    lines = []
    progress = _sweep._Progress(2, lines.append, "test")
    progress.start("case one")
    progress.done()
    progress.close()
    assert lines == ["case one ..."]
    pytest.importorskip("tqdm")
    bar = _sweep._Progress(2, True, "sweeping")
    bar.start("case one")
    bar.done()
    bar.close()
    assert "sweeping" in capsys.readouterr().err
    silent = _sweep._Progress(2, False, "quiet")
    silent.start("case")
    silent.done()
    silent.close()
    assert capsys.readouterr().err == ""


# --- plots ------------------------------------------------------------------------------------------

def is_png(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def legend_labels(figure) -> list[str]:
    legends = list(figure.legends) + [legend for sub in figure.subfigs for legend in sub.legends]
    return [text.get_text() for legend in legends for text in legend.get_texts()]


def test_plot_one_line_per_rung_and_the_ceiling():
    pytest.importorskip("matplotlib")
    result = synthetic_result()
    figure = result.plot("transpose")
    labels = legend_labels(figure)
    assert "device copy (ceiling)" in labels and "cupy.ascontiguousarray(x.T)" in labels
    assert set(TRANSPOSE_RUNGS) <= {label.split(" (")[0] for label in labels}
    assert "wrong result" in labels and any("8191x8193" in label for label in labels)
    axes = [ax for ax in figure.axes if ax.get_visible()]
    assert [ax.get_title() for ax in axes] == ["int8", "float32"]
    for ax in axes:
        assert ax.get_xscale() == "log" and "GB/s" in ax.get_ylabel()
        lines = [line for line in ax.get_lines() if len(line.get_xdata()) == 3]
        assert len(lines) == len(TRANSPOSE_RUNGS) + 2  # the rungs, the copy, CuPy
    assert "H100" in figure.get_suptitle()


def test_plot_matmul_marks_skipped_rungs():
    pytest.importorskip("matplotlib")
    labels = legend_labels(synthetic_result().plot("matmul"))
    assert f"{MATMUL_RUNGS[0]} (skipped at 8192)" in labels
    assert "cupy.matmul (cuBLAS), ceiling" in labels


def test_plot_permutations_as_bars_per_input():
    pytest.importorskip("matplotlib")
    rows = [row("permute_dims", method, (64, 32, 16), rate, role=role, sweep="shape", axes=axes)
            for axes in ([2, 0, 1], [1, 0, 2])
            for method, role, rate in (("device copy", "ceiling", 3000.0), ("tiled", "rung", 2700.0))]
    figure = BenchResult(rows, {"device": "H100"}).plot("permute")
    axes = [ax for ax in figure.axes if ax.get_visible()]
    assert [ax.get_title() for ax in axes] == ["permute_dims by input, float32"]
    assert [t.get_text() for t in axes[0].get_yticklabels()] == [
        "64x32x16 axes=(2, 0, 1)", "64x32x16 axes=(1, 0, 2)"]
    assert len(axes[0].patches) == 4  # a bar per candidate and input


def test_plot_reductions_with_axis_cases():
    pytest.importorskip("matplotlib")
    figure = synthetic_result().plot("reduce")
    titles = [ax.get_title() for ax in figure.axes if ax.get_visible()]
    assert titles == ["sum, float32", "sum over some axes, float32"]
    bars = figure.axes[1]
    assert [t.get_text() for t in bars.get_yticklabels()] == ["8192x8192 axis=0", "1000000x2 axis=1"]
    assert any("not supported" in t.get_text() for t in bars.texts)
    assert "cupy.sum (ceiling)" in legend_labels(figure)


def test_plot_every_family_in_one_figure():
    pytest.importorskip("matplotlib")
    figure = synthetic_result().plot()
    assert len(figure.subfigs) == 3
    with pytest.raises(ValueError, match="no 'bogus' measurements"):
        synthetic_result().plot("bogus")
    with pytest.raises(ValueError, match="no measurements"):
        BenchResult([]).plot()


def test_save_plots(tmp_path):
    pytest.importorskip("matplotlib")
    result = synthetic_result()
    paths = result.save_plots(tmp_path / "bench.png")
    assert [p.name for p in paths] == ["bench-transpose.png", "bench-matmul.png", "bench-reduce.png"]
    for path in paths:
        width, height = is_png(path)
        assert width > 600 and height > 400
    (only,) = result.filter(operation="matmul").save_plots(tmp_path / "matmul.png")
    assert only.name == "matmul.png"


def test_plot_command(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    synthetic_result().save_json(tmp_path / "bench.json")
    assert main(["plot", str(tmp_path / "bench.json"), "--markdown", str(tmp_path / "t.md")]) == 0
    assert sorted(p.name for p in tmp_path.glob("*.png")) == \
        ["bench-matmul.png", "bench-reduce.png", "bench-transpose.png"]
    assert (tmp_path / "t.md").read_text().startswith("| operation |")
    assert "wrote" in capsys.readouterr().err


# --- on the GPU: the sweeps themselves ---------------------------------------------------------------

FAST = Timing(repeat=3, call_repeat=3, warmup=1, max_seconds=0.02)


def assert_case_complete(result, rungs, ceiling):
    for case in {(r.operation, r.case, r.dtype) for r in result}:
        rows = [r for r in result if (r.operation, r.case, r.dtype) == case]
        methods = [r.method for r in rows]
        assert methods.count(ceiling) == 1, case
        assert set(rungs) <= set(methods), case
        top = next(r for r in rows if r.method == ceiling)
        assert top.role == "ceiling" and top.ratio == pytest.approx(1.0)
        assert top.call_ratio == pytest.approx(1.0)
        for r in rows:
            if r.status == "ok":
                assert r.time_ms > 0 and r.rate > 0 and r.ceiling == ceiling
                assert r.call_ms > 0 and r.call_rate > 0 and math.isfinite(r.call_ratio)
                assert r.notes["runs"] >= 1 and r.notes["call_runs"] >= 1
                if r.role == "rung":
                    assert r.correct is True, r


@pytest.mark.gpu
def test_held_time_leaves_out_host_time_and_falls_back_when_the_call_waits():
    import time

    import cupy
    x = cupy.ones(1 << 20, dtype=cupy.float32)

    def slow_host():  # 20 ms of host time before a kernel of a few microseconds
        time.sleep(0.020)
        return x * 2

    # Margins wide enough for a GPU shared with other test workers (pytest -n).
    timing = Timing(repeat=5, call_repeat=5, warmup=1, max_seconds=1.0)
    notes = _timing.time_call(slow_host, timing, 0.0)
    assert notes["held"] is True and notes["runs"] == 5
    # One call from Python waits through the sleep. (Its start event is stamped when the GPU
    # reaches it, a little late on a GPU that other test workers keep busy: 19.9 ms was seen.)
    assert notes["call_ms"] >= 18.0
    assert notes["time_ms"] < 10.0  # the device work alone does not

    def waits_on_the_device():  # the hold cannot outlast a synchronisation inside the call
        y = x * 2
        cupy.cuda.Device().synchronize()
        return y

    notes = _timing.time_call(waits_on_the_device, timing, 0.0)
    assert notes["held"] is False
    assert notes["time_ms"] == pytest.approx(notes["call_ms"])


@pytest.mark.gpu
def test_bench_transpose_small():
    result = benchmark.bench("transpose", sizes=(64, 256), dtypes=("int8", "float64"),
                             shapes=[(33, 65), (3, 17, 19)], timing=FAST, progress=False)
    assert not result.wrong
    assert {r.sweep for r in result} == {"size", "odd", "stacked"}
    assert_case_complete(result, TRANSPOSE_RUNGS, "device copy")
    assert "cupy.ascontiguousarray(x.T)" in {r.method for r in result}
    assert result.environment["device"] and result.environment["cupy"]
    # The word rungs move 1- and 2-byte elements: float64 rows say so.
    for r in result.filter(dtype="float64", method=("words", "words_async")):
        assert r.status == "not supported" and r.notes["reason"]


@pytest.mark.gpu
def test_bench_matmul_small():
    result = benchmark.bench("matmul", sizes=(64, 128), shapes=[(63, 65, 67)], timing=FAST,
                             progress=False)
    assert not result.wrong
    assert {r.dtype for r in result} == {"float32", "float16", "bfloat16", "tf32"}
    assert_case_complete([r for r in result if r.dtype in ("float32", "float16")], MATMUL_RUNGS,
                         "cupy.matmul (cuBLAS)")
    assert all(r.unit == "TFLOP/s" for r in result)
    # Rungs that do not compute a dtype say so; TF32 runs on the tensor cores only, float16 and
    # bfloat16 on every rung.
    for r in result:
        tensor = r.method in TENSOR_METHODS
        if r.role == "rung" and (r.dtype == "tf32") != tensor \
                and r.dtype not in ("float16", "bfloat16"):
            assert r.status == "not supported", r
    # PyTorch is the ceiling for TF32 and bfloat16 (CuPy has no per-call TF32 switch).
    for dtype, rungs, ceiling in (("tf32", TENSOR_METHODS, "torch.matmul TF32 (cuBLAS)"),
                                  ("bfloat16", MATMUL_RUNGS, "torch.matmul (cuBLAS)")):
        if any(r.method == ceiling and r.status == "ok" for r in result):
            assert_case_complete([r for r in result if r.dtype == dtype], rungs, ceiling)


@pytest.mark.gpu
def test_bench_matmul_with_b_transposed():
    # x @ W.T: a decode product and a square one, float16 on the tensor-core rungs and auto;
    # every result checked, the decode product given against a copy of W
    result = benchmark.bench("matmul", sizes=(128,), shapes=[(1, 256, 520)], dtypes=("float16",),
                             methods=("mma", "gemv", "auto"), timing=FAST, progress=False,
                             b_transposed=True)
    assert not result.wrong
    assert {r.case for r in result} == {"128x128x128 b=W.T", "1x256x520 b=W.T"}
    assert all(r.status == "ok" for r in result if r.method in ("gemv", "auto"))
    assert "1x256x520 b=W.T" in result.summary()


@pytest.mark.gpu
def test_bench_matmul_with_a_transposed():
    # X.T @ Y and X.T @ W.T: a square product on the Hopper rungs' M-major A where they run,
    # and a decode-shaped one, float16, every result checked
    result = benchmark.bench("matmul", sizes=(128,), shapes=[(16, 256, 520)], dtypes=("float16",),
                             methods=("mma", "auto"), timing=FAST, progress=False,
                             a_transposed=True)
    assert not result.wrong
    assert {r.case for r in result} == {"128x128x128 a=X.T", "16x256x520 a=X.T"}
    assert all(r.status == "ok" for r in result if r.method == "auto")
    both = benchmark.bench("matmul", sizes=(128,), shapes=[], dtypes=("float16",),
                           methods=("auto",), timing=FAST, progress=False, a_transposed=True,
                           b_transposed=True)
    assert not both.wrong and {r.case for r in both} == {"128x128x128 a=X.T b=W.T"}


@pytest.mark.gpu
def test_bench_reduce_small():
    result = benchmark.bench("reduce", sizes=(1000, 2**16), dtypes=("float32", "int32"),
                             axis_cases=[((256, 256), 0), ((300, 2), 1), ((1, 4096), 1)],
                             timing=FAST, progress=False)
    assert not result.wrong
    assert {r.operation for r in result} == set(REDUCTIONS)
    for operation in REDUCTIONS:
        full = [r for r in result.filter(operation=operation) if r.sweep != "axis"]
        ceiling = "cupy.sum (CUB)" if operation in ("mean", "var", "std", "argmin", "argmax") \
            else f"cupy.{operation}"
        assert_case_complete(full, REDUCE_RUNGS, ceiling)
    axis_rows = [r for r in result if r.sweep == "axis" and r.role == "rung"]
    assert axis_rows and all(r.status == "ok" and r.method == "axis kernels" for r in axis_rows)
    assert len(axis_rows) == 3 * len(REDUCTIONS)  # one row per case and operation


def _replace_function(monkeypatch, name, function):
    """Put ``function`` in the registry's place of operation ``name`` for the test."""
    monkeypatch.setitem(OPERATIONS, name, dataclasses.replace(OPERATIONS[name], function=function))


@pytest.mark.gpu
def test_a_wrong_rung_is_flagged(monkeypatch):
    real = OPERATIONS["transpose"].function

    def broken(x, *, method="auto", out=None):
        result = real(x, method=method, out=out)
        if method == TRANSPOSE_RUNGS[0]:
            result[0, 0] += 1
        return result

    _replace_function(monkeypatch, "transpose", broken)
    result = benchmark.bench("transpose", sizes=(64,), dtypes=("int32",), shapes=(),
                             timing=FAST, progress=False)
    assert [(r.method, r.status) for r in result.wrong] == [(TRANSPOSE_RUNGS[0], "wrong")]


@pytest.mark.gpu
def test_the_main_job_catches_a_planted_wrong_rung(monkeypatch, capsys):
    # prod's shuffle rung made wrong: python -m gpukernels says so and exits 1, both from the
    # timed check and from the comparison with NumPy.
    real = OPERATIONS["prod"].function

    def planted(x, *args, method="auto", out=None, **kwargs):
        result = real(x, *args, method=method, out=out, **kwargs)
        if method == "shuffle":
            result[...] = result * 2 + 1
        return result

    _replace_function(monkeypatch, "prod", planted)
    assert main(["--quick", "--ops", "prod"]) == 1
    out = capsys.readouterr().out
    assert "wrong result(s): prod/shuffle" in out
    rows = benchmark.main_job(["prod"], quick=True, progress=False, timing=FAST)
    wrong = [r for r in rows if r.correct is False]
    assert wrong and {r.method for r in wrong} == {"shuffle"}
    assert all("WRONG" in r.notes["numpy_check"] for r in wrong)


@pytest.mark.gpu
def test_failures_are_recorded_not_raised(monkeypatch):
    def failing(x, *, method="auto", out=None):
        if method == TRANSPOSE_RUNGS[-1]:
            raise RuntimeError("boom")
        raise NotImplementedError("not this one")

    monkeypatch.setitem(OPERATIONS, "transpose", dataclasses.replace(
        OPERATIONS["transpose"], function=failing))
    monkeypatch.setattr(type(OPERATIONS["transpose"]), "supports", lambda *a, **k: True)
    result = benchmark.bench("transpose", sizes=(64,), dtypes=("int32",), shapes=(),
                             timing=FAST, progress=False)
    statuses = {r.method: r.status for r in result if r.role == "rung"}
    assert statuses[TRANSPOSE_RUNGS[-1]] == "error"
    assert all(statuses[m] == "error" for m in TRANSPOSE_RUNGS[:-1])
    assert "boom" in result.filter(method=TRANSPOSE_RUNGS[-1])[0].notes["error"]


@pytest.mark.gpu
def test_slow_rungs_are_skipped():
    timing = Timing(repeat=2, call_repeat=2, warmup=0, max_seconds=0.01, max_call_ms=0.0)
    result = benchmark.bench("matmul", sizes=(32, 64), shapes=(), timing=timing, progress=False)
    runs = [r for r in result if r.status != "not supported"]  # (rungs without the dtype)
    second = [r for r in runs if r.shape == (64, 64, 64)]
    assert {r.status for r in second} == {"skipped"}
    assert "predicted" in second[0].notes["reason"]
    assert all(r.status == "ok" for r in runs if r.shape == (32, 32, 32))


@pytest.mark.gpu
def test_bench_command_writes_json_and_plots(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    argv = ["bench", "all", "--quick", "--repeat", "2", "--call-repeat", "2", "--max-time",
            "0.01", "--no-progress", "--json", str(tmp_path / "bench.json"), "--plot",
            str(tmp_path / "bench.png")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "x ceil" in out and "per call" in out
    data = json.loads((tmp_path / "bench.json").read_text())
    for key in ("device", "date", "cupy", "numpy", "driver", "runtime", "sm_clock_max_mhz"):
        assert key in data["environment"], key
    methods = {(m["operation"], m["method"]) for m in data["measurements"]}
    assert {("transpose", m) for m in TRANSPOSE_RUNGS} <= methods
    assert {("matmul", m) for m in MATMUL_RUNGS} <= methods
    assert {(op, m) for op in REDUCTIONS for m in REDUCE_RUNGS} <= methods
    assert {("transpose", "device copy"), ("matmul", "cupy.matmul (cuBLAS)"),
            ("sum", "cupy.sum")} <= methods
    for ladder in ("transpose", "matmul", "reduce"):
        is_png(tmp_path / f"bench-{ladder}.png")


@pytest.mark.gpu
def test_main_job_quick(capsys):
    assert main(["--quick", "--ops", "sum", "--json", "/dev/null"]) == 0
    captured = capsys.readouterr()
    assert "cupy.sum" in captured.out and all(m in captured.out for m in REDUCE_RUNGS)
    assert "kernel group" in captured.err  # what was compiled, or loaded from CuPy's cache
    rows = benchmark.main_job(["transpose"], quick=True, progress=False,
                              timing=Timing(repeat=2, call_repeat=2, warmup=0, max_seconds=0.01))
    assert {"copy_row", "copy_col", "device copy"} <= {r.method for r in rows}
    checked = {r.method for r in rows if r.role == "rung" and "numpy_check" in r.notes}
    assert set(TRANSPOSE_RUNGS) - {"words", "words_async"} <= checked
    assert all(r.correct for r in rows if r.role == "rung" and r.status == "ok")


@pytest.mark.gpu
def test_main_job_checks_every_rung_of_every_operation():
    rows = benchmark.main_job(quick=True, progress=False,
                              timing=Timing(repeat=1, call_repeat=1, warmup=0, max_seconds=0.01))
    checked = {(r.operation, r.method) for r in rows if "numpy_check" in r.notes}
    for name, op in OPERATIONS.items():
        for rung in op.ladder.names:
            if name == "transpose" and rung.startswith("words"):
                continue  # float32 rows are whole words; the word rungs take 1 and 2 bytes
            if name == "matmul" and rung in ("wgmma", "split_k") and not any(
                    r.method == rung and r.status == "ok" for r in rows):
                continue  # Hopper only
            assert (name, rung) in checked, (name, rung)
    assert not [r for r in rows if r.correct is False]


@pytest.mark.gpu
def test_environment_on_the_device():
    env = benchmark.environment()
    assert env["l2_bytes"] > 0 and env["multiprocessors"] > 0
    assert "sm_clock_max_mhz" in env and "memory_clock_max_mhz" in env
    assert env["gpukernels"] == gk.__version__
    assert numpy.__version__ == env["numpy"]


# --- matmul's shape suite ----------------------------------------------------------------------------

def test_the_shape_suite_covers_the_extents_and_the_named_shapes():
    from gpukernels.ops.matmul.check import NAMED_SHAPES, SWEEP_EXTENTS, suite_shapes

    shapes = suite_shapes()
    assert len(shapes) >= 200 and len(set(shapes)) == len(shapes)
    assert shapes[:len(NAMED_SHAPES)] == NAMED_SHAPES
    sweep = shapes[len(NAMED_SHAPES):]
    extents = set(SWEEP_EXTENTS)
    assert all(set(shape) <= extents for shape in sweep)
    assert {(m, n) for m, _, n in sweep} == {(m, n) for m in extents for n in extents}
    for position in (0, 2):  # every K meets every M and every N
        assert {(shape[position], k) for shape in sweep for k in [shape[1]]} == \
            {(e, k) for e in extents for k in extents}
    cases = OPERATIONS["matmul"].bench.cases("matmul", sizes=(512,), dtypes=("float16",),
                                             shapes=[(5, 7, 9)], suite=True)
    assert [c.shape for c in cases] == list(shapes) + [(5, 7, 9)]
    assert {c.sweep for c in cases[:len(NAMED_SHAPES)]} == {"named"}
    assert {c.sweep for c in cases[len(NAMED_SHAPES):]} == {"suite"}


def suite_rows():
    rows = []
    for shape, held, call in [((64, 64, 64), 0.5, 0.8), ((4096,) * 3, 0.8, 0.9),
                              ((1, 8192, 8192), 0.25, 0.5)]:
        notes = {}
        if shape[0] == 1:
            notes = {"copy_gbps": 3000.0, "moved_bytes": 2 * 8192 * 8192 + 4 * 8192}
        sweep = "named" if shape[0] == 1 else "suite"
        rows.append(row("matmul", "cupy.matmul (cuBLAS)", shape, 500.0, dtype="float16",
                        role="ceiling", sweep=sweep, **notes))
        rows.append(dataclasses.replace(
            row("matmul", "auto", shape, 500.0 * held, dtype="float16", sweep=sweep, **notes),
            ratio=held, call_ratio=call, time_ms=0.2))
    return rows


def test_the_suite_summary_gives_minimum_and_geometric_mean():
    text = OPERATIONS["matmul"].bench.summary(suite_rows())
    line = next(line for line in text.splitlines() if line.startswith("float16   auto"))
    fields = line.split()
    assert fields[2] == "3"
    assert float(fields[3]) == pytest.approx(0.25, abs=0.005)  # min held
    assert float(fields[4]) == pytest.approx((0.5 * 0.8 * 0.25) ** (1 / 3), abs=0.005)
    assert float(fields[5]) == pytest.approx(0.5, abs=0.005)  # min per call
    assert fields[-1] == "1x8192x8192"  # the worst shape
    decode = next(line for line in text.splitlines() if "auto" in line and "1x8192x8192" in line
                  and "GB/s" in line)
    moved = 2 * 8192 * 8192 + 4 * 8192
    assert float(decode.split()[3]) == pytest.approx(moved / 0.2e-3 / 1e9 / 3000, abs=0.005)
    assert OPERATIONS["matmul"].bench.summary(synthetic_result()) == ""  # no suite: nothing
    assert BenchResult(suite_rows(), ENVIRONMENT).summary() == text  # the result's own summary
    assert synthetic_result().summary() == ""


def test_decode_products_timed_outside_the_suite_are_given_against_a_copy():
    # `bench matmul --shapes 1x8192x8192` without --suite: no suite figures, but the decode
    # product still as a fraction of a device copy.
    rows = [dataclasses.replace(r, sweep="odd") for r in suite_rows() if r.case == "1x8192x8192"]
    text = OPERATIONS["matmul"].bench.summary(rows)
    assert "Shape suite" not in text and "Decode products" in text
    decode = next(line for line in text.splitlines() if line.startswith("float16   auto"))
    moved = 2 * 8192 * 8192 + 4 * 8192
    assert float(decode.split()[3]) == pytest.approx(moved / 0.2e-3 / 1e9 / 3000, abs=0.005)


def test_the_suite_plots_ratios_against_work():
    pytest.importorskip("matplotlib")
    figure = BenchResult(suite_rows(), ENVIRONMENT).plot("matmul")
    (ax,) = [ax for ax in figure.axes if ax.get_visible()]
    assert "ratio" in ax.get_ylabel() and ax.get_yscale() == "log"
    labels = legend_labels(figure)
    assert "auto, held" in labels and "auto, per call" in labels


def test_transposed_operands_cases_and_inputs():
    # `bench matmul --a-transposed --b-transposed`: every case carries the options given, its
    # a the transposed view of a row-major K x M array (X.T @ Y) and its b that of a row-major
    # N x K array (x @ W.T), not row-major M x K and K x N ones
    from gpukernels.ops.matmul.check import inputs

    spec = OPERATIONS["matmul"].bench
    for given, labels in (({"b_transposed": True}, {"b": "W.T"}),
                          ({"a_transposed": True}, {"a": "X.T"}),
                          ({"a_transposed": True, "b_transposed": True}, {"a": "X.T", "b": "W.T"})):
        for suite in (False, True):
            cases = spec.cases("matmul", sizes=(64,), dtypes=("float16",), shapes=[(1, 96, 80)],
                               suite=suite, **given)
            assert cases and all(dict(c.options) == labels for c in cases)
            assert ", ".join(f"{k}={v}" for k, v in labels.items()) in cases[-1].label
    assert all(c.options == () for c in spec.cases("matmul", sizes=(64,), dtypes=("float16",),
                                                   shapes=[]))
    for shape in ((3, 5, 7), (2, 3, 5, 7)):
        (a, b), _ = inputs(shape, numpy.float16, 4, a_transposed=True, b_transposed=True)
        (plain_a, plain_b), _ = inputs(shape, numpy.float16, 4)
        assert a.shape == plain_a.shape == shape[:-1]
        assert b.shape == plain_b.shape == (*shape[:-3], 5, 7)
        for view in (a, b):
            assert view.swapaxes(-1, -2).flags.c_contiguous and not view.flags.c_contiguous
        assert plain_a.flags.c_contiguous and plain_b.flags.c_contiguous


def record_bench_arguments(monkeypatch) -> dict:
    """``benchmark.bench`` replaced by one that records its arguments (in the dict returned)
    and returns the suite's rows: the command line's options without a GPU."""
    seen: dict = {}

    def fake_bench(target, **kwargs):
        seen.update(kwargs, target=target)
        return BenchResult(suite_rows(), ENVIRONMENT)

    monkeypatch.setattr(benchmark, "bench", fake_bench)
    return seen


def test_transposed_operands_on_the_command_line(monkeypatch):
    seen = record_bench_arguments(monkeypatch)
    assert main(["bench", "matmul", "--b-transposed", "--shapes", "1x64x32",
                 "--no-progress"]) == 0
    assert seen["b_transposed"] is True and list(seen["shapes"]) == [(1, 64, 32)]
    assert "a_transposed" not in seen
    assert main(["bench", "matmul", "--a-transposed", "--no-progress"]) == 0
    assert seen["a_transposed"] is True
    for flag in ("--a-transposed", "--b-transposed"):
        with pytest.raises(SystemExit):
            main(["bench", "cumsum", flag])


def test_suite_on_the_command_line(monkeypatch):
    seen = record_bench_arguments(monkeypatch)
    assert main(["bench", "matmul", "--suite", "--no-progress"]) == 0
    assert seen["suite"] is True and seen["dtypes"] == ["float16", "bfloat16"]
    assert seen["methods"] == ["auto"]
    with pytest.raises(SystemExit):
        main(["bench", "sum", "--suite"])


@pytest.mark.parametrize("operation", ("sum", "prod", "min", "max"))
def test_reduction_candidates_on_host_data(operation, monkeypatch):
    # The sum family's benchmark candidates with NumPy standing in for CuPy: the CUB ceiling
    # checked against the reference, one row per rung (the axis kernels along an axis), the
    # work and notes of the case.
    from gpukernels._core import device

    monkeypatch.setattr(device, "cupy", numpy)
    monkeypatch.setattr(device, "torch_on_gpu", lambda: None)
    spec = OPERATIONS[operation].bench
    rungs = gk.methods(operation)
    for options in ((), (("axis", 0),)):
        case = _sweep.Case(operation, (3000, 40), "float32", "axis" if options else "size",
                           options)
        candidates, work, notes = spec.candidates(case, rungs, 7, torch=True)
        ceiling, *rest = candidates
        assert (ceiling.method, ceiling.role) == (f"cupy.{operation}", "ceiling")
        assert ceiling.check(ceiling.run())
        assert not ceiling.check(numpy.float32(-1.0))  # a wrong answer fails the check
        assert [r.method for r in rest] == (list(rungs) if not options else ["axis kernels"])
        assert all(r.role == "rung" for r in rest)
        assert work == 3000 * 40 * 4 / 1e9 and notes["input_bytes"] == 3000 * 40 * 4
        assert notes.get("axis") == dict(options).get("axis")
