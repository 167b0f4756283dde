"""The compiled-function cache behind fit_map and sample: hits, misses, data binding,
and the arguments sample() refuses before any compile."""

import importlib.util

import numpy as np
import pymc as pm
import pytest

import crowd_models as cm
from crowd_models import _compiled
from crowd_models.inference import SAMPLERS, functions_of
from crowd_models.models import _common as C
from crowd_models.models import dawid_skene, two_coin

from .conftest import RADIOLOGISTS


def _other_data(n_annotators, n_items, seed):
    rng = np.random.default_rng(seed)
    return two_coin.simulate(rng.uniform(0.6, 0.9, n_annotators),
                             rng.uniform(0.6, 0.9, n_annotators), n_items=n_items,
                             prevalence=0.4, labels_per_item=3, rng=rng)


def test_a_second_data_set_of_the_family_compiles_nothing(plain_model, count_compiles):
    cm.fit_map(plain_model)  # warms the cache for the two-coin structure (if needed)
    count_compiles.clear()
    # other annotators, items and labels per item: new data, the same structure
    other = _other_data(n_annotators=9, n_items=150, seed=3)
    model = two_coin.build_model(other)
    fit = cm.fit_map(model)
    assert len(count_compiles) == 0
    assert functions_of(model)._bound and all(
        b.cache_hit for b in functions_of(model)._bound.values())
    # the cached function saw the new data: MAP equals this data set's EM
    em_fit = two_coin.em(other)
    for name in ("sensitivity", "specificity", "prevalence"):
        np.testing.assert_allclose(fit.posterior[name].values, em_fit[name].values, atol=1e-6)
    np.testing.assert_allclose(fit.attrs["log_posterior"], em_fit.attrs["log_posterior"],
                               rtol=1e-10)
    assert fit.posterior.sizes["annotator"] == 9


def test_per_annotator_prior_arrays_are_inputs_not_constants(plain_model, count_compiles):
    cm.fit_map(plain_model)
    count_compiles.clear()
    other = _other_data(n_annotators=6, n_items=120, seed=4)
    a = np.linspace(2, 6, 6)
    priors = dict(sensitivity_prior=(a, 2.0), specificity_prior=(3.0, a))
    fit = cm.fit_map(two_coin.build_model(other, **priors))
    assert len(count_compiles) == 0
    em_fit = two_coin.em(other, **priors)
    np.testing.assert_allclose(fit.posterior["sensitivity"].values,
                               em_fit["sensitivity"].values, atol=1e-6)


def test_another_structure_gets_its_own_function(plain_model, sim_plain):
    cm.fit_map(plain_model)
    # a Dawid-Skene model on the same labels is another graph: other functions
    ds_model = dawid_skene.build_model(sim_plain, variant="one_coin")
    ds_fit = cm.fit_map(ds_model)
    keys = {id(b.compiled) for b in functions_of(ds_model)._bound.values()}
    two_keys = {id(b.compiled) for b in functions_of(plain_model)._bound.values()}
    assert not keys & two_keys
    # and it answers its own model: one-coin accuracy, not the two-coin rates
    em_fit = dawid_skene.em(sim_plain, variant="one_coin")
    np.testing.assert_allclose(ds_fit.posterior["accuracy"].values, em_fit["accuracy"].values,
                               atol=1e-6)
    assert not np.allclose(ds_fit.attrs["log_posterior"],
                           cm.fit_map(plain_model).attrs["log_posterior"])


def test_structure_key_separates_constants_and_ops():
    import pytensor.tensor as pt

    x = pt.dvector("x")
    with pm.Model() as model:
        pass
    f1 = _compiled.model_function(model, "probe", [x], [pt.sum(x ** 2)])
    f2 = _compiled.model_function(model, "probe", [x], [pt.sum(x ** 2)])
    f3 = _compiled.model_function(model, "probe", [x], [pt.sum(x ** 3)])
    f4 = _compiled.model_function(model, "probe", [x], [pt.sum(x * np.array([1.0, 2.0]))])
    f5 = _compiled.model_function(model, "probe", [x], [pt.sum(x * np.array([5.0, 7.0]))])
    assert f2.compiled is f1.compiled and f2.cache_hit
    assert f3.compiled is not f1.compiled  # the exponent is a scalar constant: structure
    # array constants are inputs: one function, each call with its own numbers
    assert f5.compiled is f4.compiled
    v = np.array([1.0, 1.0])
    assert float(f4(v)[0]) == 3.0 and float(f5(v)[0]) == 12.0


def test_set_data_between_fits_is_seen(sim_plain, plain_model):
    model = two_coin.build_model(sim_plain)
    first = cm.fit_map(model)
    changed = sim_plain.labels.copy()
    changed[::3] = 1  # (flipping every label would be a symmetry of the model)
    with model:
        pm.set_data({"label_idx": changed.astype("int32")})
    second = cm.fit_map(model, start={"sensitivity": np.full(5, 0.7),
                                      "specificity": np.full(5, 0.7), "prevalence": 0.5})
    assert not np.allclose(first.attrs["log_posterior"], second.attrs["log_posterior"])


@pytest.fixture(scope="module")
def tiny():
    sim = two_coin.simulate(**RADIOLOGISTS, n_items=60, prevalence=0.4,
                            rng=np.random.default_rng(7))
    return sim, two_coin.build_model(sim)


@pytest.fixture(scope="module")
def tiny_model(tiny):
    return tiny[1]


def test_sample_pymc_warm_call_compiles_once(tiny, tiny_model, count_compiles):
    first = cm.sample(tiny_model, draws=60, tune=60, chains=2, cores=1, random_seed=1,
                      progressbar=False, nuts_sampler="pymc")
    count_compiles.clear()
    second = cm.sample(tiny_model, draws=60, tune=60, chains=2, cores=1, random_seed=1,
                       progressbar=False, nuts_sampler="pymc")
    # the MAP start, NUTS's log density and the item log-likelihoods come from the
    # cache; PyMC compiles a small initial-point function (FAST_COMPILE) per
    # jittered chain start, one without jitter
    assert len(count_compiles) <= 2
    count_compiles.clear()
    cm.sample(tiny_model, draws=20, tune=20, chains=2, cores=1, random_seed=1,
              progressbar=False, jitter=False, nuts_sampler="pymc")
    assert len(count_compiles) <= 1
    assert second.attrs["nuts_sampler"] == "pymc"
    assert second.posterior.sizes == {"chain": 2, "draw": 60, "annotator": 5, "item": 60,
                                      "true_class": 2}
    np.testing.assert_array_equal(first.posterior["sensitivity"].values,
                                  second.posterior["sensitivity"].values)
    # each chain its own draws (PyMC shares a handed-in trace between chains unless
    # each copy is a new one)
    sens = second.posterior["sensitivity"].values
    assert not np.allclose(sens[0], sens[1])
    # the item log-likelihood and item_class_prob come from the cached point function:
    # check them against the EM's NumPy marginal at one draw
    draw = second.posterior.isel(chain=1, draw=17)
    params = {n: draw[n].values for n in ("sensitivity", "specificity", "prevalence")}
    prob, item_ll = C.posterior_from_joint(two_coin._joint(tiny[0], params))
    np.testing.assert_allclose(second.log_likelihood["item_labels"].isel(chain=1, draw=17).values,
                               item_ll, rtol=1e-9)
    np.testing.assert_allclose(draw["item_class_prob"].values, prob, rtol=1e-9)


def test_nutpie_compiles_once_per_structure_and_binds_new_data(tiny_model, count_compiles):
    """nutpie's compiled model is cached per structure, sizes and constant values:
    a second call and a data set of the same structure compile nothing and see
    their own data; per-annotator prior arrays (constants nutpie bakes in) miss."""
    kwargs = dict(draws=150, tune=150, chains=2, cores=1, random_seed=3, progressbar=False)
    first = cm.sample(tiny_model, **kwargs)
    count = _compiled.COMPILE_COUNT["nutpie"]
    count_compiles.clear()
    again = cm.sample(tiny_model, **kwargs)
    assert _compiled.COMPILE_COUNT["nutpie"] == count
    assert len(count_compiles) == 0  # nor any PyTensor function
    assert again.attrs["nuts_sampler"] == "nutpie"  # the default
    # a seed gives the same chains; the chains are not copies of each other
    np.testing.assert_array_equal(first.posterior["sensitivity"].values,
                                  again.posterior["sensitivity"].values)
    sens = again.posterior["sensitivity"].values
    assert not np.allclose(sens[0], sens[1])
    assert {"diverging", "tree_depth", "reached_max_treedepth"} <= set(again.sample_stats)

    def near_map(idata, model):
        # the posterior mean sits within 1.5 posterior sd of this model's MAP
        fit = cm.fit_map(model)
        post = idata.posterior["sensitivity"]
        gap = np.abs(post.mean(("chain", "draw")).values - fit.posterior["sensitivity"].values)
        return np.all(gap < 1.5 * post.std(("chain", "draw")).values + 0.01)

    assert near_map(again, tiny_model)
    # accurate annotators on 300 items: the same structure, other data
    rng = np.random.default_rng(11)
    sharp = two_coin.simulate(np.full(5, 0.95), np.full(5, 0.95), n_items=300,
                              prevalence=0.4, rng=rng)
    model = two_coin.build_model(sharp)
    sharp_idata = cm.sample(model, **kwargs)
    assert _compiled.COMPILE_COUNT["nutpie"] == count
    assert near_map(sharp_idata, model)
    assert float(sharp_idata.posterior["sensitivity"].mean()) > float(
        again.posterior["sensitivity"].mean()) + 0.1
    # per-annotator Beta(200, 2) priors: the same PyTensor structure, other constants
    strong = two_coin.build_model(sharp, sensitivity_prior=(np.full(5, 200.0), np.full(5, 2.0)))
    strong_idata = cm.sample(strong, **kwargs)
    assert _compiled.COMPILE_COUNT["nutpie"] == count + 1
    assert near_map(strong_idata, strong)
    assert float(strong_idata.posterior["sensitivity"].mean()) > float(
        sharp_idata.posterior["sensitivity"].mean()) + 0.01


@pytest.mark.parametrize("sampler", [s for s in SAMPLERS if s != "pymc"])  # against PyMC's
def test_other_samplers_when_installed(tiny_model, sampler):
    package = {"nutpie": "nutpie", "numpyro": "numpyro"}[sampler]
    if importlib.util.find_spec(package) is None:
        with pytest.raises(ValueError, match=f"needs the package '{package}'"):
            cm.sample(tiny_model, nuts_sampler=sampler)
        hint = "crowd_models[jax]" if package == "numpyro" else package
        pytest.skip(f"{package} is not installed (pip install '{hint}')")
    idata = cm.sample(tiny_model, draws=100, tune=100, chains=2, cores=1, random_seed=2,
                      nuts_sampler=sampler, progressbar=False)
    assert idata.attrs["nuts_sampler"] == sampler
    ref = cm.sample(tiny_model, draws=200, tune=200, chains=2, cores=1, random_seed=2,
                    progressbar=False, nuts_sampler="pymc")
    for name in ("sensitivity", "specificity"):
        a = idata.posterior[name].mean(("chain", "draw")).values
        b = ref.posterior[name].mean(("chain", "draw")).values
        sd = ref.posterior[name].std(("chain", "draw")).values
        assert np.all(np.abs(a - b) < 1.0 * sd + 0.02)
    assert idata.log_likelihood["item_labels"].shape == (2, 100, 60)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(nuts_sampler="stan"), ValueError, "nuts_sampler='stan' is unknown"),
    (dict(draws=0), ValueError, "draws must be >= 1"),
    (dict(chains=0), ValueError, "chains must be >= 1"),
    (dict(draws=2.5), TypeError, "draws must be an integer"),
    (dict(tune=-1), ValueError, "tune must be >= 0"),
    (dict(target_accept=1.0), ValueError, "target_accept must lie in"),
    (dict(start={"sensitivity": np.ones(3) * 0.7}), ValueError, "has shape \\(3,\\)"),
])
def test_sample_refuses_bad_arguments_before_compiling(tiny_model, count_compiles, kwargs,
                                                       error, match):
    with pytest.raises(error, match=match):
        cm.sample(tiny_model, **kwargs)
    assert len(count_compiles) == 0


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(method="newton"), ValueError, "method='newton' is not one fit_map supports"),
    (dict(method="Powell", maxiter=3), None, None),
    (dict(method="Powell", gtol=1e-3), TypeError, "unknown option\\(s\\) \\['gtol'\\]"),
    (dict(start={"sensitivity": 2.0}), ValueError, "is a number, but sensitivity has shape"),
    (dict(start={"sensitivity": np.ones((5, 2))}), ValueError, "has shape \\(5, 2\\)"),
    (dict(start={"sensitivity": "high"}), TypeError, "must be numeric"),
    (dict(maxfev=3), TypeError, "unknown option\\(s\\) \\['maxfev'\\]"),
])
def test_fit_map_arguments(tiny_model, count_compiles, kwargs, error, match):
    cm.fit_map(tiny_model)
    count_compiles.clear()
    if error is None:  # Powell takes no gtol: the default one is not passed
        with pytest.warns(UserWarning, match="stopped without converging"):
            cm.fit_map(tiny_model, **kwargs)
        return
    with pytest.raises(error, match=match):
        cm.fit_map(tiny_model, **kwargs)
    assert len(count_compiles) == 0


def test_continuous_labels_of_another_scale_share_the_compiled_graph(count_compiles):
    """The continuous family's priors scale with the labels' sd and centre on their
    mean; those enter as data, so labels of another scale and mean compile nothing
    (neither PyTensor nor nutpie) and the fits see their own labels."""
    from crowd_models.models import continuous

    rng = np.random.default_rng(5)
    sets = []
    for shift, stretch in ((0.0, 1.0), (50.0, 8.0)):
        ann = continuous.simulate(rng.gamma(4, 1, 5), bias=np.array([-0.4, -0.2, 0, 0.2, 0.4]),
                                  n_items=40, labels_per_item=3, rng=rng)
        frame = ann.to_frame()
        frame["label"] = shift + stretch * frame["label"]
        sets.append(cm.Annotations.from_frame(frame, continuous=True))
    kwargs = dict(draws=100, tune=100, chains=1, cores=1, random_seed=2, progressbar=False)
    cm.sample(continuous.build_model(sets[0], bias=True), **kwargs)  # warms both caches
    nutpie_count = _compiled.COMPILE_COUNT["nutpie"]
    count_compiles.clear()
    model = continuous.build_model(sets[1], bias=True)
    fit = cm.fit_map(model)
    idata = cm.sample(model, **kwargs)
    assert len(count_compiles) == 0
    assert _compiled.COMPILE_COUNT["nutpie"] == nutpie_count
    em_fit = continuous.em(sets[1], bias=True)
    for name in ("intercept", "truth_precision", "bias"):
        np.testing.assert_allclose(fit.posterior[name].values, em_fit[name].values,
                                   rtol=1e-5, atol=1e-6)
    em_intercept = float(em_fit["intercept"].values.ravel()[0])  # near 50: its own labels
    assert abs(float(idata.posterior["intercept"].mean()) - em_intercept) < 4.0


@pytest.fixture
def fresh_process(monkeypatch, tmp_path):
    """The compiled-function cache of a new process, quick first fits on
    (``QUICK_FITS = 1``) and the markers of compiled structures in ``tmp_path``
    (the compiled code itself may still come from PyTensor's disk cache)."""
    monkeypatch.setattr(_compiled, "_CACHE", {})
    monkeypatch.setattr(_compiled, "_QUICK_SERVED", type(_compiled._QUICK_SERVED)())
    monkeypatch.setattr(_compiled, "QUICK_FITS", 1)
    monkeypatch.setattr(_compiled, "MARKER_DIR", tmp_path)
    return tmp_path


def _kinds(model, quick):
    return {k for k, b in functions_of(model)._bound.items() if b.compiled.quick == quick}


def test_first_fit_of_a_structure_not_on_disk_runs_quick_and_matches_the_compiled_fit(
        sim_plain, fresh_process):
    """The first fit of a structure whose compiled code no marker vouches for runs on
    PyTensor's Python backend, the second compiles (and marks the structure), a new
    process with the markers compiles from the start; the fits agree with each other
    and with the EM fixed point."""
    quick_before = _compiled.COMPILE_COUNT["quick"]
    model = two_coin.build_model(sim_plain)
    first = cm.fit_map(model, laplace=True, random_seed=4)
    assert _kinds(model, True) >= {"logp_grad", "start", "point", "nuts_logp_grad",
                                   "constrained"}
    assert _compiled.COMPILE_COUNT["quick"] - quick_before == 5
    assert not list(fresh_process.iterdir())  # nothing compiled: nothing marked
    # outside a fit (sample's many calls), the model's functions are the compiled ones
    assert not functions_of(model).point().compiled.quick
    second = cm.fit_map(model, laplace=True, random_seed=4)
    assert not _kinds(model, True) and _kinds(model, False) >= {"logp_grad", "start", "point"}
    assert len(list(fresh_process.glob("*.compiled"))) >= 5
    em_fit = two_coin.em(sim_plain)
    for name in ("sensitivity", "specificity", "prevalence"):
        # two climbs, each stopped within the polish's gradient threshold of the mode
        np.testing.assert_allclose(first.posterior[name].values, second.posterior[name].values,
                                   rtol=1e-7)
        np.testing.assert_allclose(first.posterior[name].values, em_fit[name].values, atol=1e-6)
    np.testing.assert_allclose(first.attrs["log_posterior"], second.attrs["log_posterior"],
                               rtol=1e-12)
    np.testing.assert_allclose(first.log_likelihood["item_labels"].values,
                               second.log_likelihood["item_labels"].values, rtol=1e-7)
    gaussians = [f["laplace_approximation"] for f in (first, second)]
    np.testing.assert_allclose(gaussians[0]["mean"].values, gaussians[1]["mean"].values,
                               rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(gaussians[0]["covariance"].values,
                               gaussians[1]["covariance"].values, rtol=1e-5, atol=1e-9)
    # a new process on this machine: the markers say the compiled code is on disk
    _compiled._CACHE.clear()
    _compiled._QUICK_SERVED.clear()
    other = two_coin.build_model(_other_data(n_annotators=7, n_items=100, seed=8))
    cm.fit_map(other)
    assert not _kinds(other, True)


def test_an_unknown_length_in_a_shape_keeps_the_structure_nameable():
    """PyTensor's None (``specify_shape``'s unknown length) prints its type with an
    address; the structure key names it by value, so that a later process finds the
    same marker."""
    import pytensor.tensor as pt

    x = pt.dmatrix("x")
    key = ("probe", _compiled._structure_key([x], [pt.specify_shape(x, (None, 2)).sum()]),
           "None")
    assert " at 0x" not in repr(key)
    assert _compiled._marker_path(key) is not None


def _three_class_crowd(n_items, seed):
    """Five annotators of accuracy 0.7-0.9 on three classes."""
    accuracy = np.array([0.9, 0.85, 0.8, 0.75, 0.7])[:, None, None]
    confusion = accuracy * np.eye(3) + (1 - accuracy) / 2 * (1 - np.eye(3))
    return dawid_skene.simulate(confusion, n_items=n_items, rng=np.random.default_rng(seed))


def test_every_function_of_a_compiled_dawid_skene_fit_is_marked(fresh_process):
    """Dawid-Skene's graphs with three classes or more hold an unknown length in a
    shape: once a fit has compiled, each function it ran is marked, and a new process
    fits compiled from the start."""
    model = dawid_skene.build_model(_three_class_crowd(300, seed=3))
    cm.fit_map(model)  # quick
    cm.fit_map(model)  # compiles and marks
    compiled = _kinds(model, False)
    assert compiled >= {"logp_grad", "start", "point"}
    assert len(list(fresh_process.glob("*.compiled"))) == len(compiled)
    _compiled._CACHE.clear()
    _compiled._QUICK_SERVED.clear()
    other = dawid_skene.build_model(_three_class_crowd(120, seed=4))
    cm.fit_map(other)
    assert not _kinds(other, True) and _kinds(other, False) >= {"logp_grad", "start", "point"}


def test_no_quick_fits_when_switched_off(sim_plain, fresh_process, monkeypatch):
    monkeypatch.setattr(_compiled, "QUICK_FITS", 0)
    model = two_coin.build_model(sim_plain)
    cm.fit_map(model)
    assert not _kinds(model, True)


@pytest.mark.parametrize("text, expected", [("0", 0), ("3", 3), ("-1", None), ("two", None)])
def test_quick_fits_setting(text, expected):
    if expected is None:
        with pytest.raises(ValueError, match="CROWD_MODELS_QUICK_FITS must be a whole number"):
            _compiled._quick_fits_setting(text)
    else:
        assert _compiled._quick_fits_setting(text) == expected


def test_few_calls_stay_quick_until_the_structure_is_compiled(tiny, fresh_process):
    """nutpie's start checks (a handful of calls) take the quick function whatever
    the count of quick fits, and the compiled one once the process holds it."""
    fns = functions_of(two_coin.build_model(tiny[0]))
    for _ in range(2):
        with fns.few_calls():
            assert fns.nuts_logp_grad().compiled.quick
    assert not _compiled._QUICK_SERVED  # not counted as fits
    compiled = fns.nuts_logp_grad()  # outside: sample's own, compiled
    assert not compiled.compiled.quick
    with fns.few_calls():
        assert fns.nuts_logp_grad().compiled is compiled.compiled
    with fns.fit_scope():  # few calls inside a fit: the fit's state comes back after them
        with fns.few_calls():
            assert fns.quick == "few"
        assert fns.quick is True
    assert fns.quick is False


@pytest.mark.parametrize("family, options", [(two_coin, {}),
                                             (dawid_skene, {"variant": "one_coin"})])
def test_draws_not_compiled_for_are_evaluated_vectorised(sim_plain, fresh_process, monkeypatch,
                                                         family, options):
    """A sampler's draws, while the structure's compiled point function is neither in
    the process nor on disk: the point function vectorised over the draws, on the
    Python backend, in chunks of draws (a ragged last one), gives what the compiled
    function gives draw by draw; once that one is at hand it is used instead."""
    from crowd_models import _points

    model = family.build_model(sim_plain, **options)
    fns = functions_of(model)
    start = cm.fit_map(model)
    per_draw = sum(start[g][v].size for g in ("posterior", "log_likelihood") for v in start[g])
    # chunks of three draws after the first one: 1 + 3 + 3 + 3 + 3 + 1 of the 14
    monkeypatch.setattr(_points, "DRAW_CHUNK", 3 * per_draw + 1)
    parts = fns.start()(*[np.asarray(start.posterior[n].values[0, 0]) for n in fns.free_names])
    rng = np.random.default_rng(9)
    draws = [np.asarray(p) + 0.1 * rng.normal(size=(2, 7, *np.shape(p))) for p in parts]
    post, ll = _points.point_outputs(model, draws, sample_shape=(2, 7))
    assert fns._bound["point_draws"].compiled.quick
    assert "point" not in _kinds(model, False)  # not compiled for these draws
    flat = [p.reshape(14, *p.shape[2:]) for p in draws]
    # draws whose outputs are too many to vectorise go to the compiled function
    monkeypatch.setattr(_points, "VECTORISED_VALUES", 14 * per_draw)
    assert _points._over_draws(fns, flat) is not None
    monkeypatch.setattr(_points, "VECTORISED_VALUES", 14 * per_draw - 1)
    assert _points._over_draws(fns, flat) is None
    compiled = fns.point()  # outside a fit: the compiled per-draw function
    assert not compiled.compiled.quick
    names = [*fns.point_names()[0], *fns.point_names()[1]]
    for c in range(2):
        for d in range(7):
            outs = compiled(*[np.asarray(p[c, d]) for p in draws])
            for name, out in zip([*names, *fns.point_names()[2]], outs, strict=True):
                got = (post | ll)[name][c, d]
                np.testing.assert_allclose(got, out, rtol=1e-12, atol=1e-14, err_msg=name)
    monkeypatch.setattr(_points, "VECTORISED_VALUES", 14 * per_draw)
    assert _points._over_draws(fns, flat) is None  # the compiled one is at hand now
