"""The approximate posteriors an EM fit stores per annotator, and the summaries of
a one-draw fit (EM or MAP) read from them."""

from __future__ import annotations

import numpy as np
import xarray as xr
from scipy.special import betaincinv, expit, gammaincinv, gammaln, logit

from crowd_models import _dims as D
from crowd_models._fits import MC_DRAWS, MC_SEED, annotator_vector, draw_matrix, summarise_draws

APPROXIMATIONS = {
    "sensitivity": (("beta", "sensitivity_alpha", "sensitivity_beta"),
                    ("typical_rate", "sensitivity_location", "sensitivity_scale")),
    "specificity": (("beta", "specificity_alpha", "specificity_beta"),
                    ("typical_rate", "specificity_location", "specificity_scale")),
    "accuracy": (("beta", "accuracy_alpha", "accuracy_beta"),),
    "precision": (("gamma", "precision_alpha", "precision_beta"),),
    "trustworthiness": (("beta", "trustworthiness_alpha", "trustworthiness_beta"),),
    "ability": (("norm", "ability", "ability_sd"),),
    "bias": (("norm", "bias", "bias_sd"),),
}
"""Approximate posteriors an EM fit may store per annotator: measure -> the forms it
may take, each (kind, its two parameters' variables): Beta(alpha, beta), Gamma(shape,
rate), Normal(mean, sd), or :class:`TypicalRate` (location, scale). Written by the
EM of two-coin (Raykar et al. 2009, 7.1), one-coin DS, continuous and spammer (given
the final E-step), and item difficulty (a Laplace at the mode, given the item
parameters and the final E-step; the IRT variant's typical rates through their
ability +- bias)."""


class TypicalRate:
    """``expit(softplus(X))`` elementwise, X ~ Normal(location, scale): the IRT
    variant's typical sensitivity (X = ability + bias) or specificity (X = ability -
    bias) under a Normal approximation of X. The map is increasing, so quantiles are
    the Normal's mapped; mean and sd are by 40-point Gauss-Hermite quadrature. It
    answers the calls the report makes of a frozen scipy distribution."""

    _NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(40)

    def __init__(self, location, scale):
        from scipy import stats

        self.normal = stats.norm(np.asarray(location, float), np.asarray(scale, float))

    @staticmethod
    def rate(x):
        """``expit(softplus(x))``."""
        return expit(np.logaddexp(0.0, x))

    def _moment(self, power: int) -> np.ndarray:
        loc, scale = self.normal.mean(), self.normal.std()
        values = self.rate(loc[..., None] + scale[..., None] * self._NODES) ** power
        return values @ self._WEIGHTS / np.sqrt(2 * np.pi)

    def mean(self) -> np.ndarray:
        return self._moment(1)

    def std(self) -> np.ndarray:
        return np.sqrt(np.maximum(self._moment(2) - self._moment(1) ** 2, 0.0))

    def ppf(self, q) -> np.ndarray:
        return self.rate(self.normal.ppf(q))

    def rvs(self, size=None, random_state=None) -> np.ndarray:
        return self.rate(self.normal.rvs(size=size, random_state=random_state))


def beta_quantile(q, a, b) -> np.ndarray:
    """``scipy.stats.beta.ppf(q, a, b)`` (the same function, NaN where a or b is not
    positive), without importing ``scipy.stats``: half a second of every command
    line's start, which the report's closed forms need no more of."""
    return betaincinv(a, b, q)


def gamma_quantile(q, shape, rate) -> np.ndarray:
    """``scipy.stats.gamma.ppf(q, shape, scale=1 / rate)``, NaN where scipy's is
    (a shape not positive and finite, a scale 1 / rate not positive)."""
    shape, scale, valid = _gamma_parameters(shape, rate)
    with np.errstate(invalid="ignore"):
        return np.where(valid, gammaincinv(shape, q) * scale, np.nan)


def gamma_sd(shape, rate) -> np.ndarray:
    """``scipy.stats.gamma.std(shape, scale=1 / rate)``, NaN where scipy's is."""
    shape, scale, valid = _gamma_parameters(shape, rate)
    with np.errstate(invalid="ignore"):
        return np.where(valid, np.sqrt(shape) * scale, np.nan)


def _gamma_parameters(shape, rate):
    shape, rate = np.asarray(shape, dtype=float), np.asarray(rate, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = 1 / rate
        return shape, scale, (shape > 0) & (scale > 0) & np.isfinite(shape)


def beta_moments(a, b) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sd of Beta(a, b), NaN where a or b is not positive."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n = a + b
    valid = (a > 0) & (b > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (np.where(valid, a / n, np.nan),
                np.where(valid, np.sqrt(a * b / (n ** 2 * (n + 1))), np.nan))


def approximation(post: xr.Dataset, name: str):
    """The distribution (over annotators) an EM fit stores for measure ``name`` (see
    :data:`APPROXIMATIONS`; the first form whose variables it has), or None."""
    from scipy import stats

    for kind, first, second in APPROXIMATIONS.get(name, ()):
        if not all(n in post and D.ANNOTATOR in post[n].dims for n in (first, second)):
            continue
        a, b = annotator_vector(post, first), annotator_vector(post, second)
        if kind == "gamma":
            return stats.gamma(a, scale=1 / b)
        return TypicalRate(a, b) if kind == "typical_rate" else getattr(stats, kind)(a, b)
    return None


def single_draw_summary(post: xr.Dataset, measures: dict[str, xr.DataArray],
                         ci_prob: float) -> dict[str, dict[str, np.ndarray]]:
    """Summaries of a one-draw fit (EM or MAP).

    The mean is the fit's point estimate and spreads and intervals are NaN,
    except for the measures of an EM fit that stores their approximate
    posterior (:data:`APPROXIMATIONS`: the Betas of sensitivity,
    specificity and a one-coin accuracy, the Gamma of a continuous
    precision): those report the approximation's mean, sd and quantiles, and
    the weight of a fit with both Betas those of Monte Carlo draws from them.
    The EM estimate is the approximation's mode, which can lie outside its
    equal-tailed interval (a sensitivity of 1 on a perfect record), so it is
    not the reported mean."""
    tail = (1 - ci_prob) / 2
    out, approximations = {}, {}
    for name, da in measures.items():
        point = draw_matrix(da)[0]
        nan = np.full_like(point, np.nan)
        out[name] = {"mean": point, "sd": nan, "lower": nan.copy(), "upper": nan.copy()}
        dist = approximation(post, name)
        if dist is not None:
            approximations[name] = dist
            out[name] = {"mean": dist.mean(), "sd": dist.std(), "lower": dist.ppf(tail),
                         "upper": dist.ppf(1 - tail)}
    if "weight" in out and "weight" not in post and {"sensitivity", "specificity"} <= set(
            approximations):
        rng = np.random.default_rng(MC_SEED)
        n = len(out["weight"]["mean"])
        sens = approximations["sensitivity"].rvs(size=(MC_DRAWS, n), random_state=rng)
        spec = approximations["specificity"].rvs(size=(MC_DRAWS, n), random_state=rng)
        out["weight"] = summarise_draws(logit(sens) + logit(spec), ci_prob)
    return out


def beta_sum_summary(a, b, weights, ci_prob: float) -> dict[str, np.ndarray]:
    """Mean, sd and equal-tailed interval of ``sum_t weights[t] X_t`` over the last
    axis, the X_t independent Beta(a[..., t], b[..., t]) and the weights >= 0.

    The mean and sd are exact. The interval is that of the Beta on ``[0, sum_t
    weights[t]]`` with the same mean and variance (the sum lies in that range). It
    is exact when one term carries all the weight, and the cheaper, more accurate
    replacement of the 4,000 Monte Carlo draws per annotator the report drew
    before: against the exact quantiles, the moment-matched 90% interval ends of
    the overall accuracy of the Dawid-Skene EM fits of dog and web search are off
    by at most 0.0021 (0.040 sd), the 4,000 draws' by up to 0.0069 (0.10 sd); the
    label-weighted population cells by 4e-5 against 0.001 (DEVELOPING.md, issue
    41)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    weights = np.broadcast_to(np.asarray(weights, dtype=float), a.shape)
    if np.any(weights < 0):
        raise ValueError("the weights of a sum of Betas must be non-negative.")
    n = a + b
    mean = np.sum(weights * a / n, axis=-1)
    var = np.sum(weights ** 2 * a * b / (n ** 2 * (n + 1)), axis=-1)
    span = np.sum(weights, axis=-1)
    tail = (1 - ci_prob) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        m, v = mean / span, var / span ** 2
        size = m * (1 - m) / v - 1  # > 0: a sum in [0, span] has v < m (1 - m)
        lower = span * beta_quantile(tail, m * size, (1 - m) * size)
        upper = span * beta_quantile(1 - tail, m * size, (1 - m) * size)
    return {"mean": mean, "sd": np.sqrt(var), "lower": lower, "upper": upper}


def gamma_root_summary(a, b, ci_prob: float) -> dict[str, np.ndarray]:
    """Mean, sd and interval of 1 / sqrt(precision), precision ~ Gamma(a, rate b), in
    closed form: E = sqrt(b) G(a - 1/2) / G(a), E[SD^2] = b / (a - 1), and the
    quantiles are the precision's reversed (infinite where a moment is not finite)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    tail = (1 - ci_prob) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(a > 0.5, np.sqrt(b) * np.exp(gammaln(np.maximum(a, 0.5 + 1e-12) - 0.5)
                                                   - gammaln(a)), np.inf)
        second = np.where(a > 1, b / np.maximum(a - 1, 1e-300), np.inf)
        spread = np.where(a > 1, np.sqrt(np.maximum(second - mean ** 2, 0.0)), np.inf)
        return {"mean": mean, "sd": spread, "lower": 1 / np.sqrt(gamma_quantile(1 - tail, a, b)),
                "upper": 1 / np.sqrt(gamma_quantile(tail, a, b))}

