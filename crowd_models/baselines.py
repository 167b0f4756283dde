"""Baselines that need no model: majority vote."""

from __future__ import annotations

import numpy as np
import xarray as xr

from crowd_models import _dims as D
from crowd_models.data import Annotations

__all__ = ["majority_vote"]

_TIES = ("first", "random", "split")


def majority_vote(
    annotations: Annotations, *, hard: bool = False, ties: str = "split", rng=None
) -> xr.DataArray:
    """Majority vote per item, as (item, true_class) probabilities.

    Parameters
    ----------
    annotations : Annotations
        Categorical labels.
    hard : bool, optional
        False (default): the soft vote, each class's share of the item's labels
        (Raykar et al. 2009, eq. 2; repeated labels count). True: a one-hot vote
        for the most frequent class, ties broken by ``ties``.
    ties : {"split", "first", "random"}, optional
        Tie rule for ``hard=True``: "split" shares the vote equally among the
        tied classes (rows still sum to one), "first" takes the tied class that
        comes first in ``annotations.classes``, "random" draws one of the tied
        classes with ``rng``.
    rng : int, numpy.random.Generator or None, optional
        Seed or Generator, used by ``ties="random"``.

    Examples
    --------
    >>> vote = cm.majority_vote(cm.datasets.load_dog())
    >>> vote.argmax("true_class")
    """
    if not isinstance(annotations, Annotations):
        raise TypeError(f"majority_vote expects Annotations, got {type(annotations).__name__}.")
    if annotations.continuous:
        raise ValueError("majority vote needs categorical labels; these are continuous.")
    if ties not in _TIES:
        raise ValueError(f"ties={ties!r} is not one of {_TIES}.")
    counts = annotations.class_counts().astype(float)
    if not hard:
        counts /= counts.sum(axis=1, keepdims=True)  # in place: one (item, class) array
        probs = counts
    else:
        top = counts == counts.max(axis=1, keepdims=True)
        if ties == "split":
            probs = top / top.sum(axis=1, keepdims=True)
        else:
            if ties == "first":
                pick = np.argmax(top, axis=1)
            else:
                rng = np.random.default_rng(rng)
                pick = np.argmax(top * rng.random(top.shape), axis=1)
            probs = np.zeros_like(counts)
            probs[np.arange(len(pick)), pick] = 1.0
    coords = annotations.coords()
    return xr.DataArray(
        probs,
        dims=(D.ITEM, D.TRUE_CLASS),
        coords={D.ITEM: coords[D.ITEM], D.TRUE_CLASS: coords[D.TRUE_CLASS]},
        name="item_class_prob",
    )
