"""The Bayesian path's speed targets, printed as ratios measured in one run.

Each line compares two things timed in this run on this machine (never an
absolute wall-clock limit):

* warm ``build_model`` + ``fit_map`` on a real data set, after a fit of the same
  family on other (simulated) data in the same process, against
  max(5 x that family's ``em``, 1 s): RTE (two-coin), dog and web search
  (Dawid-Skene), web search (latent ordinal, against 1 s: it has no EM);
* cold: the same in a fresh process with PyTensor's disk cache warm, against
  the warm figure + 3 s;
* NUTS on RTE, 4 chains x 1000 draws after 1000 tuning steps, warm: the minimum
  bulk ESS per second of the whole ``sample`` call (target >= 300), and that
  wall time against the sampler's own (target <= 1.5x);
* Student-t continuous ``fit_map`` against its Gaussian counterpart, both warm, on
  the affect data (target <= 5x);
* 10^6 labels (100,000 items x 10 labels from 200 annotators, two-coin):
  ``fit_map`` against ``em`` (target <= 2x), with the peak resident memory.

    .venv/bin/python benchmarks/fast_path.py           # everything (~4 min on 2 cores)
    .venv/bin/python benchmarks/fast_path.py --quick   # no NUTS and no 10^6 labels
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import warnings

import numpy as np

COLD_SCRIPT = """
import json, sys, time, warnings
import crowd_models as cm
from crowd_models.models import {family}
ann = cm.datasets.{loader}()
import pymc  # the import is not the fit's cost
t0 = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    cm.fit_map({family}.build_model(ann{kwargs}))
print(json.dumps(time.perf_counter() - t0))
"""


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def line(name: str, value: str, bound: str, ok: bool) -> None:
    print(f"TARGET {name:<44} {value:>26}  vs {bound:<26} {verdict(ok)}", flush=True)


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def warm_and_cold(quick: bool) -> None:
    import crowd_models as cm
    from crowd_models.models import dawid_skene, ordinal, two_coin

    rng = np.random.default_rng(0)
    sim_binary = two_coin.simulate(rng.uniform(0.6, 0.9, 12), rng.uniform(0.6, 0.9, 12),
                                   n_items=300, labels_per_item=4, rng=rng)

    def sim_classes(k):
        conf = np.full((15, k, k), 0.3 / (k - 1))
        conf[:, np.arange(k), np.arange(k)] = 0.7
        return dawid_skene.simulate(conf, n_items=300, labels_per_item=4,
                                    rng=np.random.default_rng(k))

    cases = [
        ("two-coin RTE", two_coin, "load_rte", {}, sim_binary),
        ("Dawid-Skene dog", dawid_skene, "load_dog", {}, sim_classes(4)),
        ("Dawid-Skene web search", dawid_skene, "load_web_search", {}, sim_classes(5)),
        ("latent ordinal web search", ordinal, "load_web_search", {"variant": "latent"},
         None),
    ]
    for name, family, loader, kwargs, warm_data in cases:
        ann = getattr(cm.datasets, loader)()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if warm_data is None:  # ordinal levels: warm on a shuffled copy of the data
                keep = np.random.default_rng(1).random(ann.n_annotations) < 0.8
                warm_data = ann.select(keep)
            cm.fit_map(family.build_model(warm_data, **kwargs))
            fit, warm = timed(lambda a=ann, f=family, k=kwargs: cm.fit_map(f.build_model(a, **k)))
            if "variant" in kwargs:
                em_s, bound = None, 1.0
            else:
                em_fit, em_s = timed(family.em, ann)
                bound = max(5 * em_s, 1.0)
        em_text = "no EM" if em_s is None else f"EM {em_s:.2f} s"
        line(f"warm build+fit_map, {name}", f"{warm:.2f} s ({em_text})",
             f"max(5 EM, 1 s) = {bound:.2f} s", warm <= bound)
        if em_s is not None:
            gap = abs(fit.attrs["log_posterior"] - em_fit.attrs["log_posterior"])
            print(f"       log posterior MAP {fit.attrs['log_posterior']:.6f}, EM "
                  f"{em_fit.attrs['log_posterior']:.6f} (|diff| {gap:.1e}); stages "
                  f"{[s['method'] for s in json.loads(fit.attrs['stages'])]}", flush=True)
        if quick:
            continue
        extra = "".join(f", {k}={v!r}" for k, v in kwargs.items())
        script = COLD_SCRIPT.format(family=family.__name__.rsplit(".", 1)[1], loader=loader,
                                    kwargs=extra)
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             check=True)
        cold = json.loads(out.stdout.strip().splitlines()[-1])
        line(f"cold build+fit_map, {name}", f"{cold:.2f} s", f"warm + 3 s = {warm + 3:.2f} s",
             cold <= warm + 3)


def nuts_rte() -> None:
    import arviz as az

    import crowd_models as cm
    from crowd_models.models import two_coin

    model = two_coin.build_model(cm.datasets.load_rte())
    cm.sample(model, draws=20, tune=20, chains=2, progressbar=False, random_seed=0)  # warm
    idata, wall = timed(cm.sample, model, draws=1000, tune=1000, chains=4, random_seed=1,
                        progressbar=False)
    summ = az.summary(idata, var_names=["sensitivity", "specificity", "prevalence"])
    ess = float(summ["ess_bulk"].min())
    sampling = idata.attrs["sampling_seconds"]
    line("NUTS RTE 4x1000: min bulk ESS / wall s", f"{ess / wall:.0f} (ESS {ess:.0f}, "
         f"{wall:.1f} s)", ">= 300", ess / wall >= 300)
    line("NUTS RTE: sample wall / sampling time", f"{wall / sampling:.2f} ({sampling:.1f} s)",
         "<= 1.5", wall / sampling <= 1.5)
    stats = idata.sample_stats
    steps = {name: float(stats[name].mean()) for name in ("tree_depth", "tree_size", "n_steps")
             if name in stats}
    per_step = sampling / (4 * 2000 * steps.get("tree_size", steps.get("n_steps", np.nan)))
    print(f"       r_hat max {float(summ['r_hat'].max()):.3f}; mean tree {steps}; "
          f"{1e6 * per_step * min(4, os.cpu_count() or 1):.0f} us of sampling per leapfrog step "
          f"and chain process; sampler {idata.attrs['nuts_sampler']}", flush=True)


def student_t() -> None:
    import crowd_models as cm
    from crowd_models.models import continuous

    ann = cm.datasets.load_affect("anger")
    times = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for noise in ("gaussian", "student_t"):
            model = continuous.build_model(ann, noise=noise)
            cm.fit_map(model)
            _, times[noise] = timed(cm.fit_map, model)
    ratio = times["student_t"] / times["gaussian"]
    line("Student-t / Gaussian fit_map (warm)", f"{ratio:.1f} ({times['student_t']:.2f} s / "
         f"{times['gaussian']:.2f} s)", "<= 5", ratio <= 5)


def million_labels() -> None:
    import crowd_models as cm
    from crowd_models.models import two_coin

    rng = np.random.default_rng(6)
    sens, spec = rng.uniform(0.55, 0.95, 200), rng.uniform(0.55, 0.95, 200)
    ann = two_coin.simulate(sens, spec, n_items=100_000, labels_per_item=10, prevalence=0.3,
                            rng=rng)
    small = two_coin.simulate(sens[:20], spec[:20], n_items=200, labels_per_item=5, rng=rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm.fit_map(two_coin.build_model(small))  # warm
        em_fit, em_s = timed(two_coin.em, ann)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fit, map_s = timed(lambda: cm.fit_map(two_coin.build_model(ann)))
    gap = float(np.max(np.abs(fit.posterior["sensitivity"].values - em_fit["sensitivity"].values)))
    line("10^6 labels: build+fit_map / em", f"{map_s / em_s:.2f} ({map_s:.1f} s / {em_s:.1f} s)",
         "<= 2", map_s / em_s <= 2)
    print(f"       max |MAP - EM| sensitivity {gap:.1e}; EM iterations {em_fit.attrs['n_iter']}; "
          f"warnings {[str(w.message)[:60] for w in caught]}; peak RSS {peak_rss_gb():.2f} GiB",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip NUTS and 10^6 labels")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs", flush=True)
    warm_and_cold(args.quick)
    student_t()
    if not args.quick:
        nuts_rte()
        million_labels()


if __name__ == "__main__":
    main()
