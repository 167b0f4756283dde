"""How many crowd annotators equal one expert, from a continuous fit's precisions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr
from scipy.optimize import minimize_scalar

from crowd_models import _dims as D
from crowd_models._fits import (
    check_ci_prob,
    draw_matrix,
    item_draws,
    labels_per_annotator,
    posterior_of,
    summarise_draws,
)
from crowd_models.data import Annotations

__all__ = ["experts_equivalent"]


def _stats(draws: np.ndarray, ci_prob: float) -> dict:
    """Mean, sd and interval of 1-D draws (NaN spreads for a single draw)."""
    if len(draws) == 1:
        return {"mean": float(draws[0]), "sd": np.nan, "lower": np.nan, "upper": np.nan}
    return {k: float(v[0]) for k, v in summarise_draws(draws[:, None], ci_prob).items()}


def _labels_per_annotator(fit, post: xr.Dataset, annotations) -> np.ndarray:
    """Labels per annotator of the fit's annotators, from ``annotations`` or the fit."""
    annotators = pd.Index(post[D.ANNOTATOR].values)
    if annotations is not None:
        counts = pd.Series(annotations.n_labels(), index=annotations.annotators)
        counts = counts.reindex(annotators)
    else:
        counts = labels_per_annotator(fit, post, annotators)
        if counts.isna().all():
            raise ValueError(
                "the fit does not record the labels per annotator (n_labels); pass "
                "annotations=... ."
            )
    missing = annotators[counts.isna().to_numpy()]
    if len(missing):
        raise ValueError(f"no label counts for annotator(s) {list(missing[:5])}.")
    return counts.to_numpy(dtype=float)


def _expert_precision(resid, var, offset: bool, scale: float) -> float:
    """Maximum-likelihood precision of labels ``resid_i ~ N(o, var_i + 1 / precision)``."""

    def nll(log_s2):
        w = 1.0 / (var + np.exp(log_s2))
        o = np.sum(w * resid) / np.sum(w) if offset else 0.0
        return 0.5 * np.sum(w * (resid - o) ** 2 - np.log(w))

    lo, hi = np.log(scale ** 2) - 25, np.log(scale ** 2) + 10
    res = minimize_scalar(nll, bounds=(lo, hi), method="bounded", options={"xatol": 1e-8})
    if res.x < lo + 1e-4:  # the expert's error is not detectable
        return np.inf
    return float(np.exp(-res.x))


def experts_equivalent(fit, expert_precision, *, annotations: Annotations | None = None,
                       ci_prob: float = 0.9) -> pd.DataFrame:
    """How many of these annotators equal one expert.

    Under Gaussian noise, labels combine by adding precisions: n labels of
    precision tau pin the truth down as well as one label of precision
    ``n * tau``. So one expert label of precision ``tau_E`` is worth
    ``tau_E / tau_crowd`` crowd labels, where ``tau_crowd`` is the precision of
    a random crowd label (the label-weighted mean precision,
    ``sum_j n_j tau_j / sum_j n_j``). With annotator scales, a label of
    annotator j tells ``scale_j**2 * tau_j`` about the truth, and that is the
    precision averaged.

    Parameters
    ----------
    fit : xarray.Dataset or xarray.DataTree
        An EM Dataset or a MAP/NUTS DataTree of the continuous family.
    expert_precision : float or "gold"
        A positive number, or ``"gold"``.
        The expert's precision in label units (1 / the expert's error
        variance). ``"gold"`` estimates it from the gold values of
        ``annotations``, draw by draw: the gold values did not inform the
        fit, so given a draw an expert label is ``g_i ~ N(mu_i + o, sd_i**2 +
        1 / expert_precision)``, with ``mu_i``/``sd_i`` the draw's
        ``true_value``/``true_value_sd``, and ``expert_precision`` is the
        maximum-likelihood value of that model over the gold items. When the
        fit has biases the expert gets an offset ``o`` too (estimated jointly),
        otherwise o = 0. An expert whose errors are too small to detect next
        to the crowd's uncertainty gets an infinite precision.
    annotations : Annotations, optional
        The fitted Annotations (needed for ``"gold"``; otherwise optional, for
        the labels per annotator).
    ci_prob : float, optional
        Probability of the equal-tailed intervals (over draws).

    Returns
    -------
    pandas.DataFrame
        Indexed by ``expert_precision``, ``crowd_precision`` and
        ``annotators_per_expert`` (= expert / crowd precision), with columns
        ``mean``, ``sd``, ``lower``, ``upper``, computed draw by draw (NaN
        spreads for a single-draw fit). Student-t fits: precisions are inverse
        squared scales, so the ratio compares scales, not variances.

    Examples
    --------
    >>> from crowd_models.models import continuous
    >>> ann = cm.datasets.load_affect("anger")
    >>> cm.report.experts_equivalent(continuous.em(ann), "gold", annotations=ann)
    """
    ci_prob = check_ci_prob(ci_prob)
    post = posterior_of(fit)
    if "precision" not in post or D.ANNOTATOR not in post["precision"].dims:
        raise ValueError(
            f"this fit has no per-annotator precision; its variables are "
            f"{sorted(map(str, post.data_vars))}."
        )
    tau = draw_matrix(post["precision"], D.ANNOTATOR)
    if "scale" in post:
        tau = tau * draw_matrix(post["scale"], D.ANNOTATOR) ** 2
    n_j = _labels_per_annotator(fit, post, annotations)
    crowd = tau @ n_j / n_j.sum()
    if isinstance(expert_precision, str):
        if expert_precision != "gold":
            raise ValueError(
                f"expert_precision={expert_precision!r}: give a positive number or 'gold'.")
        if annotations is None or not annotations.continuous or not annotations.has_gold:
            raise ValueError(
                "expert_precision='gold' needs annotations=... with continuous gold values.")
        mean, sd, _ = item_draws(post, annotations)
        known = ~np.isnan(annotations.gold)
        if known.sum() < 2:
            raise ValueError("expert_precision='gold' needs at least two items with gold.")
        resid = annotations.gold[known][None, :] - mean[:, known]
        scale = float(np.std(annotations.labels))
        expert = np.array([_expert_precision(r, v, "bias" in post, scale)
                           for r, v in zip(resid, sd[:, known] ** 2, strict=True)])
    else:
        if isinstance(expert_precision, bool) or not isinstance(
                expert_precision, int | float | np.number) or not (
                np.isfinite(expert_precision) and expert_precision > 0):
            raise ValueError(
                f"expert_precision must be a positive number or 'gold', got "
                f"{expert_precision!r}.")
        expert = np.full(len(tau), float(expert_precision))
    rows = {"expert_precision": expert, "crowd_precision": crowd,
            "annotators_per_expert": expert / crowd}
    return pd.DataFrame({name: _stats(v, ci_prob) for name, v in rows.items()}).T
