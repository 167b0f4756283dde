"""The classifier's coefficient precision chosen by empirical Bayes (issue 44).

MacKay's evidence fixed point for one precision ``alpha`` of the coefficients
``w ~ N(0, I / alpha)``: at the MAP ``w`` for ``alpha``, with ``H`` the curvature
of the negative log-likelihood in ``w`` (Laplace), the evidence is stationary
where

    alpha * |w|^2 = gamma(alpha) = sum_j lambda_j / (lambda_j + alpha),

``lambda_j`` the eigenvalues of ``H`` and ``gamma`` the number of coefficients the
data determine. The update ``alpha <- gamma / |w|^2`` iterates to that point.

Which curvature: the data are labels ``t_i`` (soft: class probabilities) and
the curvature in ``w`` is ``sum_i x_i x_i' (x) [Cov_p(e_z) - Cov_t(e_z)]``, the
classifier's class covariance less the labels' own. For the joint model ``t``
is the posterior given the crowd's labels and this is the exact curvature of
the labels' marginal log-likelihood ``sum_i log sum_z p(z | x_i, w) p(labels_i
| z)`` (Louis): an item whose labels settle its class informs ``w`` as a gold
label would, one the crowd leaves open informs it little. For hard labels
(gold) ``Cov_t = 0`` and it is the GLM's Hessian. Soft labels taken as plain
data with the GLM's Hessian (``Cov_p`` alone) counted every item as a label
and sent the precision to its upper bound (classifier ignored) on the
simulated crowds of ``benchmarks/classifier_prior.py`` with 200 features.

Where it is taken: at the posterior mode of the logits that curvature counts
each item as if its logits were settled, and with more features than the
labels pin down the evidence over-shrinks (four to eight times past the best
log loss on new items with 1,000 features and 400 items). The fixed point
uses :func:`averaged_curvature`, the same curvature averaged over each
item's logits' Laplace posterior (since 2026-12-07; benchmarks/README.md).
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.special import expit

AUTO = "auto"
ALPHA_RANGE = (1e-6, 1e6)
"""The precisions the fixed point may take (|w|^2 of 0 would give infinity)."""
RTOL = 1e-2
"""Stop when the precision changes by less than this fraction."""
MAX_ROUNDS = 50


def is_auto(value) -> bool:
    """Whether ``coef_precision`` asks for empirical Bayes; another string is a ValueError."""
    if isinstance(value, str):
        if value != AUTO:
            raise ValueError(f"coef_precision must be a number, an array or 'auto' (empirical "
                             f"Bayes), got {value!r}.")
        return True
    return False


def glm_curvature(prior_prob) -> np.ndarray:
    """(item, K, K) class covariances diag(p) - p p' of the classifier's probabilities."""
    p = np.asarray(prior_prob, dtype=float)
    return p[:, :, None] * np.eye(p.shape[1]) - p[:, :, None] * p[:, None, :]


def crowd_curvature(prior_prob, posterior_prob) -> np.ndarray:
    """(item, K, K) curvature of the labels' log-likelihood in each item's logits:
    the classifier's class covariance less the (soft) labels' own (Louis)."""
    return glm_curvature(prior_prob) - glm_curvature(posterior_prob)


def averaged_curvature(features, prior_prob, posterior_prob, alpha: float,
                       free=slice(None)) -> np.ndarray:
    """(item, m, m) :func:`crowd_curvature` averaged over each item's logits'
    Laplace posterior at precision ``alpha``, for the ``free`` logits (two-coin:
    ``slice(1, None)``, class 0's logit held at 0; softmax: all).

    At the mode the curvature counts every item as if its logits were settled.
    Where the data leave them open (features outnumber what the labels can
    pin down) that overstates what each item tells, and the evidence
    over-shrinks. Averaged over N(mu_i, s_i^2) with MacKay's moderation,
    E sigma(eta) ~ sigma(kappa mu), kappa = (1 + pi s^2 / 8)^-1/2, the item's
    curvature becomes ``kappa [Cov(softmax(kappa log p)) - Cov(softmax(kappa
    log t))]``. ``s_i^2``: the variance of the item's log-odds between two
    classes, averaged over the pairs, under the Laplace covariance ``(sum_i
    x_i x_i' (x) A_i + alpha I)^-1`` (features centred, ``A_i`` the mode's
    curvature cut to its positive semidefinite part). benchmarks/README.md,
    ``classifier_prior.py``, measures it against the mode's.
    """
    p = np.asarray(prior_prob, dtype=float)
    t = np.asarray(posterior_prob, dtype=float)
    K = p.shape[1]
    X = np.asarray(features, dtype=float)
    X = X - X.mean(axis=0)
    n, d = X.shape
    R = _roots(crowd_curvature(p, t)[:, free, free])
    m = R.shape[1]
    cov = np.linalg.inv(_gram(X, R) + alpha * np.eye(d * m)).reshape(d, m, d, m)
    # V_i[k, l] = sum_ab x_ia x_ib cov[(a, k), (b, l)]: each item's logits' covariance
    V = np.empty((n, m, m))
    for k in range(m):
        for l in range(k, m):
            V[:, k, l] = V[:, l, k] = np.einsum("ib,ib->i", X @ cov[:, k, :, l], X)
    full = np.zeros((n, K, K))
    full[:, free, free] = V
    spread = 2 * (np.trace(full, axis1=1, axis2=2) - full.sum(axis=(1, 2)) / K) / (K - 1)
    kappa = 1 / np.sqrt(1 + np.pi * np.clip(spread, 0.0, None) / 8)

    def moderated(prob):
        with np.errstate(divide="ignore"):
            z = kappa[:, None] * np.log(prob)
        z = np.exp(z - z.max(axis=1, keepdims=True))
        return z / z.sum(axis=1, keepdims=True)

    return kappa[:, None, None] * crowd_curvature(moderated(p), moderated(t))[:, free, free]


def _roots(curvature) -> np.ndarray:
    """(item, m, m) ``R_i`` with ``R_i R_i'`` each block's positive semidefinite part."""
    A = np.asarray(curvature, dtype=float)
    vals, vecs = np.linalg.eigh(0.5 * (A + np.swapaxes(A, 1, 2)))
    return vecs * np.sqrt(np.clip(vals, 0.0, None))[:, None, :]


def _gram(X, R) -> np.ndarray:
    """``sum_i x_i x_i' (x) R_i R_i'``, a (d m, d m) matrix indexed (feature,
    logit): one ``X' diag(A[:, k, l]) X`` for each pair k <= l, A_i = R_i R_i'.
    n d^2 m^2 / 2 multiplications and no (n m, d m) design matrix: with 10,000
    items, 512 features and 10 classes that matrix alone would take 4 GB."""
    n, d = X.shape
    m = R.shape[1]
    A = R @ np.swapaxes(R, 1, 2)
    G = np.empty((d, m, d, m))
    for k in range(m):
        for l in range(k, m):
            G[:, k, :, l] = X.T @ (A[:, k, l, None] * X)
            G[:, l, :, k] = G[:, k, :, l].T
    return G.reshape(d * m, d * m)


def effective_parameters(features, curvature, alpha: float) -> float:
    """``gamma = sum_j lambda_j / (lambda_j + alpha)`` over the eigenvalues of
    ``sum_i x_i x_i' (x) A_i`` (features centred: the intercept takes the mean).

    ``curvature``: (item, K, K), each block cut to its positive semidefinite part.
    The eigenvalues come from the smaller of the primal (d K) and dual (n K) Gram
    matrices.
    """
    X = np.asarray(features, dtype=float)
    X = X - X.mean(axis=0)
    R = _roots(curvature)  # A_i = R_i R_i'
    n, d = X.shape
    m = R.shape[1]
    if d <= n:
        gram = _gram(X, R)
    else:  # the dual, (n m, n m): (x_i . x_j) R_i' R_j
        gram = ((X @ X.T)[:, None, :, None]
                * np.einsum("iac,jae->icje", R, R)).reshape(n * m, n * m)
    lam = np.clip(np.linalg.eigvalsh(gram), 0.0, None)
    return float(np.sum(lam / (lam + alpha)))


def next_precision(features, curvature, coef, alpha: float) -> float:
    """One fixed-point update ``gamma(alpha) / |coef|^2``, kept in :data:`ALPHA_RANGE`."""
    gamma = effective_parameters(features, curvature, alpha)
    norm = float(np.sum(np.asarray(coef, dtype=float) ** 2))
    if norm <= 0:
        return ALPHA_RANGE[1]
    return float(np.clip(gamma / norm, *ALPHA_RANGE))


def row_space(features):
    """``(X V, V)``: the items' coordinates in their features' row space and its
    (feature, rank) orthonormal basis, or ``(X, None)`` when there are no more
    features than items.

    Under an isotropic prior the MAP coefficients lie in that row space (every
    gradient of the likelihood does), so a fit on ``X V`` with the same
    precision gives ``coef = V coef_r``, the same curvature's eigenvalues and
    the same ``|coef|``: with 1,000 features and 400 items, Newton steps on 400.
    """
    X = np.asarray(features, dtype=float)
    if X.shape[1] <= X.shape[0]:
        return X, None
    U, S, Vt = np.linalg.svd(X, full_matrices=False)
    keep = S > S[0] * 1e-12
    return U[:, keep] * S[keep], Vt[keep].T


def fixed_point(fit_at, alpha: float = 1.0):
    """Iterate ``alpha <- gamma / |w|^2`` to the evidence's stationary point.

    ``fit_at(alpha, previous)`` fits at ``alpha`` (warm started from
    ``previous``, the last fit or None) and returns ``(fit, next_alpha)``.
    Returns ``(fit, alpha, rounds, converged)``: the fit at the ``alpha``
    returned, the first whose update moves it by less than :data:`RTOL` (or the
    last one tried, after :data:`MAX_ROUNDS`).

    The update converges linearly, slowly where the data determine many
    coefficients (music genre's softmax: 11 rounds, each a whole EM). From the
    second round on, the next ``alpha`` is the secant step on ``log(update) -
    log(alpha)``, the root the plain update creeps toward, wherever that step is
    defined and within a factor :data:`MAX_STEP` of the plain update; the
    stopping rule is the same, so the point returned is.
    """
    fit, history = None, []
    for rounds in range(1, MAX_ROUNDS + 1):
        fit, new = fit_at(alpha, fit)
        if abs(new - alpha) <= RTOL * alpha:
            return fit, alpha, rounds, True
        if rounds < MAX_ROUNDS:
            history.append((np.log(alpha), np.log(new) - np.log(alpha)))
            alpha = _next_alpha(history, new)
    return fit, alpha, MAX_ROUNDS, False


MAX_STEP = 10.0
"""The secant step of :func:`fixed_point` may land at most this factor away from
the plain update's ``alpha``; further, the plain update is taken."""


def _next_alpha(history, plain):
    """The secant root of g(x) = log(update(e^x)) - x through the last two rounds
    ``(x, g)``, or ``plain`` (the update itself) where the secant is not
    defined, not toward ``plain``'s side, or too far from it."""
    if len(history) < 2:
        return plain
    (x0, g0), (x1, g1) = history[-2], history[-1]
    if g1 == g0:
        return plain
    x = x1 - g1 * (x1 - x0) / (g1 - g0)
    lo, hi = ALPHA_RANGE
    if not np.isfinite(x) or (x - x1) * g1 <= 0 or abs(x - np.log(plain)) > np.log(MAX_STEP):
        return plain
    return float(np.clip(np.exp(x), lo, hi))


def logistic_evidence(fit_logistic, features, target, tau):
    """A binary logistic regression on the soft labels ``target`` with its
    coefficient precision at the evidence's fixed point (curvature p(1 - p) -
    t(1 - t)); ``fit_logistic(X, target, gamma, tau, start=)`` is two-coin's
    Newton fit. Returns (coef, intercept, alpha)."""
    X, basis = row_space(features)
    t = np.asarray(target, dtype=float)[:, None]
    labels = np.hstack([1 - t, t])

    def fit_at(alpha, previous):
        start = None if previous is None else np.append(*previous)
        coef, intercept = fit_logistic(X, target, np.eye(X.shape[1]) * alpha, tau, start=start)
        p = expit(X @ coef + intercept)[:, None]
        curvature = averaged_curvature(X, np.hstack([1 - p, p]), labels, alpha,
                                       free=slice(1, None))
        return (coef, intercept), next_precision(X, curvature, coef, alpha)

    (coef, intercept), alpha, _, _ = fixed_point(fit_at)
    return (coef if basis is None else basis @ coef), intercept, alpha


def resolved(coef_precision, annotations, em_fit):
    """A ``build_model``'s precision: ``coef_precision`` as given, or for
    ``"auto"`` the one ``em_fit()`` (the family's EM at ``"auto"`` on the same
    annotations and priors) chooses (an array where it chooses several: the
    cumulative ordinal model's, one per threshold); "auto" as given without
    features, where it is unused (so the model's EM comparison runs at the
    default, which a featureless EM takes). The EM's trust warnings are left
    to the fits of the model, which repeat them."""
    if not is_auto(coef_precision):
        return coef_precision
    if annotations.features is None:
        return coef_precision
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        chosen = np.asarray(em_fit().attrs["coef_precision"], dtype=float)
    return float(chosen) if chosen.ndim == 0 else chosen
