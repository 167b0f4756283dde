"""The EM kernels that sum over the annotation rows (``_common.item_joint_np``,
``_common.expected_counts``, both one product with the cached sparse
(item, (annotator, label)) count matrix ``_common._label_counts``) against a
plain NumPy gather / scatter-add (``np.add.at``). EM only, seconds."""

import gc
import weakref

import numpy as np
import pandas as pd
import pytest

from crowd_models.data import Annotations
from crowd_models.models import _common as C
from crowd_models.models import dawid_skene as ds
from crowd_models.models import two_coin


def _reference_joint(log_confusion, ann):
    out = np.zeros((ann.n_items, ann.n_classes))
    np.add.at(out, ann.item_idx, log_confusion[ann.annotator_idx, :, ann.labels])
    return out


def _reference_counts(ann, prob):
    J, K = ann.n_annotators, ann.n_classes
    out = np.zeros((J, K, K))  # (annotator, true_class, label_class)
    np.add.at(out, (ann.annotator_idx, slice(None), ann.labels), prob[ann.item_idx])
    return out


def _ragged(K, rng, n_items=60, n_annotators=9, in_item_order=False):
    """Hand-made codes: a random subset of the (item, annotator) cells labelled,
    repeats (the same annotator labelling an item twice), item 0 with one label,
    item 1 with none, annotators 0 and the last with no labels, annotator
    1 labelling a single item; rows in no particular order, or in item order
    (where ``_label_counts`` builds its CSR arrays directly)."""
    cells = rng.random((n_items, n_annotators)) < 0.35
    cells[:, [0, n_annotators - 1]] = False
    cells[:, 1] = False
    cells[5, 1] = True
    cells[0] = False
    cells[0, 2] = True
    cells[1] = False
    item_idx, annotator_idx = np.nonzero(cells)
    repeat = rng.random(len(item_idx)) < 0.1
    repeat[item_idx == 0] = False  # item 0 keeps exactly one label
    item_idx = np.r_[item_idx, item_idx[repeat]]
    annotator_idx = np.r_[annotator_idx, annotator_idx[repeat]]
    order = (np.argsort(item_idx, kind="stable") if in_item_order
             else rng.permutation(len(item_idx)))
    return Annotations(
        item_idx=item_idx[order].astype(np.int64),
        annotator_idx=annotator_idx[order].astype(np.int64),
        labels=rng.integers(0, K, len(item_idx)).astype(np.int64),
        items=pd.Index([f"item_{i}" for i in range(n_items)]),
        annotators=pd.Index([f"annotator_{j}" for j in range(n_annotators)]),
        classes=pd.Index([f"class_{k}" for k in range(K)]),
    )


def _simulated(K, rng, n_items=300, n_annotators=12, labels_per_item=4):
    conf = 0.4 * rng.dirichlet(np.ones(K), (n_annotators, K)) + 0.6 * np.eye(K)
    return ds.simulate(conf, n_items=n_items, labels_per_item=labels_per_item, rng=rng)


@pytest.mark.parametrize("K", [2, 3, 5, 7])
@pytest.mark.parametrize("kind", ["ragged", "ragged in item order", "simulated"])
def test_item_joint_np_matches_reference(K, kind):
    rng = np.random.default_rng(10 * K + len(kind))
    ann = (_simulated(K, rng) if kind == "simulated"
           else _ragged(K, rng, in_item_order=kind != "ragged"))
    log_conf = np.log(rng.dirichlet(np.ones(K), (ann.n_annotators, K)))
    got = C.item_joint_np(log_conf, ann)
    assert got.shape == (ann.n_items, K) and got.dtype == np.float64
    np.testing.assert_allclose(got, _reference_joint(log_conf, ann), rtol=1e-12, atol=1e-12)
    if kind != "simulated":
        assert np.all(got[1] == 0.0)  # no labels
        np.testing.assert_array_equal(got[0], log_conf[2, :, ann.labels[ann.item_idx == 0][0]])


@pytest.mark.parametrize("K", [2, 3, 5, 7])
@pytest.mark.parametrize("kind", ["ragged", "ragged in item order", "simulated"])
def test_expected_counts_matches_reference(K, kind):
    rng = np.random.default_rng(10 * K + len(kind) + 1)
    ann = (_simulated(K, rng) if kind == "simulated"
           else _ragged(K, rng, in_item_order=kind != "ragged"))
    prob = rng.dirichlet(np.ones(K), ann.n_items)
    got = C.expected_counts(ann, prob)
    assert got.shape == (ann.n_annotators, K, K) and got.dtype == np.float64
    np.testing.assert_allclose(got, _reference_counts(ann, prob), rtol=1e-12, atol=1e-12)
    # every label is counted once, spread over the true classes
    np.testing.assert_allclose(got.sum(axis=(1, 2)), ann.n_labels(), rtol=1e-12)
    if kind != "simulated":
        assert np.all(got[0] == 0.0) and np.all(got[-1] == 0.0)  # annotators with no labels


def test_item_joint_np_reads_only_the_pairs_that_occur():
    # like a gather: entries of (annotator, label) pairs nobody used may be anything
    rng = np.random.default_rng(3)
    ann = _ragged(3, rng)
    log_conf = np.log(rng.dirichlet(np.ones(3), (ann.n_annotators, 3)))
    used = np.zeros((ann.n_annotators, 3), dtype=bool)
    used[ann.annotator_idx, ann.labels] = True
    poisoned = log_conf.copy()
    poisoned.transpose(0, 2, 1)[~used] = np.nan
    np.testing.assert_array_equal(C.item_joint_np(poisoned, ann), C.item_joint_np(log_conf, ann))
    # a -inf entry that is used gives -inf on its items, as a sum would
    j, lab = ann.annotator_idx[0], ann.labels[0]
    log_conf[j, 1, lab] = -np.inf
    got = C.item_joint_np(log_conf, ann)
    np.testing.assert_array_equal(got[:, 1] == -np.inf,
                                  np.isin(np.arange(ann.n_items),
                                          ann.item_idx[(ann.annotator_idx == j)
                                                       & (ann.labels == lab)]))
    assert np.all(np.isfinite(got[:, [0, 2]]))


def test_item_joint_np_rejects_another_layout():
    ann = _ragged(3, np.random.default_rng(4))
    with pytest.raises(ValueError, match="annotator, true_class, label_class"):
        C.item_joint_np(np.zeros((ann.n_annotators, 3, 4)), ann)


def test_label_counts_cached_per_object():
    rng = np.random.default_rng(5)
    ann = _ragged(4, rng)
    X = C._label_counts(ann)
    assert C._label_counts(ann) is X
    dense = np.zeros((ann.n_items, ann.n_annotators * 4))
    np.add.at(dense, (ann.item_idx, ann.annotator_idx * 4 + ann.labels), 1.0)
    np.testing.assert_array_equal(X.toarray(), dense)
    assert X.has_canonical_format
    # the same labels in item order (the CSR arrays built directly): the same matrix
    ordered = _ragged(4, np.random.default_rng(5), in_item_order=True)
    assert np.all(np.diff(ordered.item_idx) >= 0) and len(ordered.item_idx) == len(ann.item_idx)
    X_ordered = C._label_counts(ordered)
    assert X_ordered.has_canonical_format and X_ordered.dtype == np.float64
    dense = np.zeros_like(dense)
    np.add.at(dense, (ordered.item_idx, ordered.annotator_idx * 4 + ordered.labels), 1.0)
    np.testing.assert_array_equal(X_ordered.toarray(), dense)
    assert dense.max() == 2  # a repeated label, summed into one entry
    # a selection is a new object with its own matrix
    sub = ann.select(ann.annotator_idx != 2)
    X_sub = C._label_counts(sub)
    assert X_sub is not X and X_sub.shape == (sub.n_items, sub.n_annotators * 4)
    # entries go with their Annotations object: the cache keeps neither alive
    refs = weakref.ref(sub), weakref.ref(X_sub)
    del sub, X_sub
    gc.collect()
    assert refs[0]() is None and refs[1]() is None
    assert C._label_counts(ann) is X


@pytest.fixture
def reference_kernels(monkeypatch):
    """Swap the reference kernels in for the sparse ones."""
    def use():
        monkeypatch.setattr(C, "item_joint_np", _reference_joint)
        monkeypatch.setattr(C, "expected_counts", _reference_counts)
    return use


def _fit_values(fit):
    return {k: fit[k].values for k in fit.data_vars}


@pytest.mark.parametrize("variant", ["full", "one_coin"])
@pytest.mark.parametrize("accelerate", [True, False])
def test_dawid_skene_em_same_fit_as_reference_kernels(variant, accelerate, reference_kernels):
    ann = _simulated(4, np.random.default_rng(6), n_items=400, n_annotators=15)
    fast = ds.em(ann, variant=variant, accelerate=accelerate)
    reference_kernels()
    ref = ds.em(ann, variant=variant, accelerate=accelerate)
    assert fast.attrs["n_iter"] == ref.attrs["n_iter"] and fast.attrs["converged"]
    a, b = _fit_values(fast), _fit_values(ref)
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-10, atol=1e-11, err_msg=k)
    np.testing.assert_allclose(fast.attrs["log_posterior"], ref.attrs["log_posterior"],
                               rtol=1e-12)


def test_dawid_skene_em_with_features_same_fit_as_reference_kernels(reference_kernels):
    rng = np.random.default_rng(7)
    K, J = 3, 8
    conf = 0.3 * rng.dirichlet(np.ones(K), (J, K)) + 0.7 * np.eye(K)
    ann = ds.simulate(conf, n_items=200, n_features=2, labels_per_item=3, rng=rng)
    fast = ds.em(ann)  # coef_precision="auto": EMs at each precision of the evidence loop
    reference_kernels()
    ref = ds.em(ann)
    assert fast.attrs["evidence_rounds"] == ref.attrs["evidence_rounds"]
    assert fast.attrs["coef_precision"] == pytest.approx(ref.attrs["coef_precision"], rel=1e-7)
    # the kernels round differently in the last bits, and a round's EM stops at the
    # first step below tol = 1e-10: on one machine both took 56 EM map evaluations
    # over two rounds, on another 56 and 54 (fits 1.1e-9 apart). The second round
    # starts warm at the first's update of alpha, and near tol the accelerated
    # steps' accept-or-retreat turns on differences in the last bits: with the
    # curvature summed in another order (2026-12-08) the fast kernels' alpha moved
    # by 6e-15 and their second round took 24 evaluations against 19 (59 and 52 in
    # all). One accelerated step is three evaluations: allow two per round.
    assert abs(fast.attrs["n_iter"] - ref.attrs["n_iter"]) <= 6 * fast.attrs["evidence_rounds"]
    # on standardised features the two kernels' fits end up to 1e-9 apart (EM tol
    # 1e-10 on the parameters' steps; one coefficient 1.1e-9, one confusion cell 2e-10)
    for k, v in _fit_values(fast).items():
        np.testing.assert_allclose(v, ref[k].values, rtol=1e-7, atol=1e-8, err_msg=k)


def test_two_coin_em_same_fit_as_reference_kernels(reference_kernels):
    rng = np.random.default_rng(8)
    ann = two_coin.simulate(rng.uniform(0.6, 0.9, 10), rng.uniform(0.6, 0.9, 10), n_items=300,
                            labels_per_item=4, rng=rng)
    fast = two_coin.em(ann)
    reference_kernels()
    ref = two_coin.em(ann)
    assert fast.attrs["n_iter"] == ref.attrs["n_iter"]
    for k, v in _fit_values(fast).items():
        np.testing.assert_allclose(v, ref[k].values, rtol=1e-10, atol=1e-11, err_msg=k)


def test_dawid_skene_em_on_dog_as_stored():
    """Full Dawid-Skene EM on the bundled dog set gives the numbers it gave before its
    codes were narrowed and its E-step reworked for memory (#41; then bit for bit)."""
    import crowd_models as cm

    fit = ds.em(cm.datasets.load_dog(), variant="full")
    assert fit.attrs["n_iter"] == 42
    np.testing.assert_allclose(fit.attrs["log_posterior"], -3881.492193696158, rtol=1e-13)
    np.testing.assert_allclose(
        fit["prevalence"].values.ravel(),
        [0.21863030915191642, 0.2240327577450806, 0.20778111661673046, 0.3495558164862726],
        rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        fit["confusion"].values[0, 0, 0],
        [[0.8737439880563893, 0.10961223228777014, 0.008321888555315094, 0.008321891100525438],
         [0.06497507364754418, 0.9164779112261476, 0.009273507549220525, 0.00927350757708764],
         [0.00720327865888719, 0.007127359011733246, 0.7851256327705186, 0.2005437295588609],
         [0.06259613823474175, 0.00626686501384533, 0.16133216201163228, 0.7698048347397807]],
        rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        fit["item_class_prob"].values[0, 0, :2],
        [[1.015785955364932e-12, 4.358945083784073e-14, 0.007327766736639125,
          0.9926722332623015],
         [3.713492478784615e-17, 2.1887584220550125e-18, 0.9997216391298153,
          0.00027836087018464126]], rtol=0, atol=1e-12)
