"""fit_map(laplace=True): the Gaussian approximation of the unconstrained posterior."""

import warnings

import numpy as np
import pandas as pd
import pymc as pm
import pytest
from scipy import stats
from scipy.special import expit, log_expit

import crowd_models as cm
from crowd_models.inference import laplace_fit
from crowd_models.models import two_coin


@pytest.fixture(scope="module")
def tiny():
    rng = np.random.default_rng(3)
    return two_coin.simulate(np.array([0.9, 0.8, 0.7, 0.85]), np.array([0.85, 0.75, 0.8, 0.9]),
                             n_items=60, prevalence=0.4, rng=rng)


def _numpy_negative_log_density(annotations):
    """-log p of the logits (sensitivity, specificity, prevalence), Jacobian included,
    written from the EM's NumPy log posterior."""
    pri = two_coin._priors(annotations, **two_coin.DEFAULT_PRIORS)
    J = annotations.n_annotators

    def f(t):
        params = {"sensitivity": expit(t[:J]), "specificity": expit(t[J:2 * J]),
                  "prevalence": expit(t[2 * J])}
        log_jacobian = np.sum(log_expit(t) + log_expit(-t))
        return -(two_coin._log_posterior(annotations, params, pri) + log_jacobian)
    return f


def test_covariance_is_the_inverse_of_an_independent_numpy_hessian(tiny):
    fit = cm.fit_map(two_coin.build_model(tiny), laplace=True, random_seed=0)
    gaussian = fit["laplace_approximation"]
    names = list(gaussian["variables"].values)
    assert names[0] == "sensitivity_logodds__[0]" and names[-1] == "prevalence_logodds__"
    f = _numpy_negative_log_density(tiny)
    mean = gaussian["mean"].values
    # the mean is the mode of the density with the Jacobian: its numerical gradient is 0
    h = 1e-6
    grad = np.array([(f(mean + h * e) - f(mean - h * e)) / (2 * h) for e in np.eye(mean.size)])
    assert np.abs(grad).max() < 1e-5
    # and not the MAP (the objective without the Jacobian)
    assert np.abs(mean - fit["optimizer_result"]["x"].values).max() > 1e-3
    # second differences of the NumPy function, four points per entry
    n, h = mean.size, 1e-4
    hess = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            a, b = h * np.eye(n)[i], h * np.eye(n)[j]
            hess[i, j] = (f(mean + a + b) - f(mean + a - b) - f(mean - a + b)
                          + f(mean - a - b)) / (4 * h * h)
    np.testing.assert_allclose(gaussian["covariance"].values, np.linalg.inv(hess),
                               rtol=1e-4, atol=1e-6 * np.abs(np.linalg.inv(hess)).max())


def test_draws_are_the_gaussian_mapped_back_and_the_map_is_kept(tiny):
    model = two_coin.build_model(tiny)
    plain = cm.fit_map(model)
    fit = cm.fit_map(model, laplace=True, laplace_draws=4000, random_seed=1)
    # the posterior group is the MAP, unchanged
    for name in ("sensitivity", "specificity", "prevalence"):
        np.testing.assert_array_equal(fit.posterior[name].values, plain.posterior[name].values)
    draws = fit["laplace"]
    assert draws.sizes["chain"] == 1 and draws.sizes["draw"] == 4000
    assert "item_class_prob" not in draws  # item-level deterministics are left out
    logits = np.log(draws["sensitivity"].values[0]) - np.log1p(-draws["sensitivity"].values[0])
    gaussian = fit["laplace_approximation"]
    np.testing.assert_allclose(logits.mean(axis=0), gaussian["mean"].values[:4], atol=0.05)
    np.testing.assert_allclose(logits.std(axis=0), np.sqrt(np.diag(
        gaussian["covariance"].values))[:4], rtol=0.05)
    # the same seed, the same draws
    again = cm.fit_map(model, laplace=True, laplace_draws=4000, random_seed=1)
    np.testing.assert_array_equal(again["laplace"]["sensitivity"].values,
                                  draws["sensitivity"].values)
    # the report reads the draws as a many-draw fit: intervals around the estimates
    table = cm.report.annotator_summary(laplace_fit(fit))
    assert np.all(table["sensitivity_sd"] > 0)
    assert np.all(table["sensitivity_lower"] < table["sensitivity_mean"])
    assert np.all(table["sensitivity_mean"] < table["sensitivity_upper"])
    # ... and does so by itself for the MAP fit that carries them
    direct = cm.report.annotator_summary(fit)
    pd.testing.assert_frame_equal(direct, table)
    np.testing.assert_allclose(direct["sensitivity_mean"],
                               draws["sensitivity"].values[0].mean(axis=0))
    assert cm.report.plot_annotators(fit).get_title().startswith(
        "two-coin, MAP (Laplace intervals)")


def test_sd_agrees_with_the_em_beta_approximation_when_the_truth_is_clear():
    # nine good annotators label every item: the truth is all but certain, so the
    # posterior of each rate is close to the conjugate Beta given the soft labels,
    # and with ~600 labels per rate close to Gaussian on the logit scale
    rng = np.random.default_rng(5)
    sens, spec = rng.uniform(0.8, 0.92, 9), rng.uniform(0.8, 0.92, 9)
    sim = two_coin.simulate(sens, spec, n_items=1500, prevalence=0.4, rng=rng)
    fit = cm.fit_map(two_coin.build_model(sim), laplace=True, random_seed=2)
    em_fit = two_coin.em(sim)
    for name in ("sensitivity", "specificity"):
        beta = stats.beta(em_fit[f"{name}_alpha"].values.ravel(),
                          em_fit[f"{name}_beta"].values.ravel())
        draws = fit["laplace"][name].values[0]
        np.testing.assert_allclose(draws.std(axis=0, ddof=1), beta.std(), rtol=0.15)
        np.testing.assert_allclose(draws.mean(axis=0), beta.mean(), atol=0.01)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(laplace="yes"), TypeError, "laplace must be True or False"),
    (dict(laplace=1), TypeError, "laplace must be True or False"),
    (dict(laplace=True, laplace_draws=1), ValueError, "laplace_draws must be >= 2"),
    (dict(laplace=True, laplace_draws=10.5), TypeError, "laplace_draws must be an integer"),
])
def test_bad_laplace_options_are_refused_before_compiling(tiny, count_compiles, kwargs, error,
                                                          match):
    model = two_coin.build_model(tiny)
    count_compiles.clear()
    with pytest.raises(error, match=match):
        cm.fit_map(model, **kwargs)
    assert len(count_compiles) == 0


def test_a_hessian_that_is_not_positive_definite_warns():
    # a ridge: the density depends on x - y only
    with pm.Model() as model:
        x = pm.Flat("x")
        y = pm.Flat("y")
        pm.Potential("ridge", -((x - y - 1.0) ** 2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = cm.fit_map(model, laplace=True)
    assert any("not positive definite" in str(w.message) and w.category is UserWarning
               for w in caught), [str(w.message) for w in caught]
    assert "laplace" not in fit.children
    with pytest.raises(ValueError, match="laplace=True"):
        laplace_fit(fit)
