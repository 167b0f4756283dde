"""A crowd-trained classifier's regularisation chosen without gold (issue 44).

Measures and prints; it asserts nothing. ``GridSearchCV`` over one
regularisation parameter of a :class:`crowd_models.sklearn.CrowdClassifier`,
scored by :func:`crowd_models.sklearn.crowd_log_likelihood` (the held-out
items' crowd labels under the fold's annotators and classifier; no gold),
against the same estimator at every grid value scored on the new items'
gold. Columns per grid value: ``crowd ll`` (mean over the folds, nats per
label) and ``acc`` (new items); then the value the crowd likelihood picks,
its accuracy, and the grid's best accuracy (the oracle, picked on gold).

* Simulated disc (``classifier.py``'s: the truth inside a disc in two
  features, 600 training items, 5 annotators of accuracy U(0.6, 0.8), 3
  labels an item, 2,000 new items; seeds 0-2): an MLP's ``alpha`` and a
  tree's ``max_depth``, each the ``classifier=`` of the Dawid-Skene EM.
* Music genre (700 training songs, 300 test songs with gold): the softmax
  GLM's ``coef_precision``, and ``LogisticRegression``'s ``C`` and an MLP's
  ``alpha`` as ``classifier=`` (each after a ``StandardScaler`` in a
  ``Pipeline``; ``--only music-mlp`` for the MLP, about 35 minutes).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/crowd_selection.py
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/crowd_selection.py --only music
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np

FOLDS = 3
MAX_ITER = 100
TOL = 1e-3
"""The black-box EMs' stopping rule (``classifier.py``'s): 1e-3 on the labels'
log-likelihood, at most 100 steps."""


def search(estimator, grid, X, Y, X_new, gold_new):
    """(row dict): the crowd likelihood of each grid value over FOLDS folds, the
    new items' accuracy of each value fitted on all items, the pick and the oracle."""
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV, KFold

    from crowd_models.sklearn import crowd_log_likelihood

    (name, values), = grid.items()
    t0 = time.perf_counter()
    found = GridSearchCV(estimator, grid, scoring=crowd_log_likelihood, refit=False,
                         cv=KFold(FOLDS, shuffle=True, random_state=0)).fit(X, Y)
    scores = found.cv_results_["mean_test_score"]
    accs = []
    for value in values:
        model = clone(estimator).set_params(**{name: value}).fit(X, Y)
        accs.append(float(np.mean(model.predict(X_new) == gold_new)))
    pick = int(np.argmax(scores))
    return {"parameter": name, "values": values, "crowd ll": scores, "acc": accs,
            "pick": values[pick], "acc at pick": accs[pick], "oracle": max(accs),
            "s": time.perf_counter() - t0}


def show(title, row):
    print(f"\n{title}: {row['parameter']} ({row['s']:.0f} s)")
    print("  value    " + " ".join(f"{v:>9.4g}" if isinstance(v, float) else f"{v!s:>9}"
                                   for v in row["values"]))
    print("  crowd ll " + " ".join(f"{v:9.4f}" for v in row["crowd ll"]))
    print("  acc      " + " ".join(f"{v:9.3f}" for v in row["acc"]))
    print(f"  picked {row['pick']:.4g}: acc {row['acc at pick']:.3f}; oracle {row['oracle']:.3f} "
          f"({row['acc at pick'] - row['oracle']:+.3f})")


def wide(ann):
    """The label matrix ``Y`` (items x annotators) of ``ann``, rows in item order."""
    frame = ann.to_frame()
    return frame.pivot(index="item", columns="annotator", values="label").loc[ann.items]


def disc(seeds):
    from classifier import disc_crowd
    from sklearn.neural_network import MLPClassifier
    from sklearn.tree import DecisionTreeClassifier

    from crowd_models.sklearn import CrowdClassifier

    for seed in seeds:
        ann, X_new, z_new = disc_crowd(seed)
        Y = wide(ann)
        gold = ann.classes[z_new]
        mlp = MLPClassifier(hidden_layer_sizes=(32,), max_iter=500, random_state=0)
        tree = DecisionTreeClassifier(random_state=0)
        for clf, grid in ((mlp, {"classifier__alpha": [1e-4, 1e-3, 1e-2, 1e-1, 1.0]}),
                          (tree, {"classifier__max_depth": [2, 3, 5, 8, 12]})):
            est = CrowdClassifier(classifier=clf, tol=TOL, max_iter=MAX_ITER)
            show(f"disc seed {seed}, {type(clf).__name__}",
                 search(est, grid, ann.features, Y, X_new, gold))


def music():
    from sklearn.linear_model import LogisticRegression

    import crowd_models as cm
    from crowd_models.sklearn import CrowdClassifier

    train = cm.datasets.load_music_genre("train")
    test_x, test_gold = cm.datasets.load_music_genre("test")
    X_new = test_x[train.feature_names].to_numpy()
    Y = wide(train)
    show("music genre, softmax GLM (features standardised inside the fit)",
         search(CrowdClassifier(), {"coef_precision": [1.0, 3.0, 10.0, 30.0, 100.0]},
                train.features, Y, X_new, test_gold.to_numpy()))
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    lr = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
    show("music genre, classifier=StandardScaler + LogisticRegression",
         search(CrowdClassifier(classifier=lr, tol=TOL, max_iter=MAX_ITER),
                {"classifier__logisticregression__C": [1.0, 1 / 3, 0.1, 1 / 30, 0.01]},
                train.features, Y, X_new, test_gold.to_numpy()))


def music_mlp():
    """Music genre with an MLP (32 hidden units) as ``classifier=``, its ``alpha``
    over the grid ``classifier.py``'s S-hat searched (about 35 minutes)."""
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    import crowd_models as cm
    from crowd_models.sklearn import CrowdClassifier

    train = cm.datasets.load_music_genre("train")
    test_x, test_gold = cm.datasets.load_music_genre("test")
    mlp = make_pipeline(StandardScaler(), MLPClassifier(hidden_layer_sizes=(32,), max_iter=200,
                                                        random_state=0))
    show("music genre, classifier=StandardScaler + MLP(32)",
         search(CrowdClassifier(classifier=mlp, tol=TOL, max_iter=MAX_ITER),
                {"classifier__mlpclassifier__alpha": [0.1, 1.0, 10.0]}, train.features,
                wide(train), test_x[train.feature_names].to_numpy(), test_gold.to_numpy()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("disc", "music", "music-mlp"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; {FOLDS} folds")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*(Maximum iterations|converg).*")
        if args.only in (None, "music"):
            music()
        if args.only in (None, "disc"):
            disc(args.seeds)
        if args.only in (None, "music-mlp"):
            music_mlp()


if __name__ == "__main__":
    main()
