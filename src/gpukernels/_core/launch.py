"""Launching kernels: limits checked once, launches recorded for ``describe``, one plan cache.

A wrapper works out, once per input layout, which kernel instances it launches with which grid,
block and scalar arguments (its *plan*), keeps that in :data:`PLANS`, and on every call only
allocates and launches. Each launch is a :class:`KernelCall`: a compiled instance with its
geometry checked against the device's limits when the plan is made, and the scalar arguments
already converted to their C types.
"""

from __future__ import annotations

import array as _array
import builtins
import contextlib
import ctypes
import functools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy

from . import device as _device

__all__ = ["Launch", "KernelCall", "Array", "StreamArray", "LaunchRecord", "record_launches",
           "PLANS", "PlanCache", "ceil_div", "index_type", "span", "prepare_out", "finish_out",
           "INDEX_SCALARS", "MAX_GRID_X", "MAX_GRID_YZ", "allow_shared_memory", "track_launches",
           "force_index_limit", "dry_run", "resident_blocks", "resident_clusters"]

# CUDA's grid limits: gridDim.x up to 2^31 - 1, gridDim.y and gridDim.z up to 65535.
MAX_GRID_X = 2**31 - 1
MAX_GRID_YZ = 65535
#: Shared memory, static and dynamic together, a block may use without opting in (more needs
#: allow_shared_memory).
DEFAULT_SHARED_BYTES = 48 * 1024


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def power_of_two(n: int) -> int:
    """The smallest power of two of at least ``n`` (1 for n <= 1)."""
    return 1 << max(n - 1, 0).bit_length()


# Kernels templated on an Index type use 32-bit arithmetic when every offset they form stays
# below this: 2^31 less headroom for grid-stride counters, which can step up to 65535 * 1024
# past an extent before the loop test ends them.
INT32_INDEX_LIMIT = 2**31 - 2**27

#: C index type -> the NumPy scalar type that passes it to a kernel.
INDEX_SCALARS = {"int": numpy.int32, "long long": numpy.int64}


def index_type(*extents: int) -> str:
    """The C index type for a launch: ``"int"`` if every extent is below
    :data:`INT32_INDEX_LIMIT`, else ``"long long"``. Pass every count and element offset the
    kernel can form (sizes, and the span of each strided operand, see :func:`span`)."""
    return "int" if max(extents, default=0) < INT32_INDEX_LIMIT else "long long"


@contextlib.contextmanager
def force_index_limit(limit: int) -> Iterator[None]:
    """Make :func:`index_type` switch to 64-bit indices at ``limit`` inside the block (tests use
    0 to run small inputs on the 64-bit instances); planned launches are forgotten on the way in
    and out, since they hold the index type."""
    global INT32_INDEX_LIMIT
    saved = INT32_INDEX_LIMIT
    PLANS.clear()
    INT32_INDEX_LIMIT = limit
    try:
        yield
    finally:
        INT32_INDEX_LIMIT = saved
        PLANS.clear()


def span(array: Any) -> int:
    """Elements between the lowest and highest address of a strided array, plus one."""
    if array.size == 0:
        return 0
    return 1 + builtins.sum(abs(s) // array.itemsize * (n - 1)
                            for n, s in zip(array.shape, array.strides))


#: id(kernel) -> (the kernel, the dynamic shared memory in bytes it may launch with so far).
#: The entry holds the kernel itself: were it freed, another object could take its id and be
#: taken for a kernel that had opted in (its launches would then fail with an invalid value).
_DYNAMIC_SHARED_ALLOWED: dict[int, tuple[Any, int]] = {}


def allow_shared_memory(kernel: Any, nbytes: int) -> None:
    """Let ``kernel`` launch with ``nbytes`` of dynamic shared memory.

    CUDA lets a block use 48 KiB of static and dynamic shared memory together unless its
    kernel opts in to more; this opts in when the kernel's static bytes plus ``nbytes`` pass
    that, and again when a later launch asks for more than the kernel was allowed.
    """
    if nbytes <= 0:  # static shared memory alone cannot pass 48 KiB: NVRTC refuses that
        return
    entry = _DYNAMIC_SHARED_ALLOWED.get(id(kernel))
    if entry is not None and entry[0] is kernel:
        allowed = entry[1]
    else:
        allowed = DEFAULT_SHARED_BYTES - _in_context(lambda: int(kernel.shared_size_bytes))
    if nbytes > allowed:
        _in_context(lambda: setattr(kernel, "max_dynamic_shared_size_bytes", nbytes))
        allowed = nbytes
    _DYNAMIC_SHARED_ALLOWED[id(kernel)] = (kernel, allowed)


def resident_blocks(source: Any, instance: str, threads: int, shared_mem: int = 0) -> int:
    """Blocks of ``threads`` threads of kernel ``instance`` that one SM of the current device
    runs at once: the driver's occupancy calculator, which counts the instance's registers and
    shared memory (compiling its group on first use). At least 1.

    A plan that sizes its grid to whole waves of blocks asks this rather than assuming a
    number of blocks per SM: an instance with wide accumulators can need three times the
    registers of its neighbours, and a grid of "one wave" then runs as one and a fraction.
    """
    from cupy_backends.cuda.api.driver import occupancyMaxActiveBlocksPerMultiprocessor

    kernel = source.function(instance)
    return builtins.max(1, int(_in_context(lambda: occupancyMaxActiveBlocksPerMultiprocessor(
        kernel.kernel.ptr, int(threads), int(shared_mem)))))


class _LaunchConfig(ctypes.Structure):
    """The driver's CUlaunchConfig (cuda.h): grid, block, dynamic shared memory, stream and
    launch attributes."""

    _fields_ = [("grid_x", ctypes.c_uint), ("grid_y", ctypes.c_uint), ("grid_z", ctypes.c_uint),
                ("block_x", ctypes.c_uint), ("block_y", ctypes.c_uint),
                ("block_z", ctypes.c_uint), ("shared_mem", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attributes", ctypes.c_void_p),
                ("attribute_count", ctypes.c_uint)]


@functools.cache
def _max_active_clusters() -> Any:
    """The driver's cuOccupancyMaxActiveClusters, through ctypes (CuPy does not wrap it)."""
    function = ctypes.CDLL("libcuda.so.1").cuOccupancyMaxActiveClusters
    function.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_void_p,
                         ctypes.POINTER(_LaunchConfig)]
    function.restype = ctypes.c_int
    return function


def resident_clusters(source: Any, instance: str, threads: int, shared_mem: int,
                      cluster: int) -> int:
    """Clusters of ``cluster`` blocks of ``threads`` threads of kernel ``instance`` (compiled
    with that cluster size, ``__cluster_dims__``) that the current device runs at once: the
    driver's count, which knows how the SMs are grouped (a cluster's blocks share one GPC).
    A grid of persistent clusters sized past it would run its last clusters after the others
    have finished their walks. RuntimeError where the driver cannot say."""
    kernel = source.function(instance)
    allow_shared_memory(kernel, shared_mem)
    config = _LaunchConfig(cluster * _device.multiprocessor_count(), 1, 1, threads, 1, 1,
                           shared_mem, None, None, 0)
    count = ctypes.c_int(0)
    status = _max_active_clusters()(ctypes.byref(count), kernel.kernel.ptr, ctypes.byref(config))
    if status == CUDA_ERROR_INVALID_CONTEXT:  # a thread with no context yet (see _in_context)
        _bind_current_device()
        status = _max_active_clusters()(ctypes.byref(count), kernel.kernel.ptr,
                                        ctypes.byref(config))
    if status != 0 or count.value < 1:
        raise RuntimeError(f"{instance}: the driver could not count the resident clusters of "
                           f"{cluster} blocks (CUresult {status}, count {count.value})")
    return count.value


@dataclass(frozen=True)
class LaunchRecord:
    """One launch seen by :func:`record_launches`: the kernel, its configuration and where it
    comes from (``source`` is the path under ``kernels/``, ``rung`` the rung that launched it, or
    the name of the plan for kernels that are not rungs, such as the axis reductions')."""

    kernel: Any
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int = 0  # dynamic shared memory, bytes
    source: str = ""
    instance: str = ""
    rung: str = ""


_recorder = threading.local()  # .state: (list of LaunchRecord, dry_run) inside record_launches
#: record_launches blocks open in any thread: while none is, a launch skips the thread-local
#: lookup (a missing attribute of a threading.local costs about 0.9 us, a tenth of a launch).
_recording = 0
_recording_lock = threading.Lock()

#: ids of the kernels launched (by any thread) since tracking began; None while not tracking.
#: The test suite's launch record (tests/conftest.py) turns it on so that scripts/sanitize.sh
#: can show which kernel instances ran under each sanitizer tool.
_launched_ids: set[int] | None = None


def track_launches(on: bool = True) -> set[int] | None:
    """Start (or stop) tracking launches; return the ids tracked so far and start a new set."""
    global _launched_ids
    seen = _launched_ids
    _launched_ids = set() if on else None
    return seen


@contextlib.contextmanager
def record_launches(*, dry_run: bool = False) -> Iterator[list[LaunchRecord]]:
    """Record every kernel launch made by this thread inside the ``with`` block.

    Yields the list that receives a :class:`LaunchRecord` per launch. With ``dry_run=True`` the
    kernels are not launched: the wrappers still validate, allocate and choose their
    configuration, so the records say what a call would run. Other threads launch as usual.
    Blocks nest; the innermost one records.

    Examples
    --------
    >>> import cupy, gpukernels as gk
    >>> from gpukernels._core.launch import record_launches
    >>> with record_launches(dry_run=True) as launches:  # doctest: +SKIP
    ...     gk.transpose(cupy.empty((64, 64), cupy.float32), method="naive")
    >>> launches[0].grid, launches[0].block  # doctest: +SKIP
    ((16, 1, 1), (4, 64, 1))
    """
    global _recording
    saved = getattr(_recorder, "state", None)
    records: list[LaunchRecord] = []
    with _recording_lock:
        _recording += 1
    _recorder.state = (records, dry_run)
    try:
        yield records
    finally:
        _recorder.state = saved
        with _recording_lock:
            _recording -= 1


def dry_run() -> bool:
    """Whether this thread's launches are switched off (inside ``record_launches(dry_run=True)``):
    a wrapper then skips the CuPy work that would read its kernels' unwritten outputs."""
    if not _recording:
        return False
    state = getattr(_recorder, "state", None)
    return state is not None and state[1]


@dataclass(frozen=True)
class Launch:
    """What a rung's plan decides for one launch: the kernel instance and its geometry. Plain
    data, worked out without a GPU (the compile tests check that every instance a plan can
    name is compiled)."""

    source: Any  # KernelSource
    instance: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int = 0

    def call(self, args: tuple, rung: str = "", stream_arrays: Any = None) -> KernelCall:
        """This launch with its arguments, ready to run (see :class:`KernelCall`)."""
        return KernelCall(self.source, self.instance, self.grid, self.block, args,
                          self.shared_mem, rung, stream_arrays)


@dataclass(frozen=True)
class Array:
    """In a :class:`KernelCall`'s arguments: the ``index``-th argument given to each call, a
    CuPy array (its data pointer is passed), or with ``nbytes`` a value of that many bytes passed
    by value (a NumPy scalar or void, such as a 128-byte tensor map)."""

    index: int
    nbytes: int = 0


@dataclass(frozen=True)
class StreamArray:
    """In a :class:`KernelCall`'s arguments: the ``index``-th of the arrays that the call's
    ``stream_arrays`` function returns for the current stream (scratch buffers that launches on
    one stream share). Looked up again only when a call comes from another stream."""

    index: int


_stream_buffers: dict[tuple, tuple] = {}
_stream_buffers_lock = threading.Lock()


def stream_buffers(key: tuple, make: Callable[[], tuple]) -> tuple:
    """The scratch arrays that ``make()`` returns, made once per ``key`` for the current device
    and stream and never reallocated: planned launches keep their addresses (StreamArray
    slots), and launches on one stream, which run in order, share them. ``key`` starts with
    its owner's name and holds whatever sizes ``make`` allocates."""
    cupy = _device.cupy
    full = (cupy.cuda.runtime.getDevice(), cupy.cuda.get_current_stream().ptr, *key)
    found = _stream_buffers.get(full)
    if found is None:
        with _stream_buffers_lock:
            found = _stream_buffers.get(full)
            if found is None:
                found = _stream_buffers[full] = make()
    return found


class KernelCall:
    """One planned launch: a compiled kernel instance, its grid, block and dynamic shared
    memory, and its arguments with the per-call arrays left as slots.

    Parameters
    ----------
    source : KernelSource
        The source the instance is compiled from.
    instance : str
        The template instance, e.g. ``"transpose_shared<unsigned int, int, 32, 8>"``.
    grid, block : tuple of 3 ints
    args : tuple
        The kernel's arguments in order: ``Array(i)`` for the i-th array of each call; NumPy
        scalars of the parameter's exact C type (``numpy.int32(n)`` for ``int``; CuPy would pass
        a Python int as ``long long``), or arrays that every call shares.
    shared_mem : int
        Dynamic shared memory in bytes.
    rung : str
        What launched it, for :func:`record_launches` (a rung's name, or a plan's).
    stream_arrays : callable, optional
        Returns the arrays that ``StreamArray(i)`` arguments stand for on the current device and
        stream (needed when ``args`` has any).

    The configuration is checked against the device's limits here, once: a grid or block it
    cannot run raises ValueError before any launch.
    """

    __slots__ = ("kernel", "grid", "block", "shared_mem", "template", "slots", "record",
                 "stream_slots", "stream_arrays", "_function", "_words", "_pointers",
                 "_pointers_address", "_pointer_words", "_value_words", "_stream_words",
                 "_stream", "_lock", "_values", "_launch_head")

    def __init__(self, source: Any, instance: str, grid: tuple, block: tuple, args: tuple,
                 shared_mem: int = 0, rung: str = "", stream_arrays: Any = None) -> None:
        kernel = source.function(instance)
        grid, block = tuple(int(g) for g in grid), tuple(int(b) for b in block)
        threads = block[0] * block[1] * block[2]
        if threads > kernel.max_threads_per_block:
            raise ValueError(
                f"{instance}: a block of {threads} threads exceeds this kernel's limit of "
                f"{kernel.max_threads_per_block} on this device"
            )
        if not (0 < grid[0] <= MAX_GRID_X and 0 < grid[1] <= MAX_GRID_YZ
                and 0 < grid[2] <= MAX_GRID_YZ):
            raise ValueError(
                f"{instance}: grid {grid} is outside CUDA's limits (x <= {MAX_GRID_X}, y and z "
                f"<= {MAX_GRID_YZ}); the input is too large for this rung"
            )
        allow_shared_memory(kernel, shared_mem)
        self.kernel = kernel
        self.grid, self.block, self.shared_mem = grid, block, int(shared_mem)
        for arg in args:
            # Python numbers (numpy.float64 is a float too, and welcome: its C type is double)
            if isinstance(arg, (bool, int, float, complex)) and not isinstance(arg, numpy.generic):
                raise TypeError(f"{instance}: pass {arg!r} as a NumPy scalar of the kernel "
                                "parameter's C type")
        self.template = list(args)
        self.slots = tuple((position, arg.index) for position, arg in enumerate(args)
                           if isinstance(arg, Array))
        self.stream_slots = tuple((position, arg.index) for position, arg in enumerate(args)
                                  if isinstance(arg, StreamArray))
        if self.stream_slots and stream_arrays is None:
            raise TypeError(f"{instance}: StreamArray arguments need stream_arrays")
        self.stream_arrays = stream_arrays
        self.record = LaunchRecord(kernel, grid, block, self.shared_mem, source.path, instance,
                                   rung)
        self._lock = threading.Lock()
        self._parameter_block(args)

    def _parameter_block(self, args: tuple) -> None:
        """The arguments as cuLaunchKernel reads them: a word buffer with a slot per argument
        (16-byte aligned), the fixed ones written in now, and the array of the slots' addresses.
        Each call writes its arrays' data pointers into their slots and launches through the
        driver: no per-call argument packing (CuPy's launch packs every argument every call, a
        few microseconds for a dozen of them)."""
        function = getattr(getattr(self.kernel, "kernel", None), "ptr", None)
        if not isinstance(function, int):  # not a CuPy kernel (a test's stand-in): CuPy's call
            self._function = None
            return
        offsets, array_words, stream_words, total = [], [], [], 0
        for arg in args:
            offsets.append(total)
            if isinstance(arg, Array):
                nbytes = arg.nbytes or 8
                array_words.append((total // 8, arg.index, arg.nbytes))
            elif isinstance(arg, StreamArray):
                nbytes = 8
                stream_words.append((total // 8, arg.index))
            elif isinstance(arg, (numpy.generic, numpy.void)):
                nbytes = arg.nbytes
            else:  # an array every call shares
                nbytes = 8
            total += -(-nbytes // 16) * 16
        words = _array.array("Q", bytes(max(total, 8)))
        for arg, offset in zip(args, offsets):
            if isinstance(arg, (Array, StreamArray)):
                continue
            if isinstance(arg, (numpy.generic, numpy.void)):
                raw = arg.tobytes()
            else:
                raw = int(arg.data.ptr).to_bytes(8, "little")
            raw += bytes(-len(raw) % 8)
            words[offset // 8:offset // 8 + len(raw) // 8] = _array.array("Q", raw)
        base = words.buffer_info()[0]
        self._words = words
        self._pointers = _array.array("Q", [base + offset for offset in offsets] or [0])
        self._pointers_address = self._pointers.buffer_info()[0]
        # (word, array index) of the arrays passed by pointer, and (word, array index, bytes)
        # of those passed by value (tensor maps)
        self._pointer_words = tuple((word, index) for word, index, nbytes in array_words
                                    if not nbytes)
        self._value_words = tuple(entry for entry in array_words if entry[2])
        self._stream_words = tuple(stream_words)
        self._stream: int | None = None  # the stream whose arrays the stream slots hold now
        self._values: dict[int, Any] = {}  # the value each by-value slot holds now
        self._function = function
        # cuLaunchKernel's arguments before the stream, fixed for the call's life
        self._launch_head = (function, *self.grid, *self.block, self.shared_mem)

    def __call__(self, *arrays: Any) -> None:
        """Launch on the current stream with ``arrays`` in the slots."""
        if _recording:
            state = getattr(_recorder, "state", None)
            if state is not None:
                state[0].append(self.record)
                if state[1]:
                    return
        if _launched_ids is not None:
            _launched_ids.add(id(self.kernel))
        if self._function is None:
            args = self.template.copy()
            for position, index in self.slots:
                args[position] = arrays[index]
            if self.stream_slots:
                per_stream = self.stream_arrays()
                for position, index in self.stream_slots:
                    args[position] = per_stream[index]
            self.kernel(self.grid, self.block, tuple(args), shared_mem=self.shared_mem)
            return
        words = self._words
        stream = _current_stream().ptr
        lock = self._lock
        lock.acquire()  # the slots are this call's until the driver has copied them
        try:
            for word, index in self._pointer_words:
                words[word] = arrays[index].data.ptr
            for word, index, nbytes in self._value_words:
                value = arrays[index]  # a tensor map: rewritten only when it is another object
                if self._values.get(word) is not value:
                    words[word:word + nbytes // 8] = _array.array("Q", value.tobytes())
                    self._values[word] = value
            if self._stream_words and stream != self._stream:
                per_stream = self.stream_arrays()
                for word, index in self._stream_words:
                    words[word] = per_stream[index].data.ptr
                self._stream = stream
            try:
                _launch_kernel(*self._launch_head, stream, self._pointers_address, 0)
            except Exception as error:
                if getattr(error, "status", None) != CUDA_ERROR_INVALID_CONTEXT:
                    raise
                # A thread whose first CUDA call is this launch (its arrays, plan and a pooled
                # result block all made elsewhere) has no current context: CuPy's calls go
                # through the runtime, which binds the device's context on first use; the
                # driver's launch does not. Bind it, as CuPy's first call would, and launch.
                _bind_current_device()
                _launch_kernel(*self._launch_head, stream, self._pointers_address, 0)
        finally:
            lock.release()

    def into_new(self, shape: tuple, dtype: Any, nbytes: int, *inputs: Any) -> Any:
        """Launch with ``inputs`` and, in the next array slot, a new C-contiguous array of
        ``shape`` and ``dtype`` (``nbytes`` bytes), and return that array.

        The memory is taken from CuPy's allocator before the launch and the array built around
        it after: a call's kernel reaches the GPU sooner by the ndarray's construction (2.5-2.9
        us of the 3.8-4.0 that ``cupy.ndarray(shape, dtype)`` takes on an H100 host, where the
        allocator's part is 1.2-1.6; benchmarks/NOTES.md, item 168). The two steps together
        take about 1 us more host time than ``cupy.ndarray``, which is what a call on a tiny
        input costs: the reductions take this path only from their LAUNCH_FIRST_BYTES of input
        (item 172).
        """
        cupy = _device.cupy
        if self._function is None:  # a test's stand-in: CuPy's call takes arrays
            result = cupy.ndarray(shape, dtype)
            self(*inputs, result)
            return result
        memory = _NewArray(_alloc(nbytes))
        self(*inputs, memory)
        return cupy.ndarray(shape, dtype, memptr=memory.data)


class _NewArray:
    """A new array's memory in a launch's slots, before the array around it exists: what the
    launch reads of an array (``.data.ptr``)."""

    __slots__ = ("data",)

    def __init__(self, data: Any) -> None:
        self.data = data


def _alloc(nbytes: int) -> Any:
    """``nbytes`` of device memory from CuPy's current allocator (its pool unless the user set
    another), on the current device and stream."""
    global _alloc
    _alloc = _device.cupy.cuda.alloc
    return _alloc(nbytes)


CUDA_ERROR_INVALID_CONTEXT = 201


def _bind_current_device() -> None:
    """Make the current device's primary context current in the calling thread."""
    runtime = _device.cupy.cuda.runtime
    runtime.setDevice(runtime.getDevice())


def _in_context(call: Callable[[], Any]) -> Any:
    """``call()``, a driver call made at plan time, and once more with the current device's
    context bound where the calling thread had none yet: a Dask worker thread that plans a new
    shape with kernels compiled elsewhere makes such a call before any of CuPy's (see
    KernelCall.__call__, which does the same for a first launch)."""
    try:
        return call()
    except Exception as error:
        if getattr(error, "status", None) != CUDA_ERROR_INVALID_CONTEXT:
            raise
        _bind_current_device()
        return call()


def _launch_kernel(*args: Any) -> None:
    """cuLaunchKernel, through CuPy's binding (imported on first use: CuPy is optional)."""
    global _launch_kernel
    from cupy_backends.cuda.api.driver import launchKernel

    _launch_kernel = launchKernel
    launchKernel(*args)


def _current_stream() -> Any:
    global _current_stream
    _current_stream = _device.cupy.cuda.get_current_stream
    return _current_stream()


class PlanCache:
    """Plans by key (shapes, strides, dtypes, alignments, device, ...), shared by every
    operation; keys start with the operation's name. Bounded: a long session may see many
    layouts, and planning again costs only host time."""

    def __init__(self, maxsize: int = 4096) -> None:
        self.maxsize = maxsize
        self._plans: dict = {}
        self.get = self._plans.get

    def put(self, key: Any, plan: Any) -> Any:
        if len(self._plans) >= self.maxsize:
            self._plans.clear()
        self._plans[key] = plan
        return plan

    def clear(self) -> None:
        self._plans.clear()

    def __len__(self) -> int:
        return len(self._plans)


#: The one plan cache.
PLANS = PlanCache()


def prepare_out(out: Any, shape: tuple[int, ...], dtype: numpy.dtype, device_id: int,
                inputs: tuple,
                casting: Literal["no", "equiv", "safe", "same_kind", "unsafe"] = "same_kind"
                ) -> bool:
    """Validate an ``out=`` argument. Return True when the kernel may write into it directly.

    ``out`` must be a CuPy array of exactly ``shape`` on the inputs' device, and ``dtype`` must
    cast to its dtype under ``casting`` (NumPy's rule for the operation). Anything else raises
    TypeError or ValueError before a launch. A direct write needs the exact dtype, C order and no
    memory shared with an input; otherwise the result goes through a temporary (see
    :func:`finish_out`), so overlapping or strided outputs still get the right answer.
    """
    cupy = _device.cupy
    if cupy is None or not isinstance(out, cupy.ndarray):
        raise TypeError(f"out must be a CuPy array, not {type(out).__module__}.{type(out).__name__}")
    _device.check_alignment(out, "out")
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"out has shape {tuple(out.shape)}, but the result has shape {tuple(shape)}")
    if not numpy.can_cast(dtype, out.dtype, casting=casting):
        raise TypeError(
            f"cannot cast the result dtype {dtype} to out's dtype {out.dtype} "
            f"with casting rule {casting!r}"
        )
    if out.device.id != device_id:
        raise ValueError(
            f"out is on GPU {out.device.id} but the inputs are on GPU {device_id}; "
            "allocate out on the inputs' device"
        )
    return bool(
        out.dtype == dtype
        and out.flags.c_contiguous
        and not any(cupy.may_share_memory(out, x) for x in inputs)
    )


def finish_out(result: Any, out: Any, direct: bool) -> Any:
    """Copy ``result`` into ``out`` unless the kernel already wrote there; return the output."""
    if out is None or direct:
        return result
    out[...] = result
    return out
