"""The `crowd-models` command: fit a CSV, one-line errors, the demo."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from crowd_models.cli import main
from crowd_models.models import two_coin

from .conftest import RADIOLOGISTS


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
    assert "[1/4] reading" in printed and "annotator_0" in printed
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
        assert saved.log_likelihood["labels"].sizes["item"] == 300


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
    code = main(["fit", str(tmp_path / "labels.csv"), "--model", "dawid-skene",
                 "--method", "em", "--out", str(tmp_path / "out")])
    assert code == 0
    table = pd.read_csv(tmp_path / "out" / "annotators.csv", index_col=0)
    assert np.abs(table["accuracy_cat_mean"] - 0.8).max() < 0.12
    assert "accuracy_fox_upper" in capsys.readouterr().out
    assert (tmp_path / "out" / "annotators.png").stat().st_size > 0


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
    assert not (out / "annotators.png").exists()


def test_fit_continuous_via_model_name(continuous_csv, capsys):
    folder, _ = continuous_csv
    out = folder / "plain"
    assert main(["fit", str(folder / "ratings.csv"), "--model", "continuous",
                 "--method", "em", "--out", str(out)]) == 0
    table = pd.read_csv(out / "annotators.csv", index_col=0)
    assert "precision_mean" in table and "bias_mean" not in table


@pytest.mark.parametrize("args, message", [
    (["--continuous"], "column 'label' holds 1 non-numeric value\\(s\\), e.g. 'high'"),
    (["--model", "continuous"], "non-numeric value\\(s\\), e.g. 'high' \\(row 2\\)"),
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
    assert "missing or empty on 1 row" in capsys.readouterr().err


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
        assert saved.log_likelihood["labels"].sizes["item"] == 200


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
    direct = ordinal.em(sim)["sensitivity"].isel(chain=0, draw=0).to_series()
    np.testing.assert_allclose(table["sensitivity_mean"].to_numpy(), direct.to_numpy(),
                               atol=1e-9)
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
    assert chosen in (0.5, 4.0)
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
