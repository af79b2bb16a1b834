"""What the tools need to know about argmin and argmax: inputs, references (exact) and the
benchmark spec."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy

from ..._core import device as _device
from ..._core.compare import same_bits
from ..._core.ladder import BenchSpec
from ..reduce.check import REDUCE_AXIS_CASES, inputs, one_read_bench

__all__ = ["inputs", "make_reference", "make_bench"]


def make_reference(operation: str) -> Callable[..., tuple]:
    """The reference of argmin or argmax: NumPy's indices, exactly (no bound)."""

    def reference(x: Any, *, xp: Any = numpy, axis: Any = None, keepdims: bool = False) -> tuple:
        """NumPy's (or CuPy's, with ``xp``) ``{operation}`` of ``x``: int64 indices, exact."""
        return getattr(xp, operation)(x, axis=axis, keepdims=keepdims).astype(numpy.int64), None

    return reference


def _checks(op: Any, x: Any, kwargs: dict) -> tuple:
    """Rungs and peers alike: NumPy's indices, exactly."""
    want, _ = op.reference(x, xp=_device.cupy, **kwargs)

    def check(out: Any) -> bool:
        out = _device.cupy.asarray(out)
        return out.shape == want.shape and out.dtype == numpy.int64 and same_bits(out, want)

    return check, check


#: One axis at a time (NumPy's argmin and argmax take one).
ARG_AXIS_CASES = tuple(case for case in REDUCE_AXIS_CASES[:6] if isinstance(case[1], int))


def make_bench(operation: str) -> BenchSpec:
    """The benchmark spec of argmin or argmax (see
    :func:`gpukernels.ops.reduce.check.one_read_bench`)."""
    return one_read_bench(operation, checks=_checks, torch_options=lambda x: {},
                          main_dtypes=("float32", "int32"), dtypes=("float32", "int32"),
                          axis_cases=ARG_AXIS_CASES)
