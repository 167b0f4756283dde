"""Simulation-based calibration: the ranks of a calibrated fit pass, a wrong
posterior fails, the seed fixes the ranks serially and on Dask, and bad input
is refused."""

import warnings

import numpy as np
import pytest

from crowd_models import _sbc_cases, validation


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
    with pytest.raises(ValueError, match="no curvature.*fit='nuts'"):
        validation.sbc("feature_accuracy", fit="map", n_sims=2)
    with pytest.raises(ValueError, match="has no features.*two_coin.*features"):
        validation.sbc("two_coin", {"n_features": 2}, n_sims=2)
    with pytest.raises(ValueError, match="n_features.*at least 1"):
        validation.sbc("two_coin", {"n_features": 0}, variant="features", n_sims=2)
    with pytest.raises(ValueError, match="n_ranks \\+ 1 must be"):
        validation.sbc("two_coin", n_sims=2, n_ranks=50)
    with pytest.raises(ValueError, match="cannot set 'random_seed'"):
        validation.sbc("two_coin", n_sims=2, nuts={"random_seed": 1})
    with pytest.raises(TypeError, match="client must be"):
        validation.sbc("two_coin", n_sims=2, fit="map", client=3)


def test_continuous_labels_rank_the_hidden_true_values():
    """Continuous labels: the hidden true values are ranked like a per-item
    parameter, against the simulated ones; the design's class count plays no part."""
    design = validation.DESIGN_DEFAULTS
    table = validation.parameters("continuous", "bias")
    assert table.loc["true_value[0]", "per_item"] and not table.loc["bias[0]", "per_item"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = validation.replicate("continuous", "bias", design, "map", {}, 99, None, 2)
    values = dict(zip(table.index, out["truth"], strict=True))
    # drawn from the prior: positive precisions, biases that sum to zero
    assert min(values[f"precision[{j}]"] for j in range(6)) > 0
    assert abs(sum(values[f"bias[{j}]"] for j in range(6))) < 1e-9
    assert out["item_prob"] == {} and (out["item_truth"] == -1).all()
    true_values = out["truth"][table["variable"].eq("true_value").to_numpy()]
    assert len(true_values) == 60 and np.std(true_values) > 0
    # the plug-in intervals at the MAP cover most of the true values
    item = table["variable"].eq("true_value").to_numpy()
    assert out["covered_90"][item].mean() > 0.7


def test_the_mirrored_truth_folds_to_the_same_mode():
    """The feature-dependent accuracy model's truth and its sign-flipped mirror
    (the same likelihood) fold to the same parameters, with the classes swapped
    accordingly, by the rule align_signs applies to the fit."""
    from crowd_models.baselines import majority_vote
    from crowd_models.models import feature_accuracy

    design = _sbc_cases.check_design({}, _sbc_cases.find_case("feature_accuracy", None)[1])
    names, dims, _, draw = validation._prior("feature_accuracy", None,
                                             tuple(sorted(design.items())))
    values = draw(np.random.default_rng(4))
    ann = _sbc_cases.simulate_table("feature_accuracy", None, values, design,
                               np.random.default_rng(5))
    gold = np.asarray(ann.gold)
    swap = {"coef_pos": "coef_neg", "coef_neg": "coef_pos",
            "accuracy_coef_pos": "accuracy_coef_neg", "accuracy_coef_neg": "accuracy_coef_pos"}
    mirrored = {name: (values[swap[name]] if name in swap else -np.asarray(values[name]))
                for name in names}
    one, truth_one = _sbc_cases.fold_truth(feature_accuracy, values, names, dims, ann, gold)
    two, truth_two = _sbc_cases.fold_truth(feature_accuracy, mirrored, names, dims, ann,
                                            1 - gold)
    for name in names:
        np.testing.assert_allclose(one[name], two[name], err_msg=name)
    np.testing.assert_array_equal(truth_one, truth_two)
    # the folded classifier agrees with majority vote at least as well as its mirror
    eta = ann.features @ np.asarray(one["coef"]) + one["intercept"]
    vote = majority_vote(ann).values[:, 1]
    assert np.mean((eta > 0) == (vote > 0.5)) >= 0.5


def test_the_ecdf_band_holds_a_whole_uniform_ecdf_at_its_stated_rate():
    """Uniform ranks (known truth): the simultaneous band holds the whole ECDF in
    about ``band`` of fresh rank sets, and it is wider than the pointwise band,
    which a whole ECDF leaves far more often."""
    from scipy import stats

    from crowd_models import calibration

    n, n_ranks, band = 300, 100, 0.9
    z, lower, upper = calibration.ecdf_band(n, n_ranks, band)
    rng = np.random.default_rng(7)
    ranks = rng.integers(0, n_ranks, (2000, n))
    ecdf = np.stack([np.searchsorted(np.sort(r), np.arange(n_ranks + 1)) / n for r in ranks])
    inside = np.all((ecdf >= lower) & (ecdf <= upper), axis=1).mean()
    assert abs(inside - band) < 0.03, inside
    pointwise = stats.binom.ppf([0.05, 0.95], n, 0.5) / n
    assert lower[50] < pointwise[0] and upper[50] > pointwise[1]
    pw_lower, pw_upper = stats.binom.ppf(0.05, n, z) / n, stats.binom.isf(0.05, n, z) / n
    assert np.all((ecdf >= pw_lower) & (ecdf <= pw_upper), axis=1).mean() < 0.5


def test_the_community_case_ranks_what_the_communities_order_does_not_name():
    """The community model's communities are exchangeable: its case ranks each
    annotator's confusion and the prevalence, not the community-indexed
    variables, and its table is drawn from each annotator's drawn confusion."""
    table = validation.parameters("community")
    assert set(table["variable"]) == {"confusion_logit", "confusion", "prevalence"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = validation.replicate("community", None, validation.DESIGN_DEFAULTS, "map", {},
                                   99, None, 3)
    assert len(out["rank"]) == len(table) and ((out["rank"] >= 0) & (out["rank"] <= 99)).all()
    confusion = out["truth"][table["variable"].to_numpy() == "confusion"].reshape(6, 2, 2)
    np.testing.assert_allclose(confusion.sum(axis=2), 1.0)
    # the confusion is the softmax of the logits drawn with it
    logits = out["truth"][table["variable"].to_numpy() == "confusion_logit"].reshape(6, 2, 2)
    np.testing.assert_allclose(confusion, np.exp(logits) / np.exp(logits).sum(-1, keepdims=True))
    np.testing.assert_allclose(out["item_prob"]["em"], out["item_prob"]["map"], atol=1e-3)
