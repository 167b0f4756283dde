"""The calibration study: simulation-based calibration of every family and main
variant on the small design, written to ``validation/README.md``.

    .venv/bin/python validation/study.py                    # the whole study (hours)
    .venv/bin/python validation/study.py --sims 200 --only two_coin spammer
    .venv/bin/python validation/study.py --fits map         # the Laplace intervals only

Each case runs ``crowd_models.validation.sbc`` on a ``distributed.LocalCluster``
with one worker per core (``--workers``), NUTS for the posterior and, where
the family has an EM, MAP plus Laplace for the intervals the report gives
for MAP fits. The README gets one summary row per case and fit, one row per
variable (its parameters' smallest p-value, how many were rejected, and the
coverage of the 50% and 90% intervals), each item-probability method's Brier
score, and the figures (``validation/figures``). Every tested parameter's
row goes to ``validation/results/<case>-<fit>.csv``. Cases are rerun only
for the ones named with ``--only``; the README keeps the others' sections.
``validation/findings.md``, written by hand, goes in after the summary.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402

from crowd_models import validation  # noqa: E402

HERE = Path(__file__).resolve().parent
STUDY = {  # name -> (family, variant, design changes)
    "two_coin": ("two_coin", None, {}),
    "two_coin-features": ("two_coin", "features", {}),
    "dawid_skene-full": ("dawid_skene", "full", {"n_classes": 3}),
    "dawid_skene-one_coin": ("dawid_skene", "one_coin", {"n_classes": 3}),
    "dawid_skene-pooled": ("dawid_skene", "pooled", {"n_classes": 3}),
    "dawid_skene-hierarchical": ("dawid_skene", "hierarchical", {"n_classes": 3}),
    "spammer": ("spammer", None, {"n_classes": 3}),
    "item_difficulty-fixed": ("item_difficulty", "fixed", {}),
    "item_difficulty-hierarchical": ("item_difficulty", "hierarchical", {}),
    "item_difficulty-irt": ("item_difficulty", "irt", {}),
    "ordinal-latent": ("ordinal", "latent", {"n_classes": 4}),
    "continuous-gaussian": ("continuous", "gaussian", {}),
    "continuous-bias": ("continuous", "bias", {}),
    "continuous-student_t": ("continuous", "student_t", {}),
    "feature_accuracy": ("feature_accuracy", None, {}),
    "community": ("community", None, {}),
}
"""The cases of the study: every family and main variant that has a simulator."""


def _variable_rows(tests: pd.DataFrame) -> pd.DataFrame:
    """One row per variable: its parameters' smallest p-value, rejections, coverage."""
    grouped = tests.groupby("variable", sort=False)
    return pd.DataFrame({"parameters": grouped.size(), "min_p": grouped["p_value"].min(),
                         "rejected": grouped["rejected"].sum(),
                         "coverage_50": grouped["coverage_50"].mean(),
                         "coverage_90": grouped["coverage_90"].mean(),
                         "em_coverage_90": grouped["em_coverage_90"].mean()})


def run_case(name: str, fit: str, n_sims: int, client, seed: int) -> dict:
    family, variant, changes = STUDY[name]
    design = {**validation.DESIGN_DEFAULTS, **changes}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        result = validation.sbc(family, design, n_sims=n_sims, fit=fit, variant=variant,
                                client=client, seed=seed)
    tests = validation.rank_tests(result)
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "figures").mkdir(exist_ok=True)
    tests.to_csv(HERE / "results" / f"{name}-{fit}.csv")
    variables = _variable_rows(tests)
    fig = validation.plot_ranks(result, parameters=_shown(tests))
    fig.savefig(HERE / "figures" / f"{name}-{fit}-ranks.png", dpi=80)
    calibration = validation.item_calibration(result)
    if result.sizes["method"]:  # continuous labels have no class probabilities
        fig = validation.plot_calibration(result)
        fig.savefig(HERE / "figures" / f"{name}-{fit}-items.png", dpi=80)
    ok = result["status"].values == "ok"
    summary = {
        "case": name, "fit": fit, "replications": f"{result.attrs['n_ran']}/{n_sims}",
        "tests": len(tests), "rejected": int(tests["rejected"].sum()),
        "min_p": float(tests["p_value"].min()),
        "coverage_50": float(tests["coverage_50"].mean()),
        "coverage_90": float(tests["coverage_90"].mean()),
        "em_coverage_90": None if tests["em_coverage_90"].isna().all()
        else float(tests["em_coverage_90"].mean()),
        "max_rhat": float(result["max_rhat"].values[ok].max()) if fit == "nuts" else None,
        "divergent_fits": int((result["divergences"].values[ok] > 0).sum()),
        "items_figure": bool(result.sizes["method"]),
        "brier": calibration.attrs["brier"], "seconds": result.attrs["seconds"],
        "workers": result.attrs["workers"], "design": json.loads(result.attrs["design"]),
        "threshold": tests.attrs["threshold"]}
    print(f"{name} {fit}: {summary['replications']} replications, {summary['rejected']} of "
          f"{summary['tests']} rejected (p < {summary['threshold']:.2g}), coverage "
          f"{summary['coverage_50']:.3f}/{summary['coverage_90']:.3f}, "
          f"{summary['seconds']:.0f} s on {_workers(summary['workers'])}", flush=True)
    return {"summary": summary, "variables": variables.round(4).to_dict("index")}


def _shown(tests: pd.DataFrame, most: int = 18) -> list[str]:
    """The parameters a rank figure shows: the worst p-values first, at most ``most``."""
    return list(tests.sort_values("p_value").index[:most])


def _workers(n: int) -> str:
    return f"{n} worker" if n == 1 else f"{n} workers"


def write_readme(records: dict, n_workers: int) -> None:
    lines = ["# Calibration study", "",
             "Written by `validation/study.py` (`make validate`); the method is in the "
             "docstring of `crowd_models/validation.py`. Each replication draws the "
             "parameters from the family's own priors, simulates a table of the design, "
             "fits it, and ranks each true value among 99 posterior draws. A parameter is "
             "rejected when the chi-squared test of its ranks in 10 bins gives p below "
             "0.01 / (number of tests of the case) (Bonferroni). A calibrated fit "
             "rejects nothing and its 90% intervals cover 86-94% of the true values. "
             "`nuts` is the posterior; `map` is the Laplace approximation at the MAP, "
             "the intervals of MAP fits' reports. The EM column is the coverage of the "
             "90% intervals the report gives EM fits from their conjugate approximations "
             "(two-coin sensitivity and specificity, one-coin accuracy, spammer "
             "trustworthiness), on the same replications.", "",
             "## Summary", "",
             "| case | fit | design (items, annotators, labels per item, classes) | "
             "replications | rejected / tests | min p | coverage 50% | coverage 90% | "
             "EM coverage 90% | max r-hat | fits with divergences | Brier (EM / MAP / NUTS) "
             "| seconds |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for key in sorted(records):
        s = records[key]["summary"]
        d = s["design"]
        brier = " / ".join(f"{s['brier'][m]:.4f}" if m in s["brier"] else "-"
                           for m in ("em", "map", "nuts"))
        rhat = ("-" if s["max_rhat"] is None else f"{s['max_rhat']:.3f}"
                if s["max_rhat"] < 100 else f"{s['max_rhat']:.1e}")  # a chain that never moved
        em = s.get("em_coverage_90")
        em = "-" if em is None else f"{em:.3f}"
        design = (f"{d['n_items']}, {d['n_annotators']}, {d['labels_per_item']}, "
                  + ("continuous" if not s.get("items_figure", True) else str(d["n_classes"]))
                  + (f"; {d['n_features']} features" if d.get("n_features") else ""))
        lines.append(
            f"| {s['case']} | {s['fit']} | {design} | {s['replications']} | "
            f"{s['rejected']} / {s['tests']} | {s['min_p']:.3g} | {s['coverage_50']:.3f} | "
            f"{s['coverage_90']:.3f} | {em} | {rhat} | {s['divergent_fits']} | {brier} | "
            f"{s['seconds']:.0f} on {_workers(s['workers'])} |")
    total = sum(records[key]["summary"]["seconds"] for key in records) / 3600
    lines += ["", f"Run on {os.cpu_count()} cores (the last run with {n_workers} Dask "
              f"{_workers(n_workers).split()[1]}; the seconds column gives each case's, "
              f"{total:.1f} hours in all).", ""]
    findings = HERE / "findings.md"  # hand-written: what the numbers mean
    if findings.exists():
        lines += [findings.read_text().strip(), ""]
    lines += ["## Per variable", ""]
    for key in sorted(records):
        s = records[key]["summary"]
        lines += [f"### {s['case']}, {s['fit']}", "",
                  "| variable | parameters | min p | rejected | coverage 50% | coverage 90% | "
                  "EM coverage 90% |",
                  "|---|---|---|---|---|---|---|"]
        for var, row in records[key]["variables"].items():
            em = row.get("em_coverage_90")
            em = "-" if em is None or em != em else f"{em:.3f}"
            lines.append(f"| {var} | {row['parameters']} | {row['min_p']:.3g} | "
                         f"{row['rejected']} | {row['coverage_50']:.3f} | "
                         f"{row['coverage_90']:.3f} | {em} |")
        items = (f" ![items](figures/{s['case']}-{s['fit']}-items.png)"
                 if s.get("items_figure", True) else "")
        lines += ["", f"![ranks](figures/{s['case']}-{s['fit']}-ranks.png){items}", ""]
    (HERE / "README.md").write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=list(STUDY), choices=list(STUDY))
    parser.add_argument("--fits", nargs="*", default=list(validation.FITS),
                        choices=list(validation.FITS))
    parser.add_argument("--sims", type=int, default=200)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args(argv)
    store = HERE / "results" / "summary.json"
    records = json.loads(store.read_text()) if store.exists() else {}
    t0 = time.perf_counter()
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=args.workers, threads_per_worker=1,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        for name in args.only:
            family, variant, _ = STUDY[name]
            for fit in args.fits:
                if fit not in validation.available_fits(family, variant):
                    continue
                records[f"{name}-{fit}"] = run_case(name, fit, args.sims, client, args.seed)
                (HERE / "results").mkdir(exist_ok=True)
                store.write_text(json.dumps(records, indent=1))
                write_readme(records, args.workers)
    print(f"study: {time.perf_counter() - t0:.0f} s with {_workers(args.workers)} (Dask) on "
          f"{os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
