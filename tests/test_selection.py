"""Item splits for gold-free model selection (selection.split_items,
kfold_items) and the error messages of the selection helpers."""

import numpy as np
import pandas as pd
import pytest

import crowd_models as cm
from crowd_models import selection
from crowd_models.models import feature_accuracy as fa


@pytest.fixture(scope="module")
def sim():
    return fa.simulate(61, n_features=3, rng=4)


def _items_with_everything(part, whole):
    """Each item of ``part`` carries all of its labels, its feature row and its gold."""
    rows = whole.to_frame()
    rows = rows[rows["item"].isin(part.items)].sort_values(["item", "annotator"])
    mine = part.to_frame().sort_values(["item", "annotator"])
    assert mine[["item", "annotator", "label"]].to_numpy().tolist() == rows[
        ["item", "annotator", "label"]].to_numpy().tolist()
    where = whole.items.get_indexer(part.items)
    np.testing.assert_array_equal(part.features, whole.features[where])
    np.testing.assert_array_equal(part.gold, whole.gold[where])


def test_split_items_is_a_disjoint_partition_of_the_items(sim):
    train, test = selection.split_items(sim, 0.3, rng=0)
    assert test.n_items == round(0.3 * 61) == 18 and train.n_items == 43
    assert not set(train.items) & set(test.items)
    assert set(train.items) | set(test.items) == set(sim.items)
    assert train.n_annotations + test.n_annotations == sim.n_annotations
    for part in (train, test):
        _items_with_everything(part, sim)
    # the same seed, the same split; another seed, another one
    again = selection.split_items(sim, 0.3, rng=0)[1]
    assert list(again.items) == list(test.items)
    assert set(selection.split_items(sim, 0.3, rng=1)[1].items) != set(test.items)


def test_kfold_items_folds_partition_the_items(sim):
    folds = selection.kfold_items(sim, 4, rng=2)
    assert len(folds) == 4
    held = [set(h.items) for _, h in folds]
    assert sorted(len(h) for h in held) == [15, 15, 15, 16]  # 61 = 15 + 15 + 15 + 16
    assert set().union(*held) == set(sim.items)
    assert sum(len(h) for h in held) == sim.n_items  # disjoint
    for train, out in folds:
        assert set(train.items) == set(sim.items) - set(out.items)
        _items_with_everything(out, sim)
        _items_with_everything(train, sim)


def test_split_and_fold_messages(sim):
    for bad in (0, 1, 1.5, -0.2):
        with pytest.raises(ValueError, match=r"test_fraction must be in \(0, 1\)"):
            selection.split_items(sim, bad)
    with pytest.raises(ValueError, match="test_fraction=0.001 leaves an empty side with 61"):
        selection.split_items(sim, 0.001)
    for bad in (1, 62):
        with pytest.raises(ValueError, match=r"n_folds must be between 2 and the number of "
                                             r"items \(61\)"):
            selection.kfold_items(sim, bad)
    continuous = cm.Annotations.from_frame(pd.DataFrame(
        {"item": [1, 2], "annotator": ["a", "b"], "label": [0.5, 1.5]}), continuous=True)
    with pytest.raises(ValueError, match="needs categorical labels; these are continuous"):
        selection.split_items(continuous)


def test_disagreement_prediction_messages(sim):
    with pytest.raises(ValueError, match=r"predictions must be one per held-out item \(61\)"):
        selection.disagreement(np.zeros(5), sim)
    with pytest.raises(ValueError, match=r"\(item, class\) predictions must have shape"):
        selection.disagreement(np.zeros((61, 3)), sim)
    with pytest.raises(ValueError, match=r"probability predictions must lie in \[0, 1\]"):
        selection.disagreement(np.full(61, 1.5), sim)
    with pytest.raises(ValueError, match=r"class-code predictions must lie in 0..1"):
        selection.disagreement(np.full(61, 2), sim)
    three = cm.Annotations.from_frame(pd.DataFrame(
        {"item": [1, 2, 3], "annotator": ["a", "b", "a"], "label": ["x", "y", "z"]}))
    with pytest.raises(ValueError, match="float predictions are read as P\\(second class\\)"):
        selection.disagreement(np.full(3, 0.5), three)
    # the score itself: the share of labels that disagree with hard predictions
    pred = (fa.predict(fa.lasso_majority_vote(sim), sim.features) > 0.5).astype(int)
    expected = np.mean(sim.labels != pred[sim.item_idx])
    np.testing.assert_allclose(selection.disagreement(pred, sim), expected, rtol=1e-12)


def test_select_penalty_messages(sim):
    for bad in ([], [[1.0, 2.0]]):
        with pytest.raises(ValueError, match="penalties must be a non-empty 1-D grid"):
            selection.select_penalty(sim, bad)
    with pytest.raises(ValueError, match="validation needs features"):
        selection.select_penalty(sim, [1.0], validation=sim.with_features(None))


def test_select_penalty_scores_are_the_held_out_disagreement(sim):
    """With a validation set: one EM per penalty on the training items, and the score
    is the share of validation labels that differ from the classifier's hard call on
    their item (computed here from scratch); the smallest score wins."""
    train, valid = selection.split_items(sim, 0.5, rng=3)
    grid = [0.05, 2.0, 40.0]
    chosen = selection.select_penalty(train, grid, validation=valid, n_restarts=1)
    by_hand = []
    for lam in grid:
        fit = fa.em(train, penalty=lam, n_restarts=1)
        # on the training items' standard scale, as the fit's coefficients are
        z = (valid.features - train.features.mean(axis=0)) / train.features.std(axis=0)
        eta = z @ fit["coef"].values[0, 0] + fit["intercept"].values[0, 0]
        call = (eta > 0).astype(int)
        by_hand.append(np.mean(valid.labels != call[valid.item_idx]))
    np.testing.assert_allclose(chosen.scores["disagreement"].to_numpy(), by_hand, rtol=1e-12)
    # the smallest score; on a tie the largest penalty (the sparser model)
    assert chosen.penalty == max(lam for lam, s in zip(grid, by_hand, strict=True)
                                 if s == min(by_hand))
    assert len(set(by_hand)) > 1  # the grid's scores differ: the choice means something


def test_select_penalty_breaks_ties_towards_the_sparser_model(sim):
    def constant(train, x, lam):  # the same predictions whatever the penalty
        return np.ones(len(x), dtype=int)

    chosen = selection.select_penalty(sim, [0.1, 3.0, 1.0], fit_predict=constant, n_folds=3,
                                      rng=0)
    # every label 0 disagrees with the constant call 1, in every fold
    np.testing.assert_allclose(chosen.scores["disagreement"], np.mean(sim.labels == 0))
    assert chosen.penalty == 3.0
