"""The dense Gaussian (Laplace) approximation's linear algebra: the Hessian from
central differences of a gradient, its Cholesky factor where it is positive
definite and well enough conditioned to invert, and the covariance from that
factor."""

from __future__ import annotations

import numpy as np
from scipy.linalg import LinAlgError, cholesky, lapack

HESSIAN_STEP = 1e-5
"""Relative step of the central differences behind the Laplace Hessian (near
the cube root of float64 precision; relative error about 1e-9)."""


LAPLACE_EIGEN_FLOOR = 1e-10
"""The Laplace Hessian counts as positive definite when its smallest eigenvalue
exceeds this times its largest."""


def difference_hessian(fun, x) -> np.ndarray:
    """The Hessian at ``x`` from central differences of ``fun``'s gradient, one
    coordinate at a time (2 x size evaluations), symmetrised."""
    n = x.size
    hess = np.empty((n, n))
    for i in range(n):
        step = HESSIAN_STEP * (1.0 + abs(float(x[i])))
        up, down = x.copy(), x.copy()
        up[i] += step
        down[i] -= step
        hess[:, i] = (fun(up)[1] - fun(down)[1]) / (2 * step)
    return (hess + hess.T) / 2


EXACT_SPECTRUM_SIZE = 500
"""Up to this many variables, the Laplace Hessian is judged by its whole spectrum;
above it, by its Cholesky factorisation and LAPACK's estimate of its condition
number, which costs O(n^2) beside the factorisation's O(n^3)."""


def positive_definite_factor(hess: np.ndarray) -> tuple[np.ndarray | None, str]:
    """(the lower Cholesky factor of ``hess``, a phrase for the warning), the factor
    None where ``hess`` is not finite, not positive definite, or so ill-conditioned
    (smallest eigenvalue at most :data:`LAPLACE_EIGEN_FLOOR` times the largest, or
    above :data:`EXACT_SPECTRUM_SIZE` variables, the estimated reciprocal 1-norm
    condition number at most that floor) that its inverse means nothing."""
    n = hess.shape[0]
    if n == 0:
        return np.ones((0, 0)), ""
    if not np.all(np.isfinite(hess)):
        return None, " (it has entries that are not finite)"
    if n <= EXACT_SPECTRUM_SIZE:
        eigen = np.linalg.eigvalsh(hess)
        phrase = f" (eigenvalues from {eigen[0]:.3g} to {eigen[-1]:.3g})"
        if eigen[0] <= LAPLACE_EIGEN_FLOOR * max(eigen[-1], 0):
            return None, phrase
        return cholesky(hess, lower=True), phrase
    try:
        chol = cholesky(hess, lower=True)
    except LinAlgError:
        return None, " (its Cholesky factorisation fails)"
    rcond, info = lapack.dpocon(chol, float(np.max(np.sum(np.abs(hess), axis=0))), uplo="L")
    phrase = f" (reciprocal condition number about {rcond:.3g})"
    if info or rcond <= LAPLACE_EIGEN_FLOOR:
        return None, phrase
    return chol, phrase


def inverse_from_factor(chol: np.ndarray) -> np.ndarray:
    """The inverse of ``chol @ chol.T`` from its lower Cholesky factor."""
    if chol.size == 0:
        return np.zeros((0, 0))
    lower, info = lapack.dpotri(chol, lower=1)
    if info:
        raise LinAlgError(f"dpotri failed ({info})")
    return np.tril(lower) + np.tril(lower, -1).T
