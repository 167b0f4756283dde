"""`Annotations`: the one parsed container every model, EM and report reads.

A long table (one row per annotation: item, annotator, label) is parsed once
into integer codes plus coordinates that keep the user's own ids and class
names. Sizes come from the coordinates, never from ``max(idx) + 1``.

Orders, so that arrays can be aligned with them:

* items and annotators: order of first appearance in the long table (row
  order and column order for :meth:`Annotations.from_wide`);
* classes: the ``classes=`` argument if given, otherwise sorted. For binary
  families the *second* class is the positive one (``classes=[0, 1]``,
  ``[False, True]``, ``["benign", "malignant"]``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import xarray as xr

from crowd_models import _dims as D

__all__ = ["Annotations"]


def _examples(values, n: int = 5) -> str:
    values = list(values)
    shown = ", ".join(repr(v) for v in values[:n])
    return shown + (f", ... ({len(values)} in all)" if len(values) > n else "")


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
    ) -> Annotations:
        """Parse a long table with one row per annotation.

        Parameters
        ----------
        df : DataFrame
            One row per annotation. The same annotator may label the same item
            more than once; every row counts.
        item, annotator, label : str
            Column names.
        classes : sequence, optional
            The class order (categorical labels). Default: the sorted distinct
            labels. Declare it to fix the order or to include a class nobody
            used.
        features : DataFrame indexed by item id, or array (item, feature)
            aligned with the item order (first appearance), optional.
        gold : Series indexed by item id (NaN or absent = unknown), or array
            aligned with the item order, optional.
        continuous : bool
            Labels are real numbers (no classes).
        """
        if not isinstance(df, pd.DataFrame):
            raise TypeError(
                f"Annotations.from_frame expects a pandas DataFrame with one row per "
                f"annotation, got {type(df).__name__}. For an items x annotators matrix "
                f"use Annotations.from_wide."
            )
        for arg, col in (("item", item), ("annotator", annotator), ("label", label)):
            if col not in df.columns:
                raise ValueError(
                    f"column {col!r} (the {arg} column) is not in the table; its columns are "
                    f"{_examples(df.columns, 12)}. Pass {arg}='<column name>' to name it."
                )
        if len(df) == 0:
            raise ValueError("the table has zero annotations (no rows); there is nothing to fit.")
        for arg, col in (("item", item), ("annotator", annotator)):
            missing = df[col].isna().to_numpy()
            if missing.any():
                raise ValueError(
                    f"column {col!r} (the {arg} ids) is missing on {missing.sum()} row(s), e.g. "
                    f"rows {_examples(df.index[missing])}; every annotation needs an {arg} id. "
                    f"Drop or fill those rows first."
                )
        item_idx, items = pd.factorize(df[item], sort=False)
        annotator_idx, annotators = pd.factorize(df[annotator], sort=False)
        raw = df[label]
        labels, classes = _parse_labels(raw, df.index, label, classes, continuous)
        return cls._assemble(
            item_idx, annotator_idx, labels, pd.Index(items), pd.Index(annotators),
            classes, features, gold,
        )

    @classmethod
    def from_wide(
        cls,
        matrix,
        *,
        classes: Sequence | None = None,
        features=None,
        gold=None,
        continuous: bool = False,
    ) -> Annotations:
        """Parse an items x annotators matrix; NaN (or None) marks a missing label.

        A DataFrame keeps its index as item ids and its columns as annotator
        ids; a 2-D array gets ids 0..n-1.
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
        for what, index in (("item ids (the index)", matrix.index),
                            ("annotator ids (the columns)", matrix.columns)):
            dup = index[index.duplicated()]
            if len(dup):
                raise ValueError(
                    f"the {what} contain duplicates: {_examples(dup.unique())}. Ids must be unique."
                )
        present = matrix.notna().to_numpy()
        empty_cols = matrix.columns[~present.any(axis=0)]
        if len(empty_cols):
            raise ValueError(
                f"annotator(s) {_examples(empty_cols)} have no labels (all missing); "
                f"drop those columns."
            )
        empty_rows = matrix.index[~present.any(axis=1)]
        if len(empty_rows):
            raise ValueError(
                f"item(s) {_examples(empty_rows)} have no labels (all missing); drop those rows."
            )
        rows, cols = np.nonzero(present)
        long = pd.DataFrame(
            {
                "item": matrix.index[rows],
                "annotator": matrix.columns[cols],
                "label": matrix.to_numpy(dtype=object)[rows, cols],
            },
            # so that label errors name (item, annotator) cells, not rows of this table
            index=pd.MultiIndex.from_arrays(
                [matrix.index[rows], matrix.columns[cols]], names=["item", "annotator"]
            ),
        )
        if not continuous:
            # undo the float upcast that NaN forces on integer columns (1.0 -> 1)
            vals = long["label"]
            numeric = pd.to_numeric(vals, errors="coerce")
            if numeric.notna().all() and np.all(np.mod(numeric, 1) == 0) and vals.map(
                lambda v: isinstance(v, float)
            ).any():
                long["label"] = numeric.astype(np.int64)
        # continuous labels are converted (and checked) by from_frame
        out = cls.from_frame(long, classes=classes, continuous=continuous)
        # keep the matrix's row/column order rather than first appearance
        item_order = pd.Index(matrix.index)
        ann_order = pd.Index(matrix.columns)
        item_idx = item_order.get_indexer(out.items[out.item_idx])
        ann_idx = ann_order.get_indexer(out.annotators[out.annotator_idx])
        return cls._assemble(item_idx, ann_idx, out.labels, item_order, ann_order,
                             out.classes, features, gold)

    @classmethod
    def _assemble(cls, item_idx, annotator_idx, labels, items, annotators, classes,
                  features, gold, truth=None) -> Annotations:
        feats, feature_names = _parse_features(features, items)
        gold_arr = _parse_gold(gold, items, classes)
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
        kind = "continuous" if self.continuous else f"{self.n_classes} classes {list(self.classes)}"
        return (
            f"Annotations({self.n_annotations} labels, {self.n_items} items, "
            f"{self.n_annotators} annotators, {kind}, {self.n_features} features, "
            f"gold={'yes' if self.has_gold else 'no'})"
        )


# ----------------------------------------------------------------- parsing
def _parse_labels(raw: pd.Series, index, label: str, classes, continuous: bool):
    missing = raw.isna().to_numpy()
    if raw.dtype == object or pd.api.types.is_string_dtype(raw):
        # not |=: under pandas copy-on-write .to_numpy() may return a read-only array
        blank = raw.astype(str).str.strip().eq("").to_numpy() & raw.notna().to_numpy()
        missing = missing | blank
    if missing.any():
        raise ValueError(
            f"column {label!r} (the labels) is missing or empty on {missing.sum()} row(s), "
            f"e.g. rows {_examples(index[missing])}. A row means an annotation was given: drop "
            f"rows without a label first (df.dropna(subset=[{label!r}]))."
        )
    if continuous:
        if classes is not None:
            raise ValueError("continuous labels have no classes: drop classes= or continuous=True.")
        values = pd.to_numeric(raw, errors="coerce")
        bad = values.isna().to_numpy()
        if bad.any():
            raise TypeError(
                f"continuous labels must be numbers; column {label!r} holds non-numeric values "
                f"{_examples(raw[bad].unique())}. Convert them, or drop continuous=True for "
                f"categorical labels."
            )
        values = values.to_numpy(dtype=float)
        if not np.all(np.isfinite(values)):
            bad = ~np.isfinite(values)
            raise ValueError(
                f"continuous labels must be finite; column {label!r} holds infinite values on "
                f"rows {_examples(index[bad])}."
            )
        return values, None
    if classes is None:
        uniques = raw.unique()
        try:
            classes = sorted(uniques)
        except TypeError as err:
            raise TypeError(
                f"the labels in column {label!r} mix types that cannot be sorted "
                f"({_examples(uniques)}); pass classes=[...] to give the class order, or make "
                f"the column one type."
            ) from err
        if len(classes) < 2:
            raise ValueError(
                f"every label is {classes[0]!r}: one class only, so there is nothing to learn. "
                f"If other classes exist, declare them with classes=[...]."
            )
    else:
        classes = list(classes)
        if len(set(classes)) != len(classes):
            raise ValueError(f"classes= has duplicates: {classes}.")
        if len(classes) < 2:
            raise ValueError(f"classes= must name at least two classes, got {classes}.")
    classes = pd.Index(classes)
    codes = classes.get_indexer(raw.to_numpy())
    bad = codes < 0
    if bad.any():
        raise ValueError(
            f"labels {_examples(pd.unique(raw[bad]))} in column {label!r} are not among the "
            f"classes {list(classes)} (on {bad.sum()} row(s)). Add them to classes=, or fix "
            f"the labels (types matter: 1 and '1' differ)."
        )
    unused = classes[np.bincount(codes, minlength=len(classes)) == 0]
    if unused.size:
        warnings.warn(
            f"class(es) {_examples(unused)} of classes= never occur among the labels; "
            f"models learn about them from their priors only.", UserWarning, stacklevel=3,
        )
    return codes.astype(np.int64), classes


def _parse_features(features, items: pd.Index):
    if features is None:
        return None, None
    if isinstance(features, pd.DataFrame):
        dup = features.index[features.index.duplicated()]
        if len(dup):
            raise ValueError(
                f"the features' index (item ids) has duplicates: {_examples(dup.unique())}; "
                f"give one row per item."
            )
        non_numeric = [c for c in features.columns
                       if not pd.api.types.is_numeric_dtype(features[c])]
        if non_numeric:
            raise TypeError(
                f"features must be numeric; columns {_examples(non_numeric)} are not. Encode "
                f"them (e.g. pd.get_dummies) first."
            )
        missing = items[~items.isin(features.index)]
        if len(missing):
            raise ValueError(
                f"features are missing for {len(missing)} item(s) with labels, e.g. "
                f"{_examples(missing)}; the features' index must hold every item id."
            )
        extra = features.index[~features.index.isin(items)]
        if len(extra):
            raise ValueError(
                f"features hold {len(extra)} item(s) that have no labels, e.g. "
                f"{_examples(extra)}; drop those rows (features.loc[...]) — to predict new "
                f"items, use the fitted classifier instead."
            )
        names = pd.Index(features.columns.astype(str))
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
            f"{_examples(pd.unique(names[cols]))} of item(s) {_examples(pd.unique(items[rows]))}; "
            f"impute or drop them first."
        )
    return values, names


def _parse_gold(gold, items: pd.Index, classes):
    if gold is None:
        return None
    if isinstance(gold, pd.Series):
        dup = gold.index[gold.index.duplicated()]
        if len(dup):
            raise ValueError(f"gold has duplicate item ids: {_examples(dup.unique())}.")
        extra = gold.index[~gold.index.isin(items)]
        if len(extra):
            raise ValueError(
                f"gold holds {len(extra)} item id(s) that have no labels, e.g. "
                f"{_examples(extra)}; drop them."
            )
        gold = gold.reindex(items)
    else:
        arr = np.asarray(gold, dtype=object)
        if arr.ndim != 1:
            raise ValueError(f"gold must be 1-D (one entry per item), got shape {arr.shape}.")
        if len(arr) != len(items):
            raise ValueError(f"gold has {len(arr)} entries but there are {len(items)} items.")
        gold = pd.Series(arr, index=items)
    known = gold.notna().to_numpy()
    if classes is None:
        values = pd.to_numeric(gold, errors="coerce").to_numpy(dtype=float)
        bad = known & ~np.isfinite(values)
        if bad.any():
            raise ValueError(
                f"gold values must be finite numbers for continuous labels; items "
                f"{_examples(items[bad])} are not."
            )
        return values
    codes = np.full(len(items), -1, dtype=np.int64)
    codes[known] = classes.get_indexer(gold[known].to_numpy())
    bad = known & (codes < 0)
    if bad.any():
        raise ValueError(
            f"gold labels {_examples(pd.unique(gold[bad]))} are not among the classes "
            f"{list(classes)}."
        )
    return codes
