"""The EM of crowds too large for ``Annotations``: a pass over the labels a block
of items at a time (:class:`~crowd_models.large.ChunkedAnnotations`) or a Dask
partition at a time (:class:`~crowd_models.large.DaskAnnotations`), for the
families whose E-step is per item and whose M-step reads only sums over items:
the expected (annotator, true class, label) counts and the class totals.

One pass at given parameters returns those sums and the labels' marginal
log-likelihood, so the EM map and the log posterior that SQUAREM checks are the
same pass (:func:`run_em` keeps the last two), and ``_em.iterate_em_map`` runs
unchanged: the same extrapolation and the same stopping rule as the in-memory
EM, hence the same fixed point. A block is the sparse (item, annotator * K +
label) count matrix of its items, built from the narrow codes when the block is
read, so nothing of the labels' length is kept but the codes themselves.
"""

from __future__ import annotations

import logging
import time
from typing import NamedTuple

import numpy as np
import pandas as pd

from crowd_models import _dims as D
from crowd_models import _trust
from crowd_models._blocks import (
    Sums,
    add_sums,
    block_frame,
    block_matrix,
    block_sums,
    block_sums_of,
    partition_block,
)
from crowd_models.data import Annotations
from crowd_models.large import ChunkedAnnotations, DaskAnnotations
from crowd_models.models import _em

LOG = logging.getLogger("crowd_models.large")
"""Each EM pass logs its number, seconds and log-likelihood at INFO level
(``logging.basicConfig(level=logging.INFO)`` shows them)."""

RETRIES = 2
"""A Dask pass that fails because a worker died is run again, from the same
parameters and with the partitions' blocks read anew, this many times."""

_LOST_WORKER = ("KilledWorker", "CommClosedError", "FutureCancelledError")


class LargeFit(NamedTuple):
    """:func:`run_em`'s result; ``coords()`` and ``n_labels()`` stand in for the
    annotations in ``_common.em_dataset``."""

    params: dict
    n_iter: int
    converged: bool
    sums: Sums
    item_class_prob: np.ndarray | None
    annotations: object

    def coords(self) -> dict:
        return self.annotations.coords()

    def n_labels(self) -> np.ndarray:
        """Labels per annotator: the expected counts summed over classes (exact,
        each label's posterior summing to 1)."""
        J, K = self.annotations.n_annotators, self.annotations.n_classes
        return np.rint(self.sums.counts.reshape(J, K * K).sum(axis=1)).astype(np.int64)

    def counts(self) -> np.ndarray:
        """(annotator, true_class, label_class) expected counts, as ``expected_counts``."""
        J, K = self.annotations.n_annotators, self.annotations.n_classes
        return self.sums.counts.reshape(J, K, K).transpose(0, 2, 1)


def large_annotations(annotations, chunk_items, family: str, controls: dict):
    """The container the large EM reads: ``annotations`` itself, or categorical
    ``Annotations`` narrowed into a ChunkedAnnotations of ``chunk_items`` items a
    block; ``controls`` (start, classifier) must be None. Warns, as the in-memory
    EMs do, when the labels cannot identify annotator quality (one annotator, or
    one label an item; a Dask crowd's labels per item are not counted)."""
    annotations = _large_annotations(annotations, chunk_items, family, controls)
    _trust.check_identifiable(annotations, family)
    return annotations


def _large_annotations(annotations, chunk_items, family: str, controls: dict):
    used = [name for name, value in controls.items() if value is not None]
    if used:
        raise ValueError(f"{used[0]}= is not available with the chunked or Dask EM; leave it "
                         f"None (the EM starts from majority vote) or use Annotations "
                         f"without chunk_items.")
    if isinstance(annotations, Annotations):
        if annotations.continuous:
            raise ValueError(f"{family} needs categorical labels; these are continuous.")
        if annotations.features is not None:
            raise ValueError(f"the chunked EM of {family} has no features (the truth's "
                             f"classifier); drop chunk_items= to fit them.")
        return ChunkedAnnotations.from_annotations(annotations, chunk_items=chunk_items)
    if not isinstance(annotations, (ChunkedAnnotations, DaskAnnotations)):
        raise TypeError(f"{family} expects Annotations, ChunkedAnnotations or DaskAnnotations, "
                        f"got {type(annotations).__name__}.")
    if chunk_items is not None:
        raise ValueError("chunk_items= is for Annotations; a ChunkedAnnotations carries its "
                         "own (ChunkedAnnotations.from_codes(..., chunk_items=)), and a "
                         "DaskAnnotations is read a partition at a time.")
    return annotations


# ------------------------------------------------------------------ passes
def _chunked_pass(ann: ChunkedAnnotations, log_rates, out=None) -> Sums:
    width, K = ann.n_annotators * ann.n_classes, ann.n_classes
    total = Sums(np.zeros((width, K)), np.zeros(K), 0.0)
    for first, offsets, pairs in ann.blocks():
        block = None if out is None else out[first:first + len(offsets) - 1]
        matrix = block_matrix(offsets, pairs, width)
        total = add_sums(total, block_sums(matrix, log_rates, K, block))
    return total


# ---------------------------------------------------------------- Dask
def _computed(make_graph, on_lost=None):
    """``dask.compute`` of ``make_graph()``, run again (:data:`RETRIES` times) when a
    worker was lost: the parameters live here, so a retry resumes from them.
    ``on_lost()`` runs before each retry (it rebuilds what the graph reads: blocks
    persisted on the dead worker are failed futures, which a bare retry would
    only fail on again)."""
    import dask

    for attempt in range(RETRIES + 1):
        try:
            return dask.compute(make_graph())[0]
        except Exception as error:  # the distributed scheduler's errors, by name
            if attempt == RETRIES or type(error).__name__ not in _LOST_WORKER:
                raise
            LOG.warning("a Dask worker was lost (%s); running the pass again", error)
            if on_lost is not None:
                on_lost()
    raise AssertionError("unreachable")


def dask_blocks(ann: DaskAnnotations) -> list:
    """A delayed :class:`Block` per partition, held in the workers' memory when a
    distributed client runs (each pass then reads no file and re-codes nothing;
    a lost block is rebuilt from its partition); read anew at each pass
    otherwise."""
    import dask

    J, K = ann.n_annotators, ann.n_classes
    blocks = [dask.delayed(partition_block)(part, J, K) for part in ann.frame.to_delayed()]
    try:
        from distributed import get_client

        get_client()
    except (ImportError, ValueError):
        return blocks
    return list(dask.persist(*blocks))


def _reread(ann: DaskAnnotations, blocks: list):
    """The ``on_lost`` of a pass over ``blocks``: the persisted blocks are let go
    (cancelled, so that the scheduler forgets the failed ones and the frame's
    partitions they failed on) and built again in place, every partition read
    anew."""
    def reread():
        from distributed import futures_of, get_client

        get_client().cancel(futures_of(blocks))
        blocks[:] = dask_blocks(ann)
    return reread


def _dask_pass(ann: DaskAnnotations, log_rates, blocks: list) -> Sums:
    import dask

    width, K = ann.n_annotators * ann.n_classes, ann.n_classes

    def graph():
        rates = dask.delayed(log_rates)  # one key, broadcast to every partition's task
        parts = [dask.delayed(block_sums_of)(b, rates, width, K) for b in blocks]
        while len(parts) > 1:  # a tree: no task receives every partition's counts
            parts = [dask.delayed(add_sums)(*parts[i:i + 8]) for i in range(0, len(parts), 8)]
        return parts[0]

    return _computed(graph, _reread(ann, blocks))


def _write_posteriors(ann: DaskAnnotations, log_rates, blocks: list) -> None:
    """The item posteriors as a parquet dataset at ``ann.posterior_path``, a file per
    partition, indexed by item, a column per class."""
    import dask
    import dask.dataframe as dd

    columns = [str(c) for c in ann.classes]
    width, K = ann.n_annotators * ann.n_classes, ann.n_classes
    meta = pd.DataFrame({c: pd.Series(dtype=float) for c in columns},
                        index=pd.Index([], dtype=ann.frame.index.dtype, name=D.ITEM))

    def graph():
        rates = dask.delayed(log_rates)
        parts = [dask.delayed(block_frame)(b, rates, width, K, columns) for b in blocks]
        return dd.from_delayed(parts, meta=meta).to_parquet(ann.posterior_path, compute=False)

    _computed(graph, _reread(ann, blocks))


# ---------------------------------------------------------------- the EM
def run_em(ann, *, log_rates, m_step, log_prior, supports, tol: float, max_iter: int,
           accelerate: bool) -> LargeFit:
    """EM on a ChunkedAnnotations or DaskAnnotations from the soft majority vote.

    ``log_rates(params)`` -> (log confusion (annotator, true_class, label_class),
    log class prior (K,)); ``m_step(counts, totals, params)`` -> the next params,
    with counts (annotator, true_class, label_class) and totals (K,) of the item
    posteriors at ``params`` (None for the majority vote's pass, the start);
    ``log_prior(params)`` the parameters'
    log prior (the objective adds it to the pass's log-likelihood)."""
    J, K = ann.n_annotators, ann.n_classes
    blocks = dask_blocks(ann) if isinstance(ann, DaskAnnotations) else None

    def one_pass(rates, out=None):
        if blocks is None:
            return _chunked_pass(ann, rates, out)
        return _dask_pass(ann, rates, blocks)

    def e_inputs(params):
        log_confusion, log_class = log_rates(params)
        return np.ascontiguousarray(log_confusion.transpose(0, 2, 1).reshape(J * K, K)), log_class

    memo: list = []  # (params, sums) of the last two passes: the objective and the
    # EM map at one point share a pass

    def sums_at(params) -> Sums:
        for seen, sums in memo:
            if seen is params:
                return sums
        t0 = time.perf_counter()
        sums = one_pass(e_inputs(params))
        memo[:] = [(params, sums)] + memo[:1]
        LOG.info("EM pass %d: %.2f s, log-likelihood %.6f", len(passes) + 1,
                 time.perf_counter() - t0, sums.log_likelihood)
        passes.append(sums.log_likelihood)
        return sums

    def counts(sums):
        return sums.counts.reshape(J, K, K).transpose(0, 2, 1)

    def em_map(params):
        sums = sums_at(params)
        return m_step(counts(sums), sums.totals, params)

    passes: list = []
    vote = one_pass(None)
    params, n_iter, converged = _em.iterate_em_map(
        em_map, m_step(counts(vote), vote.totals, None), tol=tol, max_iter=max_iter,
        supports=supports, accelerate=accelerate,
        objective=lambda prm: sums_at(prm).log_likelihood + log_prior(prm),
        nonfinite_message="EM produced non-finite parameters; use priors with a, b > 1 "
                          "(the defaults).")
    prob = None
    if blocks is None:
        prob = np.empty((ann.n_items, K))
        sums = one_pass(e_inputs(params), prob)
    else:
        sums = sums_at(params)
        if ann.posterior_path is not None:
            _write_posteriors(ann, e_inputs(params), blocks)
    return LargeFit(params, n_iter, converged, sums, prob, ann)
