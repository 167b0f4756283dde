"""What both ordinal variants share: the levels (integer classes, increasing in
the class order), the thresholds between them, the variants' names and their
default priors.

    per crossing, and NUTS chains did not mix).

Levels. The annotations' classes must be integers, increasing in the class
order: 1..K (the loaders ``load_web_search`` and ``load_anesthesia`` give
1..5 and 1..4), 0..K-1, or any other increasing codes; the thresholds are
"""

from __future__ import annotations

import numpy as np

from crowd_models import _dims as D
from crowd_models._text import listing
from crowd_models.data import Annotations
from crowd_models.models import _common as C
from crowd_models.models import _registry

VARIANTS = ("cumulative", "latent")
LINKS = ("logit", "probit")

DEFAULT_PRIORS = _registry.default_priors("ordinal")
"""Weakly informative defaults.

Cumulative: the two-coin defaults for every threshold, Beta(3, 2) on
sensitivity and specificity (a and b broadcast over (annotator, threshold)),
``prevalence_prior=None`` = Beta(2, 2) on each P(level > c), N(0, 1 / alpha_c)
coefficients with alpha_c each threshold's evidence precision
(``coef_precision="auto"``) and N(0, 10^2) intercepts.

Latent: ``prevalence_prior=None`` = symmetric Dirichlet(2); Normal(0,
``bias_sd`` = 1) biases (in level units); Gamma(shape 2, rate 1) noise (mode 1
level, mean 2; shape > 1 keeps the mode off zero); Dirichlet(5) level spacing
(favours equally spaced levels); ``width_sd`` = 0.5 for the per-annotator
log width ratios (a ratio within 0.37 .. 2.7 at two sd); Beta(1, 4) on the
guessing rate (mode 0, mean 0.2)."""


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



def level_coords(annotations: Annotations) -> dict:
    """The coordinates of an ordinal fit: the annotations' own, the thresholds
    (:func:`threshold_names`) and the interior levels.

    Parameters
    ----------
    annotations : Annotations
        Ordinal annotations.

    Returns
    -------
    dict
        Dimension name -> coordinate values.

    Examples
    --------
    >>> from crowd_models.models.ordinal import levels
    >>> levels.level_coords(cm.datasets.load_anesthesia())["threshold"]
    """
    return annotations.coords() | {D.THRESHOLD: threshold_names(annotations),
                                   D.INNER_LEVEL: list(annotations.classes[1:-1])}
