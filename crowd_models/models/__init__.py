"""Model families. Each module offers build_model, em and simulate."""

from crowd_models.models import (
    continuous,
    dawid_skene,
    feature_accuracy,
    ordinal,
    stacked_gaussian,
    two_coin,
)

MODELS = {"two-coin": two_coin, "dawid-skene": dawid_skene, "continuous": continuous}
"""Registry: command-line name -> family module. ``ordinal``,
``feature_accuracy`` and ``stacked_gaussian`` are not on the command line yet:
their reports (per-threshold rates, required features, base learners) need
their own tables there."""

__all__ = ["MODELS", "continuous", "dawid_skene", "feature_accuracy", "ordinal",
           "stacked_gaussian", "two_coin"]
