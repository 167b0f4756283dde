"""Accuracy against gold on every bundled categorical data set: our families
beside crowd-kit's aggregators, on the same labels.

    .venv/bin/python benchmarks/accuracy.py            # every set
    .venv/bin/python benchmarks/accuracy.py --only rte dog

The sets: RTE, bluebirds, dog, web search, music genre (labels only, the
training songs), Zheng et al.'s sentiment, adult content and relevance, and the
three crowds added for issue 42 (Mozafari's binary crowd, the Duchenne smiles,
Snow et al.'s word senses; ``../shared/data/extra_crowds``, bundled).
crowd-kit counts one label per (item, annotator) pair, so for the comparison
every repeated pair keeps only its first label, on both sides (this changes
adult content and relevance only). Each fit uses the package defaults, the
same for every set: no prior is tuned per set.

Ours: majority vote (soft, ties split), the two-coin EM (binary sets only),
Dawid-Skene EM (full, one-coin and pooled), the spammer EM (MACE), the
item-difficulty EM (GLAD), and ``auto_fit`` with its defaults (the family its
gold-free choice takes, fitted by MAP). crowd-kit 1.4.2, in its own virtual
environment (made with uv as in ``crowdkit.py``, reused from
``benchmarks/.crowdkit-venv``), with its defaults: MajorityVote, DawidSkene
(n_iter=100), OneCoinDawidSkene, GLAD, MACE. One more crowd-kit column, "ck DS
converged" (DawidSkene run to a change of its loss below 1e-10, at most 100,000
iterations), says whether a DawidSkene number comes from stopping early; and
"ck MACE aligned" (MACE on the same rows in an order its M-step reads
correctly, ``CROWDKIT_RUNS``) says whether a MACE number comes from crowd-kit's
misaligned spam shares. Neither is counted in crowd-kit's best. Printed: one
row per set with every method's accuracy over the items with gold (a hard label
per item: the most probable class, ties to the first class for ours), and, per
set, our best and crowd-kit's best with the gap, then ``auto_fit``'s choice
against crowd-kit's best, item by item: the items with gold that only one of
the two gets right, each side's count, and the exact two-sided McNemar p-value
(the binomial test of that split against one half); last, the items right
summed over the sets (``auto_fit``, each crowd-kit method, and crowd-kit's best
per set picked with the gold), and the sets where ``auto_fit`` falls below full
Dawid-Skene EM by more than 0.01 or below majority vote. A gap of a few items
with a large p-value is one the gold cannot tell from chance.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import binomtest

import crowd_models as cm
from crowd_models.models import dawid_skene, item_difficulty, spammer, two_coin

HERE = Path(__file__).resolve().parent
SETS = ("rte", "bluebirds", "dog", "web_search", "music_genre", "sentiment", "adult_content",
        "relevance", "mozafari", "duchenne", "wsd")
CROWDKIT_METHODS = ("MajorityVote", "DawidSkene", "OneCoinDawidSkene", "GLAD", "MACE")
CROWDKIT_CONVERGED = "DS converged"
CROWDKIT_ALIGNED = "MACE aligned"
CROWDKIT_RUNS = {**{name: (name, {}) for name in CROWDKIT_METHODS},
                 CROWDKIT_CONVERGED: ("DawidSkene", {"n_iter": 100_000, "tol": 1e-10}),
                 CROWDKIT_ALIGNED: ("MACE", {"_rows": "aligned"})}
"""crowd-kit's columns: (aggregator, keyword arguments); the defaults but for
the converged DawidSkene and for "MACE aligned", crowd-kit's MACE given the same
rows ordered so that its M-step's tables line up (``_rows``, read by the side
script: rows sorted by label, annotators renamed to zero-padded codes in order
of first appearance). crowd-kit 1.4.2's MACE indexes its per-annotator spam
shares in order of first appearance but fills them from a table sorted by
annotator name and label, so its answer depends on the order of the rows and
the annotators' names; on these two orders the two agree."""

CROWDKIT_SIDE = r"""
import json, sys, time
import pandas as pd
import crowdkit.aggregation as agg
df = pd.read_csv(sys.argv[1])
out = {}
aligned = df.sort_values("label", kind="stable")
codes = {w: f"w{i:07d}" for i, w in enumerate(pd.unique(aligned["worker"]))}
aligned = aligned.assign(worker=aligned["worker"].map(codes)).reset_index(drop=True)
for column, (name, options) in json.loads(sys.argv[2]).items():
    t0 = time.perf_counter()
    rows = aligned if options.pop("_rows", None) == "aligned" else df
    labels = getattr(agg, name)(**options).fit_predict(rows)
    out[column] = {"labels": {str(k): int(v) for k, v in labels.items()},
                   "seconds": time.perf_counter() - t0}
print(json.dumps(out))
"""


def _crowdkit_tools():
    spec = importlib.util.spec_from_file_location("crowdkit_benchmark", HERE / "crowdkit.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load(name: str) -> cm.Annotations:
    """The set as Annotations, features dropped, repeated pairs reduced to their first label."""
    ann = getattr(cm.datasets, f"load_{name}")()  # keeps repeats (the loaders' default)
    if ann.features is not None:
        ann = ann.with_features(None)
    frame = ann.to_frame()
    if not frame.duplicated(["item", "annotator"]).any():
        return ann
    gold = ann.gold_series()
    frame = frame.drop_duplicates(["item", "annotator"])
    return cm.Annotations.from_frame(frame, classes=list(ann.classes), gold=gold[gold.notna()])


def ours(ann: cm.Annotations) -> tuple[dict[str, np.ndarray], str]:
    """Each of our methods' (item, class) probabilities, and the family
    ``auto_fit`` chose (its column is ``auto``)."""
    fits = {"MV": cm.majority_vote(ann).to_numpy()}
    if ann.n_classes == 2:
        fits["two-coin"] = two_coin.em(ann)
    fits["DS"] = dawid_skene.em(ann)
    fits["pooled DS"] = dawid_skene.em(ann, variant="pooled")
    fits["one-coin"] = dawid_skene.em(ann, variant="one_coin")
    fits["spammer"] = spammer.em(ann)
    fits["GLAD"] = item_difficulty.em(ann)
    probs = {name: fit if isinstance(fit, np.ndarray) else fit["item_class_prob"].values[0, 0]
             for name, fit in fits.items()}
    chosen = cm.auto_fit(ann)  # a MAP fit: a DataTree
    probs["auto"] = chosen["posterior"]["item_class_prob"].values[0, 0]
    return probs, chosen.attrs["model"]


def _right(prob: np.ndarray, ann: cm.Annotations) -> np.ndarray:
    """Whether each item with gold gets its gold class as the most probable."""
    known = ann.gold >= 0
    return prob.argmax(axis=1)[known] == ann.gold[known]


def _accuracy(fit, ann) -> float:
    prob = fit if isinstance(fit, np.ndarray) else fit["item_class_prob"].values[0, 0]
    return float(np.mean(_right(prob, ann)))


def crowdkit(python: Path, ann: cm.Annotations, folder: Path) -> dict[str, np.ndarray]:
    """Each crowd-kit column's label per item with gold (in ``ann``'s gold order)."""
    frame = ann.to_frame()
    codes = pd.Index(ann.classes).get_indexer(frame["label"])
    items = pd.Index(ann.items)
    csv = folder / "labels.csv"
    pd.DataFrame({"worker": frame["annotator"].astype(str),
                  "task": items.get_indexer(frame["item"]), "label": codes}).to_csv(csv,
                                                                                   index=False)
    proc = subprocess.run([python, "-c", CROWDKIT_SIDE, str(csv), json.dumps(CROWDKIT_RUNS)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"crowd-kit failed:\n{proc.stderr[-2000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    known = np.flatnonzero(ann.gold >= 0)
    return {name: pd.Series(found["labels"]).rename(index=int).reindex(known).to_numpy()
            for name, found in result.items()}


def paired(ours_right: np.ndarray, theirs_right: np.ndarray) -> tuple[int, int, float]:
    """Items only ours gets right, items only theirs gets right, and the exact
    two-sided McNemar p-value of that split (1 when no item splits them)."""
    only_ours = int(np.sum(ours_right & ~theirs_right))
    only_theirs = int(np.sum(theirs_right & ~ours_right))
    if only_ours + only_theirs == 0:
        return 0, 0, 1.0
    return only_ours, only_theirs, float(binomtest(only_ours, only_ours + only_theirs).pvalue)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=list(SETS), choices=SETS)
    parser.add_argument("--venv", type=Path, default=HERE / ".crowdkit-venv")
    args = parser.parse_args(argv)
    python = _crowdkit_tools().ensure_venv(args.venv, "crowd-kit==1.4.2")
    rows, lines, counts = {}, [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only:
            t0 = time.perf_counter()
            ann = load(name)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # below-chance notes on crowds
                probs, chosen = ours(ann)
            known = ann.gold >= 0
            right = {f"ours {k}": _right(p, ann) for k, p in probs.items()}
            right.update({f"ck {k}": v == ann.gold[known]
                          for k, v in crowdkit(python, ann, Path(tmp)).items()})
            rows[name] = {k: float(v.mean()) for k, v in right.items()}
            counts[name] = {k: int(np.sum(v)) for k, v in right.items()}
            mine = {k: v for k, v in rows[name].items() if k.startswith("ours")}
            theirs = {f"ck {k}": rows[name][f"ck {k}"] for k in CROWDKIT_METHODS}
            best_ours = max(mine, key=mine.get)
            best_ck = max(theirs, key=theirs.get)
            print(f"{name}: {ann.n_items} items, {ann.n_annotations} labels, "
                  f"{int(known.sum())} with gold ({time.perf_counter() - t0:.0f} s); "
                  f"{best_ours} {mine[best_ours]:.4f}, {best_ck} {theirs[best_ck]:.4f}, gap "
                  f"{mine[best_ours] - theirs[best_ck]:+.4f}", flush=True)
            only_ours, only_theirs, p = paired(right["ours auto"], right[best_ck])
            lines.append(f"{name:14s} auto ({chosen}) {mine['ours auto']:.4f}  {best_ck} "
                         f"{theirs[best_ck]:.4f}  gap {mine['ours auto'] - theirs[best_ck]:+.4f} "
                         f"({only_ours - only_theirs:+d} of {int(known.sum())} items: right "
                         f"only by auto {only_ours}, only by crowd-kit {only_theirs}; McNemar "
                         f"p {p:.2f})")
    table = pd.DataFrame(rows).T
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(table.round(4).to_string())
    print(f"auto_fit against crowd-kit's best (defaults; 'ck {CROWDKIT_CONVERGED}' and "
          f"'ck {CROWDKIT_ALIGNED}' not counted):")
    print("\n".join(lines))
    print(summed(pd.DataFrame(counts).T.astype(int), table))


def summed(counts: pd.DataFrame, accuracy: pd.DataFrame) -> str:
    """Items right summed over the sets: ``auto_fit``, each crowd-kit method, and
    the oracle pick of crowd-kit's methods per set; then the sets where
    ``auto_fit`` is below full Dawid-Skene EM by more than 0.01 or below majority
    vote (issue 42's floor)."""
    ck = [f"ck {k}" for k in CROWDKIT_METHODS]
    lines = [f"Items right over {len(counts)} sets: auto {counts['ours auto'].sum()}, "
             + ", ".join(f"{k} {counts[k].sum()}" for k in ck)
             + f"; crowd-kit's best per set (oracle) {counts[ck].max(axis=1).sum()}"]
    short = accuracy["ours auto"] < accuracy["ours DS"] - 0.01 - 1e-9
    below = accuracy["ours auto"] < accuracy["ours MV"] - 1e-9
    lines.append("auto below full DS EM - 0.01 on: " + (", ".join(accuracy.index[short]) or "none")
                 + "; below majority vote on: " + (", ".join(accuracy.index[below]) or "none"))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
