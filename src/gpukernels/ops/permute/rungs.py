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


# --- rung 3: vector -----------------------------------------------------------------------------

#: permute_vector's tile per item size, (V, TILE_P, TILE_Q, THREADS), in V x V blocks of
#: elements: the 2-D transpose's vector tiles (64 x 64 float32, 128 x 128 float16 and int8), the
#: best or level with it among the shapes tried for (3, 2, 1, 0) permutations (NOTES, item 140).
#: V = 1 (no 16-byte words) takes tiled's 32 x 32 elements.
VECTOR_TILES = {1: (16, 8, 8, 64), 2: (8, 16, 16, 256), 4: (4, 16, 16, 256)}
VECTOR_SCALAR_TILE = (1, 32, 32, 256)


def vector_width(p: Problem) -> int:
    """V of permute_vector: 16 / itemsize elements a word where the layout allows 16-byte words
    (the input contiguous along the tile axis Q; the lengths of P and Q and every other input
    stride multiples of V; both addresses 16-byte aligned), else 1."""
    if p.itemsize not in VECTOR_TILES:
        return 1
    vector = 16 // p.itemsize
    q, last = p.tile_axis, p.rank - 1
    if p.in_strides[q] == 1 and p.lengths[q] % vector == 0 and p.lengths[last] % vector == 0 \
            and all(stride % vector == 0 for axis, stride in enumerate(p.in_strides) if axis != q) \
            and p.in_address % 16 == 0 and p.out_address % 16 == 0:
        return vector
    return 1


def vector_tile(p: Problem) -> tuple[int, int, int, int]:
    """(V, TILE_P, TILE_Q, THREADS) for a problem."""
    return VECTOR_TILES[p.itemsize] if vector_width(p) > 1 else VECTOR_SCALAR_TILE


def joined_axes(p: Problem) -> tuple[int, ...]:
    """The output axes permute_vector's TILE_P runs along: the last (P), and the one before it
    (R) unless that is the tile axis Q (the output is contiguous across R and P)."""
    last = p.rank - 1
    return (last,) if last - 1 == p.tile_axis else (last - 1, last)


def _vector_instance(itemsize: int, index: str, tile: tuple[int, int, int, int]) -> str:
    vector, tile_p, tile_q, threads = tile
    return (f"permute_vector<{CARRIERS[itemsize]}, {index}, {vector}, {tile_p}, {tile_q}, "
            f"{threads}>")


def _vector_instances(itemsize: int, index: str) -> list[str]:
    tiles = ((VECTOR_TILES[itemsize],) if itemsize in VECTOR_TILES else ()) + (VECTOR_SCALAR_TILE,)
    return [_vector_instance(itemsize, index, tile) for tile in tiles]


def plan_vector(p: Problem) -> Planned:
    """A block per tile of TILE_P x TILE_Q blocks of V x V elements, TILE_P along the joined
    axes (:func:`joined_axes`); the other axes folded as in tiled."""
    tile = vector_tile(p)
    vector, tile_p, tile_q, threads = tile
    q, joined = p.tile_axis, joined_axes(p)
    p_blocks = math.prod(p.lengths[axis] for axis in joined) // vector
    others = math.prod(length for axis, length in enumerate(p.lengths)
                       if axis != q and axis not in joined)
    grid = (min(ceil_div(p.lengths[q] // vector, tile_q), MAX_GRID_X),
            min(ceil_div(p_blocks, tile_p), MAX_GRID_YZ), min(others, MAX_GRID_YZ))
    return Planned(Launch(SOURCE, _vector_instance(p.itemsize, p.index, tile), grid,
                          (threads, 1, 1)), dims_value(p.lengths, p.in_strides, q))


# --- rung 4: rows -------------------------------------------------------------------------------

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
    """An eager group of the 32-bit index instances and a lazy one of the 64-bit ones;
    ``instance(size, index)`` is an instance's name or a list of them."""
    def names(index: str) -> list[str]:
        made = [instance(size, index) for size in sizes]
        return [name for item in made for name in ([item] if isinstance(item, str) else item)]
    return tuple(SOURCE.add(f"{label} {index}", names(index), eager=index == "int")
                 for index in INDEXES)


LADDER = Ladder("permute", (
    Rung("gather", "one thread per output element, its input coordinates decoded per element: "
                   "coalesced writes, reads coalesced only when the last axis stays last",
         SOURCE, "permute_gather", _groups("gather", _gather_instance, CARRIERS), plan_gather),
    Rung("tiled", "a tile over the output's last axis and the input's densest axis through "
                  "padded shared memory: reads and writes both coalesced; the other axes "
                  "folded into the grid",
         SOURCE, "permute_tiled", _groups("tiled", _tiled_instance, CARRIERS), plan_tiled),
    Rung("vector", "tiled's tile in V x V blocks transposed in registers: every access a "
                   "16-byte word where the input is contiguous along the tiled axis and the "
                   "lengths allow (else tiled's scheme, one element an access)",
         SOURCE, "permute_vector", _groups("vector", _vector_instances, CARRIERS), plan_vector),
    Rung("rows", "permutations that keep the input's contiguous axis last: whole rows copied "
                 "in words of up to 16 bytes",
         SOURCE, "permute_rows", _groups("rows", _rows_instance, CARRIERS), plan_rows,
         Needs(layout="the output's last axis is the input's contiguous axis")),
))
ROWS = LADDER["rows"]
TILED = LADDER["tiled"]
VECTOR = LADDER["vector"]


def choose(p: Problem) -> Rung:
    """``method="auto"`` in this ladder: rows where the last axis stays contiguous, else vector
    where the layout allows its 16-byte words, else tiled."""
    if p.keeps_last:
        return ROWS
    return VECTOR if vector_width(p) > 1 else TILED
