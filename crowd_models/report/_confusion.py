"""Confusion matrices of a fit: aligned, weighted, and their EM Dirichlet approximations."""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from crowd_models import _dims as D
from crowd_models._fits import (
    SAMPLE_DIMS,
    is_annotator_measure,
    n_samples,
    summarise_draws,
)
from crowd_models.report._approximations import beta_moments, beta_quantile, beta_sum_summary

# ------------------------------------------------------ confusion matrices
_CONFUSION_DIMS = (D.ANNOTATOR, D.TRUE_CLASS, D.LABEL_CLASS)


def _aligned_confusion(da: xr.DataArray, name: str = "confusion") -> xr.DataArray:
    """A confusion-like array with its label classes in the true classes' order."""
    n_true, n_label = da.sizes[D.TRUE_CLASS], da.sizes[D.LABEL_CLASS]
    if n_true != n_label:
        raise ValueError(
            f"{name} must be square in (true_class, label_class), got {n_true} true classes "
            f"and {n_label} label classes."
        )
    if D.TRUE_CLASS not in da.coords or D.LABEL_CLASS not in da.coords:
        return da
    true_names = pd.Index(da[D.TRUE_CLASS].values)
    positions = pd.Index(da[D.LABEL_CLASS].values).get_indexer(true_names)
    if (positions < 0).any():
        raise ValueError(
            f"{name}: true class(es) {list(true_names[positions < 0])} have no label class of "
            f"the same name; the label classes are {list(da[D.LABEL_CLASS].values)}."
        )
    return da.isel({D.LABEL_CLASS: positions})


def _class_names(da: xr.DataArray) -> list:
    """The true-class names of a confusion-like array (positions when it has none)."""
    if D.TRUE_CLASS in da.coords:
        return list(da[D.TRUE_CLASS].values)
    return list(range(da.sizes[D.TRUE_CLASS]))


def _confusion_of(post: xr.Dataset) -> xr.DataArray | None:
    """The per-annotator ``confusion`` draws of a fit, classes aligned, if it has them."""
    if "confusion" not in post:
        return None
    da = post["confusion"]
    if set(da.dims) != {*SAMPLE_DIMS, *_CONFUSION_DIMS}:
        return None
    return _aligned_confusion(da).transpose(*SAMPLE_DIMS, *_CONFUSION_DIMS)


def _sample_array(da: xr.DataArray, *dims: str) -> np.ndarray:
    """Draws as a (sample, *dims) float array, sample = chain x draw (1 if absent)."""
    sample = [d for d in SAMPLE_DIMS if d in da.dims]
    da = da.transpose(*sample, *dims)
    return np.asarray(da.values, dtype=float).reshape(-1, *[da.sizes[d] for d in dims])


def _is_one_coin(post: xr.Dataset) -> bool:
    """Whether a confusion fit is the one-coin variant (a per-annotator ``accuracy``)."""
    return "accuracy" in post and is_annotator_measure(post["accuracy"])


def _confusion_alpha(post: xr.Dataset) -> xr.DataArray | None:
    """The Dirichlet rows of an EM fit's confusion, aligned, if usable.

    Only a one-draw fit of a full confusion model uses them: with many draws
    the draws carry the uncertainty, and the one-coin EM stores the rows of the
    full model, which do not describe its single accuracy per annotator."""
    if "confusion_alpha" not in post or n_samples(post) > 1 or _is_one_coin(post):
        return None
    da = post["confusion_alpha"]
    if set(da.dims) != set(_CONFUSION_DIMS):
        return None
    return _aligned_confusion(da, "confusion_alpha").transpose(*_CONFUSION_DIMS)


def _beta_marginals(alpha: xr.DataArray) -> tuple[np.ndarray, np.ndarray]:
    """Beta parameters of each cell's marginal under Dirichlet rows."""
    a = np.asarray(alpha.values, dtype=float)
    return a, a.sum(axis=2, keepdims=True) - a


def _class_weights(post: xr.Dataset, conf: xr.DataArray,
                   shares: xr.DataArray | None = None) -> np.ndarray | None:
    """Share of each true class, per draw, to average per-class accuracies with;
    ``shares`` (true_class), one for every draw, where ``post`` has none."""
    if "prevalence" in post and D.TRUE_CLASS in post["prevalence"].dims and set(
            post["prevalence"].dims) <= {*SAMPLE_DIMS, D.TRUE_CLASS}:
        weights = post["prevalence"]
    elif "item_class_prob" in post and set(post["item_class_prob"].dims) - set(
            SAMPLE_DIMS) == {D.ITEM, D.TRUE_CLASS}:
        weights = post["item_class_prob"].mean(D.ITEM)
    elif shares is not None:
        weights = shares
    else:
        return None
    if weights.sizes[D.TRUE_CLASS] != conf.sizes[D.TRUE_CLASS]:
        raise ValueError(
            f"the fit's class shares have {weights.sizes[D.TRUE_CLASS]} classes but its "
            f"confusion has {conf.sizes[D.TRUE_CLASS]}."
        )
    return _sample_array(weights, D.TRUE_CLASS)


def _accuracy_summaries(post: xr.Dataset, conf: xr.DataArray, ci_prob: float,
                        shares: xr.DataArray | None = None) -> dict[str, dict[str, np.ndarray]]:
    """Per-class and overall accuracy of each annotator of a confusion fit
    (``shares``: :func:`_class_weights`'s)."""
    diag = np.diagonal(_sample_array(conf, *_CONFUSION_DIMS), axis1=2, axis2=3)  # (S, J, K)
    names = [f"accuracy_{c}" for c in _class_names(conf)]
    if len(set(names)) < len(names):
        raise ValueError(
            f"the true classes {_class_names(conf)} give duplicate column names {names}; "
            f"give the classes distinct names."
        )
    weights = None if _is_one_coin(post) else _class_weights(post, conf, shares)
    out: dict[str, dict[str, np.ndarray]] = {}
    if diag.shape[0] > 1:
        if weights is not None:
            out["accuracy"] = summarise_draws(np.sum(weights[:, None, :] * diag, axis=2),
                                               ci_prob)
        for k, name in enumerate(names):
            out[name] = summarise_draws(diag[:, :, k], ci_prob)
        return out

    point = diag[0]  # (J, K)
    nan = np.full(point.shape[0], np.nan)
    if weights is not None:
        out["accuracy"] = {"mean": point @ weights[0], "sd": nan, "lower": nan.copy(),
                           "upper": nan.copy()}
    for k, name in enumerate(names):
        out[name] = {"mean": point[:, k], "sd": nan.copy(), "lower": nan.copy(),
                     "upper": nan.copy()}
    alpha = _confusion_alpha(post)
    if alpha is None:
        return out
    # the rows' joint mode (the EM estimate) is not the centre of the cells'
    # marginals: with few labels the overall accuracy's mode fell outside the
    # interval for most dog annotators, so the approximation's mean is reported
    a, b = (np.diagonal(x, axis1=1, axis2=2) for x in _beta_marginals(alpha))  # (J, K)
    tail = (1 - ci_prob) / 2
    for k, name in enumerate(names):
        mean, sd = beta_moments(a[:, k], b[:, k])
        out[name] = {"mean": mean, "sd": sd, "lower": beta_quantile(tail, a[:, k], b[:, k]),
                     "upper": beta_quantile(1 - tail, a[:, k], b[:, k])}
    if weights is not None:
        # rows are independent and the overall accuracy only involves their
        # diagonal cells: a weighted sum of independent Betas, whose mean and sd
        # are exact and whose interval is the moment-matched Beta's
        out["accuracy"] = beta_sum_summary(a, b, weights[0], ci_prob)
    return out
