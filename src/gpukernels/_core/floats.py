"""bfloat16, the one dtype the kernels take that NumPy lacks.

NumPy has no bfloat16; ``ml_dtypes`` adds it as a NumPy dtype (kind ``"V"``, 2 bytes), and
CuPy 14 uses that dtype for bfloat16 arrays (also for torch and JAX tensors taken through
DLPack). Its promotions are ml_dtypes': bfloat16 with bfloat16, bool or 8-bit integers gives
bfloat16, with float32 or float64 the float, with float16 or wider integers no common dtype.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy

__all__ = ["BFLOAT16", "is_bfloat16", "movable", "eps", "promote"]

BFLOAT16 = numpy.dtype(ml_dtypes.bfloat16)


def is_bfloat16(dtype: Any) -> bool:
    """Whether ``dtype`` is ml_dtypes' bfloat16."""
    return dtype == BFLOAT16


def movable(dtype: numpy.dtype) -> bool:
    """Whether the byte-moving kernels (transpose, permute_dims) take ``dtype``: NumPy's bool,
    integer, float and complex dtypes, and bfloat16 (moved as 2-byte items)."""
    return dtype.kind in "biufc" or is_bfloat16(dtype)


def eps(dtype: Any) -> float:
    """Machine epsilon of a float dtype, bfloat16 (2**-7) included."""
    dtype = numpy.dtype(dtype)
    return float(ml_dtypes.finfo(dtype).eps if is_bfloat16(dtype) else numpy.finfo(dtype).eps)


def promote(operation: str, *dtypes: numpy.dtype) -> numpy.dtype:
    """NumPy's (and ml_dtypes') result dtype of ``dtypes``; TypeError where they have none
    (bfloat16 with float16, for one)."""
    try:
        return numpy.result_type(*dtypes)
    except TypeError:  # numpy.exceptions.DTypePromotionError
        names = " and ".join(str(d) for d in dtypes)
        raise TypeError(f"{operation}: {names} have no common dtype (NumPy, with ml_dtypes, "
                        "promotes bfloat16 only with bool, 8-bit integers, float32 and "
                        "float64); convert one operand first") from None
