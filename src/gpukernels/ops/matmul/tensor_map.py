"""Tensor maps for the Tensor Memory Accelerator (TMA), built with the CUDA driver.

A kernel that copies tiles with ``cp.async.bulk.tensor`` reads a 128-byte ``CUtensorMap`` that
describes the array in global memory (shape, strides, element type) and the box one copy moves.
The driver encodes it (``cuTensorMapEncodeTiled``); CuPy does not wrap that call, so it is reached
through ctypes. The map is returned as a 128-byte NumPy ``void`` scalar, which CuPy passes to a
kernel by value (the kernel declares it ``const __grid_constant__``).
"""

from __future__ import annotations

import ctypes
import functools
import threading
from typing import Any

import numpy

from ..._core.floats import BFLOAT16

__all__ = ["TensorMapError", "tiled_map", "tma_compatible", "MAP_BYTES", "MapTemplate"]

MAP_BYTES = 128
_ALIGN = 64  # CUtensorMap's alignment

# CUtensorMapDataType, CUtensorMapSwizzle, CUtensorMapL2promotion (cuda.h, CUDA 12 and 13).
# CUtensorMapDataType: FLOAT16 6, FLOAT32 7, BFLOAT16 9.
_DATA_TYPES = {numpy.dtype(numpy.float16): 6, numpy.dtype(numpy.float32): 7, BFLOAT16: 9}
_SWIZZLE_128B = 3
_L2_PROMOTION_128B = 2
_INTERLEAVE_NONE = 0
_OOB_FILL_ZEROS = 0


class TensorMapError(RuntimeError):
    """The driver refused to encode a tensor map (its CUresult is in the message)."""


@functools.cache
def _encode_function():
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:  # no driver: the GPU paths that need a map cannot run anyway
        raise TensorMapError(f"cannot load the CUDA driver library: {exc}") from None
    encode = libcuda.cuTensorMapEncodeTiled
    u64p, u32p = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32)
    encode.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, u64p, u64p,
                       u32p, u32p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    encode.restype = ctypes.c_int
    replace = libcuda.cuTensorMapReplaceAddress
    replace.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    replace.restype = ctypes.c_int
    return encode, replace


def tma_compatible(stack: Any) -> bool:
    """Whether TMA can read the (batch, rows, cols) array ``stack`` as it is.

    TMA needs a 16-byte aligned start, a unit column stride, and rows (and matrices, unless the
    batch stride is 0: one matrix broadcast) that follow each other at multiples of 16 bytes
    without overlapping. One matrix's batch stride is never used (:func:`tiled_map` maps it
    alone), whatever a reshape made it: the transposed view of a row-major W reshaped to
    (1, K, N) has the rows' stride there.
    """
    batch, rows, cols = stack.shape
    batch_stride, row_stride, col_stride = stack.strides
    return (stack.data.ptr % 16 == 0 and (col_stride == stack.itemsize or cols == 1)
            and row_stride % 16 == 0 and row_stride >= cols * stack.itemsize
            and (batch_stride == 0 or batch == 1
                 or (batch_stride % 16 == 0 and batch_stride >= rows * row_stride)))


def tiled_map(stack: Any, box_cols: int, box_rows: int, batched: bool) -> numpy.void:
    """The tensor map of a (batch, rows, cols) GPU array, copied in boxes of ``box_rows`` x
    ``box_cols`` elements with 128-byte swizzling (``box_cols * itemsize`` must be 128).

    Parameters
    ----------
    stack : cupy.ndarray
        float16, bfloat16 or float32, of nonzero shape, with :func:`tma_compatible` strides.
    box_cols, box_rows : int
        The box one copy moves into shared memory.
    batched : bool
        False (or a batch stride of 0) maps only the first matrix, for an operand broadcast over
        the batch: the kernel then reads matrix 0 for every batch entry.

    Returns
    -------
    numpy.void
        The 128 bytes of the ``CUtensorMap``.
    """
    batch, rows, cols = stack.shape
    if not tma_compatible(stack) or 0 in stack.shape:
        raise ValueError(f"TMA cannot read an array of shape {stack.shape} and strides "
                         f"{stack.strides}")
    if box_cols * stack.itemsize != 128:
        raise ValueError("128-byte swizzling needs boxes 128 bytes wide")
    row_stride = stack.strides[1]
    batched = batched and batch > 1 and stack.strides[0] != 0
    batch_stride = stack.strides[0] if batched else row_stride * rows
    storage = numpy.zeros(MAP_BYTES + _ALIGN, numpy.uint8)
    offset = -storage.ctypes.data % _ALIGN
    result = _encode_function()[0](
        ctypes.c_void_p(storage.ctypes.data + offset), _DATA_TYPES[stack.dtype], 3,
        ctypes.c_void_p(stack.data.ptr),
        (ctypes.c_uint64 * 3)(cols, rows, batch if batched else 1),
        (ctypes.c_uint64 * 2)(row_stride, batch_stride),
        (ctypes.c_uint32 * 3)(box_cols, box_rows, 1),
        (ctypes.c_uint32 * 3)(1, 1, 1),
        _INTERLEAVE_NONE, _SWIZZLE_128B, _L2_PROMOTION_128B, _OOB_FILL_ZEROS)
    if result != 0:
        raise TensorMapError(f"cuTensorMapEncodeTiled returned CUresult {result} for shape "
                             f"{stack.shape}, strides {stack.strides}, box {box_rows}x{box_cols}")
    return numpy.frombuffer(storage[offset:offset + MAP_BYTES].tobytes(), dtype="V128")[0]


class MapTemplate:
    """The tensor map of one layout (shape, strides, dtype, box), re-aimed at each call's data.

    Encoding a map through ctypes takes about 10 us; ``cuTensorMapReplaceAddress`` changes only
    its address. The last map is kept, so calls on the same arrays reuse it as it is.
    """

    def __init__(self, stack: Any, box_cols: int, box_rows: int, batched: bool) -> None:
        self._last = (stack.data.ptr, tiled_map(stack, box_cols, box_rows, batched))
        self._storage = numpy.zeros(MAP_BYTES + _ALIGN, numpy.uint8)
        self._offset = -self._storage.ctypes.data % _ALIGN
        self._lock = threading.Lock()

    def at(self, address: int) -> numpy.void:
        """The map with its data at ``address`` (16-byte aligned, the same layout)."""
        last_address, last_map = self._last  # one read: a pair another thread cannot split
        if address == last_address:
            return last_map
        with self._lock:
            view = self._storage[self._offset:self._offset + MAP_BYTES]
            view[...] = numpy.frombuffer(last_map.tobytes(), numpy.uint8)
            result = _encode_function()[1](ctypes.c_void_p(self._storage.ctypes.data +
                                                           self._offset),
                                           ctypes.c_void_p(address))
            if result != 0:
                raise TensorMapError(f"cuTensorMapReplaceAddress returned CUresult {result}")
            aimed = numpy.frombuffer(view.tobytes(), dtype="V128")[0]
            self._last = (address, aimed)
        return aimed
