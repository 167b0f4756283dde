"""Annotator tables, annotator plots and classifier scores over any fit.

Every function here takes any of the three kinds of fit the families produce
and treats them alike:

* an EM ``xarray.Dataset`` (``chain=1, draw=1``), from a family's ``em``;
* a MAP ``xarray.DataTree`` from :func:`crowd_models.fit_map` (one draw);
* a NUTS ``xarray.DataTree`` from :func:`crowd_models.sample` (many draws).

With many draws, uncertainty comes from the draws. A single-draw fit carries
no uncertainty of its own, so its spreads and intervals are NaN, except for
an EM fit that stores the Beta approximations of Raykar et al. (2009), sec.
7.1 (``sensitivity_alpha``/``_beta``, ``specificity_alpha``/``_beta``), or
the Dirichlet rows of a confusion (``confusion_alpha``), whose spreads and
intervals are used instead.

The positive class of a binary fit is the second class of ``true_class``, as
everywhere in the package.

Functions
---------
annotator_summary : one row per annotator, mean, sd and interval per measure.
plot_annotators : annotators in ROC space, with intervals and optional truth.
plot_confusion : heatmap of one annotator's (or the population's) confusion matrix.
plot_confusions : those heatmaps for several annotators, one figure.
roc_curve, plot_roc : ROC curve and AUC of scores against binary gold labels.
soft_confusion : sensitivity and specificity of 0/1 predictions against soft labels.
accuracy : accuracy of a fit's most probable true class against gold labels.
item_table : one row per item, its most probable class (or true value) and spread.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats
from scipy.special import logit

from crowd_models import _dims as D
from crowd_models.data import Annotations, _listing
from crowd_models.inference import posterior_of

__all__ = [
    "annotator_summary",
    "plot_annotators",
    "plot_confusion",
    "plot_confusions",
    "roc_curve",
    "plot_roc",
    "soft_confusion",
    "accuracy",
    "item_table",
]

_SAMPLE_DIMS = (D.CHAIN, D.DRAW)
_STATS = ("mean", "sd", "lower", "upper")
_APPROXIMATIONS = {
    "sensitivity": ("beta", "sensitivity_alpha", "sensitivity_beta"),
    "specificity": ("beta", "specificity_alpha", "specificity_beta"),
    "accuracy": ("beta", "accuracy_alpha", "accuracy_beta"),
    "precision": ("gamma", "precision_alpha", "precision_beta"),
}
"""Approximate posteriors an EM fit may store per annotator: measure ->
(distribution, first parameter, second parameter); Beta(alpha, beta), and
Gamma(shape alpha, rate beta). The families' EM write them: two-coin (Raykar
et al. 2009, sec. 7.1), one-coin Dawid-Skene, continuous (given the truth's
posterior)."""
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


def _approximation(post: xr.Dataset, name: str):
    """The frozen scipy distribution (over annotators) an EM fit stores for
    measure ``name`` (see :data:`_APPROXIMATIONS`), or None.

    Parameters
    ----------
    post : xarray.Dataset
    name : str

    Returns
    -------
    scipy.stats frozen distribution or None
    """
    if name not in _APPROXIMATIONS:
        return None
    family, first, second = _APPROXIMATIONS[name]
    if not all(n in post and D.ANNOTATOR in post[n].dims for n in (first, second)):
        return None
    a, b = _annotator_vector(post, first), _annotator_vector(post, second)
    return stats.beta(a, b) if family == "beta" else stats.gamma(a, scale=1 / b)


def _single_draw_summary(post: xr.Dataset, measures: dict[str, xr.DataArray],
                         ci_prob: float) -> dict[str, dict[str, np.ndarray]]:
    """Summaries of a one-draw fit (EM or MAP).

    The mean is the fit's point estimate and spreads and intervals are NaN,
    except for the measures of an EM fit that stores their approximate
    posterior (:data:`_APPROXIMATIONS`: the Betas of sensitivity,
    specificity and a one-coin accuracy, the Gamma of a continuous
    precision): those report the approximation's mean, sd and quantiles, and
    the weight of a fit with both Betas those of Monte Carlo draws from them.
    The EM estimate is the approximation's mode, which can lie outside its
    equal-tailed interval (a sensitivity of 1 on a perfect record), so it is
    not the reported mean.

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
    out, approximations = {}, {}
    for name, da in measures.items():
        point = _draw_matrix(da)[0]
        nan = np.full_like(point, np.nan)
        out[name] = {"mean": point, "sd": nan, "lower": nan.copy(), "upper": nan.copy()}
        dist = _approximation(post, name)
        if dist is not None:
            approximations[name] = dist
            out[name] = {"mean": dist.mean(), "sd": dist.std(), "lower": dist.ppf(tail),
                         "upper": dist.ppf(1 - tail)}
    if "weight" in out and "weight" not in post and {"sensitivity", "specificity"} <= set(
            approximations):
        rng = np.random.default_rng(_MC_SEED)
        n = len(out["weight"]["mean"])
        sens = approximations["sensitivity"].rvs(size=(_MC_DRAWS, n), random_state=rng)
        spec = approximations["specificity"].rvs(size=(_MC_DRAWS, n), random_state=rng)
        out["weight"] = _summarise_draws(logit(sens) + logit(spec), ci_prob)
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


# ------------------------------------------------------ confusion matrices
_CONFUSION_DIMS = (D.ANNOTATOR, D.TRUE_CLASS, D.LABEL_CLASS)


def _aligned_confusion(da: xr.DataArray, name: str = "confusion") -> xr.DataArray:
    """A confusion-like array with its label classes in the true classes' order.

    Parameters
    ----------
    da : xarray.DataArray
        Any array with ``true_class`` and ``label_class`` dims (e.g.
        ``confusion``, ``confusion_alpha`` or ``confusion_mean``).
    name : str
        Its name, for messages.

    Returns
    -------
    xarray.DataArray
        The same values with ``label_class`` reordered so that position k of
        both class dims is the same class: matched by name when both dims have
        coordinates, by position otherwise. The diagonal is then the
        probability of a correct label.

    Raises
    ------
    ValueError
        If the two class dims differ in size or in class names.
    """
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
    """The true-class names of a confusion-like array (positions when it has none).

    Parameters
    ----------
    da : xarray.DataArray

    Returns
    -------
    list
    """
    if D.TRUE_CLASS in da.coords:
        return list(da[D.TRUE_CLASS].values)
    return list(range(da.sizes[D.TRUE_CLASS]))


def _confusion_of(post: xr.Dataset) -> xr.DataArray | None:
    """The per-annotator ``confusion`` draws of a fit, classes aligned, if it has them.

    Parameters
    ----------
    post : xarray.Dataset

    Returns
    -------
    xarray.DataArray or None
        (chain, draw, annotator, true_class, label_class), label classes in the
        true classes' order; None when the fit has no such variable.
    """
    if "confusion" not in post:
        return None
    da = post["confusion"]
    if set(da.dims) != {*_SAMPLE_DIMS, *_CONFUSION_DIMS}:
        return None
    return _aligned_confusion(da).transpose(*_SAMPLE_DIMS, *_CONFUSION_DIMS)


def _sample_array(da: xr.DataArray, *dims: str) -> np.ndarray:
    """Draws as a (sample, *dims) float array, sample = chain x draw (1 if absent).

    Parameters
    ----------
    da : xarray.DataArray
        With ``dims`` and optionally chain and draw.
    *dims : str
        The other dims, in the order wanted.

    Returns
    -------
    numpy.ndarray of float
    """
    sample = [d for d in _SAMPLE_DIMS if d in da.dims]
    da = da.transpose(*sample, *dims)
    return np.asarray(da.values, dtype=float).reshape(-1, *[da.sizes[d] for d in dims])


def _is_one_coin(post: xr.Dataset) -> bool:
    """Whether a confusion fit is the one-coin variant (a per-annotator ``accuracy``).

    Parameters
    ----------
    post : xarray.Dataset

    Returns
    -------
    bool
    """
    return "accuracy" in post and _is_annotator_measure(post["accuracy"])


def _confusion_alpha(post: xr.Dataset) -> xr.DataArray | None:
    """The Dirichlet rows of an EM fit's confusion, aligned, if usable.

    Only a one-draw fit of a full confusion model uses them: with many draws
    the draws carry the uncertainty, and the one-coin EM stores the rows of the
    full model, which do not describe its single accuracy per annotator.

    Parameters
    ----------
    post : xarray.Dataset

    Returns
    -------
    xarray.DataArray or None
        (annotator, true_class, label_class), label classes in the true classes'
        order.
    """
    if "confusion_alpha" not in post or _n_samples(post) > 1 or _is_one_coin(post):
        return None
    da = post["confusion_alpha"]
    if set(da.dims) != set(_CONFUSION_DIMS):
        return None
    return _aligned_confusion(da, "confusion_alpha").transpose(*_CONFUSION_DIMS)


def _beta_marginals(alpha: xr.DataArray) -> tuple[np.ndarray, np.ndarray]:
    """Beta parameters of each cell's marginal under Dirichlet rows.

    Parameters
    ----------
    alpha : xarray.DataArray
        (annotator, true_class, label_class) Dirichlet concentrations.

    Returns
    -------
    a, b : numpy.ndarray, shape (annotator, true_class, label_class)
        Cell (j, k, l) is Beta(alpha_jkl, sum_l' alpha_jkl' - alpha_jkl).
    """
    a = np.asarray(alpha.values, dtype=float)
    return a, a.sum(axis=2, keepdims=True) - a


def _class_weights(post: xr.Dataset, conf: xr.DataArray) -> np.ndarray | None:
    """Share of each true class, per draw, to average per-class accuracies with.

    Parameters
    ----------
    post : xarray.Dataset
    conf : xarray.DataArray
        The aligned confusion draws (for the class order).

    Returns
    -------
    numpy.ndarray of float, shape (sample or 1, true_class), or None
        The ``prevalence`` draws when the fit has them (true_class), else the
        mean over items of ``item_class_prob`` per draw; None when it has
        neither.
    """
    if "prevalence" in post and D.TRUE_CLASS in post["prevalence"].dims and set(
            post["prevalence"].dims) <= {*_SAMPLE_DIMS, D.TRUE_CLASS}:
        weights = post["prevalence"]
    elif "item_class_prob" in post and set(post["item_class_prob"].dims) - set(
            _SAMPLE_DIMS) == {D.ITEM, D.TRUE_CLASS}:
        weights = post["item_class_prob"].mean(D.ITEM)
    else:
        return None
    if weights.sizes[D.TRUE_CLASS] != conf.sizes[D.TRUE_CLASS]:
        raise ValueError(
            f"the fit's class shares have {weights.sizes[D.TRUE_CLASS]} classes but its "
            f"confusion has {conf.sizes[D.TRUE_CLASS]}."
        )
    return _sample_array(weights, D.TRUE_CLASS)


def _accuracy_summaries(post: xr.Dataset, conf: xr.DataArray,
                        ci_prob: float) -> dict[str, dict[str, np.ndarray]]:
    """Per-class and overall accuracy of each annotator of a confusion fit.

    Parameters
    ----------
    post : xarray.Dataset
    conf : xarray.DataArray
        The aligned confusion draws, from :func:`_confusion_of`.
    ci_prob : float

    Returns
    -------
    dict
        ``accuracy`` (overall; absent for a one-coin fit, whose own ``accuracy``
        variable is that overall accuracy, and when the fit has no class shares)
        then ``accuracy_<class>`` for each true class, each a dict of ``mean``,
        ``sd``, ``lower``, ``upper`` vectors over annotators.
    """
    diag = np.diagonal(_sample_array(conf, *_CONFUSION_DIMS), axis1=2, axis2=3)  # (S, J, K)
    names = [f"accuracy_{c}" for c in _class_names(conf)]
    if len(set(names)) < len(names):
        raise ValueError(
            f"the true classes {_class_names(conf)} give duplicate column names {names}; "
            f"give the classes distinct names."
        )
    weights = None if _is_one_coin(post) else _class_weights(post, conf)
    out: dict[str, dict[str, np.ndarray]] = {}
    if diag.shape[0] > 1:
        if weights is not None:
            out["accuracy"] = _summarise_draws(np.sum(weights[:, None, :] * diag, axis=2),
                                               ci_prob)
        for k, name in enumerate(names):
            out[name] = _summarise_draws(diag[:, :, k], ci_prob)
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
        out[name] = {"mean": stats.beta.mean(a[:, k], b[:, k]),
                     "sd": stats.beta.std(a[:, k], b[:, k]),
                     "lower": stats.beta.ppf(tail, a[:, k], b[:, k]),
                     "upper": stats.beta.ppf(1 - tail, a[:, k], b[:, k])}
    if weights is not None:
        # rows are independent and the overall accuracy only involves their
        # diagonal cells, so drawing those from their Beta marginals is drawing
        # from the Dirichlet rows
        rng = np.random.default_rng(_MC_SEED)
        mc = np.zeros((_MC_DRAWS, a.shape[0]))
        for k in range(a.shape[1]):
            mc += weights[0, k] * rng.beta(a[:, k], b[:, k], size=mc.shape)
        out["accuracy"] = _summarise_draws(mc, ci_prob)
    return out


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
        has sensitivity and specificity; then, when the fit has a ``confusion``
        (annotator, true_class, label_class), ``accuracy``, the overall
        probability of a correct label, and ``accuracy_<class>`` =
        ``confusion[j, k, k]`` for each true class k, named by the user's
        class names (the ``true_class`` coordinate); then every other
        posterior variable whose only dims besides chain and draw is
        ``annotator`` (e.g. ``precision``), in the fit's variable order.

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
    those of ``accuracy`` from 4000 Monte Carlo draws per annotator from the
    rows (fixed seed), the class shares held at their point estimate. As for
    the Betas, the rows' joint mode (the EM confusion) is not the centre of
    these marginals (on dog it fell outside the overall accuracy's interval
    for 76 of 109 annotators), so the means are the approximation's. A one-coin
    EM fit ignores ``confusion_alpha``: those rows are the full model's, not
    the posterior of its single accuracy.
    """
    ci_prob = _check_ci_prob(ci_prob)
    post = posterior_of(fit)
    found = {name: post[name] for name in post.data_vars if _is_annotator_measure(post[name])}
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
    if _n_samples(post) > 1:
        summaries = {name: _summarise_draws(_draw_matrix(da), ci_prob)
                     for name, da in measures.items()}
    else:
        summaries = _single_draw_summary(post, measures, ci_prob)
    if conf is not None:
        accuracies = _accuracy_summaries(post, conf, ci_prob)
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
    columns = {f"{name}_{stat}": summaries[name][stat]
               for name in summaries for stat in _STATS}
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


# ---------------------------------------------------------- confusion plots
def _confusion_for_plot(fit) -> tuple[xr.Dataset, xr.DataArray]:
    """The posterior and the aligned confusion draws of a fit, or a clear error.

    Parameters
    ----------
    fit : xarray.Dataset or xarray.DataTree

    Returns
    -------
    post : xarray.Dataset
    conf : xarray.DataArray
        (chain, draw, annotator, true_class, label_class).
    """
    post = posterior_of(fit)
    conf = _confusion_of(post)
    if conf is None:
        raise ValueError(
            f"plotting a confusion matrix needs a confusion (annotator, true_class, "
            f"label_class) variable, e.g. a Dawid-Skene fit; this fit's variables are "
            f"{sorted(map(str, post.data_vars))}."
        )
    return post, conf


def _annotator_position(annotators: pd.Index, annotator) -> int:
    """Position of an annotator id, or a ValueError listing valid ids.

    Parameters
    ----------
    annotators : pandas.Index
        The fit's annotator ids.
    annotator : hashable

    Returns
    -------
    int
    """
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


def _monte_carlo_mixture(a: np.ndarray, b: np.ndarray, weights: np.ndarray,
                         ci_prob: float) -> tuple[np.ndarray, np.ndarray]:
    """Interval of a weighted sum over annotators of independent Beta cells.

    Parameters
    ----------
    a, b : numpy.ndarray, shape (annotator, true_class, label_class)
        Beta parameters of each cell.
    weights : numpy.ndarray, shape (annotator,)
    ci_prob : float

    Returns
    -------
    lower, upper : numpy.ndarray, shape (true_class, label_class)
        Quantiles of 4000 Monte Carlo draws per cell (fixed seed).
    """
    rng = np.random.default_rng(_MC_SEED)
    tail = (1 - ci_prob) / 2
    K = a.shape[1]
    lower, upper = np.empty((K, K)), np.empty((K, K))
    for k in range(K):
        for m in range(K):
            draws = rng.beta(a[:, k, m], b[:, k, m], size=(_MC_DRAWS, a.shape[0])) @ weights
            lower[k, m], upper[k, m] = np.quantile(draws, [tail, 1 - tail])
    return lower, upper


def _confusion_cells(fit, annotator, ci_prob: float):
    """Mean and interval of each cell of one annotator's or the population's confusion.

    Parameters
    ----------
    fit : xarray.Dataset or xarray.DataTree
    annotator : hashable or None
    ci_prob : float

    Returns
    -------
    mean, lower, upper : numpy.ndarray, shape (true_class, label_class)
        ``lower``/``upper`` are NaN when the fit carries no uncertainty.
    classes : list
        The class names, the order of both axes.
    title : str
    """
    post, conf = _confusion_for_plot(fit)
    annotators = pd.Index(post[D.ANNOTATOR].values, name=D.ANNOTATOR)
    counts = _n_labels(fit, post, annotators)
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
            interval = (stats.beta.ppf(tail, a[j], b[j]), stats.beta.ppf(1 - tail, a[j], b[j]))
    elif "confusion_mean" in post and set(post["confusion_mean"].dims) == {
            *_SAMPLE_DIMS, D.TRUE_CLASS, D.LABEL_CLASS}:
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
            interval = _monte_carlo_mixture(a, b, weights, ci_prob)

    if len(cells) > 1:
        interval = (np.quantile(cells, tail, axis=0), np.quantile(cells, 1 - tail, axis=0))
    if interval is None:
        interval = (np.full(cells.shape[1:], np.nan), np.full(cells.shape[1:], np.nan))
    return cells.mean(axis=0), interval[0], interval[1], _class_names(conf), title


def _draw_confusion(ax, mean, lower, upper, classes, title):
    """Draw a confusion heatmap with annotated cells.

    Parameters
    ----------
    ax : matplotlib Axes
    mean, lower, upper : numpy.ndarray, shape (K, K)
    classes : list
    title : str

    Returns
    -------
    matplotlib.image.AxesImage
    """
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
    ax : matplotlib Axes, optional
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
        population, of 4000 Monte Carlo draws, fixed seed). The title
        names the annotator and its number of labels.

    Raises
    ------
    ValueError
        If the fit has no confusion, ``annotator`` is not one of its ids,
        ``annotator=None`` and the fit records neither ``confusion_mean`` nor
        ``n_labels``, or ``ci_prob`` is not strictly between 0 and 1.
    """
    import matplotlib.pyplot as plt

    ci_prob = _check_ci_prob(ci_prob)
    mean, lower, upper, classes, title = _confusion_cells(fit, annotator, ci_prob)
    if ax is None:
        size = 1.2 + 1.1 * len(classes)
        fig, ax = plt.subplots(figsize=(size + 1.2, size))
        fig.colorbar(_draw_confusion(ax, mean, lower, upper, classes, title), ax=ax,
                     label="probability")
    else:
        _draw_confusion(ax, mean, lower, upper, classes, title)
    return ax


def plot_confusions(fit, annotators, ncols: int = 3, *, ci_prob: float = 0.9):
    """Confusion heatmaps of several annotators, one panel each, on one colour scale.

    Parameters
    ----------
    fit : xarray.Dataset or xarray.DataTree
        As for :func:`plot_confusion`.
    annotators : sequence
        Annotator ids, in panel order; ``None`` in it is the population panel.
        A single id (a string) is one panel.
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
    """
    import matplotlib.pyplot as plt

    ci_prob = _check_ci_prob(ci_prob)
    if isinstance(annotators, str | bytes) or not np.iterable(annotators):
        annotators = [annotators]
    annotators = list(annotators)
    if not annotators:
        raise ValueError("annotators is empty; give at least one annotator id (or None).")
    if isinstance(ncols, bool) or not isinstance(ncols, int | np.integer) or ncols < 1:
        raise ValueError(f"ncols must be a positive integer, got {ncols!r}.")
    panels = [_confusion_cells(fit, a, ci_prob) for a in annotators]
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
                f"{_listing(annotations.classes)}."
            )
    elif probs.sizes[D.TRUE_CLASS] != annotations.n_classes:
        raise ValueError(
            f"item_class_prob has {probs.sizes[D.TRUE_CLASS]} classes, the annotations "
            f"{annotations.n_classes}."
        )
    known = annotations.gold >= 0
    return float(np.mean(codes[known] == annotations.gold[known]))


# -------------------------------------------------------------- item table
def _labels_per_item(fit, annotations: Annotations | None, items: pd.Index) -> np.ndarray:
    """Labels per item (repeats counted), in the order of ``items``.

    Parameters
    ----------
    fit : xarray.Dataset or xarray.DataTree
    annotations : Annotations or None
        When given, the counts come from its long table.
    items : pandas.Index
        The item ids of the rows (the annotations' items when they are given,
        otherwise the fit's ``item`` coordinate).

    Returns
    -------
    numpy.ndarray
        Integer counts; without annotations they come from a DataTree's
        ``constant_data["item_idx"]`` (codes into the fit's items) or its
        ``observed_data["labels"]`` (each item's number of labels), and are NaN
        for a fit that records neither (an EM Dataset).
    """
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
            if "labels" in observed and observed["labels"].dims == (D.ITEM,):
                da = observed["labels"]
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
        missing = annotations.items[~annotations.items.isin(items)]
        if len(items) != annotations.n_items or len(missing):
            raise ValueError(
                f"the fit's {len(items)} items are not the annotations' {annotations.n_items} "
                f"items" + (f" ({_listing(missing, 3)} are not in the fit)" if len(missing)
                            else "") + "; pass the annotations the fit was made on."
            )
        if len(classes) != annotations.n_classes or not annotations.classes.isin(
                classes).all():
            raise ValueError(
                f"the fit's classes {_listing(classes)} are not the annotations' classes "
                f"{_listing(annotations.classes)}; pass the annotations the fit was made on."
            )
        rows = items.get_indexer(annotations.items)
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
    if annotations is not None and annotations.has_gold:
        table["gold"] = annotations.gold_series().reindex(annotations.items).to_numpy()
    return table


def _value_item_table(fit, annotations: Annotations | None) -> pd.DataFrame:
    """:func:`item_table` of a continuous fit (``true_value``, ``true_value_sd``)."""
    from crowd_models.models.continuous import true_value_summary

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
        as :func:`crowd_models.models.continuous.true_value_summary` gives
        them (over the draws, by the law of total variance), then
        ``n_labels``, and ``gold`` when the annotations carry gold values.

    Raises
    ------
    ValueError
        If the fit has neither ``item_class_prob`` nor ``true_value``, or the
        annotations' items (or classes) are not the fit's.
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
