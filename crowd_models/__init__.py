"""crowd_models: Bayesian models for learning from many noisy annotators.

>>> import crowd_models as cm
>>> ann = cm.datasets.load_rte()
>>> from crowd_models.models import two_coin
>>> fit = cm.fit_map(two_coin.build_model(ann))
"""

from crowd_models import datasets, models, report, selection
from crowd_models.baselines import majority_vote
from crowd_models.data import Annotations
from crowd_models.inference import fit_map, sample

__all__ = ["Annotations", "majority_vote", "fit_map", "sample", "datasets", "models", "report",
           "selection"]
__version__ = "0.1.0"
