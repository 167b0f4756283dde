"""The scorers of :mod:`crowd_models.sklearn` (which exports them): a crowd-trained
classifier scored against gold, or without gold by the held-out crowd labels'
likelihood."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
from scipy.special import logsumexp
from sklearn.metrics import accuracy_score, balanced_accuracy_score, log_loss
from sklearn.utils.validation import check_is_fitted, validate_data

from crowd_models._crowd_matrix import class_labels, label_cells, label_matrix, numeric_labels
from crowd_models._predictive import draw_values, label_probabilities
from crowd_models._text import listing
from crowd_models.data import Annotations
from crowd_models.models import _registry

_METRICS = {"accuracy": accuracy_score, "balanced_accuracy": balanced_accuracy_score}


def gold_scorer(gold, metric="accuracy"):
    """A scorer that scores a crowd-trained classifier against gold labels.

    scikit-learn scores a held-out fold against its ``Y``, which for a crowd is
    noisy labels. This scorer ignores ``Y`` and looks up each held-out item's
    gold label by the index of ``X`` instead.

    Parameters
    ----------
    gold : pandas.Series or array-like
        Gold labels: a Series indexed by the item ids of ``X``'s index, or an
        array aligned with the rows of the whole ``X`` given as a DataFrame
        with the default index 0..n-1 (``pandas.DataFrame(X)``). NaN or None
        where unknown: those items are left out of the score.
    metric : {"accuracy", "balanced_accuracy", "neg_log_loss"} or callable, default "accuracy"
        What to compute: a name, or ``metric(gold, predicted_labels)``.

    Returns
    -------
    callable
        ``scorer(estimator, X, Y=None)``, for ``scoring=`` in ``cross_val_score``,
        ``cross_validate`` or ``GridSearchCV`` (greater is better).

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn.model_selection import KFold, cross_val_score
    >>> from crowd_models.models import two_coin
    >>> from crowd_models.sklearn import CrowdClassifier, gold_scorer
    >>> ann = two_coin.simulate([0.9, 0.8, 0.7], [0.9, 0.8, 0.7], n_items=300, n_features=3, rng=0)
    >>> Y = ann.to_frame().pivot(index="item", columns="annotator", values="label")
    >>> X = pd.DataFrame(ann.features, index=Y.index)
    >>> scorer = gold_scorer(ann.gold_series())
    >>> cross_val_score(CrowdClassifier(family="two_coin"), X, Y, scoring=scorer,
    ...                 cv=KFold(3, shuffle=True, random_state=0))
    """
    if not (callable(metric) or metric in (*_METRICS, "neg_log_loss")):
        raise ValueError(f"metric={metric!r} is not one of "
                         f"{listing([*_METRICS, 'neg_log_loss'])} or a callable "
                         f"metric(gold, predicted).")
    gold = gold.copy() if isinstance(gold, pd.Series) else pd.Series(
        np.asarray(gold, dtype=object))

    def scorer(estimator, X, Y=None):
        if not isinstance(X, pd.DataFrame):
            raise TypeError(f"gold_scorer finds each item's gold label by the index of X, a "
                            f"DataFrame; got {type(X).__name__}. Pass X as a DataFrame "
                            f"(pandas.DataFrame(X) numbers its rows 0..n-1, as an array "
                            f"gold is).")
        unknown = X.index.difference(gold.index)
        if len(unknown):
            raise ValueError(f"gold has no entry for {len(unknown)} item(s) of X "
                             f"({listing(unknown.tolist())}); index gold by X's index.")
        truth = gold.loc[X.index]
        known = truth.notna().to_numpy()
        if not known.any():
            raise ValueError("none of these items has a gold label to score against.")
        X, truth = X.loc[known], truth.loc[known].infer_objects().to_numpy()
        if metric == "neg_log_loss":
            return -log_loss(truth, estimator.predict_proba(X), labels=estimator.classes_)
        score = _METRICS.get(metric, metric)
        return float(score(truth, estimator.predict(X)))

    return scorer


def crowd_log_likelihood(estimator, X, Y) -> float:
    """A gold-free scorer: how well a fitted :class:`CrowdClassifier` (or
    :class:`CrowdRegressor`) predicts the crowd labels of items it was not
    trained on.

    For each item of ``X``, the probability of its labels in ``Y`` under the
    estimator's annotators (their confusion matrices, or sensitivity and
    specificity, from ``fit``) and its classifier's class probabilities from
    the item's features: ``log sum_z P(z | x) prod_j P(label_j | z)``, the
    held-out crowd likelihood. For a regressor, the density of the item's
    labels with its true value integrated out: jointly Gaussian about the
    regression's prediction, through each annotator's bias, scale and noise
    (``continuous.item_log_marginal``). Summed over the items and divided by
    the number of labels scored: nats per label, greater is better. As
    ``scoring=`` in ``GridSearchCV`` or ``cross_val_score`` it chooses a
    classifier's regularisation (``coef_precision``, or a black-box
    classifier's own parameter such as ``classifier__alpha``, with the
    estimator's ``regularization=None`` so that the grid's values stand) without
    gold.

    Parameters
    ----------
    estimator : CrowdClassifier or CrowdRegressor
        Fitted.
    X : array-like or DataFrame (n_samples, n_features)
        The held-out items' features.
    Y : array-like or DataFrame (n_samples, n_annotators)
        Their crowd labels, the same columns (annotators) as the ``Y`` given to
        ``fit``. Labels by an annotator the fit did not see are left out (their
        quality is unknown); an item with none of its labels left is scored
        by nothing.

    Returns
    -------
    float

    Examples
    --------
    >>> from sklearn.model_selection import GridSearchCV, KFold
    >>> from crowd_models.models import two_coin
    >>> from crowd_models.sklearn import CrowdClassifier, crowd_log_likelihood
    >>> ann = two_coin.simulate([0.9, 0.8, 0.7], [0.9, 0.8, 0.7], n_items=300, n_features=3, rng=0)
    >>> Y = ann.to_frame().pivot(index="item", columns="annotator", values="label")
    >>> search = GridSearchCV(CrowdClassifier(family="two_coin"),
    ...                       {"coef_precision": [0.1, 1.0, 10.0]}, scoring=crowd_log_likelihood,
    ...                       cv=KFold(5, shuffle=True, random_state=0))
    >>> search.fit(ann.features, Y).best_params_
    """
    check_is_fitted(estimator, "fit_")
    if estimator.fit_.attrs.get("family") == "continuous":
        return _continuous_log_likelihood(estimator, X, Y)
    record = _registry.find(estimator.fit_.attrs.get("family"),
                            estimator.fit_.attrs.get("variant", ""))
    if record is not None and record.likelihood_kind == "composite":
        raise ValueError(f"crowd_log_likelihood needs a distribution of the labels, and the "
                         f"{record.title} model has none (its likelihood is a composite of "
                         f"binary problems): score it against gold with gold_scorer; its "
                         f"regularization='auto' chooses the classifier's parameter without "
                         f"gold.")
    log_prior = np.log(np.maximum(estimator.predict_proba(X), _PROB_FLOOR))
    matrix, annotator = _fitted_annotators(
        class_labels(label_matrix(Y, len(log_prior), "crowd_log_likelihood")), estimator.fit_)
    labels, rows, columns = label_cells(matrix)
    codes = pd.Index(estimator.classes_).get_indexer(pd.Index(labels))
    if np.any(codes < 0):
        new = pd.unique(labels[codes < 0])
        raise ValueError(f"Y holds label(s) {listing(new.tolist())} that the estimator was not "
                         f"fitted on (classes_ {listing(estimator.classes_.tolist())}); it "
                         f"cannot score them.")
    # (label, true class, label class) from the fit's annotators: the PPC's reader
    probs = label_probabilities(draw_values(estimator.fit_, 0), log_prior.shape[1], rows,
                                annotator[columns])
    joint = log_prior.copy()
    np.add.at(joint, rows, np.log(np.maximum(probs[np.arange(len(codes)), :, codes],
                                             _PROB_FLOOR)))
    scored = np.bincount(rows, minlength=len(joint)) > 0
    return float(logsumexp(joint[scored], axis=1).sum() / len(labels))


_PROB_FLOOR = 1e-300
"""Class probabilities below this count as it in :func:`crowd_log_likelihood`'s logs."""


def _fitted_annotators(matrix: pd.DataFrame, fit) -> tuple[pd.DataFrame, np.ndarray]:
    """The columns of ``matrix`` that are annotators of ``fit`` (the others' quality
    is unknown) and their positions among the fit's; a ValueError when there is none."""
    known = pd.Index(fit.coords["annotator"].values)
    seen = known.get_indexer(matrix.columns) >= 0
    if not seen.any():
        raise ValueError(f"none of Y's annotators ({listing(matrix.columns.tolist())}) is one "
                         f"the estimator was fitted on ({listing(known.tolist())}); give Y the "
                         f"columns (annotators) of the Y it was fitted on.")
    return matrix.loc[:, seen], known.get_indexer(matrix.columns[seen])


def _continuous_log_likelihood(estimator, X, Y) -> float:
    """:func:`crowd_log_likelihood` of a :class:`CrowdRegressor`: each held-out item's
    labels jointly Gaussian once its true value is integrated out
    (``continuous.item_log_marginal``), the features on the fit's scale."""
    from crowd_models.models import continuous
    from crowd_models.models._common import scaled_features

    fit = estimator.fit_
    features = scaled_features(fit, validate_data(estimator, X, reset=False, dtype=float))
    matrix, _ = _fitted_annotators(numeric_labels(label_matrix(Y, len(features),
                                                               "crowd_log_likelihood")), fit)
    labelled = matrix.notna().to_numpy().any(axis=1)
    matrix, features = matrix.loc[labelled], features[labelled]
    held = Annotations.from_wide(matrix, features=features, continuous=True)
    width = features.shape[1]
    held = replace(held, feature_center=np.zeros(width), feature_scale=np.ones(width))

    def value(name):
        variable = fit[name]
        if "annotator" in variable.dims:
            variable = variable.sel(annotator=list(held.annotators))
        return variable.values[0, 0]

    optional = {name: value(name) for name in ("bias", "scale") if name in fit}
    per_item = continuous.item_log_marginal(
        held, value("precision"), float(value("truth_precision")), float(value("intercept")),
        coef=value("coef"), **optional)
    return float(per_item.sum() / held.n_labels().sum())


# documented, tested and imported as crowd_models.sklearn's
gold_scorer.__module__ = crowd_log_likelihood.__module__ = "crowd_models.sklearn"
