"""cumsum and cumprod: every rung against NumPy, on fresh random data.

Outputs start poisoned (every byte 0xFF) where the kernels write into ``out=``; inputs cover
lengths around the tile sizes, rows short and long (look_back lays rows end to end), scans along
every axis, strided and misaligned views, every dtype and ``dtype=`` request, NaN, integer
wrap-around, and the same input twice (bitwise the same output).
"""

from __future__ import annotations

import math

import numpy
import pytest

import gpukernels as gk
from gpukernels._core.launch import record_launches
from gpukernels.ops.reduce.dtypes import reduction_result_dtype
from gpukernels.ops.scan import check, rungs
from gpukernels.validation import poisoned

RUNGS = gk.methods("scan")
OPERATIONS = ("cumsum", "cumprod")
DTYPES = [numpy.dtype(t) for t in (
    numpy.bool_, numpy.int8, numpy.int16, numpy.int32, numpy.int64, numpy.uint8, numpy.uint16,
    numpy.uint32, numpy.uint64, numpy.float16, numpy.float32, numpy.float64, numpy.complex64,
    numpy.complex128)]
REQUESTS = (None, "bool", "int8", "int32", "int64", "uint16", "uint64", "float16", "float32",
            "float64", "complex64", "complex128")


# ---- CPU: dtypes, axes, plans ------------------------------------------------------------------

@pytest.mark.parametrize("operation", OPERATIONS)
def test_result_dtypes_are_numpys(operation):
    import warnings

    for dtype in DTYPES:
        for requested in REQUESTS:
            with warnings.catch_warnings():  # complex to a real dtype: NumPy warns, as we do
                warnings.simplefilter("ignore")
                want = getattr(numpy, operation)(numpy.ones(2, dtype), dtype=requested).dtype
                assert reduction_result_dtype(operation, dtype, requested) == want


@pytest.mark.parametrize("dtype", ["datetime64[s]", "U3", "O", "V4"])
def test_unsupported_dtypes_are_refused(dtype):
    with pytest.raises(TypeError, match="cumsum"):
        reduction_result_dtype("cumsum", numpy.dtype(dtype))
    with pytest.raises(TypeError, match="cannot produce"):
        reduction_result_dtype("cumsum", numpy.dtype("float32"), dtype)


def test_accumulators_widen_floats_and_wrap_integers():
    assert rungs.accumulator(numpy.dtype("float16")) == (numpy.float32, numpy.float16)
    assert rungs.accumulator(numpy.dtype("float32")) == (numpy.float64, numpy.float32)
    assert rungs.accumulator(numpy.dtype("bool")) == (numpy.uint64, numpy.int64)
    assert rungs.accumulator(numpy.dtype("uint8")) == (numpy.uint64, numpy.uint64)
    assert rungs.accumulator(numpy.dtype("complex64")) == (numpy.complex64, numpy.complex64)


def test_plans_launch_only_compiled_instances():
    compiled = set(rungs.SOURCE.instances)
    for op in ("SumOp", "ProdOp"):
        for dtype in rungs.IN_DTYPES:
            for n, rows, inner in ((1, 1, 1), (5000, 1, 1), (3, 7, 1), (10**6, 3, 1),
                                   (600 * 512, 2, 1), (40, 6, 3)):
                problem = rungs.Problem(op, dtype, n, rows, inner)
                for rung in rungs.LADDER:
                    plan = rung.plan(problem)
                    assert plan.steps
                    for step in plan.steps:
                        assert step.launch.instance in compiled, step.launch.instance
                        assert len(step.args) in (5, 9)


def test_hillis_steele_levels_recurse_until_one_tile():
    block = rungs.HILLIS_STEELE_BLOCK
    plan = rungs.plan_hillis_steele(rungs.Problem("SumOp", numpy.dtype("float32"),
                                                  block**2 * 3, 2, 1))
    kinds = [s.launch.instance.split("<")[0] for s in plan.steps]
    # input level, totals level, totals-of-totals level (one tile), then two carry passes
    assert kinds == ["scan_hillis_steele"] * 3 + ["scan_add_carries"] * 2
    assert [s.launch.grid for s in plan.steps] == [(3 * block, 2, 1), (3, 2, 1), (1, 2, 1),
                                                    (2, 2, 1), (3 * block - 1, 2, 1)]


def test_single_pass_capacity_covers_every_tile():
    for tiles in (1, 4096, 4097, 10**6):
        assert rungs.capacity_for(tiles) >= tiles
    f32 = numpy.dtype("float32")
    wide = rungs.plan_columns(rungs.Problem("SumOp", f32, 2**14, 3 * 64, 64)).steps[0]
    assert wide.scratch >= wide.launch.grid[0] * 32  # a slot per tile and lane
    narrow = rungs.plan_columns(rungs.Problem("SumOp", f32, 2**20, 3 * 16, 16)).steps[0]
    per_column = int(narrow.args[-1])  # the kernel's capacity: one column's slice
    assert per_column >= narrow.launch.grid[0] and narrow.scratch == per_column * 16


@pytest.mark.parametrize("dtype", [d.name for d in rungs.IN_DTYPES])
@pytest.mark.parametrize("inner", [1, 2, 3, 4, 5, 8, 16, 17, 24, 31, 32])
def test_narrow_columns_tiles_cover_the_array_and_fit_shared_memory(dtype, inner):
    dtype = numpy.dtype(dtype)
    p = rungs.Problem("SumOp", dtype, 1000, 7 * inner, inner)
    assert rungs.is_narrow(inner)
    launch = rungs.plan_columns(p).steps[0].launch
    warps, items = rungs.narrow_geometry(dtype)
    assert launch.block[0] == 32 * warps and 1 <= items <= rungs.NARROW_MAX_ITEMS
    # whole rows in a tile, a row to a power of two of lanes at least inner, each lane a run
    tile_rows = rungs.narrow_tile_rows(dtype, inner)
    lanes = 1 << (inner - 1).bit_length()
    assert lanes >= inner > lanes // 2 and tile_rows == launch.block[0] // lanes * items
    tile_elements = tile_rows * inner
    assert launch.grid[0] * tile_elements >= p.n * p.rows > (launch.grid[0] - 1) * tile_elements
    assert (tile_elements * dtype.itemsize) % 16 == 0  # tiles start on whole words
    # the buffer holds the outputs, whole 16-byte words with a word of padding after every
    # eight; with the static shared memory it stays within sm_75's 64 KiB a block
    out = rungs.accumulator(dtype)[1].itemsize
    out_bytes = launch.block[0] * items * out
    assert out_bytes % 16 == 0 and (items * dtype.itemsize) % 16 == 0
    assert launch.shared_mem == out_bytes + out_bytes // 8
    assert launch.shared_mem + rungs._narrow_shared(dtype, warps, items)[1] <= 64 * 1024
    # never a smaller tile than blocked's (LOOK_BACK_BLOCK threads of look_back_items)
    assert 32 * warps * items >= rungs.LOOK_BACK_BLOCK * rungs.look_back_items(dtype)


#: Columns' striped path: the row widths it takes, by dtype: 1 to 8 words of 16 bytes, and rows
#: of 2 to 7 elements that make 1, 3, 5 or 7 words in groups of 2 or 4 rows.
STRIPED_WORD_COLUMNS = {"float32": tuple(range(4, 33, 4)), "float64": tuple(range(2, 17, 2))}
STRIPED_GROUPED_COLUMNS = {"float32": (2, 3, 5, 6, 7), "float64": (3, 5, 7)}
STRIPED_COLUMNS = {name: tuple(sorted(STRIPED_WORD_COLUMNS[name] + STRIPED_GROUPED_COLUMNS[name]))
                   for name in STRIPED_WORD_COLUMNS}


@pytest.mark.parametrize("dtype", [d.name for d in rungs.IN_DTYPES])
@pytest.mark.parametrize("inner", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16, 17, 20, 24,
                                   28, 32, 36])
@pytest.mark.parametrize("outer", [1, 3])
@pytest.mark.parametrize("capability", [0, 80, 90])
def test_columns_take_the_striped_path_only_where_it_runs(dtype, inner, outer, capability):
    # one scan down each column of a float32 or float64 array whose rows are 1 to 8 words, or
    # 2 to 7 elements in groups of rows that make 1, 3, 5 or 7 words, from COLUMNS_STRIPED_MIN
    # elements, on sm_90 (or planning on the CPU), in blocks whose warps split evenly among the
    # row's words (a thread takes whole row groups where rows are not words); the tiles cover
    # the array with whole rows, and the scratch has 32 slots (a lane each) for every tile
    dtype = numpy.dtype(dtype)
    n = rungs.COLUMNS_STRIPED_MIN // inner + 5
    p = rungs.Problem("SumOp", dtype, n, outer * inner, inner, capability)
    step = rungs.plan_columns(p).steps[0]
    takes = (dtype.name in STRIPED_COLUMNS and inner in STRIPED_COLUMNS[dtype.name]
             and outer == 1 and capability != 80)
    assert rungs.columns_striped(p) == takes
    assert step.launch.instance.startswith("scan_columns_striped<") == takes
    small = rungs.Problem("SumOp", dtype, rungs.COLUMNS_STRIPED_MIN // inner - 1, inner, inner)
    assert not rungs.columns_striped(small)
    if takes:
        block = rungs.columns_striped_block(dtype, inner)
        assert step.launch.instance == rungs._columns_striped_instance("SumOp", dtype, inner)
        tile = rungs.columns_striped_tile(dtype, inner)
        if inner * dtype.itemsize % 16 == 0:  # a column group (a word) takes whole warps
            assert block % (32 * (inner * dtype.itemsize // 16)) == 0 and block <= 256
            assert tile == block * rungs.COLUMNS_STRIPED_RUN * 16 // dtype.itemsize
            group_columns = 16 // dtype.itemsize
            assert step.launch.instance.endswith(", 0>")
        else:  # a thread takes row groups of 2 or 4 rows, an odd number of words
            group_rows = 2 if inner * dtype.itemsize % 8 == 0 else 4
            words = inner * dtype.itemsize * group_rows // 16
            run = rungs.COLUMNS_GROUPED_RUN[words]
            assert block == 256 and run % words == 0 and run % 2 == 1
            assert tile == block * run * 16 // dtype.itemsize and tile % (group_rows * inner) == 0
            group_columns = inner
            assert step.launch.instance.endswith(f", {inner}>")
        tiles = -(-n * inner // tile)
        assert tile % inner == 0 and step.launch.grid == (tiles, 1, 1)
        assert step.launch.block == (block + 32 * rungs.COLUMNS_STRIPED_LOOKERS, 1, 1)
        # each slot: the tile's bytes, and 8 bytes for each column of each data thread's group
        slot = tile * dtype.itemsize + block * group_columns * 8
        assert step.launch.shared_mem == rungs.COLUMNS_STRIPED_DEPTH * slot
        # with the kernel's static shared memory (under 10 KiB), two blocks fit an H100's SM
        assert 2 * (step.launch.shared_mem + 10 * 1024 + 1024) <= 228 * 1024
        assert step.scratch >= 32 * tiles and step.launch.instance in rungs.SOURCE.instances


def test_wide_columns_take_no_dynamic_shared_memory():
    p = rungs.Problem("SumOp", numpy.dtype("float32"), 1000, 3 * 48, 48)
    assert not rungs.is_narrow(48) and rungs.plan_columns(p).steps[0].launch.shared_mem == 0
    for plan in (rungs.plan_look_back, rungs.plan_blocked):
        step = plan(rungs.Problem("SumOp", numpy.dtype("int8"), 10**7, 1, 1)).steps[0]
        assert step.scratch >= step.launch.grid[0]


@pytest.mark.parametrize("inner", [33, 40, 100, 224, 225, 1000])
def test_wide_columns_look_back_by_groups_where_chunks_are_few(inner):
    # past 32 columns (narrow's): fewer than COLUMNS_GROUPED_CHUNKS chunks of 32 columns take
    # the grouped instances, whose scratch has a flag and values per column of every tile, as
    # the walking ones
    dtype = numpy.dtype("float32")
    assert not rungs.is_narrow(inner)
    chunks = -(-inner // 32)
    p = rungs.Problem("SumOp", dtype, 5000, 3 * inner, inner)
    step = rungs.plan_columns(p).steps[0]
    grouped = chunks < rungs.COLUMNS_GROUPED_CHUNKS
    assert grouped == (inner <= 224)
    assert step.launch.instance == rungs._columns_instance("SumOp", dtype, False, grouped)
    tiles = -(-5000 // (rungs.COLUMN_WARPS * rungs.COLUMN_ROWS)) * chunks * 3
    assert step.launch.grid == (tiles, 1, 1) and step.scratch >= tiles * 32
    assert step.launch.instance in rungs.SOURCE.instances


def test_choose_sends_other_axes_to_columns():
    f32 = numpy.dtype("float32")
    assert rungs.choose(rungs.Problem("SumOp", f32, 100, 5, 1)).name == "pipelined"
    assert rungs.choose(rungs.Problem("SumOp", f32, 100, 5, 1, 90)).name == "pipelined"
    assert rungs.choose(rungs.Problem("SumOp", f32, 100, 5, 1, 75)).name == "blocked"
    assert rungs.choose(rungs.Problem("SumOp", f32, 100, 5 * 16, 16, 90)).name == "columns"


@pytest.mark.parametrize(("dtype", "factor", "group"), [
    ("float16", 1, 2**18), ("float32", 1, 2**17), ("int16", 1, 2**17), ("int32", 1, 2**17),
    ("uint32", 1, 2**17), ("int8", rungs.STRIPED_ONE_BYTE_FACTOR, 2**17),
    ("uint8", rungs.STRIPED_ONE_BYTE_FACTOR, 2**17), ("bool", rungs.STRIPED_ONE_BYTE_FACTOR, 2**17),
    ("float64", None, None), ("int64", None, None), ("uint64", None, None),
    ("complex64", None, None), ("complex128", None, None)])
@pytest.mark.parametrize("capability", [0, 75, 90])
def test_choose_takes_striped_for_long_rows_of_the_measured_dtypes(dtype, factor, group,
                                                                  capability):
    # one long row of any size, and in large inputs rows longer than a look-back group of
    # pipelined's tiles (four groups of 1-byte items); items of 8 bytes and more never
    dtype = numpy.dtype(dtype)
    other = "blocked" if capability == 75 else "pipelined"
    wanted = other if factor is None else "blocked" if capability == 75 else "striped"

    def chosen(n, rows):
        names = {rungs.choose(rungs.Problem(op, dtype, n, rows, 1, capability)).name
                 for op in ("SumOp", "ProdOp")}
        assert len(names) == 1
        return names.pop()

    if factor is None:
        assert rungs.striped_min_row(dtype, 2**28) is None
        assert rungs.striped_min_row(dtype, 2**10) is None
        assert chosen(2**24, 16) == other
        assert chosen(2**20, 1) == other
        return
    long = rungs.STRIPED_MIN_ROW * factor
    assert rungs.striped_min_row(dtype, long) == long
    assert chosen(long, 1) == chosen(long, 3) == wanted
    assert chosen(long - 1, 1) == other
    # inputs just below the size from which shorter rows take striped
    one_byte = dtype.itemsize == 1
    least = rungs.STRIPED_ONE_BYTE_INPUT if one_byte else rungs.STRIPED_MIN_INPUT
    shortest = rungs.STRIPED_ONE_BYTE_GROUPS * group if one_byte else group + 1
    assert rungs.striped_min_row(dtype, least) == shortest
    assert rungs.striped_min_row(dtype, least - 1) == long
    rows = -(-least // shortest)
    assert chosen(shortest, rows) == wanted
    assert chosen(shortest - 1, rows + 1) == other
    assert chosen(shortest, (least - 1) // shortest) == other


# The rungs whose resident blocks take tiles in turn: their tile, in elements of each dtype,
# and their plan, threads and tile buffers.
RESIDENT_TILE = {"pipelined": lambda d: rungs.LOOK_BACK_BLOCK * rungs.pipelined_items(d),
                 "striped": rungs.striped_tile}
RESIDENT_PLAN = {"pipelined": (rungs.plan_pipelined, rungs.PIPELINED_THREADS,
                               rungs.pipelined_shared_bytes),
                 "striped": (rungs.plan_striped, rungs.STRIPED_THREADS, rungs.striped_shared_bytes)}


@pytest.mark.parametrize("method", RESIDENT_PLAN)
@pytest.mark.parametrize("dtype", [d.name for d in rungs.IN_DTYPES])
def test_resident_rungs_grid_threads_and_shared_memory(method, dtype):
    # pipelined and striped launch the blocks resident at once at most (a block per tile
    # where fewer), their threads and their tile buffers; both need compute capability 8.0
    plan, threads, shared_bytes = RESIDENT_PLAN[method]
    dtype = numpy.dtype(dtype)
    tiles = -(-1000 * 10**4 // RESIDENT_TILE[method](dtype))
    for resident, grid in ((None, tiles), (lambda *_: 7, 7), (lambda *_: 10**6, tiles)):
        step = plan(rungs.Problem("SumOp", dtype, 1000, 10**4, 1, 90, resident)).steps[0]
        assert step.launch.grid == (grid, 1, 1) and step.scratch >= tiles
        assert step.launch.block == (threads, 1, 1)
        assert step.launch.shared_mem == shared_bytes(dtype)
    with pytest.raises(ValueError, match=r"compute capability 8\.0"):
        plan(rungs.Problem("SumOp", dtype, 1000, 1, 1, 75))


@pytest.mark.parametrize("dtype", [d.name for d in rungs.IN_DTYPES])
def test_striped_tile_and_its_slots(dtype):
    # a tile is 256 threads x 4 words of 16 bytes; three slots of the tile's words and each
    # word's prefix, within the 99 KiB a block may opt in to on every GPU from sm_80 (with a
    # few KiB of static arrays besides)
    dtype = numpy.dtype(dtype)
    tile = rungs.striped_tile(dtype)
    assert tile * dtype.itemsize == rungs.LOOK_BACK_BLOCK * rungs.STRIPED_WORDS * 16
    assert rungs.striped_shared_bytes(dtype) <= 96 * 1024


def test_peers_are_held_to_numpys_sequential_bound():
    from gpukernels.ops.scan.check import _sequential_bound

    rng = numpy.random.default_rng(6)
    x = rng.uniform(-1, 1, (3000, 7)).astype(numpy.float32)
    y = (1 + x / 3000).astype(numpy.float32)
    for operation, data in (("cumsum", x), ("cumprod", y)):
        for axis in (0, 1):
            want, kernels_bound = check.make_reference(operation)(data, axis=axis)
            bound = _sequential_bound(operation, data, want, axis, numpy.dtype("float32"), numpy)
            error = abs(getattr(numpy, operation)(data, axis=axis) - want)  # float32 throughout
            assert numpy.all(error <= bound)
            assert numpy.all(kernels_bound <= bound)


def test_reference_bounds_hold_for_numpys_own_float32_scan():
    rng = numpy.random.default_rng(5)
    x = rng.uniform(-1, 1, 10**5).astype(numpy.float32)
    want, bound = check.make_reference("cumsum")(x)
    assert numpy.all(abs(numpy.cumsum(x.astype(numpy.float64)).astype(numpy.float32) - want)
                     <= bound)
    y = (1 + x / x.size).astype(numpy.float32)
    want, bound = check.make_reference("cumprod")(y)
    assert numpy.all(abs(numpy.cumprod(y.astype(numpy.float64)).astype(numpy.float32) - want)
                     <= bound)


# ---- GPU: every rung against NumPy -------------------------------------------------------------

cupy = pytest.importorskip("cupy")


def _data(operation, shape, dtype, rng, n):
    """Random data: every integer bit pattern, a fair coin, uniform(-1, 1) floats for cumsum;
    for cumprod odd integers and float factors near 1, so that products of ``n`` stay finite
    and nonzero."""
    dtype = numpy.dtype(dtype)
    x = check.inputs(shape, dtype, rng)[0][0]
    if operation == "cumprod" and dtype.kind in "iu":
        return x | dtype.type(1)
    if operation == "cumprod" and dtype.kind in "fc":
        width = min(0.5, 2.0 * numpy.sqrt(3.0 / max(n, 1)))
        scale = numpy.exp2(rng.uniform(-width, width, size=shape))
        signs = numpy.where(rng.random(shape) < 0.5, -1.0, 1.0)
        return numpy.asarray(signs * scale).astype(dtype)
    return x


def _compare(got, x, operation, **kwargs):
    want, bound = check.make_reference(operation)(x, **kwargs)
    got = cupy.asnumpy(got)
    assert got.shape == want.shape
    assert got.dtype == reduction_result_dtype(operation, x.dtype, kwargs.get("dtype"))
    if bound is None:
        numpy.testing.assert_array_equal(got, want)
    else:
        error = numpy.abs(got.astype(want.dtype) - want)
        bad = ~(error <= bound) & ~(numpy.isnan(got) & numpy.isnan(want))
        assert not bad.any(), (f"{bad.sum()} of {bad.size} wrong; first at "
                               f"{numpy.argwhere(bad)[0]}: got {got[bad][0]}, want {want[bad][0]}")


LENGTHS = (1, 2, 31, 4095, 4096, 4097, 3 * 4096 + 17, 123457)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [d.name for d in rungs.IN_DTYPES])
def test_narrow_blocks_static_shared_memory_is_within_the_planned_bound(dtype):
    # narrow_geometry sizes the tile with an estimate of the kernel's static shared memory;
    # the compiled kernel's own figure must not pass it, or a block could exceed sm_75's limit
    dtype = numpy.dtype(dtype)
    warps, items = rungs.narrow_geometry(dtype)
    kernel = rungs.SOURCE.function(rungs._columns_instance("SumOp", dtype, True))
    assert kernel.shared_size_bytes <= rungs._narrow_shared(dtype, warps, items)[1]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [d.name for d in rungs.IN_DTYPES])
def test_blocked_keeps_its_blocks_per_sm(dtype):
    # scan.cu caps blocked's registers so that six blocks of 256 threads share an SM where the
    # input is at most 4 bytes wide, four where it is wider (there 40 registers spill the
    # runs); sm_75 holds four blocks of 256 threads at most
    cupy = pytest.importorskip("cupy")
    dtype = numpy.dtype(dtype)
    device = cupy.cuda.Device()
    blocks = 4 if dtype.itemsize >= 8 or int(device.compute_capability) < 80 else 6
    kernel = rungs.SOURCE.function(rungs._blocked_instance("SumOp", dtype))
    registers = device.attributes["MaxRegistersPerMultiprocessor"]
    assert blocks * rungs.LOOK_BACK_BLOCK * kernel.num_regs <= registers, kernel.num_regs


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [d.name for d in rungs.IN_DTYPES])
def test_pipelined_keeps_its_blocks_per_sm(dtype):
    # scan.cu caps pipelined's registers so that four blocks of 256 data threads and a
    # look-back warp share an SM where the input is at most 4 bytes wide, three where it is
    # wider; its two tile buffers and static arrays fit the block's shared memory, and on an
    # SM of 228 KiB (sm_90) that many blocks run, but three where the outputs are 8 bytes or
    # wider (two buffers of 36 KiB each)
    device = cupy.cuda.Device()
    dtype = numpy.dtype(dtype)
    blocks = 3 if dtype.itemsize >= 8 else 4
    instance = rungs._pipelined_instance("SumOp", dtype)
    kernel = rungs.SOURCE.function(instance)
    registers = device.attributes["MaxRegistersPerMultiprocessor"]
    assert blocks * rungs.PIPELINED_THREADS * kernel.num_regs <= registers, kernel.num_regs
    shared = kernel.shared_size_bytes + rungs.pipelined_shared_bytes(dtype)
    assert shared <= device.attributes["MaxSharedMemoryPerBlockOptin"]
    if int(device.compute_capability) == 90:
        wide = rungs.accumulator(dtype)[1].itemsize >= 8
        resident = rungs.device_resident(instance, rungs.PIPELINED_THREADS,
                                         rungs.pipelined_shared_bytes(dtype))
        assert resident == (3 if wide else blocks) * device.attributes["MultiProcessorCount"]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [d.name for d in rungs.IN_DTYPES])
def test_striped_keeps_its_blocks_per_sm(dtype):
    # scan.cu caps striped's registers so that three blocks of 256 data threads and two
    # look-back warps share an SM where the input is at most 4 bytes wide, two where it is
    # wider; its slots and static arrays fit a block's shared memory, and on sm_90 (228 KiB
    # an SM) that many blocks run
    device = cupy.cuda.Device()
    dtype = numpy.dtype(dtype)
    instance = rungs._striped_instance("SumOp", dtype)
    kernel = rungs.SOURCE.function(instance)
    registers = device.attributes["MaxRegistersPerMultiprocessor"]
    blocks = 2 if dtype.itemsize >= 8 else 3
    assert blocks * rungs.STRIPED_THREADS * kernel.num_regs <= registers, kernel.num_regs
    shared = kernel.shared_size_bytes + rungs.striped_shared_bytes(dtype)
    assert shared <= device.attributes["MaxSharedMemoryPerBlockOptin"]
    if int(device.compute_capability) == 90:
        # at least the launch bounds' blocks (8-byte inputs whose registers and slots allow
        # it run three)
        resident = rungs.device_resident(instance, rungs.STRIPED_THREADS,
                                         rungs.striped_shared_bytes(dtype))
        assert resident >= blocks * device.attributes["MultiProcessorCount"]


@pytest.mark.gpu
@pytest.mark.parametrize("method", RESIDENT_TILE)
@pytest.mark.parametrize("dtype", ["float32", "int8", "float64"])
def test_launches_in_a_row_whose_blocks_take_few_tiles(method, dtype, rng, monkeypatch):
    # a hundred blocks of three or four tiles each, four launches in a row: a block starts on
    # the shared memory that a block of the launch before left, its rounds posted at the same
    # places (striped once took such a post for its own, and hung or scanned the wrong tile)
    from gpukernels._core.launch import PLANS

    monkeypatch.setattr(rungs, "device_resident", lambda *_: 100)
    PLANS.clear()
    try:
        shape = (3 * 100 * RESIDENT_TILE[method](numpy.dtype(dtype)) + 77,)
        x = _data("cumsum", shape, dtype, rng, shape[-1])
        for _ in range(4):
            out = poisoned(shape, reduction_result_dtype("cumsum", x.dtype, None))
            with record_launches() as launches:
                got = gk.cumsum(cupy.asarray(x), method=method, out=out)
            assert [launch.grid for launch in launches] == [(100, 1, 1)]
            _compare(got, x, "cumsum")
    finally:
        PLANS.clear()


@pytest.mark.gpu
@pytest.mark.parametrize("method", RESIDENT_TILE)
@pytest.mark.parametrize("dtype", ["float32", "int8", "float64", "complex128"])
def test_launches_in_a_row_of_a_tile_a_block(method, dtype, rng, monkeypatch):
    # where the blocks are as many as the tiles no block claims a second tile, and each block
    # counts itself finished while its data warps finish: launches of 1, 37 and 100 tiles a
    # block each, between launches of fewer blocks than tiles, on one stream's counters
    from gpukernels._core.launch import PLANS

    tile = RESIDENT_TILE[method](numpy.dtype(dtype))
    try:
        for tiles, blocks in ((37, 37), (100, 100), (300, 40), (1, 1), (100, 100), (37, 37)):
            monkeypatch.setattr(rungs, "device_resident", lambda *_, blocks=blocks: blocks)
            PLANS.clear()
            shape = ((tiles - 1) * tile + 5,)
            x = _data("cumsum", shape, dtype, rng, shape[-1])
            out = poisoned(shape, reduction_result_dtype("cumsum", x.dtype, None))
            with record_launches() as launches:
                got = gk.cumsum(cupy.asarray(x), method=method, out=out)
            assert [launch.grid for launch in launches] == [(blocks, 1, 1)]
            _compare(got, x, "cumsum")
    finally:
        PLANS.clear()


@pytest.mark.gpu
@pytest.mark.parametrize("method", RESIDENT_TILE)
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int8", "float64", "complex128"])
def test_resident_blocks_take_many_tiles_each(method, dtype, rng, monkeypatch):
    # a grid of three blocks (and of one): each takes dozens of tiles, several in flight, so
    # every buffer, ring slot and barrier is reused many times; rows long and short, a partial
    # last tile; a row longer than GK_RECORD_ROWS in an input of fewer than GK_RECORD_INPUT
    # elements (scan.cu: pipelined publishes records there, as in the shorter rows before it;
    # flags in larger inputs: the next test)
    from gpukernels._core.launch import PLANS

    for blocks in (3, 1):
        monkeypatch.setattr(rungs, "device_resident", lambda *_, blocks=blocks: blocks)
        PLANS.clear()
        try:
            for shape, axis in (((123457,), None), ((7, 30011), 1), ((5000, 17), 1),
                                ((2**17 + 3,), None), ((2**18 + 4097,), None)):
                x = _data("cumsum", shape, dtype, rng, shape[-1])
                with record_launches() as launches:
                    out = poisoned(shape, reduction_result_dtype("cumsum", x.dtype, None))
                    got = gk.cumsum(cupy.asarray(x), axis=axis, method=method, out=out)
                assert [launch.grid for launch in launches] == [(blocks, 1, 1)]
                _compare(got, x, "cumsum", axis=axis)
                again = gk.cumsum(cupy.asarray(x), axis=axis, method=method)
                assert bool((again.view(numpy.uint8) == got.view(numpy.uint8)).all())
        finally:
            PLANS.clear()


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "int32", "float64"])
def test_pipelined_switches_between_records_and_flags_on_one_scratch(dtype, rng, monkeypatch):
    # scan.cu, gk_pipelined_records: rows of more than GK_RECORD_ROWS (2^18) elements in inputs
    # of more than GK_RECORD_INPUT (2^24) publish flags and values, every other launch 16-byte
    # records, both in one stream's scratch. Three blocks, each taking thousands of tiles:
    # records, then flags, then records in a long row of a small input, then flags again.
    from gpukernels._core.launch import PLANS

    monkeypatch.setattr(rungs, "device_resident", lambda *_: 3)
    PLANS.clear()
    try:
        for shape, axis in (((5000, 17), 1), ((65, 2**18 + 4097), 1), ((2**18 + 4097,), None),
                            ((2**24 + 1,), None)):
            x = _data("cumsum", shape, dtype, rng, shape[-1])
            with record_launches() as launches:
                out = poisoned(shape, reduction_result_dtype("cumsum", x.dtype, None))
                got = gk.cumsum(cupy.asarray(x), axis=axis, method="pipelined", out=out)
            assert [launch.grid for launch in launches] == [(3, 1, 1)]
            _compare(got, x, "cumsum", axis=axis)
            again = gk.cumsum(cupy.asarray(x), axis=axis, method="pipelined")
            assert bool((again.view(numpy.uint8) == got.view(numpy.uint8)).all())
    finally:
        PLANS.clear()


@pytest.mark.gpu
@pytest.mark.parametrize("method", RESIDENT_TILE)
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int8", "float64", "complex128"])
def test_plain_tiles_and_their_neighbours(method, dtype, rng):
    # pipelined and striped scan a tile inside one row, with its input and output 16-byte
    # aligned, without a test per element or word (scan.cu, gk_tile_kind), and pipelined a
    # whole aligned tile with rows starting in it, or the first of a row, with every word one
    # load and store (gk_pipelined_kind); rows that end just inside, at and just past tile
    # boundaries, a long row, many short rows to a tile (starting inside words where a row is
    # not a whole number of them), and out= at an aligned start and one element after it (off
    # 16-byte alignment where items are narrower: no tile is plain there); the elements on
    # either side of out= stay unwritten
    dtype = numpy.dtype(dtype)
    tile = RESIDENT_TILE[method](dtype)
    result = reduction_result_dtype("cumsum", dtype, None)
    for shape in ((3, tile + 1), (4, 2 * tile - 1), (3, 3 * tile), (11 * tile + 5,),
                  (2, 5 * tile + tile // 2), (2 * tile // 16 + 3, 16), (3 * tile // 100 + 1, 100)):
        x = _data("cumsum", shape, dtype, rng, shape[-1])
        for offset in (0, 1):
            size = int(numpy.prod(shape))
            buffer = poisoned((size + 2,), result)
            out = buffer[offset:offset + size].reshape(shape)
            got = gk.cumsum(cupy.asarray(x), axis=-1, method=method, out=out)
            assert got is out
            _compare(out, x, "cumsum", axis=-1)
            untouched = cupy.asnumpy(buffer.view(numpy.uint8))
            start, end = offset * result.itemsize, (offset + size) * result.itemsize
            assert (untouched[:start] == 0xFF).all() and (untouched[end:] == 0xFF).all()


@pytest.mark.gpu
@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("method", RUNGS + ("auto",))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_flat_scans_of_every_dtype(operation, method, dtype, rng):
    for n in LENGTHS if method != "columns" else LENGTHS[:5]:
        x = _data(operation, (n,), dtype, rng, n)
        _compare(getattr(gk, operation)(cupy.asarray(x), method=method), x, operation)


@pytest.mark.gpu
@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("method", RUNGS + ("auto",))
@pytest.mark.parametrize("dtype", ["int32", "float32", "float16", "uint8", "complex128"])
@pytest.mark.parametrize(("shape", "axis"), [
    ((7, 5), 1), ((7, 5), 0), ((1000, 3), 1), ((3, 9000), 1), ((4100, 33), 0), ((33, 4100), 0),
    ((5, 6, 7), 1), ((5, 6, 7), -3), ((2, 3, 4, 5), 2), ((300, 1, 40), 1), ((9,), 0), ((), 0)])
def test_scans_along_an_axis(operation, method, dtype, shape, axis, rng):
    n = shape[axis] if shape else 1
    x = _data(operation, shape, dtype, rng, n)
    got = getattr(gk, operation)(cupy.asarray(x), axis=axis, method=method)
    _compare(got, x, operation, axis=axis)


@pytest.mark.gpu
@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("inner", [2, 3, 8, 16, 17, 24, 32])
def test_narrow_column_scans_of_every_dtype(operation, dtype, inner, rng, monkeypatch):
    # columns' narrow path on every dtype's tile geometry (narrow_geometry), with every lane
    # working (a power of two of columns) and with lanes idle (3, 17, 24: a row takes 4, 32
    # and 32 lanes): many tiles, the last one partial, and scans that begin inside a tile
    # (several along axis 1); outputs poisoned, so an element left unwritten, or one written
    # past a tile's last row, shows. The striped path, which would take some of these, is
    # held off (its own test is test_columns_striped_path).
    from gpukernels._core.launch import PLANS

    monkeypatch.setattr(rungs, "COLUMNS_STRIPED_MIN", 1 << 62)
    PLANS.clear()
    try:
        for shape, axis in (((20011, inner), 0), ((3, 4099, inner), 1)):
            x = _data(operation, shape, dtype, rng, shape[axis])
            out = poisoned(shape, reduction_result_dtype(operation, dtype, None))
            with record_launches() as launches:
                got = getattr(gk, operation)(cupy.asarray(x), axis=axis, method="columns",
                                             out=out)
            assert [launch.instance for launch in launches] == [
                rungs._columns_instance(rungs.OPERATORS[operation], dtype, True)]
            _compare(got, x, operation, axis=axis)
    finally:
        PLANS.clear()


@pytest.mark.gpu
@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("dtype", sorted(STRIPED_COLUMNS))
def test_columns_striped_path(operation, dtype, rng, monkeypatch):
    # columns' striped path (scan.cu, scan_columns_striped) for every row width it takes: one
    # partial tile, a few tiles, and many tiles a block (grids of 3 and 1 resident blocks, so
    # every slot, ring post and barrier is reused), the last tile partial; an out= one element
    # off 16-byte alignment (element loads and stores) with its neighbours left unwritten; the
    # same input twice gives bitwise the same output
    from gpukernels._core.launch import PLANS

    cupy_device = cupy.cuda.Device()
    if int(cupy_device.compute_capability) < rungs.COLUMNS_STRIPED_CAPABILITY:
        pytest.skip("the striped path runs on sm_90 and newer")
    monkeypatch.setattr(rungs, "COLUMNS_STRIPED_MIN", 0)
    dtype = numpy.dtype(dtype)
    result = reduction_result_dtype(operation, dtype, None)
    for blocks in (None, 3, 1):
        if blocks is not None:
            monkeypatch.setattr(rungs, "device_resident", lambda *_, blocks=blocks: blocks)
        PLANS.clear()
        try:
            for inner in STRIPED_COLUMNS[dtype.name]:
                instance = rungs._columns_striped_instance(rungs.OPERATORS[operation], dtype,
                                                           inner)
                rows = rungs.columns_striped_tile(dtype, inner) // inner
                for n in ((rows // 2 + 1, 3 * rows + 5) if blocks is None
                          else (41 * rows + rows // 3,)):
                    x = _data(operation, (n, inner), dtype, rng, n)
                    for offset in (0, 1):
                        size = n * inner
                        buffer = poisoned((size + 2,), result)
                        out = buffer[offset:offset + size].reshape(n, inner)
                        with record_launches() as launches:
                            got = getattr(gk, operation)(cupy.asarray(x), axis=0, out=out)
                        assert got is out
                        assert [launch.instance for launch in launches] == [instance]
                        if blocks is not None:
                            assert [launch.grid for launch in launches] == [(blocks, 1, 1)]
                        _compare(out, x, operation, axis=0)
                        untouched = cupy.asnumpy(buffer.view(numpy.uint8))
                        start, end = offset * result.itemsize, (offset + size) * result.itemsize
                        assert (untouched[:start] == 0xFF).all()
                        assert (untouched[end:] == 0xFF).all()
                    again = getattr(gk, operation)(cupy.asarray(x), axis=0)
                    first = getattr(gk, operation)(cupy.asarray(x), axis=0)
                    assert bool((again.view(numpy.uint8) == first.view(numpy.uint8)).all())
        finally:
            PLANS.clear()


@pytest.mark.gpu
@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("dtype", ["int32", "uint8", "float32", "float16", "float64",
                                   "complex128"])
def test_wide_column_scans_on_both_look_backs(operation, dtype, rng):
    # columns' wide path (past 32 columns): fewer than COLUMNS_GROUPED_CHUNKS chunks of 32
    # columns look back by groups of 32 tiles along each column's chain ((20011, 40): 157 row
    # tiles, five groups; (3, 9001, 56) along axis 1: a chain per leading index; 224 columns:
    # seven chunks), more walk back a tile at a time (230 columns: eight chunks; 1100: 35);
    # outputs poisoned, so an element left unwritten shows, and a second call gives the same
    # bits
    dtype = numpy.dtype(dtype)
    assert -(-224 // 32) < rungs.COLUMNS_GROUPED_CHUNKS <= -(-230 // 32)
    for shape, axis in (((20011, 40), 0), ((3, 9001, 56), 1), ((4500, 224), 0),
                        ((4500, 230), 0), ((700, 1100), 0)):
        x = _data(operation, shape, dtype, rng, shape[axis])
        out = poisoned(shape, reduction_result_dtype(operation, dtype, None))
        with record_launches() as launches:
            got = getattr(gk, operation)(cupy.asarray(x), axis=axis, method="columns", out=out)
        grouped = -(-shape[-1] // 32) < rungs.COLUMNS_GROUPED_CHUNKS
        assert [launch.instance for launch in launches] == [
            rungs._columns_instance(rungs.OPERATORS[operation], dtype, False, grouped)]
        _compare(got, x, operation, axis=axis)
        again = getattr(gk, operation)(cupy.asarray(x), axis=axis, method="columns")
        assert bool((again.view(numpy.uint8) == got.view(numpy.uint8)).all())


@pytest.mark.gpu
@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_dtype_requests(operation, dtype, rng):
    import warnings

    x = _data(operation, (5000,), dtype, rng, 5000)
    for requested in REQUESTS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if numpy.dtype(requested or dtype).kind in "fc" and dtype.kind in "iu" and \
                    (operation == "cumprod" or requested == "float16"):
                continue  # products of random integers as floats, and sums as float16, overflow
            if dtype.kind in "fc" and numpy.dtype(requested or dtype).kind == "u":
                continue  # negative floats cast to unsigned: undefined in C, CuPy and NumPy differ
            got = getattr(gk, operation)(cupy.asarray(x), dtype=requested)
            _compare(got, x, operation, dtype=requested)


@pytest.mark.gpu
@pytest.mark.parametrize("method", RUNGS)
def test_strided_reversed_and_misaligned_views(method, rng):
    base = rng.uniform(-1, 1, (64, 300)).astype(numpy.float32)
    device = cupy.asarray(base)
    views = [(device[:, ::3], base[:, ::3]), (device[::-1], base[::-1]), (device.T, base.T),
             (device.reshape(-1)[1:], base.reshape(-1)[1:]),
             (device.reshape(-1)[3:-2].reshape(-1, 5), base.reshape(-1)[3:-2].reshape(-1, 5))]
    for view, host in views:
        for axis in (None, 0, -1):
            _compare(gk.cumsum(view, axis=axis, method=method), host, "cumsum", axis=axis)


@pytest.mark.gpu
@pytest.mark.parametrize("method", RUNGS)
def test_integer_scans_wrap_as_numpys(method, rng):
    x = numpy.full(9000, 2**62 + 12345, dtype=numpy.int64)
    x[::7] = -3
    _compare(gk.cumsum(cupy.asarray(x), method=method), x, "cumsum")
    y = rng.integers(2**30, 2**31 - 1, 70000, dtype=numpy.int32)
    _compare(gk.cumsum(cupy.asarray(y), method=method), y, "cumsum")  # past 2**31 in int64
    _compare(gk.cumsum(cupy.asarray(y), dtype=numpy.int32, method=method), y, "cumsum",
             dtype=numpy.int32)
    z = rng.integers(0, 2**64, 5000, dtype=numpy.uint64, endpoint=False) | numpy.uint64(1)
    _compare(gk.cumprod(cupy.asarray(z), method=method), z, "cumprod")


@pytest.mark.gpu
@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("method", RUNGS)
def test_nan_and_inf_propagate(operation, method):
    x = numpy.ones(10000, dtype=numpy.float32)
    x[5000] = numpy.nan
    x[20] = numpy.inf
    got = cupy.asnumpy(getattr(gk, operation)(cupy.asarray(x), method=method))
    want = getattr(numpy, operation)(x.astype(numpy.float64))
    numpy.testing.assert_array_equal(numpy.isnan(got), numpy.isnan(want))
    numpy.testing.assert_array_equal(got[:5000], want[:5000].astype(numpy.float32))


@pytest.mark.gpu
@pytest.mark.parametrize("method", RUNGS)
@pytest.mark.parametrize(("shape", "axis"), [((2**20 + 3,), None), ((2**14, 16), 0),
                                             ((64, 2**14 + 1), 1)])
def test_the_same_input_gives_the_same_bits(method, shape, axis, rng):
    x = cupy.asarray(rng.uniform(-1, 1, shape).astype(numpy.float32))
    first = gk.cumsum(x, axis=axis, method=method)
    for _ in range(3):
        assert bool((gk.cumsum(x, axis=axis, method=method).view(numpy.uint32)
                     == first.view(numpy.uint32)).all())


@pytest.mark.gpu
@pytest.mark.parametrize("method", RUNGS)
def test_out_is_written_directly_or_cast(method, rng):
    x = rng.uniform(-1, 1, (300, 70)).astype(numpy.float32)
    device = cupy.asarray(x)
    out = poisoned((300, 70), numpy.float32)
    result = gk.cumsum(device, axis=0, method=method, out=out)
    assert result is out
    _compare(out, x, "cumsum", axis=0)
    wide = poisoned((300 * 70,), numpy.float64)
    assert gk.cumsum(device, method=method, out=wide) is wide
    numpy.testing.assert_allclose(cupy.asnumpy(wide), numpy.cumsum(x.astype(numpy.float64)),
                                  rtol=1e-5, atol=1e-3)


@pytest.mark.gpu
def test_empty_and_single_element_inputs():
    for shape, axis in (((0,), None), ((0, 3), 0), ((3, 0), 1), ((0, 3), None), ((4, 1), 1)):
        x = numpy.arange(numpy.prod(shape), dtype=numpy.int32).reshape(shape)
        got = gk.cumsum(cupy.asarray(x), axis=axis)
        numpy.testing.assert_array_equal(cupy.asnumpy(got), numpy.cumsum(x, axis=axis))
        assert got.dtype == numpy.int64
    assert gk.cumprod(cupy.asarray(3.0)).shape == (1,)


@pytest.mark.gpu
@pytest.mark.parametrize(("call", "error"), [
    (lambda x: gk.cumsum(x, axis=2), numpy.exceptions.AxisError),
    (lambda x: gk.cumsum(x, axis=(0,)), TypeError),
    (lambda x: gk.cumsum(x, axis=True), TypeError),
    (lambda x: gk.cumsum(x, axis=1.0), TypeError),
    (lambda x: gk.cumsum(x, dtype="U3"), TypeError),
    (lambda x: gk.cumsum(x, method="bogus"), ValueError),
    (lambda x: gk.cumsum(x, method=3), TypeError),
    (lambda x: gk.cumsum(x.get()), TypeError),
    (lambda x: gk.cumsum(x, out=cupy.empty(5)), ValueError),
    (lambda x: gk.cumsum(x, axis=0, out=numpy.empty((4, 6)))
     , TypeError),
])
def test_bad_calls_raise_before_any_launch(call, error):
    x = cupy.ones((4, 6), dtype=numpy.float32)
    with record_launches() as launches:
        with pytest.raises(error):
            call(x)
    assert launches == []
    assert float(gk.cumsum(x)[-1]) == 24.0  # still usable


@pytest.mark.gpu
@pytest.mark.parametrize(("shape", "axis", "dtype"), [
    ((rungs.STRIPED_MIN_ROW + 37,), None, "float32"),
    ((2, rungs.STRIPED_MIN_ROW + 5), 1, "float16"),
    ((3, rungs.STRIPED_MIN_ROW // 2), None, "float64"),  # flattened: one row of 3 x 2^21
    ((rungs.STRIPED_MIN_ROW - 1,), None, "float32"),
    ((rungs.STRIPED_MIN_ROW + 3,), None, "int32"),
    ((rungs.STRIPED_ONE_BYTE_FACTOR * rungs.STRIPED_MIN_ROW + 1,), None, "int8"),
    ((rungs.STRIPED_ONE_BYTE_FACTOR * rungs.STRIPED_MIN_ROW - 1,), None, "int8"),
    ((rungs.STRIPED_MIN_ROW + 3,), None, "int64"),
    # shorter rows of inputs of STRIPED_MIN_INPUT elements and more (STRIPED_ONE_BYTE_INPUT)
    ((128, 2**17 + 1), 1, "float32"), ((129, 2**17), 1, "float32"),
    ((32, 2**19 + 7), 1, "float16"), ((64, 2**18), 1, "float16"),
    ((64, 2**18), 1, "int16"), ((127, 2**17 + 5), 1, "int32"), ((128, 2**17 + 5), 1, "int32"),
    ((128, 2**19), 1, "uint8"), ((257, 2**18), 1, "int8"), ((128, 2**19), 1, "bool"),
    ((64, 2**18), 1, "float64")])
def test_auto_takes_striped_for_long_rows(shape, axis, dtype, rng):
    x = _data("cumsum", shape, dtype, rng, shape[-1])
    shortest = rungs.striped_min_row(x.dtype, x.size)
    row = math.prod(shape) if axis is None else shape[axis]
    long = shortest is not None and row >= shortest
    out = poisoned(shape if axis is not None else (math.prod(shape),),
                   reduction_result_dtype("cumsum", x.dtype, None))
    with record_launches() as launches:
        got = gk.cumsum(cupy.asarray(x), axis=axis, out=out)
    assert [launch.instance.split("<")[0] for launch in launches] == \
        ["scan_striped" if long else "scan_pipelined"]
    _compare(got, x, "cumsum", axis=axis)


@pytest.mark.gpu
def test_a_large_flat_scan_reaches_every_tile(rng):
    n = 2**24 + 5
    x = cupy.asarray(rng.integers(-1000, 1000, n, dtype=numpy.int32))
    got = gk.cumsum(x)
    want = cupy.cumsum(x.astype(numpy.int64))
    assert bool((got == want).all())
