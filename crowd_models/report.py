"""Annotator tables, annotator plots and classifier scores over any fit.

Every function here takes any of the three kinds of fit the families produce
and treats them alike:

* an EM ``xarray.Dataset`` (``chain=1, draw=1``), from a family's ``em``;
* a MAP ``xarray.DataTree`` from :func:`crowd_models.fit_map` (one draw);
* a NUTS ``xarray.DataTree`` from :func:`crowd_models.sample` (many draws).

With many draws, uncertainty comes from the draws. A single-draw fit carries
no uncertainty of its own, so its spreads and intervals are NaN, except for
an EM fit that stores the Beta approximations of Raykar et al. (2009), sec.
7.1 (``sensitivity_alpha``/``_beta``, ``specificity_alpha``/``_beta``), whose
spreads and intervals are used instead.

The positive class of a binary fit is the second class of ``true_class``, as
everywhere in the package.

Functions
---------
annotator_summary : one row per annotator, mean, sd and interval per measure.
plot_annotators : annotators in ROC space, with intervals and optional truth.
roc_curve, plot_roc : ROC curve and AUC of scores against binary gold labels.
soft_confusion : sensitivity and specificity of 0/1 predictions against soft labels.
accuracy : accuracy of a fit's most probable true class against gold labels.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats
from scipy.special import logit

from crowd_models import _dims as D
from crowd_models.data import Annotations
from crowd_models.inference import posterior_of

__all__ = [
    "annotator_summary",
    "plot_annotators",
    "roc_curve",
    "plot_roc",
    "soft_confusion",
    "accuracy",
]

_SAMPLE_DIMS = (D.CHAIN, D.DRAW)
_STATS = ("mean", "sd", "lower", "upper")
_BETA_PARAMS = {
    "sensitivity": ("sensitivity_alpha", "sensitivity_beta"),
    "specificity": ("specificity_alpha", "specificity_beta"),
}
_MC_DRAWS = 4000
"""Monte Carlo draws per annotator for the weight of a Beta-approximated EM fit."""
_MC_SEED = 2009
"""Seed of those draws, so that a summary is reproducible."""


# ------------------------------------------------------------------ helpers
def _check_ci_prob(ci_prob) -> float:
    """Validate the interval probability.

    Parameters
    ----------
    ci_prob : float
        Probability mass of the equal-tailed interval.

    Returns
    -------
    float
        ``ci_prob`` as a float strictly between 0 and 1.
    """
    if isinstance(ci_prob, bool) or not isinstance(ci_prob, int | float | np.number):
        raise ValueError(
            f"ci_prob must be a number strictly between 0 and 1 (e.g. 0.9), got {ci_prob!r}."
        )
    if not 0 < float(ci_prob) < 1:
        raise ValueError(
            f"ci_prob must be strictly between 0 and 1 (e.g. 0.9 for a 90% interval), got "
            f"{ci_prob!r}."
        )
    return float(ci_prob)


def _n_samples(post: xr.Dataset) -> int:
    """Number of posterior draws (chain x draw) in a posterior Dataset.

    Parameters
    ----------
    post : xarray.Dataset
        A posterior Dataset with ``chain`` and ``draw`` dims.

    Returns
    -------
    int
    """
    return int(np.prod([post.sizes.get(d, 1) for d in _SAMPLE_DIMS]))


def _is_annotator_measure(da: xr.DataArray) -> bool:
    """Whether a posterior variable is a per-annotator quality measure.

    Parameters
    ----------
    da : xarray.DataArray

    Returns
    -------
    bool
        True when the variable is numeric with exactly the dims chain, draw and
        annotator (EM extras such as ``n_labels`` have no sample dims and are
        therefore not measures).
    """
    return (set(da.dims) == {*_SAMPLE_DIMS, D.ANNOTATOR}
            and np.issubdtype(da.dtype, np.number))


def _draw_matrix(da: xr.DataArray) -> np.ndarray:
    """Draws of a (chain, draw, annotator) variable as a (sample, annotator) array.

    Parameters
    ----------
    da : xarray.DataArray

    Returns
    -------
    numpy.ndarray of float, shape (chain * draw, annotator)
    """
    da = da.transpose(*_SAMPLE_DIMS, D.ANNOTATOR)
    return np.asarray(da.values, dtype=float).reshape(-1, da.sizes[D.ANNOTATOR])


def _annotator_vector(ds: xr.Dataset, name: str) -> np.ndarray:
    """A per-annotator variable of a Dataset as a float vector in annotator order.

    Parameters
    ----------
    ds : xarray.Dataset
    name : str

    Returns
    -------
    numpy.ndarray of float, shape (annotator,)
    """
    da = ds[name]
    da = da.isel({d: 0 for d in _SAMPLE_DIMS if d in da.dims})
    return np.asarray(da.transpose(D.ANNOTATOR).values, dtype=float)


def _summarise_draws(draws: np.ndarray, ci_prob: float) -> dict[str, np.ndarray]:
    """Mean, sd and equal-tailed interval of (sample, annotator) draws.

    Parameters
    ----------
    draws : numpy.ndarray, shape (sample, annotator)
    ci_prob : float

    Returns
    -------
    dict
        ``mean``, ``sd`` (ddof=1) and the ``lower``/``upper`` quantiles
        ``(1 -/+ ci_prob) / 2`` (numpy's default linear interpolation), each a
        vector over annotators.
    """
    tail = (1 - ci_prob) / 2
    return {
        "mean": draws.mean(axis=0),
        "sd": draws.std(axis=0, ddof=1),
        "lower": np.quantile(draws, tail, axis=0),
        "upper": np.quantile(draws, 1 - tail, axis=0),
    }


def _has_beta_approximation(post: xr.Dataset) -> bool:
    """Whether an EM Dataset stores the sec. 7.1 Beta approximations.

    Parameters
    ----------
    post : xarray.Dataset

    Returns
    -------
    bool
    """
    names = [n for pair in _BETA_PARAMS.values() for n in pair]
    return all(n in post and D.ANNOTATOR in post[n].dims for n in names)


def _single_draw_summary(post: xr.Dataset, measures: dict[str, xr.DataArray],
                         ci_prob: float) -> dict[str, dict[str, np.ndarray]]:
    """Summaries of a one-draw fit (EM or MAP).

    The mean is the fit's point estimate. Spreads and intervals are NaN, except
    for sensitivity, specificity and weight of a fit with Beta approximations:
    sensitivity and specificity use the Beta distributions exactly, the weight
    uses Monte Carlo draws from them.

    Parameters
    ----------
    post : xarray.Dataset
    measures : dict
        Measure name -> (chain, draw, annotator) DataArray.
    ci_prob : float

    Returns
    -------
    dict
        Measure name -> dict of ``mean``, ``sd``, ``lower``, ``upper`` vectors.
    """
    tail = (1 - ci_prob) / 2
    out = {}
    for name, da in measures.items():
        point = _draw_matrix(da)[0]
        nan = np.full_like(point, np.nan)
        out[name] = {"mean": point, "sd": nan, "lower": nan.copy(), "upper": nan.copy()}
    if not (_has_beta_approximation(post) and "sensitivity" in measures
            and "specificity" in measures):
        return out
    params = {name: (_annotator_vector(post, a), _annotator_vector(post, b))
              for name, (a, b) in _BETA_PARAMS.items()}
    for name, (a, b) in params.items():
        out[name]["sd"] = stats.beta.std(a, b)
        out[name]["lower"] = stats.beta.ppf(tail, a, b)
        out[name]["upper"] = stats.beta.ppf(1 - tail, a, b)
    if "weight" in out and "weight" not in post:
        rng = np.random.default_rng(_MC_SEED)
        sens = rng.beta(*params["sensitivity"], size=(_MC_DRAWS, len(point)))
        spec = rng.beta(*params["specificity"], size=(_MC_DRAWS, len(point)))
        mc = _summarise_draws(logit(sens) + logit(spec), ci_prob)
        out["weight"].update({k: mc[k] for k in ("sd", "lower", "upper")})
    return out


def _n_labels(fit, post: xr.Dataset, annotators: pd.Index) -> pd.Series:
    """Labels per annotator, from an EM Dataset or a DataTree's constant_data.

    Parameters
    ----------
    fit : xarray.Dataset or xarray.DataTree
    post : xarray.Dataset
        The fit's posterior.
    annotators : pandas.Index
        The annotator ids of the summary rows.

    Returns
    -------
    pandas.Series
        Integer counts by annotator, or NaN where the fit does not record them.
    """
    source = None
    if "n_labels" in post and post["n_labels"].dims == (D.ANNOTATOR,):
        source = post["n_labels"]
    elif isinstance(fit, xr.DataTree) and "constant_data" in fit.children:
        const = fit["constant_data"].to_dataset()
        if "n_labels" in const and const["n_labels"].dims == (D.ANNOTATOR,):
            source = const["n_labels"]
    if source is None:
        return pd.Series(np.nan, index=annotators, name="n_labels")
    counts = pd.Series(np.asarray(source.values), index=pd.Index(source[D.ANNOTATOR].values))
    counts = counts.reindex(annotators)
    if counts.notna().all():
        counts = counts.astype(np.int64)
    return counts.rename("n_labels")


# --------------------------------------------------------------- the table
def annotator_summary(fit, *, ci_prob: float = 0.9, rank_by: str | None = None) -> pd.DataFrame:
    """One row per annotator: mean, sd and interval of each quality measure.

    Parameters
    ----------
    fit : xarray.Dataset or xarray.DataTree
        An EM Dataset, or a DataTree from ``fit_map`` or ``sample``.
    ci_prob : float, default 0.9
        Probability of the equal-tailed interval, strictly between 0 and 1.
    rank_by : str, optional
        A column of the table; rows are sorted by it, largest first (NaN last).
        Default: the fit's annotator order.

    Returns
    -------
    pandas.DataFrame
        Indexed by the user's annotator ids (index name ``annotator``). For each
        measure ``m`` present, the columns ``m_mean``, ``m_sd``, ``m_lower``,
        ``m_upper``; then ``n_labels`` (NaN when the fit does not record it).

        Measures, in this order: ``sensitivity``, ``specificity`` and ``weight``
        = logit(sensitivity) + logit(specificity), the annotator's weight in the
        log-odds of the true label (Raykar et al. 2009, sec. 6.2), when the fit
        has sensitivity and specificity; then every other posterior variable
        whose only dims besides chain and draw is ``annotator`` (e.g.
        ``precision``), in the fit's variable order.

    Raises
    ------
    ValueError
        If ``ci_prob`` is not strictly between 0 and 1, if the fit has no
        per-annotator variable, or if ``rank_by`` is not a column.

    Notes
    -----
    With many draws, statistics are over all chains and draws pooled: the
    mean, the standard deviation (ddof=1) and the ``(1 -/+ ci_prob) / 2``
    quantiles (linear interpolation). The weight is computed draw by draw.

    A one-draw fit (EM, MAP) reports its point estimate as ``_mean`` and NaN
    for ``_sd``, ``_lower`` and ``_upper``. An EM Dataset that carries the
    Beta approximations of sec. 7.1 (``sensitivity_alpha``/``_beta``,
    ``specificity_alpha``/``_beta``) gets the sd and quantiles of those Betas
    for sensitivity and specificity, and, for the weight, the sd and quantiles
    of 4000 Monte Carlo draws per annotator from them (fixed seed). The
    point estimate is the mode of the Beta, not its mean.
    """
    ci_prob = _check_ci_prob(ci_prob)
    post = posterior_of(fit)
    found = {name: post[name] for name in post.data_vars if _is_annotator_measure(post[name])}
    if not found:
        raise ValueError(
            f"this fit has no per-annotator variable (dims chain, draw, annotator) to "
            f"summarise; its variables are {sorted(map(str, post.data_vars))}."
        )
    measures: dict[str, xr.DataArray] = {}
    if "sensitivity" in found and "specificity" in found:
        measures["sensitivity"] = found.pop("sensitivity")
        measures["specificity"] = found.pop("specificity")
        measures["weight"] = found.pop(
            "weight", logit(measures["sensitivity"]) + logit(measures["specificity"]))
    measures.update(found)

    annotators = pd.Index(post[D.ANNOTATOR].values, name=D.ANNOTATOR)
    if _n_samples(post) > 1:
        summaries = {name: _summarise_draws(_draw_matrix(da), ci_prob)
                     for name, da in measures.items()}
    else:
        summaries = _single_draw_summary(post, measures, ci_prob)
    columns = {f"{name}_{stat}": summaries[name][stat]
               for name in measures for stat in _STATS}
    table = pd.DataFrame(columns, index=annotators)
    table["n_labels"] = _n_labels(fit, post, annotators)

    if rank_by is not None:
        if rank_by not in table.columns:
            raise ValueError(
                f"rank_by={rank_by!r} is not a column of the summary; choose one of "
                f"{list(table.columns)}."
            )
        table = table.sort_values(rank_by, ascending=False, kind="mergesort",
                                  na_position="last")
    return table


# ---------------------------------------------------------- annotator plot
def _truth_vector(truth, name: str, annotators: pd.Index) -> np.ndarray:
    """True values of one measure, in the summary's annotator order.

    Parameters
    ----------
    truth : xarray.Dataset or mapping
        ``truth[name]`` is a DataArray or Series indexed by annotator (aligned
        by id), or an array in the fit's annotator order.
    name : str
    annotators : pandas.Index

    Returns
    -------
    numpy.ndarray of float, shape (annotator,)
    """
    if name not in truth:
        raise ValueError(
            f"truth has no {name!r}; give the true sensitivity and specificity by annotator "
            f"(e.g. annotations.truth from simulate())."
        )
    value = truth[name]
    if isinstance(value, xr.DataArray) and D.ANNOTATOR in value.dims:
        if D.ANNOTATOR in value.coords:
            value = value.to_series() if value.ndim == 1 else value
        else:
            value = value.values
    if isinstance(value, pd.Series):
        missing = annotators[~annotators.isin(value.index)]
        if len(missing):
            raise ValueError(
                f"truth[{name!r}] has no value for annotator(s) {list(missing[:5])}; it must "
                f"cover every annotator of the fit."
            )
        value = value.reindex(annotators)
    arr = np.asarray(value, dtype=float)
    if arr.shape != (len(annotators),):
        raise ValueError(
            f"truth[{name!r}] must hold one value per annotator ({len(annotators)}), got shape "
            f"{arr.shape}."
        )
    return arr


def plot_annotators(fit, *, truth=None, ci_prob: float = 0.9, ax=None, label_top: int = 0):
    """Annotators in ROC space: (1 - specificity, sensitivity) with intervals.

    Parameters
    ----------
    fit : xarray.Dataset or xarray.DataTree
        A fit with ``sensitivity`` and ``specificity`` (annotator).
    truth : xarray.Dataset or mapping, optional
        True ``sensitivity`` and ``specificity`` by annotator (e.g.
        ``annotations.truth`` of a simulation): DataArrays or Series aligned by
        annotator id, or arrays in the fit's annotator order. Each true point is
        drawn as a cross, joined to its estimate by a thin line.
    ci_prob : float, default 0.9
        Probability of the error bars (see :func:`annotator_summary`); no bars
        where the fit has no intervals (a MAP fit).
    ax : matplotlib Axes, optional
        Axes to draw on; default a new square figure.
    label_top : int, default 0
        Write the ids of this many annotators with the most labels.

    Returns
    -------
    matplotlib.axes.Axes
        The estimates are the collection with gid ``"estimates"``, the truth the
        one with gid ``"truth"``, the links the one with gid ``"truth_links"``.

    Raises
    ------
    ValueError
        If the fit has no sensitivity/specificity, ``truth`` lacks a measure or
        an annotator, ``label_top`` is not a non-negative integer, or
        ``label_top > 0`` and the fit does not record labels per annotator.
    """
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection

    post = posterior_of(fit)
    missing = [n for n in ("sensitivity", "specificity") if n not in post]
    if missing:
        raise ValueError(
            f"plot_annotators needs sensitivity and specificity (a binary two-coin fit); this "
            f"fit lacks {missing}. Use annotator_summary(fit) for its other measures."
        )
    if isinstance(label_top, bool) or not isinstance(label_top, int | np.integer) or label_top < 0:
        raise ValueError(f"label_top must be a non-negative integer, got {label_top!r}.")
    table = annotator_summary(fit, ci_prob=ci_prob)
    if label_top > 0 and table["n_labels"].isna().any():
        raise ValueError(
            "label_top needs the number of labels per annotator, which this fit does not "
            "record (no n_labels); use label_top=0."
        )
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 5.5))

    x = 1 - table["specificity_mean"].to_numpy()
    y = table["sensitivity_mean"].to_numpy()
    bounds = table[["sensitivity_lower", "sensitivity_upper", "specificity_lower",
                    "specificity_upper"]].to_numpy()
    has_bars = np.isfinite(bounds).all(axis=1)
    if has_bars.any():
        spec_lo, spec_hi = table["specificity_lower"], table["specificity_upper"]
        sens_lo, sens_hi = table["sensitivity_lower"], table["sensitivity_upper"]
        # x = 1 - specificity, so the specificity interval flips
        xerr = np.vstack([spec_hi - table["specificity_mean"],
                          table["specificity_mean"] - spec_lo])
        yerr = np.vstack([y - sens_lo, sens_hi - y])
        ax.errorbar(x[has_bars], y[has_bars], xerr=np.clip(xerr[:, has_bars], 0, None),
                    yerr=np.clip(yerr[:, has_bars], 0, None), fmt="none", ecolor="C0",
                    elinewidth=0.8, alpha=0.6, zorder=2,
                    label=f"{ci_prob:.0%} interval")
    ax.scatter(x, y, s=28, color="C0", edgecolor="white", linewidth=0.5, zorder=3,
               label="estimate", gid="estimates")

    if truth is not None:
        if not isinstance(truth, xr.Dataset | Mapping):
            raise TypeError(
                f"truth must be an xarray Dataset or a dict with 'sensitivity' and "
                f"'specificity', got {type(truth).__name__}."
            )
        true_sens = _truth_vector(truth, "sensitivity", table.index)
        true_fpr = 1 - _truth_vector(truth, "specificity", table.index)
        links = LineCollection(
            [[(a, b), (c, d)] for a, b, c, d in zip(x, y, true_fpr, true_sens, strict=True)],
            colors="0.4", linewidths=0.6, zorder=2, gid="truth_links")
        ax.add_collection(links)
        ax.scatter(true_fpr, true_sens, marker="x", s=30, color="C3", linewidth=1.2, zorder=4,
                   label="truth", gid="truth")

    if label_top > 0:
        top = table["n_labels"].sort_values(ascending=False, kind="mergesort").index[:label_top]
        positions = table.index.get_indexer(top)
        for name, i in zip(top, positions, strict=True):
            ax.annotate(str(name), (x[i], y[i]), xytext=(4, 4), textcoords="offset points",
                        fontsize=8)

    ax.plot([0, 1], [0, 1], linestyle="--", color="0.6", linewidth=1, label="chance",
            gid="chance")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.set_xlabel("1 - specificity (false positive rate)")
    ax.set_ylabel("sensitivity (true positive rate)")
    ax.legend(loc="lower right", fontsize=8)
    return ax


# --------------------------------------------------------------------- ROC
def _binary(values, what: str) -> np.ndarray:
    """Validate a 1-D 0/1 (or bool) vector.

    Parameters
    ----------
    values : array-like
    what : str
        Its name, for messages.

    Returns
    -------
    numpy.ndarray of int, values in {0, 1}
    """
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
    ax : matplotlib Axes, optional
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
    """The (item, true_class) posterior of a fit, or a DataArray passed as is.

    Parameters
    ----------
    fit_or_probs : xarray.Dataset, xarray.DataTree or xarray.DataArray

    Returns
    -------
    xarray.DataArray
        (item, true_class), averaged over chain and draw when present.
    """
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
    sample = [d for d in _SAMPLE_DIMS if d in probs.dims]
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
                f"{list(annotations.classes)}."
            )
    elif probs.sizes[D.TRUE_CLASS] != annotations.n_classes:
        raise ValueError(
            f"item_class_prob has {probs.sizes[D.TRUE_CLASS]} classes, the annotations "
            f"{annotations.n_classes}."
        )
    known = annotations.gold >= 0
    return float(np.mean(codes[known] == annotations.gold[known]))
