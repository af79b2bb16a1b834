"""The ladders on Dask arrays whose chunks are CuPy arrays (one GPU or several, through Dask).

Every operation of :data:`gpukernels._core.ladder.OPERATIONS` has a function of the same name
here, built from the operation's ``kind`` when this module is imported, so an operation added to
the registry reaches Dask without an edit here:

* ``transpose`` (kind ``"swap_last_axes"``): one task per block, each a
  :func:`gpukernels.transpose` of its block; the result's blocks are the input's with the last
  two block indices swapped, each C-contiguous (not a strided view).
* ``permute_dims`` (kind ``"permutation"``): one :func:`gpukernels.permute_dims` per block, the
  result's blocks and chunks permuted as its axes.
* ``matmul`` (kind ``"matmul"``): one :func:`gpukernels.matmul` per pair of blocks of ``a`` and
  ``b`` that meet over the contracted axis, then, per output block, one pass that reads its
  partial products once and adds them in a fixed order (float16 in float32, float32 in
  float64) before rounding once. The chunks of ``a``'s last axis must be those of ``b``'s
  second-to-last axis (and batch axes must be chunked alike): nothing is rechunked behind the
  caller's back.
* ``sum``, ``prod``, ``min``, ``max`` (kind ``"reduction"``): :func:`dask.array.reduction`, with
  the gpukernels reduction as its chunk, combine and aggregate steps; float16 partial sums and
  products are kept in float32 until the last step.
* ``argmin``, ``argmax`` (kind ``"arg"``): Dask's arg-reduction with the kernels on each
  block; merging keeps the smallest index among the blocks that hold the extreme, so ties give
  the first index of the whole array as NumPy's do.
* ``mean``, ``var``, ``std`` (kind ``"moments"``): mean is the Dask sum above divided by the
  count; var and std take the moments of each block (count, mean, squared deviations, as
  :func:`gpukernels.var` folds them) and merge them along Dask's reduction tree.

Results have NumPy's dtypes and shapes, as on one array, and the same chunking gives bitwise the
same result on every run. Each function checks its inputs on the client, before any task runs,
and raises TypeError or ValueError with NumPy's wording or a remedy; ``method=`` passes through
to every task. The tasks run wherever Dask runs them: the threaded scheduler of the calling
process, or the workers of a ``distributed`` cluster (``dask_cuda.LocalCUDACluster`` starts one
worker per GPU). bfloat16 blocks (``ml_dtypes.bfloat16``) work with the threaded scheduler
and with a one-worker cluster. ``distributed`` sends CuPy blocks between processes with their
dtype as a type string, so bfloat16 arrives as a 2-byte void: the tasks here take such blocks
as bfloat16, and a result gathered by the client needs ``.view(ml_dtypes.bfloat16)``; but when
the blocks of one result come from several worker processes, Dask's own gathering task fails
to concatenate bfloat16 blocks with void ones (a limit of distributed's CuPy serialization).

On several GPUs, what a graph costs is mostly the blocks it moves between them. Over
``distributed``'s default TCP transport blocks pass through host memory; with NVLink, start the
cluster with ``LocalCUDACluster(protocol="ucx")`` (``distributed-ucxx``). A product spreads
well when each task finds its operands on its own GPU: the left operand in row chunks and the
right operand in one chunk copied to every worker (``client.replicate``, with Dask's active
memory manager off, or it drops the copies). ``python -m gpukernels bench dask --gpus 0,1
--protocol ucx`` times both layouts.

Install with ``pip install "gpukernels[dask]"`` (``dask[array]``, ``distributed``,
``dask-cuda``); ``import gpukernels`` itself does not need them.

Examples
--------
>>> import cupy, dask.array as da
>>> import gpukernels.dask as gkd
>>> x = da.from_array(cupy.arange(12, dtype=cupy.float32).reshape(3, 4), chunks=2)
>>> gkd.transpose(x).chunks
((2, 2), (2, 1))
>>> float(gkd.sum(x, axis=0).compute()[1])
15.0
"""

from __future__ import annotations

import builtins
import functools
import inspect
import math
import operator
import warnings
from collections.abc import Callable
from typing import Any

import numpy

try:
    import dask.array as da
    from dask.array.utils import meta_from_array
except ImportError as error:  # the optional extra is missing
    raise ImportError(
        "gpukernels.dask needs Dask: pip install 'gpukernels[dask]' (dask[array], distributed "
        f"and dask-cuda); the import failed with: {error}") from error

from ._core import device as _device
from ._core import floats
from ._core.ladder import OPERATIONS, Operation
from .ops.matmul import matmul_shapes
from .ops.moments import moment_states
from .ops.permute import normalize_axes
from .ops.reduce.dtypes import normalize_axis

# The exported functions are named after the operations (sum, min, max...): in this module the
# builtins of those names are reached as builtins.min and so on.
__all__ = list(OPERATIONS)


# What the graphs' tasks call, and the chunk type they take. Two functions, so that the CPU
# tests can run the same graphs on NumPy chunks with NumPy's functions in the kernels' place.
def _chunk_type() -> type:
    """The array type a Dask array's chunks must have: ``cupy.ndarray``."""
    if _device.cupy is None:
        raise _device.NoGPUError("gpukernels.dask needs CuPy and a CUDA GPU")
    return _device.cupy.ndarray


def _kernel(name: str) -> Callable[..., Any]:
    """The function the tasks of operation ``name`` call on their blocks (bfloat16 blocks that
    a distributed cluster delivered as 2-byte voids taken as bfloat16 again)."""
    function = OPERATIONS[name].function

    def call(*args: Any, **kwargs: Any) -> Any:
        return function(*(_as_bfloat16(x) for x in args), **kwargs)

    return call


_VOID2 = numpy.dtype("V2")


def _as_bfloat16(x: Any) -> Any:
    """``x``, or, if it is an array of 2-byte voids, the same memory as bfloat16. distributed
    sends CuPy blocks between processes with their dtype as its type string, and bfloat16's
    (``"<V2"``) comes back as a plain 2-byte void; the Dask layer's graphs hold no other
    2-byte void blocks."""
    return x.view(floats.BFLOAT16) if getattr(x, "dtype", None) == _VOID2 else x


# ---------------------------------------------------------------------------------------------
# Checks shared by every operation (on the client, before any graph is built).

def _checked(x: Any, name: str, argument: str = "x") -> Any:
    """``x`` if it is a Dask array of CuPy chunks with known chunk sizes; else TypeError or
    ValueError saying what to do."""
    if not isinstance(x, da.Array):
        kind = f"{type(x).__module__}.{type(x).__name__}"
        if _device.cupy is not None and isinstance(x, _device.cupy.ndarray):
            remedy = (f"call gpukernels.{name} for one CuPy array, or split it into chunks with "
                      "dask.array.from_array(x, chunks=...)")
        elif isinstance(x, numpy.ndarray):
            remedy = ("this is host memory: move it to the GPU and split it into chunks with "
                      "dask.array.from_array(cupy.asarray(x), chunks=...)")
        else:
            remedy = "build one with dask.array.from_array(cupy_array, chunks=...)"
        raise TypeError(f"gpukernels.dask.{name} takes a Dask array for {argument}, not {kind}; "
                        f"{remedy}")
    meta = getattr(x, "_meta", None)
    if not isinstance(meta, _chunk_type()):
        kind = f"{type(meta).__module__}.{type(meta).__name__}"
        raise TypeError(f"gpukernels.dask.{name}: the chunks of {argument} are {kind}, not CuPy "
                        f"arrays on the GPU; move them there with "
                        f"{argument}.map_blocks(cupy.asarray)")
    if any(math.isnan(size) for chunks in x.chunks for size in chunks):
        raise ValueError(f"gpukernels.dask.{name}: {argument} has chunks of unknown size; call "
                         f"{argument}.compute_chunk_sizes() first")
    return x


def _numpy_errors(op: Operation, x: Any, **kwargs: Any) -> None:
    """Raise what NumPy raises for these arguments (axis, dtype, an empty input): the
    operation's reference on a host stand-in of ``x`` of at most one element per axis (its
    warnings are the stand-in's, not the call's)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        op.reference(numpy.zeros(tuple(builtins.min(n, 1) for n in x.shape), x.dtype), **kwargs)


def _meta(like: Any, ndim: int, dtype: numpy.dtype) -> Any:
    """An empty array of the chunks' type, ``ndim`` and ``dtype`` (Dask's ``meta``)."""
    with warnings.catch_warnings():  # an empty complex meta cast to a real result dtype
        warnings.simplefilter("ignore", numpy.exceptions.ComplexWarning)
        return meta_from_array(like._meta, ndim=ndim, dtype=dtype)


# ---------------------------------------------------------------------------------------------
# The tasks. Module-level functions (bound with functools.partial), so that the graphs pickle
# for distributed workers and tokenize to the same keys for the same inputs.

def _call(name: str, x: Any, *, method: str) -> Any:
    return _kernel(name)(x, method=method)


def _permute(name: str, axes: tuple, x: Any, *, method: str) -> Any:
    return _kernel(name)(x, axes, method=method)


def _product(name: str, a: Any, b: Any, *, method: str, precision: str) -> Any:
    """One block pair's product (..., M, N) as (..., M, 1, N): the length-1 axis is the
    contracted block index, summed over afterwards."""
    return _kernel(name)(a, b, method=method, precision=precision)[..., None, :]


def _reduce_block(name: str, method: str, to_dtype: Any, x: Any, axis: tuple,
                  keepdims: bool) -> Any:
    """A reduction of one block (or of concatenated partial results) over ``axis``."""
    options = {} if to_dtype is None else {"dtype": to_dtype}
    return _kernel(name)(x, axis=axis, keepdims=keepdims, method=method, **options)


def _keep(x: Any, axis: tuple, keepdims: bool) -> Any:
    """The chunk step of the sum over a matmul's contracted blocks: each product as it is."""
    return x


def _accumulator(dtype: numpy.dtype) -> numpy.dtype:
    """The dtype partial results of ``dtype`` are added in: float16 and bfloat16 in float32,
    float32 in float64, others in their own dtype (integers wrap as NumPy's do)."""
    if floats.is_bfloat16(dtype):
        return numpy.dtype(numpy.float32)
    wider: dict[str, numpy.dtype] = {"e": numpy.dtype(numpy.float32),
                                     "f": numpy.dtype(numpy.float64)}
    return wider.get(dtype.char, dtype)


@functools.cache
def _adder(count: int, in_dtype: numpy.dtype, out_dtype: numpy.dtype) -> Any:
    """A CuPy elementwise kernel adding ``count`` arrays of ``in_dtype`` into one of
    ``out_dtype``, in the accumulator of ``out_dtype`` (OR for bool), reading each once."""
    terms = [f"p{i}" for i in range(count)]
    params = ", ".join(f"{in_dtype.name} {term}" for term in terms)
    if out_dtype.kind == "b":
        body = "out = " + " || ".join(terms) + ";"
    else:
        acc = {"e": "float", "f": "double", "d": "double"}.get(out_dtype.char, "O")
        body = f"{acc} s = ({acc}){terms[0]};" + "".join(
            f" s += ({acc}){term};" for term in terms[1:]) + " out = (O)s;"
    return _device.cupy.ElementwiseKernel(params, "O out", body, f"gpukernels_add_{count}")


def _add_partials(parts: Any, axis: tuple, keepdims: bool, *, dtype: Any,
                  last: bool) -> Any:
    """The sum of a matmul's partial products (the combine and aggregate steps): one pass over
    all of them, in the accumulator dtype; the result dtype after the ``last`` step."""
    if not isinstance(parts, list):
        parts = [parts]
    flat: list = []
    stack = list(reversed(parts))
    while stack:  # Dask hands nested lists when it reduces several block axes at once
        part = stack.pop()
        if isinstance(part, list):
            stack.extend(reversed(part))
        else:
            flat.append(_as_bfloat16(part))
    dtype = numpy.dtype(dtype)
    out_dtype = dtype if last else _accumulator(dtype)
    first = flat[0]
    if len(flat) == 1:
        total = first.astype(out_dtype, copy=False)
    elif isinstance(first, numpy.ndarray):  # the CPU tests' NumPy chunks
        acc = _accumulator(dtype)
        total = functools.reduce(numpy.add, [p.astype(acc) for p in flat]).astype(out_dtype)
    else:
        in_dtype = numpy.result_type(*flat)
        # bfloat16 (CuPy's own kernels know it only as ml_dtypes' type) is added as float32
        # and rounded once at the end.
        wide = _accumulator(in_dtype) if floats.is_bfloat16(in_dtype) else in_dtype
        flat = [p.astype(wide, copy=False) for p in flat]
        total = _device.cupy.empty(first.shape, _accumulator(out_dtype)
                                   if floats.is_bfloat16(out_dtype) else out_dtype)
        _adder(len(flat), wide, total.dtype)(*flat, total)
        total = total.astype(out_dtype, copy=False)
    return total if keepdims else total.squeeze(axis[0])


# ---------------------------------------------------------------------------------------------
# One builder per kind: operation -> the function this module exports under its name.

def _swap_last_axes(op: Operation) -> Callable[..., Any]:
    name = op.name

    def function(x: Any, *, method: str = "auto") -> Any:
        # 1. Validate (on the client: types, chunks, method, rank, dtype).
        x = _checked(x, name)
        op.ladder.resolve(method, name)
        if x.ndim < 2:
            raise ValueError(f"{name} needs an array of at least 2 dimensions (..., M, N); this "
                             f"one has shape {x.shape}")
        dtype = op.result_dtype(x._meta)
        # 2. The graph: output block (..., j, i) is the kernel's transpose of input block
        # (..., i, j); Dask swaps the chunks.
        index = tuple(range(x.ndim))
        swapped = index[:-2] + (index[-1], index[-2])
        return da.blockwise(functools.partial(_call, name, method=method), swapped, x, index,
                            dtype=dtype, meta=_meta(x, x.ndim, dtype), token=f"gk-{name}")

    function.__doc__ = f"""Swap the last two axes of a Dask array of CuPy chunks, one
    :func:`gpukernels.{name}` per block.

    Parameters
    ----------
    x : dask.array.Array
        At least 2-D, with CuPy chunks of a dtype :func:`gpukernels.{name}` takes.
    method : str, optional
        A rung of ``gpukernels.methods("{name}")``, or ``"auto"``, for every block.

    Returns
    -------
    dask.array.Array
        Shape ``x.shape[:-2] + (N, M)``, chunks swapped likewise; each block C-contiguous.

    Raises
    ------
    TypeError
        ``x`` is not a Dask array, its chunks are not CuPy arrays, or its dtype is unsupported.
    ValueError
        ``x`` has fewer than 2 dimensions or chunks of unknown size, or ``method`` is unknown.

    Examples
    --------
    >>> import cupy, dask.array as da, gpukernels.dask as gkd
    >>> x = da.from_array(cupy.arange(6).reshape(2, 3), chunks=(1, 2))
    >>> y = gkd.{name}(x)
    >>> y.shape, y.chunks
    ((3, 2), ((2, 1), (1, 1)))
    >>> bool((y.compute() == cupy.arange(6).reshape(2, 3).T).all())
    True
    """
    return function


def _permutation(op: Operation) -> Callable[..., Any]:
    name = op.name

    def function(x: Any, axes: Any = None, *, method: str = "auto") -> Any:
        # 1. Validate (on the client: types, chunks, method, dtype, the axes with NumPy's rules).
        x = _checked(x, name)
        op.ladder.resolve(method, name)
        dtype = op.result_dtype(x._meta)
        axes = normalize_axes(axes, x.ndim)
        # 2. The graph: output block (b[axes[0]], b[axes[1]], ...) is input block (b[0], ...)
        # permuted by the kernel; Dask permutes the chunks likewise.
        index = tuple(range(x.ndim))
        return da.blockwise(functools.partial(_permute, name, axes, method=method),
                            tuple(index[axis] for axis in axes), x, index, dtype=dtype,
                            meta=_meta(x, x.ndim, dtype), token=f"gk-{name}")

    function.__doc__ = f"""Permute the axes of a Dask array of CuPy chunks, one
    :func:`gpukernels.{name}` per block: NumPy's ``transpose(x, axes)``.

    Parameters
    ----------
    x : dask.array.Array
        Any shape, with CuPy chunks of a dtype :func:`gpukernels.{name}` takes.
    axes : sequence of ints, optional
        A permutation of ``range(x.ndim)``; ``None`` reverses the axes.
    method : str, optional
        A rung of ``gpukernels.methods("{name}")``, or ``"auto"``, for every block.

    Returns
    -------
    dask.array.Array
        Axis ``i`` is axis ``axes[i]`` of ``x``, chunks permuted likewise; each block
        C-contiguous.

    Raises
    ------
    TypeError
        ``x`` is not a Dask array of CuPy chunks, its dtype is unsupported, or ``axes`` is not
        a sequence of integers.
    numpy.exceptions.AxisError
        An axis is out of range.
    ValueError
        Repeated or missing axes, chunks of unknown size, or an unknown ``method``.

    Examples
    --------
    >>> import cupy, dask.array as da, gpukernels.dask as gkd
    >>> x = da.from_array(cupy.zeros((4, 6, 8)), chunks=(2, 3, 8))
    >>> gkd.{name}(x, (2, 0, 1)).chunks
    ((8,), (2, 2), (3, 3))
    """
    return function


def _matmul(op: Operation) -> Callable[..., Any]:
    name = op.name

    def function(a: Any, b: Any, *, method: str = "auto", precision: str = "highest",
                 split_every: int | None = None) -> Any:
        # 1. Validate (on the client): types, chunks, method, shapes (NumPy's rules), dtype and
        # the alignment of the blocks that meet.
        a, b = _checked(a, name, "a"), _checked(b, name, "b")
        op.ladder.resolve(method, name)
        if not isinstance(precision, str):
            raise ValueError(f"precision must be a string such as 'highest', not {precision!r}")
        dtype = op.result_dtype(a._meta, b._meta)
        out_shape = matmul_shapes(a.shape, b.shape)[4]
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        ndim = builtins.max(a2.ndim, b2.ndim)
        a2 = a2[(None,) * (ndim - a2.ndim)]
        b2 = b2[(None,) * (ndim - b2.ndim)]
        if a2.chunks[-1] != b2.chunks[-2]:
            raise ValueError(
                f"{name}: the chunks of a's last axis {a2.chunks[-1]} and of b's second-to-last "
                f"axis {b2.chunks[-2]} differ; rechunk one to match the other, e.g. "
                f"b = b.rechunk({{{b.ndim - 2 if b.ndim > 1 else 0}: a.chunks[-1]}})")
        for axis in range(ndim - 2):
            if a2.shape[axis] != 1 and b2.shape[axis] != 1 and a2.chunks[axis] != b2.chunks[axis]:
                raise ValueError(
                    f"{name}: batch axis {axis} is chunked {a2.chunks[axis]} in a and "
                    f"{b2.chunks[axis]} in b; rechunk one to match the other")
        # 2. The graph: a product per block pair (output indices: batch..., i, k, j, with k the
        # contracted block index), then the sum over k.
        products_index = tuple(range(ndim + 1))
        a_index = products_index[:ndim]
        b_index = products_index[:ndim - 2] + (ndim - 1, ndim)
        products = da.blockwise(
            functools.partial(_product, name, method=method, precision=precision),
            products_index, a2, a_index, b2, b_index, adjust_chunks={ndim - 1: 1},
            dtype=dtype, meta=_meta(a, ndim + 1, dtype), concatenate=False,
            token=f"gk-{name}-products")
        total = da.reduction(
            products, _keep, functools.partial(_add_partials, dtype=dtype, last=True),
            combine=functools.partial(_add_partials, dtype=dtype, last=False), axis=ndim - 1,
            dtype=dtype, split_every=split_every, concatenate=False, meta=_meta(a, ndim, dtype),
            name=f"gk-{name}-sum")
        if a.ndim == 1:
            total = total[..., 0, :]
        if b.ndim == 1:
            total = total[..., 0]
        assert total.shape == out_shape, (total.shape, out_shape)
        return total

    function.__doc__ = f"""Matrix product of Dask arrays of CuPy chunks, one
    :func:`gpukernels.{name}` per pair of blocks, with NumPy's ``matmul`` semantics.

    Parameters
    ----------
    a, b : dask.array.Array
        Operands of shapes ``(..., M, K)`` and ``(..., K, N)`` (1-D operands promoted, batch
        axes broadcast, as NumPy does), with CuPy chunks. The chunks of ``a``'s last axis must
        equal those of ``b``'s second-to-last axis, and batch axes present in both must be
        chunked alike: a mismatch raises instead of rechunking.
    method : str, optional
        A rung of ``gpukernels.methods("{name}")``, or ``"auto"``, for every block pair.
    precision : {{"highest", "tf32"}}, optional
        As for :func:`gpukernels.{name}`.
    split_every : int, optional
        At most this many partial products are added in one task (Dask's default otherwise);
        more partials per task read each once but hold more memory at a time.

    Returns
    -------
    dask.array.Array
        ``a @ b`` in NumPy's result dtype. Each block product is rounded to that dtype, and an
        output block's partial products are added in float32 (float16 results) or float64
        (float32 results) and rounded once; integers wrap as NumPy's do.

    Raises
    ------
    TypeError
        An operand is not a Dask array of CuPy chunks, or the dtypes have no kernel.
    ValueError
        Shapes or chunks that do not line up, chunks of unknown size, or an unknown ``method``.

    Examples
    --------
    >>> import cupy, dask.array as da, gpukernels.dask as gkd
    >>> a = da.from_array(cupy.ones((4, 6), dtype=cupy.float32), chunks=(2, 3))
    >>> b = da.from_array(cupy.ones((6, 5), dtype=cupy.float32), chunks=(3, 5))
    >>> c = gkd.{name}(a, b)
    >>> c.chunks, float(c.compute()[0, 0])
    (((2, 2), (5,)), 6.0)
    """
    return function


def _reduction(op: Operation) -> Callable[..., Any]:
    name = op.name
    takes_dtype = "dtype" in inspect.signature(op.function).parameters

    def function(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False, *,
                 method: str = "auto", split_every: int | dict | None = None) -> Any:
        # 1. Validate (on the client): types, chunks, method, then NumPy's own errors for axis,
        # dtype and empty inputs, asked of the reference on a stand-in of at most one element.
        x = _checked(x, name)
        op.ladder.resolve(method, name)
        if dtype is not None and not takes_dtype:
            raise TypeError(f"{name}() got an unexpected keyword argument 'dtype'")
        options = {"dtype": dtype} if takes_dtype else {}
        result_dtype = op.result_dtype(x._meta, **options)
        normalize_axis(axis, x.ndim)
        _numpy_errors(op, x, axis=axis, keepdims=keepdims, **options)
        axes = axis if axis is None or isinstance(axis, tuple) else (axis,)
        # 2. The graph: the kernel reduces each block (partials of float16 kept in float32),
        # then groups of partials, up to the result.
        partial_dtype = _accumulator(result_dtype) if takes_dtype and \
            result_dtype.char == "e" else result_dtype
        first = functools.partial(_reduce_block, name, method,
                                  partial_dtype if takes_dtype else None)
        last = functools.partial(_reduce_block, name, method,
                                 result_dtype if takes_dtype else None)
        out_ndim = x.ndim if keepdims else x.ndim - len(
            range(x.ndim) if axes is None else axes)
        return da.reduction(x, first, last, combine=first, axis=axes, keepdims=keepdims,
                            dtype=result_dtype, split_every=split_every,
                            meta=_meta(x, out_ndim, result_dtype), name=f"gk-{name}")

    parameters = [p for p in inspect.signature(function).parameters.values()
                  if takes_dtype or p.name != "dtype"]
    function.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    dtype_text = f"""
    dtype : dtype, optional
        The result dtype, as for :func:`gpukernels.{name}` (float16 partial results are kept
        in float32 until the last step).""" if takes_dtype else ""
    function.__doc__ = f"""The {name} of a Dask array of CuPy chunks over the given axes,
    :func:`gpukernels.{name}` on every block and on every group of partial results.

    Parameters
    ----------
    x : dask.array.Array
        Any shape, with CuPy chunks.
    axis : None, int or tuple of ints, optional
        The axes to reduce (NumPy's rules); all of them by default.{dtype_text}
    keepdims : bool, optional
        Keep the reduced axes with length 1.
    method : str, optional
        A rung of ``gpukernels.methods("{name}")``, or ``"auto"``, for every task.
    split_every : int or dict, optional
        At most this many partial results are reduced in one task (Dask's default otherwise).

    Returns
    -------
    dask.array.Array
        NumPy's result dtype and shape. The same chunking gives bitwise the same result.

    Raises
    ------
    TypeError
        ``x`` is not a Dask array of CuPy chunks, or a dtype or ``axis`` NumPy refuses.
    numpy.exceptions.AxisError
        An axis is out of range.
    ValueError
        Duplicate axes, chunks of unknown size, an unknown ``method``, or a reduction NumPy
        refuses (the minimum or maximum of an empty axis).

    Examples
    --------
    >>> import cupy, dask.array as da, gpukernels.dask as gkd
    >>> x = da.from_array(cupy.arange(12, dtype=cupy.int32).reshape(3, 4), chunks=2)
    >>> gkd.{name}(x, axis=0).compute().tolist() == cupy.{name}(x.compute(), axis=0).tolist()
    True
    """
    return function


def _block_moments(method: str, x: Any, axis: tuple, keepdims: bool) -> Any:
    """The chunk step of var and std: the moments of one block, ``(*block result, parts, 3)``
    (see :func:`gpukernels.ops.moments.moment_states`)."""
    if isinstance(x, numpy.ndarray):  # the CPU tests' NumPy chunks: the same layout, by NumPy
        parts = numpy.stack([x.real, x.imag], axis=-1) if x.dtype.kind == "c" else x[..., None]
        parts = parts.astype(numpy.float64)
        count = numpy.ones_like(parts).sum(axis=axis, keepdims=keepdims)
        mean = parts.mean(axis=axis, keepdims=keepdims)
        m2 = parts.var(axis=axis, keepdims=keepdims) * count
        return numpy.stack([count, mean, m2], axis=-1)
    return moment_states(x, axis, keepdims, method)


def _merge_moments(states: Any, axis: tuple, keepdims: bool) -> Any:
    """Moments merged over ``axis`` (the combine step): with the merged count and mean, each
    part's squared deviations plus its count times its mean's squared distance from the
    merged mean, added in a fixed order."""
    if isinstance(states, list):  # a nested list per reduced block axis, as Dask hands them
        from dask.array.core import _concatenate2

        states = _concatenate2(states, axes=list(axis))
    xp = numpy if isinstance(states, numpy.ndarray) else _device.cupy
    count, mean, m2 = states[..., 0], states[..., 1], states[..., 2]
    total = count.sum(axis=axis, keepdims=True)
    with numpy.errstate(invalid="ignore", divide="ignore"):
        merged_mean = xp.where(total > 0, (count * mean).sum(axis=axis, keepdims=True) /
                               xp.where(total > 0, total, 1), xp.nan)
        spread = xp.where(count > 0, m2 + count * xp.square(mean - merged_mean), 0.0)
    merged = xp.stack([total, merged_mean, spread.sum(axis=axis, keepdims=True)], axis=-1)
    return merged if keepdims else merged.squeeze(axis)


def _finish_moments(name: str, count: int, ddof: float, result_dtype: numpy.dtype, states: Any,
                    axis: tuple, keepdims: bool) -> Any:
    """The aggregate step of var and std: merged moments to the result."""
    merged = _merge_moments(states, axis, keepdims)
    xp = numpy if isinstance(merged, numpy.ndarray) else _device.cupy
    with numpy.errstate(invalid="ignore", divide="ignore"):
        result = merged[..., 2].sum(axis=-1) / builtins.max(count - ddof, 0)
        if name == "std":
            result = xp.sqrt(result)
    return result.astype(result_dtype)


def _moments(op: Operation) -> Callable[..., Any]:
    name = op.name

    def function(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False, *,
                 ddof: Any = 0, method: str = "auto",
                 split_every: int | dict | None = None) -> Any:
        # 1. Validate (on the client), as for the reductions; ddof for var and std.
        x = _checked(x, name)
        op.ladder.resolve(method, name)
        result_dtype = op.result_dtype(x._meta, dtype=dtype)
        axes = normalize_axis(axis, x.ndim)
        options = {} if name == "mean" else {"ddof": ddof}
        _numpy_errors(op, x, axis=axis, dtype=dtype, keepdims=keepdims, **options)
        count = math.prod(x.shape[ax] for ax in axes)
        if count - (0 if name == "mean" else float(ddof)) <= 0:  # as NumPy warns
            warnings.warn("Mean of empty slice." if name == "mean" else
                          "Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=2)
        if name == "mean":
            if ddof != 0:
                raise TypeError("mean() got an unexpected keyword argument 'ddof'")
            # 2. The graph: the sum of the blocks (float64 for real results), divided by the
            # count once, in the result dtype.
            total_dtype = numpy.dtype(numpy.float64) if result_dtype.kind == "f" else result_dtype
            # this module's sum (the name is the builtin's inside this function's module code)
            total = globals()["sum"](x, axis=axis, dtype=total_dtype, keepdims=keepdims,
                                     method=method, split_every=split_every)
            return (total / count).astype(result_dtype)
        # 2. The graph: the moments of each block, merged along Dask's tree, finished once.
        out_ndim = x.ndim if keepdims else x.ndim - len(axes)
        return da.reduction(
            x, functools.partial(_block_moments, method),
            functools.partial(_finish_moments, name, count, float(ddof), result_dtype),
            combine=_merge_moments, axis=axes, keepdims=keepdims, dtype=result_dtype,
            split_every=split_every, concatenate=False,
            meta=_meta(x, out_ndim, result_dtype), name=f"gk-{name}")

    if name == "mean":
        function.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [p for p in inspect.signature(function).parameters.values() if p.name != "ddof"])
    ddof_text = "" if name == "mean" else """
    ddof : int or float, optional
        Delta degrees of freedom, as for :func:`gpukernels.{name}`."""
    how = ("the sum of every block (:func:`gpukernels.sum`, in float64 for real results) "
           "divided by the count" if name == "mean" else
           "the moments of every block (count, mean and squared deviations, in float64), "
           "merged along Dask's tree")
    function.__doc__ = f"""The {name} of a Dask array of CuPy chunks over the given axes:
    {how}.

    Parameters
    ----------
    x : dask.array.Array
        Any shape, with CuPy chunks.
    axis : None, int or tuple of ints, optional
        The axes to reduce (NumPy's rules); all of them by default.
    dtype : dtype, optional
        The result dtype, as for :func:`gpukernels.{name}`.
    keepdims : bool, optional
        Keep the reduced axes with length 1.{ddof_text.format(name=name)}
    method : str, optional
        A rung of ``gpukernels.methods("{name}")``, or ``"auto"``, for every task.
    split_every : int or dict, optional
        At most this many partial results are merged in one task (Dask's default otherwise).

    Returns
    -------
    dask.array.Array
        NumPy's result dtype and shape. The same chunking gives bitwise the same result.

    Raises
    ------
    TypeError
        ``x`` is not a Dask array of CuPy chunks, or a dtype or ``axis`` NumPy refuses.
    numpy.exceptions.AxisError
        An axis is out of range.
    ValueError
        Duplicate axes, chunks of unknown size, or an unknown ``method``.

    Examples
    --------
    >>> import cupy, dask.array as da, gpukernels.dask as gkd
    >>> x = da.from_array(cupy.arange(12, dtype=cupy.float32).reshape(3, 4), chunks=2)
    >>> bool(abs(gkd.{name}(x, axis=0).compute() - cupy.{name}(x.compute(), axis=0)).max() < 1e-6)
    True
    """
    return function


def _extreme_call(name: str, method: str, x: Any, axis: Any = None,
                  keepdims: bool = False) -> Any:
    """A block's extreme (``"min"``/``"max"``) or its index (``"argmin"``/``"argmax"``)."""
    return _kernel(name)(x, axis=axis, keepdims=keepdims, method=method)


def _arg_block(name: str, method: str, x: Any, axis: tuple, offset_info: Any) -> Any:
    """The chunk step of argmin and argmax: the block's extreme and its index in the whole
    array (Dask's ``arg_chunk`` with the kernels)."""
    from dask.array.reductions import arg_chunk

    extreme = functools.partial(_extreme_call, name[3:], method)
    return arg_chunk(extreme, functools.partial(_extreme_call, name, method), x, axis,
                     offset_info)


def _arg_merge(name: str, data: Any, axis: tuple, keepdims: bool, last: bool) -> Any:
    """Combine (``last`` False) or aggregate step of argmin and argmax: per result, the extreme
    of the blocks' extremes (NaN first) and the smallest index among the blocks that hold it,
    so that ties give the first index of the whole array, whatever the order of the blocks."""
    values, indices = data["vals"], data["arg"]
    xp = numpy if isinstance(values, numpy.ndarray) else _device.cupy
    flat = len(axis) == values.ndim or values.ndim == 1
    along = None if flat else axis[0]
    extreme = (xp.max if name == "argmax" else xp.min)(values, axis=along, keepdims=True)
    hit = values == extreme
    if values.dtype.kind == "f":
        hit |= xp.isnan(values) & xp.isnan(extreme)
    index = xp.where(hit, indices, numpy.iinfo(numpy.int64).max).min(axis=along, keepdims=True)
    if last:
        return index if keepdims else (index.reshape(()) if flat else index.squeeze(along))
    merged: Any
    try:
        merged = numpy.empty_like(extreme, shape=extreme.shape,
                                  dtype=[("vals", extreme.dtype), ("arg", index.dtype)])
    except TypeError:  # CuPy has no structured arrays: Dask takes a dict
        merged = {}
    merged["vals"], merged["arg"] = extreme, index
    return merged


def _arg(op: Operation) -> Callable[..., Any]:
    name = op.name

    def function(x: Any, axis: Any = None, keepdims: bool = False, *, method: str = "auto",
                 split_every: int | dict | None = None) -> Any:
        # 1. Validate (on the client): types, chunks, method, then NumPy's own errors.
        x = _checked(x, name)
        op.ladder.resolve(method, name)
        if axis is not None and (isinstance(axis, bool) or
                                 not isinstance(axis, (int, numpy.integer))):
            raise TypeError(f"{name} takes one integer axis or None, not {axis!r}")
        op.result_dtype(x._meta)
        normalize_axis(axis, x.ndim)
        _numpy_errors(op, x, axis=axis, keepdims=keepdims)
        # 2. The graph: Dask's arg-reduction, each block's extreme and index by the kernels,
        # merged keeping the first index of the extreme.
        from dask.array.reductions import arg_reduction

        return arg_reduction(
            x, functools.partial(_arg_block, name, method),
            functools.partial(_arg_merge, name, last=False),
            functools.partial(_arg_merge, name, last=True),
            axis=axis, keepdims=keepdims, split_every=split_every)

    function.__doc__ = f"""The {name} of a Dask array of CuPy chunks: each block's extreme and
    its index by :func:`gpukernels.{name[3:]}` and :func:`gpukernels.{name}`, then the first
    index of the extreme among the blocks, along Dask's tree.

    Parameters
    ----------
    x : dask.array.Array
        Any shape, with CuPy chunks.
    axis : None or int, optional
        The axis to search along; ``None`` gives a flat index into the whole array.
    keepdims : bool, optional
        Keep the searched axis with length 1.
    method : str, optional
        A rung of ``gpukernels.methods("{name}")``, or ``"auto"``, for every task.
    split_every : int or dict, optional
        At most this many partial results are merged in one task (Dask's default otherwise).

    Returns
    -------
    dask.array.Array
        int64 indices; ties give the first index, NaN counts as the extreme.

    Raises
    ------
    TypeError
        ``x`` is not a Dask array of CuPy chunks, a complex dtype, or ``axis`` not an integer
        or None.
    numpy.exceptions.AxisError
        The axis is out of range.
    ValueError
        An empty axis, chunks of unknown size, or an unknown ``method``.

    Examples
    --------
    >>> import cupy, dask.array as da, gpukernels.dask as gkd
    >>> x = da.from_array(cupy.asarray([[1, 9, 9], [9, 2, 3]], dtype=cupy.int32), chunks=2)
    >>> int(gkd.{name}(x).compute())
    {1 if name == "argmax" else 0}
    """
    return function


def _scan_block(name: str, method: str, x: Any, axis: Any = None, dtype: Any = None) -> Any:
    return _kernel(name)(x, axis=axis, dtype=dtype, method=method)


def _scan(op: Operation) -> Callable[..., Any]:
    name = op.name
    combine, identity = op.extra["combine"], op.extra["identity"]

    def function(x: Any, axis: Any = None, dtype: Any = None, *, method: str = "auto") -> Any:
        # 1. Validate (on the client): types, chunks, method, then NumPy's own errors for axis
        # and dtype, asked of the reference on a stand-in of at most one element.
        x = _checked(x, name)
        op.ladder.resolve(method, name)
        result_dtype = op.result_dtype(x._meta, dtype=dtype)
        _numpy_errors(op, x, axis=axis, dtype=dtype)
        if axis is None or not x.ndim:
            # Flattened first: Dask's reshape joins each block row into contiguous chunks
            # (cumreduction's own flattening rechunks into pieces of npartitions elements).
            x, axis = x.reshape(-1), 0
        else:
            axis = operator.index(axis) % x.ndim
        # 2. The graph: the kernel scans each block; each block then takes the last values of
        # the blocks before it along the axis, one block after another (Dask's sequential
        # cumreduction), so a given chunking always combines in the same order.
        block = functools.partial(_scan_block, name, method)
        block.__name__ = f"gk-{name}"  # type: ignore[attr-defined]  # Dask names tasks by it
        return da.reductions.cumreduction(block, combine, identity, x, axis=axis,
                                          dtype=result_dtype, method="sequential")

    function.__doc__ = f"""The cumulative {name[3:]} of a Dask array of CuPy chunks along an axis,
    :func:`gpukernels.{name}` on every block, then each block combined with the last values of
    the blocks before it.

    Parameters
    ----------
    x : dask.array.Array
        Any shape, with CuPy chunks.
    axis : int, optional
        The axis to scan; ``None`` scans the flattened array (``x.reshape(-1)``: Dask joins
        each row of blocks into contiguous chunks).
    dtype : dtype, optional
        The result dtype, as for :func:`gpukernels.{name}`.
    method : str, optional
        A rung of ``gpukernels.methods("{name}")``, or ``"auto"``, for every task.

    Returns
    -------
    dask.array.Array
        NumPy's result dtype and shape. The same chunking gives bitwise the same result.

    Raises
    ------
    TypeError
        ``x`` is not a Dask array of CuPy chunks, or a dtype or ``axis`` NumPy refuses.
    numpy.exceptions.AxisError
        ``axis`` is out of range.
    ValueError
        Chunks of unknown size, or an unknown ``method``.

    Examples
    --------
    >>> import cupy, dask.array as da, gpukernels.dask as gkd
    >>> x = da.from_array(cupy.arange(1, 7, dtype=cupy.int32).reshape(2, 3), chunks=2)
    >>> gkd.{name}(x, axis=1).compute().tolist() == cupy.{name}(x.compute(), axis=1).tolist()
    True
    """
    return function


_BUILDERS: dict[str, Callable[[Operation], Callable[..., Any]]] = {
    "swap_last_axes": _swap_last_axes, "permutation": _permutation, "matmul": _matmul,
    "reduction": _reduction, "scan": _scan, "moments": _moments, "arg": _arg}


def _export(op: Operation) -> Callable[..., Any]:
    function = _BUILDERS[op.kind](op)
    function.__name__ = function.__qualname__ = op.name
    function.__module__ = __name__
    return function


for _op in OPERATIONS.values():
    globals()[_op.name] = _export(_op)
del _op


def __getattr__(name: str) -> Any:
    """Only for names no operation has (the operations' functions are set above)."""
    raise AttributeError(f"module 'gpukernels.dask' has no attribute {name!r}; it has one "
                         f"function per operation: {', '.join(OPERATIONS)}")
