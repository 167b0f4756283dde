"""Posterior predictive checks: the statistics against a hand count, calibration
on data simulated from the fitted family, and a misfit found where the family
is wrong."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import crowd_models as cm
from crowd_models import checks
from crowd_models.models import dawid_skene, item_difficulty, two_coin


def test_statistics_match_a_hand_count():
    ann = cm.Annotations.from_frame(pd.DataFrame({
        "item": [1, 1, 1, 2, 2, 3],
        "annotator": ["u", "v", "w", "u", "v", "w"],
        "label": ["a", "a", "b", "b", "b", "a"],
    }))
    stats = checks._statistics(ann, ann.labels)
    # u: item 1 pairs (a,a) agree, (a,b) not; item 2 (b,b) agrees -> 2 of 3
    # v: the same -> 2 of 3; w: item 1 (b,a), (b,a) -> 0 of 2; item 3 has no other
    u, v, w = (list(ann.annotators).index(name) for name in "uvw")
    np.testing.assert_allclose(stats["agreement"][[u, v, w]], [2 / 3, 2 / 3, 0.0])
    # majority shares of the items with two labels or more: 2/3 and 1
    expected = np.histogram([2 / 3, 1.0], bins=checks.SHARE_BINS)[0]
    np.testing.assert_array_equal(stats["majority_share"], expected)
    a, b = list(ann.classes).index("a"), list(ann.classes).index("b")
    np.testing.assert_allclose(stats["class_share"][w, [a, b]], [0.5, 0.5])
    np.testing.assert_allclose(stats["class_share"][u, [a, b]], [0.5, 0.5])


@pytest.fixture(scope="module")
def hard_items():
    """Binary labels from GLAD, items from trivial to guesswork (7 labels each)."""
    rng = np.random.default_rng(22)
    easiness = np.exp(rng.normal(0, 1.5, 300))
    return item_difficulty.simulate([3.0, 2.5, 2.0, 1.5, 1.0, 1.0, 0.5], easiness, rng=rng)


def test_a_fit_of_the_generating_family_passes():
    sim = two_coin.simulate(sensitivity=[0.9, 0.8, 0.7, 0.75, 0.85],
                            specificity=[0.8, 0.85, 0.7, 0.9, 0.6], n_items=400,
                            prevalence=0.3, rng=np.random.default_rng(3))
    check = cm.ppc(two_coin.em(sim), sim, n_draws=200, rng=1)
    assert check.attrs["plug_in"] == 1 and check.attrs["n_draws"] == 1
    assert check.attrs["flagged"] <= 0.05
    assert check["agreement_replicated"].sizes["replicate"] == 200
    # the replicated tables keep the design: every annotator's label count
    assert np.allclose(check["class_share_replicated"].sum("label_class"), 1)


def test_a_family_without_item_difficulty_fails_where_items_differ(hard_items):
    """Items of very different easiness give more split and more unanimous items
    than any per-annotator confusion can: the two-coin replicas miss the
    middle majority shares, where GLAD's match (7 labels: shares 5/7, 6/7)."""
    middle = [list(checks.SHARE_BINS[:-1]).index(edge) for edge in (0.7, 0.8)]
    two = cm.ppc(two_coin.em(hard_items), hard_items, rng=2)
    glad = cm.ppc(item_difficulty.em(hard_items), hard_items, rng=2)
    assert np.all(two["majority_share_p"].values[middle] < 0.01)
    assert np.all(glad["majority_share_p"].values[middle] > 0.1)


def test_draws_of_a_posterior_are_used_in_turn(hard_items):
    fits = [dawid_skene.em(hard_items, variant="one_coin"), dawid_skene.em(hard_items)]
    common = ["confusion", "prevalence", "item_class_prob"]
    post = xr.concat([f[common] for f in fits], dim="draw").assign_coords(draw=[0, 1])
    check = cm.ppc(post, hard_items, n_draws=10)
    assert check.attrs["plug_in"] == 0 and check.attrs["n_draws"] == 2


def test_bad_input(hard_items):
    fit = two_coin.em(hard_items)
    with pytest.raises(ValueError, match="n_draws must be a positive integer"):
        cm.ppc(fit, hard_items, n_draws=0)
    with pytest.raises(TypeError, match="expected Annotations"):
        cm.ppc(fit, hard_items.to_frame())
    other = two_coin.simulate(sensitivity=[0.9, 0.8], specificity=[0.9, 0.8], n_items=20,
                              rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="pass the annotations it was fitted to"):
        cm.ppc(fit, other)
    with pytest.raises(ValueError, match="continuous"):
        cm.ppc(fit, cm.datasets.load_affect("anger"))
    # an ordinal fit's sensitivity has a threshold dim: one confusion per annotator
    # does not describe it
    shape = (1, 1, hard_items.n_annotators, 2)
    ordinal_like = xr.Dataset({
        "sensitivity": (("chain", "draw", "annotator", "threshold"), np.full(shape, 0.8)),
        "specificity": (("chain", "draw", "annotator", "threshold"), np.full(shape, 0.8)),
        "prevalence": (("chain", "draw"), [[0.5]])})
    with pytest.raises(ValueError, match="ordinal fit"):
        cm.ppc(ordinal_like, hard_items)


def test_plot_ppc_draws_three_panels(hard_items):
    import matplotlib

    matplotlib.use("Agg")
    fig = checks.plot_ppc(cm.ppc(two_coin.em(hard_items), hard_items, n_draws=50),
                          title="GLAD data, two-coin")
    assert len(fig.axes) == 3
    assert "two-coin" in fig._suptitle.get_text()
    with pytest.raises(ValueError, match="ci_prob"):
        checks.plot_ppc(cm.ppc(two_coin.em(hard_items), hard_items, n_draws=5), ci_prob=1.5)


@pytest.mark.parametrize("variant", ["fixed", "irt"])
def test_label_probabilities_are_the_ones_the_fit_weighs_items_by(variant):
    """The item posterior of an EM fit is its prevalence times the product of the
    label probabilities that the checks (and auto's held-out scores) replicate
    from: with the item's own difficulty and discrimination, not an average
    item's."""
    from crowd_models._predictive import class_shares, draw_values, label_probabilities

    rng = np.random.default_rng(9)
    n = 60
    if variant == "irt":
        sim = item_difficulty.simulate_irt([2.0, 1.0, 0.5, 1.5], [0.5, -0.5, 0.0, 1.0],
                                           rng.normal(0, 1.5, n), np.exp(rng.normal(0, 0.5, n)),
                                           rng=rng)
    else:
        sim = item_difficulty.simulate([2.0, 1.0, 0.5, 1.5], np.exp(rng.normal(0, 1, n)),
                                       rng=rng)
    fit = item_difficulty.em(sim, variant=variant)
    values = draw_values(fit, 0)
    conf = label_probabilities(values, 2, sim.item_idx, sim.annotator_idx)
    own = conf[np.arange(sim.n_annotations), :, sim.labels]  # (row, true_class)
    joint = np.log(class_shares(values, 2))[None, :] + np.stack(
        [np.bincount(sim.item_idx, np.log(own[:, k]), minlength=n) for k in range(2)], 1)
    expected = np.exp(joint - np.logaddexp.reduce(joint, axis=1, keepdims=True))
    np.testing.assert_allclose(expected, values["item_class_prob"], atol=1e-8)
