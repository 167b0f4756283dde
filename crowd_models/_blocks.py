"""The per-block arithmetic of the chunked and Dask EMs (``models/_chunked.py``):
what a Dask worker runs, so NumPy, SciPy and pandas only (a worker that
unpickles these functions imports no PyMC), and the E-step's normalisation,
which every family's EM shares (``_common`` re-exports it).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd
import scipy.sparse as sp

from crowd_models import _dims as D


def posterior_from_joint(joint: np.ndarray, *, overwrite: bool = False
                         ) -> tuple[np.ndarray, np.ndarray]:
    """(item_class_prob, per-item log marginal likelihood) from the joint.

    The log-sum-exp with the row maximum taken out, by hand: scipy's
    ``logsumexp`` was 64% of a Dawid-Skene EM at 10^6 labels, and one
    exponential per cell (reused for the probabilities) halves the work. With
    ``overwrite`` the probabilities take the joint's own memory (a caller's
    temporary): one (item, class) array fewer at the EM's peak."""
    top = joint.max(axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)  # a row of -inf stays -inf
    weights = np.subtract(joint, top, out=joint if overwrite else None)
    np.exp(weights, out=weights)  # in place: one (item, class) array, not three
    total = weights.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore"):
        ll = (np.log(total) + top)[:, 0]
    weights /= total
    return weights, ll


class Sums(NamedTuple):
    """What a pass returns: expected counts (annotator * K + label, true class),
    class totals (K,), the labels' marginal log-likelihood."""

    counts: np.ndarray
    totals: np.ndarray
    log_likelihood: float


def block_matrix(offsets: np.ndarray, pairs: np.ndarray, width: int) -> sp.csr_array:
    """The block's (item, annotator * K + label) count matrix, straight from the
    item offsets and codes (no sort: products add a repeated entry twice)."""
    index = np.int32 if len(pairs) < np.iinfo(np.int32).max else np.int64
    return sp.csr_array((np.ones(len(pairs)), pairs.astype(index), offsets.astype(index)),
                        shape=(len(offsets) - 1, width))


def block_posterior(matrix, log_rates, K: int):
    """(item, class) posterior and per-item log-likelihood of a block; with
    ``log_rates`` None, the soft majority vote (log-likelihood NaN)."""
    if log_rates is None:
        votes = matrix @ np.tile(np.eye(K), (matrix.shape[1] // K, 1))
        total = votes.sum(axis=1, keepdims=True)
        prob = np.divide(votes, total, out=np.full_like(votes, 1.0 / K), where=total > 0)
        return prob, np.full(len(prob), np.nan)
    per_pair, log_prior = log_rates
    joint = matrix @ per_pair
    joint += log_prior
    return posterior_from_joint(joint, overwrite=True)


def block_sums(matrix, log_rates, K: int, out=None) -> Sums:
    prob, item_ll = block_posterior(matrix, log_rates, K)
    if out is not None:
        out[:] = prob
    return Sums(matrix.T @ prob, prob.sum(axis=0), float(item_ll.sum()))


def add_sums(*parts: Sums) -> Sums:
    return Sums(sum(p.counts for p in parts), sum(p.totals for p in parts),
                sum(p.log_likelihood for p in parts))


class Block(NamedTuple):
    """A Dask partition as the chunked EM reads it: item offsets, narrow codes
    ``annotator * K + label`` grouped by item, and the items in that order."""

    offsets: np.ndarray
    pairs: np.ndarray
    items: pd.Index


def partition_block(frame: pd.DataFrame, J: int, K: int) -> Block:
    """A partition's labels as a :class:`Block`, codes checked."""
    annotator = frame["annotator"].to_numpy()
    label = frame["label"].to_numpy()
    for name, codes, size in (("annotator", annotator, J), ("label", label, K)):
        if len(codes) and (codes.min() < 0 or codes.max() >= size):
            raise ValueError(f"{name} codes must lie in 0..{size - 1}, a partition holds "
                             f"{codes.min()}..{codes.max()}; give the DaskAnnotations "
                             f"{'annotators' if name == 'annotator' else 'classes'}= of the "
                             f"right size.")
    pairs = (annotator.astype(np.int64) * K + label).astype(np.min_scalar_type(J * K - 1))
    index = frame.index
    if index.is_monotonic_increasing:  # sorted (as divisions make it): no hashing
        values = index.to_numpy()
        starts = np.flatnonzero(values[1:] != values[:-1]) + 1
        offsets = np.concatenate([[0], starts, [len(values)]]).astype(np.int64)
        return Block(offsets, pairs, pd.Index(values[offsets[:-1]], name=D.ITEM))
    codes, items = pd.factorize(index)
    if len(codes) > 1 and np.any(codes[1:] < codes[:-1]):  # an item's rows not together
        pairs = pairs[np.argsort(codes, kind="stable")]
    offsets = np.zeros(len(items) + 1, dtype=np.int64)
    np.cumsum(np.bincount(codes, minlength=len(items)), out=offsets[1:])
    return Block(offsets, pairs, pd.Index(items, name=D.ITEM))


def block_sums_of(block: Block, log_rates, width: int, K: int) -> Sums:
    return block_sums(block_matrix(block.offsets, block.pairs, width), log_rates, K)


def block_frame(block: Block, log_rates, width: int, K: int, columns) -> pd.DataFrame:
    prob, _ = block_posterior(block_matrix(block.offsets, block.pairs, width), log_rates, K)
    return pd.DataFrame(prob, index=block.items, columns=columns)
