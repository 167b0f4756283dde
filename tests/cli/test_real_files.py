"""`crowd-models fit` reads the files users have: headerless, non-UTF-8, Excel and
Parquet files, and the exports of labelling tools (--format), each into the same
report as the equivalent CSV."""

import json
import re

import pandas as pd
import pytest

from crowd_models.cli import main

EM = ["--method", "em"]
# (annotator, item, label, gold): the column order of a public crowd file
ROWS = [("w1", "00007", "yes", "yes"), ("w2", "00007", "no", "yes"),
        ("w3", "00007", "yes", "yes"), ("w1", "7", "no", "no"), ("w2", "7", "no", "no"),
        ("w3", "7", "yes", "no"), ("w1", "Zoë", "yes", "yes"), ("w2", "Zoë", "yes", "yes"),
        ("w3", "Zoë", "no", "yes"), ("w4", "7", "no", "no"), ("w4", "Zoë", "yes", "yes")]


def _csv(path, header=True, encoding="utf-8"):
    lines = (["annotator,item,label,gold"] if header else []) + [",".join(r) for r in ROWS]
    path.write_bytes(("\n".join(lines) + "\n").encode(encoding))
    return path


def _items(out) -> pd.DataFrame:
    return pd.read_csv(out / "items.csv", index_col=0, dtype={"item": str}, encoding="utf-8")


@pytest.fixture
def reference(tmp_path, capsys):
    """The report of the plain CSV with a header."""
    out = tmp_path / "reference"
    assert main(["fit", str(_csv(tmp_path / "plain.csv")), *EM, "--gold-column", "gold",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    return _items(out)


def test_a_headerless_file_reads_every_row(tmp_path, reference, capsys):
    path = _csv(tmp_path / "nohead.csv", header=False)
    out = tmp_path / "out"
    assert main(["fit", str(path), *EM, "--no-header", "--item", "2", "--annotator", "1",
                 "--label", "3", "--gold-column", "4", "--out", str(out)]) == 0
    pd.testing.assert_frame_equal(_items(out), reference, check_names=False)
    assert "accuracy against gold (3 items)" in capsys.readouterr().out
    code = main(["fit", str(path), *EM, "--no-header", "--item", "item", "--out",
                 str(tmp_path / "o2")])
    err = capsys.readouterr().err
    assert code == 2 and "--no-header: --item takes the column's number" in err


def test_a_latin_1_file_names_the_line_and_reads_with_encoding(tmp_path, reference, capsys):
    path = _csv(tmp_path / "latin.csv", encoding="latin-1")
    base = ["fit", str(path), *EM, "--gold-column", "gold"]
    assert main([*base, "--out", str(tmp_path / "o1")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        f"crowd-models: error: labels file {str(path)!r} is not a readable CSV in utf-8: line "
        f"8 holds the "
        f"byte 0xeb, which utf-8 cannot decode; name the file's encoding with --encoding (e.g. "
        f"latin-1 or cp1252).")
    assert main([*base, "--encoding", "latin-1", "--out", str(tmp_path / "o2")]) == 0
    pd.testing.assert_frame_equal(_items(tmp_path / "o2"), reference)


def test_excel_and_parquet_files(tmp_path, reference, capsys):
    frame = pd.read_csv(_csv(tmp_path / "plain.csv"), dtype=str)
    workbook = tmp_path / "labels.xlsx"
    workbook.write_bytes(b"PK\x03\x04" + b"\x00" * 60)  # an .xlsx is a zip archive
    code = main(["fit", str(workbook), *EM, "--out", str(tmp_path / "o1")])
    err = capsys.readouterr().err
    if pytest.importorskip("importlib.util").find_spec("openpyxl") is None:
        assert code == 2 and "is an Excel workbook: save it as CSV (UTF-8), or pass an .xlsx " \
                             "with openpyxl installed" in err
    old = tmp_path / "labels.xls"
    old.write_bytes(b"\xd0\xcf\x11\xe0" + b"\x00" * 60)  # an OLE2 compound document
    assert main(["fit", str(old), *EM, "--out", str(tmp_path / "o0")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"crowd-models: error: labels file {str(old)!r} is an Excel 97-2003 workbook (.xls), "
        f"which is not read: save it as CSV (UTF-8), or as an .xlsx workbook and pass that "
        f"with openpyxl installed (pip install openpyxl).")
    pytest.importorskip("pyarrow", reason="reading Parquet needs pyarrow")
    frame.to_parquet(tmp_path / "labels.parquet")
    out = tmp_path / "o2"
    assert main(["fit", str(tmp_path / "labels.parquet"), *EM, "--gold-column", "gold",
                 "--out", str(out)]) == 0
    pd.testing.assert_frame_equal(_items(out), reference)


def test_exports_read_into_the_same_report(tmp_path, reference, capsys):
    tasks = {}
    for who, item, label, gold in ROWS:
        task = tasks.setdefault(item, {"id": item, "data": {}, "annotations": [
            {"completed_by": "expert", "ground_truth": True, "result": [
                {"from_name": "q", "type": "choices", "value": {"choices": [gold]}}]}]})
        task["annotations"].append({"completed_by": who, "result": [
            {"from_name": "q", "type": "choices", "value": {"choices": [label]}}]})
    (tmp_path / "ls.json").write_text(json.dumps(list(tasks.values())))
    prodigy = [{"_input_hash": item, "_annotator_id": who, "accept": [label],
                "answer": "accept"} for who, item, label, _ in ROWS]
    (tmp_path / "db.jsonl").write_text("\n".join(json.dumps(r) for r in prodigy))
    crowdkit = pd.DataFrame([(item, who, label) for who, item, label, _ in ROWS],
                            columns=["task", "worker", "label"])
    crowdkit.to_csv(tmp_path / "ck.csv", index=False)
    gold = pd.DataFrame([(item, g) for _, item, _, g in ROWS], columns=["item", "gold"])
    gold.drop_duplicates().to_csv(tmp_path / "gold.csv", index=False)
    for fmt, name, extra in [("label-studio", "ls.json", []),
                             ("prodigy", "db.jsonl", ["--gold", "gold.csv"]),
                             ("crowd-kit", "ck.csv", ["--gold", "gold.csv",
                                                      "--gold-item", "item"])]:
        out = tmp_path / fmt
        extra = [str(tmp_path / a) if a.endswith(".csv") else a for a in extra]
        code = main(["fit", str(tmp_path / name), "--format", fmt, *EM, *extra, "--out",
                     str(out)])
        assert code == 0, (fmt, capsys.readouterr().err)
        pd.testing.assert_frame_equal(_items(out), reference, check_names=False)
        assert "accuracy against gold (3 items)" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--format", "label-studio", "--item", "x"], r"--item is for table files; --format "
                                                  r"label-studio names the items"),
    (["--question", "q"], r"--question is for --format label-studio, prodigy, sagemaker"),
    (["--format", "prodigy"], r"--format prodigy: Prodigy file '.*plain\.csv', line 1, is not "
                              r"JSON"),
])
def test_format_options_are_checked(tmp_path, capsys, argv, message):
    code = main(["fit", str(_csv(tmp_path / "plain.csv")), *EM, *argv, "--out",
                 str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert re.search(message, err), err


def test_messages_speak_the_command_line_and_count_file_lines(tmp_path, capsys):
    """Column names as --item COL, fixes as actions on the file, and positions as the
    file's lines (a blank line and a quoted field over two lines counted)."""
    path = tmp_path / "labels.csv"
    path.write_text('question,worker,answer\nq1,a,yes\n\nq1,b,\nq2,a,no\n"q\n3",b,\nq2,b,yes\n')
    assert main(["fit", str(path), *EM, "--out", str(tmp_path / "o1")]) == 2
    err = capsys.readouterr().err
    assert "Name it with --item COL." in err and "item=" not in err
    assert main(["fit", str(path), *EM, "--item", "question", "--annotator", "worker",
                 "--label", "answer", "--out", str(tmp_path / "o2")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        "crowd-models: error: column 'answer' (the labels) is missing or empty on 2 line(s), "
        "e.g. line(s) 4, 6. A row means an annotation was given: delete the lines without a "
        "label first.")
