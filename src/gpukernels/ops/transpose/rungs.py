"""The transpose ladder: its rungs, their instances, and their plans (launch geometry).

Every number that shapes a launch (tiles, threads, shared memory) is set here and reaches the
kernel as a template argument; the kernels in ``kernels/transpose/`` static_assert what follows
from them. A plan maps a :class:`Problem` (one launch's worth of matrices) to a
:class:`~gpukernels._core.launch.Launch`; :func:`choose` is ``method="auto"``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..._core.compile import KernelSource
from ..._core.ladder import Ladder, Needs, Rung
from ..._core.launch import INDEX_SCALARS, MAX_GRID_X, MAX_GRID_YZ, Launch, ceil_div

__all__ = ["Problem", "LADDER", "choose", "CARRIERS", "copy_launch", "SOURCE", "WORDS_SOURCE",
           "NARROW_MAX", "NARROW_MAX_8_BYTE", "NARROW_MAX_WIDE", "narrow_max"]

SOURCE = KernelSource("transpose/transpose.cu")
WORDS_SOURCE = KernelSource("transpose/words.cu")
INDEXES = tuple(INDEX_SCALARS)  # "int", then "long long": the 64-bit instances compile lazily

# A transpose moves bits, so one instance serves every dtype of an item size.
CARRIERS = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int",
            8: "unsigned long long", 16: "gk_bytes16"}
SECTOR_BYTES = 32  # the unit of DRAM access: an output row starting inside one needs SKEW


@dataclass(frozen=True)
class Problem:
    """One launch of a transpose: ``batch`` (at most 65535) matrices of ``rows`` x ``cols``.

    Attributes
    ----------
    itemsize : int
        Bytes per element.
    batch, rows, cols : int
    strides : tuple of 3 ints
        The input's strides in elements: (batch, row, column); any sign.
    out_strides : tuple of 2 ints
        The output's strides in elements: (batch, row), positive; its rows (of ``rows``
        elements) are contiguous. ``(rows * cols, rows)`` for a C-contiguous stack.
    in_address, out_address : int
        The input's and the output's addresses modulo 256 (what alignment decisions read).
    capability : int
        The device's compute capability (90 for 9.0).
    index : str
        The kernels' index type, ``"int"`` or ``"long long"``.
    """

    itemsize: int
    batch: int
    rows: int
    cols: int
    strides: tuple[int, int, int]
    out_strides: tuple[int, int]
    in_address: int
    out_address: int
    capability: int
    index: str

    @property
    def unit_columns(self) -> bool:
        """The input's rows are contiguous (or one column wide)."""
        return self.strides[2] == 1 or self.cols == 1


# --- rungs 1 and 2: naive, naive_col ---------------------------------------------------------------

NAIVE_THREADS = 256
#: Threads along x of the naive rungs' 256-thread blocks, per item size. The width sets what a warp
#: touches: `width` elements of each of 32 / width rows. 16 x 16 blocks (the bandwidth study's)
#: reach 0.30 (naive) and 0.57 (naive_col) of a copy for float32 at 8192^2 on an H100; these
#: widths, the best of 1 to 64 measured over 8192^2 and 8191x8193 for every item size, reach 0.61
#: and 0.65 (benchmarks/NOTES.md, item 19).
NAIVE_WIDTH = {1: 4, 2: 4, 4: 4, 8: 4, 16: 4}
NAIVE_COL_WIDTH = {1: 16, 2: 16, 4: 8, 8: 8, 16: 8}


def _naive_instance(kernel: str, itemsize: int, index: str) -> str:
    return f"{kernel}<{CARRIERS[itemsize]}, {index}>"


def _plan_naive(p: Problem, kernel: str, width: int, x_extent: int, y_extent: int) -> Launch:
    block = (width, NAIVE_THREADS // width, 1)
    grid = (ceil_div(x_extent, block[0]), min(ceil_div(y_extent, block[1]), MAX_GRID_YZ), p.batch)
    return Launch(SOURCE, _naive_instance(kernel, p.itemsize, p.index), grid, block)


def plan_naive(p: Problem) -> Launch:
    """x walks the input's columns, y its rows (a grid-stride loop)."""
    return _plan_naive(p, "transpose_naive", NAIVE_WIDTH[p.itemsize], p.cols, p.rows)


def plan_naive_col(p: Problem) -> Launch:
    """x walks the input's rows (the output's columns), y its columns."""
    return _plan_naive(p, "transpose_naive_col", NAIVE_COL_WIDTH[p.itemsize], p.rows, p.cols)


# --- rung 3: shared ---------------------------------------------------------------------------------

SHARED_TILE = 32
SHARED_ROWS = 8  # threads per tile column: each thread moves SHARED_TILE / SHARED_ROWS elements


def _shared_instance(itemsize: int, index: str) -> str:
    return f"transpose_shared<{CARRIERS[itemsize]}, {index}, {SHARED_TILE}, {SHARED_ROWS}>"


def plan_shared(p: Problem) -> Launch:
    """A block per SHARED_TILE x SHARED_TILE tile."""
    grid = (ceil_div(p.cols, SHARED_TILE), min(ceil_div(p.rows, SHARED_TILE), MAX_GRID_YZ),
            p.batch)
    return Launch(SOURCE, _shared_instance(p.itemsize, p.index), grid,
                  (SHARED_TILE, SHARED_ROWS, 1))


# --- rung 4: vector ---------------------------------------------------------------------------------

#: transpose_vector configurations per item size, best first: (V, TILE, ROWS). V x V element
#: blocks make 16-byte words (4-byte words as the second choice for 1- and 2-byte items); V = 1,
#: the last choice, runs on any shape and strides. Measured on an H100 (benchmarks/NOTES.md,
#: items 8 and 25).
VECTOR_CONFIGS = {
    1: ((16, 8, 8), (4, 32, 8), (1, 32, 8)),
    2: ((8, 16, 16), (2, 32, 8), (1, 32, 8)),
    4: ((4, 16, 16), (1, 32, 8)),
    8: ((1, 32, 16),),
    16: ((1, 32, 8),),
}
#: With SKEW, V = 1 tiles are taller, (TILE, ROWS, TALL) per item size: the E - 1 extra block
#: rows a SKEW tile stages are then a smaller share (item 25). Other SKEW tiles take TALL from
#: :func:`vector_tall`.
SKEW_SCALAR_CONFIGS = {1: (32, 8, 4), 2: (32, 16, 2), 4: (32, 32, 8), 8: (32, 16, 4),
                       16: (32, 8, 2)}
#: Largest static shared memory a SKEW tile may take when it is made taller (TALL > 1).
TALL_SHARED_BYTES = 40 * 1024


def vector_tall(itemsize: int, config: tuple[int, int, int], skew: bool) -> int:
    """TALL of transpose_vector: tile rows per tile column. A SKEW tile stages E - 1 extra block
    rows; a taller tile makes them a smaller share, as long as it fits TALL_SHARED_BYTES."""
    if not skew:
        return 1
    vector, tile, threads_y = config
    if vector == 1 and SKEW_SCALAR_CONFIGS[itemsize][:2] == (tile, threads_y):
        return SKEW_SCALAR_CONFIGS[itemsize][2]
    word = vector * itemsize
    sector_words = 1 if word >= SECTOR_BYTES else SECTOR_BYTES // word
    for tall in (4, 2):
        pitch = (tall * tile + sector_words - 1) | 1
        if vector * tile * pitch * word <= TALL_SHARED_BYTES:
            return tall
    return 1


def vector_launched_config(itemsize: int, config: tuple[int, int, int],
                           skew: bool) -> tuple[int, int, int]:
    """The (V, TILE, ROWS) launched for a chosen VECTOR_CONFIGS entry: V = 1 with SKEW takes
    its taller tile's TILE and ROWS from SKEW_SCALAR_CONFIGS."""
    if skew and config[0] == 1:
        return (1, *SKEW_SCALAR_CONFIGS[itemsize][:2])
    return config


def vector_instance(itemsize: int, index: str, config: tuple[int, int, int], skew: bool) -> str:
    vector, tile, threads_y = config
    return (f"transpose_vector<{CARRIERS[itemsize]}, {index}, {vector}, {tile}, {threads_y}, "
            f"{'true' if skew else 'false'}, {vector_tall(itemsize, config, skew)}>")


def vector_config(p: Problem) -> tuple[tuple[int, int, int], bool]:
    """The transpose_vector configuration for a problem, and whether it needs SKEW.

    V > 1 needs contiguous input rows, rows and cols that are multiples of V, and every word
    aligned to V * itemsize bytes (strides on both sides and both base addresses); otherwise a
    smaller V. SKEW is needed unless every output row starts on a 32-byte sector.
    """
    batch_stride, row_stride, col_stride = p.strides
    for config in VECTOR_CONFIGS[p.itemsize]:
        vector = config[0]
        word = vector * p.itemsize
        if vector == 1 or (
                col_stride == 1 and p.rows % vector == 0 and p.cols % vector == 0
                and row_stride % vector == 0 and batch_stride % vector == 0
                and all(stride % vector == 0 for stride in p.out_strides)
                and p.in_address % word == 0 and p.out_address % word == 0):
            break
    skew = not (all(stride * p.itemsize % SECTOR_BYTES == 0 for stride in p.out_strides)
                and p.out_address % SECTOR_BYTES == 0)
    return vector_launched_config(p.itemsize, config, skew), skew


def plan_vector(p: Problem) -> Launch:
    """A block per tile of TALL * TILE x TILE blocks of V x V elements; with SKEW one extra row
    tile (see kernels/transpose/transpose.cu)."""
    config, skew = vector_config(p)
    vector, tile, threads_y = config
    tile_rows = tile * vector_tall(p.itemsize, config, skew)
    row_tiles = ceil_div(p.rows // vector, tile_rows) + (1 if skew else 0)
    grid = (ceil_div(p.cols // vector, tile), min(row_tiles, MAX_GRID_YZ), p.batch)
    return Launch(SOURCE, vector_instance(p.itemsize, p.index, config, skew), grid,
                  (tile, threads_y, 1))


def _vector_instances(index: str) -> list[str]:
    return list(dict.fromkeys(
        vector_instance(size, index, vector_launched_config(size, config, skew), skew)
        for size, configs in VECTOR_CONFIGS.items() for config in configs
        for skew in (False, True)))


# --- rungs 5 and 6: words, words_async (kernels/transpose/words.cu) ----------------------------------

#: The word kernels' tile: 256 bytes of output rows (input rows) by 128 bytes of input columns.
WORD_TILE_ROW_BYTES = 256
WORD_TILE_COL_BYTES = 128
WORD_ITEMSIZES = (1, 2)
WORDS_THREADS = 256
#: transpose_words' (LOAD_GROUPS, MIN_BLOCKS) per item size: groups of 4 / itemsize rows a warp
#: loads before using any, and the blocks per SM its registers are bounded for.
WORDS_CONFIGS = {1: (3, 4), 2: (3, 8)}
#: The most row tiles the word rungs run side by side (_word_grid): with few rows, the sector
#: where an output row ends is written by two row tiles (benchmarks/NOTES.md, item 104).
WORDS_SIDE_BY_SIDE_MAX = 16
WORDS_ASYNC_ITEMSIZES = (1,)
WORDS_ASYNC_THREADS = 512
WORDS_ASYNC_CAPABILITY = 80  # cp.async
#: words_async's raw rows: 9 chunks of 16 bytes each (a 128-byte stretch starts anywhere in its
#: first chunk), and the `low` half of the tile, 40 words of each column padded to 41.
WORDS_ASYNC_CHUNKS = 9
WORDS_ASYNC_HALF_PITCH = 41


def word_tile(itemsize: int) -> tuple[int, int]:
    """(TR, TC): input rows and columns of a word tile."""
    return WORD_TILE_ROW_BYTES // itemsize, WORD_TILE_COL_BYTES // itemsize


def words_async_shared_bytes(itemsize: int) -> int:
    """Dynamic shared memory of transpose_words_async: the staged rows (TR + one sector's worth)
    of raw chunks, then `low` (the kernel's static_assert checks the same sum)."""
    staged_rows = (WORD_TILE_ROW_BYTES + SECTOR_BYTES) // itemsize
    tile_cols = word_tile(itemsize)[1]
    return staged_rows * WORDS_ASYNC_CHUNKS * 16 + tile_cols * WORDS_ASYNC_HALF_PITCH * 4


def _words_instance(itemsize: int, index: str) -> str:
    load_groups, min_blocks = WORDS_CONFIGS[itemsize]
    rows, cols = word_tile(itemsize)
    return (f"transpose_words<{CARRIERS[itemsize]}, {index}, {WORDS_THREADS}, {rows}, {cols}, "
            f"{load_groups}, {min_blocks}>")


def _words_async_instance(itemsize: int, index: str) -> str:
    rows, cols = word_tile(itemsize)
    return (f"transpose_words_async<{CARRIERS[itemsize]}, {index}, {WORDS_ASYNC_THREADS}, {rows}, "
            f"{cols}, {words_async_shared_bytes(itemsize)}>")


def _check_words(p: Problem, rung: str, itemsizes: tuple[int, ...]) -> None:
    if p.itemsize not in itemsizes:
        sizes = " and ".join(f"{size}-byte" for size in itemsizes)
        raise TypeError(f"the transpose rung {rung!r} moves {sizes} elements; this one has "
                        f"{p.itemsize} bytes: use 'vector' or 'auto'")
    if not p.unit_columns:
        raise ValueError(f"the transpose rung {rung!r} reads rows of contiguous elements; this "
                         "input's columns are strided: use 'vector' or 'auto'")


def _word_grid(p: Problem) -> tuple[int, int, int]:
    """The word rungs' grid: a block per tile, where tile t stages rows [TR t, TR t + TR +
    SECTOR) and the last one reaches the last row, so there are max(1, ceil((rows - SECTOR) /
    TR)) row tiles (SECTOR in elements). Column tiles along x and row tiles along y (a
    grid-stride loop past gridDim.y's limit); with 2 to :data:`WORDS_SIDE_BY_SIDE_MAX` row
    tiles, all along x, the row tiles of a column tile side by side, so that the two parts of
    the sector where an output row ends and the next begins (written by the last row tile and
    the first) meet in the L2 before it writes them back."""
    rows, cols = word_tile(p.itemsize)
    row_tiles = max(1, ceil_div(p.rows - SECTOR_BYTES // p.itemsize, rows))
    col_tiles = ceil_div(p.cols, cols)
    if 1 < row_tiles <= WORDS_SIDE_BY_SIDE_MAX and col_tiles * row_tiles <= MAX_GRID_X:
        return col_tiles * row_tiles, 1, p.batch
    return col_tiles, min(row_tiles, MAX_GRID_YZ), p.batch


def plan_words(p: Problem) -> Launch:
    """A block per tile (:func:`_word_grid`)."""
    _check_words(p, "words", WORD_ITEMSIZES)
    return Launch(WORDS_SOURCE, _words_instance(p.itemsize, p.index),
                  _word_grid(p), (WORDS_THREADS, 1, 1))


def plan_words_async(p: Problem) -> Launch:
    """A block per tile (:func:`_word_grid`), as for words."""
    _check_words(p, "words_async", WORDS_ASYNC_ITEMSIZES)
    if p.capability < WORDS_ASYNC_CAPABILITY:
        raise ValueError(f"the transpose rung 'words_async' needs compute capability "
                         f"{WORDS_ASYNC_CAPABILITY / 10:.1f} (cp.async); this GPU has "
                         f"{p.capability / 10:.1f}: use 'words' or 'auto'")
    shared = words_async_shared_bytes(p.itemsize)
    return Launch(WORDS_SOURCE, _words_async_instance(p.itemsize, p.index),
                  _word_grid(p), (WORDS_ASYNC_THREADS, 1, 1), shared)


# --- rung 7: narrow (kernels/transpose/transpose.cu) ------------------------------------------------

#: The narrow rung takes stacks of matrices with at most NARROW_MAX rows or columns,
#: NARROW_MAX_8_BYTE for 8-byte items and NARROW_MAX_WIDE for 16-byte ones: 16-byte tiles past
#: 65 would pass the 64 KiB of shared memory sm_75 allows a block, and float64 from 80 rows runs
#: faster in vector (benchmarks/NOTES.md, items 81 and 91).
NARROW_MAX = 128
NARROW_MAX_8_BYTE = 79
NARROW_MAX_WIDE = 64
NARROW_THREADS = 256
#: ``auto`` takes words, not narrow, for 2-byte matrices of more rows than this (and no more
#: than NARROW_MAX, nor than columns) whose input rows are contiguous and that runs does not
#: take (row counts that are multiples of 4): on an H100 (128 MiB, per call, of a copy; NOTES
#: 162-165) float16 with 73 to 127 rows ran at 0.52-0.75 through words, 0.49-0.55 through
#: narrow; with 65 rows 0.46-0.47 against 0.51.
NARROW_WORDS_ROWS = 72
#: Elements a tile of the narrow rung holds (about): 16 KiB of 4-byte elements.
NARROW_TILES = {1: 4096, 2: 4096, 4: 4096, 8: 2048, 16: 1024}


def narrow_length(itemsize: int, narrow: int) -> int:
    """Elements of the long side in a narrow tile: the kernel's gk_narrow_length."""
    return max(32, NARROW_TILES[itemsize] // narrow & ~31)


#: Item sizes the narrow rung moves in 4-byte words where the layout allows (narrow_words).
NARROW_WORD_ITEMSIZES = (1, 2)


def _narrow_instance(itemsize: int, index: str, words: bool = False, interleave: int = 0) -> str:
    return (f"transpose_narrow<{CARRIERS[itemsize]}, {index}, {NARROW_THREADS}, "
            f"{NARROW_TILES[itemsize]}, {interleave}, {'true' if words else 'false'}>")


#: The narrow rung moves 1 to INTERLEAVE_MAX rows or columns of 1-, 2- and 4-byte items in
#: registers, a 16-byte word of each row of the narrow side at a time, where such words line up
#: with the layout (:func:`narrow_interleaves`): channels-first <-> channels-last images of 3 to
#: 8 channels, interleaved audio of 2 to 8. INTERLEAVE_UNROLL groups of words a thread, one from
#: INTERLEAVE_STAGED_RUN rows or columns (the kernel's GK_NARROW_UNROLL and GK_NARROW_STAGED_RUN,
#: from which the run also goes out through shared memory; :func:`interleave_unroll`),
#: NARROW_THREADS threads a block. The grid is sized for them, and the kernel's grid-stride loop
#: covers the long side whatever the grid.
INTERLEAVE_MAX = 8
INTERLEAVE_ITEMSIZES = (1, 2, 4)
INTERLEAVE_UNROLL = 2
INTERLEAVE_STAGED_RUN = 5


def interleave_unroll(narrow: int) -> int:
    """Groups of 16-byte words a thread of the INTERLEAVE instance for ``narrow`` rows or columns
    takes at a time."""
    return 1 if narrow >= INTERLEAVE_STAGED_RUN else INTERLEAVE_UNROLL


def _narrow_instances(index: str) -> list[str]:
    return [_narrow_instance(size, index) for size in CARRIERS] + [
        _narrow_instance(size, index, True) for size in NARROW_WORD_ITEMSIZES]


def _interleave_instances(index: str) -> list[str]:
    """The register path's instances: a group of their own, so that a cold import compiles them
    beside the staged ones (together they took 3.7 s of NVRTC on one core)."""
    return [_narrow_instance(size, index, interleave=narrow) for size in INTERLEAVE_ITEMSIZES
            for narrow in range(1, INTERLEAVE_MAX + 1)]


def narrow_interleaves(p: Problem) -> bool:
    """Whether the narrow rung permutes this problem in registers (its INTERLEAVE instances): at
    most INTERLEAVE_MAX rows or columns of 1-, 2- or 4-byte items, the input's rows contiguous,
    the narrow side's rows one run (narrow rows: the output's rows adjacent; narrow columns: the
    input's), and every row of the long side (where there are two or more), every matrix and both
    arrays 16-byte aligned."""
    if p.itemsize not in INTERLEAVE_ITEMSIZES or min(p.rows, p.cols) > INTERLEAVE_MAX \
            or not p.unit_columns:
        return False
    batch_stride, row_stride, _ = p.strides
    out_batch, out_row = p.out_strides
    if p.rows <= p.cols:  # the input's rows are the planes, the output one run
        run, plane = out_row == p.rows, row_stride
    else:  # the input one run, the output's rows the planes
        run, plane = row_stride == p.cols, out_row
    # (one plane has no stride to align: a single row of any length)
    strides = ([plane] if min(p.rows, p.cols) > 1 else []) \
        + ([batch_stride, out_batch] if p.batch > 1 else [])
    return run and all(stride * p.itemsize % 16 == 0 for stride in strides) \
        and p.in_address % 16 == 0 and p.out_address % 16 == 0


def narrow_words(p: Problem) -> bool:
    """Whether the narrow rung moves this problem's contiguous runs in 4-byte words: 1- and
    2-byte items, the input's rows contiguous, and every run the kernel reads or writes whole
    (narrow rows: the output's rows adjacent; narrow columns: the input's rows adjacent) and
    4-byte aligned, in every matrix of the stack."""
    if p.itemsize not in NARROW_WORD_ITEMSIZES or (p.strides[2] != 1 and p.cols > 1):
        return False
    batch_stride, row_stride, _ = p.strides
    out_batch, out_row = p.out_strides
    if p.rows <= p.cols:  # narrow rows: input rows of the long side, the output one run
        runs = out_row == p.rows
        strides = [row_stride]
    else:  # narrow columns: the input one run, output rows of the long side
        runs = row_stride == p.cols
        strides = [out_row]
    if p.batch > 1:
        strides += [batch_stride, out_batch]
    return runs and all(stride * p.itemsize % 4 == 0 for stride in strides) \
        and p.in_address % 4 == 0 and p.out_address % 4 == 0


def narrow_max(itemsize: int) -> int:
    """The most rows or columns the narrow rung takes for items of ``itemsize`` bytes."""
    return NARROW_MAX if itemsize <= 4 else NARROW_MAX_8_BYTE if itemsize == 8 else NARROW_MAX_WIDE


def plan_narrow(p: Problem) -> Launch:
    """A block per tile of the whole narrow side by narrow_length elements of the long side (a
    grid-stride loop past 2^31 - 1 tiles), the staged rows padded by up to 31 elements; or,
    where :func:`narrow_interleaves`, a thread per :func:`interleave_unroll` groups of 16-byte
    words."""
    narrow, long = sorted((p.rows, p.cols))  # the kernel's rule: rows narrow when rows <= cols
    if narrow > narrow_max(p.itemsize):
        raise ValueError(f"the transpose rung 'narrow' takes matrices with at most "
                         f"{narrow_max(p.itemsize)} rows or columns of {p.itemsize}-byte items; "
                         f"these are {p.rows} x {p.cols}: use 'auto'")
    if narrow_interleaves(p):  # in registers: UNROLL groups of 16-byte words a thread
        groups = long // (16 // p.itemsize)
        blocks = max(1, ceil_div(groups, NARROW_THREADS * interleave_unroll(narrow)))
        return Launch(SOURCE, _narrow_instance(p.itemsize, p.index, interleave=narrow),
                      (min(blocks, MAX_GRID_X), 1, p.batch), (NARROW_THREADS, 1, 1))
    length = narrow_length(p.itemsize, narrow)
    grid = (min(ceil_div(long, length), MAX_GRID_X), 1, p.batch)
    shared = narrow * (length + 31) * p.itemsize
    return Launch(SOURCE, _narrow_instance(p.itemsize, p.index, narrow_words(p)), grid,
                  (NARROW_THREADS, 1, 1), shared)


# --- rung 8: runs (kernels/transpose/transpose.cu) --------------------------------------------------

#: The runs rung takes up to RUNS_MAX rows of 1-, 2- or 4-byte items (32 KiB of shared memory a
#: tile: RUNS_MAX rows of RUNS_SEGMENT_BYTES).
RUNS_MAX = 256
RUNS_ITEMSIZES = (1, 2, 4)
RUNS_SEGMENT_BYTES = 128  # of each input row a tile takes: one 4-byte word a lane
RUNS_THREADS = 512
RUNS_MIN_BLOCKS = 2  # blocks an SM the registers are bounded for
#: Blocks of a runs launch at most: each takes tile after tile, the next one's loads (with the
#: ring, the next two tiles') in flight while it writes one (about four waves of two blocks on an
#: H100's 132 SMs).
RUNS_BLOCKS = 1024


#: From this compute capability (cp.async) a runs block of at most RUNS_RING_MAX_ROWS rows
#: copies its tiles' rows into a ring of two slots in shared memory, two tiles ahead, instead of
#: loading their words into registers one tile ahead. On an H100 (128 MiB, per call, of a copy;
#: benchmarks/NOTES.md, item 165) the ring ran 25-161 rows 5-100% faster (float16 with 65 rows
#: 0.48 -> 0.75, 127 rows 0.72 -> 0.84), and 191-255 rows 0-4% slower.
RUNS_ASYNC_CAPABILITY = 80
RUNS_RING_MAX_ROWS = 176
RUNS_WINDOW_BYTES = 144  # of a row in a ring slot: 9 aligned 16-byte chunks cover its segment


def runs_shared_bytes(rows: int, ring: bool) -> int:
    """Dynamic shared memory of transpose_runs: the tile's run, and up to 15 bytes before it
    that line its 16-byte words up with the output's; then, with ``ring``, two slots of
    RUNS_WINDOW_BYTES a row (73232 bytes in all at RUNS_RING_MAX_ROWS rows, within the 99 KiB a
    block may opt in to on every GPU from sm_80)."""
    return rows * RUNS_SEGMENT_BYTES + 16 + (2 * rows * RUNS_WINDOW_BYTES if ring else 0)


def runs_ring(capability: int, rows: int) -> bool:
    """Whether runs copies a matrix of ``rows`` rows through its ring of shared memory slots
    (cp.async) on a GPU of this compute capability."""
    return capability >= RUNS_ASYNC_CAPABILITY and rows <= RUNS_RING_MAX_ROWS


def _runs_instance(itemsize: int, index: str, ring: bool) -> str:
    return (f"transpose_runs<{CARRIERS[itemsize]}, {index}, {RUNS_THREADS}, "
            f"{RUNS_SEGMENT_BYTES // itemsize}, {RUNS_MAX}, {RUNS_MIN_BLOCKS}, "
            f"{'true' if ring else 'false'}>")


#: ``auto`` takes runs past these many rows, per item size (:func:`auto_takes_runs`).
RUNS_AUTO_MIN = {1: 24, 2: 40, 4: 64}


def auto_takes_runs(p: Problem) -> bool:
    """Whether ``auto`` takes the runs rung: more than :data:`RUNS_AUTO_MIN` rows and at most
    RUNS_MAX, no more rows than columns, a row count that is not a multiple of 4 (its stores to
    shared memory then meet at most two-way bank conflicts, and vector's words need the rows
    such multiples give), contiguous input rows, adjacent output rows.

    Measured on an H100 (128 MiB matrices, per call, of a copy; NOTES 165), runs against what
    ``auto`` took before: uint8 with 25, 33, 41, 57 rows 0.41, 0.50, 0.61, 0.68 against
    0.32-0.38 (narrow), 97-255 rows 0.85-0.89; float16 with 41, 57, 97, 127 rows 0.59, 0.70,
    0.84, 0.84 against 0.52-0.71 (narrow, words), 161-255 rows 0.85-0.87; float32 with 65 rows
    0.80 against 0.73 (narrow), 97-255 rows 0.85-0.88. Under those bounds narrow was ahead:
    uint8 with 17 rows 0.29 against 0.34, float16 with 33 rows 0.50 against 0.56, float32 with
    57 rows 0.74 against 0.77."""
    n = p.rows
    return (p.itemsize in RUNS_ITEMSIZES and n % 4 != 0
            and RUNS_AUTO_MIN[p.itemsize] < n <= min(p.cols, RUNS_MAX)
            and p.unit_columns and p.out_strides[1] == n)


def plan_runs(p: Problem) -> Launch:
    """A block per tile of all rows by RUNS_SEGMENT_BYTES of columns, at most RUNS_BLOCKS
    blocks (a grid-stride loop)."""
    if p.itemsize not in RUNS_ITEMSIZES:
        raise TypeError(f"the transpose rung 'runs' moves 1-, 2- and 4-byte elements; this one "
                        f"has {p.itemsize} bytes: use 'auto'")
    if not p.unit_columns:
        raise ValueError("the transpose rung 'runs' reads rows of contiguous elements; this "
                         "input's columns are strided: use 'auto'")
    if p.rows > min(p.cols, RUNS_MAX) or p.out_strides[1] != p.rows:
        raise ValueError(f"the transpose rung 'runs' takes matrices of at most {RUNS_MAX} rows "
                         f"and no more rows than columns, into adjacent output rows; these are "
                         f"{p.rows} x {p.cols}: use 'auto'")
    segment = RUNS_SEGMENT_BYTES // p.itemsize
    grid = (min(ceil_div(p.cols, segment), RUNS_BLOCKS), 1, p.batch)
    ring = runs_ring(p.capability, p.rows)
    return Launch(SOURCE, _runs_instance(p.itemsize, p.index, ring), grid, (RUNS_THREADS, 1, 1),
                  runs_shared_bytes(p.rows, ring))


# --- the ladder ---------------------------------------------------------------------------------------

def _groups(source: KernelSource, label: str,
            instances: Callable[[str], list[str]]) -> tuple:
    """An eager group of the 32-bit index instances and a lazy one of the 64-bit ones."""
    return tuple(source.add(f"{label} {index}", instances(index), eager=index == "int")
                 for index in INDEXES)


LADDER = Ladder("transpose", (
    Rung("naive", "one thread per element: coalesced row reads, strided column writes",
         SOURCE, "transpose_naive",
         _groups(SOURCE, "naive", lambda index: [
             _naive_instance("transpose_naive", size, index) for size in CARRIERS]),
         plan_naive),
    Rung("naive_col", "indices swapped: strided column reads, coalesced row writes",
         SOURCE, "transpose_naive_col",
         _groups(SOURCE, "naive_col", lambda index: [
             _naive_instance("transpose_naive_col", size, index) for size in CARRIERS]),
         plan_naive_col),
    Rung("shared", "32x32 tile through padded shared memory: reads and writes both coalesced; "
                   "32x8 threads, 4 elements each",
         SOURCE, "transpose_shared",
         _groups(SOURCE, "shared", lambda index: [_shared_instance(size, index)
                                                  for size in CARRIERS]),
         plan_shared),
    Rung("vector", "VxV element blocks transposed in registers: 16-byte (or 4-byte) words on "
                   "every global access; unaligned output rows written in whole 32-byte sectors",
         SOURCE, "transpose_vector", _groups(SOURCE, "vector", _vector_instances), plan_vector),
    Rung("words", "1- and 2-byte rows that are not whole words: aligned 4-byte words shifted "
                  "per row, through a column-major tile",
         WORDS_SOURCE, "transpose_words",
         _groups(WORDS_SOURCE, "words", lambda index: [_words_instance(size, index)
                                                       for size in WORD_ITEMSIZES]),
         plan_words,
         Needs(dtypes="1- and 2-byte elements", layout="rows of contiguous elements")),
    Rung("words_async", "words for 1-byte rows, copied to shared memory by cp.async in 16-byte "
                        "chunks; 16 warps a block",
         WORDS_SOURCE, "transpose_words_async",
         _groups(WORDS_SOURCE, "words_async", lambda index: [
             _words_async_instance(size, index) for size in WORDS_ASYNC_ITEMSIZES]),
         plan_words_async,
         Needs(capability=WORDS_ASYNC_CAPABILITY, dtypes="1-byte elements",
               layout="rows of contiguous elements")),
    Rung("narrow", f"matrices of at most {NARROW_MAX} rows or columns ({NARROW_MAX_8_BYTE} "
                   f"of 8 bytes, {NARROW_MAX_WIDE} of 16; channels-first <-> "
                   "channels-last images): a tile of the whole narrow side through shared memory, "
                   f"both walks coalesced; up to {INTERLEAVE_MAX} 16-byte aligned rows interleaved "
                   "in registers",
         SOURCE, "transpose_narrow",
         _groups(SOURCE, "narrow", _narrow_instances)
         + _groups(SOURCE, "narrow registers", _interleave_instances),
         plan_narrow, Needs(layout=f"at most {NARROW_MAX} rows or columns "
                                  f"({NARROW_MAX_8_BYTE} of 8 bytes, {NARROW_MAX_WIDE} of 16)")),
    Rung("runs", f"up to {RUNS_MAX} rows whose ends are not whole words: a tile of all rows "
                 "staged in the output's order, written as one run of 16-byte words",
         SOURCE, "transpose_runs",
         _groups(SOURCE, "runs", lambda index: [_runs_instance(size, index, ring)
                                                for size in RUNS_ITEMSIZES
                                                for ring in (False, True)]),
         plan_runs, Needs(dtypes="1-, 2- and 4-byte elements",
                          layout=f"at most {RUNS_MAX} rows, no more than columns; rows of "
                                 "contiguous elements")),
))
VECTOR, WORDS, WORDS_ASYNC = LADDER["vector"], LADDER["words"], LADDER["words_async"]
NARROW, RUNS = LADDER["narrow"], LADDER["runs"]


def auto_takes_narrow(itemsize: int, rows: int, cols: int) -> bool:
    """Whether ``auto`` takes the narrow rung for a matrix whose narrow side has N elements.

    Below 16, always; at 16, for items of 8 bytes and more. Past 16, up to :func:`narrow_max`:
    items of 8 bytes and more unless N is a multiple of 32, past 64 with N rows only (8-byte
    items with 65-79 rows: narrow 0.85-0.96, vector 0.72-0.91; with as many columns vector
    0.93-0.96, narrow 0.91-1.00; NOTES 91, 93); smaller items unless N x itemsize
    is a multiple of 32 bytes (vector's tiles then hold whole sectors of the narrow side), and
    then with N rows always; with N columns, 1- and 2-byte items up to 64 columns (past them
    the word rungs that ``auto`` takes for odd rows are ahead), 4-byte items while a row is
    under 64 bytes (vector reads longer rows in whole sectors).

    Measured on an H100 (64 MiB matrices, per call, of a copy; NOTES, items 76, 81 and 83): at
    16 elements of 1, 2 or 4 bytes vector moves whole 16-byte words (0.63, 0.78, 0.96 against
    narrow's 0.38, 0.63, 0.85). Narrow runs at 0.4-0.5 (uint8), 0.55-0.7 (float16), 0.8-0.9
    (float32) and 0.95-1.05 (float64, up to 64) over N of 17 to 128. Vector with N rows falls
    to 0.1-0.55 unless its tiles hold whole sectors (float32 N = 17, 28, 31, 33, 63, 65, 127:
    0.11-0.53); with N columns it reaches 0.88-1.04 for float32 from 20 (narrow 0.78-0.90).
    float16 with 33 columns: narrow 0.59, words 0.50, vector 0.63."""
    narrow = min(rows, cols)
    if narrow <= 16:
        return narrow < 16 or itemsize >= 8
    if narrow > narrow_max(itemsize):
        return False
    if itemsize >= 8:
        return narrow % 32 != 0 and (narrow <= NARROW_MAX_WIDE or rows <= cols)
    if narrow * itemsize % 32 == 0:
        return False
    if rows <= cols:
        return True
    return narrow <= 64 if itemsize <= 2 else narrow * itemsize < 64


def columns_take_words(itemsize: int, rows: int, cols: int) -> bool:
    """Whether ``auto`` gives a tall matrix of 1- or 2-byte items whose rows are whole 32-byte
    sectors to the word rung rather than vector: rows of 96 to 480 bytes that are not a power
    of two, which vector's tiles cover only in part.

    Measured on an H100 (64 MiB matrices, per call, of a copy; NOTES, item 91), vector against
    words: uint8 with 96, 160, 192 columns 0.50, 0.50, 0.66 against 0.71, 0.81, 0.88; float16
    with 48, 96, 160, 192 columns 0.68, 0.71, 0.74, 0.88 against 0.76, 0.96, 0.96, 1.06. Rows of
    32, 64, 128, 256 or 512 bytes: vector 0.87-1.03, words 0.34-0.95."""
    row_bytes = cols * itemsize
    return (itemsize in WORD_ITEMSIZES and rows > cols and row_bytes % SECTOR_BYTES == 0
            and 64 < row_bytes < 512 and row_bytes & (row_bytes - 1) != 0)


def choose(p: Problem) -> Rung:
    """``method="auto"``: the runs rung for up to 256 rows that vector cannot move in words
    (:func:`auto_takes_runs`); the narrow rung for matrices of a few rows or columns
    (:func:`auto_takes_narrow`; words for 2-byte ones of more than NARROW_WORDS_ROWS rows);
    else the vector rung, except for 1- and 2-byte rows that are not whole words (where its V
    falls to 1): those go to words_async (1-byte, sm_80 and newer) or words. Measured on an
    H100 at 8191 x 8193: int8 0.92 (words_async) and float16 0.92 (words) of a copy, against
    0.45 and 0.72 with vector's V = 1 (benchmarks/NOTES.md, items 30-35). Tall 1- and 2-byte
    matrices of 96 to 480-byte rows go to words (:func:`columns_take_words`)."""
    if auto_takes_runs(p):
        return RUNS
    if auto_takes_narrow(p.itemsize, p.rows, p.cols):
        if p.itemsize == 2 and p.unit_columns and NARROW_WORDS_ROWS < p.rows <= p.cols:
            return WORDS
        return NARROW
    if p.unit_columns and columns_take_words(p.itemsize, p.rows, p.cols):
        return WORDS
    config, _ = vector_config(p)
    if config[0] > 1 or p.itemsize not in WORD_ITEMSIZES or not p.unit_columns:
        return VECTOR
    if p.itemsize in WORDS_ASYNC_ITEMSIZES and p.capability >= WORDS_ASYNC_CAPABILITY:
        return WORDS_ASYNC
    return WORDS


# --- the benchmark's copy kernels (not rungs) ----------------------------------------------------------

COPY_BLOCK = (16, 16)  # the bandwidth study's block, kept for its copy kernels
COPY_KINDS = ("row", "col")
SOURCE.add("copies", [f"copy_{kind}<{CARRIERS[size]}, {index}>" for kind in COPY_KINDS
                      for size in CARRIERS for index in INDEXES], eager=False)


def copy_launch(kind: str, itemsize: int, rows: int, cols: int, index: str) -> Launch:
    """The bandwidth study's row- or column-order copy of a rows x cols matrix."""
    x_extent, y_extent = (cols, rows) if kind == "row" else (rows, cols)
    grid = (ceil_div(x_extent, COPY_BLOCK[0]), min(ceil_div(y_extent, COPY_BLOCK[1]), MAX_GRID_YZ),
            1)
    return Launch(SOURCE, f"copy_{kind}<{CARRIERS[itemsize]}, {index}>", grid, (*COPY_BLOCK, 1))
