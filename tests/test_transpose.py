"""gk.transpose on the GPU: every rung, every dtype, awkward shapes and strides, exact results."""

from __future__ import annotations

import numpy
import pytest

import gpukernels as gk
import references as reference
from edges_helpers import refused
from gpukernels._core import floats
from gpukernels._core.device import compute_capability
from gpukernels._core.launch import PLANS, record_launches
from gpukernels.ops.transpose import rungs
from gpukernels.validation import poisoned

cupy = pytest.importorskip("cupy")

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("index_width")]

METHODS = gk.methods("transpose") + ("auto",)
DTYPES = [numpy.dtype(t) for t in (
    numpy.bool_, numpy.int8, numpy.int16, numpy.int32, numpy.int64, numpy.uint8, numpy.uint16,
    numpy.uint32, numpy.uint64, numpy.float16, numpy.float32, numpy.float64, numpy.complex64,
    numpy.complex128)] + [floats.BFLOAT16]  # bfloat16 moves as any 2-byte item
SHAPES = [
    (1, 1), (1, 100), (100, 1), (31, 37), (97, 101), (127, 129), (255, 257), (256, 256),
    (1023, 1025), (33, 65), (32, 32), (64, 96), (3, 5, 7), (2, 3, 33, 17), (0, 5), (5, 0), (0, 0),
    (0, 3, 4), (4, 0, 3),
]


def shape_id(shape):
    return "x".join(map(str, shape))


def assert_same_bits(got, want, context=""):
    """Exact equality, bit for bit (so -0.0 vs 0.0 or NaN payloads count)."""
    got = cupy.asnumpy(got)
    assert got.dtype == want.dtype, context
    assert got.shape == want.shape, context
    got, want = numpy.ascontiguousarray(got), numpy.ascontiguousarray(want)
    numpy.testing.assert_array_equal(got.view(numpy.uint8), want.view(numpy.uint8),
                                     err_msg=context)


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("method", METHODS)
def test_transpose_matches_numpy(method, dtype, shape, rng):
    host = reference.random_array(shape, dtype, rng)
    want = reference.transpose(host)
    x = cupy.asarray(host)
    if refused("transpose", method, x):
        return

    out = poisoned(want.shape, dtype)
    got = gk.transpose(x, method=method, out=out)
    assert got is out
    assert_same_bits(got, want, f"{method} {dtype} {shape} with out=")

    got = gk.transpose(x, method=method)
    assert isinstance(got, cupy.ndarray) and got.flags.c_contiguous
    assert_same_bits(got, want, f"{method} {dtype} {shape}")
    assert_same_bits(x, host, "the input was modified")


# Views taken the same way on NumPy and CuPy arrays: (name, function of (xp, base)).
VIEWS = [
    ("step-slices", lambda xp, v: v[::2, 1::3]),
    ("negative-strides", lambda xp, v: v[::-1, ::2]),
    ("both-reversed", lambda xp, v: v[::-1, ::-1]),
    ("transposed", lambda xp, v: v.T),
    ("offset", lambda xp, v: v[3:, 5:-2]),
    ("column", lambda xp, v: v[:, 7:8]),
    ("broadcast-rows", lambda xp, v: xp.broadcast_to(v[:1], (40, v.shape[1]))),
    ("broadcast-cols", lambda xp, v: xp.broadcast_to(v[:, :1], (v.shape[0], 50))),
    ("stacked-step", lambda xp, v: v.reshape(6, 11, 10)[::2, :, ::3]),
    ("stacked-unmergeable",  # batch axes no single stride can walk
     lambda xp, v: v.reshape(2, 3, 11, 10).transpose(1, 0, 2, 3)[:, :, ::-1, 1:]),
    ("stacked-broadcast", lambda xp, v: xp.broadcast_to(v[:5, :9], (4, 5, 9))),
]


@pytest.mark.parametrize("view", [f for _, f in VIEWS], ids=[n for n, _ in VIEWS])
@pytest.mark.parametrize("dtype", [numpy.int8, numpy.float32, numpy.complex128], ids=str)
@pytest.mark.parametrize("method", METHODS)
def test_transpose_non_contiguous_input(method, dtype, view, rng):
    base = reference.random_array((66, 10), dtype, rng)
    host = view(numpy, base)
    x = view(cupy, cupy.asarray(base))
    assert x.shape == host.shape and x.strides == host.strides
    if refused("transpose", method, x):
        return
    want = reference.transpose(host)
    assert_same_bits(gk.transpose(x, method=method), want, f"{method} {x.strides}")
    out = poisoned(want.shape, dtype)
    assert gk.transpose(x, method=method, out=out) is out
    assert_same_bits(out, want)


@pytest.mark.parametrize("method", METHODS)
def test_transpose_many_matrices(method, rng):
    # More matrices than gridDim.z allows (65535): the batch loop must stride.
    host = reference.random_array((70000, 3, 2), numpy.int16, rng)
    if refused("transpose", method, cupy.asarray(host)):
        return
    assert_same_bits(gk.transpose(cupy.asarray(host), method=method), reference.transpose(host))


@pytest.mark.parametrize("method", METHODS)
def test_transpose_into_non_contiguous_out(method, rng):
    host = reference.random_array((37, 29), numpy.float32, rng)
    big = poisoned((29, 74), numpy.float32)
    out = big[:, ::2]
    if refused("transpose", method, cupy.asarray(host), out=out):
        return
    assert gk.transpose(cupy.asarray(host), method=method, out=out) is out
    assert_same_bits(out, host.T)
    assert bool(cupy.isnan(big[:, 1::2]).all()), "wrote outside out's elements"


@pytest.mark.parametrize("method", METHODS)
def test_transpose_out_overlapping_input(method, rng):
    host = reference.random_array((65, 65), numpy.float64, rng)
    x = cupy.asarray(host)
    if refused("transpose", method, x):
        return
    assert gk.transpose(x, method=method, out=x) is x
    assert_same_bits(x, host.T)


def test_transpose_out_errors(rng):
    x = cupy.asarray(reference.random_array((3, 5), numpy.float32, rng))
    with pytest.raises(ValueError):
        gk.transpose(x, out=cupy.empty((3, 5), numpy.float32))
    with pytest.raises(TypeError):
        gk.transpose(x, out=cupy.empty((5, 3), numpy.float64))  # transpose does not cast
    with pytest.raises(TypeError):
        gk.transpose(x, out=numpy.empty((5, 3), numpy.float32))
    assert_same_bits(gk.transpose(x), cupy.asnumpy(x).T)  # still usable


@pytest.mark.parametrize("shape", [(), (7,), (0,)], ids=["0d", "1d", "empty-1d"])
def test_transpose_needs_two_dimensions(shape):
    with pytest.raises(ValueError):
        gk.transpose(cupy.zeros(shape, numpy.float32))


def test_transpose_invalid_method_leaves_library_usable(rng):
    host = reference.random_array((9, 4), numpy.int32, rng)
    x = cupy.asarray(host)
    with pytest.raises(ValueError, match="bogus"):
        gk.transpose(x, method="bogus")
    with pytest.raises(TypeError):
        gk.transpose(x, method=None)
    for method in METHODS:
        if not refused("transpose", method, x):
            assert_same_bits(gk.transpose(x, method=method), host.T)


def test_transpose_host_input_raises(rng):
    with pytest.raises(TypeError, match=r"cupy\.asarray"):
        gk.transpose(reference.random_array((3, 4), numpy.float32, rng))


@pytest.mark.parametrize("method", METHODS)
def test_transpose_respects_current_stream(method, rng):
    host = reference.random_array((100, 257), numpy.int8, rng)
    # The way back (257 x 100) is auto's where the rung takes only its way there.
    back = "auto" if refused("transpose", method, cupy.empty((257, 100), numpy.int8)) else method
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        x = cupy.asarray(host)
        y = gk.transpose(x, method=method)
        equal = (y == x.T).all()
        z = gk.transpose(y, method=back)
    stream.synchronize()
    assert bool(equal)
    assert_same_bits(y, host.T)
    assert_same_bits(z, host)


@pytest.mark.parametrize("method", METHODS)
def test_transpose_cuda_array_interface_and_dlpack(method, rng):
    host = reference.random_array((17, 40), numpy.float16, rng)
    x = cupy.asarray(host)
    if refused("transpose", method, x):
        return

    class CAI:
        __cuda_array_interface__ = x.__cuda_array_interface__

    class DLPack:
        def __dlpack__(self, **kwargs):
            return x.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return x.__dlpack_device__()

    assert_same_bits(gk.transpose(CAI(), method=method), host.T)
    assert_same_bits(gk.transpose(DLPack(), method=method), host.T)


def _device_random_int8(n, rng):
    state = cupy.random.RandomState(int(rng.integers(2**31)))
    return (state.random_sample(n, dtype=cupy.float32) * 256).astype(cupy.int32).astype(cupy.int8)


@pytest.mark.slow
@pytest.mark.parametrize("shape, dtype", [((1, 10**8), numpy.int8), ((10**8, 1), numpy.int8),
                                          ((70000 * 32, 3), numpy.float32)],
                         ids=["1x1e8-int8", "1e8x1-int8", "2240000x3-float32"])
@pytest.mark.parametrize("method", METHODS)
def test_transpose_huge(method, shape, dtype, rng):
    # Compared on the GPU: a host copy of these would dominate the suite's time.
    if dtype == numpy.int8:
        x = _device_random_int8(shape[0] * shape[1], rng).reshape(shape)
    else:
        x = cupy.random.RandomState(int(rng.integers(2**31))).random_sample(shape, dtype=dtype)
    if refused("transpose", method, x):
        return
    out = poisoned(shape[::-1], dtype)
    got = gk.transpose(x, method=method, out=out)
    assert got is out and got.shape == shape[::-1]
    assert bool((got == x.T).all()), f"{method} {shape}"
    del out, got
    got = gk.transpose(x, method=method)
    assert got.flags.c_contiguous and bool((got == x.T).all())


def _vector_cases():
    """(itemsize, config, skew, shape) reaching every transpose_vector instance.

    Rows that are a multiple of V but whose byte length is not a multiple of 32 need SKEW; cols
    that are a multiple of this config's V but not of the previous (larger) one rule that one out.
    """
    cases = []
    for itemsize, configs in rungs.VECTOR_CONFIGS.items():
        for position, config in enumerate(configs):
            vector, tile = config[0], config[1]
            larger = configs[position - 1][0] if position else None
            cols = vector * (2 * tile + 1)
            if larger is not None and cols % larger == 0:
                cols += vector
            for skew in (False, True):
                # three tiles' worth of rows (TALL tiles are taller), so interior tiles exist
                tall = rungs.vector_tall(itemsize, rungs.vector_launched_config(itemsize, config,
                                                                                skew), skew)
                sector_rows = max(vector, rungs.SECTOR_BYTES // itemsize)  # rows * itemsize % 32 == 0
                rows = sector_rows * (3 * tile * tall // max(1, sector_rows // vector) + 2)
                if skew:
                    rows += vector  # still a multiple of V, no longer of the sector
                    if rows * itemsize % rungs.SECTOR_BYTES == 0:
                        continue  # V x itemsize is a whole sector: no skewed rows exist
                cases.append((itemsize, config, skew, (rows, cols)))
    return cases


_INT_BY_SIZE = {1: numpy.uint8, 2: numpy.uint16, 4: numpy.uint32, 8: numpy.uint64,
                16: numpy.complex128}


@pytest.mark.parametrize("itemsize, config, skew, shape", _vector_cases(),
                         ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else str(v))
@pytest.mark.parametrize("batch", [1, 3])
def test_transpose_vector_every_instance(itemsize, config, skew, shape, batch, rng):
    dtype = _INT_BY_SIZE[itemsize]
    full = (batch, *shape) if batch > 1 else shape
    host = reference.random_array(full, dtype, rng)
    x = cupy.asarray(host)
    out = poisoned(reference.transpose(host).shape, dtype)
    with record_launches() as launches:
        got = gk.transpose(x, method="vector", out=out)
    assert_same_bits(got, reference.transpose(host), f"{config} skew={skew}")
    launched = rungs.vector_launched_config(itemsize, config, skew)
    expected = {rungs.vector_instance(itemsize, index, launched, skew)
                for index in ("int", "long long")}
    assert launches and all(record.instance in expected for record in launches)


# transpose_words and _words_async: tiles of 256 x 128 int8 or 128 x 64 float16 (input rows x
# columns), SKEW rows of up to 31 or 15, 4-byte words. Shapes around every tile and word edge; from
# (513, 385) on, tiles wholly inside the matrix take the kernels' unchecked paths. The async kernel
# copies 144 bytes of a row from its tile's first column when at least that many are left in the
# row, and clamps its copies otherwise: 143 and 144 columns are the two sides of that. Both
# kernels' row tiles stage rows [TR t, TR t + TR + SECTOR) (int8 256 + 32, float16 128 + 16), the
# first also storing what precedes each output row's first segment and the last what follows its
# last: for int8 288 rows are one tile (both edges), 289 two, 545 and 800 three (800 x 385 with
# interior tiles between the edges); for float16 144 rows one, 145 two, 272 two, 273 three.
# From 2 to WORDS_SIDE_BY_SIDE_MAX (16) row tiles a column tile's row tiles are launched side by
# side along x, past 16 along y: float16 2064 rows are 16 tiles, 2065 rows 17; int8 4128 and 4129.
WORD_SHAPES = [(1, 1), (1, 3), (3, 1), (5, 7), (16, 200), (17, 200), (31, 33), (33, 31),
               (129, 65), (144, 70), (145, 70), (255, 129), (7, 130), (257, 127), (272, 99),
               (273, 99), (288, 300), (289, 145), (300, 67), (513, 385), (545, 200),
               (600, 143), (600, 144), (800, 385), (1000, 1001), (2064, 70), (2065, 70),
               (4128, 67), (4129, 67)]
WORD_VIEWS = {
    "contiguous": lambda base, shape: base[:shape[0], :shape[1]],
    "offset": lambda base, shape: base[1:shape[0] + 1, 1:shape[1] + 1],
    "padded": lambda base, shape: base[:shape[0], 3:shape[1] + 3],
    "reversed-rows": lambda base, shape: base[:shape[0], :shape[1]][::-1],
    # an array of its own: the last row ends where the allocation does (memcheck, pool off)
    "own-array": lambda base, shape: base[:shape[0], :shape[1]].copy(),
}


@pytest.mark.parametrize("method", ["auto", "words", "words_async"])
@pytest.mark.parametrize("view", list(WORD_VIEWS))
@pytest.mark.parametrize("shape", WORD_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", [numpy.uint8, numpy.float16], ids=["int8", "float16"])
def test_transpose_word_rungs(dtype, shape, view, method, rng):
    # Rows that are not whole 4-byte words: auto takes words_async (int8, sm_80 and newer) or
    # words; both rungs take any 1-byte (words_async) or 1- and 2-byte (words) input.
    base = reference.random_array((shape[0] + 2, shape[1] + 5), dtype, rng)
    host = WORD_VIEWS[view](base, shape)
    x = WORD_VIEWS[view](cupy.asarray(base), shape)
    if refused("transpose", method, x):
        return
    out = poisoned((shape[1], shape[0]), dtype)
    with record_launches() as launches:
        got = gk.transpose(x, method=method, out=out)
    assert_same_bits(got, host.T, f"{shape} {view}")
    itemsize = numpy.dtype(dtype).itemsize
    per_word = 4 // itemsize
    rows, cols = shape
    if method != "auto":
        assert [r.rung for r in launches] == [method]
    elif rungs.RUNS_AUTO_MIN[itemsize] < rows <= min(cols, rungs.RUNS_MAX) and rows % 4:
        assert [r.rung for r in launches] == ["runs"]  # every view reads rows of contiguous items
    elif rungs.auto_takes_narrow(itemsize, *shape):  # a few rows or columns
        assert [r.rung for r in launches] == ["narrow"]
    elif shape[0] % per_word or shape[1] % per_word or view not in ("contiguous", "own-array"):
        expected = "words_async" if itemsize == 1 and compute_capability() >= 80 else "words"
        assert [r.rung for r in launches] == [expected], launches
    if launches[0].rung == "words_async":
        assert launches[0].shared_mem == rungs.words_async_shared_bytes(itemsize)


@pytest.mark.parametrize("method", ["auto", "words", "words_async", "vector"])
@pytest.mark.parametrize("dtype", [numpy.uint8, numpy.float16], ids=["int8", "float16"])
def test_transpose_odd_stacks_and_sizes(dtype, method, rng):
    # A stack of three odd matrices (one launch, blockIdx.z) and the benchmark's odd shape.
    for shape in ((3, 257, 385), (8191, 8193)):
        host = reference.random_array(shape, dtype, rng)
        x = cupy.asarray(host)
        if refused("transpose", method, x):
            return
        got = gk.transpose(x, method=method)
        assert_same_bits(got, reference.transpose(host), f"{shape}")


@pytest.mark.parametrize("offset", [1, 4, 16])
def test_transpose_vector_unaligned_base(offset, rng):
    # A view that starts inside a 16-byte word cannot use the 16-byte instance: a smaller V.
    host = reference.random_array((64, 64 * 17 + 16), numpy.uint8, rng)
    x = cupy.asarray(host)[:, offset:offset + 64 * 17]
    want = host[:, offset:offset + 64 * 17].T
    assert_same_bits(gk.transpose(x, method="vector"), want, f"offset {offset}")


# transpose_narrow: the whole narrow side (1 to NARROW_MAX elements) by a run of the long side,
# rungs.narrow_length(itemsize, n) elements (1344 for 3 float32 rows): long sides one short of,
# at and one past a tile and two, both orientations, odd and power-of-two narrow sides.
def _narrow_shapes():
    for itemsize, narrow in ((4, 1), (4, 3), (4, 16), (1, 3), (1, 7), (2, 5), (8, 2), (16, 3),
                             (4, 17), (1, 33), (2, 40), (8, 63), (8, 79), (16, 64), (4, 127), (1, 128)):
        length = rungs.narrow_length(itemsize, narrow)
        for long in (1, 31, length - 1, length, length + 1, 2 * length + 1):
            yield itemsize, (narrow, long)
            yield itemsize, (long, narrow)


NARROW_CASES = list(_narrow_shapes())


@pytest.mark.parametrize(("itemsize", "shape"), NARROW_CASES,
                         ids=[f"{s}-{shape_id(shape)}" for s, shape in NARROW_CASES])
def test_transpose_narrow_tile_edges(itemsize, shape, rng):
    dtype = _INT_BY_SIZE[itemsize]
    host = reference.random_array((2, *shape), dtype, rng)  # two matrices: blockIdx.z
    x = cupy.asarray(host)
    out = poisoned(reference.transpose(host).shape, dtype)
    with record_launches() as launches:
        got = gk.transpose(x, method="narrow", out=out)
    assert_same_bits(got, reference.transpose(host), f"{shape}")
    assert [record.rung for record in launches] == ["narrow"]


# The narrow rung's path in registers (INTERLEAVE, gk_narrow_interleave) for 1 to INTERLEAVE_MAX
# rows or columns of 1-, 2- and 4-byte items (rungs.narrow_interleaves): long sides one short of,
# at and one past a 16-byte word, and past two blocks' groups; three matrices; rows padded to
# whole words.
def _interleave_cases():
    for itemsize in rungs.INTERLEAVE_ITEMSIZES:
        words = 16 // itemsize
        blocks = 2 * rungs.NARROW_THREADS * rungs.INTERLEAVE_UNROLL * words
        for narrow in range(1, rungs.INTERLEAVE_MAX + 1):
            for long in (words - 1, words, words + 1, blocks + words + 3):
                if long >= narrow:
                    yield itemsize, narrow, long


INTERLEAVE_CASES = list(_interleave_cases())


@pytest.mark.parametrize(("itemsize", "narrow", "long"), INTERLEAVE_CASES,
                         ids=[f"{s}-{n}x{long}" for s, n, long in INTERLEAVE_CASES])
def test_transpose_narrow_interleave(itemsize, narrow, long, rng):
    dtype = _INT_BY_SIZE[itemsize]
    words = 16 // itemsize
    pitch = -(-long // words) * words
    base = reference.random_array((3, narrow, pitch + words), dtype, rng)

    def moved(x, host, interleaved):
        out = poisoned(reference.transpose(host).shape, dtype)
        with record_launches() as launches:
            got = gk.transpose(x, method="narrow", out=out)
        assert_same_bits(got, reference.transpose(host), f"{x.shape} {x.strides}")
        # the instance's INTERLEAVE argument: the narrow side, or 0 (staged)
        assert [record.instance.split(", ")[-2] for record in launches] == [
            str(narrow) if interleaved else "0"]

    # Planes in: the rows (padded to whole words) to one run of `long` rows of `narrow`; the
    # three matrices where each run starts at a 16-byte boundary (whole words of it), else one.
    planes = base if long % words == 0 else base[0]
    # (A single row whose length is not whole words too: its reshape to a stack gives the row
    # stride as the row's length, which one plane does not need aligned.)
    moved(cupy.asarray(planes)[..., :long], planes[..., :long], True)
    # The same one element past a 16-byte boundary: the staged kernel.
    moved(cupy.asarray(planes)[..., 1:long + 1], planes[..., 1:long + 1], False)
    # One run in (rows of `narrow`, whole words of them in each matrix) to planes of `pitch`.
    run = numpy.ascontiguousarray(numpy.swapaxes(base[:, :, :pitch], 1, 2))
    moved(cupy.asarray(run), run, True)


@pytest.mark.parametrize("view", [f for _, f in VIEWS[:5]], ids=[n for n, _ in VIEWS[:5]])
def test_transpose_narrow_views(view, rng):
    # Strided and reversed views with 3, 4 or 5 rows or columns left.
    for shape in ((9, 3000), (3000, 9), (12, 2900)):
        base = reference.random_array(shape, numpy.float32, rng)
        host, x = view(numpy, base), view(cupy, cupy.asarray(base))
        if min(x.shape) > rungs.narrow_max(x.itemsize):
            continue
        assert_same_bits(gk.transpose(x, method="narrow"), reference.transpose(host), f"{shape}")


def test_transpose_narrow_refuses_wide_matrices(rng):
    for dtype in (numpy.float32, numpy.float64):
        rows = rungs.narrow_max(numpy.dtype(dtype).itemsize) + 1
        x = cupy.asarray(reference.random_array((rows, 200), dtype, rng))
        assert refused("transpose", "narrow", x)


@pytest.mark.parametrize(("shape", "dtype", "rung"), [
    ((64, 3, 50), numpy.float32, "narrow"), ((4, 50, 3), numpy.uint8, "narrow"),
    ((4, 15, 60), numpy.float32, "narrow"), ((4, 16, 64), numpy.float32, "vector"),
    ((4, 64, 16), numpy.uint8, "vector"), ((4, 16, 60), numpy.float64, "narrow"),
    ((4, 16, 60), numpy.complex128, "narrow"), ((4, 17, 60), numpy.float64, "narrow"),
    ((4, 20, 100), numpy.float32, "narrow"), ((4, 100, 31), numpy.float32, "vector"),
    ((4, 24, 100), numpy.float32, "vector"), ((4, 48, 100), numpy.float16, "vector"),
    ((4, 48, 100), numpy.uint8, "narrow"), ((4, 32, 100), numpy.float64, "vector"),
    ((4, 64, 100), numpy.complex128, "vector"), ((4, 63, 100), numpy.complex128, "narrow"),
    ((4, 63, 200), numpy.float32, "narrow"), ((4, 200, 65), numpy.float32, "vector"),
    ((4, 65, 200), numpy.float32, "runs"),
    ((4, 200, 20), numpy.float32, "vector"), ((4, 200, 20), numpy.float16, "narrow"),
    ((4, 200, 33), numpy.float16, "narrow"), ((4, 200, 17), numpy.float64, "narrow"),
    ((4, 129, 200), numpy.float32, "runs"), ((4, 65, 200), numpy.float64, "narrow"),
    ((4, 79, 200), numpy.float64, "narrow"), ((4, 80, 200), numpy.float64, "vector"),
    ((4, 200, 65), numpy.float64, "vector"), ((4, 65, 200), numpy.complex128, "vector"),
])
def test_transpose_auto_takes_narrow_for_a_few_rows_or_columns(shape, dtype, rung):
    x = cupy.zeros(shape, dtype)
    with record_launches(dry_run=True) as launches:
        gk.transpose(x)
    assert [record.rung for record in launches] == [rung]


# The narrow rung's words: 1- and 2-byte items whose contiguous runs are 4-byte aligned, with
# runs that end inside a word (odd lengths in padded rows; a run of an odd number of elements).
NARROW_WORD_CASES = [
    (numpy.uint8, (3, 4092), None), (numpy.uint8, (3, 4100), 4097),
    (numpy.uint8, (4100, 3), None), (numpy.uint8, (16, 40), 37),
    (numpy.uint16, (5, 1002), 1001), (numpy.uint16, (1002, 6), None),
    (numpy.uint16, (2, 70001 * 2), 2 * 70001 - 1), (numpy.uint16, (70002, 2), None),
]


@pytest.mark.parametrize(("dtype", "shape", "cols"), NARROW_WORD_CASES,
                         ids=[f"{numpy.dtype(d).name}-{shape_id(s)}-{c}"
                              for d, s, c in NARROW_WORD_CASES])
def test_transpose_narrow_words(dtype, shape, cols, rng):
    base = reference.random_array(shape, dtype, rng)
    host = base[:, :cols] if cols else base
    x = cupy.asarray(base)[:, :cols] if cols else cupy.asarray(base)
    out = poisoned(host.T.shape, dtype)
    with record_launches() as launches:
        got = gk.transpose(x, method="narrow", out=out)
    assert_same_bits(got, host.T, f"{shape} {cols}")
    assert [record.instance.endswith("true>") for record in launches] == [True]


# transpose_runs: all rows (1 to RUNS_MAX) by RUNS_SEGMENT_BYTES of columns a tile (64 float16),
# staged in the output's order and written as one run of 16-byte words. Columns one short of, at
# and one past a segment and three; row counts odd, even and at the limit; input rows that start
# at every alignment of a 4-byte word (odd row pitches, an offset view, reversed rows), outputs
# that start inside a 16-byte word, and stacks (blockIdx.z) whose matrices start at different
# alignments.
def _runs_shapes():
    for itemsize in rungs.RUNS_ITEMSIZES:
        segment = rungs.RUNS_SEGMENT_BYTES // itemsize
        for rows in (1, 2, 3, 31, 64, 129, 255, 256):
            for cols in (segment - 1, segment, segment + 1, 3 * segment + 5):
                if rows <= cols:
                    yield itemsize, (rows, cols)


RUNS_CASES = list(_runs_shapes())


@pytest.fixture(params=["ring", "registers"])
def runs_loads(request, monkeypatch):
    """runs with its tiles' rows copied into the ring of shared memory slots (cp.async, sm_80
    and newer), or loaded into registers (every GPU), whatever the row count; the instance's
    last template argument says which."""
    ring = request.param == "ring"
    if ring and compute_capability() < rungs.RUNS_ASYNC_CAPABILITY:
        pytest.skip("cp.async needs sm_80")
    monkeypatch.setattr(rungs, "runs_ring", lambda capability, rows: ring)
    PLANS.clear()  # plans made with the other loads
    yield "true>" if ring else "false>"
    PLANS.clear()


@pytest.mark.parametrize("view", list(WORD_VIEWS))  # the word rungs' views
@pytest.mark.parametrize(("itemsize", "shape"), RUNS_CASES,
                         ids=[f"{s}-{shape_id(shape)}" for s, shape in RUNS_CASES])
def test_transpose_runs_tile_edges(itemsize, shape, view, runs_loads, rng):
    limit = cupy.cuda.Device().attributes["MaxSharedMemoryPerBlockOptin"]
    if runs_loads == "true>" and rungs.runs_shared_bytes(shape[0], True) > limit:
        # past RUNS_RING_MAX_ROWS, where only the test asks for the ring (sm_86, sm_89, sm_120)
        pytest.skip("the ring's two slots of this many rows pass this GPU's shared memory")
    dtype = _INT_BY_SIZE[itemsize]
    base = reference.random_array((shape[0] + 2, shape[1] + 5), dtype, rng)
    host = WORD_VIEWS[view](base, shape)
    x = WORD_VIEWS[view](cupy.asarray(base), shape)
    out = poisoned((shape[1], shape[0]), dtype)
    with record_launches() as launches:
        got = gk.transpose(x, method="runs", out=out)
    assert_same_bits(got, host.T, f"{shape} {view}")
    assert [(record.rung, record.instance.endswith(runs_loads)) for record in launches] == [
        ("runs", True)]


@pytest.mark.parametrize("offset", [0, 1, 3, 7])
@pytest.mark.parametrize("dtype", [numpy.uint8, numpy.float16, numpy.float32], ids=str)
def test_transpose_runs_stacks_and_unaligned_outputs(dtype, offset, runs_loads, rng):
    # Three matrices of an odd pitch (each starts at another alignment) into an output that
    # starts `offset` elements past a 16-byte boundary, with poisoned elements either side.
    rows, cols = 37, 301
    base = reference.random_array((3, rows, cols + 1), dtype, rng)
    host = base[:, :, :cols]
    x = cupy.asarray(base)[:, :, :cols]
    size = 3 * rows * cols
    flat = poisoned((size + offset + 9,), dtype)
    out = flat[offset:offset + size].reshape(3, cols, rows)
    with record_launches() as launches:
        got = gk.transpose(x, method="runs", out=out)
    assert got is out
    assert_same_bits(out, reference.transpose(host))
    assert [record.rung for record in launches] == ["runs"]
    rest = cupy.asnumpy(cupy.concatenate([flat[:offset], flat[offset + size:]]))
    assert (rest.view(numpy.uint8) == 0xFF).all(), "wrote outside out's elements"


@pytest.mark.parametrize("dtype", [numpy.uint8, numpy.float16, numpy.float32], ids=str)
def test_transpose_runs_more_tiles_than_blocks(dtype, runs_loads, rng):
    # Blocks take tile after tile (the next one's or two's words loaded while they write one):
    # more tiles than RUNS_BLOCKS, a last tile in part, two matrices, an odd row pitch.
    segment = rungs.RUNS_SEGMENT_BYTES // numpy.dtype(dtype).itemsize
    rows, cols = 7, segment * (rungs.RUNS_BLOCKS + 37) + 3
    base = reference.random_array((2, rows, cols + 1), dtype, rng)
    host = base[:, :, :cols]
    out = poisoned((2, cols, rows), dtype)
    with record_launches() as launches:
        got = gk.transpose(cupy.asarray(base)[:, :, :cols], method="runs", out=out)
    assert_same_bits(got, reference.transpose(host))
    assert [record.grid[0] for record in launches] == [rungs.RUNS_BLOCKS]


@pytest.mark.parametrize(("shape", "dtype", "rung"), [
    ((255, 513), numpy.float16, "runs"), ((161, 300), numpy.float16, "runs"),
    ((160, 300), numpy.float16, "vector"), ((129, 300), numpy.float16, "runs"),
    ((65, 300), numpy.uint8, "runs"), ((64, 300), numpy.uint8, "vector"),
    ((25, 300), numpy.uint8, "runs"), ((23, 300), numpy.uint8, "narrow"),
    ((41, 300), numpy.float16, "runs"), ((39, 300), numpy.float16, "narrow"),
    ((97, 300), numpy.float32, "runs"), ((65, 300), numpy.float32, "runs"),
    ((63, 300), numpy.float32, "narrow"), ((255, 255), numpy.int32, "runs"),
    ((200, 301), numpy.float16, "words"), ((257, 300), numpy.float16, "words"),
    ((300, 255), numpy.float16, "words"), ((100, 301), numpy.float16, "words"),
    ((76, 301), numpy.float16, "words"), ((68, 301), numpy.float16, "narrow"),
])
def test_transpose_auto_takes_runs(shape, dtype, rung):
    x = cupy.zeros(shape, dtype)
    with record_launches(dry_run=True) as launches:
        gk.transpose(x)
    assert [record.rung for record in launches] == [rung]


def test_transpose_runs_refusals(rng):
    tall = cupy.asarray(reference.random_array((300, 200), numpy.float16, rng))
    assert refused("transpose", "runs", tall)  # more rows than columns
    wide = cupy.asarray(reference.random_array((rungs.RUNS_MAX + 1, 600), numpy.float16, rng))
    assert refused("transpose", "runs", wide)
    assert refused("transpose", "runs", cupy.zeros((5, 100), numpy.float64))
    assert refused("transpose", "runs", cupy.zeros((5, 100), numpy.float16)[:, ::2])
