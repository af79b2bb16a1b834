"""The permutation ladder: its rungs, their instances, and their plans (launch geometry).

Every number that shapes a launch (tiles, threads) is set here and reaches the kernel as a
template argument (``kernels/permute/permute.cu``). A plan maps a :class:`Problem` (a merged
permutation, see :mod:`gpukernels.ops.permute`) to a :class:`Planned`: the launch and the
``gk_permute_dims`` value the kernel takes. :func:`choose` is ``method="auto"`` within this
ladder; the wrapper sends batched matrix transposes to the transpose ladder before it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy

from ..._core.compile import KernelSource
from ..._core.ladder import Ladder, Needs, Rung
from ..._core.launch import INDEX_SCALARS, MAX_GRID_X, MAX_GRID_YZ, Launch, ceil_div
from ..transpose.rungs import CARRIERS

__all__ = ["Problem", "Planned", "LADDER", "choose", "MAX_RANK", "DIMS", "SOURCE", "CARRIERS"]

SOURCE = KernelSource("permute/permute.cu")
INDEXES = tuple(INDEX_SCALARS)  # "int", then "long long": the 64-bit instances compile lazily
MAX_RANK = 8  # GK_PERMUTE_RANK: axes left after merging
#: gk_permute_dims, as the kernels take it by value (8-byte aligned, 136 bytes).
DIMS = numpy.dtype([("length", "<i8", (MAX_RANK,)), ("in_stride", "<i8", (MAX_RANK,)),
                    ("rank", "<i4"), ("tile_axis", "<i4")])


@dataclass(frozen=True)
class Problem:
    """A permutation after merging: the output's axes, its last the fastest.

    Attributes
    ----------
    itemsize : int
        Bytes per element.
    lengths : tuple of ints
        The output's lengths, 2 to :data:`MAX_RANK` of them (the wrapper pads with length-1
        axes).
    in_strides : tuple of ints
        The input's stride along each output axis, in elements (any sign).
    in_address, out_address : int
        The input's and the output's addresses modulo 256.
    index : str
        The kernels' index type, ``"int"`` or ``"long long"``.
    """

    itemsize: int
    lengths: tuple[int, ...]
    in_strides: tuple[int, ...]
    in_address: int
    out_address: int
    index: str

    @property
    def rank(self) -> int:
        return len(self.lengths)

    @property
    def keeps_last(self) -> bool:
        """The output's last axis is contiguous in the input: the output is rows of it."""
        return self.in_strides[-1] == 1

    @property
    def tile_axis(self) -> int:
        """The output axis, besides the last, along which the input is densest."""
        return min(range(self.rank - 1), key=lambda axis: (abs(self.in_strides[axis]) or
                                                          math.inf, -axis))


@dataclass(frozen=True)
class Planned:
    """A rung's plan: the launch, and the ``gk_permute_dims`` value of its third argument."""

    launch: Launch
    dims: Any


def dims_value(lengths: tuple[int, ...], in_strides: tuple[int, ...], tile_axis: int = 0) -> Any:
    """A ``gk_permute_dims`` (a NumPy structured scalar of :data:`DIMS`)."""
    value = numpy.zeros((), DIMS)
    value["length"][:len(lengths)] = lengths
    value["in_stride"][:len(in_strides)] = in_strides
    value["rank"], value["tile_axis"] = len(lengths), tile_axis
    return value[()]


# --- rung 1: gather -----------------------------------------------------------------------------

GATHER_THREADS = 256


def _gather_instance(itemsize: int, index: str) -> str:
    return f"permute_gather<{CARRIERS[itemsize]}, {index}>"


def plan_gather(p: Problem) -> Planned:
    """One thread per output element (a grid-stride loop past 2^31 - 1 blocks)."""
    total = math.prod(p.lengths)
    grid = (min(ceil_div(total, GATHER_THREADS), MAX_GRID_X), 1, 1)
    return Planned(Launch(SOURCE, _gather_instance(p.itemsize, p.index), grid,
                          (GATHER_THREADS, 1, 1)), dims_value(p.lengths, p.in_strides))


# --- rung 2: tiled ------------------------------------------------------------------------------

#: TILE and ROWS (32 x ROWS threads) per item size, the best of 2 to 16 rows and 32 to 128
#: columns measured on an H100 (benchmarks/NOTES.md, item 46): float32 (32, 64, 128, 256) with
#: axes (3, 2, 1, 0) 0.79 of a copy with 32 x 8, 0.85 with 32 x 4 (0.80 with 64 x 8); int8
#: (512,)*3 with (2, 1, 0) 0.50 with 64 x 8 (0.45 to 0.30 otherwise); float16 (255, 513, 511)
#: with (1, 2, 0) 0.43 with 128 x 16 (0.39 with 64 x 8). 8- and 16-byte items keep 32 x 8.
TILES = {1: 64, 2: 128, 4: 32, 8: 32, 16: 32}
TILED_ROWS = {1: 8, 2: 16, 4: 4, 8: 8, 16: 8}


def _tiled_instance(itemsize: int, index: str) -> str:
    return (f"permute_tiled<{CARRIERS[itemsize]}, {index}, {TILES[itemsize]}, "
            f"{TILED_ROWS[itemsize]}>")


def plan_tiled(p: Problem) -> Planned:
    """A block per tile of the last axis and the input's densest other axis; the other axes'
    product in blockIdx.z (grid-stride past 65535)."""
    tile, q, last = TILES[p.itemsize], p.tile_axis, p.rank - 1
    others = math.prod(length for axis, length in enumerate(p.lengths) if axis not in (q, last))
    grid = (min(ceil_div(p.lengths[q], tile), MAX_GRID_X),
            min(ceil_div(p.lengths[last], tile), MAX_GRID_YZ), min(others, MAX_GRID_YZ))
    return Planned(Launch(SOURCE, _tiled_instance(p.itemsize, p.index), grid,
                          (32, TILED_ROWS[p.itemsize], 1)),
                   dims_value(p.lengths, p.in_strides, q))


# --- rung 3: rows -------------------------------------------------------------------------------

ROWS_THREADS = 256
WORD_SIZES = (16, 8, 4, 2, 1)


def _rows_instance(word: int, index: str) -> str:
    return f"permute_rows<{CARRIERS[word]}, {index}, {ROWS_THREADS}>"


def row_word(p: Problem) -> int:
    """The widest word (up to 16 bytes) that divides every row's start and length on both sides."""
    row_bytes = p.lengths[-1] * p.itemsize
    for word in WORD_SIZES:
        if word < p.itemsize:
            break
        if row_bytes % word == 0 and p.in_address % word == 0 and p.out_address % word == 0 \
                and all(stride * p.itemsize % word == 0 for stride in p.in_strides[:-1]):
            return word
    return p.itemsize


def plan_rows(p: Problem) -> Planned:
    """Rows of words: a block of X x Y threads copies Y rows' X-word chunks, X the row's words
    rounded up to a power of two (at most ROWS_THREADS)."""
    if not p.keeps_last:
        raise ValueError("the permute_dims rung 'rows' copies rows that stay contiguous: the "
                         "output's last axis must be the input's contiguous one; use 'tiled' "
                         "or 'auto'")
    word = row_word(p)
    scale = word // p.itemsize
    lengths = p.lengths[:-1] + (p.lengths[-1] // scale,)
    strides = tuple(stride // scale for stride in p.in_strides[:-1]) + (1,)
    row_words, rows = lengths[-1], math.prod(lengths[:-1])
    x = min(ROWS_THREADS, 1 << max(row_words - 1, 0).bit_length())
    y = ROWS_THREADS // x
    grid = (ceil_div(row_words, x), min(ceil_div(rows, y), MAX_GRID_YZ), 1)
    return Planned(Launch(SOURCE, _rows_instance(word, p.index), grid, (x, y, 1)),
                   dims_value(lengths, strides))


# --- the ladder ---------------------------------------------------------------------------------

def _groups(label: str, instance: Any, sizes: Any) -> tuple:
    """An eager group of the 32-bit index instances and a lazy one of the 64-bit ones."""
    return tuple(SOURCE.add(f"{label} {index}", [instance(size, index) for size in sizes],
                            eager=index == "int") for index in INDEXES)


LADDER = Ladder("permute", (
    Rung("gather", "one thread per output element, its input coordinates decoded per element: "
                   "coalesced writes, reads coalesced only when the last axis stays last",
         SOURCE, "permute_gather", _groups("gather", _gather_instance, CARRIERS), plan_gather),
    Rung("tiled", "a tile over the output's last axis and the input's densest axis through "
                  "padded shared memory: reads and writes both coalesced; the other axes "
                  "folded into the grid",
         SOURCE, "permute_tiled", _groups("tiled", _tiled_instance, CARRIERS), plan_tiled),
    Rung("rows", "permutations that keep the input's contiguous axis last: whole rows copied "
                 "in words of up to 16 bytes",
         SOURCE, "permute_rows", _groups("rows", _rows_instance, CARRIERS), plan_rows,
         Needs(layout="the output's last axis is the input's contiguous axis")),
))
ROWS = LADDER["rows"]
TILED = LADDER["tiled"]


def choose(p: Problem) -> Rung:
    """``method="auto"`` in this ladder: rows where the last axis stays contiguous, else tiled."""
    return ROWS if p.keeps_last else TILED
