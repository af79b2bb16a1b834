"""The two records everything iterates: a :class:`Rung` and an :class:`Operation`.

:data:`OPERATIONS` is the only list of operations in the package. Validation, the main job of
``python -m gpukernels``, ``bench``, the plots, the command line's choices, ``describe``, the
sanitizer script and the cross-cutting tests all read it. Each operation package
(``gpukernels/ops/<name>/``) builds its ladder of rungs and registers its operation here.

Adding a rung: write the kernel in the ladder's ``.cu`` file under a ``// Rung N - name:``
header, then add one :class:`Rung` to the operation's ``rungs.py`` with its instances and plan.
Adding an operation: one package under ``ops/`` and one :func:`register` call (see README).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .compile import InstanceGroup, KernelSource

__all__ = ["Needs", "Rung", "Ladder", "Operation", "BenchSpec", "OPERATIONS", "KINDS", "register",
           "operation", "methods", "resolve_method", "ladders"]


@dataclass(frozen=True)
class Needs:
    """What a rung requires of the device and the input, in words for ``describe`` (the rung's
    plan enforces it and raises TypeError or ValueError for inputs it cannot take).

    Attributes
    ----------
    capability : int
        The lowest compute capability it runs on, as one number (80 for 8.0); 0 for any.
    only_capability : int or None
        The one compute capability it runs on (90 for kernels compiled for sm_90a).
    dtypes : str
        The dtypes it takes, when not every dtype of the operation.
    layout : str
        Conditions on shapes or strides, e.g. "rows of contiguous elements".
    precision : str
        Precision conditions, e.g. "float32 only with precision='tf32'".
    """

    capability: int = 0
    only_capability: int | None = None
    dtypes: str = ""
    layout: str = ""
    precision: str = ""

    def runs_on(self, capability: int) -> bool:
        if self.only_capability is not None:
            return capability == self.only_capability
        return capability >= self.capability

    def __str__(self) -> str:
        parts = []
        if self.only_capability is not None:
            parts.append(f"compute capability {self.only_capability / 10:.1f} only")
        elif self.capability:
            parts.append(f"compute capability {self.capability / 10:.1f} or newer")
        parts += [text for text in (self.dtypes, self.layout, self.precision) if text]
        return "; ".join(parts) or "any input the operation takes"


@dataclass(frozen=True, eq=False)
class Rung:
    """One step of a ladder: a kernel and how it is launched.

    Attributes
    ----------
    name : str
        The ``method=`` string, also the suffix of the CUDA kernel's name and the test id.
    summary : str
        One line: what this rung changes against the rung below it.
    source : KernelSource
        The ``.cu`` file that holds the kernel and its ``// Rung N - name:`` header.
    kernel : str
        The ``__global__`` function, e.g. ``"transpose_words_async"``.
    groups : tuple of InstanceGroup
        The template instances its plans can launch, as compiled (eager or lazy groups).
    plan : callable
        The operation's problem description -> what to launch (each ladder defines both).
    needs : Needs
        Requirements on the device and the input.
    """

    name: str
    summary: str
    source: KernelSource
    kernel: str
    groups: tuple[InstanceGroup, ...]
    plan: Callable[..., Any]
    needs: Needs = Needs()

    @property
    def instances(self) -> tuple[str, ...]:
        return tuple(i for group in self.groups for i in group.instances)

    def __repr__(self) -> str:
        return f"<Rung {self.name}: {self.kernel} in kernels/{self.source.path}>"


@dataclass(frozen=True, eq=False)
class Ladder:
    """An operation's rungs, bottom rung (the textbook kernel) first; several operations may
    share one (sum, prod, min and max share ``reduce``)."""

    name: str
    rungs: tuple[Rung, ...]

    def __iter__(self) -> Iterator[Rung]:
        return iter(self.rungs)

    def __len__(self) -> int:
        return len(self.rungs)

    def __getitem__(self, name: str) -> Rung:
        for rung in self.rungs:
            if rung.name == name:
                return rung
        raise KeyError(name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(rung.name for rung in self.rungs)

    def resolve(self, method: object, operation: str) -> Rung | None:
        """The rung ``method`` names, None for ``"auto"``; TypeError/ValueError otherwise."""
        if not isinstance(method, str):
            raise TypeError(f"method must be a string, not {type(method).__name__}")
        if method == "auto":
            return None
        for rung in self.rungs:
            if rung.name == method:
                return rung
        raise ValueError(f"unknown {operation} method {method!r}; choose 'auto' or one of "
                         f"{', '.join(self.names)}")


@dataclass(frozen=True)
class BenchSpec:
    """How ``bench`` and the main job time an operation (see :mod:`gpukernels.benchmark`).

    Attributes
    ----------
    unit : str
        ``"GB/s"`` or ``"TFLOP/s"``.
    work : str
        What the rate counts, e.g. "bytes read plus bytes written".
    ceiling : str
        The ceiling the ratios are to, in words, e.g. "device-to-device copy of the same bytes".
    peers : str
        The library equivalents timed beside the rungs, in words.
    defaults : dict
        The default sweep: ``sizes``, ``dtypes``, ``shapes`` and the operation's own options.
    quick : dict
        Smaller inputs for a smoke run (they replace the defaults they name).
    cases : callable
        ``cases(operation, sizes=, dtypes=, shapes=, **options) -> list of Case``: the sweep.
    candidates : callable
        ``candidates(case, methods, seed, **options) -> (candidates, work, notes)``: the
        ceiling, the rungs named in ``methods`` and the library peers on one input (allocated
        once, on the device), each with a check of its output; the case's work (GB or TFLOP);
        notes for its rows.
    main_cases : callable
        ``main_cases(operation, quick) -> list of Case``: the inputs of ``python -m gpukernels``.
    options : tuple of str
        The names of the operation's own options (for ``cases`` and ``candidates``).
    title : str
        The plot's title.
    x_axis : str
        ``"bytes"`` (the input's size) or ``"cube"`` (n of an n x n x n problem).
    summary : callable, optional
        ``summary(rows) -> str``: lines ``bench`` prints after the table for this operation's
        measurements ("" for nothing), e.g. matmul's shape suite in a few figures.
    """

    unit: str
    work: str
    ceiling: str
    peers: str
    defaults: dict
    quick: dict
    cases: Callable[..., list]
    candidates: Callable[..., tuple]
    main_cases: Callable[..., list]
    options: tuple[str, ...] = ()
    title: str = ""
    x_axis: str = "bytes"
    summary: Callable[..., str] | None = None


@dataclass(frozen=True, eq=False)
class Operation:
    """One public operation and everything the tools need to know about it.

    Attributes
    ----------
    name : str
        ``"transpose"``, ``"sum"``, ...: the public function's name.
    function : callable
        The public wrapper, e.g. :func:`gpukernels.transpose`.
    ladder : Ladder
        Its rungs.
    inputs : callable
        ``inputs(shape, dtype, rng, integer_valued=False) -> (args, kwargs)``: fresh random host
        (NumPy) inputs for a shape (``(M, K, N)`` for matmul) and dtype.
    reference : callable
        ``reference(*args, xp=numpy, **kwargs) -> (expected, bound)``: the result in float64
        (or exactly, for integers) and the elementwise error bound (None: must match exactly).
        ``xp`` is NumPy or CuPy: the benchmark checks on the device with the same code.
    result_dtype : callable
        ``result_dtype(*args, **kwargs) -> numpy.dtype``: NumPy's result dtype of a call.
    check_shape : tuple
        A small odd input the main job checks every rung on, against NumPy.
    check_shapes : dict
        Rung name -> the check input of a rung that does not take ``check_shape`` (the narrow
        transpose takes at most 128 rows or columns).
    check_dtypes : tuple of str
        The dtypes the main job checks.
    bench : BenchSpec
    kind : str
        How its result is built from the blocks of a chunked input, for :mod:`gpukernels.dask`
        (one of :data:`KINDS`): ``"swap_last_axes"`` (each output block is one input block,
        transposed), ``"permutation"`` (likewise, its axes permuted by ``axes``), ``"matmul"`` (a product per block pair, summed over the contracted
        blocks), ``"reduction"`` (a tree of reductions over the reduced axes' blocks), ``"scan"``
        (each block scanned, then the totals of the blocks before it combined in: ``extra``
        gives the ``"combine"`` function and its ``"identity"``), ``"moments"`` (mean from
        sums; var and std from the moments of each block, merged along a tree), ``"arg"``
        (each block's extreme and its index, the first of the extremes kept along a tree).
    """

    name: str
    function: Callable[..., Any]
    ladder: Ladder
    inputs: Callable[..., tuple]
    reference: Callable[..., tuple]
    result_dtype: Callable[..., Any]
    check_shape: tuple
    check_dtypes: tuple[str, ...]
    bench: BenchSpec
    kind: str
    extra: dict = field(default_factory=dict)
    check_shapes: dict = field(default_factory=dict)

    def supports(self, method: str, *args: Any, **kwargs: Any) -> bool:
        """Whether rung ``method`` takes these inputs (a dry run of the wrapper: nothing is
        launched; False where it raises TypeError or ValueError)."""
        from .launch import record_launches

        try:
            with record_launches(dry_run=True):
                self.function(*args, method=method, **kwargs)
        except (TypeError, ValueError):
            return False
        return True


#: Every operation, by name, in the order the package registers them.
OPERATIONS: dict[str, Operation] = {}

#: The values of :attr:`Operation.kind`: the ways :mod:`gpukernels.dask` distributes an
#: operation over the blocks of a Dask array.
KINDS = ("swap_last_axes", "permutation", "matmul", "reduction", "scan", "moments", "arg")


def register(op: Operation) -> Operation:
    """Add an operation to :data:`OPERATIONS` (its package calls this once, at import)."""
    if op.name in OPERATIONS:
        raise ValueError(f"operation {op.name!r} is registered twice")
    if op.kind not in KINDS:
        raise ValueError(f"operation {op.name!r} has kind {op.kind!r}; choose one of {KINDS}")
    OPERATIONS[op.name] = op
    return op


def ladders() -> dict[str, Ladder]:
    """Every ladder by name (``"transpose"``, ``"matmul"``, ``"reduce"``), in registry order."""
    found: dict[str, Ladder] = {}
    for op in OPERATIONS.values():
        found.setdefault(op.ladder.name, op.ladder)
    return found


def operation(name: str) -> Operation:
    """The operation ``name``; ValueError listing the known ones otherwise."""
    try:
        return OPERATIONS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown operation {name!r}; choose one of "
                         f"{', '.join(OPERATIONS)}") from None


def methods(operation: str) -> tuple[str, ...]:
    """The rungs of an operation's ladder, bottom rung (the textbook kernel) first.

    Parameters
    ----------
    operation : str
        An operation (``"transpose"``, ``"matmul"``, ``"sum"``, ``"prod"``, ``"min"``,
        ``"max"``) or a ladder that several share (``"reduce"``).

    Returns
    -------
    tuple of str
        The names accepted by that operation's ``method=`` argument, besides ``"auto"``.

    Examples
    --------
    >>> import gpukernels as gk
    >>> gk.methods("transpose")
    ('naive', 'naive_col', 'shared', 'vector', 'words', 'words_async', 'narrow', 'runs')
    >>> gk.methods("sum") == gk.methods("reduce")
    True
    """
    all_ladders = ladders()
    if isinstance(operation, str) and operation in all_ladders and operation not in OPERATIONS:
        return all_ladders[operation].names
    if not isinstance(operation, str) or operation not in OPERATIONS:
        known = list(OPERATIONS) + [name for name in all_ladders if name not in OPERATIONS]
        raise ValueError(f"unknown operation {operation!r}; choose one of {', '.join(known)}")
    return OPERATIONS[operation].ladder.names


def resolve_method(operation: str, method: object) -> Rung | None:
    """The rung ``method`` names in ``operation``'s ladder, or None for ``"auto"``."""
    return OPERATIONS[operation].ladder.resolve(method, operation)
