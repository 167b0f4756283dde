"""The continuous family's regression prior chosen by the crowd labels' evidence
(issue 44): ``continuous.em(coef_precision="auto")`` against the default
precision 1, by leave one set out.

Simulated crowds: 300 training items with d features, 6 annotators of noise sd
0.5-2 with biases, 2 labels an item (each item's pair drawn at random); the
truth a linear regression on the features plus noise of sd 0.7. Three designs:
``dense`` (every coefficient N(0, 2 / d)), ``sparse`` (3 coefficients N(0, 1),
the rest 0) and ``embedding`` (10 latent factors seen through d noisy loadings,
the truth a regression on the factors, the shape of an embedding), at d = 5,
20, 100 and 200, three seeds each. Printed per crowd: the RMSE on 2,000 new
items of the regression's prediction (``cm.predict``'s mean) at precision 1,
at ``"auto"`` and at the best precision of a grid 10^-2 ... 10^4 in hindsight
(oracle), ``"auto"``'s precision and seconds; and the RMSE of the training
items' true values (the EM's posterior means) at precision 1 and ``"auto"``.
Then leave one set out (a design and a d, its seeds averaged): the rule with
the lower mean new-item RMSE relative to the oracle's on the other sets, and
its RMSE ratio on the held-out one.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/continuous_prior.py   # ~1 min
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from crowd_models.models import continuous

GRID = tuple(10.0 ** k for k in range(-2, 5))
NOISE_SD = (0.5, 0.7, 1.0, 1.0, 1.5, 2.0)
BIAS = (0.4, -0.2, 0.0, 0.3, -0.3, -0.2)
RULES = {"precision 1": 1.0, "auto": "auto"}


def crowd(design: str, d: int, seed: int, n: int = 300, n_new: int = 2000):
    """(training annotations with features, new items' features, their true values)."""
    rng = np.random.default_rng(seed)
    if design == "embedding":
        factors = rng.normal(size=(n + n_new, 10))
        X = factors @ rng.normal(size=(10, d)) / np.sqrt(10) + 0.5 * rng.normal(size=(n + n_new,
                                                                                    d))
        mean = factors @ rng.normal(0, np.sqrt(2 / 10), 10)
    else:
        X = rng.normal(size=(n + n_new, d))
        coef = (rng.normal(0, np.sqrt(2 / d), d) if design == "dense"
                else np.r_[rng.normal(0, 1, 3), np.zeros(d - 3)])
        mean = X @ coef
    truth = mean + rng.normal(0, 0.7, n + n_new)
    ann = continuous.simulate(1 / np.square(NOISE_SD), bias=BIAS, n_items=n,
                              true_values=truth[:n], labels_per_item=2, rng=rng)
    return ann.with_features(X[:n]), X[n:], truth[n:], truth[:n]


def new_item_rmse(fit, ann, X_new, y_new) -> float:
    scaled = ann.standardized()
    Xs = (X_new - scaled.feature_center) / scaled.feature_scale
    pred = Xs @ fit["coef"].values[0, 0] + float(fit["intercept"].values[0, 0])
    return float(np.sqrt(np.mean((pred - y_new) ** 2)))


def one_crowd(design: str, d: int, seed: int) -> dict:
    ann, X_new, y_new, y_train = crowd(design, d, seed)
    row = {"design": design, "d": d, "seed": seed}
    for rule, precision in RULES.items():
        t0 = time.perf_counter()
        fit = continuous.em(ann, bias=True, coef_precision=precision)
        row[f"{rule} s"] = time.perf_counter() - t0
        row[rule] = new_item_rmse(fit, ann, X_new, y_new)
        row[f"{rule} train"] = float(np.sqrt(np.mean(
            (fit["true_value"].values[0, 0] - y_train) ** 2)))
        if precision == "auto":
            row["alpha"] = fit.attrs["coef_precision"]
    grid = [new_item_rmse(continuous.em(ann, bias=True, coef_precision=a), ann, X_new, y_new)
            for a in GRID]
    row["oracle"], row["oracle alpha"] = min(grid), GRID[int(np.argmin(grid))]
    return row


def leave_one_set_out(rows, rules=tuple(RULES), measure="new-item RMSE") -> None:
    """Each set (a design and a d, seeds averaged) held out in turn: the rule
    with the lowest mean ``measure`` over the oracle's on the other sets, and
    its ratio on the held-out one (``rows``: a value per rule and ``oracle``,
    lower better; ordinal_prior.py reads it too)."""
    sets = sorted({(r["design"], r["d"]) for r in rows})

    def ratio(rule, s):
        return float(np.mean([r[rule] / r["oracle"] for r in rows if (r["design"], r["d"]) == s]))

    print(f"\nLeave one set out ({measure} over the oracle's, seeds averaged; lower is "
          "better): the rule with the lower mean on the other sets, and its ratio here")
    print(f"{'held out':>14} " + " ".join(f"{rule:>12}" for rule in rules) + f" {'picks':>12}")
    picked = []
    for s in sets:
        others = [o for o in sets if o != s]
        choice = min(rules, key=lambda rule: np.mean([ratio(rule, o) for o in others]))
        picked.append(ratio(choice, s))
        print(f"{s[0] + ' ' + str(s[1]):>14} " + " ".join(f"{ratio(r, s):>12.3f}" for r in rules)
              + f" {choice:>12}")
    for rule in rules:
        print(f"  {rule}, always: mean ratio {np.mean([ratio(rule, s) for s in sets]):.4f}, "
              f"worst {max(ratio(rule, s) for s in sets):.3f}")
    print(f"  chosen out of set: mean ratio {np.mean(picked):.4f}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, nargs="+", default=[5, 20, 100, 200])
    parser.add_argument("--design", nargs="+", default=["dense", "sparse", "embedding"],
                        choices=["dense", "sparse", "embedding"])
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", UserWarning)
    start = time.perf_counter()
    print(f"{'design':>10} {'d':>4} {'seed':>4} {'@1':>7} {'auto':>7} {'oracle':>7} "
          f"{'alpha':>8} {'oracle a':>8} {'auto s':>6} {'train @1':>8} {'train auto':>10}")
    rows = []
    for design in args.design:
        for d in args.d:
            if design == "sparse" and d < 3:
                continue
            for seed in range(args.seeds):
                r = one_crowd(design, d, seed)
                rows.append(r)
                print(f"{design:>10} {d:>4} {seed:>4} {r['precision 1']:>7.3f} {r['auto']:>7.3f}"
                      f" {r['oracle']:>7.3f} {r['alpha']:>8.3g} {r['oracle alpha']:>8.3g}"
                      f" {r['auto s']:>6.2f} {r['precision 1 train']:>8.3f}"
                      f" {r['auto train']:>10.3f}", flush=True)
    leave_one_set_out(rows)
    print(f"wall time {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
