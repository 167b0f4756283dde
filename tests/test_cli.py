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
