"""The scan ladder: its rungs, their instances, and their plans (launch geometry).

cumsum and cumprod share the ladder: every kernel is templated on the operator
(``kernels/scan/scan.cu``). A plan maps a :class:`Problem` to the launches of one scan, with
the buffers they need; every number that shapes a launch is set here and reaches the kernels
as a template argument.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy

from ..._core import device as _device
from ..._core.compile import KernelSource
from ..._core.ladder import Ladder, Needs, Rung
from ..._core.launch import (
    MAX_GRID_X,
    MAX_GRID_YZ,
    Array,
    Launch,
    StreamArray,
    allow_shared_memory,
    ceil_div,
    power_of_two,
    resident_blocks,
    stream_buffers,
)
from ..reduce.dtypes import C_TYPES

__all__ = ["Problem", "Step", "LADDER", "choose", "accumulator", "SOURCE", "IN_DTYPES",
           "scratch"]

SOURCE = KernelSource("scan/scan.cu", weight=6.0)  # instances 4-9x slower to compile (NOTES 86)
OPERATORS = {"cumsum": "SumOp", "cumprod": "ProdOp"}
#: The dtypes the kernels read: every dtype NumPy scans except those it cannot (the wrapper
#: casts a ``dtype=`` request first).
IN_DTYPES = tuple(C_TYPES)
I64, U64, F32, F64 = (numpy.dtype(t) for t in ("int64", "uint64", "float32", "float64"))


def accumulator(dtype: numpy.dtype) -> tuple[numpy.dtype, numpy.dtype]:
    """(accumulator, result) dtypes of a scan of ``dtype`` without a ``dtype=`` request.

    The result is NumPy's (bool and signed integers give int64, unsigned uint64, floats and
    complex keep their dtype). Integers accumulate in uint64, where + and * wrap as NumPy's
    int64 and uint64 do; float16 accumulates in float32 and float32 in float64 (more accurate
    than NumPy's running float32 sum, at no cost to a memory-bound kernel).

    Examples
    --------
    >>> import numpy
    >>> from gpukernels.ops.scan.rungs import accumulator
    >>> accumulator(numpy.dtype("int32")), accumulator(numpy.dtype("float32"))
    ((dtype('uint64'), dtype('int64')), (dtype('float64'), dtype('float32')))
    """
    if dtype.kind in "bi":
        return U64, I64
    if dtype.kind == "u":
        return U64, U64
    if dtype.kind == "f":
        return (F64 if dtype.itemsize >= 4 else F32), dtype
    return dtype, dtype  # complex


@dataclass(frozen=True)
class Problem:
    """``rows`` scans of ``n`` elements of ``dtype`` (a C-contiguous input; see scan.cu for the
    layout that ``inner`` gives), with operator ``op`` (``"SumOp"`` or ``"ProdOp"``)."""

    op: str
    dtype: numpy.dtype
    n: int
    rows: int
    inner: int
    #: The device's compute capability (90 for sm_90); 0 where no device is asked (planning
    #: on the CPU), where plans take every rung.
    capability: int = 0
    #: Blocks of a launch that the device runs at once, given (instance, threads, dynamic
    #: shared bytes); None where no device is asked, where resident blocks take a block per tile.
    resident: Callable[[str, int, int], int] | None = field(default=None, compare=False)

    @property
    def acc(self) -> numpy.dtype:
        return accumulator(self.dtype)[0]

    @property
    def out(self) -> numpy.dtype:
        return accumulator(self.dtype)[1]


@dataclass(frozen=True)
class Step:
    """One launch of a plan. ``arrays`` names what fills the kernel's array slots: ``"in"``,
    ``"out"``, or the index of a temporary buffer of :attr:`Plan.buffers`; ``scratch`` is the
    tile capacity of the single-pass rungs' per-stream scratch (0: none)."""

    launch: Launch
    args: tuple
    scratch: int = 0


@dataclass
class Plan:
    """A rung's launches for one problem, and the temporary buffers (shape, dtype) they use."""

    steps: list[Step] = field(default_factory=list)
    buffers: list[tuple[tuple, numpy.dtype]] = field(default_factory=list)

    def buffer(self, shape: tuple, dtype: numpy.dtype) -> int:
        self.buffers.append((shape, dtype))
        return len(self.buffers) - 1


def _c(dtype: numpy.dtype) -> str:
    return C_TYPES[dtype]


def _null() -> numpy.uint64:
    return numpy.uint64(0)


# --- the single-pass rungs' scratch -------------------------------------------------------------

#: Smallest tile capacity of a scratch set (they come in powers of two from here).
MIN_CAPACITY = 4096
_VALUE_BYTES = 16  # room per tile for the widest accumulator (complex128)


def scratch(capacity: int) -> tuple:
    """(control, flags, values) of the current device and stream for launches of up to
    ``capacity`` tiles: look_back's tile counter, finished-block counter and epoch; a flag per
    tile, then striped's 16-byte record of each tile's aggregate and flag, and pipelined's in
    rows of up to 2**18 elements or inputs of up to 2**24 (scan.cu, gk_uses_records,
    gk_pipelined_records), all zeroed; room for an aggregate, an inclusive prefix and a group
    total per tile. One set per capacity (a power of two; :func:`stream_buffers`); each launch
    leaves the counters ready for the next. Every single-pass kernel of the set's launches
    reads the first ``capacity`` words of ``flags`` as flags whose epoch says whether they are
    this launch's: nothing else may be written there (a value's bits there read as a flag of a
    later epoch, and a later scan takes garbage for a published total; benchmarks/NOTES.md,
    item 191)."""
    cupy = _device.cupy
    return stream_buffers(("scan", capacity), lambda: (
        cupy.zeros(4, dtype=numpy.uint64), cupy.zeros(3 * capacity, dtype=numpy.uint64),
        cupy.empty(3 * capacity * _VALUE_BYTES, numpy.uint8)))


def capacity_for(tiles: int) -> int:
    """The power of two of at least ``tiles`` (and MIN_CAPACITY) that holds a launch's tiles."""
    return max(MIN_CAPACITY, power_of_two(tiles))


def _single_pass_args(p: Problem, capacity: int) -> tuple:
    return (Array(0), Array(1), numpy.int64(p.n), numpy.int64(p.rows), numpy.int64(p.inner),
            StreamArray(0), StreamArray(1), StreamArray(2), numpy.int64(capacity))


# --- rung 1: hillis_steele ----------------------------------------------------------------------

HILLIS_STEELE_BLOCK = 512


def _hillis_steele_instance(op: str, read: numpy.dtype, acc: numpy.dtype, out: numpy.dtype) -> str:
    return f"scan_hillis_steele<{op}, {_c(read)}, {_c(acc)}, {_c(out)}, {HILLIS_STEELE_BLOCK}>"


def _add_carries_instance(op: str, acc: numpy.dtype, out: numpy.dtype) -> str:
    return f"scan_add_carries<{op}, {_c(acc)}, {_c(out)}, {HILLIS_STEELE_BLOCK}>"


def plan_hillis_steele(p: Problem) -> Plan:
    """A launch per level of tile totals, then a carry pass per level, top level first."""
    plan = Plan()
    block = HILLIS_STEELE_BLOCK

    def level(source: Any, target: Any, read: numpy.dtype, out: numpy.dtype, n: int, rows: int,
              inner: int) -> None:
        tiles = ceil_div(n, block)
        totals = plan.buffer((rows * tiles,), p.acc) if tiles > 1 else None
        grid = (min(tiles, MAX_GRID_X), min(rows, MAX_GRID_YZ), 1)
        plan.steps.append(Step(
            Launch(SOURCE, _hillis_steele_instance(p.op, read, p.acc, out), grid, (block, 1, 1)),
            (source, target, numpy.int64(n), numpy.int64(rows), numpy.int64(inner), _null(),
             _null(), _null() if totals is None else totals, numpy.int64(0))))
        if totals is None:
            return
        carries = plan.buffer((rows * tiles,), p.acc)
        level(totals, carries, p.acc, p.acc, tiles, rows, 1)
        plan.steps.append(Step(
            Launch(SOURCE, _add_carries_instance(p.op, p.acc, out), (tiles - 1, grid[1], 1),
                   (block, 1, 1)),
            (target, carries, numpy.int64(n), numpy.int64(rows), numpy.int64(inner))))

    level("in", "out", p.dtype, p.out, p.n, p.rows, p.inner)
    return plan


# --- rung 2: look_back --------------------------------------------------------------------------

LOOK_BACK_BLOCK = 256


def look_back_items(dtype: numpy.dtype) -> int:
    """Elements per thread: four 16-byte words of float32, sixteen 1-byte items, eight complex128."""
    return 8 if dtype.itemsize == 16 else 16


def _look_back_instance(op: str, read: numpy.dtype) -> str:
    acc, out = accumulator(read)
    return (f"scan_look_back<{op}, {_c(read)}, {_c(acc)}, {_c(out)}, {LOOK_BACK_BLOCK}, "
            f"{look_back_items(read)}>")


def plan_look_back(p: Problem) -> Plan:
    """One launch: a tile of LOOK_BACK_BLOCK threads x items per block, over every row at once."""
    tiles = ceil_div(p.n * p.rows, LOOK_BACK_BLOCK * look_back_items(p.dtype))
    capacity = capacity_for(tiles)
    return Plan([Step(Launch(SOURCE, _look_back_instance(p.op, p.dtype), (tiles, 1, 1),
                             (LOOK_BACK_BLOCK, 1, 1)),
                      _single_pass_args(p, capacity), capacity)])


# --- rung 3: blocked ----------------------------------------------------------------------------

def _blocked_instance(op: str, read: numpy.dtype) -> str:
    acc, out = accumulator(read)
    return (f"scan_blocked<{op}, {_c(read)}, {_c(acc)}, {_c(out)}, {LOOK_BACK_BLOCK}, "
            f"{look_back_items(read)}>")


def plan_blocked(p: Problem) -> Plan:
    """One launch: look_back's tiles (LOOK_BACK_BLOCK threads x items), a run of consecutive
    elements per thread."""
    tiles = ceil_div(p.n * p.rows, LOOK_BACK_BLOCK * look_back_items(p.dtype))
    capacity = capacity_for(tiles)
    return Plan([Step(Launch(SOURCE, _blocked_instance(p.op, p.dtype), (tiles, 1, 1),
                             (LOOK_BACK_BLOCK, 1, 1)),
                      _single_pass_args(p, capacity), capacity)])


# --- rung 4: pipelined --------------------------------------------------------------------------

PIPELINED_THREADS = LOOK_BACK_BLOCK + 32  # blocked's data threads and a look-back warp
PIPELINED_CAPABILITY = 80  # two tiles of 8-byte outputs pass sm_75's 64 KiB a block
PIPELINED_BUFFERS = 2  # tile buffers a block (scan.cu: round r's tile in buffer r % 2)


def pipelined_items(dtype: numpy.dtype) -> int:
    """Elements per data thread: blocked's, but 32 for float16 (whose outputs are float16 too),
    so that a tile holds as many bytes as float32's and its look-back and barriers cost half as
    much per byte."""
    return 32 if dtype == numpy.float16 else look_back_items(dtype)


def pipelined_shared_bytes(dtype: numpy.dtype) -> int:
    """pipelined's PIPELINED_BUFFERS tile buffers (dynamic shared memory), each laid out as
    blocked's: the tile's outputs in 16-byte words with a word of padding after every eight."""
    words = LOOK_BACK_BLOCK * pipelined_items(dtype) * accumulator(dtype)[1].itemsize // 16
    return PIPELINED_BUFFERS * 16 * (words + words // 8)


def _pipelined_instance(op: str, read: numpy.dtype) -> str:
    acc, out = accumulator(read)
    return (f"scan_pipelined<{op}, {_c(read)}, {_c(acc)}, {_c(out)}, {LOOK_BACK_BLOCK}, "
            f"{pipelined_items(read)}>")


def device_resident(instance: str, threads: int, shared: int) -> int:
    """Blocks of ``instance`` (``threads`` threads, ``shared`` bytes of dynamic shared memory)
    that the current device runs at once: the occupancy calculator's blocks per SM, times the
    SMs (:attr:`Problem.resident` of a scan on the device)."""
    allow_shared_memory(SOURCE.function(instance), shared)
    return resident_blocks(SOURCE, instance, threads, shared) * _device.multiprocessor_count()


def plan_pipelined(p: Problem) -> Plan:
    """One launch of resident blocks (as many as fit the device at once, at most a block per
    tile) that take blocked's tiles in turn, two in flight each."""
    if 0 < p.capability < PIPELINED_CAPABILITY:
        raise ValueError(f"the scan rung 'pipelined' needs compute capability "
                         f"{PIPELINED_CAPABILITY / 10:.1f} (two tiles of shared memory a block); "
                         f"this GPU has {p.capability / 10:.1f}: use 'blocked' or 'auto'")
    tiles = ceil_div(p.n * p.rows, LOOK_BACK_BLOCK * pipelined_items(p.dtype))
    capacity = capacity_for(tiles)
    instance = _pipelined_instance(p.op, p.dtype)
    shared = pipelined_shared_bytes(p.dtype)
    grid = tiles if p.resident is None else min(tiles, p.resident(instance, PIPELINED_THREADS,
                                                                  shared))
    return Plan([Step(Launch(SOURCE, instance, (grid, 1, 1), (PIPELINED_THREADS, 1, 1), shared),
                      _single_pass_args(p, capacity), capacity)])


# --- rung 5: striped ----------------------------------------------------------------------------

STRIPED_WORDS = 4  # 16-byte words of the input a data thread holds of each tile
STRIPED_DEPTH = 3  # a tile is finished this many rounds after its scan, less one
STRIPED_LOOKERS = 2  # look-back warps a block, taking the rounds in turn
STRIPED_THREADS = LOOK_BACK_BLOCK + 32 * STRIPED_LOOKERS
#: auto takes striped for rows of at least this many elements of float16, float32 and integers
#: of 2 and 4 bytes, and of STRIPED_ONE_BYTE_FACTOR times as many of 1-byte items, in an input of
#: any size: from there on one row ran ahead of pipelined per call on an H100 (float32 0.50 of a
#: copy at 2^22 against 0.47, 0.88 at 2^28 against 0.68; int32 into int64 0.67 against 0.58 at
#: 2^22, 0.95 against 0.74 at 2^28; benchmarks/NOTES.md, items 187-188; its handoffs made
#: checkable by racecheck cost it 0.01-0.03 of these, item 189). Shorter single rows ran level or
#: behind.
STRIPED_MIN_ROW = 1 << 22
#: 1-byte items: at 2^24 striped ran level on an H100 (int8 0.64 against 0.63, item 188, before
#: item 189's handoffs) and behind on an H200 (int8 0.42 against 0.49, bool 0.47 against 0.51,
#: uint8 level), at 2^25 level or ahead there (0.51-0.59 against 0.51-0.52; item 193).
STRIPED_ONE_BYTE_FACTOR = 8
#: Shorter rows in larger inputs: a row longer than one look-back group of pipelined's tiles
#: (LOOK_BACK_GROUP tiles: 2^17 elements, 2^18 of float16) makes pipelined look back past its
#: group, and there striped ran level to 33% faster held on an H200 in inputs of 2^24 elements
#: and more (float32 level in rows of 2^18 at 2^24 elements, 0.79-0.93 of pipelined's time in
#: rows of 2^19 and more; int32 and int16 0.67-0.85; float16 0.76-0.96), but up to 10% slower
#: in inputs of 2^22 and 2^23 (NOTES 207).
STRIPED_MIN_INPUT = 1 << 24
#: 1-byte items take that rule in inputs of 2^26 elements and more, for rows of at least four
#: groups: int8 rows of two groups ran 3-12% behind, of four and more 2-15% ahead; uint8 and
#: bool 10-30% ahead (NOTES 207).
STRIPED_ONE_BYTE_INPUT = 1 << 26
STRIPED_ONE_BYTE_GROUPS = 4
#: Tiles a look-back group of the single-pass rungs (scan.cu, gk_group_before).
LOOK_BACK_GROUP = 32


def striped_min_row(dtype: numpy.dtype, size: int) -> int | None:
    """The shortest row of ``dtype`` for which auto takes striped in an input of ``size``
    elements (None: never). Items of 8 bytes and more stay with pipelined: striped ran 7-56%
    behind it for float64, int64 and complex64 on an H200, at every row length (NOTES 207)."""
    if dtype.itemsize > 4 or dtype.kind not in "fbiu":
        return None
    group = LOOK_BACK_GROUP * LOOK_BACK_BLOCK * pipelined_items(dtype)
    if dtype.itemsize == 1:
        if size >= STRIPED_ONE_BYTE_INPUT:
            return STRIPED_ONE_BYTE_GROUPS * group
        return STRIPED_MIN_ROW * STRIPED_ONE_BYTE_FACTOR
    return group + 1 if size >= STRIPED_MIN_INPUT else STRIPED_MIN_ROW


def striped_tile(dtype: numpy.dtype) -> int:
    """Elements of a striped tile: LOOK_BACK_BLOCK threads x STRIPED_WORDS words of 16 bytes
    (4096 float32, 16384 int8, 1024 complex128)."""
    return LOOK_BACK_BLOCK * STRIPED_WORDS * (16 // dtype.itemsize)


def striped_shared_bytes(dtype: numpy.dtype) -> int:
    """striped's STRIPED_DEPTH slots (dynamic shared memory), each a tile's input words and
    each word's prefix within the tile (one accumulator a word, in whole 16-byte words)."""
    words = LOOK_BACK_BLOCK * STRIPED_WORDS
    prefixes = ceil_div(words * accumulator(dtype)[0].itemsize, 16)
    return STRIPED_DEPTH * 16 * (words + prefixes)


def _striped_instance(op: str, read: numpy.dtype) -> str:
    acc, out = accumulator(read)
    return (f"scan_striped<{op}, {_c(read)}, {_c(acc)}, {_c(out)}, {LOOK_BACK_BLOCK}, "
            f"{STRIPED_WORDS}, {STRIPED_DEPTH}, {STRIPED_LOOKERS}>")


def plan_striped(p: Problem) -> Plan:
    """One launch of resident blocks (as many as fit the device at once, at most a block per
    tile) that take striped tiles in turn, STRIPED_DEPTH in flight each."""
    if 0 < p.capability < PIPELINED_CAPABILITY:
        raise ValueError(f"the scan rung 'striped' needs compute capability "
                         f"{PIPELINED_CAPABILITY / 10:.1f} (its tiles' shared memory); this GPU "
                         f"has {p.capability / 10:.1f}: use 'blocked' or 'auto'")
    tiles = ceil_div(p.n * p.rows, striped_tile(p.dtype))
    capacity = capacity_for(tiles)
    instance = _striped_instance(p.op, p.dtype)
    shared = striped_shared_bytes(p.dtype)
    grid = tiles if p.resident is None else min(tiles, p.resident(instance, STRIPED_THREADS,
                                                                  shared))
    return Plan([Step(Launch(SOURCE, instance, (grid, 1, 1), (STRIPED_THREADS, 1, 1), shared),
                      _single_pass_args(p, capacity), capacity)])


# --- rung 6: columns ----------------------------------------------------------------------------

COLUMN_WARPS = 8
COLUMN_ROWS = 16  # rows per warp: a tile is COLUMN_WARPS x COLUMN_ROWS rows of 32 columns
# Fewer chunks of 32 columns than this: the wide path looks back by groups of 32 tiles along each
# column (its tiles' predecessors are still running); more: a tile at a time (scan.cu's GROUPED)
COLUMNS_GROUPED_CHUNKS = 8


NARROW_WARPS = 16  # the narrow path's warps per block where its tile grows by them
NARROW_MAX_ITEMS = 24  # and its elements per thread at most (a thread's run is in registers)
# The most shared memory a block takes on every GPU the library runs on (sm_75's opt-in limit).
NARROW_SHARED_LIMIT = 64 * 1024


def _narrow_shared(dtype: numpy.dtype, warps: int, items: int) -> tuple[int, int]:
    """(dynamic, static) shared bytes of a narrow block: its outputs in 16-byte words with a
    word of padding after every eight; the warps' column totals and starts, the prefixes, and
    three (value, start) pairs per column for the look-back."""
    acc, out = (d.itemsize for d in accumulator(dtype))
    words = 32 * warps * items * out // 16
    return 16 * (words + words // 8), 32 * warps * (acc + 4) + 32 * acc + 3 * 32 * 2 * acc + 96


@functools.cache
def narrow_geometry(dtype: numpy.dtype) -> tuple[int, int]:
    """(warps, items) of the narrow path's block. A larger tile means fewer look-backs per byte,
    and more warps fewer look-backs per warp (benchmarks/NOTES.md, item 127): NARROW_WARPS
    warps with the most items per thread (whole 16-byte words of the inputs and the outputs,
    at most NARROW_MAX_ITEMS) whose shared memory fits NARROW_SHARED_LIMIT, where that tile is
    larger than blocked's (LOOK_BACK_BLOCK threads x :func:`look_back_items`, which the 1- and
    2-byte integers keep). float32 and float16 take 16 x 24, 8-byte results 16 x 12."""
    out = accumulator(dtype)[1].itemsize
    step = max(16 // dtype.itemsize, 16 // out)
    fits = [items for items in range(step, NARROW_MAX_ITEMS + 1, step)
            if sum(_narrow_shared(dtype, NARROW_WARPS, items)) <= NARROW_SHARED_LIMIT]
    blocked = (LOOK_BACK_BLOCK // 32, look_back_items(dtype))
    if fits and NARROW_WARPS * max(fits) > blocked[0] * blocked[1]:
        return NARROW_WARPS, max(fits)
    return blocked


def _columns_instance(op: str, read: numpy.dtype, narrow: bool, grouped: bool = False) -> str:
    """ROWS is the rows of its column a thread scans: COLUMN_ROWS, or on the narrow path
    :func:`narrow_geometry`'s items. ``grouped``: the wide path's grouped look-back."""
    acc, out = accumulator(read)
    warps, rows = narrow_geometry(read) if narrow else (COLUMN_WARPS, COLUMN_ROWS)
    return (f"scan_columns<{op}, {_c(read)}, {_c(acc)}, {_c(out)}, {warps}, {rows}, "
            f"{'true' if narrow else 'false'}, {'true' if grouped else 'false'}>")


def is_narrow(inner: int) -> bool:
    """Whether columns takes its narrow path: ``inner`` up to 32, so that a tile of whole rows
    is contiguous (scan.cu, gk_columns_narrow)."""
    return inner <= 32


def narrow_tile_rows(dtype: numpy.dtype, inner: int) -> int:
    """Rows of ``inner`` elements in a narrow tile: a row takes ``inner`` rounded up to a power
    of two of the block's threads (the lanes past ``inner`` idle), each thread a run of
    :func:`narrow_geometry`'s items."""
    warps, items = narrow_geometry(dtype)
    return 32 * warps // (1 << (inner - 1).bit_length()) * items


def narrow_shared_bytes(dtype: numpy.dtype) -> int:
    """The narrow path's tile buffer (dynamic shared memory): the tile's outputs in 16-byte
    words, a word of padding after every eight."""
    return _narrow_shared(dtype, *narrow_geometry(dtype))[0]


# The striped path (scan.cu, scan_columns_striped): striped's schedule and look-back warps for one
# scan down each column of a narrow float32 or float64 array, each thread scanning a run of
# COLUMNS_STRIPED_RUN rows of a column group in registers. Measured on an H200 against the narrow
# path, per call (benchmarks/NOTES.md, items 194-195), from 2^18 elements (the smallest timed):
# 40-90% ahead for float32 and 20-45% for float64; depth 2 (two blocks an SM) ahead of depth 3
# (one), two look-back warps ahead of one, three or four.
COLUMNS_STRIPED_RUN = 8  # 16-byte words of a tile a data thread loads, and rows of its run
COLUMNS_STRIPED_DEPTH = 2  # a tile is finished this many rounds after its scan, less one
COLUMNS_STRIPED_LOOKERS = 2  # look-back warps a block, taking the rounds in turn
#: Data warps a block, by 16-byte words a row: eight where those divide eight, else a multiple
#: of them (each column group takes whole warps), in blocks that leave the registers two blocks
#: an SM allow.
COLUMNS_STRIPED_WARPS = {1: 8, 2: 8, 3: 6, 4: 8, 5: 5, 6: 6, 7: 7, 8: 8}
#: Rows that are not whole words (3 float32 columns, say): a row group of 2 or 4 rows makes whole
#: words, and each data thread of 8 warps scans whole row groups, all their columns (at most
#: COLUMNS_GROUPED_MAX); the words a thread loads and scans, by words a row group: whole groups,
#: an odd number (scan.cu, gk_columns_slot). Measured on an H200 (NOTES 198): 9 ahead of 7 and
#: 5 for one word, of 3 for three; 5 ahead of 15 for five.
COLUMNS_GROUPED_RUN = {1: 9, 3: 9, 5: 5, 7: 7}
COLUMNS_GROUPED_WARPS = 8
COLUMNS_GROUPED_MAX = 7  # a thread's columns: accumulators it keeps in registers
COLUMNS_STRIPED_CAPABILITY = 90  # measured there only
COLUMNS_STRIPED_DTYPES = (F32, F64)
#: Arrays of fewer elements take the narrow path.
COLUMNS_STRIPED_MIN = 1 << 18


def columns_striped_layout(dtype: numpy.dtype, inner: int) -> tuple[int, int, int] | None:
    """How the striped path lays out rows of ``inner`` elements of ``dtype``, or None where it
    takes no such rows: (the kernel's COLUMNS, data threads a block, 16-byte words a data
    thread loads). COLUMNS is 0 for rows of whole words (1 to 8 of them), else ``inner``: rows
    of 2 to COLUMNS_GROUPED_MAX elements that are not whole words, in row groups of 2 or 4
    rows that make 1, 3, 5 or 7 words."""
    row_bytes = inner * dtype.itemsize
    if row_bytes % 16 == 0:
        warps = COLUMNS_STRIPED_WARPS.get(row_bytes // 16)
        return None if warps is None else (0, 32 * warps, COLUMNS_STRIPED_RUN)
    group_words = row_bytes * (16 // math.gcd(row_bytes, 16)) // 16
    if not 2 <= inner <= COLUMNS_GROUPED_MAX or group_words not in COLUMNS_GROUPED_RUN:
        return None  # (one column is a scan along the last axis)
    return inner, 32 * COLUMNS_GROUPED_WARPS, COLUMNS_GROUPED_RUN[group_words]


def columns_striped(p: Problem) -> bool:
    """Whether columns takes its striped path: a float32 or float64 array of at least
    COLUMNS_STRIPED_MIN elements scanned along its first axis (one scan per column), whose rows
    :func:`columns_striped_layout` takes (1 to 8 words of 16 bytes: 4, 8, ... 32 float32
    columns, 2, 4, ... 16 float64; and 2, 3, 5, 6 or 7 float32 columns, 3, 5 or 7 float64),
    on compute capability COLUMNS_STRIPED_CAPABILITY or newer (or when planning on the CPU)."""
    return (p.dtype in COLUMNS_STRIPED_DTYPES and p.rows == p.inner
            and columns_striped_layout(p.dtype, p.inner) is not None
            and p.n * p.inner >= COLUMNS_STRIPED_MIN
            and (p.capability == 0 or p.capability >= COLUMNS_STRIPED_CAPABILITY))


def columns_striped_block(dtype: numpy.dtype, inner: int) -> int:
    """Data threads a block of the striped path, for rows of ``inner`` elements of ``dtype``."""
    return _striped_layout(dtype, inner)[1]


def columns_striped_tile(dtype: numpy.dtype, inner: int) -> int:
    """Elements of a tile of the striped path: its data threads x the words each loads (8192
    float32 or 4096 float64 in blocks of 256 threads for rows of whole words), whole rows."""
    _, block, run = _striped_layout(dtype, inner)
    return block * run * (16 // dtype.itemsize)


def columns_striped_shared_bytes(dtype: numpy.dtype, inner: int) -> int:
    """The striped path's COLUMNS_STRIPED_DEPTH slots (dynamic shared memory), each a tile's
    16-byte words and each data thread's run prefixes (an accumulator for each column of its
    group: a word's columns, or a row's where rows are not whole words)."""
    columns, block, run = _striped_layout(dtype, inner)
    prefixes = block * (columns or 16 // dtype.itemsize) * accumulator(dtype)[0].itemsize
    return COLUMNS_STRIPED_DEPTH * (block * run * 16 + ceil_div(prefixes, 16) * 16)


def _striped_layout(dtype: numpy.dtype, inner: int) -> tuple[int, int, int]:
    layout = columns_striped_layout(dtype, inner)
    if layout is None:
        raise ValueError(f"the striped path takes no rows of {inner} {dtype.name} elements")
    return layout


def _columns_striped_instance(op: str, read: numpy.dtype, inner: int) -> str:
    columns, block, run = _striped_layout(read, inner)
    acc, out = accumulator(read)
    return (f"scan_columns_striped<{op}, {_c(read)}, {_c(acc)}, {_c(out)}, {block}, {run}, "
            f"{COLUMNS_STRIPED_DEPTH}, {COLUMNS_STRIPED_LOOKERS}, {columns}>")


def plan_columns(p: Problem) -> Plan:
    """One launch. Narrow arrays (see :func:`is_narrow`): tiles of consecutive elements,
    :func:`narrow_tile_rows` whole rows of every column, one chain of tiles (a flag per tile)
    with each column's values in a slice of the scratch; where :func:`columns_striped`, tiles of
    :func:`columns_striped_tile` elements (whole rows) taken in turn by resident blocks, each
    column's values in its lane's slot of the scratch (32 slots a tile).
    Others: a tile per (axes before, chunk of 32 columns, COLUMN_WARPS x COLUMN_ROWS rows),
    numbered column chunk fastest."""
    if columns_striped(p):
        tiles = ceil_div(p.n * p.inner, columns_striped_tile(p.dtype, p.inner))
        block = columns_striped_block(p.dtype, p.inner)
        instance = _columns_striped_instance(p.op, p.dtype, p.inner)
        shared = columns_striped_shared_bytes(p.dtype, p.inner)
        threads = block + 32 * COLUMNS_STRIPED_LOOKERS
        grid = tiles if p.resident is None else min(
            tiles, p.resident(instance, threads, shared))
        capacity = capacity_for(tiles * 32)
        return Plan([Step(Launch(SOURCE, instance, (grid, 1, 1), (threads, 1, 1), shared),
                          _single_pass_args(p, capacity), capacity)])
    if is_narrow(p.inner):
        warps = narrow_geometry(p.dtype)[0]
        tiles = ceil_div(p.n * p.rows, narrow_tile_rows(p.dtype, p.inner) * p.inner)
        per_column = capacity_for(tiles)
        return Plan([Step(Launch(SOURCE, _columns_instance(p.op, p.dtype, True), (tiles, 1, 1),
                                 (32 * warps, 1, 1), narrow_shared_bytes(p.dtype)),
                          _single_pass_args(p, per_column), per_column * p.inner)])
    chunks = ceil_div(p.inner, 32)
    tiles = ceil_div(p.n, COLUMN_WARPS * COLUMN_ROWS) * chunks * (p.rows // p.inner)
    capacity = capacity_for(tiles * 32)
    instance = _columns_instance(p.op, p.dtype, False, chunks < COLUMNS_GROUPED_CHUNKS)
    return Plan([Step(Launch(SOURCE, instance, (tiles, 1, 1), (32 * COLUMN_WARPS, 1, 1)),
                      _single_pass_args(p, capacity), capacity)])


# --- the ladder ---------------------------------------------------------------------------------

def _eager(op: str, dtype: numpy.dtype) -> bool:
    """Compiled at import: cumsum of the real dtypes. Products and complex scans compile on
    their first call."""
    return op == "SumOp" and dtype.kind != "c"


@functools.cache
def _hillis_steele_pairs() -> tuple:
    """(read, acc, out) of every hillis_steele launch: the input level and the totals' levels."""
    triples = []
    for dtype in IN_DTYPES:
        acc, out = accumulator(dtype)
        triples += [(dtype, acc, out), (acc, acc, acc)]
    return tuple(dict.fromkeys(triples))


def _lazy_groups(kernel: str, instances: Callable[[str], list[str]]) -> tuple:
    """One group per operator, compiled on first use (the textbook rung's kernels)."""
    return tuple(SOURCE.add(f"{kernel} {name} (lazy)", instances(op), eager=False)
                 for name, op in OPERATORS.items())


def _dtype_groups(kernel: str, instance: Callable[[str, numpy.dtype], str], chunk: int, *,
                  at_import: bool = True, capabilities: range | None = None) -> tuple:
    """Per operator, the eager instances (see :func:`_eager`; none where ``at_import`` is false)
    in groups of ``chunk`` dtypes, which the import's compile threads share on devices of
    ``capabilities``, and the others in one lazy group."""
    groups = []
    for name, op in OPERATORS.items():
        eager = [dtype for dtype in IN_DTYPES if at_import and _eager(op, dtype)]
        for start in range(0, len(eager), chunk):
            part = eager[start:start + chunk]
            label = f" ({', '.join(d.name for d in part)})" if len(part) < len(eager) else ""
            groups.append(SOURCE.add(f"{kernel} {name}{label}",
                                     [instance(op, dtype) for dtype in part],
                                     capabilities=capabilities))
        groups.append(SOURCE.add(f"{kernel} {name} (lazy)",
                                 [instance(op, dtype) for dtype in IN_DTYPES
                                  if dtype not in eager], eager=False))
    return tuple(groups)


#: The textbook rung's second kernel (its carry pass), compiled with it on first use.
ADD_CARRIES_GROUPS = _lazy_groups("scan_add_carries", lambda op: list(dict.fromkeys(
    _add_carries_instance(op, acc, out) for _, acc, out in _hillis_steele_pairs())))

def _columns_striped_rows() -> dict[str, list[tuple[numpy.dtype, int]]]:
    """Every (dtype, row width) the striped path takes (rows of up to 32 columns), by the lazy
    group its instance belongs to: rows of whole words by block (one instance per dtype serves
    every width of that block), other rows by width."""
    groups: dict[str, list[tuple[numpy.dtype, int]]] = {}
    for dtype in COLUMNS_STRIPED_DTYPES:
        for inner in range(2, 33):
            layout = columns_striped_layout(dtype, inner)
            if layout is not None:
                columns, block, _ = layout
                label = f"{inner} columns" if columns else f"{block} threads"
                groups.setdefault(label, []).append((dtype, inner))
    return groups


#: The columns rung's striped path, a kernel of its own (scan_columns_striped), compiled on first
#: use, a group per operator and :func:`_columns_striped_rows` group: a first call compiles one
#: or two instances.
COLUMNS_STRIPED_GROUPS = tuple(
    SOURCE.add(f"scan_columns_striped {name} {label} (lazy)",
               list(dict.fromkeys(_columns_striped_instance(op, dtype, inner)
                                  for dtype, inner in rows)),
               eager=False)
    for name, op in OPERATORS.items() for label, rows in _columns_striped_rows().items())

LADDER = Ladder("scan", (
    Rung("hillis_steele",
         "the textbook scan: a tile per block, log2(block) shared-memory steps, tile totals "
         "scanned recursively, then a pass that adds each tile's carry",
         SOURCE, "scan_hillis_steele",
         _lazy_groups("scan_hillis_steele",
                      lambda op: [_hillis_steele_instance(op, *t) for t in _hillis_steele_pairs()]),
         plan_hillis_steele),
    Rung("look_back",
         "one pass: each tile looks back at its predecessors' published totals (decoupled "
         "look-back, folded in a fixed order), 16-byte words, rows laid end to end",
         # NVRTC takes 0.5-1.2 s per instance: one group of twelve was the cold import's last
         # thread by 8 s (benchmarks/NOTES.md, item 52). auto never takes it: compiled on first
         # use (its four groups were 13% of the cold import's NVRTC work; item 145)
         SOURCE, "scan_look_back",
         _dtype_groups("scan_look_back", _look_back_instance, 3, at_import=False),
         plan_look_back),
    Rung("blocked",
         "look_back's single pass with each thread scanning a run of consecutive elements: the "
         "tile staged in shared memory, one warp scan per thread instead of one per word",
         # auto's rung for rows where pipelined does not run: compiled at import there alone
         SOURCE, "scan_blocked", _dtype_groups("scan_blocked", _blocked_instance, 3,
                                               capabilities=range(PIPELINED_CAPABILITY)),
         plan_blocked),
    Rung("pipelined",
         "blocked's tiles taken in turn by resident blocks, two in flight: a block loads and "
         "scans its next tile while a warp of its own looks back for the one before",
         SOURCE, "scan_pipelined",
         _dtype_groups("scan_pipelined", _pipelined_instance, 3,
                       capabilities=range(PIPELINED_CAPABILITY, 1000)),
         plan_pipelined, Needs(capability=PIPELINED_CAPABILITY)),
    Rung("striped",
         "pipelined's schedule with each thread's words of the tile kept in registers as "
         "loaded (every access of a warp 512 consecutive bytes, nothing staged), tiles "
         "finished two rounds after their scan, and two look-back warps a block taking the "
         "tiles in turn",
         # auto's rung for long rows (choose): compiled on first use, one instance a dtype
         SOURCE, "scan_striped",
         _dtype_groups("scan_striped", _striped_instance, 3, at_import=False),
         plan_striped, Needs(capability=PIPELINED_CAPABILITY)),
    Rung("columns",
         "scans along an axis before the last: a lane per column, a warp's load one row of 32 "
         "columns, a look-back per column (by groups of 32 tiles where chunks of 32 columns "
         "are few); narrow arrays (up to 32 columns) in tiles of whole rows, each thread a run "
         "of one column, one look-back per tile for all its columns; on sm_90, float32 and "
         "float64 arrays of rows of 1 to 8 words of 16 bytes (or of 2 to 7 columns in groups "
         "of rows that make whole words) scanned along their first axis in striped's "
         "schedule, each thread a run of 8 rows (or of whole row groups)",
         SOURCE, "scan_columns",
         _dtype_groups("scan_columns", functools.partial(_columns_instance, narrow=False), 12)
         + _dtype_groups("scan_columns grouped",
                         functools.partial(_columns_instance, narrow=False, grouped=True), 12)
         + _dtype_groups("scan_columns narrow", functools.partial(_columns_instance, narrow=True),
                         3),
         plan_columns,
         Needs(layout="fast for scans along an axis that is not the last")),
))


def choose(p: Problem) -> Rung:
    """``method="auto"``: along the last axis (or of a flattened array), striped for rows of
    at least :func:`striped_min_row` elements (which depends on the input's size) and
    pipelined for the others, blocked on GPUs older than compute capability 8.0; columns along
    any other axis."""
    if p.inner != 1:
        return LADDER["columns"]
    if 0 < p.capability < PIPELINED_CAPABILITY:
        return LADDER["blocked"]
    shortest = striped_min_row(p.dtype, p.n * p.rows)
    if shortest is not None and p.n >= shortest:
        return LADDER["striped"]
    return LADDER["pipelined"]
