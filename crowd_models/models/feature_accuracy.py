"""Feature-dependent annotator accuracy with Laplace (L1) priors.

Izbicki and Stern (2013), "Learning with many experts: model selection and
sparsity", Statistical Analysis and Data Mining 6(5). The truth is binary,

    P(Z_i = 1 | x_i) = sigmoid(intercept + coef . x_i),

and annotator k is *wrong* with probability

    P(Y_ik != Z_i | Z_i, x_i) = 1 / (1 + exp(accuracy_intercept[k] + accuracy_coef . x_i)),

a per-annotator accuracy shifted by the item's features through
``accuracy_coef``, shared by all annotators: the features say which items are
hard. ``coef`` and ``accuracy_coef`` get Laplace priors with scale 1/penalty
(the lasso); the intercepts get weak Gaussian priors. The true label is
summed out, so the likelihood is per item.

Penalty scaling
---------------
``penalty`` is the rate lambda of the Laplace prior, density
``lambda / 2 * exp(-lambda |w|)``, so the MAP maximises::

    sum_i log p(labels_i | x_i) - lambda * (|coef|_1 + |accuracy_coef|_1) + ...

on the scale of the *summed* log-likelihood. glmnet's lambda (which divides
the log-likelihood by the number of observations n) is ``penalty / n``;
scikit-learn's ``LogisticRegression(l1_ratio=1, C=...)`` has
``C = 1 / penalty``. Standardise the features: one penalty is shared by all
coefficients.

Sign flip
---------
(intercept, coef, accuracy_intercept, accuracy_coef) and their negatives give
the same likelihood (the truth's classes swap and every annotator goes from
accuracy p to 1 - p). The priors are symmetric too, so the two modes have the
same posterior density. :func:`em` returns the one whose classifier agrees
most with majority vote, and :func:`align_signs` flips NUTS chains likewise.

MAP with exact zeros
--------------------
:func:`build_model` writes each penalised coefficient as ``w = u - v`` with
Exponential(lambda) priors on u, v >= 0 (free ``coef_pos``/``coef_neg``,
``accuracy_coef_pos``/``accuracy_coef_neg``; ``coef`` and ``accuracy_coef``
deterministic): the same posterior of w, the same MAP, and a smooth objective
on which a part at zero stays at zero. A constant ``pm.Potential``
(``laplace_normalisation``) makes ``model.logp()`` the Laplace log posterior,
the number :func:`em` reports. ``model.crowd_start`` is the EM fit from
majority vote; DEVELOPING.md ("Feature-dependent accuracy") gives the argument.

One module, three views of the same model: :func:`build_model` (PyMC),
:func:`em` (the paper's MAP-EM, with proximal-Newton lasso M-steps) and
:func:`simulate` (the paper's three ways of generating votes).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pymc as pm
import pytensor.tensor as pt
import xarray as xr
from scipy.special import expit, log_expit

from crowd_models import _dims as D
from crowd_models import _trust
from crowd_models._fits import check_ci_prob, draws_table, posterior_of
from crowd_models._lasso import l1_logistic, single_thread
from crowd_models.baselines import majority_vote
from crowd_models.data import Annotations
from crowd_models.models import _common as C
from crowd_models.models import _em, _registry, two_coin

__all__ = [
    "build_model", "em", "simulate", "predict", "predict_draws", "align_signs",
    "lasso_majority_vote", "lasso_gold", "l1_logistic", "annotator_error", "annotator_summary",
    "DEFAULT_PRIORS", "MECHANISMS",
]

FAMILY = "the feature-dependent accuracy model"

DEFAULT_PRIORS = _registry.default_priors("feature_accuracy")
"""Laplace rate 1 (scale 1) on ``coef`` and ``accuracy_coef``; N(0, 10^2) on
``intercept`` and on each ``accuracy_intercept``. All priors are symmetric
about zero, so the sign-flipped mode has the same density (see the module
docstring). Precision 0 makes an intercept's prior flat."""

MECHANISMS = {"constant": "i", "model": "ii", "nonlinear": "iii"}
"""The paper's three ways of generating votes, by name (and roman numeral)."""

_PARAMS = ("intercept", "coef", "accuracy_intercept", "accuracy_coef")
_DIMS = {
    "intercept": (),
    "coef": (D.FEATURE,),
    "accuracy_intercept": (D.ANNOTATOR,),
    "accuracy_coef": (D.FEATURE,),
    "coef_pos": (D.FEATURE,),
    "coef_neg": (D.FEATURE,),
    "accuracy_coef_pos": (D.FEATURE,),
    "accuracy_coef_neg": (D.FEATURE,),
    "item_class_prob": (D.ITEM, D.TRUE_CLASS),
}


# ------------------------------------------------------------------ checks
def _check_annotations(annotations, positive=None):
    """Two classes and valid features; the annotations with ``positive`` second."""
    annotations = C.require_binary(annotations, FAMILY, positive)
    if annotations.features is None:
        raise ValueError(
            f"{FAMILY} needs item features (they drive both the truth and the annotators' "
            f"accuracy); pass features= to Annotations.from_frame (a DataFrame indexed by item "
            f"id), or use two_coin without features."
        )
    _check_features(annotations.features, "annotations.features")
    return annotations


def _check_features(X, what: str, n_features: int | None = None) -> np.ndarray:
    try:
        X = np.asarray(X, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be a numeric (item, feature) array.") from None
    if X.ndim != 2:
        raise ValueError(f"{what} must be 2-D (item, feature), got shape {X.shape}.")
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(
            f"{what} must have {n_features} columns (the fit's features, in its order), got "
            f"{X.shape[1]}.")
    bad = ~np.isfinite(X)
    if bad.any():
        rows, cols = np.nonzero(bad)
        raise ValueError(
            f"{what} hold {bad.sum()} NaN or infinite value(s) (first at item row {rows[0]}, "
            f"feature column {cols[0]}); impute or drop them first.")
    return X


def _penalties(penalty) -> tuple[float, float]:
    """(coef penalty, accuracy_coef penalty) from a number or a pair."""
    try:
        arr = np.asarray(penalty, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(
            f"penalty must be a positive number or a pair (coef penalty, accuracy_coef "
            f"penalty), got {penalty!r}.") from None
    if arr.ndim == 0:
        arr = np.array([arr, arr])
    if arr.shape != (2,):
        raise ValueError(
            f"penalty must be one number (shared by coef and accuracy_coef) or a pair "
            f"(coef penalty, accuracy_coef penalty), got shape {arr.shape}.")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(
            f"penalty must be > 0: it is the rate lambda of the Laplace prior (scale 1/lambda); "
            f"got {penalty!r}. For a weak penalty use a small positive value such as 1e-3 (no "
            f"penalty at all diverges when the features separate the items); to pick it "
            f"without gold use crowd_models.selection.select_penalty.")
    return float(arr[0]), float(arr[1])


def _priors(annotations, penalty, intercept_precision, accuracy_intercept_precision) -> dict:
    lam_b, lam_g = _penalties(penalty)
    tau0 = C.check_positive_precision(intercept_precision, "intercept_precision")
    if tau0.ndim != 0:
        raise ValueError(f"intercept_precision must be one number, got {intercept_precision!r}.")
    tau_a = C.check_positive_precision(accuracy_intercept_precision,
                                       "accuracy_intercept_precision")
    try:
        tau_a = np.broadcast_to(tau_a, (annotations.n_annotators,)).copy()
    except ValueError:
        raise ValueError(
            f"accuracy_intercept_precision must be a number or an array with one entry per "
            f"annotator ({annotations.n_annotators}), got shape {tau_a.shape}.") from None
    if np.any(tau_a == 0) and not np.all(tau_a == 0):
        raise ValueError("accuracy_intercept_precision mixes flat (0) and proper entries; use "
                         "all zeros (flat) or all positive.")
    return {"lam_b": lam_b, "lam_g": lam_g, "tau0": float(tau0), "tau_a": tau_a}


# ------------------------------------------------------- shared M/E pieces
def _designs(annotations):
    """The two M-step designs: [1, X] per item for the truth, and
    [one-hot annotator, X] per annotation row for the accuracy."""
    X = annotations.features
    n, d = X.shape
    K = annotations.n_annotators
    truth = np.hstack([np.ones((n, 1)), X])
    onehot = np.zeros((annotations.n_annotations, K))
    onehot[np.arange(annotations.n_annotations), annotations.annotator_idx] = 1.0
    acc = np.hstack([onehot, X[annotations.item_idx]])
    return np.asfortranarray(truth), np.asfortranarray(acc)


def _joint(annotations, params):
    X = annotations.features
    eta = X @ params["coef"] + params["intercept"]
    a = (params["accuracy_intercept"][annotations.annotator_idx]
         + (X @ params["accuracy_coef"])[annotations.item_idx])
    right, wrong = log_expit(a), log_expit(-a)
    y = annotations.labels
    per_row = np.stack([np.where(y == 0, right, wrong), np.where(y == 1, right, wrong)], axis=1)
    out = np.stack([log_expit(-eta), log_expit(eta)], axis=1)
    for c in range(2):
        out[:, c] += np.bincount(annotations.item_idx, weights=per_row[:, c],
                                 minlength=annotations.n_items)
    return out


def _gauss(x, precision):
    x = np.atleast_1d(np.asarray(x, dtype=float))
    precision = np.broadcast_to(precision, x.shape)
    if np.all(precision == 0):
        return 0.0
    return float(np.sum(0.5 * np.log(precision / (2 * np.pi)) - 0.5 * precision * x**2))


def _laplace(w, lam):
    w = np.asarray(w, dtype=float)
    return float(w.size * np.log(lam / 2) - lam * np.abs(w).sum())


def _log_prior_params(params, pri):
    return (_gauss(params["intercept"], pri["tau0"])
            + _gauss(params["accuracy_intercept"], pri["tau_a"])
            + _laplace(params["coef"], pri["lam_b"])
            + _laplace(params["accuracy_coef"], pri["lam_g"]))


def _log_posterior(annotations, params, pri):
    _, item_ll = C.posterior_from_joint(_joint(annotations, params), overwrite=True)
    ll = float(item_ll.sum())
    return ll + _log_prior_params(params, pri), ll


def _fit_truth(design, mu, pri, start=None, tol=1e-10):
    d = design.shape[1] - 1
    l1 = np.r_[0.0, np.full(d, pri["lam_b"])]
    l2 = np.r_[pri["tau0"], np.zeros(d)]
    theta = l1_logistic(design, mu, l1=l1, l2=l2, start=start, tol=tol)
    return theta[0], theta[1:]


def _m_step(annotations, designs, mu, pri, previous=None, tol=1e-10):
    """Two weighted lasso logistic regressions: the classifier on the soft labels
    mu, and the accuracy on the expected agreement indicators."""
    truth_design, acc_design = designs
    K = annotations.n_annotators
    d = annotations.n_features
    start_b = start_a = None
    if previous is not None:
        start_b = np.r_[previous["intercept"], previous["coef"]]
        start_a = np.r_[previous["accuracy_intercept"], previous["accuracy_coef"]]
    intercept, coef = _fit_truth(truth_design, mu, pri, start=start_b, tol=tol)
    m = mu[annotations.item_idx]
    agree = np.where(annotations.labels == 1, m, 1.0 - m)
    l1 = np.r_[np.zeros(K), np.full(d, pri["lam_g"])]
    l2 = np.r_[pri["tau_a"], np.zeros(d)]
    theta = l1_logistic(acc_design, agree, l1=l1, l2=l2, start=start_a, tol=tol)
    return {"intercept": float(intercept), "coef": coef,
            "accuracy_intercept": theta[:K], "accuracy_coef": theta[K:]}


def _start(annotations, pri, designs=None):
    """The majority-vote start shared by :func:`em` and :func:`build_model`: the
    M-step applied to the soft majority vote (the classifier part is the lasso
    logistic regression on majority vote)."""
    designs = _designs(annotations) if designs is None else designs
    mu = majority_vote(annotations).values[:, 1]
    return _m_step(annotations, designs, mu, pri)


def _flip(params):
    return {k: -np.asarray(v) if k in _PARAMS else v for k, v in params.items()}


def _mv_agreement(annotations, intercept, coef, prob=None):
    """How well the classifier (then the item posterior, to break ties) agrees
    with the soft majority vote; the mirrored point scores n - this."""
    mv = majority_vote(annotations).values[:, 1]
    eta = annotations.features @ coef + intercept
    z = (eta > 0).astype(float)
    primary = float(np.sum(z * mv + (1 - z) * (1 - mv)))
    secondary = 0.0 if prob is None else float(np.sum(prob * mv + (1 - prob) * (1 - mv)))
    return primary, secondary


def _resolve_sign(annotations, params, prob):
    n = annotations.n_items
    primary, secondary = _mv_agreement(annotations, params["intercept"], params["coef"], prob)
    flip = primary < n - primary or (primary == n - primary and secondary < n - secondary)
    return (_flip(params), 1.0 - prob, True) if flip else (params, prob, False)


def _split(w):
    w = np.asarray(w, dtype=float)
    return np.maximum(w, 0.0), np.maximum(-w, 0.0)


def _run_em(annotations, pri, *, n_restarts, rng, tol, restart_tol, max_iter,
            accelerate=True):
    """MAP-EM with restarts; returns (params, item_class_prob, item log-lik, info)."""
    rng = np.random.default_rng(rng)
    designs = _designs(annotations)
    with single_thread():
        start = _start(annotations, pri, designs)
    K, d = annotations.n_annotators, annotations.n_features

    change = {"last": 1.0}

    def m_step(prob, prev):
        # generalised EM: the lasso M-steps are solved loosely while EM moves a
        # lot, and to 1e-11 at the end (so the fixed point is the exact MAP)
        new = _m_step(annotations, designs, prob[:, 1], pri, previous=prev,
                      tol=min(1e-4, max(1e-11, 1e-3 * change["last"])))
        change["last"] = max(float(np.max(np.abs(np.asarray(new[k]) - np.asarray(prev[k]))))
                             for k in new)
        return new

    def run(params, tol_):
        change["last"] = 1.0
        with single_thread():
            return _em.run_em(lambda prm: _joint(annotations, prm), m_step, params, tol=tol_,
                            max_iter=max_iter, accelerate=accelerate,
                            objective=lambda prm: _log_posterior(annotations, prm, pri)[0])

    best, best_lp, restart_lps = None, -np.inf, []
    for r in range(int(n_restarts)):
        if r == 0:
            params = dict(start)
        else:
            gamma = np.where(rng.random(d) < 0.1, rng.normal(0.0, 0.5, d), 0.0)
            params = {"intercept": start["intercept"], "coef": start["coef"].copy(),
                      "accuracy_intercept": rng.normal(0.5, 1.5, K), "accuracy_coef": gamma}
        params, _, _ = run(params, restart_tol)
        lp, _ = _log_posterior(annotations, params, pri)
        restart_lps.append(lp)
        if lp > best_lp:
            best, best_lp = params, lp
    params, n_iter, converged = run(best, tol)
    prob, item_ll = C.posterior_from_joint(_joint(annotations, params), overwrite=True)
    params, prob1, flipped = _resolve_sign(annotations, params, prob[:, 1])
    prob = np.stack([1 - prob1, prob1], axis=1)
    info = {"restart_lps": restart_lps, "flipped": flipped, "n_iter": n_iter,
            "converged": converged}
    return params, prob, item_ll, info


# ----------------------------------------------------------------- factory
def build_model(
    annotations: Annotations,
    *,
    penalty=DEFAULT_PRIORS["penalty"],
    intercept_precision=DEFAULT_PRIORS["intercept_precision"],
    accuracy_intercept_precision=DEFAULT_PRIORS["accuracy_intercept_precision"],
    coef_prior: str = "laplace",
    horseshoe_scale: float = 1.0,
    slab_scale: float = 2.0,
    slab_df: float = 4.0,
    positive=None,
) -> pm.Model:
    r"""The feature-dependent accuracy model as a PyMC model, true labels summed out.

    .. math::

        z_i &\sim \mathrm{Bernoulli}(\sigma(\text{intercept} + x_i^\top \text{coef})) \\
        P(y_{ij} = z_i) &= \sigma(\text{accuracy\_intercept}_j
            + x_i^\top \text{accuracy\_coef}) \\
        \text{coef}, \text{accuracy\_coef} &\sim \mathrm{Laplace}(0, 1 / \lambda)
            \text{ (or the regularised horseshoe)}, \quad
        \text{intercepts} \sim \mathcal{N}(0, \tau^{-1})

    and the likelihood of item i sums :math:`z_i` out.

    Parameters
    ----------
    annotations : Annotations
        Two classes (the second is positive) and features.
    penalty : number or pair (coef, accuracy_coef)
        Rate lambda > 0 of the Laplace priors (scale 1/lambda); see the module
        docstring for the scaling.
    intercept_precision : number
        Gaussian prior precision of ``intercept``; 0 = flat.
    accuracy_intercept_precision : number or array (annotator,)
        Gaussian prior precision of each ``accuracy_intercept``; 0 = flat.
    coef_prior : {"laplace", "horseshoe"}
        "laplace" (default): the Bayesian lasso, written as the difference of
        two Exponential(penalty) parts (free ``coef_pos``/``coef_neg`` and
        ``accuracy_coef_pos``/``accuracy_coef_neg``), which gives both the
        exact Laplace posterior for NUTS and the lasso MAP for ``fit_map``.
        "horseshoe": the regularised horseshoe (Piironen & Vehtari 2017),
        non-centred: ``coef = coef_raw * coef_global_scale * lambda_tilde``
        with half-Cauchy(1) local scales ``coef_local_scale`` (lambda),
        half-Cauchy(``horseshoe_scale``) global scale (tau), ``lambda_tilde =
        c lambda / sqrt(c^2 + tau^2 lambda^2)`` and the slab width
        ``coef_slab`` c, c^2 ~ InverseGamma(slab_df / 2, slab_df slab_scale^2
        / 2): small coefficients are shrunk as by the horseshoe, large ones
        as by a Normal(0, c) (likewise ``accuracy_coef``). The slab keeps the
        posterior of a separable or weakly identified coefficient from
        running off, and NUTS from diverging in the funnel. For NUTS only
        (its mode collapses to zero); ``penalty`` is not used.
        ``horseshoe_scale``: tau's scale (Piironen & Vehtari suggest
        p0 / (d - p0) * 2 / sqrt(n items) for p0 expected non-zero of d
        features); ``slab_scale`` and ``slab_df``: the slab's scale and
        degrees of freedom.
    positive : optional
        The positive class, one of the two classes (default: the second);
        see :meth:`Annotations.with_positive`.

    Returns
    -------
    pymc.Model
        Variables: ``intercept``, ``coef`` (feature), ``accuracy_intercept``
        (annotator), ``accuracy_coef`` (feature); deterministic
        ``item_class_prob`` (item, true_class); observed ``item_labels`` (item) whose
        log-density is each item's marginal log-likelihood. ``model.crowd_start``
        holds the majority-vote start (``fit_map`` starts there).

    Examples
    --------
    >>> from crowd_models.models import feature_accuracy
    >>> ann = feature_accuracy.simulate(300, n_annotators=5, n_features=4, rng=0)
    >>> fit = cm.fit_map(feature_accuracy.build_model(ann, penalty=2.0))
    """
    annotations = _check_annotations(annotations, positive).standardized()
    _trust.check_identifiable(annotations, FAMILY)
    if coef_prior not in ("laplace", "horseshoe"):
        raise ValueError(f"coef_prior={coef_prior!r} is not one of 'laplace', 'horseshoe'.")
    for name, value in (("horseshoe_scale", horseshoe_scale), ("slab_scale", slab_scale),
                        ("slab_df", slab_df)):
        if isinstance(value, bool) or not isinstance(value, int | float | np.number) or not (
                np.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive number, got {value!r}.")
    pri = _priors(annotations, penalty, intercept_precision, accuracy_intercept_precision)
    params, *_ = _run_em(annotations, pri, n_restarts=1, rng=0, tol=1e-6, restart_tol=1e-6,
                         max_iter=5000)
    with pm.Model(coords=annotations.coords()) as model:
        X = pm.Data("features", annotations.features, dims=(D.ITEM, D.FEATURE))
        if pri["tau0"] == 0:
            intercept = pm.Flat("intercept")
        else:
            intercept = pm.Normal("intercept", 0.0, sigma=1 / np.sqrt(pri["tau0"]))
        if np.all(pri["tau_a"] == 0):
            acc_int = pm.Flat("accuracy_intercept", dims=D.ANNOTATOR)
        else:
            acc_int = pm.Normal("accuracy_intercept", 0.0, sigma=1 / np.sqrt(pri["tau_a"]),
                                dims=D.ANNOTATOR)
        start = {"intercept": params["intercept"],
                 "accuracy_intercept": params["accuracy_intercept"]}
        coefs = {}
        for name, lam in (("coef", pri["lam_b"]), ("accuracy_coef", pri["lam_g"])):
            if coef_prior == "laplace":
                pos = pm.Exponential(f"{name}_pos", lam=np.float64(lam), dims=D.FEATURE)
                neg = pm.Exponential(f"{name}_neg", lam=np.float64(lam), dims=D.FEATURE)
                coefs[name] = pm.Deterministic(name, pos - neg, dims=D.FEATURE)
                start[f"{name}_pos"], start[f"{name}_neg"] = _split(params[name])
            else:
                glob = pm.HalfCauchy(f"{name}_global_scale", beta=horseshoe_scale)
                local = pm.HalfCauchy(f"{name}_local_scale", beta=1.0, dims=D.FEATURE)
                slab_sq = pm.InverseGamma(f"{name}_slab_sq", alpha=slab_df / 2,
                                          beta=slab_df * slab_scale ** 2 / 2)
                pm.Deterministic(f"{name}_slab", pt.sqrt(slab_sq))
                shrunk = pt.sqrt(slab_sq * local ** 2 / (slab_sq + glob ** 2 * local ** 2))
                raw = pm.Normal(f"{name}_raw", 0.0, 1.0, dims=D.FEATURE)
                coefs[name] = pm.Deterministic(name, raw * glob * shrunk, dims=D.FEATURE)
                # start at the EM coefficients with raw of order 1: local scales
                # such that tau * lambda_tilde = |coef| (floored, below the slab)
                c, tau = float(slab_scale), float(horseshoe_scale)
                target = np.clip(np.abs(params[name]), 1e-2, 0.9 * c)
                start[f"{name}_global_scale"] = tau
                start[f"{name}_local_scale"] = target * c / (tau * np.sqrt(c ** 2 - target ** 2))
                start[f"{name}_slab_sq"] = c ** 2
                start[f"{name}_raw"] = params[name] / target
        if coef_prior == "laplace":
            # Exponential parts: 2 log(lam) - lam (u + v); Laplace: log(lam / 2) - lam |w|
            # symbolic in the number of features, so that the compiled code is
            # shared by data sets of any width
            pm.Potential("laplace_normalisation", -pt.cast(X.shape[1], "float64") * np.float64(
                np.log(2 * pri["lam_b"]) + np.log(2 * pri["lam_g"])))
        eta = X @ coefs["coef"] + intercept
        log_prior = pt.stack([-pt.softplus(eta), -pt.softplus(-eta)], axis=1)
        idx = C.long_table_data(annotations)
        a = acc_int[idx["annotator_idx"]] + (X @ coefs["accuracy_coef"])[idx["item_idx"]]
        right, wrong = -pt.softplus(-a), -pt.softplus(a)
        y = idx["label_idx"]
        per_row = pt.stack([pt.switch(pt.eq(y, 0), right, wrong),
                            pt.switch(pt.eq(y, 1), right, wrong)], axis=1)
        n_items = model.dim_lengths[D.ITEM]
        joint = pt.zeros((n_items, 2))[idx["item_idx"]].inc(per_row) + log_prior
        C.add_item_likelihood(joint, annotations)
    # the lasso's exact zeros put these on the edge of their support by design, so
    # fit_map's boundary warning skips them
    model.crowd_sparse = ("coef_pos", "coef_neg", "accuracy_coef_pos", "accuracy_coef_neg")
    return C.attach_protocol(model, "feature_accuracy", start=start, annotations=annotations)


# ---------------------------------------------------------------------- EM
def em(
    annotations: Annotations,
    *,
    penalty=DEFAULT_PRIORS["penalty"],
    intercept_precision=DEFAULT_PRIORS["intercept_precision"],
    accuracy_intercept_precision=DEFAULT_PRIORS["accuracy_intercept_precision"],
    n_restarts: int = 30,
    rng=0,
    tol: float = 1e-8,
    restart_tol: float = 1e-5,
    max_iter: int = 5000,
    accelerate: bool = True,
    positive=None,
) -> xr.Dataset:
    """The paper's MAP-EM, with random restarts.

    E-step: P(Z_i = 1 | labels, x_i). M-step: two weighted L1-penalised
    logistic regressions, solved to exact zeros by ``_lasso.l1_logistic`` — the
    classifier (``intercept``, ``coef``) on the soft labels, and the accuracy
    (``accuracy_intercept``, ``accuracy_coef``) on the expected agreement of
    each label with the truth.

    Restarts: the first starts from majority vote (the M-step applied to the
    soft majority vote); the other ``n_restarts - 1`` keep the classifier of
    the majority-vote lasso fit and draw the accuracy parameters at random
    (``rng``, seeded by default for reproducibility). Each restart runs to
    ``restart_tol``; the one with the highest penalised log posterior is then
    iterated to ``tol``. Finally the sign is chosen so that the classifier
    agrees most with majority vote (both signs have the same posterior).
    ``accelerate`` (default) extrapolates the EM steps by SQUAREM
    (``_em.iterate_em_map``), which reaches the same fixed points in fewer
    steps; ``accelerate=False`` runs plain EM. ``positive``: as in
    :func:`build_model`.

    Returns a Dataset with the posterior's names and dims (chain=1, draw=1):
    ``intercept``, ``coef``, ``accuracy_intercept``, ``accuracy_coef``,
    ``item_class_prob``, and the split parts ``coef_pos``/``coef_neg``,
    ``accuracy_coef_pos``/``accuracy_coef_neg`` (so that
    ``fit_map(model, start=em_fit)`` starts at this point); ``n_labels``.
    ``attrs``: ``log_posterior`` (what ``fit_map`` maximises),
    ``log_likelihood``, ``penalty``, ``n_nonzero_coef``,
    ``n_nonzero_accuracy_coef``, ``restart_log_posteriors``, ``flipped``,
    ``n_iter``, ``converged``.

    Examples
    --------
    >>> from crowd_models.models import feature_accuracy
    >>> ann = feature_accuracy.simulate(300, n_annotators=5, n_features=4, rng=0)
    >>> fit = feature_accuracy.em(ann, penalty=2.0)
    >>> fit.attrs["n_nonzero_coef"]
    """
    annotations = _check_annotations(annotations, positive).standardized()
    _trust.check_identifiable(annotations, FAMILY)
    pri = _priors(annotations, penalty, intercept_precision, accuracy_intercept_precision)
    if int(n_restarts) < 1:
        raise ValueError(f"n_restarts must be >= 1, got {n_restarts!r}.")
    if not (0 < tol <= restart_tol):
        raise ValueError(f"need 0 < tol <= restart_tol, got tol={tol}, restart_tol={restart_tol}.")
    params, prob, item_ll, info = _run_em(annotations, pri, n_restarts=n_restarts, rng=rng,
                                          tol=tol, restart_tol=restart_tol,
                                          max_iter=max_iter, accelerate=accelerate)
    restart_lps, flipped, n_iter, converged = (
        info["restart_lps"], info["flipped"], info["n_iter"], info["converged"])
    loglik = float(item_ll.sum())
    out = {**params, "item_class_prob": prob}
    for name in ("coef", "accuracy_coef"):
        out[f"{name}_pos"], out[f"{name}_neg"] = _split(params[name])
    return C.em_dataset(
        annotations, out, _DIMS,
        extra={"n_labels": ((D.ANNOTATOR,), annotations.n_labels())},
        attrs={
            "family": "feature_accuracy", "variant": "", "method": "em", "log_likelihood": loglik,
            "log_posterior": loglik + _log_prior_params(params, pri),
            "penalty": [pri["lam_b"], pri["lam_g"]],
            "n_nonzero_coef": int(np.count_nonzero(params["coef"])),
            "n_nonzero_accuracy_coef": int(np.count_nonzero(params["accuracy_coef"])),
            "restart_log_posteriors": restart_lps, "flipped": int(flipped),
            "n_iter": n_iter, "converged": int(converged),
        },
    )


# ------------------------------------------------------------- predictions
def predict(fit, features) -> np.ndarray:
    """P(truth positive | x) from a fitted classifier (EM Dataset, MAP/NUTS
    DataTree, or a baseline from :func:`lasso_majority_vote`), averaged over
    the fit's draws. ``features``: (item, feature) in the fit's feature order.

    Examples
    --------
    >>> from crowd_models.models import feature_accuracy
    >>> ann = feature_accuracy.simulate(300, n_annotators=5, n_features=4, rng=0)
    >>> prob = feature_accuracy.predict(feature_accuracy.em(ann, penalty=2.0), ann.features)
    """
    post = posterior_of(fit)
    if "coef" not in post or "intercept" not in post:
        raise ValueError("this fit has no classifier (no coef and intercept).")
    X = _check_features(features, "features", post.sizes[D.FEATURE])
    return predict_draws(post, C.scaled_features(fit, X))[..., 1].mean(axis=0)


def predict_draws(post: xr.Dataset, features: np.ndarray) -> np.ndarray:
    """P(truth | x) under each draw of the fit's classifier of the truth, the same
    logistic regression as two-coin's (:func:`two_coin.predict_draws`): (sample,
    item, 2), the negative class first. :func:`crowd_models.predict` checks the
    features and summarises the draws.

    Examples
    --------
    >>> from crowd_models.models import feature_accuracy
    >>> ann = feature_accuracy.simulate(300, n_annotators=5, n_features=4, rng=0)
    >>> fit = feature_accuracy.em(ann, penalty=2.0)
    >>> feature_accuracy.predict_draws(fit, ann.features).shape
    """
    return two_coin.predict_draws(post, features)


def annotator_error(fit, features) -> np.ndarray:
    """(item, annotator) probability that each annotator mislabels each item,
    P(Y_ik != Z_i | x_i), averaged over the fit's draws; ``features`` as given
    (the fit's standardisation is applied).

    Examples
    --------
    >>> from crowd_models.models import feature_accuracy
    >>> ann = feature_accuracy.simulate(300, n_annotators=5, n_features=4, rng=0)
    >>> fit = feature_accuracy.em(ann, penalty=2.0)
    >>> feature_accuracy.annotator_error(fit, ann.features).mean(axis=0)
    """
    post = posterior_of(fit)
    gamma = post["accuracy_coef"].stack(sample=(D.CHAIN, D.DRAW)).transpose(
        D.FEATURE, "sample").values
    X = C.scaled_features(fit, _check_features(features, "features", gamma.shape[0]))
    alpha = post["accuracy_intercept"].stack(sample=(D.CHAIN, D.DRAW)).transpose(
        D.ANNOTATOR, "sample").values
    a = (X @ gamma)[:, None, :] + alpha[None, :, :]
    return expit(-a).mean(axis=-1)


def _on_fit_scale(fit, annotations) -> np.ndarray:
    """The annotations' features on the scale of the fit's coefficients: the fit's
    standardisation where it records one, else their own."""
    if "feature_center" in fit.attrs:
        return C.scaled_features(fit, annotations.raw_features)
    return annotations.standardized().features


def _long_table(fit, annotations):
    """Features and the long table's item and annotator codes: from
    ``annotations``, else from a MAP/NUTS fit's ``constant_data``."""
    if annotations is not None:
        annotations = _check_annotations(annotations)
        return _on_fit_scale(fit, annotations), annotations.item_idx, annotations.annotator_idx
    const = fit["constant_data"].to_dataset() if isinstance(fit, xr.DataTree) and (
        "constant_data" in fit.children) else None
    if const is None or not {"features", "item_idx", "annotator_idx"} <= set(const):
        raise ValueError("this fit does not carry the features and the long table (an EM "
                         "fit does not); pass annotations= (the Annotations it was fitted to).")
    return (const["features"].values, const["item_idx"].values.astype(int),
            const["annotator_idx"].values.astype(int))


def annotator_summary(fit, *, annotations: Annotations | None = None,
                      ci_prob: float = 0.9):
    """Annotator quality with intervals: one row per annotator.

    ``accuracy``: the annotator's probability of a correct label averaged over
    the items they labelled, sigmoid(accuracy_intercept_j + accuracy_coef .
    x_i), computed draw by draw (mean, sd and ``ci_prob`` interval over the
    draws; a one-draw EM/MAP fit gives its point value and NaN spreads).
    ``accuracy_q10``/``accuracy_q90``: the 10% and 90% quantiles, over the
    items they labelled, of that probability at the posterior mean of the
    parameters — how much the annotator's accuracy moves with the items'
    features. Then ``accuracy_intercept`` (log-odds of a correct label at
    x = 0) and ``n_labels``, the columns :func:`crowd_models.report.annotator_summary`
    would give.

    ``annotations``: the data the fit was made on; needed for an EM fit (a
    MAP or NUTS fit carries the features in ``constant_data``).

    Examples
    --------
    >>> from crowd_models.models import feature_accuracy
    >>> ann = feature_accuracy.simulate(300, n_annotators=5, n_features=4, rng=0)
    >>> feature_accuracy.annotator_summary(feature_accuracy.em(ann, penalty=2.0), annotations=ann)
    """
    from scipy import sparse

    X, item_idx, annotator_idx = _long_table(fit, annotations)
    post = posterior_of(fit)
    J = post.sizes[D.ANNOTATOR]
    alpha = post["accuracy_intercept"].transpose(D.CHAIN, D.DRAW, D.ANNOTATOR).values
    alpha = alpha.reshape(-1, J)
    gamma = post["accuracy_coef"].transpose(D.CHAIN, D.DRAW, D.FEATURE).values
    gamma = gamma.reshape(alpha.shape[0], -1)
    X = _check_features(X, "features", gamma.shape[1])
    if item_idx.size == 0 or annotator_idx.max() >= J:
        raise ValueError(f"the long table does not match the fit's {J} annotators.")
    # rows x annotators indicator: per-draw sums over each annotator's rows
    rows = sparse.csr_matrix((np.ones(item_idx.size), (np.arange(item_idx.size),
                                                       annotator_idx)),
                             shape=(item_idx.size, J))
    counts = np.bincount(annotator_idx, minlength=J)
    accuracy = np.empty_like(alpha)
    for lo in range(0, alpha.shape[0], 256):  # blocks of draws bound the memory
        a = alpha[lo:lo + 256, annotator_idx] + (gamma[lo:lo + 256] @ X.T)[:, item_idx]
        accuracy[lo:lo + 256] = np.asarray(rows.T @ expit(a).T).T / np.maximum(counts, 1)
    accuracy[:, counts == 0] = np.nan
    table = draws_table({"accuracy": accuracy, "accuracy_intercept": alpha},
                        pd.Index(post[D.ANNOTATOR].values, name=D.ANNOTATOR),
                        check_ci_prob(ci_prob))
    table["n_labels"] = counts
    at_mean = expit(alpha.mean(axis=0)[annotator_idx] + (X @ gamma.mean(axis=0))[item_idx])
    by_annotator = pd.Series(at_mean).groupby(annotator_idx)
    for q in (10, 90):
        column = by_annotator.quantile(q / 100).reindex(range(J)).to_numpy()
        table.insert(table.columns.get_loc("accuracy_upper") + 1 + (q == 90),
                     f"accuracy_q{q}", column)
    return table


def align_signs(fit, annotations: Annotations):
    """Flip the chains of a NUTS (or MAP) fit that sit in the mirrored mode.

    (intercept, coef, accuracy_intercept, accuracy_coef) -> their negatives
    leaves the likelihood and the priors unchanged, so a chain can wander
    into the mirrored mode. Each chain is compared with majority vote through
    its classifier (posterior mean of the linear predictor, ties broken by the
    item posterior); chains that agree better when mirrored are flipped:
    coefficients negated, ``_pos``/``_neg`` parts swapped, ``item_class_prob``
    reversed. Returns a new DataTree with ``attrs["flipped_chains"]``.

    Examples
    --------
    >>> from crowd_models.models import feature_accuracy
    >>> ann = feature_accuracy.simulate(200, n_annotators=4, n_features=2, rng=0)
    >>> idata = cm.sample(feature_accuracy.build_model(ann), draws=200, tune=200, chains=2)
    >>> feature_accuracy.align_signs(idata, ann).attrs["flipped_chains"]
    """
    if not isinstance(fit, xr.DataTree):
        raise TypeError(f"align_signs expects a DataTree from fit_map/sample, got "
                        f"{type(fit).__name__}.")
    annotations = _check_annotations(annotations)
    X = _on_fit_scale(fit, annotations)
    post = posterior_of(fit)
    n = annotations.n_items
    mv = majority_vote(annotations).values[:, 1]
    flipped = []
    for chain in post[D.CHAIN].values:
        p = post.sel({D.CHAIN: chain})
        eta = (X @ p["coef"].transpose(D.FEATURE, D.DRAW).values
               + p["intercept"].values).mean(axis=1)
        prob = p["item_class_prob"].mean(D.DRAW).values[:, 1]
        z = (eta > 0).astype(float)
        primary = float(np.sum(z * mv + (1 - z) * (1 - mv)))
        secondary = float(np.sum(prob * mv + (1 - prob) * (1 - mv)))
        if primary < n - primary or (primary == n - primary and secondary < n - secondary):
            flipped.append(int(chain))
    out = fit.copy()
    if flipped:
        sign = xr.DataArray(np.where(np.isin(post[D.CHAIN].values, flipped), -1.0, 1.0),
                            dims=D.CHAIN, coords={D.CHAIN: post[D.CHAIN].values})
        is_flipped = sign < 0
        new = post.copy()
        for name in list(post.data_vars):
            if name in _PARAMS or name.endswith("_raw"):
                new[name] = post[name] * sign
            elif name == "item_class_prob":
                rev = post[name].isel({D.TRUE_CLASS: slice(None, None, -1)})
                rev = rev.assign_coords({D.TRUE_CLASS: post[D.TRUE_CLASS]})
                new[name] = xr.where(is_flipped, rev, post[name]).transpose(*post[name].dims)
        for base in ("coef", "accuracy_coef"):
            if f"{base}_pos" in post:
                pos, neg = post[f"{base}_pos"], post[f"{base}_neg"]
                new[f"{base}_pos"] = xr.where(is_flipped, neg, pos).transpose(*pos.dims)
                new[f"{base}_neg"] = xr.where(is_flipped, pos, neg).transpose(*neg.dims)
        out["posterior"] = xr.DataTree(new)
    out.attrs = {**fit.attrs, "flipped_chains": flipped}
    return out


# --------------------------------------------------------------- baselines
def _lasso_fit(annotations, target, penalty, intercept_precision, method):
    annotations = _check_annotations(annotations).standardized()
    lam, _ = _penalties(penalty)
    tau0 = float(C.check_positive_precision(intercept_precision, "intercept_precision"))
    design = np.asfortranarray(np.hstack([np.ones((annotations.n_items, 1)),
                                          annotations.features]))
    with single_thread():
        intercept, coef = _fit_truth(design, target, {"lam_b": lam, "tau0": tau0})
    return C.em_dataset(
        annotations, {"intercept": intercept, "coef": coef}, _DIMS,
        attrs={"family": "feature_accuracy", "variant": "", "method": method, "penalty": lam,
               "n_nonzero_coef": int(np.count_nonzero(coef))},
    )


def lasso_majority_vote(annotations: Annotations, *, penalty=DEFAULT_PRIORS["penalty"],
                        intercept_precision=DEFAULT_PRIORS["intercept_precision"]):
    """Baseline: L1 logistic regression on the majority-vote labels (hard vote,
    ties count half for each class), same penalty scaling as :func:`em`.

    Returns a Dataset with ``intercept`` and ``coef`` (chain=1, draw=1), usable
    with :func:`predict` and :func:`crowd_models.selection.select_penalty`.

    Examples
    --------
    >>> from crowd_models.models import feature_accuracy
    >>> ann = feature_accuracy.simulate(300, n_annotators=5, n_features=4, rng=0)
    >>> baseline = feature_accuracy.lasso_majority_vote(ann, penalty=2.0)
    >>> feature_accuracy.predict(baseline, ann.features)[:5]
    """
    annotations = _check_annotations(annotations)
    target = majority_vote(annotations, hard=True, ties="split").values[:, 1]
    return _lasso_fit(annotations, target, penalty, intercept_precision,
                      "lasso_majority_vote")


def lasso_gold(annotations: Annotations, *, penalty=DEFAULT_PRIORS["penalty"],
               intercept_precision=DEFAULT_PRIORS["intercept_precision"]):
    """Oracle baseline: L1 logistic regression on the gold labels (items with
    gold only), same penalty scaling as :func:`em`.

    Examples
    --------
    >>> from crowd_models.models import feature_accuracy
    >>> ann = feature_accuracy.simulate(300, n_annotators=5, n_features=4, rng=0)
    >>> oracle = feature_accuracy.lasso_gold(ann, penalty=2.0)
    >>> oracle["coef"].values.ravel()
    """
    annotations = _check_annotations(annotations)
    if not annotations.has_gold:
        raise ValueError("lasso_gold needs gold labels (Annotations(..., gold=...)).")
    known = annotations.gold >= 0
    sub = annotations if known.all() else annotations.select(known[annotations.item_idx])
    return _lasso_fit(sub, (sub.gold == 1).astype(float), penalty, intercept_precision,
                      "lasso_gold")


# ---------------------------------------------------------------- simulate
def simulate(
    n_items: int | None = None,
    *,
    n_annotators: int = 5,
    n_features: int = 20,
    features=None,
    coef=None,
    intercept: float = 0.0,
    mechanism: str = "model",
    accuracy_intercept=None,
    accuracy_coef=None,
    labels_per_item: int | None = None,
    rng=None,
) -> Annotations:
    """Annotations with a known truth, by one of the paper's three mechanisms.

    The truth is Z_i ~ Bernoulli(sigmoid(intercept + coef . x_i)), with
    ``features`` given or ``n_features`` standard-normal ones, and ``coef``
    by default sparse: (2, -2, 1.5, -1.5, 1) on the first five features, zero
    elsewhere. Annotator k mislabels item i with probability

    * ``"constant"`` (i): sigmoid(-accuracy_intercept[k]), independent of x;
    * ``"model"`` (ii): sigmoid(-(accuracy_intercept[k] + accuracy_coef . x_i)),
      this family's model; ``accuracy_coef`` by default 1.5 on the last
      feature and -1.5 on the one before (so the hard items are explained by
      features other than the truth's), zero elsewhere;
    * ``"nonlinear"`` (iii): ``sigmoid(-(accuracy_intercept[k] + |eta_i| - 1))``
      with eta_i the truth's log-odds: items near the class boundary are hard,
      a feature dependence not of the model's form.

    ``accuracy_intercept`` defaults to ``linspace(0.5, 2, n_annotators)``
    (error rates 0.38 to 0.12 at x = 0). ``labels_per_item`` annotators (drawn
    without replacement) label each item, or all of them. ``gold`` holds the
    true labels, ``truth`` the true parameters (``attrs["mechanism"]``).

    Examples
    --------
    >>> from crowd_models.models import feature_accuracy
    >>> ann = feature_accuracy.simulate(300, n_annotators=5, n_features=4, mechanism="model", rng=0)
    """
    rng = np.random.default_rng(rng)
    mech = {v: k for k, v in MECHANISMS.items()}.get(mechanism, mechanism)
    if mech not in MECHANISMS:
        raise ValueError(f"mechanism={mechanism!r} is not one of "
                         f"{list(MECHANISMS)} (or {list(MECHANISMS.values())}).")
    if features is not None:
        X = _check_features(features, "features")
        if n_items is not None and n_items != len(X):
            raise ValueError(f"n_items={n_items} but features have {len(X)} rows.")
    else:
        if n_items is None or n_items < 1 or n_features < 1:
            raise ValueError("give n_items >= 1 and n_features >= 1, or features.")
        X = rng.standard_normal((n_items, n_features))
    n, d = X.shape
    if coef is None:
        w = np.zeros(d)
        default = [2.0, -2.0, 1.5, -1.5, 1.0][:d]
        w[:len(default)] = default
    else:
        w = np.asarray(coef, dtype=float)
        if w.shape != (d,):
            raise ValueError(f"coef must have {d} entries (one per feature), got {w.shape}.")
    if accuracy_intercept is None:
        alpha = np.linspace(0.5, 2.0, n_annotators)
    else:
        alpha = np.atleast_1d(np.asarray(accuracy_intercept, dtype=float))
    K = len(alpha)
    eta = X @ w + intercept
    z = (rng.random(n) < expit(eta)).astype(int)
    truth = {"coef": ((D.FEATURE,), w), "intercept": ((), float(intercept)),
             "accuracy_intercept": ((D.ANNOTATOR,), alpha)}
    if mech == "model":
        if accuracy_coef is None:
            gamma = np.zeros(d)
            gamma[-1] = 1.5
            if d > 1:
                gamma[-2] = -1.5
        else:
            gamma = np.asarray(accuracy_coef, dtype=float)
            if gamma.shape != (d,):
                raise ValueError(f"accuracy_coef must have {d} entries, got {gamma.shape}.")
        truth["accuracy_coef"] = ((D.FEATURE,), gamma)
        acc = alpha[None, :] + (X @ gamma)[:, None]
    elif mech == "constant":
        truth["accuracy_coef"] = ((D.FEATURE,), np.zeros(d))
        acc = np.broadcast_to(alpha[None, :], (n, K))
    else:
        acc = alpha[None, :] + np.abs(eta)[:, None] - 1.0
    item_idx, ann_idx = C.simulation_design(n, K, labels_per_item, rng)
    wrong = rng.random(len(item_idx)) < expit(-acc[item_idx, ann_idx])
    y = np.where(wrong, 1 - z[item_idx], z[item_idx])
    ann = C.simulated_annotations(item_idx, ann_idx, y, z, [0, 1], X, truth)
    ann.truth.attrs["mechanism"] = mech
    ann.truth["error_rate"] = ((D.ANNOTATOR,), expit(-acc).mean(axis=0)[
        ann.truth.indexes[D.ANNOTATOR].map(lambda s: int(s.split("_")[1])).to_numpy()])
    return ann
