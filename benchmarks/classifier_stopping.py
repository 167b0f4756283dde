"""When a black-box classifier's EM stops, and which step it returns (issue 44).

Measures and prints; it asserts nothing. ``_common.classifier_em`` fits a
scikit-learn classifier to the soft labels at every step; a tree or a forest
jumps between step functions, and the labels' log-likelihood can wander by a
nat or so without settling. Three stopping rules, each with ``tol`` 1e-3 on
the labels' log-likelihood and at most ``--max-iter`` steps:

* ``last``: stop when the log-likelihood moves by less than ``tol``, else at
  ``max_iter``, and return the last step (the rule before 2026-12-07);
* ``turns``: the same, but also stop when the log-likelihood has turned (a
  rise then a fall, or the reverse, each by more than
  ``_common.CLASSIFIER_TURN_SIZE`` of it) ``_common.CLASSIFIER_TURNS`` times, and
  return the last step (the rule now);
* ``turns, best``: stop as ``turns`` does, and return the step with the
  highest log-likelihood.

One EM per set and classifier gives all three: its steps run to ``--max-iter``
whatever happens, recording the log-likelihood and the accuracy on the new
items at every step, and each rule is read off that trace. The classifier's
regularisation is what ``regularization="auto"`` picks (tuned before the
EM, as ``em`` does). Sets: ``crowd_selection.py``'s (the disc with an MLP, a
tree and a forest; the embedding crowds with 200 and 1,000 features, LR and
MLP; music genre, LR and MLP). Then leave one design out between the rules.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/classifier_stopping.py
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/classifier_stopping.py --designs disc
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np

TOL = 1e-3


def traced_em(record):
    """A stand-in for ``_common.classifier_em`` that runs all ``max_iter`` steps of
    the same updates and records each step's log-likelihood and new-item accuracy."""
    from crowd_models.models import _common as C

    def run(annotations, classifier, prob, rates, log_confusion, *, tol, max_iter):
        X, K = annotations.features, annotations.n_classes
        rows, targets = np.tile(X, (K, 1)), np.repeat(np.arange(K), len(X))
        plain = annotations.with_features(None)
        record["loglik"], record["acc"] = [], []
        for _ in range(max_iter):
            params = rates(plain, prob)
            C.fit_weighted(classifier, rows, targets, np.asarray(prob, dtype=float).T.ravel())
            prob, item_ll = C.posterior_from_joint(
                C.item_joint_np(log_confusion(params), annotations)
                + C.classifier_log_prior(classifier, X, K), overwrite=True)
            record["loglik"].append(float(item_ll.sum()))
            codes = np.asarray(classifier.classes_)[
                classifier.predict_proba(record["X_new"]).argmax(axis=1)]
            record["acc"].append(float(np.mean(codes == record["gold"])))
        return params, prob, item_ll, max_iter, False, {}

    return run


RULES = ("last", "turns", "turns, best")


def stop(loglik, rule):
    """(steps run, the step returned, converged), 1-based, of ``rule`` on a trace."""
    from crowd_models.models._common import CLASSIFIER_TURN_SIZE, CLASSIFIER_TURNS

    previous, rising, turns, best_step = -np.inf, None, 0, 0
    for step, value in enumerate(loglik, start=1):
        if abs(value - previous) < TOL:
            return step, step, True
        if step > 1 and abs(value - previous) > CLASSIFIER_TURN_SIZE * abs(value):
            turns += rising is not None and rising != (value > previous)
            rising = value > previous
        previous = value
        if best_step == 0 or value > loglik[best_step - 1]:
            best_step = step
        if rule != "last" and turns >= CLASSIFIER_TURNS:
            return step, (best_step if rule == "turns, best" else step), False
    return len(loglik), len(loglik), False


def outcome(row, rule):
    """{steps, kept, converged, acc} of ``rule`` on a row's trace."""
    steps, kept, converged = stop(row["loglik"], rule)
    return {"steps": steps, "kept": kept, "converged": converged, "acc": row["acc"][kept - 1]}


def run(designs, seeds, max_iter):
    from crowd_selection import default_sets
    from sklearn.base import clone

    from crowd_models.models import _common, dawid_skene, two_coin

    record = {}
    _common.classifier_em = traced_em(record)
    rows = []
    for set_name, family, ann, X_new, gold, classifiers in default_sets(seeds, designs):
        module = {"dawid_skene": dawid_skene, "two_coin": two_coin}[family]
        for clf_name, clf in classifiers:
            record.update(X_new=X_new, gold=gold)
            model = clone(clf)
            t0 = time.perf_counter()
            fit = module.em(ann, classifier=model, tol=TOL, max_iter=max_iter)
            seconds = time.perf_counter() - t0
            row = {"set": set_name, "classifier": clf_name,
                   "tuning": fit.attrs["classifier_tuning"].split(" chosen")[0],
                   "loglik": record["loglik"], "acc": record["acc"], "s": seconds}
            rows.append(row)
            last, turns = outcome(row, "last"), outcome(row, "turns, best")
            print(f"  {set_name:<16} {clf_name:<8} {row['tuning']:<32} last: {last['steps']:>3} "
                  f"steps{'' if last['converged'] else '*'} acc {last['acc']:.3f} | turns, best: "
                  f"{turns['steps']:>3} steps, kept {turns['kept']:>3}"
                  f"{'' if turns['converged'] else '*'} acc {turns['acc']:.3f} | best step on "
                  f"the trace {int(np.argmax(row['loglik'])) + 1} | {seconds:.0f} s for "
                  f"{max_iter} steps", flush=True)
    return rows


def tables(rows):
    from crowd_selection import leave_one_design_out

    chosen = leave_one_design_out(rows, RULES, lambda r, rule: outcome(r, rule)["acc"],
                                  "between the rules", width=13)
    for rule in RULES:
        runs = [outcome(r, rule) for r in rows]
        print(f"  always {rule}: mean accuracy {np.mean([o['acc'] for o in runs]):.4f}, steps "
              f"{np.mean([o['steps'] for o in runs]):.1f} on average "
              f"({sum(not o['converged'] for o in runs)} of {len(runs)} not converged)")
    print(f"  chosen out of design: mean {np.mean(chosen):.4f}")


def main() -> None:
    from crowd_selection import DESIGNS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--designs", nargs="+", choices=DESIGNS, default=list(DESIGNS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--max-iter", type=int, default=100)
    parser.add_argument("--rows-out", help="save the rows (JSON) here")
    parser.add_argument("--tables", nargs="+", metavar="ROWS.json",
                        help="print the table of saved rows and stop")
    args = parser.parse_args()
    import json

    if args.tables:
        tables([row for path in args.tables for row in json.load(open(path))])
        return
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; tol {TOL}, "
          f"{args.max_iter} steps traced")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*(Maximum iterations|converg).*")
        rows = run(args.designs, args.seeds, args.max_iter)
    if args.rows_out:
        with open(args.rows_out, "w") as out:
            json.dump(rows, out)
    tables(rows)


if __name__ == "__main__":
    main()
