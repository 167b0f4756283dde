"""Annotator figures: ROC space, per-threshold panels, bias against noise, accuracy."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import xarray as xr
from scipy.special import ndtri

from crowd_models import _dims as D
from crowd_models._fits import (
    check_ci_prob,
    is_annotator_measure,
    labels_per_annotator,
    n_samples,
    posterior_of,
)
from crowd_models.report._describe import (
    _check_count,
    _extremes,
    _fit_description,
    _positive_class,
)
from crowd_models.report.summary import _is_continuous, annotator_summary


# ---------------------------------------------------------- annotator plot
def _truth_vector(truth, name: str, annotators: pd.Index) -> np.ndarray:
    """True values of one measure, in the summary's annotator order."""
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


def _marker_sizes(counts: pd.Series) -> np.ndarray:
    """Marker areas proportional to each annotator's labels (one size when unrecorded)."""
    n = counts.to_numpy(dtype=float)
    if len(n) == 0 or not np.isfinite(n).all() or n.max() <= 0:
        return np.full(len(n), 28.0)
    return 8.0 + 160.0 * n / n.max()


_LABEL_COLOURS = {"best": "C2", "worst": "C3", "busiest": "0.15"}
"""Text colour of a labelled annotator, by the group it was labelled for."""


_LABEL_SIZE = 8
"""Font size (points) of the annotator ids written at points."""
_LABEL_STEPS = ((4, 4), (4, -12), (-4, 4), (-4, -12), (4, 16), (4, -24), (-4, 16), (-4, -24),
                (4, 28), (4, -36), (-4, 28), (-4, -36))
"""Offsets (points) tried in turn for a label, right of the point first, then left
(the label's right edge at the point), so that no two labels overlap."""


def _label_points(ax, x, y, names, groups: dict[str, list[int]]) -> None:
    """Write annotator ids at chosen points, once each, each at the first offset
    where it overlaps no label already written (call it once the axes' limits and
    scales are set: it places by the display positions); a text's gid is its group."""
    scale = 72 / ax.figure.dpi  # pixels to points
    finite = np.isfinite(x) & np.isfinite(y)
    at = np.full((len(x), 2), np.nan)
    at[finite] = ax.transData.transform(np.column_stack([x[finite], y[finite]])) * scale
    placed: list[tuple[float, float, float, float]] = []
    done: set[int] = set()
    for group, positions in groups.items():
        for i in positions:
            if i in done or not (np.isfinite(x[i]) and np.isfinite(y[i])):
                continue
            done.add(i)
            text = str(names[i])
            w, h = 0.7 * _LABEL_SIZE * len(text), 1.3 * _LABEL_SIZE
            px, py = at[i]
            for dx, dy in _LABEL_STEPS:
                left = px + dx if dx > 0 else px + dx - w
                rect = (left, py + dy, left + w, py + dy + h)
                if not any(rect[0] < r[2] and r[0] < rect[2] and rect[1] < r[3] and r[1] < rect[3]
                           for r in placed):
                    break
            placed.append(rect)
            ax.annotate(text, (x[i], y[i]), xytext=(dx, dy), textcoords="offset points",
                        ha="left" if dx > 0 else "right", fontsize=_LABEL_SIZE,
                        color=_LABEL_COLOURS.get(group, "0.15"), gid=group, zorder=5,
                        bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none",
                              "alpha": 0.85})


def _chosen_labels(table: pd.DataFrame, score, label_top: int,
                   label_extremes: int) -> dict[str, list[int]]:
    """The points to label: best and worst by ``score``, then the busiest annotators."""
    groups: dict[str, list[int]] = {}
    if label_extremes:
        groups["best"], groups["worst"] = _extremes(score, label_extremes)
    if label_top:
        if table["n_labels"].isna().any():
            raise ValueError(
                "label_top needs the number of labels per annotator, which this fit does not "
                "record (no n_labels); use label_top=0."
            )
        top = table["n_labels"].sort_values(ascending=False, kind="mergesort").index[:label_top]
        groups["busiest"] = [int(i) for i in table.index.get_indexer(top)]
    return groups


def _error_bars(ax, x, y, xlo, xhi, ylo, yhi, label: str) -> None:
    """Draw error bars from interval ends, only for points whose four ends are finite."""
    ends = np.vstack([xlo, xhi, ylo, yhi])
    ok = np.isfinite(ends).all(axis=0) & np.isfinite(x) & np.isfinite(y)
    if not ok.any():
        return
    xerr = np.clip(np.vstack([x - xlo, xhi - x])[:, ok], 0, None)
    yerr = np.clip(np.vstack([y - ylo, yhi - y])[:, ok], 0, None)
    ax.errorbar(x[ok], y[ok], xerr=xerr, yerr=yerr, fmt="none", ecolor="C0", elinewidth=0.8,
                alpha=0.6, zorder=2, label=label)


def _draw_roc(ax, table: pd.DataFrame, ci_prob: float, label_top: int,
              label_extremes: int) -> tuple[np.ndarray, np.ndarray]:
    """Draw a summary table's annotators in ROC space; returns the points' x and y."""
    x = 1 - table["specificity_mean"].to_numpy()
    y = table["sensitivity_mean"].to_numpy()
    # x = 1 - specificity, so the specificity interval flips
    _error_bars(ax, x, y, 1 - table["specificity_upper"].to_numpy(),
                1 - table["specificity_lower"].to_numpy(), table["sensitivity_lower"].to_numpy(),
                table["sensitivity_upper"].to_numpy(), f"{ci_prob:.0%} interval")
    sized = table["n_labels"].notna().all()
    ax.scatter(x, y, s=_marker_sizes(table["n_labels"]), color="C0", edgecolor="white",
               linewidth=0.5, zorder=3, gid="estimates",
               label="estimate (area: labels)" if sized else "estimate")
    groups = _chosen_labels(table, table["weight_mean"].to_numpy(), label_top, label_extremes)
    ax.plot([0, 1], [0, 1], linestyle="--", color="0.6", linewidth=1, label="chance",
            gid="chance")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    _label_points(ax, x, y, table.index, groups)
    ax.set_xlabel("1 - specificity (false positive rate)")
    ax.set_ylabel("sensitivity (true positive rate)")
    return x, y


def plot_annotators(fit, *, truth=None, ci_prob: float = 0.9, ax=None, label_top: int = 0,
                    label_extremes: int = 0, title: str | None = None):
    """Annotators in ROC space: (1 - specificity, sensitivity) with intervals.

    Parameters
    ----------
    fit : xarray.Dataset or xarray.DataTree
        A binary fit with ``sensitivity`` and ``specificity`` (annotator), e.g.
        two-coin. For an ordinal fit (one pair per threshold) use
        :func:`plot_thresholds`.
    truth : xarray.Dataset or mapping, optional
        True ``sensitivity`` and ``specificity`` by annotator (e.g.
        ``annotations.truth`` of a simulation): DataArrays or Series aligned by
        annotator id, or arrays in the fit's annotator order. Each true point is
        drawn as a cross, joined to its estimate by a thin line.
    ci_prob : float, default 0.9
        Probability of the error bars (see :func:`annotator_summary`); no bars
        where the fit has no intervals (a MAP fit).
    ax : matplotlib.axes.Axes, optional
        Axes to draw on; default a new square figure.
    label_top : int, default 0
        Write the ids of this many annotators with the most labels.
    label_extremes : int, default 0
        Write the ids of this many best and this many worst annotators by
        ``weight_mean`` = logit(sensitivity) + logit(specificity), the weight of
        their vote in the log-odds of the true class (green: best, red: worst).
    title : str, optional
        Default: the family, the method (EM, MAP or NUTS) and the positive
        class, e.g. ``"two-coin, EM: annotators in ROC space (positive class
        1)"``; ``""`` for none.

    Returns
    -------
    matplotlib.axes.Axes
        The estimates are the collection with gid ``"estimates"`` (marker area
        proportional to the annotator's ``n_labels`` when the fit records
        them, one size otherwise), the truth the one with gid ``"truth"``, the
        links the one with gid ``"truth_links"``. Each written id is a text
        whose gid says why it was written: ``"best"``, ``"worst"`` or
        ``"busiest"`` (an annotator is written once, in that order).

    Raises
    ------
    ValueError
        If the fit has no sensitivity/specificity or has them per threshold,
        ``truth`` lacks a measure or an annotator, ``label_top`` or
        ``label_extremes`` is not a non-negative integer, or ``label_top > 0``
        and the fit does not record labels per annotator.

    Examples
    --------
    >>> import crowd_models as cm
    >>> from crowd_models.models import two_coin
    >>> fit = two_coin.em(cm.datasets.load_rte())  # doctest: +SKIP
    >>> ax = cm.report.plot_annotators(fit, label_extremes=3)  # doctest: +SKIP
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
    if D.THRESHOLD in post["sensitivity"].dims:
        raise ValueError(
            "this fit has a sensitivity and specificity per threshold (an ordinal cumulative "
            "fit); use plot_thresholds(fit), one ROC panel per threshold."
        )
    label_top = _check_count(label_top, "label_top")
    label_extremes = _check_count(label_extremes, "label_extremes")
    table = annotator_summary(fit, ci_prob=ci_prob)
    if label_top > 0 and table["n_labels"].isna().any():
        raise ValueError(
            "label_top needs the number of labels per annotator, which this fit does not "
            "record (no n_labels); use label_top=0."
        )
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 5.5))
    x, y = _draw_roc(ax, table, ci_prob, label_top, label_extremes)

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
    if title is None:
        positive = _positive_class(post)
        title = f"{_fit_description(fit, post)}: annotators in ROC space"
        title += " (positive class: second class)" if positive is None else (
            f" (positive class {positive})")
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    return ax


def _threshold_table(fit, post: xr.Dataset, threshold, ci_prob: float) -> pd.DataFrame:
    """The two-coin summary of one threshold of an ordinal cumulative fit."""
    keep = [n for n in post.data_vars if n.startswith(("sensitivity", "specificity"))
            and D.THRESHOLD in post[n].dims]
    ds = post[keep].sel({D.THRESHOLD: threshold})
    annotators = pd.Index(post[D.ANNOTATOR].values, name=D.ANNOTATOR)
    counts = labels_per_annotator(fit, post, annotators)
    if counts.notna().all():
        ds = ds.assign(n_labels=(D.ANNOTATOR, counts.to_numpy()))
    return annotator_summary(ds, ci_prob=ci_prob)


def plot_thresholds(fit, *, ci_prob: float = 0.9, ncols: int = 3, label_extremes: int = 0):
    """Ordinal annotators in ROC space, one panel per threshold, with intervals.

    The cumulative ordinal model is K - 1 binary problems "is the level above
    c?", each with its own sensitivity and specificity per annotator; panel c
    shows every annotator's (1 - specificity, sensitivity) for threshold c, as
    :func:`plot_annotators` does for a binary fit, so one can see at which
    cut of the scale an annotator is reliable.

    Parameters
    ----------
    fit : xarray.Dataset or xarray.DataTree
        An ordinal cumulative fit: ``sensitivity`` and ``specificity``
        (annotator, threshold), EM, MAP or NUTS.
    ci_prob : float, default 0.9
        Probability of the error bars (EM: of the Beta approximations; NUTS:
        of the draws; MAP: none).
    ncols : int, default 3
        Panels per row (fewer when there are fewer thresholds).
    label_extremes : int, default 0
        In each panel, write the ids of this many best and worst annotators
        by that threshold's weight, logit(sensitivity) + logit(specificity).

    Returns
    -------
    matplotlib.figure.Figure
        One visible Axes per threshold, in threshold order, titled ``"level
        >c"`` after the threshold's name; the points are the collection with
        gid ``"estimates"`` (area proportional to ``n_labels``); the figure's
        title names the family and the method. Unused grid cells are hidden.

    Raises
    ------
    ValueError
        If the fit has no sensitivity/specificity per threshold, or ``ncols``
        or ``label_extremes`` is not a valid count.

    Examples
    --------
    >>> import crowd_models as cm
    >>> from crowd_models.models import ordinal
    >>> fit = ordinal.em(cm.datasets.load_anesthesia())  # doctest: +SKIP
    >>> fig = cm.report.plot_thresholds(fit, label_extremes=1)  # doctest: +SKIP
    """
    import matplotlib.pyplot as plt

    ci_prob = check_ci_prob(ci_prob)
    post = posterior_of(fit)
    if not all(n in post and D.THRESHOLD in post[n].dims
               for n in ("sensitivity", "specificity")):
        raise ValueError(
            f"plot_thresholds needs sensitivity and specificity per (annotator, threshold), "
            f"an ordinal cumulative fit; this fit's variables are "
            f"{sorted(map(str, post.data_vars))}. Use plot_annotators for a binary fit."
        )
    if isinstance(ncols, bool) or not isinstance(ncols, int | np.integer) or ncols < 1:
        raise ValueError(f"ncols must be a positive integer, got {ncols!r}.")
    label_extremes = _check_count(label_extremes, "label_extremes")
    thresholds = list(post[D.THRESHOLD].values)
    tables = [_threshold_table(fit, post, t, ci_prob) for t in thresholds]
    ncols = min(int(ncols), len(tables))
    nrows = -(-len(tables) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 4.4 * nrows), squeeze=False,
                             layout="constrained")
    for k, (ax, t, table) in enumerate(zip(axes.ravel(), thresholds, tables, strict=False)):
        _draw_roc(ax, table, ci_prob, 0, label_extremes)
        ax.set_title(f"level {t}", fontsize=10)
        if k == 0:
            ax.legend(loc="lower right", fontsize=7)
    for ax in axes.ravel()[len(tables):]:
        ax.set_visible(False)
    fig.suptitle(f"{_fit_description(fit, post)}: annotators per threshold (positive: the "
                 f"level is above it)", fontsize=11)
    return fig


def _fill_sd_interval(table: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The noise SD's interval ends; where the table has none but the precision has,
    ``1 / sqrt`` of the precision's ends reversed (a monotone map keeps quantiles)."""
    lower, upper = table["sd_lower"].to_numpy(float), table["sd_upper"].to_numpy(float)
    if {"precision_lower", "precision_upper"} <= set(table.columns):
        gap = ~(np.isfinite(lower) & np.isfinite(upper))
        with np.errstate(divide="ignore", invalid="ignore"):
            lower = np.where(gap, 1 / np.sqrt(table["precision_upper"].to_numpy(float)), lower)
            upper = np.where(gap, 1 / np.sqrt(table["precision_lower"].to_numpy(float)), upper)
    return lower, upper


def _fill_bias_interval(post: xr.Dataset, table: pd.DataFrame,
                        ci_prob: float) -> tuple[np.ndarray, np.ndarray]:
    """The bias's interval ends; for a one-draw fit without them, the EM's Gaussian
    conditional posterior N(bias, ``bias_conditional_sd``^2) where the fit has it."""
    lower, upper = table["bias_lower"].to_numpy(float), table["bias_upper"].to_numpy(float)
    if "bias_conditional_sd" in post and post["bias_conditional_sd"].dims == (D.ANNOTATOR,):
        sd = post["bias_conditional_sd"].to_series().reindex(table.index).to_numpy(float)
        z = ndtri(0.5 + ci_prob / 2)
        gap = ~(np.isfinite(lower) & np.isfinite(upper))
        mean = table["bias_mean"].to_numpy(float)
        lower = np.where(gap, mean - z * sd, lower)
        upper = np.where(gap, mean + z * sd, upper)
    return lower, upper


def plot_bias_noise(fit, *, table: pd.DataFrame | None = None, ci_prob: float = 0.9, ax=None,
                    label_extremes: int = 0, title: str | None = None):
    """Each annotator's bias against their noise, with intervals.

    Continuous fits: the noise SD in label units, ``sd`` = 1 / sqrt(precision)
    (see :func:`annotator_summary`), against the additive ``bias`` (> 0: the
    annotator rates high), or against the number of labels when the model has
    no bias. Ordinal latent fits: the latent ``noise`` against ``bias`` (> 0:
    rates higher than the true level), both on the scale of the levels.

    Parameters
    ----------
    fit : xarray.Dataset or xarray.DataTree
        A continuous fit (``precision``, optionally ``bias``) or an ordinal
        latent fit (``bias``, ``noise``); EM, MAP or NUTS.
    table : pandas.DataFrame, optional
        The fit's :func:`annotator_summary` (default: computed here), e.g. one
        whose intervals were filled in from EM's conditional posteriors.
        Missing SD intervals are filled from the precision's interval (the
        same quantiles, mapped by 1 / sqrt), and missing bias intervals of a
        one-draw fit from ``bias_conditional_sd`` when it has it (the
        Gaussian conditional posterior given the other parameters).
    ci_prob : float, default 0.9
        Probability of the error bars.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on; default a new figure.
    label_extremes : int, default 0
        Write the ids of this many least noisy (best, green) and noisiest
        (worst, red) annotators.
    title : str, optional
        Default: the family and the method; ``""`` for none.

    Returns
    -------
    matplotlib.axes.Axes
        The points are the collection with gid ``"estimates"`` (one per
        annotator, area proportional to ``n_labels``), at (bias_mean,
        sd_mean) or (bias_mean, noise_mean); the written ids are texts with
        gid ``"best"`` or ``"worst"``.

    Raises
    ------
    ValueError
        If the fit is neither continuous nor ordinal latent, ``table`` lacks
        the columns needed, or ``label_extremes`` is not a non-negative
        integer.

    Examples
    --------
    >>> import crowd_models as cm
    >>> from crowd_models.models import continuous
    >>> fit = continuous.em(cm.datasets.load_affect("anger"), bias=True)  # doctest: +SKIP
    >>> ax = cm.report.plot_bias_noise(fit, label_extremes=2)  # doctest: +SKIP
    """
    import matplotlib.pyplot as plt

    ci_prob = check_ci_prob(ci_prob)
    label_extremes = _check_count(label_extremes, "label_extremes")
    post = posterior_of(fit)
    if _is_continuous(fit, post):
        spread, y_label = "sd", "noise SD, 1 / sqrt(precision) (label units)"
        x_label = "bias (label units; > 0: rates high)"
    elif "noise" in post and "bias" in post and is_annotator_measure(post["noise"]):
        spread, y_label = "noise", "noise (latent scale, in levels)"
        x_label = "bias (levels; > 0: rates higher than the true level)"
    else:
        raise ValueError(
            f"plot_bias_noise needs a continuous fit (precision and true_value) or an ordinal "
            f"latent fit (bias and noise); this fit's variables are "
            f"{sorted(map(str, post.data_vars))}."
        )
    if table is None:
        table = annotator_summary(fit, ci_prob=ci_prob)
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"table must be a pandas DataFrame from annotator_summary(fit), got "
                        f"{type(table).__name__}.")
    has_bias = "bias" in post and is_annotator_measure(post["bias"])
    needed = [f"{spread}_{s}" for s in ("mean", "lower", "upper")] + ["n_labels"] + (
        [f"bias_{s}" for s in ("mean", "lower", "upper")] if has_bias else [])
    lacking = [c for c in needed if c not in table.columns]
    if lacking:
        raise ValueError(f"table lacks the columns {lacking}; pass annotator_summary(fit) "
                         f"of this fit (or leave table=None).")
    y = table[f"{spread}_mean"].to_numpy(float)
    if spread == "sd":
        y_lo, y_hi = _fill_sd_interval(table)
    else:
        y_lo, y_hi = table["noise_lower"].to_numpy(float), table["noise_upper"].to_numpy(float)
    if has_bias:
        x = table["bias_mean"].to_numpy(float)
        x_lo, x_hi = _fill_bias_interval(post, table, ci_prob) if n_samples(post) == 1 else (
            table["bias_lower"].to_numpy(float), table["bias_upper"].to_numpy(float))
    else:  # no bias in the model: how the noise varies with the annotator's effort
        x = table["n_labels"].to_numpy(float)
        x_lo, x_hi = x, x
        x_label = "labels per annotator (the model has no bias)"
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4.5))
    _error_bars(ax, x, y, x_lo, x_hi, y_lo, y_hi, f"{ci_prob:.0%} interval")
    sized = table["n_labels"].notna().all()
    ax.scatter(x, y, s=_marker_sizes(table["n_labels"]), color="C0", edgecolor="white",
               linewidth=0.5, zorder=3, gid="estimates",
               label="estimate (area: labels)" if sized else "estimate")
    if has_bias:
        ax.axvline(0, color="0.6", linestyle="--", linewidth=1, gid="no_bias")
    ax.set_ylim(bottom=0)
    if label_extremes:
        best, worst = _extremes(-y, label_extremes)
        _label_points(ax, x, y, table.index, {"best": best, "worst": worst})
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    if title is None:
        title = f"{_fit_description(fit, post)}: annotator bias and noise"
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(loc="best", fontsize=8)
    return ax


def plot_accuracy(fit, *, table: pd.DataFrame | None = None, ci_prob: float = 0.9, ax=None,
                  label_extremes: int = 0, title: str | None = None):
    """Each annotator's overall accuracy against their number of labels, with intervals.

    For fits whose annotator quality is one probability of a correct label:
    feature-accuracy (its accuracy averaged over the items the annotator
    labelled, with the spread over those items), Dawid-Skene (the
    class-share weighted accuracy), one-coin.

    Parameters
    ----------
    fit : xarray.Dataset or xarray.DataTree
        The fit, for its family, method and number of classes.
    table : pandas.DataFrame, optional
        Its annotator table with ``accuracy_mean``, ``accuracy_lower``,
        ``accuracy_upper`` and ``n_labels``; default
        :func:`annotator_summary` of the fit. A feature-accuracy fit needs
        ``feature_accuracy.annotator_summary(fit, annotations=...)``, whose
        ``accuracy_q10``/``accuracy_q90`` (the spread of the accuracy over
        the annotator's items) are drawn as a wide pale bar.
    ci_prob : float, default 0.9
        Probability of the intervals (when the table is computed here).
    ax : matplotlib.axes.Axes, optional
        Axes to draw on; default a new figure.
    label_extremes : int, default 0
        Write the ids of this many most and least accurate annotators.
    title : str, optional
        Default: the family and the method; ``""`` for none.

    Returns
    -------
    matplotlib.axes.Axes
        Points (gid ``"estimates"``) at (n_labels, accuracy_mean) on a log x
        axis (by position when labels are not recorded), bars the intervals,
        the chance level 1 / K as a dashed line (gid ``"chance"``), and texts
        with gid ``"best"``/``"worst"``.

    Raises
    ------
    ValueError
        If the table has no accuracy, or ``label_extremes`` is not a
        non-negative integer.

    Examples
    --------
    >>> import crowd_models as cm
    >>> from crowd_models.models import dawid_skene
    >>> fit = dawid_skene.em(cm.datasets.load_dog())  # doctest: +SKIP
    >>> ax = cm.report.plot_accuracy(fit, label_extremes=3)  # doctest: +SKIP
    """
    import matplotlib.pyplot as plt

    ci_prob = check_ci_prob(ci_prob)
    label_extremes = _check_count(label_extremes, "label_extremes")
    post = posterior_of(fit)
    if table is None:
        try:
            table = annotator_summary(fit, ci_prob=ci_prob)
        except ValueError:
            table = pd.DataFrame()
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"table must be a pandas DataFrame (an annotator summary), got "
                        f"{type(table).__name__}.")
    lacking = [c for c in ("accuracy_mean", "accuracy_lower", "accuracy_upper", "n_labels")
               if c not in table.columns]
    if lacking:
        raise ValueError(
            f"plot_accuracy needs an annotator table with {lacking}; this fit's summary has "
            f"none. For a feature-accuracy fit pass table=feature_accuracy.annotator_summary("
            f"fit, annotations=...)."
        )
    counts = table["n_labels"].to_numpy(float)
    by_labels = bool(np.isfinite(counts).all() and (counts > 0).all())
    x = counts if by_labels else np.arange(len(table), dtype=float)
    y = table["accuracy_mean"].to_numpy(float)
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4.5))
    if {"accuracy_q10", "accuracy_q90"} <= set(table.columns):
        ax.vlines(x, table["accuracy_q10"], table["accuracy_q90"], colors="C1", alpha=0.35,
                  linewidth=4, zorder=1, gid="feature_range",
                  label="10%-90% over its items")
    _error_bars(ax, x, y, x, x, table["accuracy_lower"].to_numpy(float),
                table["accuracy_upper"].to_numpy(float), f"{ci_prob:.0%} interval")
    ax.scatter(x, y, s=28, color="C0", edgecolor="white", linewidth=0.5, zorder=3,
               gid="estimates", label="estimate")
    if D.TRUE_CLASS in post.sizes:
        chance = 1 / post.sizes[D.TRUE_CLASS]
        ax.axhline(chance, color="0.6", linestyle="--", linewidth=1, gid="chance",
                   label=f"chance (1/{post.sizes[D.TRUE_CLASS]})")
    if by_labels:
        ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    if label_extremes:
        best, worst = _extremes(y, label_extremes)
        _label_points(ax, x, y, table.index, {"best": best, "worst": worst})
    ax.set_xlabel("labels per annotator" if by_labels else "annotator (labels not recorded)")
    ax.set_ylabel("accuracy (probability of a correct label)")
    if title is None:
        title = f"{_fit_description(fit, post)}: annotator accuracy"
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    return ax
