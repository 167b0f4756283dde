"""PyMC calls with the settings these models need: `fit_map` and `sample`.

Both return an ``xarray.DataTree`` whose ``posterior`` has the same names,
dims and coords as the families' EM Datasets, plus an item-level
``log_likelihood`` group (``az.loo``/``az.compare`` work per item) and
``item_class_prob`` in the posterior for discrete-label families.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import threading
import time
import warnings

import numpy as np
import pymc as pm
import pymc.backends.arviz
import pytensor.tensor as pt
import xarray as xr
from pymc.logprob.utils import ParameterValueError
from pytensor.compile.sharedvalue import SharedVariable
from scipy.optimize import OptimizeResult, linear_sum_assignment, minimize
from threadpoolctl import threadpool_limits

from crowd_models import _compiled, _trust
from crowd_models import _dims as D

__all__ = ["fit_map", "sample", "label_switched_chains", "posterior_of", "laplace_fit"]

MAX_GRADIENT = 1e-6
"""fit_map warns when the optimiser stops with a gradient entry (on the
unconstrained scale) larger than this times the number of observed items: the
point is not a mode (the optimiser stalled, or the density is unbounded, as in
a centred hierarchical model). The log posterior is a sum over items, so its
gradient grows with their number; the per-item scale keeps the criterion from
firing on large data sets whose fit agrees with EM to 1e-7."""

POLISH_GRADIENT = 1e-9
"""fit_map follows L-BFGS with a Newton polish (:func:`_newton_polish`: CG on
forward-difference Hessian-vector products) when L-BFGS stops with a gradient
entry above this times the number of observed items. L-BFGS stops once the
objective's changes near float64 precision (where its line searches fail), which
on flat ridges (the dog data) left 1e-5 differences from the EM fixed point; the
polish takes them to ~1e-10."""

EM_AGREEMENT = 1e-9
"""fit_map's optimum and the family's EM optimum (from the same start) count as
one mode when their log posteriors agree to this relative tolerance."""

POLISH_GAIN = 1e-6
"""fit_map skips polishing the optimiser's point when the family's EM reached a
log posterior higher by more than this relative amount: near a mode, where the
polish runs, it raises the log posterior by far less (1e-9 relative on the
web search data), so the EM's mode is the one returned, polished."""

POLISH_RADIUS = 10.0
"""The trust-krylov polish's largest trust radius on the unconstrained scale
(scipy's default, 1000, let trial steps reach values where PyMC's parameter
checks fail): it starts next to a mode, where steps are small."""

HESSP_STEP = 6e-6
"""Relative step of the central-difference Hessian-vector products given to
scipy's Hessian-vector methods with ``exact_hessp=False`` (about the cube root of
float64 precision)."""

BOUNDARY = 1e-10
"""Start values on a boundary of their support are moved this far inside."""

LBFGS_FTOL = 1e-12
"""fit_map's default L-BFGS-B ``ftol`` when the Newton polish follows (1e-15
without it): L-BFGS stops once an iteration lowers the objective by less than
this relative amount, a few iterations above the objective's rounding, where
its line searches start to fail and each failure costs up to 20 evaluations;
the polish's Newton steps, which need the gradient only, finish from there."""

LBFGS_MAXCOR = 30
"""fit_map's default L-BFGS-B memory (scipy's is 10): on the ill-conditioned
Dawid-Skene and latent ordinal posteriors of web search it saves a third of the
evaluations (1008 -> 672, 743 -> 449 with 40)."""

PROBE_STEP = 1e-6
"""Relative step of the forward difference behind the curvature probe."""

PROBE_SEED = 20261201
"""Seed of the probe's random signs (fixed: fit_map is deterministic)."""

PROBE_AGREEMENT = 0.9
"""The share of coordinates on which the curvature probe's two estimates must
agree (within a factor 2, positive) for fit_map to use them."""

CURVATURE_FLOOR = 1e-6
"""The probe's curvature estimates are floored at this times their largest
(the scales of the variables then span at most a factor 1000)."""

FORWARD_STEP = 1e-7
"""Relative step of the polish's forward-difference Hessian-vector products
(about the square root of float64 precision)."""

NEWTON_CG_RTOL = 1e-4
"""The polish solves each Newton system to this relative residual."""

POLISH_TARGET = 1.0
"""The Newton polish stops once the largest gradient entry is this times the
polish threshold (:data:`POLISH_GRADIENT` per observed item); with the Jacobi
preconditioner one step usually lands far below it."""

NEWTON_CG_PRODUCTS = 50
"""At most this many Hessian-vector products per Jacobi-preconditioned Newton system."""

NEWTON_CG_PRODUCTS_PLAIN = 100
"""At most this many per unpreconditioned Newton system (Dawid-Skene, the latent
ordinal model: ill-conditioned, each step cuts the gradient about 10-fold)."""

NEWTON_STEPS = 6
"""At most this many Newton steps in the polish."""

NEWTON_HALVINGS = 4
"""Times the polish halves a Newton step that does not reduce the gradient."""

NEWTON_XTOL = 1e-9
"""The polish stops once the distance left to the mode, estimated as the last
step's largest relative move times the factor by which it cut the largest
gradient entry, is below this."""

_METHOD_OPTIONS = {
    "L-BFGS-B": ("ftol", "gtol", "maxiter", "maxfun", "maxcor", "maxls"),
    "BFGS": ("gtol", "maxiter", "norm", "xrtol"),
    "CG": ("gtol", "maxiter", "norm"),
    "Newton-CG": ("xtol", "maxiter"),
    "trust-krylov": ("gtol", "maxiter", "inexact"),
    "trust-ncg": ("gtol", "maxiter"),
    "TNC": ("ftol", "gtol", "xtol", "maxfun"),
    "SLSQP": ("ftol", "maxiter"),
    "Powell": ("ftol", "xtol", "maxiter", "maxfev"),
    "Nelder-Mead": ("fatol", "xatol", "maxiter", "maxfev"),
}
"""The scipy.optimize.minimize methods fit_map accepts and the options each takes."""
_USES_GRADIENT = {"L-BFGS-B", "BFGS", "CG", "Newton-CG", "trust-krylov", "trust-ncg", "TNC",
                  "SLSQP"}
_USES_HESSP = {"Newton-CG", "trust-krylov", "trust-ncg"}


def posterior_of(fit) -> xr.Dataset:
    """The posterior Dataset of a fit: a DataTree's ``posterior`` group, or an EM Dataset."""
    if isinstance(fit, xr.Dataset):
        return fit
    if isinstance(fit, xr.DataTree):
        if "posterior" not in fit.children:
            raise ValueError("this DataTree has no posterior group.")
        return fit["posterior"].to_dataset()
    raise TypeError(
        f"expected a fit (an EM xarray.Dataset, or a DataTree from fit_map/sample), got "
        f"{type(fit).__name__}."
    )


# ------------------------------------------------------ the model's functions
class _Functions:
    """The compiled functions of one model, each fetched from the structure cache
    on first use (see :mod:`crowd_models._compiled`) and kept on the model."""

    def __init__(self, model: pm.Model):
        self.model = model
        self.value_vars = list(model.continuous_value_vars)
        if len(self.value_vars) != len(model.value_vars):
            raise ValueError("fit_map and sample need a model whose free variables are all "
                             "continuous (the families sum the discrete truth out).")
        self.free_names = [model.values_to_rvs[v].name for v in self.value_vars]
        self._bound = {}
        self.progressbar = False  # set by fit_map/sample: show compiles

    def _get(self, kind, build):
        bound = self._bound.get(kind)
        if bound is None:
            inputs, outputs = build()
            bound = self._bound[kind] = _compiled.model_function(
                self.model, kind, inputs, outputs, progressbar=self.progressbar)
        else:
            bound.refresh()
        return bound

    def logp_grad(self):
        def build():
            loss = -self.model.logp(jacobian=False)
            return self.value_vars, [loss, *pt.grad(loss, self.value_vars)]
        return self._get("logp_grad", build)

    def nuts_logp_grad(self):
        """The log density with the transforms' Jacobian (what NUTS samples) and its gradient."""
        def build():
            logp = self.model.logp()
            return self.value_vars, [logp, *pt.grad(logp, self.value_vars)]
        return self._get("nuts_logp_grad", build)

    def hessp(self):
        def build():
            loss = -self.model.logp(jacobian=False)
            ps, hp = _compiled.hessp_graph(loss, self.value_vars)
            return [*self.value_vars, *ps], hp
        return self._get("hessp", build)

    def start(self):
        """Untransformed free-variable values -> the value variables (transformed)."""
        def build():
            model, ins, outs = self.model, [], []
            for name in self.free_names:
                rv = model[name]
                value = rv.type(name=name)
                transform = model.rvs_to_transforms.get(rv)
                ins.append(value)
                outs.append(value if transform is None else
                            transform.forward(value, *rv.owner.inputs))
            return ins, outs
        return self._get("start", build)

    def constrained(self):
        """Value variables -> free variables and the deterministics without an item
        dim (what the Laplace draws keep; the item-level ones would be draws x items)."""
        def build():
            model = self.model
            names = self.constrained_names()
            unobserved = {v.name: v for v in model.unobserved_value_vars if v.name in names}
            return self.value_vars, [unobserved[n] for n in names]
        return self._get("constrained", build)

    def constrained_names(self):
        """The names :meth:`constrained` returns, in order."""
        dims = self.model.named_vars_to_dims
        dets = [d.name for d in self.model.deterministics
                if D.ITEM not in (dims.get(d.name) or ())]
        return [*self.free_names, *dets]

    def point_names(self):
        model = self.model
        return (self.free_names, [d.name for d in model.deterministics],
                [o.name for o in model.observed_RVs])

    def point(self):
        """Value variables -> free variables, deterministics and each observed
        variable's element-wise log-likelihood."""
        def build():
            model = self.model
            free, dets, _ = self.point_names()
            wanted = set(free) | set(dets)
            unobserved = {v.name: v for v in model.unobserved_value_vars if v.name in wanted}
            outs = [unobserved[n] for n in (*free, *dets)]
            outs += _compiled.elementwise_loglik(model)
            return self.value_vars, outs
        return self._get("point", build)


def functions_of(model: pm.Model) -> _Functions:
    fns = model.__dict__.get("_crowd_functions")
    if fns is None:
        fns = model.__dict__["_crowd_functions"] = _Functions(model)
    return fns


def _expected_shapes(model: pm.Model, names) -> dict:
    """Each free variable's shape from its dims (None where it has none)."""
    lengths = {}
    for d, v in model.dim_lengths.items():
        if hasattr(v, "get_value"):
            lengths[d] = int(v.get_value())
        elif model.coords.get(d) is not None:
            lengths[d] = len(model.coords[d])
    out = {}
    for name in names:
        dims = model.named_vars_to_dims.get(name)
        rv = model[name]
        if dims:
            out[name] = (tuple(lengths[d] for d in dims) if all(d in lengths for d in dims)
                         else None)
        elif rv.type.ndim == 0:
            out[name] = ()
        else:
            out[name] = None
    return out


def _start_point(model: pm.Model, start) -> dict | None:
    """Untransformed start values by variable name, from an EM fit or a dict,
    checked against the variables' shapes."""
    if start is None:
        return None
    if isinstance(start, xr.DataTree):
        start = posterior_of(start)
    names = [rv.name for rv in model.free_RVs]
    if isinstance(start, xr.Dataset):
        point = {}
        for name in names:
            if name in start:
                value = start[name]
                value = value.isel({d: 0 for d in (D.CHAIN, D.DRAW) if d in value.dims})
                point[name] = np.asarray(value.values, dtype=float)
    elif isinstance(start, dict):
        unknown = set(start) - set(names)
        if unknown:
            raise ValueError(
                f"start names unknown variables {sorted(unknown)}; the model's free variables "
                f"are {names}."
            )
        point = {}
        for name, value in start.items():
            try:
                point[name] = np.asarray(value, dtype=float)
            except (TypeError, ValueError):
                raise TypeError(f"start[{name!r}] must be numeric, got {value!r}.") from None
    else:
        raise TypeError(
            f"start must be None (the model's majority-vote start), an EM Dataset, a fit "
            f"DataTree or a dict, got {type(start).__name__}."
        )
    for name, shape in _expected_shapes(model, point).items():
        value = point[name]
        if shape is not None and value.shape != shape:
            if value.ndim == 0 and len(shape) >= 1:
                raise ValueError(
                    f"start[{name!r}] is a number, but {name} has shape {shape} "
                    f"(dims {model.named_vars_to_dims.get(name)}); give an array of that shape."
                )
            raise ValueError(
                f"start[{name!r}] has shape {value.shape}, but {name} has shape {shape} "
                f"(dims {model.named_vars_to_dims.get(name)})."
            )
        if not np.all(np.isfinite(value)):
            raise ValueError(f"start[{name!r}] holds non-finite values.")
    return _inside_support(model, point)


def _inside_support(model: pm.Model, point: dict) -> dict:
    """Move boundary values (an EM fit with flat priors can hold exact 0 or 1)
    just inside the support, where the unconstrained transforms are finite."""
    transforms = {rv.name: model.rvs_to_transforms.get(rv) for rv in model.free_RVs}
    out = {}
    for name, value in point.items():
        kind = type(transforms.get(name)).__name__
        value = np.asarray(value, dtype=float)
        support = {"SimplexTransform": ("a simplex (entries >= 0 summing to 1 over the last "
                                        "axis)", lambda v: np.all(v >= 0) and np.allclose(
                                            v.sum(axis=-1), 1, atol=1e-6)),
                   "LogOddsTransform": ("[0, 1]", lambda v: np.all((v >= 0) & (v <= 1))),
                   "LogTransform": ("[0, inf)", lambda v: np.all(v >= 0))}.get(kind)
        if not np.all(np.isfinite(value)) or (support and not support[1](value)):
            raise ValueError(
                f"start[{name!r}] lies outside the support of {name}"
                + (f", {support[0]}" if support else "") + f": got values from "
                f"{np.nanmin(value):.4g} to {np.nanmax(value):.4g}"
                + ("" if np.all(np.isfinite(value)) else " and non-finite ones")
                + ". Give values inside it (or start=None for the majority-vote start).")
        if kind == "SimplexTransform":
            value = np.clip(value, BOUNDARY, None)
            value = value / value.sum(axis=-1, keepdims=True)
        elif kind == "LogOddsTransform":
            value = np.clip(value, BOUNDARY, 1 - BOUNDARY)
        elif kind == "LogTransform":
            value = np.clip(value, BOUNDARY, None)
        out[name] = value
    return out


def _unconstrained_start(model: pm.Model, start) -> list[np.ndarray]:
    """The value variables (transformed scale) at ``start``: a fit, a dict (missing
    variables from ``model.crowd_start``, else PyMC's initial point) or None."""
    fns = functions_of(model)
    point = _start_point(model, start) or {}
    missing = [n for n in fns.free_names if n not in point]
    if missing:
        crowd = _start_point(model, getattr(model, "crowd_start", None)) or {}
        point = {**{n: crowd[n] for n in missing if n in crowd}, **point}
        missing = [n for n in fns.free_names if n not in point]
    values = fns.start()(*[np.asarray(point.get(n, 0.0), dtype=float) for n in fns.free_names])
    if missing:  # PyMC's default initial point, on the transformed scale
        default = model.initial_point()
        values = [np.asarray(default[v.name]) if n in missing else x
                  for n, v, x in zip(fns.free_names, fns.value_vars, values, strict=True)]
    return [np.asarray(v, dtype=float) for v in values]


def _check_method(method: str, options: dict) -> str:
    canonical = {m.lower(): m for m in _METHOD_OPTIONS}
    if not isinstance(method, str) or method.lower() not in canonical:
        raise ValueError(f"method={method!r} is not one fit_map supports; use one of "
                         f"{list(_METHOD_OPTIONS)}.")
    method = canonical[method.lower()]
    unknown = set(options) - set(_METHOD_OPTIONS[method])
    if unknown:
        raise TypeError(f"fit_map(method={method!r}) got unknown option(s) {sorted(unknown)}; "
                        f"it takes {list(_METHOD_OPTIONS[method])}.")
    return method


def _objective(fns, shapes, *, jacobian=False):
    """The negative log posterior and its gradient on one raveled vector, counting
    calls; with ``jacobian``, the negative log density of the unconstrained
    variables (the transforms' log Jacobian added, what NUTS samples)."""
    f = fns.nuts_logp_grad() if jacobian else fns.logp_grad()
    sign = -1.0 if jacobian else 1.0

    def fun(x):
        fun.calls += 1
        out = f(*_compiled.split_vector(x, shapes))
        return sign * float(out[0]), sign * _compiled.ravel_parts(out[1:])

    fun.calls = 0
    return fun


def _curvature_probe(fun, x, g) -> np.ndarray | None:
    """The Hessian's diagonal at ``x`` from two gradient evaluations, or None where
    that estimate is not to be trusted.

    With a random sign vector v, ``v * (H @ v)`` has expectation diag(H) (its
    error is the rows' off-diagonal sums); ``H @ v`` comes from a forward
    difference of the gradient. Two independent probes must agree within a
    factor 2, and be positive, on :data:`PROBE_AGREEMENT` of the coordinates
    (a Hessian close to diagonal, as the two-coin family's); their mean is
    returned, floored at :data:`CURVATURE_FLOOR` times its largest entry.
    Elsewhere (Dawid-Skene's simplex rows, whose coordinates are strongly
    coupled) the estimate would mislead a preconditioner: None.
    """
    if x.size == 0:
        return None
    rng = np.random.default_rng(PROBE_SEED)
    step = PROBE_STEP * (1.0 + float(np.linalg.norm(x)) / np.sqrt(x.size))
    estimates = []
    for _ in range(2):
        signs = np.where(rng.random(x.size) < 0.5, -1.0, 1.0)
        try:
            _, g1 = fun(x + step * signs)
        except ParameterValueError:
            return None
        estimates.append(signs * (g1 - g) / step)
    first, second = estimates
    if not (np.all(np.isfinite(first)) and np.all(np.isfinite(second))):
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = first / second
    if np.mean((ratio > 0.5) & (ratio < 2.0) & (first > 0)) < PROBE_AGREEMENT:
        return None
    diag = np.abs(first + second) / 2
    if not np.any(diag > 0):
        return None
    return np.maximum(diag, CURVATURE_FLOOR * float(np.max(diag)))


def _lbfgs_scale(diag, g) -> np.ndarray:
    """L-BFGS's variable scale: x = x0 + scale * z with Hessian about I * c**2 in z,
    c = |g / sqrt(diag)|, so that its first step (unit length in z) is the
    Newton step of the diagonal model."""
    inv_root = 1.0 / np.sqrt(diag)
    c = float(np.linalg.norm(g * inv_root))
    return inv_root * (c if np.isfinite(c) and c > 0 else 1.0)


def _optimise(fns, x0, shapes, method, options, *, exact_hessp=True, progressbar=False,
              label="MAP", scale=None, fun=None):
    """scipy.optimize.minimize of the negative log posterior on the compiled functions.

    Methods that use Hessian-vector products get the compiled exact one, or
    with ``exact_hessp=False`` central differences of the gradient (step
    ``HESSP_STEP`` times the scale of x over |p|: relative error ~1e-10, and
    no Hessian graph to compile). With ``scale`` (a vector), the optimiser
    works on z with x = x0 + scale * z (a diagonal preconditioner); the result
    is reported in x, with the unscaled gradient, and ``gtol`` keeps its
    meaning on the unscaled gradient.
    """
    fun = _objective(fns, shapes) if fun is None else fun
    if scale is not None:
        base, unscaled = x0, fun
        options = dict(options)
        if "gtol" in options:  # |scale * g| <= gtol * min(scale) implies |g| <= gtol
            options["gtol"] = options["gtol"] * float(np.min(scale))

        def fun(z):
            value, grad = unscaled(base + scale * z)
            return value, scale * grad

        x0 = np.zeros_like(base)

    kwargs = {}
    if method in _USES_GRADIENT:
        kwargs["jac"] = True
    if method in _USES_HESSP and exact_hessp:
        h = fns.hessp()

        def hessp(x, p):
            return _compiled.ravel_parts(h(*_compiled.split_vector(x, shapes),
                                           *_compiled.split_vector(p, shapes)))
        kwargs["hessp"] = hessp
    elif method in _USES_HESSP:
        def hessp(x, p):
            norm = float(np.linalg.norm(p))
            if norm == 0:
                return np.zeros_like(p)
            step = HESSP_STEP * (1.0 + float(np.linalg.norm(x)) / np.sqrt(x.size)) / norm
            return (fun(x + step * p)[1] - fun(x - step * p)[1]) / (2 * step)
        kwargs["hessp"] = hessp
    objective = fun if method in _USES_GRADIENT else (lambda x: fun(x)[0])
    progress = _Progress(progressbar, f"{label} ({method})")
    if progress.bar is not None:
        kwargs["callback"] = lambda intermediate_result: progress.update(
            float(intermediate_result.fun))
    try:
        with np.errstate(all="ignore"):
            res = minimize(objective, x0, method=method, options=options, **kwargs)
    finally:
        progress.close()
    if scale is not None:
        res.x = base + scale * res.x
        res.jac = None
        fun = unscaled
    if method not in _USES_GRADIENT or getattr(res, "jac", None) is None:
        res.jac = fun(res.x)[1]
    return res


def _conjugate_gradient(hessp, g, precondition, rtol, max_iter):
    """Preconditioned CG for H d = -g, stopped at a relative residual of ``rtol``, after
    ``max_iter`` products, or at a direction of non-positive curvature: (d, products)."""
    d = np.zeros_like(g)
    r = -g
    z = precondition(r)
    p = z.copy()
    rz = float(r @ z)
    target = rtol * float(np.linalg.norm(r))
    for k in range(1, max_iter + 1):
        hp = hessp(p)
        curvature = float(p @ hp)
        if not np.isfinite(curvature) or curvature <= 0:
            return (d if k > 1 else p), k  # the preconditioned gradient, or CG so far
        alpha = rz / curvature
        d = d + alpha * p
        r = r - alpha * hp
        if float(np.linalg.norm(r)) <= target:
            return d, k
        z = precondition(r)
        rz_new = float(r @ z)
        p = z + (rz_new / rz) * p
        rz = rz_new
    return d, max_iter


def _newton_polish(fun, x, value, grad, *, gtol, progressbar=False):
    """Newton steps from a point near a mode: H d = -g by CG on forward-difference
    Hessian-vector products (one gradient each), Jacobi-preconditioned from
    :func:`_curvature_probe` where it trusts its estimate at the start (at most
    :data:`NEWTON_CG_PRODUCTS` products, the probe renewed each step), else
    unpreconditioned (at most :data:`NEWTON_CG_PRODUCTS_PLAIN`). A step is halved
    up to :data:`NEWTON_HALVINGS` times until the largest gradient entry falls
    and the objective does not rise above its rounding. Stops at ``gtol``, once
    the distance left to the mode is estimated below :data:`NEWTON_XTOL`, when no
    step helps, or after :data:`NEWTON_STEPS` steps. Returns a scipy
    OptimizeResult, or None where no step helped (the caller falls back)."""
    calls = fun.calls
    max_grad = float(np.max(np.abs(grad)))
    message, success, steps = "no step reduced the gradient", False, 0
    diag = _curvature_probe(fun, x, grad)
    jacobi = diag is not None
    products = NEWTON_CG_PRODUCTS if jacobi else NEWTON_CG_PRODUCTS_PLAIN
    progress = _Progress(progressbar, "polish (Newton-CG)")
    try:
        while steps < NEWTON_STEPS:
            if max_grad <= gtol:
                message, success = "the largest gradient entry is below gtol", True
                break
            if jacobi and steps:
                diag = _curvature_probe(fun, x, grad)
                if diag is None:
                    break

            def hessp(p, x=x, grad=grad):
                norm = float(np.linalg.norm(p))
                if norm == 0:
                    return np.zeros_like(p)
                step = FORWARD_STEP * (1.0 + float(np.linalg.norm(x)) / np.sqrt(x.size)) / norm
                return (fun(x + step * p)[1] - grad) / step

            direction, _ = _conjugate_gradient(
                hessp, grad, (lambda r, d=diag: r / d) if jacobi else (lambda r: r),
                NEWTON_CG_RTOL, products)
            if not np.all(np.isfinite(direction)):
                message = "the Newton direction is not finite"
                break
            slack = 1e-12 * max(1.0, abs(value))
            for _ in range(NEWTON_HALVINGS + 1):
                trial = x + direction
                new_value, new_grad = fun(trial)
                new_max = float(np.max(np.abs(new_grad))) if np.all(np.isfinite(new_grad)) else (
                    np.inf)
                if np.isfinite(new_value) and new_value <= value + slack and new_max < max_grad:
                    break
                direction = direction / 2
            else:
                break
            steps += 1
            moved = float(np.max(np.abs(trial - x) / (1.0 + np.abs(x))))
            # the distance left, if the error shrinks as the gradient did (Newton's
            # quadratic convergence shrinks it faster)
            left = moved * new_max / max_grad
            x, value, grad, max_grad = trial, new_value, new_grad, new_max
            progress.update(value)
            if left <= NEWTON_XTOL:
                message, success = ("converged: the distance left to the mode, estimated from "
                                    "the last step and the gradient's fall, is below xtol"), True
                break
        else:
            message = f"stopped after {NEWTON_STEPS} Newton steps"
    finally:
        progress.close()
    if not steps:
        return None
    if not success and message == "no step reduced the gradient":
        success = True  # the gradient fell as far as rounding lets it
        message = "converged: no further step reduced the gradient (rounding)"
    return OptimizeResult(x=x, fun=value, jac=grad, success=success, status=0 if success else 1,
                          message=message, nit=steps, nfev=fun.calls - calls,
                          preconditioner="jacobi" if jacobi else "none")


def fit_map(
    model: pm.Model,
    *,
    start=None,
    method: str = "L-BFGS-B",
    ftol: float | None = None,
    gtol: float | None = None,
    progressbar: bool = False,
    polish: bool = True,
    compare_em: bool = True,
    laplace: bool = False,
    laplace_draws: int = 1000,
    random_seed=None,
    **options,
) -> xr.DataTree:
    """The posterior mode (MAP) of a family's model.

    Maximises ``model.logp(jacobian=False)``, the log posterior in the original
    parameter space (the objective ``pm.find_MAP`` uses and the families' EM
    climbs), with scipy's optimiser on compiled log-density and gradient
    functions that are cached per model structure: a second fit, on this or
    any model of the same family, options and prior structure, compiles
    nothing. ``start=None`` starts at ``model.crowd_start``, the majority-vote
    start the factories attach (the one their EM uses), or at the model's
    default initial point for a model without it; an EM fit, a fit DataTree
    or a dict of values by variable name is used as given (variables a dict
    leaves out come from ``model.crowd_start``). With the tight default
    tolerances the result matches the EM fixed point from the same start to
    ~1e-8.

    ``method`` is a ``scipy.optimize.minimize`` method (default L-BFGS-B, run on
    variables scaled by a one-gradient estimate of the Hessian's diagonal at
    the start); ``ftol`` (default :data:`LBFGS_FTOL` = 1e-12 when the polish
    may follow, else 1e-15) and ``gtol`` (1e-9, on the unscaled gradient) go to
    the methods that take them (giving one to a method without it is an
    error), and further options (``maxiter``, ``maxfun``, ...) are checked
    against the method's. ``polish=True``: when L-BFGS-B stops with its largest
    gradient entry between :data:`POLISH_GRADIENT` and :data:`MAX_GRADIENT` per
    observed item (near a mode, but short of it), Newton steps (CG on
    finite-difference Hessian-vector products, Jacobi-preconditioned) continue
    from its point, and their result is kept if it reaches a smaller gradient
    without lowering the objective (``attrs["polished"]``).

    ``compare_em=True`` (with the default start, for a model whose factory
    attached ``model.crowd_em``, the family's EM with the model's priors): the
    EM runs from the same start too. Where the two reach different modes (a
    multimodal posterior: Dawid-Skene on web search), a warning gives both log
    posteriors and the higher one is returned (``attrs["optimum"]`` is ``"map"``
    or ``"em"``; ``attrs["em_log_posterior"]``).

    ``laplace=True`` adds a Laplace approximation of the posterior (see
    :func:`_laplace`): a Gaussian on the unconstrained (transformed) variables
    centred at the mode of *their* density, ``model.logp(jacobian=True)``
    (found by Newton steps from the MAP; it is not the MAP, whose objective has
    no Jacobian), with covariance the inverse Hessian of ``-logp(jacobian=True)``
    there (central differences of the cached compiled gradient: 2 x
    parameters evaluations). ``laplace_draws`` draws from it (``random_seed``),
    mapped back to the constrained scale, form the group ``laplace`` (chain=1,
    draw=``laplace_draws``; the free variables and the deterministics without
    an item dim), and ``laplace_approximation`` holds the Gaussian's
    ``mean`` and ``covariance`` (dims ``variables``, ``variables_``, named as
    in ``optimizer_result``). The ``posterior`` group stays the MAP.
    :func:`laplace_fit` turns such a fit into a many-draw DataTree that the
    report's tables read like a NUTS fit. A Hessian that is not positive
    definite (a mode on a ridge or on the edge of the support) gives a
    ``UserWarning`` and no Laplace groups.

    Returns a DataTree with ``posterior`` (chain=1, draw=1), ``log_likelihood``
    (per item), ``observed_data``, ``constant_data`` and ``optimizer_result``
    (the final stage; ``attrs["stages"]`` describes each);
    ``attrs["log_posterior"]`` is the maximised objective.
    """
    if not isinstance(model, pm.Model):
        raise TypeError(f"fit_map expects a pymc Model, got {type(model).__name__}.")
    if not isinstance(laplace, bool | np.bool_):
        raise TypeError(f"laplace must be True or False, got {laplace!r}.")
    if laplace:
        laplace_draws = _check_count(laplace_draws, "laplace_draws", 2)
    explicit = {k: v for k, v in (("ftol", ftol), ("gtol", gtol)) if v is not None}
    method = _check_method(method, {**options, **explicit})
    gtol = 1e-9 if gtol is None else gtol
    t0 = time.perf_counter()
    fns = functions_of(model)
    fns.progressbar = bool(progressbar)
    compare = compare_em and start is None and callable(getattr(model, "crowd_em", None))
    if start is None:
        start = getattr(model, "crowd_start", None)
    x0_parts = _unconstrained_start(model, start)
    shapes = [np.shape(v) for v in x0_parts]
    n = max(sum(int(np.size(v)) for v in x0_parts), 1)
    opts = dict(options)
    polish = polish and method == "L-BFGS-B" and "maxiter" not in options
    # the scaled L-BFGS-B stops earlier by default when the polish may follow
    scaled_ftol = LBFGS_FTOL if polish and ftol is None else None
    for name, value in (("ftol", 1e-15 if ftol is None else ftol), ("gtol", gtol)):
        if name in _METHOD_OPTIONS[method]:
            opts.setdefault(name, value)
    if method == "L-BFGS-B":  # pm.find_MAP's budget
        opts.setdefault("maxiter", 200 * n)
        opts.setdefault("maxfun", 200 * n)
        opts.setdefault("maxcor", LBFGS_MAXCOR)
    n_obs = _n_observed(model)
    # with the EM comparison ahead, polish after it: a mode the EM beats by more
    # than any polish gains is not worth polishing
    compare = compare and "maxiter" not in options
    res, max_grad, stages, polished, fun = _climb(
        fns, x0_parts, method, opts, polish=polish and not compare, gtol=gtol, n_obs=n_obs,
        progressbar=progressbar, scaled_ftol=scaled_ftol)
    extra = {}
    em_lp = None
    # compare modes only: not a run cut short on purpose or one that stalled
    if compare and max_grad <= MAX_GRADIENT * n_obs:
        # the family's EM from the same start: on multimodal posteriors (Dawid-Skene
        # with K = 5 on web search) the two climb to different local optima
        with warnings.catch_warnings():
            # the EM's own warnings (non-convergence, boundary, chance) describe the
            # EM; this fit is checked below
            warnings.simplefilter("ignore", UserWarning)
            em_fit = model.crowd_em()
        em_lp = float(em_fit.attrs["log_posterior"])
    clear_gap = em_lp is not None and em_lp + float(res.fun) > POLISH_GAIN * max(
        1.0, abs(float(res.fun)))
    if polish and compare and not clear_gap:
        res, max_grad, stage, polished = _polish(fns, fun, shapes, res, max_grad, gtol=gtol,
                                                 n_obs=n_obs, progressbar=progressbar)
        stages += stage
    if em_lp is not None:
        map_lp = -float(res.fun)
        extra = {"em_log_posterior": em_lp, "optimum": "map"}
        if abs(em_lp - map_lp) > EM_AGREEMENT * max(1.0, abs(map_lp)):
            if em_lp > map_lp:
                em_res = _climb(fns, _unconstrained_start(model, em_fit), method, opts,
                                polish=polish, gtol=gtol, n_obs=n_obs, progressbar=progressbar,
                                scaled_ftol=scaled_ftol)
                if -float(em_res[0].fun) > map_lp:
                    res, max_grad, polished = em_res[0], em_res[1], em_res[3]
                    stages += [{**st, "start": "em"} for st in em_res[2]]
                    extra["optimum"] = "em"
                elif polish and clear_gap:  # (not expected) the majority-vote mode stands
                    res, max_grad, stage, polished = _polish(
                        fns, fun, shapes, res, max_grad, gtol=gtol, n_obs=n_obs,
                        progressbar=progressbar)
                    stages += stage
            warnings.warn(
                f"from the majority-vote start the optimiser reached a mode with log posterior "
                f"{map_lp:.6f} and the family's EM one with {em_lp:.6f}: the posterior has "
                f"several modes. fit_map returns the higher ({extra['optimum'].upper()}'s); "
                f"compare fits from other starts (fit_map(model, start=...)).",
                UserWarning, stacklevel=2,
            )
    # L-BFGS reports a failed line search when it starts at the optimum (e.g. an
    # EM fit), and "success" where the density is unbounded: the gradient tells.
    if max_grad > MAX_GRADIENT * n_obs:
        warnings.warn(
            f"the MAP optimiser stopped without converging ({res.message}, largest gradient "
            f"{max_grad:.2g} over {n_obs} observed items); try another start.",
            UserWarning, stacklevel=2,
        )
    _check_boundary_mode(fns, res.x, shapes)
    fit = _point_tree(model, _compiled.split_vector(res.x, shapes))
    _trust.check_chance(posterior_of(fit), _labels_per_annotator(model), what="the MAP")
    fit["optimizer_result"] = xr.DataTree(_result_dataset(res, polished or method, fns,
                                                          shapes))
    fit.attrs.update(
        log_posterior=-float(res.fun), max_gradient=max_grad, polished=int(bool(polished)),
        method="map", stages=json.dumps(stages), **extra,
    )
    if laplace:
        for name, group in _laplace(model, fns, np.asarray(res.x, dtype=float), shapes,
                                    laplace_draws, random_seed).items():
            fit[name] = group
    fit.attrs["seconds"] = time.perf_counter() - t0
    return fit


HESSIAN_STEP = 1e-5
"""Relative step of the central differences behind the Laplace Hessian (near
the cube root of float64 precision; relative error about 1e-9)."""

LAPLACE_EIGEN_FLOOR = 1e-10
"""The Laplace Hessian counts as positive definite when its smallest eigenvalue
exceeds this times its largest."""


def _difference_hessian(fun, x) -> np.ndarray:
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


def _laplace(model, fns, x_map, shapes, draws, random_seed) -> dict:
    """The Laplace approximation at the mode of the unconstrained variables' density
    (``logp(jacobian=True)``): ``{"laplace": draws, "laplace_approximation":
    the Gaussian}``, or ``{}`` with a UserWarning where the Hessian there is not
    positive definite.

    The mode: L-BFGS-B from the MAP point (close to it: the two objectives
    differ by the log Jacobian, O(1) against a log-likelihood that grows with
    the data), then one Newton step with the difference Hessian, which is then
    taken at the mode as the approximation's precision."""
    fun = _objective(fns, shapes, jacobian=True)
    with threadpool_limits(1, user_api="blas"), np.errstate(all="ignore"):
        value, grad = fun(x_map)
        x = x_map
        if np.isfinite(value) and x.size:
            res = minimize(fun, x_map, jac=True, method="L-BFGS-B",
                           options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 200 * x.size,
                                    "maxcor": LBFGS_MAXCOR})
            x = np.asarray(res.x, dtype=float)
        hess = _difference_hessian(fun, x)
    eigen = np.linalg.eigvalsh(hess) if x.size else np.ones(1)
    if not (np.all(np.isfinite(hess)) and eigen[0] > LAPLACE_EIGEN_FLOOR * max(eigen[-1], 0)):
        warnings.warn(
            f"laplace=True: the Hessian of the negative log density of the unconstrained "
            f"variables at its mode is not positive definite (eigenvalues from {eigen[0]:.3g} "
            f"to {eigen[-1]:.3g}): the mode sits on a ridge or on the edge of the support, "
            f"where a Gaussian approximation does not exist. No Laplace draws were made; use "
            f"cm.sample for the uncertainty.", UserWarning, stacklevel=3,
        )
        return {}
    chol = np.linalg.cholesky(hess)
    # one Newton step to the mode, then draws x + L^-T z (covariance H^-1)
    x = x - np.linalg.solve(chol.T, np.linalg.solve(chol, fun(x)[1]))
    rng = np.random.default_rng(random_seed)
    z = rng.standard_normal((draws, x.size))
    values = x + np.linalg.solve(chol.T, z.T).T
    to_constrained = fns.constrained()
    names = fns.constrained_names()
    rows = [to_constrained(*_compiled.split_vector(v, shapes)) for v in values]
    post = {name: np.stack([np.asarray(r[k]) for r in rows])[None]
            for k, name in enumerate(names)}
    group = _group(model, post, (D.CHAIN, D.DRAW))
    group.attrs.update(method="laplace", density="logp(jacobian=True), unconstrained",
                       log_density_at_mode=-float(fun(x)[0]), draws=draws)
    labels = _result_dataset(OptimizeResult(x=x, jac=np.zeros_like(x), fun=0.0, success=True,
                                            status=0, message=""), "laplace", fns,
                             shapes)["variables"].values
    gaussian = xr.Dataset(
        {"mean": (("variables",), x),
         "covariance": (("variables", "variables_"), np.linalg.inv(hess))},
        coords={"variables": labels, "variables_": labels},
    )
    return {"laplace": xr.DataTree(group), "laplace_approximation": xr.DataTree(gaussian)}


def laplace_fit(fit) -> xr.DataTree:
    """A ``fit_map(..., laplace=True)`` fit as a many-draw DataTree: its ``laplace``
    draws as the ``posterior`` (with the data groups), which the report's tables
    (``cm.report.annotator_summary``) summarise like NUTS draws."""
    if not isinstance(fit, xr.DataTree) or "laplace" not in fit.children:
        raise ValueError("laplace_fit needs a fit from fit_map(model, laplace=True) (a "
                         "DataTree with a 'laplace' group).")
    groups = {"posterior": xr.DataTree(fit["laplace"].to_dataset())}
    for name in ("observed_data", "constant_data"):
        if name in fit.children:
            groups[name] = xr.DataTree(fit[name].to_dataset())
    out = xr.DataTree(children=groups)
    out.attrs.update(method="laplace", map_log_posterior=fit.attrs.get("log_posterior"))
    return out


BOUNDARY_Z = 20.0
"""fit_map warns when a constrained parameter's unconstrained value exceeds this
in magnitude (a probability within about 2e-9 of 0 or 1, a positive one
below 2e-9): the mode sits on the edge of the support."""


def _check_boundary_mode(fns, x, shapes) -> None:
    """Warn when the MAP puts transformed parameters on the edge of their support."""
    model = fns.model
    edges = []
    for var, part in zip(fns.value_vars, _compiled.split_vector(x, shapes), strict=True):
        rv = model.values_to_rvs[var]
        if model.rvs_to_transforms.get(rv) is None:
            continue
        hit = np.abs(np.asarray(part)) > BOUNDARY_Z
        if hit.any():
            edges.append(f"{rv.name} ({int(hit.sum())} of {hit.size})")
    if edges:
        warnings.warn(
            f"the MAP sits on the boundary of the support for {', '.join(edges)} (a rate "
            f"of 0 or 1, which flat priors allow): it is not an interior mode, and "
            f"curvature-based intervals there mean nothing. Use the default priors, or "
            f"cm.sample for the uncertainty.", UserWarning, stacklevel=3,
        )


def _labels_per_annotator(model) -> np.ndarray | None:
    """Labels per annotator from the model's long table (None without one)."""
    if "annotator_idx" not in model.named_vars or D.ANNOTATOR not in model.coords:
        return None
    codes = np.asarray(model["annotator_idx"].get_value(borrow=True))
    return np.bincount(codes, minlength=len(model.coords[D.ANNOTATOR]))


def _climb(fns, x0_parts, method, opts, *, polish, gtol, n_obs, progressbar,
           scaled_ftol=None):
    """One optimiser run from ``x0_parts`` and, when it stops near but short of a
    mode, the polish: (result, largest gradient entry, stages, polished).

    L-BFGS-B runs on variables scaled by the curvature probe at the start (a
    diagonal preconditioner; two gradient evaluations) where the probe is to be
    trusted (:func:`_curvature_probe`), with ``ftol`` = ``scaled_ftol`` when
    given: on the two-coin family, whose curvatures differ by orders of
    magnitude between parameters with few and many labels, that saves most of
    its iterations. The polish is Newton-CG (:func:`_newton_polish`) where the
    probe is trusted at L-BFGS's point, else ``trust-krylov`` on
    central-difference Hessian-vector products."""
    shapes = [np.shape(v) for v in x0_parts]
    x0 = _compiled.ravel_parts(x0_parts)
    fun = _objective(fns, shapes)
    with np.errstate(all="ignore"):
        f0, g0 = fun(x0)
    if not np.isfinite(f0):
        raise ValueError("the log posterior is not finite at the start; give a start inside "
                         "the priors' support (fit_map(model, start=...)).")
    with threadpool_limits(1, user_api="blas"), np.errstate(all="ignore"):
        scale = None
        if method == "L-BFGS-B" and np.all(np.isfinite(g0)):
            diag = _curvature_probe(fun, x0, g0)
            scale = None if diag is None else _lbfgs_scale(diag, g0)
        run_opts = opts if scale is None or scaled_ftol is None else {**opts,
                                                                      "ftol": scaled_ftol}
        res = _optimise(fns, x0, shapes, method, run_opts, progressbar=progressbar,
                        scale=scale, fun=fun)
    max_grad = float(np.max(np.abs(res.jac))) if res.jac.size else 0.0
    stages = [{**_stage(method, res, max_grad), "scaled": scale is not None,
               "evaluations": fun.calls}]  # the start and the probe included
    if scale is not None and max_grad > MAX_GRADIENT * n_obs:
        # the probe's curvatures misled it (a start on the edge of the support,
        # where the curvature vanishes): plain L-BFGS-B from its point
        calls = fun.calls
        with threadpool_limits(1, user_api="blas"), np.errstate(all="ignore"):
            res = _optimise(fns, np.asarray(res.x, dtype=float), shapes, method, opts,
                            progressbar=progressbar, fun=fun)
        max_grad = float(np.max(np.abs(res.jac))) if res.jac.size else 0.0
        stages.append({**_stage(method, res, max_grad), "scaled": False,
                       "evaluations": fun.calls - calls})
    polished = False
    if polish:
        res, max_grad, stage, polished = _polish(fns, fun, shapes, res, max_grad, gtol=gtol,
                                                 n_obs=n_obs, progressbar=progressbar)
        stages += stage
    return res, max_grad, stages, polished, fun


def _polish(fns, fun, shapes, res, max_grad, *, gtol, n_obs, progressbar):
    """The polish after L-BFGS-B, when its largest gradient entry lies between
    :data:`POLISH_GRADIENT` and :data:`MAX_GRADIENT` per observed item: Newton-CG
    (to :data:`POLISH_TARGET` times the first), else ``trust-krylov`` where no
    Newton step helps. Returns (result, largest gradient entry, stages, the
    polish's name or False where L-BFGS's point stands)."""
    if not POLISH_GRADIENT * n_obs < max_grad <= MAX_GRADIENT * n_obs:
        return res, max_grad, [], False
    calls = fun.calls
    target = max(min(gtol, 1e-10), POLISH_TARGET * POLISH_GRADIENT * n_obs)
    try:
        with threadpool_limits(1, user_api="blas"), np.errstate(all="ignore"):
            name, res2 = "newton-cg", _newton_polish(
                fun, np.asarray(res.x, dtype=float), float(res.fun),
                np.asarray(res.jac, dtype=float), gtol=target, progressbar=progressbar)
            if res2 is None:  # no Newton step helped
                name, res2 = "trust-krylov", _optimise(
                    fns, res.x, shapes, "trust-krylov",
                    {"gtol": min(gtol, 1e-10), "max_trust_radius": POLISH_RADIUS},
                    exact_hessp=False, progressbar=progressbar, label="polish", fun=fun)
    except ParameterValueError as error:
        # a trial step where one of PyMC's parameter checks fails (a ZeroSumNormal's
        # zero mean, checked to 1e-9, lost to rounding far out): the polish is
        # optional, L-BFGS's point stands
        return res, max_grad, [{"method": "polish", "success": False,
                                "message": f"stopped: {error}", "iterations": -1,
                                "evaluations": fun.calls - calls,
                                "log_posterior": -float(res.fun), "max_gradient": max_grad}], False
    grad2 = float(np.max(np.abs(res2.jac)))
    stage = {**_stage(name, res2, grad2), "evaluations": fun.calls - calls}
    if grad2 < max_grad and res2.fun <= res.fun + 1e-12 * max(1.0, abs(res.fun)):
        return res2, grad2, [stage], name
    return res, max_grad, [stage], False


def _stage(method, res, max_grad) -> dict:
    """One optimiser run, as reported in ``attrs["stages"]``."""
    return {"method": method, "success": bool(res.success), "message": str(res.message),
            "iterations": int(res.get("nit", -1)), "evaluations": int(res.get("nfev", -1)),
            "log_posterior": -float(res.fun), "max_gradient": max_grad}


def _n_observed(model: pm.Model) -> int:
    """The number of observed elements (items, for the families)."""
    obs = pm.backends.arviz.find_observations(model)
    return max(1, sum(int(np.size(v)) for v in obs.values()))


class _Progress:
    """The optimiser's progress on the terminal (rich, which PyMC's bars use):
    iterations and the log posterior, updated from scipy's callback."""

    def __init__(self, enabled: bool, what: str):
        self.bar = None
        if enabled:
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self.bar = Progress(SpinnerColumn(), TextColumn("{task.description}"),
                                TimeElapsedColumn(), transient=False)
            self.task = self.bar.add_task(f"{what}: starting")
            self.what, self.n = what, 0
            self.bar.start()

    def update(self, fun: float) -> None:
        if self.bar is not None:
            self.n += 1
            self.bar.update(self.task, description=f"{self.what}: iteration {self.n}, "
                                                   f"log posterior {-fun:.6g}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _result_dataset(res, method, fns, shapes) -> xr.Dataset:
    names = []
    for v, shape in zip(fns.value_vars, shapes, strict=True):
        size = int(np.prod(shape, dtype=int))
        names += [v.name] if shape == () else [f"{v.name}[{i}]" for i in range(size)]
    per = ("variables",)
    return xr.Dataset(
        {"x": (per, np.asarray(res.x, dtype=float)), "jac": (per, np.asarray(res.jac)),
         "fun": float(res.fun), "success": bool(res.success), "status": int(res.status),
         "message": str(res.message), "nit": int(res.get("nit", -1)),
         "nfev": int(res.get("nfev", -1)), "method": method},
        coords={"variables": names},
    )


def _coords(model: pm.Model, dims, shape) -> dict:
    out = {}
    for d, size in zip(dims, shape, strict=True):
        values = model.coords.get(d)
        out[d] = np.asarray(values) if values is not None and len(values) == size else (
            np.arange(size))
    return out


def _group(model: pm.Model, values: dict, sample_dims: tuple) -> xr.Dataset:
    """A Dataset of named arrays whose leading axes are ``sample_dims``, with the
    model's dims and coords."""
    data, coords = {}, {}
    for name, value in values.items():
        value = np.asarray(value)
        rest = value.shape[len(sample_dims):]
        dims = tuple(model.named_vars_to_dims.get(name) or ()) or tuple(
            f"{name}_dim_{i}" for i in range(len(rest)))
        data[name] = ((*sample_dims, *dims), value)
        coords.update(_coords(model, dims, rest))
    for d, size in zip(sample_dims, next(iter(values.values())).shape if values else (),
                       strict=False):
        coords[d] = np.arange(size)
    return xr.Dataset(data, coords=coords)


def _data_groups(model: pm.Model) -> dict:
    """``observed_data`` and ``constant_data`` of the model."""
    out = {}
    for group, values in (("observed_data", pm.backends.arviz.find_observations(model)),
                          ("constant_data", pm.backends.arviz.find_constants(model))):
        if values:
            out[group] = xr.DataTree(_group(model, {k: np.asarray(v) for k, v in values.items()},
                                            ()))
    return out


def _point_outputs(model: pm.Model, value_parts, sample_shape=()) -> tuple[dict, dict]:
    """(posterior values, element-wise log-likelihoods) at the value variables;
    with ``sample_shape``, every part carries those leading axes and the compiled
    point function is applied draw by draw."""
    fns = functions_of(model)
    free, dets, observed = fns.point_names()
    names = [*free, *dets]
    f = fns.point()
    if not sample_shape:
        outs = f(*value_parts)
        post = {n: np.asarray(o)[None, None] for n, o in zip(names, outs, strict=False)}
        ll = {n: np.asarray(o)[None, None] for n, o in zip(observed, outs[len(names):],
                                                           strict=True)}
        return post, ll
    flat = [np.reshape(p, (-1, *np.shape(p)[len(sample_shape):])) for p in value_parts]
    rows = [f(*[np.asarray(p[i]) for p in flat]) for i in range(flat[0].shape[0] if flat else 0)]
    stacked = [np.stack([r[k] for r in rows]) for k in range(len(names) + len(observed))]
    shaped = [s.reshape(*sample_shape, *s.shape[1:]) for s in stacked]
    return (dict(zip(names, shaped[:len(names)], strict=True)),
            dict(zip(observed, shaped[len(names):], strict=True)))


def _point_tree(model: pm.Model, value_parts) -> xr.DataTree:
    post, ll = _point_outputs(model, value_parts)
    groups = {"posterior": xr.DataTree(_group(model, post, (D.CHAIN, D.DRAW))),
              "log_likelihood": xr.DataTree(_group(model, ll, (D.CHAIN, D.DRAW)))}
    return xr.DataTree(children={**groups, **_data_groups(model)})


SAMPLERS = ("nutpie", "pymc", "numpyro")
"""The NUTS implementations :func:`sample` runs, the default first.

``"nutpie"`` (the default; a dependency) compiles the model's log density
into numba code once per model structure and process (about 10 s) and keeps
it: a second call, or a model of the same structure on other data, samples at
once. ``"pymc"`` is PyMC's NUTS on the cached compiled log density (a
compile of a few seconds, no more after the first model of a structure).
``"numpyro"`` (the ``crowd_models[jax]`` extra; on a GPU when JAX finds one)
goes through ``pm.sample(nuts_sampler="numpyro")`` and compiles on every
call. Measured (``benchmarks/samplers.py``, 4 chains x 1000 draws, warm, min
bulk ESS per second of the whole call): RTE two-coin nutpie 364-386, PyMC
177, NumPyro 141; dog Dawid-Skene nutpie 22.6, PyMC 22.2, NumPyro 56; web
search Dawid-Skene nutpie 0.9, PyMC 0.5, NumPyro 0.4 (under load).
BlackJAX is not offered: PyMC 6.4 passes it a ``progress_bar`` argument that
its NUTS kernel (1.6 and 1.7) does not take."""

_SAMPLER_PACKAGE = {"nutpie": "nutpie", "numpyro": "numpyro"}


def _check_count(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an integer, got {value!r}.")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}.")
    return int(value)


def _check_sampler(nuts_sampler) -> str:
    if nuts_sampler is None:
        return SAMPLERS[0]
    if nuts_sampler not in SAMPLERS:
        raise ValueError(f"nuts_sampler={nuts_sampler!r} is unknown; use one of {list(SAMPLERS)}.")
    package = _SAMPLER_PACKAGE.get(nuts_sampler)
    if package is not None and importlib.util.find_spec(package) is None:
        extra = "crowd_models[jax]" if package == "numpyro" else package
        raise ValueError(f"nuts_sampler={nuts_sampler!r} needs the package {package!r}, which "
                         f"is not installed: pip install {extra!r}.")
    return nuts_sampler


class _NutsLogp:
    """What PyMC's NUTS calls for the log density and its gradient: the cached
    compiled function (jacobian included) on one raveled vector."""

    _raveled_inputs = True
    _extra_vars_shared: dict = {}
    dtype = "float64"
    trust_input = True

    def __init__(self, bound, shapes):
        # the compiled function and the model's data, read once for the whole run
        self.fn, self.data, self.shapes = bound.compiled.fn, bound.data, shapes
        self._slices = None

    def _pytensor_function(self, q):
        # called once per leapfrog step: slices precomputed, one concatenate
        if self._slices is None:
            ends = np.cumsum([int(np.prod(s, dtype=int)) for s in self.shapes])
            self._slices = [(slice(e - int(np.prod(s, dtype=int)), e), s)
                            for e, s in zip(ends, self.shapes, strict=True)]
        out = self.fn(*[q[sl].reshape(shape) for sl, shape in self._slices], *self.data)
        return np.asarray(out[0]), np.concatenate([np.ravel(g) for g in out[1:]])

    def set_extra_values(self, values):
        pass

    def __getstate__(self):
        # cloudpickle (PyMC's pickler for parallel chains) writes the compiled
        # function; the structure cache stays in this process
        return {"fn": self.fn, "data": self.data, "shapes": self.shapes}

    def __setstate__(self, state):
        self.__dict__.update(state, _slices=None)


def _identity(*values):
    return values


def _value_trace(ndarray_class):
    """PyMC's NDArray trace recording the value variables as they are (no compiled
    trace function). PyMC gives each chain a shallow copy of the trace it is
    handed, which would share one ``samples`` dict between the chains (every
    chain would read back the last one's draws): each copy here is a new trace."""

    class ValueTrace(ndarray_class):
        def __copy__(self):
            return type(self)(model=self.model, vars=self.vars, fn=self.fn,
                              var_shapes=self.var_shapes, var_dtypes=self.var_dtypes)

    return ValueTrace


def sample(
    model: pm.Model,
    *,
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 4,
    cores: int | None = None,
    random_seed=None,
    start="map",
    nuts_sampler: str | None = "nutpie",
    target_accept: float = 0.9,
    progressbar: bool = True,
    jitter: bool = True,
    **kwargs,
) -> xr.DataTree:
    """NUTS on a family's model, started near the posterior mode.

    ``start="map"`` (default) runs :func:`fit_map` first and starts every chain
    there, which keeps chains in the mode that agrees with majority vote;
    ``start=None`` uses the majority-vote start (``model.crowd_start``); an EM fit or
    a dict is used as given. With ``jitter`` (default, as PyMC's own
    initialisation) each chain starts at U(-1, 1) on the unconstrained scale
    around that point, so that r-hat compares chains from dispersed starts.
    Chains run in parallel on up to ``cores``
    threads (nutpie) or processes (PyMC) (default: one per chain, at most the
    machine's CPU count). ``nuts_sampler`` is one of :data:`SAMPLERS`:
    ``"nutpie"`` (default) and ``"pymc"`` keep their compiled code per model
    structure (a warm call compiles nothing; the MAP start and the item
    log-likelihoods reuse the cached functions); ``"numpyro"`` (from the
    ``crowd_models[jax]`` extra; on a GPU when JAX sees one) compiles on every
    call. Extra keyword arguments go to ``nutpie.sample`` (e.g. ``maxdepth``),
    to PyMC's NUTS (e.g. ``max_treedepth``) or to ``pm.sample`` for NumPyro.

    The result has ``posterior`` (with ``item_class_prob``), ``sample_stats``,
    an item-level ``log_likelihood`` group, ``observed_data`` and
    ``constant_data``; ``attrs`` hold ``seconds`` (the whole call) and
    ``sampling_seconds``.

    The likelihood is symmetric under relabelling the classes. Chains whose
    most probable labels match a permutation of the start's labels better than
    the labels themselves are flagged: a warning is raised and
    ``attrs["label_switched_chains"]`` lists them (see
    :func:`label_switched_chains`).
    """
    if not isinstance(model, pm.Model):
        raise TypeError(f"sample expects a pymc Model, got {type(model).__name__}.")
    draws = _check_count(draws, "draws", 1)
    tune = _check_count(tune, "tune", 0)
    chains = _check_count(chains, "chains", 1)
    if cores is not None:
        cores = _check_count(cores, "cores", 1)
    if not 0 < target_accept < 1:
        raise ValueError(f"target_accept must lie in (0, 1), got {target_accept}.")
    nuts_sampler = _check_sampler(nuts_sampler)
    t0 = time.perf_counter()
    fns = functions_of(model)
    fns.progressbar = bool(progressbar)
    reference = None
    if isinstance(start, str):
        if start != "map":
            raise ValueError(f"start={start!r}: use 'map', None, an EM fit or a dict.")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # judged just below
            # a start for NUTS needs no Newton polish
            map_fit = fit_map(model, polish=False, progressbar=progressbar)
        reference = map_fit
        x = np.asarray(map_fit["optimizer_result"]["x"], dtype=float)
        # a large gradient or infinite coordinates at the optimiser's stop mean the
        # density is unbounded there, e.g. a centred hierarchical scale -> 0
        if not np.all(np.isfinite(x)) or (
                map_fit.attrs["max_gradient"] > MAX_GRADIENT * _n_observed(model)):
            warnings.warn(
                "the posterior mode is degenerate (e.g. a centred hierarchical scale "
                "collapsing to zero); NUTS starts at the majority-vote start instead. Pass "
                "start=None to skip the MAP.", UserWarning, stacklevel=2,
            )
            parts = _unconstrained_start(model, None)
        else:  # the optimiser's own point (no round trip through the constrained scale)
            parts = _compiled.split_vector(x, [np.shape(v) for v in
                                               _unconstrained_start(model, posterior_of(map_fit))])
    else:
        parts = _unconstrained_start(model, start)
        # the label-switch check compares the chains with the start: a fit as given,
        # else the model's outputs (item_class_prob) at the start point
        reference = start if isinstance(start, xr.Dataset | xr.DataTree) else _point_tree(
            model, parts)
    shapes = [np.shape(v) for v in parts]
    cores = min(chains, os.cpu_count() or 1) if cores is None else cores
    t_sample = time.perf_counter()
    if nuts_sampler in ("pymc", "nutpie"):
        run = _pymc_nuts if nuts_sampler == "pymc" else _nutpie_nuts
        value_draws, stats = run(model, fns, parts, shapes, draws=draws, tune=tune,
                                 chains=chains, cores=cores, random_seed=random_seed,
                                 target_accept=target_accept, progressbar=progressbar,
                                 jitter=jitter, **kwargs)
    else:
        value_draws, stats = _external_nuts(model, fns, parts, nuts_sampler, draws=draws,
                                            tune=tune, chains=chains, cores=cores,
                                            random_seed=random_seed,
                                            target_accept=target_accept,
                                            progressbar=progressbar, **kwargs)
    sampling_seconds = time.perf_counter() - t_sample
    post, ll = _point_outputs(model, value_draws, sample_shape=(chains, draws))
    idata = xr.DataTree(children={
        "posterior": xr.DataTree(_group(model, post, (D.CHAIN, D.DRAW))),
        "sample_stats": xr.DataTree(_group(model, stats, (D.CHAIN, D.DRAW))),
        "log_likelihood": xr.DataTree(_group(model, ll, (D.CHAIN, D.DRAW))),
        **_data_groups(model),
    })
    idata.attrs.update(method="nuts", nuts_sampler=nuts_sampler,
                       sampling_seconds=sampling_seconds)
    if "item_class_prob" in idata.posterior and reference is not None and (
            "item_class_prob" in posterior_of(reference)):
        switched = label_switched_chains(idata, reference)
        idata.attrs["label_switched_chains"] = switched
        if switched and len(switched) == chains and chains > 1:
            warnings.warn(
                f"every chain ({switched}) disagrees with the reference fit's labels under "
                f"a relabelling: the chains agree with each other, so the reference (the "
                f"start: MAP, EM fit or dict) is the likely problem, not the chains; compare "
                f"it with majority vote (start=None).", UserWarning, stacklevel=2,
            )
        elif switched:
            warnings.warn(
                f"chain(s) {switched} sit in a label-switched mode (their most probable true "
                f"classes match a permutation of the MAP's labels better than the labels "
                f"themselves); drop them (idata.sel(chain=...)) or use stronger "
                f"diagonal-favouring priors.", UserWarning, stacklevel=2,
            )
    _trust.check_chance(idata.posterior.to_dataset(), _labels_per_annotator(model),
                        what="the posterior (mean)")
    idata.attrs["seconds"] = time.perf_counter() - t0
    return idata


JITTER_RETRIES = 10
"""Draws of a jittered start per chain before falling back to the start itself."""


def _jittered_starts(bound, x0, shapes, chains, rng) -> list[np.ndarray]:
    """One start per chain: ``x0`` plus U(-1, 1) on the unconstrained scale (PyMC's
    "jitter" initialisation), redrawn until the log density is finite there.
    Dispersed starts are what lets r-hat see chains that have not mixed."""
    starts = []
    for _ in range(chains):
        for _ in range(JITTER_RETRIES):
            x = x0 + rng.uniform(-1.0, 1.0, x0.size)
            if np.isfinite(float(bound(*_compiled.split_vector(x, shapes))[0])):
                break
        else:
            x = x0
        starts.append(x)
    return starts


def _pymc_nuts(model, fns, parts, shapes, *, draws, tune, chains, cores, random_seed,
               target_accept, progressbar, jitter, **kwargs):
    """PyMC's NUTS on the cached compiled log density: (value-variable draws, stats)."""
    from pymc.backends.ndarray import NDArray
    from pymc.step_methods.hmc.quadpotential import QuadPotentialDiagAdapt

    bound = fns.nuts_logp_grad()
    x0 = _compiled.ravel_parts(parts)
    point = {v.name: np.asarray(p) for v, p in zip(fns.value_vars, parts, strict=True)}
    rng = np.random.default_rng(random_seed)
    starts = _jittered_starts(bound, x0, shapes, chains, rng) if jitter else [x0] * chains
    potential = QuadPotentialDiagAdapt(x0.size, np.mean(starts, axis=0), np.ones(x0.size), 10,
                                       rng=rng.spawn(1)[0])
    initvals = ([_untransformed_point(model, _compiled.split_vector(x, shapes)) for x in starts]
                if jitter else _untransformed_point(model, parts))
    step = pm.NUTS(vars=fns.value_vars, model=model, potential=potential,
                   target_accept=target_accept, initial_point=point,
                   logp_dlogp_func=_NutsLogp(bound, shapes), rng=rng.spawn(1)[0], **kwargs)
    trace = _value_trace(NDArray)(model=model, vars=fns.value_vars, fn=_identity,
                                  var_shapes={k: v.shape for k, v in point.items()},
                                  var_dtypes={k: v.dtype for k, v in point.items()})
    names = [v.name for v in fns.value_vars]
    # one BLAS thread: NUTS's vector operations are small, and OpenBLAS's threads
    # made each of them milliseconds slower on a loaded 2-core machine
    with warnings.catch_warnings(), threadpool_limits(1, user_api="blas"):
        warnings.filterwarnings("ignore", message=".*return_inferencedata=False.*")
        result = pm.sample(
            draws=draws, tune=tune, chains=chains, cores=cores, model=model, step=step,
            trace=trace, initvals=initvals, random_seed=rng.integers(2**31),
            progressbar=progressbar, return_inferencedata=False,
            compute_convergence_checks=False, discard_tuned_samples=True,
        )
    chain_ids = sorted(result.chains)
    value_draws = [np.stack([result.get_values(n, chains=c) for c in chain_ids]) for n in names]
    stats = {}
    for name in result.stat_names:
        try:
            values = np.stack([result.get_sampler_stats(name, chains=c) for c in chain_ids])
        except (ValueError, TypeError):
            continue
        if values.ndim >= 2 and values.dtype != object:
            stats[name] = values
    return value_draws, stats


_NUTPIE_STATS = {"depth": "tree_depth", "maxdepth_reached": "reached_max_treedepth",
                 "mean_tree_accept": "acceptance_rate", "logp": "lp"}
"""nutpie's sample statistics under PyMC's names (the others keep their own)."""


def _nutpie_model(model, bound, shapes, progressbar):
    """nutpie's compiled model for this model's structure, bound to its data.

    nutpie compiles the log density into a numba C callback (about 10 s of
    numba here, not cacheable on disk) and bakes array constants and the
    parameter sizes into it; its data (``pm.Data`` and dim lengths) are inputs.
    The compiled model is kept per structure, sizes and constant values, and a
    model with other data gets it through ``with_data``."""
    import nutpie

    shared = {v.name: v for v in bound.sources if isinstance(v, SharedVariable)}
    key = (bound.compiled.key, tuple(shapes), _compiled.constant_values_key(bound),
           tuple(sorted(shared)))
    compiled, hit = _compiled.cached_object(
        "nutpie", key, lambda: nutpie.compile_pymc_model(model, backend="numba", var_names=[]),
        progressbar=progressbar)
    if hit:  # nutpie's data are the shared variables its graph reads (by name)
        compiled = compiled.with_data(**{
            var.name: np.asarray(shared[var.name].get_value(borrow=True))
            for var in compiled.shared_var_keys})
    return compiled


def _nutpie_nuts(model, fns, parts, shapes, *, draws, tune, chains, cores, random_seed,
                 target_accept, progressbar, jitter, **kwargs):
    """nutpie's NUTS on its compiled model, cached per structure: (value-variable
    draws, stats). Each chain starts at the given point, jittered (as for PyMC's
    sampler) from the chain's own seed, so a seed gives the same chains."""
    import nutpie

    bound = fns.nuts_logp_grad()  # its structure keys nutpie's cache; it vets jittered starts
    compiled = _nutpie_model(model, bound, shapes, progressbar)
    names, slices, _ = compiled.shape_info
    position = {name: sl for name, sl in zip(names, slices, strict=True)}
    ours = [v.name for v in fns.value_vars]
    if sorted(ours) != sorted(names):  # pragma: no cover - nutpie samples the value variables
        raise RuntimeError(f"nutpie's parameters {names} are not the model's {ours}")
    x0 = _compiled.ravel_parts(parts)
    lock = threading.Lock()

    def chain_start(seed):
        # nutpie calls this from its chain threads, one seed per chain
        x = x0
        if jitter:
            with lock:
                x = _jittered_starts(bound, x0, shapes, 1, np.random.default_rng(seed))[0]
        flat = np.empty(x0.size)
        for name, part in zip(ours, _compiled.split_vector(x, shapes), strict=True):
            flat[position[name]] = np.ravel(part)
        return flat

    compiled = dataclasses.replace(compiled, initial_point_func=chain_start)
    seed = int(np.random.default_rng(random_seed).integers(2**63))
    trace = nutpie.sample(compiled, draws=draws, tune=tune, chains=chains, cores=cores,
                          seed=seed, progress_bar=progressbar, save_warmup=False,
                          store_unconstrained=True, target_accept=target_accept, **kwargs)
    # transformed variables' draws are in unconstrained_posterior, the others (no
    # transform: the value is the variable) in posterior
    groups = [trace[g].to_dataset() for g in ("unconstrained_posterior", "posterior")]
    value_draws = [np.asarray(next(g[name] for g in groups if name in g).values).reshape(
        chains, draws, *shape) for name, shape in zip(ours, shapes, strict=True)]
    stats = {}
    for name, values in trace["sample_stats"].to_dataset().data_vars.items():
        if values.dims == (D.CHAIN, D.DRAW) and values.dtype != object:
            stats[_NUTPIE_STATS.get(name, name)] = np.asarray(values.values)
    return value_draws, stats


def _external_nuts(model, fns, parts, nuts_sampler, *, draws, tune, chains, cores,
                   random_seed, target_accept, progressbar, **kwargs):
    """NumPyro through ``pm.sample`` (JAX; compiles on every call): (value-variable
    draws, stats)."""
    post_start = _untransformed_point(model, parts)
    idata = pm.sample(
        draws=draws, tune=tune, chains=chains, cores=cores, model=model,
        random_seed=random_seed, initvals=post_start, nuts_sampler=nuts_sampler,
        target_accept=target_accept, progressbar=progressbar,
        compute_convergence_checks=False, **kwargs,
    )
    post = idata["posterior"].to_dataset()
    to_values = fns.start()
    flat = {n: np.asarray(post[n].values) for n in fns.free_names}
    rows = [to_values(*[np.asarray(flat[n][c, d]) for n in fns.free_names])
            for c in range(chains) for d in range(draws)]
    value_draws = [np.stack([r[k] for r in rows]).reshape(chains, draws, *np.shape(rows[0][k]))
                   for k in range(len(fns.free_names))]
    stats = {}
    if "sample_stats" in idata.children:
        for name, values in idata["sample_stats"].to_dataset().data_vars.items():
            if values.dims[:2] == (D.CHAIN, D.DRAW) and values.ndim == 2:
                stats[name] = np.asarray(values.values)
    return value_draws, stats


def _untransformed_point(model, parts) -> dict:
    """The start for ``pm.sample(initvals=...)``: one dict, so that PyMC compiles one
    small initial-point function (its only compilation in a warm call) for all chains."""
    fns = functions_of(model)
    return dict(zip(fns.free_names, _untransform(model, parts), strict=True))


def _untransform(model, parts):
    """Free-variable values at value-variable values ``parts`` (one point)."""
    fns = functions_of(model)
    outs = fns.point()(*parts)
    return [np.asarray(o) for o in outs[:len(fns.free_names)]]


def label_switched_chains(idata, reference) -> list[int]:
    """Chains whose hard labels agree best with a non-identity permutation of the
    reference fit's hard labels (e.g. the MAP or majority vote)."""
    post = posterior_of(idata)
    ref = posterior_of(reference)["item_class_prob"]
    ref = ref.isel({d: 0 for d in (D.CHAIN, D.DRAW) if d in ref.dims})
    ref_labels = ref.argmax(D.TRUE_CLASS).values
    k = ref.sizes[D.TRUE_CLASS]
    switched = []
    for chain in post[D.CHAIN].values:
        labels = post["item_class_prob"].sel(chain=chain).mean(D.DRAW).argmax(
            D.TRUE_CLASS).values
        agree = np.zeros((k, k))
        np.add.at(agree, (labels, ref_labels), 1)
        rows, cols = linear_sum_assignment(-agree)
        if not np.all(rows == cols) and agree[rows, cols].sum() > np.trace(agree):
            switched.append(int(chain))
    return switched
