"""Shared fixtures for the gpukernels test suite.

* Tests marked ``pytest.mark.gpu`` are skipped ("no CUDA GPU") when CuPy sees no device; marking
  is enough, see :func:`pytest_collection_modifyitems`.
* ``GPUKERNELS_NO_POOL=1`` turns CuPy's memory pools off, so compute-sanitizer memcheck sees
  out-of-bounds accesses instead of hits inside a pooled block.
* ``rng`` gives a generator with fresh entropy; its seed is printed, recorded in the test's
  ``user_properties`` and shown in the report of a failing test. ``GPUKERNELS_SEED=<int>``
  replays a seed.
"""

from __future__ import annotations

import os

import numpy
import pytest

import gpukernels

GPU = gpukernels.gpu_available()

if GPU and os.environ.get("GPUKERNELS_NO_POOL") == "1":
    import cupy

    cupy.cuda.set_allocator(None)
    cupy.cuda.set_pinned_memory_allocator(None)


def pytest_collection_modifyitems(config, items):
    if GPU:
        return
    skip = pytest.mark.skip(reason="no CUDA GPU")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


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
def index_width(request, monkeypatch):
    """Run a test with the kernels' 32-bit index instances (what small inputs get) and again
    with the 64-bit ones (what inputs past 2**31 elements get), forced by lowering the limit."""
    if request.param == "int64-index":
        monkeypatch.setattr(gpukernels._common, "INT32_INDEX_LIMIT", 0)
    return request.param
