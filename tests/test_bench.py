"""The benchmark harness and the command line: parsing, tables, JSON, plots, and (GPU) sweeps.

The CPU tests build results from synthetic measurements; the GPU tests run the smallest sweeps
and check what they record, never how fast anything is.
"""

from __future__ import annotations

import json
import math
import struct
import sys

import numpy
import pytest

import gpukernels as gk
from gpukernels import benchmark
from gpukernels.__main__ import build_parser, main
from gpukernels.benchmark import BenchResult, Measurement, Timing
from gpukernels.introspect import ladder_methods, reduction_operations

GPU = gk.gpu_available()
TRANSPOSE_RUNGS = gk.methods("transpose")
MATMUL_RUNGS = gk.methods("matmul")
TENSOR_METHODS = sys.modules[gk.matmul.__module__].TENSOR_CORE_METHODS
REDUCE_RUNGS = ladder_methods("sum")
ENVIRONMENT = {"device": "NVIDIA H100 80GB HBM3", "date": "2026-11-22T10:00:00+00:00",
               "l2_bytes": 50 * 2**20, "compute_capability": "9.0", "multiprocessors": 132,
               "cupy": "14.2.0"}


def row(operation, method, shape, rate, *, dtype="float32", kind="rung", sweep="size",
        correct=True, status="ok", unit=None, **notes):
    unit = unit or ("TFLOP/s" if operation == "matmul" else "GB/s")
    finite = math.isfinite(rate)
    return Measurement(operation, method, tuple(shape), dtype,
                       correct if kind != "ceiling" else None, 1.0 if finite else math.nan, rate,
                       unit, ratio=rate / 3000 if finite else math.nan, kind=kind, notes=notes,
                       status=status, sweep=sweep)


def synthetic_result() -> BenchResult:
    """Measurements shaped like a real sweep of every family, with every kind of row."""
    rows = []
    for dtype in ("int8", "float32"):
        for n in (1024, 4096, 16384):
            rows.append(row("transpose", "device copy", (n, n), 2900.0, dtype=dtype, kind="ceiling"))
            rows += [row("transpose", m, (n, n), 500.0 * (i + 1), dtype=dtype)
                     for i, m in enumerate(TRANSPOSE_RUNGS)]
            rows.append(row("transpose", "cupy.ascontiguousarray(x.T)", (n, n), 950.0,
                            dtype=dtype, kind="library"))
        rows.append(row("transpose", "device copy", (8191, 8193), 2800.0, dtype=dtype,
                        kind="ceiling", sweep="odd"))
        rows += [row("transpose", m, (8191, 8193), 400.0 * (i + 1), dtype=dtype, sweep="odd")
                 for i, m in enumerate(TRANSPOSE_RUNGS)]
    rows[1] = row("transpose", TRANSPOSE_RUNGS[0], (1024, 1024), 450.0, dtype="int8",
                  correct=False, status="wrong")
    for n in (512, 2048, 8192):
        rows.append(row("matmul", "cupy.matmul (cuBLAS)", (n, n, n), 51.0, kind="ceiling"))
        rows += [row("matmul", m, (n, n, n), 3.0 * (i + 1)) for i, m in enumerate(MATMUL_RUNGS)]
    rows[-len(MATMUL_RUNGS)] = row("matmul", MATMUL_RUNGS[0], (8192,) * 3, math.nan,
                                   correct=None, status="skipped", reason="predicted 330 ms")
    for n in (2**16, 2**28):
        rows.append(row("sum", "cupy.sum", (n,), 3000.0, kind="ceiling"))
        rows.append(row("sum", "torch.sum", (n,), 2950.0, kind="library"))
        rows += [row("sum", m, (n,), 2700.0) for m in REDUCE_RUNGS]
    for shape, axis in (((8192, 8192), 0), ((10**6, 2), 1)):
        rows.append(row("sum", "cupy.sum", shape, 1500.0, kind="ceiling", sweep="axis", axis=axis))
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
        ("bench", "transpose", ["1024", "2**12"], ["float32"])
    assert (args.methods, args.axis, args.json, args.plot) == (["naive"], False, "out.json", "out.png")
    default = build_parser().parse_args(["bench"])
    assert default.target == "all" and default.shapes is None and default.axis


def test_parse_main_arguments_keep_working():
    args = build_parser().parse_args(["--ops", "transpose", "sum", "--quick", "--json", "x.json"])
    assert args.command is None
    assert (args.ops, args.main_quick, args.main_json) == (["transpose", "sum"], True, "x.json")
    assert build_parser().parse_args([]).ops == ["transpose", "matmul", "reduce"]


@pytest.mark.parametrize("argv, message", [
    (["bench", "transpose", "--sizes", "huge"], "not a size"),
    (["bench", "nothing"], "invalid choice"),
    (["bench", "transpose", "--methods", "bogus"], "bogus"),
    (["describe", "transpose", "bogus"], "bogus"),
    (["--ops", "nothing"], "invalid choice"),
])
def test_bad_arguments(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.skipif(GPU, reason="checks the message without a GPU")
@pytest.mark.parametrize("argv", [[], ["--quick"], ["bench", "transpose", "--quick"],
                                  ["describe", "transpose", "naive", "--shape", "64", "64"]])
def test_commands_without_gpu(capsys, argv):
    assert main(argv) == 1
    assert "needs a CUDA GPU" in capsys.readouterr().err


def test_describe_command_needs_no_gpu(capsys):
    assert main(["describe", "transpose"]) == 0
    out = capsys.readouterr().out
    assert all(rung in out for rung in TRANSPOSE_RUNGS)
    assert main(["describe", "matmul", MATMUL_RUNGS[-1]]) == 0
    out = capsys.readouterr().out
    assert f"matmul_{MATMUL_RUNGS[-1]}(" in out and "__global__" in out
    assert main(["describe", "sum", REDUCE_RUNGS[0], "--no-source"]) == 0
    assert "__global__" not in capsys.readouterr().out


# --- measurements and results -----------------------------------------------------------------------

def test_measurement_properties():
    r = row("sum", "two_pass", (8192, 8192), 1.0, axis=0)
    assert (r.family, r.axis, r.case, r.size_bytes) == ("reduce", 0, "8192x8192 axis=0", 8192**2 * 4)
    m = row("matmul", "tiled", (2, 3, 4), 1.0)
    assert (m.family, m.axis, m.case, m.size_bytes) == ("matmul", None, "2x3x4", (6 + 12) * 4)
    # TF32 rows hold float32 data; float16 ones two bytes an element.
    assert row("matmul", "wgmma", (2, 3, 4), 1.0, dtype="tf32").size_bytes == (6 + 12) * 4
    assert row("matmul", "wgmma", (2, 3, 4), 1.0, dtype="float16").size_bytes == (6 + 12) * 2


def test_select_methods():
    assert benchmark._select_methods("transpose", None) == TRANSPOSE_RUNGS
    assert benchmark._select_methods("transpose", reversed(TRANSPOSE_RUNGS[:2])) == TRANSPOSE_RUNGS[:2]
    with pytest.raises(ValueError, match="bogus"):
        benchmark._select_methods("matmul", ["bogus"])


def test_split_methods():
    split = benchmark.split_methods(["transpose", "matmul", "reduce"], ["naive", REDUCE_RUNGS[0]])
    assert split == {"transpose": ("naive",), "matmul": ("naive",), "reduce": (REDUCE_RUNGS[0],)}
    assert benchmark.split_methods(["matmul"], None) == {"matmul": None}
    with pytest.raises(ValueError, match="bogus"):
        benchmark.split_methods(["transpose"], ["bogus"])


def test_reduction_operations_follow_the_package():
    operations = reduction_operations()
    assert "sum" in operations
    for operation in operations:
        assert callable(getattr(gk, operation))
        assert ladder_methods(operation)


def test_predictor_scales_with_work():
    predictor = benchmark._Predictor()
    assert predictor.predict_ms(("a",), 8.0) == 0.0
    predictor.record(("a",), 1.0, 40.0)
    assert predictor.predict_ms(("a",), 8.0) == pytest.approx(320.0)
    assert predictor.predict_ms(("a",), 0.5) == 0.0
    predictor.record(("a",), 2.0, math.nan)  # a failed measurement predicts nothing
    assert predictor.predict_ms(("a",), 8.0) == pytest.approx(320.0)


def test_defaults_and_quick():
    full = benchmark._defaults("transpose", False, sizes=None, dtypes=None, shapes=None)
    assert full["sizes"][0] * full["sizes"][0] * 4 < 50 * 2**20 < full["sizes"][-1] ** 2 * 4
    assert {"int8", "float16", "float32", "float64"} <= set(full["dtypes"])
    assert (8191, 8193) in full["shapes"] and any(len(s) == 3 for s in full["shapes"])
    quick = benchmark._defaults("reduce", True, sizes=None, dtypes=None, axis_cases=None)
    assert max(quick["sizes"]) < 2**20
    assert benchmark._defaults("matmul", False, sizes=[3], dtypes=None)["sizes"] == (3,)
    cases = benchmark._defaults("reduce", False, axis_cases=None)["axis_cases"]
    assert (((8192, 8192), 0) in cases and ((8192, 8192), 1) in cases
            and ((10**6, 2), 1) in cases and ((1, 2**24), 1) in cases)


def test_result_sequence_filter_and_wrong():
    result = synthetic_result()
    assert result.families == ("transpose", "matmul", "reduce")
    assert len(result) == len(result.measurements) and result[0] is result.measurements[0]
    assert [r.status for r in result.wrong] == ["wrong"]
    rungs = result.filter(operation="transpose", dtype=("int8",), kind="rung")
    assert {r.method for r in rungs} == set(TRANSPOSE_RUNGS)
    assert result.filter(shape=(8191, 8193), kind="ceiling").measurements[0].dtype == "int8"
    joined = BenchResult.join([result.filter(operation="matmul"), result.filter(operation="sum")])
    assert joined.families == ("matmul", "reduce")


def test_text_table():
    text = str(synthetic_result())
    lines = text.splitlines()
    assert lines[0].startswith("NVIDIA H100 80GB HBM3 (sm_90, 132 SMs), CuPy 14.2.0")
    assert "x ceiling" in lines[1]
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
    skipped = [m for m in data["measurements"] if m["status"] == "skipped"][0]
    assert skipped["time_ms"] is None and skipped["notes"]["reason"]
    loaded = BenchResult.load(path)
    assert len(loaded) == len(result)
    for before, after in zip(result, loaded):
        assert (after.operation, after.method, after.shape, after.status, after.axis) == \
            (before.operation, before.method, before.shape, before.status, before.axis)
        assert math.isnan(after.rate) == math.isnan(before.rate)


def test_legacy_write_json(tmp_path):
    benchmark.write_json(synthetic_result().measurements[:3], tmp_path / "legacy.json", ENVIRONMENT)
    assert len(BenchResult.load(tmp_path / "legacy.json")) == 3


def test_progress_lines_and_bar(capsys):
    lines = []
    progress = benchmark._Progress(2, lines.append, "test")
    progress.start("case one")
    progress.done()
    progress.close()
    assert lines == ["case one ..."]
    pytest.importorskip("tqdm")
    bar = benchmark._Progress(2, True, "sweeping")
    bar.start("case one")
    bar.done()
    bar.close()
    assert "sweeping" in capsys.readouterr().err
    silent = benchmark._Progress(2, False, "quiet")
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
    legends = list(figure.legends) + [l for sub in figure.subfigs for l in sub.legends]
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


def test_plot_reductions_with_axis_cases():
    pytest.importorskip("matplotlib")
    figure = synthetic_result().plot("reduce")
    titles = [ax.get_title() for ax in figure.axes if ax.get_visible()]
    assert titles == ["sum, float32", "sum over one axis, float32"]
    bars = figure.axes[1]
    assert [t.get_text() for t in bars.get_yticklabels()] == ["8192x8192 axis=0", "1000000x2 axis=1"]
    assert any("not supported" in t.get_text() for t in bars.texts)
    assert "CuPy reduction (ceiling)" in legend_labels(figure)


def test_plot_every_family_in_one_figure():
    pytest.importorskip("matplotlib")
    figure = synthetic_result().plot()
    assert len(figure.subfigs) == 3
    with pytest.raises(ValueError, match="family"):
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

FAST = Timing(repeat=3, warmup=1, max_seconds=0.02)


def assert_case_complete(result, rungs, ceiling):
    for case in {(r.operation, r.case, r.dtype) for r in result}:
        rows = [r for r in result if (r.operation, r.case, r.dtype) == case]
        methods = [r.method for r in rows]
        assert methods.count(ceiling) == 1, case
        assert set(rungs) <= set(methods), case
        top = next(r for r in rows if r.method == ceiling)
        assert top.kind == "ceiling" and top.ratio == pytest.approx(1.0)
        for r in rows:
            if r.status == "ok":
                assert r.time_ms > 0 and r.rate > 0 and r.ceiling == ceiling
                assert r.notes["runs"] >= 1
                if r.kind == "rung":
                    assert r.correct is True, r


@pytest.mark.gpu
def test_held_time_leaves_out_host_time_and_falls_back_when_the_call_waits():
    import time

    import cupy
    x = cupy.ones(1 << 20, dtype=cupy.float32)

    def slow_host():  # 3 ms of host time before a kernel of a few microseconds
        time.sleep(0.003)
        return x * 2

    timing = Timing(repeat=5, call_repeat=5, warmup=1, max_seconds=1.0)
    seconds, notes = benchmark._time_call(slow_host, timing, 0.0)
    assert notes["held"] is True and notes["runs"] == 5
    assert notes["call_ms"] >= 3.0  # one call from Python waits through the sleep
    assert seconds * 1e3 < 1.0  # the device work alone does not

    def waits_on_the_device():  # the hold cannot outlast a synchronisation inside the call
        y = x * 2
        cupy.cuda.Device().synchronize()
        return y

    seconds, notes = benchmark._time_call(waits_on_the_device, timing, 0.0)
    assert notes["held"] is False
    assert seconds * 1e3 == pytest.approx(notes["call_ms"])


@pytest.mark.gpu
def test_bench_transpose_small():
    result = benchmark.bench_transpose(sizes=(64, 256), dtypes=("int8", "float64"),
                                       shapes=[(33, 65), (3, 17, 19)], timing=FAST, progress=False)
    assert not result.wrong
    assert {r.sweep for r in result} == {"size", "odd", "stacked"}
    assert_case_complete(result, TRANSPOSE_RUNGS, "device copy")
    assert "cupy.ascontiguousarray(x.T)" in {r.method for r in result}
    assert result.environment["device"] and result.environment["cupy"]


@pytest.mark.gpu
def test_bench_matmul_small():
    result = benchmark.bench_matmul(sizes=(64, 128), shapes=[(63, 65, 67)], timing=FAST,
                                    progress=False)
    assert not result.wrong
    assert {r.dtype for r in result} == {"float32", "float16", "tf32"}
    assert_case_complete([r for r in result if r.dtype != "tf32"], MATMUL_RUNGS,
                         "cupy.matmul (cuBLAS)")
    assert all(r.unit == "TFLOP/s" for r in result)
    # Rungs that do not compute a dtype say so; TF32 runs on the tensor cores only.
    for r in result:
        tensor = r.method in TENSOR_METHODS
        if r.kind == "rung" and (r.dtype == "tf32") != tensor and r.dtype != "float16":
            assert r.status == "not supported", r
    if benchmark._torch() is not None:
        assert_case_complete([r for r in result if r.dtype == "tf32"], TENSOR_METHODS,
                             "torch.matmul TF32 (cuBLAS)")


@pytest.mark.gpu
def test_bench_reduce_small():
    result = benchmark.bench_reduce(sizes=(1000, 2**16), dtypes=("float32", "int32"),
                                    axis_cases=[((256, 256), 0), ((300, 2), 1), ((1, 4096), 1)],
                                    timing=FAST, progress=False)
    assert not result.wrong
    assert {r.operation for r in result} == set(reduction_operations())
    for operation in reduction_operations():
        full = [r for r in result.filter(operation=operation) if r.sweep != "axis"]
        assert_case_complete(full, REDUCE_RUNGS, f"cupy.{operation}")
    axis_rows = [r for r in result if r.sweep == "axis" and r.kind == "rung"]
    assert axis_rows and all(r.status == "ok" and r.method == benchmark.AXIS_METHOD
                             for r in axis_rows)
    assert len(axis_rows) == 3 * len(reduction_operations())  # one row per case and operation
    if benchmark._torch() is not None:
        assert "torch.sum" in {r.method for r in result}


@pytest.mark.gpu
def test_a_wrong_rung_is_flagged(monkeypatch):
    from gpukernels.ops import transpose as transpose_module

    real = transpose_module.transpose

    def broken(x, *, method="auto", out=None):
        result = real(x, method=method, out=out)
        if method == TRANSPOSE_RUNGS[0]:
            result[0, 0] += 1
        return result

    monkeypatch.setattr(transpose_module, "transpose", broken)
    result = benchmark.bench_transpose(sizes=(64,), dtypes=("int32",), shapes=(), timing=FAST,
                                       progress=False)
    assert [(r.method, r.status) for r in result.wrong] == [(TRANSPOSE_RUNGS[0], "wrong")]


@pytest.mark.gpu
def test_failures_are_recorded_not_raised(monkeypatch):
    from gpukernels.ops import transpose as transpose_module

    def failing(x, *, method="auto", out=None):
        if method == TRANSPOSE_RUNGS[-1]:
            raise RuntimeError("boom")
        raise NotImplementedError("not this one")

    monkeypatch.setattr(transpose_module, "transpose", failing)
    result = benchmark.bench_transpose(sizes=(64,), dtypes=("int32",), shapes=(), timing=FAST,
                                       progress=False)
    statuses = {r.method: r.status for r in result if r.kind == "rung"}
    assert statuses[TRANSPOSE_RUNGS[-1]] == "error"
    assert all(statuses[m] == "not supported" for m in TRANSPOSE_RUNGS[:-1])
    assert "boom" in result.filter(status="error")[0].notes["error"]


@pytest.mark.gpu
def test_slow_rungs_are_skipped():
    timing = Timing(repeat=2, warmup=0, max_seconds=0.01, max_call_ms=0.0)
    result = benchmark.bench_matmul(sizes=(32, 64), shapes=(), timing=timing, progress=False)
    runs = [r for r in result if r.status != "not supported"]  # (rungs without the dtype)
    second = [r for r in runs if r.shape == (64, 64, 64)]
    assert {r.status for r in second} == {"skipped"}
    assert "predicted" in second[0].notes["reason"]
    assert all(r.status == "ok" for r in runs if r.shape == (32, 32, 32))


@pytest.mark.gpu
def test_bench_command_writes_json_and_plots(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    argv = ["bench", "all", "--quick", "--repeat", "2", "--max-time", "0.01", "--no-progress",
            "--json", str(tmp_path / "bench.json"), "--plot", str(tmp_path / "bench.png")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "x ceiling" in out
    data = json.loads((tmp_path / "bench.json").read_text())
    for key in ("device", "date", "cupy", "numpy", "driver", "runtime", "sm_clock_max_mhz"):
        assert key in data["environment"], key
    methods = {(m["operation"], m["method"]) for m in data["measurements"]}
    assert {("transpose", m) for m in TRANSPOSE_RUNGS} <= methods
    assert {("matmul", m) for m in MATMUL_RUNGS} <= methods
    assert {(op, m) for op in reduction_operations() for m in REDUCE_RUNGS} <= methods
    assert {("transpose", "device copy"), ("matmul", "cupy.matmul (cuBLAS)"),
            ("sum", "cupy.sum")} <= methods
    for family in ("transpose", "matmul", "reduce"):
        is_png(tmp_path / f"bench-{family}.png")


@pytest.mark.gpu
def test_main_job_quick(capsys):
    assert main(["--quick", "--ops", "sum", "--json", "/dev/null"]) == 0
    out = capsys.readouterr().out
    assert "cupy.sum" in out and all(m in out for m in REDUCE_RUNGS)
    rows = benchmark.main_job(["transpose"], quick=True, progress=False,
                              timing=Timing(repeat=2, warmup=0, max_seconds=0.01))
    assert {"copy_row", "copy_col", "device copy"} <= {r.method for r in rows}
    assert all(r.correct and "numpy_check" in r.notes for r in rows if r.kind == "rung")


@pytest.mark.gpu
def test_environment_on_the_device():
    env = benchmark.environment()
    assert env["l2_bytes"] > 0 and env["multiprocessors"] > 0
    assert "sm_clock_max_mhz" in env and "memory_clock_max_mhz" in env
    assert env["gpukernels"] == gk.__version__
    assert numpy.__version__ == env["numpy"]
