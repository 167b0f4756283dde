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
  missing-value code (see ``crowd_models._parsing.missing_codes``); more than
  ``_MANY_CLASSES`` integer classes found without ``classes=``; gold ids of
  items that have no labels (ignored).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import xarray as xr

from crowd_models import _dims as D
from crowd_models._exports import checked_wide, read_export, wide_to_long
from crowd_models._parsing import (
    check_roles,
    parse_features,
    parse_gold,
    parse_ids,
    parse_labels,
    same_class,
)
from crowd_models._repeats import DUPLICATES, repeats_handled
from crowd_models._text import examples, listing, warn

__all__ = ["Annotations"]


@dataclass(frozen=True, eq=False)
class Annotations:
    """Parsed annotations.

    Attributes
    ----------
    item_idx, annotator_idx : int arrays, shape (annotation,)
        Codes into ``items`` and ``annotators`` (``int64``).
    labels : array, shape (annotation,)
        Integer codes into ``classes`` for categorical labels (``int64``),
        floats for continuous labels (then ``classes is None``).
    items, annotators : pandas.Index
        The user's ids in code order.
    classes : pandas.Index or None
        Class names in code order; None for continuous labels.
    features : float array (item, feature) or None
        The features as the models read them. The families with a classifier
        or regression of the features standardise them first
        (:meth:`standardized`); their fits record the centre and scale, and
        :func:`crowd_models.predict` applies them to new items.
    feature_names : pandas.Index or None
    gold : array (item,) or None
        Gold class codes (-1 where unknown), or gold values (NaN where
        unknown) for continuous labels.
    truth : xarray.Dataset or None
        The true parameters of a simulation (set by ``simulate``).
    feature_center, feature_scale : float arrays (feature,) or None
        Set by :meth:`standardized`: ``features`` are the given ones less
        ``feature_center``, divided by ``feature_scale``. None: the features as
        given.
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
    feature_center: np.ndarray | None = field(default=None, repr=False)
    feature_scale: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # int64 codes, whatever the parser's narrower working type: a user's
        # item_idx * n_annotators + annotator_idx on int16 codes would wrap silently
        # (numpy keeps the array's type), and the narrow type saved 170 MB at 10^7
        names = ["item_idx", "annotator_idx"] + ["labels"] * (self.classes is not None)
        for name in names:
            codes = np.asarray(getattr(self, name))
            if codes.dtype.kind in "iub":
                codes = codes.astype(np.int64, copy=False)
            object.__setattr__(self, name, codes)

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
        duplicates: str = "warn",
    ) -> Annotations:
        """Parse a long table with one row per annotation.

        Ids are used as they are in ``df``: read a file with its id columns as
        text (``pd.read_csv(path, dtype={"item": str, "annotator": str})``), since
        pandas reads an all-digit column as numbers, which drops leading zeros
        and merges ``'007'`` with ``'7'`` before this function sees them (the
        command line reads ids as text). Ids stored as floating-point numbers
        give a ``UserWarning`` for that reason. Id columns of pandas'
        ``category`` dtype are coded from their categories' codes, without
        writing an id out per row (0.5 GB less at the peak than text columns at
        10^7 rows; the same time there, a fifth of it at 10^6); only the ids
        that occur count.

        Parameters
        ----------
        df : DataFrame
            One row per annotation (crowd-kit's frame too: ``item="task"``,
            ``annotator="worker"``). Item and annotator ids must be present and
            not empty or whitespace only (a ``ValueError`` names the rows). The
            same annotator may label the same item more than once: see
            ``duplicates``.
        item, annotator, label : str, optional
            Column names (default ``"item"``, ``"annotator"``, ``"label"``);
            three different columns (one column cannot be, say, both the item
            and the label column).
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
        features : DataFrame or array, optional
            A DataFrame indexed by item id, or an array (item, feature) aligned
            with the item order (first appearance). Column names must be unique
            (also once converted to text).
        gold : mapping, Series or array, optional
            A mapping (``dict`` or ``Series``) from item id to gold label;
            NaN, None or an absent id means unknown. Ids of items that have no
            labels are ignored with a ``UserWarning`` giving their count (a full
            gold file may cover more items than were labelled); a mapping that
            matches no item at all is refused. Ids must match the item ids by
            type: gold ids that equal item ids only once both are converted to
            text (``'7'`` against ``7``) or stripped of whitespace raise a
            ``ValueError`` that says so; they are not matched silently. An
            array (or list) is aligned with the item order.
        continuous : bool, optional
            Labels are real numbers (no classes); they must be finite.
            Without it, more than 20 distinct non-integer numbers are refused
            ("did you mean continuous=True?").
        strip : bool, optional
            Strip surrounding whitespace from string item ids, annotator ids,
            labels, ``classes=``, and the ids and labels of ``gold`` and
            ``features``. Default False: ids or labels that differ only in
            surrounding whitespace (``'yes'`` and ``' yes'``, ``'Zoë'`` and
            ``'Zoë '``) are kept apart, with a ``UserWarning`` listing them.
            String labels that differ only in case (``'Yes'``, ``'yes'``) are
            kept apart with a ``UserWarning`` too.
        duplicates : {"warn", "keep", "drop", "error"}, optional
            Rows that repeat an (item, annotator) pair, either with the same
            label (an export concatenated twice) or with different labels (an
            annotator who changed their mind). Each row counts as one
            independent label, which raises ``n_labels`` and narrows every
            interval. ``"warn"`` (default) keeps every row and warns with the
            counts and a few examples; ``"keep"`` keeps them silently (repeated
            labelling by design, as in Dawid and Skene's anaesthetists);
            ``"drop"`` keeps the first of rows that repeat the same (item,
            annotator, label) and still warns of conflicting labels, which it
            keeps; ``"error"`` raises a ``ValueError`` on either.

        Examples
        --------
        >>> import pandas as pd
        >>> df = pd.DataFrame({"item": ["a", "a", "b"], "annotator": ["u", "v", "u"],
        ...                    "label": ["cat", "dog", "dog"]})
        >>> ann = cm.Annotations.from_frame(df)
        """
        if not isinstance(df, pd.DataFrame):
            raise TypeError(
                f"Annotations.from_frame expects a pandas DataFrame with one row per "
                f"annotation, got {type(df).__name__}. For an items x annotators matrix "
                f"use Annotations.from_wide."
            )
        check_roles(item=item, annotator=annotator, label=label)
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
        if duplicates not in DUPLICATES:
            raise ValueError(f"duplicates={duplicates!r} is not one of {listing(DUPLICATES)}.")
        item_idx, items, annotator_idx, annotators, labels, classes = cls._parse_long(
            df, item, annotator, label, classes, continuous, strip,
            where={"item": f"column {item!r} (the item ids)",
                   "annotator": f"column {annotator!r} (the annotator ids)"},
            missing_fix=f"drop those rows (df[~df[{label!r}].isin({{codes}})])",
        )
        if duplicates != "keep":
            kept = repeats_handled(item_idx, annotator_idx, labels, items, annotators,
                                   classes, duplicates)
            if kept is not None:
                item_idx, annotator_idx, labels = (item_idx[kept], annotator_idx[kept],
                                                   labels[kept])
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
        item_idx, items = parse_ids(df[item], df.index, "item", where["item"], strip)
        annotator_idx, annotators = parse_ids(df[annotator], df.index, "annotator",
                                               where["annotator"], strip)
        labels, classes = parse_labels(df[label], df.index, label, classes, continuous,
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
            Items x annotators; NaN (or None) marks a missing label.
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
            ``missing_codes``), unless ``classes=`` declares the classes.

        Examples
        --------
        >>> import pandas as pd
        >>> wide = pd.DataFrame({"u": [1, 0, 1], "v": [1, 1, None]}, index=["a", "b", "c"])
        >>> ann = cm.Annotations.from_wide(wide)
        """
        matrix = checked_wide(matrix, strip, missing)
        long = wide_to_long(matrix, classes, continuous)
        # continuous labels are converted (and checked) by parse_labels
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
    def from_label_studio(cls, path, *, from_name: str | None = None,
                          **options) -> Annotations:
        """Read a Label Studio JSON export: one label per annotation, gold from the
        annotations flagged as ground truth (not counted as labels).

        Parameters
        ----------
        path : str or Path
            The project exported as JSON (tasks with ``annotations``).
        from_name : str, optional
            The question (control tag) to read, when the project asks several.
        **options
            ``classes``, ``features``, ``gold``, ``strip``, ``duplicates``, ``continuous``
            (numeric ratings), as for :meth:`from_frame`.

        Returns
        -------
        Annotations
            Items are task ids, annotators ``completed_by``, both as text.

        Examples
        --------
        >>> import json, pathlib, tempfile
        >>> ask = lambda who, c: {"completed_by": who, "result": [
        ...     {"from_name": "mood", "type": "choices", "value": {"choices": [c]}}]}
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "export.json"
        >>> _ = path.write_text(json.dumps([{"id": 1, "annotations": [ask(7, "happy"),
        ...     ask(8, "sad")]}, {"id": 2, "annotations": [ask(7, "sad"), ask(8, "sad")]}]))
        >>> ann = cm.Annotations.from_label_studio(path)
        """
        return cls._from_export("label-studio", path, {"from_name": from_name}, options)

    @classmethod
    def from_prodigy(cls, path, *, label: str | None = None, **options) -> Annotations:
        r"""Read Prodigy's JSONL (``prodigy db-out``): items by ``_input_hash``,
        annotators by ``_annotator_id``; ``ignore`` answers are left out (counted).

        Parameters
        ----------
        path : str or Path
            One annotated task per line.
        label : str, optional
            For yes/no tasks about several labels, the one to read (its classes are
            ``accept`` and ``reject``); choice tasks give the accepted option.
        **options
            As for :meth:`from_frame`.

        Returns
        -------
        Annotations

        Examples
        --------
        >>> import json, pathlib, tempfile
        >>> rows = [{"_input_hash": h, "_annotator_id": a, "accept": [c], "answer": "accept"}
        ...         for h, a, c in [(1, "ann", "A"), (1, "bo", "B"), (2, "ann", "B")]]
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "db.jsonl"
        >>> _ = path.write_text("\n".join(json.dumps(r) for r in rows))
        >>> ann = cm.Annotations.from_prodigy(path)
        """
        return cls._from_export("prodigy", path, {"label": label}, options)

    @classmethod
    def from_sagemaker(cls, path, *, attribute: str | None = None,
                       **options) -> Annotations:
        r"""Read a SageMaker Ground Truth output manifest whose label attribute keeps
        every worker's answer (``annotationsFromAllWorkers``); items by ``source-ref``.

        Parameters
        ----------
        path : str or Path
            The output manifest (JSON lines).
        attribute : str, optional
            The label attribute (the job's name), when the manifest holds several.
        **options
            As for :meth:`from_frame`.

        Returns
        -------
        Annotations

        Examples
        --------
        >>> import json, pathlib, tempfile
        >>> say = lambda w, c: {"workerId": w, "annotationData": {
        ...     "content": json.dumps({"animal": {"label": c}})}}
        >>> rows = [{"source-ref": "s3://b/1.jpg", "job": {"annotationsFromAllWorkers": [
        ...     say("w1", "cat"), say("w2", "dog")]}}]
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "output.manifest"
        >>> _ = path.write_text("\n".join(json.dumps(r) for r in rows))
        >>> ann = cm.Annotations.from_sagemaker(path)
        """
        return cls._from_export("sagemaker", path, {"attribute": attribute}, options)

    @classmethod
    def _from_export(cls, kind: str, path, reader: dict, options: dict) -> Annotations:
        frame, gold = read_export(kind, path, **reader)
        if frame.empty:
            raise ValueError(f"{kind} file {str(path)!r} holds no labels to read.")
        options.setdefault("gold", gold)
        return cls.from_frame(frame, **options)

    @classmethod
    def _assemble(cls, item_idx, annotator_idx, labels, items, annotators, classes,
                  features, gold, truth=None, *, strip=False) -> Annotations:
        feats, feature_names = parse_features(features, items, strip=strip)
        gold_arr = parse_gold(gold, items, classes, strip=strip)
        return cls(
            item_idx=item_idx,
            annotator_idx=annotator_idx,
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
            One of the two ``classes``, matched exactly (``1`` does not
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
        found = [k for k, c in enumerate(self.classes) if same_class(c, positive)]
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
            warn(
                "with_positive: the simulation's true parameters refer to the old class "
                "order, so the recoded annotations carry no truth (truth=None).")
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
            item_idx=item_idx,
            annotator_idx=ann_idx,
            labels=self.labels[rows],
            items=self.items[item_keep],
            annotators=self.annotators[ann_keep],
            features=None if self.features is None else self.features[item_keep],
            gold=None if self.gold is None else self.gold[item_keep],
            truth=None,
        )

    def with_features(self, features) -> Annotations:
        """The same annotations with other features (or None), as given."""
        feats, names = parse_features(features, self.items)
        return replace(self, features=feats, feature_names=names, feature_center=None,
                       feature_scale=None)

    def standardized(self) -> Annotations:
        """The same annotations with each feature centred on its mean over the items
        and divided by its standard deviation (a feature constant over the items
        is only centred), recorded in ``feature_center`` and ``feature_scale``.

        The families with a classifier or regression of the features (their
        prior on the coefficients is one scale for every feature) fit on these,
        record the centre and scale in the fit's attrs, and
        :func:`crowd_models.predict` transforms new items' features the same way.
        Annotations already standardised, or without features, are returned as
        they are; a subset (:meth:`select`) keeps the whole set's transform.
        """
        if self.features is None or self.feature_center is not None:
            return self
        center = self.features.mean(axis=0)
        scale = self.features.std(axis=0)
        scale = np.where(scale > 1e-12 * np.maximum(1.0, np.abs(center)), scale, 1.0)
        return replace(self, features=(self.features - center) / scale,
                       feature_center=center, feature_scale=scale)

    @property
    def raw_features(self) -> np.ndarray | None:
        """The features as given, before :meth:`standardized`."""
        if self.features is None or self.feature_center is None:
            return self.features
        return self.features * self.feature_scale + self.feature_center

    def __repr__(self) -> str:
        kind = "continuous" if self.continuous else (
            f"{self.n_classes} classes {listing(self.classes)}")
        return (
            f"Annotations({self.n_annotations} labels, {self.n_items} items, "
            f"{self.n_annotators} annotators, {kind}, {self.n_features} features, "
            f"gold={'yes' if self.has_gold else 'no'})"
        )

    def _repr_html_(self) -> str:
        """A compact table in Jupyter: sizes, labels per item and per annotator, the
        classes with their label counts, features and gold."""
        from html import escape

        per_item = np.bincount(self.item_idx, minlength=self.n_items)
        per_annotator = np.bincount(self.annotator_idx, minlength=self.n_annotators)
        if self.continuous:
            kind = (f"continuous, from {np.min(self.labels):.4g} to "
                    f"{np.max(self.labels):.4g}")
        else:
            counts = np.bincount(self.labels, minlength=self.n_classes)
            kind = ", ".join(f"{escape(str(c))}: {n}" for c, n in zip(self.classes, counts,
                                                                       strict=True))
        gold = "none"
        if self.has_gold:
            known = len(self.gold_series())
            gold = f"{known} of {self.n_items} items"
        rows = [("labels", f"{self.n_annotations}"),
                ("items", f"{self.n_items} (labels each: median {np.median(per_item):g}, "
                          f"max {per_item.max()})"),
                ("annotators", f"{self.n_annotators} (labels each: median "
                               f"{np.median(per_annotator):g}, max {per_annotator.max()})"),
                ("labels by class" if not self.continuous else "labels", kind),
                ("features", f"{self.n_features}" + (
                    f" ({escape(listing(self.feature_names))})" if self.n_features else "")),
                ("gold", gold)]
        body = "".join(f"<tr><th style='text-align:left'>{k}</th>"
                       f"<td style='text-align:left'>{v}</td></tr>" for k, v in rows)
        return f"<table><caption>Annotations</caption>{body}</table>"
