"""Ground floor for reading fits: draws, intervals and label counts.

The three kinds of fit (an EM ``xarray.Dataset`` with ``chain=1, draw=1``, a
MAP ``DataTree`` with one draw, a NUTS ``DataTree`` with many) are read alike
through these helpers, which the report and the families share.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from crowd_models import _dims as D

SAMPLE_DIMS = (D.CHAIN, D.DRAW)
"""The dims that index posterior draws."""

MC_DRAWS = 4000
"""Monte Carlo draws per annotator from an EM fit's conjugate approximations."""
MC_SEED = 2009
"""Seed of those draws, so that a summary is reproducible."""


def posterior_of(fit) -> xr.Dataset:
    """The posterior Dataset of a fit: a DataTree's ``posterior`` group, or an EM Dataset."""
    if isinstance(fit, xr.Dataset):
        return fit
    if isinstance(fit, xr.DataTree):
        if "posterior" not in fit.children:
            raise ValueError("this DataTree has no posterior group.")
        return fit["posterior"].to_dataset()
    raise TypeError(
        f"expected a fit (an EM xarray.Dataset, or a DataTree from fit_map/sample), got "
        f"{type(fit).__name__}."
    )


def component_fits(fit) -> dict:
    """An averaged fit's components (its ``components`` group), by name, each as the
    kind of fit it was: a DataTree with a ``posterior`` group, or an EM Dataset with
    its attrs. Empty for any other fit."""
    if not (isinstance(fit, xr.DataTree) and "components" in fit.children):
        return {}
    parts = {}
    for name, node in fit["components"].children.items():
        if "posterior" in node.children:
            parts[name] = node.copy(inherit=False)
        else:
            parts[name] = node.to_dataset(inherit=False)
            parts[name].attrs = dict(node.attrs)
    return parts


def has_laplace(fit) -> bool:
    """Whether a fit carries Laplace draws (``fit_map(..., laplace=True)``)."""
    return isinstance(fit, xr.DataTree) and "laplace" in fit.children


def check_ci_prob(ci_prob) -> float:
    """``ci_prob`` as a float strictly between 0 and 1, or a ``ValueError``."""
    if isinstance(ci_prob, bool) or not isinstance(ci_prob, int | float | np.number):
        raise ValueError(
            f"ci_prob must be a number strictly between 0 and 1 (e.g. 0.9), got {ci_prob!r}."
        )
    if not 0 < float(ci_prob) < 1:
        raise ValueError(
            f"ci_prob must be strictly between 0 and 1 (e.g. 0.9 for a 90% interval), got "
            f"{ci_prob!r}."
        )
    return float(ci_prob)


def n_samples(post: xr.Dataset) -> int:
    """Number of draws (chain x draw) in a posterior Dataset."""
    return int(np.prod([post.sizes.get(d, 1) for d in SAMPLE_DIMS]))


def is_annotator_measure(da: xr.DataArray) -> bool:
    """Whether a variable is numeric with dims exactly (chain, draw, annotator)."""
    return set(da.dims) == {*SAMPLE_DIMS, D.ANNOTATOR} and np.issubdtype(da.dtype, np.number)


def draw_matrix(da: xr.DataArray, dim: str = D.ANNOTATOR) -> np.ndarray:
    """Draws of a (chain, draw, ``dim``) variable as a float (sample, ``dim``) array
    (one row when it has no sample dims)."""
    da = da.transpose(*[d for d in SAMPLE_DIMS if d in da.dims], dim)
    return np.asarray(da.values, dtype=float).reshape(-1, da.sizes[dim])


def annotator_vector(ds: xr.Dataset, name: str) -> np.ndarray:
    """A per-annotator variable (first draw, if it has draws) as a float vector."""
    da = ds[name]
    da = da.isel({d: 0 for d in SAMPLE_DIMS if d in da.dims})
    return np.asarray(da.transpose(D.ANNOTATOR).values, dtype=float)


def equal_tailed(draws, ci_prob: float) -> tuple[np.ndarray, np.ndarray]:
    """ArviZ's equal-tailed ``ci_prob`` interval (``arviz_stats.eti``, linear
    interpolation) over the first axis of the draws: (lower, upper)."""
    import arviz_stats  # 2 s to import: only when a report asks for an interval

    bounds = arviz_stats.eti(np.asarray(draws, dtype=float), prob=ci_prob, axis=0)
    return bounds[..., 0], bounds[..., 1]


def summarise_draws(draws: np.ndarray, ci_prob: float) -> dict[str, np.ndarray]:
    """``mean``, ``sd`` (ddof=1) and equal-tailed ``lower``/``upper`` of (sample, k) draws."""
    lower, upper = equal_tailed(draws, ci_prob)
    return {"mean": draws.mean(axis=0), "sd": draws.std(axis=0, ddof=1),
            "lower": lower, "upper": upper}


def labels_per_annotator(fit, post: xr.Dataset, annotators: pd.Index) -> pd.Series:
    """Labels per annotator (``n_labels``) from an EM Dataset or a DataTree's
    constant_data, reindexed to ``annotators``; NaN where the fit lacks them."""
    source = None
    if "n_labels" in post and post["n_labels"].dims == (D.ANNOTATOR,):
        source = post["n_labels"]
    elif isinstance(fit, xr.DataTree) and "constant_data" in fit.children:
        const = fit["constant_data"].to_dataset()
        if "n_labels" in const and const["n_labels"].dims == (D.ANNOTATOR,):
            source = const["n_labels"]
    if source is None:
        return pd.Series(np.nan, index=annotators, name="n_labels")
    counts = pd.Series(np.asarray(source.values), index=pd.Index(source[D.ANNOTATOR].values))
    counts = counts.reindex(annotators)
    if counts.notna().all():
        counts = counts.astype(np.int64)
    return counts.rename("n_labels")


def draws_table(draws: dict[str, np.ndarray], index: pd.Index, ci_prob: float) -> pd.DataFrame:
    """Columns ``<name>_mean``, ``_sd``, ``_lower``, ``_upper`` from (sample, row)
    draws per name; a single draw gives its value and NaN spreads."""
    columns = {}
    for name, values in draws.items():
        values = np.asarray(values, dtype=float)
        if len(values) > 1:
            stats = summarise_draws(values, ci_prob)
        else:
            nan = np.full(values.shape[1], np.nan)
            stats = {"mean": values[0], "sd": nan, "lower": nan, "upper": nan}
        columns.update({f"{name}_{k}": stats[k] for k in ("mean", "sd", "lower", "upper")})
    return pd.DataFrame(columns, index=index)


def item_draws(post: xr.Dataset, annotations=None):
    """(sample, item) draws of true_value and true_value_sd, and the item ids."""
    for name in ("true_value", "true_value_sd"):
        if name not in post:
            raise ValueError(
                f"this fit has no {name!r} (item); is it a continuous fit? Its variables are "
                f"{sorted(map(str, post.data_vars))}."
            )
    items = pd.Index(post[D.ITEM].values)
    mean = draw_matrix(post["true_value"], D.ITEM)
    sd = draw_matrix(post["true_value_sd"], D.ITEM)
    if annotations is not None:
        pos = items.get_indexer(annotations.items)
        if (pos < 0).any() or len(items) != annotations.n_items:
            raise ValueError("the fit's items are not the annotations' items; score a fit of "
                             "these annotations.")
        mean, sd, items = mean[:, pos], sd[:, pos], annotations.items
    return mean, sd, items
