"""Ordinal labels: ordered classes 1 < 2 < ... < K.

Two models, chosen with ``variant=``:

``"cumulative"`` (Raykar et al. 2010, JMLR 11, sec. 8.2, after Frank & Hall 2001)
    Raykar, Yu, Zhao, Valadez, Florin, Bogoni and Moy's model: K - 1 binary
    problems "is the level above c?" (c = 1 .. K-1), each a two-coin model
    (:mod:`crowd_models.models.two_coin`) with its own per-annotator
    ``sensitivity`` and ``specificity`` (annotator, threshold) and its own
    ``threshold_prevalence`` (threshold) = P(level > c) or logistic
    classifier ``coef`` (feature, threshold) and ``intercept`` (threshold).
    The problems share no parameter, so the model is their product; EM is
    K - 1 two-coin EMs and MAP = EM as for the two-coin family. The class
    probabilities are differences of the fitted exceedance probabilities,
    ``P(level = c) = P(level > c - 1) - P(level > c)`` (``exceed_prob``,
    item x threshold). The problems are fitted separately, so nothing keeps
    ``exceed_prob`` decreasing in c and a difference can be negative.
    **Repair rule** (used by :func:`em`, ``build_model`` and
    :func:`class_probabilities`): clip the differences at zero and
    renormalise each item's row (clip-and-renormalise); :func:`negative_differences`
    counts how often it was needed, and ``em`` stores the counts in its attrs
    and warns with them. On real data the repair is common (most items of a
    4-level set), so for class probabilities and their intervals the latent
    variant is the coherent choice.

    The model's ``item_labels`` log-density is the *sum* of the K - 1 binary
    problems' per-item marginal log-likelihoods. It is a composite
    likelihood, not a distribution of the observed labels: every label enters
    K - 1 times (as "above c?" for each c), and the binary answers of one
    label are treated as independent although they are deterministic
    functions of it. Its values are therefore not comparable with the
    log-likelihoods of proper models of the labels (``az.compare`` against
    Dawid-Skene or the latent variant would be meaningless), and its NUTS
    posterior is over-confident. Use it for point estimates and
    per-threshold annotator rates.

``"latent"`` (beyond the paper)
    A coherent annotator model with far fewer parameters than a confusion
    matrix. Item i has a hidden level z_i (code 0..K-1) drawn from
    ``prevalence``. Level k sits at ``level_location[k]`` on a latent scale,
    from 0 (lowest level) to K - 1 (highest), the interior locations learned
    (``level_spacing``, a (K-1)-simplex of the gaps, scaled by K - 1); the
    shared ``cutpoints`` are the midpoints between consecutive locations, so
    an unbiased, noiseless annotator reports the true level. Annotator j
    perceives level k as ``u = level_location[k] + bias[j] + noise[j] * e``
    with e standard logistic (``link="logit"``, ordered logit) or standard
    normal (``link="probit"``) and reports level l when
    ``cutpoints[l-1] < u <= cutpoints[l]``:

        P(label <= l | z = k, j) = F((cutpoints[l] - level_location[k] - bias[j]) / noise[j]).

    ``bias`` (annotator), Normal(0, ``bias_sd``): bias > 0 means that the
    annotator rates *higher* than the true level ("lenient" when high =
    good), bias < 0 lower ("strict"). ``noise`` (annotator) > 0 is the
    annotator's spread. ``guessing=True`` adds a per-annotator
    ``guess_rate``: with that probability the annotator picks a level
    uniformly at random, whatever the item (spammers, and the far-off labels
    a logistic tail cannot explain; ``case_studies/ordinal_relevance.py``
    measures what it gains on web search). ``confusion`` (annotator, true_class,
    label_class) is the implied confusion matrix, a deterministic, so
    :func:`crowd_models.report.annotator_summary` reports each annotator's
    accuracies beside bias and noise. The true level is summed out exactly
    (``_common.item_joint``), so ``item_labels`` is the item's marginal likelihood
    of its labels and LOO compares it with Dawid-Skene fairly. There is no
    EM for this variant: fit it with ``cm.fit_map`` (it starts at
    ``model.crowd_start``) or ``cm.sample``. No classifier (features are
    refused).

    ``annotator_cutpoints=True`` (K >= 3) gives each annotator its own cut
    points, so that it may use the scale unevenly (e.g. rarely say "5"),
    shrunk toward the shared ones: ``log_width_ratio`` (annotator,
    inner_level), Normal(0, ``width_sd``), is the log of the ratio of the
    annotator's width of each interior level's interval (levels 2 .. K-1) to
    the shared width. The annotator's cut points ``annotator_cutpoints``
    (annotator, threshold) are laid out with those widths and centred on the
    shared cut points' mean (a shift of them all is the bias). They are
    ordered by construction, and the map from the ratios to the cut points is
    one to one, so the posterior has no copies of a mode (an earlier
    parametrisation, shared cut points plus free offsets then sorted, had one
    per crossing, and NUTS chains did not mix).

Levels. The annotations' classes must be integers, increasing in the class
order: 1..K (the loaders ``load_web_search`` and ``load_anesthesia`` give
1..5 and 1..4), 0..K-1, or any other increasing codes; the thresholds are
named after them (``">0"``, ``">1"``, ...). Words, or integers declared out
of order, raise a ``ValueError`` that says how to recode.

One module, three views: :func:`build_model` (PyMC), :func:`em`
(cumulative variant) and :func:`simulate`.
:func:`crowd_models.report.annotator_summary` gives the per-threshold
(cumulative) or bias/noise (latent) tables with intervals.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pymc as pm
import pytensor.tensor as pt
import xarray as xr
from pymc.distributions.dist_math import normal_lcdf
from scipy.special import expit
from scipy.stats import norm

from crowd_models import _dims as D
from crowd_models._fits import posterior_of
from crowd_models._text import listing, warn
from crowd_models.baselines import majority_vote
from crowd_models.data import Annotations
from crowd_models.models import _common as C
from crowd_models.models import two_coin

__all__ = [
    "build_model", "em", "simulate", "class_probabilities",
    "negative_differences", "binary_annotations", "threshold_names", "require_levels",
    "latent_confusion", "level_locations", "own_cutpoints", "VARIANTS", "LINKS",
    "DEFAULT_PRIORS",
]

VARIANTS = ("cumulative", "latent")
LINKS = ("logit", "probit")

DEFAULT_PRIORS = dict(
    sensitivity_prior=(3.0, 2.0),
    specificity_prior=(3.0, 2.0),
    prevalence_prior=None,
    coef_precision=1.0,
    intercept_precision=0.01,
    bias_sd=1.0,
    noise_prior=(2.0, 1.0),
    spacing_prior=5.0,
    width_sd=0.5,
    guess_prior=(1.0, 4.0),
)
"""Weakly informative defaults.

Cumulative: the two-coin defaults for every threshold, Beta(3, 2) on
sensitivity and specificity (a and b broadcast over (annotator, threshold)),
``prevalence_prior=None`` = Beta(2, 2) on each P(level > c), N(0, 1)
coefficients and N(0, 10^2) intercepts.

Latent: ``prevalence_prior=None`` = symmetric Dirichlet(2); Normal(0,
``bias_sd`` = 1) biases (in level units); Gamma(shape 2, rate 1) noise (mode 1
level, mean 2; shape > 1 keeps the mode off zero); Dirichlet(5) level spacing
(favours equally spaced levels); ``width_sd`` = 0.5 for the per-annotator
log width ratios (a ratio within 0.37 .. 2.7 at two sd); Beta(1, 4) on the
guessing rate (mode 0, mean 0.2)."""

FLAT_PRIORS = dict(
    sensitivity_prior=(1.0, 1.0),
    specificity_prior=(1.0, 1.0),
    prevalence_prior=(1.0, 1.0),
    coef_precision=0.0,
    intercept_precision=0.0,
)
"""Cumulative variant: plain maximum likelihood."""


# -------------------------------------------------------------- the levels
def require_levels(annotations, family: str = "an ordinal model") -> None:
    """Raise a ValueError unless the classes are integer levels, increasing in
    the class order (``family`` names the model in the message).

    Examples
    --------
    >>> from crowd_models.models import ordinal
    >>> ordinal.require_levels(cm.datasets.load_web_search())  # 1..5: passes
    """
    C.require_categorical(annotations, family)
    classes = list(annotations.classes)
    K = len(classes)
    non_integer = []
    for c in classes:
        if isinstance(c, bool | np.bool_):
            non_integer.append(c)
            continue
        try:
            value = float(c)
        except (TypeError, ValueError):
            non_integer.append(c)
            continue
        if not np.isfinite(value) or value != int(value) or isinstance(c, str):
            non_integer.append(c)
    if non_integer:
        raise ValueError(
            f"{family} needs integer levels as labels; found non-integer level(s) "
            f"{non_integer[:5]} among the classes {listing(classes)}. Recode the labels to "
            f"1..{K} in their order (e.g. df['label'].map({{'low': 1, 'mid': 2, 'high': 3}}))."
        )
    levels = [int(float(c)) for c in classes]
    if any(b <= a for a, b in zip(levels, levels[1:], strict=False)):
        raise ValueError(
            f"{family} needs the levels in increasing order, got classes {listing(levels)}. "
            f"Declare them in order (classes=sorted(...)) or recode the labels to 1..{K}."
        )


def threshold_names(annotations: Annotations) -> list[str]:
    """Coordinates of the ``threshold`` dim: ``">1"``, ``">2"``, ... ``">K-1"``
    (threshold c asks "is the level above c?").

    Examples
    --------
    >>> from crowd_models.models import ordinal
    >>> ordinal.threshold_names(cm.datasets.load_anesthesia())  # four levels
    """
    return [f">{c}" for c in annotations.classes[:-1]]


def binary_annotations(annotations: Annotations, threshold: int) -> Annotations:
    """The binary problem "label > classes[threshold]" (threshold = 0..K-2) as two-coin
    Annotations with classes [0, 1]; gold is derived likewise.

    Examples
    --------
    >>> from crowd_models.models import ordinal
    >>> above_two = ordinal.binary_annotations(cm.datasets.load_anesthesia(), threshold=1)
    >>> above_two.class_counts()
    """
    gold = None
    if annotations.gold is not None:
        gold = np.where(annotations.gold < 0, -1, (annotations.gold > threshold).astype(int))
    return replace(annotations, labels=(annotations.labels > threshold).astype(np.int64),
                   classes=pd.Index([0, 1]), gold=gold, truth=None)


def _coords(annotations: Annotations) -> dict:
    return annotations.coords() | {D.THRESHOLD: threshold_names(annotations),
                                   D.INNER_LEVEL: list(annotations.classes[1:-1])}


# ------------------------------------------------------------------ priors
def _beta_grid(value, name: str, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    """A Beta prior (a, b); a and b broadcast to ``shape`` (annotator, threshold)."""
    try:
        a, b = value
    except (TypeError, ValueError):
        raise TypeError(
            f"{name} must be a pair (a, b) of Beta parameters, each a number or an array that "
            f"broadcasts to (annotator, threshold) = {shape}; got {value!r}."
        ) from None
    try:
        a = np.broadcast_to(np.asarray(a, dtype=float), shape).copy()
        b = np.broadcast_to(np.asarray(b, dtype=float), shape).copy()
    except ValueError:
        raise ValueError(
            f"{name}: a and b must broadcast to {shape} (annotator, threshold), got shapes "
            f"{np.shape(value[0])} and {np.shape(value[1])}; give numbers, ({shape[0]}, 1) "
            f"arrays per annotator or ({shape[-1]},) arrays per threshold."
        ) from None
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))) or np.any(a < 1) or np.any(b < 1):
        raise ValueError(
            f"{name} needs finite a >= 1 and b >= 1 so that the posterior mode exists (a = b = "
            f"1 is flat: plain maximum likelihood); got a={a.ravel()[:5]}, b={b.ravel()[:5]}."
        )
    return a, b


def _cumulative_priors(ann, sensitivity_prior, specificity_prior, prevalence_prior,
                       coef_precision, intercept_precision) -> list[dict]:
    """One two-coin keyword set per threshold."""
    J, T = ann.n_annotators, ann.n_classes - 1
    sa, sb = _beta_grid(sensitivity_prior, "sensitivity_prior", (J, T))
    pa, pb = _beta_grid(specificity_prior, "specificity_prior", (J, T))
    if prevalence_prior is None:
        prevalence_prior = (2.0, 2.0)
    qa, qb = _beta_grid(prevalence_prior, "prevalence_prior", (1, T))
    out = []
    for c in range(T):
        kw = dict(sensitivity_prior=(sa[:, c], sb[:, c]), specificity_prior=(pa[:, c], pb[:, c]),
                  prevalence_prior=(qa[0, c], qb[0, c]), coef_precision=coef_precision,
                  intercept_precision=intercept_precision)
        out.append(kw)
    # the two-coin checks of the classifier priors, with their messages
    two_coin.parse_priors(binary_annotations(ann, 0), **out[0])
    return out


def _positive(value, name: str, shape=None) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if shape is not None:
        try:
            arr = np.broadcast_to(arr, shape).copy()
        except ValueError:
            raise ValueError(f"{name} must be a number or broadcast to {shape}, got shape "
                             f"{arr.shape}.") from None
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}.")
    return arr


def _at_least_one(value, name: str, size: int) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if arr.shape not in ((), (size,)) or np.any(~np.isfinite(arr)) or np.any(arr < 1):
        raise ValueError(f"{name} must be a number or {size} numbers >= 1 (Dirichlet "
                         f"concentration), got {value!r}.")
    return np.broadcast_to(arr, (size,)).copy()


def _latent_priors(ann, prevalence_prior, bias_sd, noise_prior, spacing_prior, width_sd,
                   link) -> dict:
    if link not in LINKS:
        raise ValueError(f"link={link!r} is not one of {LINKS}.")
    if ann.features is not None:
        raise ValueError(
            "the latent ordinal variant has no classifier; drop the features "
            "(annotations.with_features(None)) or use variant='cumulative'."
        )
    K = ann.n_classes
    if prevalence_prior is None:
        prevalence_prior = 2.0
    prev = np.asarray(prevalence_prior, dtype=float)
    if prev.shape not in ((), (K,)) or np.any(~np.isfinite(prev)) or np.any(prev < 1):
        raise ValueError(
            f"prevalence_prior must be a number or {K} numbers >= 1 (Dirichlet concentration "
            f"of the latent variant), got {prevalence_prior!r}."
        )
    try:
        shape, rate = noise_prior
    except (TypeError, ValueError):
        raise TypeError(f"noise_prior must be a pair (shape, rate) of Gamma parameters, got "
                        f"{noise_prior!r}.") from None
    if np.ndim(bias_sd) != 0:
        raise ValueError(f"bias_sd must be one number, got "
                         f"{bias_sd!r}.")
    return dict(
        prevalence=np.broadcast_to(prev, (K,)).copy(),
        bias_sd=float(_positive(bias_sd, "bias_sd")),
        noise_shape=_positive(shape, "noise_prior shape", (ann.n_annotators,)),
        noise_rate=_positive(rate, "noise_prior rate", (ann.n_annotators,)),
        spacing=_at_least_one(spacing_prior, "spacing_prior", K - 1),
        width_sd=float(_positive(width_sd, "width_sd")),
        link=link,
    )


# ------------------------------------------------- cumulative: the pieces
def _survival_to_classes(exceed):
    """(..., T) exceedance probabilities -> (..., K) raw differences (may be < 0)."""
    shape = exceed.shape[:-1]
    surv = np.concatenate([np.ones((*shape, 1)), exceed, np.zeros((*shape, 1))], axis=-1)
    return surv[..., :-1] - surv[..., 1:]


def class_probabilities(exceed_prob) -> tuple[np.ndarray, np.ndarray]:
    """(repaired, raw) class probabilities from exceedance probabilities (..., threshold).

    ``raw[..., c] = P(level > c - 1) - P(level > c)`` (with P(level > 0) = 1
    and P(level > K) = 0); each row sums to one but may hold negative entries.
    The repair rule clips them at zero and renormalises the row.

    Examples
    --------
    >>> import numpy as np
    >>> from crowd_models.models import ordinal
    >>> repaired, raw = ordinal.class_probabilities(np.array([[0.9, 0.95, 0.2]]))
    >>> raw  # P(level > 1) < P(level > 2): the second class gets -0.05, repaired to 0
    """
    raw = _survival_to_classes(np.asarray(exceed_prob, dtype=float))
    clipped = np.clip(raw, 0.0, None)
    return clipped / clipped.sum(axis=-1, keepdims=True), raw


def _repair_pt(exceed):
    ones = pt.ones_like(exceed[:, :1])
    surv = pt.concatenate([ones, exceed, pt.zeros_like(ones)], axis=1)
    clipped = pt.maximum(surv[:, :-1] - surv[:, 1:], 0.0)
    return clipped / clipped.sum(axis=1, keepdims=True)


NEGATIVE_TOL = 1e-12
"""A raw class probability counts as negative below -NEGATIVE_TOL (rounding)."""


def negative_differences(fit) -> dict:
    """How often the cumulative model's class-probability differences go negative.

    ``fit``: a cumulative EM Dataset or MAP/NUTS DataTree (with ``exceed_prob``).
    Returns ``n_cells`` (item x class cells with a negative difference, summed
    over draws and divided by the number of draws), ``n_items`` (items with
    at least one, likewise per draw), ``share_items`` (n_items / items) and
    ``most_negative`` (the smallest raw difference seen).

    Examples
    --------
    >>> from crowd_models.models import ordinal
    >>> ordinal.negative_differences(ordinal.em(cm.datasets.load_anesthesia()))
    """
    post = posterior_of(fit)
    if "exceed_prob" not in post:
        raise ValueError("negative_differences needs a cumulative ordinal fit (with "
                         "exceed_prob); this fit has none.")
    ex = post["exceed_prob"].transpose(..., D.ITEM, D.THRESHOLD).values
    ex = ex.reshape(-1, *ex.shape[-2:])
    _, raw = class_probabilities(ex)
    neg = raw < -NEGATIVE_TOL
    S, n_items = ex.shape[0], ex.shape[1]
    return {
        "n_cells": float(neg.sum() / S),
        "n_items": float(neg.any(axis=-1).sum() / S),
        "share_items": float(neg.any(axis=-1).sum() / S / n_items),
        "most_negative": float(raw.min()),
    }


def _composite_logp(value, joint):
    return pt.logsumexp(joint, axis=-1).sum(axis=-1)


def _cumulative_start(ann, priors_by_threshold) -> dict:
    starts = [two_coin.majority_vote_start(binary_annotations(ann, c), **kw)
              for c, kw in enumerate(priors_by_threshold)]
    out = {"sensitivity": np.stack([s["sensitivity"] for s in starts], axis=-1),
           "specificity": np.stack([s["specificity"] for s in starts], axis=-1)}
    if ann.features is None:
        out["threshold_prevalence"] = np.array([s["prevalence"] for s in starts])
    else:
        out["coef"] = np.stack([s["coef"] for s in starts], axis=-1)
        out["intercept"] = np.array([s["intercept"] for s in starts])
    return out


def _build_cumulative(ann, pri_list) -> pm.Model:
    T = ann.n_classes - 1
    pri = two_coin.parse_priors(binary_annotations(ann, 0), **pri_list[0])
    sa = np.stack([kw["sensitivity_prior"][0] for kw in pri_list], axis=-1)
    sb = np.stack([kw["sensitivity_prior"][1] for kw in pri_list], axis=-1)
    pa = np.stack([kw["specificity_prior"][0] for kw in pri_list], axis=-1)
    pb = np.stack([kw["specificity_prior"][1] for kw in pri_list], axis=-1)
    qa = np.array([kw["prevalence_prior"][0] for kw in pri_list])
    qb = np.array([kw["prevalence_prior"][1] for kw in pri_list])
    dims = (D.ANNOTATOR, D.THRESHOLD)
    with pm.Model(coords=_coords(ann)) as model:
        sens = pm.Beta("sensitivity", sa, sb, dims=dims)
        spec = pm.Beta("specificity", pa, pb, dims=dims)
        idx = C.long_table_data(ann)
        above = pt.gt(idx["label_idx"][:, None], pt.arange(T)[None, :])  # (annotation, T)
        s = sens[idx["annotator_idx"]]
        p = spec[idx["annotator_idx"]]
        per_row = pt.stack([pt.switch(above, pt.log(1 - p), pt.log(p)),
                            pt.switch(above, pt.log(s), pt.log(1 - s))], axis=-1)
        n_items = model.dim_lengths[D.ITEM]
        joint = pt.zeros((n_items, T, 2))[idx["item_idx"]].inc(per_row)
        if ann.features is None:
            prev = pm.Beta("threshold_prevalence", qa, qb, dims=D.THRESHOLD)
            log_prior = pt.stack([pt.log1p(-prev), pt.log(prev)], axis=-1)[None]
        else:
            X = pm.Data("features", ann.features, dims=(D.ITEM, D.FEATURE))
            gamma, tau = pri["gamma"], pri["tau"]
            cdims = (D.FEATURE, D.THRESHOLD)
            if np.all(gamma == 0):
                coef = pm.Flat("coef", dims=cdims)
            elif np.allclose(gamma, np.diag(np.diag(gamma))):
                coef = pm.Normal("coef", 0.0, sigma=1 / np.sqrt(np.diag(gamma))[:, None],
                                 dims=cdims)
            else:
                # each threshold's column ~ N(0, gamma^-1), independently
                coef = pm.MatrixNormal("coef", mu=np.zeros((len(gamma), T)),
                                       rowcov=np.linalg.inv(gamma), colcov=np.eye(T), dims=cdims)
            if tau == 0:
                intercept = pm.Flat("intercept", dims=D.THRESHOLD)
            else:
                intercept = pm.Normal("intercept", 0.0, sigma=1 / np.sqrt(tau), dims=D.THRESHOLD)
            eta = X @ coef + intercept[None, :]
            log_prior = pt.stack([-pt.softplus(eta), -pt.softplus(-eta)], axis=-1)
        joint = joint + log_prior
        n_per_item = np.bincount(ann.item_idx, minlength=ann.n_items)
        pm.CustomDist(D.OBSERVED, joint, logp=_composite_logp, signature="(t,k)->()",
                      observed=n_per_item, dims=D.ITEM)
        exceed = pm.Deterministic("exceed_prob", pt.special.softmax(joint, axis=-1)[..., 1],
                                  dims=(D.ITEM, D.THRESHOLD))
        pm.Deterministic("item_class_prob", _repair_pt(exceed), dims=(D.ITEM, D.TRUE_CLASS))
        pm.Data("n_labels", ann.n_labels(), dims=D.ANNOTATOR)
    return model


# ------------------------------------------------------ latent: the pieces
def _log_cdf_pt(x, link):
    if link == "logit":
        return -pt.softplus(-x)
    return normal_lcdf(0.0, 1.0, x)


def _log_interval_pt(lo, hi, link):
    """log(F(hi) - F(lo)) for lo < hi, elementwise."""
    if link == "logit":
        # s(b) - s(a) = s(b) s(-a) (1 - exp(a - b))
        return -pt.softplus(-hi) - pt.softplus(lo) + pt.log1mexp(lo - hi)
    a, b = normal_lcdf(0.0, 1.0, hi), normal_lcdf(0.0, 1.0, lo)
    return a + pt.log1mexp(b - a)


def _latent_log_confusion_pt(bias, noise, cuts, locs, link):
    """(annotator, true_class, label_class) log confusion; ``cuts`` (annotator or 1, T),
    ``locs`` (K,) the true levels' locations."""
    z = (cuts[:, None, :] - locs[None, :, None] - bias[:, None, None]) / noise[:, None, None]
    first = _log_cdf_pt(z[..., :1], link)
    last = _log_cdf_pt(-z[..., -1:], link)
    parts = [first]
    parts.append(_log_interval_pt(z[..., :-1], z[..., 1:], link))
    parts.append(last)
    return pt.concatenate(parts, axis=-1)


def level_locations(level_spacing) -> np.ndarray:
    """The true levels' locations 0 = loc[0] < ... < loc[K-1] = K - 1 from the
    (K-1,) simplex ``level_spacing``; the cut points are their midpoints.

    Examples
    --------
    >>> from crowd_models.models import ordinal
    >>> ordinal.level_locations([0.5, 0.25, 0.25])  # four levels at 0, 1.5, 2.25, 3
    """
    spacing = np.asarray(level_spacing, dtype=float)
    return (len(spacing)) * np.concatenate([[0.0], np.cumsum(spacing)])


def own_cutpoints(cutpoints, log_width_ratio, xp=np):
    """(annotator, threshold) cut points from the shared ``cutpoints`` (threshold)
    and ``log_width_ratio`` (annotator, K - 2): the interior levels' intervals
    widened by exp(ratio), the whole centred on the shared cut points' mean.
    ``xp`` is ``numpy`` or ``pytensor.tensor``.

    Examples
    --------
    >>> import numpy as np
    >>> from crowd_models.models import ordinal
    >>> ordinal.own_cutpoints(np.array([0.5, 1.5, 2.5]), np.array([[0.0, 0.0], [0.5, 0.5]]))
    """
    widths = (cutpoints[1:] - cutpoints[:-1])[None, :] * xp.exp(log_width_ratio)
    own = xp.concatenate([xp.zeros_like(widths[:, :1]), xp.cumsum(widths, axis=1)], axis=1)
    return own - xp.mean(own, axis=1, keepdims=True) + xp.mean(cutpoints)


def latent_confusion(bias, noise, level_spacing, *, link="logit", log_width_ratio=None):
    """NumPy: the latent variant's (annotator, true_class, label_class) confusion.

    Examples
    --------
    >>> from crowd_models.models import ordinal
    >>> conf = ordinal.latent_confusion([0.0, 0.5], [0.3, 0.8], [1 / 3, 1 / 3, 1 / 3])
    >>> conf[1].round(2)  # the second annotator: biased upwards and noisier
    """
    bias = np.asarray(bias, dtype=float)
    noise = np.asarray(noise, dtype=float)
    locs = level_locations(level_spacing)
    cuts = ((locs[:-1] + locs[1:]) / 2)[None, :]
    if log_width_ratio is not None:
        cuts = own_cutpoints(cuts[0], np.asarray(log_width_ratio, dtype=float))
    z = (cuts[:, None, :] - locs[None, :, None] - bias[:, None, None]) / noise[:, None, None]
    cdf = expit(z) if link == "logit" else norm.cdf(z)
    cdf = np.concatenate([np.zeros((*cdf.shape[:-1], 1)), cdf, np.ones((*cdf.shape[:-1], 1))],
                         axis=-1)
    return np.diff(cdf, axis=-1)


def _latent_start(ann, pri, annotator_cutpoints, guessing=False) -> dict:
    """Soft majority vote -> class shares; biases from each annotator's mean
    deviation from the item's mean label (shrunk by n / (n + 1)); noise 1;
    equally spaced levels; guessing rate 0.1."""
    K, J = ann.n_classes, ann.n_annotators
    mv = majority_vote(ann).values
    prev = (mv.sum(axis=0) + pri["prevalence"] - 1)
    prev = prev / prev.sum()
    item_mean = (mv * np.arange(K)).sum(axis=1)
    resid = ann.labels - item_mean[ann.item_idx]
    n = np.bincount(ann.annotator_idx, minlength=J)
    bias = np.bincount(ann.annotator_idx, weights=resid, minlength=J) / (n + 1.0)
    start = {"prevalence": prev, "bias": bias, "noise": np.ones(J),
             "level_spacing": np.full(K - 1, 1.0 / (K - 1))}
    if annotator_cutpoints:
        start["log_width_ratio"] = np.zeros((J, K - 2))
    if guessing:
        start["guess_rate"] = np.full(J, 0.1)
    return start


def _level_locations_pt(spacing, K):
    return (K - 1) * pt.concatenate([pt.zeros(1), pt.cumsum(spacing)])


def _build_latent(ann, pri, annotator_cutpoints, guessing) -> pm.Model:
    K = ann.n_classes
    with pm.Model(coords=_coords(ann)) as model:
        prev = pm.Dirichlet("prevalence", a=pri["prevalence"], dims=D.TRUE_CLASS)
        bias = pm.Normal("bias", 0.0, sigma=pri["bias_sd"], dims=D.ANNOTATOR)
        noise = pm.Gamma("noise", alpha=pri["noise_shape"], beta=pri["noise_rate"],
                         dims=D.ANNOTATOR)
        spacing = pm.Dirichlet("level_spacing", a=pri["spacing"], dims=D.THRESHOLD)
        locs = pm.Deterministic("level_location", _level_locations_pt(spacing, K),
                                dims=D.TRUE_CLASS)
        cuts = pm.Deterministic("cutpoints", (locs[:-1] + locs[1:]) / 2, dims=D.THRESHOLD)
        cuts = cuts[None, :]
        if annotator_cutpoints:
            ratio = pm.Normal("log_width_ratio", 0.0, sigma=pri["width_sd"],
                              dims=(D.ANNOTATOR, D.INNER_LEVEL))
            cuts = pm.Deterministic("annotator_cutpoints",
                                    own_cutpoints(cuts[0], ratio, xp=pt),
                                    dims=(D.ANNOTATOR, D.THRESHOLD))
        log_conf = _latent_log_confusion_pt(bias, noise, cuts, locs, pri["link"])
        if guessing:
            guess = pm.Beta("guess_rate", *pri["guess"], dims=D.ANNOTATOR)[:, None, None]
            log_conf = pt.logaddexp(pt.log1p(-guess) + log_conf, pt.log(guess) - np.log(K))
        pm.Deterministic("confusion", pt.exp(log_conf),
                         dims=(D.ANNOTATOR, D.TRUE_CLASS, D.LABEL_CLASS))
        joint = C.item_joint(log_conf, ann) + pt.log(prev)[None, :]
        C.add_item_likelihood(joint, ann)
    return model


# ----------------------------------------------------------------- factory
def build_model(
    annotations: Annotations,
    *,
    variant: str = "cumulative",
    sensitivity_prior=DEFAULT_PRIORS["sensitivity_prior"],
    specificity_prior=DEFAULT_PRIORS["specificity_prior"],
    prevalence_prior=DEFAULT_PRIORS["prevalence_prior"],
    coef_precision=DEFAULT_PRIORS["coef_precision"],
    intercept_precision=DEFAULT_PRIORS["intercept_precision"],
    bias_sd=DEFAULT_PRIORS["bias_sd"],
    noise_prior=DEFAULT_PRIORS["noise_prior"],
    spacing_prior=DEFAULT_PRIORS["spacing_prior"],
    width_sd=DEFAULT_PRIORS["width_sd"],
    link: str = "logit",
    annotator_cutpoints: bool = False,
    guessing: bool = False,
    guess_prior=DEFAULT_PRIORS["guess_prior"],
) -> pm.Model:
    r"""An ordinal model in PyMC, true level summed out (see the module docstring).

    .. math::

        \text{cumulative:}\quad & \text{for each threshold } c:\;
            \mathbb{1}[z_i > c] \sim \mathrm{Bernoulli}(\text{threshold\_prevalence}_c),
            \\
        & \mathbb{1}[\ell_{ij} > c] \mid \mathbb{1}[z_i > c] = 1 \sim
            \mathrm{Bernoulli}(\text{sensitivity}_{jc}), \quad
          \mathbb{1}[\ell_{ij} \le c] \mid \mathbb{1}[z_i > c] = 0 \sim
            \mathrm{Bernoulli}(\text{specificity}_{jc}) \\
        \text{latent:}\quad & z_i \sim \mathrm{Categorical}(\text{prevalence}), \quad
          P(\ell_{ij} \le l \mid z_i = k) = F\!\left(\frac{\text{cutpoints}_l
            - \text{level\_location}_k - \text{bias}_j}{\text{noise}_j}\right)

    with F the logistic or normal cdf; the cumulative likelihood is the
    product over thresholds (a composite likelihood).

    Parameters
    ----------
    annotations : Annotations
        Classes 1..K (K >= 2); features only for ``variant="cumulative"``.
    variant : {"cumulative", "latent"}, optional
        The ordinal model (see the module docstring).
    sensitivity_prior, specificity_prior : (a, b), optional
        Cumulative: Beta priors; a and b broadcast over (annotator, threshold).
    prevalence_prior : None, (a, b), float or array (K,), optional
        None (the default of the variant). Cumulative: (a, b) Beta on each
        P(level > c), broadcasting over thresholds; latent: a Dirichlet concentration
        (number or K numbers).
    coef_precision, intercept_precision : optional
        Cumulative with features: as in :func:`crowd_models.models.two_coin.build_model`,
        shared by the thresholds.
    bias_sd : float, optional
        Latent: sd of the Normal biases.
    noise_prior : (shape, rate), optional
        Latent: Gamma prior of ``noise``, each broadcasting over annotators.
    spacing_prior : float or array (K-1,), optional
        Latent: Dirichlet concentration (>= 1) of ``level_spacing``.
    width_sd : float, optional
        Latent with ``annotator_cutpoints``: sd of the Normal log width ratios.
    link : {"logit", "probit"}, optional
        Latent: "logit" (ordered logit) or "probit".
    annotator_cutpoints : bool, optional
        Latent with K >= 3 levels: per-annotator cut points (see the module docstring).
    guessing : bool, optional
        Latent: add a per-annotator ``guess_rate``; with that probability the annotator
        ignores the item and picks a level uniformly.
    guess_prior : (a, b), optional
        Latent with ``guessing``: Beta prior of ``guess_rate`` (a, b >= 1; each
        broadcasting over annotators).

    Returns
    -------
    pymc.Model
        Variables. Cumulative: ``sensitivity``, ``specificity`` (annotator,
        threshold); ``threshold_prevalence`` (threshold) or ``coef`` (feature,
        threshold) and ``intercept`` (threshold); deterministic ``exceed_prob`` (item,
        threshold) and ``item_class_prob`` (item, true_class; repaired
        differences); observed ``item_labels`` (item), the composite log-likelihood.
        Latent: ``prevalence`` (true_class), ``bias``, ``noise`` (annotator),
        ``level_spacing`` (threshold), [``log_width_ratio`` (annotator,
        inner_level)]; deterministic ``level_location`` (true_class), ``cutpoints``
        (threshold), [``annotator_cutpoints`` (annotator, threshold)],
        ``confusion`` and ``item_class_prob``; observed ``item_labels``
        (item), the marginal log-likelihood of the item's labels.
        ``model.crowd_start`` holds the majority-vote start (``fit_map`` starts
        there).

    Examples
    --------
    >>> from crowd_models.models import ordinal
    >>> model = ordinal.build_model(cm.datasets.load_anesthesia(), variant="latent")
    >>> fit = cm.fit_map(model)
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant={variant!r} is not one of {VARIANTS}.")
    require_levels(annotations, f"the {variant} ordinal model")
    if variant == "cumulative":
        pri_list = _cumulative_priors(annotations, sensitivity_prior, specificity_prior,
                                      prevalence_prior, coef_precision, intercept_precision)
        return C.attach_protocol(_build_cumulative(annotations, pri_list), "ordinal", variant,
                                 start=_cumulative_start(annotations, pri_list), em=em,
                                 annotations=annotations, arguments=locals())
    pri = _latent_priors(annotations, prevalence_prior, bias_sd, noise_prior, spacing_prior,
                         width_sd, link)
    pri["guess"] = C.beta_prior(guess_prior, "guess_prior", annotations.n_annotators)
    if annotator_cutpoints and annotations.n_classes < 3:
        raise ValueError(
            f"annotator_cutpoints=True needs at least 3 levels (it lets each annotator widen "
            f"or narrow the interior levels), got {annotations.n_classes}; drop the option.")
    return C.attach_protocol(
        _build_latent(annotations, pri, bool(annotator_cutpoints), bool(guessing)), "ordinal",
        variant, start=_latent_start(annotations, pri, annotator_cutpoints, guessing))


# ---------------------------------------------------------------------- EM
_DIMS = {
    "sensitivity": (D.ANNOTATOR, D.THRESHOLD),
    "specificity": (D.ANNOTATOR, D.THRESHOLD),
    "threshold_prevalence": (D.THRESHOLD,),
    "coef": (D.FEATURE, D.THRESHOLD),
    "intercept": (D.THRESHOLD,),
    "exceed_prob": (D.ITEM, D.THRESHOLD),
    "item_class_prob": (D.ITEM, D.TRUE_CLASS),
}


def em(
    annotations: Annotations,
    *,
    variant: str = "cumulative",
    sensitivity_prior=DEFAULT_PRIORS["sensitivity_prior"],
    specificity_prior=DEFAULT_PRIORS["specificity_prior"],
    prevalence_prior=DEFAULT_PRIORS["prevalence_prior"],
    coef_precision=DEFAULT_PRIORS["coef_precision"],
    intercept_precision=DEFAULT_PRIORS["intercept_precision"],
    tol: float = 1e-10,
    max_iter: int = 10_000,
    accelerate: bool = True,
) -> xr.Dataset:
    """The cumulative model's MAP-EM: K - 1 two-coin EMs (:func:`two_coin.em`), one
    per binary problem "level > c", each from its own majority-vote start
    (``tol``, ``max_iter`` and ``accelerate`` are passed on).

    Returns a Dataset with the posterior's names and dims (chain=1, draw=1):
    ``sensitivity``, ``specificity`` (annotator, threshold),
    ``threshold_prevalence`` (threshold) or ``coef``/``intercept``,
    ``exceed_prob`` (item, threshold), ``item_class_prob`` (repaired
    differences, see the module docstring); the
    Beta approximations ``sensitivity_alpha``/``_beta``,
    ``specificity_alpha``/``_beta`` (annotator, threshold) and ``n_labels``.
    ``attrs``: ``log_posterior`` (the model's ``logp(jacobian=False)``, the sum
    over thresholds), ``log_likelihood`` (the composite one), ``n_iter``
    (the largest over thresholds), ``converged``, and the counts of
    :func:`negative_differences` (``negative_cells``, ``negative_items``).
    When the repair was needed (any negative difference) a ``UserWarning``
    gives those counts and points to the latent variant.

    The latent variant has no EM (its M-step has no closed form): use
    ``cm.fit_map(build_model(annotations, variant="latent"))``.

    Examples
    --------
    >>> from crowd_models.models import ordinal
    >>> fit = ordinal.em(cm.datasets.load_anesthesia())
    >>> cm.report.annotator_summary(fit)
    """
    if variant == "latent":
        raise ValueError("the latent ordinal variant has no EM: use cm.fit_map(build_model("
                         "annotations, variant='latent')) (or cm.sample).")
    if variant not in VARIANTS:
        raise ValueError(f"variant={variant!r} is not one of {VARIANTS}.")
    require_levels(annotations, "the cumulative ordinal model")
    pri_list = _cumulative_priors(annotations, sensitivity_prior, specificity_prior,
                                  prevalence_prior, coef_precision, intercept_precision)
    fits = [two_coin.em(binary_annotations(annotations, c), **kw, tol=tol, max_iter=max_iter,
                        accelerate=accelerate)
            for c, kw in enumerate(pri_list)]

    def stacked(name, axis):
        return np.stack([f[name].values[0, 0] if "chain" in f[name].dims else f[name].values
                         for f in fits], axis=axis)

    params = {"sensitivity": stacked("sensitivity", -1),
              "specificity": stacked("specificity", -1)}
    if annotations.features is None:
        params["threshold_prevalence"] = stacked("prevalence", 0)
    else:
        params["coef"] = stacked("coef", -1)
        params["intercept"] = stacked("intercept", 0)
    exceed = np.stack([f["item_class_prob"].values[0, 0, :, 1] for f in fits], axis=-1)
    prob, raw = class_probabilities(exceed)
    neg = raw < -NEGATIVE_TOL
    if neg.any():
        warn(
            f"the cumulative ordinal model's class probabilities went negative for "
            f"{int(neg.any(axis=1).sum())} of {len(neg)} items ({int(neg.sum())} cells): its "
            f"K - 1 binary problems are fitted separately, so P(level > c) need not decrease "
            f"in c. Those rows were clipped at zero and renormalised (attrs['repair']), so "
            f"their item_class_prob is a repair, not a model probability; "
            f"variant='latent' is the coherent model of the levels.")
    extra = {name: ((D.ANNOTATOR, D.THRESHOLD), stacked(name, -1)) for name in (
        "sensitivity_alpha", "sensitivity_beta", "specificity_alpha", "specificity_beta")}
    extra["n_labels"] = ((D.ANNOTATOR,), annotations.n_labels())
    ds = C.em_dataset(
        annotations, {**params, "exceed_prob": exceed, "item_class_prob": prob}, _DIMS,
        extra=extra,
        attrs={
            "family": "ordinal", "variant": "cumulative", "method": "em",
            "log_likelihood": float(sum(f.attrs["log_likelihood"] for f in fits)),
            "log_posterior": float(sum(f.attrs["log_posterior"] for f in fits)),
            "n_iter": int(max(f.attrs["n_iter"] for f in fits)),
            "converged": int(all(f.attrs["converged"] for f in fits)),
            "negative_cells": int(neg.sum()),
            "negative_items": int(neg.any(axis=1).sum()),
            "repair": "clip-and-renormalise",
        },
    )
    return ds.assign_coords({D.THRESHOLD: threshold_names(annotations)})


# ---------------------------------------------------------------- simulate
def _simulated_latent_confusion(bias, noise, level_spacing, guess_rate, log_width_ratio,
                                n_classes, link):
    """The latent variant's confusion (annotator, true_class, label_class) and truth."""
    if bias is None or noise is None:
        raise ValueError("the latent variant needs bias and noise (one per annotator).")
    if link not in LINKS:
        raise ValueError(f"link={link!r} is not one of {LINKS}.")
    bias = np.asarray(bias, dtype=float)
    noise = np.asarray(noise, dtype=float)
    if bias.ndim != 1 or bias.shape != noise.shape:
        raise ValueError("bias and noise must be 1-D and of the same length (annotators).")
    if np.any(noise <= 0):
        raise ValueError("noise must be > 0.")
    if level_spacing is None:
        if n_classes is None or n_classes < 2:
            raise ValueError("give level_spacing or n_classes >= 2.")
        level_spacing = np.full(n_classes - 1, 1.0 / (n_classes - 1))
    spacing = np.asarray(level_spacing, dtype=float)
    if spacing.ndim != 1 or np.any(spacing <= 0) or not np.isclose(spacing.sum(), 1):
        raise ValueError("level_spacing must be K - 1 positive gaps summing to 1.")
    truth = {}
    locs = level_locations(spacing)
    shared_cuts = (locs[:-1] + locs[1:]) / 2
    if log_width_ratio is not None:
        ratio = np.asarray(log_width_ratio, dtype=float)
        want = (bias.size, spacing.size - 1)
        if spacing.size < 2 or ratio.shape != want or not np.all(np.isfinite(ratio)):
            raise ValueError(f"log_width_ratio must be a finite (annotator, K - 2) = {want} "
                             f"array (K >= 3 levels), got shape {ratio.shape}.")
        truth["log_width_ratio"] = ((D.ANNOTATOR, D.INNER_LEVEL), ratio.copy())
        truth["annotator_cutpoints"] = ((D.ANNOTATOR, D.THRESHOLD),
                                        own_cutpoints(shared_cuts, ratio))
    conf = latent_confusion(bias, noise, spacing, link=link, log_width_ratio=log_width_ratio)
    if guess_rate is not None:
        guess = np.broadcast_to(np.asarray(guess_rate, dtype=float), bias.shape)
        if np.any((guess < 0) | (guess > 1)):
            raise ValueError("guess_rate must lie in [0, 1].")
        conf = (1 - guess[:, None, None]) * conf + guess[:, None, None] / conf.shape[-1]
        truth["guess_rate"] = ((D.ANNOTATOR,), guess.copy())
    truth |= {"bias": ((D.ANNOTATOR,), bias), "noise": ((D.ANNOTATOR,), noise),
             "level_spacing": ((D.THRESHOLD,), spacing),
             "cutpoints": ((D.THRESHOLD,), shared_cuts)}
    return conf, truth


def _simulated_cumulative_confusion(sensitivity, specificity):
    """The one confusion whose binary problems are two-coin with these rates, and truth."""
    if sensitivity is None or specificity is None:
        raise ValueError("the cumulative variant needs sensitivity and specificity "
                         "(annotator, K - 1).")
    sens = np.asarray(sensitivity, dtype=float)
    spec = np.asarray(specificity, dtype=float)
    if sens.ndim != 2 or sens.shape != spec.shape:
        raise ValueError("sensitivity and specificity must be (annotator, K - 1) arrays of "
                         "the same shape.")
    if np.any((sens < 0) | (sens > 1) | (spec < 0) | (spec > 1)):
        raise ValueError("sensitivity and specificity must lie in [0, 1].")
    if (np.any(np.diff(sens, axis=1) > 0) or np.any(np.diff(spec, axis=1) < 0)
            or np.any(sens[:, :-1] + spec[:, 1:] < 1)):
        raise ValueError(
            "no ordinal labelling has these rates: per annotator, sensitivity must be "
            "non-increasing and specificity non-decreasing over thresholds, with "
            "sensitivity[c] + specificity[c + 1] >= 1."
        )
    J, T = sens.shape
    K = T + 1
    c = np.arange(T)
    k = np.arange(K)[:, None]
    above = np.where(k > c[None, :], sens[:, None, :], 1 - spec[:, None, :])  # (J, K, T)
    surv = np.concatenate([np.ones((J, K, 1)), above, np.zeros((J, K, 1))], axis=-1)
    conf = np.clip(surv[..., :-1] - surv[..., 1:], 0, None)
    truth = {"sensitivity": ((D.ANNOTATOR, D.THRESHOLD), sens),
             "specificity": ((D.ANNOTATOR, D.THRESHOLD), spec)}
    return conf, truth


def simulate(
    *,
    variant: str = "latent",
    n_items: int | None = None,
    bias=None,
    noise=None,
    level_spacing=None,
    guess_rate=None,
    log_width_ratio=None,
    n_classes: int | None = None,
    link: str = "logit",
    sensitivity=None,
    specificity=None,
    prevalence=None,
    true_labels=None,
    labels_per_item: int | None = None,
    rng=None,
) -> Annotations:
    """Ordinal annotations (classes 1..K) with the truth kept.

    Latent: ``bias``, ``noise`` (annotator) and ``level_spacing`` (K-1
    positive gaps summing to 1; default equal gaps for ``n_classes`` levels),
    optionally ``guess_rate`` (annotator or one number) and ``log_width_ratio``
    (annotator, K-2), each annotator's own cut points as
    ``annotator_cutpoints=True`` models them (:func:`own_cutpoints`).
    The truth holds ``bias``, ``noise``, ``level_spacing``, ``cutpoints``,
    the options given (with ``annotator_cutpoints`` for the ratios) and the
    implied ``confusion``.

    Cumulative: ``sensitivity``, ``specificity`` (annotator, K-1). A label is
    drawn from the one confusion matrix under which every binary problem
    "label > c" is exactly the two-coin model with these rates:
    ``P(label > c | level k) = sensitivity[c]`` if k > c else
    ``1 - specificity[c]``. It exists when, per annotator, sensitivity is
    non-increasing and specificity non-decreasing over thresholds and
    ``sensitivity[c] + specificity[c + 1] >= 1``; otherwise a ValueError.

    The true levels come from ``true_labels`` (codes 0..K-1) or
    ``prevalence`` (K class shares; uniform by default). Every annotator
    labels every item, or ``labels_per_item`` of them drawn without
    replacement. The truth holds, as in the model, ``prevalence`` (latent: the
    class shares) or ``threshold_prevalence`` (cumulative: P(level > c)).

    Examples
    --------
    >>> from crowd_models.models import ordinal
    >>> ann = ordinal.simulate(bias=[0.5, -0.3, 0.0], noise=[0.4, 0.8, 0.6], n_classes=4,
    ...                        n_items=200, rng=0)
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant={variant!r} is not one of {VARIANTS}.")
    rng = np.random.default_rng(rng)
    if variant == "latent":
        conf, truth = _simulated_latent_confusion(bias, noise, level_spacing, guess_rate,
                                                  log_width_ratio, n_classes, link)
    else:
        conf, truth = _simulated_cumulative_confusion(sensitivity, specificity)
    J, K = conf.shape[0], conf.shape[-1]
    if true_labels is not None:
        z = np.asarray(true_labels, dtype=int)
        n_items = len(z) if n_items is None else n_items
        if z.shape != (n_items,) or z.min() < 0 or z.max() >= K:
            raise ValueError(f"true_labels must be n_items codes in 0..{K - 1}.")
        prev = np.bincount(z, minlength=K) / len(z)
    else:
        if n_items is None:
            raise ValueError("give n_items or true_labels.")
        prev = np.full(K, 1.0 / K) if prevalence is None else np.asarray(prevalence, float)
        if prev.shape != (K,) or np.any(prev < 0) or not np.isclose(prev.sum(), 1):
            raise ValueError(f"prevalence must be {K} class shares summing to 1.")
        z = rng.choice(K, size=n_items, p=prev)
    if variant == "latent":
        truth["prevalence"] = ((D.TRUE_CLASS,), prev)
    else:
        truth["threshold_prevalence"] = ((D.THRESHOLD,), 1 - np.cumsum(prev)[:-1])
    truth["confusion"] = ((D.ANNOTATOR, D.TRUE_CLASS, D.LABEL_CLASS), conf)
    item_idx, ann_idx = C.simulation_design(n_items, J, labels_per_item, rng)
    rows = conf[ann_idx, z[item_idx]]
    y = np.minimum((rows.cumsum(axis=1) < rng.random((len(rows), 1))).sum(axis=1), K - 1)
    classes = list(range(1, K + 1))
    ann = C.simulated_annotations(item_idx, ann_idx, y, z, classes, None, truth)
    return replace(ann, truth=ann.truth.assign_coords(
        {k: v for k, v in _coords(ann).items() if k in ann.truth.dims}))


# ------------------------------------------------------------------ report
