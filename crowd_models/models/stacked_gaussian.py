"""Stacked Gaussian class-conditional models: one discriminant analysis per
annotator, averaged into an ensemble.

Montani and Cappozzo (2025), "Stacking model-based classifiers for dealing
with multiple sets of noisy labels", Biometrical Journal 67(2), e70042.

Each annotator *m* labels (some of) the items; a Gaussian class-conditional
model (Eigenvalue Decomposition Discriminant Analysis, EDDA) is fitted to
(x, y_m): class proportions ``tau[m, g]``, means ``mu[m, g]`` and covariances
``Sigma[m, g] = lambda D A D^T`` in one of mclust's 14 structures (EII ... VVV;
LDA = EEE, QDA = VVV). The ensemble's parameters are weighted averages of the
base learners' (the paper's eqs. 3-5)::

    tau[g]   = sum_m w[m] tau[m, g]
    mu[g]    = sum_m w[m] mu[m, g]
    Sigma[g] = sum_m w[m] Sigma[m, g]

and it classifies by the MAP rule (eq. 6): ``argmax_g tau[g] N(x; mu[g], Sigma[g])``.

The weights come from one of six strategies (:func:`annotator_weights`), each
turning per-annotator *scores* into weights ``w = score / sum(score)``:

* ``"PGT"`` (partial ground truth, the paper's Algorithm 1): score = number of
  an annotator's labels that agree with the gold label, on a subset of items
  whose gold is known.
* ``"EN"`` (experts / novices): a fixed share of the total (default 80%) split
  equally among the named experts, the rest among the novices.
* ``"E"`` (equal): 1/M each.
* ``"MV"`` (majority vote): score = agreement with the item's majority label,
  counting only items where at least ``floor(threshold * n_i)`` of the item's
  ``n_i`` labels agree on it (the authors' code; ``threshold=None`` counts every
  item), tied items skipped.
* ``"ItAlg1"`` (the paper's Algorithm 2, iterative hard agreement): start from
  the majority labels, score the annotators by agreement, stack, relabel the
  training items with the ensemble's MAP class, repeat until the scores stop
  changing.
* ``"ItAlg2"`` (the paper's Table 2, iterative soft agreement): as ItAlg1, but
  annotator *m*'s score is ``sum_i z_m[i, label_i]``, its own base learner's
  posterior probability of the current label of each training item.

Beyond the paper: :func:`build_model` is the base learners in PyMC (a Dirichlet
on each annotator's class proportions, Normal class means and structured
covariances, every annotator's labels observed; with flat priors ``fit_map``
equals the maximum-likelihood fit of :func:`crowd_models.models.edda.fit_edda`), and
:func:`stack_posterior` stacks posterior draws of the base learners, giving
predictive class probabilities with uncertainty; :func:`bootstrap_weights`
resamples items to show how uncertain a strategy's weights are.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pymc as pm
import pytensor.tensor as pt
import xarray as xr
from scipy.special import logsumexp

from crowd_models import _dims as D
from crowd_models._text import warn
from crowd_models.data import Annotations
from crowd_models.models import _common as C
from crowd_models.models import _registry, edda

__all__ = [
    "STRATEGIES",
    "PYMC_STRUCTURES",
    "DEFAULT_PRIORS",
    "FLAT_PRIORS",
    "GaussianClassifier",
    "fit_base_learners",
    "annotator_weights",
    "stack",
    "fit_ensemble",
    "build_model",
    "base_learners_from_posterior",
    "stack_posterior",
    "bootstrap_weights",
    "simulate",
]

STRATEGIES = ("PGT", "EN", "E", "MV", "ItAlg1", "ItAlg2")
"""The paper's six weighting strategies."""

PYMC_STRUCTURES = ("EII", "VII", "EEI", "VEI", "EVI", "VVI", "EEE", "VVV")
"""Covariance structures :func:`build_model` covers."""


DEFAULT_PRIORS = _registry.default_priors("stacked_gaussian")
"""Weak conjugate-style defaults of :func:`build_model`.

* ``label_share_prior``: symmetric Dirichlet concentration of each annotator's
  ``label_share`` (the class shares of its labels) (2: the mode adds one pseudo-count per class).
* ``class_mean_sd``: class means are Normal around the overall feature mean
  with standard deviation ``class_mean_sd`` times each feature's standard
  deviation (an empirical-Bayes scale, so features in different units are
  treated alike); None gives a flat prior.
* ``covariance_prior``: an inverse-Wishart kernel on every distinct covariance
  matrix, ``-(nu + d + 1)/2 log|Sigma| - tr(Psi Sigma^-1)/2`` with
  ``nu = d + 2`` and ``Psi = diag(feature variances) / G^(2/d)`` (mclust's
  default conjugate prior, Fraley and Raftery 2007); ``"default"`` uses it, a
  dict ``{"dof": nu, "scale": Psi}`` sets it, None is flat. Its mode pulls a
  covariance towards ``Psi``: a class with fewer labelled items than features
  gets a non-singular covariance instead of mclust's failure.
"""

FLAT_PRIORS = dict(label_share_prior=1.0, class_mean_sd=None, covariance_prior=None)
"""Flat priors: ``fit_map`` returns the maximum-likelihood base learners."""

_LOG_2PI = math.log(2 * math.pi)


# ------------------------------------------------------------ classifiers
@dataclass
class GaussianClassifier:
    """A Gaussian class-conditional classifier (a stacked ensemble, or a base
    learner rebuilt from PyMC draws): ``proportions`` (G,), ``means`` (G, d),
    ``covariances`` (G, d, d), ``classes`` (G,)."""

    classes: pd.Index
    proportions: np.ndarray
    means: np.ndarray
    covariances: np.ndarray

    def log_density(self, X) -> np.ndarray:
        """log N(x; mean_g, covariance_g), shape (m, G)."""
        X = _as_features(X, self.means.shape[1])
        out = np.empty((len(X), len(self.proportions)))
        for g in range(len(self.proportions)):
            out[:, g] = _mvn_logpdf(X, self.means[g], self.covariances[g])
        return out

    def predict_proba(self, X) -> np.ndarray:
        """Posterior class probabilities (eq. 6 before the argmax), (m, G)."""
        with np.errstate(divide="ignore"):
            joint = np.log(self.proportions)[None, :] + self.log_density(X)
        return np.exp(joint - logsumexp(joint, axis=1, keepdims=True))

    def predict(self, X) -> np.ndarray:
        """The MAP class (eq. 6), as class names."""
        return np.asarray(self.classes)[np.argmax(self.predict_proba(X), axis=1)]


def _mvn_logpdf(X, mean, cov):
    L = np.linalg.cholesky(cov)
    z = np.linalg.solve(L, (X - mean).T)
    return -0.5 * np.sum(z * z, axis=0) - np.sum(np.log(np.diag(L))) - 0.5 * len(mean) * _LOG_2PI


def _as_features(X, d=None) -> np.ndarray:
    X = np.asarray(X.to_numpy() if isinstance(X, pd.DataFrame) else X, dtype=float)
    if X.ndim != 2 or (d is not None and X.shape[1] != d):
        raise ValueError(f"features must be a 2-D array (item, feature) with {d} features, got "
                         f"shape {X.shape}.")
    if not np.all(np.isfinite(X)):
        raise ValueError("features contain NaN or infinite values; impute or drop those items.")
    return X


# ------------------------------------------------------------ base learners
def _fit_one(X, y, covariance, G, **edda_kwargs):
    if covariance in ("best", "EDDA"):
        return edda.select_edda(X, y, classes=list(range(G)), **edda_kwargs)[0]
    return edda.fit_edda(X, y, covariance, classes=list(range(G)), **edda_kwargs)


def _check_structure(covariance, allowed=edda.STRUCTURES + ("best", "EDDA")):
    if covariance not in allowed:
        raise ValueError(
            f"covariance={covariance!r} is not a known structure; choose one of "
            f"{', '.join(allowed)} (LDA = 'EEE', QDA = 'VVV').")


def _require(ann, what="stacked Gaussian models"):
    C.require_categorical(ann, what)
    if ann.features is None:
        raise ValueError(
            f"{what} need item features: build the Annotations with features=... "
            f"(a DataFrame indexed by item, or an (item, feature) array).")
    if not np.all(np.isfinite(ann.features)):
        raise ValueError("the features contain NaN or infinite values; impute or drop those "
                         "items first.")


def fit_base_learners(annotations: Annotations, covariance: str = "EEE", **edda_kwargs) -> dict:
    """One maximum-likelihood Gaussian classifier per annotator, fitted to the
    features of the items that annotator labelled and their labels.

    ``covariance``: an EDDA structure name (``"EEE"`` = LDA, ``"VVV"`` = QDA, ...)
    or ``"best"`` (each annotator's structure chosen by BIC, the paper's EDDA
    base learners). Returns ``{annotator id: fit}``; the fits have
    ``proportions``, ``means``, ``covariances`` in ``annotations.classes`` order
    and ``predict_proba``. Uses :func:`crowd_models.models.edda.fit_edda`; keyword
    arguments go to it (e.g. ``shrinkage=1.0``, a conjugate-style prior that
    keeps the covariances of small classes non-singular: with flat ML, VVV
    needs more labelled items than features in every class of every annotator
    and raises an error naming the annotator and class otherwise).

    Examples
    --------
    >>> from crowd_models.models import stacked_gaussian
    >>> ann = stacked_gaussian.simulate(1, n_items=200, rng=0)
    >>> base = stacked_gaussian.fit_base_learners(ann, covariance="EEE")
    >>> sorted(base)
    """
    _require(annotations)
    _check_structure(covariance)
    G = annotations.n_classes
    fits = {}
    for m, name in enumerate(annotations.annotators):
        rows = annotations.annotator_idx == m
        y = annotations.labels[rows]
        X = annotations.features[annotations.item_idx[rows]]
        counts = np.bincount(y, minlength=G)
        if np.any(counts == 0):
            missing = [str(annotations.classes[g]) for g in np.flatnonzero(counts == 0)]
            raise ValueError(
                f"annotator {name!r} never uses class(es) {missing}, so its base learner has "
                f"no mean or covariance for them. Drop the annotator, merge classes, or use "
                f"build_model (its priors give every class parameters).")
        try:
            fits[name] = _fit_one(X, y, covariance, G, **edda_kwargs)
        except ValueError as err:
            raise type(err)(f"annotator {name!r}: {err}") from err
    return fits


# ------------------------------------------------------------------ stacking
def _weights_vector(weights, names) -> np.ndarray:
    if isinstance(weights, xr.Dataset):
        weights = weights["weights"]
    if isinstance(weights, xr.DataArray):
        weights = weights.to_series()
    if isinstance(weights, Mapping):
        weights = pd.Series(weights)
    if isinstance(weights, pd.Series):
        missing = [n for n in names if n not in weights.index]
        if missing:
            raise ValueError(f"weights are missing annotator(s) {missing}.")
        w = weights.loc[list(names)].to_numpy(dtype=float)
    else:
        w = np.asarray(weights, dtype=float)
    if w.shape != (len(names),):
        raise ValueError(f"need one weight per base learner ({len(names)}), got shape {w.shape}.")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"weights must be finite and non-negative, got {w}.")
    if not np.isclose(w.sum(), 1.0, atol=1e-8):
        raise ValueError(
            f"weights must sum to 1 (they sum to {w.sum():.6g}); normalise them, e.g. "
            f"w / w.sum().")
    return w


def stack(base_fits, weights, classes=None) -> GaussianClassifier:
    """The ensemble of eqs. 3-5: weighted averages of the base learners'
    proportions, means and covariances (weights non-negative, summing to 1).

    ``base_fits``: ``{annotator: fit}`` (from :func:`fit_base_learners`) or a
    sequence of fits; ``weights``: array, Series/dict by annotator, or the
    Dataset of :func:`annotator_weights`.

    Examples
    --------
    >>> from crowd_models.models import stacked_gaussian
    >>> ann = stacked_gaussian.simulate(1, n_items=200, rng=0)
    >>> base = stacked_gaussian.fit_base_learners(ann)
    >>> weights = stacked_gaussian.annotator_weights(ann, "MV", base_fits=base)
    >>> ensemble = stacked_gaussian.stack(base, weights)
    >>> ensemble.predict(ann.features)[:10]
    """
    if isinstance(base_fits, Mapping):
        names = list(base_fits)
        fits = list(base_fits.values())
    else:
        fits = list(base_fits)
        names = list(range(len(fits)))
    if not fits:
        raise ValueError("stack needs at least one base learner.")
    w = _weights_vector(weights, names)
    props = np.stack([np.asarray(f.proportions, float) for f in fits])
    means = np.stack([np.asarray(f.means, float) for f in fits])
    covs = np.stack([np.asarray(f.covariances, float) for f in fits])
    if classes is None:
        classes = getattr(fits[0], "classes", range(props.shape[1]))
    return GaussianClassifier(
        pd.Index(classes), np.einsum("m,mg->g", w, props), np.einsum("m,mgf->gf", w, means),
        np.einsum("m,mgfh->gfh", w, covs))


# ---------------------------------------------------------------- strategies
def _agreement(ann, item_labels) -> np.ndarray:
    """Per annotator: number of its labels equal to ``item_labels`` (-1 = skip)."""
    ref = item_labels[ann.item_idx]
    hit = (ref >= 0) & (ann.labels == ref)
    return np.bincount(ann.annotator_idx, weights=hit.astype(float),
                       minlength=ann.n_annotators)


def _majority(ann, threshold=None) -> np.ndarray:
    """Majority class code per item; -1 for ties and items below the threshold."""
    counts = ann.class_counts()
    top = counts.max(axis=1)
    unique = (counts == top[:, None]).sum(axis=1) == 1
    labels = np.where(unique, counts.argmax(axis=1), -1)
    if threshold is not None:
        if not 0 < threshold <= 1:
            raise ValueError(f"threshold must be a fraction in (0, 1], got {threshold!r}.")
        need = np.floor(threshold * counts.sum(axis=1) + 1e-9)
        labels = np.where(top >= need, labels, -1)
    return labels


def _result(ann, scores, strategy, **attrs) -> xr.Dataset:
    scores = np.asarray(scores, dtype=float)
    total = scores.sum()
    if not total > 0:
        raise ValueError(
            f"strategy {strategy!r}: every annotator scored 0, so the weights are undefined "
            f"(no item passed the agreement threshold, or no gold item matched). Lower the "
            f"threshold or use another strategy.")
    ds = xr.Dataset(
        {"weights": (D.ANNOTATOR, scores / total), "scores": (D.ANNOTATOR, scores)},
        coords={D.ANNOTATOR: ann.annotators},
        attrs={"strategy": strategy, **{k: v for k, v in attrs.items() if v is not None}},
    )
    return ds


def annotator_weights(
    annotations: Annotations,
    strategy: str = "MV",
    *,
    threshold: float | None = None,
    experts: Sequence | None = None,
    expert_share: float = 0.8,
    gold_fraction: float | None = None,
    gold_items: Sequence | None = None,
    base_fits: dict | None = None,
    covariance: str = "EEE",
    max_iter: int = 50,
    start_scores=None,
    rng=None,
) -> xr.Dataset:
    """Per-annotator scores and stacking weights (``weights = scores / sum``).

    Parameters
    ----------
    annotations : Annotations
        Categorical labels.
    strategy : {"PGT", "EN", "E", "MV", "ItAlg1", "ItAlg2"}, optional
        See the module docstring (default "MV").
    threshold : float in (0, 1], optional
        MV: count an item only if at least ``floor(threshold * n_i)`` of its
        ``n_i`` labels agree on its majority class (the paper uses 0.9; None
        counts every item). Tied items are always skipped.
    experts, expert_share
        EN: the expert annotators' ids and the share of the total weight they get
        (split equally among them; the others share the rest).
    gold_fraction : float in (0, 1], optional
        PGT: sample this fraction of all items (``round(fraction * n_items)``)
        among those with known gold, with ``rng`` (the paper: 0.1). None uses
        every item with known gold (``annotations.gold``).
    gold_items : sequence of item ids, optional
        PGT: exactly these items' gold (e.g. a subset drawn elsewhere);
        excludes ``gold_fraction``.
    base_fits, covariance
        ItAlg1/ItAlg2: the base learners (default: :func:`fit_base_learners` with
        ``covariance``).
    max_iter : int, optional
        Iterations of ItAlg1/ItAlg2.
    start_scores : array (annotator,), optional
        ItAlg1/ItAlg2: the scores the iteration starts from (default: the
        strategy's score against the majority labels, ties skipped).
    rng : int, numpy.random.Generator or None, optional
        PGT: seed or Generator of the ``gold_fraction`` sample.

    Returns
    -------
    xarray.Dataset
        ``weights`` and ``scores`` (annotator); attrs ``strategy`` and, for the
        iterative strategies, ``n_iter`` and ``converged``; ``gold_items`` lists the
        items PGT used.

    Examples
    --------
    >>> from crowd_models.models import stacked_gaussian
    >>> ann = stacked_gaussian.simulate(1, n_items=200, rng=0)
    >>> stacked_gaussian.annotator_weights(ann, "ItAlg1")["weights"].to_series()
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy={strategy!r} is not one of {', '.join(STRATEGIES)}.")
    C.require_categorical(annotations, "annotator_weights")
    ann = annotations
    if strategy == "E":
        return _result(ann, np.ones(ann.n_annotators), "E")
    if strategy == "EN":
        return _expert_novice_weights(ann, experts, expert_share)
    if strategy == "MV":
        labels = _majority(ann, threshold)
        return _result(ann, _agreement(ann, labels), "MV",
                       threshold=threshold, n_items_used=int((labels >= 0).sum()))
    if strategy == "PGT":
        return _gold_weights(ann, gold_fraction, gold_items, rng)
    return _iterated_weights(ann, strategy, base_fits, covariance, max_iter, start_scores)


def _expert_novice_weights(ann, experts, expert_share) -> xr.Dataset:
    """EN: ``expert_share`` of the weight split among the experts, the rest among the others."""
    if experts is None:
        raise ValueError("strategy 'EN' needs experts=[annotator ids of the experts].")
    experts = list(experts)
    unknown = [e for e in experts if e not in ann.annotators]
    if unknown:
        raise ValueError(f"experts {unknown} are not annotators; the annotators are "
                         f"{list(ann.annotators)}.")
    if not experts:
        raise ValueError("experts is empty; name at least one expert.")
    if not 0 <= expert_share <= 1:
        raise ValueError(f"expert_share must be in [0, 1], got {expert_share!r}.")
    is_exp = ann.annotators.isin(experts)
    n_exp, n_nov = is_exp.sum(), (~is_exp).sum()
    share = expert_share if n_nov else 1.0
    scores = np.where(is_exp, share / n_exp, (1 - share) / max(n_nov, 1))
    return _result(ann, scores, "EN", expert_share=share)


def _gold_weights(ann, gold_fraction, gold_items, rng) -> xr.Dataset:
    """PGT: agreement with the gold labels of all, chosen or sampled gold items."""
    if not ann.has_gold:
        raise ValueError("strategy 'PGT' needs gold labels for some items "
                         "(Annotations(..., gold=...)).")
    known = np.flatnonzero(ann.gold >= 0)
    if gold_items is not None:
        if gold_fraction is not None:
            raise ValueError("give gold_fraction (a random subset) or gold_items (a chosen "
                             "one), not both.")
        chosen = pd.Index(list(gold_items))
        missing = chosen.difference(ann.items[known])
        if len(missing) or chosen.empty or chosen.has_duplicates:
            raise ValueError(f"gold_items must be distinct items with known gold, at least "
                             f"one; not usable: {list(missing) or list(chosen)}.")
        known = np.sort(ann.items.get_indexer(chosen))
    if gold_fraction is not None:
        if not 0 < gold_fraction <= 1:
            raise ValueError(f"gold_fraction must be in (0, 1], got {gold_fraction!r}.")
        size = max(1, int(round(gold_fraction * ann.n_items)))
        if size > len(known):
            raise ValueError(f"gold_fraction={gold_fraction} asks for {size} gold items, "
                             f"only {len(known)} have gold.")
        known = np.sort(np.random.default_rng(rng).choice(known, size=size, replace=False))
    labels = np.full(ann.n_items, -1)
    labels[known] = ann.gold[known]
    ds = _result(ann, _agreement(ann, labels), "PGT", n_items_used=len(known))
    ds.attrs["gold_items"] = [str(i) for i in ann.items[known]]
    return ds


def _iterated_weights(ann, strategy, base_fits, covariance, max_iter, start_scores):
    """ItAlg1/ItAlg2: score against the stacked ensemble's labels until the scores settle."""
    _require(ann, f"strategy {strategy!r}")
    if base_fits is None:
        base_fits = fit_base_learners(ann, covariance)
    if list(base_fits) != list(ann.annotators):
        raise ValueError("base_fits must be keyed by the annotators, in annotations.annotators "
                         "order.")
    X = ann.features
    labels = _majority(ann)
    if strategy == "ItAlg2":
        z = np.stack([np.asarray(f.predict_proba(X)) for f in base_fits.values()])  # (M, n, G)

        def score(lab):
            keep = lab >= 0
            return z[:, np.flatnonzero(keep), lab[keep]].sum(axis=1)
    else:
        def score(lab):
            return _agreement(ann, lab)

    if start_scores is None:
        scores = score(labels)
        if not scores.sum() > 0:
            raise ValueError(f"strategy {strategy!r}: no item has a majority label to start "
                             f"from.")
    else:
        scores = np.asarray(start_scores, dtype=float)
        if scores.shape != (ann.n_annotators,) or not np.all(np.isfinite(scores)) or np.any(
                scores < 0) or not scores.sum() > 0:
            raise ValueError(f"start_scores must be {ann.n_annotators} finite, non-negative "
                             f"scores (one per annotator) with a positive sum; got "
                             f"{start_scores!r}.")
    seen = [scores]
    converged, cycle, n_iter = False, 0, 0
    for n_iter in range(1, max_iter + 1):  # noqa: B007
        ens = stack(base_fits, scores / scores.sum(), classes=ann.classes)
        labels = np.argmax(ens.predict_proba(X), axis=1)
        new = score(labels)
        if np.array_equal(new, scores):
            converged = True
            break
        earlier = [k for k, s in enumerate(seen) if np.array_equal(s, new)]
        if earlier:  # a cycle: keep the last scores, as the authors' loop would
            cycle = len(seen) - earlier[0]
            break
        scores = new
        seen.append(scores)
    if not converged:
        warn(
            f"{strategy}: the scores did not settle ("
            + (f"they cycle with period {cycle}" if cycle else f"max_iter={max_iter} reached")
            + "); the weights are those of the last iteration.")
    return _result(ann, scores, strategy, n_iter=n_iter, converged=int(converged),
                   cycle=cycle or None)


def fit_ensemble(annotations: Annotations, strategy: str = "MV", covariance: str = "EEE",
                 **strategy_kwargs):
    """Base learners, weights and their stack in one call.

    Returns ``(ensemble, weights_dataset, base_fits)``.

    Examples
    --------
    >>> from crowd_models.models import stacked_gaussian
    >>> ann = stacked_gaussian.simulate(1, n_items=200, rng=0)
    >>> ensemble, weights, base = stacked_gaussian.fit_ensemble(ann, "MV", covariance="EEE")
    >>> ensemble.predict_proba(ann.features)[:3]
    """
    fits = fit_base_learners(annotations, covariance)
    weights = annotator_weights(annotations, strategy, base_fits=fits, covariance=covariance,
                                **strategy_kwargs)
    return stack(fits, weights, classes=annotations.classes), weights, fits


def bootstrap_weights(annotations: Annotations, strategy: str = "MV", *, n_boot: int = 200,
                      covariance: str = "EEE", rng=None, **strategy_kwargs) -> xr.DataArray:
    """The weights recomputed on ``n_boot`` bootstrap resamples of the items
    (every label of a drawn item comes along): a (bootstrap, annotator)
    DataArray. ``(b.sel(annotator=a) > b.sel(annotator=c)).mean()`` says how
    often annotator a outweighs c. Resamples whose weights are undefined (all
    scores 0) or whose base learners cannot be fitted are skipped (count in
    ``attrs["n_failed"]``).

    Examples
    --------
    >>> from crowd_models.models import stacked_gaussian
    >>> ann = stacked_gaussian.simulate(1, n_items=200, rng=0)
    >>> boot = stacked_gaussian.bootstrap_weights(ann, "MV", n_boot=50, rng=0)
    >>> boot.quantile([0.05, 0.95], dim="bootstrap")
    """
    _require(annotations) if strategy in ("ItAlg1", "ItAlg2") else C.require_categorical(
        annotations, "bootstrap_weights")
    rng = np.random.default_rng(rng)
    ann = annotations
    rows_of = pd.Series(np.arange(ann.n_annotations)).groupby(ann.item_idx).apply(np.asarray)
    out, failed = [], 0
    for _ in range(n_boot):
        items = rng.integers(0, ann.n_items, size=ann.n_items)
        rows = np.concatenate([rows_of[i] for i in items])
        new_item = np.repeat(np.arange(ann.n_items), [len(rows_of[i]) for i in items])
        boot = Annotations._assemble(
            new_item, ann.annotator_idx[rows], ann.labels[rows], pd.RangeIndex(ann.n_items),
            ann.annotators, ann.classes,
            None if ann.features is None else ann.features[items],
            None if ann.gold is None else pd.Series(
                np.where(ann.gold[items] >= 0, np.asarray(ann.classes, dtype=object)[
                    np.maximum(ann.gold[items], 0)], None)).dropna())
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                w = annotator_weights(boot, strategy, covariance=covariance, rng=rng,
                                      **strategy_kwargs)
        except (ValueError, np.linalg.LinAlgError):
            failed += 1
            continue
        out.append(w["weights"].reindex({D.ANNOTATOR: ann.annotators}).values)
    if not out:
        raise ValueError("every bootstrap resample failed; see annotator_weights' errors.")
    return xr.DataArray(np.stack(out), dims=("bootstrap", D.ANNOTATOR),
                        coords={D.ANNOTATOR: ann.annotators}, name="weights",
                        attrs={"strategy": strategy, "n_failed": failed})


# ------------------------------------------------------------- PyMC factory
def _structure_parts(covariance):
    """(volume varies by class, shape varies by class, orientation kind)."""
    vol, shape, orient = covariance
    return vol == "V", shape == "V", orient


def _priors(ann, label_share_prior, class_mean_sd, covariance_prior):
    G, d = ann.n_classes, ann.n_features
    prev = np.asarray(label_share_prior, dtype=float)
    if prev.ndim > 1 or (prev.ndim == 1 and prev.shape != (G,)) or np.any(prev < 1) or np.any(
            ~np.isfinite(prev)):
        raise ValueError(f"label_share_prior must be a number or {G} numbers >= 1 (Dirichlet "
                         f"concentration; 1 is flat), got {label_share_prior!r}.")
    out = {"label_share": np.broadcast_to(prev, (G,)).copy()}
    X = ann.features
    center = X.mean(axis=0)
    sd = X.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    if class_mean_sd is None:
        out["mean"] = None
    else:
        if not (np.ndim(class_mean_sd) == 0 and class_mean_sd > 0):
            raise ValueError(f"class_mean_sd must be a positive number or None (flat), got "
                             f"{class_mean_sd!r}.")
        out["mean"] = (center, float(class_mean_sd) * sd)
    if covariance_prior is None:
        out["covariance"] = None
    else:
        if isinstance(covariance_prior, str):
            if covariance_prior != "default":
                raise ValueError("covariance_prior must be 'default', None (flat) or a dict "
                                 "{'dof': nu, 'scale': (d,) or (d, d)}.")
            covariance_prior = {}
        dof = float(covariance_prior.get("dof", d + 2))
        scale = covariance_prior.get("scale", sd ** 2 / G ** (2.0 / d))
        scale = np.asarray(scale, dtype=float)
        if scale.ndim == 1:
            scale = np.diag(scale)
        if scale.shape != (d, d) or not np.all(np.linalg.eigvalsh(scale) > 0):
            raise ValueError(f"covariance_prior scale must be {d} positive variances or a "
                             f"positive-definite ({d}, {d}) matrix.")
        if not dof > -1:
            raise ValueError(f"covariance_prior dof must be > -1, got {dof}.")
        out["covariance"] = (dof, scale)
    return out


def build_model(
    annotations: Annotations,
    *,
    covariance: str = "EEE",
    label_share_prior=DEFAULT_PRIORS["label_share_prior"],
    class_mean_sd=DEFAULT_PRIORS["class_mean_sd"],
    covariance_prior=DEFAULT_PRIORS["covariance_prior"],
) -> pm.Model:
    r"""The annotators' base learners in PyMC: a Gaussian class-conditional model
    per annotator, every annotator's labels observed (fully observed: no hidden
    truth; the stacking happens afterwards, :func:`stack_posterior`).

    .. math::

        \ell_{ij} &\sim \mathrm{Categorical}(\text{label\_share}_{j\cdot}), \quad
        x_i \mid \ell_{ij} = g \sim \mathcal{N}(\text{class\_mean}_{jg},
            \Sigma_{jg}), \quad
        \Sigma_{jg} = \lambda D A D^\top \\
        \text{label\_share}_{j\cdot} &\sim \mathrm{Dirichlet}(c), \quad
        \text{class\_mean}_{jg} \sim \mathcal{N}(\bar x, s^2 I)

    for each annotator j's labels :math:`\ell_{ij}` of the items it labelled.

    Parameters
    ----------
    annotations : Annotations
        Categorical labels and item features (finite).
    covariance : str, optional
        One of :data:`PYMC_STRUCTURES`:
        ``Sigma = lambda D A D^T`` with volume ``lambda`` (E: shared by the
        classes, V: per class), shape ``A`` (diagonal, ``det A = 1``) and
        orientation ``D`` (I: axis-aligned; E/V full, shared/per class).
    label_share_prior, class_mean_sd, covariance_prior
        See :data:`DEFAULT_PRIORS`; :data:`FLAT_PRIORS` gives maximum likelihood.

    Returns
    -------
    pymc.Model
        Free variables (unconstrained, so ``find_MAP`` needs no Jacobian):
        ``label_share`` (annotator, true_class) Dirichlet; ``class_mean``
        (annotator, true_class, feature) Normal or Flat; and by structure
        ``log_volume`` (annotator[, true_class]), ``log_shape_free`` (annotator[,
        true_class], shape_coord = d - 1; the last log-shape is minus their sum),
        ``log_variance`` (EEI/VVI: annotator[, true_class], feature), or for
        EEE/VVV the Cholesky factor of the precision ``Sigma^-1 = U U^T``:
        ``precision_chol_logdiag`` and ``precision_chol_offdiag`` (chol_offdiag =
        d(d-1)/2). The covariance prior is a ``pm.Potential`` (the inverse-Wishart
        kernel in Sigma). Deterministic ``covariance`` (annotator, true_class,
        feature, feature_aux). Observed ``item_labels`` (item): each item's
        log-likelihood is the sum over its labels of ``log tau[m, y] +
        log N(x; mu[m, y], Sigma[m, y])`` (``az.loo`` works per item).

    Examples
    --------
    >>> from crowd_models.models import stacked_gaussian
    >>> ann = stacked_gaussian.simulate(1, n_items=200, rng=0)
    >>> fit = cm.fit_map(stacked_gaussian.build_model(ann, covariance="EEE"))
    """
    _require(annotations)
    _check_structure(covariance, PYMC_STRUCTURES)
    ann = annotations
    pri = _priors(ann, label_share_prior, class_mean_sd, covariance_prior)
    G, d, M = ann.n_classes, ann.n_features, ann.n_annotators
    counts = np.zeros((M, G))
    np.add.at(counts, (ann.annotator_idx, ann.labels), 1)
    if pri["covariance"] is None:
        _check_flat_counts(ann, counts, covariance)
    orient = _structure_parts(covariance)[2]
    coords = {
        D.ANNOTATOR: ann.annotators, D.TRUE_CLASS: ann.classes, D.FEATURE: ann.feature_names,
        D.FEATURE_AUX: ann.feature_names, D.ITEM: ann.items, "shape_coord": np.arange(d - 1),
        "chol_offdiag": np.arange(d * (d - 1) // 2),
    }
    rows_x = ann.features[ann.item_idx]
    start = _start(ann, counts, pri)
    with pm.Model(coords=coords) as model:
        a_idx = pm.Data("annotator_idx", ann.annotator_idx.astype(np.int32), dims=D.ANNOTATION)
        y_idx = pm.Data("label_idx", ann.labels.astype(np.int32), dims=D.ANNOTATION)
        i_idx = pm.Data("item_idx", ann.item_idx.astype(np.int32), dims=D.ANNOTATION)
        x = pm.Data("row_features", rows_x, dims=(D.ANNOTATION, D.FEATURE))
        prev = pm.Dirichlet("label_share", a=np.broadcast_to(pri["label_share"], (M, G)),
                            dims=(D.ANNOTATOR, D.TRUE_CLASS))
        mdims = (D.ANNOTATOR, D.TRUE_CLASS, D.FEATURE)
        if pri["mean"] is None:
            mean = pm.Flat("class_mean", dims=mdims)
        else:
            mean = pm.Normal("class_mean", mu=pri["mean"][0], sigma=pri["mean"][1], dims=mdims)
        diff = x - mean[a_idx, y_idx]  # (row, feature)
        if orient == "I":
            row_ll, cov = _diagonal_rows(covariance, diff, a_idx, y_idx, pri, M, G, d)
        else:
            row_ll, cov = _cholesky_rows(covariance, diff, a_idx, y_idx, pri, M, G, d)
        pm.Deterministic("covariance", cov, dims=(D.ANNOTATOR, D.TRUE_CLASS, D.FEATURE,
                                                   D.FEATURE_AUX))
        row_ll = row_ll - 0.5 * d * _LOG_2PI + pt.log(prev[a_idx, y_idx])
        n_items = model.dim_lengths[D.ITEM]
        item_ll = pt.zeros((n_items,))[i_idx].inc(row_ll)
        n_per_item = np.bincount(ann.item_idx, minlength=ann.n_items)
        pm.CustomDist(D.OBSERVED, item_ll, logp=lambda value, ll: ll, signature="()->()",
                      observed=n_per_item, dims=D.ITEM)
        pm.Data("n_labels", ann.n_labels(), dims=D.ANNOTATOR)
    return C.attach_protocol(model, "stacked_gaussian",
                             start=_start_values(start, covariance, M, G, d))


def _check_flat_counts(ann, counts, covariance):
    """Flat priors need every class used by every annotator (and > d items for VVV)."""
    d = ann.n_features
    if np.any(counts == 0):
        m, g = np.argwhere(counts == 0)[0]
        raise ValueError(
            f"annotator {ann.annotators[m]!r} never uses class {ann.classes[g]!r}: with "
            f"flat priors its mean and covariance have no maximum. Use the default priors.")
    if covariance == "VVV" and np.any(counts <= d):
        m, g = np.argwhere(counts <= d)[0]
        raise ValueError(
            f"annotator {ann.annotators[m]!r}, class {ann.classes[g]!r}: "
            f"{int(counts[m, g])} labelled items, but VVV with flat priors needs more than "
            f"{d} (the number of features); the likelihood is unbounded. Use the default "
            f"covariance_prior (it regularises small classes) or a shared structure.")


def _diagonal_rows(covariance, diff, a_idx, y_idx, pri, M, G, d):
    """Axis-aligned structures: each row's log density (up to -d/2 log 2 pi) and the
    covariances; registers the log variances and the covariance prior."""
    vary_vol, vary_shape, _ = _structure_parts(covariance)
    log_var = _diagonal_log_variance(covariance, vary_vol, vary_shape, M, G, d)
    lv_rows = log_var[a_idx, y_idx]
    row_ll = -0.5 * (pt.sum(lv_rows, axis=1) + pt.sum(diff ** 2 * pt.exp(-lv_rows),
                                                      axis=1))
    cov = pt.exp(log_var)[..., :, None] * pt.eye(d)
    if pri["covariance"] is not None:
        dof, scale = pri["covariance"]
        distinct = log_var if (vary_vol or vary_shape) else log_var[:, :1]
        pm.Potential("covariance_prior", pt.sum(
            -0.5 * (dof + d + 1) * pt.sum(distinct, axis=-1)
            - 0.5 * pt.sum(np.diag(scale) * pt.exp(-distinct), axis=-1)))
    return row_ll, cov


def _cholesky_rows(covariance, diff, a_idx, y_idx, pri, M, G, d):
    """EEE/VVV: the same from the Cholesky factor of each precision."""
    per_class = covariance == "VVV"
    bdims = (D.ANNOTATOR, D.TRUE_CLASS) if per_class else (D.ANNOTATOR,)
    logdiag = pm.Flat("precision_chol_logdiag", dims=(*bdims, D.FEATURE))
    offdiag = pm.Flat("precision_chol_offdiag", dims=(*bdims, "chol_offdiag"))
    rows_i, cols_i = np.tril_indices(d, -1)
    U = pt.zeros((*((M, G) if per_class else (M,)), d, d))
    U = U[..., rows_i, cols_i].set(offdiag)
    U = U[..., np.arange(d), np.arange(d)].set(pt.exp(logdiag))
    if not per_class:
        U = pt.broadcast_to(U[:, None], (M, G, d, d))
        logdiag_full = pt.broadcast_to(logdiag[:, None], (M, G, d))
    else:
        logdiag_full = logdiag
    U_rows = U[a_idx, y_idx]  # (row, d, d)
    z = pt.sum(diff[:, :, None] * U_rows, axis=1)
    row_ll = pt.sum(logdiag_full[a_idx, y_idx], axis=1) - 0.5 * pt.sum(z ** 2, axis=1)
    precision = U @ pt.swapaxes(U, -1, -2)
    cov = pt.linalg.inv(precision)
    if pri["covariance"] is not None:
        dof, scale = pri["covariance"]
        Ud = U if per_class else U[:, :1]
        ld = logdiag if per_class else logdiag[:, None]
        # log|Sigma| = -2 sum log diag(U); tr(Psi Sigma^-1) = ||Psi^(1/2) U||_F^2
        root = np.linalg.cholesky(scale).T  # Psi = root^T root
        pm.Potential("covariance_prior", pt.sum(
            (dof + d + 1) * pt.sum(ld, axis=-1)
            - 0.5 * pt.sum((root @ Ud) ** 2, axis=(-1, -2))))
    return row_ll, cov


def _diagonal_log_variance(covariance, vary_vol, vary_shape, M, G, d):
    """(annotator, true_class, feature) log variances of the axis-aligned structures."""
    if covariance in ("EEI", "VVI"):
        dims = (D.ANNOTATOR, D.TRUE_CLASS, D.FEATURE) if covariance == "VVI" else (
            D.ANNOTATOR, D.FEATURE)
        lv = pm.Flat("log_variance", dims=dims)
        return lv if covariance == "VVI" else pt.broadcast_to(lv[:, None, :], (M, G, d))
    vdims = (D.ANNOTATOR, D.TRUE_CLASS) if vary_vol else (D.ANNOTATOR,)
    log_vol = pm.Flat("log_volume", dims=vdims)
    log_vol = log_vol if vary_vol else pt.broadcast_to(log_vol[:, None], (M, G))
    if covariance in ("EII", "VII"):
        return pt.broadcast_to(log_vol[..., None], (M, G, d))
    sdims = (D.ANNOTATOR, D.TRUE_CLASS, "shape_coord") if vary_shape else (
        D.ANNOTATOR, "shape_coord")
    free = pm.Flat("log_shape_free", dims=sdims)
    log_shape = pt.concatenate([free, -pt.sum(free, axis=-1, keepdims=True)], axis=-1)
    if not vary_shape:
        log_shape = pt.broadcast_to(log_shape[:, None, :], (M, G, d))
    return log_vol[..., None] + log_shape


def _start(ann, counts, pri):
    """Per-annotator class means and covariances (pooled within annotator),
    shrunk towards the prior where classes are small: a start for find_MAP."""
    M, G, d = counts.shape[0], counts.shape[1], ann.n_features
    X = ann.features[ann.item_idx]
    means = np.zeros((M, G, d))
    covs = np.zeros((M, G, d, d))
    overall = np.cov(ann.features.T, bias=True).reshape(d, d)
    overall = overall + 1e-6 * np.trace(overall) / d * np.eye(d)
    for m in range(M):
        for g in range(G):
            rows = (ann.annotator_idx == m) & (ann.labels == g)
            n = rows.sum()
            means[m, g] = X[rows].mean(axis=0) if n else ann.features.mean(axis=0)
            S = np.cov(X[rows].T, bias=True).reshape(d, d) if n > 1 else np.zeros((d, d))
            covs[m, g] = (n * S + (d + 2) * overall) / (n + d + 2)
    prev = (counts + pri["label_share"] - 1)
    prev = np.clip(prev, 1e-6, None)
    return {"label_share": prev / prev.sum(axis=1, keepdims=True), "class_mean": means,
            "cov": covs}


def _start_values(start, covariance, M, G, d):
    covs = start["cov"]
    out = {"label_share": start["label_share"], "class_mean": start["class_mean"]}
    vary_vol, vary_shape, orient = _structure_parts(covariance)
    if orient == "I":
        lv = np.log(np.einsum("mgff->mgf", covs))
        if covariance == "EEI":
            out["log_variance"] = lv.mean(axis=1)
        elif covariance == "VVI":
            out["log_variance"] = lv
        else:
            vol = lv.mean(axis=-1)
            out["log_volume"] = vol if vary_vol else vol.mean(axis=1)
            if covariance in ("VEI", "EVI"):
                shape = lv - vol[..., None]
                shape = shape if vary_shape else shape.mean(axis=1)
                out["log_shape_free"] = shape[..., :-1]
    else:
        S = covs if covariance == "VVV" else covs.mean(axis=1)
        U = np.linalg.cholesky(np.linalg.inv(S))
        r, c = np.tril_indices(d, -1)
        out["precision_chol_logdiag"] = np.log(np.einsum("...ff->...f", U))
        out["precision_chol_offdiag"] = U[..., r, c]
    return out


# ------------------------------------------------------ stacking posteriors
def base_learners_from_posterior(fit, annotations: Annotations) -> dict:
    """``{annotator: GaussianClassifier}`` from a MAP fit (chain=1, draw=1) or
    the posterior mean of a NUTS fit of :func:`build_model`.

    Examples
    --------
    >>> from crowd_models.models import stacked_gaussian
    >>> ann = stacked_gaussian.simulate(1, n_items=200, rng=0)
    >>> fit = cm.fit_map(stacked_gaussian.build_model(ann, covariance="EEE"))
    >>> base = stacked_gaussian.base_learners_from_posterior(fit, ann)
    >>> base[ann.annotators[0]].means
    """
    from crowd_models._fits import posterior_of

    post = posterior_of(fit)
    mean_over = [d for d in (D.CHAIN, D.DRAW) if d in post.dims]
    post = post.mean(mean_over)
    return {
        a: GaussianClassifier(annotations.classes, post["label_share"].sel(annotator=a).values,
                              post["class_mean"].sel(annotator=a).values,
                              post["covariance"].sel(annotator=a).values)
        for a in annotations.annotators
    }


def stack_posterior(fit, weights, X, *, classes=None, max_draws: int | None = None,
                    rng=None) -> xr.DataArray:
    """Stack every posterior draw of the base learners (eqs. 3-5 applied draw
    by draw) and classify ``X``: the predictive class probabilities with
    uncertainty, a DataArray (sample, item, true_class). Average over
    ``sample`` for the posterior predictive probabilities; its spread is the
    parameters' uncertainty. ``weights`` are fixed (e.g. from
    :func:`annotator_weights`), or a (sample, annotator) array to propagate
    the weights' own uncertainty (e.g. bootstrap weights, cycled).

    Examples
    --------
    >>> from crowd_models.models import stacked_gaussian
    >>> ann = stacked_gaussian.simulate(1, n_items=200, rng=0)
    >>> model = stacked_gaussian.build_model(ann, covariance="EEE")
    >>> idata = cm.sample(model, draws=200, tune=200, chains=2)
    >>> weights = stacked_gaussian.annotator_weights(ann, "MV")
    >>> prob = stacked_gaussian.stack_posterior(idata, weights, ann.features, max_draws=100, rng=0)
    >>> prob.mean("sample")[:3]
    """
    from crowd_models._fits import posterior_of

    post = posterior_of(fit).stack(sample=(D.CHAIN, D.DRAW))
    names = list(post[D.ANNOTATOR].values)
    n_samples = post.sizes["sample"]
    idx = np.arange(n_samples)
    if max_draws is not None and max_draws < n_samples:
        idx = np.sort(np.random.default_rng(rng).choice(n_samples, max_draws, replace=False))
    W = np.asarray(weights.values if isinstance(weights, xr.DataArray) and weights.ndim == 2
                   else 0)
    if isinstance(weights, xr.DataArray) and weights.ndim == 2:
        W = weights.transpose(..., D.ANNOTATOR).sel({D.ANNOTATOR: names}).values
        W = W / W.sum(axis=1, keepdims=True)
    else:
        W = _weights_vector(weights, names)[None, :]
    X = _as_features(X)
    prev = post["label_share"].transpose("sample", D.ANNOTATOR, D.TRUE_CLASS).values
    mean = post["class_mean"].transpose("sample", D.ANNOTATOR, D.TRUE_CLASS, D.FEATURE).values
    cov = post["covariance"].transpose("sample", D.ANNOTATOR, D.TRUE_CLASS, D.FEATURE,
                                       D.FEATURE_AUX).values
    classes = post[D.TRUE_CLASS].values if classes is None else classes
    out = np.empty((len(idx), len(X), len(classes)))
    for k, s in enumerate(idx):
        w = W[k % len(W)]
        ens = GaussianClassifier(pd.Index(classes), w @ prev[s],
                                 np.einsum("m,mgf->gf", w, mean[s]),
                                 np.einsum("m,mgfh->gfh", w, cov[s]))
        out[k] = ens.predict_proba(X)
    return xr.DataArray(out, dims=("sample", D.ITEM, D.TRUE_CLASS),
                        coords={D.TRUE_CLASS: classes}, name="item_class_prob")


# ----------------------------------------------------------------- simulate
def simulate(
    scenario: int = 1,
    *,
    n_items: int = 300,
    n_experts: int = 4,
    n_novices: int = 3,
    expert_alpha=(18.0, 1.0),
    novice_alpha=(3.0, 1.5),
    means=None,
    covariances=None,
    prevalence=None,
    rng=None,
) -> Annotations:
    """The paper's section-4 design: Gaussian classes, noisy annotators.

    Three classes in two dimensions with means (0, 0), (4, 0) and (2, 3)
    (or ``means``); scenario 1 has identity covariances, scenario 2
    class-wise different ones (a tight round class, an elongated positively
    correlated one and a wide negatively correlated one), or
    ``covariances``. Each annotator's confusion row for true class g is drawn
    from a Dirichlet with concentration ``alpha_diag`` on g and ``alpha_off``
    on each other class (Dirichlet-multinomial noisy labels): experts
    ``expert_alpha = (18, 1)`` (mean accuracy 0.9), novices ``novice_alpha
    = (3, 1.5)`` (mean accuracy 0.5). Every annotator labels every item.

    Returns Annotations with features, ``gold`` (the true classes) and
    ``truth`` (``prevalence``, ``class_mean``, ``covariance``, ``confusion``
    and ``is_expert``). The annotators are ``expert_1..`` and ``novice_1..``.

    Examples
    --------
    >>> from crowd_models.models import stacked_gaussian
    >>> ann = stacked_gaussian.simulate(2, n_items=300, n_experts=2, n_novices=3, rng=0)
    """
    rng = np.random.default_rng(rng)
    if scenario not in (1, 2):
        raise ValueError(f"scenario must be 1 (identity covariances) or 2 (class-wise "
                         f"different), got {scenario!r}.")
    mu = np.array([[0.0, 0.0], [4.0, 0.0], [2.0, 3.0]]) if means is None else np.asarray(
        means, float)
    G, d = mu.shape
    if covariances is None:
        if scenario == 1:
            covariances = np.broadcast_to(np.eye(d), (G, d, d))
        else:
            if (G, d) != (3, 2):
                raise ValueError("scenario 2's default covariances are for 3 classes in 2-D; "
                                 "pass covariances=.")
            covariances = np.array([[[0.5, 0.0], [0.0, 0.5]],
                                    [[2.0, 0.9], [0.9, 0.8]],
                                    [[1.5, -0.8], [-0.8, 1.2]]])
    cov = np.asarray(covariances, float)
    prev = np.full(G, 1.0 / G) if prevalence is None else np.asarray(prevalence, float)
    z = rng.choice(G, size=n_items, p=prev)
    X = np.empty((n_items, d))
    for g in range(G):
        rows = z == g
        X[rows] = rng.multivariate_normal(mu[g], cov[g], size=rows.sum())
    J = n_experts + n_novices
    conf = np.empty((J, G, G))
    for j in range(J):
        diag, off = expert_alpha if j < n_experts else novice_alpha
        alpha = np.full((G, G), float(off))
        np.fill_diagonal(alpha, float(diag))
        conf[j] = np.stack([rng.dirichlet(a) for a in alpha])
    names = [f"expert_{j + 1}" for j in range(n_experts)] + [
        f"novice_{j + 1}" for j in range(n_novices)]
    labels = np.empty((n_items, J), dtype=int)
    for j in range(J):
        cum = conf[j, z].cumsum(axis=1)
        labels[:, j] = np.minimum((cum < rng.random((n_items, 1))).sum(axis=1), G - 1)
    classes = list(range(G))
    wide = pd.DataFrame(labels, columns=names)
    ann = Annotations.from_wide(wide, classes=classes, features=X,
                                gold=pd.Series(z, index=wide.index))
    truth = xr.Dataset(
        {
            "prevalence": (D.TRUE_CLASS, prev),
            "class_mean": ((D.TRUE_CLASS, D.FEATURE), mu),
            "covariance": ((D.TRUE_CLASS, D.FEATURE, D.FEATURE_AUX), cov),
            "confusion": ((D.ANNOTATOR, D.TRUE_CLASS, D.LABEL_CLASS), conf),
            "is_expert": (D.ANNOTATOR, np.arange(J) < n_experts),
        },
        coords={D.ANNOTATOR: names, D.TRUE_CLASS: classes,
                D.FEATURE: ann.feature_names, D.FEATURE_AUX: ann.feature_names},
        attrs={"scenario": scenario, "expert_alpha": list(expert_alpha),
               "novice_alpha": list(novice_alpha)},
    )
    from dataclasses import replace

    return replace(ann, truth=truth.sel({D.ANNOTATOR: list(ann.annotators)}))
