"""The spammer family (MACE): brute-force likelihood, EM, MAP = EM, recovery, report."""

import itertools
import warnings

import numpy as np
import pandas as pd
import pymc as pm
import pytest
from scipy import stats

import crowd_models as cm
from crowd_models.models import spammer

from ..conftest import assert_nuts_recovers

SIMPLEX = pm.distributions.transforms.simplex


def _logit(p):
    p = np.asarray(p, dtype=float)
    return np.log(p / (1 - p))


def _point(trust, share, prev):
    return {"trustworthiness_logodds__": _logit(trust),
            "spam_share_simplex__": SIMPLEX.forward(np.asarray(share)).eval(),
            "prevalence_simplex__": SIMPLEX.forward(np.asarray(prev)).eval()}


@pytest.fixture(scope="module")
def spam_heavy():
    """Binary crowd, 3 of 10 annotators spammers (two of them always say 1)."""
    trust = np.r_[np.linspace(0.55, 0.9, 7), 0.0, 0.0, 0.05]
    share = np.r_[np.full((7, 2), 0.5), [[0.05, 0.95], [0.1, 0.9], [0.5, 0.5]]]
    return spammer.simulate(trust, spam_share=share, n_items=400, prevalence=[0.6, 0.4],
                            labels_per_item=6, rng=np.random.default_rng(3))


@pytest.fixture(scope="module")
def three_classes():
    trust = [0.9, 0.7, 0.5, 0.3, 0.1, 0.8]
    share = np.random.default_rng(5).dirichlet(np.ones(3), size=6)
    return spammer.simulate(trust, spam_share=share, n_items=300, prevalence=[0.5, 0.3, 0.2],
                            labels_per_item=4, classes=["a", "b", "c"],
                            rng=np.random.default_rng(4))


def test_marginal_loglik_matches_brute_force_over_truth_and_spam_switches():
    df = pd.DataFrame({  # item "q" has a repeated label from "u"
        "item": ["p", "p", "q", "q", "q", "r"],
        "annotator": ["u", "v", "u", "u", "v", "v"],
        "label": ["x", "y", "z", "z", "x", "y"],
    })
    ann = cm.Annotations.from_frame(df)
    model = spammer.build_model(ann)
    trust = np.array([0.7, 0.2])
    share = np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])
    prev = np.array([0.5, 0.3, 0.2])
    rows = list(zip(ann.item_idx, ann.annotator_idx, ann.labels, strict=True))
    total = 0.0
    # the generative story itself: every true class and every label's spam switch
    for z in itertools.product(range(3), repeat=ann.n_items):
        for switches in itertools.product((0, 1), repeat=len(rows)):
            p = np.prod(prev[list(z)])
            for (i, j, y), spam in zip(rows, switches, strict=True):
                p *= (1 - trust[j]) * share[j, y] if spam else trust[j] * (y == z[i])
            total += p
    point = _point(trust, share, prev)
    per_item = model.compile_fn(model.logp(vars=[model["item_labels"]], sum=False)[0])(point)
    np.testing.assert_allclose(per_item.sum(), np.log(total), rtol=1e-12)
    log_prior = stats.beta.logpdf(trust, 1.5, 1.5).sum()
    log_prior += sum(stats.dirichlet.logpdf(row, [1.5] * 3) for row in share)
    log_prior += stats.dirichlet.logpdf(prev, [2, 2, 2])
    logp = model.compile_logp(jacobian=False)(point)
    np.testing.assert_allclose(logp, np.log(total) + log_prior, rtol=1e-12)
    # the EM's objective is the same function
    params = {"trustworthiness": trust, "spam_share": share, "prevalence": prev}
    pri = spammer._priors(ann, *spammer.DEFAULT_PRIORS.values())
    np.testing.assert_allclose(spammer._log_posterior(ann, params, pri), logp, rtol=1e-12)


def test_two_classes_are_a_two_coin_model(sim_plain, plain_model):
    model = spammer.build_model(sim_plain)
    trust = np.array([0.8, 0.6, 0.1, 0.5, 0.3])
    share = np.array([[0.5, 0.5], [0.3, 0.7], [0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
    sens = trust + (1 - trust) * share[:, 1]
    spec = trust + (1 - trust) * share[:, 0]
    ll = model.compile_fn(model.logp(vars=[model["item_labels"]], sum=False)[0])(
        _point(trust, share, [0.7, 0.3]))
    tc = plain_model.compile_fn(plain_model.logp(vars=[plain_model["item_labels"]],
                                                 sum=False)[0])({
        "sensitivity_logodds__": _logit(sens), "specificity_logodds__": _logit(spec),
        "prevalence_logodds__": _logit(0.3)})
    np.testing.assert_allclose(ll, tc, rtol=1e-12)


def test_plain_em_climbs_the_log_posterior(three_classes):
    values = []
    for n in range(1, 8):
        with pytest.warns(UserWarning, match=f"stopped after {n} iterations without converging"):
            fit = spammer.em(three_classes, max_iter=n, accelerate=False)
        values.append(fit.attrs["log_posterior"])
    assert np.all(np.diff(values) > -1e-9), values
    assert values[-1] > values[0] + 1e-3


def test_em_fixed_point_is_stationary(three_classes):
    fit = spammer.em(three_classes, tol=1e-12)
    assert fit.attrs["converged"]
    pri = spammer._priors(three_classes, *spammer.DEFAULT_PRIORS.values())
    params = {n: fit[n].values[0, 0] for n in ("trustworthiness", "spam_share", "prevalence")}
    best = spammer._log_posterior(three_classes, params, pri)
    rng = np.random.default_rng(0)
    for _ in range(20):  # no small move inside the supports goes higher
        moved = {
            "trustworthiness": np.clip(params["trustworthiness"]
                                       + 1e-4 * rng.standard_normal(6), 1e-9, 1 - 1e-9),
            "spam_share": params["spam_share"] * np.exp(1e-4 * rng.standard_normal((6, 3))),
            "prevalence": params["prevalence"] * np.exp(1e-4 * rng.standard_normal(3)),
        }
        moved["spam_share"] /= moved["spam_share"].sum(axis=1, keepdims=True)
        moved["prevalence"] /= moved["prevalence"].sum()
        assert spammer._log_posterior(three_classes, moved, pri) <= best + 1e-9


@pytest.mark.parametrize("data", ["spam_heavy", "three_classes"])
def test_map_equals_em(data, request):
    ann = request.getfixturevalue(data)
    em_fit = spammer.em(ann)
    assert em_fit.attrs["converged"]
    map_fit = cm.fit_map(spammer.build_model(ann))
    for name in ("trustworthiness", "spam_share", "prevalence", "confusion", "item_class_prob"):
        diff = np.abs(map_fit.posterior[name].values - em_fit[name].values).max()
        assert diff <= 1e-6, (name, diff)
    np.testing.assert_allclose(map_fit.attrs["log_posterior"], em_fit.attrs["log_posterior"],
                               rtol=1e-10)


def test_map_equals_em_on_web_search():
    ann = cm.datasets.load_web_search()
    em_fit = spammer.em(ann)
    map_fit = cm.fit_map(spammer.build_model(ann))
    for name in ("trustworthiness", "prevalence", "item_class_prob"):
        diff = np.abs(map_fit.posterior[name].values - em_fit[name].values).max()
        assert diff <= 1e-6, (name, diff)
    # majority vote scores 0.79 and the default Dawid-Skene 0.787 on these labels
    assert cm.report.accuracy(em_fit, ann) >= 0.81


def test_em_tells_spammers_from_good_annotators(spam_heavy):
    fit = spammer.em(spam_heavy)
    truth = spam_heavy.truth["trustworthiness"].sel(annotator=fit["annotator"]).values
    trust = fit["trustworthiness"].values[0, 0]
    assert np.all(trust[truth == 0.0] < 0.1), trust[truth == 0.0]
    assert np.all(trust[truth >= 0.8] > 0.7), trust[truth >= 0.8]
    assert np.corrcoef(trust, truth)[0, 1] > 0.95
    # the always-1 spammers' spam share is found
    share = fit["spam_share"].values[0, 0]
    always_one = spam_heavy.truth["spam_share"].sel(annotator=fit["annotator"]).values[:, 1] > 0.85
    assert np.all(share[always_one, 1] > 0.8)
    assert cm.report.accuracy(fit, spam_heavy) >= 0.9


def test_annotator_table_reports_trust_with_beta_intervals(spam_heavy):
    fit = spammer.em(spam_heavy)
    table = cm.report.annotator_summary(fit)
    a, b = fit["trustworthiness_alpha"].values, fit["trustworthiness_beta"].values
    np.testing.assert_allclose(table["trustworthiness_mean"], a / (a + b), rtol=1e-12)
    np.testing.assert_allclose(table["trustworthiness_lower"], stats.beta.ppf(0.05, a, b))
    np.testing.assert_allclose(table["trustworthiness_upper"], stats.beta.ppf(0.95, a, b))
    # prior plus expected truthful and spam labels: every label counted once
    np.testing.assert_allclose(a + b - 3.0, spam_heavy.n_labels(), rtol=1e-10)
    # the intervals set the pure spammers apart from everyone else
    truth = spam_heavy.truth["trustworthiness"].sel(annotator=table.index).values
    assert (table["trustworthiness_upper"][truth == 0] < 0.1).all()
    assert (table["trustworthiness_lower"][truth > 0.5] > 0.4).all()
    assert np.corrcoef(table["trustworthiness_mean"], truth)[0, 1] > 0.95
    assert {"accuracy_mean", "n_labels"} <= set(table.columns)


def test_accuracy_intervals_from_rows_matched_to_trust_and_spam():
    """The EM fit's Dirichlet rows have the EM confusion as mean, and each diagonal's
    variance is that of t + (1 - t) s_k under trust t ~ Beta and spam shares
    s ~ Dirichlet (checked by Monte Carlo); every annotator gets accuracy intervals."""
    rng = np.random.default_rng(4)
    trust_a, trust_b = np.array([30.0, 4.0, 2.5]), np.array([6.0, 20.0, 2.5])
    spam_alpha = np.array([[2.0, 5.0, 9.0], [40.0, 3.0, 1.5], [1.5, 1.5, 1.5]])
    t = rng.beta(trust_a, trust_b, size=(200_000, 3))
    share = np.stack([rng.dirichlet(a, 200_000) for a in spam_alpha], axis=1)
    confusion = spammer.confusion_of(trust_a / (trust_a + trust_b),
                                     spam_alpha / spam_alpha.sum(axis=1, keepdims=True))
    alpha = spammer._dirichlet_rows(confusion, trust_a, trust_b, spam_alpha)
    total = alpha.sum(axis=-1)
    np.testing.assert_allclose(alpha / total[..., None], confusion, rtol=1e-12)
    diagonal = np.diagonal(confusion, axis1=1, axis2=2)
    implied = diagonal * (1 - diagonal) / (total + 1)  # the Beta marginal's variance
    drawn = (t[:, :, None] + (1 - t[:, :, None]) * share).var(axis=0)
    np.testing.assert_allclose(implied, drawn, rtol=0.03)


def test_annotator_table_has_accuracy_intervals(spam_heavy):
    table = cm.report.annotator_summary(spammer.em(spam_heavy))
    for name in [c.removesuffix("_mean") for c in table.columns
                 if c.startswith("accuracy") and c.endswith("_mean")]:
        assert (table[f"{name}_lower"] <= table[f"{name}_mean"]).all()
        assert (table[f"{name}_mean"] <= table[f"{name}_upper"]).all()


def test_simulate_draws_from_the_model():
    ann = spammer.simulate([1.0, 0.0], spam_share=[[0.5, 0.5], [0.0, 1.0]], n_items=200,
                           rng=np.random.default_rng(1))
    frame = ann.to_frame()
    gold = ann.gold_series()
    honest = frame[frame["annotator"] == "annotator_0"]
    assert (honest["label"].to_numpy() == gold.loc[honest["item"]].to_numpy()).all()
    assert (frame[frame["annotator"] == "annotator_1"]["label"] == 1).all()


def test_bad_input(spam_heavy):
    with pytest.raises(ValueError, match="no classifier.*with_features"):
        spammer.build_model(spam_heavy.with_features(np.ones((spam_heavy.n_items, 1))))
    with pytest.raises(ValueError, match="categorical"):
        spammer.em(cm.datasets.load_affect("anger"))
    with pytest.raises(ValueError, match="spam_prior concentrations must be finite and >= 1"):
        spammer.em(spam_heavy, spam_prior=0.5)
    with pytest.raises(ValueError, match=r"spam_prior must be .* broadcasts to \(10, 2\)"):
        spammer.build_model(spam_heavy, spam_prior=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="trustworthiness_prior needs a >= 1"):
        spammer.em(spam_heavy, trustworthiness_prior=(0.5, 1))
    with pytest.raises(ValueError, match="spam_share must be"):
        spammer.simulate([0.5, 0.5], spam_share=[[0.5, 0.5]], n_items=10)
    with pytest.raises(ValueError, match="trustworthiness must be one probability"):
        spammer.simulate([1.5], n_items=10)
    with pytest.raises(ValueError, match="prevalence must be 2"):
        spammer.simulate([0.5], prevalence=[0.2, 0.2], n_items=10)


@pytest.mark.slow
def test_nuts_recovers_trust_and_spam_shares():
    trust = np.array([0.9, 0.75, 0.6, 0.4, 0.1, 0.0])
    share = np.r_[np.full((4, 2), 0.5), [[0.2, 0.8], [0.9, 0.1]]]
    ann = spammer.simulate(trust, spam_share=share, n_items=250, rng=np.random.default_rng(8))
    order = ann.truth["trustworthiness"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        assert_nuts_recovers(spammer.build_model(ann), {
            "trustworthiness": order.values, "prevalence": ann.truth["prevalence"].values,
        }, min_cover=0.75)
