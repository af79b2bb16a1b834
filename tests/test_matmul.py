"""gk.matmul on the GPU: every rung, float32/float64, NumPy's shape rules, strides and errors."""

from __future__ import annotations

import math

import numpy
import pytest

import gpukernels as gk
import references as reference
from edges_helpers import MATMUL_METHODS
from gpukernels.ops.matmul import rungs
from gpukernels.validation import poisoned

cupy = pytest.importorskip("cupy")

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("index_width")]

#: The SIMT rungs, which take every real dtype; test_matmul_tensor.py covers the tensor cores.
SIMT_METHODS = MATMUL_METHODS
METHODS = SIMT_METHODS + ("auto",)
DTYPES = [numpy.dtype(numpy.float32), numpy.dtype(numpy.float64)]

# (a shape, b shape); host references stay below ~512^3 multiply-adds.
SHAPES = [
    ((1, 1), (1, 1)), ((1, 100), (100, 1)), ((100, 1), (1, 100)), ((31, 37), (37, 97)),
    ((97, 101), (101, 31)), ((127, 129), (129, 127)), ((255, 257), (257, 255)),
    ((256, 256), (256, 256)), ((511, 513), (513, 509)), ((1, 1025), (1025, 1023)),
    ((33, 65), (65, 17)), ((32, 32), (32, 32)), ((64, 1), (1, 64)),
    ((64, 33), (33, 96)), ((96, 31), (31, 64)),  # whole tiles of C, K past / short of a tile
    ((3, 33, 17), (17, 9)), ((2, 1, 5, 7), (4, 7, 3)), ((17,), (3, 17, 9)), ((1, 5, 7), (3, 7, 2)),
    ((7,), (7,)), ((1,), (1,)), ((7,), (7, 5)), ((5, 7), (7,)), ((3, 5, 7), (7,)),
    ((4, 0), (0, 3)), ((2, 4, 0), (0, 3)), ((0,), (0,)), ((0,), (0, 3)),      # K = 0: zeros
    ((0, 5), (5, 3)), ((4, 5), (5, 0)), ((2, 0, 5), (5, 3)), ((0, 4, 5), (5, 3)),  # empty
]


def pair_id(pair):
    a, b = pair
    return "x".join(map(str, a)) + "@" + "x".join(map(str, b))


def assert_matmul_close(got, a, b, *, exact=False, out_dtype=None, context=""):
    """``got`` (GPU) against the float64 reference of host ``a @ b``."""
    want = reference.matmul(a, b)
    result_dtype = numpy.result_type(a, b)
    got = cupy.asnumpy(got)
    assert got.dtype == (out_dtype or result_dtype), context
    assert got.shape == want.shape, context
    assert not numpy.isnan(got).any(), f"{context}: NaN (an element never written?)"
    if exact:
        numpy.testing.assert_array_equal(got, want, err_msg=context)
        return
    bound = reference.matmul_error_bound(a, b, result_dtype)
    if out_dtype is not None and out_dtype != result_dtype:
        bound = bound + numpy.finfo(out_dtype).eps * numpy.abs(want)
    error = numpy.abs(got.astype(numpy.float64) - want)
    bad = error > bound
    assert not bad.any(), (f"{context}: {bad.sum()} of {bad.size} elements outside the bound, "
                           f"max error {error.max():.3g}")


@pytest.mark.parametrize("integer_valued", [False, True], ids=["random", "integer-valued"])
@pytest.mark.parametrize("shapes", SHAPES, ids=pair_id)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("method", METHODS)
def test_matmul_matches_numpy(method, dtype, shapes, integer_valued, rng):
    a_shape, b_shape = shapes
    a = reference.random_array(a_shape, dtype, rng, integer_valued=integer_valued)
    b = reference.random_array(b_shape, dtype, rng, integer_valued=integer_valued)
    da, db = cupy.asarray(a), cupy.asarray(b)
    context = f"{method} {dtype} {a_shape}@{b_shape}"

    out = poisoned(numpy.matmul(a, b).shape, dtype)
    got = gk.matmul(da, db, method=method, out=out)
    assert got is out
    assert_matmul_close(got, a, b, exact=integer_valued, context=context + " out=")

    got = gk.matmul(da, db, method=method)
    assert isinstance(got, cupy.ndarray) and got.flags.c_contiguous
    assert_matmul_close(got, a, b, exact=integer_valued, context=context)


# Sizes with whole interior tiles of every rung (up to 256x128) and edge tiles around them; K
# with a partial last step; operands whose rows are 16-byte aligned (the 16-byte load paths) or
# not, and views of wider buffers. (label, M, K, N, a columns slice, b columns slice)
BLOCK_CASES = [
    ("aligned", 515, 264, 389, None, None),
    ("aligned-k-tail", 260, 260, 260, None, None),     # K % 8 == 4
    ("aligned-views", 300, 258, 256, (260, 258), (260, 256)),  # K % 4 == 2, rows 16-byte aligned
    ("unaligned", 513, 263, 385, None, None),
    ("exact-tiles", 512, 256, 256, None, None),
]


@pytest.mark.parametrize("case", BLOCK_CASES, ids=[c[0] for c in BLOCK_CASES])
@pytest.mark.parametrize("dtype", DTYPES + [numpy.dtype(numpy.int32)], ids=str)
@pytest.mark.parametrize("method", METHODS)
def test_matmul_interior_and_edge_blocks(method, dtype, case, rng):
    label, M, K, N, a_cols, b_cols = case
    a_base = reference.random_array((M, a_cols[0] if a_cols else K), dtype, rng,
                                    integer_valued=True)
    b_base = reference.random_array((K, b_cols[0] if b_cols else N), dtype, rng,
                                    integer_valued=True)
    a, b = a_base[:, :K], b_base[:, :N]
    da, db = cupy.asarray(a_base)[:, :K], cupy.asarray(b_base)[:, :N]
    out = poisoned((M, N), numpy.dtype(dtype))
    got = gk.matmul(da, db, method=method, out=out)
    want = numpy.matmul(a, b)
    numpy.testing.assert_array_equal(cupy.asnumpy(got), want, err_msg=f"{method} {label}")


# (name, a view, b view, a base shape, b base shape); the views are taken on NumPy and CuPy alike.
VIEWS = [
    ("a-transposed", lambda xp, v: v.T, lambda xp, v: v, (37, 20), (37, 15)),
    ("b-transposed", lambda xp, v: v, lambda xp, v: v.T, (20, 37), (15, 37)),
    ("both-transposed", lambda xp, v: v.T, lambda xp, v: v.T, (37, 20), (15, 37)),
    ("negative-strides", lambda xp, v: v[::-1, ::2], lambda xp, v: v[::-1, ::-2], (20, 74),
     (37, 30)),
    ("offset", lambda xp, v: v[5:, 3:], lambda xp, v: v[3:, 5:], (25, 40), (40, 20)),
    ("broadcast", lambda xp, v: xp.broadcast_to(v[:1], (20, 37)),
     lambda xp, v: xp.broadcast_to(v[:, :1], (37, 15)), (3, 37), (37, 4)),
    ("batch-broadcast", lambda xp, v: xp.broadcast_to(v, (3, 20, 37)),
     lambda xp, v: v[:, :, ::-1], (20, 37), (3, 37, 15)),
    ("batch-strided", lambda xp, v: v[::2].transpose(0, 2, 1), lambda xp, v: v[1::2, ::2],
     (6, 37, 20), (6, 74, 15)),
    ("1d-strided", lambda xp, v: v[::2], lambda xp, v: v[::-1], (74,), (37, 15)),
]


@pytest.mark.parametrize("view", VIEWS, ids=[v[0] for v in VIEWS])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("method", METHODS)
def test_matmul_non_contiguous_inputs(method, dtype, view, rng):
    name, a_view, b_view, a_shape, b_shape = view
    a_base = reference.random_array(a_shape, dtype, rng, integer_valued=True)
    b_base = reference.random_array(b_shape, dtype, rng, integer_valued=True)
    a, b = a_view(numpy, a_base), b_view(numpy, b_base)
    da, db = a_view(cupy, cupy.asarray(a_base)), b_view(cupy, cupy.asarray(b_base))
    assert (da.shape, da.strides, db.shape, db.strides) == (a.shape, a.strides, b.shape, b.strides)
    assert_matmul_close(gk.matmul(da, db, method=method), a, b, exact=True,
                        context=f"{method} {name}")


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("a_dtype, b_dtype", [(numpy.float32, numpy.float64),
                                              (numpy.float64, numpy.float32),
                                              (numpy.int32, numpy.float32),
                                              (numpy.float32, numpy.int64),
                                              (numpy.int16, numpy.float32)], ids=str)
def test_matmul_mixed_dtypes_promote_like_numpy(method, a_dtype, b_dtype, rng):
    a = rng.integers(-8, 9, (13, 29)).astype(a_dtype)
    b = rng.integers(-8, 9, (29, 7)).astype(b_dtype)
    want_dtype = numpy.matmul(a, b).dtype
    got = gk.matmul(cupy.asarray(a), cupy.asarray(b), method=method)
    assert got.dtype == want_dtype
    numpy.testing.assert_array_equal(cupy.asnumpy(got), numpy.matmul(a, b))


def test_matmul_float32_float64_random(rng):
    a = reference.random_array((40, 50), numpy.float32, rng)
    b = reference.random_array((50, 30), numpy.float64, rng)
    for method in METHODS:
        got = gk.matmul(cupy.asarray(a), cupy.asarray(b), method=method)
        assert got.dtype == numpy.float64
        assert_matmul_close(got, a, b, context=method)


@pytest.mark.parametrize("dtype", [numpy.complex64, numpy.complex128], ids=str)
@pytest.mark.parametrize("method", METHODS)
def test_matmul_complex_raises_type_error(method, dtype):
    a = cupy.ones((4, 4), dtype=dtype)
    with pytest.raises(TypeError, match="complex"):
        gk.matmul(a, a, method=method)


INTEGER_DTYPES = [numpy.int8, numpy.int16, numpy.int32, numpy.int64, numpy.uint8, numpy.uint16,
                  numpy.uint32, numpy.uint64]


@pytest.mark.parametrize("shapes", [((31, 37), (37, 97)), ((129, 255), (255, 131)),
                                    ((3, 33, 17), (17, 9)), ((7,), (7, 5)), ((0, 4), (4, 3)),
                                    ((4, 0), (0, 3))], ids=pair_id)
@pytest.mark.parametrize("dtype", INTEGER_DTYPES + [numpy.bool_], ids=str)
@pytest.mark.parametrize("method", METHODS)
def test_matmul_integers_exact_with_numpy_wrap_around(method, dtype, shapes, rng):
    # Full-range values: the products and sums overflow, and must wrap exactly as NumPy's do.
    a_shape, b_shape = shapes
    a = reference.random_array(a_shape, dtype, rng)
    b = reference.random_array(b_shape, dtype, rng)
    want = numpy.matmul(a, b)
    out = poisoned(want.shape, want.dtype)
    got = gk.matmul(cupy.asarray(a), cupy.asarray(b), method=method, out=out)
    assert got is out and got.dtype == want.dtype
    numpy.testing.assert_array_equal(cupy.asnumpy(got), want)
    got = gk.matmul(cupy.asarray(a).T.copy().T, cupy.asarray(b)[..., ::-1][..., ::-1],
                    method=method)  # strided views of the same values
    numpy.testing.assert_array_equal(cupy.asnumpy(got), want)


@pytest.mark.parametrize("shapes", [((31, 37), (37, 97)), ((255, 257), (257, 129)),
                                    ((2, 1, 5, 7), (4, 7, 3)), ((64, 1000), (1000, 64))],
                         ids=pair_id)
@pytest.mark.parametrize("method", METHODS)
def test_matmul_float16_accumulates_in_float32(method, shapes, rng):
    a_shape, b_shape = shapes
    a = reference.random_array(a_shape, numpy.float16, rng)
    b = reference.random_array(b_shape, numpy.float16, rng)
    got = gk.matmul(cupy.asarray(a), cupy.asarray(b), method=method)
    # One float32 accumulation, rounded once to float16: float32's bound plus the final rounding.
    want = reference.matmul(a, b)
    bound = reference.matmul_error_bound(a, b, numpy.float32) + \
        numpy.finfo(numpy.float16).eps * numpy.abs(want)
    got = cupy.asnumpy(got)
    assert got.dtype == numpy.float16 and got.shape == want.shape
    error = numpy.abs(got.astype(numpy.float64) - want)
    assert (error <= bound).all(), f"max error {error.max():.3g}"


@pytest.mark.parametrize("a_shape, b_shape", [((3, 4), (5, 6)), ((4,), (5,)), ((2, 3, 4), (3, 4, 5)),
                                              ((2, 3, 4), (3, 5)), ((), (3,)), ((3,), ())],
                         ids=str)
def test_matmul_bad_shapes_raise_value_error(a_shape, b_shape):
    with pytest.raises(ValueError):
        numpy.matmul(numpy.zeros(a_shape), numpy.zeros(b_shape))
    with pytest.raises(ValueError):
        gk.matmul(cupy.zeros(a_shape, numpy.float32), cupy.zeros(b_shape, numpy.float32))


def test_matmul_out_errors(rng):
    a = cupy.asarray(reference.random_array((5, 7), numpy.float32, rng))
    b = cupy.asarray(reference.random_array((7, 3), numpy.float32, rng))
    with pytest.raises(ValueError):
        gk.matmul(a, b, out=cupy.empty((3, 5), numpy.float32))
    with pytest.raises(ValueError):
        gk.matmul(a, b, out=cupy.empty((1, 5, 3), numpy.float32))
    with pytest.raises(TypeError):
        gk.matmul(a, b, out=cupy.empty((5, 3), numpy.int32))
    with pytest.raises(TypeError):
        gk.matmul(a, b, out=numpy.empty((5, 3), numpy.float32))
    with pytest.raises(TypeError, match=r"cupy\.asarray\(b\)"):
        gk.matmul(a, cupy.asnumpy(b))
    # Still usable afterwards.
    assert_matmul_close(gk.matmul(a, b), cupy.asnumpy(a), cupy.asnumpy(b))


@pytest.mark.parametrize("method", METHODS)
def test_matmul_out_with_cast(method, rng):
    a = reference.random_array((30, 20), numpy.float64, rng)
    b = reference.random_array((20, 10), numpy.float64, rng)
    out = poisoned((30, 10), numpy.float32)  # float64 -> float32 is a same_kind cast
    got = gk.matmul(cupy.asarray(a), cupy.asarray(b), method=method, out=out)
    assert got is out
    assert_matmul_close(got, a, b, out_dtype=numpy.dtype(numpy.float32), context=method)


@pytest.mark.parametrize("which", ["a", "b", "strided-view"])
@pytest.mark.parametrize("method", METHODS)
def test_matmul_out_overlapping_input(method, which, rng):
    a = reference.random_array((48, 48), numpy.float32, rng, integer_valued=True)
    b = reference.random_array((48, 48), numpy.float32, rng, integer_valued=True)
    da, db = cupy.asarray(a), cupy.asarray(b)
    if which == "a":
        out = da
    elif which == "b":
        out = db
    else:  # out is every other column of a wider buffer that also holds a
        buffer = cupy.empty((48, 96), numpy.float32)
        buffer[:, ::2] = da
        da, out = buffer[:, ::2], buffer[:, 1::2]
        assert not out.flags.c_contiguous
    got = gk.matmul(da, db, method=method, out=out)
    assert got is out
    assert_matmul_close(got, a, b, exact=True, context=f"{method} out={which}")


@pytest.mark.parametrize("method", METHODS)
def test_matmul_grid_limits(method, rng):
    # More row tiles than gridDim.y allows (65535 * 32 rows), and more matrices than gridDim.z.
    a = reference.random_array((2_200_000, 2), numpy.float32, rng, integer_valued=True)
    b = reference.random_array((2, 3), numpy.float32, rng, integer_valued=True)
    assert_matmul_close(gk.matmul(cupy.asarray(a), cupy.asarray(b), method=method), a, b,
                        exact=True, context="tall")
    a = reference.random_array((70000, 2, 3), numpy.float32, rng, integer_valued=True)
    b = reference.random_array((3, 2), numpy.float32, rng, integer_valued=True)
    assert_matmul_close(gk.matmul(cupy.asarray(a), cupy.asarray(b), method=method), a, b,
                        exact=True, context="many matrices")


def test_matmul_invalid_method_leaves_library_usable(rng):
    a = reference.random_array((9, 4), numpy.float32, rng, integer_valued=True)
    b = reference.random_array((4, 6), numpy.float32, rng, integer_valued=True)
    da, db = cupy.asarray(a), cupy.asarray(b)
    with pytest.raises(ValueError, match="bogus"):
        gk.matmul(da, db, method="bogus")
    with pytest.raises(ValueError):
        gk.matmul(da, db, method="shared")  # a transpose rung, not a matmul one
    with pytest.raises(TypeError):
        gk.matmul(da, db, method=3)
    for method in METHODS:
        assert_matmul_close(gk.matmul(da, db, method=method), a, b, exact=True)


@pytest.mark.parametrize("method", METHODS)
def test_matmul_respects_current_stream(method, rng):
    a = reference.random_array((130, 70), numpy.float32, rng, integer_valued=True)
    b = reference.random_array((70, 90), numpy.float32, rng, integer_valued=True)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        got = gk.matmul(cupy.asarray(a), cupy.asarray(b), method=method)
        host = cupy.asnumpy(got, stream=stream)
    stream.synchronize()
    numpy.testing.assert_array_equal(host, numpy.matmul(a.astype(numpy.float64), b))


@pytest.mark.parametrize("method, blocks", [("tiled", 2), ("warp_tiled", 2), ("large_tile", 1)])
def test_matmul_rungs_keep_their_blocks_per_sm(method, blocks):
    # The tiled rung relies on two resident 1024-thread blocks (each barrier idles the SM
    # otherwise) and warp_tiled on two of 256 threads; neither forces that through launch bounds
    # alone for every type, so check the compiler's register counts (4-byte types).
    attributes = cupy.cuda.Device().attributes
    threads = math.prod(rungs.SIMT[method].block)
    if attributes["MaxThreadsPerMultiProcessor"] < blocks * threads:
        pytest.skip(f"this GPU holds fewer than {blocks} blocks of {threads} threads per SM")
    registers_per_sm = attributes["MaxRegistersPerMultiprocessor"]
    rung = rungs.LADDER[method]
    names = [i for i in rung.instances if i.split("<")[1].split(",")[0] in ("float", "unsigned int")]
    assert names
    for name in names:
        regs = rung.source.function(name).num_regs
        assert blocks * threads * regs <= registers_per_sm, f"{name}: {regs} registers"
