"""gk.matmul on the tensor cores: float16 (float32 sums) and float32 as TF32, only when asked."""

from __future__ import annotations

import numpy
import pytest

import gpukernels as gk
import references as reference
from edges_helpers import TENSOR_CORE_METHODS
from gpukernels._core.launch import record_launches
from gpukernels.validation import poisoned

cupy = pytest.importorskip("cupy")

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("index_width")]

TENSOR_METHODS = TENSOR_CORE_METHODS


@pytest.fixture(autouse=True)
def tensor_cores(request):
    capability = int(cupy.cuda.Device().compute_capability)
    if capability < 80:
        pytest.skip("the tensor-core rungs need compute capability 8.0")
    method = getattr(request.node, "callspec", None) and request.node.callspec.params.get("method")
    if method == "wgmma" and capability != 90:
        pytest.skip("the wgmma rung runs on compute capability 9.0 only")


def assert_tensor_close(got, a, b, *, tf32: bool, context: str):
    """``got`` against the float64 product of the host operands.

    float16: exact operands, float32 sums (c * K * eps32), one rounding to float16. TF32: each
    operand rounded to a 10-bit mantissa, so each term is off by up to about 2**-10 of |a||b|
    (the bound allows twice that), plus the float32 sums.
    """
    want = reference.matmul(a, b)
    got = cupy.asnumpy(got)
    assert got.shape == want.shape, context
    assert not numpy.isnan(got).any(), f"{context}: NaN (an element never written?)"
    magnitude = reference.matmul(numpy.abs(a), numpy.abs(b))
    k = a.shape[-1]
    bound = 4 * max(k, 1) * float(numpy.finfo(numpy.float32).eps) * magnitude
    if tf32:
        bound = bound + 2.0**-9 * magnitude
    else:
        bound = bound + float(numpy.finfo(numpy.float16).eps) * numpy.abs(want)
    error = numpy.abs(got.astype(numpy.float64) - want)
    bad = error > bound
    assert not bad.any(), (f"{context}: {bad.sum()} of {bad.size} elements outside the bound, "
                           f"max error {error.max():.3g}")


SHAPES = [
    ((1, 1), (1, 1)), ((31, 37), (37, 97)), ((127, 129), (129, 127)), ((128, 128), (128, 128)),
    ((129, 4097), (4097, 1)), ((255, 257), (257, 255)), ((300, 264), (264, 389)),
    ((513, 40), (40, 260)), ((3, 33, 17), (17, 9)), ((2, 1, 5, 7), (4, 7, 3)), ((7,), (7, 5)),
    ((4, 0), (0, 3)), ((0, 5), (5, 3)),
    # wgmma's tiles: 128 x 256 of C, 64 (float16) or 32 (TF32) of K per stage, 4 stages.
    ((2, 257, 1000), (1000, 513)), ((129, 320), (3, 320, 257)), ((384, 520), (520, 768)),
]


def pair_id(pair):
    return "@".join("x".join(map(str, shape)) for shape in pair)


# (name, view of a's base, view of b's base, a base shape, b base shape): row- and column-major
# operands, rows padded past K (the 16-byte path with a partial chunk), reversed and broadcast.
VIEWS = [
    ("contiguous", lambda v: v, lambda v: v, (200, 136), (136, 264)),
    ("padded-rows", lambda v: v[:, :131], lambda v: v[:131, :250], (200, 136), (136, 256)),
    ("a-transposed", lambda v: v.T, lambda v: v, (136, 200), (136, 264)),
    ("b-transposed", lambda v: v, lambda v: v.T, (200, 136), (264, 136)),
    ("both-transposed", lambda v: v.T, lambda v: v.T, (136, 200), (264, 136)),
    ("reversed", lambda v: v[::-1, ::-1], lambda v: v[::-1], (200, 136), (136, 264)),
    ("batch-broadcast", lambda v: v[None].repeat(3, 0)[:, ::2], lambda v: v, (200, 136),
     (136, 264)),
]


@pytest.mark.parametrize("tf32", [False, True], ids=["float16", "tf32"])
@pytest.mark.parametrize("shapes", SHAPES, ids=pair_id)
@pytest.mark.parametrize("method", TENSOR_METHODS + ("auto",))
def test_tensor_core_matmul_matches_numpy(method, shapes, tf32, rng):
    dtype = numpy.float32 if tf32 else numpy.float16
    a = reference.random_array(shapes[0], dtype, rng)
    b = reference.random_array(shapes[1], dtype, rng)
    precision = "tf32" if tf32 else "highest"
    want_shape = numpy.matmul(a, b).shape
    out = poisoned(want_shape, dtype)
    got = gk.matmul(cupy.asarray(a), cupy.asarray(b), method=method, out=out, precision=precision)
    assert got is out and got.dtype == dtype
    assert_tensor_close(got, a, b, tf32=tf32, context=f"{method} {pair_id(shapes)}")


@pytest.mark.parametrize("tf32", [False, True], ids=["float16", "tf32"])
@pytest.mark.parametrize("view", VIEWS, ids=[v[0] for v in VIEWS])
@pytest.mark.parametrize("method", TENSOR_METHODS)
def test_tensor_core_matmul_strided_views(method, view, tf32, rng):
    name, a_view, b_view, a_shape, b_shape = view
    dtype = numpy.float32 if tf32 else numpy.float16
    a_base = reference.random_array(a_shape, dtype, rng)
    b_base = reference.random_array(b_shape, dtype, rng)
    a, b = a_view(a_base), b_view(b_base)
    da, db = a_view(cupy.asarray(a_base)), b_view(cupy.asarray(b_base))
    got = gk.matmul(da, db, method=method, precision="tf32" if tf32 else "highest")
    assert_tensor_close(got, a, b, tf32=tf32, context=f"{method} {name}")


@pytest.mark.parametrize("tf32", [False, True], ids=["float16", "tf32"])
@pytest.mark.parametrize("method", TENSOR_METHODS)
def test_tensor_core_matmul_unaligned_out(method, tf32, rng):
    # An `out` starting one element past an allocation: C's rows are not aligned for the paired
    # stores, which must fall back to single ones.
    dtype = numpy.float32 if tf32 else numpy.float16
    a = reference.random_array((130, 72), dtype, rng)
    b = reference.random_array((72, 258), dtype, rng)
    out = poisoned((1 + 130 * 258,), dtype)[1:].reshape(130, 258)
    got = gk.matmul(cupy.asarray(a), cupy.asarray(b), method=method, out=out,
                    precision="tf32" if tf32 else "highest")
    assert got is out
    assert_tensor_close(got, a, b, tf32=tf32, context=f"{method} unaligned out")


@pytest.mark.parametrize("method", TENSOR_METHODS)
def test_tensor_core_matmul_is_deterministic(method, rng):
    a = cupy.asarray(reference.random_array((300, 1000), numpy.float16, rng))
    b = cupy.asarray(reference.random_array((1000, 260), numpy.float16, rng))
    first = cupy.asnumpy(gk.matmul(a, b, method=method)).tobytes()
    for _ in range(20):
        assert cupy.asnumpy(gk.matmul(a, b, method=method)).tobytes() == first


def test_tf32_only_when_asked(rng):
    a = cupy.asarray(reference.random_array((64, 64), numpy.float32, rng))
    with pytest.raises(ValueError, match="precision='tf32'"):
        gk.matmul(a, a, method="mma")
    with pytest.raises(ValueError, match="tf32"):
        gk.matmul(a, a, method="large_tile", precision="tf32")
    with pytest.raises(ValueError, match="float32"):
        gk.matmul(a.astype(cupy.float64), a, precision="tf32")
    with pytest.raises(ValueError, match="precision"):
        gk.matmul(a, a, precision="low")
    with pytest.raises(TypeError, match="float64"):
        gk.matmul(a.astype(cupy.float64), a.astype(cupy.float64), method="mma")
    # The default float32 path is exact FMA arithmetic, not TF32: 2049 needs 12 significant
    # bits (TF32 keeps 11), and 2 * 2049**2 is exact in float32.
    x = cupy.full((2, 2), 2049.0, numpy.float32)
    assert float(gk.matmul(x, x)[0, 0]) == 2 * 2049.0**2
    assert float(gk.matmul(x, x, precision="tf32")[0, 0]) != 2 * 2049.0**2


def test_auto_picks_tensor_cores_for_float16_and_tf32(rng):
    # wgmma on Hopper (compute capability 9.0), mma on the others.
    expected = "wgmma" if int(cupy.cuda.Device().compute_capability) == 90 else "mma"
    a = cupy.asarray(reference.random_array((64, 64), numpy.float16, rng))
    for x, precision in ((a, "highest"), (a.astype(cupy.float32), "tf32")):
        with record_launches() as launches:
            gk.matmul(x, x, precision=precision)
        # TF32 on wgmma transposes B first; the product itself is the last launch.
        assert launches and launches[-1].rung == expected, (precision, launches)
        assert launches[-1].instance.startswith(f"matmul_{expected}<")
