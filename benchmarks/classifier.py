"""The classifier learned from the crowd (issue 44): joint EM against two-stage baselines.

Measures and prints; it asserts nothing. For each classifier, the same
estimator is trained five ways and scored on items whose gold it never saw:

* ``gold``: on the training items' gold labels (the ceiling);
* ``MV``: on the hard majority vote (ties split: a tied item enters once per
  tied class, with weight 1 / ties);
* ``decoupled``: truth first (``dawid_skene.em`` on the labels alone, package
  defaults), then the classifier on its soft labels (each item once per class,
  weighted by its posterior);
* ``joint GLM``: ``dawid_skene.em(features)`` with its built-in softmax
  classifier, predicted with ``cm.predict``;
* ``joint``: ``dawid_skene.em(features, classifier=clf)``, predicted with the
  estimator it fitted in place (``tol`` 1e-3 on the labels' log-likelihood,
  at most ``--max-iter`` steps: a refitted black box need not settle).

Five data sets (``--only`` picks one):

1. ``music``: music genre, 700 training songs with crowd labels, the 300
   test songs with gold; features standardised on the training songs.
   Regularisation chosen without gold: the 5-fold disagreement score S-hat
   (``selection.select_penalty``) of the decoupled pipeline on the training
   songs' crowd labels, one value per classifier, used by all its rows.
2. ``simulated``: the truth a disc in two features (prevalence 1/2), 600
   training items, 5 annotators of accuracy U(0.6, 0.8) symmetric, 3 labels
   an item, 2,000 new items; seeds 0-2; hyperparameters fixed a priori.
3. ``rte``: RTE's 800 items with their texts (TF-IDF of text + hypothesis,
   2,000 terms, fitted on the training fold), 5-fold cross-fitted: train on
   four fifths' crowd labels, score the held-out fifth against gold;
   hyperparameters fixed a priori. The texts are not bundled with the
   package: they are read from ``--rte-texts`` (the shared
   ``data/snow2008/rte_texts.tsv``).
4. ``gi``: GI lesions (3 classes, 7 clinicians, 698 image features), the
   stacking paper's 50 Table-7 splits (50 training, 26 test lesions, test
   gold from histology), with the paper's five features and with all 698,
   standardised on each split's training lesions; LR at C = 1 fixed a
   priori; the paper's published competitors printed beside.
5. ``ordinal``: four levels, the rings of an item's distance from the origin
   in two features (no logistic regression ranks them), 400 training items,
   5 annotators of the cumulative model (sensitivity 0.55-0.85, specificity
   0.6-0.85 per threshold), one label each, 2,000 new items; seeds 0-2. The
   cumulative model (Raykar sec. 8.2): one binary classifier per threshold
   "level > c", its regularisation chosen by the joint EM at
   ``regularization="auto"`` (scikit-learn's default as the given value);
   the gold, MV and decoupled rows train clones with the joint EM's chosen
   values on their "level > c" targets (decoupled: the cumulative EM's
   exceedance probabilities without features), and every row predicts by
   ``ordinal.classifiers_predict``. ``joint GLM``: the cumulative EM's own
   logistic regressions at their defaults.

Columns: ``acc`` and ``log loss`` on the held-out items, ``truth`` the
accuracy of the labels the classifier was trained on (training items against
gold: MV's vote, DS's or the joint EM's posterior), ``steps`` the joint EM's
steps (``*``: stopped at ``--max-iter`` without converging), ``s`` seconds.

    .venv/bin/python benchmarks/classifier.py                  # all three, ~20 min loaded
    .venv/bin/python benchmarks/classifier.py --only music     # ~3 min
    .venv/bin/python benchmarks/classifier.py --only rte       # ~12 min (the MLP's joint EM)
    .venv/bin/python benchmarks/classifier.py --only gi        # ~1 min
    .venv/bin/python benchmarks/classifier.py --only ordinal   # ~4 min
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np

RTE_TEXTS = Path(__file__).resolve().parents[2] / "shared/data/snow2008/rte_texts.tsv"
JOINT_TOL = 1e-3


# ------------------------------------------------------------------ pieces
GLM_DEFAULTS = {"softmax prec=1 (the old default)": 1.0, "softmax auto (default)": None}
"""The joint softmax GLM's rows at the package's precisions (None: the default)."""


def placed_proba(clf, X, K):
    """(item, K) probabilities of a classifier fitted to class codes, its columns
    placed by ``classes_`` (a class it never saw gets 0)."""
    proba = np.zeros((len(X), K))
    proba[:, np.asarray(clf.classes_, dtype=int)] = clf.predict_proba(X)
    return proba


def fit_soft(clf, X, soft):
    """Fit ``clf`` to (item, K) soft labels: each item once per class with a
    positive weight, that class's code its target, the weight its probability."""
    K = soft.shape[1]
    rows, targets = np.tile(X, (K, 1)), np.repeat(np.arange(K), len(X))
    weight = soft.T.ravel()
    keep = weight > 0
    return clf.fit(rows[keep], targets[keep], sample_weight=weight[keep])


def scores(proba, gold):
    from sklearn.metrics import log_loss

    K = proba.shape[1]
    return (float(np.mean(proba.argmax(axis=1) == gold)),
            float(log_loss(gold, np.clip(proba, 1e-15, 1), labels=np.arange(K))))


def two_stage(ann, clf, X_new, which):
    """(P(new items), training soft labels) of ``clf`` trained on gold, the
    majority vote or the decoupled DS posterior."""
    import crowd_models as cm
    from crowd_models.models import dawid_skene

    K = ann.n_classes
    if which == "gold":
        soft = np.eye(K)[ann.gold]
    elif which == "MV":
        soft = cm.majority_vote(ann, hard=True, ties="split").values
    else:
        soft = dawid_skene.em(ann.with_features(None))["item_class_prob"].values[0, 0]
    fit_soft(clf, ann.features, soft)
    return placed_proba(clf, X_new, K), soft


def joint(ann, clf, X_new, max_iter, coef_precision=None):
    """(P(new items), training posterior, steps, converged) of the joint EM:
    the built-in softmax GLM when ``clf`` is None."""
    import crowd_models as cm
    from crowd_models.models import dawid_skene

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*without converging.*")
        if clf is None:
            kw = {} if coef_precision is None else {"coef_precision": coef_precision}
            fit = dawid_skene.em(ann, **kw)
            proba = cm.predict(fit, X_new)["prob"].values
        else:
            fit = dawid_skene.em(ann, classifier=clf, regularization=None, tol=JOINT_TOL,
                                 max_iter=max_iter)  # the value each table chose
            proba = placed_proba(clf, X_new, ann.n_classes)
    return (proba, fit["item_class_prob"].values[0, 0], int(fit.attrs["n_iter"]),
            bool(fit.attrs["converged"]))


def run_rows(ann, X_new, gold_new, classifiers, max_iter, glm_precisions):
    """One result dict per row: classifier, row, acc, log loss, truth, steps, s."""
    from sklearn.base import clone

    out = []

    def add(name, row, proba, soft, t0, steps=""):
        acc, loss = scores(proba, gold_new)
        truth = float(np.mean(soft.argmax(axis=1) == ann.gold))
        out.append({"classifier": name, "row": row, "acc": acc, "log loss": loss,
                    "truth": truth, "steps": steps, "s": time.perf_counter() - t0})

    for name, clf in classifiers.items():
        for which in ("gold", "MV", "decoupled"):
            t0 = time.perf_counter()
            add(name, which, *two_stage(ann, clone(clf), X_new, which), t0)
        t0 = time.perf_counter()
        proba, post, steps, ok = joint(ann, clone(clf), X_new, max_iter)
        add(name, "joint", proba, post, t0, f"{steps}{'' if ok else '*'}")
    for label, precision in glm_precisions.items():
        t0 = time.perf_counter()
        proba, post, steps, ok = joint(ann, None, X_new, max_iter, precision)
        add(label, "joint GLM", proba, post, t0, f"{steps}{'' if ok else '*'}")
    return out


def print_table(rows, title):
    import pandas as pd

    table = pd.DataFrame(rows)
    group = ["classifier", "row"]
    numeric = ["acc", "log loss", "truth", "s"]
    mean = table.groupby(group, sort=False)[numeric].mean()
    steps = table.groupby(group, sort=False)["steps"].agg(lambda s: " ".join(map(str, s)))
    n = table.groupby(group, sort=False).size().iloc[0]
    print(f"\n{title}" + (f" (mean over {n})" if n > 1 else ""))
    print(f"{'classifier':<28} {'row':<10} {'acc':>6} {'log loss':>9} {'truth':>6} "
          f"{'s':>6}  steps")
    for (name, row), r in mean.iterrows():
        print(f"{name:<28} {row:<10} {r['acc']:6.3f} {r['log loss']:9.3f} {r['truth']:6.3f} "
              f"{r['s']:6.1f}  {steps[(name, row)]}")
    if n > 1:
        spread = table.groupby(group, sort=False)["acc"].agg(["min", "max"])
        print("acc min-max: " + "; ".join(
            f"{name} {row} {r['min']:.3f}-{r['max']:.3f}" for (name, row), r in spread.iterrows()))


# ------------------------------------------------------------ data sets
def music(max_iter):
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from sklearn.preprocessing import StandardScaler

    import crowd_models as cm
    from crowd_models import selection

    train = cm.datasets.load_music_genre("train")
    test_x, test_gold = cm.datasets.load_music_genre("test")
    scaler = StandardScaler().fit(train.features)
    ann = train.with_features(scaler.transform(train.features))
    X_new = scaler.transform(test_x[train.feature_names].to_numpy())
    gold_new = np.asarray(train.classes.get_indexer(test_gold))

    def make_lr(precision):
        return LogisticRegression(C=1 / precision, max_iter=1000)

    def make_mlp(alpha):
        return MLPClassifier(hidden_layer_sizes=(32,), alpha=alpha, max_iter=200,
                             random_state=0)

    def decoupled_fit_predict(make):
        def fit_predict(tr, x, value):
            return two_stage(tr, make(value), x, "decoupled")[0]
        return fit_predict

    chosen = {}
    for label, make, grid in (("LR", make_lr, [1, 3, 10, 30, 100]),
                              ("MLP", make_mlp, [0.1, 1, 10])):
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*(Maximum iterations|converg).*")
            pick = selection.select_penalty(ann, grid, fit_predict=decoupled_fit_predict(make),
                                            rng=0)
        chosen[label] = pick.penalty
        shown = ", ".join(f"{v:g}: {s:.4f}" for v, s in pick.scores["disagreement"].items())
        print(f"S-hat of decoupled + {label} ({'coef precision 1/C' if label == 'LR' else 'alpha'}"
              f"; {time.perf_counter() - t0:.0f} s): {shown}; chosen {pick.penalty:g}")
    precision, alpha = chosen["LR"], chosen["MLP"]
    classifiers = {f"LR C={1 / precision:g}": make_lr(precision),
                   f"MLP(32) alpha={alpha:g}": make_mlp(alpha)}
    glm = {f"softmax prec={precision:g}": precision, **GLM_DEFAULTS}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Maximum iterations.*")
        rows = run_rows(ann, X_new, gold_new, classifiers, max_iter, glm)
    print_table(rows, "1. Music genre: 300 test songs against gold")


def disc_crowd(seed, n_train=600, n_new=2000):
    from crowd_models.models import dawid_skene

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_train + n_new, 2))
    z = (np.sum(X ** 2, axis=1) < 2 * np.log(2)).astype(int)  # P(inside) = 1/2
    acc = rng.uniform(0.6, 0.8, 5)
    conf = np.stack([[[a, 1 - a], [1 - a, a]] for a in acc])
    ann = dawid_skene.simulate(conf, features=X[:n_train], true_labels=z[:n_train],
                               labels_per_item=3, rng=rng)
    return ann, X[n_train:], z[n_train:]


def simulated(max_iter, seeds):
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from sklearn.preprocessing import StandardScaler
    from sklearn.tree import DecisionTreeClassifier

    classifiers = {
        "LR C=1": LogisticRegression(C=1.0),
        "tree depth 5": DecisionTreeClassifier(max_depth=5, random_state=0),
        "MLP(32) alpha=1e-3": MLPClassifier(hidden_layer_sizes=(32,), alpha=1e-3,
                                            max_iter=500, random_state=0),
    }
    rows = []
    for seed in seeds:
        ann, X_new, z_new = disc_crowd(seed)
        scaler = StandardScaler().fit(ann.features)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*Maximum iterations.*")
            rows += run_rows(ann.with_features(scaler.transform(ann.features)),
                             scaler.transform(X_new), z_new, classifiers, max_iter,
                             GLM_DEFAULTS)
    print_table(rows, f"2. Simulated disc: 2,000 new items, seeds {list(seeds)}")


ORDINAL_SENSITIVITY = [[0.85, 0.8, 0.75], [0.7, 0.65, 0.6], [0.8, 0.75, 0.7],
                       [0.65, 0.6, 0.55], [0.75, 0.7, 0.65]]
ORDINAL_SPECIFICITY = [[0.6, 0.7, 0.8], [0.65, 0.7, 0.75], [0.7, 0.75, 0.85],
                       [0.6, 0.65, 0.7], [0.7, 0.75, 0.8]]


def rings_crowd(seed, n_train=400, n_new=2000):
    """Four levels by the distance from the origin; the cumulative model's crowd."""
    from crowd_models.models import ordinal

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_train + n_new, 2))
    level = np.digitize(np.hypot(*X.T), [0.75, 1.2, 1.7])
    ann = ordinal.simulate(variant="cumulative", sensitivity=ORDINAL_SENSITIVITY,
                           specificity=ORDINAL_SPECIFICITY, true_labels=level[:n_train],
                           rng=rng)
    return ann.with_features(X[:n_train]), X[n_train:], level[n_train:]


def ordinal_rows(ann, X_new, gold_new, name, clf, max_iter):
    """The five rows of one classifier on one rings crowd (see the docstring)."""
    from sklearn.base import clone

    import crowd_models as cm
    from crowd_models.models import ordinal

    T, out = ann.n_classes - 1, []

    def add(row, proba, soft, t0, steps=""):
        acc, loss = scores(proba, gold_new)
        truth = float(np.mean(soft.argmax(axis=1) == ann.gold))
        out.append({"classifier": name, "row": row, "acc": acc, "log loss": loss,
                    "truth": truth, "steps": steps, "s": time.perf_counter() - t0})

    def two_stage(row, exceed, soft, chosen):
        t0 = time.perf_counter()
        fitted = [fit_soft(c, ann.features, np.column_stack([1 - exceed[:, t], exceed[:, t]]))
                  for t, c in enumerate(clone(c) for c in chosen)]
        add(row, ordinal.classifiers_predict(fitted, X_new), soft, t0)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the repair; a tree's EM cycling
        t0 = time.perf_counter()
        if clf is None:
            fit = ordinal.em(ann)
            add("joint GLM", cm.predict(fit, X_new)["prob"].values,
                fit["item_class_prob"].values[0, 0], t0, str(fit.attrs["n_iter"]))
            return out
        joint = [clone(clf) for _ in range(T)]
        fit = ordinal.em(ann, classifier=joint, tol=JOINT_TOL, max_iter=max_iter)
        steps = f"{fit.attrs['n_iter']}{'' if fit.attrs['converged'] else '*'}"
        add("joint", ordinal.classifiers_predict(joint, X_new),
            fit["item_class_prob"].values[0, 0], t0, steps)
        levels = np.arange(ann.n_classes)
        gold = np.eye(ann.n_classes)[ann.gold]
        two_stage("gold", (ann.gold[:, None] > levels[:T]).astype(float), gold, joint)
        mv = cm.majority_vote(ann.with_features(None), hard=True, ties="split").values
        two_stage("MV", 1 - np.cumsum(mv, axis=1)[:, :T], mv, joint)
        labels_only = ordinal.em(ann.with_features(None))
        two_stage("decoupled", labels_only["exceed_prob"].values[0, 0],
                  labels_only["item_class_prob"].values[0, 0], joint)
    chosen = "; ".join(t.split(" chosen")[0] for t in fit.attrs["classifier_tuning"])
    print(f"  {name}, thresholds' choice: {chosen}")
    return out


def ordinal_rings(max_iter, seeds):
    from sklearn.neural_network import MLPClassifier
    from sklearn.tree import DecisionTreeClassifier

    classifiers = {"tree (auto depth)": DecisionTreeClassifier(random_state=0),
                   "MLP(32) (auto alpha)": MLPClassifier(hidden_layer_sizes=(32,),
                                                         max_iter=500, random_state=0),
                   "logistic (built in)": None}
    rows = []
    for seed in seeds:
        ann, X_new, level_new = rings_crowd(seed)
        print(f"seed {seed}")
        for name, clf in classifiers.items():
            rows += ordinal_rows(ann, X_new, level_new, name, clf, max_iter)
    print_table(rows, f"5. Ordinal rings, cumulative model: 2,000 new items, seeds "
                      f"{list(seeds)}")


def rte(max_iter, path, n_folds=5):
    import pandas as pd
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier

    import crowd_models as cm
    from crowd_models import selection

    texts = pd.read_csv(path, sep="\t", dtype={"id": str}).set_index("id")
    ann = cm.datasets.load_rte()
    items = pd.Index([str(i) for i in ann.items])
    missing = items.difference(texts.index)
    if len(missing):
        raise SystemExit(f"{path}: no text for {len(missing)} RTE items, e.g. {list(missing[:5])}")
    docs = (texts["text"] + " " + texts["hypothesis"]).reindex(items)
    agree = np.mean((texts["value"].reindex(items).astype(str).str.upper() == "TRUE")
                    == (ann.gold == 1))
    print(f"RTE texts: {path} ({len(texts)} rows; its TRUE/FALSE agrees with the bundled "
          f"gold on {agree:.3f} of the items)")
    classifiers = {"LR C=1": LogisticRegression(C=1.0),
                   "MLP(32) alpha=1e-2": MLPClassifier(hidden_layer_sizes=(32,), alpha=1e-2,
                                                       max_iter=300, random_state=0)}
    placeholder = np.zeros((ann.n_items, 1))
    rows = []
    for train, held in selection.kfold_items(ann.with_features(placeholder), n_folds, rng=0):
        vec = TfidfVectorizer(max_features=2000, sublinear_tf=True)
        X_train = vec.fit_transform(docs.loc[[str(i) for i in train.items]]).toarray()
        X_held = vec.transform(docs.loc[[str(i) for i in held.items]]).toarray()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*Maximum iterations.*")
            rows += run_rows(train.with_features(X_train), X_held, held.gold, classifiers,
                             max_iter, GLM_DEFAULTS)
    print_table(rows, f"3. RTE with TF-IDF: {n_folds}-fold cross-fitted, held-out gold")


GI_PUBLISHED = {"Dawid-Skene": 0.598, "Raykar": 0.565, "Rodrigues": 0.642}
"""Montani & Cappozzo's competitors on the same 50 splits, five paper features
(``shared/data/gi_lesions/paper_results/table6_julia_competitors.csv``)."""


def gi(max_iter, n_splits=50):
    """GI lesions (3 classes, 7 clinicians), the stacking paper's 50 Table-7 splits
    (50 training, 26 test lesions): with its five features and with all 698."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    import crowd_models as cm

    full = cm.datasets.load_gi_lesions("3class", features="all", light="paper")
    every = dict(zip(full.items, full.features, strict=True))
    classifiers = {"LR C=1": LogisticRegression(C=1.0, max_iter=2000)}
    splits = [cm.datasets.load_gi_lesions_split(k, run="table7") for k in range(1, n_splits + 1)]
    for features in ("paper", "all"):
        rows = []
        for split in splits:
            train, test = split["train"], split["test_features"]
            if features == "all":
                X_train = np.stack([every[i] for i in train.items])
                X_test = np.stack([every[i] for i in test.index])
            else:
                X_train, X_test = train.features, test.to_numpy()
            scaler = StandardScaler().fit(X_train)
            gold = train.classes.get_indexer(split["test_gold"])
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*(Maximum iterations|converg).*")
                rows += run_rows(train.with_features(scaler.transform(X_train)),
                                 scaler.transform(X_test), gold, classifiers, max_iter,
                                 GLM_DEFAULTS)
        print_table(rows, f"4. GI lesions, {X_train.shape[1]} features, the paper's "
                          f"{n_splits} splits (26 test lesions each)")
        default = [r["acc"] for r in rows if r["row"] == "joint GLM" and "auto" in r["classifier"]]
        for base in ("MV", "decoupled"):
            other = [r["acc"] for r in rows if r["row"] == base]
            diff = np.subtract(default, other)
            print(f"joint GLM (default) - {base} + LR, split by split: mean {diff.mean():+.3f}, "
                  f"ahead on {np.sum(diff > 0)}, level on {np.sum(diff == 0)}, behind on "
                  f"{np.sum(diff < 0)} of {n_splits}")
    print("published on these splits, five features: " + ", ".join(
        f"{name} {acc:.3f}" for name, acc in GI_PUBLISHED.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("music", "simulated", "rte", "gi", "ordinal"))
    parser.add_argument("--max-iter", type=int, default=100,
                        help="steps of the joint EM with a scikit-learn classifier")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rte-texts", type=Path, default=RTE_TEXTS)
    args = parser.parse_args()
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)  # small solves: threads only contend on the shared machine
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    if args.only in (None, "music"):
        music(args.max_iter)
    if args.only in (None, "simulated"):
        simulated(args.max_iter, args.seeds)
    if args.only in (None, "rte"):
        rte(args.max_iter, args.rte_texts)
    if args.only in (None, "gi"):
        gi(args.max_iter)
    if args.only in (None, "ordinal"):
        ordinal_rings(args.max_iter, args.seeds)


if __name__ == "__main__":
    main()
