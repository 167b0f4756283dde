"""PyMC calls with the settings these models need: `fit_map` and `sample`.

Both return an ``xarray.DataTree`` whose ``posterior`` has the same names,
dims and coords as the families' EM Datasets, plus an item-level
``log_likelihood`` group (``az.loo``/``az.compare`` work per item) and
``item_class_prob`` in the posterior for discrete-label families.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
import warnings

import numpy as np
import pymc as pm
import pymc.backends.arviz
import xarray as xr
from scipy.optimize import linear_sum_assignment

from crowd_models import _compiled, _trust
from crowd_models import _dims as D
from crowd_models._fits import has_laplace, posterior_of
from crowd_models._optimise import (  # noqa: F401  (settings the docs and tests read here)
    EM_AGREEMENT,
    LBFGS_FTOL,
    LBFGS_MAXCOR,
    MAX_GRADIENT,
    POLISH_GAIN,
    ModeSearch,
    check_method,
)
from crowd_models._points import (
    annotator_label_counts,
    check_count,
    check_protocol,
    data_groups,
    family_attrs,
    functions_of,
    group_dataset,
    n_observed,
    point_outputs,
    point_tree,
    unconstrained_start,
)
from crowd_models._samplers import (  # noqa: F401  (SAMPLERS: the docs and tests read it here)
    SAMPLERS,
    check_sampler,
    external_nuts,
    nutpie_nuts,
    pymc_nuts,
)
from crowd_models._text import warn

__all__ = ["fit_map", "sample", "label_switched_chains", "posterior_of", "laplace_fit"]


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
    gradient entry between ``_optimise.POLISH_GRADIENT`` (1e-9) and :data:`MAX_GRADIENT` per
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
    ``_optimise.ModeSearch.laplace``): a Gaussian on the unconstrained (transformed) variables
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
    ``attrs["log_posterior"]`` is the maximised objective, ``attrs["converged"]``
    1 where the optimiser reached a mode (0 after the warning that it did not).

    Examples
    --------
    >>> from crowd_models.models import two_coin
    >>> fit = cm.fit_map(two_coin.build_model(cm.datasets.load_rte()), laplace=True)
    >>> fit.attrs["log_posterior"]
    """
    if not isinstance(model, pm.Model):
        raise TypeError(f"fit_map expects a pymc Model, got {type(model).__name__}.")
    if not isinstance(laplace, bool | np.bool_):
        raise TypeError(f"laplace must be True or False, got {laplace!r}.")
    laplace_draws = check_count(laplace_draws, "laplace_draws", 2) if laplace else 0
    tolerances = {k: v for k, v in (("ftol", ftol), ("gtol", gtol)) if v is not None}
    method = check_method(method, {**options, **tolerances})
    t0 = time.perf_counter()
    check_protocol(model)
    fns = functions_of(model)
    fns.progressbar = bool(progressbar)
    # the EM comparison: from the default start, for a family with an EM, and not on a
    # run cut short on purpose
    compare = (compare_em and start is None and callable(getattr(model, "crowd_em", None))
               and "maxiter" not in options)
    # the first fit of a structure whose compiled code is not on disk runs on
    # PyTensor's Python backend (_compiled.QUICK_FITS): no compile to wait for
    with fns.fit_scope():
        x0 = unconstrained_start(model, getattr(model, "crowd_start", None) if start is None
                                 else start)
        search = ModeSearch(fns, [np.shape(v) for v in x0], method, options, ftol=ftol,
                            gtol=gtol, polish=polish, n_observed=n_observed(model),
                            progressbar=progressbar)
        mode = search.climb(x0)
        comparison = {}
        if compare and search.converged(mode):  # not on a run that stalled
            mode, comparison = _compare_with_em(model, search, mode)
        mode = search.polish(mode)  # (where the comparison has not)
        fit = _map_tree(model, search, mode, comparison, laplace_draws, random_seed)
    fit.attrs["seconds"] = time.perf_counter() - t0
    return fit


def _compare_with_em(model, search, mode):
    """fit_map's comparison with the family's EM from the same start: (the higher
    mode, the attrs that record the comparison).

    On multimodal posteriors (Dawid-Skene with K = 5 on web search) the two climb
    to different local optima. The optimiser's mode is polished first, unless the
    EM's is higher by more than any polish gains (:data:`POLISH_GAIN`); where the
    EM's is higher by more than :data:`EM_AGREEMENT`, the search climbs again from
    the EM's point and keeps that mode if it is higher (its stages marked
    ``"start": "em"``), and a warning gives both log posteriors."""
    with warnings.catch_warnings():
        # the EM's own warnings (non-convergence, boundary, chance) describe the EM;
        # this fit is checked when its tree is built
        warnings.simplefilter("ignore", UserWarning)
        em_fit = model.crowd_em()
    em_lp = float(em_fit.attrs["log_posterior"])
    if em_lp - mode.log_posterior <= POLISH_GAIN * max(1.0, abs(mode.log_posterior)):
        mode = search.polish(mode)
    map_lp, optimum = mode.log_posterior, "map"
    if abs(em_lp - map_lp) > EM_AGREEMENT * max(1.0, abs(map_lp)):
        if em_lp > map_lp:
            em_mode = search.polish(search.climb(unconstrained_start(model, em_fit)))
            if em_mode.log_posterior > map_lp:
                optimum = "em"
                mode = dataclasses.replace(em_mode, stages=(
                    *mode.stages, *({**stage, "start": "em"} for stage in em_mode.stages)))
        _warn_two_modes(map_lp, em_lp, optimum)
    return mode, {"em_log_posterior": em_lp, "optimum": optimum}


def _map_tree(model, search, mode, comparison, laplace_draws, random_seed) -> xr.DataTree:
    """fit_map's DataTree at ``mode``, after its convergence, boundary and chance
    checks: the point's groups, ``optimizer_result``, the Laplace groups (with
    ``laplace_draws``) and the attrs."""
    # L-BFGS reports a failed line search when it starts at the optimum (e.g. an
    # EM fit), and "success" where the density is unbounded: the gradient tells.
    converged = search.converged(mode)
    if not converged:
        warn(
            f"the MAP optimiser stopped without converging ({mode.result.message}, largest "
            f"gradient {mode.max_gradient:.2g} over {search.n_observed} observed items); try "
            f"another start.")
    search.check_boundary(mode)
    fit = point_tree(model, search.parts(mode))
    _trust.check_chance(posterior_of(fit), annotator_label_counts(model), what="the MAP")
    fit["optimizer_result"] = xr.DataTree(search.result_dataset(mode))
    fit.attrs.update(log_posterior=mode.log_posterior, max_gradient=mode.max_gradient,
                     method="map", polished=int(bool(mode.polished)), converged=int(converged),
                     stages=json.dumps(list(mode.stages)), **comparison)
    laplace = search.laplace(mode, laplace_draws, random_seed) if laplace_draws else None
    if laplace is not None:
        fit["laplace"], fit["laplace_approximation"] = (xr.DataTree(g) for g in laplace)
    return fit


def _warn_two_modes(map_lp: float, em_lp: float, optimum: str) -> None:
    """Warn that the optimiser and the EM reached different modes, naming the one returned."""
    warn(
        f"from the majority-vote start the optimiser reached a mode with log posterior "
        f"{map_lp:.6f} and the family's EM one with {em_lp:.6f}: the posterior has "
        f"several modes. fit_map returns the higher ({optimum.upper()}'s); "
        f"compare fits from other starts (fit_map(model, start=...)).")


def laplace_fit(fit) -> xr.DataTree:
    """A ``fit_map(..., laplace=True)`` fit as a many-draw DataTree: its ``laplace``
    draws as the ``posterior`` (with the data groups), which the report's tables
    (``cm.report.annotator_summary``) summarise like NUTS draws.

    Examples
    --------
    >>> from crowd_models.inference import laplace_fit
    >>> from crowd_models.models import two_coin
    >>> fit = cm.fit_map(two_coin.build_model(cm.datasets.load_rte()), laplace=True)
    >>> cm.report.annotator_summary(laplace_fit(fit)).head()
    """
    if not has_laplace(fit):
        raise ValueError("laplace_fit needs a fit from fit_map(model, laplace=True) (a "
                         "DataTree with a 'laplace' group).")
    groups = {"posterior": xr.DataTree(fit["laplace"].to_dataset())}
    for name in ("observed_data", "constant_data"):
        if name in fit.children:
            groups[name] = xr.DataTree(fit[name].to_dataset())
    out = xr.DataTree(children=groups)
    out.attrs.update(method="laplace", map_log_posterior=fit.attrs.get("log_posterior"),
                     **{key: fit.attrs[key] for key in ("family", "variant", "feature_center",
                                                        "feature_scale") if key in fit.attrs})
    return out


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
    target_accept: float | None = None,
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
    ``target_accept`` defaults to the model's ``crowd_target_accept`` when a
    family sets one (the hierarchical item-difficulty model: 0.98), else 0.9.

    The result has ``posterior`` (with ``item_class_prob``), ``sample_stats``,
    an item-level ``log_likelihood`` group, ``observed_data`` and
    ``constant_data``; ``attrs`` hold ``seconds`` (the whole call) and
    ``sampling_seconds``.

    The likelihood is symmetric under relabelling the classes. Chains whose
    most probable labels match a permutation of the start's labels better than
    the labels themselves are flagged: a warning is raised and
    ``attrs["label_switched_chains"]`` lists them (see
    :func:`label_switched_chains`).

    Examples
    --------
    >>> from crowd_models.models import two_coin
    >>> idata = cm.sample(two_coin.build_model(cm.datasets.load_rte()), draws=500, chains=4)
    >>> import arviz as az
    >>> az.summary(idata, var_names=["sensitivity"])
    """
    if not isinstance(model, pm.Model):
        raise TypeError(f"sample expects a pymc Model, got {type(model).__name__}.")
    draws = check_count(draws, "draws", 1)
    tune = check_count(tune, "tune", 0)
    chains = check_count(chains, "chains", 1)
    if cores is not None:
        cores = check_count(cores, "cores", 1)
    if target_accept is None:
        target_accept = getattr(model, "crowd_target_accept", 0.9)
    if not 0 < target_accept < 1:
        raise ValueError(f"target_accept must lie in (0, 1), got {target_accept}.")
    nuts_sampler = check_sampler(nuts_sampler)
    t0 = time.perf_counter()
    fns = functions_of(model)
    fns.progressbar = bool(progressbar)
    parts, reference = _nuts_start(model, start, progressbar)
    shapes = [np.shape(v) for v in parts]
    cores = min(chains, os.cpu_count() or 1) if cores is None else cores
    t_sample = time.perf_counter()
    if nuts_sampler in ("pymc", "nutpie"):
        run = pymc_nuts if nuts_sampler == "pymc" else nutpie_nuts
        value_draws, stats = run(model, fns, parts, shapes, draws=draws, tune=tune,
                                 chains=chains, cores=cores, random_seed=random_seed,
                                 target_accept=target_accept, progressbar=progressbar,
                                 jitter=jitter, **kwargs)
    else:
        value_draws, stats = external_nuts(model, fns, parts, nuts_sampler, draws=draws,
                                           tune=tune, chains=chains, cores=cores,
                                           random_seed=random_seed,
                                           target_accept=target_accept,
                                           progressbar=progressbar, **kwargs)
    sampling_seconds = time.perf_counter() - t_sample
    post, ll = point_outputs(model, value_draws, sample_shape=(chains, draws))
    idata = xr.DataTree(children={
        "posterior": xr.DataTree(group_dataset(model, post, (D.CHAIN, D.DRAW))),
        "sample_stats": xr.DataTree(group_dataset(model, stats, (D.CHAIN, D.DRAW))),
        "log_likelihood": xr.DataTree(group_dataset(model, ll, (D.CHAIN, D.DRAW))),
        **data_groups(model),
    })
    idata.attrs.update(method="nuts", nuts_sampler=nuts_sampler,
                       sampling_seconds=sampling_seconds, **family_attrs(model))
    if "item_class_prob" in idata.posterior and reference is not None and (
            "item_class_prob" in posterior_of(reference)):
        switched = label_switched_chains(idata, reference)
        idata.attrs["label_switched_chains"] = switched
        _warn_switched(switched, chains)
    if "community_prob" in idata.posterior and reference is not None and (
            "community_prob" in posterior_of(reference)):
        idata = align_communities(idata, reference)
    _trust.check_chance(idata.posterior.to_dataset(), annotator_label_counts(model),
                        what="the posterior (mean)")
    idata.attrs["seconds"] = time.perf_counter() - t0
    return idata


def align_communities(idata, reference) -> xr.DataTree:
    """The draws with each chain's communities renamed to the reference fit's.

    The communities of the community model are exchangeable, so each chain may
    find them in its own order. A chain's order is the assignment that best
    matches its mean ``community_prob`` (annotator, community) to the
    reference's (e.g. the MAP the chains start at); every posterior variable
    with a ``community`` dim is reordered by it, and the chains that needed it
    are listed in ``attrs["community_relabelled_chains"]``.

    Parameters
    ----------
    idata : xarray.DataTree
        Draws with ``community_prob`` in their posterior.
    reference : xarray.Dataset or xarray.DataTree
        A one-draw fit with ``community_prob``.

    Returns
    -------
    xarray.DataTree
        A copy whose chains name the communities as the reference does.

    Examples
    --------
    >>> from crowd_models.inference import align_communities
    >>> from crowd_models.models import community
    >>> model = community.build_model(cm.datasets.load_dog())
    >>> idata = cm.sample(model, draws=200, tune=200, chains=2)  # doctest: +SKIP
    >>> idata = align_communities(idata, cm.fit_map(model))  # doctest: +SKIP
    """
    post = idata.posterior.to_dataset()
    ref = posterior_of(reference)["community_prob"]
    ref = ref.isel({d: 0 for d in (D.CHAIN, D.DRAW) if d in ref.dims}).values
    chains, relabelled = [], []
    for chain in post[D.CHAIN].values:
        one = post.sel({D.CHAIN: [chain]})
        mean = one["community_prob"].mean((D.CHAIN, D.DRAW)).values  # (annotator, community)
        rows, cols = linear_sum_assignment(-(mean.T @ ref))
        order = rows[np.argsort(cols)]
        if not np.array_equal(order, np.arange(len(order))):
            relabelled.append(int(chain))
            named = {n: v for n, v in one.data_vars.items() if D.COMMUNITY in v.dims}
            # positions move; the coordinate stays, so that the chains concatenate as is
            one = one.assign({n: v.isel({D.COMMUNITY: order}).drop_vars(
                D.COMMUNITY, errors="ignore") for n, v in named.items()})
        chains.append(one)
    out = idata.copy()
    out["posterior"] = xr.DataTree(xr.concat(chains, dim=D.CHAIN))
    out.attrs["community_relabelled_chains"] = relabelled
    return out


def _nuts_start(model, start, progressbar):
    """(unconstrained start parts, reference fit for the label-switch check) of sample."""
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
                map_fit.attrs["max_gradient"] > MAX_GRADIENT * n_observed(model)):
            warn(
                "the posterior mode is degenerate (e.g. a centred hierarchical scale "
                "collapsing to zero); NUTS starts at the majority-vote start instead. Pass "
                "start=None to skip the MAP.")
            parts = unconstrained_start(model, None)
        else:  # the optimiser's own point (no round trip through the constrained scale)
            with functions_of(model).few_calls():  # one call: quick where not compiled
                shapes = [np.shape(v) for v in unconstrained_start(model, posterior_of(map_fit))]
            parts = _compiled.split_vector(x, shapes)
    else:
        parts = unconstrained_start(model, start)
        # the label-switch check compares the chains with the start: a fit as given,
        # else the model's outputs (item_class_prob) at the start point
        reference = start if isinstance(start, xr.Dataset | xr.DataTree) else point_tree(
            model, parts)
    return parts, reference


def _warn_switched(switched: list, chains: int) -> None:
    """Warn on label-switched chains (all of them: the reference is the likely problem)."""
    if switched and len(switched) == chains and chains > 1:
        warn(
            f"every chain ({switched}) disagrees with the reference fit's labels under "
            f"a relabelling: the chains agree with each other, so the reference (the "
            f"start: MAP, EM fit or dict) is the likely problem, not the chains; compare "
            f"it with majority vote (start=None).")
    elif switched:
        warn(
            f"chain(s) {switched} sit in a label-switched mode (their most probable true "
            f"classes match a permutation of the MAP's labels better than the labels "
            f"themselves); drop them (idata.sel(chain=...)), use stronger "
            f"diagonal-favouring priors, or start every chain at the MAP without jitter "
            f"(jitter=False, with more draws: the mode can mix slowly) and read the "
            f"intervals as those of the MAP's mode.")


def label_switched_chains(idata, reference) -> list[int]:
    """Chains whose hard labels agree best with a non-identity permutation of the
    reference fit's hard labels (e.g. the MAP or majority vote).

    Examples
    --------
    >>> from crowd_models.inference import label_switched_chains
    >>> from crowd_models.models import two_coin
    >>> model = two_coin.build_model(cm.datasets.load_rte())
    >>> idata = cm.sample(model, draws=300, tune=300, chains=2, start=None)
    >>> label_switched_chains(idata, cm.fit_map(model))  # chains in the mirrored mode
    """
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
