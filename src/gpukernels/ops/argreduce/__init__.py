"""Indices of extremes with NumPy semantics: :func:`argmin` and :func:`argmax`.

Both climb the reduction ladder (``gpukernels.methods("reduce")``) and use the row and column
kernels for an axis, as :func:`gpukernels.min` and :func:`gpukernels.max` do: their operators
(``ArgMinOp``, ``ArgMaxOp`` in ``kernels/reduce/common.cuh``) carry each element's index next to
its value and keep the smaller index on ties, so the result is the first index of the extreme
(the first NaN if there is one) whatever order the kernels combine in.
"""

from __future__ import annotations

from typing import Any

import numpy

from ..._core import ladder as _ladder
from .. import reduce as _reduce
from ..reduce.dtypes import reduction_result_dtype
from . import check

__all__ = ["argmin", "argmax"]


def _arg(operation: str, x: Any, axis: Any, keepdims: bool, method: str, out: Any) -> Any:
    # 1. Validate: NumPy takes one axis or None here (the rest is the reductions' checks);
    # 2. allocate and 3. launch as the reductions do.
    if axis is not None:
        if isinstance(axis, bool) or not isinstance(axis, (int, numpy.integer)):
            raise TypeError(f"{operation} takes one integer axis or None, not {axis!r}")
        axis = int(axis)
    return _reduce._reduce(operation, x, axis, None, keepdims, method, out)


def argmin(x: Any, axis: Any = None, keepdims: bool = False, *, method: str = "auto",
           out: Any = None) -> Any:
    return _arg("argmin", x, axis, keepdims, method, out)


def argmax(x: Any, axis: Any = None, keepdims: bool = False, *, method: str = "auto",
           out: Any = None) -> Any:
    return _arg("argmax", x, axis, keepdims, method, out)


for _function, _word, _example in ((argmin, "minimum", 1), (argmax, "maximum", 0)):
    _function.__doc__ = f"""Index of the first {_word}, as NumPy's ``{_function.__name__}``.

    Parameters
    ----------
    x : cupy.ndarray or GPU array
        Input of a bool, integer or float dtype, any shape and strides.
    axis : None or int, optional
        The axis to search along (negative counts from the end); ``None`` searches the
        flattened array (C order) and gives a flat index.
    keepdims : bool, optional
        Keep the searched axis with length 1.
    method : str, optional
        A rung of ``gpukernels.methods("reduce")``, or ``"auto"`` (``one_pass``, which reads
        float inputs of more than one wave of its blocks, about 2**23 float32 elements on 132
        SMs, in ``shuffle``'s grid-stride wave, in one launch), for ``axis=None``; an axis
        uses the row and column kernels.
    out : cupy.ndarray, optional
        Destination of the result's shape on the same device.

    Returns
    -------
    cupy.ndarray
        int64 indices: a 0-d array for ``axis=None``. Ties give the first index; NaN counts
        as the {_word}, and the first NaN wins.

    Raises
    ------
    TypeError
        ``x`` is not a GPU array, its dtype is complex or unsupported, or ``axis`` is not an
        integer or None.
    numpy.exceptions.AxisError
        The axis is out of range.
    ValueError
        An empty axis (or an empty input for ``axis=None``), ``out`` of the wrong shape or
        device, or an unknown ``method``.

    Examples
    --------
    >>> import cupy, gpukernels as gk
    >>> gk.{_function.__name__}(cupy.asarray([3.0, -1.0, 3.0]))
    array({_example})
    >>> gk.{_function.__name__}(cupy.asarray([[1, 5], [7, 0]]), axis=1).tolist()
    [{1 - _example}, {_example}]
"""
    _ladder.register(_ladder.Operation(
        name=_function.__name__, function=_function, ladder=_reduce.LADDER, inputs=check.inputs,
        reference=check.make_reference(_function.__name__), check_shape=(10**6 + 3,),
        result_dtype=lambda x, *, _name=_function.__name__, **_:
            reduction_result_dtype(_name, x.dtype),
        check_dtypes=("int32", "float32"), bench=check.make_bench(_function.__name__),
        kind="arg"))
