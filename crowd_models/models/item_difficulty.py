"""Item-difficulty model (GLAD): annotator ability times item easiness, K classes.

Whitehill, Ruvolo, Wu, Bergsma and Movellan (2009), "Whose Vote Should Count
More: Optimal Integration of Labels from Labelers of Unknown Expertise",
NeurIPS 22. Annotator j labels item i correctly with probability
``sigmoid(ability[j] * easiness[i])`` and otherwise picks one of the K - 1
wrong classes uniformly. ``ability`` is real (0: guessing, negative: worse
than guessing); ``easiness = exp(log_easiness) > 0``: near 0 every annotator
guesses on the item, large values let every able annotator get it right. The
true class follows a ``prevalence``; the model has no classifier.

Variants (``variant=``):

* ``"fixed"`` (default): Normal priors of fixed scale on ``ability`` and
  ``log_easiness``. It has a mode, reached by EM (an inner L-BFGS M-step) and by
  ``fit_map`` alike.
* ``"hierarchical"``: the items' log easiness are drawn around 0 with a
  learned spread ``easiness_spread`` (HalfNormal), non-centred
  (``log_easiness = easiness_spread * easiness_offset``), and the abilities
  around a learned ``ability_mean``. PyMC only (NUTS): with a learned spread
  the joint density has no mode (it grows without bound as the spread shrinks
  to 0 with every item's offset), so MAP and EM are refused.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import xarray as xr
from scipy.optimize import minimize
from scipy.special import expit, log_expit

from crowd_models import _dims as D
from crowd_models import _trust
from crowd_models.baselines import majority_vote
from crowd_models.data import Annotations
from crowd_models.models import _common as C

__all__ = ["build_model", "em", "simulate", "VARIANTS", "DEFAULT_PRIORS"]

VARIANTS = ("fixed", "hierarchical")

DEFAULT_PRIORS = dict(
    ability_prior=(1.0, 1.0),
    easiness_sd=1.0,
    spread_prior=1.0,
    prevalence_prior=2.0,
)
"""Defaults, the same for every data set. ``ability_prior`` = (mean, sd) of each
annotator's Normal ability: a mean of 1 (a correct label with probability
0.73 on an item of average easiness) breaks the symmetry with the mirrored
mode in which every ability and the truth flip. ``easiness_sd`` is the
Normal sd of each item's ``log_easiness`` ("fixed"): 1 lets the easiness of
an item range over a factor of about 7 either way. ``spread_prior`` is the
HalfNormal scale of the hierarchical ``easiness_spread`` (and the Normal sd of
``ability_mean`` around ``ability_prior``'s mean). ``prevalence_prior`` is the
truth's symmetric Dirichlet concentration."""

_DIMS = {
    "ability": (D.ANNOTATOR,),
    "log_easiness": (D.ITEM,),
    "easiness": (D.ITEM,),
    "prevalence": (D.TRUE_CLASS,),
    "item_class_prob": (D.ITEM, D.TRUE_CLASS),
}

_EM_SUPPORTS = {"ability": "real", "log_easiness": "real", "prevalence": "simplex"}


# ------------------------------------------------------------------ priors
def _require(annotations: Annotations, variant: str) -> None:
    C.require_categorical(annotations, "the item-difficulty model")
    if variant not in VARIANTS:
        raise ValueError(f"variant={variant!r} is not one of {VARIANTS}.")
    if annotations.features is not None:
        raise ValueError(
            "the item-difficulty model has no classifier, so it cannot use the annotations' "
            f"{annotations.n_features} features; fit annotations.with_features(None), or a "
            "family with a classifier (two_coin, dawid_skene).")
    _trust.check_identifiable(annotations, "the item-difficulty model")


def _priors(ann: Annotations, ability_prior, easiness_sd, spread_prior,
            prevalence_prior) -> dict:
    mean, sd = C.parameter_pair(ability_prior, "ability_prior", ann.n_annotators,
                                what="(mean, sd) of Normal", parts="mean and sd")
    if np.any(~np.isfinite(mean)) or np.any(~(sd > 0)) or np.any(~np.isfinite(sd)):
        raise ValueError(f"ability_prior must be (mean, sd) with a finite mean and a finite "
                         f"sd > 0, got {ability_prior!r}.")
    for name, value in (("easiness_sd", easiness_sd), ("spread_prior", spread_prior)):
        if np.ndim(value) != 0 or not (np.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive number, got {value!r}.")
    return {"ability": (mean, sd), "easiness_sd": float(easiness_sd),
            "spread": float(spread_prior),
            "prevalence": C.dirichlet_prior(prevalence_prior, "prevalence_prior",
                                            (ann.n_classes,))}


# ------------------------------------------------------- the likelihood
def _row_logits(ability, log_easiness, ann, xp=np):
    """Each label's log-odds of being correct, ``ability[j] * easiness[i]``."""
    return ability[ann.annotator_idx] * xp.exp(log_easiness[ann.item_idx])


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
    mean, sd = pri["ability"]
    lp = -0.5 * np.sum(((params["ability"] - mean) / sd) ** 2) - np.sum(
        np.log(sd * np.sqrt(2 * np.pi)))
    s = pri["easiness_sd"]
    lp += -0.5 * np.sum((params["log_easiness"] / s) ** 2) - params["log_easiness"].size * (
        np.log(s * np.sqrt(2 * np.pi)))
    return float(lp + C.dirichlet_logpdf_nojac(params["prevalence"], pri["prevalence"]))


def _log_posterior(ann, params, pri) -> float:
    """The objective of EM and of find_MAP (no Jacobian)."""
    _, item_ll = C.posterior_from_joint(_joint_np(ann, params))
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
    prev = prob.sum(axis=0) + pri["prevalence"] - 1
    return {"ability": ability, "log_easiness": log_easiness, "prevalence": prev / prev.sum()}


def _start(ann, pri):
    """The M-step applied to the soft majority vote, from the prior mean ability
    and easiness 1."""
    seed = {"ability": np.array(pri["ability"][0], dtype=float),
            "log_easiness": np.zeros(ann.n_items)}
    return _m_step(ann, majority_vote(ann).values, pri, seed)


# ----------------------------------------------------------------- factory
def build_model(
    annotations: Annotations,
    *,
    variant: str = "fixed",
    ability_prior=DEFAULT_PRIORS["ability_prior"],
    easiness_sd=DEFAULT_PRIORS["easiness_sd"],
    spread_prior=DEFAULT_PRIORS["spread_prior"],
    prevalence_prior=DEFAULT_PRIORS["prevalence_prior"],
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
    HalfNormal(spread_prior) and ``prevalence`` ~ Dirichlet.

    Parameters
    ----------
    annotations : Annotations with K >= 2 classes and no features.
    variant : "fixed" or "hierarchical" (see the module docstring).
    ability_prior : (mean, sd) of each annotator's Normal ability (numbers or
        arrays over annotators).
    easiness_sd : Normal sd of each item's ``log_easiness`` ("fixed").
    spread_prior : HalfNormal scale of ``easiness_spread`` ("hierarchical").
    prevalence_prior : number or (K,), Dirichlet concentration of ``prevalence``.

    Returns
    -------
    pymc.Model
        Variables ``ability`` (annotator), ``log_easiness`` and ``easiness``
        (item), ``prevalence`` (true_class), ``item_class_prob``, the observed
        ``item_labels`` (item) whose log-density is each item's marginal
        log-likelihood, and for "hierarchical" ``ability_mean``,
        ``easiness_spread``, ``easiness_offset`` (item). ``model.crowd_start``
        holds EM's start (hierarchical: mapped to its coordinates); the
        hierarchical model sets ``model.crowd_target_accept = 0.98``, which
        :func:`crowd_models.sample` uses unless told otherwise.

    Example
    -------
    >>> from crowd_models.models import item_difficulty
    >>> fit = cm.fit_map(item_difficulty.build_model(cm.datasets.load_rte()))
    >>> fit.posterior["easiness"].to_series().sort_values().head()  # the hardest items
    """
    _require(annotations, variant)
    pri = _priors(annotations, ability_prior, easiness_sd, spread_prior, prevalence_prior)
    start = _start(annotations, pri)
    mean, sd = pri["ability"]
    with pm.Model(coords=annotations.coords()) as model:
        if variant == "fixed":
            ability = pm.Normal("ability", mean, sd, dims=D.ANNOTATOR)
            log_easiness = pm.Normal("log_easiness", 0.0, pri["easiness_sd"], dims=D.ITEM)
        else:
            centre = pm.Normal("ability_mean", float(np.mean(mean)), pri["spread"])
            ability = pm.Normal("ability", centre + (mean - np.mean(mean)), sd,
                                dims=D.ANNOTATOR)
            spread = pm.HalfNormal("easiness_spread", pri["spread"])
            offset = pm.Normal("easiness_offset", 0.0, 1.0, dims=D.ITEM)
            log_easiness = pm.Deterministic("log_easiness", spread * offset, dims=D.ITEM)
            scale = max(float(np.std(start["log_easiness"])), 0.1)
            start = {**start, "ability_mean": float(np.mean(start["ability"])),
                     "easiness_spread": scale, "easiness_offset": start["log_easiness"] / scale}
        pm.Deterministic("easiness", pt.exp(log_easiness), dims=D.ITEM)
        prev = pm.Dirichlet("prevalence", a=pri["prevalence"], dims=D.TRUE_CLASS)
        joint = _joint_pt(ability, log_easiness, pt.log(prev), annotations)
        C.add_item_likelihood(joint, annotations)
    model.crowd_start = {k: v for k, v in start.items()
                         if not (variant == "hierarchical" and k == "log_easiness")}
    if variant == "hierarchical":  # 0.9 and 0.95 left divergences on 150 simulated items
        model.crowd_target_accept = 0.98
    if variant == "fixed":
        model.crowd_em = partial(em, annotations, ability_prior=ability_prior,
                                 easiness_sd=easiness_sd, prevalence_prior=prevalence_prior)
    return model


# ---------------------------------------------------------------------- EM
def em(
    annotations: Annotations,
    *,
    variant: str = "fixed",
    ability_prior=DEFAULT_PRIORS["ability_prior"],
    easiness_sd=DEFAULT_PRIORS["easiness_sd"],
    prevalence_prior=DEFAULT_PRIORS["prevalence_prior"],
    tol: float = 1e-8,
    max_iter: int = 2000,
    accelerate: bool = True,
) -> xr.Dataset:
    """MAP-EM of the item-difficulty model ("fixed"), from the majority-vote start.

    E-step: each item's class posterior, hence each label's probability of
    being correct. M-step: ``prevalence`` in closed form; ``ability`` and
    ``log_easiness`` by a few L-BFGS iterations on the expected complete log
    posterior, warm started from the previous values (a generalised EM; GLAD's
    own M-step is such a gradient ascent). EM's fixed point is a stationary
    point of the marginal log posterior that ``fit_map`` maximises. Stops when an EM step moves no
    parameter by more than ``tol``; ``accelerate`` extrapolates by SQUAREM.

    Returns
    -------
    xarray.Dataset
        The posterior's names and dims (chain=1, draw=1): ``ability``,
        ``log_easiness``, ``easiness``, ``prevalence``, ``item_class_prob``;
        ``n_labels``; attrs ``log_posterior``, ``log_likelihood``, ``n_iter``,
        ``converged``.

    Example
    -------
    >>> from crowd_models.models import item_difficulty
    >>> fit = item_difficulty.em(cm.datasets.load_rte())
    >>> cm.report.annotator_summary(fit, rank_by="ability_mean").head()
    """
    _require(annotations, variant)
    if variant == "hierarchical":
        raise ValueError("the hierarchical variant has no EM (its density has no mode): "
                         "use sample on build_model(..., variant='hierarchical').")
    pri = _priors(annotations, ability_prior, easiness_sd, DEFAULT_PRIORS["spread_prior"],
                  prevalence_prior)
    params, n_iter, converged = C.run_em(
        lambda prm: _joint_np(annotations, prm),
        lambda prob, prev: _m_step(annotations, prob, pri, prev, max_iter=_EM_INNER_ITER),
        _start(annotations, pri), tol=tol, max_iter=max_iter,
        objective=lambda prm: _log_posterior(annotations, prm, pri),
        supports=_EM_SUPPORTS, accelerate=accelerate,
    )
    prob, item_ll = C.posterior_from_joint(_joint_np(annotations, params))
    return C.em_dataset(
        annotations,
        {**params, "easiness": np.exp(params["log_easiness"]), "item_class_prob": prob},
        _DIMS, extra={"n_labels": ((D.ANNOTATOR,), annotations.n_labels())},
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

    Example
    -------
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
