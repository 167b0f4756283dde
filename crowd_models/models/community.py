"""Community model (CBCC): each annotator's confusion is drawn around one of a few
community confusions, the community unknown, K classes.

Venanzi, Guiver, Kazai, Kohli and Shokouhi (2014), "Community-based Bayesian
aggregation models for crowdsourcing", WWW. Annotator j belongs to community
c_j (drawn from ``community_share``); its confusion logits are Normal around
its community's, ``spread`` apart. One model holds accurate, biased and
spamming annotators (each kind a community), and an annotator with few labels
borrows its community's confusion rather than a prior's, which is what sparse
crowds need. Each annotator's community is summed out in the prior of its
confusion (a mixture over the communities) and each item's true class in its
likelihood, so the PyMC model has no discrete variable; ``community_prob`` is
the posterior of each annotator's community given the parameters.
:func:`build_model`'s docstring argues the form.

The communities are exchangeable (the prior does not tell them apart), so the
posterior has one mode per relabelling of them. EM and MAP start from a
clustering of the annotators' majority-vote confusions and stay in that
labelling. NUTS chains may visit other labellings: ``crowd_models.sample``
renames each chain's communities to the start's (``align_communities``) and
lists the chains it renamed; the per-annotator ``confusion`` and the items'
posteriors do not depend on the labelling.
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import xarray as xr
from scipy.special import log_softmax, softmax

from crowd_models import _dims as D
from crowd_models.data import Annotations
from crowd_models.models import _common as C
from crowd_models.models import _em, _registry, dawid_skene

__all__ = ["build_model", "em", "simulate", "member_logpdf", "DEFAULT_PRIORS",
           "N_COMMUNITIES", "SPREAD"]

DEFAULT_PRIORS = _registry.default_priors("community")
"""Weakly informative defaults. ``community_prior`` = (diagonal advantage, sd) of
each community's confusion logits: zero-sum Normal log-odds with the true class
``diagonal advantage`` above the others on average (the pooled Dawid-Skene's
``population_prior``; it favours the diagonal, which breaks the relabelling
symmetry of the classes, not of the communities). ``community_share_prior``
and ``prevalence_prior`` are symmetric Dirichlet concentrations, 2 keeping an
empty community's share off 0."""

N_COMMUNITIES = 3
"""The default number of communities: the three kinds of annotator the paper and
the crowdsourcing literature keep finding (accurate, biased toward some
classes, spammers). Each more costs K (K - 1) + 1 parameters; a community that
the data do not need ends with a small share and its prior's confusion, which
changes no item's posterior."""

SPREAD = 0.5
"""The default ``spread``: the sd, in log-odds, of an annotator's confusion logits
around its community's. Smaller than the pooled Dawid-Skene's population spread
(about 1 on real crowds), since a community is a more alike group than the
whole crowd."""

_DIMS = {
    "confusion": (D.ANNOTATOR, D.TRUE_CLASS, D.LABEL_CLASS),
    "confusion_logit": (D.ANNOTATOR, D.TRUE_CLASS, D.LABEL_CLASS),
    "community_confusion": (D.COMMUNITY, D.TRUE_CLASS, D.LABEL_CLASS),
    "community_logit": (D.COMMUNITY, D.TRUE_CLASS, D.LABEL_CLASS),
    "community_share": (D.COMMUNITY,),
    "community_prob": (D.ANNOTATOR, D.COMMUNITY),
    "prevalence": (D.TRUE_CLASS,),
    "item_class_prob": (D.ITEM, D.TRUE_CLASS),
}

_EM_SUPPORTS = {"community_share": "simplex", "prevalence": "simplex"}

_NEWTON_ITER = 100
"""Newton iterations at most for the annotators' rows in an M-step (warm
started it takes a few)."""


# ------------------------------------------------------------------ priors
def _require(annotations: Annotations) -> None:
    C.require_without_features(annotations, "the community model", "dawid_skene with features")


def _positive(value, name: str, what: str) -> float:
    if (isinstance(value, bool) or not isinstance(value, int | float | np.number)
            or not (np.isfinite(value) and value > 0)):
        raise ValueError(f"{name} must be a positive number ({what}), got {value!r}.")
    return float(value)


def _priors(ann, n_communities, spread, community_prior, community_share_prior,
            prevalence_prior) -> dict:
    J, K = ann.n_annotators, ann.n_classes
    if (isinstance(n_communities, bool) or not isinstance(n_communities, int | np.integer)
            or not 1 <= n_communities <= J):
        raise ValueError(f"n_communities must be a whole number from 1 to the number of "
                         f"annotators ({J}), got {n_communities!r}.")
    if (np.shape(community_prior) != (2,) or not np.all(np.isfinite(community_prior))
            or community_prior[1] <= 0):
        raise ValueError(f"community_prior must be (diagonal advantage, sd > 0) in log-odds, "
                         f"got {community_prior!r}.")
    M = int(n_communities)
    return {"M": M, "spread": _positive(spread, "spread", "the log-odds sd of an annotator's "
                                        "confusion around its community's"),
            "advantage": float(community_prior[0]), "sd": float(community_prior[1]),
            "centred_eye": np.eye(K) - 1.0 / K,
            "share": C.dirichlet_prior(community_share_prior, "community_share_prior", (M,)),
            "prevalence": C.dirichlet_prior(prevalence_prior, "prevalence_prior", (K,))}


# ----------------------------------------------------------- the mixture prior
def member_logpdf(confusion_logit, centre, spread, xp=np):
    """(annotator, community) log density of each annotator's confusion logits if it
    were in each community: a Normal(centre[m], spread^2) for every entry, summed
    over true and label classes. ``xp`` is ``numpy`` or ``pytensor.tensor``.

    Examples
    --------
    >>> import numpy as np
    >>> from crowd_models.models import community
    >>> logits = np.zeros((1, 2, 2))
    >>> community.member_logpdf(logits, np.stack([logits[0], logits[0] + 1]), 0.5)
    """
    size = centre.shape[-2] * centre.shape[-1]
    sq = (confusion_logit[..., None, :, :] - centre) ** 2  # centre (M, K, K) or (J, M, K, K)
    return (-0.5 * sq.sum(axis=(-2, -1)) / spread ** 2
            - size * (xp.log(spread) + 0.5 * np.log(2 * np.pi)))


def _centre(community_logit, pri, xp=np):
    """The communities' full logits: their zero-sum part plus the diagonal advantage."""
    return community_logit + pri["advantage"] * pri["centred_eye"]


def _member_logits(params, pri) -> np.ndarray:
    share = np.clip(params["community_share"], C.PROB_FLOOR, 1)
    return (member_logpdf(params["confusion_logit"], _centre(params["community_logit"], pri),
                          pri["spread"]) + np.log(share)[None, :])


def _responsibilities(params, pri) -> np.ndarray:
    """(annotator, community) posterior of each annotator's community given the
    parameters: the E-step over the communities."""
    return softmax(_member_logits(params, pri), axis=1)


def _mixture_logp(value, share, centre, spread):
    """The mixture prior of each annotator's confusion logits (PyTensor): log of
    sum_m share_m Normal(value | centre_m, spread^2)."""
    logits = member_logpdf(value, centre, spread, xp=pt) + pt.log(share)
    return pt.logsumexp(logits, axis=-1)


def _mixture_random(share, centre, spread, rng=None, size=None):
    """Draws of annotators' confusion logits: a community each, then Normal entries."""
    size = tuple(np.atleast_1d(size)) if size is not None else np.shape(share)[:-1]
    share = np.broadcast_to(share, (*size, np.shape(share)[-1]))
    cumulative = np.cumsum(share, axis=-1) / np.sum(share, axis=-1, keepdims=True)
    member = np.minimum((cumulative < rng.random((*size, 1))).sum(axis=-1), share.shape[-1] - 1)
    centre = np.broadcast_to(centre, (*size, *np.shape(centre)[-3:]))
    mean = np.take_along_axis(centre, member[..., None, None, None], axis=-3)[..., 0, :, :]
    return mean + spread * rng.standard_normal(mean.shape)


# ----------------------------------------------------------- EM pieces
def _joint(ann, params):
    prev = np.clip(params["prevalence"], C.PROB_FLOOR, 1)
    return (C.item_joint_np(log_softmax(params["confusion_logit"], axis=-1), ann)
            + np.log(prev)[None, :])


def _fit_annotator_rows(counts, mean, spread, start, max_iter=_NEWTON_ITER):
    """The annotators' rows in an M-step: for each (annotator j, true class k)
    maximise sum_l n_jkl log softmax(t)_l - |t - mean_jk|^2 / (2 spread^2) over
    the logits t, a strictly concave problem (Hessian -N (diag p - p p^T) -
    I / spread^2): Newton steps from ``start``, halved where the objective
    would fall."""
    totals = counts.sum(axis=-1, keepdims=True)
    K = counts.shape[-1]

    def value(t):
        return (np.sum(counts * log_softmax(t, axis=-1), axis=-1)
                - 0.5 * np.sum((t - mean) ** 2, axis=-1) / spread ** 2)

    t = np.array(start, dtype=float)
    for _ in range(max_iter):
        p = softmax(t, axis=-1)
        grad = counts - totals * p - (t - mean) / spread ** 2
        hess = (totals[..., None] * (p[..., :, None] * p[..., None, :] - p[..., :, None]
                                     * np.eye(K)) - np.eye(K) / spread ** 2)
        step = -np.linalg.solve(hess, grad[..., None])[..., 0]
        base, scale = value(t), np.ones(t.shape[:-1] + (1,))
        for _ in range(60):
            ok = value(t + scale * step) >= base - 1e-13 * (1 + np.abs(base))
            if ok.all():
                break
            scale = np.where(ok[..., None], scale, scale / 2)
        move = np.where(ok[..., None], scale * step, 0.0)
        t = t + move
        if float(np.max(np.abs(move))) < 1e-14:
            break
    return t


def _m_step(ann, prob, pri, previous):
    """One M-step given the item posterior ``prob`` and, from ``previous``, the
    communities' posterior ``r``: each annotator's logits (Newton, toward its
    ``r``-weighted community centre), then each community's zero-sum logits, the
    ``r``-weighted mean of its annotators' pulled toward the prior (closed
    form), the shares and the prevalence (Dirichlet modes)."""
    spread, sd = pri["spread"], pri["sd"]
    resp = _responsibilities(previous, pri)
    centre = _centre(previous["community_logit"], pri)
    mean = np.einsum("jm,mkl->jkl", resp, centre)
    logit = _fit_annotator_rows(C.expected_counts(ann, prob), mean, spread,
                                previous["confusion_logit"])
    pulled = np.einsum("jm,jkl->mkl", resp, logit - pri["advantage"] * pri["centred_eye"])
    pulled = pulled - pulled.mean(axis=-1, keepdims=True)
    weight = resp.sum(axis=0)[:, None, None] / spread ** 2
    share = resp.sum(axis=0) + pri["share"] - 1
    prev = prob.sum(axis=0) + pri["prevalence"] - 1
    return {"confusion_logit": logit,
            "community_logit": (pulled / spread ** 2) / (weight + 1.0 / sd ** 2),
            "community_share": share / share.sum(), "prevalence": prev / prev.sum()}


def _log_posterior(ann, params, pri) -> float:
    """The objective of EM and of find_MAP (no Jacobian): the marginal
    log-likelihood of the labels, the mixture prior of every annotator's
    confusion logits, and the priors of the rest."""
    _, item_ll = C.posterior_from_joint(_joint(ann, params), overwrite=True)
    logits = _member_logits(params, pri)
    top = logits.max(axis=1, keepdims=True)
    lp = float(np.sum(np.log(np.exp(logits - top).sum(axis=1)) + top[:, 0]))
    lp += C.zerosum_normal_logpdf(params["community_logit"], pri["sd"])
    lp += C.dirichlet_logpdf_nojac(params["community_share"], pri["share"])
    lp += C.dirichlet_logpdf_nojac(params["prevalence"], pri["prevalence"])
    return float(item_ll.sum()) + lp


def _cluster(x: np.ndarray, weights: np.ndarray, M: int) -> np.ndarray:
    """Community of each annotator by weighted k-means on the rows of ``x``, seeded
    deterministically (the most active annotator, then in turn the one whose
    weighted squared distance to the nearest seed is largest)."""
    centres = x[[int(np.argmax(weights))]]
    for _ in range(1, M):
        dist = ((x[:, None, :] - centres[None]) ** 2).sum(-1).min(axis=1)
        centres = np.vstack([centres, x[int(np.argmax(dist * weights))]])
    groups = np.full(len(x), -1)
    for _ in range(100):
        new = ((x[:, None, :] - centres[None]) ** 2).sum(-1).argmin(axis=1)
        if np.array_equal(new, groups):
            break
        groups = new
        for m in range(M):
            member = groups == m
            if weights[member].sum() > 0:
                centres[m] = np.average(x[member], axis=0, weights=weights[member])
    return groups


def _start(ann, pri):
    """The M-step applied to the Dawid-Skene EM's item posterior, the communities
    seeded by :func:`_cluster` of the annotators' smoothed confusion logits under
    that posterior (majority vote alone left too many annotators in the wrong
    community, from which EM did not recover)."""
    M, K = pri["M"], ann.n_classes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the start need not be trusted
        prob = dawid_skene.em(ann, tol=1e-6)["item_class_prob"].values[0, 0]
    counts = C.expected_counts(ann, prob)
    conf = (counts + 1) / (counts.sum(axis=-1, keepdims=True) + K)
    logit = np.log(conf) - np.log(conf).mean(axis=-1, keepdims=True)
    weights = ann.n_labels().astype(float) + 1e-9
    resp = 0.1 / M + 0.9 * np.eye(M)[_cluster(logit.reshape(len(conf), -1), weights, M)]
    mass = resp * weights[:, None]
    centre = np.einsum("jm,jkl->mkl", mass, logit) / mass.sum(axis=0)[:, None, None]
    seed = {"confusion_logit": logit,
            "community_logit": centre - pri["advantage"] * pri["centred_eye"],
            "community_share": resp.mean(axis=0), "prevalence": prob.mean(axis=0)}
    return _m_step(ann, prob, pri, seed)


def _derived(params, pri) -> dict:
    """The EM's parameters with the confusions and the communities' posterior."""
    return {**params, "confusion": softmax(params["confusion_logit"], axis=-1),
            "community_confusion": softmax(_centre(params["community_logit"], pri), axis=-1),
            "community_prob": _responsibilities(params, pri)}


# ----------------------------------------------------------------- factory
def build_model(
    annotations: Annotations,
    *,
    n_communities: int = N_COMMUNITIES,
    spread: float = SPREAD,
    community_prior=DEFAULT_PRIORS["community_prior"],
    community_share_prior=DEFAULT_PRIORS["community_share_prior"],
    prevalence_prior=DEFAULT_PRIORS["prevalence_prior"],
) -> pm.Model:
    r"""The community model in PyMC: true classes and communities summed out.

    .. math::

        z_i &\sim \mathrm{Categorical}(\text{prevalence}), \quad
        y_{ij} \mid z_i = k \sim \mathrm{Categorical}(\text{confusion}_{jk\cdot}),
        \quad \text{confusion}_{jk\cdot} = \mathrm{softmax}(\theta_{jk\cdot}) \\
        c_j &\sim \mathrm{Categorical}(\text{community\_share}), \quad
        \theta_{jkl} \mid c_j = m \sim \mathrm{Normal}(\mu_{mkl}, s^2) \\
        \mu_{mk\cdot} &= u_{mk\cdot} + a (e_k - 1/K), \quad
        u_{mk\cdot} \sim \mathrm{ZeroSumNormal}(\sigma), \quad
        \text{community\_share} \sim \mathrm{Dirichlet}(\beta), \quad
        \text{prevalence} \sim \mathrm{Dirichlet}(\gamma)

    with :math:`\theta` = ``confusion_logit``, :math:`u` = ``community_logit``,
    ``community_confusion`` = softmax(:math:`\mu`), :math:`s` = ``spread``, and
    (:math:`a`, :math:`\sigma`) = ``community_prior``. Summed out,
    :math:`p(\theta_j) = \sum_m \text{community\_share}_m \,
    \mathrm{Normal}(\theta_j \mid \mu_m, s^2 I)`, and item i's likelihood sums
    :math:`z_i` out as in Dawid-Skene.

    Why this form. Had every annotator of a community shared its matrix, the
    truths of items and the communities of annotators would be coupled (an
    item's labels come from annotators whose communities are unknown, and an
    annotator's community from items whose truths are unknown): the exact
    marginal is no product over items, so it has no per-item log-likelihood.
    Keeping each annotator's confusion as a continuous parameter decouples
    them: given the confusions, the items are independent (the Dawid-Skene
    likelihood, summed per item), and each annotator's community enters only
    its confusion's prior, a mixture summed per annotator. The model has no
    discrete variable, NUTS samples it, and MAP-EM alternates the posteriors of
    the items and of the communities (``community_prob``). The rows are
    logistic-normal around the community's, not Dirichlet: a Dirichlet's
    density at its mode grows as the mode nears a corner of the simplex, so
    the joint mode of the communities' rows and the annotators' ran to the
    corners (measured: a community of 75%-accurate annotators got the
    identity); a Normal's height does not depend on where it is centred. The
    spread is fixed, as in the pooled Dawid-Skene (a joint mode over a spread
    and the effects it scales favours no spread).

    Parameters
    ----------
    annotations : Annotations
        K >= 2 classes and no features.
    n_communities : int, optional
        The number of communities, 1 to the number of annotators (default
        :data:`N_COMMUNITIES`).
    spread : float, optional
        The log-odds sd of each annotator's confusion logits around its
        community's (default :data:`SPREAD`): smaller pools more.
    community_prior : (diagonal advantage, sd), optional
        Prior of the communities' logits.
    community_share_prior : float or array (M,), optional
        Dirichlet concentration of ``community_share`` (>= 1).
    prevalence_prior : float or array (K,), optional
        Dirichlet concentration of ``prevalence`` (>= 1).

    Returns
    -------
    pymc.Model
        Variables ``community_share`` (community), ``community_logit`` and
        ``community_confusion`` (community, true_class, label_class),
        ``confusion_logit`` and ``confusion`` (annotator, true_class,
        label_class), ``community_prob`` (annotator, community: the posterior
        of each annotator's community given the parameters), ``prevalence``,
        ``item_class_prob`` and the observed ``item_labels`` (item).
        ``model.crowd_start`` holds EM's start and ``model.crowd_em`` the EM on
        the same data and priors.

    Examples
    --------
    >>> from crowd_models.models import community
    >>> fit = cm.fit_map(community.build_model(cm.datasets.load_dog()))
    >>> fit.posterior["community_share"].values
    """
    _require(annotations)
    pri = _priors(annotations, n_communities, spread, community_prior, community_share_prior,
                  prevalence_prior)
    coords = {**annotations.coords(), D.COMMUNITY: np.arange(pri["M"])}
    with pm.Model(coords=coords) as model:
        share = pm.Dirichlet("community_share", a=pri["share"], dims=D.COMMUNITY)
        # sigma as float64: PyTensor makes a float that float32 holds exactly a float32
        rows = pm.ZeroSumNormal("community_logit", sigma=np.float64(pri["sd"]),
                                dims=_DIMS["community_logit"])
        centre = _centre(rows, pri, xp=pt)
        pm.Deterministic("community_confusion", pt.special.softmax(centre, axis=-1),
                         dims=_DIMS["community_confusion"])
        theta = pm.CustomDist(
            "confusion_logit", share, centre, np.float64(pri["spread"]), logp=_mixture_logp,
            random=_mixture_random, signature="(m),(m,k,l),()->(k,l)",
            dims=_DIMS["confusion_logit"])
        log_conf = pt.special.log_softmax(theta, axis=-1)
        pm.Deterministic("confusion", pt.exp(log_conf), dims=_DIMS["confusion"])
        logits = member_logpdf(theta, centre, pri["spread"], xp=pt) + pt.log(share)[None, :]
        pm.Deterministic("community_prob", pt.special.softmax(logits, axis=1),
                         dims=_DIMS["community_prob"])
        prev = pm.Dirichlet("prevalence", a=pri["prevalence"], dims=D.TRUE_CLASS)
        C.add_label_likelihood(log_conf, pt.log(prev), annotations)
    return C.attach_protocol(model, "community", start=_start(annotations, pri), em=em,
                             annotations=annotations, arguments=locals())


# ---------------------------------------------------------------------- EM
def em(
    annotations: Annotations,
    *,
    n_communities: int = N_COMMUNITIES,
    spread: float = SPREAD,
    community_prior=DEFAULT_PRIORS["community_prior"],
    community_share_prior=DEFAULT_PRIORS["community_share_prior"],
    prevalence_prior=DEFAULT_PRIORS["prevalence_prior"],
    tol: float = 1e-10,
    max_iter: int = 10_000,
    accelerate: bool = True,
) -> xr.Dataset:
    """MAP-EM of the community model over the true classes and the communities.

    E-step: each item's class posterior (as in Dawid-Skene) and each
    annotator's community posterior ``community_prob``, proportional to
    ``community_share[m]`` times the Normal density of its confusion logits
    around community m's. M-step: each annotator's logits maximise its
    expected labels' log-likelihood plus a Normal prior centred on its
    ``community_prob``-weighted community logits (Newton steps on a strictly
    concave problem); each community's logits are the weighted mean of its
    annotators' pulled toward the prior, the shares and the prevalence
    Dirichlet modes (closed forms). Each step raises the log posterior that
    ``fit_map`` maximises. The start clusters the annotators' majority-vote
    confusions into communities (weighted k-means, seeded deterministically);
    ``accelerate`` extrapolates the steps by SQUAREM. Stops when an EM step
    moves no parameter by more than ``tol``.

    Returns
    -------
    xarray.Dataset
        The posterior's names and dims (chain=1, draw=1): ``confusion_logit``,
        ``confusion``, ``community_logit``, ``community_confusion``,
        ``community_share``, ``community_prob``, ``prevalence``,
        ``item_class_prob``, and ``n_labels``; no conjugate approximation (the
        report's intervals of an EM fit are NaN: ``cm.fit_map(model,
        laplace=True)`` or ``cm.sample`` give them). Attrs ``log_posterior``,
        ``log_likelihood``, ``n_iter``, ``converged``.

    Examples
    --------
    >>> from crowd_models.models import community
    >>> fit = community.em(cm.datasets.load_dog(), n_communities=2)
    >>> cm.report.annotator_summary(fit).head()
    """
    _require(annotations)
    pri = _priors(annotations, n_communities, spread, community_prior, community_share_prior,
                  prevalence_prior)
    params, n_iter, converged = _em.run_em(
        lambda prm: _joint(annotations, prm),
        lambda prob, prev: _m_step(annotations, prob, pri, prev),
        _start(annotations, pri), tol=tol, max_iter=max_iter,
        objective=lambda prm: _log_posterior(annotations, prm, pri),
        supports=_EM_SUPPORTS, accelerate=accelerate,
    )
    prob, item_ll = C.posterior_from_joint(_joint(annotations, params), overwrite=True)
    derived = _derived(params, pri)
    alpha = C.dirichlet_rows(derived["confusion"], C.expected_counts(annotations, prob),
                             pri["spread"])
    fit = C.em_dataset(
        annotations, {**derived, "item_class_prob": prob}, _DIMS,
        extra={"n_labels": ((D.ANNOTATOR,), annotations.n_labels()),
               "confusion_alpha": (_DIMS["confusion"], alpha)},
        attrs={"family": "community", "variant": "", "method": "em",
               "log_likelihood": float(item_ll.sum()),
               "log_posterior": _log_posterior(annotations, params, pri),
               "n_iter": n_iter, "converged": int(converged),
               "n_communities": pri["M"], "spread": pri["spread"]},
        supports=_EM_SUPPORTS,
    )
    return fit.assign_coords({D.COMMUNITY: np.arange(pri["M"])})


# ---------------------------------------------------------------- simulate
def simulate(
    community_confusion,
    community,
    *,
    n_items: int,
    spread: float | None = None,
    prevalence=None,
    labels_per_item: int | None = None,
    classes=None,
    rng=None,
) -> Annotations:
    """Annotations drawn from the community model, with the truth kept.

    ``community_confusion``: (community, K, K) row-stochastic matrices with
    positive entries; ``community``: each annotator's community (codes
    0..M-1). Each annotator's confusion logits are its community's log rows
    plus Normal(0, ``spread``^2) noise per entry, or its community's rows
    themselves when ``spread`` is None. The truth follows ``prevalence``
    (uniform by default). Every annotator labels every item, or
    ``labels_per_item`` annotators drawn at random per item. ``gold`` holds
    the true classes and ``truth`` the parameters, with ``annotator_community``
    (each annotator's community) and ``confusion`` per annotator.

    Examples
    --------
    >>> import numpy as np
    >>> from crowd_models.models import community
    >>> rows = [np.eye(3) * 0.7 + 0.1, np.full((3, 3), 1 / 3)]
    >>> ann = community.simulate(rows, [0, 0, 0, 1, 1], n_items=200, spread=0.3, rng=0)
    >>> ann.truth["annotator_community"].values
    """
    rng = np.random.default_rng(rng)
    rows = np.asarray(community_confusion, dtype=float)
    if rows.ndim != 3 or rows.shape[1] != rows.shape[2] or rows.shape[1] < 2:
        raise ValueError(f"community_confusion must be (community, K, K) with K >= 2, got "
                         f"shape {rows.shape}.")
    if np.any(rows <= 0) or not np.allclose(rows.sum(axis=2), 1):
        raise ValueError("every community_confusion row must be positive probabilities summing "
                         "to 1 (logits are their logs).")
    member = np.asarray(community)
    M, K = rows.shape[:2]
    if (member.ndim != 1 or not np.issubdtype(member.dtype, np.integer)
            or member.min() < 0 or member.max() >= M):
        raise ValueError(f"community must be one code in 0..{M - 1} per annotator, got "
                         f"{community!r}.")
    if spread is None:
        conf = rows[member]
    elif not (np.isfinite(spread) and spread > 0):
        raise ValueError(f"spread must be a positive number or None, got {spread!r}.")
    else:
        logit = np.log(rows[member]) + spread * rng.standard_normal(member.shape + rows.shape[1:])
        conf = softmax(logit, axis=-1)
    prev = np.full(K, 1.0 / K) if prevalence is None else np.asarray(prevalence, dtype=float)
    if prev.shape != (K,) or np.any(prev < 0) or not np.isclose(prev.sum(), 1):
        raise ValueError(f"prevalence must be {K} probabilities summing to 1.")
    z = rng.choice(K, size=n_items, p=prev)
    item_idx, ann_idx = C.simulation_design(n_items, len(member), labels_per_item, rng)
    cells = conf[ann_idx, z[item_idx]]
    y = np.minimum((cells.cumsum(axis=1) < rng.random((len(cells), 1))).sum(axis=1), K - 1)
    truth = {"confusion": (_DIMS["confusion"], conf),
             "annotator_community": ((D.ANNOTATOR,), member),
             "community_confusion": (_DIMS["community_confusion"], rows),
             "prevalence": (_DIMS["prevalence"], prev)}
    classes = list(range(K)) if classes is None else list(classes)
    return C.simulated_annotations(item_idx, ann_idx, y, z, classes, None, truth)
