"""Pieces every discrete-label family shares: the summed-out true label (in
PyTensor for the model, in NumPy for the EM), prior parsing, and the EM
output container."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pymc as pm
import pytensor.tensor as pt
import xarray as xr
from scipy.special import gammaln, logsumexp, xlog1py, xlogy

from crowd_models import _dims as D
from crowd_models.data import Annotations

PROB_FLOOR = 1e-12
"""EM keeps probabilities within [PROB_FLOOR, 1 - PROB_FLOOR] (flat priors can
put an estimate on the boundary)."""

# ------------------------------------------------------------ validation


def require_categorical(annotations, family: str, n_classes: int | None = None) -> None:
    if not isinstance(annotations, Annotations):
        raise TypeError(
            f"{family} expects an Annotations object (crowd_models.Annotations.from_frame(...)), "
            f"got {type(annotations).__name__}."
        )
    if annotations.continuous:
        raise ValueError(f"{family} needs categorical labels; these annotations are continuous.")
    if n_classes is not None and annotations.n_classes != n_classes:
        raise ValueError(
            f"{family} needs exactly {n_classes} classes, these annotations have "
            f"{annotations.n_classes}: {list(annotations.classes)}."
        )


def beta_prior(value, name: str, size: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Parse a Beta prior given as (a, b); a and b broadcast over ``size``."""
    try:
        a, b = value
    except (TypeError, ValueError):
        raise TypeError(
            f"{name} must be a pair (a, b) of Beta parameters (each a number or an array over "
            f"annotators), got {value!r}."
        ) from None
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if size is not None:
        try:
            a = np.broadcast_to(a, (size,)).copy()
            b = np.broadcast_to(b, (size,)).copy()
        except ValueError:
            raise ValueError(
                f"{name}: a and b must be numbers or arrays of length {size} (one per "
                f"annotator), got shapes {np.shape(value[0])} and {np.shape(value[1])}."
            ) from None
    if np.any(a < 1) or np.any(b < 1):
        raise ValueError(
            f"{name} needs a >= 1 and b >= 1 so that the posterior mode exists (a = b = 1 is "
            f"flat, i.e. plain maximum likelihood); got a={a}, b={b}."
        )
    return a, b


def beta_logpdf_nojac(x, a, b):
    """Beta log density (the form find_MAP maximises: no Jacobian term)."""
    return (
        xlogy(a - 1, x) + xlog1py(b - 1, -x)
        + gammaln(a + b) - gammaln(a) - gammaln(b)
    )


# ------------------------------------------------- the summed-out true label


def item_joint(log_confusion, annotations: Annotations):
    """(item, true_class) sums of per-annotation log-likelihoods, PyTensor.

    ``log_confusion`` is (annotator, true_class, label_class). Each annotation
    row contributes ``log_confusion[annotator, :, label]`` to its item's row;
    repeated labels simply add.
    """
    idx = long_table_data(annotations)
    per_row = log_confusion.transpose(0, 2, 1)[idx["annotator_idx"], idx["label_idx"]]
    n_items = pm.modelcontext(None).dim_lengths[D.ITEM]
    return pt.zeros((n_items, annotations.n_classes))[idx["item_idx"]].inc(per_row)


def long_table_data(annotations: Annotations) -> dict:
    """The long table's integer codes as ``pm.Data`` (dims annotation), created once
    per model. As data rather than graph constants they keep the compiled code
    independent of the data set (PyTensor's cache then serves every data set of
    the same family) and land in ``constant_data``."""
    model = pm.modelcontext(None)
    names = ("item_idx", "annotator_idx", "label_idx")
    if names[0] not in model.named_vars:
        for name, values in zip(names, (annotations.item_idx, annotations.annotator_idx,
                                        annotations.labels), strict=True):
            pm.Data(name, values, dims=D.ANNOTATION)
    return {name: model[name] for name in names}


def item_joint_np(log_confusion: np.ndarray, annotations: Annotations) -> np.ndarray:
    """NumPy twin of :func:`item_joint`."""
    per_row = log_confusion[annotations.annotator_idx, :, annotations.labels]
    k = annotations.n_classes
    out = np.zeros((annotations.n_items, k))
    for c in range(k):  # k is small; bincount is the fast scatter-add
        out[:, c] = np.bincount(annotations.item_idx, weights=per_row[:, c],
                                minlength=annotations.n_items)
    return out


def _item_marginal_logp(value, joint):
    return pt.logsumexp(joint, axis=-1)


def add_item_likelihood(joint, annotations: Annotations) -> None:
    """Register the per-item marginal likelihood and the true-label posterior.

    The observed variable ``labels`` (dims item) holds each item's number of
    labels; its log-density is the item's log marginal likelihood with the true
    class summed out, so ``pm.compute_log_likelihood`` and ``az.loo`` work per
    item. ``item_class_prob`` is the posterior of the hidden true class.
    """
    n_per_item = np.bincount(annotations.item_idx, minlength=annotations.n_items)
    pm.CustomDist(
        "labels", joint, logp=_item_marginal_logp, signature="(k)->()",
        observed=n_per_item, dims=D.ITEM,
    )
    pm.Deterministic(
        "item_class_prob", pt.special.softmax(joint, axis=-1), dims=(D.ITEM, D.TRUE_CLASS)
    )
    pm.Data("n_labels", annotations.n_labels(), dims=D.ANNOTATOR)


def run_em(joint_fn, m_step, params: dict, *, tol: float, max_iter: int):
    """Iterate E-step (``joint_fn(params)`` -> (item, true_class) log joint) and
    M-step (``m_step(item_class_prob, previous)`` -> params) until no parameter
    moves by more than ``tol``. Returns (params, n_iter, converged)."""
    if not (tol > 0 and max_iter >= 0):
        raise ValueError(f"need tol > 0 and max_iter >= 0, got tol={tol}, max_iter={max_iter}.")
    n_iter, converged = 0, False
    while n_iter < max_iter:
        n_iter += 1
        prob, _ = posterior_from_joint(joint_fn(params))
        new = m_step(prob, params)
        change = max(float(np.max(np.abs(np.asarray(new[k]) - np.asarray(params[k]))))
                     for k in new)
        if not np.isfinite(change):
            raise FloatingPointError(
                "EM produced non-finite parameters; use priors with a, b > 1 (the defaults)."
            )
        params = new
        if change < tol:
            converged = True
            break
    return params, n_iter, converged


def dirichlet_logpdf_nojac(x, alpha, axis=-1):
    """Dirichlet log density over ``axis`` (summed over the rest), no Jacobian."""
    return float(np.sum(
        np.sum(xlogy(alpha - 1, x), axis=axis)
        + gammaln(np.sum(alpha, axis=axis)) - np.sum(gammaln(alpha), axis=axis)
    ))


def posterior_from_joint(joint: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(item_class_prob, per-item log marginal likelihood) from the joint."""
    ll = logsumexp(joint, axis=1)
    return np.exp(joint - ll[:, None]), ll


# --------------------------------------------------------- the EM output


def em_dataset(annotations: Annotations, params: dict, dims: dict, *, extra=None,
               attrs=None) -> xr.Dataset:
    """An EM fit as a Dataset with the posterior's names, dims and coords.

    ``params`` become (chain=1, draw=1, ...) variables so that EM, MAP and NUTS
    fits line up in ArviZ; ``extra`` (name -> (dims, values)) are stored as is.
    """
    coords = {k: v for k, v in annotations.coords().items()}
    data = {}
    for name, value in params.items():
        value = np.asarray(value, dtype=float)
        data[name] = ((D.CHAIN, D.DRAW, *dims[name]), value[None, None])
    for name, (vdims, value) in (extra or {}).items():
        data[name] = (vdims, np.asarray(value))
    used = {d for v in data.values() for d in v[0]}
    coords = {k: v for k, v in coords.items() if k in used}
    coords[D.CHAIN] = [0]
    coords[D.DRAW] = [0]
    return xr.Dataset(data, coords=coords, attrs=dict(attrs or {}))


def zerosum_normal_logpdf(x, sd) -> float:
    """PyMC's ZeroSumNormal log density, zero sum over the last axis (no Jacobian);
    0 for ``sd = inf`` (a flat zero-sum prior)."""
    if not np.isfinite(sd):
        return 0.0
    x = np.asarray(x, dtype=float)
    dof = x.size / x.shape[-1] * (x.shape[-1] - 1)
    return float(-0.5 * np.sum((x / sd) ** 2) - (np.log(sd) + 0.5 * np.log(2 * np.pi)) * dof)


def check_positive_precision(value, name: str):
    arr = np.asarray(value, dtype=float)
    if np.any(~np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name} must be finite and >= 0 (0 = flat prior), got {value!r}.")
    return arr


# -------------------------------------------------------------- simulation


def simulation_design(n_items: int, n_annotators: int, labels_per_item, rng):
    """(item_idx, annotator_idx) of a design: every annotator labels every item, or
    each item gets ``labels_per_item`` annotators drawn without replacement."""
    if labels_per_item is None:
        return (np.repeat(np.arange(n_items), n_annotators),
                np.tile(np.arange(n_annotators), n_items))
    if not 1 <= labels_per_item <= n_annotators:
        raise ValueError(f"labels_per_item must be between 1 and {n_annotators}.")
    ranks = np.argsort(rng.random((n_items, n_annotators)), axis=1)[:, :labels_per_item]
    return np.repeat(np.arange(n_items), labels_per_item), ranks.ravel()


def simulated_annotations(item_idx, annotator_idx, label_codes, true_codes, classes,
                          features, truth: dict) -> Annotations:
    """Annotations from simulated codes, with gold = the true classes and ``truth``
    (name -> (dims, values), annotator axis in simulation order) as a Dataset."""
    n_annotators = next(len(v) for d, v in truth.values() if d and d[0] == D.ANNOTATOR)
    names = pd.Index([f"annotator_{j}" for j in range(n_annotators)])
    class_names = np.asarray(classes, dtype=object)
    frame = pd.DataFrame({"item": item_idx, "annotator": names[annotator_idx],
                          "label": class_names[label_codes]})
    ann = Annotations.from_frame(
        frame, classes=list(classes), features=features,
        gold=pd.Series(class_names[true_codes], index=np.arange(len(true_codes))))
    used = {d for dims, _ in truth.values() for d in dims}
    coords = {k: v for k, v in ann.coords().items() if k in used} | {D.ANNOTATOR: names}
    ds = xr.Dataset(truth, coords=coords)
    # the Annotations order annotators by first appearance: follow it
    ds = ds.isel({D.ANNOTATOR: names.get_indexer(ann.annotators)}).assign_coords(
        {D.ANNOTATOR: ann.annotators})
    return replace(ann, truth=ds)
