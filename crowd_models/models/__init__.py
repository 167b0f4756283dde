"""Model families. Each module offers build_model, em and simulate."""

from crowd_models.models import (
    continuous,
    dawid_skene,
    feature_accuracy,
    ordinal,
    stacked_gaussian,
    two_coin,
)

MODELS = {"two-coin": two_coin, "dawid-skene": dawid_skene, "ordinal": ordinal,
          "continuous": continuous, "feature-accuracy": feature_accuracy}
"""Registry: command-line name -> family module (``ordinal``: the cumulative
binary variant, one sensitivity and specificity per annotator and threshold;
``feature-accuracy`` needs features and takes ``--penalty``). A family with
its own ``annotator_summary(fit, *, annotations=None)`` reports through it.
``stacked_gaussian`` is not on the command line: its inputs (base learners,
a weighting strategy, a test set) need options of their own."""

__all__ = ["MODELS", "continuous", "dawid_skene", "feature_accuracy", "ordinal",
           "stacked_gaussian", "two_coin"]
