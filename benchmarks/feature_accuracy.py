"""Speed of the feature-dependent accuracy family: lasso EM, MAP, selection.

Measures and prints; it asserts nothing about time, which depends on the
machine. Three parts:

1. ``feature_accuracy.em`` on data simulated by the model (5 annotators
   labelling every item): 10^3 and 10^4 items with 20 features (30 restarts,
   the default), and 10^3 items with 200 features (5 restarts: each takes
   about 11 s there, as penalty 5 leaves most of the 400 coefficients
   non-zero): wall time, iterations of the final run, the non-zero
   coefficients found (classifier + accuracy) and the error of the inferred
   labels against the simulated truth.
2. ``build_model`` + ``cm.fit_map`` started from the EM fit: build time,
   MAP time (first call, with compilation, then a second call) and max
   |MAP - EM| over the four parameter groups.
3. ``selection.select_penalty`` over 5 penalties, 5-fold, 5 restarts per
   fit: wall time.

    .venv/bin/python benchmarks/feature_accuracy.py            # full run
    .venv/bin/python benchmarks/feature_accuracy.py --quick    # smaller sizes
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np

PARAMS = ("intercept", "coef", "accuracy_intercept", "accuracy_coef")


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    args = parser.parse_args()
    import crowd_models as cm
    from crowd_models import selection
    from crowd_models.models import feature_accuracy as fa

    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    sizes = [(1_000, 20, 30)] if args.quick else [(1_000, 20, 30), (10_000, 20, 30),
                                                  (1_000, 200, 5)]
    print("\n1-2. EM and MAP from it, penalty 5, 5 annotators")
    print(f"{'items':>7} {'features':>8} {'restarts':>8} {'EM s':>7} {'EM it':>6} {'nonzero':>8} "
          f"{'error':>6} {'build s':>8} {'MAP 1st s':>10} {'MAP 2nd s':>10} "
          f"{'max|MAP-EM|':>12}")
    for n, d, restarts in sizes:
        ann = fa.simulate(n, n_features=d, rng=n + d)
        fit, em_s = timed(fa.em, ann, penalty=5.0, n_restarts=restarts)
        error = float(np.mean((fit["item_class_prob"].values[0, 0, :, 1] > 0.5) != ann.gold))
        model, build_s = timed(fa.build_model, ann, penalty=5.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            map_fit, first_s = timed(cm.fit_map, model, start=fit)
            _, second_s = timed(cm.fit_map, model, start=fit)
        diff = max(float(np.abs(map_fit.posterior[p].values - fit[p].values).max())
                   for p in PARAMS)
        nonzero = f"{fit.attrs['n_nonzero_coef']}+{fit.attrs['n_nonzero_accuracy_coef']}"
        print(f"{n:>7,} {d:>8} {restarts:>8} {em_s:7.2f} {fit.attrs['n_iter']:>6} {nonzero:>8} "
              f"{error:6.3f} {build_s:8.2f} {first_s:10.2f} {second_s:10.2f} {diff:12.1e}")

    n, d, _ = sizes[0]
    ann = fa.simulate(n, n_features=d, rng=1)
    grid = [0.5, 1.0, 2.0, 5.0, 10.0]
    chosen, seconds = timed(selection.select_penalty, ann, grid, rng=0, n_restarts=5)
    print(f"\n3. select_penalty, {n:,} items x {d} features, {len(grid)} penalties, 5 folds, "
          f"5 restarts: {seconds:.1f} s; chosen {chosen.penalty:g}")


if __name__ == "__main__":
    main()
