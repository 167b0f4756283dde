"""``positive=``: which of two classes the binary families call positive."""

import numpy as np
import pandas as pd
import pytest

import crowd_models as cm
from crowd_models.cli import main
from crowd_models.models import feature_accuracy, two_coin


@pytest.fixture(scope="module")
def sick_well():
    """Two-coin data whose classes sort as ['sick', 'well'] (so 'well' is positive)."""
    sim = two_coin.simulate(sensitivity=[0.9, 0.8, 0.7, 0.75, 0.6],
                            specificity=[0.95, 0.7, 0.8, 0.65, 0.7], n_items=300,
                            prevalence=0.3, rng=np.random.default_rng(11))
    frame = sim.to_frame().assign(label=lambda d: d["label"].map({0: "well", 1: "sick"}))
    gold = pd.Series(np.where(sim.gold == 1, "sick", "well"), index=sim.items)
    return cm.Annotations.from_frame(frame, gold=gold), sim


def test_with_positive_swaps_codes_classes_and_gold(sick_well):
    ann, _ = sick_well
    assert list(ann.classes) == ["sick", "well"]
    flipped = ann.with_positive("sick")
    assert list(flipped.classes) == ["well", "sick"]
    # the same labels and gold, in the user's names
    pd.testing.assert_frame_equal(flipped.to_frame(), ann.to_frame())
    pd.testing.assert_series_equal(flipped.gold_series(), ann.gold_series())
    assert ann.with_positive("well") is ann  # already second


def test_with_positive_errors(sick_well):
    ann, _ = sick_well
    with pytest.raises(ValueError, match=r"positive='ill' is not one of the classes "
                                         r"\['sick', 'well'\]"):
        ann.with_positive("ill")
    numeric = cm.Annotations.from_frame(pd.DataFrame(
        {"item": [1, 1, 2, 2], "annotator": ["a", "b", "a", "b"], "label": [0, 1, 1, 1]}))
    with pytest.raises(ValueError, match=r"'1' is not one of the classes \[0, 1\]"):
        numeric.with_positive("1")
    three = cm.Annotations.from_frame(pd.DataFrame(
        {"item": [1, 1, 2], "annotator": ["a", "b", "a"], "label": ["x", "y", "z"]}))
    with pytest.raises(ValueError, match="positive= picks one of two classes; these "
                                         "annotations have 3"):
        three.with_positive("x")
    ratings = cm.Annotations.from_frame(pd.DataFrame(
        {"item": [1, 1], "annotator": ["a", "b"], "label": [0.5, 1.5]}), continuous=True)
    with pytest.raises(ValueError, match="continuous"):
        ratings.with_positive(0.5)


def test_with_positive_drops_a_simulation_truth_with_a_warning(sick_well):
    _, sim = sick_well
    with pytest.warns(UserWarning, match="truth=None"):
        assert sim.with_positive(0).truth is None


def test_two_coin_positive_swaps_sensitivity_and_specificity(sick_well):
    """With symmetric priors, naming the other class positive mirrors the fit:
    sensitivity and specificity trade places and prevalence becomes 1 - prevalence."""
    ann, sim = sick_well
    default = two_coin.em(ann)  # 'well' positive
    sick = two_coin.em(ann, positive="sick")
    assert list(sick["true_class"].values) == ["well", "sick"]
    np.testing.assert_allclose(sick["sensitivity"], default["specificity"], atol=1e-8)
    np.testing.assert_allclose(sick["specificity"], default["sensitivity"], atol=1e-8)
    np.testing.assert_allclose(sick["prevalence"], 1 - default["prevalence"], atol=1e-8)
    # 'sick' is the simulation's positive class: its rates are recovered
    np.testing.assert_allclose(sick["sensitivity"].values.ravel(), [0.9, 0.8, 0.7, 0.75, 0.6],
                               atol=0.12)
    assert float(sick["prevalence"].squeeze()) == pytest.approx(0.3, abs=0.06)
    # decoupled and build_model take it too
    model = two_coin.build_model(ann, positive="sick")
    assert list(model.coords["true_class"]) == ["well", "sick"]
    np.testing.assert_allclose(model.crowd_start["sensitivity"],
                               two_coin.build_model(ann).crowd_start["specificity"], atol=1e-12)


def test_feature_accuracy_positive_flips_the_classifier():
    sim = feature_accuracy.simulate(n_items=300, n_annotators=4, n_features=3,
                                    rng=np.random.default_rng(5))
    default = feature_accuracy.em(sim, n_restarts=3)
    with pytest.warns(UserWarning, match="carry no truth"):
        flipped = feature_accuracy.em(sim, n_restarts=3, positive=sim.classes[0])
    assert list(flipped["true_class"].values) == list(sim.classes[::-1])
    np.testing.assert_allclose(flipped["coef"], -default["coef"], atol=1e-6)
    np.testing.assert_allclose(flipped["intercept"], -default["intercept"], atol=1e-6)
    np.testing.assert_allclose(flipped["accuracy_coef"], default["accuracy_coef"], atol=1e-6)


def test_cli_positive(sick_well, tmp_path, capsys):
    ann, _ = sick_well
    ann.to_frame().to_csv(tmp_path / "labels.csv", index=False)
    args = ["fit", str(tmp_path / "labels.csv"), "--method", "em"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    assert "positive class: 'well'" in capsys.readouterr().out
    assert main([*args, "--positive", "sick", "--out", str(tmp_path / "b")]) == 0
    assert "positive class: 'sick'" in capsys.readouterr().out
    a = pd.read_csv(tmp_path / "a" / "annotators.csv", index_col=0)
    b = pd.read_csv(tmp_path / "b" / "annotators.csv", index_col=0)
    np.testing.assert_allclose(b["sensitivity_mean"], a["specificity_mean"], atol=1e-6)
