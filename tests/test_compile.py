"""CPU-side compile checks: every kernel source, every template instance, every architecture; and
every instance a plan can name is compiled, and every compiled instance is one a plan names.

NVRTC (the ``nvidia-cuda-nvrtc`` wheel) compiles without a GPU, so these run everywhere and a
kernel that does not compile for some architecture fails here, not on a user's machine. A
compile that passed is remembered under ``GPUKERNELS_COMPILE_CACHE`` (default
``~/.cache/gpukernels/compile-tests``) by the hash of everything NVRTC was given (the
preprocessed source, the instances, the options, the architecture and NVRTC's version): a
changed source or option compiles again.

By default NVRTC compiles here with the import's options plus ``--Ofast-compile=max``: the
same front end, template instances, inline PTX and ptxas checks down to a cubin for every
architecture, with less optimisation, in about a quarter of the time (NOTES 99).
``GPUKERNELS_COMPILE_TESTS=full`` compiles with exactly the import's options (``.ci/run``
runs both).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import re
import shutil
from pathlib import Path

import numpy
import pytest

import gpukernels as gk
import gpukernels.benchmark
from gpukernels._core import compile as _compile
from gpukernels._core import floats
from gpukernels._core.ladder import OPERATIONS, ladders
from gpukernels.ops.matmul import rungs as matmul_rungs
from gpukernels.ops.permute import rungs as permute_rungs
from gpukernels.ops.reduce import axis as reduce_axis
from gpukernels.ops.reduce import dtypes as reduce_dtypes
from gpukernels.ops.reduce import rungs as reduce_rungs
from gpukernels.ops.reduce.program import Program
from gpukernels.ops.transpose import rungs as transpose_rungs

nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc")

ARCHS = ("sm_75", "sm_80", "sm_90", "sm_120")
SOURCE_NAMES = ("transpose/transpose.cu", "transpose/words.cu", "permute/permute.cu",
                "matmul/simt.cu", "matmul/mma.cu",
                "matmul/wgmma.cu", "reduce/reduce.cu", "reduce/axis.cu", "moments/moments.cu",
                "scan/scan.cu", "timing.cu")
# Every source for every architecture, except those built for one architecture only (sm_90a).
SOURCE_ARCHS = [(name, arch) for name in SOURCE_NAMES
                for arch in ((_compile.SOURCES[name].arch,) if _compile.SOURCES[name].arch
                             else ARCHS)]
NUMERIC_DTYPES = [numpy.dtype(c) for c in "?bhilqBHILQefdFD"]


def test_sources_are_the_kernel_files():
    assert sorted(_compile.SOURCES) == sorted(SOURCE_NAMES)
    for path, source in _compile.SOURCES.items():
        assert source.path == path
        assert source.instances, f"{path} has no instances"
        assert len(set(source.instances)) == len(source.instances), f"{path}: duplicates"
        assert (_compile.kernel_dir() / path).is_file()
        assert all(group.instances for group in source.groups), f"{path}: an empty group"


def test_every_rung_names_its_source_and_groups():
    for op in OPERATIONS.values():
        for rung in op.ladder:
            assert rung.source.path in _compile.SOURCES, rung
            assert rung.instances, rung
            assert all(i in rung.source.instances for i in rung.instances), rung
            assert all(i.startswith(rung.kernel + "<") for i in rung.instances), rung
            assert rung.kernel.endswith(rung.name), rung  # names are the reader's map


def _cache_dir() -> Path:
    return Path(os.environ.get("GPUKERNELS_COMPILE_CACHE",
                               Path.home() / ".cache" / "gpukernels" / "compile-tests"))


def _test_options() -> tuple[str, ...]:
    """What the compile tests add to the import's options: ``--Ofast-compile=max`` (NVRTC 12.8
    and newer) unless ``GPUKERNELS_COMPILE_TESTS=full``."""
    mode = os.environ.get("GPUKERNELS_COMPILE_TESTS", "fast")
    if mode not in ("fast", "full"):
        raise ValueError(f"GPUKERNELS_COMPILE_TESTS is 'fast' or 'full', not {mode!r}")
    fast = mode == "fast" and tuple(nvrtc.getVersion()) >= (12, 8)
    return ("--Ofast-compile=max",) if fast else ()


def _compile_key(source: _compile.KernelSource, arch: str) -> str:
    text = json.dumps([_compile.load_source(source.path), list(source.instances),
                       list(_compile.compile_options() + _test_options()), arch,
                       list(nvrtc.getVersion())])
    return hashlib.sha256(text.encode()).hexdigest()


def test_compile_test_options_follow_the_environment(monkeypatch):
    fast = ("--Ofast-compile=max",) if tuple(nvrtc.getVersion()) >= (12, 8) else ()
    monkeypatch.delenv("GPUKERNELS_COMPILE_TESTS", raising=False)
    assert _test_options() == fast
    default_key = _compile_key(_compile.SOURCES["timing.cu"], "sm_90")
    monkeypatch.setenv("GPUKERNELS_COMPILE_TESTS", "full")
    assert _test_options() == ()
    # a cached fast compile never stands in for a full one
    assert (_compile_key(_compile.SOURCES["timing.cu"], "sm_90") != default_key) == bool(fast)
    monkeypatch.setenv("GPUKERNELS_COMPILE_TESTS", "fastest")
    with pytest.raises(ValueError, match="'fast' or 'full'"):
        _test_options()


@pytest.mark.compile
@pytest.mark.parametrize(("path", "arch"), SOURCE_ARCHS, ids=[f"{p}-{a}" for p, a in SOURCE_ARCHS])
def test_compile_for_arch(path, arch):
    source = _compile.SOURCES[path]
    done = _cache_dir() / f"{_compile_key(source, arch)}.json"
    if done.is_file():  # this exact compile passed before: same source, instances and options
        return
    result = _compile.compile_for_arch(source, arch, options=_test_options())
    assert isinstance(result.cubin, bytes) and len(result.cubin) > 0
    assert result.cubin[:4] == b"\x7fELF", "NVRTC's CUBIN is an ELF image"
    assert set(result.lowered_names) == set(source.instances)
    for name, lowered in result.lowered_names.items():
        assert lowered, f"{name} has no lowered name"
        assert lowered.startswith("_Z"), f"{name} -> {lowered!r} is not a mangled C++ name"
    assert "warning" not in result.log.lower(), result.log
    assert "error" not in result.log.lower(), result.log
    # ptxas's performance notes (e.g. C7513: wgmma products serialized because a register they
    # read is written while they may be in flight), with the import's own options only:
    # --Ofast-compile leaves calls uninlined, and ptxas then notes losses the import's build
    # does not have.
    if not _test_options():
        assert "performance loss" not in result.log.lower(), result.log
    try:
        done.parent.mkdir(parents=True, exist_ok=True)
        done.write_text(json.dumps({"path": path, "arch": arch}))
    except OSError:  # a read-only home: the check ran, it just is not remembered
        pass


# --- every instance a plan can launch is compiled, and nothing else ----------------------------------

def _transpose_problems():
    """Problems covering every branch of the transpose plans: item sizes, aligned and odd
    shapes, strided columns, unaligned addresses, both index types, every capability."""
    shapes = [(64, 64), (8192, 8192), (8191, 8193), (33, 65), (4096, 4100), (48, 96), (1, 1),
              (4, 4096), (4096, 4), (255, 4097), (1, 4096), (2, 4096), (3, 4096), (4096, 3),
              (5, 4096), (4096, 6), (7, 4096), (8, 4096)]
    for itemsize, index, capability in itertools.product(transpose_rungs.CARRIERS, ("int", "long long"),
                                                         (75, 80, 90)):
        for (rows, cols), col_stride, in_address, out_address in itertools.product(
                shapes, (1, 2), (0, 1, 4, 16), (0, 4, 8, 16, 32)):
            if in_address % min(itemsize, 8) or out_address % min(itemsize, 8):
                continue
            for out_strides in ((rows * cols, rows), (rows, rows * cols), (rows + 1, rows + 2)):
                yield transpose_rungs.Problem(
                    itemsize, 1, rows, cols, (rows * cols * col_stride, cols * col_stride,
                                              col_stride),
                    out_strides, in_address, out_address, capability, index)


def _transpose_instances(rung) -> set:
    names = set()
    for problem in _transpose_problems():
        try:
            names.add(rung.plan(problem).instance)
        except (TypeError, ValueError):  # the rung does not take this input
            pass
    return names


@pytest.mark.parametrize("rung", gk.methods("transpose"))
def test_transpose_plans_launch_exactly_the_compiled_instances(rung):
    rung = OPERATIONS["transpose"].ladder[rung]
    assert _transpose_instances(rung) == set(rung.instances)


def _contiguous_problem(itemsize, rows, cols, capability=90):
    """A C-contiguous rows x cols matrix into a C-contiguous result, at aligned addresses."""
    return transpose_rungs.Problem(itemsize, 1, rows, cols, (rows * cols, cols, 1),
                                   (rows * cols, rows), 0, 0, capability, "int")


def test_transpose_auto_picks_every_kernel_it_should():
    picked = {transpose_rungs.choose(p).name for p in _transpose_problems()}
    assert picked == {"vector", "words", "words_async", "narrow", "runs"}
    # words_async needs cp.async (sm_80); below that the 1-byte odd rows go to words.
    odd = _contiguous_problem(1, 8191, 8193, capability=75)
    assert transpose_rungs.choose(odd).name == "words"
    assert transpose_rungs.choose(odd.__class__(**{**odd.__dict__, "capability": 80})).name \
        == "words_async"


@pytest.mark.parametrize(("itemsize", "cols", "rung"), [
    (1, 96, "words"), (1, 160, "words"), (1, 192, "words"), (2, 48, "words"), (2, 96, "words"),
    (2, 160, "words"), (2, 192, "words"), (2, 240, "words"),
    # Rows of a power of two bytes, or past 480: vector; 4-byte items: vector.
    (1, 128, "vector"), (1, 256, "vector"), (2, 32, "vector"), (2, 64, "vector"),
    (2, 128, "vector"), (2, 256, "vector"), (2, 288, "vector"), (4, 48, "vector"),
])
def test_transpose_auto_gives_tall_matrices_of_short_rows_to_words(itemsize, cols, rung):
    # Whole-sector rows of 96 to 480 bytes that vector's tiles cover in part (NOTES 91), and
    # only tall matrices: the same widths as rows stay with vector.
    rows = 300000
    assert transpose_rungs.choose(_contiguous_problem(itemsize, rows, cols)).name == rung
    assert transpose_rungs.choose(_contiguous_problem(itemsize, cols, rows)).name != "words"


@pytest.mark.parametrize(("itemsize", "rows", "rung"), [
    (1, 23, "narrow"), (1, 25, "runs"), (1, 63, "runs"), (1, 255, "runs"), (1, 64, "words_async"),
    (1, 200, "words_async"), (2, 39, "narrow"), (2, 41, "runs"), (2, 127, "runs"),
    (2, 68, "narrow"), (2, 76, "words"), (2, 160, "words"), (2, 161, "runs"), (2, 254, "runs"),
    (2, 257, "words"), (4, 63, "narrow"), (4, 65, "runs"), (4, 255, "runs"), (4, 256, "vector"),
])
def test_transpose_auto_takes_runs_and_words_by_rows(itemsize, rows, rung):
    # Matrices of a few dozen to a few hundred rows (NOTES 162-165), an odd number of columns.
    # runs needs the input's rows contiguous and the output's adjacent and no row count that is
    # a multiple of 4; without them, what auto took before.
    cols = 3001
    assert transpose_rungs.choose(_contiguous_problem(itemsize, rows, cols)).name == rung
    strided = transpose_rungs.Problem(itemsize, 1, rows, cols, (2 * rows * cols, 2 * cols, 2),
                                      (rows * cols, rows), 0, 0, 90, "int")
    planes = transpose_rungs.Problem(itemsize, 1, rows, cols, (rows * cols, cols, 1),
                                     (rows, rows * 7), 0, 0, 90, "int")
    assert transpose_rungs.choose(strided).name not in ("runs", "words")  # contiguous rows
    assert transpose_rungs.choose(planes).name != "runs"  # the output's rows are not adjacent


@pytest.mark.parametrize("capability", [75, 80, 86, 90, 120])
def test_transpose_runs_ring_by_capability_and_rows(capability):
    # The ring (cp.async) from sm_80, for up to RUNS_RING_MAX_ROWS rows; its shared memory then
    # stays within the 99 KiB a block may opt in to on every GPU from sm_80, and the planned
    # launch asks for that amount with the instance that reads it.
    most = transpose_rungs.RUNS_RING_MAX_ROWS
    for rows in (1, 31, most, most + 1, 255):
        ring = transpose_rungs.runs_ring(capability, rows)
        assert ring == (capability >= 80 and rows <= most)
        problem = transpose_rungs.Problem(2, 1, rows, 3001, (rows * 3001, 3001, 1),
                                          (rows * 3001, rows), 0, 0, capability, "int")
        launch = transpose_rungs.plan_runs(problem)
        assert launch.shared_mem == transpose_rungs.runs_shared_bytes(rows, ring)
        assert launch.instance.endswith("true>" if ring else "false>")
        if ring:
            assert launch.shared_mem <= 99 * 1024


@pytest.mark.parametrize("itemsize", [1, 2, 4])
def test_transpose_narrow_interleaves_by_alignment(itemsize):
    # The register path needs each plane (a row of the narrow side), each matrix and both arrays
    # 16-byte aligned, and the other side one run; a single plane has no stride to align.
    words = 16 // itemsize
    long = 50 * words + 3  # rows that are not whole 16-byte words

    def problem(rows, cols, strides, out_strides, in_address=0, batch=1):
        return transpose_rungs.Problem(itemsize, batch, rows, cols, strides, out_strides,
                                       in_address, 0, 90, "int")

    interleaves = transpose_rungs.narrow_interleaves
    for narrow in range(1, transpose_rungs.INTERLEAVE_MAX + 1):
        pitch = long + words - long % words  # rows padded to whole words
        assert interleaves(problem(narrow, long, (narrow * pitch, pitch, 1),
                                   (narrow * long, narrow)))
        assert interleaves(problem(narrow, long, (narrow * long, long, 1),
                                   (narrow * long, narrow))) == (narrow == 1)
        assert not interleaves(problem(narrow, long, (narrow * pitch, pitch, 1),
                                       (narrow * long, narrow), in_address=itemsize))
        # the output's planes: one run in, rows of the narrow side out
        assert interleaves(problem(long, narrow, (long * narrow, narrow, 1),
                                   (narrow * pitch, pitch)))
        assert interleaves(problem(long, narrow, (long * narrow, narrow, 1),
                                   (narrow * long, long))) == (narrow == 1)
        # a stack: every matrix aligned too, whatever the number of planes
        assert not interleaves(problem(narrow, long, (narrow * pitch + 1, pitch, 1),
                                       (narrow * long, narrow), batch=3))
    many = transpose_rungs.INTERLEAVE_MAX + 1
    pitch = long + words - long % words
    assert not interleaves(problem(many, long, (many * pitch, pitch, 1), (many * long, many)))


def test_transpose_narrow_interleave_geometry_matches_the_kernel():
    # The host sizes the register path's grid for the groups a thread takes; the kernel's macros
    # say how many (two, one from GK_NARROW_STAGED_RUN planes) and must agree with it.
    source = (Path(__file__).resolve().parent.parent / "kernels" / "transpose" /
              "transpose.cu").read_text()
    macros = dict(re.findall(r"^#define (GK_NARROW_\w+) (\d+)", source, re.MULTILINE))
    assert int(macros["GK_NARROW_UNROLL"]) == transpose_rungs.INTERLEAVE_UNROLL
    assert int(macros["GK_NARROW_STAGED_RUN"]) == transpose_rungs.INTERLEAVE_STAGED_RUN
    assert f"N <= {transpose_rungs.INTERLEAVE_MAX}" in source
    for narrow in range(1, transpose_rungs.INTERLEAVE_MAX + 1):
        want = 1 if narrow >= transpose_rungs.INTERLEAVE_STAGED_RUN else 2
        assert transpose_rungs.interleave_unroll(narrow) == want


def test_transpose_narrow_tiles_fit_every_target():
    """The narrow rung's tile (dynamic shared memory, no static) stays within the 64 KiB a
    block may opt in to on sm_75, the smallest of the targets, for every item size and every
    narrow side it takes, in both orientations."""
    for itemsize in transpose_rungs.CARRIERS:
        for narrow in range(1, transpose_rungs.narrow_max(itemsize) + 1):
            for rows, cols in ((narrow, 5000), (5000, narrow)):
                launch = transpose_rungs.plan_narrow(
                    _contiguous_problem(itemsize, rows, cols, capability=75))
                assert launch.shared_mem <= 64 * 1024, (itemsize, rows, cols, launch.shared_mem)


def test_transpose_auto_launches_few_threads_per_element():
    """A plan whose tiles are mostly empty launches many more threads than it moves elements:
    auto's vector launch for stacks of (3, 50176) float32 matrices had 21 threads per element
    (0.02 of a copy on an H100; benchmarks/NOTES.md, item 76). Over matrices with 1 to 256
    rows (either orientation) and every item size, auto's launch stays at or below one thread
    per element (beyond one block); most have under 0.5. The highest: vector's tiles for
    float64 with 65 columns, just past the narrow rung's 8-byte range (0.76)."""
    worst = {}
    for itemsize, narrow, long in itertools.product(
            transpose_rungs.CARRIERS, list(range(1, 70)) + [96, 128, 255, 256],
            (1000, 50176)):
        for rows, cols in ((narrow, long), (long, narrow)):
            problem = transpose_rungs.Problem(itemsize, 8, rows, cols, (rows * cols, cols, 1),
                                              (rows * cols, rows), 0, 0, 90, "int")
            launch = transpose_rungs.choose(problem).plan(problem)
            block = math.prod(launch.block)
            threads = math.prod(launch.grid) * block
            ratio = (threads - block) / (8 * rows * cols)
            worst[itemsize] = max(worst.get(itemsize, 0.0), ratio)
            assert ratio <= 1, (itemsize, rows, cols, launch.instance, ratio)
    assert worst[1] < 1 and worst[2] < 1, worst  # the word and narrow rungs


def _matmul_problems():
    for a_dtype, b_dtype in itertools.product(NUMERIC_DTYPES + [floats.BFLOAT16], repeat=2):
        try:
            result = numpy.result_type(a_dtype, b_dtype)
        except TypeError:  # bfloat16 with float16 or wide integers: no common dtype
            continue
        if result.kind == "c":
            continue
        for K, precision, capability in itertools.product((10, 2**32), matmul_rungs.PRECISIONS,
                                                           (75, 80, 90)):
            yield matmul_rungs.Problem(2, 64, 64, K, result, precision, capability, 132)
            # decode steps: one row and sixteen (gemv's two row tiles)
            yield matmul_rungs.Problem(1, 1, 8192, K, result, precision, capability, 132)
            yield matmul_rungs.Problem(1, 16, 8192, K, result, precision, capability, 132)
            yield matmul_rungs.Problem(2, 64, 128, K, result, precision, capability, 132)
            yield matmul_rungs.Problem(2, 1024, 1024, K, result, precision, capability, 132)
            yield matmul_rungs.Problem(2, 256, 100, K, result, precision, capability, 132)
            # M of at most 64 with 128 x 256 tiles (320 of them)
            yield matmul_rungs.Problem(2, 64, 40960, K, result, precision, capability, 132)
            # Enough tiles of C for wgmma's 128 x 256 tile (fewer take 128 x 128).
            yield matmul_rungs.Problem(2, 4096, 4096, K, result, precision, capability, 132)
            # The 16-bit types' 128 x 192 tile: one wave of 96 (wgmma), N of at most 192.
            yield matmul_rungs.Problem(1, 768, 3072, K, result, precision, capability, 132)
            yield matmul_rungs.Problem(1, 256, 150, K, result, precision, capability, 132)


def _permute_problems():
    """Problems covering every branch of the permutation plans: item sizes, rows that take
    16-, 8-, 4-, 2- and 1-byte words, strided and reversed axes, both index types."""
    layouts = [((4, 8), (1, 4)), ((64, 32, 16), (512, 1, 32)), ((3, 5, 7, 9), (1, 3, 15, 105)),
               ((128, 64), (64, 1)), ((5, 3), (3, 1)), ((7, 2, 6), (-12, 6, 1)),
               ((2, 3, 4, 5, 6, 7, 8, 9), (1, 2, 6, 24, 120, 720, 5040, 40320)),
               ((16, 64, 256), (16384, 1, 64))]  # long rows of 16-byte words
    for itemsize, index in itertools.product(permute_rungs.CARRIERS, ("int", "long long")):
        for (lengths, strides), in_address, out_address in itertools.product(
                layouts, (0, 1, 2, 4, 8, 16), (0, 2, 4, 8, 16)):
            if in_address % min(itemsize, 8) or out_address % min(itemsize, 8):
                continue
            yield permute_rungs.Problem(itemsize, lengths, strides, in_address, out_address, index)


@pytest.mark.parametrize("rung", gk.methods("permute_dims"))
def test_permute_plans_launch_exactly_the_compiled_instances(rung):
    rung = OPERATIONS["permute_dims"].ladder[rung]
    names = set()
    for problem in _permute_problems():
        try:
            planned = rung.plan(problem)
        except ValueError:  # the rung does not take this layout
            continue
        names.add(planned.launch.instance)
        assert planned.dims.dtype == permute_rungs.DIMS and planned.dims.nbytes == 136
    assert names == set(rung.instances)


@pytest.mark.parametrize("rung", gk.methods("matmul"))
def test_matmul_plans_launch_exactly_the_compiled_instances(rung):
    rung = OPERATIONS["matmul"].ladder[rung]
    names = set()
    for problem in _matmul_problems():
        try:
            shape = rung.plan(problem)
        except (TypeError, ValueError):
            continue
        indexes = ("int",) if rung.name in matmul_rungs.HOPPER_RUNGS else ("int", "long long")
        # gemv's instances are by how it reads B (its layouts), the Hopper rungs' by how they
        # read B and A, the others' by alignment
        layouts = matmul_rungs.GEMV_LAYOUTS
        for index, aligned, layout, b_k_major, a_m_major in itertools.product(
                indexes, (False, True), layouts, (False, True), (False, True)):
            names.add(shape.instance(index, aligned, layout, b_k_major=b_k_major,
                                     a_m_major=a_m_major))
    assert names == set(rung.instances)


def test_tf32_takes_its_own_tiles_where_the_others_take_the_wide_or_short_ones():
    # TF32 on the Hopper rungs reads B as it is on 256 x 128 tiles wherever the other types take
    # 128 x 256 (the same tiles of C for square products), and on 64 x 128 tiles wherever they
    # take 64-row ones (and 128 x 128 in place of 256 x 128 where M is at most 128); on
    # 128 x 128 and 128 x 64, as the others do. Every TF32 tile reads B as it is.
    float32, float16 = numpy.dtype(numpy.float32), numpy.dtype(numpy.float16)
    kinds = set()
    for batch, M, N, K in ((1, 8192, 8192, 8192), (2, 4096, 4096, 100), (1, 1100, 8200, 72),
                           (2, 1024, 1024, 1024), (1, 64, 40960, 500), (1, 4000, 60, 300),
                           (1, 1, 8192, 8192), (1, 16, 100, 3000), (1, 128, 8192, 8192),
                           (1, 100, 4096, 4096), (3, 200, 8200, 1000)):
        tf32 = matmul_rungs.Problem(batch, M, N, K, float32, "tf32", 90, 132)
        half = matmul_rungs.Problem(batch, M, N, K, float16, "highest", 90, 132)
        for plan in (matmul_rungs.plan_wgmma, matmul_rungs.plan_split_k):
            theirs, ours = plan(half).tile, plan(tf32).tile
            if theirs == matmul_rungs.WGMMA_MID_TILE:  # 16-bit only: TF32 picks from the others
                assert ours in (matmul_rungs.WGMMA_TF32_TILE, (128, 128)), (plan, M, N, K)
                continue
            want = matmul_rungs.TF32_TILES.get(theirs, theirs)
            if want == matmul_rungs.WGMMA_TF32_TILE and M <= 128:  # no 128 rows of zeros
                want = (128, 128)
            assert ours == want, (plan, M, N, K)
            assert ours not in ((128, 256), (64, 256))
            kinds.add(ours)
    assert {matmul_rungs.WGMMA_TF32_TILE, matmul_rungs.WGMMA_TF32_SHORT_TILE, (128, 128),
            (128, 64)} <= kinds


def _reduction_requests(operation):
    requests = [None] if operation in ("min", "max", "argmin", "argmax", "mean") \
        else [None, *NUMERIC_DTYPES]
    for dtype, requested in itertools.product(NUMERIC_DTYPES, requests):
        try:
            result = reduce_dtypes.reduction_result_dtype(operation, dtype, requested)
        except TypeError:
            continue
        if operation == "var" and dtype.kind == "c":  # var reads complex as its two parts
            dtype = reduce_dtypes.real_part(dtype)
        yield dtype, result


def _recorded_instances(program: Program) -> set:
    return {step[1].instance for step in program.steps if step[0] == "launch"}


@pytest.mark.parametrize("operation", sorted(reduce_dtypes.OPERATORS))
@pytest.mark.parametrize("rung", gk.methods("reduce"))
def test_reduction_plans_launch_exactly_the_compiled_instances(rung, operation):
    rung = reduce_rungs.LADDER[rung]
    op = reduce_dtypes.OPERATORS[operation]
    names = set()
    triples = []
    for dtype, result in _reduction_requests(operation):
        read, acc = reduce_dtypes.accumulator(op, dtype, result, rung.float32_sums_in_float64)
        triples.append((read, acc, reduce_dtypes.writes(op, read, acc, result, full=True)))
    if operation == "var" and rung.finishes_spreads:  # var and std of float data, one launch
        floats = map(numpy.dtype, ("float16", "float32", "float64"))
        triples += [(result, reduce_dtypes.MOMENTS, reduce_dtypes.spread(result, ddof, root))
                    for result in floats for ddof in reduce_dtypes.SPREAD_DDOFS
                    for root in (False, True)]
    for read, acc, written in triples:
        # one block, partials, strided input, one_pass's grid-stride wave
        for n, stride in ((10, 1), (10**7, 1), (10**7, 3), (2**25, 1)):
            program = Program(read, (1024, 132))
            rung.plan(program, reduce_rungs.Problem(op, n, stride, read, acc, written, (), 132))
            names |= _recorded_instances(program)
    own = {i for i in rung.instances if f"<{op}," in i}
    assert names == own


AXIS_LAYOUTS = [((8192, 8192), (0,)), ((8192, 8192), (1,)), ((10**6, 2), (1,)), ((10**6, 2), (0,)),
                ((1, 2**24), (1,)), ((256, 256, 256), (1,)), ((256, 256, 256), (0, 2)),
                ((4, 5, 6, 7), (1, 3)), ((3, 1000), (1,)), ((64, 5), (0,))]


@pytest.mark.parametrize("operation", sorted(reduce_dtypes.OPERATORS))
def test_axis_plans_launch_only_compiled_instances(operation):
    op = reduce_dtypes.OPERATORS[operation]
    compiled = {i for i in reduce_axis.SOURCE.instances if f"<{op}," in i}
    names = set()
    for dtype, result in _reduction_requests(operation):
        read, acc = reduce_dtypes.accumulator(op, dtype, result, True)
        written = reduce_dtypes.writes(op, read, acc, result, full=False)
        for shape, axes in AXIS_LAYOUTS:
            if op in reduce_dtypes.ARG_OPERATORS and len(axes) > 1:
                continue  # argmin and argmax take one axis (TypeError before any plan)
            program = Program(read, (1024, 132))
            strides = reduce_axis.c_strides(shape)
            reduce_axis.plan_partial(program, 0, shape, strides, read, axes, op, acc, written, 132)
            names |= _recorded_instances(program)
    assert names <= compiled, sorted(names - compiled)[:5]
    assert len(names) > len(compiled) // 8  # the layouts reach the kernels of every kind


@pytest.mark.parametrize("per_sm", [8, 6, 4, 2])
def test_split_plans_fill_one_wave_of_the_blocks_an_sm_runs(per_sm):
    # A split reduction's blocks are one wave of what the occupancy calculator says an SM runs
    # of the instance launched (here told, as a GPU would): (8192, 8192) over axis 0 is 32
    # column blocks of 256 threads, so floor(per_sm * 132 / 32) splits; a full var, whose
    # shuffle launch is one wave, as many blocks. Without an answer, 8 blocks of 256 an SM.
    told = []

    def resident(instance, threads):
        told.append((instance, threads))
        return per_sm

    F32, F64 = numpy.dtype("float32"), numpy.dtype("float64")
    moments = reduce_dtypes.MOMENTS
    program = Program(F32, (1024, 132))
    reduce_axis.plan_partial(program, 0, (8192, 8192), (8192, 1), F32, (0,), "MomentsOp",
                             moments, moments, 132, resident)
    (launch,) = [step[1] for step in program.steps if step[0] == "launch"]
    assert launch.instance.startswith("reduce_cols_folded<MomentsOp")
    assert told == [(launch.instance, 256)]
    assert launch.grid == (32, per_sm * 132 // 32, 1)
    program = Program(F32, (1024, 132))
    reduce_rungs.LADDER["shuffle"].plan(program, reduce_rungs.Problem(
        "MomentsOp", 2**26, 1, F32, moments, moments, (), 132, 0, resident))
    first = next(step[1] for step in program.steps if step[0] == "launch")
    assert first.grid == (per_sm * 132, 1, 1)
    program = Program(F32, (1024, 132))
    reduce_axis.plan_partial(program, 0, (8192, 8192), (8192, 1), F32, (0,), "SumOp", F64, F32,
                             132)
    (launch,) = [step[1] for step in program.steps if step[0] == "launch"]
    assert launch.grid == (32, 8 * 132 // 32, 1)


@pytest.mark.parametrize("room", [None, 16])
def test_split_column_partials_go_to_the_stream_scratch_where_they_fit(room):
    # A split column reduction folds its partials in the same launch: with room for them in the
    # stream's scratch (reduce's scratch_sizes), the plan is one launch into the result, which
    # calls take without the program's buffers; with too little, a buffer of its own.
    from gpukernels.ops.reduce import scratch_sizes
    from gpukernels.ops.reduce.program import PARTIALS

    F32, F64 = numpy.dtype("float32"), numpy.dtype("float64")
    sizes = scratch_sizes(132) if room is None else (room, 132)
    program = Program(F32, sizes)
    reduce_axis.plan_partial(program, 0, (8192, 8192), (8192, 1), F32, (0,), "SumOp", F64, F32,
                             132)
    (launch,) = [step for step in program.steps if step[0] == "launch"]
    assert launch[1].instance.startswith("reduce_cols_folded<") and launch[1].grid[1] > 1
    if room is None:
        assert PARTIALS in launch[2] and len(program.buffers) == 2
        assert sizes[0] >= reduce_rungs.one_pass_max_blocks(132)
    else:
        assert PARTIALS not in launch[2] and len(program.buffers) == 3


@pytest.mark.parametrize("below", [1, 0])
def test_a_one_launch_program_decides_once_whether_to_launch_first(below):
    # From LAUNCH_FIRST_BYTES of input a one-launch program builds its result after its launch;
    # the plan decides it (Program.finish, from the planned input's bytes) and every call reads
    # it. The kernel call is a stand-in here: finishing a program on a GPU fetches its kernel.
    from gpukernels.ops.reduce import scratch_sizes
    from gpukernels.ops.reduce.program import LAUNCH_FIRST_BYTES

    class StandIn:
        def call(self, *args):
            return "the kernel call"

    F32, F64 = numpy.dtype("float32"), numpy.dtype("float64")
    program = Program(F32, scratch_sizes(132))
    reduce_axis.plan_partial(program, 0, (8192, 8192), (8192, 1), F32, (0,), "SumOp", F64, F32,
                             132)
    program.steps = [(step[0], StandIn(), *step[2:]) if step[0] == "launch" else step
                     for step in program.steps]
    assert not program.launch_first
    program.finish(LAUNCH_FIRST_BYTES - below)
    assert program.simple is not None and program.simple[0] == "the kernel call"
    assert program.launch_first == (below == 0)


@pytest.mark.parametrize(("op", "threads"), [("SumOp", 1024), ("MomentsOp", 1024),
                                              ("MeanOp", 256), ("ArgMaxOp", 1024)])
@pytest.mark.parametrize("resident", [None, 5, 1])
def test_one_pass_runs_whole_waves_of_its_blocks(op, threads, resident):
    # one_pass's blocks per operator (256 threads for the mean's wide accumulator), grids of up
    # to ONE_PASS_WAVES waves of the blocks an SM runs, segments that cover n, and never more
    # partials than the scratch holds; var's moments and float argmax in one grid-stride wave
    # instead where their segments would take more than one wave.
    from gpukernels.ops.reduce import scratch_sizes
    from gpukernels.ops.reduce.program import PARTIALS

    F32 = numpy.dtype("float32")
    result = F32 if op != "ArgMaxOp" else numpy.dtype("int64")
    read, acc = reduce_dtypes.accumulator(op, F32, result, True)
    written = reduce_dtypes.writes(op, read, acc, result, full=True)
    per_sm = min(resident or 8, 2048 // threads)
    wave = per_sm * 132
    for n in (1, 1000, 10**6, 2**24, 2**26 + 3, 2**31):
        program = Program(F32, scratch_sizes(132))
        reduce_rungs.plan_one_pass(program, reduce_rungs.Problem(
            op, n, 1, read, acc, written, (), 132,
            resident=None if resident is None else (lambda instance, block: resident)))
        (launch,) = [step for step in program.steps if step[0] == "launch"]
        blocks, segment = launch[1].grid[0], launch[2][4]
        steps = -(-n // (threads * 4))  # four float32 a thread a step
        if reduce_rungs.strided_kind(op, read) and \
                steps // (reduce_rungs.ONE_PASS_MIN_STEPS * wave) >= 2:
            # shuffle's one grid-stride wave of BLOCK-thread blocks, no segments
            assert launch[1].instance.endswith(f", {reduce_rungs.BLOCK}, true>")
            assert segment == 0 and blocks == min(resident or 8, 8) * 132
            continue
        assert launch[1].block == (threads, 1, 1) and f", {threads}>" in launch[1].instance
        assert PARTIALS in launch[2] and blocks <= scratch_sizes(132)[0]
        assert (blocks - 1) * segment < n <= blocks * segment
        assert blocks <= reduce_rungs.ONE_PASS_WAVES * wave
        if n == 2**31:  # the most waves, of the blocks an SM runs
            assert blocks > (reduce_rungs.ONE_PASS_WAVES - 1) * wave, blocks


@pytest.mark.parametrize(("shape", "axes", "kernels"), [
    # runs of 1 KiB: the outermost group first (a column per thread), then the short rows
    ((256, 256, 256), (0, 2), ["reduce_cols<", "reduce_rows<"]),
    # runs of 16 KiB: the innermost first, as rows (in 8 splits, folded by a column pass)
    ((8, 64, 4096), (0, 2), ["reduce_rows<", "reduce_cols<", "reduce_cols<"]),
    # axes 1 and 3 with short runs: left beside axis 1 are A and C x D, two strides
    ((16, 32, 64, 128), (1, 3), ["reduce_cols<", "reduce_rows<"]),
])
def test_groups_of_axes_take_short_rows_last(shape, axes, kernels):
    F32, F64 = numpy.dtype("float32"), numpy.dtype("float64")
    program = Program(F32, (1024, 132))
    reduce_axis.plan_partial(program, 0, shape, reduce_axis.c_strides(shape), F32, axes,
                             "SumOp", F64, F32, 132)
    launched = [step[1].instance for step in program.steps if step[0] == "launch"]
    assert [name.split("SumOp")[0] for name in launched] == kernels, launched
    assert not any(step[0] == "copy" for step in program.steps)


def test_single_arch_source_runs_only_there():
    wgmma = _compile.SOURCES["matmul/wgmma.cu"]
    assert wgmma.arch == "sm_90a" and wgmma.arch_options() == ("-arch=sm_90a",)
    assert wgmma.runs_on(90) and not any(wgmma.runs_on(cc) for cc in (75, 80, 89, 100, 120))
    portable = _compile.SOURCES["matmul/simt.cu"]
    assert portable.arch is None and portable.arch_options() == ()
    assert all(portable.runs_on(cc) for cc in (75, 80, 90, 120))


def test_eager_groups_leave_the_rare_instances_for_first_use():
    lazy = [i for s in _compile.SOURCES.values() for g in s.groups if not g.eager
            for i in g.instances]
    eager = [i for s in _compile.SOURCES.values() for g in s.groups if g.eager
             for i in g.instances]
    assert not any(", long long" in i and i.startswith("transpose_") for i in eager)
    assert not any("unsigned int" in i and i.startswith("matmul_") for i in eager)
    assert any(i.startswith("reduce_two_pass") for i in lazy)
    assert lazy and eager and not set(lazy) & set(eager)


def test_import_compiles_the_scan_rungs_auto_takes_there():
    # blocked is auto's row scan below compute capability 8.0 and pipelined from 8.0: each
    # compiles at import only where auto takes it; look_back, never auto's, on first use only.
    from gpukernels.ops.scan import rungs as scan_rungs

    def at_import(rung, capability):
        return {g.name for g in scan_rungs.LADDER[rung].groups if g.eager_on(capability)}

    assert at_import("blocked", 75) and not at_import("blocked", 90)
    assert at_import("pipelined", 90) and at_import("pipelined", 120)
    assert not at_import("pipelined", 75)
    assert not any(at_import("look_back", cc) for cc in (75, 80, 90, 120))
    lazy_on_90 = {g.name for g in _compile.REPORT.lazy_groups(90)}
    assert at_import("blocked", 75) <= lazy_on_90 and not at_import("pipelined", 90) & lazy_on_90


@pytest.mark.parametrize("K", [1, 15, 128, 1000, 8192, 100_000])
@pytest.mark.parametrize("blocks", [1, 64, 128, 300])
@pytest.mark.parametrize("rows", sorted(matmul_rungs.GEMV_GEOMETRY))
@pytest.mark.parametrize("layout", matmul_rungs.GEMV_LAYOUTS)
def test_gemv_splits_cover_k_and_fill_one_wave(layout, K, blocks, rows):
    # Splits of whole block steps (warps x 16 rows, 32 for 16-byte words of columns) that
    # cover K once, at least GEMV_MIN_WARP_STEPS steps a warp where K has them, and no more
    # blocks than one wave.
    threads, _, per_sm = matmul_rungs.GEMV_GEOMETRY[rows]
    slots = per_sm * 132
    warp_rows = matmul_rungs.gemv_warp_rows(layout)
    splits, k_rows = matmul_rungs.gemv_splits(K, blocks, slots, threads, warp_rows)
    step = threads // 32 * warp_rows
    assert warp_rows == (32 if layout == matmul_rungs.GEMV_COLUMN_WORDS else 16)
    assert k_rows % step == 0 and (splits - 1) * k_rows < K <= splits * k_rows
    assert splits == 1 or blocks * splits <= slots
    if splits > 1:
        assert k_rows >= matmul_rungs.GEMV_MIN_WARP_STEPS * step


def test_ladders_and_operations():
    assert list(OPERATIONS) == ["transpose", "permute_dims", "matmul", "sum", "prod", "min", "max",
                                "mean", "var", "std", "argmin", "argmax", "cumsum", "cumprod"]
    assert list(ladders()) == ["transpose", "permute", "matmul", "reduce", "scan"]


# --- the loader: header inlining and error reporting -------------------------------------------

def test_inline_inserts_headers_with_line_markers():
    _compile.load_source.cache_clear()
    try:
        for path in SOURCE_NAMES:
            source = _compile.load_source(path)
            assert source.startswith(f'#line 1 "{path}"')
            assert '#include "' not in source  # nested headers (reduce/common.cuh) too
            assert '#line 1 "common.cuh"' in source
            assert source.count("struct gk_half {") == 1  # common.cuh inlined once
            raw = (_compile.kernel_dir() / path).read_text().splitlines()
            include_line = next(n for n, line in enumerate(raw, start=1)
                                if line.startswith('#include "'))
            assert f'#line {include_line + 1} "{path}"' in source
    finally:
        _compile.load_source.cache_clear()


def test_inline_rejects_self_inclusion(tmp_path):
    (tmp_path / "loop.cuh").write_text('#pragma once\n#include "main.cu"\n')
    (tmp_path / "main.cu").write_text('#include "loop.cuh"\n')
    with pytest.raises(gk.KernelCompileError, match="includes itself"):
        _compile._inline((tmp_path / "main.cu").resolve(), tmp_path.resolve(), set())


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
    sources = dict(_compile.SOURCES)
    yield tmp_path
    _compile.load_source.cache_clear()
    _compile.SOURCES.clear()
    _compile.SOURCES.update(sources)


def test_broken_source_raises_kernel_compile_error(broken_kernel_dir):
    source = _compile.KernelSource("broken.cu")
    source.add("all", ["broken_kernel"])
    with pytest.raises(gk.KernelCompileError) as info:
        _compile.compile_for_arch(source, "sm_80")
    message = str(info.value)
    assert "broken.cu" in message
    assert "sm_80" in message
    assert "this_name_is_not_declared" in message  # NVRTC's log is in the message
    # The #line markers make the log point at the original file and line, past the header.
    assert "broken.cu(5)" in message, message


def test_error_in_header_names_the_header(broken_kernel_dir):
    common = (broken_kernel_dir / "common.cuh").read_text().splitlines()
    common.append("this is not C++;")
    (broken_kernel_dir / "common.cuh").write_text("\n".join(common) + "\n")
    (broken_kernel_dir / "ok.cu").write_text(
        '#include "common.cuh"\n__global__ void ok_kernel(i64* out) { out[0] = 1; }\n'
    )
    source = _compile.KernelSource("ok.cu")
    source.add("all", ["ok_kernel"])
    with pytest.raises(gk.KernelCompileError) as info:
        _compile.compile_for_arch(source, "sm_80")
    assert f"common.cuh({len(common)})" in str(info.value), str(info.value)


def test_compile_error_leaves_the_loader_usable(broken_kernel_dir):
    source = _compile.KernelSource("broken.cu")
    source.add("all", ["broken_kernel"])
    with pytest.raises(gk.KernelCompileError):
        _compile.compile_for_arch(source, "sm_80")
    _compile.load_source.cache_clear()
    # The fixture's kernel_dir still points at tmp_path, which has no transpose/transpose.cu.
    with pytest.raises(FileNotFoundError):
        _compile.load_source("transpose/transpose.cu")


# --- the compile tests' place in the run order (tests/conftest.py) ------------------------------

def test_compile_tests_are_spread_so_every_worker_gets_its_share():
    from types import SimpleNamespace

    from conftest import _spread_compile_tests

    def item(name, path=None, arch=None):
        marker = "compile" if path else None
        return SimpleNamespace(
            name=name, get_closest_marker=lambda m, marker=marker: m if m == marker else None,
            callspec=SimpleNamespace(params={"path": path, "arch": arch} if path else {}))

    compile_items = [item(f"{p}-{a}", p, a) for p, a in SOURCE_ARCHS]
    items = [item(f"other {i}") for i in range(2000)] + compile_items
    _spread_compile_tests(items)
    assert sorted(i.name for i in items) == sorted([f"other {i}" for i in range(2000)]
                                                   + [i.name for i in compile_items])
    positions = [k for k, i in enumerate(items) if i.callspec.params]
    assert positions[-1] < len(items) // 4  # all in the quarter xdist hands out first
    assert min(b - a for a, b in itertools.pairwise(positions)) > 10  # spread, not together
    # Two workers take the first and second half of that quarter: each gets two of the four
    # architectures of every source compiled for four.
    halfway = len(items) // 8
    for path in {p for p, a in SOURCE_ARCHS if a != "sm_90a"}:
        first = [i for k, i in enumerate(items) if k < halfway and i.callspec.params.get("path")
                 == path]
        assert len(first) == 2, (path, [i.name for i in first])
