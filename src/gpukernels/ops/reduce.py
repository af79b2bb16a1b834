"""Reductions with NumPy semantics: :func:`sum`, :func:`prod`, :func:`min`, :func:`max`.

All four share one ladder of kernels (``gpukernels.methods("reduce")``), templated on the
operator. Full reductions only: an axis reduction that leaves an axis longer than 1 raises
NotImplementedError.
"""

from __future__ import annotations

import builtins
import functools
import operator
import threading
from typing import Any

import numpy

from .. import _compile, _device
from .._common import (Rung, ceil_div, finish_out, launch, multiprocessor_count, prepare_out,
                      register_ladder, resolve_method)

__all__ = ["sum", "prod", "min", "max", "RUNGS", "KERNELS", "sum_result_dtype",
           "reduction_result_dtype", "normalize_axis"]

#: The ladder, bottom rung first; every reduction operation uses it.
RUNGS = register_ladder("reduce", (
    Rung("two_pass", "grid-stride register sums, shared-memory tree, second launch over partials"),
    Rung("shuffle", "16-byte loads and warp shuffles (one barrier per block); still two launches"),
    Rung("one_pass", "the last block to finish folds the partials: a single launch"),
))
OPERATORS = {"sum": "SumOp", "prod": "ProdOp", "min": "MinOp", "max": "MaxOp"}
for _name in OPERATORS:
    register_ladder(_name, RUNGS)

BLOCK = 256  # threads per block; the kernels' shared-memory tree is sized by this template argument
BLOCKS_PER_SM = 8  # enough resident warps to keep loads in flight while bounding the partials

_C_TYPES = {
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
_U64, _F32, _F64 = (numpy.dtype(t) for t in (numpy.uint64, numpy.float32, numpy.float64))
_C64, _C128 = numpy.dtype(numpy.complex64), numpy.dtype(numpy.complex128)
_INTEGER_LIKE = [d for d in _C_TYPES if d.kind in "biu"]
_FLOAT16 = numpy.dtype(numpy.float16)

# The (input, accumulator) pairs with a kernel instance, per operator. Integers accumulate in
# uint64 for sum and prod, where overflow wraps; truncating to the result width then gives
# NumPy's wrap-around for any integer result dtype. float16 accumulates in float32. min and max
# compare in the input's own type (float16 in float32, exactly). Everything else is first cast
# to the result dtype, as NumPy does (see _plan).
_ACC_PAIRS = {
    "SumOp": ([(d, _U64) for d in _INTEGER_LIKE]
              + [(_FLOAT16, _F32), (_F32, _F32)]
              + [(d, _F64) for d in _INTEGER_LIKE + [_FLOAT16, _F32, _F64]]
              + [(_C64, _C64), (_C128, _C128)]),
    "ProdOp": ([(d, _U64) for d in _INTEGER_LIKE]
               + [(_FLOAT16, _F32), (_F32, _F32), (_F64, _F64), (_C64, _C64), (_C128, _C128)]),
    "MinOp": [(d, d) for d in _INTEGER_LIKE] + [(_FLOAT16, _F32), (_F32, _F32), (_F64, _F64)],
}
_ACC_PAIRS["MaxOp"] = _ACC_PAIRS["MinOp"]


def _kernel_name(method: str, op: str, in_dtype: numpy.dtype, acc_dtype: numpy.dtype) -> str:
    return f"reduce_{method}<{op}, {_C_TYPES[in_dtype]}, {_C_TYPES[acc_dtype]}, {BLOCK}>"


KERNELS = _compile.register("reduce.cu", [
    _kernel_name(rung.name, op, i, a)
    for rung in RUNGS for op, pairs in _ACC_PAIRS.items() for i, a in pairs
])


@functools.lru_cache(maxsize=1024)
def _cached_result_dtype(operation: str, dtype: numpy.dtype, requested: Any) -> numpy.dtype:
    return _result_dtype(operation, dtype, requested)


def reduction_result_dtype(operation: str, dtype: numpy.dtype, requested: Any = None) -> numpy.dtype:
    """NumPy's result dtype for ``numpy.<operation>(x, dtype=requested)`` where ``x`` has ``dtype``.

    Asks NumPy itself on a one-element array, so the rules (int32 -> int64, uint8 -> uint64,
    bool -> int64 for sum and prod, float16 stays float16, min and max keep the input's dtype)
    and the errors for impossible requests are NumPy's. Answers are cached: asking NumPy takes
    microseconds, a visible share of a small reduction.
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
    if operation in ("min", "max"):
        if requested is not None:
            raise TypeError(f"{operation} has no dtype argument; it keeps the input's dtype")
        if dtype.kind == "c":
            raise TypeError(f"{operation} of complex numbers is not supported; compare .real "
                            "and .imag explicitly")
        if dtype not in _C_TYPES:
            raise TypeError(f"{operation} does not support dtype {dtype}")
        return dtype
    if requested is not None and numpy.dtype(requested).kind not in "biufc":
        raise TypeError(f"{operation} cannot produce dtype {numpy.dtype(requested)}")
    result = getattr(numpy, operation)(numpy.ones(1, dtype=dtype), dtype=requested).dtype
    if result not in _C_TYPES:
        raise TypeError(f"{operation} cannot produce dtype {result}")
    return result


def sum_result_dtype(dtype: numpy.dtype, requested: Any = None) -> numpy.dtype:
    """NumPy's result dtype for ``numpy.sum(x, dtype=requested)``; see :func:`reduction_result_dtype`."""
    return reduction_result_dtype("sum", dtype, requested)


def _plan(op: str, method: str, in_dtype: numpy.dtype, result_dtype: numpy.dtype):
    """(dtype the kernel reads, accumulator dtype) for a reduction of ``in_dtype`` to ``result_dtype``.

    When the reading dtype differs from ``in_dtype`` the input is cast to it first, which is what
    NumPy does for such requests (e.g. float64 data summed with dtype=float32). The shuffle and
    one_pass rungs sum float32 in float64: more accurate than NumPy's pairwise float32 sum, at no
    cost to a memory-bound kernel.
    """
    kind = result_dtype.kind
    if op in ("MinOp", "MaxOp"):
        return in_dtype, (_F32 if in_dtype == _FLOAT16 else in_dtype)
    if kind == "b":
        return result_dtype, _U64  # NumPy casts to bool first; sum/prod of 0/1 is nonzero iff any/all
    if kind in "iu":
        return (in_dtype if in_dtype.kind in "biu" else result_dtype), _U64
    if op == "SumOp":
        if result_dtype == _F64 and in_dtype == _F32 and method != "two_pass":
            # The vector rungs add a word's four float32 in float32 before widening (see
            # gk_word_acc): exact float64 sums need float64 input.
            return _F64, _F64
        if result_dtype == _F64 and in_dtype.kind in "biuf":
            return in_dtype, _F64
        if result_dtype == _F32 and in_dtype == _F32 and method != "two_pass":
            return in_dtype, _F64
    if result_dtype == _F32 and in_dtype == _FLOAT16:
        return in_dtype, _F32
    if kind == "f":
        return result_dtype, (_F32 if result_dtype.itemsize <= 4 else _F64)
    return result_dtype, result_dtype  # complex


def normalize_axis(axis: Any, ndim: int) -> tuple[int, ...]:
    """``axis`` (None, int or tuple of ints) as sorted non-negative axes, NumPy's errors."""
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, tuple) else (axis,)
    normalized = []
    for ax in axes:
        try:
            ax = operator.index(ax)
        except TypeError:
            raise TypeError(f"axis must be an integer or a tuple of integers, not {axis!r}") from None
        if not -ndim <= ax < ndim:
            raise numpy.exceptions.AxisError(ax, ndim)
        normalized.append(ax % ndim)
    if len(set(normalized)) != len(normalized):
        raise ValueError("duplicate value in 'axis'")
    return tuple(sorted(normalized))


# one_pass needs a block counter that is 0 at launch and not shared by launches that may run
# concurrently: one per (device, stream). Each launch leaves it at 0 again.
_counters: dict[tuple[int, int], Any] = {}
_counters_lock = threading.Lock()


def _block_counter():
    cupy = _device.cupy
    key = (cupy.cuda.runtime.getDevice(), cupy.cuda.get_current_stream().ptr)
    counter = _counters.get(key)
    if counter is None:
        with _counters_lock:
            counter = _counters.get(key)
            if counter is None:
                counter = _counters[key] = cupy.zeros(1, dtype=numpy.uint32)
    return counter


def _reduce_all(flat, method: str, op: str, acc_dtype: numpy.dtype):
    """Reduce a non-empty 1-D view to a one-element array of ``acc_dtype``."""
    cupy = _device.cupy
    stride = numpy.int64(flat.strides[0] // flat.itemsize)
    n = flat.size
    kernel = KERNELS.function(_kernel_name(method, op, flat.dtype, acc_dtype))
    per_thread = 1  # elements one thread takes per step: a 16-byte word for the vector rungs
    if method != "two_pass" and stride == 1:
        per_thread = builtins.max(1, 16 // flat.itemsize)
    blocks = builtins.min(ceil_div(n, BLOCK * per_thread), BLOCKS_PER_SM * multiprocessor_count())
    result = cupy.empty(1, dtype=acc_dtype)
    if method == "one_pass":
        partials = cupy.empty(blocks, dtype=acc_dtype)
        launch(kernel, (blocks, 1, 1), (BLOCK, 1, 1),
               (flat, result, numpy.int64(n), stride, partials, _block_counter()))
        return result
    if blocks == 1:
        launch(kernel, (1, 1, 1), (BLOCK, 1, 1), (flat, result, numpy.int64(n), stride))
        return result
    partials = cupy.empty(blocks, dtype=acc_dtype)
    launch(kernel, (blocks, 1, 1), (BLOCK, 1, 1), (flat, partials, numpy.int64(n), stride))
    final = KERNELS.function(_kernel_name(method, op, acc_dtype, acc_dtype))
    launch(final, (1, 1, 1), (BLOCK, 1, 1), (partials, result, numpy.int64(blocks), numpy.int64(1)))
    return result


def _reduce(operation: str, x: Any, axis: Any, dtype: Any, keepdims: bool, method: str, out: Any):
    """The body shared by :func:`sum`, :func:`prod`, :func:`min` and :func:`max`."""
    op = OPERATORS[operation]
    # 1. Validate.
    x = _device.as_device_array(x, "x")
    result_dtype = reduction_result_dtype(operation, x.dtype, dtype)
    axes = normalize_axis(axis, x.ndim)
    kept = [length for ax, length in enumerate(x.shape) if ax not in axes]
    reduced = [length for ax, length in enumerate(x.shape) if ax in axes]
    full = builtins.all(length == 1 for length in kept)  # one output element: a full reduction
    nothing = builtins.all(length == 1 for length in reduced)  # each output is one input element
    if not (full or nothing or x.size == 0):
        raise NotImplementedError(
            f"{operation} over axis={axis!r} of an array of shape {x.shape} is a partial "
            "reduction; supported today: axis=None, or axes that leave only length-1 axes"
        )
    method = resolve_method(operation, method, auto="one_pass")
    out_shape = tuple(1 if ax in axes else length for ax, length in enumerate(x.shape)) \
        if keepdims else tuple(kept)
    if x.size == 0 and op in ("MinOp", "MaxOp") and builtins.any(n == 0 for n in reduced):
        raise ValueError(f"zero-size array to reduction operation {operation}imum which has no "
                         "identity")
    if out is not None:
        prepare_out(out, out_shape, result_dtype, x.device.id, (x,), casting="unsafe")

    with x.device:
        cupy = _device.cupy
        if x.size == 0:  # the identity of + or *, or an empty result
            fill = cupy.ones if op == "ProdOp" else cupy.zeros
            return finish_out(fill(out_shape, dtype=result_dtype), out, direct=False)
        if nothing and not full:  # e.g. axis=(): NumPy's result is the input in the result dtype
            return finish_out(x.astype(result_dtype).reshape(out_shape), out, direct=False)
        # 2. Allocate: the kernel reads a 1-D view (a copy only when no single stride fits).
        read_dtype, acc_dtype = _plan(op, method, x.dtype, result_dtype)
        flat = x.reshape(-1).astype(read_dtype, copy=False)
        if flat.strides[0] % flat.itemsize:
            flat = cupy.ascontiguousarray(flat)
        # 3. Launch.
        total = _reduce_all(flat, method, op, acc_dtype)
        if result_dtype.kind == "b" and acc_dtype != result_dtype:
            total = total != 0
        elif acc_dtype == _U64 and result_dtype != _U64:
            total = total.view(numpy.int64)  # same bits; astype truncates to the result width
        result = total.astype(result_dtype, copy=False).reshape(out_shape)
    return finish_out(result, out, direct=False)


_PARAMETERS = """
    Parameters
    ----------
    x : cupy.ndarray or GPU array
        Input of a bool, integer, float{complex} dtype, any shape and strides.
    axis : None, int or tuple of ints, optional
        Axes to reduce. Supported today: full reductions, i.e. ``None`` or axes such that
        every axis left in the result has length 1 (e.g. ``axis=1`` of a ``(1, n)`` array), and
        reductions over length-1 axes only (e.g. ``axis=()``). Other axis reductions raise
        NotImplementedError.{dtype}
    keepdims : bool, optional
        Keep the reduced axes with length 1.
    method : str, optional
        A rung of ``gpukernels.methods("reduce")``, or ``"auto"`` (``one_pass``).
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
        ``x`` is not a GPU array, or its dtype{dtype_note} is unsupported.
    numpy.exceptions.AxisError
        An axis is out of range.
    ValueError
        Duplicate axes, ``out`` of the wrong shape or device, or an unknown ``method``.{empty}
    NotImplementedError
        A partial reduction: one that leaves an axis longer than 1 and reduces one too.
"""


def sum(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False, *,
        method: str = "auto", out: Any = None):
    return _reduce("sum", x, axis, dtype, keepdims, method, out)


def prod(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False, *,
         method: str = "auto", out: Any = None):
    return _reduce("prod", x, axis, dtype, keepdims, method, out)


def min(x: Any, axis: Any = None, keepdims: bool = False, *, method: str = "auto", out: Any = None):
    return _reduce("min", x, axis, None, keepdims, method, out)


def max(x: Any, axis: Any = None, keepdims: bool = False, *, method: str = "auto", out: Any = None):
    return _reduce("max", x, axis, None, keepdims, method, out)


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
for _function, _word in ((min, "Minimum"), (max, "Maximum")):
    _function.__doc__ = f"""{_word} of array elements, NaN-propagating as NumPy's ``{_function.__name__}``.
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
    >>> gk.{_function.__name__}(cupy.asarray([3, -1, 2]))
    array({-1 if _function is min else 3})
"""
