"""Inclusive scans with NumPy semantics: :func:`cumsum` and :func:`cumprod`.

Both share one ladder of kernels (``gpukernels.methods("scan")``, :mod:`.rungs`), templated on
the operator. Each input layout is planned once: the scan becomes ``rows`` scans of ``n``
elements of a C-contiguous input (``inner`` apart when the axis is not the last), and
``method="auto"`` sends scans along the last axis of items of up to 4 bytes to ``striped`` for
rows of 2**22 elements or more (2**25 for 1-byte items), and in inputs of 2**24 elements or
more (2**26) for rows longer than 2**17 elements (float16 2**18, 1-byte items from 2**19); the
other rows to ``pipelined`` (``blocked`` on GPUs before compute capability 8.0); and scans
along any other axis to ``columns``.
"""

from __future__ import annotations

import functools
import math
import operator
import warnings
from typing import Any

import numpy

from ..._core import device as _device
from ..._core import ladder as _ladder
from ..._core.axes import axis_index
from ..._core.launch import PLANS, Array, KernelCall, finish_out, prepare_out
from ..reduce.dtypes import reduction_result_dtype
from . import check, rungs
from .rungs import LADDER, OPERATORS, Problem

__all__ = ["cumsum", "cumprod", "LADDER"]


def _kernel_dtypes(x_dtype: numpy.dtype, result: numpy.dtype) -> tuple[numpy.dtype, numpy.dtype]:
    """(dtype the kernels read, dtype they write) for a scan of ``x_dtype`` into ``result``.

    Without a request the kernels read the input and write the result. A ``dtype=`` request is
    met as NumPy meets it, casting first: integer results of integer input are the default scan
    (int64/uint64, which wraps modulo 2**64) truncated to the requested width, the same bits as
    NumPy's narrower wrap-around; a bool result is the scan of the input as bool (a sum that is
    nonzero is a logical or, a product a logical and); anything else scans the input cast to
    the result dtype.
    """
    default = rungs.accumulator(x_dtype)[1]
    if result == default:
        return x_dtype, default
    if result.kind == "b":
        return numpy.dtype(bool), rungs.I64
    if result.kind in "iu" and x_dtype.kind in "biu":
        return x_dtype, default
    return result, rungs.accumulator(result)[1]


class _Plan:
    """The launches of one scan of one layout, ready to replay."""

    __slots__ = ("out_shape", "result_dtype", "read", "written", "contiguous", "calls", "buffers",
                 "single", "nbytes")

    def __init__(self, out_shape: tuple, result_dtype: numpy.dtype, read: numpy.dtype,
                 written: numpy.dtype, contiguous: bool) -> None:
        self.out_shape, self.result_dtype = out_shape, result_dtype
        self.read, self.written = read, written
        self.contiguous = contiguous  # the input needs no copy before the kernels read it
        self.calls: list[KernelCall] = []
        self.buffers: list[tuple] = []
        # One launch from the input as it is into a new result of the result dtype (the
        # single-pass rungs on contiguous input), called directly; the result's bytes
        self.single: KernelCall | None = None
        self.nbytes = math.prod(out_shape) * written.itemsize

    @property
    def direct(self) -> bool:
        """The kernels write the result as it is (no cast after)."""
        return self.written == self.result_dtype

    def run(self, x: Any, result: Any) -> None:
        """Scan ``x`` into ``result`` (C-contiguous, of dtype ``written``)."""
        cupy = _device.cupy
        if x.dtype != self.read:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", numpy.exceptions.ComplexWarning)
                x = x.astype(self.read, order="C")
        elif not self.contiguous:
            x = cupy.ascontiguousarray(x)
        temporaries = [cupy.empty(shape, dtype) for shape, dtype in self.buffers]
        for call in self.calls:
            call(x, result, *temporaries)


def _scan_axis(x: Any, axis: Any) -> int | None:
    """``axis`` as an index into ``x.shape``, with NumPy's errors; None when the scan runs over
    the flattened array (``axis=None``, or any valid axis of a 0-d array)."""
    refusal = f"an integer is required for the axis, not {axis!r}"
    if axis is None or x.ndim == 0:
        if axis is not None:
            axis_index(axis, 1, refusal)
        return None
    return axis_index(axis, x.ndim, refusal)


def _plan(operation: str, x: Any, axis: Any, dtype: Any, method: str) -> _Plan:
    """Validate a scan of ``x`` and plan its launches."""
    _device.check_alignment(x, "x")
    result_dtype = reduction_result_dtype(operation, x.dtype, dtype)
    rung = LADDER.resolve(method, operation)
    ax = _scan_axis(x, axis)
    if ax is None:
        out_shape, n, rows, inner = (x.size,), x.size, 1, 1
    else:
        out_shape = tuple(x.shape)
        n, inner = x.shape[ax], math.prod(x.shape[ax + 1:])
        rows = math.prod(x.shape[:ax]) * inner
    read, written = _kernel_dtypes(x.dtype, result_dtype)
    plan = _Plan(out_shape, result_dtype, read, written, bool(x.flags.c_contiguous))
    if x.size == 0:
        return plan
    if inner > 1 and n == 1:  # nothing to combine: each element is a scan of its own
        n, rows, inner = 1, rows, 1
    problem = Problem(OPERATORS[operation], read, n, rows, inner,
                      _device.compute_capability(), rungs.device_resident)
    chosen = rung if rung is not None else rungs.choose(problem)
    planned = chosen.plan(problem)
    slots = {"in": Array(0), "out": Array(1)}
    for step in planned.steps:
        args = tuple(slots[a] if isinstance(a, str) else Array(2 + a) if isinstance(a, int)
                     else a for a in step.args)
        stream_arrays = functools.partial(rungs.scratch, step.scratch) if step.scratch else None
        plan.calls.append(step.launch.call(args, chosen.name, stream_arrays))
    plan.buffers = list(planned.buffers)
    if len(plan.calls) == 1 and not plan.buffers and plan.contiguous and read == x.dtype \
            and plan.direct:
        plan.single = plan.calls[0]
    return plan


def _scan(operation: str, x: Any, axis: Any, dtype: Any, method: str, out: Any) -> Any:
    """The body shared by :func:`cumsum` and :func:`cumprod`."""
    # 1. Validate, and plan once per layout (a planned layout has passed every check).
    cupy = _device.cupy
    if cupy is None or type(x) is not cupy.ndarray:
        x = _device.as_device_array(x, "x")
    if type(method) is not str:
        LADDER.resolve(method, operation)  # raises TypeError
    try:
        key = (operation, x.shape, x.strides, x.dtype, axis, dtype, method, x.data.ptr % 16,
               x.data.device_id) if axis is None or type(axis) is int else None
        plan = PLANS.get(key) if key is not None else None
    except TypeError:  # an unhashable dtype request: planned (and validated) on every call
        key, plan = None, None
    if plan is None:
        if out is not None:  # a bad out= is refused before planning
            _plan_out_check(operation, x, axis, dtype, out)
        with x.device:
            plan = _plan(operation, x, axis, dtype, method)
        if key is not None:
            PLANS.put(key, plan)
    device = x.data.device_id
    direct = False
    if out is not None:
        direct = prepare_out(out, plan.out_shape, plan.result_dtype, device, (x,),
                             casting="unsafe") and plan.direct
    if device != cupy.cuda.runtime.getDevice():
        with cupy.cuda.Device(device):
            return _run(plan, x, out, direct)
    return _run(plan, x, out, direct)


def _plan_out_check(operation: str, x: Any, axis: Any, dtype: Any, out: Any) -> None:
    result_dtype = reduction_result_dtype(operation, x.dtype, dtype)
    shape = (x.size,) if _scan_axis(x, axis) is None else tuple(x.shape)
    prepare_out(out, shape, result_dtype, x.data.device_id, (x,), casting="unsafe")


def _run(plan: _Plan, x: Any, out: Any, direct: bool) -> Any:
    if plan.single is not None and out is None:
        # 2. Allocate and 3. launch: one kernel into a new array (built around its memory
        # after the launch).
        return plan.single.into_new(plan.out_shape, plan.written, plan.nbytes, x)
    cupy = _device.cupy
    # 2. Allocate (cupy.ndarray is cupy.empty without its Python frame, 0.7 us a call).
    result = out if direct else cupy.ndarray(plan.out_shape, plan.written)
    # 3. Launch.
    if result.size:
        plan.run(x, result)
    if plan.written != plan.result_dtype:  # a narrower integer or a bool request
        result = (result != 0) if plan.result_dtype.kind == "b" else \
            result.astype(plan.result_dtype)
    return finish_out(result, out, direct)


def cumsum(x: Any, axis: Any = None, dtype: Any = None, *, method: str = "auto",
           out: Any = None) -> Any:
    return _scan("cumsum", x, axis, dtype, method, out)


def cumprod(x: Any, axis: Any = None, dtype: Any = None, *, method: str = "auto",
            out: Any = None) -> Any:
    return _scan("cumprod", x, axis, dtype, method, out)


_DOC = """Cumulative {what} of array elements along an axis, as :func:`numpy.{name}`.

    Parameters
    ----------
    x : cupy.ndarray or GPU array
        Input of a bool, integer, float or complex dtype, any shape and strides (inputs that are
        not C-contiguous are copied first).
    axis : int, optional
        The axis to scan (negative counts from the end). ``None`` (the default) scans the
        flattened array, in C order.
    dtype : dtype, optional
        Result dtype, as in NumPy: by default bool and signed integers give int64, unsigned
        integers uint64, floats and complex keep their dtype. Integer scans wrap around modulo
        2**64 (and a narrower requested integer type modulo its width) as NumPy's do.
    method : str, optional
        A rung of ``gpukernels.methods("scan")``, or ``"auto"``: along the last axis (or
        flattened), for items of up to 4 bytes ``striped`` for rows of 2**22 elements or more
        (2**25 for 1-byte items) and, in inputs of 2**24 elements or more (2**26), for rows
        longer than 2**17 (float16 2**18, 1-byte items from 2**19); ``pipelined`` for the
        others (``blocked`` before compute capability 8.0); ``columns`` along any other.
    out : cupy.ndarray, optional
        Destination of the result's shape on the same device; the result is cast to its dtype.

    Returns
    -------
    cupy.ndarray
        The result: of ``x.shape``, or 1-D of ``x.size`` elements when ``axis`` is None. float16
        accumulates in float32 and float32 in float64, each output rounded once (NumPy
        accumulates in the input's precision). The same input gives bitwise the same result on
        every call.

    Raises
    ------
    TypeError
        ``x`` is not a GPU array, its dtype or ``dtype`` is unsupported, or ``axis`` is not an
        integer.
    numpy.exceptions.AxisError
        ``axis`` is out of range.
    ValueError
        ``out`` of the wrong shape or device, or an unknown ``method``.

    Examples
    --------
    >>> import cupy, gpukernels as gk
    >>> gk.{name}(cupy.arange(1, 6, dtype=cupy.int32))
    array([{example}])
    >>> gk.{name}(cupy.asarray([[1.0, 2.0], [3.0, 4.0]]), axis=0)
    array([[1., 2.],
           [{axis0}]])
"""
cumsum.__doc__ = _DOC.format(what="sum", name="cumsum", example=" 1,  3,  6, 10, 15",
                             axis0="4., 6.")
cumprod.__doc__ = _DOC.format(what="product", name="cumprod", example="  1,   2,   6,  24, 120",
                              axis0="3., 8.")

for _function in (cumsum, cumprod):
    _ladder.register(_ladder.Operation(
        name=_function.__name__, function=_function, ladder=LADDER, inputs=check.inputs,
        reference=check.make_reference(_function.__name__), check_shape=(3 * 4096 + 17,),
        result_dtype=lambda x, *, dtype=None, _name=_function.__name__, **_:
            reduction_result_dtype(_name, x.dtype, dtype),
        check_dtypes=("int32", "float32"), bench=check.make_bench(_function.__name__),
        kind="scan", extra={"combine": operator.add if _function is cumsum else operator.mul,
                            "identity": 0 if _function is cumsum else 1}))
