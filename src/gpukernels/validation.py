"""Run a rung on fresh random data and compare it with the NumPy reference.

Every operation of the registry can be checked: :func:`check` takes its inputs, reference and
error bound from :data:`gpukernels._core.ladder.OPERATIONS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy

from ._core import device as _device
from ._core.compare import compare, poisoned
from ._core.ladder import operation as _operation

__all__ = ["CheckResult", "check", "poisoned"]


@dataclass(frozen=True)
class CheckResult:
    """Outcome of :func:`check`.

    ``max_excess`` is the largest ``|error| / bound`` over the output (0 for exact comparisons
    that match); the check passes when every element is within its bound and nothing is NaN
    where the reference is not.
    """

    operation: str
    method: str
    shape: tuple
    dtype: str
    ok: bool
    max_error: float
    max_excess: float

    def __str__(self) -> str:
        verdict = "ok" if self.ok else "WRONG"
        return (f"{self.operation:9s} {self.method:11s} {self.shape!s:22s} {self.dtype:10s} "
                f"{verdict} (max error {self.max_error:.3g}, {self.max_excess:.3g} of the bound)")


def check(operation: str, method: str, shape: Any, dtype: Any, *, seed: int | None = None,
          integer_valued: bool = False, **kwargs: Any) -> CheckResult:
    """Run ``method`` of ``operation`` on fresh random data and compare with the reference.

    Parameters
    ----------
    operation : str
        An operation of the registry: ``"transpose"``, ``"permute_dims"``, ``"matmul"``,
        ``"sum"``, ``"prod"``, ``"min"``, ``"max"``, ``"cumsum"``, ``"cumprod"``.
    method : str
        A rung name (see :func:`gpukernels.methods`) or ``"auto"``.
    shape : tuple
        Input shape: ``(..., M, N)`` for transpose, ``(M, K, N)`` for matmul (``a`` is M x K,
        ``b`` is K x N; ``(B, M, K, N)`` for a stack of B products), any shape for the
        reductions (reduced in full unless ``axis=`` is given).
    dtype : dtype
        Input dtype (``"tf32"`` for matmul: float32 operands with ``precision="tf32"``).
    seed : int, optional
        Seed of the random generator; fresh entropy when None.
    integer_valued : bool
        Draw floats as integers in [-8, 8], so float results must match exactly (while sums and
        products stay below 2**24).
    **kwargs
        The operation's other arguments, e.g. ``axis=0``.

    Returns
    -------
    CheckResult

    Raises
    ------
    ValueError
        The operation or the rung is unknown (before any need for a GPU).
    TypeError
        ``method`` is not a string.
    NoGPUError
        There is no GPU to run on.

    Examples
    --------
    >>> from gpukernels.validation import check
    >>> check("matmul", "tiled", (100, 37, 61), "float32").ok
    True
    """
    op = _operation(operation)
    op.ladder.resolve(method, op.name)  # an unknown rung is named before any need for a GPU
    _device.require_gpu()
    cupy = _device.cupy
    rng = numpy.random.default_rng(seed)
    shape = tuple(shape)
    args, extra = op.inputs(shape, dtype, rng, integer_valued=integer_valued)
    kwargs = {**extra, **kwargs}
    want, bound = op.reference(*args, **kwargs)
    want = numpy.asarray(want)
    out = poisoned(want.shape, op.result_dtype(*args, **kwargs))
    got = cupy.asnumpy(op.function(*(cupy.asarray(a) for a in args), method=method, out=out,
                                   **kwargs))
    if integer_valued:
        bound = None
    ok, error, excess = compare(got, want, bound)
    label = str(dtype) if str(dtype) == "tf32" else numpy.dtype(dtype).name
    return CheckResult(operation, method, shape, label, ok, error, excess)
