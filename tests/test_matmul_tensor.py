"""gk.matmul on the tensor cores: float16 and bfloat16 (float32 sums) and float32 as TF32, only
when asked."""

from __future__ import annotations

import numpy
import pytest

import gpukernels as gk
import references as reference
from edges_helpers import TENSOR_CORE_METHODS
from gpukernels._core import floats
from gpukernels._core.launch import record_launches, resident_clusters
from gpukernels.ops.matmul import rungs as matmul_rungs
from gpukernels.validation import poisoned

cupy = pytest.importorskip("cupy")

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("index_width")]

TENSOR_METHODS = TENSOR_CORE_METHODS
BFLOAT16 = floats.BFLOAT16
#: What the tensor cores multiply: (dtype, precision) by name.
KINDS = {"float16": (numpy.dtype(numpy.float16), "highest"), "bfloat16": (BFLOAT16, "highest"),
         "tf32": (numpy.dtype(numpy.float32), "tf32")}


@pytest.fixture(autouse=True)
def tensor_cores(request):
    capability = int(cupy.cuda.Device().compute_capability)
    if capability < 80:
        pytest.skip("the tensor-core rungs need compute capability 8.0")
    method = getattr(request.node, "callspec", None) and request.node.callspec.params.get("method")
    if method in matmul_rungs.HOPPER_RUNGS and capability != 90:
        pytest.skip(f"the {method} rung runs on compute capability 9.0 only")
    kind = getattr(request.node, "callspec", None) and request.node.callspec.params.get("kind")
    if method in ("gemv", "multicast") and kind == "tf32":
        pytest.skip(f"{method} multiplies 16-bit types (test_16_bit_rungs_refuse_float32 holds "
                    "it to that)")


def assert_tensor_close(got, a, b, *, tf32: bool, context: str):
    """``got`` against the float64 product of the host operands.

    float16 and bfloat16: exact operands, float32 sums (c * K * eps32), one rounding to the
    result. TF32: each operand rounded to a 10-bit mantissa, so each term is off by up to about
    2**-10 of |a||b| (the bound allows twice that), plus the float32 sums.
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
        bound = bound + floats.eps(got.dtype) * numpy.abs(want)
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
    # The epilogue's 16-byte stores: N a multiple of 8 ending 8 columns into a tile.
    ((2, 130, 200), (200, 520)),
    # Enough tiles of C for wgmma's 128 x 256 tiles (the shapes above take 128 x 128), with
    # edges in both directions.
    ((1100, 72), (72, 8200)),
    # The 128 x 64 tile (N of at most 64): several row tiles, N whole and ragged.
    ((520, 300), (300, 64)), ((2, 300, 140), (140, 56)),
    # 64-row tiles (M of at most 64), the consumer warpgroups splitting the columns: 64 x 128
    # (batched, N ragged) and 64 x 256 (258 wide tiles, N ragged).
    ((3, 50, 300), (300, 520)), ((40, 200), (200, 66000)),
    # The 16-bit types' 128 x 192 tile, where its one wave costs less than the wide tiles'
    # (72 of those, 96 of these): N ragged, a multiple of 8 and not, batched.
    ((700, 200), (200, 3000)), ((2, 260, 1000), (1000, 2900)),
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


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shapes", SHAPES, ids=pair_id)
@pytest.mark.parametrize("method", TENSOR_METHODS + ("auto",))
def test_tensor_core_matmul_matches_numpy(method, shapes, kind, rng):
    dtype, precision = KINDS[kind]
    a = reference.random_array(shapes[0], dtype, rng)
    b = reference.random_array(shapes[1], dtype, rng)
    want_shape = numpy.matmul(a, b).shape
    out = poisoned(want_shape, dtype)
    got = gk.matmul(cupy.asarray(a), cupy.asarray(b), method=method, out=out, precision=precision)
    assert got is out and got.dtype == dtype
    assert_tensor_close(got, a, b, tf32=kind == "tf32", context=f"{method} {pair_id(shapes)}")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("view", VIEWS, ids=[v[0] for v in VIEWS])
@pytest.mark.parametrize("method", TENSOR_METHODS)
def test_tensor_core_matmul_strided_views(method, view, kind, rng):
    name, a_view, b_view, a_shape, b_shape = view
    dtype, precision = KINDS[kind]
    a_base = reference.random_array(a_shape, dtype, rng)
    b_base = reference.random_array(b_shape, dtype, rng)
    a, b = a_view(a_base), b_view(b_base)
    da, db = a_view(cupy.asarray(a_base)), b_view(cupy.asarray(b_base))
    got = gk.matmul(da, db, method=method, precision=precision)
    assert got.dtype == dtype
    assert_tensor_close(got, a, b, tf32=kind == "tf32", context=f"{method} {name}")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("method", TENSOR_METHODS)
def test_tensor_core_matmul_unaligned_out(method, kind, rng):
    # An `out` starting one element past an allocation: C's rows are not aligned for the paired
    # stores, which must fall back to single ones.
    dtype, precision = KINDS[kind]
    a = reference.random_array((130, 72), dtype, rng)
    b = reference.random_array((72, 258), dtype, rng)
    out = poisoned((1 + 130 * 258,), dtype)[1:].reshape(130, 258)
    got = gk.matmul(cupy.asarray(a), cupy.asarray(b), method=method, out=out,
                    precision=precision)
    assert got is out
    assert_tensor_close(got, a, b, tf32=kind == "tf32", context=f"{method} unaligned out")


@pytest.mark.parametrize("dtype", [numpy.dtype(numpy.float16), BFLOAT16], ids=str)
@pytest.mark.parametrize("method", TENSOR_METHODS)
def test_tensor_core_matmul_is_deterministic(method, dtype, rng):
    a = cupy.asarray(reference.random_array((300, 1000), dtype, rng))
    b = cupy.asarray(reference.random_array((1000, 260), dtype, rng))
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


@pytest.mark.parametrize("method", ["gemv", "multicast"])
def test_16_bit_rungs_refuse_float32(method, rng):
    a = cupy.asarray(reference.random_array((4, 64), numpy.float32, rng))
    b = cupy.asarray(reference.random_array((64, 64), numpy.float32, rng))
    for precision in ("tf32", "highest"):
        with pytest.raises(TypeError, match=f"{method} rung multiplies float16 and bfloat16"):
            gk.matmul(a, b, method=method, precision=precision)
    with pytest.raises(TypeError, match=f"{method} rung multiplies float16 and bfloat16"):
        gk.matmul(a.astype(cupy.float64), b.astype(cupy.float64), method=method)
    # the library still works after the refusals
    numpy.testing.assert_allclose(cupy.asnumpy(gk.matmul(a, b)), cupy.asnumpy(a) @ cupy.asnumpy(b),
                                  rtol=1e-5, atol=1e-5)


def test_auto_picks_tensor_cores_for_16_bit_floats_and_tf32(rng):
    # wgmma on Hopper (compute capability 9.0), mma on the others.
    expected = "wgmma" if int(cupy.cuda.Device().compute_capability) == 90 else "mma"
    a = cupy.asarray(reference.random_array((64, 64), numpy.float16, rng))
    a16 = cupy.asarray(reference.random_array((64, 64), BFLOAT16, rng))
    for x, precision in ((a, "highest"), (a16, "highest"),
                         (a.astype(cupy.float32), "tf32")):
        with record_launches() as launches:
            gk.matmul(x, x, precision=precision)
        # The product is the last launch (a short operand may be copied first).
        assert launches and launches[-1].rung == expected, (precision, launches)
        assert launches[-1].instance.startswith(f"matmul_{expected}<")


# --- bfloat16 -------------------------------------------------------------------------------------

BF16_SHAPES = [((31, 37), (37, 97)), ((129, 4097), (4097, 1)), ((2, 257, 1000), (1000, 513)),
               ((7,), (3, 7, 5))]


@pytest.mark.parametrize("shapes", BF16_SHAPES, ids=pair_id)
@pytest.mark.parametrize("method", gk.methods("matmul") + ("auto",))
def test_bfloat16_on_every_rung(method, shapes, rng):
    # The SIMT rungs multiply bfloat16 in float32 and round once, as the tensor cores do.
    if method in ("naive", "tiled") and shapes[0][-1] > 1000:
        pytest.skip("the textbook rungs are slow at K = 4097; the shape battery covers them")
    a = reference.random_array(shapes[0], BFLOAT16, rng)
    b = reference.random_array(shapes[1], BFLOAT16, rng)
    out = poisoned(numpy.matmul(a, b).shape, BFLOAT16)
    got = gk.matmul(cupy.asarray(a), cupy.asarray(b), method=method, out=out)
    assert got is out and got.dtype == BFLOAT16
    assert_tensor_close(got, a, b, tf32=False, context=f"{method} bfloat16 {pair_id(shapes)}")


def test_bfloat16_promotes_as_ml_dtypes_says(rng):
    a = reference.random_array((33, 40), BFLOAT16, rng)
    for other, result in ((numpy.float32, numpy.float32), (numpy.int8, BFLOAT16),
                          (numpy.bool_, BFLOAT16), (numpy.float64, numpy.float64)):
        b = reference.random_array((40, 17), other, rng)
        got = gk.matmul(cupy.asarray(a), cupy.asarray(b))
        assert got.dtype == result, other
        if result == BFLOAT16:
            assert_tensor_close(got, a, b.astype(BFLOAT16), tf32=False, context=str(other))
        else:
            want = reference.matmul(a, b)
            bound = reference.matmul_error_bound(a, b, result)
            error = numpy.abs(cupy.asnumpy(got).astype(numpy.float64) - want)
            assert (error <= bound).all(), (other, error.max())
    # bfloat16 with float16 (or int32) has no common dtype: refused before any launch.
    for other in (numpy.float16, numpy.int32):
        b = cupy.zeros((40, 17), other)
        with record_launches() as launches, pytest.raises(TypeError, match="no common dtype"):
            gk.matmul(cupy.asarray(a), b)
        assert launches == []
    got = gk.matmul(cupy.asarray(a), cupy.asarray(a.T.copy()))  # the library works on
    assert_tensor_close(got, a, a.T, tf32=False, context="after the refusals")


def test_bfloat16_tensors_from_torch_through_dlpack(rng):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch does not see the GPU")
    a = torch.from_numpy(rng.uniform(-1, 1, (4, 96, 130)).astype(numpy.float32)).cuda()
    b = torch.from_numpy(rng.uniform(-1, 1, (130, 72)).astype(numpy.float32)).cuda()
    a, b = a.to(torch.bfloat16), b.to(torch.bfloat16)
    got = gk.matmul(a, b)
    assert isinstance(got, cupy.ndarray) and got.dtype == BFLOAT16 and got.shape == (4, 96, 72)
    host_a = a.float().cpu().numpy().astype(BFLOAT16)  # exact: bfloat16 values in float32
    host_b = b.float().cpu().numpy().astype(BFLOAT16)
    assert_tensor_close(got, host_a, host_b, tf32=False, context="torch bfloat16")
    # torch.matmul's own result is within the same bound of the exact product.
    theirs = cupy.from_dlpack(torch.matmul(a, b))
    assert theirs.dtype == BFLOAT16
    assert_tensor_close(theirs, host_a, host_b, tf32=False, context="torch.matmul itself")


# --- TF32's own tiles ----------------------------------------------------------------------------

#: (method, shapes, tile) where the Hopper plans give TF32's tiles that read B as it is into
#: registers: 256 x 128 where the other types take 128 x 256, 128 x 128 where too few of those
#: would fill the SMs, N is at most 128 or M at most 128, 128 x 64 where N is at most 64, 64 x
#: 128 where M is at most 64. M, N and K ragged,
#: rings of stages that wrap (K = 1000: 32 stages in 4 or 6 buffers), A batched over a broadcast
#: B and both batched, rows of C that are not whole 16-byte chunks (N = 4102, 1030, 100), one
#: row (a decode step), and split_k on every tile (slices of K, the partial tiles summed in one
#: order).
WIDE, SQUARE, NARROW, SHORT = (matmul_rungs.WGMMA_TF32_TILE, matmul_rungs.WGMMA_SMALL_TILE,
                               matmul_rungs.WGMMA_NARROW_TILE, matmul_rungs.WGMMA_TF32_SHORT_TILE)
TF32_TILE_CASES = [
    ("wgmma", ((1100, 1000), (1000, 8196)), WIDE), ("wgmma", ((3, 1040, 200), (200, 4102)), WIDE),
    ("wgmma", ((4, 520, 129), (4, 129, 1030)), WIDE), ("wgmma", ((300, 77), (77, 8196)), WIDE),
    ("wgmma", ((1000, 1000), (1000, 1030)), SQUARE), ("wgmma", ((3, 300, 500), (500, 100)), SQUARE),
    ("wgmma", ((2, 200, 77), (2, 77, 130)), SQUARE), ("wgmma", ((1000, 1000), (1000, 60)), NARROW),
    ("wgmma", ((3, 300, 77), (77, 33)), NARROW), ("wgmma", ((2, 130, 129), (2, 129, 64)), NARROW),
    ("wgmma", ((1, 3000), (3000, 8196)), SHORT), ("wgmma", ((3, 50, 300), (300, 4102)), SHORT),
    ("split_k", ((300, 4000), (4000, 2050)), WIDE), ("split_k", ((300, 4000), (4000, 100)), SQUARE),
    ("split_k", ((100, 4000), (4000, 2050)), SQUARE), ("split_k", ((300, 4000), (4000, 50)), NARROW),
    ("split_k", ((1, 8192), (8192, 4100)), SHORT), ("split_k", ((2, 40, 3000), (3000, 1030)), SHORT),
]


def random_operands(shapes, dtype, rng):
    """Random host operands of ``shapes``, their device copies, and a poisoned result."""
    a = reference.random_array(shapes[0], dtype, rng)
    b = reference.random_array(shapes[1], dtype, rng)
    return a, b, cupy.asarray(a), cupy.asarray(b), poisoned(numpy.matmul(a, b).shape, dtype)


def skip_unless_hopper(method):
    if int(cupy.cuda.Device().compute_capability) != 90:
        pytest.skip(f"{method} runs on compute capability 9.0 only")


def assert_right_and_repeatable(got, out, operands, method, context, precision="highest"):
    """``got`` is ``out``, close to the product of the host operands, and a second call (into a
    fresh result) gives the same bytes. ``operands`` is (a, b, da, db), host then device."""
    a, b, da, db = operands
    assert got is out
    assert_tensor_close(got, a, b, tf32=precision == "tf32", context=context)
    again = gk.matmul(da, db, method=method, precision=precision)
    assert cupy.asnumpy(again).tobytes() == cupy.asnumpy(got).tobytes()


@pytest.mark.parametrize("case", ["b-as-is", "b-transposed-view", "unaligned-out"])
@pytest.mark.parametrize(("method", "shapes", "tile"), TF32_TILE_CASES,
                         ids=[f"{m}-{pair_id(s)}" for m, s, _ in TF32_TILE_CASES])
def test_tf32_tiles_read_b_as_it_is(method, shapes, tile, case, rng):
    skip_unless_hopper(method)
    float32 = numpy.dtype(numpy.float32)
    a = reference.random_array(shapes[0], float32, rng)
    b = reference.random_array(shapes[1], float32, rng)
    da, db = cupy.asarray(a), cupy.asarray(b)
    if case == "b-transposed-view":  # the same values, column-major: copied into a stack
        db = cupy.ascontiguousarray(db.swapaxes(-1, -2)).swapaxes(-1, -2)
    shape = numpy.matmul(a, b).shape
    out = poisoned(shape, float32)
    if case == "unaligned-out":  # rows of C start 4 bytes past 16-byte boundaries
        out = poisoned((1 + out.size,), float32)[1:].reshape(shape)
    with record_launches() as launches:
        got = gk.matmul(da, db, method=method, out=out, precision="tf32")
    names = [launch.instance for launch in launches]
    products = [name for name in names if name.startswith(f"matmul_{method}<")]
    assert products == [matmul_rungs.hopper_instance(method, float32, tile)], names
    if method == "split_k":
        assert launches[-2].grid[2] > 1, names  # K really is split
        assert names[-1].startswith("matmul_split_k_sum<"), names
    if case != "b-transposed-view":  # no transpose of B
        assert len(launches) == (2 if method == "split_k" else 1), names
    assert_right_and_repeatable(got, out, (a, b, da, db), method,
                                f"{method} {case} {pair_id(shapes)}", precision="tf32")


def assert_read_as_they_lie(method, operands, out, orders, context):
    """``gk.matmul(da, db, out=out)`` launches one product instance, whose name ends with
    ``orders`` (how it reads the transposed views among the operands), and no copy (split_k:
    its sum too); the result is right, repeatable, and bitwise that of the operands' row-major
    copies (the same sums in the same order). ``operands`` is (a, b, da, db)."""
    da, db = operands[2:]
    with record_launches() as launches:
        got = gk.matmul(da, db, method=method, out=out)
    products = [launch.instance for launch in launches
                if launch.instance.startswith(f"matmul_{method}<")]
    assert len(products) == 1 and products[0].endswith(orders), launches
    assert len(launches) == (2 if method == "split_k" else 1), launches  # no copy
    assert_right_and_repeatable(got, out, operands, method, context)
    copied = gk.matmul(da.copy(), db.copy(), method=method)  # row-major: the first instance
    assert cupy.asnumpy(copied).tobytes() == cupy.asnumpy(got).tobytes()


#: (method, (M, K, N, batch of x, batch of W)) for x @ W.T on the Hopper rungs, one per tile
#: geometry: 128 x 256 with N ragged, 128 x 192, 64-row tiles (their warpgroups split the
#: columns), 128 x 64, split_k's slices of K, a stack of W, one W broadcast over a stack of x,
#: and K a multiple of 8 but not of 64 (the last stage's K past the end arrives as zeros).
W_T_CASES = [("wgmma", (1000, 136, 3000, (), ())), ("wgmma", (1536, 304, 6144, (), ())),
             ("wgmma", (40, 520, 700, (), ())), ("wgmma", (700, 256, 64, (), ())),
             ("split_k", (300, 4000, 150, (), ())), ("wgmma", (260, 1000, 2900, (2,), (2,))),
             ("split_k", (100, 3000, 192, (2,), ())), ("multicast", (1000, 136, 3000, (), ())),
             ("multicast", (300, 1000, 600, (3,), (3,)))]


@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize(("method", "case"), W_T_CASES,
                         ids=[f"{m}-{c[0]}x{c[1]}x{c[2]}-{len(c[3])}{len(c[4])}" for m, c in W_T_CASES])
def test_hopper_rungs_read_w_transposed_as_it_is(method, case, kind, rng):
    # x @ W.T with W row-major: B's columns are K-contiguous, and the rungs read them K-major
    # through W's own tensor map (the instances ending `true`), with no copy; the same sums in
    # the same order as for W.T.copy(), so the same bits
    skip_unless_hopper(method)
    dtype, _ = KINDS[kind]
    M, K, N, x_batch, w_batch = case
    x = reference.random_array((*x_batch, M, K), dtype, rng)
    w = reference.random_array((*w_batch, N, K), dtype, rng)
    dx, dw = cupy.asarray(x), cupy.asarray(w)
    b, db = numpy.swapaxes(w, -1, -2), dw.swapaxes(-1, -2)
    out = poisoned(numpy.matmul(x[..., :1, :1], b[..., :1, :]).shape[:-2] + (M, N), dtype)
    assert_read_as_they_lie(method, (x, b, dx, db), out, ", true>", f"{method} x @ W.T {case}")


#: (method, (M, K, N, batch of X, batch of B)) for X.T @ B on the Hopper rungs (X row-major,
#: (K, M): A's columns are M-contiguous), one per tile geometry as W_T_CASES, M a multiple of 8
#: (X's rows whole 16-byte units): 128 x 256 with N ragged, 128 x 192, 64-row tiles (M = 40:
#: one box of 64 columns of M, read in part), 128 x 64, split_k's slices of K, stacks of X and B,
#: one B broadcast over a stack of X, one X over a stack of B, multicast's clusters.
X_T_CASES = [("wgmma", (1000, 136, 3000, (), ())), ("wgmma", (1536, 304, 6144, (), ())),
             ("wgmma", (40, 520, 700, (), ())), ("wgmma", (704, 256, 64, (), ())),
             ("split_k", (304, 4000, 152, (), ())), ("wgmma", (264, 1000, 2896, (2,), (2,))),
             ("split_k", (104, 3000, 192, (2,), ())), ("wgmma", (1000, 136, 600, (), (2,))),
             ("multicast", (1000, 136, 3000, (), ())), ("multicast", (304, 1000, 600, (3,), (3,)))]


@pytest.mark.parametrize("b_layout", ["B", "W.T"])
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize(("method", "case"), X_T_CASES,
                         ids=[f"{m}-{c[0]}x{c[1]}x{c[2]}-{len(c[3])}{len(c[4])}" for m, c in X_T_CASES])
def test_hopper_rungs_read_x_transposed_as_it_is(method, case, kind, b_layout, rng):
    # X.T @ B with X row-major (a Gram matrix X.T @ X, a weight's gradient): A's columns are
    # M-contiguous, and the rungs read them M-major through X's own tensor map (the instances
    # ending `false, true` for a row-major B, `true, true` for B = W.T, read K-major too), with
    # no copy; the same sums in the same order as for X.T.copy(), so the same bits
    skip_unless_hopper(method)
    dtype, _ = KINDS[kind]
    M, K, N, x_batch, b_batch = case
    x = reference.random_array((*x_batch, K, M), dtype, rng)
    a, da = numpy.swapaxes(x, -1, -2), cupy.asarray(x).swapaxes(-1, -2)
    if b_layout == "B":
        b = reference.random_array((*b_batch, K, N), dtype, rng)
        db = cupy.asarray(b)
    else:
        w = reference.random_array((*b_batch, N, K), dtype, rng)
        b, db = numpy.swapaxes(w, -1, -2), cupy.asarray(w).swapaxes(-1, -2)
    out = poisoned(numpy.matmul(a[..., :1, :1], b[..., :1, :]).shape[:-2] + (M, N), dtype)
    orders = ", true, true>" if b_layout == "W.T" else ", false, true>"
    assert_read_as_they_lie(method, (a, b, da, db), out, orders, f"{method} X.T @ {b_layout}")


@pytest.mark.parametrize("view", ["X.T @ B", "x @ W.T"])
@pytest.mark.parametrize("method", ["wgmma", "split_k"])
def test_hopper_rungs_copy_transposed_views_whose_rows_tma_cannot_read(method, view, rng):
    # X's rows of M = 203 (406 bytes) and W's of K = 130 (260 bytes) are not multiples of 16
    # bytes, so TMA cannot read them either way; the rungs copy the operand into a padded stack,
    # as before (no instance that reads a transposed view), and the result is still right
    skip_unless_hopper(method)
    if view == "X.T @ B":
        x = reference.random_array((1000, 203), numpy.float16, rng)
        b = reference.random_array((1000, 300), numpy.float16, rng)
        a, da, db = x.T, cupy.asarray(x).T, cupy.asarray(b)
    else:
        a = reference.random_array((300, 130), numpy.float16, rng)
        w = reference.random_array((200, 130), numpy.float16, rng)
        b, da, db = w.T, cupy.asarray(a), cupy.asarray(w).T
    out = poisoned((a.shape[0], b.shape[1]), numpy.float16)
    with record_launches() as launches:
        got = gk.matmul(da, db, method=method, out=out)
    # the instances that read a transposed view end with `true>` (`true>`, `false, true>` or
    # `true, true>`)
    assert not any(launch.instance.endswith(", true>") for launch in launches), launches
    assert_right_and_repeatable(got, out, (a, b, da, db), method, f"{method} {view}")


#: (method, shapes) where the 16-bit types take the 128 x 192 tile: wgmma where its waves cost
#: least (one wave of 96 tiles against the wide tiles' 72, batched, N ragged and not a multiple
#: of 8; two waves against three), split_k where N is at most 192 (none of the wide tiles'
#: columns of zeros).
MID_TILE_CASES = [("wgmma", ((700, 200), (200, 3000))), ("wgmma", ((2, 260, 1000), (1000, 2900))),
                  ("wgmma", ((1536, 300), (300, 6144))), ("split_k", ((300, 4000), (4000, 150))),
                  ("split_k", ((2, 100, 3000), (3000, 192)))]


@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize(("method", "shapes"), MID_TILE_CASES,
                         ids=[f"{m}-{pair_id(s)}" for m, s in MID_TILE_CASES])
def test_16_bit_types_take_the_mid_tile(method, shapes, kind, rng):
    skip_unless_hopper(method)
    dtype, _ = KINDS[kind]
    a, b, da, db, out = random_operands(shapes, dtype, rng)
    with record_launches() as launches:
        got = gk.matmul(da, db, method=method, out=out)
    names = [launch.instance for launch in launches]
    products = [name for name in names if name.startswith(f"matmul_{method}<")]
    assert products == [matmul_rungs.hopper_instance(method, dtype, matmul_rungs.WGMMA_MID_TILE)]
    if method == "split_k":
        assert launches[-2].grid[2] > 1, names  # K really is split
    if method == "wgmma":  # auto takes the same tile
        with record_launches() as auto_launches:
            gk.matmul(da, db)
        assert [launch.instance for launch in auto_launches] == names
    assert_right_and_repeatable(got, out, (a, b, da, db), method, f"{method} {pair_id(shapes)}")


# Products of more tiles than the device has SMs: wgmma's 16-bit blocks then walk several tiles
# each (their ring's stages numbered across tiles), with edges in M, N and K, a batch, and each
# tile width (128 x 256 / 192 / 128 / 64, 64-row tiles). Where rows of C are not whole 16-byte
# words (N not a multiple of 8) each block takes one tile.
PERSISTENT_SHAPES = [((2200, 100), (100, 4504)), ((2, 1500, 70), (2, 70, 3000)),
                     ((20000, 130), (130, 104)), ((20000, 64), (64, 56)), ((64, 40), (40, 67000)),
                     ((64, 40), (40, 40000)), ((1, 2600, 130), (130, 2704)),
                     ((2200, 100), (100, 4500)), ((1000, 70), (70, 5001))]


def walking_launch(method, shapes, kind, rng):
    """A Hopper rung's product of random operands of ``shapes`` into a poisoned result: the
    operands (host, then device), the result, and the rung's one product launch."""
    skip_unless_hopper(method)
    dtype, _ = KINDS[kind]
    a, b, da, db, out = random_operands(shapes, dtype, rng)
    with record_launches() as launches:
        got = gk.matmul(da, db, method=method, out=out)
    (launch,) = [launch for launch in launches if launch.instance.startswith(f"matmul_{method}<")]
    return (a, b, da, db), got, out, launch


@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("shapes", PERSISTENT_SHAPES, ids=pair_id)
def test_wgmma_blocks_walk_several_tiles(shapes, kind, rng):
    operands, got, out, launch = walking_launch("wgmma", shapes, kind, rng)
    tile = [int(word) for word in launch.instance.split(",")[2:4]]
    M, N = shapes[0][-2], shapes[1][-1]
    tiles = -(-M // tile[0]) * -(-N // tile[1])
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    if N % 8 == 0:
        assert launch.grid[0] == sms < tiles, (launch.instance, launch.grid, tiles)
    else:
        assert launch.grid[0] == tiles > sms, (launch.instance, launch.grid, tiles)
    assert_right_and_repeatable(got, out, operands, "wgmma", f"wgmma {pair_id(shapes)}")


# --- multicast ---------------------------------------------------------------------------------

#: Clusters walking pairs of row tiles: an odd count of row tiles (the last pair's second tile
#: all rows past M), a single tile, more pairs than clusters (each walks several), batched and
#: broadcast operands, N not a multiple of 8.
MULTICAST_SHAPES = [((300, 264), (264, 389)), ((1, 1), (1, 1)), ((1100, 72), (72, 8200)),
                    ((4, 513, 777), (777, 1030)), ((129, 320), (3, 320, 257)),
                    ((2000, 1000), (1000, 2048)), ((640, 130), (130, 3001))]


@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("shapes", MULTICAST_SHAPES, ids=pair_id)
def test_multicast_clusters_walk_pairs_of_row_tiles(shapes, kind, rng):
    operands, got, out, launch = walking_launch("multicast", shapes, kind, rng)
    M, N = shapes[0][-2], shapes[1][-1]
    pairs = -(-M // 256) * -(-N // 256)
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    # two blocks a cluster, as many clusters as pairs of a matrix up to those the GPU runs at once
    resident = resident_clusters(matmul_rungs.LADDER["multicast"].source, launch.instance,
                                 launch.block[0], launch.shared_mem, 2)
    assert 2 * resident <= sms
    assert launch.grid[0] == 2 * min(pairs, resident), (launch.grid, pairs, resident)
    assert_right_and_repeatable(got, out, operands, "multicast", f"multicast {pair_id(shapes)}")
    # the same tiles, stages and order of sums as wgmma's 128 x 256 tile: the same bytes
    with record_launches() as launches:
        wgmma = gk.matmul(*operands[2:], method="wgmma")
    if any(launch.instance.startswith("matmul_wgmma<") and ", 128, 256, 4," in launch.instance
           for launch in launches):
        assert cupy.asnumpy(wgmma).tobytes() == cupy.asnumpy(got).tobytes()


# --- split_k ----------------------------------------------------------------------------------------

SPLIT_SHAPES = [((128, 8192), (8192, 64)), ((3, 100, 3000), (3000, 70)), ((64, 5000), (2, 5000, 33)),
                ((1, 4100), (4100, 300)), ((48, 6000), (6000, 200)), ((16, 6000), (6000, 100))]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shapes", SPLIT_SHAPES, ids=pair_id)
def test_split_k_sums_its_slices_in_one_order(shapes, kind, rng):
    skip_unless_hopper("split_k")
    dtype, precision = KINDS[kind]
    a, b, da, db, out = random_operands(shapes, dtype, rng)
    with record_launches() as launches:
        got = gk.matmul(da, db, method="split_k", out=out, precision=precision)
    names = [launch.instance.split("<")[0] for launch in launches]
    assert names[-2:] == ["matmul_split_k", "matmul_split_k_sum"], names
    assert launches[-2].grid[2] > 1  # K really is split
    assert_right_and_repeatable(got, out, (a, b, da, db), "split_k", f"split_k {pair_id(shapes)}",
                                precision=precision)


# --- gemv: a few rows of A ------------------------------------------------------------------------

# (M, K, N): rows around gemv's row tiles of 8 and 16 and past them, columns around its 64-column
# tiles and not whole 16-byte words, K from one row to enough for several splits of K.
GEMV_SHAPES = [(1, 1, 1), (1, 16, 64), (1, 17, 65), (7, 129, 63), (8, 300, 8), (9, 1000, 520),
               (16, 4097, 1000), (17, 100, 130), (33, 64, 200), (1, 8192, 4096), (16, 6000, 2050),
               (3, 20000, 72)]


@pytest.mark.parametrize("dtype", [numpy.dtype(numpy.float16), BFLOAT16], ids=str)
@pytest.mark.parametrize("layout", ["as-is", "b-unaligned", "b-column-major", "batched",
                                    "reversed", "a-strided"])
@pytest.mark.parametrize("shape", GEMV_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gemv_products_of_few_rows(shape, layout, dtype, rng):
    # Every layout of B the rung reads (16-byte words, elements one at a time), splits of K
    # folded by the last block, results poisoned first and repeated bit for bit. Where K is a
    # multiple of 8 and A's rows are whole words, blocks whose 64 columns lie inside N take
    # the loop of whole words and the last column tile the one that checks each edge; A read
    # every other element ("a-strided") sends every block to the latter.
    M, K, N = shape
    a = reference.random_array((M, K), dtype, rng)
    b = reference.random_array((K, N), dtype, rng)
    da, db = cupy.asarray(a), cupy.asarray(b)
    if layout == "a-strided":
        da = cupy.asarray(numpy.repeat(a, 2, axis=1))[:, ::2]
    elif layout == "b-unaligned":  # rows start one element past 16-byte boundaries
        db = cupy.asarray(numpy.concatenate([numpy.zeros(1, dtype), b.ravel()]))[1:].reshape(K, N)
    elif layout == "b-column-major":
        db = cupy.ascontiguousarray(db.T).T
    elif layout == "batched":  # A broadcast over three products of B
        b = numpy.stack([b, -b, b[::-1]])
        db = cupy.asarray(b)
    elif layout == "reversed":
        a, b = a[::-1], b[::-1, ::-1]
        da, db = da[::-1], db[::-1, ::-1]
    out = poisoned(numpy.matmul(a, b).shape, dtype)
    with record_launches() as launches:
        got = gk.matmul(da, db, method="gemv", out=out)
    assert [launch.rung for launch in launches] == ["gemv"] * len(launches) and launches
    assert_right_and_repeatable(got, out, (a, b, da, db), "gemv", f"gemv {shape} {layout}")


@pytest.mark.parametrize("M", [1, 16])
def test_gemv_decode_step_splits_k(M, rng):
    # M rows of 8192 against 8192 x 1024 (16 column tiles): K split over several blocks a
    # column tile on any GPU, the ticket of each tile back at 0 for the next call (the same
    # bytes again).
    a, b, da, db, out = random_operands(((M, 8192), (8192, 1024)), numpy.float16, rng)
    with record_launches() as launches:
        got = gk.matmul(da, db, out=out, method="gemv")
    assert [launch.rung for launch in launches] == ["gemv"], launches
    assert launches[0].grid[1] > 1  # K is split
    assert_right_and_repeatable(got, out, (a, b, da, db), "gemv", f"decode {M}x8192x1024")


@pytest.mark.parametrize("dtype", [numpy.dtype(numpy.float16), BFLOAT16], ids=str)
@pytest.mark.parametrize("M", [1, 16])
@pytest.mark.parametrize("K", [4099, 4096])
@pytest.mark.parametrize("width, layout", [(4104, matmul_rungs.GEMV_COLUMN_WORDS),
                                           (4100, matmul_rungs.GEMV_COLUMNS)])
def test_auto_reads_w_transposed_in_gemv(width, layout, K, M, dtype, rng):
    # x @ W.T with W row-major (a linear layer's decode step): B's columns are K-contiguous.
    # auto takes gemv (on Hopper too, where wgmma and split_k would copy B every call), which
    # reads the columns as whole words: 16 bytes where W's rows are ``width`` = 4104 elements
    # apart, 8 where they are 4100. K = 4099 of them read: the last word of each column is
    # read in part; K = 4096: 15 column tiles of whole words and a last one of 40 columns.
    N = 1000
    a = reference.random_array((M, K), dtype, rng)
    w = reference.random_array((N, K), dtype, rng)
    da = cupy.asarray(a)
    padded = numpy.zeros((N, width), dtype)
    padded[:, :K] = w
    dw = cupy.asarray(padded)[:, :K]
    out = poisoned((M, N), dtype)
    with record_launches() as launches:
        got = gk.matmul(da, dw.T, out=out)
    assert [launch.rung for launch in launches] == ["gemv"], launches
    assert launches[0].instance.endswith(f", {layout}>"), launches
    assert_right_and_repeatable(got, out, (a, w.T, da, dw.T), "gemv", f"x @ W.T {M}x{K}x{N}")


@pytest.mark.parametrize("M", [1, 8, 9, 16])
def test_auto_takes_gemv_for_decode_steps(M, rng):
    # 8192 x 8192: gemv for every M here off Hopper; on Hopper in split_k's place up to
    # GEMV_HOPPER_MAX_ROWS rows (one launch, not two), split_k past them.
    a, b, da, db, out = random_operands(((M, 8192), (8192, 8192)), numpy.float16, rng)
    with record_launches() as launches:
        got = gk.matmul(da, db, out=out)
    hopper = int(cupy.cuda.Device().compute_capability) == 90
    split_k = hopper and M > matmul_rungs.GEMV_HOPPER_MAX_ROWS
    assert {launch.rung for launch in launches} == {"split_k" if split_k else "gemv"}, launches
    assert_right_and_repeatable(got, out, (a, b, da, db), "split_k" if split_k else "gemv",
                                f"decode {M}x8192x8192")
