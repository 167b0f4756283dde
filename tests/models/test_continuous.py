"""The continuous family: the integrated-out truth, EM, MAP = EM, simulator, NUTS, LOO."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytensor.tensor as pt
import pytest
import xarray as xr
from scipy import integrate, optimize, stats

import crowd_models as cm
from crowd_models.models import MODELS, continuous

from ..conftest import assert_nuts_recovers

PRECISION = np.array([0.25, 0.5, 1.0, 2.0, 4.0, 0.75])
BIAS = np.array([1.0, -0.5, 0.3, -0.8, 0.2, -0.2])
BIAS = BIAS - BIAS.mean()
COEF = np.array([1.0, -0.5, 0.25])
SCALE = np.array([1.3, 0.6, 1.0, 0.8, 1.5, 0.8])
SCALE = SCALE / SCALE.mean()
ESTIMATES = ["precision", "bias", "scale_offset", "scale", "coef", "intercept",
             "truth_precision", "true_value", "true_value_sd"]


@pytest.fixture(scope="module")
def sim_bias():
    return continuous.simulate(PRECISION, bias=BIAS, n_items=300, intercept=3.0,
                               truth_precision=0.25, labels_per_item=4,
                               rng=np.random.default_rng(1))


@pytest.fixture(scope="module")
def sim_features():
    return continuous.simulate(PRECISION, bias=BIAS, n_items=300, n_features=3, coef=COEF,
                               intercept=1.0, truth_precision=1.0, labels_per_item=4,
                               rng=np.random.default_rng(2))


@pytest.fixture(scope="module")
def bias_model(sim_bias):
    return continuous.build_model(sim_bias, bias=True)


@pytest.fixture(scope="module")
def bias_map(bias_model):
    return cm.fit_map(bias_model)


def _tiny(features: bool):
    # item "b" gets a repeated label from annotator "u"; "c" a single label
    df = pd.DataFrame({
        "item": ["a", "a", "a", "b", "b", "b", "c", "d", "d"],
        "annotator": ["u", "v", "w", "u", "u", "w", "v", "u", "w"],
        "label": [1.2, 0.4, 2.5, -0.3, 0.1, -1.4, 3.3, 0.8, 0.9],
    })
    x = None
    if features:
        x = pd.DataFrame({"f1": [0.5, -1.0, 2.0, 0.1], "f2": [1.0, 0.3, -0.7, 0.0]},
                         index=["a", "b", "c", "d"])
    return cm.Annotations.from_frame(df, features=x, gold=None, continuous=True)


def _point(model, values: dict) -> dict:
    """Values by variable name -> the model's value variables (transformed)."""
    out = {}
    for rv in model.free_RVs:
        x = np.asarray(values[rv.name], dtype=float)
        transform = model.rvs_to_transforms.get(rv)
        out[model.rvs_to_values[rv].name] = x if transform is None else np.asarray(
            transform.forward(pt.as_tensor(x), *rv.owner.inputs).eval())
    return out


def _per_item(model, point):
    return model.compile_fn(model.logp(vars=[model["item_labels"]], sum=False)[0])(point)


def _true_value(model, point):
    outs = model.replace_rvs_by_values([model["true_value"], model["true_value_sd"]])
    return model.compile_fn(outs)(point)


def _quad(ann, values, logpdf):
    """Per-item log marginal, mean and sd of y_i by adaptive quadrature over y_i."""
    tau, beta = values["precision"], values["bias"]
    gamma = values["truth_precision"]
    m = np.full(ann.n_items, values["intercept"])
    if ann.features is not None:
        m = ann.features @ values["coef"] + values["intercept"]
    out = []
    for i in range(ann.n_items):
        rows = ann.item_idx == i
        y, j = ann.labels[rows], ann.annotator_idx[rows]

        def joint(u, y=y, j=j, i=i):
            return np.exp(stats.norm.logpdf(u, m[i], 1 / np.sqrt(gamma))
                          + logpdf(y, u + beta[j], tau[j]).sum())

        pts = sorted(np.append(y - beta[j], m[i]))
        lo, hi = pts[0] - 60, pts[-1] + 60
        moments = [integrate.quad(lambda u, k=k: u ** k * joint(u), lo, hi, points=pts,
                                  limit=400, epsabs=0, epsrel=1e-13)[0] for k in range(3)]
        mean = moments[1] / moments[0]
        out.append((np.log(moments[0]), mean, np.sqrt(moments[2] / moments[0] - mean ** 2)))
    return np.array(out).T


def _gaussian_logpdf(y, mu, tau):
    return stats.norm.logpdf(y, mu, 1 / np.sqrt(tau))


def test_scale_marginal_matches_quadrature():
    ann = _tiny(True).standardized()  # the features the model is fitted on
    values = dict(TINY_VALUES, scale=np.array([1.4, 0.5, 1.1]))

    out = []
    m = ann.features @ values["coef"] + values["intercept"]
    tau, beta, sc = values["precision"], values["bias"], values["scale"]
    for i in range(ann.n_items):
        rows = ann.item_idx == i
        y, j = ann.labels[rows], ann.annotator_idx[rows]

        def joint(u, y=y, j=j, i=i):
            return np.exp(stats.norm.logpdf(u, m[i], 1 / np.sqrt(values["truth_precision"]))
                          + _gaussian_logpdf(y, beta[j] + sc[j] * u, tau[j]).sum())

        out.append(np.log(integrate.quad(joint, -80, 80, points=[m[i]], limit=400,
                                         epsabs=0, epsrel=1e-13)[0]))
    got = continuous.item_log_marginal(ann, tau, values["truth_precision"], values["intercept"],
                                       bias=beta, coef=values["coef"], scale=sc)
    np.testing.assert_allclose(got, out, rtol=1e-10)


TINY_VALUES = dict(precision=np.array([1.5, 0.7, 3.0]), bias=np.array([0.3, -0.5, 0.2]),
                   truth_precision=0.4, intercept=0.6, coef=np.array([0.8, -1.1]))


@pytest.mark.parametrize("features", [False, True])
def test_gaussian_marginal_matches_quadrature(features):
    ann = _tiny(features).standardized()  # the features the model is fitted on
    # precision 1 for the hand prior below (the default "auto" takes em's choice)
    model = continuous.build_model(ann, bias=True, **({"coef_precision": 1.0} if features else {}))
    values = {k: v for k, v in TINY_VALUES.items() if features or k != "coef"}
    point = _point(model, values)
    loglik, mean, sd = _quad(ann, values, _gaussian_logpdf)
    per_item = _per_item(model, point)
    assert per_item.shape == (ann.n_items,)
    np.testing.assert_allclose(per_item, loglik, rtol=1e-10)
    np.testing.assert_allclose(
        continuous.item_log_marginal(ann, values["precision"], values["truth_precision"],
                                     values["intercept"], bias=values["bias"],
                                     coef=values.get("coef")), loglik, rtol=1e-10)
    tv = _true_value(model, point)
    np.testing.assert_allclose(tv[0], mean, rtol=1e-9)
    np.testing.assert_allclose(tv[1], sd, rtol=1e-9)
    # the whole model: marginal likelihood + priors, no Jacobian (what find_MAP maximises)
    s, c = np.std(ann.labels), np.mean(ann.labels)
    log_prior = (stats.gamma.logpdf(values["precision"], 2, scale=1 / (0.1 * s ** 2)).sum()
                 + stats.gamma.logpdf(values["truth_precision"], 2, scale=1 / (0.1 * s ** 2))
                 + stats.norm.logpdf(values["intercept"], c, 10 * s)
                 # ZeroSumNormal: an isotropic normal on the 2-dimensional zero-sum plane
                 + stats.norm.logpdf(values["bias"], 0, s).sum() + 0.5 * np.log(2 * np.pi * s ** 2))
    if features:
        log_prior += stats.norm.logpdf(values["coef"], 0, s).sum()
    logp = model.compile_logp(jacobian=False)(point)
    np.testing.assert_allclose(logp, loglik.sum() + log_prior, rtol=1e-10)


def test_student_t_marginal_matches_quadrature():
    df = pd.DataFrame({  # item "a" has one wild label; "b" a repeated label
        "item": ["a"] * 5 + ["b"] * 4 + ["c"] * 3,
        "annotator": ["u", "v", "w", "x", "v", "u", "u", "w", "x", "v", "w", "x"],
        "label": [1.2, 0.9, 1.6, 14.0, 1.1, -0.3, 0.1, -0.9, -0.4, 2.8, 3.4, 2.2],
    })
    ann = cm.Annotations.from_frame(df, continuous=True)
    nu = 4.0
    model = continuous.build_model(ann, bias=True, noise="student_t", nu=nu)
    values = dict(precision=np.array([1.5, 0.7, 3.0, 1.0]), bias=np.array([0.3, -0.5, 0.4, -0.2]),
                  truth_precision=0.3, intercept=0.6)
    point = _point(model, values)

    def t_logpdf(y, mu, tau):
        return stats.t.logpdf(y, nu, loc=mu, scale=1 / np.sqrt(tau))

    loglik, mean, sd = _quad(ann, values, t_logpdf)
    np.testing.assert_allclose(_per_item(model, point), loglik, rtol=0, atol=1e-9)
    tv = _true_value(model, point)
    np.testing.assert_allclose(tv[0], mean, rtol=0, atol=1e-8)
    np.testing.assert_allclose(tv[1], sd, rtol=0, atol=1e-8)
    # the wild label barely moves item a's truth; under Gaussian noise it would
    gauss, g_mean, _ = _quad(ann, values, _gaussian_logpdf)
    robust = np.median(ann.labels[:5] - values["bias"][ann.annotator_idx[:5]])
    assert abs(tv[0][0] - robust) < 0.3 < abs(g_mean[0] - robust)


def test_em_log_posterior_is_the_models(sim_bias, bias_model):
    fit = continuous.em(sim_bias, bias=True)
    assert fit.attrs["converged"]
    values = {k: fit[k].values[0, 0] for k in ("precision", "bias", "intercept",
                                                "truth_precision")}
    point = _point(bias_model, values)
    logp = bias_model.compile_logp(jacobian=False)(point)
    np.testing.assert_allclose(logp, fit.attrs["log_posterior"], rtol=1e-12)
    np.testing.assert_allclose(_per_item(bias_model, point).sum(),
                               fit.attrs["log_likelihood"], rtol=1e-12)


def _assert_map_equals_em(ann, model, map_fit=None, lp_rtol=1e-12, **options):
    em_fit = continuous.em(ann, **options)
    assert em_fit.attrs["converged"]
    map_fit = cm.fit_map(model) if map_fit is None else map_fit  # the same item-mean start
    names = [n for n in ESTIMATES if n in em_fit]
    assert names == [n for n in ESTIMATES if n in map_fit.posterior]
    for name in names:
        diff = np.abs(map_fit.posterior[name].values - em_fit[name].values).max()
        assert diff <= 1e-6, (name, diff)
    np.testing.assert_allclose(map_fit.attrs["log_posterior"], em_fit.attrs["log_posterior"],
                               rtol=lp_rtol)
    return em_fit, map_fit


def test_map_equals_em_without_features(sim_bias, bias_model, bias_map):
    em_fit, map_fit = _assert_map_equals_em(sim_bias, bias_model, bias_map, bias=True)
    assert "bias" in em_fit and "coef" not in em_fit
    assert map_fit.log_likelihood["item_labels"].sizes["item"] == 300


@pytest.mark.parametrize("bias", [False, True])
def test_map_equals_em_with_features(sim_features, bias):
    model = continuous.build_model(sim_features, bias=bias)
    em_fit, _ = _assert_map_equals_em(sim_features, model, bias=bias)
    assert ("bias" in em_fit) == bias and "coef" in em_fit


@pytest.fixture(scope="module")
def sim_scale():
    return continuous.simulate(PRECISION, bias=BIAS, scale=SCALE, n_items=300, intercept=3.0,
                               truth_precision=0.25, labels_per_item=4,
                               rng=np.random.default_rng(3))


def test_map_equals_em_with_scale(sim_scale):
    model = continuous.build_model(sim_scale, bias=True, scale=True)
    em_fit, map_fit = _assert_map_equals_em(sim_scale, model, bias=True, scale=True,
                                            lp_rtol=1e-10)  # L-BFGS stops 1e-8 below
    assert em_fit.attrs["scale"] == 1
    np.testing.assert_allclose(em_fit["scale"].values.mean(), 1.0, atol=1e-12)
    np.testing.assert_allclose(em_fit["bias"].values.sum(), 0.0, atol=1e-10)
    # the model's log_likelihood group holds the same per-item marginal as NumPy's
    params = {k: em_fit[k].values[0, 0] for k in ("precision", "bias", "scale")}
    per_item = continuous.item_log_marginal(
        sim_scale, params["precision"], em_fit["truth_precision"].values[0, 0],
        em_fit["intercept"].values[0, 0], bias=params["bias"], scale=params["scale"])
    np.testing.assert_allclose(map_fit.log_likelihood["item_labels"].values[0, 0], per_item,
                               rtol=1e-6)


@pytest.mark.parametrize("bias", [False, True])
def test_em_with_scale_is_a_local_maximum(sim_scale, bias):
    """The scale variant's EM stops at a maximum of the marginal log posterior: moving
    any pair of scales apart (their mean stays 1), or any other parameter a little,
    lowers it (the MAP = EM check above covers bias=True with a PyMC fit)."""
    fit = continuous.em(sim_scale, bias=bias, scale=True)
    pri = continuous._priors(sim_scale, bias=bias, scale=True, label_scale=None,
                             **{k: v for k, v in continuous.DEFAULT_PRIORS.items()})
    names = ["precision", "truth_precision", "intercept", "scale", "scale_offset"]
    names += ["bias"] * bias
    params = {k: np.array(fit[k].values[0, 0], dtype=float) for k in names}
    best = continuous._log_posterior(sim_scale, params, pri)
    np.testing.assert_allclose(best, fit.attrs["log_posterior"], rtol=1e-12)
    eps, J = 1e-4, sim_scale.n_annotators
    moves = []
    for j in range(J):
        for k in range(J):
            if j != k:
                step = np.zeros(J)
                step[j], step[k] = eps, -eps
                moves.append({"scale": step, "scale_offset": step})
        moves.append({"precision": np.eye(J)[j] * eps * params["precision"][j]})
        if bias:
            step = np.zeros(J)
            step[j], step[(j + 1) % J] = eps, -eps
            moves.append({"bias": step})
    moves += [{"intercept": eps}, {"truth_precision": eps * params["truth_precision"]}]
    for move in moves:
        for sign in (1, -1):
            moved = {k: v + sign * move.get(k, 0.0) for k, v in params.items()}
            assert continuous._log_posterior(sim_scale, moved, pri) < best, (move, sign)


def test_em_recovers_scales():
    sim = continuous.simulate(PRECISION, bias=BIAS, scale=SCALE, n_items=3000, intercept=3.0,
                              truth_precision=0.25, labels_per_item=4,
                              rng=np.random.default_rng(4))
    fit = continuous.em(sim, bias=True, scale=True)
    assert fit.attrs["converged"]
    order = sim.truth["scale"].sel(annotator=fit.annotator).values
    assert np.abs(fit["scale"].values[0, 0] - order).max() < 0.1
    np.testing.assert_allclose(fit["scale_offset"].values, fit["scale"].values - 1)
    # a scaled annotator's labels tell scale^2 * precision about the truth
    table = cm.report.experts_equivalent(fit, 10.0)
    tau = fit["precision"].values[0, 0] * fit["scale"].values[0, 0] ** 2
    n_j = sim.n_labels()
    assert table.loc["crowd_precision", "mean"] == pytest.approx(tau @ n_j / n_j.sum())
    # without scales, annotators who compress the scale look precise
    plain = continuous.em(sim, bias=True)
    err = [np.sqrt(np.mean((f["true_value"].values[0, 0] - sim.gold) ** 2)) for f in (fit, plain)]
    assert err[0] < err[1]


def test_em_recovers_simulation():
    sim = continuous.simulate(PRECISION, bias=BIAS, n_items=2000, n_features=3, coef=COEF,
                              intercept=1.0, truth_precision=1.0, labels_per_item=4,
                              rng=np.random.default_rng(5))
    fit = continuous.em(sim, bias=True)
    truth = sim.truth
    rel = fit["precision"].values[0, 0] / truth["precision"].values - 1
    assert np.abs(rel).max() < 0.15, rel
    assert np.abs(fit["bias"].values[0, 0] - truth["bias"].values).max() < 0.1
    assert np.abs(fit["coef"].values[0, 0] - COEF).max() < 0.1
    assert abs(fit["intercept"].values[0, 0] - 1.0) < 0.1
    assert abs(fit["truth_precision"].values[0, 0] - 1.0) < 0.15
    # the truth beats the plain mean of the labels
    mean = np.bincount(sim.item_idx, sim.labels) / np.bincount(sim.item_idx)
    err = fit["true_value"].values[0, 0] - sim.gold
    assert np.sqrt(np.mean(err ** 2)) < 0.75 * np.sqrt(np.mean((mean - sim.gold) ** 2))
    # and its sd is calibrated: standardised errors have sd about 1
    assert 0.9 < np.std(err / fit["true_value_sd"].values[0, 0]) < 1.1


def test_em_fixed_point_and_gamma_approximation(sim_bias):
    fit = continuous.em(sim_bias, bias=True)
    mu = fit["true_value"].values[0, 0]
    v = fit["true_value_sd"].values[0, 0] ** 2
    tau, beta = fit["precision"].values[0, 0], fit["bias"].values[0, 0]
    y, i, j = sim_bias.labels, sim_bias.item_idx, sim_bias.annotator_idx
    s = np.std(y)
    # one more precision M-step with the Gamma(2, 0.1 s^2) prior moves nothing
    ss = np.bincount(j, (y - beta[j] - mu[i]) ** 2 + v[i])
    n_j = np.bincount(j)
    np.testing.assert_allclose(tau, (1 + n_j / 2) / (0.1 * s ** 2 + ss / 2), rtol=1e-8)
    np.testing.assert_allclose(beta.sum(), 0, atol=1e-12)
    # the conditional Gamma posterior's mode is the estimate
    a, b = fit["precision_alpha"].values, fit["precision_beta"].values
    np.testing.assert_allclose((a - 1) / b, tau, rtol=1e-8)
    np.testing.assert_array_equal(fit["n_labels"].values, n_j)


def test_flat_priors_give_maximum_likelihood(sim_bias):
    flat = {k: v for k, v in continuous.FLAT_PRIORS.items()}
    fit = continuous.em(sim_bias, bias=True, **flat, tol=1e-12)
    values = {k: fit[k].values[0, 0] for k in ("precision", "bias", "intercept",
                                                "truth_precision")}

    def loglik(tau, beta, intercept, gamma):
        return continuous.item_log_marginal(sim_bias, tau, gamma, intercept, bias=beta).sum()

    base = (values["precision"], values["bias"], values["intercept"], values["truth_precision"])
    h = 1e-5
    for k in range(len(PRECISION)):  # d loglik / d log precision_k = 0
        up, down = base[0] * np.exp(h * np.eye(6)[k]), base[0] * np.exp(-h * np.eye(6)[k])
        grad = (loglik(up, *base[1:]) - loglik(down, *base[1:])) / (2 * h)
        assert abs(grad) < 1e-4, (k, grad)
    for delta in (h, -h):  # the intercept and a zero-sum move of the biases
        assert loglik(*base) >= loglik(base[0], base[1], base[2] + delta, base[3]) - 1e-9
        move = np.array([1.0, -1.0, 0, 0, 0, 0]) * delta
        assert loglik(*base) >= loglik(base[0], base[1] + move, base[2], base[3]) - 1e-9
    assert fit.attrs["log_posterior"] == pytest.approx(fit.attrs["log_likelihood"])


def test_fits_share_names_and_reports(sim_bias, bias_map):
    em_fit = continuous.em(sim_bias, bias=True)
    for fit in (em_fit, bias_map):
        table = cm.report.annotator_summary(fit)
        for col in ("precision_mean", "precision_lower", "bias_mean", "n_labels"):
            assert col in table.columns
        assert table["n_labels"].sum() == sim_bias.n_annotations
        assert fit.attrs["log_posterior"] < 0
    post = bias_map.posterior
    assert post["true_value"].dims == ("chain", "draw", "item")
    assert post["bias"].sel(annotator="annotator_3").values.shape == (1, 1)
    # MAP's item log-likelihoods sum to EM's log-likelihood
    np.testing.assert_allclose(float(bias_map.log_likelihood["item_labels"].sum()),
                               em_fit.attrs["log_likelihood"], rtol=1e-9)
    summary = cm.report.true_value_summary(em_fit, annotations=sim_bias)
    np.testing.assert_allclose(summary["sd"], em_fit["true_value_sd"].values[0, 0])
    np.testing.assert_allclose(summary["upper"] - summary["mean"],
                               stats.norm.ppf(0.95) * summary["sd"])
    np.testing.assert_array_equal(summary["gold"], sim_bias.gold)
    inside = ((sim_bias.gold >= summary["lower"]) & (sim_bias.gold <= summary["upper"])).mean()
    assert 0.84 < inside < 0.96


def test_true_value_summary_pools_draws():
    draws = xr.Dataset({
        "true_value": (("chain", "draw", "item"), np.array([[[1.0, 2.0], [3.0, 2.0]]])),
        "true_value_sd": (("chain", "draw", "item"), np.array([[[1.0, 0.5], [1.0, 0.5]]])),
    }, coords={"item": ["p", "q"]})
    table = cm.report.true_value_summary(draws)
    np.testing.assert_allclose(table["mean"], [2.0, 2.0])
    np.testing.assert_allclose(table["sd"], [np.sqrt(1 + 1), 0.5])  # mean var + var of means
    assert list(table.index) == ["p", "q"]


def test_experts_equivalent(sim_bias):
    fit = continuous.em(sim_bias, bias=True)
    tau = fit["precision"].values[0, 0]
    n_j = sim_bias.n_labels()
    crowd = tau @ n_j / n_j.sum()
    table = cm.report.experts_equivalent(fit, 20.0)
    assert list(table.index) == ["expert_precision", "crowd_precision", "annotators_per_expert"]
    assert table.loc["crowd_precision", "mean"] == pytest.approx(crowd)
    assert table.loc["annotators_per_expert", "mean"] == pytest.approx(20.0 / crowd)
    assert np.isnan(table.loc["annotators_per_expert", "lower"])
    # an "expert" whose labels are the simulated truth plus noise of precision 8
    rng = np.random.default_rng(0)
    expert = replace(sim_bias, gold=sim_bias.gold + 0.7 + rng.standard_normal(300) / np.sqrt(8))
    by_gold = cm.report.experts_equivalent(fit, "gold", annotations=expert)
    mu, sd = fit["true_value"].values[0, 0], fit["true_value_sd"].values[0, 0]
    r = expert.gold - mu

    def nll(theta):  # the fit has biases, so the expert gets an offset too
        return -stats.norm.logpdf(r, theta[0], np.sqrt(sd ** 2 + np.exp(theta[1]))).sum()

    best = optimize.minimize(nll, [0.0, 0.0], method="Nelder-Mead",
                             options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 4000})
    tau_expert = by_gold.loc["expert_precision", "mean"]
    assert tau_expert == pytest.approx(np.exp(-best.x[1]), rel=1e-5)
    assert 5 < tau_expert < 12
    assert by_gold.loc["annotators_per_expert", "mean"] == pytest.approx(tau_expert / crowd)
    # a perfect expert is infinitely precise
    perfect = replace(sim_bias, gold=mu + 0.3)
    assert np.isinf(cm.report.experts_equivalent(fit, "gold", annotations=perfect).loc[
        "expert_precision", "mean"])


def test_simulate_design_and_noise(rng):
    sim = continuous.simulate(PRECISION, bias=BIAS, n_items=20_000, labels_per_item=3,
                              intercept=5.0, truth_precision=0.5, rng=rng)
    assert sim.continuous and sim.n_annotations == 60_000
    assert (np.bincount(sim.item_idx) == 3).all()
    pairs = sim.item_idx * sim.n_annotators + sim.annotator_idx
    assert len(np.unique(pairs)) == len(pairs)  # drawn without replacement
    resid = sim.labels - sim.gold[sim.item_idx]
    order = sim.annotators.get_indexer([f"annotator_{k}" for k in range(6)])
    for k, j in enumerate(order):
        rows = sim.annotator_idx == j
        assert abs(resid[rows].mean() - BIAS[k]) < 0.05
        assert abs(resid[rows].var() * PRECISION[k] - 1) < 0.05
    assert abs(sim.gold.mean() - 5.0) < 0.05 and abs(sim.gold.var() - 2.0) < 0.1
    np.testing.assert_allclose(sim.truth["bias"].sel(annotator="annotator_3"), BIAS[3])
    assert set(sim.truth.data_vars) == {"precision", "bias", "intercept", "truth_precision"}
    heavy = continuous.simulate([1.0, 1.0], n_items=20_000, noise="student_t", nu=3.0, rng=rng)
    resid = heavy.labels - heavy.gold[heavy.item_idx]
    assert stats.kurtosis(resid) > 3  # Gaussian: 0
    given = continuous.simulate([2.0], true_values=np.arange(5.0), rng=rng)
    np.testing.assert_array_equal(given.gold, np.arange(5.0))
    assert "intercept" not in given.truth


def test_simulate_with_features(rng):
    x = rng.standard_normal((4000, 2))
    sim = continuous.simulate([1.0, 2.0], features=x, coef=[2.0, -1.0], intercept=0.5,
                              truth_precision=4.0, rng=rng)
    np.testing.assert_array_equal(sim.features, x)
    resid = sim.gold - (x @ [2.0, -1.0] + 0.5)
    assert abs(resid.var() - 0.25) < 0.02
    np.testing.assert_allclose(sim.truth["coef"].values, [2.0, -1.0])


def test_registry():
    assert MODELS["continuous"] is continuous
    import crowd_models.models as models

    assert "continuous" in models.__all__


def test_bad_input(sim_bias):
    cat = cm.Annotations.from_frame(pd.DataFrame(
        {"item": [1, 2, 3], "annotator": ["a", "b", "a"], "label": [0, 1, 1]}))
    for fn in (continuous.build_model, continuous.em):
        with pytest.raises(ValueError, match="needs continuous \\(numeric\\) labels"):
            fn(cat)
        with pytest.raises(TypeError, match="expects an Annotations"):
            fn(pd.DataFrame())
    frame = pd.DataFrame({"item": [1, 1, 2], "annotator": ["a", "b", "a"],
                          "label": [0.5, "high", 1.0]})
    with pytest.raises(TypeError, match="continuous labels must be numbers.*'high'"):
        cm.Annotations.from_frame(frame, continuous=True)
    with pytest.raises(ValueError, match="missing or empty on 1 row"):
        cm.Annotations.from_frame(frame.assign(label=[0.5, np.nan, 1.0]), continuous=True)
    with pytest.raises(ValueError, match="must be finite; column 'label' holds infinite"):
        cm.Annotations.from_frame(frame.assign(label=[0.5, np.inf, 1.0]), continuous=True)
    broken = replace(sim_bias, labels=np.where(np.arange(1200) == 7, np.nan, sim_bias.labels))
    with pytest.raises(ValueError, match="1 label\\(s\\) are NaN or infinite \\(rows \\[7\\]"):
        continuous.em(broken)
    same = cm.Annotations.from_frame(frame.assign(label=[2.0, 2.0, 2.0]), continuous=True)
    with pytest.raises(ValueError, match="no spread"):
        continuous.em(same)
    ann = _tiny(False)
    with pytest.raises(ValueError, match="noise='cauchy' is not one of"):
        continuous.build_model(ann, noise="cauchy")
    with pytest.raises(ValueError, match="nu .* positive finite"):
        continuous.build_model(ann, noise="student_t", nu=0)
    with pytest.raises(ValueError, match="has no EM"):
        continuous.em(ann, noise="student_t")
    with pytest.raises(ValueError, match="shape >= 1 and rate >= 0"):
        continuous.em(ann, precision_prior=(0.5, 1.0))
    with pytest.raises(TypeError, match="pair \\(shape, rate\\)"):
        continuous.em(ann, truth_precision_prior=2.0)
    with pytest.raises(ValueError, match="one per annotator"):
        continuous.em(ann, precision_prior=([2, 3], 1.0))
    with pytest.raises(ValueError, match="mixes flat"):
        continuous.em(ann, precision_prior=([1, 2, 2], [0, 1, 1]))
    with pytest.raises(ValueError, match="improper prior without a mode"):
        continuous.em(ann, truth_precision_prior=(2.0, 0.0))
    with pytest.raises(ValueError, match="bias_sd must be a positive number"):
        continuous.em(ann, bias=True, bias_sd=0)
    with pytest.raises(TypeError, match="bias must be True or False"):
        continuous.em(ann, bias="yes")
    with pytest.raises(TypeError, match="scale must be True or False"):
        continuous.em(ann, scale=1.0)
    with pytest.raises(ValueError, match="scale_sd must be a positive number"):
        continuous.em(ann, scale=True, scale_sd=-1)
    with pytest.raises(ValueError, match="label_scale must be a positive finite"):
        continuous.em(ann, label_scale=-1)
    with pytest.raises(ValueError, match="2 numbers \\(one per feature\\)"):
        continuous.em(_tiny(True), coef_precision=[1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="quadrature_nodes"):
        continuous.build_model(ann, noise="student_t", quadrature_nodes=1)
    one = cm.Annotations.from_frame(frame.assign(annotator="a", label=[1.0, 2.0, 4.0]),
                                    continuous=True)
    with pytest.raises(ValueError, match="at least two annotators"):
        continuous.em(one, bias=True)
    with pytest.raises(ValueError, match="scale=True needs at least two annotators"):
        continuous.em(one, scale=True)


def test_simulate_and_report_bad_input(sim_bias):
    with pytest.raises(ValueError, match="bias must sum to zero.*bias - bias.mean\\(\\)"):
        continuous.simulate([1.0, 2.0], bias=[0.5, 0.1], n_items=5)
    with pytest.raises(ValueError, match="scale must average 1.*scale / scale.mean\\(\\)"):
        continuous.simulate([1.0, 2.0], scale=[0.5, 0.7], n_items=5)
    with pytest.raises(ValueError, match="bias must be 2 finite numbers"):
        continuous.simulate([1.0, 2.0], bias=[0.5, -0.5, 0.0], n_items=5)
    with pytest.raises(ValueError, match="precision must be positive"):
        continuous.simulate([1.0, -2.0], n_items=5)
    with pytest.raises(ValueError, match="give n_items"):
        continuous.simulate([1.0, 2.0])
    with pytest.raises(ValueError, match="between 1 and 2"):
        continuous.simulate([1.0, 2.0], n_items=5, labels_per_item=3)
    fit = continuous.em(sim_bias)
    with pytest.raises(ValueError, match="positive number or 'gold'"):
        cm.report.experts_equivalent(fit, -1.0)
    with pytest.raises(ValueError, match="needs annotations=... with continuous gold"):
        cm.report.experts_equivalent(fit, "gold")
    with pytest.raises(ValueError, match="no 'true_value'"):
        cm.report.true_value_summary(cm.models.two_coin.em(cm.datasets.load_bluebirds()))


def test_affect_truth_tracks_expert_gold():
    ann = cm.datasets.load_affect("anger")
    fit = continuous.em(ann, bias=True)
    assert fit.attrs["converged"]
    summary = cm.report.true_value_summary(fit, annotations=ann)
    corr = np.corrcoef(summary["mean"], summary["gold"])[0, 1]
    assert corr > 0.6
    assert (cm.report.annotator_summary(fit)["n_labels"] >= 20).all()


# ---------------------------------------------------------------- slow tier
def _nuts(model, **kwargs):
    return cm.sample(model, progressbar=False, **kwargs)  # starts at the MAP


@pytest.mark.slow
def test_nuts_recovers_simulated_annotators():
    import arviz as az

    sim = continuous.simulate(PRECISION, bias=BIAS, n_items=400, intercept=3.0,
                              truth_precision=0.25, labels_per_item=4,
                              rng=np.random.default_rng(7))
    idata = _nuts(continuous.build_model(sim, bias=True), draws=1000, tune=1000, chains=4,
                  random_seed=11)
    summ = az.summary(idata, var_names=["precision", "bias", "intercept", "truth_precision"])
    assert summ["r_hat"].max() <= 1.01
    assert int(idata.sample_stats["diverging"].sum()) == 0
    covered = 0
    for name in ("precision", "bias"):
        lo, hi = idata.posterior[name].quantile([0.05, 0.95], dim=("chain", "draw")).values
        truth = sim.truth[name].values
        covered += int(((truth >= lo) & (truth <= hi)).sum())
    assert covered >= 9  # of 12 (90% intervals)
    loo = az.loo(idata, pointwise=True)
    assert loo.elpd_i.sizes["item"] == 400
    summary = cm.report.true_value_summary(idata, annotations=sim)
    assert np.corrcoef(summary["mean"], sim.gold)[0, 1] > 0.9
    ratio = cm.report.experts_equivalent(idata, 16.0)
    assert ratio.loc["annotators_per_expert", "lower"] < ratio.loc[
        "annotators_per_expert", "upper"]


@pytest.mark.slow
def test_nuts_recovers_annotators_and_the_regression():
    sim = continuous.simulate(PRECISION, bias=BIAS, n_items=200, n_features=3, coef=COEF,
                              intercept=1.0, labels_per_item=3, rng=np.random.default_rng(6))
    names = ("precision", "bias", "coef", "intercept")
    # 1,000 draws a chain: at 500 the largest r-hat of these 16 variables moved
    # between 1.00 and 1.016 with the seed (the features' standardisation, #44,
    # was enough to move it past 1.01)
    assert_nuts_recovers(continuous.build_model(sim, bias=True),
                         {n: sim.truth[n].values for n in names}, min_cover=0.75, draws=1000)


@pytest.mark.slow
def test_nuts_recovers_annotator_scales():
    sim = continuous.simulate(PRECISION, bias=BIAS, scale=SCALE, n_items=200, intercept=2.0,
                              truth_precision=0.5, labels_per_item=3,
                              rng=np.random.default_rng(7))
    names = ("precision", "bias", "scale")
    assert_nuts_recovers(continuous.build_model(sim, bias=True, scale=True),
                         {n: sim.truth[n].values for n in names}, min_cover=0.75)


@pytest.mark.validate  # eight NUTS fits, 2-4 minutes: over make test's budget
@pytest.mark.parametrize("noise, best", [
    ("gaussian", "gaussian+bias"), ("student_t", "student_t+bias")])
def test_loo_compare_ranks_the_variants(noise, best):
    import arviz as az

    sim = continuous.simulate(PRECISION, bias=2 * BIAS, n_items=200, intercept=3.0,
                              truth_precision=0.25, labels_per_item=4, noise=noise, nu=2.5,
                              rng=np.random.default_rng(8))
    fits = {}
    for variant in ("gaussian", "gaussian+bias", "student_t", "student_t+bias"):
        model = continuous.build_model(sim, bias=variant.endswith("+bias"),
                                       noise=variant.split("+")[0])
        fits[variant] = _nuts(model, draws=400, tune=400, chains=2, random_seed=3)
        assert fits[variant].log_likelihood["item_labels"].sizes["item"] == 200
    ranking = az.compare(fits)
    order = list(ranking.index)
    assert order[-1] != best  # the true variant does not rank last
    assert set(order[:2]) == {"gaussian+bias", "student_t+bias"}  # the biases are found
    if noise == "student_t":
        assert order[0] == best


def _plain_mean_average_correlation():
    """Pearson r of each item's mean label with the expert's score, averaged over
    the affect emotions (NumPy on the loaded codes, not the library's fits)."""
    rs = []
    for emotion in cm.datasets.AFFECT_EMOTIONS:
        a = cm.datasets.load_affect(emotion)
        means = (np.bincount(a.item_idx, weights=a.labels, minlength=a.n_items)
                 / np.bincount(a.item_idx, minlength=a.n_items))
        rs.append(np.corrcoef(means, a.gold)[0, 1])
    return float(np.mean(rs))


def test_plain_mean_average_correlation_is_0_712():
    # the figure the continuous family's (retired) affect target was set against,
    # from the loaders alone
    assert _plain_mean_average_correlation() == pytest.approx(0.712, abs=5e-4)


@pytest.mark.validate  # moved out of make test: the suite took 70 min in a fresh CI here
def test_case_study_runs_fast():
    import re
    from pathlib import Path

    from tests.test_case_studies import run_fast

    root = Path(__file__).resolve().parents[2]
    result = run_fast(root / "case_studies" / "continuous_affect.py")
    assert result.returncode == 0, result.stderr[-3000:]
    found = re.search(r"^RESULT affect_average_corr mean=(\d\.\d+) best=(\d\.\d+) "
                      r"best_model=(\S+)$", result.stdout, re.MULTILINE)
    assert found, "no RESULT affect_average_corr line"
    mean, best = float(found.group(1)), float(found.group(2))
    # the plain mean's average r over the seven emotions (0.712), computed here from
    # the labels; no variant beats it on this data (best 0.70, see the case study)
    assert mean == pytest.approx(_plain_mean_average_correlation(), abs=1e-4)
    assert 0.6 < best < mean + 0.02
    # why: weights measured against the expert on the same headlines lift r by
    # about 0.04, but measured on the other six emotions (out of sample) by
    # about 0.002 only
    found = re.search(r"^RESULT affect_headroom mean=(\d\.\d+) expert_out_of_sample=(\d\.\d+) "
                      r"expert_in_sample=(\d\.\d+)$", result.stdout, re.MULTILINE)
    assert found, "no RESULT affect_headroom line"
    plain, out_of_sample, in_sample = map(float, found.groups())
    assert plain == pytest.approx(mean, abs=1e-4)
    assert in_sample > plain + 0.03
    assert abs(out_of_sample - plain) < 0.01
    assert re.search(r"^RESULT affect_loo_best valence \S+$", result.stdout, re.MULTILINE)
    figures = root / "case_studies" / "figures" / "continuous_affect"
    for name in ("correlation_by_emotion.png", "snow_curve.png", "workers_valence.png"):
        assert (figures / name).stat().st_size > 10_000


def test_gamma_prior_of_the_log_posterior_is_scipys():
    # shapes 1 and 2 (the defaults) have gammaln(a) = 0: check a shape where the
    # normalising constant shows, and the flat case
    from crowd_models.models import continuous as cont

    x = np.array([0.4, 1.7, 3.2])
    np.testing.assert_allclose(cont._gamma_logpdf_nojac(x, 3.5, 2.0, False),
                               stats.gamma(3.5, scale=0.5).logpdf(x).sum(), rtol=1e-12)
    assert cont._gamma_logpdf_nojac(x, 3.5, 2.0, True) == 0.0
