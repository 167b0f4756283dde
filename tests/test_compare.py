"""``selection.compare``: LOO comparison only of fits whose likelihoods are
densities of the same data."""

import numpy as np
import pytest
import xarray as xr

import crowd_models as cm
from crowd_models import selection
from crowd_models.models import two_coin

from .conftest import RADIOLOGISTS


@pytest.fixture(scope="module")
def small():
    return two_coin.simulate(**RADIOLOGISTS, n_items=60, prevalence=0.4,
                             rng=np.random.default_rng(12))


@pytest.fixture(scope="module")
def nuts_pair(small):
    """Two NUTS fits of one small data set, two-coin under two priors: one
    model structure, so one compile."""
    kwargs = dict(draws=150, tune=150, chains=2, random_seed=3, progressbar=False)
    return {"weak": cm.sample(two_coin.build_model(small), **kwargs),
            "sharp": cm.sample(two_coin.build_model(
                small, sensitivity_prior=(40, 10), specificity_prior=(40, 10)), **kwargs)}


def test_compare_ranks_fits_of_the_same_labels(nuts_pair):
    import arviz as az

    table = selection.compare(nuts_pair)
    assert set(table.index) == {"weak", "sharp"}
    expected = az.compare(dict(nuts_pair))
    np.testing.assert_allclose(table.loc[expected.index, "elpd"], expected["elpd"])


def _fake(kind, n_items=5, labels=None):
    """A DataTree shaped like a sample() fit of the given likelihood kind."""
    rng = np.random.default_rng(0)
    cd = {"chain": [0, 1], "draw": np.arange(20)}
    post = {"a": (("chain", "draw"), rng.normal(size=(2, 20)))}
    coords = dict(cd)
    if kind != "continuous":
        coords["true_class"] = [0, 1]
        post["item_class_prob"] = (("chain", "draw", "item", "true_class"),
                                   np.full((2, 20, n_items, 2), 0.5))
        coords["item"] = np.arange(n_items)
    if kind == "composite":
        coords["threshold"] = ["1", "2"]
        post["sensitivity"] = (("chain", "draw", "threshold"), np.full((2, 20, 2), 0.8))
    groups = {
        "posterior": xr.Dataset(post, coords=coords),
        "log_likelihood": xr.Dataset(
            {"item_labels": (("chain", "draw", "item"), rng.normal(-2, 0.1, (2, 20, n_items)))},
            coords={**cd, "item": np.arange(n_items)}),
        "observed_data": xr.Dataset(
            {"item_labels": ("item", np.full(n_items, 3) if labels is None else labels)},
            coords={"item": np.arange(n_items)}),
    }
    if kind == "features":
        groups["constant_data"] = xr.Dataset({"row_features": (("annotation", "feature"),
                                                               np.zeros((3, 2)))})
    tree = xr.DataTree.from_dict(groups)
    tree.attrs.update(family=FAMILY_OF_KIND[kind][0], variant=FAMILY_OF_KIND[kind][1])
    return tree


FAMILY_OF_KIND = {"categorical": ("dawid_skene", "full"), "continuous": ("continuous", "gaussian"),
                  "composite": ("ordinal", "cumulative"), "features": ("stacked_gaussian", "")}
"""The (family, variant) a fit of each likelihood kind records, as sample copies it."""


@pytest.mark.parametrize("other, text", [
    ("continuous", "the real-valued labels"),
    ("composite", "is not a likelihood of the labels"),
    ("features", "the items' features given the labels"),
])
def test_compare_refuses_likelihoods_of_different_things(other, text):
    with pytest.raises(ValueError, match=f"densities of different things.*{text}"):
        selection.compare({"a": _fake("categorical"), "b": _fake(other)})


def test_compare_refuses_fits_of_different_data():
    with pytest.raises(ValueError, match="not fitted to the same items and labels"):
        selection.compare({"a": _fake("categorical"),
                           "b": _fake("categorical", labels=np.array([3, 3, 3, 3, 2]))})
    with pytest.raises(ValueError, match="not fitted to the same items and labels"):
        selection.compare({"a": _fake("categorical"), "b": _fake("categorical", n_items=6)})


@pytest.mark.filterwarnings("ignore:Estimated shape parameter of Pareto")
def test_compare_warns_on_composite_likelihoods():
    with pytest.warns(UserWarning, match="not predictive scores of the labels"):
        table = selection.compare({"a": _fake("composite"), "b": _fake("composite")})
    assert len(table) == 2


def test_compare_argument_errors(small):
    with pytest.raises(TypeError, match="a mapping of name -> fit"):
        selection.compare([_fake("categorical"), _fake("categorical")])
    with pytest.raises(ValueError, match="at least two fits, got 1"):
        selection.compare({"a": _fake("categorical")})
    em_fit = two_coin.em(small)
    with pytest.raises(TypeError, match="is a Dataset; compare needs the DataTree"):
        selection.compare({"a": _fake("categorical"), "em": em_fit})
    no_ll = _fake("categorical")
    del no_ll["log_likelihood"]
    with pytest.raises(ValueError, match="has no 'log_likelihood' group"):
        selection.compare({"a": _fake("categorical"), "b": no_ll})
