"""Reductions with NumPy semantics: :func:`sum`, :func:`prod`, :func:`min`, :func:`max`.

All four share one ladder of kernels for full reductions (``gpukernels.methods("reduce")``,
:mod:`.rungs`), templated on the operator; so do mean, var, std (:mod:`..moments`), argmin and
argmax (:mod:`..argreduce`), with operators of their own. Reductions that keep some axes (``axis=0`` of a
matrix, say) go to the row and column kernels of :mod:`.axis`, whichever rung is asked for.
Each input layout is planned once into a :class:`~.program.Program` (kept in
:data:`~gpukernels._core.launch.PLANS`) that later calls only replay.
"""

from __future__ import annotations

import builtins
import functools
import math
from collections.abc import Callable
from typing import Any, cast

import numpy

from ..._core import device as _device
from ..._core import ladder as _ladder
from ..._core.launch import PLANS, finish_out, prepare_out, resident_blocks
from . import axis as _axis
from . import check, rungs
from .dtypes import (
    ARG_OPERATORS,
    OPERATORS,
    accumulator,
    normalize_axis,
    reduction_result_dtype,
    to_result,
    writes,
)
from .program import Program
from .rungs import LADDER

__all__ = ["sum", "prod", "min", "max", "moments", "LADDER", "scratch_sizes"]


def _plan(operation: str, x: Any, axis: Any, dtype: Any, keepdims: bool, method: str,
          spread: numpy.dtype | None = None) -> tuple:
    """Validate a reduction of ``x`` and plan it: (result dtype, out shape, program or None,
    result buffer, direct launch or None). A program of None marks the inputs that need no
    kernel (empty inputs, reductions over length-1 axes only); a direct launch ``(call, shape,
    dtype, bytes, launch first)`` is a program of one launch into a new array of the result's
    shape and dtype (built after the launch where ``launch first``: see
    .program.LAUNCH_FIRST_BYTES, decided in Program.finish).
    ``spread``: var's moments finished in their last write as this (:func:`.dtypes.spread`;
    float data, a rung that ``finishes_spreads``)."""
    op = OPERATORS[operation]
    _device.check_alignment(x, "x")
    result_dtype = reduction_result_dtype(operation, x.dtype, dtype)
    axes = normalize_axis(axis, x.ndim)
    rung = cast(rungs.ReduceRung, LADDER.resolve(method, operation) or
                rungs.auto(op, x.size, x.dtype))
    kept = [length for ax, length in enumerate(x.shape) if ax not in axes]
    reduced = [length for ax, length in enumerate(x.shape) if ax in axes]
    full = builtins.all(length == 1 for length in kept)  # one output element: a full reduction
    nothing = builtins.all(length == 1 for length in reduced)  # each output is one input element
    out_shape = tuple(1 if ax in axes else length for ax, length in enumerate(x.shape)) \
        if keepdims else tuple(kept)
    if x.size == 0 and op in ("MinOp", "MaxOp") and builtins.any(n == 0 for n in reduced):
        raise ValueError(f"zero-size array to reduction operation {operation}imum which has no "
                         "identity")
    if x.size == 0 and op in ARG_OPERATORS and builtins.any(n == 0 for n in reduced):
        raise ValueError(f"attempt to get {operation} of an empty sequence")
    if x.size == 0 or (nothing and not full):
        return result_dtype, out_shape, None, None, None
    strides = tuple(st // x.itemsize for st in x.strides)
    multiprocessors = _device.multiprocessor_count()
    program = Program(x.dtype, scratch_sizes(multiprocessors))
    if full:
        read, acc = accumulator(op, x.dtype, result_dtype, rung.float32_sums_in_float64)
        written = writes(op, read, acc, result_dtype, full=True) if spread is None else spread
        dims = _axis.merge_axes([(length, stride, ()) for length, stride in zip(x.shape, strides)
                                 if length != 1])
        source = 0
        if x.dtype != read or len(dims) > 1:
            source, stride = program.copy(0, read), 1  # reshape(-1) would copy too
        else:
            stride = dims[0][1] if dims else 1
        result = rung.plan(program, rungs.Problem(op, x.size, stride, read, acc, written,
                                                  out_shape, multiprocessors, source,
                                                  functools.partial(resident_blocks,
                                                                    rungs.SOURCE)))
    else:
        # The axis kernels read any strides, in the dtype the rungs above the seed's read
        # (float32 sums accumulate in float64), and write the result dtype when it is one
        # rounding away.
        read, acc = accumulator(op, x.dtype, result_dtype, True)
        source = 0
        if read != x.dtype:
            source, strides = program.copy(0, read), _axis.c_strides(x.shape)
        written = writes(op, read, acc, result_dtype, full=False) if spread is None else spread
        result = _axis.plan_partial(program, source, x.shape, strides, read, axes, op, acc,
                                    written, multiprocessors,
                                    functools.partial(resident_blocks, _axis.SOURCE))
    program.finish(x.nbytes)
    # A one-launch program whose buffer is the result as it is: calls only allocate and launch.
    direct = None
    if program.simple is not None and result == 1:
        call, _, written_dtype = program.simple
        # (a spread as its float; dtype(None) is float64, so spread is tested first)
        if written_dtype == result_dtype or (spread is not None and written_dtype == spread):
            direct = (call, out_shape, result_dtype, math.prod(out_shape) * result_dtype.itemsize,
                      program.launch_first)
    return result_dtype, out_shape, program, result, direct


def _result(operation: str, x: Any, axis: Any, dtype: Any, keepdims: bool) -> tuple:
    """(result dtype, result shape) of a reduction, with NumPy's errors."""
    result_dtype = reduction_result_dtype(operation, x.dtype, dtype)
    axes = normalize_axis(axis, x.ndim)
    if keepdims:
        return result_dtype, tuple(1 if ax in axes else n for ax, n in enumerate(x.shape))
    return result_dtype, tuple(n for ax, n in enumerate(x.shape) if ax not in axes)


def _axis_key(axis: Any) -> Any:
    """``axis`` as part of a plan's cache key: None, an int or a tuple of ints, exactly. Anything
    else raises TypeError, so it is validated by planning on every call (``axis=1.0`` equals
    ``axis=1`` as a key, but NumPy refuses it; so does ``axis=True``, equal to 1)."""
    if axis is None or type(axis) is int or \
            (type(axis) is tuple and builtins.all(type(ax) is int for ax in axis)):
        return axis
    raise TypeError("not a cacheable axis")


def scratch_sizes(multiprocessors: int) -> tuple[int, int]:
    """(partials, tickets) of the stream scratch every reduction program of a device shares:
    room for one_pass's per-block partials and a split column reduction's, and a ticket per
    SM (a split column reduction has fewer column tiles than SMs)."""
    return (builtins.max(rungs.one_pass_max_blocks(multiprocessors),
                         _axis.folded_max_partials(multiprocessors)), multiprocessors)


def _planned(operation: str, x: Any, axis: Any, dtype: Any, keepdims: bool, method: str,
             out: Any = None, before_planning: Callable[[], None] | None = None,
             spread: numpy.dtype | None = None) -> tuple[Any, tuple]:
    """``(x, plan)``: the plan of a reduction of the device array ``x`` (see :func:`_plan`),
    made and validated once per layout (a planned layout has passed every check: all the plan
    depends on is in its key). When a plan is made, a bad ``out`` is refused first, then
    ``before_planning`` runs, both before any kernel is fetched. ``x`` comes back as a
    contiguous copy when its strides are not whole elements."""
    data = x.data
    try:
        key = (operation, x.shape, x.strides, x.dtype,
               axis if axis is None or type(axis) is int else _axis_key(axis), dtype, keepdims,
               method, data.ptr % 16, data.device_id, spread)
        planned = PLANS.get(key)
    except TypeError:  # an unhashable axis or dtype (a list), or an axis of another type: plan
        # (and validate) every time
        key, planned = None, None
    if planned is None:
        if out is not None:
            result_dtype, out_shape = _result(operation, x, axis, dtype, keepdims)
            prepare_out(out, out_shape, result_dtype, data.device_id, (x,), casting="unsafe")
        if before_planning is not None:
            before_planning()
        if x.strides and builtins.any(st % x.itemsize for st in x.strides):
            x = _device.cupy.ascontiguousarray(x)  # strides the kernels cannot express
            key = None
        with x.device:
            planned = _plan(operation, x, axis, dtype, keepdims, method, spread)
        if key is not None:
            PLANS.put(key, planned)
    return x, planned


def _reduce(operation: str, x: Any, axis: Any, dtype: Any, keepdims: bool, method: str,
            out: Any, spread: numpy.dtype | None = None) -> Any:
    """The body shared by :func:`sum`, :func:`prod`, :func:`min` and :func:`max`, and by
    gpukernels.mean (its default dtypes), argmin and argmax, whose operators these kernels
    also run, and by var and std in one launch (``spread``, for inputs that need a kernel:
    see :func:`_plan`)."""
    # 1. Validate, and plan once per layout.
    cupy = _device.cupy
    if cupy is None or type(x) is not cupy.ndarray:
        x = _device.as_device_array(x, "x")
    x, planned = _planned(operation, x, axis, dtype, keepdims, method, out, spread=spread)
    return run_planned(operation, x, planned, out)


def run_planned(operation: str, x: Any, planned: tuple, out: Any) -> Any:
    """Steps 2 and 3 of a reduction: allocate and launch as ``planned`` (:func:`_planned`'s
    plan of the device array ``x``), into ``out`` if given. For callers that keep a plan of
    their own (var and std), so that a call looks up one plan, not two."""
    cupy = _device.cupy
    direct = planned[4]
    device = x.data.device_id
    if direct is not None and out is None and device == cupy.cuda.runtime.getDevice():
        # 2. Allocate and 3. launch: most calls, with nothing else to do. From
        # LAUNCH_FIRST_BYTES of input the result's array is built after the launch.
        call, shape, result_dtype, nbytes, launch_first = direct
        if launch_first:
            return call.into_new(shape, result_dtype, nbytes, x)
        result = cupy.ndarray(shape, result_dtype)  # cupy.empty without its Python frame
        call(x, result)
        return result
    if out is not None:
        prepare_out(out, planned[1], planned[0], device, (x,), casting="unsafe")
    if device != cupy.cuda.runtime.getDevice():
        with cupy.cuda.Device(device):
            return _run(operation, planned, x, out)
    return _run(operation, planned, x, out)


def _run(operation: str, planned: tuple, x: Any, out: Any) -> Any:
    cupy = _device.cupy
    result_dtype, out_shape, program, result_index, _ = planned
    if program is None:
        if operation in ("argmin", "argmax"):  # an empty result, or each of one element: index 0
            return finish_out(cupy.zeros(out_shape, dtype=result_dtype), out, direct=False)
        if x.size == 0 and operation == "mean":  # the mean of nothing is NaN (or no result)
            return finish_out(cupy.full(out_shape, numpy.nan, dtype=result_dtype), out,
                              direct=False)
        if x.size == 0:  # the identity of + or *, or an empty result
            fill = cupy.ones if operation == "prod" else cupy.zeros
            return finish_out(fill(out_shape, dtype=result_dtype), out, direct=False)
        # Reductions over length-1 axes only: NumPy's result is the input in the result dtype
        return finish_out(x.astype(result_dtype).reshape(out_shape), out, direct=False)
    # 2. Allocate and 3. launch, as planned.
    result = to_result(program.run(x, result_index), result_dtype)
    if result.shape != out_shape:
        result = result.reshape(out_shape)
    return finish_out(result, out, direct=False)


def moments(x: Any, axis: tuple[int, ...], keepdims: bool, method: str,
            before_planning: Callable[[], None], parts: int = 1, shaped: bool = True) -> Any:
    """The moments (count, mean, m2) of the device array ``x`` over the normalized ``axis``,
    as float64 of shape ``(*result shape, parts, 3)`` (``parts`` 2 when ``x``'s last axis holds
    a complex array's real and imaginary parts, and is not reduced), or with ``shaped=False``
    the same values in the order the kernels wrote them; None when no kernel is needed (an
    empty input, or length-1 axes only: each result is then one element's, with m2 = 0). For
    var and std; ``before_planning`` as in :func:`_planned`."""
    x, planned = _planned("var", x, axis, None, keepdims, method,
                          before_planning=before_planning)
    _, out_shape, program, result_index, _ = planned
    if program is None:
        return None
    cupy = _device.cupy
    device = x.data.device_id
    if device != cupy.cuda.runtime.getDevice():
        with cupy.cuda.Device(device):
            states = program.run(x, result_index)
    else:
        states = program.run(x, result_index)
    if not shaped:
        return states
    # with parts 2, the last kept axis (of length 2) is the real and imaginary parts
    return states.reshape((out_shape[:-1] if parts == 2 else out_shape) + (parts, 3))


def sum(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False, *,
        method: str = "auto", out: Any = None) -> Any:
    return _reduce("sum", x, axis, dtype, keepdims, method, out)


def prod(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False, *,
         method: str = "auto", out: Any = None) -> Any:
    return _reduce("prod", x, axis, dtype, keepdims, method, out)


def min(x: Any, axis: Any = None, keepdims: bool = False, *, method: str = "auto",
        out: Any = None) -> Any:
    return _reduce("min", x, axis, None, keepdims, method, out)


def max(x: Any, axis: Any = None, keepdims: bool = False, *, method: str = "auto",
        out: Any = None) -> Any:
    return _reduce("max", x, axis, None, keepdims, method, out)


_PARAMETERS = """
    Parameters
    ----------
    x : cupy.ndarray or GPU array
        Input of a bool, integer, float{complex} dtype, any shape and strides.
    axis : None, int or tuple of ints, optional
        Axes to reduce (negative ones count from the end); ``None`` reduces all of them.
        Reductions that keep some axes use the row kernels when the reduced axes are the
        faster-varying ones in memory (a warp per row, a thread per row of up to 16
        elements) and the column kernel otherwise (a thread per kept element, accumulating
        down the rows), whatever ``method`` says; axes that do not merge into one stride are
        reduced one group after another.{dtype}
    keepdims : bool, optional
        Keep the reduced axes with length 1.
    method : str, optional
        A rung of ``gpukernels.methods("reduce")``, or ``"auto"`` (``one_pass``), for
        reductions to one element.
    out : cupy.ndarray, optional
        Destination of the result's shape on the same device; the result is cast to its dtype.
"""
_DTYPE = """
    dtype : dtype, optional
        Result dtype, as in :func:`numpy.{name}`. By default bool and signed integers give
        int64, unsigned integers uint64, and floats and complex keep their dtype (float16 is
        accumulated in float32)."""
_RAISES = """
    Raises
    ------
    TypeError
        ``x`` is not a GPU array, or its dtype{dtype_note} is unsupported, or ``axis`` is not
        an integer or a tuple of integers.
    numpy.exceptions.AxisError
        An axis is out of range.
    ValueError
        Duplicate axes, ``out`` of the wrong shape or device, or an unknown ``method``.{empty}
"""

sum.__doc__ = f"""Sum of array elements, with NumPy's result dtypes and wrap-around.
{_PARAMETERS.format(complex=" or complex", dtype=_DTYPE.format(name="sum"))}
    Returns
    -------
    cupy.ndarray
        A 0-d array (or the ``keepdims`` shape). An empty input sums to 0. The same input
        gives bitwise the same result on every call.
{_RAISES.format(dtype_note=" or ``dtype``", empty="")}
    Examples
    --------
    >>> import cupy, gpukernels as gk
    >>> gk.sum(cupy.arange(10, dtype=cupy.int32))
    array(45)
"""
prod.__doc__ = f"""Product of array elements, with NumPy's result dtypes and wrap-around.
{_PARAMETERS.format(complex=" or complex", dtype=_DTYPE.format(name="prod"))}
    Returns
    -------
    cupy.ndarray
        A 0-d array (or the ``keepdims`` shape). An empty input gives 1. Integer products wrap
        around modulo 2**bits as NumPy's do. The same input gives bitwise the same result on
        every call.
{_RAISES.format(dtype_note=" or ``dtype``", empty="")}
    Examples
    --------
    >>> import cupy, gpukernels as gk
    >>> gk.prod(cupy.arange(1, 6, dtype=cupy.int32))
    array(120)
"""
_EMPTY_NOTE = "\n        Also for an empty input: the minimum or maximum of nothing has no value."
_extremum: Any
for _extremum, _word in ((min, "Minimum"), (max, "Maximum")):
    _extremum.__doc__ = f"""{_word} of array elements, NaN-propagating as NumPy's ``{_extremum.__name__}``.
{_PARAMETERS.format(complex="", dtype="")}
    Returns
    -------
    cupy.ndarray
        A 0-d array (or the ``keepdims`` shape) of the input's dtype. If any element is NaN,
        the result is NaN.
{_RAISES.format(dtype_note=" (complex included)", empty=_EMPTY_NOTE)}
    Examples
    --------
    >>> import cupy, gpukernels as gk
    >>> gk.{_extremum.__name__}(cupy.asarray([3, -1, 2]))
    array({-1 if _extremum is min else 3})
"""

for _function in (sum, prod, min, max):
    _ladder.register(_ladder.Operation(
        name=_function.__name__, function=_function, ladder=LADDER, inputs=check.inputs,
        reference=check.make_reference(_function.__name__), check_shape=(10**6 + 3,),
        result_dtype=lambda x, *, dtype=None, _name=_function.__name__, **_:
            reduction_result_dtype(_name, x.dtype, dtype),
        check_dtypes=("int32", "float32"), bench=check.make_bench(_function.__name__),
        kind="reduction"))
