"""Introspection: summaries and CUDA source of every rung, the launch recorder, dry runs (GPU)."""

from __future__ import annotations

import threading

import numpy
import pytest

import gpukernels as gk
from gpukernels._core import compile as _compile
from gpukernels._core import launch as _launch
from gpukernels._core.ladder import OPERATIONS
from gpukernels.introspect import describe, rung_source

GPU = gk.gpu_available()
EVERY_RUNG = [(op, m) for op in OPERATIONS for m in gk.methods(op)]


# --- summaries and source, no GPU needed ------------------------------------------------------------

def test_operations():
    assert tuple(OPERATIONS)[:4] == ("transpose", "permute_dims", "matmul", "sum")
    assert all(getattr(gk, name) is op.function for name, op in OPERATIONS.items())
    assert describe("reduce").operation == "sum"  # a ladder's name describes its first operation
    assert gk.methods("reduce") == gk.methods("sum")


@pytest.mark.parametrize("operation, method", EVERY_RUNG, ids=[f"{o}-{m}" for o, m in EVERY_RUNG])
def test_every_rung_has_summary_and_source(operation, method):
    info = describe(operation, method)
    rung = OPERATIONS[operation].ladder[method]
    assert info.summary == rung.summary and info.summary
    assert info.kernel_function == rung.kernel and rung.kernel.endswith(method)
    assert info.kernel_file == rung.source.path
    assert info.needs == str(rung.needs) and info.needs in repr(info)
    assert f"{info.kernel_function}(" in info.source and "__global__" in info.source
    assert info.source.startswith("//") and info.source.rstrip().endswith("}")
    assert info.source.count("{") == info.source.count("}")
    assert info.comment.startswith("Rung ") and method in info.comment.splitlines()[0]
    assert not any(line.startswith("//") for line in info.comment.splitlines())
    assert info.title().startswith(f"{operation} / {method}: rung {info.level} of")
    assert info.ladder == gk.methods(operation)
    assert info.below == (None if info.level == 1 else info.ladder[info.level - 2])
    text, page = repr(info), info._repr_html_()
    assert info.summary in text and "__global__" not in text and "__global__" in str(info)
    assert "<details>" in page and info.kernel_function in page
    if not GPU:
        assert info.instances == () and "no GPU" in info.note


@pytest.mark.parametrize("operation", ["transpose", "matmul", "sum"])
def test_ladder(operation):
    ladder = describe(operation)
    assert [r.method for r in ladder] == list(gk.methods(operation))
    assert len(ladder) == len(gk.methods(operation))
    assert ladder[gk.methods(operation)[0]] is ladder[0]
    text = repr(ladder)
    assert all(f"{i + 1}. {r.method}: {r.summary}" in text for i, r in enumerate(ladder))
    assert ladder._repr_html_().count("<tr>") == len(ladder) + 1
    with pytest.raises(KeyError):
        ladder["bogus"]


def test_describe_errors():
    with pytest.raises(ValueError, match="unknown operation"):
        describe("fft")
    with pytest.raises(ValueError, match="choose 'auto' or one of"):
        describe("transpose", "bogus")
    with pytest.raises(ValueError, match="pass an array"):
        describe("transpose", "auto")
    with pytest.raises(ValueError, match="not both"):
        describe("transpose", "naive", object(), shape=(4, 4))
    with pytest.raises(ValueError, match="dtype= goes with shape="):
        describe("transpose", "naive", dtype="float32")


@pytest.mark.skipif(GPU, reason="checks the message without a GPU")
def test_describe_input_without_gpu():
    with pytest.raises(gk.NoGPUError, match="without an input gives the summary"):
        describe("transpose", "naive", shape=(64, 64))


SYNTHETIC = '''// synthetic.cu - kernels written to trip a naive extractor.
#include "common.cuh"

// ---------------------------------------------------------------------------------------------
// Rung 1 - plain: braces in a comment { and a string "}" must not end the body.
// ---------------------------------------------------------------------------------------------
template <typename T,
          typename Index>
__global__ void synthetic_plain(T* out, Index n) {
    const char* text = "}}}";  // }
    /* { */ if (n > 0) { out[0] = T(text[0]); }
}

// ---------------------------------------------------------------------------------------------
// Rung 2 - helped: the header sits above helpers the kernel uses.
// ---------------------------------------------------------------------------------------------
template <int N> struct helper { static const int value = N; };

// The helper's own comment.
template <typename T>
__global__ void __launch_bounds__(helper<128>::value)
synthetic_helped(T* out) {
    out[threadIdx.x] = T(helper<1>::value);
}

// A kernel without a rung header.
__global__ void synthetic_bare(int* out) { out[0] = 1; }
'''


def test_rung_source_extraction(tmp_path, monkeypatch):
    (tmp_path / "synthetic.cu").write_text(SYNTHETIC)
    monkeypatch.setattr(_compile, "kernel_dir", lambda: tmp_path)
    comment, source = rung_source("synthetic.cu", "synthetic_plain", "plain")
    assert comment.startswith("Rung 1 - plain: braces in a comment")
    assert source.splitlines()[0].startswith("// ----")
    assert "typename Index>" in source and source.endswith("out[0] = T(text[0]); }\n}")
    comment, source = rung_source("synthetic.cu", "synthetic_helped", "helped")
    assert comment == "Rung 2 - helped: the header sits above helpers the kernel uses."
    assert "struct helper" in source and source.rstrip().endswith("}")
    assert "synthetic_plain" not in source
    comment, source = rung_source("synthetic.cu", "synthetic_bare")
    assert comment == "A kernel without a rung header."
    assert source == "// A kernel without a rung header.\n" \
        "__global__ void synthetic_bare(int* out) { out[0] = 1; }"
    with pytest.raises(LookupError, match="synthetic_missing"):
        rung_source("synthetic.cu", "synthetic_missing")


# --- the launch recorder -------------------------------------------------------------------------------

class FakeKernel:
    """Stands in for a cupy.RawKernel: counts launches."""

    max_threads_per_block = 256

    def __init__(self) -> None:
        self.calls = []

    def __call__(self, grid, block, args, shared_mem=0):
        self.calls.append((grid, block, args))


class FakeSource:
    """Stands in for a KernelSource: one fake kernel for every instance."""

    path = "fake.cu"

    def __init__(self) -> None:
        self.kernel = FakeKernel()

    def function(self, instance):
        return self.kernel


def _call(source, grid, block, label):
    return _launch.KernelCall(source, "fake<int>", grid, block, (_launch.Array(0), numpy.int32(1)),
                              rung=label)


def test_record_launches_dry_run():
    source = FakeSource()
    call = _call(source, (4, 2, 1), (128, 2, 1), "fake")
    with _launch.record_launches(dry_run=True) as records:
        call("a")
    assert source.kernel.calls == []
    assert records == [_launch.LaunchRecord(source.kernel, (4, 2, 1), (128, 2, 1), 0, "fake.cu",
                                            "fake<int>", "fake")]
    with _launch.record_launches() as records:
        call("b")
    assert source.kernel.calls == [((4, 2, 1), (128, 2, 1), ("b", numpy.int32(1)))]
    assert len(records) == 1
    call("c")  # outside: launches, records nothing
    assert len(source.kernel.calls) == 2 and len(records) == 1


def test_kernel_calls_check_the_limits_when_planned():
    source = FakeSource()
    with pytest.raises(ValueError, match="exceeds this kernel's limit"):
        _call(source, (1, 1, 1), (512, 1, 1), "fake")
    with pytest.raises(ValueError, match="outside CUDA's limits"):
        _call(source, (1, 70000, 1), (32, 1, 1), "fake")
    with pytest.raises(TypeError, match="NumPy scalar"):
        _launch.KernelCall(source, "fake<int>", (1, 1, 1), (32, 1, 1), (_launch.Array(0), 5))
    assert source.kernel.calls == []


def test_record_launches_nests_and_stays_in_its_thread():
    source = FakeSource()
    seen_by_thread = []
    with _launch.record_launches(dry_run=True) as outer:
        with _launch.record_launches() as inner:
            _call(source, (1, 1, 1), (32, 1, 1), "inner")("inner")
        _call(source, (2, 1, 1), (32, 1, 1), "outer")("outer")

        def other_thread():
            _call(source, (3, 1, 1), (32, 1, 1), "thread")("thread")
            seen_by_thread.append(getattr(_launch._recorder, "state", None))

        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
    assert [r.grid for r in inner] == [(1, 1, 1)]
    assert [r.grid for r in outer] == [(2, 1, 1)]
    assert [c[2][0] for c in source.kernel.calls] == ["inner", "thread"]
    assert seen_by_thread == [None]
    assert getattr(_launch._recorder, "state", None) is None


def test_launches_record_again_after_a_block_left_by_an_error():
    # Launches skip the recorder while no block is open in any thread; one left by an
    # exception must still close, and a later block record as before.
    source = FakeSource()
    with pytest.raises(RuntimeError):
        with _launch.record_launches(dry_run=True):
            assert _launch.dry_run()
            raise RuntimeError("inside")
    assert not _launch.dry_run()
    _call(source, (1, 1, 1), (32, 1, 1), "after")("after")  # launched, recorded nowhere
    with _launch.record_launches(dry_run=True) as records:
        _call(source, (2, 1, 1), (32, 1, 1), "recorded")("recorded")
    assert [r.grid for r in records] == [(2, 1, 1)]
    assert [c[2][0] for c in source.kernel.calls] == ["after"]


# --- on the GPU: resources and launch configurations ---------------------------------------------------

@pytest.mark.gpu
def test_describe_transpose_launch():
    info = describe("transpose", "shared", shape=(8192, 8192), dtype="float32")
    (launch,) = info.launches
    assert launch.instance.startswith("transpose_shared<unsigned int, int,")
    assert launch.threads_per_block <= launch.resources.max_threads_per_block
    assert launch.resources.registers > 0
    assert launch.resources.static_shared_bytes >= 32 * 33 * 4
    assert launch.resources.local_bytes == 0
    assert launch.blocks * launch.threads_per_block >= 8192 * 8192 // 4 // 8
    assert info.input == "8192x8192 float32"
    assert str(launch).startswith(launch.instance) and "registers/thread" in str(launch)
    assert "<table>" in info._repr_html_()
    assert any(r.instance == launch.instance for r in info.instances)


@pytest.mark.gpu
def test_describe_index_width_follows_the_input():
    small = describe("transpose", "naive", shape=(64, 64), dtype="float64").launches[0]
    assert small.instance == "transpose_naive<unsigned long long, int>"


@pytest.mark.gpu
def test_describe_two_pass_reduction_and_ladders():
    info = describe("sum", "two_pass", shape=(2**24,), dtype="int32")
    assert len(info.launches) == 2
    assert info.launches[1].grid == (1, 1, 1)
    for operation, shape in (("transpose", (3, 100, 200)), ("matmul", (100, 50, 70)),
                             ("sum", (1000,))):
        ladder = describe(operation, shape=shape)
        for rung in ladder:
            assert rung.launches or rung.note.startswith("not supported"), rung
        assert "kernel instance" in ladder._repr_html_()


@pytest.mark.gpu
def test_describe_auto_and_arrays():
    import cupy

    x = cupy.ones((256, 512), dtype=cupy.float32)
    info = describe("transpose", "auto", x)
    assert info.method in gk.methods("transpose") and "picks" in info.note
    a, b = cupy.ones((64, 32), cupy.float16), cupy.ones((32, 16), cupy.float16)
    matmul = describe("matmul", gk.methods("matmul")[-1], a, b)
    assert matmul.input == "64x32 float16 @ 32x16 float16"


@pytest.mark.gpu
def test_describe_launches_nothing():
    import cupy

    from gpukernels.validation import poisoned

    x = cupy.arange(64 * 32, dtype=cupy.int32).reshape(64, 32)
    for method in gk.methods("transpose"):
        if not OPERATIONS["transpose"].supports(method, x):
            continue  # the word rungs move 1- and 2-byte elements
        out = poisoned((32, 64), numpy.int32)
        info = describe("transpose", method, x, out=out)
        assert info.launches
        assert bool((out == -1).all()), method  # no kernel wrote it
    assert "out=" in info.input


@pytest.mark.gpu
def test_describe_without_input_lists_instances():
    info = describe("matmul", "tiled")
    assert info.instances and all(r.instance.startswith("matmul_tiled<") for r in info.instances)
    assert all(r.registers > 0 and r.binary_version >= 50 for r in info.instances)
    assert "compiled instances" in repr(info)


def _battery():
    """Inputs of the test batteries that reach every kernel: every transpose kernel (odd 1- and
    2-byte rows included), SIMT and tensor-core products, full and axis reductions."""
    import cupy

    yield "transpose", (cupy.ones((1023, 1025), numpy.int8),), {}
    yield "transpose", (cupy.ones((1023, 1025), numpy.float16),), {}
    yield "transpose", (cupy.ones((3, 64, 96), numpy.float32),), {}
    yield "transpose", (cupy.ones((100, 200), numpy.complex128)[:, ::2],), {}
    yield "matmul", (cupy.ones((100, 50), numpy.float32), cupy.ones((50, 70), numpy.float32)), {}
    yield "matmul", (cupy.ones((100, 64), numpy.float16), cupy.ones((64, 72), numpy.float16)), {}
    yield "sum", (cupy.ones(10**6 + 3, numpy.float32),), {}
    yield "max", (cupy.ones((512, 300), numpy.int32),), {"axis": 0}
    yield "prod", (cupy.ones((64, 5, 7), numpy.float64),), {"axis": (0, 2)}


@pytest.mark.gpu
def test_describe_shows_the_kernels_that_launch():
    # For every rung (and auto) on each input: the launches describe reports are the ones a real
    # call makes, and the source it shows is the launched kernel's whenever a rung launched.
    for name, inputs, kwargs in _battery():
        op = OPERATIONS[name]
        for method in gk.methods(name) + ("auto",):
            if method != "auto" and not op.supports(method, *inputs, **kwargs):
                continue
            info = describe(name, method, *inputs, **kwargs)
            with _launch.record_launches() as records:
                op.function(*inputs, method=method, **kwargs)
            assert [r.instance for r in records] == [launch.instance for launch in info.launches], \
                (name, method)
            rungs = {r.rung for r in records}
            if rungs <= set(op.ladder.names):
                (rung,) = rungs
                assert info.method == rung and info.kernel_function == op.ladder[rung].kernel
                # The rung's kernel launches; a second launch of the rung (split_k's sum) is a
                # kernel named after it.
                assert any(r.instance.startswith(info.kernel_function + "<") for r in records)
                assert all(r.instance.startswith(info.kernel_function) for r in records)
            else:  # the axis kernels: not a rung, and the note says which kernels run
                assert "for this input the wrapper launches" in info.note, info.note
