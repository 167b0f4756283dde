"""What ``coef_precision="auto"`` costs on an image-sized crowd (issue 44).

Measures and prints; it asserts nothing. A Dawid-Skene crowd with a softmax
classifier of embedding-shaped features (20 latent factors seen through d
noisy loadings, the truth a softmax of the factors), K classes, 50
annotators of accuracy U(0.5, 0.9) with the errors spread evenly, 5 labels
an item. Each size runs in its own process: ``dawid_skene.em`` at precision
1 and at "auto" (MacKay's fixed point, a whole EM a round), with the seconds
of each, the rounds, the seconds inside the evidence's curvature
(``_evidence.averaged_curvature`` and ``_evidence.effective_parameters``)
and the process's peak resident memory after each fit. Printed as ratios
within one run: "auto" over precision 1, and the curvature's share of
"auto".

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/evidence_cost.py           # ~20 min
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/evidence_cost.py --quick   # ~2 min
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import warnings

import numpy as np

SIZES = ((2000, 128, 10), (5000, 256, 10), (10000, 512, 10))


def crowd(n: int, d: int, K: int, seed: int = 0):
    from crowd_models.models import dawid_skene

    rng = np.random.default_rng([n, d, K, seed])
    factors = rng.normal(size=(n, 20))
    X = factors @ rng.normal(size=(20, d)) / np.sqrt(20) + 0.5 * rng.normal(size=(n, d))
    logits = factors @ rng.normal(size=(20, K))
    prob = np.exp(logits - logits.max(axis=1, keepdims=True))
    prob /= prob.sum(axis=1, keepdims=True)
    truth = (prob.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    accuracy = rng.uniform(0.5, 0.9, 50)[:, None, None]
    confusion = np.where(np.eye(K, dtype=bool), accuracy, (1 - accuracy) / (K - 1))
    return dawid_skene.simulate(confusion, true_labels=truth, labels_per_item=5,
                                rng=rng).with_features(X)


def one_size(n: int, d: int, K: int) -> dict:
    """The figures of one size, in this process."""
    from crowd_models.models import _evidence, dawid_skene

    warnings.simplefilter("ignore", UserWarning)
    ann = crowd(n, d, K)
    inside = {"seconds": 0.0}
    for name in ("averaged_curvature", "effective_parameters"):
        built = getattr(_evidence, name)

        def timed(*args, _built=built, **kwargs):
            t0 = time.perf_counter()
            try:
                return _built(*args, **kwargs)
            finally:
                inside["seconds"] += time.perf_counter() - t0

        setattr(_evidence, name, timed)
    out = {}
    for label, precision in (("precision 1", 1.0), ("auto", "auto")):
        t0 = time.perf_counter()
        fit = dawid_skene.em(ann, coef_precision=precision)
        out[f"{label} s"] = time.perf_counter() - t0
        out[f"{label} peak MB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
    out["rounds"] = int(fit.attrs["evidence_rounds"])
    out["alpha"] = float(fit.attrs["coef_precision"])
    out["curvature s"] = inside["seconds"]
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the two smaller sizes")
    parser.add_argument("--one", type=int, nargs=3, metavar=("N", "D", "K"),
                        help=argparse.SUPPRESS)  # a size in this process (the children)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one_size(*args.one)))
        return
    print(f"{'items':>6} {'d':>4} {'K':>3} {'@1 s':>7} {'auto s':>7} {'auto/@1':>8} "
          f"{'rounds':>6} {'alpha':>7} {'curv s':>7} {'curv share':>10} {'@1 MB':>7} "
          f"{'auto MB':>8}")
    for n, d, K in SIZES[:2] if args.quick else SIZES:
        child = subprocess.run([sys.executable, __file__, "--one", str(n), str(d), str(K)],
                               capture_output=True, text=True, check=True)
        r = json.loads(child.stdout.strip().splitlines()[-1])
        print(f"{n:>6} {d:>4} {K:>3} {r['precision 1 s']:>7.1f} {r['auto s']:>7.1f} "
              f"{r['auto s'] / r['precision 1 s']:>8.2f} {r['rounds']:>6} {r['alpha']:>7.3g} "
              f"{r['curvature s']:>7.1f} {r['curvature s'] / r['auto s']:>10.2f} "
              f"{r['precision 1 peak MB']:>7.0f} {r['auto peak MB']:>8.0f}", flush=True)


if __name__ == "__main__":
    main()
