"""Reductions that keep some axes: the row and column kernels of ``kernels/reduce/axis.cu``.

They are not rungs: whatever ``method`` says, a reduction that keeps axes is brought to a
(B, K, R) view (B and K kept, R reduced) and goes to the kernel whose threads read neighbouring
elements. Axes that do not merge into one stride are reduced a group at a time, through
intermediate buffers of the accumulator dtype. :func:`plan_partial` records the launches in a
:class:`~.program.Program`.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy

from ..._core.compile import KernelSource
from ..._core.launch import MAX_GRID_YZ, Launch, ceil_div
from . import dtypes
from .program import PARTIALS, SCRATCH_ITEM, TICKETS, Program
from .rungs import BLOCK, Resident, blocks_per_wave, wave_blocks

__all__ = ["plan_partial", "SOURCE", "KERNELS", "c_strides", "merge_axes", "PLAN_NAME",
           "folded_max_partials"]

SOURCE = KernelSource("reduce/axis.cu")
#: What launches of these kernels are recorded under (describe, the benchmark): not a rung.
PLAN_NAME = "axis kernels"

# Unsplit column reductions run 512 threads, so that 256 columns side by side get two threads
# each (P in axis.cu) instead of one (benchmarks/NOTES.md, item 36).
COLS_BLOCK = 512
COLS_TILE = 256  # columns side by side in a column block, at most
SHORT_ROW = 16  # rows up to this length get a thread each instead of a warp


#: Reductions over groups of axes that do not merge (axes (0, 2) of a 3-D array) take one group
#: at a time. The innermost group goes first where its elements are contiguous runs of at
#: least this many bytes (the row kernel's warps then read several 16-byte words a lane);
#: shorter runs go last, after the outermost group, which the column kernel reduces with a
#: thread per column of everything inside it ((256, 256, 256) float32 over (0, 2): rows of
#: 1 KiB first held the first pass to 1.3 TB/s; benchmarks/NOTES.md, item 108).
ROWS_FIRST_MIN_BYTES = 4096


def folded_max_partials(multiprocessors: int) -> int:
    """The most partials a split column reduction writes: its blocks are at most a wave of
    BLOCK-thread blocks (the most an SM runs of them), each with COLS_TILE columns."""
    return blocks_per_wave(BLOCK, multiprocessors) * COLS_TILE


@dataclass(frozen=True)
class AxisKernel:
    """One of the axis kernels and the BLOCK it is compiled for (its template argument: the
    most threads a launch of it may have)."""

    name: str
    block: int

    def instance(self, op: str, read: numpy.dtype, acc: numpy.dtype, out: numpy.dtype) -> str:
        c = dtypes.KERNEL_C_TYPES
        return f"reduce_{self.name}<{op}, {c[read]}, {c[acc]}, {c[out]}, {self.block}>"


ROWS = AxisKernel("rows", BLOCK)
SHORT_ROWS = AxisKernel("short_rows", BLOCK)
COLS = AxisKernel("cols", COLS_BLOCK)
COLS_FOLDED = AxisKernel("cols_folded", BLOCK)
KERNELS = (ROWS, SHORT_ROWS, COLS, COLS_FOLDED)


def _groups() -> None:
    # A group per operator and kernel, of every (source, accumulator, written) a plan can ask
    # for: the first pass reads the input's dtype and writes the result's or partials of the
    # accumulator; later passes (folds, groups of axes) read the accumulator. argmin and
    # argmax reduce one axis: no groups of axes, no accumulator-to-accumulator pass. var's
    # include its one-launch var and std of float data (dtypes.reachable's spreads).
    for operation, op in dtypes.OPERATORS.items():
        triples = dtypes.reachable(operation, True, False, spreads=True)
        one_axis = op in dtypes.ARG_OPERATORS
        for kernel in KERNELS:
            instances = [kernel.instance(op, source, acc, out)
                         for read, acc, written in triples
                         for source, out in ((read, written), (read, acc), (acc, acc),
                                             (acc, written))
                         if not (one_axis and source == acc and out == acc)]
            SOURCE.add(f"{kernel.name} {operation}", instances,
                       eager=op in dtypes.EAGER_OPERATORS)


_groups()


def merge_axes(dims: list[tuple[int, int, tuple]]) -> list[tuple[int, int, tuple]]:
    """Merge neighbouring (length, stride, axes) dims that walk memory as one: outer first."""
    merged: list[tuple[int, int, tuple]] = []
    for length, stride, axes in dims:
        if merged and merged[-1][1] == stride * length:
            merged[-1] = (merged[-1][0] * length, stride, merged[-1][2] + axes)
        else:
            merged.append((length, stride, axes))
    return merged


def c_strides(shape: tuple) -> tuple:
    """Element strides of a C-contiguous array of ``shape``."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= builtins.max(n, 1)
    return tuple(reversed(strides))


def _next_power_of_two(n: int) -> int:
    return 1 << (n - 1).bit_length()


def _splits_in_one_wave(filling_blocks: int, blocks_per_split: int) -> int:
    """The most splits whose blocks all fit in one wave: a second, partial wave would hold the
    GPU for a whole block's time with few blocks running ((256, 256, 256) float32 over axis 1
    on an H100, when it was split: 5 splits, 1.2 waves, 32.9 us; 4 splits 30.1 us)."""
    return builtins.max(1, filling_blocks // blocks_per_split)


@dataclass(frozen=True)
class _AxisShape:
    kernel: AxisKernel
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    split: int  # rows (of R) per split

    @property
    def splits(self) -> int:
        return self.grid[1]


def _axis_shape(itemsize: int, B: int, K: int, R: int, k_stride: int, r_stride: int,
                may_split: bool, multiprocessors: int,
                wave: Callable[[AxisKernel, int], int] | None = None) -> _AxisShape:
    """The kernel, grid, block and split length for the (B, K, R) view of an axis reduction.

    The kernel is the one whose threads read neighbouring elements (see axis.cu). With
    ``may_split``, R is cut into parts (gridDim.y) when the rows or columns alone are too few to
    fill the GPU; each part then gives a partial, and the caller folds them, and the parts'
    blocks are one wave: ``wave(kernel, threads)`` blocks of the kernel that a split launches
    (:func:`~.rungs.wave_blocks`; without it, :func:`~.rungs.blocks_per_wave`).
    """
    if wave is None:
        def wave(kernel: AxisKernel, threads: int) -> int:
            return blocks_per_wave(threads, multiprocessors)
    if abs(r_stride) <= abs(k_stride) and R > SHORT_ROW:
        kernel, block = ROWS, (BLOCK, 1, 1)
        column_blocks = ceil_div(K, BLOCK // 32)
        per_word = 16 // itemsize if r_stride == 1 and itemsize <= 16 else 1
        # Enough warps to fill the GPU, each lane with four 16-byte words or more; parts start
        # on 16-byte boundaries when the rows do. Half a wave of blocks or more stays whole: a
        # second launch would cost more than it gives.
        filling_blocks = wave(ROWS, BLOCK)
        splits = builtins.min(_splits_in_one_wave(filling_blocks, column_blocks * B),
                              ceil_div(R, 32 * per_word * 4))
        if column_blocks * B * 2 >= filling_blocks:
            splits = 1
        unit = per_word
    elif abs(r_stride) <= abs(k_stride):
        kernel, block, column_blocks = SHORT_ROWS, (BLOCK, 1, 1), ceil_div(K, BLOCK)
        splits, unit = 1, 1
    else:
        kernel, unit = COLS, 1
        columns = builtins.min(COLS_TILE, _next_power_of_two(K))
        column_blocks = ceil_div(K, columns)
        if column_blocks * B >= multiprocessors:
            # A block on every SM: no split, since folding the splits costs more than the loads
            # in flight they add ((256, 256, 256) float32 over axis 1 on an H100: 4 splits
            # folded 30.2 us, unsplit 31.0 us with 256 threads, 26.9 us with 512; torch.sum
            # 27.4 us). COLS_BLOCK threads give columns of 256 two threads each (P).
            block, splits = (columns, COLS_BLOCK // columns, 1), 1
        else:
            # Splits of BLOCK-thread blocks that fill one wave, each thread with four steps of
            # eight rows or more ((8192, 8192) over axis 0: 32 column blocks, 33 splits).
            block = (columns, BLOCK // columns, 1)
            splits = builtins.min(
                _splits_in_one_wave(wave(COLS_FOLDED, BLOCK), column_blocks * B),
                ceil_div(R, 32 * block[1]))
    if not may_split:
        splits = 1
    splits = builtins.max(1, builtins.min(splits, MAX_GRID_YZ))
    split = ceil_div(ceil_div(R, splits), unit) * unit
    return _AxisShape(kernel, (column_blocks, ceil_div(R, split), builtins.min(B, MAX_GRID_YZ)),
                      block, split)


def _axis_launch(program: Program, source: int, target: int, op: str, read: numpy.dtype,
                 acc: numpy.dtype, out: numpy.dtype, shape: _AxisShape, B: int, K: int, R: int,
                 batch_stride: int, k_stride: int, r_stride: int,
                 folded: Any = None) -> None:
    """Record the planned axis kernel: buffer ``target`` gets splits x B x K values, or with
    ``folded`` (room for the (splits, B * K) partials: a buffer, or PARTIALS, the stream's
    scratch, where one launch takes every batch; column plans only) B x K values from
    reduce_cols_folded."""
    kernel = COLS_FOLDED if folded is not None else shape.kernel
    instance = kernel.instance(op, read, acc, out)
    for b0 in range(0, B, MAX_GRID_YZ):  # gridDim.z: at most 65535 batches a launch
        args: tuple = ((source, b0 * batch_stride), (target, b0 * K), K, R, batch_stride,
                       k_stride, r_stride, shape.split, B * K)
        if folded is PARTIALS:
            args += (PARTIALS, TICKETS)
        elif folded is not None:
            args += ((folded, b0 * K), TICKETS)
        grid = (shape.grid[0], shape.grid[1], builtins.min(B - b0, MAX_GRID_YZ))
        program.launch(Launch(SOURCE, instance, grid, shape.block), args, PLAN_NAME)


def _first_group(dims: list, reduced: list, itemsize: int) -> tuple[int, ...]:
    """The axes of the reduced group to take first (``reduced``: groups outer first): the
    innermost, unless its runs are contiguous and shorter than :data:`ROWS_FIRST_MIN_BYTES`
    and the axes left beside the outermost group still walk memory in two strides or fewer
    (else they would need a copy first); then the outermost."""
    innermost, outermost = reduced[-1], reduced[0]
    short_rows = abs(innermost[1]) == 1 and innermost[0] * itemsize < ROWS_FIRST_MIN_BYTES
    if short_rows:
        left = merge_axes([d for d in dims if d[2][0] not in outermost[2]])
        if len(left) <= 2:
            return tuple(sorted(outermost[2]))
    return tuple(sorted(innermost[2]))


def plan_partial(program: Program, source: int, shape: tuple, strides: tuple,
                 dtype: numpy.dtype, axes: tuple[int, ...], op: str, acc: numpy.dtype,
                 out: numpy.dtype, multiprocessors: int, resident: Resident | None = None) -> int:
    """Reduce buffer ``source`` (``shape``, element ``strides``) over ``axes``, leaving at least
    one axis longer than 1; return the index of the C-contiguous result buffer of ``out``,
    ``shape`` without ``axes``.

    Reduced axes that do not merge into one stride are reduced a group at a time through
    intermediate buffers of ``acc`` (:func:`_first_group`). ``resident`` (instance, threads)
    -> blocks per SM sizes the splits to one wave (:func:`~.rungs.wave_blocks`).
    """
    dims = [(n, st, (ax,)) for ax, (n, st) in enumerate(zip(shape, strides)) if n != 1]
    reduced = merge_axes(sorted((d for d in dims if d[2][0] in axes), key=lambda d: -abs(d[1])))
    out_shape = tuple(n for ax, n in enumerate(shape) if ax not in axes)
    if len(reduced) > 1:  # e.g. axes (0, 2) of a 3-D array: one of them, then the other
        first = _first_group(dims, reduced, dtype.itemsize)
        middle_shape = tuple(n for ax, n in enumerate(shape) if ax not in first)
        middle = plan_partial(program, source, shape, strides, dtype, first, op, acc, acc,
                              multiprocessors, resident)
        rest = tuple(ax - builtins.sum(i < ax for i in first) for ax in axes if ax not in first)
        return plan_partial(program, middle, middle_shape, c_strides(middle_shape), acc, rest,
                            op, acc, out, multiprocessors, resident)
    kept = merge_axes([d for d in dims if d[2][0] not in axes])
    if len(kept) > 2:  # the kept axes need three strides or more: copy into two
        copied = program.copy(source, dtype)
        return plan_partial(program, copied, shape, c_strides(shape), dtype, axes, op, acc, out,
                            multiprocessors, resident)
    ((R, r_stride, _),) = reduced
    (B, batch_stride, _), (K, k_stride, _) = [(1, 0, ())] * (2 - len(kept)) + kept
    result = program.allocate(out_shape, out)

    def wave(kernel: AxisKernel, threads: int) -> int:
        # A split launch: the folded column kernel writes the result, the row kernel partials.
        written = out if kernel is COLS_FOLDED else acc
        return wave_blocks(kernel.instance(op, dtype, acc, written), threads, multiprocessors,
                           resident)

    plan = _axis_shape(dtype.itemsize, B, K, R, k_stride, r_stride, True, multiprocessors, wave)
    if plan.splits == 1:
        _axis_launch(program, source, result, op, dtype, acc, out, plan, B, K, R, batch_stride,
                     k_stride, r_stride)
        return result
    # Split: (splits, B * K) partials, folded in the same launch by the column kernel, or by one
    # column reduction over them (coalesced) after the row kernel. The column kernel's go to the
    # stream's scratch where they fit and one launch takes every batch: the plan is then one
    # launch into the result, which calls make without the program's buffers (a few us).
    if plan.kernel is COLS:
        room = program.scratch_sizes[0] * SCRATCH_ITEM
        scratch = B <= MAX_GRID_YZ and plan.splits * B * K * acc.itemsize <= room
        folded = PARTIALS if scratch else program.allocate((plan.splits, B * K), acc)
        _axis_launch(program, source, result, op, dtype, acc, out, plan, B, K, R, batch_stride,
                     k_stride, r_stride, folded=folded)
        return result
    partials = program.allocate((plan.splits, B * K), acc)
    _axis_launch(program, source, partials, op, dtype, acc, acc, plan, B, K, R, batch_stride,
                 k_stride, r_stride)
    fold = _axis_shape(acc.itemsize, 1, B * K, plan.splits, 1, B * K, False, multiprocessors)
    _axis_launch(program, partials, result, op, acc, acc, out, fold, 1, B * K, plan.splits, 0, 1,
                 B * K)
    return result
