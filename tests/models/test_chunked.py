"""The memory-bounded (chunked) and Dask EMs reach the in-memory EM's fixed point."""

import itertools
import logging
import os

import numpy as np
import pandas as pd
import pytest

from crowd_models import _blocks
from crowd_models.large import ChunkedAnnotations, DaskAnnotations
from crowd_models.models import _chunked, dawid_skene, spammer, two_coin


@pytest.fixture(scope="module")
def crowd():
    rng = np.random.default_rng(0)
    confusion = rng.dirichlet(np.ones(3), size=(8, 3)) * 0.4 + 0.6 * np.eye(3)
    ann = dawid_skene.simulate(confusion, n_items=300, labels_per_item=4, rng=1)
    # shuffle the rows: the chunked store must group them by item itself
    order = np.random.default_rng(2).permutation(ann.n_annotations)
    return ann.select(order)


def _same_fit(a, b, names):
    assert b.attrs["n_iter"] == a.attrs["n_iter"]
    assert b.attrs["converged"] == 1
    assert b.attrs["log_posterior"] == pytest.approx(a.attrs["log_posterior"], abs=1e-9)
    for name in names:
        np.testing.assert_allclose(b[name].values, a[name].values, atol=1e-10, rtol=0)


@pytest.mark.parametrize("variant", ["full", "one_coin"])
def test_chunked_em_reaches_the_in_memory_fixed_point(crowd, variant):
    memory = dawid_skene.em(crowd, variant=variant)
    chunked = dawid_skene.em(crowd, variant=variant, chunk_items=7)  # 43 blocks
    names = ["confusion", "prevalence", "item_class_prob", "n_labels",
             "confusion_alpha" if variant == "full" else "accuracy_alpha"]
    _same_fit(memory, chunked, names)
    assert list(chunked["annotator"].values) == list(crowd.annotators)
    assert list(chunked["item"].values) == list(crowd.items)


def test_spammer_chunked_em_reaches_the_in_memory_fixed_point(crowd):
    # its M-step also reads the parameters of the pass (the spam switch's E-step)
    memory = spammer.em(crowd)
    chunked = spammer.em(crowd, chunk_items=11)  # 28 blocks
    _same_fit(memory, chunked, ["trustworthiness", "spam_share", "prevalence", "confusion",
                                "item_class_prob", "n_labels"])
    for name in ("trustworthiness_alpha", "trustworthiness_beta", "confusion_alpha"):
        # sums of label counts (up to 130): equal to the rounding of their size
        np.testing.assert_allclose(chunked[name].values, memory[name].values, rtol=1e-11)
    with pytest.raises(ValueError, match="at least 1"):
        spammer.em(crowd, chunk_items=0)


def test_two_coin_chunked_em_reaches_the_in_memory_fixed_point():
    binary = two_coin.simulate([0.9, 0.8, 0.65, 0.55], [0.85, 0.7, 0.75, 0.5], n_items=400,
                               prevalence=0.3, rng=3)
    memory = two_coin.em(binary)
    chunked = two_coin.em(binary, chunk_items=9)  # 45 blocks
    _same_fit(memory, chunked, ["sensitivity", "specificity", "prevalence",
                                "item_class_prob", "n_labels"])
    for name in ("sensitivity_alpha", "sensitivity_beta", "specificity_alpha",
                 "specificity_beta"):
        np.testing.assert_allclose(chunked[name].values, memory[name].values, rtol=1e-11)
    with pytest.raises(ValueError, match="positive one second"):
        two_coin.em(binary, chunk_items=9, positive=binary.classes[0])
    with pytest.raises(ValueError, match="no classifier"):
        two_coin.em(binary, chunk_items=9, classifier=object())
    # "auto", the default classifier precision, has no features to act on here
    _same_fit(memory, two_coin.em(binary, chunk_items=9, coef_precision="auto"),
              ["sensitivity", "specificity", "prevalence"])


def test_chunked_em_warns_as_the_in_memory_em_when_quality_is_not_identified(crowd):
    first = crowd.select(np.unique(crowd.item_idx, return_index=True)[1])  # one label an item
    with pytest.warns(UserWarning, match="every item has one label"):
        dawid_skene.em(first)
    with pytest.warns(UserWarning, match="every item has one label"):
        spammer.em(first, chunk_items=40)


def test_plain_chunked_em_is_plain_em(crowd):
    memory = dawid_skene.em(crowd, accelerate=False, tol=1e-8)
    chunked = dawid_skene.em(crowd, accelerate=False, tol=1e-8, chunk_items=50)
    _same_fit(memory, chunked, ["confusion", "prevalence"])


def test_narrow_codes_and_blocks(crowd):
    chunked = ChunkedAnnotations.from_annotations(crowd, chunk_items=64)
    assert chunked.pairs.dtype == np.uint8  # 8 annotators x 3 classes = 24 codes
    assert chunked.offsets[-1] == crowd.n_annotations
    np.testing.assert_array_equal(chunked.n_labels(), crowd.n_labels())
    blocks = list(chunked.blocks())
    assert [b[0] for b in blocks] == [0, 64, 128, 192, 256]
    assert sum(len(b[2]) for b in blocks) == crowd.n_annotations
    # a block's matrix is the item x (annotator, label) count matrix
    first, offsets, pairs = blocks[1]
    matrix = _blocks.block_matrix(offsets, pairs, 24).toarray()
    rows = (crowd.item_idx >= 64) & (crowd.item_idx < 128)
    expected = np.zeros((64, 24))
    np.add.at(expected, (crowd.item_idx[rows] - 64,
                         crowd.annotator_idx[rows] * 3 + crowd.labels[rows]), 1)
    np.testing.assert_array_equal(matrix, expected)
    wide = ChunkedAnnotations.from_codes([1, 2], [0, 299, 5], [0, 1, 2], annotators=300,
                                         classes=["a", "b", "c"])
    assert wide.pairs.dtype == np.uint16 and wide.pairs.tolist() == [0, 898, 17]


def test_chunked_em_refuses_what_it_cannot_do(crowd):
    with pytest.raises(ValueError, match="full and one-coin"):
        dawid_skene.em(crowd, variant="pooled", chunk_items=10)
    with pytest.raises(ValueError, match="start= is not available"):
        dawid_skene.em(crowd, chunk_items=10, start=np.ones((crowd.n_items, 3)))
    with pytest.raises(TypeError, match="ChunkedAnnotations or DaskAnnotations"):
        dawid_skene.em(pd.DataFrame({"item": [0]}))
    with pytest.raises(ValueError, match="chunk_items must be at least 1"):
        dawid_skene.em(crowd, chunk_items=0)
    with pytest.raises(ValueError, match="carries its own"):
        dawid_skene.em(ChunkedAnnotations.from_annotations(crowd), chunk_items=5)
    with pytest.raises(ValueError, match=r"labels codes must lie in 0..1"):
        ChunkedAnnotations.from_codes([2], [0, 1], [0, 2], annotators=2, classes=2)
    with pytest.raises(ValueError, match="must sum to that number"):
        ChunkedAnnotations.from_codes([3], [0, 1], [0, 1], annotators=2, classes=2)
    with pytest.raises(TypeError, match="integer codes"):
        ChunkedAnnotations.from_codes([2], [0.0, 1.0], [0, 1], annotators=2, classes=2)


def _table(ann):
    return pd.DataFrame({"annotator": ann.annotator_idx, "label": ann.labels},
                        index=pd.Index(ann.item_idx, name="item"))


def test_dask_em_on_a_local_cluster(crowd, tmp_path, caplog):
    dd = pytest.importorskip("dask.dataframe")
    distributed = pytest.importorskip("distributed")
    memory = dawid_skene.em(crowd)
    # unsorted within the partitions: set_index on the item column shuffles them
    frame = dd.from_pandas(_table(crowd).reset_index(), npartitions=5)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        crowd_dask = DaskAnnotations.from_dask(frame, item="item", annotators=crowd.annotators,
                                               classes=crowd.classes,
                                               posterior_path=tmp_path / "posterior")
        assert crowd_dask.frame.npartitions > 1
        with caplog.at_level(logging.INFO, logger="crowd_models.large"):
            fit = dawid_skene.em(crowd_dask)
    _same_fit(memory, fit, ["confusion", "prevalence", "n_labels", "confusion_alpha"])
    assert "item_class_prob" not in fit and "item" not in fit.coords
    assert sum("EM pass" in r.message for r in caplog.records) >= fit.attrs["n_iter"]
    posterior = pd.read_parquet(tmp_path / "posterior").sort_index()
    assert list(posterior.columns) == [str(c) for c in crowd.classes]
    np.testing.assert_allclose(posterior.to_numpy(), memory["item_class_prob"].values[0, 0],
                               atol=1e-10)


def test_dask_em_from_parquet_without_a_cluster(crowd, tmp_path):
    pytest.importorskip("dask.dataframe")
    table = _table(crowd).sort_index().reset_index()
    for i, rows in enumerate(np.array_split(np.arange(len(table)), 3)):  # item-sorted files
        table.iloc[rows].to_parquet(tmp_path / f"part.{i}.parquet", index=False)
    crowd_dask = DaskAnnotations.from_parquet(tmp_path)  # sizes read from the codes
    assert crowd_dask.frame.npartitions == 3 and crowd_dask.n_classes == 3
    fit = dawid_skene.em(crowd_dask, variant="one_coin")
    _same_fit(dawid_skene.em(crowd, variant="one_coin"), fit, ["accuracy", "prevalence"])
    assert fit.attrs["posterior_path"] == ""
    fit = spammer.em(crowd_dask)
    _same_fit(spammer.em(crowd), fit, ["trustworthiness", "spam_share", "prevalence"])
    assert "item_class_prob" not in fit


def test_dask_annotations_refuse_bad_frames(crowd):
    dd = pytest.importorskip("dask.dataframe")
    table = _table(crowd).reset_index()
    with pytest.raises(ValueError, match="known divisions"):
        DaskAnnotations.from_dask(dd.from_pandas(_table(crowd), npartitions=2, sort=False))
    with pytest.raises(ValueError, match="no column 'label'"):
        DaskAnnotations.from_dask(dd.from_pandas(table.drop(columns="label"), npartitions=2),
                                  item="item")
    with pytest.raises(TypeError, match="dask.dataframe.DataFrame"):
        DaskAnnotations.from_dask(table)
    too_few = DaskAnnotations.from_dask(dd.from_pandas(table, npartitions=2), item="item",
                                        annotators=3, classes=3)
    with pytest.raises(ValueError, match="annotator codes must lie in 0..2"):
        dawid_skene.em(too_few)


@pytest.mark.slow
def test_dask_em_survives_a_worker_killed_mid_fit(crowd, tmp_path, caplog):
    """A worker process dies (``os._exit``) while it reads a partition, and the
    scheduler gives up on the tasks it was running (``allowed-failures`` 0): the pass
    is run again from the same parameters, every block read again from its
    partition, and the fit is the in-memory EM's. A bare retry fails here: the
    persisted blocks and the partitions under them stay failed on the scheduler."""
    dask = pytest.importorskip("dask")
    dd = pytest.importorskip("dask.dataframe")
    distributed = pytest.importorskip("distributed")
    memory = dawid_skene.em(crowd)
    table = _table(crowd).sort_index()
    cuts = np.linspace(0, crowd.n_items, 5).astype(int)
    (tmp_path / "armed").touch()

    def read(part, trap=str(tmp_path)):
        try:  # the first partition read after arming kills its worker, once
            os.rename(os.path.join(trap, "armed"), os.path.join(trap, "fired"))
        except FileNotFoundError:
            return part
        os._exit(1)

    frame = dd.from_delayed(
        [dask.delayed(read)(table.loc[a:b - 1]) for a, b in itertools.pairwise(cuts)],
        meta=table.iloc[:0], divisions=[*cuts[:-1], crowd.n_items - 1])
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                     dashboard_address=None) as cluster, \
            distributed.Client(cluster), \
            caplog.at_level(logging.WARNING, logger="crowd_models.large"):
        fit = dawid_skene.em(DaskAnnotations.from_dask(frame, annotators=crowd.annotators,
                                                       classes=crowd.classes))
    assert (tmp_path / "fired").exists()
    assert any("a Dask worker was lost" in r.message for r in caplog.records)
    _same_fit(memory, fit, ["confusion", "prevalence", "n_labels"])


def test_a_pass_that_lost_a_worker_runs_again_from_the_same_parameters():
    dask = pytest.importorskip("dask")

    class KilledWorker(Exception):  # distributed's error, matched by name
        pass

    calls = []

    def graph():
        calls.append(1)
        if len(calls) < 3:
            raise KilledWorker("worker died")
        return dask.delayed(sum)([1, 2])

    assert _chunked._computed(graph) == 3 and len(calls) == 3
    calls.clear()

    def broken():
        calls.append(1)
        raise KeyError("a bug, not a lost worker")

    with pytest.raises(KeyError):
        _chunked._computed(broken)
    assert len(calls) == 1


def test_a_partition_block_groups_an_unsorted_partition_by_item(crowd):
    table = _table(crowd)  # rows shuffled: an item's labels are not together
    sorted_block = _blocks.partition_block(table.sort_index(kind="stable"), 8, 3)
    block = _blocks.partition_block(table, 8, 3)
    width = 24
    for b in (block, sorted_block):
        assert b.offsets[-1] == crowd.n_annotations and len(b.items) == crowd.n_items
    order = np.argsort(block.items)  # same items, each with the same labels
    dense = _blocks.block_matrix(block.offsets, block.pairs, width).toarray()[order]
    np.testing.assert_array_equal(dense, _blocks.block_matrix(
        sorted_block.offsets, sorted_block.pairs, width).toarray())
    np.testing.assert_array_equal(np.asarray(block.items)[order], sorted_block.items)
