"""Every ValueError message of the EDDA reference, the feature-accuracy family
and the simulators, raised by the input it describes (one case per message,
checked with ``match``). NumPy only: nothing here builds a PyMC model, except
for the build_model checks that fail before any graph is made."""

import dataclasses

import numpy as np
import pytest
import xarray as xr

from crowd_models.models import continuous, dawid_skene, edda, feature_accuracy, ordinal, two_coin

X = np.random.default_rng(0).normal(size=(30, 2)) + np.repeat([[0, 0], [4, 0], [0, 4]], 10, 0)
Y = np.repeat(["a", "b", "c"], 10)
W = np.repeat(np.eye(3), 10, axis=0)


def _fit():
    return edda.fit_edda(X, Y, "EEE")


EDDA = [
    (lambda: _fit().log_density(np.zeros((2, 3))), "X has 3 features, the fit was made with 2"),
    (lambda: edda.fit_edda(np.where(X > 4.5, np.nan, X), Y, "EEE"),
     r"X contains \d+ NaN/inf value\(s\) \(first at row"),
    (lambda: edda.fit_edda(np.zeros((30, 2, 2)), Y, "EEE"), r"X must be 2-D \(n, d\)"),
    (lambda: edda.fit_edda(np.zeros((0, 2)), [], "EEE"), "X is empty"),
    (lambda: edda.fit_edda(X, None, "EEE", weights=W[:5]),
     r"weights must have shape \(n, G\) = \(30, G\) to match X"),
    (lambda: edda.fit_edda(X, None, "EEE", weights=np.where(W == 1, np.nan, W)),
     "weights contain NaN/inf"),
    (lambda: edda.fit_edda(X, None, "EEE", weights=W - 0.5), "weights must be nonnegative"),
    (lambda: edda.fit_edda(X, None, "EEE", weights=W, classes=["a", "b"]),
     "classes has 2 entries but weights has 3 columns"),
    (lambda: edda.fit_edda(X, Y[:, None], "EEE"), r"y must be 1-D \(one label per row of X\)"),
    (lambda: edda.fit_edda(X, Y[:20], "EEE"), "y has 20 labels but X has 30 rows"),
    (lambda: edda.fit_edda(X, Y, "EEE", classes=["a", "a", "b", "c"]),
     "classes has duplicate entries"),
    (lambda: edda.fit_edda(X, Y, "EEE", classes=["a", "b"]),
     r"y contains label\(s\) \['c'\] not in classes="),
    (lambda: edda.fit_edda(X, Y, "EEE", classes=["a", "b", "c", "d"]),
     r"class\(es\) \['d'\] have no observations"),
    (lambda: edda.fit_edda(X, Y, "VVE", tol=0), "tol must be a positive number"),
    (lambda: edda.fit_edda(X, Y, "VVE", max_iter=0), "max_iter must be a positive integer"),
    (lambda: edda.fit_edda(X, Y, "EEE", shrinkage=-1.0), "shrinkage must be a finite number >= 0"),
    (lambda: edda.select_edda(X, Y, structures=[]), "structures is empty; choose from EII"),
    (lambda: edda.fit_edda(np.c_[X, np.ones(30)], Y, "EEE", shrinkage=1.0),
     r"feature\(s\) \[2\] are constant over all rows; shrinkage cannot regularise them"),
    (lambda: edda.fit_edda(X, Y, "EEE", shrinkage=1.0, shrinkage_target=np.eye(3)),
     r"shrinkage_target must be a finite symmetric \(2, 2\) matrix"),
    (lambda: edda.fit_edda(X, Y, "EEE", shrinkage=1.0, shrinkage_target=-np.eye(2)),
     "shrinkage_target must be positive definite"),
]


@pytest.mark.parametrize("call, match", EDDA)
def test_edda_messages(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.fixture(scope="module")
def fa_sim():
    return feature_accuracy.simulate(40, n_features=3, n_annotators=3, rng=2)


def _fa_fit(sim):
    return feature_accuracy.em(sim, n_restarts=1)


FEATURE_ACCURACY = [
    (lambda s: feature_accuracy.predict(feature_accuracy.lasso_majority_vote(s),
                                        np.zeros((4, 2))),
     r"features must have 3 columns \(the fit's features, in its order\), got 2"),
    (lambda s: feature_accuracy.em(s, intercept_precision=[1.0, 2.0]),
     "intercept_precision must be one number"),
    (lambda s: feature_accuracy.em(s, accuracy_intercept_precision=[1.0, 2.0]),
     r"accuracy_intercept_precision must be a number or an array with one entry per "
     r"annotator \(3\)"),
    (lambda s: feature_accuracy.em(s, accuracy_intercept_precision=[0.0, 1.0, 1.0]),
     r"accuracy_intercept_precision mixes flat \(0\) and proper entries"),
    (lambda s: feature_accuracy.em(s, n_restarts=0), "n_restarts must be >= 1, got 0"),
    (lambda s: feature_accuracy.em(s, tol=1e-3, restart_tol=1e-6),
     "need 0 < tol <= restart_tol, got tol=0.001, restart_tol=1e-06"),
    (lambda s: feature_accuracy.predict(_fa_fit(s).drop_vars("coef"), s.features),
     r"this fit has no classifier \(no coef and intercept\)"),
    (lambda s: feature_accuracy.annotator_summary(_fa_fit(s)),
     "this fit does not carry the features and the long table"),
    (lambda s: feature_accuracy.lasso_gold(dataclasses.replace(s, gold=None)),
     r"lasso_gold needs gold labels"),
    (lambda s: feature_accuracy.simulate(5, features=np.zeros((4, 2))),
     "n_items=5 but features have 4 rows"),
    (lambda s: feature_accuracy.simulate(0, n_features=2),
     "give n_items >= 1 and n_features >= 1, or features"),
    (lambda s: feature_accuracy.simulate(5, n_features=2, coef=[1.0]),
     r"coef must have 2 entries \(one per feature\)"),
    (lambda s: feature_accuracy.simulate(5, n_features=2, accuracy_coef=[1.0, 2.0, 3.0]),
     "accuracy_coef must have 2 entries"),
]


@pytest.mark.parametrize("call, match", FEATURE_ACCURACY)
def test_feature_accuracy_messages(fa_sim, call, match):
    with pytest.raises(ValueError, match=match):
        call(fa_sim)


def _confusions(accuracies, K):
    return np.array([np.full((K, K), (1 - a) / (K - 1)) + np.eye(K) * (a - (1 - a) / (K - 1))
                     for a in accuracies])


SIMULATORS = [
    (lambda: two_coin.simulate([0.9], [0.8]), r"give n_items, features or true_labels"),
    (lambda: two_coin.simulate([0.9], [0.8], true_labels=[0, 2]),
     r"true_labels must be n_items values in \{0, 1\}"),
    (lambda: two_coin.simulate([0.9, 0.8], [0.8]),
     "sensitivity and specificity must be 1-D and of the same length"),
    (lambda: two_coin.simulate([1.2], [0.8], n_items=3),
     r"sensitivity and specificity must lie in \[0, 1\]"),
    (lambda: dawid_skene.simulate(np.eye(3), n_items=5),
     r"confusion must be \(annotator, K, K\) with K >= 2"),
    (lambda: dawid_skene.simulate(np.full((2, 2, 2), 0.6), n_items=5),
     "every confusion row must be probabilities summing to 1"),
    (lambda: dawid_skene.simulate(_confusions([0.8], 3)),
     "give n_items, features or true_labels"),
    (lambda: dawid_skene.simulate(_confusions([0.8], 3), true_labels=[0, 3]),
     r"true_labels must be n_items codes in 0..2"),
    (lambda: continuous.simulate([1.0, 2.0], n_items=5, truth_precision=0.0),
     "truth_precision must be positive"),
    (lambda: continuous.simulate([1.0, 2.0]), "give n_items, features or true_values"),
    (lambda: continuous.simulate([1.0, 2.0], n_items=5, features=np.zeros((4, 1))),
     "features have 4 rows for 5 items"),
    (lambda: continuous.simulate([1.0, 2.0], n_items=2, true_values=[0.0, np.inf]),
     "true_values must be 2 finite numbers"),
    (lambda: continuous.simulate([1.0, 2.0], n_items=5, n_features=2, coef=[1.0]),
     "coef must have 2 entries, one per feature"),
    (lambda: continuous.simulate([1.0, -2.0], n_items=5), "must be positive and finite"),
    (lambda: continuous.simulate([1.0, 2.0], n_items=5, bias=[1.0, 1.0]),
     r"must .*\(the model's identifiability constraint\)"),
    (lambda: continuous.simulate([1.0, 2.0], n_items=5, bias=[1.0]),
     "must be 2 finite numbers, one per annotator"),
    (lambda: ordinal.simulate(variant="probit", n_items=5), r"variant='probit' is not one of"),
    (lambda: ordinal.simulate(n_items=5, link="cauchit", bias=[0.0], noise=[1.0],
                              n_classes=3), r"link='cauchit' is not one of"),
    (lambda: ordinal.simulate(n_items=5, bias=[0.0], noise=[-1.0], n_classes=3),
     "noise must be > 0"),
    (lambda: ordinal.simulate(n_items=5, bias=[0.0], noise=[1.0]),
     "give level_spacing or n_classes >= 2"),
    (lambda: ordinal.simulate(n_items=5, bias=[0.0], noise=[1.0], level_spacing=[0.3, 0.3]),
     "level_spacing must be K - 1 positive gaps summing to 1"),
    (lambda: ordinal.simulate(n_items=5, bias=[0.0], noise=[1.0], n_classes=3,
                              log_width_ratio=[[0.5, 0.5]]),
     r"log_width_ratio must be a finite \(annotator, K - 2\) = \(1, 1\) array"),
    (lambda: ordinal.simulate(n_items=5, bias=[0.0], noise=[1.0], n_classes=3,
                              guess_rate=[1.5]), r"guess_rate must lie in \[0, 1\]"),
    (lambda: ordinal.simulate(variant="cumulative", n_items=5),
     r"the cumulative variant needs sensitivity and specificity \(annotator, K - 1\)"),
    (lambda: ordinal.simulate(n_items=2, bias=[0.0], noise=[1.0], n_classes=3,
                              true_labels=[0, 3]), r"true_labels must be n_items codes in 0..2"),
    (lambda: ordinal.simulate(bias=[0.0], noise=[1.0], n_classes=3),
     "give n_items or true_labels"),
    (lambda: ordinal.simulate(n_items=5, bias=[0.0], noise=[1.0], n_classes=3,
                              prevalence=[0.5, 0.5]),
     "prevalence must be 3 class shares summing to 1"),
]


@pytest.mark.parametrize("call, match", SIMULATORS)
def test_simulator_messages(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_annotator_error_is_the_mean_over_draws_of_the_per_label_error():
    # two draws of the accuracy regression; the error is averaged on the probability
    # scale, P(Y != Z | x) = sigmoid(-(alpha_k + x . gamma)), not at the mean draw
    alpha = np.array([[1.0, -0.5, 2.0], [3.0, 0.5, 0.0]])  # (draw, annotator)
    gamma = np.array([[0.5, -1.0], [-1.5, 0.0]])  # (draw, feature)
    fit = xr.Dataset({
        "accuracy_intercept": (("chain", "draw", "annotator"), alpha[None]),
        "accuracy_coef": (("chain", "draw", "feature"), gamma[None]),
    })
    x = np.array([[0.2, 1.0], [-1.0, 0.5], [2.0, -2.0], [0.0, 0.0]])
    got = feature_accuracy.annotator_error(fit, x)
    assert got.shape == (4, 3)
    by_hand = np.zeros((4, 3))
    for d in range(2):
        for i in range(4):
            for k in range(3):
                by_hand[i, k] += 0.5 / (1 + np.exp(alpha[d, k] + x[i] @ gamma[d]))
    np.testing.assert_allclose(got, by_hand, rtol=1e-12)
    at_mean = 1 / (1 + np.exp(alpha.mean(0)[None] + (x @ gamma.mean(0))[:, None]))
    assert np.abs(got - at_mean).max() > 0.05
    with pytest.raises(ValueError, match="features must have 2 columns"):
        feature_accuracy.annotator_error(fit, np.zeros((2, 3)))


def test_annotator_error_of_an_em_fit_tracks_the_simulated_errors():
    sim = feature_accuracy.simulate(800, n_features=3, n_annotators=4,
                                    accuracy_coef=[1.5, 0.0, 0.0], rng=3)
    fit = feature_accuracy.em(sim, n_restarts=1)
    err = feature_accuracy.annotator_error(fit, sim.features)
    alpha = fit["accuracy_intercept"].values[0, 0]
    gamma = fit["accuracy_coef"].values[0, 0]
    z = sim.standardized().features  # the features the model is fitted on
    np.testing.assert_allclose(err, 1 / (1 + np.exp(alpha[None] + (z @ gamma)[:, None])),
                               rtol=1e-12)
    # the labels' error rate, overall and on the items the features make hard, is about
    # the predicted one
    wrong = sim.labels != sim.gold[sim.item_idx]
    predicted = err[sim.item_idx, sim.annotator_idx]
    assert abs(wrong.mean() - predicted.mean()) < 0.02
    hard = sim.features[sim.item_idx, 0] < 0
    assert abs(wrong[hard].mean() - predicted[hard].mean()) < 0.03
    assert wrong[hard].mean() > wrong[~hard].mean() + 0.1
