# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Ordinal labels: web-search relevance on a five-level scale
#
# Zhou, Platt, Basu & Mao (NeurIPS 2012) collected 15,567 relevance judgements
# of 2,665 query-URL pairs from 177 crowd workers on a five-level scale, and
# expert labels for 2,653 of the pairs. The levels are *ordered*: calling a
# level-5 page "4" is a smaller mistake than calling it "1". Unordered models
# (majority vote, Dawid-Skene) ignore that; this notebook compares them with
# the two ordinal models of `crowd_models.models.ordinal`:
#
# * **cumulative** (Raykar et al. 2010, sec. 8.2, after Frank & Hall 2001):
#   K - 1 = 4 binary problems "is the level above c?", each a two-coin model
#   with per-annotator sensitivity and specificity, fitted by EM; class
#   probabilities are differences of the four exceedance probabilities,
#   which can go negative (we count how often and clip-and-renormalise);
# * **latent**: one coherent model, each worker reports the true level
#   through an ordered logit with a worker-specific *bias* (rates high or
#   low) and *noise*, level locations and cut points shared; the true level
#   is summed out exactly. Fitted by MAP (no EM).
#
# We report accuracy and mean absolute error (MAE, in levels) against the
# expert labels, which workers are lenient or strict, and a LOO comparison of
# the models whose likelihoods are comparable.
#
# Set `CROWD_MODELS_FAST=1` for a quick run: the latent model is then fitted on
# a subset only, and the LOO chains are short.

# %%
import time
import warnings

import matplotlib

matplotlib.use("Agg")
import arviz as az
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from _setup import FAST, figure_folder  # case_studies/_setup.py

import crowd_models as cm
from crowd_models.models import dawid_skene as ds
from crowd_models.models import ordinal

T_START = time.perf_counter()
SETTINGS = dict(draws=150 if FAST else 1000, tune=150 if FAST else 1000, chains=2,
                loo_annotators=10 if FAST else 25, loo_items=400 if FAST else None,
                em_tol=1e-6 if FAST else 1e-10)
SEED = 2012
FIGURES, save = figure_folder("ordinal_relevance")
warnings.filterwarnings("ignore", category=FutureWarning)
print(f"mode: {'FAST' if FAST else 'full'}; settings: {SETTINGS}")


# %% [markdown]
# ## Data

# %%
ann = cm.datasets.load_web_search()
print(ann)
gold = ann.gold
known = gold >= 0
print("gold levels:", np.bincount(gold[known], minlength=5))
print("labels per item:", np.percentile(np.bincount(ann.item_idx), [0, 50, 100]))


def scores(prob_or_codes):
    """Accuracy and MAE (levels) of the most probable level against gold."""
    arr = np.asarray(prob_or_codes)
    codes = arr.argmax(axis=1) if arr.ndim == 2 else arr
    return (float(np.mean(codes[known] == gold[known])),
            float(np.mean(np.abs(codes[known] - gold[known]))))


results = {}

# %% [markdown]
# ## Baselines: majority vote and median vote
# Majority vote depends on its tie rule (569 items tie); the median vote is
# the natural ordinal baseline (lower median on an even number of labels).

# %%
counts = ann.class_counts()
results["majority vote (ties to lower level)"] = scores(
    cm.majority_vote(ann, hard=True, ties="first").values)
results["majority vote (random ties)"] = scores(
    cm.majority_vote(ann, hard=True, ties="random", rng=SEED).values)
cum = counts.cumsum(axis=1)
median = (cum < (counts.sum(axis=1, keepdims=True) + 1) // 2).sum(axis=1)
results["median vote (lower median)"] = scores(median)

# %% [markdown]
# ## Unordered Dawid-Skene (EM)
# With flat priors (plain maximum likelihood, as in Zhou et al.) and with the
# package's diagonal-favouring defaults.

# %%
t0 = time.perf_counter()
ds_ml = ds.em(ann, confusion_prior=(1.0, 1.0), prevalence_prior=1.0, tol=SETTINGS["em_tol"])
results["Dawid-Skene EM (ML)"] = scores(ds_ml["item_class_prob"].values[0, 0])
ds_default = ds.em(ann)
results["Dawid-Skene EM (default priors)"] = scores(ds_default["item_class_prob"].values[0, 0])
print(f"Dawid-Skene EMs: {time.perf_counter() - t0:.1f} s")

# %% [markdown]
# ## Cumulative two-coin model (Raykar sec. 8.2): K - 1 two-coin EMs

# %%
t0 = time.perf_counter()
cum_fit = ordinal.em(ann)
results["cumulative EM (default priors)"] = scores(cum_fit["item_class_prob"].values[0, 0])
cum_ml = ordinal.em(ann, **ordinal.FLAT_PRIORS, tol=SETTINGS["em_tol"])
results["cumulative EM (ML)"] = scores(cum_ml["item_class_prob"].values[0, 0])
print(f"cumulative EMs: {time.perf_counter() - t0:.1f} s")

# %% [markdown]
# ### How often do the differences go negative?
# The four binary problems are fitted separately, so nothing keeps
# P(level > c) decreasing in c. Many items have tiny violations (both
# exceedance probabilities within rounding of 1); the table counts items by
# the size of their most negative difference.

# %%
neg_rows = []
for name, fit in (("default priors", cum_fit), ("ML", cum_ml)):
    _, raw = ordinal.class_probabilities(fit["exceed_prob"].values[0, 0])
    worst = raw.min(axis=1)
    neg_rows.append({"fit": name, **{f"< -{t:g}": int((worst < -t).sum())
                                     for t in (1e-12, 1e-6, 1e-3, 1e-2, 0.1)},
                     "most negative": float(worst.min())})
neg_table = pd.DataFrame(neg_rows).set_index("fit")
print(neg_table.to_string())
# does the repair hurt? accuracy on the items with a material violation
_, raw = ordinal.class_probabilities(cum_fit["exceed_prob"].values[0, 0])
material = raw.min(axis=1) < -1e-3
codes = cum_fit["item_class_prob"].values[0, 0].argmax(axis=1)
print(f"items with a difference below -0.001: {material.sum()}; cumulative accuracy on them "
      f"{np.mean(codes[material & known] == gold[material & known]):.3f}, elsewhere "
      f"{np.mean(codes[~material & known] == gold[~material & known]):.3f}")
print(f"RESULT negative_differences items={int(neg_table.iloc[0, 0])} "
      f"material={int(material.sum())} most_negative={neg_table.iloc[0, -1]:.3f}")

fig, ax = plt.subplots(figsize=(6, 3.5))
ax.hist(np.clip(raw.min(axis=1), -1, 0), bins=40, color="C3")
ax.set_yscale("log")
ax.set_xlabel("most negative class-probability difference per item")
ax.set_ylabel("items")
ax.set_title("Cumulative model: negative differences (before repair)")
save(fig, "negative_differences.png")

# %% [markdown]
# ## Latent ordinal model (MAP)
# The plain model (bias and noise per worker) and the model with a
# per-worker guessing rate (with that probability the worker picks a level at
# random, whatever the item). Web-search workers give far-off labels often
# (an expert "1" gets a crowd "5" 13% of the time), which a logistic tail
# cannot explain; the guessing component absorbs them. In fast mode only on
# the LOO subset below: the full data take a few minutes of L-BFGS each.

# %%
latent_map = None
WIDE = dict(bias_sd=2.0, noise_prior=(2.0, 0.5))  # wider bias and noise priors
if not FAST:
    for guessing, priors in ((False, {}), (True, {}), (True, WIDE)):
        t0 = time.perf_counter()
        latent_model = ordinal.build_model(ann, variant="latent", guessing=guessing, **priors)
        latent_map = cm.fit_map(latent_model)
        name = ("latent ordinal MAP" + (" + guessing" if guessing else "")
                + (" (wide priors)" if priors else ""))
        results[name] = scores(latent_map.posterior["item_class_prob"].values[0, 0])
        print(f"{name}: {time.perf_counter() - t0:.1f} s; level locations "
              f"{latent_map.posterior['level_location'].values.ravel().round(2)}")

# %% [markdown]
# ## Accuracy and MAE against the expert labels

# %%
table = pd.DataFrame(results, index=["accuracy", "MAE"]).T
print(table.round(4).to_string())
ordinal_rows = [k for k in results if k.startswith(("cumulative", "latent"))]
best = max(ordinal_rows, key=lambda k: results[k][0])
ds_acc, ds_mae = results["Dawid-Skene EM (ML)"]
print(f"paper (Zhou et al. 2012, Table 2): majority vote 0.7926 (their tie rule), "
      f"Dawid-Skene 0.8327, minimax entropy 0.8884; ours: Dawid-Skene ML EM {ds_acc:.4f}")
print(f"RESULT web_search best={best.replace(' ', '_')} acc={results[best][0]:.4f} "
      f"mae={results[best][1]:.4f} ds_acc={ds_acc:.4f} ds_mae={ds_mae:.4f}")

fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
names = list(table.index)
for ax, col in zip(axes, ("accuracy", "MAE"), strict=True):
    colours = ["C2" if n in ordinal_rows else "C0" if "Dawid" in n else "0.6" for n in names]
    ax.barh(names, table[col], color=colours)
    ax.set_xlabel(col + (" (levels)" if col == "MAE" else ""))
    ax.invert_yaxis()
axes[0].set_xlim(0.6, 0.9)
fig.suptitle("Web search relevance: grey baselines, blue Dawid-Skene, green ordinal")
save(fig, "accuracy_and_mae.png")

# %% [markdown]
# ## Lenient and strict workers
# In the cumulative model a worker who rates high says "above c" often:
# high sensitivity, low specificity. Leniency = mean over thresholds of
# logit(sensitivity) - logit(specificity). We check it against the gold: the
# worker's mean (label - expert level) on gold items.

# %%
sens = cum_fit["sensitivity"].values[0, 0]
spec = cum_fit["specificity"].values[0, 0]
leniency = np.mean(np.log(sens / (1 - sens)) - np.log(spec / (1 - spec)), axis=1)
rows = known[ann.item_idx]
dev = (np.bincount(ann.annotator_idx[rows], weights=(ann.labels - gold[ann.item_idx])[rows],
                   minlength=ann.n_annotators)
       / np.maximum(np.bincount(ann.annotator_idx[rows], minlength=ann.n_annotators), 1))
workers = pd.DataFrame({"n_labels": ann.n_labels(), "leniency": leniency,
                        "mean label - gold": dev}, index=ann.annotators)
if latent_map is not None:
    workers["latent bias"] = latent_map.posterior["bias"].values[0, 0]
    workers["latent noise"] = latent_map.posterior["noise"].values[0, 0]
    workers["guess rate"] = latent_map.posterior["guess_rate"].values[0, 0]
busy = workers[workers["n_labels"] >= 100].sort_values("leniency")
print("strictest busy workers:\n", busy.head(5).round(3).to_string())
print("most lenient busy workers:\n", busy.tail(5).round(3).to_string())
corr = np.corrcoef(busy["leniency"], busy["mean label - gold"])[0, 1]
print(f"correlation of leniency with mean (label - gold), {len(busy)} workers with >= 100 "
      f"labels: {corr:.3f}")
print(f"RESULT leniency_vs_gold corr={corr:.3f}")

summary = cm.report.annotator_summary(cum_fit)
top = workers["n_labels"].sort_values(ascending=False).index[:6]
fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
for ax, measure in zip(axes, ("sensitivity", "specificity"), strict=True):
    for n, w in enumerate(top):
        sub = summary.loc[w]
        x = np.arange(len(sub)) + (n - 2.5) * 0.1
        ax.errorbar(x, sub[f"{measure}_mean"],
                    yerr=[sub[f"{measure}_mean"] - sub[f"{measure}_lower"],
                          sub[f"{measure}_upper"] - sub[f"{measure}_mean"]],
                    fmt="o", ms=4, capsize=2, label=f"{w} ({workers.loc[w, 'n_labels']})")
    ax.set_xticks(range(4), summary.loc[top[0]].index)
    ax.set_xlabel("threshold (level above c)")
    ax.set_title(f"{measure}, 90% intervals (EM Beta approximation)")
axes[0].legend(fontsize=7, title="worker (labels)")
save(fig, "busiest_workers_by_threshold.png")

# %% [markdown]
# ## LOO: which model of the labels predicts held-out items best?
# LOO compares models of the *same observed data*, here each item's labels.
# Dawid-Skene and the latent ordinal model both give the marginal likelihood
# of an item's labels with its true level summed out, so their item-level
# log-likelihoods are comparable. The cumulative model's `labels` density is
# the sum of four binary problems' likelihoods: each label is counted four
# times, as "above 1?", ..., "above 4?", as if these answers were independent
# - a composite likelihood, not a distribution of the labels - so it is left
# out of the comparison. To keep NUTS quick we use the labels of the busiest
# workers on the items they share.

# %%
t0 = time.perf_counter()
busiest = workers["n_labels"].sort_values(ascending=False).index[:SETTINGS["loo_annotators"]]
keep = ann.annotators[ann.annotator_idx].isin(busiest)
sub = ann.select(keep)
sub = sub.select(np.bincount(sub.item_idx)[sub.item_idx] >= 2)
if SETTINGS["loo_items"]:
    sub = sub.select(sub.item_idx < SETTINGS["loo_items"])
print(sub)
idatas = {}
models = {"Dawid-Skene": ds.build_model(sub), "latent ordinal": ordinal.build_model(
    sub, variant="latent", guessing=True)}
if not FAST:
    models["latent ordinal (no guessing)"] = ordinal.build_model(sub, variant="latent")
with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    for name, model in models.items():
        idatas[name] = cm.sample(model, draws=SETTINGS["draws"], tune=SETTINGS["tune"],
                                 chains=SETTINGS["chains"], random_seed=SEED, progressbar=False)
sub_known = sub.gold >= 0
for name, idata in idatas.items():
    prob = idata.posterior["item_class_prob"].mean(("chain", "draw")).values
    codes = prob.argmax(axis=1)
    print(f"{name} on the subset: accuracy "
          f"{np.mean(codes[sub_known] == sub.gold[sub_known]):.4f}, MAE "
          f"{np.mean(np.abs(codes[sub_known] - sub.gold[sub_known])):.4f}, divergences "
          f"{int(idata.sample_stats['diverging'].sum())}")
sub_em = ordinal.em(sub)
codes = sub_em["item_class_prob"].values[0, 0].argmax(axis=1)
print(f"cumulative EM on the subset: accuracy "
      f"{np.mean(codes[sub_known] == sub.gold[sub_known]):.4f}")
comparison = az.compare(idatas)
print(comparison.to_string())
print(f"LOO: {time.perf_counter() - t0:.1f} s")
print(f"RESULT loo best={comparison.index[0].replace(' ', '_')}")

if "latent ordinal" in idatas:
    post = idatas["latent ordinal"].posterior
    bias = post["bias"]
    fig, ax = plt.subplots(figsize=(6, 4))
    lo, hi = bias.quantile([0.05, 0.95], dim=("chain", "draw")).values
    mean = bias.mean(("chain", "draw")).values
    x = workers.loc[list(sub.annotators), "mean label - gold"].values
    ax.errorbar(x, mean, yerr=[mean - lo, hi - mean], fmt="o", capsize=2)
    ax.axhline(0, color="0.6", lw=0.8)
    ax.set_xlabel("worker's mean (label - expert level) on gold items")
    ax.set_ylabel("latent bias (90% interval)")
    ax.set_title("Lenient (bias > 0) and strict workers, latent model")
    save(fig, "latent_bias_vs_gold.png")

print(f"total: {time.perf_counter() - T_START:.1f} s")

# %% [markdown]
# ## What we found
#
# * **Accuracy and MAE against the experts** (full data, measured with this
#   notebook): majority vote 0.7765 (ties to the lower level; 0.7256 with
#   random ties), median vote 0.7889; unordered Dawid-Skene EM 0.8236 with
#   flat priors (Zhou et al. report 0.8327), MAE 0.2149. The cumulative
#   two-coin model (K - 1 two-coin EMs) reaches **0.8696, MAE 0.1617** with
#   the default Beta(3, 2) priors (0.8602 / 0.1757 with flat priors): the
#   best of all, and the ordinal acceptance target (>= 0.83 and a lower MAE
#   than Dawid-Skene) is met by it.
# * The **latent ordinal model** is a proper likelihood with only 2-3
#   parameters per worker. Plain (bias and noise only) it falls short on the
#   full data (MAP accuracy about 0.70): web-search workers give far-off
#   labels much more often than a logistic tail allows. A per-worker
#   guessing rate fixes most of it: MAP accuracy 0.8134, MAE 0.2190 with
#   the default priors (Normal(0, 1) bias, Gamma(2, 1) noise), and **0.8353,
#   MAE 0.1956** with wider ones (Normal(0, 2) bias, Gamma(2, 0.5) noise),
#   which beats Dawid-Skene on both counts (that L-BFGS run stopped with a
#   largest gradient of 1.6e-3, just above fit_map's warning threshold). On
#   the LOO subset of busy workers (fast mode) it is as accurate as
#   Dawid-Skene with a lower MAE, and LOO prefers it. The latent MAP on the
#   full data is slow: 10-25 minutes of L-BFGS on a shared machine.
# * **Negative differences** are common in the cumulative model: 1866 of 2665
#   items have at least one negative class-probability difference, 817 below
#   -0.001 and 125 below -0.1 (the worst -0.85). Clip-and-renormalise
#   repairs them; items with a material violation are harder (accuracy 0.85
#   on them vs 0.88 elsewhere), not ruined.
# * **Lenient and strict workers**: the cumulative model's leniency
#   (mean logit sensitivity - logit specificity over thresholds) correlates
#   0.96 with the worker's mean (label - expert level) among the 31 workers
#   with at least 100 labels; the most lenient busy worker rates 1.7 levels
#   above the experts on average.
# * **LOO** is only meaningful between models of the same data: Dawid-Skene
#   and the latent model (both the marginal likelihood of an item's labels).
#   The cumulative model's composite likelihood counts every label four
#   times and is left out.
