"""The Dawid-Skene family: marginal likelihood, EM, MAP = EM, K = 2 = two-coin, NUTS."""

import itertools
import warnings

import numpy as np
import pandas as pd
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy import stats
from scipy.special import softmax

import crowd_models as cm
from crowd_models.data import Annotations
from crowd_models.models import dawid_skene as ds
from crowd_models.models import two_coin

from ..conftest import assert_estimates_inside_intervals, assert_nuts_recovers

SIMPLEX = pm.distributions.transforms.simplex


def _confusions(accuracies, K):
    return np.array([np.full((K, K), (1 - a) / (K - 1)) + np.eye(K) * (a - (1 - a) / (K - 1))
                     for a in accuracies])


@pytest.fixture(scope="module")
def sim4():
    conf = _confusions(np.linspace(0.5, 0.9, 6), 4)
    conf[0, 1] = [0.1, 0.3, 0.5, 0.1]  # one annotator mixes up classes 1 and 2
    return ds.simulate(conf, n_items=500, prevalence=[0.4, 0.3, 0.2, 0.1], labels_per_item=4,
                       classes=["a", "b", "c", "d"], rng=np.random.default_rng(1))


@pytest.fixture(scope="module")
def sim4_features():
    return ds.simulate(_confusions([0.55, 0.6, 0.7, 0.8], 3), n_items=400, n_features=3,
                       rng=np.random.default_rng(2))


def _tiny():
    """3 items, 2 annotators, 3 classes; item "q" has a repeated label from "u"."""
    return cm.Annotations.from_frame(pd.DataFrame({
        "item": ["p", "p", "q", "q", "q", "r"],
        "annotator": ["u", "v", "u", "u", "v", "v"],
        "label": ["x", "y", "z", "z", "x", "y"],
    }))


def _brute_force_marginal(ann, conf, prev):
    """The labels' marginal likelihood, every assignment of true classes summed."""
    total = 0.0
    for z in itertools.product(range(len(prev)), repeat=ann.n_items):
        logp = np.log(prev[list(z)]).sum()
        for i, j, y in zip(ann.item_idx, ann.annotator_idx, ann.labels, strict=True):
            logp += np.log(conf[j, z[i], y])
        total += np.exp(logp)
    return total


def test_marginal_loglik_matches_brute_force():
    ann = _tiny()
    model = ds.build_model(ann)
    rng = np.random.default_rng(0)
    conf = rng.dirichlet(np.ones(3), size=(2, 3))
    prev = np.array([0.5, 0.3, 0.2])
    total = _brute_force_marginal(ann, conf, prev)
    point = {"confusion_simplex__": SIMPLEX.forward(conf).eval(),
             "prevalence_simplex__": SIMPLEX.forward(prev).eval()}
    per_item = model.compile_fn(model.logp(vars=[model["item_labels"]], sum=False)[0])(point)
    np.testing.assert_allclose(per_item.sum(), np.log(total), rtol=1e-12)
    log_prior = sum(stats.dirichlet.logpdf(row, np.roll([3, 1.5, 1.5], k))
                    for jk in conf for k, row in enumerate(jk))
    log_prior += stats.dirichlet.logpdf(prev, [2, 2, 2])
    logp = model.compile_logp(jacobian=False)(point)
    np.testing.assert_allclose(logp, np.log(total) + log_prior, rtol=1e-12)


def test_two_classes_equal_the_two_coin_model(sim_plain, plain_model):
    model = ds.build_model(sim_plain)
    sens = np.array([0.85, 0.7, 0.6, 0.65, 0.55])
    spec = np.array([0.8, 0.75, 0.6, 0.7, 0.5])
    conf = np.stack([np.stack([spec, 1 - spec], -1), np.stack([1 - sens, sens], -1)], 1)
    ds_ll = model.compile_fn(model.logp(vars=[model["item_labels"]], sum=False)[0])({
        "confusion_simplex__": SIMPLEX.forward(conf).eval(),
        "prevalence_simplex__": SIMPLEX.forward(np.array([0.7, 0.3])).eval()})
    tc_ll = plain_model.compile_fn(plain_model.logp(vars=[plain_model["item_labels"]],
                                                    sum=False)[0])({
        "sensitivity_logodds__": np.log(sens / (1 - sens)),
        "specificity_logodds__": np.log(spec / (1 - spec)),
        "prevalence_logodds__": np.log(0.3 / 0.7)})
    np.testing.assert_allclose(ds_ll, tc_ll, rtol=1e-12)
    # and the EMs agree: default priors coincide for K = 2
    d_fit, t_fit = ds.em(sim_plain), two_coin.em(sim_plain)
    np.testing.assert_allclose(d_fit["confusion"].values[0, 0, :, 1, 1],
                               t_fit["sensitivity"].values[0, 0], atol=1e-8)
    np.testing.assert_allclose(d_fit["confusion"].values[0, 0, :, 0, 0],
                               t_fit["specificity"].values[0, 0], atol=1e-8)


@pytest.mark.parametrize("variant, names", [
    ("full", ["confusion", "prevalence"]),
    ("one_coin", ["accuracy", "confusion", "prevalence"]),
])
def test_map_equals_em(sim4, variant, names):
    em_fit = ds.em(sim4, variant=variant)
    assert em_fit.attrs["converged"]
    map_fit = cm.fit_map(ds.build_model(sim4, variant=variant))
    for name in names:
        diff = np.abs(map_fit.posterior[name].values - em_fit[name].values).max()
        assert diff <= 1e-6, (name, diff)
    np.testing.assert_allclose(map_fit.attrs["log_posterior"], em_fit.attrs["log_posterior"],
                               rtol=1e-10)


def test_map_equals_em_with_softmax_classifier(sim4_features):
    em_fit = ds.em(sim4_features)
    map_fit = cm.fit_map(ds.build_model(sim4_features))
    for name in ("confusion", "coef", "intercept"):
        diff = np.abs(map_fit.posterior[name].values - em_fit[name].values).max()
        assert diff <= 1e-6, (name, diff)
    # the EM's log posterior (its ZeroSumNormal priors included) is the model's
    np.testing.assert_allclose(map_fit.attrs["log_posterior"], em_fit.attrs["log_posterior"],
                               rtol=1e-12)
    # sum-to-zero coefficients, as the ZeroSumNormal prior requires
    np.testing.assert_allclose(em_fit["coef"].values.sum(-1), 0, atol=1e-12)


@pytest.fixture(scope="module")
def dog():
    return cm.datasets.load_dog()


def test_map_equals_em_on_dog(dog):
    em_fit = ds.em(dog)
    map_fit = cm.fit_map(ds.build_model(dog))
    for name in ("confusion", "prevalence", "item_class_prob"):
        diff = np.abs(map_fit.posterior[name].values - em_fit[name].values).max()
        assert diff <= 1e-6, (name, diff)
    np.testing.assert_allclose(map_fit.attrs["log_posterior"], em_fit.attrs["log_posterior"],
                               rtol=1e-12)
    # majority vote with ties to the first class reaches 0.8178
    assert cm.report.accuracy(em_fit, dog) >= 0.84
    assert cm.report.accuracy(map_fit, dog) >= 0.84


@pytest.mark.validate  # NUTS on 807 items: about 110 s once compiled, 310 s cold
def test_hierarchical_nuts_mixes_on_dog(dog):
    """The non-centred hierarchical model on real data: every free variable's
    r-hat <= 1.01 from four jittered MAP starts, no divergence, no chain in a
    label-switched mode (web search, whose modes are of equal height, is
    DEVELOPING.md's counter-example)."""
    model = ds.build_model(dog, variant="hierarchical")
    idata = cm.sample(model, random_seed=1, progressbar=False)
    _assert_mixed(model, idata)
    assert cm.report.accuracy(idata, dog) >= 0.83


@pytest.mark.validate  # 10,000 draws a chain on 2665 items: about 400 s, and about 18 GB of
# memory at the peak (each of the 40,000 draws' item probabilities and confusion matrices)
def test_hierarchical_nuts_mixes_on_web_search_within_the_map_mode():
    """Web search's hierarchical posterior has label-switched modes of equal
    height (jittered chains land in different ones), so the recipe is every
    chain at the MAP without jitter and long chains: the mode mixes slowly
    (level 2's prevalence), and at 10,000 draws every free variable's r-hat is
    <= 1.01 with no divergence. Its truth is below the pooled EM's (0.851)."""
    web = cm.datasets.load_web_search()
    model = ds.build_model(web, variant="hierarchical")
    idata = cm.sample(model, draws=10_000, tune=2_000, jitter=False, random_seed=1,
                      progressbar=False)
    _assert_mixed(model, idata)
    assert cm.report.accuracy(idata, web) >= 0.79


def _assert_mixed(model, idata):
    """Every free variable's r-hat <= 1.01, no divergence, no label-switched chain."""
    import arviz as az

    post = idata.posterior.to_dataset()
    rhat = az.rhat(post[[v.name for v in model.free_RVs]])
    assert float(rhat.to_array().max()) <= 1.01, rhat.max()
    assert int(idata.sample_stats["diverging"].sum()) == 0
    assert idata.attrs["label_switched_chains"] == []


def test_flat_map_started_at_em_stays_there():
    ann = cm.datasets.load_anesthesia()
    flat = dict(confusion_prior=(1, 1), prevalence_prior=1)
    em_fit = ds.em(ann, **flat)
    map_fit = cm.fit_map(ds.build_model(ann, **flat), start=em_fit)
    for name in ("confusion", "prevalence"):
        diff = np.abs(map_fit.posterior[name].values - em_fit[name].values).max()
        assert diff <= 1e-6, (name, diff)
    np.testing.assert_allclose(map_fit.attrs["log_posterior"], em_fit.attrs["log_posterior"],
                               rtol=1e-9)


def test_hierarchical_start_and_structure(sim4):
    model = ds.build_model(sim4, variant="hierarchical")
    start = model.crowd_start
    assert {"population_logit", "confusion_spread", "confusion_offset"} <= set(start)
    # the start maps back to the full model's majority-vote start
    full = ds.build_model(sim4).crowd_start["confusion"]
    logits = (start["population_logit"] + 2.0 * (np.eye(4) - 0.25))[None] + (
        start["confusion_spread"][None, :, None] * start["confusion_offset"])
    np.testing.assert_allclose(softmax(logits, axis=-1), np.clip(full, 1e-12, 1), atol=1e-9)
    np.testing.assert_allclose(start["confusion_offset"].sum(-1), 0, atol=1e-9)


def test_em_recovers_simulation(sim4):
    fit = ds.em(sim4)
    err = np.abs(fit["confusion"].values[0, 0] - sim4.truth["confusion"].values)
    assert np.median(err) < 0.05
    assert err[0, 1, 2] < 0.12  # the mixed-up row is found
    acc = cm.report.accuracy(fit, sim4)
    mv = cm.report.accuracy(cm.majority_vote(sim4, hard=True, ties="random", rng=0), sim4)
    assert acc > mv + 0.03
    # the Dirichlet approximation is alpha + expected counts; its mode is the MAP
    alpha = fit["confusion_alpha"].values
    mode = (alpha - 1) / (alpha - 1).sum(-1, keepdims=True)
    np.testing.assert_allclose(mode, fit["confusion"].values[0, 0], atol=1e-8)


def test_em_start_and_flat_anesthesia():
    ann = cm.datasets.load_anesthesia()
    fit = ds.em(ann, confusion_prior=(1, 1), prevalence_prior=1)
    # Dawid & Skene (1979), converged from the majority-vote start
    np.testing.assert_allclose(fit["prevalence"].values[0, 0],
                               [0.3996, 0.4220, 0.1118, 0.0667], atol=2e-3)
    other = ds.em(ann, confusion_prior=(1, 1), prevalence_prior=1,
                  start=np.random.default_rng(3).dirichlet(np.ones(4), size=45))
    assert other.attrs["converged"]
    with pytest.raises(ValueError, match="start must be"):
        ds.em(ann, start=np.ones((3, 4)))


def test_simulate_with_classifier_and_design(rng):
    conf = _confusions([0.6, 0.7, 0.8], 3)
    sim = ds.simulate(conf, n_items=3000, n_features=2, labels_per_item=2, rng=rng)
    assert np.bincount(sim.item_idx).tolist() == [2] * 3000
    W = sim.truth["coef"].values
    np.testing.assert_allclose(W.sum(1), 0, atol=1e-12)
    p = softmax(sim.features @ W + sim.truth["intercept"].values, axis=1)
    # the truth follows the classifier: mean log-probability of the drawn classes
    # beats that of shuffled classes
    z = sim.gold
    assert np.log(p[np.arange(3000), z]).mean() > np.log(p[np.arange(3000),
                                                           rng.permutation(z)]).mean()
    agree = sim.labels == z[sim.item_idx]
    j0 = sim.annotators.get_indexer(["annotator_0"])[0]
    assert abs(agree[sim.annotator_idx == j0].mean() - 0.6) < 0.04


def test_bad_input(sim4):
    with pytest.raises(ValueError, match="variant='two' is not one of"):
        ds.build_model(sim4, variant="two")
    with pytest.raises(ValueError, match="has no EM"):
        ds.em(sim4, variant="hierarchical")
    with pytest.raises(ValueError, match="population_prior must be"):
        ds.build_model(sim4, variant="hierarchical", population_prior=(2.0, 0.0))
    with pytest.raises(ValueError, match="spread_prior must be a positive number"):
        ds.build_model(sim4, variant="hierarchical", spread_prior=-1)
    with pytest.raises(ValueError, match="concentrations must be >= 1"):
        ds.em(sim4, confusion_prior=(0.5, 1))
    with pytest.raises(ValueError, match="a \\(4, 4\\) matrix"):
        ds.em(sim4, confusion_prior=np.ones((3, 3)))
    with pytest.raises(ValueError, match="prevalence_prior must be"):
        ds.em(sim4, prevalence_prior=[1, 2])
    with pytest.raises(ValueError, match="must be a positive number for the softmax"):
        ds.em(sim4.with_features(np.ones((sim4.n_items, 1))), coef_precision=0)
    with pytest.raises(ValueError, match="summing to 1"):
        ds.simulate(np.ones((2, 3, 3)), n_items=5)
    with pytest.raises(ValueError, match="needs categorical labels"):
        ds.em(cm.Annotations.from_frame(pd.DataFrame(
            {"item": [1, 2], "annotator": [1, 1], "label": [0.5, 2.0]}), continuous=True))



@pytest.mark.parametrize("variant", ["full", "one_coin"])
def test_em_with_a_scikit_learn_classifier_reaches_the_softmax_fixed_point(sim4_features,
                                                                            variant):
    """Raykar sec. 6.3 for K classes: scikit-learn's multinomial logistic regression
    minimises C * (the soft labels' log loss) + |W|^2 / 2 with an unpenalised
    intercept, the softmax M-step's objective with coef_precision = 1 / C and a
    flat intercept (a precision of 1e-10 here: the model needs a proper one).
    Both have zero-sum coefficients at the optimum (the penalty picks them among
    the shifts that leave the softmax unchanged), and the intercept of
    scikit-learn's L-BFGS, started at 0, keeps its zero sum (its gradient sums to
    0 over the classes), so coefficients and intercepts compare as they are (they
    agree to 5e-7, the posteriors to 2e-6, at these tolerances)."""
    linear_model = pytest.importorskip("sklearn.linear_model", reason="needs scikit-learn")
    # the estimator gets the features as given: standardised here, as the GLM's are
    sim4_features = sim4_features.standardized()
    glm = ds.em(sim4_features, variant=variant, coef_precision=2.0, intercept_precision=1e-10)
    clf = linear_model.LogisticRegression(C=0.5, tol=1e-7, max_iter=10_000)
    fit = ds.em(sim4_features, variant=variant, classifier=clf, tol=1e-7)
    assert fit.attrs["converged"] and np.isnan(fit.attrs["log_posterior"])
    assert "LogisticRegression" in fit.attrs["classifier"]
    assert "coef" not in fit and "prevalence" not in fit
    np.testing.assert_allclose(clf.coef_.T, glm["coef"].values[0, 0], atol=1e-4)
    np.testing.assert_allclose(clf.intercept_, glm["intercept"].values[0, 0], atol=1e-4)
    for name in ("confusion", "item_class_prob", "accuracy" if variant == "one_coin" else
                 "confusion_alpha"):
        np.testing.assert_allclose(fit[name].values, glm[name].values, atol=1e-4)
    np.testing.assert_allclose(fit.attrs["log_likelihood"], glm.attrs["log_likelihood"],
                               rtol=1e-8)
    # the fitted classifier predicts new items as the softmax classifier does
    new = np.random.default_rng(5).standard_normal((50, 3))  # on the standardised scale
    given = new * sim4_features.feature_scale + sim4_features.feature_center  # as given
    np.testing.assert_allclose(clf.predict_proba(new), cm.predict(glm, given)["prob"].values,
                               atol=1e-4)


def test_em_with_a_classifier_that_never_predicts_a_class(sim4_features):
    """A classifier whose classes_ lack a class: that class's prior is the floor, so
    its posterior is about 0 and every number stays finite."""
    linear_model = pytest.importorskip("sklearn.linear_model", reason="needs scikit-learn")

    class WithoutLastClass(linear_model.LogisticRegression):
        def fit(self, X, y, sample_weight=None):
            keep = y != 2
            return super().fit(X[keep], y[keep], sample_weight=sample_weight[keep])

    fit = ds.em(sim4_features, classifier=WithoutLastClass(), tol=1e-6)
    prob = fit["item_class_prob"].values[0, 0]
    assert np.all(np.isfinite(prob)) and prob[:, 2].max() < 1e-100
    np.testing.assert_allclose(prob.sum(axis=1), 1.0)
    assert np.isfinite(fit.attrs["log_likelihood"])


def test_em_with_a_classifier_bad_input(sim4, sim4_features):
    pytest.importorskip("sklearn", reason="needs scikit-learn")
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier

    with pytest.raises(ValueError, match="needs annotations with features"):
        ds.em(sim4, classifier=LogisticRegression())
    with pytest.raises(TypeError, match="scikit-learn classifier with fit and predict_proba"):
        ds.em(sim4_features, classifier=object())
    with pytest.raises(TypeError, match="KNeighborsClassifier.fit takes no sample_weight"):
        ds.em(sim4_features, classifier=KNeighborsClassifier())
    with pytest.raises(ValueError, match="full and one-coin variants, not variant='pooled'"):
        ds.em(sim4_features, variant="pooled", classifier=LogisticRegression())
    with pytest.raises(ValueError, match="max_iter must be a whole number >= 1"):
        ds.em(sim4_features, classifier=LogisticRegression(), max_iter=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = ds.em(sim4_features, classifier=LogisticRegression(), max_iter=2)
    assert fit.attrs["n_iter"] == 2 and not fit.attrs["converged"]
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "stopped after 2 iterations" in messages[0], messages
    assert caught[0].filename == __file__  # the user's line

def test_em_with_a_classifier_that_does_not_settle_stops_on_its_turns():
    """A classifier whose fits alternate between a prior that follows the feature
    (which carries the truth) and a flat one: the labels' log-likelihood goes up
    and down and never settles. The EM stops at its CLASSIFIER_TURNS-th turn with
    the reason, and returns its last step: the E-step of that step's confusion
    and the classifier's prior then, by hand. Stopped by max_iter first, it
    gives the generic advice."""
    base = pytest.importorskip("sklearn.base", reason="needs scikit-learn")
    from crowd_models.models import _common

    class Flipper(base.ClassifierMixin, base.BaseEstimator):
        def fit(self, X, y, sample_weight=None):
            self.n_fits_ = getattr(self, "n_fits_", 0) + 1
            self.classes_ = np.unique(y)
            return self

        def predict_proba(self, X):
            if self.n_fits_ % 2 == 0:
                return np.full((len(X), 2), 0.5)
            positive = np.where(X[:, 0] > 0, 0.8, 0.2)
            return np.stack([1 - positive, positive], axis=1)

    rng = np.random.default_rng(4)
    plain = ds.simulate(_confusions([0.65, 0.7, 0.75], 2), n_items=200, rng=rng)
    crowd = plain.with_features((2.0 * plain.gold - 1 + rng.normal(0, 0.8, 200))[:, None])
    clf = Flipper()
    with pytest.warns(UserWarning, match=r"went up and down 10 times \(each change more than "
                                         r"1e-06 of it\) without moving less than tol=1e-08: "
                                         r"Flipper's fit does not settle"):
        fit = ds.em(crowd, classifier=clf, regularization=None, tol=1e-8, max_iter=500)
    # the first change sets the direction, each later one turns it
    steps = _common.CLASSIFIER_TURNS + 2
    assert not fit.attrs["converged"] and fit.attrs["n_iter"] == steps == clf.n_fits_
    for n_fits in (steps, steps - 1):  # the last step's prior, and the one before
        clf.n_fits_ = n_fits
        joint = np.log(clf.predict_proba(crowd.features))  # standardised: the same sign
        np.add.at(joint, crowd.item_idx,
                  np.log(fit["confusion"].values[0, 0][crowd.annotator_idx, :, crowd.labels]))
        by_hand = np.exp(joint - joint.max(axis=1, keepdims=True))
        by_hand /= by_hand.sum(axis=1, keepdims=True)
        close = np.allclose(fit["item_class_prob"].values[0, 0], by_hand, atol=1e-12)
        assert close == (n_fits == steps)
    with pytest.warns(UserWarning, match=r"stopped after 4 iterations .* Raise max_iter"):
        short = ds.em(crowd, classifier=Flipper(), regularization=None, tol=1e-8, max_iter=4)
    assert short.attrs["n_iter"] == 4 and "stop_reason" not in short.attrs


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["full", "hierarchical"])
def test_nuts_recovers_confusions(variant):
    conf = _confusions([0.6, 0.7, 0.75, 0.8, 0.9], 3)
    sim = ds.simulate(conf, n_items=400, prevalence=[0.5, 0.3, 0.2],
                      rng=np.random.default_rng(9))
    model = ds.build_model(sim, variant=variant)
    # 1000 + 1000: the hierarchical r-hat at 500 draws after 800 tuning steps was
    # 1.019 with nutpie's chains (1.005 here), at about 10 s once compiled
    idata = cm.sample(model, draws=1000, tune=1000, chains=4, random_seed=5, progressbar=False)
    import arviz as az

    names = ["confusion", "prevalence"] + (
        ["confusion_mean", "confusion_spread"] if variant == "hierarchical" else [])
    rhat = az.rhat(idata.posterior.to_dataset()[names])
    # the largest of 48 (full) or 60 (hierarchical) r-hats: 1.0102 for the
    # hierarchical variant on 2026-12-08's machine, the same seed (1.005 before);
    # a chain in another mode gives 1.05 and more
    assert float(rhat.to_array().max()) <= 1.02
    assert int(idata.sample_stats["diverging"].sum()) == 0
    lo, hi = idata.posterior["confusion"].quantile([0.05, 0.95], dim=("chain", "draw")).values
    inside = (conf >= lo) & (conf <= hi)
    assert inside.mean() >= 0.8
    assert assert_estimates_inside_intervals(cm.report.annotator_summary(idata)) >= 5 * 4


@pytest.mark.slow
def test_nuts_recovers_one_coin_accuracies():
    accuracy = np.array([0.6, 0.7, 0.75, 0.8, 0.9])
    sim = ds.simulate(_confusions(accuracy, 3), n_items=300, prevalence=[0.5, 0.3, 0.2],
                      rng=np.random.default_rng(4))
    assert_nuts_recovers(ds.build_model(sim, variant="one_coin"),
                         {"accuracy": accuracy, "prevalence": sim.truth["prevalence"].values},
                         min_cover=0.75)


@pytest.mark.slow
def test_nuts_recovers_confusions_and_the_softmax_classifier():
    sim = ds.simulate(_confusions([0.6, 0.7, 0.75, 0.8, 0.9], 3), n_items=300, n_features=2,
                      rng=np.random.default_rng(5))
    # 1000 draws: r-hat over 51 parameters from 500 reached 1.011, its own noise
    idata = assert_nuts_recovers(ds.build_model(sim), {"confusion": sim.truth["confusion"].values},
                                 min_cover=0.8, draws=1000)
    # the classifier: centred coefficients (the model's), the true ones inside their intervals
    coef = idata.posterior["coef"].values.reshape(-1, 2, 3)
    lo, hi = np.quantile(coef, [0.05, 0.95], axis=0)
    truth = sim.truth["coef"].values
    assert ((truth >= lo) & (truth <= hi)).mean() >= 4 / 6


def test_dawid_skene_em_gives_a_row_without_evidence_the_uniform_distribution():
    # flat priors, annotators who never disagree: annotator C labels only items
    # that are certainly "x", so its row for true class "y" has no expected
    # counts at all (they underflow to 0); the M-step's 0/0 there is 1/K. So is
    # D's, whose one label gives its "x" row a total count of exactly 1
    rows = [(i, a, "x") for i in range(10) for a in "ABC"]
    rows += [(i, a, "y") for i in range(10, 20) for a in "AB"]
    rows += [(0, "D", "x")]  # one label: its row for "x" holds a single count
    ann = Annotations.from_frame(pd.DataFrame(rows, columns=["item", "annotator", "label"]),
                                 item="item", annotator="annotator", label="label")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # estimates on the boundary
        fit = ds.em(ann, confusion_prior=(1.0, 1.0), prevalence_prior=1.0)
    conf = fit["confusion"].values[0, 0]
    np.testing.assert_array_equal(conf[2, 1], [0.5, 0.5])
    np.testing.assert_array_equal(conf[:2], np.broadcast_to(np.eye(2), (2, 2, 2)))
    np.testing.assert_array_equal(conf[2, 0], [1.0, 0.0])
    np.testing.assert_array_equal(conf[3], [[1.0, 0.0], [0.5, 0.5]])
    # every item's marginal is its class's prevalence, 1/2
    np.testing.assert_allclose(fit.attrs["log_posterior"], 20 * np.log(0.5), rtol=1e-12)


# ------------------------------------------------------------------ pooled
def _zero_sum(x):
    return x - x.mean(axis=-1, keepdims=True)


def test_pooled_marginal_and_priors_match_brute_force():
    ann = _tiny()
    spread, advantage, sd = 0.7, 2.0, 1.5
    model = ds.build_model(ann, variant="pooled", spread=spread)
    rng = np.random.default_rng(3)
    pop = _zero_sum(rng.normal(size=(3, 3)))
    offset = _zero_sum(rng.normal(size=(2, 3, 3)))
    prev = np.array([0.5, 0.3, 0.2])
    conf = softmax((pop + advantage * (np.eye(3) - 1 / 3))[None] + spread * offset, axis=-1)
    total = _brute_force_marginal(ann, conf, prev)
    zerosum = pm.distributions.transforms.ZeroSumTransform([-1])
    point = {"population_logit_zerosum__": zerosum.forward(pt.as_tensor(pop)).eval(),
             "confusion_offset_zerosum__": zerosum.forward(pt.as_tensor(offset)).eval(),
             "prevalence_simplex__": SIMPLEX.forward(prev).eval()}
    per_item = model.compile_fn(model.logp(vars=[model["item_labels"]], sum=False)[0])(point)
    np.testing.assert_allclose(per_item.sum(), np.log(total), rtol=1e-12)
    # zero-sum normals: each row's K - 1 free coordinates are iid N(0, sd) in an
    # orthonormal basis of the zero-sum plane, so their density is the normal
    # density of |x| in K - 1 dimensions
    def zsn(x, s):
        return stats.norm.logpdf(0, scale=s) * x.size * 2 / 3 - 0.5 * np.sum(x ** 2) / s ** 2

    log_prior = zsn(pop, sd) + zsn(offset, 1.0) + stats.dirichlet.logpdf(prev, [2, 2, 2])
    logp = model.compile_logp(jacobian=False)(point)
    np.testing.assert_allclose(logp, np.log(total) + log_prior, rtol=1e-12)
    # the EM's objective is the same function
    from crowd_models.models.dawid_skene import _log_posterior, _priors
    pri = _priors(ann, "pooled", None, (3, 2), 2.0, (advantage, sd), 1.0, 1.0, 0.01)
    params = {"confusion": conf, "population_logit": pop, "confusion_offset": offset,
              "prevalence": prev}
    np.testing.assert_allclose(_log_posterior(ann, params, pri, "pooled"), logp, rtol=1e-12)


def _pooled_simulation(spread, rng, n_annotators=60, n_items=600, labels_per_item=5,
                       pop=None):
    """Labels from the pooled model itself: rows softmax(pop + spread * offset)
    (pop: the default population, advantage 2 on the diagonal)."""
    K = 3
    pop = 2.0 * (np.eye(K) - 1 / K) if pop is None else pop
    offset = _zero_sum(rng.normal(size=(n_annotators, K, K)))
    conf = softmax(pop[None] + spread * offset, axis=-1)
    return ds.simulate(conf, n_items=n_items, prevalence=[0.5, 0.3, 0.2],
                       labels_per_item=labels_per_item, rng=rng)


def test_empirical_spread_recovers_the_simulated_spread():
    rng = np.random.default_rng(11)
    # 120 labels per annotator, 40 per confusion row (with 50 per annotator the
    # spread 0.5 comes out near 0.42: a small spread is hard to tell from none)
    found = {s: ds.empirical_spread(_pooled_simulation(s, rng, labels_per_item=12))
             for s in (0.5, 2.0)}
    for true, value in found.items():
        assert abs(np.log(value / true)) < np.log(1.25), found
    # the EM with spread=None runs at that spread; on 200 sparse annotators (15
    # labels each) who share a population confusion unlike the full model's
    # default prior, the spread is found and pooling gets more of the truth
    # right on average (per draw of 600 items: -0.017, +0.023, +0.015)
    population = np.log([[0.8, 0.15, 0.05], [0.3, 0.6, 0.1], [0.05, 0.25, 0.7]])
    gains = []
    for seed in range(3):
        sim = _pooled_simulation(0.5, np.random.default_rng(seed), n_annotators=200,
                                 pop=population)
        fit = ds.em(sim, variant="pooled")
        assert fit.attrs["spread"] == pytest.approx(ds.empirical_spread(sim), rel=1e-12)
        assert float(fit["confusion_spread"]) == fit.attrs["spread"]
        assert abs(np.log(fit.attrs["spread"] / 0.5)) < np.log(1.3)
        gains.append(cm.report.accuracy(fit, sim) - cm.report.accuracy(ds.em(sim), sim))
    assert np.mean(gains) >= 0.005, gains


def test_pooled_map_equals_em(sim4):
    em_fit = ds.em(sim4, variant="pooled")
    assert em_fit.attrs["converged"]
    model = ds.build_model(sim4, variant="pooled")
    assert float(model["confusion_spread"].get_value()) == em_fit.attrs["spread"]
    map_fit = cm.fit_map(model)
    for name in ("confusion", "confusion_mean", "population_logit", "prevalence",
                 "item_class_prob"):
        diff = np.abs(map_fit.posterior[name].values - em_fit[name].values).max()
        assert diff <= 1e-6, (name, diff)
    np.testing.assert_allclose(map_fit.attrs["log_posterior"], em_fit.attrs["log_posterior"],
                               rtol=1e-10)
    # zero sums, as the ZeroSumNormal priors require
    np.testing.assert_allclose(em_fit["confusion_offset"].values.sum(-1), 0, atol=1e-12)


def test_pooled_bad_input(sim4):
    for bad in (-1.0, 0.0, np.inf, "auto", [1.0, 2.0], True):
        with pytest.raises(ValueError, match="spread must be a positive number"):
            ds.em(sim4, variant="pooled", spread=bad)
    with pytest.raises(ValueError, match="spread= is the pooled variant's"):
        ds.build_model(sim4, variant="full", spread=1.0)
    with pytest.raises(ValueError, match="population_prior must be"):
        ds.em(sim4, variant="pooled", population_prior=(2.0, -1.0))


def _sparse_crowd(seed, prevalence=(0.35, 0.25, 0.2, 0.12, 0.08)):
    """Issue 42's crowd shape (``dawid_skene.simulate_sparse_crowd``)."""
    return ds.simulate_sparse_crowd(seed, prevalence=prevalence)


def test_simulate_labels_per_annotator():
    counts = np.r_[np.full(40, 3), 50]
    sim = ds.simulate(np.tile(np.eye(3) * 0.7 + 0.1, (41, 1, 1)), n_items=60,
                      labels_per_annotator=counts, rng=0)
    per_annotator = sim.n_labels()
    assert sorted(per_annotator) == sorted(counts)
    pairs = sim.item_idx.astype(np.int64) * sim.n_annotators + sim.annotator_idx
    assert len(np.unique(pairs)) == len(pairs)  # distinct items per annotator
    per_item = np.bincount(sim.item_idx, minlength=60)
    assert sim.n_items == 60 and per_item.max() - per_item.min() <= 1  # 170 labels, even
    with pytest.raises(ValueError, match="not both"):
        ds.simulate(np.tile(np.eye(3), (41, 1, 1)), n_items=60, labels_per_item=2,
                    labels_per_annotator=counts)
    with pytest.raises(ValueError, match="between 1 and n_items"):
        ds.simulate(np.tile(np.eye(3), (41, 1, 1)), n_items=60,
                    labels_per_annotator=np.r_[np.full(40, 3), 61])


def test_sparse_crowd_with_spammers():
    """spam_share: that share of the light annotators label by a habit of their own
    (every row of their confusion the same); the others' diagonals are their
    accuracies."""
    sim = ds.simulate_sparse_crowd(3, n_light=200, heavy=(), spam_share=0.4)
    conf = sim.truth["confusion"].values
    constant = np.all(np.abs(conf - conf[:, :1]) < 1e-12, axis=(1, 2))
    assert sim.n_annotators == 200 and 0.3 < constant.mean() < 0.5
    assert np.all(np.diagonal(conf[~constant], axis1=1, axis2=2).min(axis=1) >= 0.35)
    assert sorted(set(sim.n_labels())) == [2, 3, 4, 5, 6]
    with pytest.raises(ValueError, match="spam_share must be a share"):
        ds.simulate_sparse_crowd(0, spam_share=1.5)


def test_pooled_newton_m_step_is_exact_in_a_few_steps_on_a_sparse_crowd():
    """The pooled M-step on the expected counts of issue 42's crowd shape (425
    annotators, a few of them heavy): Newton's method reaches the optimum, to
    a gradient of 1e-8, in at most 15 steps from zero (4 at spreads up to
    0.6, 10 at 5: the damped steps of a far start) where the L-BFGS it
    replaced took 100-1700 iterations, and agrees with an independent
    optimiser (SciPy's L-BFGS to a tight tolerance)."""
    from scipy.optimize import minimize
    from scipy.special import log_softmax

    from crowd_models.models import _common as C
    sim = _sparse_crowd(0)
    counts = C.expected_counts(sim, cm.majority_vote(sim).values)
    J, K, _ = counts.shape
    advantage, sd = 2.0, 1.5
    pri = {"population": (advantage, sd)}

    def negative(x, spread):
        u, o = x[:K * K].reshape(K, K), x[K * K:].reshape(J, K, K)
        logp = log_softmax((u + advantage * (np.eye(K) - 1 / K))[None] + spread * o, axis=-1)
        resid = counts - counts.sum(axis=2, keepdims=True) * np.exp(logp)
        value = np.sum(counts * logp) - 0.5 * np.sum(o ** 2) - 0.5 * np.sum(u ** 2) / sd ** 2
        grad = np.r_[(resid.sum(axis=0) - u / sd ** 2).ravel(), (spread * resid - o).ravel()]
        return -value, -grad

    zero = {"population_logit": np.zeros((K, K)), "confusion_offset": np.zeros((J, K, K))}
    for spread in (0.05, 0.6, 5.0):
        rows, value = ds._fit_pooled_rows(counts, spread, pri, zero, max_iter=15)
        x = np.r_[rows["population_logit"].ravel(), rows["confusion_offset"].ravel()]
        fun, grad = negative(x, spread)
        assert np.abs(grad).max() < 1e-8
        assert value == pytest.approx(-fun, rel=1e-12)
        if spread != 0.6:
            continue
        ref = minimize(negative, np.zeros_like(x), args=(spread,), jac=True,
                       method="L-BFGS-B", options={"maxiter": 5000, "gtol": 1e-9, "ftol": 0})
        assert value >= -ref.fun - 1e-9 * abs(ref.fun)
        np.testing.assert_allclose(x, ref.x, atol=1e-4)


def test_pooled_on_a_sparse_many_annotator_crowd():
    """Issue 42: on 5 classes with 425 mostly sparse annotators the pooled EM
    keeps a clear diagonal in every population row (no near-uniform row that
    soaks up the doubtful items), and its truth is as good as majority vote's
    and within 2 points of the full model's. Measured (seeds 0-3, DEVELOPING.md
    "Pooled Dawid-Skene"): pooled - full +0.003, -0.017, 0, +0.013; pooled -
    majority vote +0.020, -0.003, +0.020, +0.047."""
    gaps_full, gaps_vote = [], []
    for seed in (0, 1):
        sim = _sparse_crowd(seed)
        pooled, full = ds.em(sim, variant="pooled"), ds.em(sim)
        vote = cm.majority_vote(sim, hard=True, ties="first").to_numpy()
        acc_vote = float(np.mean(vote.argmax(axis=1) == sim.gold))
        acc_pooled, acc_full = (cm.report.accuracy(pooled, sim), cm.report.accuracy(full, sim))
        population = pooled["confusion_mean"].values.reshape(5, 5)
        assert np.diag(population).min() > 0.5, population
        assert np.all(np.diag(population) > population.max(axis=1) - 1e-12)
        assert 0.3 < pooled.attrs["spread"] < 1.5
        gaps_full.append(acc_pooled - acc_full)
        gaps_vote.append(acc_pooled - acc_vote)
    assert min(gaps_full) > -0.02, gaps_full
    assert min(gaps_vote) > -0.01 and np.mean(gaps_vote) > 0, gaps_vote


def test_pooled_em_stores_dirichlet_rows_for_intervals(sim4):
    """Every annotator of a pooled EM fit gets intervals (the command line's default
    Dawid-Skene fit); its Dirichlet rows have the EM rows as means, and their totals
    are the expected labels plus what the spread's prior adds: nothing much when the
    spread is wide, more the narrower it is."""
    from crowd_models import report
    from crowd_models.models import _common as C

    wide = ds.em(sim4, variant="pooled", spread=50.0)
    narrow = ds.em(sim4, variant="pooled", spread=0.5)
    def point(fit, name):
        da = fit[name]
        return da.isel({d: 0 for d in ("chain", "draw") if d in da.dims}).to_numpy()

    for fit, spread in ((wide, 50.0), (narrow, 0.5)):
        alpha, conf = point(fit, "confusion_alpha"), point(fit, "confusion")
        totals = alpha.sum(axis=-1)
        np.testing.assert_allclose(alpha / totals[..., None], conf, rtol=1e-12)
        prob = point(fit, "item_class_prob")
        counts = C.expected_counts(sim4, prob).sum(axis=-1)
        prior = (sim4.n_classes - 1) / (spread ** 2 * (1 - (conf ** 2).sum(axis=-1)))
        np.testing.assert_allclose(totals, counts + prior, rtol=1e-10)
    assert (narrow["confusion_alpha"].sum(("label_class",)) >
            wide["confusion_alpha"].sum(("label_class",)) + 1).all()
    table = report.annotator_summary(narrow)
    for name in [c.removesuffix("_mean") for c in table.columns if c.endswith("_mean")
                 and c.startswith("accuracy")]:
        assert table[[f"{name}_lower", f"{name}_upper"]].notna().all().all()
        assert (table[f"{name}_lower"] <= table[f"{name}_mean"]).all()
        assert (table[f"{name}_mean"] <= table[f"{name}_upper"]).all()
