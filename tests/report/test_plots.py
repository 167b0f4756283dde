"""A plot for every family: what each plot draws, checked against the annotator
tables (or numpy) computed independently here. Only EM fits and hand-built
xarray fits: no PyMC graph is compiled."""

import io
import warnings

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from matplotlib.collections import LineCollection

import crowd_models as cm
from crowd_models import report
from crowd_models.cli import main
from crowd_models.cli._output import _annotator_figure
from crowd_models.models import continuous, dawid_skene, ordinal, two_coin

matplotlib.use("Agg")

J = 4
NAMES = ["w", "x", "y", "z"]


@pytest.fixture(autouse=True)
def _close_figures():
    """Close every figure a test opened."""
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def fits():
    """EM fits of the bundled data sets, one per family that has an EM."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return {
            "rte": two_coin.em(cm.datasets.load_rte()),
            "dog": dawid_skene.em(cm.datasets.load_dog()),
            "anesthesia": ordinal.em(cm.datasets.load_anesthesia()),
            "anger": continuous.em(cm.datasets.load_affect("anger"), bias=True),
            "anger_plain": continuous.em(cm.datasets.load_affect("anger")),
        }


def gid_artist(ax, gid):
    """The one child of ``ax`` with this gid."""
    found = [a for a in ax.get_children() if a.get_gid() == gid]
    assert len(found) == 1, f"{len(found)} artists with gid {gid!r}"
    return found[0]


def texts_by_gid(ax, gid):
    """The texts written on ``ax`` with this gid, in drawing order."""
    return [t.get_text() for t in ax.texts if t.get_gid() == gid]


def bars(ax):
    """The error-bar line collections of ``ax`` (x bars, then y bars)."""
    return [c for c in ax.collections if isinstance(c, LineCollection)]


def continuous_draws(rng, n_draws=50, attrs=None):
    """A NUTS-like continuous fit with known precision and bias draws."""
    shape = (2, n_draws, J)
    precision = rng.gamma(4.0, [0.5, 1.0, 2.0, 4.0], size=shape)
    bias = rng.normal(0, 0.3, size=shape)
    data = {"precision": (("chain", "draw", "annotator"), precision),
            "bias": (("chain", "draw", "annotator"), bias),
            "true_value": (("chain", "draw", "item"), rng.normal(size=(2, n_draws, 3)))}
    ds = xr.Dataset(data, coords={"chain": [0, 1], "draw": np.arange(n_draws),
                                  "annotator": NAMES, "item": [1, 2, 3]})
    tree = xr.DataTree.from_dict({
        "posterior": ds,
        "constant_data": xr.Dataset({"n_labels": ("annotator", [5, 50, 20, 10])},
                                    coords={"annotator": NAMES})})
    tree.attrs.update(attrs or {})
    return tree, precision


# ----------------------------------------------------------- ROC scatter
def test_scatter_labels_the_best_and_worst_by_weight(fits):
    fit = fits["rte"]
    ax = report.plot_annotators(fit, label_extremes=3)
    weight = report.annotator_summary(fit)["weight_mean"]
    ranked = weight.sort_values(ascending=False, kind="mergesort").index
    assert texts_by_gid(ax, "best") == [str(a) for a in ranked[:3]]
    assert texts_by_gid(ax, "worst") == [str(a) for a in ranked[::-1][:3]]
    assert len(ax.texts) == 6


def test_scatter_labels_do_not_overlap(fits):
    """RTE's three best annotators sit close together: their ids, drawn, overlap no
    other id (the busiest annotators' too)."""
    ax = report.plot_annotators(fits["rte"], label_extremes=3, label_top=5)
    ax.figure.savefig(io.BytesIO(), dpi=120)  # draw, so that the texts have extents
    renderer = ax.figure.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    assert len(boxes) >= 6
    for i, a in enumerate(boxes):
        for b in boxes[:i]:
            assert not a.overlaps(b), (a, b)


def test_scatter_marker_area_grows_with_labels(fits):
    fit = fits["rte"]
    sizes = gid_artist(report.plot_annotators(fit), "estimates").get_sizes()
    counts = fit["n_labels"].values
    assert len(sizes) == len(counts) == 164
    order = np.argsort(counts, kind="mergesort")
    assert np.all(np.diff(sizes[order]) >= 0)
    assert sizes[counts.argmax()] > sizes[counts.argmin()]  # RTE: 20 to 800 labels
    same = fit["n_labels"].values == fit["n_labels"].values[0]
    assert np.allclose(sizes[same], sizes[0])
    unrecorded = report.plot_annotators(fit.drop_vars("n_labels"))
    assert np.unique(gid_artist(unrecorded, "estimates").get_sizes()).size == 1


def test_scatter_title_names_family_method_and_positive_class(fits, rng):
    assert report.plot_annotators(fits["rte"]).get_title() == (
        "two-coin, EM: annotators in ROC space (positive class 1)")
    # a NUTS DataTree records its method and family (sample copies the model's)
    post = xr.Dataset(
        {"sensitivity": (("chain", "draw", "annotator"), rng.uniform(0.6, 0.9, (2, 30, J))),
         "specificity": (("chain", "draw", "annotator"), rng.uniform(0.6, 0.9, (2, 30, J))),
         "item_class_prob": (("chain", "draw", "item", "true_class"),
                             rng.dirichlet([1, 1], size=(2, 30, 3)))},
        coords={"chain": [0, 1], "draw": np.arange(30), "annotator": NAMES, "item": [1, 2, 3],
                "true_class": ["healthy", "sick"]})
    tree = xr.DataTree.from_dict({"posterior": post})
    tree.attrs.update(method="nuts", family="two_coin", variant="")
    title = report.plot_annotators(tree).get_title()
    assert title == "two-coin, NUTS: annotators in ROC space (positive class sick)"
    one = xr.DataTree.from_dict({"posterior": post.isel(chain=[0], draw=[0])})
    one.attrs.update(family="two_coin", variant="")
    assert report.plot_annotators(one).get_title().startswith("two-coin, MAP")
    assert report.plot_annotators(tree, title="").get_title() == ""


def test_scatter_refuses_thresholds_and_bad_counts(fits):
    with pytest.raises(ValueError, match="use plot_thresholds"):
        report.plot_annotators(fits["anesthesia"])
    with pytest.raises(ValueError, match="label_extremes must be a non-negative integer"):
        report.plot_annotators(fits["rte"], label_extremes=-1)


# ------------------------------------------------------- ordinal panels
def test_thresholds_one_roc_panel_per_threshold(fits):
    fit = fits["anesthesia"]
    fig = report.plot_thresholds(fit, label_extremes=1)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["level >1", "level >2", "level >3"]
    table = report.annotator_summary(fit)
    for ax, t in zip(panels, [">1", ">2", ">3"], strict=True):
        rows = table.xs(t, level="threshold")
        np.testing.assert_allclose(
            gid_artist(ax, "estimates").get_offsets(),
            np.column_stack([1 - rows["specificity_mean"], rows["sensitivity_mean"]]))
        assert len(bars(ax)) == 2  # EM: the Beta intervals
        ranked = rows["weight_mean"].sort_values(ascending=False, kind="mergesort").index
        assert texts_by_gid(ax, "best") == [str(ranked[0])]
        assert texts_by_gid(ax, "worst") == [str(ranked[-1])]
    assert fig.get_suptitle().startswith("ordinal (cumulative), EM")
    with pytest.raises(ValueError, match="per \\(annotator, threshold\\)"):
        report.plot_thresholds(fits["rte"])


# ------------------------------------------------------------ continuous
def test_sd_is_one_over_sqrt_of_the_precision_draws(rng):
    tree, precision = continuous_draws(rng)
    table = report.annotator_summary(tree, ci_prob=0.8)
    assert list(table.columns[:8]) == [f"{m}_{s}" for m in ("precision", "sd")
                                       for s in ("mean", "sd", "lower", "upper")]
    sd = (1 / np.sqrt(precision)).reshape(-1, J)
    np.testing.assert_allclose(table["sd_mean"], sd.mean(0), rtol=1e-12)
    np.testing.assert_allclose(table["sd_sd"], sd.std(0, ddof=1), rtol=1e-12)
    np.testing.assert_allclose(table["sd_lower"], np.quantile(sd, 0.1, axis=0), rtol=1e-12)
    np.testing.assert_allclose(table["sd_upper"], np.quantile(sd, 0.9, axis=0), rtol=1e-12)


def test_sd_of_a_map_fit_is_the_point_and_no_interval(rng):
    tree, precision = continuous_draws(rng)
    one = xr.DataTree.from_dict({"posterior": tree.posterior.to_dataset().isel(
        chain=[0], draw=[0])})
    table = report.annotator_summary(one)
    np.testing.assert_allclose(table["sd_mean"], 1 / np.sqrt(precision[0, 0]), rtol=1e-12)
    assert table[["sd_sd", "sd_lower", "sd_upper"]].isna().all().all()


def test_sd_of_an_em_fit_is_its_gamma_transformed(fits):
    fit = fits["anger"]
    table = report.annotator_summary(fit)
    a, b = fit["precision_alpha"].values, fit["precision_beta"].values
    sd = 1 / np.sqrt(np.random.default_rng(3).gamma(a, 1 / b, size=(100_000, a.size)))
    spread = sd.std(0)
    for column, value in (("mean", sd.mean(0)), ("sd", spread),
                          ("lower", np.quantile(sd, 0.05, 0)),
                          ("upper", np.quantile(sd, 0.95, 0))):
        assert np.all(np.abs(table[f"sd_{column}"].to_numpy() - value) < 0.03 * spread), column
    assert np.all((table["sd_lower"] < table["sd_mean"]) & (table["sd_mean"] < table["sd_upper"]))


def test_a_generic_precision_gets_no_sd(rng):
    """Only the continuous family's precision is a noise precision."""
    tree, _ = continuous_draws(rng)
    post = tree.posterior.to_dataset().drop_vars("true_value")
    assert "sd_mean" not in report.annotator_summary(post)


def test_bias_noise_points_bars_and_labels(fits):
    fit = fits["anger"]
    table = report.annotator_summary(fit)
    ax = report.plot_bias_noise(fit, label_extremes=2)
    np.testing.assert_allclose(gid_artist(ax, "estimates").get_offsets(),
                               table[["bias_mean", "sd_mean"]].to_numpy())
    xbars, ybars = bars(ax)
    assert len(xbars.get_segments()) == len(ybars.get_segments()) == 38
    # EM: the bias bars are its Gaussian conditional posterior
    z = 1.6448536269514722
    half = np.array([abs(s[1][0] - s[0][0]) / 2 for s in xbars.get_segments()])
    np.testing.assert_allclose(half, z * fit["bias_conditional_sd"].values, rtol=1e-9)
    ranked = table["sd_mean"].sort_values(kind="mergesort").index
    assert texts_by_gid(ax, "best") == list(ranked[:2])
    assert texts_by_gid(ax, "worst") == list(ranked[::-1][:2])
    assert ax.get_title() == "continuous, EM: annotator bias and noise"
    assert "label units" in ax.get_ylabel()


def test_bias_noise_without_bias_is_against_labels(fits):
    fit = fits["anger_plain"]
    ax = report.plot_bias_noise(fit)
    table = report.annotator_summary(fit)
    np.testing.assert_allclose(gid_artist(ax, "estimates").get_offsets(),
                               table[["n_labels", "sd_mean"]].to_numpy(float))
    assert ax.get_xlabel().startswith("labels per annotator")


def test_bias_noise_fills_a_missing_sd_interval_from_the_precision(fits):
    fit = fits["anger"]
    table = report.annotator_summary(fit)
    table[["sd_lower", "sd_upper"]] = np.nan
    ax = report.plot_bias_noise(fit, table=table)
    _, ybars = bars(ax)
    ends = np.sort([[s[0][1], s[1][1]] for s in ybars.get_segments()], axis=1)
    np.testing.assert_allclose(ends, 1 / np.sqrt(table[["precision_upper",
                                                        "precision_lower"]].to_numpy()))


def test_bias_noise_errors(fits):
    with pytest.raises(ValueError, match="needs a continuous fit"):
        report.plot_bias_noise(fits["rte"])
    with pytest.raises(ValueError, match="table lacks the columns"):
        report.plot_bias_noise(fits["anger"], table=pd.DataFrame({"n_labels": [1]}))


# ----------------------------------------------------- confusion groups
def test_pick_annotators_matches_the_table(fits):
    fit = fits["dog"]
    table = report.annotator_summary(fit)
    worst = report.pick_annotators(fit, "worst", 3)
    np.testing.assert_array_equal(table.loc[worst, "accuracy_mean"],
                                  np.sort(table["accuracy_mean"])[:3])
    width = table["accuracy_upper"] - table["accuracy_lower"]
    uncertain = report.pick_annotators(table, "uncertain", 3)
    np.testing.assert_array_equal(width[uncertain], np.sort(width)[::-1][:3])
    busiest = report.pick_annotators(table, "busiest", 2)
    assert list(busiest) == list(table["n_labels"].nlargest(2).index)
    best = report.pick_annotators(fits["rte"], "best", 1)
    assert best == [report.annotator_summary(fits["rte"])["weight_mean"].idxmax()]
    with pytest.raises(ValueError, match="not a rule"):
        report.pick_annotators(table, "slowest")
    with pytest.raises(ValueError, match="one row per annotator"):
        report.pick_annotators(report.annotator_summary(fits["anesthesia"]))


def test_confusion_groups_show_the_worst_and_the_most_uncertain(fits):
    fit = fits["dog"]
    fig = report.plot_confusion_groups(fit, n=2)
    panels = [ax for ax in fig.axes if ax.images and ax.get_visible()]
    titles = [ax.get_title() for ax in panels]
    assert len(panels) == 5
    assert titles[0].startswith("all annotators, weighted by labels")
    table = report.annotator_summary(fit)
    worst = table["accuracy_mean"].sort_values(kind="mergesort").index[:2]
    for title, a in zip(titles[1:3], worst, strict=True):
        assert title == (f"worst accuracy {table.loc[a, 'accuracy_mean']:.2f}\n"
                         f"{a} ({table.loc[a, 'n_labels']} labels)")
    width = (table["accuracy_upper"] - table["accuracy_lower"]).drop(worst)
    widest = width.sort_values(ascending=False, kind="mergesort").index[:2]
    for title, a in zip(titles[3:], widest, strict=True):
        assert title == (f"most uncertain (90% interval width {width[a]:.2f})\n"
                         f"{a} ({table.loc[a, 'n_labels']} labels)")
    assert fig.get_suptitle() == "Dawid-Skene, EM: confusion matrices"
    no_population = report.plot_confusion_groups(fit, n=1, population=False)
    assert len([ax for ax in no_population.axes if ax.images and ax.get_visible()]) == 2


def test_accuracy_plot_points_chance_and_labels(fits):
    fit = fits["dog"]
    table = report.annotator_summary(fit)
    ax = report.plot_accuracy(fit, label_extremes=1)
    np.testing.assert_allclose(gid_artist(ax, "estimates").get_offsets(),
                               table[["n_labels", "accuracy_mean"]].to_numpy(float))
    np.testing.assert_allclose(gid_artist(ax, "chance").get_ydata(), 0.25)
    assert texts_by_gid(ax, "best") == [str(table["accuracy_mean"].idxmax())]
    assert texts_by_gid(ax, "worst") == [str(table["accuracy_mean"].idxmin())]
    assert ax.get_title() == "Dawid-Skene, EM: annotator accuracy"


def test_accuracy_plot_draws_the_feature_spread_of_a_table():
    fit = xr.Dataset({"accuracy_intercept": (("chain", "draw", "annotator"), np.zeros((1, 1, J))),
                      "item_class_prob": (("chain", "draw", "item", "true_class"),
                                          np.full((1, 1, 2, 2), 0.5))},
                     coords={"annotator": NAMES, "true_class": [0, 1]},
                     attrs={"family": "feature_accuracy", "method": "em"})
    table = pd.DataFrame({"accuracy_mean": [0.9, 0.8, 0.7, 0.6], "accuracy_lower": np.nan,
                          "accuracy_upper": np.nan, "accuracy_q10": [0.8, 0.7, 0.6, 0.5],
                          "accuracy_q90": [0.95, 0.9, 0.8, 0.7], "n_labels": [10, 20, 30, 40]},
                         index=pd.Index(NAMES, name="annotator"))
    ax = report.plot_accuracy(fit, table=table)
    spread = gid_artist(ax, "feature_range").get_segments()
    np.testing.assert_allclose([[s[0][1], s[1][1]] for s in spread],
                               table[["accuracy_q10", "accuracy_q90"]].to_numpy())
    assert not bars(ax)[1:]  # no interval: only the spread
    assert ax.get_title() == "feature-accuracy, EM: annotator accuracy"
    with pytest.raises(ValueError, match="table=feature_accuracy.annotator_summary"):
        report.plot_accuracy(fit)


# ----------------------------------------------------------------- CLI
def test_annotator_figure_for_each_family(fits):
    for name, expected in (("rte", "two-coin, EM"), ("dog", "Dawid-Skene, EM"),
                           ("anesthesia", "ordinal (cumulative), EM"),
                           ("anger", "continuous, EM")):
        fit = fits[name]
        fig = _annotator_figure(fit, report.annotator_summary(fit))
        titles = [fig.get_suptitle(), *(ax.get_title() for ax in fig.axes)]
        assert any(t.startswith(expected) for t in titles), (name, titles)
    stacked = xr.Dataset({"class_mean": (("chain", "draw", "annotator"), np.zeros((1, 1, J)))},
                         coords={"annotator": NAMES})
    assert _annotator_figure(stacked, pd.DataFrame(index=NAMES)) is None


@pytest.mark.parametrize("name, args", [
    ("affect anger", ["--continuous", "--bias"]),
    ("anesthesia", ["--model", "ordinal"]),
])
def test_fit_writes_annotators_png(tmp_path, capsys, name, args):
    ann = (cm.datasets.load_affect("anger") if name == "affect anger"
           else cm.datasets.load_anesthesia())
    ann.to_frame().to_csv(tmp_path / "labels.csv", index=False)
    out = tmp_path / "out"
    code = main(["fit", str(tmp_path / "labels.csv"), "--method", "em", "--out", str(out),
                 *args])
    assert code == 0, capsys.readouterr().err
    assert (out / "annotators.png").stat().st_size > 10_000
    assert "annotators.png" in capsys.readouterr().out
