"""Property tests: random shapes, dtypes and rungs against NumPy (hypothesis)."""

from __future__ import annotations

import math

import numpy
import pytest

import gpukernels as gk
import references as reference
from edges_helpers import MATMUL_METHODS, refused

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

cupy = pytest.importorskip("cupy")

pytestmark = pytest.mark.gpu

SETTINGS = settings(max_examples=50, deadline=None)
MAX_ELEMENTS = 250_000

ALL_DTYPES = [numpy.dtype(t) for t in (
    numpy.bool_, numpy.int8, numpy.int16, numpy.int32, numpy.int64, numpy.uint8, numpy.uint16,
    numpy.uint32, numpy.uint64, numpy.float16, numpy.float32, numpy.float64, numpy.complex64,
    numpy.complex128)]
INT_DTYPES = [d for d in ALL_DTYPES if d.kind in "biu"]
seeds = st.integers(0, 2**63 - 1)


def capped(shape):
    """Halve the largest leading dimension until the array is small enough for a host check."""
    shape = list(shape)
    while math.prod(shape) > MAX_ELEMENTS:
        lead = max(range(len(shape) - 2 if len(shape) > 2 else len(shape)), key=lambda i: shape[i])
        shape[lead] //= 2
    return tuple(shape)


transpose_shapes = st.lists(st.integers(0, 70), min_size=2, max_size=4).map(capped)


@SETTINGS
@given(shape=transpose_shapes, dtype=st.sampled_from(ALL_DTYPES),
       method=st.sampled_from(gk.methods("transpose") + ("auto",)),
       view=st.sampled_from(["contiguous", "reversed", "swapped"]), seed=seeds)
def test_transpose_property(shape, dtype, method, view, seed):
    host = reference.random_array(shape, dtype, numpy.random.default_rng(seed))
    x = cupy.asarray(host)
    if view == "reversed":
        host, x = host[..., ::-1, :], x[..., ::-1, :]
    elif view == "swapped":
        host, x = numpy.swapaxes(host, -1, -2), cupy.swapaxes(x, -1, -2)
    if refused("transpose", method, x):
        return
    got = cupy.asnumpy(gk.transpose(x, method=method))
    want = reference.transpose(host)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), f"{method} {dtype} {shape} {view} seed={seed}"


# The SIMT rungs take float32 and float64 as they are (the tensor-core rung: TF32, when asked).
SIMT_MATMUL = MATMUL_METHODS


@SETTINGS
@given(m=st.integers(0, 80), k=st.integers(0, 80), n=st.integers(0, 80),
       batch=st.sampled_from([(), (1,), (3,)]), dtype=st.sampled_from([numpy.float32, numpy.float64]),
       method=st.sampled_from(SIMT_MATMUL + ("auto",)), integer_valued=st.booleans(),
       seed=seeds)
def test_matmul_property(m, k, n, batch, dtype, method, integer_valued, seed):
    rng = numpy.random.default_rng(seed)
    a = reference.random_array(batch + (m, k), dtype, rng, integer_valued=integer_valued)
    b = reference.random_array((k, n), dtype, rng, integer_valued=integer_valued)
    got = cupy.asnumpy(gk.matmul(cupy.asarray(a), cupy.asarray(b), method=method))
    want = reference.matmul(a, b)
    assert got.dtype == dtype and got.shape == want.shape
    context = f"{method} {numpy.dtype(dtype)} {a.shape}@{b.shape} seed={seed}"
    if integer_valued:
        numpy.testing.assert_array_equal(got, want, err_msg=context)
    else:
        bound = reference.matmul_error_bound(a, b, dtype)
        assert numpy.all(numpy.abs(got - want) <= bound), context


sum_shapes = st.lists(st.integers(0, 70), min_size=0, max_size=4).map(
    lambda s: capped(s) if len(s) > 2 else tuple(s))


@SETTINGS
@given(shape=sum_shapes, dtype=st.sampled_from(INT_DTYPES),
       method=st.sampled_from(gk.methods("sum") + ("auto",)), reverse=st.booleans(), seed=seeds)
def test_sum_integers_property(shape, dtype, method, reverse, seed):
    host = numpy.asarray(reference.random_array(shape, dtype, numpy.random.default_rng(seed)))
    x = cupy.asarray(host)
    if reverse and host.ndim:
        host, x = host[::-1], x[::-1]
    got = cupy.asnumpy(gk.sum(x, method=method))
    want = numpy.sum(host)
    assert got.dtype == want.dtype and got.shape == ()
    assert got == want, f"{method} {dtype} {shape} seed={seed}: got {got!r}, want {want!r}"
