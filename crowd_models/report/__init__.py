"""Annotator tables, annotator figures and scores against gold, over any fit.

Every function takes any of the three kinds of fit the families produce and
treats them alike: an EM ``xarray.Dataset`` (``chain=1, draw=1``) from a
family's ``em``; a MAP ``xarray.DataTree`` from :func:`crowd_models.fit_map`
(one draw); a NUTS ``xarray.DataTree`` from :func:`crowd_models.sample`.

With many draws, uncertainty comes from the draws. A single-draw fit carries
no uncertainty of its own, so its spreads and intervals are NaN, except for
an EM fit that stores conjugate approximations (the Beta approximations of
Raykar et al. 2009, sec. 7.1, a confusion's Dirichlet rows, a continuous
precision's Gamma), which are used instead. The positive class of a binary
fit is the second class of ``true_class``.

Modules
-------
summary : ``annotator_summary``, ``item_table``, ``coefficient_table`` and
    ``conditional_intervals`` (a continuous MAP fit's EM-conditional intervals),
    ``true_value_summary`` (each item's true value, continuous fits), and
    ``with_intervals`` (any of these tables for reading: "mean [lower, upper]").
forest : ``plot_forest`` (ArviZ's forest plot of annotator measures across EM, MAP
    and NUTS fits) and ``forest_draws`` (the draws it plots).
experts : ``experts_equivalent`` (how many crowd annotators equal one expert,
    continuous fits).
plots : ``plot_annotators`` (ROC space), ``plot_thresholds`` (ordinal),
    ``plot_bias_noise`` (continuous, latent ordinal), ``plot_accuracy``.
heatmaps : ``plot_confusion``, ``plot_confusions``, ``plot_confusion_groups``
    and ``pick_annotators`` (worst, best, most uncertain, busiest).
metrics : scores against gold labels: ``roc_curve``, ``plot_roc``,
    ``soft_confusion``, ``accuracy``, ``with_gold_columns`` (annotators' measured
    rates beside their estimates) and ``gold_confusion``.
"""

from crowd_models.report.experts import experts_equivalent
from crowd_models.report.forest import forest_draws, plot_forest
from crowd_models.report.heatmaps import (
    pick_annotators,
    plot_confusion,
    plot_confusion_groups,
    plot_confusions,
)
from crowd_models.report.metrics import (
    accuracy,
    gold_confusion,
    plot_roc,
    roc_curve,
    soft_confusion,
    with_gold_columns,
)
from crowd_models.report.plots import (
    plot_accuracy,
    plot_annotators,
    plot_bias_noise,
    plot_thresholds,
)
from crowd_models.report.summary import (
    annotator_summary,
    coefficient_table,
    conditional_intervals,
    item_table,
    true_value_summary,
    with_intervals,
)

__all__ = [
    "annotator_summary",
    "item_table",
    "coefficient_table",
    "conditional_intervals",
    "true_value_summary",
    "with_intervals",
    "experts_equivalent",
    "plot_forest",
    "forest_draws",
    "plot_annotators",
    "plot_thresholds",
    "plot_bias_noise",
    "plot_accuracy",
    "plot_confusion",
    "plot_confusions",
    "plot_confusion_groups",
    "pick_annotators",
    "roc_curve",
    "plot_roc",
    "soft_confusion",
    "accuracy",
    "with_gold_columns",
    "gold_confusion",
]
