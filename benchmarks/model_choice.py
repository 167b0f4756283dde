"""Choosing a family without gold, against the truth: on every bundled
categorical set with gold, the held-out-label ranking of ``compare_models``,
the family ``auto.choose`` takes from it (criterion "sharing", and the older
"heldout" rule beside it), and every candidate's accuracy.

    .venv/bin/python benchmarks/model_choice.py             # every set
    .venv/bin/python benchmarks/model_choice.py --only rte dog
    .venv/bin/python benchmarks/model_choice.py --simulations   # label-bias and other crowds
    .venv/bin/python benchmarks/model_choice.py --simulations --seeds 5
    .venv/bin/python benchmarks/model_choice.py --loo --only rte   # criterion "loo" and its cost

Labels as in ``accuracy.py`` (features dropped, repeated pairs reduced to
their first label); ``compare_models`` with its defaults (10% held out, 3
splits, seed 0). Printed per set: the ranking with each candidate's accuracy
(its EM on all labels), then one line: the best score's family, the chosen
family and the best family by accuracy, with the chosen one's shortfall.
Gold is read only to print the accuracies. A simulated crowd's line also gives
the shortfall of the family that generated its labels (``GENERATING``): what a
choice that knew the generating process would lose to the best family in
hindsight. Every line gives the accuracy of the equal-weight average of the
pooled and spammer models' item probabilities (DEVELOPING.md, "Choosing a
family without gold": better on average, not adopted) and its shortfall. A
simulated line ends with the accuracy of the Bayes rule with the simulation's
true parameters (``true_parameter_accuracy``: each item's most probable class
given its labels and the parameters that made them), which no rule that sees
only the labels can beat on average. Where the best family in hindsight beats
it, it beats it by the luck of that draw of the truth. The last line counts
those crowds, and the crowds where the rule and the average are short by more
than 0.005.

With ``--loo``: ``auto_fit(criterion="loo")`` (one NUTS fit per candidate,
PSIS-LOO over items) beside one NUTS fit of the default family (two-coin for
two classes, full Dawid-Skene otherwise) with the same settings, each run
twice in this process: the first call compiles what the on-disk cache lacks
(cold), the second compiles nothing (warm). Printed: the LOO table with
accuracies and each candidate's seconds, and the ratios cold/cold and
warm/warm.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit

import crowd_models as cm
from crowd_models import auto
from crowd_models.models import dawid_skene, item_difficulty, spammer, two_coin

HERE = Path(__file__).resolve().parent


def _accuracy_tools():
    spec = importlib.util.spec_from_file_location("accuracy_benchmark", HERE / "accuracy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def simulated(scenario: str, rng) -> cm.Annotations:
    """Binary crowds of 600 items where the winning family varies."""
    if scenario == "label_bias":  # 8 accurate, 12 who say 1 80% of the time
        sens = np.r_[rng.uniform(0.7, 0.85, 8), np.full(12, 0.8)]
        spec = np.r_[rng.uniform(0.7, 0.85, 8), np.full(12, 0.2)]
        prevalence, per_item = 0.3, 5
    elif scenario == "bias_both_ways":  # 10 accurate, 5 biased to 1, 5 to 0
        sens = np.r_[rng.uniform(0.65, 0.85, 10), np.full(5, 0.85), np.full(5, 0.2)]
        spec = np.r_[rng.uniform(0.65, 0.85, 10), np.full(5, 0.15), np.full(5, 0.8)]
        prevalence, per_item = 0.4, 5
    elif scenario == "one_coin_true":  # 30 symmetric annotators
        sens = spec = rng.uniform(0.55, 0.9, 30)
        prevalence, per_item = 0.5, 4
    elif scenario == "two_coin_true":  # 15 annotators, sensitivity and specificity apart
        sens, spec = rng.uniform(0.55, 0.95, 15), rng.uniform(0.55, 0.95, 15)
        prevalence, per_item = 0.3, 5
    elif scenario == "spam_heavy":  # 3 classes; 3 of 10 spam (two always say "c")
        trust = np.r_[rng.uniform(0.5, 0.9, 7), 0.0, 0.0, 0.05]
        share = np.r_[rng.dirichlet(np.ones(3) * 3, size=7), [[0.05, 0.05, 0.9]] * 2,
                      [[1 / 3] * 3]]
        return spammer.simulate(trust, spam_share=share, n_items=400, labels_per_item=5,
                                classes=["a", "b", "c"], rng=rng)
    elif scenario == "hard_items":  # 300 items from trivial to guesswork, 7 annotators
        easiness = np.exp(rng.normal(0, 1.5, 300))
        return item_difficulty.simulate([3.0, 2.5, 2.0, 1.5, 1.0, 1.0, 0.5], easiness, rng=rng)
    else:
        raise ValueError(scenario)
    return two_coin.simulate(sensitivity=sens, specificity=spec, n_items=600,
                             prevalence=prevalence, labels_per_item=per_item, rng=rng)


SCENARIOS = ("label_bias", "bias_both_ways", "one_coin_true", "two_coin_true", "spam_heavy",
             "hard_items")

GENERATING = {"label_bias": "two_coin", "bias_both_ways": "two_coin",
              "one_coin_true": "one_coin", "two_coin_true": "two_coin",
              "spam_heavy": "spammer", "hard_items": "item_difficulty"}
"""The candidate whose model simulated each scenario's labels: the family an oracle
that knew the generating process would choose (the one-coin crowd is also a
two-coin one, with sensitivity equal to specificity)."""


def true_parameter_accuracy(ann: cm.Annotations) -> float:
    """Accuracy against the simulated truth of the Bayes rule with the true
    parameters (``ann.truth``): each item's most probable class given its labels.
    Knows the two-coin, spammer and GLAD truths the scenarios simulate."""
    truth = ann.truth.sel(annotator=list(ann.annotators))
    K, item, who, label = ann.n_classes, ann.item_idx, ann.annotator_idx, ann.labels
    if "sensitivity" in truth:  # two-coin: rows true class 0 (specificity), 1
        sens, spec = truth["sensitivity"].values, truth["specificity"].values
        confusion = np.stack([np.stack([spec, 1 - spec], -1), np.stack([1 - sens, sens], -1)], 1)
        prevalence = float(truth["prevalence"])
        log_prior = np.log([1 - prevalence, prevalence])
        row_prob = confusion[who, :, label]
    elif "confusion" in truth:  # spammer: its (annotator, true, label) confusion
        log_prior = np.log(truth["prevalence"].values)
        row_prob = truth["confusion"].values[who, :, label]
    else:  # GLAD: right with probability expit(ability * easiness), else uniform
        easiness = truth["easiness"].sel(item=list(ann.items)).values
        right = expit(truth["ability"].values[who] * easiness[item])[:, None]
        row_prob = np.where(np.arange(K) == label[:, None], right, (1 - right) / (K - 1))
        log_prior = np.log(truth["prevalence"].values)
    joint = np.tile(log_prior, (ann.n_items, 1))
    np.add.at(joint, item, np.log(np.clip(row_prob, 1e-300, 1)))
    return float(np.mean(joint.argmax(axis=1) == ann.gold))


ORDERED_SETS = ("web_search", "adult_content")
"""The sets whose classes are levels of one scale (shared/data/README.md): compared
with ``ordered=True``, which adds the latent ordinal candidate."""


def run(ann: cm.Annotations, label: str, t0: float, tools, generating: str | None = None) -> dict:
    """Print the ranking with every candidate's accuracy; back: the summary
    ``line``, the ``best`` family's accuracy, the chosen one's ``shortfall``, and
    for a simulation (``generating`` its family) the true-parameter ``bayes`` rule's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        table = auto.compare_models(ann, ordered=label in ORDERED_SETS)
        prob = {c: auto.point_fit(c, ann)["item_class_prob"].values[0, 0] for c in table.index}
    accuracy = {candidate: tools._accuracy(p, ann) for candidate, p in prob.items()}
    average = tools._accuracy((prob["pooled"] + prob["spammer"]) / 2, ann)
    table["accuracy"] = pd.Series(accuracy)
    chosen = auto.choose(table)  # the default criterion, "sharing"
    old = table.copy()
    old.attrs["criterion"] = "heldout"
    chosen_old = auto.choose(old)
    best = max(accuracy, key=accuracy.get)
    print(f"{label} ({time.perf_counter() - t0:.0f} s)")
    print(table.round(4).to_string(), flush=True)
    bayes = None if generating is None else true_parameter_accuracy(ann)
    oracle = ("" if generating is None else
              f"  generating {generating} shortfall {accuracy[best] - accuracy[generating]:.4f}"
              f"  true-parameter Bayes {bayes:.4f}")
    line = (f"{label:18s} best score {table.index[0]:16s} heldout rule {chosen_old:16s} "
            f"{accuracy[chosen_old]:.4f}  sharing {chosen:16s} {accuracy[chosen]:.4f}  "
            f"best {best:16s} {accuracy[best]:.4f}  "
            f"shortfall {accuracy[best] - accuracy[chosen]:.4f}  pooled+spammer average "
            f"{average:.4f} shortfall {accuracy[best] - average:.4f}{oracle}")
    return {"line": line, "best": accuracy[best], "shortfall": accuracy[best] - accuracy[chosen],
            "average_shortfall": accuracy[best] - average, "bayes": bayes}


def _luck_summary(results: list[dict]) -> str:
    """How often the best family in hindsight beats the true-parameter Bayes rule,
    and how often the chosen family is short, over the simulated crowds."""
    margin = 0.005 + 1e-9  # "more than 0.005": 3 items of 600 are not
    col = {key: np.array([r[key] for r in results])
           for key in ("best", "bayes", "shortfall", "average_shortfall")}
    lucky = col["best"] - col["bayes"] > margin
    short = col["shortfall"] > margin
    return (f"{len(results)} crowds: the best family in hindsight beats the true-parameter "
            f"Bayes rule by more than 0.005 in {lucky.sum()}; 'sharing' is short of the best "
            f"family by more than 0.005 in {short.sum()}, {(short & ~lucky).sum()} of them "
            f"where the best family does not beat the Bayes rule so; the pooled+spammer "
            f"average in {(col['average_shortfall'] > margin).sum()} (mean shortfall "
            f"{col['average_shortfall'].mean():.4f}, 'sharing' {col['shortfall'].mean():.4f})")


def run_loo(ann: cm.Annotations, label: str, tools) -> str:
    """Criterion "loo" on one set, timed against one NUTS fit of the default family."""
    default = two_coin if ann.n_classes == 2 else dawid_skene
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        one, loo = [], []
        for _ in range(2):  # cold, then warm
            t0 = time.perf_counter()
            cm.sample(default.build_model(ann), progressbar=False, random_seed=1)
            one.append(time.perf_counter() - t0)
        for _ in range(2):
            t0 = time.perf_counter()
            fit = auto.auto_fit(ann, criterion="loo")
            loo.append(time.perf_counter() - t0)
        table = pd.DataFrame(fit.attrs["ranking"]).set_index("candidate")
        accuracy = {}
        for candidate in table.index:
            family, options = auto.family_of(candidate)
            accuracy[candidate] = tools._accuracy(family.em(ann, **options), ann)
    table["accuracy"] = pd.Series(accuracy)
    chosen = fit.attrs["model"]
    best = max(accuracy, key=accuracy.get)
    name = default.__name__.rsplit('.', 1)[-1]
    print(f"{label}: one NUTS fit of {name} {one[0]:.1f} s cold, {one[1]:.1f} s warm; "
          f"auto_fit(criterion='loo') {loo[0]:.1f} s cold, {loo[1]:.1f} s warm; ratio "
          f"{loo[0] / one[0]:.1f} cold, {loo[1] / one[1]:.1f} warm")
    print(table.round(4).to_string(), flush=True)
    return (f"{label:18s} loo {chosen:16s} {accuracy[chosen]:.4f}  best {best:16s} "
            f"{accuracy[best]:.4f}  shortfall {accuracy[best] - accuracy[chosen]:.4f}  "
            f"time ratio {loo[0] / one[0]:.1f} cold, {loo[1] / one[1]:.1f} warm")


def main(argv=None) -> None:
    tools = _accuracy_tools()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=list(tools.SETS), choices=tools.SETS)
    parser.add_argument("--simulations", action="store_true",
                        help="the simulated scenarios instead of the sets")
    parser.add_argument("--seeds", type=int, default=2,
                        help="simulation seeds per scenario (0, 1, ...; default 2)")
    parser.add_argument("--loo", action="store_true",
                        help="criterion 'loo' (NUTS per candidate) and its time against one "
                             "NUTS fit, on the sets in --only")
    args = parser.parse_args(argv)
    lines = []
    if args.loo:
        for name in args.only:
            lines.append(run_loo(tools.load(name), name, tools))
        print("\n".join(lines))
        return
    if args.simulations:
        for scenario in SCENARIOS:
            for seed in range(args.seeds):
                ann = simulated(scenario, np.random.default_rng(seed))
                lines.append(run(ann, f"{scenario}/{seed}", time.perf_counter(), tools,
                                 GENERATING[scenario]))
        print("\n".join(r["line"] for r in lines))
        print(_luck_summary(lines))
        return
    for name in args.only:
        t0 = time.perf_counter()
        lines.append(run(tools.load(name), name, t0, tools)["line"])
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
