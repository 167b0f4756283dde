"""`crowd-models`: fit an annotation table from the command line.

    crowd-models fit LABELS.csv [--item COL] [--annotator COL] [--label COL]
                 [--sep SEP] [--strip] [--classes C1,C2,...] [--features F.csv]
                 [--gold G.csv [--gold-item COL] [--gold-label COL] | --gold-column COL]
                 [--model two-coin|dawid-skene|ordinal|continuous|feature-accuracy]
                 [--variant NAME] [--continuous [--bias] [--scale]] [--penalty L[,L2,...]]
                 [prior options, see --help] [--method em|map|nuts]
                 [--draws N] [--tune N] [--chains N] [--seed N] [--out DIR] [--force]
    crowd-models demo [--out DIR] [--quick] [--force]

``--continuous`` (or ``--model continuous``) reads the labels as numbers and
fits the continuous family (annotator precision, with ``--bias`` an additive
bias, with ``--scale`` a multiplicative scale); the item table then holds the
posterior mean and sd of each item's true value. ``--model ordinal`` fits
ordered levels coded 1..K (the cumulative binary model); its annotator table
has a row per annotator and threshold. ``--model feature-accuracy`` (binary
labels, ``--features`` required) lets each annotator's accuracy depend on the
item's features, with Laplace (L1) priors of rate ``--penalty``; several
comma-separated rates are scored without gold by 5-fold cross-validated
disagreement with the annotators (``selection.select_penalty``) and the best
one is fitted. Fits with features also write ``coefficients.csv``.

Variants (``--variant``): dawid-skene ``full`` (default), ``one_coin``,
``hierarchical``; ordinal ``cumulative`` (default), ``latent``; continuous
``gaussian`` (default), ``student_t`` (the annotators' noise; ``--nu``).
``hierarchical``, ``latent`` and ``student_t`` have no EM: they are fitted by
MAP (``--method map``) or NUTS from the model's majority-vote start. The prior
options of each family (``--sensitivity-prior A,B`` and so on) are listed by
``crowd-models fit --help`` with their defaults; an option that does not apply
to the chosen ``--model``/``--variant`` (or method) is an error, not ignored.

Gold labels: ``--gold G.csv`` (item ids in the column ``--gold-item``, by
default the ``--item`` name; gold labels in ``--gold-label``, by default
``gold``, else the ``--label`` name) or ``--gold-column COL`` (a column of the
labels table, one value per item, empty where unknown). The accuracy against
gold is printed, ``gold_confusion.csv`` (gold class x estimated class,
counts) is written, and ``annotators.csv`` gets, per annotator, the measured
``gold_accuracy`` (and, for two classes or per ordinal threshold,
``gold_sensitivity`` and ``gold_specificity``) beside the estimates, with
``n_gold_labels``; continuous labels get ``gold_rmse``.

Input: ``--sep`` is the labels file's separator (``\\t`` or ``tab`` for tabs);
a features or gold file whose header line does not hold it is read with the
one of ``, ; tab |`` that its header holds. ``--strip`` strips surrounding
whitespace from ids, labels, ``--classes`` and gold (without it, ids or
labels that differ only in whitespace are kept apart, with a warning).

The report (``--out``, created if missing): ``annotators.csv``, ``items.csv``
(:func:`crowd_models.report.item_table`), ``coefficients.csv`` (with
features), ``gold_confusion.csv`` (with gold), ``annotators.png`` and
``fit.nc``. A folder that is not empty is refused unless ``--force``, which
replaces the report's files (naming each) and leaves every other file alone.

``fit.nc`` (an ``xarray.Dataset`` for EM, an ``xarray.DataTree`` for MAP and
NUTS; write engine h5netcdf) records in its (root) attrs ``crowd_models_version``,
``family`` (the module, e.g. ``two_coin``), ``variant`` (empty for a family
without variants), ``method``, ``priors`` (the family's ``DEFAULT_PRIORS``
with the command line's settings applied, and the penalty or ``nu`` used) and
``command``; after NUTS also ``label_switched_chains``, ``max_rhat``,
``min_ess_bulk`` and ``divergences``. netCDF attributes cannot hold an empty
list and give a list of ints back as an array, so every attribute that is a
list, dict, boolean or None is stored as JSON text; ``json_attrs`` (itself
JSON) names them. Read them back with::

    import json, xarray as xr
    fit = xr.open_datatree("report/fit.nc", engine="h5netcdf")
    switched = json.loads(fit.attrs["label_switched_chains"])  # a list of ints
    priors = json.loads(fit.attrs["priors"])                   # a dict

Python warnings raised while fitting (e.g. annotators below chance, estimates
on a boundary) print as one line each on stderr (``warning: ...``). Errors in
the input print one line on stderr (``crowd-models: error: ...``) and exit
with status 2, before any fitting; a failure to write the report exits with
status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

EXIT_INPUT = 2
EXIT_OUTPUT = 1

REPORT_FILES = ("annotators.csv", "items.csv", "coefficients.csv", "gold_confusion.csv",
                "annotators.png", "fit.nc")
"""Every file a report may write; ``--force`` replaces these and nothing else."""

VARIANTS = {
    "two-coin": (),
    "dawid-skene": ("full", "one_coin", "hierarchical"),
    "ordinal": ("cumulative", "latent"),
    "continuous": ("gaussian", "student_t"),
    "feature-accuracy": (),
}
"""``--variant`` names per ``--model``, the default first (the families'
``VARIANTS``; for continuous, its ``NOISES``)."""

_VARIANT_KEYWORD = {"dawid-skene": "variant", "ordinal": "variant", "continuous": "noise"}
"""The keyword of ``build_model``/``em`` that takes the variant."""

WITHOUT_EM = frozenset({("dawid-skene", "hierarchical"), ("ordinal", "latent"),
                        ("continuous", "student_t")})
"""(model, variant) pairs whose family has no EM: MAP or NUTS only."""

NUTS_DEFAULTS = {"draws": 1000, "tune": 1000, "chains": 4}

BINARY_MODELS = ("two-coin", "feature-accuracy")
"""Families with a positive class (``--positive``)."""

RHAT_LIMIT = 1.01
"""r-hat above this gets a warning after NUTS (Vehtari et al. 2021)."""
ESS_PER_CHAIN = 100
"""Bulk ESS below this times the number of chains gets a warning after NUTS."""


class InputError(Exception):
    """Bad input from the user: reported in one line, exit status 2."""


class OutputError(Exception):
    """The report could not be written: reported in one line, exit status 1."""


class _Parser(argparse.ArgumentParser):
    """argparse's errors as one line (argparse prints the usage first)."""

    def error(self, message):
        raise InputError(f"{message} (see '{self.prog} --help')")


class _Progress:
    """Prints numbered steps with their wall time, so long steps are visible."""

    def __init__(self, n_steps: int):
        self.n = n_steps
        self.i = 0
        self.t = None

    def step(self, text: str) -> None:
        self.done()
        self.i += 1
        print(f"[{self.i}/{self.n}] {text} ...", flush=True)
        self.t = time.perf_counter()

    def done(self) -> None:
        if self.t is not None:
            print(f"      done in {time.perf_counter() - self.t:.1f} s", flush=True)
            self.t = None


# ------------------------------------------------------------------ messages
_CLI_HINTS = (("strip=True", "--strip"), ("classes=[...]", "--classes"),
              ("continuous=True", "--continuous"))
"""Python-API advice in the library's messages and the command line's flag for it."""


def _one_line(text: str) -> str:
    """The message on one line, with the command line's flag beside API advice."""
    text = " ".join(str(text).split())
    flags = [flag for api, flag in _CLI_HINTS if api in text and flag not in text]
    if flags:
        text += f" (on the command line: {', '.join(flags)})"
    return text


def _names(values, n: int = 5) -> str:
    values = [str(v) for v in values]
    shown = ", ".join(values[:n])
    return shown + (f", ... ({len(values)} in all)" if len(values) > n else "")


@contextlib.contextmanager
def _one_line_warnings():
    """Show warnings as one ``warning: ...`` line each on stderr, without the
    file and line that raised them; UserWarnings are always shown (once per
    message and place)."""

    def show(message, category, filename, lineno, file=None, line=None):
        kind = "" if category is UserWarning else f"{category.__name__}: "
        print(f"warning: {kind}{_one_line(str(message))}", file=sys.stderr, flush=True)

    with warnings.catch_warnings():
        warnings.simplefilter("default", UserWarning)
        warnings.showwarning = show
        yield


# ------------------------------------------------------------ the options
@dataclass(frozen=True)
class _Prior:
    """A prior (or model setting) option: ``--name-with-dashes``, the keyword
    ``name`` of the family's ``build_model``/``em``."""

    name: str
    metavar: str
    text: str
    where: dict = field(default_factory=dict)
    """``"model"`` or ``"model/variant"`` -> (kind, needs, default as shown in --help);
    needs: None, "features", "no-features", "bias" or "scale"."""

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def spec(self, model: str, variant: str):
        return self.where.get(f"{model}/{variant}") or self.where.get(model)


_BETA = {"two-coin": ("beta", None, "3,2"), "ordinal/cumulative": ("beta", None, "3,2")}

PRIORS = (
    _Prior("sensitivity_prior", "A,B", "Beta prior of each annotator's sensitivity", _BETA),
    _Prior("specificity_prior", "A,B", "Beta prior of each annotator's specificity", _BETA),
    _Prior("prevalence_prior", "A,B|C",
           "prior of the class shares (without --features): Beta A,B of the positive share "
           "(of each threshold, ordinal cumulative) or a Dirichlet concentration C",
           {"two-coin": ("beta", "no-features", "2,2"),
            "ordinal/cumulative": ("beta", "no-features", "2,2"),
            "dawid-skene": ("concentration", "no-features", "2"),
            "ordinal/latent": ("concentration", None, "2")}),
    _Prior("confusion_prior", "DIAG,OFF",
           "Dirichlet pseudo-counts of each confusion row, DIAG on the diagonal and OFF on "
           "every other cell", {"dawid-skene/full": ("diag_off", None, "3,1+1/(K-1)")}),
    _Prior("accuracy_prior", "A,B", "Beta prior of each annotator's accuracy",
           {"dawid-skene/one_coin": ("beta", None, "3,2")}),
    _Prior("population_prior", "ADV,SD",
           "diagonal advantage and sd (log-odds) of the population confusion",
           {"dawid-skene/hierarchical": ("location_sd", None, "2,1.5")}),
    _Prior("spread_prior", "S",
           "HalfNormal scale of the annotators' spread around the population confusion",
           {"dawid-skene/hierarchical": ("positive", None, "1")}),
    _Prior("precision_prior", "SHAPE,RATE",
           "Gamma prior of each annotator's precision, in units of the labels' sd (1,0: flat)",
           {"continuous": ("gamma", None, "2,0.1")}),
    _Prior("truth_precision_prior", "SHAPE,RATE",
           "Gamma prior of the precision of the true values around their mean (1,0: flat)",
           {"continuous": ("gamma", None, "2,0.1")}),
    _Prior("bias_sd", "SD",
           "prior sd of the annotators' biases (continuous, with --bias: in units of the "
           "labels' sd; ordinal latent: in levels)",
           {"continuous": ("positive", "bias", "1"), "ordinal/latent": ("positive", None, "1")}),
    _Prior("scale_sd", "SD", "prior sd of the annotators' scales around 1 (with --scale)",
           {"continuous": ("positive", "scale", "0.5")}),
    _Prior("noise_prior", "SHAPE,RATE", "Gamma prior of each annotator's noise (in levels)",
           {"ordinal/latent": ("shape_rate", None, "2,1")}),
    _Prior("coef_precision", "P",
           "Gaussian prior precision of the classifier's coefficients, with --features (0: "
           "flat; dawid-skene needs > 0)",
           {"two-coin": ("nonnegative", "features", "1"),
            "ordinal/cumulative": ("nonnegative", "features", "1"),
            "dawid-skene": ("positive", "features", "1"),
            "continuous": ("nonnegative", "features", "1")}),
    _Prior("nu", "NU", "degrees of freedom of the annotators' Student-t noise",
           {"continuous/student_t": ("positive", None, "4")}),
)
"""The prior options of ``fit``; ``--penalty`` (feature-accuracy) has its own."""

_KINDS = {
    # kind: (how many numbers (None: one or more), an example, test, what it needs)
    "beta": (2, "3,2", lambda v: min(v) >= 1,
             "a Beta prior needs A >= 1 and B >= 1 (1,1 is flat)"),
    "diag_off": (2, "3,1.5", lambda v: min(v) >= 1,
                 "Dirichlet pseudo-counts must be >= 1 (1,1 is flat)"),
    "gamma": (2, "2,0.1", lambda v: v[0] >= 1 and v[1] >= 0 and not (v[0] > 1 and v[1] == 0),
              "a Gamma prior needs SHAPE >= 1 and RATE >= 0, and RATE > 0 unless SHAPE is 1 "
              "(1,0 is flat)"),
    "shape_rate": (2, "2,1", lambda v: min(v) > 0, "SHAPE and RATE must be > 0"),
    "location_sd": (2, "2,1.5", lambda v: v[1] > 0, "the SD (second number) must be > 0"),
    "concentration": (None, "2", lambda v: min(v) >= 1,
                      "a Dirichlet concentration must be >= 1 (1 is flat)"),
    "positive": (1, "1", lambda v: v[0] > 0, "it must be > 0"),
    "nonnegative": (1, "1", lambda v: v[0] >= 0, "it must be >= 0 (0 is flat)"),
}


def _parse_prior(text: str, flag: str, kind: str):
    count, example, ok, needs = _KINDS[kind]
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise InputError(f"{flag} {text!r}: give numbers separated by commas, e.g. "
                         f"{flag} {example}.") from None
    if count is not None and len(values) != count:
        raise InputError(f"{flag} {text!r}: give {count} number{'s' * (count > 1)}"
                         f"{' separated by a comma' * (count > 1)}, e.g. {flag} {example}; "
                         f"got {len(values)}.")
    if not all(np.isfinite(values)):
        raise InputError(f"{flag} {text!r}: the numbers must be finite.")
    if not ok(values):
        raise InputError(f"{flag} {text!r}: {needs}.")
    return values[0] if len(values) == 1 else tuple(values)


def _where_text(prior: _Prior) -> str:
    places = []
    for key in prior.where:
        model, _, variant = key.partition("/")
        places.append(f"--model {model}" + (f" --variant {variant}" if variant else ""))
    return places[0] if len(places) == 1 else ", ".join(places[:-1]) + " or " + places[-1]


def _model_text(model: str, variant: str) -> str:
    return f"--model {model}" + (f" --variant {variant}" if VARIANTS[model] else "")


def _check_needs(flag: str, needs, args) -> None:
    if needs == "features" and not args.features:
        raise InputError(f"{flag} applies with --features only (it is a prior of the "
                         f"classifier of the features).")
    if needs == "no-features" and args.features:
        raise InputError(f"{flag} does not apply with --features: the class shares then come "
                         f"from the classifier of the features (see --coef-precision).")
    if needs == "bias" and not args.bias:
        raise InputError(f"{flag} applies with --bias (it is the prior of the annotators' "
                         f"biases); add --bias.")
    if needs == "scale" and not args.scale:
        raise InputError(f"{flag} applies with --scale (it is the prior of the annotators' "
                         f"scales); add --scale.")


def _prior_options(args, model: str, variant: str) -> dict:
    """The prior options given, parsed and checked against --model and --variant."""
    out = {}
    for prior in PRIORS:
        text = getattr(args, prior.name)
        if text is None:
            continue
        spec = prior.spec(model, variant)
        if spec is None:
            raise InputError(f"{prior.flag} applies to {_where_text(prior)}, not "
                             f"{_model_text(model, variant)}.")
        kind, needs, _ = spec
        _check_needs(prior.flag, needs, args)
        out[prior.name] = _parse_prior(text, prior.flag, kind)
    return out


def _variant(args) -> str:
    known = VARIANTS[args.model]
    if args.variant is None:
        return known[0] if known else ""
    if not known:
        raise InputError(f"--model {args.model} has no variants; drop --variant {args.variant}.")
    name = args.variant.replace("-", "_")
    if name not in known:
        raise InputError(f"--variant {args.variant!r} is not a variant of --model {args.model}; "
                         f"choose one of {', '.join(known)}.")
    return name


def _separator(text: str) -> str:
    if text in ("\\t", "tab", "\t"):
        return "\t"
    if len(text) != 1 or text in ('"', "\n", "\r"):
        raise InputError(f"--sep {text!r}: give one character, e.g. --sep ';', or \\t (or tab) "
                         f"for tabs.")
    return text


def _class_names(text: str, strip: bool) -> list[str]:
    """``--classes``: two or more distinct, non-empty names."""
    names = text.split(",")
    if strip:
        names = [n.strip() for n in names]
    empty = [i + 1 for i, n in enumerate(names) if not n.strip()]
    if empty:
        raise InputError(f"--classes {text!r} has an empty entry (entry {empty[0]} of "
                         f"{len(names)}); give the class names separated by commas, e.g. "
                         f"--classes 0,1 or --classes benign,malignant.")
    seen = set()
    for name in names:
        if name in seen:
            raise InputError(f"--classes {text!r} names {name!r} twice; name each class once.")
        seen.add(name)
    if len(names) < 2:
        raise InputError(f"--classes {text!r} names one class; give at least two, separated by "
                         f"commas.")
    return names


def _count(args, name: str, minimum: int):
    value = getattr(args, name)
    if value is None:
        return None
    if value < minimum:
        what = {"draws": "draws per chain", "tune": "tuning steps per chain",
                "chains": "the number of chains", "seed": "the random seed"}[name]
        bound = "a positive integer" if minimum == 1 else "0 or more"
        raise InputError(f"--{name} must be {bound} ({what}), got {value}.")
    return value


def _penalties(text: str | None, model: str) -> list[float] | None:
    """``--penalty``: one or more positive rates; only for feature-accuracy
    (None: the family's default)."""
    if text is None:
        return None
    if model != "feature-accuracy":
        raise InputError(f"--penalty applies to --model feature-accuracy, not {model}.")
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise InputError(f"--penalty {text!r}: give positive numbers separated by commas, "
                         f"e.g. 0.5,1,2.") from None
    if not all(np.isfinite(v) and v > 0 for v in values):
        raise InputError(f"--penalty {text!r}: every rate must be a positive number.")
    return values


@dataclass
class _Plan:
    """What ``fit`` will do, decided from the arguments alone."""

    model: str
    variant: str
    has_em: bool
    options: dict
    priors: dict
    penalties: list | None
    classes: list | None
    sep: str
    nuts: dict

    def n_steps(self, method: str) -> int:
        return 2 + self.has_em + (method in ("map", "nuts")) + (method == "nuts")


def _plan(args) -> _Plan:
    """Check the arguments and their combinations (no file is read)."""
    if args.model == "continuous":
        args.continuous = True
    elif args.continuous:
        if args.model != "two-coin":  # the default: --continuous alone picks the family
            raise InputError(
                f"--continuous fits the continuous family; it cannot be combined with "
                f"--model {args.model}.")
        args.model = "continuous"
    model = args.model
    variant = _variant(args)
    options = {}
    if model in _VARIANT_KEYWORD:
        options[_VARIANT_KEYWORD[model]] = variant
    if args.continuous:
        options.update(bias=args.bias, scale=args.scale)
    elif args.bias or args.scale:
        raise InputError("--bias and --scale apply to continuous labels; add --continuous.")
    if args.continuous and args.classes:
        raise InputError("--classes does not apply to continuous labels; drop it.")
    if args.positive is not None and model not in BINARY_MODELS:
        raise InputError(f"--positive names the positive class of a binary model "
                         f"({', '.join(BINARY_MODELS)}); --model {model} has no positive "
                         f"class. Drop --positive.")
    if model == "feature-accuracy" and not args.features:
        raise InputError("--model feature-accuracy needs --features F.csv: the annotators' "
                         "accuracy depends on the items' features.")
    if (model, variant) == ("ordinal", "latent") and args.features:
        raise InputError("--variant latent of --model ordinal has no classifier of the "
                         "features; drop --features or use --variant cumulative.")
    has_em = (model, variant) not in WITHOUT_EM
    if args.method == "em" and not has_em:
        raise InputError(f"--variant {variant} of --model {model} has no EM; use --method map "
                         f"or --method nuts.")
    priors = _prior_options(args, model, variant)
    penalties = _penalties(args.penalty, model)
    nuts = {}
    for name, minimum in (("draws", 1), ("tune", 0), ("chains", 1), ("seed", 0)):
        value = _count(args, name, minimum)
        if value is not None and args.method != "nuts":
            raise InputError(f"--{name} applies to --method nuts, not --method {args.method}.")
        nuts[name] = NUTS_DEFAULTS.get(name) if value is None else value
    if args.gold and args.gold_column:
        raise InputError("give gold labels either as a file (--gold) or as a column of the "
                         "labels (--gold-column), not both.")
    for flag, value in (("--gold-item", args.gold_item), ("--gold-label", args.gold_label)):
        if value is not None and not args.gold:
            raise InputError(f"{flag} names a column of the gold file; add --gold G.csv.")
    if args.gold_column is not None and args.gold_column in (args.item, args.annotator,
                                                              args.label):
        raise InputError(f"--gold-column {args.gold_column!r} is also the item, annotator or "
                         f"label column; name the column that holds the gold labels.")
    classes = _class_names(args.classes, args.strip) if args.classes else None
    return _Plan(model=model, variant=variant, has_em=has_em, options={**options, **priors},
                 priors=priors, penalties=penalties, classes=classes,
                 sep=_separator(args.sep), nuts=nuts)


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


def _read_csv(path: str, what: str, **kwargs) -> pd.DataFrame:
    try:
        return pd.read_csv(path, **kwargs)
    except FileNotFoundError:
        raise InputError(f"{what} file {path!r} does not exist.") from None
    except (IsADirectoryError, PermissionError) as err:
        raise InputError(f"{what} file {path!r} cannot be read: {err.strerror}.") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
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


def _ids_like_labels(ids: pd.Index, df: pd.DataFrame, item: str, what: str) -> pd.Index:
    """Ids read from another file, converted to the type of the labels' item ids
    (ids read from two files must compare equal)."""
    if item not in df.columns:
        return ids
    try:
        return ids.astype(df[item].dtype)
    except (TypeError, ValueError):
        raise InputError(
            f"{what} cannot be read as the type of the labels' {item!r} column "
            f"({df[item].dtype})."
        ) from None


def _strip_text(values: pd.Series) -> pd.Series:
    return values.map(lambda v: v.strip() if isinstance(v, str) else v)


def _gold_from_file(args, df: pd.DataFrame, sep: str) -> pd.Series:
    path = args.gold
    sep = _sniff_sep(path, sep)
    g = _read_csv(path, "gold", sep=sep)
    item = args.gold_item or args.item
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
    missing = ids.isna().to_numpy()
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
    index = _ids_like_labels(pd.Index(ids), df, args.item, f"the gold file's {item!r} column")
    if args.item in df.columns:
        labelled = df[args.item].dropna()
        labelled = _strip_text(labelled) if args.strip else labelled
        if len(index) and not index.isin(labelled).any():
            raise InputError(
                f"none of the {len(index)} item ids of the gold file {path!r} (column {item!r}, "
                f"e.g. {_names(index[:3], 3)}) is an item id of the labels (e.g. "
                f"{_names(pd.unique(labelled)[:3], 3)}); check --gold-item and the ids.")
    values = _gold_like_labels(g[label], df, args.label,
                               f"column {label!r} of the gold file {path!r}", first_line=2)
    return pd.Series(values.to_numpy(), index=index, name="gold")


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


def _load(args, plan: _Plan):
    import crowd_models as cm

    df = _read_csv(args.labels, "labels", sep=plan.sep)
    _check_columns(df, "labels", {"the item column": args.item,
                                  "the annotator column": args.annotator,
                                  "the label column": args.label}, plan.sep)
    features = None
    if args.features:
        features = _read_csv(args.features, "features", index_col=0,
                             sep=_sniff_sep(args.features, plan.sep))
        features.index = _ids_like_labels(features.index, df, args.item,
                                          "the features' first column (item ids)")
    gold = None
    if args.gold:
        gold = _gold_from_file(args, df, plan.sep)
    elif args.gold_column:
        gold = _gold_from_column(args, df)
    kwargs = dict(item=args.item, annotator=args.annotator, label=args.label,
                  features=features, gold=gold, strip=args.strip)
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
        if plan.model in ("two-coin", "feature-accuracy") and K != 2:
            raise InputError(
                f"--model {plan.model} needs exactly 2 classes; the labels have {K}: "
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


# ------------------------------------------------------------------ output
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


def _check_out(out: Path, force: bool) -> list[str]:
    """The names in the output folder (empty when it does not exist yet);
    refuses a file, an unwritable place, or a non-empty folder without --force."""
    shown = str(out)
    try:
        if out.exists() and not out.is_dir():
            raise InputError(f"--out {shown!r} is an existing file, not a folder; give a folder "
                             f"for the report (it is created if missing).")
        if out.is_dir():
            entries = sorted(p.name for p in out.iterdir())
            if not os.access(out, os.W_OK | os.X_OK):
                raise InputError(f"--out {shown!r} is not writable (no permission to write in "
                                 f"it); give another folder.")
            if entries and not force:
                raise InputError(f"--out {shown!r} is not empty (it holds {_names(entries)}); "
                                 f"give a new or empty folder, or pass --force to replace the "
                                 f"report's files in it.")
            blocked = [n for n in REPORT_FILES if (out / n).is_dir()]
            if blocked:
                raise InputError(f"--out {shown!r} holds a folder named {blocked[0]!r} where the "
                                 f"report writes a file; move it or give another folder.")
            return entries
        parent = out
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
    except OSError as err:
        raise InputError(f"--out {shown!r} cannot be used: {err.strerror or err}.") from None
    if not parent.is_dir():
        raise InputError(f"--out {shown!r} cannot be created: {str(parent)!r} is a file, not a "
                         f"folder.")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"--out {shown!r} cannot be created: no permission to write in "
                         f"{str(parent)!r}.")
    return []


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("crowd_models")
    except PackageNotFoundError:
        import crowd_models

        return crowd_models.__version__


def _json_default(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


def netcdf_attrs(attrs: dict) -> dict:
    """Attributes as netCDF can store them: lists, tuples, dicts, booleans and
    None become JSON text, named (with ``stages``, already JSON) in
    ``json_attrs``."""
    out, as_json = {}, []
    for key, value in attrs.items():
        if isinstance(value, list | tuple | dict | bool | np.bool_) or value is None:
            out[key] = json.dumps(value, default=_json_default)
            as_json.append(key)
        else:
            out[key] = value
    if isinstance(out.get("stages"), str) and "stages" not in as_json:
        as_json.append("stages")
    out["json_attrs"] = json.dumps(sorted(as_json))
    return out


def _write_fit(fit, path: Path, info: dict) -> None:
    saved = fit.copy()
    saved.attrs = netcdf_attrs({**fit.attrs, **info})
    saved.to_netcdf(path, engine="h5netcdf")


def _planned_report(out: Path, entries: list[str], names: list[str]) -> None:
    """Say which files of the folder the report replaces (--force) and which
    report files of an earlier run stay."""
    replaced = [n for n in names if n in entries]
    stale = [n for n in REPORT_FILES if n in entries and n not in names]
    if replaced:
        print("      --force: replacing " + ", ".join(str(out / n) for n in replaced))
    if stale:
        print("      left in place, not part of this report: "
              + ", ".join(str(out / n) for n in stale))


# ---------------------------------------------------------------- reports
def _continuous_scores(table: pd.DataFrame) -> str | None:
    """Correlation and RMSE of the true-value means against gold, where known."""
    if "gold" not in table:
        return None
    known = table["gold"].notna()
    if known.sum() < 2:
        return None
    mean, gold = table.loc[known, "mean"], table.loc[known, "gold"]
    corr = float(np.corrcoef(mean, gold)[0, 1])
    rmse = float(np.sqrt(np.mean((mean - gold) ** 2)))
    return f"against gold ({int(known.sum())} items): correlation {corr:.4f}, RMSE {rmse:.4g}"


def _choose_penalty(ann, penalties: list[float]) -> float:
    """The single rate, or the one the gold-free 5-fold disagreement score picks."""
    if len(penalties) == 1:
        return penalties[0]
    from crowd_models.selection import select_penalty

    print(f"      scoring {len(penalties)} penalties by 5-fold disagreement (no gold; "
          f"EM with 5 restarts per fold) ...", flush=True)
    try:
        chosen = select_penalty(ann, penalties, rng=0, n_restarts=5)
    except ValueError as err:
        raise InputError(str(err)) from None
    for line in chosen.scores.round(4).to_string().splitlines():
        print("      " + line)
    print(f"      chosen penalty: {chosen.penalty:g}")
    return chosen.penalty


def _annotator_figure(fit, table):
    """The family's annotator figure (``annotators.png``), or None with the reason below.

    two-coin: ROC space, best and worst annotators by weight named, markers sized
    by labels; ordinal cumulative: one ROC panel per threshold; Dawid-Skene,
    one-coin and ordinal latent: the pooled confusion then the worst and the most
    uncertain annotators' (titled by group); continuous: bias against noise SD
    with the table's intervals (EM's conditional ones where the table has them);
    feature-accuracy: accuracy against labels, with its spread over the items.
    """
    import matplotlib

    matplotlib.use("Agg")
    from crowd_models import report
    from crowd_models.inference import posterior_of

    post = posterior_of(fit)
    if "sensitivity" in post and "threshold" in post["sensitivity"].dims:
        return report.plot_thresholds(fit, label_extremes=1)
    if "sensitivity" in post:
        return report.plot_annotators(fit, label_extremes=3).figure
    if "confusion" in post:
        recorded = "n_labels" in table and bool(table["n_labels"].notna().all())
        return report.plot_confusion_groups(fit, n=2,
                                            population=recorded or "confusion_mean" in post)
    if "precision" in post and "true_value" in post:
        return report.plot_bias_noise(fit, table=table, label_extremes=2).figure
    if "accuracy_mean" in table:  # feature-accuracy: the family's own table has it
        return report.plot_accuracy(fit, table=table, label_extremes=2).figure
    # stacked Gaussian fits (not on the command line) have no annotator-quality
    # parameter to plot: each annotator's base learner is a class-conditional
    # Gaussian model, and the stacking weights come from annotator_weights,
    # outside the fit; any other fit has nothing we know how to draw either
    return None


def nuts_diagnostics(fit) -> dict:
    """ArviZ's convergence checks of a NUTS fit: the largest r-hat and the
    smallest bulk ESS over every posterior variable (constant ones, whose
    r-hat is undefined, are skipped), with the variables they belong to, the
    number of divergent transitions and the label-switched chains that
    :func:`crowd_models.sample` flagged (None when it did not check, e.g. for
    continuous labels)."""
    import arviz as az

    from crowd_models.inference import posterior_of

    post = posterior_of(fit)
    keep = [n for n in post.data_vars if {"chain", "draw"} <= set(post[n].dims)
            and np.issubdtype(post[n].dtype, np.number)]
    post = post[keep]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # constant variables: 0 / 0
        rhat = az.rhat(post)
        ess = az.ess(post, method="bulk")

    def extreme(ds, largest: bool):
        best = (np.nan, "")
        for name in ds.data_vars:
            values = np.asarray(ds[name].values, dtype=float).ravel()
            # where r-hat is undefined the draws are constant: no ESS either
            values = values[np.isfinite(values) & np.isfinite(
                np.asarray(rhat[name].values, dtype=float).ravel())]
            if values.size:
                value = values.max() if largest else values.min()
                if np.isnan(best[0]) or (value > best[0] if largest else value < best[0]):
                    best = (float(value), str(name))
        return best

    max_rhat, rhat_var = extreme(rhat, True)
    min_ess, ess_var = extreme(ess, False)
    divergences = None
    if "sample_stats" in fit.children and "diverging" in fit["sample_stats"].to_dataset():
        divergences = int(np.asarray(fit["sample_stats"]["diverging"].values).sum())
    switched = fit.attrs.get("label_switched_chains")
    if switched is not None:
        switched = [int(c) for c in np.atleast_1d(switched)]
    return {"max_rhat": max_rhat, "max_rhat_variable": rhat_var, "min_ess_bulk": min_ess,
            "min_ess_bulk_variable": ess_var, "divergences": divergences,
            "label_switched_chains": switched, "chains": int(post.sizes.get("chain", 1))}


def _print_diagnostics(diag: dict) -> None:
    switched = diag["label_switched_chains"]
    parts = [f"max r-hat {diag['max_rhat']:.3f} ({diag['max_rhat_variable']})",
             f"min bulk ESS {diag['min_ess_bulk']:.0f} ({diag['min_ess_bulk_variable']})"]
    if diag["divergences"] is not None:
        parts.append(f"{diag['divergences']} divergences")
    if switched is not None:
        parts.append(f"label-switched chains: {switched if switched else 'none'}")
    print("NUTS: " + ", ".join(parts))
    warn = []
    if diag["max_rhat"] > RHAT_LIMIT:
        warn.append(f"max r-hat {diag['max_rhat']:.3f} > {RHAT_LIMIT} "
                    f"({diag['max_rhat_variable']}): the chains disagree; run longer (--tune, "
                    f"--draws) and check the label-switched chains.")
    floor = ESS_PER_CHAIN * diag["chains"]
    if diag["min_ess_bulk"] < floor:
        warn.append(f"min bulk ESS {diag['min_ess_bulk']:.0f} < {floor} ({ESS_PER_CHAIN} per "
                    f"chain, {diag['min_ess_bulk_variable']}): too few effective draws for "
                    f"reliable means and intervals; raise --draws.")
    if diag["divergences"]:
        warn.append(f"{diag['divergences']} divergent transitions: NUTS could not follow the "
                    f"posterior everywhere, so the draws may be biased.")
    for line in warn:
        print(f"warning: {line}", file=sys.stderr, flush=True)


def _diagnostic_attrs(diag: dict) -> dict:
    out = {"max_rhat": diag["max_rhat"], "min_ess_bulk": diag["min_ess_bulk"]}
    if diag["divergences"] is not None:
        out["divergences"] = diag["divergences"]
    if diag["label_switched_chains"] is not None:
        out["label_switched_chains"] = diag["label_switched_chains"]
    return out


# --------------------------------------------------------------- commands
def _priors_record(family, plan: _Plan, options: dict) -> dict:
    """The family's default priors with the command line's settings applied."""
    record = dict(getattr(family, "DEFAULT_PRIORS", {}))
    record.update(plan.priors)
    if "penalty" in options:
        record["penalty"] = options["penalty"]
    if plan.variant == "student_t":
        import inspect

        record.setdefault("nu", inspect.signature(family.build_model).parameters["nu"].default)
    return record


def run_fit(args, argv=None) -> int:
    plan = _plan(args)
    _check_input_file(args.labels, "labels")
    for path, what in ((args.features, "features"), (args.gold, "gold")):
        if path:
            _check_input_file(path, what)
    progress = _Progress(plan.n_steps(args.method))
    progress.step(f"reading {args.labels}")
    try:
        ann = _load(args, plan)
    except (ValueError, TypeError) as err:
        raise InputError(str(err)) from None
    _check_family_data(ann, plan)
    if plan.model in BINARY_MODELS:
        ann = _with_positive(ann, args.positive)
    print(f"      {ann}")
    out = Path(args.out)
    entries = _check_out(out, args.force)

    import crowd_models as cm
    from crowd_models import report
    from crowd_models.models import MODELS

    family = MODELS[plan.model]
    options = dict(plan.options)
    if plan.penalties is not None:
        options["penalty"] = _choose_penalty(ann, plan.penalties)
    em_fit = None
    if plan.has_em:
        progress.step("EM (reference fit)")
        try:
            em_fit = family.em(ann, **options)
        except ValueError as err:  # the data do not suit the family (e.g. 3 classes, two-coin)
            raise InputError(str(err)) from None
    fit = em_fit
    if args.method in ("map", "nuts"):
        progress.step("building and optimising the PyMC model (MAP)")
        try:
            model = family.build_model(ann, **options)
        except ValueError as err:
            raise InputError(str(err)) from None
        fit = cm.fit_map(model, start=em_fit)  # no EM: the model's majority-vote start
    diagnostics = None
    if args.method == "nuts":
        nuts = plan.nuts
        progress.step(f"NUTS: {nuts['chains']} chains x {nuts['draws']} draws")
        fit = cm.sample(model, draws=nuts["draws"], tune=nuts["tune"], chains=nuts["chains"],
                        random_seed=nuts["seed"], start=fit)
        if hasattr(family, "align_signs"):  # a chain in the mirrored mode is flipped back
            fit = family.align_signs(fit, ann)
        diagnostics = nuts_diagnostics(fit)

    progress.step(f"writing the report to {out}")
    summarise = getattr(family, "annotator_summary", None)
    table = report.annotator_summary(fit) if summarise is None else summarise(
        fit, annotations=ann)
    conditional = args.continuous and args.method != "nuts" and em_fit is not None
    if conditional:  # MAP = EM: EM's conditional intervals
        table = report.conditional_intervals(table, em_fit)
    items = report.item_table(fit, ann)
    confusion = None
    if ann.has_gold:
        table = report.with_gold_columns(table, ann)
        if not ann.continuous:
            confusion = report.gold_confusion(items, ann)
    coefficients = report.coefficient_table(fit)
    figure = _annotator_figure(fit, table)
    names = ["annotators.csv", "items.csv"]
    names += ["coefficients.csv"] * (coefficients is not None)
    names += ["gold_confusion.csv"] * (confusion is not None)
    names += ["annotators.png"] * (figure is not None) + ["fit.nc"]
    _planned_report(out, entries, names)
    info = {"crowd_models_version": _package_version(),
            "family": family.__name__.rsplit(".", 1)[-1], "variant": plan.variant,
            "method": args.method, "priors": _priors_record(family, plan, options),
            "command": shlex.join(["crowd-models", *(argv or [])])}
    if args.continuous:
        info.update(bias=int(args.bias), scale=int(args.scale))
    if args.method == "nuts":
        info.update(_diagnostic_attrs(diagnostics), draws=plan.nuts["draws"],
                    tune=plan.nuts["tune"], chains=plan.nuts["chains"])
        if plan.nuts["seed"] is not None:
            info["random_seed"] = plan.nuts["seed"]
    try:
        out.mkdir(parents=True, exist_ok=True)
        table.to_csv(out / "annotators.csv")
        items.to_csv(out / "items.csv")
        if coefficients is not None:
            coefficients.to_csv(out / "coefficients.csv")
        if confusion is not None:
            confusion.to_csv(out / "gold_confusion.csv")
        if figure is not None:
            import matplotlib.pyplot as plt

            figure.savefig(out / "annotators.png", dpi=120, bbox_inches="tight")
            plt.close(figure)
        _write_fit(fit, out / "fit.nc", info)
    except OSError as err:
        raise OutputError(f"could not write the report to {str(out)!r}: "
                          f"{err.strerror or err}") from None
    progress.done()
    if plan.model in BINARY_MODELS:
        print(f"positive class: {ann.classes[1]!r} (sensitivity: its rate of positive labels; "
              f"--positive to change)")
    with pd.option_context("display.max_rows", 60, "display.width", 120):
        shown = table.loc[:, ~table.columns.str.endswith("_sd")].dropna(axis=1, how="all")
        print(shown.round(3).to_string())
    if conditional:
        print("(precision, noise sd and bias intervals: 90% conditional posteriors given the EM "
              "fit's other parameters; --method nuts for the full posterior)")
    if args.continuous:
        scores = _continuous_scores(items)
        if scores:
            print(scores)
    elif confusion is not None:
        n_gold = int(confusion.to_numpy().sum())
        accuracy = float(np.trace(confusion.to_numpy()) / n_gold)
        print(f"accuracy against gold ({n_gold} items): {accuracy:.4f}")
        print("gold (rows) x estimated (columns):")
        print(confusion.to_string())
    if coefficients is not None and plan.model == "feature-accuracy" and args.method != "nuts":
        nonzero = (coefficients.filter(like="_mean").abs() > 1e-8).sum()
        print("non-zero coefficients at the mode: " + ", ".join(
            f"{name.removesuffix('_mean')} {n} of {len(coefficients)}"
            for name, n in nonzero.items()))
    if diagnostics is not None:
        _print_diagnostics(diagnostics)
    print("wrote: " + ", ".join(str(out / n) for n in names))
    return 0


def run_demo(args, argv=None) -> int:
    out = Path(args.out)
    entries = _check_out(out, args.force)
    import crowd_models as cm
    from crowd_models import report
    from crowd_models.models import two_coin

    draws, tune, chains = (300, 300, 2) if args.quick else (1000, 1000, 4)
    progress = _Progress(5)
    progress.step("loading the RTE crowd labels (Snow et al. 2008)")
    ann = cm.datasets.load_rte()
    print(f"      {ann}")
    mv = cm.majority_vote(ann, hard=True, ties="random", rng=0)
    progress.step("EM (Raykar et al. 2009)")
    em_fit = two_coin.em(ann)
    progress.step("MAP with PyMC (compiles the model once)")
    model = two_coin.build_model(ann)
    map_fit = cm.fit_map(model)
    progress.step(f"NUTS: {chains} chains x {draws} draws")
    idata = cm.sample(model, draws=draws, tune=tune, chains=chains, random_seed=2009,
                      start=map_fit, progressbar=False)
    diagnostics = nuts_diagnostics(idata)
    progress.step(f"writing the report to {out}")
    names = ["annotators.csv", "items.csv", "annotators.png", "fit.nc"]
    _planned_report(out, entries, names)
    summary = report.annotator_summary(idata, rank_by="weight_mean")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    info = {"crowd_models_version": _package_version(), "family": "two_coin", "variant": "",
            "method": "nuts", "priors": dict(two_coin.DEFAULT_PRIORS),
            "command": shlex.join(["crowd-models", *(argv or [])]),
            **_diagnostic_attrs(diagnostics), "draws": draws, "tune": tune, "chains": chains,
            "random_seed": 2009}
    try:
        out.mkdir(parents=True, exist_ok=True)
        summary.to_csv(out / "annotators.csv")
        report.item_table(idata, ann).to_csv(out / "items.csv")
        ax = report.plot_annotators(idata, label_top=5)
        ax.figure.savefig(out / "annotators.png", dpi=120, bbox_inches="tight")
        plt.close(ax.figure)
        _write_fit(idata, out / "fit.nc", info)
    except OSError as err:
        raise OutputError(f"could not write the report to {str(out)!r}: "
                          f"{err.strerror or err}") from None
    progress.done()

    print("\nAccuracy against the gold labels (800 items):")
    rows = [
        ("majority vote (ties at random)", report.accuracy(mv, ann)),
        ("two-coin EM", report.accuracy(em_fit, ann)),
        ("two-coin MAP (PyMC)", report.accuracy(map_fit, ann)),
        ("two-coin NUTS posterior mean", report.accuracy(idata, ann)),
    ]
    for name, acc in rows:
        print(f"  {name:<32} {acc:.4f}")
    busy = summary[summary["n_labels"] >= 100]
    cols = ["n_labels", "sensitivity_mean", "sensitivity_lower", "sensitivity_upper",
            "specificity_mean", "specificity_lower", "specificity_upper", "weight_mean"]
    print(f"\nAnnotators with at least 100 labels, best first "
          f"(posterior mean and 90% interval), {len(busy)} of {len(summary)}:")
    with pd.option_context("display.width", 160):
        print(busy[cols].round(3).to_string())
    print()
    _print_diagnostics(diagnostics)
    print(f"Report written to {out.resolve()}: annotators.csv, items.csv, annotators.png, fit.nc")
    return 0


# ------------------------------------------------------------------ parser
def _prior_help(prior: _Prior) -> str:
    places = []
    for key, (_, _needs, default) in prior.where.items():
        model, _, variant = key.partition("/")
        place = model + (f" {variant}" if variant else "")
        places.append(f"{place}: default {default}")
    return f"{prior.text}. " + "; ".join(places)


def _parser() -> argparse.ArgumentParser:
    from crowd_models.models import MODEL_NAMES

    p = _Parser(prog="crowd-models", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    f = sub.add_parser(
        "fit", help="fit a long CSV of labels (one row per annotation)",
        description="Fit a long CSV of labels (one row per annotation) and write a report.",
        epilog="fit.nc records crowd_models_version, family, variant, method, priors and "
               "command in its attrs (after NUTS also label_switched_chains, max_rhat, "
               "min_ess_bulk, divergences). Attributes that are lists, dicts, booleans or None "
               "are JSON text, named in json_attrs: json.loads(fit.attrs["
               "'label_switched_chains']) gives a list of ints.")
    data = f.add_argument_group("input")
    data.add_argument("labels", help="CSV with one row per annotation")
    data.add_argument("--item", default="item", help="item id column (default: item)")
    data.add_argument("--annotator", default="annotator",
                      help="annotator id column (default: annotator)")
    data.add_argument("--label", default="label", help="label column (default: label)")
    data.add_argument("--sep", default=",",
                      help="field separator of the labels file: one character, or \\t (or "
                           "tab) for tabs (default: ,). The features and gold files use it too "
                           "when their header line holds it, else the one of , ; tab | that "
                           "their header holds")
    data.add_argument("--strip", action="store_true",
                      help="strip surrounding whitespace from ids, labels, --classes and gold "
                           "(default: keep it; ids that differ only in it give a warning)")
    data.add_argument("--classes",
                      help="comma-separated class order, e.g. 0,1 (default: sorted labels)")
    data.add_argument("--features", help="CSV of item features, item id in the first column")
    gold = f.add_argument_group("gold labels (optional)")
    gold.add_argument("--gold", metavar="G.csv",
                      help="CSV of gold labels, one row per item; items without gold are "
                           "simply unknown")
    gold.add_argument("--gold-item", metavar="COL",
                      help="item id column of the gold file (default: the --item name)")
    gold.add_argument("--gold-label", metavar="COL",
                      help="gold label column of the gold file (default: gold, else the "
                           "--label name)")
    gold.add_argument("--gold-column", metavar="COL",
                      help="a column of the labels table that holds each item's gold label "
                           "(the same on every row of the item; empty where unknown)")
    fam = f.add_argument_group("model")
    fam.add_argument("--model", default="two-coin", choices=sorted(MODEL_NAMES),
                     help="model family (default: two-coin)")
    fam.add_argument("--variant",
                     help="variant of the family: dawid-skene full (default), one_coin, "
                          "hierarchical; ordinal cumulative (default), latent; continuous "
                          "gaussian (default), student_t (the noise). hierarchical, latent and "
                          "student_t have no EM (--method map or nuts)")
    fam.add_argument("--method", default="map", choices=["em", "map", "nuts"],
                     help="EM only, MAP with PyMC (started at EM), or NUTS (started at the "
                          "MAP) (default: map)")
    fam.add_argument("--positive", metavar="CLASS",
                     help="two-coin, feature-accuracy: the positive class, one of the two "
                          "labels (default: the second class, in --classes order or sorted)")
    fam.add_argument("--continuous", action="store_true",
                     help="numeric labels: fit the continuous family (same as --model "
                          "continuous)")
    fam.add_argument("--bias", action="store_true",
                     help="continuous: add a per-annotator additive bias")
    fam.add_argument("--scale", action="store_true",
                     help="continuous: add a per-annotator multiplicative scale")
    fam.add_argument("--penalty",
                     help="feature-accuracy: Laplace (L1) rate of the coefficients; several "
                          "comma-separated rates are chosen between without gold (default: "
                          "the family's, 1)")
    pri = f.add_argument_group(
        "priors and settings (each applies to the families named; given for another, it is "
        "an error)")
    for prior in PRIORS:
        pri.add_argument(prior.flag, dest=prior.name, metavar=prior.metavar,
                         help=_prior_help(prior))
    nuts = f.add_argument_group("NUTS (with --method nuts only)")
    nuts.add_argument("--draws", type=int, help="draws per chain (default: 1000)")
    nuts.add_argument("--tune", type=int, help="tuning steps per chain (default: 1000)")
    nuts.add_argument("--chains", type=int, help="number of chains (default: 4)")
    nuts.add_argument("--seed", type=int, help="random seed (default: none)")
    output = f.add_argument_group("output")
    output.add_argument("--out", default="crowd_models_report",
                        help="output folder, created if missing (default: crowd_models_report)")
    output.add_argument("--force", action="store_true",
                        help="write into a folder that is not empty, replacing the report's "
                             "files (each is named); other files are left alone")
    d = sub.add_parser("demo", help="the two-coin model on the bundled RTE data")
    d.add_argument("--out", default="crowd_models_demo", help="output folder")
    d.add_argument("--quick", action="store_true", help="fewer NUTS draws")
    d.add_argument("--force", action="store_true",
                   help="write into a folder that is not empty, replacing the report's files")
    return p


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    try:
        args = _parser().parse_args(argv)
        with _one_line_warnings():
            if args.command == "fit":
                return run_fit(args, argv)
            return run_demo(args, argv)
    except InputError as err:
        print(f"crowd-models: error: {_one_line(str(err))}", file=sys.stderr)
        return EXIT_INPUT
    except OutputError as err:
        print(f"crowd-models: error: {_one_line(str(err))}", file=sys.stderr)
        return EXIT_OUTPUT


if __name__ == "__main__":
    sys.exit(main())
