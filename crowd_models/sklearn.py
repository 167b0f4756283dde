"""A scikit-learn face: a classifier and a regressor learned from many noisy annotators.

:class:`CrowdClassifier` is a scikit-learn estimator. Its ``fit(X, Y)`` takes
the items' features ``X`` and the items x annotators label matrix ``Y`` (a
missing entry, NaN, None or ``pandas.NA``, where an annotator did not label
the item), and fits the truth, the annotators' quality and a classifier of the
truth from the features together: Raykar et al. (2009), with the two-coin,
the Dawid-Skene or the cumulative ordinal family's EM. The classifier is the
family's own logistic (softmax) regression, or any scikit-learn classifier
trained on the soft labels (``classifier=``, sec. 6.3; ordinal: one per
threshold). It predicts new items from their features
alone, and it clones, pickles and sits at the end of a ``Pipeline``.

:class:`CrowdRegressor` is its counterpart for continuous labels: ``fit(X, Y)``
with the items x annotators matrix of numbers fits the continuous family's EM
(each annotator's label is a bias plus a scale times the true value plus
Gaussian noise; the true value a linear regression on the features), and
``predict`` gives new items' true values (``return_std=True``: with their sd).

A held-out fold's ``Y`` is crowd labels too, so the estimator's ``score``
measures agreement with them (the regressor's: R^2 against every present
label); :func:`gold_scorer` scores a classifier against gold labels instead, in
``cross_val_score`` or a grid search, and :func:`crowd_log_likelihood` scores it
without gold, by how probable it makes the held-out items' crowd labels (a
grid search then chooses a classifier's regularisation from the crowd alone).

This module needs scikit-learn (the ``dev`` or ``case-studies`` extra);
``import crowd_models`` does not load it.
"""

from __future__ import annotations

from importlib import import_module

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone
from sklearn.metrics import r2_score
from sklearn.utils.validation import check_is_fitted, validate_data

from crowd_models._crowd_matrix import class_labels, label_matrix, numeric_labels, present_labels
from crowd_models._scorers import crowd_log_likelihood, gold_scorer
from crowd_models._text import listing
from crowd_models.data import Annotations
from crowd_models.models import _registry

__all__ = ["CrowdClassifier", "CrowdRegressor", "crowd_log_likelihood", "gold_scorer"]

FAMILIES = ("dawid_skene", "two_coin", "ordinal")
"""The families :class:`CrowdClassifier` fits (the categorical ones with a
classifier of the features and an EM)."""

_PRIORS = ("coef_precision", "intercept_precision", "confusion_prior", "accuracy_prior",
           "sensitivity_prior", "specificity_prior")
"""The prior keywords :class:`CrowdClassifier` passes on (each family takes some)."""

CLASSIFIER_TOL = 1e-6
"""The EM's ``tol`` (on the labels' log-likelihood) when a black-box
``classifier`` is given and ``tol`` is left None: each step refits the
classifier, so a looser rule than the family's default."""

CLASSIFIER_MAX_ITER = 100
"""The EM's ``max_iter`` when a black-box ``classifier`` is given and
``max_iter`` is left None (a tree refitted to soft labels can cycle and never
meet ``tol``: the fit then warns)."""


class CrowdClassifier(ClassifierMixin, BaseEstimator):
    """A classifier learned from many noisy annotators, with their quality.

    Parameters
    ----------
    family : {"dawid_skene", "two_coin", "ordinal"}, default "dawid_skene"
        The annotator model: a confusion matrix per annotator (any number of
        classes); a sensitivity and specificity per annotator (two classes,
        the second the positive one); or, for ordered levels (integer labels,
        e.g. 1..5), the cumulative ordinal model, a sensitivity and
        specificity per annotator and threshold "level > c", with one binary
        classifier per threshold (Raykar et al. sec. 8.2).
    classifier : scikit-learn classifier or None, default None
        None: the family's logistic (softmax) regression with its Gaussian prior
        (``coef_precision``) on the features standardised over the training
        items, the same standardisation applied to new items by ``predict``.
        Otherwise an estimator with ``fit(X, y, sample_weight=)`` and
        ``predict_proba``, cloned and trained on the soft labels at each EM
        step, which gets the features as given (put a ``StandardScaler`` before
        this estimator in a ``Pipeline`` where it needs them scaled, or give a
        ``Pipeline`` here: the weights go to its last step). The ordinal
        family trains one clone per threshold on "level > c".
    regularization : "auto", None or {parameter: values}, default "auto"
        With a ``classifier``: "auto" chooses its own regularisation parameter
        (a logistic regression's ``C``, an MLP's ``alpha``, a tree's
        ``max_depth``, ...) without gold when it holds the class's default: the
        value whose clones, fitted to the labels-only soft labels on four
        fifths of the items, predict the other fifth's best (the family's
        ``em``; ``fit_.attrs["classifier_tuning"]`` says what it chose,
        ``classifier_`` holds it); None keeps it as given; a
        dict of one parameter, named as ``set_params`` names it, searches
        those values. Without a ``classifier`` leave it "auto"
        (``coef_precision`` is the built-in classifier's). A grid search of
        your own over the classifier's parameter (``classifier__alpha``)
        wants ``regularization=None``: "auto" cannot tell the default value
        set by the search from one left alone, and would choose again.
    variant : str or None, default None
        The family's variant; None takes its default. Dawid-Skene: "full" (the
        default), "one_coin" (and "pooled" without a ``classifier``); ordinal:
        "cumulative" (the variant with an EM); two-coin has none.
    coef_precision, intercept_precision, confusion_prior, accuracy_prior, sensitivity_prior, \
specificity_prior : optional
        The family's prior keywords (see its ``build_model``); None takes the
        family's default. A prior the family does not take must stay None.
        There is no ``prevalence_prior``: the classifier of ``X`` gives the
        classes' shares.
    tol, max_iter : optional
        The EM's stopping rule; None takes the family's default (with a
        ``classifier``: :data:`CLASSIFIER_TOL` on the labels' log-likelihood
        and :data:`CLASSIFIER_MAX_ITER`).

    Attributes
    ----------
    classes_ : ndarray
        The class labels, in the order of ``predict_proba``'s columns.
    n_features_in_ : int
        Number of features seen in ``fit``.
    feature_names_in_ : ndarray
        The features' names, when ``X`` was a DataFrame with text column names.
    truth_proba_ : ndarray (n_samples, n_classes)
        Posterior probabilities of the training items' true classes.
    annotators_ : pandas.DataFrame
        Each annotator's quality with its 90% interval
        (``crowd_models.report.annotator_summary`` of ``fit_``), indexed by the
        columns of ``Y`` (annotators without a label in ``Y`` are left out).
    fit_ : xarray.Dataset
        The family's EM fit (``crowd_models.predict`` and the report read it).
    n_iter_ : int
        The EM steps run.
    classifier_ : scikit-learn classifier, list of them, or None
        The fitted clone of ``classifier`` (ordinal: a list, one per
        threshold, in threshold order).

    Notes
    -----
    A 1-D ``y`` is read as one annotator's labels. One annotator cannot
    identify its own quality (the fit warns and echoes the priors), but that
    makes the estimator usable wherever scikit-learn expects a plain target;
    its ``check_estimator`` passes (the test lists the checks that cannot
    apply, and why). ``score(X, Y)`` is the share of the given labels that
    the predictions agree with (the accuracy for a 1-D ``y``); score against
    gold with :func:`gold_scorer`, and choose a prior or a ``classifier``'s
    parameter without gold with :func:`crowd_log_likelihood` as the scorer of
    a grid search. For ``cross_val_score`` pass a splitter
    (``cv=KFold(5, shuffle=True)``): scikit-learn cannot stratify a label
    matrix with missing entries.

    Examples
    --------
    >>> import numpy as np
    >>> from crowd_models.models import two_coin
    >>> from crowd_models.sklearn import CrowdClassifier
    >>> ann = two_coin.simulate([0.9, 0.8, 0.7], [0.9, 0.8, 0.7], n_items=300, n_features=3, rng=0)
    >>> Y = ann.to_frame().pivot(index="item", columns="annotator", values="label")
    >>> model = CrowdClassifier(family="two_coin").fit(ann.features, Y)
    >>> model.predict_proba(np.zeros((2, 3)))
    """

    def __init__(self, family="dawid_skene", classifier=None, *, regularization="auto",
                 variant=None,
                 coef_precision=None, intercept_precision=None, confusion_prior=None,
                 accuracy_prior=None, sensitivity_prior=None, specificity_prior=None, tol=None,
                 max_iter=None):
        self.family = family
        self.classifier = classifier
        self.regularization = regularization
        self.variant = variant
        self.coef_precision = coef_precision
        self.intercept_precision = intercept_precision
        self.confusion_prior = confusion_prior
        self.accuracy_prior = accuracy_prior
        self.sensitivity_prior = sensitivity_prior
        self.specificity_prior = specificity_prior
        self.tol = tol
        self.max_iter = max_iter

    def __sklearn_tags__(self):
        """Two-coin fits take two classes only (scikit-learn's checks read this)."""
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = self.family != "two_coin"
        return tags

    def fit(self, X, Y):
        """Fit the truth, the annotators and the classifier to crowd labels.

        Parameters
        ----------
        X : array-like or DataFrame (n_samples, n_features)
            The items' features.
        Y : array-like or DataFrame (n_samples, n_annotators), or (n_samples,)
            Row i holds item i's labels, one column per annotator (its column
            name is the annotator's id); NaN, None or ``pandas.NA`` where that
            annotator gave none. Every item needs at least one label. A 1-D
            ``y`` is one annotator's labels.

        Returns
        -------
        CrowdClassifier
            The fitted estimator.

        Examples
        --------
        >>> from crowd_models.models import dawid_skene
        >>> from crowd_models.sklearn import CrowdClassifier
        >>> conf = [[[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]]] * 4
        >>> ann = dawid_skene.simulate(conf, n_items=200, n_features=2, rng=0)
        >>> Y = ann.to_frame().pivot(index="item", columns="annotator", values="label")
        >>> CrowdClassifier().fit(ann.features, Y).annotators_.head()
        """
        module, options = self._em_options()
        X = validate_data(self, X, reset=True, dtype=float)
        matrix = class_labels(label_matrix(Y, len(X), "CrowdClassifier"))
        annotations = Annotations.from_wide(matrix, features=X)
        if annotations.n_classes < 2:
            raise ValueError(f"Y holds one class, {listing(annotations.classes)}; a classifier "
                             f"needs labels of at least two classes.")
        if self.family == "two_coin" and annotations.n_classes != 2:
            raise ValueError(f"Only binary classification is supported by family='two_coin'; "
                             f"Y holds {annotations.n_classes} classes "
                             f"{listing(annotations.classes)}: use family='dawid_skene'.")
        if self.classifier is not None and self.family == "ordinal":
            options["classifier"] = [clone(self.classifier)
                                     for _ in range(annotations.n_classes - 1)]
        elif self.classifier is not None:
            options["classifier"] = clone(self.classifier)
        options["regularization"] = self.regularization
        self.fit_ = module.em(annotations, **options)
        self.classifier_ = options.get("classifier")
        self.classes_ = np.asarray(annotations.classes)
        self.truth_proba_ = self.fit_["item_class_prob"].values[0, 0]
        self.n_iter_ = int(self.fit_.attrs["n_iter"])
        from crowd_models.report import annotator_summary

        self.annotators_ = annotator_summary(self.fit_)
        return self

    def predict_proba(self, X):
        """Class probabilities of new items from their features.

        Parameters
        ----------
        X : array-like or DataFrame (n_samples, n_features)
            The new items' features, as in ``fit``.

        Returns
        -------
        ndarray (n_samples, n_classes)
            The columns in the order of ``classes_``.

        Examples
        --------
        >>> import numpy as np
        >>> from crowd_models.models import two_coin
        >>> from crowd_models.sklearn import CrowdClassifier
        >>> ann = two_coin.simulate([0.9, 0.8, 0.7], [0.9, 0.8, 0.7], n_items=300,
        ...                         n_features=3, rng=0)
        >>> Y = ann.to_frame().pivot(index="item", columns="annotator", values="label")
        >>> CrowdClassifier(family="two_coin").fit(ann.features, Y).predict_proba(np.ones((1, 3)))
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=float)
        if self.classifier_ is None:
            from crowd_models.prediction import predict

            return predict(self.fit_, X)["prob"].values
        if self.family == "ordinal":
            from crowd_models.models.ordinal import classifiers_predict

            return classifiers_predict(self.classifier_, X)
        proba = np.asarray(self.classifier_.predict_proba(X), dtype=float)
        out = np.zeros((len(X), len(self.classes_)))
        out[:, np.asarray(self.classifier_.classes_, dtype=int)] = proba  # fitted on codes
        return out

    def predict(self, X):
        """The most probable class of each new item.

        Parameters
        ----------
        X : array-like or DataFrame (n_samples, n_features)
            The new items' features, as in ``fit``.

        Returns
        -------
        ndarray (n_samples,)
            Labels from ``classes_``.

        Examples
        --------
        >>> import numpy as np
        >>> from crowd_models.models import two_coin
        >>> from crowd_models.sklearn import CrowdClassifier
        >>> ann = two_coin.simulate([0.9, 0.8, 0.7], [0.9, 0.8, 0.7], n_items=300,
        ...                         n_features=3, rng=0)
        >>> Y = ann.to_frame().pivot(index="item", columns="annotator", values="label")
        >>> CrowdClassifier(family="two_coin").fit(ann.features, Y).predict(np.ones((1, 3)))
        """
        check_is_fitted(self)
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]

    def score(self, X, y, sample_weight=None):
        """The share of the given labels that the predictions agree with.

        Parameters
        ----------
        X : array-like or DataFrame (n_samples, n_features)
            The items' features.
        y : array-like or DataFrame (n_samples, n_annotators), or (n_samples,)
            Crowd labels, a matrix as ``Y`` in ``fit`` (a 1-D ``y``: plain
            accuracy).
        sample_weight : array-like (n_samples,), optional
            Weights of the items.

        Returns
        -------
        float
            Every present label counts once (times its item's weight). To score
            against gold use :func:`gold_scorer`.

        Examples
        --------
        >>> from crowd_models.models import two_coin
        >>> from crowd_models.sklearn import CrowdClassifier
        >>> ann = two_coin.simulate([0.9, 0.8, 0.7], [0.9, 0.8, 0.7], n_items=300,
        ...                         n_features=3, rng=0)
        >>> Y = ann.to_frame().pivot(index="item", columns="annotator", values="label")
        >>> CrowdClassifier(family="two_coin").fit(ann.features, Y).score(ann.features, Y)
        """
        predicted = self.predict(X)
        matrix = class_labels(label_matrix(y, len(predicted), "CrowdClassifier"))
        labels, rows, weight = present_labels(matrix, sample_weight)
        return float(np.sum(weight * (labels == predicted[rows])) / np.sum(weight))

    def _em_options(self):
        """The family's module and the keywords of its em, checked."""
        if self.family not in FAMILIES:
            raise ValueError(f"family={self.family!r} is not one of {listing(FAMILIES)}.")
        module = import_module(f"crowd_models.models.{self.family}")
        takes = _registry.default_priors(self.family)
        options = {}
        for name in _PRIORS:
            value = getattr(self, name)
            if value is None:
                continue
            if name not in takes:
                raise ValueError(
                    f"{name}={value!r} is not a prior of family={self.family!r}, which takes "
                    f"{listing(n for n in _PRIORS if n in takes)}; leave {name}=None.")
            options[name] = value
        if self.family == "ordinal" and self.variant not in (None, "cumulative"):
            raise ValueError(f"variant={self.variant!r}: family='ordinal' fits the cumulative "
                             f"variant, the one with an EM; leave variant=None (fit the latent "
                             f"variant with cm.fit_map(ordinal.build_model(..., "
                             f"variant='latent')) outside this estimator).")
        if self.family == "two_coin" and self.variant is not None:
            raise ValueError(f"variant={self.variant!r}: family='two_coin' has no variants "
                             f"(leave variant=None).")
        if self.variant is not None:
            options["variant"] = self.variant
        black_box = self.classifier is not None
        tol = CLASSIFIER_TOL if black_box and self.tol is None else self.tol
        max_iter = CLASSIFIER_MAX_ITER if black_box and self.max_iter is None else self.max_iter
        options.update({k: v for k, v in (("tol", tol), ("max_iter", max_iter)) if v is not None})
        return module, options


_CONTINUOUS_KEYWORDS = ("precision_prior", "truth_precision_prior", "bias_sd", "scale_sd",
                        "coef_precision", "intercept_precision", "label_scale", "tol",
                        "max_iter")
"""The keywords :class:`CrowdRegressor` passes on to ``continuous.em`` when not None."""


class CrowdRegressor(RegressorMixin, BaseEstimator):
    """A regression learned from many noisy annotators' continuous labels.

    Annotator j reports item i's true value ``y_i`` as ``bias_j + scale_j *
    y_i`` plus Gaussian noise of precision ``precision_j``, and ``y_i`` follows
    a linear regression on the item's features (Raykar et al. 2009, sec. 8.3):
    the continuous family's EM fits the annotators, the truth and the
    regression together (:mod:`crowd_models.models.continuous`).

    Parameters
    ----------
    bias, scale : bool, default False
        A per-annotator additive bias (summing to zero) and multiplicative scale
        (averaging 1).
    noise : {"gaussian"}, default "gaussian"
        The annotators' noise. Only Gaussian noise has an EM; Student-t noise
        ("student_t") is fitted by ``cm.fit_map(continuous.build_model(...,
        noise="student_t"))`` outside this estimator.
    precision_prior, truth_precision_prior, bias_sd, scale_sd, coef_precision, \
intercept_precision, label_scale : optional
        ``continuous.em``'s prior keywords (in units of ``label_scale``, by
        default the labels' sd); None takes the family's default. ``bias_sd``
        needs ``bias=True`` and ``scale_sd`` needs ``scale=True``.
        ``coef_precision`` is the regression's prior precision, on the features
        standardised over the training items (``predict`` applies the same).
    tol, max_iter : optional
        The EM's stopping rule; None takes the family's default.

    Attributes
    ----------
    n_features_in_ : int
        Number of features seen in ``fit``.
    feature_names_in_ : ndarray
        The features' names, when ``X`` was a DataFrame with text column names.
    truth_, truth_sd_ : ndarray (n_samples,)
        Posterior mean and sd of the training items' true values.
    annotators_ : pandas.DataFrame
        Each annotator's precision (and bias, scale) with its 90% interval
        (``crowd_models.report.annotator_summary`` of ``fit_``), indexed by the
        columns of ``Y`` (annotators without a label in ``Y`` are left out).
    fit_ : xarray.Dataset
        The continuous family's EM fit.
    n_iter_ : int
        The EM steps run.

    Notes
    -----
    A 1-D ``y`` is read as one annotator's labels (the fit warns: one
    annotator's precision is not identified, it echoes the prior), so the
    estimator works wherever scikit-learn expects a plain target; its
    ``check_estimator`` passes but for the checks the test lists, with the
    reason. ``score(X, Y)`` is the coefficient of determination R^2 of the
    predictions against every present label of ``Y`` (each label counts once,
    weighted by its item's ``sample_weight``): for a 1-D ``y`` the ordinary
    R^2. A crowd's labels are noisy, so even the true regression scores below
    1; score against gold values with ``sklearn.metrics.r2_score``.

    Examples
    --------
    >>> import numpy as np
    >>> from crowd_models.models import continuous
    >>> from crowd_models.sklearn import CrowdRegressor
    >>> ann = continuous.simulate([4.0, 1.0, 0.25], n_items=200, n_features=2, rng=0)
    >>> Y = ann.to_frame().pivot(index="item", columns="annotator", values="label")
    >>> CrowdRegressor().fit(ann.features, Y).predict(np.zeros((2, 2)))
    """

    def __init__(self, *, bias=False, scale=False, noise="gaussian", precision_prior=None,
                 truth_precision_prior=None, bias_sd=None, scale_sd=None, coef_precision=None,
                 intercept_precision=None, label_scale=None, tol=None, max_iter=None):
        self.bias = bias
        self.scale = scale
        self.noise = noise
        self.precision_prior = precision_prior
        self.truth_precision_prior = truth_precision_prior
        self.bias_sd = bias_sd
        self.scale_sd = scale_sd
        self.coef_precision = coef_precision
        self.intercept_precision = intercept_precision
        self.label_scale = label_scale
        self.tol = tol
        self.max_iter = max_iter

    def fit(self, X, Y):
        """Fit the true values, the annotators and the regression to crowd labels.

        Parameters
        ----------
        X : array-like or DataFrame (n_samples, n_features)
            The items' features.
        Y : array-like or DataFrame (n_samples, n_annotators), or (n_samples,)
            Row i holds item i's numeric labels, one column per annotator (its
            column name is the annotator's id); NaN, None or ``pandas.NA`` where
            that annotator gave none. Every item needs at least one label. A
            1-D ``y`` is one annotator's labels.

        Returns
        -------
        CrowdRegressor
            The fitted estimator.

        Examples
        --------
        >>> from crowd_models.models import continuous
        >>> from crowd_models.sklearn import CrowdRegressor
        >>> ann = continuous.simulate([4.0, 1.0, 0.25], bias=[0.5, 0.0, -0.5], n_items=200,
        ...                           n_features=2, rng=0)
        >>> Y = ann.to_frame().pivot(index="item", columns="annotator", values="label")
        >>> CrowdRegressor(bias=True).fit(ann.features, Y).annotators_
        """
        from crowd_models.models import continuous  # PyMC loads with the family, not here

        options = self._em_options()
        X = validate_data(self, X, reset=True, dtype=float, ensure_min_samples=2)
        matrix = numeric_labels(label_matrix(Y, len(X), "CrowdRegressor"))
        self.fit_ = continuous.em(Annotations.from_wide(matrix, features=X, continuous=True),
                              **options)
        self.truth_ = self.fit_["true_value"].values[0, 0]
        self.truth_sd_ = self.fit_["true_value_sd"].values[0, 0]
        self.n_iter_ = int(self.fit_.attrs["n_iter"])
        from crowd_models.report import annotator_summary

        self.annotators_ = annotator_summary(self.fit_)
        return self

    def predict(self, X, return_std=False):
        """The predictive mean of new items' true values from their features.

        Parameters
        ----------
        X : array-like or DataFrame (n_samples, n_features)
            The new items' features, as in ``fit``.
        return_std : bool, default False
            Also return the predictive sd of each true value (the regression's
            residual sd, ``1 / sqrt(truth_precision)``, for an EM fit).

        Returns
        -------
        ndarray (n_samples,), or a tuple of two
            ``crowd_models.predict(fit_, X)``'s ``value`` (and ``value_sd``), in
            the labels' units.

        Examples
        --------
        >>> import numpy as np
        >>> from crowd_models.models import continuous
        >>> from crowd_models.sklearn import CrowdRegressor
        >>> ann = continuous.simulate([4.0, 1.0, 0.25], n_items=200, n_features=2, rng=0)
        >>> Y = ann.to_frame().pivot(index="item", columns="annotator", values="label")
        >>> mean, sd = CrowdRegressor().fit(ann.features, Y).predict(np.ones((1, 2)),
        ...                                                          return_std=True)
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=float)
        from crowd_models.prediction import predict

        out = predict(self.fit_, X)
        return (out["value"].values, out["value_sd"].values) if return_std else \
            out["value"].values

    def score(self, X, y, sample_weight=None):
        """R^2 of the predictions against every present label of ``y``.

        Parameters
        ----------
        X : array-like or DataFrame (n_samples, n_features)
            The items' features.
        y : array-like or DataFrame (n_samples, n_annotators), or (n_samples,)
            Crowd labels, a matrix as ``Y`` in ``fit`` (a 1-D ``y``: the
            ordinary R^2).
        sample_weight : array-like (n_samples,), optional
            Weights of the items.

        Returns
        -------
        float
            ``sklearn.metrics.r2_score`` over the present labels, each counted
            once (weighted by its item's weight).

        Examples
        --------
        >>> from crowd_models.models import continuous
        >>> from crowd_models.sklearn import CrowdRegressor
        >>> ann = continuous.simulate([4.0, 1.0, 0.25], n_items=200, n_features=2, rng=0)
        >>> Y = ann.to_frame().pivot(index="item", columns="annotator", values="label")
        >>> CrowdRegressor().fit(ann.features, Y).score(ann.features, Y)
        """
        predicted = self.predict(X)
        matrix = numeric_labels(label_matrix(y, len(predicted), "CrowdRegressor"))
        labels, rows, weight = present_labels(matrix, sample_weight)
        return float(r2_score(labels.astype(float), predicted[rows], sample_weight=weight))

    def _em_options(self):
        """The keywords of ``continuous.em``, checked."""
        from crowd_models.models import continuous

        for name in ("bias", "scale"):
            if not isinstance(getattr(self, name), bool | np.bool_):
                raise ValueError(f"{name}={getattr(self, name)!r} must be True or False.")
            if getattr(self, f"{name}_sd") is not None and not getattr(self, name):
                raise ValueError(f"{name}_sd={getattr(self, f'{name}_sd')!r} is the prior of "
                                 f"the annotators' {name}, which needs {name}=True: set "
                                 f"{name}=True or leave {name}_sd=None.")
        if self.noise != "gaussian":
            known = self.noise in continuous.NOISES
            raise ValueError(
                f"noise={self.noise!r} " + (
                    "has no EM, and CrowdRegressor fits by EM: use noise='gaussian', or fit "
                    "continuous.build_model(..., noise='student_t') with cm.fit_map and "
                    "predict with cm.predict." if known else
                    f"is not one of {listing(continuous.NOISES)}; CrowdRegressor takes "
                    f"noise='gaussian'."))
        options = {name: getattr(self, name) for name in _CONTINUOUS_KEYWORDS
                   if getattr(self, name) is not None}
        return {**options, "bias": bool(self.bias), "scale": bool(self.scale)}
