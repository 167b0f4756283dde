"""`crowd-models fit`: every bad input is one line on stderr and exit status 2,
found before any fitting; the output folder is never overwritten silently."""

import os
import re

import numpy as np
import pandas as pd
import pytest

from crowd_models.cli import main
from crowd_models.models import two_coin


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A small two-coin data set written in several shapes, and a few bad files."""
    folder = tmp_path_factory.mktemp("cli_input")
    sim = two_coin.simulate(sensitivity=[0.9, 0.8, 0.7, 0.75], specificity=[0.9, 0.85, 0.7, 0.8],
                            n_items=40, n_features=2, rng=np.random.default_rng(3))
    frame = sim.to_frame()
    frame.to_csv(folder / "labels.csv", index=False)
    frame.to_csv(folder / "labels.tsv", index=False, sep="\t")
    frame.to_csv(folder / "labels_semi.csv", index=False, sep=";")
    pd.DataFrame(sim.features, index=pd.Index(sim.items, name="item"),
                 columns=["a", "b"]).to_csv(folder / "features.csv")
    gold = pd.DataFrame({"item": sim.items, "gold": sim.gold})
    gold.to_csv(folder / "gold.csv", index=False)
    gold.rename(columns={"gold": "truth"}).to_csv(folder / "gold_truth.csv", index=False)
    pd.concat([gold, gold.iloc[:2]]).to_csv(folder / "gold_dup.csv", index=False)
    gold.assign(item=gold["item"].astype(float).where(gold.index != 3)).to_csv(
        folder / "gold_noid.csv", index=False)
    with_gold = frame.assign(truth=sim.gold[frame["item"].to_numpy()])
    with_gold.to_csv(folder / "labels_goldcol.csv", index=False)
    with_gold.assign(truth=np.where(with_gold.index == 0, 1 - with_gold["truth"],
                                    with_gold["truth"])).to_csv(
        folder / "labels_goldclash.csv", index=False)
    from crowd_models.models import continuous

    ratings = continuous.simulate([1.0, 2.0, 4.0], n_items=30, rng=np.random.default_rng(4))
    ratings.to_frame().to_csv(folder / "ratings.csv", index=False)
    pd.DataFrame({"item": [1, 1, 2, 2, 3, 3], "annotator": ["a", "b"] * 3,
                  "label": ["x", "y", "z", "x", "y", "z"]}).to_csv(folder / "three.csv",
                                                                  index=False)
    levels = frame.assign(label=frame["label"].map({0: "low", 1: "high"}))
    levels.to_csv(folder / "words.csv", index=False)
    gold.assign(gold=gold["gold"].astype(object).where(gold.index != 2, "maybe")).to_csv(
        folder / "gold_maybe.csv", index=False)
    gold.assign(item=gold["item"] + 1000).to_csv(folder / "gold_other.csv", index=False)
    gold.assign(item="id" + gold["item"].astype(str)).to_csv(folder / "gold_text.csv",
                                                             index=False)
    (folder / "empty.csv").write_text("")
    (folder / "a_folder").mkdir()
    (folder / "afile.txt").write_text("not a folder\n")
    return folder


EM = ["--method", "em"]
NUTS = ["--method", "nuts"]
CASES = [
    # (argv after "fit", regex of the message)
    (["a_folder"], r"labels file '.*a_folder' is a directory; give the CSV file itself"),
    # every input file is checked before any is parsed
    (["empty.csv", *EM, "--features", "nofeatures.csv"],
     r"features file '.*nofeatures.csv' does not exist"),
    (["labels.csv", *EM, "--features", "a_folder"], r"features file '.*a_folder' is a directory"),
    (["labels.csv", *EM, "--gold", "nogold.csv"], r"gold file '.*nogold.csv' does not exist"),
    (["labels.csv", *EM, "--classes", "0,,1"], r"--classes '0,,1' has an empty entry \(entry 2"),
    (["labels.csv", *EM, "--classes", "0,1,"], r"has an empty entry \(entry 3 of 3\)"),
    (["labels.csv", *EM, "--classes", "0,1,0"], r"--classes '0,1,0' names '0' twice"),
    (["labels.csv", *EM, "--classes", "1"], r"--classes '1' names one class; give at least two"),
    (["labels.csv", *EM, "--classes", "0,yes"],
     r"column 'label' holds numbers, so each class must be a number; 'yes' is not"),
    (["labels.csv", *EM, "--classes", "1,1.0"], r"names the number '1' twice"),
    (["labels.csv", *NUTS, "--draws", "0"], r"--draws must be a positive integer .*got 0"),
    (["labels.csv", *NUTS, "--chains", "0"], r"--chains must be a positive integer"),
    (["labels.csv", *NUTS, "--chains", "-1"], r"--chains must be a positive integer .*got -1"),
    (["labels.csv", *NUTS, "--tune", "-5"], r"--tune must be 0 or more .*got -5"),
    (["labels.csv", *NUTS, "--seed", "-3"], r"--seed must be 0 or more"),
    (["labels.csv", *NUTS, "--draws", "ten"],
     r"argument --draws: invalid int value: 'ten' \(see 'crowd-models fit --help'\)"),
    (["labels.csv", *EM, "--draws", "100"], r"--draws applies to --method nuts, not --method em"),
    (["labels.csv", "--chains", "2"], r"--chains applies to --method nuts, not --method map"),
    (["labels.csv", *EM, "--seed", "3"],
     r"--seed applies to --method nuts or map, not --method em"),
    (["labels.csv", "--model", "three-coin"], r"argument --model: invalid choice: 'three-coin'"),
    (["labels.csv", *EM, "--sep", "::"], r"--sep '::': give one character"),
    (["labels.csv", *EM, "--sep", ""], r"--sep '': give one character"),
    (["labels_semi.csv", *EM],
     r"column 'item' \(the item column\) is not in the labels; the file was read as one column "
     r"named 'item;annotator;label', so it is probably separated by ';': pass --sep ';'"),
    (["labels.tsv", *EM], r"probably separated by '\\t': pass --sep '\\t'"),
    (["labels.csv", *EM, "--variant", "full"], r"--model two-coin has no variants"),
    (["labels.csv", *EM, "--model", "dawid-skene", "--variant", "latent"],
     r"--variant 'latent' is not a variant of --model dawid-skene; choose one of full, "
     r"one_coin, hierarchical, pooled"),
    (["labels.csv", *EM, "--model", "dawid-skene", "--variant", "hierarchical"],
     r"--variant hierarchical of --model dawid-skene has no EM; use --method map"),
    (["labels.csv", *EM, "--model", "ordinal", "--variant", "latent"],
     r"--variant latent of --model ordinal has no EM"),
    (["ratings.csv", *EM, "--continuous", "--variant", "student_t"],
     r"--variant student_t of --model continuous has no EM"),
    (["labels.csv", *EM, "--confusion-prior", "3,1"],
     r"--confusion-prior applies to --model dawid-skene --variant full, not --model two-coin"),
    (["labels.csv", *EM, "--model", "dawid-skene", "--accuracy-prior", "3,2"],
     r"--accuracy-prior applies to --model dawid-skene --variant one_coin, not --model "
     r"dawid-skene --variant full"),
    (["labels.csv", *EM, "--model", "dawid-skene", "--sensitivity-prior", "3,2"],
     r"--sensitivity-prior applies to --model two-coin or --model ordinal --variant "
     r"cumulative, not --model dawid-skene --variant full"),
    (["labels.csv", *EM, "--sensitivity-prior", "0.5,2"],
     r"--sensitivity-prior '0.5,2': a Beta prior needs A >= 1 and B >= 1"),
    (["labels.csv", *EM, "--sensitivity-prior", "3"],
     r"--sensitivity-prior '3': give 2 numbers separated by a comma, e.g. "
     r"--sensitivity-prior 3,2; got 1"),
    (["labels.csv", *EM, "--specificity-prior", "a,b"],
     r"--specificity-prior 'a,b': give numbers separated by commas"),
    (["labels.csv", *EM, "--specificity-prior", "inf,2"], r"the numbers must be finite"),
    (["labels.csv", *EM, "--features", "features.csv", "--prevalence-prior", "2,2"],
     r"--prevalence-prior does not apply with --features"),
    (["labels.csv", *EM, "--coef-precision", "2"],
     r"--coef-precision applies with --features only"),
    (["labels.csv", *EM, "--model", "dawid-skene", "--features", "features.csv",
      "--coef-precision", "0"], r"--coef-precision '0': it must be 'auto' or a number > 0"),
    (["labels.csv", *EM, "--model", "dawid-skene", "--variant", "full",
      "--confusion-prior", "0.5,1"],
     r"Dirichlet pseudo-counts must be >= 1"),
    (["ratings.csv", *EM, "--continuous", "--bias-sd", "2"],
     r"--bias-sd applies with --bias .*; add --bias"),
    (["ratings.csv", *EM, "--continuous", "--scale-sd", "2"], r"--scale-sd applies with --scale"),
    (["ratings.csv", *EM, "--continuous", "--precision-prior", "2,0"],
     r"--precision-prior '2,0': a Gamma prior needs SHAPE >= 1 and RATE >= 0, and RATE > 0 "
     r"unless SHAPE is 1"),
    (["ratings.csv", "--continuous", "--nu", "3"],
     r"--nu applies to --model continuous --variant student_t, not --model continuous "
     r"--variant gaussian"),
    (["labels.csv", "--model", "ordinal", "--variant", "latent", "--noise-prior", "2,0"],
     r"--noise-prior '2,0': SHAPE and RATE must be > 0"),
    (["labels.csv", *EM, "--gold", "gold.csv", "--gold-column", "truth"],
     r"either as a file \(--gold\) or as a column of the labels \(--gold-column\), not both"),
    (["labels.csv", *EM, "--gold-label", "gold"],
     r"--gold-label names a column of the gold file; add --gold"),
    (["labels.csv", *EM, "--gold", "gold_truth.csv"],
     r"gold file '.*gold_truth.csv' has no column 'gold' or 'label' for the gold labels; name "
     r"it with --gold-label \(its columns are item, truth\)"),
    (["labels.csv", *EM, "--gold", "gold.csv", "--gold-item", "case"],
     r"gold file '.*gold.csv' has no column 'case' for the item ids"),
    (["labels.csv", *EM, "--gold", "gold.csv", "--gold-label", "label"],
     r"gold file '.*gold.csv' has no column 'label' \(--gold-label\)"),
    (["labels.csv", *EM, "--gold", "gold_dup.csv"],
     r"gold file '.*gold_dup.csv' lists item\(s\) 0, 1 more than once"),
    (["labels.csv", *EM, "--gold", "gold_noid.csv"],
     r"gold file '.*gold_noid.csv' has no item id on 1 row\(s\), e.g. line\(s\) 5"),
    (["labels.csv", *EM, "--gold-column", "truth"],
     r"--gold-column 'truth' is not a column of the labels; their columns are item, "
     r"annotator, label"),
    (["labels_goldclash.csv", *EM, "--gold-column", "truth"],
     r"--gold-column 'truth' gives item\(s\) 0 different gold labels on different rows"),
    (["labels.csv", *EM, "--gold-column", "label"],
     r"--gold-column 'label' is also the item, annotator or label column"),
    # found while reading, still before any fitting
    (["three.csv", *EM], r"--model two-coin needs exactly 2 classes; the labels have 3"),
    (["three.csv", *EM, "--model", "dawid-skene", "--prevalence-prior", "2,2"],
     r"--prevalence-prior: give one concentration or 3 \(one per class"),
    (["words.csv", *EM, "--model", "ordinal"],
     r"--model ordinal needs integer levels .* Recode the labels to 1..2 in their order"),
    (["labels.csv", *EM, "--model", "ordinal", "--classes", "1,0"],
     r"--model ordinal needs the levels in increasing order, got \[1, 0\]"),
    (["labels.csv", *EM, "--gold", "gold_maybe.csv"],
     r"column 'gold' of the gold file '.*gold_maybe.csv' holds maybe \(line\(s\) 4\), which "
     r"are not numbers, but the labels in column 'label' are numbers"),
    (["labels.csv", *EM, "--gold", "gold_other.csv"],
     r"none of the 40 item ids of the gold file '.*gold_other.csv' \(column 'item', e.g. "
     r"1000, 1001, 1002\) is an item id of the labels \(e.g. 0, 1, 2\); check --gold-item"),
    (["labels.csv", *EM, "--positive", "yes"],
     r"--positive 'yes' is not one of the classes \[0, 1\]; name one of them"),
    (["three.csv", *EM, "--model", "dawid-skene", "--positive", "x"],
     r"--positive names the positive class of a binary model .*--model dawid-skene "
     r"--variant full has no positive class"),
    (["labels.csv", *EM, "--gold", "gold_text.csv"],
     r"none of the 40 item ids of the gold file '.*gold_text.csv' \(column 'item', e.g. id0, "
     r"id1, id2\) is an item id of the labels \(e.g. 0, 1, 2\); check --gold-item"),
]


@pytest.mark.parametrize("argv, message", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_bad_input_is_one_line_before_fitting(files, tmp_path, capsys, argv, message):
    out = tmp_path / "out"
    args = [str(files / a) if (files / a).suffix in (".csv", ".tsv", ".txt") or a == "a_folder"
            else a for a in argv]
    code = main(["fit", *args, "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.startswith("crowd-models: error: ")
    assert len(captured.err.strip().splitlines()) == 1, captured.err
    assert re.search(message, captured.err), captured.err
    # nothing was fitted or written
    assert "EM (reference fit)" not in captured.out and "MAP" not in captured.out
    assert not out.exists()


def test_out_that_is_a_file_is_refused(files, capsys):
    code = main(["fit", str(files / "labels.csv"), *EM, "--out", str(files / "afile.txt")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "is an existing file, not a folder" in err
    assert (files / "afile.txt").read_text() == "not a folder\n"


def test_out_below_a_file_is_refused(files, capsys):
    code = main(["fit", str(files / "labels.csv"), *EM, "--out",
                 str(files / "afile.txt" / "report")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert re.search(r"cannot be created: '.*afile.txt' is a file, not a folder", err)


def test_unwritable_out_is_refused_before_fitting(files, tmp_path, capsys, monkeypatch):
    """An --out in a folder the user may not write to (os.access says no; root
    may write anywhere, so the permission check is simulated)."""
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access

    def access(path, mode, *args, **kwargs):
        if os.fspath(path) == os.fspath(locked) and mode & os.W_OK:
            return False
        return real_access(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)  # os.access, as the CLI calls it
    code = main(["fit", str(files / "labels.csv"), *EM, "--out", str(locked / "report")])
    captured = capsys.readouterr()
    assert code == 2 and len(captured.err.strip().splitlines()) == 1
    assert re.search(r"--out '.*report' cannot be created: no permission to write in '.*locked'",
                     captured.err)
    assert "EM (reference fit)" not in captured.out
    code = main(["fit", str(files / "labels.csv"), *EM, "--out", str(locked)])
    assert code == 2
    assert "is not writable" in capsys.readouterr().err


@pytest.mark.skipif(os.name != "posix", reason="needs POSIX file permissions")
def test_read_only_folder_is_refused(files, tmp_path, capsys):
    """A folder the process really cannot write in (os.access is not simulated):
    one made read-only (mode 555), or, for root (CI), whom permissions do not
    stop, Linux's /proc/sys, which the kernel keeps unwritable for root too."""
    if os.geteuid() != 0:
        locked = tmp_path / "read_only"
        locked.mkdir()
        locked.chmod(0o555)
    elif os.path.isdir("/proc/sys"):
        locked = "/proc/sys"
    else:
        pytest.skip("root, and no /proc/sys: no folder here that root cannot write in")
    assert not os.access(locked, os.W_OK), f"{locked} is writable here"
    try:
        code = main(["fit", str(files / "labels.csv"), *EM, "--out",
                     os.path.join(locked, "report")])
    finally:
        if os.geteuid() != 0:
            locked.chmod(0o755)
    captured = capsys.readouterr()
    assert code == 2 and len(captured.err.strip().splitlines()) == 1
    assert f"cannot be created: no permission to write in {str(locked)!r}" in captured.err
    assert "EM (reference fit)" not in captured.out


def test_non_empty_out_needs_force_and_force_names_what_it_replaces(files, tmp_path, capsys):
    out = tmp_path / "report"
    base = ["fit", str(files / "labels.csv"), *EM, "--out", str(out)]
    assert main(base) == 0
    capsys.readouterr()
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert set(before) == {"annotators.csv", "items.csv", "annotators.png", "fit.nc"}
    # a second run is refused and changes nothing
    code = main(base)
    captured = capsys.readouterr()
    assert code == 2 and len(captured.err.strip().splitlines()) == 1
    assert re.search(r"--out '.*report' is not empty \(it holds annotators.csv, annotators.png, "
                     r"fit.nc, items.csv\); give a new or empty folder, or pass --force",
                     captured.err)
    assert "EM (reference fit)" not in captured.out
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    # --force replaces the report's files, says so, and leaves the rest alone; an
    # earlier report's file that this report does not write goes, so that the
    # folder holds one report
    (out / "notes.txt").write_text("mine\n")
    (out / "coefficients.csv").write_text("from an earlier run\n")
    assert main([*base, "--force"]) == 0
    printed = capsys.readouterr().out
    replaced = next(line for line in printed.splitlines() if "--force: replacing" in line)
    for name in ("annotators.csv", "items.csv", "annotators.png", "fit.nc"):
        assert str(out / name) in replaced
    assert "notes.txt" not in printed.replace("wrote:", "")
    stale = next(line for line in printed.splitlines() if "removing the earlier" in line)
    assert str(out / "coefficients.csv") in stale
    assert (out / "notes.txt").read_text() == "mine\n"
    assert not (out / "coefficients.csv").exists()


def test_force_into_an_empty_or_new_folder_is_quiet(files, tmp_path, capsys):
    out = tmp_path / "new"
    assert main(["fit", str(files / "labels.csv"), *EM, "--out", str(out), "--force"]) == 0
    printed = capsys.readouterr().out
    assert "replacing" not in printed and "removing" not in printed


def test_argparse_errors_are_one_line(capsys):
    code = main(["fit"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "the following arguments are required: labels" in err
    code = main(["fitt", "x.csv"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "invalid choice: 'fitt'" in err


def test_the_report_says_where_its_intervals_come_from(files, tmp_path, capsys):
    import xarray as xr

    base = ["fit", str(files / "labels.csv")]
    assert main([*base, *EM, "--out", str(tmp_path / "em")]) == 0
    assert "(intervals: 90% equal-tailed, from EM's conjugate approximations" in (
        capsys.readouterr().out)
    assert main([*base, "--seed", "5", "--out", str(tmp_path / "map")]) == 0
    printed = capsys.readouterr().out
    assert "(intervals: 90% equal-tailed, over 1000 draws of the Laplace approximation" in printed
    fit = xr.open_datatree(tmp_path / "map" / "fit.nc", engine="h5netcdf")
    assert "laplace" in fit.children and "laplace_approximation" not in fit.children
    assert fit.attrs["intervals"].startswith("90% equal-tailed, over 1000 draws")
    table = pd.read_csv(tmp_path / "map" / "annotators.csv", index_col=0)
    draws = fit["laplace"]["sensitivity"].values[0]
    np.testing.assert_allclose(table["sensitivity_lower"], np.quantile(draws, 0.05, axis=0),
                               rtol=1e-6)


def test_laplace_is_skipped_with_its_reason(monkeypatch):
    from crowd_models.cli import _commands
    from crowd_models.cli._commands import LAPLACE_MAX_PARAMETERS, _intervals_text, _laplace_skipped

    many = two_coin.simulate(sensitivity=np.full(6100, 0.8), specificity=np.full(6100, 0.8),
                             n_items=20000, labels_per_item=3, rng=np.random.default_rng(0))
    model = two_coin.build_model(many)
    size = 2 * many.n_annotators + 1  # sensitivity, specificity, prevalence
    assert size > LAPLACE_MAX_PARAMETERS
    assert _laplace_skipped(model, "two-coin") == (
        f"{size} free parameters, above the Laplace limit of {LAPLACE_MAX_PARAMETERS}")
    # below the limit, the three dense n x n matrices must fit in half the free memory
    part = many.select(many.annotator_idx < 3000)
    middle, size = two_coin.build_model(part), 2 * part.n_annotators + 1
    monkeypatch.setattr(_commands, "_available_memory", lambda: 2 * 3 * 8 * size ** 2 - 2)
    assert _laplace_skipped(middle, "two-coin") == (
        f"{size} free parameters need 0.8 GiB for the Hessian, its factor and the "
        f"covariance, more than half of the 1.6 GiB available")
    monkeypatch.setattr(_commands, "_available_memory", lambda: 2 * 3 * 8 * size ** 2)
    assert _laplace_skipped(middle, "two-coin") is None
    assert "exact zeros" in _laplace_skipped(model, "feature-accuracy")
    small = two_coin.build_model(two_coin.simulate(sensitivity=[0.9, 0.8], specificity=[0.9, 0.8],
                                                   n_items=20, rng=np.random.default_rng(1)))
    assert _laplace_skipped(small, "two-coin") is None
    text = _intervals_text("map", None, None, False, None)
    assert "its Hessian at the mode is not positive definite" in text
    assert "--method em for EM's approximations" in text
    import xarray as xr

    stalled = xr.DataTree(dataset=xr.Dataset(attrs={"converged": 0}))
    text = _intervals_text("map", stalled, stalled, False, None, has_em=False)
    assert text == ("none for this MAP fit (no Laplace approximation: the optimiser stopped "
                    "short of a mode); --method nuts for the posterior")
