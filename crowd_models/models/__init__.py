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
          "continuous": continuous}
"""Registry: command-line name -> family module (``ordinal``: the cumulative
binary variant, one sensitivity and specificity per annotator and threshold).
``feature_accuracy`` and ``stacked_gaussian`` are not on the command line yet:
their inputs (a penalty to select, base learners and a weighting strategy)
need options of their own."""

__all__ = ["MODELS", "continuous", "dawid_skene", "feature_accuracy", "ordinal",
           "stacked_gaussian", "two_coin"]
