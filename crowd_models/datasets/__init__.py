"""Loaders for the real annotation data bundled with the package.

Each loader returns :class:`~crowd_models.Annotations` with gold labels; the
files and their provenance (source, citation, licence) are in
``crowd_models/datasets/data/`` (see its README.md).
"""

from __future__ import annotations

from importlib import resources

import pandas as pd
import yaml

from crowd_models.data import Annotations

__all__ = ["load_rte", "load_bluebirds", "DATASETS"]


def _path(*parts):
    return resources.files("crowd_models.datasets").joinpath("data", *parts)


def load_rte() -> Annotations:
    """Recognizing Textual Entailment crowd labels (Snow et al., EMNLP 2008).

    800 items, 164 annotators, 10 labels per item, classes [0, 1] (1 = the text
    entails the hypothesis), gold for every item. Majority vote reaches 0.90
    accuracy against gold. Annotator ids are the Mechanical Turk worker ids.
    """
    with _path("rte", "rte.standardized.tsv").open("r") as fh:
        df = pd.read_csv(fh, sep="\t")
    gold = df.groupby("orig_id", sort=False)["gold"].first()
    return Annotations.from_frame(
        df, item="orig_id", annotator="!amt_worker_ids", label="response",
        classes=[0, 1], gold=gold,
    )


def load_bluebirds() -> Annotations:
    """Bluebird species labels (Welinder et al., NeurIPS 2010).

    108 images, 39 annotators, every annotator labels every image (4212
    labels), classes [False, True], gold for every image (60 false, 48 true).
    Majority vote reaches 0.76 accuracy.
    """
    with _path("bluebirds", "labels.yaml").open("r") as fh:
        labels = yaml.safe_load(fh)
    with _path("bluebirds", "gt.yaml").open("r") as fh:
        gold = yaml.safe_load(fh)
    rows = [(item, worker, bool(value))
            for worker, by_item in labels.items() for item, value in by_item.items()]
    df = pd.DataFrame(rows, columns=["item", "annotator", "label"])
    return Annotations.from_frame(
        df, classes=[False, True], gold=pd.Series(gold).astype(bool),
    )


DATASETS = {"rte": load_rte, "bluebirds": load_bluebirds}
"""Name -> loader."""
