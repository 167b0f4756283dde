"""The cases of the calibration study, read from the families' registry
(``models._registry``: each record's ``sbc`` cases): for each family and
variant it checks, the keywords it is built with, which fits summarise its
posterior, its label kind and features; and the hooks that simulate a table
from prior draws (the case's table function on the family's module), fold a
mirrored truth and draw continuous labels' true values (see
:mod:`crowd_models.validation`, which runs them).
"""

from __future__ import annotations

from importlib import import_module

import numpy as np
import xarray as xr

from crowd_models import _dims as D
from crowd_models._text import listing
from crowd_models.data import Annotations
from crowd_models.models import _registry

DESIGN_DEFAULTS = {"n_items": 60, "n_annotators": 6, "labels_per_item": 3, "n_classes": 2}
"""The small design of the study (``design=`` overrides any of these keys)."""


TRUE_VALUE = "true_value"


_LABELS = {"binary": "binary", "categorical": "classes", "ordered": "classes",
           "continuous": "continuous"}
"""The study's label kinds ("binary", "classes", "continuous") by a record's ``labels``."""


def _row(record, case) -> dict:
    """One case: ``options`` (keywords of build_model and em), ``em`` (the family
    has an EM), ``laplace`` (its MAP plus Laplace summarises the posterior:
    ``fit="map"``), ``labels`` ("binary", "classes" or "continuous"),
    ``features`` (the design's default number of features), and the registry's
    ``record`` and ``case``."""
    return {"options": dict(case.options), "em": record.has_em,
            "laplace": record.has_em if case.laplace is None else case.laplace,
            "labels": _LABELS[record.labels], "features": case.features,
            "record": record, "case": case}


def all_cases():
    """(family, variant) -> its case (:func:`_row`), from the registry's records."""
    return {key: _row(record, case) for key, (record, case) in _registry.sbc_cases().items()}


def find_case(family: str, variant):
    cases = all_cases()
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


_DESIGN_KEYS = (*DESIGN_DEFAULTS, "n_features")


def check_design(design, case: dict) -> dict:
    """The design with its defaults (``n_features``: the case's), checked."""
    if design is None:
        design = {}
    if not isinstance(design, dict):
        raise TypeError(f"design must be a dict of {listing(list(_DESIGN_KEYS))}, got "
                        f"{type(design).__name__}.")
    unknown = set(design) - set(_DESIGN_KEYS)
    if unknown:
        raise ValueError(f"design has unknown key(s) {listing(sorted(unknown))}; it takes "
                         f"{listing(list(_DESIGN_KEYS))}.")
    design = {**DESIGN_DEFAULTS, "n_features": case["features"], **design}
    least = {"labels_per_item": 1, "n_features": 1 if case["features"] else 0}
    for key, value in design.items():
        if not (isinstance(value, int | np.integer) and value >= least.get(key, 2)):
            raise ValueError(f"design[{key!r}] must be an integer of at least "
                             f"{least.get(key, 2)}, got {value!r}.")
    if design["labels_per_item"] > design["n_annotators"]:
        raise ValueError(f"design['labels_per_item'] = {design['labels_per_item']} exceeds "
                         f"design['n_annotators'] = {design['n_annotators']}.")
    if case["labels"] == "binary" and design["n_classes"] != 2:
        raise ValueError(f"this family has binary labels only; design['n_classes'] is "
                         f"{design['n_classes']}.")
    if design["n_features"] and not case["features"]:
        raise ValueError(f"this case has no features; design['n_features'] is "
                         f"{design['n_features']} (a case with features: "
                         f"{listing([c for c, row in all_cases().items() if row['features']])}).")
    return {key: int(value) for key, value in design.items()}


def _features(design: dict):
    """The design's fixed features (the same in every replication: SBC holds the
    covariates fixed): standard normal, from a seed of their own."""
    if not design["n_features"]:
        return None
    rng = np.random.default_rng([design["n_items"], design["n_features"]])
    return rng.standard_normal((design["n_items"], design["n_features"]))


# ------------------------------------------------------------ simulation
def simulate_table(family: str, variant, values: dict, design: dict, rng) -> Annotations:
    """A label table from parameter values drawn from the prior (simulation order),
    by the case's table function on the family's module."""
    case = find_case(family, variant)[1]
    module = import_module(case["record"].module_name)
    return case["case"].table(module, values, design, _features(design), rng)


def template_table(family: str, variant, design: dict) -> Annotations:
    """A table of the design (every class and annotator present) to build the prior on."""
    j, k = design["n_annotators"], design["n_classes"]
    values = {"sensitivity": np.full(j, 0.9), "specificity": np.full(j, 0.9),
              "prevalence": np.full(k, 1 / k), "confusion": np.tile(np.eye(k) * 0.8 + 0.2 / k,
                                                                    (j, 1, 1)),
              "trustworthiness": np.full(j, 0.9), "spam_share": np.full((j, k), 1 / k),
              "ability": np.full(j, 2.0), "bias": np.zeros(j),
              "difficulty": np.zeros(design["n_items"]),
              "easiness": np.ones(design["n_items"]), "noise": np.full(j, 0.5),
              "level_spacing": np.full(k - 1, 1 / (k - 1)),
              "coef": np.zeros(design["n_features"]), "intercept": 0.0,
              "accuracy_intercept": np.full(j, 2.0),
              "accuracy_coef": np.zeros(design["n_features"]), "precision": np.full(j, 4.0),
              "truth_precision": 1.0}
    values.update(find_case(family, variant)[1]["case"].template)
    return simulate_table(family, variant, values, design, np.random.default_rng(0))


def true_value_draws(post: xr.Dataset, map_post: xr.Dataset, rng) -> xr.Dataset:
    """``post`` with draws of each item's true value: per posterior draw, one from
    the Gaussian of its conditional mean and sd given that draw's parameters
    (exact for Gaussian noise; for Student-t noise, its moments' Gaussian). The
    Laplace draws keep no item variables, so a MAP fit's come from the plug-in
    Gaussian at the MAP, the item table's interval for MAP fits."""
    source = post if TRUE_VALUE in post else map_post
    mean, sd = source[TRUE_VALUE].values, source["true_value_sd"].values
    shape = (post.sizes[D.CHAIN], post.sizes[D.DRAW], mean.shape[-1])
    draws = mean + sd * rng.standard_normal(shape)
    return post.assign({TRUE_VALUE: ((D.CHAIN, D.DRAW, D.ITEM), draws)})


def fold_truth(module, values: dict, names, dims, ann: Annotations, item_truth):
    """The true parameters (and classes) in the mode the fit was folded to.

    The feature-dependent accuracy model's posterior is symmetric under the
    sign flip (module docstring of ``feature_accuracy``), and ``align_signs``
    keeps the mode whose classifier agrees with majority vote: a rule of the
    data alone. Folding the truth by the same rule (here: ``align_signs`` on a
    one-draw fit holding the truth, items' class probabilities 1/2, so that
    only the classifier decides) keeps SBC exact: given the data, the folded
    truth is distributed as the folded posterior.
    """
    post = xr.Dataset({name: ((D.CHAIN, D.DRAW, *dims[name]),
                              np.asarray(values[name], dtype=float)[None, None])
                       for name in names},
                      coords={D.CHAIN: [0], D.DRAW: [0]})
    post["item_class_prob"] = ((D.CHAIN, D.DRAW, D.ITEM, D.TRUE_CLASS),
                               np.full((1, 1, ann.n_items, 2), 0.5))
    aligned = module.align_signs(xr.DataTree.from_dict({"posterior": post}), ann)
    if not aligned.attrs["flipped_chains"]:
        return values, item_truth
    flipped = aligned["posterior"].to_dataset()
    return ({**values, **{name: flipped[name].values[0, 0] for name in names}},
            1 - item_truth)
