"""Every ``dtype=`` request the reductions accept, on every kernel path.

For each operation, input dtype and accepted request (the compile test's list), the full
reduction runs through every rung at two sizes (one block, which reduces straight to the result,
and several, whose partials a second launch or the last block folds) and the axis reduction
through each kernel: short rows, rows, columns, and rows and columns split with a second pass.
Each path writes the result dtype through its own kernel instance, so this is what launches
them all (scripts/launch_cover.py lists the instances no test launches).

The data are small non-negative integers (products: ones and a few twos), so every cast a
request makes is exact or NumPy's defined wrap-around, integer results are compared exactly and
float results within one rounding of the exact value.
"""

from __future__ import annotations

import math
import warnings

import numpy
import pytest

import gpukernels as gk
from edges_helpers import accepted_requests

cupy = pytest.importorskip("cupy")

pytestmark = pytest.mark.gpu

NUMPY_OPERATIONS = {"sum": numpy.sum, "prod": numpy.prod, "min": numpy.min, "max": numpy.max}
FULL_SIZES = (37, 5003)  # one block of every rung; several blocks of every rung and dtype
AXIS_CASES = (((5, 7), 1), ((5, 40), 1), ((40, 5), 0), ((3, 5003), 1), ((5003, 3), 0))
CASES = [(operation, dtype, requested) for operation in NUMPY_OPERATIONS
         for dtype, requested, _ in accepted_requests(operation)]


def _data(operation: str, shape, dtype: numpy.dtype, rng) -> numpy.ndarray:
    if operation == "prod":  # ones and eight twos: products of at most 256, exact everywhere
        data = numpy.ones(math.prod(shape), dtype=numpy.int64)
        data[rng.choice(data.size, size=min(8, data.size), replace=False)] = 2
        return data.reshape(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    return rng.integers(0, 4, size=shape).astype(dtype)


def _check(operation, got, host, requested, axis, context):
    kwargs = {} if operation in ("min", "max") else {"dtype": requested}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # complex to real requests warn, as NumPy does
        want = numpy.asarray(NUMPY_OPERATIONS[operation](host, axis=axis, **kwargs))
        got = cupy.asnumpy(got)
        assert got.dtype == want.dtype and got.shape == want.shape, context
        if want.dtype.kind in "biu":
            numpy.testing.assert_array_equal(got, want, err_msg=context)
            return
        wide = numpy.complex128 if want.dtype.kind == "c" else numpy.float64
        # The exact value of the elements as the request casts them, rounded once.
        cast = host.astype(want.dtype).astype(wide) if operation in ("sum", "prod") \
            else host.astype(wide)
        exact = numpy.asarray(NUMPY_OPERATIONS[operation](cast, axis=axis)).astype(want.dtype)
    numpy.testing.assert_allclose(got.astype(wide), exact.astype(wide),
                                  rtol=float(numpy.finfo(want.dtype).eps), err_msg=context)


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")  # NumPy warns as well
@pytest.mark.parametrize("operation, dtype, requested", CASES,
                         ids=[f"{o}-{d.name}-{numpy.dtype(r).name if r else 'default'}"
                              for o, d, r in CASES])
def test_every_request_on_every_kernel_path(operation, dtype, requested, rng):
    function = getattr(gk, operation)
    kwargs = {} if operation in ("min", "max") else {"dtype": requested}
    for size in FULL_SIZES:
        host = _data(operation, (size,), dtype, rng)
        x = cupy.asarray(host)
        for method in gk.methods(operation):
            _check(operation, function(x, method=method, **kwargs), host, requested, None,
                   f"{operation} {dtype} dtype={requested} n={size} {method}")
    for shape, axis in AXIS_CASES:
        host = _data(operation, shape, dtype, rng)
        _check(operation, function(cupy.asarray(host), axis=axis, **kwargs), host, requested,
               axis, f"{operation} {dtype} dtype={requested} {shape} axis={axis}")
