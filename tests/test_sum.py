"""gk.sum on the GPU: every rung and dtype, NumPy's result dtypes, wrap-around, axes, out=."""

from __future__ import annotations

import warnings

import numpy
import pytest

import gpukernels as gk
import references as reference
from gpukernels.validation import poisoned

cupy = pytest.importorskip("cupy")

pytestmark = pytest.mark.gpu

METHODS = gk.methods("sum") + ("auto",)
DTYPES = [numpy.dtype(t) for t in (
    numpy.bool_, numpy.int8, numpy.int16, numpy.int32, numpy.int64, numpy.uint8, numpy.uint16,
    numpy.uint32, numpy.uint64, numpy.float16, numpy.float32, numpy.float64, numpy.complex64,
    numpy.complex128)]
FLOAT_DTYPES = [d for d in DTYPES if d.kind in "fc"]
SHAPES = [(1,), (255,), (256,), (257,), (10**6 + 3,), (31, 37), (2, 3, 33, 17)]


def shape_id(shape):
    return "x".join(map(str, shape))


def assert_sum_matches(got, host, *, dtype=None, exact=False, context=""):
    """``got`` (GPU) against NumPy's sum of ``host``: its dtype, and its value exactly for
    integer results (and ``exact``), else within reference.sum_error_bound."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", numpy.exceptions.ComplexWarning)
        want_dtype = numpy.sum(host, dtype=dtype).dtype
        want, result_dtype = reference.sum(host, dtype=dtype)
    assert result_dtype == want_dtype
    got = cupy.asnumpy(got)
    assert got.dtype == want_dtype, context
    assert got.shape == (), context
    if want_dtype.kind in "biu":
        assert got == want, f"{context}: got {got!r}, want {want!r}"
    elif exact:  # exact accumulation, then one rounding to the result dtype
        assert got == numpy.asarray(want).astype(want_dtype), f"{context}: got {got!r}, want {want!r}"
    else:
        bound = reference.sum_error_bound(host, want_dtype)
        error = abs(complex(got) - complex(want))
        assert error <= bound, f"{context}: got {got!r}, want {want!r}, error {error:.3g} > {bound:.3g}"


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("method", METHODS)
def test_sum_matches_numpy(method, dtype, shape, rng):
    host = reference.random_array(shape, dtype, rng)
    x = cupy.asarray(host)
    context = f"{method} {dtype} {shape}"
    result_dtype = numpy.sum(host).dtype

    out = poisoned((), result_dtype)
    got = gk.sum(x, method=method, out=out)
    assert got is out
    assert_sum_matches(got, host, context=context + " out=")

    assert_sum_matches(gk.sum(x, method=method), host, context=context)


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("method", METHODS)
def test_sum_integer_valued_floats_are_exact(method, dtype, shape, rng):
    host = reference.random_array(shape, dtype, rng, integer_valued=True)
    assert_sum_matches(gk.sum(cupy.asarray(host), method=method), host, exact=True,
                       context=f"{method} {dtype} {shape}")


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", [numpy.int64, numpy.uint64, numpy.int32, numpy.uint32],
                         ids=str)
def test_sum_wraps_around_like_numpy(method, dtype, rng):
    info = numpy.iinfo(dtype)
    offsets = rng.integers(0, 1000, size=100_003).astype(dtype)
    host = numpy.full(offsets.shape, info.max, dtype=dtype) - offsets  # near the maximum
    assert_sum_matches(gk.sum(cupy.asarray(host), method=method), host, context=method)
    negative = numpy.full(4099, info.min, dtype=dtype) + offsets[:4099]
    assert_sum_matches(gk.sum(cupy.asarray(negative), method=method), negative, context=method)


@pytest.mark.parametrize("method", METHODS)
def test_sum_int64_overflow_exact_value(method):
    big = numpy.iinfo(numpy.int64).max
    got = gk.sum(cupy.asarray(numpy.array([big, big, 3], dtype=numpy.int64)), method=method)
    assert got.dtype == numpy.int64 and int(got) == 1  # 2 * (2**63 - 1) + 3 wraps to 1


@pytest.mark.parametrize("method", METHODS)
def test_sum_uint8_does_not_wrap_at_8_bits(method):
    host = numpy.full(100_003, 255, dtype=numpy.uint8)
    got = gk.sum(cupy.asarray(host), method=method)
    assert got.dtype == numpy.uint64 and int(got) == 255 * 100_003


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype, requested", [
    (numpy.int32, numpy.int32), (numpy.int8, numpy.int8), (numpy.uint8, numpy.uint8),
    (numpy.int64, numpy.int32), (numpy.bool_, numpy.bool_), (numpy.int16, numpy.uint16),
    (numpy.uint64, numpy.int64),
], ids=lambda d: numpy.dtype(d).name)
def test_sum_dtype_argument_wraps_like_numpy(method, dtype, requested, rng):
    host = reference.random_array((10_007,), dtype, rng)
    got = gk.sum(cupy.asarray(host), dtype=requested, method=method)
    assert got.dtype == numpy.sum(host, dtype=requested).dtype
    assert got == numpy.sum(host, dtype=requested), f"{method} {dtype} -> {requested}"


@pytest.mark.parametrize("method", METHODS)
def test_sum_int32_with_dtype_int32_overflows(method):
    host = numpy.full(3, 2**30, dtype=numpy.int32)
    got = gk.sum(cupy.asarray(host), dtype=numpy.int32, method=method)
    assert got.dtype == numpy.int32 and int(got) == int(numpy.sum(host, dtype=numpy.int32))
    assert int(got) == 3 * 2**30 - 2**32
    assert int(gk.sum(cupy.asarray(host), method=method)) == 3 * 2**30  # int64 by default


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype, requested, exact", [
    (numpy.float32, numpy.float64, False), (numpy.float16, numpy.float32, False),
    (numpy.float64, numpy.float32, False), (numpy.int32, numpy.float64, False),
    (numpy.int8, numpy.float16, False), (numpy.complex64, numpy.complex128, False),
    (numpy.float32, numpy.complex64, False), (numpy.float32, numpy.int8, True),
], ids=lambda d: d if isinstance(d, bool) else numpy.dtype(d).name)
def test_sum_dtype_argument_floats(method, dtype, requested, exact, rng):
    host = reference.random_array((100_003,), dtype, rng, integer_valued=exact)
    if numpy.dtype(dtype).kind in "iu":
        host = rng.integers(-8, 9, size=100_003).astype(dtype)
    got = gk.sum(cupy.asarray(host), dtype=requested, method=method)
    assert_sum_matches(got, host, dtype=requested, exact=exact,
                       context=f"{method} {numpy.dtype(dtype)} dtype={numpy.dtype(requested)}")


@pytest.mark.parametrize("method", METHODS)
def test_sum_float16_4096_ones(method):
    got = gk.sum(cupy.ones(4096, dtype=numpy.float16), method=method)
    assert got.dtype == numpy.float16 and float(got) == 4096.0  # float16 accumulation gives 2048
    for n in (2049, 5001):
        host = numpy.ones(n, dtype=numpy.float16)
        got = gk.sum(cupy.asarray(host), method=method)
        assert got.dtype == numpy.float16 and got == numpy.float16(numpy.float32(n)), n


@pytest.mark.parametrize("method", METHODS)
def test_sum_nan_and_inf_propagate(method):
    x = cupy.ones(10_000, dtype=numpy.float32)
    x[1234] = numpy.nan
    assert bool(cupy.isnan(gk.sum(x, method=method)))
    x[1234] = numpy.inf
    assert float(gk.sum(x, method=method)) == numpy.inf
    x[4321] = -numpy.inf
    assert bool(cupy.isnan(gk.sum(x, method=method)))
    z = cupy.ones(300, dtype=numpy.complex64)
    z[7] = complex(0, numpy.nan)
    assert bool(cupy.isnan(gk.sum(z, method=method).imag))


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4, 5)], ids=shape_id)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("method", METHODS)
def test_sum_empty_is_zero(method, dtype, shape):
    x = cupy.zeros(shape, dtype=dtype)
    got = gk.sum(x, method=method)
    want = numpy.sum(numpy.zeros(shape, dtype=dtype))
    assert got.shape == () and got.dtype == want.dtype and cupy.asnumpy(got) == 0
    out = poisoned((), want.dtype)
    assert gk.sum(x, method=method, out=out) is out and cupy.asnumpy(out) == 0
    kept = gk.sum(x, keepdims=True, method=method)
    assert kept.shape == numpy.sum(numpy.zeros(shape, dtype), keepdims=True).shape
    assert bool((kept == 0).all())


def test_sum_empty_axis_leaves_zeros():
    got = gk.sum(cupy.zeros((3, 0), numpy.int32), axis=1)
    want = numpy.sum(numpy.zeros((3, 0), numpy.int32), axis=1)
    assert got.shape == want.shape and got.dtype == want.dtype
    numpy.testing.assert_array_equal(cupy.asnumpy(got), want)


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.int8, numpy.bool_, numpy.complex128],
                         ids=str)
@pytest.mark.parametrize("method", METHODS)
def test_sum_zero_dimensional(method, dtype):
    host = numpy.asarray(numpy.array(3, dtype=numpy.int8).astype(dtype))
    got = gk.sum(cupy.asarray(host), method=method)
    assert got.shape == () and got.dtype == numpy.sum(host).dtype and got == numpy.sum(host)


AXES = [
    ((3, 5), None, False), ((3, 5), None, True), ((3, 5), (0, 1), False), ((3, 5), (-1, 0), True),
    ((1, 1000), 1, False), ((1, 1000), 1, True), ((1, 1000), -1, False), ((1000, 1), 0, True),
    ((1, 1), (), False), ((2, 1, 3), (0, 2), False), ((2, 1, 3), (0, 2), True),
    ((1, 1, 7), 2, False), ((4,), 0, True),
    ((3, 5), (), False), ((3, 1, 5), 1, False), ((3, 1, 5), 1, True),  # sums over length-1 axes
]


@pytest.mark.parametrize("shape, axis, keepdims", AXES,
                         ids=[f"{shape_id(s)}-axis{a}-keep{k}" for s, a, k in AXES])
@pytest.mark.parametrize("method", METHODS)
def test_sum_axis_and_keepdims(method, shape, axis, keepdims, rng):
    host = reference.random_array(shape, numpy.int32, rng)
    got = gk.sum(cupy.asarray(host), axis=axis, keepdims=keepdims, method=method)
    want = numpy.sum(host, axis=axis, keepdims=keepdims)
    assert got.shape == want.shape and got.dtype == want.dtype
    numpy.testing.assert_array_equal(cupy.asnumpy(got), want)
    out = poisoned(want.shape, want.dtype)
    assert gk.sum(cupy.asarray(host), axis=axis, keepdims=keepdims, method=method, out=out) is out
    numpy.testing.assert_array_equal(cupy.asnumpy(out), want)


def test_sum_axis_errors(rng):
    x = cupy.asarray(reference.random_array((5, 7), numpy.float32, rng))
    with pytest.raises(numpy.exceptions.AxisError):
        gk.sum(x, axis=-3)
    with pytest.raises(numpy.exceptions.AxisError):
        gk.sum(x, axis=2)
    with pytest.raises(ValueError):
        gk.sum(x, axis=(0, -2))
    with pytest.raises(TypeError):
        gk.sum(x, axis=1.0)
    # The same after axis=1 has been planned and cached for this layout (1.0 == 1 as a key).
    gk.sum(x, axis=1)
    gk.sum(x, axis=(0, 1))
    for axis in (1.0, (0, 1.0), numpy.float32(1)):
        with pytest.raises(TypeError):
            gk.sum(x, axis=axis)
    row_sum = float(gk.sum(x, axis=numpy.int64(1))[0])
    assert row_sum == pytest.approx(float(cupy.sum(x[0])), rel=1e-5, abs=1e-5)
    host = cupy.asnumpy(x)
    assert_sum_matches(gk.sum(x), host)  # still usable


def test_sum_out_with_cast(rng):
    host = reference.random_array((10_001,), numpy.int32, rng)
    out = poisoned((), numpy.float64)
    assert gk.sum(cupy.asarray(host), out=out) is out
    assert float(out) == float(int(numpy.sum(host)))
    host = reference.random_array((10_001,), numpy.float32, rng)
    out = poisoned((), numpy.float64)
    assert gk.sum(cupy.asarray(host), out=out) is out
    bound = reference.sum_error_bound(host, numpy.float32)
    assert abs(float(out) - float(numpy.sum(host.astype(numpy.float64)))) <= bound
    host = numpy.full(1000, 100, dtype=numpy.int8)
    out = poisoned((), numpy.int8)  # casting is unsafe for sum's out=, as in NumPy: wraps
    assert gk.sum(cupy.asarray(host), out=out) is out
    assert int(out) == int(numpy.sum(host).astype(numpy.int8))
    out = poisoned((1,), numpy.int64)
    assert gk.sum(cupy.asarray(host), keepdims=True, out=out) is out
    assert int(out[0]) == 100_000


def test_sum_out_errors(rng):
    x = cupy.asarray(reference.random_array((100,), numpy.float32, rng))
    with pytest.raises(ValueError):
        gk.sum(x, out=cupy.empty((1,), numpy.float32))
    with pytest.raises(ValueError):
        gk.sum(x, keepdims=True, out=cupy.empty((), numpy.float32))
    with pytest.raises(TypeError):
        gk.sum(x, out=numpy.empty((), numpy.float32))
    assert_sum_matches(gk.sum(x), cupy.asnumpy(x))


# Views taken the same way on NumPy and CuPy arrays.
VIEWS = [
    ("step", lambda xp, v: v.reshape(-1)[::3]),
    ("reversed", lambda xp, v: v.reshape(-1)[::-1]),
    ("transposed", lambda xp, v: v.T),
    ("2d-steps", lambda xp, v: v[::2, ::-3]),
    ("offset", lambda xp, v: v[7:, 3:-1]),
    ("broadcast-2d", lambda xp, v: xp.broadcast_to(v[:1], (1000, v.shape[1]))),
    # 10_000 copies: a float16 sum stays below float16's maximum (65504).
    ("broadcast-1d-stride0", lambda xp, v: xp.broadcast_to(v[0, :1], (10_000,))),
]


@pytest.mark.parametrize("view", [f for _, f in VIEWS], ids=[n for n, _ in VIEWS])
@pytest.mark.parametrize("dtype", [numpy.int64, numpy.uint8, numpy.float32, numpy.float16,
                                   numpy.complex128], ids=str)
@pytest.mark.parametrize("method", METHODS)
def test_sum_non_contiguous_input(method, dtype, view, rng):
    base = reference.random_array((300, 61), dtype, rng)
    host = view(numpy, base)
    x = view(cupy, cupy.asarray(base))
    assert x.shape == host.shape and x.strides == host.strides
    assert_sum_matches(gk.sum(x, method=method), host, context=f"{method} {x.strides}")


@pytest.mark.parametrize("method", METHODS)
def test_sum_is_deterministic(method, rng):
    x = cupy.asarray(reference.random_array((10**6,), numpy.float32, rng))
    first = cupy.asnumpy(gk.sum(x, method=method))
    for _ in range(19):
        again = cupy.asnumpy(gk.sum(x, method=method))
        assert again.tobytes() == first.tobytes(), (again, first)


def test_sum_invalid_method_leaves_library_usable(rng):
    host = reference.random_array((1000,), numpy.int16, rng)
    x = cupy.asarray(host)
    with pytest.raises(ValueError, match="bogus"):
        gk.sum(x, method="bogus")
    with pytest.raises(ValueError):
        gk.sum(x, method="naive")  # a rung of another ladder
    with pytest.raises(TypeError):
        gk.sum(x, method=None)
    for method in METHODS:
        assert_sum_matches(gk.sum(x, method=method), host)


def test_sum_object_dtype_argument_raises_type_error():
    x = cupy.ones(10, numpy.float32)
    with pytest.raises(TypeError):
        gk.sum(x, dtype=object)


def test_sum_unsupported_dtype_argument():
    x = cupy.ones(10, numpy.float32)
    for requested in (numpy.longdouble, "datetime64[s]", str):
        if numpy.dtype(requested) == numpy.float64:
            continue  # longdouble is float64 on some platforms
        with pytest.raises(TypeError):
            gk.sum(x, dtype=requested)
    assert float(gk.sum(x)) == 10.0


@pytest.mark.parametrize("method", METHODS)
def test_sum_respects_current_stream(method, rng):
    host = reference.random_array((1_000_003,), numpy.int32, rng)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        got = gk.sum(cupy.asarray(host), method=method)
        value = cupy.asnumpy(got, stream=stream)
    stream.synchronize()
    assert value == numpy.sum(host)
