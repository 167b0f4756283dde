"""Item-difficulty models: GLAD for K classes and an IRT model for binary labels.

Whitehill, Ruvolo, Wu, Bergsma and Movellan (2009), "Whose Vote Should Count
More: Optimal Integration of Labels from Labelers of Unknown Expertise",
NeurIPS 22. Annotator j labels item i correctly with probability
``sigmoid(ability[j] * easiness[i])`` and otherwise picks one of the K - 1
wrong classes uniformly. ``ability`` is real (0: guessing, negative: worse
than guessing); ``easiness = exp(log_easiness) > 0``: near 0 every annotator
guesses on the item, large values let every able annotator get it right. The
true class follows a ``prevalence``; the model has no classifier.

Variants (``variant=``):

* ``"fixed"`` (default): Normal priors of fixed scale on ``ability`` and ``log_easiness``.
  It has a mode, reached by EM (an inner L-BFGS M-step) and by ``fit_map`` alike.
* ``"hierarchical"``: the items' log easiness are drawn around 0 with a
  learned spread ``easiness_spread`` (HalfNormal), non-centred
  (``log_easiness = easiness_spread * easiness_offset``), and the abilities
  around a learned ``ability_mean``. PyMC only (NUTS): with a learned spread
  the joint density has no mode (it grows without bound as the spread shrinks
  to 0 with every item's offset), so EM is refused and a MAP is no summary of
  it (``fit_map`` serves only as NUTS's start). Known problem:
  on sparse designs (60 items, 3 labels each) NUTS diverges where the spread
  is large and its 90% intervals cover 83% in simulation-based calibration
  (validation/findings.md); prefer ``"fixed"`` there.
* ``"irt"`` (binary labels): an item-response model in the spirit of
  Carpenter's "Crowdsourcing with Difficulty", with a per-item ``difficulty``
  and discrimination (``easiness``) and per-annotator ``ability`` and
  ``bias``. Under a positive truth annotator j labels item i right with
  log-odds ``softplus(easiness[i] * (ability[j] + bias[j] - difficulty[i]))``,
  under a negative one with ``softplus(easiness[i] * (ability[j] - bias[j] -
  difficulty[i]))``: sensitivity and specificity on the log-odds scale, each
  lowered by the item's difficulty. The softplus is a floor at chance: a hard
  item (difficulty above the annotator's ability) pushes the annotator toward
  guessing on it, never below, so no item turns every annotator adversarial
  and the mirrored mode (every label and the truth flipped) does not exist.
  The price: an annotator worse than chance on a class is fitted at chance
  there. The spam-line form (``logit P(positive) = bias + s * skill``, with
  ``skill >= 0`` lowered by difficulty and a free bias) was tried first and is
  not identified: with every truth positive, difficulty becomes a per-item
  label score (on 300 simulated items its mode beat the truth's log posterior
  by 356 nats at 42% accuracy). Fixed Normal priors on every parameter: MAP
  and EM exist. ``sensitivity`` and ``specificity`` report each annotator at an
  item of difficulty 0 and easiness 1.
* ``"irt_hierarchical"``: the same likelihood with the items' ``difficulty``
  and ``log_easiness`` drawn around 0 with learned spreads
  (``difficulty_spread``, ``easiness_spread``; HalfNormal, non-centred) and the
  abilities around a learned ``ability_mean``. NUTS only, for the reason
  given for "hierarchical". Known problem: on 150 simulated items with six
  labels each, NUTS mixes ``easiness_spread`` only marginally (r-hat 1.014 at
  1000 draws a chain; at 2000, 3 divergences in 8000 draws at target_accept
  0.98 and r-hat 1.012 at 0.99): the items' discriminations are weakly
  identified by a few binary labels.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import xarray as xr
from scipy.optimize import minimize
from scipy.special import expit, log_expit
from scipy.stats import norm

from crowd_models import _dims as D
from crowd_models import _trust
from crowd_models.baselines import majority_vote
from crowd_models.data import Annotations
from crowd_models.models import _common as C
from crowd_models.models import _em, _registry

__all__ = ["build_model", "em", "simulate", "simulate_irt", "VARIANTS", "IRT_VARIANTS",
           "DEFAULT_PRIORS"]

VARIANTS = ("fixed", "hierarchical", "irt", "irt_hierarchical")
IRT_VARIANTS = ("irt", "irt_hierarchical")

DEFAULT_PRIORS = _registry.default_priors("item_difficulty")
"""Defaults, the same for every data set. ``ability_prior`` = (mean, sd) of each
annotator's Normal ability: a mean of 1 (a correct label with probability
0.73 on an item of average easiness) breaks the symmetry with the mirrored
mode in which every ability and the truth flip. ``easiness_sd`` is the
Normal sd of each item's ``log_easiness`` ("fixed"): 1 lets the easiness of
an item range over a factor of about 7 either way. ``spread_prior`` is the
HalfNormal scale of the hierarchical ``easiness_spread`` (and the Normal sd of
``ability_mean`` around ``ability_prior``'s mean). ``prevalence_prior`` is the
truth's symmetric Dirichlet concentration. The IRT variants only: ``bias_sd``
is the Normal sd of each annotator's ``bias`` (half the gap between the
sensitivity and specificity abilities), ``difficulty_sd`` that of each item's ``difficulty``
("irt"); in "irt" ``easiness_sd`` is the sd of the log discrimination and
``ability_prior`` places the abilities on the difficulty scale (mean 1: at
an item of difficulty 0 and easiness 1, log-odds softplus(1) = 1.31, a
sensitivity and specificity of 0.79 for an unbiased annotator)."""

_DIMS = {
    "ability": (D.ANNOTATOR,),
    "log_easiness": (D.ITEM,),
    "easiness": (D.ITEM,),
    "prevalence": (D.TRUE_CLASS,),
    "item_class_prob": (D.ITEM, D.TRUE_CLASS),
    "bias": (D.ANNOTATOR,),
    "difficulty": (D.ITEM,),
    "sensitivity": (D.ANNOTATOR,),
    "specificity": (D.ANNOTATOR,),
}

_EM_SUPPORTS = {"ability": "real", "log_easiness": "real", "prevalence": "simplex",
                "bias": "real", "difficulty": "real"}


# ------------------------------------------------------------------ priors
def _require(annotations: Annotations, variant: str) -> None:
    C.require_categorical(annotations, "the item-difficulty model")
    if variant not in VARIANTS:
        raise ValueError(f"variant={variant!r} is not one of {VARIANTS}.")
    if variant in IRT_VARIANTS and annotations.n_classes != 2:
        raise ValueError(
            f"variant={variant!r} is for binary labels (sensitivity and specificity), but the "
            f"annotations have {annotations.n_classes} classes; use variant='fixed' or "
            "'hierarchical' (GLAD) for K classes.")
    if annotations.features is not None:
        raise ValueError(
            "the item-difficulty model has no classifier, so it cannot use the annotations' "
            f"{annotations.n_features} features; fit annotations.with_features(None), or a "
            "family with a classifier (two_coin, dawid_skene).")
    _trust.check_identifiable(annotations, "the item-difficulty model")


def _priors(ann: Annotations, ability_prior, easiness_sd, spread_prior,
            prevalence_prior, bias_sd, difficulty_sd) -> dict:
    mean, sd = C.parameter_pair(ability_prior, "ability_prior", ann.n_annotators,
                                what="(mean, sd) of Normal", parts="mean and sd")
    if np.any(~np.isfinite(mean)) or np.any(~(sd > 0)) or np.any(~np.isfinite(sd)):
        raise ValueError(f"ability_prior must be (mean, sd) with a finite mean and a finite "
                         f"sd > 0, got {ability_prior!r}.")
    for name, value in (("easiness_sd", easiness_sd), ("spread_prior", spread_prior),
                        ("bias_sd", bias_sd), ("difficulty_sd", difficulty_sd)):
        if np.ndim(value) != 0 or not (np.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive number, got {value!r}.")
    return {"ability": (mean, sd), "easiness_sd": float(easiness_sd),
            "spread": float(spread_prior), "bias_sd": float(bias_sd),
            "difficulty_sd": float(difficulty_sd),
            "prevalence": C.dirichlet_prior(prevalence_prior, "prevalence_prior",
                                            (ann.n_classes,))}


# ------------------------------------------------------- the likelihood
def _row_logits(ability, log_easiness, ann, xp=np):
    """Each label's log-odds of being correct, ``ability[j] * easiness[i]``."""
    return ability[ann.annotator_idx] * xp.exp(log_easiness[ann.item_idx])


def _ability_sd(ann, params, pri) -> np.ndarray:
    """Each ability's sd in the Laplace approximation of its posterior given the
    final E-step and the easiness: ``1 / sqrt(sum_i e_i^2 p_i (1 - p_i) + 1 / sd^2)``
    over its labels (``p_i`` its P(correct) on item i), whatever their truth."""
    easy = np.exp(params["log_easiness"])[ann.item_idx]
    p = expit(params["ability"][ann.annotator_idx] * easy)
    info = np.bincount(ann.annotator_idx, weights=easy ** 2 * p * (1 - p),
                       minlength=ann.n_annotators)
    return 1 / np.sqrt(info + 1 / pri["ability"][1] ** 2)


def _joint_np(ann, params) -> np.ndarray:
    """(item, true_class) log joint: log prevalence plus, per label, log P(correct)
    on its own class and log P(wrong) / (K - 1) on every other class."""
    x = _row_logits(params["ability"], params["log_easiness"], ann)
    wrong = log_expit(-x) - np.log(ann.n_classes - 1)
    K = ann.n_classes
    per_item = np.bincount(ann.item_idx, weights=wrong, minlength=ann.n_items)
    # each label's own class: one bincount over (item, label) cells, not np.add.at
    cells = np.bincount(ann.item_idx * K + ann.labels, weights=log_expit(x) - wrong,
                        minlength=ann.n_items * K).reshape(ann.n_items, K)
    joint = per_item[:, None] + cells
    prev = np.clip(params["prevalence"], C.PROB_FLOOR, 1)
    return joint + np.log(prev)[None, :]


def _joint_pt(ability, log_easiness, log_prev, ann):
    """The PyTensor twin of :func:`_joint_np` (indices as ``pm.Data``)."""
    idx = C.long_table_data(ann)
    x = ability[idx["annotator_idx"]] * pt.exp(log_easiness[idx["item_idx"]])
    wrong = -pt.softplus(x) - np.log(ann.n_classes - 1)
    n_items = pm.modelcontext(None).dim_lengths[D.ITEM]
    per_item = pt.zeros((n_items,))
    per_item = pt.inc_subtensor(per_item[idx["item_idx"]], wrong)
    extra = pt.zeros((n_items, ann.n_classes))
    extra = pt.inc_subtensor(extra[idx["item_idx"], idx["label_idx"]], -pt.softplus(-x) - wrong)
    return per_item[:, None] + extra + log_prev[None, :]


# ----------------------------------------------------------- EM pieces
def _log_prior(params, pri) -> float:
    """The log prior of the fixed variants ("fixed", and "irt" when ``params``
    holds ``bias`` and ``difficulty``)."""
    lp = norm.logpdf(params["ability"], *pri["ability"]).sum()
    lp += norm.logpdf(params["log_easiness"], 0.0, pri["easiness_sd"]).sum()
    if "difficulty" in params:
        lp += norm.logpdf(params["bias"], 0.0, pri["bias_sd"]).sum()
        lp += norm.logpdf(params["difficulty"], 0.0, pri["difficulty_sd"]).sum()
    return float(lp + C.dirichlet_logpdf_nojac(params["prevalence"], pri["prevalence"]))


def _log_posterior(ann, params, pri) -> float:
    """The objective of EM and of find_MAP (no Jacobian), GLAD or IRT by ``params``."""
    joint = _irt_joint_np(ann, params) if "difficulty" in params else _joint_np(ann, params)
    _, item_ll = C.posterior_from_joint(joint)
    return float(item_ll.sum()) + _log_prior(params, pri)


def _fit_rates(ann, correct_prob, pri, ability, log_easiness, max_iter):
    """The M-step for ability and log easiness: maximise the expected complete
    log-likelihood, sum over labels of p log sigmoid(x) + (1 - p) log sigmoid(-x)
    with p = P(label correct) from the E-step, plus the Normal log priors, by
    L-BFGS from the previous values (a concave problem in each block; jointly it
    is smooth, and EM only needs it not to decrease)."""
    J = ann.n_annotators
    mean, sd = pri["ability"]
    s = pri["easiness_sd"]

    def fun(theta):
        a, b = theta[:J], theta[J:]
        e = np.exp(b)
        x = a[ann.annotator_idx] * e[ann.item_idx]
        value = np.sum(correct_prob * log_expit(x) + (1 - correct_prob) * log_expit(-x))
        value -= 0.5 * np.sum(((a - mean) / sd) ** 2) + 0.5 * np.sum((b / s) ** 2)
        resid = correct_prob - expit(x)
        grad_a = np.bincount(ann.annotator_idx, weights=resid * e[ann.item_idx], minlength=J)
        grad_a -= (a - mean) / sd ** 2
        grad_b = np.bincount(ann.item_idx, weights=resid * x, minlength=ann.n_items) - b / s ** 2
        return -value, -np.r_[grad_a, grad_b]

    res = minimize(fun, np.r_[ability, log_easiness], jac=True, method="L-BFGS-B",
                   options={"maxiter": max_iter, "gtol": 1e-12, "ftol": 1e-15})
    return res.x[:J], res.x[J:]


_EM_INNER_ITER = 10
"""L-BFGS iterations of each EM step's M-step after the start (a generalised EM:
each step only has to raise the expected complete log posterior, warm started
from the last one; solving it to convergence every step took 4x the time on
RTE and 6x on web search, to the same fixed point)."""


def _m_step(ann, prob, pri, previous, max_iter=200):
    correct = prob[ann.item_idx, ann.labels]
    ability, log_easiness = _fit_rates(ann, correct, pri, previous["ability"],
                                       previous["log_easiness"], max_iter)
    return {"ability": ability, "log_easiness": log_easiness,
            "prevalence": _prevalence_step(prob, pri)}


def _prevalence_step(prob, pri):
    """The closed-form M-step of ``prevalence`` (Dirichlet prior, no Jacobian)."""
    prev = prob.sum(axis=0) + pri["prevalence"] - 1
    return prev / prev.sum()


def _start(ann, pri):
    """The M-step applied to the soft majority vote, from the prior mean ability
    and easiness 1."""
    seed = {"ability": np.array(pri["ability"][0], dtype=float),
            "log_easiness": np.zeros(ann.n_items)}
    return _m_step(ann, majority_vote(ann).values, pri, seed)


# ------------------------------------------------------------- IRT pieces
def _irt_correct_logits(ability, bias, log_easiness, difficulty, c, i, j, xp=np):
    """Each label's argument ``u`` and log-odds of being right, ``softplus(u)``, under
    the truth class of sign ``c`` (+1 positive, -1 negative)."""
    u = xp.exp(log_easiness[i]) * (ability[j] + c * bias[j] - difficulty[i])
    return u, (np.logaddexp(0.0, u) if xp is np else pt.softplus(u))


def _irt_joint_np(ann, params) -> np.ndarray:
    """(item, true_class) log joint of the IRT variant: under truth class k a label
    is right with log-odds ``softplus(easiness * (ability +- bias - difficulty))``."""
    sign = 2.0 * ann.labels - 1.0  # +1 for a positive label
    cols = []
    for c in (-1.0, 1.0):
        _, x = _irt_correct_logits(params["ability"], params["bias"], params["log_easiness"],
                                   params["difficulty"], c, ann.item_idx, ann.annotator_idx)
        cols.append(np.bincount(ann.item_idx, weights=log_expit(sign * c * x),
                                minlength=ann.n_items))
    prev = np.clip(params["prevalence"], C.PROB_FLOOR, 1)
    return np.stack(cols, axis=1) + np.log(prev)[None, :]


def _irt_joint_pt(ability, log_easiness, difficulty, bias, log_prev, ann):
    """The PyTensor twin of :func:`_irt_joint_np` (indices as ``pm.Data``)."""
    idx = C.long_table_data(ann)
    i, j = idx["item_idx"], idx["annotator_idx"]
    sign = 2.0 * idx["label_idx"] - 1.0
    n_items = pm.modelcontext(None).dim_lengths[D.ITEM]
    cols = []
    for c in (-1.0, 1.0):
        _, x = _irt_correct_logits(ability, bias, log_easiness, difficulty, c, i, j, xp=pt)
        cols.append(pt.inc_subtensor(pt.zeros((n_items,))[i], -pt.softplus(-sign * c * x)))
    return pt.stack(cols, axis=1) + log_prev[None, :]


def _irt_fit_rates(ann, prob, pri, previous, max_iter):
    """The IRT M-step for ``ability``, ``bias``, ``difficulty`` and ``log_easiness``:
    L-BFGS on the expected complete log posterior, the sum over labels and both
    truths of P(truth) log P(label | truth), plus the Normal log priors, warm
    started from ``previous`` (smooth, not jointly concave; EM only needs each
    step not to decrease it, which a line search from the previous values gives)."""
    J, n = ann.n_annotators, ann.n_items
    i, j = ann.item_idx, ann.annotator_idx
    sign = 2.0 * ann.labels - 1.0
    p = prob[i]
    mean, sd = pri["ability"]
    bsd, dsd, esd = pri["bias_sd"], pri["difficulty_sd"], pri["easiness_sd"]

    def fun(theta):
        a, b, d, le = np.split(theta, [J, 2 * J, 2 * J + n])
        e = np.exp(le)[i]
        value = -0.5 * (np.sum(((a - mean) / sd) ** 2) + np.sum((b / bsd) ** 2)
                        + np.sum((d / dsd) ** 2) + np.sum((le / esd) ** 2))
        g_a, g_b, g_d, g_le = -(a - mean) / sd ** 2, -b / bsd ** 2, -d / dsd ** 2, -le / esd ** 2
        for k, c in ((0, -1.0), (1, 1.0)):
            u, x = _irt_correct_logits(a, b, le, d, c, i, j)
            eta = sign * c * x
            value += p[:, k] @ log_expit(eta)
            g_u = p[:, k] * expit(-eta) * sign * c * expit(u)
            per_annotator = np.bincount(j, weights=g_u * e, minlength=J)
            g_a = g_a + per_annotator
            g_b = g_b + c * per_annotator
            g_d = g_d - np.bincount(i, weights=g_u * e, minlength=n)
            g_le = g_le + np.bincount(i, weights=g_u * u, minlength=n)
        return -value, -np.concatenate([g_a, g_b, g_d, g_le])

    x0 = np.concatenate([np.broadcast_to(previous[k], (size,)) for k, size in (
        ("ability", J), ("bias", J), ("difficulty", n), ("log_easiness", n))])
    res = minimize(fun, x0, jac=True, method="L-BFGS-B",
                   options={"maxiter": max_iter, "gtol": 1e-12, "ftol": 1e-15})
    return dict(zip(("ability", "bias", "difficulty", "log_easiness"),
                    np.split(res.x, [J, 2 * J, 2 * J + n]), strict=True))


def _irt_rate_spreads(ann, params, prob, pri) -> dict:
    """Each annotator's Laplace approximation of (ability, bias) given the item
    parameters and the final E-step: minus the inverse of the 2 x 2 Hessian of the
    expected complete log posterior (its Fisher information where that block is not
    negative definite, off a fixed point), as ``ability_sd``, ``bias_sd`` and the
    Normals of ability + bias and ability - bias, whose typical rates are the
    sensitivity and specificity (``report``'s ``typical_rate`` approximations)."""
    i, j, J = ann.item_idx, ann.annotator_idx, ann.n_annotators
    sign = 2.0 * ann.labels - 1.0
    e2 = np.exp(2 * params["log_easiness"])[i]
    observed, fisher = np.zeros((2, J)), np.zeros((2, J))  # (d2/da2 = d2/db2, d2/dadb)
    for k, c in ((0, -1.0), (1, 1.0)):
        u, x = _irt_correct_logits(params["ability"], params["bias"], params["log_easiness"],
                                   params["difficulty"], c, i, j)
        eta = sign * c * x
        flat = prob[i, k] * e2 * expit(eta) * expit(-eta) * expit(u) ** 2
        bent = prob[i, k] * e2 * expit(-eta) * sign * c * expit(u) * expit(-u)
        for out, curve in ((observed, bent - flat), (fisher, -flat)):
            out += np.stack([np.bincount(j, weights=curve, minlength=J),
                             c * np.bincount(j, weights=curve, minlength=J)])
    spreads = {}
    for curvature in (fisher, observed):  # observed wins where it is negative definite
        aa = -curvature[0] + 1 / pri["ability"][1] ** 2
        bb = -curvature[0] + 1 / pri["bias_sd"] ** 2
        ab = -curvature[1]
        det = aa * bb - ab ** 2
        good = (aa > 0) & (det > 0)
        var_a, var_b, cov = bb / det, aa / det, -ab / det
        for name, value in (("ability_sd", var_a), ("bias_sd", var_b),
                            ("sensitivity_scale", var_a + var_b + 2 * cov),
                            ("specificity_scale", var_a + var_b - 2 * cov)):
            spreads[name] = np.where(good, np.sqrt(np.abs(value)), spreads.get(name, np.nan))
    spreads["sensitivity_location"] = params["ability"] + params["bias"]
    spreads["specificity_location"] = params["ability"] - params["bias"]
    return spreads


def _irt_m_step(ann, prob, pri, previous, max_iter=200):
    return {**_irt_fit_rates(ann, prob, pri, previous, max_iter),
            "prevalence": _prevalence_step(prob, pri)}


def _irt_start(ann, pri):
    """The IRT M-step applied to the soft majority vote, from the prior means."""
    seed = {"ability": pri["ability"][0], "bias": 0.0, "difficulty": 0.0,
            "log_easiness": 0.0}
    return _irt_m_step(ann, majority_vote(ann).values, pri, seed)


def _typical_rates(ability, bias, xp=np):
    """Each annotator's sensitivity and specificity at an item of difficulty 0 and
    easiness 1."""
    if xp is np:
        return tuple(expit(np.logaddexp(0.0, ability + c * bias)) for c in (1.0, -1.0))
    return tuple(pt.sigmoid(pt.softplus(ability + c * bias)) for c in (1.0, -1.0))


def _check_irt_only(variant, **values):
    """The IRT priors are refused for the GLAD variants (never silently ignored)."""
    given = [k for k, v in values.items() if v is not None]
    if given and variant not in IRT_VARIANTS:
        raise ValueError(f"{', '.join(given)} apply to the IRT variants {IRT_VARIANTS} only, "
                         f"not to variant={variant!r}; drop them or choose an IRT variant.")
    return {k: DEFAULT_PRIORS[k] if v is None else v for k, v in values.items()}


# ----------------------------------------------------------------- factory
def build_model(
    annotations: Annotations,
    *,
    variant: str = "fixed",
    ability_prior=DEFAULT_PRIORS["ability_prior"],
    easiness_sd=DEFAULT_PRIORS["easiness_sd"],
    spread_prior=DEFAULT_PRIORS["spread_prior"],
    prevalence_prior=DEFAULT_PRIORS["prevalence_prior"],
    bias_sd=None,
    difficulty_sd=None,
) -> pm.Model:
    r"""The item-difficulty model (GLAD) in PyMC, true class summed out.

    .. math::

        z_i &\sim \mathrm{Categorical}(\text{prevalence}) \\
        P(y_{ij} = l \mid z_i = k) &= \sigma(\text{ability}_j \, \text{easiness}_i)
            \text{ if } l = k, \text{ else }
            \frac{1 - \sigma(\text{ability}_j \, \text{easiness}_i)}{K - 1} \\
        \text{easiness}_i &= \exp(\text{log\_easiness}_i) \\
        \text{fixed:} \quad \text{ability}_j &\sim \mathcal{N}(\mu_a, s_a), \quad
            \text{log\_easiness}_i \sim \mathcal{N}(0, s_e) \\
        \text{hierarchical:} \quad \text{ability}_j &\sim \mathcal{N}(\text{ability\_mean},
            s_a), \quad \text{log\_easiness}_i = \text{easiness\_spread} \,
            \text{easiness\_offset}_i, \quad \text{easiness\_offset}_i \sim \mathcal{N}(0, 1)

    with ``ability_mean`` ~ N(:math:`\mu_a`, spread_prior), ``easiness_spread`` ~
    HalfNormal(spread_prior) and ``prevalence`` ~ Dirichlet. The IRT variants
    (binary; see the module docstring) replace the label model by

    .. math::

        \operatorname{logit} P(y_{ij} = z_i \mid z_i) &=
            \operatorname{softplus}(\text{easiness}_i (\text{ability}_j + (2 z_i - 1)\,
            \text{bias}_j - \text{difficulty}_i)) \\
        \text{bias}_j &\sim \mathcal{N}(0, s_b), \quad \text{irt:} \quad
            \text{difficulty}_i \sim \mathcal{N}(0, s_d) \\
        \text{irt\_hierarchical:} \quad \text{difficulty}_i &=
            \text{difficulty\_spread} \, \text{difficulty\_offset}_i

    Parameters
    ----------
    annotations : Annotations
        K >= 2 classes and no features.
    variant : {"fixed", "hierarchical", "irt", "irt_hierarchical"}, optional
        See the module docstring.
    ability_prior : (mean, sd), optional
        Each annotator's Normal ability prior (numbers or arrays over annotators).
    easiness_sd : float, optional
        Normal sd of each item's ``log_easiness`` ("fixed").
    spread_prior : float, optional
        HalfNormal scale of ``easiness_spread`` ("hierarchical").
    prevalence_prior : float or array (K,), optional
        Dirichlet concentration of ``prevalence``.
    bias_sd, difficulty_sd : float or None, optional
        Normal sds of ``bias`` and ("irt") ``difficulty``, IRT variants only (``DEFAULT_PRIORS``).

    Returns
    -------
    pymc.Model
        Variables ``ability`` (annotator), ``log_easiness`` and ``easiness``
        (item), ``prevalence`` (true_class), ``item_class_prob``, the observed
        ``item_labels`` (item) whose log-density is each item's marginal
        log-likelihood, and for "hierarchical" ``ability_mean``,
        ``easiness_spread``, ``easiness_offset`` (item). The IRT variants add
        ``bias``, ``sensitivity`` and ``specificity`` (annotator; the last two at
        an item of difficulty 0 and easiness 1) and ``difficulty`` (item), and
        "irt_hierarchical" ``difficulty_spread`` and ``difficulty_offset``
        (item). ``model.crowd_start`` holds EM's start (hierarchical: mapped to
        its coordinates); the hierarchical models set
        ``model.crowd_target_accept = 0.98``, which :func:`crowd_models.sample`
        uses unless told otherwise (for "irt_hierarchical" see the known mixing
        problem in the module docstring).

    Examples
    --------
    >>> from crowd_models.models import item_difficulty
    >>> fit = cm.fit_map(item_difficulty.build_model(cm.datasets.load_rte()))
    >>> fit.posterior["easiness"].to_series().sort_values().head()  # the hardest items
    """
    _require(annotations, variant)
    extra = _check_irt_only(variant, bias_sd=bias_sd, difficulty_sd=difficulty_sd)
    pri = _priors(annotations, ability_prior, easiness_sd, spread_prior, prevalence_prior,
                  **extra)
    irt = variant in IRT_VARIANTS
    hierarchical = variant in ("hierarchical", "irt_hierarchical")
    start = (_irt_start if irt else _start)(annotations, pri)
    with pm.Model(coords=annotations.coords()) as model:
        ability, log_easiness, start = _ability_and_easiness(pri, start, hierarchical)
        pm.Deterministic("easiness", pt.exp(log_easiness), dims=D.ITEM)
        prev = pm.Dirichlet("prevalence", a=pri["prevalence"], dims=D.TRUE_CLASS)
        if irt:
            bias, difficulty, start = _irt_variables(pri, start, hierarchical)
            sens, spec = _typical_rates(ability, bias, xp=pt)
            pm.Deterministic("sensitivity", sens, dims=D.ANNOTATOR)
            pm.Deterministic("specificity", spec, dims=D.ANNOTATOR)
            joint = _irt_joint_pt(ability, log_easiness, difficulty, bias, pt.log(prev),
                                  annotations)
        else:
            joint = _joint_pt(ability, log_easiness, pt.log(prev), annotations)
        C.add_item_likelihood(joint, annotations)
    if hierarchical:  # 0.9 and 0.95 left divergences on 150 simulated items (GLAD)
        model.crowd_target_accept = 0.98
    return C.attach_protocol(model, "item_difficulty", variant, start=start,
                             em=None if hierarchical else em, annotations=annotations,
                             arguments=locals())


def _ability_and_easiness(pri, start, hierarchical):
    """``ability`` and ``log_easiness`` in the model being built, with the start
    mapped to the hierarchical coordinates (the derived ``log_easiness`` left out)."""
    mean, sd = pri["ability"]
    if not hierarchical:
        ability = pm.Normal("ability", mean, sd, dims=D.ANNOTATOR)
        return ability, pm.Normal("log_easiness", 0.0, pri["easiness_sd"], dims=D.ITEM), start
    centre = pm.Normal("ability_mean", float(np.mean(mean)), pri["spread"])
    ability = pm.Normal("ability", centre + (mean - np.mean(mean)), sd, dims=D.ANNOTATOR)
    spread = pm.HalfNormal("easiness_spread", pri["spread"])
    offset = pm.Normal("easiness_offset", 0.0, 1.0, dims=D.ITEM)
    log_easiness = pm.Deterministic("log_easiness", spread * offset, dims=D.ITEM)
    return ability, log_easiness, _non_centred_start(start, "log_easiness", "easiness", {
        "ability_mean": float(np.mean(start["ability"]))})


def _non_centred_start(start, name, prefix, more=None):
    """``start`` with ``name`` replaced by its ``{prefix}_spread`` and ``{prefix}_offset``."""
    scale = max(float(np.std(start[name])), 0.1)
    out = {k: v for k, v in start.items() if k != name}
    out.update(more or {})
    out[f"{prefix}_spread"] = scale
    out[f"{prefix}_offset"] = start[name] / scale
    return out


def _irt_variables(pri, start, hierarchical):
    """``bias`` and ``difficulty`` of the IRT variants in the model being built."""
    bias = pm.Normal("bias", 0.0, pri["bias_sd"], dims=D.ANNOTATOR)
    if not hierarchical:
        return bias, pm.Normal("difficulty", 0.0, pri["difficulty_sd"], dims=D.ITEM), start
    spread = pm.HalfNormal("difficulty_spread", pri["spread"])
    offset = pm.Normal("difficulty_offset", 0.0, 1.0, dims=D.ITEM)
    difficulty = pm.Deterministic("difficulty", spread * offset, dims=D.ITEM)
    return bias, difficulty, _non_centred_start(start, "difficulty", "difficulty")


# ---------------------------------------------------------------------- EM
def em(
    annotations: Annotations,
    *,
    variant: str = "fixed",
    ability_prior=DEFAULT_PRIORS["ability_prior"],
    easiness_sd=DEFAULT_PRIORS["easiness_sd"],
    prevalence_prior=DEFAULT_PRIORS["prevalence_prior"],
    bias_sd=None,
    difficulty_sd=None,
    tol: float = 1e-8,
    max_iter: int = 2000,
    accelerate: bool = True,
) -> xr.Dataset:
    """MAP-EM of the item-difficulty model ("fixed" or "irt"), from the majority-vote start.

    E-step: each item's class posterior, hence each label's probability of
    being correct. M-step: ``prevalence`` in closed form; ``ability`` and
    ``log_easiness`` by a few L-BFGS iterations on the expected complete log
    posterior, warm started from the previous values (a generalised EM; GLAD's
    own M-step is such a gradient ascent). "irt" does the same for ``ability``,
    ``bias``, ``difficulty`` and ``log_easiness`` on the expected complete log
    posterior summed over both truths. EM's fixed point is a stationary point of
    the marginal log posterior that ``fit_map`` maximises. Stops when an EM step
    moves no parameter by more than ``tol``; ``accelerate`` extrapolates by SQUAREM.

    Returns
    -------
    xarray.Dataset
        The posterior's names and dims (chain=1, draw=1): ``ability``,
        ``log_easiness``, ``easiness``, ``prevalence``, ``item_class_prob``
        ("irt": also ``bias``, ``difficulty``, ``sensitivity``, ``specificity``);
        ``n_labels``; attrs ``log_posterior``, ``log_likelihood``, ``n_iter``,
        ``converged``.

    Examples
    --------
    >>> from crowd_models.models import item_difficulty
    >>> fit = item_difficulty.em(cm.datasets.load_rte())
    >>> cm.report.annotator_summary(fit, rank_by="ability_mean").head()
    """
    _require(annotations, variant)
    if variant in ("hierarchical", "irt_hierarchical"):
        raise ValueError(f"the {variant} variant has no EM (its density has no mode): "
                         f"use sample on build_model(..., variant={variant!r}).")
    extra = _check_irt_only(variant, bias_sd=bias_sd, difficulty_sd=difficulty_sd)
    pri = _priors(annotations, ability_prior, easiness_sd, DEFAULT_PRIORS["spread_prior"],
                  prevalence_prior, **extra)
    irt = variant == "irt"
    joint_of = partial(_irt_joint_np if irt else _joint_np, annotations)
    params, n_iter, converged = _em.run_em(
        joint_of,
        lambda prob, prev: (_irt_m_step if irt else _m_step)(
            annotations, prob, pri, prev, max_iter=_EM_INNER_ITER),
        (_irt_start if irt else _start)(annotations, pri), tol=tol, max_iter=max_iter,
        objective=lambda prm: _log_posterior(annotations, prm, pri),
        supports=_EM_SUPPORTS, accelerate=accelerate,
    )
    prob, item_ll = C.posterior_from_joint(joint_of(params))
    derived = {"easiness": np.exp(params["log_easiness"]), "item_class_prob": prob}
    extra = {"n_labels": ((D.ANNOTATOR,), annotations.n_labels())}
    if irt:
        derived["sensitivity"], derived["specificity"] = _typical_rates(params["ability"],
                                                                        params["bias"])
        extra.update({name: ((D.ANNOTATOR,), value) for name, value in
                      _irt_rate_spreads(annotations, params, prob, pri).items()})
    else:
        extra["ability_sd"] = ((D.ANNOTATOR,), _ability_sd(annotations, params, pri))
    return C.em_dataset(
        annotations, {**params, **derived}, _DIMS, extra=extra,
        attrs={"family": "item_difficulty", "variant": variant, "method": "em",
               "log_likelihood": float(item_ll.sum()),
               "log_posterior": _log_posterior(annotations, params, pri),
               "n_iter": n_iter, "converged": int(converged)},
        supports={"prevalence": "simplex"},
    )


# ---------------------------------------------------------------- simulate
def simulate(
    ability,
    easiness,
    *,
    n_classes: int = 2,
    prevalence=None,
    labels_per_item: int | None = None,
    classes=None,
    rng=None,
) -> Annotations:
    """Annotations drawn from the item-difficulty model, with the truth kept.

    ``ability``: one real number per annotator; ``easiness``: one positive
    number per item (their number is the number of items). The truth follows
    ``prevalence`` (uniform over ``n_classes`` by default); a wrong label is
    uniform over the other classes. Every annotator labels every item, or
    ``labels_per_item`` annotators drawn at random per item.

    Examples
    --------
    >>> import numpy as np
    >>> from crowd_models.models import item_difficulty
    >>> easiness = np.exp(np.random.default_rng(0).normal(0, 1, 300))
    >>> ann = item_difficulty.simulate([2.0, 1.0, 0.5, 0.0], easiness, rng=0)
    """
    rng = np.random.default_rng(rng)
    ability = np.asarray(ability, dtype=float)
    easiness = np.asarray(easiness, dtype=float)
    if ability.ndim != 1 or not np.all(np.isfinite(ability)):
        raise ValueError(f"ability must be one finite number per annotator, got {ability!r}.")
    if easiness.ndim != 1 or np.any(~(easiness > 0)) or np.any(~np.isfinite(easiness)):
        raise ValueError("easiness must be one positive finite number per item.")
    K = int(n_classes)
    prev = np.full(K, 1.0 / K) if prevalence is None else np.asarray(prevalence, dtype=float)
    if K < 2 or prev.shape != (K,) or np.any(prev < 0) or not np.isclose(prev.sum(), 1):
        raise ValueError(f"prevalence must be {K} probabilities summing to 1 (K >= 2).")
    n_items = len(easiness)
    z = rng.choice(K, size=n_items, p=prev)
    item_idx, ann_idx = C.simulation_design(n_items, len(ability), labels_per_item, rng)
    right = rng.random(len(item_idx)) < expit(ability[ann_idx] * easiness[item_idx])
    shift = rng.integers(1, K, size=len(item_idx))  # a wrong class, uniformly
    y = np.where(right, z[item_idx], (z[item_idx] + shift) % K)
    truth = {"ability": (_DIMS["ability"], ability),
             "easiness": (_DIMS["easiness"], easiness),
             "log_easiness": (_DIMS["log_easiness"], np.log(easiness)),
             "prevalence": (_DIMS["prevalence"], prev)}
    classes = list(range(K)) if classes is None else list(classes)
    return C.simulated_annotations(item_idx, ann_idx, y, z, classes, None, truth)


def simulate_irt(
    ability,
    bias,
    difficulty,
    easiness,
    *,
    prevalence: float = 0.5,
    labels_per_item: int | None = None,
    classes=None,
    rng=None,
) -> Annotations:
    """Binary annotations drawn from the IRT variant, with the truth kept.

    ``ability`` and ``bias``: one number per annotator; ``difficulty`` and
    ``easiness`` (positive): one per item. The truth is positive with
    probability ``prevalence``; a label is right with log-odds
    ``softplus(easiness[i] * (ability[j] + s * bias[j] - difficulty[i]))``,
    ``s = +1`` for a positive truth and -1 for a negative one. Every annotator labels every
    item, or ``labels_per_item`` annotators drawn at random per item.

    Examples
    --------
    >>> import numpy as np
    >>> from crowd_models.models import item_difficulty
    >>> rng = np.random.default_rng(0)
    >>> ann = item_difficulty.simulate_irt([2.0, 1.0, 0.0], [0.0, 1.0, -1.0],
    ...                                    rng.normal(0, 1, 200), np.ones(200), rng=rng)
    """
    rng = np.random.default_rng(rng)
    ability, bias, difficulty, easiness = (np.asarray(v, dtype=float) for v in (
        ability, bias, difficulty, easiness))
    for name, v in (("ability", ability), ("bias", bias), ("difficulty", difficulty)):
        if v.ndim != 1 or not np.all(np.isfinite(v)):
            raise ValueError(f"{name} must be a 1-d array of finite numbers, got {v!r}.")
    if bias.shape != ability.shape:
        raise ValueError(f"bias has {bias.size} entries for {ability.size} annotators.")
    if easiness.shape != difficulty.shape or np.any(~(easiness > 0)) or np.any(
            ~np.isfinite(easiness)):
        raise ValueError("easiness must be one positive finite number per item (as many as "
                         "difficulty).")
    if not 0 <= prevalence <= 1:
        raise ValueError(f"prevalence must be a probability, got {prevalence!r}.")
    n_items = len(difficulty)
    z = (rng.random(n_items) < prevalence).astype(int)
    item_idx, ann_idx = C.simulation_design(n_items, len(ability), labels_per_item, rng)
    _, x = _irt_correct_logits(ability, bias, np.log(easiness), difficulty,
                               2.0 * z[item_idx] - 1.0, item_idx, ann_idx)
    right = rng.random(len(item_idx)) < expit(x)
    y = np.where(right, z[item_idx], 1 - z[item_idx])
    sens, spec = _typical_rates(ability, bias)
    truth = {"ability": (_DIMS["ability"], ability), "bias": (_DIMS["bias"], bias),
             "difficulty": (_DIMS["difficulty"], difficulty),
             "easiness": (_DIMS["easiness"], easiness),
             "log_easiness": (_DIMS["log_easiness"], np.log(easiness)),
             "sensitivity": (_DIMS["sensitivity"], sens),
             "specificity": (_DIMS["specificity"], spec),
             "prevalence": (_DIMS["prevalence"], np.array([1 - prevalence, prevalence]))}
    classes = [0, 1] if classes is None else list(classes)
    return C.simulated_annotations(item_idx, ann_idx, y.astype(int), z, classes, None, truth)
