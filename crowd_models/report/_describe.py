"""How a fit describes itself in titles: family, method, positive class; and
the small argument checks the figures share."""

from __future__ import annotations

import numpy as np
import xarray as xr

from crowd_models import _dims as D
from crowd_models._fits import has_laplace, n_samples
from crowd_models.report._confusion import _is_one_coin

_FAMILY_NAMES = {"two_coin": "two-coin", "dawid_skene": "Dawid-Skene", "ordinal": "ordinal",
                 "continuous": "continuous", "feature_accuracy": "feature-accuracy",
                 "stacked_gaussian": "stacked Gaussian", "spammer": "spammer (MACE)",
                 "item_difficulty": "item-difficulty (GLAD)"}
"""Display names of the families, by the ``family`` attr their EM fits record."""
_METHOD_NAMES = {"em": "EM", "map": "MAP", "nuts": "NUTS", "laplace": "MAP (Laplace intervals)"}
"""Display names of the fitting methods, by the ``method`` attr of a fit."""


def _fit_family(fit, post: xr.Dataset) -> tuple[str, str]:
    """The (family, variant) of a fit: from its attrs, else read off its variables."""
    attrs = getattr(fit, "attrs", {})
    recorded, variant = attrs.get("family"), attrs.get("variant")
    variant = variant if isinstance(variant, str) else ""
    if isinstance(recorded, str) and recorded:
        return recorded.replace("-", "_"), variant
    # only an EM fit (or a saved report) records its family; a MAP or NUTS
    # DataTree is recognised by the variables each family alone has
    if "sensitivity" in post:
        if D.THRESHOLD in post["sensitivity"].dims:
            return "ordinal", "cumulative"
        return "two_coin", ""
    if "precision" in post and "true_value" in post:
        return "continuous", ""
    if "accuracy_intercept" in post:
        return "feature_accuracy", ""
    if "trustworthiness" in post:
        return "spammer", ""
    if "ability" in post and "easiness" in post:
        return "item_difficulty", "hierarchical" if "easiness_spread" in post else "fixed"
    if "confusion" in post:
        if "bias" in post and "noise" in post:
            return "ordinal", "latent"
        return "dawid_skene", "one_coin" if _is_one_coin(post) else ""
    if "class_mean" in post:
        return "stacked_gaussian", ""
    return "", ""


def _fit_method(fit, post: xr.Dataset) -> str:
    """The fitting method of a fit for titles: EM, MAP or NUTS (or the recorded name)."""
    if has_laplace(fit):
        return _METHOD_NAMES["laplace"]
    method = getattr(fit, "attrs", {}).get("method")
    if isinstance(method, str) and method:
        return _METHOD_NAMES.get(method.lower(), method)
    if n_samples(post) > 1:
        return "NUTS"
    return "MAP" if isinstance(fit, xr.DataTree) else "EM"


def _fit_description(fit, post: xr.Dataset) -> str:
    """Family, variant and method of a fit for a title, e.g. ``"two-coin, EM"``."""
    family, variant = _fit_family(fit, post)
    name = _FAMILY_NAMES.get(family, family.replace("_", " ") or "unknown family")
    if variant and variant not in ("two_coin", "full"):
        name += f" ({variant.replace('_', '-')})"
    return f"{name}, {_fit_method(fit, post)}"


def _positive_class(post: xr.Dataset):
    """The positive class of a binary fit, the second ``true_class``; None if unknown."""
    if D.TRUE_CLASS in post.coords and post.sizes[D.TRUE_CLASS] == 2:
        return post[D.TRUE_CLASS].values[1]
    return None


def _check_count(value, name: str) -> int:
    """A non-negative integer option, or a ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}.")
    return int(value)


def _extremes(score, n: int) -> tuple[list[int], list[int]]:
    """Positions of the ``n`` highest and the ``n`` lowest finite scores, none in both."""
    score = np.asarray(score, dtype=float)
    finite = np.flatnonzero(np.isfinite(score))
    order = finite[np.argsort(-score[finite], kind="mergesort")]
    best = [int(i) for i in order[:n]]
    worst = [int(i) for i in order[::-1] if i not in best][:n]
    return best, worst
