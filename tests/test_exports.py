"""Exports of labelling tools read into the same `Annotations` as the equivalent
long table (issue "Real files in, nothing lost"). Each file is written here in
the tool's documented format."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from crowd_models.data import Annotations

# (item, annotator, label): three items, three annotators, one missing label
LABELS = [("t1", "7", "happy"), ("t1", "8", "sad"), ("t1", "9", "happy"),
          ("t2", "7", "sad"), ("t2", "8", "sad"), ("t3", "7", "happy"), ("t3", "9", "sad")]
GOLD = {"t1": "happy", "t3": "sad"}


def _same(a: Annotations, b: Annotations) -> None:
    assert list(a.items) == list(b.items) and list(a.annotators) == list(b.annotators)
    assert list(a.classes) == list(b.classes)
    for name in ("item_idx", "annotator_idx", "labels"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    if b.gold is None:
        assert a.gold is None
    else:
        np.testing.assert_array_equal(a.gold, b.gold)


def _expected(gold=None) -> Annotations:
    frame = pd.DataFrame(LABELS, columns=["item", "annotator", "label"])
    return Annotations.from_frame(frame, gold=gold)


def _ls_result(choice, name="mood"):
    return [{"from_name": name, "to_name": "text", "type": "choices",
             "value": {"choices": [choice]}}]


def _label_studio_tasks():
    tasks = {}
    for item, who, label in LABELS:
        task = tasks.setdefault(item, {"id": item, "data": {"text": f"text of {item}"},
                                       "annotations": []})
        task["annotations"].append({"id": len(task["annotations"]) + 1,
                                    "completed_by": {"id": int(who), "email": who},
                                    "result": _ls_result(label), "was_cancelled": False,
                                    "ground_truth": False})
    for item, label in GOLD.items():
        tasks[item]["annotations"].append({"id": 99, "completed_by": 1, "ground_truth": True,
                                           "result": _ls_result(label)})
    return list(tasks.values())


def test_label_studio_export_reads_labels_and_ground_truth(tmp_path):
    tasks = _label_studio_tasks()
    path = tmp_path / "export.json"
    path.write_text(json.dumps(tasks))
    _same(Annotations.from_label_studio(path), _expected(gold=GOLD))
    # a cancelled annotation and one that skipped the question are counted, not read
    tasks[0]["annotations"].append({"id": 50, "completed_by": 5, "was_cancelled": True,
                                    "result": []})
    tasks[1]["annotations"].append({"id": 51, "completed_by": 5, "result": []})
    path.write_text(json.dumps(tasks))
    with pytest.warns(UserWarning, match=r"left out 1 cancelled annotation\(s\); 1 "
                                         r"annotation\(s\) without an answer"):
        _same(Annotations.from_label_studio(path), _expected(gold=GOLD))


def test_label_studio_with_several_questions_needs_from_name(tmp_path):
    tasks = _label_studio_tasks()
    for task in tasks:
        for annotation in task["annotations"]:
            annotation["result"] += _ls_result("yes", name="sarcasm")
    path = tmp_path / "export.json"
    path.write_text(json.dumps(tasks))
    with pytest.raises(ValueError, match=r"answers 2 questions \('mood', 'sarcasm'\); pass "
                                         r"from_name= to read one"):
        Annotations.from_label_studio(path)
    _same(Annotations.from_label_studio(path, from_name="mood"), _expected(gold=GOLD))
    with pytest.raises(ValueError, match=r"has no answers to 'tone'"):
        Annotations.from_label_studio(path, from_name="tone")


def test_label_studio_refuses_what_it_cannot_read(tmp_path):
    path = tmp_path / "export.json"
    path.write_text('[{"id": 1, "annotations": [}]')
    with pytest.raises(ValueError, match=r"is not JSON: .* at line 1, column"):
        Annotations.from_label_studio(path)
    two = [{"id": 1, "annotations": [{"completed_by": 1, "result": [
        {"from_name": "mood", "type": "choices", "value": {"choices": ["a", "b"]}}]}]}]
    path.write_text(json.dumps(two))
    with pytest.raises(ValueError, match=r"task 1's annotation \? chose 2 options \('a', 'b'\)"):
        Annotations.from_label_studio(path)


def _prodigy_rows():
    return [{"text": f"text of {item}", "_input_hash": item, "_task_hash": hash(item) % 997,
             "options": [{"id": "happy"}, {"id": "sad"}], "accept": [label],
             "answer": "accept", "_annotator_id": f"mood-{who}", "_session_id": f"mood-{who}"}
            for item, who, label in LABELS]


def test_prodigy_choice_tasks_and_ignored_answers(tmp_path):
    rows = _prodigy_rows()
    rows.append({**rows[0], "accept": [], "answer": "ignore"})
    path = tmp_path / "db.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    with pytest.warns(UserWarning, match=r"left out 1 ignored answer\(s\)"):
        ann = Annotations.from_prodigy(path)
    renamed = [(i, f"mood-{w}", y) for i, w, y in LABELS]
    expected = Annotations.from_frame(pd.DataFrame(renamed,
                                                   columns=["item", "annotator", "label"]))
    _same(ann, expected)


def test_prodigy_binary_questions_read_as_accept_and_reject(tmp_path):
    rows = [{"_input_hash": i, "label": "HAPPY", "answer": "accept" if y == "happy"
             else "reject", "_session_id": w} for i, w, y in LABELS]
    rows += [{**r, "label": "SAD"} for r in rows[:2]]
    path = tmp_path / "db.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    with pytest.raises(ValueError, match=r"yes/no questions about 2 labels \('HAPPY', 'SAD'\); "
                                         r"pass label="):
        Annotations.from_prodigy(path)
    ann = Annotations.from_prodigy(path, label="HAPPY")
    coded = [(i, w, "accept" if y == "happy" else "reject") for i, w, y in LABELS]
    _same(ann, Annotations.from_frame(pd.DataFrame(coded, columns=["item", "annotator",
                                                                    "label"])))
    path.write_text(json.dumps(rows[0]) + "\n{not json\n")
    with pytest.raises(ValueError, match=r"line 2, is not JSON"):
        Annotations.from_prodigy(path)


def test_sagemaker_manifest_with_every_workers_answer(tmp_path):
    lines = {}
    for item, who, label in LABELS:
        line = lines.setdefault(item, {
            "source-ref": item, "mood-job": {"annotationsFromAllWorkers": []},
            "mood-job-metadata": {"type": "groundtruth/custom", "human-annotated": "yes"}})
        line["mood-job"]["annotationsFromAllWorkers"].append(
            {"workerId": who, "annotationData": {"content": json.dumps(
                {"mood": {"label": label}})}})
    path = tmp_path / "output.manifest"
    path.write_text("\n".join(json.dumps(v) for v in lines.values()))
    _same(Annotations.from_sagemaker(path), _expected())
    consolidated = {"source-ref": "t1", "mood-job": 0, "mood-job-metadata": {"class-name": "a"}}
    path.write_text(json.dumps(consolidated))
    with pytest.raises(ValueError, match=r"line 1: 'mood-job' holds a consolidated label, not "
                                         r"each worker's answer"):
        Annotations.from_sagemaker(path)


def test_crowd_kit_frame_is_a_long_table():
    frame = pd.DataFrame(LABELS, columns=["task", "worker", "label"])
    gold = pd.Series(GOLD)
    _same(Annotations.from_frame(frame, item="task", annotator="worker", gold=gold),
          _expected(gold=GOLD))
