"""`crowd-models`: fit an annotation table from the command line.

    crowd-models fit LABELS.csv [--item COL] [--annotator COL] [--label COL]
                 [--features F.csv] [--classes C1,C2,...] [--method em|map|nuts]
                 [--model two-coin|dawid-skene|ordinal|continuous|feature-accuracy]
                 [--continuous [--bias] [--scale]] [--penalty L[,L2,...]] [--out DIR]
    crowd-models demo [--out DIR] [--quick]

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

Errors in the input print one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

EXIT_INPUT = 2


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


def _read_csv(path: str, what: str, **kwargs) -> pd.DataFrame:
    try:
        return pd.read_csv(path, **kwargs)
    except FileNotFoundError:
        raise ValueError(f"{what} file {path!r} does not exist.") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"{what} file {path!r} is not a readable CSV: {first}") from None


def _item_table(ann, fit) -> pd.DataFrame:
    from crowd_models.inference import posterior_of

    prob = posterior_of(fit)["item_class_prob"]
    prob = prob.mean([d for d in ("chain", "draw") if d in prob.dims]).values
    table = pd.DataFrame(prob, index=pd.Index(ann.items, name="item"),
                         columns=[f"prob_{c}" for c in ann.classes])
    table.insert(0, "estimated_label", np.asarray(ann.classes)[prob.argmax(axis=1)])
    if ann.has_gold:
        gold = pd.Series(ann.gold_series(), name="gold").reindex(ann.items)
        table["gold"] = gold.values
    return table


def _true_value_table(ann, fit) -> pd.DataFrame:
    from crowd_models.models import continuous

    table = continuous.true_value_summary(fit, annotations=ann)
    table.index = pd.Index(ann.items, name="item")
    return table


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


def _conditional_intervals(table: pd.DataFrame, em_fit, ci_prob: float = 0.9) -> pd.DataFrame:
    """Fill the sd and interval of precision (and bias) of a one-draw continuous fit
    from EM's conditional posteriors: Gamma(precision_alpha, precision_beta), whose
    mode is the estimate, and N(bias, bias_conditional_sd**2)."""
    from scipy import stats

    tail = (1 - ci_prob) / 2
    table = table.copy()
    a = em_fit["precision_alpha"].to_series().reindex(table.index).to_numpy()
    b = em_fit["precision_beta"].to_series().reindex(table.index).to_numpy()
    table["precision_sd"] = stats.gamma.std(a, scale=1 / b)
    table["precision_lower"] = stats.gamma.ppf(tail, a, scale=1 / b)
    table["precision_upper"] = stats.gamma.ppf(1 - tail, a, scale=1 / b)
    if "bias_conditional_sd" in em_fit and "bias_mean" in table:
        sd = em_fit["bias_conditional_sd"].to_series().reindex(table.index).to_numpy()
        z = stats.norm.ppf(1 - tail)
        table["bias_sd"] = sd
        table["bias_lower"] = table["bias_mean"] - z * sd
        table["bias_upper"] = table["bias_mean"] + z * sd
    return table


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


def _coefficient_table(fit) -> pd.DataFrame | None:
    """Per feature: mean (and, with draws, 90% interval) of each coefficient vector."""
    from crowd_models.inference import posterior_of

    post = posterior_of(fit)
    names = [n for n in post.data_vars  # not the Laplace prior's parts of a coefficient
             if set(post[n].dims) - {"chain", "draw"} == {"feature"}
             and not n.endswith(("_pos", "_neg"))]
    if not names:
        return None
    columns = {}
    for name in names:
        draws = post[name].stack(sample=("chain", "draw")).transpose("feature", "sample")
        columns[f"{name}_mean"] = draws.values.mean(axis=1)
        if draws.sizes["sample"] > 1:
            columns[f"{name}_lower"] = np.quantile(draws.values, 0.05, axis=1)
            columns[f"{name}_upper"] = np.quantile(draws.values, 0.95, axis=1)
    return pd.DataFrame(columns, index=pd.Index(post["feature"].values, name="feature"))


class InputError(Exception):
    """Bad input from the user: reported in one line, exit status 2."""


def _annotator_figure(fit, table):
    """The family's annotator plot: ROC-space points (binary) or confusion heatmaps."""
    import matplotlib

    matplotlib.use("Agg")
    from crowd_models import report
    from crowd_models.inference import posterior_of

    post = posterior_of(fit)
    if "sensitivity" in post and "threshold" in post["sensitivity"].dims:
        return None  # ordinal: the table has one row per annotator and threshold
    if "sensitivity" in post:
        return report.plot_annotators(fit, label_top=5).figure
    if "confusion" in post:
        busiest = table["n_labels"].sort_values(ascending=False).index[:5]
        return report.plot_confusions(fit, [None, *busiest])
    return None


def _load(args):
    import crowd_models as cm

    df = _read_csv(args.labels, "labels")
    features = None
    if args.features:
        features = _read_csv(args.features, "features", index_col=0)
        if args.item in df.columns:
            # ids read from two files must compare equal: match the labels' id type
            try:
                features.index = features.index.astype(df[args.item].dtype)
            except (TypeError, ValueError):
                raise ValueError(
                    f"the features' first column (item ids) cannot be read as the type of the "
                    f"labels' {args.item!r} column ({df[args.item].dtype})."
                ) from None
    if args.continuous:
        if args.classes:
            raise ValueError("--classes does not apply to continuous labels; drop it.")
        if args.label in df.columns and not pd.api.types.is_numeric_dtype(df[args.label]):
            values = df[args.label]
            bad = values[pd.to_numeric(values, errors="coerce").isna() & values.notna()]
            if len(bad):
                raise ValueError(
                    f"--continuous needs numeric labels, but column {args.label!r} holds "
                    f"{len(bad)} non-numeric value(s), e.g. {bad.iloc[0]!r} (row "
                    f"{bad.index[0]}); fix them or drop --continuous for class labels."
                )
            df[args.label] = pd.to_numeric(values)
        return cm.Annotations.from_frame(df, item=args.item, annotator=args.annotator,
                                         label=args.label, features=features, continuous=True)
    classes = args.classes.split(",") if args.classes else None
    if classes is not None and args.label in df.columns and pd.api.types.is_numeric_dtype(
            df[args.label]):
        classes = [pd.to_numeric(c) for c in classes]
    return cm.Annotations.from_frame(df, item=args.item, annotator=args.annotator,
                                     label=args.label, classes=classes, features=features)


def run_fit(args) -> int:
    import crowd_models as cm
    from crowd_models import report
    from crowd_models.models import MODELS

    if args.model == "continuous":
        args.continuous = True
    elif args.continuous:
        if args.model != "two-coin":  # the default: --continuous alone picks the family
            raise InputError(
                f"--continuous fits the continuous family; it cannot be combined with "
                f"--model {args.model}.")
        args.model = "continuous"
    options = {}
    if args.continuous:
        options = {"bias": args.bias, "scale": args.scale}
    elif args.bias or args.scale:
        raise InputError("--bias and --scale apply to continuous labels; add --continuous.")
    if args.model == "feature-accuracy" and not args.features:
        raise InputError("--model feature-accuracy needs --features F.csv: the annotators' "
                         "accuracy depends on the items' features.")
    penalties = _penalties(args.penalty, args.model)
    steps = 4 + (args.method == "nuts")
    progress = _Progress(steps)
    progress.step(f"reading {args.labels}")
    try:
        ann = _load(args)
    except (ValueError, TypeError) as err:
        raise InputError(str(err)) from None
    print(f"      {ann}")
    family = MODELS[args.model]
    if penalties is not None:
        options["penalty"] = _choose_penalty(ann, penalties)
    progress.step("EM (reference fit)")
    try:
        em_fit = family.em(ann, **options)
    except ValueError as err:  # the data do not suit the family (e.g. 3 classes, two-coin)
        raise InputError(str(err)) from None
    fit = em_fit
    if args.method in ("map", "nuts"):
        progress.step("building and optimising the PyMC model (MAP)")
        model = family.build_model(ann, **options)
        fit = cm.fit_map(model, start=em_fit)
    if args.method == "nuts":
        progress.step(f"NUTS: {args.chains} chains x {args.draws} draws")
        fit = cm.sample(model, draws=args.draws, tune=args.tune, chains=args.chains,
                        random_seed=args.seed, start=fit)
        if hasattr(family, "align_signs"):  # a chain in the mirrored mode is flipped back
            fit = family.align_signs(fit, ann)
    progress.step(f"writing the report to {args.out}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summarise = getattr(family, "annotator_summary", None)
    table = report.annotator_summary(fit) if summarise is None else summarise(
        fit, annotations=ann)
    if args.continuous and args.method != "nuts":  # MAP = EM: EM's conditional intervals
        table = _conditional_intervals(table, em_fit)
    table.to_csv(out / "annotators.csv")
    items = _true_value_table(ann, fit) if args.continuous else _item_table(ann, fit)
    items.to_csv(out / "items.csv")
    written = [out / "annotators.csv", out / "items.csv"]
    coefficients = _coefficient_table(fit)
    if coefficients is not None:
        coefficients.to_csv(out / "coefficients.csv")
        written.append(out / "coefficients.csv")
    figure = None if args.continuous else _annotator_figure(fit, table)
    if figure is not None:
        import matplotlib.pyplot as plt

        figure.savefig(out / "annotators.png", dpi=120, bbox_inches="tight")
        plt.close(figure)
        written.append(out / "annotators.png")
    fit.to_netcdf(out / "fit.nc", engine="h5netcdf")
    written.append(out / "fit.nc")
    progress.done()
    with pd.option_context("display.max_rows", 60, "display.width", 120):
        shown = table.loc[:, ~table.columns.str.endswith("_sd")].dropna(axis=1, how="all")
        print(shown.round(3).to_string())
    if args.continuous and args.method != "nuts":
        print("(precision and bias intervals: 90% conditional posteriors given the EM "
              "fit's other parameters; --method nuts for the full posterior)")
    if args.continuous:
        scores = _continuous_scores(items)
        if scores:
            print(scores)
    elif ann.has_gold:
        print(f"accuracy against gold: {report.accuracy(fit, ann):.4f}")
    if coefficients is not None and args.model == "feature-accuracy" and args.method != "nuts":
        nonzero = (coefficients.filter(like="_mean").abs() > 1e-8).sum()
        print("non-zero coefficients at the mode: " + ", ".join(
            f"{name.removesuffix('_mean')} {n} of {len(coefficients)}"
            for name, n in nonzero.items()))
    print("wrote: " + ", ".join(str(p) for p in written))
    return 0


def run_demo(args) -> int:
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
    progress.step(f"writing the report to {args.out}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = report.annotator_summary(idata, rank_by="weight_mean")
    summary.to_csv(out / "annotators.csv")
    _item_table(ann, idata).to_csv(out / "items.csv")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ax = report.plot_annotators(idata, label_top=5)
    ax.figure.savefig(out / "annotators.png", dpi=120, bbox_inches="tight")
    plt.close(ax.figure)
    idata.to_netcdf(out / "fit.nc", engine="h5netcdf")
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
    n_switched = len(idata.attrs.get("label_switched_chains", []))
    print(f"\nNUTS: {int(idata.sample_stats.diverging.sum())} divergences, "
          f"{n_switched} label-switched chains.")
    print(f"Report written to {out.resolve()}: annotators.csv, items.csv, annotators.png, fit.nc")
    return 0


def _parser() -> argparse.ArgumentParser:
    from crowd_models.models import MODEL_NAMES

    p = argparse.ArgumentParser(prog="crowd-models", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fit", help="fit a long CSV of labels (one row per annotation)")
    f.add_argument("labels", help="CSV with one row per annotation")
    f.add_argument("--item", default="item", help="item id column (default: item)")
    f.add_argument("--annotator", default="annotator",
                   help="annotator id column (default: annotator)")
    f.add_argument("--label", default="label", help="label column (default: label)")
    f.add_argument("--classes", help="comma-separated class order, e.g. 0,1 (default: sorted)")
    f.add_argument("--features", help="CSV of item features, item id in the first column")
    f.add_argument("--model", default="two-coin", choices=sorted(MODEL_NAMES))
    f.add_argument("--method", default="map", choices=["em", "map", "nuts"])
    f.add_argument("--continuous", action="store_true",
                   help="numeric labels: fit the continuous family (same as --model continuous)")
    f.add_argument("--bias", action="store_true",
                   help="continuous: add a per-annotator additive bias")
    f.add_argument("--scale", action="store_true",
                   help="continuous: add a per-annotator multiplicative scale")
    f.add_argument("--penalty",
                   help="feature-accuracy: Laplace (L1) rate of the coefficients; several "
                        "comma-separated rates are chosen between without gold (default: "
                        "the family's, 1)")
    f.add_argument("--out", default="crowd_models_report", help="output folder")
    f.add_argument("--draws", type=int, default=1000)
    f.add_argument("--tune", type=int, default=1000)
    f.add_argument("--chains", type=int, default=4)
    f.add_argument("--seed", type=int, default=None)
    d = sub.add_parser("demo", help="the two-coin model on the bundled RTE data")
    d.add_argument("--out", default="crowd_models_demo", help="output folder")
    d.add_argument("--quick", action="store_true", help="fewer NUTS draws")
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "fit":
            return run_fit(args)
        return run_demo(args)
    except InputError as err:
        print(f"crowd-models: error: {err}", file=sys.stderr)
        return EXIT_INPUT


if __name__ == "__main__":
    sys.exit(main())
