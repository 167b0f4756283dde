"""Issue 42: the pooled Dawid-Skene EM on a sparse, many-annotator crowd, and its
time as a ratio to the full model's EM in the same run.

The crowd (the same as ``tests/models/test_dawid_skene.py``'s ``_sparse_crowd``):
5 classes, 300 items (prevalence 0.35 / 0.25 / 0.2 / 0.12 / 0.08), 420
annotators with 2-6 labels each and 5 heavy ones (150, 120, 100, 80, 60
labels), accuracies uniform on 0.35-0.85, each row's errors Dirichlet(1) over
the other classes. Printed per seed, and for the bundled word-sense and
Mozafari crowds: accuracy of majority vote (ties to the first class), full DS
EM and pooled DS EM; the pooled spread; the pooled population rows' smallest
diagonal; the time of ``empirical_spread`` and of the pooled EM at that spread,
and the ratio of the pooled fit (``em(variant="pooled")``, spread included) to
the full EM. Then the default, ``auto_fit`` as a user calls it (MAP) and with
``method="em"``: its choice, accuracy and seconds, and the chosen family's EM
alone as a ratio to the full EM. Times are medians of ``--repeat`` runs; only ratios within one
run mean anything.

    .venv/bin/python benchmarks/pooled_sparse.py                 # seeds 0-3, wsd, mozafari
    .venv/bin/python benchmarks/pooled_sparse.py --seeds 0 --repeat 1
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import crowd_models as cm
from crowd_models import auto
from crowd_models.models import dawid_skene as ds


def sparse_crowd(seed: int) -> cm.Annotations:
    return ds.simulate_sparse_crowd(seed)


def median_time(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, float(np.median(times))


def accuracy(ann, prob) -> float:
    known = ann.gold >= 0
    return float(np.mean(np.asarray(prob).argmax(axis=1)[known] == ann.gold[known]))


def case(name, ann, repeat):
    vote = cm.majority_vote(ann, hard=True, ties="first").to_numpy()
    full, t_full = median_time(lambda: ds.em(ann), repeat)
    spread, t_spread = median_time(lambda: ds.empirical_spread(ann), repeat)
    fixed, t_fixed = median_time(lambda: ds.em(ann, variant="pooled", spread=spread), repeat)
    pooled, t_pooled = median_time(lambda: ds.em(ann, variant="pooled"), repeat)
    rows = pooled["confusion_mean"].values.reshape(ann.n_classes, ann.n_classes)
    acc_full = accuracy(ann, full["item_class_prob"].values[0, 0])
    print(f"{name:>14}: J={ann.n_annotators:>3} labels={ann.n_annotations:>5} | vote "
          f"{accuracy(ann, vote):.4f} full {acc_full:.4f}"
          f" pooled {accuracy(ann, pooled['item_class_prob'].values[0, 0]):.4f} | spread "
          f"{spread:.3f}, population diagonal >= {np.diag(rows).min():.2f} | full {t_full:.3f} s,"
          f" spread {t_spread:.3f} s + pooled EM {t_fixed:.3f} s | pooled/full "
          f"{t_pooled / t_full:.0f}x", flush=True)
    # the default: auto_fit as a user calls it (held-out choice, then MAP), and its EM
    chosen, t_auto = median_time(lambda: cm.auto_fit(ann), repeat)
    by_em, t_auto_em = median_time(lambda: cm.auto_fit(ann, method="em"), repeat)
    family, options = auto.family_of(by_em.attrs["model"])
    _, t_picked = median_time(lambda: family.em(ann, **options), repeat)
    print(f"{'':>14}  default: auto_fit chose {chosen.attrs['model']}: MAP "
          f"{accuracy(ann, chosen['posterior']['item_class_prob'].values[0, 0]):.4f} in "
          f"{t_auto:.2f} s, EM {accuracy(ann, by_em['item_class_prob'].values[0, 0]):.4f} in "
          f"{t_auto_em:.2f} s ({t_auto_em / t_full:.0f}x full EM); the chosen family's EM "
          f"alone {t_picked / t_full:.1f}x full EM", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2, 3])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-real", action="store_true", help="skip wsd and mozafari")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    for seed in args.seeds:
        case(f"sparse seed {seed}", sparse_crowd(seed), args.repeat)
    if not args.no_real:
        for name in ("wsd", "mozafari"):
            case(name, getattr(cm.datasets, f"load_{name}")(), args.repeat)


if __name__ == "__main__":
    main()
