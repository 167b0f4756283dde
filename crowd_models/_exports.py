"""Other shapes of labels as the long table: an items x annotators matrix
(:meth:`crowd_models.Annotations.from_wide`), and the exports of labelling
tools: Label Studio's JSON export, Prodigy's JSONL (``prodigy db-out``) and
SageMaker Ground Truth's output manifest.

Each export reader returns ``(frame, gold)``: a table with the columns ``item``,
``annotator`` and ``label`` (ids as text, as the tool wrote them) that
:meth:`crowd_models.Annotations.from_frame` parses, and a Series of gold
labels by item (None when the export marks none). What a reader leaves out
(cancelled or ignored annotations, annotations without an answer to the
question read) it counts in a ``UserWarning``; what it cannot read it
refuses with a ``ValueError`` that names the place in the file and the fix.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from crowd_models._parsing import check_wide_ids, strip_index
from crowd_models._text import examples, listing, warn

COLUMNS = ["item", "annotator", "label"]


# ------------------------------------------------------------- the wide matrix
def checked_wide(matrix, strip: bool, missing) -> pd.DataFrame:
    """from_wide's matrix as a DataFrame with unique ids, missing codes masked."""
    if isinstance(matrix, np.ndarray):
        if matrix.ndim != 2:
            raise ValueError(
                f"from_wide expects a 2-D items x annotators matrix, got an array with "
                f"shape {matrix.shape}."
            )
        matrix = pd.DataFrame(matrix)
    if not isinstance(matrix, pd.DataFrame):
        raise TypeError(
            f"from_wide expects a DataFrame (items x annotators) or a 2-D numpy array, "
            f"got {type(matrix).__name__}."
        )
    for what, where, index in (("item ids (the index)", "row", matrix.index),
                               ("annotator ids (the columns)", "column", matrix.columns)):
        check_wide_ids(index, what, where)
    if strip:
        matrix = matrix.copy()
        matrix.index = strip_index(matrix.index)
        matrix.columns = strip_index(matrix.columns)
    for what, index in (("item ids (the index)", matrix.index),
                        ("annotator ids (the columns)", matrix.columns)):
        dup = index[index.duplicated()]
        if len(dup):
            raise ValueError(
                f"the {what} contain duplicates: {examples(dup.unique())}"
                + (" (once stripped of whitespace by strip=True)" if strip else "")
                + ". Ids must be unique."
            )
    if missing is not None:
        iterable = isinstance(missing, Iterable) and not isinstance(missing, str | bytes)
        codes = list(missing) if iterable else [missing]
        hit = matrix.isin(codes).to_numpy()
        if not hit.any():
            warn(
                f"missing={listing(codes)} matches no cell of the matrix; nothing was "
                f"treated as missing. Types matter: -1 and '-1' differ."
            )
        matrix = matrix.mask(hit)
    return matrix


def wide_to_long(matrix: pd.DataFrame, classes, continuous: bool) -> pd.DataFrame:
    """The present cells as a long table indexed by (item, annotator), keeping a shared
    Categorical order and undoing the float upcast of integer labels."""
    dtypes = list(matrix.dtypes)
    categories = None
    if any(isinstance(t, pd.CategoricalDtype) for t in dtypes) and not continuous:
        cats = [t.categories for t in dtypes if isinstance(t, pd.CategoricalDtype)]
        if len(cats) == len(dtypes) and all(c.equals(cats[0]) for c in cats):
            categories = cats[0]
        elif classes is None:
            warn(
                "some columns of the matrix are Categorical but not all with the same "
                "categories, so their category order is not used and the classes are "
                "sorted. Pass classes=[...] to give the order."
            )
    present = matrix.notna().to_numpy()
    empty_cols = matrix.columns[~present.any(axis=0)]
    if len(empty_cols):
        raise ValueError(
            f"annotator(s) {examples(empty_cols)} have no labels (all missing); "
            f"drop those columns."
        )
    empty_rows = matrix.index[~present.any(axis=1)]
    if len(empty_rows):
        raise ValueError(
            f"item(s) {examples(empty_rows)} have no labels (all missing); drop those rows."
        )
    rows, cols = np.nonzero(present)
    values = matrix.to_numpy(dtype=object)[rows, cols]
    long = pd.DataFrame(
        {
            "item": matrix.index[rows],
            "annotator": matrix.columns[cols],
            "label": values if categories is None else pd.Categorical(
                values, categories=categories),
        },
        # so that label errors name (item, annotator) cells, not rows of this table
        index=pd.MultiIndex.from_arrays(
            [matrix.index[rows], matrix.columns[cols]], names=["item", "annotator"]
        ),
    )
    if not continuous and categories is None:
        # undo the float upcast that NaN forces on integer columns (1.0 -> 1)
        vals = long["label"]
        numeric = pd.to_numeric(vals, errors="coerce")
        if numeric.notna().all() and np.all(np.mod(numeric, 1) == 0) and vals.map(
            lambda v: isinstance(v, float)
        ).any():
            long["label"] = numeric.astype(np.int64)
    return long


# ---------------------------------------------------------------------- exports
def _load_json(path, what: str):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as err:
        raise ValueError(f"{what} {str(path)!r} is not JSON: {err.msg} at line {err.lineno}, "
                         f"column {err.colno}.") from None


def _json_lines(path, what: str) -> list[tuple[int, dict]]:
    """(line number, object) of each non-blank line of a JSON-lines file."""
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{what} {str(path)!r}, line {number}, is not JSON: "
                                 f"{err.msg}.") from None
            if not isinstance(value, dict):
                raise ValueError(f"{what} {str(path)!r}, line {number}, holds a "
                                 f"{type(value).__name__}, not one JSON object per line.")
            rows.append((number, value))
    return rows


def _skipped(counts: dict, what: str) -> None:
    shown = [f"{n} {why}" for why, n in counts.items() if n]
    if shown:
        warn(f"{what}: left out {'; '.join(shown)}; they carry no label.")


# ------------------------------------------------------------------ Label Studio
_LS_VALUE = {"choices": "choices", "rating": "rating", "number": "number",
             "taxonomy": "taxonomy", "labels": "labels"}
"""Label Studio's result types that hold one answer per annotation, and the key of
``value`` that holds it."""


def _ls_annotator(annotation) -> str | None:
    who = annotation.get("completed_by")
    if isinstance(who, dict):
        who = who.get("email") or who.get("id")
    return None if who is None else str(who)


def _ls_answers(results, from_name: str | None) -> dict[str, object]:
    """from_name -> the one answer of each classification result."""
    answers = {}
    for result in results or ():
        kind = result.get("type")
        if kind not in _LS_VALUE or not isinstance(result.get("value"), dict):
            continue
        value = result["value"].get(_LS_VALUE[kind])
        answers[result.get("from_name", kind)] = value
    if from_name is not None:
        return {from_name: answers[from_name]} if from_name in answers else {}
    return answers


def _one_choice(value, where: str):
    if isinstance(value, list):
        if len(value) != 1:
            raise ValueError(f"{where} chose {len(value)} options ({examples(value)}): one label "
                             f"per annotation is read; multi-label questions are not supported.")
        value = value[0]
        if isinstance(value, list):  # taxonomy: a path of choices, the last is the class
            value = "/".join(str(v) for v in value)
    return value


def label_studio_table(path, *, from_name: str | None = None):
    """Label Studio's JSON export (a list of tasks, each with ``annotations``, whose
    ``result`` holds the answers): one row per annotation that answers the question
    ``from_name``; annotations flagged ``ground_truth`` give the gold labels."""
    tasks = _load_json(path, "Label Studio export")
    if isinstance(tasks, dict):
        tasks = [tasks]
    if not isinstance(tasks, list) or not all(isinstance(t, dict) for t in tasks):
        raise ValueError(f"Label Studio export {str(path)!r} is not a list of tasks; export the "
                         f"project as JSON (not JSON-MIN or CSV).")
    names = {name for t in tasks for a in t.get("annotations", t.get("completions", []))
             for name in _ls_answers(a.get("result"), None)}
    if from_name is None and len(names) > 1:
        raise ValueError(f"Label Studio export {str(path)!r} answers {len(names)} questions "
                         f"({examples(sorted(names))}); pass from_name= to read one.")
    if from_name is not None and from_name not in names:
        raise ValueError(f"Label Studio export {str(path)!r} has no answers to {from_name!r}; "
                         f"its questions are {examples(sorted(names))}.")
    rows, gold, skipped = [], {}, {"cancelled annotation(s)": 0, "annotation(s) without an "
                                   "answer": 0}
    for t_index, task in enumerate(tasks):
        if "id" not in task:
            raise ValueError(f"Label Studio export {str(path)!r}: task {t_index} has no 'id'.")
        item = str(task["id"])
        for annotation in task.get("annotations", task.get("completions", [])):
            if annotation.get("was_cancelled"):
                skipped["cancelled annotation(s)"] += 1
                continue
            answers = _ls_answers(annotation.get("result"), from_name)
            if not answers:
                skipped["annotation(s) without an answer"] += 1
                continue
            where = f"task {item}'s annotation {annotation.get('id', '?')}"
            label = _one_choice(next(iter(answers.values())), where)
            if annotation.get("ground_truth"):
                if item in gold and gold[item] != label:
                    raise ValueError(f"Label Studio export {str(path)!r}: task {item} has two "
                                     f"ground-truth annotations that disagree ({gold[item]!r}, "
                                     f"{label!r}).")
                gold[item] = label
                continue
            annotator = _ls_annotator(annotation)
            if annotator is None:
                raise ValueError(f"Label Studio export {str(path)!r}: {where} has no "
                                 f"'completed_by'.")
            rows.append((item, annotator, label))
    _skipped(skipped, f"Label Studio export {str(path)!r}")
    frame = pd.DataFrame(rows, columns=COLUMNS)
    return frame, (pd.Series(gold, name="gold") if gold else None)


# --------------------------------------------------------------------- Prodigy
def prodigy_table(path, *, label: str | None = None):
    """Prodigy's JSONL (``prodigy db-out``): a choice task's label is the one option
    in ``accept``; a binary task (one ``label`` per question) gives ``accept`` or
    ``reject``. Items are ``_input_hash``, annotators ``_annotator_id`` (else
    ``_session_id``)."""
    what = f"Prodigy file {str(path)!r}"
    lines = _json_lines(path, "Prodigy file")
    binary = [obj for _, obj in lines if "accept" not in obj]
    asked = sorted({str(obj["label"]) for obj in binary if "label" in obj})
    if label is None and len(asked) > 1:
        raise ValueError(f"{what} holds yes/no questions about {len(asked)} labels "
                         f"({examples(asked)}); pass label= to read one.")
    rows, skipped = [], {"ignored answer(s)": 0, "rejected choice task(s)": 0}
    for number, obj in lines:
        if label is not None and "accept" not in obj and str(obj.get("label")) != label:
            continue
        answer = obj.get("answer")
        if answer not in ("accept", "reject", "ignore"):
            raise ValueError(f"{what}, line {number}: 'answer' is {answer!r}, not accept, "
                             f"reject or ignore; read annotated tasks (prodigy db-out).")
        if answer == "ignore":
            skipped["ignored answer(s)"] += 1
            continue
        if "_input_hash" not in obj:
            raise ValueError(f"{what}, line {number}: no '_input_hash' to tell the items apart.")
        annotator = obj.get("_annotator_id", obj.get("_session_id"))
        if annotator is None:
            raise ValueError(f"{what}, line {number}: no '_annotator_id' or '_session_id' to "
                             f"tell the annotators apart.")
        if "accept" in obj:
            if answer == "reject":
                skipped["rejected choice task(s)"] += 1
                continue
            value = _one_choice(obj["accept"], f"line {number}")
        else:
            value = answer
        rows.append((str(obj["_input_hash"]), str(annotator), value))
    _skipped(skipped, what)
    return pd.DataFrame(rows, columns=COLUMNS), None


# -------------------------------------------------------- SageMaker Ground Truth
_SOURCE_KEYS = ("source-ref", "source")


def _find_label(content, where: str):
    """The ``label`` inside a worker's answer (``{"<question>": {"label": "x"}}``)."""
    if isinstance(content, dict):
        if "label" in content and not isinstance(content["label"], dict | list):
            return content["label"]
        found = [v for v in content.values() if isinstance(v, dict)]
        if len(found) == 1:
            return _find_label(found[0], where)
        keys = list(content)
    else:
        keys = []
    raise ValueError(f"{where}: the worker's answer has no single 'label' (its keys: "
                     f"{examples(keys)}).")


def sagemaker_table(path, *, attribute: str | None = None):
    """SageMaker Ground Truth's output manifest (JSON lines): each line's
    ``attribute`` holds ``annotationsFromAllWorkers`` (each ``workerId`` and its
    ``annotationData.content``), as a pass-through consolidation writes it; items
    are ``source-ref`` (else ``source``)."""
    what = f"SageMaker manifest {str(path)!r}"
    lines = _json_lines(path, "SageMaker manifest")
    names = sorted({k for _, obj in lines for k in obj
                    if k not in _SOURCE_KEYS and not k.endswith("-metadata")})
    if attribute is None:
        if len(names) != 1:
            raise ValueError(f"{what} holds {len(names)} label attributes "
                             f"({examples(names)}); pass attribute= to read one.")
        attribute = names[0]
    rows = []
    for number, obj in lines:
        item = next((obj[k] for k in _SOURCE_KEYS if k in obj), None)
        if item is None:
            raise ValueError(f"{what}, line {number}: no 'source-ref' or 'source' for the item.")
        value = obj.get(attribute)
        if value is None:
            continue
        workers = value.get("annotationsFromAllWorkers") if isinstance(value, dict) else None
        if workers is None:
            raise ValueError(
                f"{what}, line {number}: {attribute!r} holds a consolidated label, not each "
                f"worker's answer; have the labelling job keep the workers' answers "
                f"(annotationsFromAllWorkers, a pass-through consolidation) and read that.")
        for worker in workers:
            content = worker.get("annotationData", {}).get("content")
            if isinstance(content, str):
                content = json.loads(content)
            where = f"{what}, line {number}, worker {worker.get('workerId')!r}"
            rows.append((str(item), str(worker["workerId"]), _find_label(content, where)))
    return pd.DataFrame(rows, columns=COLUMNS), None


READERS = {"label-studio": label_studio_table, "prodigy": prodigy_table,
           "sagemaker": sagemaker_table}
"""The command line's ``--format`` names of the export readers."""


def read_export(kind: str, path, **options):
    """``(frame, gold)`` of an export of one of ``READERS``."""
    if not Path(path).is_file():
        raise ValueError(f"{kind} file {str(path)!r} does not exist.")
    return READERS[kind](path, **options)
