"""Pieces every operation module shares: the ladder registry, launch checks, ``out=`` handling."""

from __future__ import annotations

import builtins
import contextlib
import functools
import threading
from dataclasses import dataclass

import numpy

from . import _device

__all__ = ["Rung", "methods", "register_ladder", "resolve_method", "launch", "ceil_div",
           "index_type", "span", "multiprocessor_count", "prepare_out", "finish_out",
           "LaunchRecord", "record_launches"]

# CUDA's grid limits: gridDim.x up to 2^31 - 1, gridDim.y and gridDim.z up to 65535.
MAX_GRID_X = 2**31 - 1
MAX_GRID_YZ = 65535


@dataclass(frozen=True)
class Rung:
    """One step of an operation's ladder.

    Attributes
    ----------
    name : str
        The ``method=`` string, also the suffix of the CUDA kernel's name and the test id.
    summary : str
        One line: what this rung changes against the rung below it.
    """

    name: str
    summary: str


_LADDERS: dict[str, tuple[Rung, ...]] = {}


def register_ladder(operation: str, rungs: tuple[Rung, ...]) -> tuple[Rung, ...]:
    """Record ``rungs`` (bottom rung first) as the ladder of ``operation``."""
    _LADDERS[operation] = rungs
    return rungs


def methods(operation: str) -> tuple[str, ...]:
    """The rungs of an operation's ladder, bottom rung (the textbook kernel) first.

    Parameters
    ----------
    operation : {"transpose", "matmul", "sum"}
        The operation.

    Returns
    -------
    tuple of str
        The names accepted by that operation's ``method=`` argument, besides ``"auto"``.

    Examples
    --------
    >>> import gpukernels as gk
    >>> gk.methods("transpose")
    ('naive', 'naive_col', 'shared', 'vector')
    """
    if operation not in _LADDERS:
        raise ValueError(
            f"unknown operation {operation!r}; choose one of {', '.join(sorted(_LADDERS))}"
        )
    return tuple(rung.name for rung in _LADDERS[operation])


def resolve_method(operation: str, method: object, auto: str) -> str:
    """Check a ``method=`` argument; ``"auto"`` becomes ``auto``. Raises on unknown names."""
    if not isinstance(method, str):
        raise TypeError(f"method must be a string, not {type(method).__name__}")
    if method == "auto":
        return auto
    names = methods(operation)
    if method not in names:
        raise ValueError(
            f"unknown {operation} method {method!r}; choose 'auto' or one of {', '.join(names)}"
        )
    return method


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


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


def span(array) -> int:
    """Elements between the lowest and highest address of a strided array, plus one."""
    if array.size == 0:
        return 0
    return 1 + builtins.sum(abs(s) // array.itemsize * (n - 1) for n, s in zip(array.shape, array.strides))


@functools.cache
def _multiprocessor_count(device_id: int) -> int:
    return _device.cupy.cuda.Device(device_id).attributes["MultiProcessorCount"]


def multiprocessor_count() -> int:
    """Number of streaming multiprocessors of the current device."""
    return _multiprocessor_count(_device.cupy.cuda.runtime.getDevice())


@functools.cache
def _compute_capability(device_id: int) -> int:
    return int(_device.cupy.cuda.Device(device_id).compute_capability)


def compute_capability() -> int:
    """Compute capability of the current device as one number: 90 for sm_90."""
    return _compute_capability(_device.cupy.cuda.runtime.getDevice())


_SHARED_MEMORY_SET: set[int] = set()  # ids of kernels allowed their large dynamic shared memory


def allow_shared_memory(kernel, nbytes: int) -> None:
    """Raise a kernel's dynamic shared-memory limit past the 48 KiB default (once per kernel)."""
    if id(kernel) not in _SHARED_MEMORY_SET:
        kernel.max_dynamic_shared_size_bytes = nbytes
        _SHARED_MEMORY_SET.add(id(kernel))


_max_threads: dict[int, int] = {}


@dataclass(frozen=True)
class LaunchRecord:
    """One launch seen by :func:`record_launches`: the kernel object and its configuration."""

    kernel: object
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int = 0  # dynamic shared memory, bytes


_recorder = threading.local()  # .state: (list of LaunchRecord, dry_run) inside record_launches

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
def record_launches(*, dry_run: bool = False):
    """Record every :func:`launch` made by this thread inside the ``with`` block.

    Yields the list that receives a :class:`LaunchRecord` per launch, after the launch checks
    passed. With ``dry_run=True`` the kernels are not launched: the wrappers still validate,
    allocate and choose their configuration, so the records say what a call would run. Other
    threads launch as usual. Blocks nest; the innermost one records.

    Examples
    --------
    >>> import cupy, gpukernels as gk
    >>> from gpukernels._common import record_launches
    >>> with record_launches(dry_run=True) as launches:  # doctest: +SKIP
    ...     gk.transpose(cupy.empty((64, 64), cupy.float32), method="naive")
    >>> launches[0].grid, launches[0].block  # doctest: +SKIP
    ((16, 1, 1), (4, 64, 1))
    """
    saved = getattr(_recorder, "state", None)
    records: list[LaunchRecord] = []
    _recorder.state = (records, dry_run)
    try:
        yield records
    finally:
        _recorder.state = saved


def launch(kernel, grid: tuple[int, int, int], block: tuple[int, int, int], args: tuple,
           shared_mem: int = 0) -> None:
    """Launch ``kernel`` on the current stream after checking the configuration against limits.

    A configuration the device cannot run raises ValueError here instead of failing inside CUDA
    (where CuPy reports it only as an invalid-argument error after the fact). Inside
    :func:`record_launches` the launch is recorded (and skipped in a dry run).
    """
    threads = block[0] * block[1] * block[2]
    limit = _max_threads.get(id(kernel))
    if limit is None:  # a driver query: once per kernel (families keep their kernels alive)
        limit = _max_threads[id(kernel)] = kernel.max_threads_per_block
    if threads > limit:
        raise ValueError(
            f"{kernel.name}: a block of {threads} threads exceeds this kernel's limit of "
            f"{limit} on this device"
        )
    if not (0 < grid[0] <= MAX_GRID_X and 0 < grid[1] <= MAX_GRID_YZ and 0 < grid[2] <= MAX_GRID_YZ):
        raise ValueError(
            f"{kernel.name}: grid {grid} is outside CUDA's limits "
            f"(x <= {MAX_GRID_X}, y and z <= {MAX_GRID_YZ}); the input is too large for this rung"
        )
    state = getattr(_recorder, "state", None)
    if state is not None:
        state[0].append(LaunchRecord(kernel, tuple(grid), tuple(block), shared_mem))
        if state[1]:
            return
    if _launched_ids is not None:
        _launched_ids.add(id(kernel))
    if shared_mem:
        kernel(grid, block, args, shared_mem=shared_mem)
    else:
        kernel(grid, block, args)


def prepare_out(out, shape: tuple[int, ...], dtype: numpy.dtype, device_id: int, inputs,
                casting: str = "same_kind") -> bool:
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
    return (
        out.dtype == dtype
        and out.flags.c_contiguous
        and not any(cupy.may_share_memory(out, x) for x in inputs)
    )


def finish_out(result, out, direct: bool):
    """Copy ``result`` into ``out`` unless the kernel already wrote there; return the output."""
    if out is None or direct:
        return result
    out[...] = result
    return out
