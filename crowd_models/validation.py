"""Simulation-based calibration (SBC) of the families' posteriors, fanned out on Dask.

One replication draws every parameter from the family's own prior (PyMC's
``pm.draw`` on the model that ``build_model`` makes for the design, so the
hyperparameters are exactly the fit's), simulates a label table from them
with the family's ``simulate``, fits that table, and records where each true
value falls among ``n_ranks`` posterior draws spread evenly over the fit's
draws (its rank, 0 to ``n_ranks``), whether the central 50% and 90%
intervals of all the draws cover it, and each item's class probabilities by
EM, MAP and (``fit="nuts"``) NUTS beside the item's true class. Over many
replications each parameter's ranks are uniform if the inference is
calibrated for that model (Talts et al. 2018); the true class's posterior
probability is the hidden labels' counterpart (items given 0.8 should be
right 80% of the time; :func:`item_calibration`).

``fit="nuts"`` runs :func:`crowd_models.sample` (2 chains of 500 draws after
500 tuning steps by default, one core per replication); ``fit="map"`` takes
the draws of the Laplace approximation at the MAP (``fit_map(...,
laplace=True)``), the intervals the report gives for MAP fits, so its SBC
measures how far those intervals are from the posterior's.

Replications are independent Dask tasks. A replication is its family's name,
variant, design and seed, never a compiled function, so each worker builds the
model itself and its compile cache serves its later tasks. ``client=None``
starts a ``distributed.LocalCluster`` with one single-threaded worker per core
when ``dask[distributed]`` is installed (``crowd_models[distributed]``), and
runs serially otherwise; a ``distributed.Client`` or a scheduler address runs
on that cluster; ``client=False`` runs serially. The seed of replication
``s`` is drawn from ``numpy.random.SeedSequence(seed).spawn`` and NUTS runs
its chains on one core, so a seed gives the same ranks serially and on any
cluster. A replication that raises is retried once on Dask and otherwise
recorded as failed, with its error, in ``status``; ``attrs["n_ran"]`` and
``attrs["n_failed"]`` count them.

Families (``family``, ``variant``): two_coin, without and with features
(``"features"``); dawid_skene full, one_coin, pooled (at the fixed spread 1,
the reference of the empirical-Bayes spread: a spread chosen from the data is
not a prior) and hierarchical (NUTS only); spammer; item_difficulty fixed,
hierarchical (NUTS only) and irt (binary labels); community; ordinal latent; continuous
gaussian, bias and student_t (NUTS only: it has no EM); feature_accuracy (the
Laplace prior; NUTS only). A case with features holds them fixed over the
replications (``design["n_features"]`` standard-normal columns from a seed of
their own; SBC conditions on the covariates). Continuous labels have no
class probabilities; each item's hidden true value is ranked instead, like a
per-item parameter, among draws from its conditional Gaussian given each
posterior draw (``_sbc_cases.true_value_draws``). The continuous priors are
built with ``label_scale=1`` (by default they scale with the labels' sd, a
property of the data, not a prior); the intercept's prior keeps its centre at
the mean label, immaterial at its sd of 10. The feature-dependent accuracy
model's posterior has two mirrored modes of equal mass; the fit is folded to
the mode that agrees with majority vote (``align_signs``) and the truth by
the same rule, which keeps the check exact (``_sbc_cases.fold_truth``). The
community model (MAP with Laplace: it has an EM) draws each table from each
annotator's drawn confusion; its communities are exchangeable, so the fit and
the truth name them in unrelated orders, and only what that order does not
name is ranked: each annotator's ``confusion_logit`` and ``confusion``, and the
``prevalence`` (the registry case's ``unranked`` dims).

Two families have no SBC here. The cumulative ordinal model is not a
generative model of the labels (its likelihood is a composite of K - 1 binary
ones), and the stacked Gaussian model's Bayesian fit is a product of one
class-conditional feature model per annotator, each of which generates the
same features: neither posterior is the posterior of a model that could
simulate the data, so there is nothing for its ranks to be uniform under.
simuk, the ArviZ ecosystem's SBC package, draws the data with PyMC's prior
predictive of the observed variable; the families observe each item's
marginal likelihood (a ``CustomDist`` without a random draw, the hidden class
summed out), so the labels come from the family's own ``simulate`` here
instead. The cases and their hooks are in ``_sbc_cases.py``.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
import warnings
from importlib import import_module

import numpy as np
import pandas as pd
import xarray as xr

from crowd_models import _dims as D
from crowd_models._fits import posterior_of
from crowd_models._sbc_cases import (
    DESIGN_DEFAULTS,
    TRUE_VALUE,
    all_cases,
    check_design,
    find_case,
    fold_truth,
    simulate_table,
    template_table,
    true_value_draws,
)
from crowd_models._text import listing, warn
from crowd_models.calibration import (
    RANK_BINS,
    item_calibration,
    plot_calibration,
    plot_ranks,
    rank_tests,
)
from crowd_models.data import Annotations
from crowd_models.inference import fit_map, sample
from crowd_models.report import annotator_summary

NUTS_DEFAULTS = {"draws": 500, "tune": 500, "chains": 2}
"""The NUTS settings of ``fit="nuts"`` (``nuts=`` overrides them)."""

FITS = ("nuts", "map")


CASES = tuple(all_cases())
"""The (family, variant) pairs :func:`sbc` takes (variant None: the family has one)."""


def available_fits(family: str, variant=None) -> tuple[str, ...]:
    """The ``fit`` values :func:`sbc` takes for a family and variant: ``"nuts"``,
    and ``"map"`` where its MAP plus Laplace summarises the posterior (a family
    with an EM, but not the lasso's MAP of feature accuracy).

    Examples
    --------
    >>> from crowd_models import validation
    >>> validation.available_fits("dawid_skene", "hierarchical")
    """
    return FITS if find_case(family, variant)[1]["laplace"] else ("nuts",)


@functools.lru_cache(maxsize=16)
def _prior(family: str, variant, design_items: tuple):
    """The model of the design, with the names, dims and draw function of the
    parameters whose ranks are recorded (cached per process: a worker builds it
    once)."""
    import pymc as pm

    design = dict(design_items)
    case = find_case(family, variant)[1]
    options = case["options"]
    module = import_module(f"crowd_models.models.{family}")
    model = module.build_model(template_table(family, variant, design), **options)
    dims = {v.name: model.named_vars_to_dims.get(v.name, ())
            for v in model.free_RVs + model.deterministics}
    # the free parameters, and the derived ones that are not per item (a per-item
    # deterministic, such as the easiness, transforms a per-item free parameter);
    # continuous labels' hidden true values are ranked like a per-item parameter
    names = [v.name for v in model.free_RVs] + [
        v.name for v in model.deterministics if D.ITEM not in dims[v.name]
    ] + ([TRUE_VALUE] if TRUE_VALUE in dims else [])
    # variables along exchangeable groups (communities) are not ranked
    names = [n for n in names if not set(dims.get(n, ())) & set(case["case"].unranked)]

    drawn = [name for name in dims if name != "item_class_prob"]  # what simulate may need

    def draw(seed):
        return dict(zip(drawn, pm.draw([model[name] for name in drawn], random_seed=seed),
                        strict=True))

    shapes = {name: np.shape(value) for name, value in draw(0).items() if name in names}
    return names, dims, shapes, draw


def _order(ann: Annotations, dims, n_annotators: int, n_items: int) -> dict:
    """Positions in the fit's axes of the simulation's annotators and items."""
    order = {D.ANNOTATOR: ann.annotators.get_indexer([f"annotator_{j}"
                                                      for j in range(n_annotators)]),
             D.ITEM: ann.items.get_indexer(np.arange(n_items))}
    for dim, index in order.items():
        if np.any(index < 0):
            raise ValueError(f"the simulated table lacks some {dim}s of the design")
    return order


def _ranks(draws: np.ndarray, truth: np.ndarray, n_ranks: int, rng) -> np.ndarray:
    """Rank of each true value among ``n_ranks`` draws spread evenly over the
    (sample, ...) draws; ties (discrete values) broken at random."""
    pick = np.linspace(0, len(draws) - 1, n_ranks).round().astype(int)
    thinned = draws[pick]
    below = (thinned < truth).sum(axis=0)
    ties = (thinned == truth).sum(axis=0)
    return below + np.floor(rng.random(below.shape) * (ties + 1)).astype(int)


def replicate(family: str, variant, design: dict, fit: str, nuts: dict, n_ranks: int,
              fit_priors: dict | None, seed) -> dict:
    """One SBC replication (what a Dask task runs; see :func:`sbc`).

    Returns a dict of ``truth``, ``rank``, ``covered_50``, ``covered_90``,
    ``em_covered_90`` (1 or 0 where the report gives the EM fit a 90% interval
    from its conjugate approximations, NaN elsewhere; flat over the parameters,
    in the order of :func:`parameters`),
    ``item_prob`` (method -> (item, class) probabilities), ``item_truth``,
    ``max_rhat``, ``divergences``, ``n_warnings`` and ``seconds``.

    Examples
    --------
    >>> from crowd_models import validation
    >>> out = validation.replicate("two_coin", None, validation.DESIGN_DEFAULTS, "map",
    ...                            {}, 99, None, 0)
    >>> out["rank"][:3]
    """
    t0 = time.perf_counter()
    case = find_case(family, variant)[1]
    design = check_design(design, case)
    options = {**case["options"], **(fit_priors or {})}
    classes = case["labels"] != "continuous"
    module = import_module(f"crowd_models.models.{family}")
    if not isinstance(seed, np.random.SeedSequence):
        seed = np.random.SeedSequence(seed)
    prior_seed, data_seed, fit_seed, tie_seed = seed.spawn(4)
    names, dims, _, draw = _prior(family, variant, tuple(sorted(design.items())))
    values = draw(np.random.default_rng(prior_seed))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        ann = simulate_table(family, variant, values, design, np.random.default_rng(data_seed))
        order = _order(ann, dims, design["n_annotators"], design["n_items"])
        item_truth = np.asarray(ann.gold)[order[D.ITEM]]
        model = module.build_model(ann, **options)
        item_prob = {}
        em_fit = em_table = None
        if case["em"]:
            em_fit = module.em(ann, **options)
            em_table = annotator_summary(em_fit, ci_prob=0.9)
        fit_seed = int(np.random.default_rng(fit_seed).integers(2**31))
        # started at the EM's fixed point, the MAP does not run the EM a second time
        map_fit = fit_map(model, start=em_fit, laplace=fit == "map", random_seed=fit_seed)
        if fit == "nuts":
            idata = sample(model, progressbar=False, random_seed=fit_seed, cores=1,
                           start=map_fit, **nuts)
            if family == "feature_accuracy":  # fold the mirrored modes (see fold_truth)
                idata = module.align_signs(idata, ann)
                values, item_truth = fold_truth(module, values, names, dims, ann, item_truth)
            post = idata["posterior"].to_dataset()
            stats_ = idata["sample_stats"]
            divergences = int(stats_["diverging"].sum()) if "diverging" in stats_ else 0
        else:
            post = map_fit["laplace"].to_dataset()
            divergences = 0
        if classes:
            if em_fit is not None:
                item_prob["em"] = em_fit["item_class_prob"].values[0, 0]
            item_prob["map"] = posterior_of(map_fit)["item_class_prob"].values[0, 0]
            if fit == "nuts":
                item_prob["nuts"] = post["item_class_prob"].mean(("chain", "draw")).values
    tie_rng = np.random.default_rng(tie_seed)
    if not classes:  # the hidden true values: the simulated ones, and their draws
        values = {**values, TRUE_VALUE: item_truth}
        post = true_value_draws(post, posterior_of(map_fit), tie_rng)
    truth, rank, cover50, cover90, rhat, em90 = [], [], [], [], [], []
    for name in names:
        arr = post[name].values
        arr = arr.reshape(-1, *arr.shape[2:])  # (sample, ...)
        for axis, dim in enumerate(dims[name]):
            if dim in order:
                arr = arr.take(order[dim], axis=axis + 1)
        true = np.asarray(values[name], dtype=float)
        truth.append(true.ravel())
        rank.append(_ranks(arr, true, n_ranks, tie_rng).ravel())
        lo50, hi50, lo90, hi90 = np.quantile(arr, [0.25, 0.75, 0.05, 0.95], axis=0)
        cover50.append(((lo50 <= true) & (true <= hi50)).ravel())
        cover90.append(((lo90 <= true) & (true <= hi90)).ravel())
        if fit == "nuts":
            rhat.append(_max_rhat(post[name].values))
        em90.append(_em_covered(em_table, name, dims[name], true))
    items = order[D.ITEM]
    return {"truth": np.concatenate(truth), "rank": np.concatenate(rank),
            "covered_50": np.concatenate(cover50), "covered_90": np.concatenate(cover90),
            "em_covered_90": np.concatenate(em90),
            "item_prob": {m: p[items] for m, p in item_prob.items()},
            "item_truth": item_truth.astype(np.int64) if classes else np.full(len(items), -1),
            "max_rhat": float(max(rhat)) if rhat else float("nan"),
            "divergences": divergences,
            "n_warnings": sum(issubclass(w.category, UserWarning) for w in caught),
            "seconds": time.perf_counter() - t0}


def _em_covered(table, name: str, dims, true: np.ndarray) -> np.ndarray:
    """Whether the 90% interval the report gives an EM fit (from its conjugate
    approximations) covers each true value of an annotator measure: 1 or 0, NaN
    where the report gives none."""
    missing = np.full(true.size, np.nan)
    if table is None or tuple(dims) != (D.ANNOTATOR,) or f"{name}_lower" not in table:
        return missing
    rows = table.reindex([f"annotator_{j}" for j in range(true.size)])
    lower, upper = rows[f"{name}_lower"].to_numpy(float), rows[f"{name}_upper"].to_numpy(float)
    return np.where(np.isnan(lower), np.nan, ((lower <= true) & (true <= upper)).astype(float))


def _max_rhat(values: np.ndarray) -> float:
    """The largest rank-normalised split r-hat over a (chain, draw, ...) array's entries."""
    from arviz_stats.base import array_stats

    flat = values.reshape(values.shape[0], values.shape[1], -1)
    with warnings.catch_warnings():  # an entry without spread (a fixed cut point) has none
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(np.nanmax(array_stats.rhat(flat, chain_axis=0, draw_axis=1)))


def parameters(family: str, variant=None, design=None) -> pd.DataFrame:
    """The scalar parameters :func:`sbc` ranks, in its order: one row each, with
    its ``variable`` and whether it belongs to an item (``per_item``: the
    uniformity test pools a variable's items).

    Examples
    --------
    >>> from crowd_models import validation
    >>> validation.parameters("two_coin").head()
    """
    variant, case = find_case(family, variant)
    design = check_design(design, case)
    names, dims, shapes, _ = _prior(family, variant, tuple(sorted(design.items())))
    rows = []
    for name in names:
        for index in np.ndindex(*shapes[name]):
            label = name + (f"[{','.join(map(str, index))}]" if index else "")
            rows.append({"parameter": label, "variable": name,
                         "per_item": D.ITEM in dims[name]})
    return pd.DataFrame(rows).set_index("parameter")


# ------------------------------------------------------------ fan-out
def _client(client):
    """(Dask client or None for serial, whether this call started it)."""
    if client is False:
        return None, False
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        if client is None:
            return None, False
        raise ImportError("a Dask client needs dask[distributed]: pip install "
                          "'crowd_models[distributed]' (or client=False to run serially)."
                          ) from None
    if client is None:
        cluster = LocalCluster(n_workers=os.cpu_count() or 1, threads_per_worker=1,
                               processes=True, dashboard_address=None)
        return Client(cluster), True
    if isinstance(client, str):
        return Client(client), True
    if isinstance(client, Client):
        return client, False
    raise TypeError(f"client must be None, False, a scheduler address or a "
                    f"distributed.Client, got {type(client).__name__}.")


def _progress(done: int, total: int, failed: int, t0: float, quiet: bool) -> None:
    """One line, rewritten in place on a terminal; a line per tenth otherwise."""
    tty = sys.stderr.isatty()
    if quiet or not (tty or done == total or done % max(1, total // 10) == 0):
        return
    print(f"{chr(13) if tty else ''}sbc: {done}/{total} replications ({failed} failed), "
          f"{time.perf_counter() - t0:.0f} s", end="\n" if done == total or not tty else "",
          file=sys.stderr, flush=True)


def _run_all(task_args, seeds, client, progressbar: bool) -> list:
    """Every replication's dict, or the text of its error, in seed order."""
    t0 = time.perf_counter()
    results = [None] * len(seeds)
    failed = 0
    if client is None:
        for s, seed in enumerate(seeds):
            try:
                results[s] = replicate(*task_args, seed)
            except Exception as err:  # recorded, never dropped
                results[s] = f"{type(err).__name__}: {err}"
                failed += 1
            _progress(s + 1, len(seeds), failed, t0, not progressbar)
        return results
    from distributed import as_completed

    futures = {client.submit(replicate, *task_args, seed, key=f"sbc-{s}-{seed.entropy}-"
                             f"{'-'.join(map(str, seed.spawn_key))}", retries=1, pure=False): s
               for s, seed in enumerate(seeds)}
    for done, future in enumerate(as_completed(futures), start=1):
        s = futures[future]
        try:
            results[s] = future.result()
        except Exception as err:
            results[s] = f"{type(err).__name__}: {err}"
            failed += 1
        _progress(done, len(seeds), failed, t0, not progressbar)
    return results


def sbc(family: str, design: dict | None = None, *, n_sims: int = 200, fit: str = "nuts",
        variant=None, client=None, seed=0, nuts: dict | None = None, n_ranks: int = 99,
        fit_priors: dict | None = None, progressbar: bool = True) -> xr.Dataset:
    """Simulation-based calibration of a family's fit (see the module docstring).

    Parameters
    ----------
    family : str
        A family's name, e.g. ``"two_coin"`` (:data:`CASES`).
    design : dict, optional
        The simulated tables' ``n_items``, ``n_annotators``, ``labels_per_item``
        and ``n_classes`` (default :data:`DESIGN_DEFAULTS`), and ``n_features``
        for a case with features (default 2).
    n_sims : int, optional
        Number of replications.
    fit : {"nuts", "map"}, optional
        ``"nuts"`` (the posterior) or ``"map"`` (the Laplace approximation).
    variant : str, optional
        The family's variant (default: the first in :data:`CASES`).
    client : None, False, str or distributed.Client, optional
        None (a LocalCluster when Dask is installed, else serial), False
        (serial), a scheduler address or a ``distributed.Client``.
    seed : int, optional
        Seed of the replications' ``SeedSequence``.
    nuts : dict, optional
        Keywords of :func:`crowd_models.sample` (default :data:`NUTS_DEFAULTS`).
    n_ranks : int, optional
        Posterior draws each true value is ranked among (ranks 0 to n_ranks).
    fit_priors : dict, optional
        Prior keywords of the family's ``build_model`` (and EM) given to the fit
        only, while the parameters still come from the default priors: a
        deliberate mismatch, which a working check rejects.
    progressbar : bool, optional
        Print the count of finished replications.

    Returns
    -------
    xarray.Dataset
        Over ``sim`` and ``parameter`` (:func:`parameters`): ``truth``,
        ``rank``, ``covered_50``, ``covered_90`` and ``em_covered_90`` (the EM
        report's intervals, NaN where it gives none); over ``sim``, ``item`` and
        ``true_class``: ``item_prob`` (per ``method``: em, map, nuts) and
        ``item_truth``; over ``sim``: ``status`` ("ok" or the error),
        ``max_rhat``, ``divergences``, ``n_warnings``, ``seconds``. ``attrs``:
        the settings, ``n_ran``, ``n_failed``, ``workers`` and ``seconds``.

    Examples
    --------
    >>> from crowd_models import validation
    >>> result = validation.sbc("two_coin", n_sims=20, fit="map", client=False)
    >>> validation.rank_tests(result)
    """
    variant, case = find_case(family, variant)
    design = check_design(design, case)
    if fit not in FITS:
        raise ValueError(f"fit must be one of {FITS}, got {fit!r}.")
    if fit == "map" and not case["laplace"]:
        why = ("its lasso MAP sets coefficients to exactly zero, where the Laplace "
               "approximation has no curvature" if case["em"] else
               "it has no EM and its MAP is not a posterior summary")
        raise ValueError(f"{' '.join(filter(None, (family, variant)))} has no Laplace SBC: "
                         f"{why}; use fit='nuts'.")
    if not (isinstance(n_sims, int | np.integer) and n_sims >= 1):
        raise ValueError(f"n_sims must be a positive integer, got {n_sims!r}.")
    if not (isinstance(n_ranks, int | np.integer) and n_ranks >= RANK_BINS - 1
            and (n_ranks + 1) % RANK_BINS == 0):
        raise ValueError(f"n_ranks + 1 must be a positive multiple of {RANK_BINS} (the "
                         f"uniformity test's bins), got n_ranks={n_ranks!r}.")
    if nuts is not None and not isinstance(nuts, dict):
        raise TypeError(f"nuts must be a dict of crowd_models.sample keywords, got "
                        f"{type(nuts).__name__}.")
    if nuts and fit != "nuts":
        raise ValueError("nuts= sets the NUTS fits; fit='map' draws from the Laplace "
                         "approximation instead.")
    nuts = {**NUTS_DEFAULTS, **(nuts or {})}
    for key in ("random_seed", "cores", "progressbar", "start"):
        if key in nuts:
            raise ValueError(f"nuts= cannot set {key!r}: sbc sets it for each replication.")
    if fit_priors is not None:
        defaults = import_module(f"crowd_models.models.{family}").DEFAULT_PRIORS
        if not isinstance(fit_priors, dict) or set(fit_priors) - set(defaults):
            raise ValueError(f"fit_priors must be a dict of {family}'s prior keywords "
                             f"({listing(list(defaults))}), got {fit_priors!r}.")
    table = parameters(family, variant, design)
    seeds = np.random.SeedSequence(seed).spawn(int(n_sims))
    t0 = time.perf_counter()
    dask_client, started = _client(client)
    try:
        workers = len(dask_client.scheduler_info()["workers"]) if dask_client else 0
        results = _run_all((family, variant, design, fit, nuts, int(n_ranks), fit_priors),
                           seeds, dask_client, progressbar)
    finally:
        if started:
            cluster = dask_client.cluster
            dask_client.close()
            if cluster is not None:
                cluster.close()
    return _dataset(results, table, design, attrs={
        "family": family, "variant": variant or "", "fit": fit, "design": json.dumps(design),
        "nuts": json.dumps(nuts) if fit == "nuts" else "", "seed": str(seed),
        "fit_priors": json.dumps(fit_priors) if fit_priors else "",
        "n_sims": int(n_sims), "n_ranks": int(n_ranks), "workers": workers,
        "seconds": time.perf_counter() - t0})


def _dataset(results: list, table: pd.DataFrame, design: dict, attrs: dict) -> xr.Dataset:
    n_sims, n_par = len(results), len(table)
    n, k = design["n_items"], design["n_classes"]
    ok = [isinstance(r, dict) for r in results]
    methods = [m for m in ("em", "map", "nuts")
               if any(isinstance(r, dict) and m in r["item_prob"] for r in results)]
    arrays = {name: np.full((n_sims, n_par), np.nan) for name in ("truth", "rank",
                                                                  "em_covered_90")}
    covered = {name: np.zeros((n_sims, n_par), dtype=bool) for name in ("covered_50",
                                                                          "covered_90")}
    item_prob = np.full((n_sims, len(methods), n, k), np.nan)
    item_truth = np.full((n_sims, n), -1, dtype=np.int64)
    per_sim = {name: np.full(n_sims, np.nan) for name in ("max_rhat", "divergences",
                                                          "n_warnings", "seconds")}
    for s, r in enumerate(results):
        if not ok[s]:
            continue
        for name in arrays:
            arrays[name][s] = r[name]
        for name in covered:
            covered[name][s] = r[name]
        for m, method in enumerate(methods):
            if method in r["item_prob"]:
                item_prob[s, m] = r["item_prob"][method]
        item_truth[s] = r["item_truth"]
        for name in per_sim:
            per_sim[name][s] = r[name]
    status = np.array(["ok" if good else r for good, r in zip(ok, results, strict=True)],
                      dtype=object)
    parameter = {"parameter": np.asarray(table.index, dtype=object),
                 "variable": ("parameter", np.asarray(table["variable"], dtype=object)),
                 "per_item": ("parameter", table["per_item"].to_numpy(bool))}
    ds = xr.Dataset(
        {**{name: (("sim", "parameter"), a) for name, a in arrays.items()},
         **{name: (("sim", "parameter"), a) for name, a in covered.items()},
         "item_prob": (("sim", "method", D.ITEM, D.TRUE_CLASS), item_prob),
         "item_truth": (("sim", D.ITEM), item_truth),
         "status": (("sim",), status),
         **{name: (("sim",), a) for name, a in per_sim.items()}},
        coords={"sim": np.arange(n_sims), "method": np.asarray(methods, dtype=object),
                **parameter})
    ds.attrs.update(attrs, n_ran=int(sum(ok)), n_failed=int(n_sims - sum(ok)))
    if sum(ok) < n_sims:
        warn(f"{n_sims - sum(ok)} of {n_sims} SBC replications failed (status holds each "
             f"error); the tests use the {sum(ok)} that ran.")
    return ds


__all__ = ["CASES", "DESIGN_DEFAULTS", "FITS", "NUTS_DEFAULTS", "RANK_BINS",
           "available_fits", "item_calibration", "parameters", "plot_calibration",
           "plot_ranks", "rank_tests", "replicate", "sbc"]
