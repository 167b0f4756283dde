"""`Annotations`: the one parsed container every model, EM and report reads.

A long table (one row per annotation: item, annotator, label) is parsed once
into integer codes plus coordinates that keep the user's own ids and class
names. Sizes come from the coordinates, never from ``max(idx) + 1``.

Orders, so that arrays can be aligned with them:

* items and annotators: order of first appearance in the long table (row
  order and column order for :meth:`Annotations.from_wide`);
* classes: the ``classes=`` argument if given; otherwise, for a pandas
  ``Categorical`` label column, its categories in their declared order
  (unused categories included); otherwise sorted. For binary families the
  *second* class is the positive one (``classes=[0, 1]``, ``[False, True]``,
  ``["benign", "malignant"]``), unless ``positive=`` names it
  (:meth:`Annotations.with_positive`); for ordinal families the class order is the
  order of the levels.

What the parser refuses and what it only warns about (each message names the
rows or ids and the fix):

* errors: a missing, empty or whitespace-only item id, annotator id or label;
  a non-finite label (``inf``, ``-inf``; NaN counts as missing); one column
  named for two roles; many distinct non-integer numbers as class labels
  ("did you mean ``continuous=True``?"); duplicate feature names; gold or
  feature ids that match the item ids only once converted to text or
  stripped of whitespace (a type or whitespace mismatch); gold that matches
  no item at all.
* warnings (the data are used as given): ids or labels that differ only in
  surrounding whitespace (``'yes'`` / ``' yes'``, pass ``strip=True``) or only
  in type (``1`` / ``'1'``); classes with no labels; a class that looks like a
  missing-value code (see :func:`_missing_codes`); more than
  ``_MANY_CLASSES`` integer classes found without ``classes=``; gold ids of
  items that have no labels (ignored).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import xarray as xr

from crowd_models import _dims as D
from crowd_models._text import examples, listing, short_repr

__all__ = ["Annotations"]

_MANY_CLASSES = 20
"""More distinct numeric labels than this, found without ``classes=``, are
probably measurements: non-integer ones are refused ("did you mean
continuous=True?"), integer ones give a warning."""

_MISSING_WORDS = frozenset({"na", "n/a", "#n/a", "nan", "none", "null", "missing", "?", "-",
                            "--", "."})
"""String classes (compared stripped and lower-cased) that look like a
missing-value code rather than a class."""

_SKIP = (os.path.dirname(os.path.abspath(__file__)) + os.sep,)
"""Frames in these folders (the crowd_models package) are skipped when a warning
names the line that caused it: the warning points at the user's call."""


def _warn(message: str) -> None:
    """A UserWarning attributed to the first caller outside crowd_models."""
    warnings.warn(message, UserWarning, skip_file_prefixes=_SKIP)


def _same_class(a, b) -> bool:
    """Whether two class values are equal as values of the same kind (``1`` is not ``'1'``)."""
    if isinstance(a, str) != isinstance(b, str):
        return False
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def _is_text(values) -> bool:
    """Whether a Series / Index may hold strings (object, str or string dtype)."""
    return values.dtype == object or pd.api.types.is_string_dtype(values)


def _strip(values: pd.Series) -> pd.Series:
    """Strip surrounding whitespace from the strings; other values are kept."""
    if pd.api.types.is_string_dtype(values) and values.dtype != object:
        return values.str.strip()
    if values.dtype == object:
        return values.map(lambda v: v.strip() if isinstance(v, str) else v)
    return values


def _strip_index(index: pd.Index) -> pd.Index:
    if not _is_text(index):
        return index
    return pd.Index([v.strip() if isinstance(v, str) else v for v in index], name=index.name)


def _as_stripped_text(values) -> pd.Series:
    """The values converted to text and stripped of surrounding whitespace (vectorised)."""
    if values.dtype != object and pd.api.types.is_string_dtype(values):
        return pd.Series(values).reset_index(drop=True).str.strip()
    return pd.Series(np.asarray(values, dtype=object)).astype(str).str.strip()


def _blank(values) -> np.ndarray:
    """Mask of the strings that are empty or whitespace only (of text dtypes only)."""
    if not _is_text(values):
        return np.zeros(len(values), dtype=bool)
    return _as_stripped_text(values).eq("").to_numpy()


def _near_duplicates(values: pd.Index) -> list[list]:
    """Groups of distinct values that are equal once converted to text and stripped
    of surrounding whitespace ('yes' / ' yes', 1 / '1')."""
    if len(values) < 2 or not _is_text(values):
        return []
    keys = _as_stripped_text(values)
    dup = keys.duplicated(keep=False).to_numpy()
    if not dup.any():
        return []
    groups: dict[str, list] = {}
    for key, value in zip(keys[dup], values[dup], strict=True):
        groups.setdefault(key, []).append(value)
    return list(groups.values())


def _groups_text(groups, n: int = 3) -> str:
    shown = "; ".join(" and ".join(short_repr(v) for v in g) for g in groups[:n])
    return shown + (f"; ... ({len(groups)} groups in all)" if len(groups) > n else "")


def _warn_near_duplicates(values: pd.Index, what: str, becomes: str) -> None:
    groups = _near_duplicates(values)
    if not groups:
        return
    spaced = [g for g in groups if len({type(v) for v in g}) == 1]
    typed = [g for g in groups if len({type(v) for v in g}) > 1]
    if spaced:
        _warn(
            f"{what}: {_groups_text(spaced)} differ only in surrounding whitespace, so they "
            f"count as different {becomes}. Pass strip=True to strip surrounding whitespace "
            f"from ids and labels, or clean them first (.str.strip())."
        )
    if typed:
        _warn(
            f"{what}: {_groups_text(typed)} differ only in type, so they count as different "
            f"{becomes}. Make them one type first (e.g. .astype(str))."
        )


def _text_matches(values, targets) -> list[tuple]:
    """(value, target) pairs where a value not among ``targets`` equals a target once
    both are converted to text and stripped: a type or whitespace mismatch."""
    keyed: dict[str, object] = {}
    for t in targets:
        keyed.setdefault(str(t).strip(), t)
    pairs = []
    for v in values:
        key = str(v).strip()
        if key in keyed:
            pairs.append((v, keyed[key]))
    return pairs


def _mismatch_text(pairs, what: str, targets: str) -> str:
    """Say how ``what`` differ from ``targets`` in the pairs of :func:`_text_matches`."""
    by_type = [(v, t) for v, t in pairs if type(v) is not type(t)]
    if by_type:
        v, t = by_type[0]
        v_type, t_type = type(v).__name__, type(t).__name__
        return (
            f"{len(by_type)} of {what} match {targets} only once both are converted to text: "
            f"{what} are {v_type} (e.g. {short_repr(v)}) where {targets} are {t_type} (e.g. "
            f"{short_repr(t)}). Make both the same type (e.g. convert {what} with "
            f".astype({t_type}))"
        )
    v, t = pairs[0]
    return (
        f"{len(pairs)} of {what} differ from {targets} only in surrounding whitespace (e.g. "
        f"{short_repr(v)} against {short_repr(t)}). Pass strip=True, or strip them first"
    )


def _is_number(value) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool | np.bool_)


def _is_integer(value) -> bool:
    return _is_number(value) and np.isfinite(value) and float(value).is_integer()


def _missing_codes(classes) -> list:
    """Classes that look like a missing-value code rather than a class.

    The heuristic, kept simple on purpose (it only warns):

    * a string class that, stripped and lower-cased, is one of ``_MISSING_WORDS``
      (``"NA"``, ``"n/a"``, ``"nan"``, ``"None"``, ``"null"``, ``"missing"``,
      ``"?"``, ``"-"``, ...); the empty string is refused outright as an empty
      label;
    * when every class is an integer: the one negative class among classes
      ``>= 0``, unless the classes are symmetric about 0 (``-1`` among
      ``0, 1, 2``, but not in ``-1, 1`` or ``-1, 0, 1``);
    * when every class is an integer: a code made of nines (``9``, ``99``,
      ``-99``, ``999``, ...) lying further from the other classes than their
      own span (``99`` among ``1..5``, ``9`` among ``1, 2``; not ``9`` among
      ``0..9``).
    """
    classes = list(classes)
    found = [c for c in classes if isinstance(c, str) and c.strip().lower() in _MISSING_WORDS]
    if len(classes) < 2 or not all(_is_integer(c) for c in classes):
        return found
    values = [int(c) for c in classes]
    ordered = sorted(set(values))
    if len(ordered) < 2:
        return found
    symmetric = {-v for v in ordered} == set(ordered)
    for c, v in zip(classes, values, strict=True):
        # the smallest and largest of the other classes
        lo = ordered[1] if v == ordered[0] else ordered[0]
        hi = ordered[-2] if v == ordered[-1] else ordered[-1]
        span = hi - lo
        if v < 0 and lo >= 0 and not symmetric:
            found.append(c)
        elif abs(v) >= 9 and set(str(abs(v))) == {"9"} and (
                v > hi + span + 1 or v < lo - span - 1):
            found.append(c)
    return found


# --------------------------------------------------------------------- ids
def _parse_ids(col: pd.Series, rows, role: str, what: str, strip: bool):
    """Codes (first appearance) and the distinct ids of one id column."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        # unused categories are not items/annotators: only the values count
        col = col.astype(col.cat.categories.dtype)
    if strip:
        col = _strip(col)
    codes, ids = pd.factorize(col, sort=False)
    ids = pd.Index(ids)
    blank = _blank(ids)
    if blank.any():
        on = np.isin(codes, np.flatnonzero(blank))
        raise ValueError(
            f"{what} is empty or whitespace only on {on.sum()} row(s), e.g. rows "
            f"{examples(rows[on])}; every annotation needs a real {role} id (as it needs a "
            f"label). Fill in or drop those rows first."
        )
    _warn_near_duplicates(ids, what, f"{role}s")
    return codes, ids


def _check_wide_ids(index: pd.Index, what: str, where: str) -> None:
    """Missing or blank ids in the index or columns of a wide matrix."""
    missing = np.asarray(pd.isna(index), dtype=bool)
    blank = _blank(index)
    bad = missing | blank
    if bad.any():
        raise ValueError(
            f"the {what} hold {bad.sum()} missing, empty or whitespace-only id(s), at "
            f"position(s) {examples(np.flatnonzero(bad))}; every {where} needs a real id. "
            f"Name them, or drop them first."
        )


def _check_roles(**columns) -> None:
    """One column may play one role only."""
    seen: dict = {}
    for role, col in columns.items():
        for other, other_col in seen.items():
            if col == other_col:
                raise ValueError(
                    f"the {other} and {role} columns are both {col!r}: one column cannot be "
                    f"both. Name a different column for each ({other}=..., {role}=...)."
                )
        seen[role] = col


@dataclass(frozen=True, eq=False)
class Annotations:
    """Parsed annotations.

    Attributes
    ----------
    item_idx, annotator_idx : int arrays, shape (annotation,)
        Codes into :attr:`items` and :attr:`annotators`.
    labels : array, shape (annotation,)
        Integer codes into :attr:`classes` for categorical labels, floats for
        continuous labels (then ``classes is None``).
    items, annotators : pandas.Index
        The user's ids in code order.
    classes : pandas.Index or None
        Class names in code order; None for continuous labels.
    features : float array (item, feature) or None
    feature_names : pandas.Index or None
    gold : array (item,) or None
        Gold class codes (-1 where unknown), or gold values (NaN where
        unknown) for continuous labels.
    truth : xarray.Dataset or None
        The true parameters of a simulation (set by ``simulate``).
    """

    item_idx: np.ndarray
    annotator_idx: np.ndarray
    labels: np.ndarray
    items: pd.Index
    annotators: pd.Index
    classes: pd.Index | None
    features: np.ndarray | None = None
    feature_names: pd.Index | None = None
    gold: np.ndarray | None = None
    truth: xr.Dataset | None = field(default=None, repr=False)

    # ------------------------------------------------------------------ build
    @classmethod
    def from_frame(
        cls,
        df: pd.DataFrame,
        item: str = "item",
        annotator: str = "annotator",
        label: str = "label",
        *,
        classes: Sequence | None = None,
        features=None,
        gold=None,
        continuous: bool = False,
        strip: bool = False,
    ) -> Annotations:
        """Parse a long table with one row per annotation.

        Parameters
        ----------
        df : DataFrame
            One row per annotation. The same annotator may label the same item
            more than once; every row counts. Item and annotator ids must be
            present and not empty or whitespace only (a ``ValueError`` names
            the rows).
        item, annotator, label : str
            Column names; three different columns (one column cannot be, say,
            both the item and the label column).
        classes : sequence, optional
            The class order (categorical labels). Default: the categories of
            a pandas ``Categorical`` label column, in their declared order,
            unused ones included; otherwise the sorted distinct labels.
            Declare it to fix the order or to include a class nobody used (a
            class without labels gives a ``UserWarning``). It takes precedence
            over a Categorical's categories. Classes must be finite (no NaN,
            ``inf``). Declaring it also confirms classes that would otherwise
            warn (a missing-value-like code such as ``-1`` or ``"NA"``, more
            than 20 integer classes).
        features : DataFrame indexed by item id, or array (item, feature)
            aligned with the item order (first appearance), optional. Column
            names must be unique (also once converted to text).
        gold : mapping or Series indexed by item id, or array, optional
            A mapping (``dict`` or ``Series``) from item id to gold label;
            NaN, None or an absent id means unknown. Ids of items that have no
            labels are ignored with a ``UserWarning`` giving their count (a full
            gold file may cover more items than were labelled); a mapping that
            matches no item at all is refused. Ids must match the item ids by
            type: gold ids that equal item ids only once both are converted to
            text (``'7'`` against ``7``) or stripped of whitespace raise a
            ``ValueError`` that says so; they are not matched silently. An
            array (or list) is aligned with the item order.
        continuous : bool
            Labels are real numbers (no classes); they must be finite.
            Without it, more than 20 distinct non-integer numbers are refused
            ("did you mean continuous=True?").
        strip : bool
            Strip surrounding whitespace from string item ids, annotator ids,
            labels, ``classes=``, and the ids and labels of ``gold`` and
            ``features``. Default False: ids or labels that differ only in
            surrounding whitespace (``'yes'`` and ``' yes'``, ``'Zoë'`` and
            ``'Zoë '``) are kept apart, with a ``UserWarning`` listing them.
        """
        if not isinstance(df, pd.DataFrame):
            raise TypeError(
                f"Annotations.from_frame expects a pandas DataFrame with one row per "
                f"annotation, got {type(df).__name__}. For an items x annotators matrix "
                f"use Annotations.from_wide."
            )
        _check_roles(item=item, annotator=annotator, label=label)
        for arg, col in (("item", item), ("annotator", annotator), ("label", label)):
            if col not in df.columns:
                raise ValueError(
                    f"column {col!r} (the {arg} column) is not in the table; its columns are "
                    f"{examples(df.columns, 12)}. Pass {arg}='<column name>' to name it."
                )
            n_same = sum(1 for c in df.columns if c == col)
            if n_same > 1:
                raise ValueError(
                    f"the table has {n_same} columns named {col!r} (the {arg} column); column "
                    f"names must be unique. Rename or drop the extra ones "
                    f"(df.loc[:, ~df.columns.duplicated()] keeps the first)."
                )
        if len(df) == 0:
            raise ValueError("the table has zero annotations (no rows); there is nothing to fit.")
        item_idx, items, annotator_idx, annotators, labels, classes = cls._parse_long(
            df, item, annotator, label, classes, continuous, strip,
            where={"item": f"column {item!r} (the item ids)",
                   "annotator": f"column {annotator!r} (the annotator ids)"},
            missing_fix=f"drop those rows (df[~df[{label!r}].isin({{codes}})])",
        )
        return cls._assemble(
            item_idx, annotator_idx, labels, items, annotators, classes, features, gold,
            strip=strip,
        )

    @staticmethod
    def _parse_long(df, item, annotator, label, classes, continuous, strip, *, where,
                    missing_fix):
        for arg, col in (("item", item), ("annotator", annotator)):
            missing = df[col].isna().to_numpy()
            if missing.any():
                raise ValueError(
                    f"{where[arg]} is missing on {missing.sum()} row(s), e.g. "
                    f"rows {examples(df.index[missing])}; every annotation needs an {arg} id. "
                    f"Drop or fill those rows first."
                )
        item_idx, items = _parse_ids(df[item], df.index, "item", where["item"], strip)
        annotator_idx, annotators = _parse_ids(df[annotator], df.index, "annotator",
                                               where["annotator"], strip)
        labels, classes = _parse_labels(df[label], df.index, label, classes, continuous,
                                        strip=strip, missing_fix=missing_fix)
        return item_idx, items, annotator_idx, annotators, labels, classes

    @classmethod
    def from_wide(
        cls,
        matrix,
        *,
        classes: Sequence | None = None,
        features=None,
        gold=None,
        continuous: bool = False,
        missing=None,
        strip: bool = False,
    ) -> Annotations:
        """Parse an items x annotators matrix; NaN (or None) marks a missing label.

        A DataFrame keeps its index as item ids and its columns as annotator
        ids; a 2-D array gets ids 0..n-1. Ids must be unique, present and not
        empty.

        Parameters
        ----------
        matrix : DataFrame or 2-D array
        classes, features, gold, continuous, strip
            As for :meth:`from_frame` (``strip`` also strips the index and
            the columns). When every column is a pandas ``Categorical`` with
            the same categories, those give the class order, as in
            :meth:`from_frame`.
        missing : scalar or list, optional
            Further cells that mean "no label", besides NaN and None: e.g.
            ``missing=-1`` or ``missing=[-1, "NA"]``. Cells are compared by
            value, and types matter (``-1`` matches ``-1`` and ``-1.0``, not
            ``"-1"``); a code that matches no cell gives a ``UserWarning``.
            Without it, a class that looks like a missing-value code gives a
            ``UserWarning`` that suggests it (a negative integer among
            non-negative classes, an all-nines code such as ``99`` far from the
            other classes, strings such as ``"NA"`` or ``"?"``; see
            ``_missing_codes``), unless ``classes=`` declares the classes.
        """
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
            _check_wide_ids(index, what, where)
        if strip:
            matrix = matrix.copy()
            matrix.index = _strip_index(matrix.index)
            matrix.columns = _strip_index(matrix.columns)
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
                _warn(
                    f"missing={listing(codes)} matches no cell of the matrix; nothing was "
                    f"treated as missing. Types matter: -1 and '-1' differ."
                )
            matrix = matrix.mask(hit)
        dtypes = list(matrix.dtypes)
        categories = None
        if any(isinstance(t, pd.CategoricalDtype) for t in dtypes) and not continuous:
            cats = [t.categories for t in dtypes if isinstance(t, pd.CategoricalDtype)]
            if len(cats) == len(dtypes) and all(c.equals(cats[0]) for c in cats):
                categories = cats[0]
            elif classes is None:
                _warn(
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
        # continuous labels are converted (and checked) by _parse_labels
        _, _, _, _, labels, classes = cls._parse_long(
            long, "item", "annotator", "label", classes, continuous, strip,
            where={"item": "the item ids (the index)",
                   "annotator": "the annotator ids (the columns)"},
            missing_fix="pass missing={codes}",
        )
        # keep the matrix's row/column order rather than first appearance
        item_order = pd.Index(matrix.index)
        ann_order = pd.Index(matrix.columns)
        return cls._assemble(item_order.get_indexer(long["item"]),
                             ann_order.get_indexer(long["annotator"]), labels, item_order,
                             ann_order, classes, features, gold, strip=strip)

    @classmethod
    def _assemble(cls, item_idx, annotator_idx, labels, items, annotators, classes,
                  features, gold, truth=None, *, strip=False) -> Annotations:
        feats, feature_names = _parse_features(features, items, strip=strip)
        gold_arr = _parse_gold(gold, items, classes, strip=strip)
        return cls(
            item_idx=np.asarray(item_idx, dtype=np.int64),
            annotator_idx=np.asarray(annotator_idx, dtype=np.int64),
            labels=labels,
            items=items,
            annotators=annotators,
            classes=classes,
            features=feats,
            feature_names=feature_names,
            gold=gold_arr,
            truth=truth,
        )

    # ------------------------------------------------------------ properties
    @property
    def continuous(self) -> bool:
        return self.classes is None

    @property
    def n_items(self) -> int:
        return len(self.items)

    @property
    def n_annotators(self) -> int:
        return len(self.annotators)

    @property
    def n_classes(self) -> int:
        if self.classes is None:
            raise ValueError("continuous annotations have no classes")
        return len(self.classes)

    @property
    def n_annotations(self) -> int:
        return len(self.item_idx)

    @property
    def n_features(self) -> int:
        return 0 if self.features is None else self.features.shape[1]

    @property
    def has_gold(self) -> bool:
        if self.gold is None:
            return False
        return bool(np.any(~np.isnan(self.gold)) if self.continuous else np.any(self.gold >= 0))

    def coords(self) -> dict[str, pd.Index]:
        """Coordinates for PyMC models and xarray outputs."""
        c = {D.ITEM: self.items, D.ANNOTATOR: self.annotators}
        if self.classes is not None:
            c[D.TRUE_CLASS] = self.classes
            c[D.LABEL_CLASS] = self.classes
        if self.feature_names is not None:
            c[D.FEATURE] = self.feature_names
        return c

    def n_labels(self) -> np.ndarray:
        """Number of labels each annotator gave (repeats counted), annotator order."""
        return np.bincount(self.annotator_idx, minlength=self.n_annotators)

    def class_counts(self) -> np.ndarray:
        """(item, class) matrix of label counts (repeats counted)."""
        flat = self.item_idx * self.n_classes + self.labels
        counts = np.bincount(flat, minlength=self.n_items * self.n_classes)
        return counts.reshape(self.n_items, self.n_classes)

    def gold_series(self) -> pd.Series:
        """Gold labels by item id (user's class names), unknown items dropped."""
        if self.gold is None:
            return pd.Series(dtype=object, name="gold")
        if self.continuous:
            s = pd.Series(self.gold, index=self.items, name="gold")
            return s.dropna()
        known = self.gold >= 0
        return pd.Series(self.classes[self.gold[known]], index=self.items[known], name="gold")

    def to_frame(self) -> pd.DataFrame:
        """The long table with the user's ids and class names."""
        labels = self.labels if self.continuous else self.classes[self.labels]
        return pd.DataFrame(
            {
                "item": self.items[self.item_idx],
                "annotator": self.annotators[self.annotator_idx],
                "label": labels,
            }
        )

    def with_positive(self, positive) -> Annotations:
        """The same annotations with ``positive`` as the positive class.

        Binary families (two-coin, feature accuracy) take the *second* class as
        the positive one: sensitivity is the rate of positive labels on
        positive items. This returns a copy whose two classes are ordered so
        that ``positive`` comes second, with labels and gold recoded to match.

        Parameters
        ----------
        positive : object
            One of the two :attr:`classes`, matched exactly (``1`` does not
            match the class ``'1'``; the error says so).

        Returns
        -------
        Annotations
            ``self`` when ``positive`` is already second; otherwise a copy
            with the classes swapped. A simulation's ``truth`` refers to the
            old order, so the copy drops it (with a ``UserWarning``).

        Examples
        --------
        >>> ann = Annotations.from_frame(df)  # classes ['sick', 'well']
        >>> ann.with_positive("sick").classes.tolist()
        ['well', 'sick']
        """
        if self.continuous:
            raise ValueError("positive= is for two-class labels; these annotations are "
                             "continuous.")
        if self.n_classes != 2:
            raise ValueError(
                f"positive= picks one of two classes; these annotations have "
                f"{self.n_classes}: {listing(self.classes)}. Binary families need two "
                f"classes (Dawid-Skene takes more).")
        found = [k for k, c in enumerate(self.classes) if _same_class(c, positive)]
        if not found:
            as_text = [c for c in self.classes if str(c) == str(positive)]
            hint = (f" {as_text[0]!r} matches it only as text: pass positive={as_text[0]!r}."
                    if as_text else "")
            raise ValueError(
                f"positive={positive!r} is not one of the classes "
                f"{listing(self.classes)}.{hint}")
        if found[0] == 1:
            return self
        if self.truth is not None:
            warnings.warn(
                "with_positive: the simulation's true parameters refer to the old class "
                "order, so the recoded annotations carry no truth (truth=None).",
                UserWarning, stacklevel=2)
        gold = None if self.gold is None else np.where(self.gold >= 0, 1 - self.gold,
                                                       self.gold)
        return replace(self, labels=1 - self.labels, classes=self.classes[::-1],
                       gold=gold, truth=None)

    def select(self, rows) -> Annotations:
        """A new container with a subset of the annotation rows (boolean mask or indices).

        Items and annotators left with no labels are dropped; features and gold
        follow the remaining items.
        """
        rows = np.asarray(rows)
        if rows.dtype == bool:
            if rows.shape != self.item_idx.shape:
                raise ValueError(
                    f"the row mask has shape {rows.shape}, expected ({self.n_annotations},)."
                )
            rows = np.flatnonzero(rows)
        if rows.size == 0:
            raise ValueError("the selection keeps zero annotations.")
        item_keep, item_idx = np.unique(self.item_idx[rows], return_inverse=True)
        ann_keep, ann_idx = np.unique(self.annotator_idx[rows], return_inverse=True)
        return replace(
            self,
            item_idx=item_idx.astype(np.int64),
            annotator_idx=ann_idx.astype(np.int64),
            labels=self.labels[rows],
            items=self.items[item_keep],
            annotators=self.annotators[ann_keep],
            features=None if self.features is None else self.features[item_keep],
            gold=None if self.gold is None else self.gold[item_keep],
            truth=None,
        )

    def with_features(self, features) -> Annotations:
        """The same annotations with other features (or None)."""
        feats, names = _parse_features(features, self.items)
        return replace(self, features=feats, feature_names=names)

    def __repr__(self) -> str:
        kind = "continuous" if self.continuous else (
            f"{self.n_classes} classes {listing(self.classes)}")
        return (
            f"Annotations({self.n_annotations} labels, {self.n_items} items, "
            f"{self.n_annotators} annotators, {kind}, {self.n_features} features, "
            f"gold={'yes' if self.has_gold else 'no'})"
        )


# ----------------------------------------------------------------- parsing
def _parse_labels(raw: pd.Series, index, label: str, classes, continuous: bool, *,
                  strip: bool = False, missing_fix: str = "drop those rows"):
    declared = classes is not None
    categories = None
    if isinstance(raw.dtype, pd.CategoricalDtype):
        categories = list(raw.cat.categories)
        raw = raw.astype(object)
    if strip:
        raw = _strip(raw)
        if categories is not None:
            categories = list(dict.fromkeys(
                c.strip() if isinstance(c, str) else c for c in categories))
    missing = raw.isna().to_numpy()
    if _is_text(raw):
        # not |=: under pandas copy-on-write .to_numpy() may return a read-only array
        blank = raw.astype(str).str.strip().eq("").to_numpy() & raw.notna().to_numpy()
        missing = missing | blank
    if missing.any():
        raise ValueError(
            f"column {label!r} (the labels) is missing or empty on {missing.sum()} row(s), "
            f"e.g. rows {examples(index[missing])}. A row means an annotation was given: drop "
            f"rows without a label first (df.dropna(subset=[{label!r}]))."
        )
    if continuous:
        if declared:
            raise ValueError("continuous labels have no classes: drop classes= or continuous=True.")
        values = pd.to_numeric(raw, errors="coerce")
        bad = values.isna().to_numpy()
        if bad.any():
            raise TypeError(
                f"continuous labels must be numbers; column {label!r} holds non-numeric values "
                f"{examples(raw[bad].unique())}. Convert them, or drop continuous=True for "
                f"categorical labels."
            )
        values = values.to_numpy(dtype=float)
        infinite = ~np.isfinite(values)
        if infinite.any():
            raise ValueError(
                f"continuous labels must be finite; column {label!r} holds infinite values on "
                f"rows {examples(index[infinite])} ({infinite.sum()} row(s)): inf and -inf "
                f"are not labels. Drop or correct those rows first."
            )
        return values, None
    uniques = pd.unique(raw)
    non_finite = [v for v in uniques if _is_number(v) and not np.isfinite(v)]
    if non_finite:
        rows = raw.isin(non_finite).to_numpy()
        raise ValueError(
            f"column {label!r} holds the non-finite label(s) {examples(non_finite)} on "
            f"{rows.sum()} row(s), e.g. rows {examples(index[rows])}: inf and -inf are not "
            f"classes. Drop or correct those rows first."
        )
    source = "classes="
    if not declared:
        if categories is not None:
            source = f"the categories of column {label!r}"
            _warn_near_duplicates(pd.Index(categories, dtype=object),
                                  f"the categories of column {label!r}", "classes")
            classes = categories
            if len(classes) < 2:
                raise ValueError(
                    f"column {label!r} is Categorical with the single category "
                    f"{listing(classes)}: one class only, so there is nothing to learn. If "
                    f"other classes exist, add them (.cat.add_categories) or declare them "
                    f"with classes=[...]."
                )
        else:
            _warn_near_duplicates(pd.Index(uniques), f"the labels in column {label!r}",
                                  "classes")
            _check_many_classes(uniques, label)
            try:
                classes = sorted(uniques)
            except TypeError as err:
                raise TypeError(
                    f"the labels in column {label!r} mix types that cannot be sorted "
                    f"({examples(uniques)}); pass classes=[...] to give the class order, or "
                    f"make the column one type."
                ) from err
            if len(classes) < 2:
                raise ValueError(
                    f"every label is {short_repr(classes[0])}: one class only, so there is "
                    f"nothing to learn. If other classes exist, declare them with "
                    f"classes=[...]."
                )
    else:
        classes = list(classes)
        if strip:
            classes = [c.strip() if isinstance(c, str) else c for c in classes]
        unreal = [c for c in classes
                  if c is None or c is pd.NA or (_is_number(c) and not np.isfinite(c))]
        if unreal:
            raise ValueError(
                f"classes= holds {examples(unreal)}: a class must be a finite value (NaN and "
                f"None mean a missing label, inf is not a class). Remove them from classes=."
            )
        dup = pd.Index(classes, dtype=object)
        dup = dup[dup.duplicated()]
        if len(dup):
            raise ValueError(
                f"classes= has duplicates: {examples(dup.unique())}; name each class once "
                f"(got {listing(classes)})."
            )
        if len(classes) < 2:
            raise ValueError(f"classes= must name at least two classes, got {classes}.")
    classes = pd.Index(classes)
    codes = classes.get_indexer(raw.to_numpy())
    bad = codes < 0
    if bad.any():
        outside = pd.unique(raw[bad])
        pairs = _text_matches(outside, classes)
        raise ValueError(
            f"labels {examples(outside)} in column {label!r} are not among the "
            f"classes {listing(classes)} (on {bad.sum()} row(s)). Add them to classes=, or fix "
            f"the labels (types matter: 1 and '1' differ)"
            + (f"; {_mismatch_text(pairs, 'these labels', 'the classes')}" if pairs else "")
            + "."
        )
    unused = classes[np.bincount(codes, minlength=len(classes)) == 0]
    if unused.size:
        fix = "" if source == "classes=" else (
            f" Drop unused categories first (df[{label!r}].cat.remove_unused_categories()) if "
            f"they are not classes.")
        _warn(
            f"class(es) {examples(unused)} of {source} never occur among the labels; "
            f"models learn about them from their priors only.{fix}"
        )
    if not declared:
        like_missing = _missing_codes(classes)
        if like_missing:
            _warn(
                f"class(es) {examples(like_missing)} look like missing-value codes rather "
                f"than classes (the classes are {listing(classes)}); they are kept as "
                f"classes. If they mean no label, "
                f"{missing_fix.replace('{codes}', listing(like_missing))}; if they are "
                f"classes, declare classes=[...] to confirm."
            )
    return codes.astype(np.int64), classes


def _check_many_classes(uniques, label: str) -> None:
    """Many distinct numbers as classes: probably continuous labels."""
    if len(uniques) <= _MANY_CLASSES or not all(_is_number(v) for v in uniques):
        return
    fractional = [v for v in uniques if not float(v).is_integer()]
    if fractional:
        raise ValueError(
            f"column {label!r} holds {len(uniques)} distinct numbers, e.g. "
            f"{examples(fractional, 3)}, not integer class codes: as classes they would make "
            f"{len(uniques)} classes. Did you mean continuous=True (--continuous on the "
            f"command line)? To keep them as classes, declare them with classes=[...]."
        )
    _warn(
        f"column {label!r} holds {len(uniques)} distinct integer labels, so there are "
        f"{len(uniques)} classes. If they are measurements or ratings on a scale, did you mean "
        f"continuous=True? Declare classes=[...] to confirm they are classes."
    )


def _parse_features(features, items: pd.Index, *, strip: bool = False):
    if features is None:
        return None, None
    if isinstance(features, pd.DataFrame):
        if strip:
            features = features.set_axis(_strip_index(features.index), axis=0)
        dup_cols = features.columns[features.columns.duplicated()]
        if len(dup_cols):
            raise ValueError(
                f"features have duplicate column names: {examples(dup_cols.unique())}; each "
                f"feature needs its own name. Rename them, or drop the repeats "
                f"(features.loc[:, ~features.columns.duplicated()] keeps the first)."
            )
        names = pd.Index(features.columns.astype(str))
        clash = names.duplicated(keep=False)
        if clash.any():
            raise ValueError(
                f"feature columns {examples(features.columns[clash])} have the same name once "
                f"converted to text (feature names are text); rename them so that each "
                f"feature has its own name."
            )
        dup = features.index[features.index.duplicated()]
        if len(dup):
            raise ValueError(
                f"the features' index (item ids) has duplicates: {examples(dup.unique())}; "
                f"give one row per item."
            )
        non_numeric = [c for c in features.columns
                       if not pd.api.types.is_numeric_dtype(features[c])]
        if non_numeric:
            raise TypeError(
                f"features must be numeric; columns {examples(non_numeric)} are not. Encode "
                f"them (e.g. pd.get_dummies) first."
            )
        missing = items[~items.isin(features.index)]
        extra = features.index[~features.index.isin(items)]
        if len(missing) and len(extra):
            pairs = _text_matches(extra, missing)
            if pairs:
                raise ValueError(
                    "the features' index does not match the item ids of the labels: "
                    + _mismatch_text(pairs, "the features' ids", "the item ids") + "."
                )
        if len(missing):
            raise ValueError(
                f"features are missing for {len(missing)} item(s) with labels, e.g. "
                f"{examples(missing)}; the features' index must hold every item id."
            )
        if len(extra):
            raise ValueError(
                f"features hold {len(extra)} item(s) that have no labels, e.g. "
                f"{examples(extra)}; drop those rows (features.loc[...]) — to predict new "
                f"items, use the fitted classifier instead."
            )
        values = features.loc[items].to_numpy(dtype=float)
    else:
        values = np.asarray(features)
        if values.ndim != 2:
            raise ValueError(
                f"features must be 2-D (item, feature), got shape {values.shape}; for a single "
                f"feature use x.reshape(-1, 1)."
            )
        if values.shape[0] != len(items):
            raise ValueError(
                f"features have {values.shape[0]} rows but there are {len(items)} items; an "
                f"array must align with the item order (first appearance in the table). Pass a "
                f"DataFrame indexed by item id to align by id."
            )
        if not np.issubdtype(values.dtype, np.number) and values.dtype != bool:
            raise TypeError(f"features must be numeric, got dtype {values.dtype}.")
        values = values.astype(float)
        names = pd.Index([f"x{j}" for j in range(values.shape[1])])
    if values.shape[1] == 0:
        raise ValueError("features have zero columns; pass features=None for no features.")
    bad = ~np.isfinite(values)
    if bad.any():
        rows, cols = np.nonzero(bad)
        raise ValueError(
            f"features hold {bad.sum()} NaN or infinite value(s), in feature(s) "
            f"{examples(pd.unique(names[cols]))} of item(s) {examples(pd.unique(items[rows]))}; "
            f"impute or drop them first."
        )
    return values, names


def _parse_gold(gold, items: pd.Index, classes, *, strip: bool = False):
    if gold is None:
        return None
    if isinstance(gold, pd.DataFrame):
        raise TypeError(
            f"gold must be one column of labels (a Series or dict indexed by item id, or an "
            f"array in item order), got a DataFrame with columns {examples(gold.columns)}. "
            f"Pick the column, e.g. gold=table.set_index('<item column>')['<gold column>']."
        )
    if isinstance(gold, Mapping):
        gold = pd.Series(list(gold.values()),
                         index=pd.Index(list(gold.keys()), tupleize_cols=False),
                         dtype=None if len(gold) else object)
    if isinstance(gold, pd.Series):
        if strip:
            gold = _strip(gold.set_axis(_strip_index(gold.index), axis=0))
        dup = gold.index[gold.index.duplicated()]
        if len(dup):
            raise ValueError(f"gold has duplicate item ids: {examples(dup.unique())}.")
        extra = ~gold.index.isin(items)
        if extra.any():
            pairs = _text_matches(gold.index[extra], items)
            if pairs:
                raise ValueError(
                    "gold's item ids do not match the item ids of the labels: "
                    + _mismatch_text(pairs, "gold's ids", "the item ids") + "."
                )
            if extra.all():
                raise ValueError(
                    f"none of gold's {len(gold)} item id(s) is an item id of the labels (gold "
                    f"has e.g. {examples(gold.index, 3)}; the items are e.g. "
                    f"{examples(items, 3)}); gold must be indexed by item id. If it is in item "
                    f"order, pass it as a list or array (gold.to_numpy())."
                )
            _warn(
                f"gold holds {extra.sum()} item id(s) that have no labels (e.g. "
                f"{examples(gold.index[extra], 3)}); they are ignored."
            )
        gold = gold.reindex(items)
    else:
        arr = np.asarray(gold, dtype=object)
        if arr.ndim != 1:
            raise ValueError(
                f"gold must be 1-D (one entry per item), got shape {arr.shape}. Pass a Series "
                f"or dict indexed by item id, or a list with one entry per item in item order."
            )
        if len(arr) != len(items):
            raise ValueError(
                f"gold has {len(arr)} entries but there are {len(items)} items; a list or array "
                f"must align with the item order. Pass a Series or dict indexed by item id to "
                f"align by id."
            )
        gold = pd.Series(arr, index=items)
        if strip:
            gold = _strip(gold)
    known = gold.notna().to_numpy()
    if classes is None:
        values = pd.to_numeric(gold, errors="coerce").to_numpy(dtype=float)
        bad = known & ~np.isfinite(values)
        if bad.any():
            raise ValueError(
                f"gold values must be finite numbers for continuous labels; items "
                f"{examples(items[bad])} are not."
            )
        return values
    codes = np.full(len(items), -1, dtype=np.int64)
    codes[known] = classes.get_indexer(gold[known].to_numpy())
    bad = known & (codes < 0)
    if bad.any():
        outside = pd.unique(gold[bad])
        pairs = _text_matches(outside, classes)
        raise ValueError(
            f"gold labels {examples(outside)} are not among the classes "
            f"{listing(classes)}"
            + (f"; {_mismatch_text(pairs, 'these gold labels', 'the classes')}" if pairs else "")
            + "."
        )
    return codes
