"""Comparing results with references, on the host or the device, and poisoned outputs."""

from __future__ import annotations

from typing import Any

import numpy

from . import device as _device

__all__ = ["same_bits", "within", "poisoned", "compare"]

_CARRIERS = {1: numpy.uint8, 2: numpy.uint16, 4: numpy.uint32, 8: numpy.uint64}


def same_bits(a: Any, b: Any) -> bool:
    """Exact equality, bit for bit (so NaN payloads and signed zeros count); NumPy or CuPy."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.itemsize in _CARRIERS:
        a, b = a.view(_CARRIERS[a.dtype.itemsize]), b.view(_CARRIERS[b.dtype.itemsize])
    return bool((a == b).all())


def within(got: Any, want: Any, bound: Any) -> bool:
    """Every ``|got - want| <= bound`` and no NaN where ``want`` has none; NumPy or CuPy."""
    error = abs(got.astype(want.dtype) - want)
    return bool((error <= bound).all()) and not bool((error != error).any())


def poisoned(shape: Any, dtype: Any) -> Any:
    """A GPU array whose every byte is 0xFF: NaN for floats, -1 or the maximum for integers,
    so an element the kernel forgot to write cannot pass for a result."""
    cupy = _device.cupy
    out = cupy.empty(shape, dtype=dtype)
    out.reshape(-1).view(numpy.uint8)[...] = 0xFF  # reshape: a 0-d array cannot change itemsize
    return out


def compare(got: numpy.ndarray, want: numpy.ndarray, bound: Any) -> tuple[bool, float, float]:
    """(ok, largest error, largest error over its bound) of a host result; ``bound`` None or
    all zeros asks for exact equality (integers always)."""
    if got.shape != want.shape:
        return False, float("inf"), float("inf")
    if got.size == 0:
        return True, 0.0, 0.0
    if bound is None or got.dtype.kind in "biu" or numpy.all(bound == 0):
        wrong = got != want
        if got.dtype.kind in "fc":  # NaN where the reference has NaN is a match
            wrong &= ~(numpy.isnan(got) & numpy.isnan(want))
        return not wrong.any(), float(wrong.sum()), float(wrong.any())
    error = numpy.abs(got.astype(want.dtype) - want)
    excess = error / numpy.maximum(bound, numpy.finfo(numpy.float64).tiny)
    ok = bool(numpy.all(error <= bound)) and not numpy.isnan(error).any()
    return ok, float(numpy.nanmax(error)), float(numpy.nanmax(excess))
