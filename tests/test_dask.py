"""gpukernels.dask: the ladders on Dask arrays of CuPy chunks.

Without a GPU, the graphs are checked on NumPy chunks with NumPy's functions in the kernels'
place (the ``numpy_chunks`` fixture): which function each task calls, how the blocks line up,
what the results are, and every error raised on the client. On the GPU the same operations run
on CuPy chunks under Dask's threaded scheduler, under a ``distributed`` cluster of two worker
processes sharing the GPU, and under dask-cuda's ``LocalCUDACluster`` with one worker, against
NumPy's float64 (or exact) results.
"""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
import time

import numpy
import pytest

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

import gpukernels.dask as gkd  # noqa: E402
from gpukernels._core import floats  # noqa: E402
from gpukernels._core.compare import compare  # noqa: E402
from gpukernels._core.ladder import OPERATIONS  # noqa: E402


def _numpy_kernel(name):
    """NumPy's version of operation ``name`` with the kernels' signature."""
    if name == "transpose":
        return lambda x, method: numpy.ascontiguousarray(numpy.swapaxes(x, -1, -2))
    if name == "permute_dims":
        return lambda x, axes, method: numpy.ascontiguousarray(numpy.transpose(x, axes))
    if name == "matmul":
        return lambda a, b, method, precision: numpy.matmul(a, b)
    function = getattr(numpy, name)
    if name in ("cumsum", "cumprod"):
        return lambda x, axis, dtype, method: function(x, axis=axis, dtype=dtype)

    def reduce(x, axis, keepdims, method, dtype=None):
        options = {} if dtype is None else {"dtype": dtype}
        if numpy.dtype(dtype or x.dtype) == numpy.float16 and name in ("sum", "prod"):
            # the kernels accumulate float16 results in float32 and round once; NumPy's own
            # float16 sum rounds every addition
            options["dtype"] = numpy.float32
            return function(x, axis=axis, keepdims=keepdims, **options).astype(numpy.float16)
        return function(x, axis=axis, keepdims=keepdims, **options)

    return reduce


@pytest.fixture
def numpy_chunks(monkeypatch):
    """The Dask layer on NumPy chunks, NumPy's functions run by the tasks, the synchronous
    scheduler: the graphs as they are built for the GPU, checked on the CPU."""
    monkeypatch.setattr(gkd, "_chunk_type", lambda: numpy.ndarray)
    monkeypatch.setattr(gkd, "_kernel", _numpy_kernel)
    with dask.config.set(scheduler="sync"):
        yield


def _tasks(array):
    """(function, first bound argument) of every task of ``array``'s graph that calls a
    function of gpukernels.dask through functools.partial."""
    found = []
    for task in dict(array.__dask_graph__()).values():
        function = getattr(task, "func", None)
        inner = getattr(function, "func", None)
        if inner is not None and getattr(inner, "__module__", "") == "gpukernels.dask":
            found.append((inner.__name__, function.args[0] if function.args else None))
    return found


def test_every_registered_operation_has_a_dask_function():
    assert gkd.__all__ == list(OPERATIONS)
    for name in OPERATIONS:
        function = getattr(gkd, name)
        assert function.__name__ == name and function.__module__ == "gpukernels.dask"
        assert f"gpukernels.{name}" in function.__doc__, name


# ---- graphs on NumPy chunks (CPU) --------------------------------------------------------

def test_transpose_graph_is_one_task_per_block_with_swapped_chunks(numpy_chunks, rng):
    x = rng.random((3, 70, 45))
    dx = da.from_array(x, chunks=(2, 30, 20))
    y = gkd.transpose(dx, method="shared")
    assert y.shape == (3, 45, 70) and y.chunks == ((2, 1), (20, 20, 5), (30, 30, 10))
    assert _tasks(y) == [("_call", "transpose")] * math.prod(dx.numblocks)
    assert numpy.array_equal(y.compute(), numpy.swapaxes(x, -1, -2))


def test_permute_dims_graph_permutes_blocks_and_chunks(numpy_chunks, rng):
    x = rng.random((5, 70, 45, 3))
    dx = da.from_array(x, chunks=(2, 30, 20, 3))
    y = gkd.permute_dims(dx, (2, 0, 3, 1), method="tiled")
    assert y.shape == (45, 5, 3, 70) and y.chunks == ((20, 20, 5), (2, 2, 1), (3,), (30, 30, 10))
    assert _tasks(y) == [("_permute", "permute_dims")] * math.prod(dx.numblocks)
    assert numpy.array_equal(y.compute(), numpy.transpose(x, (2, 0, 3, 1)))
    assert numpy.array_equal(gkd.permute_dims(dx).compute(), numpy.transpose(x))
    with pytest.raises(ValueError, match="repeated axis"):
        gkd.permute_dims(dx, (0, 0, 1, 2))
    with pytest.raises(numpy.exceptions.AxisError):
        gkd.permute_dims(dx, (0, 1, 2, 4))


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
def test_scan_graph_scans_blocks_then_carries_along_the_axis(numpy_chunks, rng, name):
    x = rng.integers(-5, 6, (70, 45)).astype(numpy.int32)
    dx = da.from_array(x, chunks=(30, 20))
    for axis in (0, 1, -1, None):
        y = getattr(gkd, name)(dx, axis=axis, method="look_back")
        want = getattr(numpy, name)(x, axis=axis)
        assert y.dtype == want.dtype == numpy.int64
        assert numpy.array_equal(y.compute(), want)
        # Dask binds dtype= onto the task function: partial(partial(_scan_block, name, ...))
        blocks = [t.func.func for t in dict(y.__dask_graph__()).values()
                  if getattr(getattr(getattr(t, "func", None), "func", None), "func", None)
                  is gkd._scan_block]
        if axis is not None:  # (flattened, Dask first rechunks into rows)
            assert len(blocks) == math.prod(dx.numblocks)
        assert blocks and all(block.args == (name, "look_back") for block in blocks)
    assert getattr(gkd, name)(dx, axis=0, dtype=numpy.int8).dtype == numpy.int8
    with pytest.raises(numpy.exceptions.AxisError):
        getattr(gkd, name)(dx, axis=2)
    with pytest.raises(TypeError):
        getattr(gkd, name)(dx, axis=(0,))
    with pytest.raises(ValueError, match="unknown"):
        getattr(gkd, name)(dx, method="bogus")


@pytest.mark.parametrize("shapes", [((37, 50), (50, 29)), ((4, 37, 50), (50, 29)),
                                    ((50,), (50, 29)), ((37, 50), (50,)), ((50,), (50,)),
                                    ((1, 37, 50), (3, 50, 29))])
def test_matmul_graph_products_per_block_pair_then_one_sum(numpy_chunks, rng, shapes):
    a_shape, b_shape = shapes
    a, b = rng.random(a_shape), rng.random(b_shape)
    k_chunks = (20, 20, 10)
    da_a = da.from_array(a, chunks=a_shape[:-2] + ((16,) if len(a_shape) > 1 else ()) + (k_chunks,))
    da_b = da.from_array(b, chunks=b_shape[:-2] + (k_chunks,) + ((12,) if len(b_shape) > 1 else ()))
    c = gkd.matmul(da_a, da_b)
    want = numpy.matmul(a, b)
    assert c.shape == want.shape and c.dtype == want.dtype
    tasks = _tasks(c)
    products = [t for t in tasks if t[0] == "_product"]
    m_blocks = da_a.numblocks[-2] if a.ndim > 1 else 1
    n_blocks = da_b.numblocks[-1] if b.ndim > 1 else 1
    batch_blocks = max(da_a.numblocks[0] if a.ndim == 3 else 1,
                       da_b.numblocks[0] if b.ndim == 3 else 1)
    assert len(products) == batch_blocks * m_blocks * n_blocks * 3
    assert {name for _, name in products} == {"matmul"}
    assert not any("rechunk" in str(key) for key in dict(c.__dask_graph__()))
    numpy.testing.assert_allclose(c.compute(), want, rtol=1e-12)


def test_matmul_sums_float16_partials_in_float32_and_rounds_once(numpy_chunks, rng):
    a = (rng.random((8, 3000)) - 0.5).astype(numpy.float16)
    b = (rng.random((3000, 8)) - 0.5).astype(numpy.float16)
    c = gkd.matmul(da.from_array(a, chunks=(8, 1000)), da.from_array(b, chunks=(1000, 8)))
    assert c.dtype == numpy.float16
    parts = [numpy.matmul(a[:, i:i + 1000], b[i:i + 1000]) for i in (0, 1000, 2000)]
    want = (parts[0].astype(numpy.float32) + parts[1] + parts[2]).astype(numpy.float16)
    assert numpy.array_equal(c.compute(), want)


def test_matmul_sums_bfloat16_partials_in_float32_and_rounds_once(numpy_chunks, rng):
    bf16 = floats.BFLOAT16
    a = (rng.random((8, 3000)) - 0.5).astype(bf16)
    b = (rng.random((3000, 8)) - 0.5).astype(bf16)
    c = gkd.matmul(da.from_array(a, chunks=(8, 1000)), da.from_array(b, chunks=(1000, 8)))
    assert c.dtype == bf16
    # (the NumPy stand-in's bfloat16 product is float32, as ml_dtypes' matmul gives)
    parts = [numpy.matmul(a[:, i:i + 1000], b[i:i + 1000]) for i in (0, 1000, 2000)]
    want = (parts[0].astype(numpy.float32) + parts[1] + parts[2]).astype(bf16)
    got = c.compute()
    assert got.dtype == bf16 and numpy.array_equal(got.view(numpy.uint16), want.view(numpy.uint16))


def test_blocks_that_arrive_as_2_byte_voids_are_taken_as_bfloat16(rng):
    x = (rng.random((4, 6)) - 0.5).astype(floats.BFLOAT16)
    arrived = x.view("V2")  # what distributed delivers for a CuPy bfloat16 block
    restored = gkd._as_bfloat16(arrived)
    assert restored.dtype == floats.BFLOAT16 and numpy.array_equal(restored, x)
    for other in (x, x.astype(numpy.float16), x.view("V4") if x.size % 2 == 0 else x, 3):
        assert gkd._as_bfloat16(other) is other  # anything else passes as it is
    total = gkd._add_partials([arrived, arrived], (0,), True, dtype=floats.BFLOAT16, last=True)
    assert total.dtype == floats.BFLOAT16
    assert numpy.array_equal(total, (x.astype(numpy.float32) * 2).astype(floats.BFLOAT16))


def test_matmul_integers_wrap_exactly(numpy_chunks, rng):
    a = rng.integers(-128, 128, (30, 40), dtype=numpy.int8)
    b = rng.integers(-128, 128, (40, 20), dtype=numpy.int8)
    c = gkd.matmul(da.from_array(a, chunks=(10, 15)), da.from_array(b, chunks=(15, 7)))
    assert c.dtype == numpy.int8 and numpy.array_equal(c.compute(), a @ b)


@pytest.mark.parametrize("name", ["sum", "prod", "min", "max"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2), (), (0, 1, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduction_graphs_match_numpy(numpy_chunks, rng, name, axis, keepdims):
    x = rng.random((9, 14, 11)) + 0.5
    dx = da.from_array(x, chunks=(4, 5, 11))
    got = getattr(gkd, name)(dx, axis=axis, keepdims=keepdims, split_every=2)
    want = getattr(numpy, name)(x, axis=axis, keepdims=keepdims)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert {op for _, op in _tasks(got)} == {name}
    numpy.testing.assert_allclose(got.compute(), want, rtol=1e-12)


@pytest.mark.parametrize("name", ["mean", "var", "std"])
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2), (0, 1, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_moment_graphs_match_numpy(numpy_chunks, rng, name, axis, keepdims):
    x = 1e4 + rng.random((9, 14, 11))  # a mean large against the spread
    dx = da.from_array(x, chunks=(4, 5, 11))
    options = {} if name == "mean" else {"ddof": 1}
    got = getattr(gkd, name)(dx, axis=axis, keepdims=keepdims, split_every=2, **options)
    want = getattr(numpy, name)(x, axis=axis, keepdims=keepdims, **options)
    assert got.shape == want.shape and got.dtype == want.dtype
    numpy.testing.assert_allclose(got.compute(), want, rtol=1e-9)
    z = (rng.random((30, 4)) + 1j * rng.random((30, 4))).astype(numpy.complex64)
    got = getattr(gkd, name)(da.from_array(z, chunks=(7, 3)), axis=0)
    want = getattr(numpy, name)(z.astype(numpy.complex128), axis=0)
    assert got.dtype == getattr(numpy, name)(z, axis=0).dtype
    numpy.testing.assert_allclose(got.compute(), want, rtol=1e-6)


@pytest.mark.parametrize("name", ["argmin", "argmax"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_arg_graphs_give_the_first_index_like_numpy(numpy_chunks, rng, name, axis, keepdims):
    x = rng.integers(0, 3, (9, 14, 11)).astype(numpy.float32)  # ties across blocks
    x[5, 2, 7] = numpy.nan if axis is None else x[5, 2, 7]
    dx = da.from_array(x, chunks=(4, 5, 6))
    got = getattr(gkd, name)(dx, axis=axis, keepdims=keepdims, split_every=2)
    want = getattr(numpy, name)(x, axis=axis, keepdims=keepdims)
    assert got.shape == want.shape and got.dtype == numpy.int64
    numpy.testing.assert_array_equal(got.compute(), want)


def test_reductions_keep_numpy_dtypes_and_float16_partials_in_float32(numpy_chunks, rng):
    x = rng.integers(0, 100, (50,), dtype=numpy.int8)
    dx = da.from_array(x, chunks=7)
    assert gkd.sum(dx).dtype == numpy.int64 and int(gkd.sum(dx).compute()) == int(x.sum())
    assert gkd.sum(dx, dtype=numpy.int8).compute() == x.sum(dtype=numpy.int8)
    assert gkd.max(dx).dtype == numpy.int8
    h = rng.random(3000).astype(numpy.float16)
    total = gkd.sum(da.from_array(h, chunks=1000))
    partials = [h[i:i + 1000].sum(dtype=numpy.float32) for i in (0, 1000, 2000)]
    assert total.dtype == numpy.float16
    assert total.compute() == numpy.float16(numpy.sum(partials, dtype=numpy.float32))


# ---- errors on the client, before any task --------------------------------------------------

def test_host_arrays_and_cpu_chunks_are_refused_with_a_remedy(rng):
    x = rng.random((4, 4))
    with pytest.raises(TypeError, match=r"host memory.*cupy\.asarray"):
        gkd.transpose(x)
    with pytest.raises(TypeError, match=r"takes a Dask array for x, not builtins\.list"):
        gkd.sum([1, 2, 3])
    with pytest.raises(TypeError, match=r"chunks of x are numpy.ndarray.*map_blocks\(cupy.asarray\)"):
        gkd.sum(da.from_array(x, chunks=2))
    with pytest.raises(TypeError, match=r"chunks of a are numpy.ndarray"):
        gkd.matmul(da.from_array(x, chunks=2), da.from_array(x, chunks=2))


def test_client_side_errors(numpy_chunks, rng):
    x = da.from_array(rng.random((6, 8)), chunks=3)
    with pytest.raises(ValueError, match="unknown transpose method 'fastest'"):
        gkd.transpose(x, method="fastest")
    with pytest.raises(TypeError, match="method must be a string"):
        gkd.sum(x, method=3)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        gkd.transpose(da.from_array(rng.random(5), chunks=2))
    with pytest.raises(TypeError, match="axis must be an integer"):
        gkd.sum(x, axis=True)
    with pytest.raises(numpy.exceptions.AxisError):
        gkd.max(x, axis=2)
    with pytest.raises(ValueError, match="duplicate"):
        gkd.sum(x, axis=(0, -2))
    with pytest.raises(TypeError, match="unexpected keyword argument 'dtype'"):
        gkd.min(x, dtype=numpy.float64)
    with pytest.raises(ValueError, match="no identity"):
        gkd.min(da.from_array(numpy.ones((0, 3)), chunks=2), axis=0)
    with pytest.raises(TypeError, match="transpose supports bool, integer"):
        gkd.transpose(da.from_array(numpy.array([["a", "b"]]), chunks=1))
    with pytest.raises(TypeError, match="complex"):
        gkd.matmul(x.astype(numpy.complex64), x.T)
    with pytest.raises(ValueError, match="mismatch in the contracted dimension"):
        gkd.matmul(x, x)
    with pytest.raises(ValueError, match=r"rechunk one to match the other, e.g. b = b.rechunk"):
        gkd.matmul(x, da.from_array(rng.random((8, 2)), chunks=4))
    with pytest.raises(ValueError, match="batch axis 0"):
        gkd.matmul(da.from_array(rng.random((4, 2, 3)), chunks=(2, 2, 3)),
                   da.from_array(rng.random((4, 3, 2)), chunks=(4, 3, 2)))
    unknown = x[x[:, 0] > 0.5]
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        gkd.sum(unknown)
    # The layer still works after every refusal.
    numpy.testing.assert_allclose(gkd.sum(x).compute(), x.compute().sum())


def test_import_gpukernels_does_not_need_dask_and_the_extra_is_named():
    code = textwrap.dedent("""
        import sys
        sys.modules["dask"] = None  # as if Dask were not installed
        import gpukernels
        try:
            import gpukernels.dask
        except ImportError as error:
            print(error)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "pip install 'gpukernels[dask]'" in done.stdout


# ---- on the GPU --------------------------------------------------------------------------

def _check(op_name, got, *args, extra_bound=0.0, **kwargs):
    """``got`` (a Dask result) against the reference of ``op_name`` on host copies of args."""
    want, bound = OPERATIONS[op_name].reference(*args, **kwargs)
    host = got.compute().get()
    if host.dtype == numpy.dtype("V2") and got.dtype == floats.BFLOAT16:
        host = host.view(floats.BFLOAT16)  # distributed gathers bfloat16 as 2-byte voids
    want = numpy.asarray(want)
    if bound is not None:
        bound = numpy.asarray(bound) + extra_bound
    ok, error, over = compare(numpy.asarray(host), want, bound)
    assert host.dtype == OPERATIONS[op_name].result_dtype(*args, **kwargs)
    assert ok, (op_name, kwargs, error, over)


def _all_operations(rng, bfloat16=True):
    """Every operation of the layer on uneven CuPy chunks, checked against NumPy."""
    import cupy

    x = rng.random((1000, 777), dtype=numpy.float32) - 0.5
    dx = da.from_array(cupy.asarray(x), chunks=(300, 256))
    assert numpy.array_equal(gkd.transpose(dx).compute().get(), x.T)
    cube = rng.random((40, 50, 60), dtype=numpy.float32)
    d_cube = da.from_array(cupy.asarray(cube), chunks=(16, 25, 60))
    for axes in ((2, 0, 1), (1, 0, 2), (2, 1, 0)):
        assert numpy.array_equal(gkd.permute_dims(d_cube, axes).compute().get(),
                                 numpy.transpose(cube, axes))
    i8 = rng.integers(-128, 128, (333, 1025), dtype=numpy.int8)
    assert numpy.array_equal(gkd.transpose(da.from_array(cupy.asarray(i8), chunks=(100, 512)))
                             .compute().get(), i8.T)
    for name in ("sum", "prod", "min", "max"):
        data = 1.0 + x / 1000 if name == "prod" else x  # a product far from 0 and inf
        d = da.from_array(cupy.asarray(data), chunks=(300, 256))
        for axis in (None, 0, 1):
            _check(name, getattr(gkd, name)(d, axis=axis), data, axis=axis)
    tied = numpy.round(x * 4)
    for name in ("argmin", "argmax"):
        d = da.from_array(cupy.asarray(tied), chunks=(300, 256))
        for axis in (None, 0, 1):
            assert numpy.array_equal(getattr(gkd, name)(d, axis=axis).compute().get(),
                                     getattr(numpy, name)(tied, axis=axis))
    for name in ("mean", "var", "std"):
        d = da.from_array(cupy.asarray(x + 100), chunks=(300, 256))
        for axis in (None, 0, 1):
            _check(name, getattr(gkd, name)(d, axis=axis), x + 100, axis=axis)
    for name in ("cumsum", "cumprod"):
        data = 1.0 + x / 1000 if name == "cumprod" else x
        d = da.from_array(cupy.asarray(data), chunks=(300, 256))
        for axis in (None, 0, 1):
            # each block's scan is rounded to float32, then combined with the carry of the
            # blocks before it, one float32 rounding per block along the axis
            blocks = (d.reshape(-1) if axis is None else d).numblocks[axis or 0]
            extra = (blocks + 2) * float(numpy.finfo(numpy.float32).eps) * numpy.abs(
                getattr(numpy, name)(numpy.abs(data.astype(numpy.float64)), axis=axis))
            _check(name, getattr(gkd, name)(d, axis=axis), data, axis=axis, extra_bound=extra)
    ints = rng.integers(-1000, 1000, (513, 300), dtype=numpy.int32)
    _check("sum", gkd.sum(da.from_array(cupy.asarray(ints), chunks=100), axis=0), ints, axis=0)
    products = [(numpy.float32, "auto"), (numpy.float16, "auto"), (numpy.float32, "blocked_2d")]
    for dtype, method in products + ([(floats.BFLOAT16, "auto")] if bfloat16 else []):
        a = (rng.random((300, 700)) - 0.5).astype(dtype)
        b = (rng.random((700, 250)) - 0.5).astype(dtype)
        da_a = da.from_array(cupy.asarray(a), chunks=(128, 256))
        da_b = da.from_array(cupy.asarray(b), chunks=(256, 100))
        c = gkd.matmul(da_a, da_b, method=method)
        # each block product is rounded to the result dtype before the partials are added
        magnitude = numpy.abs(a.astype(numpy.float64)) @ numpy.abs(b.astype(numpy.float64))
        extra = da_a.numblocks[1] * floats.eps(dtype) * magnitude
        _check("matmul", c, a, b, extra_bound=extra)
        again = gkd.matmul(da_a, da_b, method=method).compute()
        assert bool((again == c.compute()).all()), "the same chunking gives the same bits"


@pytest.mark.gpu
def test_the_readme_way_of_making_random_cupy_chunks():
    import cupy

    x = da.random.default_rng(cupy.random.default_rng(7)).random((64, 48), chunks=16,
                                                                  dtype=cupy.float32)
    assert isinstance(x._meta, cupy.ndarray) and x.dtype == numpy.float32
    with dask.config.set(scheduler="threads"):
        assert numpy.array_equal(gkd.transpose(x).compute().get(), x.compute().get().T)


@pytest.mark.gpu
def test_threaded_scheduler(rng):
    with dask.config.set(scheduler="threads"):
        _all_operations(rng)
        import cupy

        x = da.from_array(cupy.ones((4, 4)), chunks=2)
        with pytest.raises(ValueError):  # a rung refusing its blocks fails in a task
            gkd.matmul(x, x, method="wgmma", precision="tf32").compute()
        _all_operations(rng)  # and the scheduler keeps working


def _cluster_checks(client, rng, bfloat16=True):
    with dask.config.set(scheduler=client.get):
        _all_operations(rng, bfloat16)
        import cupy

        x = da.from_array(cupy.ones((4, 4)), chunks=2)
        with pytest.raises(ValueError):  # a failed task reaches the caller ...
            client.compute(gkd.matmul(x, x, method="wgmma", precision="tf32")).result()
        assert float(client.compute(gkd.sum(x)).result()) == 16.0  # ... the cluster works on


@pytest.mark.gpu
@pytest.mark.slow
def test_distributed_cluster_of_two_worker_processes_on_one_gpu(rng):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        # Without bfloat16: distributed delivers CuPy bfloat16 blocks from another process as
        # 2-byte voids, and Dask's own gathering task cannot concatenate them with the blocks
        # it made itself (the module docstring says so).
        _cluster_checks(client, rng, bfloat16=False)


@pytest.mark.gpu
@pytest.mark.slow
def test_local_cuda_cluster_over_every_gpu(rng):
    """One worker per GPU; blocks move between GPUs (skipped where there is only one)."""
    cupy = pytest.importorskip("cupy")
    distributed = pytest.importorskip("distributed")
    dask_cuda = pytest.importorskip("dask_cuda")
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs or more")
    with dask_cuda.LocalCUDACluster(dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        assert len(client.scheduler_info()["workers"]) == cupy.cuda.runtime.getDeviceCount()
        _cluster_checks(client, rng, bfloat16=False)  # bfloat16: see the two-process test


@pytest.mark.gpu
@pytest.mark.slow
def test_local_cuda_cluster(rng):
    distributed = pytest.importorskip("distributed")
    dask_cuda = pytest.importorskip("dask_cuda")
    with dask_cuda.LocalCUDACluster(n_workers=1, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        _cluster_checks(client, rng)


# ---- python -m gpukernels bench dask ----------------------------------------------------------

def test_bench_dask_refuses_the_sweep_options(capsys):
    from gpukernels.__main__ import main

    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "dask", "--sizes", "4096"])
    assert exit_info.value.code == 2
    assert "--sizes do not apply to 'bench dask'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["bench", "dask", "transpose"])
    assert "target of its own" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["bench", "dask", "--scheduler", "threads", "--gpus", "0"], "need --scheduler cuda"),
    (["bench", "dask", "--scheduler", "tcp://host:8786", "--protocol", "ucx"],
     "need --scheduler cuda"),
    (["bench", "transpose", "--gpus", "0,1"], "apply to 'bench dask' only"),
    (["bench", "dask", "--protocol", "udp"], "invalid choice"),
])
def test_bench_dask_cluster_options_need_a_local_cuda_cluster(argv, message, capsys):
    from gpukernels.__main__ import main

    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_bench_dask_function_refuses_cluster_options_elsewhere():
    from gpukernels.benchmark.on_dask import bench_dask

    with pytest.raises(ValueError, match="need scheduler='cuda'"):
        bench_dask(scheduler="threads", gpus="0")


@pytest.fixture
def two_worker_cluster():
    """Two in-process workers (threads, no GPU) and a client: where blocks live and move."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        yield client


def _bytes_received(client):
    """Bytes each worker has fetched from others so far, by worker."""
    return client.run(lambda dask_worker: sum(entry["total"]
                                              for entry in dask_worker.transfer_incoming_log))


_SYNCHRONIZED: list = []


def _record_synchronize():
    """A synchronisation that the in-process workers report here (a module function travels
    by reference, so it appends to this module's list, not to a copy)."""
    _SYNCHRONIZED.append(1)


def test_timed_graph_moves_no_block_between_workers(two_worker_cluster):
    distributed = pytest.importorskip("distributed")
    from gpukernels.benchmark.on_dask import run_graph

    client = two_worker_cluster
    x = client.persist(da.random.default_rng(0).random((512, 512), chunks=128))  # 16 x 128 KiB
    distributed.wait(x)
    assert len({w for ws in client.who_has(x).values() for w in ws}) == 2  # on both workers
    before = _bytes_received(client)
    _SYNCHRONIZED.clear()
    run_graph(x.T.map_blocks(numpy.ascontiguousarray), client, synchronize=_record_synchronize)
    after = _bytes_received(client)
    moved = sum(after[w] - before[w] for w in after)
    assert moved < 4096, f"{moved} bytes moved: blocks travelled, not just their sizes"
    assert len(_SYNCHRONIZED) == 2  # every worker, after the tasks


def test_timed_graph_computes_again_on_every_run(two_worker_cluster):
    distributed = pytest.importorskip("distributed")
    from gpukernels.benchmark.on_dask import run_graph

    client = two_worker_cluster
    x = client.persist(da.ones((256, 256), chunks=64))
    distributed.wait(x)
    expression = x + 1
    for _ in range(2):  # the second run computes again, though its blocks' keys are the same
        with distributed.get_task_stream(client) as stream:
            run_graph(expression, client, synchronize=lambda: None)
        names = [record["key"][0] if isinstance(record["key"], tuple) else record["key"]
                 for record in stream.data]
        assert sum(name.startswith("add-") for name in names) == 16, names


def test_timed_graph_with_threads_synchronizes_once():
    from gpukernels.benchmark.on_dask import run_graph

    calls = []
    run_graph(da.ones((8, 8), chunks=4) * 2, None, synchronize=lambda: calls.append(1))
    assert calls == [1]


@pytest.mark.parametrize("config_off", [False, True])
def test_benchmark_cluster_keeps_the_copies_replicate_makes(config_off):
    distributed = pytest.importorskip("distributed")
    from gpukernels.benchmark.on_dask import CLUSTER_CONFIG

    config = {"distributed.scheduler.active-memory-manager.interval": "50ms"}
    if config_off:
        config.update(CLUSTER_CONFIG)
    with dask.config.set(config):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                           dashboard_address=None)
    with cluster, distributed.Client(cluster) as client:
        b = client.persist(da.ones((64, 64), chunks=64))
        distributed.wait(b)
        client.replicate(b)
        (key,) = client.who_has(b)
        assert client.amm.running() is not config_off
        deadline = time.monotonic() + (0.5 if config_off else 20)  # 10 or 400 of its rounds
        while time.monotonic() < deadline and len(client.who_has(b)[key]) == 2:
            time.sleep(0.05)
        copies = len(client.who_has(b)[key])
    # Dask's default drops the copy; the benchmark's cluster keeps it.
    assert copies == (2 if config_off else 1)


@pytest.mark.gpu
@pytest.mark.slow
def test_bench_dask_quick_with_threads():
    from gpukernels.benchmark.on_dask import QUICK_CASES, bench_dask, format_rows

    rows = bench_dask(quick=True, scheduler="threads", repeat=1)
    assert [row.case for row in rows] == [case.label for case in QUICK_CASES]
    assert all(row.correct for row in rows), format_rows(rows)
    assert all(row.one_array_ms > 0 and row.gpukernels_dask_ms > 0 and row.dask_own_ms > 0
               for row in rows)
