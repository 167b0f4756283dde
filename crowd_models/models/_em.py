"""The EM engine every family's reference fit runs on: an EM map (an E-step and
an M-step) iterated to a fixed point, plain or extrapolated by SQUAREM
(:func:`iterate_em_map`), and :func:`run_em`, the same for an E-step given as
the (item, true_class) log joint. NumPy only."""

from __future__ import annotations

import numpy as np

from crowd_models.models._common import PROB_FLOOR, posterior_from_joint

EM_SUPPORTS = ("real", "unit", "simplex", "positive")
"""Supports an accelerated EM (:func:`iterate_em_map`) keeps each parameter in:
``"real"`` (no constraint; linear constraints such as zero sums survive, an
extrapolated point being an affine combination of EM iterates), ``"unit"``
(probabilities, extrapolated as they are, then clipped into [0, 1]),
``"simplex"`` (probabilities summing to 1 over the last axis: entries clipped
from below, rows renormalised) and ``"positive"`` (precisions: extrapolated on
the log scale). Probabilities are clipped at a tenth of the plain EM iterate's
distance to the boundary (:data:`_MAX_SHRINK`), so they stay inside."""

ACCELERATE_BELOW = 1e-3
"""An accelerated EM extrapolates only once an EM step moves no parameter by more
than this (in the units of the stopping rule). SQUAREM rests on EM's local
linear convergence; far from a fixed point its long steps can cross into another
local maximum's basin (the default-prior Dawid-Skene fit of the web-search data
did, from majority vote), so the early steps, which decide the basin, are plain
EM steps."""

_STEP_MAX_FACTOR = 4.0
"""SQUAREM's largest steplength starts at 1 and is multiplied by this each time
a step at the bound is accepted (divided by it after a rejected step)."""

_OBJECTIVE_SLACK = 1e-12
"""Relative rounding allowance of the objective check: an extrapolated point is
rejected when its objective is below the cycle start's by more than this
times (1 + |objective|)."""


def _to_free(value, support: str) -> np.ndarray:
    x = np.asarray(value, dtype=float)
    if support == "positive":
        return np.log(np.maximum(x, np.finfo(float).tiny))
    return x


_MAX_SHRINK = 10.0
"""An extrapolated probability (and one minus a ``"unit"`` probability) is kept
at least 1/_MAX_SHRINK of the plain EM iterate's: flat-prior EM moves an entry
near 0 by tiny absolute steps (it scales it by a factor per step), so an
extrapolation that drops one next to 0 would leave it there for many steps."""

_MAX_GROWTH = 1e-3
"""An accelerated EM stops only when, besides the plain stopping rule, no
probability (nor one minus a ``"unit"`` one) grows by more than this factor
minus 1 in the last EM step: a converged entry does not, an entry crawling away
from 0 in steps below ``tol`` (after an extrapolation, or on EM's own path) does."""


def _to_support(z: np.ndarray, support: str, ref) -> np.ndarray:
    """An extrapolated parameter (free coordinates) back in its support; ``ref``
    is the plain EM iterate theta2."""
    if support == "positive":
        return np.exp(z)
    if support in ("unit", "simplex"):
        ref = np.asarray(ref, dtype=float)
        lower = ref / _MAX_SHRINK
        if support == "unit":
            return np.clip(z, lower, 1.0 - (1.0 - ref) / _MAX_SHRINK)
        z = np.maximum(z, lower)
        return z / z.sum(axis=-1, keepdims=True)
    return z


def _growth(new: dict, old: dict, supports: dict) -> float:
    """Largest relative growth, in one EM step, of a probability (or of one minus
    a ``"unit"`` probability) among those with a declared support; values below
    10 PROB_FLOOR are left out (rounding makes a complement there noisy, and
    the E-step treats them as PROB_FLOOR)."""
    out = 0.0
    for k, support in supports.items():
        if support not in ("unit", "simplex") or k not in new:
            continue
        pairs = [(np.asarray(new[k], dtype=float), np.asarray(old[k], dtype=float))]
        if support == "unit":
            pairs.append((1.0 - pairs[0][0], 1.0 - pairs[0][1]))
        for a, b in pairs:
            grows = (b > 10 * PROB_FLOOR) & (a > b)
            if np.any(grows):
                out = max(out, float(np.max(a[grows] / b[grows])) - 1.0)
    return out


def _all_finite(params: dict) -> bool:
    return all(np.all(np.isfinite(np.asarray(v, dtype=float))) for v in params.values())


def max_change(new: dict, old: dict) -> float:
    """Largest absolute move of any parameter entry (the EM stopping rule)."""
    return max(float(np.max(np.abs(np.asarray(new[k]) - np.asarray(old[k])))) for k in new)


def run_em(joint_fn, m_step, params: dict, *, tol: float, max_iter: int, objective=None,
           supports=None, accelerate: bool = True):
    """EM from ``params``: E-step ``joint_fn(params)`` -> (item, true_class) log
    joint, M-step ``m_step(item_class_prob, previous)`` -> params, until an EM
    step moves no parameter by more than ``tol``.

    With ``accelerate`` (the default) the EM steps are extrapolated by SQUAREM
    (see :func:`iterate_em_map`, to which ``objective``, the log posterior the
    EM climbs, and ``supports`` go); the stopping rule is the same, so either
    way the returned point is an EM fixed point to ``tol``. Returns (params,
    n_iter, converged); ``n_iter`` counts M-steps (EM map evaluations,
    SQUAREM's stabilisation steps included).
    """

    def em_map(prm):
        prob, _ = posterior_from_joint(joint_fn(prm), overwrite=True)  # a new array each call
        return m_step(prob, prm)

    return iterate_em_map(
        em_map, params, tol=tol, max_iter=max_iter, objective=objective, supports=supports,
        accelerate=accelerate,
        nonfinite_message="EM produced non-finite parameters; use priors with a, b > 1 "
                          "(the defaults).")


def iterate_em_map(em_map, params: dict, *, tol: float, max_iter: int, change=max_change,
                   objective=None, supports=None, accelerate: bool = True,
                   nonfinite_message: str = "EM produced non-finite parameters."):
    """Iterate an EM map ``em_map(params) -> params`` (an E-step and an M-step) to
    a fixed point: stop when ``change(new, old)`` (default: the largest absolute
    move of any parameter entry) falls below ``tol``.

    ``accelerate=False`` iterates the map as it is. ``accelerate=True`` runs
    SQUAREM (Varadhan & Roland 2008, Scand. J. Stat. 35), steplength S3, once
    an EM step moves less than :data:`ACCELERATE_BELOW` (plain EM steps until
    then). Each cycle takes two EM steps theta0 -> theta1 -> theta2, forms
    r = theta1 - theta0 and v = theta2 - 2 theta1 + theta0 (log scale for
    ``"positive"`` parameters), the steplength alpha = -|r| / |v| bounded to
    [-step_max, -1] (step_max starts at 1, grows by 4 after each accepted step
    at the bound and shrinks by 4 after a rejected one), and the point
    theta0 - 2 alpha r + alpha^2 v, brought back into each parameter's support
    (``supports``: name -> one of :data:`EM_SUPPORTS`, default ``"real"``), to
    which one more EM step is applied (the stabilisation step; the
    extrapolated point need not satisfy relations the M-step imposes, only lie
    in the E-step's domain). The result is accepted when it is finite and,
    given ``objective(params) -> float`` (the log posterior the EM climbs), its
    objective is not below theta0's; otherwise (a non-finite joint, an error
    in the M-step, a lower objective) the cycle falls back to theta2, the plain
    EM iterate.

    Every cycle starts with a plain EM step from an accepted point and stops
    when that step moves less than ``tol`` (plain EM's rule: an EM step from
    the returned point moves no parameter by more than ``tol``) and, for the
    probabilities with a declared support, grows none of them (nor one minus
    a ``"unit"`` one) by a factor above 1 + :data:`_MAX_GROWTH`: with flat
    priors EM scales an entry near 0 by a factor per step, so an entry
    crawling away from 0 moves less than ``tol`` per step while far from its
    fixed value (plain EM stops on such points too, when its own path takes an
    entry near 0). When EM converges slowly, at rate rho, a point that passes
    the rule may still lie about ``tol / (1 - rho)`` from the exact fixed
    point, accelerated or not; a smaller ``tol`` costs the accelerated EM much
    less. Like any extrapolation, SQUAREM can end in a different local maximum
    than plain EM from the same start (``ACCELERATE_BELOW`` makes that rare).

    Returns (params, n_iter, converged): ``n_iter`` counts EM map evaluations
    (M-steps), the stabilisation steps of rejected extrapolations included;
    ``max_iter`` bounds it. Non-finite parameters from an EM step at an
    accepted point raise FloatingPointError(``nonfinite_message``).
    """
    if not (tol > 0 and max_iter >= 0):
        raise ValueError(f"need tol > 0 and max_iter >= 0, got tol={tol}, max_iter={max_iter}.")
    supports = dict(supports or {})
    bad = {k: v for k, v in supports.items() if v not in EM_SUPPORTS}
    if bad:
        raise ValueError(f"supports must be one of {EM_SUPPORTS}, got {bad}.")
    n_iter = 0

    def step(prm):
        nonlocal n_iter
        n_iter += 1
        new = em_map(prm)
        moved = change(new, prm)
        if not np.isfinite(moved):
            raise FloatingPointError(nonfinite_message)
        return new, moved

    if not accelerate:
        while n_iter < max_iter:
            new, moved = step(params)
            params = new
            if moved < tol:
                return params, n_iter, True
        return params, n_iter, False

    def free(prm):
        return {k: _to_free(v, supports.get(k, "real")) for k, v in prm.items()}

    def norm(z):
        return float(np.sqrt(sum(np.sum(np.square(x)) for x in z.values())))

    step_max, current_lp = 1.0, None  # the objective at params, computed when needed
    while n_iter < max_iter:
        theta1, moved = step(params)
        if moved < tol and _growth(theta1, params, supports) <= _MAX_GROWTH:
            return theta1, n_iter, True
        if moved > ACCELERATE_BELOW or n_iter >= max_iter:
            params, current_lp = theta1, None
            continue
        theta2, moved = step(theta1)
        if moved < tol and _growth(theta2, theta1, supports) <= _MAX_GROWTH:
            return theta2, n_iter, True
        if n_iter >= max_iter:
            params = theta2
            break
        z0, z1, z2 = free(params), free(theta1), free(theta2)
        r = {k: z1[k] - z0[k] for k in z0}
        v = {k: z2[k] - 2 * z1[k] + z0[k] for k in z0}
        norm_r, norm_v = norm(r), norm(v)
        ratio = norm_r / norm_v if norm_v > 0 else np.inf
        if step_max <= 1.0 or not (1.0 < ratio < np.inf):
            # alpha = -1: the extrapolated point is theta2, an EM iterate
            params, current_lp = theta2, None
            if step_max <= 1.0:
                step_max *= _STEP_MAX_FACTOR  # this step was at the bound
            continue
        alpha = -min(ratio, step_max)
        with np.errstate(all="ignore"):
            point = {k: _to_support(z0[k] - 2 * alpha * r[k] + alpha ** 2 * v[k],
                                    supports.get(k, "real"), theta2[k]) for k in z0}
        accepted = False
        if _all_finite(point):
            n_iter += 1
            try:
                with np.errstate(all="ignore"):
                    candidate = em_map(point)
                accepted = _all_finite(candidate)
            except (FloatingPointError, ValueError, ZeroDivisionError, np.linalg.LinAlgError):
                accepted = False
            if accepted and objective is not None:
                if current_lp is None:
                    current_lp = float(objective(params))
                with np.errstate(all="ignore"):
                    new_lp = float(objective(candidate))
                accepted = bool(np.isfinite(new_lp)) and (
                    new_lp >= current_lp - _OBJECTIVE_SLACK * (1.0 + abs(current_lp)))
        if accepted:
            params, current_lp = candidate, (new_lp if objective is not None else None)
            if alpha == -step_max:
                step_max *= _STEP_MAX_FACTOR
        else:
            params, current_lp = theta2, None
            if alpha == -step_max:
                step_max = max(1.0, step_max / _STEP_MAX_FACTOR)
    return params, n_iter, False
