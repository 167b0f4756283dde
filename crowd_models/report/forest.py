"""Forest plots of annotator measures across fits (ArviZ's ``plot_forest``)."""

from __future__ import annotations

import numpy as np
import xarray as xr

from crowd_models import _dims as D
from crowd_models._fits import MC_DRAWS, MC_SEED, check_ci_prob, has_laplace, posterior_of
from crowd_models.inference import laplace_fit
from crowd_models.report._approximations import approximation

__all__ = ["forest_draws", "plot_forest"]


def _names(var_names) -> list[str]:
    if isinstance(var_names, str):
        return [var_names]
    names = list(var_names) if isinstance(var_names, list | tuple) else []
    if not names or not all(isinstance(n, str) for n in names):
        raise TypeError(f"var_names must be a variable name or a list of them, got "
                        f"{var_names!r}.")
    return names


def _one_fit_draws(fit, names: list[str], n_draws: int, rng) -> xr.Dataset:
    """(chain=1, draw=n_draws) draws of ``names`` from one fit."""
    post = posterior_of(laplace_fit(fit) if has_laplace(fit) else fit)
    missing = [n for n in names if n not in post]
    if missing:
        raise ValueError(f"the fit has no variable(s) {missing}; its variables are "
                         f"{sorted(map(str, post.data_vars))}.")
    sample = post[names].stack(sample=(D.CHAIN, D.DRAW)).transpose("sample", ...)
    size = sample.sizes["sample"]
    out = {}
    for name in names:
        da = sample[name]
        dims = da.dims[1:]
        dist = approximation(post, name) if size == 1 else None
        if dist is not None:  # an EM fit's conjugate approximation, drawn from
            values = dist.rvs(size=(n_draws, da.shape[1]), random_state=rng)
        elif size == 1:  # a point without uncertainty: drawn as a point
            values = np.repeat(da.values, n_draws, axis=0)
        else:
            pick = np.arange(size) if size == n_draws else np.sort(
                rng.choice(size, n_draws, replace=size < n_draws))
            values = da.values[pick]
        out[name] = ((D.CHAIN, D.DRAW, *dims), values[None])
    coords = {d: post[d].values for n in names for d in post[n].dims
              if d not in (D.CHAIN, D.DRAW) and d in post.coords}
    return xr.Dataset(out, coords={**coords, D.CHAIN: [0], D.DRAW: np.arange(n_draws)})


def forest_draws(fits, var_names, *, n_draws: int = MC_DRAWS) -> dict[str, xr.DataTree]:
    """Each fit as a DataTree of ``n_draws`` posterior draws of ``var_names``, so that
    ArviZ can compare EM, MAP and NUTS fits side by side.

    Parameters
    ----------
    fits : xarray.Dataset, xarray.DataTree or dict
        A fit, or a dict ``{label: fit}`` of EM Datasets, MAP or NUTS DataTrees.
    var_names : str or list of str
        The variables to compare, e.g. ``"sensitivity"``.
    n_draws : int, optional
        Draws per fit (one chain).

    Returns
    -------
    dict of str to xarray.DataTree
        ``{label: DataTree}`` with a ``posterior`` group each. A NUTS fit's draws
        are pooled over chains (resampled when there are not ``n_draws`` of
        them); a MAP fit with Laplace draws gives those; an EM fit gives draws
        from the approximations it stores (sensitivity, specificity and one-coin
        accuracy: Beta; a continuous precision: Gamma), seeded, like the
        report's tables; any other one-draw value is repeated, so it shows as a
        point without an interval.

    Examples
    --------
    >>> from crowd_models.models import two_coin
    >>> ann = cm.datasets.load_rte()
    >>> map_fit = cm.fit_map(two_coin.build_model(ann), laplace=True)
    >>> trees = cm.report.forest_draws({"EM": two_coin.em(ann), "MAP": map_fit}, "sensitivity")
    """
    fits = fits if isinstance(fits, dict) else {"fit": fits}
    if not fits:
        raise ValueError("fits is empty; give a fit or a dict {label: fit}.")
    names = _names(var_names)
    if isinstance(n_draws, bool) or not isinstance(n_draws, int | np.integer) or n_draws < 1:
        raise ValueError(f"n_draws must be a positive integer, got {n_draws!r}.")
    rng = np.random.default_rng(MC_SEED)
    return {str(label): xr.DataTree(children={"posterior": xr.DataTree(
        _one_fit_draws(fit, names, int(n_draws), rng))}) for label, fit in fits.items()}


def plot_forest(fits, var_names="sensitivity", *, ci_prob: float = 0.9, **kwargs):
    """Forest plot of annotator measures, one row per annotator and one colour per fit.

    ArviZ's ``plot_forest`` (arviz-plots, matplotlib backend) on :func:`forest_draws`:
    the point is the mean, the thick bar the central 50% and the thin bar the
    central ``ci_prob`` interval (equal-tailed, the report's default 90%).

    Parameters
    ----------
    fits : xarray.Dataset, xarray.DataTree or dict
        A fit, or a dict ``{label: fit}`` (EM, MAP or NUTS), e.g.
        ``{"EM": em_fit, "MAP": map_fit, "NUTS": idata}``.
    var_names : str or list of str, optional
        Variable name(s) with an annotator dim, e.g. ``"sensitivity"``,
        ``["sensitivity", "specificity"]``, ``"accuracy"`` or ``"precision"``.
    ci_prob : float, optional
        Probability of the thin interval.
    **kwargs
        Passed to ``arviz_plots.plot_forest``.

    Returns
    -------
    arviz_plots.PlotCollection
        The plot (``.savefig(path)`` writes the figure).

    Examples
    --------
    >>> from crowd_models.models import two_coin
    >>> ann = cm.datasets.load_rte()
    >>> map_fit = cm.fit_map(two_coin.build_model(ann), laplace=True)
    >>> pc = cm.report.plot_forest({"EM": two_coin.em(ann), "MAP": map_fit}, "sensitivity")
    """
    import arviz_plots as azp

    ci_prob = check_ci_prob(ci_prob)
    names = _names(var_names)
    trees = forest_draws(fits, names)
    kwargs.setdefault("backend", "matplotlib")
    data = trees if len(trees) > 1 else next(iter(trees.values()))
    pc = azp.plot_forest(data, var_names=names, combined=True, ci_kind="eti",
                         ci_probs=(0.5, ci_prob), point_estimate="mean", **kwargs)
    if len(trees) > 1:
        pc.add_legend("model")
    return pc
