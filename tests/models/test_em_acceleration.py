"""SQUAREM-accelerated EM (``_em.iterate_em_map``): the same fixed points as
plain EM in fewer M-steps, and safe fallbacks when an extrapolation is invalid.
EM only (no PyMC model is compiled), so these run in seconds."""

import numpy as np
import pytest

import crowd_models as cm
from crowd_models.models import _common as C
from crowd_models.models import _em, continuous, ordinal, two_coin
from crowd_models.models import dawid_skene as ds
from crowd_models.models import feature_accuracy as fa

FLAT_DS = dict(confusion_prior=(1, 1), prevalence_prior=1)


def _params(fit):
    """The fitted parameters: the (chain, draw) variables other than item posteriors."""
    return {k: fit[k].values for k in fit.data_vars
            if fit[k].dims[:2] == ("chain", "draw")
            and k not in ("item_class_prob", "exceed_prob", "true_value", "true_value_sd")}


def _assert_same_fixed_point(fast, plain, atol=1e-8):
    a, b = _params(fast), _params(plain)
    assert a.keys() == b.keys()
    diff = {k: float(np.max(np.abs(a[k] - b[k]))) for k in a}
    assert max(diff.values()) <= atol, diff
    np.testing.assert_allclose(fast.attrs["log_posterior"], plain.attrs["log_posterior"],
                               rtol=1e-10)
    assert fast.attrs["converged"] and plain.attrs["converged"]


@pytest.fixture(scope="module")
def web_search():
    return cm.datasets.load_web_search()


def test_flat_web_search_dawid_skene(web_search):
    # EM converges slowly here (about 0.2% of the error per step along its slowest
    # direction), so a point where one EM step moves less than tol can be
    # 500 tol away from the fixed point: plain EM at tol 1e-10 stops 5e-8 from
    # it. Plain EM at 1e-11 (7000 steps) is within 1e-8; the accelerated EM
    # gets to 1e-13, the fixed point to rounding, in 1069 M-steps.
    plain = ds.em(web_search, **FLAT_DS, tol=1e-11, accelerate=False)
    fast = ds.em(web_search, **FLAT_DS, tol=1e-13)
    _assert_same_fixed_point(fast, plain)
    assert fast.attrs["n_iter"] <= plain.attrs["n_iter"] / 4
    # at equal tol the accelerated EM takes far fewer M-steps (868 against 7179)
    same_tol = ds.em(web_search, **FLAT_DS, tol=1e-11)
    assert same_tol.attrs["n_iter"] <= plain.attrs["n_iter"] / 2
    _assert_same_fixed_point(same_tol, plain)


def test_dog_dawid_skene():
    dog = cm.datasets.load_dog()
    for variant in ("full", "one_coin"):
        plain = ds.em(dog, variant=variant, accelerate=False)
        fast = ds.em(dog, variant=variant)
        _assert_same_fixed_point(fast, plain)
        assert fast.attrs["n_iter"] < plain.attrs["n_iter"]
    # the accelerated one-coin fit is one-coin (its stabilising EM step restores it)
    eye = np.eye(dog.n_classes)
    acc = fast["accuracy"].values[0, 0][:, None, None]
    np.testing.assert_allclose(fast["confusion"].values[0, 0],
                               eye * acc + (1 - eye) * (1 - acc) / (dog.n_classes - 1),
                               atol=1e-15)


def test_rte_two_coin(rte):
    for priors in ({}, two_coin.FLAT_PRIORS):
        plain = two_coin.em(rte, **priors, accelerate=False)
        fast = two_coin.em(rte, **priors)
        _assert_same_fixed_point(fast, plain)
        assert fast.attrs["n_iter"] < plain.attrs["n_iter"]


def test_two_coin_with_features(sim_features):
    plain = two_coin.em(sim_features, accelerate=False)
    fast = two_coin.em(sim_features)
    _assert_same_fixed_point(fast, plain)


def test_web_search_ordinal(web_search):
    plain = ordinal.em(web_search, accelerate=False)
    fast = ordinal.em(web_search)
    _assert_same_fixed_point(fast, plain)
    assert fast.attrs["n_iter"] <= plain.attrs["n_iter"] / 2
    # flat priors put sensitivities within rounding of 1 (one minus them near
    # 1e-15, noisy): the growth condition of the stopping rule leaves those out
    # (plain EM: up to 3972 M-steps per threshold)
    flat = ordinal.em(web_search, **ordinal.FLAT_PRIORS)
    assert flat.attrs["converged"] and flat.attrs["n_iter"] < 1000


def test_feature_accuracy():
    sim = fa.simulate(300, n_features=20, rng=1)
    plain = fa.em(sim, penalty=5.0, n_restarts=1, tol=1e-10, accelerate=False)
    fast = fa.em(sim, penalty=5.0, n_restarts=1, tol=1e-10)
    _assert_same_fixed_point(fast, plain)
    # the lasso's exact zeros are the same
    for name in ("coef", "accuracy_coef"):
        np.testing.assert_array_equal(fast[name].values == 0, plain[name].values == 0)
    assert fast.attrs["n_iter"] < plain.attrs["n_iter"]


def test_continuous():
    precision = np.array([0.25, 0.5, 1.0, 2.0, 4.0, 0.75])
    bias = np.array([1.0, -0.5, 0.3, -0.8, 0.2, -0.2])
    scale = np.array([1.3, 0.6, 1.0, 0.8, 1.5, 0.8])
    sim = continuous.simulate(precision, bias=bias - bias.mean(), scale=scale / scale.mean(),
                              n_items=300, intercept=3.0, truth_precision=0.25,
                              labels_per_item=4, rng=np.random.default_rng(3))
    for options in (dict(bias=True), dict(bias=True, scale=True),
                    dict(bias=True, **continuous.FLAT_PRIORS)):
        plain = continuous.em(sim, **options, accelerate=False)
        fast = continuous.em(sim, **options)
        _assert_same_fixed_point(fast, plain)
        assert fast.attrs["n_iter"] < plain.attrs["n_iter"]
        # extrapolation keeps the constraints exactly
        np.testing.assert_allclose(fast["bias"].values.sum(), 0, atol=1e-12)
        if "scale" in options:
            np.testing.assert_allclose(fast["scale"].values.mean(), 1, atol=1e-12)


def test_no_stop_while_a_probability_crawls_back_from_zero():
    # a sparse flat-prior set (5 classes, 29 annotators, 3 labels per item) where
    # EM takes a confusion entry near 0 and then scales it back up by about 1%
    # per step: the steps stay below tol while the entry is far from its value,
    # so plain EM stops short; the accelerated EM also requires that no
    # probability still grows by more than 0.1% per step
    rng = np.random.default_rng(18)
    K, J, n = int(rng.integers(2, 6)), int(rng.integers(10, 60)), int(rng.integers(200, 800))
    accuracy = rng.uniform(0.3, 0.85, J)[:, None, None]
    eye = np.eye(K)
    confusion = eye * accuracy + (1 - eye) * (1 - accuracy) / (K - 1)
    sim = ds.simulate(confusion, n_items=n, labels_per_item=int(rng.integers(2, 4)), rng=18)
    plain = ds.em(sim, **FLAT_DS, accelerate=False)
    exact = ds.em(sim, **FLAT_DS, accelerate=False, tol=1e-14, max_iter=100_000)
    fast = ds.em(sim, **FLAT_DS)
    assert np.abs(plain["confusion"].values - exact["confusion"].values).max() > 0.01
    assert plain.attrs["log_posterior"] < exact.attrs["log_posterior"] - 1e-3
    _assert_same_fixed_point(fast, exact)
    assert fast.attrs["n_iter"] < plain.attrs["n_iter"]


# ------------------------------------------------------------ the safeguards
def _unclipped_dawid_skene(ann):
    """Flat Dawid-Skene EM pieces whose E-step takes logs without clipping, so a
    confusion entry outside [0, 1] gives a non-finite joint; and a record of
    whether each point the E-step saw was inside the support."""
    pri = ds._priors(ann, "full", (1, 1), (3, 2), 1.0, ds.DEFAULT_PRIORS["population_prior"],
                     1.0, 1.0, 0.01)
    inside = []

    def joint(prm):
        probs = np.concatenate([np.ravel(prm["confusion"]), np.ravel(prm["prevalence"])])
        inside.append(bool(np.all((probs >= 0) & (probs <= 1))))
        with np.errstate(divide="ignore", invalid="ignore"):
            return (C.item_joint_np(np.log(prm["confusion"]), ann)
                    + np.log(prm["prevalence"])[None, :])

    def m_step(prob, prev):
        return ds._m_step(ann, prob, pri, "full", previous=prev)

    def objective(prm):
        _, item_ll = C.posterior_from_joint(joint(prm))
        return float(item_ll.sum()) + ds._log_prior_params(prm, pri, "full")

    return joint, m_step, objective, ds._start(ann, pri, "full"), inside


def _max_diff(a, b):
    return max(float(np.max(np.abs(np.asarray(a[k]) - np.asarray(b[k])))) for k in a)


def test_extrapolation_out_of_the_unit_interval_falls_back():
    ann = cm.datasets.load_anesthesia()
    joint, m_step, objective, start, inside = _unclipped_dawid_skene(ann)
    plain, plain_iter, ok = _em.run_em(joint, m_step, start, tol=1e-12, max_iter=10_000,
                                     accelerate=False)
    assert ok and all(inside)
    # no supports declared: extrapolated confusions leave [0, 1], the joint is
    # non-finite there and the cycle falls back to the plain EM iterate
    inside.clear()
    fast, fast_iter, ok = _em.run_em(joint, m_step, start, tol=1e-12, max_iter=10_000,
                                   objective=objective)
    assert ok and not all(inside)
    assert _em._all_finite(fast) and _max_diff(fast, plain) <= 1e-8
    np.testing.assert_allclose(objective(fast), objective(plain), rtol=1e-12)
    # declared supports: extrapolated points are brought back into them
    inside.clear()
    kept, kept_iter, ok = _em.run_em(joint, m_step, start, tol=1e-12, max_iter=10_000,
                                   objective=objective, supports=ds._EM_SUPPORTS)
    assert ok and all(inside)
    assert _max_diff(kept, plain) <= 1e-8
    assert kept_iter < plain_iter


def test_rejected_extrapolations_give_plain_em_exactly():
    dog = cm.datasets.load_dog()
    joint, m_step, objective, start, _ = _unclipped_dawid_skene(dog)
    plain, plain_iter, _ = _em.run_em(joint, m_step, start, tol=1e-10, max_iter=10_000,
                                    accelerate=False)
    # an objective that is never finite rejects every extrapolation: the
    # accepted points are plain EM's iterates and the result is plain EM's, bit
    # for bit; n_iter also counts the wasted stabilisation steps
    fast, fast_iter, ok = _em.run_em(joint, m_step, start, tol=1e-10, max_iter=10_000,
                                   objective=lambda prm: -np.inf, supports=ds._EM_SUPPORTS)
    assert ok and fast_iter > plain_iter
    for k in plain:
        np.testing.assert_array_equal(fast[k], plain[k])

    # so does an M-step that fails at every extrapolated point
    iterates = [start]

    def picky_m_step(prob, prev):
        if not any(prev is p for p in iterates):
            raise np.linalg.LinAlgError("singular at an extrapolated point")
        iterates.append(m_step(prob, prev))
        return iterates[-1]

    fast, fast_iter, ok = _em.run_em(joint, picky_m_step, start, tol=1e-10, max_iter=10_000,
                                   objective=objective, supports=ds._EM_SUPPORTS)
    assert ok and fast_iter > plain_iter
    for k in plain:
        np.testing.assert_array_equal(fast[k], plain[k])


def test_max_iter_counts_m_steps(web_search):
    for n in (0, 1, 2, 3, 7, 50):
        fit = ds.em(web_search, **FLAT_DS, max_iter=n)
        assert fit.attrs["n_iter"] == n and not fit.attrs["converged"]


def test_nonfinite_em_step_raises_and_bad_supports():
    start = {"p": np.array([0.5])}
    with pytest.raises(FloatingPointError, match="non-finite"):
        _em.iterate_em_map(lambda prm: {"p": np.array([np.nan])}, start, tol=1e-8,
                         max_iter=10)
    with pytest.raises(ValueError, match="supports must be one of"):
        _em.iterate_em_map(lambda prm: prm, start, tol=1e-8, max_iter=10,
                         supports={"p": "probability"})
    with pytest.raises(ValueError, match="need tol > 0"):
        _em.iterate_em_map(lambda prm: prm, start, tol=0, max_iter=10)
