"""Model families. Each module offers build_model, em and simulate.

The family modules load on first use (``crowd_models.models.two_coin`` or
``from crowd_models.models import two_coin``), as does ``MODELS``, the
registry of the command line: ``--model`` name -> family module. ``ordinal``
there is the cumulative binary variant (one sensitivity and specificity per
annotator and threshold); ``feature-accuracy`` needs features and takes
``--penalty``; ``spammer`` (MACE) and ``item-difficulty`` (GLAD) take no
features. A family with its own
``annotator_summary(fit, *, annotations=None)`` reports through it.
``stacked_gaussian`` is not on the command line: its inputs (base learners, a
weighting strategy, a test set) need options of their own. ``edda`` (Gaussian
discriminant analysis with the 14 EDDA covariance structures) is not a
family: it fits the stacked family's base learners.
"""

from importlib import import_module

_MODULE_OF = {"two-coin": "two_coin", "dawid-skene": "dawid_skene", "ordinal": "ordinal",
              "continuous": "continuous", "feature-accuracy": "feature_accuracy",
              "spammer": "spammer", "item-difficulty": "item_difficulty"}

MODEL_NAMES = tuple(_MODULE_OF)
"""The command line's ``--model`` names, without importing the families."""

__all__ = ["MODELS", "MODEL_NAMES", "continuous", "dawid_skene", "feature_accuracy",
           "item_difficulty", "ordinal", "spammer", "stacked_gaussian", "two_coin"]


def __getattr__(name: str):
    if name == "MODELS":
        value = {key: import_module(f"crowd_models.models.{module}")
                 for key, module in _MODULE_OF.items()}
    elif name in __all__:
        value = import_module(f"crowd_models.models.{name}")
    else:
        raise AttributeError(f"module 'crowd_models.models' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))

