"""Means and spreads with NumPy semantics: :func:`mean`, :func:`var` and :func:`std`.

:func:`mean` of real data is one launch of the reduction kernels with a mean operator
(``MeanOp``: the float64 sum and the count, divided at the last write); a complex mean, or a
``dtype=`` other than the default, is a sum divided as NumPy divides it. :func:`var` and
:func:`std` read the data once: the reduction kernels, every rung of
``gpukernels.methods("reduce")`` and the row and column kernels alike, fold the moments of the
elements (count, mean, sum of squared deviations) with Chan, Golub and LeVeque's pairwise merge
in float64 (``MomentsOp`` in ``kernels/reduce/common.cuh``). For float data in its own dtype
with ``ddof`` 0 or 1 the reduction's last write divides by ``n - ddof`` (and takes the square
root for std): one launch, like a sum (``gk_spread``; the row and column kernels, and one_pass
for full reductions). Otherwise one elementwise kernel (``kernels/moments/moments.cu``) does it
after the moments. Complex data is read as its real and imaginary parts, whose variances add.
"""

from __future__ import annotations

import builtins
import contextlib
import math
import numbers
import warnings
from typing import Any, cast

import numpy

from ..._core import device as _device
from ..._core import ladder as _ladder
from ..._core.compile import KernelSource
from ..._core.launch import PLANS, Array, KernelCall, Launch, ceil_div, finish_out, prepare_out
from .. import reduce as _reduce
from ..reduce.dtypes import (
    SPREAD_DDOFS,
    SPREAD_RESULTS,
    mean_result_dtype,
    normalize_axis,
    real_part,
    reduction_result_dtype,
    spread,
)
from ..reduce.rungs import ReduceRung
from . import check

__all__ = ["mean", "var", "std", "moment_states"]

F64 = numpy.dtype(numpy.float64)


def _input(x: Any) -> Any:
    cupy = _device.cupy
    if cupy is None or type(x) is not cupy.ndarray:
        x = _device.as_device_array(x, "x")
    return x


def _shape_and_count(x: Any, axis: Any, keepdims: bool) -> tuple[tuple, int]:
    """(result shape, elements per result) of a reduction over ``axis``, with NumPy's errors."""
    axes = normalize_axis(axis, x.ndim)
    count = math.prod(x.shape[ax] for ax in axes)
    if keepdims:
        return tuple(1 if ax in axes else n for ax, n in enumerate(x.shape)), count
    return tuple(n for ax, n in enumerate(x.shape) if ax not in axes), count


def _layout_key(name: str, x: Any, axis: Any, dtype: Any, keepdims: bool, method: str,
                *extra: Any) -> tuple | None:
    """The plan cache's key of a call: everything its plan depends on, or None when the axis
    is of a type that must be validated on every call (not exactly None, an int or a tuple of
    ints). The key may still be unhashable (see :func:`_cached`)."""
    if not (axis is None or type(axis) is int or
            (type(axis) is tuple and all(type(ax) is int for ax in axis))):
        return None
    # (tagged: the reductions' own plans share the cache, with keys of the same shape)
    return ("moments", name, x.shape, x.strides, x.dtype, axis, dtype, keepdims, method, *extra,
            x.data.ptr % 16, x.data.device_id)


def _cached(key: tuple | None, make: Any) -> Any:
    """The plan under ``key``, made (and validated) by ``make()`` on the first call; made on
    every call when ``key`` is None or unhashable (an unhashable ``dtype``, say)."""
    try:
        plan = None if key is None else PLANS.get(key)
    except TypeError:
        key, plan = None, None
    if plan is None:
        plan = make()
        if key is not None:
            PLANS.put(key, plan)
    return plan


class _MeanPlan:
    """What a mean of one layout needs on every call."""

    __slots__ = ("out_shape", "result_dtype", "count", "kernels")

    def __init__(self, x: Any, axis: Any, dtype: Any, keepdims: bool) -> None:
        self.result_dtype = mean_result_dtype(x.dtype, dtype)
        self.out_shape, self.count = _shape_and_count(x, axis, keepdims)
        # The default result of real input (float64, or the input's float dtype): the
        # reductions' own mean (MeanOp: the sum and the count in float64, divided at the last
        # write), one launch like a sum. Complex data and other dtype= requests: a sum divided
        # as NumPy divides it.
        self.kernels = x.dtype.kind != "c" and self.result_dtype == mean_result_dtype(x.dtype)


def mean(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False, *,
         method: str = "auto", out: Any = None) -> Any:
    # 1. Validate, and plan once per layout (dtypes, axes; out= on every call, before any
    # launch).
    x = _input(x)
    if dtype is None and x.dtype.kind != "c" and x.size:
        # The default result of real, non-empty input: the reductions' own mean (MeanOp), whose
        # plan validates the same arguments and which owes no empty-slice warning; a plan of
        # its own here would cost a second lookup (about 1.5 us a call).
        return _reduce._reduce("mean", x, axis, None, keepdims, method, out)
    plan = _cached(_layout_key("mean", x, axis, dtype, keepdims, method),
                   lambda: _MeanPlan(x, axis, dtype, keepdims))
    if plan.count == 0:
        warnings.warn("Mean of empty slice.", RuntimeWarning, stacklevel=2)
    if plan.kernels:  # 2. allocate and 3. launch as the reductions do
        return _reduce._reduce("mean", x, axis, None, keepdims, method, out)
    if out is not None:
        prepare_out(out, plan.out_shape, plan.result_dtype, x.data.device_id, (x,),
                    casting="unsafe")
    # 2. Allocate and 3. launch: the sum (in float64 for float results, as NumPy sums a float16
    # mean in float32: no overflow), then one division into the result.
    total_dtype = F64 if plan.result_dtype.kind == "f" else plan.result_dtype
    total = _reduce.sum(x, axis=axis, dtype=total_dtype, keepdims=keepdims, method=method)
    with _on_device(x):
        result = _device.cupy.empty(plan.out_shape, plan.result_dtype)
        _device.cupy.true_divide(total, plan.count, out=result, casting="unsafe")
    return finish_out(result, out, direct=False)


def _on_device(x: Any) -> Any:
    """``x``'s device as a context, or nothing to enter when it is already current (entering a
    CuPy device costs microseconds per call)."""
    cupy = _device.cupy
    if x.data.device_id == cupy.cuda.runtime.getDevice():
        return contextlib.nullcontext()
    return x.device


SOURCE = KernelSource("moments/moments.cu")
FINISH_BLOCK = 256  # threads per block of the finishing kernels (their __launch_bounds__)
_OUT_C_TYPES = {numpy.dtype(numpy.float16): "gk_half", numpy.dtype(numpy.float32): "float",
                numpy.dtype(numpy.float64): "double"}
SOURCE.add("finish", [f"moments_finish<{c}, {root}>" for c in _OUT_C_TYPES.values()
                      for root in ("false", "true")], eager=False)


def finish_launch(kernel: str, template: tuple, results: int) -> Launch:
    """The launch of a finishing kernel (``"moments_finish"``) with ``template`` arguments, a
    thread per result."""
    return Launch(SOURCE, f"{kernel}<{', '.join(template)}>",
                  (ceil_div(builtins.max(results, 1), FINISH_BLOCK), 1, 1), (FINISH_BLOCK, 1, 1))


class _Finish:
    """A planned finishing kernel, (input, out, results, *scalars), its kernel fetched (and
    compiled, the first time) on the first launch."""

    __slots__ = ("launch", "args", "call")

    def __init__(self, kernel: str, template: tuple, results: int, *scalars: Any) -> None:
        self.launch = finish_launch(kernel, template, results)
        self.args = (Array(0), Array(1), numpy.int64(results), *scalars)
        self.call: KernelCall | None = None

    def __call__(self, source: Any, out: Any) -> None:
        if self.call is None:
            self.call = self.launch.call(self.args, "moments")
        self.call(source, out)


class _SpreadPlan:
    """What a var or std of one layout needs on every call: ``spread``, what the moments' last
    write finishes them as where that is one launch (else None: the moments, then a finish),
    and ``reduction``, that launch's plan, kept here after the first call so that later calls
    look up one plan, not this one and the reduction's."""

    __slots__ = ("out_shape", "result_dtype", "axes", "divisor", "finish", "spread", "reduction")

    def __init__(self, name: str, x: Any, axis: Any, dtype: Any, keepdims: bool,
                 ddof: Any, method: str) -> None:
        self.result_dtype = reduction_result_dtype("var", x.dtype, dtype)
        if isinstance(ddof, bool) or not isinstance(ddof, numbers.Real):
            raise TypeError(f"ddof must be a real number, not {type(ddof).__name__}")
        self.out_shape, count = _shape_and_count(x, axis, keepdims)
        self.axes = normalize_axis(axis, x.ndim)
        self.divisor = count - float(ddof)  # <= 0: NumPy warns, and divides by 0
        results = math.prod(self.out_shape)
        # One launch: float data in its own dtype, ddof 0 or 1, and a kernel to run (data, and
        # more than one element per result or one result), on the axis kernels or a rung with
        # the instances.
        rung = cast(ReduceRung, _reduce.LADDER.resolve(method, "var") or _reduce.rungs.AUTO)
        self.spread = self.reduction = None
        if (x.dtype == self.result_dtype and x.dtype in SPREAD_RESULTS and ddof in SPREAD_DDOFS
                and x.size and (count > 1 or results == 1)
                and (results > 1 or rung.finishes_spreads)):
            self.spread = spread(self.result_dtype, int(float(ddof)), name == "std")
        self.finish = None
        if results:
            parts = 2 if x.dtype.kind == "c" else 1
            root = "true" if name == "std" else "false"
            self.finish = _Finish("moments_finish", (_OUT_C_TYPES[self.result_dtype], root),
                                  results, numpy.int32(parts),
                                  numpy.float64(builtins.max(self.divisor, 0.0)))


def _spread(name: str, x: Any, axis: Any, dtype: Any, keepdims: bool, ddof: Any, method: str,
            out: Any) -> Any:
    """The body of :func:`var` and :func:`std`."""
    # 1. Validate, and plan once per layout (dtypes, axes, ddof; out= on every call, before any
    # launch).
    x = _input(x)
    plan = _cached(_layout_key(name, x, axis, dtype, keepdims, method, ddof, type(ddof)),
                   lambda: _SpreadPlan(name, x, axis, dtype, keepdims, ddof, method))
    if out is not None:
        prepare_out(out, plan.out_shape, plan.result_dtype, x.data.device_id, (x,),
                    casting="unsafe")
    if plan.divisor <= 0:
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=3)
    if plan.spread is not None:
        # 2. Allocate and 3. launch: one reduction whose last write finishes the moments.
        reduction = plan.reduction
        if reduction is None:
            planned_x, reduction = _reduce._planned("var", x, plan.axes, None, keepdims, method,
                                                    out, spread=plan.spread)
            if planned_x is not x:  # a contiguous copy (strides not whole elements): per call
                return _reduce.run_planned("var", planned_x, reduction, out)
            plan.reduction = reduction
        return _reduce.run_planned("var", x, reduction, out)
    # 2. Allocate and 3. launch: the moments, then one elementwise finish (which reads them in
    # order, whatever their shape).
    states = moment_states(x, plan.axes, keepdims, method, shaped=False)
    with _on_device(x):
        result = _device.cupy.empty(plan.out_shape, plan.result_dtype)
        if plan.finish is not None:
            plan.finish(states, result)
    return finish_out(result, out, direct=False)


def var(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False, *, ddof: Any = 0,
        method: str = "auto", out: Any = None) -> Any:
    return _spread("var", x, axis, dtype, keepdims, ddof, method, out)


def std(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False, *, ddof: Any = 0,
        method: str = "auto", out: Any = None) -> Any:
    return _spread("std", x, axis, dtype, keepdims, ddof, method, out)


def _nothing() -> None:
    """No check before planning the moments: :func:`moment_states` takes no ``out=`` (var and
    std check theirs before they ask for the moments)."""


def moment_states(x: Any, axes: tuple[int, ...], keepdims: bool, method: str,
                  shaped: bool = True) -> Any:
    """The moments of the device array ``x`` over the normalized ``axes``: float64 of shape
    ``(*result shape, parts, 3)``, the last axis (count, mean, sum of squared deviations), and
    ``parts`` 2 for complex data (its real and imaginary parts), else 1. For var, std and
    gpukernels.dask, which merges the moments of blocks. ``shaped=False`` may return the same
    values in another shape (var and std read them in order; a reshape costs microseconds)."""
    cupy = _device.cupy
    parts = 1
    if x.dtype.kind == "c":  # the real and imaginary parts, side by side in a last axis of 2
        part = real_part(x.dtype)
        x = cupy.ndarray(x.shape + (2,), part, memptr=x.data,
                         strides=x.strides + (part.itemsize,))
        parts = 2
    states = _reduce.moments(x, axes, keepdims, method, _nothing, parts, shaped)
    if states is not None:
        return states
    # No kernel needed: an empty input, or one element per result.
    out_shape, count = _shape_and_count(x, axes, keepdims)
    out_shape = out_shape[:-1] if parts == 2 else out_shape
    with x.device:
        states = cupy.zeros(out_shape + (parts, 3))
        if count == 0:
            states[..., 1:] = numpy.nan
            return states
        states[..., 0] = 1.0
        element = x.astype(F64).reshape(out_shape + (parts,))
        states[..., 1] = element
        # m2 of one element: 0, or NaN when it is not finite (x - x, as NumPy's var gives)
        states[..., 2] = cupy.square(element - element)
    return states




_PARAMETERS = """
    Parameters
    ----------
    x : cupy.ndarray or GPU array
        Input of a bool, integer, float or complex dtype, any shape and strides.
    axis : None, int or tuple of ints, optional
        Axes to reduce (negative ones count from the end); ``None`` reduces all of them.
    dtype : dtype, optional
        Result dtype, as in :func:`numpy.{name}`.{extra}
    keepdims : bool, optional
        Keep the reduced axes with length 1.{ddof}
    method : str, optional
        A rung of ``gpukernels.methods("reduce")``, or ``"auto"``, for reductions to one
        element (reductions that keep axes use the row and column kernels). ``"auto"`` is
        ``one_pass`` (for var and std of more than one wave of its blocks, about 2**23
        float32 elements on 132 SMs, it reads in ``shuffle``'s grid-stride wave, in one
        launch).
    out : cupy.ndarray, optional
        Destination of the result's shape on the same device; the result is cast to its dtype.

    Raises
    ------
    TypeError
        ``x`` is not a GPU array, its dtype or ``dtype`` is unsupported, ``axis`` is not an
        integer or a tuple of integers{ddof_error}.
    numpy.exceptions.AxisError
        An axis is out of range.
    ValueError
        Duplicate axes, ``out`` of the wrong shape or device, or an unknown ``method``.
"""
_DDOF = """
    ddof : int or float, optional
        Delta degrees of freedom: the sum of squared deviations is divided by ``n - ddof``.
        ``n - ddof <= 0`` warns (RuntimeWarning) and gives NaN or inf, as NumPy does."""

_MEAN_PARAMETERS = _PARAMETERS.format(
    name="mean", ddof="", ddof_error="",
    extra=" By default float64 for bool and integers; floats and\n"
          "        complex keep theirs. Real inputs are summed in float64.")
_SPREAD_PARAMETERS = _PARAMETERS.replace("{ddof}", _DDOF).replace(
    "{ddof_error}", ", or ``ddof`` is not a real number").replace(
    "{extra}", " By default float64 for bool and integers, the real\n"
               "        dtype of the same precision for complex; floats keep theirs.")
mean.__doc__ = f"""Arithmetic mean, with NumPy's result dtypes.
{_MEAN_PARAMETERS}
    Returns
    -------
    cupy.ndarray
        A 0-d array (or the ``keepdims`` shape). The mean of nothing is NaN (with a
        RuntimeWarning, as NumPy gives). The same input gives bitwise the same result.

    Examples
    --------
    >>> import cupy, gpukernels as gk
    >>> gk.mean(cupy.arange(10, dtype=cupy.int32))
    array(4.5)
"""
var.__doc__ = f"""Variance, read in one pass, with NumPy's result dtypes and ``ddof``.

    The moments are merged pairwise in float64 (Chan, Golub and LeVeque), never as a sum of
    squares, so the result stays accurate when the mean is large against the spread; NaN in
    the input gives NaN.
{_SPREAD_PARAMETERS.format(name="var")}
    Returns
    -------
    cupy.ndarray
        A 0-d array (or the ``keepdims`` shape). The same input gives bitwise the same result.

    Examples
    --------
    >>> import cupy, gpukernels as gk
    >>> gk.var(cupy.asarray([1.0, 2.0, 3.0, 4.0]))
    array(1.25)
    >>> gk.var(cupy.asarray([1.0, 2.0, 3.0, 4.0]), ddof=1)
    array(1.66666667)
"""
std.__doc__ = f"""Standard deviation: the square root of :func:`var`, read in one pass.
{_SPREAD_PARAMETERS.format(name="std")}
    Returns
    -------
    cupy.ndarray
        A 0-d array (or the ``keepdims`` shape). The same input gives bitwise the same result.

    Examples
    --------
    >>> import cupy, gpukernels as gk
    >>> gk.std(cupy.asarray([1.0, 3.0]))
    array(1.)
"""

_ladder.register(_ladder.Operation(
    name="mean", function=mean, ladder=_reduce.LADDER, inputs=check.inputs,
    reference=check.mean_reference, check_shape=(10**6 + 3,),
    result_dtype=lambda x, *, dtype=None, **_: mean_result_dtype(x.dtype, dtype),
    check_dtypes=("int32", "float32"), bench=check.make_bench("mean"), kind="moments"))
for _function in (var, std):
    _ladder.register(_ladder.Operation(
        name=_function.__name__, function=_function, ladder=_reduce.LADDER, inputs=check.inputs,
        reference=check.make_spread_reference(_function.__name__), check_shape=(10**6 + 3,),
        result_dtype=lambda x, *, dtype=None, **_: reduction_result_dtype("var", x.dtype, dtype),
        check_dtypes=("int32", "float32"), bench=check.make_bench(_function.__name__),
        kind="moments"))
