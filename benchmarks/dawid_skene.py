"""Speed and memory of the Dawid-Skene family: EM, MAP and NUTS.

Measures and prints; it asserts nothing about time, which depends on the
machine. Two parts:

1. Dog breeds (Zhou et al. 2012; 8070 labels, 807 images, 109 workers, 4
   classes): wall time of ``dawid_skene.em``, ``build_model``, ``cm.fit_map``
   (first call, which includes compilation, then a second call) and
   ``cm.sample`` (NUTS, full confusion matrices), bulk ESS per second of the
   confusion cells and prevalence, max |EM - MAP|, and accuracy against gold.
2. Simulated data with K = 5 classes and 10^6 labels (200,000 items, 5 labels
   each from 100 annotators of accuracy 0.5 to 0.9): EM time and iterations,
   MAP time (first and second call), max |EM - MAP|, accuracy against the
   simulated truth, and peak resident memory.

Each case runs in its own spawned process, so that its peak memory and first
compile time are its own.

    .venv/bin/python benchmarks/dawid_skene.py            # full run
    .venv/bin/python benchmarks/dawid_skene.py --quick    # 10^5 labels, short NUTS run
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import time
import warnings

import numpy as np

COMPARED = ("confusion", "prevalence", "item_class_prob")


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10


def max_diff(map_fit, em_fit) -> float:
    return max(float(np.abs(map_fit.posterior[n].values - em_fit[n].values).max())
               for n in COMPARED)


def map_and_em(ann, out: dict) -> None:
    import crowd_models as cm
    from crowd_models.models import dawid_skene as ds

    em_fit, out["em_s"] = timed(ds.em, ann)
    out["em_iterations"] = int(em_fit.attrs["n_iter"])
    out["rss_after_em_mb"] = peak_rss_mb()
    model, out["build_s"] = timed(ds.build_model, ann)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        map_fit, out["map_first_s"] = timed(cm.fit_map, model)
        _, out["map_second_s"] = timed(cm.fit_map, model)
    out["map_polished"] = int(map_fit.attrs["polished"])
    out["max_abs_em_minus_map"] = max_diff(map_fit, em_fit)
    out["accuracy_em"] = cm.report.accuracy(em_fit, ann)
    out["peak_rss_mb"] = peak_rss_mb()
    return model, map_fit


def dog_case(draws: int, queue) -> None:
    import arviz as az

    import crowd_models as cm

    dog = cm.datasets.load_dog()
    out = {"case": "dog", "labels": dog.n_annotations}
    model, map_fit = map_and_em(dog, out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata, out["nuts_s"] = timed(cm.sample, model, draws=draws, tune=draws, chains=4,
                                     random_seed=1, progressbar=False, start=map_fit)
    ess = az.ess(idata.posterior.to_dataset()[["confusion", "prevalence"]])
    ess = np.concatenate([ess[v].values.ravel() for v in ("confusion", "prevalence")])
    out["nuts_draws"] = f"4 x {draws} (+{draws} tune)"
    out["ess_bulk_per_s_min"] = float(ess.min() / out["nuts_s"])
    out["ess_bulk_per_s_median"] = float(np.median(ess) / out["nuts_s"])
    out["accuracy_nuts"] = cm.report.accuracy(idata, dog)
    out["peak_rss_mb"] = peak_rss_mb()
    queue.put(out)


def simulated_case(n_labels: int, queue) -> None:
    from crowd_models.models import dawid_skene as ds

    K, J, per_item = 5, 100, 5
    accuracy = np.linspace(0.5, 0.9, J)
    off = (1 - accuracy) / (K - 1)
    confusion = off[:, None, None] + np.eye(K) * (accuracy - off)[:, None, None]
    (ann, sim_s) = timed(ds.simulate, confusion, n_items=n_labels // per_item,
                         labels_per_item=per_item, rng=np.random.default_rng(0))
    out = {"case": f"simulated K={K}", "labels": ann.n_annotations, "simulate_s": sim_s}
    map_and_em(ann, out)
    queue.put(out)


def run(target, *args) -> dict:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, queue))
    proc.start()
    out = queue.get()
    proc.join()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="10^5 simulated labels and 200 NUTS draws per chain")
    args = parser.parse_args()
    draws = 200 if args.quick else 1000
    n_labels = 10**5 if args.quick else 10**6
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for target, arg in ((dog_case, draws), (simulated_case, n_labels)):
        out = run(target, arg)
        print(f"\n== {out.pop('case')}")
        for key, value in out.items():
            shown = f"{value:.3g}" if isinstance(value, float) else value
            print(f"  {key:24s} {shown}")


if __name__ == "__main__":
    main()
