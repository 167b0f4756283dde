"""The item-difficulty family (GLAD): brute-force likelihood, EM, MAP = EM, recovery."""

import itertools
import warnings

import numpy as np
import pandas as pd
import pymc as pm
import pytest
from scipy import stats
from scipy.special import expit

import crowd_models as cm
from crowd_models.models import item_difficulty as idf

from ..conftest import assert_nuts_recovers

SIMPLEX = pm.distributions.transforms.simplex


@pytest.fixture(scope="module")
def varied():
    """Three classes, items of very different easiness, annotators of mixed ability."""
    rng = np.random.default_rng(11)
    easiness = np.exp(rng.normal(0, 1.2, 300))
    return idf.simulate([3.0, 2.0, 1.5, 1.0, 0.5, 0.0, 2.5], easiness, n_classes=3,
                        labels_per_item=5, rng=rng)


def test_marginal_loglik_matches_brute_force():
    df = pd.DataFrame({  # item "q" has a repeated label from "u"
        "item": ["p", "p", "q", "q", "q", "r"],
        "annotator": ["u", "v", "u", "u", "v", "v"],
        "label": ["x", "y", "z", "z", "x", "y"],
    })
    ann = cm.Annotations.from_frame(df)
    model = idf.build_model(ann)
    ability = np.array([1.3, -0.4])
    log_easiness = np.array([0.2, -0.7, 1.1])
    prev = np.array([0.5, 0.3, 0.2])
    total = 0.0
    for z in itertools.product(range(3), repeat=ann.n_items):
        p = np.prod(prev[list(z)])
        for i, j, y in zip(ann.item_idx, ann.annotator_idx, ann.labels, strict=True):
            right = expit(ability[j] * np.exp(log_easiness[i]))
            p *= right if y == z[i] else (1 - right) / 2
        total += p
    point = {"ability": ability, "log_easiness": log_easiness,
             "prevalence_simplex__": SIMPLEX.forward(prev).eval()}
    per_item = model.compile_fn(model.logp(vars=[model["item_labels"]], sum=False)[0])(point)
    np.testing.assert_allclose(per_item.sum(), np.log(total), rtol=1e-12)
    log_prior = stats.norm.logpdf(ability, 1, 1).sum() + stats.norm.logpdf(log_easiness).sum()
    log_prior += stats.dirichlet.logpdf(prev, [2, 2, 2])
    logp = model.compile_logp(jacobian=False)(point)
    np.testing.assert_allclose(logp, np.log(total) + log_prior, rtol=1e-12)
    pri = idf._priors(ann, *idf.DEFAULT_PRIORS.values())
    params = {"ability": ability, "log_easiness": log_easiness, "prevalence": prev}
    np.testing.assert_allclose(idf._log_posterior(ann, params, pri), logp, rtol=1e-12)


def test_plain_em_climbs_the_log_posterior(varied):
    values = []
    for n in range(1, 6):
        with pytest.warns(UserWarning, match="without converging"):
            fit = idf.em(varied, max_iter=n, accelerate=False)
        values.append(fit.attrs["log_posterior"])
    assert np.all(np.diff(values) > -1e-8), values


def test_map_equals_em(varied):
    em_fit = idf.em(varied, tol=1e-10)
    assert em_fit.attrs["converged"]
    map_fit = cm.fit_map(idf.build_model(varied))
    for name in ("ability", "log_easiness", "prevalence", "item_class_prob"):
        diff = np.abs(map_fit.posterior[name].values - em_fit[name].values).max()
        assert diff <= 1e-5, (name, diff)
    np.testing.assert_allclose(map_fit.attrs["log_posterior"], em_fit.attrs["log_posterior"],
                               rtol=1e-9)


def test_em_recovers_ability_and_easiness(varied):
    fit = idf.em(varied)
    truth = varied.truth.sel(annotator=fit["annotator"], item=fit["item"])
    ability = fit["ability"].values[0, 0]
    assert np.corrcoef(ability, truth["ability"].values)[0, 1] > 0.9
    assert abs(ability[truth["ability"].values == 0.0][0]) < 0.5  # the guesser
    # easiness is shrunk (five labels an item), but it ranks the items
    rho = stats.spearmanr(fit["log_easiness"].values[0, 0], truth["log_easiness"].values)
    assert rho.statistic > 0.4
    table = cm.report.item_table(fit, varied)
    np.testing.assert_allclose(table["easiness_mean"], fit["easiness"].values[0, 0])
    vote = cm.majority_vote(varied).to_numpy().argmax(axis=1)
    assert cm.report.accuracy(fit, varied) > np.mean(vote == varied.gold) + 0.01


def test_em_reports_ability_intervals_from_its_curvature(varied):
    """The EM stores each ability's Laplace sd given the final E-step and the easiness:
    1 / sqrt of minus the second derivative (here by finite differences) of the
    expected complete-data log posterior in that ability; the table's intervals
    are that Normal's."""
    from scipy.special import expit
    from scipy.stats import norm

    fit = idf.em(varied)
    ability = fit["ability"].values.ravel()
    easy = fit["easiness"].values.reshape(-1)
    prob = fit["item_class_prob"].values.reshape(varied.n_items, varied.n_classes)
    mean, sd = idf.DEFAULT_PRIORS["ability_prior"]
    K = varied.n_classes

    def expected(j, a):
        rows = varied.annotator_idx == j
        e = easy[varied.item_idx[rows]]
        q = prob[varied.item_idx[rows], varied.labels[rows]]  # P(the label is the truth)
        p = expit(a * e)
        return (np.sum(q * np.log(p) + (1 - q) * np.log((1 - p) / (K - 1)))
                + norm.logpdf(a, mean, sd))

    h = 1e-4
    for j in range(varied.n_annotators):
        a = ability[j]
        curvature = (expected(j, a + h) - 2 * expected(j, a) + expected(j, a - h)) / h ** 2
        np.testing.assert_allclose(fit["ability_sd"].values[j], 1 / np.sqrt(-curvature),
                                   rtol=1e-4)
    table = cm.report.annotator_summary(fit)
    np.testing.assert_allclose(table["ability_lower"],
                               norm.ppf(0.05, ability, fit["ability_sd"].values))
    assert (table["ability_lower"] < table["ability_mean"]).all()


def test_bad_input(varied):
    with pytest.raises(ValueError, match="no classifier.*with_features"):
        idf.build_model(varied.with_features(np.ones((varied.n_items, 1))))
    with pytest.raises(ValueError, match="variant='bogus' is not one of"):
        idf.build_model(varied, variant="bogus")
    with pytest.raises(ValueError, match="hierarchical variant has no EM"):
        idf.em(varied, variant="hierarchical")
    with pytest.raises(ValueError, match="ability_prior must be"):
        idf.em(varied, ability_prior=(1.0, 0.0))
    with pytest.raises(ValueError, match="easiness_sd must be a positive number"):
        idf.em(varied, easiness_sd=-1)
    with pytest.raises(ValueError, match="easiness must be one positive"):
        idf.simulate([1.0], [1.0, -1.0])
    with pytest.raises(ValueError, match="categorical"):
        idf.em(cm.datasets.load_affect("anger"))


@pytest.mark.validate  # about 90 s: 150 item offsets need 1000 draws for r-hat <= 1.01
def test_nuts_recovers_the_hierarchical_model():
    rng = np.random.default_rng(12)
    ann = idf.simulate([2.5, 2.0, 1.5, 1.0, 0.5, 0.0], np.exp(rng.normal(0, 0.8, 150)),
                       n_classes=2, rng=rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        idata = assert_nuts_recovers(
            idf.build_model(ann, variant="hierarchical"),
            {"ability": ann.truth["ability"].values}, min_cover=0.66, draws=1000)
    spread = idata.posterior["easiness_spread"].quantile([0.05, 0.95]).values
    assert spread[0] < 0.8 < spread[1]


# ------------------------------------------------------------------ IRT
@pytest.fixture(scope="module")
def irt_data():
    """Binary labels from the IRT variant: items of varied difficulty, biased annotators."""
    rng = np.random.default_rng(3)
    return idf.simulate_irt(rng.normal(1.0, 1.0, 8), rng.normal(0, 0.7, 8),
                            rng.normal(0, 1, 300), np.exp(rng.normal(0, 0.5, 300)),
                            prevalence=0.4, labels_per_item=5, rng=rng)


def test_irt_marginal_loglik_matches_brute_force():
    df = pd.DataFrame({  # item "q" has a repeated label from "u"
        "item": ["p", "p", "q", "q", "q", "r"],
        "annotator": ["u", "v", "u", "u", "v", "v"],
        "label": ["no", "yes", "yes", "yes", "no", "yes"],
    })
    ann = cm.Annotations.from_frame(df)
    assert list(ann.classes) == ["no", "yes"]
    model = idf.build_model(ann, variant="irt")
    ability, bias = np.array([1.3, -0.4]), np.array([0.5, -0.8])
    difficulty, log_easiness = np.array([0.3, -1.0, 1.5]), np.array([0.2, -0.7, 1.1])
    prev = np.array([0.35, 0.65])
    total = 0.0
    for z in itertools.product(range(2), repeat=ann.n_items):
        p = np.prod(prev[list(z)])
        for i, j, y in zip(ann.item_idx, ann.annotator_idx, ann.labels, strict=True):
            shift = bias[j] if z[i] == 1 else -bias[j]
            right = expit(np.log1p(np.exp(np.exp(log_easiness[i]) * (
                ability[j] + shift - difficulty[i]))))
            p *= right if y == z[i] else 1 - right
        total += p
    point = {"ability": ability, "bias": bias, "difficulty": difficulty,
             "log_easiness": log_easiness, "prevalence_simplex__": SIMPLEX.forward(prev).eval()}
    per_item = model.compile_fn(model.logp(vars=[model["item_labels"]], sum=False)[0])(point)
    np.testing.assert_allclose(per_item.sum(), np.log(total), rtol=1e-12)
    log_prior = (stats.norm.logpdf(ability, 1, 1).sum() + stats.norm.logpdf(bias).sum()
                 + stats.norm.logpdf(difficulty).sum() + stats.norm.logpdf(log_easiness).sum()
                 + stats.dirichlet.logpdf(prev, [2, 2]))
    logp = model.compile_logp(jacobian=False)(point)
    np.testing.assert_allclose(logp, np.log(total) + log_prior, rtol=1e-12)
    pri = idf._priors(ann, *idf.DEFAULT_PRIORS.values())
    params = {"ability": ability, "bias": bias, "difficulty": difficulty,
              "log_easiness": log_easiness, "prevalence": prev}
    np.testing.assert_allclose(idf._log_posterior(ann, params, pri), logp, rtol=1e-12)


def test_irt_map_equals_em_and_recovers(irt_data):
    em_fit = idf.em(irt_data, variant="irt", tol=1e-10)
    assert em_fit.attrs["converged"]
    map_fit = cm.fit_map(idf.build_model(irt_data, variant="irt"))
    for name in ("ability", "bias", "difficulty", "log_easiness", "prevalence",
                 "item_class_prob", "sensitivity", "specificity"):
        diff = np.abs(map_fit.posterior[name].values - em_fit[name].values).max()
        assert diff <= 1e-6, (name, diff)
    truth = irt_data.truth.sel(annotator=em_fit["annotator"], item=em_fit["item"])
    for name, least in (("ability", 0.8), ("sensitivity", 0.7), ("specificity", 0.7)):
        r = np.corrcoef(em_fit[name].values[0, 0], truth[name].values)[0, 1]
        assert r > least, (name, r)  # 8 annotators: a correlation of 0.7 is noisy
    rho = stats.spearmanr(em_fit["difficulty"].values[0, 0], truth["difficulty"].values)
    assert rho.statistic > 0.25  # 5 binary labels an item say little about its difficulty
    vote = cm.majority_vote(irt_data).to_numpy().argmax(axis=1)
    assert cm.report.accuracy(em_fit, irt_data) > np.mean(vote == irt_data.gold) + 0.01
    table = cm.report.item_table(em_fit, irt_data)
    np.testing.assert_allclose(table["difficulty_mean"], em_fit["difficulty"].values[0, 0])


def test_irt_em_reports_rate_intervals_from_its_curvature(irt_data):
    """The IRT EM stores, per annotator, the Laplace approximation of (ability, bias)
    given the item parameters and the final E-step: minus the inverse of the 2 x 2
    Hessian (here by finite differences) of the expected complete log posterior;
    the table's sensitivity and specificity intervals are the Normal quantiles of
    ability +- bias mapped through the typical rate expit(softplus(.))."""
    from scipy.special import log_expit
    from scipy.stats import norm

    fit = idf.em(irt_data, variant="irt", tol=1e-10)
    a, b = (fit[n].values.ravel() for n in ("ability", "bias"))
    d, le = fit["difficulty"].values.ravel(), fit["log_easiness"].values.ravel()
    prob = fit["item_class_prob"].values.reshape(irt_data.n_items, 2)
    mean, sd = idf.DEFAULT_PRIORS["ability_prior"]

    def expected(j, aj, bj):
        rows = irt_data.annotator_idx == j
        i, sign = irt_data.item_idx[rows], 2.0 * irt_data.labels[rows] - 1
        total = norm.logpdf(aj, mean, sd) + norm.logpdf(bj, 0, 1)
        for k, c in ((0, -1.0), (1, 1.0)):
            u = np.exp(le[i]) * (aj + c * bj - d[i])
            total += prob[i, k] @ log_expit(sign * c * np.logaddexp(0, u))
        return total

    h = 1e-4
    table = cm.report.annotator_summary(fit)
    for j in range(irt_data.n_annotators):
        f = lambda x, y, j=j: expected(j, a[j] + x, b[j] + y)  # noqa: E731
        hess = np.array([
            [f(h, 0) - 2 * f(0, 0) + f(-h, 0), (f(h, h) - f(h, -h) - f(-h, h) + f(-h, -h)) / 4],
            [0.0, f(0, h) - 2 * f(0, 0) + f(0, -h)]]) / h ** 2
        hess[1, 0] = hess[0, 1]
        cov = np.linalg.inv(-hess)
        np.testing.assert_allclose(fit["ability_sd"].values[j], np.sqrt(cov[0, 0]), rtol=1e-4)
        np.testing.assert_allclose(fit["bias_sd"].values[j], np.sqrt(cov[1, 1]), rtol=1e-4)
        for name, c in (("sensitivity", 1), ("specificity", -1)):
            scale = np.sqrt(cov[0, 0] + cov[1, 1] + 2 * c * cov[0, 1])
            for q, column in ((0.05, "lower"), (0.95, "upper")):
                x = norm.ppf(q, a[j] + c * b[j], scale)
                np.testing.assert_allclose(table[f"{name}_{column}"].iloc[j],
                                           expit(np.logaddexp(0, x)), rtol=1e-4)
    assert (table["sensitivity_lower"] < fit["sensitivity"].values.ravel()).all()
    assert (table["specificity_upper"] > fit["specificity"].values.ravel()).all()


def test_irt_bad_input(irt_data, varied):
    with pytest.raises(ValueError, match="for binary labels.*3 classes"):
        idf.build_model(varied, variant="irt")
    with pytest.raises(ValueError, match="bias_sd apply to the IRT variants"):
        idf.em(varied, bias_sd=0.5)
    with pytest.raises(ValueError, match="irt_hierarchical variant has no EM"):
        idf.em(irt_data, variant="irt_hierarchical")
    with pytest.raises(ValueError, match="difficulty_sd must be a positive number"):
        idf.em(irt_data, variant="irt", difficulty_sd=0.0)
    with pytest.raises(ValueError, match="bias has 1 entries for 2 annotators"):
        idf.simulate_irt([1.0, 2.0], [0.0], [0.0], [1.0])
    with pytest.raises(ValueError, match="easiness must be one positive"):
        idf.simulate_irt([1.0], [0.0], [0.0, 1.0], [1.0])


@pytest.mark.validate
@pytest.mark.xfail(strict=False, reason=(
    "known finding, issue 13: easiness_spread mixes marginally with six binary labels an "
    "item (r-hat 1.014 at 1000 draws; at 2000, 3 divergences at target_accept 0.98, r-hat "
    "1.012 at 0.99); see the item_difficulty module docstring"))
def test_nuts_recovers_the_hierarchical_irt_model():
    rng = np.random.default_rng(13)
    ann = idf.simulate_irt(rng.normal(1.5, 0.8, 6), rng.normal(0, 0.5, 6),
                           rng.normal(0, 0.7, 150), np.exp(rng.normal(0, 0.4, 150)), rng=rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        idata = assert_nuts_recovers(
            idf.build_model(ann, variant="irt_hierarchical"),
            {"sensitivity": ann.truth["sensitivity"].values,
             "specificity": ann.truth["specificity"].values}, min_cover=0.66, draws=2000)
    spread = idata.posterior["difficulty_spread"].quantile([0.05, 0.95]).values
    assert spread[0] < 0.7 < spread[1]
