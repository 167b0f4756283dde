"""Pieces every discrete-label family shares: the summed-out true label (in
PyTensor for the model, in NumPy for the EM), prior parsing, and the EM
output container."""

from __future__ import annotations

import inspect
import weakref
from dataclasses import replace
from functools import partial

import numpy as np
import pandas as pd
import pymc as pm
import pytensor.tensor as pt
import scipy.sparse as sp
import xarray as xr
from scipy.special import gammaln, xlog1py, xlogy

from crowd_models import _dims as D
from crowd_models import _trust
from crowd_models._blocks import posterior_from_joint  # noqa: F401 (the EMs' E-step)
from crowd_models._kernels import summed_out_truth
from crowd_models._text import listing
from crowd_models.data import Annotations

PROB_FLOOR = 1e-12
"""EM keeps probabilities within [PROB_FLOOR, 1 - PROB_FLOOR] (flat priors can
put an estimate on the boundary)."""

# ------------------------------------------------------------ validation


def dirichlet_rows(confusion: np.ndarray, counts: np.ndarray, spread: float) -> np.ndarray:
    """Dirichlet rows that approximate the posterior of each confusion row whose
    logits have a Normal prior of sd ``spread`` (pooled Dawid-Skene, the community
    model), given the final E-step's expected counts: ``alpha = c * (N + kappa)``.

    In softmax coordinates the row's Laplace precision at its mode ``c`` is
    ``N (diag c - c c^T) + I / s^2`` (``N`` the row's expected labels, ``s`` the
    spread); a Dirichlet with mean ``c`` and total ``a`` has ``a (diag c - c c^T)``.
    ``kappa`` matches the prior's part by its trace on the (K - 1)-dimensional
    zero-sum space: ``(K - 1) / (s^2 (1 - sum c^2))``, so a row with few labels is
    as wide as the pooled prior lets it be, and one with many as its counts.
    """
    K = confusion.shape[-1]
    n = counts.sum(axis=-1, keepdims=True)
    curvature = np.maximum(1.0 - np.sum(confusion ** 2, axis=-1, keepdims=True), 1e-12)
    kappa = (K - 1) / (spread ** 2 * curvature)
    return confusion * (n + kappa)


def require_without_features(annotations, family: str, instead: str) -> None:
    """Categorical, identifiable annotations without features, for a family that has
    no classifier (``instead`` names where features can go)."""
    require_categorical(annotations, family)
    if annotations.features is not None:
        raise ValueError(
            f"{family} has no classifier, so it cannot use the annotations' "
            f"{annotations.n_features} features; fit annotations.with_features(None), or "
            f"{instead}.")
    _trust.check_identifiable(annotations, family)


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
            f"{annotations.n_classes}: {listing(annotations.classes)}."
        )


def require_binary(annotations, family: str, positive=None):
    """Check two-class annotations; return them with ``positive`` as the second class."""
    require_categorical(annotations, family, n_classes=2)
    return annotations if positive is None else annotations.with_positive(positive)


def parameter_pair(value, name: str, size: int | None, what: str = "(a, b) of Beta",
                   parts: str = "a and b") -> tuple[np.ndarray, np.ndarray]:
    """A prior's two parameters as float arrays, broadcast to ``(size,)`` (as given
    when ``size`` is None), with a ``TypeError``/``ValueError`` naming the prior."""
    try:
        a, b = value
    except (TypeError, ValueError):
        raise TypeError(
            f"{name} must be a pair {what} parameters (each a number or an array over "
            f"annotators), got {value!r}."
        ) from None
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if size is None:
        return a, b
    try:
        return np.broadcast_to(a, (size,)).copy(), np.broadcast_to(b, (size,)).copy()
    except ValueError:
        raise ValueError(
            f"{name}: {parts} must be numbers or arrays of length {size} (one per "
            f"annotator), got shapes {np.shape(value[0])} and {np.shape(value[1])}."
        ) from None


def beta_prior(value, name: str, size: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Parse a Beta prior given as (a, b); a and b broadcast over ``size``."""
    a, b = parameter_pair(value, name, size)
    if np.any(a < 1) or np.any(b < 1):
        raise ValueError(
            f"{name} needs a >= 1 and b >= 1 so that the posterior mode exists (a = b = 1 is "
            f"flat, i.e. plain maximum likelihood); got a={a}, b={b}."
        )
    return a, b


def dirichlet_prior(value, name: str, shape: tuple) -> np.ndarray:
    """Parse Dirichlet concentrations (a number, or an array that broadcasts to
    ``shape``, the last axis the classes), each >= 1 so that the mode exists."""
    try:
        arr = np.broadcast_to(np.asarray(value, dtype=float), shape).copy()
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} must be a number or an array of Dirichlet concentrations that broadcasts "
            f"to {shape}, got {value!r}.") from None
    if np.any(~np.isfinite(arr)) or np.any(arr < 1):
        raise ValueError(
            f"{name} concentrations must be finite and >= 1 so that the posterior mode exists "
            f"(1 is flat: plain maximum likelihood); got {value!r}.")
    return arr


def beta_logpdf_nojac(x, a, b):
    """Beta log density (the form find_MAP maximises: no Jacobian term)."""
    return (
        xlogy(a - 1, x) + xlog1py(b - 1, -x)
        + gammaln(a + b) - gammaln(a) - gammaln(b)
    )


# ------------------------------------------------------- the family protocol
EM_CONTROLS = frozenset({"tol", "max_iter", "accelerate", "start", "classifier",
                         "regularization", "chunk_items"})
"""Keywords of a family's ``em`` that steer the iteration, not the model (a
black-box ``classifier`` replaces the model's GLM in the M-step, and
``regularization`` tunes it): the EM that ``fit_map`` compares with gets their
defaults."""


def attach_protocol(model: pm.Model, family: str, variant: str = "", *, start,
                    em=None, annotations=None, arguments=None) -> pm.Model:
    """Attach the family protocol to a factory's model and return it.

    ``model.crowd_family`` is ``(family, variant)``, which ``fit_map``,
    ``sample`` and ``laplace_fit`` copy into the fit's attrs, with
    ``model.crowd_feature_scaling`` (:func:`feature_scaling` of ``annotations``);
    ``model.crowd_start`` is ``start``. Given the family's ``em``, ``model.crowd_em`` is ``em`` on
    ``annotations`` with every keyword of ``em`` but :data:`EM_CONTROLS` taken
    from ``arguments``, the factory's arguments (its ``locals()``): a prior
    added to ``em`` and ``build_model`` reaches fit_map's EM comparison by
    itself, and one added to ``em`` alone is a ``TypeError`` when the model is
    built.
    """
    model.crowd_family = (family, variant)
    model.crowd_start = start
    if annotations is not None:
        model.crowd_feature_scaling = feature_scaling(annotations)
    if em is not None:
        names = [p.name for p in inspect.signature(em).parameters.values()
                 if p.kind is p.KEYWORD_ONLY and p.name not in EM_CONTROLS]
        missing = [name for name in names if name not in arguments]
        if missing:
            raise TypeError(f"{family}.em takes {', '.join(missing)}, which {family}.build_model "
                            f"does not: add them to build_model so that fit_map's EM "
                            f"comparison uses the model's own.")
        model.crowd_em = partial(em, annotations, **{name: arguments[name] for name in names})
    return model


# ------------------------------------------------- the summed-out true label


def add_label_likelihood(log_confusion, log_prior, annotations: Annotations) -> None:
    """Register the labels' likelihood with the true class summed out, and its
    posterior (:func:`add_item_likelihood`'s variables) for a confusion model.

    ``log_confusion`` is (annotator, true_class, label_class): each annotation
    contributes ``log_confusion[annotator, :, label]`` to its item's row
    (repeated labels simply add), and ``log_prior`` (true_class,), (1,
    true_class) or (item, true_class) is added once per item. One operation
    (:func:`_kernels.summed_out_truth`) gives each item's log-sum-exp and
    softmax over classes from one pass over the table; every size symbolic, so
    data sets with other numbers of items, annotators or classes share the
    compiled functions.
    """
    idx = long_table_data(annotations)
    n_annotators, n_true, n_labels = (log_confusion.shape[a] for a in range(3))
    # rows (annotator, label), columns true class
    per_pair = log_confusion.transpose(0, 2, 1).reshape((n_annotators * n_labels, n_true))
    # computed from the codes at each evaluation (pm.set_data on them is seen), in
    # their int32 (half the memory traffic of int64)
    pair = idx["annotator_idx"] * pt.cast(n_labels, "int32") + idx["label_idx"]
    n_items = pm.modelcontext(None).dim_lengths[D.ITEM]
    total, prob = summed_out_truth(per_pair, log_prior, idx["item_idx"], pair, n_items)
    _register_item_likelihood(total, prob, annotations)


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
            # one dtype whatever the source (loaders, select, simulate): the compiled
            # functions are cached by input types
            pm.Data(name, np.asarray(values, dtype=np.int32), dims=D.ANNOTATION)
    return {name: model[name] for name in names}


_LABEL_COUNTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""Annotations -> (the code arrays it was built from, its :func:`_label_counts`
matrix). Weak keys: an entry goes with its Annotations object (``eq=False``, so
hashed by identity; ``dataclasses.replace`` makes a new object, hence a new
entry)."""


def _label_counts(annotations: Annotations) -> sp.csr_array:
    """The long table as a sparse (item, annotator * n_classes + label) count
    matrix X (CSR, float64; a repeated label counts 2), built once per
    Annotations object and cached: EM reuses it at every iteration.

    ``X @ A`` sums, for each item, the rows ``A[annotator * K + label]`` of its
    labels; ``X.T @ B`` sums, for each (annotator, label), the rows of ``B`` of
    the items so labelled. Both replace a gather and a scatter-add over the
    annotation rows by one sparse product (several times faster at 10^6 labels).
    """
    source = (annotations.item_idx, annotations.annotator_idx, annotations.labels)
    cached = _LABEL_COUNTS.get(annotations)
    if cached is not None and all(a is b for a, b in zip(cached[0], source, strict=True)):
        return cached[1]
    k = annotations.n_classes
    shape = (annotations.n_items, annotations.n_annotators * k)
    index = np.int32 if max(*shape, len(source[0])) < np.iinfo(np.int32).max else np.int64
    items = np.asarray(source[0])
    cols = np.asarray(source[1], dtype=index)
    cols = cols * index(k) if cols is source[1] else np.multiply(cols, k, out=cols)
    cols += source[2]  # one array of the table's length, not three
    if np.all(items[1:] >= items[:-1]):
        # rows in item order (from_frame's of a file in item order, select's, the
        # simulations'): the CSR arrays at once, without the COO copy, which was
        # the EM's peak at 10^7 labels (about 0.1 GB)
        indptr = np.zeros(shape[0] + 1, dtype=index)
        np.cumsum(np.bincount(items, minlength=shape[0]), out=indptr[1:])
        matrix = sp.csr_array((np.ones(len(cols)), cols, indptr), shape=shape)
    else:
        # counted in float32 (exact to 2^24 repeats of a cell) and widened once
        # summed: float64 ones beside the COO and CSR copies were the build's peak
        rows = np.asarray(items, dtype=index)  # the codes themselves where they are int32
        matrix = sp.csr_array((np.ones(len(rows), dtype=np.float32), (rows, cols)),
                              shape=shape)
        del rows
    del cols
    matrix.sum_duplicates()  # canonical: sorted column indices, one entry per cell
    matrix.data = matrix.data.astype(np.float64, copy=False)
    _LABEL_COUNTS[annotations] = (source, matrix)
    return matrix


def expected_counts(annotations: Annotations, prob) -> np.ndarray:
    """(annotator, true_class, label_class) expected numbers of labels l given by
    annotator j to items of class k, under the (item, true_class) posterior
    ``prob``: one product with the cached :func:`_label_counts` matrix."""
    J, K = annotations.n_annotators, annotations.n_classes
    counts = _label_counts(annotations).T @ np.asarray(prob, dtype=float)  # (J*K, K_true)
    return counts.reshape(J, K, K).transpose(0, 2, 1)


def item_joint_np(log_confusion: np.ndarray, annotations: Annotations) -> np.ndarray:
    """The (item, true_class) float64 sums of ``log_confusion[annotator, :,
    label]`` over each item's annotation rows (0 for an item without labels),
    as one product with :func:`_label_counts`: in NumPy, the sums that
    :func:`add_label_likelihood` takes in the graph.

    ``log_confusion`` is (annotator, true_class, label_class). Only the entries
    of (annotator, label) pairs that occur are read, as in a gather.
    """
    log_confusion = np.asarray(log_confusion, dtype=float)
    J, K = annotations.n_annotators, annotations.n_classes
    if log_confusion.shape != (J, K, K):
        raise ValueError(f"log_confusion must be (annotator, true_class, label_class) = "
                         f"{(J, K, K)}, got {log_confusion.shape}.")
    # rows (annotator, label) in the count matrix's column order, columns true class
    per_pair = log_confusion.transpose(0, 2, 1).reshape(J * K, K)
    return _label_counts(annotations) @ per_pair


def add_item_likelihood(joint, annotations: Annotations) -> None:
    """Register the per-item marginal likelihood and the true-label posterior.

    The observed variable ``item_labels`` (dims item) holds each item's number of
    labels; its log-density is the item's log marginal likelihood with the true
    class summed out, so ``pm.compute_log_likelihood`` and ``az.loo`` work per
    item. ``item_class_prob`` is the posterior of the hidden true class.
    """
    _register_item_likelihood(pt.logsumexp(joint, axis=-1),
                              pt.special.softmax(joint, axis=-1), annotations)


def _item_total_logp(value, total):
    return total


def _register_item_likelihood(total, prob, annotations: Annotations) -> None:
    n_per_item = np.bincount(annotations.item_idx, minlength=annotations.n_items)
    pm.CustomDist(D.OBSERVED, total, logp=_item_total_logp, signature="()->()",
                  observed=n_per_item, dims=D.ITEM)
    pm.Deterministic("item_class_prob", prob, dims=(D.ITEM, D.TRUE_CLASS))
    pm.Data("n_labels", annotations.n_labels(), dims=D.ANNOTATOR)


def dirichlet_logpdf_nojac(x, alpha, axis=-1):
    """Dirichlet log density over ``axis`` (summed over the rest), no Jacobian."""
    return float(np.sum(
        np.sum(xlogy(alpha - 1, x), axis=axis)
        + gammaln(np.sum(alpha, axis=axis)) - np.sum(gammaln(alpha), axis=axis)
    ))


# ------------------------------------------- a black-box classifier in the EM
CLASSIFIER_FLOOR = 1e-300
"""The E-step's floor on a black-box classifier's probabilities: a class it
gives probability 0 (or never saw) keeps a finite log prior, so the posterior
stays defined (and that class's posterior is about 0)."""


def check_classifier(classifier, annotations: Annotations, family: str) -> None:
    """A ``classifier=`` that the EM can fit to soft labels, on annotations with
    features; a ``TypeError``/``ValueError`` naming the fix otherwise."""
    if annotations.features is None:
        raise ValueError("classifier= needs annotations with features (the classifier "
                         "learns the truth from them); give Annotations features=, or leave "
                         f"classifier=None for {family} without features.")
    if not (callable(getattr(classifier, "fit", None))
            and callable(getattr(classifier, "predict_proba", None))):
        raise TypeError(f"classifier must be a scikit-learn classifier with fit and "
                        f"predict_proba, got {type(classifier).__name__}.")
    last = last_step(classifier)
    fitted = classifier if last is None else last[1]
    try:
        parameters = inspect.signature(fitted.fit).parameters.values()
    except (TypeError, ValueError):  # a fit without a signature: let it try
        return
    if not any(p.name == "sample_weight" or p.kind is p.VAR_KEYWORD for p in parameters):
        raise TypeError(
            f"{type(fitted).__name__}.fit takes no sample_weight, which the EM needs to "
            f"fit the soft labels (each item once per class, weighted by its posterior); "
            f"use a classifier whose fit accepts sample_weight (LogisticRegression, "
            f"HistGradientBoostingClassifier, RandomForestClassifier, ...).")


def last_step(classifier):
    """The ``(name, estimator)`` last step of a scikit-learn ``Pipeline`` (anything
    with a list of such ``steps``), or None for a plain estimator."""
    steps = getattr(classifier, "steps", None)
    if isinstance(steps, list) and steps and isinstance(steps[-1], tuple) and len(steps[-1]) == 2:
        return steps[-1]
    return None


def fit_weighted(classifier, features, targets, weight):
    """``classifier.fit(features, targets)`` with each row's ``weight`` as its
    ``sample_weight``; a ``Pipeline`` takes it as ``<last step>__sample_weight``
    (its own ``fit`` routes no ``sample_weight``)."""
    last = last_step(classifier)
    if last is None:
        return classifier.fit(features, targets, sample_weight=weight)
    return classifier.fit(features, targets, **{f"{last[0]}__sample_weight": weight})


def classifier_log_prior(classifier, features: np.ndarray, n_classes: int) -> np.ndarray:
    """(item, class) log prior of the truth from a fitted classifier's
    ``predict_proba``, its columns placed by ``classifier.classes_`` (the class
    codes it was fitted on); a class it never saw gets :data:`CLASSIFIER_FLOOR`."""
    proba = np.asarray(classifier.predict_proba(features), dtype=float)
    seen = np.asarray(getattr(classifier, "classes_", np.arange(proba.shape[-1])))
    if (proba.shape != (len(features), len(seen)) or seen.dtype.kind not in "iu"
            or np.any((seen < 0) | (seen >= n_classes))):
        raise ValueError(
            f"{type(classifier).__name__}.predict_proba gave shape {proba.shape} for classes_ "
            f"{listing(seen)}; the EM fits it to the class codes 0..{n_classes - 1} and needs "
            f"one column per class it saw, in the order of classes_.")
    prior = np.zeros((len(features), n_classes))
    prior[:, seen] = proba
    return np.log(np.maximum(prior, CLASSIFIER_FLOOR))


CLASSIFIER_TURNS = 10
""":func:`classifier_em` stops when the labels' log-likelihood has turned
(a rise followed by a fall, or the reverse, each by more than
:data:`CLASSIFIER_TURN_SIZE`) this many times (benchmarks/README.md,
``classifier_stopping.py``, has the leave-one-design-out table behind the
rule)."""

CLASSIFIER_TURN_SIZE = 1e-6
"""The smallest change of the labels' log-likelihood, relative to its size,
that counts as a rise or a fall for :data:`CLASSIFIER_TURNS`: a nat in a
million. A classifier fitted to a tolerance (a logistic regression's L-BFGS)
jitters the likelihood far below that near its fixed point; a tree's jumps
are of a nat or more."""


def classifier_em(annotations: Annotations, classifier, prob: np.ndarray, rates, log_confusion,
                  *, tol: float, max_iter: int):
    """Raykar et al.'s EM with a black-box classifier as the prior of the truth
    (sec. 6.3), for any family whose annotators' M-step takes soft labels.

    From the (item, class) soft labels ``prob``, each step fits the annotators'
    parameters (``rates(annotations_without_features, prob)``, a dict) and the
    classifier to the soft labels (every item once per class, that class's code
    as its target, weighted by its posterior), then takes the E-step with
    ``log_confusion(params)`` (annotator, true_class, label_class) and the
    classifier's probabilities as the prior. A black-box M-step need not
    maximise anything exactly, so it stops when the labels' marginal
    log-likelihood moves by less than ``tol`` (plain EM, no extrapolation): it
    has converged. (That likelihood need not rise at every step: a penalised
    classifier's EM climbs the posterior, and the likelihood can fall
    steadily on the way to its fixed point.) A step-function classifier (a
    tree, a forest) can instead make it go up and down by a nat or so for
    ever, so the EM also stops when the likelihood has turned
    :data:`CLASSIFIER_TURNS` times by more than :data:`CLASSIFIER_TURN_SIZE`,
    or at ``max_iter``. Returns (params, prob, per-item log-likelihood, steps
    run, converged, attrs) of the last step, ``attrs`` with the reason
    (``stop_reason``, what :func:`crowd_models._trust.check_converged` warns
    with) where it stopped on the turns; the classifier is left fitted to the
    soft labels of the step before.
    """
    if isinstance(max_iter, bool) or not isinstance(max_iter, int | np.integer) or max_iter < 1:
        raise ValueError(f"max_iter must be a whole number >= 1, got {max_iter!r}.")
    X = annotations.features
    K = annotations.n_classes
    rows, targets = np.tile(X, (K, 1)), np.repeat(np.arange(K), len(X))
    plain = annotations.with_features(None)
    previous, n_iter, rising, turns = -np.inf, 0, None, 0
    while n_iter < max_iter and turns < CLASSIFIER_TURNS:
        n_iter += 1
        params = rates(plain, prob)
        fit_weighted(classifier, rows, targets, np.asarray(prob, dtype=float).T.ravel())
        prior = classifier_log_prior(classifier, X, K)
        prob, item_ll = posterior_from_joint(
            item_joint_np(log_confusion(params), annotations) + prior, overwrite=True)
        loglik = float(item_ll.sum())
        if abs(loglik - previous) < tol:
            return params, prob, item_ll, n_iter, True, {}
        if n_iter > 1 and abs(loglik - previous) > CLASSIFIER_TURN_SIZE * abs(loglik):
            turns += rising is not None and rising != (loglik > previous)
            rising = loglik > previous
        previous = loglik
    if turns < CLASSIFIER_TURNS:
        return params, prob, item_ll, n_iter, False, {}
    reason = (f"the labels' log-likelihood went up and down {CLASSIFIER_TURNS} times (each "
              f"change more than {CLASSIFIER_TURN_SIZE:g} of it) without moving less than "
              f"tol={tol:g}: {type(classifier).__name__}'s fit does not settle (a tree's or a "
              f"forest's jumps between step functions), and more steps would not settle it. "
              f"A smoother classifier or a larger tol settles.")
    return params, prob, item_ll, n_iter, False, {"stop_reason": reason}


# --------------------------------------------------------- the EM output


def feature_scaling(annotations: Annotations) -> dict:
    """``feature_center`` and ``feature_scale`` of standardised annotations
    (:meth:`Annotations.standardized`), as a fit's attrs; none for features as
    given. :func:`crowd_models.predict` applies them to new items."""
    if getattr(annotations, "feature_center", None) is None:  # also the chunked containers
        return {}
    return {"feature_center": np.asarray(annotations.feature_center, dtype=float),
            "feature_scale": np.asarray(annotations.feature_scale, dtype=float)}


def scaled_features(fit, features) -> np.ndarray:
    """New items' (item, feature) matrix on the scale the fit was trained on: less
    the fit's ``feature_center``, over its ``feature_scale`` where it has them."""
    X = np.asarray(features, dtype=float)
    if "feature_center" not in fit.attrs:
        return X
    return (X - np.asarray(fit.attrs["feature_center"], dtype=float)) / np.asarray(
        fit.attrs["feature_scale"], dtype=float)


def em_dataset(annotations: Annotations, params: dict, dims: dict, *, extra=None,
               attrs=None, supports=None) -> xr.Dataset:
    """An EM fit as a Dataset with the posterior's names, dims and coords.

    ``params`` become (chain=1, draw=1, ...) variables so that EM, MAP and NUTS
    fits line up in ArviZ; ``extra`` (name -> (dims, values)) are stored as is.
    Standardised annotations' feature centre and scale go into the attrs
    (:func:`feature_scaling`). The fit is checked (:mod:`crowd_models._trust`):
    a ``UserWarning`` when ``attrs["converged"]`` is 0, when an estimate named in ``supports`` sits
    on the edge of its support, and when annotators the fit puts below chance
    give a large share of the labels.
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
    ds = xr.Dataset(data, coords=coords, attrs={**feature_scaling(annotations), **(attrs or {})})
    family = str(ds.attrs.get("family", "the")).replace("_", "-")
    _trust.check_converged(ds.attrs, family)
    if supports:
        _trust.check_boundary(params, supports, f"the {family} EM")
    _trust.check_chance(ds, annotations.n_labels(), what=f"the {family} EM")
    return ds


def zerosum_normal_logpdf(x, sd) -> float:
    """PyMC's ZeroSumNormal log density, zero sum over the last axis (no Jacobian);
    0 for ``sd = inf`` (a flat zero-sum prior)."""
    if not np.isfinite(sd):
        return 0.0
    x = np.asarray(x, dtype=float)
    dof = x.size / x.shape[-1] * (x.shape[-1] - 1)
    return float(-0.5 * np.sum((x / sd) ** 2) - (np.log(sd) + 0.5 * np.log(2 * np.pi)) * dof)


def classifier_precisions(coef_precision, intercept_precision, d: int) -> tuple[np.ndarray, float]:
    """(gamma, tau): a classifier's coefficient precision as a (d, d) matrix (a
    number, one per feature, or a symmetric matrix; all zeros is flat, else
    positive definite) and its intercept precision, one number (0: flat); a
    ValueError naming the problem otherwise. :func:`gaussian_coef` takes gamma."""
    gamma = check_positive_precision(coef_precision, "coef_precision")
    if gamma.ndim == 0:
        gamma = np.eye(d) * gamma
    elif gamma.ndim == 1:
        if gamma.shape != (d,):
            raise ValueError(f"coef_precision has {gamma.size} entries for {d} features.")
        gamma = np.diag(gamma)
    elif gamma.shape != (d, d) or not np.allclose(gamma, gamma.T):
        raise ValueError(
            f"coef_precision as a matrix must be symmetric ({d}, {d}), got shape "
            f"{gamma.shape}."
        )
    diag_zero = np.diag(gamma) == 0
    if diag_zero.any() and not np.all(gamma == 0):
        raise ValueError(
            "coef_precision mixes flat (0) and proper entries; use all zeros (flat) or a "
            "positive definite precision."
        )
    if not diag_zero.any() and np.linalg.eigvalsh(gamma).min() <= 0:
        raise ValueError("coef_precision must be positive definite (or all zeros for flat).")
    tau = check_positive_precision(intercept_precision, "intercept_precision")
    if tau.ndim != 0:
        raise ValueError(f"intercept_precision must be one number, got {intercept_precision!r}.")
    return gamma, float(tau)


def gaussian_coef(gamma: np.ndarray, name: str = "coef", dims=D.FEATURE):
    """The classifier's coefficients ~ N(0, ``gamma``^-1) as a PyMC variable in the
    model being built: flat where ``gamma`` is all zeros, independent Normals
    where it is diagonal, a multivariate Normal otherwise."""
    if np.all(gamma == 0):
        return pm.Flat(name, dims=dims)
    if np.allclose(gamma, np.diag(np.diag(gamma))):
        return pm.Normal(name, 0.0, sigma=1 / np.sqrt(np.diag(gamma)), dims=dims)
    return pm.MvNormal(name, mu=np.zeros(len(gamma)), tau=gamma, dims=dims)


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
        frame, classes=list(classes), features=features, duplicates="keep",
        gold=pd.Series(class_names[true_codes], index=np.arange(len(true_codes))))
    used = {d for dims, _ in truth.values() for d in dims}
    coords = {k: v for k, v in ann.coords().items() if k in used} | {D.ANNOTATOR: names}
    ds = xr.Dataset(truth, coords=coords)
    # the Annotations order annotators by first appearance: follow it
    ds = ds.isel({D.ANNOTATOR: names.get_indexer(ann.annotators)}).assign_coords(
        {D.ANNOTATOR: ann.annotators})
    return replace(ann, truth=ds)
