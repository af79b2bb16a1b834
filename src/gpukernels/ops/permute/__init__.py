"""Permutations of axes with NumPy's ``transpose(x, axes)`` semantics: :func:`permute_dims`.

The ladder and its launch geometry are in :mod:`.rungs`, the reference and the benchmark spec in
:mod:`.check`. Each input layout and permutation is planned once: the axes are merged (size-1
axes dropped, neighbours that the input walks in the same order with no gap joined), and
``method="auto"`` then sends stacks of matrix transposes to the transpose ladder, permutations
that keep the contiguous axis last to ``rows``, and the rest to ``vector`` where its 16-byte
words fit the layout, else to ``tiled``.
"""

from __future__ import annotations

from typing import Any

import numpy

from ..._core import device as _device
from ..._core import floats
from ..._core import ladder as _ladder
from ..._core.axes import axis_index
from ..._core.launch import PLANS, Array, finish_out, index_type, prepare_out, span
from .. import transpose as _transpose
from . import check, rungs
from .rungs import CARRIERS, LADDER, MAX_RANK, Problem

__all__ = ["permute_dims", "normalize_axes", "merge_axes", "LADDER", "OPERATION"]

_INT = frozenset((int,))  # a cacheable axes tuple holds Python ints alone (not bools: True == 1)
_ADDRESS_KEY = 256  # addresses enter plan keys modulo this: every alignment a plan tests divides it


def _check_dtype(dtype: numpy.dtype) -> numpy.dtype:
    """``dtype`` (the result's); TypeError for dtypes the kernels do not move."""
    if not floats.movable(dtype) or dtype.itemsize not in CARRIERS:
        raise TypeError(f"permute_dims supports bool, integer, float, complex and bfloat16 "
                        f"dtypes, not {dtype}")
    return dtype


def normalize_axes(axes: Any, ndim: int) -> tuple[int, ...]:
    """``axes`` as a permutation of ``range(ndim)``, with NumPy's errors (None: reversed).

    Examples
    --------
    >>> from gpukernels.ops.permute import normalize_axes
    >>> normalize_axes((-1, 0, 1), 3), normalize_axes(None, 3)
    ((2, 0, 1), (2, 1, 0))
    """
    if axes is None:
        return tuple(reversed(range(ndim)))
    if isinstance(axes, (str, bytes)):
        raise TypeError(f"axes must be a sequence of integers, not {axes!r}")
    if not hasattr(axes, "__len__"):
        axes = (axes,)  # one integer: NumPy takes it as a sequence of one
    normalized = [axis_index(axis, ndim, f"axes must be integers, not {axis!r}")
                  for axis in axes]
    if len(normalized) != ndim:
        raise ValueError(f"axes don't match array: {len(normalized)} axes for an array of "
                         f"{ndim} dimensions")
    if len(set(normalized)) != ndim:
        raise ValueError(f"repeated axis in transpose: {tuple(axes)}")
    return tuple(normalized)


def merge_axes(lengths: tuple[int, ...], in_strides: tuple[int, ...]
               ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The output's axes (in its order, with the input's strides along them) with size-1 axes
    dropped and each pair of neighbours joined where the input walks them in the same order with
    no gap (stride of the first = stride of the second times its length).

    Examples
    --------
    >>> from gpukernels.ops.permute import merge_axes
    >>> merge_axes((512, 256, 512), (1, 262144, 512))  # (256, 512, 512) with axes (2, 0, 1)
    ((512, 131072), (1, 512))
    """
    merged: list[list[int]] = []
    for length, stride in zip(lengths, in_strides):
        if length == 1:
            continue
        if merged and merged[-1][1] == stride * length:
            merged[-1] = [merged[-1][0] * length, stride]
        else:
            merged.append([length, stride])
    return tuple(m[0] for m in merged), tuple(m[1] for m in merged)


class _Plan:
    """The launch of one permutation of one layout: a kernel call, a batched matrix transpose
    (the transpose ladder's launches on a strided view), or nothing (an empty result)."""

    __slots__ = ("out_shape", "call", "view", "copy_input", "single")

    def __init__(self, out_shape: tuple, call: Any = None, view: Any = None,
                 copy_input: bool = False) -> None:
        self.out_shape = out_shape
        self.call = call  # a KernelCall (in, out)
        # (shape, strides in bytes, the transpose ladder's plan) of a batched matrix transpose
        # that takes several launches (more than 65535 matrices)
        self.view = view
        self.copy_input = copy_input  # strides that are not whole elements: a contiguous copy
        # One launch from the input's data into a non-empty result (most permutations)
        self.single = call if call is not None and not copy_input \
            and all(out_shape) else None

    def __call__(self, x: Any, result: Any) -> None:
        if self.copy_input:
            x = _device.cupy.ascontiguousarray(x)
        if self.call is not None:  # a permutation kernel, or the transpose ladder's planned
            self.call(x, result)   # launch (they read x's and the result's data pointers)
        elif self.view is not None:
            shape, strides, launches = self.view
            launches(_device.cupy.ndarray(shape, x.dtype, memptr=x.data, strides=strides), result)


def _as_matrices(lengths: tuple[int, ...],
                 in_strides: tuple[int, ...]) -> tuple[tuple, tuple, tuple] | None:
    """A merged permutation as a stack of matrix transposes that read rows of contiguous
    elements, if it is one: the stack's (batch, rows, cols) shape and input strides, and the
    output's (batch, row) strides, all in elements; else None.

    The output's last axis is the matrices' rows (their input rows run along it) and the axis the
    input is contiguous along, the output's second-to-last or (of three) its first, is their
    columns; the third axis, if any, is the stack. The second case, such as axes (2, 1, 0), writes
    each matrix to a plane of the output with the stack's axis between its two."""
    if len(lengths) == 2 and in_strides[0] == 1:
        return (1, lengths[1], lengths[0]), (0, in_strides[1], 1), (lengths[0] * lengths[1],
                                                                     lengths[1])
    if len(lengths) != 3:
        return None
    first, middle, last = lengths
    if in_strides[1] == 1:
        return (first, last, middle), (in_strides[0], in_strides[2], 1), (middle * last, last)
    if in_strides[0] == 1:
        return (middle, last, first), (in_strides[1], in_strides[2], 1), (last, middle * last)
    return None


def _plan(x: Any, axes: tuple[int, ...], rung: rungs.Rung | None, out_address: int) -> _Plan:
    """Work out the launch that permutes ``x`` (validated) by ``axes`` into a C-contiguous
    result whose address is ``out_address`` modulo 256."""
    out_shape = tuple(x.shape[axis] for axis in axes)
    if x.size == 0:
        return _Plan(out_shape)
    itemsize = x.itemsize
    copy_input = any(stride % itemsize for stride in x.strides)
    if copy_input:
        x = _device.cupy.ascontiguousarray(x)
    strides = tuple(x.strides[axis] // itemsize for axis in axes)
    lengths, in_strides = merge_axes(out_shape, strides)
    stack = _as_matrices(lengths, in_strides) if rung is None else None
    if stack is not None:
        # A stack of matrix transposes reading rows of contiguous elements: the transpose
        # ladder's rungs, on a (batch, rows, cols) view of the input.
        shape, matrix_strides, out_strides = stack
        strides_in_bytes = tuple(stride * itemsize for stride in matrix_strides)
        matrices = _device.cupy.ndarray(shape, x.dtype, memptr=x.data, strides=strides_in_bytes)
        planned = _transpose._plan(matrices, None, out_address, out_strides)
        if planned.single is not None:  # one launch from the input's data to the result's
            return _Plan(out_shape, call=planned.single, copy_input=copy_input)
        return _Plan(out_shape, view=(shape, strides_in_bytes, planned), copy_input=copy_input)
    if not lengths:  # one element: a row of one
        lengths, in_strides = (1,), (1,)
    while len(lengths) < 2:  # the rungs take two axes or more
        lengths, in_strides = (1,) + lengths, (0,) + in_strides
    if len(lengths) > MAX_RANK:
        raise ValueError(f"permute_dims takes permutations of up to {MAX_RANK} axes after "
                         f"merging; this one has {len(lengths)}")
    in_address = 0 if copy_input else x.data.ptr % _ADDRESS_KEY
    index = index_type(x.size, span(x))
    problem = Problem(itemsize, lengths, in_strides, in_address, out_address, index)
    chosen = rung if rung is not None else rungs.choose(problem)
    planned = chosen.plan(problem)
    call = planned.launch.call((Array(0), Array(1), planned.dims), chosen.name)
    return _Plan(out_shape, call=call, copy_input=copy_input)


def permute_dims(x: Any, axes: Any = None, *, method: str = "auto", out: Any = None) -> Any:
    """Permute the axes of ``x`` into a new C-contiguous array: NumPy's ``transpose(x, axes)``.

    Parameters
    ----------
    x : cupy.ndarray or GPU array
        Any shape and strides, any bool, integer, float or complex dtype.
    axes : sequence of ints, optional
        A permutation of ``range(x.ndim)`` (negative axes count from the end): axis ``i`` of the
        result is axis ``axes[i]`` of ``x``. ``None`` reverses the axes, as in NumPy.
    method : str, optional
        A rung of ``gpukernels.methods("permute_dims")``, or ``"auto"``: the transpose ladder
        for permutations that merge into a stack of matrix transposes reading contiguous rows
        (such as ``(1, 0)``, ``(0, 2, 1)``, ``(2, 0, 1)`` and ``(2, 1, 0)``), ``rows`` where the
        contiguous axis stays last, ``vector`` where the lengths and strides allow 16-byte words
        of 1-, 2- and 4-byte items (such as ``(3, 2, 1, 0)`` of float32 lengths that are
        multiples of 4), ``tiled`` otherwise.
    out : cupy.ndarray, optional
        C-contiguous destination of the result's shape and ``x``'s dtype, on the same device.

    Returns
    -------
    cupy.ndarray
        ``numpy.ascontiguousarray(numpy.transpose(x, axes))`` (``out`` if given).

    Raises
    ------
    TypeError
        ``x`` is not a GPU array, its dtype is unsupported, or ``axes`` is not a sequence of
        integers.
    numpy.exceptions.AxisError
        An axis is out of range.
    ValueError
        ``axes`` repeats an axis or does not have ``x.ndim`` entries, more than 8 axes are left
        after merging, ``out`` has the wrong shape or device, or ``method`` is unknown or does
        not take this permutation.

    Examples
    --------
    >>> import cupy, gpukernels as gk
    >>> x = cupy.arange(24, dtype=cupy.int32).reshape(2, 3, 4)
    >>> gk.permute_dims(x, (2, 0, 1)).shape
    (4, 2, 3)
    >>> bool((gk.permute_dims(x, (1, 0, 2)) == x.transpose(1, 0, 2)).all())
    True
    """
    # 1. Validate, and plan once per layout and permutation (a planned one passed every check).
    cupy = _device.cupy
    if cupy is None or type(x) is not cupy.ndarray:
        x = _device.as_device_array(x, "x")
    if type(method) is not str:
        LADDER.resolve(method, "permute_dims")  # raises TypeError
    direct = out is not None
    out_address = out.data.ptr % _ADDRESS_KEY if direct and isinstance(out, cupy.ndarray) else 0
    cacheable = axes is None or (type(axes) is tuple and set(map(type, axes)) <= _INT)
    key = ("permute_dims", x.shape, x.strides, x.dtype, axes, method, x.data.ptr % _ADDRESS_KEY,
           out_address, x.data.device_id) if cacheable else None  # other axes: checked each call
    plan = PLANS.get(key) if key is not None else None
    if plan is None:
        _device.check_alignment(x, "x")
        _check_dtype(x.dtype)
        normalized = normalize_axes(axes, x.ndim)
        rung = LADDER.resolve(method, "permute_dims")
        out_shape = tuple(x.shape[axis] for axis in normalized)
        if direct:  # validate out before planning for it
            prepare_out(out, out_shape, x.dtype, x.device.id, (x,), casting="no")
        with x.device:
            plan = _plan(x, normalized, rung, out_address)
        if key is not None:
            PLANS.put(key, plan)
    device = x.data.device_id
    if direct:
        direct = prepare_out(out, plan.out_shape, x.dtype, device, (x,), casting="no")
    if device != cupy.cuda.runtime.getDevice():
        with cupy.cuda.Device(device):
            return _run(plan, x, out, direct)
    return _run(plan, x, out, direct)


def _run(plan: _Plan, x: Any, out: Any, direct: bool) -> Any:
    if plan.single is not None and out is None:
        # 2. Allocate and 3. launch: one kernel into a new array of the input's bytes (the
        # array is built around its memory after the launch).
        return plan.single.into_new(plan.out_shape, x.dtype, x.nbytes, x)
    # 2. Allocate (cupy.ndarray is cupy.empty without its Python frame, 0.7 us a call).
    result = out if direct else _device.cupy.ndarray(plan.out_shape, x.dtype)
    # 3. Launch.
    if result.size:
        plan(x, result)
    return finish_out(result, out, direct)


OPERATION = _ladder.register(_ladder.Operation(
    name="permute_dims", function=permute_dims, ladder=LADDER, inputs=check.inputs,
    reference=check.reference, result_dtype=lambda x, **_: _check_dtype(x.dtype),
    check_shape=(5, 33, 7, 65), check_dtypes=("float32", "int8"), bench=check.BENCH,
    kind="permutation"))
