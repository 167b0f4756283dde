"""The one prior parser (``_common.parameter_pair``) behind the Beta and Gamma priors."""

import numpy as np
import pytest

from crowd_models.models import _common as C
from crowd_models.models import continuous


def test_parameter_pair_broadcasts_and_names_the_prior():
    a, b = C.parameter_pair((2, [1, 2, 3]), "p", 3)
    np.testing.assert_array_equal(a, [2, 2, 2])
    np.testing.assert_array_equal(b, [1, 2, 3])
    a, b = C.parameter_pair(([1, 2], 3), "p", None)  # as given: e.g. by threshold
    assert a.shape == (2,) and b.shape == ()
    with pytest.raises(TypeError, match=r"p must be a pair \(shape, rate\) of Gamma parameters"):
        C.parameter_pair(3.0, "p", 2, what="(shape, rate) of Gamma")
    with pytest.raises(ValueError, match=r"p: a and b must be numbers or arrays of length 4"):
        C.parameter_pair(([1, 2], 1), "p", 4)


def test_continuous_scalar_gamma_prior_refuses_arrays():
    sim = continuous.simulate([1.0, 2.0], n_items=20, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="truth_precision_prior: shape and rate must be numbers"):
        continuous.em(sim, truth_precision_prior=([2.0, 3.0], 1.0))
    with pytest.raises(ValueError, match="precision_prior: shape and rate must be numbers or "
                                         "arrays of length 2"):
        continuous.em(sim, precision_prior=([2.0, 3.0, 4.0], 1.0))


def test_a_prior_the_annotations_leave_unused_is_refused():
    """A classifier's prior without features, or the class shares' prior with
    them, would be silently ignored: every family with a classifier refuses
    it, naming the keyword and the fix; the default (or None) passes."""
    import crowd_models as cm
    from crowd_models.models import dawid_skene, ordinal, two_coin

    rng = np.random.default_rng(0)
    binary = two_coin.simulate([0.8] * 3, [0.7] * 3, n_items=40, rng=rng)
    featured = two_coin.simulate([0.8] * 3, [0.7] * 3, n_items=40, n_features=2, rng=rng)
    classes = dawid_skene.simulate(np.array([[[0.8, 0.2], [0.3, 0.7]]] * 3), n_items=40,
                                   rng=rng)
    levels = cm.datasets.load_anesthesia()
    values = continuous.simulate([1.0, 2.0], n_items=20, rng=rng)
    no_features = "these annotations have no features, so the {} model would not use it"
    cases = [
        (lambda **kw: two_coin.em(binary, **kw), "coef_precision", 10.0, "two-coin"),
        (lambda **kw: two_coin.build_model(binary, **kw), "intercept_precision", 1.0,
         "two-coin"),
        (lambda **kw: dawid_skene.em(classes, **kw), "coef_precision", 3.0, "Dawid-Skene"),
        (lambda **kw: dawid_skene.build_model(classes, variant="one_coin", **kw),
         "coef_precision", 3.0, r"Dawid-Skene \(one-coin\)"),
        (lambda **kw: ordinal.em(levels, **kw), "coef_precision", 2.0,
         r"ordinal \(cumulative\)"),
        (lambda **kw: ordinal.build_model(levels, variant="latent", **kw), "coef_precision",
         2.0, r"ordinal \(latent\)"),
    ]
    for call, name, value, title in cases:
        with pytest.raises(ValueError, match=rf"{name}={value!r} is a prior of the classifier "
                                             rf"of the features, and {no_features.format(title)}"):
            call(**{name: value})
    with pytest.raises(ValueError, match=r"coef_precision=2.0 is a prior of the regression of "
                                         r"the features, and these annotations have no features"):
        continuous.em(values, coef_precision=2.0)
    with pytest.raises(ValueError, match=r"prevalence_prior=\(5, 5\) is the prior of the class "
                                         r"shares, and with features the two-coin model takes "
                                         r"the shares from the classifier of the features"):
        two_coin.em(featured, prevalence_prior=(5, 5))
    with pytest.raises(ValueError, match=r"prevalence_prior=3.0 is the prior of the class shares"):
        ordinal.build_model(levels.with_features(rng.normal(size=(levels.n_items, 2))),
                            variant="latent", prevalence_prior=3.0)
    # the defaults, given or not, and flat priors (which say nothing) pass
    two_coin.em(binary, coef_precision="auto", intercept_precision=0.01)
    two_coin.em(featured, prevalence_prior=(2.0, 2.0))
    for ann in (binary, featured):
        two_coin.em(ann, **two_coin.FLAT_PRIORS)
    continuous.em(values, **continuous.FLAT_PRIORS)
