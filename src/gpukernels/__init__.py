"""gpukernels: hand-written CUDA kernels for transpose, matmul, reductions and scans, callable from
Python.

Each operation is a ladder of kernels, from the textbook version to faster rungs; pick one with
``method=`` or let ``"auto"`` choose. Inputs are CuPy arrays (or any GPU array exposing
``__cuda_array_interface__`` or DLPack); results follow NumPy's semantics.

>>> import cupy, gpukernels as gk
>>> x = cupy.random.rand(1000, 3000, dtype=cupy.float32)
>>> bool((gk.transpose(x) == x.T).all())
True
>>> gk.methods("matmul")
('naive', 'tiled', 'blocked_1d', 'blocked_2d', 'warp_tiled', 'large_tile', 'mma', 'wgmma',
 'split_k', 'gemv', 'multicast')
"""

from importlib.metadata import PackageNotFoundError, version

from ._core.compile import KernelCompileError
from ._core.device import NoGPUError, gpu_available
from ._core.ladder import methods
from .introspect import describe
from .ops.argreduce import argmax, argmin
from .ops.matmul import matmul
from .ops.moments import mean, std, var
from .ops.permute import permute_dims
from .ops.reduce import max, min, prod, sum
from .ops.scan import cumprod, cumsum
from .ops.transpose import transpose

__all__ = ["transpose", "permute_dims", "matmul", "sum", "prod", "min", "max", "mean", "var",
           "std", "argmin", "argmax", "cumsum", "cumprod", "methods", "describe",
           "gpu_available", "KernelCompileError", "NoGPUError", "__version__"]

try:
    __version__ = version("gpukernels")
except PackageNotFoundError:  # a source tree on sys.path, not installed
    __version__ = "0+unknown"


def _compile_at_import() -> None:
    # Compile (or load from CuPy's cache) every eager kernel group for the current device now,
    # in parallel threads, so a broken kernel fails at import, not mid-computation. Without a
    # GPU there is nothing to compile for; calls then raise NoGPUError.
    from ._core import compile as _compile

    if gpu_available():
        _compile.compile_at_import()


_compile_at_import()
