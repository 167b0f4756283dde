"""``crowd-models fit`` and ``crowd-models demo``."""

from __future__ import annotations

import dataclasses
import shlex
from importlib import import_module
from pathlib import Path

import numpy as np
import pandas as pd

from crowd_models.cli._input import (
    _available_memory,
    _check_family_data,
    _check_input_file,
    _check_memory,
    _load,
    _with_positive,
)
from crowd_models.cli._options import (
    WITHOUT_EM,
    InputError,
    OutputError,
    _Plan,
    _plan,
    _Progress,
    has_positive,
)
from crowd_models.cli._output import (
    _annotator_figure,
    _check_out,
    _choose_penalty,
    _continuous_scores,
    _diagnostic_attrs,
    _package_version,
    _planned_report,
    _print_diagnostics,
    _write_fit,
    nuts_diagnostics,
    publish,
    publish_file,
    write_csv,
)
from crowd_models.models import _registry


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


LAPLACE_MAX_PARAMETERS = 12_000
"""``--method map`` adds Laplace intervals up to this many free parameters: its
Hessian costs two gradient evaluations per parameter (about 20 s at 9,000 on two
cores), and it, its Cholesky factor and the covariance are three dense n x n
matrices (3.5 GB at the limit)."""


def _laplace_skipped(model, name: str) -> str | None:
    """Why ``--method map`` computes no Laplace draws for this model (None: it does)."""
    if name == "feature-accuracy":  # the lasso mode has exact zeros: no curvature there
        return "the lasso mode has exact zeros, where the posterior has no curvature"
    size = sum(int(np.size(v)) for v in model.initial_point().values())
    if size > LAPLACE_MAX_PARAMETERS:
        return f"{size} free parameters, above the Laplace limit of {LAPLACE_MAX_PARAMETERS}"
    need, have = 3 * 8 * size ** 2, _available_memory()
    if have is not None and need > have // 2:
        gib = 2.0 ** 30
        return (f"{size} free parameters need {need / gib:.1f} GiB for the Hessian, its "
                f"factor and the covariance, more than half of the {have / gib:.1f} GiB "
                f"available")
    return None


def _intervals_text(method: str, fit, drawn, conditional: bool, skipped: str | None,
                    has_em: bool = True) -> str:
    """Where the report's intervals come from, in one line."""
    if method == "nuts":
        return "90% equal-tailed, over the NUTS draws"
    if drawn is not fit:
        n = drawn["posterior"].sizes["draw"]
        return (f"90% equal-tailed, over {n} draws of the Laplace approximation at the "
                f"posterior mode (Gaussian on the unconstrained scale), which under-covers: "
                f"86-88% of true values in simulation-based calibration on small designs, "
                f"78-81% for pooled Dawid-Skene, item difficulty and two-coin with features, "
                f"78% for the community model (validation/README.md, CHANGELOG.md); --method "
                f"nuts for the full posterior")
    if conditional:
        return ("precision, noise sd and bias: 90% conditional posteriors given the EM fit's "
                "other parameters, which under-cover (precisions: 80% of true values in "
                "simulation-based calibration, validation/README.md); --method nuts for the "
                "full posterior")
    if method == "em":
        return ("90% equal-tailed, from EM's conjugate approximations given its final E-step "
                "(Beta, Dirichlet rows, Gamma; Normal for item-difficulty abilities), which "
                "under-cover: 59-74% of true values in simulation-based calibration on small "
                "designs (validation/README.md; the pooled Dawid-Skene, spammer, "
                "item-difficulty and community ones are not calibrated yet); --method nuts "
                "for the full posterior")
    if skipped is None and not getattr(fit, "attrs", {}).get("converged", 1):
        skipped = "the optimiser stopped short of a mode"
    why = skipped or "its Hessian at the mode is not positive definite"
    em = "--method em for EM's approximations, " if has_em else ""
    return (f"none for this MAP fit (no Laplace approximation: {why}); {em}--method nuts for "
            f"the posterior")


_AUTO_MODELS = {r.choice.name: (r.cli, r.variant) for r in _registry.candidates()}
"""``crowd_models.auto`` candidate -> (``--model``, ``--variant``)."""


def _auto_plan(ann, plan, method, progress):
    """``--model auto``: the ranking of the candidates (held-out labels, or PSIS-LOO
    with ``--criterion loo``), and the plan of the chosen family's fit."""
    from crowd_models.auto import choose, compare_models, scored_candidates

    if plan.criterion == "loo":
        progress.step("choosing the model without gold: PSIS-LOO over items from a NUTS fit "
                      "of each candidate; the best score among the eligible candidates")
        nuts = {name: plan.nuts[name] for name in ("draws", "tune", "chains")}
        options = {"criterion": "loo", "nuts": nuts, "rng": plan.nuts["seed"] or 0}
    else:
        rule = ("the best score among the eligible candidates" if plan.criterion == "sharing"
                else "the fewest parameters within two standard errors of the best")
        progress.step(f"choosing the model without gold: 10% of the labels held out, 3 "
                      f"splits; {rule}")
        options = {"criterion": plan.criterion}
    options["ordered"] = plan.ordered
    try:
        table = compare_models(ann, candidates=scored_candidates(ann, plan.criterion,
                                                                 plan.ordered), **options)
    except ValueError as err:
        raise InputError(str(err)) from None
    chosen = choose(table)
    with pd.option_context("display.width", 120):
        print(table.round(4).to_string())
    model, variant = _AUTO_MODELS[chosen]
    print(f"      chosen: {chosen} (--model {model}" + (f" --variant {variant}" if variant
                                                        else "") + ")")
    has_em = (model, variant) not in WITHOUT_EM
    if method == "em" and not has_em:
        raise InputError(f"the chosen model, --model {model} --variant {variant}, has no EM; "
                         f"rerun with --method map or --method nuts.")
    options = {"variant": variant} if variant else {}
    plan = dataclasses.replace(plan, model=model, variant=variant, options=options,
                               has_em=has_em)
    return plan, (table.reset_index().to_dict("records"), table.attrs["criterion"])


def run_fit(args, argv=None) -> int:
    plan = _plan(args)
    _check_input_file(args.labels, "labels")
    for path, what in ((args.features, "features"), (args.gold, "gold")):
        if path:
            _check_input_file(path, what)
    out = Path(args.out)
    entries = _check_out(out, args.force)
    progress = _Progress(plan.n_steps(args.method))
    progress.step(f"reading {args.labels}")
    try:
        ann = _load(args, plan)
    except (ValueError, TypeError) as err:
        raise InputError(str(err)) from None
    _check_family_data(ann, plan)
    _check_memory(ann, plan, args.label)
    ranking = None
    if plan.model == "auto":
        plan, ranking = _auto_plan(ann, plan, args.method, progress)
    if has_positive(plan.model, plan.variant):
        ann = _with_positive(ann, args.positive)
    print(f"      {ann}")

    family = import_module(_registry.cli_modules()[plan.model])  # that family alone
    options = dict(plan.options)
    if plan.penalties is not None:
        options["penalty"] = _choose_penalty(ann, plan.penalties)
    fit, em_fit, skipped, diagnostics = _run_method(args, plan, family, ann, options, progress)

    progress.step(f"writing the report to {out}")
    table, items, confusion, coefficients, drawn, conditional = _report_tables(
        args, family, fit, em_fit, ann)
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
    if ranking is not None:
        info["ranking"], info["criterion"] = ranking
    info["intervals"] = _intervals_text(args.method, fit, drawn, conditional, skipped,
                                        plan.has_em)
    if args.method == "nuts":
        info.update(_diagnostic_attrs(diagnostics), draws=plan.nuts["draws"],
                    tune=plan.nuts["tune"], chains=plan.nuts["chains"])
        if plan.nuts["seed"] is not None:
            info["random_seed"] = plan.nuts["seed"]
    csvs = {"annotators.csv": table, "items.csv": items, "coefficients.csv": coefficients,
            "gold_confusion.csv": confusion}
    _write_report(out, csvs, figure, fit, info)
    progress.done()
    _print_results(args, plan, ann, table, items, confusion, coefficients, info["intervals"])
    if diagnostics is not None:
        _print_diagnostics(diagnostics)
    print("wrote: " + ", ".join(str(out / n) for n in names))
    return 0


def _report_tables(args, family, fit, em_fit, ann):
    """The annotator, item, gold-confusion and coefficient tables of a fit, the fit
    its intervals come from, and whether they are EM's conditional ones."""
    from crowd_models import report
    from crowd_models._fits import has_laplace
    from crowd_models.inference import laplace_fit

    summarise = getattr(family, "annotator_summary", None)
    drawn = laplace_fit(fit) if has_laplace(fit) else fit  # a MAP fit's Laplace intervals
    # annotator_summary reads the Laplace draws itself, and the MAP's class shares
    table = report.annotator_summary(fit) if summarise is None else summarise(
        drawn, annotations=ann)
    conditional = (args.continuous and args.method != "nuts" and em_fit is not None
                   and drawn is fit)
    if conditional:  # MAP = EM without Laplace draws: EM's conditional intervals
        table = report.conditional_intervals(table, em_fit)
    items = report.item_table(fit, ann)
    confusion = None
    if ann.has_gold:
        table = report.with_gold_columns(table, ann)
        if not ann.continuous:
            confusion = report.gold_confusion(items, ann)
    return table, items, confusion, report.coefficient_table(drawn), drawn, conditional


def _run_method(args, plan, family, ann, options, progress):
    """EM, MAP (with Laplace draws) or NUTS, as --method asks: (fit, EM fit or None,
    why Laplace was skipped or None, NUTS diagnostics or None)."""
    import crowd_models as cm

    em_fit = None
    if plan.has_em:
        progress.step("EM (reference fit)")
        try:
            em_fit = family.em(ann, **options)
        except ValueError as err:  # the data do not suit the family (e.g. 3 classes, two-coin)
            raise InputError(str(err)) from None
    fit, skipped = em_fit, None
    if args.method in ("map", "nuts"):
        progress.step("building and optimising the PyMC model (MAP)")
        try:
            model = family.build_model(ann, **options)
        except ValueError as err:
            raise InputError(str(err)) from None
        skipped = _laplace_skipped(model, plan.model) if args.method == "map" else None
        laplace = args.method == "map" and skipped is None
        # no EM: the model's majority-vote start; Laplace draws for the intervals
        fit = cm.fit_map(model, start=em_fit, laplace=laplace,
                         random_seed=0 if plan.nuts["seed"] is None else plan.nuts["seed"])
    diagnostics = None
    if args.method == "nuts":
        nuts = plan.nuts
        progress.step(f"NUTS: {nuts['chains']} chains x {nuts['draws']} draws")
        fit = cm.sample(model, draws=nuts["draws"], tune=nuts["tune"], chains=nuts["chains"],
                        random_seed=nuts["seed"], start=fit)
        if hasattr(family, "align_signs"):  # a chain in the mirrored mode is flipped back
            fit = family.align_signs(fit, ann)
        diagnostics = nuts_diagnostics(fit)
    return fit, em_fit, skipped, diagnostics


def _write_report(out: Path, csvs: dict, figure, fit, info: dict) -> None:
    """The report's files (tables that exist, the figure, fit.nc with ``info``),
    written into a new folder and moved into place whole."""
    from crowd_models._fits import has_laplace

    saved = fit
    if has_laplace(fit) and "laplace_approximation" in fit.children:
        # the draws stay; the Gaussian's covariance (parameters squared) does not
        saved = fit.copy()
        del saved["laplace_approximation"]

    def write(folder: Path) -> None:
        for name, table in csvs.items():
            if table is not None:
                write_csv(table, folder / name)
        if figure is not None:
            import matplotlib.pyplot as plt

            figure.savefig(folder / "annotators.png", dpi=120, bbox_inches="tight")
            plt.close(figure)
        _write_fit(saved, folder / "fit.nc", info)

    _published(out, write)


def _published(out: Path, write) -> None:
    """``publish`` with a failure to write as the command line's output error."""
    try:
        publish(out, write)
    except OSError as err:
        raise OutputError(f"could not write the report to {str(out)!r}: "
                          f"{err.strerror or err}; nothing in it was changed") from None


PRINTED_ROWS = 10
"""A table longer than twice this prints its first and last this many rows."""


def _print_rows(table: pd.DataFrame, where: Path) -> None:
    """A table on the terminal: whole when short, else its first and last rows and
    where the whole table is."""
    n = len(table)
    with pd.option_context("display.max_rows", None, "display.width", 120):
        if n <= 2 * PRINTED_ROWS:
            print(table.to_string())
            return
        lines = table.to_string().splitlines()
        head = len(lines) - n  # the header lines
        print("\n".join(lines[: head + PRINTED_ROWS]))
        print(f"... {n - 2 * PRINTED_ROWS} more rows (all {n} in {where}) ...")
        print("\n".join(lines[-PRINTED_ROWS:]))


def _print_results(args, plan, ann, table, items, confusion, coefficients, intervals) -> None:
    """The annotator table and the scores that the terminal shows after a fit."""
    from crowd_models._text import short_repr

    if has_positive(plan.model, plan.variant):
        print(f"positive class: {short_repr(ann.classes[1])} (sensitivity: its rate of positive "
              f"labels; --positive to change)")
    shown = table.loc[:, ~table.columns.str.endswith("_sd")].dropna(axis=1, how="all")
    _print_rows(shown.round(3), Path(args.out) / "annotators.csv")
    print(f"(intervals: {intervals})")
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


def run_predict(args) -> int:
    """``crowd-models predict FIT.nc FEATURES.csv``: each new item's class
    probabilities from the fit's classifier, written to ``--out``."""
    import crowd_models as cm
    from crowd_models.cli._input import _read_csv, _sniff_sep

    if not 0 < args.ci_prob < 1:
        raise InputError(f"--ci-prob {args.ci_prob:g}: give a probability strictly between 0 "
                         f"and 1, e.g. --ci-prob 0.9.")
    _check_input_file(args.fit, "fit")
    _check_input_file(args.features, "features")
    out = Path(args.out)
    if out.exists() and not args.force:
        raise OutputError(f"--out {str(out)!r} exists; pass --force to replace it.")
    try:
        fit = cm.open_fit(args.fit)
    except (OSError, ValueError) as err:
        raise InputError(f"fit file {args.fit!r} is not a fit written by crowd-models fit or "
                         f"cm.save_fit ({err}).") from None
    features = _read_csv(args.features, "features", index_col=0, first_id=True,
                         sep=_sniff_sep(args.features, ","), encoding=args.encoding)
    try:
        pred = cm.predict(fit, features, ci_prob=args.ci_prob)
    except ValueError as err:
        text = str(err).replace("Refit with the items' features", "Refit with --features")
        raise InputError(f"{text} (fit {args.fit!r}, features {args.features!r})") from None
    table = pd.DataFrame(index=pd.Index(pred["item"].values, name=features.index.name or "item"))
    if "value" in pred:  # a continuous fit: the true value's predictive distribution
        for name in ("value", "value_sd", "value_lower", "value_upper"):
            table[name] = pred[name].values
        what = "true values"
    else:
        classes = [str(c) for c in pred["true_class"].values]
        table["estimated_label"] = np.asarray(pred["true_class"].values)[
            pred["prob"].values.argmax(axis=1)]
        for name in ("prob", "prob_lower", "prob_upper", "prob_best"):
            if name in pred:
                suffix = name.removeprefix("prob")
                for k, c in enumerate(classes):
                    table[f"prob_{c}{suffix}"] = pred[name].values[:, k]
        what = f"{len(classes)} classes"
    try:
        publish_file(out, lambda path: write_csv(table, path))  # whole, or not at all
    except OSError as err:
        raise OutputError(f"--out {str(out)!r} cannot be written: "
                          f"{err.strerror or err}.") from None
    if "value" in pred:
        spread = (f"{pred.attrs['ci_prob']:.0%} predictive intervals over "
                  f"{pred.attrs['draws']} draw(s)")
    elif "prob_lower" in pred:
        spread = f"{pred.attrs['ci_prob']:.0%} intervals over {pred.attrs['draws']} draws"
    else:
        spread = "no intervals: the fit is one point (EM or MAP without Laplace draws)"
    print(f"wrote: {out} ({len(table)} items, {what}; {spread})")
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
    def write(folder: Path) -> None:
        write_csv(summary, folder / "annotators.csv")
        write_csv(report.item_table(idata, ann), folder / "items.csv")
        ax = report.plot_annotators(idata, label_top=5)
        ax.figure.savefig(folder / "annotators.png", dpi=120, bbox_inches="tight")
        plt.close(ax.figure)
        _write_fit(idata, folder / "fit.nc", info)

    _published(out, write)
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
