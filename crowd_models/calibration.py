"""Reading a simulation-based calibration: rank uniformity, interval coverage
and the reliability of the items' class probabilities, with their figures.

Each function takes the ``xarray.Dataset`` that :func:`crowd_models.validation.sbc`
returns (``rank``, ``covered_50``, ``covered_90`` over ``sim`` and
``parameter``; ``item_prob`` and ``item_truth`` over ``sim`` and ``item``;
``status``) and uses only its replications whose status is ``"ok"``.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats

from crowd_models import _dims as D
from crowd_models._text import listing

RANK_BINS = 10
"""Bins of the chi-squared uniformity test of the ranks."""


def rank_tests(result: xr.Dataset, alpha: float = 0.01) -> pd.DataFrame:
    """Uniformity of the ranks and coverage, one row per tested parameter.

    Each scalar parameter is tested alone; a variable with one value per item
    is tested once, its items' ranks pooled. The test is Pearson's chi-squared
    on :data:`RANK_BINS` equal bins of the ranks of the replications that ran.
    A parameter is ``rejected`` when its p-value is below ``alpha`` divided by
    the number of tests (Bonferroni: the chance of rejecting any parameter of
    a calibrated fit is at most ``alpha``).

    Returns
    -------
    pandas.DataFrame
        ``variable``, ``p_value``, ``rejected``, ``coverage_50``, ``coverage_90`` (of the
        fit's draws), ``em_coverage_90`` (of the 90% intervals the report gives
        the EM fit from its conjugate approximations; NaN where it gives none)
        and ``n`` (the ranks tested), with ``attrs["threshold"]``.

    Examples
    --------
    >>> from crowd_models import calibration, validation
    >>> calibration.rank_tests(validation.sbc("two_coin", n_sims=20, fit="map", client=False))
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}.")
    ran = np.flatnonzero(result["status"].values == "ok")
    width = (result.attrs["n_ranks"] + 1) // RANK_BINS
    variables = result["variable"].values
    rows = {}
    for name, index in _groups(result).items():
        ranks = result["rank"].values[np.ix_(ran, index)].ravel()
        counts = np.bincount((ranks // width).astype(int), minlength=RANK_BINS)
        p = stats.chisquare(counts).pvalue if len(ranks) else np.nan
        em = result["em_covered_90"].values[np.ix_(ran, index)]
        rows[name] = {"variable": str(variables[index[0]]), "p_value": float(p),
                      **{f"coverage_{c}": float(result[f"covered_{c}"].values[
                          np.ix_(ran, index)].mean()) if len(ran) else np.nan
                         for c in (50, 90)},
                      "em_coverage_90": float(np.nanmean(em)) if np.isfinite(em).any()
                      else np.nan, "n": len(ranks)}
    table = pd.DataFrame(rows).T
    table.index.name = "parameter"
    threshold = alpha / len(table)
    table["rejected"] = table["p_value"] < threshold
    table = table.astype({"n": int, "rejected": bool, "p_value": float, "coverage_50": float,
                          "coverage_90": float, "em_coverage_90": float})
    table.attrs["threshold"] = threshold
    return table[["variable", "p_value", "rejected", "coverage_50", "coverage_90",
                  "em_coverage_90", "n"]]


def item_calibration(result: xr.Dataset, n_bins: int = 10) -> pd.DataFrame:
    """Reliability of the items' class probabilities against the simulated truth.

    Every (item, class) probability of the replications that ran, for each
    method (EM, MAP, NUTS), binned by its value: ``mean_prob`` and
    ``observed`` (the share of them whose class is the true one) per bin, and
    the method's Brier score (mean over items of the squared distance between
    the probability vector and the true class's indicator) in
    ``attrs["brier"]``.

    Examples
    --------
    >>> from crowd_models import calibration, validation
    >>> result = validation.sbc("two_coin", n_sims=20, fit="map", client=False)
    >>> calibration.item_calibration(result).attrs["brier"]
    """
    ran = np.flatnonzero(result["status"].values == "ok")
    truth = result["item_truth"].values[ran]
    k = result.sizes[D.TRUE_CLASS]
    onehot = np.eye(k)[truth]
    edges = np.linspace(0, 1, n_bins + 1)
    rows, brier = [], {}
    for m, method in enumerate(result["method"].values):
        prob = result["item_prob"].values[ran, m]
        brier[str(method)] = float(np.mean(np.sum((prob - onehot) ** 2, axis=-1)))
        p, hit = prob.ravel(), onehot.ravel()
        which = np.clip(np.digitize(p, edges) - 1, 0, n_bins - 1)
        for b in range(n_bins):
            mask = which == b
            if mask.any():
                rows.append({"method": str(method), "bin": b, "mean_prob": p[mask].mean(),
                             "observed": hit[mask].mean(), "n": int(mask.sum())})
    table = pd.DataFrame(rows)
    table.attrs["brier"] = brier
    return table


def _case_name(result: xr.Dataset) -> str:
    return " ".join(filter(None, (result.attrs["family"], result.attrs["variant"])))


def _groups(result: xr.Dataset) -> dict[str, list[int]]:
    """The tested groups of :func:`rank_tests` -> their parameters' positions: each
    scalar alone, a per-item variable's items together (named ``variable[*]``)."""
    groups = {}
    for index, (label, variable, per_item) in enumerate(zip(
            result["parameter"].values, result["variable"].values, result["per_item"].values,
            strict=True)):
        groups.setdefault(variable + "[*]" if per_item else label, []).append(index)
    return groups


def plot_ranks(result: xr.Dataset, *, parameters=None, band: float = 0.99, columns: int = 6):
    """Rank histograms (top of each pair) and ECDF differences (below) of the
    tested parameters. The histogram's grey band is each bin's pointwise
    ``band`` interval under uniform ranks (binomial): a calibrated fit leaves it
    in about ``1 - band`` of the bins. The ECDF's band is simultaneous: a
    calibrated fit's whole ECDF difference stays inside it with probability
    ``band`` (:func:`ecdf_band`).

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> from crowd_models import calibration, validation
    >>> result = validation.sbc("two_coin", n_sims=20, fit="map", client=False)
    >>> fig = calibration.plot_ranks(result)
    """
    import matplotlib.pyplot as plt

    ran = np.flatnonzero(result["status"].values == "ok")
    groups = {name: result["rank"].values[np.ix_(ran, index)].ravel()
              for name, index in _groups(result).items()}
    if parameters is not None:
        unknown = [p for p in parameters if p not in groups]
        if unknown:
            raise ValueError(f"unknown parameter(s) {listing(unknown)}; the tested ones are "
                             f"{listing(list(groups))}.")
        groups = {p: groups[p] for p in parameters}
    p_values = rank_tests(result)["p_value"]
    n_ranks = result.attrs["n_ranks"] + 1
    rows = -(-len(groups) // columns)
    fig, axes = plt.subplots(2 * rows, columns, figsize=(2.6 * columns, 3.6 * rows),
                             squeeze=False)
    lo_q, hi_q = (1 - band) / 2, 1 - (1 - band) / 2
    for g, (name, ranks) in enumerate(groups.items()):
        top, bottom = axes[2 * (g // columns), g % columns], axes[2 * (g // columns) + 1,
                                                                  g % columns]
        n = len(ranks)
        counts = np.bincount((ranks // (n_ranks // RANK_BINS)).astype(int),
                             minlength=RANK_BINS)
        top.axhspan(stats.binom.ppf(lo_q, n, 1 / RANK_BINS),
                    stats.binom.ppf(hi_q, n, 1 / RANK_BINS), color="0.85")
        top.bar(np.arange(RANK_BINS), counts, width=0.9, color="C0")
        top.set_title(f"{name}\np = {p_values[name]:.3f}", fontsize=8)
        top.set_xticks([])
        z, lower, upper = ecdf_band(n, n_ranks, band)
        ecdf = np.searchsorted(np.sort(ranks), np.arange(n_ranks + 1), side="left") / n
        bottom.fill_between(z, lower - z, upper - z, color="0.85")
        bottom.plot(z, ecdf - z, color="C0")
        bottom.axhline(0, color="0.4", lw=0.5)
        bottom.tick_params(labelsize=7)
    for g in range(len(groups), rows * columns):
        axes[2 * (g // columns), g % columns].set_visible(False)
        axes[2 * (g // columns) + 1, g % columns].set_visible(False)
    fig.suptitle(f"SBC ranks: {_case_name(result)} ({result.attrs['fit']}, "
                 f"{result.attrs['n_ran']} replications)")
    fig.tight_layout()
    return fig


@functools.lru_cache(maxsize=64)
def ecdf_band(n: int, n_ranks: int, band: float = 0.99, n_draws: int = 4000):
    """Simultaneous envelope, of probability ``band``, of the ECDF of ``n`` uniform
    ranks from 0 to ``n_ranks - 1``: ``(z, lower, upper)`` at ``z = k / n_ranks``, with
    ECDF(z) the share of ranks below ``k``.

    Pointwise, the count below ``k`` is Binomial(n, z). The pointwise level
    gamma is lowered until the envelope of the central ``1 - gamma`` binomial
    intervals holds a whole uniform ECDF with probability ``band``: gamma is
    the ``1 - band`` quantile, over ``n_draws`` simulated uniform rank sets
    (a fixed seed), of each set's smallest two-sided binomial tail probability
    over z (the simulation method of Säilynoja, Bürkner and Vehtari 2022).

    Examples
    --------
    >>> from crowd_models import calibration
    >>> z, lower, upper = calibration.ecdf_band(200, 100, 0.95)
    """
    for name, value, least in (("n", n, 1), ("n_ranks", n_ranks, 2), ("n_draws", n_draws, 1)):
        if not (isinstance(value, int | np.integer) and value >= least):
            raise ValueError(f"{name} must be an integer of at least {least}, got {value!r}.")
    if not 0 < band < 1:
        raise ValueError(f"band must lie in (0, 1), got {band!r}.")
    rng = np.random.default_rng(0)
    z = np.arange(n_ranks + 1) / n_ranks
    inner = z[1:-1]
    below = rng.multinomial(n, np.full(n_ranks, 1 / n_ranks), size=n_draws).cumsum(axis=1)
    below = below[:, :-1]  # counts below k = 1 .. n_ranks - 1
    tails = 2 * np.minimum(stats.binom.cdf(below, n, inner),
                           stats.binom.sf(below - 1, n, inner)).min(axis=1)
    gamma = float(np.quantile(tails, 1 - band))
    lower = stats.binom.ppf(gamma / 2, n, z) / n
    upper = stats.binom.isf(gamma / 2, n, z) / n
    lower[[0, -1]], upper[[0, -1]] = (0.0, 1.0), (0.0, 1.0)
    for array in (z, lower, upper):  # cached: shared by every caller
        array.flags.writeable = False
    return z, lower, upper


def plot_calibration(result: xr.Dataset, n_bins: int = 10):
    """Reliability diagram of the items' class probabilities, one line per method
    (EM, MAP, NUTS), with each method's Brier score in the legend.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> from crowd_models import calibration, validation
    >>> result = validation.sbc("two_coin", n_sims=20, fit="map", client=False)
    >>> fig = calibration.plot_calibration(result)
    """
    import matplotlib.pyplot as plt

    table = item_calibration(result, n_bins)
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.plot([0, 1], [0, 1], color="0.6", lw=0.8)
    for method, rows in table.groupby("method", sort=False):
        ax.plot(rows["mean_prob"], rows["observed"], "o-", ms=3,
                label=f"{method} (Brier {table.attrs['brier'][method]:.4f})")
    ax.set_xlabel("class probability given")
    ax.set_ylabel("share of the true class")
    ax.set_title(f"{_case_name(result)} ({result.attrs['fit']}): hidden labels", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


__all__ = ["RANK_BINS", "ecdf_band", "item_calibration", "plot_calibration", "plot_ranks",
           "rank_tests"]
