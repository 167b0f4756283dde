"""A PyTensor operation for the long table: sum rows of a small matrix into a
larger one along an index pair, with its own adjoint as the gradient.

``scatter_rows(values, dst, src, n_out)`` is the (n_out, K) matrix whose row
``r`` is the sum of ``values[src[e]]`` over the entries ``e`` with
``dst[e] == r``. The families' summed-out true label is this with ``dst`` the
item of each annotation and ``src`` its (annotator, label) pair: one pass over
the table, where a gather followed by a scatter-add writes and reads an
(annotation, K) intermediate twice (forward and gradient). The operation is
linear in ``values``, and its adjoint is the same operation with ``dst`` and
``src`` swapped, so gradients (and gradients of gradients) need nothing else.

It runs as a numba loop on PyTensor's numba backend (PyTensor's default, and
nutpie's), as a segment sum on its JAX backend (NumPyro), and as NumPy
elsewhere. The numba and NumPy versions accumulate in table order, entry by
entry, so they give the same sums as ``np.add.at``.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType, disconnected_type
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.graph.replace import _vectorize_node
from pytensor.link.numba.dispatch.basic import (
    numba_njit,
    register_funcify_default_op_cache_key,
)
from pytensor.raise_op import Assert
from pytensor.tensor.blockwise import vectorize_node_fallback
from pytensor.tensor.type import integer_dtypes

__all__ = ["scatter_rows", "ScatterRows", "register_jax"]


class ScatterRows(Op):
    """``out[dst[e]] += values[src[e]]`` into an (n_out, K) matrix of zeros; see
    the module docstring. With ``rows_like``, the fourth input is an array whose
    length is n_out (the gradient's form: the row count is then a static shape
    for JAX, whatever the graph's constants)."""

    __props__ = ("rows_like",)

    def __init__(self, rows_like: bool = False):
        self.rows_like = rows_like

    def make_node(self, values, dst, src, n_out):
        values = pt.as_tensor_variable(values)
        dst, src = pt.as_tensor_variable(dst), pt.as_tensor_variable(src)
        n_out = pt.as_tensor_variable(n_out)
        if values.ndim != 2:
            raise TypeError(f"values must be a matrix, got {values.ndim} dimensions.")
        for name, index in (("dst", dst), ("src", src)):
            if index.ndim != 1 or index.dtype not in integer_dtypes:
                raise TypeError(f"{name} must be a vector of integers, got {index.type}.")
        if not self.rows_like and (n_out.ndim != 0 or n_out.dtype not in integer_dtypes):
            raise TypeError(f"n_out must be an integer scalar, got {n_out.type}.")
        out = pt.matrix(dtype=values.dtype, shape=(None, values.type.shape[1]))
        return Apply(self, [values, dst, src, n_out], [out])

    def perform(self, node, inputs, output_storage):
        values, dst, src, n_out = inputs
        rows = len(n_out) if self.rows_like else int(n_out)
        if len(dst) != len(src):
            raise ValueError("scatter_rows: dst and src differ in length")
        if len(dst) and (dst.min() < 0 or dst.max() >= rows
                         or src.min() < 0 or src.max() >= len(values)):
            raise IndexError("scatter_rows: an index lies outside its table")
        out = np.zeros((rows, values.shape[1]), dtype=values.dtype)
        if values.shape[1] < _WIDE:
            np.add.at(out, dst, values[src])
        else:
            _add_in_rounds(out, dst, values, src)
        output_storage[0][0] = out

    def infer_shape(self, node, shapes):
        rows = shapes[3][0] if self.rows_like else node.inputs[3]
        return [(rows, shapes[0][1])]

    def connection_pattern(self, node):
        return [[True], [False], [False], [False]]

    def pullback(self, inputs, outputs, cotangents):
        values, dst, src, _ = inputs
        # the adjoint: indices swapped, as many rows as values has
        return [ScatterRows(rows_like=True)(cotangents[0], src, dst, values),
                *(disconnected_type() for _ in range(3))]

    def pushforward(self, inputs, outputs, tangents):
        if isinstance(tangents[0].type, DisconnectedType):
            return [disconnected_type()]
        return [self(tangents[0], *inputs[1:])]  # linear in values


_WIDE = 64
"""From this many columns, ``perform`` adds in rounds (``_add_in_rounds``): the
many draws of a vectorised graph (``_points``) as columns, where ``np.add.at``
adds row by row."""


def _add_in_rounds(out, dst, values, src) -> None:
    """``np.add.at(out, dst, values[src])``, the same sums: round r adds every
    output row's r-th entry (in table order) at once, so that no round names a row
    twice and each row still receives its entries in table order."""
    order = np.argsort(dst, kind="stable")
    ordered = dst[order]
    first = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    rank = np.arange(len(dst)) - np.repeat(first, np.diff(np.r_[first, len(dst)]))
    by_round = order[np.argsort(rank, kind="stable")]
    bounds = np.r_[0, np.cumsum(np.bincount(rank))] if len(dst) else [0]
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        entries = by_round[lo:hi]
        out[dst[entries]] += values[src[entries]]


def scatter_rows(values, dst, src, n_out):
    """(n_out, K) sums of ``values[src[e]]`` over entries ``e`` with ``dst[e] == r``."""
    return ScatterRows()(values, dst, src, n_out)


def _unbatched(batched, core):
    """``batched`` without the leading axes ``vectorize_graph`` gave it, asserting
    at run time that they repeat one array. Indices taken from the data pick up
    those axes through a shape of the drawn values (PyTensor broadcasts a batched
    variable's shape over the batch), but every draw of a batch has the same."""
    extra = batched.ndim - core.ndim
    if extra == 0:
        return batched
    first = batched[(0,) * extra]
    same = pt.all(pt.eq(batched, first))
    return Assert("scatter_rows over draws: the draws' index arrays differ")(first, same)


@_vectorize_node.register(ScatterRows)
def _vectorize_scatter_rows(op, node, values, dst, src, n_out):
    """Batched ``values`` (leading axes over draws, as ``vectorize_graph`` makes
    them) as more columns of the one operation, the draws' sums side by side."""
    if values.ndim == 2:
        return vectorize_node_fallback(op, node, values, dst, src, n_out)
    dst, src, n_out = (_unbatched(b, c) for b, c in zip(
        (dst, src, n_out), node.inputs[1:], strict=True))
    batch = values.shape[:-2]
    rows, k = values.shape[-2], values.shape[-1]
    lead = list(range(values.ndim - 2))
    wide = values.transpose(values.ndim - 2, *lead, values.ndim - 1).reshape((rows, -1))
    out = op(wide, dst, src, n_out)
    out = out.reshape((out.shape[0], *batch, k))
    return [out.transpose(*[a + 1 for a in lead], 0, values.ndim - 1)]


# PyTensor keys numba's disk cache on the op's type and props only: bump this
# whenever the loop below changes, or a stale compiled loop is served.
_NUMBA_LOOP_VERSION = 2


@register_funcify_default_op_cache_key(ScatterRows)
def _numba_scatter_rows(op, node, **kwargs):
    rows_like = op.rows_like

    @numba_njit
    def scatter(values, dst, src, n_out):
        k = values.shape[1]
        n_in = values.shape[0]
        rows = n_out.shape[0] if rows_like else n_out.item()
        if dst.shape[0] != src.shape[0]:
            raise ValueError("scatter_rows: dst and src differ in length")
        out = np.zeros((rows, k), dtype=values.dtype)
        for e in range(dst.shape[0]):
            d, s = dst[e], src[e]
            # codes set by hand (pm.set_data) may lie outside the tables
            if d < 0 or d >= rows or s < 0 or s >= n_in:
                raise IndexError("scatter_rows: an index lies outside its table")
            for c in range(k):
                out[d, c] += values[s, c]
        return out

    return scatter, _NUMBA_LOOP_VERSION


_JAX_REGISTERED = False


def register_jax() -> None:
    """Teach PyTensor's JAX backend the operation (imports JAX; call before a JAX
    sampler compiles the model). The output's row count must be a constant of
    the graph there, as PyMC makes every data length when it hands a model to
    JAX: JAX compiles for fixed shapes."""
    global _JAX_REGISTERED
    if _JAX_REGISTERED:
        return
    import jax
    from pytensor.link.jax.dispatch import jax_funcify
    from pytensor.tensor.basic import get_underlying_scalar_constant_value
    from pytensor.tensor.exceptions import NotScalarConstantError

    @jax_funcify.register(ScatterRows)
    def _jax_scatter_rows(op, node, **kwargs):
        if op.rows_like:
            def scatter_like(values, dst, src, like):
                return jax.ops.segment_sum(values[src], dst, num_segments=like.shape[0])

            return scatter_like
        try:
            rows = int(get_underlying_scalar_constant_value(node.inputs[3]))
        except NotScalarConstantError:
            raise NotImplementedError(
                "scatter_rows on JAX needs a constant number of output rows (JAX "
                "compiles for fixed shapes): give the graph constant data lengths, as "
                "PyMC does when it hands a model to JAX.") from None

        def scatter(values, dst, src, n_out):
            return jax.ops.segment_sum(values[src], dst, num_segments=rows)

        return scatter

    _JAX_REGISTERED = True
