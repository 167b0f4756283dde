"""The cumulative ordinal model's classifier prior chosen by the crowd labels'
evidence (issue 44): ``ordinal.em(coef_precision="auto")`` (each threshold's
two-coin evidence) against the old default precision 1, by leave one set out.

Simulated crowds of K = 4 levels: 300 training items with d features, the
true level an ordered logit of the features (cut points at -2, 0 and 2 on
the latent scale, logistic noise); 6 annotators with per-threshold
sensitivity and specificity from U(0.6, 0.9) (sensitivity falling and
specificity rising over the thresholds, so that the labels come from one
confusion matrix), 3 labels an item. Two designs: ``dense`` (d standard
normal features, every coefficient N(0, 9 / d): the latent mean's sd is 3
whatever d) and ``embedding`` (10 latent factors seen through d noisy
loadings, the latent mean a regression on the factors with sd 3), at d = 5,
20, 100 and 200, three seeds each. Printed per crowd: the error rate on
2,000 new items of the most probable level under ``cm.predict`` at
precision 1, at ``"auto"`` and at the best precision of a grid 10^-2 ...
10^4 in hindsight (oracle), the mean absolute level error of the same
predictions, and ``"auto"``'s precisions (one per threshold) and seconds.
Then leave one set out (a design and a d, its seeds averaged): the rule
with the lower mean error rate relative to the oracle's on the other sets,
and its ratio on the held-out one.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/ordinal_prior.py   # ~2 min

Both variants also print the log loss of the new items' true levels under
each rule (``ll``; a probability below :data:`FLOOR` counted as it, and
``floored`` says how many, rule by rule) and the grid's best log loss, and a
second leave one set out on it: a rule can win the error rate with
probabilities far from the truth's.

``--variant latent`` scores the latent variant's ordered logit on the same
crowds instead (its annotators' bias-and-noise model is not the one that
made the labels; its truth's ordered logit is the one that made the
levels): MAP fits (``cm.fit_map``) at precision 1 (its default until
2026-12-08), at ``ordinal.pooled_precision`` (``pooled``, its "auto" since)
and at the latent model's own evidence (``evidence``, :func:`latent_evidence`)
and over the grid. About 4 minutes.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from continuous_prior import leave_one_set_out
from scipy.special import expit

import crowd_models as cm
from crowd_models.models import _common as C
from crowd_models.models import _evidence, ordinal

GRID = tuple(10.0 ** k for k in range(-2, 5))
RULES = {"cumulative": ("precision 1", "auto"),
         "latent": ("precision 1", "pooled", "evidence")}
NODES, WEIGHTS = np.polynomial.hermite_e.hermegauss(20)  # E f(N(0, 1)) = sum WEIGHTS f(NODES)
WEIGHTS = WEIGHTS / WEIGHTS.sum()
CUTS = np.array([-2.0, 0.0, 2.0])
N_ANNOTATORS = 6


def crowd(design: str, d: int, seed: int, n: int = 300, n_new: int = 2000):
    """(training annotations with features, the new items' features, their true
    level codes 0..3)."""
    rng = np.random.default_rng([d, seed, design == "embedding"])
    if design == "embedding":
        factors = rng.normal(size=(n + n_new, 10))
        X = factors @ rng.normal(size=(10, d)) / np.sqrt(10) + 0.5 * rng.normal(size=(n + n_new,
                                                                                    d))
        mean = factors @ rng.normal(0, 3 / np.sqrt(10), 10)
    else:
        X = rng.normal(size=(n + n_new, d))
        mean = X @ rng.normal(0, 3 / np.sqrt(d), d)
    level = np.searchsorted(CUTS, mean + rng.logistic(size=n + n_new))
    T = len(CUTS)
    sens = np.sort(rng.uniform(0.6, 0.9, (N_ANNOTATORS, T)), axis=1)[:, ::-1]
    spec = np.sort(rng.uniform(0.6, 0.9, (N_ANNOTATORS, T)), axis=1)
    ann = ordinal.simulate(variant="cumulative", sensitivity=sens, specificity=spec,
                           true_labels=level[:n], labels_per_item=3, rng=rng)
    return ann.with_features(X[:n]), X[n:], level[n:]


FLOOR = 1e-4
"""The log loss counts a true level's probability below this as this: the
cumulative model's levels are differences of K - 1 separately fitted
exceedance curves, and where two cross a level gets probability 0."""


def new_item_scores(fit, X_new, level_new) -> tuple[float, float, float, int]:
    """(error rate, mean absolute level error) of the most probable level, the log
    loss of the true levels and how many of them it counted at :data:`FLOOR`."""
    prob = cm.predict(fit, X_new)["prob"].values
    best = prob.argmax(axis=1)
    truth = prob[np.arange(len(level_new)), level_new]
    return (float(np.mean(best != level_new)), float(np.mean(np.abs(best - level_new))),
            float(-np.mean(np.log(np.maximum(truth, FLOOR)))), int(np.sum(truth < FLOOR)))


def _curvature(eta, cuts, log_labels):
    """-d^2/d eta^2 of log sum_k P(level k | eta) P(labels | k), the labels'
    marginal log-likelihood in an item's ordered-logit predictor ``eta`` (item,
    node); ``log_labels`` (item, level)."""
    below = expit(cuts - eta[..., None])  # P(level <= c)
    slope, bend = below * (1 - below), (1 - 2 * below) * below * (1 - below)

    def levels(a, lo, hi):  # the K levels' differences of the K - 1 thresholds' values
        return np.diff(np.concatenate([np.full((*a.shape[:-1], 1), lo), a,
                                       np.full((*a.shape[:-1], 1), hi)], axis=-1), axis=-1)

    L = np.exp(log_labels - log_labels.max(axis=1, keepdims=True))[:, None, :]
    m = (levels(below, 0.0, 1.0) * L).sum(-1)
    m1, m2 = (-levels(slope, 0.0, 0.0) * L).sum(-1), (levels(bend, 0.0, 0.0) * L).sum(-1)
    return (m1 / m) ** 2 - m2 / m


def latent_evidence(ann):
    """The latent fit at its own evidence's precision: MacKay's update alpha <-
    gamma / |coef|^2 on MAP fits, gamma from the labels' marginal curvature in
    each item's predictor x . coef (the other parameters held at the MAP),
    averaged over its Laplace posterior N(eta, s^2) by Gauss-Hermite, as
    ``_evidence.averaged_curvature`` does for the logits. (fit, alpha)."""
    std = ann.standardized()
    X, _ = _evidence.row_space(std.features - std.features.mean(axis=0))

    def fit_at(alpha, previous):
        fit = cm.fit_map(ordinal.build_model(ann, variant="latent", coef_precision=alpha),
                         start=previous, compare_em=False)
        post = fit.posterior.isel(chain=0, draw=0)
        coef, cuts = post["coef"].values, post["truth_cutpoints"].values
        log_labels = C.item_joint_np(np.log(post["confusion"].values), std)
        eta = std.features @ coef
        at_mode = np.clip(_curvature(eta[:, None], cuts, log_labels)[:, 0], 0.0, None)
        cov = np.linalg.inv(X.T @ (at_mode[:, None] * X) + alpha * np.eye(X.shape[1]))
        s = np.sqrt(np.einsum("ia,ab,ib->i", X, cov, X))
        averaged = _curvature(eta[:, None] + s[:, None] * NODES, cuts, log_labels) @ WEIGHTS
        curvature = np.clip(averaged, 0.0, None)[:, None, None]
        return fit, _evidence.next_precision(X, curvature, coef, alpha)

    fit, alpha, _, _ = _evidence.fixed_point(fit_at)
    return fit, alpha


def fit_at(ann, precision, variant: str):
    """The variant's fit at ``precision``: the cumulative EM, or the latent MAP."""
    if variant == "cumulative":
        return ordinal.em(ann, coef_precision=precision)
    return cm.fit_map(ordinal.build_model(ann, variant="latent", coef_precision=precision))


def rule_fit(ann, rule: str, variant: str):
    """(the variant's fit under ``rule``, the precisions it used)."""
    if rule == "precision 1":
        return fit_at(ann, 1.0, variant), [1.0]
    if rule == "auto":
        fit = fit_at(ann, "auto", variant)
        return fit, list(fit.attrs["coef_precision"])
    if rule == "pooled":
        alpha = ordinal.pooled_precision(ann.standardized())
        return fit_at(ann, alpha, variant), [alpha]
    fit, alpha = latent_evidence(ann)
    return fit, [alpha]


def one_crowd(design: str, d: int, seed: int, variant: str = "cumulative") -> dict:
    ann, X_new, level_new = crowd(design, d, seed)
    row = {"design": design, "d": d, "seed": seed}
    for rule in RULES[variant]:
        t0 = time.perf_counter()
        fit, row[f"{rule} alpha"] = rule_fit(ann, rule, variant)
        row[f"{rule} s"] = time.perf_counter() - t0
        (row[rule], row[f"{rule} mae"], row[f"{rule} ll"],
         row[f"{rule} floored"]) = new_item_scores(fit, X_new, level_new)
    grid = np.array([new_item_scores(fit_at(ann, a, variant), X_new, level_new) for a in GRID])
    row["oracle"], row["oracle alpha"] = grid[:, 0].min(), GRID[int(np.argmin(grid[:, 0]))]
    row["oracle ll"] = grid[:, 2].min()
    return row


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, nargs="+", default=[5, 20, 100, 200])
    parser.add_argument("--design", nargs="+", default=["dense", "embedding"],
                        choices=["dense", "embedding"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--variant", default="cumulative", choices=["cumulative", "latent"])
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", UserWarning)
    start = time.perf_counter()
    rules = RULES[args.variant]
    short = {"precision 1": "@1"}
    print(f"{'design':>10} {'d':>4} {'seed':>4} "
          + " ".join(f"{short.get(r, r):>8}" for r in rules) + f" {'oracle':>7} {'oracle a':>8} "
          + " ".join(f"{'mae ' + short.get(r, r):>12}" for r in rules) + " "
          + " ".join(f"{'ll ' + short.get(r, r):>11}" for r in rules) + f" {'best ll':>7} "
          + f"{'floored':>8} {'s ' + rules[-1]:>10}  {rules[-1]}'s alpha")
    rows = []
    for design in args.design:
        for d in args.d:
            for seed in range(args.seeds):
                r = one_crowd(design, d, seed, args.variant)
                rows.append(r)
                print(f"{design:>10} {d:>4} {seed:>4} "
                      + " ".join(f"{r[rule]:>8.3f}" for rule in rules)
                      + f" {r['oracle']:>7.3f} {r['oracle alpha']:>8.3g} "
                      + " ".join(f"{r[rule + ' mae']:>12.3f}" for rule in rules) + " "
                      + " ".join(f"{r[rule + ' ll']:>11.3f}" for rule in rules)
                      + f" {r['oracle ll']:>7.3f} "
                      + f"{'/'.join(str(r[rule + ' floored']) for rule in rules):>8} "
                      + f"{r[rules[-1] + ' s']:>10.2f}  "
                      + " ".join(f"{a:.3g}" for a in r[rules[-1] + " alpha"]), flush=True)
    leave_one_set_out(rows, rules, "new-item error rate")
    by_log_loss = [{"design": r["design"], "d": r["d"], "oracle": r["oracle ll"],
                    **{rule: r[rule + " ll"] for rule in rules}} for r in rows]
    leave_one_set_out(by_log_loss, rules, "new-item log loss")
    print(f"wall time {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
