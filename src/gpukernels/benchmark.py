"""Timing every rung against the device's own ceilings, measured in the same run.

Times are medians of CUDA-event timings (:func:`cupyx.profiler.benchmark`) after warm-up.
Bandwidth counts bytes read plus bytes written; matmul rates count 2*M*N*K flops. Each rung's
output is compared with the NumPy reference before it is timed.
"""

from __future__ import annotations

import datetime
import json
import platform
from dataclasses import asdict, dataclass, field

import numpy

from . import _device, reference
from ._common import methods
from .ops.matmul import matmul
from .ops.reduce import sum as gk_sum
from .ops.transpose import copy_ceiling, transpose
from .validation import check

__all__ = ["Measurement", "bench_transpose", "bench_matmul", "bench_sum", "main_job",
           "format_table", "environment"]


@dataclass
class Measurement:
    """One timed row: a rung (or a ceiling / library baseline) on one input."""

    operation: str
    method: str
    shape: tuple
    dtype: str
    correct: bool | None  # None for ceilings, which are not checked against a reference
    time_ms: float
    rate: float
    unit: str  # "GB/s" or "TFLOP/s"
    ratio: float = float("nan")  # rate / ceiling rate of the same run
    ceiling: str = ""
    kind: str = "rung"  # "rung", "ceiling" or "library"
    notes: dict = field(default_factory=dict)


def _median_seconds(fn, *args, n_repeat: int, n_warmup: int) -> float:
    from cupyx.profiler import benchmark

    result = benchmark(fn, args, n_repeat=n_repeat, n_warmup=n_warmup)
    return float(numpy.median(result.gpu_times[0]))


def _set_ratios(rows: list[Measurement], ceiling_method: str) -> None:
    ceiling = next(r for r in rows if r.method == ceiling_method)
    for row in rows:
        row.ratio = row.rate / ceiling.rate
        row.ceiling = ceiling_method


def _device_copy(x):
    y = _device.cupy.empty_like(x)
    y.data.copy_from_device_async(x.data, x.nbytes)
    return y


def bench_transpose(shape=(8192, 8192), dtype="float32", *, n_repeat: int = 30,
                    n_warmup: int = 5, check_shape=(1023, 1025)) -> list[Measurement]:
    """Every transpose rung, CuPy's ``ascontiguousarray(x.T)``, and the copy ceilings."""
    cupy = _device.cupy
    dtype = numpy.dtype(dtype)
    host = reference.random_array(shape, dtype, numpy.random.default_rng())
    want = reference.transpose(host)
    x = cupy.asarray(host)
    moved = 2 * x.nbytes / 1e9
    rows = []

    def row(method, fn, kind, correct):
        seconds = _median_seconds(fn, x, n_repeat=n_repeat, n_warmup=n_warmup)
        rows.append(Measurement("transpose", method, shape, dtype.name, correct, seconds * 1e3,
                                moved / seconds, "GB/s", kind=kind))

    row("device copy", _device_copy, "ceiling", None)
    if len(shape) == 2:
        for kind in ("row", "col"):
            row(f"copy_{kind}", lambda a, k=kind: copy_ceiling(a, k), "ceiling", None)
    for method in methods("transpose"):
        ok = bool((cupy.asnumpy(transpose(x, method=method)) == want).all())
        ok = ok and check("transpose", method, check_shape, dtype).ok
        row(method, lambda a, m=method: transpose(a, method=m), "rung", ok)
    ok = bool((cupy.asnumpy(cupy.ascontiguousarray(cupy.swapaxes(x, -1, -2))) == want).all())
    row("cupy.ascontiguousarray(x.T)",
        lambda a: cupy.ascontiguousarray(cupy.swapaxes(a, -1, -2)), "library", ok)
    _set_ratios(rows, "device copy")
    return rows


def bench_matmul(m: int = 4096, k: int = 4096, n: int = 4096, dtype="float32", *,
                 n_repeat: int = 10, n_warmup: int = 2, check_shape=(255, 129, 257)) -> list[Measurement]:
    """Every matmul rung and cuBLAS (``cupy.matmul``)."""
    cupy = _device.cupy
    dtype = numpy.dtype(dtype)
    rng = numpy.random.default_rng()
    a_host = reference.random_array((m, k), dtype, rng)
    b_host = reference.random_array((k, n), dtype, rng)
    want = reference.matmul(a_host, b_host)
    bound = reference.matmul_error_bound(a_host, b_host, dtype)
    a, b = cupy.asarray(a_host), cupy.asarray(b_host)
    tflop = 2.0 * m * n * k / 1e12
    rows = []

    def row(method, fn, kind):
        got = cupy.asnumpy(fn(a, b))
        ok = bool((numpy.abs(got - want) <= bound).all())
        if kind == "rung":
            ok = ok and check("matmul", method, check_shape, dtype).ok
        seconds = _median_seconds(fn, a, b, n_repeat=n_repeat, n_warmup=n_warmup)
        rows.append(Measurement("matmul", method, (m, k, n), dtype.name, ok, seconds * 1e3,
                                tflop / seconds, "TFLOP/s", kind=kind))

    row("cupy.matmul (cuBLAS)", cupy.matmul, "ceiling")
    for method in methods("matmul"):
        row(method, lambda p, q, meth=method: matmul(p, q, method=meth), "rung")
    _set_ratios(rows, "cupy.matmul (cuBLAS)")
    return rows


def bench_sum(n: int = 2**28, dtype="int32", *, n_repeat: int = 30, n_warmup: int = 5,
              check_size: int = 10**6 + 3) -> list[Measurement]:
    """Every sum rung and ``cupy.sum`` (CUB), same result dtype."""
    cupy = _device.cupy
    dtype = numpy.dtype(dtype)
    host = reference.random_array((n,), dtype, numpy.random.default_rng())
    want, result_dtype = reference.sum(host)
    bound = reference.sum_error_bound(host, result_dtype)
    x = cupy.asarray(host)
    read = x.nbytes / 1e9
    rows = []

    def row(method, fn, kind):
        got = cupy.asnumpy(fn(x))
        close = got == want if result_dtype.kind in "biu" else abs(got - want) <= bound
        ok = bool(got.dtype == result_dtype and close)
        if kind == "rung":
            ok = ok and check("sum", method, (check_size,), dtype).ok
        seconds = _median_seconds(fn, x, n_repeat=n_repeat, n_warmup=n_warmup)
        rows.append(Measurement("sum", method, (n,), dtype.name, ok, seconds * 1e3,
                                read / seconds, "GB/s", kind=kind))

    row("cupy.sum (CUB)", cupy.sum, "ceiling")
    for method in methods("sum"):
        row(method, lambda a, meth=method: gk_sum(a, method=meth), "rung")
    _set_ratios(rows, "cupy.sum (CUB)")
    return rows


def main_job(operations=("transpose", "matmul", "sum"), *, quick: bool = False,
             progress=print) -> list[Measurement]:
    """The table of ``python -m gpukernels``: every rung, checked and timed, with its ceiling.

    Sizes leave the 50 MB L2 of an H100 (``quick`` shrinks them for a smoke run).
    """
    _device.require_gpu()
    rows: list[Measurement] = []
    if "transpose" in operations:
        shapes = [(2048, 2048)] if quick else [(8192, 8192), (8191, 8193)]
        for shape in shapes:
            progress(f"transpose {shape} float32 ...")
            rows += bench_transpose(shape, "float32")
    if "matmul" in operations:
        size = 1024 if quick else 4096
        progress(f"matmul {size}^3 float32 ...")
        rows += bench_matmul(size, size, size, "float32")
    if "sum" in operations:
        sizes = [(2**22, "int32"), (2**22, "float32")] if quick else \
            [(2**28, "int32"), (2**28, "float32"), (10**7, "int32")]
        for n, dtype in sizes:
            progress(f"sum {n} {dtype} ...")
            rows += bench_sum(n, dtype)
    return rows


def environment() -> dict:
    """The device, clocks and library versions a measurement was taken with."""
    cupy = _device.cupy
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.runtime.getDevice())
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": props["name"].decode(),
        "compute_capability": f"{props['major']}.{props['minor']}",
        "multiprocessors": props["multiProcessorCount"],
        "l2_bytes": props["l2CacheSize"],
        "memory_bytes": props["totalGlobalMem"],
        "driver": cupy.cuda.runtime.driverGetVersion(),
        "runtime": cupy.cuda.runtime.runtimeGetVersion(),
        "cupy": cupy.__version__,
        "numpy": numpy.__version__,
        "python": platform.python_version(),
    }


def format_table(rows: list[Measurement]) -> str:
    """A plain-text table: one line per measurement, ratios to the in-run ceiling."""
    header = (f"{'operation':9s}  {'method':28s}  {'shape':18s}  {'dtype':8s}  {'correct':7s}  "
              f"{'time ms':>9s}  {'rate':>16s}  {'x ceiling':>9s}")
    lines = [header, "-" * len(header)]
    for r in rows:
        correct = "-" if r.correct is None else ("yes" if r.correct else "NO")
        shape = "x".join(str(s) for s in r.shape)
        lines.append(f"{r.operation:9s}  {r.method:28s}  {shape:18s}  {r.dtype:8s}  {correct:7s}  "
                     f"{r.time_ms:9.3f}  {r.rate:9.1f} {r.unit:6s}  {r.ratio:9.3f}")
    return "\n".join(lines)


def write_json(rows: list[Measurement], path) -> None:
    """Every measurement with the environment it was taken in."""
    with open(path, "w") as f:
        json.dump({"environment": environment(), "measurements": [asdict(r) for r in rows]},
                  f, indent=2)
