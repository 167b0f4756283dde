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


def effective_parameters(features, curvature, alpha: float) -> float:
    """``gamma = sum_j lambda_j / (lambda_j + alpha)`` over the eigenvalues of
    ``sum_i x_i x_i' (x) A_i`` (features centred: the intercept takes the mean).

    ``curvature``: (item, K, K), each block cut to its positive semidefinite part.
    The eigenvalues come from the smaller of the primal (d K) and dual (n K) Gram
    matrices.
    """
    X = np.asarray(features, dtype=float)
    X = X - X.mean(axis=0)
    A = np.asarray(curvature, dtype=float)
    vals, vecs = np.linalg.eigh(0.5 * (A + np.swapaxes(A, 1, 2)))
    R = vecs * np.sqrt(np.clip(vals, 0.0, None))[:, None, :]  # A_i = R_i R_i'
    n, d = X.shape
    K = A.shape[1]
    Z = np.einsum("ia,ikm->imak", X, R).reshape(n * K, d * K)
    gram = Z.T @ Z if d <= n else Z @ Z.T
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
        curvature = crowd_curvature(np.hstack([1 - p, p]), labels)[:, 1:, 1:]
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
