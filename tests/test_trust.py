"""Fits that cannot be trusted say so: a UserWarning naming the cause and the remedy."""

import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import crowd_models as cm
from crowd_models import Annotations, _trust
from crowd_models.models import continuous, dawid_skene, ordinal, two_coin

from .conftest import RADIOLOGISTS


def messages(record):
    return [str(w.message) for w in record if issubclass(w.category, UserWarning)]


def test_one_annotator_is_not_identifiable():
    frame = pd.DataFrame({"item": range(50), "annotator": "only",
                          "label": np.r_[np.zeros(20), np.ones(30)].astype(int)})
    ann = Annotations.from_frame(frame)
    with pytest.warns(UserWarning, match="one annotator, so their quality and the truth"):
        fit = two_coin.em(ann)
    assert fit.attrs["converged"]
    with pytest.warns(UserWarning, match="one annotator"):
        dawid_skene.build_model(ann)


def test_one_label_per_item_is_not_identifiable():
    rng = np.random.default_rng(3)
    sim = two_coin.simulate(**RADIOLOGISTS, n_items=300, labels_per_item=1, rng=rng)
    assert np.bincount(sim.item_idx).max() == 1
    with pytest.warns(UserWarning, match="every item has one label, so annotator quality"):
        two_coin.em(sim)
    values = continuous.simulate(np.full(4, 2.0), n_items=200, labels_per_item=1, rng=rng)
    with pytest.warns(UserWarning, match="every item has one label"):
        continuous.em(values)
    # raised two families deep (cumulative ordinal's EM runs two-coin EMs), the warning
    # still names the caller's line
    levels = ordinal.simulate(variant="cumulative", sensitivity=[[0.9, 0.8]] * 4,
                              specificity=[[0.8, 0.9]] * 4, n_items=200, labels_per_item=1,
                              rng=rng)
    with pytest.warns(UserWarning, match="every item has one label") as caught:
        ordinal.em(levels)
    assert {w.filename for w in caught if "one label" in str(w.message)} == {__file__}
    # two labels on some items: identified, no warning
    sim2 = two_coin.simulate(**RADIOLOGISTS, n_items=300, labels_per_item=2, rng=rng)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        two_coin.em(sim2)
    assert not [m for m in messages(record) if "one label" in m]


@pytest.fixture(scope="module")
def flipped():
    """Seven of ten annotators adversarial (sensitivity = specificity = 0.3): majority
    vote and every fit from it land in the flipped mode."""
    sens = np.r_[np.full(7, 0.3), np.full(3, 0.8)]
    return two_coin.simulate(sens, sens, n_items=400, prevalence=0.4, labels_per_item=5,
                             rng=np.random.default_rng(0))


def test_flipped_consensus_warns_for_em_and_map(flipped):
    with pytest.warns(UserWarning, match=r"from 3 annotator\(s\) that the two-coin EM puts "
                                         r"below chance.*consensus is flipped"):
        fit = two_coin.em(flipped)
    assert cm.report.accuracy(fit, flipped) < 0.2  # it is flipped, and nothing else says so
    with pytest.warns(UserWarning, match="that the MAP puts below chance") as caught:
        cm.fit_map(two_coin.build_model(flipped))
    assert {w.filename for w in caught if "below chance" in str(w.message)} == {__file__}
    with pytest.warns(UserWarning, match="below chance"):
        dawid_skene.em(flipped)
    # the honest version of the same design: no warning
    honest = two_coin.simulate(np.full(10, 0.75), np.full(10, 0.75), n_items=400,
                               prevalence=0.4, labels_per_item=5, rng=np.random.default_rng(0))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        two_coin.em(honest)
    assert not [m for m in messages(record) if "below chance" in m]


def test_chance_gap_is_informedness_for_two_classes():
    # 2 pi (1 - pi) (sensitivity + specificity - 1) for the two-coin parametrisation
    sens, spec, pi = np.array([0.9, 0.3, 0.6]), np.array([0.8, 0.4, 0.4]), 0.3
    post = xr.Dataset({"sensitivity": ("annotator", sens), "specificity": ("annotator", spec),
                       "prevalence": ((), pi)})
    np.testing.assert_allclose(_trust.chance_gaps(post), 2 * pi * (1 - pi) * (sens + spec - 1))
    conf = np.stack([np.stack([spec, 1 - spec], -1), np.stack([1 - sens, sens], -1)], 1)
    as_confusion = xr.Dataset(
        {"confusion": (("annotator", "true_class", "label_class"), conf[:, :, ::-1]),
         "prevalence": ("true_class", [1 - pi, pi])},
        coords={"true_class": [False, True], "label_class": [True, False]})
    np.testing.assert_allclose(_trust.chance_gaps(as_confusion), _trust.chance_gaps(post))


def test_em_that_stops_at_max_iter_warns(sim_plain):
    with pytest.warns(UserWarning, match=r"stopped after 2 iterations without converging.*"
                                         r"Raise max_iter"):
        fit = two_coin.em(sim_plain, max_iter=2)
    assert fit.attrs["converged"] == 0


def test_estimates_on_the_boundary_warn():
    # a perfect annotator and flat priors: EM's sensitivity and specificity are exactly 1
    rng = np.random.default_rng(4)
    sim = two_coin.simulate([1.0, 0.8, 0.7, 0.75], [1.0, 0.85, 0.7, 0.7], n_items=200,
                            prevalence=0.4, rng=rng)
    flat = dict(sensitivity_prior=(1.0, 1.0), specificity_prior=(1.0, 1.0))
    with pytest.warns(UserWarning, match=r"boundary of their support: sensitivity \(1 of 4\)"):
        two_coin.em(sim, **flat)
    with pytest.warns(UserWarning, match=r"MAP sits on the boundary of the support for "
                                         r"sensitivity") as caught:
        cm.fit_map(two_coin.build_model(sim, **flat))
    # the warning names the caller's line, not the library's
    assert {w.filename for w in caught if "boundary" in str(w.message)} == {__file__}
    with warnings.catch_warnings(record=True) as record:  # default priors: interior
        warnings.simplefilter("always")
        two_coin.em(sim)
    assert not [m for m in messages(record) if "boundary" in m]


def test_near_constant_continuous_annotator_warns():
    rng = np.random.default_rng(5)
    sim = continuous.simulate(np.full(5, 1.0), n_items=120, rng=rng)
    frame = sim.to_frame()
    frame.loc[frame["annotator"] == frame["annotator"].iloc[0], "label"] = 0.0
    ann = Annotations.from_frame(frame, continuous=True)
    with pytest.warns(UserWarning, match=r"1 annotator\(s\) give \(nearly\) the same value"):
        continuous.em(ann)


def test_all_chains_switched_blames_the_reference(plain_model, sim_plain):
    fit = two_coin.em(sim_plain)
    # the parameters of the fit, with its labels mirrored: every chain disagrees with it
    prob = fit["item_class_prob"]
    reference = fit.assign(item_class_prob=prob.copy(data=prob.values[..., ::-1]))
    with pytest.warns(UserWarning, match="the reference .* is the likely problem"):
        idata = cm.sample(plain_model, draws=30, tune=30, chains=2, cores=1, random_seed=1,
                          start=reference, progressbar=False, nuts_sampler="pymc")
    assert idata.attrs["label_switched_chains"] == [0, 1]


def test_sample_from_a_dict_start_still_checks_label_switching(plain_model, sim_plain):
    fit = two_coin.em(sim_plain)
    start = {n: fit[n].values[0, 0] for n in ("sensitivity", "specificity", "prevalence")}
    idata = cm.sample(plain_model, draws=30, tune=30, chains=2, cores=1, random_seed=1,
                      start=start, progressbar=False, nuts_sampler="pymc")
    assert idata.attrs["label_switched_chains"] == []


def test_start_outside_the_support_is_refused(plain_model):
    with pytest.raises(ValueError, match=r"start\['sensitivity'\] lies outside the support "
                                         r"of sensitivity, \[0, 1\]: got values from 2 to 2"):
        cm.fit_map(plain_model, start={"sensitivity": np.full(5, 2.0)})
    with pytest.raises(ValueError, match="non-finite"):
        cm.fit_map(plain_model, start={"prevalence": np.nan})
