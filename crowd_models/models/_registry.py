"""What each family is, in one place: a :class:`Variant` record per (family,
variant), read by everything that lists or describes the families.

``models.MODEL_NAMES`` and ``MODELS``, ``auto.CANDIDATES`` (and its
``BINARY``, ``ON_REQUEST``, ``ORDERED``, ``NO_EM``, ``SHARING``), the command
line's ``VARIANTS``, ``WITHOUT_EM`` and positive-class tables, the report's
titles, ``selection.compare``'s likelihood kinds and the calibration study's
cases derive from :data:`REGISTRY`. So do each family's ``DEFAULT_PRIORS``
(:func:`default_priors`) and the command line's prior options: a record holds
its family's :class:`Prior` s, each with its default and its ``--help``. Adding
a family is one record per variant here plus the family's module. This module
imports neither the families nor PyMC (the command line's parser and
``models/__init__`` read it); a record names its module, and the caller on a
higher floor imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

LABEL_KINDS = ("binary", "categorical", "ordered", "continuous")
"""What a family's labels are: two classes (the second the positive one),
unordered classes, levels of one scale, or real numbers."""


@dataclass(frozen=True)
class Case:
    """One case of the calibration study (``crowd_models.validation.sbc``).

    ``name`` is the case's variant name in the study (None: the family's
    only case), ``options`` the keywords of ``build_model`` and ``em``,
    ``table(family_module, values, design, features, rng)`` draws a label
    table from parameter values drawn from the prior, ``template`` replaces
    entries of the study's template values for this case, ``laplace`` says
    whether MAP plus Laplace summarises the posterior (None: when the family
    has an EM), ``features`` is the design's default number of features,
    ``unranked`` the dims whose labels are exchangeable in the posterior (the
    community model's communities): the variables along them are not ranked,
    since their truth and the fit name the groups in unrelated orders.
    """

    name: str | None
    table: Callable
    options: dict = field(default_factory=dict)
    template: dict = field(default_factory=dict)
    laplace: bool | None = None
    features: int = 0
    unranked: tuple[str, ...] = ()


@dataclass(frozen=True)
class Choice:
    """A variant's role in ``crowd_models.auto``: its candidate ``name``, its
    ``rank`` in the order candidates are compared (criterion ``"loo"`` seeds
    their NUTS fits in that order), ``params(K)`` (parameters per annotator
    with K classes, the ``"heldout"`` rule's count), ``sharing`` (in the
    default criterion's set) and ``on_request`` (compared only when named)."""

    name: str
    rank: int
    params: Callable[[int], int]
    sharing: bool = False
    on_request: bool = False


@dataclass(frozen=True)
class Prior:
    """One prior keyword of a family's ``build_model`` and ``em``.

    ``name`` is the keyword and ``default`` its default, the value the
    family's ``DEFAULT_PRIORS`` holds (this is its one copy; a setting's is
    the one ``build_model`` gives). ``kind`` is how the command line reads
    ``--name`` (``"beta"``, ``"diag_off"``, ``"gamma"``, ``"shape_rate"``,
    ``"location_sd"``, ``"concentration"``, ``"positive"``, ``"nonnegative"``,
    ``"auto_positive"`` and ``"auto_nonnegative"`` (those numbers or ``auto``)
    or ``"count"``, a whole number; None: not offered there), ``metavar`` and ``text``
    its ``--help`` (one text per keyword, whichever families take it),
    ``needs`` what else the command line must have (None, ``"features"``,
    ``"no-features"``, ``"bias"``, ``"scale"``; the first two also what the
    annotations must have in Python, :func:`refuse_unused`), ``flat`` the
    number that, in every entry, makes the prior flat (it then says nothing,
    and :func:`refuse_unused` lets it pass where it is unused: the families'
    ``FLAT_PRIORS`` fit any annotations) and ``shown`` the default as
    ``--help`` writes it where that is not the default's numbers (a None the
    family resolves). ``variants`` are the family's variants that take it
    (empty: all); ``setting`` marks a model setting that the command line
    offers beside the priors but ``DEFAULT_PRIORS`` leaves out.
    """

    name: str
    default: object
    kind: str | None = None
    metavar: str = ""
    text: str = ""
    needs: str | None = None
    flat: float | None = None
    shown: str | None = None
    variants: tuple[str, ...] = ()
    setting: bool = False

    def applies(self, variant: str) -> bool:
        """Whether the family's ``variant`` takes this keyword."""
        return not self.variants or variant in self.variants


@dataclass(frozen=True)
class Variant:
    """One (family, variant).

    ``family`` is the name fits record (``attrs["family"]``) and, unless
    ``module`` says otherwise, the module under ``crowd_models.models``;
    ``variant`` is ``""`` for a family without variants; ``keyword`` the
    keyword of ``build_model``/``em`` that selects it (``"variant"``, or
    ``"noise"`` for continuous); ``cli`` the ``--model`` name (``""``: not on
    the command line) and ``cli_default`` whether it is that name's default
    ``--variant``; ``has_em``; ``has_mode`` False where the posterior density
    has no interior mode (a hierarchical spread that collapses to 0: MAP
    stalls, and the command line refuses ``--method map``); ``labels`` one of
    :data:`LABEL_KINDS` (binary variants have a positive class and report
    sensitivity and specificity);
    ``likelihood`` what the per-item ``item_labels`` density is a density of
    where it is not the labels' own (``"composite"``, ``"features"``);
    ``title`` the report's name for it; ``choice`` its :class:`Choice` as a
    model-choice candidate; ``sbc`` its calibration :class:`Case` s;
    ``priors`` its family's :class:`Prior` s (the records of one family share
    them; :attr:`variant_priors` are its own).
    """

    family: str
    title: str
    labels: str
    variant: str = ""
    keyword: str = ""
    module: str = ""
    cli: str = ""
    cli_default: bool = False
    has_em: bool = True
    has_mode: bool = True
    likelihood: str = ""
    choice: Choice | None = None
    sbc: tuple[Case, ...] = ()
    priors: tuple[Prior, ...] = ()

    @property
    def variant_priors(self) -> tuple[Prior, ...]:
        """The prior keywords this variant takes."""
        return tuple(p for p in self.priors if p.applies(self.variant))

    @property
    def module_name(self) -> str:
        """The importable name of the family's module."""
        return self.module or f"crowd_models.models.{self.family}"

    @property
    def positive(self) -> bool:
        """Whether the variant has a positive class (two-class labels)."""
        return self.labels == "binary"

    @property
    def likelihood_kind(self) -> str:
        """What its per-item log-likelihood is a density of: ``"categorical"``,
        ``"continuous"``, ``"composite"`` or ``"features"``."""
        if self.likelihood:
            return self.likelihood
        return "continuous" if self.labels == "continuous" else "categorical"


# -------------------------------------- the calibration study's label tables
# Each draws a table from prior values with the family's own simulate:
# table(family module, values, design, features, rng).
def _two_coin_table(family, values, design, features, rng):
    """Two-coin labels (from the features' classifier when the design has features)."""
    per = design["labels_per_item"]
    if features is not None:
        return family.simulate(values["sensitivity"], values["specificity"], features=features,
                               coef=values["coef"], intercept=float(values["intercept"]),
                               labels_per_item=per, rng=rng)
    return family.simulate(values["sensitivity"], values["specificity"],
                           n_items=design["n_items"], prevalence=float(values["prevalence"]),
                           labels_per_item=per, rng=rng)


def _dawid_skene_table(family, values, design, features, rng):
    """Dawid-Skene labels from each annotator's confusion."""
    return family.simulate(values["confusion"], n_items=design["n_items"],
                           prevalence=values["prevalence"],
                           labels_per_item=design["labels_per_item"], rng=rng)


def _spammer_table(family, values, design, features, rng):
    """Spammer (MACE) labels from trust and spam shares."""
    return family.simulate(values["trustworthiness"], n_items=design["n_items"],
                           spam_share=values["spam_share"], n_classes=design["n_classes"],
                           prevalence=values["prevalence"],
                           labels_per_item=design["labels_per_item"], rng=rng)


def _glad_table(family, values, design, features, rng):
    """Item-difficulty (GLAD) labels from abilities and easiness."""
    return family.simulate(values["ability"], values["easiness"], n_classes=design["n_classes"],
                           prevalence=values["prevalence"],
                           labels_per_item=design["labels_per_item"], rng=rng)


def _community_table(family, values, design, features, rng):
    """Community-model labels from each annotator's drawn confusion (each annotator
    its own group of ``simulate``, rows kept as drawn: no spread added)."""
    j = design["n_annotators"]
    return family.simulate(values["confusion"], list(range(j)), n_items=design["n_items"],
                           prevalence=values["prevalence"],
                           labels_per_item=design["labels_per_item"], rng=rng)


def _irt_table(family, values, design, features, rng):
    """Item-difficulty IRT labels (two classes)."""
    return family.simulate_irt(values["ability"], values["bias"], values["difficulty"],
                               values["easiness"], prevalence=float(values["prevalence"][1]),
                               labels_per_item=design["labels_per_item"], rng=rng)


def _latent_ordinal_table(family, values, design, features, rng):
    """Latent ordinal levels from biases, noise and level spacing."""
    return family.simulate(variant="latent", n_items=design["n_items"],
                           n_classes=design["n_classes"], bias=values["bias"],
                           noise=values["noise"], level_spacing=values["level_spacing"],
                           prevalence=values["prevalence"],
                           labels_per_item=design["labels_per_item"], rng=rng)


def _continuous_table(family, values, design, features, rng, noise="gaussian"):
    """Continuous labels with the case's noise."""
    return family.simulate(values["precision"], bias=values.get("bias"),
                           n_items=design["n_items"], intercept=float(values["intercept"]),
                           truth_precision=float(values["truth_precision"]),
                           labels_per_item=design["labels_per_item"], noise=noise, rng=rng)


def _student_t_table(family, values, design, features, rng):
    """Continuous labels with Student-t noise."""
    return _continuous_table(family, values, design, features, rng, noise="student_t")


def _feature_accuracy_table(family, values, design, features, rng):
    """Feature-accuracy labels on the design's fixed features."""
    return family.simulate(features=features, coef=values["coef"],
                           intercept=float(values["intercept"]), mechanism="model",
                           accuracy_intercept=values["accuracy_intercept"],
                           accuracy_coef=values["accuracy_coef"],
                           labels_per_item=design["labels_per_item"], rng=rng)


# -------------------------------------------------------------- the priors
# Each family's prior keywords, in the order of its DEFAULT_PRIORS; a keyword
# that several families take keeps one --help text (and metavar).
_SENSITIVITY = Prior("sensitivity_prior", (3.0, 2.0), "beta", "A,B",
                     "Beta prior of each annotator's sensitivity")
_SPECIFICITY = Prior("specificity_prior", (3.0, 2.0), "beta", "A,B",
                     "Beta prior of each annotator's specificity")
_PREVALENCE = Prior("prevalence_prior", 2.0, "concentration", "A,B|C",
                    "prior of the class shares (without --features): Beta A,B of the positive "
                    "share (of each threshold, ordinal cumulative) or a Dirichlet concentration C",
                    flat=1.0)
_BETA_PREVALENCE = replace(_PREVALENCE, default=(2.0, 2.0), kind="beta", needs="no-features")
_SPREAD_PRIOR = Prior("spread_prior", 1.0, "positive", "S", "HalfNormal scale of the annotators' "
                      "spread around the population confusion", variants=("hierarchical",))
_BIAS_SD = Prior("bias_sd", 1.0, "positive", "SD",
                 "prior sd of the annotators' biases (continuous, with --bias: in units of the "
                 "labels' sd; ordinal latent: in levels; item-difficulty irt: half the gap "
                 "between the sensitivity and specificity abilities)")
_COEF_PRECISION = Prior("coef_precision", 1.0, "nonnegative", "P|auto",
                        "Gaussian prior precision of the classifier's coefficients on the "
                        "standardised features, with --features: a number (0: flat; "
                        "dawid-skene needs > 0), or 'auto' (the default; ordinal: each "
                        "threshold its own; latent: 1), chosen by the crowd labels' "
                        "evidence",
                        needs="features", flat=0.0)
_INTERCEPT_PRECISION = Prior("intercept_precision", 0.01, needs="features", flat=0.0)
_AUTO_PRECISION = replace(_COEF_PRECISION, default="auto", kind="auto_nonnegative",
                          shown="auto")
"""Two-coin's, Dawid-Skene's, the continuous and the ordinal models'
``coef_precision``: ``"auto"`` by default, chosen by empirical Bayes
(``_evidence``; benchmarks/README.md, classifier_prior.py, continuous_prior.py
and ordinal_prior.py, has the leave-one-set-out tables behind the default)."""

_TWO_COIN_PRIORS = (_SENSITIVITY, _SPECIFICITY, _BETA_PREVALENCE, _AUTO_PRECISION,
                    _INTERCEPT_PRECISION)
_DAWID_SKENE_PRIORS = (
    Prior("confusion_prior", None, "diag_off", "DIAG,OFF",
          "Dirichlet pseudo-counts of each confusion row, DIAG on the diagonal and OFF on "
          "every other cell", shown="3,1+1/(K-1)", variants=("full",)),
    Prior("accuracy_prior", (3.0, 2.0), "beta", "A,B", "Beta prior of each annotator's accuracy",
          variants=("one_coin",)),
    replace(_PREVALENCE, needs="no-features"),
    Prior("population_prior", (2.0, 1.5), "location_sd", "ADV,SD",
          "diagonal advantage and sd (log-odds) of the population confusion",
          variants=("hierarchical", "pooled")),
    _SPREAD_PRIOR,
    Prior("spread", None, "positive", "S",
          "the fixed log-odds spread of the annotators' confusion rows around the population "
          "(default: chosen by empirical Bayes)", shown="empirical Bayes", variants=("pooled",),
          setting=True),
    replace(_AUTO_PRECISION, kind="auto_positive"),
    _INTERCEPT_PRECISION,
)
_CUMULATIVE, _LATENT = ("cumulative",), ("latent",)
_ORDINAL_PRIORS = (
    replace(_SENSITIVITY, variants=_CUMULATIVE),
    replace(_SPECIFICITY, variants=_CUMULATIVE),
    # None: Beta(2, 2) on each threshold's share (cumulative), Dirichlet(2) (latent)
    replace(_BETA_PREVALENCE, default=None, shown="2,2", variants=_CUMULATIVE),
    replace(_PREVALENCE, default=None, shown="2", variants=_LATENT, needs="no-features"),
    _AUTO_PRECISION,  # latent: its truth's ordered logit ("auto": ordinal.pooled_precision)
    _INTERCEPT_PRECISION,
    replace(_BIAS_SD, variants=_LATENT),
    Prior("noise_prior", (2.0, 1.0), "shape_rate", "SHAPE,RATE",
          "Gamma prior of each annotator's noise (in levels)", variants=_LATENT),
    Prior("spacing_prior", 5.0, variants=_LATENT),
    Prior("width_sd", 0.5, variants=_LATENT),
    Prior("guess_prior", (1.0, 4.0), variants=_LATENT),
)
_CONTINUOUS_PRIORS = (
    Prior("precision_prior", (2.0, 0.1), "gamma", "SHAPE,RATE",
          "Gamma prior of each annotator's precision, in units of the labels' sd (1,0: flat)"),
    Prior("truth_precision_prior", (2.0, 0.1), "gamma", "SHAPE,RATE",
          "Gamma prior of the precision of the true values around their mean (1,0: flat)"),
    replace(_BIAS_SD, needs="bias"),
    Prior("scale_sd", 0.5, "positive", "SD",
          "prior sd of the annotators' scales around 1 (with --scale)", needs="scale"),
    _AUTO_PRECISION,
    _INTERCEPT_PRECISION,
    Prior("nu", 4.0, "positive", "NU", "degrees of freedom of the annotators' Student-t noise",
          variants=("student_t",), setting=True),
)
# --penalty is the command line's own option (several rates, chosen between)
_FEATURE_ACCURACY_PRIORS = (Prior("penalty", 1.0), _INTERCEPT_PRECISION,
                            Prior("accuracy_intercept_precision", 0.01))
_SPAMMER_PRIORS = (
    Prior("trustworthiness_prior", (1.5, 1.5), "beta", "A,B",
          "Beta prior of each annotator's trustworthiness (the chance a label is not spam)"),
    Prior("spam_prior", 1.5, "concentration", "C",
          "Dirichlet concentration of each annotator's spam shares"),
    _PREVALENCE,
)
_IRT = ("irt", "irt_hierarchical")
_ITEM_DIFFICULTY_PRIORS = (
    Prior("ability_prior", (1.0, 1.0), "location_sd", "MEAN,SD",
          "Normal prior of each annotator's ability"),
    Prior("easiness_sd", 1.0, "positive", "SD",
          "Normal sd of each item's log easiness (irt: its log discrimination)",
          variants=("fixed", "irt")),
    _SPREAD_PRIOR,
    _PREVALENCE,
    replace(_BIAS_SD, variants=_IRT),
    Prior("difficulty_sd", 1.0, "positive", "SD", "Normal sd of each item's difficulty",
          variants=("irt",)),
)
_STACKED_GAUSSIAN_PRIORS = (Prior("label_share_prior", 2.0), Prior("class_mean_sd", 10.0),
                            Prior("covariance_prior", "default"))
_COMMUNITY_PRIORS = (
    Prior("community_prior", (2.0, 1.5), "location_sd", "ADV,SD",
          "diagonal advantage and sd (log-odds) of each community's confusion"),
    Prior("community_share_prior", 2.0, "concentration", "C",
          "Dirichlet concentration of the communities' shares of the annotators"),
    _PREVALENCE,
    Prior("n_communities", 3, "count", "N", "the number of communities", setting=True),
)


# ------------------------------------------------------------- the records
_UNIT = {"label_scale": 1.0}  # the continuous priors in fixed units, not the labels' sd
_TWO_COIN_TEMPLATE = {"prevalence": 0.5}  # two-coin's prevalence is P(positive)
_NO_BIAS = {"bias": None}  # the continuous model without biases

REGISTRY: tuple[Variant, ...] = (
    Variant("two_coin", "two-coin", "binary", cli="two-coin", cli_default=True,
            choice=Choice("two_coin", 0, lambda K: 2), priors=_TWO_COIN_PRIORS,
            sbc=(Case(None, _two_coin_table, template=_TWO_COIN_TEMPLATE),
                 Case("features", _two_coin_table, {"coef_precision": 1.0},  # data-free prior
                      template=_TWO_COIN_TEMPLATE, features=2))),
    Variant("dawid_skene", "Dawid-Skene", "categorical", "full", "variant", cli="dawid-skene",
            cli_default=True, choice=Choice("dawid_skene", 4, lambda K: K * (K - 1)),
            priors=_DAWID_SKENE_PRIORS,
            sbc=(Case("full", _dawid_skene_table, {"variant": "full"}),)),
    Variant("dawid_skene", "Dawid-Skene (one-coin)", "categorical", "one_coin", "variant",
            cli="dawid-skene", choice=Choice("one_coin", 1, lambda K: 1),
            priors=_DAWID_SKENE_PRIORS,
            sbc=(Case("one_coin", _dawid_skene_table, {"variant": "one_coin"}),)),
    Variant("dawid_skene", "Dawid-Skene (hierarchical)", "categorical", "hierarchical",
            "variant", cli="dawid-skene", has_em=False, priors=_DAWID_SKENE_PRIORS,
            sbc=(Case("hierarchical", _dawid_skene_table, {"variant": "hierarchical"}),)),
    Variant("dawid_skene", "Dawid-Skene (pooled)", "categorical", "pooled", "variant",
            cli="dawid-skene", priors=_DAWID_SKENE_PRIORS,
            choice=Choice("pooled", 5, lambda K: K * (K - 1)),
            sbc=(Case("pooled", _dawid_skene_table, {"variant": "pooled", "spread": 1.0}),)),
    Variant("ordinal", "ordinal (cumulative)", "ordered", "cumulative", "variant",
            cli="ordinal", cli_default=True, likelihood="composite", priors=_ORDINAL_PRIORS),
    Variant("ordinal", "ordinal (latent)", "ordered", "latent", "variant", cli="ordinal",
            has_em=False, choice=Choice("ordinal", 7, lambda K: 2, sharing=True),  # bias, noise
            priors=_ORDINAL_PRIORS,
            sbc=(Case("latent", _latent_ordinal_table, {"variant": "latent"}),)),
    Variant("continuous", "continuous", "continuous", "gaussian", "noise", cli="continuous",
            cli_default=True, priors=_CONTINUOUS_PRIORS,
            sbc=(Case("gaussian", _continuous_table, _UNIT, template=_NO_BIAS),
                 Case("bias", _continuous_table, {**_UNIT, "bias": True}))),
    Variant("continuous", "continuous (student-t)", "continuous", "student_t", "noise",
            cli="continuous", has_em=False, priors=_CONTINUOUS_PRIORS,
            sbc=(Case("student_t", _student_t_table, {**_UNIT, "noise": "student_t"},
                      template=_NO_BIAS),)),
    # the lasso's MAP puts coefficients at exactly zero, where the Laplace
    # approximation has no curvature: its intervals are not the posterior's
    Variant("feature_accuracy", "feature-accuracy", "binary", cli="feature-accuracy",
            cli_default=True, priors=_FEATURE_ACCURACY_PRIORS,
            sbc=(Case(None, _feature_accuracy_table, laplace=False, features=2),)),
    Variant("spammer", "spammer (MACE)", "categorical", cli="spammer", cli_default=True,
            choice=Choice("spammer", 2, lambda K: K, sharing=True),  # trust, K - 1 spam shares
            priors=_SPAMMER_PRIORS, sbc=(Case(None, _spammer_table),)),
    Variant("item_difficulty", "item-difficulty (GLAD) (fixed)", "categorical", "fixed", "variant",
            cli="item-difficulty", cli_default=True, priors=_ITEM_DIFFICULTY_PRIORS,
            choice=Choice("item_difficulty", 3, lambda K: 1, sharing=True),
            sbc=(Case("fixed", _glad_table, {"variant": "fixed"}),)),
    Variant("item_difficulty", "item-difficulty (GLAD) (hierarchical)", "categorical",
            "hierarchical", "variant", cli="item-difficulty", has_em=False, has_mode=False,
            priors=_ITEM_DIFFICULTY_PRIORS,
            sbc=(Case("hierarchical", _glad_table, {"variant": "hierarchical"}),)),
    Variant("item_difficulty", "item-difficulty (GLAD) (irt)", "binary", "irt", "variant",
            cli="item-difficulty", priors=_ITEM_DIFFICULTY_PRIORS,
            choice=Choice("irt", 6, lambda K: 2, sharing=True, on_request=True),  # ability, bias
            sbc=(Case("irt", _irt_table, {"variant": "irt"}),)),
    Variant("item_difficulty", "item-difficulty (GLAD) (irt-hierarchical)", "binary",
            "irt_hierarchical", "variant", cli="item-difficulty", has_em=False,
            has_mode=False, priors=_ITEM_DIFFICULTY_PRIORS),
    Variant("stacked_gaussian", "stacked Gaussian", "categorical", has_em=False,
            likelihood="features", priors=_STACKED_GAUSSIAN_PRIORS),
    # not a model-choice candidate yet; its SBC case ranks what the communities'
    # order does not name (each annotator's confusion, the prevalence)
    Variant("community", "community (CBCC)", "categorical", cli="community", cli_default=True,
            priors=_COMMUNITY_PRIORS,
            sbc=(Case(None, _community_table, unranked=("community",)),)),
)
"""Every (family, variant), grouped by family, each family's variants in the
order of its ``VARIANTS``."""


def find(family, variant="") -> Variant | None:
    """The record of a (family, variant), or None; a family's only record
    answers for any variant, and ``"-"`` reads as ``"_"``."""
    if not isinstance(family, str):
        return None
    family = family.replace("-", "_")
    records = [r for r in REGISTRY if r.family == family]
    variant = variant if isinstance(variant, str) else ""
    for record in records:
        if record.variant == variant:
            return record
    return records[0] if len(records) == 1 else None


def cli_variants() -> dict[str, tuple[str, ...]]:
    """``--model`` name -> its ``--variant`` names, the default first."""
    out: dict[str, tuple[str, ...]] = {}
    for record in REGISTRY:
        if record.cli:
            names = out.get(record.cli, ())
            if record.variant:
                names = ((record.variant, *names) if record.cli_default
                         else (*names, record.variant))
            out[record.cli] = names
    return out


def cli_records() -> dict[tuple[str, str], Variant]:
    """(``--model``, ``--variant``) -> record, for the command line's names."""
    return {(r.cli, r.variant): r for r in REGISTRY if r.cli}


def cli_modules() -> dict[str, str]:
    """``--model`` name -> the module that holds its family."""
    return {r.cli: r.module_name for r in REGISTRY if r.cli}


def candidates() -> list[Variant]:
    """The records with a model-choice role, in their comparison order."""
    return sorted((r for r in REGISTRY if r.choice), key=lambda r: r.choice.rank)


def sbc_cases() -> dict[tuple[str, str | None], tuple[Variant, Case]]:
    """(family, case name) -> (record, case) of every calibration case."""
    return {(r.family, case.name): (r, case) for r in REGISTRY for case in r.sbc}


def refuse_unused(family: str, variant: str, has_features: bool, has_classifier: bool = False,
                  **given) -> None:
    """A ValueError for a prior keyword given a value that says something
    (:func:`informative`) where the fit would leave it unused: one of the
    classifier of the features (``needs="features"``) without features, or
    beside a black-box classifier, which replaces it; or of the class shares
    (``needs="no-features"``) with features, where the classifier gives the
    shares. The command line refuses the same options by its flags' names first."""
    record = find(family, variant)
    for prior, value in informative(family, variant, **given):
        if prior.needs == "features" and has_classifier:
            raise ValueError(
                f"{prior.name}={value!r} is a prior of the built-in classifier, and "
                f"classifier= replaces it: the estimator's own regularisation applies "
                f"(regularization='auto' chooses it, or {{parameter: values}}). Leave "
                f"{prior.name} out.")
        if prior.needs == "features" and not has_features:
            what = "regression" if record.labels == "continuous" else "classifier"
            raise ValueError(
                f"{prior.name}={value!r} is a prior of the {what} of the features, and "
                f"these annotations have no features, so the {record.title} model would not "
                f"use it. Leave {prior.name} out, or give the items' features (from_frame("
                f"..., features=...) or annotations.with_features(X)).")
        if prior.needs == "no-features" and has_features:
            raise ValueError(
                f"{prior.name}={value!r} is the prior of the class shares, and with features "
                f"the {record.title} model takes the shares from the classifier of the "
                f"features, so it would not use it. Leave {prior.name} out (coef_precision "
                f"and intercept_precision are the classifier's priors), or fit without the "
                f"features (annotations.with_features(None)).")


def informative(family: str, variant: str, **given) -> list[tuple[Prior, object]]:
    """The (prior, value) pairs of ``given`` that say something: the (family,
    variant)'s prior keywords given a value other than None, their default and,
    in every entry, their flat number."""
    record = find(family, variant)
    return [(prior, given[prior.name]) for prior in (record.variant_priors if record else ())
            if prior.name in given and given[prior.name] is not None
            and not _same_numbers(given[prior.name], prior.default, broadcast=False)
            and not _same_numbers(given[prior.name], prior.flat, broadcast=True)]


def _same_numbers(value, target, *, broadcast: bool) -> bool:
    """Whether ``value`` is ``target``: the same string, or the same numbers (of
    the same shape, or every entry ``target``'s one number where ``broadcast``);
    a None ``target`` matches nothing."""
    import numpy as np

    if target is None or isinstance(value, str) or isinstance(target, str):
        return isinstance(value, str) and value == target
    try:
        a, b = np.asarray(value, dtype=float), np.asarray(target, dtype=float)
    except (TypeError, ValueError):
        return False
    return a.size > 0 and (broadcast or a.shape == b.shape) and bool(np.all(a == b))


def default_priors(family: str) -> dict:
    """A family's ``DEFAULT_PRIORS``: each prior keyword of its records (settings
    left out) and its default, in the records' order."""
    records = [r for r in REGISTRY if r.family == family]
    if not records:
        raise ValueError(f"{family!r} is not a family of the registry.")
    out = {}
    for record in records:
        for prior in record.priors:
            if not prior.setting:
                out.setdefault(prior.name, prior.default)
    return out
