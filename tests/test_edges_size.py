"""Inputs at the size limits: more than 2**31 and 2**32 elements, grid-stride loops near
INT32_MAX, more than 65535 blocks along y, matmul dimensions in the hundreds of thousands, and
the sizes around the reduction ladder's block boundaries.

The tests of more than 2**31 elements are marked ``large`` (and ``slow``): they need about
20 GiB of GPU memory and skip on a GPU with less free. Their data are 8-bit patterns whose
results have closed forms, so no host reference is needed and the checks run on the GPU.
"""

from __future__ import annotations

import math

import numpy
import pytest

import gpukernels as gk
from edges_helpers import (
    ALL_REDUCTIONS,
    MATMUL_METHODS,
    REDUCE_METHODS,
    TRANSPOSE_METHODS,
    assert_reduction_matches,
    assert_same_bytes_on_gpu,
    dtype_id,
    gpu_random_bytes,
    reduction,
    reduction_data,
    refused,
    release_gpu_memory,
    require_free_gpu_memory,
)
from gpukernels._core import launch as _launch
from gpukernels._core.device import compute_capability, multiprocessor_count
from gpukernels.ops.matmul import rungs as matmul_rungs
from gpukernels.ops.reduce import rungs as reduce_rungs
from gpukernels.validation import poisoned

cupy = pytest.importorskip("cupy")

pytestmark = pytest.mark.gpu
large = pytest.mark.large
slow = pytest.mark.slow


def shape_id(shape):
    return "x".join(map(str, shape))


def seed_from(rng) -> int:
    return int(rng.integers(2**31))


# --- more than 65535 blocks along y -------------------------------------------------------------

TALL_AND_WIDE = [(2**24, 1), (1, 2**24), (70000 * 32, 3)]


# test_transpose.py's test_transpose_huge covers 1- and 4-byte elements at 10**8; these are the
# other element sizes, at the shapes that need the grid-stride loop over y.
@pytest.mark.usefixtures("index_width")
@pytest.mark.parametrize("dtype", [numpy.uint16, numpy.int64, numpy.complex128], ids=dtype_id)
@pytest.mark.parametrize("shape", TALL_AND_WIDE, ids=shape_id)
@pytest.mark.parametrize("method", TRANSPOSE_METHODS)
def test_transpose_tall_and_wide_beyond_65535_blocks_in_y(method, shape, dtype, rng):
    x = gpu_random_bytes(shape, dtype, seed_from(rng))
    for label, view in (("contiguous", x), ("reversed", x[::-1, ::-1])):
        if refused("transpose", method, view):
            continue
        out = poisoned(shape[::-1], dtype)
        assert gk.transpose(view, method=method, out=out) is out
        assert_same_bytes_on_gpu(out, view.T, f"{method} {shape} {label}")


# (label, M, K, N): beyond 65535 row tiles, columns in the millions, K in the hundreds of
# thousands.
MATMUL_EXTREMES = [
    ("tall-2^24", 2**24, 1, 3), ("wide-2^24", 3, 1, 2**24), ("tall-70000x32", 70000 * 32, 3, 2),
    ("M-300007", 300_007, 5, 7), ("N-300007", 7, 5, 300_007), ("K-300007", 3, 300_007, 4),
]


def _matmul_bound_on_gpu(a, b, dtype):
    """reference.matmul_error_bound, computed on the GPU: (2 K eps + eps) (|a| @ |b|)."""
    eps = numpy.finfo(dtype).eps
    magnitude = cupy.matmul(cupy.abs(a).astype(cupy.float64), cupy.abs(b).astype(cupy.float64))
    return (2 * max(a.shape[-1], 1) * eps + eps) * magnitude


@pytest.mark.usefixtures("index_width")
@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64], ids=dtype_id)
@pytest.mark.parametrize("case", MATMUL_EXTREMES, ids=[c[0] for c in MATMUL_EXTREMES])
@pytest.mark.parametrize("method", MATMUL_METHODS)
def test_matmul_extreme_dimensions(method, case, dtype, rng):
    label, m, k, n = case
    state = cupy.random.RandomState(seed_from(rng))
    # Integers in [-8, 8]: every partial sum is exact, so the result must equal cuBLAS's.
    a = state.randint(-8, 9, size=(m, k)).astype(dtype)
    b = state.randint(-8, 9, size=(k, n)).astype(dtype)
    out = poisoned((m, n), dtype)
    assert gk.matmul(a, b, method=method, out=out) is out
    want = cupy.matmul(a.astype(cupy.float64), b.astype(cupy.float64))
    wrong = int(cupy.count_nonzero(out.astype(cupy.float64) != want))
    assert wrong == 0, f"{method} {label} integer-valued: {wrong} of {want.size} elements differ"
    # Random values: within c K eps (|A| |B|) of the float64 product.
    a = state.uniform(-1, 1, size=(m, k)).astype(dtype)
    b = state.uniform(-1, 1, size=(k, n)).astype(dtype)
    got = gk.matmul(a, b, method=method)
    error = cupy.abs(got.astype(cupy.float64) - cupy.matmul(a.astype(cupy.float64),
                                                            b.astype(cupy.float64)))
    outside = int(cupy.count_nonzero(~(error <= _matmul_bound_on_gpu(a, b, dtype))))
    assert outside == 0, f"{method} {label} random: {outside} elements outside the error bound"


@large
@slow
def test_matmul_16_bit_with_k_past_the_32_bit_tensor_core_kernels():
    # K = 2**31 - 2**27: past what gemv and the Hopper rungs index in 32 bits (their sums of K
    # and a split's rows or a stage's 64 would wrap), so auto takes mma, which widens its
    # indices. A (1, K) of zeros but three planted values against a B of ones: the product is
    # exactly 7 whatever the order of the sums, and a dropped range of K or no K at all shows.
    if compute_capability() < matmul_rungs.TENSOR_CORE_CAPABILITY:
        pytest.skip("the tensor-core rungs need compute capability 8.0")
    K = matmul_rungs.TENSOR_CORE_32_BIT_EXTENT
    require_free_gpu_memory(4 * K + 2**30)
    a = cupy.zeros((1, K), dtype=cupy.float16)
    a[0, 0], a[0, K // 2], a[0, K - 1] = 1, 2, 4
    b = cupy.ones((K, 1), dtype=cupy.float16)
    hopper = compute_capability() == matmul_rungs.WGMMA_CAPABILITY
    for method in ("gemv", "wgmma", "split_k", "multicast") if hopper else ("gemv",):
        with pytest.raises(ValueError, match=r"below 2\*\*31 - 2\*\*27"):
            gk.matmul(a, b, method=method)
    out = poisoned((1, 1), numpy.float16)
    with _launch.record_launches() as launches:
        assert gk.matmul(a, b, out=out) is out
    assert {launch.rung for launch in launches} == {"mma"}, launches
    assert float(out[0, 0]) == 7.0, float(out[0, 0])
    del a, b
    release_gpu_memory()


# Partial reductions over the same shapes: every output reduces a column of 2**24 or 2240000
# elements, or each of 2**24 outputs reduces one element.
AXIS_CASES = [((2**24, 1), 0), ((2**24, 1), 1), ((1, 2**24), 0), ((1, 2**24), 1),
              ((70000 * 32, 3), 0), ((70000 * 32, 3), 1)]


@pytest.mark.parametrize("shape, axis", AXIS_CASES,
                         ids=[f"{shape_id(s)}-axis{a}" for s, a in AXIS_CASES])
@pytest.mark.parametrize("name", ALL_REDUCTIONS)
def test_axis_reductions_of_tall_and_wide_shapes(name, shape, axis, rng):
    op = reduction(name)
    host = reduction_data(name, shape, numpy.int32, rng)
    x = cupy.asarray(host)
    for method in REDUCE_METHODS:
        for label, h, d in (("contiguous", host, x), ("reversed", host[::-1, ::-1], x[::-1, ::-1])):
            got = op(d, axis=axis, method=method)
            assert_reduction_matches(name, got, h, axis=axis, context=f"{name} {method} {label}")


# --- reductions at every size around block boundaries ------------------------------------------

def reduction_sizes() -> list[int]:
    """Sizes 0-3, primes, 2**k - 1, 2**k, 2**k + 1, the sizes where the two-pass rung's first
    grid stops growing (one block of threads per element up to then) and twice that, and where
    one_pass's grid grows past one wave, +- 1."""
    sizes = {1, 2, 3, 5, 7, 31, 65521, 1048573, 16777213}
    for k in (5, 8, 10, 12, 16, 20, 24):
        sizes |= {2**k - 1, 2**k, 2**k + 1}
    block = reduce_rungs.BLOCK
    sms = multiprocessor_count()
    full_grid = block * reduce_rungs.BLOCKS_PER_SM * sms
    for edge in (block, full_grid, 2 * full_grid):
        sizes |= {edge - 1, edge, edge + 1}
    # Where one_pass goes from one wave of blocks to two and three: strided inputs (an element
    # per step) and contiguous float32 (a 16-byte word per step).
    # (blocks of 1024 threads, and the mean's of 256)
    for block in (reduce_rungs.ONE_PASS_BLOCK, reduce_rungs.ONE_PASS_WIDE_BLOCK):
        wave_steps = reduce_rungs.ONE_PASS_MIN_STEPS * reduce_rungs.blocks_per_wave(block, sms)
        for per_step in (1, 4):
            for waves in (2, 3):
                edge = waves * wave_steps * block * per_step
                sizes |= {edge - 1, edge, edge + 1}
    return sorted(sizes)


@pytest.mark.parametrize("dtype", [numpy.int16, numpy.float32], ids=dtype_id)
@pytest.mark.parametrize("method", REDUCE_METHODS + ("auto",))
@pytest.mark.parametrize("name", ALL_REDUCTIONS)
def test_reduction_sizes_around_block_boundaries(name, method, dtype, rng):
    op = reduction(name)
    sizes = reduction_sizes()
    host_all = reduction_data(name, (max(sizes),), dtype, rng)
    x_all = cupy.asarray(host_all)
    for n in sizes:
        views = [("prefix", slice(0, n)), ("reversed", slice(n - 1, None, -1))]
        if 3 * n <= host_all.size:
            views.append(("step-3", slice(2, 3 * n, 3)))
        for label, index in views:
            host, x = host_all[index], x_all[index]
            assert host.size == n
            assert_reduction_matches(name, op(x, method=method), host,
                                     context=f"{name} {method} n={n} {label}")


# --- more than 2**31 and 2**32 elements (large) -------------------------------------------------

def periodic_bytes(n: int, multiplier: int = 1, offset: int = 0):
    """A uint8 GPU array of n elements, element i = (i * multiplier + offset) % 256."""
    period = ((cupy.arange(256, dtype=cupy.int64) * multiplier + offset) % 256).astype(cupy.uint8)
    rows = -(-n // 256)
    return cupy.broadcast_to(period, (rows, 256)).reshape(-1)[:n]  # reshape copies: contiguous


def pattern_sum(positions: range, signed: bool) -> int:
    """Exact sum of (i % 256) over ``positions``, each read as int8 when ``signed``."""
    def value(i):
        v = i % 256
        return v - 256 if signed and v >= 128 else v

    period = 256 // math.gcd(abs(positions.step), 256)  # the values repeat after this many
    full, rest = divmod(len(positions), period)
    one_period = sum(value(positions[j]) for j in range(period))
    return full * one_period + sum(value(positions[j]) for j in range(rest))


PATTERN_LENGTH = 2**32 + 257


@pytest.fixture(scope="module")
def pattern_bytes():
    """uint8 x[i] = i % 256 for 2**32 + 257 elements (4 GiB)."""
    require_free_gpu_memory(3 * PATTERN_LENGTH + 2**31)
    x = periodic_bytes(PATTERN_LENGTH)
    yield x
    del x
    release_gpu_memory()


def pattern_views():
    """(label, index, positions): views of the pattern and the positions they read."""
    n = PATTERN_LENGTH
    views = [(f"first-{m}", slice(0, m), range(0, m))
             for m in (2**31 - 1, 2**31, 2**31 + 1, 2**32 - 1, 2**32, 2**32 + 1, n)]
    views += [
        ("reversed", slice(None, None, -1), range(n - 1, -1, -1)),
        ("step-2", slice(None, None, 2), range(0, n, 2)),
        ("offset-step-2", slice(7, None, 2), range(7, n, 2)),
        ("reversed-step-3", slice(n - 2, 0, -3), range(n - 2, 0, -3)),
    ]
    return views


@slow
@large
@pytest.mark.parametrize("method", REDUCE_METHODS + ("auto",))
def test_sum_of_more_than_2_to_the_32_elements(method, pattern_bytes):
    for label, index, positions in pattern_views():
        view = pattern_bytes[index]
        assert view.size == len(positions)
        for signed in (False, True):
            x = view.view(cupy.int8) if signed else view
            got = gk.sum(x, method=method)
            assert got.dtype == (numpy.int64 if signed else numpy.uint64), label
            want = pattern_sum(positions, signed)
            assert int(got) == want, f"{method} {label} {x.dtype}: got {int(got)}, want {want}"


@slow
@large
@pytest.mark.parametrize("method", REDUCE_METHODS)
def test_sum_of_a_2_to_the_32_element_non_contiguous_2d_view(method, pattern_bytes):
    # 65536 x 65536 with every other column: the wrapper makes a 2**31-element copy first.
    square = pattern_bytes[:2**32].reshape(2**16, 2**16)
    view = square[:, ::2]
    got = gk.sum(view, method=method)
    assert int(got) == 2**16 * pattern_sum(range(0, 2**16, 2), signed=False)
    got = gk.sum(square[::-1], method=method)
    assert int(got) == pattern_sum(range(0, 2**32), signed=False)


NUMPY_RESULT_DTYPE = {name: numpy.dtype(numpy.int64) if name in ("sum", "prod")
                      else numpy.dtype(numpy.int8) for name in ALL_REDUCTIONS}  # of int8 data


# int8 ones with two planted values, past 2**31 and past 2**32: each reduction has a closed form.
ONES_LENGTH = 2**32 + 3
PLANTED = {2**31 + 7: -5, 2**32 + 1: 7}


@pytest.fixture(scope="module")
def ones_with_planted_values():
    require_free_gpu_memory(3 * ONES_LENGTH + 2**31)
    x = cupy.ones(ONES_LENGTH, dtype=cupy.int8)
    for position, value in PLANTED.items():
        x[position] = value
    yield x
    del x
    release_gpu_memory()


def planted_result(name: str, positions: range) -> int:
    inside = [value for position, value in PLANTED.items() if position in positions]
    if name == "sum":
        return len(positions) - len(inside) + sum(inside)
    if name == "prod":
        return math.prod(inside)
    return (min if name == "min" else max)([1] + inside)


@slow
@large
@pytest.mark.parametrize("method", REDUCE_METHODS)
@pytest.mark.parametrize("name", ALL_REDUCTIONS)
def test_reductions_find_elements_past_2_to_the_32(name, method, ones_with_planted_values):
    op = reduction(name)
    n = ONES_LENGTH
    views = [(f"first-{m}", slice(0, m), range(0, m)) for m in (2**31 - 1, 2**31 + 8, n)]
    views += [("reversed", slice(None, None, -1), range(n - 1, -1, -1)),
              ("odd-positions", slice(1, None, 2), range(1, n, 2)),
              ("even-positions", slice(0, None, 2), range(0, n, 2))]
    want_dtype = NUMPY_RESULT_DTYPE[name]
    for label, index, positions in views:
        got = op(ones_with_planted_values[index], method=method)
        assert got.dtype == want_dtype, f"{name} {label}"
        want = planted_result(name, positions)
        assert int(got) == want, f"{name} {method} {label}: got {int(got)}, want {want}"


@slow
@large
@pytest.mark.parametrize("method", REDUCE_METHODS)
@pytest.mark.parametrize("name", ALL_REDUCTIONS)
def test_axis_reductions_over_rows_of_more_than_2_to_the_31(name, method,
                                                            ones_with_planted_values):
    op = reduction(name)
    n = ONES_LENGTH - 1  # 2**32 + 2: two rows of 2**31 + 1, or 2**31 + 1 rows of two
    flat = ones_with_planted_values[:n]
    rows = flat.reshape(2, n // 2)
    got = cupy.asnumpy(op(rows, axis=1, method=method))
    want = [planted_result(name, range(r * (n // 2), (r + 1) * (n // 2))) for r in range(2)]
    assert got.dtype == NUMPY_RESULT_DTYPE[name] and got.tolist() == want, name
    columns = flat.reshape(n // 2, 2)
    got = cupy.asnumpy(op(columns, axis=0, method=method))
    want = [planted_result(name, range(c, n, 2)) for c in range(2)]
    assert got.dtype == NUMPY_RESULT_DTYPE[name] and got.tolist() == want, name


INT32_LIMIT = _launch.INT32_INDEX_LIMIT

# (label, shape): more than 2**31 and 2**32 elements, and the largest shapes that still take
# the 32-bit index instances, whose grid-stride loops then run closest to INT32_MAX.
LARGE_TRANSPOSES = [
    ("square-past-2^31", (46341, 46341)), ("square-past-2^32", (65537, 65537)),
    ("3-rows-past-2^31", (3, 715_827_883)), ("column-past-2^31", (2**31 + 1, 1)),
    ("row-past-2^32", (1, 2**32 + 1)), ("column-int32-max", (2**31 - 1, 1)),
    ("column-at-32-bit-index-limit", (INT32_LIMIT - 1, 1)),
    ("row-at-32-bit-index-limit", (1, INT32_LIMIT - 1)),
]


@pytest.fixture(scope="module", params=LARGE_TRANSPOSES, ids=[c[0] for c in LARGE_TRANSPOSES])
def large_pattern_matrix(request):
    """(x, row_term, col_term): uint8 x[i, j] = row_term[i] + col_term[j] (mod 256)."""
    rows, cols = request.param[1]
    require_free_gpu_memory(5 * rows * cols + 2**31)
    row_term = periodic_bytes(rows, multiplier=7)
    col_term = periodic_bytes(cols, multiplier=3, offset=1)
    x = row_term[:, None] + col_term[None, :]
    yield request.param[0], x, row_term, col_term
    del x, row_term, col_term
    release_gpu_memory()


@slow
@large
@pytest.mark.parametrize("method", TRANSPOSE_METHODS)
def test_transpose_of_more_than_2_to_the_31_elements(method, large_pattern_matrix):
    label, x, row_term, col_term = large_pattern_matrix
    if refused("transpose", method, x):  # narrow: squares have more than 16 rows and columns
        return
    out = poisoned(x.shape[::-1], x.dtype)
    assert gk.transpose(x, method=method, out=out) is out
    wrong = int(cupy.count_nonzero(out != col_term[:, None] + row_term[None, :]))
    assert wrong == 0, f"{method} {label}: {wrong} of {out.size} elements wrong"
