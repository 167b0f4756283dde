"""Model families. Each module offers build_model, em and simulate."""

from crowd_models.models import (
    continuous,
    dawid_skene,
    feature_accuracy,
    stacked_gaussian,
    two_coin,
)

MODELS = {"two-coin": two_coin, "dawid-skene": dawid_skene, "continuous": continuous}
"""Registry: command-line name -> family module."""

__all__ = ["MODELS", "continuous", "dawid_skene", "feature_accuracy", "stacked_gaussian",
           "two_coin"]
