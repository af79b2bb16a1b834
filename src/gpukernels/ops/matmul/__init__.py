"""Matrix multiply with NumPy's ``matmul`` semantics (1-D promotion, batching, broadcasting).

The ladder and its launch geometry are in :mod:`.rungs`, the reference, error bound and the
benchmark spec in :mod:`.check`; this module holds the public wrapper, which plans each input
layout once (:data:`~gpukernels._core.launch.PLANS`) and then only allocates and launches.
"""

from __future__ import annotations

import builtins
import functools
import math
from collections.abc import Callable
from typing import Any

import numpy

from ..._core import device as _device
from ..._core import floats
from ..._core import ladder as _ladder
from ..._core.launch import (
    INDEX_SCALARS,
    MAX_GRID_YZ,
    PLANS,
    Array,
    KernelCall,
    StreamArray,
    ceil_div,
    dry_run,
    finish_out,
    index_type,
    power_of_two,
    prepare_out,
    resident_blocks,
    resident_clusters,
    span,
    stream_buffers,
)
from . import check, rungs, tensor_map
from .rungs import LADDER, PRECISIONS, Problem

__all__ = ["matmul", "matmul_shapes", "OPERATION"]


def matmul_shapes(a_shape: tuple[int, ...], b_shape: tuple[int, ...]
                  ) -> tuple[tuple[int, ...], int, int, int, tuple[int, ...]]:
    """Resolve NumPy's matmul shape rules.

    Returns ``(batch_shape, M, K, N, out_shape)``, where a 1-D operand has been promoted (a
    leading or trailing 1 added) and that axis is absent from ``out_shape``. Raises ValueError
    with NumPy's meaning for 0-d operands, mismatched inner dimensions and unbroadcastable
    batch dimensions.

    Examples
    --------
    >>> from gpukernels.ops.matmul import matmul_shapes
    >>> matmul_shapes((5, 3, 4), (4,))
    ((5,), 3, 4, 1, (5, 3))
    """
    for index, shape in enumerate((a_shape, b_shape)):
        if len(shape) == 0:
            raise ValueError(
                f"matmul: input operand {index} does not have enough dimensions "
                "(has 0, needs at least 1); use multiply for scalars"
            )
    M, K = (1, a_shape[0]) if len(a_shape) == 1 else a_shape[-2:]
    K_b, N = (b_shape[0], 1) if len(b_shape) == 1 else b_shape[-2:]
    if K != K_b:
        raise ValueError(
            f"matmul: mismatch in the contracted dimension: a has shape {tuple(a_shape)} "
            f"(K={K}) and b has shape {tuple(b_shape)} (K={K_b})"
        )
    try:
        batch_shape = numpy.broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2]))
    except ValueError:
        raise ValueError(
            f"matmul: batch dimensions {tuple(a_shape[:-2])} and {tuple(b_shape[:-2])} "
            "cannot be broadcast together"
        ) from None
    out_shape = batch_shape + ((M,) if len(a_shape) > 1 else ()) + ((N,) if len(b_shape) > 1 else ())
    return batch_shape, M, K, N, out_shape


def result_dtype(a_dtype: numpy.dtype, b_dtype: numpy.dtype) -> numpy.dtype:
    """NumPy's result dtype of ``a @ b`` (ml_dtypes' promotions for bfloat16, except that
    bfloat16 @ bfloat16 stays bfloat16); TypeError for dtypes the kernels do not take."""
    for dtype in (a_dtype, b_dtype):
        if dtype.kind not in "biufc" and not floats.is_bfloat16(dtype):
            raise TypeError(f"matmul does not support dtype {dtype}")
    dtype = floats.promote("matmul", a_dtype, b_dtype)
    if dtype.kind == "c":
        raise TypeError(
            f"matmul has no complex kernels; inputs of {a_dtype} and {b_dtype} give {dtype}"
        )
    return dtype


def _stack(x: Any, batch_shape: tuple, rows: int, cols: int, dtype: numpy.dtype) -> Any:
    """``x`` as a (batch, rows, cols) view of ``dtype`` with element strides (copying only where
    the dtype or the layout needs it)."""
    cupy = _device.cupy
    if x.dtype != dtype and x.dtype.kind in "iu" and dtype.kind == "u" \
            and x.dtype.itemsize == dtype.itemsize:
        x = x.view(dtype)  # int32 -> uint32: the same bits, no copy
    x = x.astype(dtype, copy=False).reshape(x.shape[:-2] + (rows, cols))
    batch = math.prod(batch_shape)  # explicit: reshape cannot infer -1 when rows * cols == 0
    stacked = cupy.broadcast_to(x, batch_shape + (rows, cols)).reshape(batch, rows, cols)
    if any(s % stacked.itemsize for s in stacked.strides):
        stacked = cupy.ascontiguousarray(stacked)
    return stacked


class _Operand:
    """How an operand reaches the kernels: as it is (the kernels read its memory with the
    planned strides), or through :func:`_stack` on every call (a dtype to convert, or batch axes
    no stride walks)."""

    __slots__ = ("as_is", "batch_shape", "rows", "cols", "dtype")

    def __init__(self, x: Any, stacked: Any, batch_shape: tuple, rows: int, cols: int,
                 dtype: numpy.dtype) -> None:
        self.as_is = stacked.data.ptr == x.data.ptr and stacked.data.mem is x.data.mem
        self.batch_shape, self.rows, self.cols, self.dtype = batch_shape, rows, cols, dtype

    def __call__(self, x: Any) -> Any:
        """What the kernels read for ``x``: ``x`` itself (its memory, with the planned strides),
        or its converted stack."""
        return x if self.as_is else _stack(x, self.batch_shape, self.rows, self.cols, self.dtype)

    def stack(self, x: Any) -> Any:
        """``x`` (as :meth:`__call__` gives it) as a (batch, rows, cols) view."""
        return _stack(x, self.batch_shape, self.rows, self.cols, self.dtype)


def _aligned(compute: numpy.dtype, N: int, stacks: tuple, c_aligned: bool | None) -> bool:
    """Whether the ALIGNED kernels may use 16-byte accesses on these (batch, rows, cols) stacks:
    unit column strides, row and batch strides multiples of 16 bytes, 16-byte aligned data, and
    (for C, written 16 bytes at a time by the SIMT rungs) N a multiple of 16 bytes too."""
    vector = 16 // compute.itemsize
    for x in stacks:
        batch_stride, row_stride, col_stride = (s // x.itemsize for s in x.strides)
        if x.data.ptr % 16 or (col_stride != 1 and x.shape[2] > 1) \
                or batch_stride % vector or row_stride % vector:
            return False
    return c_aligned is None or (c_aligned and N % vector == 0)


class _Plan:
    """The launches of one matmul layout (see :func:`_plan`)."""

    __slots__ = ("out_shape", "dtype", "compute", "a", "b", "in_place", "launches", "wgmma",
                 "zero", "single", "nbytes")
    out_shape: tuple[int, ...]
    dtype: numpy.dtype
    compute: numpy.dtype  # what the kernels write: the result dtype, or a wider one to narrow
    a: Callable[[Any], Any]  # how each call's operand becomes what the kernels read
    b: Callable[[Any], Any]
    in_place: bool  # the kernels write the result array itself
    launches: list  # (KernelCall, byte offsets of A, B and C or None)
    wgmma: _Wgmma | None
    zero: bool  # K = 0: the result is zeros
    # One launch from the operands as they are into the result (gemv, most SIMT products),
    # called directly by a call without out=; the result's bytes
    single: Any
    nbytes: int

    def __call__(self, a: Any, b: Any, result: Any) -> None:
        c = result if self.in_place else _device.cupy.empty(result.shape, self.compute)
        if self.zero:  # K = 0: no terms, every sum is 0
            c.fill(0)
        elif self.wgmma is not None:
            self.wgmma(a, b, c)
        else:
            a, b = self.a(a), self.b(b)
            for call, offsets in self.launches:
                if offsets:
                    call(*(_at(x, offset) for x, offset in zip((a, b, c), offsets)))
                else:
                    call(a, b, c)
        if not self.in_place and not dry_run():  # 4. Narrow: 16-bit floats rounded once,
            _narrow(c, result)  # integers modulo 2^width, bool


def _at(array: Any, offset: int) -> Any:
    """A one-element array at ``offset`` bytes into ``array``'s data: a pointer for a kernel."""
    return _device.cupy.ndarray((1,), array.dtype, memptr=array.data + offset)


def _narrow(c: Any, result: Any) -> None:
    """The kernels' sums as the result dtype: 16-bit float results rounded once, integers
    truncated modulo 2^width (through the unsigned type of that width), bool counts to truth."""
    cupy = _device.cupy
    c = c.reshape(result.shape)
    dtype = result.dtype
    if dtype.kind == "b":
        cupy.not_equal(c, 0, out=result)
    elif dtype.kind in "iu":
        result[...] = c.astype(numpy.dtype(f"u{dtype.itemsize}")).view(dtype)
    else:
        result[...] = c


def _simt_launches(shape: rungs.Shape, a_stack: Any, b_stack: Any, M: int, N: int, K: int,
                   c_aligned: bool) -> list:
    """The kernel calls of a rung with the SIMT signature (rungs 1-7), each with the byte offsets
    of A, B and C (None for the first): column tiles of C in x, row tiles in y, matrices in z.
    Problems past gridDim.y's or gridDim.z's 65535 go in several launches, over row ranges of
    one matrix at a time when M needs it (C's batch stride is M * N inside the kernel)."""
    compute = shape.compute
    batch = a_stack.shape[0]
    aligned = shape.aligned_flag and _aligned(
        compute, N, (a_stack, b_stack), c_aligned if shape.aligned_c else None)
    index = index_type(batch * M * N, K, *(
        span(s) + rungs.MARGIN * builtins.sum(abs(st) // s.itemsize for st in s.strides)
        for s in (a_stack, b_stack)))
    to_index = INDEX_SCALARS[index]
    strides = [to_index(s // a_stack.itemsize) for s in a_stack.strides + b_stack.strides]
    instance = shape.instance(index, aligned)
    tile_rows, tile_cols = shape.tile
    rows_per_launch = MAX_GRID_YZ * tile_rows
    itemsize = compute.itemsize
    a_batch, b_batch = a_stack.strides[0], b_stack.strides[0]
    if M <= rows_per_launch:  # (first matrix, matrices, first row, rows)
        chunks = [(i, builtins.min(MAX_GRID_YZ, batch - i), 0, M)
                  for i in range(0, batch, MAX_GRID_YZ)]
    else:
        chunks = [(i, 1, r, builtins.min(rows_per_launch, M - r))
                  for i in range(batch) for r in range(0, M, rows_per_launch)]
    launches = []
    for first, count, row, rows in chunks:
        grid = (ceil_div(N, tile_cols), ceil_div(rows, tile_rows), count)
        args = (Array(0), Array(1), Array(2), to_index(rows), to_index(N), to_index(K),
                to_index(count), *strides)
        offsets = (first * a_batch + row * a_stack.strides[1], first * b_batch,
                   (first * M + row) * N * itemsize)
        call = KernelCall(shape.rung.source, instance, grid, shape.block, args, shape.shared_mem,
                          shape.rung.name)
        launches.append((call, offsets if any(offsets) else None))
    return launches


def _gemv_scratch(partials: int, tickets: int) -> tuple:
    """gemv's scratch on the current device and stream: ``partials`` floats for the splits'
    partial tiles and ``tickets`` integer tickets, one per tile of C (0 at launch, left at 0 by
    the kernel); sizes are powers of two, so few sets serve every launch."""
    cupy = _device.cupy
    return stream_buffers(("gemv", partials, tickets), lambda: (
        cupy.empty(partials, numpy.float32), cupy.zeros(tickets, numpy.uint32)))


def _gemv_launches(shape: rungs.Shape, a_stack: Any, b_stack: Any, M: int, N: int,
                   K: int) -> list:
    """gemv's launches: column tiles of 64 in x, splits of K in y (as many as fill one wave of
    the blocks the SMs run, :func:`rungs.gemv_splits`), tiles of 8 or 16 rows of each matrix
    in z, in several launches past gridDim.z's 65535 (each with the byte offsets of A, B and
    C)."""
    compute, (tile_rows, tile_cols) = shape.compute, shape.tile
    batch = a_stack.shape[0]
    layout = rungs.gemv_layout(b_stack)
    instance = shape.instance("int", layout=layout)
    m_blocks = ceil_div(M, tile_rows)
    if m_blocks <= MAX_GRID_YZ:  # (first matrix, matrices, first row, rows)
        per_launch = builtins.max(1, MAX_GRID_YZ // m_blocks)
        chunks = [(i, builtins.min(per_launch, batch - i), 0, M)
                  for i in range(0, batch, per_launch)]
    else:
        rows_per_launch = MAX_GRID_YZ * tile_rows
        chunks = [(i, 1, r, builtins.min(rows_per_launch, M - r))
                  for i in range(batch) for r in range(0, M, rows_per_launch)]
    strips = ceil_div(N, tile_cols)
    threads = shape.block[0]
    slots = resident_blocks(shape.rung.source, instance, threads) * \
        _device.multiprocessor_count()
    itemsize = compute.itemsize
    strides = [numpy.int64(s // x.itemsize) for x in (a_stack, b_stack) for s in x.strides]
    launches = []
    for first, count, row, rows in chunks:
        tiles_z = count * ceil_div(rows, tile_rows)
        splits, k_rows = rungs.gemv_splits(K, strips * tiles_z, slots, threads,
                                           rungs.gemv_warp_rows(layout))
        args = (Array(0), Array(1), Array(2), numpy.int32(rows), numpy.int32(N), numpy.int32(K),
                numpy.int32(ceil_div(rows, tile_rows)), numpy.int32(k_rows), *strides,
                StreamArray(0), StreamArray(1))
        # scratch only where K is split (one split writes C and touches neither)
        tiles = strips * tiles_z if splits > 1 else 1
        partials = tiles * splits * tile_rows * tile_cols if splits > 1 else 1
        scratch = functools.partial(_gemv_scratch, power_of_two(partials), power_of_two(tiles))
        call = KernelCall(shape.rung.source, instance, (strips, splits, tiles_z), shape.block,
                          args, 0, shape.rung.name, scratch)
        offsets = (first * a_stack.strides[0] + row * a_stack.strides[1],
                   first * b_stack.strides[0], (first * M + row) * N * itemsize)
        launches.append((call, offsets if any(offsets) else None))
    return launches


class _Wgmma:
    """The Hopper rungs' launches: a tensor map per operand, then one launch per 65535
    matrices (split_k: into a float32 workspace of partial tiles, then the launch that sums
    them into C; wgmma's 16-bit types: a block per SM walking the tiles; multicast: as many
    clusters of two blocks as the GPU runs at once, walking pairs of row tiles). Operands TMA
    can read as they are keep a map template re-aimed at each call's data; others (rows not
    16-byte aligned; for TF32, transposed views) are copied into padded stacks on every call.
    B is read as it is where it is N-contiguous: 16-bit B by wgmma's transposed shared
    operand, TF32's B (whose wgmma reads shared operands K-major only) loaded into registers by
    the kernel. A 16-bit B that is K-contiguous instead (``W.T`` of a row-major W) is read
    K-major through W's own map (``b_k_major``: the instances that take it), and a 16-bit A
    that is M-contiguous (``X.T`` of a row-major X) M-major through X's (``a_m_major``), with
    no copy."""

    def __init__(self, shape: rungs.Shape, a_stack: Any, b_stack: Any, M: int, N: int, K: int,
                 batch: int, a: _Operand, b: _Operand) -> None:
        self.shape, self.M, self.N, self.K, self.batch = shape, M, N, K, batch
        self.a, self.b = a, b  # how each call's operands become (batch, rows, cols) stacks
        self.compute = shape.compute
        tile_rows, tile_cols = shape.tile
        self.box_cols = rungs.WGMMA_ROW_BYTES // self.compute.itemsize  # 128-byte rows
        # B is read N-contiguous in boxes of 64 x 64 (16-bit) or 32 x 32 (TF32: a stage's 32
        # of K).
        self.b_box_rows = rungs.WGMMA_F16_B_BOX if self.compute.itemsize == 2 else self.box_cols
        self.tiles = (ceil_div(M, tile_rows), ceil_div(N, tile_cols))
        self.b_k_major = _transposed_reads(b_stack, self.compute)
        self.a_m_major = _transposed_reads(a_stack, self.compute)
        self.instance = shape.instance("int", b_k_major=self.b_k_major,
                                       a_m_major=self.a_m_major)
        # An M-major A's map covers X's (batch, K, M) in boxes of 64 rows of K as B's does.
        self.a_box_rows = rungs.WGMMA_F16_B_BOX if self.a_m_major else tile_rows
        int32 = numpy.int32
        self.scalars = (int32(M), int32(N), int32(K), int32(self.tiles[0]), int32(self.tiles[1]))
        self.calls: dict[tuple, KernelCall] = {}
        self.sums: dict[int, KernelCall] = {}  # split_k: the sum of the slices, per matrix count
        # Map templates for operands read as they are (the common case); None: built per call.
        self.templates: list[tuple[tensor_map.MapTemplate, bool] | None] = [None, None]
        # what the maps cover: A's (batch, M, K) or X's (batch, K, M), B's (batch, K, N) or W's
        # (batch, N, K)
        a_read = a_stack.swapaxes(1, 2) if self.a_m_major else a_stack
        b_read = b_stack.swapaxes(1, 2) if self.b_k_major else b_stack
        for position, (stack, operand) in enumerate(((a_read, a), (b_read, b))):
            if not operand.as_is:
                continue
            batched = stack.shape[0] > 1 and stack.strides[0] != 0
            if tensor_map.tma_compatible(stack if batched else stack[:1]) and batch <= MAX_GRID_YZ:
                box_rows = self.a_box_rows if position == 0 else self.b_box_rows
                self.templates[position] = (tensor_map.MapTemplate(
                    stack if batched else stack[:1], self.box_cols, box_rows, batched), batched)
        # Both operands read as they are: one launch, its maps re-aimed at each call's data.
        self.direct: tuple[KernelCall, tensor_map.MapTemplate, tensor_map.MapTemplate] | None = None
        a_read, b_read = self.templates
        if a_read is not None and b_read is not None:
            (a_template, a_batched), (b_template, b_batched) = a_read, b_read
            self.direct = (self._call(batch, (a_batched, b_batched)), a_template, b_template)

    def _call(self, count: int, batched: tuple) -> KernelCall:
        key = (count, batched)
        call = self.calls.get(key)
        if call is None:
            tiles_m, tiles_n = self.tiles
            split = self.shape.rung.name == "split_k"
            args = (Array(0, tensor_map.MAP_BYTES), Array(1, tensor_map.MAP_BYTES), Array(2),
                    *self.scalars, numpy.int32(batched[0]), numpy.int32(batched[1]),
                    *((numpy.int32(self.shape.k_steps),) if split else ()))
            blocks = tiles_m * tiles_n
            if self.shape.persistent_blocks:  # each block walks the tiles
                blocks = builtins.min(blocks, self.shape.persistent_blocks)
            cluster = self.shape.cluster
            if cluster > 1:  # clusters walk groups of `cluster` row tiles, as many as run at once
                units = ceil_div(tiles_m, cluster) * tiles_n
                blocks = cluster * builtins.min(units, resident_clusters(
                    self.shape.rung.source, self.instance, self.shape.block[0],
                    self.shape.shared_mem, cluster))
            call = self.calls[key] = KernelCall(
                self.shape.rung.source, self.instance, (blocks, count, self.shape.splits),
                self.shape.block, args, self.shape.shared_mem, self.shape.rung.name)
        return call

    def _launch(self, call: KernelCall, a_map: Any, b_map: Any, c: Any, count: int) -> None:
        """One product launch into ``c`` (count matrices); split_k writes a workspace of
        float32 partial tiles, which a second launch sums into ``c``."""
        if self.shape.rung.name != "split_k":
            call(a_map, b_map, c)
            return
        partial = _device.cupy.empty((self.shape.splits, count, self.M, self.N), numpy.float32)
        call(a_map, b_map, partial)
        self._sum(count)(partial, c)

    def _sum(self, count: int) -> KernelCall:
        call = self.sums.get(count)
        if call is None:
            total = count * self.M * self.N
            threads = rungs.SPLIT_K_SUM_THREADS
            blocks = builtins.min(ceil_div(total, threads), 8 * _device.multiprocessor_count())
            call = self.sums[count] = KernelCall(
                self.shape.rung.source, rungs.split_k_sum_instance(self.compute),
                (blocks, 1, 1), (threads, 1, 1),
                (Array(0), Array(1), numpy.int64(total), numpy.int32(self.shape.splits)), 0,
                self.shape.rung.name)
        return call

    def __call__(self, a: Any, b: Any, c: Any) -> None:
        """Multiply the call's operands ``a`` and ``b`` (as given to matmul) into ``c``."""
        if self.direct is not None:
            call, a_template, b_template = self.direct
            self._launch(call, a_template.at(a.data.ptr), b_template.at(b.data.ptr), c,
                         self.batch)
            return
        a_stack, b_stack = self.a.stack(a), self.b.stack(b)
        c_stack = c.reshape(self.batch, self.M, self.N)
        a_op, a_batched = _tma_operand(a_stack.swapaxes(1, 2) if self.a_m_major else a_stack)
        b_op, b_batched = _tma_operand(b_stack.swapaxes(1, 2) if self.b_k_major else b_stack)
        for start in range(0, self.batch, MAX_GRID_YZ):
            count = builtins.min(MAX_GRID_YZ, self.batch - start)
            a_part = a_op[start:start + count] if a_batched else a_op
            b_part = b_op[start:start + count] if b_batched else b_op
            a_map = tensor_map.tiled_map(a_part, self.box_cols, self.a_box_rows, a_batched)
            b_map = tensor_map.tiled_map(b_part, self.box_cols, self.b_box_rows, b_batched)
            self._launch(self._call(count, (a_batched, b_batched)), a_map, b_map,
                         c_stack[start:start + count], count)


def _transposed_reads(stack: Any, compute: numpy.dtype) -> bool:
    """Whether the Hopper rungs read an operand, the (batch, rows, cols) stack ``stack``,
    through the transpose it is a view of: a 16-bit operand that TMA cannot read as it is
    (cols contiguous) but can as the (batch, cols, rows) array it is a transposed view of. For
    B (K, N) that is ``W.T`` of a row-major W, read K-major; for A (M, K), ``X.T`` of a
    row-major X, read M-major."""
    if compute.itemsize != 2:
        return False
    view = stack if stack.shape[0] > 1 and stack.strides[0] != 0 else stack[:1]
    return not tensor_map.tma_compatible(view) and tensor_map.tma_compatible(view.swapaxes(1, 2))


def _tma_operand(x: Any) -> tuple[Any, bool]:
    """``x``, a (batch, rows, cols) stack, as TMA can read it, and whether it holds a matrix per
    batch entry. An operand broadcast over the batch (batch stride 0) keeps one matrix; one that
    TMA cannot read as it is (a transposed view, rows not 16-byte aligned) is copied into a stack
    whose rows are padded to 16 bytes (the kernel never reads the padding: TMA fills the columns
    past the extent it is given with zeros)."""
    batched = x.shape[0] > 1 and x.strides[0] != 0
    if not batched:
        x = x[:1]
    if not tensor_map.tma_compatible(x):
        unit = 16 // x.itemsize
        padded = _device.cupy.empty(x.shape[:2] + (ceil_div(x.shape[2], unit) * unit,), x.dtype)
        padded = padded[:, :, :x.shape[2]]
        padded[...] = x
        x = padded
    return x, batched


def _plan(a: Any, b: Any, rung: rungs.Rung | None, precision: str, c_address: int) -> _Plan:
    """Validate a product of ``a`` and ``b`` and work out its launches (for a result whose data
    starts at ``c_address`` modulo 16)."""
    _device.check_alignment(a, "a")
    _device.check_alignment(b, "b")
    _device.check_same_device(("a", a), ("b", b))
    dtype = result_dtype(a.dtype, b.dtype)
    batch_shape, M, K, N, out_shape = matmul_shapes(a.shape, b.shape)
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
    if precision == "tf32" and dtype != numpy.float32:
        raise ValueError(f"precision='tf32' applies to float32 products; this one is {dtype}")
    batch = math.prod(batch_shape)
    capability = _device.compute_capability()
    b_as_is = True
    if rung is None and capability == rungs.WGMMA_CAPABILITY and dtype in rungs.HALF_TYPES \
            and M <= rungs.GEMV_MAX_ROWS and 0 not in out_shape:  # auto's decode steps
        b_stack = _stack(b, batch_shape, K, N, dtype)
        b_as_is = tensor_map.tma_compatible(b_stack if b_stack.strides[0] else b_stack[:1])
    problem = Problem(batch, M, N, K, dtype, precision, capability,
                      _device.multiprocessor_count(), b_as_is)
    chosen = rung if rung is not None else rungs.choose(problem)
    shape = chosen.plan(problem)
    compute = shape.compute
    plan = _Plan()
    plan.out_shape, plan.dtype, plan.compute = out_shape, dtype, compute
    plan.in_place = dtype == compute or (dtype.kind in "iu" and dtype.itemsize == compute.itemsize)
    plan.launches, plan.wgmma, plan.zero, plan.single = [], None, False, None
    plan.nbytes = math.prod(out_shape) * dtype.itemsize
    plan.a = plan.b = lambda x: x
    if math.prod(out_shape) == 0:
        return plan
    a_stack = _stack(a, batch_shape, M, K, compute)
    b_stack = _stack(b, batch_shape, K, N, compute)
    plan.a = _Operand(a, a_stack, batch_shape, M, K, compute)
    plan.b = _Operand(b, b_stack, batch_shape, K, N, compute)
    c_aligned = (plan.in_place and c_address % 16 == 0) or not plan.in_place
    if K == 0:
        plan.zero = True
    elif chosen.name == "gemv":
        plan.launches = _gemv_launches(shape, a_stack, b_stack, M, N, K)
    elif chosen.name in rungs.HOPPER_RUNGS:
        plan.wgmma = _Wgmma(shape, a_stack, b_stack, M, N, K, batch, plan.a, plan.b)
    else:
        plan.launches = _simt_launches(shape, a_stack, b_stack, M, N, K, c_aligned)
    if len(plan.launches) == 1 and not plan.launches[0][1] and plan.in_place \
            and plan.a.as_is and plan.b.as_is:
        plan.single = plan.launches[0][0]
    return plan


def matmul(a: Any, b: Any, *, method: str = "auto", out: Any = None,
           precision: str = "highest") -> Any:
    """Matrix product of two GPU arrays, with NumPy's ``matmul`` semantics.

    Parameters
    ----------
    a, b : cupy.ndarray or GPU arrays
        Operands of shapes ``(..., M, K)`` and ``(..., K, N)``. A 1-D operand is promoted to a
        matrix (``(K,)`` -> ``(1, K)`` for ``a``, ``(K, 1)`` for ``b``) and the added axis is
        removed from the result; batch axes broadcast. The result dtype is NumPy's (e.g. float32
        with float64 gives float64; int8 with int8 gives int8); ``K = 0`` gives zeros.
        Floating-point products accumulate with one fused multiply-add per term (float16 and
        bfloat16 in float32, rounded once at the end); integer products are exact and wrap
        around like NumPy's; bool gives True where some term is True. Complex dtypes are not
        supported. bfloat16 (``ml_dtypes.bfloat16``, as CuPy 14 holds it, or a torch or JAX
        tensor through DLPack) promotes as ml_dtypes says (with float32 to float32; with
        float16 not at all: TypeError), and bfloat16 @ bfloat16 is bfloat16, as in PyTorch
        and JAX (NumPy's ml_dtypes loop returns float32 there).
    method : str, optional
        A rung of ``gpukernels.methods("matmul")``, or ``"auto"``: the tensor cores for float16
        and bfloat16 on compute capability 8.0 and newer (and for ``precision="tf32"``): on
        9.0 (Hopper) ``"split_k"`` where the tiles of C are too few for the GPU and K is long
        (``"gemv"`` there for at most 8 rows of float16 or bfloat16), ``"gemv"`` for at most 16
        rows wherever ``b`` is a transposed view such as ``w.T``, else ``"wgmma"``; on the others
        ``"gemv"`` for at most 16 rows of float16 or bfloat16, else ``"mma"``; else the
        fastest SIMT rung (the README's table). The tensor-core rungs take float16 and
        bfloat16, and float32 only as TF32.
        ``"wgmma"`` and ``"split_k"`` run on compute capability 9.0 only; they read float16
        and bfloat16 operands that are transposed views (``x @ w.T``, ``x.T @ y``) as they
        lie, and copy operands whose rows are not 16-byte aligned (and TF32's transposed
        views) into padded temporaries.
    out : cupy.ndarray, optional
        Destination of the result's shape on the same device; its dtype must be one the result
        casts to under NumPy's ``same_kind`` rule.
    precision : {"highest", "tf32"}, optional
        ``"highest"`` (default) computes in the result dtype (float16 and bfloat16 in
        float32). ``"tf32"`` lets a float32 product run on the TF32 tensor cores: each operand
        is rounded to a 10-bit mantissa, so elements are accurate to about
        ``2**-10 * (|a| @ |b|)`` instead of float32's ``K * 2**-24``. Never chosen unless
        asked for.

    Returns
    -------
    cupy.ndarray
        ``a @ b``, C-contiguous (``out`` if given).

    Raises
    ------
    TypeError
        An operand is not a GPU array, or the result dtype has no kernel (complex; for the
        tensor-core rungs, anything but float16, bfloat16 and float32), or the operands' dtypes
        have no common dtype (bfloat16 with float16).
    ValueError
        Shapes do not match NumPy's rules, operands are on different devices, ``out`` has the
        wrong shape, ``method`` is unknown or needs tensor cores this GPU lacks, or
        ``precision`` does not apply (TF32 is for float32 products on the tensor cores).

    Examples
    --------
    >>> import cupy, gpukernels as gk
    >>> a = cupy.ones((2, 3), dtype=cupy.float32)
    >>> gk.matmul(a, cupy.arange(3, dtype=cupy.float32))
    array([3., 3.], dtype=float32)
    """
    # 1. Validate, and plan once per layout: a planned layout has passed every check (all the
    # plan depends on is in its key).
    cupy = _device.cupy
    if cupy is None or type(a) is not cupy.ndarray:
        a = _device.as_device_array(a, "a")
    if type(b) is not cupy.ndarray:
        b = _device.as_device_array(b, "b")
    if type(method) is not str:
        LADDER.resolve(method, "matmul")  # raises TypeError
    if type(precision) is not str:
        raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
    c_address = out.data.ptr % 16 if out is not None and isinstance(out, cupy.ndarray) else 0
    key = ("matmul", a.shape, a.strides, a.dtype, b.shape, b.strides, b.dtype, method, precision,
           a.data.ptr % 16, b.data.ptr % 16, c_address, a.data.device_id, b.data.device_id)
    plan = PLANS.get(key)
    if plan is None:
        rung = LADDER.resolve(method, "matmul")
        if out is not None:  # a bad out= is refused before any kernel is fetched
            prepare_out(out, matmul_shapes(a.shape, b.shape)[4], result_dtype(a.dtype, b.dtype),
                        a.data.device_id, (a, b))
        with a.device:
            plan = PLANS.put(key, _plan(a, b, rung, precision, c_address))
    direct = out is not None and prepare_out(out, plan.out_shape, plan.dtype, a.data.device_id,
                                             (a, b))
    device = a.data.device_id
    if device != cupy.cuda.runtime.getDevice():
        with cupy.cuda.Device(device):
            return _run(plan, a, b, out, direct)
    return _run(plan, a, b, out, direct)


def _run(plan: _Plan, a: Any, b: Any, out: Any, direct: bool) -> Any:
    if plan.single is not None and out is None:
        # 2. Allocate and 3. launch: one kernel into a new array (built around its memory
        # after the launch).
        return plan.single.into_new(plan.out_shape, plan.dtype, plan.nbytes, a, b)
    # 2. Allocate: the kernels write a C-contiguous (batch, M, N) stack of the compute dtype,
    # straight into the result when it has that layout (an integer result as its unsigned view).
    # (cupy.ndarray is cupy.empty without its Python frame, 0.7 us a call)
    result = out if direct else _device.cupy.ndarray(plan.out_shape, plan.dtype)
    # 3. Launch (and narrow the sums to the result dtype where they differ).
    if result.size:
        plan(a, b, result)
    return finish_out(result, out, direct)


OPERATION = _ladder.register(_ladder.Operation(
    name="matmul", function=matmul, ladder=LADDER, inputs=check.inputs,
    reference=check.reference, check_shape=(255, 129, 257),
    result_dtype=lambda a, b, **_: result_dtype(a.dtype, b.dtype),
    check_dtypes=("float32", "float16", "bfloat16"), bench=check.BENCH, kind="matmul"))
