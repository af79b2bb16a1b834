"""CPU-side API checks: ladders, input validation, NumPy's shape and dtype rules, references.

None of these needs a GPU: errors for bad inputs must come before anything touches a device.
"""

from __future__ import annotations

import itertools
import types
import typing
import warnings

import numpy
import pytest

import gpukernels as gk
import references as reference
from gpukernels._core import floats
from gpukernels._core.ladder import OPERATIONS
from gpukernels.ops import matmul as matmul_mod
from gpukernels.ops.matmul import rungs as matmul_rungs
from gpukernels.ops.reduce import dtypes as reduction_mod

GPU = gk.gpu_available()
OPS = {"transpose": gk.transpose, "matmul": gk.matmul, "sum": gk.sum}

SUPPORTED_DTYPES = [numpy.dtype(t) for t in (
    numpy.bool_, numpy.int8, numpy.int16, numpy.int32, numpy.int64, numpy.uint8, numpy.uint16,
    numpy.uint32, numpy.uint64, numpy.float16, numpy.float32, numpy.float64, numpy.complex64,
    numpy.complex128)]


def call(op, x):
    """Call ``op`` with ``x`` as its (first) array argument."""
    if op == "matmul":
        return gk.matmul(x, x)
    return OPS[op](x)


# --- ladders ------------------------------------------------------------------------------------

@pytest.mark.parametrize("op, ladder", [
    ("transpose", ("naive", "naive_col", "shared", "vector", "words", "words_async",
                   "narrow", "runs")),
    ("matmul", ("naive", "tiled", "blocked_1d", "blocked_2d", "warp_tiled", "large_tile", "mma",
                "wgmma", "split_k", "gemv", "multicast")),
    ("reduce", ("two_pass", "shuffle", "one_pass")),
    ("sum", ("two_pass", "shuffle", "one_pass")),
    ("max", ("two_pass", "shuffle", "one_pass")),
], ids=["transpose", "matmul", "reduce", "sum", "max"])
def test_methods(op, ladder):
    assert gk.methods(op) == ladder
    assert "auto" not in gk.methods(op)



def test_check_shapes_name_rungs_that_refuse_the_check_shape():
    """The main job checks every rung on its operation's check_shape, or on the rung's own
    (check_shapes) where it does not take that one: the keys are rungs of the operation."""
    for name, op in OPERATIONS.items():
        assert set(op.check_shapes) <= set(op.ladder.names), name
    assert OPERATIONS["transpose"].check_shapes["narrow"][-2] <= 16

@pytest.mark.parametrize("op", ["argsort", "", "Transpose", None])
def test_methods_unknown_operation(op):
    with pytest.raises(ValueError, match="unknown operation"):
        gk.methods(op)


@pytest.mark.parametrize("operation", ["cumsum", "sum", "transpose"])
def test_check_names_an_unknown_rung_before_asking_for_a_gpu(operation, monkeypatch):
    from gpukernels._core import device
    from gpukernels.validation import check

    def no_gpu():
        raise device.NoGPUError("no GPU")

    monkeypatch.setattr(device, "require_gpu", no_gpu)
    with pytest.raises(ValueError, match=r"unknown .* method 'bogus'"):
        check(operation, "bogus", (3,), "float32")
    with pytest.raises(TypeError):
        check(operation, 3, (3,), "float32")
    with pytest.raises(device.NoGPUError):
        check(operation, "auto", (3,), "float32")


def _gpu_status_with(monkeypatch, cupy_module, import_error=None, count=None):
    """device's verdict with CuPy (or its failed import) and the device count as given."""
    from gpukernels._core import device

    if cupy_module is not None and count is not None:
        def device_count():
            if isinstance(count, Exception):
                raise count
            return count
        runtime = types.SimpleNamespace(getDeviceCount=device_count)
        cupy_module = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime))
    monkeypatch.setattr(device, "cupy", cupy_module)
    monkeypatch.setattr(device, "_CUPY_IMPORT_ERROR", import_error)
    device._gpu_status.cache_clear()
    try:
        with pytest.raises(device.NoGPUError) as raised:
            device.require_gpu()
    finally:
        device._gpu_status.cache_clear()
    message = str(raised.value)
    assert device.WITHOUT_GPU in message  # every such message says what works without a GPU
    return message, raised.value.__cause__


def test_no_gpu_messages_say_what_happened_in_the_users_terms(monkeypatch):
    # CUDA's words for "no driver at all" are "driver version is insufficient".
    insufficient = RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is "
                                "insufficient for CUDA runtime version")
    message, _ = _gpu_status_with(monkeypatch, object(), count=insufficient)
    assert "no usable NVIDIA driver was found" in message
    assert "install the NVIDIA driver" in message
    message, _ = _gpu_status_with(monkeypatch, object(),
                                  count=RuntimeError("cudaErrorNoDevice: no CUDA-capable device"))
    assert "the NVIDIA driver sees no CUDA device" in message
    message, _ = _gpu_status_with(monkeypatch, object(), count=0)
    assert "the NVIDIA driver sees no CUDA device" in message


def test_a_failed_cupy_import_is_not_called_missing(monkeypatch):
    missing = ModuleNotFoundError("No module named 'cupy'", name="cupy")
    message, cause = _gpu_status_with(monkeypatch, None, missing)
    assert "CuPy is not installed" in message and "gpukernels[cuda13]" in message
    assert cause is missing
    # CuPy present but broken (e.g. built for NumPy 2 under NumPy 1): the real error, kept.
    broken = ImportError("numpy.core.multiarray failed to import")
    message, cause = _gpu_status_with(monkeypatch, None, broken)
    assert "CuPy is installed but failed to import" in message
    assert "numpy.core.multiarray failed to import" in message
    assert "not installed" not in message
    assert cause is broken


def test_public_names():
    for name in ("transpose", "matmul", "sum", "prod", "min", "max", "methods", "gpu_available", "KernelCompileError",
                 "NoGPUError", "__version__"):
        assert hasattr(gk, name), name
        assert name in gk.__all__
    assert issubclass(gk.NoGPUError, RuntimeError)
    assert issubclass(gk.KernelCompileError, RuntimeError)
    assert isinstance(gk.gpu_available(), bool)


def test_resolve_method():
    for op in OPERATIONS.values():
        ladder = op.ladder
        assert ladder.resolve("auto", op.name) is None
        for name in gk.methods(op.name):
            assert ladder.resolve(name, op.name).name == name
        with pytest.raises(ValueError, match="bogus"):
            ladder.resolve("bogus", op.name)
        with pytest.raises(ValueError):
            ladder.resolve("AUTO", op.name)
        for bad in (None, 1, b"auto", ("naive",)):
            with pytest.raises(TypeError):
                ladder.resolve(bad, op.name)


# --- host inputs are refused before anything GPU-related ----------------------------------------

@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("host", [
    pytest.param(numpy.zeros((4, 4), numpy.float32), id="ndarray"),
    pytest.param(numpy.zeros((0, 3), numpy.float64), id="empty-ndarray"),
    pytest.param(numpy.float32(1.5), id="numpy-scalar"),
    pytest.param([[1.0, 2.0], [3.0, 4.0]], id="list"),
    pytest.param(((1, 2), (3, 4)), id="tuple"),
    pytest.param(3, id="int"),
    pytest.param(2.5, id="float"),
    pytest.param(1j, id="complex"),
    pytest.param(True, id="bool"),
])
def test_host_input_raises_type_error_naming_cupy_asarray(op, host):
    with pytest.raises(TypeError, match=r"cupy\.asarray"):
        call(op, host)


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("obj", [object(), "abc", None, {"a": 1}], ids=["object", "str", "None", "dict"])
def test_arbitrary_object_raises_type_error(op, obj):
    with pytest.raises(TypeError):
        call(op, obj)


@pytest.mark.parametrize("op", list(OPS))
def test_host_input_error_comes_before_method_check(op):
    # The input is checked first; a bad method on a host array still reports the host array.
    with pytest.raises(TypeError, match=r"cupy\.asarray"):
        OPS[op](*([numpy.ones((2, 2), numpy.float32)] * (2 if op == "matmul" else 1)),
                method="bogus")


class FakeDLPack:
    """A tensor exposing only DLPack, on the device type given."""

    def __init__(self, device_type):
        self.device_type = device_type
        self.exported = False

    def __dlpack__(self, *args, **kwargs):
        self.exported = True
        raise AssertionError("a host DLPack tensor must be refused before export")

    def __dlpack_device__(self):
        return (self.device_type, 0)


@pytest.mark.parametrize("op", list(OPS))
def test_cpu_dlpack_tensor_raises_type_error(op):
    fake = FakeDLPack(1)  # kDLCPU
    with pytest.raises(TypeError, match="DLPack"):
        call(op, fake)
    assert not fake.exported


@pytest.mark.skipif(GPU, reason="checks the no-GPU error")
@pytest.mark.parametrize("op", list(OPS))
def test_device_array_without_gpu_raises_no_gpu_error(op):
    class FakeCAI:
        __cuda_array_interface__: typing.ClassVar[dict] = {
            "shape": (2, 2), "typestr": "<f4", "data": (0, False), "version": 3}

    with pytest.raises(gk.NoGPUError, match="GPU"):
        call(op, FakeCAI())
    with pytest.raises(gk.NoGPUError):
        call(op, FakeDLPack(2))  # kDLCUDA, but no device to use it on


def test_numpy_host_array_message_is_actionable():
    with pytest.raises(TypeError) as info:
        gk.transpose(numpy.ones((2, 3)))
    assert "cupy.asarray(x)" in str(info.value)
    with pytest.raises(TypeError) as info:
        gk.matmul(numpy.ones((2, 3)), numpy.ones((3, 2)))
    assert "cupy.asarray(a)" in str(info.value)


# --- matmul's shape rules mirror NumPy ----------------------------------------------------------

MATMUL_SHAPES = [
    ((3,), (3,)), ((0,), (0,)), ((3,), (4,)), ((1,), (1,)),
    ((3,), (3, 5)), ((3,), (4, 5)), ((2, 3), (3,)), ((2, 3), (4,)),
    ((2, 3), (3, 4)), ((2, 3), (2, 3)), ((1, 1), (1, 1)), ((0, 3), (3, 4)), ((2, 0), (0, 4)),
    ((2, 3), (3, 0)), ((3, 33, 17), (17, 9)), ((17,), (3, 17, 9)), ((3, 33, 17), (17,)),
    ((2, 1, 5, 7), (4, 7, 3)), ((2, 3, 5, 7), (4, 7, 3)), ((2, 5, 7), (3, 7, 2)),
    ((1, 5, 7), (3, 7, 2)), ((0, 5, 7), (7, 2)), ((0, 5, 7), (3, 7, 2)), ((2, 5, 7), (1, 7, 2)),
    ((5, 1, 2, 3), (1, 4, 3, 2)), ((2, 3), (1, 1, 3, 4)), ((), (3,)), ((3,), ()), ((), ()),
    ((4, 5), ()), ((2, 2, 3, 4), (2, 4, 5)), ((1, 3), (3, 1)), ((3, 1), (1, 3)),
]


@pytest.mark.parametrize("a_shape, b_shape", MATMUL_SHAPES,
                         ids=[f"{a}@{b}" for a, b in MATMUL_SHAPES])
def test_matmul_shapes_mirror_numpy(a_shape, b_shape):
    a, b = numpy.zeros(a_shape), numpy.zeros(b_shape)
    try:
        want = numpy.matmul(a, b).shape
    except ValueError:
        with pytest.raises(ValueError):
            matmul_mod.matmul_shapes(a_shape, b_shape)
        return
    batch, M, K, N, out_shape = matmul_mod.matmul_shapes(a_shape, b_shape)
    assert out_shape == want
    assert K == (a_shape[-1])
    assert M == (a_shape[-2] if len(a_shape) > 1 else 1)
    assert N == (b_shape[-1] if len(b_shape) > 1 else 1)
    assert batch == numpy.broadcast_shapes(a_shape[:-2], b_shape[:-2])


# --- sum: result dtypes and axes mirror NumPy ---------------------------------------------------

SUM_REQUESTS = [None, numpy.int32, numpy.int64, numpy.uint8, numpy.float16, numpy.float32,
                numpy.float64, numpy.complex64, numpy.complex128, numpy.bool_]


def _problem(capability, dtype="float32", precision="tf32", shape=(1, 256, 256, 256)):
    batch, M, N, K = shape
    return matmul_rungs.Problem(batch, M, N, K, numpy.dtype(dtype), precision, capability, 132)


@pytest.mark.parametrize(("shape", "dtype", "expected"), [
    ((1, 8192, 8192, 8192), "float32", "large_tile"),   # 256 x 128 tiles fill the SMs
    ((1, 1024, 1024, 1024), "float32", "warp_tiled"),   # 32 of them would not
    ((256, 128, 128, 256), "float32", "warp_tiled"),    # a stack: half of each large tile empty
    ((64, 384, 512, 256), "float32", "warp_tiled"),     # 512 rows of large tiles for 384
    ((8, 1152, 1024, 256), "float32", "warp_tiled"),    # 1280 rows for 1152: past 1.05
    ((1, 4095, 4099, 4097), "float32", "large_tile"),   # 4096 rows for both
    ((256, 128, 128, 256), "float64", "large_tile"),    # 8-byte items: both tiles 128 x 128
    ((4, 0, 3, 4), "float32", "warp_tiled"),            # no rows at all
])
def test_matmul_auto_simt_rung_by_shape(shape, dtype, expected):
    # SIMT products (no TF32 asked): large_tile where its tiles fill the SMs without covering
    # many more rows of C than warp_tiled's (LARGE_TILE_MAX_PADDING), else warp_tiled.
    problem = _problem(90, dtype, "highest", shape)
    assert matmul_rungs.choose(problem).name == expected


class _HostStack:
    """A GPU stack's shape, strides and (zero) address, from a NumPy view: what
    tensor_map.tma_compatible and the Hopper rungs' layout checks read."""

    def __init__(self, x):
        self.x, self.shape, self.strides, self.itemsize = x, x.shape, x.strides, x.itemsize
        self.data = types.SimpleNamespace(ptr=0)

    def __getitem__(self, key):
        return _HostStack(self.x[key])

    def swapaxes(self, a, b):
        return _HostStack(self.x.swapaxes(a, b))


def test_hopper_rungs_read_transposed_views_through_what_tma_reads():
    # B = W.T of a row-major (N, K) W, stacked as matmul stacks it (a reshape that leaves the
    # rows' stride on the unit batch axis): TMA cannot read B N-contiguous, but can read W, so
    # the 16-bit types read B K-major; a row-major B, W's rows off 16 bytes (K = 130), TF32,
    # and a stack of W alike. A = X.T of a row-major (K, M) X the same way, read M-major.
    from gpukernels.ops.matmul import _transposed_reads, tensor_map

    half, single = numpy.dtype(numpy.float16), numpy.dtype(numpy.float32)

    def stacked(b):
        return _HostStack(numpy.broadcast_to(b, b.shape).reshape((-1,) + b.shape[-2:]))

    w = numpy.zeros((264, 136), half)
    assert stacked(w.T).strides[0] == w.strides[0]  # the unit axis's stride: the rows'
    assert not tensor_map.tma_compatible(stacked(w.T))
    assert tensor_map.tma_compatible(stacked(w.T).swapaxes(1, 2))
    assert _transposed_reads(stacked(w.T), half)
    assert not _transposed_reads(stacked(w.T), single)  # TF32 reads B from registers: copied
    assert not _transposed_reads(stacked(numpy.zeros((136, 264), half)), half)  # row-major
    assert not _transposed_reads(stacked(numpy.zeros((200, 130), half).T), half)  # 260 bytes
    ws = numpy.zeros((3, 264, 136), half)
    assert _transposed_reads(stacked(ws.swapaxes(-1, -2)), half)
    x = numpy.zeros((3, 1000, 200), half)  # X.T: A of 200 x 1000, its rows' stride 2 bytes
    assert _transposed_reads(stacked(x.swapaxes(-1, -2)), half)
    assert _transposed_reads(stacked(x[0].T), half)
    assert not _transposed_reads(stacked(numpy.zeros((1000, 203), half).T), half)  # 406 bytes


def test_matmul_auto_reads_a_b_that_tma_cannot_in_gemv():
    # On Hopper a B that TMA cannot read as it is (x @ W.T: K-contiguous columns) would be
    # copied by wgmma and split_k on every call; up to GEMV_MAX_ROWS rows gemv reads it as it
    # is, whatever K (wgmma's short K too); past them, and for a B read as it is, as before.
    for M, K, expected in [(1, 8192, "gemv"), (16, 8192, "gemv"), (16, 64, "gemv"),
                           (17, 8192, "split_k"), (17, 64, "wgmma")]:
        problem = matmul_rungs.Problem(1, M, 8192, K, numpy.dtype("float16"), "highest", 90,
                                       132, b_as_is=False)
        assert matmul_rungs.choose(problem).name == expected, (M, K)
    as_is = matmul_rungs.Problem(1, 16, 8192, 8192, numpy.dtype("float16"), "highest", 90, 132)
    assert matmul_rungs.choose(as_is).name == "split_k"


class _Stack:
    """What gemv_layout reads of a (batch, K, N) stack of 2-byte items."""

    itemsize = 2

    def __init__(self, shape, strides, address):
        self.shape, self.strides = shape, tuple(2 * s for s in strides)
        self.data = type("Data", (), {"ptr": address})()


def test_gemv_reads_b_by_its_layout():
    rows, words, columns, anyway = (matmul_rungs.GEMV_ROWS, matmul_rungs.GEMV_COLUMN_WORDS,
                                    matmul_rungs.GEMV_COLUMNS, matmul_rungs.GEMV_ANY)
    K, N = 64, 40
    layout = matmul_rungs.gemv_layout
    assert layout(_Stack((3, K, N), (K * N, N, 1), 4096)) == rows
    assert layout(_Stack((3, K, N), (K * N, N, 1), 4104)) == anyway  # rows not 16-byte aligned
    assert layout(_Stack((3, K, N), (K * N, 1, K), 4096)) == words  # W.T of a row-major W
    assert layout(_Stack((3, K, N), (K * N, 1, K), 4104)) == columns  # 8 bytes are enough
    assert layout(_Stack((1, K, N), (K * N, 1, K + 4), 4096)) == columns  # 136 bytes apart
    assert layout(_Stack((3, K, N), (K * N + 4, 1, K), 4096)) == columns  # matrices 8 bytes off
    assert layout(_Stack((3, K, N), (0, 1, K), 4096)) == words  # one W, broadcast
    assert layout(_Stack((1, 63, N), (63 * N, 1, 63), 4096)) == anyway  # columns 126 bytes apart
    assert layout(_Stack((1, K, N), (2 * K * N, 2, 2 * K), 4096)) == anyway  # every other k
    assert layout(_Stack((1, K, N), (K * N, 1, K), 4098)) == anyway
    # one matrix: its batch stride (a reshape's, of a sliced W) does not count
    assert layout(_Stack((1, K, N), (K - 1, 1, K), 4096)) == words
    assert layout(_Stack((1, K, N), (N - 1, N, 1), 4096)) == rows
    assert layout(_Stack((2, K, N), (K * N - 1, 1, K), 4096)) == anyway


@pytest.mark.parametrize("capability, expected", [(80, "mma"), (89, "mma"), (90, "wgmma"),
                                                  (100, "mma"), (120, "mma")])
def test_matmul_auto_tensor_rung_by_compute_capability(capability, expected):
    # TF32 and float16 both go to the tensor cores; wgmma's sm_90a code runs on 9.0 only.
    big = (1, 4096, 4096, 4096)  # 512 tiles of C: K stays whole
    assert matmul_rungs.choose(_problem(capability, shape=big)).name == expected
    assert matmul_rungs.choose(_problem(capability, "float16", "highest", big)).name == expected
    # A few tiles and a long K: on Hopper, split_k; elsewhere mma.
    few = _problem(capability, "float16", "highest", (1, 128, 64, 8192))
    # At most 16 rows of float16 or bfloat16 (decode steps): gemv where mma is the other
    # choice; on 9.0 gemv in split_k's place up to GEMV_HOPPER_MAX_ROWS rows, split_k past them.
    for rows in (1, 8, 9, 16):
        for dtype in ("float16", "bfloat16"):
            decode = _problem(capability, dtype, "highest", (1, rows, 8192, 8192))
            hopper = "split_k" if rows > matmul_rungs.GEMV_HOPPER_MAX_ROWS else "gemv"
            assert matmul_rungs.choose(decode).name == (hopper if expected == "wgmma"
                                                        else "gemv")
    # a short K: wgmma keeps it whole on 9.0, and gemv does not take its place there
    short_decode = _problem(capability, "float16", "highest", (1, 1, 8192, 64))
    assert matmul_rungs.choose(short_decode).name == ("wgmma" if expected == "wgmma" else "gemv")
    assert matmul_rungs.choose(_problem(capability, "float16", "highest",
                                        (1, 17, 8192, 8192))).name != "gemv"
    assert matmul_rungs.choose(_problem(capability, shape=(1, 16, 8192, 8192))).name != "gemv"
    assert matmul_rungs.choose(few).name == ("split_k" if expected == "wgmma" else "mma")
    short = _problem(capability, "float16", "highest", (1, 128, 64, 200))  # K: one slice only
    assert matmul_rungs.choose(short).name == expected
    # 1024 x 1024 has 32 wide tiles of C (one per 4 SMs): split_k only from
    # SPLIT_K_AUTO_LONG_STEPS stages of K; 1024 x 256 has 8 (one per 16 SMs): from
    # SPLIT_K_AUTO_MIN_STEPS stages.
    step = matmul_rungs.WGMMA_ROW_BYTES // 2
    for n, steps in [(1024, matmul_rungs.SPLIT_K_AUTO_LONG_STEPS),
                     (256, matmul_rungs.SPLIT_K_AUTO_MIN_STEPS)]:
        for k, hopper in [(1024, "wgmma"), (step * steps - step, "wgmma"),
                          (step * steps, "split_k")]:
            product = _problem(capability, "float16", "highest", (1, 1024, n, k))
            assert matmul_rungs.split_k_slices(product, numpy.dtype("float16"))[0] >= 2
            assert matmul_rungs.choose(product).name == (hopper if expected == "wgmma"
                                                         else "mma")
    # Past the 32-bit tensor-core kernels' extents (gemv's and the Hopper rungs'), auto stays
    # on mma, whatever M; just below them it takes what it takes at smaller sizes.
    bound = matmul_rungs.TENSOR_CORE_32_BIT_EXTENT
    assert matmul_rungs.choose(_problem(capability, shape=(1, 16, 16, 2**31))).name == "mma"
    for dtype in ("float16", floats.BFLOAT16):
        for shape in ((1, 1, 1, bound), (1, 16, 8, bound), (1, 1, bound, 8), (1, bound, 1, 8)):
            assert matmul_rungs.choose(_problem(capability, dtype, "highest", shape)).name == \
                "mma", shape
        decode = matmul_rungs.choose(_problem(capability, dtype, "highest", (1, 1, 1, bound - 1)))
        assert decode.name == "gemv"
    # Below 8.0 (no tensor cores) float16 runs on the SIMT rungs.
    assert matmul_rungs.choose(_problem(75, "float16", "highest")).name in ("warp_tiled",
                                                                              "large_tile")
    # bfloat16 as float16: the tensor cores where there are some, float32 sums elsewhere.
    bf16 = _problem(capability, floats.BFLOAT16, "highest", big)
    assert matmul_rungs.choose(bf16).name == expected
    assert matmul_rungs.choose(bf16).plan(bf16).compute == floats.BFLOAT16
    slow = matmul_rungs.LADDER["warp_tiled"].plan(bf16)
    assert slow.compute == numpy.float32 and slow.instance("int", True).startswith(
        "matmul_warp_tiled<float, ")


@pytest.mark.parametrize("shape", [(1, 128, 64, 8192), (1, 1024, 1024, 1024), (4, 64, 64, 100),
                                   (1, 8192, 8192, 8192), (1, 64, 64, 1), (3, 300, 500, 4097),
                                   (1, 16384, 128, 4096), (1, 1, 8192, 8192)])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_split_k_slices_cover_k_and_fill_the_gpu(shape, dtype):
    problem = _problem(90, dtype, "tf32" if dtype == "float32" else "highest", shape)
    step = matmul_rungs.WGMMA_ROW_BYTES // numpy.dtype(dtype).itemsize
    steps = -(-problem.K // step)
    splits, per_slice = matmul_rungs.split_k_slices(problem, numpy.dtype(dtype))
    assert (splits - 1) * per_slice < steps <= splits * per_slice  # no slice is empty
    assert 1 <= splits <= matmul_rungs.SPLIT_K_MAX_SPLITS
    assert splits == 1 or per_slice >= matmul_rungs.SPLIT_K_MIN_STEPS
    tiles = matmul_rungs.wgmma_tiles(problem)
    assert tiles * splits <= max(problem.multiprocessors, tiles)  # never past one wave
    if tiles >= problem.multiprocessors:
        assert splits == 1
    shape_ = matmul_rungs.LADDER["split_k"].plan(problem)
    assert (shape_.splits, shape_.k_steps) == (splits, per_slice)


@pytest.mark.parametrize("shape, wgmma_tile, split_k_tile", [
    ((1, 4096, 4096, 4096), (128, 256), (128, 256)),  # 512 wide tiles: 4 waves, not 8 half
    ((1, 2048, 2048, 2048), (128, 256), (128, 256)),  # 128: one wave, against two half-length
    ((1, 1024, 1024, 1024), (128, 128), (128, 256)),  # 32: 64 narrow blocks fill more SMs
    ((1, 1024, 2048, 1024), (128, 128), (128, 256)),  # 64 wide, 128 narrow, 88 of 192 columns
    ((1, 4096, 2560, 1024), (128, 256), (128, 256)),  # 320 wide (3 waves), 640 narrow (5 half),
                                                      # 448 of 192 columns (4 of 5/6)
    ((1, 2048, 2560, 1024), (128, 192), (128, 256)),  # 160 wide (2 waves), 224 of 192 (2 shorter)
    ((1, 16384, 128, 4096), (128, 128), (128, 128)),  # N = 128: as many blocks, none on zeros
    ((1, 128, 64, 8192), (128, 64), (128, 64)),       # N = 64: the narrowest tile
    ((1, 2048, 33, 2048), (128, 64), (128, 64)),
    ((1, 16384, 65, 4096), (128, 128), (128, 128)),
    ((3, 300, 129, 4097), (128, 128), (128, 192)),   # split_k: 192 columns cover N = 129
    # 128 x 192 (16-bit types) where its waves cost least: one of 96 tiles against the wide
    # tiles' one of 72; three of 384 against three of 288 (longer) or five half-length of 576
    ((1, 768, 3072, 3072), (128, 192), (128, 256)),
    ((1, 1536, 6144, 8192), (128, 192), (128, 256)),
    ((1, 8192, 192, 8192), (128, 128), (128, 192)),  # 128 tiles of 128: one short wave
    # M of at most 64: 64 rows, the two consumer warpgroups splitting the columns
    ((1, 1, 8192, 8192), (64, 128), (64, 256)),       # decode: 32 wide tiles
    ((1, 64, 100, 4096), (64, 128), (64, 128)),
    ((2, 64, 40960, 200), (64, 256), (64, 256)),      # 320 wide tiles: 3 waves, not 5 half
    ((1, 65, 8192, 8192), (128, 128), (128, 256)),
    ((1, 16, 64, 4096), (128, 64), (128, 64)),        # N of at most 64 keeps 128 rows
])
def test_hopper_tiles_by_shape(shape, wgmma_tile, split_k_tile):
    problem = _problem(90, "float16", "highest", shape)
    for name, tile in (("wgmma", wgmma_tile), ("split_k", split_k_tile)):
        planned = matmul_rungs.LADDER[name].plan(problem)
        assert planned.tile == tile, name
        assert planned.shared_mem == matmul_rungs.wgmma_shared_bytes(tile) <= 227 * 1024
        assert planned.instance("int", False) in matmul_rungs.LADDER[name].instances


@pytest.mark.parametrize("shape", [(1, 768, 3072, 3072), (1, 1536, 6144, 8192),
                                   (1, 300, 150, 4000), (1, 100, 192, 3000)])
def test_tf32_never_takes_the_16_bit_mid_tile(shape):
    # TF32's block (B read into registers) has no 192-column tile: its plans keep TF32's tiles.
    problem = _problem(90, "float32", "tf32", shape)
    for name in ("wgmma", "split_k"):
        planned = matmul_rungs.LADDER[name].plan(problem)
        assert planned.tile != matmul_rungs.WGMMA_MID_TILE, name
        assert planned.instance("int", False) in matmul_rungs.LADDER[name].instances


BF16_PROMOTIONS = [("bfloat16", "bfloat16", "bfloat16"), ("bfloat16", "float32", "float32"),
                   ("float64", "bfloat16", "float64"), ("int8", "bfloat16", "bfloat16"),
                   ("bfloat16", "bool", "bfloat16"), ("uint8", "bfloat16", "bfloat16"),
                   ("bfloat16", "float16", None), ("int32", "bfloat16", None),
                   ("bfloat16", "complex64", None), ("bfloat16", "V2", None)]


@pytest.mark.parametrize("a, b, want", BF16_PROMOTIONS)
def test_matmul_bfloat16_result_dtypes(a, b, want):
    names = {"bfloat16": floats.BFLOAT16}
    a_dtype, b_dtype = (names.get(d) or numpy.dtype(d) for d in (a, b))
    if want is None:  # no common dtype, no complex kernel, or not a number: TypeError
        with pytest.raises(TypeError):
            matmul_mod.result_dtype(a_dtype, b_dtype)
        return
    assert matmul_mod.result_dtype(a_dtype, b_dtype) == (names.get(want) or numpy.dtype(want))
    # ml_dtypes' own promotion, as NumPy applies it to arrays (NumPy's matmul loop for two
    # bfloat16 operands returns float32; PyTorch's and ours return bfloat16).
    assert numpy.result_type(a_dtype, b_dtype) == matmul_mod.result_dtype(a_dtype, b_dtype)


def test_matmul_wgmma_needs_hopper_and_32_bit_extents():
    wgmma = matmul_rungs.LADDER["wgmma"]
    with pytest.raises(ValueError, match=r"compute capability 9\.0"):
        wgmma.plan(_problem(80, shape=(1, 64, 64, 64)))
    with pytest.raises(ValueError, match=r"below 2\*\*31"):
        wgmma.plan(_problem(90, shape=(1, 2**31, 1, 8)))
    # The 32-bit kernels' bound, on every extent and every rung that has it; one below it plans.
    bound = matmul_rungs.TENSOR_CORE_32_BIT_EXTENT
    for name in ("wgmma", "split_k", "multicast", "gemv"):
        rung = matmul_rungs.LADDER[name]
        for shape in ((1, bound, 8, 8), (1, 8, bound, 8), (1, 8, 8, bound)):
            with pytest.raises(ValueError, match=r"below 2\*\*31 - 2\*\*27.*method='mma'"):
                rung.plan(_problem(90, "float16", "highest", shape))
        assert rung.plan(_problem(90, "float16", "highest", (1, 8, 8, bound - 1))).rung is rung
    assert matmul_rungs.LADDER["mma"].plan(_problem(90, "float16", "highest",
                                                    (1, 8, 8, bound))).rung.name == "mma"
    with pytest.raises(ValueError, match="precision='tf32'"):
        wgmma.plan(_problem(90, precision="highest", shape=(1, 8, 8, 8)))
    with pytest.raises(TypeError, match="float64"):
        wgmma.plan(_problem(90, "float64", "highest", (1, 8, 8, 8)))
    with pytest.raises(ValueError, match="precision='tf32' runs on the tensor-core rungs"):
        matmul_rungs.LADDER["tiled"].plan(_problem(90))


def test_matmul_multicast_takes_16_bit_types_on_hopper():
    multicast = matmul_rungs.LADDER["multicast"]
    with pytest.raises(TypeError, match="multicast rung multiplies float16 and bfloat16"):
        multicast.plan(_problem(90, "float32", "tf32", (1, 8, 8, 8)))
    with pytest.raises(ValueError, match=r"compute capability 9\.0"):
        multicast.plan(_problem(80, "float16", "highest", (1, 64, 64, 64)))
    with pytest.raises(ValueError, match=r"below 2\*\*31"):
        multicast.plan(_problem(90, "float16", "highest", (1, 2**31, 1, 8)))
    for dtype, shape in (("float16", (1, 8, 8, 8)), ("bfloat16", (3, 4096, 64, 8192))):
        problem = matmul_rungs.Problem(*shape[:1], *shape[1:], floats.BFLOAT16 if dtype ==
                                       "bfloat16" else numpy.dtype(dtype), "highest", 90, 132)
        planned = multicast.plan(problem)
        # one tile whatever the shape, in clusters of two
        assert planned.tile == matmul_rungs.MULTICAST_TILE == (128, 256)
        assert planned.cluster == matmul_rungs.MULTICAST_CLUSTER == 2
        assert planned.shared_mem == matmul_rungs.wgmma_shared_bytes((128, 256))
        assert planned.instance("int", False) in multicast.instances
    # never auto's choice
    for shape in ((1, 8192, 8192, 8192), (1, 4096, 14336, 4096), (1, 2048, 2048, 2048)):
        assert matmul_rungs.choose(_problem(90, "float16", "highest", shape)).name == "wgmma"


@pytest.mark.parametrize("requested", SUM_REQUESTS,
                         ids=[getattr(r, "__name__", "None") for r in SUM_REQUESTS])
@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES, ids=str)
def test_sum_result_dtype_mirrors_numpy(dtype, requested):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ComplexWarning for complex -> real requests
        try:
            want = numpy.sum(numpy.zeros(1, dtype), dtype=requested).dtype
        except TypeError:
            with pytest.raises(TypeError):
                reduction_mod.reduction_result_dtype("sum", dtype, requested)
            return
        assert reduction_mod.reduction_result_dtype("sum", dtype, requested) == want


def _sum_result_dtype(dtype, requested=None):
    return reduction_mod.reduction_result_dtype("sum", dtype, requested)


def test_sum_result_dtype_defaults():
    f = _sum_result_dtype
    assert f(numpy.dtype(numpy.int32)) == numpy.int64
    assert f(numpy.dtype(numpy.uint8)) == numpy.uint64
    assert f(numpy.dtype(numpy.bool_)) == numpy.int64
    assert f(numpy.dtype(numpy.float16)) == numpy.float16
    assert f(numpy.dtype(numpy.complex64)) == numpy.complex64


@pytest.mark.parametrize("dtype", [object, str, bytes, "datetime64[s]", "timedelta64[s]",
                                   [("a", "i4")]],
                         ids=["object", "str", "bytes", "datetime64", "timedelta64", "structured"])
def test_sum_result_dtype_rejects_non_numeric(dtype):
    with pytest.raises(TypeError):
        _sum_result_dtype(numpy.dtype(dtype))


def test_sum_result_dtype_rejects_object_request():
    with pytest.raises(TypeError):
        _sum_result_dtype(numpy.dtype(numpy.float32), object)


def test_sum_result_dtype_rejects_other_requests():
    for requested in ("datetime64[s]", str, "timedelta64[s]"):
        with pytest.raises(TypeError):
            _sum_result_dtype(numpy.dtype(numpy.float32), requested)


@pytest.mark.skipif(numpy.dtype(numpy.longdouble) == numpy.float64,
                    reason="longdouble is float64 here")
def test_sum_result_dtype_rejects_longdouble():
    with pytest.raises(TypeError):
        _sum_result_dtype(numpy.dtype(numpy.longdouble))
    with pytest.raises(TypeError):
        _sum_result_dtype(numpy.dtype(numpy.float32), numpy.longdouble)


AXIS_CASES = [
    (None, 3), (0, 3), (-1, 3), (2, 3), ((0, -1), 3), ((2, 0), 3), ((), 3), ((0, 1, 2), 3),
    (numpy.int64(1), 2), (3, 3), (-4, 3), ((0, 3), 3), (None, 0), ((), 0), ((0,), 0), (1, 0),
    ((0, 0), 2), ((0, -2), 2), ((1, -1, 0), 3), (1.0, 2), ((0, 1.5), 2), ("0", 2), ([0, 1], 2),
    (True, 2), ((True,), 2), (numpy.bool_(False), 2),
]


def _axis_id(case):
    axis, ndim = case.values if hasattr(case, "values") else case
    return f"{axis!r}-ndim{ndim}"


@pytest.mark.parametrize("axis, ndim", AXIS_CASES, ids=[_axis_id(c) for c in AXIS_CASES])
def test_normalize_axis_mirrors_numpy(axis, ndim):
    x = numpy.zeros((2,) * ndim)
    try:
        want = numpy.sum(x, axis=axis, keepdims=True).shape
    except Exception as exc:  # NumPy's error type is the contract
        with pytest.raises(type(exc)):
            reduction_mod.normalize_axis(axis, ndim)
        return
    got = reduction_mod.normalize_axis(axis, ndim)
    assert got == tuple(sorted(got)) and len(set(got)) == len(got)
    assert all(0 <= ax < ndim for ax in got)
    reduced = tuple(1 if ax in got else 2 for ax in range(ndim))
    assert reduced == want


def test_normalize_axis_error_types():
    with pytest.raises(numpy.exceptions.AxisError):
        reduction_mod.normalize_axis(2, 2)
    with pytest.raises(numpy.exceptions.AxisError):
        reduction_mod.normalize_axis((0, -3), 2)
    with pytest.raises(ValueError, match="duplicate"):
        reduction_mod.normalize_axis((1, -1), 2)
    with pytest.raises(TypeError):
        reduction_mod.normalize_axis(0.0, 2)


# --- references ---------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (2, 3, 4), (2, 0, 3), (2, 1, 4, 5)], ids=str)
def test_reference_transpose(shape, rng):
    x = rng.standard_normal(shape)
    got = reference.transpose(x)
    assert got.flags.c_contiguous
    numpy.testing.assert_array_equal(got, numpy.swapaxes(x, -1, -2))
    if x.ndim == 2:
        numpy.testing.assert_array_equal(got, x.T)


def _wrapped_int_sum(values, dtype):
    """Sum as Python ints, wrapped into ``dtype`` (two's complement)."""
    info = numpy.iinfo(dtype)
    total = builtins_sum(int(v) for v in values.ravel()) % (1 << info.bits)
    if info.min < 0 and total > info.max:
        total -= 1 << info.bits
    return total


builtins_sum = sum


@pytest.mark.parametrize("dtype", [d for d in SUPPORTED_DTYPES if d.kind in "iu"], ids=str)
def test_reference_sum_integers_wrap_like_numpy(dtype, rng):
    x = reference.random_array((1000,), dtype, rng)
    want_dtype = numpy.sum(x).dtype
    got, result_dtype = reference.sum(x)
    assert result_dtype == want_dtype
    assert got.dtype == want_dtype
    assert int(got) == _wrapped_int_sum(x, want_dtype), f"seed in report; dtype {dtype}"


def test_reference_sum_int64_overflow_wraps():
    big = numpy.iinfo(numpy.int64).max
    x = numpy.array([big, big, 3], dtype=numpy.int64)
    got, dtype = reference.sum(x)
    assert dtype == numpy.int64
    assert int(got) == _wrapped_int_sum(x, numpy.int64) == 1  # 2*(2^63-1)+3 = 2^64 + 1
    x32 = numpy.array([2**31 - 1, 1], dtype=numpy.int32)
    got, dtype = reference.sum(x32, dtype=numpy.int32)
    assert dtype == numpy.int32 and int(got) == -(2**31)
    u8 = numpy.full(1000, 255, dtype=numpy.uint8)
    got, dtype = reference.sum(u8)
    assert dtype == numpy.uint64 and int(got) == 255_000


def test_reference_sum_floats_are_wide():
    x = numpy.array([1.0, 2.0**-30, -1.0], dtype=numpy.float32)
    got, dtype = reference.sum(x)
    assert dtype == numpy.float32
    assert got.dtype == numpy.float64 and got == 2.0**-30
    got, dtype = reference.sum(numpy.array([1 + 2j, 3 - 1j], dtype=numpy.complex64))
    assert dtype == numpy.complex64 and got.dtype == numpy.complex128 and got == 4 + 1j
    got, dtype = reference.sum(numpy.ones(10, numpy.float16))
    assert dtype == numpy.float16 and got == 10


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES, ids=str)
def test_sum_error_bound(dtype):
    bound = [reference.sum_error_bound(numpy.ones(n, dtype), numpy.sum(numpy.ones(1, dtype)).dtype)
             for n in (1, 10, 1000, 100_000)]
    if dtype.kind in "biu":
        assert bound == [0.0] * 4
    else:
        assert all(b > 0 for b in bound), bound
        assert all(b1 < b2 for b1, b2 in itertools.pairwise(bound)), bound
        assert bound[-1] < 100_000  # the bound says something: far below the sum itself
    assert reference.sum_error_bound(numpy.ones(0, dtype), numpy.float32) == 0.0


def test_sum_error_bound_is_looser_for_float32_than_float64():
    x = numpy.ones(1000)
    assert reference.sum_error_bound(x, numpy.float32) > reference.sum_error_bound(x, numpy.float64)


@pytest.mark.parametrize("a_shape, b_shape", [((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)),
                                              ((2, 3, 4), (4, 5)), ((1, 1), (1, 1)),
                                              ((3, 0), (0, 2))], ids=str)
def test_matmul_error_bound_shape(a_shape, b_shape, rng):
    a, b = rng.uniform(-1, 1, a_shape), rng.uniform(-1, 1, b_shape)
    for dtype in (numpy.float32, numpy.float64):
        bound = reference.matmul_error_bound(a, b, dtype)
        assert bound.shape == numpy.matmul(a, b).shape
        assert numpy.all(bound >= 0)
    if a.size and b.size:
        assert numpy.all(reference.matmul_error_bound(a, b, numpy.float32)
                         > reference.matmul_error_bound(a, b, numpy.float64))


def test_reference_matmul_is_float64():
    a = numpy.ones((2, 3), numpy.float32)
    got = reference.matmul(a, a.T)
    assert got.dtype == numpy.float64
    numpy.testing.assert_array_equal(got, numpy.full((2, 2), 3.0))


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(64, 33), (1000,), (3, 5, 7)], ids=str)
def test_random_array(dtype, shape, rng):
    x = reference.random_array(shape, dtype, rng)
    assert x.dtype == dtype and x.shape == shape
    assert numpy.any(x != 0), "random_array returned all zeros"
    if dtype.kind in "fc":
        parts = (x.real, x.imag) if dtype.kind == "c" else (x,)
        for part in parts:
            assert numpy.all(numpy.abs(part) <= 1)
            assert numpy.all(numpy.isfinite(part))
            assert len(numpy.unique(part)) > part.size // 2  # not integer-valued
    if dtype.kind == "b":
        assert numpy.any(x) and not numpy.all(x)
    if dtype.kind in "iu" and x.size >= 1000:  # spans the dtype's full range
        info = numpy.iinfo(dtype)
        quarter = (int(info.max) - int(info.min)) // 4
        assert int(x.min()) < int(info.min) + quarter and int(x.max()) > int(info.max) - quarter


@pytest.mark.parametrize("dtype", [d for d in SUPPORTED_DTYPES if d.kind in "fc"], ids=str)
def test_random_array_integer_valued(dtype, rng):
    x = reference.random_array((2000,), dtype, rng, integer_valued=True)
    assert x.dtype == dtype and x.shape == (2000,)
    parts = (x.real, x.imag) if dtype.kind == "c" else (x,)
    for part in parts:
        assert numpy.all(part == numpy.round(part))
        assert part.min() >= -8 and part.max() <= 8
        assert part.min() < 0 < part.max()
    assert numpy.any(x != 0)


def test_random_array_returns_arrays_for_0d_shapes():
    for dtype in (numpy.bool_, numpy.int32, numpy.float32, numpy.complex64):
        x = reference.random_array((), dtype, numpy.random.default_rng(0))
        assert isinstance(x, numpy.ndarray) and x.shape == () and x.dtype == dtype


def test_random_array_uses_the_generator():
    a = reference.random_array((100,), numpy.float32, numpy.random.default_rng(7))
    b = reference.random_array((100,), numpy.float32, numpy.random.default_rng(7))
    c = reference.random_array((100,), numpy.float32, numpy.random.default_rng(8))
    numpy.testing.assert_array_equal(a, b)
    assert not numpy.array_equal(a, c)


# --- the package imports and reports the device state -------------------------------------------

def test_import_without_gpu_does_not_compile():
    # gpukernels is already imported (conftest); on a machine without a GPU nothing was compiled.
    from gpukernels._core import compile as _compile

    if not GPU:
        groups = [g for s in _compile.SOURCES.values() for g in s.groups]
        assert groups and all(not g._modules for g in groups)
        with pytest.raises(gk.NoGPUError):
            _compile.SOURCES["transpose/transpose.cu"].groups[0].module()
