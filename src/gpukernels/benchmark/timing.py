"""How one candidate is timed: per call (host time included) and held (device work alone).

Two measurements over CUDA events, medians of each:

* **per call** (``call_ms``): events around one call on an idle GPU, as
  :func:`cupyx.profiler.benchmark` times it and as a user's code sees it. The host's time
  before the launch (the wrapper's Python) is included: on an idle GPU the start event
  completes at once and the device waits for the launch.
* **held** (``time_ms``): the call's device work alone. A kernel that spins on a flag in pinned
  host memory runs first; the start event, the call's work and the end event queue behind it,
  and the flag is released only after the call returned (nvbench's method, see
  ``kernels/timing.cu``). The gaps between a call's own launches still count.

Goals are judged per call; the held time says how close the kernels are to the hardware.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy

from .._core import device as _device
from .._core.compile import KernelSource

__all__ = ["Timing", "QUICK_TIMING", "time_call", "synchronize"]


@dataclass(frozen=True)
class Timing:
    """How each candidate is timed.

    Parameters
    ----------
    repeat : int
        Held timings at most (their median is ``time_ms``).
    call_repeat : int
        Timed single calls at most, host time included (their median is ``call_ms``).
    warmup : int
        Untimed calls first; one when a single call takes longer than 20 ms.
    max_seconds : float
        Stop timing a candidate's calls after this many seconds, per measurement (at least one
        timed call each).
    max_call_ms : float
        Skip a candidate at a size where its time at the previous size of the same series,
        scaled by the work, predicts more than this many milliseconds per call (a slow rung
        at a large size). ``inf`` never skips.

    Examples
    --------
    >>> from gpukernels.benchmark import Timing
    >>> Timing(repeat=20, max_seconds=0.1)
    Timing(repeat=20, call_repeat=100, warmup=3, max_seconds=0.1, max_call_ms=1000.0)
    """

    repeat: int = 200
    call_repeat: int = 100
    warmup: int = 3
    max_seconds: float = 0.5
    max_call_ms: float = 1000.0


QUICK_TIMING = Timing(repeat=10, call_repeat=10, warmup=1, max_seconds=0.05)


def synchronize() -> None:
    _device.cupy.cuda.Device().synchronize()


# The hold kernel (kernels/timing.cu): compiled on first use, not at import.
TIMING_SOURCE = KernelSource("timing.cu")
TIMING_SOURCE.add("hold", ["gk_hold_stream"], eager=False)
_HOLD_TIMEOUT_NS = 200_000_000  # 0.2 s: far beyond any host enqueue time


class _StreamHold:
    """Device time of a call, its host time hidden (see the module's docstring)."""

    def __init__(self) -> None:
        cupy = _device.cupy
        self._memory = cupy.cuda.alloc_pinned_memory(8)  # mapped: the device reads it directly
        self._flags = numpy.frombuffer(self._memory, numpy.int32, 2)
        self._kernel = TIMING_SOURCE.function("gk_hold_stream")
        self._start, self._end = cupy.cuda.Event(), cupy.cuda.Event()

    def time_ms(self, fn: Callable[[], Any]) -> float | None:
        """Milliseconds of ``fn``'s device work, or None if the call waited on the device."""
        cupy = _device.cupy
        self._flags[:] = 0
        self._kernel((1,), (1,), (numpy.uint64(self._memory.ptr), numpy.uint64(_HOLD_TIMEOUT_NS)))
        self._start.record()
        fn()
        self._end.record()
        self._flags[0] = 1
        self._end.synchronize()
        if self._flags[1]:
            return None  # the hold gave up: fn synchronised, so its time is not a held time
        return float(cupy.cuda.get_elapsed_time(self._start, self._end))


_HOLDS: dict[int, _StreamHold] = {}


def _stream_hold() -> _StreamHold:
    device = _device.cupy.cuda.runtime.getDevice()
    hold = _HOLDS.get(device)
    if hold is None:
        hold = _HOLDS[device] = _StreamHold()
    return hold


def time_call(fn: Callable[[], Any], timing: Timing, first_call_ms: float) -> dict:
    """Time ``fn`` per call and held; returns the notes of a measurement.

    ``call_ms`` and ``time_ms`` are medians in milliseconds (``time_ms`` falls back to the
    per-call median, with ``held`` False, when the call waits on the device itself); ``runs``
    and ``call_runs`` count the timed calls; ``min_ms`` is the fastest held time.
    """
    from cupyx.profiler import benchmark

    warmup = timing.warmup if first_call_ms < 20 else min(timing.warmup, 1)
    result = benchmark(fn, (), n_repeat=max(1, timing.call_repeat), n_warmup=warmup,
                       max_duration=timing.max_seconds, name=getattr(fn, "__name__", "call"))
    call_times = numpy.asarray(result.gpu_times[0]) * 1e3
    notes: dict[str, Any] = {"call_ms": float(numpy.median(call_times)),
                             "call_runs": int(call_times.size)}
    hold = _stream_hold()
    held: list[float] = []
    deadline = time.perf_counter() + timing.max_seconds
    while len(held) < max(1, timing.repeat) and (not held or time.perf_counter() < deadline):
        ms = hold.time_ms(fn)
        if ms is None:  # fn waited on the device: only the per-call time is meaningful
            notes.update(time_ms=notes["call_ms"], held=False, runs=int(call_times.size),
                         min_ms=float(call_times.min()))
            return notes
        held.append(ms)
    times = numpy.asarray(held)
    notes.update(time_ms=float(numpy.median(times)), held=True, runs=int(times.size),
                 min_ms=float(times.min()))
    return notes
