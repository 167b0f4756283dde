"""fit_map and sample: starts, warnings and argument errors."""

import numpy as np
import pytest
import xarray as xr

import crowd_models as cm
from crowd_models._fits import posterior_of
from crowd_models.models import two_coin


def test_fit_map_from_em_start_stays_put(sim_plain, plain_model):
    em_fit = two_coin.em(sim_plain)
    fit = cm.fit_map(plain_model, start=em_fit)
    for name in ("sensitivity", "specificity", "prevalence"):
        np.testing.assert_allclose(fit.posterior[name].values, em_fit[name].values, atol=1e-7)
    assert fit.constant_data["n_labels"].sum() == sim_plain.n_annotations


def test_fit_map_from_a_dict_start(sim_plain, plain_model):
    em_fit = two_coin.em(sim_plain)
    start = {"sensitivity": np.full(5, 0.7), "specificity": np.full(5, 0.7),
             "prevalence": 0.5}
    fit = cm.fit_map(plain_model, start=start)
    np.testing.assert_allclose(fit.posterior["sensitivity"].values,
                               em_fit["sensitivity"].values, atol=1e-6)


def test_fit_map_warns_when_stopped_short(plain_model):
    with pytest.warns(UserWarning, match="stopped without converging") as caught:
        stalled = cm.fit_map(plain_model, maxiter=2)
    assert {w.filename for w in caught if "converging" in str(w.message)} == {__file__}
    assert stalled.attrs["converged"] == 0
    assert cm.fit_map(plain_model).attrs["converged"] == 1


def test_bad_arguments(plain_model):
    with pytest.raises(TypeError, match="expects a pymc Model"):
        cm.fit_map("model")
    with pytest.raises(TypeError, match="expects a pymc Model"):
        cm.sample(None)
    with pytest.raises(ValueError, match="unknown variables \\['sens'\\]"):
        cm.fit_map(plain_model, start={"sens": 0.5})
    with pytest.raises(TypeError, match="start must be None"):
        cm.fit_map(plain_model, start=[0.5])
    with pytest.raises(ValueError, match="start='mode'"):
        cm.sample(plain_model, start="mode")
    with pytest.raises(TypeError, match="expected a fit"):
        posterior_of(np.zeros(3))
    with pytest.raises(ValueError, match="no posterior group"):
        posterior_of(xr.DataTree())


def test_start_on_the_boundary_is_moved_inside(sim_plain, plain_model):
    # a flat-prior EM fit can hold exact 0 and 1, where logit is infinite
    em_fit = two_coin.em(sim_plain)
    start = {"sensitivity": np.ones(5), "specificity": np.zeros(5) + 0.9, "prevalence": 0.0}
    fit = cm.fit_map(plain_model, start=start)
    np.testing.assert_allclose(fit.posterior["sensitivity"].values,
                               em_fit["sensitivity"].values, atol=1e-6)
    assert fit.attrs["max_gradient"] < 1e-3
