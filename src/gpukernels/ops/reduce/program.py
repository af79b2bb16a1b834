"""The launches of one reduction, planned once per input layout and replayed.

Planning a reduction (result dtype, axes, layouts, grids, kernel instances) costs tens of
microseconds of Python, as much as the kernels of a 10**7-element reduction. A
:class:`Program` records it as steps over numbered buffers: buffer 0 is the input, the others
are allocated when the program runs; :meth:`Program.run` only allocates and launches.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy

from ..._core import device as _device
from ..._core.launch import Array, StreamArray, stream_buffers
from .dtypes import storage

__all__ = ["Program", "COUNTER", "PARTIALS", "TICKETS", "SCRATCH_ITEM", "LAUNCH_FIRST_BYTES",
           "scratch", "empty"]


class _Scratch:
    """A stand-in in a program's launch arguments for a scratch buffer of the current device and
    stream (see :func:`scratch`)."""

    def __init__(self, name: str, position: int) -> None:
        self.name, self.position = name, position

    def __repr__(self) -> str:
        return self.name


#: one_pass's block counter and partials (reduce_cols_folded's too), and reduce_cols_folded's
#: tickets.
COUNTER, PARTIALS, TICKETS = _Scratch("COUNTER", 0), _Scratch("PARTIALS", 1), _Scratch("TICKETS", 2)
SCRATCH_ITEM = 24  # bytes per partial: room for the widest accumulator (var's moments)
#: From this many input bytes a one-launch program's result is built after its launch
#: (KernelCall.into_new): the kernel then starts 2-4 us sooner per call, and it outlasts the
#: array's construction. On smaller inputs the host's time is what a call costs, and
#: into_new's takes about 1 us more than cupy.ndarray's (benchmarks/NOTES.md, item 172); from
#: 64 KiB it moved per-call time by less than the noise (item 175).
LAUNCH_FIRST_BYTES = 1 << 23


def scratch(partials: int, tickets: int) -> tuple:
    """(counter, partials, tickets) of the current device and stream (:func:`stream_buffers`):
    one_pass's block counter, 0 at launch, and room for ``partials`` per-block partials (raw
    bytes), and reduce_cols_folded's ``tickets`` counters, one per column tile. Each launch
    leaves its counters at 0 (reduce_cols_folded writes its split partials to the same
    buffer)."""
    cupy = _device.cupy
    found = stream_buffers(("reduce",), lambda: (
        cupy.zeros(1, dtype=numpy.uint32), cupy.empty(partials * SCRATCH_ITEM, dtype=numpy.uint8),
        cupy.zeros(tickets, dtype=numpy.uint32)))
    # Made once per stream with the sizes of the first call (every program of a device asks the
    # same: reduce's scratch_sizes); a larger request would be a plan writing past them.
    if found[1].size < partials * SCRATCH_ITEM or found[2].size < tickets:
        raise RuntimeError(f"the reductions' scratch holds {found[1].size // SCRATCH_ITEM} "
                           f"partials and {found[2].size} tickets; {partials} and {tickets} "
                           "were asked")
    return found


def empty(shape: tuple, dtype: numpy.dtype) -> Any:
    """A new device array for a buffer of ``shape`` and ``dtype``, allocated as
    :func:`~.dtypes.storage` says (a structured accumulator as float64 words)."""
    return _device.cupy.ndarray(*storage(shape, dtype))  # cupy.empty without its Python frame


class Program:
    """Steps over numbered buffers; buffer 0 is the input (of ``source_dtype``).

    Parameters
    ----------
    source_dtype : numpy.dtype
    scratch_sizes : tuple of 2 ints
        The partials and tickets a launch of this device may need (see :func:`scratch`).
    """

    def __init__(self, source_dtype: numpy.dtype, scratch_sizes: tuple[int, int]) -> None:
        self.buffers: list[tuple[tuple, numpy.dtype] | None] = [None]  # (shape, dtype); 0: input
        self.steps: list[tuple] = []
        self.source_dtype = source_dtype
        self.scratch_sizes = scratch_sizes
        self.simple: tuple | None = None  # (call, shape, dtype) of a one-launch program
        self._new: tuple = ()  # and (shape, dtype, bytes) of the array its buffer is made as
        self.launch_first = False  # a one-launch program's array built after its launch

    def allocate(self, shape: tuple, dtype: numpy.dtype) -> int:
        self.buffers.append((tuple(shape), numpy.dtype(dtype)))
        return len(self.buffers) - 1

    def copy(self, source: int, dtype: numpy.dtype) -> int:
        """A C-contiguous copy of buffer ``source`` in ``dtype``."""
        target = len(self.buffers)
        self.buffers.append(None)
        self.steps.append(("copy", source, target, numpy.dtype(dtype)))
        return target

    def launch(self, launch: Any, args: tuple, rung: str) -> None:
        """Record a launch (a :class:`~gpukernels._core.launch.Launch`) with ``args``: ints become
        int64 scalars; a buffer is ``(index, element offset)``; COUNTER, PARTIALS and TICKETS
        are the current stream's scratch buffers when the program runs."""
        self.steps.append(("launch", launch, tuple(args), rung))

    def finish(self, input_bytes: int) -> None:
        """Make the kernel calls (compiling lazily grouped instances now): after this, running
        only allocates and launches. A call's arrays are the buffers, then pointers into buffers
        at an offset (made on each run); the scratch buffers are the calls' stream arrays.
        ``input_bytes``, the planned input's (a plan is made per shape and dtype), decides once
        whether a one-launch program builds its result after its launch (LAUNCH_FIRST_BYTES)."""
        count = len(self.buffers)
        stream_arrays = functools.partial(scratch, *self.scratch_sizes)
        steps = []
        for step in self.steps:
            if step[0] != "launch":
                steps.append(step)
                continue
            _, launch, args, rung = step
            slots, views = [], []
            for arg in args:
                if isinstance(arg, _Scratch):
                    arg = StreamArray(arg.position)
                elif isinstance(arg, tuple):
                    buffer, offset = arg
                    if offset:
                        views.append((buffer, offset))
                        arg = Array(count + len(views) - 1)
                    else:
                        arg = Array(buffer)
                elif isinstance(arg, int):
                    arg = numpy.int64(arg)
                slots.append(arg)
            steps.append(("launch", launch.call(tuple(slots), rung, stream_arrays), tuple(views)))
        self.steps = steps
        launches = [step for step in steps if step[0] == "launch"]
        if len(self.buffers) == 2 and len(steps) == 1 and self.buffers[1] is not None \
                and not launches[0][2]:
            self.simple = (launches[0][1], *self.buffers[1])
            shape, dtype = storage(*self.buffers[1])
            self._new = (shape, dtype, math.prod(shape) * dtype.itemsize)
            self.launch_first = input_bytes >= LAUNCH_FIRST_BYTES

    def _itemsize(self, buffer: int, array: Any) -> int:
        """Bytes per element of ``buffer`` (``array``; a structured accumulator's, not the
        float64 words it is allocated as)."""
        spec = self.buffers[buffer]
        return array.itemsize if spec is None else spec[1].itemsize

    def run(self, x: Any, result_index: int) -> Any:
        simple = self.simple
        if simple is not None:  # one launch into one new buffer: most reductions
            call, shape, dtype = simple
            if self.launch_first:
                return call.into_new(*self._new, x)
            result = empty(shape, dtype)
            call(x, result)
            return result
        cupy = _device.cupy
        buffers = [x] + [None if spec is None else empty(*spec) for spec in self.buffers[1:]]
        for step in self.steps:
            if step[0] == "copy":
                _, source, target, dtype = step
                buffers[target] = buffers[source].astype(dtype, order="C", copy=False)
                continue
            _, call, views = step
            if views:  # offsets count elements of the buffer's dtype (accumulators included)
                call(*buffers, *(cupy.ndarray((1,), buffers[b].dtype, memptr=buffers[b].data +
                                              offset * self._itemsize(b, buffers[b]))
                                 for b, offset in views))
            else:
                call(*buffers)
        return buffers[result_index]
