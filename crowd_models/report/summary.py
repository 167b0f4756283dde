"""Annotator and item tables over any fit (EM, MAP or NUTS)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr
from scipy.special import logit, ndtri

from crowd_models import _dims as D
from crowd_models._fits import (
    SAMPLE_DIMS,
    annotator_vector,
    check_ci_prob,
    component_fits,
    draw_matrix,
    equal_tailed,
    has_laplace,
    is_annotator_measure,
    item_draws,
    labels_per_annotator,
    n_samples,
    posterior_of,
    summarise_draws,
)
from crowd_models._text import listing
from crowd_models.data import Annotations
from crowd_models.inference import laplace_fit
from crowd_models.report._approximations import (
    approximation,
    gamma_quantile,
    gamma_root_summary,
    gamma_sd,
    single_draw_summary,
)
from crowd_models.report._confusion import _accuracy_summaries, _confusion_of, _is_one_coin
from crowd_models.report.metrics import _item_class_prob

_STATS = ("mean", "sd", "lower", "upper")
def _is_continuous(fit, post: xr.Dataset) -> bool:
    """Whether a fit is the continuous family's (a per-annotator precision and a true value)."""
    if not ("precision" in post and is_annotator_measure(post["precision"])):
        return False
    return ("true_value" in post or "truth_precision" in post
            or getattr(fit, "attrs", {}).get("family") == "continuous")


def _sd_summary(post: xr.Dataset, ci_prob: float) -> dict[str, np.ndarray]:
    """Mean, sd and interval of each annotator's noise SD, 1 / sqrt(precision)."""
    draws = draw_matrix(post["precision"])
    with np.errstate(divide="ignore"):
        if len(draws) > 1:
            return summarise_draws(1 / np.sqrt(draws), ci_prob)
        dist = approximation(post, "precision")
        if dist is None:
            point = 1 / np.sqrt(draws[0])
            nan = np.full_like(point, np.nan)
            return {"mean": point, "sd": nan, "lower": nan.copy(), "upper": nan.copy()}
        a, b = annotator_vector(post, "precision_alpha"), annotator_vector(post, "precision_beta")
        return gamma_root_summary(a, b, ci_prob)

# --------------------------------------------------------------- the table
def _point_class_shares(fit) -> xr.DataArray | None:
    """A Laplace fit's class shares at the MAP (its items' posteriors' mean), which
    its draws lack where the model has a classifier in place of ``prevalence``
    (the draws leave the item-level variables out); None for any other fit."""
    if not has_laplace(fit):
        return None
    point = posterior_of(fit)
    if "item_class_prob" not in point or D.ITEM not in point["item_class_prob"].dims:
        return None
    return point["item_class_prob"].mean(D.ITEM)


def _with_draws(fit):
    """A MAP fit with Laplace draws (``fit_map(..., laplace=True)``) as those draws;
    any other fit as it is."""
    return laplace_fit(fit) if has_laplace(fit) else fit


def _threshold_summary(fit, post: xr.Dataset, ci_prob: float, rank_by) -> pd.DataFrame:
    """The cumulative ordinal table: the two-coin table of each threshold's binary
    problem, one row per (annotator, threshold)."""
    counts = labels_per_annotator(fit, post, pd.Index(post[D.ANNOTATOR].values))
    if counts.notna().any():  # carried into each threshold's one-draw table
        post = post.assign(n_labels=(D.ANNOTATOR, counts.to_numpy()))
    keep = [n for n in post.data_vars
            if n.startswith(("sensitivity", "specificity")) or n == "n_labels"]
    tables = []
    for t in post[D.THRESHOLD].values:
        table = annotator_summary(post[keep].sel({D.THRESHOLD: t}), ci_prob=ci_prob)
        table.insert(0, D.THRESHOLD, t)
        tables.append(table.set_index(D.THRESHOLD, append=True))
    out = pd.concat(tables)
    order = pd.MultiIndex.from_product([post[D.ANNOTATOR].values, post[D.THRESHOLD].values],
                                       names=[D.ANNOTATOR, D.THRESHOLD])
    out = out.reindex(order)
    if rank_by is not None:
        if rank_by not in out.columns:
            raise ValueError(f"rank_by={rank_by!r} is not a column of the summary; choose one "
                             f"of {list(out.columns)}.")
        out = out.sort_values(rank_by, ascending=False, kind="mergesort", na_position="last")
    return out


def _average_summary(fit, ci_prob: float, rank_by: str | None) -> pd.DataFrame:
    """:func:`annotator_summary` of an average: each component's table, with its weight."""
    weights = dict(zip(fit[D.COMPONENT].values, fit["weight"].values, strict=True))
    table = pd.concat({name: annotator_summary(part, ci_prob=ci_prob, rank_by=rank_by)
                       for name, part in component_fits(fit).items()}, names=[D.COMPONENT])
    table.insert(0, "component_weight", table.index.get_level_values(D.COMPONENT).map(weights))
    return table


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
        ``m_upper``; then, for a fit with a ``community_prob`` (annotator,
        community), ``community`` (each annotator's most probable community,
        its probabilities averaged over the draws) and ``community_prob`` (that
        probability); then ``n_labels`` (NaN when the fit does not record it).
        For an average (``auto_fit(average=...)``): every component's table,
        indexed by (``component``, ``annotator``), its columns those of any
        component (NaN where a component lacks one), after a first column
        ``component_weight``.

        Measures, in this order: ``sensitivity``, ``specificity`` and ``weight``
        = logit(sensitivity) + logit(specificity), the annotator's weight in the
        log-odds of the true label (Raykar et al. 2009, sec. 6.2), when the fit
        has sensitivity and specificity; then, when the fit has a ``confusion``
        (annotator, true_class, label_class), ``accuracy``, the overall
        probability of a correct label, and ``accuracy_<class>`` =
        ``confusion[j, k, k]`` for each true class k, named by the user's
        class names (the ``true_class`` coordinate); then every other
        posterior variable whose only dims besides chain and draw is
        ``annotator`` (e.g. ``precision``), in the fit's variable order. A
        continuous fit (a per-annotator ``precision`` and a ``true_value``, or
        ``attrs["family"] == "continuous"``) also gets ``sd`` right after
        ``precision``: the annotator's noise standard deviation in label units,
        ``1 / sqrt(precision)`` (for Student-t noise, the noise scale; its sd
        is ``sqrt(nu / (nu - 2))`` times that).

    Raises
    ------
    ValueError
        If ``ci_prob`` is not strictly between 0 and 1, if the fit has no
        per-annotator variable, if ``rank_by`` is not a column, or if the
        confusion's true and label classes do not match.

    Notes
    -----
    With many draws, statistics are over all chains and draws pooled: the
    mean, the standard deviation (ddof=1) and the ``(1 -/+ ci_prob) / 2``
    quantiles (linear interpolation). The weight is computed draw by draw.

    A one-draw fit (EM, MAP) reports its point estimate as ``_mean`` and NaN
    for ``_sd``, ``_lower`` and ``_upper``. An EM Dataset that carries the
    Beta approximations of sec. 7.1 (``sensitivity_alpha``/``_beta``,
    ``specificity_alpha``/``_beta``) gets the mean, sd and quantiles of those
    Betas for sensitivity and specificity, and, for the weight, those of 4000
    Monte Carlo draws per annotator from them (fixed seed). The EM estimate
    itself is the Betas' mode, which can lie outside their interval (a
    perfect record gives a mode of 1), so ``_mean`` is the approximation's
    mean, the centre of its interval; the mode stays in the fit.

    Accuracy. The overall accuracy is ``sum_k pi_k confusion[j, k, k]``, the
    probability that annotator j labels a random item correctly, computed
    draw by draw with ``pi`` the ``prevalence`` draws when the fit has them
    and otherwise the mean over items of ``item_class_prob`` in that draw (a
    fit with features); a fit with neither gets per-class accuracies only.
    Label classes are matched to true classes by name. A one-coin fit (a
    per-annotator ``accuracy`` variable) reports that variable as its overall
    accuracy, which it is under any class shares, and its per-class
    accuracies all equal it.

    A one-draw fit of a full confusion model (EM) that stores its Dirichlet
    rows ``confusion_alpha`` (annotator, true_class, label_class), alpha plus
    expected counts, gets the mean, sd and quantiles of ``accuracy_<class>``
    from the Beta marginal Beta(alpha_kk, sum_l alpha_kl - alpha_kk), and
    for ``accuracy``, ``sum_k pi_k`` times those independent Betas with the
    class shares held at their point estimate, its exact mean and sd and the
    interval of the Beta with that mean and variance (moment-matched: within
    0.0021 of the exact quantiles on the dog and web search fits). As for
    the Betas, the rows' joint mode (the EM confusion) is not the centre of
    these marginals (on dog it fell outside the overall accuracy's interval
    for 76 of 109 annotators), so the means are the approximation's. A one-coin
    EM fit ignores ``confusion_alpha``: those rows are the full model's, not
    the posterior of its single accuracy.

    Noise SD. With draws, ``sd`` is summarised over the draws of
    ``1 / sqrt(precision)``. An EM fit with the Gamma approximation of each
    precision, Gamma(``precision_alpha``, rate ``precision_beta``) (the
    conditional posterior given the final E-step), gets that Gamma transformed
    exactly: mean ``sqrt(b) Gamma(a - 1/2) / Gamma(a)``, sd from
    ``E[SD^2] = b / (a - 1)``, and interval ``1 / sqrt`` of the precision's
    interval reversed (a monotone map keeps quantiles), so ``sd_mean`` lies
    inside ``[sd_lower, sd_upper]``; note that ``sd_mean`` is not
    ``1 / sqrt(precision_mean)``. A one-draw fit without it (MAP) reports
    ``1 / sqrt`` of its point precision and NaN spreads.

    Cumulative ordinal. A fit whose ``sensitivity`` has a ``threshold`` dim
    gets one row per (annotator, threshold), a MultiIndex: the table above
    (``sensitivity``, ``specificity``, ``weight``, ``n_labels``) of each
    threshold's binary problem "level above c".

    Laplace. A MAP fit made with ``fit_map(..., laplace=True)`` is summarised
    over its Laplace draws (group ``laplace``), like a NUTS fit: the means are
    the draws' means, close to but not the MAP itself, which stays in the
    fit's ``posterior`` group. Where the draws have no class shares (a
    classifier of the features in place of ``prevalence``), the overall
    ``accuracy`` weighs the classes by the MAP's shares, the mean of its
    ``item_class_prob``.

    Examples
    --------
    >>> from crowd_models.models import two_coin
    >>> fit = two_coin.em(cm.datasets.load_rte())
    >>> cm.report.annotator_summary(fit, ci_prob=0.9).head()
    """
    ci_prob = check_ci_prob(ci_prob)
    if component_fits(fit):
        return _average_summary(fit, ci_prob, rank_by)
    shares = _point_class_shares(fit)
    fit = _with_draws(fit)
    post = posterior_of(fit)
    if "sensitivity" in post and D.THRESHOLD in post["sensitivity"].dims:
        return _threshold_summary(fit, post, ci_prob, rank_by)
    found = {name: post[name] for name in post.data_vars if is_annotator_measure(post[name])}
    conf = _confusion_of(post)
    if not found and conf is None:
        raise ValueError(
            f"this fit has no per-annotator variable (dims chain, draw, annotator, or a "
            f"confusion (annotator, true_class, label_class)) to summarise; its variables are "
            f"{sorted(map(str, post.data_vars))}."
        )
    measures: dict[str, xr.DataArray] = {}
    if "sensitivity" in found and "specificity" in found:
        measures["sensitivity"] = found.pop("sensitivity")
        measures["specificity"] = found.pop("specificity")
        measures["weight"] = found.pop(
            "weight", logit(measures["sensitivity"]) + logit(measures["specificity"]))
    if conf is not None and "accuracy" in found:  # one-coin: its accuracy is the overall one
        measures["accuracy"] = found.pop("accuracy")
    measures.update(found)

    annotators = pd.Index(post[D.ANNOTATOR].values, name=D.ANNOTATOR)
    if n_samples(post) > 1:
        summaries = {name: summarise_draws(draw_matrix(da), ci_prob)
                     for name, da in measures.items()}
    else:
        summaries = single_draw_summary(post, measures, ci_prob)
    if conf is not None:
        accuracies = _accuracy_summaries(post, conf, ci_prob, shares)
        if _is_one_coin(post) and "accuracy" in summaries:
            # one accuracy per annotator, the same for every true class
            accuracies = {n: v if n == "accuracy" else dict(summaries["accuracy"])
                          for n, v in accuracies.items()}
        clash = sorted(set(accuracies) & set(summaries) - {"accuracy"})
        if clash:
            raise ValueError(
                f"the per-class accuracy names {clash} clash with variables of the fit of the "
                f"same name; rename those variables."
            )
        ordered = [n for n in ("sensitivity", "specificity", "weight") if n in summaries]
        ordered += ["accuracy"] if "accuracy" in summaries or "accuracy" in accuracies else []
        ordered += [n for n in accuracies if n != "accuracy"]
        ordered += [n for n in summaries if n not in ordered]
        summaries = {**accuracies, **summaries}
        summaries = {n: summaries[n] for n in ordered}
    if _is_continuous(fit, post) and "sd" not in summaries:
        # the noise SD in label units, right after the precision it is derived from
        sd = _sd_summary(post, ci_prob)
        names = list(summaries)
        at = names.index("precision") + 1
        summaries = {n: summaries[n] for n in names[:at]} | {"sd": sd} | {
            n: summaries[n] for n in names[at:]}
    columns = {f"{name}_{stat}": summaries[name][stat]
               for name in summaries for stat in _STATS}
    table = pd.DataFrame(columns, index=annotators)
    if "community_prob" in post and D.COMMUNITY in post["community_prob"].dims:
        # each annotator's most probable community, averaged over the draws
        prob = post["community_prob"].mean([d for d in SAMPLE_DIMS if d in
                                            post["community_prob"].dims])
        prob = prob.transpose(D.ANNOTATOR, D.COMMUNITY).values
        table["community"] = post[D.COMMUNITY].values[prob.argmax(axis=1)]
        table["community_prob"] = prob.max(axis=1)
    table["n_labels"] = labels_per_annotator(fit, post, annotators)

    if rank_by is not None:
        if rank_by not in table.columns:
            raise ValueError(
                f"rank_by={rank_by!r} is not a column of the summary; choose one of "
                f"{list(table.columns)}."
            )
        table = table.sort_values(rank_by, ascending=False, kind="mergesort",
                                  na_position="last")
    return table

# -------------------------------------------------------------- item table
def _labels_per_item(fit, annotations: Annotations | None, items: pd.Index) -> np.ndarray:
    """Labels per item (repeats counted), in the order of ``items``."""
    if annotations is not None:
        counts = np.bincount(annotations.item_idx, minlength=annotations.n_items)
        return pd.Series(counts, index=annotations.items).reindex(items).to_numpy()
    if isinstance(fit, xr.DataTree):
        if "constant_data" in fit.children:
            const = fit["constant_data"].to_dataset()
            if "item_idx" in const and const["item_idx"].ndim == 1:
                idx = np.asarray(const["item_idx"].values, dtype=np.int64)
                if idx.size and idx.min() >= 0 and idx.max() < len(items):
                    return np.bincount(idx, minlength=len(items))
        if "observed_data" in fit.children:
            observed = fit["observed_data"].to_dataset()
            if D.OBSERVED in observed and observed[D.OBSERVED].dims == (D.ITEM,):
                da = observed[D.OBSERVED]
                counts = pd.Series(np.asarray(da.values), index=pd.Index(da[D.ITEM].values)
                                   if D.ITEM in da.coords else None)
                if D.ITEM in da.coords:
                    counts = counts.reindex(items)
                if len(counts) == len(items) and counts.notna().all():
                    return counts.to_numpy(dtype=np.int64)
    return np.full(len(items), np.nan)


def _class_item_table(fit, annotations: Annotations | None) -> pd.DataFrame:
    """:func:`item_table` of a fit with ``item_class_prob``."""
    probs = _item_class_prob(fit)
    values = np.asarray(probs.values, dtype=float)
    n_items, n_classes = values.shape
    items = (pd.Index(probs[D.ITEM].values) if D.ITEM in probs.coords
             else pd.RangeIndex(n_items))
    classes = (pd.Index(probs[D.TRUE_CLASS].values) if D.TRUE_CLASS in probs.coords
               else pd.RangeIndex(n_classes))
    counts = _labels_per_item(fit, None, items)
    if annotations is not None:
        if annotations.continuous:
            raise ValueError("this fit has class probabilities (item_class_prob), but the "
                             "annotations are continuous; pass the annotations of the fit.")
        # get_indexer, not isin: pandas' isin of text against text ran row by row
        # in Python (2.8 s for 200,000 items)
        rows = items.get_indexer(annotations.items) if items.is_unique else None
        missing = annotations.items[~annotations.items.isin(items) if rows is None
                                    else rows < 0]
        if len(items) != annotations.n_items or len(missing):
            raise ValueError(
                f"the fit's {len(items)} items are not the annotations' {annotations.n_items} "
                f"items" + (f" ({listing(missing, 3)} are not in the fit)" if len(missing)
                            else "") + "; pass the annotations the fit was made on."
            )
        if len(classes) != annotations.n_classes or not annotations.classes.isin(
                classes).all():
            raise ValueError(
                f"the fit's classes {listing(classes)} are not the annotations' classes "
                f"{listing(annotations.classes)}; pass the annotations the fit was made on."
            )
        rows = items.get_indexer(annotations.items) if rows is None else rows
        cols = classes.get_indexer(annotations.classes)
        values, items, classes = values[rows][:, cols], annotations.items, annotations.classes
        counts = _labels_per_item(fit, annotations, items)
    best = values.argmax(axis=1)  # ties go to the first class, as in accuracy()
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(values > 0, values * np.log(values), 0.0)
    table = pd.DataFrame(
        {
            "estimated_label": classes.to_numpy()[best],
            "estimated_prob": values[np.arange(n_items), best],
            "entropy": -terms.sum(axis=1),
            "n_labels": counts,
        },
        index=pd.Index(items, name=D.ITEM),
    )
    for k, name in enumerate(classes):
        table[f"prob_{name}"] = values[:, k]
    table = table.join(_item_measures(fit, table.index))
    if annotations is not None and annotations.has_gold:
        table["gold"] = annotations.gold_series().reindex(annotations.items).to_numpy()
    return table


def _item_measures(fit, items: pd.Index) -> pd.DataFrame:
    """Per-item posterior variables (dims chain, draw, item; e.g. the item-difficulty
    model's ``easiness``): ``<name>_mean``, and with draws the 90% interval; read
    from the same posterior as the class probabilities beside them."""
    post = posterior_of(fit)
    columns = {}
    for name in post.data_vars:
        da = post[name]
        if set(da.dims) != {*SAMPLE_DIMS, D.ITEM} or not np.issubdtype(da.dtype, np.number):
            continue
        draws = draw_matrix(da, D.ITEM)
        order = pd.Index(da[D.ITEM].values).get_indexer(items)
        columns[f"{name}_mean"] = draws.mean(axis=0)[order]
        if len(draws) > 1:
            lower, upper = equal_tailed(draws, 0.9)
            columns[f"{name}_lower"], columns[f"{name}_upper"] = lower[order], upper[order]
    return pd.DataFrame(columns, index=items)


def _value_item_table(fit, annotations: Annotations | None) -> pd.DataFrame:
    """:func:`item_table` of a continuous fit (``true_value``, ``true_value_sd``)."""
    if annotations is not None and not annotations.continuous:
        raise ValueError("this is a continuous fit (true_value), but the annotations have "
                         "classes; pass the annotations of the fit.")
    table = true_value_summary(fit, annotations=annotations)
    table.insert(4, "n_labels", _labels_per_item(fit, annotations, table.index))
    return table


def item_table(fit, annotations: Annotations | None = None) -> pd.DataFrame:
    """One row per item: the fit's estimate of its true class or value.

    Parameters
    ----------
    fit : xarray.Dataset or xarray.DataTree
        An EM Dataset, or a DataTree from ``fit_map`` or ``sample``, of any
        family.
    annotations : Annotations, optional
        The data the fit was made on. With them, rows follow their item order,
        ``n_labels`` is counted from them and a ``gold`` column is added when
        they carry gold labels (values). Without them, rows follow the fit's
        ``item`` coordinate and ``n_labels`` comes from a DataTree's
        ``constant_data``/``observed_data`` (NaN for an EM Dataset, which does
        not record it).

    Returns
    -------
    pandas.DataFrame
        Indexed by the user's item ids (index name ``item``).

        Categorical fits (``item_class_prob`` (item, true_class)):
        ``estimated_label``, the most probable class by the user's class names
        (ties go to the first class); ``estimated_prob``, its probability;
        ``entropy``, the entropy of the item's class probabilities in nats (0
        when one class is certain, ``log K`` when all K are equally likely);
        ``n_labels``; ``prob_<class>`` for each class; and ``gold`` (the gold
        class, NaN where unknown) when the annotations have gold labels. With
        many draws (NUTS) the probabilities are averaged over chains and
        draws first, so ``estimated_prob`` and ``entropy`` describe the
        posterior mean of ``item_class_prob``.

        Continuous fits (``true_value``, ``true_value_sd``): ``mean``, ``sd``,
        ``lower``, ``upper`` (90% normal interval) of each item's true value,
        as :func:`true_value_summary` gives
        them (over the draws, by the law of total variance), then
        ``n_labels``, and ``gold`` when the annotations carry gold values.

    Raises
    ------
    ValueError
        If the fit has neither ``item_class_prob`` nor ``true_value``, or the
        annotations' items (or classes) are not the fit's.

    Examples
    --------
    >>> from crowd_models.models import two_coin
    >>> ann = cm.datasets.load_rte()
    >>> cm.report.item_table(two_coin.em(ann), ann).head()
    """
    if annotations is not None and not isinstance(annotations, Annotations):
        raise TypeError(f"annotations must be Annotations or None, got "
                        f"{type(annotations).__name__}.")
    post = posterior_of(fit)
    if "item_class_prob" in post:
        return _class_item_table(fit, annotations)
    if "true_value" in post:
        return _value_item_table(fit, annotations)
    raise ValueError(
        f"this fit has neither item_class_prob (item, true_class) nor true_value (item) to "
        f"tabulate; its variables are {sorted(map(str, post.data_vars))}."
    )


# ------------------------------------------------- tables the CLI also prints
def conditional_intervals(table: pd.DataFrame, em_fit, ci_prob: float = 0.9) -> pd.DataFrame:
    """Intervals for a one-draw continuous fit (MAP = EM) from EM's conditional
    posteriors.

    A MAP fit has no spread of its own. The continuous family's EM stores the
    posterior of each precision given the other parameters, Gamma(
    ``precision_alpha``, rate ``precision_beta``), and of each bias,
    N(bias, ``bias_conditional_sd``^2); this fills the table's ``_sd``,
    ``_lower`` and ``_upper`` columns of precision, noise SD (1 / sqrt of the
    precision) and bias from them. They are conditional intervals: narrower
    than the full posterior's, which NUTS gives.

    Parameters
    ----------
    table : pandas.DataFrame
        :func:`annotator_summary` of the MAP (or EM) fit, indexed by annotator.
    em_fit : xarray.Dataset
        The continuous family's EM fit of the same data.
    ci_prob : float, default 0.9
        Probability of the equal-tailed intervals.

    Returns
    -------
    pandas.DataFrame
        A copy of ``table`` with those columns filled.

    Examples
    --------
    >>> from crowd_models.models import continuous
    >>> from crowd_models.report import annotator_summary, conditional_intervals
    >>> ann = cm.datasets.load_affect("anger")
    >>> map_fit = cm.fit_map(continuous.build_model(ann), laplace=True)
    >>> table = conditional_intervals(annotator_summary(map_fit), continuous.em(ann))
    """
    ci_prob = check_ci_prob(ci_prob)
    for name in ("precision_alpha", "precision_beta"):
        if name not in em_fit:
            raise ValueError(f"em_fit has no {name!r}: conditional intervals need the "
                             f"continuous family's EM fit (continuous.em).")
    tail = (1 - ci_prob) / 2
    table = table.copy()
    a = em_fit["precision_alpha"].to_series().reindex(table.index).to_numpy()
    b = em_fit["precision_beta"].to_series().reindex(table.index).to_numpy()
    table["precision_sd"] = gamma_sd(a, b)
    table["precision_lower"] = gamma_quantile(tail, a, b)
    table["precision_upper"] = gamma_quantile(1 - tail, a, b)
    if "sd_mean" in table:
        root = gamma_root_summary(a, b, ci_prob)
        for stat in ("sd", "lower", "upper"):
            table[f"sd_{stat}"] = root[stat]
    if "bias_conditional_sd" in em_fit and "bias_mean" in table:
        sd = em_fit["bias_conditional_sd"].to_series().reindex(table.index).to_numpy()
        z = ndtri(1 - tail)
        table["bias_sd"] = sd
        table["bias_lower"] = table["bias_mean"] - z * sd
        table["bias_upper"] = table["bias_mean"] + z * sd
    return table


def coefficient_table(fit, ci_prob: float = 0.9) -> pd.DataFrame | None:
    """One row per feature: mean (and, with draws, interval) of each coefficient vector.

    Parameters
    ----------
    fit : xarray.Dataset or xarray.DataTree
        Any fit; its variables with the single dim ``feature`` (besides chain and
        draw) are reported, except the Laplace prior's ``_pos``/``_neg`` parts.
    ci_prob : float, default 0.9
        Probability of the equal-tailed intervals (fits with several draws).

    Returns
    -------
    pandas.DataFrame or None
        Columns ``<name>_mean`` and, for a fit with several draws, ``<name>_lower``
        and ``<name>_upper``, indexed by feature; None when the fit has no
        coefficients.

    Examples
    --------
    >>> from crowd_models.models import two_coin
    >>> from crowd_models.report import coefficient_table
    >>> ann = two_coin.simulate([0.9, 0.8, 0.7], [0.9, 0.8, 0.7], n_items=300, n_features=3, rng=0)
    >>> coefficient_table(two_coin.em(ann))
    """
    ci_prob = check_ci_prob(ci_prob)
    post = posterior_of(fit)
    names = [n for n in post.data_vars
             if set(post[n].dims) - set(SAMPLE_DIMS) == {D.FEATURE}
             and not n.endswith(("_pos", "_neg"))]
    if not names:
        return None
    columns = {}
    for name in names:
        draws = draw_matrix(post[name], D.FEATURE)
        columns[f"{name}_mean"] = draws.mean(axis=0)
        if len(draws) > 1:
            columns[f"{name}_lower"], columns[f"{name}_upper"] = equal_tailed(draws, ci_prob)
    return pd.DataFrame(columns, index=pd.Index(post[D.FEATURE].values, name=D.FEATURE))


def true_value_summary(fit, *, annotations: Annotations | None = None,
                       ci_prob: float = 0.9) -> pd.DataFrame:
    """Posterior of each item's true value: mean, sd and interval.

    ``fit`` is an EM Dataset or a MAP/NUTS DataTree of the continuous family. Over the
    draws, the mean is the mean of ``true_value`` and the variance is the mean
    of ``true_value_sd**2`` plus the variance of ``true_value`` (the law of
    total variance); the interval is the normal one with that mean and sd
    (exact for a single draw of a Gaussian-noise fit). With ``annotations``,
    rows follow their item order and a ``gold`` column is added when they
    have gold values (NaN where unknown).

    Examples
    --------
    >>> from crowd_models.models import continuous
    >>> ann = cm.datasets.load_affect("anger")
    >>> cm.report.true_value_summary(continuous.em(ann)).head()
    """
    ci_prob = check_ci_prob(ci_prob)
    post = posterior_of(fit)
    mean, sd, items = item_draws(post, annotations)
    centre = mean.mean(axis=0)
    spread = np.sqrt(np.mean(sd ** 2, axis=0) + mean.var(axis=0))
    z = ndtri(0.5 + ci_prob / 2)
    table = pd.DataFrame({"mean": centre, "sd": spread, "lower": centre - z * spread,
                          "upper": centre + z * spread}, index=pd.Index(items, name=D.ITEM))
    if annotations is not None and annotations.gold is not None:
        table["gold"] = annotations.gold
    return table


def with_intervals(table: pd.DataFrame, *, digits: int = 3) -> pd.DataFrame:
    """A summary table for reading: each measure's mean and interval in one column.

    Parameters
    ----------
    table : pandas.DataFrame
        A table with ``<measure>_mean``, ``<measure>_lower`` and
        ``<measure>_upper`` columns (:func:`annotator_summary`,
        :func:`coefficient_table`, :func:`item_table` and
        :func:`true_value_summary` give them).
    digits : int
        Decimals shown.

    Returns
    -------
    pandas.DataFrame
        The same rows: every measure as text, ``"0.874 [0.770, 0.950]"``
        (the mean alone where the fit has no interval, e.g. a MAP fit without a
        Laplace approximation), in the order of the measures' first columns;
        the ``_sd`` columns dropped; every other column kept as it was.

    Examples
    --------
    >>> from crowd_models.models import two_coin
    >>> fit = two_coin.em(cm.datasets.load_rte())
    >>> cm.report.with_intervals(cm.report.annotator_summary(fit)).head()
    """
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"with_intervals expects a DataFrame, got {type(table).__name__}.")
    if not (isinstance(digits, int | np.integer) and digits >= 0):
        raise ValueError(f"digits must be a non-negative integer, got {digits!r}.")
    measures = [c[:-5] for c in table.columns if str(c).endswith("_mean")
                and f"{c[:-5]}_lower" in table and f"{c[:-5]}_upper" in table]
    if not measures:
        raise ValueError("the table has no <measure>_mean/_lower/_upper columns; pass a "
                         "table of crowd_models.report (e.g. annotator_summary(fit)).")

    def text(mean, lower, upper):
        if not np.isfinite(mean):
            return ""
        if not (np.isfinite(lower) and np.isfinite(upper)):
            return f"{mean:.{digits}f}"
        return f"{mean:.{digits}f} [{lower:.{digits}f}, {upper:.{digits}f}]"

    out = {}
    for column in table.columns:
        name = str(column)
        base = next((m for m in measures if name in (f"{m}_mean", f"{m}_lower", f"{m}_upper",
                                                      f"{m}_sd")), None)
        if base is None:
            if not name.endswith("_sd"):
                out[column] = table[column]
        elif base not in out:
            out[base] = [text(*values) for values in zip(
                table[f"{base}_mean"].astype(float), table[f"{base}_lower"].astype(float),
                table[f"{base}_upper"].astype(float), strict=True)]
    return pd.DataFrame(out, index=table.index)
