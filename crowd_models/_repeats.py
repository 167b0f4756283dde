"""Repeated labels: rows that repeat an (item, annotator) pair of the long table,
found in one hash pass over the pairs of a block of items at a time, and what
:meth:`crowd_models.Annotations.from_frame` does with them (``duplicates=``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from crowd_models._text import short_repr, warn

DUPLICATES = ("warn", "keep", "drop", "error")
"""What :meth:`crowd_models.Annotations.from_frame` does with repeated labels: keep
every row and warn (default), keep them silently, drop exact repeats, or refuse."""


BLOCK_ROWS = 1 << 21
"""About this many rows are hashed at a time: the pairs of one block of items (a
pair repeats only within its item), so the hash table stays small however long
the table is."""


def _pair_keys(item_idx, annotator_idx, n_annotators: int, rows=None) -> np.ndarray:
    """item * n_annotators + annotator, in int64 whatever the codes' type."""
    if rows is not None:
        item_idx, annotator_idx = item_idx[rows], annotator_idx[rows]
    return item_idx.astype(np.int64) * np.int64(n_annotators) + annotator_idx


def _seen_twice(item_idx, annotator_idx, n_annotators: int, block_rows: int) -> np.ndarray:
    """Rows whose (item, annotator) pair occurs more than once, a block of items at a time."""
    n_blocks = -(-len(item_idx) // block_rows)
    if n_blocks <= 1:
        keys = _pair_keys(item_idx, annotator_idx, n_annotators)
        return pd.Series(keys).duplicated(keep=False).to_numpy()
    edges = np.linspace(0, int(item_idx.max()) + 1, n_blocks + 1).round().astype(np.int64)
    twice = np.zeros(len(item_idx), dtype=bool)
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        rows = np.flatnonzero((item_idx >= lo) & (item_idx < hi))
        keys = _pair_keys(item_idx, annotator_idx, n_annotators, rows)
        twice[rows] = pd.Series(keys).duplicated(keep=False).to_numpy()
    return twice


def repeated_labels(item_idx: np.ndarray, annotator_idx: np.ndarray, labels: np.ndarray,
                    n_annotators: int, block_rows: int = BLOCK_ROWS) -> tuple[np.ndarray,
                                                                              np.ndarray]:
    """Rows that repeat an earlier row's (item, annotator, label) exactly, and rows of
    (item, annotator) pairs that hold more than one distinct label.

    Both are boolean masks over the rows; every row of a conflicting pair is marked.
    Only the rows of pairs seen twice are grouped, so a table without repeated pairs
    costs one hash pass (in blocks of items of about ``block_rows`` rows).
    """
    twice = _seen_twice(item_idx, annotator_idx, n_annotators, block_rows)
    repeat = np.zeros(len(twice), dtype=bool)
    conflict = np.zeros(len(twice), dtype=bool)
    if not twice.any():
        return repeat, conflict
    rows = np.flatnonzero(twice)
    sub = pd.DataFrame({"pair": _pair_keys(item_idx, annotator_idx, n_annotators, rows),
                        "label": labels[rows]})
    repeat[rows] = sub.duplicated().to_numpy()
    n_distinct = sub.groupby("pair")["label"].transform("nunique").to_numpy()
    conflict[rows] = n_distinct > 1
    return repeat, conflict


def _pair_examples(rows, item_idx, annotator_idx, labels, items, annotators, classes,
                   n: int = 3) -> str:
    """A few (item, annotator) pairs among ``rows``, each with its labels."""
    shown = []
    for pair in pd.unique(_pair_keys(item_idx, annotator_idx, len(annotators), rows))[:n]:
        i, a = divmod(int(pair), len(annotators))
        values = labels[(item_idx == i) & (annotator_idx == a)]
        names = values if classes is None else classes[values]
        shown.append(f"item {short_repr(items[i])}, annotator {short_repr(annotators[a])}: "
                     f"{', '.join(short_repr(v) for v in names)}")
    return "; ".join(shown)


def repeats_handled(item_idx, annotator_idx, labels, items, annotators, classes,
                     duplicates: str):
    """Warn of (or refuse) repeated labels as ``duplicates`` says; the rows to keep when
    some are dropped (None: every row)."""
    repeat, conflict = repeated_labels(item_idx, annotator_idx, labels, len(annotators))
    context = (item_idx, annotator_idx, labels, items, annotators, classes)
    messages = []
    if repeat.any():
        n_pairs = len(pd.unique(_pair_keys(item_idx, annotator_idx, len(annotators), repeat)))
        messages.append(
            f"{repeat.sum()} row(s) repeat an earlier row's item, annotator and label exactly "
            f"({n_pairs} pair(s), e.g. {_pair_examples(repeat, *context)})")
    if conflict.any():
        n_pairs = len(pd.unique(_pair_keys(item_idx, annotator_idx, len(annotators),
                                           conflict)))
        messages.append(
            f"{n_pairs} (item, annotator) pair(s) have different labels on {conflict.sum()} "
            f"row(s) (e.g. {_pair_examples(conflict, *context)})")
    if not messages:
        return None
    text = "; ".join(messages)
    if duplicates == "error":
        raise ValueError(
            f"{text}. Pass duplicates='drop' to drop exact repeats, duplicates='keep' if "
            f"annotators labelled items more than once by design, or clean the table first."
        )
    if duplicates == "drop":
        kept = (f"kept: {messages[-1]}; each of those rows counts as a label (drop or keep "
                f"one per pair first to count it once)" if conflict.any() else "")
        if not repeat.any():
            warn(kept[0].upper() + kept[1:] + ".")
            return None
        warn(f"dropped {repeat.sum()} row(s) that repeat an earlier row's item, annotator and "
             f"label exactly (duplicates='drop')" + (f"; {kept}." if kept else "."))
        return ~repeat
    warn(f"{text}. Every row counts as an independent label, which inflates the label counts "
         f"and narrows every interval. If the table was exported or joined twice, pass "
         f"duplicates='drop'; if annotators labelled items more than once by design, pass "
         f"duplicates='keep' to confirm; duplicates='error' refuses them.")
    return None
