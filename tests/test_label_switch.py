"""label_switched_chains: which chains' hard labels match a relabelling of the
reference's labels better than the labels themselves. Known answers built by
hand: K = 3 and 4 classes, full and partial permutations, exact ties, noisy
draws, an empty class, and the mean over draws (not one draw) deciding."""

import itertools

import numpy as np
import pytest
import xarray as xr
from scipy.optimize import linear_sum_assignment

from crowd_models.inference import label_switched_chains

DIMS = ("chain", "draw", "item", "true_class")


def _one_hot(labels, k, sharp=0.8):
    """(item, class) probabilities whose argmax is ``labels``."""
    labels = np.asarray(labels)
    prob = np.full((labels.size, k), (1 - sharp) / (k - 1))
    prob[np.arange(labels.size), labels] = sharp
    return prob


def _posterior(chains):
    """A posterior Dataset from a list of (draw, item, class) arrays, one per chain."""
    return xr.Dataset({"item_class_prob": (DIMS, np.stack(chains))})


def _reference(prob, with_sample_dims=False):
    if with_sample_dims:
        return xr.Dataset({"item_class_prob": (DIMS, prob[None, None])})
    return xr.Dataset({"item_class_prob": (("item", "true_class"), prob)})


def _brute_force_switched(chain_labels, ref_labels, k):
    """Is some non-identity permutation p with sum_i [chain_i == p(ref_i)] strictly
    greater than the identity's agreement? (all k! permutations)"""
    identity = np.sum(chain_labels == ref_labels)
    best = max(np.sum(chain_labels == np.asarray(p)[ref_labels])
               for p in itertools.permutations(range(k)))
    return best > identity


REF3 = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 0, 1, 2])


def test_three_classes_full_cycle_is_flagged_and_the_identity_is_not():
    k = 3
    ref = _one_hot(REF3, k)
    cycled = (REF3 + 1) % k  # 0 -> 1 -> 2 -> 0
    post = _posterior([np.repeat(_one_hot(REF3, k)[None], 4, axis=0),
                       np.repeat(_one_hot(cycled, k)[None], 4, axis=0),
                       np.repeat(_one_hot(REF3, k)[None], 4, axis=0)])
    assert label_switched_chains(post, _reference(ref)) == [1]
    # the reference may carry chain/draw dims (an EM fit): its first draw is used
    assert label_switched_chains(post, _reference(ref, with_sample_dims=True)) == [1]


def test_partial_permutation_of_two_of_four_classes():
    k = 4
    ref_labels = np.repeat(np.arange(k), 5)
    swap = np.array([0, 2, 1, 3])  # classes 1 and 2 swapped, 0 and 3 kept
    chain = swap[ref_labels]
    # one item of class 0 is mislabelled, so agreement is not perfect either way
    chain[0] = 3
    post = _posterior([_one_hot(chain, k)[None], _one_hot(ref_labels, k)[None]])
    assert label_switched_chains(post, _reference(_one_hot(ref_labels, k))) == [0]
    assert _brute_force_switched(chain, ref_labels, k)


def test_an_exact_tie_is_not_flagged():
    # (chain label, reference label) pairs with agreement counts
    # [[1, 2, 0], [1, 2, 0], [0, 1, 2]]: the identity and the (0 1) swap agree on
    # exactly 5 of the 9 items, and the assignment solver returns the swap
    pairs = [(0, 0)] + [(0, 1)] * 2 + [(1, 0)] + [(1, 1)] * 2 + [(2, 1)] + [(2, 2)] * 2
    chain, ref_labels = (np.array(v) for v in zip(*pairs, strict=True))
    swap = np.array([1, 0, 2])
    assert np.sum(chain == ref_labels) == np.sum(chain == swap[ref_labels]) == 5
    agree = np.zeros((3, 3))
    np.add.at(agree, (chain, ref_labels), 1)
    _, cols = linear_sum_assignment(-agree)
    assert not np.array_equal(cols, np.arange(3))  # the solver's pick is not the identity
    assert not _brute_force_switched(chain, ref_labels, 3)
    post = _posterior([_one_hot(chain, 3)[None]])
    assert label_switched_chains(post, _reference(_one_hot(ref_labels, 3))) == []
    # one item more on the swapped side breaks the tie
    chain_more = chain.copy()
    chain_more[0] = 1  # (0, 0) -> (1, 0): the swap now agrees on 6, the identity on 4
    post = _posterior([_one_hot(chain_more, 3)[None]])
    assert label_switched_chains(post, _reference(_one_hot(ref_labels, 3))) == [0]


def test_the_mean_over_draws_decides_not_the_first_draw():
    k = 2
    ref_labels = np.array([0, 1, 0, 1, 1, 0])
    good, mirrored = _one_hot(ref_labels, k, 0.9), _one_hot(1 - ref_labels, k, 0.9)
    # chain 0: its first draw is mirrored, the other four agree with the reference;
    # chain 1: its first draw agrees, the other four are mirrored
    post = _posterior([np.stack([mirrored, good, good, good, good]),
                       np.stack([good, mirrored, mirrored, mirrored, mirrored])])
    assert label_switched_chains(post, _reference(good)) == [1]
    # the mean is over probabilities: one confident draw outweighs two weak ones
    weak = _one_hot(1 - ref_labels, k, 0.55)
    strong = _one_hot(ref_labels, k, 0.99)
    post = _posterior([np.stack([weak, weak, strong])])
    assert label_switched_chains(post, _reference(good)) == []


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_noisy_draws_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    k, n, draws = 3, 40, 25
    ref_labels = rng.integers(0, k, n)
    perms = [np.arange(k), np.array([1, 2, 0]), np.array([0, 2, 1])]
    chains, expected = [], []
    for perm in perms:
        truth = perm[ref_labels]
        # each draw: Dirichlet noise around a soft one-hot of the permuted labels,
        # and a few items relabelled at random
        logits = 2.0 * np.eye(k)[truth] + rng.normal(0, 1.0, (draws, n, k))
        prob = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
        chains.append(prob)
        labels = prob.mean(0).argmax(-1)
        expected.append(_brute_force_switched(labels, ref_labels, k))
    post = _posterior(chains)
    got = label_switched_chains(post, _reference(_one_hot(ref_labels, k)))
    assert got == [c for c, e in enumerate(expected) if e]
    assert 0 not in got and 1 in got and 2 in got


def test_a_class_no_item_is_assigned_to():
    # the reference uses classes 0 and 1 only (class 2 is empty); the chain moves
    # every class-1 item to the empty class: a relabelling 1 <-> 2, flagged
    ref_labels = np.array([0, 0, 0, 1, 1, 1])
    ref = _one_hot(ref_labels, 3)
    moved = np.array([0, 0, 0, 2, 2, 2])
    post = _posterior([_one_hot(moved, 3)[None], _one_hot(ref_labels, 3)[None]])
    assert label_switched_chains(post, _reference(ref)) == [0]
    # a chain that leaves class 2 empty as well and keeps the labels is fine, and so is
    # one that puts a single item in the empty class (no permutation does better)
    one_moved = np.array([0, 0, 0, 1, 1, 2])
    post = _posterior([_one_hot(one_moved, 3)[None]])
    assert label_switched_chains(post, _reference(ref)) == []


def test_chain_coordinates_are_returned_not_positions():
    ref_labels = np.array([0, 1, 1, 0])
    ref = _one_hot(ref_labels, 2)
    post = _posterior([_one_hot(ref_labels, 2)[None], _one_hot(1 - ref_labels, 2)[None]])
    post = post.assign_coords(chain=[3, 7])
    assert label_switched_chains(post, _reference(ref)) == [7]
    # a DataTree (a fit) works as well as its posterior Dataset
    tree = xr.DataTree(children={"posterior": xr.DataTree(post)})
    assert label_switched_chains(tree, xr.DataTree(children={
        "posterior": xr.DataTree(_reference(ref, with_sample_dims=True))})) == [7]
