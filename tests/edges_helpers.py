"""Helpers shared by the edge-case test modules (test_edges_*.py, test_hostile.py,
test_concurrency.py): the operations and rungs to cover, NumPy's reductions, GPU-side checks.

Reductions that the package does not provide yet are listed in :data:`PENDING_REDUCTIONS`; tests
written for them skip with a reason naming the missing function, and run once it exists.
"""

from __future__ import annotations

import math

import numpy
import pytest

import gpukernels as gk
import references as reference
from gpukernels._core.ladder import OPERATIONS
from gpukernels._core.launch import record_launches

#: Every reduction the suite knows NumPy's semantics for, present or not.
ALL_REDUCTIONS = ("sum", "prod", "min", "max")
#: The reductions this build of gpukernels provides.
REDUCTIONS = [name for name in ALL_REDUCTIONS if hasattr(gk, name)]
PENDING_REDUCTIONS = [name for name in ALL_REDUCTIONS if not hasattr(gk, name)]

NUMPY_REDUCTIONS = {"sum": numpy.sum, "prod": numpy.prod, "min": numpy.min, "max": numpy.max}

ALL_DTYPES = [numpy.dtype(t) for t in (
    numpy.bool_, numpy.int8, numpy.int16, numpy.int32, numpy.int64, numpy.uint8, numpy.uint16,
    numpy.uint32, numpy.uint64, numpy.float16, numpy.float32, numpy.float64, numpy.complex64,
    numpy.complex128)]
FLOAT_DTYPES = [d for d in ALL_DTYPES if d.kind == "f"]


def dtype_id(dtype) -> str:
    """A dtype's name, for test ids."""
    return numpy.dtype(dtype).name


def reduction_methods() -> tuple[str, ...]:
    """The reduction ladder."""
    return gk.methods("reduce")


TRANSPOSE_METHODS = gk.methods("transpose")
#: The tensor-core matmul rungs: they take float16 and bfloat16, and (but gemv and multicast)
#: float32 as TF32 (their own tests).
TENSOR_CORE_METHODS = ("mma", "wgmma", "split_k", "gemv", "multicast")
#: The SIMT matmul rungs, which take every real dtype.
MATMUL_METHODS = tuple(m for m in gk.methods("matmul") if m not in TENSOR_CORE_METHODS)
REDUCE_METHODS = reduction_methods()


SUM_REQUESTS = [None, numpy.int32, numpy.int64, numpy.uint8, numpy.float16, numpy.float32,
                numpy.float64, numpy.complex64, numpy.complex128, numpy.bool_]


def accepted_requests(operation: str):
    """(input dtype, dtype= request, result dtype) for every request the wrapper accepts."""
    import warnings

    from gpukernels.ops.reduce.dtypes import reduction_result_dtype

    requests = SUM_REQUESTS if operation in ("sum", "prod") else [None]
    for dtype in ALL_DTYPES:
        for requested in requests:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    result = reduction_result_dtype(operation, dtype, requested)
                except TypeError:
                    continue
            yield dtype, requested, result


def refused(operation: str, method: str, *inputs, **kwargs) -> bool:
    """Whether rung ``method`` refuses these inputs (the word transposes take 1- and 2-byte
    elements, say); when it does, check that the call raises TypeError or ValueError before
    launching anything and that the library stays usable. ``"auto"`` takes every input."""
    op = OPERATIONS[operation]
    if method == "auto" or op.supports(method, *inputs, **kwargs):
        return False
    with record_launches() as launches:
        with pytest.raises((TypeError, ValueError)):
            op.function(*inputs, method=method, **kwargs)
    assert launches == [], f"{operation} {method} launched before refusing the input"
    return True


def reduction(name: str):
    """``gk.<name>``, or a skip naming the missing function."""
    if not hasattr(gk, name):
        pytest.skip(f"gk.{name} is not implemented yet; this test checks NumPy's semantics for it")
    return getattr(gk, name)


def require_free_gpu_memory(nbytes: int) -> None:
    """Skip when the current GPU has less than ``nbytes`` free (after emptying CuPy's pool)."""
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()
    free, total = cupy.cuda.Device().mem_info
    if free < nbytes:
        pytest.skip(f"needs {nbytes / 2**30:.1f} GiB of free GPU memory; "
                    f"{free / 2**30:.1f} of {total / 2**30:.1f} GiB are free")


def release_gpu_memory() -> None:
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()


def reduction_data(name: str, shape, dtype, rng: numpy.random.Generator,
                   count: int | None = None) -> numpy.ndarray:
    """Random host data suited to reduction ``name``.

    The full range for integers and a fair coin for bools (integer results are exact, with
    NumPy's wrap-around); uniform(-1, 1) for float sums and min/max. For products: odd integers
    (a product modulo 2**64 of odd numbers is odd, so it depends on every factor instead of
    collapsing to 0), and for floats factors of magnitude near 1 with random signs, spread so that
    the product of ``count`` of them (default: all) stays within a few powers of two of 1."""
    dtype = numpy.dtype(dtype)
    data = reference.random_array(shape, dtype, rng)
    if name != "prod" or dtype.kind == "b":
        return data
    if dtype.kind in "iu":
        return data | dtype.type(1)
    size = max(math.prod(shape) if count is None else count, 1)
    half_width = min(0.5, 2.0 * math.sqrt(3.0 / size))  # log2 of the product: sd <= 2
    real = _real_part(dtype)
    magnitude = numpy.exp2(rng.uniform(-half_width, half_width, size=shape))
    if dtype.kind == "c":
        angle = rng.uniform(0, 2 * numpy.pi, size=shape)
        return numpy.asarray(magnitude * numpy.exp(1j * angle)).astype(dtype)
    signs = numpy.where(rng.random(shape) < 0.5, -1.0, 1.0)
    return numpy.asarray(signs * magnitude).astype(real)


def _real_part(dtype: numpy.dtype) -> numpy.dtype:
    return numpy.dtype(dtype.char.lower()) if dtype.kind == "c" else dtype


def _real_eps(dtype: numpy.dtype) -> float:
    return float(numpy.finfo(_real_part(dtype)).eps)


def assert_reduction_matches(name: str, got, host: numpy.ndarray, *, axis=None, keepdims=False,
                             context: str = "") -> None:
    """``got`` (a GPU result of ``gk.<name>(x, axis=..., keepdims=...)``) against NumPy on the
    host copy ``host``: the same dtype and shape; integers, bools and min/max exactly (NaN where
    NumPy has NaN); float sums within :func:`reference.sum_error_bound` of each output element's
    slice; float products within ``(2n + 1) eps`` relative error (``(4n + 1) eps`` for complex)."""
    import cupy

    want = numpy.asarray(NUMPY_REDUCTIONS[name](host, axis=axis, keepdims=keepdims))
    got = cupy.asnumpy(got)
    assert got.dtype == want.dtype, f"{context}: dtype {got.dtype}, NumPy gives {want.dtype}"
    assert got.shape == want.shape, f"{context}: shape {got.shape}, NumPy gives {want.shape}"
    finite = numpy.isfinite(want) if want.dtype.kind in "fc" else numpy.ones(want.shape, bool)
    if name in ("min", "max") or want.dtype.kind in "biu" or not finite.any():
        numpy.testing.assert_array_equal(got, want, err_msg=context)
        return
    # NaN and infinities exactly where NumPy has them; the finite elements within the bound.
    numpy.testing.assert_array_equal(got[~finite], want[~finite], err_msg=context)
    got, want = got[finite], want[finite]
    wide = numpy.complex128 if want.dtype.kind == "c" else numpy.float64
    source = host.astype(wide)
    n = max(host.size // max(want.size, 1), 1)  # terms per output element
    exact = numpy.asarray(NUMPY_REDUCTIONS[name](source, axis=axis, keepdims=keepdims))[finite]
    if name == "sum":
        eps_result = _real_eps(want.dtype)
        # float16 and float32 accumulate in float32 (see reference.sum_error_bound)
        eps_acc = _real_eps(numpy.dtype(numpy.float32 if _real_part(want.dtype).itemsize <= 4
                                        else numpy.float64))
        magnitude = numpy.asarray(numpy.sum(numpy.abs(source), axis=axis,
                                            keepdims=keepdims))[finite]
        chains = math.sqrt(n) + math.log2(n) + 1
        bound = 2 * eps_acc * chains * magnitude + eps_result * numpy.abs(exact)
    else:  # prod: a few roundings per factor (a complex product rounds several terms)
        per_factor = 4 if want.dtype.kind == "c" else 2
        bound = (per_factor * n + 1) * _real_eps(want.dtype) * numpy.abs(exact)
    error = numpy.abs(got.astype(wide) - exact)
    bad = ~(error <= bound)  # NaN counts as bad
    assert not bad.any(), (f"{context}: {int(bad.sum())} of {bad.size} elements outside the "
                           f"bound; got {got.ravel()[bad.ravel()][:3]}, "
                           f"want {exact.ravel()[bad.ravel()][:3]}")


def gpu_random_bytes(shape, dtype, seed: int):
    """A GPU array of ``shape`` and ``dtype`` filled with random bits (made on the GPU)."""
    import cupy

    dtype = numpy.dtype(dtype)
    count = math.prod(shape) * dtype.itemsize
    state = cupy.random.RandomState(seed)
    raw = state.randint(0, 256, size=count, dtype=cupy.uint8)
    return raw.view(dtype).reshape(shape)


def assert_same_bytes_on_gpu(got, want, context: str = "") -> None:
    """Bitwise equality of two GPU arrays of one shape and dtype, compared on the GPU."""
    import cupy

    assert got.shape == want.shape and got.dtype == want.dtype, context
    got_bytes = cupy.ascontiguousarray(got).reshape(-1).view(cupy.uint8)
    want_bytes = cupy.ascontiguousarray(want).reshape(-1).view(cupy.uint8)
    mismatches = int(cupy.count_nonzero(got_bytes != want_bytes))
    assert mismatches == 0, f"{context}: {mismatches} bytes differ"
