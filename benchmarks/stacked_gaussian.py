"""Speed of the stacked Gaussian family: the EDDA reference, stacking, PyMC.

Measures and prints; it asserts nothing about time, which depends on the
machine. Three parts:

1. ``crowd_models.models.edda.fit_edda`` for each of the 14 structures on simulated
   data (3 classes, 5 features, n = 10^4 and 10^5): wall time, iterations of
   the iterative structures, and whether they converged.
2. The paper's real-data pipeline (gastrointestinal lesions, the Table 6
   run's 50 splits): seven EEE base learners per split, the six weighting
   strategies and their ensembles' test predictions, total wall time.
3. ``build_model`` + ``cm.fit_map`` with flat priors (EEE and VVV, 7
   annotators, the section-4 simulation with 10^3 and 10^4 items): build
   time, MAP time (first call, with compilation, then a second call) and max
   |MAP - ML| over every base learner's proportions, means and covariances.

    .venv/bin/python benchmarks/stacked_gaussian.py            # full run
    .venv/bin/python benchmarks/stacked_gaussian.py --quick    # smaller sizes
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def edda_part(sizes) -> None:
    from crowd_models.models import edda

    rng = np.random.default_rng(0)
    d, G = 5, 3
    print("\n1. fit_edda, 3 classes, 5 features (seconds; iterations where iterative)")
    header = f"{'structure':>9}" + "".join(f"{f'n={n:,}':>22}" for n in sizes)
    print(header)
    data = {}
    for n in sizes:
        y = rng.integers(0, G, n)
        A = rng.normal(size=(G, d, d)) * 0.5 + np.eye(d)
        X = rng.normal(size=(n, d))
        X = np.einsum("nij,nj->ni", A[y], X) + 3 * rng.normal(size=(G, d))[y]
        data[n] = (X, y)
    for name in edda.STRUCTURES:
        cells = []
        for n in sizes:
            fit, seconds = timed(edda.fit_edda, *data[n], covariance=name)
            extra = f" ({fit.n_iter} it{'' if fit.converged else ', NOT conv.'})" \
                if fit.n_iter > 1 else ""
            cells.append(f"{seconds:8.3f}{extra}")
        print(f"{name:>9}" + "".join(f"{c:>22}" for c in cells))


def pipeline_part() -> None:
    from crowd_models.datasets import load_gi_lesions_split
    from crowd_models.models import stacked_gaussian as sg

    splits = [load_gi_lesions_split(k, run="table6") for k in range(1, 51)]
    experts = ["expert_1", "expert_2", "expert_3", "expert_4"]
    settings = {"PGT": None, "EN": dict(experts=experts, expert_share=0.8),
                "E": {}, "MV": dict(threshold=0.9), "ItAlg1": {}, "ItAlg2": {}}
    t0 = time.perf_counter()
    correct = {s: 0 for s in settings}
    for sp in splits:
        ann = sp["train"]
        fits = sg.fit_base_learners(ann, "EEE")
        for s, kw in settings.items():
            kw = dict(gold_items=sp["pgt_gold"]) if kw is None else kw
            w = sg.annotator_weights(ann, s, base_fits=fits, **kw)
            pred = sg.stack(fits, w, classes=ann.classes).predict(sp["test_features"].to_numpy())
            correct[s] += int(np.sum(pred == sp["test_gold"].to_numpy()))
    seconds = time.perf_counter() - t0
    n_test = sum(len(sp["test_gold"]) for sp in splits)
    print(f"\n2. GI lesions, 50 splits x (7 EEE base learners + 6 strategies): {seconds:.2f} s "
          f"({1000 * seconds / 50:.0f} ms per split)")
    print("   mean test accuracy: " + ", ".join(f"{s} {correct[s] / n_test:.4f}"
                                              for s in settings))


def map_part(sizes) -> None:
    import crowd_models as cm
    from crowd_models.models import stacked_gaussian as sg

    print("\n3. build_model + fit_map, flat priors, 7 annotators, 2 features, 3 classes")
    print(f"{'structure':>9} {'items':>7} {'build s':>8} {'MAP 1st s':>10} {'MAP 2nd s':>10} "
          f"{'max|MAP-ML|':>12}")
    for covariance in ("EEE", "VVV"):
        for n in sizes:
            ann = sg.simulate(2, n_items=n, rng=n)
            model, build_s = timed(sg.build_model, ann, covariance=covariance, **sg.FLAT_PRIORS)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit, first_s = timed(cm.fit_map, model)
                _, second_s = timed(cm.fit_map, model)
            base = sg.base_learners_from_posterior(fit, ann)
            ref = sg.fit_base_learners(ann, covariance)
            diff = max(np.abs(getattr(base[a], k) - getattr(ref[a], k)).max()
                       for a in ann.annotators for k in ("proportions", "means", "covariances"))
            print(f"{covariance:>9} {n:>7,} {build_s:8.2f} {first_s:10.2f} {second_s:10.2f} "
                  f"{diff:12.1e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    edda_part([10_000] if args.quick else [10_000, 100_000])
    pipeline_part()
    map_part([1_000] if args.quick else [1_000, 10_000])


if __name__ == "__main__":
    main()
