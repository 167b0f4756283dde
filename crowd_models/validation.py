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

Families (``family``, ``variant``): two_coin; dawid_skene full, one_coin,
pooled (at the fixed spread 1, the reference of the empirical-Bayes spread:
a spread chosen from the data is not a prior) and hierarchical (NUTS only);
spammer; item_difficulty fixed, hierarchical (NUTS only) and irt (binary
labels); ordinal latent. The cumulative ordinal model is not a generative
model of the labels (its likelihood is a composite of K - 1 binary ones), so
its posterior has no SBC. simuk, the ArviZ ecosystem's SBC package, draws the
data with PyMC's prior predictive of the observed variable; the families
observe each item's marginal likelihood (a ``CustomDist`` without a random
draw, the hidden class summed out), so the labels come from the family's own
``simulate`` here instead.
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

DESIGN_DEFAULTS = {"n_items": 60, "n_annotators": 6, "labels_per_item": 3, "n_classes": 2}
"""The small design of the study (``design=`` overrides any of these keys)."""

NUTS_DEFAULTS = {"draws": 500, "tune": 500, "chains": 2}
"""The NUTS settings of ``fit="nuts"`` (``nuts=`` overrides them)."""

FITS = ("nuts", "map")


def _cases():
    """(family, variant) -> (build/em keywords, EM exists, binary only)."""
    return {
        ("two_coin", None): ({}, True, True),
        ("dawid_skene", "full"): ({"variant": "full"}, True, False),
        ("dawid_skene", "one_coin"): ({"variant": "one_coin"}, True, False),
        ("dawid_skene", "pooled"): ({"variant": "pooled", "spread": 1.0}, True, False),
        ("dawid_skene", "hierarchical"): ({"variant": "hierarchical"}, False, False),
        ("spammer", None): ({}, True, False),
        ("item_difficulty", "fixed"): ({"variant": "fixed"}, True, False),
        ("item_difficulty", "hierarchical"): ({"variant": "hierarchical"}, False, False),
        ("item_difficulty", "irt"): ({"variant": "irt"}, True, True),
        ("ordinal", "latent"): ({"variant": "latent"}, False, False),
    }


CASES = tuple(_cases())
"""The (family, variant) pairs :func:`sbc` takes (variant None: the family has one)."""


def _case(family: str, variant):
    cases = _cases()
    if not isinstance(family, str):
        raise TypeError(f"family must be a family's name (a str such as 'two_coin'), got "
                        f"{type(family).__name__}: ship the name, not the module.")
    variants = [v for f, v in cases if f == family]
    if not variants:
        raise ValueError(f"sbc has no simulator for family {family!r}; choose among "
                         f"{listing(sorted({f for f, _ in cases}))}.")
    if variant is None and None not in variants:
        variant = variants[0]
    if (family, variant) not in cases:
        raise ValueError(f"family {family!r} has no SBC variant {variant!r}; choose among "
                         f"{listing(variants)}.")
    return variant, cases[family, variant]


def available_fits(family: str, variant=None) -> tuple[str, ...]:
    """The ``fit`` values :func:`sbc` takes for a family and variant: ``"nuts"``,
    and ``"map"`` where the family has an EM (a MAP that summarises its posterior).

    Example
    -------
    >>> from crowd_models import validation
    >>> validation.available_fits("dawid_skene", "hierarchical")
    """
    has_em = _case(family, variant)[1][1]
    return FITS if has_em else ("nuts",)


def _check_design(design, binary: bool) -> dict:
    if design is None:
        design = {}
    if not isinstance(design, dict):
        raise TypeError(f"design must be a dict of {listing(list(DESIGN_DEFAULTS))}, got "
                        f"{type(design).__name__}.")
    unknown = set(design) - set(DESIGN_DEFAULTS)
    if unknown:
        raise ValueError(f"design has unknown key(s) {listing(sorted(unknown))}; it takes "
                         f"{listing(list(DESIGN_DEFAULTS))}.")
    design = {**DESIGN_DEFAULTS, **design}
    for key, value in design.items():
        if not (isinstance(value, int | np.integer) and value >= (2 if key != "labels_per_item"
                                                                  else 1)):
            raise ValueError(f"design[{key!r}] must be an integer of at least "
                             f"{2 if key != 'labels_per_item' else 1}, got {value!r}.")
    if design["labels_per_item"] > design["n_annotators"]:
        raise ValueError(f"design['labels_per_item'] = {design['labels_per_item']} exceeds "
                         f"design['n_annotators'] = {design['n_annotators']}.")
    if binary and design["n_classes"] != 2:
        raise ValueError(f"this family has binary labels only; design['n_classes'] is "
                         f"{design['n_classes']}.")
    return {key: int(value) for key, value in design.items()}


# ------------------------------------------------------------ simulation
def _simulate(family: str, variant, values: dict, design: dict, rng) -> Annotations:
    """A label table from parameter values drawn from the prior (simulation order)."""
    module = import_module(f"crowd_models.models.{family}")
    n, k, per = design["n_items"], design["n_classes"], design["labels_per_item"]
    if family == "two_coin":
        return module.simulate(values["sensitivity"], values["specificity"], n_items=n,
                               prevalence=float(values["prevalence"]), labels_per_item=per,
                               rng=rng)
    if family == "dawid_skene":
        return module.simulate(values["confusion"], n_items=n, prevalence=values["prevalence"],
                               labels_per_item=per, rng=rng)
    if family == "spammer":
        return module.simulate(values["trustworthiness"], n_items=n,
                               spam_share=values["spam_share"], n_classes=k,
                               prevalence=values["prevalence"], labels_per_item=per, rng=rng)
    if family == "item_difficulty" and variant == "irt":
        return module.simulate_irt(values["ability"], values["bias"], values["difficulty"],
                                   values["easiness"], prevalence=float(values["prevalence"][1]),
                                   labels_per_item=per, rng=rng)
    if family == "item_difficulty":
        return module.simulate(values["ability"], values["easiness"], n_classes=k,
                               prevalence=values["prevalence"], labels_per_item=per, rng=rng)
    if family == "ordinal":
        return module.simulate(variant="latent", n_items=n, n_classes=k, bias=values["bias"],
                               noise=values["noise"], level_spacing=values["level_spacing"],
                               prevalence=values["prevalence"], labels_per_item=per, rng=rng)
    raise AssertionError(family)


def _template(family: str, variant, design: dict) -> Annotations:
    """A table of the design (every class and annotator present) to build the prior on."""
    j, k = design["n_annotators"], design["n_classes"]
    values = {"sensitivity": np.full(j, 0.9), "specificity": np.full(j, 0.9),
              "prevalence": np.full(k, 1 / k), "confusion": np.tile(np.eye(k) * 0.8 + 0.2 / k,
                                                                    (j, 1, 1)),
              "trustworthiness": np.full(j, 0.9), "spam_share": np.full((j, k), 1 / k),
              "ability": np.full(j, 2.0), "bias": np.zeros(j),
              "difficulty": np.zeros(design["n_items"]),
              "easiness": np.ones(design["n_items"]), "noise": np.full(j, 0.5),
              "level_spacing": np.full(k - 1, 1 / (k - 1))}
    if family == "two_coin":
        values["prevalence"] = 0.5
    return _simulate(family, variant, values, design, np.random.default_rng(0))


@functools.lru_cache(maxsize=16)
def _prior(family: str, variant, design_items: tuple):
    """The model of the design, with the names, dims and draw function of the
    parameters whose ranks are recorded (cached per process: a worker builds it
    once)."""
    import pymc as pm

    design = dict(design_items)
    options = _case(family, variant)[1][0]
    module = import_module(f"crowd_models.models.{family}")
    model = module.build_model(_template(family, variant, design), **options)
    dims = {v.name: model.named_vars_to_dims.get(v.name, ())
            for v in model.free_RVs + model.deterministics}
    # the free parameters, and the derived ones that are not per item (a per-item
    # deterministic, such as the easiness, transforms a per-item free parameter)
    names = [v.name for v in model.free_RVs] + [
        v.name for v in model.deterministics if D.ITEM not in dims[v.name]]

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

    Example
    -------
    >>> from crowd_models import validation
    >>> out = validation.replicate("two_coin", None, validation.DESIGN_DEFAULTS, "map",
    ...                            {}, 99, None, 0)
    >>> out["rank"][:3]
    """
    t0 = time.perf_counter()
    options, has_em, _ = _case(family, variant)[1]
    options = {**options, **(fit_priors or {})}
    module = import_module(f"crowd_models.models.{family}")
    if not isinstance(seed, np.random.SeedSequence):
        seed = np.random.SeedSequence(seed)
    prior_seed, data_seed, fit_seed, tie_seed = seed.spawn(4)
    names, dims, _, draw = _prior(family, variant, tuple(sorted(design.items())))
    values = draw(np.random.default_rng(prior_seed))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        ann = _simulate(family, variant, values, design, np.random.default_rng(data_seed))
        order = _order(ann, dims, design["n_annotators"], design["n_items"])
        model = module.build_model(ann, **options)
        item_prob = {}
        em_fit = em_table = None
        if has_em:
            em_fit = module.em(ann, **options)
            item_prob["em"] = em_fit["item_class_prob"].values[0, 0]
            em_table = annotator_summary(em_fit, ci_prob=0.9)
        fit_seed = int(np.random.default_rng(fit_seed).integers(2**31))
        # started at the EM's fixed point, the MAP does not run the EM a second time
        map_fit = fit_map(model, start=em_fit, laplace=fit == "map", random_seed=fit_seed)
        item_prob["map"] = posterior_of(map_fit)["item_class_prob"].values[0, 0]
        if fit == "nuts":
            idata = sample(model, progressbar=False, random_seed=fit_seed, cores=1,
                           start=map_fit, **nuts)
            post = idata["posterior"].to_dataset()
            item_prob["nuts"] = post["item_class_prob"].mean(("chain", "draw")).values
            stats_ = idata["sample_stats"]
            divergences = int(stats_["diverging"].sum()) if "diverging" in stats_ else 0
        else:
            post = map_fit["laplace"].to_dataset()
            divergences = 0
    tie_rng = np.random.default_rng(tie_seed)
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
            "item_truth": np.asarray(ann.gold)[items],
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

    Example
    -------
    >>> from crowd_models import validation
    >>> validation.parameters("two_coin").head()
    """
    variant, (_, _, binary) = _case(family, variant)
    design = _check_design(design, binary)
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
    family : a family's name, e.g. ``"two_coin"`` (:data:`CASES`).
    design : the simulated tables' ``n_items``, ``n_annotators``,
        ``labels_per_item`` and ``n_classes`` (default :data:`DESIGN_DEFAULTS`).
    n_sims : number of replications.
    fit : ``"nuts"`` (the posterior) or ``"map"`` (the Laplace approximation).
    variant : the family's variant (default: the first in :data:`CASES`).
    client : None (a LocalCluster when Dask is installed, else serial), False
        (serial), a scheduler address or a ``distributed.Client``.
    seed : seed of the replications' ``SeedSequence``.
    nuts : keywords of :func:`crowd_models.sample` (default :data:`NUTS_DEFAULTS`).
    n_ranks : posterior draws each true value is ranked among (ranks 0 to n_ranks).
    fit_priors : prior keywords of the family's ``build_model`` (and EM) given to
        the fit only, while the parameters still come from the default priors:
        a deliberate mismatch, which a working check rejects.
    progressbar : print the count of finished replications.

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

    Example
    -------
    >>> from crowd_models import validation
    >>> result = validation.sbc("two_coin", n_sims=20, fit="map", client=False)
    >>> validation.rank_tests(result)
    """
    variant, (_, has_em, binary) = _case(family, variant)
    design = _check_design(design, binary)
    if fit not in FITS:
        raise ValueError(f"fit must be one of {FITS}, got {fit!r}.")
    if fit == "map" and not has_em:
        raise ValueError(f"{family} {variant} has no EM and its MAP is not a posterior "
                         f"summary (the spread collapses at the mode); use fit='nuts'.")
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
