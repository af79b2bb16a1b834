"""Matrix multiply with NumPy's ``matmul`` semantics (1-D promotion, batching, broadcasting)."""

from __future__ import annotations

import builtins
import math
from typing import Any

import numpy

from .. import _compile, _device
from .._common import (INDEX_SCALARS, MAX_GRID_YZ, Rung, ceil_div, finish_out, index_type, launch,
                      prepare_out, register_ladder, resolve_method, span)

__all__ = ["matmul", "RUNGS", "KERNELS", "matmul_shapes"]

#: The ladder, bottom rung first.
RUNGS = register_ladder("matmul", (
    Rung("naive", "one thread per output element, operands read straight from global memory"),
    Rung("tiled", "32x32 tiles of A and B staged in shared memory: each load feeds 32 FMAs"),
))

#: dtypes with kernels; other inputs are promoted NumPy's way, and must land on one of these.
C_TYPES = {numpy.dtype(numpy.float32): "float", numpy.dtype(numpy.float64): "double"}
TILE = 32
NAIVE_BLOCK = (32, 8)  # a warp spans 32 columns of C: coalesced reads of B, one A broadcast


def _kernel_name(method: str, dtype: numpy.dtype, index: str) -> str:
    if method == "tiled":
        return f"matmul_tiled<{C_TYPES[dtype]}, {index}, {TILE}>"
    return f"matmul_{method}<{C_TYPES[dtype]}, {index}>"


KERNELS = _compile.register("matmul.cu", [
    _kernel_name(rung.name, dtype, index)
    for rung in RUNGS for dtype in C_TYPES for index in INDEX_SCALARS
])


def matmul_shapes(a_shape: tuple[int, ...], b_shape: tuple[int, ...]):
    """Resolve NumPy's matmul shape rules.

    Returns ``(batch_shape, M, K, N, out_shape)``, where a 1-D operand has been promoted (a
    leading or trailing 1 added) and that axis is absent from ``out_shape``. Raises ValueError
    with NumPy's meaning for 0-d operands, mismatched inner dimensions and unbroadcastable
    batch dimensions.
    """
    for index, shape in enumerate((a_shape, b_shape)):
        if len(shape) == 0:
            raise ValueError(
                f"matmul: input operand {index} does not have enough dimensions "
                "(has 0, needs at least 1); use multiply for scalars"
            )
    M, K = (1, a_shape[0]) if len(a_shape) == 1 else a_shape[-2:]
    K_b, N = (b_shape[0], 1) if len(b_shape) == 1 else b_shape[-2:]
    if K != K_b:
        raise ValueError(
            f"matmul: mismatch in the contracted dimension: a has shape {tuple(a_shape)} "
            f"(K={K}) and b has shape {tuple(b_shape)} (K={K_b})"
        )
    try:
        batch_shape = numpy.broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2]))
    except ValueError:
        raise ValueError(
            f"matmul: batch dimensions {tuple(a_shape[:-2])} and {tuple(b_shape[:-2])} "
            "cannot be broadcast together"
        ) from None
    out_shape = batch_shape + ((M,) if len(a_shape) > 1 else ()) + ((N,) if len(b_shape) > 1 else ())
    return batch_shape, M, K, N, out_shape


def _result_dtype(a_dtype: numpy.dtype, b_dtype: numpy.dtype) -> numpy.dtype:
    for dtype in (a_dtype, b_dtype):
        if dtype.kind not in "biufc":
            raise TypeError(f"matmul does not support dtype {dtype}")
    dtype = numpy.result_type(a_dtype, b_dtype)
    if dtype not in C_TYPES:
        raise TypeError(
            f"matmul has kernels for float32 and float64; inputs of {a_dtype} and {b_dtype} "
            f"give {dtype}. Cast them first, e.g. a.astype(cupy.float32)."
        )
    return dtype


def _stack(x, batch_shape, rows: int, cols: int, dtype: numpy.dtype):
    """``x`` as a (batch, rows, cols) view with element strides (copying only if needed)."""
    cupy = _device.cupy
    x = x.astype(dtype, copy=False).reshape(x.shape[:-2] + (rows, cols))
    batch = math.prod(batch_shape)  # explicit: reshape cannot infer -1 when rows * cols == 0
    stacked = cupy.broadcast_to(x, batch_shape + (rows, cols)).reshape(batch, rows, cols)
    if any(s % stacked.itemsize for s in stacked.strides):
        stacked = cupy.ascontiguousarray(stacked)
    return stacked


def matmul(a: Any, b: Any, *, method: str = "auto", out: Any = None):
    """Matrix product of two GPU arrays, with NumPy's ``matmul`` semantics.

    Parameters
    ----------
    a, b : cupy.ndarray or GPU arrays
        Operands of shapes ``(..., M, K)`` and ``(..., K, N)``. A 1-D operand is promoted to a
        matrix (``(K,)`` -> ``(1, K)`` for ``a``, ``(K, 1)`` for ``b``) and the added axis is
        removed from the result; batch axes broadcast. The result dtype is NumPy's (e.g. float32
        with float64 gives float64) and must be float32 or float64; ``K = 0`` gives zeros.
    method : str, optional
        A rung of ``gpukernels.methods("matmul")``, or ``"auto"`` (the fastest).
    out : cupy.ndarray, optional
        Destination of the result's shape on the same device; its dtype must be one the result
        casts to under NumPy's ``same_kind`` rule.

    Returns
    -------
    cupy.ndarray
        ``a @ b``, C-contiguous (``out`` if given).

    Raises
    ------
    TypeError
        An operand is not a GPU array, or the result dtype has no kernel.
    ValueError
        Shapes do not match NumPy's rules, operands are on different devices, ``out`` has the
        wrong shape, or ``method`` is unknown.

    Examples
    --------
    >>> import cupy, gpukernels as gk
    >>> a = cupy.ones((2, 3), dtype=cupy.float32)
    >>> gk.matmul(a, cupy.arange(3, dtype=cupy.float32))
    array([3., 3.], dtype=float32)
    """
    # 1. Validate.
    a = _device.as_device_array(a, "a")
    b = _device.as_device_array(b, "b")
    _device.check_same_device(("a", a), ("b", b))
    dtype = _result_dtype(a.dtype, b.dtype)
    batch_shape, M, K, N, out_shape = matmul_shapes(a.shape, b.shape)
    method = resolve_method("matmul", method, auto="tiled")
    direct = out is not None and prepare_out(out, out_shape, dtype, a.device.id, (a, b))

    with a.device:
        # 2. Allocate: the kernels write a C-contiguous (batch, M, N) stack.
        cupy = _device.cupy
        result = out if direct else cupy.empty(out_shape, dtype=dtype)
        if result.size == 0:
            return finish_out(result, out, direct)
        a_stack = _stack(a, batch_shape, M, K, dtype)
        b_stack = _stack(b, batch_shape, K, N, dtype)
        batch = a_stack.shape[0]
        # Threads of an edge tile form offsets up to a tile beyond each extent (never used).
        index = index_type(result.size, K, *(
            span(s) + TILE * builtins.sum(abs(st) // s.itemsize for st in s.strides)
            for s in (a_stack, b_stack)))
        to_index = INDEX_SCALARS[index]
        strides = [to_index(s // a_stack.itemsize) for s in a_stack.strides + b_stack.strides]

        # 3. Launch: one thread per element of C (row tiles in y, matrices in z). Problems past
        # gridDim.y's or gridDim.z's 65535 go in several launches, over row ranges of one matrix
        # at a time when M needs it (C's batch stride is M * N inside the kernel).
        kernel = KERNELS.function(_kernel_name(method, dtype, index))
        block = (TILE, TILE, 1) if method == "tiled" else (*NAIVE_BLOCK, 1)
        rows_per_launch = MAX_GRID_YZ * block[1]
        flat_c = result.reshape(batch, M, N)
        if M <= rows_per_launch:
            chunks = [(a_stack[i:i + MAX_GRID_YZ], b_stack[i:i + MAX_GRID_YZ],
                       flat_c[i:i + MAX_GRID_YZ], M) for i in range(0, batch, MAX_GRID_YZ)]
        else:
            chunks = [(a_stack[i:i + 1, r:r + rows_per_launch], b_stack[i:i + 1],
                       flat_c[i:i + 1, r:r + rows_per_launch], builtins.min(rows_per_launch, M - r))
                      for i in range(batch) for r in range(0, M, rows_per_launch)]
        for a_part, b_part, c_part, rows in chunks:
            grid = (ceil_div(N, block[0]), ceil_div(rows, block[1]), a_part.shape[0])
            launch(kernel, grid, block, (a_part, b_part, c_part, to_index(rows), to_index(N),
                                         to_index(K), to_index(a_part.shape[0]), *strides))
    return finish_out(result, out, direct)
