"""fit_map against the family's EM on bundled real data, where the posterior has
several modes, and the convergence criterion on a large data set."""

import json
import warnings

import numpy as np
import pytest

import crowd_models as cm
from crowd_models.models import dawid_skene as ds
from crowd_models.models import two_coin


@pytest.fixture(scope="module")
def web():
    return cm.datasets.load_web_search()


def test_web_search_modes_are_reported_and_the_higher_returned(web):
    model = ds.build_model(web)
    alone = cm.fit_map(model, compare_em=False)
    em_fit = ds.em(web)
    alone_lp, em_lp = alone.attrs["log_posterior"], em_fit.attrs["log_posterior"]
    # both are modes: the optimiser converged, and EM is a fixed point
    assert alone.attrs["max_gradient"] < 1e-6 * web.n_items
    assert em_fit.attrs["converged"] == 1
    # on this set (177 annotators, 5 levels) they are different modes from the
    # same majority-vote start; the EM's is higher
    assert em_lp > alone_lp + 1e-3
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = cm.fit_map(model)
    messages = [str(w.message) for w in caught]
    assert any("several modes" in m and f"{em_lp:.6f}" in m for m in messages), messages
    assert {w.filename for w in caught if "several modes" in str(w.message)} == {__file__}
    assert fit.attrs["optimum"] == "em"
    np.testing.assert_allclose(fit.attrs["em_log_posterior"], em_lp, rtol=1e-12)
    np.testing.assert_allclose(fit.attrs["log_posterior"], em_lp, rtol=1e-10)
    for name in ("confusion", "prevalence"):
        diff = np.abs(fit.posterior[name].values - em_fit[name].values).max()
        assert diff <= 1e-5, (name, diff)
    stages = json.loads(fit.attrs["stages"])
    assert [s.get("start", "majority vote") for s in stages][-1] == "em"


def test_agreeing_modes_give_no_warning(rte):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = cm.fit_map(two_coin.build_model(rte))
    assert fit.attrs["optimum"] == "map"
    np.testing.assert_allclose(fit.attrs["log_posterior"], fit.attrs["em_log_posterior"],
                               rtol=1e-10)


def test_no_convergence_warning_on_a_large_data_set(plain_model):
    # the log posterior's gradient grows with the number of items: L-BFGS stops here
    # with entries near 2e-4 (at 10^6 labels above 1e-3, the old absolute limit),
    # while the fit agrees with EM to 1e-6; the criterion is per observed item
    rng = np.random.default_rng(11)
    sens, spec = rng.uniform(0.6, 0.9, 40), rng.uniform(0.6, 0.9, 40)
    big = two_coin.simulate(sens, spec, n_items=60_000, labels_per_item=4, prevalence=0.3,
                            rng=rng)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = cm.fit_map(two_coin.build_model(big))
    em_fit = two_coin.em(big)
    assert np.abs(fit.posterior["sensitivity"].values - em_fit["sensitivity"].values).max() < 1e-6
