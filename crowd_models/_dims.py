"""Dimension names shared by every family, the EM outputs and the reports."""

ITEM = "item"
ANNOTATOR = "annotator"
ANNOTATION = "annotation"
TRUE_CLASS = "true_class"
LABEL_CLASS = "label_class"
FEATURE = "feature"
THRESHOLD = "threshold"
INNER_LEVEL = "inner_level"
FEATURE_AUX = "feature_aux"
COMMUNITY = "community"
COMPONENT = "component"
CHAIN = "chain"
DRAW = "draw"

OBSERVED = "item_labels"
"""The observed variable of every family: one entry per item (its number of labels),
whose log-density is the item's marginal log-likelihood of its labels."""
