"""Two-coin model: per-annotator sensitivity and specificity, binary truth.

Raykar, Yu, Zhao, Jerebko, Florin, Hermosillo Valadez, Bogoni, Moy (2009),
"Supervised learning from multiple experts: whom to trust when everyone lies
a bit", ICML. Annotator j reports the positive class with probability
``sensitivity[j]`` when the truth is positive and the negative class with
probability ``specificity[j]`` when it is negative. The truth is either a
logistic-regression classifier of the item's features,
``P(z_i = 1) = sigmoid(coef . x_i + intercept)``, or, without features, a
``prevalence``.

The second class of ``annotations.classes`` is the positive one.

One module, three views of the same model: :func:`build_model` (PyMC),
:func:`em` (the paper's MAP-EM) and :func:`simulate`.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import xarray as xr
from scipy.special import expit, log_expit

from crowd_models import _dims as D
from crowd_models import _trust
from crowd_models.baselines import majority_vote
from crowd_models.data import Annotations
from crowd_models.models import _chunked, _em, _evidence, _registry, _tuning
from crowd_models.models import _common as C

__all__ = ["build_model", "em", "simulate", "decoupled", "predict", "predict_draws",
           "parse_priors", "majority_vote_start", "DEFAULT_PRIORS"]

DEFAULT_PRIORS = _registry.default_priors("two_coin")
"""Weakly informative defaults. Beta(3, 2) on sensitivity and specificity
(mode 2/3) favours annotators better than chance, which also breaks the
mirror symmetry (sens, spec, truth) -> (1 - sens, 1 - spec, 1 - truth); with
a, b > 1 the posterior mode is interior even for an annotator who is never
wrong. Gaussian priors: N(0, 1 / alpha) per coefficient of the standardised
features, alpha chosen by the crowd labels' evidence (``coef_precision="auto"``;
:func:`em`), and N(0, 10^2) on the intercept. Flat settings, (1, 1) and
precision 0, give plain maximum likelihood."""

FLAT_PRIORS = dict(
    sensitivity_prior=(1.0, 1.0),
    specificity_prior=(1.0, 1.0),
    prevalence_prior=(1.0, 1.0),
    coef_precision=0.0,
    intercept_precision=0.0,
)


# ------------------------------------------------------------------ priors
def _priors(annotations: Annotations, sensitivity_prior, specificity_prior, prevalence_prior,
            coef_precision, intercept_precision) -> dict:
    J = annotations.n_annotators
    p = {
        "sens": C.beta_prior(sensitivity_prior, "sensitivity_prior", J),
        "spec": C.beta_prior(specificity_prior, "specificity_prior", J),
        "prev": C.beta_prior(prevalence_prior, "prevalence_prior"),
    }
    if annotations.features is not None:
        d = annotations.n_features
        if _evidence.is_auto(coef_precision):
            raise ValueError("coef_precision='auto' (the default) is chosen by an EM (em(), "
                             "build_model(), decoupled()); here give a number, e.g. the "
                             "precision em() chose, em(annotations).attrs['coef_precision'].")
        p["gamma"], p["tau"] = C.classifier_precisions(coef_precision, intercept_precision, d)
    return p


def _gaussian_logpdf(x, precision):
    if np.all(precision == 0):
        return 0.0
    precision = np.atleast_2d(precision)
    x = np.atleast_1d(x)
    _, logdet = np.linalg.slogdet(precision)
    return 0.5 * (logdet - x @ precision @ x - len(x) * np.log(2 * np.pi))


# ------------------------------------------------------- shared M/E pieces
def _log_confusion(sens, spec):
    """(annotator, true_class, label_class) log probabilities; class 1 positive.

    Probabilities are kept within [1e-12, 1 - 1e-12] so that a maximum-likelihood
    fit (flat priors) with an annotator who is never wrong stays finite.
    """
    sens = np.clip(sens, C.PROB_FLOOR, 1 - C.PROB_FLOOR)
    spec = np.clip(spec, C.PROB_FLOOR, 1 - C.PROB_FLOOR)
    return np.log(np.stack([
        np.stack([spec, 1 - spec], axis=-1),
        np.stack([1 - sens, sens], axis=-1),
    ], axis=1))


def _log_prior_classes(params, features):
    if features is None:
        prev = params["prevalence"]
        prev = np.clip(prev, C.PROB_FLOOR, 1 - C.PROB_FLOOR)
        return np.array([np.log1p(-prev), np.log(prev)])[None, :]
    eta = features @ params["coef"] + params["intercept"]
    return np.stack([log_expit(-eta), log_expit(eta)], axis=1)


def _joint(annotations, params):
    log_conf = _log_confusion(params["sensitivity"], params["specificity"])
    return C.item_joint_np(log_conf, annotations) + _log_prior_classes(
        params, annotations.features)


def _log_prior_params(params, pri):
    lp = C.beta_logpdf_nojac(params["sensitivity"], *pri["sens"]).sum()
    lp += C.beta_logpdf_nojac(params["specificity"], *pri["spec"]).sum()
    if "prevalence" in params:
        lp += C.beta_logpdf_nojac(params["prevalence"], *pri["prev"])
    else:
        lp += _gaussian_logpdf(params["coef"], pri["gamma"])
        lp += _gaussian_logpdf(params["intercept"], pri["tau"])
    return float(lp)


def _log_posterior(annotations, params, pri) -> float:
    """The log posterior EM climbs and find_MAP maximises (no Jacobian): the
    marginal log-likelihood of the labels plus the log prior."""
    _, item_ll = C.posterior_from_joint(_joint(annotations, params), overwrite=True)
    return float(item_ll.sum()) + _log_prior_params(params, pri)


_EM_SUPPORTS = {"sensitivity": "unit", "specificity": "unit", "prevalence": "unit"}
"""Supports the accelerated EM keeps the parameters in (``coef``/``intercept``: none)."""


def _fit_logistic(features, target, gamma, tau, start=None, tol=1e-12, max_iter=100):
    """MAP logistic regression on soft labels by Newton-Raphson (Raykar eq. 16).

    Maximises sum_i [t_i log s(eta_i) + (1 - t_i) log s(-eta_i)]
    - 1/2 coef' gamma coef - 1/2 tau intercept^2.
    """
    n, d = features.shape
    X = np.hstack([features, np.ones((n, 1))])
    P = np.zeros((d + 1, d + 1))
    P[:d, :d] = gamma
    P[d, d] = tau
    theta = np.zeros(d + 1) if start is None else np.asarray(start, dtype=float).copy()
    for _ in range(max_iter):
        p = expit(X @ theta)
        grad = X.T @ (target - p) - P @ theta
        hess = (X * (p * (1 - p))[:, None]).T @ X + P
        try:
            step = np.linalg.solve(hess, grad)
        except np.linalg.LinAlgError:
            step = np.linalg.lstsq(hess, grad, rcond=None)[0]
        theta = theta + step
        if np.max(np.abs(step)) < tol:
            break
    return theta[:d], theta[d]


def _counts(annotations, mu) -> np.ndarray:
    """(annotator, true_class, label_class) expected label counts given P(z_i = 1) =
    ``mu``: the sums Raykar's M-step (eq. 14) and the Beta posteriors (sec. 7.1)
    read."""
    y = annotations.labels.astype(float)
    j = annotations.annotator_idx
    m = mu[annotations.item_idx]
    J = annotations.n_annotators
    pos = np.bincount(j, weights=m * y, minlength=J)              # z = 1, y = 1
    pos_total = np.bincount(j, weights=m, minlength=J)
    neg = np.bincount(j, weights=(1 - m) * (1 - y), minlength=J)  # z = 0, y = 0
    neg_total = np.bincount(j, weights=1 - m, minlength=J)
    return np.stack([np.stack([neg, neg_total - neg], axis=1),
                     np.stack([pos_total - pos, pos], axis=1)], axis=1)


def _rates(counts, pri) -> dict:
    """Raykar eq. (14): the MAP sensitivity and specificity given the expected counts."""
    a1, b1 = pri["sens"]
    a0, b0 = pri["spec"]
    pos_num = counts[:, 1, 1] + a1 - 1
    pos_den = counts[:, 1].sum(axis=1) + a1 + b1 - 2
    neg_num = counts[:, 0, 0] + a0 - 1
    neg_den = counts[:, 0].sum(axis=1) + a0 + b0 - 2
    with np.errstate(invalid="ignore", divide="ignore"):
        return {"sensitivity": np.where(pos_den > 0, pos_num / pos_den, 0.5),
                "specificity": np.where(neg_den > 0, neg_num / neg_den, 0.5)}


def _prevalence(positive, n_items, pri) -> float:
    a, b = pri["prev"]
    return (positive + a - 1) / (n_items + a + b - 2)


def _m_step(annotations, mu, pri, previous=None):
    """Raykar eqs. (14) and (16): MAP updates given P(z_i = 1) = mu."""
    params = _rates(_counts(annotations, mu), pri)
    if annotations.features is None:
        params["prevalence"] = _prevalence(mu.sum(), len(mu), pri)
    else:
        start = None
        if previous is not None:
            start = np.append(previous["coef"], previous["intercept"])
        params["coef"], params["intercept"] = _fit_logistic(
            annotations.features, mu, pri["gamma"], pri["tau"], start=start)
    return params


def _beta_posterior(counts, pri):
    """Raykar sec. 7.1: Beta(a + sum mu y, b + sum mu (1 - y)) for sensitivity, and
    likewise with 1 - mu and 1 - y for specificity, from the expected counts."""
    a1, b1 = pri["sens"]
    a0, b0 = pri["spec"]
    return {
        "sensitivity_alpha": a1 + counts[:, 1, 1],
        "sensitivity_beta": b1 + counts[:, 1, 0],
        "specificity_alpha": a0 + counts[:, 0, 0],
        "specificity_beta": b0 + counts[:, 0, 1],
    }


_DIMS = {
    "sensitivity": (D.ANNOTATOR,),
    "specificity": (D.ANNOTATOR,),
    "prevalence": (),
    "coef": (D.FEATURE,),
    "intercept": (),
    "item_class_prob": (D.ITEM, D.TRUE_CLASS),
}


def _start(annotations, pri):
    """The majority-vote start shared by :func:`em` and :func:`build_model`."""
    mu = majority_vote(annotations).values[:, 1]
    return _m_step(annotations, mu, pri)


def parse_priors(annotations: Annotations, **priors) -> dict:
    """The priors as the arrays the model, the EM and the start use.

    Parameters
    ----------
    annotations : Annotations
        Two classes.
    **priors
        The prior keywords of :func:`build_model`; missing ones take
        :data:`DEFAULT_PRIORS`. Bad values raise the family's messages.

    Returns
    -------
    dict
        Parsed priors (Beta pairs over annotators, the classifier's precisions).
        The cumulative ordinal model, whose binary problems are two-coin ones,
        shares them.

    Examples
    --------
    >>> from crowd_models.models.two_coin import parse_priors
    >>> parse_priors(cm.datasets.load_rte(), sensitivity_prior=(5, 2))["sens"][:3]
    """
    return _priors(annotations, **{**DEFAULT_PRIORS, **priors})


def majority_vote_start(annotations: Annotations, **priors) -> dict:
    """The start of :func:`em` and ``fit_map``: the M-step applied to the soft
    majority vote.

    Parameters
    ----------
    annotations : Annotations
        Two classes.
    **priors
        The prior keywords of :func:`build_model`.

    Returns
    -------
    dict
        Parameter values by variable name (``sensitivity``, ``specificity`` and
        ``prevalence`` or ``coef``/``intercept``).

    Examples
    --------
    >>> from crowd_models.models.two_coin import majority_vote_start
    >>> majority_vote_start(cm.datasets.load_rte())["sensitivity"][:5]
    """
    return _start(annotations, parse_priors(annotations, **priors))


# ----------------------------------------------------------------- factory
_POSITIVE_CLASS = np.array([[False, True]])
"""(1, class): True at the positive class (code 1)."""


def _log_confusion_pt(sens, spec):
    """PyTensor twin of :func:`_log_confusion` (without its clipping): each entry
    picked by a ``switch`` over the broadcast probabilities, then one log. Stacked
    (``Join``, and ``Split`` in the gradient) the same numbers cost nutpie about
    4 s more of numba compile on a fresh machine (DEVELOPING.md)."""
    true_pos, label_pos = _POSITIVE_CLASS[:, :, None], _POSITIVE_CLASS[:, None, :]
    sens, spec = sens[:, None, None], spec[:, None, None]
    return pt.log(pt.switch(true_pos, pt.switch(label_pos, sens, 1 - sens),
                            pt.switch(label_pos, 1 - spec, spec)))


def build_model(
    annotations: Annotations,
    *,
    sensitivity_prior=DEFAULT_PRIORS["sensitivity_prior"],
    specificity_prior=DEFAULT_PRIORS["specificity_prior"],
    prevalence_prior=DEFAULT_PRIORS["prevalence_prior"],
    coef_precision=DEFAULT_PRIORS["coef_precision"],
    intercept_precision=DEFAULT_PRIORS["intercept_precision"],
    positive=None,
) -> pm.Model:
    r"""The two-coin model as a PyMC model, true labels summed out.

    .. math::

        z_i &\sim \mathrm{Bernoulli}(p_i), \quad
            p_i = \text{prevalence} \text{ or } \sigma(x_i^\top \text{coef}
            + \text{intercept}) \\
        y_{ij} \mid z_i = 1 &\sim \mathrm{Bernoulli}(\text{sensitivity}_j), \quad
        y_{ij} \mid z_i = 0 \sim \mathrm{Bernoulli}(1 - \text{specificity}_j) \\
        \text{sensitivity}_j &\sim \mathrm{Beta}(a, b), \quad
        \text{specificity}_j \sim \mathrm{Beta}(a', b'), \quad
        \text{coef} \sim \mathcal{N}(0, \Gamma^{-1})

    and the likelihood of item i sums :math:`z_i` out.

    Parameters
    ----------
    annotations : Annotations
        Two classes (the second is positive); with features, the truth is a logistic
        regression on them.
    sensitivity_prior, specificity_prior : (a, b)
        Beta priors; a and b may be arrays over annotators.
    prevalence_prior : (a, b)
        Beta prior on P(truth positive), used without features.
    coef_precision : "auto", number, array (feature,) or matrix (feature, feature)
        Gaussian prior precision Gamma of the classifier weights on the
        standardised features; 0 = flat. ``"auto"`` (default): the precision
        :func:`em` chooses by the crowd labels' evidence for these annotations
        (an EM run when the model is built; its number is
        ``em(annotations).attrs["coef_precision"]``).
    intercept_precision : number
        Gaussian prior precision of the intercept; 0 = flat.
    positive : optional
        The positive class, one of the two classes (default: the second);
        see :meth:`Annotations.with_positive`.

    Returns
    -------
    pymc.Model
        Variables: ``sensitivity``, ``specificity`` (annotator); ``prevalence`` or
        ``coef`` (feature) and ``intercept``; deterministic ``item_class_prob``
        (item, true_class); observed ``item_labels`` (item) whose log-density is each
        item's marginal log-likelihood. ``model.crowd_start`` holds the
        majority-vote start that :func:`em` uses (``fit_map`` starts there).

    Examples
    --------
    >>> from crowd_models.models import two_coin
    >>> model = two_coin.build_model(cm.datasets.load_rte())
    >>> fit = cm.fit_map(model)
    """
    annotations = C.require_binary(annotations, "the two-coin model",
                                   positive).standardized()
    _trust.check_identifiable(annotations, "the two-coin model")
    _registry.refuse_unused("two_coin", "", annotations.features is not None,
                            prevalence_prior=prevalence_prior, coef_precision=coef_precision,
                            intercept_precision=intercept_precision)
    coef_precision = _evidence.resolved(coef_precision, annotations, lambda: em(
        annotations, sensitivity_prior=sensitivity_prior, specificity_prior=specificity_prior,
        prevalence_prior=prevalence_prior, coef_precision=coef_precision,
        intercept_precision=intercept_precision))
    pri = _priors(annotations, sensitivity_prior, specificity_prior, prevalence_prior,
                  coef_precision, intercept_precision)
    start = _start(annotations, pri)
    with pm.Model(coords=annotations.coords()) as model:
        sens = pm.Beta("sensitivity", *pri["sens"], dims=D.ANNOTATOR)
        spec = pm.Beta("specificity", *pri["spec"], dims=D.ANNOTATOR)
        log_conf = _log_confusion_pt(sens, spec)
        if annotations.features is None:
            prev = pm.Beta("prevalence", *pri["prev"])
            log_prior = pt.switch(_POSITIVE_CLASS, pt.log(prev), pt.log1p(-prev))
        else:
            X = pm.Data("features", annotations.features, dims=(D.ITEM, D.FEATURE))
            coef, tau = C.gaussian_coef(pri["gamma"]), pri["tau"]
            if tau == 0:
                intercept = pm.Flat("intercept")
            else:
                intercept = pm.Normal("intercept", 0.0, sigma=1 / np.sqrt(tau))
            eta = X @ coef + intercept
            log_prior = pt.stack([-pt.softplus(eta), -pt.softplus(-eta)], axis=1)
        C.add_label_likelihood(log_conf, log_prior, annotations)
    return C.attach_protocol(model, "two_coin", start=start, em=em, annotations=annotations,
                             arguments=locals())


# ---------------------------------------------------------------------- EM
def em(
    annotations: Annotations,
    *,
    sensitivity_prior=DEFAULT_PRIORS["sensitivity_prior"],
    specificity_prior=DEFAULT_PRIORS["specificity_prior"],
    prevalence_prior=DEFAULT_PRIORS["prevalence_prior"],
    coef_precision=DEFAULT_PRIORS["coef_precision"],
    intercept_precision=DEFAULT_PRIORS["intercept_precision"],
    positive=None,
    tol: float = 1e-10,
    max_iter: int = 10_000,
    accelerate: bool = True,
    classifier=None,
    regularization="auto",
    chunk_items: int | None = None,
) -> xr.Dataset:
    """Raykar et al.'s MAP-EM, from the majority-vote start.

    E-step: P(z_i = 1 | labels, parameters) (eqs. 15/17). M-step: closed-form
    sensitivity, specificity (eq. 14) and prevalence; Newton-Raphson for the
    classifier with its Gaussian prior (eq. 16). Iterates until an EM step
    moves no parameter by more than ``tol``; ``accelerate`` (default) extrapolates
    the EM steps by SQUAREM (``_em.iterate_em_map``), which reaches the same
    fixed point in fewer steps; ``accelerate=False`` runs plain EM. The priors
    and ``positive`` are those of :func:`build_model`.

    ``coef_precision="auto"`` (the default; with features) chooses the
    coefficients' precision alpha without gold, by empirical Bayes: EM at alpha, then MacKay's
    update ``alpha <- gamma / |coef|^2`` with gamma the coefficients the crowd's
    labels determine (Laplace, the labels' marginal likelihood), the next EM
    warm started, until alpha moves by less than 1%. The fit is the EM fit at
    that alpha (``attrs["coef_precision"]``, with ``evidence_rounds`` and
    ``evidence_converged``; ``n_iter`` counts every round's M-steps), the number
    :func:`build_model` at ``"auto"`` takes for MAP or NUTS. The features are standardised first
    (:meth:`~crowd_models.Annotations.standardized`; one precision for every
    coefficient), and :func:`crowd_models.predict` standardises new items the same
    way; a black-box ``classifier`` gets them as given.

    Returns a Dataset with the posterior's names and dims (chain=1, draw=1):
    ``sensitivity``, ``specificity``, ``prevalence`` or ``coef``/``intercept``,
    ``item_class_prob``; the Beta approximations of sec. 7.1
    (``sensitivity_alpha``/``_beta``, ``specificity_alpha``/``_beta``); and
    ``n_labels``. ``attrs`` hold ``log_posterior`` (the quantity find_MAP
    maximises), ``log_likelihood``, ``n_iter`` (M-steps run) and ``converged``.

    ``classifier``: any scikit-learn classifier with ``fit(X, y,
    sample_weight=...)`` and ``predict_proba`` in place of the logistic
    regression (Raykar sec. 6.3; needs features): each M-step fits it to the
    soft labels (every item twice, labelled 0 and 1, weighted by P(z_i = 0)
    and P(z_i = 1)), and the E-step takes its probabilities as the prior of
    the truth. The estimator passed is fitted in place, so its final state
    predicts new items (``classifier.predict_proba``). Plain EM (no
    extrapolation), stopped when the labels' marginal log-likelihood moves by
    less than ``tol`` (a black-box M-step need not maximise exactly); the fit
    has no ``coef``/``intercept`` and ``attrs["log_posterior"]`` is NaN (the
    classifier's own regularisation is not a prior here), with
    ``attrs["classifier"]`` naming it. ``fit_map`` and ``sample`` keep the
    logistic regression.

    ``regularization`` (with a ``classifier``): "auto" (the default) chooses
    the classifier's own regularisation parameter (a logistic regression's
    ``C``, an MLP's ``alpha``, a tree's ``max_depth``, ...) without gold before
    the EM, while it holds the class's default: the value whose clones, fitted
    to the labels-only soft labels on four fifths of the items, predict the
    other fifth's best (expected Brier score). None keeps it as given,
    ``{parameter: values}`` searches that grid; ``attrs["classifier_tuning"]``
    says what was done.

    Large crowds (no features): ``annotations`` may be a
    :class:`~crowd_models.large.ChunkedAnnotations` (read ``chunk_items`` items
    at a time; ``chunk_items=`` with ``Annotations`` builds one) or a
    :class:`~crowd_models.large.DaskAnnotations` (a pass per Dask partition,
    the item posteriors written to its ``posterior_path``), with the positive
    class second. Same EM, same fixed point.

    Examples
    --------
    >>> from crowd_models.models import two_coin
    >>> fit = two_coin.em(cm.datasets.load_rte())
    >>> cm.report.annotator_summary(fit).head()
    """
    if chunk_items is not None or not isinstance(annotations, Annotations):
        if classifier is not None:
            raise ValueError("the chunked and Dask two-coin EMs have no classifier (no "
                             "features); leave classifier=None.")
        return _large_em(annotations, chunk_items, positive,
                         (sensitivity_prior, specificity_prior, prevalence_prior), tol,
                         max_iter, accelerate)
    annotations = C.require_binary(annotations, "the two-coin model", positive)
    _trust.check_identifiable(annotations, "the two-coin model")
    _registry.refuse_unused("two_coin", "", annotations.features is not None,
                            classifier is not None, prevalence_prior=prevalence_prior,
                            coef_precision=coef_precision, intercept_precision=intercept_precision)
    auto = _evidence.is_auto(coef_precision)
    pri = _priors(annotations, sensitivity_prior, specificity_prior, prevalence_prior,
                  1.0 if auto else coef_precision, intercept_precision)
    _tuning.require_classifier(classifier, regularization)
    if classifier is not None:
        return _classifier_em(annotations, pri, classifier, regularization, tol, max_iter)
    annotations = annotations.standardized()
    attrs = {}
    if auto and annotations.features is not None:
        params, n_iter, converged, attrs = _evidence_em(annotations, pri, tol, max_iter,
                                                        accelerate)
        pri = {**pri, "gamma": np.eye(annotations.n_features) * attrs["coef_precision"]}
    else:
        params, n_iter, converged = _run_em(annotations, pri, _start(annotations, pri), tol,
                                            max_iter, accelerate)
    prob, item_ll = C.posterior_from_joint(_joint(annotations, params), overwrite=True)
    loglik = float(item_ll.sum())
    return _dataset(annotations, {**params, "item_class_prob": prob},
                    _counts(annotations, prob[:, 1]), pri, {
                        "log_likelihood": loglik,
                        "log_posterior": _log_posterior(annotations, params, pri),
                        "n_iter": n_iter, "converged": int(converged), **attrs})


def _dataset(annotations, values, counts, pri, attrs) -> xr.Dataset:
    """The EM's Dataset (in memory or chunked): its values, the Beta posteriors of
    the last E-step's expected ``counts``, and the labels per annotator."""
    extra = {k: ((D.ANNOTATOR,), v) for k, v in _beta_posterior(counts, pri).items()}
    extra["n_labels"] = ((D.ANNOTATOR,), annotations.n_labels())
    return C.em_dataset(annotations, values, _DIMS, extra=extra,
                        attrs={"family": "two_coin", "variant": "", "method": "em", **attrs},
                        supports=_EM_SUPPORTS)


def _large_em(annotations, chunk_items, positive, priors, tol, max_iter, accelerate):
    """:func:`em` a block of items (or a Dask partition) at a time (``_chunked``)."""
    annotations = _chunked.large_annotations(annotations, chunk_items, "the two-coin model", {})
    if annotations.n_classes != 2 or (positive is not None
                                      and positive != annotations.classes[1]):
        raise ValueError(f"the chunked two-coin EM needs two classes, the positive one second "
                         f"(classes {list(annotations.classes)}, positive={positive!r}); "
                         f"order the classes so, or use dawid_skene.em.")
    pri = _priors(annotations, *priors, None, None)
    fit = _chunked.run_em(
        annotations,
        m_step=lambda counts, totals, _: {**_rates(counts, pri), "prevalence": _prevalence(
            totals[1], totals.sum(), pri)},
        log_rates=lambda prm: (_log_confusion(prm["sensitivity"], prm["specificity"]),
                               _log_prior_classes(prm, None)[0]),
        log_prior=lambda prm: _log_prior_params(prm, pri), supports=_EM_SUPPORTS, tol=tol,
        max_iter=max_iter, accelerate=accelerate)
    values = dict(fit.params)
    if fit.item_class_prob is not None:
        values["item_class_prob"] = fit.item_class_prob
    ll = fit.sums.log_likelihood
    return _dataset(fit, values, fit.counts(), pri, {
        "log_likelihood": ll, "log_posterior": ll + _log_prior_params(fit.params, pri),
        "n_iter": fit.n_iter, "converged": int(fit.converged),
        "posterior_path": str(getattr(annotations, "posterior_path", None) or "")})


def _run_em(annotations, pri, start, tol, max_iter, accelerate):
    return _em.run_em(
        lambda prm: _joint(annotations, prm),
        lambda prob, prev: _m_step(annotations, prob[:, 1], pri, previous=prev),
        start, tol=tol, max_iter=max_iter,
        objective=lambda prm: _log_posterior(annotations, prm, pri), supports=_EM_SUPPORTS,
        accelerate=accelerate,
    )


def _evidence_em(annotations, pri, tol, max_iter, accelerate):
    """:func:`em` with ``coef_precision="auto"``: EM at a precision alpha, then
    alpha <- gamma / |coef|^2 with gamma from the crowd labels' curvature
    (``_evidence``), the next EM warm started, until alpha settles; in the
    features' row space when they outnumber the items."""
    X, basis = _evidence.row_space(annotations.features)
    reduced = annotations if basis is None else annotations.with_features(X)
    d = X.shape[1]

    def fit_at(alpha, previous):
        pri_a = {**pri, "gamma": np.eye(d) * alpha}
        start = _start(reduced, pri_a) if previous is None else previous[0]
        params, n_iter, converged = _run_em(reduced, pri_a, start, tol, max_iter, accelerate)
        prob, _ = C.posterior_from_joint(_joint(reduced, params), overwrite=True)
        prior = np.exp(_log_prior_classes(params, X))
        curvature = _evidence.averaged_curvature(X, prior, prob, alpha, free=slice(1, None))
        n_iter += 0 if previous is None else previous[1]
        return (params, n_iter, converged), _evidence.next_precision(
            X, curvature, params["coef"], alpha)

    (params, n_iter, converged), alpha, rounds, settled = _evidence.fixed_point(fit_at)
    if basis is not None:
        params = {**params, "coef": basis @ params["coef"]}
    return params, n_iter, converged, {"coef_precision": alpha, "evidence_rounds": rounds,
                                       "evidence_converged": int(settled)}


def _classifier_em(annotations, pri, classifier, regularization, tol, max_iter) -> xr.Dataset:
    """:func:`em` with a scikit-learn classifier as the prior of the truth."""
    C.check_classifier(classifier, annotations, "the two-coin model")
    steps = dict(rates=lambda plain, soft: _m_step(plain, soft[:, 1], pri),  # prevalence unused
                 log_confusion=lambda prm: _log_confusion(prm["sensitivity"],
                                                          prm["specificity"]),
                 tol=tol, max_iter=max_iter)
    start = majority_vote(annotations).values
    tuning = _tuning.tune(annotations, classifier, regularization, start, **steps)
    params, prob, item_ll, n_iter, converged, stop = C.classifier_em(annotations, classifier,
                                                                     start, **steps)
    params.pop("prevalence", None)
    return _dataset(annotations, {**params, "item_class_prob": prob},
                    _counts(annotations, prob[:, 1]), pri, {
                        "log_likelihood": float(item_ll.sum()), "log_posterior": float("nan"),
                        "classifier": repr(classifier), "n_iter": n_iter,
                        "converged": int(converged), **stop, **tuning})


def decoupled(annotations: Annotations, *, positive=None, **priors) -> xr.Dataset:
    """The two-stage baseline of sec. 6.4: estimate the truth without features,
    then fit the logistic regression to those soft labels.

    Returns the no-feature EM fit with ``coef`` and ``intercept`` added (fitted
    with ``coef_precision``/``intercept_precision``); ``positive`` as in
    :func:`build_model`. ``coef_precision="auto"`` picks the precision by the
    evidence of the soft labels (as :func:`em` does; ``attrs["coef_precision"]``).

    Examples
    --------
    >>> from crowd_models.models import two_coin
    >>> ann = two_coin.simulate([0.9, 0.8, 0.7], [0.9, 0.8, 0.7], n_items=300, n_features=3, rng=0)
    >>> two_coin.decoupled(ann)["coef"].values.ravel()
    """
    annotations = C.require_binary(annotations, "the two-coin model", positive)
    if annotations.features is None:
        raise ValueError("decoupled() needs annotations with features.")
    annotations = annotations.standardized()
    auto = _evidence.is_auto(priors.get("coef_precision", DEFAULT_PRIORS["coef_precision"]))
    pri = _priors(annotations, **{**DEFAULT_PRIORS, **priors,
                                  **({"coef_precision": 1.0} if auto else {})})
    first = em(annotations.with_features(None), **{
        k: v for k, v in priors.items() if k not in ("coef_precision", "intercept_precision")})
    mu = first["item_class_prob"].values[0, 0, :, 1]
    if auto:
        coef, intercept, alpha = _evidence.logistic_evidence(_fit_logistic, annotations.features,
                                                             mu, pri["tau"])
        first = first.assign_attrs(coef_precision=alpha)
    else:
        coef, intercept = _fit_logistic(annotations.features, mu, pri["gamma"], pri["tau"])
    coords = {D.FEATURE: annotations.feature_names}
    return first.assign(
        coef=((D.CHAIN, D.DRAW, D.FEATURE), coef[None, None]),
        intercept=((D.CHAIN, D.DRAW), np.reshape(intercept, (1, 1))),
    ).assign_coords(coords).assign_attrs(method="decoupled", **C.feature_scaling(annotations))


def predict_draws(post: xr.Dataset, features: np.ndarray) -> np.ndarray:
    """P(truth | x) under each draw of a fit's classifier: (sample, item, 2), the
    negative class first. ``post``: the fit's posterior (``coef``, ``intercept``;
    chain, draw); ``features``: (item, feature) in the fit's feature order.
    :func:`crowd_models.predict` checks the features and summarises the draws.

    Examples
    --------
    >>> from crowd_models.models import two_coin
    >>> ann = two_coin.simulate([0.9, 0.8, 0.7], [0.9, 0.8, 0.7], n_items=300, n_features=3, rng=0)
    >>> two_coin.predict_draws(two_coin.em(ann), ann.features).shape
    """
    coef = post["coef"].stack(sample=(D.CHAIN, D.DRAW)).transpose(D.FEATURE, "sample").values
    intercept = post["intercept"].stack(sample=(D.CHAIN, D.DRAW)).values
    positive = expit(np.asarray(features, dtype=float) @ coef + intercept).T
    return np.stack([1 - positive, positive], axis=-1)


def predict(fit, features) -> np.ndarray:
    """P(truth positive | x) from a fitted classifier, averaged over the fit's draws
    (:func:`crowd_models.predict` gives the intervals too, and checks the features'
    names).

    ``fit``: an EM Dataset or a MAP/NUTS DataTree with ``coef`` and ``intercept``;
    ``features``: (item, feature) array or DataFrame in the fit's feature order.

    Examples
    --------
    >>> from crowd_models.models import two_coin
    >>> ann = two_coin.simulate([0.9, 0.8, 0.7], [0.9, 0.8, 0.7], n_items=300, n_features=3, rng=0)
    >>> two_coin.predict(two_coin.em(ann), ann.features)[:5]
    """
    post = fit.posterior.to_dataset() if hasattr(fit, "posterior") else fit
    if "coef" not in post:
        raise ValueError("this fit has no classifier (it was fitted without features).")
    X = np.asarray(features, dtype=float)
    n = post.sizes[D.FEATURE]
    if X.ndim != 2 or X.shape[1] != n:
        raise ValueError(f"features must be (item, {n}) like the fit's, got shape {X.shape}.")
    return predict_draws(post, C.scaled_features(fit, X))[..., 1].mean(axis=0)


# ---------------------------------------------------------------- simulate
def simulate(
    sensitivity,
    specificity,
    *,
    n_items: int | None = None,
    features=None,
    n_features: int = 0,
    coef=None,
    intercept: float = 0.0,
    prevalence: float = 0.5,
    true_labels=None,
    labels_per_item: int | None = None,
    rng=None,
) -> Annotations:
    """Annotations drawn from the two-coin model, with the truth kept.

    The truth comes from ``true_labels`` if given (e.g. real gold labels, as in
    Raykar sec. 7.1), else from the classifier when there are features
    (``features`` given, or ``n_features`` standard-normal ones; ``coef`` drawn
    N(0, 1) if not given), else from ``prevalence``. Each item is labelled by
    every annotator, or by ``labels_per_item`` annotators drawn at random
    without replacement. ``gold`` holds the true labels; ``truth`` holds the
    true parameters.

    Examples
    --------
    >>> from crowd_models.models import two_coin
    >>> ann = two_coin.simulate([0.9, 0.8, 0.7], [0.85, 0.8, 0.75], n_items=500, rng=0)
    >>> ann.truth["sensitivity"].values
    """
    rng = np.random.default_rng(rng)
    sens = np.asarray(sensitivity, dtype=float)
    spec = np.asarray(specificity, dtype=float)
    if sens.ndim != 1 or sens.shape != spec.shape:
        raise ValueError("sensitivity and specificity must be 1-D and of the same length.")
    if np.any((sens < 0) | (sens > 1) | (spec < 0) | (spec > 1)):
        raise ValueError("sensitivity and specificity must lie in [0, 1].")
    J = len(sens)
    if features is not None:
        X = np.asarray(features, dtype=float)
    elif n_features:
        if n_items is None:
            raise ValueError("give n_items (or features).")
        X = rng.standard_normal((n_items, n_features))
    else:
        X = None
    if n_items is None:
        n_items = len(X) if X is not None else (None if true_labels is None else
                                                len(true_labels))
    if n_items is None:
        raise ValueError("give n_items, features or true_labels.")
    truth = {"sensitivity": ((D.ANNOTATOR,), sens), "specificity": ((D.ANNOTATOR,), spec)}
    if true_labels is not None:
        z = np.asarray(true_labels).astype(int)
        if z.shape != (n_items,) or not np.isin(z, (0, 1)).all():
            raise ValueError("true_labels must be n_items values in {0, 1}.")
    elif X is not None:
        w = rng.standard_normal(X.shape[1]) if coef is None else np.asarray(coef, dtype=float)
        z = (rng.random(n_items) < expit(X @ w + intercept)).astype(int)
        truth["coef"] = ((D.FEATURE,), w)
        truth["intercept"] = ((), float(intercept))
    else:
        z = (rng.random(n_items) < prevalence).astype(int)
        truth["prevalence"] = ((), float(prevalence))
    item_idx, ann_idx = C.simulation_design(n_items, J, labels_per_item, rng)
    p_pos = np.where(z[item_idx] == 1, sens[ann_idx], 1 - spec[ann_idx])
    y = (rng.random(len(item_idx)) < p_pos).astype(int)
    return C.simulated_annotations(item_idx, ann_idx, y, z, [0, 1], X, truth)
