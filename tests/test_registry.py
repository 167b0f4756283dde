"""``models._registry``: one record per (family, variant) that every list of the
families derives from, the protocol hooks one helper attaches, and the
family and variant every kind of fit records."""

import inspect
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
import xarray as xr

import crowd_models as cm
from crowd_models.models import _common as C
from crowd_models.models import _registry, continuous, dawid_skene, two_coin

TOY_MODULE = '''
"""A toy family: the spammer model under another name."""
from crowd_models.models.spammer import build_model, em, simulate  # noqa: F401
'''

TOY_CHECK = '''
import dataclasses
import sys
import numpy as np
import xarray as xr
from crowd_models.models import _registry as r


def table(family, values, design, features, rng):
    return family.simulate(values["trustworthiness"], n_items=design["n_items"], rng=rng)


toy = [r.Variant("toy", "toy family", "categorical", variant, "variant", module="toy_family",
                 cli="toy-family", cli_default=variant == "b", has_em=variant == "a",
                 choice=r.Choice("toy_" + variant, 99, lambda K: 7, sharing=True),
                 sbc=(r.Case(variant, table, {"variant": variant}),))
       for variant in ("a", "b")]
toy[1] = dataclasses.replace(toy[1], title="toy family (b)")
r.REGISTRY = (*r.REGISTRY, *toy)

from crowd_models import _sbc_cases, auto  # noqa: E402
from crowd_models.cli import _commands, _options, _parser  # noqa: E402
from crowd_models.models import MODEL_NAMES, MODELS  # noqa: E402
from crowd_models.report._describe import _fit_description  # noqa: E402

import toy_family  # noqa: E402

# auto's candidates, with their parameter counts and roles
assert auto.CANDIDATES["toy_a"][0] is toy_family, auto.CANDIDATES
assert auto.family_of("toy_b")[1] == {"variant": "b"}
assert auto.CANDIDATES["toy_b"][2](3) == 7
assert {"toy_a", "toy_b"} <= set(auto.SHARING) and auto.NO_EM == ("ordinal", "toy_b")
assert list(auto.CANDIDATES)[-2:] == ["toy_a", "toy_b"]
assert _commands._AUTO_MODELS["toy_b"] == ("toy-family", "b")
# the command line: --model and --variant, the default variant first, no EM for b
assert "toy-family" in MODEL_NAMES and MODELS["toy-family"] is toy_family
assert _options.VARIANTS["toy-family"] == ("b", "a")
assert ("toy-family", "b") in _options.WITHOUT_EM
args = _parser().parse_args(["fit", "labels.csv", "--model", "toy-family", "--variant", "a"])
plan = _options._plan(args)
assert (plan.model, plan.variant, plan.options, plan.has_em) == (
    "toy-family", "a", {"variant": "a"}, True), plan
plan = _options._plan(_parser().parse_args(["fit", "labels.csv", "--model", "toy-family"]))
assert (plan.variant, plan.has_em) == ("b", False), plan
# the report's name of a fit that records the toy family
fit = xr.Dataset(attrs={"family": "toy", "variant": "b", "method": "em"})
assert _fit_description(fit, fit) == "toy family (b), EM", _fit_description(fit, fit)
# the calibration study's cases, and a table drawn by the case's own function
cases = _sbc_cases.all_cases()
assert cases["toy", "a"]["options"] == {"variant": "a"} and not cases["toy", "b"]["em"]
design = _sbc_cases.check_design({}, cases["toy", "a"])
ann = _sbc_cases.simulate_table("toy", "a", {"trustworthiness": np.full(6, 0.9)}, design,
                                np.random.default_rng(0))
assert ann.n_items == 60 and ann.n_annotators == 6
assert "pymc" in sys.modules  # auto was imported for real
print("toy family seen everywhere")
'''


def test_a_toy_family_added_to_the_registry_alone_appears_everywhere(tmp_path):
    """Two records (and a module) added to the registry before the package's
    modules read it: auto's candidates, the command line's --model and
    --variant, the report's title and the SBC cases all hold the toy family.
    A fresh interpreter, because those modules derive their tables on import."""
    (tmp_path / "toy_family.py").write_text(TOY_MODULE)
    result = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n" + TOY_CHECK],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "toy family seen everywhere" in result.stdout


def test_the_registry_names_each_family_once_per_variant():
    keys = [(r.family, r.variant) for r in _registry.REGISTRY]
    assert len(keys) == len(set(keys))
    assert all(r.labels in _registry.LABEL_KINDS for r in _registry.REGISTRY)
    choices = [r.choice.name for r in _registry.candidates()]
    assert len(choices) == len(set(choices))
    for name, variants in _registry.cli_variants().items():
        defaults = [r for r in _registry.REGISTRY if r.cli == name and r.cli_default]
        assert len(defaults) == 1, name  # one default variant per --model name
        assert variants[:1] == ((defaults[0].variant,) if defaults[0].variant else ())
    assert _registry.find("dawid-skene", "pooled").title == "Dawid-Skene (pooled)"
    assert _registry.find("spammer", None).family == "spammer"  # its only record
    assert _registry.find("dawid_skene", "") is None and _registry.find(None) is None


@pytest.mark.parametrize("record", [r for r in _registry.REGISTRY if r.variant],
                         ids=lambda r: f"{r.family}/{r.variant}")
def test_each_variant_is_one_the_family_accepts(record):
    """The records' variants are the families' own: an unknown one is refused
    with the list the family keeps, which holds every record's."""
    from importlib import import_module

    module = import_module(record.module_name)
    keyword = inspect.signature(module.build_model).parameters[record.keyword]
    assert keyword.kind is keyword.KEYWORD_ONLY
    known = module.NOISES if record.keyword == "noise" else module.VARIANTS
    assert record.variant in known


@pytest.mark.parametrize("record", _registry.REGISTRY,
                         ids=lambda r: f"{r.family}/{r.variant}" if r.variant else r.family)
def test_each_prior_record_is_a_keyword_of_its_family_and_its_default(record):
    """A record's priors are keywords of the family's build_model (and of em,
    for the ones its variant takes), their defaults are the family's
    DEFAULT_PRIORS, and the command line reads each default it shows with the
    option's own kind."""
    from importlib import import_module

    from crowd_models.cli import _options

    module = import_module(record.module_name)
    assert module.DEFAULT_PRIORS == _registry.default_priors(record.family)
    assert record.priors, "every family has prior keywords"
    keywords = inspect.signature(module.build_model).parameters
    for prior in record.priors:
        assert prior.name in keywords, prior.name
        assert set(prior.variants) <= {r.variant for r in _registry.REGISTRY
                                       if r.family == record.family}, prior.name
        if not prior.setting:
            assert module.DEFAULT_PRIORS[prior.name] == prior.default, prior.name
        if prior.kind is None:
            continue
        assert prior.kind in _options._KINDS and prior.metavar and prior.text, prior.name
        shown = _options._shown(prior)
        if prior.default is None and not re.fullmatch(r"[\d.,]+", shown):
            continue  # a rule or words: the family resolves None (confusion_prior, spread)
        value = _options._parse_prior(shown, f"--{prior.name}", prior.kind)
        assert prior.default is None or value == prior.default, prior.name
    if record.has_em:
        em_keywords = inspect.signature(module.em).parameters
        assert {p.name for p in record.variant_priors} <= set(em_keywords)


def test_the_command_line_has_one_prior_option_per_keyword_with_one_help_text():
    """A keyword several families take keeps one --help text and metavar; the
    generated options are those of the records, in the order --help lists."""
    from crowd_models.cli import _options

    texts = {}
    for record in _registry.REGISTRY:
        for prior in record.priors:
            if prior.kind is not None:
                assert texts.setdefault(prior.name, (prior.metavar, prior.text)) == (
                    prior.metavar, prior.text), prior.name
    offered = {p.name for r in _registry.REGISTRY if r.cli for p in r.variant_priors
               if p.kind is not None}
    names = [option.name for option in _options.PRIORS]
    assert set(names) == offered and len(names) == len(offered)
    assert names == [n for n in _options._PRIOR_ORDER if n in offered]
    places = {key for option in _options.PRIORS for key in option.where}
    assert set(_options._PLACE_ORDER) <= places | {k.partition("/")[0] for k in places}
    spread_prior = next(o for o in _options.PRIORS if o.name == "spread_prior")
    assert list(spread_prior.where) == ["dawid-skene/hierarchical",
                                        "item-difficulty/hierarchical"]


def test_the_em_hook_takes_every_keyword_of_em_from_build_model(rte):
    """The comparison's EM gets the model's priors, with no list written twice:
    every keyword of em but its controls, with the value build_model was given."""
    model = dawid_skene.build_model(rte, variant="pooled", spread=0.7, accuracy_prior=(3, 2))
    keywords = model.crowd_em.keywords
    expected = {p.name for p in inspect.signature(dawid_skene.em).parameters.values()
                if p.kind is p.KEYWORD_ONLY} - C.EM_CONTROLS
    assert set(keywords) == expected
    assert keywords["variant"] == "pooled" and keywords["spread"] == 0.7
    assert keywords["accuracy_prior"] == (3, 2)
    assert model.crowd_em.args == (rte,)
    assert model.crowd_family == ("dawid_skene", "pooled")
    assert not hasattr(dawid_skene.build_model(rte, variant="hierarchical"), "crowd_em")


def test_an_em_keyword_that_build_model_lacks_is_refused():
    def em(annotations, *, spread_prior=1.0, tol=1e-8):
        raise AssertionError("not called")

    with pytest.raises(TypeError, match=r"toy.em takes spread_prior, which toy.build_model "
                                        r"does not"):
        C.attach_protocol(object.__new__(type("M", (), {})), "toy", start={}, em=em,
                          annotations=None, arguments={"tol": 1e-3})


def test_fit_map_warns_when_a_model_lost_its_hooks(rte_model, monkeypatch):
    import pymc as pm

    from crowd_models import _points, inference

    rebuilt = pm.do(rte_model, {"prevalence": 0.5})
    assert not hasattr(rebuilt, "crowd_family")
    with pytest.warns(UserWarning, match=r"carries none of the hooks .* pm.do or pm.observe "
                                         r".* Pass start="):
        _points.check_protocol(rebuilt)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _points.check_protocol(rte_model)  # a factory's model: silent
    # fit_map runs the check before anything else
    seen = []
    monkeypatch.setattr(inference, "check_protocol", seen.append)
    monkeypatch.setattr(inference, "functions_of", lambda model: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        cm.fit_map(rebuilt)
    assert seen == [rebuilt]


def test_every_kind_of_fit_records_its_family_and_variant(rte, rte_model, plain_model,
                                                          sim_plain, tmp_path):
    from crowd_models._fits import posterior_of
    from crowd_models.cli import main
    from crowd_models.inference import laplace_fit
    from crowd_models.report._describe import _fit_description

    em_fit = two_coin.em(rte)
    map_fit = cm.fit_map(rte_model, laplace=True, random_seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        nuts = cm.sample(plain_model, draws=20, tune=20, chains=1, cores=1, random_seed=1,
                         start=two_coin.em(sim_plain), progressbar=False, nuts_sampler="pymc")
    fits = {"em": em_fit, "map": map_fit, "laplace": laplace_fit(map_fit),
            "nuts": nuts,
            "pooled em": dawid_skene.em(rte, variant="pooled"),
            "continuous em": continuous.em(cm.datasets.load_affect("anger"))}
    frame = rte.to_frame()
    frame.to_csv(tmp_path / "rte.csv", index=False)
    assert main(["fit", str(tmp_path / "rte.csv"), "--model", "dawid-skene", "--variant",
                 "pooled", "--method", "em", "--out", str(tmp_path / "out")]) == 0
    with xr.open_dataset(tmp_path / "out" / "fit.nc", engine="h5netcdf") as saved:
        fits["fit.nc"] = saved.load()
    recorded = {name: (fit.attrs["family"], fit.attrs["variant"]) for name, fit in fits.items()}
    assert recorded == {"em": ("two_coin", ""), "map": ("two_coin", ""),
                        "laplace": ("two_coin", ""), "nuts": ("two_coin", ""),
                        "pooled em": ("dawid_skene", "pooled"),
                        "continuous em": ("continuous", "gaussian"),
                        "fit.nc": ("dawid_skene", "pooled")}
    titles = {name: _fit_description(fit, posterior_of(fit)) for name, fit in fits.items()}
    assert titles["nuts"] == "two-coin, NUTS" and titles["fit.nc"] == "Dawid-Skene (pooled), EM"
    assert titles["laplace"] == "two-coin, MAP (Laplace intervals)"
    assert np.isfinite(map_fit.attrs["log_posterior"])

