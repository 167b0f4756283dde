"""Continuous labels: annotators with Gaussian precision (and bias).

Raykar, Yu, Zhao, Jerebko, Florin, Hermosillo Valadez, Bogoni, Moy (2009),
"Supervised learning from multiple experts: whom to trust when everyone lies
a bit", ICML, sec. 8.3 (regression). Item i has a hidden true value ``y_i``;
annotator j reports it with Gaussian noise of their own ``precision`` tau_j,

    y_ij ~ N(y_i + bias_j, 1 / tau_j),

and the true value follows a linear regression on the item's features,
``y_i ~ N(coef . x_i + intercept, 1 / truth_precision)``, or, without
features, a common mean ``intercept`` and spread ``truth_precision``.

The true values are integrated out analytically: given the parameters, the
labels of one item are jointly Gaussian, so each item's marginal likelihood is
closed form (:func:`item_log_marginal`). PyMC's ``find_MAP`` therefore
optimises the same marginal posterior of (precision, bias, coef, intercept,
truth_precision) that :func:`em` climbs; a joint MAP over the y_i would be
degenerate. The posterior of each y_i given the parameters is Gaussian, and
every fit carries its mean ``true_value`` and sd ``true_value_sd`` (item),
recomputed for each draw: with many draws, the posterior mean of y_i is the
mean of ``true_value`` over draws and its variance is the mean of
``true_value_sd**2`` plus the variance of ``true_value`` (see
:func:`crowd_models.report.true_value_summary`).

Options beyond the paper (keywords of :func:`build_model`):

* ``bias=True``: an additive per-annotator ``bias`` (some annotators rate
  high). Identifiability: the biases sum to zero over annotators
  (``pm.ZeroSumNormal``; unweighted by the numbers of labels), so the truth
  sits on the scale of the *average annotator*, and ``intercept`` is the mean
  truth, not the mean label of the most active annotators.
* ``scale=True``: a per-annotator multiplicative ``scale`` (annotators use
  the scale differently: one stretches it, another compresses it towards a
  point): ``y_ij ~ N(bias_j + scale_j * y_i, 1 / precision_j)``. The scales
  average 1 (``scale = 1 + scale_offset``, ``scale_offset ~
  ZeroSumNormal(scale_sd)``, default 0.5), which with the zero-sum biases
  pins the truth's location and unit to the average annotator and rules out
  the sign flip. The marginal stays closed form (an annotator's label adds
  ``scale_j**2 * precision_j`` to the truth's precision), and :func:`em`
  updates (bias_j, scale_j) jointly, a 2 x 2 weighted least-squares problem
  per annotator under both constraints. Why: a precision-only model takes an
  annotator who answers near one value for everything (e.g. 0 on a 0..100
  scale where most items are near 0) for a precise one; with a scale that
  annotator gets a scale near 0 and little weight. No random effects: MAP =
  EM as for the other Gaussian variants.
* ``noise="student_t"``: heavy-tailed annotator noise, ``y_ij ~
  t_nu(y_i + bias_j, scale 1 / sqrt(precision_j))``, so one wild label does
  not drag the truth. The marginal likelihood is then a one-dimensional
  integral per item, computed by adaptive Gauss-Hermite quadrature (nodes
  centred on the item's posterior mode, found by a few iteratively
  reweighted least-squares steps, and scaled by 1.5 times the matching
  posterior sd). It is deterministic and smooth in the parameters, so
  ``fit_map``, NUTS and the item-level LOO work exactly as in the Gaussian
  case, but it is an approximation and there is no EM (its accuracy against
  adaptive quadrature is in benchmarks/README.md). ``precision`` is then the
  inverse squared *scale*; the noise variance is ``nu / (nu - 2)`` times
  ``1 / precision`` (nu > 2).

Compare the variants by LOO: ``item_labels`` is an observed variable per item
whose log-density is the item's marginal log-likelihood, so ``az.loo`` and
``az.compare`` work per item on ``cm.sample`` output.

Priors and the scale of the labels. Precisions, biases and coefficients have
units, so the priors are stated for labels measured in units of
``label_scale``, by default the standard deviation of all labels (a
data-dependent default: pass ``label_scale=1.0`` to state priors in the
labels' own units). With ``s = label_scale`` and ``c`` the mean of all labels
(the intercept prior is always centred there):

* ``precision ~ Gamma(a, b * s**2)`` per annotator, ``precision_prior=(a, b)``,
  default (2, 0.1): mode ``10 / s**2`` (noise sd 0.32 s), 90% of the mass
  between noise sd 0.15 s and 0.53 s. Its left tail is only linear, so noisy
  annotators are hardly penalised (with n labels the MAP is the ML value
  times about (1 + n/2) / (n/2)); its right tail is exponential, which keeps
  an annotator who agrees perfectly with the consensus (or always gives the
  same label) from reaching infinite precision, and shrinks very precise
  annotators (noise sd well below 0.15 s) that have few labels;
* ``truth_precision ~ Gamma(a, b * s**2)``, ``truth_precision_prior``,
  default (2, 0.1);
* ``bias ~ ZeroSumNormal(bias_sd * s)``, default ``bias_sd=1``;
* ``coef ~ N(0, s**2 / coef_precision)`` on the features standardised over
  the items (the fit does it), default ``"auto"``: the precision that
  maximises the crowd labels' evidence (MacKay's fixed point, ``_evidence``,
  with the curvature of the labels' marginal likelihood in ``coef``); ``intercept
  ~ N(c, s**2 / intercept_precision)``, default 0.01.

Gamma shapes >= 1 keep the mode interior; ``FLAT_PRIORS`` (shape 1, rate 0:
``HalfFlat``; ``bias_sd=inf``: a flat sum-to-zero bias; precisions 0: ``Flat``)
give plain maximum likelihood, which can sit on a boundary (an annotator
whose labels fit perfectly gets infinite precision).

Starts. :func:`em` and ``model.crowd_start`` start from the item means of
the labels: they are taken as the truth with variance ``w / n_i`` (``w`` the
pooled within-item variance of the labels, ``n_i`` the item's labels), and
one M-step gives the parameters.

One module, three views of the same model: :func:`build_model` (PyMC),
:func:`em` (MAP-EM, Gaussian noise) and :func:`simulate`. The report reads the
fits: :func:`crowd_models.report.true_value_summary` (the items' true values)
and :func:`crowd_models.report.experts_equivalent` (how many of these
annotators equal one expert).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pymc as pm
import pytensor.tensor as pt
import xarray as xr
from pymc.distributions.transforms import ZeroSumTransform
from scipy.special import gammaln

from crowd_models import _dims as D
from crowd_models import _trust
from crowd_models._text import listing
from crowd_models.data import Annotations
from crowd_models.models import _common as C
from crowd_models.models import _em, _evidence, _registry

__all__ = [
    "build_model",
    "em",
    "simulate",
    "item_log_marginal",
    "predict_draws",
    "NOISES",
    "DEFAULT_PRIORS",
    "FLAT_PRIORS",
]

NOISES = ("gaussian", "student_t")

DEFAULT_PRIORS = _registry.default_priors("continuous")
"""Weakly informative defaults, in units of ``label_scale`` (see the module
docstring)."""

FLAT_PRIORS = dict(
    precision_prior=(1.0, 0.0),
    truth_precision_prior=(1.0, 0.0),
    bias_sd=np.inf,
    scale_sd=np.inf,
    coef_precision=0.0,
    intercept_precision=0.0,
)
"""Flat priors: the MAP is the maximum-likelihood estimate."""

QUADRATURE_NODES = 64
"""Default number of Gauss-Hermite nodes per item for Student-t noise."""
_QUADRATURE_WIDTH = 1.5
"""The nodes' Gaussian is this many times wider than the Laplace-like sd."""
_IRLS_STEPS = 6
"""Reweighted least-squares steps that locate each item's posterior mode."""
_LOG_2PI = np.log(2 * np.pi)

_DIMS = {
    "precision": (D.ANNOTATOR,),
    "bias": (D.ANNOTATOR,),
    "scale_offset": (D.ANNOTATOR,),
    "scale": (D.ANNOTATOR,),
    "coef": (D.FEATURE,),
    "intercept": (),
    "truth_precision": (),
    "true_value": (D.ITEM,),
    "true_value_sd": (D.ITEM,),
}


# -------------------------------------------------------------- validation
def _require_continuous(annotations, family: str = "the continuous model") -> None:
    if not isinstance(annotations, Annotations):
        raise TypeError(
            f"{family} expects an Annotations object "
            f"(crowd_models.Annotations.from_frame(..., continuous=True)), got "
            f"{type(annotations).__name__}."
        )
    if not annotations.continuous:
        raise ValueError(
            f"{family} needs continuous (numeric) labels; these annotations have classes "
            f"{listing(annotations.classes)}. Parse them with "
            f"Annotations.from_frame(..., continuous=True)."
        )
    labels = np.asarray(annotations.labels)
    if not np.issubdtype(labels.dtype, np.number):
        raise TypeError(f"continuous labels must be numbers, got dtype {labels.dtype}.")
    bad = ~np.isfinite(labels.astype(float))
    if bad.any():
        raise ValueError(
            f"continuous labels must be finite; {int(bad.sum())} label(s) are NaN or infinite "
            f"(rows {np.flatnonzero(bad)[:5].tolist()}). Drop or fix them."
        )


def _check_noise(noise, nu) -> float:
    if noise not in NOISES:
        raise ValueError(f"noise={noise!r} is not one of {NOISES}.")
    if isinstance(nu, bool) or not isinstance(nu, int | float | np.number) or not (
            np.isfinite(nu) and nu > 0):
        raise ValueError(
            f"nu (Student-t degrees of freedom) must be a positive finite number, got {nu!r}.")
    return float(nu)


def _gamma_prior(value, name: str, size: int | None):
    """(shape, rate) in label_scale units, checked -> (shape, rate, flat); the rate in
    label units is ``rate * label_scale ** 2``."""
    a, b = C.parameter_pair(value, name, size, what="(shape, rate) of Gamma",
                            parts="shape and rate")
    if size is None and (a.ndim or b.ndim):
        raise ValueError(f"{name}: shape and rate must be numbers, got shapes {a.shape} and "
                         f"{b.shape}.")
    if np.any(~np.isfinite(a)) or np.any(~np.isfinite(b)) or np.any(a < 1) or np.any(b < 0):
        raise ValueError(
            f"{name} needs a finite shape >= 1 and rate >= 0 so that the posterior mode exists "
            f"(shape 1, rate 0 is flat: plain maximum likelihood); got shape={a}, rate={b}."
        )
    flat = (a == 1) & (b == 0)
    if flat.any() and not flat.all():
        raise ValueError(
            f"{name} mixes flat (shape 1, rate 0) and proper entries; make all of them flat "
            f"or all proper."
        )
    if not flat.any() and np.any(b == 0):
        raise ValueError(
            f"{name}: rate 0 with shape > 1 is an improper prior without a mode; use rate > 0, "
            f"or shape 1 and rate 0 for a flat prior."
        )
    return a, b, bool(flat.all())


def _precision_vector(value, name: str, size: int) -> np.ndarray:
    arr = C.check_positive_precision(value, name)
    if arr.ndim > 1 or (arr.ndim == 1 and arr.shape != (size,)):
        raise ValueError(
            f"{name} must be a number or {size} numbers (one per feature), got shape "
            f"{arr.shape}."
        )
    arr = np.broadcast_to(arr, (size,)).copy()
    if np.any(arr == 0) and not np.all(arr == 0):
        raise ValueError(f"{name} mixes flat (0) and proper entries; use all zeros or none.")
    return arr


def _zero_sum_sd(value, name: str, n_annotators: int, constraint: str) -> float:
    """Prior sd of a per-annotator offset constrained over annotators."""
    if n_annotators < 2:
        raise ValueError(f"{name}=True needs at least two annotators ({constraint}).")
    if isinstance(value, bool) or not isinstance(value, int | float | np.number) or not (
            value > 0):
        raise ValueError(
            f"{name}_sd must be a positive number (np.inf for a flat prior; {constraint}), got "
            f"{value!r}.")
    return float(value)


def _priors(ann: Annotations, *, bias: bool, precision_prior, truth_precision_prior, bias_sd,
            coef_precision, intercept_precision, label_scale, scale: bool = False,
            scale_sd=DEFAULT_PRIORS["scale_sd"]) -> dict:
    annotator_scale = scale  # below, ``scale`` is the label scale
    for name, flag in (("bias", bias), ("scale", annotator_scale)):
        if not isinstance(flag, bool | np.bool_):
            raise TypeError(f"{name} must be True or False, got {flag!r}.")
    labels = ann.labels.astype(float)
    if label_scale is None:
        scale = float(np.std(labels))
        if scale == 0:
            raise ValueError(
                f"every label equals {labels[0]!r}: the labels have no spread, so there is "
                f"nothing to learn (and no default label_scale)."
            )
    else:
        scale = label_scale
        if isinstance(scale, bool) or not isinstance(scale, int | float | np.number) or not (
                np.isfinite(scale) and scale > 0):
            raise ValueError(
                f"label_scale must be a positive finite number (or None for the labels' sd), "
                f"got {label_scale!r}."
            )
        scale = float(scale)
    J = ann.n_annotators
    p = {"scale": scale, "center": float(labels.mean()), "bias": bool(bias),
         "annotator_scale": bool(annotator_scale)}
    # each prior's number in label_scale units (``_unit``, what the PyMC model
    # scales by its label_scale data) and in label units (what EM uses)
    p["tau_a"], p["tau_b_unit"], p["tau_flat"] = _gamma_prior(precision_prior,
                                                              "precision_prior", J)
    p["tau_b"] = p["tau_b_unit"] * scale ** 2
    a, b, flat = _gamma_prior(truth_precision_prior, "truth_precision_prior", None)
    p["gamma_a"], p["gamma_b_unit"], p["gamma_flat"] = float(a), float(b), flat
    p["gamma_b"] = float(b * scale ** 2)
    if bias:
        p["bias_sd_unit"] = _zero_sum_sd(bias_sd, "bias", J, "the biases sum to zero")
        p["bias_sd"] = p["bias_sd_unit"] * scale
    if annotator_scale:
        p["scale_sd"] = _zero_sum_sd(scale_sd, "scale", J, "the scales average 1")
    if ann.features is not None:
        p["coef_prec_unit"] = _precision_vector(coef_precision, "coef_precision",
                                                ann.n_features)
        p["coef_prec"] = p["coef_prec_unit"] / scale ** 2
    icpt = C.check_positive_precision(intercept_precision, "intercept_precision")
    if icpt.ndim != 0:
        raise ValueError(f"intercept_precision must be a number, got {intercept_precision!r}.")
    p["intercept_prec"] = float(icpt) / scale ** 2
    p["intercept_prec_unit"] = float(icpt)
    return p


# ------------------------------------------------- the item marginal, NumPy
def _regression_mean(params: dict, features, n_items: int) -> np.ndarray:
    if features is None:
        return np.full(n_items, float(params["intercept"]))
    return features @ np.asarray(params["coef"], dtype=float) + float(params["intercept"])


def _items_np(ann: Annotations, params: dict):
    """Gaussian noise: per-item log marginal likelihood, posterior mean and variance of y_i."""
    n = ann.n_items
    i, j = ann.item_idx, ann.annotator_idx
    tau = np.asarray(params["precision"], dtype=float)[j]
    gamma = float(params["truth_precision"])
    m = _regression_mean(params, ann.features, n)
    sc = np.asarray(params.get("scale", np.ones(ann.n_annotators)), dtype=float)[j]
    r = ann.labels - sc * m[i]
    if "bias" in params:
        r = r - np.asarray(params["bias"], dtype=float)[j]
    A = gamma + np.bincount(i, weights=tau * sc ** 2, minlength=n)
    S = np.bincount(i, weights=tau * sc * r, minlength=n)
    Q = np.bincount(i, weights=0.5 * np.log(tau) - 0.5 * tau * r ** 2, minlength=n)
    n_i = np.bincount(i, minlength=n)
    loglik = Q + 0.5 * np.log(gamma) - 0.5 * np.log(A) + 0.5 * S ** 2 / A - 0.5 * n_i * _LOG_2PI
    return loglik, m + S / A, 1.0 / A


def item_log_marginal(annotations: Annotations, precision, truth_precision, intercept, *,
                      bias=None, coef=None, scale=None) -> np.ndarray:
    """Each item's log marginal likelihood under Gaussian noise (NumPy).

    ``log p(labels of item i) = sum_j [log N(r_ij; 0, 1/tau_j)] + 1/2 log gamma
    - 1/2 log A_i + 1/2 (sum_j tau_j s_j r_ij)^2 / A_i + 1/2 log 2 pi`` summed
    per item, with ``r_ij = y_ij - bias_j - s_j (coef . x_i + intercept)``,
    ``A_i = gamma + sum_j s_j^2 tau_j`` over the item's labels (repeats
    counted) and ``s_j`` the annotator's ``scale`` (1 without); ``x_i`` are the
    standardised features (:meth:`~crowd_models.Annotations.standardized`), the
    scale of a fit's ``coef``.

    Examples
    --------
    >>> from crowd_models.models import continuous
    >>> ann = cm.datasets.load_affect("anger")
    >>> fit = continuous.em(ann)
    >>> value = lambda name: fit[name].values[0, 0]
    >>> parts = [value(name) for name in ("precision", "truth_precision", "intercept")]
    >>> continuous.item_log_marginal(ann, *parts).sum()
    """
    _require_continuous(annotations)
    annotations = annotations.standardized()  # the scale its coef= refers to
    params = {"precision": np.broadcast_to(np.asarray(precision, dtype=float),
                                           (annotations.n_annotators,)),
              "truth_precision": truth_precision, "intercept": intercept}
    if bias is not None:
        params["bias"] = bias
    if scale is not None:
        params["scale"] = scale
    if annotations.features is not None:
        if coef is None:
            raise ValueError("these annotations have features: give coef.")
        params["coef"] = coef
    return _items_np(annotations, params)[0]


# --------------------------------------------------- the item marginal, PyTensor
def _long_table_data(ann: Annotations) -> dict:
    """The long table as ``pm.Data`` (item_idx, annotator_idx, float label_value) and
    the symbolic item count, like ``_common.long_table_data``."""
    model = pm.modelcontext(None)
    data = {name: pm.Data(name, values, dims=D.ANNOTATION)
            for name, values in (("item_idx", ann.item_idx.astype(np.int32)),
                                 ("annotator_idx", ann.annotator_idx.astype(np.int32)),
                                 ("label_value", ann.labels.astype(float)))}
    data["n_items"] = model.dim_lengths[D.ITEM]
    return data


def _scatter(values, idx, n):
    return pt.zeros(n)[idx].inc(values)


def _gaussian_items_pt(data: dict, tau, bias, m, gamma, scale=None):
    """Per-item log marginal likelihood, posterior mean and sd of y_i (Gaussian noise)."""
    n, i, j = data["n_items"], data["item_idx"], data["annotator_idx"]
    tau_r = tau[j]
    sc = 1.0 if scale is None else scale[j]
    r = data["label_value"] - sc * m[i]
    if bias is not None:
        r = r - bias[j]
    A = gamma + _scatter(tau_r * sc ** 2, i, n)
    S = _scatter(tau_r * sc * r, i, n)
    Q = _scatter(0.5 * pt.log(tau_r) - 0.5 * tau_r * r ** 2 - 0.5 * _LOG_2PI, i, n)
    loglik = Q + 0.5 * pt.log(gamma) - 0.5 * pt.log(A) + 0.5 * S ** 2 / A
    return loglik, m + S / A, 1.0 / pt.sqrt(A)


def _student_t_items_pt(data: dict, tau, bias, m, gamma, nu: float, n_nodes: int, scale=None):
    """Student-t noise: the same three quantities by adaptive Gauss-Hermite quadrature.

    With debiased labels d_ij = y_ij - bias_j, the integrand over u = y_i is
    N(u; m_i, 1/gamma) prod_j t_nu(d_ij; a_j u, 1/sqrt(tau_j)), a_j the
    annotator's scale (1 without). Its mode is found by reweighted least
    squares (weights (nu + 1) / (nu + tau r^2), started at the Gaussian
    posterior mean); the nodes are c_i + sqrt(2) s_i x_k with
    s_i = 1.5 / sqrt(gamma + sum_j w_ij a_j^2 tau_j), and
    integral = sqrt(2) s_i sum_k w_k exp(x_k^2) integrand(node_k).
    """
    n, i, j = data["n_items"], data["item_idx"], data["annotator_idx"]
    tau_r = tau[j]
    d = data["label_value"] if bias is None else data["label_value"] - bias[j]
    sc = 1.0 if scale is None else scale[j]
    A = gamma + _scatter(tau_r * sc ** 2, i, n)
    center = (gamma * m + _scatter(tau_r * sc * d, i, n)) / A
    for _ in range(_IRLS_STEPS):
        r = d - sc * center[i]
        w = (nu + 1) / (nu + tau_r * r ** 2)
        A = gamma + _scatter(w * tau_r * sc ** 2, i, n)
        center = (gamma * m + _scatter(w * tau_r * sc * d, i, n)) / A
    x, wk = np.polynomial.hermite.hermgauss(n_nodes)
    s = _QUADRATURE_WIDTH / pt.sqrt(A)
    nodes = center[:, None] + np.sqrt(2.0) * s[:, None] * x[None, :]  # (item, node)
    const = gammaln((nu + 1) / 2) - gammaln(nu / 2) - 0.5 * np.log(nu * np.pi)
    resid = d[:, None] - (nodes[i] if scale is None else sc[:, None] * nodes[i])
    log_t = (const + 0.5 * pt.log(tau_r)[:, None]
             - (nu + 1) / 2 * pt.log1p(tau_r[:, None] * resid ** 2 / nu))
    terms = (pt.zeros((n, n_nodes))[i].inc(log_t)
             + 0.5 * pt.log(gamma) - 0.5 * _LOG_2PI - 0.5 * gamma * (nodes - m[:, None]) ** 2
             + (np.log(wk) + x ** 2)[None, :])
    loglik = pt.log(np.sqrt(2.0) * s) + pt.logsumexp(terms, axis=1)
    prob = pt.special.softmax(terms, axis=1)
    mean = pt.sum(prob * nodes, axis=1)
    var = pt.sum(prob * (nodes - mean[:, None]) ** 2, axis=1)
    return loglik, mean, pt.sqrt(var)


def _item_logp(value, loglik):
    return loglik


def _add_item_likelihood(ann: Annotations, loglik, mean, sd) -> None:
    """``_common.add_item_likelihood`` for real-valued labels: the observed per-item
    marginal, ``true_value``/``true_value_sd`` and ``n_labels``."""
    n_per_item = np.bincount(ann.item_idx, minlength=ann.n_items)
    pm.CustomDist(D.OBSERVED, loglik, logp=_item_logp, observed=n_per_item, dims=D.ITEM)
    pm.Deterministic("true_value", mean, dims=D.ITEM)
    pm.Deterministic("true_value_sd", sd, dims=D.ITEM)
    pm.Data("n_labels", ann.n_labels(), dims=D.ANNOTATOR)


# ------------------------------------------------------------------- EM
def _m_step(ann: Annotations, mean, var, pri: dict, previous: dict) -> dict:
    """Conditional maximisation of the expected complete-data log posterior.

    Precisions (given the previous biases and scales), then biases and scales
    jointly (given the new precisions), then the regression (given the previous
    truth_precision), then truth_precision: each block in closed form with its
    prior (no Jacobian), so
    every step raises the objective (ECM, Meng & Rubin 1993) and the fixed
    points are those of the marginal posterior.
    """
    y, i, j = ann.labels, ann.item_idx, ann.annotator_idx
    J, n = ann.n_annotators, ann.n_items
    n_j = np.bincount(j, minlength=J)
    beta = previous.get("bias", np.zeros(J)) if pri["bias"] else np.zeros(J)
    sc = previous.get("scale", np.ones(J)) if pri["annotator_scale"] else np.ones(J)
    resid = y - beta[j] - sc[j] * mean[i]
    ss = np.bincount(j, weights=resid ** 2 + sc[j] ** 2 * var[i], minlength=J)
    tau = (pri["tau_a"] - 1 + n_j / 2) / (pri["tau_b"] + ss / 2)
    params = {"precision": tau}
    if pri["annotator_scale"]:
        params.update(_bias_scale_step(ann, mean, var, tau, pri))
    elif pri["bias"]:
        s_j = np.bincount(j, weights=y - mean[i], minlength=J)
        denom = tau * n_j + 1 / pri["bias_sd"] ** 2
        lagrange = np.sum(tau * s_j / denom) / np.sum(1 / denom)
        params["bias"] = (tau * s_j - lagrange) / denom
    gamma = float(previous["truth_precision"])
    if ann.features is None:
        total = gamma * mean.sum() + pri["intercept_prec"] * pri["center"]
        params["intercept"] = total / (gamma * n + pri["intercept_prec"])
        m = np.full(n, params["intercept"])
    else:
        X = np.hstack([ann.features, np.ones((n, 1))])
        P = np.diag(np.append(pri["coef_prec"], pri["intercept_prec"]))
        prior_mean = np.zeros(X.shape[1])
        prior_mean[-1] = pri["center"]
        theta = np.linalg.solve(gamma * X.T @ X + P, gamma * X.T @ mean + P @ prior_mean)
        params["coef"], params["intercept"] = theta[:-1], float(theta[-1])
        m = X @ theta
    dev = np.sum((mean - m) ** 2 + var)
    params["truth_precision"] = (pri["gamma_a"] - 1 + n / 2) / (pri["gamma_b"] + dev / 2)
    return params


def _bias_scale_step(ann: Annotations, mean, var, tau, pri: dict) -> dict:
    """Scales (and biases) maximising the expected complete-data log posterior.

    Per annotator the objective is a concave quadratic in theta_j = (bias_j,
    scale_j) (or scale_j alone), -1/2 theta_j' H_j theta_j + g_j' theta_j, with
    H_j = tau_j [[n_j, sum mu], [sum mu, sum (mu^2 + v)]] + prior precisions and
    g_j = tau_j [sum y, sum y mu] + [0, 1 / scale_sd^2]; the constraints
    sum_j bias_j = 0 and sum_j scale_j = J enter through one Lagrange
    multiplier vector: theta_j = H_j^-1 (g_j - lambda).
    """
    y, i, j = ann.labels, ann.item_idx, ann.annotator_idx
    J = ann.n_annotators
    mu = mean[i]
    sums = {"n": np.bincount(j, minlength=J).astype(float),
            "m": np.bincount(j, weights=mu, minlength=J),
            "mm": np.bincount(j, weights=mu ** 2 + var[i], minlength=J),
            "y": np.bincount(j, weights=y, minlength=J),
            "ym": np.bincount(j, weights=y * mu, minlength=J)}
    scale_prec = 1 / pri["scale_sd"] ** 2
    if pri["bias"]:
        H = np.empty((J, 2, 2))
        H[:, 0, 0] = tau * sums["n"] + 1 / pri["bias_sd"] ** 2
        H[:, 0, 1] = H[:, 1, 0] = tau * sums["m"]
        H[:, 1, 1] = tau * sums["mm"] + scale_prec
        g = np.stack([tau * sums["y"], tau * sums["ym"] + scale_prec], axis=1)
        target = np.array([0.0, J])
    else:
        H = (tau * sums["mm"] + scale_prec)[:, None, None]
        g = (tau * sums["ym"] + scale_prec)[:, None]
        target = np.array([float(J)])
    H_inv = np.linalg.inv(H)
    lagrange = np.linalg.solve(H_inv.sum(axis=0),
                               np.einsum("jab,jb->a", H_inv, g) - target)
    theta = np.einsum("jab,jb->ja", H_inv, g - lagrange)
    out = {"scale": theta[:, -1], "scale_offset": theta[:, -1] - 1.0}
    if pri["bias"]:
        out["bias"] = theta[:, 0]
    return out


def _start(ann: Annotations, pri: dict) -> dict:
    """Data-based start: item means as the truth, then one M-step."""
    n = ann.n_items
    i = ann.item_idx
    n_i = np.bincount(i, minlength=n)
    mean = np.bincount(i, weights=ann.labels, minlength=n) / n_i
    within = np.sum((ann.labels - mean[i]) ** 2)
    dof = ann.n_annotations - n
    w = within / dof if dof > 0 and within > 0 else pri["scale"] ** 2
    var = w / n_i
    spread = np.var(mean) if n > 1 else 0.0
    previous = {"truth_precision": 1.0 / (spread if spread > 0 else pri["scale"] ** 2)}
    return _m_step(ann, mean, var, pri, previous)


def _gamma_logpdf_nojac(x, a, b, flat: bool) -> float:
    if flat:
        return 0.0
    x = np.asarray(x, dtype=float)
    return float(np.sum(a * np.log(b) - gammaln(a) + (a - 1) * np.log(x) - b * x))


def _normal_logpdf(x, mu, precision) -> float:
    precision = np.asarray(precision, dtype=float)
    if np.all(precision == 0):
        return 0.0
    x = np.asarray(x, dtype=float)
    return float(np.sum(0.5 * np.log(precision) - 0.5 * _LOG_2PI
                        - 0.5 * precision * (x - mu) ** 2))


def _log_prior(params: dict, pri: dict) -> float:
    lp = _gamma_logpdf_nojac(params["precision"], pri["tau_a"], pri["tau_b"], pri["tau_flat"])
    lp += _gamma_logpdf_nojac(params["truth_precision"], pri["gamma_a"], pri["gamma_b"],
                              pri["gamma_flat"])
    if "bias" in params:
        lp += C.zerosum_normal_logpdf(params["bias"], pri["bias_sd"])
    if "scale_offset" in params:
        lp += C.zerosum_normal_logpdf(params["scale_offset"], pri["scale_sd"])
    if "coef" in params:
        lp += _normal_logpdf(params["coef"], 0.0, pri["coef_prec"])
    lp += _normal_logpdf(params["intercept"], pri["center"], pri["intercept_prec"])
    return lp


def _log_posterior(ann: Annotations, params: dict, pri: dict) -> float:
    """The marginal log posterior EM climbs and find_MAP maximises (no Jacobian)."""
    return float(_items_np(ann, params)[0].sum()) + _log_prior(params, pri)


_EM_SUPPORTS = {"precision": "positive", "truth_precision": "positive"}
"""Supports the accelerated EM keeps the parameters in (the others: none;
extrapolation keeps the biases' zero sum, the scales' mean of 1 and
scale = 1 + scale_offset)."""


def _change(new: dict, old: dict, scale: float) -> float:
    """Largest parameter move, unit-free: log precisions, scales, the rest / label_scale."""
    moves = [np.max(np.abs(np.log(new[k]) - np.log(old[k])))
             for k in ("precision", "truth_precision")]
    moves += [np.max(np.abs(np.asarray(new[k]) - np.asarray(old[k]))) / scale
              for k in ("bias", "coef", "intercept") if k in new]
    if "scale" in new:  # the annotators' scales are unit-free
        moves.append(np.max(np.abs(np.asarray(new["scale"]) - np.asarray(old["scale"]))))
    if "scale" in new:
        moves.append(np.max(np.abs(new["scale"] - old.get("scale", 1.0))))
    return float(max(moves))


# ----------------------------------------------------------------- factory
def build_model(
    annotations: Annotations,
    *,
    bias: bool = False,
    scale: bool = False,
    noise: str = "gaussian",
    nu: float = 4.0,
    precision_prior=DEFAULT_PRIORS["precision_prior"],
    truth_precision_prior=DEFAULT_PRIORS["truth_precision_prior"],
    bias_sd=DEFAULT_PRIORS["bias_sd"],
    scale_sd=DEFAULT_PRIORS["scale_sd"],
    coef_precision=DEFAULT_PRIORS["coef_precision"],
    intercept_precision=DEFAULT_PRIORS["intercept_precision"],
    label_scale: float | None = None,
    quadrature_nodes: int = QUADRATURE_NODES,
) -> pm.Model:
    r"""The continuous-label model in PyMC, true values integrated out.

    .. math::

        y_i &\sim \mathcal{N}(m_i, 1 / \text{truth\_precision}), \quad
            m_i = \text{intercept} (+ x_i^\top \text{coef}) \\
        \ell_{ij} \mid y_i &\sim \mathcal{N}(\text{bias}_j + \text{scale}_j y_i,
            1 / \text{precision}_j) \quad \text{(or Student-t with } \nu
            \text{ degrees of freedom)} \\
        \text{precision}_j &\sim \mathrm{Gamma}(a, b), \quad
        \text{bias} \sim \text{zero-sum } \mathcal{N}(0, \text{bias\_sd}), \quad
        \text{scale} = 1 + \text{zero-sum } \mathcal{N}(0, \text{scale\_sd})

    (bias and scale only when asked for), and the likelihood of item i
    integrates :math:`y_i` out: in closed form (Gaussian noise) or by
    Gauss-Hermite quadrature (Student-t).

    Parameters
    ----------
    annotations : Annotations
        Continuous labels (``continuous=True``); with features, the truth is a linear
        regression on them.
    bias : bool
        Add a per-annotator additive ``bias`` (sum-to-zero over annotators).
    scale : bool
        Add a per-annotator multiplicative ``scale`` (averaging 1 over
        annotators): annotator j reports ``bias_j + scale_j * y_i`` plus noise.
    noise : "gaussian" or "student_t"
        Annotator noise. Student-t uses ``nu`` degrees of freedom (fixed) and
        ``quadrature_nodes`` Gauss-Hermite nodes per item.
    nu : float, optional
        Degrees of freedom of the Student-t noise (positive, fixed; default 4).
        Only read with ``noise="student_t"``.
    precision_prior, truth_precision_prior : (shape, rate)
        Gamma priors in ``label_scale`` units; ``precision_prior`` may hold
        arrays over annotators.
    bias_sd : float, optional
        Positive; prior sd of the biases in ``label_scale`` units (``np.inf``: flat).
    scale_sd : float, optional
        Positive; prior sd of the scales around 1 (unit-free; ``np.inf``: flat).
    coef_precision : "auto", float or array (feature,), optional
        Gaussian prior precision of ``coef / label_scale``; 0 = flat. ``"auto"``
        (the default; with features) takes the precision :func:`em` chooses by
        the crowd labels' evidence (``em(annotations).attrs["coef_precision"]``;
        its Gaussian-noise EM also for ``noise="student_t"``).
    intercept_precision : float, optional
        Gaussian prior precision of ``(intercept - mean label) / label_scale``; 0 = flat.
    label_scale : float or None, optional
        Positive; None means the sd of all labels.
    quadrature_nodes : int, optional
        Gauss-Hermite nodes per item that integrate the true value out under
        Student-t noise (default ``QUADRATURE_NODES``, 64).

    Returns
    -------
    pymc.Model
        Variables: ``precision`` (annotator), ``bias`` (annotator, with
        ``bias=True``), ``scale_offset`` and the deterministic ``scale`` = 1 +
        ``scale_offset`` (annotator, with ``scale=True``), ``coef`` (feature) with
        features, ``intercept``, ``truth_precision``; deterministic ``true_value`` and
        ``true_value_sd`` (item), the posterior mean and sd of each item's true value given
        the parameters; observed ``item_labels`` (item), whose log-density is each item's
        marginal log-likelihood; data ``n_labels`` (annotator) and the long table
        ``item_idx``, ``annotator_idx``, ``label_value`` (annotation).
        ``model.crowd_start`` holds the item-mean start that :func:`em` uses.

    Examples
    --------
    >>> from crowd_models.models import continuous
    >>> model = continuous.build_model(cm.datasets.load_affect("anger"), bias=True)
    >>> fit = cm.fit_map(model)
    """
    _require_continuous(annotations)
    _trust.check_identifiable(annotations, "the continuous model")
    _trust.check_constant_annotators(annotations, "the continuous model")
    _registry.refuse_unused("continuous", noise, annotations.features is not None,
                            coef_precision=coef_precision,
                            intercept_precision=intercept_precision)
    annotations = annotations.standardized()
    nu = _check_noise(noise, nu)
    coef_precision = _evidence.resolved(coef_precision, annotations, lambda: em(
        annotations, bias=bias, scale=scale, precision_prior=precision_prior, bias_sd=bias_sd,
        truth_precision_prior=truth_precision_prior, scale_sd=scale_sd, label_scale=label_scale,
        coef_precision="auto", intercept_precision=intercept_precision))
    if isinstance(quadrature_nodes, bool) or not isinstance(
            quadrature_nodes, int | np.integer) or quadrature_nodes < 2:
        raise ValueError(f"quadrature_nodes must be an integer >= 2, got {quadrature_nodes!r}.")
    pri = _priors(annotations, bias=bias, precision_prior=precision_prior,
                  truth_precision_prior=truth_precision_prior, bias_sd=bias_sd,
                  coef_precision=coef_precision, intercept_precision=intercept_precision,
                  label_scale=label_scale, scale=scale, scale_sd=scale_sd)
    start = _start(annotations, pri)
    with pm.Model(coords=annotations.coords()) as model:
        data = _long_table_data(annotations)
        # the labels' scale and mean enter the priors as data, not as constants, so
        # that models of other labels share one compiled graph (and one nutpie model)
        unit = pm.Data("label_scale", pri["scale"])
        centre = pm.Data("label_center", pri["center"])
        if pri["tau_flat"]:
            tau = pm.HalfFlat("precision", dims=D.ANNOTATOR)
        else:
            tau = pm.Gamma("precision", alpha=pri["tau_a"], beta=pri["tau_b_unit"] * unit ** 2,
                           dims=D.ANNOTATOR)
        beta = None
        if bias:
            if np.isfinite(pri["bias_sd"]):
                beta = pm.ZeroSumNormal("bias", sigma=pri["bias_sd_unit"] * unit,
                                        dims=D.ANNOTATOR)
            else:
                beta = pm.Flat("bias", dims=D.ANNOTATOR, transform=ZeroSumTransform([-1]))
        sc = None
        if scale:
            if np.isfinite(pri["scale_sd"]):
                offset = pm.ZeroSumNormal("scale_offset", sigma=pri["scale_sd"], dims=D.ANNOTATOR)
            else:
                offset = pm.Flat("scale_offset", dims=D.ANNOTATOR,
                                 transform=ZeroSumTransform([-1]))
            sc = pm.Deterministic("scale", 1.0 + offset, dims=D.ANNOTATOR)
        if pri["intercept_prec"] == 0:
            intercept = pm.Flat("intercept")
        else:
            intercept = pm.Normal("intercept", centre,
                                  sigma=unit / np.sqrt(pri["intercept_prec_unit"]))
        if annotations.features is None:
            m = pt.zeros(data["n_items"]) + intercept
        else:
            X = pm.Data("features", annotations.features, dims=(D.ITEM, D.FEATURE))
            if np.all(pri["coef_prec"] == 0):
                coef = pm.Flat("coef", dims=D.FEATURE)
            else:
                coef = pm.Normal("coef", 0.0, sigma=unit / np.sqrt(pri["coef_prec_unit"]),
                                 dims=D.FEATURE)
            m = X @ coef + intercept
        if pri["gamma_flat"]:
            gamma = pm.HalfFlat("truth_precision")
        else:
            gamma = pm.Gamma("truth_precision", alpha=pri["gamma_a"],
                             beta=pri["gamma_b_unit"] * unit ** 2)
        if noise == "gaussian":
            items = _gaussian_items_pt(data, tau, beta, m, gamma, sc)
        else:
            items = _student_t_items_pt(data, tau, beta, m, gamma, nu, int(quadrature_nodes),
                                        sc)
        _add_item_likelihood(annotations, *items)
    return C.attach_protocol(model, "continuous", noise,
                             start={k: v for k, v in start.items() if k != "scale"},  # free only
                             em=em if noise == "gaussian" else None, annotations=annotations,
                             arguments=locals())


# ---------------------------------------------------------------------- EM
def em(
    annotations: Annotations,
    *,
    bias: bool = False,
    scale: bool = False,
    noise: str = "gaussian",
    precision_prior=DEFAULT_PRIORS["precision_prior"],
    truth_precision_prior=DEFAULT_PRIORS["truth_precision_prior"],
    bias_sd=DEFAULT_PRIORS["bias_sd"],
    scale_sd=DEFAULT_PRIORS["scale_sd"],
    coef_precision=DEFAULT_PRIORS["coef_precision"],
    intercept_precision=DEFAULT_PRIORS["intercept_precision"],
    label_scale: float | None = None,
    tol: float = 1e-10,
    max_iter: int = 100_000,
    accelerate: bool = True,
) -> xr.Dataset:
    """MAP-EM for Gaussian noise (Raykar et al. 2009, sec. 8.3, with priors and bias).

    E-step: the posterior of each true value given the parameters, Gaussian
    with precision ``A_i = truth_precision + sum_j precision_j`` and mean
    ``(truth_precision m_i + sum_j precision_j (y_ij - bias_j)) / A_i``.
    M-step, each block in closed form with its prior: precisions
    ``(a - 1 + n_j/2) / (b + 1/2 sum_i E[(y_ij - bias_j - scale_j y_i)^2])``;
    biases (and scales, jointly: a 2 x 2 weighted least-squares problem per
    annotator), the constrained maximiser (biases sum to 0, scales to the
    number of annotators; a Lagrange multiplier); the
    regression by weighted least squares with its Gaussian prior (the common
    mean without features); ``truth_precision`` like the precisions. Starts
    from the item means (see the module docstring) and iterates until no
    parameter moves by more than ``tol`` (log precisions; the others in
    ``label_scale`` units). ``accelerate`` (default) extrapolates the EM steps by
    SQUAREM (``_em.iterate_em_map``; precisions on the log scale, the other
    blocks as they are, which keeps the sum constraints), reaching the same
    fixed point in fewer steps; ``accelerate=False`` runs plain ECM.
    ``noise="student_t"`` has no EM. ``coef_precision="auto"`` (the default;
    with features) iterates EM at a precision alpha and
    ``alpha <- gamma / |coef / label_scale|^2`` (MacKay's evidence fixed point;
    gamma from the curvature of the labels' marginal likelihood in ``coef``), each EM warm
    started from the last, and records alpha in ``attrs["coef_precision"]``
    (with ``evidence_rounds`` and ``evidence_converged``).

    Returns a Dataset with the posterior's names and dims (chain=1, draw=1):
    ``precision``, ``bias`` (with ``bias=True``), ``scale_offset`` and
    ``scale`` (with ``scale=True``), ``coef`` (with features),
    ``intercept``, ``truth_precision``, ``true_value``, ``true_value_sd``; and
    ``n_labels`` and the conditional Gamma posterior of each precision given
    the final E-step, ``precision_alpha``/``precision_beta`` (its mode is the
    estimate); with biases, ``bias_conditional_sd``, the sd of each bias's
    Gaussian conditional posterior given the precisions and the final E-step
    (ignoring the sum-to-zero constraint). ``attrs`` hold ``log_posterior``
    (the quantity ``find_MAP`` maximises: ``model.logp(jacobian=False)``),
    ``log_likelihood``, ``n_iter`` (M-steps run), ``converged`` and ``label_scale``.

    Examples
    --------
    >>> from crowd_models.models import continuous
    >>> fit = continuous.em(cm.datasets.load_affect("anger"), bias=True)
    >>> cm.report.annotator_summary(fit)
    """
    _require_continuous(annotations)
    _trust.check_identifiable(annotations, "the continuous model")
    _trust.check_constant_annotators(annotations, "the continuous model")
    _registry.refuse_unused("continuous", noise, annotations.features is not None,
                            coef_precision=coef_precision,
                            intercept_precision=intercept_precision)
    annotations = annotations.standardized()
    _check_noise(noise, 4.0)
    if noise != "gaussian":
        raise ValueError(
            f"noise={noise!r} has no EM (its E-step has no closed form); use "
            f"cm.fit_map(build_model(..., noise={noise!r})) or cm.sample."
        )
    if not (tol > 0 and max_iter >= 0):
        raise ValueError(f"need tol > 0 and max_iter >= 0, got tol={tol}, max_iter={max_iter}.")
    auto = _evidence.is_auto(coef_precision)
    pri = _priors(annotations, bias=bias, precision_prior=precision_prior,
                  truth_precision_prior=truth_precision_prior, bias_sd=bias_sd,
                  coef_precision=1.0 if auto else coef_precision,
                  intercept_precision=intercept_precision,
                  label_scale=label_scale, scale=scale, scale_sd=scale_sd)

    def run(pri, start):
        return _run_em(annotations, pri, start, tol, max_iter, accelerate)

    evidence = {}
    if auto and annotations.features is not None:
        params, n_iter, converged, pri, evidence = _evidence_em(annotations, pri, run)
    else:
        params, n_iter, converged = run(pri, _start(annotations, pri))
    item_ll, mean, var = _items_np(annotations, params)
    loglik = float(item_ll.sum())
    j = annotations.annotator_idx
    beta = params.get("bias", np.zeros(annotations.n_annotators))
    sc = params.get("scale", np.ones(annotations.n_annotators))
    resid = annotations.labels - beta[j] - sc[j] * mean[annotations.item_idx]
    ss = np.bincount(j, weights=resid ** 2 + sc[j] ** 2 * var[annotations.item_idx],
                     minlength=annotations.n_annotators)
    extra = {
        "n_labels": ((D.ANNOTATOR,), annotations.n_labels()),
        "precision_alpha": ((D.ANNOTATOR,), pri["tau_a"] + annotations.n_labels() / 2),
        "precision_beta": ((D.ANNOTATOR,), pri["tau_b"] + ss / 2),
    }
    if bias:
        prior_prec = 1 / pri["bias_sd"] ** 2
        extra["bias_conditional_sd"] = ((D.ANNOTATOR,), 1 / np.sqrt(
            params["precision"] * annotations.n_labels() + prior_prec))
    return C.em_dataset(
        annotations, {**params, "true_value": mean, "true_value_sd": np.sqrt(var)}, _DIMS,
        extra=extra,
        attrs={
            "family": "continuous", "variant": noise, "noise": noise, "bias": int(bool(bias)),
            "scale": int(bool(scale)), "method": "em",
            "log_likelihood": loglik, "log_posterior": _log_posterior(annotations, params, pri),
            "n_iter": n_iter, "converged": int(converged), "label_scale": pri["scale"],
            **evidence,
        },
        supports=_EM_SUPPORTS,
    )


def _run_em(annotations: Annotations, pri: dict, start: dict, tol, max_iter, accelerate):
    """The ECM iterations of :func:`em` from ``start``: (params, n_iter, converged)."""
    def em_map(prm):
        _, mean, var = _items_np(annotations, prm)
        with np.errstate(divide="ignore", invalid="ignore"):
            return _m_step(annotations, mean, var, pri, prm)

    def change(new, old):
        with np.errstate(divide="ignore", invalid="ignore"):
            return _change(new, old, pri["scale"])

    return _em.iterate_em_map(
        em_map, start, tol=tol, max_iter=max_iter, change=change,
        objective=lambda prm: _log_posterior(annotations, prm, pri),
        supports=_EM_SUPPORTS, accelerate=accelerate,
        nonfinite_message="EM produced non-finite parameters (a precision ran off to "
                          "infinity, which flat priors allow); use Gamma priors with rate "
                          "> 0 (the defaults).")


def _evidence_em(annotations: Annotations, pri: dict, run):
    """:func:`em` with ``coef_precision="auto"``: ``run(pri, start)`` (the EM) at a
    precision alpha, then ``alpha <- gamma / |coef / label_scale|^2`` (``_evidence``),
    the next EM warm started, until alpha settles. The curvature of the labels'
    marginal log-likelihood in ``coef`` is ``sum_i x_i x_i' g (1 - g v_i)``, ``g`` the
    truth precision and ``v_i`` the posterior variance of item i's true value: an
    item its labels pin down counts as an observed truth, one without labels not
    at all. Returns the EM's result, the priors at the chosen alpha and the attrs."""
    X = annotations.features
    unit = pri["scale"] ** 2  # coef_precision is in label_scale units, the EM in labels'

    def fit_at(alpha, previous):
        pri_a = {**pri, "coef_prec_unit": np.full(X.shape[1], alpha),
                 "coef_prec": np.full(X.shape[1], alpha / unit)}
        start = _start(annotations, pri_a) if previous is None else previous[0]
        params, n_iter, converged = run(pri_a, start)
        _, _, var = _items_np(annotations, params)
        g = float(params["truth_precision"])
        curvature = np.clip(g * (1 - g * var), 0.0, None)[:, None, None]
        n_iter += 0 if previous is None else previous[1]
        new = _evidence.next_precision(X, curvature, params["coef"], alpha / unit) * unit
        return (params, n_iter, converged, pri_a), new

    (params, n_iter, converged, pri_a), alpha, rounds, settled = _evidence.fixed_point(fit_at)
    return params, n_iter, converged, pri_a, {"coef_precision": alpha, "evidence_rounds": rounds,
                                              "evidence_converged": int(settled)}


# ---------------------------------------------------------------- simulate
def _positive_vector(value, name: str) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array (one per annotator).")
    if np.any(~np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must be positive and finite, got {arr}.")
    return arr


def _annotator_effect(value, name: str, J: int, neutral: float, constraint: str,
                      fix: str) -> np.ndarray:
    """A simulated per-annotator effect: ``neutral`` for every annotator when
    ``value`` is None, else J finite numbers averaging ``neutral`` (the
    model's identifiability constraint)."""
    if value is None:
        return np.full(J, neutral)
    v = np.asarray(value, dtype=float)
    if v.shape != (J,) or np.any(~np.isfinite(v)):
        raise ValueError(f"{name} must be {J} finite numbers, one per annotator.")
    if abs(v.mean() - neutral) > 1e-8 * max(1.0, np.abs(v).max()):
        raise ValueError(f"{name} must {constraint} (the model's identifiability constraint), "
                         f"got mean {v.mean():.3g}; {fix}.")
    return v


def predict_draws(post: xr.Dataset, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The true value of new items under each draw of the fit's regression, in
    the labels' units: its mean ``x @ coef + intercept`` (sample, item) and its
    sd ``1 / sqrt(truth_precision)`` (sample,).
    :func:`crowd_models.predict` checks the features and summarises the draws.

    Examples
    --------
    >>> from crowd_models.models import continuous
    >>> ann = continuous.simulate([1.0, 2.0, 4.0], n_items=200, n_features=2, rng=0)
    >>> mean, sd = continuous.predict_draws(continuous.em(ann), ann.features)
    """
    coef = post["coef"].stack(sample=(D.CHAIN, D.DRAW)).transpose("sample", D.FEATURE).values
    intercept = post["intercept"].stack(sample=(D.CHAIN, D.DRAW)).values
    precision = post["truth_precision"].stack(sample=(D.CHAIN, D.DRAW)).values
    mean = coef @ np.asarray(features, dtype=float).T + intercept[:, None]
    return mean, 1 / np.sqrt(precision)


def simulate(
    precision,
    *,
    bias=None,
    scale=None,
    n_items: int | None = None,
    features=None,
    n_features: int = 0,
    coef=None,
    intercept: float = 0.0,
    truth_precision: float = 1.0,
    true_values=None,
    labels_per_item: int | None = None,
    noise: str = "gaussian",
    nu: float = 4.0,
    rng=None,
) -> Annotations:
    """Continuous annotations drawn from the model, with the truth kept.

    The true values are ``true_values`` if given, else
    ``N(coef . x_i + intercept, 1 / truth_precision)`` with features
    (``features`` given, or ``n_features`` standard-normal ones; ``coef``
    drawn N(0, 1) if not given), else ``N(intercept, 1 / truth_precision)``.
    Annotator j reports ``bias[j] + scale[j] * y_i`` (the biases must sum to
    zero and the scales average 1, the model's identifiability constraints;
    defaults 0 and 1) plus noise of precision ``precision[j]``:
    Gaussian, or Student-t with ``nu`` degrees of freedom and scale
    ``1 / sqrt(precision[j])``. Every annotator labels every item, or each
    item gets ``labels_per_item`` annotators drawn without replacement.

    Returns continuous Annotations whose ``gold`` holds the true values and
    whose ``truth`` holds the true parameters (annotators named
    ``annotator_0``, ...).

    Examples
    --------
    >>> from crowd_models.models import continuous
    >>> ann = continuous.simulate([4.0, 1.0, 0.25], bias=[0.3, 0.0, -0.3], n_items=200, rng=0)
    """
    rng = np.random.default_rng(rng)
    nu = _check_noise(noise, nu)
    tau = _positive_vector(precision, "precision")
    J = len(tau)
    truth = {"precision": ((D.ANNOTATOR,), tau)}
    beta = _annotator_effect(bias, "bias", J, 0.0, "sum to zero", "centre it: bias - bias.mean()")
    sc = _annotator_effect(scale, "scale", J, 1.0, "average 1", "rescale it: scale / scale.mean()")
    if bias is not None:
        truth["bias"] = ((D.ANNOTATOR,), beta)
    if scale is not None:
        truth["scale"] = ((D.ANNOTATOR,), sc)
    if not (np.isfinite(truth_precision) and truth_precision > 0):
        raise ValueError(f"truth_precision must be positive, got {truth_precision!r}.")
    X = None
    if features is not None:
        X = np.asarray(features, dtype=float)
        if X.ndim != 2:
            raise ValueError(f"features must be 2-D (item, feature), got shape {X.shape}.")
    elif n_features:
        if n_items is None:
            raise ValueError("give n_items (or features).")
        X = rng.standard_normal((n_items, n_features))
    if n_items is None:
        n_items = len(X) if X is not None else (
            None if true_values is None else len(true_values))
    if n_items is None:
        raise ValueError("give n_items, features or true_values.")
    if X is not None and len(X) != n_items:
        raise ValueError(f"features have {len(X)} rows for {n_items} items.")
    if true_values is not None:
        y_true = np.asarray(true_values, dtype=float)
        if y_true.shape != (n_items,) or np.any(~np.isfinite(y_true)):
            raise ValueError(f"true_values must be {n_items} finite numbers.")
    else:
        m = np.full(n_items, float(intercept))
        if X is not None:
            w = rng.standard_normal(X.shape[1]) if coef is None else np.asarray(coef, float)
            if w.shape != (X.shape[1],):
                raise ValueError(f"coef must have {X.shape[1]} entries, one per feature.")
            m = X @ w + intercept
            truth["coef"] = ((D.FEATURE,), w)
        truth["intercept"] = ((), float(intercept))
        truth["truth_precision"] = ((), float(truth_precision))
        y_true = m + rng.standard_normal(n_items) / np.sqrt(truth_precision)
    item_idx, ann_idx = C.simulation_design(n_items, J, labels_per_item, rng)
    if noise == "gaussian":
        eps = rng.standard_normal(len(item_idx))
    else:
        eps = rng.standard_t(nu, len(item_idx))
    y = sc[ann_idx] * y_true[item_idx] + beta[ann_idx] + eps / np.sqrt(tau[ann_idx])
    return _simulated_annotations(item_idx, ann_idx, y, y_true, X, truth)


def _simulated_annotations(item_idx, annotator_idx, labels, true_values, features,
                           truth: dict) -> Annotations:
    """Continuous counterpart of ``_common.simulated_annotations``."""
    n_annotators = len(truth["precision"][1])
    names = pd.Index([f"annotator_{j}" for j in range(n_annotators)])
    frame = pd.DataFrame({"item": item_idx, "annotator": names[annotator_idx],
                          "label": labels})
    ann = Annotations.from_frame(
        frame, features=features, continuous=True, duplicates="keep",
        gold=pd.Series(true_values, index=np.arange(len(true_values))))
    used = {d for dims, _ in truth.values() for d in dims}
    coords = {k: v for k, v in ann.coords().items() if k in used} | {D.ANNOTATOR: names}
    ds = xr.Dataset(truth, coords=coords)
    ds = ds.isel({D.ANNOTATOR: names.get_indexer(ann.annotators)}).assign_coords(
        {D.ANNOTATOR: ann.annotators})
    return replace(ann, truth=ds)
