"""Hostile inputs on the GPU: every bad call raises a clear TypeError or ValueError before any
kernel is launched, and the next valid call still works; inputs that a kernel could mishandle
(unsupported dtypes behind ``__cuda_array_interface__``, misaligned data, results too large for
the device) never crash the process.

Host arrays, Python lists and scalars, and CPU DLPack tensors are refused in test_api.py, which
runs without a GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy
import pytest

import gpukernels as gk
import references as reference
from edges_helpers import (
    ALL_REDUCTIONS,
    MATMUL_METHODS,
    REDUCE_METHODS,
    TRANSPOSE_METHODS,
    assert_reduction_matches,
    reduction,
    reduction_data,
    refused,
)
from gpukernels._core import compile as _compile
from gpukernels._core import floats

cupy = pytest.importorskip("cupy")

pytestmark = pytest.mark.gpu


class CudaArray:
    """An object exposing only ``__cuda_array_interface__`` (version 3), over ``owner``'s memory
    starting ``offset`` bytes in, with any typestr, descr, shape and strides."""

    def __init__(self, owner, shape, typestr, *, offset=0, strides=None, descr=None):
        self.owner = owner  # keeps the memory alive
        self.__cuda_array_interface__ = {
            "shape": tuple(shape), "typestr": typestr, "strides": strides,
            "data": (owner.data.ptr + offset, False), "version": 3,
        }
        if descr is not None:
            self.__cuda_array_interface__["descr"] = descr


def fake_array(shape, typestr, descr=None):
    owner = cupy.zeros(4096, dtype=cupy.uint8)
    return CudaArray(owner, shape, typestr, descr=descr)


# Dtypes with no kernel, behind __cuda_array_interface__ (CuPy cannot make most of them itself).
UNSUPPORTED_TYPESTRS = [
    ("object", "|O8", None), ("unicode", "<U2", None), ("bytes", "|S4", None),
    ("structured", "|V8", [("a", "<i4"), ("b", "<f4")]), ("void", "|V4", None),
    ("void2", "|V2", None),  # two bytes, but not bfloat16
    ("datetime64", "<M8[s]", None), ("timedelta64", "<m8[s]", None),
]


def refuse_kernel_lookup(family, name):
    raise AssertionError(f"a kernel ({name}) was fetched for launch by a call that must fail "
                         "validation first")


def valid_calls_work(rng):
    """Every operation, every rung, on small valid inputs, against NumPy."""
    a = reference.random_array((37, 29), numpy.float32, rng, integer_valued=True)
    b = reference.random_array((29, 11), numpy.float32, rng, integer_valued=True)
    for method in TRANSPOSE_METHODS:
        if refused("transpose", method, cupy.asarray(a)):
            continue  # the word rungs move 1- and 2-byte elements
        assert cupy.asnumpy(gk.transpose(cupy.asarray(a), method=method)).tobytes() == \
            numpy.ascontiguousarray(a.T).tobytes()
    for method in MATMUL_METHODS:
        numpy.testing.assert_array_equal(
            cupy.asnumpy(gk.matmul(cupy.asarray(a), cupy.asarray(b), method=method)),
            numpy.matmul(a, b))
    for name in ALL_REDUCTIONS:
        if hasattr(gk, name):
            host = reduction_data(name, (37, 29), numpy.float32, rng)
            for method in REDUCE_METHODS:
                assert_reduction_matches(name, getattr(gk, name)(cupy.asarray(host), method=method),
                                         host, context=f"{name} {method} after a bad call")
    integers = rng.integers(-1000, 1000, (37, 29)).astype(numpy.int32)
    for method in gk.methods("scan"):
        for axis in (None, 0, 1):
            numpy.testing.assert_array_equal(
                cupy.asnumpy(gk.cumsum(cupy.asarray(integers), axis=axis, method=method)),
                numpy.cumsum(integers, axis=axis), err_msg=f"cumsum {method} after a bad call")


def numpy_argument_bad_calls(op, call, f32):
    """The bad calls that every operation taking NumPy's ``axis`` and ``dtype`` refuses (the
    reductions and the scans): (id, function making the call, expected exception types)."""
    calls = [
        (f"{op}-dtype-object", lambda: call(f32(10), dtype=object), TypeError),
        (f"{op}-dtype-str", lambda: call(f32(10), dtype="U4"), TypeError),
        (f"{op}-axis-out-of-range", lambda: call(f32(3, 4), axis=2), ValueError),
        (f"{op}-axis-float", lambda: call(f32(3, 4), axis=1.0), TypeError),
        (f"{op}-method-unknown", lambda: call(f32(3, 4), method="no_such_rung"), ValueError),
        (f"{op}-longdouble", lambda: call(fake_array((4,), "<f16")), (TypeError, ValueError)),
    ]
    for name, typestr, descr in UNSUPPORTED_TYPESTRS:
        calls.append((f"{op}-{name}", lambda t=typestr, d=descr: call(fake_array((4, 4), t, d)),
                      (TypeError, ValueError)))
    return calls


def bad_calls():
    """(id, function making the bad call, expected exception types)."""
    f32 = lambda *shape: cupy.ones(shape, dtype=cupy.float32)  # noqa: E731
    calls = [
        # transpose
        ("transpose-1d", lambda: gk.transpose(f32(7)), ValueError),
        ("transpose-0d", lambda: gk.transpose(f32()), ValueError),
        ("transpose-out-shape", lambda: gk.transpose(f32(3, 5), out=f32(3, 5)), ValueError),
        ("transpose-out-dtype",
         lambda: gk.transpose(f32(3, 5), out=cupy.empty((5, 3), cupy.float64)), TypeError),
        ("transpose-out-host", lambda: gk.transpose(f32(3, 5), out=numpy.empty((5, 3), "f4")),
         TypeError),
        ("transpose-out-list", lambda: gk.transpose(f32(3, 5), out=[[0.0] * 3] * 5), TypeError),
        ("transpose-out-cuda-array-interface",
         lambda: gk.transpose(f32(3, 5), out=fake_array((5, 3), "<f4")), TypeError),
        ("transpose-method-unknown", lambda: gk.transpose(f32(3, 5), method="no_such_rung"),
         ValueError),
        ("transpose-method-bytes", lambda: gk.transpose(f32(3, 5), method=b"shared"), TypeError),
        # matmul
        ("matmul-inner-mismatch", lambda: gk.matmul(f32(3, 4), f32(5, 6)), ValueError),
        ("matmul-0d", lambda: gk.matmul(f32(), f32(3)), ValueError),
        ("matmul-batch-mismatch", lambda: gk.matmul(f32(2, 3, 4), f32(3, 4, 5)), ValueError),
        ("matmul-complex", lambda: gk.matmul(f32(3, 3), cupy.ones((3, 3), cupy.complex64)),
         TypeError),
        ("matmul-complex128", lambda: gk.matmul(cupy.ones((3, 3), cupy.complex128),
                                                cupy.ones((3, 3), cupy.complex128)), TypeError),
        ("matmul-b-host", lambda: gk.matmul(f32(3, 3), numpy.ones((3, 3), "f4")), TypeError),
        ("matmul-b-list", lambda: gk.matmul(f32(2, 2), [[1.0, 0.0], [0.0, 1.0]]), TypeError),
        ("matmul-out-shape", lambda: gk.matmul(f32(3, 4), f32(4, 5), out=f32(5, 3)), ValueError),
        ("matmul-out-int", lambda: gk.matmul(f32(3, 4), f32(4, 5),
                                             out=cupy.empty((3, 5), cupy.int32)), TypeError),
        ("matmul-method-unknown", lambda: gk.matmul(f32(3, 4), f32(4, 5), method="no_such_rung"),
         ValueError),
        ("matmul-bfloat16-float16", lambda: gk.matmul(cupy.ones((3, 3), floats.BFLOAT16),
                                                      cupy.ones((3, 3), cupy.float16)), TypeError),
        ("matmul-bfloat16-int32", lambda: gk.matmul(cupy.ones((3, 3), cupy.int32),
                                                    cupy.ones((3, 3), floats.BFLOAT16)), TypeError),
    ]
    for name, typestr, descr in UNSUPPORTED_TYPESTRS:
        calls.append((f"transpose-{name}", lambda t=typestr, d=descr: gk.transpose(
            fake_array((4, 4), t, d)), (TypeError, ValueError)))
        calls.append((f"matmul-{name}", lambda t=typestr, d=descr: gk.matmul(
            fake_array((4, 4), t, d), f32(4, 4)), (TypeError, ValueError)))
    calls.append(("matmul-longdouble", lambda: gk.matmul(fake_array((4, 4), "<f16"), f32(4, 4)),
                  (TypeError, ValueError)))
    for op in ALL_REDUCTIONS:
        def call(*args, op=op, **kwargs):
            return reduction(op)(*args, **kwargs)

        calls += numpy_argument_bad_calls(op, call, f32) + [
            (f"{op}-axis-duplicate", lambda call=call: call(f32(3, 4), axis=(0, -2)), ValueError),
            (f"{op}-out-shape", lambda call=call: call(f32(3, 4), out=f32(1)), ValueError),
            (f"{op}-out-keepdims-shape",
             lambda call=call: call(f32(3, 4), keepdims=True, out=f32()), ValueError),
            (f"{op}-out-host", lambda call=call: call(f32(3, 4), out=numpy.empty((), "f4")),
             TypeError),
        ]
    for op in ("mean", "var", "std"):
        moment = getattr(gk, op)
        calls += numpy_argument_bad_calls(op, moment, f32) + [
            (f"{op}-axis-duplicate", lambda f=moment: f(f32(3, 4), axis=(0, -2)), ValueError),
            (f"{op}-out-shape", lambda f=moment: f(f32(3, 4), axis=0, out=f32(3)), ValueError),
            (f"{op}-out-host", lambda f=moment: f(f32(3, 4), out=numpy.empty((), "f4")),
             TypeError),
        ]
        if op != "mean":
            calls += [(f"{op}-ddof-str", lambda f=moment: f(f32(3, 4), ddof="1"), TypeError),
                      (f"{op}-ddof-array", lambda f=moment: f(f32(3, 4), ddof=f32(1)), TypeError)]
    for op in ("argmin", "argmax"):
        search = getattr(gk, op)
        calls += numpy_argument_bad_calls(op, search, f32) + [
            (f"{op}-axis-tuple", lambda f=search: f(f32(3, 4), axis=(0,)), TypeError),
            (f"{op}-empty", lambda f=search: f(f32(0, 4), axis=0), ValueError),
            (f"{op}-complex", lambda f=search: f(cupy.ones(3, cupy.complex64)), TypeError),
            (f"{op}-out-shape", lambda f=search: f(f32(3, 4), axis=0, out=f32(3)), ValueError),
        ]
    for op in ("cumsum", "cumprod"):
        scan = getattr(gk, op)
        calls += numpy_argument_bad_calls(op, scan, f32) + [
            (f"{op}-axis-tuple", lambda scan=scan: scan(f32(3, 4), axis=(0,)), TypeError),
            (f"{op}-out-shape", lambda scan=scan: scan(f32(3, 4), out=f32(3, 4)), ValueError),
            (f"{op}-out-host", lambda scan=scan: scan(f32(3, 4), axis=0,
                                                      out=numpy.empty((3, 4), "f4")), TypeError),
        ]
    return calls


BAD_CALLS = bad_calls()


@pytest.mark.parametrize("make_call, expected", [c[1:] for c in BAD_CALLS],
                         ids=[c[0] for c in BAD_CALLS])
def test_bad_call_raises_before_any_launch_and_library_stays_usable(make_call, expected,
                                                                    monkeypatch, rng):
    with monkeypatch.context() as patch:
        patch.setattr(_compile.KernelSource, "function", refuse_kernel_lookup)
        with pytest.raises(expected) as info:
            make_call()
    assert str(info.value).strip(), "the error has no message"
    cupy.cuda.Device().synchronize()  # nothing left broken on the device
    valid_calls_work(rng)


# --- results too large for the device ------------------------------------------------------------

def out_of_memory_errors():
    """What CuPy raises when an allocation fails: MemoryError (OutOfMemoryError) from its pool,
    or a CUDA runtime error naming cudaErrorMemoryAllocation with the pool off (as the suite
    runs under compute-sanitizer, GPUKERNELS_NO_POOL=1)."""
    if os.environ.get("GPUKERNELS_NO_POOL") == "1":
        return (MemoryError, cupy.cuda.runtime.CUDARuntimeError)
    return MemoryError


@pytest.mark.parametrize("op", ["transpose", "matmul"])
def test_result_larger_than_the_device_raises_memory_error(op, rng):
    # Stride-0 views of one element: valid inputs whose results need terabytes.
    one = cupy.ones((1, 1), dtype=cupy.float64)
    with pytest.raises(out_of_memory_errors()) as info:
        if op == "transpose":
            gk.transpose(cupy.broadcast_to(one, (2**20, 2**20)))
        else:
            gk.matmul(cupy.broadcast_to(one, (2**20, 1)), cupy.broadcast_to(one, (1, 2**20)))
    assert "memory" in str(info.value).lower(), str(info.value)
    valid_calls_work(rng)


@pytest.mark.slow
@pytest.mark.parametrize("method", REDUCE_METHODS)
def test_sum_of_a_broadcast_view_of_2_to_the_33_elements(method):
    # 2**33 reads of one element: the element count and the loop counters need 64 bits.
    x = cupy.broadcast_to(cupy.full((1,), 3, dtype=cupy.uint8), (2**33,))
    assert int(gk.sum(x, method=method)) == 3 * 2**33


# --- misaligned data ------------------------------------------------------------------------------

# Each case runs in a child process: a misaligned access in a kernel is a sticky CUDA error that
# would leave every later test in this process without a usable GPU.
MISALIGNED_CHILD = textwrap.dedent(r"""
    import json, sys
    import numpy, cupy
    import gpukernels as gk

    class CudaArray:
        def __init__(self, owner, shape, typestr, offset):
            self.owner = owner
            self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "strides": None,
                                             "data": (owner.data.ptr + offset, False), "version": 3}

    def misaligned(host, offset):
        # host's bytes on the GPU, `offset` bytes past the start of an aligned allocation
        raw = numpy.zeros(host.nbytes + offset, dtype=numpy.uint8)
        raw[offset:] = numpy.frombuffer(host.tobytes(), dtype=numpy.uint8)
        owner = cupy.asarray(raw)
        return cupy.asarray(CudaArray(owner, host.shape, host.dtype.str, offset))

    def report(case, outcome):
        print(json.dumps({"case": case, "outcome": outcome}), flush=True)

    def ladder(op):
        return gk.methods(op)

    op, rng = sys.argv[1], numpy.random.default_rng(int(sys.argv[2]))
    cases = []  # (label, host data, byte offset, function of (GPU data, host data, method))
    if op == "transpose":
        for dtype, offset in (("float32", 1), ("float32", 2), ("int16", 1), ("float64", 4),
                              ("complex64", 4), ("complex128", 4)):
            host = rng.standard_normal((37, 45)).astype(dtype)
            cases.append((f"{dtype}+{offset}", host, offset, lambda x, h, m: (
                gk.transpose(x, method=m), numpy.ascontiguousarray(h.T))))
        cases.append(("out float32+2", rng.standard_normal((37, 45)).astype("float32"), 0,
                      lambda x, h, m: (gk.transpose(x, method=m, out=misaligned(
                          numpy.zeros((45, 37), "float32"), 2)), numpy.ascontiguousarray(h.T))))
    elif op == "matmul":
        for dtype, offset in (("float32", 2), ("float64", 4)):
            a = rng.integers(-8, 9, (33, 17)).astype(dtype)
            b = rng.integers(-8, 9, (17, 9)).astype(dtype)
            cases.append((f"a {dtype}+{offset}", a, offset, lambda x, h, m, b=b: (
                gk.matmul(x, cupy.asarray(b), method=m), h @ b)))
            cases.append((f"b {dtype}+{offset}", b, offset, lambda x, h, m, a=a: (
                gk.matmul(cupy.asarray(a), x, method=m), a @ h)))
        a = rng.integers(-8, 9, (33, 17)).astype("float32")
        cases.append(("out float32+2", a, 0, lambda x, h, m: (gk.matmul(x, x.T, method=m, out=(
            misaligned(numpy.zeros((33, 33), "float32"), 2))), h @ h.T)))
    else:
        for dtype, offset in (("float32", 1), ("int64", 4), ("float16", 1), ("uint32", 2),
                              ("complex64", 4), ("complex128", 8)):
            values = [-1, 1] if op == "prod" else range(-8, 9)
            host = rng.choice(values, 10_007).astype(dtype)  # exact in every dtype and order
            cases.append((f"{dtype}+{offset}", host, offset, lambda x, h, m: (
                getattr(gk, op)(x, method=m), getattr(numpy, op)(h))))
    for method in ladder(op):
        for label, host, offset, run in cases:
            case = f"{op} {method} {label}"
            try:
                x = misaligned(host, offset) if offset else cupy.asarray(host)
                got, want = run(x, host, method)
                cupy.cuda.Device().synchronize()
                got = cupy.asnumpy(got)
            except (TypeError, ValueError) as exc:
                report(case, f"refused: {type(exc).__name__}: {exc}")
                continue
            except Exception as exc:  # a CUDA error: the context is unusable from here on
                report(case, f"crashed: {type(exc).__name__}: {exc}")
                sys.exit(3)
            ok = (got.dtype == want.dtype and got.shape == want.shape
                  and numpy.array_equal(got, want))
            report(case, "correct" if ok else
                   f"wrong: got {got.ravel()[:4]}, want {want.ravel()[:4]}")
    # The process is still healthy: a valid call on aligned data works.
    x = cupy.arange(12, dtype=cupy.float32).reshape(3, 4)
    assert cupy.asnumpy(gk.transpose(x)).tolist() == numpy.arange(12.0).reshape(3, 4).T.tolist()
    report("valid call afterwards", "correct")
""")


@pytest.mark.parametrize("op", ["transpose", "matmul", *ALL_REDUCTIONS])
def test_misaligned_data_never_crashes(op, rng):
    # Data whose address is not a multiple of its item size (a byte-offset view exported through
    # __cuda_array_interface__, as NumPy's unaligned arrays are), for every rung: the result must
    # be right or the call refused with TypeError or ValueError; no misaligned access may happen.
    if op not in ("transpose", "matmul"):
        reduction(op)
    seed = str(int(rng.integers(2**31)))
    child = subprocess.run([sys.executable, "-c", MISALIGNED_CHILD, op, seed],
                           capture_output=True, text=True, timeout=600, env=dict(os.environ))
    outcomes = {}
    for line in child.stdout.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            outcomes[record["case"]] = record["outcome"]
    assert outcomes, f"the child process reported nothing; stderr: {child.stderr[-3000:]}"
    bad = {case: outcome for case, outcome in outcomes.items()
           if not outcome.startswith(("correct", "refused"))}
    assert not bad, bad
    assert child.returncode == 0, f"exit status {child.returncode}; stderr: {child.stderr[-3000:]}"
    assert outcomes.get("valid call afterwards") == "correct", outcomes
