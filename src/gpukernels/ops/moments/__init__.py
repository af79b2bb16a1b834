"""Means and spreads with NumPy semantics: :func:`mean`, :func:`var` and :func:`std`.

:func:`mean` is :func:`gpukernels.sum` (in float64 for real results, the input read as it is)
divided by the count in one elementwise launch. :func:`var` and :func:`std` read the data once:
the reduction kernels, every rung of ``gpukernels.methods("reduce")`` and the row and column
kernels alike, fold the moments of the elements (count, mean, sum of squared deviations) with
Chan, Golub and LeVeque's pairwise merge in float64 (``MomentsOp`` in
``kernels/reduce/common.cuh``), and one elementwise kernel divides by ``n - ddof`` (and takes the
square root for std). Complex data is read as its real and imaginary parts, whose variances add.
"""

from __future__ import annotations

import builtins
import math
import numbers
import warnings
from typing import Any

import numpy

from ..._core import device as _device
from ..._core import ladder as _ladder
from ..._core.compile import KernelSource
from ..._core.launch import PLANS, Array, KernelCall, Launch, ceil_div, finish_out, prepare_out
from .. import reduce as _reduce
from ..reduce.dtypes import (
    mean_result_dtype,
    normalize_axis,
    real_part,
    reduction_result_dtype,
)
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


def mean(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False, *,
         method: str = "auto", out: Any = None) -> Any:
    # 1. Validate: dtypes, axes and out= before any launch.
    x = _input(x)
    result_dtype = mean_result_dtype(x.dtype, dtype)
    out_shape, count = _shape_and_count(x, axis, keepdims)
    if out is not None:
        prepare_out(out, out_shape, result_dtype, x.data.device_id, (x,), casting="unsafe")
    if count == 0:
        warnings.warn("Mean of empty slice.", RuntimeWarning, stacklevel=2)
    # 2. Allocate and 3. launch: the sum (float64 for real results: float32 sums accumulate in
    # float64 anyway, and NumPy sums float16 in float32), then one division into the result.
    total_dtype = F64 if result_dtype.kind == "f" else result_dtype
    total = _reduce.sum(x, axis=axis, dtype=total_dtype, keepdims=keepdims, method=method)
    cupy = _device.cupy
    with x.device:
        if out is not None and out.dtype == result_dtype and out.flags.c_contiguous:
            cupy.true_divide(total, count, out=out, casting="unsafe")
            return out
        result = cupy.empty(out_shape, result_dtype)
        cupy.true_divide(total, count, out=result, casting="unsafe")
    return finish_out(result, out, direct=False)


SOURCE = KernelSource("moments/moments.cu")
FINISH_BLOCK = 256  # threads per block of moments_finish (its __launch_bounds__)
_OUT_C_TYPES = {numpy.dtype(numpy.float16): "gk_half", numpy.dtype(numpy.float32): "float",
                numpy.dtype(numpy.float64): "double"}
SOURCE.add("moments_finish", [f"moments_finish<{c}, {root}>" for c in _OUT_C_TYPES.values()
                              for root in ("false", "true")], eager=False)


def finish_launch(results: int, result_dtype: numpy.dtype, root: bool) -> Launch:
    """The launch of moments_finish for ``results`` results of ``result_dtype`` (std: root)."""
    instance = f"moments_finish<{_OUT_C_TYPES[result_dtype]}, {'true' if root else 'false'}>"
    return Launch(SOURCE, instance, (ceil_div(builtins.max(results, 1), FINISH_BLOCK), 1, 1),
                  (FINISH_BLOCK, 1, 1))


def _finish(results: int, parts: int, divisor: float, result_dtype: numpy.dtype,
            root: bool) -> KernelCall:
    """The planned moments_finish (states, out) for one layout, ddof and dtype."""
    key = ("moments_finish", results, parts, divisor, result_dtype, root)
    call = PLANS.get(key)
    if call is None:
        call = finish_launch(results, result_dtype, root).call(
            (Array(0), Array(1), numpy.int64(results), numpy.int32(parts),
             numpy.float64(divisor)), "moments")
        PLANS.put(key, call)
    return call


def _spread(name: str, x: Any, axis: Any, dtype: Any, keepdims: bool, ddof: Any, method: str,
            out: Any) -> Any:
    """The body of :func:`var` and :func:`std`."""
    # 1. Validate: dtypes, axes, ddof and out= before any launch.
    x = _input(x)
    result_dtype = reduction_result_dtype("var", x.dtype, dtype)
    if isinstance(ddof, bool) or not isinstance(ddof, numbers.Real):
        raise TypeError(f"ddof must be a real number, not {type(ddof).__name__}")
    out_shape, count = _shape_and_count(x, axis, keepdims)
    axes = normalize_axis(axis, x.ndim)
    device = x.data.device_id
    if out is not None:
        prepare_out(out, out_shape, result_dtype, device, (x,), casting="unsafe")
    divisor = count - float(ddof)
    if divisor <= 0:
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=3)
        divisor = max(divisor, 0.0)
    # 2. Allocate and 3. launch: the moments, then one elementwise finish.
    states = moment_states(x, axes, keepdims, method)
    with x.device:
        result = _device.cupy.empty(out_shape, result_dtype)
        if result.size:
            _finish(result.size, states.shape[-2], divisor, result_dtype, name == "std")(
                states, result)
    return finish_out(result, out, direct=False)


def moment_states(x: Any, axes: tuple[int, ...], keepdims: bool, method: str) -> Any:
    """The moments of the device array ``x`` over the normalized ``axes``: float64 of shape
    ``(*result shape, parts, 3)``, the last axis (count, mean, sum of squared deviations), and
    ``parts`` 2 for complex data (its real and imaginary parts), else 1. For var, std and
    gpukernels.dask, which merges the moments of blocks."""
    cupy = _device.cupy
    parts = 1
    if x.dtype.kind == "c":  # the real and imaginary parts, side by side in a last axis of 2
        part = real_part(x.dtype)
        x = cupy.ndarray(x.shape + (2,), part, memptr=x.data,
                         strides=x.strides + (part.itemsize,))
        parts = 2
    states = _reduce.moments(x, axes, keepdims, method, lambda: None)
    if states is not None:
        return states.reshape(states.shape[:-2 if parts == 2 else -1] + (parts, 3))
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


def var(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False, *, ddof: Any = 0,
        method: str = "auto", out: Any = None) -> Any:
    return _spread("var", x, axis, dtype, keepdims, ddof, method, out)


def std(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False, *, ddof: Any = 0,
        method: str = "auto", out: Any = None) -> Any:
    return _spread("std", x, axis, dtype, keepdims, ddof, method, out)


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
        ``one_pass``; for var and std of 2**25 elements or more, ``shuffle``.
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
