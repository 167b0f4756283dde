"""Choosing a default by leave-one-set-out (issue 42): every candidate rule's
accuracy against gold on every bundled categorical set and simulated crowd,
then, for each held-out set, the rule a criterion picks on all the others and
how that rule does on the held-out set.

    .venv/bin/python benchmarks/defaults_out_of_sample.py                    # everything
    .venv/bin/python benchmarks/defaults_out_of_sample.py --no-simulations   # the sets only
    .venv/bin/python benchmarks/defaults_out_of_sample.py --only rte wsd label_bias
    .venv/bin/python benchmarks/defaults_out_of_sample.py --rules GLAD "GLAD uniform"

The units: the eleven bundled categorical sets with gold (``SETS``: loaded as
``accuracy.py`` loads them, features dropped and every repeated (item,
annotator) pair reduced to its first label; duchenne scored on its 159 items
with gold), ``model_choice.py``'s ``--simulations`` scenarios and
``dawid_skene.simulate_sparse_crowd`` ("sparse"; and "sparse_spammers",
:data:`SPAMMY`), each with seeds 0, 1 and 2. ``--only`` names units (a set, a
scenario, "sparse" or "sparse_spammers").

The rules (``RULES``), each an EM with the package's default priors, the same
on every unit: majority vote (soft, ties split; argmax to the first class),
full, one-coin and pooled Dawid-Skene (and pooled at a fixed spread of 1,
"pooled s=1"), the spammer model (MACE), the
item-difficulty model (GLAD, "fixed"), the community model (3 communities),
the equal-weight average of the pooled and spammer item probabilities (and
of full Dawid-Skene's and the spammer model's, "DS+spammer"), and
``auto``: ``compare_models`` with its defaults and ``choose`` (criterion
"sharing"), then the chosen candidate's EM; ``auto stacking`` and ``auto
pseudo-BMA``: the same comparison's eligible candidates averaged with the weights
``auto_fit(average=...)`` gives them (``auto.model_weights`` on the hidden
labels' log scores), their EMs' item probabilities; ``auto no pooled`` and
``stacking no pooled``: the same with the pooled model left out of the eligible
candidates; ``auto + DS``: the best held-out score among the eligible
candidates and full Dawid-Skene (:data:`WITH_DS`), and ``auto + DS z=Z``: ``auto``'s
choice unless full Dawid-Skene's score beats it by more than Z paired standard
errors (:data:`DS_MARGINS`); one-coin Dawid-Skene, GLAD
and the spammer model
with the class shares held at uniform ("one-coin uniform", "GLAD uniform",
"spammer uniform": a prevalence concentration of :data:`UNIFORM`); and
mean-field variational Bayes of full Dawid-Skene and of the spammer model
("DS VB", "spammer VB", each also "uniform": :func:`variational`, not a
package function); the spammer model with a population confusion as a third
source of labels ("spammer+population": :func:`shared_confusion`, a prototype).
``--rules`` runs some of them (full
DS and majority vote always: the criteria's references). The latent ordinal candidate is
left out of ``auto`` on the ordered sets (web search, adult content): it has no
EM, and ``model_choice.py`` measured its held-out score below the pooled
model's on both.

Printed: the accuracy table (units as rows, rules as columns) and each rule's
seconds per unit as a ratio to full Dawid-Skene EM's on the same unit (all in
this one run, after one small unshown crowd has paid the first calls' costs);
then the leave-one-set-out table. A held-out set is one bundled
set, or one simulated scenario with all its seeds (a rule chosen on seed 0 of a
scenario is not out of sample on seed 1). Each criterion (``CRITERIA``) picks a
rule on the other sets' accuracies only:

* ``mean``: the best mean accuracy, each held-out-able set weighted equally
  (a scenario's seeds averaged first);
* ``worst``: the smallest worst-case shortfall against full Dawid-Skene EM
  over the other sets' units (ties to the better mean);
* ``floor``: the smallest worst-case shortfall under issue 42's floor, the
  higher of full Dawid-Skene EM minus 0.01 and majority vote, counted as 0
  where a rule meets it (so among the rules that meet the floor on every
  other unit, the best mean accuracy).

Per held-out unit: the chosen rule, its accuracy, and its shortfall against
full DS EM and against majority vote (positive: the rule is worse). Then per
criterion the mean out-of-set accuracy (sets weighted equally) and the number
of units where the chosen rule is below full DS EM by more than 0.01 or below
majority vote. ``--save FILE`` appends each unit's results to a file as
the unit ends, and ``--load FILE ...`` reads them back instead of running
those units again (so a long set can run on its own and join the table);
``--cache DIR`` keeps each unit's ``compare_models`` result, so that a rule
added later reuses the same splits.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import digamma

import crowd_models as cm
from crowd_models import auto
from crowd_models.models import _common as C
from crowd_models.models import community, dawid_skene, item_difficulty, spammer

HERE = Path(__file__).resolve().parent
SETS = ("rte", "bluebirds", "dog", "web_search", "music_genre", "sentiment", "adult_content",
        "relevance", "mozafari", "duchenne", "wsd")
SEEDS = (0, 1, 2)
SPARSE = "sparse"
SPAMMY = "sparse_spammers"
"""``dawid_skene.simulate_sparse_crowd`` with no heavy annotator, 460 light ones
(2-6 labels each) and 40% of them spammers with habits of their own: the shape
on which the pooled model's rows collapse into a catch-all class, as issue 42
reports of a sparse crowd we do not have."""
RULES = ("MV", "DS", "one-coin", "pooled", "pooled s=1", "spammer", "GLAD", "community",
         "pooled+spammer", "auto", "auto stacking", "auto pseudo-BMA", "auto no pooled",
         "stacking no pooled", "one-coin uniform", "GLAD uniform", "spammer uniform", "spammer VB",
         "spammer VB uniform", "DS VB", "DS VB uniform", "auto + DS", "DS+spammer",
         "auto + DS z=1", "auto + DS z=2", "auto + DS z=3", "auto + DS z=4",
         "spammer+population")
AVERAGED = {"auto stacking": "stacking", "auto pseudo-BMA": "pseudo-bma",
            "stacking no pooled": "stacking"}
"""The rules that average ``auto``'s eligible candidates (``auto_fit(average=...)``)."""
WITHOUT_POOLED = ("auto no pooled", "stacking no pooled")
"""The rules that leave the pooled model out of ``auto``'s eligible candidates (the
same comparison, the others' scores)."""
WITH_DS = ("dawid_skene",)
"""``auto + DS``: the best held-out score among ``auto``'s eligible candidates and
these (full Dawid-Skene)."""
DS_MARGINS = {f"auto + DS z={z}": float(z) for z in (1, 2, 3, 4)}
"""``auto + DS z=Z``: ``auto``'s choice, unless full Dawid-Skene's held-out score beats
it by more than Z paired standard errors (over the same hidden labels)."""
UNIFORM = 1e5
"""The "uniform" rules' symmetric Dirichlet prevalence concentration: the class
shares held at uniform (a symmetric-error model otherwise explains annotator
bias by the prevalence, DEVELOPING.md, "Symmetric-error models and the
prevalence")."""
AUTO_RULE = {"dawid_skene": "DS", "one_coin": "one-coin", "pooled": "pooled",
             "spammer": "spammer", "item_difficulty": "GLAD"}
"""``auto``'s candidate names -> the rule whose fit it already is (two-coin has none)."""
REFERENCE, BASELINE, TOLERANCE = "DS", "MV", 0.01
CRITERIA = ("mean", "worst", "floor")
_EPS = 1e-9  # "more than 0.01", "below": differences of a whole item, not of rounding


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _timed(fit):
    t0 = time.perf_counter()
    result = fit()
    seconds = time.perf_counter() - t0
    prob = result if isinstance(result, np.ndarray) else result["item_class_prob"].values[0, 0]
    return prob, seconds


def evaluate(ann: cm.Annotations, accuracy, rules=RULES, compare=None) -> tuple[dict, dict, str]:
    """Every rule's accuracy and seconds on one unit, and ``auto``'s candidate
    (None when ``rules`` leave it out). ``accuracy(prob, ann)``: the accuracy over
    the items with gold. ``compare()``: ``compare_models(ann, pointwise=True)`` and
    its seconds (default: run it)."""
    fits = {
        "MV": lambda: cm.majority_vote(ann).to_numpy(),
        "DS": lambda: dawid_skene.em(ann),
        "one-coin": lambda: dawid_skene.em(ann, variant="one_coin"),
        "pooled": lambda: dawid_skene.em(ann, variant="pooled"),
        "pooled s=1": lambda: dawid_skene.em(ann, variant="pooled", spread=1.0),
        "spammer": lambda: spammer.em(ann),
        "GLAD": lambda: item_difficulty.em(ann),
        "community": lambda: community.em(ann, n_communities=3),
        "one-coin uniform": lambda: dawid_skene.em(ann, variant="one_coin",
                                                   prevalence_prior=UNIFORM),
        "GLAD uniform": lambda: item_difficulty.em(ann, prevalence_prior=UNIFORM),
        "spammer uniform": lambda: spammer.em(ann, prevalence_prior=UNIFORM),
        "spammer VB": lambda: variational(ann, "spammer"),
        "spammer VB uniform": lambda: variational(ann, "spammer", UNIFORM),
        "DS VB": lambda: variational(ann, "DS"),
        "DS VB uniform": lambda: variational(ann, "DS", UNIFORM),
        "spammer+population": lambda: shared_confusion(ann),
    }
    averaging = [rule for rule in AVERAGED if rule in rules]
    needed = (set(rules) | ({"pooled", "spammer"} if "pooled+spammer" in rules else set())
              | ({"DS", "spammer"} if "DS+spammer" in rules else set())
              | ({"pooled", "spammer", "GLAD"} if averaging else set()))
    prob, seconds, chosen = {}, {}, None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # below-chance notes on crowds
        for rule, fit in fits.items():
            if rule in needed:
                prob[rule], seconds[rule] = _timed(fit)
        if not {"auto", "auto + DS", *averaging, *WITHOUT_POOLED, *DS_MARGINS} & set(rules):
            return _scored(prob, seconds, rules, ann, accuracy, chosen)
        (table, points), scoring = (compare or (lambda: _timed_comparison(ann)))()
        chosen = auto.choose(table)
        candidate = {name: _candidate_prob(name, ann, prob, seconds) for name in table.index
                     if table.at[name, "eligible"] or name == chosen}
        prob["auto"], seconds["auto"] = candidate[chosen][0], scoring + candidate[chosen][1]
        eligible = list(table.index[table["eligible"]])
        others = [name for name in eligible if name != "pooled"] or eligible
        choice = table.loc[others, "score"].idxmax()  # the eligible choice, pooled left out
        prob["auto no pooled"] = candidate[choice][0]
        seconds["auto no pooled"] = scoring + candidate[choice][1]
        wider = [*others, *(name for name in WITH_DS if name in table.index
                            and name not in others)]
        best = table.loc[wider, "score"].idxmax()
        if best not in candidate:
            candidate[best] = _candidate_prob(best, ann, prob, seconds)
        prob["auto + DS"], seconds["auto + DS"] = candidate[best][0], scoring + candidate[best][1]
        gain = points["dawid_skene"] - points[choice] if "dawid_skene" in points else None
        for rule, z in DS_MARGINS.items():
            if rule not in rules:
                continue
            taken = gain is not None and gain.mean() > z * gain.std(ddof=1) / np.sqrt(len(gain))
            name = "dawid_skene" if taken else choice
            if name not in candidate:
                candidate[name] = _candidate_prob(name, ann, prob, seconds)
            prob[rule], seconds[rule] = candidate[name][0], scoring + candidate[name][1]
        for rule in averaging:
            weights = auto.model_weights(points[others if rule in WITHOUT_POOLED else eligible],
                                         AVERAGED[rule], min_weight=auto.MIN_WEIGHT)
            prob[rule] = sum(w * candidate[name][0] for name, w in weights.items())
            seconds[rule] = scoring + sum(candidate[name][1] for name in weights.index)
    return _scored(prob, seconds, rules, ann, accuracy, chosen)


def variational(ann: cm.Annotations, model: str, prevalence=2.0, tol=1e-9, max_iter=5000):
    """Mean-field variational Bayes of full Dawid-Skene (IBCC) or the spammer model
    (MACE as its authors fit it), the package's prior concentrations, from
    majority vote: the E-step weighs each label by exp(E log theta) under the
    Dirichlet (Beta) posteriors of the last M-step instead of by their mode.
    Returns the item posteriors (iterated until they move by less than ``tol``)."""
    K = ann.n_classes
    prob = cm.majority_vote(ann).to_numpy()
    eye = np.eye(K, dtype=bool)

    def elog(alpha):
        return digamma(alpha) - digamma(alpha.sum(axis=-1, keepdims=True))

    share = 0.5  # of a matching label's odds of coming from the truth (spammer)
    for _ in range(max_iter):
        counts = C.expected_counts(ann, prob)  # (annotator, true, label)
        if model == "DS":
            # the package's default confusion prior: 3 on the diagonal, 1 + 1/(K - 1) off it
            log_conf = elog(np.where(eye, 3.0, 1 + 1 / (K - 1)) + counts)
        else:
            # a matching label came from the truth with odds t~ : (1 - t)~ s~_k
            matching = np.diagonal(counts, axis1=1, axis2=2)
            truthful = share * matching
            spam = counts.sum(axis=1) - truthful
            a, b = spammer.DEFAULT_PRIORS["trustworthiness_prior"]
            trust = np.stack([a + truthful.sum(axis=1), b + spam.sum(axis=1)], axis=1)
            log_t, log_f = elog(trust).T
            log_s = elog(spammer.DEFAULT_PRIORS["spam_prior"] + spam)
            share = np.exp(log_t[:, None] - np.logaddexp(log_t[:, None], log_f[:, None] + log_s))
            log_conf = np.logaddexp(np.where(eye, log_t[:, None, None], -np.inf),
                                    log_f[:, None, None] + log_s[:, None, :])
        log_prev = elog(prevalence + prob.sum(axis=0))
        new, _ = C.posterior_from_joint(C.item_joint_np(log_conf, ann) + log_prev)
        moved, prob = np.abs(new - prob).max(), new
        if moved < tol:
            break
    return prob


def shared_confusion(ann: cm.Annotations, tol=1e-8, max_iter=2000):
    """The spammer model with a third source of labels, a prototype (not a package
    function): each label comes from the truth (share a_j), from a population
    confusion row E[true class] shared by all annotators (b_j), or from the
    annotator's own spam shares (c_j). MAP-EM over the true class and the source,
    from majority vote, the spammer model's priors (the trust Beta split evenly
    between the two error sources), E's rows Dirichlet(2). Returns the item
    posteriors."""
    K = ann.n_classes
    prob = cm.majority_vote(ann).to_numpy()
    eye = np.eye(K)
    ta, tb = spammer.DEFAULT_PRIORS["trustworthiness_prior"]
    spam_prior = spammer.DEFAULT_PRIORS["spam_prior"]
    J = ann.n_annotators
    share = np.tile([0.7, 0.15, 0.15], (J, 1))
    pop = np.full((K, K), 1.0 / K)
    own = np.full((J, K), 1.0 / K)
    for _ in range(max_iter):
        counts = C.expected_counts(ann, prob)  # (annotator, true, label)
        for _ in range(3):  # M-step: a few rounds of the source split at fixed counts
            truth = share[:, 0, None, None] * eye
            conf = share[:, 1, None, None] * pop[None]
            spam = share[:, 2, None, None] * own[:, None, :]
            total = truth + conf + spam
            w = counts / total
            got = np.stack([(w * truth).sum((1, 2)), (w * conf).sum((1, 2)),
                            (w * spam).sum((1, 2))], axis=1)
            share = got + np.array([ta - 1, (tb - 1) / 2, (tb - 1) / 2])
            share /= share.sum(axis=1, keepdims=True)
            pop = (w * conf).sum(0) + 1.0
            pop /= pop.sum(axis=1, keepdims=True)
            own = (w * spam).sum(1) + spam_prior - 1
            own /= own.sum(axis=1, keepdims=True)
        log_conf = np.log(share[:, 0, None, None] * eye + share[:, 1, None, None] * pop[None]
                          + share[:, 2, None, None] * own[:, None, :])
        prev = prob.sum(axis=0) + spammer.DEFAULT_PRIORS["prevalence_prior"] - 1
        new, _ = C.posterior_from_joint(C.item_joint_np(log_conf, ann)
                                        + np.log(prev / prev.sum()))
        moved, prob = np.abs(new - prob).max(), new
        if moved < tol:
            break
    return prob


def _timed_comparison(ann: cm.Annotations):
    t0 = time.perf_counter()
    return auto.compare_models(ann, pointwise=True), time.perf_counter() - t0


def _cached_comparison(ann: cm.Annotations, path: Path):
    """``_timed_comparison``, kept in ``path`` (a pickle) and read from it when there."""
    if path.exists():
        return pd.read_pickle(path)
    result = _timed_comparison(ann)
    pd.to_pickle(result, path)
    return result


def _candidate_prob(name: str, ann: cm.Annotations, prob: dict, seconds: dict):
    """An ``auto`` candidate's item probabilities and seconds: a rule's fit already
    made, or its point fit."""
    if name in AUTO_RULE and AUTO_RULE[name] in prob:
        return prob[AUTO_RULE[name]], seconds[AUTO_RULE[name]]
    return _timed(lambda: auto.point_fit(name, ann))


def _scored(prob, seconds, rules, ann, accuracy, chosen):
    if "pooled+spammer" in rules:
        prob["pooled+spammer"] = (prob["pooled"] + prob["spammer"]) / 2
        seconds["pooled+spammer"] = seconds["pooled"] + seconds["spammer"]
    if "DS+spammer" in rules:  # the equal-weight average of the two EMs' posteriors
        prob["DS+spammer"] = (prob["DS"] + prob["spammer"]) / 2
        seconds["DS+spammer"] = seconds["DS"] + seconds["spammer"]
    return ({rule: accuracy(prob[rule], ann) for rule in rules},
            {rule: seconds[rule] for rule in rules}, chosen)


def _pick(train: pd.DataFrame, groups: pd.Series, criterion: str, reference: str,
          baseline: str, tolerance: float) -> str:
    """The rule ``criterion`` picks from the training units' accuracies."""
    mean = train.groupby(groups).mean().mean()  # each held-out-able set weighted equally
    if criterion == "mean":
        return str(mean.idxmax())
    if criterion == "worst":
        short = train.rsub(train[reference], axis=0).max()
    elif criterion == "floor":
        floor = np.maximum(train[reference] - tolerance, train[baseline])
        short = train.rsub(floor, axis=0).max().clip(lower=0)
    else:
        raise ValueError(f"criterion={criterion!r} is not one of {CRITERIA}.")
    tied = short[short <= short.min() + _EPS].index
    return str(mean[tied].idxmax())


def out_of_set(accuracy: pd.DataFrame, groups=None, criterion: str = "mean", *,
               reference: str = REFERENCE, baseline: str = BASELINE,
               tolerance: float = TOLERANCE) -> pd.DataFrame:
    """Leave-one-set-out choices.

    ``accuracy``: units as rows, rules as columns. ``groups``: each unit's
    set (units of one set are held out together; by default each unit is its
    own set). For each set, the rule ``criterion`` picks on the other sets'
    units (``CRITERIA``; ties go to the earlier column), scored on the
    held-out units. Back: one row per unit with ``set``, ``rule``,
    ``accuracy``, ``vs_reference`` and ``vs_baseline`` (the reference's and
    the baseline's accuracy minus the rule's: positive when the rule is worse),
    and ``below_floor`` (below the reference by more than ``tolerance``, or
    below the baseline).
    """
    groups = (pd.Series(accuracy.index, index=accuracy.index) if groups is None
              else pd.Series(groups, index=accuracy.index))
    rows = {}
    for held in pd.unique(groups):
        out = groups == held
        if out.all():
            raise ValueError("leave-one-set-out needs at least two sets.")
        rule = _pick(accuracy[~out], groups[~out], criterion, reference, baseline, tolerance)
        for unit in accuracy.index[out]:
            got = accuracy.at[unit, rule]
            vs_ref = accuracy.at[unit, reference] - got
            vs_base = accuracy.at[unit, baseline] - got
            rows[unit] = {"set": held, "rule": rule, "accuracy": got, "vs_reference": vs_ref,
                          "vs_baseline": vs_base,
                          "below_floor": bool(vs_ref > tolerance + _EPS or vs_base > _EPS)}
    return pd.DataFrame.from_dict(rows, orient="index").loc[accuracy.index]


def _load(paths, rules) -> dict:
    """Units saved by ``--save`` with every rule asked for, their lines merged (a
    later line's rules replace an earlier one's): unit -> (accuracies, seconds,
    auto's candidate)."""
    merged = {}
    for path in paths:
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            acc, sec, chose = merged.setdefault(entry["unit"], ({}, {}, [None]))
            acc.update(entry["accuracy"])
            sec.update(entry["seconds"])
            chose[0] = entry["chose"] or chose[0]
    return {unit: ({r: acc[r] for r in rules}, {r: sec[r] for r in rules}, chose[0])
            for unit, (acc, sec, chose) in merged.items() if set(rules) <= set(acc)}


def units(only, simulations: bool, model_choice, load):
    """(name, set, loader) of every unit to run, in order."""
    chosen = [name for name in SETS if name in only]
    for name in chosen:
        yield name, name, lambda name=name: load(name)
    if not simulations:
        return
    for scenario in (*model_choice.SCENARIOS, SPARSE, SPAMMY):
        if scenario not in only:
            continue
        for seed in SEEDS:
            if scenario == SPARSE:
                make = lambda seed=seed: dawid_skene.simulate_sparse_crowd(seed)  # noqa: E731
            elif scenario == SPAMMY:
                make = lambda seed=seed: dawid_skene.simulate_sparse_crowd(  # noqa: E731
                    seed, n_light=460, heavy=(), spam_share=0.4)
            else:
                make = (lambda scenario=scenario, seed=seed:  # noqa: E731
                        model_choice.simulated(scenario, np.random.default_rng(seed)))
            yield f"{scenario}/{seed}", scenario, make


def main(argv=None) -> None:
    model_choice = _module("model_choice")
    tools = model_choice._accuracy_tools()
    every = (*SETS, *model_choice.SCENARIOS, SPARSE, SPAMMY)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=list(every), choices=every,
                        help="units to run: sets, scenarios (all their seeds), 'sparse', "
                             "'sparse_spammers'")
    parser.add_argument("--no-simulations", dest="simulations", action="store_false",
                        help="the bundled sets only")
    parser.add_argument("--rules", nargs="+", default=list(RULES), choices=RULES,
                        help="the rules to run and choose between (default: all); DS and MV "
                             "are always run (the criteria's references)")
    parser.add_argument("--save", type=Path,
                        help="append each unit's results to this file (JSON lines) as it ends")
    parser.add_argument("--load", type=Path, nargs="+", default=[],
                        help="files written by --save: their units (with every rule asked "
                             "for) are read, not run again")
    parser.add_argument("--cache", type=Path,
                        help="a folder for each unit's compare_models result (and its "
                             "seconds), read back when there: new rules without new splits")
    args = parser.parse_args(argv)
    if args.cache is not None:
        args.cache.mkdir(parents=True, exist_ok=True)
    rules = tuple(r for r in RULES if r in {*args.rules, REFERENCE, BASELINE})
    start = time.perf_counter()
    saved = _load(args.load, rules)
    wanted = list(units(args.only, args.simulations, model_choice, tools.load))
    if any(name not in saved for name, _, _ in wanted):
        # one small crowd first, not shown: first calls' costs out of the timings
        evaluate(dawid_skene.simulate_sparse_crowd(99, n_items=60, n_light=40, heavy=(30,)),
                 tools._accuracy, rules)
    acc, sec, sets, chose = {}, {}, {}, {}
    for name, group, make in wanted:
        sets[name] = group
        if name in saved:
            acc[name], sec[name], chose[name] = saved[name]
            continue
        t0 = time.perf_counter()
        ann = make()
        compare = None if args.cache is None else (
            lambda ann=ann, name=name: _cached_comparison(
                ann, args.cache / f"{name.replace('/', '_')}.pkl"))
        acc[name], sec[name], chose[name] = evaluate(ann, tools._accuracy, rules, compare)
        print(f"{name}: auto chose {chose[name]} ({time.perf_counter() - t0:.0f} s)"
              if chose[name] else f"{name}: {time.perf_counter() - t0:.0f} s", flush=True)
        if args.save is not None:
            with args.save.open("a") as out:
                out.write(json.dumps({"unit": name, "accuracy": acc[name],
                                      "seconds": sec[name], "chose": chose[name]}) + "\n")
    accuracy = pd.DataFrame(acc).T[list(rules)]
    seconds = pd.DataFrame(sec).T[list(rules)]
    groups = pd.Series(sets)
    with pd.option_context("display.width", 250, "display.max_columns", 40):
        print("\nAccuracy against gold (auto: the candidate 'sharing' chose in brackets)")
        shown = accuracy.round(4).astype(str)
        if "auto" in rules:
            shown["auto"] = shown["auto"] + " (" + pd.Series(chose) + ")"
        print(shown.to_string())
        print("\nSeconds per unit as a ratio to full DS EM's (DS: its seconds)")
        ratio = seconds.div(seconds["DS"], axis=0).round(2)
        ratio["DS"] = seconds["DS"].round(2).astype(str) + " s"
        print(ratio.to_string())
        if groups.nunique() < 2:
            return
        print("\nLeave-one-set-out: the rule each criterion picks without the held-out set; "
              "its accuracy there, and full DS's and MV's accuracy minus it")
        results = {c: out_of_set(accuracy, groups, c) for c in CRITERIA}
        table = pd.concat({c: r[["rule", "accuracy", "vs_reference", "vs_baseline"]]
                           .rename(columns={"vs_reference": "DS-it", "vs_baseline": "MV-it"})
                           for c, r in results.items()}, axis=1)
        print(table.round(4).to_string())
    real = groups.isin(SETS)
    for criterion, r in results.items():
        by_set = r["accuracy"].groupby(groups).mean()
        picks = r.groupby("set")["rule"].first().value_counts()
        print(f"{criterion:5s}: mean out-of-set accuracy {by_set.mean():.4f} over "
              f"{len(by_set)} sets ({by_set[by_set.index.isin(SETS)].mean():.4f} over the "
              f"bundled ones); below full DS - {TOLERANCE} on "
              f"{int((r['vs_reference'] > TOLERANCE + _EPS).sum())} of {len(r)} units "
              f"({int((r['vs_reference'][real] > TOLERANCE + _EPS).sum())} bundled), below MV "
              f"on {int((r['vs_baseline'] > _EPS).sum())} "
              f"({int((r['vs_baseline'][real] > _EPS).sum())} bundled); picks "
              + ", ".join(f"{rule} x{n}" for rule, n in picks.items()))
    print(f"wall time {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
