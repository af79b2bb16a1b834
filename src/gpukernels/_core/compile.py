"""Loading the CUDA sources in ``kernels/`` and compiling them with NVRTC.

Each ``.cu`` file is a :class:`KernelSource`. The rungs that launch its kernels add their
template instances to it in *groups*; each group is one NVRTC program (one
:class:`cupy.RawModule`), compiled once per device and kept by CuPy's on-disk cache, so later
imports only load binaries. At import, :func:`compile_at_import` compiles the *eager* groups of
every source the device can run, several at a time in threads (NVRTC releases the GIL). Groups
that few calls need (64-bit index instances, integer products) are *lazy*: each of their
instances compiles alone (an NVRTC program of its own) on the first call that launches it,
under a lock, still through the cache, so a first call waits for its own kernels only.

The same preprocessed source and instance list can be compiled for any architecture without a
GPU (:func:`compile_for_arch`), which is how the test suite checks every instance on CI.
"""

from __future__ import annotations

import concurrent.futures
import functools
import hashlib
import os
import re
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import device as _device

__all__ = ["KernelCompileError", "KernelSource", "InstanceGroup", "SOURCES", "kernel_dir",
           "load_source", "compile_options", "compile_at_import", "compile_for_arch",
           "CompileReport"]

# Compiler options for every source. -lineinfo (GPUKERNELS_LINEINFO=1) lets compute-sanitizer
# name source lines; it changes the options, so CuPy caches those binaries separately.
_BASE_OPTIONS = ("-std=c++17",)
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$')
#: A cold compile that has run this long shows a progress line on stderr.
PROGRESS_AFTER_SECONDS = 1.5


class KernelCompileError(RuntimeError):
    """NVRTC rejected a source in ``kernels/``; the message holds the file and NVRTC's log."""


def kernel_dir() -> Path:
    """The directory holding the ``.cu``/``.cuh`` sources.

    In an installed wheel they sit inside the package (``gpukernels/kernels``); in a source
    checkout (including editable installs) they are the repository's top-level ``kernels/``.
    """
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "kernels", here.parent.parent / "kernels"):
        if (candidate / "common.cuh").is_file():
            return candidate
    raise FileNotFoundError(
        f"gpukernels cannot find its CUDA sources: looked in {here / 'kernels'} and "
        f"{here.parent.parent / 'kernels'}. Reinstall the package."
    )


def _inline(path: Path, root: Path, inlined: set[Path], including: frozenset[Path] = frozenset()
            ) -> str:
    """The text of ``path`` with every ``#include "local.cuh"`` replaced by that file.

    ``#line`` markers keep NVRTC's error messages pointing at the original file and line. CuPy
    hashes the source text to key its binary cache, so an edited header changes the key too.
    Each header is inlined once per source (``inlined`` holds those already in), as if every
    header said ``#pragma once``: a header may include what it uses.
    """
    name = path.relative_to(root).as_posix()
    if path in including:
        raise KernelCompileError(f"{name} includes itself")
    out = [f'#line 1 "{name}"']
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        match = _INCLUDE.match(line)
        if match:
            included = (path.parent / match.group(1)).resolve()
            if included not in inlined:
                inlined.add(included)
                out.append(_inline(included, root, inlined, including | {path}))
            out.append(f'#line {number + 1} "{name}"')
        else:
            out.append(line)
    return "\n".join(out) + "\n"


@functools.cache
def load_source(path: str) -> str:
    """The preprocessed source of ``kernels/<path>``, headers inlined."""
    root = kernel_dir().resolve()
    return _inline((root / path).resolve(), root, set())


def compile_options() -> tuple[str, ...]:
    """Options for NVRTC, the same on the device and in the CPU-side compile test."""
    lineinfo = ("-lineinfo",) if os.environ.get("GPUKERNELS_LINEINFO") == "1" else ()
    return _BASE_OPTIONS + lineinfo


@dataclass(eq=False)
class InstanceGroup:
    """Template instances of one source compiled together: one NVRTC program per device.

    Attributes
    ----------
    source : KernelSource
    name : str
        A label, e.g. ``"naive int"``; shown in compile reports.
    instances : tuple of str
        C++ name expressions, e.g. ``"transpose_shared<unsigned int, int, 32, 8>"``.
    eager : bool
        Compiled at import, as one NVRTC program (True), or instance by instance, each on its
        first launch (False).
    capabilities : range, optional
        Where ``eager``, the compute capabilities whose import compiles the group (every one by
        default); on other devices it compiles on first use, e.g. a rung that ``auto`` takes
        only on older GPUs.
    """

    source: KernelSource
    name: str
    instances: tuple[str, ...]
    eager: bool = True
    capabilities: range | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _modules: dict = field(default_factory=dict, repr=False)  # device id -> RawModule
    # (device id, instance) -> RawModule of that instance alone (first use of a lazy group)
    _instance_modules: dict = field(default_factory=dict, repr=False)

    def compiled(self, device: int) -> bool:
        """Whether any of the group's instances is compiled (or loaded) for ``device``."""
        return device in self._modules or any(d == device for d, _ in self._instance_modules)

    def compiled_instances(self, device: int) -> tuple[str, ...]:
        """The group's instances compiled (or loaded) for ``device``."""
        if device in self._modules:
            return self.instances
        return tuple(i for i in self.instances if (device, i) in self._instance_modules)

    def eager_on(self, capability: int) -> bool:
        """Whether the import compiles the group on a device of ``capability`` (e.g. 90)."""
        return self.eager and (self.capabilities is None or capability in self.capabilities)

    def module(self, device: int | None = None) -> Any:
        """The compiled :class:`cupy.RawModule` for ``device`` (the current one by default)."""
        _device.require_gpu()
        cupy = _device.cupy
        if device is None:
            device = cupy.cuda.runtime.getDevice()
        module = self._modules.get(device)
        if module is None:
            with self._lock:  # one compile per device, whichever thread gets here first
                module = self._modules.get(device)
                if module is None:
                    module = self._compile(device)
                    self._modules[device] = module
        return module

    def function(self, instance: str, device: int) -> Any:
        """The kernel ``instance`` of this group for ``device``: from the group's module where
        the import compiles the group (loaded from CuPy's cache after a marked import), else
        from a module of that instance alone, compiled on its first use."""
        if device in self._modules or self.eager_on(_device.compute_capability(device)):
            return self.module(device).get_function(instance)
        key = (device, instance)
        module = self._instance_modules.get(key)
        if module is None:
            with self._lock:
                module = self._instance_modules.get(key)
                if module is None:
                    module = self._compile(device, (instance,))
                    self._instance_modules[key] = module
        return module.get_function(instance)

    def _compile(self, device: int, instances: tuple[str, ...] | None = None) -> Any:
        cupy = _device.cupy
        self.source.check_device(device)
        instances = self.instances if instances is None else instances
        start = time.perf_counter()
        with cupy.cuda.Device(device):
            module = cupy.RawModule(code=load_source(self.source.path),
                                    options=compile_options() + self.source.arch_options(),
                                    name_expressions=list(instances))
            try:
                module.compile()
            except cupy.cuda.compiler.CompileException as exc:
                raise KernelCompileError(
                    f"NVRTC could not compile kernels/{self.source.path} ({self.name}) for GPU "
                    f"{device}:\n{exc}"
                ) from None
        REPORT.record(self, instances, time.perf_counter() - start)
        return module


class KernelSource:
    """One ``.cu`` file in ``kernels/`` and the instances the library launches from it.

    Parameters
    ----------
    path : str
        The file, relative to ``kernels/``, e.g. ``"transpose/transpose.cu"``.
    arch : str, optional
        The one architecture the source is built for, e.g. ``"sm_90a"`` for kernels that use
        Hopper-only instructions; such a source compiles only on a GPU of that compute
        capability. By default a source compiles for whichever GPU is current.
    weight : float
        Compile time of an instance relative to others: the heaviest groups start first.
    """

    def __init__(self, path: str, arch: str | None = None, *, weight: float = 1.0) -> None:
        self.path = path
        self.arch = arch
        self.weight = weight
        self.groups: list[InstanceGroup] = []
        self._group_of: dict[str, InstanceGroup] = {}
        self._functions: dict[tuple[int, str], Any] = {}  # (device, instance) -> RawKernel
        SOURCES[path] = self

    def __repr__(self) -> str:
        return f"KernelSource({self.path!r}, {len(self.instances)} instances)"

    @property
    def name(self) -> str:
        """The file name, e.g. ``"transpose.cu"``."""
        return Path(self.path).name

    def add(self, name: str, instances: Iterable[str], *, eager: bool = True,
            capabilities: range | None = None) -> InstanceGroup:
        """Add a group of instances (duplicates of earlier groups are left out); see
        :class:`InstanceGroup` for ``eager`` and ``capabilities``."""
        fresh = tuple(dict.fromkeys(i for i in instances if i not in self._group_of))
        group = InstanceGroup(self, name, fresh, eager, capabilities)
        if fresh:
            self.groups.append(group)
            for instance in fresh:
                self._group_of[instance] = group
        return group

    @property
    def instances(self) -> tuple[str, ...]:
        """Every instance of every group, in the order they were added."""
        return tuple(self._group_of)

    def group_of(self, instance: str) -> InstanceGroup:
        try:
            return self._group_of[instance]
        except KeyError:
            raise KeyError(f"{instance!r} is not an instance compiled from kernels/{self.path}") \
                from None

    def arch_options(self) -> tuple[str, ...]:
        """``("-arch=<arch>",)`` for a source built for one architecture, else ``()``."""
        return (f"-arch={self.arch}",) if self.arch else ()

    def runs_on(self, compute_capability: int) -> bool:
        """Whether the source's kernels run on a GPU of this compute capability (e.g. 90)."""
        return self.arch is None or int(self.arch[3:].rstrip("a")) == int(compute_capability)

    def check_device(self, device: int) -> None:
        """Raise ValueError if GPU ``device`` cannot run this source's kernels."""
        capability = _device.compute_capability(device)
        if not self.runs_on(capability):
            raise ValueError(
                f"kernels/{self.path} is built for {self.arch} only; GPU {device} has "
                f"compute capability {capability}"
            )

    def function(self, instance: str) -> Any:
        """The kernel ``instance`` for the current device (its group compiled on first use)."""
        _device.require_gpu()
        device = _device.cupy.cuda.runtime.getDevice()
        kernel = self._functions.get((device, instance))
        if kernel is None:
            kernel = self.group_of(instance).function(instance, device)
            self._functions[(device, instance)] = kernel
        return kernel

    def kernel_names(self) -> dict[int, str]:
        """id(kernel) -> "path:instance" for every kernel of this source fetched so far."""
        return {id(kernel): f"{self.path}:{name}" for (_, name), kernel in self._functions.items()}


#: Every kernel source, by path; the operation packages create theirs at import.
SOURCES: dict[str, KernelSource] = {}


def kernel_names() -> dict[int, str]:
    """id(kernel) -> "path:instance" for every kernel fetched so far, on any device."""
    names: dict[int, str] = {}
    for source in SOURCES.values():
        names.update(source.kernel_names())
    return names


@dataclass
class CompileReport:
    """What was compiled in this process: groups and seconds, at import and later."""

    at_import: list[tuple[str, int, float]] = field(default_factory=list)  # (label, n, seconds)
    on_first_use: list[tuple[str, int, float]] = field(default_factory=list)
    import_seconds: float = 0.0
    importing: bool = False
    deferred: bool = False  # the eager groups compiled before: loaded on first use
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, group: InstanceGroup, instances: tuple[str, ...], seconds: float) -> None:
        label = group.name if len(instances) == len(group.instances) else instances[0]
        entry = (f"{group.source.path} [{label}]", len(instances), seconds)
        with self._lock:
            (self.at_import if self.importing else self.on_first_use).append(entry)

    def lazy_groups(self, capability: int) -> list[InstanceGroup]:
        return [g for s in SOURCES.values() if s.runs_on(capability) for g in s.groups
                if not g.eager_on(capability)]

    def summary(self) -> str:
        """One paragraph: what was compiled (not loaded from CuPy's cache) and what compiles
        on first use; without a usable GPU, that nothing was."""
        if not _device.gpu_available():
            return "no kernel was compiled or loaded: no usable GPU"
        lines = []
        if self.at_import:
            instances = sum(n for _, n, _ in self.at_import)
            groups = len(self.at_import)
            lines.append(f"compiled {groups} kernel group{'s' if groups != 1 else ''} "
                         f"({instances} instances) at import in {self.import_seconds:.1f} s")
        elif self.deferred:
            lines.append("every kernel group compiled in an earlier run (CuPy's cache holds "
                         "them; each loads on its first call)")
        else:
            lines.append(f"import loaded every eager kernel group from CuPy's cache in "
                         f"{self.import_seconds:.2f} s")
        if self.on_first_use:
            instances = sum(n for _, n, _ in self.on_first_use)
            seconds = sum(s for _, _, s in self.on_first_use)
            lines.append(f"{instances} instances loaded or compiled on first use "
                         f"({len(self.on_first_use)} programs), {seconds:.1f} s in all")
        device = _device.cupy.cuda.runtime.getDevice()
        waiting = sum(len(g.instances) - len(g.compiled_instances(device))
                      for g in self.lazy_groups(_device.compute_capability()))
        if waiting:
            lines.append(f"{waiting} instances (64-bit indices, integer products, cumprod, ...) "
                         "compile one by one on the first call that needs them")
        return "; ".join(lines)


REPORT = CompileReport()


def _threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class _Progress:
    """A line on stderr once a compile has run PROGRESS_AFTER_SECONDS: n of N groups."""

    def __init__(self, total: int, arch: str) -> None:
        self.total, self.arch = total, arch
        self.start = time.perf_counter()
        self.shown = False

    def update(self, done: int) -> None:
        elapsed = time.perf_counter() - self.start
        if elapsed < PROGRESS_AFTER_SECONDS and done < self.total:
            return
        if not self.shown and done == self.total:
            return  # finished before the line was due: say nothing
        self.shown = True
        end = "\n" if done == self.total else ""
        print(f"\rgpukernels: compiling CUDA kernels for {self.arch} (first run; cached "
              f"afterwards): {done}/{self.total} groups, {elapsed:.0f} s", end=end,
              file=sys.stderr, flush=True)


def _marker(capability: int, groups: list[InstanceGroup]) -> Path | None:
    """The file that says these eager groups compiled for ``capability``: in CuPy's kernel
    cache directory, named by a hash of everything NVRTC is given (sources with their headers,
    instances, options) and of the CuPy and NVRTC versions, so an edited source, a new option or
    another toolkit asks for a compile again. None where CuPy keeps no disk cache."""
    cupy = _device.cupy
    if os.environ.get("CUPY_CACHE_IN_MEMORY", "0") != "0":
        return None
    digest = hashlib.sha256()
    for part in (cupy.__version__, str(cupy.cuda.nvrtc.getVersion()), str(compile_options())):
        digest.update(part.encode())
    for group in groups:
        digest.update(group.source.path.encode())
        digest.update(str(group.source.arch_options()).encode())
        digest.update(load_source(group.source.path).encode())
        digest.update("\n".join(group.instances).encode())
    cache = Path(os.environ.get("CUPY_CACHE_DIR") or Path.home() / ".cupy" / "kernel_cache")
    return cache / f"gpukernels-sm{capability}-{digest.hexdigest()[:32]}.ok"


def compile_at_import() -> None:
    """Compile (or load from CuPy's cache) every eager group the current device can run, in
    parallel threads; raise :class:`KernelCompileError` if one does not compile.

    Once they have all compiled, a marker file in CuPy's cache says so (see :func:`_marker`):
    later imports then load nothing, and each group's binary is loaded from CuPy's cache by the
    first call that launches one of its kernels (milliseconds)."""
    cupy = _device.cupy
    device = cupy.cuda.runtime.getDevice()
    capability = _device.compute_capability(device)
    eager = [g for s in SOURCES.values() if s.runs_on(capability) for g in s.groups
             if g.eager_on(capability)]
    start = time.perf_counter()
    marker = _marker(capability, eager)
    if marker is not None and marker.is_file():
        REPORT.deferred = True
        REPORT.import_seconds = time.perf_counter() - start
        return
    groups = [g for g in eager if not g.compiled(device)]
    # The largest groups first, so that the last to finish are short ones.
    groups.sort(key=lambda g: -len(g.instances) * g.source.weight)
    REPORT.importing = True
    progress = _Progress(len(groups), f"sm_{capability}")
    try:
        with concurrent.futures.ThreadPoolExecutor(min(_threads(), max(1, len(groups)))) as pool:
            pending = {pool.submit(group.module, device) for group in groups}
            done = 0
            while pending:
                finished, pending = concurrent.futures.wait(
                    pending, timeout=0.25, return_when=concurrent.futures.FIRST_EXCEPTION)
                done += len(finished)
                for future in finished:
                    future.result()  # a compile error stops the import here
                progress.update(done)
    finally:
        REPORT.importing = False
        REPORT.import_seconds = time.perf_counter() - start
    if marker is not None:
        try:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(f"{len(eager)} groups compiled for sm_{capability}\n")
        except OSError:  # a read-only cache: every import then loads the binaries
            pass


@dataclass(frozen=True)
class NvrtcResult:
    """What :func:`compile_for_arch` produced: the cubin, NVRTC's log and the lowered names."""

    cubin: bytes
    log: str
    lowered_names: dict[str, str]


def compile_for_arch(source: KernelSource, arch: str, instances: Iterable[str] | None = None,
                     options: tuple[str, ...] = ()) -> NvrtcResult:
    """Compile a source's instances (all by default) to a cubin for ``arch`` (e.g. ``"sm_90"``)
    with NVRTC, no GPU needed.

    Uses the NVRTC library that CuPy loads (the ``nvidia-cuda-nvrtc`` wheel or the toolkit's),
    with the same source and options as the runtime path. Raises :class:`KernelCompileError`
    with the log on failure.
    """
    from cupy_backends.cuda.libs import nvrtc

    names = tuple(source.instances if instances is None else instances)
    program = nvrtc.createProgram(load_source(source.path), source.path, [], [])
    try:
        for name in names:
            nvrtc.addNameExpression(program, name)
        try:
            nvrtc.compileProgram(program, list(compile_options() + options) + [f"-arch={arch}"])
        except nvrtc.NVRTCError as exc:
            log = nvrtc.getProgramLog(program)
            raise KernelCompileError(
                f"NVRTC could not compile kernels/{source.path} for {arch} ({exc}):\n{log}"
            ) from None
        lowered = {name: nvrtc.getLoweredName(program, name) for name in names}
        return NvrtcResult(nvrtc.getCUBIN(program), nvrtc.getProgramLog(program), lowered)
    finally:
        nvrtc.destroyProgram(program)
