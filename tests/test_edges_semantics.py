"""NumPy's semantics at the edges, for every rung: shape batteries (sizes 0, 1, primes, 2**k and
2**k +- 1 in every dimension, stacks, negative strides), result dtypes for every input dtype,
integer wrap-around, NaN and infinities, empty and 0-d inputs, ``out=`` overlapping an input,
accuracy, bitwise determinism, and property-based tests against NumPy.

The reductions NumPy has and gpukernels does not have yet (see edges_helpers.PENDING_REDUCTIONS)
are tested against NumPy's documented semantics and skip, naming the missing function, until
they exist.
"""

from __future__ import annotations

import itertools
import warnings

import numpy
import pytest

import gpukernels as gk
import references as reference
from edges_helpers import (
    ALL_DTYPES,
    ALL_REDUCTIONS,
    FLOAT_DTYPES,
    MATMUL_METHODS,
    NUMPY_REDUCTIONS,
    REDUCE_METHODS,
    REDUCTIONS,
    TRANSPOSE_METHODS,
    assert_reduction_matches,
    dtype_id,
    reduction,
    reduction_data,
    refused,
)
from gpukernels.validation import poisoned

cupy = pytest.importorskip("cupy")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

pytestmark = pytest.mark.gpu

REDUCE_METHODS_AND_AUTO = REDUCE_METHODS + ("auto",)


def refuses_complex(name: str, dtype) -> bool:
    """min and max of complex input: NumPy orders complex numbers lexicographically; gpukernels
    documents a TypeError instead (the one place its reductions differ from NumPy)."""
    return name in ("min", "max") and numpy.dtype(dtype).kind == "c"


# --- shape batteries ----------------------------------------------------------------------------

BATTERY_DIMS = [0, 1, 2, 3, 7, 31, 32, 33, 63, 64, 65, 127, 128, 129]
LONG_AND_THIN = [(4095, 3), (3, 4097), (65537, 2), (2, 65537), (65521, 5), (8191, 31), (31, 8191),
                 (1, 65535), (65535, 1)]


@pytest.mark.usefixtures("index_width")
@pytest.mark.parametrize("method", TRANSPOSE_METHODS)
def test_transpose_battery_of_sizes_in_every_dimension(method, rng):
    shapes = list(itertools.product(BATTERY_DIMS, repeat=2)) + LONG_AND_THIN
    for shape, dtype in zip(shapes, itertools.cycle([numpy.int8, numpy.float32, numpy.complex128])):
        host = reference.random_array((2,) + shape, dtype, rng)
        x = cupy.asarray(host)
        views = [("matrix", 0), ("reversed", (0, slice(None, None, -1), slice(None, None, -1))),
                 ("stack-reversed-batch", slice(None, None, -1))]
        for label, index in views:
            if refused("transpose", method, x[index]):
                continue
            want = reference.transpose(host[index])
            got = cupy.asnumpy(gk.transpose(x[index], method=method))
            assert got.dtype == want.dtype and got.shape == want.shape, (label, shape)
            assert got.tobytes() == want.tobytes(), f"{method} {dtype.__name__} {shape} {label}"


MATMUL_DIMS = [0, 1, 2, 31, 32, 33, 65]


@pytest.mark.usefixtures("index_width")
@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64], ids=dtype_id)
@pytest.mark.parametrize("method", MATMUL_METHODS)
def test_matmul_battery_of_sizes_in_every_dimension(method, dtype, rng):
    # Integer-valued data: every product is exact, so the result must equal NumPy's bit for bit.
    for number, (m, k, n) in enumerate(itertools.product(MATMUL_DIMS, repeat=3)):
        a = reference.random_array((2, m, k), dtype, rng, integer_valued=True)
        b = reference.random_array((2, k, n), dtype, rng, integer_valued=True)
        variant = ("b-transposed", "negative-strides", "reversed-batch")[number % 3]
        if variant == "b-transposed":  # b as the transpose of a C-contiguous (n, k) stack
            b_base = numpy.ascontiguousarray(numpy.swapaxes(b, -1, -2))
            views = (lambda xp, v: v), (lambda xp, v: xp.swapaxes(v, -1, -2))
            bases = a, b_base
        elif variant == "negative-strides":
            views = (lambda xp, v: v[:, ::-1, ::-1]), (lambda xp, v: v[:, ::-1, ::-1])
            bases = a, b
        else:
            views = (lambda xp, v: v[::-1]), (lambda xp, v: v[::-1])
            bases = a, b
        identity = (lambda xp, v: v), (lambda xp, v: v)
        for label, (a_view, b_view), (a_base, b_base) in (("contiguous", identity, (a, b)),
                                                          (variant, views, bases)):
            ha, hb = a_view(numpy, a_base), b_view(numpy, b_base)
            da, db = a_view(cupy, cupy.asarray(a_base)), b_view(cupy, cupy.asarray(b_base))
            got = cupy.asnumpy(gk.matmul(da, db, method=method))
            want = numpy.matmul(ha, hb)
            assert got.dtype == want.dtype and got.shape == want.shape, (label, m, k, n)
            numpy.testing.assert_array_equal(got, want, err_msg=f"{method} {m}x{k}x{n} {label}")


# --- result dtypes for every input dtype ----------------------------------------------------------

def small_integer_valued(shape, dtype, rng):
    """Values every dtype holds exactly: {0, 1} for bool, [0, 8] unsigned, [-8, 8] otherwise."""
    dtype = numpy.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    low = 0 if dtype.kind == "u" else -8
    return rng.integers(low, 9, size=shape).astype(dtype)


@pytest.mark.parametrize("method", MATMUL_METHODS + ("auto",))
def test_matmul_result_dtype_for_every_pair_of_dtypes(method, rng):
    # Small integer values: every dtype holds them and every result is exact (float16 too).
    for a_dtype, b_dtype in itertools.product(ALL_DTYPES, repeat=2):
        a = small_integer_valued((3, 5), a_dtype, rng)
        b = small_integer_valued((5, 4), b_dtype, rng)
        want = numpy.matmul(a, b)
        context = f"{method} {a_dtype} @ {b_dtype} -> NumPy {want.dtype}"
        if want.dtype.kind == "c":  # no complex kernels: a TypeError that says so
            with pytest.raises(TypeError, match="complex"):
                gk.matmul(cupy.asarray(a), cupy.asarray(b), method=method)
            continue
        got = gk.matmul(cupy.asarray(a), cupy.asarray(b), method=method)
        assert got.dtype == want.dtype, context
        numpy.testing.assert_array_equal(cupy.asnumpy(got), want, err_msg=context)


@pytest.mark.parametrize("dtype", [numpy.int8, numpy.int32, numpy.int64, numpy.uint8,
                                   numpy.uint64], ids=dtype_id)
@pytest.mark.parametrize("method", MATMUL_METHODS)
def test_matmul_integer_products_wrap_like_numpy(method, dtype, rng):
    a = reference.random_array((7, 33), dtype, rng)  # the full range: products overflow
    b = reference.random_array((33, 5), dtype, rng)
    got = gk.matmul(cupy.asarray(a), cupy.asarray(b), method=method)
    want = numpy.matmul(a, b)
    assert got.dtype == want.dtype
    numpy.testing.assert_array_equal(cupy.asnumpy(got), want)


PENDING_OPS = [name for name in ALL_REDUCTIONS if name != "sum"]  # test_sum.py covers sum


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("method", REDUCE_METHODS_AND_AUTO)
@pytest.mark.parametrize("name", PENDING_OPS)
def test_reduction_result_dtype_and_value_for_every_input_dtype(name, method, dtype, rng):
    op = reduction(name)
    for shape in [(), (1,), (10_007,), (3, 33, 17)]:
        host = reduction_data(name, shape, dtype, rng)
        if refuses_complex(name, dtype):
            with pytest.raises(TypeError, match="complex"):
                op(cupy.asarray(host), method=method)
            continue
        assert_reduction_matches(name, op(cupy.asarray(host), method=method), host,
                                 context=f"{name} {method} {dtype} {shape}")


@pytest.mark.parametrize("dtype", [numpy.int8, numpy.int32, numpy.int64, numpy.uint32,
                                   numpy.uint64], ids=dtype_id)
@pytest.mark.parametrize("method", REDUCE_METHODS_AND_AUTO)
def test_prod_wraps_around_like_numpy(method, dtype, rng):
    op = reduction("prod")
    host = reduction_data("prod", (100_003,), dtype, rng)  # odd factors: never wraps to 0
    got = op(cupy.asarray(host), method=method)
    want = numpy.prod(host)
    assert got.dtype == want.dtype and int(got) == int(want), (method, dtype)
    big = numpy.array([numpy.iinfo(dtype).max, 3, 5], dtype=dtype)
    assert int(op(cupy.asarray(big), method=method)) == int(numpy.prod(big))


# --- NaN and infinities ---------------------------------------------------------------------------

NAN_LENGTH = 1_000_003  # many blocks, and a partial last block


def nan_positions(n: int):
    """(label, positions) for NaNs: first, middle, last, one in every block of 256 elements at
    the block's first and at its last position, every element."""
    return [("first", [0]), ("middle", [n // 2]), ("last", [n - 1]),
            ("every-block-start", range(0, n, 256)), ("every-block-end", range(255, n, 256)),
            ("all", range(n))]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("method", REDUCE_METHODS_AND_AUTO)
@pytest.mark.parametrize("name", ALL_REDUCTIONS)
def test_nan_propagates_from_every_position(name, method, dtype, rng):
    op = reduction(name)
    base = reduction_data(name, (NAN_LENGTH,), dtype, rng)
    for label, positions in nan_positions(NAN_LENGTH):
        host = base.copy()
        host[numpy.asarray(positions)] = numpy.nan
        for view_label, index in (("", slice(None)), (" reversed", slice(None, None, -1))):
            got = op(cupy.asarray(host)[index], method=method)
            assert got.dtype == NUMPY_REDUCTIONS[name](host).dtype
            assert bool(cupy.isnan(got)), \
                f"{name} {method} {dtype} NaN at {label}{view_label}: {got}"
    for tiny in ([numpy.nan], [numpy.nan, numpy.inf], [-numpy.inf, numpy.nan], [1.0, numpy.nan]):
        got = op(cupy.asarray(numpy.array(tiny, dtype=dtype)), method=method)
        assert bool(cupy.isnan(got)), f"{name} {method} {tiny}: {got}"


INFINITY_CASES = [
    ("all-plus-inf", lambda n: numpy.full(n, numpy.inf)),
    ("all-minus-inf", lambda n: numpy.full(n, -numpy.inf)),
    ("ones-plus-inf-last", lambda n: numpy.concatenate([numpy.ones(n - 1), [numpy.inf]])),
    ("ones-minus-inf-first", lambda n: numpy.concatenate([[-numpy.inf], numpy.ones(n - 1)])),
    ("both-infinities",
     lambda n: numpy.concatenate([[numpy.inf], numpy.ones(n - 2), [-numpy.inf]])),
    ("inf-times-zero", lambda n: numpy.concatenate([[numpy.inf], numpy.zeros(n - 1)])),
    ("largest-finite", lambda n: numpy.full(n, numpy.finfo(numpy.float16).max)),
]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("method", REDUCE_METHODS_AND_AUTO)
@pytest.mark.parametrize("name", ALL_REDUCTIONS)
def test_infinities_follow_numpy(name, method, dtype):
    op = reduction(name)
    for n in (1, 2, 257, 100_001):
        for label, make in INFINITY_CASES:
            if n < 2 and label in ("both-infinities", "inf-times-zero"):
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # inf - inf, inf * 0, overflow
                host = make(n).astype(dtype)
                want = NUMPY_REDUCTIONS[name](host)
            got = cupy.asnumpy(op(cupy.asarray(host), method=method))
            assert got.dtype == want.dtype
            if numpy.isfinite(want):
                assert_reduction_matches(name, cupy.asarray(got), host, context=label)
            else:
                numpy.testing.assert_array_equal(got, want,
                                                 err_msg=f"{name} {method} {label} n={n}")


@pytest.mark.parametrize("dtype", [d for d in ALL_DTYPES if d.kind in "biu"], ids=dtype_id)
@pytest.mark.parametrize("method", REDUCE_METHODS_AND_AUTO)
@pytest.mark.parametrize("name", ["min", "max"])
def test_min_max_of_the_integer_extremes(name, method, dtype):
    # A wrong identity (e.g. 0, or a signed limit for an unsigned type) shows here.
    op = reduction(name)
    if dtype.kind == "b":
        extremes = [False, True]
    else:
        extremes = [numpy.iinfo(dtype).min, numpy.iinfo(dtype).max]
    for value in extremes:
        for n in (1, 255, 256, 257, 1_000_003):
            host = numpy.full(n, value, dtype=dtype)
            got = op(cupy.asarray(host), method=method)
            assert got.dtype == dtype and got == host[0], f"{name} {method} {n} x {value}: {got}"


# --- empty and 0-d inputs -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("method", REDUCE_METHODS_AND_AUTO)
@pytest.mark.parametrize("name", PENDING_OPS)
def test_empty_reductions_follow_numpy(name, method, dtype):
    op = reduction(name)
    for shape in [(0,), (3, 0), (0, 4, 5)]:
        x = cupy.zeros(shape, dtype=dtype)
        host = numpy.zeros(shape, dtype=dtype)
        if name in ("min", "max"):  # no identity: NumPy raises ValueError
            with pytest.raises(ValueError):
                NUMPY_REDUCTIONS[name](host)
            with pytest.raises((ValueError, TypeError) if refuses_complex(name, dtype)
                               else ValueError):
                op(x, method=method)
            with pytest.raises((ValueError, TypeError) if refuses_complex(name, dtype)
                               else ValueError):
                op(x, keepdims=True, method=method)
            continue
        want = NUMPY_REDUCTIONS[name](host)  # prod: 1, in NumPy's result dtype
        got = op(x, method=method)
        assert got.shape == () and got.dtype == want.dtype and cupy.asnumpy(got) == want, shape
        kept = op(x, keepdims=True, method=method)
        assert kept.shape == NUMPY_REDUCTIONS[name](host, keepdims=True).shape
        assert bool((kept == 1).all()), shape


@pytest.mark.parametrize("method", REDUCE_METHODS_AND_AUTO)
@pytest.mark.parametrize("name", PENDING_OPS)
def test_reductions_over_an_empty_axis_follow_numpy(name, method):
    op = reduction(name)
    x = cupy.zeros((3, 0), dtype=numpy.float32)
    host = numpy.zeros((3, 0), dtype=numpy.float32)
    for axis in (1, -1):
        try:
            want = NUMPY_REDUCTIONS[name](host, axis=axis)
        except ValueError:
            with pytest.raises(ValueError):
                op(x, axis=axis, method=method)
            continue
        got = op(x, axis=axis, method=method)
        numpy.testing.assert_array_equal(cupy.asnumpy(got), want)
    # Reducing the non-empty axis leaves an empty result, which is not an error.
    got = op(x, axis=0, method=method)
    assert got.shape == (0,)


# --- out= -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [numpy.int64, numpy.float64, numpy.float32], ids=dtype_id)
@pytest.mark.parametrize("method", REDUCE_METHODS_AND_AUTO)
@pytest.mark.parametrize("name", ALL_REDUCTIONS)
def test_reduction_into_an_element_of_its_own_input(name, method, dtype, rng):
    op = reduction(name)
    host = reduction_data(name, (300_007,), dtype, rng)
    for position in (0, 150_000, 300_006):
        x = cupy.asarray(host)
        out = x[position]  # a 0-d view into the input
        assert op(x, out=out, method=method) is out
        assert_reduction_matches(name, out, host, context=f"{name} {method} out=x[{position}]")
        rest = numpy.delete(cupy.asnumpy(x), position)
        numpy.testing.assert_array_equal(rest, numpy.delete(host, position))


@pytest.mark.parametrize("method", REDUCE_METHODS_AND_AUTO)
@pytest.mark.parametrize("name", ALL_REDUCTIONS)
def test_reduction_out_dtype_casting_follows_numpy(name, method, rng):
    op = reduction(name)
    for in_dtype, out_dtype in itertools.product(
            [numpy.float64, numpy.int32, numpy.bool_, numpy.complex64],
            [numpy.float32, numpy.int8, numpy.uint64, numpy.bool_, numpy.complex128]):
        if refuses_complex(name, in_dtype):
            continue
        # Small non-negative results, so every cast is defined (no float -> int overflow).
        host = numpy.zeros(1001, dtype=in_dtype)
        host[:5] = small_integer_valued((5,), numpy.uint8, rng)
        if name == "prod":
            host[2:] = 1
        host_out = numpy.zeros((), dtype=out_dtype)
        out = poisoned((), out_dtype)
        context = f"{name} {method} {numpy.dtype(in_dtype)} into {numpy.dtype(out_dtype)}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ComplexWarning for complex -> real
            try:
                NUMPY_REDUCTIONS[name](host, out=host_out)
            except TypeError:
                with pytest.raises(TypeError):
                    op(cupy.asarray(host), out=out, method=method)
                continue
            assert op(cupy.asarray(host), out=out, method=method) is out, context
        numpy.testing.assert_array_equal(cupy.asnumpy(out), host_out, err_msg=context)


@pytest.mark.parametrize("dtype", [numpy.uint8, numpy.uint16, numpy.float32, numpy.float64,
                                   numpy.complex128], ids=dtype_id)
@pytest.mark.parametrize("method", TRANSPOSE_METHODS)
def test_transpose_between_arrays_at_every_element_offset(method, dtype, rng):
    # Input and out= are C-contiguous slices that start a few elements into a buffer: aligned as
    # their dtype requires, and no more. The shapes are multiples of 16, so rungs that move wide
    # words apply; each shape goes through aligned and offset arrays in turn, so a launch
    # planned for one alignment must not be reused for another.
    for shape in [(64, 96), (32, 48)]:
        host = reference.random_array(shape, dtype, rng)
        want = numpy.ascontiguousarray(host.T).tobytes()
        size = host.size
        for in_offset, out_offset in [(0, 0), (0, 1), (1, 0), (0, 0), (3, 2), (2, 3), (0, 0),
                                      (5, 7)]:
            source = cupy.zeros(size + 8, dtype=dtype)
            source[in_offset:in_offset + size] = cupy.asarray(host).reshape(-1)
            x = source[in_offset:in_offset + size].reshape(shape)
            buffer = poisoned((size + 8,), dtype)
            out = buffer[out_offset:out_offset + size].reshape(shape[::-1])
            context = f"{method} {shape} input at +{in_offset}, out at +{out_offset} elements"
            if refused("transpose", method, x, out=out):
                break
            assert gk.transpose(x, method=method, out=out) is out, context
            assert cupy.asnumpy(out).tobytes() == want, context
            rest = cupy.asnumpy(buffer)
            rest = numpy.concatenate([rest[:out_offset], rest[out_offset + size:]])
            assert set(rest.tobytes()) == {0xFF}, f"{context}: wrote outside out"


# --- bools that are not 0 or 1 --------------------------------------------------------------------

@pytest.mark.parametrize("method", REDUCE_METHODS_AND_AUTO)
@pytest.mark.parametrize("name", ALL_REDUCTIONS)
def test_reductions_of_bool_views_of_arbitrary_bytes(name, method, rng):
    # NumPy reads any nonzero byte of a bool array as True.
    op = reduction(name)
    raw = rng.integers(0, 256, size=10_007, dtype=numpy.uint8)
    raw[rng.integers(0, raw.size, size=1000)] = 0
    for host_bytes in (raw, numpy.array([0, 2, 255, 128], dtype=numpy.uint8)):
        host = host_bytes.view(numpy.bool_)
        got = op(cupy.asarray(host_bytes).view(cupy.bool_), method=method)
        want = numpy.asarray(NUMPY_REDUCTIONS[name](host))
        got = cupy.asnumpy(got)
        assert got.dtype == want.dtype
        assert got.item() == want.item(), f"{name} {method}: got {got}, want {want}"
        # bit for bit: a bool result holds 0 or 1, as NumPy's does
        assert got.tobytes() == want.tobytes(), f"{name} {method}: {got.tobytes()!r}"


# --- accuracy -------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype, n", [(numpy.float16, 100_003), (numpy.float32, 2**22 + 1),
                                      (numpy.complex64, 2**22 + 1), (numpy.float64, 2**22 + 1)],
                         ids=["float16", "float32", "complex64", "float64"])
@pytest.mark.parametrize("method", REDUCE_METHODS_AND_AUTO)
def test_sums_of_positive_values_stay_within_the_error_bound(method, dtype, n, rng):
    # Positive terms: no cancellation hides a long sequential chain of float32 additions.
    real = numpy.dtype(dtype).char.lower()
    host = rng.uniform(0.0, 0.5, size=n).astype(real)
    if numpy.dtype(dtype).kind == "c":
        host = (host + 1j * rng.uniform(0.0, 0.5, size=n).astype(real)).astype(dtype)
    assert_reduction_matches("sum", gk.sum(cupy.asarray(host), method=method), host,
                             context=f"{method} {numpy.dtype(dtype)} n={n}")


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64], ids=dtype_id)
@pytest.mark.parametrize("method", MATMUL_METHODS)
def test_matmul_long_dot_products(method, dtype, rng):
    for integer_valued in (False, True):
        a = reference.random_array((33, 4097), dtype, rng, integer_valued=integer_valued)
        b = reference.random_array((4097, 31), dtype, rng, integer_valued=integer_valued)
        got = cupy.asnumpy(gk.matmul(cupy.asarray(a), cupy.asarray(b), method=method))
        want = reference.matmul(a, b)
        if integer_valued:
            numpy.testing.assert_array_equal(got, want)
        else:
            error = numpy.abs(got - want)
            assert numpy.all(error <= reference.matmul_error_bound(a, b, dtype)), error.max()


# --- determinism ----------------------------------------------------------------------------------

DETERMINISM_CASES = [(name, numpy.dtype(dtype)) for name in ALL_REDUCTIONS
                     for dtype in (numpy.float16, numpy.float32, numpy.float64, numpy.complex64,
                                   numpy.complex128)
                     if (name, dtype) != ("sum", numpy.float32)  # test_sum.py has that one
                     and not refuses_complex(name, dtype)]


@pytest.mark.parametrize("name, dtype", DETERMINISM_CASES,
                         ids=[f"{n}-{d}" for n, d in DETERMINISM_CASES])
@pytest.mark.parametrize("method", REDUCE_METHODS_AND_AUTO)
def test_reductions_are_bitwise_deterministic(name, method, dtype, rng):
    op = reduction(name)
    for n in (1000, 1_000_003):
        x = cupy.asarray(reduction_data(name, (n,), dtype, rng))
        first = cupy.asnumpy(op(x, method=method)).tobytes()
        for repeat in range(19):
            again = cupy.asnumpy(op(x, method=method)).tobytes()
            assert again == first, f"{name} {method} {dtype} n={n}: repeat {repeat + 1} differs"


@pytest.mark.parametrize("method", REDUCE_METHODS_AND_AUTO)
@pytest.mark.parametrize("name", ALL_REDUCTIONS)
def test_axis_reductions_are_bitwise_deterministic(name, method, rng):
    op = reduction(name)
    x = cupy.asarray(reduction_data(name, (1000, 1001), numpy.float32, rng))
    for axis in (0, 1):
        first = cupy.asnumpy(op(x, axis=axis, method=method)).tobytes()
        for _ in range(19):
            assert cupy.asnumpy(op(x, axis=axis, method=method)).tobytes() == first, (name, axis)


# --- property-based tests -------------------------------------------------------------------------

SETTINGS = settings(max_examples=60, deadline=None)
MAX_ELEMENTS = 200_000


def capped(shape):
    shape = list(shape)
    while numpy.prod(shape, dtype=numpy.int64) > MAX_ELEMENTS:
        shape[shape.index(max(shape))] //= 2
    return tuple(shape)


reduction_shapes = st.lists(st.integers(0, 600), min_size=0, max_size=4).map(capped)
VIEWS = {
    "contiguous": lambda v: v,
    "reversed": lambda v: v[::-1] if v.ndim else v,
    "step-2": lambda v: v[::2] if v.ndim else v,
    "swapped": lambda v: v.swapaxes(0, -1) if v.ndim > 1 else v,
}


@SETTINGS
@given(name=st.sampled_from(REDUCTIONS), shape=reduction_shapes, dtype=st.sampled_from(ALL_DTYPES),
       method=st.sampled_from(REDUCE_METHODS_AND_AUTO), view=st.sampled_from(sorted(VIEWS)),
       seed=st.integers(0, 2**63 - 1))
def test_reduction_property(name, shape, dtype, method, view, seed):
    base = reduction_data(name, shape, dtype, numpy.random.default_rng(seed))
    host, x = VIEWS[view](base), VIEWS[view](cupy.asarray(base))
    context = f"{name} {method} {dtype} {shape} {view} seed={seed}"
    op = getattr(gk, name)
    if refuses_complex(name, dtype):
        with pytest.raises(TypeError):
            op(x, method=method)
        return
    try:
        NUMPY_REDUCTIONS[name](host)
    except ValueError:  # min/max of an empty array
        with pytest.raises(ValueError):
            op(x, method=method)
        return
    assert_reduction_matches(name, op(x, method=method), host, context=context)


@SETTINGS
@given(name=st.sampled_from(REDUCTIONS), shape=st.lists(st.integers(1, 40), min_size=1,
                                                       max_size=4).map(capped),
       dtype=st.sampled_from([numpy.int32, numpy.uint8, numpy.float32, numpy.float64,
                              numpy.complex64, numpy.bool_]),
       method=st.sampled_from(REDUCE_METHODS_AND_AUTO), keepdims=st.booleans(), data=st.data(),
       seed=st.integers(0, 2**63 - 1))
def test_axis_reduction_property(name, shape, dtype, method, keepdims, data, seed):
    axes = data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), max_size=len(shape),
                              unique_by=lambda axis: axis % len(shape)).map(tuple))
    host = reduction_data(name, shape, dtype, numpy.random.default_rng(seed))
    if refuses_complex(name, dtype):
        with pytest.raises(TypeError):
            getattr(gk, name)(cupy.asarray(host), axis=axes, method=method)
        return
    got = getattr(gk, name)(cupy.asarray(host), axis=axes, keepdims=keepdims, method=method)
    assert_reduction_matches(name, got, host, axis=axes, keepdims=keepdims,
                             context=f"{name} {method} {shape} axis={axes} seed={seed}")


@SETTINGS
@given(m=st.integers(0, 70), k=st.integers(0, 70), n=st.integers(0, 70),
       a_batch=st.sampled_from([(), (1,), (3,), (2, 1)]), b_batch=st.sampled_from([(), (1,), (3,)]),
       dtype=st.sampled_from([numpy.float32, numpy.float64]),
       method=st.sampled_from(MATMUL_METHODS + ("auto",)),
       a_view=st.sampled_from(["contiguous", "transposed", "reversed"]),
       b_view=st.sampled_from(["contiguous", "transposed", "reversed"]),
       seed=st.integers(0, 2**63 - 1))
def test_matmul_views_and_broadcasting_property(m, k, n, a_batch, b_batch, dtype, method, a_view,
                                                b_view, seed):
    rng = numpy.random.default_rng(seed)

    def make(batch, rows, cols, view):
        if view == "transposed":  # the transpose of a C-contiguous (cols, rows) array
            base = reference.random_array(batch + (cols, rows), dtype, rng, integer_valued=True)
            return base, lambda v: v.swapaxes(-1, -2)
        base = reference.random_array(batch + (rows, cols), dtype, rng, integer_valued=True)
        return base, (lambda v: v[..., ::-1, ::-1]) if view == "reversed" else (lambda v: v)

    a_base, a_of = make(a_batch, m, k, a_view)
    b_base, b_of = make(b_batch, k, n, b_view)
    ha, hb = a_of(a_base), b_of(b_base)
    got = cupy.asnumpy(gk.matmul(a_of(cupy.asarray(a_base)), b_of(cupy.asarray(b_base)),
                                 method=method))
    want = numpy.matmul(ha, hb)
    assert got.dtype == want.dtype and got.shape == want.shape
    numpy.testing.assert_array_equal(got, want, err_msg=f"{method} {ha.shape}@{hb.shape} "
                                                        f"{a_view}/{b_view} seed={seed}")
