"""crowd_models: Bayesian models for learning from many noisy annotators.

>>> import crowd_models as cm
>>> ann = cm.datasets.load_rte()
>>> from crowd_models.models import two_coin
>>> fit = cm.fit_map(two_coin.build_model(ann))

The submodules and names below load on first use, so that the data classes,
the loaders and the command line's ``--help`` do not wait for PyMC.
"""

from importlib import import_module

__all__ = ["Annotations", "majority_vote", "fit_map", "sample", "auto_fit", "compare_models",
           "ppc", "sbc", "datasets", "models", "report", "selection", "auto", "checks",
           "validation", "calibration", "save_fit", "open_fit", "predict"]
__version__ = "0.1.0"

_WHERE = {"Annotations": "crowd_models.data", "majority_vote": "crowd_models.baselines",
          "fit_map": "crowd_models.inference", "sample": "crowd_models.inference",
          "auto_fit": "crowd_models.auto", "compare_models": "crowd_models.auto",
          "ppc": "crowd_models.checks", "sbc": "crowd_models.validation",
          "save_fit": "crowd_models.saved", "open_fit": "crowd_models.saved",
          "predict": "crowd_models.prediction"}
_SUBMODULES = {"datasets", "models", "report", "selection", "auto", "checks", "validation",
               "calibration"}


def __getattr__(name: str):
    if name in _SUBMODULES:
        value = import_module(f"crowd_models.{name}")
    elif name in _WHERE:
        value = getattr(import_module(_WHERE[name]), name)
    else:
        raise AttributeError(f"module 'crowd_models' has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
