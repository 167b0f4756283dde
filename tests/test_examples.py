"""A fast subset of the docstring Examples, run: one per public module, so that an
Example that raises fails the suite (``make examples`` runs all of them, about
6 minutes; ``tests/test_house.py`` checks statically that every one exists)."""

import importlib.util
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

ROOT = Path(__file__).resolve().parents[1]

# One Example per public module: the module's main function where its Example
# runs in about a second or less (times from a tools/examples.py loop on 2
# cores), else a cheaper one of the same module: dawid_skene.em rather than
# empirical_spread (3 s), item_difficulty.simulate_irt rather than em (6 s).
# The two that fit a compiled model (inference.fit_map, report.forest_draws,
# 2-3 s each) fit the two-coin model on RTE, a graph the suite's fixtures
# compile anyway. LEFT_OUT: the modules whose every Example takes 15 s or more.
FAST = [
    "auto.family_of",
    "baselines.majority_vote",
    "checks.ppc",
    "datasets.load_rte",
    "inference.fit_map",
    "models.community.simulate",
    "models.continuous.item_log_marginal",
    "models.dawid_skene.em",
    "models.edda.fit_edda",
    "models.feature_accuracy.em",
    "models.item_difficulty.simulate_irt",
    "models.ordinal.cumulative.class_probabilities",
    "models.ordinal.em",
    "models.ordinal.latent.level_locations",
    "models.ordinal.levels.threshold_names",
    "models.spammer.em",
    "models.stacked_gaussian.stack",
    "models.two_coin.em",
    "prediction.predict",
    "report.experts.experts_equivalent",
    "report.forest.forest_draws",
    "report.heatmaps.plot_confusions",
    "report.metrics.accuracy",
    "report.plots.plot_annotators",
    "report.summary.annotator_summary",
    "saved.open_fit",
    "selection.disagreement",
    "sklearn.gold_scorer",
    "validation.replicate",
]
LEFT_OUT = {
    "calibration": "each Example runs a 20-fit simulation-based calibration (15 s)",
    "cli": "its Example runs the demo, NUTS included (26 s); tests/cli runs main",
}


def _examples_tool():
    spec = importlib.util.spec_from_file_location("examples_tool", ROOT / "tools" / "examples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOOL = _examples_tool()


@pytest.mark.parametrize("name", FAST)
def test_example_runs(name, tmp_path, monkeypatch):
    function = TOOL.public_functions()[f"crowd_models.{name}"]
    monkeypatch.chdir(tmp_path)  # an Example may write files
    try:
        TOOL.run(TOOL.example_source(function.__doc__))
    finally:
        plt.close("all")


def test_every_public_module_has_a_fast_example_or_a_reason():
    modules = {function.__module__.removeprefix("crowd_models.")
               for function in TOOL.public_functions().values()}
    chosen = [name.rsplit(".", 1)[0] for name in FAST]
    assert len(chosen) == len(set(chosen)), "one Example per module"
    assert set(LEFT_OUT) <= modules, "LEFT_OUT names a module that has no public function"
    assert sorted(modules - set(LEFT_OUT)) == sorted(chosen)
