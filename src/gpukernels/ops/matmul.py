"""Matrix multiply with NumPy's ``matmul`` semantics (1-D promotion, batching, broadcasting)."""

from __future__ import annotations

import builtins
import math
from dataclasses import dataclass
from typing import Any

import numpy

from .. import _compile, _device, _tensor_map
from .._common import (INDEX_SCALARS, MAX_GRID_YZ, Rung, allow_shared_memory, ceil_div, finish_out,
                      index_type, launch, multiprocessor_count, prepare_out, register_ladder,
                      resolve_method, span)

__all__ = ["matmul", "RUNGS", "KERNELS", "PRECISIONS", "matmul_shapes", "supports"]

#: The ladder, bottom rung first.
RUNGS = register_ladder("matmul", (
    Rung("naive", "one thread per output element, operands read straight from global memory"),
    Rung("tiled", "32x32 tiles of A and B staged in shared memory: each load feeds 32 FMAs"),
    Rung("blocked_1d", "64x64 tiles; each thread keeps 8 sums of one column in registers"),
    Rung("blocked_2d", "128x128 tiles; 8x8 sums per thread, A transposed in shared memory, "
                       "16-byte loads"),
    Rung("warp_tiled", "blocked_2d arranged by warps (conflict-free shared loads), two stages "
                       "in shared memory, one barrier per step, unchecked interior blocks"),
    Rung("large_tile", "warp_tiled with 16x8 sums per thread and 256x128 tiles (4-byte types)"),
    Rung("mma", "tensor cores (mma.sync, sm_80+): float16 in float32 sums; float32 as TF32, "
                "only with precision='tf32'"),
    Rung("wgmma", "Hopper tensor cores (wgmma, sm_90a): TMA copies tiles to shared memory, "
                  "warpgroup MMAs read them there; 128x256 tiles, loads and math in separate "
                  "warps"),
))

#: ``precision=`` values: "highest" computes in the result dtype (float16 in float32), "tf32"
#: lets float32 products run on TF32 tensor cores (10-bit mantissa operands).
PRECISIONS = ("highest", "tf32")
TENSOR_CORE_METHODS = ("mma", "wgmma")
_TENSOR_CORE_CC = 80  # mma.sync with float16 / TF32 operands, ldmatrix, cp.async
_WGMMA_CC = 90  # wgmma and TMA: compiled for sm_90a, which runs on compute capability 9.0 only


@dataclass(frozen=True)
class _Config:
    """How a rung is launched: threads per block, the tile of C a block computes, and whether
    its kernel takes the ALIGNED template flag (16-byte accesses when the host checked them)."""

    block: tuple[int, int, int]
    tile: tuple[int, int]  # (rows, columns) of C
    aligned_flag: bool = False
    tile_8_byte: tuple[int, int] | None = None  # the tile for 8-byte types, where it differs
    shared_mem: int = 0  # dynamic shared memory, bytes

    def tile_for(self, dtype: numpy.dtype) -> tuple[int, int]:
        return self.tile_8_byte if self.tile_8_byte and dtype.itemsize == 8 else self.tile


TILE = 32
_CONFIGS = {
    "naive": _Config((32, 8, 1), (8, 32)),  # a warp spans 32 columns of C: B coalesced, A broadcast
    "tiled": _Config((TILE, TILE, 1), (TILE, TILE)),
    "blocked_1d": _Config((512, 1, 1), (64, 64)),
    "blocked_2d": _Config((256, 1, 1), (128, 128), aligned_flag=True),
    "warp_tiled": _Config((256, 1, 1), (128, 128), aligned_flag=True),
    "large_tile": _Config((256, 1, 1), (256, 128), aligned_flag=True, tile_8_byte=(128, 128)),
    "mma": _Config((256, 1, 1), (128, 128), aligned_flag=True, shared_mem=65536),
    # 4 stages of a 128x128-byte A tile and a 256x128-byte B tile, plus 1 KiB to align them.
    "wgmma": _Config((384, 1, 1), (128, 256), shared_mem=4 * 49152 + 1024),
}
#: Threads of an edge tile form offsets up to this many rows or columns past each extent.
_MARGIN = 256

#: The kernels' element types. Every integer product runs on the unsigned type of its width
#: (arithmetic modulo 2^32 or 2^64 is NumPy's wrap-around for signed types too).
C_TYPES = {numpy.dtype(numpy.float32): "float", numpy.dtype(numpy.float64): "double",
           numpy.dtype(numpy.uint32): "unsigned int", numpy.dtype(numpy.uint64): "unsigned long long"}
#: The tensor-core rung's types: float16 (float32 sums) and float32 (as TF32).
TENSOR_CORE_C_TYPES = {numpy.dtype(numpy.float16): "gk_half", numpy.dtype(numpy.float32): "float"}


def _kernel_name(method: str, dtype: numpy.dtype, index: str, aligned: bool = False) -> str:
    types = TENSOR_CORE_C_TYPES if method in TENSOR_CORE_METHODS else C_TYPES
    if method == "wgmma":  # 32-bit indices (M, N, K < 2^31 checked), no alignment variants
        return f"matmul_wgmma<{types[dtype]}>"
    args = [types[dtype], index]
    if method == "tiled":
        args.append(str(TILE))
    if _CONFIGS[method].aligned_flag:
        args.append("true" if aligned else "false")
    return f"matmul_{method}<{', '.join(args)}>"


KERNELS = _compile.register("matmul.cu", [
    _kernel_name(rung.name, dtype, index, aligned)
    for rung in RUNGS if rung.name != "wgmma"
    for dtype in (TENSOR_CORE_C_TYPES if rung.name in TENSOR_CORE_METHODS else C_TYPES)
    for index in INDEX_SCALARS
    for aligned in ((False, True) if _CONFIGS[rung.name].aligned_flag else (False,))
])
#: The Hopper rung, in its own source: it is compiled for sm_90a, which no other GPU runs.
WGMMA_KERNELS = _compile.register(
    "matmul_wgmma.cu", [_kernel_name("wgmma", dtype, "int") for dtype in TENSOR_CORE_C_TYPES],
    arch="sm_90a")


def kernel_family(method: str) -> _compile.KernelFamily:
    """The compiled source that holds rung ``method``'s kernels."""
    return WGMMA_KERNELS if method == "wgmma" else KERNELS


def matmul_shapes(a_shape: tuple[int, ...], b_shape: tuple[int, ...]):
    """Resolve NumPy's matmul shape rules.

    Returns ``(batch_shape, M, K, N, out_shape)``, where a 1-D operand has been promoted (a
    leading or trailing 1 added) and that axis is absent from ``out_shape``. Raises ValueError
    with NumPy's meaning for 0-d operands, mismatched inner dimensions and unbroadcastable
    batch dimensions.
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


def _result_dtype(a_dtype: numpy.dtype, b_dtype: numpy.dtype) -> numpy.dtype:
    for dtype in (a_dtype, b_dtype):
        if dtype.kind not in "biufc":
            raise TypeError(f"matmul does not support dtype {dtype}")
    dtype = numpy.result_type(a_dtype, b_dtype)
    if dtype.kind == "c":
        raise TypeError(
            f"matmul has no complex kernels; inputs of {a_dtype} and {b_dtype} give {dtype}"
        )
    return dtype


def _compute_dtype(result: numpy.dtype, K: int, method: str) -> numpy.dtype:
    """The kernels' element type for a result dtype, on rung ``method``.

    float32 and float64 run as themselves; float16 runs as float16 on the tensor cores and in
    float32 elsewhere (operands converted, the result rounded once at the end); integers run
    modulo 2^32 or 2^64 on the unsigned type of at least their width, which truncates to NumPy's
    wrap-around; bool counts the true terms.
    """
    if result.kind == "f":
        if method in TENSOR_CORE_METHODS and result.itemsize == 2:
            return result
        return numpy.dtype(numpy.float64 if result.itemsize == 8 else numpy.float32)
    if result.kind == "b":
        return numpy.dtype(numpy.uint32 if K < 2**32 else numpy.uint64)
    return numpy.dtype(numpy.uint64 if result.itemsize == 8 else numpy.uint32)


def _has_tensor_cores(device) -> bool:
    return int(device.compute_capability) >= _TENSOR_CORE_CC


def _has_wgmma(device) -> bool:
    return int(device.compute_capability) == _WGMMA_CC


def _choose_method(method: object, dtype: numpy.dtype, precision: object, device,
                   shape: tuple[int, int, int, int] = (0, 0, 0, 0)) -> str:
    """Resolve ``method`` and check it against the dtype and ``precision``.

    ``shape`` is (batch, M, N, K). On the tensor cores "auto" takes wgmma on compute capability
    9.0 and mma elsewhere. Among the SIMT rungs it takes large_tile when its 256x128 tiles give
    every SM a block, and warp_tiled's 128x128 ones below that (H200: at 1024^3 warp_tiled ran
    at 0.40 of cuBLAS, large_tile with 32 blocks at 0.29; at 2048^3, 128 blocks, large_tile led
    0.82 to 0.73).
    """
    if not isinstance(precision, str) or precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
    tensor_cores = _has_tensor_cores(device)
    batch, M, N, K = shape
    if precision == "tf32" and dtype != numpy.float32:
        raise ValueError(f"precision='tf32' applies to float32 products; this one is {dtype}")
    method = resolve_method("matmul", method, auto="auto")
    if method == "auto":
        if precision == "tf32" or (dtype == numpy.float16 and tensor_cores):
            method = "wgmma" if _has_wgmma(device) and _wgmma_fits(M, N, K) else "mma"
        else:
            tiles = batch * ceil_div(M, _CONFIGS["large_tile"].tile[0]) * \
                ceil_div(N, _CONFIGS["large_tile"].tile[1])
            method = "large_tile" if tiles >= 0.9 * multiprocessor_count() else "warp_tiled"
    if method in TENSOR_CORE_METHODS:
        if dtype not in TENSOR_CORE_C_TYPES:
            raise TypeError(f"the tensor-core rung {method!r} multiplies float16, or float32 as "
                            f"TF32; the result dtype here is {dtype}")
        if dtype == numpy.float32 and precision != "tf32":
            raise ValueError(f"the tensor-core rung {method!r} computes float32 products in TF32 "
                             "(10-bit mantissas): pass precision='tf32' to accept that accuracy")
        if not tensor_cores:
            raise ValueError(f"the tensor-core rung {method!r} needs compute capability 8.0 or "
                             f"newer; GPU {device.id} has {device.compute_capability}")
        if method == "wgmma" and not _has_wgmma(device):
            raise ValueError(f"the rung 'wgmma' runs on compute capability 9.0 (Hopper, sm_90a) "
                             f"only; GPU {device.id} has {device.compute_capability}")
        if method == "wgmma" and not _wgmma_fits(M, N, K):
            raise ValueError(f"the rung 'wgmma' takes M, N and K below 2**31; this product is "
                             f"{M}x{K} @ {K}x{N}")
    elif precision == "tf32":
        raise ValueError(f"precision='tf32' runs on the tensor-core rungs {TENSOR_CORE_METHODS}, "
                         f"not on {method!r}")
    return method


def _wgmma_fits(M: int, N: int, K: int) -> bool:
    """The wgmma kernel indexes with 32-bit M, N, K (and TMA's coordinates are 32-bit)."""
    return max(M, N, K) < 2**31


def supports(method: str, dtype, precision: str = "highest") -> bool:
    """Whether rung ``method`` computes results of ``dtype`` at ``precision`` on this device."""
    try:
        _choose_method(method, numpy.dtype(dtype), precision, _device.cupy.cuda.Device())
    except (TypeError, ValueError):
        return False
    return True


def _stack(x, batch_shape, rows: int, cols: int, dtype: numpy.dtype):
    """``x`` as a (batch, rows, cols) view with element strides (copying only if needed)."""
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


def _is_aligned(dtype: numpy.dtype, N: int, operands, c_stack=None) -> bool:
    """Whether the ALIGNED kernels may use 16-byte accesses on these (batch, rows, cols) stacks:
    unit column strides, row and batch strides multiples of 16 bytes, 16-byte aligned data, and
    (for ``c_stack``, written 16 bytes at a time) N a multiple of 16 bytes too."""
    vector = 16 // dtype.itemsize
    for x in operands + ((c_stack,) if c_stack is not None else ()):
        batch_stride, row_stride, col_stride = (s // x.itemsize for s in x.strides)
        if x.data.ptr % 16 or (col_stride != 1 and x.shape[2] > 1) \
                or batch_stride % vector or row_stride % vector:
            return False
    return c_stack is None or N % vector == 0


def _launch_rung(method: str, a_stack, b_stack, c_stack, M: int, N: int, K: int) -> None:
    """Launch one of the rungs of ``matmul.cu`` on (batch, rows, cols) stacks."""
    compute = c_stack.dtype
    batch = a_stack.shape[0]
    config = _CONFIGS[method]
    aligned = config.aligned_flag and _is_aligned(
        compute, N, (a_stack, b_stack), None if method in TENSOR_CORE_METHODS else c_stack)
    index = index_type(c_stack.size, K, *(
        span(s) + _MARGIN * builtins.sum(abs(st) // s.itemsize for st in s.strides)
        for s in (a_stack, b_stack)))
    to_index = INDEX_SCALARS[index]
    strides = [to_index(s // a_stack.itemsize) for s in a_stack.strides + b_stack.strides]

    # Column tiles of C in x, row tiles in y, matrices in z. Problems past
    # gridDim.y's or gridDim.z's 65535 go in several launches, over row ranges of one matrix
    # at a time when M needs it (C's batch stride is M * N inside the kernel).
    kernel = KERNELS.function(_kernel_name(method, compute, index, aligned))
    if config.shared_mem > 48 * 1024:
        allow_shared_memory(kernel, config.shared_mem)
    tile_rows, tile_cols = config.tile_for(compute)
    rows_per_launch = MAX_GRID_YZ * tile_rows
    if M <= rows_per_launch:
        chunks = [(a_stack[i:i + MAX_GRID_YZ], b_stack[i:i + MAX_GRID_YZ],
                   c_stack[i:i + MAX_GRID_YZ], M) for i in range(0, batch, MAX_GRID_YZ)]
    else:
        chunks = [(a_stack[i:i + 1, r:r + rows_per_launch], b_stack[i:i + 1],
                   c_stack[i:i + 1, r:r + rows_per_launch], builtins.min(rows_per_launch, M - r))
                  for i in range(batch) for r in range(0, M, rows_per_launch)]
    for a_part, b_part, c_part, rows in chunks:
        grid = (ceil_div(N, tile_cols), ceil_div(rows, tile_rows), a_part.shape[0])
        launch(kernel, grid, config.block, (a_part, b_part, c_part, to_index(rows), to_index(N),
                                            to_index(K), to_index(a_part.shape[0]), *strides),
               shared_mem=config.shared_mem)


def _tma_operand(x):
    """``x``, a (batch, rows, cols) stack, as TMA can read it, and whether it holds a matrix per
    batch entry. An operand broadcast over the batch (batch stride 0) keeps one matrix; one that
    TMA cannot read as it is (a transposed view, rows not 16-byte aligned) is copied into a stack
    whose rows are padded to 16 bytes (the kernel never reads the padding: TMA fills the columns
    past the extent it is given with zeros)."""
    batched = x.shape[0] > 1 and x.strides[0] != 0
    if not batched:
        x = x[:1]
    if not _tensor_map.tma_compatible(x):
        unit = 16 // x.itemsize
        padded = _device.cupy.empty(x.shape[:2] + (ceil_div(x.shape[2], unit) * unit,), x.dtype)
        padded = padded[:, :, :x.shape[2]]
        padded[...] = x
        x = padded
    return x, batched


def _launch_wgmma(a_stack, b_stack, c_stack, M: int, N: int, K: int) -> None:
    """Launch the Hopper rung: tensor maps for A and B (B transposed first for TF32, whose
    wgmma reads both operands K-major), then one launch per 65535 matrices."""
    compute = c_stack.dtype
    if K == 0:  # no tiles to load; TMA cannot map an empty extent
        c_stack.fill(0)
        return
    if compute == numpy.float32:
        from .transpose import transpose  # (batch, K, N) -> (batch, N, K), K contiguous

        b_stack = transpose(b_stack if b_stack.strides[0] != 0 else b_stack[:1])
    a_op, a_batched = _tma_operand(a_stack)
    b_op, b_batched = _tma_operand(b_stack)
    config = _CONFIGS["wgmma"]
    tile_rows, tile_cols = config.tile
    box_cols = 128 // c_stack.itemsize  # 128-byte rows: the swizzle span
    # float16 B is read N-contiguous in boxes of 64 x 64; TF32's transposed B in one box of
    # 256 rows (columns of C) per stage.
    b_box_rows = 64 if compute == numpy.float16 else tile_cols
    kernel = WGMMA_KERNELS.function(_kernel_name("wgmma", compute, "int"))
    allow_shared_memory(kernel, config.shared_mem)
    tiles_m, tiles_n = ceil_div(M, tile_rows), ceil_div(N, tile_cols)
    batch = c_stack.shape[0]
    for start in range(0, batch, MAX_GRID_YZ):
        count = builtins.min(MAX_GRID_YZ, batch - start)
        a_part = a_op[start:start + count] if a_batched else a_op
        b_part = b_op[start:start + count] if b_batched else b_op
        a_map = _tensor_map.tiled_map(a_part, box_cols, tile_rows, a_batched)
        b_map = _tensor_map.tiled_map(b_part, box_cols, b_box_rows, b_batched)
        int32 = numpy.int32
        launch(kernel, (tiles_m * tiles_n, count, 1), config.block,
               (a_map, b_map, c_stack[start:start + count], int32(M), int32(N), int32(K),
                int32(tiles_m), int32(tiles_n), int32(a_batched), int32(b_batched)),
               shared_mem=config.shared_mem)


def matmul(a: Any, b: Any, *, method: str = "auto", out: Any = None, precision: str = "highest"):
    """Matrix product of two GPU arrays, with NumPy's ``matmul`` semantics.

    Parameters
    ----------
    a, b : cupy.ndarray or GPU arrays
        Operands of shapes ``(..., M, K)`` and ``(..., K, N)``. A 1-D operand is promoted to a
        matrix (``(K,)`` -> ``(1, K)`` for ``a``, ``(K, 1)`` for ``b``) and the added axis is
        removed from the result; batch axes broadcast. The result dtype is NumPy's (e.g. float32
        with float64 gives float64; int8 with int8 gives int8); ``K = 0`` gives zeros.
        Floating-point products accumulate with one fused multiply-add per term (float16 in
        float32, rounded once at the end); integer products are exact and wrap around like
        NumPy's; bool gives True where some term is True. Complex dtypes are not supported.
    method : str, optional
        A rung of ``gpukernels.methods("matmul")``, or ``"auto"``: the tensor cores for float16
        on compute capability 8.0 and newer (and for ``precision="tf32"``), ``"wgmma"`` on 9.0
        (Hopper) and ``"mma"`` on the others; else the fastest SIMT rung. The tensor-core rungs
        take float16, and float32 only as TF32. ``"wgmma"`` runs on compute capability 9.0 only;
        it copies operands whose rows are not 16-byte aligned into padded temporaries, and
        transposes B first for TF32.
    out : cupy.ndarray, optional
        Destination of the result's shape on the same device; its dtype must be one the result
        casts to under NumPy's ``same_kind`` rule.
    precision : {"highest", "tf32"}, optional
        ``"highest"`` (default) computes in the result dtype (float16 in float32). ``"tf32"``
        lets a float32 product run on the TF32 tensor cores: each operand is rounded to a
        10-bit mantissa, so elements are accurate to about ``2**-10 * (|a| @ |b|)`` instead of
        float32's ``K * 2**-24``. Never chosen unless asked for.

    Returns
    -------
    cupy.ndarray
        ``a @ b``, C-contiguous (``out`` if given).

    Raises
    ------
    TypeError
        An operand is not a GPU array, or the result dtype has no kernel (complex; for the
        tensor-core rung, anything but float16 and float32).
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
    # 1. Validate.
    a = _device.as_device_array(a, "a")
    b = _device.as_device_array(b, "b")
    _device.check_same_device(("a", a), ("b", b))
    dtype = _result_dtype(a.dtype, b.dtype)
    batch_shape, M, K, N, out_shape = matmul_shapes(a.shape, b.shape)
    method = _choose_method(method, dtype, precision, a.device,
                            (math.prod(batch_shape), M, N, K))
    compute = _compute_dtype(dtype, K, method)
    direct = out is not None and prepare_out(out, out_shape, dtype, a.device.id, (a, b))

    with a.device:
        # 2. Allocate: the kernels write a C-contiguous (batch, M, N) stack of `compute`, straight
        # into the result when it has that layout (an integer result as its unsigned view).
        cupy = _device.cupy
        result = out if direct else cupy.empty(out_shape, dtype=dtype)
        if result.size == 0:
            return finish_out(result, out, direct)
        in_place = dtype == compute or (dtype.kind in "iu" and dtype.itemsize == compute.itemsize)
        if in_place:
            c_stack = result.view(compute).reshape(-1, M, N)
        else:
            c_stack = cupy.empty((math.prod(batch_shape), M, N), dtype=compute)
        a_stack = _stack(a, batch_shape, M, K, compute)
        b_stack = _stack(b, batch_shape, K, N, compute)
        # 3. Launch.
        if method == "wgmma":
            _launch_wgmma(a_stack, b_stack, c_stack, M, N, K)
        else:
            _launch_rung(method, a_stack, b_stack, c_stack, M, N, K)

        # 4. Narrow: float16 results rounded once, integers truncated modulo 2^width (through
        # the unsigned type of that width, a well-defined conversion), bool counts to truth.
        if not in_place:
            c = c_stack.reshape(out_shape)
            if dtype.kind == "b":
                cupy.not_equal(c, 0, out=result)
            elif dtype.kind in "iu":
                result[...] = c.astype(numpy.dtype(f"u{dtype.itemsize}")).view(dtype)
            else:
                result[...] = c
    return finish_out(result, out, direct)
