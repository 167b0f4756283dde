"""The cumulative ordinal model (Raykar et al. 2010, JMLR 11, sec. 8.2, after Frank
& Hall 2001).

Raykar, Yu, Zhao, Valadez, Florin, Bogoni and Moy's model: K - 1 binary
problems "is the level above c?" (c = 1 .. K-1), each a two-coin model
(:mod:`crowd_models.models.two_coin`) with its own per-annotator
``sensitivity`` and ``specificity`` (annotator, threshold) and its own
``threshold_prevalence`` (threshold) = P(level > c) or logistic
classifier ``coef`` (feature, threshold) and ``intercept`` (threshold).
The problems share no parameter, so the model is their product; EM is
K - 1 two-coin EMs and MAP = EM as for the two-coin family. The class
probabilities are differences of the fitted exceedance probabilities,
``P(level = c) = P(level > c - 1) - P(level > c)`` (``exceed_prob``,
item x threshold). The problems are fitted separately, so nothing keeps
``exceed_prob`` decreasing in c and a difference can be negative.
**Repair rule** (used by :func:`em`, ``build_model`` and
:func:`class_probabilities`): clip the differences at zero and
renormalise each item's row (clip-and-renormalise); :func:`negative_differences`
counts how often it was needed, and ``em`` stores the counts in its attrs
and warns with them. On real data the repair is common (most items of a
4-level set), so for class probabilities and their intervals the latent
variant is the coherent choice.

The model's ``item_labels`` log-density is the *sum* of the K - 1 binary
problems' per-item marginal log-likelihoods. It is a composite
likelihood, not a distribution of the observed labels: every label enters
K - 1 times (as "above c?" for each c), and the binary answers of one
label are treated as independent although they are deterministic
functions of it. Its values are therefore not comparable with the
log-likelihoods of proper models of the labels (``az.compare`` against
Dawid-Skene or the latent variant would be meaningless), and its NUTS
posterior is over-confident. Use it for point estimates and
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
import pymc as pm
import pytensor.tensor as pt
import xarray as xr
from scipy.special import expit

from crowd_models import _dims as D
from crowd_models._fits import posterior_of
from crowd_models._text import warn
from crowd_models.data import Annotations
from crowd_models.models import _common as C
from crowd_models.models import _evidence, _registry, two_coin
from crowd_models.models.ordinal.levels import (
    DEFAULT_PRIORS,
    level_coords,
    require_levels,
    threshold_names,
)

FLAT_PRIORS = dict(
    sensitivity_prior=(1.0, 1.0),
    specificity_prior=(1.0, 1.0),
    prevalence_prior=(1.0, 1.0),
    coef_precision=0.0,
    intercept_precision=0.0,
)
"""Cumulative variant: plain maximum likelihood."""


def binary_annotations(annotations: Annotations, threshold: int) -> Annotations:
    """The binary problem "label > classes[threshold]" (threshold = 0..K-2) as two-coin
    Annotations with classes [0, 1]; gold is derived likewise.

    Examples
    --------
    >>> from crowd_models.models import ordinal
    >>> above_two = ordinal.binary_annotations(cm.datasets.load_anesthesia(), threshold=1)
    >>> above_two.class_counts()
    """
    gold = None
    if annotations.gold is not None:
        gold = np.where(annotations.gold < 0, -1, (annotations.gold > threshold).astype(int))
    return replace(annotations, labels=(annotations.labels > threshold).astype(np.int64),
                   classes=pd.Index([0, 1]), gold=gold, truth=None)


# ------------------------------------------------------------------ priors
def _beta_grid(value, name: str, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    """A Beta prior (a, b); a and b broadcast to ``shape`` (annotator, threshold)."""
    try:
        a, b = value
    except (TypeError, ValueError):
        raise TypeError(
            f"{name} must be a pair (a, b) of Beta parameters, each a number or an array that "
            f"broadcasts to (annotator, threshold) = {shape}; got {value!r}."
        ) from None
    try:
        a = np.broadcast_to(np.asarray(a, dtype=float), shape).copy()
        b = np.broadcast_to(np.asarray(b, dtype=float), shape).copy()
    except ValueError:
        raise ValueError(
            f"{name}: a and b must broadcast to {shape} (annotator, threshold), got shapes "
            f"{np.shape(value[0])} and {np.shape(value[1])}; give numbers, ({shape[0]}, 1) "
            f"arrays per annotator or ({shape[-1]},) arrays per threshold."
        ) from None
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))) or np.any(a < 1) or np.any(b < 1):
        raise ValueError(
            f"{name} needs finite a >= 1 and b >= 1 so that the posterior mode exists (a = b = "
            f"1 is flat: plain maximum likelihood); got a={a.ravel()[:5]}, b={b.ravel()[:5]}."
        )
    return a, b


def _cumulative_priors(ann, sensitivity_prior, specificity_prior, prevalence_prior,
                       coef_precision, intercept_precision) -> list[dict]:
    """One two-coin keyword set per threshold. ``coef_precision`` is one value
    for every threshold, or "auto" (each threshold's two-coin EM chooses its
    own: :func:`em`; :func:`build_model` passes them on with
    :func:`_with_precisions`)."""
    _registry.refuse_unused("ordinal", "cumulative", ann.features is not None,
                            prevalence_prior=prevalence_prior, coef_precision=coef_precision,
                            intercept_precision=intercept_precision)
    J, T = ann.n_annotators, ann.n_classes - 1
    sa, sb = _beta_grid(sensitivity_prior, "sensitivity_prior", (J, T))
    pa, pb = _beta_grid(specificity_prior, "specificity_prior", (J, T))
    if prevalence_prior is None:
        prevalence_prior = (2.0, 2.0)
    qa, qb = _beta_grid(prevalence_prior, "prevalence_prior", (1, T))
    out = []
    for c in range(T):
        kw = dict(sensitivity_prior=(sa[:, c], sb[:, c]), specificity_prior=(pa[:, c], pb[:, c]),
                  prevalence_prior=(qa[0, c], qb[0, c]), coef_precision=coef_precision,
                  intercept_precision=intercept_precision)
        out.append(kw)
    # the two-coin checks of the classifier priors, with their messages
    auto = _evidence.is_auto(coef_precision)
    two_coin.parse_priors(binary_annotations(ann, 0),
                          **{**out[0], **({"coef_precision": 1.0} if auto else {})})
    return out


def _with_precisions(pri_list, precisions) -> list[dict]:
    """``pri_list`` with each threshold's ``coef_precision`` from ``precisions``
    (one number per threshold: the ones :func:`em` chose at "auto")."""
    return [{**kw, "coef_precision": float(a)} for kw, a in zip(pri_list, precisions, strict=True)]


# ------------------------------------------------- cumulative: the pieces
def _survival_to_classes(exceed):
    """(..., T) exceedance probabilities -> (..., K) raw differences (may be < 0)."""
    shape = exceed.shape[:-1]
    surv = np.concatenate([np.ones((*shape, 1)), exceed, np.zeros((*shape, 1))], axis=-1)
    return surv[..., :-1] - surv[..., 1:]


def class_probabilities(exceed_prob) -> tuple[np.ndarray, np.ndarray]:
    """(repaired, raw) class probabilities from exceedance probabilities (..., threshold).

    ``raw[..., c] = P(level > c - 1) - P(level > c)`` (with P(level > 0) = 1
    and P(level > K) = 0); each row sums to one but may hold negative entries.
    The repair rule clips them at zero and renormalises the row.

    Examples
    --------
    >>> import numpy as np
    >>> from crowd_models.models import ordinal
    >>> repaired, raw = ordinal.class_probabilities(np.array([[0.9, 0.95, 0.2]]))
    >>> raw  # P(level > 1) < P(level > 2): the second class gets -0.05, repaired to 0
    """
    raw = _survival_to_classes(np.asarray(exceed_prob, dtype=float))
    clipped = np.clip(raw, 0.0, None)
    return clipped / clipped.sum(axis=-1, keepdims=True), raw


def predict_draws(post: xr.Dataset, features: np.ndarray) -> np.ndarray:
    """P(truth = each level | x) under each draw of a cumulative fit's classifiers
    (one logistic regression per threshold, ``coef`` (feature, threshold)), their
    differences repaired as the fit's (:func:`class_probabilities`): (sample,
    item, level). :func:`crowd_models.predict` checks the features and summarises
    the draws.

    Examples
    --------
    >>> import numpy as np
    >>> from crowd_models.models import ordinal
    >>> ann = cm.datasets.load_web_search()
    >>> X = np.random.default_rng(0).standard_normal((ann.n_items, 2))
    >>> fit = ordinal.em(ann.with_features(X))
    >>> ordinal.predict_draws(fit, X).shape
    """
    dims = (D.FEATURE, D.THRESHOLD)
    coef = post["coef"].stack(sample=(D.CHAIN, D.DRAW)).transpose("sample", *dims).values
    intercept = post["intercept"].stack(sample=(D.CHAIN, D.DRAW)).transpose(
        "sample", D.THRESHOLD).values
    eta = np.einsum("if,sft->sit", np.asarray(features, dtype=float), coef) + intercept[:, None]
    return class_probabilities(expit(eta))[0]


def _repair_pt(exceed):
    ones = pt.ones_like(exceed[:, :1])
    surv = pt.concatenate([ones, exceed, pt.zeros_like(ones)], axis=1)
    clipped = pt.maximum(surv[:, :-1] - surv[:, 1:], 0.0)
    return clipped / clipped.sum(axis=1, keepdims=True)


NEGATIVE_TOL = 1e-12
"""A raw class probability counts as negative below -NEGATIVE_TOL (rounding)."""


def negative_differences(fit) -> dict:
    """How often the cumulative model's class-probability differences go negative.

    ``fit``: a cumulative EM Dataset or MAP/NUTS DataTree (with ``exceed_prob``).
    Returns ``n_cells`` (item x class cells with a negative difference, summed
    over draws and divided by the number of draws), ``n_items`` (items with
    at least one, likewise per draw), ``share_items`` (n_items / items) and
    ``most_negative`` (the smallest raw difference seen).

    Examples
    --------
    >>> from crowd_models.models import ordinal
    >>> ordinal.negative_differences(ordinal.em(cm.datasets.load_anesthesia()))
    """
    post = posterior_of(fit)
    if "exceed_prob" not in post:
        raise ValueError("negative_differences needs a cumulative ordinal fit (with "
                         "exceed_prob); this fit has none.")
    ex = post["exceed_prob"].transpose(..., D.ITEM, D.THRESHOLD).values
    ex = ex.reshape(-1, *ex.shape[-2:])
    _, raw = class_probabilities(ex)
    neg = raw < -NEGATIVE_TOL
    S, n_items = ex.shape[0], ex.shape[1]
    return {
        "n_cells": float(neg.sum() / S),
        "n_items": float(neg.any(axis=-1).sum() / S),
        "share_items": float(neg.any(axis=-1).sum() / S / n_items),
        "most_negative": float(raw.min()),
    }


def _composite_logp(value, joint):
    return pt.logsumexp(joint, axis=-1).sum(axis=-1)


def _cumulative_start(ann, priors_by_threshold) -> dict:
    starts = [two_coin.majority_vote_start(binary_annotations(ann, c), **kw)
              for c, kw in enumerate(priors_by_threshold)]
    out = {"sensitivity": np.stack([s["sensitivity"] for s in starts], axis=-1),
           "specificity": np.stack([s["specificity"] for s in starts], axis=-1)}
    if ann.features is None:
        out["threshold_prevalence"] = np.array([s["prevalence"] for s in starts])
    else:
        out["coef"] = np.stack([s["coef"] for s in starts], axis=-1)
        out["intercept"] = np.array([s["intercept"] for s in starts])
    return out


def _build_cumulative(ann, pri_list) -> pm.Model:
    T = ann.n_classes - 1
    pri = [two_coin.parse_priors(binary_annotations(ann, 0), **kw) for kw in pri_list]
    sa = np.stack([kw["sensitivity_prior"][0] for kw in pri_list], axis=-1)
    sb = np.stack([kw["sensitivity_prior"][1] for kw in pri_list], axis=-1)
    pa = np.stack([kw["specificity_prior"][0] for kw in pri_list], axis=-1)
    pb = np.stack([kw["specificity_prior"][1] for kw in pri_list], axis=-1)
    qa = np.array([kw["prevalence_prior"][0] for kw in pri_list])
    qb = np.array([kw["prevalence_prior"][1] for kw in pri_list])
    dims = (D.ANNOTATOR, D.THRESHOLD)
    with pm.Model(coords=level_coords(ann)) as model:
        sens = pm.Beta("sensitivity", sa, sb, dims=dims)
        spec = pm.Beta("specificity", pa, pb, dims=dims)
        idx = C.long_table_data(ann)
        above = pt.gt(idx["label_idx"][:, None], pt.arange(T)[None, :])  # (annotation, T)
        s = sens[idx["annotator_idx"]]
        p = spec[idx["annotator_idx"]]
        per_row = pt.stack([pt.switch(above, pt.log(1 - p), pt.log(p)),
                            pt.switch(above, pt.log(s), pt.log(1 - s))], axis=-1)
        n_items = model.dim_lengths[D.ITEM]
        joint = pt.zeros((n_items, T, 2))[idx["item_idx"]].inc(per_row)
        if ann.features is None:
            prev = pm.Beta("threshold_prevalence", qa, qb, dims=D.THRESHOLD)
            log_prior = pt.stack([pt.log1p(-prev), pt.log(prev)], axis=-1)[None]
        else:
            X = pm.Data("features", ann.features, dims=(D.ITEM, D.FEATURE))
            gammas = np.stack([p["gamma"] for p in pri])  # (threshold, feature, feature)
            gamma, tau = gammas[0], pri[0]["tau"]
            cdims = (D.FEATURE, D.THRESHOLD)
            if np.all(gammas == 0):
                coef = pm.Flat("coef", dims=cdims)
            elif all(np.allclose(g, np.diag(np.diag(g))) for g in gammas):
                # a precision per feature and threshold ("auto": one per threshold)
                sd = 1 / np.sqrt(np.diagonal(gammas, axis1=1, axis2=2).T)
                coef = pm.Normal("coef", 0.0, sigma=sd, dims=cdims)
            else:
                # each threshold's column ~ N(0, gamma^-1), independently (a matrix
                # precision is the user's, one for every threshold)
                coef = pm.MatrixNormal("coef", mu=np.zeros((len(gamma), T)),
                                       rowcov=np.linalg.inv(gamma), colcov=np.eye(T), dims=cdims)
            if tau == 0:
                intercept = pm.Flat("intercept", dims=D.THRESHOLD)
            else:
                intercept = pm.Normal("intercept", 0.0, sigma=1 / np.sqrt(tau), dims=D.THRESHOLD)
            eta = X @ coef + intercept[None, :]
            log_prior = pt.stack([-pt.softplus(eta), -pt.softplus(-eta)], axis=-1)
        joint = joint + log_prior
        n_per_item = np.bincount(ann.item_idx, minlength=ann.n_items)
        pm.CustomDist(D.OBSERVED, joint, logp=_composite_logp, signature="(t,k)->()",
                      observed=n_per_item, dims=D.ITEM)
        exceed = pm.Deterministic("exceed_prob", pt.special.softmax(joint, axis=-1)[..., 1],
                                  dims=(D.ITEM, D.THRESHOLD))
        pm.Deterministic("item_class_prob", _repair_pt(exceed), dims=(D.ITEM, D.TRUE_CLASS))
        pm.Data("n_labels", ann.n_labels(), dims=D.ANNOTATOR)
    return model


def build_model(
    annotations: Annotations,
    *,
    sensitivity_prior=DEFAULT_PRIORS["sensitivity_prior"],
    specificity_prior=DEFAULT_PRIORS["specificity_prior"],
    prevalence_prior=DEFAULT_PRIORS["prevalence_prior"],
    coef_precision=DEFAULT_PRIORS["coef_precision"],
    intercept_precision=DEFAULT_PRIORS["intercept_precision"],
) -> pm.Model:
    """The cumulative ordinal model in PyMC (the model of
    :func:`crowd_models.models.ordinal.build_model` with ``variant="cumulative"``).

    Parameters
    ----------
    annotations : Annotations
        Classes 1..K (K >= 2), with or without features.
    sensitivity_prior, specificity_prior, prevalence_prior : optional
        As in :func:`crowd_models.models.ordinal.build_model`.
    coef_precision, intercept_precision : optional
        As in :func:`crowd_models.models.ordinal.build_model`.

    Returns
    -------
    pymc.Model
        K - 1 two-coin problems, their composite likelihood as ``item_labels``.

    Examples
    --------
    >>> from crowd_models.models.ordinal import cumulative
    >>> model = cumulative.build_model(cm.datasets.load_anesthesia())
    """
    require_levels(annotations, "the cumulative ordinal model")
    annotations = annotations.standardized()
    pri_list = _cumulative_priors(annotations, sensitivity_prior, specificity_prior,
                                  prevalence_prior, coef_precision, intercept_precision)
    if _evidence.is_auto(coef_precision) and annotations.features is not None:
        chosen = _evidence.resolved(coef_precision, annotations, lambda: em(
            annotations, sensitivity_prior=sensitivity_prior,
            specificity_prior=specificity_prior, prevalence_prior=prevalence_prior,
            coef_precision=coef_precision, intercept_precision=intercept_precision))
        pri_list = _with_precisions(pri_list, np.broadcast_to(chosen, len(pri_list)))
    return C.attach_protocol(_build_cumulative(annotations, pri_list), "ordinal", "cumulative",
                             start=_cumulative_start(annotations, pri_list), em=em,
                             annotations=annotations, arguments=locals())


# ---------------------------------------------------------------------- EM
_DIMS = {
    "sensitivity": (D.ANNOTATOR, D.THRESHOLD),
    "specificity": (D.ANNOTATOR, D.THRESHOLD),
    "threshold_prevalence": (D.THRESHOLD,),
    "coef": (D.FEATURE, D.THRESHOLD),
    "intercept": (D.THRESHOLD,),
    "exceed_prob": (D.ITEM, D.THRESHOLD),
    "item_class_prob": (D.ITEM, D.TRUE_CLASS),
}


def em(
    annotations: Annotations,
    *,
    sensitivity_prior=DEFAULT_PRIORS["sensitivity_prior"],
    specificity_prior=DEFAULT_PRIORS["specificity_prior"],
    prevalence_prior=DEFAULT_PRIORS["prevalence_prior"],
    coef_precision=DEFAULT_PRIORS["coef_precision"],
    intercept_precision=DEFAULT_PRIORS["intercept_precision"],
    tol: float = 1e-10,
    max_iter: int = 10_000,
    accelerate: bool = True,
    classifier=None,
    regularization="auto",
) -> xr.Dataset:
    """The cumulative model's MAP-EM: K - 1 two-coin EMs (:func:`two_coin.em`), one
    per binary problem "level > c", each from its own majority-vote start
    (``tol``, ``max_iter`` and ``accelerate`` are passed on). With features and
    ``coef_precision="auto"`` (the default) each of them chooses its own
    precision by its crowd labels' evidence, as :func:`two_coin.em` does.

    ``classifier``: K - 1 scikit-learn classifiers, one per threshold in
    threshold order, each with ``fit(X, y, sample_weight=...)`` and
    ``predict_proba``, in place of the logistic regressions (Raykar et al.
    sec. 8.2 with sec. 6.3's any classifier; needs features, given as they
    are). Threshold c's two-coin EM fits its classifier in place to the soft
    labels of "level > c" (:func:`two_coin.em` with ``classifier=``), so the
    list predicts new items afterwards: :func:`classifiers_predict`.
    ``regularization`` is passed on: at "auto" each threshold chooses its
    classifier's own regularisation parameter from its binary problem.
    ``attrs`` then hold, one entry per threshold, ``classifier`` and what its
    EM recorded (``classifier_tuning`` and, where a grid was searched,
    ``classifier_parameter``, ``classifier_grid``, ``classifier_brier``);
    the fit has no ``coef``/``intercept`` and ``log_posterior`` is NaN.
    ``fit_map`` and ``sample`` keep the logistic regressions.

    Returns a Dataset with the posterior's names and dims (chain=1, draw=1):
    ``sensitivity``, ``specificity`` (annotator, threshold),
    ``threshold_prevalence`` (threshold) or ``coef``/``intercept``,
    ``exceed_prob`` (item, threshold), ``item_class_prob`` (repaired
    differences, see the module docstring); the
    Beta approximations ``sensitivity_alpha``/``_beta``,
    ``specificity_alpha``/``_beta`` (annotator, threshold) and ``n_labels``.
    ``attrs``: ``log_posterior`` (the model's ``logp(jacobian=False)``, the sum
    over thresholds), ``log_likelihood`` (the composite one), ``n_iter``
    (the largest over thresholds), ``converged``, and the counts of
    :func:`negative_differences` (``negative_cells``, ``negative_items``); at
    "auto" with features ``coef_precision`` (a list, one per threshold),
    ``evidence_rounds`` (the most any threshold took) and
    ``evidence_converged`` (whether all settled).
    When the repair was needed (any negative difference) a ``UserWarning``
    gives those counts and points to the latent variant.

    Examples
    --------
    >>> from crowd_models.models.ordinal import cumulative
    >>> fit = cumulative.em(cm.datasets.load_anesthesia())
    >>> cm.report.annotator_summary(fit)
    """
    require_levels(annotations, "the cumulative ordinal model")
    classifiers = _threshold_classifiers(classifier, annotations)
    if classifier is None:
        annotations = annotations.standardized()
    pri_list = _cumulative_priors(annotations, sensitivity_prior, specificity_prior,
                                  prevalence_prior, coef_precision, intercept_precision)
    fits = [two_coin.em(binary_annotations(annotations, c), **kw, tol=tol, max_iter=max_iter,
                        accelerate=accelerate, classifier=each, regularization=regularization)
            for c, (kw, each) in enumerate(zip(pri_list, classifiers, strict=True))]

    def stacked(name, axis):
        return np.stack([f[name].values[0, 0] if "chain" in f[name].dims else f[name].values
                         for f in fits], axis=axis)

    params = {"sensitivity": stacked("sensitivity", -1),
              "specificity": stacked("specificity", -1)}
    if annotations.features is None:
        params["threshold_prevalence"] = stacked("prevalence", 0)
    elif classifier is None:
        params["coef"] = stacked("coef", -1)
        params["intercept"] = stacked("intercept", 0)
    exceed = np.stack([f["item_class_prob"].values[0, 0, :, 1] for f in fits], axis=-1)
    prob, raw = class_probabilities(exceed)
    neg = raw < -NEGATIVE_TOL
    if neg.any():
        warn(
            f"the cumulative ordinal model's class probabilities went negative for "
            f"{int(neg.any(axis=1).sum())} of {len(neg)} items ({int(neg.sum())} cells): its "
            f"K - 1 binary problems are fitted separately, so P(level > c) need not decrease "
            f"in c. Those rows were clipped at zero and renormalised (attrs['repair']), so "
            f"their item_class_prob is a repair, not a model probability; "
            f"variant='latent' is the coherent model of the levels.")
    extra = {name: ((D.ANNOTATOR, D.THRESHOLD), stacked(name, -1)) for name in (
        "sensitivity_alpha", "sensitivity_beta", "specificity_alpha", "specificity_beta")}
    extra["n_labels"] = ((D.ANNOTATOR,), annotations.n_labels())
    ds = C.em_dataset(
        annotations, {**params, "exceed_prob": exceed, "item_class_prob": prob}, _DIMS,
        extra=extra,
        attrs={
            "family": "ordinal", "variant": "cumulative", "method": "em",
            "log_likelihood": float(sum(f.attrs["log_likelihood"] for f in fits)),
            "log_posterior": float(sum(f.attrs["log_posterior"] for f in fits)),
            "n_iter": int(max(f.attrs["n_iter"] for f in fits)),
            "converged": int(all(f.attrs["converged"] for f in fits)),
            **_stop_reason(fits, threshold_names(annotations)),
            "negative_cells": int(neg.sum()),
            "negative_items": int(neg.any(axis=1).sum()),
            "repair": "clip-and-renormalise",
            **_evidence_attrs(fits),
            **_classifier_attrs(fits),
        },
    )
    return ds.assign_coords({D.THRESHOLD: threshold_names(annotations)})


def _stop_reason(fits, names) -> dict:
    """Where some threshold's EM did not converge, ``stop_reason`` names those
    thresholds (the warnings of their own EMs say why)."""
    stopped = [str(name) for f, name in zip(fits, names, strict=True) if not f.attrs["converged"]]
    if not stopped:
        return {}
    return {"stop_reason": f"the binary EMs of the thresholds {', '.join(stopped)} did not "
                           f"converge (see their own warnings)."}


def _threshold_classifiers(classifier, annotations) -> list:
    """``classifier`` as one entry per threshold (None for each without one); a
    ValueError naming the fix unless it is a list of K - 1 estimators."""
    T = annotations.n_classes - 1
    if classifier is None:
        return [None] * T
    if not isinstance(classifier, list | tuple):
        raise ValueError(
            f"the cumulative ordinal model fits one binary classifier per threshold, "
            f"{T} here, each in place: give classifier=[sklearn.base.clone(est) for _ in "
            f"range({T})] and predict new items with cumulative.classifiers_predict(that "
            f"list, X); or use crowd_models.sklearn.CrowdClassifier(family='ordinal', "
            f"classifier=est), which does both.")
    if len(classifier) != T or len({id(c) for c in classifier}) != T:
        raise ValueError(
            f"classifier= needs {T} distinct estimators, one per threshold of the "
            f"{annotations.n_classes} levels (each is fitted in place); got "
            f"{len(classifier)} with {len({id(c) for c in classifier})} distinct.")
    return list(classifier)


def _classifier_attrs(fits) -> dict:
    """With a ``classifier``: each threshold's EM's classifier attributes, a list
    in threshold order (arrays as lists, so that a saved fit keeps them)."""
    if "classifier" not in fits[0].attrs:
        return {}
    keys = [k for k in fits[0].attrs if k == "classifier" or k.startswith("classifier_")]
    return {k: [np.asarray(f.attrs[k]).tolist() if k == "classifier_brier" else f.attrs.get(k)
                for f in fits] for k in keys}


def classifiers_predict(classifiers, features) -> np.ndarray:
    """P(level | x) of new items, (item, level), from the threshold classifiers that
    :func:`em` fitted (``classifier=[...]``): each one's P(level > c | x), the
    differences repaired as :func:`class_probabilities` does.

    ``features``: (item, feature) as the classifiers were fitted on (em passes
    them on as given).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from crowd_models.models import ordinal
    >>> from crowd_models.models.ordinal import cumulative
    >>> ann = ordinal.simulate(variant="cumulative", sensitivity=[[0.9, 0.8]] * 4,
    ...                        specificity=[[0.8, 0.9]] * 4, n_items=200, rng=0)
    >>> X = np.random.default_rng(0).normal(size=(200, 2)) + ann.gold[:, None]
    >>> trees = [DecisionTreeClassifier(max_depth=3) for _ in range(2)]
    >>> fit = cumulative.em(ann.with_features(X), classifier=trees, tol=1e-6)
    >>> cumulative.classifiers_predict(trees, X[:3])
    """
    X = np.asarray(features, dtype=float)
    exceed = np.column_stack([
        np.asarray(c.predict_proba(X), dtype=float)[:, list(c.classes_).index(1)]
        for c in classifiers])
    return class_probabilities(exceed)[0]


def pooled_precision(annotations: Annotations) -> float:
    """A gold-free precision for the latent variant's ordered-logit coefficients
    (its "auto"): this model's evidence precisions pooled over its thresholds.

    Under the ordered logit, ``P(level > c | x) = sigmoid(x . coef - cut_c)``:
    each of the cumulative model's K - 1 logistic regressions estimates the
    same coefficients. MacKay's update ``alpha_c = gamma_c / |coef_c|^2`` of
    each threshold (its EM at "auto", :func:`em`), pooled as one coefficient
    vector's: ``sum_c gamma_c / sum_c |coef_c|^2``.
    ``annotations``: standardised features (the fit's).

    Examples
    --------
    >>> import numpy as np
    >>> from crowd_models.models import ordinal
    >>> from crowd_models.models.ordinal import cumulative
    >>> ann = ordinal.simulate(bias=[0.3, -0.2, 0.0], noise=[0.4, 0.6, 0.5], n_classes=3,
    ...                        n_items=200, rng=0)
    >>> x = ann.gold[:, None] + np.random.default_rng(0).normal(size=(200, 2))
    >>> cumulative.pooled_precision(ann.with_features(x).standardized())
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # its trust and repair warnings
        fit = em(annotations)
    squared = np.sum(fit["coef"].values[0, 0] ** 2, axis=0)  # (threshold,)
    alpha = np.asarray(fit.attrs["coef_precision"], dtype=float)
    return float(np.sum(alpha * squared) / np.sum(squared))


def _evidence_attrs(fits) -> dict:
    """At "auto", each threshold's chosen precision (``coef_precision``, a list
    in threshold order), the most rounds any took and whether all settled."""
    if "coef_precision" not in fits[0].attrs:
        return {}
    return {"coef_precision": [float(f.attrs["coef_precision"]) for f in fits],
            "evidence_rounds": int(max(f.attrs["evidence_rounds"] for f in fits)),
            "evidence_converged": int(all(f.attrs["evidence_converged"] for f in fits))}


def simulated_confusion(sensitivity, specificity):
    """The one confusion whose binary problems are two-coin with these rates, and the
    truth it implies (see :func:`crowd_models.models.ordinal.simulate`).

    Parameters
    ----------
    sensitivity, specificity : array (annotator, K - 1)
        Each annotator's rates per threshold.

    Returns
    -------
    (numpy.ndarray, dict)
        The (annotator, true_class, label_class) confusion and the truth
        (name -> (dims, values)).

    Examples
    --------
    >>> from crowd_models.models.ordinal import cumulative
    >>> conf, truth = cumulative.simulated_confusion([[0.9, 0.8]], [[0.8, 0.9]])
    """
    if sensitivity is None or specificity is None:
        raise ValueError("the cumulative variant needs sensitivity and specificity "
                         "(annotator, K - 1).")
    sens = np.asarray(sensitivity, dtype=float)
    spec = np.asarray(specificity, dtype=float)
    if sens.ndim != 2 or sens.shape != spec.shape:
        raise ValueError("sensitivity and specificity must be (annotator, K - 1) arrays of "
                         "the same shape.")
    if np.any((sens < 0) | (sens > 1) | (spec < 0) | (spec > 1)):
        raise ValueError("sensitivity and specificity must lie in [0, 1].")
    if (np.any(np.diff(sens, axis=1) > 0) or np.any(np.diff(spec, axis=1) < 0)
            or np.any(sens[:, :-1] + spec[:, 1:] < 1)):
        raise ValueError(
            "no ordinal labelling has these rates: per annotator, sensitivity must be "
            "non-increasing and specificity non-decreasing over thresholds, with "
            "sensitivity[c] + specificity[c + 1] >= 1."
        )
    J, T = sens.shape
    K = T + 1
    c = np.arange(T)
    k = np.arange(K)[:, None]
    above = np.where(k > c[None, :], sens[:, None, :], 1 - spec[:, None, :])  # (J, K, T)
    surv = np.concatenate([np.ones((J, K, 1)), above, np.zeros((J, K, 1))], axis=-1)
    conf = np.clip(surv[..., :-1] - surv[..., 1:], 0, None)
    truth = {"sensitivity": ((D.ANNOTATOR, D.THRESHOLD), sens),
             "specificity": ((D.ANNOTATOR, D.THRESHOLD), spec)}
    return conf, truth
