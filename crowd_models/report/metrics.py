"""Scores against gold: ROC curves, soft confusion, accuracy of the true-label posterior."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import xarray as xr

from crowd_models import _dims as D
from crowd_models._fits import (
    SAMPLE_DIMS,
    posterior_of,
)
from crowd_models._text import listing
from crowd_models.data import Annotations


# --------------------------------------------------------------------- ROC
def _binary(values, what: str) -> np.ndarray:
    """Validate a 1-D 0/1 (or bool) vector."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be 1-D, got shape {arr.shape}.")
    if arr.dtype.kind not in "biufO":
        raise ValueError(f"{what} must be binary (0/1 or bool), got dtype {arr.dtype}.")
    try:
        num = arr.astype(float)
    except (TypeError, ValueError):
        num = None
    if num is None or not np.isin(num, (0.0, 1.0)).all():
        bad = arr if num is None else arr[~np.isin(num, (0.0, 1.0))]
        raise ValueError(
            f"{what} must be binary (0/1 or bool); found other values such as "
            f"{pd.unique(bad)[:5].tolist()}."
        )
    return num.astype(np.int64)


def roc_curve(scores, gold) -> tuple[pd.DataFrame, float]:
    """ROC curve and area under it, for scores against binary gold labels.

    Parameters
    ----------
    scores : 1-D array-like of float
        Higher means more likely positive; no NaN (infinite values are fine).
    gold : 1-D array-like of 0/1 or bool
        The true classes, same length as ``scores``, both classes present.

    Returns
    -------
    curve : pandas.DataFrame
        Columns ``fpr``, ``tpr`` and ``threshold``: predicting positive when
        ``score >= threshold`` gives that false and true positive rate. One row
        per distinct score, from the largest down, after a first row
        ``(0, 0, inf)``; the last row is ``(1, 1, min(scores))``. Tied scores
        move both rates in one step, a diagonal segment.
    auc : float
        Area under the curve by the trapezoid rule, which equals the
        Mann-Whitney probability that a random positive scores higher than a
        random negative, ties counting 1/2.

    Raises
    ------
    ValueError
        If the lengths differ, ``gold`` is not binary or holds one class only,
        or ``scores`` holds NaN or non-numbers.

    Examples
    --------
    >>> from crowd_models.models import two_coin
    >>> ann = cm.datasets.load_rte()
    >>> prob = two_coin.em(ann)["item_class_prob"].values[0, 0, :, 1]
    >>> curve, auc = cm.report.roc_curve(prob, ann.gold)
    """
    try:
        s = np.asarray(scores, dtype=float)
    except (TypeError, ValueError) as err:
        raise ValueError(f"scores must be numbers; {err}.") from None
    if s.ndim != 1:
        raise ValueError(f"scores must be 1-D, got shape {s.shape}.")
    g = _binary(gold, "gold")
    if len(s) != len(g):
        raise ValueError(
            f"scores and gold must have the same length, got {len(s)} scores and {len(g)} "
            f"gold labels."
        )
    if np.isnan(s).any():
        raise ValueError(
            f"scores hold {int(np.isnan(s).sum())} NaN value(s); drop those items or score "
            f"them first."
        )
    n_pos = int(g.sum())
    n_neg = len(g) - n_pos
    if n_pos == 0 or n_neg == 0:
        raise ValueError(
            f"gold must hold both classes to draw a ROC curve; it has {n_pos} positive(s) and "
            f"{n_neg} negative(s)."
        )
    order = np.argsort(-s, kind="mergesort")
    s, g = s[order], g[order]
    # the last position of each run of equal scores: one ROC point per distinct threshold
    ends = np.append(np.flatnonzero(s[1:] != s[:-1]), len(s) - 1)
    tp = np.cumsum(g)[ends]
    fp = ends + 1 - tp
    fpr = np.concatenate([[0.0], fp / n_neg])
    tpr = np.concatenate([[0.0], tp / n_pos])
    threshold = np.concatenate([[np.inf], s[ends]])
    auc = float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2))
    return pd.DataFrame({"fpr": fpr, "tpr": tpr, "threshold": threshold}), auc


def plot_roc(curves: Mapping, ax=None):
    """Several ROC curves on one Axes, with their AUC in the legend.

    Parameters
    ----------
    curves : mapping
        Name -> ``(scores, gold)``, each pair as for :func:`roc_curve`.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on; default a new square figure.

    Returns
    -------
    matplotlib.axes.Axes
        One line per curve, labelled ``"<name> (AUC = 0.xxx)"``, plus the
        chance diagonal (gid ``"chance"``).

    Raises
    ------
    ValueError
        If ``curves`` is empty, an entry is not a (scores, gold) pair, or
        :func:`roc_curve` rejects an entry (the message names the curve).
    TypeError
        If ``curves`` is not a mapping.

    Examples
    --------
    >>> from crowd_models.models import two_coin
    >>> ann = cm.datasets.load_rte()
    >>> prob = two_coin.em(ann)["item_class_prob"].values[0, 0, :, 1]
    >>> ax = cm.report.plot_roc({"two-coin": (prob, ann.gold)})
    """
    import matplotlib.pyplot as plt

    if not isinstance(curves, Mapping):
        raise TypeError(
            f"curves must be a dict of name -> (scores, gold), got {type(curves).__name__}."
        )
    if not curves:
        raise ValueError("curves is empty; give at least one name -> (scores, gold).")
    computed = {}
    for name, pair in curves.items():
        if isinstance(pair, str | bytes) or not hasattr(pair, "__len__") or len(pair) != 2:
            raise ValueError(f"curve {name!r} must be a pair (scores, gold).")
        try:
            computed[name] = roc_curve(*pair)
        except ValueError as err:
            raise ValueError(f"curve {name!r}: {err}") from err
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 5.5))
    for name, (curve, auc) in computed.items():
        ax.plot(curve["fpr"], curve["tpr"], linewidth=1.5, label=f"{name} (AUC = {auc:.3f})")
    ax.plot([0, 1], [0, 1], linestyle="--", color="0.6", linewidth=1, gid="chance")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.set_xlabel("1 - specificity (false positive rate)")
    ax.set_ylabel("sensitivity (true positive rate)")
    ax.legend(loc="lower right", fontsize=8)
    return ax

# --------------------------------------------------- scores against the truth
def _item_class_prob(fit_or_probs) -> xr.DataArray:
    """The (item, true_class) posterior of a fit, or a DataArray passed as is."""
    if isinstance(fit_or_probs, xr.DataArray):
        probs = fit_or_probs
    elif isinstance(fit_or_probs, xr.Dataset | xr.DataTree):
        post = posterior_of(fit_or_probs)
        if "item_class_prob" not in post:
            raise ValueError(
                f"this fit has no item_class_prob (item, true_class); is it a continuous fit? "
                f"Its variables are {sorted(map(str, post.data_vars))}."
            )
        probs = post["item_class_prob"]
    else:
        raise TypeError(
            f"expected a fit (EM Dataset or DataTree) or an item_class_prob DataArray "
            f"(item, true_class), got {type(fit_or_probs).__name__}."
        )
    sample = [d for d in SAMPLE_DIMS if d in probs.dims]
    if sample:
        probs = probs.mean(sample)
    if set(probs.dims) != {D.ITEM, D.TRUE_CLASS}:
        raise ValueError(
            f"item_class_prob must have dims (item, true_class) besides chain/draw, got "
            f"{probs.dims}."
        )
    return probs.transpose(D.ITEM, D.TRUE_CLASS)


def soft_confusion(predicted, item_class_prob) -> dict[str, float]:
    """Sensitivity and specificity of 0/1 predictions against soft labels.

    Raykar et al. (2009), sec. 6.6: with ``mu_i = P(z_i = 1)`` the posterior
    probability that item i is positive,
    ``sensitivity = sum(mu * pred) / sum(mu)`` and
    ``specificity = sum((1 - mu) * (1 - pred)) / sum(1 - mu)``.

    Parameters
    ----------
    predicted : 1-D array-like of 0/1 or bool
        Any classifier's predictions, one per item in the fit's item order; a
        Series indexed by item id is aligned by id when ``item_class_prob`` has
        item coordinates.
    item_class_prob : xarray.DataArray, fit, or array
        A DataArray (item, true_class), optionally with chain/draw (averaged
        over); the second class is the positive one. A fit (Dataset or DataTree)
        uses its ``item_class_prob``. An array is either ``mu`` (item,) or
        (item, 2) class probabilities.

    Returns
    -------
    dict
        ``{"sensitivity": float, "specificity": float}``.

    Raises
    ------
    ValueError
        If ``predicted`` is not binary or does not match the items, the
        probabilities are not two classes in [0, 1], or all of ``mu`` is 0 (or
        all 1), leaving a rate undefined.

    Examples
    --------
    >>> from crowd_models.models import two_coin
    >>> fit = two_coin.em(cm.datasets.load_rte())
    >>> prob = fit["item_class_prob"].values[0, 0, :, 1]
    >>> cm.report.soft_confusion(prob > 0.5, prob)
    """
    items = None
    if isinstance(item_class_prob, xr.DataArray | xr.Dataset | xr.DataTree):
        probs = _item_class_prob(item_class_prob)
        if probs.sizes[D.TRUE_CLASS] != 2:
            raise ValueError(
                f"soft_confusion needs two true classes, item_class_prob has "
                f"{probs.sizes[D.TRUE_CLASS]}."
            )
        mu = np.asarray(probs.isel({D.TRUE_CLASS: 1}).values, dtype=float)
        if D.ITEM in probs.coords:
            items = pd.Index(probs[D.ITEM].values)
    else:
        mu = np.asarray(item_class_prob, dtype=float)
        if mu.ndim == 2 and mu.shape[1] == 2:
            mu = mu[:, 1]
        elif mu.ndim != 1:
            raise ValueError(
                f"item_class_prob as an array must be mu (item,) or (item, 2), got shape "
                f"{mu.shape}."
            )
    if not np.all((mu >= 0) & (mu <= 1)):
        raise ValueError("item_class_prob must hold probabilities in [0, 1] (no NaN).")
    if isinstance(predicted, pd.Series) and items is not None:
        missing = items[~items.isin(predicted.index)]
        if len(missing):
            raise ValueError(
                f"predicted has no value for item(s) {list(missing[:5])}; it must cover every "
                f"item of item_class_prob."
            )
        predicted = predicted.reindex(items)
    pred = _binary(predicted, "predicted")
    if len(pred) != len(mu):
        raise ValueError(
            f"predicted has {len(pred)} entries but item_class_prob has {len(mu)} items."
        )
    pos, neg = mu.sum(), (1 - mu).sum()
    if pos <= 0 or neg <= 0:
        raise ValueError(
            "item_class_prob gives every item to one class, so sensitivity or specificity is "
            "undefined."
        )
    return {
        "sensitivity": float(np.sum(mu * pred) / pos),
        "specificity": float(np.sum((1 - mu) * (1 - pred)) / neg),
    }


def accuracy(fit_or_probs, annotations: Annotations) -> float:
    """Accuracy of the most probable true class against the gold labels.

    Parameters
    ----------
    fit_or_probs : xarray.Dataset, xarray.DataTree or xarray.DataArray
        A fit with ``item_class_prob``, or that DataArray (item, true_class);
        chain and draw, when present, are averaged over before the argmax
        (ties go to the first class).
    annotations : Annotations
        With ``gold``; items of unknown gold are ignored. Items and classes are
        matched by id/name when the probabilities carry coordinates, by
        position otherwise.

    Returns
    -------
    float
        The share of gold items whose most probable class is the gold class.

    Raises
    ------
    ValueError
        If the annotations have no gold labels (or are continuous), or the
        probabilities do not match their items or classes.

    Examples
    --------
    >>> from crowd_models.models import two_coin
    >>> ann = cm.datasets.load_rte()
    >>> cm.report.accuracy(two_coin.em(ann), ann)
    """
    if not isinstance(annotations, Annotations):
        raise TypeError(f"annotations must be Annotations, got {type(annotations).__name__}.")
    if annotations.continuous:
        raise ValueError("accuracy needs categorical annotations; these are continuous.")
    if not annotations.has_gold:
        raise ValueError(
            "these annotations have no gold labels; pass gold= to Annotations.from_frame to "
            "score a fit."
        )
    probs = _item_class_prob(fit_or_probs)
    if D.ITEM in probs.coords:
        ids = pd.Index(probs[D.ITEM].values)
        missing = annotations.items[~annotations.items.isin(ids)]
        if len(missing):
            raise ValueError(
                f"the fit has no item_class_prob for item(s) {list(missing[:5])} of the "
                f"annotations; score a fit of these annotations."
            )
        probs = probs.sel({D.ITEM: annotations.items.to_numpy()})
    elif probs.sizes[D.ITEM] != annotations.n_items:
        raise ValueError(
            f"item_class_prob has {probs.sizes[D.ITEM]} items, the annotations "
            f"{annotations.n_items}."
        )
    codes = np.asarray(probs.argmax(D.TRUE_CLASS).values)
    if D.TRUE_CLASS in probs.coords:
        names = pd.Index(probs[D.TRUE_CLASS].values)
        codes = annotations.classes.get_indexer(names[codes])
        if (codes < 0).any():
            raise ValueError(
                f"the fit's classes {list(names)} are not the annotations' classes "
                f"{listing(annotations.classes)}."
            )
    elif probs.sizes[D.TRUE_CLASS] != annotations.n_classes:
        raise ValueError(
            f"item_class_prob has {probs.sizes[D.TRUE_CLASS]} classes, the annotations "
            f"{annotations.n_classes}."
        )
    known = annotations.gold >= 0
    return float(np.mean(codes[known] == annotations.gold[known]))


# ------------------------------------------------ annotators against gold
def _gold_rates(ann) -> dict[str, np.ndarray]:
    """Rates measured against gold per annotator (and threshold, for more than two
    ordered classes): name -> array (annotator,) or (annotator, threshold)."""
    J = ann.n_annotators
    gold = ann.gold[ann.item_idx]
    on = ~np.isnan(gold) if ann.continuous else gold >= 0
    j, y, g = ann.annotator_idx[on], ann.labels[on], gold[on]
    n = np.bincount(j, minlength=J).astype(float)

    def rate(mask, hit):
        total = np.bincount(j[mask], minlength=J).astype(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(total > 0, np.bincount(j[mask], weights=hit[mask], minlength=J)
                            / total, np.nan)

    out = {"n_gold_labels": n.astype(np.int64)}
    everything = np.ones(len(j), dtype=bool)
    if ann.continuous:
        out["gold_rmse"] = np.sqrt(rate(everything, (y - g) ** 2))
        return out
    out["gold_accuracy"] = rate(everything, (y == g).astype(float))
    if ann.n_classes == 2:
        out["gold_sensitivity"] = rate(g == 1, (y == 1).astype(float))
        out["gold_specificity"] = rate(g == 0, (y == 0).astype(float))
    else:  # per threshold c: "level above c", as the ordinal family's binary problems
        thresholds = range(ann.n_classes - 1)
        out["gold_sensitivity_by_threshold"] = np.stack(
            [rate(g > c, (y > c).astype(float)) for c in thresholds], axis=1)
        out["gold_specificity_by_threshold"] = np.stack(
            [rate(g <= c, (y <= c).astype(float)) for c in thresholds], axis=1)
    return out


def _insert_after(table: pd.DataFrame, name: str, values, anchors) -> None:
    for anchor in anchors:
        if anchor in table.columns:
            table.insert(table.columns.get_loc(anchor) + 1, name, values)
            return
    table[name] = values


def with_gold_columns(table: pd.DataFrame, annotations: Annotations) -> pd.DataFrame:
    """The annotator table with each annotator's rates measured against gold
    beside the estimated ones.

    Parameters
    ----------
    table : pandas.DataFrame
        An annotator table (:func:`crowd_models.report.annotator_summary`, or a
        family's own with one row per annotator and threshold).
    annotations : Annotations
        The fitted data, with gold labels.

    Returns
    -------
    pandas.DataFrame
        A copy with ``gold_sensitivity``/``gold_specificity`` (binary, or per
        threshold "level above c"), ``gold_accuracy`` (classes) or
        ``gold_rmse`` (continuous) after the matching estimate, and
        ``n_gold_labels``, the annotator's labels on gold items.

    Examples
    --------
    >>> from crowd_models.models import two_coin
    >>> from crowd_models.report import annotator_summary, with_gold_columns
    >>> ann = cm.datasets.load_rte()
    >>> with_gold_columns(annotator_summary(two_coin.em(ann)), ann).head()
    """
    if not isinstance(annotations, Annotations) or not annotations.has_gold:
        raise ValueError("with_gold_columns needs the fitted Annotations with gold labels "
                         "(Annotations.from_frame(..., gold=...)).")
    ann = annotations
    rates = _gold_rates(ann)
    table = table.copy()
    ids = table.index.get_level_values(0)
    rows = ann.annotators.get_indexer(ids)
    by_threshold = isinstance(table.index, pd.MultiIndex) and table.index.nlevels == 2
    cols = None
    if by_threshold:
        levels = pd.Index(pd.unique(table.index.get_level_values(1)))
        cols = levels.get_indexer(table.index.get_level_values(1))

    def values(name):
        v = rates[name]
        return v[rows, cols] if v.ndim == 2 else v[rows]

    for name, anchor in (("sensitivity", "sensitivity_upper"),
                         ("specificity", "specificity_upper")):
        key = f"gold_{name}" if f"gold_{name}" in rates else f"gold_{name}_by_threshold"
        if key in rates and (rates[key].ndim == 1 or by_threshold):
            _insert_after(table, f"gold_{name}", values(key), [anchor, "n_labels"])
    for name, anchor in (("gold_accuracy", "accuracy_upper"), ("gold_rmse", "precision_upper")):
        if name in rates:
            _insert_after(table, name, values(name), [anchor])
    if "n_labels" in table.columns:
        last = table.pop("n_labels")
        table["n_labels"] = last
    table["n_gold_labels"] = values("n_gold_labels")
    return table


def gold_confusion(items: pd.DataFrame, annotations: Annotations) -> pd.DataFrame:
    """Counts of items by gold class (rows) and estimated class (columns).

    Parameters
    ----------
    items : pandas.DataFrame
        :func:`crowd_models.report.item_table` of a categorical fit.
    annotations : Annotations
        The fitted data, with gold labels.

    Returns
    -------
    pandas.DataFrame
        Class by class counts over the items with a gold label.

    Examples
    --------
    >>> from crowd_models.models import dawid_skene
    >>> from crowd_models.report import gold_confusion, item_table
    >>> ann = cm.datasets.load_dog()
    >>> gold_confusion(item_table(dawid_skene.em(ann), ann), ann)
    """
    if not isinstance(annotations, Annotations) or not annotations.has_gold or (
            annotations.continuous):
        raise ValueError("gold_confusion needs categorical Annotations with gold labels.")
    ann = annotations
    known = ann.gold >= 0
    estimated = ann.classes.get_indexer(items["estimated_label"].reindex(ann.items).to_numpy())
    counts = np.zeros((ann.n_classes, ann.n_classes), dtype=np.int64)
    np.add.at(counts, (ann.gold[known], estimated[known]), 1)
    return pd.DataFrame(counts, index=pd.Index(ann.classes, name="gold"),
                        columns=pd.Index(ann.classes, name="estimated"))
