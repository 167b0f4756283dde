"""The feature-accuracy family's L1 penalty chosen without gold (issue 44): a
candidate against the default 1, by leave one set out. Not a default yet.

Measures and prints; it asserts nothing. The family's penalty is 1 on the
summed log-likelihood whatever the number of features. The candidate is the
rule ``regularization="auto"`` applies to a black-box classifier
(``models/_tuning.py``): the labels-only two-coin EM's soft labels q, the L1
logistic regression of the family's M-step (``_fit_truth``) at each penalty
of :data:`GRID` fitted to q on four fifths of the items, and the penalty
whose fits predict the held-out fifth's q best (the expected Brier score
sum (q - p)^2, 5 folds). No EM runs inside it.

Simulated crowds (``feature_accuracy.simulate``): 400 training items with
d standard-normal features, the paper's sparse truth (2, -2, 1.5, -1.5, 1 on
the first five features), 5 annotators labelling every item, each of the
paper's three mechanisms (``constant``, ``model``, ``nonlinear``), d = 5, 20
and 200, two seeds. ``feature_accuracy.em`` (5 restarts) at every penalty
of the grid; the error rate on 3,000 new items of each rule's penalty and
of the grid's best in hindsight (oracle). Then leave one set out (a
mechanism and a d, seeds averaged).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/feature_accuracy_prior.py   # ~15 min
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from continuous_prior import leave_one_set_out
from scipy.special import expit

from crowd_models.models import feature_accuracy, two_coin

GRID = (0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0)
TRUTH = (2.0, -2.0, 1.5, -1.5, 1.0)
RULES = ("penalty 1", "Brier")


def brier_penalty(ann, n_folds: int = 5) -> float:
    """The grid's penalty whose L1 logistic fits to the labels-only soft labels
    predict the held-out items' soft labels best."""
    std = ann.standardized()
    q = two_coin.em(std.with_features(None))["item_class_prob"].values[0, 0][:, 1]
    design = np.hstack([np.ones((std.n_items, 1)), std.features])
    fold = np.random.default_rng(0).permutation(len(q)) % n_folds
    tau = feature_accuracy.DEFAULT_PRIORS["intercept_precision"]
    brier = np.zeros(len(GRID))
    for k in range(n_folds):
        train, held = fold != k, fold == k
        for g, penalty in enumerate(GRID):
            intercept, coef = feature_accuracy._fit_truth(
                np.asfortranarray(design[train]), q[train], {"lam_b": penalty, "tau0": tau})
            brier[g] += np.sum((q[held] - expit(design[held] @ np.r_[intercept, coef])) ** 2)
    return GRID[int(np.argmin(brier))]


def one_crowd(mechanism: str, d: int, seed: int, n: int = 400, n_new: int = 3000) -> dict:
    rng = np.random.default_rng([d, seed, len(mechanism)])
    X = rng.normal(size=(n + n_new, d))
    coef = np.zeros(d)
    coef[:len(TRUTH)] = TRUTH[:d]
    truth_new = rng.random(n_new) < expit(X[n:] @ coef)
    ann = feature_accuracy.simulate(features=X[:n], coef=coef, mechanism=mechanism, rng=rng)
    errors = {}
    for penalty in GRID:
        fit = feature_accuracy.em(ann, penalty=penalty, n_restarts=5, rng=0)
        prob = np.asarray(feature_accuracy.predict(fit, X[n:])).reshape(n_new, -1)[:, -1]
        errors[penalty] = float(np.mean((prob > 0.5) != truth_new))
    picked = brier_penalty(ann)
    return {"design": mechanism, "d": d, "seed": seed, "penalty 1": errors[1.0],
            "Brier": errors[picked], "Brier penalty": picked, "oracle": min(errors.values()),
            "oracle penalty": min(errors, key=errors.get)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, nargs="+", default=[5, 20, 200])
    parser.add_argument("--mechanisms", nargs="+", default=["constant", "model", "nonlinear"])
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", UserWarning)
    start = time.perf_counter()
    print(f"{'mechanism':>10} {'d':>4} {'seed':>4} {'@1':>7} {'Brier':>7} {'oracle':>7} "
          f"{'B pen':>6} {'o pen':>6}  (error rates on the new items)")
    rows = []
    for mechanism in args.mechanisms:
        for d in args.d:
            for seed in range(args.seeds):
                r = one_crowd(mechanism, d, seed)
                rows.append(r)
                print(f"{mechanism:>10} {d:>4} {seed:>4} {r['penalty 1']:>7.3f} {r['Brier']:>7.3f}"
                      f" {r['oracle']:>7.3f} {r['Brier penalty']:>6.3g} "
                      f"{r['oracle penalty']:>6.3g}", flush=True)
    leave_one_set_out(rows, RULES, "new-item error rate")
    print(f"wall time {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
