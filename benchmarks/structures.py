"""Wall time of the EDDA reference (crowd_models.models.edda.fit_edda) for each of the 14
covariance structures on iris (150 items, 4 features, 3 classes), and of a full
select_edda. Prints the times and iteration counts; asserts nothing about time.

    .venv/bin/python benchmarks/structures.py             # 20 repeats
    .venv/bin/python benchmarks/structures.py --repeats 3
"""

import argparse
import os
import time

import numpy as np

from crowd_models.models.edda import STRUCTURES, fit_edda, select_edda


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    from sklearn.datasets import load_iris

    data = load_iris()
    X, y = data.data, np.asarray(data.target_names)[data.target]
    print(f"EDDA on iris, best of {args.repeats} (load average {os.getloadavg()[0]:.1f})")
    print(f"{'structure':>9} {'ms':>8} {'iterations':>10} {'loglik':>12}")
    total = 0.0
    for s in STRUCTURES:
        best = np.inf
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            fit = fit_edda(X, y, s)
            best = min(best, time.perf_counter() - t0)
        total += best
        print(f"{s:>9} {1e3 * best:8.2f} {fit.n_iter:10d} {fit.loglik:12.4f}")
    print(f"{'all 14':>9} {1e3 * total:8.2f}")
    t0 = time.perf_counter()
    best_fit, _ = select_edda(X, y)
    print(f"select_edda: {1e3 * (time.perf_counter() - t0):.1f} ms, best by BIC "
          f"{best_fit.covariance}")


if __name__ == "__main__":
    main()
