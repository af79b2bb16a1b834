"""Looking inside a rung: what it changes, its CUDA source, its compiled resources, its launch.

:func:`describe` answers, for an operation and one of its rungs (or the whole ladder):

* the rung's one-line summary: what it changes against the rung below;
* its CUDA source as written in ``kernels/``: the header comment and the kernel template;
* for an input (an array, or a shape and dtype): the kernel instance the wrapper would launch,
  its grid and block, and the compiled function's attributes as CuPy reports them (registers
  per thread, static shared memory, local memory, the most threads a block may have).

The launch configuration comes from a dry run of the wrapper itself (see
:func:`gpukernels._core.launch.record_launches`): the wrapper validates the input and picks its
configuration as it would for a real call, but no kernel runs. Summary and source need no GPU;
the rest does.

Examples
--------
>>> import gpukernels as gk
>>> info = gk.describe("transpose", "naive")
>>> info.summary
'one thread per element: coalesced row reads, strided column writes'
>>> info.source.splitlines()[-1]
'}'
>>> gk.describe("transpose", "shared", shape=(8192, 8192), dtype="float32")  # doctest: +SKIP
transpose / shared: rung 3 of 3 (above naive_col)
...
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ._core import compile as _compile
from ._core import device as _device
from ._core.ladder import OPERATIONS, Operation, Rung, ladders
from ._core.launch import LaunchRecord, record_launches

__all__ = ["describe", "RungInfo", "LadderInfo", "LaunchInfo", "KernelResources", "rung_source"]


def _operation(name: str) -> Operation:
    """The operation ``name``, or for a ladder several operations share (``"reduce"``) the first
    of them; ValueError listing the choices otherwise."""
    if name in OPERATIONS:
        return OPERATIONS[name]
    for op in OPERATIONS.values():
        if op.ladder.name == name:
            return op
    choices = list(OPERATIONS) + [n for n in ladders() if n not in OPERATIONS]
    raise ValueError(f"unknown operation {name!r}; choose one of {', '.join(choices)}")


# --- CUDA source ------------------------------------------------------------------------------------

def _skip_comment_or_literal(text: str, i: int) -> int:
    """If a comment or a string/char literal starts at ``i``, the index just past it; else ``i``."""
    if text.startswith("//", i):
        end = text.find("\n", i)
        return len(text) if end < 0 else end
    if text.startswith("/*", i):
        end = text.find("*/", i + 2)
        return len(text) if end < 0 else end + 2
    if text[i] in "\"'":
        j = i + 1
        while j < len(text) and text[j] != text[i]:
            j += 2 if text[j] == "\\" else 1
        return j + 1
    return i


def _matching(text: str, i: int, open_char: str, close_char: str) -> int:
    """Index just past the bracket that closes the one at ``text[i]``."""
    depth = 0
    while i < len(text):
        skipped = _skip_comment_or_literal(text, i)
        if skipped != i:
            i = skipped
            continue
        if text[i] == open_char:
            depth += 1
        elif text[i] == close_char:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError(f"unbalanced {open_char}{close_char}")


def _comment_text(lines: list[str]) -> str:
    """Comment lines without their ``//`` and without separator lines of dashes."""
    body = []
    for line in lines:
        text = line.strip()[2:]
        text = text[1:] if text.startswith(" ") else text
        if text.strip("-=") == "" and text:
            continue
        body.append(text.rstrip())
    while body and not body[0]:
        body.pop(0)
    while body and not body[-1]:
        body.pop()
    return "\n".join(body)


_INCLUDE = re.compile(r'^\s*#\s*include\s+"', re.MULTILINE)


def rung_source(filename: str, function: str, rung: str | None = None) -> tuple[str, str]:
    """The header comment and the full source of the kernel ``function`` in ``kernels/filename``
    (or in a header it includes).

    Parameters
    ----------
    filename : str
        A file under ``kernels/``, e.g. ``"transpose/transpose.cu"``.
    function : str
        The kernel's name, e.g. ``"transpose_shared"``.
    rung : str, optional
        The rung the kernel is, when its ``// Rung N - <rung>:`` header may sit above helpers
        that come before the kernel.

    Returns
    -------
    comment : str
        The comment block above the kernel, without ``//`` and separator lines.
    source : str
        The comment block, the template line(s) and the kernel's definition, as written.

    Raises
    ------
    LookupError
        The file defines no ``__global__`` function of that name.

    Examples
    --------
    >>> from gpukernels.introspect import rung_source
    >>> comment, source = rung_source("matmul/simt.cu", "matmul_tiled")
    >>> comment.splitlines()[0]
    'Rung 2 - tiled: the block computes a TILE x TILE tile of C. For each step along K it stages a'
    """
    pattern = r"__global__\b[^;{}]*?\b" + re.escape(function) + r"\s*\("
    text = (_compile.kernel_dir() / filename).read_text()
    match = re.search(pattern, text)
    if match is None and _INCLUDE.search(text):  # a kernel in a header the file includes
        try:
            text = _compile.load_source(filename)
        except OSError:  # a header that is not there defines nothing
            pass
        else:
            match = re.search(pattern, text)
    if match is None:
        raise LookupError(f"kernels/{filename} defines no __global__ function {function}")
    params_end = _matching(text, match.end() - 1, "(", ")")
    body_start = text.index("{", params_end)
    end = _matching(text, body_start, "{", "}")

    lines = text[:match.start()].split("\n")
    lines.pop()  # the start of the __global__ line itself
    declaration_start = len(lines)  # walk up over the template line(s) of the declaration
    while declaration_start > 0:
        line = lines[declaration_start - 1].strip()
        if not line or line.startswith(("//", "#")) or line.endswith(("}", ";", "{")):
            break
        declaration_start -= 1
    comment_end = declaration_start
    header = _rung_header_line(lines, declaration_start, rung) if rung else None
    if header is not None:  # the rung's header comment sits above helpers the kernel uses
        comment_end = header
        while comment_end < len(lines) and lines[comment_end].strip().startswith("//"):
            comment_end += 1
    comment_start = comment_end
    while comment_start > 0 and lines[comment_start - 1].strip().startswith("//"):
        comment_start -= 1
    comment_lines = lines[comment_start:comment_end]
    offset = sum(len(line) + 1 for line in lines[:comment_start])
    return _comment_text(comment_lines), text[offset:end]


def _rung_header_line(lines: list[str], before: int, method: str) -> int | None:
    """Index of a ``// Rung N - <method>`` comment line above the kernel, with no other kernel
    between them; None when there is none (the comment right above the kernel is its header)."""
    pattern = re.compile(r"^\s*//\s*Rung\b[^:]*?[-\s]" + re.escape(method) + r"\b\s*:")
    for index in range(before - 1, -1, -1):
        if "__global__" in lines[index]:
            return None
        if pattern.match(lines[index]):
            return index
    return None


# --- compiled kernels -------------------------------------------------------------------------------

@dataclass(frozen=True)
class KernelResources:
    """What the compiler gave one kernel instance, as CuPy reports it for the current device.

    Attributes
    ----------
    instance : str
        The template instance, e.g. ``"transpose_shared<unsigned int, int, 32, 8>"``.
    registers : int
        Registers per thread.
    static_shared_bytes : int
        Shared memory per block declared in the kernel (``__shared__`` arrays).
    local_bytes : int
        Local memory per thread (register spills and local arrays); 0 is what you want.
    const_bytes : int
        Constant memory.
    max_threads_per_block : int
        The largest block this instance can be launched with, given its registers.
    ptx_version, binary_version : int
        The PTX ISA and the binary architecture it was compiled for (90 for sm_90).

    Examples
    --------
    >>> import gpukernels as gk
    >>> gk.describe("matmul", "tiled").instances[0].registers  # doctest: +SKIP
    32
    """

    instance: str
    registers: int
    static_shared_bytes: int
    local_bytes: int
    const_bytes: int
    max_threads_per_block: int
    ptx_version: int
    binary_version: int

    @classmethod
    def of(cls, kernel: Any, instance: str) -> KernelResources:
        """Read the attributes of a compiled ``cupy.RawKernel``."""
        return cls(instance, kernel.num_regs, kernel.shared_size_bytes, kernel.local_size_bytes,
                   kernel.const_size_bytes, kernel.max_threads_per_block, kernel.ptx_version,
                   kernel.binary_version)


@dataclass(frozen=True)
class LaunchInfo:
    """One launch a wrapper would make: the instance, its configuration and resources.

    Examples
    --------
    >>> import gpukernels as gk
    >>> launch = gk.describe("transpose", "naive", shape=(64, 64)).launches[0]  # doctest: +SKIP
    >>> launch.grid, launch.block  # doctest: +SKIP
    ((16, 1, 1), (4, 64, 1))
    """

    instance: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_shared_bytes: int
    resources: KernelResources
    rung: str = ""  # the rung that launches it, or the plan's name for kernels that are not rungs
    source: str = ""  # its file under kernels/

    @property
    def threads_per_block(self) -> int:
        return math.prod(self.block)

    @property
    def blocks(self) -> int:
        return math.prod(self.grid)

    def __str__(self) -> str:
        r = self.resources
        where = f"  ({self.rung}, kernels/{self.source})" if self.rung else ""
        return (f"{self.instance}{where}\n"
                f"    grid {self.grid} x block {self.block}: {self.blocks} blocks of "
                f"{self.threads_per_block} threads\n"
                f"    {r.registers} registers/thread, {r.static_shared_bytes} B static shared "
                f"memory/block, {r.local_bytes} B local memory/thread, "
                f"at most {r.max_threads_per_block} threads/block")


def _compiled_instances(rung: Rung) -> tuple[KernelResources, ...]:
    """Resources of the rung's instances that are compiled for this device: its eager groups
    (compiled at import) and the lazy ones some call has compiled already; none is compiled
    here."""
    device = _device.cupy.cuda.runtime.getDevice()
    capability = _device.compute_capability(device)
    if not rung.source.runs_on(capability):
        return ()
    return tuple(KernelResources.of(rung.source.function(instance), instance)
                 for group in rung.groups
                 for instance in (group.instances if group.eager_on(capability)
                                  else group.compiled_instances(device)))


# --- describe ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RungInfo:
    """Everything :func:`describe` knows about one rung.

    Attributes
    ----------
    operation, method : str
        The operation and the rung (``method=`` name).
    ladder : tuple of str
        The operation's rungs, bottom first.
    summary : str
        One line: what the rung changes against the rung below it.
    kernel_file, kernel_function : str
        Where the kernel is: ``kernels/<kernel_file>``, ``__global__`` function name.
    needs : str
        What the rung requires of the device and the input.
    comment : str
        The kernel's header comment: what it changes and why.
    source : str
        The header comment and the kernel template as written.
    input : str
        The input the launches were worked out for (empty when none was given).
    launches : tuple of LaunchInfo
        The launches a call with that input makes, in order (a two-pass reduction makes two).
    instances : tuple of KernelResources
        Every compiled instance of the rung's kernel on this device (empty without a GPU).
    note : str
        Why something is missing (no GPU, input not supported by this rung, ...).

    Examples
    --------
    >>> import gpukernels as gk
    >>> info = gk.describe("matmul", "tiled")
    >>> info.level, info.below, info.kernel_file
    (2, 'naive', 'matmul/simt.cu')
    """

    operation: str
    method: str
    ladder: tuple[str, ...]
    summary: str
    kernel_file: str
    kernel_function: str
    comment: str
    source: str
    needs: str = ""
    input: str = ""
    launches: tuple[LaunchInfo, ...] = ()
    instances: tuple[KernelResources, ...] = ()
    note: str = ""

    @property
    def level(self) -> int:
        """1 for the bottom rung."""
        return self.ladder.index(self.method) + 1

    @property
    def below(self) -> str | None:
        """The rung below (None for the bottom rung)."""
        return self.ladder[self.level - 2] if self.level > 1 else None

    def title(self) -> str:
        place = f"rung {self.level} of {len(self.ladder)}"
        if self.below:
            place += f", above {self.below}"
        return f"{self.operation} / {self.method}: {place}"

    def __str__(self) -> str:
        return self._text(with_source=True)

    def __repr__(self) -> str:
        return self._text(with_source=False)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self._text(with_source=False))

    def _text(self, with_source: bool) -> str:
        lines = [self.title(), f"  {self.summary}",
                 f"  kernel: {self.kernel_function} in kernels/{self.kernel_file}",
                 f"  needs: {self.needs}"]
        if self.launches:
            lines.append(f"  launches for {self.input}:")
            lines += ["  " + line for launch in self.launches for line in str(launch).splitlines()]
        elif self.instances:
            registers = sorted({r.registers for r in self.instances})
            lines.append(f"  {len(self.instances)} compiled instances, "
                         f"{registers[0]}-{registers[-1]} registers/thread "
                         "(pass an input for its launch)")
        if self.note:
            lines.append(f"  note: {self.note}")
        if with_source:
            lines += ["", self.source]
        else:
            lines.append("  (.source holds the CUDA source)")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        parts = [f"<div><h4 style='margin-bottom:2px'>{html.escape(self.title())}</h4>",
                 f"<p style='margin-top:2px'>{html.escape(self.summary)}<br>"
                 f"<small>kernel <code>{html.escape(self.kernel_function)}</code> in "
                 f"<code>kernels/{html.escape(self.kernel_file)}</code>; needs: "
                 f"{html.escape(self.needs)}</small></p>"]
        if self.launches:
            parts.append(f"<p>Launches for {html.escape(self.input)}:</p>")
            parts.append(_launch_table(self.launches))
        elif self.instances:
            parts.append("<details><summary>compiled instances</summary>"
                         + _resources_table(self.instances) + "</details>")
        if self.note:
            parts.append(f"<p><i>{html.escape(self.note)}</i></p>")
        parts.append(f"<details><summary>CUDA source (kernels/{html.escape(self.kernel_file)})"
                     f"</summary>{_highlight(self.source)}</details></div>")
        return "".join(parts)


class LadderInfo(Sequence):
    """:func:`describe` for every rung of an operation: a sequence of :class:`RungInfo`.

    Index it by position or by rung name; it prints (and renders in Jupyter) as a table.

    Examples
    --------
    >>> import gpukernels as gk
    >>> ladder = gk.describe("matmul")
    >>> [rung.method for rung in ladder][:2], ladder["tiled"].level
    (['naive', 'tiled'], 2)
    """

    def __init__(self, operation: str, rungs: Sequence[RungInfo], input: str = "") -> None:
        self.operation = operation
        self.rungs = tuple(rungs)
        self.input = input

    def __getitem__(self, key):
        if isinstance(key, str):
            for rung in self.rungs:
                if rung.method == key:
                    return rung
            raise KeyError(key)
        return self.rungs[key]

    def __len__(self) -> int:
        return len(self.rungs)

    def _rows(self) -> list[list[str]]:
        rows = []
        for rung in self.rungs:
            row = [str(rung.level), rung.method, rung.summary]
            if self.input:
                if rung.launches:
                    first = rung.launches[0]
                    row += [first.instance, str(first.grid), str(first.block),
                            str(first.resources.registers),
                            str(first.resources.static_shared_bytes),
                            str(len(rung.launches))]
                else:
                    row += [rung.note or "-", "", "", "", "", ""]
            rows.append(row)
        return rows

    def _columns(self) -> list[str]:
        columns = ["#", "method", "what it changes"]
        if self.input:
            columns += ["kernel instance", "grid", "block", "registers", "static smem (B)",
                        "launches"]
        return columns

    def __repr__(self) -> str:
        title = f"{self.operation} ladder" + (f", launches for {self.input}" if self.input else "")
        lines = [title]
        for row in self._rows():
            lines.append(f"  {row[0]}. {row[1]}: {row[2]}")
            if self.input:
                if row[4]:
                    lines.append(f"       {row[3]}  grid {row[4]} block {row[5]}, "
                                 f"{row[6]} registers, {row[7]} B static shared, "
                                 f"{row[8]} launch(es)")
                else:
                    lines.append(f"       {row[3]}")
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))

    def _repr_html_(self) -> str:
        title = f"{self.operation} ladder" + (f", launches for {self.input}" if self.input else "")
        head = "".join(f"<th style='text-align:left'>{html.escape(c)}</th>"
                       for c in self._columns())
        body = "".join("<tr>" + "".join(f"<td style='text-align:left'>{html.escape(c)}</td>"
                                        for c in row) + "</tr>" for row in self._rows())
        return (f"<div><h4>{html.escape(title)}</h4><table><thead><tr>{head}</tr></thead>"
                f"<tbody>{body}</tbody></table><p><small>registers per thread and static shared "
                "memory per block of the first launch, as compiled for this device; "
                "<code>describe(operation, method)</code> shows a rung's source.</small></p></div>")


def _launch_table(launches: Sequence[LaunchInfo]) -> str:
    head = ("<tr><th style='text-align:left'>kernel instance</th><th>grid</th><th>block</th>"
            "<th>threads/block</th><th>registers/thread</th><th>static smem/block (B)</th>"
            "<th>local/thread (B)</th><th>max threads/block</th></tr>")
    rows = "".join(
        f"<tr><td style='text-align:left'><code>{html.escape(launch.instance)}</code></td>"
        f"<td>{launch.grid}</td><td>{launch.block}</td><td>{launch.threads_per_block}</td>"
        f"<td>{launch.resources.registers}</td><td>{launch.resources.static_shared_bytes}</td>"
        f"<td>{launch.resources.local_bytes}</td>"
        f"<td>{launch.resources.max_threads_per_block}</td></tr>"
        for launch in launches)
    return f"<table>{head}{rows}</table>"


def _resources_table(resources: Sequence[KernelResources]) -> str:
    head = ("<tr><th style='text-align:left'>instance</th><th>registers/thread</th>"
            "<th>static smem/block (B)</th><th>local/thread (B)</th><th>max threads/block</th></tr>")
    rows = "".join(
        f"<tr><td style='text-align:left'><code>{html.escape(r.instance)}</code></td>"
        f"<td>{r.registers}</td><td>{r.static_shared_bytes}</td><td>{r.local_bytes}</td>"
        f"<td>{r.max_threads_per_block}</td></tr>" for r in resources)
    return f"<table>{head}{rows}</table>"


def _highlight(source: str) -> str:
    """Source as HTML, syntax-highlighted when Pygments is installed."""
    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import CudaLexer
    except ImportError:
        return f"<pre>{html.escape(source)}</pre>"
    return highlight(source, CudaLexer(), HtmlFormatter(noclasses=True))


def _make_inputs(op: Operation, shape: Any, dtype: Any) -> tuple[tuple, dict]:
    """Device inputs of a shape (``(M, K, N)`` for matmul), drawn on the device: a dry run does
    not read them."""
    dtype = "float32" if dtype is None else dtype
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    try:
        return op.inputs(shape, dtype, 0, xp=_device.cupy)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"cannot make {op.name} inputs of shape {shape} and dtype {dtype}: "
                         f"{exc}") from None


def _array_label(x: Any) -> str:
    shape = tuple(getattr(x, "shape", ()))
    return f"{'x'.join(map(str, shape)) if shape else '()'} {getattr(x, 'dtype', '?')}"


def _input_label(inputs: Sequence[Any], kwargs: dict) -> str:
    label = " @ ".join(_array_label(x) for x in inputs)
    extra = ", ".join(f"{k}={_array_label(v) if hasattr(v, 'shape') else repr(v)}"
                      for k, v in kwargs.items())
    return f"{label}, {extra}" if extra else label


def _dry_run(op: Operation, inputs: tuple, method: str, kwargs: dict) -> list[LaunchRecord]:
    with record_launches(dry_run=True) as records:
        op.function(*inputs, method=method, **kwargs)
    return records


def _launch_infos(records: Sequence[LaunchRecord]) -> tuple[LaunchInfo, ...]:
    return tuple(LaunchInfo(record.instance, record.grid, record.block, record.shared_mem,
                            KernelResources.of(record.kernel, record.instance), record.rung,
                            record.source)
                 for record in records)


def _base_info(op: Operation, rung: Rung) -> RungInfo:
    try:
        comment, source = rung_source(rung.source.path, rung.kernel, rung.name)
        note = ""
    except (LookupError, OSError) as exc:
        comment, source, note = "", "", str(exc)
    return RungInfo(op.name, rung.name, op.ladder.names, rung.summary, rung.source.path,
                    rung.kernel, comment, source, str(rung.needs), note=note)


def describe(operation: str, method: str | None = None, *inputs: Any, shape: Any = None,
             dtype: Any = None, **kwargs: Any) -> Any:
    """Describe a rung (or a whole ladder): summary, CUDA source, resources and launch.

    Parameters
    ----------
    operation : str
        An operation (``"transpose"``, ``"matmul"``, ``"sum"``, ...; see
        :data:`gpukernels._core.ladder.OPERATIONS`) or a ladder (``"reduce"``).
    method : str, optional
        A rung of the operation's ladder, or ``"auto"`` (with an input: the rung ``auto``
        picks for it). None describes every rung, as a :class:`LadderInfo` table.
    *inputs : array
        The operation's array arguments (``x``, or ``a, b`` for matmul). They are not read or
        written: the wrapper runs with kernel launches switched off.
    shape : tuple of int, optional
        Instead of ``inputs``: the input's shape (``(M, K, N)`` for matmul). An array of that
        shape is made on the GPU for the dry run.
    dtype : dtype, optional
        dtype of the array made for ``shape`` (float32 by default).
    **kwargs
        Other arguments of the operation, e.g. ``axis=0`` for a reduction.

    Returns
    -------
    RungInfo or LadderInfo
        Prints as text and renders as HTML in Jupyter. Launch configurations and kernel
        resources are present when an input was given: the kernels the wrapper would launch,
        which may belong to another rung (``auto``) or to no rung (the axis reductions' row
        and column kernels). The compiled instances of a rung are listed whenever a GPU is
        present.

    Raises
    ------
    ValueError
        Unknown operation or method, ``"auto"`` without an input, ``shape`` with ``inputs``,
        or ``dtype`` without ``shape``.
    NoGPUError
        An input or shape was given but there is no GPU: launch configurations and resources
        come from the compiled kernels. Summary and source need no GPU.
    TypeError
        The rung does not take the input (for a single rung; a ladder notes it per rung).

    Examples
    --------
    >>> import gpukernels as gk
    >>> print(gk.describe("sum", "two_pass").comment.splitlines()[0])
    Rung 1 - two_pass: each thread accumulates a grid-stride slice of the input in a register
    >>> gk.describe("transpose")  # doctest: +SKIP
    transpose ladder
      1. naive: one thread per element: coalesced row reads, strided column writes
      ...
    >>> info = gk.describe("matmul", "tiled", shape=(4096, 4096, 4096))  # doctest: +SKIP
    >>> info.launches[0].resources.registers  # doctest: +SKIP
    32
    """
    op = _operation(operation)
    rungs = op.ladder.rungs
    ladder = op.ladder.names
    if method is not None and method != "auto" and method not in ladder:
        raise ValueError(f"unknown {op.name} method {method!r}; choose 'auto' or one of "
                         f"{', '.join(ladder)}")
    if shape is not None and inputs:
        raise ValueError("give the input either as arrays or as shape= (and dtype=), not both")
    if dtype is not None and shape is None:
        raise ValueError("dtype= goes with shape=; an array input has its own dtype")
    has_input = bool(inputs) or shape is not None
    if method == "auto" and not has_input:
        raise ValueError("'auto' picks a rung per input: pass an array, or shape= and dtype=")
    if has_input and not _device.gpu_available():
        try:
            _device.require_gpu()
        except _device.NoGPUError as exc:
            raise _device.NoGPUError(
                f"{exc} describe() needs one for launch configurations and kernel resources; "
                f"describe({operation!r}, {method!r}) without an input gives the summary and "
                "the source.") from None

    if not has_input:
        infos = [_base_info(op, rung) for rung in rungs]
        if _device.gpu_available():
            infos = [replace(info, instances=_compiled_instances(rung))
                     for info, rung in zip(infos, rungs)]
        else:
            infos = [replace(info, note=info.note or "no GPU: compiled resources need one")
                     for info in infos]
        if method is None:
            return LadderInfo(op.name, infos)
        return next(info for info in infos if info.method == method)

    if shape is not None:
        inputs, made = _make_inputs(op, shape, dtype)
        kwargs = {**made, **kwargs}
    label = _input_label(inputs, kwargs)
    if method == "auto":
        launches = _launch_infos(_dry_run(op, inputs, "auto", kwargs))
        chosen = next((launch.rung for launch in launches if launch.rung in ladder), None)
        rung = op.ladder[chosen] if chosen else rungs[-1]
        info = _base_info(op, rung)
        note = f"method='auto' picks {chosen} for this input" if chosen else \
            _other_kernels_note(launches)
        return replace(info, input=label, launches=launches,
                       instances=_compiled_instances(rung), note=note)
    infos = []
    for rung in rungs:
        if method is not None and rung.name != method:
            continue
        info = _base_info(op, rung)
        try:
            launches = _launch_infos(_dry_run(op, inputs, rung.name, kwargs))
        except (TypeError, ValueError) as exc:
            if method is not None:
                raise
            infos.append(replace(info, input=label, note=f"not supported: {exc}"))
            continue
        note = "" if all(launch.rung == rung.name for launch in launches) else \
            _other_kernels_note(launches)
        infos.append(replace(info, input=label, launches=launches,
                             instances=_compiled_instances(rung), note=note))
    return infos[0] if method is not None else LadderInfo(op.name, infos, label)


def _other_kernels_note(launches: Sequence[LaunchInfo]) -> str:
    """What launches for an input when it is not the rung's own kernel."""
    if not launches:
        return "no kernel launches for this input"
    what = ", ".join(dict.fromkeys(f"{launch.rung} ({launch.instance.split('<', 1)[0]} in "
                                   f"kernels/{launch.source})" for launch in launches))
    return f"for this input the wrapper launches {what}"
