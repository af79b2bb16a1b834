"""NumPy's rule for one axis argument, shared by every operation that takes axes."""

from __future__ import annotations

import operator
from typing import Any

import numpy

__all__ = ["axis_index"]


def axis_index(axis: Any, ndim: int, refusal: str) -> int:
    """``axis`` as an index into ``range(ndim)``, as NumPy reads one: an integer (NumPy integers
    included, bools refused) counted from the end when negative. TypeError with ``refusal`` for
    anything else, AxisError out of range.

    Examples
    --------
    >>> from gpukernels._core.axes import axis_index
    >>> axis_index(-1, 3, "axes must be integers")
    2
    """
    if isinstance(axis, (bool, numpy.bool_)):  # NumPy refuses True and False as axes
        raise TypeError(refusal)
    try:
        axis = operator.index(axis)
    except TypeError:
        raise TypeError(refusal) from None
    if not -ndim <= axis < ndim:
        raise numpy.exceptions.AxisError(axis, ndim)
    return axis % ndim
