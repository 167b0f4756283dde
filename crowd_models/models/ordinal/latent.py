"""The latent ordinal model (beyond the paper).

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
(``_common.add_label_likelihood``), so ``item_labels`` is the item's marginal likelihood
of its labels and LOO compares it with Dawid-Skene fairly. There is no
EM for this variant: fit it with ``cm.fit_map`` (it starts at
``model.crowd_start``) or ``cm.sample``.

With features the hidden level has a classifier in place of
``prevalence``: an ordered logit, ``P(z_i <= k | x_i) =
sigmoid(truth_cutpoints[k] - x_i . coef)`` (``coef`` (feature) ~ N(0, 1 /
``coef_precision``) on the standardised features, ordered
``truth_cutpoints`` (threshold) ~ N(0, 1 / ``intercept_precision``)), whatever
the annotators' ``link``. ``coef_precision="auto"`` (the default) is
:func:`~crowd_models.models.ordinal.cumulative.pooled_precision` of the
annotations: the cumulative variant's evidence precisions pooled over its
thresholds (that EM at its own default priors), chosen without gold. Leaving
one simulated set out on the new items' log loss, every fold chose it over
precision 1 (the default before) and over the latent model's own evidence
(benchmarks/README.md, ``ordinal_prior.py --variant latent``).
:func:`crowd_models.predict` scores new items (:func:`predict_draws`).

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
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.dist_math import normal_lcdf
from scipy.special import expit
from scipy.stats import norm

from crowd_models import _dims as D
from crowd_models.baselines import majority_vote
from crowd_models.data import Annotations
from crowd_models.models import _common as C
from crowd_models.models import _evidence, _registry
from crowd_models.models.ordinal.cumulative import pooled_precision
from crowd_models.models.ordinal.levels import DEFAULT_PRIORS, LINKS, level_coords, require_levels


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
                   link, coef_precision, intercept_precision) -> dict:
    if link not in LINKS:
        raise ValueError(f"link={link!r} is not one of {LINKS}.")
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
    classifier = {}  # the truth's ordered logit, with features
    if ann.features is not None:
        classifier["gamma"], classifier["tau"] = C.classifier_precisions(
            coef_precision, intercept_precision, ann.n_features)
    return dict(
        **classifier,
        prevalence=np.broadcast_to(prev, (K,)).copy(),
        bias_sd=float(_positive(bias_sd, "bias_sd")),
        noise_shape=_positive(shape, "noise_prior shape", (ann.n_annotators,)),
        noise_rate=_positive(rate, "noise_prior rate", (ann.n_annotators,)),
        spacing=_at_least_one(spacing_prior, "spacing_prior", K - 1),
        width_sd=float(_positive(width_sd, "width_sd")),
        link=link,
    )


def predict_draws(post, features: np.ndarray) -> np.ndarray:
    """P(truth = each level | x) under each draw of a latent fit's ordered logit:
    (sample, item, level). ``post``: the posterior (``coef``, ``truth_cutpoints``);
    ``features``: (item, feature), standardised as the fit's.
    :func:`crowd_models.predict` checks the features and summarises the draws.

    Examples
    --------
    >>> import numpy as np
    >>> import xarray as xr
    >>> from crowd_models.models.ordinal import latent
    >>> post = xr.Dataset({"coef": (("chain", "draw", "feature"), [[[1.0, -0.5]]]),
    ...                    "truth_cutpoints": (("chain", "draw", "threshold"), [[[-1.0, 1.0]]])})
    >>> latent.predict_draws(post, np.array([[0.0, 0.0], [2.0, 0.0]]))
    """
    sample = (D.CHAIN, D.DRAW)
    coef = post["coef"].stack(sample=sample).transpose("sample", D.FEATURE).values
    cuts = post["truth_cutpoints"].stack(sample=sample).transpose("sample", D.THRESHOLD).values
    below = expit(cuts[:, None, :] - (coef @ np.asarray(features, dtype=float).T)[..., None])
    edges = [np.zeros((*below.shape[:-1], 1)), below, np.ones((*below.shape[:-1], 1))]
    return np.diff(np.concatenate(edges, axis=-1), axis=-1)


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


def _log_levels_pt(z, link):
    """log P(level = l), (..., K), of a variable whose K - 1 cut points stand at
    ``z`` (..., K - 1) in the link's standard units: F(z_0), F(z_l) - F(z_l-1),
    1 - F(z_K-2)."""
    return pt.concatenate([_log_cdf_pt(z[..., :1], link),
                           _log_interval_pt(z[..., :-1], z[..., 1:], link),
                           _log_cdf_pt(-z[..., -1:], link)], axis=-1)


def _latent_log_confusion_pt(bias, noise, cuts, locs, link):
    """(annotator, true_class, label_class) log confusion; ``cuts`` (annotator or 1, T),
    ``locs`` (K,) the true levels' locations."""
    z = (cuts[:, None, :] - locs[None, :, None] - bias[:, None, None]) / noise[:, None, None]
    return _log_levels_pt(z, link)


def _log_truth_prior_pt(ann, pri, start):
    """log P(level | x), (item, level): the truth's ordered logit, ``coef``
    (feature) and ordered ``truth_cutpoints`` (threshold)."""
    X = pm.Data("features", ann.features, dims=(D.ITEM, D.FEATURE))
    coef, tau = C.gaussian_coef(pri["gamma"]), pri["tau"]
    ordered = dict(transform=pm.distributions.transforms.ordered,
                   initval=start["truth_cutpoints"], dims=D.THRESHOLD)
    cuts = (pm.Flat("truth_cutpoints", **ordered) if tau == 0 else
            pm.Normal("truth_cutpoints", 0.0, sigma=1 / np.sqrt(tau), **ordered))
    return _log_levels_pt(cuts[None, :] - (X @ coef)[:, None], "logit")


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
    start = {"bias": bias, "noise": np.ones(J), "level_spacing": np.full(K - 1, 1.0 / (K - 1))}
    if ann.features is None:
        start["prevalence"] = prev
    else:  # the shares' cumulative logits, no slope
        below = np.clip(np.cumsum(prev)[:-1], 1e-3, 1 - 1e-3)
        start["coef"] = np.zeros(ann.n_features)
        start["truth_cutpoints"] = np.log(below / (1 - below)) + 1e-3 * np.arange(K - 1)
    if annotator_cutpoints:
        start["log_width_ratio"] = np.zeros((J, K - 2))
    if guessing:
        start["guess_rate"] = np.full(J, 0.1)
    return start


def _level_locations_pt(spacing, K):
    return (K - 1) * pt.concatenate([pt.zeros(1), pt.cumsum(spacing)])


def _build_latent(ann, pri, annotator_cutpoints, guessing, start) -> pm.Model:
    K = ann.n_classes
    with pm.Model(coords=level_coords(ann)) as model:
        if ann.features is None:
            log_prior = pt.log(pm.Dirichlet("prevalence", a=pri["prevalence"],
                                            dims=D.TRUE_CLASS))
        else:
            log_prior = _log_truth_prior_pt(ann, pri, start)
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
        C.add_label_likelihood(log_conf, log_prior, ann)
    return model


def build_model(
    annotations: Annotations,
    *,
    prevalence_prior=DEFAULT_PRIORS["prevalence_prior"],
    bias_sd=DEFAULT_PRIORS["bias_sd"],
    noise_prior=DEFAULT_PRIORS["noise_prior"],
    spacing_prior=DEFAULT_PRIORS["spacing_prior"],
    width_sd=DEFAULT_PRIORS["width_sd"],
    link: str = "logit",
    annotator_cutpoints: bool = False,
    guessing: bool = False,
    guess_prior=DEFAULT_PRIORS["guess_prior"],
    coef_precision=DEFAULT_PRIORS["coef_precision"],
    intercept_precision=DEFAULT_PRIORS["intercept_precision"],
) -> pm.Model:
    """The latent ordinal model in PyMC (the model of
    :func:`crowd_models.models.ordinal.build_model` with ``variant="latent"``).

    Parameters
    ----------
    annotations : Annotations
        Classes 1..K (K >= 2), with or without features.
    prevalence_prior, bias_sd, noise_prior, spacing_prior, width_sd : optional
        As in :func:`crowd_models.models.ordinal.build_model`.
    coef_precision, intercept_precision : optional
        With features: the prior precision of the truth's ordered-logit
        coefficients (a number, one per feature, a matrix, or "auto": the default,
        :func:`~crowd_models.models.ordinal.cumulative.pooled_precision`) and of
        its cut points ``truth_cutpoints`` (0: flat).
    link, annotator_cutpoints, guessing, guess_prior : optional
        As in :func:`crowd_models.models.ordinal.build_model`.

    Returns
    -------
    pymc.Model
        The true level summed out: ``item_labels`` is each item's marginal likelihood.

    Examples
    --------
    >>> from crowd_models.models.ordinal import latent
    >>> model = latent.build_model(cm.datasets.load_anesthesia(), guessing=True)
    """
    require_levels(annotations, "the latent ordinal model")
    _registry.refuse_unused("ordinal", "latent", annotations.features is not None,
                            prevalence_prior=prevalence_prior, coef_precision=coef_precision,
                            intercept_precision=intercept_precision)
    annotations = annotations.standardized()
    if _evidence.is_auto(coef_precision) and annotations.features is not None:
        coef_precision = pooled_precision(annotations)
    pri = _latent_priors(annotations, prevalence_prior, bias_sd, noise_prior, spacing_prior,
                         width_sd, link, coef_precision, intercept_precision)
    pri["guess"] = C.beta_prior(guess_prior, "guess_prior", annotations.n_annotators)
    if annotator_cutpoints and annotations.n_classes < 3:
        raise ValueError(
            f"annotator_cutpoints=True needs at least 3 levels (it lets each annotator widen "
            f"or narrow the interior levels), got {annotations.n_classes}; drop the option.")
    start = _latent_start(annotations, pri, annotator_cutpoints, guessing)
    model = _build_latent(annotations, pri, bool(annotator_cutpoints), bool(guessing), start)
    return C.attach_protocol(model, "ordinal", "latent", start=start, annotations=annotations)


# ---------------------------------------------------------------- simulate
def simulated_confusion(bias, noise, level_spacing, guess_rate, log_width_ratio,
                        n_classes, link):
    """The latent variant's confusion and the truth it implies (see
    :func:`crowd_models.models.ordinal.simulate`, whose arguments these are).

    Parameters
    ----------
    bias, noise : array (annotator,)
        The annotators' biases and noise.
    level_spacing : array (K - 1,) or None
        The gaps between the levels (None: equal gaps for ``n_classes`` levels).
    guess_rate, log_width_ratio : array or None
        The options, or None.
    n_classes : int or None
        The number of levels when ``level_spacing`` is None.
    link : {"logit", "probit"}
        The noise's distribution.

    Returns
    -------
    (numpy.ndarray, dict)
        The (annotator, true_class, label_class) confusion and the truth
        (name -> (dims, values)).

    Examples
    --------
    >>> from crowd_models.models.ordinal import latent
    >>> conf, truth = latent.simulated_confusion([0.0], [0.5], None, None, None, 3, "logit")
    """
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

