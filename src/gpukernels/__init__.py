"""gpukernels: hand-written CUDA kernels for transpose, matmul and reduction, callable from Python.

Each operation is a ladder of kernels, from the textbook version to faster rungs; pick one with
``method=`` or let ``"auto"`` choose. Inputs are CuPy arrays (or any GPU array exposing
``__cuda_array_interface__`` or DLPack); results follow NumPy's semantics.

>>> import cupy, gpukernels as gk
>>> x = cupy.random.rand(1000, 3000, dtype=cupy.float32)
>>> bool((gk.transpose(x) == x.T).all())
True
>>> gk.methods("matmul")
('naive', 'tiled', 'blocked_1d', 'blocked_2d', 'warp_tiled', 'large_tile', 'mma', 'wgmma')
"""

from ._common import methods
from ._compile import KernelCompileError
from ._device import NoGPUError, gpu_available
from .ops.matmul import matmul
from .ops.reduce import max, min, prod, sum
from .ops.transpose import transpose
from .introspect import describe

__all__ = ["transpose", "matmul", "sum", "prod", "min", "max", "methods", "gpu_available", "KernelCompileError",
           "NoGPUError", "__version__"]
__version__ = "0.1.0"
__all__.append("describe")


def _compile_at_import() -> None:
    # Compile every kernel family for the current device now (CuPy's disk cache makes this a
    # cubin load after the first time), so a broken kernel fails at import, not mid-computation.
    # Without a GPU there is nothing to compile for; calls then raise NoGPUError.
    from . import _compile

    if gpu_available():
        _compile.compile_all_for_current_device()


_compile_at_import()
