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

``--only defaults``: the default of a black-box ``classifier=``,
``regularization="auto"``, against the classifier as given. For each set and
classifier, the Dawid-Skene (disc, music) or two-coin (embedding) EM at every
value of the classifier's grid and its further values (``models/_tuning.GRIDS``),
scored on the new items' gold; the value four gold-free criteria pick from the
same cross-fitted predictions of the labels-only soft labels (``CRITERIA``) on
the grid alone; the value ``regularization="auto"`` picks (past the grid's
strong end where it scores best there) and the one it would pick on the grid
alone (``fixed grid``); then leave one design out among the criteria, and
among as given, the fixed grid and "auto". Designs: the disc above (an MLP,
a tree, a forest of 50 trees), ``classifier_prior.py``'s embedding crowds with
200 and 1,000 features (a logistic regression and an MLP, each after a
``StandardScaler``), music genre (the same two). About 45 minutes as two jobs
(``--designs disc music`` and ``--designs embedding200 embedding1000``, each
with its ``--rows-out``; ``--tables A.json B.json`` prints the tables of both).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/crowd_selection.py
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/crowd_selection.py --only music
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/crowd_selection.py --only defaults
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
    if estimator.classifier is not None:  # the grid's value as given, not tuned again
        estimator = clone(estimator).set_params(regularization=None)
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


CRITERIA = ("marginal", "xent", "brier", "expacc")
"""Gold-free scores of the cross-fitted classifiers' held-out predictions p
against the labels-only soft labels q: ``marginal``, the held-out crowd labels'
likelihood (sum_i log sum_c p_ic L_ic, L the labels' likelihood given the
class; ``crowd_log_likelihood``'s score); ``xent``, the expected log loss
-sum q log p; ``brier``, the expected Brier score sum (q - p)^2 (the one
``regularization="auto"`` uses); ``expacc``, the expected accuracy sum_i
q_i[argmax p_i]."""


def grid_row(set_name, family, ann, X_new, gold, clf_name, clf):
    """One set and classifier: the joint EM's accuracy on the new items at each
    value of the classifier's grid (``_tuning.GRIDS``), the value each gold-free
    criterion picks, the value ``regularization="auto"`` picks, and the index of
    scikit-learn's default (the classifier as given)."""
    import inspect

    from scipy.special import logsumexp
    from sklearn.base import clone

    from crowd_models.models import _common, _tuning, dawid_skene, two_coin

    module = {"dawid_skene": dawid_skene, "two_coin": two_coin}[family]
    last = _common.last_step(clf)
    step = clf if last is None else last[1]
    base, fixed, further = _tuning.GRIDS[type(step).__name__]
    grid = tuple(reversed(further)) + tuple(fixed)  # every value "auto" may try, strongest first
    first = len(further)  # the fixed grid's first index in it
    name = base if last is None else f"{last[0]}__{base}"
    default = inspect.signature(type(step).__init__).parameters[base].default
    t0 = time.perf_counter()
    probe = clone(clf)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fit = module.em(ann, classifier=probe, tol=TOL, max_iter=1)
    tried = fit.attrs["classifier_grid"].split(", ")
    auto = [repr(v) for v in grid].index(tried[int(np.argmin(fit.attrs["classifier_brier"]))])
    tuning_s = time.perf_counter() - t0
    plain = module.em(ann.with_features(None), **(
        {"prevalence_prior": 1.0} if family == "dawid_skene" else {}))
    q = plain["item_class_prob"].values[0, 0]
    if family == "dawid_skene":
        log_confusion = np.log(np.clip(plain["confusion"].values[0, 0], 1e-300, 1))
    else:
        sens, spec = (plain[v].values[0, 0] for v in ("sensitivity", "specificity"))
        log_confusion = np.log(np.stack([np.stack([spec, 1 - spec], -1),
                                         np.stack([1 - sens, sens], -1)], 1))
    joint = _common.item_joint_np(log_confusion, ann)
    P = _tuning.held_out_predictions(ann, clf, name, grid, q)
    logP = np.log(np.maximum(P, 1e-300))
    scores = {"marginal": logsumexp(joint + logP, axis=2).sum(axis=1),
              "xent": np.sum(q * logP, axis=(1, 2)),
              "brier": -np.sum((q - P) ** 2, axis=(1, 2)),
              "expacc": np.take_along_axis(q[None], P.argmax(axis=2)[..., None],
                                           axis=2).sum(axis=(1, 2))}
    accs, seconds = [], []
    for value in grid:
        model = clone(clf).set_params(**{name: value})
        t0 = time.perf_counter()
        module.em(ann, classifier=model, regularization=None, tol=TOL, max_iter=MAX_ITER)
        seconds.append(time.perf_counter() - t0)
        accs.append(float(np.mean(_codes_predicted(model, X_new) == gold)))
    row = {"set": set_name, "classifier": clf_name, "parameter": name,
           "grid": [repr(v) for v in grid], "acc": accs,
           "picks": {c: first + int(np.argmax(scores[c][first:])) for c in CRITERIA},
           "fixed grid": first + int(np.argmax(scores["brier"][first:])),
           "auto": auto, "as given": [repr(v) for v in grid].index(repr(default)),
           "tuning s": tuning_s, "em s": float(np.median(seconds))}
    print(f"  {set_name:<16} {clf_name:<8} {name}: "
          + " ".join(f"{g}:{a:.3f}" for g, a in zip(row["grid"], accs, strict=True))
          + f" | as given {accs[row['as given']]:.3f}, fixed grid "
          f"{row['grid'][row['fixed grid']]} {accs[row['fixed grid']]:.3f}, auto "
          f"{row['grid'][auto]} {accs[auto]:.3f}, oracle {max(accs):.3f} | "
          + ", ".join(f"{c} {row['grid'][i]}" for c, i in row["picks"].items())
          + f" | tuning {tuning_s:.0f} s, an EM {row['em s']:.0f} s", flush=True)
    return row


def _codes_predicted(model, X):
    return np.asarray(model.classes_)[np.argmax(model.predict_proba(X), axis=1)]


def default_sets(seeds, which):
    """(set, family, annotations, new features, new items' class codes,
    [(name, classifier)]) of the designs in ``which``."""
    from classifier import disc_crowd
    from classifier_prior import embedding_crowd
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.tree import DecisionTreeClassifier

    import crowd_models as cm

    def mlp(max_iter):
        return make_pipeline(StandardScaler(), MLPClassifier(
            hidden_layer_sizes=(32,), max_iter=max_iter, random_state=0))

    lr = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
    if "disc" in which:
        for seed in seeds:
            ann, X_new, z_new = disc_crowd(seed)
            yield (f"disc {seed}", "dawid_skene", ann, X_new, z_new, [
                ("MLP(32)", mlp(500)), ("tree", DecisionTreeClassifier(random_state=0)),
                ("forest", RandomForestClassifier(n_estimators=50, random_state=0))])
    for d in (200, 1000):
        if f"embedding{d}" in which:
            for seed in seeds:
                ann, X_new, z_new = embedding_crowd(d, seed)
                yield (f"embedding {d} {seed}", "two_coin", ann, X_new, z_new,
                       [("LR", lr), ("MLP(32)", mlp(200))])
    if "music" in which:
        train = cm.datasets.load_music_genre("train")
        test_x, test_gold = cm.datasets.load_music_genre("test")
        codes = np.searchsorted(train.classes, test_gold.to_numpy())
        yield ("music", "dawid_skene", train, test_x[train.feature_names].to_numpy(), codes,
               [("LR", lr), ("MLP(32)", mlp(200))])


DESIGNS = ("disc", "embedding200", "embedding1000", "music")


def defaults(seeds, which, rows_out):
    """Every grid value's accuracy and every criterion's pick, saved to ``rows_out``."""
    import json

    print("\nThe joint EM's accuracy on the new items at each grid value; the picks")
    rows = [grid_row(set_name, family, ann, X_new, gold, clf_name, clf)
            for set_name, family, ann, X_new, gold, classifiers in default_sets(seeds, which)
            for clf_name, clf in classifiers]
    with open(rows_out, "w") as out:
        json.dump(rows, out)
    tables(rows)


def leave_one_design_out(rows, rules, acc, title, width=10):
    """Print, per design held out (a design: every seed and classifier of one
    kind of set), the mean accuracy ``acc(row, rule)`` of each rule on it and
    the rule with the best mean on the other designs; return the accuracies of
    the rules so chosen, row by row."""

    def design(r):
        return r["set"].rsplit(" ", 1)[0] if r["set"][-1].isdigit() else r["set"]

    print(f"\nLeave one design out, {title} (mean accuracy on the held-out design)")
    print(f"  {'held out':<16}" + "".join(f"{r:>{width}}" for r in rules)
          + "  picked on the others")
    chosen = []
    for held in sorted({design(r) for r in rows}):
        others = [r for r in rows if design(r) != held]
        pick = max(rules, key=lambda rule: np.mean([acc(r, rule) for r in others]))
        mine = [r for r in rows if design(r) == held]
        chosen += [acc(r, pick) for r in mine]
        print(f"  {held:<16}" + "".join(f"{np.mean([acc(r, rule) for r in mine]):{width}.3f}"
                                        for rule in rules) + f"  {pick}")
    return chosen


def tables(rows):
    """Leave one design out: among the gold-free criteria, and the default
    ("auto") against the classifier as given."""

    def acc(r, rule):
        index = r["picks"][rule] if rule in CRITERIA else r[rule]
        return r["acc"][index]

    for title, rules in (("among the gold-free criteria", CRITERIA),
                         ("the default against the classifier as given, and the fixed grid",
                          ("as given", "fixed grid", "auto"))):
        chosen = leave_one_design_out(rows, rules, acc, title)
        for rule in rules:
            gaps = [acc(r, rule) - max(r["acc"]) for r in rows]
            print(f"  always {rule}: mean {np.mean([acc(r, rule) for r in rows]):.4f}, worst "
                  f"under the oracle {min(gaps):+.3f}, within 0.01 of it on "
                  f"{sum(g >= -0.01 for g in gaps)} of {len(gaps)}")
        print(f"  chosen out of design: mean {np.mean(chosen):.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("disc", "music", "music-mlp", "defaults"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--designs", nargs="+", choices=DESIGNS, default=list(DESIGNS),
                        help="--only defaults: the designs to run")
    parser.add_argument("--rows-out", default="crowd_selection_rows.json",
                        help="--only defaults: where to save the rows")
    parser.add_argument("--tables", nargs="+", metavar="ROWS.json",
                        help="print the leave-one-design-out tables of saved rows and stop")
    args = parser.parse_args()
    if args.tables:
        import json

        tables([row for path in args.tables for row in json.load(open(path))])
        return
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
        if args.only in (None, "defaults"):
            defaults(args.seeds, args.designs, args.rows_out)


if __name__ == "__main__":
    main()
