"""How a fit describes itself in titles: family, method, positive class; and
the small argument checks the figures share."""

from __future__ import annotations

import numpy as np
import xarray as xr

from crowd_models import _dims as D
from crowd_models._fits import has_laplace, n_samples
from crowd_models.models import _registry

_METHOD_NAMES = {"em": "EM", "map": "MAP", "nuts": "NUTS", "laplace": "MAP (Laplace intervals)"}
"""Display names of the fitting methods, by the ``method`` attr of a fit."""


def _fit_family(fit) -> tuple[str, str]:
    """The (family, variant) a fit records in its attrs (every fit of a family's
    factory or EM does); ``("", "")`` when it records none."""
    attrs = getattr(fit, "attrs", {})
    family, variant = attrs.get("family"), attrs.get("variant")
    family = family.replace("-", "_") if isinstance(family, str) else ""
    return family, variant if isinstance(variant, str) else ""


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
    """Family, variant and method of a fit for a title, e.g. ``"two-coin, EM"``: the
    registry's title of the (family, variant) the fit records."""
    family, variant = _fit_family(fit)
    record = _registry.find(family, variant)
    if record is not None:
        name = record.title
    else:
        name = family.replace("_", " ") or "unknown family"
        if variant:
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
    shown = set(best)  # n can be every annotator (plot_confusion_groups): not a list scan
    worst = [int(i) for i in order[::-1][:2 * n] if int(i) not in shown][:n]
    return best, worst
