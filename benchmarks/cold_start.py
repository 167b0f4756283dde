"""First calls on a fresh machine (#41): each case runs in a new process whose
PyTensor compile directory (``base_compiledir``, which holds PyTensor's numba
cache) and numba's own cache (``NUMBA_CACHE_DIR``) are new empty folders, so
that nothing compiled before is found. Each case runs twice, ``before``
(``CROWD_MODELS_QUICK_FITS=0``: every fit compiles its functions, as before the
quick first fits) and ``after`` (the default: a structure's first fit in a
process runs on PyTensor's Python backend while its compiled code is not on
disk), and the table prints after / before from this one run (never an
absolute limit: the machine's load moves every figure).

* ``fit_map``: ``import crowd_models``, ``two_coin.build_model`` on RTE, the first
  ``cm.fit_map`` (the issue's target: <= 10 s), then a second fit of the same
  structure in the process (another model object), which in ``after`` is the
  one that compiles;
* ``nuts``: the first ``cm.sample`` on RTE (4 chains x 1000 draws after 1000
  tuning steps, nutpie; target <= 25 s), and its stages: the MAP start,
  nutpie's compile, its sampling and the draws' point outputs;
* ``cli``: ``crowd-models fit rte.csv`` (two-coin, MAP with Laplace draws) as a
  whole process (target <= 15 s).

After each run the folders are counted, and so is ``~/.pytensor``: files that
appear there during a run (other jobs on a shared machine can add some) would
mean the run did not use the empty folders.

    .venv/bin/python benchmarks/cold_start.py                 # all cases, once each
    .venv/bin/python benchmarks/cold_start.py --only fit_map  # one case
    .venv/bin/python benchmarks/cold_start.py --reps 2        # each case twice
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIT_SCRIPT = """
import json, time, warnings
warnings.simplefilter("ignore")
t0 = time.perf_counter()
import crowd_models as cm
from crowd_models.models import two_coin
t1 = time.perf_counter()
ann = cm.datasets.load_rte()
model = two_coin.build_model(ann)
t2 = time.perf_counter()
fit = cm.fit_map(model)
t3 = time.perf_counter()
again = cm.fit_map(two_coin.build_model(ann))
t4 = time.perf_counter()
third = cm.fit_map(two_coin.build_model(ann))
t5 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "build": t2 - t1, "first fit_map": t3 - t2,
                  "second fit_map": t4 - t3, "third fit_map": t5 - t4,
                  "log_posterior": fit.attrs["log_posterior"],
                  "second log_posterior": again.attrs["log_posterior"]}))
"""

NUTS_SCRIPT = """
import json, time, warnings
warnings.simplefilter("ignore")
t0 = time.perf_counter()
import nutpie
import crowd_models as cm
from crowd_models import inference
from crowd_models.models import two_coin
t1 = time.perf_counter()
stages = {}
def timed(owner, name, label):
    call = getattr(owner, name)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            stages[label] = stages.get(label, 0.0) + time.perf_counter() - start
    setattr(owner, name, wrapper)
for owner, name, label in ((inference, "_nuts_start", "MAP start"),
                           (nutpie, "compile_pymc_model", "nutpie compile"),
                           (nutpie, "sample", "nutpie sample"),
                           (inference, "point_outputs", "point outputs")):
    timed(owner, name, label)
model = two_coin.build_model(cm.datasets.load_rte())
t2 = time.perf_counter()
idata = cm.sample(model, draws=1000, tune=1000, chains=4, random_seed=1, progressbar=False)
t3 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "build": t2 - t1, "first sample": t3 - t2,
                  "sampling": idata.attrs["sampling_seconds"], **stages,
                  "sensitivity mean": float(idata.posterior["sensitivity"].mean())}))
"""


def count_files(folder: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(folder)) if folder.exists() else 0


def fresh_env(folder: Path, setting: str) -> dict:
    env = dict(os.environ)
    flags = [f for f in env.get("PYTENSOR_FLAGS", "").split(",")
             if f and not f.startswith("base_compiledir=")]
    env["PYTENSOR_FLAGS"] = ",".join([*flags, f"base_compiledir={folder}"])
    env["NUMBA_CACHE_DIR"] = str(folder / "numba_cache")
    if setting == "before":
        env["CROWD_MODELS_QUICK_FITS"] = "0"
    else:
        env.pop("CROWD_MODELS_QUICK_FITS", None)
    return env


def run_case(case: str, setting: str, csv: Path) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="cold_start_"))
    shared = Path.home() / ".pytensor"
    shared_before = count_files(shared)
    env = fresh_env(folder, setting)
    t0 = time.perf_counter()
    if case == "cli":
        out = folder / "report"
        proc = subprocess.run([sys.executable, "-m", "crowd_models.cli", "fit", str(csv),
                               "--out", str(out), "--force"], env=env, capture_output=True,
                              text=True)
        result = {"process": time.perf_counter() - t0}
    else:
        script = FIT_SCRIPT if case == "fit_map" else NUTS_SCRIPT
        proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                              text=True)
        result = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else {}
        result["process"] = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{case} ({setting}) failed:\n{proc.stderr[-3000:]}")
    result["pytensor numba cache files"] = count_files(folder / "numba")
    result["NUMBA_CACHE_DIR files"] = count_files(folder / "numba_cache")
    result["new files in ~/.pytensor"] = count_files(shared) - shared_before
    shutil.rmtree(folder, ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["fit_map", "nuts", "cli"], action="append",
                        help="run only this case (repeatable)")
    parser.add_argument("--reps", type=int, default=1, help="runs of each case and setting")
    args = parser.parse_args()
    cases = args.only or ["fit_map", "nuts", "cli"]
    with tempfile.TemporaryDirectory() as data_dir:
        csv = Path(data_dir) / "rte.csv"
        if "cli" in cases:
            import crowd_models as cm

            cm.datasets.load_rte().to_frame().to_csv(csv, index=False)
        print(f"load average at start: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")
        rows = {}
        for case in cases:
            for rep in range(args.reps):
                for setting in ("before", "after"):
                    result = run_case(case, setting, csv)
                    rows.setdefault((case, setting), []).append(result)
                    print(f"{case:8s} {setting:6s} rep {rep + 1}: " + ", ".join(
                        f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                        for k, v in result.items()), flush=True)
        print(f"load average at end: {os.getloadavg()[0]:.2f}")
        main_figure = {"fit_map": "first fit_map", "nuts": "first sample", "cli": "process"}
        print("\nafter / before (medians of this run):")
        for case in cases:
            figure = main_figure[case]
            before = sorted(r[figure] for r in rows[(case, "before")])
            after = sorted(r[figure] for r in rows[(case, "after")])
            b, a = before[len(before) // 2], after[len(after) // 2]
            print(f"  {case:8s} {figure}: {a:.1f} s / {b:.1f} s = {a / b:.2f}")


if __name__ == "__main__":
    main()
