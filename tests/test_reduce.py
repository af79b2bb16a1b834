"""gk.prod, gk.min, gk.max on the GPU, and what every reduction rung shares: unaligned starts,
strides, NaN, empty inputs, determinism, streams, float32 accuracy."""

from __future__ import annotations

import numpy
import pytest

import gpukernels as gk
import references as reference

cupy = pytest.importorskip("cupy")

pytestmark = pytest.mark.gpu

METHODS = gk.methods("reduce") + ("auto",)
REAL_DTYPES = [numpy.dtype(t) for t in (
    numpy.bool_, numpy.int8, numpy.int16, numpy.int32, numpy.int64, numpy.uint8, numpy.uint16,
    numpy.uint32, numpy.uint64, numpy.float16, numpy.float32, numpy.float64)]
SIZES = [1, 7, 255, 256, 257, 4099, 10**6 + 3]


def test_every_reduction_shares_the_ladder():
    assert gk.methods("sum") == gk.methods("prod") == gk.methods("min") == gk.methods("max") \
        == gk.methods("reduce")


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", REAL_DTYPES, ids=str)
@pytest.mark.parametrize("operation", ["min", "max"])
@pytest.mark.parametrize("method", METHODS)
def test_min_max_match_numpy(method, operation, dtype, n, rng):
    host = reference.random_array((n,), dtype, rng)
    got = getattr(gk, operation)(cupy.asarray(host), method=method)
    want = getattr(numpy, operation)(host)
    assert got.dtype == want.dtype and got.shape == ()
    assert cupy.asnumpy(got) == want, f"{method} {operation} {dtype} n={n}"


@pytest.mark.parametrize("dtype", [numpy.int8, numpy.int32, numpy.uint64, numpy.float32,
                                   numpy.float64, numpy.complex64, numpy.complex128], ids=str)
@pytest.mark.parametrize("method", METHODS)
def test_prod_matches_numpy(method, dtype, rng):
    # Values near 1 keep float products finite; integers wrap around as NumPy's do.
    dtype = numpy.dtype(dtype)
    if dtype.kind in "iu":
        host = rng.integers(1, 4, size=1000).astype(dtype)
    else:
        host = (1 + (rng.random(1000) - 0.5) / 50).astype(dtype)
        if dtype.kind == "c":
            host = host + 1j * ((rng.random(1000) - 0.5) / 50).astype(dtype)
    got = cupy.asnumpy(gk.prod(cupy.asarray(host), method=method))
    want = numpy.prod(host)
    assert got.dtype == want.dtype
    if dtype.kind in "iu":
        assert got == want
    else:
        wide = numpy.prod(host.astype(numpy.complex128 if dtype.kind == "c" else numpy.float64))
        eps = numpy.finfo(dtype).eps
        assert abs(complex(got) - complex(wide)) <= 4 * 1000 * eps * abs(complex(wide))


@pytest.mark.parametrize("method", METHODS)
def test_prod_wraps_and_bool_and_dtype(method):
    x = cupy.full(70, 2, dtype=numpy.int32)  # 2**70 wraps to 0 in int64
    assert int(gk.prod(x, method=method)) == int(numpy.prod(numpy.full(70, 2, numpy.int32)))
    x = cupy.full(40, 3, dtype=numpy.int8)
    got = gk.prod(x, dtype=numpy.int8, method=method)
    assert got.dtype == numpy.int8 and int(got) == int(numpy.prod(numpy.full(40, 3, numpy.int8),
                                                                   dtype=numpy.int8))
    flags = cupy.asarray([True, True, False])
    assert gk.prod(flags, method=method).dtype == numpy.prod(numpy.ones(1, bool)).dtype
    assert int(gk.prod(flags, method=method)) == 0
    assert int(gk.prod(flags[:2], method=method)) == 1


@pytest.mark.parametrize("position", ["first", "middle", "last", "every-block"])
@pytest.mark.parametrize("dtype", [numpy.float16, numpy.float32, numpy.float64], ids=str)
@pytest.mark.parametrize("operation", ["min", "max"])
@pytest.mark.parametrize("method", METHODS)
def test_min_max_propagate_nan(method, operation, dtype, position, rng):
    n = 300_001
    host = reference.random_array((n,), numpy.dtype(dtype), rng)
    index = {"first": [0], "middle": [n // 2], "last": [n - 1],
             "every-block": list(range(0, n, 256))}[position]
    host[index] = numpy.nan
    got = getattr(gk, operation)(cupy.asarray(host), method=method)
    assert numpy.isnan(cupy.asnumpy(got)), f"{method} {operation} NaN at {position}"


@pytest.mark.parametrize("operation", ["min", "max"])
@pytest.mark.parametrize("method", METHODS)
def test_min_max_infinities(method, operation):
    host = numpy.array([1.0, -numpy.inf, 3.0, numpy.inf, -2.0], dtype=numpy.float32)
    got = cupy.asnumpy(getattr(gk, operation)(cupy.asarray(host), method=method))
    assert got == getattr(numpy, operation)(host)


@pytest.mark.parametrize("operation", ["min", "max"])
def test_min_max_of_nothing_raise(operation):
    with pytest.raises(ValueError, match="zero-size"):
        getattr(gk, operation)(cupy.zeros(0, numpy.float32))
    with pytest.raises(ValueError, match="zero-size"):
        getattr(gk, operation)(cupy.zeros((3, 0), numpy.int32))
    assert getattr(gk, operation)(cupy.arange(5)).item() == getattr(numpy, operation)(numpy.arange(5))


def test_prod_of_nothing_is_one():
    got = gk.prod(cupy.zeros((0, 4), numpy.int16))
    assert got.dtype == numpy.prod(numpy.zeros((0, 4), numpy.int16)).dtype and int(got) == 1


@pytest.mark.parametrize("operation", ["min", "max"])
def test_min_max_reject_complex_and_dtype(operation):
    with pytest.raises(TypeError, match="complex"):
        getattr(gk, operation)(cupy.ones(4, numpy.complex64))
    with pytest.raises(TypeError):
        getattr(gk, operation)(cupy.ones(4, numpy.float32), dtype=numpy.float64)


@pytest.mark.parametrize("offset", range(0, 17))
@pytest.mark.parametrize("dtype", [numpy.int8, numpy.int16, numpy.float32, numpy.float64,
                                   numpy.complex128], ids=str)
@pytest.mark.parametrize("method", METHODS)
def test_unaligned_starts_and_lengths(method, dtype, offset, rng):
    # Views starting inside a 16-byte word, with lengths that leave a partial word at the end:
    # the vector rungs' scalar head and tail must take exactly the elements the words miss.
    dtype = numpy.dtype(dtype)
    host = reference.random_array((5000,), dtype, rng, integer_valued=True)
    view_host = host[offset:offset + 1000 + 3 * offset]
    x = cupy.asarray(host)[offset:offset + 1000 + 3 * offset]
    got = cupy.asnumpy(gk.sum(x, method=method))
    want = numpy.sum(view_host.astype(numpy.complex128 if dtype.kind == "c" else
                                      numpy.float64 if dtype.kind == "f" else numpy.int64))
    assert complex(got) == complex(want), f"{method} offset {offset}"
    if dtype.kind != "c":
        assert cupy.asnumpy(gk.max(x, method=method)) == view_host.max()
        assert cupy.asnumpy(gk.min(x[::3], method=method)) == view_host[::3].min()


@pytest.mark.parametrize("operation", ["sum", "prod", "min", "max"])
@pytest.mark.parametrize("method", METHODS)
def test_reductions_are_deterministic(method, operation, rng):
    host = (rng.random(3_000_017) + 0.5).astype(numpy.float32)
    x = cupy.asarray(host)
    first = getattr(gk, operation)(x, method=method)
    for _ in range(20):
        again = getattr(gk, operation)(x, method=method)
        assert cupy.asnumpy(again).tobytes() == cupy.asnumpy(first).tobytes()


@pytest.mark.parametrize("method", ["shuffle", "one_pass"])
def test_float32_sum_at_least_as_accurate_as_numpy(method, rng):
    # Mixed magnitudes over many elements: NumPy's pairwise float32 sum loses digits; the vector
    # rungs accumulate float32 in float64.
    n = 2**24 + 5
    host = (rng.standard_normal(n) * numpy.exp(rng.uniform(-12, 12, n))).astype(numpy.float32)
    exact = numpy.sum(host.astype(numpy.float64))
    numpy_error = abs(float(numpy.sum(host)) - exact)
    ours = float(cupy.asnumpy(gk.sum(cupy.asarray(host), method=method)))
    assert abs(ours - exact) <= max(numpy_error, abs(exact) * numpy.finfo(numpy.float32).eps)


def test_one_pass_on_concurrent_streams(rng):
    # Each stream has its own block counter: launches on two streams may overlap.
    hosts = [(rng.random(2_000_003) - 0.5).astype(numpy.float64) for _ in range(4)]
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(2)]
    results = []
    for i, host in enumerate(hosts * 4):
        with streams[i % 2]:
            results.append((host, gk.sum(cupy.asarray(host), method="one_pass")))
    for stream in streams:
        stream.synchronize()
    for host, got in results:
        assert abs(float(got) - numpy.sum(host)) <= 1e-9 * numpy.abs(host).sum()
