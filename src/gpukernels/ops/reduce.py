"""Reductions with NumPy semantics: :func:`sum`, :func:`prod`, :func:`min`, :func:`max`.

All four share one ladder of kernels for full reductions (``gpukernels.methods("reduce")``),
templated on the operator. Reductions over some axes (``axis=0`` of a matrix, say) go to the
row and column kernels of ``kernels/reduce_axis.cu``, whichever rung is asked for.
"""

from __future__ import annotations

import builtins
import functools
import math
import operator
import threading
from typing import Any

import numpy

from .. import _compile, _device
from .._common import (MAX_GRID_YZ, Rung, ceil_div, finish_out, launch, multiprocessor_count,
                       prepare_out, register_ladder, resolve_method)

__all__ = ["sum", "prod", "min", "max", "RUNGS", "KERNELS", "AXIS_KERNELS", "sum_result_dtype",
           "reduction_result_dtype", "normalize_axis"]

#: The ladder, bottom rung first; every reduction operation uses it.
RUNGS = register_ladder("reduce", (
    Rung("two_pass", "grid-stride register sums, shared-memory tree, second launch over partials"),
    Rung("shuffle", "16-byte loads and warp shuffles (one barrier per block); still two launches"),
    Rung("one_pass", "a contiguous segment per block, up to 32 waves; the last block folds the "
                     "partials: a single launch"),
))
OPERATORS = {"sum": "SumOp", "prod": "ProdOp", "min": "MinOp", "max": "MaxOp"}
for _name in OPERATORS:
    register_ladder(_name, RUNGS)

BLOCK = 256  # threads per block of two_pass, shuffle and the row kernels (a template argument)
BLOCKS_PER_SM = 8  # BLOCK-thread blocks that fill an SM: enough warps to keep loads in flight
# Larger blocks where they measured faster (benchmarks/NOTES.md, item 36): one_pass reads with
# two blocks of 1024 threads per SM, two streams of addresses instead of eight (2^28 float32 on
# an H100: 1.010 of cupy.sum, was 0.994), and unsplit column reductions run 512 threads, so that
# 256 columns side by side get two threads each (P in reduce_axis.cu) instead of one.
ONE_PASS_BLOCK = 1024
COLS_BLOCK = 512
COLS_TILE = 256  # columns side by side in a column block, at most
# one_pass: whole waves of blocks, up to ONE_PASS_WAVES, each block one contiguous segment of at
# least ONE_PASS_MIN_STEPS steps (a word or element per thread each: 128 KiB of 16-byte words),
# so that SMs that run ahead take more blocks; small inputs keep one wave of longer segments.
ONE_PASS_WAVES = 32
ONE_PASS_MIN_STEPS = 8


def _block_threads(kernel: str) -> int:
    """Threads per block of a reduction kernel (a rung or an axis kernel kind)."""
    return {"one_pass": ONE_PASS_BLOCK, "cols": COLS_BLOCK}.get(kernel, BLOCK)


def _blocks_per_wave(threads: int) -> int:
    """Blocks of ``threads`` threads that fill every SM once (BLOCKS_PER_SM * BLOCK threads)."""
    return BLOCKS_PER_SM * BLOCK // threads * multiprocessor_count()


_C_TYPES = {
    numpy.dtype(numpy.bool_): "bool",
    numpy.dtype(numpy.int8): "signed char",
    numpy.dtype(numpy.int16): "short",
    numpy.dtype(numpy.int32): "int",
    numpy.dtype(numpy.int64): "long long",
    numpy.dtype(numpy.uint8): "unsigned char",
    numpy.dtype(numpy.uint16): "unsigned short",
    numpy.dtype(numpy.uint32): "unsigned int",
    numpy.dtype(numpy.uint64): "unsigned long long",
    numpy.dtype(numpy.float16): "gk_half",
    numpy.dtype(numpy.float32): "float",
    numpy.dtype(numpy.float64): "double",
    numpy.dtype(numpy.complex64): "gk_complex<float>",
    numpy.dtype(numpy.complex128): "gk_complex<double>",
}
_I64, _U64, _F32, _F64 = (numpy.dtype(t) for t in (numpy.int64, numpy.uint64, numpy.float32,
                                                   numpy.float64))
_C64, _C128 = numpy.dtype(numpy.complex64), numpy.dtype(numpy.complex128)
_INTEGER_LIKE = [d for d in _C_TYPES if d.kind in "biu"]
_FLOAT16 = numpy.dtype(numpy.float16)

# The (input, accumulator) pairs with a kernel instance, per operator. Integers accumulate in
# uint64 for sum and prod, where overflow wraps; truncating to the result width then gives
# NumPy's wrap-around for any integer result dtype. float16 accumulates in float32. min and max
# compare in the input's own type (float16 in float32, exactly). Everything else is first cast
# to the result dtype, as NumPy does (see _plan).
_ACC_PAIRS = {
    "SumOp": ([(d, _U64) for d in _INTEGER_LIKE]
              + [(_FLOAT16, _F32), (_F32, _F32)]
              + [(d, _F64) for d in _INTEGER_LIKE + [_FLOAT16, _F32, _F64]]
              + [(_C64, _C64), (_C128, _C128)]),
    "ProdOp": ([(d, _U64) for d in _INTEGER_LIKE]
               + [(_FLOAT16, _F32), (_F32, _F32), (_F64, _F64), (_C64, _C64), (_C128, _C128)]),
    "MinOp": [(d, d) for d in _INTEGER_LIKE] + [(_FLOAT16, _F32), (_F32, _F32), (_F64, _F64)],
}
_ACC_PAIRS["MaxOp"] = _ACC_PAIRS["MinOp"]


def _outputs(op: str, in_dtype: numpy.dtype, acc_dtype: numpy.dtype) -> tuple:
    """The output dtypes a kernel reading ``in_dtype`` into ``acc_dtype`` can write: the
    accumulator, or a result dtype one conversion away, so that no cast launch follows."""
    outputs = (acc_dtype,)
    if acc_dtype == _F32:
        outputs += (_FLOAT16,)  # float16 results accumulated in float32
    if op == "SumOp" and acc_dtype == _F64 and in_dtype in (_F32, _F64):
        outputs += (_F32,)  # float32 sums accumulated in float64
    return outputs


def _full_outputs(op: str, in_dtype: numpy.dtype, acc_dtype: numpy.dtype) -> tuple:
    """:func:`_outputs`, and int64 for sums and products of signed integers and bool (their
    default result: the uint64 accumulator's bits, as NumPy's wrap-around gives them), read
    from the input or from uint64 partials."""
    signed = in_dtype.kind in "bi" or in_dtype == _U64
    return _outputs(op, in_dtype, acc_dtype) + (
        (_I64,) if op in ("SumOp", "ProdOp") and acc_dtype == _U64 and signed else ())


def _kernel_name(method: str, op: str, in_dtype: numpy.dtype, acc_dtype: numpy.dtype,
                 out_dtype: numpy.dtype) -> str:
    return (f"reduce_{method}<{op}, {_C_TYPES[in_dtype]}, {_C_TYPES[acc_dtype]}, "
            f"{_C_TYPES[out_dtype]}, {_block_threads(method)}>")


def _full_instances() -> list[str]:
    # Each (input, accumulator) pair writing every output it can, and the second pass of the
    # two-launch rungs: (accumulator, accumulator) over the partials.
    names = set()
    for rung in RUNGS:
        for op, pairs in _ACC_PAIRS.items():
            for in_dtype, acc_dtype in pairs:
                for source in (in_dtype, acc_dtype):
                    names.update(_kernel_name(rung.name, op, source, acc_dtype, out_dtype)
                                 for out_dtype in _full_outputs(op, source, acc_dtype))
    return sorted(names)


KERNELS = _compile.register("reduce.cu", _full_instances())


# Axis reductions (kernels/reduce_axis.cu): three kernels, each for every (input, accumulator)
# pair above and for (accumulator, accumulator), which reads the partials of a split reduction.
# They write the accumulator type, or the result dtype where that is one rounding away.
AXIS_KINDS = ("rows", "short_rows", "cols", "cols_folded")
SHORT_ROW = 16  # rows up to this length get a thread each instead of a warp


def _axis_kernel_name(kind: str, op: str, in_dtype, acc_dtype, out_dtype) -> str:
    return (f"reduce_{kind}<{op}, {_C_TYPES[in_dtype]}, {_C_TYPES[acc_dtype]}, "
            f"{_C_TYPES[out_dtype]}, {_block_threads(kind)}>")


def _axis_instances() -> list[str]:
    names = set()
    for op, pairs in _ACC_PAIRS.items():
        for in_dtype, acc_dtype in pairs:
            for source in (in_dtype, acc_dtype):
                for out_dtype in _outputs(op, source, acc_dtype):
                    names.update(_axis_kernel_name(kind, op, source, acc_dtype, out_dtype)
                                 for kind in AXIS_KINDS)
    return sorted(names)


AXIS_KERNELS = _compile.register("reduce_axis.cu", _axis_instances())


@functools.lru_cache(maxsize=1024)
def _cached_result_dtype(operation: str, dtype: numpy.dtype, requested: Any) -> numpy.dtype:
    return _result_dtype(operation, dtype, requested)


def reduction_result_dtype(operation: str, dtype: numpy.dtype, requested: Any = None) -> numpy.dtype:
    """NumPy's result dtype for ``numpy.<operation>(x, dtype=requested)`` where ``x`` has ``dtype``.

    Asks NumPy itself on a one-element array, so the rules (int32 -> int64, uint8 -> uint64,
    bool -> int64 for sum and prod, float16 stays float16, min and max keep the input's dtype)
    and the errors for impossible requests are NumPy's. Answers are cached: asking NumPy takes
    microseconds, a visible share of a small reduction.
    """
    try:
        return _cached_result_dtype(operation, dtype, requested)
    except TypeError as error:
        if "unhashable" not in str(error):
            raise
        return _result_dtype(operation, dtype, requested)


def _result_dtype(operation: str, dtype: numpy.dtype, requested: Any = None) -> numpy.dtype:
    if dtype.kind not in "biufc":
        raise TypeError(f"{operation} supports bool, integer, float and complex dtypes, not {dtype}")
    if operation in ("min", "max"):
        if requested is not None:
            raise TypeError(f"{operation} has no dtype argument; it keeps the input's dtype")
        if dtype.kind == "c":
            raise TypeError(f"{operation} of complex numbers is not supported; compare .real "
                            "and .imag explicitly")
        if dtype not in _C_TYPES:
            raise TypeError(f"{operation} does not support dtype {dtype}")
        return dtype
    if requested is not None and numpy.dtype(requested).kind not in "biufc":
        raise TypeError(f"{operation} cannot produce dtype {numpy.dtype(requested)}")
    result = getattr(numpy, operation)(numpy.ones(1, dtype=dtype), dtype=requested).dtype
    if result not in _C_TYPES:
        raise TypeError(f"{operation} cannot produce dtype {result}")
    return result


def sum_result_dtype(dtype: numpy.dtype, requested: Any = None) -> numpy.dtype:
    """NumPy's result dtype for ``numpy.sum(x, dtype=requested)``; see :func:`reduction_result_dtype`."""
    return reduction_result_dtype("sum", dtype, requested)


def _plan(op: str, method: str, in_dtype: numpy.dtype, result_dtype: numpy.dtype):
    """(dtype the kernel reads, accumulator dtype) for a reduction of ``in_dtype`` to ``result_dtype``.

    When the reading dtype differs from ``in_dtype`` the input is cast to it first, which is what
    NumPy does for such requests (e.g. float64 data summed with dtype=float32). The shuffle and
    one_pass rungs sum float32 in float64: more accurate than NumPy's pairwise float32 sum, at no
    cost to a memory-bound kernel.
    """
    kind = result_dtype.kind
    if op in ("MinOp", "MaxOp"):
        return in_dtype, (_F32 if in_dtype == _FLOAT16 else in_dtype)
    if kind == "b":
        return result_dtype, _U64  # NumPy casts to bool first; sum/prod of 0/1 is nonzero iff any/all
    if kind in "iu":
        return (in_dtype if in_dtype.kind in "biu" else result_dtype), _U64
    if op == "SumOp":
        if result_dtype == _F64 and in_dtype.kind in "biuf":
            return in_dtype, _F64
        if result_dtype == _F32 and in_dtype == _F32 and method != "two_pass":
            return in_dtype, _F64
    if result_dtype == _F32 and in_dtype == _FLOAT16:
        return in_dtype, _F32
    if kind == "f":
        return result_dtype, (_F32 if result_dtype.itemsize <= 4 else _F64)
    return result_dtype, result_dtype  # complex


def normalize_axis(axis: Any, ndim: int) -> tuple[int, ...]:
    """``axis`` (None, int or tuple of ints) as sorted non-negative axes, NumPy's errors."""
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, tuple) else (axis,)
    normalized = []
    for ax in axes:
        try:
            ax = operator.index(ax)
        except TypeError:
            raise TypeError(f"axis must be an integer or a tuple of integers, not {axis!r}") from None
        if not -ndim <= ax < ndim:
            raise numpy.exceptions.AxisError(ax, ndim)
        normalized.append(ax % ndim)
    if len(set(normalized)) != len(normalized):
        raise ValueError("duplicate value in 'axis'")
    return tuple(sorted(normalized))


# one_pass needs a block counter that is 0 at launch and a buffer for the per-block partials,
# neither shared by launches that may run concurrently: one pair per (device, stream), reused by
# every launch there (launches on one stream run in order). Each launch leaves the counter at 0.
_scratch: dict[tuple[int, int], tuple] = {}
_scratch_lock = threading.Lock()
_SCRATCH_ITEM = 16  # bytes per partial: room for the widest accumulator (complex128)


def _one_pass_max_blocks() -> int:
    return ONE_PASS_WAVES * _blocks_per_wave(ONE_PASS_BLOCK)


def _one_pass_segments(n: int, step: int) -> tuple[int, int]:
    """(blocks, segment length in elements) of one_pass over ``n`` elements, ``step`` elements
    per block step: segments of whole steps (a block's first word is then as aligned as the
    input's: segments of whole 16-byte words but not whole steps ran 1-3% slower); as many
    whole waves of blocks as give each block ONE_PASS_MIN_STEPS steps or more, at least one
    and at most ONE_PASS_WAVES. A partial last wave of a few blocks would hold the GPU for a
    whole block's time while most SMs idle, since every block has the same work."""
    steps = builtins.max(1, ceil_div(n, step))
    one_wave = _blocks_per_wave(ONE_PASS_BLOCK)
    waves = builtins.max(1, builtins.min(ONE_PASS_WAVES, steps // (ONE_PASS_MIN_STEPS * one_wave)))
    segment_steps = ceil_div(steps, builtins.min(steps, waves * one_wave))
    return ceil_div(steps, segment_steps), segment_steps * step


def _one_pass_scratch() -> tuple:
    """(counter, partials, tickets) of the current device and stream: one_pass's block counter
    and partials (raw bytes), and reduce_cols_folded's tickets, one per column tile."""
    cupy = _device.cupy
    key = (cupy.cuda.runtime.getDevice(), cupy.cuda.get_current_stream().ptr)
    scratch = _scratch.get(key)
    if scratch is None:
        with _scratch_lock:
            scratch = _scratch.get(key)
            if scratch is None:
                partials = cupy.empty(_one_pass_max_blocks() * _SCRATCH_ITEM, dtype=numpy.uint8)
                # A column plan splits only while it has fewer blocks per split than SMs (see
                # _axis_plan), so reduce_cols_folded's column tiles always have a ticket.
                tickets = cupy.zeros(multiprocessor_count(), dtype=numpy.uint32)
                scratch = _scratch[key] = (cupy.zeros(1, dtype=numpy.uint32), partials, tickets)
    return scratch


class _Program:
    """The launches of one reduction, planned once per input layout and replayed.

    Planning (result dtype, axes, layouts, grids, kernel names) costs tens of microseconds of
    Python, as much as the kernels of a 10**7-element reduction. A program records it as steps
    over numbered buffers: buffer 0 is the input, the others are allocated when the program
    runs; :meth:`run` only allocates and launches.
    """

    def __init__(self, source_dtype: numpy.dtype):
        self.buffers: list[tuple[tuple, numpy.dtype] | None] = [None]  # (shape, dtype); 0: input
        self.steps: list = []
        self.source_dtype = source_dtype

    def allocate(self, shape: tuple, dtype: numpy.dtype) -> int:
        self.buffers.append((tuple(shape), numpy.dtype(dtype)))
        return len(self.buffers) - 1

    def copy(self, source: int, dtype: numpy.dtype) -> int:
        """A C-contiguous copy of buffer ``source`` in ``dtype``."""
        target = len(self.buffers)
        self.buffers.append(None)
        self.steps.append(("copy", source, target, numpy.dtype(dtype)))
        return target

    def launch(self, family, name: str, grid: tuple, block: tuple, args: tuple) -> None:
        """``args``: ints become int64 scalars; ``(buffer, offset)`` pairs, _COUNTER,
        _PARTIALS and _TICKETS are filled in when the program runs."""
        fixed, filled = [], []
        for position, arg in enumerate(args):
            if isinstance(arg, tuple) or arg in _SCRATCH_ARGS:
                filled.append((position, arg))
                arg = None
            elif isinstance(arg, int):
                arg = numpy.int64(arg)
            fixed.append(arg)
        self.steps.append(("launch", family, name, grid, block, fixed, tuple(filled), []))

    def run(self, x, result_index: int):
        cupy = _device.cupy
        buffers = [x] + [None if spec is None else cupy.empty(spec[0], dtype=spec[1])
                         for spec in self.buffers[1:]]
        scratch = None  # one_pass's (counter, partials), fetched when a step needs them
        for step in self.steps:
            if step[0] == "copy":
                _, source, target, dtype = step
                buffers[target] = buffers[source].astype(dtype, order="C", copy=False)
                continue
            _, family, name, grid, block, fixed, filled, kernel = step
            if not kernel:  # fetched once: a program belongs to one device
                kernel.append(family.function(name))
            args = list(fixed)
            for position, arg in filled:
                if arg in _SCRATCH_ARGS:
                    if scratch is None:
                        scratch = _one_pass_scratch()
                    args[position] = scratch[_SCRATCH_ARGS.index(arg)]
                elif arg[1]:  # an element offset into a buffer
                    array = buffers[arg[0]]
                    args[position] = cupy.ndarray((1,), array.dtype,
                                                  memptr=array.data + arg[1] * array.itemsize)
                else:
                    args[position] = buffers[arg[0]]
            launch(kernel[0], grid, block, tuple(args))
        return buffers[result_index]


# Stand-ins in a program's launch arguments for one_pass's block counter and partials, and
# reduce_cols_folded's tickets (per device and stream, see _one_pass_scratch, in that order).
_COUNTER = object()
_PARTIALS = object()
_TICKETS = object()
_SCRATCH_ARGS = (_COUNTER, _PARTIALS, _TICKETS)


def _plan_full(program: _Program, shape: tuple, strides: tuple, method: str, op: str,
               read_dtype: numpy.dtype, acc_dtype: numpy.dtype, out_dtype: numpy.dtype,
               out_shape: tuple) -> int:
    """Reduce buffer 0 (``shape``, element ``strides``) to one element of ``out_dtype`` in an
    array of ``out_shape``; its buffer index."""
    n = math.prod(shape)
    dims = _merge_axes([(length, stride, ()) for length, stride in zip(shape, strides)
                        if length != 1])
    source = 0
    if program.source_dtype != read_dtype or len(dims) > 1:
        source, stride = program.copy(0, read_dtype), 1  # reshape(-1) would copy too
    else:
        stride = dims[0][1] if dims else 1
    per_thread = 1  # elements one thread takes per step: a 16-byte word for the vector rungs
    if method != "two_pass" and stride == 1:
        per_thread = builtins.max(1, 16 // read_dtype.itemsize)
    blocks = builtins.min(ceil_div(n, BLOCK * per_thread), _blocks_per_wave(BLOCK))
    result = program.allocate(out_shape, out_dtype)
    if method == "one_pass":
        blocks, segment = _one_pass_segments(n, ONE_PASS_BLOCK * per_thread)
        program.launch(KERNELS, _kernel_name(method, op, read_dtype, acc_dtype, out_dtype),
                       (blocks, 1, 1), (ONE_PASS_BLOCK, 1, 1),
                       ((source, 0), (result, 0), n, stride, segment, _PARTIALS, _COUNTER))
    elif blocks == 1:
        program.launch(KERNELS, _kernel_name(method, op, read_dtype, acc_dtype, out_dtype),
                       (1, 1, 1), (BLOCK, 1, 1), ((source, 0), (result, 0), n, stride))
    else:
        partials = program.allocate((blocks,), acc_dtype)
        program.launch(KERNELS, _kernel_name(method, op, read_dtype, acc_dtype, acc_dtype),
                       (blocks, 1, 1), (BLOCK, 1, 1), ((source, 0), (partials, 0), n, stride))
        program.launch(KERNELS, _kernel_name(method, op, acc_dtype, acc_dtype, out_dtype),
                       (1, 1, 1), (BLOCK, 1, 1), ((partials, 0), (result, 0), blocks, 1))
    return result


def _merge_axes(dims: list[tuple[int, int, tuple]]) -> list[tuple[int, int, tuple]]:
    """Merge neighbouring (length, stride, axes) dims that walk memory as one: outer first."""
    merged: list[tuple[int, int, tuple]] = []
    for length, stride, axes in dims:
        if merged and merged[-1][1] == stride * length:
            merged[-1] = (merged[-1][0] * length, stride, merged[-1][2] + axes)
        else:
            merged.append((length, stride, axes))
    return merged


def _next_power_of_two(n: int) -> int:
    return 1 << (n - 1).bit_length()


def _splits_in_one_wave(filling_blocks: int, blocks_per_split: int) -> int:
    """The most splits whose blocks all fit in one wave: a second, partial wave would hold the
    GPU for a whole block's time with few blocks running ((256, 256, 256) float32 over axis 1
    on an H100, when it was split: 5 splits, 1.2 waves, 32.9 us; 4 splits 30.1 us)."""
    return builtins.max(1, filling_blocks // blocks_per_split)


def _axis_plan(itemsize: int, B: int, K: int, R: int, k_stride: int, r_stride: int,
               may_split: bool) -> tuple:
    """(kernel kind, grid, block, split length) for the (B, K, R) view of an axis reduction.

    The kernel is the one whose threads read neighbouring elements (see reduce_axis.cu). With
    ``may_split``, R is cut into parts (gridDim.y) when the rows or columns alone are too few to
    fill the GPU; each part then gives a partial, and the caller folds them.
    """
    if abs(r_stride) <= abs(k_stride) and R > SHORT_ROW:
        kind, block = "rows", (BLOCK, 1, 1)
        column_blocks = ceil_div(K, BLOCK // 32)
        per_word = 16 // itemsize if r_stride == 1 and itemsize <= 16 else 1
        # Enough warps to fill the GPU, each lane with four 16-byte words or more; parts start
        # on 16-byte boundaries when the rows do. Half a wave of blocks or more stays whole: a
        # second launch would cost more than it gives.
        filling_blocks = _blocks_per_wave(BLOCK)
        splits = builtins.min(_splits_in_one_wave(filling_blocks, column_blocks * B),
                              ceil_div(R, 32 * per_word * 4))
        if column_blocks * B * 2 >= filling_blocks:
            splits = 1
        unit = per_word
    elif abs(r_stride) <= abs(k_stride):
        kind, block, column_blocks = "short_rows", (BLOCK, 1, 1), ceil_div(K, BLOCK)
        splits, unit = 1, 1
    else:
        kind, unit = "cols", 1
        columns = builtins.min(COLS_TILE, _next_power_of_two(K))
        column_blocks = ceil_div(K, columns)
        if column_blocks * B >= multiprocessor_count():
            # A block on every SM: no split, since folding the splits costs more than the loads
            # in flight they add ((256, 256, 256) float32 over axis 1 on an H100: 4 splits
            # folded 30.2 us, unsplit 31.0 us with 256 threads, 26.9 us with 512; torch.sum
            # 27.4 us). COLS_BLOCK threads give columns of 256 two threads each (P).
            block, splits = (columns, COLS_BLOCK // columns, 1), 1
        else:
            # Splits of BLOCK-thread blocks that fill one wave, each thread with four steps of
            # eight rows or more ((8192, 8192) over axis 0: 32 column blocks, 33 splits).
            block = (columns, BLOCK // columns, 1)
            splits = builtins.min(_splits_in_one_wave(_blocks_per_wave(BLOCK), column_blocks * B),
                                  ceil_div(R, 32 * block[1]))
    if not may_split:
        splits = 1
    splits = builtins.max(1, builtins.min(splits, MAX_GRID_YZ))
    split = ceil_div(ceil_div(R, splits), unit) * unit
    return kind, (column_blocks, ceil_div(R, split), builtins.min(B, MAX_GRID_YZ)), block, split


def _axis_launch(program: _Program, source: int, target: int, op: str, in_dtype, acc_dtype,
                 out_dtype, plan: tuple, B: int, K: int, R: int, batch_stride: int,
                 k_stride: int, r_stride: int, folded: int | None = None) -> None:
    """Record the planned axis kernel: buffer ``target`` gets splits x B x K values, or with
    ``folded`` (a (splits, B * K) buffer for the partials; "cols" plans only) B x K values
    from reduce_cols_folded."""
    kind, grid, block, split = plan
    if folded is not None:
        kind = "cols_folded"
    name = _axis_kernel_name(kind, op, in_dtype, acc_dtype, out_dtype)
    for b0 in range(0, B, MAX_GRID_YZ):  # gridDim.z: at most 65535 batches a launch
        args = ((source, b0 * batch_stride), (target, b0 * K), K, R, batch_stride, k_stride,
                r_stride, split, B * K)
        if folded is not None:
            args += ((folded, b0 * K), _TICKETS)
        program.launch(AXIS_KERNELS, name, (grid[0], grid[1], builtins.min(B - b0, MAX_GRID_YZ)),
                       block, args)


def _plan_partial(program: _Program, source: int, shape: tuple, strides: tuple, dtype,
                  axes: tuple[int, ...], op: str, acc_dtype, out_dtype) -> int:
    """Reduce buffer ``source`` (``shape``, element ``strides``) over ``axes``, leaving at least
    one axis longer than 1; return the index of the C-contiguous result buffer of ``out_dtype``,
    ``shape`` without ``axes``.

    Reduced axes that do not merge into one stride are reduced a group at a time, the
    innermost first, through intermediate buffers of ``acc_dtype``.
    """
    dims = [(n, st, (ax,)) for ax, (n, st) in enumerate(zip(shape, strides)) if n != 1]
    reduced = _merge_axes(sorted((d for d in dims if d[2][0] in axes), key=lambda d: -abs(d[1])))
    out_shape = tuple(n for ax, n in enumerate(shape) if ax not in axes)
    if len(reduced) > 1:  # e.g. axes (0, 2) of a 3-D array: reduce axis 2, then axis 0
        inner = tuple(sorted(reduced[-1][2]))
        middle_shape = tuple(n for ax, n in enumerate(shape) if ax not in inner)
        middle = _plan_partial(program, source, shape, strides, dtype, inner, op, acc_dtype,
                               acc_dtype)
        rest = tuple(ax - builtins.sum(i < ax for i in inner) for ax in axes if ax not in inner)
        return _plan_partial(program, middle, middle_shape, _c_strides(middle_shape), acc_dtype,
                             rest, op, acc_dtype, out_dtype)
    kept = _merge_axes([d for d in dims if d[2][0] not in axes])
    if len(kept) > 2:  # the kept axes need three strides or more: copy into two
        copied = program.copy(source, dtype)
        return _plan_partial(program, copied, shape, _c_strides(shape), dtype, axes, op,
                             acc_dtype, out_dtype)
    ((R, r_stride, _),) = reduced
    (B, batch_stride, _), (K, k_stride, _) = [(1, 0, ())] * (2 - len(kept)) + kept
    result = program.allocate(out_shape, out_dtype)
    plan = _axis_plan(dtype.itemsize, B, K, R, k_stride, r_stride, may_split=True)
    splits = plan[1][1]
    if splits == 1:
        _axis_launch(program, source, result, op, dtype, acc_dtype, out_dtype, plan, B, K, R,
                     batch_stride, k_stride, r_stride)
        return result
    # Split: (splits, B * K) partials, folded in the same launch by the column kernel, or by one
    # column reduction over them (coalesced) after the row kernel.
    partials = program.allocate((splits, B * K), acc_dtype)
    if plan[0] == "cols":
        _axis_launch(program, source, result, op, dtype, acc_dtype, out_dtype, plan, B, K, R,
                     batch_stride, k_stride, r_stride, folded=partials)
        return result
    _axis_launch(program, source, partials, op, dtype, acc_dtype, acc_dtype, plan, B, K, R,
                 batch_stride, k_stride, r_stride)
    fold = _axis_plan(acc_dtype.itemsize, 1, B * K, splits, 1, B * K, may_split=False)
    _axis_launch(program, partials, result, op, acc_dtype, acc_dtype, out_dtype, fold, 1, B * K,
                 splits, 0, 1, B * K)
    return result


def _c_strides(shape: tuple) -> tuple:
    """Element strides of a C-contiguous array of ``shape``."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= builtins.max(n, 1)
    return tuple(reversed(strides))


# Programs already planned: key -> (result dtype, out shape, program, result buffer). Bounded,
# since a long session may see many layouts; planning again costs only host time.
_PROGRAMS: dict[tuple, tuple] = {}
_MAX_PROGRAMS = 4096


def _make_program(operation: str, op: str, x, axis: Any, dtype: Any, keepdims: bool,
                  method: str) -> tuple:
    """Validate a reduction of ``x`` and plan it: (result dtype, out shape, program or None,
    result buffer). A program of None marks the inputs that need no kernel (empty inputs,
    reductions over length-1 axes only)."""
    result_dtype = reduction_result_dtype(operation, x.dtype, dtype)
    axes = normalize_axis(axis, x.ndim)
    kept = [length for ax, length in enumerate(x.shape) if ax not in axes]
    reduced = [length for ax, length in enumerate(x.shape) if ax in axes]
    full = builtins.all(length == 1 for length in kept)  # one output element: a full reduction
    nothing = builtins.all(length == 1 for length in reduced)  # each output is one input element
    method = resolve_method(operation, method, auto="one_pass")
    out_shape = tuple(1 if ax in axes else length for ax, length in enumerate(x.shape)) \
        if keepdims else tuple(kept)
    if x.size == 0 and op in ("MinOp", "MaxOp") and builtins.any(n == 0 for n in reduced):
        raise ValueError(f"zero-size array to reduction operation {operation}imum which has no "
                         "identity")
    if x.size == 0 or (nothing and not full):
        return result_dtype, out_shape, None, None
    strides = tuple(st // x.itemsize for st in x.strides)
    if full:
        read_dtype, acc_dtype = _plan(op, method, x.dtype, result_dtype)
        writes = result_dtype if result_dtype in _full_outputs(op, read_dtype, acc_dtype) \
            else acc_dtype
        program = _Program(x.dtype)
        result = _plan_full(program, x.shape, strides, method, op, read_dtype, acc_dtype, writes,
                            out_shape)
        return result_dtype, out_shape, program, result
    # The axis kernels read any strides, in the dtype the rungs above the seed's read (float32
    # sums accumulate in float64), and write the result dtype when it is one rounding away.
    read_dtype, acc_dtype = _plan(op, "one_pass", x.dtype, result_dtype)
    program = _Program(x.dtype)
    source = 0
    if read_dtype != x.dtype:
        source, strides = program.copy(0, read_dtype), _c_strides(x.shape)
    writes = result_dtype if result_dtype in _outputs(op, read_dtype, acc_dtype) \
        else acc_dtype
    result = _plan_partial(program, source, x.shape, strides, read_dtype, axes, op, acc_dtype,
                           writes)
    return result_dtype, out_shape, program, result


def _axis_key(axis: Any):
    """``axis`` as part of a plan's cache key: None, an int or a tuple of ints, exactly. Anything
    else raises TypeError, so it is validated by planning on every call (``axis=1.0`` equals
    ``axis=1`` as a key, but NumPy refuses it)."""
    if axis is None or type(axis) is int or \
            (type(axis) is tuple and builtins.all(type(ax) is int for ax in axis)):
        return axis
    raise TypeError("not a cacheable axis")


def _reduce(operation: str, x: Any, axis: Any, dtype: Any, keepdims: bool, method: str, out: Any):
    """The body shared by :func:`sum`, :func:`prod`, :func:`min` and :func:`max`."""
    op = OPERATORS[operation]
    # 1. Validate (and plan, once per layout: see _Program).
    x = _device.as_device_array(x, "x")
    device = x.device
    try:
        key = (operation, x.shape, x.strides, x.dtype, _axis_key(axis), dtype, keepdims, method,
               device.id)
        planned = _PROGRAMS.get(key)
    except TypeError:  # an unhashable axis or dtype (a list), or an axis of another type: plan
        # (and validate) every time
        key, planned = None, None
    if planned is None:
        if x.strides and builtins.any(st % x.itemsize for st in x.strides):
            x = _device.cupy.ascontiguousarray(x)  # strides the kernels cannot express
            key = None
        planned = _make_program(operation, op, x, axis, dtype, keepdims, method)
        if key is not None:
            if len(_PROGRAMS) >= _MAX_PROGRAMS:
                _PROGRAMS.clear()
            _PROGRAMS[key] = planned
    result_dtype, out_shape, program, result_index = planned
    if out is not None:
        prepare_out(out, out_shape, result_dtype, device.id, (x,), casting="unsafe")

    with device:
        cupy = _device.cupy
        if program is None:
            if x.size == 0:  # the identity of + or *, or an empty result
                fill = cupy.ones if op == "ProdOp" else cupy.zeros
                return finish_out(fill(out_shape, dtype=result_dtype), out, direct=False)
            # Reductions over length-1 axes only: NumPy's result is the input in the result dtype
            return finish_out(x.astype(result_dtype).reshape(out_shape), out, direct=False)
        # 2. Allocate and 3. launch, as planned.
        result = _to_result(program.run(x, result_index), result_dtype)
        if result.shape != out_shape:
            result = result.reshape(out_shape)
    return finish_out(result, out, direct=False)


def _to_result(total, result_dtype: numpy.dtype):
    """Accumulator values as NumPy's result dtype: integers truncated (wrap-around), bool as != 0."""
    if result_dtype.kind == "b" and total.dtype != result_dtype:
        return total != 0
    if total.dtype == result_dtype:
        return total
    if total.dtype == _U64:
        total = total.view(numpy.int64)  # same bits; astype truncates to the result width
    return total.astype(result_dtype, copy=False)


_PARAMETERS = """
    Parameters
    ----------
    x : cupy.ndarray or GPU array
        Input of a bool, integer, float{complex} dtype, any shape and strides.
    axis : None, int or tuple of ints, optional
        Axes to reduce (negative ones count from the end); ``None`` reduces all of them.
        Reductions that keep some axes use the row kernels when the reduced axes are the
        faster-varying ones in memory (a warp per row, a thread per row of up to 16
        elements) and the column kernel otherwise (a thread per kept element, accumulating
        down the rows), whatever ``method`` says; axes that do not merge into one stride are
        reduced one group after another.{dtype}
    keepdims : bool, optional
        Keep the reduced axes with length 1.
    method : str, optional
        A rung of ``gpukernels.methods("reduce")``, or ``"auto"`` (``one_pass``), for
        reductions to one element.
    out : cupy.ndarray, optional
        Destination of the result's shape on the same device; the result is cast to its dtype.
"""
_DTYPE = """
    dtype : dtype, optional
        Result dtype, as in :func:`numpy.{name}`. By default bool and signed integers give
        int64, unsigned integers uint64, and floats and complex keep their dtype (float16 is
        accumulated in float32)."""
_RAISES = """
    Raises
    ------
    TypeError
        ``x`` is not a GPU array, or its dtype{dtype_note} is unsupported.
    numpy.exceptions.AxisError
        An axis is out of range.
    ValueError
        Duplicate axes, ``out`` of the wrong shape or device, or an unknown ``method``.{empty}
"""


def sum(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False, *,
        method: str = "auto", out: Any = None):
    return _reduce("sum", x, axis, dtype, keepdims, method, out)


def prod(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False, *,
         method: str = "auto", out: Any = None):
    return _reduce("prod", x, axis, dtype, keepdims, method, out)


def min(x: Any, axis: Any = None, keepdims: bool = False, *, method: str = "auto", out: Any = None):
    return _reduce("min", x, axis, None, keepdims, method, out)


def max(x: Any, axis: Any = None, keepdims: bool = False, *, method: str = "auto", out: Any = None):
    return _reduce("max", x, axis, None, keepdims, method, out)


sum.__doc__ = f"""Sum of array elements, with NumPy's result dtypes and wrap-around.
{_PARAMETERS.format(complex=" or complex", dtype=_DTYPE.format(name="sum"))}
    Returns
    -------
    cupy.ndarray
        A 0-d array (or the ``keepdims`` shape). An empty input sums to 0. The same input
        gives bitwise the same result on every call.
{_RAISES.format(dtype_note=" or ``dtype``", empty="")}
    Examples
    --------
    >>> import cupy, gpukernels as gk
    >>> gk.sum(cupy.arange(10, dtype=cupy.int32))
    array(45)
"""
prod.__doc__ = f"""Product of array elements, with NumPy's result dtypes and wrap-around.
{_PARAMETERS.format(complex=" or complex", dtype=_DTYPE.format(name="prod"))}
    Returns
    -------
    cupy.ndarray
        A 0-d array (or the ``keepdims`` shape). An empty input gives 1. Integer products wrap
        around modulo 2**bits as NumPy's do. The same input gives bitwise the same result on
        every call.
{_RAISES.format(dtype_note=" or ``dtype``", empty="")}
    Examples
    --------
    >>> import cupy, gpukernels as gk
    >>> gk.prod(cupy.arange(1, 6, dtype=cupy.int32))
    array(120)
"""
_EMPTY_NOTE = "\n        Also for an empty input: the minimum or maximum of nothing has no value."
for _function, _word in ((min, "Minimum"), (max, "Maximum")):
    _function.__doc__ = f"""{_word} of array elements, NaN-propagating as NumPy's ``{_function.__name__}``.
{_PARAMETERS.format(complex="", dtype="")}
    Returns
    -------
    cupy.ndarray
        A 0-d array (or the ``keepdims`` shape) of the input's dtype. If any element is NaN,
        the result is NaN.
{_RAISES.format(dtype_note=" (complex included)", empty=_EMPTY_NOTE)}
    Examples
    --------
    >>> import cupy, gpukernels as gk
    >>> gk.{_function.__name__}(cupy.asarray([3, -1, 2]))
    array({-1 if _function is min else 3})
"""
