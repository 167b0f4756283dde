"""Dawid-Skene model: a confusion matrix per annotator, K classes.

Dawid and Skene (1979), "Maximum likelihood estimation of observer error-rates
using the EM algorithm", Applied Statistics 28; with a classifier, Raykar et
al. (2009) sec. 8.1. Annotator j reports class l for an item of true class k
with probability ``confusion[j, k, l]``. The true class follows a
``prevalence`` or, with features, a multinomial logistic (softmax) classifier
``softmax(x_i . coef + intercept)``, identified by sum-to-zero coefficients.

Variants (``variant=``):

* ``"full"``: a Dirichlet row per annotator and true class.
* ``"one_coin"``: one ``accuracy`` per annotator, errors spread evenly over the
  other classes; ``confusion`` is deterministic.
* ``"hierarchical"``: each annotator's confusion rows are drawn around a
  population confusion ``confusion_mean`` with a learned spread
  ``confusion_spread`` per true class, so annotators with few labels borrow
  strength. PyMC only (no EM). The rows are logistic-normal, as in the
  hierarchical Dawid-Skene of Paun et al. (2018): row k of annotator j is
  ``softmax(population_logit[k] + confusion_spread[k] * confusion_offset[j, k])``
  with standard-normal, sum-to-zero ``confusion_offset`` (a non-centred
  parameterisation). A Dirichlet around the population mean with a learned
  concentration was tried first: it is a funnel that NUTS could not sample on
  the dog data (r_hat far above 1.01 at any tree depth), and its density is
  unbounded as the concentration goes to 0, so it had no mode either.
  ``confusion_mean`` is the confusion of a typical annotator (offset 0).
* ``"pooled"``: the hierarchical model with its spread fixed, one number for
  every row (``spread=``), by default chosen by empirical Bayes
  (:func:`empirical_spread`). With the spread fixed the posterior has a mode,
  so this variant has an EM (its M-step a convex problem, solved by Newton's
  method on its arrow-shaped Hessian) and a MAP that reproduces it; the joint
  mode of the hierarchical variant, spread and offsets together, is pulled toward spread 0 (a joint
  mode over a scale and the effects it scales favours small scales), which
  would give every annotator the population's confusion. It pools
  each annotator's rows toward the population on the log-odds scale, so an
  annotator with few labels of a class gets the population's row rather than a
  noisy or prior-dominated one. This is the default for K classes in the
  command line and :func:`crowd_models.auto_fit` (``DEVELOPING.md``,
  "Pooled Dawid-Skene", has the measurements behind that choice).

With K = 2, ``"full"`` is the two-coin model: ``confusion[j, 1, 1]`` is the
sensitivity and ``confusion[j, 0, 0]`` the specificity.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import xarray as xr
from scipy.optimize import minimize, minimize_scalar
from scipy.special import log_softmax, softmax

from crowd_models import _dims as D
from crowd_models import _trust
from crowd_models.baselines import majority_vote
from crowd_models.data import Annotations
from crowd_models.models import _chunked, _em, _evidence, _registry, _tuning
from crowd_models.models import _common as C

__all__ = ["build_model", "em", "empirical_spread", "simulate", "predict_draws", "VARIANTS",
           "DEFAULT_PRIORS", "SPREAD_BOUNDS", "SPREAD_REFERENCE"]

VARIANTS = ("full", "one_coin", "hierarchical", "pooled")

DEFAULT_PRIORS = _registry.default_priors("dawid_skene")
"""Weakly informative defaults. ``confusion_prior=None`` gives each confusion
row Dirichlet pseudo-counts of 2 on the diagonal and 1 shared by the other
classes (concentration 3 on the diagonal, 1 + 1/(K-1) elsewhere), which is the
two-coin Beta(3, 2) when K = 2: it favours the diagonal (breaking the
relabelling symmetry) and keeps the mode interior. ``accuracy_prior`` is the
one-coin Beta; ``prevalence_prior`` a symmetric Dirichlet concentration;
``population_prior`` = (diagonal advantage, sd) of the hierarchical
``population_logit``: Normal log-odds of each label, sum-to-zero per row, with
the true class ``diagonal advantage`` above the others on average;
``spread_prior`` the HalfNormal scale of ``confusion_spread``; the pooled
variant takes the same ``population_prior``. The classifier
has N(0, 1/coef_precision) sum-to-zero coefficients and a
N(0, 1/intercept_precision) sum-to-zero intercept.
A confusion prior of all ones and a prevalence prior of 1 give plain maximum
likelihood."""


# ------------------------------------------------------------------ priors
def _confusion_alpha(value, K: int, J: int) -> np.ndarray:
    if value is None:
        value = (3.0, 1.0 + 1.0 / (K - 1))
    arr = np.asarray(value, dtype=float)
    if arr.shape == (2,):
        diag, off = arr
        arr = np.full((K, K), off)
        np.fill_diagonal(arr, diag)
    if arr.shape not in ((K, K), (J, K, K)):
        raise ValueError(
            f"confusion_prior must be a pair (diagonal, off_diagonal), a ({K}, {K}) matrix or a "
            f"({J}, {K}, {K}) array of Dirichlet concentrations, got shape {arr.shape}."
        )
    if np.any(~np.isfinite(arr)) or np.any(arr < 1):
        raise ValueError(
            "confusion_prior concentrations must be >= 1 so that the posterior mode exists "
            "(all ones is flat: plain maximum likelihood)."
        )
    return np.broadcast_to(arr, (J, K, K)).copy()


def _priors(ann, variant, confusion_prior, accuracy_prior, prevalence_prior,
            population_prior, spread_prior, coef_precision, intercept_precision) -> dict:
    if variant not in VARIANTS:
        raise ValueError(f"variant={variant!r} is not one of {VARIANTS}.")
    K, J = ann.n_classes, ann.n_annotators
    p = {"confusion": _confusion_alpha(confusion_prior, K, J)}
    p["accuracy"] = C.beta_prior(accuracy_prior, "accuracy_prior", J)
    p["prevalence"] = C.dirichlet_prior(prevalence_prior, "prevalence_prior", (K,))
    if (np.shape(population_prior) != (2,) or not np.all(np.isfinite(population_prior))
            or population_prior[1] <= 0):
        raise ValueError(f"population_prior must be (diagonal advantage, sd > 0) in log-odds, "
                         f"got {population_prior!r}.")
    p["population"] = (float(population_prior[0]), float(population_prior[1]))
    if np.ndim(spread_prior) != 0 or not (np.isfinite(spread_prior) and spread_prior > 0):
        raise ValueError(f"spread_prior must be a positive number (HalfNormal scale of "
                         f"confusion_spread), got {spread_prior!r}.")
    p["spread"] = float(spread_prior)
    if ann.features is not None:
        if _evidence.is_auto(coef_precision):
            raise ValueError("coef_precision='auto' (the default) is chosen by an EM (em(), "
                             "build_model()); here give a number, e.g. the precision em() "
                             "chose, em(annotations).attrs['coef_precision'].")
        for name, value in (("coef_precision", coef_precision),
                            ("intercept_precision", intercept_precision)):
            if np.ndim(value) != 0 or not (np.isfinite(value) and value > 0):
                raise ValueError(
                    f"{name} must be a positive number for the softmax classifier (a flat prior "
                    f"has no mode on separable data), got {value!r}."
                )
        p["coef_sd"] = 1 / np.sqrt(float(coef_precision))
        p["intercept_sd"] = 1 / np.sqrt(float(intercept_precision))
    return p


# ----------------------------------------------------------- EM pieces
def _one_coin_confusion(accuracy, K):
    eye = np.eye(K)
    acc = np.asarray(accuracy)[..., None, None]
    return eye * acc + (1 - eye) * (1 - acc) / (K - 1)


def _log_prior_classes(params, features):
    if features is None:
        return np.log(np.clip(params["prevalence"], C.PROB_FLOOR, 1))[None, :]
    return log_softmax(features @ params["coef"] + params["intercept"], axis=1)


def _joint(ann, params):
    conf = np.clip(params["confusion"], C.PROB_FLOOR, 1)
    joint = C.item_joint_np(np.log(conf), ann)
    joint += _log_prior_classes(params, ann.features)  # in place: no second (item, class) array
    return joint


def _fit_softmax(features, target, coef_sd, intercept_sd, start=None, max_iter=500):
    """MAP multinomial logistic regression on soft labels (trust-region Newton-CG).

    Maximises sum_ik t_ik log softmax(x_i W + b)_k - |W|^2/(2 sd_W^2)
    - |b|^2/(2 sd_b^2). The optimum has zero-sum rows (W 1 = 0, b 1 = 0), the
    constraint of the PyMC model's ZeroSumNormal priors. EM calls it warm
    started with a few iterations (a generalised EM step); at EM's fixed point
    the step no longer moves, so the gradient there is zero all the same.
    """
    n, d = features.shape
    k = target.shape[1]
    X = np.hstack([features, np.ones((n, 1))])
    prec = np.r_[np.full(d, coef_sd ** -2.0), intercept_sd ** -2.0][:, None]

    def fun(theta):
        W = theta.reshape(d + 1, k)
        logp = log_softmax(X @ W, axis=1)
        grad = X.T @ (target - np.exp(logp)) - prec * W
        value = np.sum(target * logp) - 0.5 * np.sum(prec * W ** 2)
        return -value, -grad.ravel()

    cache = {}

    def hessp(theta, v):
        key = theta.tobytes()
        if key not in cache:  # the CG inner loop asks many products at one theta
            cache.clear()
            cache[key] = softmax(X @ theta.reshape(d + 1, k), axis=1)
        P = cache[key]
        XV = X @ v.reshape(d + 1, k)
        inner = P * (XV - np.sum(P * XV, axis=1, keepdims=True))
        return (X.T @ inner + prec * v.reshape(d + 1, k)).ravel()

    x0 = np.zeros((d + 1) * k) if start is None else start
    res = minimize(fun, x0, jac=True, hessp=hessp, method="trust-ncg",
                   options={"gtol": 1e-10, "maxiter": max_iter})
    W = res.x.reshape(d + 1, k)
    W = W - W.mean(axis=1, keepdims=True)  # exact zero sum (the optimum has it up to gtol)
    return W[:d], W[d]


def _m_step(ann, prob, pri, variant, previous=None):
    counts = C.expected_counts(ann, prob)
    return {**_rates(counts, pri, variant), **_m_step_truth(ann, prob, pri, previous)}


def _rates(counts, pri, variant):
    """The M-step of the confusions (or accuracies) given the expected counts."""
    K = counts.shape[-1]
    if variant == "one_coin":
        a, b = pri["accuracy"]
        correct = np.trace(counts, axis1=1, axis2=2)
        total = counts.sum(axis=(1, 2))
        acc = (correct + a - 1) / (total + a + b - 2)
        params = {"accuracy": acc, "confusion": _one_coin_confusion(acc, K)}
    else:
        num = counts + pri["confusion"] - 1
        den = num.sum(axis=2, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            params = {"confusion": np.where(den > 0, num / den, 1.0 / K)}
    return params


def _m_step_truth(ann, prob, pri, previous):
    """The M-step of the true class's prior: prevalence, or the softmax classifier."""
    if ann.features is None:
        return _prevalence(prob.sum(axis=0), pri)
    start = None
    if previous is not None:
        start = np.vstack([previous["coef"], previous["intercept"]]).ravel()
    coef, intercept = _fit_softmax(ann.features, prob, pri["coef_sd"], pri["intercept_sd"],
                                   start=start, max_iter=500 if start is None else 3)
    return {"coef": coef, "intercept": intercept}


def _prevalence(totals, pri):
    num = totals + pri["prevalence"] - 1
    return {"prevalence": num / num.sum()}


def _log_prior_params(params, pri, variant):
    if variant == "one_coin":
        lp = C.beta_logpdf_nojac(params["accuracy"], *pri["accuracy"]).sum()
    elif variant == "pooled":
        lp = (C.zerosum_normal_logpdf(params["population_logit"], pri["population"][1])
              + C.zerosum_normal_logpdf(params["confusion_offset"], 1.0))
    else:
        lp = C.dirichlet_logpdf_nojac(params["confusion"], pri["confusion"])
    if "prevalence" in params:
        lp += C.dirichlet_logpdf_nojac(params["prevalence"], pri["prevalence"])
    else:
        lp += C.zerosum_normal_logpdf(params["coef"], pri["coef_sd"])
        lp += C.zerosum_normal_logpdf(params["intercept"], pri["intercept_sd"])
    return float(lp)


def _log_posterior(ann, params, pri, variant) -> float:
    """The log posterior EM climbs and find_MAP maximises (no Jacobian): the
    marginal log-likelihood of the labels plus the log prior."""
    _, item_ll = C.posterior_from_joint(_joint(ann, params), overwrite=True)
    return float(item_ll.sum()) + _log_prior_params(params, pri, variant)


_EM_SUPPORTS = {"confusion": "simplex", "prevalence": "simplex", "accuracy": "unit"}
"""Supports the accelerated EM keeps the parameters in (``coef``/``intercept``:
none; extrapolation keeps their zero sums). One-coin: ``confusion`` is
extrapolated as a full confusion, and the stabilising EM step makes it one-coin
again."""


_DIMS = {
    "confusion": (D.ANNOTATOR, D.TRUE_CLASS, D.LABEL_CLASS),
    "accuracy": (D.ANNOTATOR,),
    "prevalence": (D.TRUE_CLASS,),
    "coef": (D.FEATURE, D.TRUE_CLASS),
    "intercept": (D.TRUE_CLASS,),
    "item_class_prob": (D.ITEM, D.TRUE_CLASS),
    "population_logit": (D.TRUE_CLASS, D.LABEL_CLASS),
    "confusion_offset": (D.ANNOTATOR, D.TRUE_CLASS, D.LABEL_CLASS),
    "confusion_mean": (D.TRUE_CLASS, D.LABEL_CLASS),
}


def _start(ann, pri, variant):
    """The majority-vote start shared by :func:`em` and :func:`build_model`."""
    return _m_step(ann, majority_vote(ann).values, pri, variant)


def _hierarchical_start(confusion, advantage):
    """Logistic-normal coordinates of (annotator, K, K) confusion matrices."""
    logit = np.log(np.clip(confusion, C.PROB_FLOOR, 1))
    logit -= logit.mean(axis=-1, keepdims=True)
    pop = logit.mean(axis=0)
    spread = np.maximum(np.sqrt(((logit - pop) ** 2).mean(axis=(0, 2))), 0.05)
    K = confusion.shape[-1]
    return {"population_logit": pop - advantage * (np.eye(K) - 1.0 / K),
            "confusion_spread": spread,
            "confusion_offset": (logit - pop) / spread[None, :, None]}


# ------------------------------------------------------------ pooled variant
SPREAD_BOUNDS = (0.05, 20.0)
"""The range of spreads (log-odds sd) :func:`empirical_spread` searches."""

_POOLED_NEWTON_ITER = 50
"""At most this many Newton steps in a pooled M-step (it stops at the optimum,
to rounding, after a few: the objective is concave and smooth)."""

_POOLED_EM_NEWTON = 1
"""Newton steps of the pooled M-step inside EM, warm started from the previous
values: a generalised EM step (it raises the objective, and at EM's fixed point
the Newton step is zero, so the M-step's gradient is zero there as at an exact
M-step). One step halves the EM's time against solving each M-step exactly,
with the same fixed points (DEVELOPING.md, "Pooled Dawid-Skene")."""

_NEWTON_STEP_TOL = 1e-12
"""The pooled M-step stops after a Newton step that moves no value by more than
this (well below EM's ``tol``, so that EM's stopping rule sees the exact M-step)."""


def _check_spread(spread) -> float:
    if (isinstance(spread, bool) or not isinstance(spread, int | float | np.number)
            or not (np.isfinite(spread) and spread > 0)):
        raise ValueError(f"spread must be a positive number (the log-odds sd of the annotators' "
                         f"confusion rows around the population), or None for empirical Bayes; "
                         f"got {spread!r}.")
    return float(spread)


def _pooled_logits(params, spread, advantage):
    """(annotator, K, K) confusion logits of the pooled model."""
    pop = params["population_logit"]
    K = pop.shape[-1]
    return (pop + advantage * (np.eye(K) - 1.0 / K))[None] + spread * params["confusion_offset"]


def _with_pooled_confusion(params, spread, pri):
    return {**params, "confusion": softmax(_pooled_logits(params, spread, pri["population"][0]),
                                           axis=-1)}


def _fit_pooled_rows(counts, spread, pri, start, max_iter=_POOLED_NEWTON_ITER):
    """The pooled M-step: maximise, over the population logits u and the offsets o,
    sum_jkl n_jkl log softmax(u_k + a e_k + s o_jk)_l - |o|^2 / 2 - |u|^2 / (2 sd^2)
    (n the expected counts, s the spread), a concave objective, by Newton's
    method from ``start`` with a backtracking line search. It separates over
    the true classes k, and in each its Hessian is an arrow: one (K, K) block
    per row (j, k), I + s^2 W_jk with W_jk = N_jk (diag p_jk - p_jk p_jk^T),
    coupled only through u_k. The Newton step eliminates the rows' blocks
    (the Schur complement of u_k), so a step costs J K batched (K, K) solves,
    linear in the annotators, and it converges in a few steps whatever the
    spread of the annotators' label counts (the first-order L-BFGS it replaces
    needed hundreds of iterations where a few heavy annotators made the
    problem ill-conditioned). The gradient of each row sums to zero and the
    Hessian keeps constant vectors, so from zero-sum values the iterates keep
    the zero sums of the model's ZeroSumNormal variables (made exact at the
    end). Returns (values, objective)."""
    advantage, sd = pri["population"]
    J, K, _ = counts.shape
    totals = counts.sum(axis=2, keepdims=True)
    eye = np.eye(K)

    def evaluate(prm):
        logp = log_softmax(_pooled_logits(prm, spread, advantage), axis=-1)
        value = (np.sum(counts * logp) - 0.5 * np.sum(prm["confusion_offset"] ** 2)
                 - 0.5 * np.sum(prm["population_logit"] ** 2) / sd ** 2)
        return value, logp

    prm = {"population_logit": np.array(start["population_logit"], dtype=float),
           "confusion_offset": np.array(start["confusion_offset"], dtype=float)}
    value, logp = evaluate(prm)
    for _ in range(max_iter):
        p = np.exp(logp)
        resid = counts - totals * p
        g_u = resid.sum(axis=0) - prm["population_logit"] / sd ** 2       # (K, K)
        g_o = spread * resid - prm["confusion_offset"]                     # (J, K, K)
        W = totals[..., None] * (p[..., :, None] * eye - p[..., :, None] * p[..., None, :])
        D = eye + spread ** 2 * W                                          # (J, K, K, K)
        solved = np.linalg.solve(D, np.concatenate([W, g_o[..., None]], axis=-1))
        D_inv_W, D_inv_g = solved[..., :K], solved[..., K]
        # Schur complement of u_k: A_k - s^2 sum_j W_jk D_jk^-1 W_jk, with
        # A_k = sum_j W_jk + I / sd^2; W D^-1 W is symmetric (W and D commute)
        schur = (W - spread ** 2 * W @ D_inv_W).sum(axis=0) + eye / sd ** 2
        rhs = g_u - spread * np.einsum("jkab,jkb->ka", W, D_inv_g)
        d_u = np.linalg.solve(schur, rhs[..., None])[..., 0]
        d_o = D_inv_g - spread * np.einsum("jkab,kb->jka", D_inv_W, d_u)
        size = max(np.abs(d_u).max(), np.abs(d_o).max())
        if size < _NEWTON_STEP_TOL:  # Newton converges quadratically: this step ends it
            prm = {"population_logit": prm["population_logit"] + d_u,
                   "confusion_offset": prm["confusion_offset"] + d_o}
            value, logp = evaluate(prm)
            break
        slope = np.sum(g_u * d_u) + np.sum(g_o * d_o)
        step = 1.0
        while True:
            trial = {"population_logit": prm["population_logit"] + step * d_u,
                     "confusion_offset": prm["confusion_offset"] + step * d_o}
            trial_value, trial_logp = evaluate(trial)
            # Armijo's condition, up to the rounding of the sum (near the optimum
            # the gain is below it, and the full step is taken)
            if trial_value >= value + 1e-4 * step * slope - 1e-12 * abs(value):
                break
            step /= 2
            if step < 1e-10:
                return _zero_sum(prm), float(value)
        prm, value, logp = trial, trial_value, trial_logp
    return _zero_sum(prm), float(value)


def _zero_sum(values):
    return {k: v - v.mean(axis=-1, keepdims=True) for k, v in values.items()}


def _pooled_m_step(ann, prob, pri, spread, previous, max_iter=_POOLED_NEWTON_ITER):
    rows, _ = _fit_pooled_rows(C.expected_counts(ann, prob), spread, pri, previous, max_iter)
    return {**rows, **_m_step_truth(ann, prob, pri, previous if "coef" in previous else None)}


def _pooled_start(ann, pri, spread):
    """EM's and the model's start: one exact pooled M-step from majority vote."""
    J, K = ann.n_annotators, ann.n_classes
    zero = {"population_logit": np.zeros((K, K)), "confusion_offset": np.zeros((J, K, K))}
    return _pooled_m_step(ann, majority_vote(ann).values, pri, spread, zero)


def _pooled_em(ann, pri, spread, params, tol, max_iter, accelerate):
    """Pooled EM at a fixed spread from ``params``: (params, n_iter, converged)."""
    return _em.run_em(
        lambda prm: _joint(ann, _with_pooled_confusion(prm, spread, pri)),
        lambda prob, prev: _pooled_m_step(ann, prob, pri, spread, prev, _POOLED_EM_NEWTON),
        params, tol=tol, max_iter=max_iter,
        objective=lambda prm: _log_posterior(ann, _with_pooled_confusion(prm, spread, pri),
                                             pri, "pooled"),
        supports={"prevalence": "simplex"}, accelerate=accelerate)


def _laplace_evidence(counts, spread, pri, start):
    """Laplace approximation of log p(counts | population logits, spread) with the
    offsets integrated out, at the population's mode: the pooled M-step's
    objective at its optimum minus half the log determinant of its Hessian in the
    offsets, I + s^2 N_jk (diag p_jk - p_jk p_jk^T) for each row (N_jk the
    row's expected labels, p_jk its label probabilities). Returns (value, optimum)."""
    rows, value = _fit_pooled_rows(counts, spread, pri, start)
    prob = softmax(_pooled_logits(rows, spread, pri["population"][0]), axis=-1)
    K = prob.shape[-1]
    totals = counts.sum(axis=2)[..., None, None]
    hessian = totals * (prob[..., :, None] * np.eye(K) - prob[..., :, None] * prob[..., None, :])
    _, logdet = np.linalg.slogdet(np.eye(K) + spread ** 2 * hessian)
    return value - 0.5 * float(logdet.sum()), rows


def _best_spread(counts, pri, start, tol):
    """The spread in :data:`SPREAD_BOUNDS` that maximises :func:`_laplace_evidence`
    at these expected counts (to ``tol`` on the log scale)."""
    warm = dict(start)

    def loss(log_spread):
        value, rows = _laplace_evidence(counts, float(np.exp(log_spread)), pri, warm)
        warm.update(rows)
        return -value

    found = minimize_scalar(loss, bounds=tuple(np.log(SPREAD_BOUNDS)), method="bounded",
                            options={"xatol": tol / 4})
    return float(np.exp(found.x))


SPREAD_REFERENCE = 1.0
"""The spread of the pooled EM whose expected counts :func:`empirical_spread`
reads."""


def _empirical_spread(ann, pri, tol=1e-3):
    """The spread that maximises :func:`_laplace_evidence` at the expected counts of
    the pooled EM at :data:`SPREAD_REFERENCE` (one step, not iterated: see
    :func:`empirical_spread`)."""
    params = _pooled_start(ann, pri, SPREAD_REFERENCE)
    params, _, _ = _pooled_em(ann, pri, SPREAD_REFERENCE, params, tol=1e-7, max_iter=10_000,
                              accelerate=True)
    full = _with_pooled_confusion(params, SPREAD_REFERENCE, pri)
    prob, _ = C.posterior_from_joint(_joint(ann, full), overwrite=True)
    return _best_spread(C.expected_counts(ann, prob), pri, params, tol)


def empirical_spread(
    annotations: Annotations,
    *,
    population_prior=DEFAULT_PRIORS["population_prior"],
    prevalence_prior=DEFAULT_PRIORS["prevalence_prior"],
    coef_precision=DEFAULT_PRIORS["coef_precision"],
    intercept_precision=DEFAULT_PRIORS["intercept_precision"],
) -> float:
    """The pooled variant's spread by empirical Bayes.

    The spread ``s`` is the log-odds sd of every annotator's confusion rows
    around the population's. It is chosen to maximise the marginal likelihood
    of the annotators' expected label counts, offsets integrated out (a Laplace
    approximation: each row's offsets enter a multinomial likelihood through a
    softmax), at the counts of the pooled EM at spread
    :data:`SPREAD_REFERENCE` = 1, to 0.1% on the log scale.

    One step, not iterated to a fixed point: the expected counts of a more
    pooled fit make the annotators look more alike, so alternating the EM and
    this update drifts toward no spread at all. Measured (DEVELOPING.md,
    "Pooled Dawid-Skene"): on labels simulated with spreads 0.5, 1 and 2, the
    one step gives 0.40-0.51, 0.84-1.0 and 1.52-1.93 (sparse annotators at the
    low ends), where iterating gave 0.05-0.49, 0.53-1.03 and 1.2-2.1; on a
    one-coin crowd of 30 annotators (true spread about 0.42) one step gives
    0.36 and iterating 0.05, which cost 4 points of accuracy.
    The search stops at the ends of :data:`SPREAD_BOUNDS`: at 0.05 every
    annotator has nearly the population's confusion (with few labels per
    annotator the data cannot tell a small spread from none), at 20 the rows
    are nearly unpooled.

    Parameters
    ----------
    annotations : Annotations
        Categorical annotations (features optional).
    population_prior, prevalence_prior, coef_precision, intercept_precision
        As in :func:`build_model`.

    Returns
    -------
    float
        The spread that ``build_model(..., variant="pooled")`` and
        ``em(..., variant="pooled")`` use when ``spread=None``.

    Examples
    --------
    >>> from crowd_models.models import dawid_skene
    >>> dawid_skene.empirical_spread(cm.datasets.load_dog())
    """
    C.require_categorical(annotations, "the Dawid-Skene model")
    _trust.check_identifiable(annotations, "the Dawid-Skene model")
    annotations = annotations.standardized()
    coef_precision = _chosen_precision(coef_precision, annotations, "pooled",
                                       prevalence_prior=prevalence_prior,
                                       intercept_precision=intercept_precision)
    pri = _priors(annotations, "pooled", None, DEFAULT_PRIORS["accuracy_prior"],
                  prevalence_prior, population_prior, DEFAULT_PRIORS["spread_prior"],
                  coef_precision, intercept_precision)
    return _empirical_spread(annotations, pri)


# ----------------------------------------------------------------- factory
def build_model(
    annotations: Annotations,
    *,
    variant: str = "full",
    confusion_prior=DEFAULT_PRIORS["confusion_prior"],
    accuracy_prior=DEFAULT_PRIORS["accuracy_prior"],
    prevalence_prior=DEFAULT_PRIORS["prevalence_prior"],
    population_prior=DEFAULT_PRIORS["population_prior"],
    spread_prior=DEFAULT_PRIORS["spread_prior"],
    spread=None,
    coef_precision=DEFAULT_PRIORS["coef_precision"],
    intercept_precision=DEFAULT_PRIORS["intercept_precision"],
) -> pm.Model:
    r"""The Dawid-Skene model in PyMC, true class summed out.

    .. math::

        z_i &\sim \mathrm{Categorical}(\pi_i), \quad
            \pi_i = \text{prevalence} \text{ or }
            \mathrm{softmax}(x_i^\top \text{coef} + \text{intercept}) \\
        y_{ij} \mid z_i = k &\sim \mathrm{Categorical}(\text{confusion}_{jk\cdot}) \\
        \text{full:} \quad \text{confusion}_{jk\cdot} &\sim \mathrm{Dirichlet}(\alpha_{jk}) \\
        \text{one-coin:} \quad \text{confusion}_{jkl} &= \text{accuracy}_j [k = l]
            + \tfrac{1 - \text{accuracy}_j}{K - 1} [k \ne l], \quad
            \text{accuracy}_j \sim \mathrm{Beta}(a, b) \\
        \text{hierarchical:} \quad \text{confusion}_{jk\cdot} &= \mathrm{softmax}(
            \mu_{k\cdot} + \text{spread}_k \, \text{offset}_{jk\cdot}) \\
        \text{pooled:} \quad \text{confusion}_{jk\cdot} &= \mathrm{softmax}(
            \mu_{k\cdot} + s \, \text{offset}_{jk\cdot}), \quad s \text{ fixed}

    (:math:`\mu` the population logits, zero-sum Normal plus a diagonal advantage;
    offsets zero-sum standard Normal; spreads half-Normal), and the likelihood of
    item i sums :math:`z_i` out.

    Parameters
    ----------
    annotations : Annotations
        K >= 2 classes (features optional).
    variant : {"full", "one_coin", "hierarchical", "pooled"}, optional
        See the module docstring.
    confusion_prior : None, (diagonal, off_diagonal), (K, K) or (J, K, K)
        Dirichlet concentrations of the confusion rows ("full").
    accuracy_prior : (a, b), optional
        Beta prior of the one-coin ``accuracy``.
    prevalence_prior : float or array (K,), optional
        Dirichlet concentration of ``prevalence``.
    population_prior : (diagonal advantage, sd), optional
        Prior of the hierarchical and pooled ``population_logit`` (true_class, label_class).
    spread_prior : float, optional
        HalfNormal scale of the hierarchical ``confusion_spread``.
    spread : float or None, optional
        The pooled variant's fixed spread (a positive number), or None (default) for
        :func:`empirical_spread`'s choice, computed here (it runs the pooled EM).
    coef_precision, intercept_precision : float, optional
        Positive numbers, priors of the sum-to-zero softmax classifier (with
        features, standardised). ``coef_precision="auto"`` (default): the
        precision :func:`em` chooses by the crowd labels' evidence for these
        annotations (an EM run when the model is built; the full variant's for
        the hierarchical and pooled ones).

    Returns
    -------
    pymc.Model
        Variables: ``confusion`` (annotator, true_class, label_class); ``accuracy``
        (one-coin); ``prevalence`` (true_class) or ``coef`` (feature, true_class)
        and ``intercept`` (true_class); ``item_class_prob``; observed ``item_labels``
        (item) whose log-density is each item's marginal log-likelihood.
        ``model.crowd_start`` holds EM's majority-vote start.

        The hierarchical model starts at the full model's majority-vote start,
        mapped to logits: ``population_logit`` the annotators' mean row logits,
        ``confusion_spread`` their standard deviation, the offsets standardised.
        The pooled model has ``population_logit``, ``confusion_offset`` and
        ``confusion_mean`` too, its spread in ``constant_data`` as
        ``confusion_spread``, and starts where its EM does.

    Examples
    --------
    >>> from crowd_models.models import dawid_skene
    >>> model = dawid_skene.build_model(cm.datasets.load_dog(), variant="one_coin")
    >>> fit = cm.fit_map(model)
    """
    C.require_categorical(annotations, "the Dawid-Skene model")
    _trust.check_identifiable(annotations, "the Dawid-Skene model")
    _refuse_unused(annotations, variant, prevalence_prior, coef_precision, intercept_precision)
    annotations = annotations.standardized()
    coef_precision = _chosen_precision(coef_precision, annotations, variant,
                                       confusion_prior=confusion_prior,
                                       accuracy_prior=accuracy_prior,
                                       prevalence_prior=prevalence_prior,
                                       intercept_precision=intercept_precision)
    pri = _priors(annotations, variant, confusion_prior, accuracy_prior, prevalence_prior,
                  population_prior, spread_prior, coef_precision, intercept_precision)
    spread = _pooled_spread(annotations, pri, variant, spread)
    K = annotations.n_classes
    if variant == "pooled":
        start = _pooled_start(annotations, pri, spread)
    else:
        start = _start(annotations, pri, "full" if variant == "hierarchical" else variant)
    with pm.Model(coords=annotations.coords()) as model:
        dims = (D.ANNOTATOR, D.TRUE_CLASS, D.LABEL_CLASS)
        if variant == "full":
            confusion = pm.Dirichlet("confusion", a=pri["confusion"], dims=dims)
        elif variant == "one_coin":
            acc = pm.Beta("accuracy", *pri["accuracy"], dims=D.ANNOTATOR)
            eye = np.eye(K)
            confusion = pm.Deterministic(
                "confusion",
                eye * acc[:, None, None] + (1 - eye) * ((1 - acc) / (K - 1))[:, None, None],
                dims=dims,
            )
        elif variant == "pooled":
            fixed = spread  # recorded in constant_data; a constant in the graph
            confusion = _population_confusion(
                K, pri, lambda: (pm.Data("confusion_spread", fixed), fixed)[1])
        else:
            confusion = _population_confusion(K, pri, lambda: pm.HalfNormal(
                "confusion_spread", sigma=pri["spread"], dims=D.TRUE_CLASS)[None, :, None])
            start = {**start, **_hierarchical_start(start["confusion"], pri["population"][0])}
        if annotations.features is None:
            prev = pm.Dirichlet("prevalence", a=pri["prevalence"], dims=D.TRUE_CLASS)
            log_prior = pt.log(prev)[None, :]
        else:
            X = pm.Data("features", annotations.features, dims=(D.ITEM, D.FEATURE))
            coef = pm.ZeroSumNormal("coef", sigma=pri["coef_sd"], dims=(D.FEATURE, D.TRUE_CLASS))
            intercept = pm.ZeroSumNormal("intercept", sigma=pri["intercept_sd"],
                                         dims=D.TRUE_CLASS)
            eta = X @ coef + intercept
            log_prior = eta - pt.logsumexp(eta, axis=1, keepdims=True)
        C.add_label_likelihood(pt.log(confusion), log_prior, annotations)
    return C.attach_protocol(
        model, "dawid_skene", variant,
        start={k: v for k, v in start.items() if not (variant != "full" and k == "confusion")},
        em=em if variant != "hierarchical" else None, annotations=annotations,
        arguments=locals())


def _population_confusion(K, pri, make_spread):
    """The hierarchical and pooled models' population logits, their softmax
    ``confusion_mean``, and each annotator's ``confusion``: the population's
    logits plus ``make_spread()`` (created after the population, a fixed number or
    one spread per true class) times standardised zero-sum offsets."""
    advantage, sd = pri["population"]
    # sigma as float64: PyTensor makes a Python float that float32 holds exactly
    # (1.5) a float32 constant, and log(sigma) would lose 1e-8
    pop = pm.ZeroSumNormal("population_logit", sigma=np.float64(sd),
                           dims=(D.TRUE_CLASS, D.LABEL_CLASS)) + advantage * (
        np.eye(K) - 1.0 / K)
    pm.Deterministic("confusion_mean", pt.special.softmax(pop, axis=-1),
                     dims=(D.TRUE_CLASS, D.LABEL_CLASS))
    spread = make_spread()
    dims = (D.ANNOTATOR, D.TRUE_CLASS, D.LABEL_CLASS)
    offset = pm.ZeroSumNormal("confusion_offset", sigma=1.0, dims=dims)
    return pm.Deterministic(
        "confusion", pt.special.softmax(pop[None] + spread * offset, axis=-1), dims=dims)


def _pooled_spread(annotations, pri, variant, spread):
    """The pooled variant's spread (None: empirical Bayes); None for the others."""
    if variant != "pooled":
        if spread is not None:
            raise ValueError(f"spread= is the pooled variant's fixed spread; variant="
                             f"{variant!r} has none (the hierarchical variant learns its "
                             f"spread: give spread_prior=).")
        return None
    return _empirical_spread(annotations, pri) if spread is None else _check_spread(spread)


# ---------------------------------------------------------------------- EM
def em(
    annotations: Annotations,
    *,
    variant: str = "full",
    confusion_prior=DEFAULT_PRIORS["confusion_prior"],
    accuracy_prior=DEFAULT_PRIORS["accuracy_prior"],
    prevalence_prior=DEFAULT_PRIORS["prevalence_prior"],
    population_prior=DEFAULT_PRIORS["population_prior"],
    spread=None,
    coef_precision=DEFAULT_PRIORS["coef_precision"],
    intercept_precision=DEFAULT_PRIORS["intercept_precision"],
    tol: float = 1e-10,
    max_iter: int = 10_000,
    start=None,
    accelerate: bool = True,
    classifier=None,
    regularization="auto",
    chunk_items: int | None = None,
) -> xr.Dataset:
    """Dawid-Skene MAP-EM ("full", "one_coin" or "pooled"), from the majority-vote start.

    E-step: the posterior of each item's class in log space. M-step: confusion
    rows (or accuracies) and prevalence in closed form with their priors; with
    features, the softmax classifier fitted to the soft labels. ``start``: an
    (item, true_class) array of initial class probabilities to start from
    instead of majority vote (e.g. to look for other local maxima). Iterates
    until an EM step moves no parameter by more than ``tol``; ``accelerate``
    (default) extrapolates the EM steps by SQUAREM (``_em.iterate_em_map``),
    which reaches the same fixed point in fewer steps; ``accelerate=False`` runs
    plain EM. The pooled variant's M-step is one warm-started Newton step on
    its concave objective (the rows given the expected counts), its start one
    exact M-step from majority vote; ``spread=None`` first runs
    :func:`empirical_spread` (a pooled EM at spread 1), then the EM at that spread
    from the start.

    Returns a Dataset with the posterior's names and dims (chain=1, draw=1),
    ``item_class_prob``, ``n_labels`` and the conjugate approximation of the
    posterior given the soft labels: ``confusion_alpha`` (Dirichlet rows, prior
    + expected counts) or, one-coin, ``accuracy_alpha``/``accuracy_beta`` (pooled:
    ``population_logit``, ``confusion_offset``, ``confusion_mean`` and the
    scalar ``confusion_spread``, without a conjugate approximation); attrs
    ``log_posterior``, ``log_likelihood``, ``n_iter`` (M-steps run), ``converged``.

    ``classifier`` (full and one-coin variants, with features): any
    scikit-learn classifier with ``fit(X, y, sample_weight=...)`` and
    ``predict_proba`` in place of the softmax classifier (Raykar et al. sec.
    6.3): each M-step fits it to the soft labels (every item K times, with
    target the class code 0..K-1 and weight its posterior probability), and
    the E-step takes its probabilities, placed by ``classifier.classes_``, as
    the prior of the truth (a class it never predicts gets about 0). The
    estimator is fitted in place: its final state predicts new items, with
    class codes as its ``classes_``. Plain EM (no extrapolation) from
    majority vote or ``start``, stopped when the labels' marginal
    log-likelihood moves by less than ``tol`` (a black-box M-step need not
    maximise exactly), with the not-converged warning after ``max_iter``
    steps; the fit has no ``coef``/``intercept`` or ``prevalence``,
    ``attrs["log_posterior"]`` is NaN (the classifier's regularisation is not
    a prior here) and ``attrs["classifier"]`` names it. With
    ``LogisticRegression(C=1 / coef_precision)`` (its intercept unpenalised:
    ``intercept_precision`` near 0 here) it reaches the softmax classifier's
    fixed point. ``fit_map`` and ``sample`` keep the softmax classifier.

    ``regularization`` (with a ``classifier``): "auto" (the default) chooses
    the classifier's own regularisation parameter without gold before the EM,
    None keeps it as given, ``{parameter: values}`` searches that grid; as in
    :func:`crowd_models.models.two_coin.em` (``attrs["classifier_tuning"]``).

    Large crowds (full and one-coin variants, no features): ``annotations`` may be
    a :class:`~crowd_models.large.ChunkedAnnotations` (narrow codes, read
    ``chunk_items`` items at a time; ``chunk_items=`` with ``Annotations`` builds
    one) or a :class:`~crowd_models.large.DaskAnnotations` (a pass per Dask
    partition, the item posteriors written to its ``posterior_path``, whose
    fit has no ``item_class_prob``). Same EM, same fixed point; no ``start``.

    ``coef_precision="auto"`` (the default; with features) chooses the softmax
    coefficients' precision by empirical Bayes, as ``two_coin.em`` does
    (MacKay's fixed point on the crowd labels' evidence; ``attrs["coef_precision"]``,
    ``evidence_rounds``, ``evidence_converged``); :func:`build_model` at
    ``"auto"`` takes the same number. The pooled variant takes the full
    variant's choice; a black-box ``classifier`` has its own regularisation
    and ignores it.

    Examples
    --------
    >>> from crowd_models.models import dawid_skene
    >>> fit = dawid_skene.em(cm.datasets.load_dog())
    >>> fit["confusion"].sel(annotator=fit["annotator"][0])
    """
    if chunk_items is not None or not isinstance(annotations, Annotations):
        return _large_em(annotations, variant, chunk_items, (
            confusion_prior, accuracy_prior, prevalence_prior, population_prior), dict(
            start=start, classifier=classifier), tol, max_iter, accelerate)
    C.require_categorical(annotations, "the Dawid-Skene model")
    _trust.check_identifiable(annotations, "the Dawid-Skene model")
    _refuse_unused(annotations, variant, prevalence_prior, coef_precision, intercept_precision,
                   classifier, regularization)
    if variant == "hierarchical":
        raise ValueError("the hierarchical variant has no EM: use fit_map or sample on "
                         "build_model(..., variant='hierarchical').")
    auto = (_evidence.is_auto(coef_precision) and annotations.features is not None
            and classifier is None)
    if auto and variant == "pooled":  # its EM has no evidence step
        coef_precision = _chosen_precision(coef_precision, annotations, variant,
                                           confusion_prior=confusion_prior,
                                           prevalence_prior=prevalence_prior,
                                           intercept_precision=intercept_precision)
        auto = False
    pri = _priors(annotations, variant, confusion_prior, accuracy_prior, prevalence_prior,
                  population_prior, DEFAULT_PRIORS["spread_prior"],
                  1.0 if _evidence.is_auto(coef_precision) else coef_precision,
                  intercept_precision)
    if start is not None:
        start = np.asarray(start, dtype=float)
        if start.shape != (annotations.n_items, annotations.n_classes):
            raise ValueError(f"start must be (item, true_class) = "
                             f"({annotations.n_items}, {annotations.n_classes}) probabilities.")
        start = start / start.sum(axis=1, keepdims=True)
    if classifier is not None:
        return _classifier_em(annotations, pri, variant, classifier, regularization, start, tol,
                              max_iter)
    annotations = annotations.standardized()
    spread = _pooled_spread(annotations, pri, variant, spread)
    if variant == "pooled":
        fit = _em_pooled(annotations, pri, spread, start, tol, max_iter, accelerate)
        return fit if annotations.features is None else fit.assign_attrs(
            coef_precision=float(coef_precision))
    attrs = {}
    if auto:
        params, n_iter, converged, attrs = _evidence_em(annotations, pri, variant, start, tol,
                                                        max_iter, accelerate)
        pri = {**pri, "coef_sd": attrs["coef_precision"] ** -0.5}
    else:
        params = (_start(annotations, pri, variant) if start is None
                  else _m_step(annotations, start, pri, variant))
        params, n_iter, converged = _run_em(annotations, pri, variant, params, tol, max_iter,
                                            accelerate)
    prob, item_ll = C.posterior_from_joint(_joint(annotations, params), overwrite=True)
    return C.em_dataset(
        annotations, {**params, "item_class_prob": prob}, _DIMS,
        extra=_conjugate(annotations, prob, pri, variant),
        attrs={
            "family": "dawid_skene", "variant": variant, "method": "em",
            "log_likelihood": float(item_ll.sum()),
            # _log_posterior at params, from the posterior just computed
            "log_posterior": float(item_ll.sum()) + _log_prior_params(params, pri, variant),
            "n_iter": n_iter, "converged": int(converged), **attrs,
        },
        supports=_EM_SUPPORTS,
    )


def _run_em(ann, pri, variant, params, tol, max_iter, accelerate):
    return _em.run_em(
        lambda prm: _joint(ann, prm),
        lambda prob, prev: _m_step(ann, prob, pri, variant, previous=prev),
        params, tol=tol, max_iter=max_iter,
        objective=lambda prm: _log_posterior(ann, prm, pri, variant),
        supports=_EM_SUPPORTS, accelerate=accelerate,
    )


def _chosen_precision(coef_precision, annotations, variant, **priors):
    """``coef_precision`` as given, or for ``"auto"`` the one :func:`em` chooses on
    these annotations and priors: the variant's own EM for the full and one-coin
    variants, the full variant's for the pooled and hierarchical ones (their
    models have no evidence step)."""
    return _evidence.resolved(coef_precision, annotations.standardized(), lambda: em(
        annotations, variant=variant if variant in ("full", "one_coin") else "full",
        coef_precision=coef_precision, **priors))


def _evidence_em(ann, pri, variant, start, tol, max_iter, accelerate):
    """:func:`em` with ``coef_precision="auto"``: EM at a precision alpha, then
    alpha <- gamma / |coef|^2 with gamma from the crowd labels' curvature
    (``_evidence``), the next EM warm started, until alpha settles; in the
    features' row space when they outnumber the items."""
    X, basis = _evidence.row_space(ann.features)
    reduced = ann if basis is None else ann.with_features(X)

    def fit_at(alpha, previous):
        pri_a = {**pri, "coef_sd": alpha ** -0.5}
        if previous is not None:
            params = previous[0]
        else:
            params = (_start(reduced, pri_a, variant) if start is None
                      else _m_step(reduced, start, pri_a, variant))
        params, n_iter, converged = _run_em(reduced, pri_a, variant, params, tol, max_iter,
                                            accelerate)
        prob, _ = C.posterior_from_joint(_joint(reduced, params), overwrite=True)
        prior = softmax(X @ params["coef"] + params["intercept"], axis=1)
        n_iter += 0 if previous is None else previous[1]
        return (params, n_iter, converged), _evidence.next_precision(
            X, _evidence.averaged_curvature(X, prior, prob, alpha), params["coef"], alpha)

    (params, n_iter, converged), alpha, rounds, settled = _evidence.fixed_point(fit_at)
    if basis is not None:
        params = {**params, "coef": basis @ params["coef"]}
    return params, n_iter, converged, {"coef_precision": alpha, "evidence_rounds": rounds,
                                       "evidence_converged": int(settled)}


def _conjugate(annotations, prob, pri, variant, counts=None) -> dict:
    """The EM fit's conjugate approximation given the soft labels ``prob`` (Dirichlet
    rows, or one-coin Beta accuracies) or their expected ``counts``, and each
    annotator's label count."""
    counts = C.expected_counts(annotations, prob) if counts is None else counts
    extra = {"n_labels": ((D.ANNOTATOR,), annotations.n_labels())}
    if variant == "one_coin":
        a, b = pri["accuracy"]
        correct = np.trace(counts, axis1=1, axis2=2)
        extra["accuracy_alpha"] = ((D.ANNOTATOR,), a + correct)
        extra["accuracy_beta"] = ((D.ANNOTATOR,), b + counts.sum(axis=(1, 2)) - correct)
    else:
        extra["confusion_alpha"] = (_DIMS["confusion"], pri["confusion"] + counts)
    return extra


def _large_em(annotations, variant, chunk_items, priors, controls, tol, max_iter, accelerate):
    """:func:`em` a block of items (or a Dask partition) at a time (``_chunked``)."""
    annotations = _chunked.large_annotations(annotations, chunk_items, "the Dawid-Skene model",
                                             controls)
    if variant not in ("full", "one_coin"):
        raise ValueError(f"the chunked and Dask EMs have the full and one-coin variants, not "
                         f"variant={variant!r}; pass variant='full' or 'one_coin'.")
    pri = _priors(annotations, variant, *priors, DEFAULT_PRIORS["spread_prior"], None, None)
    fit = _chunked.run_em(
        annotations, m_step=lambda counts, totals, _: {**_rates(counts, pri, variant),
                                                      **_prevalence(totals, pri)},
        log_rates=lambda prm: (np.log(np.clip(prm["confusion"], C.PROB_FLOOR, 1)),
                               _log_prior_classes(prm, None)[0]),
        log_prior=lambda prm: _log_prior_params(prm, pri, variant),
        supports=_EM_SUPPORTS, tol=tol, max_iter=max_iter, accelerate=accelerate)
    ll = fit.sums.log_likelihood
    params = dict(fit.params)
    if fit.item_class_prob is not None:
        params["item_class_prob"] = fit.item_class_prob
    return C.em_dataset(
        fit, params, _DIMS, extra=_conjugate(fit, None, pri, variant, counts=fit.counts()),
        attrs={"family": "dawid_skene", "variant": variant, "method": "em",
               "log_likelihood": ll, "n_iter": fit.n_iter, "converged": int(fit.converged),
               "log_posterior": ll + _log_prior_params(fit.params, pri, variant),
               "posterior_path": str(getattr(annotations, "posterior_path", None) or "")},
        supports=_EM_SUPPORTS)


def _refuse_unused(annotations, variant, prevalence_prior, coef_precision, intercept_precision,
                   classifier=None, regularization="auto") -> None:
    """A ValueError for a prior the annotations, or a black-box ``classifier``,
    would leave unused (and for ``regularization`` without a classifier)."""
    _registry.refuse_unused("dawid_skene", variant, annotations.features is not None,
                            classifier is not None, prevalence_prior=prevalence_prior,
                            coef_precision=coef_precision, intercept_precision=intercept_precision)
    _tuning.require_classifier(classifier, regularization)


def _classifier_em(annotations, pri, variant, classifier, regularization, start, tol,
                   max_iter) -> xr.Dataset:
    """:func:`em` with a scikit-learn classifier as the prior of the truth."""
    if variant not in ("full", "one_coin"):
        raise ValueError(f"classifier= is for the full and one-coin variants, not "
                         f"variant={variant!r}; use variant='full' or 'one_coin', or "
                         f"classifier=None for the softmax classifier.")
    C.check_classifier(classifier, annotations, "the Dawid-Skene model")
    steps = dict(rates=lambda plain, soft: _m_step(plain, soft, pri, variant),  # prevalence unused
                 log_confusion=lambda prm: np.log(np.clip(prm["confusion"], C.PROB_FLOOR, 1)),
                 tol=tol, max_iter=max_iter)
    start = majority_vote(annotations).values if start is None else start
    tuning = _tuning.tune(annotations, classifier, regularization, start, **steps)
    params, prob, item_ll, n_iter, converged, stop = C.classifier_em(annotations, classifier,
                                                                     start, **steps)
    params.pop("prevalence", None)
    return C.em_dataset(
        annotations, {**params, "item_class_prob": prob}, _DIMS,
        extra=_conjugate(annotations, prob, pri, variant),
        attrs={"family": "dawid_skene", "variant": variant, "method": "em",
               "log_likelihood": float(item_ll.sum()), "log_posterior": float("nan"),
               "classifier": repr(classifier), "n_iter": n_iter, "converged": int(converged),
               **stop, **tuning},
        supports=_EM_SUPPORTS,
    )


def _em_pooled(annotations, pri, spread, start, tol, max_iter, accelerate):
    J, K = annotations.n_annotators, annotations.n_classes
    if start is None:
        params = _pooled_start(annotations, pri, spread)
    else:
        zero = {"population_logit": np.zeros((K, K)), "confusion_offset": np.zeros((J, K, K))}
        params = _pooled_m_step(annotations, start, pri, spread, zero)
    params, n_iter, converged = _pooled_em(annotations, pri, spread, params, tol, max_iter,
                                           accelerate)
    params = _with_pooled_confusion(params, spread, pri)
    advantage = pri["population"][0]
    params["confusion_mean"] = softmax(params["population_logit"] + advantage * (
        np.eye(K) - 1.0 / K), axis=-1)
    prob, item_ll = C.posterior_from_joint(_joint(annotations, params), overwrite=True)
    alpha = C.dirichlet_rows(params["confusion"], C.expected_counts(annotations, prob), spread)
    return C.em_dataset(
        annotations, {**params, "item_class_prob": prob}, _DIMS,
        extra={"n_labels": ((D.ANNOTATOR,), annotations.n_labels()),
               "confusion_spread": ((), spread),
               "confusion_alpha": (_DIMS["confusion"], alpha)},
        attrs={
            "family": "dawid_skene", "variant": "pooled", "method": "em",
            "log_likelihood": float(item_ll.sum()),
            "log_posterior": _log_posterior(annotations, params, pri, "pooled"),
            "n_iter": n_iter, "converged": int(converged), "spread": spread,
        },
        supports={"prevalence": "simplex"},
    )


# ---------------------------------------------------------------- simulate
def predict_draws(post: xr.Dataset, features: np.ndarray) -> np.ndarray:
    """P(truth = each class | x) under each draw of a fit's softmax classifier:
    (sample, item, class). ``post``: the fit's posterior (``coef`` (feature,
    true_class), ``intercept``; chain, draw); ``features``: (item, feature) in the
    fit's feature order. :func:`crowd_models.predict` checks the features and
    summarises the draws.

    Examples
    --------
    >>> import numpy as np
    >>> from crowd_models.models import dawid_skene
    >>> conf = np.stack([np.eye(3) * 0.7 + 0.1] * 4)
    >>> ann = dawid_skene.simulate(conf, n_items=200, n_features=2, rng=0)
    >>> dawid_skene.predict_draws(dawid_skene.em(ann), ann.features).shape
    """
    dims = (D.FEATURE, D.TRUE_CLASS)
    coef = post["coef"].stack(sample=(D.CHAIN, D.DRAW)).transpose("sample", *dims).values
    intercept = post["intercept"].stack(sample=(D.CHAIN, D.DRAW)).transpose(
        "sample", D.TRUE_CLASS).values
    eta = np.einsum("if,sfk->sik", np.asarray(features, dtype=float), coef) + intercept[:, None]
    return softmax(eta, axis=-1)


def simulate(
    confusion,
    *,
    n_items: int | None = None,
    prevalence=None,
    features=None,
    n_features: int = 0,
    coef=None,
    intercept=None,
    true_labels=None,
    labels_per_item: int | None = None,
    labels_per_annotator=None,
    classes=None,
    rng=None,
) -> Annotations:
    """Annotations drawn from the Dawid-Skene model, with the truth kept.

    ``confusion``: (annotator, K, K) row-stochastic matrices. The truth comes
    from ``true_labels`` (codes 0..K-1), else the softmax classifier when
    there are features (``coef`` (feature, K) and ``intercept`` (K) drawn
    N(0, 1) if not given, then centred), else ``prevalence`` (uniform by
    default). Every annotator labels every item, or ``labels_per_item`` drawn
    at random without replacement, or annotator j labels
    ``labels_per_annotator[j]`` distinct items, each annotator in turn (in a
    random order) taking the items with the fewest labels so far (ties at
    random), so that a crowd of many light annotators covers the items evenly.
    ``classes`` names the classes (default 0..K-1).

    Examples
    --------
    >>> from crowd_models.models import dawid_skene
    >>> conf = [[[0.8, 0.1, 0.1], [0.2, 0.7, 0.1], [0.1, 0.1, 0.8]]] * 4
    >>> ann = dawid_skene.simulate(conf, n_items=300, rng=0)
    """
    rng = np.random.default_rng(rng)
    conf = np.asarray(confusion, dtype=float)
    if conf.ndim != 3 or conf.shape[1] != conf.shape[2] or conf.shape[1] < 2:
        raise ValueError(f"confusion must be (annotator, K, K) with K >= 2, got {conf.shape}.")
    if np.any(conf < 0) or not np.allclose(conf.sum(axis=2), 1):
        raise ValueError("every confusion row must be probabilities summing to 1.")
    J, K = conf.shape[:2]
    X = np.asarray(features, dtype=float) if features is not None else None
    if X is None and n_features:
        if n_items is None:
            raise ValueError("give n_items (or features).")
        X = rng.standard_normal((n_items, n_features))
    if n_items is None:
        n_items = len(X) if X is not None else (
            len(true_labels) if true_labels is not None else None)
    if n_items is None:
        raise ValueError("give n_items, features or true_labels.")
    truth = {"confusion": (_DIMS["confusion"], conf)}
    if true_labels is not None:
        z = np.asarray(true_labels, dtype=int)
        if z.shape != (n_items,) or z.min() < 0 or z.max() >= K:
            raise ValueError(f"true_labels must be n_items codes in 0..{K - 1}.")
    elif X is not None:
        W = rng.standard_normal((X.shape[1], K)) if coef is None else np.asarray(coef, float)
        b = rng.standard_normal(K) if intercept is None else np.asarray(intercept, float)
        W, b = W - W.mean(axis=1, keepdims=True), b - b.mean()
        p = softmax(X @ W + b, axis=1)
        z = (p.cumsum(axis=1) < rng.random((n_items, 1))).sum(axis=1)
        truth["coef"] = (_DIMS["coef"], W)
        truth["intercept"] = (_DIMS["intercept"], b)
    else:
        prev = np.full(K, 1.0 / K) if prevalence is None else np.asarray(prevalence, float)
        z = rng.choice(K, size=n_items, p=prev)
        truth["prevalence"] = (_DIMS["prevalence"], prev)
    if labels_per_annotator is None:
        item_idx, ann_idx = C.simulation_design(n_items, J, labels_per_item, rng)
    else:
        item_idx, ann_idx = _design_per_annotator(labels_per_annotator, n_items, J,
                                                  labels_per_item, rng)
    rows = conf[ann_idx, z[item_idx]]
    y = np.minimum((rows.cumsum(axis=1) < rng.random((len(rows), 1))).sum(axis=1), K - 1)
    classes = list(range(K)) if classes is None else list(classes)
    return C.simulated_annotations(item_idx, ann_idx, y, z, classes, X, truth)


def _design_per_annotator(labels_per_annotator, n_items, n_annotators, labels_per_item, rng):
    """(item_idx, annotator_idx): annotator j labels ``labels_per_annotator[j]``
    distinct items, the least labelled so far (see :func:`simulate`)."""
    counts = np.asarray(labels_per_annotator)
    if labels_per_item is not None:
        raise ValueError("give labels_per_item or labels_per_annotator, not both.")
    if (counts.shape != (n_annotators,) or not np.issubdtype(counts.dtype, np.integer)
            or counts.min() < 1 or counts.max() > n_items):
        raise ValueError(f"labels_per_annotator must be {n_annotators} integers (one per "
                         f"annotator) between 1 and n_items = {n_items}.")
    load = np.zeros(n_items)
    items, annotators = [], []
    for j in rng.permutation(n_annotators):
        chosen = np.argsort(load + rng.random(n_items))[:counts[j]]
        load[chosen] += 1
        items.append(chosen)
        annotators.append(np.full(counts[j], j))
    return np.concatenate(items), np.concatenate(annotators)


def simulate_sparse_crowd(rng=None, *, n_items: int = 300, n_light: int = 420,
                          heavy=(150, 120, 100, 80, 60),
                          prevalence=(0.35, 0.25, 0.2, 0.12, 0.08),
                          accuracy=(0.35, 0.85), spam_share: float = 0.0) -> Annotations:
    """A sparse, many-annotator crowd: most annotators give 2-6 labels, a few many.

    Each annotator's accuracy is uniform on ``accuracy``; the rest of each row of
    its confusion is spread over the other classes by a Dirichlet(1) draw. A
    share ``spam_share`` of the light annotators are spammers instead, each with
    a habit of its own: the same row, a Dirichlet(2, ..., 2) draw, whatever the
    true class. The defaults are the shape of issue 42's sparse crowd (5
    classes, 300 items, 420 light annotators and 5 heavy ones), which the tests
    and ``benchmarks/pooled_sparse.py`` share.

    Parameters
    ----------
    rng : int or numpy.random.Generator, optional
        The seed or generator.
    n_items, n_light : int, optional
        Items, and annotators with 2-6 labels each.
    heavy : sequence of int, optional
        The label counts of the heavy annotators.
    prevalence : sequence of float, optional
        The classes' shares (its length is the number of classes).
    accuracy : (float, float), optional
        The range of the annotators' accuracies.
    spam_share : float, optional
        The share of light annotators that are spammers (default 0), in [0, 1].

    Returns
    -------
    Annotations
        As :func:`simulate` returns them.

    Examples
    --------
    >>> from crowd_models.models import dawid_skene
    >>> sim = dawid_skene.simulate_sparse_crowd(0)
    >>> spammy = dawid_skene.simulate_sparse_crowd(0, heavy=(), spam_share=0.4)
    """
    if not 0 <= spam_share <= 1:
        raise ValueError(f"spam_share must be a share of the light annotators, in [0, 1]; "
                         f"got {spam_share!r}.")
    rng = np.random.default_rng(rng)
    K, J = len(prevalence), n_light + len(heavy)
    acc = rng.uniform(accuracy[0], accuracy[1], J)
    conf = np.empty((J, K, K))
    for j in range(J):
        for k in range(K):
            conf[j, k] = np.insert(rng.dirichlet(np.ones(K - 1)) * (1 - acc[j]), k, acc[j])
    spammers = np.flatnonzero(rng.random(n_light) < spam_share) if spam_share else []
    for j in spammers:
        conf[j] = rng.dirichlet(np.full(K, 2.0))
    counts = np.r_[rng.integers(2, 7, n_light), np.asarray(heavy, dtype=np.int64)].astype(
        np.int64)
    return simulate(conf, n_items=n_items, prevalence=np.array(prevalence),
                    labels_per_annotator=counts, rng=rng)
