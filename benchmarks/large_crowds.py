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
  and of EM (per EM iteration too), which should stay flat;
* the memory-bounded EM (issue 41): full Dawid-Skene EM on
  ``ChunkedAnnotations`` at 10^5 to 10^8 labels (10 per item, 5 classes,
  10^4 annotators from 10^7 on), simulated a block of items at a time as
  narrow codes, each size in its own process, against the in-memory EM on the
  same labels up to 10^7: peak memory, seconds, cost per label per iteration,
  accuracy against the simulated truth; the 10^8 targets (<= 10 min, <= 6
  GB; projected from the largest size run when 10^8 is not); and the Dask EM
  (a LocalCluster of 2 worker processes) from a parquet dataset written
  partition by partition, against the chunked EM on the same labels
  (target <= 2x).

    .venv/bin/python benchmarks/large_crowds.py            # everything (~10 min on 2 cores)
    .venv/bin/python benchmarks/large_crowds.py --quick    # 2·10^5 CLI labels; 10^5, 10^6
    .venv/bin/python benchmarks/large_crowds.py --dir D    # keep the CSV files in D
    .venv/bin/python benchmarks/large_crowds.py --cli      # the command line against Python only
    .venv/bin/python benchmarks/large_crowds.py --chunked 1e7 3e7 --dask-labels 1e7

The CSV and parquet files are written once into ``--dir`` (default: the
system's temporary folder) and reused by later runs.
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


TABLE_SCRIPT = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import pandas as pd
import large_crowds as lc
import crowd_models as cm
from crowd_models.models import dawid_skene
out = {"imports": lc.peak_bytes()}
n_items, per_item, n_annotators, n_classes = map(int, sys.argv[2:6])
sizes, annotator, label, truth = lc.narrow_crowd(n_items, per_item, n_annotators, n_classes)
table = pd.DataFrame({"item": np.repeat(np.arange(n_items), sizes),
                      "annotator": annotator.astype(np.int64), "label": label.astype(np.int64)})
del sizes, annotator, label
out["table"] = lc.peak_bytes()
t = time.perf_counter()
ann = cm.Annotations.from_frame(table)
out["parse_s"] = time.perf_counter() - t
t = time.perf_counter()
fit = dawid_skene.em(ann, variant="full")
out["em_s"] = time.perf_counter() - t
out["peak"] = lc.peak_bytes()
out["n_iter"] = int(fit.attrs["n_iter"])
out["accuracy"] = float(np.mean(fit["item_class_prob"].values.argmax(-1) == truth))
print(json.dumps(out))
"""


CHUNKED_SCRIPT = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np
sys.path.insert(0, sys.argv[1])
import large_crowds as lc
import crowd_models as cm
from crowd_models.large import ChunkedAnnotations
from crowd_models.models import dawid_skene, spammer
out = {"imports": lc.peak_bytes()}
n_items, per_item, n_annotators, n_classes, chunk_items = map(int, sys.argv[2:7])
fit_em = {"dawid_skene": lambda a: dawid_skene.em(a, variant="full"),
          "spammer": spammer.em}[sys.argv[8]]
t = time.perf_counter()
sizes, annotator, label, truth = lc.narrow_crowd(n_items, per_item, n_annotators, n_classes)
out["simulate_s"] = time.perf_counter() - t
t = time.perf_counter()
if sys.argv[7] == "chunked":
    ann = ChunkedAnnotations.from_codes(sizes, annotator, label, annotators=n_annotators,
                                        classes=n_classes, chunk_items=chunk_items)
else:  # the in-memory EM on the same labels, as int64 Annotations
    import pandas as pd
    ann = cm.Annotations(np.repeat(np.arange(n_items), per_item), annotator, label,
                         pd.RangeIndex(n_items), pd.RangeIndex(n_annotators),
                         pd.RangeIndex(n_classes))
del annotator, label
out["store_s"] = time.perf_counter() - t
out["stored"] = lc.peak_bytes()
t = time.perf_counter()
fit = fit_em(ann)
out["em_s"] = time.perf_counter() - t
out["peak"] = lc.peak_bytes()
out["n_iter"] = int(fit.attrs["n_iter"])
out["accuracy"] = float(np.mean(fit["item_class_prob"].values[0, 0].argmax(axis=1) == truth))
print(json.dumps(out))
"""

DASK_SCRIPT = """
import json, logging, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
import large_crowds as lc
from distributed import Client, LocalCluster
from crowd_models.large import DaskAnnotations
from crowd_models.models import dawid_skene
class Passes(logging.Handler):  # the seconds of each EM pass, from the engine's log
    seconds = []
    def emit(self, record):
        if record.msg.startswith("EM pass"):
            self.seconds.append(record.args[1])
if __name__ == "__main__":
    logging.getLogger("crowd_models.large").addHandler(Passes())
    logging.getLogger("crowd_models.large").setLevel(logging.INFO)
    n_annotators, n_classes = int(sys.argv[3]), int(sys.argv[4])
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        t = time.perf_counter()
        crowd = DaskAnnotations.from_parquet(sys.argv[2], annotators=n_annotators,
                                             classes=n_classes, posterior_path=sys.argv[5])
        fit = dawid_skene.em(crowd, variant="full")
        em_s = time.perf_counter() - t
        workers = client.run(lc.peak_bytes)
    print(json.dumps({"em_s": em_s, "n_iter": int(fit.attrs["n_iter"]),
                      "passes": len(Passes.seconds), "passes_s": sum(Passes.seconds),
                      "partitions": crowd.frame.npartitions, "client_peak": lc.peak_bytes(),
                      "worker_peaks": sorted(workers.values())}))
"""


BLOCK_ITEMS = 200_000
"""Items per block of the simulated narrow crowd, and per file (a Dask partition) of
its parquet dataset: 2·10^6 labels, 50 partitions at 10^8."""


def peak_bytes() -> int:
    """This process's peak resident memory (VmHWM; ru_maxrss keeps a parent's peak)."""
    with open("/proc/self/status") as status:
        return next(int(x.split()[1]) * 1024 for x in status if x.startswith("VmHWM:"))


def _narrow_block(rng, n_items: int, per_item: int, accuracy: np.ndarray, n_classes: int):
    """One block of items of the simulated crowd, as narrow codes (no int64 column of
    the block's labels survives the call)."""
    n_annotators = len(accuracy)
    truth = rng.integers(0, n_classes, n_items, dtype=np.uint8)
    steps = rng.integers(1, max(2, n_annotators // per_item), (n_items, per_item),
                         dtype=np.int32)
    steps[:, 0] = rng.integers(0, n_annotators, n_items, dtype=np.int32)
    annotator = (np.cumsum(steps, axis=1) % n_annotators).ravel().astype(
        np.min_scalar_type(n_annotators - 1))
    del steps
    true_label = np.repeat(truth, per_item)
    correct = rng.random(len(annotator), dtype=np.float32) < accuracy[annotator]
    wrong = rng.integers(1, n_classes, len(annotator), dtype=np.uint8)
    wrong += true_label
    wrong %= n_classes
    label = np.where(correct, true_label, wrong).astype(np.uint8)
    return annotator, label, truth


def narrow_crowd(n_items: int, per_item: int, n_annotators: int, n_classes: int,
                 seed: int = 0, block: int = BLOCK_ITEMS):
    """The simulated crowd of :func:`write_crowd` (the same design, not the same draws)
    as narrow codes, drawn a block of items at a time: (labels per item, annotator
    codes, label codes, true classes)."""
    accuracy = np.random.default_rng([seed, 0]).uniform(0.55, 0.9, n_annotators).astype(
        np.float32)
    n = n_items * per_item
    annotator = np.empty(n, dtype=np.min_scalar_type(n_annotators - 1))
    label = np.empty(n, dtype=np.uint8)
    truth = np.empty(n_items, dtype=np.uint8)
    for first in range(0, n_items, block):
        size = min(block, n_items - first)
        rows = slice(first * per_item, (first + size) * per_item)
        annotator[rows], label[rows], truth[first:first + size] = _narrow_block(
            np.random.default_rng([seed, 1 + first // block]), size, per_item, accuracy,
            n_classes)
    return np.full(n_items, per_item, dtype=np.int64), annotator, label, truth


def write_parquet_crowd(folder: Path, n_items: int, per_item: int, n_annotators: int,
                        n_classes: int, block: int = BLOCK_ITEMS) -> Path:
    """The crowd of :func:`narrow_crowd` as a parquet dataset (item, annotator, label
    codes), one file per block of items in item order (a Dask partition each),
    written block by block: the same labels as :func:`narrow_crowd`'s."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = folder / f"crowd_{n_items}x{per_item}_{n_annotators}a_{n_classes}k.parquet"
    if path.exists():
        return path
    t0 = time.perf_counter()
    partial = path.with_suffix(".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    accuracy = np.random.default_rng([0, 0]).uniform(0.55, 0.9, n_annotators).astype(
        np.float32)
    for first in range(0, n_items, block):
        size = min(block, n_items - first)
        annotator, label, _ = _narrow_block(np.random.default_rng([0, 1 + first // block]),
                                            size, per_item, accuracy, n_classes)
        item = np.repeat(np.arange(first, first + size, dtype=np.int64), per_item)
        pq.write_table(pa.table({"item": item, "annotator": annotator, "label": label}),
                       partial / f"part.{first // block:05d}.parquet")
    partial.replace(path)
    print(f"       wrote {path} ({n_items * per_item:,} labels) in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    return path


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


def cli_against_python(folder: Path, n_items: int, pairs: int = 3) -> None:
    """The command line's whole process against the Python API's, on one CSV file:
    ``pairs`` runs of each in turn, the target read on the median ratio (near 1.5,
    one pair's ratio moves by 0.2-0.4 on this machine)."""
    path = crowd_file(folder, n_items, 10, 2_000, 3)
    python = json.loads(run([sys.executable, "-c", PYTHON_SCRIPT, str(path), "-"])[0].stdout)
    report = Path(tempfile.mkdtemp(prefix="large_crowds_"))
    walls = []
    try:
        written = run([sys.executable, "-c", PYTHON_SCRIPT, str(path), str(report)])
        for _ in range(pairs):
            python_wall = run([sys.executable, "-c", PYTHON_SCRIPT, str(path), "-"])[1]
            shutil.rmtree(report / "out", ignore_errors=True)
            cli, cli_wall = run([sys.executable, "-m", "crowd_models.cli", "fit", str(path),
                                 "--method", "em", "--model", "dawid-skene", "--variant",
                                 "full", "--out", str(report / "out")])
            walls.append((cli_wall, python_wall))
    finally:
        shutil.rmtree(report, ignore_errors=True)
    written_times = json.loads(written[0].stdout)
    stages = [float(s) for s in re.findall(r"done in ([0-9.]+) s", cli.stdout)]
    names = ["read+parse (with imports)", "em", "write"]
    cli_wall, python_wall = np.median(walls, axis=0)
    ratios = [c / p for c, p in walls]
    print(f"       {n_items * 10:,} labels, 3 classes, 2,000 annotators", flush=True)
    print("       command line (last run): " + ", ".join(
        f"{n} {s:.2f} s" for n, s in zip(names, stages, strict=False))
        + f"; whole process, median of {pairs}: {cli_wall:.2f} s", flush=True)
    print("       Python:       " + ", ".join(
        f"{k} {python[k]:.2f} s" for k in ("import", "read", "parse", "em"))
        + f"; whole process, median of {pairs}: {python_wall:.2f} s "
        f"(peak {python['peak_gb']:.2f} GiB)", flush=True)
    print(f"       Python with the report's tables and fit.nc written: write "
          f"{written_times['write']:.2f} s; whole process {written[1]:.2f} s", flush=True)
    ratio = float(np.median(ratios))
    line(f"CLI --method em / Python ({n_items * 10:.0e} labels)",
         f"{ratio:.2f} (median; {min(ratios):.2f}-{max(ratios):.2f})", "<= 1.5", ratio <= 1.5)
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


def memory_in_memory_table(n: int) -> None:
    """The issue's own setting: the table built in memory (int64 item, annotator and
    label columns, as a user's DataFrame of codes), then from_frame + full
    Dawid-Skene EM, in its own process."""
    n_items = n // 10
    out = json.loads(run([sys.executable, "-c", TABLE_SCRIPT, str(Path(__file__).parent),
                          str(n_items), "10", str(max(n // 1000, 20)), "5"])[0].stdout)
    print(f"       {n:,} labels built in memory: table {out['table'] / 1e9:.3f} GB, from_frame "
          f"{out['parse_s']:.2f} s, EM {out['em_s']:.2f} s ({out['n_iter']} iterations, "
          f"accuracy {out['accuracy']:.4f}), peak {out['peak'] / 1e9:.3f} GB", flush=True)
    line(f"{n:.0e} labels in memory: peak with the table", f"{out['peak'] / 1e9:.3f} GB",
         "<= 1.0 GB", out["peak"] <= 1e9)


def _design(n: int) -> tuple[int, int, int, int]:
    """(items, labels per item, annotators, classes) for n labels: 10 per item, 5 classes,
    1,000 labels per annotator up to 10^4 annotators (10^7 labels; memory_per_label's
    design), then 10^4 annotators (the issue's 10^8 design: 10^4 labels each)."""
    return n // 10, 10, min(max(n // 1000, 20), 10_000), 5


def chunked_per_label(sizes: list[int], memory_up_to: int, chunk_items: int,
                      family: str = "dawid_skene") -> dict:
    """Full Dawid-Skene EM (or ``family``'s: "spammer") on narrow codes, chunked, each
    size in its own process: peak memory and cost per label; the in-memory EM on the
    same labels up to ``memory_up_to``. Returns size -> the chunked run's figures."""
    here = str(Path(__file__).resolve().parent)
    print(f"       {'labels':>11} {'EM':>8} {'peak GB':>8} {'stored':>7} {'sim s':>6} "
          f"{'EM s':>7} {'iter':>5} {'EM ns/l/it':>10} {'accuracy':>8}", flush=True)
    chunked = {}
    for n in sizes:
        for mode in ("memory", "chunked") if n <= memory_up_to else ("chunked",):
            args = [str(a) for a in (*_design(n), chunk_items, mode, family)]
            out = json.loads(run([sys.executable, "-c", CHUNKED_SCRIPT, here, *args])[0].stdout)
            print(f"       {n:>11,} {mode:>8} {out['peak'] / 1e9:>8.2f} "
                  f"{out['stored'] / 1e9:>7.2f} {out['simulate_s']:>6.1f} {out['em_s']:>7.1f} "
                  f"{out['n_iter']:>5} {out['em_s'] / n / out['n_iter'] * 1e9:>10.1f} "
                  f"{out['accuracy']:>8.4f}", flush=True)
            if mode == "chunked":
                chunked[n] = out
    return chunked


def dask_against_chunked(folder: Path, n: int, chunked: dict) -> None:
    """Dask LocalCluster (2 worker processes, a thread each) from a parquet dataset
    against the chunked EM on the same labels."""
    n_items, per_item, n_annotators, n_classes = _design(n)
    path = write_parquet_crowd(folder, n_items, per_item, n_annotators, n_classes)
    here = str(Path(__file__).resolve().parent)
    posterior = Path(tempfile.mkdtemp(prefix="large_crowds_posterior_"))
    try:
        out, wall = run([sys.executable, "-c", DASK_SCRIPT, here, str(path),
                         str(n_annotators), str(n_classes), str(posterior / "items")])
    finally:
        shutil.rmtree(posterior, ignore_errors=True)
    out = json.loads(out.stdout)
    base = chunked[n]
    print(f"       Dask, {n:,} labels in {out['partitions']} partitions: EM + posteriors "
          f"written {out['em_s']:.1f} s ({out['n_iter']} iterations; chunked "
          f"{base['em_s']:.1f} s, {base['n_iter']}), of which {out['passes']} logged passes "
          f"{out['passes_s']:.1f} s; peaks: client "
          f"{out['client_peak'] / 1e9:.2f} GB, workers "
          f"{', '.join(f'{w / 1e9:.2f}' for w in out['worker_peaks'])} GB; whole process "
          f"{wall:.1f} s", flush=True)
    ratio = out["em_s"] / base["em_s"]
    line(f"Dask 2 workers / chunked ({n:.0e} labels)", f"{ratio:.2f}", "<= 2", ratio <= 2)


def chunked_targets(chunked: dict) -> None:
    """The issue's 10^8 targets, measured or projected from the largest size run."""
    top = max(chunked)
    out = chunked[top]
    scale = 10**8 / top
    seconds, peak = out["em_s"] * scale, out["imports"] + (out["peak"] - out["imports"]) * scale
    how = "measured" if top == 10**8 else f"projected x{scale:.3g} from {top:.0e}"
    line(f"10^8 labels chunked EM time ({how})", f"{seconds / 60:.1f} min", "<= 10 min",
         seconds <= 600)
    line(f"10^8 labels chunked EM peak ({how})", f"{peak / 1e9:.2f} GB", "<= 6 GB",
         peak <= 6e9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="2·10^5 labels through the command line; memory at 10^5, 10^6")
    parser.add_argument("--dir", default=tempfile.gettempdir(),
                        help="folder for the CSV files (written once, then reused)")
    parser.add_argument("--chunked", type=float, nargs="*", metavar="N",
                        help="only the chunked EM at these numbers of labels (default with "
                             "no N: 1e5 1e6 1e7 3e7 1e8) and Dask at --dask-labels")
    parser.add_argument("--dask-labels", type=float, default=1e7,
                        help="labels of the Dask against chunked comparison (0: none)")
    parser.add_argument("--chunk-items", type=int, default=65_536,
                        help="items per block of the chunked EM")
    parser.add_argument("--family", choices=["dawid_skene", "spammer"], default="dawid_skene",
                        help="the chunked section's EM: full Dawid-Skene (default; the "
                             "issue's targets and the Dask run) or the spammer model")
    parser.add_argument("--cli", action="store_true",
                        help="only the command line against Python (2·10^6 labels, 2·10^5 "
                             "with --quick), e.g. to compare two checkouts in one session")
    args = parser.parse_args()
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs", flush=True)
    if args.cli:
        cli_against_python(folder, 20_000 if args.quick else 200_000)
        return
    if args.chunked is None:
        cli_against_python(folder, 20_000 if args.quick else 200_000)
        memory_per_label(folder, [10**5, 10**6] if args.quick else [10**5, 10**6, 10**7])
        memory_in_memory_table(10**6 if args.quick else 10**7)
    sizes = [int(n) for n in args.chunked or ([1e5, 1e6] if args.quick else
                                              [1e5, 1e6, 1e7, 3e7, 1e8])]
    chunked = chunked_per_label(sizes, 10**7, args.chunk_items, args.family)
    if args.family != "dawid_skene":
        return
    chunked_targets(chunked)
    dask_n = int(args.dask_labels) if not args.quick else 10**6
    if dask_n:
        if dask_n not in chunked:
            chunked.update(chunked_per_label([dask_n], 0, args.chunk_items))
        dask_against_chunked(folder, dask_n, chunked)


if __name__ == "__main__":
    main()
