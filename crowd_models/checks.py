"""Posterior predictive checks of a categorical fit: replicated label tables,
test statistics and their tail probabilities.

``ppc`` draws, for each of ``n_draws`` posterior draws, a new true class for
every item from the draw's prevalence and a new label for every row of the
long table from the draw's label probabilities given that class (the family's
own likelihood, on the observed design: the same items, annotators and
repeated labels). Each replicated table and the observed one are summarised
by three statistics:

* ``agreement`` (annotator): the share of the annotator's label pairs with the
  other labels of the same items that agree;
* ``majority_share`` (share_bin): the number of items (with two labels or more)
  whose most frequent label holds a share of the item's labels in each bin;
* ``class_share`` (annotator, label_class): the share of each annotator's
  labels in each class.

The tail probability of an observed statistic is two-sided, ``2 min(P(T_rep >=
T_obs), P(T_rep <= T_obs))`` capped at 1, over the replicated tables; a small
one says the model does not reproduce that feature of the labels. A single-draw
fit (EM, MAP) gives a plug-in check (parameter uncertainty ignored), a NUTS fit
a posterior predictive one.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from crowd_models import _dims as D
from crowd_models._fits import check_ci_prob, posterior_of
from crowd_models._predictive import class_shares, draw_values, label_probabilities
from crowd_models.data import Annotations

SHARE_BINS = np.array([0.0, 0.5, 0.6, 0.7, 0.8, 0.9, 0.999, 1.0])
"""Edges of the majority-share bins: below one half, then by tenths, and
unanimous items (share 1) alone in the last bin."""


def _statistics(annotations: Annotations, labels: np.ndarray) -> dict[str, np.ndarray]:
    """The three statistics of a label table on the annotations' design."""
    item, annotator = annotations.item_idx, annotations.annotator_idx
    n_items, n_ann, K = annotations.n_items, annotations.n_annotators, annotations.n_classes
    counts = np.zeros((n_items, K))
    np.add.at(counts, (item, labels), 1.0)
    per_item = counts.sum(axis=1)
    others = per_item[item] - 1  # the other labels of the row's item
    agree = counts[item, labels] - 1
    pairs = np.bincount(annotator, weights=others, minlength=n_ann)
    with np.errstate(invalid="ignore", divide="ignore"):
        agreement = np.bincount(annotator, weights=agree, minlength=n_ann) / pairs
    several = per_item >= 2
    share = counts[several].max(axis=1) / per_item[several]
    hist = np.histogram(share, bins=SHARE_BINS)[0].astype(float)
    class_share = np.zeros((n_ann, K))
    np.add.at(class_share, (annotator, labels), 1.0)
    class_share /= class_share.sum(axis=1, keepdims=True)
    return {"agreement": agreement, "majority_share": hist, "class_share": class_share}


def _replicate(annotations: Annotations, values: dict, rng) -> np.ndarray:
    """One replicated label table (codes, one per row) from one posterior draw."""
    K = annotations.n_classes
    shares = class_shares(values, K)
    truth = rng.choice(K, size=annotations.n_items, p=shares / shares.sum())
    item = annotations.item_idx
    conf = label_probabilities(values, K, item, annotations.annotator_idx)
    rows = conf[np.arange(len(item)), truth[item]]  # (row, label_class)
    cumulative = rows.cumsum(axis=1)
    draws = rng.random((len(item), 1)) * cumulative[:, -1:]
    return np.minimum((cumulative < draws).sum(axis=1), K - 1)


def ppc(fit, annotations: Annotations, *, n_draws: int = 200, rng=0) -> xr.Dataset:
    """Posterior predictive check of a categorical fit (see the module docstring).

    Parameters
    ----------
    fit : xarray.Dataset or xarray.DataTree
        A two-coin, Dawid-Skene (any variant), spammer or item-difficulty fit
        without features: an EM Dataset, or a DataTree from ``fit_map`` (both a
        plug-in check) or ``sample``.
    annotations : Annotations
        The annotations the fit was fitted to.
    n_draws : int, optional
        Number of replicated tables; with fewer posterior draws than this, the
        draws are reused in turn (a single-draw fit: every table from the one
        draw).
    rng : int or numpy.random.Generator, optional
        Seed or Generator of the replications.

    Returns
    -------
    xarray.Dataset
        ``<statistic>_observed``, ``<statistic>_replicated`` (with a leading
        ``replicate`` dim) and ``<statistic>_p`` (two-sided tail probability) for
        ``agreement`` (annotator), ``majority_share`` (share_bin, labelled by
        the bin's lower edge) and ``class_share`` (annotator, label_class);
        attrs ``n_draws`` (posterior draws used), ``plug_in`` (1 when a single
        draw) and ``flagged`` (share of the observed statistics with a tail
        probability below 0.05, over all three).

    Examples
    --------
    >>> from crowd_models.models import two_coin
    >>> rte = cm.datasets.load_rte()
    >>> check = cm.ppc(two_coin.em(rte), rte, n_draws=100)
    >>> check["majority_share_p"]
    """
    if not isinstance(annotations, Annotations):
        raise TypeError(f"expected Annotations, got {type(annotations).__name__}.")
    if annotations.continuous:
        raise ValueError("ppc checks categorical fits; these labels are continuous.")
    if isinstance(n_draws, bool) or not isinstance(n_draws, int | np.integer) or n_draws < 1:
        raise ValueError(f"n_draws must be a positive integer, got {n_draws!r}.")
    post = posterior_of(fit)
    if "item_class_prob" in post and post["item_class_prob"].sizes.get(D.ITEM) != (
            annotations.n_items):
        raise ValueError(f"the fit has {post['item_class_prob'].sizes[D.ITEM]} items and the "
                         f"annotations {annotations.n_items}: pass the annotations it was "
                         f"fitted to.")
    rng = np.random.default_rng(rng)
    available = post.sizes["chain"] * post.sizes["draw"]
    picks = np.resize(rng.permutation(available), n_draws)
    observed = _statistics(annotations, annotations.labels)
    replicated = {name: [] for name in observed}
    for index in picks:
        labels = _replicate(annotations, draw_values(post, index), rng)
        for name, value in _statistics(annotations, labels).items():
            replicated[name].append(value)
    dims = {"agreement": (D.ANNOTATOR,), "majority_share": ("share_bin",),
            "class_share": (D.ANNOTATOR, D.LABEL_CLASS)}
    data, flagged, total = {}, 0, 0
    for name, obs in observed.items():
        rep = np.stack(replicated[name])
        with np.errstate(invalid="ignore"):
            upper = np.mean(rep >= obs - 1e-12, axis=0)
            lower = np.mean(rep <= obs + 1e-12, axis=0)
        p = np.minimum(1.0, 2 * np.minimum(upper, lower))
        p = np.where(np.isfinite(obs), p, np.nan)
        data[f"{name}_observed"] = (dims[name], obs)
        data[f"{name}_replicated"] = (("replicate", *dims[name]), rep)
        data[f"{name}_p"] = (dims[name], p)
        known = np.isfinite(p)
        flagged += int(np.sum(p[known] < 0.05))
        total += int(known.sum())
    coords = {D.ANNOTATOR: annotations.annotators, D.LABEL_CLASS: list(annotations.classes),
              "share_bin": SHARE_BINS[:-1]}
    return xr.Dataset(data, coords=coords, attrs={
        "n_draws": int(min(available, n_draws)), "plug_in": int(available == 1),
        "flagged": flagged / max(total, 1)})


def plot_ppc(check: xr.Dataset, *, ci_prob: float = 0.9, title: str | None = None):
    """The three statistics of a :func:`ppc` against their replicated intervals.

    Left: each annotator's agreement with the others (sorted), observed as
    dots (red where the tail probability is below 0.05) over the replicated
    ``ci_prob`` equal-tailed interval. Middle: the histogram of the items'
    majority shares, observed bars over the replicated intervals. Right: each
    annotator's share of each label class, observed against the replicated
    mean, red where the tail probability is below 0.05.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> from crowd_models import checks
    >>> from crowd_models.models import two_coin
    >>> rte = cm.datasets.load_rte()
    >>> fig = checks.plot_ppc(cm.ppc(two_coin.em(rte), rte, n_draws=100))
    """
    import matplotlib.pyplot as plt

    ci_prob = check_ci_prob(ci_prob)
    lo_q, hi_q = (1 - ci_prob) / 2, 1 - (1 - ci_prob) / 2
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    ax = axes[0]
    obs = check["agreement_observed"].values
    order = np.argsort(np.nan_to_num(obs, nan=-1))
    rep = check["agreement_replicated"].values[:, order]
    x = np.arange(len(order))
    ax.fill_between(x, np.nanquantile(rep, lo_q, axis=0), np.nanquantile(rep, hi_q, axis=0),
                    color="0.8", label=f"replicated {ci_prob:.0%}")
    bad = check["agreement_p"].values[order] < 0.05
    ax.scatter(x[~bad], obs[order][~bad], s=8, color="C0", label="observed")
    ax.scatter(x[bad], obs[order][bad], s=12, color="C3", label="observed, p < 0.05")
    ax.set(xlabel="annotator (sorted)", ylabel="agreement with the others",
           title="agreement per annotator")
    ax.legend(fontsize=8)
    ax = axes[1]
    edges = SHARE_BINS
    centres = np.arange(len(edges) - 1)
    rep = check["majority_share_replicated"].values
    off = check["majority_share_p"].values < 0.05
    ax.bar(centres, check["majority_share_observed"].values, alpha=0.6,
           color=np.where(off, "C3", "C0"), label="observed (red: p < 0.05)")
    ax.errorbar(centres, rep.mean(axis=0),
                yerr=[rep.mean(axis=0) - np.quantile(rep, lo_q, axis=0),
                      np.quantile(rep, hi_q, axis=0) - rep.mean(axis=0)],
                fmt="o", color="k", label=f"replicated mean, {ci_prob:.0%}")
    names = [f"<{edges[1]:.1f}"] + [f"{a:.1f}-{b:.1f}" for a, b in zip(edges[1:-2], edges[2:-1],
                                                                      strict=True)] + ["1"]
    ax.set_xticks(centres, names, fontsize=8)
    ax.set(xlabel="share of the item's labels in its most frequent class", ylabel="items",
           title="majority shares")
    ax.legend(fontsize=8)
    ax = axes[2]
    obs = check["class_share_observed"].values.ravel()
    mean = check["class_share_replicated"].values.mean(axis=0).ravel()
    bad = check["class_share_p"].values.ravel() < 0.05
    ax.plot([0, 1], [0, 1], color="0.6", lw=1)
    ax.scatter(mean[~bad], obs[~bad], s=8, color="C0", label="annotator x class")
    ax.scatter(mean[bad], obs[bad], s=12, color="C3", label="p < 0.05")
    ax.set(xlabel="replicated mean share", ylabel="observed share",
           title="each annotator's label-class shares")
    ax.legend(fontsize=8)
    kind = "plug-in (one draw)" if check.attrs.get("plug_in") else (
        f"{check.attrs.get('n_draws')} posterior draws")
    fig.suptitle((title + ": " if title else "") + f"posterior predictive check, {kind}; "
                 f"{check.attrs.get('flagged', np.nan):.0%} of the statistics at p < 0.05")
    fig.tight_layout()
    return fig


__all__ = ["SHARE_BINS", "plot_ppc", "ppc"]
