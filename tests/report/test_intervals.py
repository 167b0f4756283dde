"""Intervals in the annotator tables: every reported estimate lies inside its own
interval, and an EM fit's intervals are those of the approximation it states
(checked against draws from that approximation made here with NumPy)."""

import warnings

import numpy as np
import pytest
from scipy import stats

import crowd_models as cm
from crowd_models import report
from crowd_models.models import continuous, dawid_skene, two_coin
from crowd_models.report._approximations import (
    beta_moments,
    beta_quantile,
    beta_sum_summary,
    gamma_quantile,
    gamma_sd,
)

from ..conftest import assert_estimates_inside_intervals, beta_sum_quantiles

CASES = {
    "two-coin RTE": lambda: two_coin.em(cm.datasets.load_rte()),
    "Dawid-Skene dog": lambda: dawid_skene.em(cm.datasets.load_dog()),
    "one-coin dog": lambda: dawid_skene.em(cm.datasets.load_dog(), variant="one_coin"),
    "Dawid-Skene web": lambda: dawid_skene.em(cm.datasets.load_web_search()),
    "continuous anger": lambda: continuous.em(cm.datasets.load_affect("anger")),
}


@pytest.fixture(scope="module")
def em_fits():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # e.g. web search's several modes
        return {name: make() for name, make in CASES.items()}


@pytest.mark.parametrize("case", list(CASES))
def test_em_estimates_lie_inside_their_intervals(em_fits, case):
    table = report.annotator_summary(em_fits[case])
    # at least one interval per annotator
    assert assert_estimates_inside_intervals(table) >= len(table)


def test_dawid_skene_em_intervals_are_the_dirichlet_rows(em_fits):
    fit = em_fits["Dawid-Skene dog"]
    table = report.annotator_summary(fit)
    alpha = fit["confusion_alpha"].transpose("annotator", "true_class", "label_class").values
    prevalence = fit["prevalence"].values.reshape(-1)
    rng = np.random.default_rng(5)
    n = 20_000
    # draw whole rows from the Dirichlet (the stated approximation) with NumPy
    gammas = rng.gamma(alpha[None], size=(n, *alpha.shape))
    rows = gammas / gammas.sum(axis=3, keepdims=True)
    diag = np.diagonal(rows, axis1=2, axis2=3)  # (n, annotator, class)
    classes = list(fit["true_class"].values)
    for k, c in enumerate(classes):
        draws = diag[:, :, k]
        sd = draws.std(0)
        for column, value in (("mean", draws.mean(0)), ("lower", np.quantile(draws, 0.05, 0)),
                              ("upper", np.quantile(draws, 0.95, 0))):
            error = np.abs(table[f"accuracy_{c}_{column}"].to_numpy() - value)
            assert np.all(error < 0.06 * sd + 1e-4), (c, column)
    overall = diag @ prevalence
    sd = overall.std(0)
    for column, value in (("mean", overall.mean(0)), ("sd", sd),
                          ("lower", np.quantile(overall, 0.05, 0)),
                          ("upper", np.quantile(overall, 0.95, 0))):
        error = np.abs(table[f"accuracy_{column}"].to_numpy() - value)
        # these 20,000 draws' own error (about 0.015 sd per interval end) and the
        # table's moment-matched Beta (at most 0.04 sd, the test below)
        assert np.all(error < 0.08 * sd + 1e-4), column


def test_beta_sum_summary_of_one_term_is_that_beta():
    a, b = np.array([[3.0, 9.0, 2.0], [40.0, 1.5, 7.0]]), np.array([[2.0, 1.0, 6.0]] * 2)
    summary = beta_sum_summary(a, b, [0.0, 0.7, 0.0], 0.9)
    np.testing.assert_allclose(summary["mean"], 0.7 * a[:, 1] / (a[:, 1] + b[:, 1]), rtol=1e-12)
    np.testing.assert_allclose(summary["sd"], 0.7 * stats.beta.std(a[:, 1], b[:, 1]), rtol=1e-12)
    for end, q in (("lower", 0.05), ("upper", 0.95)):
        np.testing.assert_allclose(summary[end], 0.7 * stats.beta.ppf(q, a[:, 1], b[:, 1]),
                                   rtol=1e-9)


def test_closed_forms_are_scipy_stats_without_importing_it():
    """The report's Beta and Gamma quantiles, Gamma sd and Beta moments (scipy.special, so
    that a command line need not import scipy.stats) against scipy.stats itself,
    parameters at and beyond their edges included (NaN where scipy gives NaN)."""
    values = np.array([0.0, 1e-300, 1e-3, 0.5, 1.0, 10.0, 1e6, np.nan, -1.0])
    a, b = (x.ravel() for x in np.meshgrid(values, values))
    with np.errstate(all="ignore"):
        for q in (0.0, 0.05, 0.5, 0.95, 1.0):
            np.testing.assert_allclose(beta_quantile(q, a, b), stats.beta.ppf(q, a, b),
                                       rtol=1e-13, atol=0)
            np.testing.assert_allclose(gamma_quantile(q, a, b),
                                       stats.gamma.ppf(q, a, scale=1 / b), rtol=1e-13, atol=0)
        sd, expected = gamma_sd(a, b), stats.gamma.std(a, scale=1 / b)
        overflow = np.isinf(expected) & (b == 1e-300)  # scipy's variance overflows there
        np.testing.assert_allclose(sd[~overflow], expected[~overflow], rtol=1e-11, atol=0)
        assert np.all(sd[overflow] > 1e298)
        mean, sd = beta_moments(a, b)
        np.testing.assert_allclose(mean, stats.beta.mean(a, b), rtol=1e-13, atol=0)
        np.testing.assert_allclose(sd, stats.beta.std(a, b), rtol=1e-12, atol=0)


def test_beta_sum_summary_rejects_negative_weights():
    with pytest.raises(ValueError, match="non-negative"):
        beta_sum_summary(np.ones(2), np.ones(2), [0.5, -0.5], 0.9)


@pytest.mark.parametrize("case", ["Dawid-Skene dog", "Dawid-Skene web"])
@pytest.mark.parametrize(("ci_prob", "tolerance"), [(0.9, 0.05), (0.95, 0.08)])
def test_dawid_skene_em_accuracy_interval_is_the_exact_sums_within_tolerance(
        em_fits, case, ci_prob, tolerance):
    """The overall accuracy of an EM fit, sum_k prevalence_k x Beta marginal_kk, is
    summarised by the Beta with its exact mean and variance. Against the sum's exact
    quantiles (grid enumeration, off by at most 2e-4 here) its interval ends are off
    by at most 0.040 sd (dog, 90%; web search 0.028) and 0.061 sd (95%). The
    tolerances, 0.05 and 0.08 sd, are below twice the standard error of the 4,000
    Monte Carlo draws per annotator that the table used before (0.033 sd at a 90%
    end, 0.042 sd at a 95% end)."""
    fit = em_fits[case]
    table = report.annotator_summary(fit, ci_prob=ci_prob)
    alpha = fit["confusion_alpha"].transpose("annotator", "true_class", "label_class").values
    a = np.diagonal(alpha, axis1=1, axis2=2)
    b = np.diagonal(alpha.sum(axis=2, keepdims=True) - alpha, axis1=1, axis2=2)
    prevalence = fit["prevalence"].values.reshape(-1)
    exact = np.array([beta_sum_quantiles(a[j], b[j], prevalence,
                                         [(1 - ci_prob) / 2, (1 + ci_prob) / 2], step=5e-5)
                      for j in range(len(a))])
    sd = table["accuracy_sd"].to_numpy()
    np.testing.assert_allclose(table["accuracy_mean"], a / (a + b) @ prevalence, rtol=1e-12)
    for end, column in enumerate(("lower", "upper")):
        error = np.abs(table[f"accuracy_{column}"].to_numpy() - exact[:, end])
        assert np.all(error < tolerance * sd), (column, (error / sd).max())


def test_one_coin_em_intervals_are_the_beta_of_its_accuracy(em_fits):
    fit = em_fits["one-coin dog"]
    table = report.annotator_summary(fit)
    a, b = fit["accuracy_alpha"].values, fit["accuracy_beta"].values
    draws = np.random.default_rng(6).beta(a, b, size=(40_000, a.size))
    sd = draws.std(0)
    for column, value in (("mean", draws.mean(0)), ("lower", np.quantile(draws, 0.05, 0)),
                          ("upper", np.quantile(draws, 0.95, 0))):
        assert np.all(np.abs(table[f"accuracy_{column}"].to_numpy() - value) < 0.05 * sd)
        # every true class has the one accuracy
        for c in fit["true_class"].values:
            np.testing.assert_array_equal(table[f"accuracy_{c}_{column}"],
                                          table[f"accuracy_{column}"])


def test_continuous_em_precision_interval_is_its_gamma(em_fits):
    fit = em_fits["continuous anger"]
    table = report.annotator_summary(fit)
    shape, rate = fit["precision_alpha"].values, fit["precision_beta"].values
    draws = np.random.default_rng(7).gamma(shape, 1 / rate, size=(40_000, shape.size))
    sd = draws.std(0)
    for column, value in (("mean", draws.mean(0)), ("sd", sd),
                          ("lower", np.quantile(draws, 0.05, 0)),
                          ("upper", np.quantile(draws, 0.95, 0))):
        assert np.all(np.abs(table[f"precision_{column}"].to_numpy() - value) < 0.05 * sd)


def test_map_fit_states_no_interval(plain_model):
    """A MAP is a point: its table has NaN spreads rather than invented ones."""
    table = report.annotator_summary(cm.fit_map(plain_model))
    assert table["sensitivity_mean"].notna().all()
    assert table[["sensitivity_sd", "sensitivity_lower", "sensitivity_upper"]].isna().all().all()


def test_continuous_em_sd_interval_is_its_gamma_mapped_by_one_over_sqrt(em_fits):
    """SD = 1 / sqrt(precision) is monotone, so its interval is the precision's
    mapped and reversed, and its mean (of the transformed Gamma) lies inside."""
    fit = em_fits["continuous anger"]
    table = report.annotator_summary(fit)
    np.testing.assert_allclose(table["sd_lower"], 1 / np.sqrt(table["precision_upper"]),
                               rtol=1e-12)
    np.testing.assert_allclose(table["sd_upper"], 1 / np.sqrt(table["precision_lower"]),
                               rtol=1e-12)
    assert np.all((table["sd_lower"] <= table["sd_mean"])
                  & (table["sd_mean"] <= table["sd_upper"]))
    shape, rate = fit["precision_alpha"].values, fit["precision_beta"].values
    draws = 1 / np.sqrt(np.random.default_rng(8).gamma(shape, 1 / rate,
                                                        size=(40_000, shape.size)))
    sd = draws.std(0)
    for column, value in (("mean", draws.mean(0)), ("sd", sd)):
        assert np.all(np.abs(table[f"sd_{column}"].to_numpy() - value) < 0.05 * sd), column


def test_the_report_does_not_import_scipy_stats():
    """The report's tables and figures take their Beta and Gamma quantiles from
    scipy.special: importing it (as every command line does) leaves scipy.stats,
    half a second of import, unloaded."""
    import subprocess
    import sys

    code = ("import sys, crowd_models.report, crowd_models.cli; "
            "print(sorted(m for m in sys.modules if m.startswith('scipy.stats')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]", out.stdout
