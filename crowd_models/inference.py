"""PyMC calls with the settings these models need: `fit_map` and `sample`.

Both return an ``xarray.DataTree`` whose ``posterior`` has the same names,
dims and coords as the families' EM Datasets, plus an item-level
``log_likelihood`` group (``az.loo``/``az.compare`` work per item) and
``item_class_prob`` in the posterior for discrete-label families.
"""

from __future__ import annotations

import os
import time
import warnings

import numpy as np
import pymc as pm
import xarray as xr
from scipy.optimize import linear_sum_assignment

from crowd_models import _dims as D

__all__ = ["fit_map", "sample", "label_switched_chains", "posterior_of"]

MAX_GRADIENT = 1e-3
"""fit_map warns when the optimiser stops with a gradient entry (on the
unconstrained scale) larger than this: the point is not a mode (the optimiser
stalled, or the density is unbounded, as in a centred hierarchical model)."""

POLISH_GRADIENT = 1e-6
"""fit_map follows L-BFGS with a Newton trust-region polish (``trust-krylov``,
exact Hessian-vector products) when L-BFGS stops with a gradient entry above
this. L-BFGS ends on a failed line search once the objective's changes reach
float64 precision, which on flat ridges (the dog data) left 1e-5 differences
from the EM fixed point; the polish takes them to ~1e-10."""

BOUNDARY = 1e-10
"""Start values on a boundary of their support are moved this far inside."""


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


def _start_point(model: pm.Model, start) -> dict | None:
    """Untransformed start values by variable name, from an EM fit or a dict."""
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
        return _inside_support(model, point)
    if isinstance(start, dict):
        unknown = set(start) - set(names)
        if unknown:
            raise ValueError(
                f"start names unknown variables {sorted(unknown)}; the model's free variables "
                f"are {names}."
            )
        return _inside_support(model, {k: np.asarray(v, dtype=float) for k, v in start.items()})
    raise TypeError(
        f"start must be None (the model's majority-vote start), an EM Dataset, a fit "
        f"DataTree or a dict, got {type(start).__name__}."
    )


def _inside_support(model: pm.Model, point: dict) -> dict:
    """Move boundary values (an EM fit with flat priors can hold exact 0 or 1)
    just inside the support, where the unconstrained transforms are finite."""
    transforms = {rv.name: model.rvs_to_transforms.get(rv) for rv in model.free_RVs}
    out = {}
    for name, value in point.items():
        kind = type(transforms.get(name)).__name__
        if kind == "SimplexTransform":
            value = np.clip(value, BOUNDARY, None)
            value = value / value.sum(axis=-1, keepdims=True)
        elif kind == "LogOddsTransform":
            value = np.clip(value, BOUNDARY, 1 - BOUNDARY)
        elif kind == "LogTransform":
            value = np.clip(value, BOUNDARY, None)
        out[name] = value
    return out


def fit_map(
    model: pm.Model,
    *,
    start=None,
    ftol: float = 1e-15,
    gtol: float = 1e-9,
    progressbar: bool = False,
    polish: bool = True,
    **optimizer_kwargs,
) -> xr.DataTree:
    """The posterior mode (MAP) of a family's model.

    ``pm.find_MAP`` maximises ``model.logp(jacobian=False)``, the log posterior
    in the original parameter space, the same objective the families' EM climbs.
    ``start=None`` starts at ``model.crowd_start``, the majority-vote start the
    factories attach (the one their EM uses), or at the model's default initial
    point for a model without it; an EM fit, a fit DataTree or a dict of values
    by variable name is used as given. With the tight default tolerances the
    result matches the EM fixed point from the same start to ~1e-8.

    ``polish=True``: when L-BFGS stops with its largest gradient entry
    between :data:`POLISH_GRADIENT` and :data:`MAX_GRADIENT` (near a mode, but
    short of it), a ``trust-krylov`` Newton run continues from its
    point, and its result is kept if it reaches a smaller gradient without
    lowering the objective (``attrs["polished"]``). Extra keyword arguments
    go to ``pm.find_MAP`` (e.g. ``method=``).

    Returns a DataTree with ``posterior`` (chain=1, draw=1), ``log_likelihood``
    (per item), ``observed_data``, ``constant_data`` and the optimiser's
    report; ``attrs["log_posterior"]`` is the maximised objective.
    """
    if not isinstance(model, pm.Model):
        raise TypeError(f"fit_map expects a pymc Model, got {type(model).__name__}.")
    if start is None:
        start = getattr(model, "crowd_start", None)
    t0 = time.perf_counter()
    def run(initvals, **kwargs):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*find_MAP should not be used.*")
            warnings.filterwarnings("ignore", message="The optimizer did not converge")
            fit = pm.find_MAP(initvals=initvals, model=model, return_inferencedata=True,
                              jitter=False, progressbar=progressbar,
                              idata_kwargs={"log_likelihood": True}, **kwargs)
        result = fit["optimizer_result"]
        return fit, result, float(np.abs(result["jac"]).max())

    fit, result, max_grad = run(_start_point(model, start), ftol=ftol, gtol=gtol,
                                **optimizer_kwargs)
    polished = False
    # polish a stop near a mode; not a run cut short on purpose (maxiter) or a
    # stop far from any mode (that is reported below)
    if polish and "maxiter" not in optimizer_kwargs and POLISH_GRADIENT < max_grad <= MAX_GRADIENT:
        fit2, result2, grad2 = run(_start_point(model, fit), method="trust-krylov",
                                   gtol=min(gtol, 1e-10))
        fun, fun2 = float(result["fun"]), float(result2["fun"])
        if grad2 < max_grad and fun2 <= fun + 1e-12 * max(1.0, abs(fun)):
            fit, result, max_grad, polished = fit2, result2, grad2, True
    # L-BFGS reports a failed line search when it starts at the optimum (e.g. an
    # EM fit), and "success" where the density is unbounded: the gradient tells.
    if max_grad > MAX_GRADIENT:
        warnings.warn(
            f"the MAP optimiser stopped without converging ({result['message'].item()}, "
            f"largest gradient {max_grad:.2g}); try another start.", UserWarning, stacklevel=2,
        )
    fit.attrs["log_posterior"] = -float(result["fun"])
    fit.attrs["max_gradient"] = max_grad
    fit.attrs["polished"] = int(polished)
    fit.attrs["method"] = "map"
    fit.attrs["seconds"] = time.perf_counter() - t0
    return fit


def sample(
    model: pm.Model,
    *,
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 4,
    cores: int | None = None,
    random_seed=None,
    start="map",
    nuts_sampler: str | None = None,
    target_accept: float = 0.9,
    progressbar: bool = True,
    **kwargs,
) -> xr.DataTree:
    """NUTS on a family's model, started near the posterior mode.

    ``start="map"`` (default) runs :func:`fit_map` first and starts every chain
    there, which keeps chains in the mode that agrees with majority vote;
    ``start=None`` uses the majority-vote start (``model.crowd_start``); an EM fit or
    a dict is used as given. Chains run in parallel on up to ``cores``
    processes (default: one per chain, at most the machine's CPU count). The
    result has ``posterior`` (with
    ``item_class_prob``), ``sample_stats``, an item-level ``log_likelihood``
    group, ``observed_data`` and ``constant_data``.

    The likelihood is symmetric under relabelling the classes. Chains whose
    most probable labels match a permutation of the start's labels better than
    the labels themselves are flagged: a warning is raised and
    ``attrs["label_switched_chains"]`` lists them (see
    :func:`label_switched_chains`).
    """
    if not isinstance(model, pm.Model):
        raise TypeError(f"sample expects a pymc Model, got {type(model).__name__}.")
    reference = None
    initvals = None
    if isinstance(start, str):
        if start != "map":
            raise ValueError(f"start={start!r}: use 'map', None, an EM fit or a dict.")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # judged just below
            # a start for NUTS needs no Newton polish (whose Hessian graph can
            # take longer to compile than the sampling)
            map_fit = fit_map(model, polish=False)
        initvals = _start_point(model, map_fit)
        reference = posterior_of(map_fit)
        # a large gradient or infinite coordinates at the optimiser's stop mean the
        # density is unbounded there, e.g. a centred hierarchical scale -> 0
        x = np.asarray(map_fit["optimizer_result"]["x"], dtype=float)
        if not np.all(np.isfinite(x)) or map_fit.attrs["max_gradient"] > MAX_GRADIENT:
            warnings.warn(
                "the posterior mode is degenerate (e.g. a centred hierarchical scale "
                "collapsing to zero); NUTS starts at the majority-vote start instead. Pass "
                "start=None to skip the MAP.", UserWarning, stacklevel=2,
            )
            initvals = _start_point(model, getattr(model, "crowd_start", None))
    elif start is not None:
        initvals = _start_point(model, start)
        reference = posterior_of(start) if isinstance(start, xr.Dataset | xr.DataTree) else None
    else:
        initvals = _start_point(model, getattr(model, "crowd_start", None))
    t0 = time.perf_counter()
    idata = pm.sample(
        draws=draws, tune=tune, chains=chains, random_seed=random_seed, model=model,
        cores=min(chains, os.cpu_count() or 1) if cores is None else cores,
        initvals=initvals, nuts_sampler=nuts_sampler, target_accept=target_accept,
        progressbar=progressbar, **kwargs,
    )
    pm.compute_log_likelihood(idata, model=model, progressbar=False)
    idata.attrs["seconds"] = time.perf_counter() - t0
    idata.attrs["method"] = "nuts"
    if "item_class_prob" in idata.posterior and reference is not None and (
            "item_class_prob" in reference):
        switched = label_switched_chains(idata, reference)
        idata.attrs["label_switched_chains"] = switched
        if switched:
            warnings.warn(
                f"chain(s) {switched} sit in a label-switched mode (their most probable true "
                f"classes match a permutation of the MAP's labels better than the labels "
                f"themselves); drop them (idata.sel(chain=...)) or use stronger "
                f"diagonal-favouring priors.", UserWarning, stacklevel=2,
            )
    return idata


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
