"""The cumulative ordinal model's classifier prior chosen by the crowd labels'
evidence (issue 44): ``ordinal.em(coef_precision="auto")`` (each threshold's
two-coin evidence) against the old default precision 1, by leave one set out.

Simulated crowds of K = 4 levels: 300 training items with d features, the
true level an ordered logit of the features (cut points at -2, 0 and 2 on
the latent scale, logistic noise); 6 annotators with per-threshold
sensitivity and specificity from U(0.6, 0.9) (sensitivity falling and
specificity rising over the thresholds, so that the labels come from one
confusion matrix), 3 labels an item. Two designs: ``dense`` (d standard
normal features, every coefficient N(0, 9 / d): the latent mean's sd is 3
whatever d) and ``embedding`` (10 latent factors seen through d noisy
loadings, the latent mean a regression on the factors with sd 3), at d = 5,
20, 100 and 200, three seeds each. Printed per crowd: the error rate on
2,000 new items of the most probable level under ``cm.predict`` at
precision 1, at ``"auto"`` and at the best precision of a grid 10^-2 ...
10^4 in hindsight (oracle), the mean absolute level error of the same
predictions, and ``"auto"``'s precisions (one per threshold) and seconds.
Then leave one set out (a design and a d, its seeds averaged): the rule
with the lower mean error rate relative to the oracle's on the other sets,
and its ratio on the held-out one.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/ordinal_prior.py   # ~2 min

``--variant latent`` scores the latent variant's ordered logit on the same
crowds instead (its annotators' bias-and-noise model is not the one that
made the labels; its truth's ordered logit is the one that made the
levels): MAP fits (``cm.fit_map``) at precision 1, in the ``auto`` column at
``ordinal.pooled_precision`` (the candidate; the variant's own "auto" is
precision 1, ``latent.AUTO_PRECISION``; printed once per crowd) and over
the grid.
About 15 minutes.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from continuous_prior import leave_one_set_out

import crowd_models as cm
from crowd_models.models import ordinal

GRID = tuple(10.0 ** k for k in range(-2, 5))
RULES = {"precision 1": 1.0, "auto": "auto"}
CUTS = np.array([-2.0, 0.0, 2.0])
N_ANNOTATORS = 6


def crowd(design: str, d: int, seed: int, n: int = 300, n_new: int = 2000):
    """(training annotations with features, the new items' features, their true
    level codes 0..3)."""
    rng = np.random.default_rng([d, seed, design == "embedding"])
    if design == "embedding":
        factors = rng.normal(size=(n + n_new, 10))
        X = factors @ rng.normal(size=(10, d)) / np.sqrt(10) + 0.5 * rng.normal(size=(n + n_new,
                                                                                    d))
        mean = factors @ rng.normal(0, 3 / np.sqrt(10), 10)
    else:
        X = rng.normal(size=(n + n_new, d))
        mean = X @ rng.normal(0, 3 / np.sqrt(d), d)
    level = np.searchsorted(CUTS, mean + rng.logistic(size=n + n_new))
    T = len(CUTS)
    sens = np.sort(rng.uniform(0.6, 0.9, (N_ANNOTATORS, T)), axis=1)[:, ::-1]
    spec = np.sort(rng.uniform(0.6, 0.9, (N_ANNOTATORS, T)), axis=1)
    ann = ordinal.simulate(variant="cumulative", sensitivity=sens, specificity=spec,
                           true_labels=level[:n], labels_per_item=3, rng=rng)
    return ann.with_features(X[:n]), X[n:], level[n:]


def new_item_errors(fit, X_new, level_new) -> tuple[float, float]:
    """(error rate, mean absolute level error) of the most probable level."""
    best = cm.predict(fit, X_new)["prob"].values.argmax(axis=1)
    return float(np.mean(best != level_new)), float(np.mean(np.abs(best - level_new)))


def fit_at(ann, precision, variant: str):
    """The variant's fit at ``precision``: the cumulative EM, or the latent MAP."""
    if variant == "cumulative":
        return ordinal.em(ann, coef_precision=precision)
    return cm.fit_map(ordinal.build_model(ann, variant="latent", coef_precision=precision))


def one_crowd(design: str, d: int, seed: int, variant: str = "cumulative") -> dict:
    ann, X_new, level_new = crowd(design, d, seed)
    row = {"design": design, "d": d, "seed": seed}
    for rule, precision in RULES.items():
        t0 = time.perf_counter()
        if variant == "latent" and precision == "auto":
            # the latent variant's "auto" is precision 1 (latent.AUTO_PRECISION): its
            # column scores the candidate, the cumulative thresholds' pooled precision
            precision = ordinal.pooled_precision(ann.standardized())
            row["alpha"] = [precision]
        fit = fit_at(ann, precision, variant)
        row[f"{rule} s"] = time.perf_counter() - t0
        row[rule], row[f"{rule} mae"] = new_item_errors(fit, X_new, level_new)
        if precision == "auto":
            row["alpha"] = fit.attrs["coef_precision"]
    grid = [new_item_errors(fit_at(ann, a, variant), X_new, level_new)[0] for a in GRID]
    row["oracle"], row["oracle alpha"] = min(grid), GRID[int(np.argmin(grid))]
    return row


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, nargs="+", default=[5, 20, 100, 200])
    parser.add_argument("--design", nargs="+", default=["dense", "embedding"],
                        choices=["dense", "embedding"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--variant", default="cumulative", choices=["cumulative", "latent"])
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", UserWarning)
    start = time.perf_counter()
    print(f"{'design':>10} {'d':>4} {'seed':>4} {'@1':>7} {'auto':>7} {'oracle':>7} "
          f"{'mae @1':>7} {'mae auto':>8} {'oracle a':>8} {'auto s':>6}  alpha by threshold")
    rows = []
    for design in args.design:
        for d in args.d:
            for seed in range(args.seeds):
                r = one_crowd(design, d, seed, args.variant)
                rows.append(r)
                print(f"{design:>10} {d:>4} {seed:>4} {r['precision 1']:>7.3f} {r['auto']:>7.3f}"
                      f" {r['oracle']:>7.3f} {r['precision 1 mae']:>7.3f} {r['auto mae']:>8.3f}"
                      f" {r['oracle alpha']:>8.3g} {r['auto s']:>6.2f}  "
                      + " ".join(f"{a:.3g}" for a in r["alpha"]), flush=True)
    leave_one_set_out(rows, tuple(RULES), "new-item error rate")
    print(f"wall time {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
