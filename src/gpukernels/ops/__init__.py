"""The operations, one package each: ``transpose``, ``permute`` (permute_dims), ``matmul``,
``reduce`` (sum, prod, min, max), ``moments`` (mean, var, std), ``argreduce`` (argmin,
argmax) and ``scan`` (cumsum, cumprod). Each holds its public wrapper
(``__init__.py``), its ladder of rungs with their launch geometry (``rungs.py``) and what the
tools need (``check.py``: inputs, NumPy reference, error
bound, benchmark spec), and registers its operations in
:data:`gpukernels._core.ladder.OPERATIONS` when imported. Their CUDA sources are in the
repository's ``kernels/<name>/``.

Importing this package imports every operation, in the order the tools list them.
"""

# The registry order: the tools list operations in the order they are imported here.
# isort: off
from . import transpose  # noqa: F401
from . import permute  # noqa: F401
from . import matmul  # noqa: F401
from . import reduce  # noqa: F401
from . import moments  # noqa: F401
from . import argreduce  # noqa: F401
from . import scan  # noqa: F401
# isort: on
