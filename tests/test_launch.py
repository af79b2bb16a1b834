"""The parameter block of a planned launch (KernelCall), without a GPU: the driver call is
replaced by one that reads back what cuLaunchKernel would read."""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

import numpy
import pytest

from gpukernels._core import launch as _launch


class FakeKernel:
    max_threads_per_block = 1024
    shared_size_bytes = 0  # static shared memory

    def __init__(self) -> None:
        self.kernel = SimpleNamespace(ptr=0xF00)  # a CuPy kernel's CUfunction


class FakeSource:
    path = "fake.cu"

    def __init__(self) -> None:
        self.kernel = FakeKernel()

    def function(self, instance):
        return self.kernel


def fake_array(address: int):
    return SimpleNamespace(data=SimpleNamespace(ptr=address))


@pytest.fixture
def driver(monkeypatch):
    """Launches land here: (function, grid, block, shared memory, stream, the 8-byte words the
    parameter pointers point at)."""
    launched = []
    stream = SimpleNamespace(ptr=0)

    def launch_kernel(function, gx, gy, gz, bx, by, bz, shared, stream_ptr, params, extra):
        count = len(launched_args[0])
        pointers = (ctypes.c_uint64 * count).from_address(params)
        words = [ctypes.c_uint64.from_address(p).value for p in pointers]
        launched.append((function, (gx, gy, gz), (bx, by, bz), shared, stream_ptr, words))

    launched_args: list = [()]
    monkeypatch.setattr(_launch, "_launch_kernel", launch_kernel)
    monkeypatch.setattr(_launch, "_current_stream", lambda: stream)
    monkeypatch.setattr(_launch, "_DYNAMIC_SHARED_ALLOWED", {})  # fake kernels stay out of it
    return SimpleNamespace(launched=launched, stream=stream, args=launched_args)


def test_arrays_scalars_and_stream_arrays_reach_the_parameter_block(driver):
    per_stream_calls = []

    def stream_arrays():
        per_stream_calls.append(driver.stream.ptr)
        return (fake_array(0x1000 + driver.stream.ptr), fake_array(0x2000 + driver.stream.ptr))

    args = (_launch.Array(0), numpy.int32(7), _launch.StreamArray(1), _launch.Array(1),
            numpy.int64(-2), _launch.StreamArray(0))
    driver.args[0] = args
    call = _launch.KernelCall(FakeSource(), "fake<int>", (3, 2, 1), (64, 1, 1), args,
                              shared_mem=128, rung="fake", stream_arrays=stream_arrays)
    call(fake_array(0xA0), fake_array(0xB0))
    call(fake_array(0xA8), fake_array(0xB8))
    driver.stream.ptr = 0x50
    call(fake_array(0xC0), fake_array(0xD0))

    first, second, third = driver.launched
    assert first[:5] == (0xF00, (3, 2, 1), (64, 1, 1), 128, 0)
    assert first[5] == [0xA0, 7, 0x2000, 0xB0, 2**64 - 2, 0x1000]
    assert second[5] == [0xA8, 7, 0x2000, 0xB8, 2**64 - 2, 0x1000]
    assert third[4] == 0x50 and third[5] == [0xC0, 7, 0x2050, 0xD0, 2**64 - 2, 0x1050]
    assert per_stream_calls == [0, 0x50]  # looked up again only when the stream changed


def test_into_new_launches_into_new_memory_and_builds_the_array_after(driver, monkeypatch):
    # The result's memory comes from the allocator before the launch, in the slot after the
    # inputs; the array around it is built once the launch is made.
    events = []
    memory = SimpleNamespace(ptr=0xE000)

    def alloc(nbytes):
        events.append(("alloc", nbytes))
        return memory

    def ndarray(shape, dtype, memptr=None):
        events.append(("ndarray", shape, dtype, memptr))
        return SimpleNamespace(shape=shape, dtype=dtype, data=memptr)

    def launch_kernel(*args):
        events.append(("launch",))
        record(*args)

    record = _launch._launch_kernel
    monkeypatch.setattr(_launch, "_launch_kernel", launch_kernel)
    monkeypatch.setattr(_launch, "_alloc", alloc)
    monkeypatch.setattr(_launch._device, "cupy", SimpleNamespace(ndarray=ndarray))
    args = (_launch.Array(0), _launch.Array(1), numpy.int32(5))
    driver.args[0] = args
    call = _launch.KernelCall(FakeSource(), "fake<int>", (1, 1, 1), (32, 1, 1), args)
    result = call.into_new((3, 5), numpy.float32, 60, fake_array(0xA0))
    assert events == [("alloc", 60), ("launch",), ("ndarray", (3, 5), numpy.float32, memory)]
    assert driver.launched[0][5] == [0xA0, 0xE000, 5]
    assert result.data is memory and result.shape == (3, 5)


def test_stream_arrays_are_required_when_named():
    with pytest.raises(TypeError, match="stream_arrays"):
        _launch.KernelCall(FakeSource(), "fake<int>", (1, 1, 1), (32, 1, 1),
                           (_launch.StreamArray(0),))


class _KernelAttributes:
    """What allow_shared_memory reads and writes of a CuPy RawKernel."""

    def __init__(self, static_bytes):
        self.shared_size_bytes = static_bytes
        self.max_dynamic_shared_size_bytes = None  # never set until an opt-in
        self.opt_ins = []

    def __setattr__(self, name, value):
        if name == "max_dynamic_shared_size_bytes" and value is not None:
            self.opt_ins.append(value)
        object.__setattr__(self, name, value)


@pytest.mark.parametrize("static, dynamic, opt_ins", [
    (0, 48 * 1024, []),                           # exactly the default: no opt-in
    (0, 48 * 1024 + 16, [48 * 1024 + 16]),
    (1024, 47 * 1024, []),                        # static + dynamic = 48 KiB
    (1024, 47 * 1024 + 16, [47 * 1024 + 16]),     # 16 bytes past it, counting the static part
    (32 * 1024, 20 * 1024, [20 * 1024]),          # dynamic alone under 48 KiB, the sum over
])
def test_shared_memory_opt_in_counts_static_and_dynamic_bytes(monkeypatch, static, dynamic,
                                                               opt_ins):
    monkeypatch.setattr(_launch, "_DYNAMIC_SHARED_ALLOWED", {})
    kernel = _KernelAttributes(static)
    _launch.allow_shared_memory(kernel, dynamic)
    _launch.allow_shared_memory(kernel, dynamic)  # once per kernel and size
    assert kernel.opt_ins == opt_ins


def test_shared_memory_opt_in_grows_with_a_larger_launch(monkeypatch):
    monkeypatch.setattr(_launch, "_DYNAMIC_SHARED_ALLOWED", {})
    kernel = _KernelAttributes(0)
    for nbytes in (64 * 1024, 32 * 1024, 100 * 1024, 64 * 1024):
        _launch.allow_shared_memory(kernel, nbytes)
    assert kernel.opt_ins == [64 * 1024, 100 * 1024]


def test_shared_memory_opt_in_is_not_inherited_through_a_reused_id(monkeypatch):
    # An entry for another object under this kernel's id (a freed kernel's address, taken
    # again) must not count as this kernel's opt-in; the entries keep their kernels alive.
    kernel, stranger = _KernelAttributes(0), _KernelAttributes(0)
    monkeypatch.setattr(_launch, "_DYNAMIC_SHARED_ALLOWED", {id(kernel): (stranger, 200 * 1024)})
    _launch.allow_shared_memory(kernel, 64 * 1024)
    assert kernel.opt_ins == [64 * 1024]
    assert _launch._DYNAMIC_SHARED_ALLOWED[id(kernel)] == (kernel, 64 * 1024)


def test_resident_blocks_asks_the_driver_about_the_compiled_function(monkeypatch):
    # The occupancy calculator takes the CUfunction (RawKernel.kernel.ptr), not the RawKernel.
    from cupy_backends.cuda.api import driver

    asked = []

    def occupancy(function, threads, shared_mem):
        asked.append((function, threads, shared_mem))
        return 0 if shared_mem else 3  # 0: the instance does not fit at that size

    monkeypatch.setattr(driver, "occupancyMaxActiveBlocksPerMultiprocessor", occupancy)
    source = FakeSource()
    assert _launch.resident_blocks(source, "k<float>", 256) == 3
    assert _launch.resident_blocks(source, "k<float>", 256, 4096) == 1  # at least one
    assert asked == [(0xF00, 256, 0), (0xF00, 256, 4096)]
