"""The command line's options: constants, errors, prior flags, and the plan
checked from the arguments before any file is read."""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from crowd_models.models import _registry

EXIT_INPUT = 2
EXIT_OUTPUT = 1
EXIT_INTERRUPTED = 130
"""Ctrl-C, as a shell reports a command ended by SIGINT (128 + 2)."""

REPORT_FILES = ("annotators.csv", "items.csv", "coefficients.csv", "gold_confusion.csv",
                "annotators.png", "fit.nc")
"""Every file a report may write; ``--force`` replaces these and nothing else."""

VARIANTS = {**_registry.cli_variants(), "auto": ()}
"""``--variant`` names per ``--model``, the default first (the families'
``VARIANTS``; for continuous, its ``NOISES``), from the registry
(``models._registry``). The Dawid-Skene default is the full variant, as
in Python: leave one set out over the bundled sets and the simulations picks
it over the pooled variant, whose rows collapse on sparse crowds of spammers
(benchmarks/README.md, "One name, one model")."""

_VARIANT_KEYWORD = {r.cli: r.keyword for r in _registry.REGISTRY if r.cli and r.keyword}
"""The keyword of ``build_model``/``em`` that takes the variant."""

WITHOUT_EM = frozenset(key for key, r in _registry.cli_records().items() if not r.has_em)
"""(model, variant) pairs whose family has no EM: MAP or NUTS only."""

NUTS_DEFAULTS = {"draws": 1000, "tune": 1000, "chains": 4}

_RECORDS = _registry.cli_records()

BINARY_MODELS = tuple(model for model in _registry.cli_variants()
                      if all(r.positive for (m, _), r in _RECORDS.items() if m == model))
"""Families with a positive class (``--positive``)."""

BINARY_VARIANTS = tuple(key for key, r in _RECORDS.items()
                        if r.positive and key[0] not in BINARY_MODELS)
"""(model, variant) pairs of other families that have a positive class."""


def has_positive(model: str, variant: str) -> bool:
    """Whether ``--model``/``--variant`` report sensitivity and specificity of a
    positive class (and so take ``--positive``)."""
    return model in BINARY_MODELS or (model, variant) in BINARY_VARIANTS

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
              ("continuous=True", "--continuous"), ("duplicates='drop'", "--duplicates drop"),
              ("duplicates='keep'", "--duplicates keep"),
              ("duplicates='error'", "--duplicates error"))
"""Python-API advice in the library's messages and the command line's flag for it."""


_CLI_WORDS = (
    (r"Pass (item|annotator|label)='<column name>' to name it\.",
     lambda m: f"Name it with --{m[1]} COL."),
    (r"drop rows without a label first \(df\.dropna\(subset=\[[^\]]*\]\)\)",
     lambda m: "delete the lines without a label first"),
    (r"drop those rows \(df\[~df\[[^\]]*\]\.isin\((\[[^\]]*\])\)\]\)",
     lambda m: f"delete the lines labelled {m[1]}"),
    (r",? or clean them first \(\.str\.strip\(\)\)", lambda m: ""),
    (r" ?\(df\.loc\[:, ~df\.columns\.duplicated\(\)\] keeps the first\)",
     lambda m: " in the header line"),
    (r"\(\.str\.lower\(\)\)", lambda m: "in the file"),
    (r"\(e\.g\. \.astype\(str\)\)", lambda m: "in the file"),
)
"""Python advice in the library's messages, as a command-line user would act on it."""


def _one_line(text: str) -> str:
    """The message on one line, in the command line's words: Python advice rewritten,
    and the command line's flag beside API keywords."""
    text = " ".join(str(text).split())
    for pattern, words in _CLI_WORDS:
        text = re.sub(pattern, words, text)
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
    ``name`` of the family's ``build_model``/``em``, gathered from the
    registry's ``models._registry.Prior`` records."""

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


_PRIOR_ORDER = ("sensitivity_prior", "specificity_prior", "prevalence_prior", "confusion_prior",
                "accuracy_prior", "population_prior", "spread_prior", "spread",
                "trustworthiness_prior", "ability_prior", "easiness_sd", "difficulty_sd",
                "spam_prior", "precision_prior", "truth_precision_prior", "bias_sd", "scale_sd",
                "noise_prior", "coef_precision", "nu", "community_prior",
                "community_share_prior", "n_communities")
"""The prior options' order in ``--help``; another option follows them."""
_PLACE_ORDER = ("two-coin", "ordinal/cumulative", "dawid-skene", "continuous", "ordinal/latent",
                "spammer", "item-difficulty", "community")
"""The order in which an option's help and messages name its models; others follow."""


def _rank(order: tuple, *keys: str) -> int:
    """The place of the first of ``keys`` in ``order`` (after it: none is there)."""
    return next((order.index(key) for key in keys if key in order), len(order))


def _shown(prior: _registry.Prior) -> str:
    """A prior's default as ``--help`` writes it: its numbers, comma-separated."""
    if prior.shown is not None:
        return prior.shown
    values = prior.default if isinstance(prior.default, tuple) else (prior.default,)
    return ",".join(f"{v:g}" for v in values)


def _generated_priors() -> tuple[_Prior, ...]:
    """One option per prior keyword that the registry's records offer on the
    command line: ``--model`` alone where all its variants take it alike,
    ``model/variant`` for each variant that takes it otherwise."""
    found: dict[str, _registry.Prior] = {}  # the first record of each keyword: metavar, text
    specs: dict[str, dict] = {}  # keyword -> --model -> variant -> (kind, needs, shown)
    for (model, variant), record in _RECORDS.items():
        for prior in record.variant_priors:
            if prior.kind is not None:
                found.setdefault(prior.name, prior)
                spec = (prior.kind, prior.needs, _shown(prior))
                specs.setdefault(prior.name, {}).setdefault(model, {})[variant] = spec
    options = []
    for name, prior in found.items():
        where = {}
        for model, by_variant in specs[name].items():
            alike = len(set(by_variant.values())) == 1
            if alike and len(by_variant) == max(len(VARIANTS[model]), 1):
                where[model] = next(iter(by_variant.values()))
            else:
                where.update({f"{model}/{v}": spec for v, spec in by_variant.items()})
        places = sorted(where, key=lambda key: _rank(_PLACE_ORDER, key, key.partition("/")[0]))
        options.append(_Prior(name, prior.metavar, prior.text, {k: where[k] for k in places}))
    return tuple(sorted(options, key=lambda option: _rank(_PRIOR_ORDER, option.name)))


PRIORS = _generated_priors()
"""The prior options of ``fit``, from the registry's records (``models._registry``);
``--penalty`` (feature-accuracy) has its own."""

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
    "auto_positive": (1, "auto", lambda v: v[0] > 0, "it must be 'auto' or a number > 0"),
    "auto_nonnegative": (1, "auto", lambda v: v[0] >= 0,
                         "it must be 'auto' or a number >= 0 (0 is flat)"),
    "count": (1, "3", lambda v: v[0] >= 1 and v[0] == int(v[0]),
              "it must be a whole number >= 1"),
}


def _parse_prior(text: str, flag: str, kind: str):
    count, example, ok, needs = _KINDS[kind]
    if kind.startswith("auto_") and text.strip().lower() == "auto":
        return "auto"
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
    if kind == "count":
        return int(values[0])
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
    criterion: str = "sharing"
    ordered: bool = False

    def n_steps(self, method: str) -> int:
        return (2 + self.has_em + (method in ("map", "nuts")) + (method == "nuts")
                + (self.model == "auto"))


EXPORT_QUESTION = {"label-studio": "from_name", "prodigy": "label", "sagemaker": "attribute"}
"""``--format`` names of labelling tools' exports, and the keyword of their reader
that ``--question`` sets."""
FORMATS = ("csv", "crowd-kit", *EXPORT_QUESTION)
_COLUMN_FLAGS = (("--item", "item"), ("--annotator", "annotator"), ("--label", "label"))


def _input_columns(args) -> None:
    """``--format``, ``--no-header`` and the column options resolved to the labels
    table's column names (a headerless file's columns are named by number)."""
    given = {flag: getattr(args, name) for flag, name in _COLUMN_FLAGS}
    if args.format in EXPORT_QUESTION:
        used = [flag for flag, value in given.items() if value is not None]
        used += ["--no-header"] * args.no_header + ["--gold-column"] * bool(args.gold_column)
        if used:
            raise InputError(f"{used[0]} is for table files; --format {args.format} names the "
                             f"items, annotators and labels itself (--question picks what to "
                             f"read where the export asks several questions).")
        args.item, args.annotator, args.label = "item", "annotator", "label"
        return
    if args.question is not None:
        raise InputError(f"--question is for --format {', '.join(EXPORT_QUESTION)}; a "
                         f"{args.format} file names its columns with --item, --annotator, "
                         f"--label.")
    defaults = ("task", "worker", "label") if args.format == "crowd-kit" else (
        "item", "annotator", "label")
    if args.no_header:
        defaults = ("1", "2", "3")
        numbered = {**given, "--gold-column": args.gold_column}
        for flag, value in numbered.items():
            if value is not None and not (value.isdigit() and int(value) >= 1):
                raise InputError(f"--no-header: {flag} takes the column's number (1 for the "
                                 f"first column), got {value!r}; e.g. --item 2 --annotator 1 "
                                 f"--label 3.")
    for (_, name), default in zip(_COLUMN_FLAGS, defaults, strict=True):
        if getattr(args, name) is None:
            setattr(args, name, default)


def _plan(args) -> _Plan:
    """Check the arguments and their combinations (no file is read)."""
    _input_columns(args)
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
    if args.positive is not None and not has_positive(model, variant):
        raise InputError(f"--positive names the positive class of a binary model "
                         f"({', '.join(BINARY_MODELS)}, or item-difficulty with --variant irt "
                         f"or irt_hierarchical); {_model_text(model, variant)} has no "
                         f"positive class. Drop --positive.")
    if model == "feature-accuracy" and not args.features:
        raise InputError("--model feature-accuracy needs --features F.csv: the annotators' "
                         "accuracy depends on the items' features.")
    if model in ("spammer", "item-difficulty", "community", "auto") and args.features:
        raise InputError(f"--model {model} has no classifier of the features; drop "
                         f"--features or use --model two-coin or dawid-skene.")
    has_em = (model, variant) not in WITHOUT_EM
    if args.method == "em" and not has_em:
        raise InputError(f"--variant {variant} of --model {model} has no EM; use --method map "
                         f"or --method nuts.")
    record = _RECORDS.get((model, variant))
    if args.method == "map" and record is not None and not record.has_mode:
        raise InputError(f"--variant {variant} of --model {model} has no posterior mode (the "
                         f"spread of its abilities shrinks to 0, where MAP stalls); use "
                         f"--method nuts.")
    priors = _prior_options(args, model, variant)
    penalties = _penalties(args.penalty, model)
    criterion = args.criterion
    if criterion is not None and model != "auto":
        raise InputError(f"--criterion chooses the family of --model auto; --model {model} is "
                         f"chosen already. Drop --criterion or use --model auto.")
    if args.ordered and model != "auto":
        raise InputError(f"--ordered adds the ordinal candidate to --model auto; with --model "
                         f"{model} drop it (for ordered levels, --model ordinal).")
    nuts = {}
    for name, minimum in (("draws", 1), ("tune", 0), ("chains", 1), ("seed", 0)):
        value = _count(args, name, minimum)
        allowed = ("nuts", "map") if name == "seed" else ("nuts",)
        if value is not None and criterion == "loo":
            allowed = ("em", "map", "nuts")  # they set the NUTS fits that LOO scores
        if value is not None and args.method not in allowed:
            raise InputError(f"--{name} applies to --method {' or '.join(allowed)}, not "
                             f"--method {args.method}.")
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
                 sep=_separator(args.sep), nuts=nuts, criterion=criterion or "sharing",
                 ordered=args.ordered)
