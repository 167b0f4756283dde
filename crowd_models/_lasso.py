"""L1- and L2-penalised logistic regression on soft targets, solved to exact
zeros (the lasso M-steps of the feature-accuracy family)."""

from __future__ import annotations

import contextlib

import numpy as np
from scipy.special import expit

__all__ = ["l1_logistic", "single_thread"]


def single_thread():
    """Small dense problems: BLAS threads only contend (10x slower on a busy
    machine). threadpoolctl comes with scikit-learn; without it, no limit."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


def _solve_on_support(X, WX, g, l1, l2, theta, b, idx):
    """Minimiser of the proximal-Newton quadratic model if the support and
    signs of ``b`` (within the coordinates ``idx``) are the right ones, else None.

    On the support S with signs s the model's optimality condition is linear:
    (X_S' W X_S + diag(l2_S)) (b_S - theta_S) = -(g_S + l1_S s_S). The answer is
    kept only if it has the same signs and the zero coordinates in ``idx``
    satisfy their KKT condition |derivative| <= l1.
    """
    on = idx[(b[idx] != 0) | (l1[idx] == 0)]
    if on.size == 0:
        return None
    signs = np.sign(b[on])
    H = X[:, on].T @ WX[:, on] + np.diag(l2[on])
    try:
        step = np.linalg.solve(H, -(g[on] + l1[on] * signs))
    except np.linalg.LinAlgError:
        return None
    new_on = theta[on] + step
    pen = l1[on] > 0
    if np.any(new_on[pen] * signs[pen] <= 0):
        return None
    out = b.copy()
    out[on] = new_on
    off = np.setdiff1d(idx, on, assume_unique=True)
    if off.size:
        deriv = g[off] + X[:, off].T @ (WX @ (out - theta)) + l2[off] * (out[off] - theta[off])
        if np.any(np.abs(deriv) > l1[off]):
            return None
    return out


def l1_logistic(X, target, *, l1, l2=0.0, weights=None, start=None, tol: float = 1e-10,
                max_iter: int = 500, max_sweeps: int = 100) -> np.ndarray:
    """Penalised logistic regression on soft targets, solved to exact zeros.

    Minimises, over theta,

        sum_r weights_r [softplus(a_r) - target_r a_r]
        + sum_j l1_j |theta_j| + 1/2 sum_j l2_j theta_j^2,   a = X theta,

    i.e. the negative log-likelihood of fractional labels ``target`` in [0, 1]
    with an L1 penalty (Laplace prior of rate l1) and an L2 penalty (Gaussian
    prior of precision l2); no column is added for an intercept. ``l1`` and
    ``l2`` are numbers or arrays over the columns of X.

    Proximal Newton (as in glmnet / newGLMNET): each outer step minimises the
    quadratic model of the smooth part plus the L1 term by cyclic coordinate
    descent with soft-thresholding, over an active set grown by the KKT
    conditions (at most ``max_sweeps`` sweeps per step: an inexact inner
    solve is refined by the next outer step), and once the signs settle one
    linear solve on the support finishes the inner problem exactly; a
    backtracking line search on the true objective makes each step safe.
    Coordinates at zero are exact zeros.
    """
    X = np.asfortranarray(X, dtype=float)
    n, p = X.shape
    t = np.asarray(target, dtype=float)
    wts = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    l1 = np.broadcast_to(np.asarray(l1, dtype=float), (p,))
    l2 = np.broadcast_to(np.asarray(l2, dtype=float), (p,))
    theta = np.zeros(p) if start is None else np.array(start, dtype=float)
    X2 = X**2

    def objective(th):
        a = X @ th
        return (np.sum(wts * (np.logaddexp(0.0, a) - t * a)) + l1 @ np.abs(th)
                + 0.5 * l2 @ th**2)

    F = objective(theta)
    for _ in range(max_iter):
        prob = expit(X @ theta)
        w = np.maximum(wts * prob * (1.0 - prob), 1e-12 * wts)
        g = X.T @ (wts * (prob - t)) + l2 * theta
        h = X2.T @ w + l2
        WX = np.asfortranarray(X * w[:, None])
        b = theta.copy()
        wu = np.zeros(n)  # W X (b - theta)
        active = (theta != 0) | (l1 == 0) | (np.abs(g) > l1)
        for _kkt in range(100):
            idx = np.flatnonzero(active & (h > 0))
            for sweep in range(max_sweeps):
                biggest = 0.0
                for j in idx:
                    z = h[j] * b[j] - (g[j] + X[:, j] @ wu + l2[j] * (b[j] - theta[j]))
                    new = (z - l1[j] if z > l1[j] else z + l1[j] if z < -l1[j] else 0.0) / h[j]
                    d = new - b[j]
                    if d != 0.0:
                        wu += d * WX[:, j]
                        b[j] = new
                        if abs(d) > biggest:
                            biggest = abs(d)
                if biggest < tol * 0.1:
                    break
                if sweep % 2 == 1:
                    # once the signs have settled, one linear solve finishes the job
                    exact = _solve_on_support(X, WX, g, l1, l2, theta, b, idx)
                    if exact is not None:
                        b = exact
                        wu = WX @ (b - theta)
                        break
            A_all = g + X.T @ wu + l2 * (b - theta)
            viol = (~active) & (np.abs(A_all) > l1) & (h > 0)
            if not viol.any():
                break
            active |= viol
        D_ = b - theta
        decrease = g @ D_ + l1 @ (np.abs(b) - np.abs(theta))
        step = 1.0
        while True:
            cand = theta + step * D_
            F_new = objective(cand)
            if F_new <= F + 0.25 * step * min(decrease, 0.0) + 1e-13 * abs(F) or step < 1e-12:
                break
            step *= 0.5
        moved = float(np.max(np.abs(step * D_))) if p else 0.0
        theta, F = cand, F_new
        if moved < tol:
            break
    return theta
