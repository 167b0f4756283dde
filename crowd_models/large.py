"""Crowds too large for :class:`~crowd_models.Annotations`: labels stored narrow and
read a block of items at a time.

Two containers that the EMs of the families whose E- and M-steps are sums over
items accept in place of ``Annotations`` (today ``dawid_skene.em``, variants
``"full"`` and ``"one_coin"``, ``spammer.em`` and ``two_coin.em`` without
features):

* :class:`ChunkedAnnotations`: in memory, rows sorted by item, each label one
  code ``annotator * n_classes + label`` in the narrowest unsigned type (2 bytes
  at 10^4 annotators and 5 classes, against 24 for the three int64 columns of
  ``Annotations``) and one offset per item. The EM reads ``chunk_items`` items
  at a time, so its peak is the parameters, the (item, class) posteriors and
  one block.
* :class:`DaskAnnotations`: a Dask DataFrame indexed by item (every label of an
  item in one partition), with integer ``annotator`` and ``label`` codes, for
  crowds that outgrow one machine. Each EM pass runs the E-step partition by
  partition with the parameters broadcast, sums the per-annotator expected
  counts, and leaves the item posteriors in the partitions; the last pass
  writes them as a parquet dataset (``posterior_path``).

Both hold integer codes, not the user's ids: the annotators' and classes' names
are given as ``annotators=`` and ``classes=`` (by default their codes). The
design notes and measurements are in DEVELOPING.md, "Memory-bounded and Dask
EM (issue 41)".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from crowd_models import _dims as D

__all__ = ["ChunkedAnnotations", "DaskAnnotations"]

CHUNK_ITEMS = 65_536
"""Items per block of the chunked EM by default: its (item, class) temporaries
are then a few MB, while a block's fixed costs are spread over about 10^5-10^6
labels."""


def _names(value, what: str, size: int | None = None) -> pd.Index:
    """Names in code order from names, a count, or (``size`` given) None."""
    if value is None and size is not None:
        return pd.RangeIndex(size, name=what)
    if np.ndim(value) == 0:
        return pd.RangeIndex(_count(value, what + "s"), name=what)
    index = pd.Index(value, name=what)
    if not index.is_unique or (size is not None and len(index) != size):
        raise ValueError(f"{what}s must be distinct names, one per code"
                         f"{'' if size is None else f' (0..{size - 1})'}, got {len(index)} "
                         f"({index.nunique()} distinct).")
    return index


def _count(value, name: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {value!r}.")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}.")
    return int(value)


def _check_codes(codes: np.ndarray, size: int, name: str, fix: str) -> None:
    if codes.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integer codes, got dtype {codes.dtype}; {fix}")
    if len(codes) and (codes.min() < 0 or codes.max() >= size):
        raise ValueError(f"{name} codes must lie in 0..{size - 1}, found {codes.min()}.."
                         f"{codes.max()}; {fix}")


@dataclass(frozen=True, eq=False)
class ChunkedAnnotations:
    """Categorical labels in item order, each a narrow (annotator, label) code.

    Attributes
    ----------
    pairs : unsigned int array, shape (annotation,)
        ``annotator * n_classes + label`` per label, rows grouped by item, in the
        narrowest unsigned type that holds ``n_annotators * n_classes - 1``.
    offsets : int64 array, shape (item + 1,)
        Item ``i``'s labels are ``pairs[offsets[i]:offsets[i + 1]]``.
    items, annotators, classes : pandas.Index
        Names in code order.
    chunk_items : int
        Items per block of the EM's passes (default :data:`CHUNK_ITEMS`).

    Examples
    --------
    >>> import numpy as np
    >>> from crowd_models.large import ChunkedAnnotations
    >>> from crowd_models.models import dawid_skene
    >>> confusion = np.full((6, 3, 3), 0.1) + 0.7 * np.eye(3)
    >>> ann = dawid_skene.simulate(confusion, n_items=200, labels_per_item=3, rng=0)
    >>> chunked = ChunkedAnnotations.from_annotations(ann, chunk_items=50)
    >>> fit = dawid_skene.em(chunked)
    """

    pairs: np.ndarray
    offsets: np.ndarray
    items: pd.Index
    annotators: pd.Index
    classes: pd.Index
    chunk_items: int = CHUNK_ITEMS
    features: None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        _count(self.chunk_items, "chunk_items")
        if len(self.offsets) != len(self.items) + 1 or self.offsets[-1] != len(self.pairs):
            raise ValueError("offsets must have one entry per item plus one, ending at the "
                             "number of labels.")

    @classmethod
    def from_annotations(cls, annotations, *, chunk_items: int = CHUNK_ITEMS):
        """The labels of a categorical ``Annotations``, sorted by item and narrowed."""
        from crowd_models.data import Annotations

        if not isinstance(annotations, Annotations) or annotations.continuous:
            raise TypeError(f"from_annotations needs categorical Annotations, got "
                            f"{type(annotations).__name__}; build them with "
                            f"Annotations.from_frame(...).")
        order = np.argsort(annotations.item_idx, kind="stable")
        sizes = np.bincount(annotations.item_idx, minlength=annotations.n_items)
        return cls.from_codes(sizes, annotations.annotator_idx[order],
                              annotations.labels[order], annotators=annotations.annotators,
                              classes=annotations.classes, items=annotations.items,
                              chunk_items=chunk_items)

    @classmethod
    def from_codes(cls, labels_per_item, annotator_idx, labels, *, annotators, classes,
                   items=None, chunk_items: int = CHUNK_ITEMS):
        """From codes in item order: ``labels_per_item[i]`` rows of ``annotator_idx``
        and ``labels`` (integer codes into ``annotators`` and ``classes``, which are
        names or, as integers, counts) belong to item ``i``."""
        sizes = np.asarray(labels_per_item)
        annotator_idx, labels = np.asarray(annotator_idx), np.asarray(labels)
        annotators, classes = _names(annotators, D.ANNOTATOR), _names(classes, "class")
        J, K = len(annotators), len(classes)
        fix = "give the codes in item order with one count per item in labels_per_item."
        _check_codes(sizes, np.iinfo(np.int64).max, "labels_per_item", fix)
        if len(annotator_idx) != len(labels) or sizes.sum() != len(labels):
            raise ValueError(f"annotator_idx ({len(annotator_idx)}) and labels ({len(labels)}) "
                             f"need one entry per label, and labels_per_item must sum to that "
                             f"number (it sums to {sizes.sum()}).")
        _check_codes(annotator_idx, J, "annotator_idx", f"pass annotators={J} or more names.")
        _check_codes(labels, K, "labels", f"pass classes={K} or more names.")
        pairs = np.empty(len(labels), dtype=np.min_scalar_type(max(J * K - 1, 0)))
        step = 1 << 22  # a block of rows at a time: no int64 temporary of the table's length
        for start in range(0, len(labels), step):
            block = slice(start, start + step)
            pairs[block] = annotator_idx[block].astype(np.int64) * K + labels[block]
        offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        return cls(pairs, offsets, _names(items, D.ITEM, len(sizes)), annotators,
                   classes.rename(None), chunk_items=_count(chunk_items, "chunk_items"))

    @property
    def continuous(self) -> bool:
        return False

    @property
    def n_items(self) -> int:
        return len(self.items)

    @property
    def n_annotators(self) -> int:
        return len(self.annotators)

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def n_annotations(self) -> int:
        return len(self.pairs)

    def coords(self) -> dict[str, pd.Index]:
        """Coordinates of the EM's outputs."""
        return {D.ITEM: self.items, D.ANNOTATOR: self.annotators,
                D.TRUE_CLASS: self.classes, D.LABEL_CLASS: self.classes}

    def n_labels(self) -> np.ndarray:
        """Number of labels each annotator gave, annotator order."""
        counts = np.zeros(self.n_annotators, dtype=np.int64)
        step = 1 << 22
        for start in range(0, len(self.pairs), step):
            block = self.pairs[start:start + step] // self.n_classes
            counts += np.bincount(block, minlength=self.n_annotators)
        return counts

    def blocks(self):
        """(first item, offsets relative to the block, pairs) for each block of items."""
        for first in range(0, self.n_items, self.chunk_items):
            last = min(first + self.chunk_items, self.n_items)
            lo, hi = self.offsets[first], self.offsets[last]
            yield first, self.offsets[first:last + 1] - lo, self.pairs[lo:hi]


@dataclass(frozen=True, eq=False)
class DaskAnnotations:
    """Categorical labels in a Dask DataFrame partitioned by item.

    Attributes
    ----------
    frame : dask.dataframe.DataFrame
        Indexed by item with known divisions (so every label of an item lies
        in one partition), integer columns ``annotator`` and ``label``.
    annotators, classes : pandas.Index
        Names in code order.
    posterior_path : str or None
        Where the EM writes the item posteriors (a parquet dataset, one file per
        partition, indexed by item, a column per class); None: not written.

    Examples
    --------
    >>> import numpy as np
    >>> import pandas as pd
    >>> import dask.dataframe as dd
    >>> from crowd_models.large import DaskAnnotations
    >>> from crowd_models.models import dawid_skene
    >>> confusion = np.full((6, 3, 3), 0.1) + 0.7 * np.eye(3)
    >>> ann = dawid_skene.simulate(confusion, n_items=200, labels_per_item=3, rng=0)
    >>> table = pd.DataFrame({"annotator": ann.annotator_idx, "label": ann.labels},
    ...                      index=pd.Index(ann.item_idx, name="item")).sort_index()
    >>> crowd = DaskAnnotations.from_dask(dd.from_pandas(table, npartitions=4),
    ...                                   annotators=ann.annotators, classes=ann.classes)
    >>> fit = dawid_skene.em(crowd)
    """

    frame: object
    annotators: pd.Index
    classes: pd.Index
    posterior_path: str | None = None
    features: None = field(default=None, repr=False)

    @classmethod
    def from_dask(cls, frame, *, annotator: str = "annotator", label: str = "label",
                  item: str | None = None, annotators=None, classes=None,
                  posterior_path=None):
        """From a Dask DataFrame of codes: indexed by item with known divisions, or
        with an ``item`` column (then the frame is set_index'ed on it: a shuffle).
        ``annotators``/``classes``: names in code order, or counts; None reads
        the largest code (one pass)."""
        import dask.dataframe as dd

        if not isinstance(frame, dd.DataFrame):
            raise TypeError(f"from_dask needs a dask.dataframe.DataFrame, got "
                            f"{type(frame).__name__}; use ChunkedAnnotations for data in memory.")
        missing = [c for c in (annotator, label) if c not in frame.columns]
        if missing:
            raise ValueError(f"the frame has no column {missing[0]!r} (columns: "
                             f"{list(frame.columns)}); name the code columns with annotator= "
                             f"and label=.")
        if item is not None:
            frame = frame.set_index(item)
        elif not frame.known_divisions:
            raise ValueError("the frame's index must be the item with known divisions, so "
                             "that each item's labels lie in one partition: pass item='column' "
                             "to set it, or read parquet with calculate_divisions=True.")
        frame = frame[[annotator, label]].rename(columns={annotator: "annotator", label: "label"})
        for column in ("annotator", "label"):
            if frame[column].dtype.kind not in "iu":
                raise TypeError(f"column {column!r} must hold integer codes, got "
                                f"{frame[column].dtype}; factorize the ids first.")
        if annotators is None or classes is None:
            top = frame.max().compute()
            annotators = int(top["annotator"]) + 1 if annotators is None else annotators
            classes = int(top["label"]) + 1 if classes is None else classes
        return cls(frame, _names(annotators, D.ANNOTATOR), _names(classes, "class").rename(None),
                   None if posterior_path is None else str(posterior_path))

    @classmethod
    def from_parquet(cls, path, *, annotator: str = "annotator", label: str = "label",
                     item: str = "item", annotators=None, classes=None, posterior_path=None):
        """A parquet dataset of codes (columns ``item``, ``annotator``, ``label``),
        written sorted by item: the item column becomes the index with the
        divisions its statistics give."""
        import dask.dataframe as dd

        frame = dd.read_parquet(path, index=item, calculate_divisions=True)
        if not frame.known_divisions:
            raise ValueError(f"{path}: the item column's statistics do not give sorted, "
                             f"disjoint partitions; write the dataset sorted by {item!r}.")
        return cls.from_dask(frame, annotator=annotator, label=label, annotators=annotators,
                             classes=classes, posterior_path=posterior_path)

    @property
    def continuous(self) -> bool:
        return False

    @property
    def n_annotators(self) -> int:
        return len(self.annotators)

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    def coords(self) -> dict[str, pd.Index]:
        """Coordinates of the EM's outputs (no item coordinate: the items stay in
        the partitions)."""
        return {D.ANNOTATOR: self.annotators, D.TRUE_CLASS: self.classes,
                D.LABEL_CLASS: self.classes}
