"""mean, var and std: every rung and the axis kernels against NumPy, on fresh random data.

Results go into poisoned ``out=`` arrays (every byte 0xFF) where a test writes there; inputs
cover every dtype, lengths around the block sizes, every axis case, strided views, ``ddof``,
data whose mean is large against its spread, NaN, empty inputs, and the same input twice
(bitwise the same result).
"""

from __future__ import annotations

import math
import warnings

import numpy
import pytest

import gpukernels as gk
from gpukernels.ops.moments import check, moment_states
from gpukernels.ops.reduce.dtypes import mean_result_dtype, reduction_result_dtype
from gpukernels.validation import poisoned

RUNGS = gk.methods("reduce")
OPERATIONS = ("mean", "var", "std")
DTYPES = [numpy.dtype(c) for c in "?bhilqBHILQefdFD"]


def _result_dtype(operation, dtype, requested=None):
    if operation == "mean":
        return mean_result_dtype(dtype, requested)
    return reduction_result_dtype("var", dtype, requested)


# ---- CPU: dtypes and references ----------------------------------------------------------------

@pytest.mark.parametrize("operation", OPERATIONS)
def test_result_dtypes_are_numpys(operation):
    for dtype in DTYPES:
        for requested in (None, "float16", "float32", "float64"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = getattr(numpy, operation)(numpy.ones(2, dtype), dtype=requested).dtype
            assert _result_dtype(operation, dtype, requested) == want, (dtype, requested)


def test_unsupported_dtypes_are_refused():
    for operation in OPERATIONS:
        with pytest.raises(TypeError):
            _result_dtype(operation, numpy.dtype("datetime64[s]"))
        with pytest.raises(TypeError):
            _result_dtype(operation, numpy.dtype("float32"), "U3")
    with pytest.raises(TypeError, match="float dtype"):
        reduction_result_dtype("var", numpy.dtype("float32"), "int32")


@pytest.mark.parametrize("operation", ("var", "std"))
def test_reference_bounds_hold_for_numpys_float32_and_catch_a_sum_of_squares(operation):
    rng = numpy.random.default_rng(3)
    x = (1000 + rng.uniform(-1, 1, 10**5)).astype(numpy.float32)
    want, bound = check.make_spread_reference(operation)(x)
    numpys = getattr(numpy, operation)(x.astype(numpy.float64)).astype(numpy.float32)
    assert abs(numpys - want) <= bound
    # the textbook one-pass formula E[x^2] - E[x]^2 in float32 is far off here
    wide = x.astype(numpy.float32)
    naive = numpy.mean(wide * wide) - numpy.mean(wide) ** 2
    naive = numpy.sqrt(abs(naive)) if operation == "std" else naive
    assert abs(naive - want) > bound


def test_mean_reference_bound_holds_for_numpys_float32_mean():
    rng = numpy.random.default_rng(4)
    x = rng.uniform(-1, 1, (3000, 70)).astype(numpy.float32)
    for axis in (None, 0, 1):
        want, bound = check.mean_reference(x, axis=axis)
        assert numpy.all(abs(numpy.mean(x, axis=axis, dtype=numpy.float64).astype(numpy.float32)
                             - want) <= bound)


def test_peers_are_held_to_numpys_own_float32_bound():
    rng = numpy.random.default_rng(5)
    x = rng.uniform(-1, 1, (2000, 60)).astype(numpy.float32)
    for operation in OPERATIONS:
        for axis in (None, 0, 1):
            want, bound = _reference(operation, x, axis=axis, accumulated_in=numpy.float32)
            numpys = getattr(numpy, operation)(x, axis=axis)  # float32 throughout
            assert numpy.all(abs(numpys - want) <= bound), (operation, axis)
            _, kernels_bound = _reference(operation, x, axis=axis)
            assert numpy.all(kernels_bound <= bound)


def test_the_finish_launches_only_compiled_instances():
    from gpukernels.ops import moments

    for dtype in ("float16", "float32", "float64"):
        for root in (False, True):
            c_type = moments._OUT_C_TYPES[numpy.dtype(dtype)]
            launch = moments.finish_launch("moments_finish",
                                           (c_type, "true" if root else "false"), 10**6 + 1)
            assert launch.instance in moments.SOURCE.instances
            assert launch.grid[0] * launch.block[0] >= 10**6 + 1


def test_accumulators_match_the_kernels_layout():
    from gpukernels.ops.reduce import dtypes, rungs

    # gk_mean {double sum, count} and gk_moments {double count, mean, m2}: CuPy allocates
    # them as 2 and 3 float64 per element
    assert dtypes.MEAN.itemsize == 16 and dtypes.MOMENTS.itemsize == 24
    f16, f32, f64 = (numpy.dtype(t) for t in ("float16", "float32", "float64"))
    for dtype in DTYPES:
        if dtype.kind == "c":
            continue
        assert dtypes.accumulator("MeanOp", dtype, f64, True) == (dtype, dtypes.MEAN)
        assert dtypes.accumulator("MomentsOp", dtype, f64, True) == (dtype, dtypes.MOMENTS)
    # a mean is written straight as its result; the moments go to the finish
    for result in (f16, f32, f64):
        assert dtypes.writes("MeanOp", f32, dtypes.MEAN, result, full=False) == result
        assert dtypes.writes("MomentsOp", f32, dtypes.MOMENTS, result, full=True) == \
            dtypes.MOMENTS
    assert rungs.auto("MeanOp", 2**28, f32).name == "one_pass"
    assert rungs.auto("MomentsOp", 2**25, numpy.dtype("int32")).name == "one_pass"
    assert rungs.auto("MomentsOp", 2**24, f32).name == "one_pass"


def test_plans_are_cached_under_their_own_keys():
    from gpukernels.ops import moments

    class Fake:  # what the key reads of an array
        shape, strides, dtype, ndim = (4, 5), (20, 4), numpy.dtype("float32"), 2

        class data:
            ptr, device_id = 256, 0

    x = Fake()
    mean_key = moments._layout_key("mean", x, 1, None, False, "auto")
    assert mean_key[0] == "moments"  # never a reduction's key of the same shape
    assert moments._layout_key("var", x, 1, None, False, "auto", 1, int) != \
        moments._layout_key("var", x, 1, None, False, "auto", True, bool)
    assert moments._layout_key("mean", x, [1], None, False, "auto") is None  # a list
    assert moments._layout_key("mean", x, 1.0, None, False, "auto") is None  # validated


@pytest.mark.parametrize("operation", OPERATIONS + ("argmin", "argmax"))
def test_benchmark_candidates_hold_the_libraries_to_numpys_bound(operation, monkeypatch):
    # the benchmark's candidates on host data, NumPy standing in for CuPy: the ceiling, the
    # library peer (NumPy's float32 result passes the peers' check) and one row per rung
    from gpukernels._core import device
    from gpukernels._core.ladder import OPERATIONS as REGISTRY
    from gpukernels.benchmark.sweep import Case

    monkeypatch.setattr(device, "cupy", numpy)
    monkeypatch.setattr(device, "torch_on_gpu", lambda: None)
    spec = REGISTRY[operation].bench
    assert spec.ceiling.startswith("cupy.sum (CUB)")
    for options in ((), (("axis", 0),)):
        case = Case(operation, (3000, 40), "float32", "size" if not options else "axis", options)
        candidates, work, notes = spec.candidates(case, RUNGS, 7, torch=True)
        ceiling, peer, *rungs = candidates
        assert (ceiling.role, peer.method, peer.role) == ("ceiling", f"cupy.{operation}",
                                                          "library")
        assert peer.check(peer.run())
        assert [r.method for r in rungs] == (list(RUNGS) if not options else ["axis kernels"])
        assert work == 3000 * 40 * 4 / 1e9 and notes["input_bytes"] == 3000 * 40 * 4


# ---- GPU: every rung against NumPy -------------------------------------------------------------

cupy = pytest.importorskip("cupy")


def _reference(operation, x, **kwargs):
    if operation == "mean":
        return check.mean_reference(x, **kwargs)
    return check.make_spread_reference(operation)(x, **kwargs)


def _compare(got, x, operation, **kwargs):
    want, bound = _reference(operation, x, **kwargs)
    got = cupy.asnumpy(got)
    assert got.shape == numpy.shape(want)
    assert got.dtype == _result_dtype(operation, x.dtype, kwargs.get("dtype"))
    error = numpy.abs(got - numpy.asarray(want))  # complex results keep their imaginary part
    bad = ~(error <= bound) & ~(numpy.isnan(got) & numpy.isnan(want))
    assert not numpy.any(bad), (f"{numpy.sum(bad)} of {numpy.size(bad)} wrong: got "
                                f"{got[bad] if got.ndim else got}, want "
                                f"{want[bad] if numpy.ndim(want) else want}")


LENGTHS = (1, 2, 33, 1025, 10**5 + 7, 10**6 + 3)


@pytest.mark.gpu
@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("method", RUNGS + ("auto",))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_full_reductions_of_every_dtype(operation, method, dtype, rng):
    for n in LENGTHS:
        x = check.inputs((n,), dtype, rng)[0][0]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # var of one element with ddof=1
            _compare(getattr(gk, operation)(cupy.asarray(x), method=method), x, operation)


AXIS_CASES = [((7, 5), 1), ((7, 5), 0), ((1000, 3), 1), ((3, 9000), 1), ((4100, 33), 0),
              ((10**5, 2), 0), ((5, 6, 7), (0, 2)), ((5, 6, 7), -1), ((2, 3, 4, 5), (1, 3)),
              ((300, 1, 40), 1), ((1, 2**16), 1), ((64, 2**14), 1), ((9,), 0), ((), None)]


@pytest.mark.gpu
@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("dtype", ["int32", "float32", "float16", "uint8", "float64",
                                   "complex64"])
@pytest.mark.parametrize(("shape", "axis"), AXIS_CASES)
def test_reductions_along_axes(operation, dtype, shape, axis, rng):
    x = check.inputs(shape, dtype, rng)[0][0]
    for keepdims in (False, True):
        got = getattr(gk, operation)(cupy.asarray(x), axis=axis, keepdims=keepdims)
        _compare(got, x, operation, axis=axis, keepdims=keepdims)


@pytest.mark.gpu
@pytest.mark.parametrize("operation", ("var", "std"))
@pytest.mark.parametrize("ddof", (0, 1, 2.5))
def test_ddof(operation, ddof, rng):
    x = rng.uniform(-1, 1, (300, 41)).astype(numpy.float32)
    for axis in (None, 0, 1):
        got = getattr(gk, operation)(cupy.asarray(x), axis=axis, ddof=ddof)
        _compare(got, x, operation, axis=axis, ddof=ddof)


SPREAD_CASES = [((7,), None), ((10**6 + 3,), None), ((2**25 + 5,), None), ((257, 1031), 0),
                ((257, 1031), 1), ((4100, 33), 0), ((3, 9000), 1), ((1000, 3), 1),
                ((2, 3, 4, 5), (1, 3))]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize(("shape", "axis"), SPREAD_CASES)
def test_var_and_std_of_floats_finish_in_the_reductions_last_write(dtype, shape, axis, rng):
    """var and std of float data with ddof 0 or 1 run no finishing launch: the reduction's last
    write divides the moments (and takes the root). Checked against NumPy in float64, and the
    same input gives the same bits. Other rungs than one_pass (for full reductions) keep the
    finishing launch."""
    from gpukernels._core.launch import record_launches

    host = check.inputs(shape, dtype, rng)[0][0]
    x = cupy.asarray(host)
    for ddof in (0, 1.0):
        for name in ("var", "std"):
            with warnings.catch_warnings(), record_launches() as launches:
                warnings.simplefilter("ignore", RuntimeWarning)  # no degrees of freedom left
                got = getattr(gk, name)(x, axis=axis, ddof=ddof)
            instances = [launch.instance for launch in launches]
            assert "gk_spread" in instances[-1], instances
            assert not any("moments_finish" in i for i in instances), instances
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                _compare(got, host, name, axis=axis, ddof=ddof)
                again = getattr(gk, name)(x, axis=axis, ddof=ddof)
            numpy.testing.assert_array_equal(cupy.asnumpy(again), cupy.asnumpy(got))
    if axis is None:
        for method in ("two_pass", "shuffle"):
            with record_launches() as launches:
                gk.var(x, method=method)
            assert "moments_finish" in launches[-1].instance, method


@pytest.mark.gpu
@pytest.mark.parametrize("operation", ("var", "std"))
@pytest.mark.parametrize("method", RUNGS)
def test_a_large_mean_against_the_spread_stays_accurate(operation, method, rng):
    # var of 1e8 + u, u uniform in (-1, 1), is 1/3: a sum of squares in float64 would lose it
    # all (1e16 against 1e8 * 2**-52 per term); merged moments keep it to about 1e-8
    x = 1e8 + rng.uniform(-1, 1, 10**6)
    got = float(getattr(gk, operation)(cupy.asarray(x), method=method))
    want = float(getattr(numpy, operation)(x))
    assert abs(got - want) <= 1e-7 * want
    for axis in (0, 1):
        y = x.reshape(1000, 1000)
        _compare(getattr(gk, operation)(cupy.asarray(y), axis=axis), y, operation, axis=axis)


@pytest.mark.gpu
@pytest.mark.parametrize("operation", OPERATIONS)
def test_nan_propagates(operation):
    x = numpy.ones((1000, 300), dtype=numpy.float32)
    x[700, 5] = numpy.nan
    x[3, 7] = numpy.inf
    device = cupy.asarray(x)
    assert numpy.isnan(float(getattr(gk, operation)(device)))
    got = cupy.asnumpy(getattr(gk, operation)(device, axis=0))
    with numpy.errstate(invalid="ignore"):  # NumPy's inf - inf, which the test is about
        want = getattr(numpy, operation)(x.astype(numpy.float64), axis=0)
    numpy.testing.assert_array_equal(numpy.isnan(got), numpy.isnan(want))
    numpy.testing.assert_array_equal(numpy.isinf(got), numpy.isinf(want))


@pytest.mark.gpu
@pytest.mark.parametrize("method", ("auto", "two_pass", "shuffle"))
def test_the_mean_rounds_as_a_division_of_its_exact_sum(method, rng):
    # Whole numbers sum exactly in float64, so NumPy's sum / n is the correctly rounded mean,
    # which the kernels' last write must give for every count (odd and prime ones included),
    # over either axis and in full.
    for rows, cols in ((3, 7), (1000, 33), (997, 131), (4099, 5)):
        x = rng.integers(-(2 ** 20), 2 ** 20, (rows, cols)).astype(numpy.int32)
        device = cupy.asarray(x)
        for axis in (0, 1, None):
            want = x.astype(numpy.float64).sum(axis=axis) / (x.size if axis is None
                                                              else x.shape[axis])
            got = cupy.asnumpy(gk.mean(device, axis=axis, method=method))
            numpy.testing.assert_array_equal(got, want)


@pytest.mark.gpu
def test_empty_inputs_and_too_few_degrees_of_freedom_warn_like_numpy():
    for operation in OPERATIONS:
        for shape, axis in (((0,), None), ((0, 3), 0), ((3, 0), 1)):
            x = numpy.zeros(shape, numpy.float32)
            with pytest.warns(RuntimeWarning):
                got = cupy.asnumpy(getattr(gk, operation)(cupy.asarray(x), axis=axis))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = getattr(numpy, operation)(x, axis=axis)
            numpy.testing.assert_array_equal(got, want)
            assert got.dtype == want.dtype
        x = numpy.zeros((3, 0), numpy.float32)  # nothing to reduce per result, no warning
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert getattr(gk, operation)(cupy.asarray(x), axis=0).shape == (0,)
    for operation in ("var", "std"):
        x = numpy.asarray([1.0, 2.0], numpy.float32)
        with pytest.warns(RuntimeWarning, match="Degrees of freedom"):
            got = float(getattr(gk, operation)(cupy.asarray(x), ddof=2))
        assert numpy.isinf(got)
        with pytest.warns(RuntimeWarning, match="Degrees of freedom"):
            assert numpy.isnan(float(getattr(gk, operation)(cupy.asarray(x[:1]), ddof=1)))


@pytest.mark.gpu
@pytest.mark.parametrize("operation", OPERATIONS)
def test_single_elements_and_length_one_axes(operation):
    x = numpy.asarray([[3.0], [numpy.inf], [-2.0]], numpy.float32)
    got = cupy.asnumpy(getattr(gk, operation)(cupy.asarray(x), axis=1))
    with numpy.errstate(invalid="ignore"):  # NumPy's inf - inf: the spread of [inf] is nan
        want = getattr(numpy, operation)(x, axis=1)
    numpy.testing.assert_array_equal(got, want)
    z = numpy.asarray([[1 + 2j]], numpy.complex64)
    _compare(getattr(gk, operation)(cupy.asarray(z), axis=0), z, operation, axis=0)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["var", "std"])
@pytest.mark.parametrize("axis", [None, 1])
def test_a_planned_var_looks_up_one_plan_a_call(name, axis, monkeypatch, rng):
    # var and std of float data in one launch keep the reduction's plan in their own after the
    # first call: a later call looks up one plan, not two, and gives the first call's bits.
    from gpukernels._core import launch

    host = check.inputs((1000, 37), "float32", rng)[0][0]
    x = cupy.asarray(host)
    first = getattr(gk, name)(x, axis=axis, ddof=1)
    lookups = []
    get = launch.PLANS.get
    monkeypatch.setattr(launch.PLANS, "get", lambda key: lookups.append(key) or get(key))
    again = getattr(gk, name)(x, axis=axis, ddof=1)
    assert [key[:2] for key in lookups] == [("moments", name)]
    numpy.testing.assert_array_equal(cupy.asnumpy(again), cupy.asnumpy(first))
    _compare(again, host, name, axis=axis, ddof=1)


@pytest.mark.gpu
@pytest.mark.parametrize("operation", OPERATIONS)
def test_strided_and_reversed_views(operation, rng):
    base = rng.uniform(-1, 1, (64, 301)).astype(numpy.float32)
    device = cupy.asarray(base)
    for view, host in ((device[:, ::3], base[:, ::3]), (device[::-1], base[::-1]),
                       (device.T, base.T), (device.reshape(-1)[1:], base.reshape(-1)[1:])):
        for axis in (None, 0, -1):
            _compare(getattr(gk, operation)(view, axis=axis), host, operation, axis=axis)


@pytest.mark.gpu
def test_mean_dtype_requests(rng):
    x = rng.integers(-1000, 1000, 5000).astype(numpy.int32)
    for requested in (None, "float16", "float32", "float64", "complex64"):
        _compare(gk.mean(cupy.asarray(x), dtype=requested), x, "mean", dtype=requested)
    y = rng.uniform(-1, 1, 5000)
    _compare(gk.var(cupy.asarray(y), dtype=numpy.float32), y, "var", dtype=numpy.float32)


@pytest.mark.gpu
@pytest.mark.parametrize("operation", OPERATIONS)
def test_out_is_written_and_cast(operation, rng):
    x = rng.uniform(-1, 1, (300, 70)).astype(numpy.float32)
    out = poisoned((70,), numpy.float32)
    assert getattr(gk, operation)(cupy.asarray(x), axis=0, out=out) is out
    _compare(out, x, operation, axis=0)
    wide = poisoned((300,), numpy.float64)
    assert getattr(gk, operation)(cupy.asarray(x), axis=1, out=wide) is wide
    want, _ = _reference(operation, x, axis=1)
    numpy.testing.assert_allclose(cupy.asnumpy(wide), want, rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("operation", OPERATIONS)
def test_bad_arguments_are_refused_and_the_library_works_on(operation):
    from gpukernels._core.launch import record_launches

    x = cupy.ones((40, 30), cupy.float32)
    function = getattr(gk, operation)
    bad = [(TypeError, {"axis": 1.0}), (TypeError, {"axis": True}),
           (numpy.exceptions.AxisError, {"axis": 2}), (ValueError, {"axis": (0, 0)}),
           (ValueError, {"method": "bogus"}), (TypeError, {"dtype": "U3"}),
           (ValueError, {"axis": 0, "out": cupy.empty(29, cupy.float32)}),
           (TypeError, {"out": numpy.empty(())})]
    if operation != "mean":
        bad += [(TypeError, {"ddof": "1"}), (TypeError, {"ddof": None})]
    for error, kwargs in bad:
        with record_launches() as launches, pytest.raises(error):
            function(x, **kwargs)
        assert not launches, kwargs
    with pytest.raises(TypeError):
        function(numpy.ones(3))
    assert float(function(x)) == (1.0 if operation == "mean" else 0.0)


@pytest.mark.gpu
@pytest.mark.parametrize("operation", ("var", "std"))
def test_the_same_input_gives_the_same_bits(operation, rng):
    x = cupy.asarray(rng.standard_normal((2**20 + 3,)).astype(numpy.float32))
    for method in RUNGS:
        first = getattr(gk, operation)(x, method=method)
        assert bool(getattr(gk, operation)(x, method=method) == first)
    m = x[: 2**20].reshape(1024, 1024)
    for axis in (0, 1):
        first = getattr(gk, operation)(m, axis=axis)
        assert bool((getattr(gk, operation)(m, axis=axis) == first).all())


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "int32", "float16"])
@pytest.mark.parametrize("n", [2**24 + 3, 2**25 + 3])
def test_moments_of_many_elements(dtype, n, rng):
    # Past one wave of its segments (from about 2^23 four-byte elements on 132 SMs, 2^24
    # float16) one_pass reads var's moments in shuffle's grid-stride wave and folds them in the
    # same launch: against NumPy on either side of the switch, with a mean large against the
    # spread, and bitwise repeatable.
    x = check.inputs((n,), dtype, rng)[0][0]
    if dtype == "float32":
        x = (x + numpy.float32(1e4)).astype(numpy.float32)
    device = cupy.asarray(x)
    for method in ("one_pass", "auto"):
        for operation in ("var", "std", "mean"):
            got = getattr(gk, operation)(device, method=method)
            _compare(got, x, operation)
    first = cupy.asnumpy(gk.var(device)).tobytes()
    assert all(cupy.asnumpy(gk.var(device)).tobytes() == first for _ in range(3))


STATE_CASES = [((1000, 7), (1,)), ((3000, 16), (1,)), ((333, 3), (1,)), ((257, 300), (1,)),
               ((300, 257), (0,)), ((4100, 33), (0,)), ((5, 6, 7), (0, 2)), ((40, 3, 5), (1, 2)),
               ((10**5 + 3,), (0,))]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "complex64"])
@pytest.mark.parametrize(("shape", "axes"), STATE_CASES)
def test_moment_states_are_the_count_mean_and_squared_deviations(dtype, shape, axes, rng):
    # The states gpukernels.dask merges across blocks, straight from the kernels (the row
    # kernels' short rows, a thread a row of up to 16 elements, write them only here): the
    # count exactly, the mean and the sum of squared deviations against float64 NumPy, for a
    # mean large against the spread; complex data as its real and imaginary parts.
    x = check.inputs(shape, dtype, rng)[0][0]
    if x.dtype.kind == "f":
        x = (x + 100).astype(dtype)
    parts = numpy.stack([x.real, x.imag], axis=-1) if x.dtype.kind == "c" else x[..., None]
    host = parts.astype(numpy.float64)
    count = math.prod(shape[ax] for ax in axes)
    mean = host.mean(axis=axes, keepdims=True)
    m2 = numpy.square(host - mean).sum(axis=axes, keepdims=True)
    scale = numpy.square(host).sum(axis=axes, keepdims=True)
    for keepdims in (False, True):
        got = moment_states(cupy.asarray(x), axes, keepdims, "auto")
        kept = tuple(1 if ax in axes else n for ax, n in enumerate(shape)) if keepdims else \
            tuple(n for ax, n in enumerate(shape) if ax not in axes)
        assert got.shape == kept + (parts.shape[-1], 3) and got.dtype == numpy.float64
        got = cupy.asnumpy(got).reshape(-1, parts.shape[-1], 3)
        want_mean = mean.reshape(-1, parts.shape[-1])
        want_m2 = m2.reshape(-1, parts.shape[-1])
        # float64 merges of at most count terms: a relative error of a few count * eps64
        bound = 8 * count * numpy.finfo(numpy.float64).eps
        assert numpy.array_equal(got[..., 0], numpy.full(want_mean.shape, float(count)))
        magnitude = numpy.abs(host).mean(axis=axes).reshape(-1, parts.shape[-1])
        assert numpy.all(numpy.abs(got[..., 1] - want_mean) <= bound * magnitude)
        assert numpy.all(numpy.abs(got[..., 2] - want_m2) <=
                         bound * scale.reshape(-1, parts.shape[-1]))
        flat = moment_states(cupy.asarray(x), axes, keepdims, "auto", shaped=False)
        assert numpy.array_equal(cupy.asnumpy(flat).reshape(got.shape), got)
