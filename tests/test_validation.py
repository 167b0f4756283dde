"""Simulation-based calibration: the ranks of a calibrated fit pass, a wrong
posterior fails, the seed fixes the ranks serially and on Dask, and bad input
is refused."""

import warnings

import numpy as np
import pytest

from crowd_models import validation


@pytest.fixture(scope="module")
def two_coin_map():
    """30 replications of two-coin by MAP plus Laplace on the small design."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return validation.sbc("two_coin", n_sims=30, fit="map", client=False,
                              progressbar=False, seed=11)


def test_ranks_come_from_the_prior_draws_and_the_fit():
    """One replication by hand: the recorded truth is the prior draw that
    simulated the table, and its rank counts the thinned draws below it."""
    design = validation.DESIGN_DEFAULTS
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = validation.replicate("two_coin", None, design, "map", {}, 99, None, 5)
        again = validation.replicate("two_coin", None, design, "map", {}, 99, None, 5)
    table = validation.parameters("two_coin")
    assert len(out["rank"]) == len(table) == 13
    np.testing.assert_array_equal(out["rank"], again["rank"])
    assert ((out["rank"] >= 0) & (out["rank"] <= 99)).all()
    # the truth is a draw of the model's prior: Beta(3, 2) sensitivities in (0, 1)
    assert ((out["truth"] > 0) & (out["truth"] < 1)).all()
    assert out["item_prob"]["em"].shape == (60, 2)
    np.testing.assert_allclose(out["item_prob"]["em"], out["item_prob"]["map"], atol=1e-4)
    # ties are broken at random: a value below every draw has rank 0, above every draw 99
    draws = np.arange(200.0)[:, None]
    rng = np.random.default_rng(0)
    np.testing.assert_array_equal(validation._ranks(draws, np.array([-1.0, 500.0]), 99, rng),
                                  [0, 99])
    assert validation._ranks(np.zeros((200, 1)), np.zeros(1), 99, rng)[0] in range(100)


def test_a_calibrated_fit_passes_and_reports_coverage(two_coin_map):
    tests = validation.rank_tests(two_coin_map)
    assert two_coin_map.attrs["n_ran"] == 30 and two_coin_map.attrs["n_failed"] == 0
    assert (two_coin_map["status"] == "ok").all()
    assert not tests["rejected"].any(), tests
    assert tests.attrs["threshold"] == pytest.approx(0.01 / 13)
    # the Laplace intervals cover roughly as stated (30 replications: loose bounds)
    assert 0.75 <= tests["coverage_90"].mean() <= 0.97, tests
    # the EM report's conjugate (Beta) intervals exist for the annotators' rates only
    assert tests["em_coverage_90"].drop("prevalence").between(0.5, 1).all(), tests
    assert np.isnan(tests.loc["prevalence", "em_coverage_90"])
    calibration = validation.item_calibration(two_coin_map)
    assert set(calibration["method"]) == {"em", "map"}
    assert 0 < calibration.attrs["brier"]["map"] < 0.5


def test_a_wrong_posterior_is_rejected(two_coin_map):
    """Ranks of a posterior that is too narrow pile up at the ends; ranks that
    ignore the data are fine only if the prior is right, so shift them too."""
    wrong = two_coin_map.copy(deep=True)
    rng = np.random.default_rng(1)
    # a posterior twice too narrow around the right centre: ranks pushed outwards
    centred = wrong["rank"].values - 49.5
    wrong["rank"].values[:] = np.clip(np.round(49.5 + 2 * centred + rng.normal(0, 1,
                                                                           centred.shape)),
                                      0, 99)
    assert validation.rank_tests(wrong)["rejected"].any()


@pytest.mark.slow
def test_a_fit_with_the_wrong_prior_is_rejected():
    """The check fails on a real fit: parameters drawn from the default Beta(3, 2)
    priors, fitted with Beta(30, 20) (the same mean, a tenth of the spread), whose
    posteriors are far too narrow."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        result = validation.sbc("two_coin", n_sims=30, fit="map", client=False,
                                progressbar=False, seed=11,
                                fit_priors={"sensitivity_prior": (30.0, 20.0),
                                            "specificity_prior": (30.0, 20.0)})
    tests = validation.rank_tests(result)
    assert tests["rejected"].sum() >= 3, tests
    assert tests["coverage_90"].mean() < 0.75, tests
    assert result.attrs["fit_priors"]


def test_the_same_seed_gives_the_same_ranks_serially_and_on_dask():
    distributed = pytest.importorskip(
        "distributed", reason="the Dask fan-out needs the crowd_models[distributed] extra")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        serial = validation.sbc("two_coin", n_sims=6, fit="map", client=False,
                                progressbar=False, seed=3)
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1,
                                      dashboard_address=None) as cluster, \
                distributed.Client(cluster) as client:
            fanned = validation.sbc("two_coin", n_sims=6, fit="map", client=client,
                                    progressbar=False, seed=3)
    assert fanned.attrs["workers"] == 2 and serial.attrs["workers"] == 0
    np.testing.assert_array_equal(serial["rank"].values, fanned["rank"].values)
    np.testing.assert_array_equal(serial["truth"].values, fanned["truth"].values)


def test_a_failed_replication_is_recorded_not_dropped(monkeypatch):
    real = validation.replicate

    def flaky(*args):
        if args[-1].spawn_key == (1,):
            raise RuntimeError("worker lost")
        return real(*args)

    monkeypatch.setattr(validation, "replicate", flaky)
    with pytest.warns(UserWarning, match="1 of 3 SBC replications failed"):
        result = validation.sbc("two_coin", n_sims=3, fit="map", client=False,
                                progressbar=False)
    assert list(result["status"].values) == ["ok", "RuntimeError: worker lost", "ok"]
    assert result.attrs["n_ran"] == 2 and result.attrs["n_failed"] == 1
    assert np.isnan(result["rank"].values[1]).all()
    assert validation.rank_tests(result)["n"].eq(2).all()


def test_bad_input():
    with pytest.raises(ValueError, match="no simulator for family 'glad'"):
        validation.sbc("glad", n_sims=2)
    with pytest.raises(TypeError, match="ship the name, not the module"):
        from crowd_models.models import two_coin
        validation.sbc(two_coin, n_sims=2)
    with pytest.raises(ValueError, match="no SBC variant 'cumulative'"):
        validation.sbc("ordinal", variant="cumulative", n_sims=2)
    with pytest.raises(ValueError, match="binary labels only"):
        validation.sbc("two_coin", {"n_classes": 3}, n_sims=2)
    with pytest.raises(ValueError, match="unknown key.*'items'"):
        validation.sbc("two_coin", {"items": 30}, n_sims=2)
    with pytest.raises(ValueError, match="exceeds"):
        validation.sbc("two_coin", {"labels_per_item": 9}, n_sims=2)
    with pytest.raises(ValueError, match="fit must be one of"):
        validation.sbc("two_coin", fit="vi", n_sims=2)
    with pytest.raises(ValueError, match="has no EM.*fit='nuts'"):
        validation.sbc("dawid_skene", variant="hierarchical", fit="map", n_sims=2)
    with pytest.raises(ValueError, match="n_ranks \\+ 1 must be"):
        validation.sbc("two_coin", n_sims=2, n_ranks=50)
    with pytest.raises(ValueError, match="cannot set 'random_seed'"):
        validation.sbc("two_coin", n_sims=2, nuts={"random_seed": 1})
    with pytest.raises(TypeError, match="client must be"):
        validation.sbc("two_coin", n_sims=2, fit="map", client=3)
