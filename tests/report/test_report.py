"""Tests of crowd_models.report against values computed independently by hand.

Fits are built by hand as xarray objects with known draws, so that every
number in a table or a plot can be checked against numpy/scipy directly.
"""

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from matplotlib.collections import LineCollection
from scipy import stats
from scipy.special import logit

from crowd_models import report
from crowd_models.data import Annotations

from ..conftest import beta_sum_quantiles

matplotlib.use("Agg")

ANNOTATORS = ["ann_b", "ann_a", "ann_c"]  # deliberately not sorted


@pytest.fixture
def rng():
    """A seeded generator.

    Returns
    -------
    numpy.random.Generator
    """
    return np.random.default_rng(20090614)


@pytest.fixture(autouse=True)
def _close_figures():
    """Close every figure a test opened."""
    yield
    plt.close("all")


# ------------------------------------------------------------ fake fits
def draws_fit(rng, n_chains=2, n_draws=60, with_precision=True):
    """A NUTS-like posterior Dataset with known draws.

    Parameters
    ----------
    rng : numpy.random.Generator
    n_chains, n_draws : int
    with_precision : bool
        Add a generic per-annotator ``precision`` variable.

    Returns
    -------
    ds : xarray.Dataset
        The posterior.
    raw : dict
        The numpy draws by name, each (chain, draw, annotator).
    """
    J = len(ANNOTATORS)
    shape = (n_chains, n_draws, J)
    raw = {
        "sensitivity": rng.beta([8, 5, 3], [2, 3, 4], size=shape),
        "specificity": rng.beta([9, 4, 2], [1, 3, 3], size=shape),
    }
    if with_precision:
        raw["precision"] = rng.gamma(3.0, [1.0, 2.0, 0.5], size=shape)
    data = {k: (("chain", "draw", "annotator"), v) for k, v in raw.items()}
    data["prevalence"] = (("chain", "draw"), rng.random((n_chains, n_draws)))
    data["item_class_prob"] = (("chain", "draw", "item", "true_class"),
                               rng.dirichlet([1, 1], size=(n_chains, n_draws, 4)))
    ds = xr.Dataset(data, coords={"chain": np.arange(n_chains), "draw": np.arange(n_draws),
                                  "annotator": ANNOTATORS, "item": list("wxyz"),
                                  "true_class": [0, 1]})
    return ds, raw


def as_tree(posterior, n_labels=None):
    """Wrap a posterior Dataset in a DataTree like fit_map/sample return.

    Parameters
    ----------
    posterior : xarray.Dataset
    n_labels : sequence of int, optional
        Stored in ``constant_data`` by annotator, in ANNOTATORS order.

    Returns
    -------
    xarray.DataTree
    """
    groups = {"posterior": posterior}
    if n_labels is not None:
        groups["constant_data"] = xr.Dataset(
            {"n_labels": ("annotator", np.asarray(n_labels))},
            coords={"annotator": ANNOTATORS})
    return xr.DataTree.from_dict(groups)


def point_fit(sens, spec, beta=None, n_labels=None):
    """An EM-like one-draw Dataset.

    Parameters
    ----------
    sens, spec : sequence of float
        Point estimates by annotator (ANNOTATORS order).
    beta : dict, optional
        ``sensitivity_alpha`` etc. (annotator,), as EM stores them.
    n_labels : sequence of int, optional

    Returns
    -------
    xarray.Dataset
    """
    data = {
        "sensitivity": (("chain", "draw", "annotator"), np.asarray(sens)[None, None]),
        "specificity": (("chain", "draw", "annotator"), np.asarray(spec)[None, None]),
    }
    for name, value in (beta or {}).items():
        data[name] = ("annotator", np.asarray(value, dtype=float))
    if n_labels is not None:
        data["n_labels"] = ("annotator", np.asarray(n_labels))
    return xr.Dataset(data, coords={"chain": [0], "draw": [0], "annotator": ANNOTATORS})


BETA = {
    "sensitivity_alpha": [30.0, 12.5, 4.0],
    "sensitivity_beta": [3.0, 6.5, 5.0],
    "specificity_alpha": [40.0, 9.0, 2.5],
    "specificity_beta": [2.0, 4.0, 3.5],
}


def beta_modes():
    """Modes of the BETA approximations: the EM point estimates they go with.

    Returns
    -------
    sens, spec : numpy.ndarray
    """
    a, b = np.array(BETA["sensitivity_alpha"]), np.array(BETA["sensitivity_beta"])
    c, d = np.array(BETA["specificity_alpha"]), np.array(BETA["specificity_beta"])
    return (a - 1) / (a + b - 2), (c - 1) / (c + d - 2)


# ------------------------------------------------------- annotator_summary
def expected_stats(draws, ci_prob):
    """Pooled mean, sd (ddof=1) and equal-tailed quantiles of (chain, draw, J) draws.

    Parameters
    ----------
    draws : numpy.ndarray
    ci_prob : float

    Returns
    -------
    dict of numpy.ndarray
    """
    flat = draws.reshape(-1, draws.shape[-1])
    return {
        "mean": flat.mean(0),
        "sd": flat.std(0, ddof=1),
        "lower": np.quantile(flat, (1 - ci_prob) / 2, axis=0),
        "upper": np.quantile(flat, (1 + ci_prob) / 2, axis=0),
    }


@pytest.mark.parametrize("ci_prob", [0.9, 0.5])
def test_summary_of_draws_matches_numpy(rng, ci_prob):
    ds, raw = draws_fit(rng)
    table = report.annotator_summary(as_tree(ds, n_labels=[10, 20, 30]), ci_prob=ci_prob)
    assert list(table.index) == ANNOTATORS
    assert table.index.name == "annotator"
    expected_columns = [f"{m}_{s}" for m in ("sensitivity", "specificity", "weight", "precision")
                        for s in ("mean", "sd", "lower", "upper")] + ["n_labels"]
    assert list(table.columns) == expected_columns
    raw["weight"] = logit(raw["sensitivity"]) + logit(raw["specificity"])
    for measure, draws in raw.items():
        for stat, value in expected_stats(draws, ci_prob).items():
            np.testing.assert_allclose(table[f"{measure}_{stat}"].to_numpy(), value,
                                       rtol=1e-12, err_msg=f"{measure}_{stat}")
    assert table["n_labels"].tolist() == [10, 20, 30]
    assert table["n_labels"].dtype == np.int64


def test_summary_same_for_dataset_and_tree(rng):
    ds, _ = draws_fit(rng)
    from_dataset = report.annotator_summary(ds)
    from_tree = report.annotator_summary(as_tree(ds))
    pd.testing.assert_frame_equal(from_dataset, from_tree)
    assert from_dataset["n_labels"].isna().all()  # not recorded by either


def test_summary_weight_of_transposed_draws(rng):
    ds, raw = draws_fit(rng, with_precision=False)
    table = report.annotator_summary(ds.transpose("annotator", "draw", "chain", ...))
    weight = logit(raw["sensitivity"]) + logit(raw["specificity"])
    np.testing.assert_allclose(table["weight_mean"], weight.reshape(-1, 3).mean(0))
    assert "precision_mean" not in table


def test_summary_generic_measure_only(rng):
    ds, raw = draws_fit(rng)
    table = report.annotator_summary(ds[["precision", "prevalence"]])
    assert list(table.columns) == ["precision_mean", "precision_sd", "precision_lower",
                                   "precision_upper", "n_labels"]
    np.testing.assert_allclose(table["precision_mean"], raw["precision"].reshape(-1, 3).mean(0))


def test_summary_rank_by_sorts_descending_and_default_keeps_order(rng):
    ds, raw = draws_fit(rng)
    weight = (logit(raw["sensitivity"]) + logit(raw["specificity"])).reshape(-1, 3).mean(0)
    table = report.annotator_summary(ds, rank_by="weight_mean")
    assert list(table.index) == [ANNOTATORS[i] for i in np.argsort(-weight)]
    assert table["weight_mean"].is_monotonic_decreasing
    assert list(report.annotator_summary(ds).index) == ANNOTATORS


def test_summary_rank_by_unknown_column(rng):
    ds, _ = draws_fit(rng)
    with pytest.raises(ValueError, match=r"rank_by='quality' is not a column.*weight_mean"):
        report.annotator_summary(ds, rank_by="quality")


@pytest.mark.parametrize("bad", [0, 1, 1.5, -0.1, float("nan"), "0.9", True, None])
def test_summary_rejects_bad_ci_prob(rng, bad):
    ds, _ = draws_fit(rng)
    with pytest.raises(ValueError, match="ci_prob must be"):
        report.annotator_summary(ds, ci_prob=bad)


def test_summary_without_annotator_measures(rng):
    ds, _ = draws_fit(rng)
    with pytest.raises(ValueError, match="no per-annotator variable.*item_class_prob"):
        report.annotator_summary(ds[["prevalence", "item_class_prob"]])


def test_summary_single_draw_without_beta_is_point_and_nan():
    sens, spec = [0.9, 0.7, 0.6], [0.95, 0.8, 0.4]
    fit = as_tree(point_fit(sens, spec), n_labels=[5, 6, 7])
    table = report.annotator_summary(fit)
    np.testing.assert_allclose(table["sensitivity_mean"], sens)
    np.testing.assert_allclose(table["specificity_mean"], spec)
    np.testing.assert_allclose(table["weight_mean"], logit(sens) + logit(spec))
    for m in ("sensitivity", "specificity", "weight"):
        for s in ("sd", "lower", "upper"):
            assert table[f"{m}_{s}"].isna().all(), f"{m}_{s}"
    assert table["n_labels"].tolist() == [5, 6, 7]


@pytest.mark.parametrize("ci_prob", [0.9, 0.6])
def test_summary_em_beta_intervals_match_scipy(ci_prob):
    sens, spec = beta_modes()
    fit = point_fit(sens, spec, beta=BETA, n_labels=[40, 20, 9])
    table = report.annotator_summary(fit, ci_prob=ci_prob)
    tail = (1 - ci_prob) / 2
    for m in ("sensitivity", "specificity"):
        a, b = np.array(BETA[f"{m}_alpha"]), np.array(BETA[f"{m}_beta"])
        np.testing.assert_allclose(table[f"{m}_sd"], stats.beta.std(a, b), rtol=1e-12)
        np.testing.assert_allclose(table[f"{m}_lower"], stats.beta.ppf(tail, a, b), rtol=1e-12)
        np.testing.assert_allclose(table[f"{m}_upper"], stats.beta.ppf(1 - tail, a, b),
                                   rtol=1e-12)
        # the approximation's mean, the centre of its interval (not the EM's mode)
        np.testing.assert_allclose(table[f"{m}_mean"], a / (a + b), rtol=1e-12)
        assert np.all((table[f"{m}_lower"] <= table[f"{m}_mean"])
                      & (table[f"{m}_mean"] <= table[f"{m}_upper"]))
    assert table["n_labels"].tolist() == [40, 20, 9]


def test_summary_em_weight_is_monte_carlo_from_the_betas():
    sens, spec = beta_modes()
    fit = point_fit(sens, spec, beta=BETA)
    table = report.annotator_summary(fit)
    # an independent, much larger Monte Carlo of the same quantity
    big = np.random.default_rng(1)
    n = 400_000
    w = (logit(big.beta(BETA["sensitivity_alpha"], BETA["sensitivity_beta"], size=(n, 3)))
         + logit(big.beta(BETA["specificity_alpha"], BETA["specificity_beta"], size=(n, 3))))
    sd = w.std(0, ddof=1)
    np.testing.assert_allclose(table["weight_sd"], sd, rtol=0.05)
    for column, q in (("weight_lower", 0.05), ("weight_upper", 0.95)):
        error = np.abs(table[column].to_numpy() - np.quantile(w, q, axis=0))
        assert np.all(error < 0.1 * sd), column  # ~3 Monte Carlo standard errors
    # the mean of the draws (the mode's weight can be infinite on a perfect record)
    assert np.all(np.abs(table["weight_mean"].to_numpy() - w.mean(0)) < 0.1 * sd)
    # fixed seed: the table is reproducible
    pd.testing.assert_frame_equal(table, report.annotator_summary(fit))


def test_summary_many_draws_ignore_beta_approximation(rng):
    ds, raw = draws_fit(rng, with_precision=False)
    ds = ds.assign({k: ("annotator", v) for k, v in BETA.items()})
    table = report.annotator_summary(ds)
    np.testing.assert_allclose(table["sensitivity_sd"],
                               raw["sensitivity"].reshape(-1, 3).std(0, ddof=1))


# ---------------------------------------------------------- plot_annotators
def artist(ax, gid):
    """The one artist of an Axes with a given gid.

    Parameters
    ----------
    ax : matplotlib Axes
    gid : str

    Returns
    -------
    matplotlib artist
    """
    found = [a for a in ax.get_children() if a.get_gid() == gid]
    assert len(found) == 1, f"{len(found)} artists with gid {gid!r}"
    return found[0]


def test_plot_annotators_points_bars_truth_labels(rng):
    ds, raw = draws_fit(rng)
    fit = as_tree(ds, n_labels=[50, 80, 20])
    truth = xr.Dataset({"sensitivity": ("annotator", [0.8, 0.6, 0.4]),
                        "specificity": ("annotator", [0.9, 0.55, 0.45])},
                       coords={"annotator": ANNOTATORS})
    ax = report.plot_annotators(fit, truth=truth, label_top=2)
    est = artist(ax, "estimates").get_offsets()
    expected = np.column_stack([1 - raw["specificity"].reshape(-1, 3).mean(0),
                                raw["sensitivity"].reshape(-1, 3).mean(0)])
    np.testing.assert_allclose(est, expected)
    true_points = artist(ax, "truth").get_offsets()
    np.testing.assert_allclose(true_points, [[0.1, 0.8], [0.45, 0.6], [0.55, 0.4]])
    links = artist(ax, "truth_links").get_segments()
    assert len(links) == 3
    np.testing.assert_allclose([s[0] for s in links], expected)
    np.testing.assert_allclose([s[1] for s in links], true_points)
    bars = [c for c in ax.collections if isinstance(c, LineCollection)
            and c.get_gid() != "truth_links"]
    assert len(bars) == 2 and all(len(b.get_segments()) == 3 for b in bars)
    assert sorted(t.get_text() for t in ax.texts) == ["ann_a", "ann_b"]
    chance = artist(ax, "chance")
    np.testing.assert_allclose(chance.get_xydata(), [[0, 0], [1, 1]])
    assert ax.get_xlim() == (0, 1) and ax.get_ylim() == (0, 1)
    assert ax.get_xlabel() == "1 - specificity (false positive rate)"
    assert ax.get_ylabel() == "sensitivity (true positive rate)"


def test_plot_annotators_error_bars_are_the_intervals(rng):
    ds, _ = draws_fit(rng)
    table = report.annotator_summary(ds, ci_prob=0.8)
    ax = report.plot_annotators(ds, ci_prob=0.8)
    xbars, ybars = [c for c in ax.collections if isinstance(c, LineCollection)]
    x_ends = np.sort([[s[0][0], s[1][0]] for s in xbars.get_segments()], axis=1)
    y_ends = np.sort([[s[0][1], s[1][1]] for s in ybars.get_segments()], axis=1)
    np.testing.assert_allclose(x_ends, 1 - table[["specificity_upper",
                                                  "specificity_lower"]].to_numpy())
    np.testing.assert_allclose(y_ends, table[["sensitivity_lower",
                                              "sensitivity_upper"]].to_numpy())


def test_plot_annotators_single_draw_has_no_bars_and_uses_given_ax():
    _, ax = plt.subplots()
    fit = as_tree(point_fit([0.9, 0.7, 0.6], [0.95, 0.8, 0.4]))
    out = report.plot_annotators(fit, ax=ax)
    assert out is ax
    assert not [c for c in ax.collections if isinstance(c, LineCollection)]
    np.testing.assert_allclose(artist(ax, "estimates").get_offsets(),
                               [[0.05, 0.9], [0.2, 0.7], [0.6, 0.6]])
    assert not ax.texts


def test_plot_annotators_em_beta_fit_has_bars():
    sens, spec = beta_modes()
    ax = report.plot_annotators(point_fit(sens, spec, beta=BETA))
    assert len([c for c in ax.collections if isinstance(c, LineCollection)]) == 2


def test_plot_annotators_truth_dict_aligned_by_id():
    fit = point_fit([0.9, 0.7, 0.6], [0.95, 0.8, 0.4])
    truth = {"sensitivity": pd.Series({"ann_c": 0.3, "ann_a": 0.2, "ann_b": 0.1}),
             "specificity": np.array([0.5, 0.6, 0.7])}  # array: fit's annotator order
    ax = report.plot_annotators(fit, truth=truth)
    np.testing.assert_allclose(artist(ax, "truth").get_offsets(),
                               [[0.5, 0.1], [0.4, 0.2], [0.3, 0.3]])


def test_plot_annotators_needs_sensitivity_and_specificity(rng):
    ds, _ = draws_fit(rng)
    with pytest.raises(ValueError, match=r"needs sensitivity and specificity.*\['specificity'\]"):
        report.plot_annotators(ds.drop_vars("specificity"))


def test_plot_annotators_truth_errors():
    fit = point_fit([0.9, 0.7, 0.6], [0.95, 0.8, 0.4])
    with pytest.raises(ValueError, match="truth has no 'specificity'"):
        report.plot_annotators(fit, truth={"sensitivity": [0.1, 0.2, 0.3]})
    partial = pd.Series({"ann_a": 0.2, "ann_b": 0.1})
    with pytest.raises(ValueError, match=r"no value for annotator\(s\) \['ann_c'\]"):
        report.plot_annotators(fit, truth={"sensitivity": partial, "specificity": partial})
    with pytest.raises(ValueError, match=r"one value per annotator \(3\), got shape \(2,\)"):
        report.plot_annotators(fit, truth={"sensitivity": [0.1, 0.2],
                                           "specificity": [0.1, 0.2, 0.3]})
    with pytest.raises(TypeError, match="truth must be an xarray Dataset or a dict"):
        report.plot_annotators(fit, truth=[0.1, 0.2, 0.3])


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_plot_annotators_label_top_must_be_count(bad):
    fit = point_fit([0.9, 0.7, 0.6], [0.95, 0.8, 0.4], n_labels=[1, 2, 3])
    with pytest.raises(ValueError, match="label_top must be a non-negative integer"):
        report.plot_annotators(fit, label_top=bad)


def test_plot_annotators_label_top_needs_n_labels():
    fit = point_fit([0.9, 0.7, 0.6], [0.95, 0.8, 0.4])
    with pytest.raises(ValueError, match="does not record"):
        report.plot_annotators(fit, label_top=1)


# ------------------------------------------------------------------- ROC
def mann_whitney(scores, gold):
    """P(positive scores above negative), ties 1/2, by enumerating all pairs.

    Parameters
    ----------
    scores, gold : numpy.ndarray

    Returns
    -------
    float
    """
    pos, neg = scores[gold == 1], scores[gold == 0]
    diff = pos[:, None] - neg[None, :]
    return float(((diff > 0) + 0.5 * (diff == 0)).mean())


def test_roc_auc_equals_pairwise_mann_whitney_with_ties(rng):
    for _ in range(20):
        n = int(rng.integers(5, 120))
        scores = rng.integers(0, 6, n).astype(float)  # many ties
        gold = rng.integers(0, 2, n)
        if gold.min() == gold.max():
            continue
        curve, auc = report.roc_curve(scores, gold)
        assert auc == pytest.approx(mann_whitney(scores, gold), abs=1e-12)
        assert len(curve) == len(np.unique(scores)) + 1


def test_roc_curve_hand_example_with_a_tie():
    curve, auc = report.roc_curve([0.3, 0.8, 0.9, 0.8], [0, 0, 1, 1])
    np.testing.assert_allclose(curve["fpr"], [0, 0, 0.5, 1])
    np.testing.assert_allclose(curve["tpr"], [0, 0.5, 1, 1])
    np.testing.assert_allclose(curve["threshold"], [np.inf, 0.9, 0.8, 0.3])
    assert auc == pytest.approx(0.875)
    assert list(curve.columns) == ["fpr", "tpr", "threshold"]


def test_roc_perfect_reversed_and_constant_scores(rng):
    gold = rng.permutation(np.repeat([0, 1], 25))
    scores = gold + rng.random(50) * 0.5
    assert report.roc_curve(scores, gold)[1] == 1.0
    assert report.roc_curve(-scores, gold)[1] == 0.0
    curve, auc = report.roc_curve(np.ones(50), gold.astype(bool))
    assert auc == 0.5
    np.testing.assert_allclose(curve[["fpr", "tpr"]], [[0, 0], [1, 1]])


def test_roc_matches_sklearn(rng):
    metrics = pytest.importorskip("sklearn.metrics")
    scores = np.round(rng.normal(size=300), 1)
    gold = (rng.random(300) < 0.3).astype(int)
    curve, auc = report.roc_curve(scores, gold)
    fpr, tpr, thr = metrics.roc_curve(gold, scores, drop_intermediate=False)
    np.testing.assert_allclose(curve["fpr"], fpr)
    np.testing.assert_allclose(curve["tpr"], tpr)
    np.testing.assert_allclose(curve["threshold"].iloc[1:], thr[1:])
    assert auc == pytest.approx(metrics.roc_auc_score(gold, scores), abs=1e-12)


@pytest.mark.parametrize(
    ("scores", "gold", "match"),
    [
        ([0.1, 0.2, 0.3], [0, 1], "same length, got 3 scores and 2 gold"),
        ([0.1, 0.2, 0.3], [0, 1, 2], r"binary.*\[2\]"),
        ([0.1, 0.2], ["no", "yes"], "binary"),
        ([0.1, 0.2, 0.3], [1, 1, 1], "both classes.*3 positive"),
        ([0.1, np.nan, 0.3], [0, 1, 0], "1 NaN"),
        ([[0.1, 0.2]], [0, 1], "scores must be 1-D"),
        (["a", "b"], [0, 1], "scores must be numbers"),
        ([0.1, 0.2], [0, np.nan], "binary"),
    ],
)
def test_roc_curve_errors(scores, gold, match):
    with pytest.raises(ValueError, match=match):
        report.roc_curve(scores, gold)


def test_plot_roc_one_line_per_curve_with_auc(rng):
    gold = rng.integers(0, 2, 80)
    noisy = gold + rng.normal(size=80)
    curves = {"perfect": (gold + 0.1 * rng.random(80), gold), "noisy": (noisy, gold)}
    ax = report.plot_roc(curves)
    lines = [ln for ln in ax.get_lines() if ln.get_gid() != "chance"]
    auc = report.roc_curve(noisy, gold)[1]
    assert [ln.get_label() for ln in lines] == ["perfect (AUC = 1.000)",
                                               f"noisy (AUC = {auc:.3f})"]
    np.testing.assert_allclose(lines[1].get_xdata(), report.roc_curve(noisy, gold)[0]["fpr"])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [ln.get_label()
                                                                  for ln in lines]
    _, given = plt.subplots()
    assert report.plot_roc(curves, ax=given) is given


def test_plot_roc_errors():
    with pytest.raises(ValueError, match="curves is empty"):
        report.plot_roc({})
    with pytest.raises(ValueError, match="curve 'm' must be a pair"):
        report.plot_roc({"m": ([0.1, 0.2], [0, 1], "extra")})
    with pytest.raises(ValueError, match="curve 'bad': gold must hold both classes"):
        report.plot_roc({"bad": ([0.1, 0.2], [1, 1])})
    with pytest.raises(TypeError, match="curves must be a dict"):
        report.plot_roc([([0.1, 0.2], [0, 1])])


# --------------------------------------------------------- soft_confusion
MU = np.array([0.9, 0.8, 0.2, 0.1, 0.5])
PRED = np.array([1, 0, 0, 1, 1])
# by hand: sens = (0.9 + 0.1 + 0.5) / 2.5, spec = (0.2 + 0.8) / 2.5
HAND = {"sensitivity": 0.6, "specificity": 0.4}


def test_soft_confusion_hand_data_every_input_form(rng):
    items = list("vwxyz")
    probs = xr.DataArray(np.column_stack([1 - MU, MU]), dims=("item", "true_class"),
                         coords={"item": items, "true_class": ["neg", "pos"]})
    # draws whose average is MU exactly
    noise = rng.normal(scale=0.05, size=(2, 3, 5))
    noise -= noise.mean(axis=(0, 1))
    drawn = np.clip(MU + noise, 0, 1)
    drawn += MU - drawn.mean(axis=(0, 1))
    draws = xr.DataArray(np.stack([1 - drawn, drawn], axis=-1),
                         dims=("chain", "draw", "item", "true_class"),
                         coords={"item": items})
    fit = xr.Dataset({"item_class_prob": draws})
    for form in (MU, MU.tolist(), np.column_stack([1 - MU, MU]), probs, draws, fit):
        got = report.soft_confusion(PRED, form)
        assert got == pytest.approx(HAND, abs=1e-12)
    assert report.soft_confusion(PRED.astype(bool), MU) == pytest.approx(HAND)
    shuffled = pd.Series(PRED, index=items).iloc[::-1]
    assert report.soft_confusion(shuffled, probs) == pytest.approx(HAND)


def test_soft_confusion_hard_labels_are_ordinary_rates():
    truth = np.array([1, 1, 1, 0, 0, 0, 0])
    pred = np.array([1, 1, 0, 0, 0, 0, 1])
    assert report.soft_confusion(pred, truth.astype(float)) == pytest.approx(
        {"sensitivity": 2 / 3, "specificity": 3 / 4})


def test_soft_confusion_errors():
    with pytest.raises(ValueError, match="predicted must be binary"):
        report.soft_confusion([0, 1, 2, 1, 0], MU)
    with pytest.raises(ValueError, match="predicted has 4 entries but item_class_prob has 5"):
        report.soft_confusion([0, 1, 1, 0], MU)
    with pytest.raises(ValueError, match=r"probabilities in \[0, 1\]"):
        report.soft_confusion(PRED, MU * 2)
    with pytest.raises(ValueError, match="every item to one class"):
        report.soft_confusion(PRED, np.zeros(5))
    with pytest.raises(ValueError, match=r"mu \(item,\) or \(item, 2\)"):
        report.soft_confusion(PRED, np.ones((5, 3)) / 3)
    three = xr.DataArray(np.ones((5, 3)) / 3, dims=("item", "true_class"))
    with pytest.raises(ValueError, match="needs two true classes"):
        report.soft_confusion(PRED, three)
    probs = xr.DataArray(np.column_stack([1 - MU, MU]), dims=("item", "true_class"),
                         coords={"item": list("vwxyz")})
    with pytest.raises(ValueError, match=r"no value for item\(s\) \['z'\]"):
        report.soft_confusion(pd.Series(PRED[:4], index=list("vwxy")), probs)
    with pytest.raises(ValueError, match=r"dims \(item, true_class\)"):
        report.soft_confusion(PRED, xr.DataArray(MU, dims="item"))


# ---------------------------------------------------------------- accuracy
def gold_annotations(gold):
    """Four items labelled by two annotators, with the given gold.

    Parameters
    ----------
    gold : pandas.Series or None

    Returns
    -------
    Annotations
    """
    frame = pd.DataFrame({"item": list("ppqqrrss"), "annotator": ["u", "v"] * 4,
                          "label": ["cat", "dog", "dog", "dog", "cat", "cat", "dog", "cat"]})
    return Annotations.from_frame(frame, gold=gold)


PROBS = np.array([[0.8, 0.2], [0.3, 0.7], [0.4, 0.6], [0.55, 0.45]])  # argmax: cat dog dog cat


def test_accuracy_ignores_unknown_gold():
    ann = gold_annotations(pd.Series({"p": "cat", "q": "cat", "r": "dog", "s": np.nan}))
    probs = xr.DataArray(PROBS, dims=("item", "true_class"),
                         coords={"item": list("pqrs"), "true_class": ["cat", "dog"]})
    # p right, q wrong, r right; s unknown
    assert report.accuracy(probs, ann) == pytest.approx(2 / 3)
    assert report.accuracy(xr.DataArray(PROBS, dims=("item", "true_class")), ann) == (
        pytest.approx(2 / 3))


def test_accuracy_averages_draws_and_aligns_ids():
    ann = gold_annotations(pd.Series({"p": "cat", "q": "dog", "r": "dog", "s": "dog"}))
    # draw 0 says dog for p with 0.6, draw 1 says cat with 0.9: the mean says cat
    p_draws = np.array([[[0.4, 0.6]], [[0.9, 0.1]]])
    stack = np.broadcast_to(PROBS, (2, 1, 4, 2)).copy()
    stack[:, 0, 0, :] = p_draws[:, 0]
    da = xr.DataArray(stack, dims=("chain", "draw", "item", "true_class"),
                      coords={"item": list("pqrs"), "true_class": ["cat", "dog"]})
    assert report.accuracy(da, ann) == pytest.approx(3 / 4)
    # items and classes listed in another order: matched by id and name
    shuffled = da.isel(item=[3, 1, 0, 2], true_class=[1, 0])
    assert report.accuracy(shuffled, ann) == pytest.approx(3 / 4)
    fit = as_tree(xr.Dataset({"item_class_prob": shuffled}))
    assert report.accuracy(fit, ann) == pytest.approx(3 / 4)
    assert report.accuracy(xr.Dataset({"item_class_prob": da}), ann) == pytest.approx(3 / 4)


def test_accuracy_errors():
    probs = xr.DataArray(PROBS, dims=("item", "true_class"),
                         coords={"item": list("pqrs"), "true_class": ["cat", "dog"]})
    with pytest.raises(ValueError, match="no gold labels"):
        report.accuracy(probs, gold_annotations(None))
    with pytest.raises(ValueError, match="no gold labels"):
        report.accuracy(probs, gold_annotations(pd.Series({"p": np.nan})))
    ann = gold_annotations(pd.Series({"p": "cat"}))
    with pytest.raises(ValueError, match=r"no item_class_prob for item\(s\) \['s'\]"):
        report.accuracy(probs.isel(item=[0, 1, 2]), ann)
    with pytest.raises(ValueError, match=r"classes \['fox', 'dog'\] are not"):
        report.accuracy(probs.assign_coords(true_class=["fox", "dog"]), ann)
    with pytest.raises(ValueError, match="has 3 items, the annotations 4"):
        report.accuracy(xr.DataArray(PROBS[:3], dims=("item", "true_class")), ann)
    with pytest.raises(ValueError, match="has 3 classes, the annotations 2"):
        report.accuracy(xr.DataArray(np.ones((4, 3)) / 3, dims=("item", "true_class")), ann)
    with pytest.raises(ValueError, match="this fit has no item_class_prob"):
        report.accuracy(point_fit([0.9, 0.7, 0.6], [0.95, 0.8, 0.4]), ann)
    with pytest.raises(TypeError, match="expected a fit"):
        report.accuracy(PROBS, ann)
    with pytest.raises(TypeError, match="annotations must be Annotations"):
        report.accuracy(probs, None)
    continuous = Annotations.from_frame(
        pd.DataFrame({"item": [1, 2], "annotator": ["u", "u"], "label": [0.5, 1.5]}),
        continuous=True, gold=pd.Series({1: 0.4}))
    with pytest.raises(ValueError, match="needs categorical annotations"):
        report.accuracy(probs, continuous)


# ------------------------------------------------------- confusion fits
CLASSES = ["cat", "dog", "fox"]
ROW_CONCENTRATION = np.array([[8.0, 1.0, 1.0], [2.0, 6.0, 2.0], [1.0, 1.0, 4.0]])


def confusion_fit(rng, n_chains=2, n_draws=50, prevalence=True, n_labels=None):
    """A NUTS-like Dawid-Skene posterior with known confusion draws.

    The label classes are stored in another order than the true classes, so
    that matching them by name is tested too.

    Parameters
    ----------
    rng : numpy.random.Generator
    n_chains, n_draws : int
    prevalence : bool
        Store ``prevalence`` draws (else only ``item_class_prob``, as a fit
        with features).
    n_labels : sequence of int, optional
        Stored as ``n_labels`` (annotator), in ANNOTATORS order.

    Returns
    -------
    ds : xarray.Dataset
    raw : dict
        ``confusion`` (chain, draw, annotator, true, label) in CLASSES order for
        both class axes, ``prevalence`` (chain, draw, true) and
        ``item_class_prob`` (chain, draw, item, true).
    """
    sample = (n_chains, n_draws, len(ANNOTATORS))
    raw = {
        "confusion": np.stack([rng.dirichlet(row, size=sample) for row in ROW_CONCENTRATION],
                              axis=3),
        "prevalence": rng.dirichlet([3.0, 2.0, 1.0], size=(n_chains, n_draws)),
        "item_class_prob": rng.dirichlet([1.0, 1.0, 1.0], size=(n_chains, n_draws, 5)),
    }
    data = {
        "confusion": (("chain", "draw", "annotator", "true_class", "label_class"),
                      raw["confusion"]),
        "item_class_prob": (("chain", "draw", "item", "true_class"), raw["item_class_prob"]),
    }
    if prevalence:
        data["prevalence"] = (("chain", "draw", "true_class"), raw["prevalence"])
    if n_labels is not None:
        data["n_labels"] = ("annotator", np.asarray(n_labels))
    ds = xr.Dataset(data, coords={"chain": np.arange(n_chains), "draw": np.arange(n_draws),
                                  "annotator": ANNOTATORS, "item": list("vwxyz"),
                                  "true_class": CLASSES, "label_class": CLASSES})
    return ds.isel(label_class=[2, 0, 1]), raw


def diagonal(conf):
    """The (..., annotator, class) diagonal of (..., annotator, true, label) values.

    Parameters
    ----------
    conf : numpy.ndarray

    Returns
    -------
    numpy.ndarray
    """
    return np.diagonal(conf, axis1=-2, axis2=-1)


def stat_columns(measures):
    """The summary columns of some measures, in order.

    Parameters
    ----------
    measures : list of str

    Returns
    -------
    list of str
    """
    return [f"{m}_{s}" for m in measures for s in ("mean", "sd", "lower", "upper")]


@pytest.mark.parametrize("ci_prob", [0.9, 0.5])
def test_summary_confusion_per_class_accuracy_is_the_diagonal(rng, ci_prob):
    ds, raw = confusion_fit(rng, n_labels=[10, 20, 30])
    table = report.annotator_summary(ds, ci_prob=ci_prob)
    per_class = [f"accuracy_{c}" for c in CLASSES]
    assert list(table.columns) == stat_columns(["accuracy", *per_class]) + ["n_labels"]
    diag = diagonal(raw["confusion"])  # (chain, draw, annotator, class)
    for k, name in enumerate(per_class):
        for stat, value in expected_stats(diag[..., k], ci_prob).items():
            np.testing.assert_allclose(table[f"{name}_{stat}"].to_numpy(), value, rtol=1e-12,
                                       err_msg=f"{name}_{stat}")
    assert table["n_labels"].tolist() == [10, 20, 30]


def test_summary_confusion_overall_accuracy_weights_by_prevalence_per_draw(rng):
    ds, raw = confusion_fit(rng)
    table = report.annotator_summary(as_tree(ds))
    overall = np.sum(raw["prevalence"][:, :, None, :] * diagonal(raw["confusion"]), axis=-1)
    for stat, value in expected_stats(overall, 0.9).items():
        np.testing.assert_allclose(table[f"accuracy_{stat}"].to_numpy(), value, rtol=1e-12)


def test_summary_confusion_without_prevalence_uses_item_class_prob(rng):
    ds, raw = confusion_fit(rng, prevalence=False)
    table = report.annotator_summary(ds)
    shares = raw["item_class_prob"].mean(axis=2)  # (chain, draw, class), per draw
    overall = np.sum(shares[:, :, None, :] * diagonal(raw["confusion"]), axis=-1)
    for stat, value in expected_stats(overall, 0.9).items():
        np.testing.assert_allclose(table[f"accuracy_{stat}"].to_numpy(), value, rtol=1e-12)
    no_shares = report.annotator_summary(ds.drop_vars("item_class_prob"))
    assert list(no_shares.columns) == stat_columns([f"accuracy_{c}" for c in CLASSES]) + [
        "n_labels"]


def test_summary_confusion_one_coin_reuses_its_accuracy(rng):
    ds, raw = confusion_fit(rng)
    acc = rng.beta(6.0, 2.0, size=(2, 50, 3))
    eye = np.eye(3)
    conf = eye * acc[..., None, None] + (1 - eye) * ((1 - acc) / 2)[..., None, None]
    one_coin = ds.assign(
        accuracy=(("chain", "draw", "annotator"), acc),
        confusion=xr.DataArray(conf, dims=("chain", "draw", "annotator", "true_class",
                                           "label_class"),
                               coords={"true_class": CLASSES, "label_class": CLASSES}))
    table = report.annotator_summary(one_coin)
    assert list(table.columns) == stat_columns(
        ["accuracy", *[f"accuracy_{c}" for c in CLASSES]]) + ["n_labels"]
    for stat, value in expected_stats(acc, 0.9).items():
        np.testing.assert_allclose(table[f"accuracy_{stat}"].to_numpy(), value, rtol=1e-12)
        for c in CLASSES:
            np.testing.assert_allclose(table[f"accuracy_{c}_{stat}"].to_numpy(), value,
                                       rtol=1e-12)


def test_summary_two_coin_fit_has_no_accuracy_columns(rng):
    ds, _ = draws_fit(rng)
    assert not [c for c in report.annotator_summary(ds).columns if c.startswith("accuracy")]


def test_summary_confusion_classes_must_match(rng):
    ds, _ = confusion_fit(rng)
    renamed = ds.assign_coords(label_class=["cat", "dog", "emu"])
    with pytest.raises(ValueError, match=r"true class\(es\) \['fox'\] have no label class"):
        report.annotator_summary(renamed)


ALPHA = np.array([
    [[40.0, 3.0, 2.0], [4.0, 30.0, 6.0], [3.0, 2.0, 20.0]],
    [[12.0, 5.0, 4.0], [6.0, 9.0, 3.0], [2.0, 4.0, 7.0]],
    [[5.0, 2.0, 2.0], [2.0, 3.0, 2.0], [1.5, 1.5, 3.0]],
])
"""Dirichlet rows (annotator, true, label) of an EM confusion fit, ANNOTATORS order."""
PREVALENCE = np.array([0.5, 0.3, 0.2])


def em_confusion_fit(one_coin=False):
    """A one-draw EM-like Dawid-Skene Dataset whose point is the mode of ALPHA.

    Parameters
    ----------
    one_coin : bool
        Add a per-annotator ``accuracy`` (the one-coin variant).

    Returns
    -------
    xarray.Dataset
    """
    mode = (ALPHA - 1) / (ALPHA.sum(axis=2, keepdims=True) - 3)
    data = {
        "confusion": (("chain", "draw", "annotator", "true_class", "label_class"),
                      mode[None, None]),
        "prevalence": (("chain", "draw", "true_class"), PREVALENCE[None, None]),
        "n_labels": ("annotator", np.array([60, 25, 8])),
        "confusion_alpha": (("annotator", "true_class", "label_class"), ALPHA),
    }
    if one_coin:
        data["accuracy"] = (("chain", "draw", "annotator"), diagonal(mode)[None, None, :, 0])
    return xr.Dataset(data, coords={"chain": [0], "draw": [0], "annotator": ANNOTATORS,
                                    "true_class": CLASSES, "label_class": CLASSES})


@pytest.mark.parametrize("ci_prob", [0.9, 0.6])
def test_summary_em_confusion_alpha_gives_beta_intervals(ci_prob):
    table = report.annotator_summary(em_confusion_fit(), ci_prob=ci_prob)
    tail = (1 - ci_prob) / 2
    a = diagonal(ALPHA)
    b = ALPHA.sum(axis=2) - a
    for k, c in enumerate(CLASSES):
        np.testing.assert_allclose(table[f"accuracy_{c}_mean"], a[:, k] / (a + b)[:, k],
                                   rtol=1e-12)
        np.testing.assert_allclose(table[f"accuracy_{c}_sd"], stats.beta.std(a[:, k], b[:, k]),
                                   rtol=1e-12)
        np.testing.assert_allclose(table[f"accuracy_{c}_lower"],
                                   stats.beta.ppf(tail, a[:, k], b[:, k]), rtol=1e-12)
        np.testing.assert_allclose(table[f"accuracy_{c}_upper"],
                                   stats.beta.ppf(1 - tail, a[:, k], b[:, k]), rtol=1e-12)
    np.testing.assert_allclose(table["accuracy_mean"], (a / (a + b)) @ PREVALENCE, rtol=1e-12)
    assert table["n_labels"].tolist() == [60, 25, 8]


def test_summary_em_confusion_overall_accuracy_is_that_of_the_rows():
    fit = em_confusion_fit()
    table = report.annotator_summary(fit)
    # an independent, large Monte Carlo from the whole Dirichlet rows
    big = np.random.default_rng(7)
    n = 200_000
    overall = np.zeros((n, 3))
    for j in range(3):
        for k in range(3):
            overall[:, j] += PREVALENCE[k] * big.dirichlet(ALPHA[j, k], size=n)[:, k]
    sd = overall.std(0, ddof=1)
    # the sd is exact; these draws' sd is off by about 1 / sqrt(2 n) = 0.16%
    np.testing.assert_allclose(table["accuracy_sd"], sd, rtol=0.01)
    for column, q in (("accuracy_lower", 0.05), ("accuracy_upper", 0.95)):
        # the moment-matched Beta is within 0.01 sd of the exact ends here
        # (test_intervals), the draws' quantiles within about 0.005 sd (1 se)
        error = np.abs(table[column].to_numpy() - np.quantile(overall, q, axis=0))
        assert np.all(error < 0.03 * sd), column
    pd.testing.assert_frame_equal(table, report.annotator_summary(fit))  # deterministic


def test_summary_em_one_coin_ignores_confusion_alpha():
    table = report.annotator_summary(em_confusion_fit(one_coin=True))
    assert table.columns.is_unique
    assert table.filter(regex="_(sd|lower|upper)$").isna().all().all()


def test_summary_of_real_dawid_skene_em_recovers_the_diagonal():
    from crowd_models.models import dawid_skene as ds

    truth = np.array([
        [[0.90, 0.05, 0.05], [0.10, 0.80, 0.10], [0.20, 0.10, 0.70]],
        [[0.60, 0.20, 0.20], [0.30, 0.60, 0.10], [0.20, 0.20, 0.60]],
        [[0.85, 0.10, 0.05], [0.05, 0.90, 0.05], [0.10, 0.15, 0.75]],
        [[0.70, 0.15, 0.15], [0.15, 0.70, 0.15], [0.15, 0.15, 0.70]],
    ])
    # 1000 items: each cell's sd is then about 0.03 (with 300 the weak annotator misses by
    # up to 0.18 on some seeds)
    sim = ds.simulate(truth, n_items=1000, classes=["low", "mid", "high"], rng=1)
    table = report.annotator_summary(ds.em(sim))
    expected = diagonal(sim.truth["confusion"].sel(annotator=table.index.to_numpy()).values)
    for k, c in enumerate(["low", "mid", "high"]):
        np.testing.assert_allclose(table[f"accuracy_{c}_mean"], expected[:, k], atol=0.08)
        assert (table[f"accuracy_{c}_lower"] < table[f"accuracy_{c}_upper"]).all()
    assert table["n_labels"].tolist() == [1000] * 4
    one_coin = report.annotator_summary(ds.em(sim, variant="one_coin"))
    assert one_coin.columns.is_unique and "accuracy_mean" in one_coin


# ---------------------------------------------------------- plot_confusion
def cell_texts(ax):
    """The cell annotations of a confusion heatmap, as a (K, K) array of str.

    Parameters
    ----------
    ax : matplotlib Axes

    Returns
    -------
    numpy.ndarray of str
    """
    texts = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text()
             for t in ax.texts}
    K = round(len(texts) ** 0.5)
    return np.array([[texts[k, m] for m in range(K)] for k in range(K)])


def expected_texts(mean, lower=None, upper=None):
    """Cell annotations as plot_confusion formats them.

    Parameters
    ----------
    mean, lower, upper : numpy.ndarray, shape (K, K)

    Returns
    -------
    numpy.ndarray of str
    """
    if lower is None:
        return np.vectorize(lambda m: f"{m:.2f}")(mean)
    return np.vectorize(lambda m, lo, hi: f"{m:.2f}\n[{lo:.2f}, {hi:.2f}]")(mean, lower, upper)


def test_plot_confusion_image_is_the_mean_with_intervals(rng):
    ds, raw = confusion_fit(rng, n_labels=[10, 20, 30])
    ax = report.plot_confusion(as_tree(ds), "ann_a", ci_prob=0.8)
    draws = raw["confusion"][:, :, 1].reshape(-1, 3, 3)  # ann_a, classes in CLASSES order
    mean = draws.mean(0)
    assert len(ax.images) == 1
    np.testing.assert_allclose(ax.images[0].get_array(), mean, rtol=1e-12)
    assert ax.images[0].get_clim() == (0, 1)
    lower, upper = np.quantile(draws, [0.1, 0.9], axis=0)
    np.testing.assert_array_equal(cell_texts(ax), expected_texts(mean, lower, upper))
    assert ax.get_title() == "ann_a (20 labels)"
    assert [t.get_text() for t in ax.get_xticklabels()] == CLASSES
    assert [t.get_text() for t in ax.get_yticklabels()] == CLASSES
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("label class", "true class")


def test_plot_confusion_population_is_label_weighted_per_draw(rng):
    ds, raw = confusion_fit(rng)
    fit = as_tree(ds, n_labels=[10, 20, 30])
    _, given = plt.subplots()
    ax = report.plot_confusion(fit, ax=given)
    assert ax is given
    weighted = np.einsum("cdjkl,j->cdkl", raw["confusion"], np.array([10, 20, 30]) / 60)
    draws = weighted.reshape(-1, 3, 3)
    np.testing.assert_allclose(ax.images[0].get_array(), draws.mean(0), rtol=1e-12)
    lower, upper = np.quantile(draws, [0.05, 0.95], axis=0)
    np.testing.assert_array_equal(cell_texts(ax), expected_texts(draws.mean(0), lower, upper))
    assert ax.get_title() == "all annotators, weighted by labels (60 labels)"


def test_plot_confusion_population_of_hierarchical_fit_is_confusion_mean(rng):
    ds, _ = confusion_fit(rng)
    mean_draws = rng.dirichlet([5.0, 1.0, 1.0], size=(2, 50, 3))
    fit = ds.assign(confusion_mean=xr.DataArray(  # aligned to the fit's label order by name
        mean_draws, dims=("chain", "draw", "true_class", "label_class"),
        coords={"true_class": CLASSES, "label_class": CLASSES}))
    assert list(fit["label_class"].values) != CLASSES
    ax = report.plot_confusion(fit)  # no n_labels needed
    np.testing.assert_allclose(ax.images[0].get_array(), mean_draws.reshape(-1, 3, 3).mean(0))
    assert ax.get_title() == "population (confusion_mean)"


def test_plot_confusion_em_intervals_are_the_beta_marginals():
    ax = report.plot_confusion(em_confusion_fit(), "ann_c")
    rows = ALPHA[2]
    mean = rows / rows.sum(axis=1, keepdims=True)  # the marginals' mean, not the rows' mode
    np.testing.assert_allclose(ax.images[0].get_array(), mean, rtol=1e-12)
    rest = rows.sum(axis=1, keepdims=True) - rows
    lower, upper = stats.beta.ppf([[[0.05]], [[0.95]]], rows, rest)
    np.testing.assert_array_equal(cell_texts(ax), expected_texts(mean, lower, upper))
    assert np.all((lower <= mean) & (mean <= upper))
    assert ax.get_title() == "ann_c (8 labels)"
    population = report.plot_confusion(em_confusion_fit())
    assert all("[" in t for t in cell_texts(population).ravel())
    weights = np.array([60, 25, 8]) / 93
    shown = population.images[0].get_array()
    np.testing.assert_allclose(shown, np.einsum("jkl,j->kl", ALPHA / ALPHA.sum(
        axis=2, keepdims=True), weights), rtol=1e-12)


@pytest.mark.parametrize("ci_prob", [0.9, 0.95])
def test_plot_confusion_em_population_interval_is_the_exact_sums_within_tolerance(ci_prob):
    """Each population cell of an EM fit, sum_j (n_j / n) Beta marginal_jkl over
    annotators, is shown with the interval of the Beta with its exact mean and
    variance. Against the exact quantiles (grid enumeration, off by at most 3e-5),
    with three annotators of 60, 25 and 8 labels (few terms, unequal weights: the
    hard case for a moment match; thousands of annotators make the sum nearly
    Normal), the ends are off by at most 0.014 sd (9e-4); the tolerance 0.03 sd is
    below the standard error of the 4,000 Monte Carlo draws the plot used before
    (0.033 sd at a 90% end)."""
    from crowd_models.report.heatmaps import _confusion_cells

    mean, lower, upper, _, _ = _confusion_cells(em_confusion_fit(), None, ci_prob)
    weights = np.array([60, 25, 8]) / 93
    rest = ALPHA.sum(axis=2, keepdims=True) - ALPHA
    exact_mean = np.einsum("jkl,j->kl", ALPHA / (ALPHA + rest), weights)
    variance = np.einsum("jkl,j->kl", stats.beta.var(ALPHA, rest), weights ** 2)
    np.testing.assert_allclose(mean, exact_mean, rtol=1e-12)
    for k in range(3):
        for m in range(3):
            exact = beta_sum_quantiles(ALPHA[:, k, m], rest[:, k, m], weights,
                                       [(1 - ci_prob) / 2, (1 + ci_prob) / 2], step=1e-5)
            error = np.abs(np.array([lower[k, m], upper[k, m]]) - exact)
            assert np.all(error < 0.03 * np.sqrt(variance[k, m])), (k, m, error)


def test_plot_confusion_single_draw_without_alpha_has_no_intervals():
    fit = em_confusion_fit().drop_vars(["confusion_alpha", "n_labels"])
    ax = report.plot_confusion(fit, "ann_b")
    mean = np.asarray(fit["confusion"].values[0, 0, 0])
    np.testing.assert_array_equal(cell_texts(ax), expected_texts(mean))
    assert ax.get_title() == "ann_b (labels not recorded)"


def test_plot_confusion_errors(rng):
    ds, _ = confusion_fit(rng)
    with pytest.raises(ValueError, match=r"annotator 'ann_z' is not in this fit; valid ids "
                                         r"include \['ann_b', 'ann_a', 'ann_c'\]"):
        report.plot_confusion(ds, "ann_z")
    with pytest.raises(ValueError, match="does not record \\(no n_labels\\); pass an annotator"):
        report.plot_confusion(ds)
    two_coin, _ = draws_fit(rng)
    with pytest.raises(ValueError, match="needs a confusion .*'sensitivity'"):
        report.plot_confusion(two_coin, "ann_a")
    with pytest.raises(ValueError, match="ci_prob must be"):
        report.plot_confusion(ds, "ann_a", ci_prob=1.5)


def test_plot_confusions_one_panel_each_on_one_scale(rng):
    ds, raw = confusion_fit(rng, n_labels=[10, 20, 30])
    fig = report.plot_confusions(ds, ["ann_c", None, "ann_b", "ann_a"], ncols=3)
    panels = [ax for ax in fig.axes if ax.images and ax.get_visible()]
    assert [ax.get_title() for ax in panels] == [
        "ann_c (30 labels)", "all annotators, weighted by labels (60 labels)",
        "ann_b (10 labels)", "ann_a (20 labels)"]
    assert all(ax.images[0].get_clim() == (0, 1) for ax in panels)
    np.testing.assert_allclose(panels[0].images[0].get_array(),
                               raw["confusion"][:, :, 2].mean((0, 1)), rtol=1e-12)
    assert sum(not ax.get_visible() for ax in fig.axes) == 2  # a 2 x 3 grid, 4 panels
    assert len(report.plot_confusions(ds, "ann_a").axes) == 2  # one panel and its colour bar


def test_plot_confusions_errors(rng):
    ds, _ = confusion_fit(rng)
    with pytest.raises(ValueError, match="annotators is empty"):
        report.plot_confusions(ds, [])
    with pytest.raises(ValueError, match="ncols must be a positive integer"):
        report.plot_confusions(ds, ["ann_a"], ncols=0)
    n_open = len(plt.get_fignums())
    with pytest.raises(ValueError, match="'nobody' is not in this fit"):
        report.plot_confusions(ds, ["ann_a", "nobody"])
    assert len(plt.get_fignums()) == n_open  # checked before drawing


def test_typical_rate_moments_and_quantiles_against_integration():
    """The IRT EM's rate approximation, expit(softplus(X)) with X Normal: its mean and
    sd match numerical integration, its quantiles those of its own draws."""
    from scipy import integrate
    from scipy.special import expit

    from crowd_models.report._approximations import TypicalRate

    loc, scale = np.array([-2.0, 0.3, 1.5]), np.array([0.4, 1.0, 2.5])
    dist = TypicalRate(loc, scale)
    rate = lambda x: expit(np.logaddexp(0, x))  # noqa: E731
    for j in range(3):
        density = stats.norm(loc[j], scale[j]).pdf
        moments = [integrate.quad(lambda x, p=p, pdf=density: rate(x) ** p * pdf(x),
                                  -np.inf, np.inf, epsabs=1e-13)[0] for p in (1, 2)]
        np.testing.assert_allclose(dist.mean()[j], moments[0], rtol=1e-6)
        np.testing.assert_allclose(dist.std()[j], np.sqrt(moments[1] - moments[0] ** 2),
                                   rtol=1e-5)
    draws = dist.rvs(size=(200_000, 3), random_state=np.random.default_rng(0))
    np.testing.assert_allclose(dist.ppf(0.05), np.quantile(draws, 0.05, axis=0), atol=2e-3)
    np.testing.assert_allclose(dist.ppf(0.95), np.quantile(draws, 0.95, axis=0), atol=2e-3)
