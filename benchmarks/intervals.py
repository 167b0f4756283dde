"""Every EM fit reports intervals: for each family's EM on RTE, dog, web search and a
simulated crowd of 500 annotators and 3 classes, the number of annotators in the
report's table (``report.annotator_summary``) without an interval, and of
annotators whose point (the table's mean) lies outside its interval.

    .venv/bin/python benchmarks/intervals.py

A family is fitted where its labels fit (two-coin: two classes; cumulative ordinal:
ordered levels). The MAP fits' Laplace intervals are not here: ``--method map``
skips them above ``cli._commands.LAPLACE_MAX_PARAMETERS`` free parameters.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import pandas as pd

import crowd_models as cm
from crowd_models.models import community, dawid_skene, item_difficulty, ordinal, spammer, two_coin


def simulated_crowd() -> cm.Annotations:
    """500 annotators of 3 classes, 1,000 items with 5 labels each."""
    rng = np.random.default_rng(0)
    accuracy = rng.uniform(0.4, 0.9, 500)
    confusion = np.stack([np.full((3, 3), (1 - a) / 2) + np.eye(3) * (a - (1 - a) / 2)
                          for a in accuracy])
    return dawid_skene.simulate(confusion, n_items=1000, labels_per_item=5, rng=rng)


FITS = {
    "two-coin": (two_coin.em, lambda a: a.n_classes == 2),
    "dawid-skene full": (dawid_skene.em, None),
    "dawid-skene one_coin": (lambda a: dawid_skene.em(a, variant="one_coin"), None),
    "dawid-skene pooled": (lambda a: dawid_skene.em(a, variant="pooled"), None),
    "spammer": (spammer.em, None),
    "item-difficulty": (item_difficulty.em, None),
    "community": (community.em, None),
    "ordinal cumulative": (ordinal.em, lambda a: a.n_classes > 2 and all(
        isinstance(c, int | np.integer) for c in a.classes)),
}


def interval_counts(table: pd.DataFrame) -> tuple[int, int, int]:
    """(annotators, without any interval, with a mean outside its interval)."""
    names = [c.removesuffix("_lower") for c in table.columns if c.endswith("_lower")]
    lower = table[[f"{n}_lower" for n in names]].to_numpy()
    upper = table[[f"{n}_upper" for n in names]].to_numpy()
    mean = table[[f"{n}_mean" for n in names]].to_numpy()
    missing = np.isnan(lower).all(axis=1) if names else np.ones(len(table), bool)
    outside = ((mean < lower - 1e-12) | (mean > upper + 1e-12)).any(axis=1)
    return len(table), int(missing.sum()), int(outside.sum())


def main() -> None:
    sets = {"RTE": cm.datasets.load_rte(), "dog": cm.datasets.load_dog(),
            "web search": cm.datasets.load_web_search(), "simulated 500 x 3": simulated_crowd()}
    rows = []
    for set_name, ann in sets.items():
        for name, (fit, applies) in FITS.items():
            if applies is not None and not applies(ann):
                continue
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                table = cm.report.annotator_summary(fit(ann))
            n, missing, outside = interval_counts(table)
            rows.append({"set": set_name, "family": name, "annotators": n,
                         "without interval": missing, "mean outside": outside,
                         "seconds": round(time.perf_counter() - start, 2)})
    result = pd.DataFrame(rows)
    with pd.option_context("display.width", 120):
        print(result.to_string(index=False))
    print(f"annotators without an interval: {result['without interval'].sum()} of "
          f"{result['annotators'].sum()}; with the mean outside it: "
          f"{result['mean outside'].sum()}")


if __name__ == "__main__":
    main()
