"""Model families. Each module offers build_model, em and simulate."""

from crowd_models.models import two_coin

MODELS = {"two-coin": two_coin}
"""Registry: command-line name -> family module."""

__all__ = ["MODELS", "two_coin"]
