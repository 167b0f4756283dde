"""Every default fit reports intervals: each family on the command line, with
``--method em`` (where it has an EM) and ``--method map`` (the default: Laplace
draws at the mode), on RTE, dog, web search and a simulated crowd of 500
annotators and 3 classes; for each report, the rows of ``annotators.csv``
without an interval, and those whose estimate (the ``_mean`` columns) lies
outside its interval.

    .venv/bin/python benchmarks/intervals.py             # ~10 min warm
    .venv/bin/python benchmarks/intervals.py --method em # the EM reports, ~1 min

A family is fitted where its labels fit (two-coin and the IRT variants: two
classes; ordinal: integer levels), by EM where it has one and by MAP where its
posterior has a mode (the command line refuses ``--method map`` for the
hierarchical item-difficulty variants, whose abilities' spread shrinks to 0).
Feature-accuracy is left out: none of these sets has features, and its lasso
mode has no Laplace approximation.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

import crowd_models as cm
from crowd_models.cli import main as main_cli
from crowd_models.models import dawid_skene
from crowd_models.models._registry import REGISTRY


def simulated_crowd() -> cm.Annotations:
    """500 annotators of 3 classes, 1,000 items with 5 labels each."""
    rng = np.random.default_rng(0)
    accuracy = rng.uniform(0.4, 0.9, 500)
    confusion = np.stack([np.full((3, 3), (1 - a) / 2) + np.eye(3) * (a - (1 - a) / 2)
                          for a in accuracy])
    return dawid_skene.simulate(confusion, n_items=1000, labels_per_item=5, rng=rng)


def _ordered(a) -> bool:
    return a.n_classes > 2 and all(isinstance(c, int | np.integer) for c in a.classes)


FITS = {  # (--model, --variant): which sets it applies to (None: all)
    ("two-coin", ""): lambda a: a.n_classes == 2,
    ("dawid-skene", "full"): None,
    ("dawid-skene", "one_coin"): None,
    ("dawid-skene", "pooled"): None,
    ("dawid-skene", "hierarchical"): None,
    ("spammer", ""): None,
    ("item-difficulty", "fixed"): None,
    ("item-difficulty", "hierarchical"): None,
    ("item-difficulty", "irt"): lambda a: a.n_classes == 2,
    ("item-difficulty", "irt_hierarchical"): lambda a: a.n_classes == 2,
    ("ordinal", "cumulative"): _ordered,
    ("ordinal", "latent"): _ordered,
    ("community", ""): None,
}


def interval_counts(table: pd.DataFrame) -> tuple[int, int, int]:
    """(annotators, without any interval, with a mean outside its interval by more
    than 1e-6: a Laplace or NUTS mean is the draws' average, which a distribution
    piled against a bound can put just outside its equal-tailed interval, e.g.
    0.9999999992 below a lower quantile of 0.99999999999999, far below the
    report's digits)."""
    names = [c.removesuffix("_lower") for c in table.columns if c.endswith("_lower")]
    lower = table[[f"{n}_lower" for n in names]].to_numpy()
    upper = table[[f"{n}_upper" for n in names]].to_numpy()
    mean = table[[f"{n}_mean" for n in names]].to_numpy()
    missing = np.isnan(lower).all(axis=1) if names else np.ones(len(table), bool)
    outside = ((mean < lower - 1e-6) | (mean > upper + 1e-6)).any(axis=1)
    return len(table), int(missing.sum()), int(outside.sum())


def _report(csv: Path, model: str, variant: str, method: str, out: Path) -> pd.DataFrame:
    """The annotator table the command line writes for this fit."""
    args = ["fit", str(csv), "--model", model, "--method", method, "--out", str(out)]
    if variant:
        args += ["--variant", variant]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main_cli(args)
    if code != 0:
        raise RuntimeError(f"crowd-models {' '.join(args)} exited with {code}")
    return pd.read_csv(out / "annotators.csv", index_col=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--method", choices=["em", "map"], nargs="+", default=["em", "map"])
    parser.add_argument("--only", nargs="+", help="set names (rte dog web_search simulated)")
    parser.add_argument("--model", nargs="+", help="--model names to fit (default: all)")
    args = parser.parse_args()
    sets = {"rte": cm.datasets.load_rte, "dog": cm.datasets.load_dog,
            "web_search": cm.datasets.load_web_search, "simulated": simulated_crowd}
    records = {(r.cli, r.variant): r for r in REGISTRY}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for set_name, load in sets.items():
            if args.only and set_name not in args.only:
                continue
            ann = load()
            csv = Path(tmp) / f"{set_name}.csv"
            ann.to_frame()[["item", "annotator", "label"]].to_csv(csv, index=False)
            fits = [(m, v, method) for (m, v), applies in FITS.items()
                    if (applies is None or applies(ann))
                    and (not args.model or m in args.model)
                    for method in args.method
                    if (records[(m, v)].has_em if method == "em" else records[(m, v)].has_mode)]
            for model, variant, method in fits:
                start = time.perf_counter()
                out = Path(tmp) / f"{set_name}-{model}-{variant}-{method}"
                n, missing, outside = interval_counts(_report(csv, model, variant, method, out))
                rows.append({"set": set_name, "fit": f"{model} {variant}".strip(),
                             "method": method, "annotators": n, "without interval": missing,
                             "mean outside": outside,
                             "seconds": round(time.perf_counter() - start, 1)})
                print(rows[-1], flush=True)
    result = pd.DataFrame(rows)
    with pd.option_context("display.width", 140, "display.max_rows", 200):
        print(result.to_string(index=False))
    print(f"{len(result)} reports; annotator rows without an interval: "
          f"{result['without interval'].sum()} of {result['annotators'].sum()}; with the "
          f"estimate outside it: {result['mean outside'].sum()}")


if __name__ == "__main__":
    main()
