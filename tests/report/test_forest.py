"""Forest plots across fits: the draws behind them, against their sources."""

import matplotlib
import numpy as np
import pytest
import xarray as xr
from scipy import stats

import crowd_models as cm
from crowd_models.models import two_coin

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def em_fit(sim_plain):
    return two_coin.em(sim_plain)


def _nuts_like(n_chains=2, n_draws=300, seed=0):
    rng = np.random.default_rng(seed)
    post = xr.Dataset(
        {"sensitivity": (("chain", "draw", "annotator"), rng.beta(8, 2, (n_chains, n_draws, 3)))},
        coords={"chain": np.arange(n_chains), "draw": np.arange(n_draws),
                "annotator": ["a", "b", "c"]})
    return xr.DataTree(children={"posterior": xr.DataTree(post)})


def test_em_draws_follow_its_beta_approximations(em_fit):
    trees = cm.report.forest_draws({"EM": em_fit}, ["sensitivity", "specificity"])
    post = trees["EM"]["posterior"]
    assert post["sensitivity"].dims == ("chain", "draw", "annotator")
    assert post.sizes["draw"] == 4000
    for name in ("sensitivity", "specificity"):
        dist = stats.beta(em_fit[f"{name}_alpha"].values.ravel(),
                          em_fit[f"{name}_beta"].values.ravel())
        got = post[name].quantile([0.05, 0.5, 0.95], dim=("chain", "draw")).values
        np.testing.assert_allclose(got, dist.ppf([[0.05], [0.5], [0.95]]), atol=0.01)
    # seeded: the same draws every time
    again = cm.report.forest_draws({"EM": em_fit}, ["sensitivity", "specificity"])
    xr.testing.assert_identical(again["EM"]["posterior"].to_dataset(), post.to_dataset())


def test_nuts_draws_are_pooled_or_resampled():
    tree = _nuts_like()
    pooled = tree["posterior"]["sensitivity"].values.reshape(600, 3)
    exact = cm.report.forest_draws(tree, "sensitivity", n_draws=600)["fit"]["posterior"]
    np.testing.assert_array_equal(exact["sensitivity"].values[0], pooled)
    fewer = cm.report.forest_draws(tree, "sensitivity", n_draws=100)["fit"]["posterior"]
    rows = fewer["sensitivity"].values[0]
    assert rows.shape == (100, 3)
    assert all(any(np.array_equal(r, p) for p in pooled) for r in rows)  # a subset
    assert len({tuple(r) for r in rows}) == 100  # without replacement


def test_a_point_stays_a_point_and_laplace_draws_are_used(plain_model):
    map_fit = cm.fit_map(plain_model)
    point = cm.report.forest_draws(map_fit, "sensitivity", n_draws=50)["fit"]["posterior"]
    values = point["sensitivity"].values[0]
    np.testing.assert_array_equal(values, np.repeat(
        map_fit.posterior["sensitivity"].values[0], 50, axis=0))
    lap = cm.fit_map(plain_model, laplace=True, laplace_draws=200, random_seed=3)
    drawn = cm.report.forest_draws(lap, "sensitivity", n_draws=200)["fit"]["posterior"]
    np.testing.assert_array_equal(drawn["sensitivity"].values[0],
                                  lap["laplace"]["sensitivity"].values[0])


def test_plot_forest_compares_fits(em_fit, tmp_path):
    nuts = _nuts_like()
    nuts["posterior"] = nuts["posterior"].to_dataset().assign_coords(
        annotator=em_fit["annotator"].values[:3])
    fits = {"EM": em_fit.isel(annotator=slice(0, 3)), "NUTS": nuts}
    pc = cm.report.plot_forest(fits)
    path = tmp_path / "forest.png"
    pc.savefig(path)
    assert path.stat().st_size > 10_000
    legend = pc.viz["legend"]["model"].item()
    assert [t.get_text() for t in legend.get_texts()] == ["EM", "NUTS"]
    # one point estimate per fit and annotator, at the mean of the fit's draws
    points = pc.viz["point_estimate"]["sensitivity"]
    assert points.sizes == {"model": 2, "annotator": 3}
    drawn = cm.report.forest_draws(fits, "sensitivity")["NUTS"]["posterior"]
    nuts_mean = drawn["sensitivity"].mean(("chain", "draw"))
    for a in nuts_mean["annotator"].values:
        x = points.sel(model="NUTS", annotator=a).item().get_offsets()[0][0]
        assert x == pytest.approx(float(nuts_mean.sel(annotator=a)), rel=1e-12)


def test_forest_messages(em_fit):
    with pytest.raises(ValueError, match=r"no variable\(s\) \['precision'\]"):
        cm.report.forest_draws(em_fit, "precision")
    with pytest.raises(TypeError, match="var_names must be"):
        cm.report.forest_draws(em_fit, 3)
    with pytest.raises(ValueError, match="fits is empty"):
        cm.report.forest_draws({}, "sensitivity")
    with pytest.raises(ValueError, match="n_draws must be a positive integer"):
        cm.report.forest_draws(em_fit, "sensitivity", n_draws=0)
    with pytest.raises(ValueError, match="ci_prob"):
        cm.report.plot_forest(em_fit, ci_prob=1.5)
