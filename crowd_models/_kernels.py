"""PyTensor operations for the long table: sum rows of a small matrix into a
larger one along an index pair, with its own adjoint as the gradient; and the
summed-out true label built on it.

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

``summed_out_truth(per_pair, log_prior, dst, src, n_out)`` adds a log prior to
that sum and gives each row's log-sum-exp (an item's log-likelihood with its
true class summed out) and softmax (the class's posterior) from the same pass;
its gradient is one more pass (``TruthPullback``). The families' likelihood is
this one operation in the graph that nutpie compiles, not a dozen.
"""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType, disconnected_type
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.graph.replace import _vectorize_node, vectorize_graph
from pytensor.link.numba.dispatch.basic import (
    numba_njit,
    register_funcify_default_op_cache_key,
)
from pytensor.raise_op import Assert
from pytensor.tensor.blockwise import vectorize_node_fallback
from pytensor.tensor.type import integer_dtypes

__all__ = ["scatter_rows", "ScatterRows", "summed_out_truth", "SummedOutTruth",
           "TruthPullback", "register_jax"]


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
        dst, src = _index_vector("dst", dst), _index_vector("src", src)
        n_out = pt.as_tensor_variable(n_out)
        if values.ndim != 2:
            raise TypeError(f"values must be a matrix, got {values.ndim} dimensions.")
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


def _constant_rows(n_out) -> int:
    from pytensor.tensor.basic import get_underlying_scalar_constant_value
    from pytensor.tensor.exceptions import NotScalarConstantError
    try:
        return int(get_underlying_scalar_constant_value(n_out))
    except NotScalarConstantError:
        raise NotImplementedError(
            "scatter_rows on JAX needs a constant number of output rows (JAX "
            "compiles for fixed shapes): give the graph constant data lengths, as "
            "PyMC does when it hands a model to JAX.") from None


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

    @jax_funcify.register(ScatterRows)
    def _jax_scatter_rows(op, node, **kwargs):
        if op.rows_like:
            def scatter_like(values, dst, src, like):
                return jax.ops.segment_sum(values[src], dst, num_segments=like.shape[0])

            return scatter_like
        rows = _constant_rows(node.inputs[3])

        def scatter(values, dst, src, n_out):
            return jax.ops.segment_sum(values[src], dst, num_segments=rows)

        return scatter

    @jax_funcify.register(SummedOutTruth)
    def _jax_summed_out_truth(op, node, **kwargs):
        rows = _constant_rows(node.inputs[4])

        def truth(per_pair, log_prior, dst, src, n_out):
            joint = jax.ops.segment_sum(per_pair[src], dst, num_segments=rows) + log_prior
            return (jax.nn.logsumexp(joint, axis=-1), jax.nn.softmax(joint, axis=-1))

        return truth

    @jax_funcify.register(TruthPullback)
    def _jax_truth_pullback(op, node, **kwargs):
        shared = op.shared_prior

        def pullback(prob, g_total, dst, src, per_pair):
            g_joint = prob * g_total[:, None]
            g_pairs = jax.ops.segment_sum(g_joint[dst], src, num_segments=per_pair.shape[0])
            return g_pairs, g_joint.sum(axis=0, keepdims=True) if shared else g_joint

        return pullback

    _JAX_REGISTERED = True


# ------------------------------------------------- the summed-out true label


class _PriorRows(Op):
    """The two operations below: ``shared_prior`` says whether the prior is one
    row for every item or a row per item; two differentiable inputs (the first
    two), two outputs."""

    __props__ = ("shared_prior",)

    def __init__(self, shared_prior: bool):
        self.shared_prior = shared_prior

    def connection_pattern(self, node):
        return [[True, True], [True, True], [False, False], [False, False], [False, False]]


class SummedOutTruth(_PriorRows):
    """Each item's log-likelihood with its true class summed out (output 0, a
    vector) and that class's posterior (output 1), in one pass over the table:
    ``joint = scatter_rows(per_pair, dst, src, n_out) + log_prior``, then each
    row's log-sum-exp and softmax. ``log_prior`` is (1, K), one prior for every
    item (``shared_prior``), or (n_out, K).

    The gradient of the log-likelihoods alone (what a sampler asks for) is
    :class:`TruthPullback`, one more pass; with a cotangent on the posterior it
    is built from ``ScatterRows``. Separate operations for the joint, the
    log-sum-exp, the softmax and their gradients made nutpie's first compile of
    the two-coin model about 3 s slower (DEVELOPING.md)."""

    def make_node(self, per_pair, log_prior, dst, src, n_out):
        per_pair, log_prior = pt.as_tensor_variable(per_pair), pt.as_tensor_variable(log_prior)
        dst, src = _index_vector("dst", dst), _index_vector("src", src)
        n_out = pt.as_tensor_variable(n_out)
        for name, matrix in (("per_pair", per_pair), ("log_prior", log_prior)):
            if matrix.ndim != 2:
                raise TypeError(f"{name} must be a matrix, got {matrix.ndim} dimensions.")
        if self.shared_prior and log_prior.type.shape[0] != 1:
            raise TypeError("a shared log_prior must be one row of static length 1.")
        if n_out.ndim != 0 or n_out.dtype not in integer_dtypes:
            raise TypeError(f"n_out must be an integer scalar, got {n_out.type}.")
        dtype = pytensor.scalar.upcast(per_pair.dtype, log_prior.dtype)
        per_pair, log_prior = pt.cast(per_pair, dtype), pt.cast(log_prior, dtype)
        k = per_pair.type.shape[1] or log_prior.type.shape[1]
        outputs = [pt.vector(dtype=dtype), pt.matrix(dtype=dtype, shape=(None, k))]
        return Apply(self, [per_pair, log_prior, dst, src, n_out], outputs)

    def perform(self, node, inputs, output_storage):
        per_pair, log_prior, dst, src, n_out = inputs
        rows = int(n_out)
        if len(log_prior) != (1 if self.shared_prior else rows):
            raise ValueError("summed_out_truth: log_prior has the wrong number of rows")
        out = np.empty((rows, per_pair.shape[1]), dtype=per_pair.dtype)
        joint = _scattered(per_pair, dst, src, rows) + log_prior
        top = joint.max(axis=1, keepdims=True)
        overflow = top[:, 0] == np.inf
        top[~np.isfinite(top)] = 0.0  # a row of -inf: log 0, as pt.logsumexp gives
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            np.exp(joint - top, out=out)
            total = out.sum(axis=1, keepdims=True)
            output_storage[0][0] = (np.log(total) + top)[:, 0]
            out /= total
        out[overflow] = np.nan
        output_storage[1][0] = out

    def infer_shape(self, node, shapes):
        rows = node.inputs[4]
        return [(rows,), (rows, shapes[0][1])]

    def pullback(self, inputs, outputs, cotangents):
        per_pair, log_prior, dst, src, _ = inputs
        prob = outputs[1]
        g_total, g_prob = (None if isinstance(c.type, DisconnectedType) else c
                           for c in cotangents)
        unused = [disconnected_type() for _ in range(3)]
        if g_prob is None:
            return [*TruthPullback(self.shared_prior)(prob, g_total, dst, src, per_pair),
                    *unused]
        # the softmax's adjoint, plus the log-sum-exp's where it has a cotangent
        g_joint = prob * (g_prob - (g_prob * prob).sum(axis=1, keepdims=True))
        if g_total is not None:
            g_joint = g_joint + prob * g_total[:, None]
        g_prior = g_joint.sum(axis=0, keepdims=True) if self.shared_prior else g_joint
        return [ScatterRows(rows_like=True)(g_joint, src, dst, per_pair), g_prior, *unused]


class TruthPullback(_PriorRows):
    """The gradient of :class:`SummedOutTruth`'s log-likelihoods: with ``g`` their
    cotangent, ``g[i] * prob[i]`` summed into the rows ``src[e]`` of a matrix
    shaped as ``per_pair`` over the entries ``e`` with ``dst[e] == i`` (output
    0), and over the items into the prior's one row, or kept per item (output
    1). Linear in ``g`` and in ``prob``, so its own gradient is a scatter."""

    def make_node(self, prob, g_total, dst, src, per_pair):
        prob, g_total = pt.as_tensor_variable(prob), pt.as_tensor_variable(g_total)
        dst, src = _index_vector("dst", dst), _index_vector("src", src)
        per_pair = pt.as_tensor_variable(per_pair)
        g_total = pt.cast(g_total, prob.dtype)
        rows = 1 if self.shared_prior else None
        outputs = [pt.matrix(dtype=prob.dtype, shape=per_pair.type.shape),
                   pt.matrix(dtype=prob.dtype, shape=(rows, prob.type.shape[1]))]
        return Apply(self, [prob, g_total, dst, src, per_pair], outputs)

    def perform(self, node, inputs, output_storage):
        prob, g_total, dst, src, per_pair = inputs
        g_joint = prob * g_total[:, None]
        output_storage[0][0] = _scattered(g_joint, src, dst, len(per_pair))
        output_storage[1][0] = (g_joint.sum(axis=0, keepdims=True) if self.shared_prior
                                else g_joint)

    def infer_shape(self, node, shapes):
        return [shapes[4], (1, shapes[0][1]) if self.shared_prior else shapes[0]]

    def pullback(self, inputs, outputs, cotangents):
        prob, g_total, dst, src, _ = inputs
        # each item's cotangent row: its pairs' rows plus the prior's
        back = [scatter_rows(c, dst, src, prob.shape[0]) if i == 0 else c
                for i, c in enumerate(cotangents)
                if not isinstance(c.type, DisconnectedType)]
        per_item = back[0] if len(back) == 1 else back[0] + back[1]
        return [per_item * g_total[:, None], (per_item * prob).sum(axis=1),
                *(disconnected_type() for _ in range(3))]


def _index_vector(name, index):
    index = pt.as_tensor_variable(index)
    if index.ndim != 1 or index.dtype not in integer_dtypes:
        raise TypeError(f"{name} must be a vector of integers, got {index.type}.")
    return index


def _scattered(values, dst, src, rows):
    """NumPy ``scatter_rows``, with its checks."""
    out = [[None]]
    ScatterRows().perform(None, (values, dst, src, rows), out)
    return out[0][0]


def summed_out_truth(per_pair, log_prior, dst, src, n_out):
    """(each item's log marginal likelihood, its true class's posterior); see
    :class:`SummedOutTruth`. ``log_prior`` is a vector or a matrix of one row of
    static length 1 (one prior for all items), or an (n_out, K) matrix."""
    log_prior = pt.as_tensor_variable(log_prior)
    if log_prior.ndim == 1:
        log_prior = log_prior[None, :]
    shared = log_prior.type.shape[0] == 1
    return SummedOutTruth(shared_prior=shared)(per_pair, log_prior, dst, src, n_out)


def _unfused_truth(per_pair, log_prior, dst, src, n_out):
    """:class:`SummedOutTruth` as separate operations, each with a batched form."""
    joint = scatter_rows(per_pair, dst, src, n_out) + log_prior
    return [pt.logsumexp(joint, axis=-1), pt.special.softmax(joint, axis=-1)]


@_vectorize_node.register(SummedOutTruth)
def _vectorize_summed_out_truth(op, node, *batched):
    """Over draws (``_points``), the separate operations: ``scatter_rows`` batches
    the draws as more columns of one pass."""
    if all(b.ndim == c.ndim for b, c in zip(batched, node.inputs, strict=True)):
        return vectorize_node_fallback(op, node, *batched)
    core = _unfused_truth(*node.inputs)
    return vectorize_graph(core, replace=dict(zip(node.inputs, batched, strict=True)))


# numba's disk cache: bump with any change to the loops below (see _NUMBA_LOOP_VERSION)
_NUMBA_TRUTH_VERSION = 4


@register_funcify_default_op_cache_key(SummedOutTruth)
def _numba_summed_out_truth(op, node, **kwargs):
    shared = op.shared_prior

    # NumPy's error model: a row of -inf (a probability of 0 wherever the sampler
    # strays) gives 0 / 0 = nan, as the softmax does, not ZeroDivisionError
    @numba_njit(error_model="numpy")
    def truth(per_pair, log_prior, dst, src, n_out):
        k, n_in, rows = per_pair.shape[1], per_pair.shape[0], n_out.item()
        if log_prior.shape[0] != (1 if shared else rows):
            raise ValueError("summed_out_truth: log_prior has the wrong number of rows")
        if dst.shape[0] != src.shape[0]:
            raise ValueError("scatter_rows: dst and src differ in length")
        joint = np.zeros((rows, k), dtype=per_pair.dtype)
        for e in range(dst.shape[0]):
            d, s = dst[e], src[e]
            if d < 0 or d >= rows or s < 0 or s >= n_in:
                raise IndexError("scatter_rows: an index lies outside its table")
            for c in range(k):
                joint[d, c] += per_pair[s, c]
        # each row's largest entry, then the exponentials as one array (a loop of
        # branches between the exponentials ran 25% slower), then the sums
        top = np.empty(rows, dtype=per_pair.dtype)
        for i in range(rows):
            r = 0 if shared else i
            largest = -np.inf
            for c in range(k):
                joint[i, c] += log_prior[r, c]
                largest = max(largest, joint[i, c])
            top[i] = largest
            shift = largest if np.isfinite(largest) else 0.0  # -inf: log 0, as pt.logsumexp
            for c in range(k):
                joint[i, c] -= shift
        np.exp(joint, joint)
        total = np.empty(rows, dtype=per_pair.dtype)
        for i in range(rows):
            weight = 0.0
            for c in range(k):
                weight += joint[i, c]
            scale = np.nan if top[i] == np.inf else 1.0 / weight  # as the softmax
            for c in range(k):
                joint[i, c] *= scale
            total[i] = np.log(weight) + (top[i] if np.isfinite(top[i]) else 0.0)
        return total, joint

    return truth, _NUMBA_TRUTH_VERSION


@register_funcify_default_op_cache_key(TruthPullback)
def _numba_truth_pullback(op, node, **kwargs):
    shared = op.shared_prior

    @numba_njit
    def pullback(prob, g_total, dst, src, per_pair):
        rows, k = prob.shape
        n_pairs = per_pair.shape[0]
        out = np.zeros((n_pairs, k), dtype=prob.dtype)
        for e in range(dst.shape[0]):
            d, s = dst[e], src[e]
            if d < 0 or d >= rows or s < 0 or s >= n_pairs:
                raise IndexError("scatter_rows: an index lies outside its table")
            for c in range(k):
                out[s, c] += prob[d, c] * g_total[d]
        g_prior = np.zeros((1 if shared else rows, k), dtype=prob.dtype)
        for i in range(rows):
            r = 0 if shared else i
            for c in range(k):
                g_prior[r, c] += prob[i, c] * g_total[i]
        return out, g_prior

    return pullback, _NUMBA_TRUTH_VERSION
