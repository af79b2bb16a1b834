"""The matmul ladder: its rungs, their instances, and their plans (launch geometry).

Every number that shapes a launch (the block tile of C, threads, stages, shared memory) is set
here and reaches the kernel as a template argument; the kernels in ``kernels/matmul/``
static_assert that they are written for it. A plan maps a :class:`Problem` to a :class:`Shape`
of launch: the instance, its block and tile (the wrapper makes the grid and splits problems past
CUDA's grid limits). :func:`choose` is ``method="auto"``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy

from ..._core.compile import KernelSource
from ..._core.floats import BFLOAT16
from ..._core.ladder import Ladder, Needs, Rung
from ..._core.launch import INDEX_SCALARS, ceil_div

__all__ = ["Problem", "Shape", "LADDER", "choose", "PRECISIONS", "compute_dtype",
           "TENSOR_CORE_C_TYPES", "C_TYPES", "HALF_TYPES", "HOPPER_RUNGS"]

SIMT_SOURCE = KernelSource("matmul/simt.cu", weight=6.0)
MMA_SOURCE = KernelSource("matmul/mma.cu", weight=6.0)
#: The Hopper rung: compiled for sm_90a, which no other GPU runs.
WGMMA_SOURCE = KernelSource("matmul/wgmma.cu", arch="sm_90a", weight=6.0)
INDEXES = tuple(INDEX_SCALARS)

#: ``precision=`` values: "highest" computes in the result dtype (float16 in float32), "tf32"
#: lets float32 products run on TF32 tensor cores (10-bit mantissa operands).
PRECISIONS = ("highest", "tf32")

#: The SIMT kernels' element types. Every integer product runs on the unsigned type of its width
#: (arithmetic modulo 2^32 or 2^64 is NumPy's wrap-around for signed types too).
C_TYPES: dict[numpy.dtype, str] = {numpy.dtype(numpy.float32): "float", numpy.dtype(numpy.float64): "double",
           numpy.dtype(numpy.uint32): "unsigned int", numpy.dtype(numpy.uint64): "unsigned long long"}
#: The tensor-core rungs' types: float16 and bfloat16 (float32 sums), float32 (as TF32).
TENSOR_CORE_C_TYPES: dict[numpy.dtype, str] = {numpy.dtype(numpy.float16): "gk_half",
                                               BFLOAT16: "gk_bfloat16",
                                               numpy.dtype(numpy.float32): "float"}
#: The 16-bit float dtypes, which run on the tensor cores wherever there are some.
HALF_TYPES = (numpy.dtype(numpy.float16), BFLOAT16)
TENSOR_CORE_CAPABILITY = 80  # mma.sync with 16-bit / TF32 operands, ldmatrix, cp.async
WGMMA_CAPABILITY = 90  # wgmma and TMA: compiled for sm_90a, which runs on compute capability 9.0 only
#: Threads of an edge tile form offsets up to this many rows or columns past each extent.
MARGIN = 256


@dataclass(frozen=True)
class Problem:
    """A product of ``batch`` matrices, C[b] = A[b] @ B[b] with A[b] M x K and B[b] K x N.

    Attributes
    ----------
    batch, M, N, K : int
    dtype : numpy.dtype
        The result's dtype (NumPy's promotion of the operands').
    precision : str
        ``"highest"`` or ``"tf32"``.
    capability : int
        The device's compute capability (90 for 9.0).
    multiprocessors : int
        Its SM count (what ``auto`` fills).
    b_as_is : bool
        Whether TMA reads B as it is (N-contiguous rows 16 bytes apart); the Hopper rungs read
        a 16-bit ``W.T`` of a row-major W K-major and copy any other B into a padded stack on
        every call.
    """

    batch: int
    M: int
    N: int
    K: int
    dtype: numpy.dtype
    precision: str
    capability: int
    multiprocessors: int
    b_as_is: bool = True


@dataclass(frozen=True)
class Shape:
    """The launch a rung's plan chooses for a problem: instances by (compute type, index,
    aligned), the block, the tile of C a block computes (grid = tiles of C, matrices in z), and
    the dynamic shared memory."""

    rung: Rung
    block: tuple[int, int, int]
    tile: tuple[int, int]
    shared_mem: int
    compute: numpy.dtype
    aligned_flag: bool  # the kernel takes ALIGNED (16-byte accesses when the host checked them)
    aligned_c: bool = False  # ALIGNED also stores C 16 bytes at a time (the SIMT rungs)
    splits: int = 1  # split_k: slices of K, each of k_steps stages
    k_steps: int = 0
    #: wgmma's 16-bit types: at most this many blocks per matrix, each taking tiles
    #: blockIdx.x, blockIdx.x + gridDim.x, ... (0: a block per tile)
    persistent_blocks: int = 0
    #: multicast: blocks per cluster, each cluster walking groups of this many row tiles (its
    #: grid as many clusters as the device runs at once, :func:`resident_clusters`)
    cluster: int = 1

    def instance(self, index: str, aligned: bool = False, layout: int = 0, *,
                 b_k_major: bool = False, a_m_major: bool = False) -> str:
        """The kernel instance: for the SIMT rungs and mma by index type and the operands'
        alignment; for gemv by how it reads B (``layout``: GEMV_ANY, GEMV_ROWS, GEMV_COLUMNS or
        GEMV_COLUMN_WORDS, as :func:`gemv_layout` tells them); for the Hopper rungs by type,
        tile and, for the 16-bit types, whether they read B K-major (``b_k_major``: ``W.T`` of a
        row-major W) and A M-major (``a_m_major``: ``X.T`` of a row-major X)."""
        if self.rung.name in HOPPER_RUNGS:  # one instance per type, tile and operand order
            half = self.compute.itemsize == 2
            return hopper_instance(self.rung.name, self.compute, self.tile, b_k_major and half,
                                   a_m_major and half)
        if self.rung.name == "gemv":  # 32-bit loop indices, 64-bit offsets
            return _gemv_instance(self.compute, self.tile[0], layout)
        return _INSTANCE[self.rung.name](self.compute, index, aligned and self.aligned_flag)


def compute_dtype(result: numpy.dtype, K: int, tensor_cores: bool) -> numpy.dtype:
    """The kernels' element type for a result dtype.

    float32 and float64 run as themselves; float16 and bfloat16 run as themselves on the tensor
    cores and in float32 elsewhere (operands converted, the result rounded once at the end);
    integers run modulo 2^32 or 2^64 on the unsigned type of at least their width, which
    truncates to NumPy's wrap-around; bool counts the true terms.
    """
    if result in HALF_TYPES:
        return result if tensor_cores else numpy.dtype(numpy.float32)
    if result.kind == "f":
        return numpy.dtype(numpy.float64 if result.itemsize == 8 else numpy.float32)
    if result.kind == "b":
        return numpy.dtype(numpy.uint32 if K < 2**32 else numpy.uint64)
    return numpy.dtype(numpy.uint64 if result.itemsize == 8 else numpy.uint32)


# --- rungs 1-6: the CUDA cores (kernels/matmul/simt.cu) -----------------------------------------------

TILED_TILE = 32


@dataclass(frozen=True)
class _Simt:
    """A SIMT rung's geometry: threads per block, the tile of C (rows, columns), whether the
    kernel takes the ALIGNED flag, the tile for 8-byte types where it differs, and which of the
    numbers are the kernel's template arguments: ``"tile"`` (TILE, a square tile of
    TILE x TILE threads), ``"tile and threads"`` (BM, BN, THREADS) or ``""`` (none: the kernel
    reads blockDim)."""

    block: tuple[int, int, int]
    tile: tuple[int, int]
    aligned_flag: bool = False
    tile_8_byte: tuple[int, int] | None = None
    template: str = "tile and threads"

    def tile_for(self, dtype: numpy.dtype) -> tuple[int, int]:
        return self.tile_8_byte if self.tile_8_byte and dtype.itemsize == 8 else self.tile

    def template_args(self, dtype: numpy.dtype) -> list[str]:
        rows, cols = self.tile_for(dtype)
        if self.template == "tile":
            return [str(rows)]
        if self.template == "tile and threads":
            return [str(rows), str(cols), str(self.block[0])]
        return []


SIMT = {
    # a warp spans 32 columns of C: B coalesced, A broadcast
    "naive": _Simt((32, 8, 1), (8, 32), template=""),
    "tiled": _Simt((TILED_TILE, TILED_TILE, 1), (TILED_TILE, TILED_TILE), template="tile"),
    "blocked_1d": _Simt((512, 1, 1), (64, 64)),
    "blocked_2d": _Simt((256, 1, 1), (128, 128), aligned_flag=True),
    "warp_tiled": _Simt((256, 1, 1), (128, 128), aligned_flag=True),
    "large_tile": _Simt((256, 1, 1), (256, 128), aligned_flag=True, tile_8_byte=(128, 128)),
}


def _simt_instance(name: str) -> Callable[[numpy.dtype, str, bool], str]:
    geometry = SIMT[name]

    def instance(compute: numpy.dtype, index: str, aligned: bool) -> str:
        args = [C_TYPES[compute], index]
        if geometry.aligned_flag:
            args.append("true" if aligned else "false")
        args += geometry.template_args(compute)
        return f"matmul_{name}<{', '.join(args)}>"

    return instance


def _check_simt(p: Problem, name: str) -> numpy.dtype:
    if p.precision == "tf32":
        raise ValueError(f"precision='tf32' runs on the tensor-core rungs mma and wgmma, not on "
                         f"{name!r}")
    return compute_dtype(p.dtype, p.K, tensor_cores=False)


def _simt_plan(name: str) -> Callable[[Problem], Shape]:
    geometry = SIMT[name]

    def plan(p: Problem) -> Shape:
        compute = _check_simt(p, name)
        return Shape(LADDER[name], geometry.block, geometry.tile_for(compute), 0, compute,
                     geometry.aligned_flag, aligned_c=geometry.aligned_flag)

    return plan


# --- rung 7: mma (kernels/matmul/mma.cu) ----------------------------------------------------------------

MMA_THREADS = 256
MMA_TILE = (128, 128)
MMA_STAGES = 4
MMA_ROW_BYTES = 64  # the K extent of a stage, in bytes of a row of A
MMA_SHARED_BYTES = MMA_STAGES * (MMA_TILE[0] + MMA_TILE[1]) * MMA_ROW_BYTES


def _mma_instance(compute: numpy.dtype, index: str, aligned: bool) -> str:
    return (f"matmul_mma<{TENSOR_CORE_C_TYPES[compute]}, {index}, {'true' if aligned else 'false'}, "
            f"{MMA_THREADS}, {MMA_TILE[0]}, {MMA_TILE[1]}, {MMA_STAGES}, {MMA_SHARED_BYTES}>")


def _check_tensor_cores(p: Problem, name: str) -> numpy.dtype:
    if p.dtype not in TENSOR_CORE_C_TYPES:
        raise TypeError(f"the tensor-core rung {name!r} multiplies float16 and bfloat16, or "
                        f"float32 as TF32; the result dtype here is {p.dtype}")
    if p.dtype == numpy.float32 and p.precision != "tf32":
        raise ValueError(f"the tensor-core rung {name!r} computes float32 products in TF32 "
                         "(10-bit mantissas): pass precision='tf32' to accept that accuracy")
    if p.capability < TENSOR_CORE_CAPABILITY:
        raise ValueError(f"the tensor-core rung {name!r} needs compute capability 8.0 or newer; "
                         f"this GPU has {p.capability / 10:.1f}")
    return compute_dtype(p.dtype, p.K, tensor_cores=True)


def plan_mma(p: Problem) -> Shape:
    compute = _check_tensor_cores(p, "mma")
    return Shape(LADDER["mma"], (MMA_THREADS, 1, 1), MMA_TILE, MMA_SHARED_BYTES, compute, True)


#: The 32-bit kernels of the tensor-core rungs (gemv, and the Hopper rungs wgmma, split_k and
#: multicast) add to K and N in 32-bit arithmetic: a split's rows to its first row, a stage's
#: 64 to K when counting stages, the steps in flight to a warp's row, a tile's width to its
#: first column. Below this bound none of those sums passes 2**31 - 1. Past it they wrap:
#: from K = 2**31 - 63 the Hopper rungs count no stage (C all zeros), and from within about
#: 70000 of 2**31 gemv's last split of K ends before it begins (its terms dropped), with no
#: error (read from the kernels and their PTX; NOTES 217). Larger products run on mma, whose
#: index type widens to 64 bits where they need it.
TENSOR_CORE_32_BIT_EXTENT = 2**31 - 2**27


# --- rung 10: gemv (kernels/matmul/mma.cu) --------------------------------------------------------------

#: Geometry by the rows of C a block computes (:func:`gemv_rows`): (threads, steps of B in
#: flight, blocks an SM). NOTES 150 swept them on an H100 (raw launches, per call, float16,
#: K = N = 8192): eight rows 0.0589 ms at (512, 3, 1) against 0.0612 at (256, 3, 2), sixteen
#: 0.0647 at (256, 2, 2) against 0.0669 at (256, 3, 2); sixteen rows in 512 threads would need
#: 64 KiB of warp sums.
GEMV_GEOMETRY = {8: (512, 3, 1), 16: (256, 2, 2)}
GEMV_COLS = 64  # columns of C per block: a warp's 16 rows of B are whole 128-byte lines
GEMV_WARP_ROWS = 16  # rows of B a warp takes per step: an mma's K
#: ``auto`` takes gemv for products of at most this many rows: two mma columns of 8 rows.
GEMV_MAX_ROWS = 16
#: On Hopper, ``auto`` takes gemv in split_k's place for products of at most this many rows:
#: one launch where split_k takes two, level held and 3-9% ahead per call at 1 and 8 rows of
#: K = N = 8192; split_k stays ahead at 16 rows (NOTES 154).
GEMV_HOPPER_MAX_ROWS = 8
#: A split of K gives each warp at least this many steps (its loads' latency amortised).
GEMV_MIN_WARP_STEPS = 4


def gemv_rows(M: int) -> int:
    """Rows of C a gemv block computes: 8 (one mma column of A) for M up to 8, else 16."""
    return 8 if M <= 8 else 16


#: How gemv reads B (the kernel's LAYOUT): element by element (any strides), 16-byte words of
#: N-contiguous rows, 8-byte words of K-contiguous columns (B = W.T of a row-major W), or
#: 16-byte words of such columns where they are 16-byte aligned (a warp's step then takes 32
#: rows of B, two mmas' K).
GEMV_ANY, GEMV_ROWS, GEMV_COLUMNS, GEMV_COLUMN_WORDS = 0, 1, 2, 3
GEMV_LAYOUTS = (GEMV_ANY, GEMV_ROWS, GEMV_COLUMNS, GEMV_COLUMN_WORDS)
#: Steps of B in flight for GEMV_COLUMN_WORDS: a step holds eight 16-byte words a lane, and
#: three would spill (ptxas, sm_90: 96 bytes of stack at 512 threads).
GEMV_COLUMN_WORDS_DEPTH = 2


def gemv_warp_rows(layout: int) -> int:
    """Rows of B (of K) a warp takes per step: an mma's K, or two for GEMV_COLUMN_WORDS."""
    return 2 * GEMV_WARP_ROWS if layout == GEMV_COLUMN_WORDS else GEMV_WARP_ROWS


def _gemv_instance(compute: numpy.dtype, rows: int, layout: int) -> str:
    threads, depth, blocks = GEMV_GEOMETRY[rows]
    if layout == GEMV_COLUMN_WORDS:
        depth = GEMV_COLUMN_WORDS_DEPTH
    return (f"matmul_gemv<{TENSOR_CORE_C_TYPES[compute]}, {threads}, {rows // 8}, {depth}, "
            f"{blocks}, {layout}>")


def gemv_layout(b_stack: Any) -> int:
    """How gemv reads ``b_stack`` ((batch, K, N) with its strides): whole 16-byte words of
    rows where they are N-contiguous and aligned, 16-byte (else 8-byte) words of columns where
    they are K-contiguous and so aligned, else element by element."""
    batch, K, N = b_stack.shape
    unit = 16 // b_stack.itemsize
    batch_stride, row_stride, col_stride = (st // b_stack.itemsize for st in b_stack.strides)
    if batch == 1:
        batch_stride = 0  # one matrix: no stride between matrices to align
    address = b_stack.data.ptr
    if address % 16 == 0 and (col_stride == 1 or N == 1) and row_stride % unit == 0 and \
            batch_stride % unit == 0:
        return GEMV_ROWS
    if address % 16 == 0 and (row_stride == 1 or K == 1) and col_stride % unit == 0 and \
            batch_stride % unit == 0:
        return GEMV_COLUMN_WORDS
    if address % 8 == 0 and (row_stride == 1 or K == 1) and col_stride % (unit // 2) == 0 and \
            batch_stride % (unit // 2) == 0:
        return GEMV_COLUMNS
    return GEMV_ANY


def gemv_splits(K: int, blocks: int, slots: int, threads: int,
                warp_rows: int = GEMV_WARP_ROWS) -> tuple[int, int]:
    """(splits, rows of K each) for a gemv launch of ``blocks`` blocks of ``threads`` per
    split where the GPU runs ``slots`` at once: enough splits of K to fill them (a wave, not
    more), each a whole number of the block's steps (warps x ``warp_rows``, :func:`gemv_warp_
    rows`) and at least GEMV_MIN_WARP_STEPS steps a warp."""
    step = threads // 32 * warp_rows
    most = max(1, K // (GEMV_MIN_WARP_STEPS * step))
    splits = max(1, min(most, slots // max(1, blocks)))
    rows = ceil_div(ceil_div(max(K, 1), splits), step) * step
    return ceil_div(max(K, 1), rows), rows


def plan_gemv(p: Problem) -> Shape:
    """float16 and bfloat16 on compute capability 8.0 and newer, any M (row tiles of
    :func:`gemv_rows`), 64-column tiles; the wrapper sizes the splits of K
    (:func:`gemv_splits`) and the grid."""
    if p.dtype not in HALF_TYPES:
        raise TypeError(f"the gemv rung multiplies float16 and bfloat16; the result dtype here "
                        f"is {p.dtype} (TF32 products run on mma, wgmma and split_k)")
    compute = _check_tensor_cores(p, "gemv")
    if max(p.M, p.N, p.K) >= TENSOR_CORE_32_BIT_EXTENT:
        raise ValueError(f"the gemv rung takes M, N and K below 2**31 - 2**27; this product "
                         f"is {p.M}x{p.K} @ {p.K}x{p.N} (method='mma' takes it)")
    rows = gemv_rows(p.M)
    return Shape(LADDER["gemv"], (GEMV_GEOMETRY[rows][0], 1, 1), (rows, GEMV_COLS), 0, compute,
                 True)


# --- rung 8: wgmma (kernels/matmul/wgmma.cu) ----------------------------------------------------------

WGMMA_THREADS = 384  # a producer warpgroup and two consumers
WGMMA_TILE = (128, 256)
WGMMA_ROW_BYTES = 128  # the K extent of a stage: 128 bytes, the swizzle span
#: Stages of the ring by tile (rows, columns): for 128 rows 4 of 48 KiB (256 columns), 5 of
#: 40 KiB (192), 6 of 32 KiB (128) or 8 of 24 KiB (64); for 64 rows 5 of 40 KiB (256) or 8 of
#: 24 KiB (128).
WGMMA_STAGES = {(128, 256): 4, (128, 192): 5, (128, 128): 6, (128, 64): 8, (64, 256): 5,
                (64, 128): 8, (256, 128): 4}
#: Rows of the Hopper rungs' tile where M is at most that many (NOTES 102): its two consumer
#: warpgroups split the columns instead of the rows.
WGMMA_SHORT_ROWS = 64
#: wgmma's narrower tile, where 128 x 256 tiles would leave SMs idle (NOTES 94).
WGMMA_SMALL_TILE = (128, 128)
#: The 16-bit types' tile between the two, where its waves over the SMs cost least (NOTES 132).
WGMMA_MID_TILE = (128, 192)
#: What a wave of blocks over the SMs costs by tile width, in sixths of a wave of 128 x 256
#: tiles: the 128-column wave at two thirds is NOTES 94's measured rule (128 x 128 tiles where
#: their half-length waves number at most one and a half times the wide ones); the 192-column
#: wave is the straight line between (a fixed cost per block, then its columns).
WGMMA_WAVE_COST = {WGMMA_TILE: 6, WGMMA_MID_TILE: 5, WGMMA_SMALL_TILE: 4}
#: The Hopper rungs' tile where N is at most 64 (NOTES 101).
WGMMA_NARROW_TILE = (128, 64)
#: wgmma's TF32 tile in place of 128 x 256: B read as it is into registers, no transposed
#: copy of it (wgmma.cu's gk_wg_tf32_block); 4 stages of 48 KiB.
WGMMA_TF32_TILE = (256, 128)
#: TF32's tile for M of at most 64 (in place of 64 x 256 and 64 x 128): B read as it is, as on
#: WGMMA_TF32_TILE; 8 stages of 24 KiB.
WGMMA_TF32_SHORT_TILE = (64, 128)
#: TF32's tile in place of each of the other types' (128 x 128 and 128 x 64 themselves: 6
#: stages of 32 KiB, 8 of 24 KiB, both with m64n128 products). Every one reads B as it is
#: (wgmma.cu's gk_wg_tf32_block). TF32 has no 128 x 192 tile: its plans never take it.
TF32_TILES = {WGMMA_TILE: WGMMA_TF32_TILE, WGMMA_SMALL_TILE: WGMMA_SMALL_TILE,
              WGMMA_NARROW_TILE: WGMMA_NARROW_TILE,
              (64, 256): WGMMA_TF32_SHORT_TILE, (64, 128): WGMMA_TF32_SHORT_TILE}
#: The tiles of matmul_wgmma and matmul_split_k: every type's, TF32's as :func:`hopper_tile`
#: maps them, and 128 x 192 for the 16-bit types only.
WGMMA_TILES = tuple(tile for tile in WGMMA_STAGES if tile != WGMMA_TF32_TILE)


def hopper_tile(tile: tuple[int, int], compute: numpy.dtype, rows: int | None = None
                ) -> tuple[int, int]:
    """The Hopper rungs' tile for ``compute``: TF32 takes its own (:data:`TF32_TILES`), and
    where M (``rows``) is at most 128 takes 128 x 128 in place of 256 x 128, whose rows 128-255
    would be zeros."""
    if compute != numpy.float32:
        return tile
    tile = TF32_TILES.get(tile, tile)
    if tile == WGMMA_TF32_TILE and rows is not None and rows <= WGMMA_SMALL_TILE[0]:
        return WGMMA_SMALL_TILE
    return tile


#: The epilogue's buffer after the ring: both consumer warpgroups' 64 rows of 128 bytes of C,
#: each padded by 16 bytes (wgmma.cu's gk_wg_store_tile).
WGMMA_STAGED_BYTES = 2 * 64 * (WGMMA_ROW_BYTES + 16)


def wgmma_shared_bytes(tile: tuple[int, int]) -> int:
    """The stages of A and B tiles, the epilogue's buffer (which TF32's tiles leave unused:
    they stage C in the ring), and 1 KiB to align them to 1024 bytes."""
    return (WGMMA_STAGES[tile] * (tile[0] + tile[1]) * WGMMA_ROW_BYTES + WGMMA_STAGED_BYTES
            + 1024)


#: float16 and bfloat16 B is read N-contiguous in boxes of 64 rows of 64 columns.
WGMMA_F16_B_BOX = 64


def hopper_instance(name: str, compute: numpy.dtype, tile: tuple[int, int],
                    b_k_major: bool = False, a_m_major: bool = False) -> str:
    """An instance of a Hopper rung: one per type and tile (32-bit indices; TMA reads any
    layout), and for the 16-bit types three more: one that reads B K-major (``b_k_major``: B
    is the transposed view of a row-major (N, K) array, as ``W.T`` in ``x @ W.T``, read as it
    is), one that reads A M-major (``a_m_major``: A is the transposed view of a row-major
    (K, M) array, as ``X.T`` in ``X.T @ Y``), and one that does both."""
    orders = (", true, true" if a_m_major else ", true") if b_k_major else \
        (", false, true" if a_m_major else "")
    return (f"matmul_{name}<{TENSOR_CORE_C_TYPES[compute]}, {WGMMA_THREADS}, {tile[0]}, "
            f"{tile[1]}, {WGMMA_STAGES[tile]}, {wgmma_shared_bytes(tile)}{orders}>")


def wgmma_fits(p: Problem) -> bool:
    """The Hopper kernels index with 32-bit M, N, K (and TMA's coordinates are 32-bit)."""
    return max(p.M, p.N, p.K) < TENSOR_CORE_32_BIT_EXTENT


def _check_hopper(p: Problem, name: str) -> numpy.dtype:
    compute = _check_tensor_cores(p, name)
    if p.capability != WGMMA_CAPABILITY:
        raise ValueError(f"the rung {name!r} runs on compute capability 9.0 (Hopper, sm_90a) "
                         f"only; this GPU has {p.capability / 10:.1f}")
    if not wgmma_fits(p):
        raise ValueError(f"the rung {name!r} takes M, N and K below 2**31 - 2**27; this "
                         f"product is {p.M}x{p.K} @ {p.K}x{p.N} (method='mma' takes it)")
    return compute


def takes_mid_tile(compute: numpy.dtype, rows: int | None = None) -> bool:
    """Whether WGMMA_MID_TILE (128 x 192) is among a product's tiles: for the 16-bit types
    only (TF32's block, B read into registers, has no 192-column form), and only for M above
    WGMMA_SHORT_ROWS (shorter products take 64-row tiles, none of them 192 wide); ``rows``
    None asks for any M (the instances to compile)."""
    return compute != numpy.float32 and (rows is None or rows > WGMMA_SHORT_ROWS)


def wgmma_tile(p: Problem, compute: numpy.dtype) -> tuple[int, int]:
    """wgmma's tile of C. 128 x 64 where N is at most 64: as many blocks as any wider tile,
    none multiplying columns of zeros. Otherwise the tile whose waves of blocks over the SMs
    cost least (:data:`WGMMA_WAVE_COST`), 128 x 128 first, then 128 x 192 (16-bit types, M
    above 64), then 128 x 256. So 128 x 128 wherever N is at most 128 (as many blocks as the
    wider tiles, each with less work), and otherwise where its waves number at most one and a
    half times the wide tiles' (up to half as many wide tiles as SMs: one wave of half-length
    blocks instead of one of full ones). 128 x 192 where N is at most 192, and where the wide
    tiles' last wave leaves many SMs idle: 72 wide tiles (768 x 3072 of C) are one wave on 132
    SMs of which 60 idle, 96 tiles of 192 columns one wave with 36 idle."""
    if p.N <= WGMMA_NARROW_TILE[1]:
        return WGMMA_NARROW_TILE
    tiles = [WGMMA_SMALL_TILE, WGMMA_TILE]
    if takes_mid_tile(compute, p.M):
        tiles.insert(1, WGMMA_MID_TILE)
    return min(tiles, key=lambda tile: WGMMA_WAVE_COST[tile]
               * ceil_div(wgmma_tiles(p, tile), p.multiprocessors))


def _short_rows(p: Problem, tile: tuple[int, int]) -> tuple[int, int]:
    """``tile`` with 64 rows where M is at most 64 and the tile is 256 or 128 columns wide:
    the rows 64-127 of a 128-row tile would be zeros, multiplied by one of the two consumer
    warpgroups; with 64 rows they split the columns."""
    if p.M <= WGMMA_SHORT_ROWS and (WGMMA_SHORT_ROWS, tile[1]) in WGMMA_STAGES:
        return (WGMMA_SHORT_ROWS, tile[1])
    return tile


def plan_wgmma(p: Problem) -> Shape:
    compute = _check_hopper(p, "wgmma")
    tile = hopper_tile(_short_rows(p, wgmma_tile(p, compute)), compute, p.M)
    # 16-bit types whose rows of C are whole 16-byte words: a block per SM, each walking the
    # tiles (its ring refills while it stores a tile; NOTES 135). Elsewhere a block per tile:
    # TF32's kernel takes one, and rows of C stored element by element make the tiles' times
    # uneven, which a block per tile evens out (4096 x 4096 x 4099: 0.45 ms a block per tile,
    # 0.49-0.56 walking).
    walks = compute != numpy.float32 and p.N % (16 // compute.itemsize) == 0
    persistent = p.multiprocessors if walks else 0
    return Shape(LADDER["wgmma"], (WGMMA_THREADS, 1, 1), tile, wgmma_shared_bytes(tile),
                 compute, False, persistent_blocks=persistent)


# --- rung 11: multicast (kernels/matmul/wgmma.cu) ----------------------------------------------

#: Blocks per cluster of the multicast rung (wgmma.cu's GK_WG_CLUSTER): two tiles of C one above
#: the other, which share each stage's B.
MULTICAST_CLUSTER = 2
#: Its one tile: wgmma's widest, whose 32 KiB of B a stage the two blocks share.
MULTICAST_TILE = (128, 256)


def plan_multicast(p: Problem) -> Shape:
    """float16 and bfloat16 on compute capability 9.0: 128 x 256 tiles in clusters of two
    (wgmma.cu's rung 11), every cluster walking pairs of row tiles; the wrapper sizes the grid
    to the clusters the device runs at once."""
    if p.dtype not in HALF_TYPES:
        raise TypeError(f"the multicast rung multiplies float16 and bfloat16; the result dtype "
                        f"here is {p.dtype} (TF32 products run on mma, wgmma and split_k)")
    compute = _check_hopper(p, "multicast")
    return Shape(LADDER["multicast"], (WGMMA_THREADS, 1, 1), MULTICAST_TILE,
                 wgmma_shared_bytes(MULTICAST_TILE), compute, False,
                 cluster=MULTICAST_CLUSTER)


# --- rung 9: split_k (kernels/matmul/wgmma.cu) -----------------------------------------------------

#: A slice of K is at least this many stages (256 of K for 16-bit types), so that its pipeline
#: fills; at most this many slices.
SPLIT_K_MIN_STEPS = 4
SPLIT_K_MAX_SPLITS = 16
#: ``auto`` takes split_k only where wgmma would leave most SMs idle for a long K: at most
#: one wide (128 x 256) tile of C per 8 SMs and K of at least SPLIT_K_AUTO_MIN_STEPS stages
#: (2048 of K for 16-bit types), or at most one per 4 SMs and K of at least
#: SPLIT_K_AUTO_LONG_STEPS stages (6144). Elsewhere wgmma's 128 x 128 tile fills the SMs well
#: enough that split_k's second launch and float32 partials cost more than its slices save.
#: Over the shape suite (H100, float16, NOTES 95) this rule's geometric mean held is 0.80 of
#: cuBLAS, as much as the faster of the two on every product (wgmma alone: 0.75; item 88's
#: rule, K from 24 stages: 0.77).
SPLIT_K_AUTO_MIN_STEPS = 32
SPLIT_K_AUTO_LONG_STEPS = 96
SPLIT_K_SUM_THREADS = 256  # threads per block of matmul_split_k_sum


def wgmma_tiles(p: Problem, tile: tuple[int, int] = WGMMA_TILE) -> int:
    """Tiles of C of the Hopper rungs (128 x 256 each unless ``tile`` says), over every
    matrix."""
    return p.batch * ceil_div(p.M, tile[0]) * ceil_div(p.N, tile[1])


def wgmma_steps(p: Problem, compute: numpy.dtype) -> int:
    """Stages of K of the Hopper rungs (128 bytes of K each: 64 16-bit or 32 TF32 values)."""
    return max(1, ceil_div(p.K, WGMMA_ROW_BYTES // compute.itemsize))


def _split_k_pays(p: Problem, compute: numpy.dtype) -> bool:
    """Whether ``auto`` takes split_k over wgmma: few wide tiles of C for a long K (see
    :data:`SPLIT_K_AUTO_MIN_STEPS`)."""
    tiles, steps = wgmma_tiles(p), wgmma_steps(p, compute)
    return ((8 * tiles <= p.multiprocessors and steps >= SPLIT_K_AUTO_MIN_STEPS)
            or (4 * tiles <= p.multiprocessors and steps >= SPLIT_K_AUTO_LONG_STEPS))


def split_k_slices(p: Problem, compute: numpy.dtype) -> tuple[int, int]:
    """(slices, stages per slice) of K: as many slices as fill the SMs with blocks, none
    shorter than :data:`SPLIT_K_MIN_STEPS` stages, at most :data:`SPLIT_K_MAX_SPLITS`."""
    steps = wgmma_steps(p, compute)
    wanted = max(1, min(SPLIT_K_MAX_SPLITS, p.multiprocessors // max(1, wgmma_tiles(p)),
                        steps // SPLIT_K_MIN_STEPS))
    per_slice = ceil_div(steps, wanted)
    return ceil_div(steps, per_slice), per_slice


def plan_split_k(p: Problem) -> Shape:
    compute = _check_hopper(p, "split_k")
    splits, k_steps = split_k_slices(p, compute)
    tile = hopper_tile(_short_rows(p, split_k_tile(p, compute)), compute, p.M)
    return Shape(LADDER["split_k"], (WGMMA_THREADS, 1, 1), tile, wgmma_shared_bytes(tile),
                 compute, False, splits=splits, k_steps=k_steps)


def split_k_tile(p: Problem, compute: numpy.dtype) -> tuple[int, int]:
    """split_k's tile of C: the narrowest that covers N, 128 x 64, 128 x 128 or (16-bit types,
    M above 64) 128 x 192 where N is at most 64, 128 or 192 (as many blocks as 128 x 256 tiles,
    none multiplying columns of zeros), else 128 x 256."""
    tiles = [WGMMA_NARROW_TILE, WGMMA_SMALL_TILE]
    if takes_mid_tile(compute, p.M):
        tiles.append(WGMMA_MID_TILE)
    for tile in tiles:
        if p.N <= tile[1]:
            return tile
    return WGMMA_TILE


def split_k_sum_instance(compute: numpy.dtype) -> str:
    return f"matmul_split_k_sum<{TENSOR_CORE_C_TYPES[compute]}, {SPLIT_K_SUM_THREADS}>"


#: The sums of split_k's slices: float16 and TF32 at import, bfloat16 on first use.
SPLIT_K_SUM_GROUPS = tuple(
    WGMMA_SOURCE.add(f"split_k sum {TENSOR_CORE_C_TYPES[c]}", [split_k_sum_instance(c)],
                     eager=c != BFLOAT16) for c in TENSOR_CORE_C_TYPES)


def _gemv_groups() -> tuple:
    """float16's instances at import (auto's rung for decode steps), bfloat16's on first use."""
    return tuple(MMA_SOURCE.add(f"gemv {TENSOR_CORE_C_TYPES[c]}",
                                [_gemv_instance(c, rows, layout) for rows in (8, 16)
                                 for layout in GEMV_LAYOUTS],
                                eager=c != BFLOAT16)
                 for c in HALF_TYPES)


#: The Hopper rungs, which share wgmma.cu's block, launch path and geometry.
HOPPER_RUNGS = ("wgmma", "split_k", "multicast")
_INSTANCE = {**{name: _simt_instance(name) for name in SIMT}, "mma": _mma_instance}


# --- the ladder ------------------------------------------------------------------------------------------

def _simt_groups(name: str) -> tuple:
    """Floating-point products with 32-bit indices compile at import; integer and bool products
    (unsigned types) and 64-bit indices on first use."""
    instance, geometry = _INSTANCE[name], SIMT[name]
    groups = []
    for index in INDEXES:
        for compute in C_TYPES:
            eager = index == "int" and compute.kind == "f"
            groups.append(SIMT_SOURCE.add(
                f"{name} {C_TYPES[compute]} {index}",
                [instance(compute, index, aligned) for aligned in
                 ((False, True) if geometry.aligned_flag else (False,))], eager=eager))
    return tuple(groups)


def _tensor_groups(source: KernelSource, name: str, indexes: tuple, aligned: tuple) -> tuple:
    """float16 and TF32 products with 32-bit indices compile at import; bfloat16 products and
    64-bit indices on first use."""
    instance = _INSTANCE[name]
    return tuple(source.add(f"{name} {TENSOR_CORE_C_TYPES[c]} {index}",
                            [instance(c, index, a) for a in aligned],
                            eager=index == "int" and c != BFLOAT16)
                 for index in indexes for c in TENSOR_CORE_C_TYPES)


#: The Hopper rungs' lazy groups of instances by the operands' order, beyond A K-major and B
#: N-major: (label, B K-major, A M-major).
_OPERAND_ORDERS = (("W.T", True, False), ("X.T", False, True), ("X.T W.T", True, True))


def _hopper_groups(name: str, tiles: tuple) -> tuple:
    """The Hopper rungs' instances per type, each tile of :data:`WGMMA_TILES` (TF32's as
    :func:`hopper_tile` maps them, and none of 128 x 192): float16 and TF32 at import,
    bfloat16 on first use; the 16-bit types' instances that read B K-major, A M-major or both
    on first use (a group each)."""
    def tiles_of(compute: numpy.dtype) -> tuple:
        return tuple(dict.fromkeys(hopper_tile(tile, compute) for tile in tiles
                                   if tile != WGMMA_MID_TILE or takes_mid_tile(compute)))

    return tuple(WGMMA_SOURCE.add(f"{name} {TENSOR_CORE_C_TYPES[c]}",
                                  [hopper_instance(name, c, tile) for tile in tiles_of(c)],
                                  eager=c != BFLOAT16)
                 for c in TENSOR_CORE_C_TYPES) + \
        tuple(WGMMA_SOURCE.add(f"{name} {TENSOR_CORE_C_TYPES[c]} {label}",
                               [hopper_instance(name, c, tile, b_k_major, a_m_major)
                                for tile in tiles_of(c)], eager=False)
              for c in HALF_TYPES for label, b_k_major, a_m_major in _OPERAND_ORDERS)


LADDER = Ladder("matmul", (
    Rung("naive", "one thread per output element, operands read straight from global memory",
         SIMT_SOURCE, "matmul_naive", _simt_groups("naive"), _simt_plan("naive")),
    Rung("tiled", "32x32 tiles of A and B staged in shared memory: each load feeds 32 FMAs",
         SIMT_SOURCE, "matmul_tiled", _simt_groups("tiled"), _simt_plan("tiled")),
    Rung("blocked_1d", "64x64 tiles; each thread keeps 8 sums of one column in registers",
         SIMT_SOURCE, "matmul_blocked_1d", _simt_groups("blocked_1d"), _simt_plan("blocked_1d")),
    Rung("blocked_2d", "128x128 tiles; 8x8 sums per thread, A transposed in shared memory, "
                       "16-byte loads",
         SIMT_SOURCE, "matmul_blocked_2d", _simt_groups("blocked_2d"), _simt_plan("blocked_2d")),
    Rung("warp_tiled", "blocked_2d arranged by warps (conflict-free shared loads), two stages "
                       "in shared memory, one barrier per step, unchecked interior blocks",
         SIMT_SOURCE, "matmul_warp_tiled", _simt_groups("warp_tiled"), _simt_plan("warp_tiled")),
    Rung("large_tile", "warp_tiled with 16x8 sums per thread and 256x128 tiles (4-byte types)",
         SIMT_SOURCE, "matmul_large_tile", _simt_groups("large_tile"), _simt_plan("large_tile")),
    Rung("mma", "tensor cores (mma.sync, sm_80+): float16 and bfloat16 in float32 sums; "
                "float32 as TF32, only with precision='tf32'",
         MMA_SOURCE, "matmul_mma",
         _tensor_groups(MMA_SOURCE, "mma", INDEXES, (False, True)), plan_mma,
         Needs(capability=TENSOR_CORE_CAPABILITY,
               dtypes="float16 and bfloat16, or float32 as TF32",
               precision="float32 only with precision='tf32'")),
    Rung("wgmma", "Hopper tensor cores (wgmma, sm_90a): TMA copies tiles to shared memory, "
                  "warpgroup MMAs read them there; 128x256 tiles (128x192 or 128x128 where "
                  "their waves over the SMs cost less or N is that narrow, 128x64 where N is "
                  "at most 64, 64 rows where M is at most 64; 16-bit types only 128x192; "
                  "TF32 256x128 in place of 128x256 (128x128 for M of at most "
                  "128) and 64x128 for M of at most 64, B read into registers as it is), "
                  "loads and math in separate warps; 16-bit types one block per SM walking "
                  "the tiles, and transposed views (x @ W.T, X.T @ Y) read as they lie",
         WGMMA_SOURCE, "matmul_wgmma", _hopper_groups("wgmma", WGMMA_TILES),
         plan_wgmma,
         Needs(only_capability=WGMMA_CAPABILITY,
               dtypes="float16 and bfloat16, or float32 as TF32",
               layout="M, N and K below 2**31 - 2**27",
               precision="float32 only with precision='tf32'")),
    Rung("split_k", "wgmma's block over slices of K where the tiles of C are fewer than the "
                    "SMs: float32 partial tiles, then their sum in slice order, rounded once",
         WGMMA_SOURCE, "matmul_split_k",
         _hopper_groups("split_k", WGMMA_TILES), plan_split_k,
         Needs(only_capability=WGMMA_CAPABILITY,
               dtypes="float16 and bfloat16, or float32 as TF32",
               layout="M, N and K below 2**31 - 2**27",
               precision="float32 only with precision='tf32'")),
    Rung("gemv", "a few rows of A (decode steps): each warp streams 16 x 64 tiles of B from "
                 "global memory into mma.sync as they are (B^T A^T, pairs by byte permutes; "
                 "K-contiguous columns, as in x @ W.T, as words of 8 k, or of 4 where not "
                 "16-byte aligned), 16 warps a block along K (8 for 16-row tiles), splits of K "
                 "folded by the last block to finish",
         MMA_SOURCE, "matmul_gemv", _gemv_groups(), plan_gemv,
         Needs(capability=TENSOR_CORE_CAPABILITY, dtypes="float16 and bfloat16",
               layout="M, N and K below 2**31 - 2**27; fast for M of at most 16")),
    Rung("multicast", "wgmma's walking blocks in clusters of two that share B: tiles one "
                      "above the other, each block loading half of every stage's B into both "
                      "(TMA multicast); 128x256 tiles, float16 and bfloat16",
         WGMMA_SOURCE, "matmul_multicast",
         tuple(WGMMA_SOURCE.add(f"multicast {TENSOR_CORE_C_TYPES[c]}",
                                [hopper_instance("multicast", c, MULTICAST_TILE, k_major,
                                                 m_major)
                                 for m_major in (False, True) for k_major in (False, True)],
                                eager=False)
               for c in HALF_TYPES),
         plan_multicast,
         Needs(only_capability=WGMMA_CAPABILITY, dtypes="float16 and bfloat16",
               layout="M, N and K below 2**31 - 2**27")),
))


#: ``auto`` takes large_tile only where its tiles cover at most this many times the rows of C
#: that warp_tiled's do. Where both cover M alike and fill the SMs, large_tile leads (8192^3
#: float32, H100: 0.91 against 0.80 of cuBLAS); where its tiles add rows of zeros it trails:
#: 8 x (1152 x 256 x 1024), 1280 rows for 1152 (1.11), held 0.78 against warp_tiled's
#: 0.90, and far more where half of each tile is empty (M = 128).
LARGE_TILE_MAX_PADDING = 1.05


def choose(p: Problem) -> Rung:
    """``method="auto"``.

    float16, bfloat16 and precision="tf32" run on the tensor cores (compute capability 8.0 and
    newer). On 9.0: gemv for float16 and bfloat16 products of at most :data:`GEMV_MAX_ROWS`
    rows whose B TMA cannot read N-contiguous (such as x @ W.T with W row-major: the Hopper
    rungs read it K-major, but gemv's one launch leads or ties split_k's two per call from 1
    to 16 rows; NOTES 161 and 225); split_k wherever it would cut K into two or more
    slices and wgmma would leave most SMs idle for a long K (:data:`SPLIT_K_AUTO_MIN_STEPS`),
    gemv there for float16 and bfloat16 products of at most :data:`GEMV_HOPPER_MAX_ROWS` rows
    (one launch where split_k takes two; NOTES 154); else wgmma. Elsewhere gemv for float16
    and bfloat16 products of at most :data:`GEMV_MAX_ROWS` rows (decode steps: mma's 128-row
    tiles would compute rows of zeros; NOTES 147 compares the two on an H100, the one GPU
    measured) and mma for the rest. Over the shape suite (H100, float16, NOTES 95) that
    rule's geometric mean is 0.80 of cuBLAS held and 1.16 per call (wgmma alone: 0.75 and
    1.13). Among the SIMT rungs, large_tile when its 256x128 tiles give every SM a block and
    cover M with at most :data:`LARGE_TILE_MAX_PADDING` times the rows warp_tiled's 128x128
    ones do, and warp_tiled otherwise (H200: at 1024^3 warp_tiled ran at 0.40 of cuBLAS,
    large_tile with 32 blocks at 0.29; at 2048^3, 128 blocks, large_tile led 0.82 to 0.73; a
    stack of 256 products with M = 128 gave large_tile half a tile of zero rows each).
    """
    if p.precision == "tf32" or (p.dtype in HALF_TYPES
                                 and p.capability >= TENSOR_CORE_CAPABILITY):
        if p.capability == WGMMA_CAPABILITY and wgmma_fits(p):
            compute = compute_dtype(p.dtype, p.K, tensor_cores=True)
            split = split_k_slices(p, compute)[0] >= 2 and _split_k_pays(p, compute)
            if p.dtype in HALF_TYPES and ((split and p.M <= GEMV_HOPPER_MAX_ROWS) or
                                          (not p.b_as_is and p.M <= GEMV_MAX_ROWS)):
                return LADDER["gemv"]
            return LADDER["split_k" if split else "wgmma"]
        if p.dtype in HALF_TYPES and p.M <= GEMV_MAX_ROWS and \
                max(p.N, p.K) < TENSOR_CORE_32_BIT_EXTENT:
            return LADDER["gemv"]
        return LADDER["mma"]
    tile = SIMT["large_tile"].tile
    tiles = p.batch * ceil_div(p.M, tile[0]) * ceil_div(p.N, tile[1])
    if tiles < 0.9 * p.multiprocessors:  # (an empty product, M = 0, stops here too)
        return LADDER["warp_tiled"]
    compute = compute_dtype(p.dtype, p.K, tensor_cores=False)
    large, warp = SIMT["large_tile"].tile_for(compute), SIMT["warp_tiled"].tile_for(compute)
    padded = ceil_div(p.M, large[0]) * large[0] / (ceil_div(p.M, warp[0]) * warp[0])
    return LADDER["large_tile" if padded <= LARGE_TILE_MAX_PADDING else "warp_tiled"]
