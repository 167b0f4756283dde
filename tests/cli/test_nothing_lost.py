"""`crowd-models fit` loses nothing: ids are kept as written, repeated labels are
counted aloud, a report is written whole or not at all, and no failure prints a
traceback."""

import errno
import re

import numpy as np
import pandas as pd
import pytest

from crowd_models.cli import _commands, _input, main

EM = ["--method", "em"]


@pytest.fixture
def zeros(tmp_path):
    """Ids that pandas would read as the same numbers: items '00007' and '7',
    annotators '008' and '08', with a gold file and a features file that use them."""
    rng = np.random.default_rng(0)
    items = ["00007", "7", "0.50", "0.5", "NA", "x1"] + [f"{i:03d}" for i in range(30)]
    annotators = ["008", "08", "8", "n/a"]
    truth = {i: int(rng.random() < 0.5) for i in items}
    rows = [(i, a, truth[i] if rng.random() < 0.85 else 1 - truth[i])
            for i in items for a in annotators]
    (tmp_path / "labels.csv").write_text(
        "item,annotator,label\n" + "".join(f"{i},{a},{y}\n" for i, a, y in rows))
    (tmp_path / "gold.csv").write_text(
        "item,gold\n" + "".join(f"{i},{truth[i]}\n" for i in items))
    (tmp_path / "features.csv").write_text(
        "item,size\n" + "".join(f"{i},{k / 10}\n" for k, i in enumerate(items)))
    return tmp_path, items, annotators


def _first_column(path) -> list[str]:
    return [line.split(",")[0] for line in path.read_text().splitlines()[1:]]


def test_ids_round_trip_as_written(zeros, capsys):
    folder, items, annotators = zeros
    out = folder / "report"
    code = main(["fit", str(folder / "labels.csv"), *EM, "--gold", str(folder / "gold.csv"),
                 "--features", str(folder / "features.csv"), "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    # every item and annotator, byte for byte, in the file's order
    assert _first_column(out / "items.csv") == items
    assert _first_column(out / "annotators.csv") == annotators
    printed = capsys.readouterr().out
    assert f"accuracy against gold ({len(items)} items)" in printed


@pytest.mark.parametrize("where", ["first", "last"])
def test_ids_that_look_like_numbers_in_one_block_stay_as_written(tmp_path, where):
    # pandas parses a long file in blocks of rows and infers each block's type: ids
    # that are all digits in one block come out as numbers there, beside the text
    # of the others (a mixed column), unless the id columns are read as text
    n = 300_000  # more than one block
    items = [f"{i:06d}" for i in range(n)]
    items[0 if where == "first" else -1] = "x1"
    path = tmp_path / "labels.csv"
    path.write_text("item,annotator,label\n" + "".join(
        f"{item},{'NA' if k % 3 == 0 else '007'},{k % 2}\n" for k, item in enumerate(items)))
    table = _input._read_csv(str(path), "labels", ids=("item", "annotator"))
    assert list(table["item"]) == items
    assert set(table["annotator"]) == {"NA", "007"} and table["label"].dtype == np.int64


def test_repeated_and_conflicting_rows_warn_with_counts(tmp_path, capsys):
    rows = ["item,annotator,label"] + [f"{i},{a},{(i + a) % 2}" for i in range(20)
                                       for a in range(3)]
    rows += ["0,0,0", "0,0,0", "1,2,0"]  # item 0 by annotator 0 three times; 1 by 2 twice
    (tmp_path / "labels.csv").write_text("\n".join(rows) + "\n")
    base = ["fit", str(tmp_path / "labels.csv"), *EM]
    assert main([*base, "--out", str(tmp_path / "warn")]) == 0
    err = capsys.readouterr().err
    warned = [line for line in err.splitlines() if "repeat an earlier row" in line]
    assert len(warned) == 1, err
    assert re.search(r"2 row\(s\) repeat an earlier row's item, annotator and label exactly "
                     r"\(1 pair\(s\), e\.g\. item '0', annotator '0': 0, 0, 0\); 1 \(item, "
                     r"annotator\) pair\(s\) have different labels on 2 row\(s\) \(e\.g\. item "
                     r"'1', annotator '2': 1, 0\)", warned[0])
    assert "--duplicates drop" in warned[0]
    counts = pd.read_csv(tmp_path / "warn" / "items.csv", index_col=0)["n_labels"]
    assert counts.loc[0] == 5 and counts.loc[1] == 4 and counts.sum() == 63

    assert main([*base, "--duplicates", "drop", "--out", str(tmp_path / "drop")]) == 0
    err = capsys.readouterr().err
    assert re.search(r"dropped 2 row\(s\) .*; kept: 1 \(item, annotator\) pair\(s\) have "
                     r"different labels", err)
    counts = pd.read_csv(tmp_path / "drop" / "items.csv", index_col=0)["n_labels"]
    assert counts.loc[0] == 3 and counts.loc[1] == 4 and counts.sum() == 61

    assert main([*base, "--duplicates", "keep", "--out", str(tmp_path / "keep")]) == 0
    assert "repeat" not in capsys.readouterr().err

    assert main([*base, "--duplicates", "error", "--out", str(tmp_path / "error")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "2 row(s) repeat an earlier row" in err
    assert not (tmp_path / "error").exists()


@pytest.fixture
def earlier(tmp_path, capsys):
    """A labels file, and a report folder holding an earlier report and a file of
    the user's."""
    rows = ["item,annotator,label"] + [f"{i},{a},{int(i % 3 == 0) ^ (a == i % 4)}"
                                       for i in range(40) for a in range(4)]
    (tmp_path / "labels.csv").write_text("\n".join(rows) + "\n")
    out = tmp_path / "report"
    assert main(["fit", str(tmp_path / "labels.csv"), *EM, "--out", str(out)]) == 0
    (out / "notes.txt").write_text("mine\n")
    capsys.readouterr()
    return tmp_path, out, {p.name: p.read_bytes() for p in out.iterdir()}


def _leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_an_interrupted_write_leaves_the_earlier_report_whole(earlier, monkeypatch, capsys):
    folder, out, before = earlier

    def interrupted(fit, path, info):
        path.write_bytes(b"half a file")
        raise KeyboardInterrupt

    monkeypatch.setattr(_commands, "_write_fit", interrupted)
    code = main(["fit", str(folder / "labels.csv"), *EM, "--out", str(out), "--force"])
    err = capsys.readouterr().err
    assert code == 130
    assert err.strip() == "crowd-models: interrupted; the report folder was left as it was"
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert _leftovers(folder) == []


def test_a_full_disk_leaves_no_partial_report(earlier, monkeypatch, capsys):
    folder, out, before = earlier

    def full(fit, path, info):
        path.write_bytes(b"half a file")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_commands, "_write_fit", full)
    labels = str(folder / "labels.csv")
    assert main(["fit", labels, *EM, "--out", str(out), "--force"]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "No space left on device; nothing in it was changed" in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    # a new folder is not created at all
    assert main(["fit", labels, *EM, "--out", str(folder / "new")]) == 1
    assert not (folder / "new").exists()
    assert _leftovers(folder) == []


def test_force_writes_a_whole_new_report_beside_the_users_files(earlier, capsys):
    folder, out, before = earlier
    (out / "coefficients.csv").write_text("of another data set\n")
    (out / "mine").mkdir()
    (out / "mine" / "data.txt").write_text("kept\n")
    (out / "link").symlink_to("notes.txt")
    mode = out.stat().st_mode
    flipped = folder / "flipped.csv"
    flipped.write_text((folder / "labels.csv").read_text().replace(",1\n", ",x\n")
                       .replace(",0\n", ",1\n").replace(",x\n", ",0\n"))
    assert main(["fit", str(flipped), *EM, "--out", str(out), "--force"]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "annotators.csv", "annotators.png", "fit.nc", "items.csv", "link", "mine", "notes.txt"]
    assert (out / "items.csv").read_bytes() != before["items.csv"]
    assert (out / "notes.txt").read_text() == "mine\n"
    assert (out / "mine" / "data.txt").read_text() == "kept\n"
    assert (out / "link").is_symlink() and (out / "link").read_text() == "mine\n"
    assert out.stat().st_mode == mode
    assert _leftovers(folder) == []


def test_out_is_checked_before_the_model_choice(earlier, capsys):
    folder, out, _ = earlier
    code = main(["fit", str(folder / "labels.csv"), "--model", "auto", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 2 and "is not empty" in captured.err
    assert captured.out == ""  # nothing read, nothing compared


def test_a_fit_too_large_for_memory_is_refused_before_allocating(tmp_path, capsys,
                                                                 monkeypatch):
    """10,000 classes of 20 annotators: one (10000, 10000) confusion per annotator."""
    rows = ["item,annotator,label"] + [f"{i},{a},{(i * 20 + a) % 10_000}"
                                       for i in range(1000) for a in range(20)]
    (tmp_path / "labels.csv").write_text("\n".join(rows) + "\n")
    monkeypatch.setattr(_input, "_available_memory", lambda: 16 * 2**30)
    code = main(["fit", str(tmp_path / "labels.csv"), "--model", "dawid-skene", "--variant",
                 "full", *EM, "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert code == 2
    errors = [line for line in captured.err.splitlines() if not line.startswith("warning:")]
    assert len(errors) == 1 and "Traceback" not in captured.err
    assert re.search(r"--model dawid-skene on 10000 classes, 20 annotators and 1000 items needs "
                     r"about \d+\.\d GiB of memory .* and 16\.0 GiB are available", errors[0])
    assert "EM (reference fit)" not in captured.out


@pytest.mark.parametrize("error, code, line", [
    (KeyboardInterrupt(), 130, r"crowd-models: interrupted; the report folder was left as it"),
    (MemoryError("Unable to allocate 14.9 GiB"), 1,
     r"crowd-models: error: out of memory \(Unable to allocate 14\.9 GiB\); fit fewer"),
    (RuntimeError("something\nunexpected"), 1,
     r"crowd-models: internal error: RuntimeError: something unexpected; the full traceback "
     r"is in (\S+\.log) \(please include it"),
])
def test_failures_while_fitting_are_one_line_without_traceback(earlier, monkeypatch, capsys,
                                                               error, code, line):
    folder, out, before = earlier

    def fails(*args, **kwargs):
        raise error

    monkeypatch.setattr(_commands, "_run_method", fails)
    status = main(["fit", str(folder / "labels.csv"), *EM, "--out", str(out), "--force"])
    err = capsys.readouterr().err
    assert status == code
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    found = re.search(line, err)
    assert found, err
    if found.groups():  # the log holds the traceback and the command
        log = open(found.group(1)).read()
        assert "Traceback (most recent call last)" in log and "RuntimeError" in log
        assert f"command: crowd-models fit {folder / 'labels.csv'}" in log
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_output_is_readable_text(tmp_path, capsys):
    """No numpy reprs, a long annotator table shortened with where the whole one is,
    and a negative prior value accepted as written."""
    rng = np.random.default_rng(2)
    rows = ["item,annotator,label"] + [f"{i},w{a},{bool(rng.random() < 0.5)}"
                                       for i in range(60) for a in rng.choice(30, 5, False)]
    (tmp_path / "labels.csv").write_text("\n".join(rows) + "\n")
    out = tmp_path / "out"
    assert main(["fit", str(tmp_path / "labels.csv"), *EM, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "positive class: True (" in printed and "np." not in printed
    assert f"... 10 more rows (all 30 in {out / 'annotators.csv'}) ..." in printed
    table = pd.read_csv(out / "annotators.csv", index_col=0)
    shown = [a for a in table.index if re.search(rf"^{a} ", printed, re.M)]
    assert shown == [*table.index[:10], *table.index[-10:]]
    # argparse would read -1,2 as an option; the family's own check answers
    code = main(["fit", str(tmp_path / "labels.csv"), *EM, "--out", str(tmp_path / "o2"),
                 "--sensitivity-prior", "-1,2"])
    err = capsys.readouterr().err
    assert code == 2 and err.strip() == (
        "crowd-models: error: --sensitivity-prior '-1,2': a Beta prior needs A >= 1 and B >= 1 "
        "(1,1 is flat).")


@pytest.mark.parametrize("method", ["em", "map"])
def test_every_fit_file_reloads_through_open_fit(earlier, method, capsys):
    """fit.nc of an EM fit (a Dataset) and of a MAP fit (a DataTree) both reload
    with cm.open_fit and give the report's tables back."""
    import crowd_models as cm

    folder, _, _ = earlier
    out = folder / method
    assert main(["fit", str(folder / "labels.csv"), "--method", method, "--out",
                 str(out)]) == 0
    fit = cm.open_fit(out / "fit.nc")
    assert fit.attrs["family"] == "two_coin" and fit.attrs["method"] == method
    assert isinstance(fit.attrs["priors"], dict) and "json_attrs" not in fit.attrs
    table = pd.read_csv(out / "annotators.csv", index_col=0, dtype={"annotator": str})
    again = cm.report.annotator_summary(fit)
    np.testing.assert_allclose(again.loc[table.index, "sensitivity_mean"],
                               table["sensitivity_mean"], atol=1e-9)
    items = pd.read_csv(out / "items.csv", index_col=0)
    ann = cm.Annotations.from_frame(pd.read_csv(folder / "labels.csv",
                                                dtype={"item": str, "annotator": str}))
    np.testing.assert_allclose(cm.report.item_table(fit, ann)["prob_1"].to_numpy(),
                               items.loc[:, "prob_1"].to_numpy(), atol=1e-9)


def test_a_single_file_is_replaced_whole_or_not_at_all(tmp_path):
    """publish_file (crowd-models predict's --out): a write that fails half way
    leaves the earlier file and no stray file; one that succeeds replaces it,
    readable as a file open() would have made."""
    import os

    from crowd_models.cli._output import publish_file

    out = tmp_path / "predictions.csv"
    out.write_text("earlier\n")

    def full(path):
        path.write_text("half a")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        publish_file(out, full)
    assert out.read_text() == "earlier\n" and sorted(os.listdir(tmp_path)) == [out.name]
    publish_file(out, lambda path: path.write_text("new\n"))
    assert out.read_text() == "new\n" and sorted(os.listdir(tmp_path)) == [out.name]
    mask = os.umask(0)
    os.umask(mask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~mask


def test_report_tables_are_written_with_the_cells_pandas_writes(tmp_path):
    """The report's CSV writer (pyarrow's, for speed) against ``DataFrame.to_csv``:
    every table reads back with the same dtypes and values, integral floats stay
    floats, text needing quotes goes to pandas' writer, and the fast path is the one
    taken on an ordinary table (its small floats are written in fixed notation)."""
    from crowd_models.cli._output import write_csv

    floats = [0.1, np.nan, np.inf, -np.inf, 1e-300, 1e22, 0.0, -0.0, 1e16, 2.0, 1e-5, 1 / 3]
    n = len(floats)
    plain = pd.DataFrame(
        {"prob_0": floats, "whole": np.arange(n) * 1.0, "n_labels": np.arange(n),
         "flag": [True, False] * (n // 2), "estimated_label": ["cat", "dog"] * (n // 2),
         "gold": pd.Series(["cat", np.nan] * (n // 2), dtype=object),
         "kind": pd.Categorical(["a", "b", "a"] * (n // 3)),
         "code": pd.Series(["007", "NA"] * (n // 2), dtype="str")},
        index=pd.Index([f"i{k:03d}" for k in range(n)], name="item"))
    quoted = plain.assign(estimated_label=['a,b', 'say "hi"', "two\nlines"] * (n // 3))
    unnamed = plain.rename_axis(None).set_axis([7 * k for k in range(n)])
    clash = plain.rename(columns={"flag": "item"})  # a column named as the index
    for name, table in {"plain": plain, "quoted": quoted, "unnamed": unnamed,
                        "clash": clash}.items():
        write_csv(table, tmp_path / f"{name}.csv")
        table.to_csv(tmp_path / f"{name}_pandas.csv")
        ours = pd.read_csv(tmp_path / f"{name}.csv", index_col=0)
        theirs = pd.read_csv(tmp_path / f"{name}_pandas.csv", index_col=0)
        pd.testing.assert_frame_equal(ours, theirs, check_exact=True)
        assert ours["whole"].dtype == np.float64
    text = (tmp_path / "plain.csv").read_text()
    assert "0.00001," in text and '"' not in text  # pyarrow's writer, unquoted
    assert (tmp_path / "quoted.csv").read_bytes() == (tmp_path / "quoted_pandas.csv").read_bytes()
