"""Stacked Gaussian class-conditional models (Montani & Cappozzo 2025)."""

import re

import numpy as np
import pandas as pd
import pytest
from scipy.stats import multivariate_normal

import crowd_models as cm
from crowd_models.models import stacked_gaussian as sg

from ..conftest import assert_nuts_recovers

# ------------------------------------------------------------------ helpers


def _closed_form(X, y, covariance, G):
    """ML of LDA (EEE: pooled) and QDA (VVV: per class), written out by hand."""
    n, d = X.shape
    means = np.stack([X[y == g].mean(0) for g in range(G)])
    S = [(X[y == g] - means[g]).T @ (X[y == g] - means[g]) for g in range(G)]
    if covariance == "EEE":
        cov = np.stack([sum(S) / n] * G)
    else:
        cov = np.stack([S[g] / (y == g).sum() for g in range(G)])
    return np.bincount(y, minlength=G) / n, means, cov


def _wide(table, features=None, gold=None, classes=None):
    return cm.Annotations.from_wide(pd.DataFrame(table), features=features, gold=gold,
                                    classes=classes)


# The paper's Table 1 worked example of the MV strategy: 5 annotators, scores
# 2, 1, 2, 0, 2 and weights .285/.145/.285/0/.285. The paper's label table was not
# available to us; this table is constructed to give those scores: item 1 has
# majority A (4 of 5), item 2 majority B (3 of 5), item 3 is a tie (A, C) and is
# skipped.
TABLE1 = {
    "a1": ["A", "B", "A"],
    "a2": ["A", "C", "B"],
    "a3": ["A", "B", "C"],
    "a4": ["B", "C", "C"],
    "a5": ["A", "B", "A"],
}


@pytest.fixture(scope="module")
def separated():
    """Three well-separated classes; annotators 0-2 perfect or nearly, 3 noisy."""
    rng = np.random.default_rng(7)
    G, n = 3, 90
    truth = np.repeat(np.arange(G), n // G)
    X = rng.normal(size=(n, 2)) * 0.3 + np.array([[0, 0], [5, 0], [0, 5]])[truth]
    labels = np.stack([truth] * 4, axis=1)
    labels[::10, 1] = (truth[::10] + 1) % G      # 9 errors
    labels[::3, 2] = (truth[::3] + 1) % G        # 30 errors
    labels[::2, 3] = rng.integers(0, G, size=45)  # noisy
    return _wide(labels, features=X, gold=pd.Series(truth)), truth


# ------------------------------------------------------------- strategies


def test_table1_majority_vote_worked_example_exact():
    ann = _wide(TABLE1)
    w = sg.annotator_weights(ann, "MV")
    assert w["scores"].values.tolist() == [2, 1, 2, 0, 2]
    np.testing.assert_allclose(w["weights"].values, np.array([2, 1, 2, 0, 2]) / 7)
    np.testing.assert_allclose(w["weights"].values, [.285, .145, .285, 0, .285], atol=0.0025)
    assert w.attrs["n_items_used"] == 2  # the tied item 3 is skipped


def test_mv_threshold_counts_only_items_with_enough_agreement():
    ann = _wide(TABLE1)
    # threshold 0.8: floor(0.8 * 5) = 4 agreeing labels needed -> only item 1
    w = sg.annotator_weights(ann, "MV", threshold=0.8)
    assert w["scores"].values.tolist() == [1, 1, 1, 0, 1]
    with pytest.raises(ValueError, match="every annotator scored 0"):
        sg.annotator_weights(ann, "MV", threshold=1.0)
    with pytest.raises(ValueError, match="fraction in"):
        sg.annotator_weights(ann, "MV", threshold=1.5)


def test_equal_and_expert_novice_weights():
    ann = _wide(TABLE1)
    np.testing.assert_allclose(sg.annotator_weights(ann, "E")["weights"], 0.2)
    w = sg.annotator_weights(ann, "EN", experts=["a1", "a3"], expert_share=0.8)
    np.testing.assert_allclose(w["weights"], [0.4, 0.2 / 3, 0.4, 0.2 / 3, 0.2 / 3])
    assert w["weights"].sum() == pytest.approx(1)
    with pytest.raises(ValueError, match="needs experts="):
        sg.annotator_weights(ann, "EN")
    with pytest.raises(ValueError, match=r"experts \['zz'\] are not annotators"):
        sg.annotator_weights(ann, "EN", experts=["zz"])


def test_partial_ground_truth_counts_agreement_with_known_gold():
    ann = _wide(TABLE1, gold=pd.Series({0: "A", 1: "C"}))
    w = sg.annotator_weights(ann, "PGT")
    # item 0 gold A: a1 a2 a3 a5 agree; item 1 gold C: a2 a4 agree
    assert w["scores"].values.tolist() == [1, 2, 1, 1, 1]
    assert w.attrs["gold_items"] == ["0", "1"]
    w = sg.annotator_weights(ann, "PGT", gold_fraction=1 / 3, rng=0)  # one gold item
    assert w.attrs["n_items_used"] == 1
    with pytest.raises(ValueError, match="needs gold labels"):
        sg.annotator_weights(_wide(TABLE1), "PGT")
    with pytest.raises(ValueError, match="asks for 3 gold items, only 2"):
        sg.annotator_weights(ann, "PGT", gold_fraction=1.0)
    # a chosen subset: item 1 alone (gold C: a2 and a4 agree)
    w = sg.annotator_weights(ann, "PGT", gold_items=[1])
    assert w["scores"].values.tolist() == [0, 1, 0, 1, 0] and w.attrs["gold_items"] == ["1"]
    with pytest.raises(ValueError, match=r"not usable: \[2\]"):
        sg.annotator_weights(ann, "PGT", gold_items=[1, 2])  # item 2 has no gold
    with pytest.raises(ValueError, match="not both"):
        sg.annotator_weights(ann, "PGT", gold_items=[1], gold_fraction=0.5)


def test_iterative_strategies_reach_agreement_with_the_truth(separated):
    ann, truth = separated
    fits = sg.fit_base_learners(ann, "EEE")
    # classes are separated: the ensemble labels every training item correctly,
    # so ItAlg1's fixed point scores each annotator by its agreement with the truth
    w1 = sg.annotator_weights(ann, "ItAlg1", base_fits=fits)
    agree = np.bincount(ann.annotator_idx, weights=ann.labels == truth[ann.item_idx])
    np.testing.assert_array_equal(w1["scores"].values, agree)
    assert w1.attrs["converged"] == 1
    # ItAlg2: each annotator's own base learner's probability of the true class
    w2 = sg.annotator_weights(ann, "ItAlg2", base_fits=fits)
    z = np.stack([f.predict_proba(ann.features)[np.arange(len(truth)), truth]
                  for f in fits.values()])
    np.testing.assert_allclose(w2["scores"].values, z.sum(1), rtol=1e-12)
    assert np.argmin(w2["weights"].values) == 3
    assert w1["weights"].sum() == pytest.approx(1) and w2["weights"].sum() == pytest.approx(1)
    # any reasonable start reaches the same fixed point here; a start at the
    # fixed point stops after one iteration
    w3 = sg.annotator_weights(ann, "ItAlg2", base_fits=fits, start_scores=np.ones(4))
    np.testing.assert_allclose(w3["scores"].values, w2["scores"].values, rtol=1e-12)
    w4 = sg.annotator_weights(ann, "ItAlg2", base_fits=fits, start_scores=w2["scores"].values)
    assert w4.attrs["n_iter"] == 1 and w4.attrs["converged"] == 1
    for bad in (np.ones(5), np.zeros(4), [1, 1, 1, -1], [1, 1, 1, np.nan]):
        with pytest.raises(ValueError, match="start_scores must be 4 finite, non-negative"):
            sg.annotator_weights(ann, "ItAlg1", base_fits=fits, start_scores=bad)


def test_unknown_strategy_lists_the_valid_ones():
    with pytest.raises(ValueError, match="PGT, EN, E, MV, ItAlg1, ItAlg2"):
        sg.annotator_weights(_wide(TABLE1), "best")


# ---------------------------------------------------------------- stacking


class _Fit:
    def __init__(self, p, mu, cov):
        self.proportions, self.means, self.covariances = map(np.asarray, (p, mu, cov))
        self.classes = np.array(["x", "y"])


def test_stack_is_the_weighted_average_and_classifies_by_the_map_rule():
    f1 = _Fit([0.5, 0.5], [[0, 0], [2, 0]], [np.eye(2), 2 * np.eye(2)])
    f2 = _Fit([0.9, 0.1], [[1, 1], [3, 1]], [[[2, .5], [.5, 1]], np.eye(2)])
    ens = sg.stack({"m1": f1, "m2": f2}, {"m1": 0.25, "m2": 0.75})
    np.testing.assert_allclose(ens.proportions, [0.8, 0.2])
    np.testing.assert_allclose(ens.means, [[0.75, 0.75], [2.75, 0.75]])
    np.testing.assert_allclose(ens.covariances[0], [[1.75, .375], [.375, 1.0]])
    np.testing.assert_allclose(ens.covariances[1], [[1.25, 0], [0, 1.25]])
    X = np.array([[0.0, 0.0], [3.0, 1.0], [1.7, 0.7]])
    dens = np.stack([0.8 * multivariate_normal(ens.means[0], ens.covariances[0]).pdf(X),
                     0.2 * multivariate_normal(ens.means[1], ens.covariances[1]).pdf(X)], 1)
    np.testing.assert_allclose(ens.predict_proba(X), dens / dens.sum(1, keepdims=True))
    assert ens.predict(X).tolist() == np.array(["x", "y"])[dens.argmax(1)].tolist()


def test_stack_validates_weights():
    f = _Fit([0.5, 0.5], [[0, 0], [1, 1]], [np.eye(2)] * 2)
    with pytest.raises(ValueError, match="must sum to 1"):
        sg.stack([f, f], [0.5, 0.6])
    with pytest.raises(ValueError, match="non-negative"):
        sg.stack([f, f], [1.5, -0.5])
    with pytest.raises(ValueError, match="one weight per base learner"):
        sg.stack([f, f], [1.0])
    with pytest.raises(ValueError, match="NaN or infinite"):
        sg.stack([f, f], [0.5, 0.5]).predict(np.array([[np.nan, 0.0]]))


def test_base_learners_are_lda_and_qda_maximum_likelihood(separated):
    ann, _ = separated
    for cov in ("EEE", "VVV"):
        fits = sg.fit_base_learners(ann, cov)
        for m, name in enumerate(ann.annotators):
            rows = ann.annotator_idx == m
            p, mu, S = _closed_form(ann.features[ann.item_idx[rows]], ann.labels[rows], cov, 3)
            np.testing.assert_allclose(fits[name].proportions, p, atol=1e-12)
            np.testing.assert_allclose(fits[name].means, mu, atol=1e-12)
            np.testing.assert_allclose(fits[name].covariances, S, atol=1e-10)


def test_bad_input_gets_clear_errors(separated):
    ann, _ = separated
    with pytest.raises(ValueError, match="not a known structure.*EII"):
        sg.fit_base_learners(ann, "XYZ")
    with pytest.raises(ValueError, match="not a known structure"):
        sg.build_model(ann, covariance="VEV")  # the reference has it, PyMC does not
    # a class with fewer labelled items than features under VVV
    small = ann.select(~((ann.annotator_idx == 0) & (ann.labels == 2)
                         & (ann.item_idx > 61)))
    with pytest.raises(ValueError, match=r"annotator 0: .*VVV"):
        sg.fit_base_learners(small, "VVV")
    with pytest.raises(ValueError, match="VVV with flat priors needs more than 2"):
        sg.build_model(small, covariance="VVV", **sg.FLAT_PRIORS)
    sg.fit_base_learners(small, "VVV", shrinkage=1.0)  # documented regularisation
    with pytest.raises(ValueError, match="need item features"):
        sg.fit_base_learners(ann.with_features(None))
    with pytest.raises(ValueError, match="label_share_prior"):
        sg.build_model(ann, label_share_prior=0.5)


def test_simulate_gives_experts_more_accurate_than_novices():
    ann = sg.simulate(2, n_items=400, rng=1)
    assert ann.n_annotators == 7 and ann.has_gold and ann.n_features == 2
    frame = ann.to_frame()
    gold = ann.gold_series()
    acc = (frame["label"].to_numpy() == gold.loc[frame["item"]].to_numpy())
    acc = pd.Series(acc).groupby(frame["annotator"].to_numpy()).mean()
    assert acc.filter(like="expert").min() > acc.filter(like="novice").max()
    assert bool(ann.truth["is_expert"].sel(annotator="expert_1"))
    np.testing.assert_allclose(ann.truth["covariance"].sel(true_class=0), 0.5 * np.eye(2))


# ---------------------------------------------------- PyMC: MAP equals ML


@pytest.fixture(scope="module")
def small_sim():
    return sg.simulate(2, n_items=60, n_experts=2, n_novices=1, rng=3)


def _map_vs_ml(ann, covariance):
    fit = cm.fit_map(sg.build_model(ann, covariance=covariance, **sg.FLAT_PRIORS))
    base = sg.base_learners_from_posterior(fit, ann)
    ref = sg.fit_base_learners(ann, covariance)  # crowd_models.models.edda.fit_edda
    return max(
        np.abs(getattr(base[a], k) - getattr(ref[a], k)).max()
        for a in ann.annotators for k in ("proportions", "means", "covariances"))


@pytest.mark.parametrize("covariance", ["EII", "VEI", "EEE", "VVV"])
def test_flat_map_equals_the_maximum_likelihood_reference(small_sim, covariance):
    assert _map_vs_ml(small_sim, covariance) <= 1e-6


@pytest.mark.slow
@pytest.mark.parametrize("covariance", ["VII", "EEI", "EVI", "VVI"])
def test_flat_map_equals_the_maximum_likelihood_reference_more(small_sim, covariance):
    assert _map_vs_ml(small_sim, covariance) <= 1e-6


# ------------------------------------------------------------------- slow


@pytest.mark.validate  # moved out of make test: the suite took 70 min in a fresh CI here
def test_nuts_default_priors_regularise_a_small_class_and_mix(small_sim):
    ann = small_sim
    # annotator 0 keeps only 2 items of class 2: singular under flat VVV
    keep = ~((ann.annotator_idx == 0) & (ann.labels == 2)
             & (np.cumsum((ann.annotator_idx == 0) & (ann.labels == 2)) > 2))
    small = ann.select(keep)
    model = sg.build_model(small, covariance="VVV")
    idata = cm.sample(model, draws=1000, tune=1000, chains=4, random_seed=1,
                      progressbar=False)
    import arviz as az

    rhat = az.rhat(idata, var_names=["label_share", "class_mean", "covariance"])
    worst = max(float(rhat[v].max()) for v in rhat.data_vars)
    assert worst <= 1.01
    w = sg.annotator_weights(small, "E")
    probs = sg.stack_posterior(idata, w, small.features, max_draws=50, rng=0)
    assert probs.sizes["sample"] == 50
    np.testing.assert_allclose(probs.sum("true_class"), 1)
    acc = (probs.mean("sample").argmax("true_class").values == small.gold).mean()
    assert acc > 0.8


def _one_true_annotator(structure, n_items, rng):
    """Two Gaussian classes in 2-D whose covariances have the given structure
    (volume, shape, orientation: E shared, V per class, I axis-aligned), labelled
    by one annotator who gives the true class: the data are then drawn from the
    base learner's own model. Returns (annotations, means, covariances)."""
    volume = {"E": [1.0, 1.0], "V": [0.6, 1.5]}[structure[0]]
    shape = {"I": [[1.0, 1.0]] * 2, "E": [[2.0, 0.5]] * 2,
             "V": [[2.0, 0.5], [0.5, 2.0]]}[structure[1]]
    angle = {"I": [0.0, 0.0], "E": [0.5, 0.5], "V": [0.5, -0.7]}[structure[2]]
    covs = []
    for g in range(2):
        c, s = np.cos(angle[g]), np.sin(angle[g])
        rotation = np.array([[c, -s], [s, c]])
        covs.append(volume[g] * rotation @ np.diag(shape[g]) @ rotation.T)
    covs, means = np.array(covs), np.array([[0.0, 0.0], [3.0, 1.0]])
    z = rng.choice(2, size=n_items, p=[0.4, 0.6])
    x = np.array([rng.multivariate_normal(means[k], covs[k]) for k in z])
    frame = pd.DataFrame({"item": np.arange(n_items), "annotator": "a", "label": z})
    ann = cm.Annotations.from_frame(frame, features=pd.DataFrame(x, columns=["x1", "x2"]),
                                    classes=[0, 1])
    return ann, means, covs


@pytest.mark.slow
@pytest.mark.parametrize("covariance", [  # one structure in make test, the rest in validate
    s if s == "EII" else pytest.param(s, marks=pytest.mark.validate)
    for s in sg.PYMC_STRUCTURES if s != "VVV"])
def test_nuts_recovers_each_structure(covariance):
    ann, means, covs = _one_true_annotator(covariance, 150, np.random.default_rng(11))
    assert_nuts_recovers(sg.build_model(ann, covariance=covariance),
                         {"class_mean": means[None], "covariance": covs[None]}, min_cover=0.75)


@pytest.mark.validate  # moved out of make test: the suite took 70 min in a fresh CI here
def test_case_study_reproduces_tables_6_and_7():
    from pathlib import Path

    from tests.test_case_studies import run_fast

    script = Path(__file__).resolve().parents[2] / "case_studies" / "stacked_gaussian.py"
    result = run_fast(script)
    assert result.returncode == 0, result.stderr[-3000:]
    found = re.findall(r"^RESULT table6 (\w+) ours=(\d\.\d+) paper=(\d\.\d+)$",
                       result.stdout, re.MULTILINE)
    assert {s for s, _, _ in found} == set(sg.STRATEGIES), result.stdout[-2000:]
    # On the Table 6 run's splits (regenerated with R, see load_gi_lesions_split)
    # every row matches the paper; ItAlg2 (as the paper describes it) differs by one
    # test lesion in one split: 1/26/50 = 0.0008. The issue asks for 0.02; hold
    # all six to 1e-3 (plus the 4-decimal printing).
    for strategy, ours, paper in found:
        assert abs(float(ours) - float(paper)) <= 1e-3 + 1e-4, (strategy, ours, paper)
    # started as the authors' code starts it, ItAlg2 matches too (every split)
    authors = re.search(r"^RESULT table6_authors_start ItAlg2 ours=(\S+) paper=(\S+)$",
                        result.stdout, re.MULTILINE)
    assert authors and authors.group(1) == authors.group(2), result.stdout[-2000:]
    t7 = re.findall(r"^RESULT table7 (\w+) ours=(\d\.\d+) paper=(\d\.\d+)$",
                    result.stdout, re.MULTILINE)
    assert len(t7) == 5
    for name, ours, paper in t7:
        assert abs(float(ours) - float(paper)) <= 1e-3, (name, ours, paper)


# ------------------------------------------------- ensemble, bootstrap, messages


def test_fit_ensemble_is_the_mv_weighted_stack_of_the_closed_form_learners(separated):
    ann, truth = separated
    ensemble, weights, fits = sg.fit_ensemble(ann, "MV", "EEE")
    # MV by hand: every annotator labels every item; the majority is unique here
    wide = np.full((ann.n_items, ann.n_annotators), -1)
    wide[ann.item_idx, ann.annotator_idx] = ann.labels
    counts = np.stack([(wide == g).sum(1) for g in range(3)], axis=1)
    top = counts.max(1)
    majority = np.where((counts == top[:, None]).sum(1) == 1, counts.argmax(1), -1)
    scores = ((wide == majority[:, None]) & (majority[:, None] >= 0)).sum(0)
    np.testing.assert_array_equal(weights["scores"].values, scores)
    w = scores / scores.sum()
    np.testing.assert_allclose(weights["weights"].values, w, rtol=1e-12)
    # the ensemble: weighted averages of the per-annotator LDA maximum likelihood fits
    X = ann.features
    parts = [_closed_form(X[ann.item_idx[ann.annotator_idx == m]],
                          ann.labels[ann.annotator_idx == m], "EEE", 3)
             for m in range(ann.n_annotators)]
    for k, name in enumerate(("proportions", "means", "covariances")):
        expected = sum(w[m] * parts[m][k] for m in range(ann.n_annotators))
        np.testing.assert_allclose(getattr(ensemble, name), expected, rtol=1e-10, atol=1e-12)
    assert list(fits) == list(ann.annotators)
    # three well-separated classes: the ensemble classifies (almost) every item right
    assert np.mean(ensemble.predict(X) == np.asarray(ann.classes)[truth]) >= 0.97


def test_bootstrap_weights_resample_items_and_skip_undefined_weights():
    ann = _wide(TABLE1)
    # threshold 0.8: only item 1 (4 of 5 agree) counts, scores [1, 1, 1, 0, 1] per copy of
    # it; a resample without item 1 has all scores 0, its weights undefined: skipped
    boot = sg.bootstrap_weights(ann, "MV", n_boot=40, rng=5, threshold=0.8)
    rng = np.random.default_rng(5)
    drawn = [rng.integers(0, 3, size=3) for _ in range(40)]
    n_failed = sum(0 not in items for items in drawn)
    assert 0 < n_failed < 40
    assert boot.attrs["n_failed"] == n_failed and boot.sizes["bootstrap"] == 40 - n_failed
    np.testing.assert_allclose(boot.values, np.tile([0.25, 0.25, 0.25, 0, 0.25],
                                                    (40 - n_failed, 1)))
    assert list(boot["annotator"].values) == list(ann.annotators)
    with pytest.raises(ValueError, match="every bootstrap resample failed"):
        sg.bootstrap_weights(ann, "MV", n_boot=3, rng=0, threshold=1.0)


def test_bootstrap_weights_vary_with_the_resample(separated):
    ann, _ = separated
    boot = sg.bootstrap_weights(ann, "MV", n_boot=30, rng=1)
    full = sg.annotator_weights(ann, "MV")["weights"].values
    np.testing.assert_allclose(boot.values.sum(1), 1.0, rtol=1e-12)
    assert boot.attrs["n_failed"] == 0 and boot.attrs["strategy"] == "MV"
    # the bootstrap mean is near the full-data weights, and the resamples differ
    np.testing.assert_allclose(boot.values.mean(0), full, atol=0.02)
    assert boot.values.std(0).max() > 0.005
    # annotator 0 (perfect) outweighs annotator 3 (noisy) in every resample
    assert np.all(boot.sel(annotator=0) > boot.sel(annotator=3))


@pytest.mark.parametrize("call, match", [
    (lambda ann: sg.annotator_weights(ann, "EN"), r"strategy 'EN' needs experts="),
    (lambda ann: sg.annotator_weights(ann, "EN", experts=[9]), r"experts \[9\] are not "
                                                              r"annotators"),
    (lambda ann: sg.annotator_weights(ann, "EN", experts=[]), "experts is empty"),
    (lambda ann: sg.annotator_weights(ann, "EN", experts=[0], expert_share=1.5),
     r"expert_share must be in \[0, 1\]"),
    (lambda ann: sg.annotator_weights(ann, "PGT", gold_fraction=0.0),
     r"gold_fraction must be in \(0, 1\]"),
    (lambda ann: sg.annotator_weights(ann, "PGT", gold_items=[1, 1]),
     "gold_items must be distinct items with known gold"),
    (lambda ann: sg.stack([], [1.0]), "stack needs at least one base learner"),
    (lambda ann: sg.stack(sg.fit_base_learners(ann), {0: 0.5, 1: 0.5}),
     r"weights are missing annotator\(s\) \[2, 3\]"),
    (lambda ann: sg.stack(sg.fit_base_learners(ann), [0.5, 0.5, -0.5, 0.5]),
     "weights must be finite and non-negative"),
    (lambda ann: sg.stack(sg.fit_base_learners(ann), [0.5, 0.5, 0.5, 0.5]),
     r"weights must sum to 1 \(they sum to 2\)"),
    (lambda ann: sg.build_model(ann, class_mean_sd=-1.0),
     "class_mean_sd must be a positive number or None"),
    (lambda ann: sg.build_model(ann, covariance_prior={"dof": -2.0}),
     "covariance_prior dof must be > -1, got -2.0"),
    (lambda ann: sg.build_model(ann, covariance_prior={"scale": [1.0, -1.0]}),
     r"covariance_prior scale must be 2 positive variances or a positive-definite \(2, 2\)"),
    (lambda ann: sg.build_model(ann, covariance_prior="wishart"),
     "covariance_prior must be 'default', None \\(flat\\) or a dict"),
    (lambda ann: sg.stack(sg.fit_base_learners(ann), [0.25] * 4).predict_proba(
        np.full((2, 2), np.nan)), "features contain NaN or infinite values"),
    (lambda ann: sg.stack(sg.fit_base_learners(ann), [0.25] * 4).predict(np.zeros((2, 3))),
     r"features must be a 2-D array \(item, feature\) with 2 features, got shape \(2, 3\)"),
    (lambda ann: sg.annotator_weights(ann, "PGT", gold_fraction=0.5, gold_items=[0]),
     "give gold_fraction .* or gold_items"),
    (lambda ann: sg.annotator_weights(ann, "ItAlg1", base_fits=dict(reversed(
        sg.fit_base_learners(ann).items()))), "base_fits must be keyed by the annotators"),
    (lambda ann: sg.annotator_weights(ann, "ItAlg1", start_scores=[1.0, -1.0, 0.0, 0.0]),
     "start_scores must be 4 finite, non-negative scores"),
    (lambda ann: sg.fit_base_learners(ann.select(~((ann.annotator_idx == 2)
                                                   & (ann.labels == 1)))),
     r"annotator 2 never uses class\(es\) \['1'\]"),
    (lambda ann: sg.simulate(3), r"scenario must be 1 \(identity covariances\) or 2"),
    (lambda ann: sg.simulate(2, means=np.zeros((4, 3))), "scenario 2's default covariances"),
])
def test_validation_messages(separated, call, match):
    ann, _ = separated
    with pytest.raises(ValueError, match=match):
        call(ann)
