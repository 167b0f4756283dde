"""Warnings for fits that cannot be trusted, shared by the families' EM and by
:func:`crowd_models.fit_map` / :func:`crowd_models.sample`.

Each check names the cause and the remedy in a ``UserWarning``:

* :func:`check_identifiable`: one annotator, or one label per item, leaves
  annotator quality unidentified (any quality fits with a matching truth);
* :func:`check_chance`: annotators the fit puts below chance give a large
  share of the labels, which is either adversarial annotators or a flipped
  consensus (a majority of adversarial annotators flips it, and nothing
  without gold tells the two apart);
* :func:`check_constant_annotators`: a continuous-label annotator who gives
  (nearly) one value to every item looks infinitely precise;
* :func:`check_converged`: an EM that stopped at ``max_iter``;
* :func:`check_boundary`: an estimate on the edge of its support (a
  sensitivity of exactly 1 with flat priors), where the mode is not an
  interior maximum and its curvature-based uncertainty means nothing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from crowd_models import _dims as D
from crowd_models._text import warn

BELOW_CHANCE_SHARE = 0.25
"""check_chance warns when annotators below chance give at least this share of
the labels. Measured with the default priors (EM, two-coin and Dawid-Skene):
on the bundled real sets at most 17% of the labels come from annotators
below chance (RTE: 2 of 164 annotators; bluebirds 10%; anesthesia, dog, web
search and music genre none); on simulated sets where 60-70% of the
annotators are adversarial, which flips the consensus (accuracy 0.10-0.11
against the truth), 31-40%."""

CONSTANT_SD = 0.01
"""check_constant_annotators flags an annotator whose labels' standard
deviation is below this share of the standard deviation of all labels."""

_SAMPLE_DIMS = (D.CHAIN, D.DRAW)


def check_identifiable(annotations, family: str) -> None:
    """Warn when the data cannot identify annotator quality."""
    if annotations.n_annotators == 1:
        warn(
            f"{family}: the data have one annotator, so their quality and the truth cannot "
            f"be told apart (every quality fits with a matching truth); the estimates echo "
            f"the priors and the start. Annotator quality needs items labelled by several "
            f"annotators.")
        return
    if hasattr(annotations, "offsets"):  # a ChunkedAnnotations: items in order
        per_item = np.diff(annotations.offsets)
    elif hasattr(annotations, "item_idx"):
        per_item = np.bincount(annotations.item_idx, minlength=annotations.n_items)
    else:  # a DaskAnnotations: the labels per item stay in its partitions
        return
    if per_item.max(initial=0) <= 1:
        via = (" (the features tie it to the truth only through the classifier)"
               if getattr(annotations, "features", None) is not None else "")
        warn(
            f"{family}: every item has one label, so annotator quality is not identified"
            f"{via}: the labels show how often each annotator uses each class, not whether "
            f"they are right. Have some items labelled by several annotators.")


def check_converged(attrs: dict, family: str) -> None:
    """Warn when an EM fit's attrs say it stopped without converging (with the
    fit's own ``stop_reason`` where it gives one)."""
    if "converged" in attrs and not attrs["converged"]:
        warn(
            f"{family} EM stopped after {attrs.get('n_iter', '?')} iterations without "
            f"converging (attrs['converged'] = 0): " + attrs.get(
                "stop_reason", "the estimates are not a fixed point. Raise max_iter or "
                               "loosen tol."))


BOUNDARY = 1e-10
"""check_boundary flags a probability within this of 0 or 1, or a positive
parameter below it."""


def check_boundary(params: dict, supports: dict, family: str) -> None:
    """Warn about EM estimates on the edge of their support (``supports``: name ->
    ``"unit"``, ``"simplex"`` or ``"positive"``)."""
    edges = []
    for name, support in supports.items():
        if name not in params:
            continue
        value = np.asarray(params[name], dtype=float)
        if support in ("unit", "simplex"):
            hit = (value <= BOUNDARY) | ((value >= 1 - BOUNDARY) if support == "unit" else False)
        else:
            hit = (value <= BOUNDARY) | ~np.isfinite(value)
        if np.any(hit):
            edges.append(f"{name} ({int(np.sum(hit))} of {value.size})")
    if edges:
        warn(
            f"{family}: estimates on the boundary of their support: {', '.join(edges)}. "
            f"A mode there is not an interior maximum (flat priors allow a rate of exactly "
            f"0 or 1), and intervals from its curvature mean nothing; use the default "
            f"priors, or NUTS for the uncertainty.")


def _mean(da: xr.DataArray) -> xr.DataArray:
    return da.mean([d for d in _SAMPLE_DIMS if d in da.dims])


def _class_shares(post: xr.Dataset, n_classes: int) -> np.ndarray | None:
    if "prevalence" in post:
        prev = _mean(post["prevalence"])
        if prev.ndim == 0 and n_classes == 2:  # P(positive)
            p = float(prev)
            return np.array([1 - p, p])
        if set(prev.dims) == {D.TRUE_CLASS}:
            return np.asarray(prev.values, dtype=float)
    if "item_class_prob" in post and set(_mean(post["item_class_prob"]).dims) == {
            D.ITEM, D.TRUE_CLASS}:
        return np.asarray(_mean(post["item_class_prob"]).mean(D.ITEM).values, dtype=float)
    return None


def chance_gaps(post: xr.Dataset) -> np.ndarray | None:
    """Per annotator, under the fit's (posterior mean) parameters: the probability
    of a correct label minus that of a labeller who ignores the item but uses
    the classes as often (negative: worse than chance). For two classes it is
    2 pi (1 - pi) (sensitivity + specificity - 1). None for a fit without
    per-annotator rates and class shares (e.g. continuous labels)."""
    if "sensitivity" in post and "specificity" in post and set(
            _mean(post["sensitivity"]).dims) == {D.ANNOTATOR}:
        sens = _mean(post["sensitivity"]).values
        spec = _mean(post["specificity"]).transpose(*_mean(post["sensitivity"]).dims).values
        conf = np.stack([np.stack([spec, 1 - spec], -1), np.stack([1 - sens, sens], -1)], 1)
    elif "confusion" in post and set(_mean(post["confusion"]).dims) == {
            D.ANNOTATOR, D.TRUE_CLASS, D.LABEL_CLASS}:
        da = _mean(post["confusion"])
        if D.LABEL_CLASS in da.coords and D.TRUE_CLASS in da.coords:
            # label classes in the true classes' order, by name (positions: a
            # boolean coordinate would read as a mask)
            order = pd.Index(da[D.LABEL_CLASS].values).get_indexer(da[D.TRUE_CLASS].values)
            if (order < 0).any():
                return None
            da = da.isel({D.LABEL_CLASS: order})
        conf = np.asarray(da.transpose(D.ANNOTATOR, D.TRUE_CLASS, D.LABEL_CLASS).values)
    else:
        return None
    shares = _class_shares(post, conf.shape[1])
    if shares is None or shares.shape != (conf.shape[1],):
        return None
    correct = np.einsum("jkk,k->j", conf, shares)
    used = np.einsum("k,jkl->jl", shares, conf)  # how often each class is given
    return correct - used @ shares


def check_chance(post: xr.Dataset, n_labels=None, *, what: str = "the fit") -> None:
    """Warn when annotators the fit puts below chance give a large share of the labels."""
    gaps = chance_gaps(post)
    if gaps is None:
        return
    weights = np.ones_like(gaps) if n_labels is None else np.asarray(n_labels, dtype=float)
    below = gaps < 0
    share = float(weights[below].sum() / weights.sum())
    if share < BELOW_CHANCE_SHARE:
        return
    names = post[D.ANNOTATOR].values[below] if D.ANNOTATOR in post.coords else np.flatnonzero(
        below)
    shown = ", ".join(map(str, names[:5])) + (", ..." if below.sum() > 5 else "")
    lead = ("most labels come" if share > 0.5 else f"{share:.0%} of the labels come")
    warn(
        f"{lead} from {int(below.sum())} annotator(s) that {what} puts below chance "
        f"({shown}): either they are adversarial, or the consensus is flipped (a majority "
        f"of adversarial annotators flips it, and no fit without gold can tell the two "
        f"apart). Check the class coding and a few items against gold.")


def check_constant_annotators(annotations, family: str) -> None:
    """Warn about continuous-label annotators who give (nearly) one value to every item."""
    labels = np.asarray(annotations.labels, dtype=float)
    j = annotations.annotator_idx
    n = np.bincount(j, minlength=annotations.n_annotators)
    mean = np.bincount(j, weights=labels, minlength=annotations.n_annotators) / np.maximum(n, 1)
    var = np.bincount(j, weights=(labels - mean[j]) ** 2,
                      minlength=annotations.n_annotators) / np.maximum(n - 1, 1)
    flat = (n >= 3) & (np.sqrt(var) <= CONSTANT_SD * labels.std())
    if not flat.any():
        return
    ids = np.asarray(annotations.annotators)[flat]
    shown = ", ".join(map(str, ids[:5])) + (", ..." if flat.sum() > 5 else "")
    warn(
        f"{family}: {int(flat.sum())} annotator(s) give (nearly) the same value to every "
        f"item ({shown}); the model reads that as very high precision, and they pull the "
        f"consensus towards their constant. Drop them (their labels carry no information "
        f"about the items) or give the precision a stronger prior.")
