"""A black-box classifier's regularisation chosen from the crowd, without gold.

The EM of a family with ``classifier=`` (Raykar et al. sec. 6.3) fits any
scikit-learn classifier to soft labels, and that classifier's own
regularisation (a logistic regression's ``C``, an MLP's ``alpha``, a tree's
depth) decides how well it predicts new items. :func:`tune` picks it before
the EM runs: the crowd's labels alone give every item a posterior over its
class q (the family's annotators, no features), and for each value of a grid
a clone of the classifier is fitted to those soft labels on all items but a
fold and predicts the fold, p. The value with the smallest expected Brier
score, the mean over the items of ``sum_c (q_c - p_c)^2`` (the Brier score
against a truth drawn from q, less a term that does not depend on p), is set
on the classifier.

Which parameter, and over which grid, is :data:`GRIDS`' entry for the
classifier's class (a ``Pipeline``'s last step), taken only while that
parameter holds the class's default: a value the caller set is kept. Where the
grid's strongest value scores best, the search goes on past it (the entry's
further values) while the strongest value tried stays the best.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np

from crowd_models._text import listing
from crowd_models.models import _common as C

GRIDS = {
    "LogisticRegression": ("C", (1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0), (1e-4, 1e-5)),
    "MLPClassifier": ("alpha", (10.0, 1.0, 0.1, 1e-2, 1e-3, 1e-4), (100.0, 1000.0)),
    "SVC": ("C", (1e-2, 0.1, 1.0, 10.0, 100.0), (1e-3, 1e-4)),
    "DecisionTreeClassifier": ("max_depth", (2, 3, 5, 8, 12, None), (1,)),
    "RandomForestClassifier": ("min_samples_leaf", (50, 20, 10, 5, 2, 1), (100, 200)),
    "ExtraTreesClassifier": ("min_samples_leaf", (50, 20, 10, 5, 2, 1), (100, 200)),
    "HistGradientBoostingClassifier": ("l2_regularization", (100.0, 10.0, 1.0, 0.1, 0.0),
                                       (1000.0, 1e4)),
}
"""Class name -> (its regularisation parameter, the grid searched, further
values), each grid from the strongest regularisation to the weakest (a tie goes
to the stronger): one value per decade for the penalties, depths and leaf sizes
spread over the range that matters for a few hundred to a few thousand items.
The further values, stronger still and in that order, are tried one at a time
while the strongest value tried so far scores best (a best value at the
grid's strong end says the search stopped too soon; its weak end is close to
no regularisation already)."""

FOLDS = 5
"""The folds of :func:`tune`'s cross-fitting (items shuffled with seed 0)."""

LABEL_MAX_ITER = 1000
LABEL_TOL = 1e-8
"""The labels-only EM (cheap, unlike the classifier's) runs to at least this
tolerance on the labels' log-likelihood and up to at least this many steps,
whatever the classifier EM's ``tol`` and ``max_iter``."""

MIN_ITEMS = 20
"""Fewer items than this leave the classifier as given (a fold would hold
too few to score)."""


def tune(annotations, classifier, regularization, start, *, rates, log_confusion, tol,
         max_iter):
    """Choose ``classifier``'s regularisation and set it in place.

    Parameters
    ----------
    annotations : Annotations
        With features (as the EM gives them to the classifier).
    classifier : scikit-learn classifier (or Pipeline)
    regularization : "auto", None, or {parameter: values}
        "auto": the :data:`GRIDS` entry of the classifier's class, if it has one
        and its parameter holds the class's default; None: as given; a dict of
        one parameter (as ``set_params`` names it) and the values to try.
    start : ndarray (item, class)
        Soft labels to start the labels-only EM from (majority vote).
    rates, log_confusion, tol, max_iter
        The family's annotator M-step and log confusion, and the stopping rule,
        as :func:`crowd_models.models._common.classifier_em` takes them.

    Returns
    -------
    dict
        Attributes for the fit: ``classifier_tuning`` (what was done, in words)
        and, where a grid was searched, ``classifier_parameter``,
        ``classifier_grid`` (the values tried, strongest first: the grid, with
        the further values that were reached in front of it) and
        ``classifier_brier`` (each value's held-out expected Brier score per
        item; the smallest is chosen).
    """
    name, grid, further, reason = _search_plan(classifier, regularization)
    if grid is None:
        return {"classifier_tuning": reason}
    if annotations.n_items < MIN_ITEMS:
        return {"classifier_tuning": f"as given: {annotations.n_items} items, fewer than "
                                     f"{MIN_ITEMS} to choose {name} by held-out folds"}
    soft = label_posterior(annotations, start, rates, log_confusion, tol=min(tol, LABEL_TOL),
                           max_iter=max(max_iter, LABEL_MAX_ITER))
    grid, brier = list(grid), list(_held_out_brier(annotations, classifier, name, grid, soft))
    for value in further:
        if int(np.argmin(brier)) != 0:
            break
        grid.insert(0, value)
        brier.insert(0, _held_out_brier(annotations, classifier, name, [value], soft)[0])
    best = int(np.argmin(brier))
    classifier.set_params(**{name: grid[best]})
    return {"classifier_tuning": f"{name}={grid[best]!r} chosen by the held-out expected "
                                 f"Brier score ({FOLDS} folds)",
            "classifier_parameter": name,
            "classifier_grid": ", ".join(repr(v) for v in grid),
            "classifier_brier": np.asarray(brier, dtype=float)}


def require_classifier(classifier, regularization) -> None:
    """A ValueError when ``regularization`` is set without a ``classifier`` to apply to."""
    if classifier is None and not _is_auto(regularization):
        raise ValueError(f"regularization={regularization!r} applies to a classifier= (its "
                         f"own regularisation parameter); the built-in classifier's "
                         f"regularisation is coef_precision. Give classifier=, or leave "
                         f"regularization='auto'.")


def _search_plan(classifier, regularization):
    """(parameter, grid, further values, reason): the grid to search and the
    values past its strong end (none for a caller's grid), or grid None with the
    reason the classifier stays as given."""
    if regularization is None:
        return None, None, (), "as given (regularization=None)"
    if isinstance(regularization, dict):
        if len(regularization) != 1:
            raise ValueError(
                f"regularization= takes one parameter and its values, e.g. {{'alpha': [0.01, "
                f"0.1, 1.0]}}; got {len(regularization)} ({listing(regularization)}). "
                f"Search several at once with GridSearchCV and crowd_log_likelihood.")
        (name, values), = regularization.items()
        if name not in classifier.get_params():
            raise ValueError(f"regularization names {name!r}, which is not a parameter of "
                             f"{type(classifier).__name__} (set_params names: "
                             f"{listing(sorted(classifier.get_params()))}).")
        values = tuple(values)
        if not values:
            raise ValueError(f"regularization={{{name!r}: []}} gives no value to try.")
        return name, values, (), ""
    if not _is_auto(regularization):
        raise ValueError(f"regularization must be 'auto', None or {{parameter: values}}, "
                         f"got {regularization!r}.")
    last = C.last_step(classifier)
    prefix, estimator = ("", classifier) if last is None else (f"{last[0]}__", last[1])
    kind = type(estimator).__name__
    if kind not in GRIDS:
        return None, None, (), (f"as given: {kind} has no known regularisation parameter "
                            f"(regularization={{parameter: values}} searches one)")
    name, grid, further = GRIDS[kind]
    signature = inspect.signature(type(estimator).__init__).parameters
    default = signature[name].default if name in signature else inspect.Parameter.empty
    current = estimator.get_params()[name]
    if default is inspect.Parameter.empty or not _same(current, default):
        return None, None, (), f"as given: {name}={current!r} set by the caller"
    return prefix + name, grid, further, ""


def _is_auto(value) -> bool:
    """Whether ``regularization`` is "auto" (any other value, arrays included, is not)."""
    return isinstance(value, str) and value == "auto"


def _same(a, b) -> bool:
    """Whether two parameter values are the same (None, numbers, strings)."""
    if a is None or b is None:
        return a is b
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def _held_out_brier(annotations, classifier, name, grid, soft):
    """Per grid value: the mean over the items of ``sum_c (soft - p)^2``."""
    p = held_out_predictions(annotations, classifier, name, grid, soft)
    return np.sum((soft - p) ** 2, axis=(1, 2)) / annotations.n_items


def held_out_predictions(annotations, classifier, name, grid, soft):
    """(value, item, class): each item's class probabilities from a clone of
    ``classifier`` at each grid value, fitted to the soft labels of the items
    outside the item's fold (:data:`FOLDS` folds, items shuffled with seed 0)."""
    from sklearn.base import clone
    from sklearn.exceptions import ConvergenceWarning

    X = annotations.features
    K = soft.shape[1]
    fold = np.random.default_rng(0).permutation(annotations.n_items) % FOLDS
    out = np.zeros((len(grid), annotations.n_items, K))
    for k in range(FOLDS):
        train, held = fold != k, fold == k
        rows = np.tile(X[train], (K, 1))
        targets = np.repeat(np.arange(K), int(train.sum()))
        weight = soft[train].T.ravel()
        for g, value in enumerate(grid):
            model = clone(classifier).set_params(**{name: value})
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                C.fit_weighted(model, rows, targets, weight)
            out[g, held] = np.exp(C.classifier_log_prior(model, X[held], K))
    return out


def label_posterior(annotations, prob, rates, log_confusion, *, tol, max_iter):
    """The family's EM on the labels alone (class shares by their mean, no
    features), from ``prob``: the items' posterior (item, class)."""
    plain = annotations.with_features(None)
    previous = -np.inf
    for _ in range(max_iter):
        joint = C.item_joint_np(log_confusion(rates(plain, prob)), annotations)
        share = np.log(np.maximum(prob.mean(axis=0), C.PROB_FLOOR))
        prob, item_ll = C.posterior_from_joint(joint + share, overwrite=True)
        loglik = float(item_ll.sum())
        if abs(loglik - previous) < tol:
            break
        previous = loglik
    return prob
