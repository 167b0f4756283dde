"""The NumPy pieces every family's EM shares (models/_common.py): log densities
against their closed forms and SciPy, the log-sum-exp over classes, prior
parsing and its error messages. NumPy only (one tiny PyMC logp)."""

import numpy as np
import pymc as pm
import pytest
from scipy import stats
from scipy.linalg import null_space

from crowd_models.models import _common as C
from crowd_models.models import _em


def _zero_sum(rng, shape):
    x = rng.normal(size=shape)
    return x - x.mean(axis=-1, keepdims=True)


def _zerosum_by_basis(x, sd):
    """The zero-sum normal density on its (n - 1)-dimensional subspace: project
    each row on an orthonormal basis of {v : sum v = 0}; the coordinates are iid
    N(0, sd^2)."""
    n = x.shape[-1]
    basis = null_space(np.ones((1, n)))  # (n, n - 1), orthonormal columns
    coords = x.reshape(-1, n) @ basis
    np.testing.assert_allclose(coords @ basis.T, x.reshape(-1, n), atol=1e-12)
    return float(stats.norm.logpdf(coords, 0, sd).sum())


@pytest.mark.parametrize("shape, sd", [((2,), 1.0), ((5,), 0.3), ((3, 4), 2.5), ((4, 2), 0.7)])
def test_zerosum_normal_logpdf_is_the_density_on_the_subspace(shape, sd):
    x = _zero_sum(np.random.default_rng(len(shape) + shape[-1]), shape)
    got = C.zerosum_normal_logpdf(x, sd)
    np.testing.assert_allclose(got, _zerosum_by_basis(x, sd), rtol=1e-12)


def test_zerosum_normal_logpdf_is_pymcs():
    x = _zero_sum(np.random.default_rng(3), (3, 4))
    pymc_logp = pm.logp(pm.ZeroSumNormal.dist(sigma=0.6, shape=(3, 4)), x).eval(
        mode="FAST_COMPILE").sum()  # Python-mode evaluation: no C compile
    np.testing.assert_allclose(C.zerosum_normal_logpdf(x, 0.6), pymc_logp, rtol=1e-12)
    # a flat (sd = inf) zero-sum prior adds nothing
    assert C.zerosum_normal_logpdf(x, np.inf) == 0.0


def test_beta_and_dirichlet_log_densities_are_scipys():
    x = np.array([0.05, 0.3, 0.5, 0.97])
    a, b = np.array([3.0, 1.0, 2.5, 1.0]), np.array([2.0, 1.0, 4.0, 7.5])
    np.testing.assert_allclose(C.beta_logpdf_nojac(x, a, b), stats.beta.logpdf(x, a, b),
                               rtol=1e-12)
    # a = 1 or b = 1 at the boundary stays finite (flat priors, estimate at 0 or 1)
    assert np.isfinite(C.beta_logpdf_nojac(np.array([0.0, 1.0]), np.array([1.0, 2.0]),
                                           np.array([2.0, 1.0]))).all()
    rows = np.random.default_rng(4).dirichlet([1.0, 2.0, 3.0], size=(2, 3))
    alpha = np.array([[3.0, 1.5, 1.5], [1.5, 3.0, 1.5], [1.5, 1.5, 3.0]])
    expected = sum(stats.dirichlet.logpdf(rows[j, k], alpha[k])
                   for j in range(2) for k in range(3))
    np.testing.assert_allclose(C.dirichlet_logpdf_nojac(rows, alpha), expected, rtol=1e-12)


def test_posterior_from_joint_is_a_log_sum_exp():
    rng = np.random.default_rng(5)
    joint = rng.normal(-40.0, 15.0, size=(6, 4))
    joint[2] = [-1e4, -1e4 - 1, -1e4 + 2, -1e4]  # underflows without the max taken out
    joint[3] = [-5.0, -900.0, -2.0, -3.0]  # overflows if the row's minimum is taken out
    joint[4, 1] = -np.inf  # an impossible class
    original = joint.copy()
    prob, ll = C.posterior_from_joint(joint)
    # (np.logaddexp, not scipy's logsumexp: its first call imports the array-API
    # backends, JAX among them, which takes seconds)
    reference = np.logaddexp.reduce(joint, axis=1)
    np.testing.assert_allclose(ll, reference, rtol=1e-13)
    np.testing.assert_allclose(prob, np.exp(joint - reference[:, None]), rtol=1e-12,
                               atol=1e-300)
    assert prob[4, 1] == 0.0
    np.testing.assert_allclose(prob.sum(1), 1.0, rtol=1e-14)
    # overwrite: the same numbers in the joint's own memory; without it the joint stays
    np.testing.assert_array_equal(joint, original)
    again, ll_again = C.posterior_from_joint(joint, overwrite=True)
    assert again is joint
    np.testing.assert_array_equal(again, prob)
    np.testing.assert_array_equal(ll_again, ll)
    # a row with no possible class has log-likelihood -inf (its probabilities are 0/0)
    with np.errstate(invalid="ignore"):
        _, ll = C.posterior_from_joint(np.full((1, 3), -np.inf))
    assert ll[0] == -np.inf


def test_beta_prior_parsing_and_messages():
    a, b = C.beta_prior((3, [1, 2]), "sensitivity_prior", 2)
    np.testing.assert_array_equal(a, [3, 3])
    np.testing.assert_array_equal(b, [1, 2])
    # the boundary a = b = 1 (flat) and anything above it are allowed
    for pair in ((1, 1), (1.5, 1.5), (1, 7)):
        np.testing.assert_array_equal(C.beta_prior(pair, "prevalence_prior"), pair)
    with pytest.raises(TypeError, match="sensitivity_prior must be a pair \\(a, b\\)"):
        C.beta_prior(3.0, "sensitivity_prior", 2)
    with pytest.raises(ValueError, match="a and b must be numbers or arrays of length 2"):
        C.beta_prior(([1, 2, 3], 1), "sensitivity_prior", 2)
    with pytest.raises(ValueError, match="needs a >= 1 and b >= 1"):
        C.beta_prior((0.5, 2), "prevalence_prior")
    with pytest.raises(ValueError, match="needs a >= 1 and b >= 1"):
        C.beta_prior((2, [1.0, 0.9]), "specificity_prior", 2)


def test_precision_and_design_messages():
    np.testing.assert_array_equal(C.check_positive_precision([0.0, 2.0], "p"), [0.0, 2.0])
    for bad in (-1.0, np.inf, [1.0, np.nan]):
        with pytest.raises(ValueError, match="coef_precision must be finite and >= 0"):
            C.check_positive_precision(bad, "coef_precision")
    rng = np.random.default_rng(6)
    for bad in (0, 4):
        with pytest.raises(ValueError, match="labels_per_item must be between 1 and 3"):
            C.simulation_design(5, 3, bad, rng)
    # the bounds themselves are allowed: one label per item, or every annotator
    for per_item in (1, 3):
        items, annotators = C.simulation_design(4, 3, per_item, rng)
        assert np.bincount(items).tolist() == [per_item] * 4
    items, annotators = C.simulation_design(50, 4, 2, rng)
    pairs = items * 4 + annotators
    assert np.bincount(items).tolist() == [2] * 50 and len(np.unique(pairs)) == 100
    items, annotators = C.simulation_design(3, 2, None, rng)
    assert items.tolist() == [0, 0, 1, 1, 2, 2] and annotators.tolist() == [0, 1] * 3


def test_iterate_em_map_messages():
    params = {"p": np.array([0.5])}
    with pytest.raises(ValueError, match="need tol > 0 and max_iter >= 0"):
        _em.iterate_em_map(lambda prm: prm, params, tol=0.0, max_iter=10)
    with pytest.raises(ValueError, match="need tol > 0 and max_iter >= 0"):
        _em.iterate_em_map(lambda prm: prm, params, tol=1e-8, max_iter=-1)
    with pytest.raises(ValueError, match="supports must be one of"):
        _em.iterate_em_map(lambda prm: prm, params, tol=1e-8, max_iter=10,
                         supports={"p": "probability"})


def test_iterate_em_map_finds_a_known_fixed_point():
    # the map p -> (p + c) / 2 (a contraction, rate 1/2) has the fixed point c
    c = np.array([0.2, 0.7])
    for accelerate in (False, True):
        out, n_iter, converged = _em.iterate_em_map(
            lambda prm: {"p": (prm["p"] + c) / 2}, {"p": np.array([0.9, 0.1])}, tol=1e-12,
            max_iter=200, accelerate=accelerate, supports={"p": "unit"})
        assert converged and n_iter < 200
        np.testing.assert_allclose(out["p"], c, atol=1e-11)
