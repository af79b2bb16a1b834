"""Shared fixtures for the gpukernels test suite.

* Tests marked ``pytest.mark.gpu`` are skipped ("no CUDA GPU") when CuPy sees no device; marking
  is enough, see :func:`pytest_collection_modifyitems`.
* ``GPUKERNELS_NO_POOL=1`` turns CuPy's memory pools off, so compute-sanitizer memcheck sees
  out-of-bounds accesses instead of hits inside a pooled block.
* ``GPUKERNELS_LAUNCH_RECORD=<file>`` writes, per test, the kernel instances it launched and its
  duration (JSON lines); ``GPUKERNELS_SELECT=<file>`` runs only the test ids listed in a file.
  scripts/sanitize.sh uses both to run the sanitizers over a subset of tests that still launches
  every instance the suite launches (scripts/launch_cover.py).
* Tests marked ``large`` (about 20 GiB of GPU memory each) run one at a time across pytest-xdist
  workers: each holds a lock file while it runs.
* ``rng`` gives a generator with fresh entropy; its seed is printed, recorded in the test's
  ``user_properties`` and shown in the report of a failing test. ``GPUKERNELS_SEED=<int>``
  replays a seed.
"""

from __future__ import annotations

import json
import os
import tempfile
import time

import numpy
import pytest

import gpukernels
from gpukernels._core import compile as _compile
from gpukernels._core import launch as _launch

GPU = gpukernels.gpu_available()

if GPU and os.environ.get("GPUKERNELS_NO_POOL") == "1":
    import cupy

    cupy.cuda.set_allocator(None)
    cupy.cuda.set_pinned_memory_allocator(None)


RECORD = os.environ.get("GPUKERNELS_LAUNCH_RECORD")
SELECT = os.environ.get("GPUKERNELS_SELECT")


def _compile_order(item) -> tuple:
    """Compile tests by size: the sources with more instances first, a source's architectures
    together."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    source = _compile.SOURCES.get(params.get("path", ""))
    return (-len(source.instances) if source is not None else 0, str(params.get("path", "")),
            str(params.get("arch", "")))


def _spread_compile_tests(items) -> None:
    """Spread the NVRTC compile tests (up to a minute each on two cores with the import's
    options, up to 15 s with the tests' default --Ofast-compile=max) over the first quarter
    of the run order. pytest-xdist starts each worker on its own contiguous chunk of that
    quarter: left together, they all fell to one worker, which compiled them one after another
    while the others waited. Their order is the bit-reversal of their order by size, so the
    first half holds every second test of that order, each quarter every fourth, and so on:
    whichever chunks the workers get, each gets its share of every source's architectures
    (two cores, empty compile cache: the whole suite in 12 min 31 s together, 6 min 37 s
    spread; benchmarks/NOTES.md, item 72)."""
    compile_tests = [item for item in items if item.get_closest_marker("compile") is not None]
    if not compile_tests or len(compile_tests) == len(items):
        return
    by_size = sorted(compile_tests, key=_compile_order)
    bits = max(1, (len(by_size) - 1).bit_length())
    reversed_bits = [int(format(i, f"0{bits}b")[::-1], 2) for i in range(len(by_size))]
    compile_tests = [by_size[i] for i in sorted(range(len(by_size)), key=reversed_bits.__getitem__)]
    others = [item for item in items if item.get_closest_marker("compile") is None]
    # other tests between two compile tests, so that the last is still in the first quarter
    step = max(len(items) // 4 - len(compile_tests), 0) / len(compile_tests)
    spread: list = []
    placed = 0  # other tests placed so far
    for index, item in enumerate(compile_tests):
        before = max(placed, round(index * step))  # other tests ahead of this compile test
        spread += others[placed:before]
        placed = before
        spread.append(item)
    items[:] = spread + others[placed:]


def pytest_collection_modifyitems(config, items):
    if SELECT:
        with open(SELECT) as f:
            wanted = {line.rstrip("\n") for line in f if line.strip()}
        deselected = [item for item in items if item.nodeid not in wanted]
        items[:] = [item for item in items if item.nodeid in wanted]
        config.hook.pytest_deselected(items=deselected)
    _spread_compile_tests(items)
    if GPU:
        return
    skip = pytest.mark.skip(reason="no CUDA GPU")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


try:
    import fcntl
except ImportError:  # not POSIX: large tests are not serialised across workers
    fcntl = None  # type: ignore[assignment]

_LARGE_LOCK = os.path.join(tempfile.gettempdir(), "gpukernels-large-tests.lock")


@pytest.fixture(autouse=True)
def _one_large_test_at_a_time(request):
    if request.node.get_closest_marker("large") is None or fcntl is None:
        yield
        return
    with open(_LARGE_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture
def rng(request) -> numpy.random.Generator:
    """A NumPy generator with fresh entropy (or ``GPUKERNELS_SEED``); the seed is reported."""
    env = os.environ.get("GPUKERNELS_SEED")
    seed = int(env) if env else numpy.random.SeedSequence().entropy
    request.node.user_properties.append(("seed", seed))
    print(f"rng seed: {seed} (replay with GPUKERNELS_SEED={seed})")
    return numpy.random.default_rng(seed)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        seeds = [value for key, value in item.user_properties if key == "seed"]
        if seeds:
            report.sections.append(
                ("rng seed", f"replay with GPUKERNELS_SEED={seeds[-1]}")
            )
    return report


@pytest.fixture(params=["int32-index", "int64-index"])
def index_width(request):
    """Run a test with the kernels' 32-bit index instances (what small inputs get) and again
    with the 64-bit ones (what inputs past 2**31 elements get), forced by lowering the limit."""
    if request.param == "int64-index":
        with _launch.force_index_limit(0):
            yield request.param
    else:
        yield request.param


if RECORD:
    _record_lines: list[dict] = []

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        _launch.track_launches(True)
        start = time.perf_counter()
        try:
            return (yield)
        finally:
            seconds = time.perf_counter() - start
            # Property tests draw new shapes on every run, so their launches vary.
            drawn = getattr(getattr(item, "obj", None), "is_hypothesis_test", False)
            _record_lines.append({"test": item.nodeid, "seconds": seconds, "random": drawn,
                                  "kernels": sorted(_launch.track_launches(False) or ())})

    def pytest_sessionfinish(session):
        # Appended under a lock: with pytest-xdist each worker adds its own tests' lines.
        names = _compile.kernel_names()  # every launched kernel was fetched through its source
        for line in _record_lines:
            line["kernels"] = sorted({names.get(k, "unknown") for k in line["kernels"]})
        text = "".join(json.dumps(line) + "\n" for line in _record_lines)
        with open(RECORD, "a") as f:
            if fcntl is not None:
                fcntl.flock(f, fcntl.LOCK_EX)
            f.write(text)
