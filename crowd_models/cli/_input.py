"""Reading the labels, features and gold files, and checking what the family
needs of them, before any fitting."""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from crowd_models.cli._options import (
    EXPORT_QUESTION,
    PRIORS,
    InputError,
    _names,
    _Plan,
    has_positive,
)


# ------------------------------------------------------------------- input
def _check_input_file(path: str, what: str) -> None:
    p = Path(path)
    try:
        if not p.exists():
            raise InputError(f"{what} file {path!r} does not exist.")
        if p.is_dir():
            raise InputError(f"{what} file {path!r} is a directory; give the CSV file itself.")
    except OSError as err:
        raise InputError(f"{what} file {path!r} cannot be read: {err.strerror or err}.") from None
    if not os.access(p, os.R_OK):
        raise InputError(f"{what} file {path!r} cannot be read (permission denied).")


_NA_TEXT = ("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
            "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null")
"""The texts that pandas' ``read_csv`` reads as missing by default (its
documentation's list): every column but the ids keeps them."""


def _read_csv(path: str, what: str, *, ids: tuple = (), first_id: bool = False,
              header: bool = True, **kwargs) -> pd.DataFrame:
    """A table file (CSV, or an Excel workbook or Parquet file, told by its content);
    the id columns named in ``ids`` (and the first column, with ``first_id``) are
    read as written: text, never numbers ('00007' and '7' stay two ids), and no id
    is read as missing ('NA' is an id, '' stays empty). Without a ``header`` line
    the columns are named by number from 1."""
    kind = _file_kind(path)
    if kind != "csv":
        return _read_binary_table(path, what, kind, ids, header)
    sep, encoding = kwargs.get("sep", ","), kwargs.get("encoding")
    if not header:
        width = _read_file(path, what, nrows=1, header=None, sep=sep, encoding=encoding)
        kwargs.update(header=None, names=[str(i) for i in range(1, width.shape[1] + 1)])
        columns = kwargs["names"]
    elif ids or first_id:
        columns = list(_read_file(path, what, nrows=0, sep=sep, encoding=encoding).columns)
    else:
        columns = []
    text = {c for i, c in enumerate(columns) if c in ids or (first_id and i == 0)}
    if not text:
        return _read_file(path, what, **kwargs)
    kwargs.update(keep_default_na=False,
                  na_values={c: list(_NA_TEXT) for c in columns if c not in text})
    if "index_col" not in kwargs and _infers_text():
        # pandas reads a column it finds to be text 4-7 times faster than one it is told
        # is text (2·10^6 rows: 0.3 s against 1.1-2.2 s); a column it reads as text holds
        # every value as written, so only an id column read otherwise (numbers, or a mix)
        # is read again, the whole file with its dtype given, as before
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            table = _read_file(path, what, **kwargs)
        if all(c in table.columns and isinstance(table[c], pd.Series)
               and isinstance(table[c].dtype, pd.StringDtype) for c in text):
            for w in caught:  # the read's own warnings, as they were
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            return table
    return _read_file(path, what, dtype={c: str for c in text}, **kwargs)


def _infers_text() -> bool:
    """Whether pandas gives a text column its text dtype when it infers one (pandas 3),
    rather than object, which would not tell a text column from a mixed one."""
    return isinstance(pd.Series(["text"]).dtype, pd.StringDtype)


_MAGIC = ((b"PK\x03\x04", "excel"), (b"\xd0\xcf\x11\xe0", "old excel"), (b"PAR1", "parquet"))
"""The first bytes of an .xlsx workbook (a zip archive), an .xls workbook and a
Parquet file."""


def _file_kind(path: str) -> str:
    """``"csv"``, ``"excel"``, ``"old excel"`` or ``"parquet"``, from the file's first
    bytes (a zipped or gzipped CSV, named .zip or .gz, is a CSV)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4)
    except OSError:
        return "csv"  # read_csv names the problem
    if str(path).lower().endswith((".zip", ".gz")):
        return "csv"
    return next((kind for magic, kind in _MAGIC if head.startswith(magic)), "csv")


def _read_binary_table(path: str, what: str, kind: str, ids: tuple, header: bool):
    """An Excel workbook (with openpyxl) or a Parquet file (with pyarrow), ids as text."""
    import importlib.util

    if kind == "parquet":
        if importlib.util.find_spec("pyarrow") is None:
            raise InputError(f"{what} file {path!r} is a Parquet file: install pyarrow (pip "
                             f"install pyarrow) to read it, or save it as CSV.")
        return pd.read_parquet(path)
    if kind == "old excel":
        raise InputError(f"{what} file {path!r} is an Excel 97-2003 workbook (.xls), which "
                         f"is not read: save it as CSV (UTF-8), or as an .xlsx workbook and "
                         f"pass that with openpyxl installed (pip install openpyxl).")
    if importlib.util.find_spec("openpyxl") is None:
        raise InputError(f"{what} file {path!r} is an Excel workbook: save it as CSV (UTF-8), "
                         f"or pass an .xlsx with openpyxl installed (pip install openpyxl).")
    table = pd.read_excel(path, header=0 if header else None, dtype=object)
    if not header:
        table.columns = [str(i) for i in range(1, table.shape[1] + 1)]
    for column in ids:
        if column in table.columns:
            table[column] = table[column].map(lambda v: v if pd.isna(v) else str(v))
    return table


def _undecodable(path: str, encoding: str) -> tuple[int, int] | None:
    """(line, byte) of the first line that ``encoding`` cannot decode."""
    import gzip

    opener = gzip.open if str(path).lower().endswith(".gz") else open
    with opener(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                raw.decode(encoding)
            except UnicodeDecodeError as err:
                return number, raw[err.start]
    return None


def _read_file(path: str, what: str, **kwargs) -> pd.DataFrame:
    try:
        return pd.read_csv(path, **kwargs)
    except FileNotFoundError:
        raise InputError(f"{what} file {path!r} does not exist.") from None
    except (IsADirectoryError, PermissionError) as err:
        raise InputError(f"{what} file {path!r} cannot be read: {err.strerror}.") from None
    except LookupError:
        raise InputError(f"--encoding {kwargs.get('encoding')!r} is not an encoding Python "
                         f"knows; e.g. utf-8, latin-1, cp1252.") from None
    except UnicodeDecodeError as err:
        encoding = kwargs.get("encoding") or "utf-8"
        where = _undecodable(path, encoding)
        at = (f"line {where[0]} holds the byte 0x{where[1]:02x}, which {encoding} cannot "
              f"decode" if where else str(err))
        raise InputError(f"{what} file {path!r} is not a readable CSV in {encoding}: {at}; "
                         f"name the file's encoding with --encoding (e.g. latin-1 or "
                         f"cp1252).") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(f"{what} file {path!r} is not a readable CSV: {first}") from None


_SEPARATORS = (",", ";", "\t", "|")


def _sniff_sep(path: str, sep: str) -> str:
    """The separator of a features or gold file: ``sep`` (``--sep``) when its
    header line holds it (or holds no separator), else the one separator among
    ``, ; tab |`` that the header holds."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            header = handle.readline()
    except OSError:
        return sep  # read_csv reports it
    if sep in header:
        return sep
    found = [c for c in _SEPARATORS if c in header]
    return found[0] if len(found) == 1 else sep


def _sep_hint(df: pd.DataFrame, sep: str) -> str | None:
    """A hint when a file read with ``sep`` came out as one column whose name
    holds another separator."""
    if df.shape[1] != 1:
        return None
    header = str(df.columns[0])
    for candidate, shown in ((";", "';'"), ("\t", "'\\t'"), ("|", "'|'"), (",", "','")):
        if candidate != sep and candidate in header:
            return (f"the file was read as one column named {header!r}, so it is probably "
                    f"separated by {shown}: pass --sep {shown}")
    return None


def _check_columns(df: pd.DataFrame, what: str, columns: dict, sep: str) -> None:
    """Name a wrong separator when expected columns are missing."""
    for role, col in columns.items():
        if col not in df.columns:
            hint = _sep_hint(df, sep)
            if hint:
                raise InputError(f"column {col!r} ({role}) is not in the {what}; {hint}.")


def _strip_text(values: pd.Series) -> pd.Series:
    """The strings stripped of surrounding whitespace (each distinct one once)."""
    from crowd_models._parsing import _strip

    return _strip(values)


def _gold_from_file(args, df: pd.DataFrame, sep: str) -> pd.Series:
    path = args.gold
    sep = _sniff_sep(path, sep)
    item = args.gold_item or args.item
    g = _read_csv(path, "gold", sep=sep, ids=(item,), encoding=args.encoding)
    _check_columns(g, f"gold file {path!r}", {"the item ids": item}, sep)
    if item not in g.columns:
        raise InputError(f"gold file {path!r} has no column {item!r} for the item ids (name it "
                         f"with --gold-item); its columns are {_names(g.columns, 12)}.")
    if args.gold_label:
        label = args.gold_label
        if label not in g.columns:
            raise InputError(f"gold file {path!r} has no column {label!r} (--gold-label); its "
                             f"columns are {_names(g.columns, 12)}.")
    else:
        label = next((c for c in ("gold", args.label) if c in g.columns and c != item), None)
        if label is None:
            raise InputError(f"gold file {path!r} has no column 'gold' or {args.label!r} for "
                             f"the gold labels; name it with --gold-label (its columns are "
                             f"{_names(g.columns, 12)}).")
    if label == item:
        raise InputError(f"--gold-item and --gold-label are both {item!r}; the gold file needs "
                         f"a column of item ids and another of gold labels.")
    ids = g[item]
    missing = (ids.isna() | ids.astype(str).str.strip().eq("")).to_numpy()
    if missing.any():
        raise InputError(f"gold file {path!r} has no item id on {missing.sum()} row(s), e.g. "
                         f"line(s) {_names(np.flatnonzero(missing)[:5] + 2)}; fill in or drop "
                         f"those rows.")
    if args.strip:
        ids = _strip_text(ids)
    dup = ids[ids.duplicated()]
    if len(dup):
        raise InputError(f"gold file {path!r} lists item(s) {_names(dup.unique())} more than "
                         f"once; give one gold label per item.")
    index = pd.Index(ids)
    if args.item in df.columns:
        labelled = df[args.item].dropna()
        labelled = _strip_text(labelled) if args.strip else labelled
        if len(index) and not index.isin(labelled).any():
            raise InputError(
                f"none of the {len(index)} item ids of the gold file {path!r} (column {item!r}, "
                f"e.g. {_names(index[:3], 3)}) is an item id of the labels (e.g. "
                f"{_names(pd.unique(labelled)[:3], 3)}); check --gold-item and the ids"
                + _as_numbers_hint(index, labelled) + ".")
    values = _gold_like_labels(g[label], df, args.label,
                               f"column {label!r} of the gold file {path!r}", first_line=2)
    return pd.Series(values.to_numpy(), index=index, name="gold")


def _as_numbers_hint(ids: pd.Index, labelled: pd.Series) -> str:
    """A hint when ids that match nothing as written match as numbers ('7.0', '7')."""
    numbers = pd.to_numeric(pd.Series(ids), errors="coerce")
    known = pd.to_numeric(labelled, errors="coerce")
    if not numbers.isin(known.dropna()).any():
        return ""
    return ("; they match as numbers only: ids are compared as written (text), so write them "
            "the same way in both files (e.g. 7, not 7.0 or 007)")


def _gold_like_labels(values: pd.Series, df: pd.DataFrame, label: str, what: str,
                      first_line: int | None = None) -> pd.Series:
    """Gold labels as numbers when the labels are numbers: one word in a column
    makes pandas read all of it as text."""
    if label not in df.columns or not pd.api.types.is_numeric_dtype(df[label]) or (
            pd.api.types.is_numeric_dtype(values)):
        return values
    numbers = pd.to_numeric(values, errors="coerce")
    bad = (values.notna() & numbers.isna()).to_numpy()
    if bad.any():
        where = (f" (line(s) {_names(np.flatnonzero(bad)[:5] + first_line)})"
                 if first_line is not None else "")
        raise InputError(
            f"{what} holds {_names(pd.unique(values[bad]))}{where}, which are not numbers, but "
            f"the labels in column {label!r} are numbers; correct those gold labels, or leave "
            f"them empty where the gold label is unknown.")
    return numbers


def _gold_from_column(args, df: pd.DataFrame) -> pd.Series:
    col, item = args.gold_column, args.item
    if col not in df.columns:
        raise InputError(f"--gold-column {col!r} is not a column of the labels; their columns "
                         f"are {_names(df.columns, 12)}.")
    if item not in df.columns:  # the parser names the missing item column
        return None
    sub = df[[item, col]]
    if args.strip:
        sub = sub.apply(_strip_text)
    known = sub[sub[col].notna() & sub[item].notna()]
    if known.empty:
        raise InputError(f"--gold-column {col!r} is empty on every row: there are no gold "
                         f"labels.")
    counts = known.groupby(item, sort=False)[col].nunique()
    clash = counts.index[counts > 1]
    if len(clash):
        raise InputError(f"--gold-column {col!r} gives item(s) {_names(clash)} different gold "
                         f"labels on different rows; give each item one gold label (or leave "
                         f"it empty).")
    first = known.drop_duplicates(item)
    values = _gold_like_labels(first[col], df, args.label, f"--gold-column {col!r}")
    return pd.Series(values.to_numpy(), index=pd.Index(first[item]), name="gold")


def _numeric_classes(names: list[str], label: str) -> list:
    values = []
    for name in names:
        try:
            values.append(pd.to_numeric(name))
        except (TypeError, ValueError):
            raise InputError(f"--classes: column {label!r} holds numbers, so each class must be "
                             f"a number; {name!r} is not.") from None
    for i, value in enumerate(values):
        for j in range(i):
            if values[j] == value:
                raise InputError(f"--classes names the number {names[j]!r} twice (as "
                                 f"{names[j]!r} and {names[i]!r}); name each class once.")
    return values


def _labels_table(args, plan: _Plan):
    """The labels as a table, and the gold labels an export marks (or None)."""
    if args.format in EXPORT_QUESTION:
        from crowd_models._exports import read_export

        question = {EXPORT_QUESTION[args.format]: args.question}
        try:
            return read_export(args.format, args.labels, **question)
        except (ValueError, KeyError, TypeError) as err:
            raise InputError(f"--format {args.format}: {err}") from None
        except UnicodeDecodeError as err:
            raise InputError(f"{args.labels!r} is not UTF-8 text ({err.reason}); a "
                             f"{args.format} export is JSON in UTF-8.") from None
    df = _read_csv(args.labels, "labels", sep=plan.sep, ids=(args.item, args.annotator),
                   header=not args.no_header, encoding=args.encoding)
    _check_columns(df, "labels", {"the item column": args.item,
                                  "the annotator column": args.annotator,
                                  "the label column": args.label}, plan.sep)
    return df, None


def _record_lines(path: str, sep: str, encoding: str, header: bool) -> list[int]:
    """The line of the file on which each data row starts, as pandas reads the rows
    (blank lines skipped, quoted fields over several lines counted)."""
    import csv
    import gzip

    opener = gzip.open if str(path).lower().endswith(".gz") else open
    starts, last = [], 0
    with opener(path, "rt", encoding=encoding, newline="") as handle:
        reader = csv.reader(handle, delimiter=sep)
        for record in reader:
            if record:
                starts.append(last + 1)
            last = reader.line_num
    return starts[1:] if header else starts


def _in_file_lines(message: str, args, plan: _Plan) -> str:
    """A message about table rows (``rows 3, 5``), with the labels file's lines."""
    found = re.findall(r"\brows? ((?:\d+, )*\d+)", message)
    if not found or args.format in EXPORT_QUESTION or _file_kind(args.labels) != "csv":
        return message
    try:
        lines = _record_lines(args.labels, plan.sep, args.encoding, not args.no_header)
    except (OSError, UnicodeDecodeError, ValueError):
        return message

    def line(match) -> str:
        numbers = [int(n) for n in match[1].split(", ")]
        if any(n >= len(lines) for n in numbers):
            return match[0]
        return "line(s) " + ", ".join(str(lines[n]) for n in numbers)

    message = re.sub(r"\brows? ((?:\d+, )*\d+)", line, message)
    return message.replace(" row(s)", " line(s)")


def _load(args, plan: _Plan):
    """The annotations of the labels file (and features and gold), positions in
    messages given as the file's lines."""
    try:
        return _parsed(args, plan)
    except (ValueError, TypeError) as err:
        raise InputError(_in_file_lines(str(err), args, plan)) from None
    except InputError as err:
        raise InputError(_in_file_lines(str(err), args, plan)) from None


def _parsed(args, plan: _Plan):
    import crowd_models as cm

    df, gold = _labels_table(args, plan)
    features = None
    if args.features:
        features = _read_csv(args.features, "features", index_col=0, first_id=True,
                             sep=_sniff_sep(args.features, plan.sep), encoding=args.encoding)
    if args.gold:
        gold = _gold_from_file(args, df, plan.sep)
    elif args.gold_column:
        gold = _gold_from_column(args, df)
    kwargs = dict(item=args.item, annotator=args.annotator, label=args.label,
                  features=features, gold=gold, strip=args.strip, duplicates=args.duplicates)
    if args.continuous:
        if args.label in df.columns and not pd.api.types.is_numeric_dtype(df[args.label]):
            values = df[args.label]
            bad = values[pd.to_numeric(values, errors="coerce").isna() & values.notna()]
            if len(bad):
                raise InputError(
                    f"--continuous needs numeric labels, but column {args.label!r} holds "
                    f"{len(bad)} non-numeric value(s), e.g. {bad.iloc[0]!r} (row "
                    f"{bad.index[0]}); fix them or drop --continuous for class labels."
                )
            df[args.label] = pd.to_numeric(values)
        return cm.Annotations.from_frame(df, continuous=True, **kwargs)
    classes = plan.classes
    if classes is not None and args.label in df.columns and pd.api.types.is_numeric_dtype(
            df[args.label]):
        classes = _numeric_classes(classes, args.label)
    return cm.Annotations.from_frame(df, classes=classes, **kwargs)


def _integer_level(value) -> bool:
    if isinstance(value, str | bool | np.bool_):
        return False
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    return bool(np.isfinite(number) and number == int(number))


def _check_family_data(ann, plan: _Plan) -> None:
    """What the family needs of the parsed data, checked before fitting."""
    from crowd_models._text import listing

    if not ann.continuous:
        K = ann.n_classes
        if has_positive(plan.model, plan.variant) and K != 2:
            name = f"--model {plan.model}" + (f" --variant {plan.variant}" * bool(plan.variant))
            raise InputError(
                f"{name} needs exactly 2 classes; the labels have {K}: "
                f"{listing(ann.classes)}. Use --model dawid-skene for more classes (or --model "
                f"ordinal for ordered levels), or --classes to name the two.")
        if plan.model == "ordinal":
            words = [c for c in ann.classes if not _integer_level(c)]
            if words:
                raise InputError(
                    f"--model ordinal needs integer levels as labels; found non-integer "
                    f"level(s) {listing(words)} among the classes {listing(ann.classes)}. "
                    f"Recode the labels to 1..{K} in their order.")
            levels = [int(float(c)) for c in ann.classes]
            if any(b <= a for a, b in zip(levels, levels[1:], strict=False)):
                raise InputError(
                    f"--model ordinal needs the levels in increasing order, got "
                    f"{listing(levels)}; give --classes in increasing order or recode the "
                    f"labels to 1..{K}.")
        for prior in PRIORS:
            value = plan.priors.get(prior.name)
            kind = (prior.spec(plan.model, plan.variant) or ("",))[0]
            if kind == "concentration" and isinstance(value, tuple) and len(value) != K:
                raise InputError(
                    f"{prior.flag}: give one concentration or {K} (one per class, in the class "
                    f"order {listing(ann.classes)}), got {len(value)}.")


def _available_memory() -> int | None:
    """Bytes of memory the system could give this process now (None: unknown)."""
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return None


def _fit_bytes(n_items: int, n_annotators: int, n_labels: int, n_classes: int) -> int:
    """A rough upper bound on the memory of a categorical family's fit, in bytes.

    Float64 arrays: an (annotator, class, class) confusion-sized array in about
    eight copies (prior, expected counts, parameters, and the accelerated EM's
    iterates), an (item, class) posterior in four, and an (annotation, class)
    gather in two.
    """
    k = n_classes
    return 8 * (8 * n_annotators * k * k + 4 * n_items * k + 2 * n_labels * k)


def _check_memory(ann, plan: _Plan, label: str) -> None:
    """Refuse, before allocating it, a fit that cannot fit in this machine's memory."""
    if ann.continuous:
        return
    need = _fit_bytes(ann.n_items, ann.n_annotators, ann.n_annotations, ann.n_classes)
    have = _available_memory()
    if have is None or need <= have:
        return
    k, gib = ann.n_classes, 2.0 ** 30
    raise InputError(
        f"--model {plan.model} on {k} classes, {ann.n_annotators} annotators and "
        f"{ann.n_items} items needs about {need / gib:.1f} GiB of memory (one {k} x {k} "
        f"confusion matrix per annotator, several times over), and {have / gib:.1f} GiB are "
        f"available. {k} distinct labels in --label {label!r} are more like ids or "
        f"measurements than classes: check --label, or pass --continuous for numbers.")


def _with_positive(ann, positive: str | None):
    """The annotations with the class named by ``--positive`` (as text) second."""
    if positive is None:
        return ann
    from crowd_models._text import listing

    matches = [c for c in ann.classes if str(c) == positive]
    if not matches:
        raise InputError(f"--positive {positive!r} is not one of the classes "
                         f"{listing(ann.classes)}; name one of them.")
    return ann.with_positive(matches[0])
