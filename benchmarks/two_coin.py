"""Speed and memory of the two-coin model: EM, the PyMC model, MAP and NUTS.

Measures and prints; it asserts nothing about time, which depends on the
machine. Two parts:

1. RTE (Snow et al. 2008; 8000 labels, 800 items, 164 annotators): wall time of
   ``two_coin.em``, of ``two_coin.build_model``, of ``cm.fit_map`` (the first
   call includes PyTensor's compilation; a second call on the same model is
   timed on its own) and of ``cm.sample`` (NUTS), the bulk ESS per second of
   sensitivity, specificity and prevalence, and each fit's accuracy against
   gold.
2. Data from ``two_coin.simulate``: the five radiologists of Raykar et al.
   (2009) scaled to 10^5 and 10^6 labels (every annotator labels every item),
   and a many-annotator design (1000 annotators cycling through the same five
   profiles, 5 labels per item), each without features and with 10. For each:
   EM time and iterations, model build, MAP (first and second call),
   max |EM - MAP| over sensitivity and specificity, memory, and where the
   MAP's time goes (compilation against evaluations of logp and its gradient).

Every case runs in a fresh process (spawn), so that the peak resident memory
(``ru_maxrss``) and the first-call compile time belong to that case alone. The
data are simulated in another process still: ``simulate`` draws an
(item, annotator) matrix of random keys for the many-annotator design, whose
size would otherwise set the peak.

    .venv/bin/python benchmarks/two_coin.py           # full run (~17 min on 2 shared cores)
    .venv/bin/python benchmarks/two_coin.py --quick   # 10^4 and 10^5 labels, short NUTS run
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import multiprocessing as mp
import os
import platform
import queue
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import tracemalloc
import warnings
from dataclasses import dataclass

import arviz as az
import numpy as np
import pandas as pd
import pymc as pm
import pytensor
import scipy
from pymc.blocking import DictToArrayBijection

import crowd_models as cm
from crowd_models import report
from crowd_models._fits import posterior_of
from crowd_models.models import two_coin

SENSITIVITY = np.array([0.90, 0.80, 0.57, 0.60, 0.55])
SPECIFICITY = np.array([0.95, 0.85, 0.62, 0.65, 0.58])
COMPARED = ("sensitivity", "specificity")
NUTS_VARS = ("sensitivity", "specificity", "prevalence")
TRACED_EM_ITERATIONS = 5
"""EM iterations run under tracemalloc: every iteration allocates the same
temporaries, so a short run has the working set of a full one at a fraction of
the time."""
REPEATS = 5
"""Evaluations of logp (and its gradient) timed in the breakdown; the median is kept."""


# ------------------------------------------------------------------ helpers
def timed(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` and its wall time in seconds."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def load() -> float:
    """The 1-minute load average: other work on the machine slows every timing here."""
    return os.getloadavg()[0]


def median_seconds(fn, repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10  # bytes on macOS, KiB else


def data_mb(ann: cm.Annotations) -> float:
    """MiB held by the long table's arrays and the features."""
    arrays = [ann.item_idx, ann.annotator_idx, ann.labels]
    if ann.features is not None:
        arrays.append(ann.features)
    return sum(a.nbytes for a in arrays) / 2**20


def max_abs_diff(fit_a, fit_b, names=COMPARED) -> float:
    """Largest absolute difference between two one-draw fits over ``names``."""
    post_a, post_b = posterior_of(fit_a), posterior_of(fit_b)
    return max(
        float(abs(post_a[n].squeeze(("chain", "draw"))
                  - post_b[n].squeeze(("chain", "draw"))).max())
        for n in names
    )


def fit_map(model):
    """``cm.fit_map`` timed (wall and CPU seconds of this process), with its warnings
    kept (the optimiser's status is reported instead)."""
    cpu = time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit, seconds = timed(cm.fit_map, model)
    cpu = time.process_time() - cpu
    return fit, seconds, cpu, [str(w.message).splitlines()[0] for w in caught]


def optimizer_facts(fit) -> dict:
    """L-BFGS-B's own report (the first stage) and, apart, the Newton polish's."""
    stages = json.loads(fit.attrs["stages"])
    lbfgs = stages[0]
    facts = {
        "map_nit": lbfgs["iterations"],
        "map_nfev": lbfgs["evaluations"],
        "map_success": lbfgs["success"],
        "map_message": lbfgs["message"],
        "map_polish": "not run",
    }
    if len(stages) > 1:
        polish = stages[1]
        facts["map_polish"] = (f"{polish['iterations']} {polish['method']} iterations, largest "
                               f"gradient {lbfgs['max_gradient']:.1e} -> "
                               f"{polish['max_gradient']:.1e}, "
                               f"{'kept' if fit.attrs['polished'] else 'discarded'}")
    return facts


def em_traced_peak_mb(ann) -> float:
    """tracemalloc peak of a short EM run (numpy reports its buffers to tracemalloc)."""
    gc.collect()
    tracemalloc.start()
    try:
        two_coin.em(ann, max_iter=TRACED_EM_ITERATIONS)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak / 2**20


def say(tag: str, message: str) -> None:
    print(f"[{tag}] {message}", flush=True)


# ------------------------------------------------------ process isolation
@contextlib.contextmanager
def compile_cache(cold: bool):
    """With cold=True, processes spawned inside get an empty PyTensor compile directory.

    PyTensor's numba backend caches compiled functions on disk, keyed by the graph,
    and the model's index arrays are constants of its graph: new data always
    compile afresh, while a dataset compiled before (RTE, or a rerun with the same
    seed) loads from the cache. Array constants over 10^6 bytes (int64 index arrays
    of more than 125,000 labels) make a graph uncacheable, so that every call
    compiles again. A fresh directory makes every first call a cold one.
    """
    if not cold:
        yield
        return
    old = os.environ.get("PYTENSOR_FLAGS")
    tmp = tempfile.mkdtemp(prefix="two_coin_bench_pytensor_")
    os.environ["PYTENSOR_FLAGS"] = ",".join(filter(None, [old, f"base_compiledir={tmp}"]))
    try:
        yield
    finally:
        if old is None:
            del os.environ["PYTENSOR_FLAGS"]
        else:
            os.environ["PYTENSOR_FLAGS"] = old
        shutil.rmtree(tmp, ignore_errors=True)


def numba_cache_entries() -> int:
    """Files in PyTensor's numba cache (0 when cold)."""
    path = os.path.join(pytensor.config.base_compiledir, "numba")
    return len(os.listdir(path)) if os.path.isdir(path) else 0


def _child(results, fn, args) -> None:
    try:
        results.put(("ok", fn(*args)))
    except BaseException:  # reported to the parent, which carries on with the next case
        results.put(("error", traceback.format_exc()))


def run_isolated(isolate: bool, fn, *args):
    """``fn(*args)`` in a fresh spawned process (or here, with isolate=False)."""
    if not isolate:
        return fn(*args)
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    proc = ctx.Process(target=_child, args=(results, fn, args))
    proc.start()
    while True:
        try:
            status, payload = results.get(timeout=2)
            break
        except queue.Empty:
            if not proc.is_alive():
                try:
                    status, payload = results.get(timeout=5)
                except queue.Empty:
                    status, payload = "error", f"worker died (exit code {proc.exitcode})"
                break
    proc.join()
    if status == "error":
        raise RuntimeError(payload)
    return payload


# --------------------------------------------------------------------- RTE
def bench_rte(chains: int, draws: int, tune: int, seed: int) -> dict:
    stages = []

    def stage(name, seconds, accuracy=np.nan, note=""):
        stages.append({"stage": name, "seconds": seconds, "accuracy": accuracy, "note": note})
        say("rte", f"{name}: {seconds:.3f} s {note}")

    ann, seconds = timed(cm.datasets.load_rte)
    stage("load_rte", seconds, note=f"{ann.n_annotations} labels, {ann.n_items} items, "
                                    f"{ann.n_annotators} annotators")
    rss_start = peak_rss_mb()

    mv, seconds = timed(cm.majority_vote, ann)
    stage("majority vote", seconds, report.accuracy(mv, ann))

    em_fit, seconds = timed(two_coin.em, ann)
    stage("two_coin.em", seconds, report.accuracy(em_fit, ann),
          f"{em_fit.attrs['n_iter']} iterations, converged={bool(em_fit.attrs['converged'])}")

    model, seconds = timed(two_coin.build_model, ann)
    stage("two_coin.build_model", seconds)

    for call in ("first", "second"):
        map_fit, seconds, cpu, caught = fit_map(model)
        facts = optimizer_facts(map_fit)
        note = (f"CPU {cpu:.2f} s, nit={facts['map_nit']} nfev={facts['map_nfev']} "
                f"success={facts['map_success']} max|EM-MAP|={max_abs_diff(em_fit, map_fit):.1e}")
        if call == "first":
            note += "; includes compilation"
        if caught:
            note += f"; warned: {caught[0]}"
        stage(f"cm.fit_map ({call} call)", seconds, report.accuracy(map_fit, ann), note)

    nuts = {}
    if chains > 0:
        cores = min(chains, os.cpu_count() or 1)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            idata, total = timed(cm.sample, model, chains=chains, draws=draws, tune=tune,
                                 random_seed=seed, cores=cores, progressbar=False)
        post = idata.posterior.to_dataset()
        attrs = post.attrs
        sampling = float(attrs["sampling_time"])
        ess = az.ess(post, var_names=list(NUTS_VARS), method="bulk")
        ess = np.concatenate([np.ravel(ess[v].values) for v in NUTS_VARS])
        rhat = az.rhat(post, var_names=list(NUTS_VARS))
        rhat = np.concatenate([np.ravel(rhat[v].values) for v in NUTS_VARS])
        stats = idata.sample_stats.to_dataset()
        steps = float(stats["n_steps"].sum())
        step_seconds = float(stats["perf_counter_diff"].sum())
        sampler = (f"{attrs.get('inference_library', '?')} "
                   f"{attrs.get('inference_library_version', '')} NUTS "
                   f"({chains} chains x {draws} draws after {tune} tune, {cores} cores)")
        stage("cm.sample (total)", total, report.accuracy(idata, ann),
              "fit_map start + compile + tune/draws + log-likelihood")
        stage("  of which tune+draws", sampling, note="the sampler's own sampling_time")
        nuts = {
            "sampler": sampler,
            "scalars": len(ess),
            "ess_bulk_min": float(ess.min()),
            "ess_bulk_median": float(np.median(ess)),
            "ess_per_s_min": float(ess.min()) / sampling,
            "ess_per_s_median": float(np.median(ess)) / sampling,
            "ess_per_s_min_total": float(ess.min()) / total,
            "ess_per_s_median_total": float(np.median(ess)) / total,
            "rhat_max": float(np.nanmax(rhat)),
            "divergences": int(stats["diverging"].sum()),
            "mean_tree_depth": float(stats["tree_depth"].mean()),
            "mean_leapfrog_steps": float(stats["n_steps"].mean()),
            "us_per_leapfrog": 1e6 * step_seconds / steps,
            "draw_phase_s_per_chain": step_seconds / chains,
            "label_switched_chains": list(idata.attrs.get("label_switched_chains", [])),
            "max_abs_nuts_mean_minus_em": max(
                float(abs(post[n].mean(("chain", "draw"))
                          - posterior_of(em_fit)[n].squeeze(("chain", "draw"))).max())
                for n in COMPARED),
            "warnings": sorted({str(w.message).splitlines()[0][:100] for w in caught}),
        }
        say("rte", f"NUTS: {nuts}")
    return {"stages": stages, "nuts": nuts, "rss_start_MB": rss_start,
            "rss_peak_MB": peak_rss_mb(), "load": load()}


# --------------------------------------------------------------- simulated
@dataclass(frozen=True)
class Case:
    name: str
    n_items: int
    n_annotators: int
    labels_per_item: int | None  # None: every annotator labels every item
    n_features: int
    seed: int


def size_name(n: int) -> str:
    exponent = round(math.log10(n))
    return f"1e{exponent}" if 10**exponent == n else str(n)


def make_cases(sizes, many: int, seed: int) -> list[Case]:
    cases = []
    for size in sizes:
        for n_annotators, per_item in ((len(SENSITIVITY), None), (many, 5)):
            n_items = size // (n_annotators if per_item is None else per_item)
            for n_features in (0, 10):
                name = f"{size_name(size)} J{n_annotators}" + (
                    f" X{n_features}" if n_features else "")
                cases.append(Case(name, n_items, n_annotators, per_item, n_features,
                                  seed + len(cases)))
    return cases


def simulate_case(case: Case):
    """The case's annotations, simulate's wall time and this process's peak RSS."""
    sens = np.resize(SENSITIVITY, case.n_annotators)  # the five profiles, cycled
    spec = np.resize(SPECIFICITY, case.n_annotators)
    ann, seconds = timed(two_coin.simulate, sens, spec, n_items=case.n_items,
                         n_features=case.n_features, labels_per_item=case.labels_per_item,
                         rng=case.seed)
    return ann, seconds, peak_rss_mb()


def map_breakdown(model, nfev: int, n_labels: int) -> dict:
    """Compile and evaluation times of logp and of logp+gradient (what L-BFGS calls)."""
    out = {}
    point = model.initial_point()
    logp, out["logp_compile_s"] = timed(model.compile_logp, jacobian=False)
    _, out["logp_first_call_s"] = timed(logp, point)
    out["logp_eval_ms"] = 1e3 * median_seconds(lambda: logp(point))
    value_grad, out["grad_compile_s"] = timed(model.logp_dlogp_function, ravel_inputs=True)
    value_grad.set_extra_values({})
    x = DictToArrayBijection.map({v.name: point[v.name] for v in model.value_vars}).data
    _, out["grad_first_call_s"] = timed(value_grad, x)
    out["grad_eval_ms"] = 1e3 * median_seconds(lambda: value_grad(x))
    out["grad_ns_per_label"] = 1e6 * out["grad_eval_ms"] / n_labels
    out["nfev_x_grad_eval_s"] = nfev * out["grad_eval_ms"] / 1e3
    return out


def bench_case(case: Case, ann, breakdown: bool) -> dict:
    tag = case.name
    wall, cpu = time.perf_counter(), time.process_time()
    r = {"labels": ann.n_annotations, "items": ann.n_items, "annotators": ann.n_annotators,
         "features": ann.n_features, "data_MB": data_mb(ann), "rss_start_MB": peak_rss_mb(),
         "load_start": load()}

    _, r["majority_vote_s"] = timed(cm.majority_vote, ann)
    em_fit, r["em_s"] = timed(two_coin.em, ann)
    r["em_iter"] = int(em_fit.attrs["n_iter"])
    r["em_converged"] = bool(em_fit.attrs["converged"])
    r["em_ms_per_iter"] = 1e3 * r["em_s"] / r["em_iter"]
    r["em_acc"] = report.accuracy(em_fit, ann)
    r["rss_after_em_MB"] = peak_rss_mb()
    say(tag, f"EM {r['em_s']:.2f} s, {r['em_iter']} iterations")
    r["em_traced_MB"] = em_traced_peak_mb(ann)
    r["em_traced_B_per_label"] = r["em_traced_MB"] * 2**20 / r["labels"]

    model, r["build_s"] = timed(two_coin.build_model, ann)
    r["rss_after_build_MB"] = peak_rss_mb()
    say(tag, f"build_model {r['build_s']:.2f} s")

    map_fit, r["map1_s"], r["map1_cpu_s"], caught = fit_map(model)
    r.update(optimizer_facts(map_fit))
    r["map_warned"] = bool(caught)
    say(tag, f"fit_map (first) {r['map1_s']:.2f} s, L-BFGS nfev={r['map_nfev']}, "
             f"success={r['map_success']} {r['map_message']}; polish: {r['map_polish']}")
    _, r["map2_s"], r["map2_cpu_s"], _ = fit_map(model)
    say(tag, f"fit_map (second) {r['map2_s']:.2f} s")
    r["max_abs_em_map"] = max_abs_diff(em_fit, map_fit)
    r["map_acc"] = report.accuracy(map_fit, ann)
    r["rss_peak_MB"] = peak_rss_mb()
    if breakdown:
        r.update(map_breakdown(model, r["map_nfev"], r["labels"]))
        say(tag, "breakdown " + ", ".join(
            f"{k}={v:.4g}" for k, v in r.items() if k.startswith(("logp_", "grad_"))))
    r["load_end"] = load()
    r["cpu_per_wall"] = (time.process_time() - cpu) / (time.perf_counter() - wall)
    return r


# ------------------------------------------------------------------ output
SIM_ROWS = {
    # key: (row label, format)
    "labels": ("labels", "{:,.0f}"),
    "items": ("items", "{:,.0f}"),
    "annotators": ("annotators", "{:,.0f}"),
    "features": ("features", "{:.0f}"),
    "simulate_s": ("simulate [s] (own process)", "{:.1f}"),
    "simulate_rss_MB": ("simulate peak RSS [MiB]", "{:.0f}"),
    "majority_vote_s": ("majority vote [s]", "{:.3f}"),
    "em_s": ("EM [s]", "{:.2f}"),
    "em_iter": ("EM iterations", "{:.0f}"),
    "em_converged": ("EM converged", "{}"),
    "em_ms_per_iter": ("EM ms / iteration", "{:.1f}"),
    "build_s": ("build_model [s]", "{:.2f}"),
    "map1_s": ("fit_map 1st call [s]", "{:.2f}"),
    "map1_cpu_s": ("  its CPU time [s]  (1st)", "{:.2f}"),
    "map2_s": ("fit_map 2nd call [s]", "{:.2f}"),
    "map2_cpu_s": ("  its CPU time [s]  (2nd)", "{:.2f}"),
    "map_nit": ("  L-BFGS iterations", "{:.0f}"),
    "map_nfev": ("  logp+grad evaluations", "{:.0f}"),
    "map_success": ("  L-BFGS success", "{}"),
    "map_polish": ("  Newton polish", "{}"),
    "max_abs_em_map": ("max |EM - MAP| sens/spec", "{:.1e}"),
    "em_acc": ("accuracy EM (vs truth)", "{:.4f}"),
    "map_acc": ("accuracy MAP (vs truth)", "{:.4f}"),
    "data_MB": ("long table + features [MiB]", "{:.1f}"),
    "em_traced_MB": (f"EM tracemalloc peak [MiB] ({TRACED_EM_ITERATIONS} it)", "{:.0f}"),
    "em_traced_B_per_label": ("  bytes / label", "{:.0f}"),
    "rss_start_MB": ("RSS peak: imports + data [MiB]", "{:.0f}"),
    "rss_after_em_MB": ("RSS peak: after EM [MiB]", "{:.0f}"),
    "rss_after_build_MB": ("RSS peak: after build [MiB]", "{:.0f}"),
    "rss_peak_MB": ("RSS peak: after 2 MAPs [MiB]", "{:.0f}"),
    "logp_compile_s": ("compile_logp [s]", "{:.2f}"),
    "logp_first_call_s": ("  first logp call [s]", "{:.2f}"),
    "logp_eval_ms": ("  logp eval [ms]", "{:.1f}"),
    "grad_compile_s": ("logp_dlogp_function [s]", "{:.2f}"),
    "grad_first_call_s": ("  first logp+grad call [s]", "{:.2f}"),
    "grad_eval_ms": ("  logp+grad eval [ms]", "{:.1f}"),
    "grad_ns_per_label": ("  logp+grad ns / label", "{:.0f}"),
    "nfev_x_grad_eval_s": ("  nfev x logp+grad eval [s]", "{:.2f}"),
    "load_start": ("load average: case start", "{:.1f}"),
    "load_end": ("load average: case end", "{:.1f}"),
    "cpu_per_wall": ("CPU / wall time of the case", "{:.2f}"),
    "error": ("error", "{}"),
}


def simulated_table(rows: dict[str, dict]) -> pd.DataFrame:
    """Metrics as rows, cases as columns, values formatted."""
    keys = [k for k in SIM_ROWS if any(k in r for r in rows.values())]
    table = {}
    for case, r in rows.items():
        table[case] = [
            SIM_ROWS[k][1].format(r[k]) if k in r and r[k] is not None else "" for k in keys
        ]
    return pd.DataFrame(table, index=[SIM_ROWS[k][0] for k in keys])


def code_version() -> str:
    """The git commit of the checkout crowd_models is imported from, and whether
    crowd_models/ differs from it (printed at the start and the end of the run)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(cm.__file__)))
    try:
        def git(*args):
            return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True,
                                  check=True).stdout.strip()
        head = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--", "crowd_models")
    except (OSError, subprocess.CalledProcessError):
        return "not a git checkout"
    return head + (" with uncommitted changes in crowd_models/" if dirty else "")


def machine_facts() -> str:
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    linker = type(pytensor.compile.mode.get_default_mode().linker).__name__
    return (
        f"python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, "
        f"pandas {pd.__version__}, pymc {pm.__version__}, pytensor {pytensor.__version__} "
        f"({linker}), arviz {az.__version__}, crowd_models {cm.__version__} at "
        f"{code_version()}; "
        f"os.cpu_count()={os.cpu_count()}, RAM {ram:.0f} GiB, {platform.platform()}; "
        f"load average {load():.1f}"
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="10^4 and 10^5 labels, 200 annotators in the many-annotator "
                             "design, 2 NUTS chains x 300 draws")
    parser.add_argument("--seed", type=int, default=2009)
    parser.add_argument("--chains", type=int, default=None, help="NUTS chains (0: no NUTS)")
    parser.add_argument("--draws", type=int, default=None)
    parser.add_argument("--tune", type=int, default=None)
    parser.add_argument("--many", type=int, default=None,
                        help="annotators in the many-annotator design (default 1000)")
    parser.add_argument("--skip-rte", action="store_true")
    parser.add_argument("--skip-simulated", action="store_true")
    parser.add_argument("--only", default=None,
                        help="run only the simulated cases whose name contains this text")
    parser.add_argument("--no-breakdown", action="store_true",
                        help="skip timing compile_logp / logp_dlogp_function per case")
    parser.add_argument("--no-isolate", action="store_true",
                        help="run everything in this process (RSS peaks then accumulate)")
    parser.add_argument("--cold-cache", action="store_true",
                        help="give the RTE run and every case an empty PyTensor compile "
                             "directory, so that first calls compile everything")
    args = parser.parse_args(argv)
    if args.cold_cache and args.no_isolate:
        parser.error("--cold-cache needs the processes that --no-isolate turns off.")

    quick = args.quick
    chains = args.chains if args.chains is not None else (2 if quick else 4)
    draws = args.draws if args.draws is not None else (300 if quick else 1000)
    tune = args.tune if args.tune is not None else (300 if quick else 1000)
    many = args.many if args.many is not None else (200 if quick else 1000)
    sizes = (10**4, 10**5) if quick else (10**5, 10**6)
    isolate = not args.no_isolate
    t_start = time.perf_counter()
    cache = ("cold: an empty PyTensor compile directory per process" if args.cold_cache else
             f"warm: {pytensor.config.base_compiledir}, {numba_cache_entries()} numba cache "
             f"files at the start")
    print(machine_facts(), flush=True)
    print(f"compile cache {cache}", flush=True)

    rte = None
    if not args.skip_rte:
        try:
            with compile_cache(args.cold_cache):
                rte = run_isolated(isolate, bench_rte, chains, draws, tune, args.seed)
        except RuntimeError as err:
            say("rte", f"FAILED\n{err}")

    sim_rows: dict[str, dict] = {}
    if not args.skip_simulated:
        for case in make_cases(sizes, many, args.seed):
            if args.only and args.only not in case.name:
                continue
            say(case.name, f"simulate {case}")
            row: dict = {}
            try:
                ann, row["simulate_s"], row["simulate_rss_MB"] = run_isolated(
                    isolate, simulate_case, case)
                with compile_cache(args.cold_cache):
                    row.update(run_isolated(isolate, bench_case, case, ann,
                                            not args.no_breakdown))
            except RuntimeError as err:
                say(case.name, f"FAILED\n{err}")
                row["error"] = str(err).strip().splitlines()[-1][:60]
            finally:
                ann = None
            sim_rows[case.name] = row

    print("\n" + "=" * 100)
    where = "every case in its own process" if isolate else "all in one process"
    print(f"two-coin benchmark ({'quick' if quick else 'full'} mode), "
          f"{time.perf_counter() - t_start:.0f} s in all; {where}; compile cache {cache}")
    if rte is not None:
        print("\nRTE (8000 labels, 800 items, 164 annotators); accuracy against gold")
        stages = pd.DataFrame(rte["stages"]).set_index("stage")
        print(stages.to_string(na_rep="", formatters={"seconds": "{:.3f}".format,
                                                      "accuracy": "{:.4f}".format}))
        print(f"RSS peak of the RTE process: {rte['rss_peak_MB']:.0f} MiB "
              f"({rte['rss_start_MB']:.0f} MiB after imports and loading); load average at "
              f"its end {rte['load']:.1f}")
        nuts = rte["nuts"]
        if nuts:
            print(f"\nNUTS sampler: {nuts['sampler']}")
            print(f"bulk ESS over {nuts['scalars']} scalars ({', '.join(NUTS_VARS)}): "
                  f"min {nuts['ess_bulk_min']:.0f}, median {nuts['ess_bulk_median']:.0f}")
            print(f"ESS / s over tune+draws: min {nuts['ess_per_s_min']:.1f}, "
                  f"median {nuts['ess_per_s_median']:.1f}; over the whole cm.sample call: "
                  f"min {nuts['ess_per_s_min_total']:.1f}, "
                  f"median {nuts['ess_per_s_median_total']:.1f}")
            print(f"{nuts['us_per_leapfrog']:.0f} us per leapfrog step after tuning "
                  f"({nuts['draw_phase_s_per_chain']:.1f} s per chain in the draws' steps; "
                  f"the rest of tune+draws is tuning and worker start-up)")
            print(f"max r_hat {nuts['rhat_max']:.4f}, divergences {nuts['divergences']}, "
                  f"mean tree depth {nuts['mean_tree_depth']:.2f} "
                  f"({nuts['mean_leapfrog_steps']:.1f} leapfrog steps), label-switched "
                  f"chains {nuts['label_switched_chains']}, max |posterior mean - EM| "
                  f"sens/spec {nuts['max_abs_nuts_mean_minus_em']:.3f}")
            if nuts["warnings"]:
                print("sampler warnings: " + " | ".join(nuts["warnings"]))
    if sim_rows:
        print(f"\nSimulated two-coin data (five radiologists' sensitivity/specificity; "
              f"J{len(SENSITIVITY)}: every annotator labels every item; J{many}: the five "
              f"profiles cycled, 5 labels per item; X10: 10 standard-normal features)")
        print(simulated_table(sim_rows).to_string())
    print("\n" + machine_facts())


if __name__ == "__main__":
    main()
