"""Model families. Each module offers build_model, em and simulate.

The family modules load on first use (``crowd_models.models.two_coin`` or
``from crowd_models.models import two_coin``), as does ``MODELS``, the
command line's ``--model`` name -> family module; ``MODEL_NAMES`` are those
names. Both derive from ``_registry.REGISTRY``, the record of every (family,
variant). ``ordinal``
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

from crowd_models.models import _registry

__all__ = ["MODELS", "MODEL_NAMES", "community", "continuous", "dawid_skene", "feature_accuracy",
           "item_difficulty", "ordinal", "spammer", "stacked_gaussian", "two_coin"]


def __getattr__(name: str):
    # MODEL_NAMES (the command line's ``--model`` names, without importing the
    # families) and MODELS (name -> family module) are read from the registry
    # at each access
    if name == "MODEL_NAMES":
        return tuple(_registry.cli_modules())
    if name == "MODELS":
        return {key: import_module(module) for key, module in _registry.cli_modules().items()}
    if name not in __all__:
        raise AttributeError(f"module 'crowd_models.models' has no attribute {name!r}")
    value = import_module(f"crowd_models.models.{name}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
