"""The two-coin family: marginal likelihood, EM, MAP = EM, simulator, NUTS."""

import itertools

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy import optimize, stats
from scipy.special import expit, log_expit

import crowd_models as cm
from crowd_models.inference import label_switched_chains
from crowd_models.models import two_coin

from ..conftest import RADIOLOGISTS, assert_estimates_inside_intervals, assert_nuts_recovers

PARAMS = ["sensitivity", "specificity", "item_class_prob"]


def _tiny(features: bool):
    # item "b" gets a repeated label from annotator "u"
    df = pd.DataFrame({
        "item": ["a", "a", "b", "b", "b", "c", "c", "d"],
        "annotator": ["u", "v", "u", "u", "w", "v", "w", "u"],
        "label": [1, 0, 1, 1, 0, 0, 0, 1],
    })
    x = None
    if features:
        x = pd.DataFrame({"f1": [0.5, -1.0, 2.0, 0.1], "f2": [1.0, 0.3, -0.7, 0.0]},
                         index=["a", "b", "c", "d"])
    return cm.Annotations.from_frame(df, classes=[0, 1], features=x)


def _brute_force_loglik(ann, sens, spec, p_pos):
    """log sum over every joint assignment of the true labels of all items."""
    total = 0.0
    for z in itertools.product([0, 1], repeat=ann.n_items):
        z = np.array(z)
        logp = np.sum(np.where(z == 1, np.log(p_pos), np.log1p(-p_pos)))
        for i, j, y in zip(ann.item_idx, ann.annotator_idx, ann.labels, strict=True):
            if z[i] == 1:
                logp += np.log(sens[j] if y == 1 else 1 - sens[j])
            else:
                logp += np.log(spec[j] if y == 0 else 1 - spec[j])
        total += np.exp(logp)
    return np.log(total)


@pytest.mark.parametrize("features", [False, True])
def test_marginal_loglik_matches_brute_force(features):
    ann = _tiny(features)
    model = two_coin.build_model(ann)
    sens = np.array([0.9, 0.7, 0.6])
    spec = np.array([0.8, 0.75, 0.55])
    point = {"sensitivity_logodds__": np.log(sens / (1 - sens)),
             "specificity_logodds__": np.log(spec / (1 - spec))}
    if features:
        coef, intercept = np.array([0.8, -1.2]), 0.3
        point.update(coef=coef, intercept=intercept)
        p_pos = expit(ann.standardized().features @ coef + intercept)  # the model's scale
        # the default precision: the one the EM's evidence chooses for these labels
        alpha = two_coin.em(ann).attrs["coef_precision"]
        log_prior = (stats.norm.logpdf(coef, 0, alpha ** -0.5).sum()
                     + stats.norm.logpdf(intercept, 0, 10))
    else:
        point["prevalence_logodds__"] = np.log(0.35 / 0.65)
        p_pos = np.full(ann.n_items, 0.35)
        log_prior = stats.beta.logpdf(0.35, 2, 2)
    log_prior += stats.beta.logpdf(sens, 3, 2).sum() + stats.beta.logpdf(spec, 3, 2).sum()
    brute = _brute_force_loglik(ann, sens, spec, p_pos)
    per_item = model.compile_fn(model.logp(vars=[model["item_labels"]], sum=False)[0])(point)
    assert per_item.shape == (ann.n_items,)
    np.testing.assert_allclose(per_item.sum(), brute, rtol=1e-12)
    # the whole model: likelihood + priors, no Jacobian (what find_MAP maximises)
    logp = model.compile_logp(jacobian=False)(point)
    np.testing.assert_allclose(logp, brute + log_prior, rtol=1e-12)


def test_em_log_posterior_is_the_models(sim_plain, plain_model):
    fit = two_coin.em(sim_plain)
    logp = plain_model.compile_logp(jacobian=False)
    post = {k: fit[k].values[0, 0] for k in ("sensitivity", "specificity", "prevalence")}
    point = {f"{k}_logodds__": np.log(v / (1 - v)) for k, v in post.items()}
    np.testing.assert_allclose(logp(point), fit.attrs["log_posterior"], rtol=1e-10)


def _assert_map_equals_em(ann, names, model=None):
    em_fit = two_coin.em(ann)
    assert em_fit.attrs["converged"]
    model = two_coin.build_model(ann) if model is None else model
    map_fit = cm.fit_map(model)  # from the same majority-vote start as the EM
    for name in names:
        diff = np.abs(map_fit.posterior[name].values - em_fit[name].values).max()
        assert diff <= 1e-6, (name, diff)
    np.testing.assert_allclose(map_fit.attrs["log_posterior"], em_fit.attrs["log_posterior"],
                               rtol=1e-10)
    return em_fit, map_fit


def test_map_equals_em_with_features(sim_features):
    em_fit, map_fit = _assert_map_equals_em(sim_features, PARAMS + ["coef", "intercept"])
    assert map_fit.log_likelihood["item_labels"].sizes["item"] == 2000


def test_map_equals_em_without_features(sim_plain, plain_model):
    _assert_map_equals_em(sim_plain, PARAMS + ["prevalence"], plain_model)


def test_em_recovers_simulation(sim_features):
    fit = two_coin.em(sim_features)
    truth = sim_features.truth
    for name in ("sensitivity", "specificity"):
        err = np.abs(fit[name].values[0, 0] - truth[name].values)
        assert err.max() < 0.05, (name, err)
    assert np.abs(fit["coef"].values[0, 0] - truth["coef"].values).max() < 0.25
    acc = (fit["item_class_prob"].values[0, 0].argmax(1) == sim_features.gold).mean()
    mv = cm.majority_vote(sim_features, hard=True, ties="first").values.argmax(1)
    assert acc > (mv == sim_features.gold).mean() + 0.05


def test_em_is_a_fixed_point_and_beta_approximation(sim_plain):
    fit = two_coin.em(sim_plain)
    mu = fit["item_class_prob"].values[0, 0, :, 1]
    y, j, m = sim_plain.labels, sim_plain.annotator_idx, mu[sim_plain.item_idx]
    # one more M-step (Raykar eq. 14 with the Beta(3, 2) prior) moves nothing
    sens = (np.bincount(j, m * y) + 2) / (np.bincount(j, m) + 3)
    np.testing.assert_allclose(fit["sensitivity"].values[0, 0], sens, atol=1e-8)
    np.testing.assert_allclose(fit["sensitivity_alpha"].values, np.bincount(j, m * y) + 3)
    np.testing.assert_allclose(fit["specificity_beta"].values,
                               np.bincount(j, (1 - m) * y) + 2)
    # the Beta mode equals the MAP estimate
    a, b = fit["sensitivity_alpha"].values, fit["sensitivity_beta"].values
    np.testing.assert_allclose((a - 1) / (a + b - 2), sens, atol=1e-8)


def _e_step(ann, sens, spec, log_prior_pos, log_prior_neg):
    """P(z_i = 1 | labels) by Bayes' rule, summing log rates per label with np.add.at
    (rates floored at 1e-12, as the EM does, so that a never-wrong annotator's
    rate of 1 is finite)."""
    sens, spec = (np.clip(v, 1e-12, 1 - 1e-12) for v in (sens, spec))
    y, j = ann.labels, ann.annotator_idx
    log_pos = np.zeros(ann.n_items) + log_prior_pos
    log_neg = np.zeros(ann.n_items) + log_prior_neg
    np.add.at(log_pos, ann.item_idx, np.where(y == 1, np.log(sens[j]), np.log1p(-sens[j])))
    np.add.at(log_neg, ann.item_idx, np.where(y == 0, np.log(spec[j]), np.log1p(-spec[j])))
    return expit(log_pos - log_neg)


def test_flat_priors_give_the_maximum_likelihood_fixed_point(rte):
    flat = {k: v for k, v in two_coin.FLAT_PRIORS.items()
            if k.startswith(("sens", "spec", "prev"))}
    with pytest.warns(UserWarning, match="boundary of their support"):
        fit = two_coin.em(rte, **flat)
    sens, spec, prev = (fit[k].values[0, 0] for k in ("sensitivity", "specificity",
                                                      "prevalence"))
    assert np.isfinite(fit["item_class_prob"].values).all()
    mu = _e_step(rte, sens, spec, np.log(prev), np.log1p(-prev))
    np.testing.assert_allclose(fit["item_class_prob"].values[0, 0, :, 1], mu, atol=1e-9)
    # the ML M-step (no pseudo-counts) from that E-step gives the same parameters
    y, j, m = rte.labels, rte.annotator_idx, mu[rte.item_idx]
    J = rte.n_annotators
    np.testing.assert_allclose(sens, np.bincount(j, m * y, J) / np.bincount(j, m, J),
                               atol=1e-8)
    np.testing.assert_allclose(spec, np.bincount(j, (1 - m) * (1 - y), J)
                               / np.bincount(j, 1 - m, J), atol=1e-8)
    np.testing.assert_allclose(prev, mu.mean(), atol=1e-9)
    # maximum likelihood puts some never-wrong annotators on the boundary, which the
    # default Beta(3, 2) priors keep inside
    assert np.sum((sens == 1) | (spec == 1)) >= 5
    default = two_coin.em(rte)
    assert np.all(default["sensitivity"].values < 1) and np.all(default["specificity"].values < 1)
    np.testing.assert_allclose(fit.attrs["log_posterior"], fit.attrs["log_likelihood"],
                               rtol=1e-14)
    assert cm.report.accuracy(fit, rte) > 0.92


def test_fit_logistic_is_the_penalised_optimum(rng):
    # Newton-Raphson against the stationarity condition and a generic optimiser,
    # with priors strong enough that dropping either one moves the optimum a lot
    X = rng.standard_normal((300, 3))
    target = expit(X @ [1.5, -1.0, 0.5] + 2.0 + rng.normal(0, 1, 300))
    gamma = np.diag([2.0, 5.0, 0.5])
    tau = 20.0
    coef, intercept = two_coin._fit_logistic(X, target, gamma, tau)
    resid = target - expit(X @ coef + intercept)
    np.testing.assert_allclose(resid.sum(), tau * intercept, atol=1e-9)
    np.testing.assert_allclose(X.T @ resid, gamma @ coef, atol=1e-9)
    assert intercept > 0.3  # pulled in from its unpenalised value, not to zero

    def objective(theta):
        eta = X @ theta[:3] + theta[3]
        return -(np.sum(target * log_expit(eta) + (1 - target) * log_expit(-eta))
                 - 0.5 * theta[:3] @ gamma @ theta[:3] - 0.5 * tau * theta[3] ** 2)

    ref = optimize.minimize(objective, np.zeros(4), method="BFGS", options={"gtol": 1e-10})
    np.testing.assert_allclose(np.r_[coef, intercept], ref.x, atol=1e-6)
    # a flat prior (tau = 0) is plain maximum likelihood for the intercept
    _, free_intercept = two_coin._fit_logistic(X, target, gamma, 0.0)
    assert free_intercept > intercept + 0.5


def test_fit_logistic_stops_only_when_every_step_is_small(rng):
    # a feature that is zero everywhere has a Newton step of exactly 0 at every
    # iteration: a stop on the smallest step would return after one step
    X = np.hstack([rng.standard_normal((200, 2)), np.zeros((200, 1))])
    target = expit(X[:, :2] @ [2.0, -1.5] + 0.5)
    coef, intercept = two_coin._fit_logistic(X, target, np.eye(3), 1.0)
    resid = target - expit(X @ coef + intercept)
    np.testing.assert_allclose(X.T @ resid, coef, atol=1e-9)
    np.testing.assert_allclose(resid.sum(), intercept, atol=1e-9)
    assert coef[2] == 0.0


def test_gaussian_log_prior_is_pymcs_including_the_flat_case(rng):
    # the classifier prior of the EM's log posterior: a zero precision is PyMC's
    # Flat (log density 0, what build_model uses), otherwise the Gaussian density
    import pymc as pm

    x = rng.normal(size=3)
    assert two_coin._gaussian_logpdf(x, np.zeros((3, 3))) == 0.0
    assert float(pm.logp(pm.Flat.dist(shape=3), x).sum().eval()) == 0.0
    precision = np.array([[2.0, 0.3, 0.0], [0.3, 1.0, 0.2], [0.0, 0.2, 0.5]])
    ref = stats.multivariate_normal(np.zeros(3), np.linalg.inv(precision)).logpdf(x)
    np.testing.assert_allclose(two_coin._gaussian_logpdf(x, precision), ref, rtol=1e-12)
    np.testing.assert_allclose(two_coin._gaussian_logpdf(0.7, 4.0),
                               stats.norm(0, 0.5).logpdf(0.7), rtol=1e-12)


def test_em_with_features_is_a_stationary_point_of_the_log_posterior(sim_features):
    # strong Gaussian priors on the classifier: at EM's fixed point the gradient of
    # the log posterior in (coef, intercept) is X'(mu - p) - precision * theta = 0,
    # X the standardised features the model is fitted on
    sim_features = sim_features.standardized()
    fit = two_coin.em(sim_features, coef_precision=2.0, intercept_precision=1.0)
    mu = fit["item_class_prob"].values[0, 0, :, 1]
    coef, intercept = fit["coef"].values[0, 0], fit["intercept"].values[0, 0]
    X = sim_features.features
    resid = mu - expit(X @ coef + intercept)
    np.testing.assert_allclose(resid.sum(), 1.0 * intercept, atol=1e-6)
    np.testing.assert_allclose(X.T @ resid, 2.0 * coef, atol=1e-6)
    assert abs(intercept) > 0.1
    # its log posterior: the marginal likelihood (independent E-step) plus each prior
    sens, spec = fit["sensitivity"].values[0, 0], fit["specificity"].values[0, 0]
    eta = X @ coef + intercept
    ann = sim_features
    log_pos = log_expit(eta).copy()
    log_neg = log_expit(-eta).copy()
    y, j = ann.labels, ann.annotator_idx
    np.add.at(log_pos, ann.item_idx, np.where(y == 1, np.log(sens[j]), np.log1p(-sens[j])))
    np.add.at(log_neg, ann.item_idx, np.where(y == 0, np.log(spec[j]), np.log1p(-spec[j])))
    loglik = np.logaddexp(log_pos, log_neg).sum()
    log_prior = (stats.beta.logpdf(sens, 3, 2).sum() + stats.beta.logpdf(spec, 3, 2).sum()
                 + stats.norm.logpdf(coef, 0, 1 / np.sqrt(2.0)).sum()
                 + stats.norm.logpdf(intercept, 0, 1.0))
    np.testing.assert_allclose(fit.attrs["log_likelihood"], loglik, rtol=1e-12)
    np.testing.assert_allclose(fit.attrs["log_posterior"], loglik + log_prior, rtol=1e-12)


def test_rte_accuracy(rte):
    fit = two_coin.em(rte)
    assert cm.report.accuracy(fit, rte) >= 0.925
    mv = cm.majority_vote(rte, hard=True, ties="random", rng=0)
    assert cm.report.accuracy(mv, rte) < 0.91


def test_simulate_design_and_rates(rng):
    sim = two_coin.simulate(**RADIOLOGISTS, n_items=20_000, labels_per_item=3, rng=rng)
    assert sim.n_annotations == 60_000
    per_item = np.bincount(sim.item_idx)
    assert (per_item == 3).all()
    pairs = sim.item_idx * sim.n_annotators + sim.annotator_idx
    assert len(np.unique(pairs)) == len(pairs)  # drawn without replacement
    z = sim.gold[sim.item_idx]
    order = sim.annotators.get_indexer([f"annotator_{k}" for k in range(5)])
    for k, j in enumerate(order):
        rows = sim.annotator_idx == j
        sens = sim.labels[rows & (z == 1)].mean()
        spec = 1 - sim.labels[rows & (z == 0)].mean()
        assert abs(sens - RADIOLOGISTS["sensitivity"][k]) < 0.03
        assert abs(spec - RADIOLOGISTS["specificity"][k]) < 0.03
    np.testing.assert_allclose(sim.truth["sensitivity"].sel(annotator="annotator_2"), 0.57)


def test_simulate_with_given_truth_and_features(rng):
    x = rng.standard_normal((50, 3))
    z = rng.integers(0, 2, 50)
    sim = two_coin.simulate(**RADIOLOGISTS, features=x, true_labels=z, rng=rng)
    np.testing.assert_array_equal(sim.gold, z)
    np.testing.assert_array_equal(sim.features, x)
    assert "coef" not in sim.truth


def test_decoupled_and_predict(sim_features):
    dec = two_coin.decoupled(sim_features)
    plain = two_coin.em(sim_features.with_features(None))
    np.testing.assert_allclose(dec["item_class_prob"], plain["item_class_prob"])
    joint = two_coin.em(sim_features)
    x = sim_features.features
    p = two_coin.predict(joint, x)
    z = (x - x.mean(axis=0)) / x.std(axis=0)  # the training items' standard scale
    manual = expit(z @ joint["coef"].values[0, 0] + joint["intercept"].values[0, 0])
    np.testing.assert_allclose(p, manual)
    # both classifiers find the simulated direction
    for fit in (dec, joint):
        coef = fit["coef"].values[0, 0]
        truth = sim_features.truth["coef"].values
        assert coef @ truth / np.linalg.norm(coef) / np.linalg.norm(truth) > 0.95


def test_bad_input():
    three = cm.Annotations.from_frame(pd.DataFrame(
        {"item": [1, 2, 3], "annotator": ["a", "b", "a"], "label": ["x", "y", "z"]}))
    with pytest.raises(ValueError, match="exactly 2 classes"):
        two_coin.build_model(three)
    with pytest.raises(ValueError, match="exactly 2 classes"):
        two_coin.em(three)
    with pytest.raises(TypeError, match="expects Annotations, ChunkedAnnotations or Dask"):
        two_coin.em(pd.DataFrame())
    ann = _tiny(False)
    with pytest.raises(ValueError, match="a >= 1 and b >= 1"):
        two_coin.em(ann, sensitivity_prior=(0.5, 2))
    with pytest.raises(TypeError, match="pair \\(a, b\\)"):
        two_coin.em(ann, specificity_prior=3.0)
    with pytest.raises(ValueError, match="one per annotator"):
        two_coin.em(ann, sensitivity_prior=([2, 3], 2))
    feats = _tiny(True)
    with pytest.raises(ValueError, match="finite and >= 0"):
        two_coin.em(feats, coef_precision=-1)
    with pytest.raises(ValueError, match="mixes flat"):
        two_coin.em(feats, coef_precision=[0.0, 1.0])
    with pytest.raises(ValueError, match="positive definite"):
        two_coin.em(feats, coef_precision=np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="2 features"):
        two_coin.em(feats, coef_precision=[1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="needs annotations with features"):
        two_coin.decoupled(ann)
    with pytest.raises(ValueError, match="no classifier"):
        two_coin.predict(two_coin.em(ann), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="between 1 and 5"):
        two_coin.simulate(**RADIOLOGISTS, n_items=5, labels_per_item=6)


def test_label_switch_check_flags_the_mirrored_chain():
    ref = np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3], [0.1, 0.9]])
    chains = np.stack([ref, ref[:, ::-1], ref])[:, None]  # chain 1 mirrored
    post = xr.Dataset({"item_class_prob": (("chain", "draw", "item", "true_class"),
                                           np.repeat(chains, 3, axis=1))})
    reference = xr.Dataset({"item_class_prob": (("item", "true_class"), ref)})
    assert label_switched_chains(post, reference) == [1]


@pytest.mark.slow
def test_nuts_recovers_simulated_annotators():
    sim = two_coin.simulate(**RADIOLOGISTS, n_items=600, prevalence=0.4,
                            rng=np.random.default_rng(7))
    idata = cm.sample(two_coin.build_model(sim), draws=1000, tune=1000, chains=4,
                      random_seed=11, progressbar=False)
    import arviz as az

    summ = az.summary(idata, var_names=["sensitivity", "specificity", "prevalence"])
    assert summ["r_hat"].max() <= 1.01
    assert int(idata.sample_stats["diverging"].sum()) == 0
    assert idata.attrs["label_switched_chains"] == []
    covered = 0
    for name in ("sensitivity", "specificity"):
        draws = idata.posterior[name]
        lo, hi = draws.quantile([0.05, 0.95], dim=("chain", "draw")).values
        covered += ((sim.truth[name].values >= lo) & (sim.truth[name].values <= hi)).sum()
    assert covered >= 8  # of 10 (90% intervals)


@pytest.mark.slow
def test_nuts_recovers_annotators_and_the_classifier():
    sim = two_coin.simulate(**RADIOLOGISTS, n_items=300, n_features=2, coef=[1.5, -1.0],
                            intercept=-0.5, rng=np.random.default_rng(3))
    names = ("sensitivity", "specificity", "coef", "intercept")
    # 1,000 draws a chain: at 500 the largest r-hat of these 13 variables was
    # 1.002-1.011 over seeds 1-3 (the features' standardisation, #44, moved it)
    idata = assert_nuts_recovers(two_coin.build_model(sim),
                                 {n: sim.truth[n].values for n in names}, min_cover=0.75,
                                 draws=1000)
    assert cm.report.accuracy(idata, sim) > cm.report.accuracy(cm.majority_vote(sim), sim)


@pytest.mark.slow
def test_rte_nuts_and_loo(rte, rte_model):
    import arviz as az

    map_fit = cm.fit_map(rte_model)
    assert cm.report.accuracy(map_fit, rte) >= 0.925
    idata = cm.sample(rte_model, draws=400, tune=400, chains=2, random_seed=3,
                      start=map_fit, progressbar=False)
    assert cm.report.accuracy(idata, rte) >= 0.925
    # the table's estimates lie inside their intervals (one per annotator and measure)
    assert assert_estimates_inside_intervals(cm.report.annotator_summary(idata)) >= 3 * 164
    loo = az.loo(idata, pointwise=True)
    assert loo.elpd_i.sizes["item"] == 800
    assert loo.n_data_points == 800
    assert np.isfinite(loo.elpd)
    assert idata.posterior["item_class_prob"].sizes == {
        "chain": 2, "draw": 400, "item": 800, "true_class": 2}


def test_majority_vote_start_is_the_models_start_and_the_m_step_of_the_vote(sim_plain):
    start = two_coin.majority_vote_start(sim_plain, sensitivity_prior=(4.0, 2.0))
    model_start = two_coin.build_model(sim_plain, sensitivity_prior=(4.0, 2.0)).crowd_start
    for name in ("sensitivity", "specificity", "prevalence"):
        np.testing.assert_allclose(start[name], model_start[name], rtol=1e-12)
    # sensitivity: (expected true positives labelled positive + a - 1) / (expected positives
    # + a + b - 2), with the soft majority vote as the expected truth
    mu = cm.majority_vote(sim_plain).values[:, 1][sim_plain.item_idx]
    j, y = sim_plain.annotator_idx, sim_plain.labels
    hits = np.bincount(j, weights=mu * y) + 3.0
    total = np.bincount(j, weights=mu) + 4.0
    np.testing.assert_allclose(start["sensitivity"], hits / total, rtol=1e-10)
    with pytest.raises(TypeError, match="sensitivity_prior must be a pair"):
        two_coin.parse_priors(sim_plain, sensitivity_prior=3.0)


def test_flat_priors_floor_keeps_rates_of_exactly_0_and_1_finite():
    # the documented floor: rates are kept within [1e-12, 1 - 1e-12], so the log
    # confusion and class prior of a never-wrong (or always-wrong) annotator stay finite
    log_conf = two_coin._log_confusion(np.array([1.0, 0.0]), np.array([0.0, 1.0]))
    assert np.isfinite(log_conf).all()
    # (annotator, true_class, label_class): annotator 0 always says 1, annotator 1 0
    always = np.array([[[0, 1], [0, 1]], [[1, 0], [1, 0]]], dtype=float)
    np.testing.assert_allclose(np.exp(log_conf), always, rtol=0, atol=2e-12)
    assert log_conf.min() == pytest.approx(np.log(1e-12), rel=1e-6)
    for prevalence in (0.0, 1.0):
        prior = two_coin._log_prior_classes({"prevalence": prevalence}, None)
        assert np.isfinite(prior).all()
        np.testing.assert_allclose(np.exp(prior), [[1 - prevalence, prevalence]], atol=2e-12)


def test_flat_priors_m_step_gives_a_rate_without_evidence_one_half():
    # flat Beta(1, 1) priors: an annotator whose items all have P(z = 1) = 0 has no
    # evidence on its sensitivity (0/0 -> 1/2); one label on a certain item is a
    # rate of exactly 1 (a denominator of 1), for sensitivity (b, c) and specificity (d)
    frame = pd.DataFrame({"item": [0, 1, 2, 2, 0], "annotator": ["a", "a", "b", "c", "d"],
                          "label": [0, 0, 1, 1, 0]})
    ann = cm.Annotations.from_frame(frame, classes=[0, 1])
    pri = two_coin.parse_priors(ann, sensitivity_prior=(1.0, 1.0),
                                specificity_prior=(1.0, 1.0), prevalence_prior=(1.0, 1.0))
    params = two_coin._m_step(ann, np.array([0.0, 0.0, 1.0]), pri)
    np.testing.assert_array_equal(params["sensitivity"], [0.5, 1.0, 1.0, 0.5])
    np.testing.assert_array_equal(params["specificity"], [1.0, 0.5, 0.5, 1.0])


def test_fit_logistic_with_collinear_features_splits_the_single_column_fit():
    # a repeated column and no penalty make the Newton system singular (a
    # least-squares step then); the fit's two coefficients sum to the single
    # column's and the intercept is the same
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 1))
    target = (rng.random(200) < expit(1.5 * x[:, 0] - 0.3)).astype(float)
    single, b1 = two_coin._fit_logistic(x, target, np.zeros((1, 1)), 0.0)
    double, b2 = two_coin._fit_logistic(np.hstack([x, x]), target, np.zeros((2, 2)), 0.0)
    assert double.sum() == pytest.approx(single[0], rel=1e-9)
    assert b2 == pytest.approx(b1, rel=1e-9)


def test_em_with_a_scikit_learn_classifier_reaches_the_glm_fixed_point(sim_features):
    """Raykar sec. 6.3: any classifier trained on soft labels. scikit-learn's
    logistic regression with C = 1 / coef_precision (an unpenalised intercept:
    intercept_precision=0 here) is the built-in M-step's classifier, so the EM
    reaches the same fixed point."""
    sklearn = pytest.importorskip("sklearn.linear_model", reason="needs scikit-learn")
    # the estimator gets the features as given: standardised here, as the GLM's are
    sim_features = sim_features.standardized()
    glm = two_coin.em(sim_features, coef_precision=2.0, intercept_precision=0.0)
    clf = sklearn.LogisticRegression(C=0.5, tol=1e-12, max_iter=10_000)
    fit = two_coin.em(sim_features, classifier=clf, tol=1e-12)
    assert fit.attrs["converged"] and np.isnan(fit.attrs["log_posterior"])
    np.testing.assert_allclose(clf.coef_.ravel(), glm["coef"].values.ravel(), atol=1e-4)
    np.testing.assert_allclose(clf.intercept_, glm["intercept"].values.ravel(), atol=1e-4)
    for name in ("sensitivity", "specificity", "item_class_prob"):
        np.testing.assert_allclose(fit[name].values, glm[name].values, atol=1e-5)
    assert "coef" not in fit and "LogisticRegression" in fit.attrs["classifier"]
    with pytest.raises(ValueError, match="needs annotations with features"):
        two_coin.em(sim_features.with_features(None), classifier=clf)
    with pytest.raises(TypeError, match="scikit-learn classifier with fit and predict_proba"):
        two_coin.em(sim_features, classifier=object())
