"""The report's table builders that the CLI prints, called from Python."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from crowd_models import report
from crowd_models.models import continuous, two_coin

from ..conftest import RADIOLOGISTS


@pytest.fixture(scope="module")
def ratings():
    sim = continuous.simulate([1.0, 2.0, 4.0, 8.0], n_items=80, rng=np.random.default_rng(21))
    return sim, continuous.em(sim, bias=True)


def test_conditional_intervals_are_the_em_gamma_and_normal(ratings):
    sim, em_fit = ratings
    point = report.annotator_summary(em_fit).assign(precision_lower=np.nan)
    table = report.conditional_intervals(point, em_fit, ci_prob=0.8)
    a, b = em_fit["precision_alpha"].values, em_fit["precision_beta"].values
    np.testing.assert_allclose(table["precision_lower"], stats.gamma.ppf(0.1, a, scale=1 / b))
    np.testing.assert_allclose(table["sd_upper"],
                               1 / np.sqrt(stats.gamma.ppf(0.1, a, scale=1 / b)))
    z = stats.norm.ppf(0.9)
    np.testing.assert_allclose(table["bias_upper"] - table["bias_mean"],
                               z * em_fit["bias_conditional_sd"].values)
    with pytest.raises(ValueError, match="em_fit has no 'precision_alpha'"):
        report.conditional_intervals(point, two_coin.em(two_coin.simulate(
            **RADIOLOGISTS, n_items=50, rng=np.random.default_rng(1))))


def test_coefficient_table(sim_features):
    fit = two_coin.em(sim_features)
    table = report.coefficient_table(fit)
    np.testing.assert_allclose(table["coef_mean"], fit["coef"].values.ravel())
    assert list(table.index) == list(sim_features.feature_names)
    assert "coef_lower" not in table  # one draw: no interval
    assert report.coefficient_table(two_coin.em(sim_features.with_features(None))) is None
    with pytest.raises(ValueError, match="ci_prob must be strictly between 0 and 1"):
        report.coefficient_table(fit, ci_prob=1.5)


def test_gold_columns_and_confusion_against_a_direct_count(sim_plain):
    fit = two_coin.em(sim_plain)
    table = report.with_gold_columns(report.annotator_summary(fit), sim_plain)
    frame = sim_plain.to_frame().assign(gold=sim_plain.gold[sim_plain.item_idx])
    positives = frame[frame["gold"] == 1]
    measured = positives.groupby("annotator")["label"].mean()
    np.testing.assert_allclose(table["gold_sensitivity"], measured.reindex(table.index))
    assert (table["n_gold_labels"] == frame.groupby("annotator").size().reindex(
        table.index)).all()
    items = report.item_table(fit, sim_plain)
    confusion = report.gold_confusion(items, sim_plain)
    estimated = items["estimated_label"].reindex(sim_plain.items).to_numpy()
    expected = pd.crosstab(sim_plain.gold, estimated).to_numpy()
    np.testing.assert_array_equal(confusion.to_numpy(), expected)
    no_gold = sim_plain.select(np.arange(sim_plain.n_annotations))
    no_gold = type(no_gold)(**{**no_gold.__dict__, "gold": None})
    with pytest.raises(ValueError, match="with gold labels"):
        report.with_gold_columns(table, no_gold)
    with pytest.raises(ValueError, match="categorical Annotations with gold labels"):
        report.gold_confusion(items, no_gold)


def test_with_intervals_joins_each_measure_and_keeps_the_rest():
    from crowd_models import report

    table = pd.DataFrame({"a_mean": [0.5, 0.25], "a_sd": [0.1, 0.2], "a_lower": [0.4, np.nan],
                          "a_upper": [0.61, np.nan], "n_labels": [3, 4],
                          "b_mean": [1.0, np.nan], "b_lower": [0.5, 0.1],
                          "b_upper": [1.5, 0.2], "c_mean": [7.0, 8.0]},
                         index=pd.Index(["u", "v"], name="annotator"))
    out = report.with_intervals(table, digits=2)
    assert list(out.columns) == ["a", "n_labels", "b", "c_mean"]  # c has no interval
    assert out.loc["u", "a"] == "0.50 [0.40, 0.61]"
    assert out.loc["v", "a"] == "0.25"  # no interval: the mean alone
    assert out.loc["v", "b"] == ""  # no mean
    assert out.index.equals(table.index) and out["n_labels"].tolist() == [3, 4]
    with pytest.raises(ValueError, match="no <measure>_mean/_lower/_upper"):
        report.with_intervals(table[["n_labels"]])
    with pytest.raises(ValueError, match="digits must be"):
        report.with_intervals(table, digits=-1)
    with pytest.raises(TypeError, match="expects a DataFrame"):
        report.with_intervals(table.to_dict())
