"""Large crowds: the command line against the Python API, and memory per label.

Printed as ratios and per-label figures measured in one run (never an absolute
wall-clock limit):

* 2·10^6 labels (200,000 items x 10 labels from 2,000 annotators, 3 classes),
  written once as CSV: ``crowd-models fit LABELS.csv --method em --model
  dawid-skene --variant full`` as a whole process, with the seconds of each of
  its stages (read, EM, writing the report), against a Python process that
  runs ``pd.read_csv`` (ids as text), ``Annotations.from_frame`` and
  ``dawid_skene.em(variant="full")`` (target: the command line <= 1.5x), and
  against the same with the report's tables and ``fit.nc`` written too;
* ``from_frame`` + full Dawid-Skene EM at 10^5, 10^6 and 10^7 labels (10
  labels per item, 5 classes, 1,000 labels per annotator, so 10^4 annotators
  at 10^7), each in its own process that reads its CSV first: the peak
  resident memory with the table (target at 10^7: <= 1.0 GB), the memory
  above the imports per label, and the seconds per label of ``from_frame``
  and of EM (per EM iteration too), which should stay flat.

    .venv/bin/python benchmarks/large_crowds.py            # everything (~3 min on 2 cores)
    .venv/bin/python benchmarks/large_crowds.py --quick    # 2·10^5 CLI labels; 10^5, 10^6
    .venv/bin/python benchmarks/large_crowds.py --dir D    # keep the CSV files in D

The CSV files are written once into ``--dir`` (default: the system's temporary
folder) and reused by later runs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PYTHON_SCRIPT = """
import json, resource, sys, time
t0 = time.perf_counter()
import pandas as pd
import crowd_models as cm
from crowd_models.models import dawid_skene
times = {"import": time.perf_counter() - t0}
def stage(name, fn, *args, **kwargs):
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    times[name] = time.perf_counter() - t
    return out
df = stage("read", pd.read_csv, sys.argv[1], dtype={"item": str, "annotator": str})
ann = stage("parse", cm.Annotations.from_frame, df)
fit = stage("em", dawid_skene.em, ann, variant="full")
if sys.argv[2] != "-":
    def write(folder):
        cm.report.annotator_summary(fit).to_csv(folder + "/annotators.csv")
        cm.report.item_table(fit, ann).to_csv(folder + "/items.csv")
        cm.save_fit(fit, folder + "/fit.nc")
    stage("write", write, sys.argv[2])
with open("/proc/self/status") as status:
    times["peak_gb"] = next(int(l.split()[1]) for l in status if l.startswith("VmHWM:")) / 2**20
print(json.dumps(times))
"""

MEMORY_SCRIPT = """
import json, resource, sys, time
import numpy as np
import pandas as pd
import crowd_models as cm
from crowd_models.models import dawid_skene
def rss():
    # VmHWM: this process's own peak (ru_maxrss keeps the parent's peak across exec)
    try:
        with open("/proc/self/status") as status:
            return next(int(l.split()[1]) * 1024 for l in status if l.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
out = {"imports": rss()}
df = pd.read_csv(sys.argv[1], dtype={"item": str, "annotator": str})
out["table"] = rss()
t = time.perf_counter()
ann = cm.Annotations.from_frame(df)
out["parse_s"] = time.perf_counter() - t
out["parsed"] = rss()
t = time.perf_counter()
fit = dawid_skene.em(ann, variant="full")
out["em_s"] = time.perf_counter() - t
out["peak"] = rss()
out["n_iter"] = int(fit.attrs["n_iter"])
out["codes"] = [str(ann.item_idx.dtype), str(ann.annotator_idx.dtype), str(ann.labels.dtype)]
print(json.dumps(out))
"""


def write_crowd(path: Path, n_items: int, per_item: int, n_annotators: int, n_classes: int,
                seed: int = 0) -> None:
    """A simulated crowd as a CSV file (item, annotator, label): each item labelled by
    ``per_item`` different annotators, each correct with its own accuracy and
    otherwise uniform over the wrong classes; ids are text ('i0000042', 'w00007')."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    truth = rng.integers(0, n_classes, n_items)
    accuracy = rng.uniform(0.55, 0.9, n_annotators)
    # distinct annotators per item: a random first one, then steps that sum to < n_annotators
    steps = rng.integers(1, max(2, n_annotators // per_item), (n_items, per_item))
    steps[:, 0] = rng.integers(0, n_annotators, n_items)
    annotator = (np.cumsum(steps, axis=1) % n_annotators).ravel()
    item = np.repeat(np.arange(n_items), per_item)
    correct = rng.random(len(item)) < accuracy[annotator]
    wrong = (truth[item] + rng.integers(1, n_classes, len(item))) % n_classes
    label = np.where(correct, truth[item], wrong)

    def ids(prefix: str, codes: np.ndarray, width: int) -> np.ndarray:
        text = np.strings.zfill(codes.astype(np.dtypes.StringDType()), width)
        return np.strings.add(prefix, text)

    frame = pd.DataFrame({"item": ids("i", item, len(str(n_items))),
                          "annotator": ids("w", annotator, len(str(n_annotators))),
                          "label": label})
    partial = path.with_suffix(".partial")
    frame.to_csv(partial, index=False)
    partial.replace(path)


def crowd_file(folder: Path, n_items: int, per_item: int, n_annotators: int,
               n_classes: int) -> Path:
    path = folder / f"crowd_{n_items}x{per_item}_{n_annotators}a_{n_classes}k.csv"
    if not path.exists():
        t0 = time.perf_counter()
        write_crowd(path, n_items, per_item, n_annotators, n_classes)
        print(f"       wrote {path} ({n_items * per_item:,} labels) in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
    return path


def run(args: list[str]) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.perf_counter()
    out = subprocess.run(args, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"{args[:4]} failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return out, wall


def line(name: str, value: str, bound: str, ok: bool) -> None:
    verdict = "met" if ok else "NOT met"
    print(f"TARGET {name:<44} {value:>26}  vs {bound:<14} {verdict}", flush=True)


def cli_against_python(folder: Path, n_items: int) -> None:
    """The command line's whole process against the Python API's, on one CSV file."""
    path = crowd_file(folder, n_items, 10, 2_000, 3)
    python = json.loads(run([sys.executable, "-c", PYTHON_SCRIPT, str(path), "-"])[0].stdout)
    python_wall = run([sys.executable, "-c", PYTHON_SCRIPT, str(path), "-"])[1]
    report = Path(tempfile.mkdtemp(prefix="large_crowds_"))
    try:
        written = run([sys.executable, "-c", PYTHON_SCRIPT, str(path), str(report)])
        shutil.rmtree(report / "out", ignore_errors=True)
        cli, cli_wall = run([sys.executable, "-m", "crowd_models.cli", "fit", str(path),
                             "--method", "em", "--model", "dawid-skene", "--variant", "full",
                             "--out", str(report / "out")])
    finally:
        shutil.rmtree(report, ignore_errors=True)
    written_times = json.loads(written[0].stdout)
    stages = [float(s) for s in re.findall(r"done in ([0-9.]+) s", cli.stdout)]
    names = ["read+parse (with imports)", "em", "write"]
    print(f"       {n_items * 10:,} labels, 3 classes, 2,000 annotators", flush=True)
    print("       command line: " + ", ".join(f"{n} {s:.2f} s" for n, s in
                                              zip(names, stages, strict=False))
          + f"; whole process {cli_wall:.2f} s", flush=True)
    print("       Python:       " + ", ".join(
        f"{k} {python[k]:.2f} s" for k in ("import", "read", "parse", "em"))
        + f"; whole process {python_wall:.2f} s (peak {python['peak_gb']:.2f} GiB)",
        flush=True)
    print(f"       Python with the report's tables and fit.nc written: write "
          f"{written_times['write']:.2f} s; whole process {written[1]:.2f} s", flush=True)
    line(f"CLI --method em / Python ({n_items * 10:.0e} labels)",
         f"{cli_wall / python_wall:.2f} ({cli_wall:.1f} s / {python_wall:.1f} s)", "<= 1.5",
         cli_wall / python_wall <= 1.5)
    print(f"       against Python writing the same tables and fit.nc: "
          f"{cli_wall / written[1]:.2f}", flush=True)


def memory_per_label(folder: Path, sizes: list[int]) -> None:
    """Peak memory and seconds per label of from_frame + full Dawid-Skene EM."""
    print(f"       {'labels':>10} {'peak GB':>8} {'imports':>8} {'read':>8} {'parsed':>8} "
          f"{'B/label':>8} "
          f"{'parse us/l':>10} {'EM us/l':>8} {'iter':>5} {'EM ns/l/it':>10}  codes",
          flush=True)
    peak_top = None
    for n in sizes:
        n_items = n // 10
        path = crowd_file(folder, n_items, 10, max(n // 1000, 20), 5)
        out = json.loads(run([sys.executable, "-c", MEMORY_SCRIPT, str(path)])[0].stdout)
        per_label = (out["peak"] - out["imports"]) / n
        print(f"       {n:>10,} {out['peak'] / 1e9:>8.3f} {out['imports'] / 1e9:>8.3f} "
              f"{out['table'] / 1e9:>8.3f} {out['parsed'] / 1e9:>8.3f} "
              f"{per_label:>8.0f} {out['parse_s'] / n * 1e6:>10.3f} "
              f"{out['em_s'] / n * 1e6:>8.3f} {out['n_iter']:>5} "
              f"{out['em_s'] / n / max(out['n_iter'], 1) * 1e9:>10.2f}  "
              f"{'/'.join(out['codes'])}", flush=True)
        peak_top = (n, out["peak"])
    if peak_top is not None and peak_top[0] >= 10**7:
        line("10^7 labels: peak with the table", f"{peak_top[1] / 1e9:.2f} GB", "<= 1.0 GB",
             peak_top[1] <= 1e9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="2·10^5 labels through the command line; memory at 10^5, 10^6")
    parser.add_argument("--dir", default=tempfile.gettempdir(),
                        help="folder for the CSV files (written once, then reused)")
    args = parser.parse_args()
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs", flush=True)
    cli_against_python(folder, 20_000 if args.quick else 200_000)
    memory_per_label(folder, [10**5, 10**6] if args.quick else [10**5, 10**6, 10**7])


if __name__ == "__main__":
    main()
