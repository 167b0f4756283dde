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
# # Getting started
#
# Install from a clone with `make test` or `make demo` (the Makefile installs
# everything into `.venv`), or `pip install .` into an environment of your own.
# This tour takes the RTE crowd labels bundled with the package (Snow et al.
# 2008: 800 sentence pairs, 164 crowd workers, 10 binary labels a pair, with
# expert gold) from a CSV file to an annotator table with intervals and a
# figure, in a couple of minutes.
#
# ## From a CSV file to `Annotations`
#
# Your labels are a long table: one row per (item, annotator, label). We write
# the bundled set to a CSV file to start where you would.

# %%
import tempfile
from pathlib import Path

import pandas as pd

import crowd_models as cm

folder = Path(tempfile.mkdtemp())
rte = cm.datasets.load_rte()
rte.to_frame().rename(columns={"annotator": "worker", "label": "answer"}).to_csv(
    folder / "labels.csv", index=False)
rte.gold_series().rename("gold").to_csv(folder / "gold.csv")

frame = pd.read_csv(folder / "labels.csv")
gold = pd.read_csv(folder / "gold.csv", index_col=0)["gold"]
frame.head()

# %% [markdown]
# `Annotations.from_frame` parses the table once: ids and class names are kept,
# and anything suspicious (missing ids, labels that differ only in
# whitespace, a class that looks like a missing-value code) is an error or a
# warning that names the rows.

# %%
ann = cm.Annotations.from_frame(frame, item="item", annotator="worker", label="answer",
                                gold=gold)
ann

# %% [markdown]
# ## The two-coin model: EM, MAP and NUTS
#
# Each annotator has a sensitivity (the rate of positive labels on positive
# items) and a specificity; the true labels are summed out. `two_coin.em` is
# Raykar et al.'s EM; `build_model` is the same model in PyMC, whose MAP
# (`cm.fit_map`) equals the EM's answer and whose posterior `cm.sample` draws
# with NUTS. Each fit records its seconds in `attrs["seconds"]`. On a fresh
# machine the first `fit_map` of a process answers in about 2 s (from a
# quick path that compiles nothing) and a first `sample` of 4 x 1000 draws
# takes 32-41 s, of which 21-28 s is nutpie compiling the model (2-core machine, empty compile
# cache; 19-24 s in a later process, which finds PyTensor's compile cache);
# later fits of a model of the same shape reuse the compiled functions.

# %%
from crowd_models.models import two_coin

em_fit = two_coin.em(ann)
model = two_coin.build_model(ann)
map_fit = cm.fit_map(model)
idata = cm.sample(model, draws=500, tune=500, chains=4, random_seed=1, progressbar=False)

gap = abs(map_fit.posterior["sensitivity"].values[0, 0] - em_fit["sensitivity"].values[0, 0])
print(f"largest |MAP - EM| over the sensitivities: {gap.max():.1e}")
print(f"seconds: fit_map {map_fit.attrs['seconds']:.1f}, sample {idata.attrs['seconds']:.1f}")
for name, fit in [("majority vote", cm.majority_vote(ann)), ("EM", em_fit), ("MAP", map_fit),
                  ("NUTS", idata)]:
    print(f"{name:14s} accuracy against gold: {cm.report.accuracy(fit, ann):.4f}")

# %% [markdown]
# ## Who is good? The annotator table
#
# `report.annotator_summary` gives each annotator's sensitivity, specificity
# and weight (their log-odds contribution) with 90% equal-tailed posterior
# intervals. Annotators with few labels get wide intervals: the table says how
# much we know, not only the point estimate.

# %%
table = cm.report.annotator_summary(idata, rank_by="weight_mean")
cm.report.with_intervals(table).head(8)  # "mean [5%, 95%]"; the numbers stay in `table`

# %%
ax = cm.report.plot_annotators(idata, label_top=5)

# %% [markdown]
# ## Diagnostics with ArviZ
#
# The result is an ArviZ-ready `DataTree` with an item-level log-likelihood:
# r-hat, effective sample sizes and `az.loo` work on it directly.

# %%
import arviz as az

az.summary(idata, var_names=["prevalence", "sensitivity"]).head(4)

# %% [markdown]
# ## Which model? Let the labels choose
#
# `cm.auto_fit` scores the families it chooses among (spammer and item
# difficulty) on held-out labels, without reading gold, and fits the chosen
# one (the [guide](which_model.md) says how and why). Each candidate is
# fitted on three random splits, and a split fit that cannot be trusted says
# so: one warning names the candidates whose split fits warned, the
# ranking's `warned_splits` column counts them, and
# `chosen.attrs["split_warnings"]` keeps each message. `cm.compare_models(ann)`
# scores every family, Dawid-Skene's too (on RTE a few busy workers come out
# below chance in some of its splits).

# %%
chosen = cm.auto_fit(ann, method="em")
print("chosen:", chosen.attrs["model"], "| accuracy against gold:",
      round(cm.report.accuracy(chosen, ann), 4))
pd.DataFrame(chosen.attrs["ranking"])[["candidate", "score", "dse", "eligible"]].round(4)
