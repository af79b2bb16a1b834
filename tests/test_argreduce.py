"""argmin and argmax: every rung and the axis kernels against NumPy, exactly.

Inputs have many ties (small integers, repeated floats), so the first index of the extreme is
tested everywhere; NaN anywhere, the first of several NaN, every dtype, every axis, strided and
reversed views, lengths around the block sizes, poisoned ``out=``, and the same input twice.
"""

from __future__ import annotations

import numpy
import pytest

import gpukernels as gk
from gpukernels.ops.reduce.dtypes import reduction_result_dtype
from gpukernels.validation import poisoned

RUNGS = gk.methods("reduce")
OPERATIONS = ("argmin", "argmax")
DTYPES = [numpy.dtype(c) for c in "?bhilqBHILQefd"]


# ---- CPU: dtypes ------------------------------------------------------------------------------

def test_result_dtype_is_int64_and_complex_is_refused():
    for operation in OPERATIONS:
        for dtype in DTYPES:
            assert reduction_result_dtype(operation, dtype) == numpy.int64
        for bad in ("complex64", "complex128", "datetime64[s]", "U3"):
            with pytest.raises(TypeError):
                reduction_result_dtype(operation, numpy.dtype(bad))
        with pytest.raises(TypeError, match="no dtype"):
            reduction_result_dtype(operation, numpy.dtype("float32"), "int32")


def test_accumulators_match_the_kernels_layout_and_write_the_index():
    from gpukernels.ops.reduce import dtypes

    for dtype in DTYPES:
        read, acc = dtypes.accumulator("ArgMaxOp", dtype, numpy.dtype(numpy.int64), True)
        value = numpy.dtype(numpy.float32) if dtype == numpy.float16 else dtype
        assert read == dtype and acc.fields["value"][0] == value
        # gk_arg<V>: V, then an 8-byte-aligned int64: 16 bytes, two float64 words for CuPy
        assert acc.itemsize == 16 and acc.fields["index"][1] == 8
        assert dtypes.KERNEL_C_TYPES[acc] == f"gk_arg<{dtypes.C_TYPES[value]}>"
        assert dtypes.writes("ArgMaxOp", read, acc, numpy.dtype(numpy.int64), full=True) == \
            numpy.int64


# One wave of one_pass's 1024-thread blocks on 132 SMs, as planned on the CPU (two blocks an
# SM) and as on a GPU where its instance fits one block an SM; the segments of float32 (four
# elements a thread each step) take a second wave from 2 * ONE_PASS_MIN_STEPS steps a block.
_STEP = 1024 * 4
_SECOND_WAVE = {None: 2 * 8 * 264 * _STEP, 1: 2 * 8 * 132 * _STEP}


@pytest.mark.parametrize(("op", "dtype", "n", "resident", "strided"), [
    ("ArgMaxOp", numpy.float32, 2**25, None, True), ("ArgMinOp", numpy.float16, 2**28, None, True),
    ("ArgMaxOp", numpy.float32, _SECOND_WAVE[None], None, True),
    ("ArgMaxOp", numpy.float32, _SECOND_WAVE[None] - _STEP, None, False),
    ("ArgMaxOp", numpy.float32, _SECOND_WAVE[1], 1, True),
    ("ArgMaxOp", numpy.float32, _SECOND_WAVE[1] - _STEP, 1, False),
    ("ArgMinOp", numpy.int32, 2**28, None, False),
    ("MomentsOp", numpy.int32, 2**25, None, True), ("MomentsOp", numpy.float32, 2**24, None, False),
    ("MomentsOp", numpy.float32, 2**24, 1, True),
    ("SumOp", numpy.float32, 2**28, None, False), ("MeanOp", numpy.float32, 2**28, None, False),
    ("SumOp", numpy.float32, 2**28, 1, False)])
def test_one_pass_reads_float_searches_and_moments_past_one_wave_in_the_grid_stride_wave(
        op, dtype, n, resident, strided):
    # one_pass's plan reads var's moments and float argmin/argmax in shuffle's grid-stride wave
    # of 256-thread blocks (one launch, the last block folding the partials) where its
    # segments would take more than one wave of blocks, the rest in segments; auto takes it
    # for all of them.
    from gpukernels.ops.reduce import dtypes as reduce_dtypes
    from gpukernels.ops.reduce import rungs, scratch_sizes
    from gpukernels.ops.reduce.program import Program

    dtype = numpy.dtype(dtype)
    assert rungs.auto(op, n, dtype).name == "one_pass"
    operation = {v: k for k, v in reduce_dtypes.OPERATORS.items()}[op]
    result = reduction_result_dtype(operation, dtype, None)
    read, acc = reduce_dtypes.accumulator(op, dtype, result, True)
    written = reduce_dtypes.writes(op, read, acc, result, full=True)
    program = Program(read, scratch_sizes(132))
    rungs.plan_one_pass(program, rungs.Problem(
        op, n, 1, read, acc, written, (), 132,
        resident=None if resident is None else (lambda instance, threads: resident)))
    (launch,) = [step for step in program.steps if step[0] == "launch"]
    assert launch[1].instance.endswith(", 256, true>") == strided, launch[1].instance
    if strided:
        assert launch[1].block == (rungs.BLOCK, 1, 1) and launch[2][4] == 0
        assert launch[1].grid[0] <= rungs.blocks_per_wave(rungs.BLOCK, 132)
    else:
        assert launch[2][4] > 0  # a segment per block
    assert launch[1].instance in rungs.LADDER["one_pass"].instances


# ---- GPU: every rung against NumPy -------------------------------------------------------------

cupy = pytest.importorskip("cupy")


def _tied(shape, dtype, rng):
    """Random data with many ties: eight distinct values (bool: two)."""
    dtype = numpy.dtype(dtype)
    values = rng.integers(0, 8, size=shape)
    if dtype.kind == "b":
        return (values % 2).astype(bool)
    if dtype.kind == "u":
        return (values * 3).astype(dtype)
    return (values - 4).astype(dtype) * (dtype.type(0.5) if dtype.kind == "f" else 1)


def _compare(got, x, operation, **kwargs):
    want = getattr(numpy, operation)(x, **kwargs)
    got = cupy.asnumpy(got)
    assert got.dtype == numpy.int64 and got.shape == numpy.shape(want)
    numpy.testing.assert_array_equal(got, want)


LENGTHS = (1, 2, 33, 1025, 10**5 + 7, 10**6 + 3)


@pytest.mark.gpu
@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("method", RUNGS + ("auto",))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_flat_search_of_every_dtype(operation, method, dtype, rng):
    for n in LENGTHS:
        x = _tied((n,), dtype, rng)
        _compare(getattr(gk, operation)(cupy.asarray(x), method=method), x, operation)
        # the extreme only once, late: it must be found wherever it falls
        if n > 1 and dtype.kind != "b":
            x[n - 1 - n // 7] = numpy.iinfo(dtype).max if dtype.kind in "iu" and \
                operation == "argmax" else (numpy.iinfo(dtype).min if dtype.kind in "iu" else
                                            (1e4 if operation == "argmax" else -1e4))
            _compare(getattr(gk, operation)(cupy.asarray(x), method=method), x, operation)


@pytest.mark.gpu
@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("dtype", ["int32", "float32", "float16", "uint8", "float64", "int64"])
@pytest.mark.parametrize(("shape", "axis"), [
    ((7, 5), 1), ((7, 5), 0), ((1000, 3), 1), ((3, 9000), 1), ((4100, 33), 0), ((10**5, 2), 0),
    ((5, 6, 7), 0), ((5, 6, 7), -1), ((5, 6, 7), 1), ((2, 3, 4, 5), 2), ((300, 1, 40), 1),
    ((1, 2**16), 1), ((64, 2**14), 1), ((2**14, 64), 0), ((9,), 0), ((), None), ((4, 5), None)])
def test_search_along_an_axis(operation, dtype, shape, axis, rng):
    x = _tied(shape, dtype, rng)
    for keepdims in (False, True):
        got = getattr(gk, operation)(cupy.asarray(x), axis=axis, keepdims=keepdims)
        _compare(got, x, operation, axis=axis, keepdims=keepdims)


@pytest.mark.gpu
@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("method", RUNGS)
def test_the_first_nan_wins(operation, method, rng):
    x = rng.uniform(-1, 1, 300000).astype(numpy.float32)
    x[12345] = numpy.inf if operation == "argmax" else -numpy.inf
    _compare(getattr(gk, operation)(cupy.asarray(x), method=method), x, operation)
    x[200001] = numpy.nan
    x[150000] = numpy.nan
    _compare(getattr(gk, operation)(cupy.asarray(x), method=method), x, operation)
    m = x[: 299 * 1000].reshape(299, 1000)
    m[7, 3] = m[200, 3] = numpy.nan
    for axis in (0, 1):
        _compare(getattr(gk, operation)(cupy.asarray(m), axis=axis), m, operation, axis=axis)


@pytest.mark.gpu
@pytest.mark.parametrize("operation", OPERATIONS)
def test_strided_reversed_and_transposed_views(operation, rng):
    base = _tied((64, 301), "float32", rng)
    device = cupy.asarray(base)
    views = [(device[:, ::3], base[:, ::3]), (device[::-1], base[::-1]), (device.T, base.T),
             (device.reshape(-1)[1:], base.reshape(-1)[1:]), (device[::-2, ::-1], base[::-2, ::-1])]
    for view, host in views:
        for axis in (None, 0, -1):
            _compare(getattr(gk, operation)(view, axis=axis), host, operation, axis=axis)


@pytest.mark.gpu
@pytest.mark.parametrize("operation", OPERATIONS)
def test_empty_and_length_one(operation):
    function = getattr(gk, operation)
    with pytest.raises(ValueError, match="empty sequence"):
        function(cupy.zeros((0,), cupy.float32))
    with pytest.raises(ValueError, match="empty sequence"):
        function(cupy.zeros((3, 0), cupy.float32), axis=1)
    assert function(cupy.zeros((0, 3), cupy.float32), axis=1).shape == (0,)
    _compare(function(cupy.ones((4, 1)), axis=1), numpy.ones((4, 1)), operation, axis=1)
    assert int(function(cupy.asarray(5.0))) == 0


@pytest.mark.gpu
@pytest.mark.parametrize("operation", OPERATIONS)
def test_out_and_bad_arguments(operation, rng):
    from gpukernels._core.launch import record_launches

    x = _tied((300, 70), "int32", rng)
    function = getattr(gk, operation)
    out = poisoned((70,), numpy.int64)
    assert function(cupy.asarray(x), axis=0, out=out) is out
    _compare(out, x, operation, axis=0)
    device = cupy.asarray(x)
    for error, kwargs in ((TypeError, {"axis": (0,)}), (TypeError, {"axis": 1.0}),
                          (TypeError, {"axis": True}), (numpy.exceptions.AxisError, {"axis": 2}),
                          (ValueError, {"method": "bogus"}), (TypeError, {"dtype": "int32"}),
                          (ValueError, {"axis": 0, "out": cupy.empty(69, cupy.int64)})):
        with record_launches() as launches, pytest.raises(error):
            function(device, **kwargs)
        assert not launches, kwargs
    with pytest.raises(TypeError, match="complex"):
        function(cupy.ones(3, cupy.complex64))
    _compare(function(device, axis=1), x, operation, axis=1)  # still works


@pytest.mark.gpu
@pytest.mark.parametrize("operation", OPERATIONS)
def test_the_same_input_gives_the_same_index(operation, rng):
    x = cupy.asarray(_tied((2**20 + 3,), "float32", rng))
    for method in RUNGS:
        first = int(getattr(gk, operation)(x, method=method))
        assert int(getattr(gk, operation)(x, method=method)) == first
        assert first == int(getattr(numpy, operation)(cupy.asnumpy(x)))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("operation", ["argmin", "argmax"])
@pytest.mark.parametrize("n", [2**24 + 3, 2**25 + 3])
def test_searches_of_many_elements_in_one_pass(operation, dtype, n, rng):
    # Past one wave of its segments one_pass reads float elements in shuffle's grid-stride
    # wave, one launch (float32 from about 2^23 elements on 132 SMs, float16 from about 2^24):
    # the first index of the extreme among ties far apart, the first NaN, both methods.
    x = _tied((n,), dtype, rng)
    extreme = x.max() + 1 if operation == "argmax" else x.min() - 1
    x[[n - 5, 7, n // 2]] = extreme  # ties: index 7 is the answer
    device = cupy.asarray(x)
    for method in ("one_pass", "auto"):
        _compare(getattr(gk, operation)(device, method=method), x, operation)
    if numpy.dtype(dtype).kind == "f":
        x[[n - 2, n // 3]] = numpy.nan  # the first NaN wins over every number
        device = cupy.asarray(x)
        for method in ("one_pass", "auto"):
            _compare(getattr(gk, operation)(device, method=method), x, operation)
