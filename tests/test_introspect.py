"""Introspection: summaries and CUDA source of every rung, the launch recorder, dry runs (GPU)."""

from __future__ import annotations

import threading
import numpy
import pytest

import gpukernels as gk
from gpukernels import _common, _compile, introspect
from gpukernels.introspect import describe, ladder_methods, operations, rung_source

GPU = gk.gpu_available()
STEMS = {"transpose": "transpose", "matmul": "matmul", **{r: "reduce" for r in introspect.REDUCTIONS}}
EVERY_RUNG = [(op, m) for op in operations() for m in ladder_methods(op)]


# --- summaries and source, no GPU needed ------------------------------------------------------------

def test_operations():
    ops = operations()
    assert ops[:3] == ("transpose", "matmul", "sum")
    assert all(callable(getattr(gk, op)) for op in ops)
    assert introspect.operation_function("reduce") is gk.sum
    assert ladder_methods("reduce") == ladder_methods("sum")


@pytest.mark.parametrize("operation, method", EVERY_RUNG, ids=[f"{o}-{m}" for o, m in EVERY_RUNG])
def test_every_rung_has_summary_and_source(operation, method):
    info = describe(operation, method)
    rung = next(r for r in introspect._rungs(operation) if r.name == method)
    assert info.summary == rung.summary and info.summary
    assert info.kernel_function == f"{STEMS[operation]}_{method}"
    # The Hopper rung has a source of its own (it is compiled for sm_90a only).
    kernel_file = "matmul_wgmma.cu" if method == "wgmma" else f"{STEMS[operation]}.cu"
    assert info.kernel_file == kernel_file
    assert f"{info.kernel_function}(" in info.source and "__global__" in info.source
    assert info.source.startswith("//") and info.source.rstrip().endswith("}")
    assert info.source.count("{") == info.source.count("}")
    assert info.comment.startswith("Rung ") and method in info.comment.splitlines()[0]
    assert not any(line.startswith("//") for line in info.comment.splitlines())
    assert info.title().startswith(f"{operation} / {method}: rung {info.level} of")
    assert info.ladder == ladder_methods(operation)
    assert info.below == (None if info.level == 1 else info.ladder[info.level - 2])
    text, page = repr(info), info._repr_html_()
    assert info.summary in text and "__global__" not in text and "__global__" in str(info)
    assert "<details>" in page and info.kernel_function in page
    if not GPU:
        assert info.instances == () and "no GPU" in info.note


@pytest.mark.parametrize("operation", ["transpose", "matmul", "sum"])
def test_ladder(operation):
    ladder = describe(operation)
    assert [r.method for r in ladder] == list(ladder_methods(operation))
    assert len(ladder) == len(ladder_methods(operation))
    assert ladder[ladder_methods(operation)[0]] is ladder[0]
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
    comment, source = rung_source("synthetic.cu", "synthetic_plain")
    assert comment.startswith("Rung 1 - plain: braces in a comment")
    assert source.splitlines()[0].startswith("// ----")
    assert "typename Index>" in source and source.endswith("out[0] = T(text[0]); }\n}")
    comment, source = rung_source("synthetic.cu", "synthetic_helped")
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

    name = "fake_kernel"
    max_threads_per_block = 256

    def __init__(self) -> None:
        self.calls = []

    def __call__(self, grid, block, args):
        self.calls.append((grid, block, args))


FAKE = FakeKernel()  # module-level: launch() caches limits by id(kernel), so keep it alive


def test_record_launches_dry_run():
    FAKE.calls.clear()
    with _common.record_launches(dry_run=True) as records:
        _common.launch(FAKE, (4, 2, 1), (128, 2, 1), ("a",))
    assert FAKE.calls == []
    assert records == [_common.LaunchRecord(FAKE, (4, 2, 1), (128, 2, 1), 0)]
    with _common.record_launches() as records:
        _common.launch(FAKE, (1, 1, 1), (32, 1, 1), ("b",))
    assert FAKE.calls == [((1, 1, 1), (32, 1, 1), ("b",))] and len(records) == 1
    _common.launch(FAKE, (1, 1, 1), (32, 1, 1), ("c",))  # outside: launches, records nothing
    assert len(FAKE.calls) == 2 and len(records) == 1


def test_record_launches_keeps_the_checks():
    with _common.record_launches(dry_run=True) as records:
        with pytest.raises(ValueError, match="exceeds this kernel's limit"):
            _common.launch(FAKE, (1, 1, 1), (512, 1, 1), ())
        with pytest.raises(ValueError, match="outside CUDA's limits"):
            _common.launch(FAKE, (1, 70000, 1), (32, 1, 1), ())
    assert records == []


def test_record_launches_nests_and_stays_in_its_thread():
    FAKE.calls.clear()
    seen_by_thread = []
    with _common.record_launches(dry_run=True) as outer:
        with _common.record_launches() as inner:
            _common.launch(FAKE, (1, 1, 1), (32, 1, 1), ("inner",))
        _common.launch(FAKE, (2, 1, 1), (32, 1, 1), ("outer",))

        def other_thread():
            _common.launch(FAKE, (3, 1, 1), (32, 1, 1), ("thread",))
            seen_by_thread.append(getattr(_common._recorder, "state", None))

        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
    assert [r.grid for r in inner] == [(1, 1, 1)]
    assert [r.grid for r in outer] == [(2, 1, 1)]
    assert [c[2] for c in FAKE.calls] == [("inner",), ("thread",)]
    assert seen_by_thread == [None]
    assert getattr(_common._recorder, "state", None) is None


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
    assert info.method in ladder_methods("transpose") and "picks" in info.note
    a, b = cupy.ones((64, 32), cupy.float16), cupy.ones((32, 16), cupy.float16)
    matmul = describe("matmul", ladder_methods("matmul")[-1], a, b)
    assert matmul.input == "64x32 float16 @ 32x16 float16"


@pytest.mark.gpu
def test_describe_launches_nothing():
    import cupy

    from gpukernels.validation import poisoned

    x = cupy.arange(64 * 32, dtype=cupy.int32).reshape(64, 32)
    for method in ladder_methods("transpose"):
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
