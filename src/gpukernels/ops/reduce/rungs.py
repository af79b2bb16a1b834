"""The reduction ladder (full reductions): its rungs, their instances and their plans.

sum, prod, min and max share the ladder: every kernel is templated on the operator. A rung's
plan records its launches in a :class:`~.program.Program` for a :class:`Problem`; block sizes
and the other launch numbers are set here and reach the kernels as template arguments.
Reductions that keep some axes go to the row and column kernels of :mod:`.axis` instead.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass

import numpy

from ..._core.compile import KernelSource
from ..._core.ladder import Ladder, Rung
from ..._core.launch import Launch, ceil_div
from . import dtypes
from .program import COUNTER, PARTIALS, Program

__all__ = ["Problem", "LADDER", "ReduceRung", "AUTO", "auto", "blocks_per_wave", "BLOCK",
           "ONE_PASS_BLOCK", "ONE_PASS_WIDE_BLOCK", "one_pass_block", "one_pass_max_blocks",
           "wave_blocks", "Resident"]

SOURCE = KernelSource("reduce/reduce.cu")

BLOCK = 256  # threads per block of two_pass, shuffle and the row kernels (a template argument)
BLOCKS_PER_SM = 8  # BLOCK-thread blocks that fill an SM: enough warps to keep loads in flight
# one_pass reads with two blocks of 1024 threads per SM, two streams of addresses instead of
# eight (2^28 float32 on an H100: 1.010 of cupy.sum, was 0.994; benchmarks/NOTES.md, item 36).
ONE_PASS_BLOCK = 1024
# The mean's accumulator (a float64 sum and a count) leaves room for one block of 1024 threads
# an SM, not two: its one_pass runs blocks of 256, five an SM (H100, held, 2^26 float32: 2501 ->
# 2843 GB/s, 2^28 2707 -> 3052; benchmarks/NOTES.md, items 143 and 145). The arg-reductions'
# gained at 2^26 float32 (2098 -> 2486 GB/s, still under shuffle's wave, which one_pass reads
# there now) but lost 2.4% at 2^28 int32, and var's moments nothing: they keep 1024.
ONE_PASS_WIDE_BLOCK = 256
# one_pass: whole waves of blocks, up to ONE_PASS_WAVES, each block one contiguous segment of at
# least ONE_PASS_MIN_STEPS steps (a word or element per thread each: 128 KiB of 16-byte words),
# so that SMs that run ahead take more blocks; small inputs keep one wave of longer segments.
ONE_PASS_WAVES = 32
ONE_PASS_MIN_STEPS = 8


def blocks_per_wave(threads: int, multiprocessors: int) -> int:
    """Blocks of ``threads`` threads that fill every SM once (BLOCKS_PER_SM * BLOCK threads)."""
    return BLOCKS_PER_SM * BLOCK // threads * multiprocessors


#: (instance, threads) -> blocks of that instance one SM runs at once (on a GPU:
#: :func:`~gpukernels._core.launch.resident_blocks` over this ladder's source or axis.cu's).
Resident = Callable[[str, int], int]


def wave_blocks(instance: str, threads: int, multiprocessors: int,
                resident: Resident | None = None) -> int:
    """Blocks of ``threads`` threads of ``instance`` that fill every SM once: as many as
    ``resident`` says an SM runs, or :func:`blocks_per_wave` where no GPU answers (plans made
    on the CPU). Instances with wide accumulators need more registers than BLOCKS_PER_SM
    blocks leave them (var's float64 moments: up to 100 a thread, two blocks of 256 per SM),
    so a grid of BLOCKS_PER_SM blocks per SM would run as one wave and a fraction."""
    if resident is None:
        return blocks_per_wave(threads, multiprocessors)
    return resident(instance, threads) * multiprocessors


def one_pass_block(op: str) -> int:
    """Threads a block of one_pass for the operator ``op`` (``"SumOp"``, ...)."""
    return ONE_PASS_WIDE_BLOCK if op == "MeanOp" else ONE_PASS_BLOCK


def one_pass_max_blocks(multiprocessors: int) -> int:
    """The most blocks one_pass launches (the partials it needs room for): whole waves of the
    smaller blocks, each SM's threads filled."""
    return ONE_PASS_WAVES * blocks_per_wave(ONE_PASS_WIDE_BLOCK, multiprocessors)


@dataclass(frozen=True)
class Problem:
    """A full reduction: ``n`` elements of buffer ``source``, ``stride`` apart (in elements),
    read as ``read``, combined in ``acc`` with the operator ``op`` (``"SumOp"``, ...), the one
    value written as ``out`` into an array of ``out_shape``."""

    op: str
    n: int
    stride: int
    read: numpy.dtype
    acc: numpy.dtype
    out: numpy.dtype
    out_shape: tuple
    multiprocessors: int
    source: int = 0
    resident: Resident | None = None  # blocks per SM of an instance (wave_blocks)


def _instance(kernel: str, op: str, read: numpy.dtype, acc: numpy.dtype, out: numpy.dtype,
              block: int, strided: bool = False) -> str:
    c = dtypes.KERNEL_C_TYPES
    if strided:  # one_pass's grid-stride wave
        return f"{kernel}<{op}, {c[read]}, {c[acc]}, {c[out]}, {block}, true>"
    return f"{kernel}<{op}, {c[read]}, {c[acc]}, {c[out]}, {block}>"


def _per_thread(p: Problem, vector_loads: bool) -> int:
    """Elements one thread takes per step: a 16-byte word for the vector rungs on contiguous
    input, else one."""
    return builtins.max(1, 16 // p.read.itemsize) if vector_loads and p.stride == 1 else 1


def _two_launches(program: Program, p: Problem, kernel: str, rung: str, per_thread: int) -> int:
    """A wave of blocks writes per-block partials, then one block reduces them (a single block
    when one is enough)."""
    first = _instance(kernel, p.op, p.read, p.acc, p.acc, BLOCK)  # the wave's blocks
    blocks = builtins.min(ceil_div(p.n, BLOCK * per_thread),
                          wave_blocks(first, BLOCK, p.multiprocessors, p.resident))
    result = program.allocate(p.out_shape, p.out)
    if blocks == 1:
        program.launch(Launch(SOURCE, _instance(kernel, p.op, p.read, p.acc, p.out, BLOCK),
                              (1, 1, 1), (BLOCK, 1, 1)),
                       ((p.source, 0), (result, 0), p.n, p.stride), rung)
        return result
    partials = program.allocate((blocks,), p.acc)
    program.launch(Launch(SOURCE, first, (blocks, 1, 1), (BLOCK, 1, 1)),
                   ((p.source, 0), (partials, 0), p.n, p.stride), rung)
    program.launch(Launch(SOURCE, _instance(kernel, p.op, p.acc, p.acc, p.out, BLOCK),
                          (1, 1, 1), (BLOCK, 1, 1)),
                   ((partials, 0), (result, 0), blocks, 1), rung)
    return result


def plan_two_pass(program: Program, p: Problem) -> int:
    return _two_launches(program, p, "reduce_two_pass", "two_pass", 1)


def plan_shuffle(program: Program, p: Problem) -> int:
    return _two_launches(program, p, "reduce_shuffle", "shuffle", _per_thread(p, True))


def one_pass_segments(n: int, step: int, one_wave: int) -> tuple[int, int]:
    """(blocks, segment length in elements) of one_pass over ``n`` elements, ``step`` elements
    per block step, ``one_wave`` blocks filling every SM once: segments of whole steps (a
    block's first word is then as aligned as the input's: segments of whole 16-byte words but
    not whole steps ran 1-3% slower); as many whole waves of blocks as give each block
    ONE_PASS_MIN_STEPS steps or more, at least one and at most ONE_PASS_WAVES. A partial last
    wave of a few blocks would hold the GPU for a whole block's time while most SMs idle, since
    every block has the same work."""
    steps = builtins.max(1, ceil_div(n, step))
    waves = builtins.max(1, builtins.min(ONE_PASS_WAVES, steps // (ONE_PASS_MIN_STEPS * one_wave)))
    segment_steps = ceil_div(steps, builtins.min(steps, waves * one_wave))
    return ceil_div(steps, segment_steps), segment_steps * step


# var's moments and float argmin/argmax where one_pass's segments would take more than one
# wave of blocks: shuffle's grid-stride wave of 256-thread blocks kept them at the memory's
# speed where segments in waves did not (2^28 float32 on an H100, per call, against CUB's sum:
# var shuffle 0.85, one_pass 0.67, with 1024- or 256-thread blocks alike; argmax 0.97 and 0.74,
# torch.argmax 0.97; on int32 argmax both match torch). one_pass reads them as shuffle does
# there, in one launch (2^26 float32 argmax 0.95 -> 1.00 of cupy.sum per call, torch
# 0.96-0.97; NOTES 148, 151). One wave of segments (a block an SM, each over one long
# segment) is the faster below that: on an H200, per call of cupy.sum, var of 2^23 float32
# 0.90 in segments against 0.83 in the wave, and of 2^24, three waves of segments, 0.74
# against 0.91 (NOTES 201).
def strided_kind(op: str, read: numpy.dtype) -> bool:
    """Whether one_pass reads ``op`` over ``read`` items in shuffle's grid-stride wave where its
    segments would take more than one wave of blocks: var's moments and float argmin/argmax,
    whose segments in waves ran below shuffle's wave (NOTES, items 148, 151 and 201)."""
    return op == "MomentsOp" or (op in dtypes.ARG_OPERATORS and read.kind == "f")


def plan_one_pass(program: Program, p: Problem) -> int:
    """Blocks of :func:`one_pass_block` threads over contiguous segments, in whole waves of
    the blocks an SM runs (:func:`wave_blocks`), or for :func:`strided_kind` inputs that would
    take more than one such wave, shuffle's one grid-stride wave of BLOCK-thread blocks; the
    last block to finish folds the partials (one launch)."""
    block = one_pass_block(p.op)
    instance = _instance("reduce_one_pass", p.op, p.read, p.acc, p.out, block)
    one_wave = builtins.min(wave_blocks(instance, block, p.multiprocessors, p.resident),
                            blocks_per_wave(block, p.multiprocessors))
    blocks, segment = one_pass_segments(p.n, block * _per_thread(p, True), one_wave)
    if strided_kind(p.op, p.read) and blocks > one_wave:
        instance = _instance("reduce_one_pass", p.op, p.read, p.acc, p.out, BLOCK, True)
        blocks = builtins.min(ceil_div(p.n, BLOCK * _per_thread(p, True)),
                              wave_blocks(instance, BLOCK, p.multiprocessors, p.resident))
        block, segment = BLOCK, 0
    result = program.allocate(p.out_shape, p.out)
    program.launch(Launch(SOURCE, instance, (blocks, 1, 1), (block, 1, 1)),
                   ((p.source, 0), (result, 0), p.n, p.stride, segment, PARTIALS, COUNTER),
                   "one_pass")
    return result


@dataclass(frozen=True, eq=False)
class ReduceRung(Rung):
    """A rung of the reduction ladder; ``float32_sums_in_float64`` says whether its float32 sums
    accumulate in float64 (see :func:`.dtypes.accumulator`); ``finishes_spreads`` whether it has
    the instances that write var and std of float data in its one launch (``gk_spread``)."""

    float32_sums_in_float64: bool = True
    finishes_spreads: bool = False


def _groups(kernel: str, block: Callable[[str], int], passes: Callable, eager: bool,
            wide: bool = True, strided: bool = False, spreads: bool = False) -> tuple:
    """A group per operator of the instances ``passes(read, acc, out)`` gives, over every
    (read, accumulator, written) triple that operator can plan (``wide``: float32 sums in
    float64; ``spreads``: var and std in one launch, see :func:`.dtypes.reachable`), in blocks
    of ``block(op)`` threads; with ``strided``, one_pass's grid-stride instances too, for
    :func:`strided_kind` inputs."""
    groups = []
    for operation, op in dtypes.OPERATORS.items():
        triples = dtypes.reachable(operation, wide, True, spreads=spreads)
        instances = [_instance(kernel, op, source, acc, out, block(op))
                     for read, acc, written in triples
                     for source, out in passes(read, acc, written)]
        if strided:
            instances += [_instance(kernel, op, read, acc, written, BLOCK, True)
                          for read, acc, written in triples if strided_kind(op, read)]
        groups.append(SOURCE.add(f"{kernel} {operation}", instances,
                                 eager=eager and op in dtypes.EAGER_OPERATORS))
    return tuple(groups)


def _two_launch_passes(read, acc, written):
    """One block straight to the result; or partials, then the partials to the result."""
    return ((read, written), (read, acc), (acc, written))


LADDER = Ladder("reduce", (
    ReduceRung("two_pass",
               "grid-stride register sums, shared-memory tree, second launch over partials",
               SOURCE, "reduce_two_pass",
               _groups("reduce_two_pass", lambda op: BLOCK, _two_launch_passes, eager=False, wide=False),
               plan_two_pass, float32_sums_in_float64=False),
    ReduceRung("shuffle",
               "16-byte loads and warp shuffles (one barrier per block); still two launches",
               SOURCE, "reduce_shuffle",
               _groups("reduce_shuffle", lambda op: BLOCK, _two_launch_passes, eager=False),
               plan_shuffle),
    ReduceRung("one_pass",
               "a contiguous segment per block, up to 32 waves (shuffle's grid-stride wave "
               "for var and float argmin/argmax past one wave); the last block folds the "
               "partials: a single launch",
               SOURCE, "reduce_one_pass",
               _groups("reduce_one_pass", one_pass_block,
                       lambda read, acc, written: ((read, written),), eager=True,
                       strided=True, spreads=True),
               plan_one_pass, finishes_spreads=True),
))
#: ``method="auto"`` for full reductions.
AUTO = LADDER["one_pass"]


def auto(op: str, n: int, dtype: numpy.dtype) -> ReduceRung:
    """The rung ``method="auto"`` runs for a full reduction: one_pass, whose plan reads var's
    moments and float argmin/argmax in shuffle's grid-stride wave where its segments would take
    more than one wave of blocks (:func:`strided_kind`)."""
    return AUTO  # type: ignore[return-value]
