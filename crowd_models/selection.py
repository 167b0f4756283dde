"""Model selection without gold: the disagreement score, and LOO comparison
of NUTS fits whose likelihoods are comparable (:func:`compare`).

Izbicki and Stern (2013), "Learning with many experts: model selection and
sparsity". Without true labels the risk R = P(classifier != truth) of a
classifier cannot be estimated, but its disagreement with the annotators on
held-out items can:

    S_hat = 1/(n' d) sum_i sum_r 1[z_hat_i != Y_ir]

(over the held-out items i and their labels r; with an incomplete design,
the mean over the held-out labels). If annotator errors are independent of
the classifier's errors, with average error rate eps (< 1/2),

    E[S_hat] = (1 - 2 eps) R + eps,

an increasing function of R: ranking classifiers by S_hat ranks them by R.
It works for any classifier from any family (this family's EM, two-coin,
majority-vote logistic regression, ...): all it needs is hard predictions for
held-out items from their features.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from crowd_models import _dims as D
from crowd_models._text import warn
from crowd_models.data import Annotations
from crowd_models.models import _registry

__all__ = [
    "disagreement", "expected_disagreement", "split_items", "kfold_items",
    "cv_disagreement", "select_penalty", "PenaltySelection", "compare",
]


def _check(annotations, what="annotations"):
    if not isinstance(annotations, Annotations):
        raise TypeError(f"{what} must be an Annotations object, got {type(annotations).__name__}.")
    if annotations.continuous:
        raise ValueError("the disagreement score needs categorical labels; these are continuous.")


def _hard(prediction, annotations) -> np.ndarray:
    """Class codes per item from codes, (item, class) probabilities, or, for two
    classes, P(second class) per item."""
    if isinstance(prediction, xr.DataArray):
        if "chain" in prediction.dims:
            prediction = prediction.mean(("chain", "draw"))
        prediction = prediction.values
    pred = np.asarray(prediction)
    n, k = annotations.n_items, annotations.n_classes
    if pred.ndim == 2:
        if pred.shape != (n, k):
            raise ValueError(f"(item, class) predictions must have shape ({n}, {k}), got "
                             f"{pred.shape}.")
        return pred.argmax(axis=1)
    if pred.ndim != 1 or len(pred) != n:
        raise ValueError(f"predictions must be one per held-out item ({n}), in the item order "
                         f"of the held-out annotations; got shape {pred.shape}.")
    if pred.dtype.kind == "f" and not np.all(np.mod(pred, 1) == 0):
        if k != 2:
            raise ValueError("float predictions are read as P(second class): two classes only.")
        if np.any((pred < 0) | (pred > 1)):
            raise ValueError("probability predictions must lie in [0, 1].")
        return (pred > 0.5).astype(int)
    codes = pred.astype(int)
    if np.any((codes < 0) | (codes >= k)):
        raise ValueError(f"class-code predictions must lie in 0..{k - 1}.")
    return codes


def disagreement(prediction, annotations: Annotations) -> float:
    """S_hat: the fraction of the labels that disagree with the predicted class.

    ``prediction``: one entry per item of ``annotations`` (usually held-out
    items): class codes, (item, class) probabilities (e.g. ``item_class_prob``
    of a fit — but for model selection use a classifier's predictions from the
    features, which do not see the labels), or P(second class) for two classes.

    Examples
    --------
    >>> from crowd_models import selection
    >>> from crowd_models.models import feature_accuracy
    >>> ann = feature_accuracy.simulate(300, n_annotators=5, n_features=4, rng=0)
    >>> train, test = selection.split_items(ann, rng=0)
    >>> prob = feature_accuracy.predict(feature_accuracy.em(train), test.features)
    >>> selection.disagreement(prob > 0.5, test)
    """
    _check(annotations)
    z = _hard(prediction, annotations)
    return float(np.mean(z[annotations.item_idx] != annotations.labels))


def expected_disagreement(risk, error_rate):
    """(1 - 2 eps) R + eps: the disagreement expected from risk R when the
    annotators err with average rate eps independently of the classifier.

    Examples
    --------
    >>> from crowd_models import selection
    >>> selection.expected_disagreement(risk=0.1, error_rate=0.2)  # 0.6 * 0.1 + 0.2
    """
    risk = np.asarray(risk, dtype=float)
    eps = np.mean(error_rate)
    return (1 - 2 * eps) * risk + eps


def _by_items(annotations: Annotations, keep: np.ndarray) -> Annotations:
    return annotations.select(keep[annotations.item_idx])


def split_items(annotations: Annotations, test_fraction: float = 0.3, *, rng=None):
    """(train, test) Annotations with disjoint random items; every label of an
    item goes with it. Features and gold follow the items.

    Examples
    --------
    >>> from crowd_models import selection
    >>> train, test = selection.split_items(cm.datasets.load_rte(), test_fraction=0.3, rng=0)
    >>> train.n_items, test.n_items
    """
    _check(annotations)
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}.")
    rng = np.random.default_rng(rng)
    n = annotations.n_items
    n_test = int(round(test_fraction * n))
    if not 1 <= n_test < n:
        raise ValueError(f"test_fraction={test_fraction} leaves an empty side with {n} items.")
    test = np.zeros(n, dtype=bool)
    test[rng.permutation(n)[:n_test]] = True
    return _by_items(annotations, ~test), _by_items(annotations, test)


def kfold_items(annotations: Annotations, n_folds: int = 5, *, rng=None):
    """List of (train, held-out) Annotations over ``n_folds`` random item folds.

    Examples
    --------
    >>> from crowd_models import selection
    >>> folds = selection.kfold_items(cm.datasets.load_rte(), n_folds=5, rng=0)
    >>> [held_out.n_items for _, held_out in folds]
    """
    _check(annotations)
    n = annotations.n_items
    if not 2 <= int(n_folds) <= n:
        raise ValueError(f"n_folds must be between 2 and the number of items ({n}), got "
                         f"{n_folds!r}.")
    rng = np.random.default_rng(rng)
    fold = np.empty(n, dtype=int)
    fold[rng.permutation(n)] = np.arange(n) % int(n_folds)
    return [(_by_items(annotations, fold != f), _by_items(annotations, fold == f))
            for f in range(int(n_folds))]


def cv_disagreement(annotations: Annotations, fit_predict: Callable, *, n_folds: int = 5,
                    rng=None) -> float:
    """K-fold S_hat of any classifier: ``fit_predict(train, test_features)`` fits on
    the training Annotations and returns predictions for the held-out items
    (class codes, (item, class) or P(positive)); the score pools the held-out
    labels of all folds.

    Examples
    --------
    >>> from crowd_models import selection
    >>> from crowd_models.models import feature_accuracy
    >>> ann = feature_accuracy.simulate(300, n_annotators=5, n_features=4, rng=0)
    >>> fit_predict = lambda train, x: feature_accuracy.predict(feature_accuracy.em(train), x)
    >>> selection.cv_disagreement(ann, fit_predict, n_folds=5, rng=0)
    """
    _check(annotations)
    wrong = total = 0
    for train, test in kfold_items(annotations, n_folds, rng=rng):
        z = _hard(fit_predict(train, test.features), test)
        wrong += int(np.sum(z[test.item_idx] != test.labels))
        total += test.n_annotations
    return wrong / total


@dataclass
class PenaltySelection:
    """The result of :func:`select_penalty`.

    ``penalty``: the grid value with the smallest disagreement (the largest
    such value on ties: the sparser model). ``scores``: a DataFrame indexed by
    penalty with the ``disagreement`` column.
    """

    penalty: float
    scores: pd.DataFrame

    def __repr__(self) -> str:
        return (f"PenaltySelection(penalty={self.penalty!r}, "
                f"{len(self.scores)} values scored)")


def _default_fit_predict(train, test_features, penalty, **kwargs):
    from crowd_models.models import feature_accuracy

    fit = feature_accuracy.em(train, penalty=penalty, **kwargs)
    return feature_accuracy.predict(fit, test_features)


def select_penalty(annotations: Annotations, penalties: Sequence[float], *,
                   fit_predict: Callable | None = None, validation: Annotations | None = None,
                   n_folds: int = 5, rng=None, **fit_kwargs) -> PenaltySelection:
    """Choose a penalty over a grid by the disagreement score, without gold.

    ``fit_predict(train, test_features, penalty)`` returns predictions for the
    held-out items; the default fits
    :func:`crowd_models.models.feature_accuracy.em` with ``penalty`` (and
    ``fit_kwargs``, e.g. ``n_restarts``) and predicts with its classifier. Any
    family or baseline plugs in the same way, e.g.
    ``lambda tr, x, lam: feature_accuracy.predict(lasso_majority_vote(tr, penalty=lam), x)``.

    With ``validation`` (held-out Annotations with features), fit once on
    ``annotations`` per penalty and score on ``validation``; otherwise K-fold
    over the items of ``annotations`` (``n_folds``, ``rng``) — the paper's
    choice for small data.

    Examples
    --------
    >>> from crowd_models import selection
    >>> from crowd_models.models import feature_accuracy
    >>> ann = feature_accuracy.simulate(300, n_annotators=5, n_features=4, rng=0)
    >>> chosen = selection.select_penalty(ann, [0.5, 1, 2, 4, 8])
    >>> chosen.penalty
    """
    _check(annotations)
    grid = np.asarray(penalties, dtype=float)
    if grid.ndim != 1 or grid.size == 0:
        raise ValueError("penalties must be a non-empty 1-D grid of values.")
    if not np.all(np.isfinite(grid)) or np.any(grid <= 0):
        raise ValueError(f"penalties must all be > 0, got {list(grid)}.")
    if fit_predict is None:
        def fit_predict(train, x, lam):
            return _default_fit_predict(train, x, lam, **fit_kwargs)
    elif fit_kwargs:
        raise TypeError(f"extra keywords {sorted(fit_kwargs)} are only used by the default "
                        f"fit_predict; bind them in your own fit_predict instead.")
    if validation is not None:
        _check(validation, "validation")
        if validation.features is None:
            raise ValueError("validation needs features (the classifier predicts from them).")
    seed = np.random.default_rng(rng).integers(2**32)
    scores = []
    for lam in grid:
        if validation is not None:
            scores.append(disagreement(fit_predict(annotations, validation.features, lam),
                                       validation))
        else:
            scores.append(cv_disagreement(
                annotations, lambda tr, x, lam=lam: fit_predict(tr, x, lam),
                n_folds=n_folds, rng=seed))
    table = pd.DataFrame({"disagreement": scores}, index=pd.Index(grid, name="penalty"))
    best = table["disagreement"].min()
    chosen = float(table.index[table["disagreement"] <= best + 1e-12].max())
    return PenaltySelection(penalty=chosen, scores=table)


# ------------------------------------------------------ comparison by LOO
def _likelihood_kind(name: str, fit) -> str:
    """What the fit's per-item ``item_labels`` log-density is a density of."""
    if not isinstance(fit, xr.DataTree):
        raise TypeError(f"fit {name!r} is a {type(fit).__name__}; compare needs the DataTree "
                        f"that crowd_models.sample returns (EM and MAP fits have no draws).")
    for group in ("posterior", "log_likelihood", "observed_data"):
        if group not in fit.children:
            raise ValueError(f"fit {name!r} has no {group!r} group; compare needs a NUTS fit "
                             f"from crowd_models.sample, which records it.")
    if D.OBSERVED not in fit["log_likelihood"].data_vars:
        raise ValueError(f"fit {name!r} has no per-item {D.OBSERVED!r} log-likelihood; it was not "
                         f"made by a crowd_models family.")
    post = fit["posterior"]
    if post.sizes.get("chain", 1) * post.sizes.get("draw", 1) < 2:
        raise ValueError(f"fit {name!r} has a single draw (an EM or MAP fit); compare needs "
                         f"posterior draws from crowd_models.sample.")
    record = _registry.find(fit.attrs.get("family"), fit.attrs.get("variant", ""))
    if record is None:
        raise ValueError(f"fit {name!r} does not record a known family and variant "
                         f"(attrs['family'] = {fit.attrs.get('family')!r}, attrs['variant'] = "
                         f"{fit.attrs.get('variant')!r}), which crowd_models.sample copies from a "
                         f"family's model. For a model rebuilt by pm.do or pm.observe, set "
                         f"fit.attrs['family'] and fit.attrs['variant'] to its family's (e.g. "
                         f"'two_coin' and '').")
    return record.likelihood_kind


_KIND_TEXT = {
    "categorical": "the class labels (every categorical family but cumulative ordinal)",
    "continuous": "the real-valued labels (continuous family)",
    "composite": "the sum of the K - 1 binary problems' likelihoods (cumulative ordinal), "
                 "which counts each label K - 1 times and is not a likelihood of the labels",
    "features": "the items' features given the labels (stacked Gaussian)",
}


def compare(fits, *, method: str = "stacking"):
    """Compare NUTS fits of the same data by PSIS-LOO, refusing fits whose
    likelihoods are not comparable.

    ``az.compare`` ranks models by their expected log predictive density,
    which is meaningful only when every model is a density of the same data.
    This checks that first: the fits must share items and per-item label
    counts, and their per-item log-likelihoods must be densities of the same
    thing. Class labels (two-coin, Dawid-Skene, latent ordinal, feature
    accuracy), real-valued labels (continuous) and features given labels
    (stacked Gaussian) do not mix; the cumulative ordinal model's composite
    likelihood is refused beside any other kind, and among cumulative fits
    only, compared with a ``UserWarning``.

    Parameters
    ----------
    fits : mapping of str to xarray.DataTree
        At least two fits from :func:`crowd_models.sample`, by name.
    method : str, default "stacking"
        ``az.compare``'s weighting method.

    Returns
    -------
    pandas.DataFrame
        ``az.compare``'s table, best model first.

    Examples
    --------
    >>> from crowd_models.models import dawid_skene, two_coin
    >>> from crowd_models.selection import compare
    >>> ann = cm.datasets.load_rte()
    >>> fits = {"two-coin": cm.sample(two_coin.build_model(ann), draws=300, chains=2),
    ...         "dawid-skene": cm.sample(dawid_skene.build_model(ann), draws=300, chains=2)}
    >>> table = compare(fits)
    """
    import arviz as az

    if not isinstance(fits, Mapping):
        raise TypeError(f"fits must be a mapping of name -> fit (a dict), got "
                        f"{type(fits).__name__}.")
    if len(fits) < 2:
        raise ValueError(f"compare needs at least two fits, got {len(fits)}.")
    kinds = {name: _likelihood_kind(name, fit) for name, fit in fits.items()}
    if len(set(kinds.values())) > 1:
        raise ValueError(
            "these fits' log-likelihoods are densities of different things, so their LOO "
            "scores cannot be compared: " + "; ".join(
                f"{name!r}: {_KIND_TEXT[kind]}" for name, kind in kinds.items())
            + ". Compare models of the same kind only.")
    first, *rest = fits
    reference = fits[first]["observed_data"][D.OBSERVED]
    for name in rest:
        observed = fits[name]["observed_data"][D.OBSERVED]
        same_items = (observed.sizes == reference.sizes and np.array_equal(
            observed["item"].values, reference["item"].values))
        if not same_items or not np.array_equal(observed.values, reference.values):
            raise ValueError(
                f"fits {first!r} and {name!r} were not fitted to the same items and labels "
                f"(their items or the number of labels per item differ); LOO compares models "
                f"of the same data only.")
    if set(kinds.values()) == {"composite"}:
        warn(
            "comparing cumulative ordinal fits: their log-likelihood is "
            f"{_KIND_TEXT['composite']}, so the LOO differences are not predictive scores of "
            "the labels; the latent ordinal variant has a proper likelihood.")
    return az.compare(dict(fits), method=method)
