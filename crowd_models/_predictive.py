"""What a categorical fit predicts for one label: the probability of each label
class given the item's true class, for the rows of a long table, read off one
draw of any categorical family's posterior (two-coin, Dawid-Skene in every
variant, spammer, item difficulty with its IRT variants); and the true class's prior shares."""

from __future__ import annotations

import numpy as np
from scipy.special import expit


def draw_values(post, index: int) -> dict[str, np.ndarray]:
    """The variables of draw ``index`` (over chain x draw, chain-major) of a
    posterior Dataset, as arrays without the chain and draw dims."""
    n_draws = post.sizes["draw"]
    chain, draw = divmod(int(index), n_draws)
    return {name: np.asarray(var.values[chain, draw]) for name, var in post.data_vars.items()
            if var.dims[:2] == ("chain", "draw")}


def label_probabilities(values: dict, n_classes: int, items, annotators) -> np.ndarray:
    """(row, true_class, label_class) probabilities of each label class given the
    true class, for the label rows (``items``, ``annotators``: their codes)."""
    if "difficulty" in values:  # item difficulty's IRT variants (binary)
        # right with log-odds softplus(easiness (ability +- bias - difficulty)): the
        # sensitivity under a positive truth, the specificity under a negative one
        base = values["easiness"][items] * (values["ability"][annotators]
                                            - values["difficulty"][items])
        shift = values["easiness"][items] * values["bias"][annotators]
        sens = expit(np.logaddexp(0.0, base + shift))
        spec = expit(np.logaddexp(0.0, base - shift))
        return _binary(sens, spec)
    if "sensitivity" in values:
        if np.ndim(values["sensitivity"]) != 1:
            raise ValueError("an ordinal fit's labels are not one confusion per annotator; "
                             "this needs a two-coin, Dawid-Skene, spammer or item-difficulty "
                             "fit.")
        return _binary(values["sensitivity"][annotators], values["specificity"][annotators])
    if "ability" in values and "easiness" in values:
        right = expit(values["ability"][annotators] * values["easiness"][items])
        eye = np.eye(n_classes)
        wrong = (1 - right) / (n_classes - 1)
        return eye * right[:, None, None] + (1 - eye) * wrong[:, None, None]
    if "confusion" in values:
        return values["confusion"][annotators]
    raise ValueError("this fit is not of a categorical family with per-annotator label "
                     "probabilities (two-coin, Dawid-Skene, spammer or item difficulty).")


def _binary(sens, spec) -> np.ndarray:
    """(row, true_class, label_class) of two classes from each row's sensitivity
    and specificity."""
    return np.stack([np.stack([spec, 1 - spec], -1), np.stack([1 - sens, sens], -1)], 1)


def class_shares(values: dict, n_classes: int) -> np.ndarray:
    """(true_class,) prior shares of the true class: the ``prevalence`` (a two-coin
    fit's is the positive class's share)."""
    if "prevalence" not in values:
        raise ValueError("this fit has no prevalence (a fit with a classifier of the "
                         "features): refit without features.")
    prev = np.atleast_1d(np.asarray(values["prevalence"], dtype=float))
    if prev.shape == (1,) and n_classes == 2:
        return np.array([1 - prev[0], prev[0]])
    return prev
