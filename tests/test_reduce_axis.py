"""Partial (axis) reductions on the GPU: gk.sum, gk.prod, gk.min and gk.max over any int or
tuple ``axis``, against NumPy's results (shape, dtype and values).

Covers short and long rows, tall and wide columns, 3-D and 4-D arrays, every dtype, ``dtype=``
requests, ``keepdims``, ``out=``, non-contiguous views, NaN and infinities, empty axes,
accuracy and bitwise determinism.
"""

from __future__ import annotations

import math
import warnings

import numpy
import pytest

import gpukernels as gk
import references as reference
from edges_helpers import reduction_data
from gpukernels.validation import poisoned

cupy = pytest.importorskip("cupy")

pytestmark = pytest.mark.gpu

METHODS = gk.methods("reduce") + ("auto",)
OPERATIONS = ("sum", "prod", "min", "max")
NUMPY_OPERATIONS = {"sum": numpy.sum, "prod": numpy.prod, "min": numpy.min, "max": numpy.max}
ALL_DTYPES = [numpy.dtype(t) for t in (
    numpy.bool_, numpy.int8, numpy.int16, numpy.int32, numpy.int64, numpy.uint8, numpy.uint16,
    numpy.uint32, numpy.uint64, numpy.float16, numpy.float32, numpy.float64, numpy.complex64,
    numpy.complex128)]
FLOAT_DTYPES = [d for d in ALL_DTYPES if d.kind in "fc"]
EPS32 = float(numpy.finfo(numpy.float32).eps)


# --- data and comparisons ------------------------------------------------------------------

def shape_id(shape) -> str:
    return "x".join(map(str, shape))


def axis_id(axis) -> str:
    if axis is None:
        return "all"
    if isinstance(axis, tuple):
        return "axes(" + ",".join(map(str, axis)) + ")"
    return f"axis{axis}"


def case_id(case) -> str:
    shape, axis = case
    return f"{shape_id(shape)}-{axis_id(axis)}"


def dtype_id(dtype) -> str:
    return numpy.dtype(dtype).name


def operation_dtype_pairs(operations=OPERATIONS, dtypes=ALL_DTYPES):
    """(operation, dtype) pairs, leaving out min/max of complex (a TypeError, tested apart)."""
    return [pytest.param(name, numpy.dtype(dtype), id=f"{name}-{dtype_id(dtype)}")
            for name in operations for dtype in dtypes
            if not (name in ("min", "max") and numpy.dtype(dtype).kind == "c")]


def reduced_axes(ndim: int, axis) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, tuple) else (axis,)
    return tuple(sorted(a % ndim for a in axes))


def reduced_length(shape, axis) -> int:
    """How many input elements each output element reduces."""
    return math.prod(shape[a] for a in reduced_axes(len(shape), axis))


def rare_true(shape, n: int, rng: numpy.random.Generator) -> numpy.ndarray:
    """Booleans that are True with a probability making about half of the n-element reductions
    contain a True: any/all over them are not constant."""
    p = 1.0 - 0.5 ** (1.0 / max(n, 1))
    return numpy.asarray(rng.random(shape) < p)


def make_data(name: str, shape, dtype, rng: numpy.random.Generator, n: int, *,
              integer_valued: bool = False) -> numpy.ndarray:
    """Random host data for reduction ``name`` over ``n`` elements per output.

    reference.random_array for sums (and min/max of non-bool). For products: odd integers (a
    product modulo 2**64 of odd numbers stays odd and depends on every factor), and floats of
    magnitude near 1 with random signs (or phases), spread so that a product of n of them stays
    within a few powers of two of 1. Bools for prod/min/max: mostly True (mostly False for max),
    so that the result varies between outputs.
    """
    dtype = numpy.dtype(dtype)
    if dtype.kind == "b" and name in ("prod", "min"):
        return ~rare_true(shape, n, rng)
    if dtype.kind == "b" and name == "max":
        return rare_true(shape, n, rng)
    if name != "prod" or dtype.kind == "b" or integer_valued:
        return reference.random_array(shape, dtype, rng, integer_valued=integer_valued)
    return reduction_data(name, shape, dtype, rng, count=n)


def numpy_reduce(name: str, host: numpy.ndarray, axis, dtype=None, keepdims: bool = False):
    """NumPy's result for ``numpy.<name>(host, axis=axis, dtype=dtype, keepdims=keepdims)``."""
    kwargs = {} if dtype is None else {"dtype": dtype}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", numpy.exceptions.ComplexWarning)
        warnings.simplefilter("ignore", RuntimeWarning)  # overflow and invalid values in casts
        return numpy.asarray(NUMPY_OPERATIONS[name](host, axis=axis, keepdims=keepdims, **kwargs))


def gk_reduce(name: str, x, axis, dtype=None, keepdims: bool = False, **kwargs):
    """``gk.<name>(x, axis=axis, keepdims=keepdims, dtype=dtype, **kwargs)``; no ``dtype``
    keyword for min/max (they have none)."""
    if dtype is not None:
        kwargs["dtype"] = dtype
    return getattr(gk, name)(x, axis=axis, keepdims=keepdims, **kwargs)


def real_eps(dtype) -> float:
    dtype = numpy.dtype(dtype)
    real = numpy.dtype(dtype.char.lower()) if dtype.kind == "c" else dtype
    return float(numpy.finfo(real).eps)


def wide_reference(name: str, host: numpy.ndarray, axis, dtype, keepdims: bool, result_dtype):
    """(float sum or product in float64 or complex128, |x| summed along the axes in float64),
    from the input rounded to ``result_dtype`` first, as NumPy casts before reducing."""
    result_dtype = numpy.dtype(result_dtype)
    wide = numpy.complex128 if result_dtype.kind == "c" else numpy.float64
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", numpy.exceptions.ComplexWarning)
        warnings.simplefilter("ignore", RuntimeWarning)  # inf - inf, inf * 0
        source = host.astype(result_dtype).astype(wide)
        if name == "sum":
            want, _ = reference.sum(host, axis=axis, dtype=dtype, keepdims=keepdims)
        else:
            want = numpy.prod(source, axis=axis, keepdims=keepdims)
        magnitude = numpy.sum(numpy.abs(source), axis=axis, keepdims=keepdims)
    return numpy.asarray(want), numpy.asarray(magnitude)


def error_bound(name: str, n: int, result_dtype, want, magnitude):
    """Elementwise bound on a float reduction of n terms per output.

    sum: ``2 n eps_acc sum|x| + eps_result |want|``, the worst case of any summation order
    (Higham 4.2) plus the final rounding; eps_acc is float32's for results of up to 4 bytes per
    real part (float16 accumulates in float32), else float64's. prod: a few roundings per factor,
    ``(2n + 1) eps |want|`` (``(4n + 1)`` for complex).
    """
    eps_result = real_eps(result_dtype)
    if name == "sum":
        eps_acc = EPS32 if real_eps(result_dtype) >= EPS32 else real_eps(numpy.float64)
        return 2.0 * max(n, 1) * eps_acc * magnitude + eps_result * numpy.abs(want)
    per_factor = 4 if numpy.dtype(result_dtype).kind == "c" else 2
    return (per_factor * max(n, 1) + 1) * eps_result * numpy.abs(want)


def assert_reduction_matches(name: str, got, host: numpy.ndarray, *, axis, dtype=None,
                             keepdims: bool = False, exact: bool = False, context: str = ""):
    """``got`` (GPU result of ``gk.<name>``) against NumPy on ``host``: NumPy's dtype and shape;
    integer, bool and min/max results exactly (NaN where NumPy has NaN); float sums and products
    equal to the exactly rounded reference when ``exact``, else NaN and infinities where the
    float64 reference has them and finite elements within :func:`error_bound`."""
    want = numpy_reduce(name, host, axis, dtype, keepdims)
    got = cupy.asnumpy(got)
    context = f"{name} axis={axis!r} dtype={dtype} keepdims={keepdims} {context}"
    assert got.dtype == want.dtype, f"{context}: dtype {got.dtype}, NumPy gives {want.dtype}"
    assert got.shape == want.shape, f"{context}: shape {got.shape}, NumPy gives {want.shape}"
    if name in ("min", "max") or want.dtype.kind in "biu" or want.size == 0:
        numpy.testing.assert_array_equal(got, want, err_msg=context)
        return
    wide, magnitude = wide_reference(name, host, axis, dtype, keepdims, want.dtype)
    if exact:
        numpy.testing.assert_array_equal(got, wide.astype(want.dtype), err_msg=context)
        return
    finite = numpy.isfinite(wide)
    numpy.testing.assert_array_equal(got[~finite], wide[~finite].astype(want.dtype),
                                     err_msg=f"{context}: NaN or infinity")
    n = reduced_length(host.shape, axis)
    bound = error_bound(name, n, want.dtype, wide[finite], magnitude[finite])
    error = numpy.abs(got[finite].astype(wide.dtype) - wide[finite])
    bad = ~(error <= bound)  # NaN counts as bad
    assert not bad.any(), (
        f"{context}: {int(bad.sum())} of {bad.size} elements outside the bound; "
        f"got {got[finite][bad][:3]}, want {wide[finite][bad][:3]}, "
        f"error {error[bad][:3]}, bound {bound[bad][:3]}")


def check_case(name: str, shape, axis, dtype, rng, *, keepdims: bool = False,
               integer_valued: bool = False, method: str = "auto", context: str = ""):
    """Random data of ``shape`` and ``dtype``, reduced on the GPU and checked against NumPy."""
    host = make_data(name, shape, dtype, rng, reduced_length(shape, axis),
                     integer_valued=integer_valued)
    x = cupy.asarray(host)
    got = gk_reduce(name, x, axis, keepdims=keepdims, method=method)
    assert_reduction_matches(name, got, host, axis=axis, keepdims=keepdims, exact=integer_valued,
                             context=f"{dtype_id(dtype)} {shape} {method} {context}")
    numpy.testing.assert_array_equal(cupy.asnumpy(x), host, err_msg="the input was modified")
    return host, x, got


# --- shapes ---------------------------------------------------------------------------------------

SHAPES_2D = [((1, 1), 0), ((1, 1), 1), ((1, 7), 0), ((1, 7), 1), ((7, 1), 0), ((7, 1), 1),
             ((2, 3), 0), ((2, 3), 1), ((31, 33), 0), ((31, 33), 1), ((64, 64), 0), ((64, 64), 1),
             ((257, 129), 0), ((257, 129), 1), ((1000, 2), 1), ((1000, 2), 0), ((2, 1000), 0),
             ((2, 1000), 1), ((3, 5000), 0), ((3, 5000), 1), ((5000, 3), 0), ((5000, 3), 1),
             ((1, 4097), 0), ((1, 4097), 1), ((4097, 1), 0), ((4097, 1), 1), ((127, 1025), 0),
             ((127, 1025), 1), ((31, 33), -1), ((127, 1025), -2)]


@pytest.mark.usefixtures("index_width")
@pytest.mark.parametrize("case", SHAPES_2D, ids=case_id)
@pytest.mark.parametrize("name, dtype", operation_dtype_pairs(dtypes=[numpy.int32, numpy.float32]))
def test_2d_shapes(name, dtype, case, rng):
    shape, axis = case
    check_case(name, shape, axis, dtype, rng)


# Short rows (one thread per row), long rows split across blocks, tall and wide columns; split
# columns over several column tiles and matrices (each tile folds its splits in the same launch).
LARGE_CASES = [((10**5, 2), 1), ((10**5, 3), 1), ((10**5, 1), 1), ((10**5, 3), 0),
               ((2, 300_000), 1), ((3, 1 << 20), 1), ((1 << 20, 3), 0), ((3, 1 << 20), 0),
               ((1 << 20, 3), 1), ((8, 5000, 300), 1), ((20_000, 1000), 0),
               ((3, 7000, 513), (0, 1))]


@pytest.mark.usefixtures("index_width")
@pytest.mark.parametrize("case", LARGE_CASES, ids=case_id)
@pytest.mark.parametrize("name, dtype", operation_dtype_pairs(dtypes=[numpy.int32, numpy.float32]))
def test_short_long_tall_and_wide(name, dtype, case, rng):
    shape, axis = case
    check_case(name, shape, axis, dtype, rng)


@pytest.mark.parametrize("case", [((1 << 20, 3), 0), ((8, 5000, 300), 1), ((20_000, 1000), 0)],
                         ids=case_id)
def test_split_columns_fold_in_one_launch(case, rng):
    # Columns too few to fill the GPU are split along their rows; the column kernel folds the
    # splits itself (a ticket per column tile), so one launch does the whole reduction, and
    # its tickets are back at 0 for the next one.
    from gpukernels._core.device import multiprocessor_count
    from gpukernels._core.launch import record_launches
    from gpukernels.ops.reduce import scratch_sizes
    from gpukernels.ops.reduce.program import scratch

    shape, axis = case
    x = cupy.asarray(make_data("sum", shape, numpy.float32, rng, reduced_length(shape, axis)))
    with record_launches() as launches:
        gk.sum(x, axis=axis)
    names = [r.instance for r in launches]
    assert len(names) == 1 and names[0].startswith("reduce_cols_folded<"), names
    assert launches[0].grid[1] > 1, "the plan did not split the columns"
    check_case("sum", shape, axis, numpy.float32, rng)
    sms = multiprocessor_count()
    assert not scratch(*scratch_sizes(sms))[2].any(), "a ticket was left set"


@pytest.mark.parametrize("case", LARGE_CASES, ids=case_id)
@pytest.mark.parametrize("dtype", [numpy.float16, numpy.float32, numpy.float64, numpy.complex64],
                         ids=dtype_id)
def test_integer_valued_float_sums_are_exact_on_large_shapes(dtype, case, rng):
    # Integers in [-8, 8]: every partial sum is exact in the accumulator (float32 for float16),
    # so a missing or repeated element shows as a wrong value.
    shape, axis = case
    check_case("sum", shape, axis, dtype, rng, integer_valued=True)


SHAPES_ND = [((4, 33, 65), 0), ((4, 33, 65), 1), ((4, 33, 65), 2), ((4, 33, 65), (0, 2)),
             ((4, 33, 65), (1, 2)), ((4, 33, 65), (0, 1)), ((4, 33, 65), -2),
             ((4, 33, 65), (0, 1, 2)), ((4, 33, 65), (2, 0)),
             ((2, 3, 4, 5), (1, 3)), ((2, 3, 4, 5), (0, 2)), ((2, 3, 4, 5), (-1,)),
             ((2, 3, 4, 5), (0,)), ((2, 3, 4, 5), (1, 2)), ((2, 3, 4, 5), (0, 1, 2, 3)),
             ((2, 3, 4, 5), (0, 1, 3)), ((3, 1, 1, 5), (1, 2)), ((1, 4, 1, 6), (0, 2)),
             ((6, 1, 5, 7), (0, 3)), ((5, 300, 7), 1)]


@pytest.mark.parametrize("case", SHAPES_ND, ids=case_id)
@pytest.mark.parametrize("name, dtype", operation_dtype_pairs(
    dtypes=[numpy.int16, numpy.float32, numpy.complex128]))
def test_3d_and_4d_shapes(name, dtype, case, rng):
    shape, axis = case
    check_case(name, shape, axis, dtype, rng)


DTYPE_CASES = [((31, 33), 0), ((31, 33), 1), ((3, 5000), 1), ((5000, 3), 0), ((4, 33, 65), 1),
               ((4, 33, 65), (0, 2))]


@pytest.mark.parametrize("case", DTYPE_CASES, ids=case_id)
@pytest.mark.parametrize("name, dtype", operation_dtype_pairs())
def test_every_dtype(name, dtype, case, rng):
    shape, axis = case
    check_case(name, shape, axis, dtype, rng)


@pytest.mark.parametrize("case", DTYPE_CASES, ids=case_id)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
def test_integer_valued_float_sums_are_exact(dtype, case, rng):
    shape, axis = case
    check_case("sum", shape, axis, dtype, rng, integer_valued=True)


@pytest.mark.parametrize("name, dtype", [pytest.param(n, numpy.dtype(d), id=f"{n}-{dtype_id(d)}")
                                         for n in ("min", "max")
                                         for d in (numpy.complex64, numpy.complex128)])
@pytest.mark.parametrize("axis", [0, 1, (0, 1), -1, ()], ids=axis_id)
def test_min_max_of_complex_raise(name, dtype, axis):
    with pytest.raises(TypeError, match="complex"):
        getattr(gk, name)(cupy.ones((4, 5), dtype=dtype), axis=axis)


# --- dtype= -------------------------------------------------------------------------------------

DTYPE_ARGUMENT_CASES = [((257, 129), 0), ((257, 129), 1), ((5000, 3), 0), ((3, 5000), 1)]

# (operation, input dtype, requested dtype, data, compare exactly with NumPy's result)
DTYPE_REQUESTS = [
    ("sum", numpy.int32, numpy.int32, "full", True),  # wraps at 32 bits
    ("sum", numpy.int8, numpy.int8, "full", True),
    ("sum", numpy.uint8, numpy.uint8, "full", True),
    ("sum", numpy.int64, numpy.int32, "full", True),
    ("sum", numpy.int16, numpy.uint16, "full", True),
    ("sum", numpy.uint64, numpy.int64, "full", True),
    ("sum", numpy.bool_, numpy.bool_, "rare", True),  # NumPy: logical or
    ("sum", numpy.bool_, numpy.int8, "full", True),
    ("sum", numpy.int32, numpy.float64, "full", True),  # exact: partial sums below 2**53
    ("sum", numpy.int8, numpy.float32, "full", True),  # exact: partial sums below 2**24
    ("sum", numpy.float32, numpy.int8, "small", True),  # cast to int8 first, then wraps
    ("sum", numpy.float32, numpy.float64, "full", False),
    ("sum", numpy.float16, numpy.float32, "full", False),
    ("sum", numpy.float64, numpy.float32, "full", False),
    ("sum", numpy.int8, numpy.float16, "small", False),
    ("sum", numpy.complex64, numpy.complex128, "full", False),
    ("sum", numpy.float32, numpy.complex64, "full", False),
    ("prod", numpy.int8, numpy.int8, "full", True),
    ("prod", numpy.uint8, numpy.uint8, "full", True),
    ("prod", numpy.int32, numpy.int32, "full", True),
    ("prod", numpy.bool_, numpy.bool_, "full", True),  # NumPy: logical and
    ("prod", numpy.float32, numpy.float64, "full", False),
    ("prod", numpy.complex64, numpy.complex128, "full", False),
]


def request_id(request) -> str:
    name, dtype, requested, _, _ = request
    return f"{name}-{dtype_id(dtype)}-to-{dtype_id(requested)}"


@pytest.mark.parametrize("case", DTYPE_ARGUMENT_CASES, ids=case_id)
@pytest.mark.parametrize("request_case", DTYPE_REQUESTS, ids=request_id)
def test_dtype_argument(request_case, case, rng):
    name, dtype, requested, data, exact = request_case
    shape, axis = case
    n = reduced_length(shape, axis)
    if data == "rare":
        host = rare_true(shape, n, rng)
    elif data == "small":
        host = rng.integers(-8, 9, size=shape).astype(dtype)
    else:
        host = make_data(name, shape, dtype, rng, n)
    got = gk_reduce(name, cupy.asarray(host), axis, dtype=requested)
    want = numpy_reduce(name, host, axis, requested)
    context = request_id(request_case) + f" {shape} axis={axis}"
    assert got.dtype == want.dtype and got.shape == want.shape, context
    if exact:
        numpy.testing.assert_array_equal(cupy.asnumpy(got), want, err_msg=context)
    else:
        assert_reduction_matches(name, got, host, axis=axis, dtype=requested, context=context)


def test_sum_int32_with_dtype_int32_wraps_per_row():
    host = numpy.full((3, 4), 2**30, dtype=numpy.int32)
    got = gk.sum(cupy.asarray(host), axis=1, dtype=numpy.int32)
    assert got.dtype == numpy.int32 and got.shape == (3,)
    assert cupy.asnumpy(got).tolist() == [0, 0, 0]  # 4 * 2**30 wraps to 0
    got = gk.sum(cupy.asarray(host), axis=0)
    assert got.dtype == numpy.int64 and cupy.asnumpy(got).tolist() == [3 * 2**30] * 4


# --- keepdims and out= --------------------------------------------------------------------------

KEEPDIMS_CASES = [((31, 33), 0), ((31, 33), 1), ((4, 33, 65), (0, 2)), ((2, 3, 4, 5), (1, 3)),
                  ((5000, 3), 1), ((3, 5000), 0), ((1, 4097), 1)]


@pytest.mark.parametrize("case", KEEPDIMS_CASES, ids=case_id)
@pytest.mark.parametrize("name, dtype", operation_dtype_pairs(dtypes=[numpy.int64, numpy.float32]))
def test_keepdims(name, dtype, case, rng):
    shape, axis = case
    host, x, got = check_case(name, shape, axis, dtype, rng, keepdims=True)
    assert got.ndim == len(shape)
    plain = gk_reduce(name, x, axis)
    assert plain.shape == numpy_reduce(name, host, axis).shape
    assert cupy.asnumpy(got).reshape(plain.shape).tobytes() == cupy.asnumpy(plain).tobytes()


OUT_CASES = [((257, 129), 0), ((3, 5000), 1), ((4, 33, 65), (0, 2)), ((2, 3, 4, 5), (1, 3))]


@pytest.mark.parametrize("keepdims", [False, True], ids=["plain", "keepdims"])
@pytest.mark.parametrize("case", OUT_CASES, ids=case_id)
@pytest.mark.parametrize("name, dtype", operation_dtype_pairs(dtypes=[numpy.int32, numpy.float32]))
def test_out_receives_the_result(name, dtype, case, keepdims, rng):
    shape, axis = case
    host = make_data(name, shape, dtype, rng, reduced_length(shape, axis))
    x = cupy.asarray(host)
    want = numpy_reduce(name, host, axis, keepdims=keepdims)
    out = poisoned(want.shape, want.dtype)
    got = gk_reduce(name, x, axis, keepdims=keepdims, out=out)
    assert got is out
    assert_reduction_matches(name, out, host, axis=axis, keepdims=keepdims, context="out=")
    plain = gk_reduce(name, x, axis, keepdims=keepdims)
    assert cupy.asnumpy(plain).tobytes() == cupy.asnumpy(out).tobytes()


def test_out_casts_like_numpy(rng):
    # float32 sum into a float64 out: the float32 result (or a better one), cast.
    host = reference.random_array((257, 129), numpy.float32, rng)
    out = poisoned((129,), numpy.float64)
    assert gk.sum(cupy.asarray(host), axis=0, out=out) is out
    want, magnitude = wide_reference("sum", host, 0, None, False, numpy.float32)
    bound = error_bound("sum", 257, numpy.float32, want, magnitude)
    assert out.dtype == numpy.float64
    assert numpy.all(numpy.abs(cupy.asnumpy(out) - want) <= bound)

    # int8 data summed into an int8 out: unsafe casting wraps, as NumPy's does.
    host = numpy.full((300, 7), 100, dtype=numpy.int8)
    out = poisoned((7,), numpy.int8)
    assert gk.sum(cupy.asarray(host), axis=0, out=out) is out
    numpy_out = numpy.empty(7, numpy.int8)
    numpy.sum(host, axis=0, out=numpy_out)
    numpy.testing.assert_array_equal(cupy.asnumpy(out), numpy_out)
    assert cupy.asnumpy(out).tolist() == [48] * 7  # 30000 modulo 256

    # Exact casts: int32 sums into float64, int16 minima into int64.
    host = reference.random_array((5000, 3), numpy.int32, rng)
    out = poisoned((3,), numpy.float64)
    assert gk.sum(cupy.asarray(host), axis=0, out=out) is out
    numpy.testing.assert_array_equal(cupy.asnumpy(out),
                                     numpy.sum(host, axis=0).astype(numpy.float64))
    host = reference.random_array((3, 5000), numpy.int16, rng)
    out = poisoned((3,), numpy.int64)
    assert gk.min(cupy.asarray(host), axis=1, out=out) is out
    numpy.testing.assert_array_equal(cupy.asnumpy(out), numpy.min(host, axis=1))


@pytest.mark.parametrize("name", OPERATIONS)
def test_out_strided_view(name, rng):
    host = make_data(name, (31, 33), numpy.float32, rng, 31)
    backing = poisoned((66,), numpy.float32)
    out = backing[::2]
    assert gk_reduce(name, cupy.asarray(host), 0, out=out) is out
    assert_reduction_matches(name, out, host, axis=0, context="strided out=")
    skipped = numpy.ascontiguousarray(cupy.asnumpy(backing[1::2]))
    assert skipped.view(numpy.uint8).tolist() == [0xFF] * skipped.nbytes, \
        "an element between out's elements was written"


@pytest.mark.parametrize("name", OPERATIONS)
def test_out_of_the_wrong_shape_raises(name, rng):
    host = make_data(name, (31, 33), numpy.float32, rng, 31)
    x = cupy.asarray(host)
    for shape in [(34,), (31,), (1, 33), (33, 1), (), (1,)]:
        with pytest.raises(ValueError):
            gk_reduce(name, x, 0, out=cupy.empty(shape, numpy.float32))
    for shape in [(33,), (31, 1), (1, 34)]:
        with pytest.raises(ValueError):
            gk_reduce(name, x, 0, keepdims=True, out=cupy.empty(shape, numpy.float32))
    with pytest.raises(ValueError):
        gk_reduce(name, cupy.asarray(numpy.zeros((2, 3, 4), numpy.float32)), (0, 2),
                  out=cupy.empty((4,), numpy.float32))
    assert_reduction_matches(name, gk_reduce(name, x, 0), host, axis=0,
                             context="after the errors")


# --- non-contiguous inputs ----------------------------------------------------------------------

# Views taken the same way of NumPy and CuPy arrays of shape (300, 61).
VIEWS_2D = [
    ("transposed", lambda xp, v: v.T),
    ("column-step-2", lambda xp, v: v[:, ::2]),
    ("reversed-rows", lambda xp, v: v[::-1]),
    ("reversed-both", lambda xp, v: v[::-1, ::-1]),
    ("offset-row-step", lambda xp, v: v[3::3, 5:-2]),
    ("negative-column-step", lambda xp, v: v[:, ::-3]),
    ("single-column", lambda xp, v: v[:, 7:8]),
    ("fortran-order", lambda xp, v: xp.asfortranarray(v)),
    ("broadcast-rows", lambda xp, v: xp.broadcast_to(v[:1], (500, v.shape[1]))),
    ("transposed-step", lambda xp, v: v.T[::2, 1::3]),
]


@pytest.mark.parametrize("axis", [0, -1, (0, 1)], ids=axis_id)
@pytest.mark.parametrize("label, view", VIEWS_2D, ids=[n for n, _ in VIEWS_2D])
@pytest.mark.parametrize("name, dtype", operation_dtype_pairs(dtypes=[numpy.int64, numpy.float32]))
def test_non_contiguous_2d_views(name, dtype, label, view, axis, rng):
    # Float products of the broadcast view multiply each row 500 times: factors closer to 1.
    n = 10**6 if label.startswith("broadcast") else 300 * 61
    base = make_data(name, (300, 61), dtype, rng, n)
    host = view(numpy, base)
    x = view(cupy, cupy.asarray(base))
    assert x.shape == host.shape and x.strides == host.strides
    got = gk_reduce(name, x, axis)
    assert_reduction_matches(name, got, host, axis=axis, context=f"{label} strides {x.strides}")


VIEWS_ND = [
    ("swapaxes-0-2", lambda v: v.swapaxes(0, 2)),
    ("middle-step-3", lambda v: v[:, ::3, :]),
    ("reversed-last", lambda v: v[..., ::-1]),
    ("transpose-1-0-2", lambda v: v.transpose(1, 0, 2)),
    ("4d-split", lambda v: v.reshape(6, 8, 5, 50)[:, 1::2, :, ::-2]),
]


@pytest.mark.parametrize("axis", [1, (0, 2), -1, (0, 1)], ids=axis_id)
@pytest.mark.parametrize("label, view", VIEWS_ND, ids=[n for n, _ in VIEWS_ND])
@pytest.mark.parametrize("name, dtype", operation_dtype_pairs(dtypes=[numpy.int16, numpy.float32]))
def test_non_contiguous_nd_views(name, dtype, label, view, axis, rng):
    base = make_data(name, (6, 40, 50), dtype, rng, 2000)
    host = view(base)
    x = view(cupy.asarray(base))
    assert x.shape == host.shape and x.strides == host.strides
    got = gk_reduce(name, x, axis)
    assert_reduction_matches(name, got, host, axis=axis, context=f"{label} strides {x.strides}")


# --- axis forms ---------------------------------------------------------------------------------

EQUIVALENT_AXES = [((4, 33, 65), -1, 2), ((4, 33, 65), -3, 0), ((4, 33, 65), (-1, 0), (0, 2)),
                   ((4, 33, 65), (2, 0), (0, 2)), ((4, 33, 65), (-2, -1), (1, 2)),
                   ((31, 33), -2, 0), ((31, 33), (-1,), 1), ((2, 3, 4, 5), (3, -3), (1, 3))]


@pytest.mark.parametrize("shape, axis, same", EQUIVALENT_AXES,
                         ids=[f"{shape_id(s)}-{axis_id(a)}-is-{axis_id(b)}"
                              for s, a, b in EQUIVALENT_AXES])
@pytest.mark.parametrize("name", OPERATIONS)
def test_negative_and_unordered_axes(name, shape, axis, same, rng):
    _, x, got = check_case(name, shape, axis, numpy.float32, rng)
    again = gk_reduce(name, x, same)
    assert again.shape == got.shape and again.dtype == got.dtype
    assert cupy.asnumpy(again).tobytes() == cupy.asnumpy(got).tobytes()


@pytest.mark.parametrize("shape", [(4, 33, 65), (31, 33), (7,), (2, 3, 4, 5)], ids=shape_id)
@pytest.mark.parametrize("name, dtype", operation_dtype_pairs(
    dtypes=[numpy.int8, numpy.bool_, numpy.float16, numpy.float32, numpy.complex64]))
def test_empty_axis_tuple_returns_the_input_in_the_result_dtype(name, dtype, shape, rng):
    host = make_data(name, shape, dtype, rng, 1)
    x = cupy.asarray(host)
    got = gk_reduce(name, x, ())
    want = numpy_reduce(name, host, ())
    assert got.dtype == want.dtype and got.shape == want.shape == shape
    numpy.testing.assert_array_equal(cupy.asnumpy(got), want)
    got[...] = 0  # a new array, not a view of the input
    numpy.testing.assert_array_equal(cupy.asnumpy(x), host)
    kept = gk_reduce(name, x, (), keepdims=True)
    assert kept.shape == shape
    numpy.testing.assert_array_equal(cupy.asnumpy(kept), want)


@pytest.mark.parametrize("shape", [(4, 33, 65), (31, 33), (2, 3, 4, 5)], ids=shape_id)
@pytest.mark.parametrize("name, dtype", operation_dtype_pairs(dtypes=[numpy.int32, numpy.float64]))
def test_all_axes_as_a_tuple_is_a_full_reduction(name, dtype, shape, rng):
    axes = tuple(range(len(shape)))
    host, x, got = check_case(name, shape, axes, dtype, rng)
    assert got.shape == ()
    full = gk_reduce(name, x, None)
    if numpy.dtype(dtype).kind in "iu" or name in ("min", "max"):
        assert cupy.asnumpy(full).tobytes() == cupy.asnumpy(got).tobytes()
    reversed_axes = gk_reduce(name, x, tuple(-1 - a for a in axes), keepdims=True)
    assert reversed_axes.shape == (1,) * len(shape)
    assert_reduction_matches(name, reversed_axes, host, axis=axes, keepdims=True)


@pytest.mark.parametrize("name", OPERATIONS)
def test_invalid_axes_raise(name):
    x = cupy.ones((3, 4, 5), dtype=numpy.float32)
    with pytest.raises(numpy.exceptions.AxisError):
        getattr(gk, name)(x, axis=(0, 3))
    with pytest.raises(numpy.exceptions.AxisError):
        getattr(gk, name)(x, axis=-4)
    with pytest.raises(ValueError):
        getattr(gk, name)(x, axis=(1, -2))
    with pytest.raises(TypeError):
        getattr(gk, name)(x, axis=(0, 1.0))
    got = getattr(gk, name)(x, axis=(0, 2))
    assert got.shape == (4,) and cupy.asnumpy(got).tolist() == \
        numpy_reduce(name, numpy.ones((3, 4, 5), numpy.float32), (0, 2)).tolist()


# --- methods ------------------------------------------------------------------------------------

PARTIAL_CASES = [((257, 129), 0), ((257, 129), 1), ((3, 5000), 1), ((5000, 3), 0),
                 ((4, 33, 65), (0, 2)), ((2, 300_000), 1), ((10**5, 3), 1)]
FULL_IN_DISGUISE = [((1, 4097), 1), ((4097, 1), 0), ((1, 7), 1), ((3, 1, 5), (0, 2))]


@pytest.mark.parametrize("case", PARTIAL_CASES + FULL_IN_DISGUISE, ids=case_id)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", OPERATIONS)
def test_every_method_is_accepted_with_an_axis(name, method, case, rng):
    shape, axis = case
    check_case(name, shape, axis, numpy.float32, rng, method=method)
    check_case(name, shape, axis, numpy.int64, rng, method=method)


@pytest.mark.parametrize("case", PARTIAL_CASES, ids=case_id)
@pytest.mark.parametrize("name", OPERATIONS)
def test_partial_reductions_do_not_depend_on_the_method(name, case, rng):
    # Partial reductions have their own kernels; the method only picks a full-reduction rung.
    shape, axis = case
    x = cupy.asarray(make_data(name, shape, numpy.float32, rng, reduced_length(shape, axis)))
    results = {method: cupy.asnumpy(gk_reduce(name, x, axis, method=method)).tobytes()
               for method in METHODS}
    assert len(set(results.values())) == 1, f"{name} {shape} axis={axis}: methods differ"


# --- NaN, infinities, empty axes ----------------------------------------------------------------

# (label, outputs, length, axis): the data is built as (outputs, length) rows and transposed
# for axis 0.
NAN_CASES = [("rows", 37, 1025, 1), ("columns", 37, 1025, 0), ("long-rows", 3, 300_001, 1),
             ("tall-columns", 3, 300_001, 0), ("short-rows", 100_000, 3, 1)]


@pytest.mark.parametrize("position", ["first", "middle", "last", "all"])
@pytest.mark.parametrize("case", NAN_CASES, ids=[c[0] for c in NAN_CASES])
@pytest.mark.parametrize("dtype", [numpy.float16, numpy.float32, numpy.float64], ids=dtype_id)
@pytest.mark.parametrize("name", ["min", "max"])
def test_min_max_propagate_nan_per_output(name, dtype, case, position, rng):
    label, outputs, length, axis = case
    rows = reference.random_array((outputs, length), dtype, rng)
    planted = sorted({0, (2 * outputs) // 3, outputs - 1})
    columns = {"first": [0], "middle": [length // 2], "last": [length - 1],
               "all": list(range(length))}[position]
    for r in planted:
        rows[r, columns] = numpy.nan
    host = rows if axis == 1 else numpy.ascontiguousarray(rows.T)
    got = gk_reduce(name, cupy.asarray(host), axis)
    assert_reduction_matches(name, got, host, axis=axis, context=f"{label} NaN {position}")
    expected_nan = numpy.zeros(outputs, dtype=bool)
    expected_nan[planted] = True
    numpy.testing.assert_array_equal(numpy.isnan(cupy.asnumpy(got)), expected_nan,
                                     err_msg=f"{name} {label}: NaN in the wrong outputs")


def special_rows(name: str, dtype, rng) -> numpy.ndarray:
    """(7, 301) rows with infinities, NaN and zeros planted in different rows."""
    rows = make_data(name, (7, 301), dtype, rng, 301)
    rows[0, 5] = numpy.inf
    rows[1, 150] = -numpy.inf
    rows[2, 0], rows[2, 300] = numpy.inf, -numpy.inf
    rows[3, 7], rows[3, 200] = -numpy.inf, numpy.nan
    rows[4, :] = numpy.inf
    rows[6, 3], rows[6, 250] = numpy.inf, 0.0
    return rows  # row 5 stays finite


@pytest.mark.parametrize("orientation", ["rows", "columns", "transposed-view"])
@pytest.mark.parametrize("dtype", [numpy.float16, numpy.float32, numpy.float64], ids=dtype_id)
@pytest.mark.parametrize("name", OPERATIONS)
def test_infinities_nan_and_zeros(name, dtype, orientation, rng):
    rows = special_rows(name, dtype, rng)
    if orientation == "rows":
        host, x, axis = rows, cupy.asarray(rows), 1
    elif orientation == "columns":
        host = numpy.ascontiguousarray(rows.T)
        x, axis = cupy.asarray(host), 0
    else:
        host, x, axis = rows.T, cupy.asarray(rows).T, 0
    got = gk_reduce(name, x, axis)
    assert_reduction_matches(name, got, host, axis=axis, context=orientation)
    numpy.testing.assert_array_equal(numpy.isfinite(cupy.asnumpy(got)),
                                     numpy.isfinite(numpy_reduce(name, host, axis)))


EMPTY_CASES = [((3, 0), 1), ((3, 0), -1), ((3, 0), 0), ((0, 4), 0), ((0, 4), 1), ((0, 0), 0),
               ((2, 0, 3), 1), ((2, 0, 3), (0, 2)), ((2, 0, 3), (0, 1)), ((2, 0, 3), (1, 2))]


@pytest.mark.parametrize("case", EMPTY_CASES, ids=case_id)
@pytest.mark.parametrize("name, dtype", operation_dtype_pairs(
    dtypes=[numpy.int8, numpy.bool_, numpy.float32, numpy.complex64]))
def test_empty_axes(name, dtype, case):
    # An empty reduced axis: ValueError for min/max, 0 for sum, 1 for prod. An empty kept axis:
    # an empty result, whatever the operation.
    shape, axis = case
    host = numpy.zeros(shape, dtype=dtype)
    x = cupy.zeros(shape, dtype=dtype)
    for keepdims in (False, True):
        context = f"{name} {shape} axis={axis} keepdims={keepdims}"
        try:
            want = numpy_reduce(name, host, axis, keepdims=keepdims)
        except ValueError:
            with pytest.raises(ValueError):
                gk_reduce(name, x, axis, keepdims=keepdims)
            continue
        got = gk_reduce(name, x, axis, keepdims=keepdims)
        assert got.dtype == want.dtype and got.shape == want.shape, context
        numpy.testing.assert_array_equal(cupy.asnumpy(got), want, err_msg=context)
        out = poisoned(want.shape, want.dtype)
        assert gk_reduce(name, x, axis, keepdims=keepdims, out=out) is out, context
        numpy.testing.assert_array_equal(cupy.asnumpy(out), want, err_msg=context)


# --- determinism and accuracy -------------------------------------------------------------------

DETERMINISM_CASES = [((257, 129), 0), ((257, 129), 1), ((127, 1025), 0), ((4, 33, 65), (0, 2)),
                     ((2, 300_000), 1), ((3, 1 << 20), 1), ((1 << 20, 3), 0), ((10**5, 3), 1),
                     ((8, 5000, 300), 1), ((20_000, 1000), 0)]


@pytest.mark.parametrize("case", DETERMINISM_CASES, ids=case_id)
@pytest.mark.parametrize("name", OPERATIONS)
def test_axis_reductions_are_bitwise_deterministic(name, case, rng):
    shape, axis = case
    n = reduced_length(shape, axis)
    if name == "sum":
        spread = numpy.exp(rng.uniform(-8, 8, shape))
        host = (rng.standard_normal(shape) * spread).astype(numpy.float32)
    else:
        host = make_data(name, shape, numpy.float32, rng, n)
    x = cupy.asarray(host)
    first = cupy.asnumpy(gk_reduce(name, x, axis)).tobytes()
    for repeat in range(20):
        again = cupy.asnumpy(gk_reduce(name, x, axis)).tobytes()
        assert again == first, f"{name} {shape} axis={axis}: repeat {repeat + 1} differs"


@pytest.mark.parametrize("axis", [0, 1], ids=axis_id)
def test_float32_axis_sum_at_least_as_accurate_as_numpy(axis, rng):
    # Magnitudes from 1e-3 to 1e3 with random signs: float32 accumulation loses digits (NumPy's
    # column sums add row after row in float32); float32 sums accumulate in float64 here.
    shape = (4096, 4096)
    host = (numpy.where(rng.random(shape) < 0.5, -1.0, 1.0)
            * 10.0 ** rng.uniform(-3, 3, shape)).astype(numpy.float32)
    exact = numpy.sum(host.astype(numpy.float64), axis=axis)
    numpy_error = numpy.abs(numpy.sum(host, axis=axis).astype(numpy.float64) - exact)
    got = cupy.asnumpy(gk.sum(cupy.asarray(host), axis=axis))
    assert got.dtype == numpy.float32 and got.shape == (4096,)
    our_error = numpy.abs(got.astype(numpy.float64) - exact)
    slack = 0.5 * EPS32 * float(numpy.abs(exact).max())  # half an ulp of the largest result
    assert our_error.max() <= numpy_error.max() + slack, \
        f"max error {our_error.max():.3g}, NumPy's float32 sum {numpy_error.max():.3g}"
    assert_reduction_matches("sum", got, host, axis=axis)


@pytest.mark.parametrize("case", [((4096, 3), 0), ((3, 4096), 1), ((2, 4096, 3), 1),
                                  ((4096, 2, 2), (0, 2)), ((5001, 2), 0), ((2, 5001), 1)],
                         ids=case_id)
def test_float16_sum_of_ones_accumulates_in_float32(case):
    shape, axis = case
    n = reduced_length(shape, axis)
    got = gk.sum(cupy.ones(shape, dtype=numpy.float16), axis=axis)
    want_shape = numpy_reduce("sum", numpy.ones(shape, numpy.float16), axis).shape
    assert got.dtype == numpy.float16 and got.shape == want_shape
    expected = numpy.float16(numpy.float32(n))  # 4096 (float16 accumulation stops at 2048)
    assert cupy.asnumpy(got).ravel().tolist() == [float(expected)] * got.size


@pytest.mark.parametrize("case", [((4, 1 << 22), 1), ((1 << 22, 4), 0)], ids=case_id)
def test_int32_sums_over_split_rows_are_exact(case, rng):
    shape, axis = case
    host = reference.random_array(shape, numpy.int32, rng)
    got = gk.sum(cupy.asarray(host), axis=axis)
    want = numpy.sum(host.astype(numpy.int64), axis=axis)
    assert got.dtype == numpy.int64 and got.shape == want.shape
    numpy.testing.assert_array_equal(cupy.asnumpy(got), want)


# --- windows that start anywhere: short rows and columns off the 16-byte boundary ----------------

def _offset_view(host_flat, offset: int, shape):
    """The same (shape) window of a NumPy buffer and of its copy on the GPU, ``offset`` elements
    in: the GPU view starts off the 16-byte boundary unless offset * itemsize is a multiple."""
    count = math.prod(shape)
    device_flat = cupy.asarray(host_flat)
    return (host_flat[offset:offset + count].reshape(shape),
            device_flat[offset:offset + count].reshape(shape))


@pytest.mark.parametrize("offset", [0, 1, 3])
@pytest.mark.parametrize("row", [1, 2, 3, 4, 8, 16])
@pytest.mark.parametrize("name, dtype", operation_dtype_pairs(operations=("sum", "max")))
def test_short_rows_back_to_back_at_any_offset(name, dtype, row, offset, rng):
    """Rows of up to 16 elements back to back (a thread per row), starting on or off a 16-byte
    boundary. 5000 rows: several blocks, the last one partial."""
    shape = (5000, row)
    host_flat = make_data(name, (math.prod(shape) + offset,), dtype, rng, row)
    host, x = _offset_view(host_flat, offset, shape)
    got = gk_reduce(name, x, 1)
    assert_reduction_matches(name, got, host, axis=1, context=f"offset {offset}")


@pytest.mark.parametrize("offset", [0, 1, 2])
@pytest.mark.parametrize("columns", [4, 6, 8, 260])
@pytest.mark.parametrize("name, dtype", operation_dtype_pairs(operations=("sum", "min")))
def test_column_groups_at_any_offset(name, dtype, columns, offset, rng):
    """Column reductions of windows that start on or off a 16-byte boundary, with widths that
    are and are not multiples of 4."""
    shape = (777, columns)
    host_flat = make_data(name, (math.prod(shape) + offset,), dtype, rng, shape[0])
    host, x = _offset_view(host_flat, offset, shape)
    got = gk_reduce(name, x, 0)
    assert_reduction_matches(name, got, host, axis=0, context=f"offset {offset}")
