"""Matrix transpose: ``(..., M, N) -> (..., N, M)`` as a new C-contiguous array.

The ladder and its launch geometry are in :mod:`.rungs`, the NumPy reference and the benchmark
spec in :mod:`.check`; this module holds the public wrapper and registers the operation.
"""

from __future__ import annotations

from typing import Any

import numpy

from ..._core import device as _device
from ..._core import floats
from ..._core import ladder as _ladder
from ..._core.launch import (
    INDEX_SCALARS,
    MAX_GRID_YZ,
    PLANS,
    Array,
    finish_out,
    index_type,
    prepare_out,
    span,
)
from . import check, rungs
from .rungs import LADDER, Problem

__all__ = ["transpose", "OPERATION"]

# Addresses enter plan keys modulo this: every alignment a plan tests divides it.
_ADDRESS_KEY = 256


def _check_dtype(dtype: numpy.dtype) -> None:
    if not floats.movable(dtype) or dtype.itemsize not in rungs.CARRIERS:
        raise TypeError(f"transpose supports bool, integer, float, complex and bfloat16 dtypes, "
                        f"not {dtype}")


def _result_dtype(x: Any, **_: Any) -> numpy.dtype:
    """The result's dtype (the input's); TypeError for dtypes the kernels do not move."""
    _check_dtype(x.dtype)
    return x.dtype


class _Plan:
    """The launches of one transpose layout: kernel calls with their argument offsets, and
    whether the input must first be copied (batch axes no single stride walks)."""

    __slots__ = ("out_shape", "copy_input", "calls", "single")

    def __init__(self, out_shape: tuple, copy_input: bool, calls: list) -> None:
        self.out_shape = out_shape
        self.copy_input = copy_input
        self.calls = tuple(calls)  # (KernelCall, input offset, output offset), offsets in bytes
        # One launch from the input's data to the result's (most layouts): called directly.
        self.single = calls[0][0] if len(calls) == 1 and not copy_input \
            and not calls[0][1] and not calls[0][2] else None

    def __call__(self, x: Any, result: Any) -> None:
        if self.copy_input:
            x = _device.cupy.ascontiguousarray(x)
        for call, in_offset, out_offset in self.calls:
            if in_offset or out_offset:
                call(_at(x, in_offset), _at(result, out_offset))
            else:
                call(x, result)


def _at(array: Any, offset: int) -> Any:
    """A one-element array at ``offset`` bytes into ``array``'s data: a pointer for a kernel."""
    return _device.cupy.ndarray((1,), array.dtype, memptr=array.data + offset)


def _plan(x: Any, rung: rungs.Rung | None, out_address: int,
          out_strides: tuple[int, int] | None = None) -> _Plan:
    """Work out the launches that transpose ``x`` (validated) into a C-contiguous result whose
    address is ``out_address`` modulo 256, or, given ``out_strides`` (batch, row; in elements,
    for a 3-D ``x``), into the planes of a larger result that hold its matrices."""
    *batch_shape, rows, cols = x.shape
    out_shape = (*batch_shape, cols, rows)
    itemsize = x.itemsize
    if x.size == 0:
        return _Plan(out_shape, False, [])
    if out_strides is None:
        out_strides = (rows * cols, rows)
    # A (batch, rows, cols) view with element strides; a copy only when the batch axes cannot be
    # merged into one stride (reshape copies) or a stride is not a whole number of elements.
    # Every call then copies too, into a fresh array: CuPy's allocations are 256-byte aligned.
    stacked = x.reshape(-1, rows, cols)
    copy_input = stacked.data.mem is not x.data.mem or any(s % itemsize for s in stacked.strides)
    if copy_input:
        stacked = _device.cupy.ascontiguousarray(x).reshape(-1, rows, cols)
    strides = tuple(s // itemsize for s in stacked.strides)
    batch = stacked.shape[0]
    out_span = (batch - 1) * out_strides[0] + (cols - 1) * out_strides[1] + rows
    index = index_type(batch * rows * cols, span(stacked), out_span)
    to_index = INDEX_SCALARS[index]
    capability = _device.compute_capability()
    calls = []
    for first in range(0, batch, MAX_GRID_YZ):  # gridDim.z: at most 65535 matrices a launch
        count = min(MAX_GRID_YZ, batch - first)
        in_offset = first * strides[0] * itemsize
        out_offset = first * out_strides[0] * itemsize
        in_address = 0 if copy_input else x.data.ptr
        problem = Problem(itemsize, count, rows, cols, strides, out_strides,
                          (in_address + in_offset) % _ADDRESS_KEY,
                          (out_address + out_offset) % _ADDRESS_KEY, capability, index)
        chosen = rung if rung is not None else rungs.choose(problem)
        launch = chosen.plan(problem)
        args = (Array(0), Array(1), to_index(rows), to_index(cols), *map(to_index, strides),
                *map(to_index, out_strides))
        calls.append((launch.call(args, chosen.name), in_offset, out_offset))
    return _Plan(out_shape, copy_input, calls)


def transpose(x: Any, axes: Any = None, *, method: str = "auto", out: Any = None) -> Any:
    """Swap the last two axes of ``x`` into a new C-contiguous array, or permute its axes.

    Without ``axes`` this differs from :func:`numpy.transpose`, which reverses every axis: here
    an ``(..., M, N)`` stack of matrices becomes ``(..., N, M)`` (the two agree for 2-D arrays).
    With ``axes`` it is NumPy's ``transpose(x, axes)``, computed by
    :func:`gpukernels.permute_dims`.

    Parameters
    ----------
    x : cupy.ndarray or GPU array
        An array of at least 2 dimensions, shape ``(..., M, N)``, of any bool, integer, float or
        complex dtype (any number of dimensions with ``axes``). Any strides (views, negative
        steps) are accepted; objects exposing ``__cuda_array_interface__`` or DLPack are used
        without a copy.
    axes : sequence of ints, optional
        A permutation of the axes, as in NumPy; ``method`` then names a rung of
        ``gpukernels.methods("permute_dims")``.
    method : str, optional
        A rung of ``gpukernels.methods("transpose")``, or ``"auto"`` (the fastest for the input:
        ``vector``, or ``words_async``/``words`` for 1- and 2-byte rows that are not whole
        4-byte words).
    out : cupy.ndarray, optional
        Destination of shape ``(..., N, M)`` and the same dtype, on the same device.

    Returns
    -------
    cupy.ndarray
        ``numpy.swapaxes(x, -1, -2)`` as a C-contiguous array (``out`` if given).

    Raises
    ------
    TypeError
        ``x`` is not a GPU array (NumPy arrays must be moved with ``cupy.asarray`` first), or
        its dtype is unsupported (or not one the chosen rung moves), or ``out`` has another
        dtype.
    ValueError
        ``x`` has fewer than 2 dimensions, ``out`` has the wrong shape or device, ``method`` is
        unknown, or the chosen rung cannot take this input's layout or this GPU.

    Examples
    --------
    >>> import cupy, gpukernels as gk
    >>> x = cupy.arange(6, dtype=cupy.float32).reshape(2, 3)
    >>> gk.transpose(x)
    array([[0., 3.],
           [1., 4.],
           [2., 5.]], dtype=float32)
    >>> gk.transpose(cupy.zeros((2, 3, 4)), axes=(2, 0, 1)).shape
    (4, 2, 3)
    """
    if axes is not None:  # NumPy's transpose(x, axes): the permutation ladder
        from ..permute import LADDER as PERMUTE
        from ..permute import permute_dims

        if isinstance(method, str) and method != "auto" and method not in PERMUTE.names:
            raise ValueError(f"with axes=, method is a rung of gpukernels.methods("
                             f"'permute_dims') ({', '.join(PERMUTE.names)}) or 'auto', not "
                             f"{method!r}")
        return permute_dims(x, axes, method=method, out=out)
    # 1. Validate, and plan once per layout: the checks run whenever a layout is planned, and a
    # planned layout has passed them (everything the plan depends on is in its key).
    cupy = _device.cupy
    if cupy is None or type(x) is not cupy.ndarray:
        x = _device.as_device_array(x, "x")
    if type(method) is not str:
        LADDER.resolve(method, "transpose")  # raises TypeError
    direct = out is not None
    out_address = out.data.ptr % _ADDRESS_KEY if direct and isinstance(out, cupy.ndarray) else 0
    key = ("transpose", x.shape, x.strides, x.dtype, method, x.data.ptr % _ADDRESS_KEY,
           out_address, x.data.device_id)
    plan = PLANS.get(key)
    if plan is None:
        _device.check_alignment(x, "x")
        if x.ndim < 2:
            raise ValueError(f"transpose needs an array of at least 2 dimensions (..., M, N); "
                             f"got shape {x.shape}")
        _check_dtype(x.dtype)
        rung = LADDER.resolve(method, "transpose")
        if direct:  # validate out before planning for it
            prepare_out(out, (*x.shape[:-2], x.shape[-1], x.shape[-2]), x.dtype, x.device.id,
                        (x,), casting="no")
        with x.device:
            plan = PLANS.put(key, _plan(x, rung, out_address))
    device = x.data.device_id
    if plan.single is not None and not direct and device == cupy.cuda.runtime.getDevice():
        # 2. Allocate and 3. launch: one kernel into a new array of the input's bytes, nothing
        # else to do (the array is built around its memory after the launch).
        return plan.single.into_new(plan.out_shape, x.dtype, x.nbytes, x)
    if direct:
        direct = prepare_out(out, plan.out_shape, x.dtype, device, (x,), casting="no")
    if device != cupy.cuda.runtime.getDevice():
        with cupy.cuda.Device(device):
            return _run(plan, x, out, direct)
    return _run(plan, x, out, direct)


def _run(plan: _Plan, x: Any, out: Any, direct: bool) -> Any:
    # 2. Allocate.
    result = out if direct else _device.cupy.ndarray(plan.out_shape, x.dtype)
    # 3. Launch.
    plan(x, result)
    return finish_out(result, out, direct)


OPERATION = _ladder.register(_ladder.Operation(
    name="transpose", function=transpose, ladder=LADDER, inputs=check.inputs,
    reference=check.reference, result_dtype=_result_dtype, check_shape=(3, 1023, 1025),
    check_shapes={"narrow": (3, 13, 1025), "runs": (3, 255, 1025)},
    check_dtypes=("float32",), bench=check.BENCH, kind="swap_last_axes"))
