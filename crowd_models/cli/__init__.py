"""`crowd-models`: fit an annotation table from the command line.

Usage::

    crowd-models fit LABELS.csv [--item COL] [--annotator COL] [--label COL]
                 [--sep SEP] [--strip] [--classes C1,C2,...] [--features F.csv]
                 [--gold G.csv [--gold-item COL] [--gold-label COL] | --gold-column COL]
                 [--model two-coin|dawid-skene|ordinal|continuous|feature-accuracy|spammer|
                          item-difficulty|community|auto [--criterion sharing|heldout|loo]
                          [--ordered]]
                 [--variant NAME] [--positive CLASS] [--continuous [--bias] [--scale]]
                 [--penalty L[,L2,...]]
                 [prior options, see --help] [--method em|map|nuts]
                 [--draws N] [--tune N] [--chains N] [--seed N] [--out DIR] [--force]
    crowd-models predict FIT.nc FEATURES.csv [--out predictions.csv] [--ci-prob P]
                 [--encoding ENC] [--force]
    crowd-models demo [--out DIR] [--quick] [--force]

``predict`` reads the ``fit.nc`` of a fit made with ``--features`` (two-coin,
dawid-skene, ordinal, feature-accuracy, continuous) and a CSV of
new items (id first, then the fit's feature columns by name, transformed as
the training features were) and writes each item's ``estimated_label`` and
class probabilities (``cm.predict``), with intervals and ``_best`` (the share
of draws in which the class is the most probable) where the fit has draws
(``--method map``'s Laplace draws, ``--method nuts``); for a continuous fit,
each true value's predictive mean, sd and interval. The file is written whole
or not at all.

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
one is fitted. ``--model spammer`` (MACE, any number of classes, no features)
reads each annotator as either answering from the truth, with probability
``trustworthiness``, or spamming from their own class shares; its table
reports the trustworthiness with intervals. ``--model item-difficulty`` (GLAD,
no features) gives each annotator an ``ability`` and each item an ``easiness``
(in ``items.csv``). ``--model community`` (Venanzi et al.'s community model,
no features) draws each annotator's confusion around one of
``--n-communities`` (default 3) community confusions; its table adds each
annotator's most probable ``community`` and that probability. ``--model auto``
scores spammer and item-difficulty on held-out labels
(``crowd_models.compare_models``, no gold read), prints the ranking and fits
the best score (criterion ``sharing`` of ``crowd_models.auto.choose``: label
prediction alone can favour a model whose truth is worse, so Dawid-Skene's
variants and two-coin are not among those it chooses, nor scored);
``fit.nc`` records the ranking. ``--criterion heldout`` scores them all, two-coin
(two classes) and Dawid-Skene full, one-coin and pooled too, and takes the
earlier rule (the fewest parameters per annotator within two standard errors
of the best score), and ``--criterion loo`` scores spammer and item-difficulty
by PSIS-LOO over items from one NUTS fit each (``--draws``, ``--tune``,
``--chains``, ``--seed`` set them) and chooses like ``sharing``.
``--ordered`` (labels that are levels of one scale, integers in increasing
order) adds the latent ordinal model to the candidates; it has no
EM, so a choice of it needs ``--method map`` or ``nuts``. Fits with features
also write ``coefficients.csv``.

Variants (``--variant``): dawid-skene ``full`` (default, as in
``dawid_skene.em``), ``one_coin``, ``hierarchical``, ``pooled`` (each
annotator's confusion rows pooled toward the population's, with a spread
chosen by empirical Bayes, ``--spread`` to fix it); ordinal ``cumulative``
(default), ``latent``; continuous ``gaussian`` (default), ``student_t`` (the
annotators' noise; ``--nu``); item-difficulty ``fixed`` (default),
``hierarchical``. ``hierarchical``,
``latent`` and ``student_t`` have no EM: they are fitted by
MAP (``--method map``) or NUTS from the model's majority-vote start, except
item-difficulty ``hierarchical`` and ``irt_hierarchical``, whose abilities'
spread shrinks to 0 (no posterior mode): ``--method nuts`` only. The prior
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

Input files: a CSV (``.csv.gz`` too; ``--no-header`` when its first line is
data, the columns then named by number: ``--item 2 --annotator 1 --label 3``;
``--encoding`` when it is not UTF-8), an Excel workbook (with openpyxl) or a
Parquet file (with pyarrow), told by its content; or, with ``--format``, an
export of a labelling tool: ``label-studio`` (its JSON export; annotations
flagged as ground truth are the gold), ``prodigy`` (``prodigy db-out``
JSONL), ``sagemaker`` (a Ground Truth output manifest that keeps every
worker's answer), ``crowd-kit`` (a CSV of ``task, worker, label``);
``--question`` names the question an export answers where it holds several.

Input: item and annotator ids are read as written, as text (``00007`` and
``7`` are two items, ``NA`` is an id), in the labels, gold and features files
alike, so ``items.csv`` and ``annotators.csv`` join back to the user's data.
Rows that repeat an (item, annotator) pair, with the same label or another,
give a warning with their counts (``--duplicates warn``, the default; ``keep``
keeps them silently, ``drop`` drops exact repeats, ``error`` refuses the file).
``--sep`` is the labels file's separator (``\\t`` or ``tab`` for tabs);
a features or gold file whose header line does not hold it is read with the
one of ``, ; tab |`` that its header holds. ``--strip`` strips surrounding
whitespace from ids, labels, ``--classes`` and gold (without it, ids or
labels that differ only in whitespace are kept apart, with a warning).

The report (``--out``, created if missing): ``annotators.csv``, ``items.csv``
(:func:`crowd_models.report.item_table`), ``coefficients.csv`` (with
features), ``gold_confusion.csv`` (with gold), ``annotators.png`` and
``fit.nc``. A folder that is not empty is refused unless ``--force``, which
replaces the report's files (naming each), removes an earlier report's files
that this one does not write, and leaves every other file alone. The folder
is checked before anything is read or fitted. The report is written into a
new folder beside ``--out`` and moved into place at the end, so the folder
holds either the whole new report or what it held before: a Ctrl-C, a full
disk or a crash while writing leaves it as it was.

``fit.nc`` (an ``xarray.Dataset`` for EM, an ``xarray.DataTree`` for MAP and
NUTS; write engine h5netcdf) records in its (root) attrs ``crowd_models_version``,
``family`` (the module, e.g. ``two_coin``), ``variant`` (empty for a family
without variants), ``method``, ``priors`` (the family's ``DEFAULT_PRIORS``
with the command line's settings applied, and the penalty or ``nu`` used),
``intervals`` (where the report's intervals come from) and ``command``; after
NUTS also ``label_switched_chains``, ``max_rhat``,
``min_ess_bulk`` and ``divergences``. netCDF attributes cannot hold an empty
list and give a list of ints back as an array, so every attribute that is a
list, dict, boolean or None is stored as JSON text; ``json_attrs`` (itself
JSON) names them. Read any ``fit.nc`` back with :func:`crowd_models.open_fit`,
which returns the fit as it was (an EM Dataset, or a DataTree), attributes
decoded, for every report function::

    import crowd_models as cm
    fit = cm.open_fit("report/fit.nc")
    switched = fit.attrs["label_switched_chains"]  # a list of ints (after NUTS)
    table = cm.report.annotator_summary(fit)

Intervals: ``--method nuts`` summarises the NUTS draws; ``--method map``
(the default) draws 1000 times from the Laplace approximation at the mode
(``fit_map(..., laplace=True)``; kept in ``fit.nc``'s ``laplace`` group; seed
``--seed``, default 0), except for feature-accuracy (a lasso mode) and models
with more than 12,000 free parameters, or whose dense Hessian would take over half
the free memory; ``--method em`` uses the EM's conjugate approximations. The
line after the table says which applied.

Python warnings raised while fitting (e.g. annotators below chance, estimates
on a boundary) print as one line each on stderr (``warning: ...``). Errors in
the input print one line on stderr (``crowd-models: error: ...``) and exit
with status 2, before any fitting (a fit too large for the machine's memory
among them: many thousands of classes, say); a failure to write the report,
or memory running out all the same, exits with status 1, and Ctrl-C with
status 130. No traceback is printed: an unexpected error prints one line
naming a log file in the temporary folder that holds the traceback.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

from crowd_models._repeats import DUPLICATES
from crowd_models.cli._commands import run_demo, run_fit, run_predict
from crowd_models.cli._options import (  # noqa: F401  (the names tests and users reach)
    _VARIANT_KEYWORD,
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OUTPUT,
    FORMATS,
    PRIORS,
    VARIANTS,
    WITHOUT_EM,
    InputError,
    OutputError,
    _one_line,
    _one_line_warnings,
    _Parser,
    _Prior,
)
from crowd_models.cli._output import _write_fit, netcdf_attrs, nuts_diagnostics  # noqa: F401


# ------------------------------------------------------------------ parser
def _prior_help(prior: _Prior) -> str:
    places = []
    for key, (_, _needs, default) in prior.where.items():
        model, _, variant = key.partition("/")
        place = model + (f" {variant}" if variant else "")
        places.append(f"{place}: default {default}")
    return f"{prior.text}. " + "; ".join(places)


def _input_options(f: argparse.ArgumentParser) -> None:
    """``fit``'s options for the input files: labels, their format and columns, gold."""
    data = f.add_argument_group("input")
    data.add_argument("labels", help="CSV with one row per annotation (.csv.gz too; .xlsx "
                                     "with openpyxl installed, .parquet with pyarrow), or an "
                                     "export named by --format")
    data.add_argument("--format", choices=FORMATS, default="csv",
                      help="csv (default); crowd-kit (a CSV of task, worker, label); "
                           "label-studio (its JSON export; ground-truth annotations are the "
                           "gold), prodigy (JSONL of prodigy db-out), sagemaker (a Ground Truth "
                           "output manifest that keeps every worker's answer)")
    data.add_argument("--question", metavar="NAME",
                      help="the question an export answers, where it holds several: Label "
                           "Studio's from_name, Prodigy's label, SageMaker's label attribute")
    data.add_argument("--item", help="item id column (default: item; crowd-kit: task; "
                                     "--no-header: its number, default 1)")
    data.add_argument("--annotator", help="annotator id column (default: annotator; "
                                          "crowd-kit: worker; --no-header: default 2)")
    data.add_argument("--label", help="label column (default: label; --no-header: default 3)")
    data.add_argument("--no-header", action="store_true",
                      help="the file's first line is data, not column names: --item, "
                           "--annotator, --label (and --gold-column) take column numbers, "
                           "e.g. --item 2 --annotator 1 --label 3")
    data.add_argument("--encoding", default="utf-8",
                      help="text encoding of the labels, features and gold files (default: "
                           "utf-8; e.g. latin-1, cp1252)")
    data.add_argument("--sep", default=",",
                      help="field separator of the labels file: one character, or \\t (or "
                           "tab) for tabs (default: ,). The features and gold files use it too "
                           "when their header line holds it, else the one of , ; tab | that "
                           "their header holds")
    data.add_argument("--strip", action="store_true",
                      help="strip surrounding whitespace from ids, labels, --classes and gold "
                           "(default: keep it; ids that differ only in it give a warning)")
    data.add_argument("--duplicates", choices=DUPLICATES, default="warn",
                      help="rows that repeat an (item, annotator) pair, with the same label "
                           "(a file exported or joined twice) or another: warn (default: keep "
                           "every row, each counted as a label, and say how many), keep (by "
                           "design: keep them silently), drop (drop exact repeats; conflicting "
                           "labels are kept, with a warning), error (refuse the file)")
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


def _predict_command(sub) -> None:
    """``crowd-models predict``: its arguments."""
    r = sub.add_parser(
        "predict", help="new items' class probabilities from a fit's classifier",
        description="New items' class probabilities from the classifier of a fit made with "
                    "--features (two-coin, dawid-skene, ordinal, "
                    "feature-accuracy; continuous: the true value).")
    r.add_argument("fit", help="the fit.nc of a report (crowd-models fit --features ...)")
    r.add_argument("features", help="CSV of the new items: their id in the first column, "
                                    "then the fit's feature columns by name")
    r.add_argument("--out", default="predictions.csv",
                   help="output CSV (default: predictions.csv): estimated_label, and "
                        "prob_<class> with _lower, _upper and _best where the fit has draws "
                        "(continuous: value, value_sd, value_lower, value_upper)")
    r.add_argument("--ci-prob", type=float, default=0.9,
                   help="probability of the intervals (default: 0.9)")
    r.add_argument("--encoding", help="text encoding of the features file (default: utf-8)")
    r.add_argument("--force", action="store_true", help="replace --out if it exists")


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
    _input_options(f)
    fam = f.add_argument_group("model")
    fam.add_argument("--model", default="two-coin", choices=[*sorted(MODEL_NAMES), "auto"],
                     help="model family (default: two-coin); auto: chosen without gold by "
                          "held-out labels among the spammer and item-difficulty "
                          "families")
    fam.add_argument("--criterion", choices=["sharing", "heldout", "loo"],
                     help="--model auto: how the candidates are scored and chosen (default: "
                          "sharing; heldout: the fewest parameters within two standard errors "
                          "of the best held-out score; loo: PSIS-LOO over items from a NUTS fit "
                          "of each candidate)")
    fam.add_argument("--ordered", action="store_true",
                     help="--model auto: the labels are levels of one scale (integers in "
                          "increasing order, e.g. ratings 1..5); adds the latent ordinal "
                          "model to the candidates (fitted by MAP: it has no EM)")
    fam.add_argument("--variant",
                     help="variant of the family: dawid-skene full (default), one_coin, "
                          "hierarchical, pooled; ordinal cumulative (default), latent; "
                          "continuous gaussian (default), student_t (the noise); "
                          "item-difficulty fixed (default), hierarchical (GLAD), irt, "
                          "irt_hierarchical (binary labels). hierarchical, irt_hierarchical, "
                          "latent and student_t have no EM (--method map or nuts)")
    fam.add_argument("--method", default="map", choices=["em", "map", "nuts"],
                     help="EM only, MAP with PyMC (started at EM), or NUTS (started at the "
                          "MAP) (default: map)")
    fam.add_argument("--positive", metavar="CLASS",
                     help="two-coin, feature-accuracy, item-difficulty irt: the positive "
                          "class, one of the two labels (default: the second class, in "
                          "--classes order or sorted)")
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
    nuts.add_argument("--seed", type=int,
                      help="random seed of NUTS (default: none) or of the MAP's Laplace draws "
                           "(default: 0)")
    output = f.add_argument_group("output")
    output.add_argument("--out", default="crowd_models_report",
                        help="output folder, created if missing (default: crowd_models_report)")
    output.add_argument("--force", action="store_true",
                        help="write into a folder that is not empty, replacing the report's "
                             "files (each is named); other files are left alone")
    _predict_command(sub)
    d = sub.add_parser("demo", help="the two-coin model on the bundled RTE data")
    d.add_argument("--out", default="crowd_models_demo", help="output folder")
    d.add_argument("--quick", action="store_true", help="fewer NUTS draws")
    d.add_argument("--force", action="store_true",
                   help="write into a folder that is not empty, replacing the report's files")
    return p


def main(argv=None) -> int:
    """Run the command line ``crowd-models ARGV...`` (default ``sys.argv[1:]``).

    Returns the exit status: 0 on success, 2 for bad input, 1 when the report
    cannot be written, memory runs out or anything else fails, and 130 after
    Ctrl-C; each is one line on stderr, never a traceback (an unexpected error
    writes its traceback to a log file and names it).

    Examples
    --------
    >>> from crowd_models.cli import main
    >>> main(["fit", "labels.csv", "--model", "dawid-skene", "--out", "report"])  # doctest: +SKIP
    >>> main(["demo", "--quick", "--out", "demo_report", "--force"])
    """
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    try:
        args = _parser().parse_args(_negative_values_joined(argv))
        with _one_line_warnings():
            if args.command == "fit":
                return run_fit(args, argv)
            if args.command == "predict":
                return run_predict(args)
            return run_demo(args, argv)
    except InputError as err:
        print(f"crowd-models: error: {_one_line(str(err))}", file=sys.stderr)
        return EXIT_INPUT
    except OutputError as err:
        print(f"crowd-models: error: {_one_line(str(err))}", file=sys.stderr)
        return EXIT_OUTPUT
    except KeyboardInterrupt:
        print("crowd-models: interrupted; the report folder was left as it was",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    except MemoryError as err:
        print(f"crowd-models: error: out of memory ({_one_line(str(err)) or 'MemoryError'}); "
              f"fit fewer items, annotators or classes, or use a machine with more memory",
              file=sys.stderr)
        return EXIT_OUTPUT
    except Exception as err:  # the last resort: one line, the traceback in a log file
        print(f"crowd-models: internal error: {type(err).__name__}: {_one_line(str(err))}; "
              f"the full traceback is in {_crash_log(argv)} (please include it when you report "
              f"this)", file=sys.stderr)
        return EXIT_OUTPUT


def _negative_values_joined(argv: list[str]) -> list[str]:
    """``--option -1,2`` as ``--option=-1,2``: argparse reads a value that starts
    with a minus sign and is not a plain number as another option."""
    out, i = [], 0
    while i < len(argv):
        token = argv[i]
        if (token.startswith("--") and "=" not in token and i + 1 < len(argv)
                and re.match(r"-\.?\d", argv[i + 1])):
            out.append(f"{token}={argv[i + 1]}")
            i += 2
        else:
            out.append(token)
            i += 1
    return out


def _crash_log(argv: list[str]) -> str:
    """Write the current exception's traceback, the version and the command to a
    new log file in the system's temporary folder; returns its path."""
    import shlex
    import tempfile
    import traceback

    from crowd_models.cli._output import _package_version

    fd, path = tempfile.mkstemp(prefix="crowd-models-error-", suffix=".log")
    with os.fdopen(fd, "w") as handle:
        handle.write(f"crowd_models {_package_version()}\n"
                     f"command: {shlex.join(['crowd-models', *argv])}\n\n")
        traceback.print_exc(file=handle)
    return path
