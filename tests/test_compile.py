"""CPU-side compile checks: every kernel family, every template instance, every architecture.

NVRTC (the ``nvidia-cuda-nvrtc`` wheel) compiles without a GPU, so these run everywhere and a
kernel that does not compile for some architecture fails here, not on a user's machine.
"""

from __future__ import annotations

import itertools
import re
import shutil
import sys
import warnings

import numpy
import pytest

import gpukernels as gk
import gpukernels.benchmark  # noqa: F401  (registers timing.cu, the benchmark's hold kernel)
from gpukernels import _compile, introspect

pytest.importorskip("cupy_backends.cuda.libs.nvrtc")

# The modules defining the public functions, wherever the package keeps them.
transpose_mod = sys.modules[gk.transpose.__module__]
matmul_mod = sys.modules[gk.matmul.__module__]
reduction_mod = sys.modules[gk.sum.__module__]

ARCHS = ("sm_75", "sm_80", "sm_90", "sm_120")
FAMILY_NAMES = ("transpose.cu", "matmul.cu", "matmul_wgmma.cu", "reduce.cu", "reduce_axis.cu",
                "timing.cu")
# Every family for every architecture, except those built for one architecture only (sm_90a).
FAMILY_ARCHS = [(name, arch) for name in FAMILY_NAMES
                for arch in ((_compile.FAMILIES[name].arch,) if _compile.FAMILIES[name].arch
                             else ARCHS)]

NUMERIC_DTYPES = [numpy.dtype(c) for c in "?bhilqBHILQefdFD"]
SUM_REQUESTS = [None, numpy.int32, numpy.int64, numpy.uint8, numpy.float16, numpy.float32,
                numpy.float64, numpy.complex64, numpy.complex128, numpy.bool_]


def test_families_are_the_kernel_sources():
    assert sorted(_compile.FAMILIES) == sorted(FAMILY_NAMES)
    for name, family in _compile.FAMILIES.items():
        assert family.filename == name
        assert family.instances, f"{name} registers no instances"
        assert len(set(family.instances)) == len(family.instances), f"{name}: duplicate instances"
        assert (_compile.kernel_dir() / name).is_file()


@pytest.fixture(scope="module")
def compiled():
    """Memoized compile_for_arch, so the instance tests below share the compiles."""
    cache = {}

    def get(filename, arch):
        if (filename, arch) not in cache:
            cache[(filename, arch)] = _compile.compile_for_arch(_compile.FAMILIES[filename], arch)
        return cache[(filename, arch)]

    return get


@pytest.mark.parametrize(("filename", "arch"), FAMILY_ARCHS)
def test_compile_for_arch(compiled, filename, arch):
    family = _compile.FAMILIES[filename]
    result = compiled(filename, arch)
    assert isinstance(result.cubin, bytes) and len(result.cubin) > 0
    assert result.cubin[:4] == b"\x7fELF", "NVRTC's CUBIN is an ELF image"
    assert set(result.lowered_names) == set(family.instances)
    for name, lowered in result.lowered_names.items():
        assert lowered, f"{name} has no lowered name"
        assert lowered.startswith("_Z"), f"{name} -> {lowered!r} is not a mangled C++ name"
    assert "warning" not in result.log.lower(), result.log
    assert "error" not in result.log.lower(), result.log


def _has_instance(instances, kernel, *template_args):
    """Whether some instance is ``kernel<template_args..., anything else>``."""
    pattern = re.compile(
        rf"^{re.escape(kernel)}<\s*" + r"\s*,\s*".join(map(re.escape, template_args)) + r"\s*[,>]"
    )
    return any(pattern.match(instance) for instance in instances)


TRANSPOSE_DTYPES = [numpy.dtype(c) for c in "?bhilqBHILQefdFD"]


@pytest.mark.parametrize("rung", gk.methods("transpose"))
def test_every_transpose_rung_and_dtype_has_an_instance(rung):
    instances = _compile.FAMILIES["transpose.cu"].instances
    for itemsize, carrier in transpose_mod.CARRIERS.items():
        assert _has_instance(instances, f"transpose_{rung}", carrier), (rung, carrier)
    # Every dtype transpose accepts has a carrier of its size.
    for dtype in TRANSPOSE_DTYPES:
        assert dtype.itemsize in transpose_mod.CARRIERS, dtype


@pytest.mark.parametrize("rung", gk.methods("matmul"))
def test_every_matmul_rung_and_dtype_has_an_instance(rung):
    # Every pair of input dtypes with a real result (float16 or float32 for the tensor cores)
    # runs on some compiled instance of every rung, with either index width and alignment.
    instances = set(matmul_mod.kernel_family(rung).instances)
    for a_dtype, b_dtype in itertools.product(NUMERIC_DTYPES, repeat=2):
        result = numpy.result_type(a_dtype, b_dtype)
        if result.kind == "c":
            continue
        if rung in matmul_mod.TENSOR_CORE_METHODS and result not in matmul_mod.TENSOR_CORE_C_TYPES:
            continue  # the tensor cores take float16, and float32 as TF32
        for K in (10, 2**32):
            compute = matmul_mod._compute_dtype(result, K, rung)
            for index, aligned in itertools.product(("int", "long long"), (False, True)):
                name = matmul_mod._kernel_name(rung, compute, index, aligned)
                assert name in instances, (a_dtype, b_dtype, name)


def _accepted_requests(operation):
    """(input dtype, dtype= request, result dtype) for every request the wrapper accepts."""
    requests = SUM_REQUESTS if operation in ("sum", "prod") else [None]
    for dtype, requested in itertools.product(NUMERIC_DTYPES, requests):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                result = reduction_mod.reduction_result_dtype(operation, dtype, requested)
            except TypeError:
                continue
        yield dtype, requested, result


@pytest.mark.parametrize("operation", sorted(reduction_mod.OPERATORS))
@pytest.mark.parametrize("rung", gk.methods("reduce"))
def test_every_reduction_rung_and_dtype_has_an_instance(rung, operation):
    instances = _compile.FAMILIES["reduce.cu"].instances
    ctypes = reduction_mod._C_TYPES
    op = reduction_mod.OPERATORS[operation]
    # Every (input dtype, dtype=) request the wrapper accepts plans onto compiled instances,
    # for the first pass and for the pass over the partials.
    planned = 0
    for dtype, requested, result in _accepted_requests(operation):
        read, acc = reduction_mod._plan(op, rung, dtype, result)
        assert _has_instance(instances, f"reduce_{rung}", op, ctypes[read], ctypes[acc]), \
            (dtype, requested, read, acc)
        assert _has_instance(instances, f"reduce_{rung}", op, ctypes[acc], ctypes[acc]), \
            (dtype, requested, acc)
        planned += 1
    assert planned >= 12  # every real dtype at least


@pytest.mark.parametrize("operation", sorted(reduction_mod.OPERATORS))
def test_every_axis_reduction_plan_has_instances(operation):
    instances = set(_compile.FAMILIES["reduce_axis.cu"].instances)
    op = reduction_mod.OPERATORS[operation]
    planned = 0
    for dtype, requested, result in _accepted_requests(operation):
        read, acc = reduction_mod._plan(op, "one_pass", dtype, result)
        outputs = reduction_mod._outputs(op, read, acc)
        writes = result if result in outputs else acc
        # First pass, intermediate passes over accumulators, and the fold of split partials.
        for source, out in ((read, writes), (read, acc), (acc, acc), (acc, writes)):
            for kind in reduction_mod.AXIS_KINDS:
                name = reduction_mod._axis_kernel_name(kind, op, source, acc, out)
                assert name in instances, (dtype, requested, name)
        planned += 1
    assert planned >= 12


def test_instances_name_only_registered_rungs():
    """No instance of a rung the ladder does not list (names are the reader's map)."""
    for filename, op, prefix in (("transpose.cu", "transpose", "transpose_"),
                                 ("matmul.cu", "matmul", "matmul_"),
                                 ("matmul_wgmma.cu", "matmul", "matmul_"),
                                 ("reduce.cu", "sum", "reduce_")):
        for instance in _compile.FAMILIES[filename].instances:
            if not instance.startswith(prefix):
                continue  # e.g. transpose.cu's copy ceilings
            rung = introspect._rung_named(instance[len(prefix):instance.index("<")],
                                          gk.methods(op))
            assert rung in gk.methods(op), instance


def test_single_arch_family_runs_only_there():
    wgmma = _compile.FAMILIES["matmul_wgmma.cu"]
    assert wgmma.arch == "sm_90a" and wgmma.arch_options() == ("-arch=sm_90a",)
    assert wgmma.runs_on(90) and not any(wgmma.runs_on(cc) for cc in (75, 80, 89, 100, 120))
    portable = _compile.FAMILIES["matmul.cu"]
    assert portable.arch is None and portable.arch_options() == ()
    assert all(portable.runs_on(cc) for cc in (75, 80, 90, 120))


# --- the loader: header inlining and error reporting -------------------------------------------

def test_inline_inserts_headers_with_line_markers():
    _compile.load_source.cache_clear()
    try:
        for filename in FAMILY_NAMES:
            source = _compile.load_source(filename)
            assert source.startswith(f'#line 1 "{filename}"')
            assert '#include "common.cuh"' not in source
            assert '#line 1 "common.cuh"' in source
            assert "struct gk_half" in source  # common.cuh's text is inlined
            assert '#include "' not in source  # nested headers (reduce_common.cuh) too
            raw = (_compile.kernel_dir() / filename).read_text().splitlines()
            include_line = next(n for n, line in enumerate(raw, start=1)
                                if line.startswith('#include "'))
            assert f'#line {include_line + 1} "{filename}"' in source
    finally:
        _compile.load_source.cache_clear()


def test_inline_rejects_self_inclusion(tmp_path):
    (tmp_path / "loop.cuh").write_text('#pragma once\n#include "loop.cuh"\n')
    (tmp_path / "main.cu").write_text('#include "loop.cuh"\n')
    with pytest.raises(gk.KernelCompileError, match="loop.cuh"):
        _compile._inline(tmp_path / "main.cu")


def test_lineinfo_option(monkeypatch):
    monkeypatch.delenv("GPUKERNELS_LINEINFO", raising=False)
    assert "-lineinfo" not in _compile.compile_options()
    monkeypatch.setenv("GPUKERNELS_LINEINFO", "1")
    assert "-lineinfo" in _compile.compile_options()


BROKEN = """\
// broken.cu - a kernel with a deliberate error on line 5
#include "common.cuh"

__global__ void broken_kernel(i64* out) {
    out[0] = this_name_is_not_declared;
}
"""


@pytest.fixture
def broken_kernel_dir(tmp_path, monkeypatch):
    shutil.copy(_compile.kernel_dir() / "common.cuh", tmp_path / "common.cuh")
    (tmp_path / "broken.cu").write_text(BROKEN)
    _compile.load_source.cache_clear()
    monkeypatch.setattr(_compile, "kernel_dir", lambda: tmp_path)
    yield tmp_path
    _compile.load_source.cache_clear()


def test_broken_source_raises_kernel_compile_error(broken_kernel_dir):
    family = _compile.KernelFamily("broken.cu", ["broken_kernel"])
    with pytest.raises(gk.KernelCompileError) as info:
        _compile.compile_for_arch(family, "sm_80")
    message = str(info.value)
    assert "broken.cu" in message
    assert "sm_80" in message
    assert "this_name_is_not_declared" in message  # NVRTC's log is in the message
    # The #line markers make the log point at the original file and line, past the header.
    assert "broken.cu(5)" in message, message
    assert "broken.cu" not in _compile.FAMILIES


def test_error_in_header_names_the_header(broken_kernel_dir):
    common = (broken_kernel_dir / "common.cuh").read_text().splitlines()
    common.append("this is not C++;")
    (broken_kernel_dir / "common.cuh").write_text("\n".join(common) + "\n")
    (broken_kernel_dir / "ok.cu").write_text(
        '#include "common.cuh"\n__global__ void ok_kernel(i64* out) { out[0] = 1; }\n'
    )
    family = _compile.KernelFamily("ok.cu", ["ok_kernel"])
    with pytest.raises(gk.KernelCompileError) as info:
        _compile.compile_for_arch(family, "sm_80")
    assert f"common.cuh({len(common)})" in str(info.value), str(info.value)


def test_compile_error_leaves_families_usable(broken_kernel_dir):
    family = _compile.KernelFamily("broken.cu", ["broken_kernel"])
    with pytest.raises(gk.KernelCompileError):
        _compile.compile_for_arch(family, "sm_80")
    _compile.load_source.cache_clear()
    # The fixture's kernel_dir still points at tmp_path, which has no transpose.cu.
    with pytest.raises(FileNotFoundError):
        _compile.load_source("transpose.cu")
