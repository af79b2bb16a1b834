"""NumPy's dtype and axis rules for the reductions, and the kernels' accumulator choices.

Everything here is host arithmetic on dtypes: the rungs and the axis plans use it to pick the
dtype a kernel reads, the one it accumulates in and the one it writes, and the instance lists
are enumerated from the same functions, so no instance is compiled that no call launches.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import numpy

from ..._core.axes import axis_index

__all__ = ["OPERATORS", "ARG_OPERATORS", "EAGER_OPERATORS", "C_TYPES", "KERNEL_C_TYPES", "MOMENTS", "MEAN", "arg_accumulator", "reduction_result_dtype",
           "normalize_axis", "accumulator", "writes", "to_result", "reachable", "real_part",
           "mean_result_dtype", "SPREAD_RESULTS", "SPREAD_DDOFS", "spread", "storage"]

#: The kernels' operator type of each reduction. ``var`` stands for the moments that var, std
#: (and, in gpukernels.dask, mean) are finished from: its kernels write :data:`MOMENTS`.
OPERATORS = {"sum": "SumOp", "prod": "ProdOp", "min": "MinOp", "max": "MaxOp", "mean": "MeanOp",
             "var": "MomentsOp", "argmin": "ArgMinOp", "argmax": "ArgMaxOp"}
ARG_OPERATORS = ("ArgMinOp", "ArgMaxOp")
#: The operators whose kernels compile at import; the others (var's moments, argmin, argmax)
#: on first use.
EAGER_OPERATORS = ("SumOp", "ProdOp", "MinOp", "MaxOp")

C_TYPES = {
    numpy.dtype(numpy.bool_): "bool",
    numpy.dtype(numpy.int8): "signed char",
    numpy.dtype(numpy.int16): "short",
    numpy.dtype(numpy.int32): "int",
    numpy.dtype(numpy.int64): "long long",
    numpy.dtype(numpy.uint8): "unsigned char",
    numpy.dtype(numpy.uint16): "unsigned short",
    numpy.dtype(numpy.uint32): "unsigned int",
    numpy.dtype(numpy.uint64): "unsigned long long",
    numpy.dtype(numpy.float16): "gk_half",
    numpy.dtype(numpy.float32): "float",
    numpy.dtype(numpy.float64): "double",
    numpy.dtype(numpy.complex64): "gk_complex<float>",
    numpy.dtype(numpy.complex128): "gk_complex<double>",
}
#: The moments accumulator of var and std (``gk_moments`` in reduce/common.cuh): count, mean
#: and sum of squared deviations, in float64. CuPy allocates it as 3 float64 per element.
MOMENTS = numpy.dtype([("count", numpy.float64), ("mean", numpy.float64), ("m2", numpy.float64)])


def arg_accumulator(value: numpy.dtype) -> numpy.dtype:
    """argmin's and argmax's accumulator (``gk_arg<V>`` in reduce/common.cuh): the extreme
    value, compared in ``value``'s type, and its int64 index, 16 bytes in all."""
    return numpy.dtype([("value", value), ("index", numpy.int64)], align=True)


#: The value types of argmin's and argmax's accumulators (float16 compares in float32).
_ARG_VALUES = [d for d in C_TYPES if d.kind in "biuf" and d != numpy.dtype(numpy.float16)]
#: mean's accumulator (``gk_mean``): the sum and the count, in float64.
MEAN = numpy.dtype([("sum", numpy.float64), ("count", numpy.float64)])
I64, U64, F16, F32, F64 = (numpy.dtype(t) for t in (numpy.int64, numpy.uint64, numpy.float16,
                                                    numpy.float32, numpy.float64))
#: The result dtypes and ddof values whose var and std are one launch (float data in its own
#: dtype: the moments' last write finishes them, ``gk_spread`` in reduce/common.cuh); other
#: requests finish in a second launch.
SPREAD_RESULTS = (F16, F32, F64)
SPREAD_DDOFS = (0, 1)


def spread(result: numpy.dtype, ddof: int, root: bool) -> numpy.dtype:
    """What a kernel writes as var (std where ``root``) with ``ddof`` in ``result``'s float
    dtype: a structured dtype of that one field, so that its C type (``gk_spread<T, DDOF,
    ROOT>``) follows from it; the result's array is allocated as ``result`` (:func:`storage`)."""
    return numpy.dtype([(f"{'std' if root else 'var'}_ddof{ddof}", result)])


#: (result, ddof, root) of every one-launch var and std
_SPREAD_KINDS = tuple((result, ddof, root) for result in SPREAD_RESULTS for ddof in SPREAD_DDOFS
                      for root in (False, True))
_SPREADS = {spread(result, ddof, root):
            f"gk_spread<{C_TYPES[result]}, {ddof}, {'true' if root else 'false'}>"
            for result, ddof, root in _SPREAD_KINDS}
#: The C type of every dtype a reduction kernel reads, accumulates or writes.
KERNEL_C_TYPES = {**C_TYPES, MOMENTS: "gk_moments", MEAN: "gk_mean",
                  **{arg_accumulator(v): f"gk_arg<{C_TYPES[v]}>" for v in _ARG_VALUES},
                  **_SPREADS}


def storage(shape: tuple, dtype: numpy.dtype) -> tuple[tuple, numpy.dtype]:
    """(shape, dtype) of the CuPy array a buffer of ``shape`` and ``dtype`` is allocated as:
    var's and std's one-field results as that field's dtype; the other accumulators (CuPy
    allocates no structured dtype) as their size in float64 words per element, in a trailing
    axis."""
    if dtype.fields is None:
        return shape, dtype
    if len(dtype.fields) == 1:
        return shape, dtype[0]
    return shape + (dtype.itemsize // 8,), F64


@functools.lru_cache(maxsize=1024)
def _cached_result_dtype(operation: str, dtype: numpy.dtype, requested: Any) -> numpy.dtype:
    return _result_dtype(operation, dtype, requested)


def reduction_result_dtype(operation: str, dtype: numpy.dtype, requested: Any = None) -> numpy.dtype:
    """NumPy's result dtype for ``numpy.<operation>(x, dtype=requested)`` where ``x`` has ``dtype``.

    Asks NumPy itself on a one-element array, so the rules (int32 -> int64, uint8 -> uint64,
    bool -> int64 for sum and prod, float16 stays float16, min and max keep the input's dtype)
    and the errors for impossible requests are NumPy's. Answers are cached: asking NumPy takes
    microseconds, a visible share of a small reduction.

    Examples
    --------
    >>> import numpy
    >>> from gpukernels.ops.reduce.dtypes import reduction_result_dtype
    >>> reduction_result_dtype("sum", numpy.dtype("int32")), reduction_result_dtype("max", numpy.dtype("uint8"))
    (dtype('int64'), dtype('uint8'))
    """
    try:
        return _cached_result_dtype(operation, dtype, requested)
    except TypeError as error:
        if "unhashable" not in str(error):
            raise
        return _result_dtype(operation, dtype, requested)


def _result_dtype(operation: str, dtype: numpy.dtype, requested: Any = None) -> numpy.dtype:
    if dtype.kind not in "biufc":
        raise TypeError(f"{operation} supports bool, integer, float and complex dtypes, not {dtype}")
    if operation in ("min", "max", "argmin", "argmax"):  # comparisons: no dtype=, no complex
        gives = "int64 indices" if operation.startswith("arg") else "the input's dtype"
        if requested is not None:
            raise TypeError(f"{operation} has no dtype argument; it gives {gives}")
        if dtype.kind == "c":
            raise TypeError(f"{operation} of complex numbers is not supported; compare .real "
                            "and .imag explicitly")
        if dtype not in C_TYPES:
            raise TypeError(f"{operation} does not support dtype {dtype}")
        return I64 if operation.startswith("arg") else dtype
    if requested is not None and numpy.dtype(requested).kind not in "biufc":
        raise TypeError(f"{operation} cannot produce dtype {numpy.dtype(requested)}")
    with warnings.catch_warnings():  # complex to a real dtype: the answer, not NumPy's warning
        warnings.simplefilter("ignore", numpy.exceptions.ComplexWarning)
        result = getattr(numpy, operation)(numpy.ones(1, dtype=dtype), dtype=requested).dtype
    if operation == "var" and result.kind != "f":
        raise TypeError(f"{operation} gives a float dtype, not {result}")
    if operation == "mean" and (result.kind != "f" or dtype.kind == "c"):
        # the kernels' mean: real float results of real input (gpukernels.mean divides a sum
        # for the others)
        raise TypeError(f"the mean kernels give real float results of real input, not {result} "
                        f"of {dtype}")
    if result not in C_TYPES:
        raise TypeError(f"{operation} cannot produce dtype {result}")
    return result


def normalize_axis(axis: Any, ndim: int) -> tuple[int, ...]:
    """``axis`` (None, int or tuple of ints) as sorted non-negative axes, with NumPy's errors.

    Examples
    --------
    >>> from gpukernels.ops.reduce.dtypes import normalize_axis
    >>> normalize_axis((-1, 0), 3), normalize_axis(None, 2)
    ((0, 2), (0, 1))
    """
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, tuple) else (axis,)
    refusal = f"axis must be an integer or a tuple of integers, not {axis!r}"
    normalized = [axis_index(ax, ndim, refusal) for ax in axes]
    if len(set(normalized)) != len(normalized):
        raise ValueError("duplicate value in 'axis'")
    return tuple(sorted(normalized))


def accumulator(op: str, in_dtype: numpy.dtype, result_dtype: numpy.dtype,
                float32_sums_in_float64: bool) -> tuple[numpy.dtype, numpy.dtype]:
    """(dtype the kernel reads, accumulator dtype) for a reduction of ``in_dtype`` to
    ``result_dtype``.

    When the reading dtype differs from ``in_dtype`` the input is cast to it first, which is what
    NumPy does for such requests (e.g. float64 data summed with dtype=float32). Integers
    accumulate in uint64, where + and * wrap: truncating to the result width then gives NumPy's
    wrap-around. float16 accumulates in float32; min and max compare in the input's own type
    (float16 in float32, exactly). ``float32_sums_in_float64`` (the rungs above the seed's):
    float32 sums accumulate in float64, more accurate than NumPy's pairwise float32 sum at no
    cost to a memory-bound kernel.
    """
    kind = result_dtype.kind
    if op == "MomentsOp":  # every input read as it is, into float64 moments
        return in_dtype, MOMENTS
    if op == "MeanOp":  # every input read as it is, summed in float64 with its count
        return in_dtype, MEAN
    if op in ARG_OPERATORS:  # values compared in the input's type (float16 in float32)
        return in_dtype, arg_accumulator(F32 if in_dtype == F16 else in_dtype)
    if op in ("MinOp", "MaxOp"):
        return in_dtype, (F32 if in_dtype == F16 else in_dtype)
    if kind == "b":
        return result_dtype, U64  # NumPy casts to bool first; sum/prod of 0/1 is nonzero iff any/all
    if kind in "iu":
        return (in_dtype if in_dtype.kind in "biu" else result_dtype), U64
    if op == "SumOp":
        if result_dtype == F64 and in_dtype.kind in "biuf":
            return in_dtype, F64
        if result_dtype == F32 and in_dtype == F32 and float32_sums_in_float64:
            return in_dtype, F64
    if result_dtype == F32 and in_dtype == F16:
        return in_dtype, F32
    if kind == "f":
        return result_dtype, (F32 if result_dtype.itemsize <= 4 else F64)
    return result_dtype, result_dtype  # complex


def writes(op: str, read_dtype: numpy.dtype, acc_dtype: numpy.dtype, result_dtype: numpy.dtype,
           full: bool) -> numpy.dtype:
    """The dtype the last kernel of a reduction writes: the result dtype where it is one
    conversion from the accumulator (float32 -> float16, float64 -> float32 sums; for full
    reductions also uint64 -> int64, the same bits), so that no cast launch follows; else the
    accumulator."""
    outputs = [acc_dtype]
    if op in ARG_OPERATORS:
        outputs.append(I64)  # the index
    if op == "MeanOp":
        outputs += [F16, F32, F64]  # the sum over the count, rounded once
    if acc_dtype == F32:
        outputs.append(F16)  # float16 results accumulated in float32
    if op == "SumOp" and acc_dtype == F64 and read_dtype in (F32, F64):
        outputs.append(F32)  # float32 sums accumulated in float64
    signed = read_dtype.kind in "bi" or read_dtype == U64
    if full and op in ("SumOp", "ProdOp") and acc_dtype == U64 and signed:
        outputs.append(I64)  # the uint64 accumulator's bits, as NumPy's wrap-around gives them
    return result_dtype if result_dtype in outputs else acc_dtype


def to_result(total: Any, result_dtype: numpy.dtype) -> Any:
    """Accumulator values as NumPy's result dtype: integers truncated (wrap-around), bool as != 0."""
    if result_dtype.kind == "b" and total.dtype != result_dtype:
        return total != 0
    if total.dtype == result_dtype:
        return total
    if total.dtype == U64:
        total = total.view(numpy.int64)  # same bits; astype truncates to the result width
    return total.astype(result_dtype, copy=False)


@functools.cache
def reachable(operation: str, float32_sums_in_float64: bool, full: bool,
              spreads: bool = False) -> tuple:
    """Every (read, accumulator, written) dtype triple a reduction can plan, over every input
    dtype and every ``dtype=`` request NumPy accepts: the instance lists come from this.
    ``spreads``: var's also include its one-launch var and std of float data (float16, float32
    and float64 read and written, :data:`SPREAD_DDOFS`)."""
    op = OPERATORS[operation]
    # min, max, argmin, argmax take no dtype=; gpukernels.mean sends dtype= requests to a sum
    requests = [None] if operation in ("min", "max", "argmin", "argmax", "mean") else \
        [None, *C_TYPES]
    triples = []
    for in_dtype in C_TYPES:
        if op in ("MomentsOp", "MeanOp") and in_dtype.kind == "c":
            continue  # var reads complex data as its two parts; mean of complex sums it
        for requested in requests:
            try:
                with warnings.catch_warnings():  # complex summed to a real dtype: NumPy warns
                    warnings.simplefilter("ignore", numpy.exceptions.ComplexWarning)
                    result = reduction_result_dtype(operation, in_dtype, requested)
            except TypeError:
                continue
            read, acc = accumulator(op, in_dtype, result, float32_sums_in_float64)
            triples.append((read, acc, writes(op, read, acc, result, full)))
    if spreads and op == "MomentsOp":
        triples += [(result, MOMENTS, spread(result, ddof, root))
                    for result, ddof, root in _SPREAD_KINDS]
    return tuple(dict.fromkeys(triples))


def real_part(dtype: numpy.dtype) -> numpy.dtype:
    """The dtype of a complex dtype's real and imaginary parts (float32 for complex64)."""
    return numpy.dtype(dtype.char.lower())


@functools.cache
def _mean_dtype(dtype: numpy.dtype, requested: Any) -> numpy.dtype:
    if dtype.kind not in "biufc" or dtype not in C_TYPES:
        raise TypeError(f"mean supports bool, integer, float and complex dtypes up to 64 bits "
                        f"(128 for complex), not {dtype}")
    if requested is not None and numpy.dtype(requested).kind not in "biufc":
        raise TypeError(f"mean cannot produce dtype {numpy.dtype(requested)}")
    with warnings.catch_warnings():  # complex to a real dtype: the answer, not NumPy's warning
        warnings.simplefilter("ignore", numpy.exceptions.ComplexWarning)
        result = numpy.mean(numpy.ones(1, dtype=dtype), dtype=requested).dtype
    if result not in C_TYPES:
        raise TypeError(f"mean cannot produce dtype {result}")
    return result


def mean_result_dtype(dtype: numpy.dtype, requested: Any = None) -> numpy.dtype:
    """NumPy's result dtype of ``numpy.mean(x, dtype=requested)`` for ``x`` of ``dtype``
    (float64 for bool and integers; floats and complex keep theirs)."""
    try:
        return _mean_dtype(dtype, requested)
    except TypeError as error:
        if "unhashable" not in str(error):
            raise
        return _mean_dtype.__wrapped__(dtype, requested)
