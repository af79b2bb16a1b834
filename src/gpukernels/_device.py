"""Finding the GPU and turning user inputs into CuPy arrays, with clear errors.

CuPy is an optional dependency (the ``cuda12``/``cuda13`` extras): ``import gpukernels`` works
without it, and without a GPU; the first call that needs one raises :class:`NoGPUError`.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy

try:
    import cupy
except ImportError:  # the package imports without CuPy; calls explain what to install
    cupy = None

__all__ = ["NoGPUError", "as_device_array", "check_same_device", "gpu_available", "require_gpu"]

# DLPack device types that name memory a CUDA kernel can read (kDLCUDA, kDLCUDAManaged).
_DLPACK_CUDA_DEVICES = (2, 13)


class NoGPUError(RuntimeError):
    """Raised when a call needs a CUDA GPU and CuPy cannot reach one."""


@functools.cache
def _gpu_status() -> str | None:
    """None when a GPU is usable, else a sentence saying why not (cached for the process)."""
    if cupy is None:
        return (
            "CuPy is not installed: install gpukernels with the extra matching your CUDA "
            "toolkit, e.g. pip install 'gpukernels[cuda13]'"
        )
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError when there is no driver or no device
        return f"CuPy found no usable CUDA device ({exc})"
    if count == 0:
        return "CuPy found no CUDA device"
    return None


def gpu_available() -> bool:
    """Whether CuPy is installed and sees at least one CUDA device."""
    return _gpu_status() is None


def require_gpu() -> None:
    """Raise :class:`NoGPUError` unless a CUDA device is usable."""
    status = _gpu_status()
    if status is not None:
        raise NoGPUError(f"gpukernels needs a CUDA GPU: {status}.")


def check_alignment(x, name: str):
    """Refuse data whose address is not a multiple of its element's alignment (a byte-offset
    view exported by another library): the kernels' loads would fault on it."""
    alignment = min(x.dtype.itemsize, 8)
    if x.size and x.data.ptr % alignment:
        raise ValueError(
            f"{name}'s data starts at an address that is not a multiple of {alignment} bytes, "
            f"which {x.dtype} elements need; copy it into a fresh array first"
        )
    return x


def as_device_array(x: Any, name: str = "x") -> "cupy.ndarray":
    """Return ``x`` as a CuPy array without copying, or raise TypeError saying how to fix it.

    Accepts CuPy arrays and any object exposing ``__cuda_array_interface__`` or DLPack on a CUDA
    device. Host data (NumPy arrays, Python sequences and scalars, CPU DLPack tensors) is refused:
    gpukernels never moves data between host and device behind the caller's back.
    """
    if cupy is not None and isinstance(x, cupy.ndarray):
        return check_alignment(x, name)
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
    if hasattr(x, "__cuda_array_interface__"):
        require_gpu()
        return check_alignment(cupy.asarray(x), name)
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        device_type, _ = x.__dlpack_device__()
        if int(device_type) not in _DLPACK_CUDA_DEVICES:
            raise TypeError(
                f"{name} is a DLPack tensor in host memory (device type {int(device_type)}); "
                "gpukernels works on GPU arrays. Move it to a CUDA device first."
            )
        require_gpu()
        return check_alignment(cupy.from_dlpack(x), name)
    raise TypeError(
        f"{name} must be a CuPy array or a GPU array exposing __cuda_array_interface__ or "
        f"DLPack, not {type(x).__module__}.{type(x).__qualname__}."
    )


def check_same_device(*named_arrays: tuple[str, "cupy.ndarray"]) -> None:
    """Raise ValueError unless every array lives on the same device."""
    devices = {name: array.device.id for name, array in named_arrays}
    if len(set(devices.values())) > 1:
        where = ", ".join(f"{name} on GPU {dev}" for name, dev in devices.items())
        raise ValueError(
            f"arrays are on different devices ({where}); copy them to one device first "
            "(with cupy.cuda.Device(i): cupy.asarray(...))."
        )
