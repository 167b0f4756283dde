"""Choosing a family without gold: compare_models and auto_fit on data whose
generating family is known, and their errors."""

import dataclasses
import warnings

import numpy as np
import pandas as pd
import pytest

import crowd_models as cm
from crowd_models import auto
from crowd_models.models import item_difficulty, spammer


@pytest.fixture(scope="module")
def spam_crowd():
    """Three classes, 3 of 10 annotators spammers (two of them always say "c")."""
    rng = np.random.default_rng(21)
    trust = np.r_[rng.uniform(0.5, 0.9, 7), 0.0, 0.0, 0.05]
    share = np.r_[rng.dirichlet(np.ones(3) * 3, size=7), [[0.05, 0.05, 0.9]] * 2, [[1 / 3] * 3]]
    return spammer.simulate(trust, spam_share=share, n_items=400, labels_per_item=5,
                            classes=["a", "b", "c"], rng=rng)


@pytest.fixture(scope="module")
def hard_items():
    """Binary labels whose items range from trivial to pure guesswork."""
    rng = np.random.default_rng(22)
    easiness = np.exp(rng.normal(0, 1.5, 300))
    return item_difficulty.simulate([3.0, 2.5, 2.0, 1.5, 1.0, 1.0, 0.5], easiness, rng=rng)


def _accuracy(fit, ann):
    prob = fit["item_class_prob"].values[0, 0]
    return float(np.mean(prob.argmax(axis=1) == ann.gold))


@pytest.mark.parametrize("data, family", [("spam_crowd", "spammer"),
                                          ("hard_items", "item_difficulty")])
def test_auto_fit_finds_the_generating_family(data, family, request):
    ann = request.getfixturevalue(data)
    blind = dataclasses.replace(ann, gold=None, truth=None)  # gold is never read
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fit = cm.auto_fit(blind, method="em", n_splits=3)
        table = cm.compare_models(ann, n_splits=3)
        accuracies = {name: _accuracy(auto.family_of(name)[0].em(ann, **auto.family_of(name)[1]),
                                      ann) for name in table.index}
    assert fit.attrs["model"] == family, table
    # the same ranking with and without gold: reproducible from its seed, gold unread
    assert [row["candidate"] for row in fit.attrs["ranking"]] == list(table.index)
    np.testing.assert_allclose([row["score"] for row in fit.attrs["ranking"]], table["score"])
    assert _accuracy(fit, ann) >= max(accuracies.values()) - 0.005, accuracies


def test_choose_prefers_the_simpler_of_close_scores():
    table = pd.DataFrame({"score": [-1.00, -1.01, -1.30], "dse": [0.0, 0.01, 0.02],
                          "params_per_annotator": [12, 4, 1]},
                         index=["dawid_skene", "spammer", "one_coin"])
    assert auto.choose(table) == "spammer"
    assert auto.choose(table, tolerance=0.5) == "dawid_skene"


def test_holdout_keeps_a_label_of_every_item_and_annotator():
    ann = cm.datasets.load_web_search()
    hidden = auto._holdout_rows(ann, 0.2, np.random.default_rng(0))
    keep = np.ones(ann.n_annotations, dtype=bool)
    keep[hidden] = False
    assert np.all(np.bincount(ann.item_idx[keep], minlength=ann.n_items) >= 1)
    assert np.all(np.bincount(ann.annotator_idx[keep], minlength=ann.n_annotators) >= 1)
    assert abs(len(hidden) - 0.2 * ann.n_annotations) <= 1


def test_bad_input(spam_crowd):
    with pytest.raises(ValueError, match="unknown candidate.*'glad'"):
        cm.compare_models(spam_crowd, candidates=["glad"])
    with pytest.raises(ValueError, match="two_coin candidate needs two classes"):
        cm.compare_models(spam_crowd, candidates=["two_coin"])
    with pytest.raises(ValueError, match="criterion='loo' is not one of"):
        cm.compare_models(spam_crowd, criterion="loo")
    with pytest.raises(ValueError, match="continuous"):
        cm.auto_fit(cm.datasets.load_affect("anger"))
    with pytest.raises(ValueError, match="without a classifier"):
        cm.auto_fit(spam_crowd.with_features(np.ones((spam_crowd.n_items, 1))))
    with pytest.raises(ValueError, match="fraction must be in"):
        cm.compare_models(spam_crowd, fraction=0.9)
    with pytest.raises(ValueError, match="method must be"):
        cm.auto_fit(spam_crowd, method="nuts")
    one_each = cm.Annotations.from_frame(pd.DataFrame(
        {"item": [1, 1, 2, 2], "annotator": ["u", "v", "w", "x"], "label": [0, 1, 0, 1]}))
    with pytest.raises(ValueError, match="single label|one label"):
        cm.compare_models(one_each)
