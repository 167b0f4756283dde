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
