"""Choosing a family without gold: compare_models and auto_fit on data whose
generating family is known, and their errors."""

import dataclasses
import warnings

import numpy as np
import pandas as pd
import pytest

import crowd_models as cm
from crowd_models import auto
from crowd_models.models import item_difficulty, ordinal, spammer, two_coin


@pytest.fixture(scope="module")
def spam_crowd():
    """Three classes, 3 of 10 annotators spammers (two of them always say "c")."""
    rng = np.random.default_rng(21)
    trust = np.r_[rng.uniform(0.5, 0.9, 7), 0.0, 0.0, 0.05]
    share = np.r_[rng.dirichlet(np.ones(3) * 3, size=7), [[0.05, 0.05, 0.9]] * 2, [[1 / 3] * 3]]
    return spammer.simulate(trust, spam_share=share, n_items=400, labels_per_item=5,
                            classes=["a", "b", "c"], rng=rng)


@pytest.fixture(scope="module")
def hard_items():
    """Binary labels whose items range from trivial to pure guesswork."""
    rng = np.random.default_rng(22)
    easiness = np.exp(rng.normal(0, 1.5, 300))
    return item_difficulty.simulate([3.0, 2.5, 2.0, 1.5, 1.0, 1.0, 0.5], easiness, rng=rng)


def _accuracy(fit, ann):
    prob = fit["item_class_prob"].values[0, 0]
    return float(np.mean(prob.argmax(axis=1) == ann.gold))


@pytest.mark.parametrize("data, family", [("spam_crowd", "spammer"),
                                          ("hard_items", "item_difficulty")])
def test_auto_fit_finds_the_generating_family(data, family, request):
    ann = request.getfixturevalue(data)
    blind = dataclasses.replace(ann, gold=None, truth=None)  # gold is never read
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fit = cm.auto_fit(blind, method="em", n_splits=3)
        table = cm.compare_models(ann, n_splits=3)
        accuracies = {name: _accuracy(auto.family_of(name)[0].em(ann, **auto.family_of(name)[1]),
                                      ann) for name in table.index}
    assert fit.attrs["model"] == family, table
    # auto_fit scores only the candidates its rule chooses among, on the same splits:
    # their scores with and without gold and with and without the others are equal
    # (reproducible from its seed, gold unread), and so is the choice
    ranking = pd.DataFrame(fit.attrs["ranking"]).set_index("candidate")
    assert list(ranking.index) == [n for n in table.index if n in auto.SHARING]
    assert set(ranking.index) == set(auto.scored_candidates(blind)) == set(table.index[
        table["eligible"]])
    np.testing.assert_allclose(ranking["score"], table.loc[ranking.index, "score"], rtol=1e-12)
    assert auto.choose(table) == family
    assert _accuracy(fit, ann) >= max(accuracies.values()) - 0.005, accuracies


@pytest.fixture(scope="module")
def biased_crowd():
    """8 accurate annotators and 12 who say "1" 80% of the time whatever the truth."""
    rng = np.random.default_rng(0)
    sens = np.r_[rng.uniform(0.7, 0.85, 8), np.full(12, 0.8)]
    spec = np.r_[rng.uniform(0.7, 0.85, 8), np.full(12, 0.2)]
    return two_coin.simulate(sensitivity=sens, specificity=spec, n_items=600, prevalence=0.3,
                             labels_per_item=5, rng=rng)


def test_auto_fit_does_not_choose_by_label_prediction_alone(biased_crowd):
    ann = biased_crowd
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fit = cm.auto_fit(dataclasses.replace(ann, gold=None, truth=None), method="em")
        table = cm.compare_models(ann)
        accuracies = {name: _accuracy(auto.family_of(name)[0].em(ann, **auto.family_of(name)[1]),
                                      ann) for name in table.index}
    assert fit.attrs["criterion"] == "sharing"
    # the best held-out score is the one-coin model's, whose truth is mostly wrong
    # (0.27): the biased annotators' labels dictate it
    by_prediction = table["score"].idxmax()
    assert accuracies[by_prediction] < max(accuracies.values()) - 0.3, (table, accuracies)
    assert fit.attrs["model"] != by_prediction
    # the spammer model (0.822), 0.015 below the pooled model's truth here: the pooled
    # model is not eligible since its rows collapse on sparse crowds of spammers
    assert _accuracy(fit, ann) >= max(accuracies.values()) - 0.02, accuracies
    # and the old rule (the simplest within 2 paired standard errors) fails too
    old = cm.compare_models(ann, criterion="heldout")
    assert old.attrs["criterion"] == "heldout" and old["eligible"].all()
    assert accuracies[auto.choose(old)] < max(accuracies.values()) - 0.3


def test_choose_by_sharing_takes_the_best_eligible_score():
    table = pd.DataFrame({"score": [-1.00, -1.01, -1.02], "dse": [0.0, 0.01, 0.02],
                          "params_per_annotator": [1, 12, 4],
                          "eligible": [False, True, True]},
                         index=["one_coin", "pooled", "spammer"])
    table.attrs["criterion"] = "sharing"
    assert auto.choose(table) == "pooled"
    # without a candidate of SHARING, compare_models falls back to the old rule
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        only = cm.compare_models(cm.datasets.load_rte(), candidates=["one_coin", "two_coin"],
                                 n_splits=1)
    assert only.attrs["criterion"] == "heldout" and only["eligible"].all()


def test_choose_prefers_the_simpler_of_close_scores():
    table = pd.DataFrame({"score": [-1.00, -1.01, -1.30], "dse": [0.0, 0.01, 0.02],
                          "params_per_annotator": [12, 4, 1]},
                         index=["dawid_skene", "spammer", "one_coin"])
    assert auto.choose(table) == "spammer"
    assert auto.choose(table, tolerance=0.5) == "dawid_skene"


def test_the_irt_candidate_is_compared_on_request(hard_items, spam_crowd):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        default = cm.compare_models(hard_items, n_splits=1)
        named = cm.compare_models(hard_items, candidates=["irt", "pooled"], n_splits=1)
    assert "irt" not in default.index and "two_coin" in default.index
    assert set(named.index) == {"irt", "pooled"} and named["eligible"].to_dict() == {
        "irt": True, "pooled": False}
    # the same split as the default's: pooled's score is unchanged
    assert named.loc["pooled", "score"] == pytest.approx(default.loc["pooled", "score"])
    with pytest.raises(ValueError, match="irt candidate needs two classes"):
        cm.compare_models(spam_crowd, candidates=["irt"])
    from crowd_models.cli._commands import _AUTO_MODELS

    assert set(_AUTO_MODELS) == set(auto.CANDIDATES)


def test_ordered_levels_add_the_latent_ordinal_candidate():
    """Levels 1..4 rated on a latent scale by annotators with biases of +-1.2: with
    ordered=True the ordinal candidate (fitted by MAP in each split) is compared,
    chosen without gold, and its truth is the best of all candidates'."""
    rng = np.random.default_rng(23)
    ann = ordinal.simulate(variant="latent", bias=np.r_[rng.normal(0, 0.3, 6), 1.2, 1.2,
                                                          -1.2, -1.2],
                           noise=rng.uniform(0.2, 0.6, 10), n_classes=4, n_items=300,
                           labels_per_item=5, rng=rng)
    blind = dataclasses.replace(ann, gold=None, truth=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fit = cm.auto_fit(blind, ordered=True, n_splits=2)
        names = [row["candidate"] for row in fit.attrs["ranking"]]
        accuracy = {name: _accuracy(auto.point_fit(name, ann), ann) for name in names}
        unordered = cm.compare_models(ann, n_splits=1)
        with pytest.raises(ValueError, match="has no EM; call auto_fit with method='map'"):
            cm.auto_fit(blind, ordered=True, n_splits=1, method="em")
    assert fit.attrs["model"] == "ordinal", fit.attrs["ranking"]
    assert set(names) == set(unordered.index[unordered["eligible"]]) | {"ordinal"}
    assert _accuracy(fit["posterior"], ann) >= max(accuracy.values()) - 0.005, accuracy
    with pytest.raises(TypeError, match="ordered must be True or False"):
        cm.compare_models(ann, ordered="yes")


def test_holdout_keeps_a_label_of_every_item_and_annotator():
    ann = cm.datasets.load_web_search()
    hidden = auto._holdout_rows(ann, 0.2, np.random.default_rng(0))
    keep = np.ones(ann.n_annotations, dtype=bool)
    keep[hidden] = False
    assert np.all(np.bincount(ann.item_idx[keep], minlength=ann.n_items) >= 1)
    assert np.all(np.bincount(ann.annotator_idx[keep], minlength=ann.n_annotators) >= 1)
    assert abs(len(hidden) - 0.2 * ann.n_annotations) <= 1


def test_bad_input(spam_crowd):
    with pytest.raises(ValueError, match="unknown candidate.*'glad'"):
        cm.compare_models(spam_crowd, candidates=["glad"])
    with pytest.raises(ValueError, match="two_coin candidate needs two classes"):
        cm.compare_models(spam_crowd, candidates=["two_coin"])
    with pytest.raises(ValueError, match="ordinal candidate needs integer levels"):
        cm.compare_models(spam_crowd, ordered=True)
    with pytest.raises(ValueError, match="criterion='waic' is not one of"):
        cm.compare_models(spam_crowd, criterion="waic")
    with pytest.raises(ValueError, match="fraction= and n_splits=.*nuts= instead"):
        cm.compare_models(spam_crowd, criterion="loo", n_splits=2)
    with pytest.raises(ValueError, match="takes nuts= but not .*fraction"):
        cm.auto_fit(spam_crowd, criterion="loo", fraction=0.2)
    with pytest.raises(ValueError, match="nuts= sets the NUTS fits"):
        cm.compare_models(spam_crowd, nuts={"draws": 100})
    with pytest.raises(TypeError, match="nuts must be a dict"):
        cm.compare_models(spam_crowd, criterion="loo", nuts=100)
    with pytest.raises(ValueError, match="cannot set random_seed"):
        cm.compare_models(spam_crowd, criterion="loo", nuts={"random_seed": 1})
    with pytest.raises(ValueError, match="continuous"):
        cm.auto_fit(cm.datasets.load_affect("anger"))
    with pytest.raises(ValueError, match="without a classifier"):
        cm.auto_fit(spam_crowd.with_features(np.ones((spam_crowd.n_items, 1))))
    with pytest.raises(ValueError, match="fraction must be in"):
        cm.compare_models(spam_crowd, fraction=0.9)
    with pytest.raises(ValueError, match="method must be 'map', 'em' or 'nuts'"):
        cm.auto_fit(spam_crowd, method="laplace")
    one_each = cm.Annotations.from_frame(pd.DataFrame(
        {"item": [1, 1, 2, 2], "annotator": ["u", "v", "w", "x"], "label": [0, 1, 0, 1]}))
    with pytest.raises(ValueError, match="single label|one label"):
        cm.compare_models(one_each)


@pytest.mark.slow
def test_loo_criterion_scores_items_by_psis_and_returns_the_fit_it_scored():
    """On a crowd with 30% spammers, PSIS-LOO over items from NUTS prefers the
    spammer model to the one-coin model, its paired standard error agrees with
    ArviZ's own comparison, and auto_fit returns the chosen candidate's NUTS fit."""
    import arviz as az

    rng = np.random.default_rng(5)
    trust = np.r_[rng.uniform(0.6, 0.9, 7), 0.0, 0.0, 0.0]
    share = np.r_[np.full((7, 2), 0.5), [[0.9, 0.1]] * 3]
    ann = spammer.simulate(trust, spam_share=share, n_items=80, labels_per_item=5, rng=rng)
    nuts = {"draws": 300, "tune": 300, "chains": 2}
    names = ["one_coin", "spammer"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fit = cm.auto_fit(ann, candidates=names, criterion="loo", nuts=nuts)
        ours, fits, points = auto._loo_comparison(ann, names, 0, nuts)
    table = pd.DataFrame(fit.attrs["ranking"]).set_index("candidate")
    assert fit.attrs["model"] == "spammer" and fit.attrs["criterion"] == "loo"
    assert fit.attrs["method"] == "nuts" and fit["posterior"].sizes["draw"] == 300
    assert list(table.index) == ["spammer", "one_coin"], table
    assert table.loc["spammer", "score"] - table.loc["one_coin", "score"] > \
        2 * table.loc["one_coin", "dse"], table
    assert (table["n_items"] == 80).all() and (table["p_loo"] > 0).all()
    # the returned fit is the one scored, and the scores repeat from the same seed
    assert az.loo(fit).elpd == pytest.approx(table.loc["spammer", "score"])
    np.testing.assert_allclose(ours["score"], table["score"])
    # the scores and the paired standard error of the difference are ArviZ's
    arviz_table = az.compare(fits, round_to="none")
    assert arviz_table.index[0] == "spammer"
    assert ours.loc["one_coin", "dse"] == pytest.approx(arviz_table.loc["one_coin", "dse"])
    assert ours.loc["one_coin", "score"] - ours.loc["spammer", "score"] == pytest.approx(
        arviz_table.loc["one_coin", "elpd_diff"])
    # the pointwise scores are the items' PSIS-LOO densities, and their stacking
    # weights are ArviZ's (its compare stacks by default)
    np.testing.assert_allclose(points.sum(), ours.loc[points.columns, "score"])
    weights = auto.model_weights(points)
    np.testing.assert_allclose(weights[arviz_table.index], arviz_table["weight"], atol=2e-3)


def _two_class_crowd(n_adversarial: int):
    rng = np.random.default_rng(5)
    accuracy = np.r_[rng.uniform(0.75, 0.9, 6), np.full(n_adversarial, 0.15)]
    return two_coin.simulate(sensitivity=accuracy, specificity=accuracy, n_items=200,
                             labels_per_item=4, rng=rng)


@pytest.mark.parametrize("n_adversarial", [0, 2])
def test_split_fits_warn_once_by_candidate(n_adversarial):
    """The split fits' trust warnings are collected: one UserWarning naming each
    candidate whose split fits warned and how many, the counts in the table and the
    messages in its attrs; a crowd without adversarial annotators gets none."""
    ann = _two_class_crowd(n_adversarial)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = cm.compare_models(ann, candidates=["two_coin", "pooled"], n_splits=2)
    shown = [w for w in caught if issubclass(w.category, UserWarning)]
    warned = list(table.index[table["warned_splits"] > 0])
    assert set(table.attrs["split_warnings"]) == set(warned)
    if n_adversarial == 0:
        assert not shown and not warned, [str(w.message) for w in shown]
        return
    assert table.loc["two_coin", "warned_splits"] == 2  # both splits see the adversaries
    assert len(shown) == 1, [str(w.message) for w in shown]
    message = str(shown[0].message)
    for name in warned:
        assert f"{name} ({table.loc[name, 'warned_splits']} of 2)" in message
    assert all("below chance" in m for m in table.attrs["split_warnings"]["two_coin"])


def _mixture_objective(values, weights):
    return np.mean(np.log(np.exp(values) @ weights))


def test_stacking_weights_maximise_the_mixed_score_and_recover_a_mixture():
    """Stacking weights are the simplex point that maximises the mean log of the mixed
    probabilities: checked against every point of a fine grid over the simplex, and
    on points drawn from a known mixture of two densities, where they recover its
    weight."""
    rng = np.random.default_rng(3)
    values = np.log(rng.dirichlet(np.ones(3), size=300))  # three candidates' probabilities
    weights = auto.model_weights(pd.DataFrame(values, columns=list("abc")))
    assert weights.sum() == pytest.approx(1) and (weights >= 0).all()
    step = np.linspace(0, 1, 201)
    grid = np.array([(a, b, 1 - a - b) for a in step for b in step if a + b <= 1 + 1e-12])
    grid = np.clip(grid, 0, 1)
    best = max(_mixture_objective(values, w) for w in grid)
    assert _mixture_objective(values, weights.to_numpy()) >= best - 1e-9
    # min_weight leaves out the candidates below it and renormalises the others
    kept = auto.model_weights(pd.DataFrame(values, columns=list("abc")),
                              min_weight=weights.sort_values().iloc[1])
    np.testing.assert_allclose(kept, weights[kept.index] / weights[kept.index].sum())
    assert len(kept) == 2
    # a mixture 0.3 N(0, 1) + 0.7 N(3, 1): the weight of the first density is found
    x = np.where(rng.random(20000) < 0.3, rng.normal(0, 1, 20000), rng.normal(3, 1, 20000))
    dens = pd.DataFrame({"left": -0.5 * x**2, "right": -0.5 * (x - 3) ** 2}) - 0.5 * np.log(
        2 * np.pi)
    assert auto.model_weights(dens)["left"] == pytest.approx(0.3, abs=0.015)


def test_pseudo_bma_weights_follow_the_summed_scores():
    """pseudo-BMA+: equal scores give equal weights, a clearly better candidate takes
    nearly all, and a small difference gives the bootstrap's softened softmax."""
    rng = np.random.default_rng(4)
    base = np.log(rng.uniform(0.2, 0.9, 400))
    equal = auto.model_weights(pd.DataFrame({"a": base, "b": base}), "pseudo-bma")
    np.testing.assert_allclose(equal, [0.5, 0.5])
    better = auto.model_weights(pd.DataFrame({"a": base, "b": base - 0.1}), "pseudo-bma")
    assert better["a"] > 0.999
    # b gains 1 nat in total on one point: without the bootstrap exp(1) / (1 + exp(1));
    # the bootstrap spreads the total, pulling the weight toward a half
    bump = base.copy()
    bump[0] += 1.0
    close = auto.model_weights(pd.DataFrame({"a": base, "b": bump}), "pseudo-bma", rng=1)
    assert 0.5 < close["b"] < np.exp(1) / (1 + np.exp(1))
    with pytest.raises(ValueError, match="method='bma' is not one of"):
        auto.model_weights(pd.DataFrame({"a": base}), "bma")
    with pytest.raises(ValueError, match="log scores: finite numbers or -inf"):
        auto.model_weights(pd.DataFrame({"a": np.r_[base[1:], np.nan]}))
    with pytest.raises(TypeError, match="a column per candidate"):
        auto.model_weights(base)


def test_auto_fit_averages_the_eligible_candidates(spam_crowd, tmp_path):
    """average="stacking": the weights are model_weights of the eligible candidates'
    (all, with criterion "heldout") held-out scores (those below MIN_WEIGHT left
    out), the posterior is the weighted mean of their EMs' item posteriors, the
    annotator table is each component's own, and the fit survives save_fit /
    open_fit."""
    ann = spam_crowd
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fit = cm.auto_fit(ann, method="em", average="stacking", criterion="heldout")
        table, points = cm.compare_models(ann, pointwise=True, criterion="heldout")
    eligible = list(table.index[table["eligible"]])
    expected = auto.model_weights(points[eligible])
    expected = expected[expected >= auto.MIN_WEIGHT] / expected[
        expected >= auto.MIN_WEIGHT].sum()
    assert fit.attrs["model"] == "average" and fit.attrs["average"] == "stacking"
    assert fit.attrs["weights"] == pytest.approx(expected.to_dict())
    parts = auto.components(fit)
    assert list(parts) == list(expected.index) and len(parts) >= 2, expected
    mixed = 0
    for name, part in parts.items():
        family, options = auto.family_of(name)
        direct = family.em(ann, **options)
        np.testing.assert_allclose(part["item_class_prob"], direct["item_class_prob"])
        mixed = mixed + expected[name] * direct["item_class_prob"].values[0, 0]
    np.testing.assert_allclose(fit["posterior"]["item_class_prob"].values[0, 0], mixed,
                               rtol=1e-12)
    assert _accuracy(fit["posterior"], ann) >= min(
        _accuracy(part, ann) for part in parts.values())
    summary = cm.report.annotator_summary(fit)
    for name, part in parts.items():
        own = cm.report.annotator_summary(part)
        pd.testing.assert_frame_equal(summary.loc[name, own.columns], own, check_names=False)
        # the weight the fit stored, equal to the one computed here up to rounding
        # (2.8e-17 seen: the stored weights are normalised once more)
        assert np.allclose(summary.loc[name, "component_weight"], expected[name], rtol=1e-12,
                           atol=0)
    items = cm.report.item_table(fit, ann)
    np.testing.assert_allclose(items[[c for c in items.columns if c.startswith("prob_")]],
                               mixed)
    path = tmp_path / "average.nc"
    cm.save_fit(fit, path)
    back = cm.open_fit(path)
    assert back.attrs["weights"] == pytest.approx(fit.attrs["weights"])
    pd.testing.assert_frame_equal(cm.report.annotator_summary(back), summary)
    assert auto.components(two_coin.em(cm.datasets.load_rte())) == {}
    with pytest.raises(ValueError, match="average must be None .* or one of"):
        cm.auto_fit(ann, average="bma")
    with pytest.raises(TypeError, match="pointwise must be True or False"):
        cm.compare_models(ann, pointwise="yes")


def test_save_fit_keeps_the_attributes_of_an_average_components(tmp_path):
    """A component's attributes that netCDF cannot hold (lists, booleans, dicts, as a
    NUTS fit's) are stored as JSON in its own group and read back as they were."""
    import xarray as xr

    part = xr.DataTree.from_dict({"posterior": xr.Dataset({"a": ("x", [1.0, 2.0])})})
    part.attrs.update(chains=[0, 1], flag=True, options={"tune": 500}, method="nuts")
    fit = xr.DataTree.from_dict({"posterior": xr.Dataset({"b": ("y", [0.5])}),
                                 "components/nuts": part})
    fit.attrs["weights"] = {"nuts": 1.0}
    cm.save_fit(fit, tmp_path / "fit.nc")
    back = cm.open_fit(tmp_path / "fit.nc")
    assert back.attrs == {"weights": {"nuts": 1.0}}
    assert auto.components(back)["nuts"].attrs == part.attrs
    assert fit["components/nuts"].attrs == part.attrs  # the fit itself is untouched


def test_the_pooled_model_is_scored_but_not_chosen_on_a_sparse_crowd_of_spammers():
    """460 light annotators, 40% of them spammers with habits of their own: the pooled
    model's rows collapse into a catch-all class (its truth far below majority vote)
    while its held-out score beats the spammer model's, so "sharing" must not choose
    it; the spammer model it takes instead is at majority vote's level."""
    from crowd_models.models import dawid_skene

    ann = dawid_skene.simulate_sparse_crowd(1, n_light=460, heavy=(), spam_share=0.4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        table = cm.compare_models(ann, candidates=["pooled", "spammer"], n_splits=1)
        pooled = dawid_skene.em(ann, variant="pooled")
        fit = cm.auto_fit(ann, candidates=["pooled", "spammer"], n_splits=1, method="em")
    vote = float(np.mean(cm.majority_vote(ann).to_numpy().argmax(axis=1) == ann.gold))
    assert table["score"].idxmax() == "pooled" and not table.loc["pooled", "eligible"]
    assert _accuracy(pooled, ann) < vote - 0.1
    assert fit.attrs["model"] == "spammer" and _accuracy(fit, ann) >= vote - 0.01
