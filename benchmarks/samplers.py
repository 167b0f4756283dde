"""NUTS implementations side by side: nutpie (the default), PyMC's and NumPyro.

For each data set (RTE two-coin, dog and web-search Dawid-Skene) and each
installed sampler, ``cm.sample`` with 4 chains x ``--draws`` draws after as many
tuning steps, twice (the second call is the warm one reported); prints the
whole call's wall time, the sampler's own time, the minimum bulk ESS over the
annotator parameters and prevalence, ESS per second of the whole call, the
largest r-hat and the divergences. Samplers that are not installed are
skipped with a note (NumPyro: the ``[jax]`` extra).

    .venv/bin/python benchmarks/samplers.py                 # 1000 draws
    .venv/bin/python benchmarks/samplers.py --draws 300     # quicker
    .venv/bin/python benchmarks/samplers.py --cases "web Dawid-Skene" --samplers nutpie,numpyro
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time
import warnings

import arviz as az

import crowd_models as cm
from crowd_models.inference import SAMPLERS
from crowd_models.models import dawid_skene, two_coin

CASES = {
    "RTE two-coin": (two_coin, "load_rte", ["sensitivity", "specificity", "prevalence"]),
    "dog Dawid-Skene": (dawid_skene, "load_dog", ["confusion", "prevalence"]),
    "web Dawid-Skene": (dawid_skene, "load_web_search", ["confusion", "prevalence"]),
}


def installed(sampler: str) -> bool:
    return sampler == "pymc" or importlib.util.find_spec(sampler) is not None


def run(model, sampler: str, draws: int, var_names) -> str:
    kwargs = dict(draws=draws, tune=draws, chains=4, random_seed=1, progressbar=False,
                  nuts_sampler=sampler)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm.sample(model, **{**kwargs, "draws": 20, "tune": 20})  # warm
        t0 = time.perf_counter()
        idata = cm.sample(model, **kwargs)
        wall = time.perf_counter() - t0
    summ = az.summary(idata, var_names=var_names)
    ess = float(summ["ess_bulk"].min())
    div = int(idata.sample_stats["diverging"].sum()) if "diverging" in idata.sample_stats else -1
    return (f"wall {wall:6.1f} s  sampling {idata.attrs['sampling_seconds']:6.1f} s  "
            f"min bulk ESS {ess:6.0f}  ESS/s {ess / wall:6.1f}  r_hat max "
            f"{float(summ['r_hat'].max()):.3f}  divergences {div}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    parser.add_argument("--samplers", default=",".join(SAMPLERS),
                        help="comma-separated samplers (default: all of inference.SAMPLERS)")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs", flush=True)
    for name in args.cases.split(","):
        family, loader, var_names = CASES[name]
        model = family.build_model(getattr(cm.datasets, loader)())
        for sampler in args.samplers.split(","):
            if not installed(sampler):
                print(f"{name:<18} {sampler:<8} not installed", flush=True)
                continue
            print(f"{name:<18} {sampler:<8} {run(model, sampler, args.draws, var_names)}",
                  flush=True)


if __name__ == "__main__":
    main()
