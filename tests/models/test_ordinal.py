"""The ordinal family: level validation, the cumulative model's EM = MAP, the latent
model's marginal likelihood against brute force, simulators, NUTS recovery and the
web-search case study."""

import dataclasses
import itertools
import re
import warnings

import numpy as np
import pandas as pd
import pytensor.tensor as pt
import pytest
from scipy import stats
from scipy.special import expit

import crowd_models as cm
from crowd_models.models import ordinal

from ..conftest import assert_nuts_recovers

CUMULATIVE = dict(  # (annotator, threshold): sens non-increasing, spec non-decreasing
    sensitivity=[[0.95, 0.90, 0.85], [0.85, 0.80, 0.75], [0.80, 0.75, 0.70],
                 [0.90, 0.80, 0.60], [0.75, 0.70, 0.65]],
    specificity=[[0.80, 0.90, 0.95], [0.70, 0.80, 0.85], [0.75, 0.80, 0.85],
                 [0.65, 0.75, 0.90], [0.70, 0.75, 0.80]],
)
LATENT = dict(bias=[0.6, -0.4, 0.0, 0.3, -0.5], noise=[0.4, 0.6, 1.0, 0.5, 0.8],
              level_spacing=[0.25, 0.4, 0.35])


def _frame(labels, classes=None):
    df = pd.DataFrame({"item": ["a", "a", "b", "b", "c", "c"],
                       "annotator": ["u", "v", "u", "v", "u", "v"], "label": labels})
    return cm.Annotations.from_frame(df, classes=classes)


@pytest.fixture(scope="module")
def sim_cumulative():
    return ordinal.simulate(variant="cumulative", **CUMULATIVE, n_items=300,
                            prevalence=[0.2, 0.3, 0.3, 0.2], rng=np.random.default_rng(5))


@pytest.fixture(scope="module")
def cumulative_model(sim_cumulative):
    return ordinal.build_model(sim_cumulative)


# ------------------------------------------------------------ validation
def test_levels_must_be_increasing_integers():
    with pytest.raises(ValueError, match=r"non-integer level\(s\) \['high', 'low'\]"):
        ordinal.em(_frame(["low", "high", "low", "low", "high", "high"]))
    with pytest.raises(ValueError, match=r"non-integer level\(s\) \[2.5\]"):
        ordinal.build_model(_frame([1, 2.5, 3, 1, 2.5, 3]), variant="latent")
    with pytest.raises(ValueError, match="levels in increasing order, got classes \\[3, 2, 1\\]"):
        ordinal.em(_frame([1, 2, 3, 1, 2, 3], classes=[3, 2, 1]))
    # codes 0..K-1 and gaps are levels too: the same fit as 1..K, thresholds named after them
    one_to_k = ordinal.em(_frame([1, 2, 3, 1, 2, 3]))
    for codes, names in (([0, 1, 2], [">0", ">1"]), ([1, 2, 4], [">1", ">2"])):
        recoded = [codes[v - 1] for v in [1, 2, 3, 1, 2, 3]]
        fit = ordinal.em(_frame(recoded))
        assert list(fit["threshold"].values) == names
        np.testing.assert_allclose(fit["sensitivity"].values, one_to_k["sensitivity"].values)
    # a label outside the declared levels is refused when parsing
    with pytest.raises(ValueError, match="not among the classes|not in the classes|classes"):
        _frame([1, 2, 4, 1, 2, 3], classes=[1, 2, 3])
    with pytest.raises(ValueError, match="continuous"):
        ordinal.em(cm.Annotations.from_frame(pd.DataFrame(
            {"item": [1, 2], "annotator": ["a", "b"], "label": [0.5, 1.5]}), continuous=True))
    with pytest.raises(TypeError, match="expects an Annotations"):
        ordinal.em(pd.DataFrame())
    # integer-valued floats are integer levels
    ann = _frame([1.0, 2.0, 3.0, 1.0, 2.0, 3.0])
    assert ordinal.em(ann).sizes["threshold"] == 2


def test_prior_and_option_messages():
    ann = _frame([1, 2, 3, 1, 2, 3])
    with pytest.raises(ValueError, match="variant='nope' is not one of"):
        ordinal.build_model(ann, variant="nope")
    with pytest.raises(ValueError, match="link='cloglog' is not one of"):
        ordinal.build_model(ann, variant="latent", link="cloglog")
    with pytest.raises(ValueError, match="no EM: use cm.fit_map"):
        ordinal.em(ann, variant="latent")
    with pytest.raises(ValueError, match="a >= 1 and b >= 1"):
        ordinal.em(ann, sensitivity_prior=(0.5, 2))
    with pytest.raises(TypeError, match="pair \\(a, b\\)"):
        ordinal.em(ann, specificity_prior=3.0)
    with pytest.raises(ValueError, match="must broadcast to \\(2, 2\\)"):
        ordinal.em(ann, sensitivity_prior=([2, 3, 4], 2))
    # per-threshold priors broadcast
    fit = ordinal.em(ann, sensitivity_prior=([3.0, 5.0], 2.0))
    assert fit["sensitivity"].sizes["threshold"] == 2
    with pytest.raises(ValueError, match="Dirichlet concentration of the latent"):
        ordinal.build_model(ann, variant="latent", prevalence_prior=0.5)
    with pytest.raises(TypeError, match="noise_prior must be a pair"):
        ordinal.build_model(ann, variant="latent", noise_prior=2.0)
    with pytest.raises(ValueError, match="bias_sd must be one number"):
        ordinal.build_model(ann, variant="latent", bias_sd=[1.0, 2.0])
    with pytest.raises(ValueError, match="spacing_prior must be"):
        ordinal.build_model(ann, variant="latent", spacing_prior=0.5)
    feats = ann.with_features(np.eye(3)[:, :2])
    with pytest.raises(ValueError, match="coef_precision has 3 entries for 2 features"):
        ordinal.build_model(feats, variant="latent", coef_precision=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="finite and >= 0"):
        ordinal.em(feats, coef_precision=-1)


def test_simulate_messages():
    with pytest.raises(ValueError, match="no ordinal labelling has these rates"):
        ordinal.simulate(variant="cumulative", sensitivity=[[0.7, 0.9]],
                         specificity=[[0.9, 0.9]], n_items=5)
    with pytest.raises(ValueError, match="needs bias and noise"):
        ordinal.simulate(n_items=5, n_classes=3)
    with pytest.raises(ValueError, match="level_spacing must be"):
        ordinal.simulate(bias=[0.0], noise=[1.0], level_spacing=[0.5, 0.6], n_items=5)


# ------------------------------------------------------------ cumulative
def test_class_probabilities_repair_and_counts():
    exceed = np.array([[0.9, 0.95, 0.2],   # P(>2) > P(>1): level 2 gets -0.05
                       [0.8, 0.5, 0.1]])
    repaired, raw = ordinal.class_probabilities(exceed)
    np.testing.assert_allclose(raw[0], [0.1, -0.05, 0.75, 0.2])
    np.testing.assert_allclose(raw.sum(axis=1), 1)
    np.testing.assert_allclose(repaired[0], np.array([0.1, 0, 0.75, 0.2]) / 1.05)
    np.testing.assert_allclose(repaired[1], raw[1])
    import xarray as xr
    fit = xr.Dataset({"exceed_prob": (("chain", "draw", "item", "threshold"), exceed[None, None])})
    counts = ordinal.negative_differences(fit)
    assert counts["n_cells"] == 1 and counts["n_items"] == 1 and counts["share_items"] == 0.5
    np.testing.assert_allclose(counts["most_negative"], -0.05)


def test_class_probabilities_repair_normalises_each_row_of_draws():
    # (draw, item, threshold): the repair renormalises over the classes (last axis)
    exceed = np.array([[[0.9, 0.95, 0.2], [0.8, 0.5, 0.1]],
                       [[0.6, 0.7, 0.65], [0.3, 0.2, 0.1]]])
    repaired, raw = ordinal.class_probabilities(exceed)
    assert repaired.shape == raw.shape == (2, 2, 4)
    np.testing.assert_allclose(repaired.sum(axis=-1), 1, rtol=1e-12)
    np.testing.assert_allclose(repaired[1, 0], np.array([0.4, 0, 0.05, 0.65]) / 1.1)


def test_binary_annotations_keep_negative_gold_unknown_and_split_the_rest():
    # levels 1..4; threshold 1 asks "level > 2": labels and gold split the same way,
    # gold -1 (unknown) stays unknown
    df = pd.DataFrame({"item": list("abcde"), "annotator": list("xyxyx"),
                       "label": [1, 2, 3, 4, 2]})
    ann = cm.Annotations.from_frame(df, item="item", annotator="annotator", label="label",
                                    classes=[1, 2, 3, 4], gold={"a": 4, "b": 2, "d": 3, "e": 1})
    assert list(ann.gold) == [3, 1, -1, 2, 0]
    for threshold, labels, gold in ((0, [0, 1, 1, 1, 1], [1, 1, -1, 1, 0]),
                                    (1, [0, 0, 1, 1, 0], [1, 0, -1, 1, 0]),
                                    (2, [0, 0, 0, 1, 0], [1, 0, -1, 0, 0])):
        binary = ordinal.binary_annotations(ann, threshold)
        assert list(binary.classes) == [0, 1]
        assert list(binary.labels) == labels
        assert list(binary.gold) == gold


def test_em_is_a_fixed_point_of_each_thresholds_two_coin_em(sim_cumulative):
    """Each threshold c is the two-coin problem "level > c": at the EM's answer an
    E-step by Bayes' rule (written out here) gives ``exceed_prob``, and the
    closed-form M-step with the Beta(3, 2) rate priors and the Beta(2, 2)
    prevalence prior gives back the rates; the log posterior is the sum of the
    K - 1 binary log posteriors, computed here from scratch."""
    fit = ordinal.em(sim_cumulative)
    assert fit.attrs["converged"]
    assert list(fit["threshold"].values) == [">1", ">2", ">3"]
    ann = sim_cumulative
    J, j, item = ann.n_annotators, ann.annotator_idx, ann.item_idx
    total_lp = 0.0
    for c in range(3):
        y = (ann.labels > c).astype(float)
        sens = fit["sensitivity"].values[0, 0, :, c]
        spec = fit["specificity"].values[0, 0, :, c]
        prev = fit["threshold_prevalence"].values[0, 0, c]
        log_pos = np.full(ann.n_items, np.log(prev))
        log_neg = np.full(ann.n_items, np.log1p(-prev))
        np.add.at(log_pos, item, y * np.log(sens[j]) + (1 - y) * np.log1p(-sens[j]))
        np.add.at(log_neg, item, (1 - y) * np.log(spec[j]) + y * np.log1p(-spec[j]))
        mu = expit(log_pos - log_neg)
        np.testing.assert_allclose(fit["exceed_prob"].values[0, 0, :, c], mu, atol=1e-9)
        m = mu[item]
        np.testing.assert_allclose(sens, (np.bincount(j, m * y, J) + 2)
                                   / (np.bincount(j, m, J) + 3), atol=1e-8)
        np.testing.assert_allclose(spec, (np.bincount(j, (1 - m) * (1 - y), J) + 2)
                                   / (np.bincount(j, 1 - m, J) + 3), atol=1e-8)
        np.testing.assert_allclose(prev, (mu.sum() + 1) / (ann.n_items + 2), atol=1e-9)
        total_lp += (np.logaddexp(log_pos, log_neg).sum() + stats.beta.logpdf(prev, 2, 2)
                     + stats.beta.logpdf(sens, 3, 2).sum() + stats.beta.logpdf(spec, 3, 2).sum())
    np.testing.assert_allclose(fit.attrs["log_posterior"], total_lp, rtol=1e-12)
    # EM recovers the simulated rates and the levels
    err = np.abs(fit["sensitivity"].values[0, 0] - np.asarray(CUMULATIVE["sensitivity"]))
    assert err.max() < 0.15
    assert cm.report.accuracy(fit, sim_cumulative) > 0.8
    prob = fit["item_class_prob"].values[0, 0]
    assert np.all(prob >= 0) and np.allclose(prob.sum(axis=1), 1)
    assert fit.attrs["negative_items"] == ordinal.negative_differences(fit)["n_items"]


def test_em_warns_when_the_cumulative_probabilities_needed_repair():
    ann = cm.datasets.load_web_search()  # 5 relevance levels, 2665 items
    with pytest.warns(UserWarning, match=r"went negative for (\d+) of 2665 items.*"
                                         r"variant='latent'") as caught:
        fit = ordinal.em(ann)
    counts = ordinal.negative_differences(fit)
    message = next(str(w.message) for w in caught if "went negative" in str(w.message))
    assert f"for {int(counts['n_items'])} of 2665 items ({int(counts['n_cells'])} cells)" in message
    assert counts["n_items"] > 1000  # most items: the repair is the rule here, not rare
    # coherent exceedance probabilities (one two-coin truth per item) need no repair
    coherent = fit.copy()
    exceed = np.sort(fit["exceed_prob"].values, axis=-1)[..., ::-1]
    coherent["exceed_prob"] = (fit["exceed_prob"].dims, exceed)
    assert ordinal.negative_differences(coherent)["n_items"] == 0


def test_map_equals_em(sim_cumulative, cumulative_model):
    em_fit = ordinal.em(sim_cumulative)
    map_fit = cm.fit_map(cumulative_model)  # from the same majority-vote starts
    diffs = {name: float(np.abs(map_fit.posterior[name].values - em_fit[name].values).max())
             for name in ("sensitivity", "specificity", "threshold_prevalence", "exceed_prob",
                          "item_class_prob")}
    print("MAP-EM max abs diff", diffs)
    assert max(diffs.values()) <= 1e-6, diffs
    np.testing.assert_allclose(map_fit.attrs["log_posterior"], em_fit.attrs["log_posterior"],
                               rtol=1e-10)
    # EM's log posterior is the model's logp(jacobian=False) at the EM point
    logp = cumulative_model.compile_logp(jacobian=False)
    names = ("sensitivity", "specificity", "threshold_prevalence")
    point = {f"{k}_logodds__": np.log(v / (1 - v))
             for k, v in ((k, em_fit[k].values[0, 0]) for k in names)}
    np.testing.assert_allclose(logp(point), em_fit.attrs["log_posterior"], rtol=1e-10)
    assert map_fit.log_likelihood["item_labels"].sizes["item"] == sim_cumulative.n_items


@pytest.mark.parametrize("prior", ["vector", "matrix", "auto"])
def test_cumulative_classifier_prior_and_layout(sim_cumulative, prior):
    """With features, each threshold has its own logistic classifier, ``coef``
    (feature, threshold): the model's log density at the EM point equals EM's log
    posterior, under independent N(0, 1/gamma_f) coefficients, under a full
    precision matrix (each threshold's column ~ N(0, Gamma^-1)) and at "auto",
    where each threshold's column ~ N(0, I / alpha_c) with its own evidence
    precision alpha_c (the EM's ``attrs["coef_precision"]``, in threshold order)."""
    from scipy import stats

    rng = np.random.default_rng(2)
    level = np.asarray(sim_cumulative.gold)[:, None]  # features that inform every threshold
    ann = sim_cumulative.with_features(rng.normal(size=(sim_cumulative.n_items, 2))
                                       + level * np.array([0.8, -0.4]))
    gamma = {"vector": np.array([2.0, 0.5]), "matrix": np.array([[2.0, 0.6], [0.6, 1.0]]),
             "auto": "auto"}[prior]
    fit = ordinal.em(ann, coef_precision=gamma)
    coef = fit["coef"].values[0, 0]
    assert fit["coef"].dims[2:] == ("feature", "threshold") and coef.shape == (2, 3)
    model = ordinal.build_model(ann, coef_precision=gamma)
    assert model.named_vars_to_dims["coef"] == ("feature", "threshold")
    point = {f"{k}_logodds__": np.log(v / (1 - v)) for k, v in (
        (k, fit[k].values[0, 0]) for k in ("sensitivity", "specificity"))}
    point["coef"], point["intercept"] = coef, fit["intercept"].values[0, 0]
    logp = model.compile_logp(jacobian=False)
    np.testing.assert_allclose(logp(point), fit.attrs["log_posterior"], rtol=1e-10)
    # the coefficient prior alone, against scipy, column by column
    if prior == "auto":
        alphas = fit.attrs["coef_precision"]
        assert len(alphas) == 3 and len(set(alphas)) == 3  # one precision per threshold
        covs = [np.eye(2) / a for a in alphas]
    else:
        covs = [np.linalg.inv(gamma) if prior == "matrix" else np.diag(1 / gamma)] * 3
    expected = sum(stats.multivariate_normal(np.zeros(2), covs[t]).logpdf(coef[:, t])
                   for t in range(3))
    prior = model.compile_fn(model.logp(vars=[model["coef"]], jacobian=False))
    np.testing.assert_allclose(prior({"coef": coef}), expected, rtol=1e-12)


def test_cumulative_em_with_a_logistic_regression_per_threshold_is_the_glm(sim_cumulative):
    """Raykar sec. 8.2 with sec. 6.3's classifier: scikit-learn's logistic
    regression at C = 1 / coef_precision (unpenalised intercept) is each
    threshold's built-in M-step, so the EM reaches the GLM's fixed point, and
    its fitted list predicts new items as cm.predict does from the GLM fit."""
    linear = pytest.importorskip("sklearn.linear_model", reason="needs scikit-learn")
    rng = np.random.default_rng(3)
    level = np.asarray(sim_cumulative.gold)[:, None]
    ann = sim_cumulative.with_features(rng.normal(size=(sim_cumulative.n_items, 2))
                                       + level * np.array([0.8, -0.4])).standardized()
    glm = ordinal.em(ann, coef_precision=2.0, intercept_precision=0.0)
    clfs = [linear.LogisticRegression(C=0.5, tol=1e-12, max_iter=10_000) for _ in range(3)]
    fit = ordinal.em(ann, classifier=clfs, tol=1e-12)
    coef = np.column_stack([c.coef_.ravel() for c in clfs])
    np.testing.assert_allclose(coef, glm["coef"].values[0, 0], atol=1e-4)
    np.testing.assert_allclose([c.intercept_[0] for c in clfs], glm["intercept"].values[0, 0],
                               atol=1e-4)
    for name in ("sensitivity", "specificity", "exceed_prob", "item_class_prob"):
        np.testing.assert_allclose(fit[name].values, glm[name].values, atol=1e-5)
    assert "coef" not in fit and np.isnan(fit.attrs["log_posterior"]) and fit.attrs["converged"]
    assert len(fit.attrs["classifier"]) == 3 and fit.attrs["classifier_tuning"] == [
        "as given: C=0.5 set by the caller"] * 3
    new = rng.normal(size=(50, 2))  # as given; the GLM's fit standardises them as it did
    scaled = (new - ann.feature_center) / ann.feature_scale
    np.testing.assert_allclose(ordinal.classifiers_predict(clfs, scaled),
                               cm.predict(glm, new)["prob"].values, atol=1e-4)
    with pytest.raises(ValueError, match=r"classifiers_predict\(those estimators"):
        cm.predict(fit, new)
    with pytest.raises(ValueError, match=r"one binary classifier per threshold, 3 here"):
        ordinal.em(ann, classifier=clfs[0])
    with pytest.raises(ValueError, match="needs 3 distinct estimators.*got 3 with 1 distinct"):
        ordinal.em(ann, classifier=[clfs[0]] * 3)
    with pytest.raises(ValueError, match="needs annotations with features"):
        ordinal.em(ann.with_features(None), classifier=clfs)
    with pytest.raises(ValueError, match="applies to a classifier="):
        ordinal.em(ann, regularization=None)


def test_cumulative_annotator_summary(sim_cumulative):
    table = cm.report.annotator_summary(ordinal.em(sim_cumulative), ci_prob=0.9)
    assert table.index.names == ["annotator", "threshold"]
    assert len(table) == 5 * 3
    assert np.isfinite(table[["sensitivity_lower", "specificity_upper"]].values).all()
    assert (table["sensitivity_lower"] <= table["sensitivity_mean"]).all()
    row = table.loc[("annotator_0", ">2")]
    assert abs(row["sensitivity_mean"] - 0.90) < 0.15


def test_simulate_cumulative_rates(rng):
    sim = ordinal.simulate(variant="cumulative", **CUMULATIVE, n_items=20_000, rng=rng)
    z = sim.gold[sim.item_idx]
    order = sim.annotators.get_indexer([f"annotator_{k}" for k in range(5)])
    for k, j in enumerate(order):
        rows = sim.annotator_idx == j
        for c in range(3):
            sens = (sim.labels[rows & (z > c)] > c).mean()
            spec = (sim.labels[rows & (z <= c)] <= c).mean()
            assert abs(sens - CUMULATIVE["sensitivity"][k][c]) < 0.03
            assert abs(spec - CUMULATIVE["specificity"][k][c]) < 0.03
    assert list(sim.classes) == [1, 2, 3, 4]
    np.testing.assert_allclose(sim.truth["threshold_prevalence"].values, [0.75, 0.5, 0.25])


# ------------------------------------------------------------ latent
def test_simulate_latent_confusion(rng):
    sim = ordinal.simulate(**LATENT, n_items=20_000, labels_per_item=3, rng=rng)
    assert (np.bincount(sim.item_idx) == 3).all()
    conf = sim.truth["confusion"].values
    np.testing.assert_allclose(conf.sum(axis=-1), 1)
    z = sim.gold[sim.item_idx]
    j = sim.annotators.get_loc("annotator_2")
    for k in range(4):
        rows = (sim.annotator_idx == j) & (z == k)
        emp = np.bincount(sim.labels[rows], minlength=4) / rows.sum()
        np.testing.assert_allclose(emp, conf[j, k], atol=0.03)
    # an unbiased, noiseless annotator reports the truth
    exact = ordinal.latent_confusion([0.0], [1e-3], LATENT["level_spacing"])
    np.testing.assert_allclose(exact[0], np.eye(4), atol=1e-9)


def _tiny_latent(n_levels=3):
    # item "b" gets a repeated label from annotator "u"
    df = pd.DataFrame({
        "item": ["a", "a", "b", "b", "b", "c", "c", "d"],
        "annotator": ["u", "v", "u", "u", "w", "v", "w", "u"],
        "label": [3, 2, 1, 2, 1, 3, 3, 2] if n_levels == 3 else [4, 2, 1, 3, 1, 3, 4, 2],
    })
    return cm.Annotations.from_frame(df, classes=list(range(1, n_levels + 1)))


def _unconstrained(model, values):
    point = {}
    for rv in model.free_RVs:
        value_var = model.rvs_to_values[rv]
        tr = model.rvs_to_transforms.get(rv)
        x = np.asarray(values[rv.name], dtype=float)
        if tr is not None:
            x = tr.forward(pt.as_tensor(x), *rv.owner.inputs).eval()
        point[value_var.name] = x
    return point


@pytest.mark.parametrize("link, guessing, own_cuts, K, features", [
    ("logit", False, False, 3, False), ("probit", True, False, 3, False),
    ("logit", False, True, 3, False), ("logit", False, True, 4, False),
    ("probit", False, False, 3, True)])
def test_latent_marginal_matches_brute_force(link, guessing, own_cuts, K, features):
    """With features the level's prior is each item's ordered logit (a logistic
    cdf whatever the annotators' link), on the standardised features."""
    ann = _tiny_latent(K)
    if features:
        ann = ann.with_features(np.array([[0.3, 1.0], [-1.2, 0.4], [2.0, -0.5], [0.1, 0.0]]))
    classifier = dict(coef_precision=[0.7, 2.0], intercept_precision=0.2) if features else {}
    model = ordinal.build_model(ann, variant="latent", link=link, guessing=guessing,
                                annotator_cutpoints=own_cuts, **classifier)
    # the interior levels' intervals, per annotator: narrower, wider, much wider
    ratio = np.array([[-0.4], [0.3], [1.2]]) if K == 3 else np.array(
        [[-0.4, 0.5], [0.3, -0.2], [1.2, 0.1]])
    spacing = np.array([0.35, 0.65]) if K == 3 else np.array([0.2, 0.5, 0.3])
    values = {"prevalence": np.array([0.2, 0.5, 0.3]) if K == 3 else np.array(
                  [0.1, 0.4, 0.3, 0.2]),
              "bias": np.array([0.4, -0.1, -0.2]),
              "noise": np.array([0.7, 1.3, 0.5]), "level_spacing": spacing,
              "guess_rate": np.array([0.1, 0.3, 0.05]), "log_width_ratio": ratio,
              "coef": np.array([0.8, -1.1]), "truth_cutpoints": np.array([-0.6, 0.9])}
    point = _unconstrained(model, values)
    prior = np.tile(values["prevalence"], (ann.n_items, 1))
    if features:
        x = ann.standardized().features
        below = expit(values["truth_cutpoints"][None, :] - (x @ values["coef"])[:, None])
        prior = np.diff(np.hstack([np.zeros((4, 1)), below, np.ones((4, 1))]), axis=1)
    cdf = expit if link == "logit" else stats.norm.cdf
    locs = (K - 1) * np.concatenate([[0.0], np.cumsum(spacing)])
    shared = (locs[:-1] + locs[1:]) / 2
    if K == 3:  # an annotator's two cut points straddle the shared ones' midpoint,
        # exp(ratio) times as far apart
        half = np.exp(ratio[:, 0]) * (shared[1] - shared[0]) / 2
        own = [shared.mean() + np.array([-half[j], half[j]]) for j in range(3)]
    else:  # interior intervals exp(ratio) times the shared widths, centred alike
        own = []
        for j in range(3):
            gaps = np.exp(ratio[j]) * np.diff(shared)
            c = np.concatenate([[0.0], np.cumsum(gaps)])
            own.append(c - c.mean() + shared.mean())
    cuts = [own[j] if own_cuts else shared for j in range(3)]

    def p_label(j, k, y, guessing=guessing):
        if guessing:
            guess = values["guess_rate"][j]
            return (1 - guess) * p_label(j, k, y, False) + guess / K
        upper = 1.0 if y == K - 1 else cdf((cuts[j][y] - locs[k] - values["bias"][j])
                                           / values["noise"][j])
        lower = 0.0 if y == 0 else cdf((cuts[j][y - 1] - locs[k] - values["bias"][j])
                                       / values["noise"][j])
        return upper - lower

    total = 0.0
    for z in itertools.product(range(K), repeat=ann.n_items):
        p = np.prod(prior[np.arange(ann.n_items), list(z)])
        for i, j, y in zip(ann.item_idx, ann.annotator_idx, ann.labels, strict=True):
            p *= p_label(j, z[i], y)
        total += p
    # PyMC's normal log-cdf is accurate to ~1e-9 (relative), the logistic one to rounding
    rtol = 1e-10 if link == "logit" else 1e-7
    per_item = model.compile_fn(model.logp(vars=[model["item_labels"]], sum=False)[0])(point)
    assert per_item.shape == (4,)
    np.testing.assert_allclose(per_item.sum(), np.log(total), rtol=rtol)
    # the whole model, priors included, no Jacobian (what find_MAP maximises)
    log_prior = (stats.norm.logpdf(values["coef"], scale=1 / np.sqrt([0.7, 2.0])).sum()
                 + stats.norm.logpdf(values["truth_cutpoints"], scale=1 / np.sqrt(0.2)).sum()
                 if features else stats.dirichlet.logpdf(values["prevalence"], [2] * K))
    log_prior += (stats.gamma.logpdf(values["noise"], 2, scale=1).sum()
                 + stats.dirichlet.logpdf(values["level_spacing"], [5] * (K - 1)))
    log_prior += stats.norm.logpdf(values["bias"]).sum()
    if guessing:
        log_prior += stats.beta.logpdf(values["guess_rate"], 1, 4).sum()
    if own_cuts:
        log_prior += stats.norm.logpdf(ratio, scale=ordinal.DEFAULT_PRIORS["width_sd"]).sum()
        rtol = 1e-9  # PyMC's Normal log-density at sigma = 0.5 is 1.9e-9 per value off scipy's
        own_graph = model.replace_rvs_by_values([model["annotator_cutpoints"]])[0]
        own = model.compile_fn(own_graph, inputs=model.value_vars,
                               on_unused_input="ignore")(point)
        np.testing.assert_allclose(own, cuts, rtol=1e-13)
    np.testing.assert_allclose(model.compile_logp(jacobian=False)(point),
                               np.log(total) + log_prior, rtol=rtol)
    # the simulator's NumPy confusion is the same cumulative link
    conf = ordinal.latent_confusion(values["bias"], values["noise"], values["level_spacing"],
                                    link=link, log_width_ratio=ratio if own_cuts else None)
    expected = [[[p_label(j, k, y, False) for y in range(K)] for k in range(K)]
                for j in range(3)]
    np.testing.assert_allclose(conf, expected, rtol=1e-12)


def test_latent_classifier_map_predicts_new_items_near_the_truth():
    """An ordered-logit truth of five features (two of them noise), 400 items with
    three labels each from five annotators of the latent model. The MAP fit at
    the default precision, with Laplace draws, predicts 2,000 new items within
    0.03 of the true ordered logit's accuracy (measured 0.502 against 0.514);
    cm.predict's probabilities are the mean of the ordered logit's over the
    draws by hand; the annotators' overall accuracy weighs their per-class
    accuracies by the MAP's class shares (the draws have none); and "auto" is
    the cumulative thresholds' pooled evidence precision."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2400, 5))
    beta, cuts = np.array([1.5, -1.0, 0.5, 0.0, 0.0]), np.array([-1.5, 0.0, 1.5])
    level = np.searchsorted(cuts, X @ beta + rng.logistic(size=2400))
    ann = ordinal.simulate(bias=[0.3, -0.2, 0.0, 0.5, -0.4], noise=[0.6, 1.0, 0.8, 1.2, 0.7],
                           n_classes=4, true_labels=level[:400], labels_per_item=3,
                           rng=rng).with_features(X[:400])
    fit = cm.fit_map(ordinal.build_model(ann, variant="latent"), laplace=True, random_seed=0)
    new, truth = X[400:], level[400:]
    prob = cm.predict(fit, new)["prob"].values

    def ordered_logit(coef, cut_points, x):
        below = expit(cut_points[..., None, :] - (x @ coef.T).T[..., None])
        edges = np.zeros((*below.shape[:-1], 1)), np.ones((*below.shape[:-1], 1))
        return np.diff(np.concatenate([edges[0], below, edges[1]], axis=-1), axis=-1)

    true_prob = ordered_logit(beta[None], cuts[None], new)[0]
    accuracy = [np.mean(p.argmax(axis=1) == truth) for p in (prob, true_prob)]
    assert accuracy[0] > accuracy[1] - 0.03, accuracy
    draws = fit["laplace"].to_dataset()
    scaled = (new - X[:400].mean(axis=0)) / X[:400].std(axis=0)
    by_hand = ordered_logit(draws["coef"].values[0], draws["truth_cutpoints"].values[0], scaled)
    np.testing.assert_allclose(prob, by_hand.mean(axis=0), rtol=1e-10, atol=1e-12)
    assert np.sign(fit.posterior["coef"].values[0, 0][:3]).tolist() == [1, -1, 1]
    table = cm.report.annotator_summary(fit)
    shares = fit.posterior["item_class_prob"].values[0, 0].mean(axis=0)
    per_class = table[[f"accuracy_{k}_mean" for k in range(1, 5)]].to_numpy()
    np.testing.assert_allclose(table["accuracy_mean"], per_class @ shares, rtol=1e-10)
    # "auto": the model equals the one at the pooled precision, and not the one at 4
    point = fit.posterior.isel(chain=0, draw=0)
    pooled = ordinal.pooled_precision(ann.standardized())
    assert abs(np.log(pooled / 4.0)) > 0.5, pooled
    at = ordinal.build_model(ann, variant="latent", coef_precision=pooled)
    other = ordinal.build_model(ann, variant="latent", coef_precision=4.0)
    auto = ordinal.build_model(ann, variant="latent")
    values = {v: point[v].values for v in ("coef", "truth_cutpoints", "bias", "noise",
                                             "level_spacing")}
    logp = [m.compile_logp()(_unconstrained(m, values)) for m in (auto, at, other)]
    assert logp[0] == pytest.approx(logp[1], rel=1e-12) and abs(logp[0] - logp[2]) > 1


def test_latent_map_that_merges_a_level_says_so():
    """Nobody says level 3: the latent MAP's ordered logit sets its cut points >2 and
    >3 equal (level 3 gets probability 0 for every item), and fit_map says so,
    naming them; with the labels as simulated it does not."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 3))
    level = np.searchsorted([-1.5, 0.0, 1.5], X @ np.array([1.5, -1.0, 0.5])
                            + rng.logistic(size=200))
    ann = ordinal.simulate(bias=[0.2, -0.3, 0.0, 0.1], noise=[0.6, 0.8, 0.7, 0.9], n_classes=4,
                           true_labels=level, labels_per_item=3, rng=rng).with_features(X)
    never_three = dataclasses.replace(ann, labels=np.where(ann.labels == 2, 1, ann.labels))
    with pytest.warns(UserWarning, match=r"cut points equal, truth_cutpoints '>2' and '>3'"):
        fit = cm.fit_map(ordinal.build_model(never_three, variant="latent"))
    cuts = fit.posterior["truth_cutpoints"].values[0, 0]
    assert cuts[2] - cuts[1] < 1e-8 and cuts[1] - cuts[0] > 1
    assert cm.predict(fit, X[:20])["prob"].values[:, 2].max() < 1e-6
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        cm.fit_map(ordinal.build_model(ann, variant="latent"))
    assert not [w for w in record if "cut points equal" in str(w.message)]


def test_pooled_precision_of_one_threshold_is_the_two_coin_evidence():
    """Two levels: one threshold, so the pooled precision is that two-coin EM's
    evidence precision."""
    from crowd_models.models import two_coin

    rng = np.random.default_rng(1)
    ann = ordinal.simulate(bias=[0.2, -0.3, 0.1], noise=[0.5, 0.8, 0.6], n_classes=2,
                           n_items=300, rng=rng)
    ann = ann.with_features(ann.gold[:, None] + rng.normal(size=(300, 3))).standardized()
    expected = two_coin.em(ordinal.binary_annotations(ann, 0)).attrs["coef_precision"]
    assert ordinal.pooled_precision(ann) == pytest.approx(expected, rel=1e-12)


# ------------------------------------------------------------ slow tier
@pytest.mark.slow
def test_map_recovers_per_annotator_cutpoints():
    """Two annotators who use the scale unevenly: annotator_0 rarely says the top
    level (level 3's interval twice as wide, level 2's narrower), annotator_3
    rarely the bottom one (the mirror image); the others use the shared cut points."""
    ratio = np.zeros((5, 2))
    ratio[0] = [-0.4, 0.7]
    ratio[3] = [0.7, -0.4]
    sim = ordinal.simulate(**LATENT, log_width_ratio=ratio, n_items=600,
                           rng=np.random.default_rng(12))
    np.testing.assert_allclose(sim.truth["log_width_ratio"].values, ratio)
    shared = sim.truth["cutpoints"].values
    own = sim.truth["annotator_cutpoints"].values
    np.testing.assert_allclose(own[[1, 2, 4]], np.broadcast_to(shared, (3, 3)), rtol=1e-12)
    np.testing.assert_allclose(own.mean(axis=1), shared.mean(), rtol=1e-12)  # bias: no shift
    np.testing.assert_allclose(np.diff(own[0]), np.diff(shared) * np.exp(ratio[0]), rtol=1e-12)
    # the mode is all this checks: no Newton polish (its Hessian graph compiles slowly)
    fit = cm.fit_map(ordinal.build_model(sim, variant="latent", annotator_cutpoints=True),
                     polish=False)
    est = fit.posterior["log_width_ratio"].values[0, 0]
    assert np.abs(est[[0, 3]] - ratio[[0, 3]]).max() < 0.3
    assert np.abs(est[[1, 2, 4]]).max() < 0.25  # the others stay near the shared points
    assert fit.posterior["log_width_ratio"].dims[2:] == ("annotator", "inner_level")
    assert list(fit.posterior["inner_level"].values) == [2, 3]
    with pytest.raises(ValueError, match="log_width_ratio must be a finite"):
        ordinal.simulate(**LATENT, log_width_ratio=ratio[:, :1], n_items=5)
    with pytest.raises(ValueError, match="needs at least 3 levels"):
        ordinal.build_model(ordinal.simulate(bias=[0.0, 0.1], noise=[1.0, 1.0], n_classes=2,
                                             n_items=20, rng=1),
                            variant="latent", annotator_cutpoints=True)



@pytest.mark.slow
def test_nuts_recovers_the_cumulative_model(sim_cumulative, cumulative_model):
    import arviz as az

    # four chains: r-hat <= 1.01 over 27 parameters from two chains of 600 draws sat at
    # the edge of its own noise (1.0113 for nutpie's chains of one seed)
    idata = cm.sample(cumulative_model, draws=600, tune=600, chains=4, random_seed=4,
                      progressbar=False)
    summ = az.summary(idata, var_names=["sensitivity", "specificity", "threshold_prevalence"])
    assert summ["r_hat"].max() <= 1.01
    assert int(idata.sample_stats["diverging"].sum()) == 0
    lo, hi = idata.posterior["sensitivity"].quantile([0.025, 0.975], dim=("chain", "draw"))
    truth = sim_cumulative.truth["sensitivity"]
    assert ((truth >= lo) & (truth <= hi)).mean() >= 0.8
    table = cm.report.annotator_summary(idata)
    assert np.isfinite(table["specificity_sd"]).all()


@pytest.mark.validate  # moved out of make test: the suite took 70 min in a fresh CI here
def test_nuts_recovers_the_latent_model():
    import arviz as az

    sim = ordinal.simulate(**LATENT, n_items=300, rng=np.random.default_rng(9))
    model = ordinal.build_model(sim, variant="latent")
    # 1500 draws: at 1000 the largest r-hat was 1.0105 (bias of annotator_1) on the
    # 2026-12-02 machine, at this commit and at the one before it alike
    idata = cm.sample(model, draws=1500, tune=600, chains=2, random_seed=8, progressbar=False)
    summ = az.summary(idata, var_names=["bias", "noise", "level_spacing", "prevalence"])
    assert summ["r_hat"].max() <= 1.01
    assert int(idata.sample_stats["diverging"].sum()) == 0
    covered = 0
    for name in ("bias", "noise", "level_spacing"):
        lo, hi = idata.posterior[name].quantile([0.025, 0.975], dim=("chain", "draw"))
        covered += int(((sim.truth[name] >= lo) & (sim.truth[name] <= hi)).sum())
    assert covered >= 11  # of 13 (95% intervals)
    table = cm.report.annotator_summary(idata)
    assert {"bias_mean", "noise_lower", "accuracy_mean"} <= set(table.columns)
    order = table["bias_mean"].sort_values().index
    assert list(order[[0, -1]]) == ["annotator_4", "annotator_0"]  # strictest, most lenient


@pytest.mark.validate  # moved out of make test: the suite took 70 min in a fresh CI here
def test_nuts_recovers_the_latent_model_with_every_option():
    # probit link, guessing and per-annotator cut points in one model: one NUTS run
    # covers the three options (the logit model without them is tested above)
    ratio = [[-0.4, 0.5], [0.0, 0.0], [0.3, -0.2], [0.0, 0.0], [0.2, 0.2]]
    sim = ordinal.simulate(**LATENT, link="probit", guess_rate=[0.1, 0.25, 0.05, 0.15, 0.1],
                           log_width_ratio=ratio, n_items=300, rng=np.random.default_rng(8))
    model = ordinal.build_model(sim, variant="latent", link="probit", guessing=True,
                                annotator_cutpoints=True)
    names = ("bias", "noise", "level_spacing", "guess_rate", "log_width_ratio")
    assert_nuts_recovers(model, {n: sim.truth[n].values for n in names}, min_cover=0.75)


@pytest.mark.validate  # moved out of make test: the suite took 70 min in a fresh CI here
def test_case_study_web_search():
    from tests.test_case_studies import run_and_check_figures

    result = run_and_check_figures("ordinal_relevance", [])
    found = re.search(r"^RESULT web_search best=(\S+) acc=(\d\.\d+) mae=(\d\.\d+) "
                      r"ds_acc=(\d\.\d+) ds_mae=(\d\.\d+)", result.stdout, re.MULTILINE)
    assert found, "no RESULT web_search line"
    acc, mae, ds_acc, ds_mae = map(float, found.groups()[1:])
    assert acc >= 0.83
    assert mae < ds_mae
    assert 0.80 <= ds_acc <= 0.85


def test_build_model_refuses_another_variants_keywords():
    """A keyword of the other variant is named, not silently dropped."""
    ann = _frame([1, 2, 3, 1, 2, 3])
    with pytest.raises(ValueError, match="guessing is a keyword of the latent ordinal variant, "
                                         "not of variant='cumulative'"):
        ordinal.build_model(ann, variant="cumulative", guessing=True)
    with pytest.raises(ValueError, match="sensitivity_prior is a keyword of the cumulative"):
        ordinal.build_model(ann, variant="latent", sensitivity_prior=(2, 2))
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        ordinal.build_model(ann, nope=1)
