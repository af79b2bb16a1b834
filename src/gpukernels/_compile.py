"""Loading the CUDA sources in ``kernels/`` and compiling them with NVRTC.

Each source file is one *kernel family* (``transpose.cu``, ``matmul.cu``, ``reduce.cu``). The
operation modules declare, per family, the template instances they launch (the
``name_expressions``); this module compiles each family once per device through
:class:`cupy.RawModule`, whose on-disk cache makes later imports cheap. The same preprocessed
source and instance list can be compiled for any architecture without a GPU
(:func:`compile_for_arch`), which is how the test suite checks every instance on CI.
"""

from __future__ import annotations

import functools
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

from . import _device

__all__ = ["KernelCompileError", "KernelFamily", "FAMILIES", "kernel_dir", "compile_for_arch"]

# Compiler options for every family. -lineinfo (GPUKERNELS_LINEINFO=1) lets compute-sanitizer
# name source lines; it changes the options, so CuPy caches those binaries separately.
_BASE_OPTIONS = ("-std=c++17",)
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$')


class KernelCompileError(RuntimeError):
    """NVRTC rejected a source in ``kernels/``; the message holds the file and NVRTC's log."""


def kernel_dir() -> Path:
    """The directory holding the ``.cu``/``.cuh`` sources.

    In an installed wheel they sit inside the package (``gpukernels/kernels``); in a source
    checkout (including editable installs) they are the repository's top-level ``kernels/``.
    """
    here = Path(__file__).resolve().parent
    for candidate in (here / "kernels", here.parent.parent / "kernels"):
        if (candidate / "common.cuh").is_file():
            return candidate
    raise FileNotFoundError(
        f"gpukernels cannot find its CUDA sources: looked in {here / 'kernels'} and "
        f"{here.parent.parent / 'kernels'}. Reinstall the package."
    )


def _inline(path: Path, seen: frozenset[Path] = frozenset()) -> str:
    """The text of ``path`` with every ``#include "local.cuh"`` replaced by that file.

    ``#line`` markers keep NVRTC's error messages pointing at the original file and line. CuPy
    hashes the source text to key its binary cache, so an edited header changes the key too.
    """
    if path in seen:
        raise KernelCompileError(f"{path.name} includes itself")
    out = [f'#line 1 "{path.name}"']
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        match = _INCLUDE.match(line)
        if match:
            out.append(_inline(path.parent / match.group(1), seen | {path}))
            out.append(f'#line {number + 1} "{path.name}"')
        else:
            out.append(line)
    return "\n".join(out) + "\n"


@functools.cache
def load_source(filename: str) -> str:
    """The preprocessed source of ``kernels/<filename>``, headers inlined."""
    return _inline(kernel_dir() / filename)


def compile_options() -> tuple[str, ...]:
    """Options for NVRTC, the same on the device and in the CPU-side compile test."""
    lineinfo = ("-lineinfo",) if os.environ.get("GPUKERNELS_LINEINFO") == "1" else ()
    return _BASE_OPTIONS + lineinfo


@dataclass
class KernelFamily:
    """One source file in ``kernels/`` and the template instances the library launches from it.

    Parameters
    ----------
    filename : str
        The source file, e.g. ``"transpose.cu"``.
    instances : list of str
        C++ name expressions, e.g. ``"transpose_shared<unsigned int, int, 32, 8>"``; each is
        compiled and retrievable with :meth:`function`.
    arch : str, optional
        The one architecture the family is built for, e.g. ``"sm_90a"`` for kernels that use
        Hopper-only instructions; such a family compiles only on a GPU of that compute
        capability. By default a family compiles for whichever GPU is current.
    """

    filename: str
    instances: list[str]
    arch: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _modules: dict = field(default_factory=dict, repr=False)  # device id -> RawModule
    _functions: dict = field(default_factory=dict, repr=False)  # (device id, name) -> RawKernel

    def module(self):
        """The compiled :class:`cupy.RawModule` for the current device (compiled on first use)."""
        _device.require_gpu()
        cupy = _device.cupy
        device = cupy.cuda.runtime.getDevice()
        module = self._modules.get(device)
        if module is None:
            with self._lock:  # one compile per device, whichever thread gets here first
                module = self._modules.get(device)
                if module is None:
                    self.check_device(device)
                    module = cupy.RawModule(
                        code=load_source(self.filename),
                        options=compile_options() + self.arch_options(),
                        name_expressions=list(self.instances),
                    )
                    try:
                        module.compile()
                    except cupy.cuda.compiler.CompileException as exc:
                        raise KernelCompileError(
                            f"NVRTC could not compile kernels/{self.filename} for GPU {device}:\n"
                            f"{exc}"
                        ) from None
                    self._modules[device] = module
        return module

    def arch_options(self) -> tuple[str, ...]:
        """``("-arch=<arch>",)`` for a family built for one architecture, else ``()``."""
        return (f"-arch={self.arch}",) if self.arch else ()

    def runs_on(self, compute_capability: int) -> bool:
        """Whether the family's kernels run on a GPU of this compute capability (e.g. 90)."""
        return self.arch is None or int(self.arch[3:].rstrip("a")) == int(compute_capability)

    def check_device(self, device: int) -> None:
        """Raise ValueError if GPU ``device`` cannot run this family's kernels."""
        capability = int(_device.cupy.cuda.Device(device).compute_capability)
        if not self.runs_on(capability):
            raise ValueError(
                f"kernels/{self.filename} is built for {self.arch} only; GPU {device} has "
                f"compute capability {capability}"
            )

    def function(self, name: str):
        """The kernel ``name`` (one of :attr:`instances`) for the current device."""
        _device.require_gpu()
        device = _device.cupy.cuda.runtime.getDevice()
        kernel = self._functions.get((device, name))
        if kernel is None:
            if name not in self.instances:
                raise KeyError(f"{name!r} is not an instance compiled from kernels/{self.filename}")
            kernel = self.module().get_function(name)
            self._functions[(device, name)] = kernel
        return kernel


#: Every kernel family, by file name; the operation modules register theirs at import.
FAMILIES: dict[str, KernelFamily] = {}


def register(filename: str, instances: list[str], arch: str | None = None) -> KernelFamily:
    """Create and register the family for ``kernels/<filename>`` (``arch``: see KernelFamily)."""
    family = KernelFamily(filename, instances, arch)
    FAMILIES[filename] = family
    return family


def kernel_names() -> dict[int, str]:
    """id(kernel) -> "file:instance" for every kernel fetched so far, on any device."""
    return {id(kernel): f"{family.filename}:{name}"
            for family in FAMILIES.values() for (_, name), kernel in family._functions.items()}


def compile_all_for_current_device() -> None:
    """Compile (or load from CuPy's cache) every family the current device can run."""
    capability = int(_device.cupy.cuda.Device().compute_capability)
    for family in FAMILIES.values():
        if family.runs_on(capability):
            family.module()


@dataclass(frozen=True)
class NvrtcResult:
    """What :func:`compile_for_arch` produced: the cubin, NVRTC's log and the lowered names."""

    cubin: bytes
    log: str
    lowered_names: dict[str, str]


def compile_for_arch(family: KernelFamily, arch: str) -> NvrtcResult:
    """Compile a family to a cubin for ``arch`` (e.g. ``"sm_90"``) with NVRTC, no GPU needed.

    Uses the NVRTC library that CuPy loads (the ``nvidia-cuda-nvrtc`` wheel or the toolkit's), with
    the same source and options as the runtime path. Raises :class:`KernelCompileError` with the
    log on failure.
    """
    from cupy_backends.cuda.libs import nvrtc

    source = load_source(family.filename)
    program = nvrtc.createProgram(source, family.filename, [], [])
    try:
        for name in family.instances:
            nvrtc.addNameExpression(program, name)
        options = list(compile_options()) + [f"-arch={arch}"]
        try:
            nvrtc.compileProgram(program, options)
        except nvrtc.NVRTCError as exc:
            log = nvrtc.getProgramLog(program)
            raise KernelCompileError(
                f"NVRTC could not compile kernels/{family.filename} for {arch} ({exc}):\n{log}"
            ) from None
        lowered = {name: nvrtc.getLoweredName(program, name) for name in family.instances}
        return NvrtcResult(nvrtc.getCUBIN(program), nvrtc.getProgramLog(program), lowered)
    finally:
        nvrtc.destroyProgram(program)
