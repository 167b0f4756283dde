"""Parsing the user's columns into codes: ids, labels, features and gold.

Every helper here takes a pandas column or the user's object and returns
codes and coordinates, or raises a ``ValueError``/``TypeError`` that names
the rows or ids and the fix; :class:`crowd_models.data.Annotations` calls
them. What is refused and what only warns is listed in the ``data`` module's
docstring.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from crowd_models._text import examples, listing, short_repr, warn

_MANY_CLASSES = 20
"""More distinct numeric labels than this, found without ``classes=``, are
probably measurements: non-integer ones are refused ("did you mean
continuous=True?"), integer ones give a warning."""

_MISSING_WORDS = frozenset({"na", "n/a", "#n/a", "nan", "none", "null", "missing", "?", "-",
                            "--", "."})
"""String classes (compared stripped and lower-cased) that look like a
missing-value code rather than a class."""


def same_class(a, b) -> bool:
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


def code_dtype(n: int) -> np.dtype:
    """The narrowest signed integer type that holds the codes 0 .. n - 1 (and -1)."""
    return np.dtype(next(t for t in (np.int8, np.int16, np.int32, np.int64)
                         if n - 1 <= np.iinfo(t).max))


def _in_arrow(col: pd.Series) -> bool:
    return isinstance(col.dtype, pd.StringDtype) and col.dtype.storage == "pyarrow"


def _give_back(col: pd.Series) -> None:
    """Return to the system what pyarrow's pool kept from parsing a long text column
    (150 MB at 10^7 rows, which it would otherwise hold through the fit)."""
    if len(col) >= 1_000_000 and _in_arrow(col):
        import pyarrow

        pyarrow.default_memory_pool().release_unused()


def _factorize(col: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """``pd.factorize(col)``: codes in order of first appearance and the distinct
    values. A pyarrow-backed text column goes through pyarrow's dictionary encoding
    as pandas' does, but keeps its int32 codes (pandas widens them to int64: a 240 MB
    peak at 10^7 rows)."""
    if _in_arrow(col):
        chunked = col.array.__arrow_array__()
        if chunked.num_chunks and chunked.null_count == 0:
            encoded = chunked.dictionary_encode().combine_chunks()
            codes = np.array(encoded.indices.to_numpy())  # numpy's own memory
            return codes, pd.Index(pd.array(encoded.dictionary, dtype=col.dtype))
    codes, ids = pd.factorize(col, sort=False)
    return codes, pd.Index(ids)


def _strip(values: pd.Series) -> pd.Series:
    """Strip surrounding whitespace from the strings; other values are kept. Each
    distinct string of an object column is stripped once (no Python per row)."""
    if pd.api.types.is_string_dtype(values) and values.dtype != object:
        return values.str.strip()
    if values.dtype != object:
        return values
    codes, uniques = pd.factorize(values)
    text = np.flatnonzero([isinstance(v, str) for v in uniques])
    rows = np.flatnonzero(np.isin(codes, text))  # other values stay as they are
    out = values.to_numpy(dtype=object, copy=True)
    stripped = np.empty(len(uniques), dtype=object)
    stripped[text] = [uniques[t].strip() for t in text]
    out[rows] = stripped[codes[rows]]
    return pd.Series(out, index=values.index, name=values.name)


def strip_index(index: pd.Index) -> pd.Index:
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


def _near_duplicates(values: pd.Index, fold_case: bool = False) -> list[list]:
    """Groups of distinct values that are equal once converted to text and stripped
    of surrounding whitespace ('yes' / ' yes', 1 / '1'), and with ``fold_case``
    once lower-cased too ('Yes' / 'yes')."""
    if len(values) < 2 or not _is_text(values):
        return []
    keys = _as_stripped_text(values)
    if fold_case:
        keys = keys.str.lower()
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


def _warn_near_duplicates(values: pd.Index, what: str, becomes: str,
                          fold_case: bool = False) -> None:
    """Warn of values that count apart but differ only in whitespace or type (and,
    with ``fold_case``, labels that differ only in case)."""
    if fold_case:
        _warn_case_variants(values, what, becomes)
    groups = _near_duplicates(values)
    if not groups:
        return
    spaced = [g for g in groups if len({type(v) for v in g}) == 1]
    typed = [g for g in groups if len({type(v) for v in g}) > 1]
    if spaced:
        warn(
            f"{what}: {_groups_text(spaced)} differ only in surrounding whitespace, so they "
            f"count as different {becomes}. Pass strip=True to strip surrounding whitespace "
            f"from ids and labels, or clean them first (.str.strip())."
        )
    if typed:
        warn(
            f"{what}: {_groups_text(typed)} differ only in type, so they count as different "
            f"{becomes}. Make them one type first (e.g. .astype(str))."
        )


def _warn_case_variants(values: pd.Index, what: str, becomes: str) -> None:
    """Warn of string labels that differ only in upper and lower case ('Yes' / 'yes')."""
    folded = [g for g in _near_duplicates(values, fold_case=True)
              if all(isinstance(v, str) for v in g)
              and len({v.strip() for v in g}) > 1]  # not whitespace alone
    if folded:
        warn(
            f"{what}: {_groups_text(folded)} differ only in upper and lower case, so they count "
            f"as different {becomes}. If they are the same class, make the case uniform first "
            f"(.str.lower()); declare classes=[...] to confirm they are different classes."
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


def missing_codes(classes) -> list:
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
def parse_ids(col: pd.Series, rows, role: str, what: str, strip: bool):
    """Codes (first appearance) and the distinct ids of one id column."""
    categorical = isinstance(col.dtype, pd.CategoricalDtype)
    if categorical and (strip or col.hasnans):
        # unused categories are not items/annotators: only the values count
        col, categorical = col.astype(col.cat.categories.dtype), False
    if pd.api.types.is_float_dtype(col.cat.categories.dtype if categorical else col.dtype):
        warn(
            f"{what} holds ids as floating-point numbers (e.g. {short_repr(col.iloc[0])}): "
            f"ids that differ as text become one number ('1.10' and '1.1', '007' and '7.0'), "
            f"so such ids may have been merged when the column was converted. Read the ids as text "
            f"(pd.read_csv(..., dtype=str) for the id columns)."
        )
    if strip:
        col = _strip(col)
    if categorical:  # the categories' codes, renumbered: no id is written out per row
        codes, used = pd.factorize(col.cat.codes.to_numpy(), sort=False)
        ids = pd.Index(col.cat.categories.take(used))
    else:
        codes, ids = _factorize(col)
    codes = codes.astype(code_dtype(len(ids)), copy=False)
    blank = _blank(ids)
    if blank.any():
        on = np.isin(codes, np.flatnonzero(blank))
        raise ValueError(
            f"{what} is empty or whitespace only on {on.sum()} row(s), e.g. rows "
            f"{examples(rows[on])}; every annotation needs a real {role} id (as it needs a "
            f"label). Fill in or drop those rows first."
        )
    _warn_near_duplicates(ids, what, f"{role}s")
    _give_back(col)
    return codes, ids


def check_wide_ids(index: pd.Index, what: str, where: str) -> None:
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


def check_roles(**columns) -> None:
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


# ----------------------------------------------------------------- parsing
def parse_labels(raw: pd.Series, index, label: str, classes, continuous: bool, *,
                  strip: bool = False, missing_fix: str = "drop those rows"):
    declared = classes is not None
    categories = None
    if isinstance(raw.dtype, pd.CategoricalDtype):
        categories = list(raw.cat.categories)
        if strip:
            categories = list(dict.fromkeys(
                c.strip() if isinstance(c, str) else c for c in categories))
    if continuous:
        return _continuous_labels(raw, index, label, declared, strip)
    # each distinct label is looked at once: row_codes -1 where missing
    row_codes, uniques = _distinct(raw, strip)
    missing = row_codes < 0
    blank = np.flatnonzero(_blank(pd.Index(uniques)))
    if len(blank):
        missing = missing | np.isin(row_codes, blank)
    _check_missing(missing, index, label)
    non_finite = [v for v in uniques if _is_number(v) and not np.isfinite(v)]
    if non_finite:
        rows = np.isin(row_codes, [i for i, v in enumerate(uniques) if v in non_finite])
        raise ValueError(
            f"column {label!r} holds the non-finite label(s) {examples(non_finite)} on "
            f"{rows.sum()} row(s), e.g. rows {examples(index[rows])}: inf and -inf are not "
            f"classes. Drop or correct those rows first."
        )
    if declared:
        classes, source = _declared_classes(classes, strip), "classes="
    else:
        classes, source = _inferred_classes(uniques, categories, label)
    classes = pd.Index(classes)
    lookup = classes.get_indexer(uniques).astype(code_dtype(len(classes)))
    codes = lookup[row_codes]
    bad = codes < 0
    if bad.any():
        outside = uniques[lookup < 0]
        pairs = _text_matches(outside, classes)
        raise ValueError(
            f"labels {examples(outside)} in column {label!r} are not among the "
            f"classes {listing(classes)} (on {bad.sum()} row(s)). Add them to classes=, or fix "
            f"the labels (types matter: 1 and '1' differ)"
            + (f"; {_mismatch_text(pairs, 'these labels', 'the classes')}" if pairs else "")
            + "."
        )
    _give_back(raw)
    return _class_codes(codes, classes, source, declared, label, missing_fix)


def _distinct(raw: pd.Series, strip: bool) -> tuple[np.ndarray, np.ndarray]:
    """(row codes, the distinct values in order of first appearance, as ``pd.unique``
    gives them, stripped with ``strip``): one hash pass; -1 codes a missing value."""
    row_codes, uniques = pd.factorize(raw, sort=False)
    uniques = (np.asarray(uniques, dtype=object) if isinstance(raw.dtype, pd.CategoricalDtype)
               else uniques.to_numpy())
    if strip and _is_text(pd.Index(uniques)):
        stripped, uniques = pd.factorize(_strip(pd.Series(uniques, dtype=object)), sort=False)
        row_codes = np.where(row_codes < 0, -1, stripped[row_codes])
        uniques = uniques.to_numpy()
    return row_codes, uniques


def _check_missing(missing: np.ndarray, index, label: str) -> None:
    if missing.any():
        raise ValueError(
            f"column {label!r} (the labels) is missing or empty on {missing.sum()} row(s), "
            f"e.g. rows {examples(index[missing])}. A row means an annotation was given: drop "
            f"rows without a label first (df.dropna(subset=[{label!r}]))."
        )


def _continuous_labels(raw: pd.Series, index, label: str, declared: bool, strip: bool):
    if isinstance(raw.dtype, pd.CategoricalDtype):
        raw = raw.astype(object)
    if strip:
        raw = _strip(raw)
    missing = raw.isna().to_numpy()
    if _is_text(raw):
        # not |=: under pandas copy-on-write .to_numpy() may return a read-only array
        blank = raw.astype(str).str.strip().eq("").to_numpy() & raw.notna().to_numpy()
        missing = missing | blank
    _check_missing(missing, index, label)
    if declared:
        raise ValueError("continuous labels have no classes: drop classes= or continuous=True.")
    return _continuous_values(raw, index, label), None


def _class_codes(codes, classes, source, declared, label, missing_fix):
    """The label codes in their narrowest type, after the warnings on the classes."""
    unused = classes[np.bincount(codes, minlength=len(classes)) == 0]
    if unused.size:
        fix = "" if source == "classes=" else (
            f" Drop unused categories first (df[{label!r}].cat.remove_unused_categories()) if "
            f"they are not classes.")
        warn(
            f"class(es) {examples(unused)} of {source} never occur among the labels; "
            f"models learn about them from their priors only.{fix}"
        )
    if not declared:
        like_missing = missing_codes(classes)
        if like_missing:
            warn(
                f"class(es) {examples(like_missing)} look like missing-value codes rather "
                f"than classes (the classes are {listing(classes)}); they are kept as "
                f"classes. If they mean no label, "
                f"{missing_fix.replace('{codes}', listing(like_missing))}; if they are "
                f"classes, declare classes=[...] to confirm."
            )
    return codes, classes


def _continuous_values(raw: pd.Series, index, label: str) -> np.ndarray:
    """Real-valued labels: numbers, all finite."""
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
    return values


def _inferred_classes(uniques, categories, label: str):
    """(classes, where they came from) for undeclared classes: the categories or the
    sorted labels."""
    source = "classes="
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
                              "classes", fold_case=True)
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
    return classes, source


def _declared_classes(classes, strip: bool) -> list:
    """classes= checked: finite, distinct, at least two."""
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
    return classes


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
    warn(
        f"column {label!r} holds {len(uniques)} distinct integer labels, so there are "
        f"{len(uniques)} classes. If they are measurements or ratings on a scale, did you mean "
        f"continuous=True? Declare classes=[...] to confirm they are classes."
    )


def parse_features(features, items: pd.Index, *, strip: bool = False):
    if features is None:
        return None, None
    if isinstance(features, pd.DataFrame):
        if strip:
            features = features.set_axis(strip_index(features.index), axis=0)
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


def parse_gold(gold, items: pd.Index, classes, *, strip: bool = False):
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
            gold = _strip(gold.set_axis(strip_index(gold.index), axis=0))
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
            warn(
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
