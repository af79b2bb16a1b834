"""Finding the GPU and turning user inputs into CuPy arrays, with clear errors.

CuPy is an optional dependency (the ``cuda12``/``cuda13`` extras): ``import gpukernels`` works
without it, and without a GPU; the first call that needs one raises :class:`NoGPUError`, which
says what went wrong and what still works without a GPU.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import Any

import numpy

try:
    import cupy
except ImportError as _error:  # the package imports without CuPy; calls explain what to install
    cupy = None
    _CUPY_IMPORT_ERROR: ImportError | None = _error
else:
    _CUPY_IMPORT_ERROR = None

__all__ = ["NoGPUError", "torch_on_gpu", "as_device_array", "check_same_device", "gpu_available", "require_gpu",
           "compute_capability", "multiprocessor_count", "check_alignment"]

# DLPack device types that name memory a CUDA kernel can read (kDLCUDA, kDLCUDAManaged).
_DLPACK_CUDA_DEVICES = (2, 13)

#: What works on a machine without a GPU, for the messages that say there is none.
WITHOUT_GPU = ("Without a GPU, gpukernels still imports: gk.describe(...) shows each rung's "
               "summary and CUDA source, 'python -m gpukernels describe' and 'plot' work, and "
               "the test suite runs its CPU half (NVRTC compiles of every kernel).")


class NoGPUError(RuntimeError):
    """Raised when a call needs a CUDA GPU and CuPy cannot reach one."""


def _describe_runtime_error(exc: Exception) -> str:
    """CUDA's own wording for a missing driver or device, in the user's terms."""
    text = str(exc)
    if "cudaErrorInsufficientDriver" in text or "driver version is insufficient" in text:
        return ("no usable NVIDIA driver was found (CUDA reports 'driver version is "
                "insufficient', which is also what it says when no driver is installed); "
                "install the NVIDIA driver, or a newer one for this CUDA version")
    if "cudaErrorNoDevice" in text or "no CUDA-capable device" in text:
        return "the NVIDIA driver sees no CUDA device"
    return f"CuPy found no usable CUDA device ({text})"


@functools.cache
def _gpu_status() -> str | None:
    """None when a GPU is usable, else a sentence saying why not (cached for the process)."""
    if cupy is None:
        error = _CUPY_IMPORT_ERROR
        if isinstance(error, ModuleNotFoundError) and error.name == "cupy":
            return ("CuPy is not installed: install gpukernels with the extra matching your "
                    "CUDA driver, e.g. pip install 'gpukernels[cuda13]' (or [cuda12])")
        return f"CuPy is installed but failed to import ({type(error).__name__}: {error})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError when there is no driver or no device
        return _describe_runtime_error(exc)
    if count == 0:
        return "the NVIDIA driver sees no CUDA device"
    return None


def gpu_available() -> bool:
    """Whether CuPy is installed and sees at least one CUDA device.

    Examples
    --------
    >>> import gpukernels as gk
    >>> isinstance(gk.gpu_available(), bool)
    True
    """
    return _gpu_status() is None


def require_gpu() -> None:
    """Raise :class:`NoGPUError` unless a CUDA device is usable.

    A failed import of CuPy is kept as the error's cause.
    """
    status = _gpu_status()
    if status is not None:
        raise NoGPUError(f"gpukernels needs a CUDA GPU for this: {status}. {WITHOUT_GPU}") \
            from _CUPY_IMPORT_ERROR


@functools.cache
def _multiprocessor_count(device_id: int) -> int:
    return int(cupy.cuda.Device(device_id).attributes["MultiProcessorCount"])


def multiprocessor_count() -> int:
    """Number of streaming multiprocessors of the current device."""
    return _multiprocessor_count(cupy.cuda.runtime.getDevice())


@functools.cache
def _compute_capability(device_id: int) -> int:
    return int(cupy.cuda.Device(device_id).compute_capability)


def compute_capability(device_id: int | None = None) -> int:
    """Compute capability of a device (the current one by default) as one number: 90 for sm_90."""
    return _compute_capability(cupy.cuda.runtime.getDevice() if device_id is None else device_id)


def check_alignment(x: Any, name: str) -> Any:
    """Refuse data whose address is not a multiple of its element's alignment (a byte-offset
    view exported by another library): the kernels' loads would fault on it."""
    alignment = min(x.dtype.itemsize, 8)
    if alignment > 1 and x.size and x.data.ptr % alignment:
        raise ValueError(
            f"{name}'s data starts at an address that is not a multiple of {alignment} bytes, "
            f"which {x.dtype} elements need; copy it into a fresh array first"
        )
    return x


def _as_cupy(x: Any, name: str) -> Any:
    """``x`` (not a CuPy array) as one, without a copy, or TypeError saying how to fix it."""
    if isinstance(x, (numpy.ndarray, numpy.generic)):
        raise TypeError(
            f"{name} is a host (NumPy) array; gpukernels works on GPU arrays. "
            f"Move it to the GPU first with cupy.asarray({name})."
        )
    if isinstance(x, (list, tuple, int, float, complex, bool)):
        raise TypeError(
            f"{name} is a Python {type(x).__name__}; gpukernels works on GPU arrays. "
            f"Create one with cupy.asarray({name})."
        )
    # __cuda_array_interface__ cannot name bfloat16 (torch exports it as a 2-byte void, "<V2"):
    # such an object goes through DLPack when it has it, which names it.
    if hasattr(x, "__cuda_array_interface__") and not (
            hasattr(x, "__dlpack__") and x.__cuda_array_interface__.get("typestr", "")[1:] == "V2"):
        require_gpu()
        return cupy.asarray(x)
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        device_type, _ = x.__dlpack_device__()
        if int(device_type) not in _DLPACK_CUDA_DEVICES:
            raise TypeError(
                f"{name} is a DLPack tensor in host memory (device type {int(device_type)}); "
                "gpukernels works on GPU arrays. Move it to a CUDA device first."
            )
        require_gpu()
        return cupy.from_dlpack(x)
    raise TypeError(
        f"{name} must be a CuPy array or a GPU array exposing __cuda_array_interface__ or "
        f"DLPack, not {type(x).__module__}.{type(x).__qualname__}."
    )


def as_device_array(x: Any, name: str = "x") -> Any:
    """Return ``x`` as a CuPy array without copying, or raise TypeError saying how to fix it.

    Accepts CuPy arrays and any object exposing ``__cuda_array_interface__`` or DLPack on a CUDA
    device. Host data (NumPy arrays, Python sequences and scalars, CPU DLPack tensors) is refused:
    gpukernels never moves data between host and device behind the caller's back.
    """
    if cupy is None or not isinstance(x, cupy.ndarray):
        x = _as_cupy(x, name)
    return check_alignment(x, name)


def check_same_device(*named_arrays: tuple[str, Any]) -> None:
    """Raise ValueError unless every array lives on the same device."""
    devices = {name: array.device.id for name, array in named_arrays}
    if len(set(devices.values())) > 1:
        where = ", ".join(f"{name} on GPU {dev}" for name, dev in devices.items())
        raise ValueError(
            f"arrays are on different devices ({where}); copy them to one device first "
            "(with cupy.cuda.Device(i): cupy.asarray(...))."
        )


def torch_on_gpu() -> Any:
    """PyTorch, if it imports and sees the GPU (an optional benchmark peer); None otherwise."""
    if importlib.util.find_spec("torch") is None:
        return None
    try:
        import torch
    except Exception:  # a broken install is the same as none, for a benchmark
        return None
    return torch if torch.cuda.is_available() else None
