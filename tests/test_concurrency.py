"""Concurrency: threads calling every operation at once from a cold kernel cache, ordering on
non-default streams, and arrays on a second GPU.

The two-GPU tests skip on a machine with one GPU; run them on one with two (e.g. the
nvidia-h200-x2 device kind).
"""

from __future__ import annotations

import threading

import numpy
import pytest

import gpukernels as gk
import references as reference
from edges_helpers import (
    ALL_REDUCTIONS,
    MATMUL_METHODS,
    NUMPY_REDUCTIONS,
    REDUCE_METHODS,
    REDUCTIONS,
    TRANSPOSE_METHODS,
    reduction_data,
)
from gpukernels._core import compile as _compile
from gpukernels._core import device as _device
from gpukernels._core import launch as _launch
from gpukernels.validation import poisoned

cupy = pytest.importorskip("cupy")

pytestmark = pytest.mark.gpu

THREADS = 8


def gpu_count() -> int:
    return cupy.cuda.runtime.getDeviceCount() if gk.gpu_available() else 0


def require_two_gpus():
    if gpu_count() < 2:
        pytest.skip(f"needs two GPUs, this machine has {gpu_count()}; run on one with two "
                    "(e.g. the nvidia-h200-x2 device kind)")


def on_device_of(x, host):
    """``host`` copied to the GPU that holds ``x``."""
    with x.device:
        return cupy.asarray(host)


def every_call(rng):
    """[(label, host input, call, NumPy's result)] covering every operation and rung (and
    "auto"): ``call(x)`` runs the operation on the GPU copy ``x`` of the host input. The inputs
    are fresh, and the results exact."""
    calls = []
    wide = reference.random_array((300, 257), numpy.int8, rng)  # every rung but narrow and runs
    narrow = reference.random_array((5, 3001), numpy.int8, rng)  # at most 128 (256) rows
    for method in TRANSPOSE_METHODS + ("auto",):
        x = narrow if method in ("narrow", "runs") else wide
        calls.append((f"transpose {method}", x, lambda d, m=method: gk.transpose(d, method=m),
                      numpy.ascontiguousarray(x.T)))
    a = reference.random_array((65, 33), numpy.float32, rng, integer_valued=True)
    b = reference.random_array((33, 47), numpy.float32, rng, integer_valued=True)
    for method in MATMUL_METHODS + ("auto",):
        calls.append((f"matmul {method}", a, lambda d, m=method, b=b: gk.matmul(
            d, on_device_of(d, b), method=m), numpy.matmul(a, b)))
    for name in REDUCTIONS:
        host = reduction_data(name, (100_003,), numpy.int32, rng)  # integer results: exact
        for method in REDUCE_METHODS + ("auto",):
            calls.append((f"{name} {method}", host, lambda d, m=method, n=name: getattr(gk, n)(
                d, method=m), NUMPY_REDUCTIONS[name](host)))
    return calls


@pytest.fixture
def cold_kernel_cache(monkeypatch):
    """Empty the package's per-process caches of compiled modules, kernels, launch plans and
    scratch buffers for the test (CuPy's disk cache stays), so the first calls compile or load
    every module concurrently. Yields the list of the instance groups each new RawModule was
    made for, as (source path, instances)."""
    for source in _compile.SOURCES.values():
        monkeypatch.setattr(source, "_functions", {})
        for group in source.groups:
            monkeypatch.setattr(group, "_modules", {})
            monkeypatch.setattr(group, "_instance_modules", {})
    _launch.PLANS.clear()
    monkeypatch.setattr(_launch, "_DYNAMIC_SHARED_ALLOWED", {})
    monkeypatch.setattr(_launch, "_stream_buffers", {})
    _device._multiprocessor_count.cache_clear()
    compiled = []
    raw_module = cupy.RawModule

    def counting_raw_module(*args, **kwargs):
        code = kwargs.get("code", args[0] if args else "")
        path = next((p for p in _compile.SOURCES if f'#line 1 "{p}"' in code), "?")
        compiled.append((path, tuple(kwargs.get("name_expressions") or ())))
        return raw_module(*args, **kwargs)

    monkeypatch.setattr(cupy, "RawModule", counting_raw_module)
    yield compiled
    _launch.PLANS.clear()
    _device._multiprocessor_count.cache_clear()


def run_in_threads(work, count=THREADS):
    """Run ``work(index)`` in ``count`` threads released together; re-raise the first error."""
    barrier = threading.Barrier(count)
    errors = [None] * count

    def body(index):
        try:
            barrier.wait()
            work(index)
        except BaseException as exc:
            errors[index] = exc

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert not any(thread.is_alive() for thread in threads), "a thread did not finish"
    for error in errors:
        if error is not None:
            raise error


def check_calls(calls, device: int, own_stream: bool):
    """Run every call on a fresh GPU copy of its input, on ``device`` and on a new non-blocking
    stream or the default one; compare with NumPy."""
    with cupy.cuda.Device(device):
        stream = cupy.cuda.Stream(non_blocking=True) if own_stream else cupy.cuda.Stream.null
        with stream:
            results = [call(cupy.asarray(host_input)) for _, host_input, call, _ in calls]
            copies = [cupy.asnumpy(result, stream=stream) for result in results]
        stream.synchronize()
    for (label, _, _, want), got in zip(calls, copies):
        want = numpy.asarray(want)
        assert got.dtype == want.dtype and got.shape == want.shape, label
        numpy.testing.assert_array_equal(got, want, err_msg=label)


@pytest.mark.parametrize("streams", ["default-stream", "stream-per-thread"])
def test_threads_call_every_operation_at_once_from_a_cold_cache(streams, cold_kernel_cache, rng):
    work = [every_call(numpy.random.default_rng(int(rng.integers(2**63)))) for _ in range(THREADS)]

    def thread(index):
        for _ in range(3):
            check_calls(work[index], device=0, own_stream=streams == "stream-per-thread")

    run_in_threads(thread)
    # Each group of instances was compiled (or loaded from CuPy's disk cache) once, however many
    # threads asked for it at the same time.
    assert len(cold_kernel_cache) == len(set(cold_kernel_cache)), cold_kernel_cache
    paths = {path for path, _ in cold_kernel_cache}
    assert {"transpose/transpose.cu", "transpose/words.cu", "matmul/simt.cu",
            "reduce/reduce.cu"} <= paths, paths


def test_a_first_call_compiles_the_lazy_instances_it_launches_alone(cold_kernel_cache, rng):
    # cumprod's kernels are lazy: its first call compiles (or loads from CuPy's cache) the
    # instances it launches, each as a program of its own, not the rest of their group.
    host = rng.integers(-3, 4, size=(3, 20_000)).astype(numpy.int16)
    got = gk.cumprod(cupy.asarray(host), axis=1)
    numpy.testing.assert_array_equal(got.get(), numpy.cumprod(host, axis=1))
    programs = [names for path, names in cold_kernel_cache if path == "scan/scan.cu"]
    assert programs and all(len(names) == 1 for names in programs), programs
    source, device = _compile.SOURCES["scan/scan.cu"], cupy.cuda.runtime.getDevice()
    launched = {instance for (instance,) in programs}
    for instance in launched:
        group = source.group_of(instance)
        assert not group.eager and group.compiled(device), group.name
        assert instance in group.compiled_instances(device), group.name
        compiled = group.compiled_instances(device)
        assert set(compiled) <= launched and len(compiled) < len(group.instances), group.name


# --- ordering on non-default streams ------------------------------------------------------------

DELAY_SOURCE = r"""
extern "C" __global__ void gk_test_delay(unsigned long long nanoseconds) {
    // Occupies its stream for a while: a window in which work issued to the wrong stream runs
    // out of order. Nothing is measured.
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        __nanosleep(10000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < nanoseconds);
}
"""


def hold_stream(stream, milliseconds=30):
    """Queue a kernel that keeps ``stream`` busy for ``milliseconds``."""
    kernel = cupy.RawKernel(DELAY_SOURCE, "gk_test_delay")
    with stream:
        kernel((1,), (1,), (numpy.uint64(milliseconds * 1_000_000),))


def stream_cases():
    """(label, input shape, input dtype, data name, call, NumPy's result as a function of the
    host input) for every operation and rung."""
    cases = []
    for method in TRANSPOSE_METHODS:
        shape = (5, 3001) if method in ("narrow", "runs") else (513, 257)
        cases.append((f"transpose {method}", shape, numpy.int8, "sum",
                      lambda d, m=method: gk.transpose(d, method=m),
                      lambda h: numpy.ascontiguousarray(h.T)))
    for method in MATMUL_METHODS:
        cases.append((f"matmul {method}", (130, 70), numpy.float32, "matmul",
                      lambda d, m=method: gk.matmul(d, d.T, method=m),
                      lambda h: numpy.matmul(h, h.T)))
    for name in REDUCTIONS:
        for method in REDUCE_METHODS:
            cases.append((f"{name} {method}", (1_000_003,), numpy.int64, name,
                          lambda d, m=method, n=name: getattr(gk, n)(d, method=m),
                          lambda h, n=name: NUMPY_REDUCTIONS[n](h)))
    return cases


STREAM_CASES = stream_cases()


@pytest.mark.parametrize("operation", ["transpose", "sum", "sum-axis", "matmul-float16",
                                       "matmul-float32"])
def test_a_thread_whose_first_cuda_call_is_a_planned_launch(operation, rng):
    """Dask's threaded scheduler hands planned calls to fresh threads: the plan, the input and a
    pooled block for the result all come from another thread, so the launch itself is the
    thread's first CUDA call (no context is current there yet)."""
    data = cupy.asarray(rng.random((256, 384), dtype=numpy.float32))
    a, b = data[:, :256].astype(cupy.float16), data.T[:256].astype(cupy.float16)
    calls = {
        "transpose": lambda: gk.transpose(data),
        "sum": lambda: gk.sum(data),
        "sum-axis": lambda: gk.sum(data, axis=0),
        "matmul-float16": lambda: gk.matmul(a, b),  # the tensor-core rung auto picks
        "matmul-float32": lambda: gk.matmul(data, data.T),
    }
    call = calls[operation]
    want = call().get()  # planned here; the result's block goes back to the pool
    cupy.cuda.Device().synchronize()
    got, errors = [], []

    def worker():
        try:
            got.append(call())
            cupy.cuda.Device().synchronize()
        except Exception as error:  # reported below, in the test's thread
            errors.append(error)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert not errors, errors[0]
    numpy.testing.assert_array_equal(got[0].get(), want)


@pytest.mark.parametrize("operation", ["sum-axis", "cumsum"])
def test_a_thread_whose_first_cuda_call_plans_a_new_shape(operation, rng):
    """As above, but the shape is new to the plan cache: planning it asks the driver's occupancy
    calculator (blocks an SM), a driver call that needs a current context, before any launch."""
    calls = {"sum-axis": lambda x: gk.sum(x, axis=0), "cumsum": lambda x: gk.cumsum(x)}
    call = calls[operation]
    call(cupy.asarray(rng.random((64, 96), dtype=numpy.float32)))  # its kernels compiled here
    data = cupy.asarray(rng.random((1237, 3001), dtype=numpy.float32))
    cupy.cuda.Device().synchronize()
    got, errors = [], []

    def worker():
        try:
            got.append(call(data))
            cupy.cuda.Device().synchronize()
        except Exception as error:  # reported below, in the test's thread
            errors.append(error)

    _launch.PLANS.clear()
    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert not errors, errors[0]
    host = data.get().astype(numpy.float64)
    want = host.sum(axis=0) if operation == "sum-axis" else numpy.cumsum(host)
    numpy.testing.assert_allclose(got[0].get(), want, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("label, shape, dtype, data, call, expected", STREAM_CASES,
                         ids=[c[0] for c in STREAM_CASES])
def test_calls_on_a_non_default_stream_are_ordered_on_it(label, shape, dtype, data, call,
                                                         expected, rng):
    if data == "matmul":  # integer-valued: the product is exact
        host = reference.random_array(shape, dtype, rng, integer_valued=True)
    else:
        host = reduction_data(data, shape, dtype, rng)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        x = cupy.zeros(shape, dtype=dtype)
        staged = cupy.asarray(host)
        stream.synchronize()
        # The input is complete only after a delay on this stream: an operation launched on
        # another stream would read zeros.
        hold_stream(stream)
        x[...] = staged
        # With the legacy default stream busy, an operation launched there would not have
        # finished when the copy below, ordered on this stream, reads its result.
        hold_stream(cupy.cuda.Stream.null, milliseconds=60)
        result = call(x)
        x[...] = 0  # overwriting the input afterwards must not change the result
        got = cupy.asnumpy(result, stream=stream)
    stream.synchronize()
    want = numpy.asarray(expected(host))
    assert got.dtype == want.dtype
    numpy.testing.assert_array_equal(got, want, err_msg=label)


# --- a second GPU --------------------------------------------------------------------------------

def test_every_operation_on_the_second_gpu_from_the_first(rng):
    require_two_gpus()
    calls = every_call(rng)
    with cupy.cuda.Device(1):
        inputs = [cupy.asarray(host_input) for _, host_input, _, _ in calls]
    with cupy.cuda.Device(0):
        results = [call(x) for (_, _, call, _), x in zip(calls, inputs)]
        assert cupy.cuda.runtime.getDevice() == 0, "a call left the current device changed"
    for (label, _, _, want), got in zip(calls, results):
        assert got.device.id == 1, f"{label}: result on GPU {got.device.id}"
        with cupy.cuda.Device(1):
            numpy.testing.assert_array_equal(cupy.asnumpy(got), want, err_msg=label)


def test_every_operation_on_the_first_gpu_from_the_second(rng):
    require_two_gpus()
    calls = every_call(rng)
    with cupy.cuda.Device(0):
        inputs = [cupy.asarray(host_input) for _, host_input, _, _ in calls]
    with cupy.cuda.Device(1):
        results = [call(x) for (_, _, call, _), x in zip(calls, inputs)]
        assert cupy.cuda.runtime.getDevice() == 1
    for (label, _, _, want), got in zip(calls, results):
        assert got.device.id == 0, f"{label}: result on GPU {got.device.id}"
        numpy.testing.assert_array_equal(cupy.asnumpy(got), want, err_msg=label)


def test_arrays_on_different_gpus_raise_value_error(rng):
    require_two_gpus()
    with cupy.cuda.Device(0):
        a0 = cupy.ones((4, 4), dtype=cupy.float32)
        out0 = poisoned((4, 4), numpy.float32)
        scalar_out0 = poisoned((), numpy.float32)
    with cupy.cuda.Device(1):
        a1 = cupy.ones((4, 4), dtype=cupy.float32)
    with pytest.raises(ValueError, match="GPU"):
        gk.matmul(a0, a1)
    with pytest.raises(ValueError, match="GPU"):
        gk.matmul(a1, a0)
    with pytest.raises(ValueError, match="GPU"):
        gk.matmul(a1, a1, out=out0)
    with pytest.raises(ValueError, match="GPU"):
        gk.transpose(a1, out=out0)
    for name in ALL_REDUCTIONS:
        if hasattr(gk, name):
            with pytest.raises(ValueError, match="GPU"):
                getattr(gk, name)(a1, out=scalar_out0.astype(NUMPY_REDUCTIONS[name](
                    numpy.ones((4, 4), numpy.float32)).dtype))
    # Still usable on both devices.
    for a in (a0, a1):
        with a.device:
            assert bool((gk.matmul(a, a) == 4).all())
            assert bool((gk.transpose(a) == 1).all())


def test_threads_on_two_gpus_at_once(cold_kernel_cache, rng):
    require_two_gpus()
    work = [every_call(numpy.random.default_rng(int(rng.integers(2**63)))) for _ in range(THREADS)]

    def thread(index):
        check_calls(work[index], device=index % 2, own_stream=index % 4 >= 2)

    run_in_threads(thread)
    # One module per group and device, however many threads asked for it at once.
    for group in set(cold_kernel_cache):
        assert cold_kernel_cache.count(group) == 2, group


def _new_result_cases():
    """(label, call on the GPU arrays with an optional out=, host inputs, NumPy's result) of the
    calls whose result is built around its memory after the launch (KernelCall.into_new);
    exact results but for var's."""
    def data(shape, dtype, rng):
        return reference.random_array(shape, dtype, rng, integer_valued=True)

    yield ("transpose", lambda x, out=None: gk.transpose(x, out=out),
           (lambda rng: (data((300, 257), numpy.float32, rng),)), numpy.transpose)
    yield ("transpose runs", lambda x, out=None: gk.transpose(x, out=out),
           (lambda rng: (data((255, 3001), numpy.int16, rng),)), numpy.transpose)
    yield ("permute_dims", lambda x, out=None: gk.permute_dims(x, (2, 0, 3, 1), out=out),
           (lambda rng: (data((5, 33, 7, 65), numpy.float32, rng),)),
           lambda x: numpy.transpose(x, (2, 0, 3, 1)))
    yield ("matmul float32", lambda a, b, out=None: gk.matmul(a, b, out=out),
           (lambda rng: (data((65, 33), numpy.float32, rng), data((33, 47), numpy.float32, rng))),
           numpy.matmul)
    if gk.gpu_available() and _device.compute_capability() >= 80:  # gemv: mma instructions
        yield ("matmul gemv float16", lambda a, b, out=None: gk.matmul(a, b, method="gemv",
                                                                       out=out),
               (lambda rng: (data((3, 256), numpy.float16, rng),
                             data((256, 384), numpy.float16, rng))),
               lambda a, b: numpy.matmul(a.astype(numpy.float32), b).astype(numpy.float16))
    yield ("cumsum", lambda x, out=None: gk.cumsum(x, out=out),
           (lambda rng: (data((100_003,), numpy.float32, rng),)),
           lambda x: numpy.cumsum(x, dtype=numpy.float64).astype(numpy.float32))
    # Reductions of one launch build their result after it from LAUNCH_FIRST_BYTES of input
    # (8 MiB)
    yield ("sum", lambda x, out=None: gk.sum(x, out=out),
           (lambda rng: (data((2**21 + 3,), numpy.float32, rng),)), numpy.sum)
    yield ("sum along axis 1", lambda x, out=None: gk.sum(x, axis=1, out=out),
           (lambda rng: (data((8192, 257), numpy.float32, rng),)),
           lambda x: numpy.sum(x, axis=1))
    yield ("mean along axis 0", lambda x, out=None: gk.mean(x, axis=0, out=out),
           (lambda rng: (data((1024, 2049), numpy.float32, rng),)),
           lambda x: numpy.mean(x, axis=0))
    yield ("argmax along axis 0", lambda x, out=None: gk.argmax(x, axis=0, out=out),
           (lambda rng: (data((1025, 2048), numpy.float32, rng),)),
           lambda x: numpy.argmax(x, axis=0))
    yield ("var along axis 1", lambda x, out=None: gk.var(x, axis=1, ddof=1, out=out),
           (lambda rng: (data((8192, 129), numpy.float64, rng),)),
           lambda x: numpy.var(x, axis=1, ddof=1))


NEW_RESULT_CASES = list(_new_result_cases())


@pytest.mark.parametrize(("label", "call", "inputs", "want"), NEW_RESULT_CASES,
                         ids=[case[0] for case in NEW_RESULT_CASES])
def test_a_new_result_is_written_whole_in_a_block_the_pool_had_poisoned(label, call, inputs,
                                                                        want, rng, monkeypatch):
    """These calls take the result's memory from the pool before the launch and build the
    array after it: every element is written even where the pool hands back a block that held
    other data, and the call goes that way. Given an out= the kernel cannot write in place (a
    strided view), the same call fills out and returns it."""
    host = inputs(rng)
    arrays = [cupy.asarray(h) for h in host]
    expected = numpy.asarray(want(*host))

    def check(got):
        if label.startswith("var"):  # moments merged pairwise, not NumPy's two passes
            numpy.testing.assert_allclose(got, expected, rtol=1e-12, atol=0)
        else:
            numpy.testing.assert_array_equal(got, expected)

    built = []  # the bytes of each array built after a launch
    into_new = _launch.KernelCall.into_new

    def counted(self, shape, dtype, nbytes, *args):
        built.append(nbytes)
        return into_new(self, shape, dtype, nbytes, *args)

    monkeypatch.setattr(_launch.KernelCall, "into_new", counted)
    call(*arrays)  # planned; its block goes back to the pool
    for _ in range(3):
        block = cupy.full(built[0], 0xFF, cupy.uint8)  # NaN, or -1, in every element
        del block  # back to the pool, poisoned: the next block of this size
        got = call(*arrays)
        check(got.get())
        assert got.flags.c_contiguous and got.dtype == expected.dtype
    assert len(built) == 4, label
    if expected.ndim:
        holder = cupy.zeros(expected.shape[:-1] + (2 * expected.shape[-1],), expected.dtype)
        view = holder[..., ::2]
        assert call(*arrays, out=view) is view
        check(view.get())
        assert not holder[..., 1::2].any()  # nothing written between the view's elements
