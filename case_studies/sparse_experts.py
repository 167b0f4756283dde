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
# # Learning with many experts: sparsity and model selection without gold
#
# Izbicki and Stern (2013), "Learning with many experts: model selection and
# sparsity" (Statistical Analysis and Data Mining 6(5)). The truth is a logistic
# regression on the item's features and each annotator's *error* probability is
# `1 / (1 + exp(accuracy_intercept[k] + accuracy_coef . x))`: the features say
# which items are hard. Laplace (L1) priors make both coefficient vectors sparse
# (`feature_accuracy` family). The penalty is chosen **without gold** by the
# disagreement score S(lambda): the fraction of held-out labels that disagree with
# the classifier. If annotators err at average rate eps independently of the
# classifier, E[S] = (1 - 2 eps) R + eps, an increasing function of the risk R.
#
# 1. The simulated experiment (paper sec. 4.1) under the three vote mechanisms:
#    (i) error rates independent of x, (ii) this model, (iii) feature-dependent
#    errors of another form. S(lambda) against the empirical risk R(lambda); EM vs
#    EM-sparse vs majority-vote lasso.
# 2. Real features with simulated experts (sec. 4.2-4.3 analogue): the Wisconsin
#    breast-cancer data shipped with scikit-learn (and the digits data in the full
#    run).
# 3. Real annotators: gastrointestinal lesions (7 clinicians, 76 lesions, 698
#    features), lambda chosen by K-fold S, judged against gold by cross-validation.
#
# `CROWD_MODELS_FAST=1` runs small grids, one EM start and few folds: its numbers
# show that the code works, not the paper's precision.

# %%
import time
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from _setup import FAST, figure_folder  # case_studies/_setup.py
from scipy.special import expit

import crowd_models as cm
from crowd_models import selection
from crowd_models.models import feature_accuracy as fa

T_START = time.perf_counter()
S = dict(
    n_train=150 if FAST else 200,
    n_valid=150 if FAST else 200,
    n_test=1000 if FAST else 5000,
    n_features=20 if FAST else 50,
    grid=[1.0, 3.0, 10.0, 30.0] if FAST else [0.3, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 30.0],
    restarts=1 if FAST else 30,
    gi_grid=[10.0, 30.0] if FAST else [3.0, 5.0, 10.0, 20.0, 30.0, 50.0],
    gi_folds=3 if FAST else 5,
)
DENSE = 0.1  # "EM": practically unpenalised (no penalty at all diverges when d > n)
FIGURES, save = figure_folder("sparse_experts")
warnings.filterwarnings("ignore", category=FutureWarning)


def risk(fit, ann):
    return float(np.mean((fa.predict(fit, ann.features) > 0.5) != ann.gold))


def by_items(ann, items):
    return ann.select(np.isin(ann.item_idx, items))


# %% [markdown]
# ## 1. Simulated experts (sec. 4.1)
#
# Five annotators, error rates 0.38 to 0.12 at x = 0; the truth uses 5 of the
# features. For each mechanism and each lambda on the grid: EM-sparse on the
# training items, S(lambda) on the validation items' *labels*, and the risk
# R(lambda) on a large test set with gold (which the selection never sees).

# %%
rows, curves = [], {}
for mech in ("constant", "model", "nonlinear"):
    n_all = S["n_train"] + S["n_valid"] + S["n_test"]
    sim = fa.simulate(n_all, n_features=S["n_features"], mechanism=mech, rng=2013)
    train = by_items(sim, np.arange(S["n_train"]))
    valid = by_items(sim, np.arange(S["n_train"], S["n_train"] + S["n_valid"]))
    test = by_items(sim, np.arange(S["n_train"] + S["n_valid"], n_all))
    eps = float(np.mean(test.labels != test.gold[test.item_idx]))
    fits = {lam: fa.em(train, penalty=lam, n_restarts=S["restarts"]) for lam in S["grid"]}
    s_val = [selection.disagreement(fa.predict(fits[lam], valid.features), valid)
             for lam in S["grid"]]
    r_test = [risk(fits[lam], test) for lam in S["grid"]]
    s_test = [selection.disagreement(fa.predict(fits[lam], test.features), test)
              for lam in S["grid"]]
    curves[mech] = (s_val, r_test, s_test, eps)
    chosen = S["grid"][int(np.argmin(s_val))]
    mv_sel = selection.select_penalty(
        train, S["grid"], validation=valid,
        fit_predict=lambda tr, x, lam: fa.predict(fa.lasso_majority_vote(tr, penalty=lam), x))
    dense = fa.em(train, penalty=DENSE, n_restarts=S["restarts"])
    mv = fa.lasso_majority_vote(train, penalty=mv_sel.penalty)
    gold = fa.lasso_gold(train, penalty=chosen)
    for name, fit in (("EM", dense), ("EM-sparse", fits[chosen]), ("Majority", mv),
                      ("Gold (oracle)", gold)):
        rows.append({"mechanism": fa.MECHANISMS[mech], "method": name,
                     "test error": risk(fit, test), "non-zero coef": fit.attrs["n_nonzero_coef"],
                     "penalty": float(np.ravel(fit.attrs["penalty"])[0])})
    print(f"({fa.MECHANISMS[mech]}) {mech}: eps={eps:.3f}, lambda by S = {chosen}, "
          f"best lambda by risk = {S['grid'][int(np.argmin(r_test))]}")

table1 = pd.DataFrame(rows)
print(table1.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
t = table1[table1.mechanism == "ii"].set_index("method")["test error"]
print(f"RESULT sim_ii em={t['EM']:.4f} sparse={t['EM-sparse']:.4f} mv={t['Majority']:.4f}")

# %%
fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), sharey=False)
for ax, (mech, (s_val, r_test, s_test, eps)) in zip(axes, curves.items(), strict=True):
    ax.plot(S["grid"], s_val, "o-", label="S (validation labels)")
    ax.plot(S["grid"], s_test, "s--", label="S (test labels)")
    ax.plot(S["grid"], selection.expected_disagreement(np.array(r_test), eps), ":",
            label="(1 - 2 eps) R + eps")
    ax2 = ax.twinx()
    ax2.plot(S["grid"], r_test, "k^-", label="risk R (gold)")
    ax.set_xscale("log")
    ax.set_xlabel("penalty lambda")
    ax.set_title(f"({fa.MECHANISMS[mech]}) {mech}")
    ax2.set_ylabel("risk")
    if mech == "constant":
        ax.set_ylabel("disagreement")
        ax.legend(fontsize=7, loc="upper left")
        ax2.legend(fontsize=7, loc="lower right")
fig.tight_layout()
fig.savefig(FIGURES / "sim_disagreement_vs_risk.png", dpi=110)
plt.close(fig)

# %% [markdown]
# Under (i) the three disagreement curves coincide: S is an affine function of R.
# Under (ii) and (iii) the errors depend on the features, the identity is only
# approximate, and S still ranks the penalties like R does.
#
# ## 2. Real features, simulated experts (sec. 4.2-4.3 analogue)
#
# Real gold labels and features; five experts whose errors follow mechanism (ii)
# on two of the features.

# %%
from sklearn.datasets import load_breast_cancer, load_digits  # noqa: E402


def experts_on(X, z, rng, n_experts=5):
    X = (X - X.mean(0)) / np.where(X.std(0) > 0, X.std(0), 1)
    gamma = np.zeros(X.shape[1])
    gamma[[0, 1]] = [1.0, -1.0]
    alpha = np.linspace(0.3, 1.5, n_experts)
    p_wrong = expit(-(alpha[None, :] + (X @ gamma)[:, None]))
    wrong = rng.random(p_wrong.shape) < p_wrong
    votes = np.where(wrong, 1 - z[:, None], z[:, None])
    frame = pd.DataFrame(votes, columns=[f"expert_{k}" for k in range(n_experts)])
    return cm.Annotations.from_wide(frame, classes=[0, 1], features=X, gold=z)


datasets = {"breast cancer": load_breast_cancer(return_X_y=True)}
if not FAST:
    Xd, yd = load_digits(return_X_y=True)
    datasets["digits (0-4 vs 5-9)"] = (Xd, (yd >= 5).astype(int))
rows2 = []
for name, (X, z) in datasets.items():
    rng = np.random.default_rng(43)
    ann = experts_on(X, np.asarray(z), rng)
    order = rng.permutation(ann.n_items)
    n_tr = ann.n_items // 2
    train, test = by_items(ann, order[:n_tr]), by_items(ann, order[n_tr:])
    sel = selection.select_penalty(train, S["grid"], n_folds=3, rng=0,
                                   n_restarts=S["restarts"])
    sparse = fa.em(train, penalty=sel.penalty, n_restarts=S["restarts"])
    dense = fa.em(train, penalty=DENSE, n_restarts=S["restarts"])
    mv = fa.lasso_majority_vote(train, penalty=sel.penalty)
    for method, fit in (("EM", dense), ("EM-sparse", sparse), ("Majority", mv)):
        rows2.append({"data": name, "method": method, "test error": risk(fit, test),
                      "non-zero coef": fit.attrs["n_nonzero_coef"],
                      "lambda": float(np.ravel(fit.attrs["penalty"])[0])})
table2 = pd.DataFrame(rows2)
print(table2.to_string(index=False, float_format=lambda v: f"{v:.3f}"))

# %% [markdown]
# ## 3. Real annotators: gastrointestinal lesions
#
# Mesejo et al. (2016): 76 lesions, 7 clinicians (4 experts, 3 beginners), the
# binary task resection vs no resection, 698 image features under white light
# (standardised; constant features dropped). Here d >> n, where sparsity matters
# most. lambda is chosen by K-fold S on the clinicians' labels only; the gold is
# used only to judge, by cross-validation over the same folds.

# %%
gi = cm.datasets.load_gi_lesions(task="binary", features="all", light="white")
X = gi.features
keep = X.std(0) > 0
gi = gi.with_features(pd.DataFrame((X[:, keep] - X[:, keep].mean(0)) / X[:, keep].std(0),
                                   index=gi.items, columns=gi.feature_names[keep]))
print(gi)
gi_sel = selection.select_penalty(gi, S["gi_grid"], n_folds=S["gi_folds"], rng=1,
                                  n_restarts=S["restarts"])
print(gi_sel.scores.to_string(float_format=lambda v: f"{v:.3f}"))
mv_gi_sel = selection.select_penalty(
    gi, S["gi_grid"], n_folds=S["gi_folds"], rng=1,
    fit_predict=lambda tr, x, lam: fa.predict(fa.lasso_majority_vote(tr, penalty=lam), x))
errors = {"EM-sparse": [], "Majority lasso": []}
for train, test in selection.kfold_items(gi, S["gi_folds"], rng=1):
    f_sparse = fa.em(train, penalty=gi_sel.penalty, n_restarts=S["restarts"])
    f_mv = fa.lasso_majority_vote(train, penalty=mv_gi_sel.penalty)
    errors["EM-sparse"].append(risk(f_sparse, test) * test.n_items)
    errors["Majority lasso"].append(risk(f_mv, test) * test.n_items)
cv = {k: sum(v) / gi.n_items for k, v in errors.items()}
majority = float(np.mean(cm.majority_vote(gi, hard=True, ties="first").values.argmax(1)
                         != gi.gold))
full = fa.em(gi, penalty=gi_sel.penalty, n_restarts=S["restarts"])
names = np.asarray(gi.feature_names)
print(f"lambda by S: {gi_sel.penalty}; non-zero coef {full.attrs['n_nonzero_coef']}, "
      f"non-zero accuracy_coef {full.attrs['n_nonzero_accuracy_coef']}")
print("classifier features:", list(names[full['coef'].values[0, 0] != 0]))
print("difficulty features:", list(names[full['accuracy_coef'].values[0, 0] != 0]))
err = fa.annotator_error(full, gi.features).mean(0)
print(pd.Series(err, index=gi.annotators, name="mean P(error)").round(3).to_string())
print(f"cross-validated classifier error vs gold: EM-sparse {cv['EM-sparse']:.3f}, "
      f"majority-vote lasso {cv['Majority lasso']:.3f}; majority vote of the labels "
      f"{majority:.3f}")
print(f"RESULT gi sparse={cv['EM-sparse']:.4f} mv={cv['Majority lasso']:.4f} "
      f"majority={majority:.4f}")

# %%
fig, ax = plt.subplots(figsize=(5, 3.5))
ax.bar(range(gi.n_annotators), err)
ax.set_xticks(range(gi.n_annotators), gi.annotators, rotation=45, ha="right")
ax.set_ylabel("mean P(error) over lesions")
ax.set_title(f"GI lesions, EM-sparse (lambda = {gi_sel.penalty})")
fig.tight_layout()
fig.savefig(FIGURES / "gi_annotator_error.png", dpi=110)
plt.close(fig)
print(f"done in {time.perf_counter() - T_START:.0f} s")
