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
from scipy.optimize import linear_sum_assignment, minimize
from threadpoolctl import threadpool_limits

from crowd_models import _compiled, _trust
from crowd_models import _dims as D

__all__ = ["fit_map", "sample", "label_switched_chains", "posterior_of"]

MAX_GRADIENT = 1e-6
"""fit_map warns when the optimiser stops with a gradient entry (on the
unconstrained scale) larger than this times the number of observed items: the
point is not a mode (the optimiser stalled, or the density is unbounded, as in
a centred hierarchical model). The log posterior is a sum over items, so its
gradient grows with their number; the per-item scale keeps the criterion from
firing on large data sets whose fit agrees with EM to 1e-7."""

POLISH_GRADIENT = 1e-9
"""fit_map follows L-BFGS with a Newton trust-region polish (``trust-krylov``,
exact Hessian-vector products) when L-BFGS stops with a gradient entry above
this times the number of observed items. L-BFGS ends on a failed line search
once the objective's changes reach float64 precision, which on flat ridges
(the dog data) left 1e-5 differences from the EM fixed point; the polish takes
them to ~1e-10."""

EM_AGREEMENT = 1e-9
"""fit_map's optimum and the family's EM optimum (from the same start) count as
one mode when their log posteriors agree to this relative tolerance."""

POLISH_RADIUS = 10.0
"""The polish's largest trust radius on the unconstrained scale (scipy's default,
1000, let trial steps reach values where PyMC's parameter checks fail): it
starts next to a mode, where steps are small."""

HESSP_STEP = 6e-6
"""Relative step of the central-difference Hessian-vector products the polish
uses (about the cube root of float64 precision)."""

BOUNDARY = 1e-10
"""Start values on a boundary of their support are moved this far inside."""

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


def _optimise(fns, x0, shapes, method, options, *, exact_hessp=True, progressbar=False,
              label="MAP"):
    """scipy.optimize.minimize of the negative log posterior on the compiled functions.

    Methods that use Hessian-vector products get the compiled exact one, or
    with ``exact_hessp=False`` central differences of the gradient (step
    ``HESSP_STEP`` times the scale of x over |p|: relative error ~1e-10, and
    no Hessian graph to compile).
    """
    f = fns.logp_grad()

    def fun(x):
        out = f(*_compiled.split_vector(x, shapes))
        return float(out[0]), _compiled.ravel_parts(out[1:])

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
    if method not in _USES_GRADIENT or getattr(res, "jac", None) is None:
        res.jac = fun(res.x)[1]
    return res


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

    ``method`` is a ``scipy.optimize.minimize`` method (default L-BFGS-B);
    ``ftol`` (default 1e-15) and ``gtol`` (1e-9) go to the methods that take
    them (giving one to a method without it is an error), and further options
    (``maxiter``, ``maxfun``, ...) are checked against the method's. ``polish=True``:
    when L-BFGS-B stops with its largest gradient entry between
    :data:`POLISH_GRADIENT` and :data:`MAX_GRADIENT` per observed item (near a
    mode, but short of it), a ``trust-krylov`` Newton run with exact
    Hessian-vector products continues from its point, and its result is kept
    if it reaches a smaller gradient without lowering the objective
    (``attrs["polished"]``).

    ``compare_em=True`` (with the default start, for a model whose factory
    attached ``model.crowd_em``, the family's EM with the model's priors): the
    EM runs from the same start too. Where the two reach different modes (a
    multimodal posterior: Dawid-Skene on web search), a warning gives both log
    posteriors and the higher one is returned (``attrs["optimum"]`` is ``"map"``
    or ``"em"``; ``attrs["em_log_posterior"]``).

    Returns a DataTree with ``posterior`` (chain=1, draw=1), ``log_likelihood``
    (per item), ``observed_data``, ``constant_data`` and ``optimizer_result``
    (the final stage; ``attrs["stages"]`` describes each);
    ``attrs["log_posterior"]`` is the maximised objective.
    """
    if not isinstance(model, pm.Model):
        raise TypeError(f"fit_map expects a pymc Model, got {type(model).__name__}.")
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
    for name, value in (("ftol", 1e-15 if ftol is None else ftol), ("gtol", gtol)):
        if name in _METHOD_OPTIONS[method]:
            opts.setdefault(name, value)
    if method == "L-BFGS-B":  # pm.find_MAP's budget
        opts.setdefault("maxiter", 200 * n)
        opts.setdefault("maxfun", 200 * n)
    n_obs = _n_observed(model)
    polish = polish and method == "L-BFGS-B" and "maxiter" not in options
    res, max_grad, stages, polished = _climb(fns, x0_parts, method, opts, polish=polish,
                                             gtol=gtol, n_obs=n_obs, progressbar=progressbar)
    extra = {}
    # compare modes only: not a run cut short on purpose or one that stalled
    if compare and "maxiter" not in options and max_grad <= MAX_GRADIENT * n_obs:
        # the family's EM from the same start: on multimodal posteriors (Dawid-Skene
        # with K = 5 on web search) the two climb to different local optima
        with warnings.catch_warnings():
            # the EM's own warnings (non-convergence, boundary, chance) describe the
            # EM; this fit is checked below
            warnings.simplefilter("ignore", UserWarning)
            em_fit = model.crowd_em()
        em_lp, map_lp = float(em_fit.attrs["log_posterior"]), -float(res.fun)
        extra = {"em_log_posterior": em_lp, "optimum": "map"}
        if abs(em_lp - map_lp) > EM_AGREEMENT * max(1.0, abs(map_lp)):
            if em_lp > map_lp:
                em_res = _climb(fns, _unconstrained_start(model, em_fit), method, opts,
                                polish=polish, gtol=gtol, n_obs=n_obs, progressbar=progressbar)
                if -float(em_res[0].fun) > map_lp:
                    res, max_grad, polished = em_res[0], em_res[1], em_res[3]
                    stages += [{**st, "start": "em"} for st in em_res[2]]
                    extra["optimum"] = "em"
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
    fit["optimizer_result"] = xr.DataTree(_result_dataset(res, method if not polished else
                                                          "trust-krylov", fns, shapes))
    fit.attrs.update(
        log_posterior=-float(res.fun), max_gradient=max_grad, polished=int(polished),
        method="map", stages=json.dumps(stages), seconds=time.perf_counter() - t0, **extra,
    )
    return fit


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


def _climb(fns, x0_parts, method, opts, *, polish, gtol, n_obs, progressbar):
    """One optimiser run from ``x0_parts`` and, when it stops near but short of a
    mode, the Newton polish: (result, largest gradient entry, stages, polished)."""
    shapes = [np.shape(v) for v in x0_parts]
    x0 = _compiled.ravel_parts(x0_parts)
    f0 = fns.logp_grad()(*x0_parts)
    if not np.isfinite(f0[0]):
        raise ValueError("the log posterior is not finite at the start; give a start inside "
                         "the priors' support (fit_map(model, start=...)).")
    with threadpool_limits(1, user_api="blas"):
        res = _optimise(fns, x0, shapes, method, opts, progressbar=progressbar)
    max_grad = float(np.max(np.abs(res.jac))) if res.jac.size else 0.0
    stages = [_stage(method, res, max_grad)]
    polished = False
    if polish and POLISH_GRADIENT * n_obs < max_grad <= MAX_GRADIENT * n_obs:
        try:
            with threadpool_limits(1, user_api="blas"):
                res2 = _optimise(fns, res.x, shapes, "trust-krylov",
                                 {"gtol": min(gtol, 1e-10), "max_trust_radius": POLISH_RADIUS},
                                 exact_hessp=False, progressbar=progressbar, label="polish")
        except ParameterValueError as error:
            # a trial step where one of PyMC's parameter checks fails (a
            # ZeroSumNormal's zero mean, checked to 1e-9, lost to rounding far out):
            # the polish is optional, L-BFGS's point stands
            stages.append({"method": "trust-krylov", "success": False,
                           "message": f"stopped: {error}", "iterations": -1,
                           "evaluations": -1, "log_posterior": -float(res.fun),
                           "max_gradient": max_grad})
        else:
            grad2 = float(np.max(np.abs(res2.jac)))
            stages.append(_stage("trust-krylov", res2, grad2))
            if grad2 < max_grad and res2.fun <= res.fun + 1e-12 * max(1.0, abs(res.fun)):
                res, max_grad, polished = res2, grad2, True
    return res, max_grad, stages, polished


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
