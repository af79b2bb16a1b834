"""Fresh random inputs, on the host (NumPy) or on the device (CuPy), with one set of rules.

Never constant fills: a wrong index or an unwritten element must show. The same distribution
on both sides: uniform(-1, 1) for floats (integers in [-8, 8] when ``integer_valued``, whose
sums and products stay exact), every bit pattern for integers, a fair coin for bool, and both
parts of complex numbers alike.
"""

from __future__ import annotations

import math
from typing import Any

import numpy

from . import device as _device

__all__ = ["random_array"]


def random_array(shape: tuple[int, ...], dtype: Any, rng: Any, *, xp: Any = numpy, integer_valued: bool = False) -> Any:
    """A fresh random array of ``shape`` and ``dtype``.

    Parameters
    ----------
    shape : tuple of int
    dtype : dtype
    rng : numpy.random.Generator or int
        The generator (host) or a seed (both; the device draws with CuPy's generator).
    xp : module
        ``numpy`` for a host array, ``cupy`` for a device array (drawn on the device: fast for
        the benchmark's gigabyte inputs).
    integer_valued : bool
        Floats drawn as integers in [-8, 8].

    Examples
    --------
    >>> import numpy
    >>> from gpukernels._core.inputs import random_array
    >>> x = random_array((3, 4), "float32", numpy.random.default_rng(0))
    >>> x.shape, x.dtype, bool(abs(x).max() <= 1)
    ((3, 4), dtype('float32'), True)
    """
    dtype = numpy.dtype(dtype)
    shape = tuple(shape)
    if xp is numpy:
        if not isinstance(rng, numpy.random.Generator):
            rng = numpy.random.default_rng(rng)
        return _host(shape, dtype, rng, integer_valued)
    seed = rng if isinstance(rng, (int, numpy.integer)) else \
        int(rng.integers(2**63)) if isinstance(rng, numpy.random.Generator) else int(rng)
    return _device_array(shape, dtype, int(seed), integer_valued)


def _host(shape: tuple, dtype: numpy.dtype, rng: numpy.random.Generator,
          integer_valued: bool) -> numpy.ndarray:
    if dtype.kind == "b":
        return numpy.asarray(rng.random(shape) < 0.5)
    if dtype.kind in "iu":
        info = numpy.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    real = numpy.dtype(dtype.char.lower()) if dtype.kind == "c" else dtype

    def draw() -> numpy.ndarray:
        if integer_valued:
            return rng.integers(-8, 9, size=shape).astype(real)
        return rng.uniform(-1.0, 1.0, size=shape).astype(real)

    if dtype.kind == "c":
        return numpy.asarray(draw() + 1j * draw()).astype(dtype)
    return numpy.asarray(draw())


def _device_array(shape: tuple, dtype: numpy.dtype, seed: int, integer_valued: bool) -> Any:
    cupy = _device.cupy
    state = cupy.random.RandomState(seed % 2**63)
    count = math.prod(shape)
    if dtype.kind == "b":
        return (state.random_sample(count, dtype=numpy.float32) < 0.5).reshape(shape)
    if dtype.kind in "iu":  # every bit pattern: random words viewed as the dtype
        words = state.randint(0, 2**32, size=-(-count * dtype.itemsize // 4), dtype=numpy.uint32)
        return words.view(numpy.uint8)[:count * dtype.itemsize].view(dtype).reshape(shape)
    real = numpy.dtype(dtype.char.lower()) if dtype.kind == "c" else dtype
    parts = 2 if dtype.kind == "c" else 1
    if integer_valued:
        values = state.randint(-8, 9, size=parts * count).astype(real)
    else:
        sample = numpy.float64 if real.itemsize == 8 else numpy.float32
        values = state.uniform(-1.0, 1.0, size=parts * count, dtype=sample).astype(real, copy=False)
    return values.view(dtype).reshape(shape) if parts == 2 else values.reshape(shape)
