"""Choosing a family without gold: score every candidate, fit the best.

``compare_models`` scores each candidate family (and variant) on the labels
alone; ``auto_fit`` fits the one with the best score. The candidates are the
families whose model fits any categorical labels without features:
two-coin (two classes only), Dawid-Skene full and one-coin, the spammer
model (MACE), the item-difficulty model (GLAD) and the pooled Dawid-Skene
model (its confusion rows pooled toward a population's, spread by empirical
Bayes); the item-difficulty model's IRT variant (two classes) is compared
when ``candidates=`` names it (``"irt"``, :data:`ON_REQUEST`). Labels that
are levels of one scale (``ordered=True``: integer classes, increasing in
their order) add the latent ordinal model (``"ordinal"``, :data:`ORDERED`:
each annotator a bias and a noise on a latent scale), fitted by MAP since it
has no EM.

Criterion ``"heldout"``: hide a share of the labels at random (never an
item's or an annotator's last one), fit each candidate's EM on the rest, and
score the log probability it gives each hidden label (its posterior of the
item's class times the annotator's label probabilities), averaged over the
hidden labels of ``n_splits`` random splits (Paun et al. 2018 compare models
this way). The standard errors are those of the mean over the hidden labels;
``dse`` pairs each candidate with the best on the same labels.

This score rewards predicting the annotators, and a richer model can predict
each annotator's habits better while getting the truth less right (full
Dawid-Skene and two-coin absorb each annotator's bias into free rows; the
one-coin model, which cannot represent one, had the best score and 0.265
accuracy on a simulated crowd of biased annotators). The default criterion
``"sharing"`` picks the best held-out score among the candidates that explain
disagreement by structure shared across annotators or items: the spammer and
item-difficulty models (:data:`SHARING`). The pooled Dawid-Skene model is
scored but not eligible: on sparse crowds of spammers its rows flatten into a
catch-all class while its held-out score stays the best. ``auto_fit`` scores
only the candidates its criterion chooses among (:func:`scored_candidates`).
Criterion ``"heldout"`` is the earlier rule, kept for comparison: among all
candidates whose score is within ``tolerance`` paired standard errors of the
best, the one with the fewest parameters per annotator.

Criterion ``"loo"`` scores each candidate by PSIS-LOO over items instead
(``arviz.loo`` on a NUTS fit of every candidate: the expected log density of
an item's labels when the item is left out) and chooses like ``"sharing"``:
the best score among the :data:`SHARING` candidates (among all when none is
given). It costs one NUTS fit per candidate, and ``auto_fit`` returns the
chosen candidate's fit without refitting. Models with a parameter per item
(the item-difficulty model's easiness) leave items out poorly: their Pareto
k values are high, and the table counts them (``high_k``). DEVELOPING.md,
"Choosing a family without gold", has the measurements behind each rule.

``auto_fit(average=...)`` averages the eligible candidates instead of choosing
one: :func:`model_weights` weighs them by the same pointwise scores (stacking
or pseudo-BMA+), and the result keeps every component's fit, so that each
annotator table stays a model's (:func:`components`). It is an option, not
the default: benchmarks/README.md, "defaults_out_of_sample.py", has the
leave-one-set-out measurement.
"""

from __future__ import annotations

import warnings
from importlib import import_module

import numpy as np
import pandas as pd
import xarray as xr

from crowd_models import _dims as D
from crowd_models._fits import SAMPLE_DIMS, component_fits, posterior_of
from crowd_models._predictive import draw_values, label_probabilities
from crowd_models._text import listing, warn
from crowd_models.data import Annotations
from crowd_models.inference import fit_map, sample
from crowd_models.models import _registry, ordinal

_CHOICES = _registry.candidates()

CANDIDATES = {r.choice.name: (import_module(r.module_name),
                              {r.keyword: r.variant} if r.keyword else {}, r.choice.params)
              for r in _CHOICES}
"""Name -> (family module, ``em``/``build_model`` keywords, parameters per annotator
given K classes): the registry's records with a model-choice role, in order."""

BINARY = tuple(r.choice.name for r in _CHOICES if r.labels == "binary")
"""The candidates for two classes only."""

ON_REQUEST = tuple(r.choice.name for r in _CHOICES if r.choice.on_request)
"""Candidates compared only when named in ``candidates=``: the IRT variant never
had the best held-out score among :data:`SHARING` on ``benchmarks/model_choice.py``'s
binary crowds, and its fits would cost more than the other candidates together."""

ORDERED = tuple(r.choice.name for r in _CHOICES if r.labels == "ordered")
"""Candidates for ordered levels: compared by default when ``ordered=True``, or
when named in ``candidates=`` (the classes must then be integer levels in
increasing order). They have no EM: the held-out criteria fit them by MAP
(:func:`point_fit`)."""

NO_EM = tuple(r.choice.name for r in _CHOICES if not r.has_em)
"""Candidates without an EM (the latent ordinal model): fitted by
:func:`crowd_models.fit_map` wherever the others are fitted by EM."""

CRITERIA = ("sharing", "heldout", "loo")
"""The choice rules (module docstring): ``"sharing"`` (default) and ``"heldout"`` on
held-out labels, ``"loo"`` by PSIS-LOO over items from NUTS fits."""

NUTS_DEFAULTS = {"draws": 500, "tune": 500, "chains": 4}
"""Criterion ``"loo"``'s NUTS settings (2,000 draws for PSIS); ``nuts=`` overrides them."""

SHARING = tuple(r.choice.name for r in _CHOICES if r.choice.sharing)
"""The candidates criterion ``"sharing"`` chooses among (when any is a candidate)."""

AVERAGES = ("stacking", "pseudo-bma")
"""How :func:`model_weights` weighs candidates by their pointwise scores (Yao et
al. 2018): ``"stacking"`` (simplex weights maximising the summed log of the weighted
predictive probabilities) or ``"pseudo-bma"`` (pseudo-BMA+, Bayesian bootstrap)."""

MIN_WEIGHT = 1e-3
"""An average leaves out (does not fit) candidates weighted below this; the rest renormalised."""

BOOTSTRAP_DRAWS = 1000
"""Bayesian-bootstrap draws of ``"pseudo-bma"`` weights."""


def family_of(name: str):
    """(family module, keywords of its ``em``/``build_model``) of a candidate.

    Examples
    --------
    >>> from crowd_models import auto
    >>> family, options = auto.family_of("one_coin")
    >>> fit = family.em(cm.datasets.load_dog(), **options)
    """
    module, options, _ = CANDIDATES[name]
    return module, dict(options)


def point_fit(name: str, annotations: Annotations):
    """The candidate's point fit as the held-out criteria score it: its EM (an
    xarray Dataset), or for a candidate of :data:`NO_EM` the posterior group of
    :func:`crowd_models.fit_map` (the same variables, one chain and one draw).

    Examples
    --------
    >>> from crowd_models import auto
    >>> fit = auto.point_fit("ordinal", cm.datasets.load_anesthesia())
    >>> fit["item_class_prob"].shape
    """
    family, options = family_of(name)
    if name in NO_EM:
        return fit_map(family.build_model(annotations, **options)).posterior.to_dataset()
    return family.em(annotations, **options)


def _candidates(annotations: Annotations, candidates, ordered: bool = False) -> list[str]:
    if not isinstance(annotations, Annotations):
        raise TypeError(f"expected Annotations, got {type(annotations).__name__}.")
    if annotations.continuous:
        raise ValueError("auto_fit chooses among the categorical families; these labels are "
                         "continuous (fit crowd_models.models.continuous instead).")
    if annotations.features is not None:
        raise ValueError("auto_fit compares the families without a classifier; fit "
                         "annotations.with_features(None), or choose a family with features "
                         "yourself (two_coin, dawid_skene).")
    if not isinstance(ordered, bool | np.bool_):
        raise TypeError(f"ordered must be True or False, got {ordered!r}.")
    default = [n for n in CANDIDATES
               if n not in ON_REQUEST and (n not in BINARY or annotations.n_classes == 2)
               and (n not in ORDERED or ordered)]
    names = default if candidates is None else list(candidates)
    unknown = [n for n in names if n not in CANDIDATES]
    if unknown:
        raise ValueError(f"unknown candidate(s) {listing(unknown)}; choose among "
                         f"{listing(list(CANDIDATES))}.")
    for name in names:
        if name in BINARY and annotations.n_classes != 2:
            raise ValueError(f"the {name} candidate needs two classes; these labels have "
                             f"{annotations.n_classes}. Drop it from candidates.")
    if not names:
        raise ValueError("candidates is empty; name at least one of "
                         f"{listing(list(CANDIDATES))}.")
    for name in names:
        if name in ORDERED:  # integer levels in increasing order, or a ValueError
            ordinal.require_levels(annotations, f"the {name} candidate")
    return names


def scored_candidates(annotations: Annotations, criterion: str = "sharing",
                      ordered: bool = False) -> list[str]:
    """The candidates :func:`auto_fit` scores when ``candidates=`` is not given
    (``annotations``, ``criterion``, ``ordered`` as in :func:`compare_models`): for
    ``"sharing"`` and ``"loo"``, those of :data:`SHARING` among compare_models'
    defaults, since the others' scores are never read and their fits cost most of
    a comparison; for ``"heldout"``, all the defaults. A list of names.

    Examples
    --------
    >>> from crowd_models import auto
    >>> auto.scored_candidates(cm.datasets.load_rte())
    """
    if criterion not in CRITERIA:
        raise ValueError(f"criterion={criterion!r} is not one of {CRITERIA}.")
    names = _candidates(annotations, None, ordered)
    sharing = [name for name in names if name in SHARING]
    return sharing if criterion != "heldout" and sharing else names


def _label_probabilities(fit, rows) -> np.ndarray:
    """(row, label_class) probabilities of the labels of the given rows of the long
    table under a fit to the other labels: sum over classes of the item's posterior
    times the annotator's probability of each label given the class."""
    item, annotator = rows
    values = draw_values(fit, 0)
    prob = values["item_class_prob"][item]  # (row, true_class)
    conf = label_probabilities(values, prob.shape[1], item, annotator)
    return np.einsum("rk,rkl->rl", prob, conf)


def _holdout_rows(annotations: Annotations, fraction: float, rng) -> np.ndarray:
    """A random share of the label rows to hide, keeping at least one label of every
    item and of every annotator."""
    n = annotations.n_annotations
    order = rng.permutation(n)
    left_item = np.bincount(annotations.item_idx, minlength=annotations.n_items)
    left_annotator = np.bincount(annotations.annotator_idx, minlength=annotations.n_annotators)
    hidden = []
    target = int(round(fraction * n))
    for r in order:
        if len(hidden) >= target:
            break
        i, j = annotations.item_idx[r], annotations.annotator_idx[r]
        if left_item[i] > 1 and left_annotator[j] > 1:
            hidden.append(r)
            left_item[i] -= 1
            left_annotator[j] -= 1
    return np.sort(np.asarray(hidden, dtype=np.int64))


def compare_models(annotations: Annotations, *, candidates=None, criterion: str = "sharing",
                   ordered: bool = False, fraction: float | None = None,
                   n_splits: int | None = None, rng=0, nuts: dict | None = None,
                   pointwise: bool = False):
    """Score every candidate family on the labels alone (no gold is read).

    Parameters
    ----------
    annotations : Annotations
        Categorical labels, without features.
    candidates : sequence of str, optional
        Names from :data:`CANDIDATES` (default: all that fit the labels but
        those of :data:`ON_REQUEST`; two_coin and irt only for two classes;
        those of :data:`ORDERED` only with ``ordered=True``).
    criterion : {"sharing", "heldout", "loo"}, optional
        How candidates are scored and which are ``eligible`` (see the module
        docstring).
    ordered : bool, optional
        True when the classes are levels of one scale, in their order
        (integers, e.g. ratings 1..5): adds the candidates of :data:`ORDERED`
        to the default ones. Default False (classes are unordered).
    fraction : float, optional
        Share of the labels hidden in each split, in (0, 0.5] (default 0.1;
        held-out criteria only).
    n_splits : int, optional
        Number of random splits (default 3; held-out criteria only).
    rng : int or numpy.random.Generator, optional
        Seed or Generator of the splits (of the NUTS seeds for ``"loo"``).
    nuts : dict, optional
        Keywords of :func:`crowd_models.sample` for criterion ``"loo"``
        (default :data:`NUTS_DEFAULTS`, without a progress bar).
    pointwise : bool, optional
        Also return every scored point's log score (default False).

    Returns
    -------
    pandas.DataFrame, or (pandas.DataFrame, pandas.DataFrame) with ``pointwise=True``
        One row per candidate, best score first: ``score`` (mean log
        probability of a hidden label), ``se``, ``dse`` (standard error of
        its difference from the best score, paired over the same hidden
        labels; 0 for the best), ``n_hidden`` (hidden labels scored),
        ``warned_splits`` (how many of the candidate's split fits raised a
        trust warning, such as annotators below chance), ``params_per_annotator``,
        ``eligible`` (the candidates the criterion chooses among);
        ``attrs["criterion"]``, and ``attrs["split_warnings"]`` (each warned
        candidate's distinct messages). The split fits' warnings are not shown
        one by one: one UserWarning names the candidates whose split fits warned
        and how many. With criterion ``"loo"``:
        ``score`` is the PSIS-LOO expected log predictive density of the
        items' labels (a sum over items), ``se`` and paired ``dse`` over
        items, ``p_loo`` (effective number of parameters), ``n_items`` and
        ``high_k`` (items whose Pareto k exceeds ArviZ's threshold, where the
        estimate is unreliable) in place of ``n_hidden``, and ``seconds`` (the
        candidate's NUTS fit, its compile included). With ``pointwise=True``
        the second frame has a column per candidate and a row per scored point:
        the log probability of each hidden label (the splits' labels one after
        another; index ``hidden``, the label's row in the long table, which
        repeats when splits share a label), or for ``"loo"`` each item's
        PSIS-LOO log density (index ``item``). :func:`model_weights` reads it.

    Examples
    --------
    >>> cm.compare_models(cm.datasets.load_rte(), n_splits=2)
    >>> cm.compare_models(cm.datasets.load_rte(), candidates=["two_coin", "spammer"],
    ...                   criterion="loo", nuts={"draws": 300, "tune": 300, "chains": 2})
    """
    names = _candidates(annotations, candidates, ordered)
    if not isinstance(pointwise, bool | np.bool_):
        raise TypeError(f"pointwise must be True or False, got {pointwise!r}.")
    if criterion not in CRITERIA:
        raise ValueError(f"criterion={criterion!r} is not one of {CRITERIA}.")
    if criterion == "loo":
        if fraction is not None or n_splits is not None:
            raise ValueError("fraction= and n_splits= set the held-out splits; criterion "
                             "'loo' leaves out items by PSIS and takes nuts= instead.")
        table, _, points = _loo_comparison(annotations, names, rng, nuts)
    else:
        if nuts is not None:
            raise ValueError("nuts= sets the NUTS fits of criterion='loo'; the held-out "
                             f"criteria fit by EM (criterion={criterion!r}).")
        table, points = _heldout_comparison(annotations, names, criterion, fraction,
                                            n_splits, rng)
    return (table, points) if pointwise else table


def _heldout_comparison(annotations: Annotations, names: list[str], criterion: str,
                        fraction, n_splits, rng) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The held-out criteria's table, and each candidate's log probability of every
    hidden label (a column per candidate; the splits' labels one after another)."""
    fraction = 0.1 if fraction is None else fraction
    n_splits = 3 if n_splits is None else n_splits
    if not (isinstance(fraction, float | int) and 0 < fraction <= 0.5):
        raise ValueError(f"fraction must be in (0, 0.5], got {fraction!r}.")
    if not (isinstance(n_splits, int) and n_splits >= 1):
        raise ValueError(f"n_splits must be a positive integer, got {n_splits!r}.")
    rng = np.random.default_rng(rng)
    scores = {name: [] for name in names}
    notes = {name: [] for name in names}  # per split fit: its UserWarnings' messages
    rows_hidden = []
    for _ in range(n_splits):
        hidden = _holdout_rows(annotations, fraction, rng)
        if len(hidden) == 0:
            raise ValueError(
                "no label can be held out: every item or annotator has a single label. "
                "Held-out scores need items and annotators with two labels or more.")
        rows_hidden.append(hidden)
        keep = np.ones(annotations.n_annotations, dtype=bool)
        keep[hidden] = False
        train = annotations.select(keep)  # every item and annotator keeps a label
        rows = (annotations.item_idx[hidden], annotations.annotator_idx[hidden])
        for name in names:
            prob = _label_probabilities(_noted_fit(name, train, notes[name]), rows)
            scores[name].append(np.log(np.clip(prob[np.arange(len(hidden)),
                                                    annotations.labels[hidden]], 1e-300, 1)))
    per_label = {name: np.concatenate(s) for name, s in scores.items()}
    best = max(per_label, key=lambda name: per_label[name].mean())
    n = len(per_label[best])

    def se(values):
        return float(np.std(values, ddof=1) / np.sqrt(n)) if n > 1 else float("nan")

    table = pd.DataFrame({
        name: {"score": float(values.mean()), "se": se(values),
               "dse": se(per_label[best] - values), "n_hidden": n}
        for name, values in per_label.items()}).T
    table = table.astype({"n_hidden": int})
    table["warned_splits"] = [sum(bool(m) for m in notes[name]) for name in table.index]
    table = _finish_table(table, names, annotations.n_classes,
                          criterion if criterion == "heldout" else "sharing")
    table.attrs["split_warnings"] = {name: sorted({m for ms in notes[name] for m in ms})
                                     for name in table.index if any(notes[name])}
    _warn_split_fits(table, n_splits)
    points = pd.DataFrame(per_label, columns=names,
                          index=pd.Index(np.concatenate(rows_hidden), name="hidden"))
    return table, points


def _noted_fit(name: str, train: Annotations, notes: list):
    """:func:`point_fit` on a split, its UserWarnings appended to ``notes`` as one list
    of messages (empty when it did not warn) instead of shown; other warnings pass."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        fit = point_fit(name, train)
    notes.append([str(w.message) for w in caught if issubclass(w.category, UserWarning)])
    for w in caught:
        if not issubclass(w.category, UserWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return fit


def _warn_split_fits(table: pd.DataFrame, n_splits: int) -> None:
    """One UserWarning for the split fits that warned, naming the candidates."""
    warned = table.index[table["warned_splits"] > 0]
    if len(warned) == 0:
        return
    which = ", ".join(f"{name} ({table.loc[name, 'warned_splits']} of {n_splits})"
                      for name in warned)
    first = table.attrs["split_warnings"][warned[0]][0]
    warn(f"held-out split fits that may not be trusted, by candidate: {which}; their "
         f"scores are less reliable. The messages are in the table's "
         f"attrs['split_warnings'] ({warned[0]}: {first})")


def _finish_table(table: pd.DataFrame, names: list[str], n_classes: int,
                  criterion: str) -> pd.DataFrame:
    """Add the parameter counts and the ``eligible`` column, best score first.
    Without a candidate of SHARING, "sharing" falls back to "heldout" and "loo"
    chooses among all candidates."""
    table.index.name = "candidate"
    table["params_per_annotator"] = [CANDIDATES[name][2](n_classes) for name in table.index]
    sharing = [name for name in names if name in SHARING]
    eligible = sharing if criterion != "heldout" and sharing else names
    table["eligible"] = table.index.isin(eligible)
    table = table.sort_values("score", ascending=False)
    table.attrs["criterion"] = "heldout" if criterion == "sharing" and not sharing else criterion
    return table


def _loo_comparison(annotations: Annotations, names: list[str], rng, nuts):
    """The criterion-"loo" table, the candidates' NUTS fits by name, and each item's
    PSIS-LOO log density under each candidate."""
    import arviz as az

    if nuts is not None and not isinstance(nuts, dict):
        raise TypeError(f"nuts must be a dict of crowd_models.sample keywords, got "
                        f"{type(nuts).__name__}.")
    settings = {**NUTS_DEFAULTS, "progressbar": False, **(nuts or {})}
    if "random_seed" in settings:
        raise ValueError("nuts= cannot set random_seed: criterion 'loo' seeds each "
                         "candidate's NUTS fit from rng.")
    seeds = np.random.default_rng(rng).integers(2**31, size=len(names))
    fits, pointwise, rows = {}, {}, {}
    for name, seed in zip(names, seeds, strict=True):
        family, options = family_of(name)
        fits[name] = sample(family.build_model(annotations, **options),
                            random_seed=int(seed), **settings)
        with warnings.catch_warnings():  # counted in high_k instead
            warnings.filterwarnings("ignore", message=".*[Pp]areto.*")
            result = az.loo(fits[name], pointwise=True)
        pointwise[name] = np.asarray(result.elpd_i).ravel()
        rows[name] = {"score": float(result.elpd), "se": float(result.se),
                      "p_loo": float(result.p), "n_items": int(result.n_data_points),
                      "high_k": int(np.sum(np.asarray(result.pareto_k) > result.good_k)),
                      "seconds": float(fits[name].attrs["seconds"])}
    best = max(pointwise, key=lambda name: pointwise[name].sum())
    for name, values in pointwise.items():
        diff = pointwise[best] - values
        rows[name]["dse"] = float(np.sqrt(len(diff)) * np.std(diff))  # as ArviZ's compare
    table = pd.DataFrame(rows).T[["score", "se", "dse", "p_loo", "n_items", "high_k",
                                  "seconds"]]
    table = table.astype({"n_items": int, "high_k": int})
    points = pd.DataFrame(pointwise, columns=names,
                          index=pd.Index(annotations.items, name="item"))
    return _finish_table(table, names, annotations.n_classes, "loo"), fits, points


def choose(table: pd.DataFrame, tolerance: float = 2.0) -> str:
    """The candidate :func:`auto_fit` takes from a :func:`compare_models` table.

    Criteria ``"sharing"`` (``table.attrs["criterion"]``, the default) and
    ``"loo"``: the best score among the ``eligible`` rows. Criterion ``"heldout"`` (also when no
    candidate of :data:`SHARING` is in the table): the fewest parameters per
    annotator among the rows whose score is within ``tolerance`` paired
    standard errors (``dse``) of the best (ties: the better score).

    Examples
    --------
    >>> from crowd_models import auto
    >>> auto.choose(cm.compare_models(cm.datasets.load_rte(), n_splits=2))
    """
    if table.attrs.get("criterion", "heldout") in ("sharing", "loo"):
        eligible = table[table["eligible"]]
        return str(eligible["score"].idxmax())
    best = table["score"].max()
    close = table[table["score"] >= best - tolerance * table["dse"]]
    return str(close.sort_values(["params_per_annotator", "score"],
                                 ascending=[True, False]).index[0])


def model_weights(points: pd.DataFrame, method: str = "stacking", *, rng=0,
                  min_weight: float = 0.0) -> pd.Series:
    """Weights of candidates from their pointwise held-out log scores.

    Parameters
    ----------
    points : pandas.DataFrame
        One column per candidate, one row per scored point, each entry the log
        probability (or density) the candidate gave the point (``compare_models(...,
        pointwise=True)``'s second frame, or any such scores).
    method : {"stacking", "pseudo-bma"}, optional
        :data:`AVERAGES`. ``"stacking"`` maximises ``sum_i log sum_k w_k
        exp(points[i, k])`` over the simplex (by the EM of mixture weights,
        which climbs at every step). ``"pseudo-bma"``: ``softmax(n * sum_i
        a_i points[i, k])`` averaged over :data:`BOOTSTRAP_DRAWS` Dirichlet(1,
        ..., 1) draws ``a`` of the points' weights.
    rng : int or numpy.random.Generator, optional
        Seed of the bootstrap draws (``"pseudo-bma"`` only).
    min_weight : float, optional
        Candidates weighted below this are left out and the other weights
        renormalised (default 0: none; ``auto_fit`` uses :data:`MIN_WEIGHT`).

    Returns
    -------
    pandas.Series
        A weight per candidate (the columns, less those left out), summing to 1.

    Examples
    --------
    >>> from crowd_models import auto
    >>> table, points = cm.compare_models(cm.datasets.load_rte(), n_splits=2, pointwise=True)
    >>> auto.model_weights(points[["pooled", "spammer"]])
    """
    if method not in AVERAGES:
        raise ValueError(f"method={method!r} is not one of {AVERAGES}.")
    if not isinstance(points, pd.DataFrame) or points.shape[1] == 0 or len(points) == 0:
        raise TypeError("points must be a DataFrame with a column per candidate and a row "
                        "per scored point (compare_models(..., pointwise=True)).")
    values = points.to_numpy(dtype=float)
    if not np.all(np.isfinite(values) | (values == -np.inf)):
        raise ValueError("points must be log scores: finite numbers or -inf (no NaN, no "
                         "+inf).")
    if method == "stacking":
        weights = _stacking(values)
    else:
        draws = np.random.default_rng(rng).dirichlet(np.ones(len(values)), BOOTSTRAP_DRAWS)
        totals = len(values) * draws @ np.maximum(values, -1e300)
        totals -= totals.max(axis=1, keepdims=True)
        each = np.exp(totals)
        weights = (each / each.sum(axis=1, keepdims=True)).mean(axis=0)
    weights = pd.Series(weights, index=points.columns, name="weight")
    weights = weights[weights >= min(min_weight, weights.max())]  # the best always stays
    return weights / weights.sum()


def _stacking(values: np.ndarray, tol: float = 1e-12, max_iter: int = 100_000) -> np.ndarray:
    """Stacking weights of (point, candidate) log scores by the EM of mixture weights
    (each step: the mean responsibility of each candidate); stops when the mean log
    score gains less than ``tol``."""
    dens = np.exp(values - values.max(axis=1, keepdims=True))
    weights = np.full(values.shape[1], 1 / values.shape[1])
    last = -np.inf
    for _ in range(max_iter):
        mix = dens @ weights
        value = float(np.mean(np.log(mix)))
        if value - last < tol:
            break
        last = value
        weights = weights * (dens / mix[:, None]).mean(axis=0)
    return weights / weights.sum()


def _final_fit(name: str, annotations: Annotations, method: str, fits: dict, rng):
    """A chosen candidate's fit on all the labels, by ``method``."""
    family, options = family_of(name)
    if method == "em":
        return family.em(annotations, **options)
    if method == "nuts" and name in fits:
        return fits[name]
    if method == "nuts":
        return sample(family.build_model(annotations, **options), progressbar=False,
                      random_seed=int(np.random.default_rng(rng).integers(2**31)))
    return fit_map(family.build_model(annotations, **options))


def _averaged(annotations: Annotations, table: pd.DataFrame, points: pd.DataFrame,
              average: str, method: str, fits: dict, rng) -> xr.DataTree:
    """The average of the eligible candidates' fits, weighted by ``model_weights``."""
    weights = model_weights(points[list(table.index[table["eligible"]])], average, rng=rng,
                            min_weight=MIN_WEIGHT)
    missing = [name for name in weights.index if method == "em" and name in NO_EM]
    if missing:
        raise ValueError(f"the averaged candidate(s) {listing(missing)} have no EM; call "
                         f"auto_fit with method='map' or 'nuts'.")
    parts = {name: _final_fit(name, annotations, method, fits, rng) for name in weights.index}
    prob = sum(float(weights[name]) * posterior_of(fit)["item_class_prob"].mean(SAMPLE_DIMS)
               for name, fit in parts.items())
    posterior = prob.expand_dims({d: [0] for d in SAMPLE_DIMS}).to_dataset()
    root = xr.Dataset({"weight": (D.COMPONENT, weights.to_numpy())},
                      coords={D.COMPONENT: list(weights.index)})
    nodes = {f"components/{name}": fit if isinstance(fit, xr.DataTree) else xr.DataTree(fit)
             for name, fit in parts.items()}
    tree = xr.DataTree.from_dict({"/": root, "posterior": posterior, **nodes})
    tree.attrs.update(average=average, weights={str(k): float(v) for k, v in weights.items()})
    return tree


def auto_fit(annotations: Annotations, *, candidates=None, criterion: str = "sharing",
             ordered: bool = False, method: str | None = None, tolerance: float = 2.0,
             average: str | None = None, rng=0, **compare_options):
    """Score the candidates (:func:`compare_models`), then fit the chosen one.

    Parameters
    ----------
    annotations : Annotations
        Categorical labels, without features.
    candidates, criterion, ordered, rng, **compare_options
        As in :func:`compare_models`, but without ``candidates=`` only those the
        criterion chooses among are scored (:func:`scored_candidates`); name
        them to see every candidate's score in the ranking.
    method : {"map", "em", "nuts"}, optional
        ``"map"`` (``fit_map`` on the family's model, a DataTree; the default
        for the held-out criteria), ``"em"`` (the family's EM, an xarray
        Dataset; a ValueError when the chosen candidate is one of
        :data:`NO_EM`) or ``"nuts"`` (:func:`crowd_models.sample`; the default
        for criterion ``"loo"``, which returns the fit it scored).
    tolerance : float, optional
        See :func:`choose` (criterion ``"heldout"`` only).
    average : {"stacking", "pseudo-bma"}, optional
        Average the ``eligible`` candidates instead of choosing one: weights
        from their pointwise scores (:func:`model_weights`; the hidden labels,
        or the items for ``"loo"``), each candidate weighted at least
        :data:`MIN_WEIGHT` fitted by ``method``, and their item posteriors
        averaged. Default None: fit the chosen candidate.

    Returns
    -------
    xarray.DataTree or xarray.Dataset
        The chosen family's fit, with ``attrs["model"]`` (the candidate's name),
        ``attrs["criterion"]`` (the rule that chose: ``"sharing"``, or
        ``"heldout"`` when asked for or when no candidate of :data:`SHARING` was
        given), ``attrs["ranking"]`` (the table as a list of records, best
        score first) and ``attrs["split_warnings"]`` (as in
        :func:`compare_models`; empty for criterion ``"loo"``). With
        ``average``: a DataTree whose ``posterior`` holds the weighted mean
        ``item_class_prob`` (one draw), whose root holds ``weight``
        (``component``), and whose ``components`` group holds each component's
        fit (:func:`components` gives them back); ``attrs["model"]`` is
        ``"average"``, ``attrs["average"]`` the method and ``attrs["weights"]``
        a dict. ``cm.report.item_table`` reads the average, and
        ``cm.report.annotator_summary`` gives every component's table, indexed
        by (component, annotator), with its ``weight``.

    Examples
    --------
    >>> fit = cm.auto_fit(cm.datasets.load_rte(), n_splits=2)
    >>> fit.attrs["model"]
    """
    if method is None:
        method = "nuts" if criterion == "loo" else "map"
    if method not in ("map", "em", "nuts"):
        raise ValueError(f"method must be 'map', 'em' or 'nuts', got {method!r}.")
    if average is not None and average not in AVERAGES:
        raise ValueError(f"average must be None (choose one candidate) or one of {AVERAGES}, "
                         f"got {average!r}.")
    fits = {}
    if candidates is None and criterion in CRITERIA:
        candidates = scored_candidates(annotations, criterion, ordered)
    if criterion == "loo":
        unknown = set(compare_options) - {"nuts"}
        if unknown:
            raise ValueError(f"criterion 'loo' takes nuts= but not {listing(sorted(unknown))} "
                             f"(options of the held-out criteria).")
        table, fits, points = _loo_comparison(annotations,
                                              _candidates(annotations, candidates, ordered),
                                              rng, compare_options.get("nuts"))
    else:
        table, points = compare_models(annotations, candidates=candidates,
                                       criterion=criterion, ordered=ordered, rng=rng,
                                       pointwise=True, **compare_options)
    if average is not None:
        fit = _averaged(annotations, table, points, average, method, fits, rng)
        chosen = "average"
    else:
        chosen = choose(table, tolerance)
        if method == "em" and chosen in NO_EM:
            raise ValueError(f"the chosen candidate {chosen!r} has no EM; call auto_fit with "
                             f"method='map' or 'nuts' (the ranking: "
                             f"{listing(list(table.index))}).")
        fit = _final_fit(chosen, annotations, method, fits, rng)
    fit.attrs.update(model=chosen, criterion=table.attrs["criterion"],
                     ranking=table.reset_index().to_dict("records"),
                     split_warnings=table.attrs.get("split_warnings", {}))
    return fit


def components(fit) -> dict:
    """The component fits of an average (``auto_fit(average=...)``), by name.

    Parameters
    ----------
    fit : xarray.DataTree
        An averaged fit, as returned or reloaded with :func:`crowd_models.open_fit`.

    Returns
    -------
    dict
        Candidate name -> its fit: a DataTree (MAP, NUTS) or, for an EM
        component, an xarray Dataset, each with its own attrs, as
        ``cm.report.annotator_summary`` reads them. Empty for a fit that is
        not an average.

    Examples
    --------
    >>> from crowd_models import auto
    >>> fit = cm.auto_fit(cm.datasets.load_rte(), n_splits=2, average="stacking",
    ...                   method="em")
    >>> {name: part.attrs["family"] for name, part in auto.components(fit).items()}
    """
    return component_fits(fit)


__all__ = ["AVERAGES", "BINARY", "BOOTSTRAP_DRAWS", "CANDIDATES", "CRITERIA", "MIN_WEIGHT",
           "NO_EM", "NUTS_DEFAULTS", "ON_REQUEST", "ORDERED", "SHARING", "auto_fit", "choose",
           "compare_models", "components", "family_of", "model_weights", "point_fit",
           "scored_candidates"]
