"""Confusion-matrix heatmaps of one annotator, several, or chosen groups."""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from crowd_models import _dims as D
from crowd_models._fits import (
    SAMPLE_DIMS,
    check_ci_prob,
    equal_tailed,
    labels_per_annotator,
    posterior_of,
)
from crowd_models.report._approximations import beta_quantile, beta_sum_summary
from crowd_models.report._confusion import (
    _CONFUSION_DIMS,
    _aligned_confusion,
    _beta_marginals,
    _class_names,
    _confusion_alpha,
    _confusion_of,
    _sample_array,
)
from crowd_models.report._describe import _check_count, _extremes, _fit_description
from crowd_models.report.summary import _with_draws, annotator_summary


# ---------------------------------------------------------- confusion plots
def _confusion_for_plot(fit) -> tuple[xr.Dataset, xr.DataArray]:
    """The posterior and the aligned confusion draws of a fit, or a clear error."""
    post = posterior_of(_with_draws(fit))
    conf = _confusion_of(post)
    if conf is None:
        raise ValueError(
            f"plotting a confusion matrix needs a confusion (annotator, true_class, "
            f"label_class) variable, e.g. a Dawid-Skene fit; this fit's variables are "
            f"{sorted(map(str, post.data_vars))}."
        )
    return post, conf


def _annotator_position(annotators: pd.Index, annotator) -> int:
    """Position of an annotator id, or a ValueError listing valid ids."""
    try:
        position = int(annotators.get_indexer([annotator])[0])
    except (TypeError, ValueError):
        position = -1
    if position < 0:
        raise ValueError(
            f"annotator {annotator!r} is not in this fit; valid ids include "
            f"{list(annotators[:5])} ({len(annotators)} annotators), or None for the "
            f"population."
        )
    return position


def _population_interval(a: np.ndarray, b: np.ndarray, weights: np.ndarray,
                         ci_prob: float) -> tuple[np.ndarray, np.ndarray]:
    """Interval of each cell of a weighted sum over annotators of independent Beta
    cells (a, b: annotator, true class, label class): the moment-matched Beta's."""
    summary = beta_sum_summary(np.moveaxis(a, 0, -1), np.moveaxis(b, 0, -1), weights, ci_prob)
    return summary["lower"], summary["upper"]


def _confusion_cells(fit, annotator, ci_prob: float):
    """Mean and interval of each cell of one annotator's or the population's confusion."""
    post, conf = _confusion_for_plot(fit)
    annotators = pd.Index(post[D.ANNOTATOR].values, name=D.ANNOTATOR)
    counts = labels_per_annotator(fit, post, annotators)
    draws = _sample_array(conf, *_CONFUSION_DIMS)  # (S, J, K, K)
    alpha = _confusion_alpha(post)
    tail = (1 - ci_prob) / 2
    interval = None

    if annotator is not None:
        j = _annotator_position(annotators, annotator)
        cells = draws[:, j]
        n = counts.iloc[j]
        title = f"{annotator} ({int(n)} labels)" if np.isfinite(n) else (
            f"{annotator} (labels not recorded)")
        if len(cells) == 1 and alpha is not None:  # the approximation's mean and interval
            a, b = _beta_marginals(alpha)
            cells = (a[j] / (a[j] + b[j]))[None]
            interval = (beta_quantile(tail, a[j], b[j]), beta_quantile(1 - tail, a[j], b[j]))
    elif "confusion_mean" in post and set(post["confusion_mean"].dims) == {
            *SAMPLE_DIMS, D.TRUE_CLASS, D.LABEL_CLASS}:
        mean_da = _aligned_confusion(post["confusion_mean"], "confusion_mean")
        cells = _sample_array(mean_da, D.TRUE_CLASS, D.LABEL_CLASS)
        total = counts.sum() if counts.notna().all() else None
        title = "population (confusion_mean" + (f", {int(total)} labels)" if total is not None
                                                else ")")
    else:
        if counts.isna().any():
            raise ValueError(
                "annotator=None averages the annotators' confusions weighted by their "
                "numbers of labels, which this fit does not record (no n_labels); pass an "
                f"annotator id such as {annotators[0]!r}."
            )
        weights = counts.to_numpy(dtype=float) / counts.sum()
        cells = np.einsum("sjkl,j->skl", draws, weights)
        title = f"all annotators, weighted by labels ({int(counts.sum())} labels)"
        if len(cells) == 1 and alpha is not None:
            a, b = _beta_marginals(alpha)
            cells = np.einsum("jkl,j->kl", a / (a + b), weights)[None]
            interval = _population_interval(a, b, weights, ci_prob)

    if len(cells) > 1:
        interval = equal_tailed(cells, ci_prob)
    if interval is None:
        interval = (np.full(cells.shape[1:], np.nan), np.full(cells.shape[1:], np.nan))
    return cells.mean(axis=0), interval[0], interval[1], _class_names(conf), title


def _draw_confusion(ax, mean, lower, upper, classes, title):
    """Draw a confusion heatmap with annotated cells."""
    image = ax.imshow(mean, vmin=0, vmax=1, cmap="Blues")
    for k in range(mean.shape[0]):
        for m in range(mean.shape[1]):
            text = f"{mean[k, m]:.2f}"
            if np.isfinite(lower[k, m]) and np.isfinite(upper[k, m]):
                text += f"\n[{lower[k, m]:.2f}, {upper[k, m]:.2f}]"
            ax.text(m, k, text, ha="center", va="center", fontsize=8,
                    color="white" if mean[k, m] > 0.6 else "black")
    ticks = np.arange(len(classes))
    ax.set_xticks(ticks, [str(c) for c in classes])
    ax.set_yticks(ticks, [str(c) for c in classes])
    ax.set_xlabel("label class")
    ax.set_ylabel("true class")
    ax.set_title(title, fontsize=10)
    return image


def plot_confusion(fit, annotator=None, *, ax=None, ci_prob: float = 0.9):
    """Heatmap of one annotator's confusion matrix, cells annotated with intervals.

    Parameters
    ----------
    fit : xarray.Dataset or xarray.DataTree
        A fit with ``confusion`` (annotator, true_class, label_class), e.g. a
        Dawid-Skene fit (EM, MAP or NUTS).
    annotator : hashable, optional
        The user's annotator id. ``None`` shows the population: the
        hierarchical ``confusion_mean`` when the fit has it, otherwise the
        average of the annotators' confusions weighted by their numbers of
        labels (``n_labels``), computed draw by draw.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on; default a new figure with a colour bar.
    ci_prob : float, default 0.9
        Probability of the equal-tailed intervals.

    Returns
    -------
    matplotlib.axes.Axes
        The heatmap is ``ax.images[0]``: rows are true classes, columns label
        classes (both in the ``true_class`` order, label classes matched by
        name), colours the posterior mean (the point estimate of a one-draw
        fit) on a fixed 0..1 scale. Each cell is written as ``"0.82"``, or
        ``"0.82\\n[0.75, 0.88]"`` with its interval when the fit has draws, or
        is an EM fit with ``confusion_alpha`` (then the colour and the number
        are the Beta marginals' mean, and the interval theirs; for the
        population, a weighted sum of the annotators' independent Betas, its
        exact mean and the interval of the Beta with its mean and variance).
        The title names the annotator and its number of labels.

    Raises
    ------
    ValueError
        If the fit has no confusion, ``annotator`` is not one of its ids,
        ``annotator=None`` and the fit records neither ``confusion_mean`` nor
        ``n_labels``, or ``ci_prob`` is not strictly between 0 and 1.

    Examples
    --------
    >>> from crowd_models.models import dawid_skene
    >>> fit = dawid_skene.em(cm.datasets.load_dog())
    >>> ax = cm.report.plot_confusion(fit, fit["annotator"].values[0])
    """
    import matplotlib.pyplot as plt

    ci_prob = check_ci_prob(ci_prob)
    mean, lower, upper, classes, title = _confusion_cells(fit, annotator, ci_prob)
    if ax is None:
        size = 1.2 + 1.1 * len(classes)
        fig, ax = plt.subplots(figsize=(size + 1.2, size))
        fig.colorbar(_draw_confusion(ax, mean, lower, upper, classes, title), ax=ax,
                     label="probability")
    else:
        _draw_confusion(ax, mean, lower, upper, classes, title)
    return ax


def _confusion_figure(fit, annotators: list, ncols, ci_prob: float, prefixes=None):
    """The grid of confusion heatmaps; ``prefixes[k]`` (optional) heads panel k's title."""
    import matplotlib.pyplot as plt

    if not annotators:
        raise ValueError("annotators is empty; give at least one annotator id (or None).")
    if isinstance(ncols, bool) or not isinstance(ncols, int | np.integer) or ncols < 1:
        raise ValueError(f"ncols must be a positive integer, got {ncols!r}.")
    panels = [_confusion_cells(fit, a, ci_prob) for a in annotators]
    if prefixes is not None:
        panels = [(*cells[:4], f"{prefix}\n{cells[4]}" if prefix else cells[4])
                  for cells, prefix in zip(panels, prefixes, strict=True)]
    ncols = min(int(ncols), len(panels))
    nrows = -(-len(panels) // ncols)
    size = 1.2 + 1.1 * len(panels[0][3])
    fig, axes = plt.subplots(nrows, ncols, figsize=(size * ncols + 1.2, size * nrows),
                             squeeze=False, layout="constrained")
    image = None
    for ax, cells in zip(axes.ravel(), panels, strict=False):
        image = _draw_confusion(ax, *cells)
    for ax in axes.ravel()[len(panels):]:
        ax.set_visible(False)
    fig.colorbar(image, ax=axes.ravel().tolist(), label="probability")
    return fig


def plot_confusions(fit, annotators, ncols: int = 3, *, ci_prob: float = 0.9):
    """Confusion heatmaps of several annotators, one panel each, on one colour scale.

    Parameters
    ----------
    fit : xarray.Dataset or xarray.DataTree
        As for :func:`plot_confusion`.
    annotators : sequence
        Annotator ids, in panel order; ``None`` in it is the population panel.
        A single id (a string) is one panel. :func:`pick_annotators` chooses
        the worst or the most uncertain ones; :func:`plot_confusion_groups`
        draws those with titles that say why each was chosen.
    ncols : int, default 3
        Panels per row (fewer when there are fewer panels).
    ci_prob : float, default 0.9
        Probability of the intervals written in the cells.

    Returns
    -------
    matplotlib.figure.Figure
        One Axes per annotator (as drawn by :func:`plot_confusion`), every
        heatmap on the colour scale 0..1, with one shared colour bar; unused
        grid cells are hidden.

    Raises
    ------
    ValueError
        If ``annotators`` is empty, ``ncols`` is not a positive integer, or
        :func:`plot_confusion` rejects an annotator (checked before drawing).

    Examples
    --------
    >>> import crowd_models as cm
    >>> from crowd_models.models import dawid_skene
    >>> fit = dawid_skene.em(cm.datasets.load_dog())  # doctest: +SKIP
    >>> worst = cm.report.pick_annotators(fit, "worst", 2)  # doctest: +SKIP
    >>> fig = cm.report.plot_confusions(fit, [None, *worst])  # doctest: +SKIP
    """
    ci_prob = check_ci_prob(ci_prob)
    if isinstance(annotators, str | bytes) or not np.iterable(annotators):
        annotators = [annotators]
    return _confusion_figure(fit, list(annotators), ncols, ci_prob)


PICK_RULES = ("worst", "best", "uncertain", "busiest")
"""The rules of :func:`pick_annotators`."""


def pick_annotators(fit, rule: str = "worst", n: int = 3, *, measure: str | None = None,
                    ci_prob: float = 0.9) -> list:
    """The ids of the annotators that a rule singles out, e.g. to plot them.

    Parameters
    ----------
    fit : xarray.Dataset, xarray.DataTree or pandas.DataFrame
        A fit, or its annotator table (:func:`annotator_summary` or a family's
        ``annotator_summary``, one row per annotator).
    rule : {"worst", "best", "uncertain", "busiest"}, default "worst"
        ``"worst"``: lowest ``<measure>_mean``; ``"best"``: highest;
        ``"uncertain"``: widest interval, ``<measure>_upper -
        <measure>_lower`` (none for a fit without intervals, e.g. MAP);
        ``"busiest"``: most labels (``n_labels``).
    n : int, default 3
        How many (fewer when fewer annotators qualify).
    measure : str, optional
        Default ``"weight"`` when the table has it (binary fits), else
        ``"accuracy"``.
    ci_prob : float, default 0.9
        Probability of the intervals, when the table is computed here.

    Returns
    -------
    list
        Annotator ids, the most extreme first; annotators whose value is NaN
        are skipped; ties keep the fit's order.

    Raises
    ------
    ValueError
        If ``rule`` is unknown, ``n`` is not a non-negative integer, or the
        table lacks the columns the rule needs.

    Examples
    --------
    >>> import crowd_models as cm
    >>> from crowd_models.models import dawid_skene
    >>> fit = dawid_skene.em(cm.datasets.load_dog())  # doctest: +SKIP
    >>> cm.report.pick_annotators(fit, "uncertain", 2)  # doctest: +SKIP
    """
    if rule not in PICK_RULES:
        raise ValueError(f"rule={rule!r} is not a rule; choose one of {list(PICK_RULES)}.")
    n = _check_count(n, "n")
    table = fit if isinstance(fit, pd.DataFrame) else annotator_summary(fit, ci_prob=ci_prob)
    if isinstance(table.index, pd.MultiIndex):
        raise ValueError(
            "pick_annotators needs one row per annotator; this table has one row per "
            "annotator and threshold (ordinal cumulative): select a threshold first, e.g. "
            "table.xs('>1', level='threshold')."
        )
    if rule == "busiest":
        columns = ["n_labels"]
    else:
        if measure is None:
            measure = "weight" if "weight_mean" in table.columns else "accuracy"
        columns = [f"{measure}_mean"] if rule != "uncertain" else [
            f"{measure}_lower", f"{measure}_upper"]
    lacking = [c for c in columns if c not in table.columns]
    if lacking:
        raise ValueError(
            f"rule={rule!r} needs the columns {lacking}, which the table lacks; its columns "
            f"are {list(table.columns)}. Pass measure= one of its measures."
        )
    if rule == "uncertain":
        score = (table[columns[1]] - table[columns[0]]).to_numpy(float)
    else:
        score = table[columns[0]].to_numpy(float)
    chosen = _extremes(-score if rule == "worst" else score, n)[0]
    return [table.index[i] for i in chosen]


def plot_confusion_groups(fit, n: int = 2, *, population: bool = True, ncols: int = 3,
                          ci_prob: float = 0.9, table: pd.DataFrame | None = None):
    """Confusion heatmaps of the worst and of the most uncertain annotators.

    The panels are the population (optional), then the ``n`` annotators with
    the lowest overall accuracy, then the ``n`` with the widest accuracy
    interval that are not already shown; each title says which group the
    panel is in, with its accuracy or the width of its interval, so the
    figure shows where the crowd fails and which annotators the data say
    little about (usually those with few labels).

    Parameters
    ----------
    fit : xarray.Dataset or xarray.DataTree
        A fit with a ``confusion`` (Dawid-Skene, one-coin, ordinal latent).
    n : int, default 2
        Annotators per group.
    population : bool, default True
        Start with the population panel (as :func:`plot_confusion` with
        ``annotator=None``); needs ``n_labels`` or ``confusion_mean``.
    ncols : int, default 3
        Panels per row.
    ci_prob : float, default 0.9
        Probability of the intervals (cells and accuracy).
    table : pandas.DataFrame, optional
        The fit's :func:`annotator_summary` at ``ci_prob`` (default: computed
        here), to rank the annotators without computing it twice.

    Returns
    -------
    matplotlib.figure.Figure
        As :func:`plot_confusions`; the panel titles start with ``"worst
        accuracy 0.62"`` or ``"most uncertain (90% interval width 0.31)"``
        and the figure's title names the family and the method. A fit
        without intervals (MAP) has no "most uncertain" panels.

    Raises
    ------
    ValueError
        If the fit has no confusion or no overall accuracy (no class
        shares), or ``n`` is not a non-negative integer.

    Examples
    --------
    >>> import crowd_models as cm
    >>> from crowd_models.models import dawid_skene
    >>> fit = dawid_skene.em(cm.datasets.load_dog())  # doctest: +SKIP
    >>> fig = cm.report.plot_confusion_groups(fit, n=2)  # doctest: +SKIP
    """
    ci_prob = check_ci_prob(ci_prob)
    n = _check_count(n, "n")
    post, _ = _confusion_for_plot(fit)
    if table is None:
        table = annotator_summary(fit, ci_prob=ci_prob)
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"table must be a pandas DataFrame from annotator_summary(fit), got "
                        f"{type(table).__name__}.")
    if "accuracy_mean" not in table.columns:
        raise ValueError(
            "plot_confusion_groups ranks annotators by their overall accuracy, which needs "
            "the fit's class shares (prevalence or item_class_prob); use plot_confusions("
            "fit, ids) with ids from pick_annotators(fit, measure='accuracy_<class>')."
        )
    worst = pick_annotators(table, "worst", n, measure="accuracy")
    uncertain = [a for a in pick_annotators(table, "uncertain", len(table), measure="accuracy")
                 if a not in worst][:n]
    annotators, prefixes = ([None], [""]) if population else ([], [])
    for a in worst:
        annotators.append(a)
        prefixes.append(f"worst accuracy {table.loc[a, 'accuracy_mean']:.2f}")
    for a in uncertain:
        width = table.loc[a, "accuracy_upper"] - table.loc[a, "accuracy_lower"]
        annotators.append(a)
        prefixes.append(f"most uncertain ({ci_prob:.0%} interval width {width:.2f})")
    fig = _confusion_figure(fit, annotators, ncols, ci_prob, prefixes)
    fig.suptitle(f"{_fit_description(fit, post)}: confusion matrices", fontsize=11)
    return fig
