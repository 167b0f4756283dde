"""sample(): where the chains start (MAP, majority vote, a dict), the fallback
when the MAP is no mode, and the label-switch warnings. One tiny two-coin model
(the two-coin structure every fast test compiles), PyMC's NUTS in this process,
a few dozen draws."""

import numpy as np
import pytest
from scipy.special import logit

import crowd_models as cm
from crowd_models import _samplers, inference
from crowd_models.models import two_coin

from .conftest import RADIOLOGISTS

RUN = dict(draws=15, tune=15, chains=2, cores=1, random_seed=3, progressbar=False,
           nuts_sampler="pymc")


@pytest.fixture(scope="module")
def tiny():
    sim = two_coin.simulate(**RADIOLOGISTS, n_items=80, prevalence=0.4,
                            rng=np.random.default_rng(11))
    return sim, two_coin.build_model(sim)


class _Calls(list):
    chain_starts = None
    """x0 -> the per-chain starts, in place of the jittered ones (None: jitter)."""


@pytest.fixture
def sampler_calls(monkeypatch):
    """Records the start (value variables, unconstrained) that each sample() call
    hands to PyMC's NUTS; ``.chain_starts`` replaces the jittered chain starts."""
    calls = _Calls()
    real_nuts, real_jitter = inference.pymc_nuts, _samplers._jittered_starts

    def nuts(model, fns, parts, shapes, **kwargs):
        calls.append({"parts": [np.array(p) for p in parts], "names": list(fns.free_names)})
        return real_nuts(model, fns, parts, shapes, **kwargs)

    def jitter(bound, x0, shapes, chains, rng):
        starts = real_jitter(bound, x0, shapes, chains, rng)
        return starts if calls.chain_starts is None else calls.chain_starts(x0)

    monkeypatch.setattr(inference, "pymc_nuts", nuts)
    monkeypatch.setattr(_samplers, "_jittered_starts", jitter)  # where pymc_nuts finds it
    return calls


def _start_dict(calls):
    return dict(zip(calls[-1]["names"], calls[-1]["parts"], strict=True))


def _logodds(point):
    return {name: logit(np.asarray(point[name], dtype=float))
            for name in ("sensitivity", "specificity", "prevalence")}


def test_start_none_is_the_majority_vote_start(tiny, sampler_calls):
    sim, model = tiny
    idata = cm.sample(model, start=None, **RUN)
    got = _start_dict(sampler_calls)
    for name, value in _logodds(model.crowd_start).items():
        np.testing.assert_allclose(got[name], value, rtol=1e-12)
    # the majority-vote start is the M-step applied to the soft majority vote
    mv = cm.majority_vote(sim).values[:, 1]
    j, y = sim.annotator_idx, sim.labels
    sens = (np.bincount(j, mv[sim.item_idx] * y) + 2) / (np.bincount(j, mv[sim.item_idx]) + 3)
    np.testing.assert_allclose(model.crowd_start["sensitivity"], sens, rtol=1e-12)
    assert idata.posterior.sizes["draw"] == 15 and idata.attrs["label_switched_chains"] == []


def test_start_dict_is_used_as_given(tiny, sampler_calls):
    _, model = tiny
    start = {"sensitivity": np.linspace(0.6, 0.9, 5), "specificity": np.full(5, 0.7),
             "prevalence": 0.35}
    idata = cm.sample(model, start=start, **RUN)
    got = _start_dict(sampler_calls)
    for name, value in _logodds(start).items():
        np.testing.assert_allclose(got[name], value, rtol=1e-12)
    # a partial dict: the missing variables come from the majority-vote start
    cm.sample(model, start={"prevalence": 0.2}, **RUN)
    got = _start_dict(sampler_calls)
    np.testing.assert_allclose(got["prevalence"], logit(0.2), rtol=1e-12)
    np.testing.assert_allclose(got["sensitivity"], logit(model.crowd_start["sensitivity"]),
                               rtol=1e-12)
    assert np.isfinite(idata.posterior["sensitivity"].values).all()


def test_start_map_is_the_optimisers_point(tiny, sampler_calls):
    sim, model = tiny
    cm.sample(model, **RUN)
    em_fit = two_coin.em(sim)
    got = _start_dict(sampler_calls)
    for name in ("sensitivity", "specificity", "prevalence"):
        np.testing.assert_allclose(got[name], logit(em_fit[name].values[0, 0]), atol=1e-5)


def test_a_degenerate_map_falls_back_to_majority_vote(tiny, sampler_calls, monkeypatch):
    _, model = tiny
    real_fit_map = inference.fit_map

    def stalled(model, **kwargs):
        # stopped after one step: a gradient far above MAX_GRADIENT, as on an
        # unbounded density
        return real_fit_map(model, maxiter=1, **kwargs)

    monkeypatch.setattr(inference, "fit_map", stalled)
    with pytest.warns(UserWarning, match="the posterior mode is degenerate") as caught:
        cm.sample(model, **RUN)
    assert {w.filename for w in caught if "degenerate" in str(w.message)} == {__file__}
    got = _start_dict(sampler_calls)
    for name, value in _logodds(model.crowd_start).items():
        np.testing.assert_allclose(got[name], value, rtol=1e-12)


def test_a_mirrored_chain_is_flagged_with_a_warning(tiny, sampler_calls):
    sim, model = tiny
    # chain 1 starts with every log-odds negated (sensitivities and specificities
    # below one half, prevalence flipped): in the mirrored mode's basin, where NUTS
    # stays, its labels flipped
    sampler_calls.chain_starts = lambda x0: [x0, -x0]
    with pytest.warns(UserWarning, match=r"chain\(s\) \[1\] sit in a label-switched mode") as w:
        idata = cm.sample(model, start=None, **RUN)
    assert {x.filename for x in w if "label-switched" in str(x.message)} == {__file__}
    assert any("jitter=False" in str(x.message) for x in w)  # names the remedies
    assert idata.attrs["label_switched_chains"] == [1]
    prob = idata.posterior["item_class_prob"].mean("draw").values[..., 1]
    assert np.mean((prob[0] > 0.5) == (prob[1] > 0.5)) < 0.2
    # every chain mirrored: the reference (the start) is the odd one out
    sampler_calls.chain_starts = lambda x0: [-x0, -x0]
    with (pytest.warns(UserWarning, match="below chance"),
          pytest.warns(UserWarning, match=r"every chain \(\[0, 1\]\) disagrees")):
        idata = cm.sample(model, start=None, **RUN)
    assert idata.attrs["label_switched_chains"] == [0, 1]
