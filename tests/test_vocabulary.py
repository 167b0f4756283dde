"""ARCHITECTURE.md's vocabulary table is true of the models: every variable of
every family's model (its variants included) has a row for that family, with
the dims the model gives it."""

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from crowd_models.models import (
    community,
    continuous,
    dawid_skene,
    feature_accuracy,
    item_difficulty,
    ordinal,
    spammer,
    stacked_gaussian,
    two_coin,
)

ARCHITECTURE = Path(__file__).resolve().parents[1] / "ARCHITECTURE.md"


def _table() -> list[tuple[set, str, list[tuple]]]:
    """Rows of the vocabulary table: (variable names, family cell, allowed dims)."""
    text = ARCHITECTURE.read_text()
    block = text.split("<!-- vocabulary:start -->")[1].split("<!-- vocabulary:end -->")[0]
    rows = []
    for line in block.strip().splitlines()[2:]:
        names, family, dims, _ = (cell.strip() for cell in line.strip("|").split("|"))
        options = [() if d.strip() == "(scalar)" else tuple(x.strip() for x in d.split(","))
                   for d in dims.split(" or ")]
        rows.append((set(re.findall(r"`([a-z_]+)`", names)), family, options))
    return rows


def _models():
    rng = np.random.default_rng(0)
    rates = dict(sensitivity=[0.9, 0.8, 0.7], specificity=[0.9, 0.8, 0.7])
    binary = two_coin.simulate(**rates, n_items=60, rng=rng)
    with_features = two_coin.simulate(**rates, n_items=60, n_features=2, rng=rng)
    classes = dawid_skene.simulate(np.stack([np.full((3, 3), 0.1) + 0.7 * np.eye(3)] * 3),
                                   n_items=60, rng=rng)
    levels = ordinal.simulate(variant="latent", n_items=60, bias=[0, 0.1, -0.1],
                              noise=[1, 1, 1], n_classes=3, rng=rng)
    levels_features = levels.with_features(rng.normal(size=(levels.n_items, 2)))
    values = continuous.simulate([1.0, 2.0, 4.0], n_items=40, n_features=2, rng=rng)
    experts = feature_accuracy.simulate(n_items=80, n_annotators=3, n_features=3, rng=rng)
    stacked = stacked_gaussian.simulate(n_items=80, rng=rng)
    yield "two_coin", two_coin.build_model(binary)
    yield "two_coin", two_coin.build_model(with_features)
    for variant in ("full", "one_coin", "hierarchical"):
        yield "dawid_skene", dawid_skene.build_model(classes, variant=variant)
    yield "dawid_skene", dawid_skene.build_model(classes, variant="pooled", spread=1.0)
    yield "dawid_skene", dawid_skene.build_model(with_features)
    yield "ordinal", ordinal.build_model(levels)
    yield "ordinal", ordinal.build_model(levels_features)
    yield "ordinal", ordinal.build_model(levels, variant="latent", guessing=True,
                                         annotator_cutpoints=True)
    yield "spammer", spammer.build_model(classes)
    yield "community", community.build_model(classes, n_communities=2)
    for variant in ("fixed", "hierarchical"):
        yield "item_difficulty", item_difficulty.build_model(classes, variant=variant)
    yield "continuous", continuous.build_model(values, bias=True, scale=True)
    yield "continuous", continuous.build_model(values, noise="student_t")
    yield "feature_accuracy", feature_accuracy.build_model(experts)
    yield "feature_accuracy", feature_accuracy.build_model(experts, coef_prior="horseshoe")
    for structure in ("EII", "VII", "EEI", "VEI", "VVI", "EEE", "VVV"):
        yield "stacked_gaussian", stacked_gaussian.build_model(stacked, covariance=structure)


@pytest.fixture(scope="module")
def models():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(_models())


def test_every_model_variable_is_in_the_vocabulary_with_its_dims(models):
    rows = _table()
    assert len(rows) > 40
    checked = 0
    for family, model in models:
        for var in model.free_RVs + model.deterministics + model.observed_RVs:
            dims = tuple(model.named_vars_to_dims.get(var.name) or ())
            matching = [options for names, fam, options in rows
                        if var.name in names and (family in fam or fam == "every family")]
            assert matching, f"{family}: {var.name!r} has no row in ARCHITECTURE.md's vocabulary"
            assert any(dims in options for options in matching), (
                f"{family}: {var.name!r} has dims {dims}; the vocabulary says "
                f"{[o for options in matching for o in options]}")
            checked += 1
    assert checked > 100



def test_shared_names_keep_one_meaning(models):
    """Names the families share mean one thing: ``prevalence`` is the truth's class
    shares (a scalar P(positive), or a vector over true_class), ``coef`` has the
    feature dim first, and every family observes ``item_labels`` per item."""
    seen = {"prevalence": set(), "coef": set(), "item_labels": set()}
    for family, model in models:
        dims = {v.name: tuple(model.named_vars_to_dims.get(v.name) or ())
                for v in model.free_RVs + model.deterministics + model.observed_RVs}
        assert [v.name for v in model.observed_RVs] == ["item_labels"], family
        for name in seen:
            if name in dims:
                seen[name].add((family, dims[name]))
    assert {d for _, d in seen["prevalence"]} == {(), ("true_class",)}
    assert {d[0] for _, d in seen["coef"]} == {"feature"}
    assert len({f for f, _ in seen["coef"]}) == 5  # every family with a classifier
    assert {d for _, d in seen["item_labels"]} == {("item",)}
