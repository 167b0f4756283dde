"""Dawid-Skene EM against crowd-kit's ``DawidSkene`` on one CSV, as ratios.

The issue's target: at 10^6 labels (100,000 items x 10 labels from 200
annotators), ``crowd_models.models.dawid_skene.em`` is at least 5x faster than
crowd-kit's ``DawidSkene`` at the same tolerance on the same CSV, with the
peak memory of each printed. crowd-kit is not a dependency: the script makes
its own virtual environment for it (``benchmarks/.crowdkit-venv`` by default,
reused when it exists; uv puts a ``.gitignore`` of ``*`` in it) with
``python -m uv venv`` and ``uv pip install crowd-kit`` (PyPI), and runs it
there in a subprocess.

What it does:

1. Simulates K = 5 classes by default (``--classes``; the multi-class case
   Dawid-Skene is for, as in ``dawid_skene.py``): 200 annotators with
   accuracies uniform on [0.55, 0.95] and the rest of each confusion row
   spread at random (Dirichlet) over the other classes, an uneven prevalence,
   each item labelled by 10 annotators drawn at random. Writes one CSV with
   integer columns ``worker``, ``task``, ``label`` (crowd-kit's names).
2. crowd-kit, in its venv, in its own process: ``pandas.read_csv``, then
   ``DawidSkene(n_iter=..., tol=...).fit``. Its ``tol`` is compared with the
   change of ``loss_history_``, an "ELBO" per label; the fit stops at the first
   iteration whose change is below ``tol`` -- including any decrease. That
   loss is not the EM objective (it adds the log prevalence once per label,
   not once per item, and clips the posteriors at 1e-10 without renormalising
   them), so it need not rise monotonically: on some data (one-coin errors and
   a uniform prevalence, tried while writing this) it starts falling once the
   per-label gain is near 1e-10, and any smaller ``tol`` then stops the fit at
   that first fall, as tight as crowd-kit goes. On this script's data it keeps rising to the
   1e-12 level. Default ``tol=1e-12``, ``n_iter=1000`` (a fit that stops on
   the cap is flagged). After the timed fit, one more E- and M-step with
   crowd-kit's own static ``_e_step``/``_m_step`` measures how far its
   returned point still moves: the largest change of any confusion or
   prevalence entry in one EM step, which is the quantity ``em``'s ``tol``
   bounds.
3. ``em`` in a fresh process of this venv: ``pandas.read_csv`` +
   ``Annotations.from_frame`` (the library's long-table loader), then ``em``
   with flat priors (``confusion_prior=(1, 1)``, ``prevalence_prior=1``: the
   maximum-likelihood estimate crowd-kit computes). Three runs, each in its
   own process: SQUAREM (the default) at the **same tolerance** -- ``tol`` =
   crowd-kit's measured move (at least 1e-13), so that an EM step from each
   side's answer moves no parameter by more than that -- then plain EM
   (``accelerate=False``) at that tolerance, then SQUAREM at ``em``'s default
   ``tol=1e-10`` (tighter or looser than crowd-kit's, depending on the data).

Printed: each side's read time (CSV to the fitting object) and fit time (wall
and CPU), iterations, final log-likelihood per label (computed here by the same
function from each side's confusion and prevalence), peak resident memory
(``resource.getrusage`` in each process: after the imports, after the read,
after the fit; the simulation runs in a process of its own so that this one,
whose peak a child's ``ru_maxrss`` starts from on Linux, stays small; VmHWM
from ``/proc/self/status`` as a check), the fraction of items whose most
probable class agrees between the two, the largest |difference| of the class
posteriors and of the confusion entries, and accuracy against the simulated
truth. ``TARGET`` lines: crowd-kit fit time / ``em`` fit time (target >= 5)
at the same tolerance, and at ``em``'s default tolerance; an extra line gives
the ratio of CPU times and of read + fit. The load average is printed at the
start and before each fit: other work on the machine slows every timing (the
CPU-time ratio is less sensitive to it). Each side runs once: rerun for spread.

    .venv/bin/python benchmarks/crowdkit.py             # 10^6 labels, K = 5
    .venv/bin/python benchmarks/crowdkit.py --quick     # 10^5 labels
    .venv/bin/python benchmarks/crowdkit.py --classes 2 # the binary case
    .venv/bin/python benchmarks/crowdkit.py --help      # other options
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_VENV = HERE / ".crowdkit-venv"
N_ANNOTATORS = 200
LABELS_PER_ITEM = 10
EM_DEFAULT_TOL = 1e-10
MIN_TOL = 1e-13
"""The smallest tol given to em: a crowd-kit answer that moves less than this in
one more EM step sits at a fixed point to rounding, and em is asked for 1e-13."""

CROWDKIT_SIDE = r"""
import json, resource, sys, time
from importlib.metadata import version

import numpy as np
import pandas as pd
from crowdkit.aggregation import DawidSkene


def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10


def hwm_mb():
    try:
        with open("/proc/self/status") as f:
            return next(int(x.split()[1]) for x in f if x.startswith("VmHWM:")) / 2**10
    except (OSError, StopIteration):
        return float("nan")


csv, out, tol, n_iter = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
res = {"version": version("crowd-kit"), "pandas": pd.__version__, "rss_import_mb": rss_mb()}
t0 = time.perf_counter()
data = pd.read_csv(csv)
res["read_s"] = time.perf_counter() - t0
res["rss_read_mb"] = rss_mb()

model = DawidSkene(n_iter=n_iter, tol=tol)
wall, cpu = time.perf_counter(), time.process_time()
model.fit(data)
res["fit_s"] = time.perf_counter() - wall
res["fit_cpu_s"] = time.process_time() - cpu
res["peak_rss_mb"] = rss_mb()
res["hwm_mb"] = hwm_mb()
history = model.loss_history_
res["n_iter"] = len(history)
res["hit_cap"] = len(history) >= n_iter
res["loss"] = history[-1]
res["loss_change"] = history[-1] - history[-2] if len(history) > 1 else float("nan")

tasks = np.sort(data["task"].unique())
workers = np.sort(data["worker"].unique())
classes = np.sort(data["label"].unique())
cells = pd.MultiIndex.from_product([workers, classes], names=["worker", "label"])


def dense(errors):
    # errors_: rows (worker, observed label), columns true label -> [worker, true, observed]
    table = errors.reindex(index=cells, columns=classes).fillna(0.0).to_numpy()
    return table.reshape(len(workers), len(classes), len(classes)).transpose(0, 2, 1)


confusion = dense(model.errors_)
prevalence = model.priors_.reindex(classes).to_numpy()
probas = model.probas_.reindex(index=tasks, columns=classes).to_numpy()

# not timed: one more EM step from the returned point, by crowd-kit's own steps
cols = data[["task", "worker", "label"]]
next_probas = DawidSkene._e_step(cols, model.priors_.copy(), model.errors_)
next_conf = dense(DawidSkene._m_step(cols, next_probas))
next_prev = next_probas.mean().reindex(classes).to_numpy()
res["next_step_move"] = float(max(np.abs(next_conf - confusion).max(),
                                  np.abs(next_prev - prevalence).max()))
np.savez(out, probas=probas, confusion=confusion, prevalence=prevalence)
print(json.dumps(res))
"""


# ------------------------------------------------------------------ helpers
def rss_mb() -> float:
    """Peak resident memory of this process (getrusage; on Linux a child's starts
    at its parent's, so the parent here stays small)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10


def hwm_mb() -> float:
    """The same peak from /proc/self/status (VmHWM, this process's own), as a check."""
    try:
        with open("/proc/self/status") as f:
            return next(int(x.split()[1]) for x in f if x.startswith("VmHWM:")) / 2**10
    except (OSError, StopIteration):
        return float("nan")


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def line(name: str, value: str, bound: str, ok: bool) -> None:
    print(f"TARGET {name:<44} {value:>26}  vs {bound:<26} {verdict(ok)}", flush=True)


def uv_command() -> list[str]:
    """A working uv: on PATH, or as a module of this or the system interpreter."""
    candidates = [[shutil.which("uv")]] if shutil.which("uv") else []
    candidates += [[sys.executable, "-m", "uv"]]
    if shutil.which("python3"):
        candidates.append([shutil.which("python3"), "-m", "uv"])
    for cmd in candidates:
        if subprocess.run([*cmd, "--version"], capture_output=True).returncode == 0:
            return cmd
    raise SystemExit("uv is needed to make crowd-kit's virtual environment "
                     "(pip install uv, or put uv on PATH).")


def ensure_venv(venv: Path, spec: str) -> Path:
    """crowd-kit's own virtual environment: reused when crowd-kit imports there,
    else made (or completed) with uv from this interpreter."""
    python = venv / "bin" / "python"
    if python.exists() and subprocess.run([python, "-c", "import crowdkit"],
                                          capture_output=True).returncode == 0:
        print(f"crowd-kit venv: reusing {venv}", flush=True)
        return python
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    uv = uv_command()
    t0 = time.perf_counter()
    if not python.exists():
        subprocess.run([*uv, "venv", "--python", sys.executable, str(venv)], env=env, check=True)
    subprocess.run([*uv, "pip", "install", "--python", str(python), spec], env=env, check=True)
    print(f"crowd-kit venv: made {venv} in {time.perf_counter() - t0:.1f} s", flush=True)
    return python


def last_json(proc: subprocess.CompletedProcess, what: str, json_line: bool = True):
    """The JSON a side printed last (its results), or an exit with its output."""
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"{what} failed (exit status {proc.returncode}).")
    return json.loads(proc.stdout.strip().splitlines()[-1]) if json_line else None


def log_likelihood(task, worker, label, confusion, prevalence) -> float:
    """Marginal log-likelihood of the labels, true class summed out, the same
    function for both sides: confusion[worker, true, label], prevalence[true]."""
    n, k = int(task.max()) + 1, len(prevalence)
    log_conf = np.log(np.maximum(confusion, 1e-300))[worker, :, label]  # (label row, true)
    joint = np.log(np.maximum(prevalence, 1e-300))[None, :] + np.stack(
        [np.bincount(task, weights=log_conf[:, c], minlength=n) for c in range(k)], axis=1)
    top = joint.max(axis=1)
    return float(np.sum(top + np.log(np.exp(joint - top[:, None]).sum(axis=1))))


# ------------------------------------------------------------------- data
def simulate_side(path: str, out: str, n_items: int, k: int, seed: int) -> None:
    """Runs in its own process (so that this one, whose memory the fits' processes
    start from, stays small): simulated Dawid-Skene labels written to the CSV
    ``path``; the integer columns and the true classes saved to ``out``."""
    import pandas as pd

    from crowd_models.models import dawid_skene

    rng = np.random.default_rng(seed)
    accuracy = rng.uniform(0.55, 0.95, N_ANNOTATORS)
    errors = rng.dirichlet(np.full(k - 1, 2.0), size=(N_ANNOTATORS, k))  # rest of each row
    confusion = np.empty((N_ANNOTATORS, k, k))
    for c in range(k):
        others = [x for x in range(k) if x != c]
        confusion[:, c, c] = accuracy
        confusion[:, c, others] = (1 - accuracy)[:, None] * errors[:, c]
    prevalence = np.arange(k, 0, -1) / (k * (k + 1) / 2)  # uneven: k, k-1, ..., 1
    ann = dawid_skene.simulate(confusion, n_items=n_items, prevalence=prevalence,
                               labels_per_item=LABELS_PER_ITEM, rng=rng)
    # codes as ids: items 0..n-1 (simulation order), annotators in order of first
    # appearance, labels 0..k-1
    task, worker, label = (np.asarray(a, dtype=np.int64)
                           for a in (ann.item_idx, ann.annotator_idx, ann.labels))
    pd.DataFrame({"worker": worker, "task": task, "label": label}).to_csv(path, index=False)
    np.savez(out, task=task, worker=worker, label=label, truth=np.asarray(ann.gold))


# ------------------------------------------------------------- our side
def ours_side(csv: str, out: str, tol: float, accelerate: bool) -> None:
    """Runs in its own process: read the CSV with the library's loader, fit em."""
    import pandas as pd

    import crowd_models as cm
    from crowd_models.models import dawid_skene

    res = {"rss_import_mb": rss_mb()}
    t0 = time.perf_counter()
    ann = cm.Annotations.from_frame(pd.read_csv(csv), item="task", annotator="worker",
                                    label="label")
    res["read_s"] = time.perf_counter() - t0
    res["rss_read_mb"] = rss_mb()
    wall, cpu = time.perf_counter(), time.process_time()
    fit = dawid_skene.em(ann, confusion_prior=(1.0, 1.0), prevalence_prior=1.0, tol=tol,
                         max_iter=10_000, accelerate=accelerate)
    res["fit_s"] = time.perf_counter() - wall
    res["fit_cpu_s"] = time.process_time() - cpu
    res["peak_rss_mb"] = rss_mb()
    res["hwm_mb"] = hwm_mb()
    res["n_iter"] = int(fit.attrs["n_iter"])
    res["converged"] = bool(fit.attrs["converged"])
    res["log_likelihood_attr"] = float(fit.attrs["log_likelihood"])
    # back to id order: tasks, workers and classes sorted (they are integers)
    items = np.argsort(ann.items.to_numpy())
    workers = np.argsort(ann.annotators.to_numpy())
    classes = np.argsort(ann.classes.to_numpy())
    prob = fit["item_class_prob"].values[0, 0][np.ix_(items, classes)]
    conf = fit["confusion"].values[0, 0][workers][:, classes][:, :, classes]
    prev = fit["prevalence"].values[0, 0][classes]
    np.savez(out, probas=prob, confusion=conf, prevalence=prev)
    print(json.dumps(res))


def run_ours(csv: Path, out: Path, tol: float, accelerate: bool) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--side", "ours", "--csv", str(csv),
           "--out", str(out), "--tol", repr(tol)]
    if not accelerate:
        cmd.append("--plain")
    return last_json(subprocess.run(cmd, capture_output=True, text=True), "the em side")


def run_crowdkit(python: Path, csv: Path, out: Path, tol: float, n_iter: int) -> dict:
    cmd = [str(python), "-c", CROWDKIT_SIDE, str(csv), str(out), repr(tol), str(n_iter)]
    return last_json(subprocess.run(cmd, capture_output=True, text=True), "the crowd-kit side")


# ------------------------------------------------------------------ main
def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="crowd-kit is installed into --venv, never into this project's environment.")
    parser.add_argument("--quick", action="store_true",
                        help="10^5 labels (10,000 items) instead of 10^6 (100,000 items)")
    parser.add_argument("--classes", type=int, default=5, metavar="K",
                        help="number of classes K (default 5)")
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV,
                        help=f"crowd-kit's virtual environment (default {DEFAULT_VENV})")
    parser.add_argument("--crowdkit-spec", default="crowd-kit",
                        help="what uv installs there (default crowd-kit; e.g. crowd-kit==1.4.1)")
    parser.add_argument("--crowdkit-tol", type=float, default=1e-12,
                        help="crowd-kit's tol, on the change of its per-label loss (default 1e-12)")
    parser.add_argument("--crowdkit-max-iter", type=int, default=1000,
                        help="crowd-kit's n_iter cap (default 1000)")
    parser.add_argument("--csv", type=Path,
                        help="write the CSV here and keep it (default: a temporary directory)")
    parser.add_argument("--seed", type=int, default=0, help="simulation seed (default 0)")
    parser.add_argument("--side", choices=["ours", "simulate"], help=argparse.SUPPRESS)
    parser.add_argument("--items", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--tol", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--plain", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side == "ours":
        ours_side(str(args.csv), args.out, args.tol, not args.plain)
        return
    if args.side == "simulate":
        simulate_side(str(args.csv), args.out, args.items, args.classes, args.seed)
        return
    if args.classes < 2:
        parser.error("--classes must be at least 2")

    n_items = 10_000 if args.quick else 100_000
    k = args.classes
    size = f"10^{round(np.log10(n_items * LABELS_PER_ITEM))} labels"
    print(f"load average {load()} (1/5/15 min), {os.cpu_count()} CPUs", flush=True)
    python = ensure_venv(args.venv.resolve(), args.crowdkit_spec)

    with tempfile.TemporaryDirectory(prefix="crowdkit-bench-") as tmp:
        tmp = Path(tmp)
        csv = args.csv.resolve() if args.csv else tmp / "labels.csv"
        t0 = time.perf_counter()
        last_json(subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--side", "simulate", "--csv",
             str(csv), "--out", str(tmp / "codes.npz"), "--items", str(n_items), "--classes",
             str(k), "--seed", str(args.seed)], capture_output=True, text=True), "simulation",
            json_line=False)
        codes = dict(np.load(tmp / "codes.npz"))
        task, worker, label, truth = (codes[x] for x in ("task", "worker", "label", "truth"))
        print(f"data: {size} ({n_items:,} items x {LABELS_PER_ITEM} labels, {N_ANNOTATORS} "
              f"annotators, K = {k}), simulated and written in {time.perf_counter() - t0:.1f} s "
              f"to {csv} ({csv.stat().st_size / 2**20:.1f} MiB)", flush=True)

        print(f"\nload average {load()}: crowd-kit DawidSkene(tol={args.crowdkit_tol:g}, "
              f"n_iter={args.crowdkit_max_iter})", flush=True)
        ck = run_crowdkit(python, csv, tmp / "crowdkit.npz", args.crowdkit_tol,
                          args.crowdkit_max_iter)
        same_tol = max(ck["next_step_move"], MIN_TOL)
        runs = {}
        for name, tol, accelerate in (("em, same tol", same_tol, True),
                                      ("em plain, same tol", same_tol, False),
                                      ("em, default tol", EM_DEFAULT_TOL, True)):
            print(f"load average {load()}: {name} (tol={tol:.3g})", flush=True)
            runs[name] = run_ours(csv, tmp / f"{len(runs)}.npz", tol, accelerate)
            runs[name]["tol"] = tol
            runs[name]["arrays"] = dict(np.load(tmp / f"{len(runs) - 1}.npz"))
        ck["arrays"] = dict(np.load(tmp / "crowdkit.npz"))
        ck["tol"] = args.crowdkit_tol

    n_labels = len(task)
    for res in (ck, *runs.values()):
        a = res["arrays"]
        res["loglik"] = log_likelihood(task, worker, label, a["confusion"], a["prevalence"])
        res["accuracy"] = float(np.mean(a["probas"].argmax(axis=1) == truth))

    print(f"\ncrowd-kit {ck['version']} (pandas {ck['pandas']}), {size}, K = {k}")
    header = (f"{'':22} {'read s':>7} {'fit s':>7} {'fit cpu s':>9} {'iter':>5} "
              f"{'loglik / label':>18} {'accuracy':>8} {'RSS MiB: import':>15} "
              f"{'read':>6} {'peak':>6} {'VmHWM':>6}")
    print(header)
    for name, res in (("crowd-kit", ck), *runs.items()):
        print(f"{name:22} {res['read_s']:7.2f} {res['fit_s']:7.2f} {res['fit_cpu_s']:9.2f} "
              f"{res['n_iter']:5d} {res['loglik'] / n_labels:18.12f} {res['accuracy']:8.4f} "
              f"{res['rss_import_mb']:15.0f} {res['rss_read_mb']:6.0f} "
              f"{res['peak_rss_mb']:6.0f} {res['hwm_mb']:6.0f}")
    print(f"crowd-kit: stopped after {ck['n_iter']} iterations "
          f"({'on the n_iter CAP' if ck['hit_cap'] else 'by tol'}); last change of its loss "
          f"{ck['loss_change']:.2e} (loss {ck['loss']:.10f} per label); one more EM step from "
          f"its answer moves a parameter by {ck['next_step_move']:.2e}; tol given to em "
          f"{same_tol:.2e}")
    for name, res in runs.items():
        gap = abs(res["log_likelihood_attr"] - res["loglik"])
        print(f"{name}: converged {res['converged']}; |its log_likelihood - the one here| "
              f"{gap:.1e}")
    for name, res in runs.items():
        a, b = res["arrays"], ck["arrays"]
        agree = float(np.mean(a["probas"].argmax(axis=1) == b["probas"].argmax(axis=1)))
        print(f"{name} vs crowd-kit: argmax agreement {agree:.6f}, max |posterior diff| "
              f"{np.abs(a['probas'] - b['probas']).max():.1e}, max |confusion diff| "
              f"{np.abs(a['confusion'] - b['confusion']).max():.1e}, max |prevalence diff| "
              f"{np.abs(a['prevalence'] - b['prevalence']).max():.1e}, loglik (em - crowd-kit) "
              f"{res['loglik'] - ck['loglik']:+.2e}")
    print(f"load average at the end {load()}\n", flush=True)

    for name in ("em, same tol", "em, default tol"):
        res = runs[name]
        ratio = ck["fit_s"] / res["fit_s"]
        line(f"{size}: crowd-kit fit / {name}", f"{ratio:.1f} ({ck['fit_s']:.2f} s / "
             f"{res['fit_s']:.2f} s)", ">= 5", ratio >= 5)
    res = runs["em, same tol"]
    cpu = ck["fit_cpu_s"] / res["fit_cpu_s"]
    both = (ck["read_s"] + ck["fit_s"]) / (res["read_s"] + res["fit_s"])
    print(f"       same tol: CPU-time ratio {cpu:.1f}; read + fit ratio {both:.1f}; peak RSS "
          f"em {res['peak_rss_mb'] / 2**10:.2f} GiB, crowd-kit {ck['peak_rss_mb'] / 2**10:.2f} "
          f"GiB", flush=True)


if __name__ == "__main__":
    main()
