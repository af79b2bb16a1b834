"""permute_dims and transpose(x, axes): every rung against NumPy's transpose(x, axes).

Outputs start poisoned (every byte 0xFF), so an element a kernel forgets to write shows; the
data is fresh random bits of every dtype; layouts cover odd lengths, size-1 and empty axes,
strided and reversed views, up to 8 axes, and both index widths.
"""

from __future__ import annotations

import itertools

import numpy
import pytest

import gpukernels as gk
from gpukernels._core import floats
from gpukernels._core.launch import record_launches
from gpukernels.ops.permute import _as_matrices, merge_axes, normalize_axes
from gpukernels.validation import poisoned

RUNGS = gk.methods("permute_dims")
DTYPES = ("bool", "int8", "float16", "bfloat16", "float32", "float64", "complex128")


# ---- CPU: axes ----------------------------------------------------------------------------

@pytest.mark.parametrize("ndim", [0, 1, 2, 3, 5])
def test_normalize_axes_agrees_with_numpy(ndim):
    x = numpy.zeros((2, 3, 4, 5, 6)[:ndim])  # distinct lengths: the shape names the axes
    for axes in itertools.permutations(range(ndim)):
        negative = tuple(a - ndim if a % 2 else a for a in axes)
        assert normalize_axes(negative, ndim) == axes
        assert tuple(x.shape[a] for a in axes) == numpy.transpose(x, negative).shape
    assert normalize_axes(None, ndim) == tuple(reversed(range(ndim)))


@pytest.mark.parametrize(("axes", "error"), [
    ((0, 0, 1), ValueError), ((0, 1), ValueError), ((0, 1, 2, 3), ValueError),
    ((0, 1, 3), numpy.exceptions.AxisError), ((0, 1, -4), numpy.exceptions.AxisError),
    ((0, 1.0, 2), TypeError), ((True, 0, 2), TypeError), (5, ValueError), ("012", TypeError)])
def test_normalize_axes_errors_are_numpys(axes, error):
    with pytest.raises(error):
        normalize_axes(axes, 3)
    with pytest.raises(error):
        numpy.transpose(numpy.zeros((2, 3, 4)), axes)


def test_dtypes_without_kernels_are_refused():
    from gpukernels.ops.permute import _check_dtype

    for dtype in ("datetime64[s]", "U3", "O", "V4"):
        with pytest.raises(TypeError, match="permute_dims supports"):
            _check_dtype(numpy.dtype(dtype))
    assert _check_dtype(numpy.dtype("complex128")) == numpy.complex128
    assert _check_dtype(floats.BFLOAT16) == floats.BFLOAT16


def test_merge_axes():
    # (256, 512, 512) float32, element strides (262144, 512, 1)
    assert merge_axes((512, 256, 512), (1, 262144, 512)) == ((512, 131072), (1, 512))  # (2,0,1)
    assert merge_axes((512, 256, 512), (512, 262144, 1)) == ((512, 256, 512), (512, 262144, 1))
    assert merge_axes((256, 1, 512, 512), (262144, 7, 512, 1)) == ((67108864,), (1,))
    assert merge_axes((1, 1), (3, 5)) == ((), ())
    assert merge_axes((4, 6), (-6, 1)) == ((4, 6), (-6, 1))  # reversed rows do not merge


def test_stacks_of_matrix_transposes():
    """Merged permutations that are stacks of matrix transposes reading contiguous rows:
    (batch, rows, cols) with input strides, and the output's (batch, row) strides."""
    # (2, 0, 1) of (7, 5, 3): the output's first axis is contiguous in the input
    assert _as_matrices((3, 35), (1, 3)) == ((1, 35, 3), (0, 3, 1), (105, 35))
    # (0, 2, 1) of (4, 5, 3): a C-contiguous stack of 4
    assert _as_matrices((4, 3, 5), (15, 1, 3)) == ((4, 5, 3), (15, 3, 1), (15, 5))
    # (2, 1, 0) of (7, 5, 3): the stack runs along the output's middle axis, so each matrix is a
    # plane of the output with rows 7 elements long, 35 apart, and matrices 7 apart
    assert _as_matrices((3, 5, 7), (1, 3, 15)) == ((5, 7, 3), (3, 15, 1), (7, 35))
    # not a stack: nothing contiguous along the output's first two axes, or four axes
    assert _as_matrices((3, 5, 7), (5, 35, 1)) is None
    assert _as_matrices((3, 5, 7), (-1, 3, 15)) is None
    assert _as_matrices((2, 3, 5, 7), (1, 2, 6, 30)) is None


def test_vector_words_only_where_the_layout_allows_them():
    """permute_vector's 16-byte words need the input contiguous along the tile axis, both
    tiled lengths and every other stride in whole words, and aligned addresses; auto takes the
    rung only with words, tiled otherwise."""
    from gpukernels.ops.permute import rungs

    def problem(itemsize=4, lengths=(256, 128, 64, 32), strides=(1, 256, 32768, 2097152),
                in_address=0, out_address=0):
        return rungs.Problem(itemsize, lengths, strides, in_address, out_address, "int")

    # (32, 64, 128, 256) float32 with axes (3, 2, 1, 0): 8 blocks of 4 along P, joined to the
    # 64 of the axis before it (the output is contiguous across both): 32 tiles of 16 blocks
    assert rungs.vector_width(problem()) == 4
    assert rungs.vector_tile(problem()) == rungs.VECTOR_TILES[4]
    assert rungs.choose(problem()) is rungs.VECTOR
    assert rungs.joined_axes(problem()) == (2, 3)
    planned = rungs.plan_vector(problem())
    assert planned.launch.grid == (256 // 4 // 16, 64 * 32 // 4 // 16, 128)
    assert planned.launch.block == (256, 1, 1)
    # the axis before the last is the tile axis: the last alone
    assert rungs.joined_axes(problem(lengths=(8, 64, 32), strides=(2048, 1, 64))) == (2,)
    assert rungs.joined_axes(problem(lengths=(64, 32), strides=(1, 64))) == (1,)
    assert rungs.vector_width(problem(itemsize=2)) == 8
    assert rungs.vector_width(problem(itemsize=1, lengths=(256, 128, 64, 32))) == 16
    for refused in (problem(in_address=4), problem(out_address=8),
                    problem(lengths=(256, 128, 64, 30)),  # P not whole words
                    problem(lengths=(254, 128, 64, 32)),  # Q not whole words
                    problem(strides=(1, 258, 32768, 2097152)),  # a folded stride
                    problem(strides=(1, 256, 32768, 2097154)),  # P's stride
                    problem(strides=(2, 256, 32768, 2097152)),  # Q not contiguous
                    problem(itemsize=8)):
        assert rungs.vector_width(refused) == 1, refused
        assert rungs.vector_tile(refused) == rungs.VECTOR_SCALAR_TILE
        assert rungs.choose(refused) is rungs.TILED
    keeps_last = problem(strides=(256, 32768, 2097152, 1))
    assert rungs.vector_width(keeps_last) == 1 and rungs.choose(keeps_last) is rungs.ROWS


# ---- GPU: every rung against NumPy -------------------------------------------------------------

cupy = pytest.importorskip("cupy")


def _random(shape, dtype, rng):
    """Random bits of ``dtype`` (every byte pattern, NaNs included)."""
    dtype = numpy.dtype(dtype)
    raw = rng.integers(0, 256, int(numpy.prod(shape)) * dtype.itemsize, dtype=numpy.uint8)
    if dtype.kind == "b":
        return (raw[:int(numpy.prod(shape))] & 1).astype(bool).reshape(shape)
    return raw.view(dtype).reshape(shape)


def _check(x_host, x, axes, method, **kwargs):
    want = numpy.transpose(x_host, axes).copy(order="C")  # (ascontiguousarray makes 0-d 1-d)
    out = poisoned(want.shape, want.dtype)
    got = gk.permute_dims(x, axes, method=method, out=out, **kwargs)
    assert got is out
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.get().tobytes() == want.tobytes()  # every bit (NaN payloads included)
    again = gk.permute_dims(x, axes, method=method)
    assert again.flags.c_contiguous and again.shape == want.shape
    assert again.get().tobytes() == got.get().tobytes()


LAYOUTS = [
    ((3, 5, 7), (2, 0, 1)), ((3, 5, 7), (1, 0, 2)), ((3, 5, 7), (2, 1, 0)), ((3, 5, 7), (0, 2, 1)),
    ((33, 65, 17), (1, 2, 0)), ((40, 1, 70), (2, 1, 0)), ((2, 3, 4, 5), (3, 2, 1, 0)),
    ((2, 3, 4, 5), (0, 2, 1, 3)), ((6, 70, 9, 33), (1, 3, 0, 2)), ((129, 67), (1, 0)),
    ((2, 1, 3, 1, 2, 3, 2, 2), (7, 0, 6, 1, 5, 2, 4, 3)), ((2,) * 8, tuple(range(7, -1, -1))),
    ((2,) * 9, (1, 0, 2, 3, 4, 5, 6, 8, 7)),  # 9 axes that merge into 4
    ((1000,), (0,)), ((), ()), ((0, 4, 5), (2, 0, 1)), ((5, 4, 3), (0, 1, 2)),
]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("method", RUNGS + ("auto",))
@pytest.mark.parametrize(("shape", "axes"), LAYOUTS, ids=[f"{s}-{a}" for s, a in LAYOUTS])
def test_every_rung_matches_numpy(shape, axes, method, dtype, rng, index_width):
    x_host = _random(shape, dtype, rng)
    x = cupy.asarray(x_host)
    if method == "rows" and not _keeps_last(shape, axes, x.strides, x.itemsize):
        with pytest.raises(ValueError, match="rows that stay contiguous"):
            gk.permute_dims(x, axes, method=method)
        return
    _check(x_host, x, axes, method)


def _keeps_last(shape, axes, strides, itemsize):
    if 0 in shape:
        return True  # nothing to launch: every rung takes it
    lengths, in_strides = merge_axes(tuple(shape[a] for a in axes),
                                     tuple(strides[a] // itemsize for a in axes))
    return not lengths or in_strides[-1] == 1


@pytest.mark.gpu
@pytest.mark.parametrize("method", RUNGS + ("auto",))
def test_more_than_8_axes_after_merging_are_refused(method):
    x = cupy.zeros((2,) * 9, cupy.float32)
    with pytest.raises(ValueError, match="up to 8 axes"):
        gk.permute_dims(x, tuple(range(8, -1, -1)), method=method)


@pytest.mark.gpu
@pytest.mark.parametrize("method", RUNGS + ("auto",))
@pytest.mark.parametrize("view", ["reversed", "strided", "sliced", "transposed"])
def test_views(method, view, rng):
    base_host = _random((12, 34, 56), "float32", rng)
    base = cupy.asarray(base_host)
    views = {"reversed": (slice(None, None, -1), slice(None), slice(None, None, -2)),
             "strided": (slice(None, None, 2), slice(1, None, 3), slice(None)),
             "sliced": (slice(1, 10), slice(3, 30), slice(5, 50))}
    if view == "transposed":
        x, x_host = base.transpose(1, 2, 0), base_host.transpose(1, 2, 0)
    else:
        x, x_host = base[views[view]], base_host[views[view]]
    for axes in itertools.permutations(range(3)):
        try:
            _check(x_host, x, axes, method)
        except ValueError as error:
            assert method == "rows" and "rows that stay contiguous" in str(error)


@pytest.mark.gpu
@pytest.mark.parametrize(("shape", "axes", "kernel"), [
    ((256, 64, 96), (2, 0, 1), "transpose_"),  # merges into a matrix transpose
    ((6, 64, 96), (0, 2, 1), "transpose_"),  # a batch of them
    ((64, 32, 96), (1, 0, 2), "permute_rows"),  # the contiguous axis stays last
    ((8, 16, 32, 64), (3, 2, 1, 0), "permute_vector<unsigned int, int, 4, 16, 16,"),
    ((2, 3, 4, 5), (3, 2, 1, 0), "permute_tiled"),  # lengths that are no whole 16-byte words
    ((64, 64, 64), (2, 1, 0), "transpose_"),  # matrices written to planes of the output
    ((64, 64, 64), (1, 2, 0), "transpose_"),  # merges into a matrix transpose
    ((4, 64, 64, 64), (3, 2, 1, 0), "permute_vector<unsigned int, int, 4, 16, 16,"),
    ((4, 3, 16, 16), (0, 2, 3, 1), "transpose_narrow"),  # images to channels-last
    ((4, 16, 16, 3), (0, 3, 1, 2), "transpose_narrow"),  # and back
])
def test_auto_picks(shape, axes, kernel):
    x = cupy.zeros(shape, cupy.float32)
    with record_launches(dry_run=True) as launches:
        gk.permute_dims(x, axes)
    assert len(launches) == 1 and launches[0].instance.startswith(kernel), launches


# Layouts whose lengths and strides take permute_vector's 16-byte words (V = 16 / itemsize
# elements along both tiled axes): partial tiles along Q and along the last two output axes
# joined (tiles that straddle the axis before the last), P shorter and longer than a tile, the
# axis before the last the tile axis (not joined, the (0, 2, 1) layouts), several tiles each
# way, folded axes of 0 to 3 dimensions.
VECTOR_LAYOUTS = {
    4: [((36, 5, 3, 200), (3, 2, 1, 0)), ((8, 5, 3, 260), (3, 2, 1, 0)),
        ((12, 7, 100), (2, 1, 0)), ((4, 3, 2, 5, 132), (4, 1, 3, 2, 0)), ((3, 20, 44), (0, 2, 1)),
        ((68, 40), (1, 0))],
    2: [((24, 3, 5, 136), (3, 2, 1, 0)), ((136, 2, 3, 40), (3, 2, 1, 0)), ((8, 3, 8), (2, 1, 0)),
        ((3, 24, 40), (0, 2, 1))],
    1: [((48, 3, 2, 80), (3, 2, 1, 0)), ((272, 2, 3, 48), (3, 2, 1, 0)), ((16, 5, 16), (2, 1, 0)),
        ((2, 32, 48), (0, 2, 1))],
}
VECTOR_CASES = [(shape, axes, dtype) for itemsize, dtypes in
                ((4, ("float32", "int32")), (2, ("float16", "bfloat16")), (1, ("int8", "bool")))
                for shape, axes in VECTOR_LAYOUTS[itemsize] for dtype in dtypes]


@pytest.mark.gpu
@pytest.mark.parametrize(("shape", "axes", "dtype"), VECTOR_CASES,
                         ids=[f"{s}-{a}-{d}" for s, a, d in VECTOR_CASES])
@pytest.mark.parametrize("view", ["contiguous", "reversed", "offset"])
def test_vector_words_on_every_edge(shape, axes, dtype, view, rng, index_width):
    """The vector rung with 16-byte words (and, on an input view that is not 16-byte aligned,
    without them): every bit against NumPy on a poisoned result, the kernel's V as planned."""
    x_host = _random(shape, dtype, rng)
    x = cupy.asarray(x_host)
    if view == "reversed":  # the output's last axis (the input's first) read backwards
        x_host, x = x_host[::-1], x[::-1]
    if view == "offset":  # the same layout one element into a larger allocation
        padded = cupy.asarray(_random((x.size + 1,), dtype, rng))
        padded[1:] = x.reshape(-1)
        x = padded[1:].reshape(shape)
    with record_launches() as launches:
        _check(x_host, x, axes, "vector")
    words = launches[0].instance.split(", ")[2]
    itemsize = numpy.dtype(dtype).itemsize
    assert words == ("1" if view == "offset" else str(16 // itemsize)), launches[0].instance
    if view != "offset":
        auto = gk.permute_dims(x, axes)  # auto takes vector (or the transpose ladder) here
        assert auto.get().tobytes() == numpy.transpose(x_host, axes).tobytes()


PLANES = [((70, 3, 300), "int8"), ((33, 65, 17), "int8"), ((256, 2, 512), "int8"),
          ((255, 3, 513), "float16"), ((128, 5, 64), "float16"), ((31, 4, 37), "float32"),
          ((64, 6, 32), "float32"), ((9, 7, 11), "complex128"),
          ((3, 5, 1000), "float32"), ((1000, 4, 7), "int8")]  # narrow rows, narrow columns


@pytest.mark.gpu
@pytest.mark.parametrize("method", gk.methods("transpose"))
@pytest.mark.parametrize(("shape", "dtype"), PLANES, ids=[f"{s}-{d}" for s, d in PLANES])
def test_every_transpose_rung_writes_planes(shape, dtype, method, rng, index_width):
    """Axes (2, 1, 0) run as a stack of matrix transposes whose outputs are planes of the
    result (rows `shape[0]` long, `shape[0] * shape[1]` apart): every transpose rung that takes
    the item size, on aligned and odd row lengths, against NumPy, on a poisoned result."""
    from gpukernels.ops import transpose as transpose_op
    x_host = _random(shape, dtype, rng)
    x = cupy.asarray(x_host)
    want = numpy.ascontiguousarray(numpy.transpose(x_host, (2, 1, 0)))
    result = poisoned(want.shape, want.dtype)
    (matrices_shape, strides, out_strides) = _as_matrices(want.shape, (1, shape[2],
                                                                       shape[1] * shape[2]))
    matrices = cupy.ndarray(matrices_shape, x.dtype, memptr=x.data,
                            strides=tuple(stride * x.itemsize for stride in strides))
    rung = transpose_op.LADDER[method]
    try:
        planned = transpose_op._plan(matrices, rung, result.data.ptr % 256, out_strides)
    except (TypeError, ValueError) as error:  # the rung does not take this item size or shape
        assert method.startswith("words") or method in ("narrow", "runs"), error
        return
    planned(matrices, result)
    assert result.get().tobytes() == want.tobytes()


@pytest.mark.gpu
def test_planes_past_one_launch(rng):
    """More than 65535 matrices along the output's middle axis: several launches, each
    starting at its first plane."""
    x_host = rng.integers(0, 100, (3, 70000, 2), dtype=numpy.int16)
    x = cupy.asarray(x_host)
    with record_launches() as launches:
        got = gk.permute_dims(x, (2, 1, 0))
    assert len(launches) == 2 and all(r.instance.startswith("transpose_") for r in launches)
    assert numpy.array_equal(got.get(), numpy.transpose(x_host, (2, 1, 0)))


@pytest.mark.gpu
def test_transpose_with_axes_is_permute_dims(rng):
    x_host = rng.random((4, 5, 6), dtype=numpy.float32)
    x = cupy.asarray(x_host)
    for axes in ((2, 0, 1), [1, 2, 0], (-1, -3, -2)):
        assert numpy.array_equal(gk.transpose(x, axes).get(), numpy.transpose(x_host, axes))
        assert numpy.array_equal(gk.transpose(x, axes, method="gather").get(),
                                 numpy.transpose(x_host, axes))
    assert numpy.array_equal(gk.permute_dims(x).get(), numpy.transpose(x_host))
    with pytest.raises(ValueError, match="with axes=, method is a rung"):
        gk.transpose(x, (2, 0, 1), method="shared")  # a rung of the 2-D ladder alone
    # without axes, the last two axes swap (NumPy would reverse all three)
    assert gk.transpose(x).shape == (4, 6, 5)


@pytest.mark.gpu
def test_bad_calls_raise_before_any_launch(rng):
    x = cupy.asarray(rng.random((4, 5, 6), dtype=numpy.float32))
    with record_launches() as launches:
        for axes, error in (((0, 0, 1), ValueError), ((0, 1), ValueError),
                            ((0, 1, 3), numpy.exceptions.AxisError), ([0, 1.5, 2], TypeError),
                            ("abc", TypeError)):
            with pytest.raises(error):
                gk.permute_dims(x, axes)
        with pytest.raises(TypeError, match=r"cupy\.asarray"):
            gk.permute_dims(numpy.zeros((2, 2)), (1, 0))
        with pytest.raises(ValueError, match="unknown permute_dims method"):
            gk.permute_dims(x, (1, 0, 2), method="fast")
        with pytest.raises(ValueError):
            gk.permute_dims(x, (2, 0, 1), out=cupy.empty((5, 4, 6), cupy.float32))
        with pytest.raises(TypeError):
            gk.permute_dims(x, (2, 0, 1), out=cupy.empty((6, 4, 5), cupy.float64))
    assert launches == []
    _check(x.get(), x, (2, 0, 1), "auto")  # the library works on


@pytest.mark.gpu
def test_numpy_integer_axes_and_lists(rng):
    x = cupy.asarray(rng.random((3, 4, 5), dtype=numpy.float32))
    for axes in ([2, 0, 1], (numpy.int64(2), numpy.int32(0), 1), numpy.array([2, 0, 1])):
        assert numpy.array_equal(gk.permute_dims(x, axes).get(),
                                 numpy.transpose(x.get(), (2, 0, 1)))


@pytest.mark.gpu
def test_a_planned_permutation_still_refuses_bool_axes(rng):
    """(True, 0, 2) equals (1, 0, 2) as a key; NumPy refuses it, so the plan of the second
    must not serve the first."""
    x = cupy.asarray(rng.random((3, 4, 5), dtype=numpy.float32))
    assert gk.permute_dims(x, (1, 0, 2)).shape == (4, 3, 5)
    with pytest.raises(TypeError):
        gk.permute_dims(x, (True, 0, 2))
    with pytest.raises(TypeError):
        numpy.transpose(x.get(), (True, 0, 2))
