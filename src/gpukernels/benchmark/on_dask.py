"""``python -m gpukernels bench dask``: :mod:`gpukernels.dask` against one array and Dask's own.

Each case puts the same random data (made where the tasks run, in chunks of 256 MB by default)
through three paths:

* **one array**: the gpukernels operation on one CuPy array holding all the data, in this
  process (the data gathered from the chunks);
* **gpukernels.dask**: the same operation on the Dask array;
* **Dask's own**: Dask's operation on the same CuPy chunks, which calls CuPy per chunk
  (``x.T.map_blocks(cupy.ascontiguousarray)`` for a C-contiguous transpose, ``x.sum(axis)``,
  ``a @ b``).

Dask times are wall-clock, from submitting the graph until every task is done, its output
blocks kept where they were made, and every worker has synchronized its device (so they
include scheduling, the device work and the moves of blocks that the operation needs, but no
move of results). One-array times are wall-clock too: the call and a device
synchronize. Each figure is the median of ``repeat`` runs after one warm-up. The Dask result is
checked against the one-array result (exactly for transposes; for sums and products to the
rounding their different summation orders allow).

Examples
--------
>>> from gpukernels.benchmark.on_dask import bench_dask
>>> rows = bench_dask(quick=True, scheduler="threads")  # doctest: +SKIP
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy

__all__ = ["DaskCase", "DaskRow", "CASES", "CLUSTER_CONFIG", "QUICK_CASES", "bench_dask",
           "format_rows", "run_graph"]


@dataclass(frozen=True)
class DaskCase:
    """One input: an operation, the shape of its operand(s), dtype, chunk edge and options.

    ``layout="rows"`` (matmul only) splits the left operand into row chunks of ``chunk`` rows
    and keeps the right operand whole, a copy on every worker: the products need no block
    from another worker and no sum over K, the layout that spreads a product over GPUs. (On
    a cluster that the benchmark did not start, Dask's active memory manager, if it runs
    there, drops the extra copies within seconds, and the products then queue on one worker.)
    """

    operation: str
    shape: tuple[int, ...]
    dtype: str
    chunk: int
    axis: Any = None
    layout: str = "blocks"

    @property
    def label(self) -> str:
        size = "x".join(map(str, self.shape))
        axis = f" axis={self.axis}" if self.operation == "sum" else ""
        if self.layout == "rows":
            return f"{self.operation} {size} {self.dtype} rows {self.chunk}, B on every worker"
        return f"{self.operation} {size} {self.dtype}{axis} chunks {self.chunk}"

    def chunks(self, operand: int) -> Any:
        """The chunks of operand 0 (the left one) or 1."""
        if self.layout != "rows":
            return self.chunk
        return (self.chunk, self.shape[1]) if operand == 0 else self.shape


#: The cases of the issue's targets: about 256 MB chunks of 2**30 elements (2**30 float16
#: elements per matmul operand, chunks of 128 MB).
CASES = (
    DaskCase("transpose", (32768, 32768), "float32", 8192),
    DaskCase("sum", (32768, 32768), "float32", 8192, None),
    DaskCase("sum", (32768, 32768), "float32", 8192, 0),
    DaskCase("sum", (32768, 32768), "float32", 8192, 1),
    DaskCase("matmul", (32768, 32768), "float16", 8192),
    DaskCase("matmul", (32768, 32768), "float16", 8192, layout="rows"),
)
QUICK_CASES = (
    DaskCase("transpose", (8192, 8192), "float32", 2048),
    DaskCase("sum", (8192, 8192), "float32", 2048, None),
    DaskCase("sum", (8192, 8192), "float32", 2048, 0),
    DaskCase("sum", (8192, 8192), "float32", 2048, 1),
    DaskCase("matmul", (4096, 4096), "float16", 1024),
    DaskCase("matmul", (4096, 4096), "float16", 1024, layout="rows"),
)


@dataclass
class DaskRow:
    """The three paths' median times (ms) on one case, and what they give."""

    case: str
    scheduler: str
    workers: int  # Dask workers that ran the tasks (1 for the threaded scheduler)
    one_array_ms: float
    gpukernels_dask_ms: float
    dask_own_ms: float
    work: float  # GB moved (transpose, sum) or TFLOP (matmul)
    unit: str
    correct: bool

    @property
    def of_one_array(self) -> float:
        """gpukernels.dask's throughput as a fraction of the one-array call's."""
        return self.one_array_ms / self.gpukernels_dask_ms

    @property
    def over_dask_own(self) -> float:
        """gpukernels.dask's speed-up over Dask's own path."""
        return self.dask_own_ms / self.gpukernels_dask_ms


def _random_block(block: Any, seed: int, dtype: str, block_id: tuple = ()) -> Any:
    """A block of uniform [0, 1) values, from a generator seeded per block."""
    import cupy

    index = numpy.ravel_multi_index(block_id, (1 << 16,) * len(block_id)) if block_id else 0
    generator = cupy.random.default_rng([seed, int(index)])
    return generator.random(block.shape, dtype=numpy.float32).astype(dtype, copy=False)


def _size(block: Any) -> int:
    """A task after each output block, where the block lives: its size (a number travels to
    the last task, not the block)."""
    return int(block.size)


def _total(*sizes: int) -> int:
    """The last task of a timed graph."""
    return sum(sizes)


def _synchronize_device() -> None:
    """Wait for this process's device (run on every worker once a graph's tasks are done)."""
    import cupy

    cupy.cuda.runtime.deviceSynchronize()


#: Dask settings of the cluster the benchmark starts. Its scheduler runs in this process, and
#: without the active memory manager, which drops the copies that ``client.replicate`` makes
#: within seconds (the right operand of a "rows" case would then live on one worker only).
CLUSTER_CONFIG = {"distributed.scheduler.active-memory-manager.start": False}


def run_graph(expression: Any, client: Any = None,
              synchronize: Callable[[], None] = _synchronize_device) -> None:
    """Compute ``expression`` (a Dask array) for timing: its blocks stay where they are made,
    one task per block hands on its size only, a last task of a key of its own (so no run
    reuses another's results) adds them, and then every worker's device is synchronized.

    ``client``: a ``distributed`` client, or None for the threaded scheduler in this process.
    """
    import dask

    done = dask.delayed(_total, pure=False)(*[dask.delayed(_size)(block)
                                              for block in expression.to_delayed().ravel()])
    if client is not None:
        client.compute(done).result()
        client.run(synchronize)  # every worker's device done
    else:
        dask.compute(done, scheduler="threads")
        synchronize()


def _median_ms(run: Callable[[], Any], repeat: int) -> float:
    run()  # warm-up: kernels compiled, plans made, pools filled
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _paths(case: DaskCase, operands: list) -> tuple[Callable, Callable, Callable]:
    """(one-array function, gpukernels.dask expression builder, Dask's own builder)."""
    import cupy

    import gpukernels
    from gpukernels import dask as gkd

    if case.operation == "transpose":
        return (gpukernels.transpose, lambda: gkd.transpose(operands[0]),
                lambda: operands[0].T.map_blocks(cupy.ascontiguousarray))
    if case.operation == "sum":
        axis = case.axis
        return (lambda x: gpukernels.sum(x, axis=axis), lambda: gkd.sum(operands[0], axis=axis),
                lambda: operands[0].sum(axis=axis))
    if case.operation == "matmul":
        return (gpukernels.matmul, lambda: gkd.matmul(*operands),
                lambda: operands[0] @ operands[1])
    raise ValueError(f"no Dask benchmark for {case.operation!r}")


def _agrees(case: DaskCase, got: Any, want: Any) -> bool:
    """The Dask result against the one-array result (both CuPy arrays)."""
    import cupy

    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if case.operation == "transpose":
        return bool(cupy.array_equal(got, want))
    got64, want64 = got.astype(numpy.float64), want.astype(numpy.float64)
    if case.operation == "sum":  # positive data: the sum's magnitude is the sum itself
        terms = case.shape[0] if case.axis == 0 else case.shape[-1] if case.axis == 1 else \
            int(numpy.prod(case.shape))
        tolerance = 4 * float(numpy.finfo(numpy.float32).eps) * numpy.sqrt(terms)
    else:  # matmul of positive data: each block product rounded once more, then added
        blocks = 1 if case.layout == "rows" else -(-case.shape[1] // case.chunk)
        tolerance = (blocks + 2) * float(numpy.finfo(case.dtype).eps)
    return bool((abs(got64 - want64) <= tolerance * abs(want64)).all())


def _work(case: DaskCase) -> tuple[float, str]:
    elements = int(numpy.prod(case.shape))
    itemsize = numpy.dtype(case.dtype).itemsize
    if case.operation == "matmul":
        m, k = case.shape
        return 2.0 * m * k * case.shape[1] / 1e12, "TFLOP"
    written = elements if case.operation == "transpose" else 0
    return (elements + written) * itemsize / 1e9, "GB"


def bench_dask(*, quick: bool = False, scheduler: str = "cuda", repeat: int | None = None,
               cases: tuple[DaskCase, ...] | None = None, seed: int = 0,
               gpus: str | None = None, protocol: str | None = None,
               progress: Callable[[str], None] | None = None) -> list[DaskRow]:
    """Time :mod:`gpukernels.dask` against one array and against Dask's own path.

    Parameters
    ----------
    quick : bool, optional
        Smaller inputs (:data:`QUICK_CASES`) and 3 repeats, for a smoke run.
    scheduler : str, optional
        ``"cuda"``: a ``dask_cuda.LocalCUDACluster`` (one worker per GPU) started for the run;
        ``"threads"``: Dask's threaded scheduler in this process; anything else: the address
        of a running scheduler (``"tcp://host:8786"``).
    repeat : int, optional
        Timed runs per path and case (default 15, 3 with ``quick``).
    cases : tuple of DaskCase, optional
        Instead of the defaults.
    seed : int, optional
        Seed of the random data.
    gpus : str, optional
        With ``scheduler="cuda"``: the GPUs to start workers on, as ``CUDA_VISIBLE_DEVICES``
        lists them (``"0"``, ``"0,1"``; default: every GPU). The one-array path runs on the
        first GPU of this process.
    protocol : str, optional
        With ``scheduler="cuda"``: how workers send blocks to each other, ``"tcp"`` (the
        default; blocks go through host memory) or ``"ucx"`` (GPU to GPU over NVLink or PCIe;
        needs ``distributed-ucxx``).
    progress : callable, optional
        Called with a line of text before each case.

    Returns
    -------
    list of DaskRow
    """
    from .._core import device as _device

    if (gpus is not None or protocol is not None) and scheduler != "cuda":
        raise ValueError("gpus= and protocol= choose how a LocalCUDACluster starts: they need "
                         f"scheduler='cuda', not {scheduler!r}")
    _device.require_gpu()  # NoGPUError, saying what works without one
    import cupy
    import dask
    import dask.array as da

    repeat = repeat or (3 if quick else 15)
    cases = cases or (QUICK_CASES if quick else CASES)
    client = cluster = None
    if scheduler != "threads":
        try:
            import distributed
        except ImportError as error:
            raise ImportError("bench dask with a cluster needs distributed: pip install "
                              "'gpukernels[dask]'") from error
        if scheduler == "cuda":
            try:
                from dask_cuda import LocalCUDACluster
            except ImportError as error:
                raise ImportError("bench dask --scheduler cuda needs dask-cuda: pip install "
                                  "'gpukernels[dask]'") from error
            options = {"CUDA_VISIBLE_DEVICES": gpus} if gpus is not None else {}
            if protocol is not None:
                options["protocol"] = protocol
            with dask.config.set(CLUSTER_CONFIG):
                cluster = LocalCUDACluster(dashboard_address=None, **options)
            client = distributed.Client(cluster)
        else:
            client = distributed.Client(scheduler)
    workers = len(client.scheduler_info()["workers"]) if client is not None else 1

    def persist(array: Any) -> Any:
        if client is not None:
            array = client.persist(array)
            distributed.wait(array)
            return array
        return array.persist(scheduler="threads")

    def gather(array: Any) -> Any:
        return client.compute(array).result() if client is not None else \
            array.compute(scheduler="threads")

    def measure(case: DaskCase) -> DaskRow:
        count = 2 if case.operation == "matmul" else 1
        operands = []
        meta = cupy.empty((0,) * len(case.shape), case.dtype)
        for i in range(count):
            template = da.empty(case.shape, dtype=case.dtype, chunks=case.chunks(i), meta=meta)
            operands.append(persist(template.map_blocks(
                _random_block, seed + i, case.dtype, dtype=case.dtype, meta=meta)))
        one_array, ours, theirs = _paths(case, operands)
        whole = [cupy.asarray(gather(x)) for x in operands]
        if case.layout == "rows" and client is not None:
            client.replicate(operands[1])  # the right operand on every worker
        one_ms = _median_ms(lambda: (one_array(*whole), cupy.cuda.runtime.deviceSynchronize()),
                            repeat)
        ours_ms = _median_ms(lambda: run_graph(ours(), client), repeat)
        theirs_ms = _median_ms(lambda: run_graph(theirs(), client), repeat)
        correct = _agrees(case, cupy.asarray(gather(ours())), one_array(*whole))
        work, unit = _work(case)
        return DaskRow(case.label, scheduler, workers, one_ms, ours_ms, theirs_ms, work, unit,
                       correct)

    def free_memory() -> None:
        cupy.get_default_memory_pool().free_all_blocks()

    rows = []
    try:
        for number, case in enumerate(cases):
            if progress is not None:
                progress(f"[{number + 1}/{len(cases)}] {case.label}")
            rows.append(measure(case))
            free_memory()
            if client is not None:
                client.run(free_memory)
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
    return rows


def format_rows(rows: list[DaskRow]) -> str:
    """The rows as a text table: times, the rates, and the two ratios."""
    header = (f"{'case':<56} {'sched':>7} {'workers':>7} {'one array':>10} {'gk.dask':>9} {'dask own':>9} "
              f"{'rate':>12} {'of one':>7} {'vs own':>7} ok")
    lines = [header]
    for row in rows:
        rate = row.work / (row.gpukernels_dask_ms / 1e3)
        unit = "TFLOP/s" if row.unit == "TFLOP" else "GB/s"
        lines.append(f"{row.case:<56} {row.scheduler[:7]:>7} {row.workers:>7} "
                     f"{row.one_array_ms:>8.2f}ms "
                     f"{row.gpukernels_dask_ms:>7.2f}ms {row.dask_own_ms:>7.2f}ms "
                     f"{rate:>6.0f} {unit:<5} {row.of_one_array:>7.3f} {row.over_dask_own:>7.2f} "
                     f"{'yes' if row.correct else 'NO'}")
    lines.append("ms: medians, wall-clock to the end of the device work; of one: one-array time "
                 "/ gpukernels.dask time; vs own: Dask's own time / gpukernels.dask time")
    return "\n".join(lines)


def save_rows(rows: list[DaskRow], path: str, environment: dict | None = None) -> None:
    """The rows (and the environment) as JSON."""
    with open(path, "w") as f:
        json.dump({"environment": environment or {},
                   "rows": [dict(asdict(row), of_one_array=row.of_one_array,
                                 over_dask_own=row.over_dask_own) for row in rows]}, f, indent=1)
