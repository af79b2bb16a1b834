"""Matrix transpose: ``(..., M, N) -> (..., N, M)`` as a new C-contiguous array."""

from __future__ import annotations

from typing import Any

import numpy

from .. import _common, _compile, _device
from .._common import (INDEX_SCALARS, MAX_GRID_YZ, Rung, allow_shared_memory, ceil_div, compute_capability,
                      finish_out, index_type, launch, prepare_out, register_ladder, resolve_method, span)

__all__ = ["transpose", "RUNGS", "KERNELS"]

#: The ladder, bottom rung first.
RUNGS = register_ladder("transpose", (
    Rung("naive", "one thread per element: coalesced row reads, strided column writes"),
    Rung("naive_col", "indices swapped: strided column reads, coalesced row writes"),
    Rung("shared", "32x32 tile through padded shared memory: reads and writes both coalesced; "
                   "32x8 threads, 4 elements each"),
    Rung("vector", "VxV element blocks transposed in registers: 16-byte (or 4-byte) words on "
                   "every global access; unaligned output rows written in whole 32-byte sectors"),
))

# A transpose moves bits, so one instance serves every dtype of an item size.
CARRIERS = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int",
            8: "unsigned long long", 16: "gk_bytes16"}
SHARED_TILE = 32
SHARED_ROWS = 8  # threads per tile column: each thread moves SHARED_TILE / SHARED_ROWS elements
COPY_BLOCK = (16, 16)  # the bandwidth study's block, kept for its copy kernels (the ceilings)
#: Threads along x of the naive rungs' 256-thread blocks, per item size. The width sets what a warp
#: touches: `width` elements of each of 32 / width rows. 16 x 16 blocks (the bandwidth study's)
#: reach 0.30 (naive) and 0.57 (naive_col) of a copy for float32 at 8192^2 on an H100; these
#: widths, the best of 1 to 64 measured over 8192^2 and 8191x8193 for every item size, reach 0.61
#: and 0.65 (benchmarks/NOTES.md, item 19).
NAIVE_THREADS = 256
NAIVE_WIDTH = {"naive": {1: 4, 2: 4, 4: 4, 8: 4, 16: 4},
               "naive_col": {1: 16, 2: 16, 4: 8, 8: 8, 16: 8}}

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
#: :func:`_tall`.
SKEW_SCALAR_CONFIGS = {1: (32, 8, 4), 2: (32, 16, 2), 4: (32, 32, 8), 8: (32, 16, 4), 16: (32, 8, 2)}
SECTOR_BYTES = 32  # the unit of DRAM access: an output row starting inside one needs SKEW
#: transpose_vector_shifted, for 1- and 2-byte items whose rows are not whole words (where
#: transpose_vector would fall back to V = 1): (rows, cols) of input per tile, 256 threads.
#: 8191x8193 on an H100: int8 0.83 of a copy against 0.45 with V = 1, float16 0.92 against
#: 0.72 (benchmarks/NOTES.md, items 30, 31 and 35).
SHIFTED_TILES = {1: (256, 128), 2: (128, 64)}
#: Its (LOAD_GROUPS, MIN_BLOCKS) per item size: groups of 4 / itemsize rows a warp loads before
#: using any, and the blocks per SM its registers are bounded for.
SHIFTED_CONFIGS = {1: (3, 4), 2: (3, 8)}
SHIFTED_THREADS = 256
#: transpose_vector_staged replaces it for 1-byte items on sm_80 and newer (cp.async): the same
#: tiles, input rows copied to shared memory in 16-byte chunks, 512 threads, three blocks per SM
#: on an H100, and no row tile before row 0 (see :func:`_staged_row_tiles`). 8191x8193 int8
#: there: 0.92 of a copy against 0.83 (benchmarks/NOTES.md, items 32, 33 and 35). float16
#: stays shifted.
STAGED_ITEMSIZES = (1,)
STAGED_MIN_CAPABILITY = 80
STAGED_THREADS = 512
STAGED_SHARED_BYTES = 288 * 36 * 4 + 128 * 41 * 4  # raw rows of 9 chunks, then half the tile


#: Largest static shared memory a SKEW tile may take when it is made taller (TALL > 1).
TALL_SHARED_BYTES = 40 * 1024


def _tall(itemsize: int, config: tuple[int, int, int], skew: bool) -> int:
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


def _launched_config(itemsize: int, config: tuple[int, int, int], skew: bool):
    """The (V, TILE, ROWS) launched for a chosen VECTOR_CONFIGS entry: V = 1 with SKEW takes
    its taller tile's TILE and ROWS from SKEW_SCALAR_CONFIGS."""
    if skew and config[0] == 1:
        return (1, *SKEW_SCALAR_CONFIGS[itemsize][:2])
    return config


def _vector_name(itemsize: int, index: str, config: tuple[int, int, int], skew: bool) -> str:
    vector, tile, threads_y = config
    return (f"transpose_vector<{CARRIERS[itemsize]}, {index}, {vector}, {tile}, {threads_y}, "
            f"{'true' if skew else 'false'}, {_tall(itemsize, config, skew)}>")


def _shifted_name(itemsize: int, index: str) -> str:
    load_groups, min_blocks = SHIFTED_CONFIGS[itemsize]
    return f"transpose_vector_shifted<{CARRIERS[itemsize]}, {index}, {load_groups}, {min_blocks}>"


def _staged_row_tiles(rows: int, itemsize: int) -> int:
    """Row tiles of transpose_vector_staged: tile t stages input rows [t TR, t TR + TR + SECTOR)
    (SECTOR = 32 bytes of elements), and the last one reaches the last row."""
    tile_rows = SHIFTED_TILES[itemsize][0]
    extra = SECTOR_BYTES // itemsize
    return max(1, ceil_div(rows - extra, tile_rows))


def _staged_name(itemsize: int, index: str) -> str:
    return f"transpose_vector_staged<{CARRIERS[itemsize]}, {index}>"


def _kernel_name(method: str, itemsize: int, index: str) -> str:
    carrier = CARRIERS[itemsize]
    if method == "shared":
        return f"transpose_shared<{carrier}, {index}, {SHARED_TILE}, {SHARED_ROWS}>"
    return f"transpose_{method}<{carrier}, {index}>"


def _ceiling_name(kind: str, itemsize: int, index: str) -> str:
    return f"copy_{kind}<{CARRIERS[itemsize]}, {index}>"


KERNELS = _compile.register("transpose.cu", [
    *(_kernel_name(rung.name, size, index)
      for rung in RUNGS if rung.name != "vector" for size in CARRIERS for index in INDEX_SCALARS),
    *dict.fromkeys(_vector_name(size, index, _launched_config(size, config, skew), skew)
                   for size, configs in VECTOR_CONFIGS.items() for config in configs
                   for index in INDEX_SCALARS for skew in (False, True)),
    *(_shifted_name(size, index) for size in SHIFTED_TILES for index in INDEX_SCALARS),
    *(_staged_name(size, index) for size in STAGED_ITEMSIZES for index in INDEX_SCALARS),
    *(_ceiling_name(kind, size, index)
      for kind in ("row", "col") for size in CARRIERS for index in INDEX_SCALARS),
])


def _check_dtype(dtype: numpy.dtype) -> None:
    if dtype.kind not in "biufc" or dtype.itemsize not in CARRIERS:
        raise TypeError(
            f"transpose supports bool, integer, float and complex dtypes, not {dtype}"
        )


def _vector_plan(stacked, result, rows: int, cols: int) -> tuple[tuple[int, int, int], bool]:
    """The transpose_vector configuration for one launch, and whether it needs SKEW.

    V > 1 needs contiguous input rows, rows and cols that are multiples of V, and every word
    aligned to V * itemsize bytes (strides and both base addresses); otherwise a smaller V.
    """
    itemsize = stacked.itemsize
    batch_stride, row_stride, col_stride = (s // itemsize for s in stacked.strides)
    for config in VECTOR_CONFIGS[itemsize]:
        vector = config[0]
        word = vector * itemsize
        if vector == 1 or (
                col_stride == 1 and rows % vector == 0 and cols % vector == 0
                and row_stride % vector == 0 and batch_stride % vector == 0
                and stacked.data.ptr % word == 0 and result.data.ptr % word == 0):
            break
    aligned_rows = (rows * itemsize) % SECTOR_BYTES == 0 and result.data.ptr % SECTOR_BYTES == 0
    return _launched_config(itemsize, config, not aligned_rows), not aligned_rows



def _launch_config(method: str, rows: int, cols: int, batch: int, itemsize: int,
                   vector_config=None, skew: bool = False):
    """(grid, block) for a rung; see the grid mapping described in kernels/transpose.cu."""
    if method == "vector":  # a block covers TALL * TILE x TILE blocks of V x V elements
        vector, tile, threads_y = vector_config
        tile_rows = tile * _tall(itemsize, vector_config, skew)
        row_tiles = ceil_div(rows // vector, tile_rows) + (1 if skew else 0)
        return ((ceil_div(cols // vector, tile), min(row_tiles, MAX_GRID_YZ), min(batch, MAX_GRID_YZ)),
                (tile, threads_y, 1))
    if method == "shared":  # a block covers a SHARED_TILE x SHARED_TILE tile
        block = (SHARED_TILE, SHARED_ROWS, 1)
        grid = (ceil_div(cols, SHARED_TILE), min(ceil_div(rows, SHARED_TILE), MAX_GRID_YZ),
                min(batch, MAX_GRID_YZ))
        return grid, block
    width = NAIVE_WIDTH[method][itemsize]
    block = (width, NAIVE_THREADS // width, 1)
    # naive: x walks the input's columns; naive_col: the input's rows (the output's columns)
    x_extent, y_extent = (cols, rows) if method == "naive" else (rows, cols)
    grid = (ceil_div(x_extent, block[0]),
            min(ceil_div(y_extent, block[1]), MAX_GRID_YZ),
            min(batch, MAX_GRID_YZ))
    return grid, block


def _kernel_for(chunk_in, chunk_out, rows: int, cols: int, method: str, index: str):
    """(kernel, grid, block, dynamic shared memory in bytes) for one launch over the
    (batch, rows, cols) view ``chunk_in``."""
    itemsize, batch = chunk_in.itemsize, chunk_in.shape[0]
    if method == "vector":
        config, skew = _vector_plan(chunk_in, chunk_out, rows, cols)
        if config[0] == 1 and itemsize in SHIFTED_TILES and \
                (chunk_in.strides[2] == itemsize or cols == 1):
            # Rows that are not whole words: 4-byte words with per-row shifts, not V = 1.
            tile_rows, tile_cols = SHIFTED_TILES[itemsize]
            grid = (ceil_div(cols, tile_cols), min(ceil_div(rows, tile_rows) + 1, MAX_GRID_YZ),
                    min(batch, MAX_GRID_YZ))
            if itemsize in STAGED_ITEMSIZES and compute_capability() >= STAGED_MIN_CAPABILITY:
                grid = (grid[0], min(_staged_row_tiles(rows, itemsize), MAX_GRID_YZ), grid[2])
                kernel = KERNELS.function(_staged_name(itemsize, index))
                allow_shared_memory(kernel, STAGED_SHARED_BYTES)
                return kernel, grid, (STAGED_THREADS, 1, 1), STAGED_SHARED_BYTES
            return KERNELS.function(_shifted_name(itemsize, index)), grid, (SHIFTED_THREADS, 1, 1), 0
        grid, block = _launch_config(method, rows, cols, batch, itemsize, config, skew)
        return KERNELS.function(_vector_name(itemsize, index, config, skew)), grid, block, 0
    grid, block = _launch_config(method, rows, cols, batch, itemsize)
    return KERNELS.function(_kernel_name(method, itemsize, index)), grid, block, 0


# 2-D launches already planned: key -> (kernel, grid, block, scalars). Bounded, since a long
# session may see many shapes; planning again costs only host time.
_PLANS: dict[tuple, tuple] = {}
_MAX_PLANS = 4096
_ALIGNMENT_KEY = 256  # addresses enter plan keys modulo this (every alignment a plan tests divides it)


def _plan_2d(x, result, method: str) -> tuple:
    """(kernel, grid, block, dynamic shared memory, scalar arguments) of the one launch that
    transposes a 2-D ``x``."""
    rows, cols = x.shape
    index = index_type(result.size, span(x))
    to_index = INDEX_SCALARS[index]
    row_stride, col_stride = (s // x.itemsize for s in x.strides)
    kernel, grid, block, shared_mem = _kernel_for(
        x.reshape(1, rows, cols), result.reshape(1, cols, rows), rows, cols, method, index)
    scalars = (to_index(rows), to_index(cols), to_index(0), to_index(row_stride),
               to_index(col_stride))
    return kernel, grid, block, shared_mem, scalars


def transpose(x: Any, *, method: str = "auto", out: Any = None):
    """Swap the last two axes of ``x`` into a new C-contiguous array.

    Parameters
    ----------
    x : cupy.ndarray or GPU array
        An array of at least 2 dimensions, shape ``(..., M, N)``, of any bool, integer, float or
        complex dtype. Any strides (views, negative steps) are accepted; objects exposing
        ``__cuda_array_interface__`` or DLPack are used without a copy.
    method : str, optional
        A rung of ``gpukernels.methods("transpose")``, or ``"auto"`` (the fastest).
    out : cupy.ndarray, optional
        Destination of shape ``(..., N, M)`` and the same dtype, on the same device.

    Returns
    -------
    cupy.ndarray
        ``numpy.swapaxes(x, -1, -2)`` as a C-contiguous array (``out`` if given).

    Raises
    ------
    TypeError
        ``x`` is not a GPU array (NumPy arrays must be moved with ``cupy.asarray`` first), or
        its dtype is unsupported, or ``out`` has another dtype.
    ValueError
        ``x`` has fewer than 2 dimensions, ``out`` has the wrong shape or device, or ``method``
        is unknown.

    Examples
    --------
    >>> import cupy, gpukernels as gk
    >>> x = cupy.arange(6, dtype=cupy.float32).reshape(2, 3)
    >>> gk.transpose(x)
    array([[0., 3.],
           [1., 4.],
           [2., 5.]], dtype=float32)
    """
    # 1. Validate: everything that can be wrong is found before any memory is touched.
    x = _device.as_device_array(x, "x")
    if x.ndim < 2:
        raise ValueError(
            f"transpose needs an array of at least 2 dimensions (..., M, N); got shape {x.shape}"
        )
    _check_dtype(x.dtype)
    method = resolve_method("transpose", method, auto="vector")
    *batch_shape, rows, cols = x.shape
    out_shape = (*batch_shape, cols, rows)
    direct = out is not None and prepare_out(out, out_shape, x.dtype, x.device.id, (x,),
                                             casting="no")

    with x.device:
        # 2. Allocate.
        result = out if direct else _device.cupy.empty(out_shape, dtype=x.dtype)
        if x.size == 0:
            return finish_out(result, out, direct)
        # A 2-D input: the launch depends only on the key below, so it is planned once (the
        # host time of a call is a visible share of a transpose that takes tens of
        # microseconds). The addresses enter through their alignment, which picks the vector
        # width and SKEW (a fresh result is 256-byte aligned).
        if x.ndim == 2 and x.strides[0] % x.itemsize == 0 and x.strides[1] % x.itemsize == 0:
            key = (x.shape, x.strides, x.itemsize, method, x.data.ptr % _ALIGNMENT_KEY,
                   result.data.ptr % _ALIGNMENT_KEY, x.device.id, _common.INT32_INDEX_LIMIT)
            plan = _PLANS.get(key)
            if plan is None:
                if len(_PLANS) >= _MAX_PLANS:
                    _PLANS.clear()
                plan = _PLANS[key] = _plan_2d(x, result, method)
            kernel, grid, block, shared_mem, scalars = plan
            launch(kernel, grid, block, (x, result, *scalars), shared_mem)
            return finish_out(result, out, direct)
        # A view of shape (batch, rows, cols) with element strides; reshape copies only when
        # the batch axes cannot be merged into one stride.
        stacked = x.reshape(-1, rows, cols)
        if any(s % x.itemsize for s in stacked.strides):
            stacked = _device.cupy.ascontiguousarray(stacked)
        index = index_type(result.size, span(stacked))
        to_index = INDEX_SCALARS[index]
        batch_stride, row_stride, col_stride = (to_index(s // x.itemsize) for s in stacked.strides)
        flat_out = result.reshape(-1, cols, rows)

        # 3. Launch: one matrix per blockIdx.z, so stacks deeper than gridDim.z allows take
        # several launches.
        batch = stacked.shape[0]
        chunks = [(stacked, flat_out)] if batch <= MAX_GRID_YZ else [
            (stacked[i:i + MAX_GRID_YZ], flat_out[i:i + MAX_GRID_YZ])
            for i in range(0, batch, MAX_GRID_YZ)]
        for chunk_in, chunk_out in chunks:
            kernel, grid, block, shared_mem = _kernel_for(chunk_in, chunk_out, rows, cols, method,
                                                          index)
            launch(kernel, grid, block, (chunk_in, chunk_out, to_index(rows), to_index(cols),
                                         batch_stride, row_stride, col_stride), shared_mem)
    return finish_out(result, out, direct)


def copy_ceiling(x, kind: str = "row"):
    """Copy a C-contiguous 2-D array with the row- or column-order copy kernel (benchmark ceiling).

    ``kind="row"`` reads and writes along rows, ``kind="col"`` along columns, one element per
    thread in the bandwidth study's 16 x 16 blocks: reference points for the naive rungs, not
    bounds on them (the rungs' narrower blocks run faster; benchmarks/NOTES.md, item 19).
    """
    x = _device.as_device_array(x, "x")
    if x.ndim != 2 or not x.flags.c_contiguous:
        raise ValueError("copy_ceiling needs a C-contiguous 2-D array")
    _check_dtype(x.dtype)
    if kind not in ("row", "col"):
        raise ValueError("kind must be 'row' or 'col'")
    rows, cols = x.shape
    with x.device:
        result = _device.cupy.empty_like(x)
        if x.size:
            x_extent, y_extent = (cols, rows) if kind == "row" else (rows, cols)
            grid = (ceil_div(x_extent, COPY_BLOCK[0]),
                    min(ceil_div(y_extent, COPY_BLOCK[1]), MAX_GRID_YZ), 1)
            index = index_type(x.size)
            to_index = INDEX_SCALARS[index]
            launch(KERNELS.function(_ceiling_name(kind, x.itemsize, index)), grid,
                   (*COPY_BLOCK, 1), (x, result, to_index(rows), to_index(cols)))
    return result
