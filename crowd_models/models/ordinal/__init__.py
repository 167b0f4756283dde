"""Ordinal labels: ordered classes 1 < 2 < ... < K.

Two models, chosen with ``variant=``, each in a module of its own:

``"cumulative"`` (:mod:`crowd_models.models.ordinal.cumulative`)
    Raykar et al.'s K - 1 binary problems "is the level above c?", each a
    two-coin model; its EM is K - 1 two-coin EMs, and its ``item_labels`` is a
    composite likelihood (not comparable with proper models of the labels).

``"latent"`` (:mod:`crowd_models.models.ordinal.latent`)
    A coherent model: each annotator perceives the true level on a latent
    scale with a bias and a noise, and reports the level whose interval holds
    it (options: per-annotator cut points, a guessing rate). No EM: fit it
    with ``cm.fit_map`` or ``cm.sample``.

What both share (the levels, the thresholds, the default priors) is in
:mod:`crowd_models.models.ordinal.levels`.

    per crossing, and NUTS chains did not mix).

Levels. The annotations' classes must be integers, increasing in the class
order: 1..K (the loaders ``load_web_search`` and ``load_anesthesia`` give
1..5 and 1..4), 0..K-1, or any other increasing codes; the thresholds are

One package, three views: :func:`build_model` (PyMC; it hands each keyword to
the variant's own ``build_model`` and refuses the other variant's),
:func:`em` (cumulative variant) and :func:`simulate`.
:func:`crowd_models.report.annotator_summary` gives the per-threshold
(cumulative) or bias/noise (latent) tables with intervals.
"""

from __future__ import annotations

import inspect
from dataclasses import replace

import numpy as np

from crowd_models import _dims as D
from crowd_models.data import Annotations
from crowd_models.models import _common as C
from crowd_models.models.ordinal import cumulative, latent
from crowd_models.models.ordinal.cumulative import (
    FLAT_PRIORS as FLAT_PRIORS,
)
from crowd_models.models.ordinal.cumulative import (
    NEGATIVE_TOL as NEGATIVE_TOL,
)
from crowd_models.models.ordinal.cumulative import (
    binary_annotations,
    class_probabilities,
    classifiers_predict,
    negative_differences,
    pooled_precision,
)
from crowd_models.models.ordinal.latent import (
    latent_confusion,
    level_locations,
    own_cutpoints,
)
from crowd_models.models.ordinal.levels import (
    DEFAULT_PRIORS,
    LINKS,
    VARIANTS,
    level_coords,
    require_levels,
    threshold_names,
)

__all__ = [
    "build_model", "em", "simulate", "class_probabilities", "classifiers_predict",
    "predict_draws", "pooled_precision",
    "negative_differences", "binary_annotations", "threshold_names", "require_levels",
    "latent_confusion", "level_locations", "own_cutpoints", "VARIANTS", "LINKS",
    "DEFAULT_PRIORS",
]

_MODULES = {"cumulative": cumulative, "latent": latent}


def _variant_module(variant: str):
    """The module of ``variant``, or a ValueError naming the variants."""
    if variant not in VARIANTS:
        raise ValueError(f"variant={variant!r} is not one of {VARIANTS}.")
    return _MODULES[variant]


def _keywords(function) -> dict:
    """A function's keyword-only parameters, by name."""
    return {name: p for name, p in inspect.signature(function).parameters.items()
            if p.kind is p.KEYWORD_ONLY}


def _refuse_other_variants(variant: str, keywords, function: str) -> None:
    """A ValueError for a keyword that another variant's ``function`` takes and
    ``variant``'s does not (a TypeError for one that no variant takes)."""
    own = _keywords(getattr(_MODULES[variant], function))
    for name in keywords:
        if name in own:
            continue
        others = [v for v, module in _MODULES.items()
                  if v != variant and name in _keywords(getattr(module, function, None) or _none)]
        if others:
            raise ValueError(
                f"{name} is a keyword of the {others[0]} ordinal variant, not of "
                f"variant={variant!r}: drop it, or pass variant={others[0]!r}.")
        raise TypeError(f"ordinal.{function}() got an unexpected keyword argument {name!r}.")


def _none(*args, **kwargs):
    """Stands for a function a variant lacks (the latent one has no EM)."""


def _dispatching_signature(function, name: str) -> inspect.Signature:
    """``function``'s signature with the keywords of every variant's ``name``
    (each once, in the variants' order) in place of ``**keywords``."""
    params = [p for p in inspect.signature(function).parameters.values()
              if p.kind is not p.VAR_KEYWORD]
    for module in _MODULES.values():
        for keyword in _keywords(getattr(module, name, None) or _none).values():
            if keyword.name not in {p.name for p in params}:
                params.append(keyword)
    return inspect.signature(function).replace(parameters=params)


def build_model(annotations: Annotations, *, variant: str = "cumulative", **keywords):
    r"""An ordinal model in PyMC, true level summed out (see the variants' modules).

    .. math::

        \text{cumulative:}\quad & \text{for each threshold } c:\;
            \mathbb{1}[z_i > c] \sim \mathrm{Bernoulli}(\text{threshold\_prevalence}_c),
            \\
        & \mathbb{1}[\ell_{ij} > c] \mid \mathbb{1}[z_i > c] = 1 \sim
            \mathrm{Bernoulli}(\text{sensitivity}_{jc}), \quad
          \mathbb{1}[\ell_{ij} \le c] \mid \mathbb{1}[z_i > c] = 0 \sim
            \mathrm{Bernoulli}(\text{specificity}_{jc}) \\
        \text{latent:}\quad & z_i \sim \mathrm{Categorical}(\text{prevalence})
          \text{ or } P(z_i \le k \mid x_i) = \sigma(\text{truth\_cutpoints}_k
            - x_i^\top \text{coef}), \quad
          P(\ell_{ij} \le l \mid z_i = k) = F\!\left(\frac{\text{cutpoints}_l
            - \text{level\_location}_k - \text{bias}_j}{\text{noise}_j}\right)

    with F the logistic or normal cdf; the cumulative likelihood is the
    product over thresholds (a composite likelihood).

    Parameters
    ----------
    annotations : Annotations
        Classes 1..K (K >= 2), with or without features.
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
        a number, array or matrix shared by the thresholds; ``"auto"`` (the
        default): each threshold's own precision, chosen by the evidence of
        its binary problem's crowd labels as :func:`two_coin.em
        <crowd_models.models.two_coin.em>` chooses it (the EM's
        ``attrs["coef_precision"]``, one per threshold; benchmarks/README.md,
        ordinal_prior.py, has the leave-one-set-out table behind the default).
        Latent with features: the precision of the truth's ordered-logit
        ``coef`` (a number, one per feature or a matrix; ``"auto"``: the
        gold-free :func:`pooled_precision` of the annotations, the cumulative
        variant's thresholds' evidence pooled) and of its ``truth_cutpoints``
        (``intercept_precision``).
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
        Latent: ``prevalence`` (true_class) or, with features, ``coef``
        (feature) and ordered ``truth_cutpoints`` (threshold); ``bias``, ``noise`` (annotator),
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
    module = _variant_module(variant)
    _refuse_other_variants(variant, keywords, "build_model")
    return module.build_model(annotations, **keywords)


build_model.__signature__ = _dispatching_signature(build_model, "build_model")


def em(annotations: Annotations, *, variant: str = "cumulative", **keywords):
    """The cumulative model's MAP-EM (:func:`crowd_models.models.ordinal.cumulative.em`,
    which describes its keywords and result).

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
    _variant_module(variant)
    return cumulative.em(annotations, **keywords)


em.__signature__ = _dispatching_signature(em, "em")


def predict_draws(post, features) -> np.ndarray:
    """P(truth = each level | x) under each draw of an ordinal fit's classifier,
    (sample, item, level): the cumulative variant's logistic regressions
    (:func:`crowd_models.models.ordinal.cumulative.predict_draws`) or the latent
    variant's ordered logit (:func:`crowd_models.models.ordinal.latent.predict_draws`),
    told apart by the latter's ``truth_cutpoints``.

    Examples
    --------
    >>> import numpy as np
    >>> from crowd_models.models import ordinal
    >>> ann = ordinal.simulate(variant="cumulative", sensitivity=[[0.9, 0.8]] * 4,
    ...                        specificity=[[0.8, 0.9]] * 4, n_items=200, rng=0)
    >>> ann = ann.with_features(ann.gold[:, None] + np.random.default_rng(0).normal(size=(200, 1)))
    >>> ordinal.predict_draws(ordinal.em(ann), ann.standardized().features[:3])
    """
    module = latent if "truth_cutpoints" in post else cumulative
    return module.predict_draws(post, features)


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
    _variant_module(variant)
    rng = np.random.default_rng(rng)
    if variant == "latent":
        conf, truth = latent.simulated_confusion(bias, noise, level_spacing, guess_rate,
                                                 log_width_ratio, n_classes, link)
    else:
        conf, truth = cumulative.simulated_confusion(sensitivity, specificity)
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
        {k: v for k, v in level_coords(ann).items() if k in ann.truth.dims}))
