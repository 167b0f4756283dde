"""The `crowd-models` command: fit a CSV, one-line errors, the demo."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import crowd_models as cm
from crowd_models.cli import main
from crowd_models.models import two_coin

from ..conftest import RADIOLOGISTS


@pytest.fixture(scope="module")
def labels_csv(tmp_path_factory):
    sim = two_coin.simulate(**RADIOLOGISTS, n_items=300, n_features=2,
                            rng=np.random.default_rng(5))
    folder = tmp_path_factory.mktemp("cli")
    frame = sim.to_frame().rename(columns={"item": "case", "annotator": "reader",
                                           "label": "call"})
    frame.to_csv(folder / "labels.csv", index=False)
    pd.DataFrame(sim.features, index=pd.Index(sim.items, name="case"),
                 columns=["age", "size"]).to_csv(folder / "features.csv")
    return folder, sim


def test_fit_em_writes_report(labels_csv, capsys):
    folder, sim = labels_csv
    out = folder / "em"
    code = main(["fit", str(folder / "labels.csv"), "--item", "case", "--annotator", "reader",
                 "--label", "call", "--method", "em", "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "[1/3] reading" in printed and "annotator_0" in printed
    table = pd.read_csv(out / "annotators.csv", index_col=0)
    truth = sim.truth["sensitivity"].to_series()
    est = table["sensitivity_mean"].reindex(truth.index)
    assert np.abs(est - truth).max() < 0.1
    items = pd.read_csv(out / "items.csv", index_col=0)
    assert len(items) == 300
    np.testing.assert_allclose(items["prob_0"] + items["prob_1"], 1.0)
    assert (out / "annotators.png").stat().st_size > 0
    with xr.open_dataset(out / "fit.nc", engine="h5netcdf") as saved:
        assert saved["sensitivity"].sizes["annotator"] == 5


def test_fit_map_with_features(labels_csv, capsys):
    folder, sim = labels_csv
    out = folder / "map"
    code = main(["fit", str(folder / "labels.csv"), "--item", "case", "--annotator", "reader",
                 "--label", "call", "--features", str(folder / "features.csv"),
                 "--out", str(out)])
    assert code == 0
    with xr.open_datatree(out / "fit.nc", engine="h5netcdf") as saved:
        assert list(saved.posterior["coef"].feature.values) == ["age", "size"]
        assert saved.log_likelihood["item_labels"].sizes["item"] == 300


def test_fit_map_with_features_of_a_confusion_family(labels_csv):
    """Dawid-Skene with a classifier: the Laplace draws have no class shares, so the
    annotators' overall accuracy weighs their per-class ones by the MAP's (the
    report's annotator figure ranks by it; this stopped with an internal error)."""
    folder, _ = labels_csv
    out = folder / "map_ds"
    code = main(["fit", str(folder / "labels.csv"), "--item", "case", "--annotator", "reader",
                 "--label", "call", "--features", str(folder / "features.csv"),
                 "--model", "dawid-skene", "--method", "map", "--out", str(out)])
    assert code == 0 and (out / "annotators.png").stat().st_size > 0
    table = pd.read_csv(out / "annotators.csv", index_col=0)
    shares = pd.read_csv(out / "items.csv", index_col=0)[["prob_0", "prob_1"]].mean()
    np.testing.assert_allclose(table["accuracy_mean"],
                               table[["accuracy_0_mean", "accuracy_1_mean"]] @ shares.values,
                               rtol=1e-9)


@pytest.mark.parametrize("args, message", [
    (["fit", "{folder}/nope.csv"], "does not exist"),
    (["fit", "{folder}/labels.csv"], "column 'item' \\(the item column\\) is not in the table"),
    (["fit", "{folder}/labels.csv", "--item", "case", "--annotator", "reader",
      "--label", "call", "--classes", "0,2"], "are not among the classes"),
    (["fit", "{folder}/garbage.csv"], "is not a readable CSV"),
    (["fit", "{folder}/three.csv"], "exactly 2 classes"),
    (["fit", "{folder}/labels.csv", "--item", "case", "--annotator", "reader",
      "--label", "call", "--features", "{folder}/bad_features.csv"], "features are missing"),
    (["fit", "{folder}/labels.csv", "--item", "case", "--annotator", "reader",
      "--label", "call", "--penalty", "1"], "--penalty applies to --model feature-accuracy"),
    (["fit", "{folder}/labels.csv", "--item", "case", "--annotator", "reader",
      "--label", "call", "--model", "feature-accuracy"], "needs --features"),
    (["fit", "{folder}/labels.csv", "--item", "case", "--annotator", "reader",
      "--label", "call", "--model", "feature-accuracy", "--features",
      "{folder}/features.csv", "--penalty", "1,a"], "positive numbers separated by commas"),
    (["fit", "{folder}/labels.csv", "--item", "case", "--annotator", "reader",
      "--label", "call", "--model", "feature-accuracy", "--features",
      "{folder}/features.csv", "--penalty", "2,0"], "every rate must be a positive number"),
])
def test_bad_input_is_one_line(labels_csv, capsys, args, message):
    folder, _ = labels_csv
    (folder / "garbage.csv").write_bytes(b"\xff\xfe\x00bad\x00")
    pd.DataFrame({"item": [1, 2, 3], "annotator": ["a", "b", "c"],
                  "label": ["x", "y", "z"]}).to_csv(folder / "three.csv", index=False)
    pd.DataFrame({"size": [1.0]}, index=pd.Index([0], name="case")).to_csv(
        folder / "bad_features.csv")
    code = main([a.format(folder=folder) for a in args])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("crowd-models: error: ")
    assert len(err.strip().splitlines()) == 1
    assert pytest.importorskip("re").search(message, err)


@pytest.mark.slow
def test_demo_quick(tmp_path, capsys):
    assert main(["demo", "--quick", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    em_line = next(line for line in printed.splitlines() if "two-coin EM" in line)
    assert float(em_line.split()[-1]) >= 0.925
    for name in ("annotators.csv", "items.csv", "annotators.png", "fit.nc"):
        assert (tmp_path / name).exists()


def test_fit_dawid_skene_em(tmp_path, capsys):
    from crowd_models.models import dawid_skene

    conf = np.stack([np.full((3, 3), 0.1) + np.eye(3) * 0.7] * 4)
    sim = dawid_skene.simulate(conf, n_items=200, classes=["cat", "dog", "fox"],
                               rng=np.random.default_rng(8))
    sim.to_frame().to_csv(tmp_path / "labels.csv", index=False)
    code = main(["fit", str(tmp_path / "labels.csv"), "--model", "dawid-skene", "--variant",
                 "full", "--method", "em", "--out", str(tmp_path / "out")])
    assert code == 0
    table = pd.read_csv(tmp_path / "out" / "annotators.csv", index_col=0)
    assert np.abs(table["accuracy_cat_mean"] - 0.8).max() < 0.12
    assert "accuracy_fox_upper" in capsys.readouterr().out
    assert (tmp_path / "out" / "annotators.png").stat().st_size > 0
    # the default variant is the full one, as dawid_skene.em's; pooled on request
    code = main(["fit", str(tmp_path / "labels.csv"), "--model", "dawid-skene",
                 "--method", "em", "--out", str(tmp_path / "default")])
    assert code == 0
    default = pd.read_csv(tmp_path / "default" / "annotators.csv", index_col=0)
    pd.testing.assert_frame_equal(default, table)
    with xr.open_datatree(tmp_path / "default" / "fit.nc", engine="h5netcdf") as saved:
        assert saved.attrs["variant"] == "full"
    code = main(["fit", str(tmp_path / "labels.csv"), "--model", "dawid-skene", "--variant",
                 "pooled", "--method", "em", "--out", str(tmp_path / "pooled")])
    assert code == 0
    fit = dawid_skene.em(sim, variant="pooled")
    table = pd.read_csv(tmp_path / "pooled" / "annotators.csv", index_col=0)
    np.testing.assert_allclose(table["accuracy_cat_mean"],
                               cm.report.annotator_summary(fit)["accuracy_cat_mean"])
    with xr.open_datatree(tmp_path / "pooled" / "fit.nc", engine="h5netcdf") as saved:
        assert saved.attrs["variant"] == "pooled"


def test_fit_spammer_em_reports_trust(tmp_path, capsys):
    from crowd_models.models import spammer

    sim = spammer.simulate([0.9, 0.8, 0.7, 0.0], spam_share=[[1 / 3] * 3] * 3 + [[0, 0, 1]],
                           n_items=200, classes=["cat", "dog", "fox"],
                           rng=np.random.default_rng(8))
    sim.to_frame().to_csv(tmp_path / "labels.csv", index=False)
    out = tmp_path / "out"
    code = main(["fit", str(tmp_path / "labels.csv"), "--model", "spammer", "--method", "em",
                 "--trustworthiness-prior", "2,2", "--out", str(out)])
    assert code == 0
    table = pd.read_csv(out / "annotators.csv", index_col=0)
    fit = spammer.em(sim, trustworthiness_prior=(2, 2))
    np.testing.assert_allclose(table["trustworthiness_mean"],
                               cm.report.annotator_summary(fit)["trustworthiness_mean"])
    assert table.loc["annotator_3", "trustworthiness_upper"] < 0.1
    assert "trustworthiness_upper" in capsys.readouterr().out
    # a spammer model has no classifier: --features is refused before any fit
    pd.DataFrame({"x": np.arange(200)}, index=sim.items).to_csv(tmp_path / "x.csv")
    assert main(["fit", str(tmp_path / "labels.csv"), "--model", "spammer", "--features",
                 str(tmp_path / "x.csv"), "--out", str(tmp_path / "other")]) == 2
    assert "--model spammer has no classifier" in capsys.readouterr().err


def test_fit_community_em_names_each_annotators_community(tmp_path, capsys):
    """--model community: the community model's EM with the command line's priors and
    number of communities; the table's communities are the simulated ones."""
    from sklearn.metrics import adjusted_rand_score

    from crowd_models.models import community

    rows = np.stack([np.eye(3) * 0.7 + 0.1, np.full((3, 3), 1 / 3)])  # accurate, spammers
    sim = community.simulate(rows, np.arange(12) % 2, n_items=150, spread=0.3,
                             labels_per_item=5, rng=4)
    sim.to_frame().to_csv(tmp_path / "labels.csv", index=False)
    out = tmp_path / "out"
    assert main(["fit", str(tmp_path / "labels.csv"), "--model", "community", "--method", "em",
                 "--n-communities", "2", "--community-share-prior", "3",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    fit = community.em(sim, n_communities=2, community_share_prior=3.0)
    table = pd.read_csv(out / "annotators.csv", index_col=0)
    expected = cm.report.annotator_summary(fit)
    np.testing.assert_allclose(table["accuracy_mean"], expected["accuracy_mean"])
    assert (table["community"].to_numpy() == expected["community"].to_numpy()).all()
    truth = sim.truth["annotator_community"].sel(annotator=fit["annotator"]).values
    assert adjusted_rand_score(truth, table["community"]) == 1.0  # accurate against spammers
    items = pd.read_csv(out / "items.csv", index_col=0)
    assert cm.open_fit(out / "fit.nc").attrs["n_communities"] == 2
    assert (items[[f"prob_{c}" for c in sim.classes]].to_numpy().argmax(axis=1)
            == fit["item_class_prob"].values[0, 0].argmax(axis=1)).all()
    for args, message in [(["--n-communities", "1.5"], "it must be a whole number >= 1"),
                          (["--population-prior", "2,1"], "--population-prior applies to")]:
        assert main(["fit", str(tmp_path / "labels.csv"), "--model", "community", *args,
                     "--out", str(tmp_path / "bad")]) == 2
        assert message in capsys.readouterr().err


def test_fit_item_difficulty_em_writes_the_easiness(tmp_path, capsys):
    from crowd_models.models import item_difficulty

    easiness = np.exp(np.random.default_rng(3).normal(0, 1, 120))
    sim = item_difficulty.simulate([2.0, 1.5, 1.0, 0.5], easiness, rng=np.random.default_rng(4))
    sim.to_frame().to_csv(tmp_path / "labels.csv", index=False)
    out = tmp_path / "out"
    assert main(["fit", str(tmp_path / "labels.csv"), "--model", "item-difficulty",
                 "--method", "em", "--ability-prior", "1,2", "--out", str(out)]) == 0
    items = pd.read_csv(out / "items.csv", index_col=0)
    fit = item_difficulty.em(sim, ability_prior=(1, 2))
    np.testing.assert_allclose(items.loc[sim.items, "easiness_mean"],
                               fit["easiness"].values[0, 0], rtol=1e-6)
    table = pd.read_csv(out / "annotators.csv", index_col=0)
    assert "ability_mean" in table.columns
    capsys.readouterr()
    assert main(["fit", str(tmp_path / "labels.csv"), "--model", "item-difficulty",
                 "--variant", "hierarchical", "--method", "em"]) == 2
    assert "has no EM" in capsys.readouterr().err


def test_fit_item_difficulty_irt_takes_the_positive_class(tmp_path, capsys):
    from crowd_models.models import item_difficulty

    rng = np.random.default_rng(5)
    sim = item_difficulty.simulate_irt([2.0, 1.5, 1.0, 0.5], [0.8, 0.0, -0.5, 0.3],
                                       rng.normal(0, 1, 120), np.ones(120),
                                       classes=["no", "yes"], rng=rng)
    sim.to_frame().to_csv(tmp_path / "labels.csv", index=False)
    out = tmp_path / "out"
    assert main(["fit", str(tmp_path / "labels.csv"), "--model", "item-difficulty",
                 "--variant", "irt", "--positive", "no", "--difficulty-sd", "2",
                 "--method", "em", "--out", str(out)]) == 0
    assert "positive class: 'no'" in capsys.readouterr().out
    fit = item_difficulty.em(sim.with_positive("no"), variant="irt", difficulty_sd=2.0)
    table = pd.read_csv(out / "annotators.csv", index_col=0)
    # the means are those of the EM's approximations (the bias's Normal is centred on
    # the EM point; the rates' are not), and each EM point lies inside its interval
    expected = cm.report.annotator_summary(fit).loc[sim.annotators]
    for name in ("sensitivity", "specificity", "bias"):
        for stat in ("mean", "lower", "upper"):
            np.testing.assert_allclose(table.loc[sim.annotators, f"{name}_{stat}"],
                                       expected[f"{name}_{stat}"], rtol=1e-6)
        point = fit[name].values[0, 0]
        assert (table.loc[sim.annotators, f"{name}_lower"] < point).all()
        assert (table.loc[sim.annotators, f"{name}_upper"] > point).all()
    np.testing.assert_allclose(table.loc[sim.annotators, "bias_mean"], fit["bias"].values[0, 0],
                               rtol=1e-6)
    # "no" positive: the biases are the negatives of those with "yes" positive
    flipped = item_difficulty.em(sim, variant="irt", difficulty_sd=2.0)
    np.testing.assert_allclose(fit["bias"].values, -flipped["bias"].values, atol=1e-5)
    items = pd.read_csv(out / "items.csv", index_col=0)
    assert "difficulty_mean" in items.columns
    for args, message in [
            (["--variant", "fixed", "--positive", "no"], "has no positive class"),
            (["--variant", "fixed", "--difficulty-sd", "2"], "--difficulty-sd applies to"),
            (["--variant", "irt_hierarchical", "--method", "em"], "has no EM"),
            (["--variant", "hierarchical"], "--variant hierarchical of --model item-difficulty "
                                            "has no posterior mode (the spread of its abilities "
                                            "shrinks to 0, where MAP stalls); use --method nuts."),
            (["--variant", "irt_hierarchical", "--method", "map"], "has no posterior mode")]:
        assert main(["fit", str(tmp_path / "labels.csv"), "--model", "item-difficulty",
                     *args]) == 2
        assert message in capsys.readouterr().err, args
    three = pd.DataFrame({"item": np.repeat(range(4), 3), "annotator": ["a", "b", "c"] * 4,
                          "label": [0, 1, 2] * 4})
    three.to_csv(tmp_path / "three.csv", index=False)
    assert main(["fit", str(tmp_path / "three.csv"), "--model", "item-difficulty",
                 "--variant", "irt", "--method", "em"]) == 2
    assert "--variant irt needs exactly 2 classes" in capsys.readouterr().err


def test_fit_auto_prints_the_ranking_and_fits_the_choice(tmp_path, capsys):
    import json

    from crowd_models.models import spammer

    rng = np.random.default_rng(21)
    share = [[1 / 3] * 3] * 6 + [[0.05, 0.05, 0.9]] * 3
    sim = spammer.simulate([0.9, 0.8, 0.8, 0.7, 0.6, 0.6, 0.0, 0.0, 0.0], spam_share=share,
                           n_items=200, labels_per_item=5, classes=["a", "b", "c"], rng=rng)
    sim.to_frame().to_csv(tmp_path / "labels.csv", index=False)
    out = tmp_path / "out"
    assert main(["fit", str(tmp_path / "labels.csv"), "--model", "auto", "--method", "em",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "chosen: spammer (--model spammer)" in printed and "item_difficulty" in printed
    fit = xr.open_dataset(out / "fit.nc", engine="h5netcdf")
    ranking = json.loads(fit.attrs["ranking"])
    # the default rule chooses among these two, and only they are scored
    assert {row["candidate"] for row in ranking} == {"spammer", "item_difficulty"}
    assert fit.attrs["criterion"] == "sharing"
    assert fit.attrs["family"] == "spammer"
    # the earlier rule on request, recorded as such
    assert main(["fit", str(tmp_path / "labels.csv"), "--model", "auto", "--method", "em",
                 "--criterion", "heldout", "--out", str(tmp_path / "heldout")]) == 0
    assert "the fewest parameters" in capsys.readouterr().out
    heldout = xr.open_dataset(tmp_path / "heldout" / "fit.nc", engine="h5netcdf")
    assert heldout.attrs["criterion"] == "heldout"
    every = {row["candidate"]: row["score"] for row in json.loads(heldout.attrs["ranking"])}
    assert set(every) == {"one_coin", "dawid_skene", "spammer", "item_difficulty", "pooled"}
    # the same splits: the two scored candidates' scores are those of the full comparison
    for row in ranking:
        assert row["score"] == pytest.approx(every[row["candidate"]], rel=1e-12)
    assert main(["fit", str(tmp_path / "labels.csv"), "--model", "spammer", "--criterion",
                 "loo", "--out", str(tmp_path / "other")]) == 2
    assert "--criterion chooses the family of --model auto" in capsys.readouterr().err
    # prior options belong to one family, and auto has none
    assert main(["fit", str(tmp_path / "labels.csv"), "--model", "auto", "--spam-prior", "2",
                 "--out", str(tmp_path / "other")]) == 2
    assert "not --model auto" in capsys.readouterr().err


def test_fit_auto_ordered_compares_the_latent_ordinal_model(tmp_path, capsys, monkeypatch):
    import json

    from crowd_models import auto
    from crowd_models.models import ordinal

    rng = np.random.default_rng(23)
    sim = ordinal.simulate(variant="latent", bias=np.r_[rng.normal(0, 0.3, 6), 1.2, 1.2, -1.2,
                                                        -1.2],
                           noise=rng.uniform(0.2, 0.6, 10), n_classes=4, n_items=300,
                           labels_per_item=5, rng=rng)
    sim.to_frame().to_csv(tmp_path / "labels.csv", index=False)
    labels = str(tmp_path / "labels.csv")
    assert main(["fit", labels, "--model", "auto", "--ordered", "--method", "map",
                 "--out", str(tmp_path / "out")]) == 0
    assert "chosen: ordinal (--model ordinal --variant latent)" in capsys.readouterr().out
    fit = xr.open_dataset(tmp_path / "out" / "fit.nc", engine="h5netcdf")
    assert fit.attrs["family"] == "ordinal"
    # the chosen model has no EM: said after the ranking, before any fit (the
    # ranking of the run above stands in for a second comparison)
    table = pd.DataFrame(json.loads(fit.attrs["ranking"])).set_index("candidate")
    table.attrs["criterion"] = "sharing"
    monkeypatch.setattr(auto, "compare_models", lambda ann, **options: table)
    assert main(["fit", labels, "--model", "auto", "--ordered", "--method", "em",
                 "--out", str(tmp_path / "em")]) == 2
    assert "has no EM; rerun with --method map" in capsys.readouterr().err
    assert main(["fit", labels, "--model", "dawid-skene", "--ordered",
                 "--out", str(tmp_path / "other")]) == 2
    assert "--ordered adds the ordinal candidate to --model auto" in capsys.readouterr().err


@pytest.fixture(scope="module")
def continuous_csv(tmp_path_factory):
    from crowd_models.models import continuous

    bias = np.array([2.0, -1.0, 0.5, -1.5])
    sim = continuous.simulate([0.5, 1.0, 2.0, 4.0], bias=bias - bias.mean(), n_items=200,
                              intercept=10.0, truth_precision=0.25,
                              rng=np.random.default_rng(6))
    folder = tmp_path_factory.mktemp("cli_continuous")
    sim.to_frame().to_csv(folder / "ratings.csv", index=False)
    return folder, sim


def test_fit_continuous_em(continuous_csv, capsys):
    folder, sim = continuous_csv
    out = folder / "em"
    code = main(["fit", str(folder / "ratings.csv"), "--continuous", "--bias",
                 "--method", "em", "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "precision_mean" in printed and "bias_upper" in printed
    table = pd.read_csv(out / "annotators.csv", index_col=0)
    for col in ("precision_mean", "precision_lower", "precision_upper", "bias_mean",
                "bias_lower", "bias_upper", "n_labels"):
        assert col in table.columns
    truth = sim.truth.to_dataframe()
    est = table.reindex(truth.index)
    assert np.abs(est["bias_mean"] - truth["bias"]).max() < 0.3
    # EM intervals come from the conditional Gamma posterior of each precision
    assert (est["precision_lower"] < truth["precision"]).sum() >= 3
    items = pd.read_csv(out / "items.csv", index_col=0)
    assert list(items.columns[:4]) == ["mean", "sd", "lower", "upper"]
    assert len(items) == 200 and (items["sd"] > 0).all()
    gold = pd.Series(sim.gold, index=sim.items).reindex(items.index)
    assert np.corrcoef(items["mean"], gold)[0, 1] > 0.95
    assert (out / "annotators.png").stat().st_size > 0  # bias against noise SD
    # the noise SD in label units: 1/sqrt(precision), its interval the precision's mapped over
    # (the mean of 1/sqrt(precision) over EM's Gamma approximation: above 1/sqrt of its mean)
    root = 1 / np.sqrt(table["precision_mean"])
    assert ((table["sd_mean"] > root) & (table["sd_mean"] < 1.02 * root)).all()
    np.testing.assert_allclose(table["sd_lower"], 1 / np.sqrt(table["precision_upper"]),
                               rtol=1e-6)
    assert ((table["sd_lower"] <= table["sd_mean"]) & (table["sd_mean"] <= table["sd_upper"])).all()


def test_fit_continuous_via_model_name(continuous_csv, capsys):
    folder, _ = continuous_csv
    out = folder / "plain"
    assert main(["fit", str(folder / "ratings.csv"), "--model", "continuous",
                 "--method", "em", "--out", str(out)]) == 0
    table = pd.read_csv(out / "annotators.csv", index_col=0)
    assert "precision_mean" in table and "bias_mean" not in table


@pytest.mark.parametrize("args, message", [
    (["--continuous"], "column 'label' holds 1 non-numeric value\\(s\\), e.g. 'high'"),
    (["--model", "continuous"], "non-numeric value\\(s\\), e.g. 'high' \\(line\\(s\\) 4\\)"),
    (["--bias"], "--bias and --scale apply to continuous labels; add --continuous"),
    (["--continuous", "--model", "dawid-skene"], "cannot be combined with --model dawid-skene"),
    (["--continuous", "--classes", "0,1"], "--classes does not apply to continuous"),
])
def test_continuous_bad_input_is_one_line(tmp_path, capsys, args, message):
    pd.DataFrame({"item": [1, 1, 2, 2], "annotator": ["a", "b", "a", "b"],
                  "label": ["0.5", "1.5", "high", "2"]}).to_csv(tmp_path / "r.csv", index=False)
    code = main(["fit", str(tmp_path / "r.csv"), "--method", "em", "--out",
                 str(tmp_path / "out"), *args])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("crowd-models: error: ")
    assert len(err.strip().splitlines()) == 1
    assert pytest.importorskip("re").search(message, err), err


def test_continuous_nan_label_is_one_line(tmp_path, capsys):
    pd.DataFrame({"item": [1, 1, 2], "annotator": ["a", "b", "a"],
                  "label": [0.5, None, 2.0]}).to_csv(tmp_path / "r.csv", index=False)
    code = main(["fit", str(tmp_path / "r.csv"), "--continuous", "--method", "em"])
    assert code == 2
    assert "missing or empty on 1 line(s), e.g. line(s) 3" in capsys.readouterr().err


@pytest.mark.slow
def test_fit_continuous_map(continuous_csv, capsys):
    folder, _ = continuous_csv
    out = folder / "map"
    assert main(["fit", str(folder / "ratings.csv"), "--continuous", "--bias",
                 "--out", str(out)]) == 0
    em = pd.read_csv(folder / "em" / "items.csv", index_col=0) if (
        folder / "em").exists() else None
    items = pd.read_csv(out / "items.csv", index_col=0)
    if em is not None:
        np.testing.assert_allclose(items["mean"], em["mean"], atol=1e-5)
    with xr.open_datatree(out / "fit.nc", engine="h5netcdf") as saved:
        assert saved.log_likelihood["item_labels"].sizes["item"] == 200


def test_fit_ordinal_em_matches_the_family(tmp_path, capsys):
    """--model ordinal: the CLI's fit is ordinal.em's, one table row per
    annotator and threshold; levels that are words get a one-line error."""
    from crowd_models.models import ordinal

    sens = np.tile([0.9, 0.85, 0.8], (4, 1))
    spec = np.tile([0.8, 0.85, 0.9], (4, 1))
    sim = ordinal.simulate(variant="cumulative", sensitivity=sens, specificity=spec,
                           prevalence=[0.2, 0.3, 0.3, 0.2], n_items=150,
                           rng=np.random.default_rng(9))
    sim.to_frame().to_csv(tmp_path / "levels.csv", index=False)
    code = main(["fit", str(tmp_path / "levels.csv"), "--model", "ordinal", "--method", "em",
                 "--out", str(tmp_path / "out")])
    assert code == 0, capsys.readouterr().err
    table = pd.read_csv(tmp_path / "out" / "annotators.csv", index_col=[0, 1])
    assert len(table) == 4 * 3
    fit = ordinal.em(sim)
    # the table's mean is the mean of the EM's Beta approximation, alpha / (alpha + beta)
    a, b = fit["sensitivity_alpha"], fit["sensitivity_beta"]
    direct = (a / (a + b)).transpose("annotator", "threshold").to_series()
    np.testing.assert_allclose(table["sensitivity_mean"].to_numpy(), direct.to_numpy(),
                               atol=1e-9)
    assert np.all(table["sensitivity_lower"] <= table["sensitivity_mean"])
    items = pd.read_csv(tmp_path / "out" / "items.csv", index_col=0)
    truth = sim.gold_series().reindex(items.index)
    assert (items["estimated_label"] == truth).mean() > 0.8
    words = sim.to_frame()
    words["label"] = words["label"].map({1: "none", 2: "mild", 3: "moderate", 4: "severe"})
    words.to_csv(tmp_path / "words.csv", index=False)
    code = main(["fit", str(tmp_path / "words.csv"), "--model", "ordinal", "--method", "em",
                 "--out", str(tmp_path / "words")])
    assert code == 2
    assert "Recode the labels to 1..4 in their order" in capsys.readouterr().err


def test_fit_feature_accuracy_chooses_a_penalty_without_gold(tmp_path, capsys):
    import re

    from crowd_models.models import feature_accuracy

    sim = feature_accuracy.simulate(200, n_features=6, rng=np.random.default_rng(4))
    sim.to_frame().to_csv(tmp_path / "labels.csv", index=False)
    names = [f"x{k}" for k in range(6)]
    pd.DataFrame(sim.features, index=pd.Index(sim.items, name="item"), columns=names).to_csv(
        tmp_path / "features.csv")
    out = tmp_path / "out"
    code = main(["fit", str(tmp_path / "labels.csv"), "--features", str(tmp_path / "features.csv"),
                 "--model", "feature-accuracy", "--method", "em", "--penalty", "0.5,4",
                 "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    chosen = float(re.search(r"chosen penalty: (\S+)", printed).group(1))
    # the CLI's choice is select_penalty's (tested against a score computed from scratch
    # in test_selection.py), with the CLI's settings
    from crowd_models.selection import select_penalty

    assert chosen == select_penalty(sim, [0.5, 4.0], rng=0, n_restarts=5).penalty
    assert "non-zero coefficients at the mode: coef" in printed
    # the report is the family's, for the chosen penalty
    fit = feature_accuracy.em(sim, penalty=chosen)
    table = pd.read_csv(out / "annotators.csv", index_col=0)
    expected = feature_accuracy.annotator_summary(fit, annotations=sim)
    np.testing.assert_allclose(table["accuracy_mean"], expected["accuracy_mean"], rtol=1e-9)
    coefficients = pd.read_csv(out / "coefficients.csv", index_col=0)
    assert list(coefficients.index) == names
    np.testing.assert_allclose(coefficients["coef_mean"], fit["coef"].values[0, 0], atol=1e-12)
    # the simulated accuracy depends on the last two features, with signs (-, +)
    assert coefficients["accuracy_coef_mean"].iloc[-2] < -0.5
    assert coefficients["accuracy_coef_mean"].iloc[-1] > 0.5
    items = pd.read_csv(out / "items.csv", index_col=0)
    assert np.mean(items["estimated_label"].to_numpy() == sim.gold) > 0.8


def test_help_and_loaders_do_not_import_pymc():
    import subprocess
    import sys

    code = ("import sys, contextlib, io\n"
            "import crowd_models as cm\n"
            "from crowd_models.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "    main(['fit', '--help'])\n"
            "ann = cm.datasets.load_rte()\n"
            "assert 'pymc' not in sys.modules, 'pymc imported'\n"
            "assert cm.fit_map.__module__ == 'crowd_models.inference'\n"
            "assert 'pymc' in sys.modules\n"
            "from crowd_models.models import MODEL_NAMES, MODELS\n"
            "assert list(MODELS) == list(MODEL_NAMES)\n"
            "try:\n"
            "    cm.fit_mpa\n"
            "except AttributeError as err:\n"
            "    assert 'fit_mpa' in str(err)\n"
            "else:\n"
            "    raise AssertionError('no AttributeError')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]


# ------------------------------------------------- gold, separators, variants
@pytest.fixture(scope="module")
def small_csv(tmp_path_factory):
    """A small binary data set with gold, as labels, TSV, gold file and gold column."""
    sim = two_coin.simulate(sensitivity=[0.9, 0.8, 0.7, 0.75], specificity=[0.9, 0.85, 0.7, 0.8],
                            n_items=80, rng=np.random.default_rng(3))
    folder = tmp_path_factory.mktemp("cli_small")
    frame = sim.to_frame()
    frame.to_csv(folder / "labels.csv", index=False)
    frame.to_csv(folder / "labels.tsv", index=False, sep="\t")
    frame.assign(truth=sim.gold[frame["item"].to_numpy()]).to_csv(folder / "with_gold.csv",
                                                                  index=False)
    gold = pd.DataFrame({"item": sim.items, "gold": sim.gold})
    pd.concat([gold, pd.DataFrame({"item": [1000, 1001], "gold": [0, 1]})]).to_csv(
        folder / "gold.csv", index=False)
    return folder, sim


def _warning_lines(err):
    return [line for line in err.splitlines() if line.startswith("warning: ")]


def test_gold_file_scores_the_fit_and_the_annotators(small_csv, capsys):
    import re

    from crowd_models import report

    folder, sim = small_csv
    out = folder / "gold_em"
    code = main(["fit", str(folder / "labels.csv"), "--method", "em", "--gold",
                 str(folder / "gold.csv"), "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    # gold with ids that have no labels is fine: the parser's warning is one line
    # (the ids as the files write them: text)
    warned = _warning_lines(captured.err)
    assert warned == ["warning: gold holds 2 item id(s) that have no labels (e.g. '1000', "
                      "'1001'); they are ignored."]
    assert "UserWarning" not in captured.err and ".py:" not in captured.err
    fit = two_coin.em(sim)
    expected = report.accuracy(fit, sim)
    printed = float(re.search(r"accuracy against gold \(80 items\): (\S+)", captured.out)[1])
    assert printed == pytest.approx(expected, abs=5e-5)
    confusion = pd.read_csv(out / "gold_confusion.csv", index_col=0)
    assert confusion.index.name == "gold" and list(confusion.columns) == ["0", "1"]
    assert confusion.to_numpy().sum() == 80
    assert np.trace(confusion.to_numpy()) / 80 == pytest.approx(expected)
    items = pd.read_csv(out / "items.csv", index_col=0)
    np.testing.assert_array_equal(items["gold"].to_numpy(), sim.gold)
    # per annotator: the rates measured on the gold items beside the estimates
    table = pd.read_csv(out / "annotators.csv", index_col=0)
    frame = sim.to_frame()
    frame["gold"] = sim.gold[frame["item"].to_numpy()]
    by = frame.groupby("annotator")
    measured = by.apply(lambda d: np.mean(d["label"] == d["gold"]), include_groups=False)
    np.testing.assert_allclose(table["gold_accuracy"], measured.reindex(table.index))
    sens = by.apply(lambda d: np.mean(d.loc[d["gold"] == 1, "label"] == 1), include_groups=False)
    np.testing.assert_allclose(table["gold_sensitivity"], sens.reindex(table.index))
    assert (table["n_gold_labels"] == by.size().reindex(table.index)).all()
    columns = list(table.columns)
    assert columns.index("gold_sensitivity") == columns.index("sensitivity_upper") + 1
    assert columns.index("gold_specificity") == columns.index("specificity_upper") + 1
    assert columns[-2:] == ["n_labels", "n_gold_labels"]


def test_gold_column_gives_the_same_report_as_a_gold_file(small_csv, capsys):
    folder, _ = small_csv
    code = main(["fit", str(folder / "with_gold.csv"), "--method", "em", "--gold-column",
                 "truth", "--out", str(folder / "gold_column")])
    assert code == 0, capsys.readouterr().err
    if not (folder / "gold_em").exists():
        assert main(["fit", str(folder / "labels.csv"), "--method", "em", "--gold",
                     str(folder / "gold.csv"), "--out", str(folder / "gold_em")]) == 0
    for name in ("annotators.csv", "items.csv", "gold_confusion.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(folder / "gold_column" / name),
                                      pd.read_csv(folder / "gold_em" / name))


def test_sep_reads_tabs_written_as_backslash_t(small_csv, capsys):
    folder, sim = small_csv
    # the gold file keeps its commas: its header does not hold a tab
    code = main(["fit", str(folder / "labels.tsv"), "--sep", "\\t", "--method", "em",
                 "--gold", str(folder / "gold.csv"), "--out", str(folder / "tsv")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "accuracy against gold (80 items)" in captured.out
    table = pd.read_csv(folder / "tsv" / "annotators.csv", index_col=0)
    expected = report_of(two_coin.em(sim))
    np.testing.assert_allclose(table["sensitivity_mean"], expected["sensitivity_mean"])


def report_of(fit):
    from crowd_models import report

    return report.annotator_summary(fit)


def test_strip_merges_ids_that_differ_in_whitespace(tmp_path, capsys):
    frame = pd.DataFrame({"item": [1, 1, 2, 2, 3, 3, 4, 4] * 2,
                          "annotator": ["a", "b ", "a ", "b", "a", "b", "a", "b"] * 2,
                          "label": ["yes", "no", "yes", "yes", "no", "no", "yes", "no"] * 2})
    frame.to_csv(tmp_path / "spaced_ids.csv", index=False)
    assert main(["fit", str(tmp_path / "spaced_ids.csv"), "--method", "em", "--out",
                 str(tmp_path / "kept")]) == 0
    captured = capsys.readouterr()
    warned = _warning_lines(captured.err)
    assert any("differ only in surrounding whitespace" in w and
               w.endswith("(on the command line: --strip)") for w in warned), warned
    assert "4 annotators" in captured.out
    frame["label"] = ["yes", "no", " yes", "yes", "no", "no ", "yes", "no"] * 2
    frame.to_csv(tmp_path / "spaced.csv", index=False)
    code = main(["fit", str(tmp_path / "spaced.csv"), "--method", "em", "--strip", "--classes",
                 "no, yes", "--out", str(tmp_path / "stripped")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert not any("whitespace" in w for w in _warning_lines(captured.err))
    assert "2 annotators" in captured.out and "['no', 'yes']" in captured.out
    items = pd.read_csv(tmp_path / "stripped" / "items.csv", index_col=0)
    assert set(items.columns[:4]) == {"estimated_label", "estimated_prob", "entropy", "n_labels"}
    assert {"prob_no", "prob_yes"} <= set(items.columns)


def test_priors_and_variants_reach_the_family(small_csv, capsys):
    from crowd_models import report
    from crowd_models.models import dawid_skene

    folder, sim = small_csv
    code = main(["fit", str(folder / "labels.csv"), "--method", "em", "--sensitivity-prior",
                 "2,2", "--specificity-prior", "4,1.5", "--prevalence-prior", "3,3",
                 "--out", str(folder / "priors")])
    assert code == 0, capsys.readouterr().err
    fit = two_coin.em(sim, sensitivity_prior=(2, 2), specificity_prior=(4, 1.5),
                      prevalence_prior=(3, 3))
    table = pd.read_csv(folder / "priors" / "annotators.csv", index_col=0)
    expected = report.annotator_summary(fit)
    np.testing.assert_allclose(table["specificity_mean"], expected["specificity_mean"])
    assert np.abs(table["specificity_mean"] - report_of(two_coin.em(sim))[
        "specificity_mean"]).max() > 1e-3  # the prior changed the fit
    code = main(["fit", str(folder / "labels.csv"), "--model", "dawid-skene", "--variant",
                 "one-coin", "--accuracy-prior", "2,2", "--method", "em",
                 "--out", str(folder / "one_coin")])
    assert code == 0, capsys.readouterr().err
    fit = dawid_skene.em(sim, variant="one_coin", accuracy_prior=(2, 2))
    table = pd.read_csv(folder / "one_coin" / "annotators.csv", index_col=0)
    np.testing.assert_allclose(table["accuracy_mean"],
                               report.annotator_summary(fit)["accuracy_mean"])


def test_continuous_priors_and_gold_rmse(continuous_csv, capsys):
    from crowd_models.models import continuous

    folder, sim = continuous_csv
    frame = pd.DataFrame({"item": sim.items, "gold": sim.gold})
    frame.to_csv(folder / "gold.csv", index=False)
    out = folder / "priors"
    code = main(["fit", str(folder / "ratings.csv"), "--continuous", "--bias", "--bias-sd",
                 "0.5", "--precision-prior", "3,0.2", "--method", "em", "--gold",
                 str(folder / "gold.csv"), "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "against gold (200 items): correlation" in captured.out
    fit = continuous.em(sim, bias=True, bias_sd=0.5, precision_prior=(3, 0.2))
    items = pd.read_csv(out / "items.csv", index_col=0)
    np.testing.assert_allclose(items["mean"], fit["true_value"].values.ravel())
    assert list(items.columns) == ["mean", "sd", "lower", "upper", "n_labels", "gold"]
    table = pd.read_csv(out / "annotators.csv", index_col=0)
    long = sim.to_frame()
    long["gold"] = sim.gold[sim.item_idx]
    rmse = long.groupby("annotator").apply(
        lambda d: np.sqrt(np.mean((d["label"] - d["gold"]) ** 2)), include_groups=False)
    np.testing.assert_allclose(table["gold_rmse"], rmse.reindex(table.index))
    assert not (out / "gold_confusion.csv").exists()


def test_help_lists_every_option_with_the_family_defaults(capsys):
    import inspect

    from crowd_models import cli
    from crowd_models.models import MODELS, continuous, dawid_skene, item_difficulty, ordinal

    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag in ("--sep", "--strip", "--variant", "--gold", "--gold-item", "--gold-label",
                 "--gold-column", "--force", *(p.flag for p in cli.PRIORS)):
        assert flag in text, flag
    assert "default: two-coin" in text and "(default: 1000)" in text
    # the variants are the families' own
    assert set(cli.VARIANTS["dawid-skene"]) == set(dawid_skene.VARIANTS)
    assert cli.VARIANTS["dawid-skene"][0] == "full"  # the default, as in dawid_skene.em
    assert cli.VARIANTS["ordinal"] == ordinal.VARIANTS
    assert cli.VARIANTS["item-difficulty"] == item_difficulty.VARIANTS
    assert cli.VARIANTS["continuous"] == continuous.NOISES
    # every default shown in --help is the family's
    documented_none = {("prevalence_prior", "ordinal/cumulative"): (2.0, 2.0),
                       ("prevalence_prior", "ordinal/latent"): 2.0,
                       **{(name, f"item-difficulty/{variant}"): item_difficulty.DEFAULT_PRIORS[name]
                          for name in ("bias_sd", "difficulty_sd")
                          for variant in item_difficulty.IRT_VARIANTS}}
    for prior in cli.PRIORS:
        for key, (_, _, shown) in prior.where.items():
            model = key.partition("/")[0]
            assert f"{shown}" in cli._prior_help(prior)
            default = inspect.signature(MODELS[model].build_model).parameters[prior.name].default
            if default is None:
                default = documented_none.get((prior.name, key))
            if prior.name == "confusion_prior":  # None: 3 on the diagonal, 1 + 1/(K-1) off it
                assert shown == "3,1+1/(K-1)"
                continue
            if prior.name == "spread":  # None: dawid_skene.empirical_spread
                assert default is None and shown == "empirical Bayes"
                continue
            if default == "auto":  # coef_precision of two-coin and dawid-skene
                assert shown == "auto" and prior.name == "coef_precision", (prior.name, key)
                continue
            numbers = [float(v) for v in shown.split(",")]
            assert numbers == list(np.atleast_1d(default)), (prior.name, key)


def test_variants_without_em_are_the_families_without_em():
    from crowd_models import cli
    from crowd_models.models import MODELS, continuous

    binary = two_coin.simulate(sensitivity=[0.9, 0.8, 0.7], specificity=[0.9, 0.8, 0.7],
                               n_items=20, rng=np.random.default_rng(0))
    values = continuous.simulate([1.0, 2.0, 3.0], n_items=20, rng=np.random.default_rng(0))
    for model, variant in cli.WITHOUT_EM:
        keyword = cli._VARIANT_KEYWORD[model]
        with pytest.raises(ValueError, match="no EM"):
            MODELS[model].em(values if model == "continuous" else binary, **{keyword: variant})
    for model, variants in cli.VARIANTS.items():  # the others have one
        for variant in variants:
            if (model, variant) not in cli.WITHOUT_EM:
                data = values if model == "continuous" else binary
                fit = MODELS[model].em(data, **{cli._VARIANT_KEYWORD[model]: variant})
                assert "item_class_prob" in fit or "true_value" in fit


def test_warnings_during_a_fit_are_one_line_each(tmp_path, capsys):
    # every item has one label: the families warn that quality is not identified
    frame = pd.DataFrame({"item": range(12), "annotator": ["a", "b", "c"] * 4,
                          "label": [0, 1] * 6})
    frame.to_csv(tmp_path / "one.csv", index=False)
    code = main(["fit", str(tmp_path / "one.csv"), "--method", "em", "--out",
                 str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 0
    lines = err.strip().splitlines()
    assert lines and all(line.startswith("warning: ") for line in lines), err
    assert any("every item has one label" in line for line in lines)
    assert "UserWarning" not in err and "warnings.warn" not in err and ".py:" not in err


# -------------------------------------------------------------- the fit file
def test_fit_file_records_family_variant_priors_and_version(small_csv, capsys):
    import importlib.metadata
    import json

    folder, _ = small_csv
    out = folder / "recorded"
    code = main(["fit", str(folder / "labels.csv"), "--model", "dawid-skene", "--variant",
                 "full", "--confusion-prior", "4,1", "--method", "em", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    with xr.open_dataset(out / "fit.nc", engine="h5netcdf") as saved:
        attrs = dict(saved.attrs)
    assert attrs["crowd_models_version"] == importlib.metadata.version("crowd_models")
    assert attrs["family"] == "dawid_skene" and attrs["variant"] == "full"
    assert attrs["method"] == "em"
    priors = json.loads(attrs["priors"])
    assert priors["confusion_prior"] == [4.0, 1.0]
    assert priors["accuracy_prior"] == [3.0, 2.0]  # the family's default, recorded
    assert "priors" in json.loads(attrs["json_attrs"])
    assert "--confusion-prior 4,1" in attrs["command"]


def test_list_attrs_survive_the_netcdf_round_trip(tmp_path):
    """label_switched_chains: an empty list or a list of ints comes back as the
    same list (netCDF alone gives an empty float array / an int array)."""
    import json

    from crowd_models import cli

    post = xr.Dataset({"x": (("chain", "draw"), np.zeros((3, 2)))})
    for switched in ([], [0, 2]):
        tree = xr.DataTree.from_dict({"posterior": post})
        tree.attrs = {"label_switched_chains": switched, "flipped_chains": [], "seconds": 1.5}
        path = tmp_path / f"fit{len(switched)}.nc"
        cli._write_fit(tree, path, {"family": "two_coin", "priors": {"a": (1.0, 2.0)}})
        with xr.open_datatree(path, engine="h5netcdf") as saved:
            attrs = dict(saved.attrs)
        back = json.loads(attrs["label_switched_chains"])
        assert back == switched and all(type(c) is int for c in back)
        assert json.loads(attrs["flipped_chains"]) == []
        assert json.loads(attrs["priors"]) == {"a": [1.0, 2.0]}
        assert sorted(json.loads(attrs["json_attrs"])) == ["flipped_chains",
                                                            "label_switched_chains", "priors"]
        assert attrs["seconds"] == 1.5
        assert tree.attrs["label_switched_chains"] == switched  # the fit itself is untouched


def test_nuts_diagnostics_are_arviz_s(tmp_path):
    import arviz as az

    from crowd_models import cli

    rng = np.random.default_rng(1)
    good = rng.normal(size=(2, 50, 3))
    shifted = rng.normal(size=(2, 50)) + np.array([[0.0], [3.0]])  # chains disagree
    post = xr.Dataset({"good": (("chain", "draw", "x"), good),
                       "shifted": (("chain", "draw"), shifted),
                       "fixed": (("chain", "draw"), np.ones((2, 50)))},
                      coords={"chain": [0, 1], "draw": np.arange(50)})
    stats = xr.Dataset({"diverging": (("chain", "draw"), np.eye(2, 50, dtype=bool))})
    tree = xr.DataTree.from_dict({"posterior": post, "sample_stats": stats})
    tree.attrs["label_switched_chains"] = [1]
    diag = cli.nuts_diagnostics(tree)
    assert diag["max_rhat_variable"] == "shifted"
    assert diag["max_rhat"] == pytest.approx(float(az.rhat(post[["shifted"]])["shifted"]))
    ess = az.ess(post[["good", "shifted"]], method="bulk")
    assert diag["min_ess_bulk"] == pytest.approx(min(float(ess["good"].min()),
                                                     float(ess["shifted"])))
    assert diag["divergences"] == 2 and diag["label_switched_chains"] == [1]


@pytest.mark.slow
def test_fit_nuts_prints_and_records_the_diagnostics(small_csv, capsys):
    import json
    import re

    import arviz as az

    folder, _ = small_csv
    out = folder / "nuts"
    code = main(["fit", str(folder / "labels.csv"), "--method", "nuts", "--draws", "30",
                 "--tune", "30", "--chains", "2", "--seed", "3", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    line = next(x for x in captured.out.splitlines() if x.startswith("NUTS: "))
    found = re.match(r"NUTS: max r-hat (\S+) \((\w+)\), min bulk ESS (\S+) \((\w+)\), (\d+) "
                     r"divergences, label-switched chains: (.+)$", line)
    assert found, line
    with xr.open_datatree(out / "fit.nc", engine="h5netcdf") as saved:
        attrs = dict(saved.attrs)
        rhat = az.rhat(saved.posterior.to_dataset())
        divergences = int(saved.sample_stats["diverging"].values.sum())
    assert float(found[1]) == pytest.approx(float(rhat[found[2]].max()), abs=5e-4)
    assert attrs["max_rhat"] == pytest.approx(float(found[1]), abs=5e-4)
    assert int(found[5]) == divergences == attrs["divergences"]
    switched = json.loads(attrs["label_switched_chains"])
    assert isinstance(switched, list)
    assert found[6] == (str(switched) if switched else "none")
    assert attrs["method"] == "nuts" and attrs["chains"] == 2 and attrs["random_seed"] == 3
    # the one documented call reloads it for every report function
    reloaded = cm.open_fit(out / "fit.nc")
    assert reloaded.attrs["label_switched_chains"] == switched
    table = pd.read_csv(out / "annotators.csv", index_col=0)
    again = cm.report.annotator_summary(reloaded).reindex(table.index)
    np.testing.assert_allclose(again["sensitivity_mean"], table["sensitivity_mean"], atol=1e-9)


@pytest.mark.slow
def test_variants_without_em_fit_by_map(tmp_path, capsys):
    import crowd_models as cm
    from crowd_models.models import dawid_skene

    conf = np.stack([np.full((3, 3), 0.1) + np.eye(3) * 0.7] * 4)
    sim = dawid_skene.simulate(conf, n_items=60, classes=["cat", "dog", "fox"],
                               rng=np.random.default_rng(8))
    sim.to_frame().to_csv(tmp_path / "labels.csv", index=False)
    out = tmp_path / "hier"
    code = main(["fit", str(tmp_path / "labels.csv"), "--model", "dawid-skene", "--variant",
                 "hierarchical", "--spread-prior", "0.5", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "[1/3] reading" in captured.out and "EM (reference fit)" not in captured.out
    fit = cm.fit_map(dawid_skene.build_model(sim, variant="hierarchical", spread_prior=0.5))
    items = pd.read_csv(out / "items.csv", index_col=0)
    np.testing.assert_allclose(items["prob_dog"],
                               fit.posterior["item_class_prob"].sel(true_class="dog").values[0, 0],
                               atol=1e-6)
    with xr.open_datatree(out / "fit.nc", engine="h5netcdf") as saved:
        assert saved.attrs["variant"] == "hierarchical"


# ------------------------------------------------------------ report.item_table
def test_item_table_of_an_em_fit():
    from crowd_models import report

    sim = two_coin.simulate(sensitivity=[0.9, 0.8, 0.7], specificity=[0.9, 0.8, 0.7],
                            n_items=30, rng=np.random.default_rng(2))
    frame = sim.to_frame()
    frame["label"] = frame["label"].map({0: "neg", 1: "pos"})
    frame = frame.iloc[:-1]  # one item has one label fewer
    import crowd_models as cm

    ann = cm.Annotations.from_frame(frame, gold=dict(zip(sim.items, np.where(
        sim.gold == 1, "pos", "neg"), strict=True)))
    fit = two_coin.em(ann)
    table = report.item_table(fit, ann)
    probs = fit["item_class_prob"].values[0, 0]
    assert table.index.name == "item" and list(table.index) == list(ann.items)
    np.testing.assert_array_equal(table["estimated_label"],
                                  np.where(probs[:, 1] > probs[:, 0], "pos", "neg"))
    np.testing.assert_allclose(table["estimated_prob"], probs.max(axis=1))
    np.testing.assert_allclose(table["entropy"], -(probs * np.log(probs)).sum(axis=1))
    np.testing.assert_allclose(table[["prob_neg", "prob_pos"]].to_numpy(), probs)
    counts = frame.groupby("item").size().reindex(ann.items)
    assert table["n_labels"].tolist() == counts.tolist() and sorted(set(counts)) == [2, 3]
    assert (table["gold"] == np.where(sim.gold == 1, "pos", "neg")).all()
    bare = report.item_table(fit)  # without annotations: the EM Dataset has no counts
    assert bare["n_labels"].isna().all() and "gold" not in bare
    pd.testing.assert_frame_equal(bare.drop(columns="n_labels"),
                                  table.drop(columns=["n_labels", "gold"]))


def test_item_table_of_draws_averages_them_and_reads_constant_data():
    from crowd_models import report

    probs = np.array([[[[0.9, 0.1], [0.5, 0.5]], [[0.7, 0.3], [0.5, 0.5]]],
                      [[[0.8, 0.2], [0.0, 1.0]], [[0.6, 0.4], [0.0, 1.0]]]])  # chain, draw
    post = xr.Dataset({"item_class_prob": (("chain", "draw", "item", "true_class"), probs)},
                      coords={"item": ["u", "v"], "true_class": ["a", "b"]})
    const = xr.Dataset({"item_idx": ("annotation", np.array([0, 1, 1, 0, 1]))})
    tree = xr.DataTree.from_dict({"posterior": post, "constant_data": const})
    table = report.item_table(tree)
    np.testing.assert_allclose(table["prob_a"], [0.75, 0.25])
    assert table["estimated_label"].tolist() == ["a", "b"]
    np.testing.assert_allclose(table["estimated_prob"], [0.75, 0.75])
    expected = -(0.75 * np.log(0.75) + 0.25 * np.log(0.25))
    np.testing.assert_allclose(table["entropy"], [expected, expected])
    assert table["n_labels"].tolist() == [2, 3]
    certain = xr.DataTree.from_dict({"posterior": post.isel(chain=[1], draw=[0])})
    assert report.item_table(certain)["entropy"].iloc[1] == 0.0  # 0 log 0 = 0


def test_item_table_of_a_continuous_fit_and_bad_calls(continuous_csv):
    from crowd_models import report
    from crowd_models.models import continuous

    _, sim = continuous_csv
    fit = continuous.em(sim)
    table = report.item_table(fit, sim)
    summary = report.true_value_summary(fit, annotations=sim)
    pd.testing.assert_frame_equal(table.drop(columns="n_labels"), summary)
    assert (table["n_labels"] == np.bincount(sim.item_idx)).all()
    with pytest.raises(ValueError, match="continuous fit"):
        report.item_table(fit, two_coin.simulate(sensitivity=[0.9, 0.8], specificity=[0.9, 0.8],
                                                 n_items=5, rng=np.random.default_rng(0)))
    with pytest.raises(ValueError, match="neither item_class_prob"):
        report.item_table(fit[["precision"]])
    other = two_coin.simulate(sensitivity=[0.9, 0.8, 0.7], specificity=[0.9, 0.8, 0.7],
                              n_items=10, rng=np.random.default_rng(0))
    small = two_coin.em(other)
    with pytest.raises(ValueError, match="not the annotations' 9 items"):
        report.item_table(small, other.select(other.item_idx < 9))


@pytest.mark.slow
def test_item_table_of_a_map_fit_counts_labels_from_constant_data():
    import crowd_models as cm
    from crowd_models import report

    sim = two_coin.simulate(sensitivity=[0.9, 0.8, 0.7], specificity=[0.9, 0.8, 0.7],
                            n_items=40, rng=np.random.default_rng(4))
    sim = sim.select(np.arange(sim.n_annotations) != 0)  # item 0 has 2 labels
    fit = cm.fit_map(two_coin.build_model(sim))
    table = report.item_table(fit)
    assert table["n_labels"].tolist() == np.bincount(sim.item_idx).tolist()
    pd.testing.assert_frame_equal(table, report.item_table(fit, sim).drop(columns="gold"))


@pytest.mark.validate  # two NUTS fits with their compiles
def test_fit_auto_by_loo_scores_nuts_fits_of_the_eligible_candidates(tmp_path, capsys):
    import json

    from crowd_models.models import spammer

    rng = np.random.default_rng(4)
    sim = spammer.simulate([0.9, 0.8, 0.7, 0.7, 0.0, 0.0], spam_share=[[0.5, 0.5]] * 4
                           + [[0.9, 0.1]] * 2, n_items=60, labels_per_item=4, rng=rng)
    sim.to_frame().to_csv(tmp_path / "labels.csv", index=False)
    args = ["fit", str(tmp_path / "labels.csv"), "--model", "auto", "--criterion", "loo",
            "--method", "em", "--draws", "100", "--tune", "100", "--chains", "2", "--seed", "3"]
    assert main([*args, "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "PSIS-LOO" in printed and "high_k" in printed
    fit = xr.open_dataset(tmp_path / "out" / "fit.nc", engine="h5netcdf")
    ranking = json.loads(fit.attrs["ranking"])
    assert fit.attrs["criterion"] == "loo"
    assert {row["candidate"] for row in ranking} == {"spammer", "item_difficulty"}
    assert all(row["n_items"] == 60 for row in ranking)


def test_predict_writes_the_fits_predictions_for_new_items(labels_csv, tmp_path, capsys):
    """crowd-models predict: the classifier of a --features fit (its Laplace draws)
    on new items, the same numbers as cm.predict on the reloaded fit."""
    folder, sim = labels_csv
    report = tmp_path / "report"
    assert main(["fit", str(folder / "labels.csv"), "--item", "case", "--annotator", "reader",
                 "--label", "call", "--features", str(folder / "features.csv"),
                 "--out", str(report)]) == 0
    capsys.readouterr()
    new = pd.DataFrame(np.random.default_rng(3).standard_normal((40, 2)), columns=["size", "age"],
                       index=pd.Index([f"0{i}" for i in range(40)], name="case"))
    new.to_csv(tmp_path / "new.csv")
    out = tmp_path / "predictions.csv"
    assert main(["predict", str(report / "fit.nc"), str(tmp_path / "new.csv"),
                 "--out", str(out)]) == 0
    assert "40 items, 2 classes; 90% intervals over 1000 draws" in capsys.readouterr().out
    table = pd.read_csv(out, index_col=0, dtype={"case": str})
    assert table.index[0] == "00"  # ids as written
    expected = cm.predict(cm.open_fit(report / "fit.nc"), new)
    for stat in ("", "_lower", "_upper", "_best"):
        np.testing.assert_allclose(table[f"prob_1{stat}"], expected[f"prob{stat}"].values[:, 1])
    assert (table["estimated_label"] == (table["prob_1"] > 0.5).astype(int)).all()
    # the file is not replaced without --force; a fit without features has no classifier
    assert main(["predict", str(report / "fit.nc"), str(tmp_path / "new.csv"),
                 "--out", str(out)]) == 1
    assert "exists; pass --force" in capsys.readouterr().err
    plain = tmp_path / "plain"
    assert main(["fit", str(folder / "labels.csv"), "--item", "case", "--annotator", "reader",
                 "--label", "call", "--method", "em", "--out", str(plain)]) == 0
    capsys.readouterr()
    assert main(["predict", str(plain / "fit.nc"), str(tmp_path / "new.csv"), "--out",
                 str(tmp_path / "p2.csv")]) == 2
    assert "fitted without features. Refit with --features" in capsys.readouterr().err
    new.drop(columns="age").to_csv(tmp_path / "less.csv")
    assert main(["predict", str(report / "fit.nc"), str(tmp_path / "less.csv"), "--out",
                 str(tmp_path / "p3.csv")]) == 2
    assert "missing: ['age']" in capsys.readouterr().err
    assert main(["predict", str(report / "fit.nc"), str(tmp_path / "new.csv"), "--ci-prob",
                 "90"]) == 2
    assert "--ci-prob 90: give a probability strictly between 0 and 1" in (
        capsys.readouterr().err)


def test_predict_a_continuous_fits_true_values(tmp_path, capsys):
    from crowd_models.models import continuous

    sim = continuous.simulate([1.0, 2.0, 4.0], n_items=150, n_features=2, intercept=5.0,
                              rng=np.random.default_rng(9))
    sim.to_frame().to_csv(tmp_path / "ratings.csv", index=False)
    pd.DataFrame(sim.features, index=pd.Index(sim.items, name="item"),
                 columns=["x1", "x2"]).to_csv(tmp_path / "features.csv")
    assert main(["fit", str(tmp_path / "ratings.csv"), "--continuous", "--method", "em",
                 "--features", str(tmp_path / "features.csv"), "--out",
                 str(tmp_path / "report")]) == 0
    capsys.readouterr()
    new = pd.DataFrame(np.random.default_rng(1).standard_normal((10, 2)), columns=["x1", "x2"],
                       index=pd.Index([f"n{i}" for i in range(10)], name="item"))
    new.to_csv(tmp_path / "new.csv")
    assert main(["predict", str(tmp_path / "report" / "fit.nc"), str(tmp_path / "new.csv"),
                 "--out", str(tmp_path / "pred.csv")]) == 0
    assert "10 items, true values; 90% predictive intervals over 1 draw(s)" in (
        capsys.readouterr().out)
    table = pd.read_csv(tmp_path / "pred.csv", index_col=0)
    expected = cm.predict(cm.open_fit(tmp_path / "report" / "fit.nc"), new)
    for name in ("value", "value_sd", "value_lower", "value_upper"):
        np.testing.assert_allclose(table[name], expected[name].values)
    assert list(table.columns) == ["value", "value_sd", "value_lower", "value_upper"]
