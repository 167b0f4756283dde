"""Tests for `crowd_models.baselines.majority_vote` against counts done by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crowd_models.baselines import majority_vote
from crowd_models.data import Annotations

# items (first appearance): x, y, z, w; classes a, b, c
#   x: a, b, b   (ann2 says "b" twice: a repeated label, both count) -> b wins
#   y: a, c      -> tie between a and c
#   z: c         -> c
#   w: a, b, c   -> three-way tie
ROWS = [
    ("x", "ann1", "a"),
    ("x", "ann2", "b"),
    ("y", "ann1", "a"),
    ("x", "ann2", "b"),
    ("y", "ann3", "c"),
    ("z", "ann2", "c"),
    ("w", "ann1", "a"),
    ("w", "ann2", "b"),
    ("w", "ann3", "c"),
]

SOFT = np.array(
    [
        [1 / 3, 2 / 3, 0.0],
        [1 / 2, 0.0, 1 / 2],
        [0.0, 0.0, 1.0],
        [1 / 3, 1 / 3, 1 / 3],
    ]
)


def make(**kw) -> Annotations:
    df = pd.DataFrame(ROWS, columns=["item", "annotator", "label"])
    return Annotations.from_frame(df, **kw)


@pytest.fixture
def ann() -> Annotations:
    return make()


def test_soft_vote_is_the_count_share(ann):
    mv = majority_vote(ann)
    np.testing.assert_allclose(mv.values, SOFT)
    np.testing.assert_allclose(mv.sum("true_class").values, 1.0)


def test_dims_and_coords(ann):
    for mv in (majority_vote(ann), majority_vote(ann, hard=True, ties="first")):
        assert mv.dims == ("item", "true_class")
        assert list(mv["item"].values) == ["x", "y", "z", "w"]
        assert list(mv["true_class"].values) == ["a", "b", "c"]
        assert mv.name == "item_class_prob"
        assert mv.shape == (ann.n_items, ann.n_classes)


def test_user_coords_with_declared_classes():
    a = make(classes=["c", "b", "a", "d"])
    mv = majority_vote(a)
    assert list(mv["true_class"].values) == ["c", "b", "a", "d"]
    np.testing.assert_allclose(mv.sel(true_class=["a", "b", "c"]).values, SOFT)
    np.testing.assert_allclose(mv.sel(true_class="d").values, 0.0)
    assert mv.sel(item="x", true_class="b").item() == pytest.approx(2 / 3)


def test_integer_ids_and_classes():
    df = pd.DataFrame({"item": [10, 10, 20, 20, 20], "annotator": [1, 2, 1, 2, 3],
                       "label": [1, 1, 0, 1, 0]})
    mv = majority_vote(Annotations.from_frame(df))
    assert list(mv["item"].values) == [10, 20]
    assert list(mv["true_class"].values) == [0, 1]
    np.testing.assert_allclose(mv.values, [[0.0, 1.0], [2 / 3, 1 / 3]])


def test_hard_split_shares_ties_equally(ann):
    mv = majority_vote(ann, hard=True)  # ties="split" is the default
    expected = [
        [0.0, 1.0, 0.0],
        [0.5, 0.0, 0.5],
        [0.0, 0.0, 1.0],
        [1 / 3, 1 / 3, 1 / 3],
    ]
    np.testing.assert_allclose(mv.values, expected)
    np.testing.assert_allclose(majority_vote(ann, hard=True, ties="split").values, expected)


def test_hard_first_takes_the_earliest_class(ann):
    mv = majority_vote(ann, hard=True, ties="first")
    np.testing.assert_array_equal(
        mv.values, [[0, 1, 0], [1, 0, 0], [0, 0, 1], [1, 0, 0]]
    )
    # "earliest" follows the declared class order, not the alphabet
    rev = majority_vote(make(classes=["c", "b", "a"]), hard=True, ties="first")
    assert list(rev["true_class"].values) == ["c", "b", "a"]
    picks = rev.idxmax("true_class").values.tolist()
    assert picks == ["b", "c", "c", "c"]


def test_hard_random_picks_among_tied_classes_only(ann):
    picks = {item: set() for item in ["x", "y", "z", "w"]}
    for seed in range(60):
        mv = majority_vote(ann, hard=True, ties="random", rng=seed)
        np.testing.assert_array_equal(mv.sum("true_class").values, 1.0)
        assert set(np.unique(mv.values)) <= {0.0, 1.0}
        for item, cls in zip(mv["item"].values, mv.idxmax("true_class").values, strict=True):
            picks[item].add(cls)
    assert picks["x"] == {"b"}
    assert picks["z"] == {"c"}
    assert picks["y"] == {"a", "c"}  # never "b", and both tied classes come up
    assert picks["w"] == {"a", "b", "c"}


def test_hard_random_is_reproducible(ann):
    first = majority_vote(ann, hard=True, ties="random", rng=123)
    again = majority_vote(ann, hard=True, ties="random", rng=123)
    np.testing.assert_array_equal(first.values, again.values)
    g1 = majority_vote(ann, hard=True, ties="random", rng=np.random.default_rng(7))
    g2 = majority_vote(ann, hard=True, ties="random", rng=np.random.default_rng(7))
    np.testing.assert_array_equal(g1.values, g2.values)


def test_soft_vote_ignores_ties(ann):
    # ties only matters for hard=True
    for ties in ("first", "random", "split"):
        np.testing.assert_allclose(majority_vote(ann, ties=ties).values, SOFT)


def test_after_select(ann):
    # drop ann2's repeated "b" on x: x becomes a tie a/b
    s = ann.select(np.array([True, True, True, False, True, True, True, True, True]))
    mv = majority_vote(s)
    np.testing.assert_allclose(mv.sel(item="x").values, [0.5, 0.5, 0.0])


# ---------------------------------------------------------------- errors
def test_not_annotations():
    df = pd.DataFrame(ROWS, columns=["item", "annotator", "label"])
    with pytest.raises(TypeError, match=r"majority_vote expects Annotations, got DataFrame"):
        majority_vote(df)


def test_continuous_labels():
    df = pd.DataFrame(ROWS, columns=["item", "annotator", "label"]).assign(
        label=np.arange(len(ROWS), dtype=float)
    )
    a = Annotations.from_frame(df, continuous=True)
    with pytest.raises(ValueError, match=r"majority vote needs categorical labels; these are "
                                         r"continuous"):
        majority_vote(a)


@pytest.mark.parametrize("ties", ["best", "Split", None])
def test_bad_ties(ann, ties):
    with pytest.raises(ValueError, match=r"ties=.* is not one of \('first', 'random', 'split'\)"):
        majority_vote(ann, hard=True, ties=ties)
    with pytest.raises(ValueError, match=r"is not one of"):
        majority_vote(ann, ties=ties)
