"""The items x annotators label matrix ``Y`` of :mod:`crowd_models.sklearn`:
read, checked, and its present labels listed (the estimators' ``fit`` and
``score`` and the scorers share them)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from crowd_models._text import listing


def label_matrix(Y, n_samples: int, estimator: str) -> pd.DataFrame:
    """``Y`` as an items x annotators DataFrame indexed 0..n-1 (its rows are X's by
    position), annotators without a label dropped; sklearn-style errors that name
    ``estimator``."""
    if Y is None:
        raise ValueError(f"{estimator} requires y to be passed, but the target y is None: "
                         f"give Y, the items x annotators label matrix.")
    if isinstance(Y, pd.Series):
        matrix = Y.to_frame(name=0 if Y.name is None else Y.name)
    elif isinstance(Y, pd.DataFrame):
        matrix = Y
    else:
        values = np.asarray(Y, dtype=object) if not isinstance(Y, np.ndarray) else Y
        if values.ndim == 1:
            values = values[:, None]
        if values.ndim != 2:
            raise ValueError(f"Y must be an (n_samples, n_annotators) label matrix or a 1-D y, "
                             f"got an array of shape {values.shape}.")
        matrix = pd.DataFrame(values)
    if len(matrix) != n_samples:
        raise ValueError(f"Found input variables with inconsistent numbers of samples: X has "
                         f"{n_samples} rows and Y {len(matrix)}; Y's rows are X's items.")
    matrix = matrix.set_axis(pd.RangeIndex(n_samples), axis=0)
    present = matrix.notna()
    unlabelled = np.flatnonzero(~present.any(axis=1).to_numpy())
    if len(unlabelled):
        raise ValueError(f"Y has no label for {len(unlabelled)} sample(s) (rows "
                         f"{listing(unlabelled.tolist())}); every item needs at least one "
                         f"annotator's label: drop those rows from X and Y.")
    return matrix.loc[:, present.any(axis=0).to_numpy()]


def class_labels(matrix: pd.DataFrame) -> pd.DataFrame:
    """``matrix`` unchanged, refused when its labels are non-integer numbers."""
    values = pd.Series(matrix.to_numpy(dtype=object)[matrix.notna().to_numpy()])
    numeric = pd.to_numeric(values, errors="coerce")
    if numeric.notna().all() and not np.all(numeric == np.round(numeric)):
        raise ValueError("Unknown label type: continuous. CrowdClassifier takes class labels "
                         "(integers or text); Y holds non-integer numbers.")
    return matrix


def numeric_labels(matrix: pd.DataFrame) -> pd.DataFrame:
    """``matrix`` as floats (NaN where missing), refused when a label is not a number."""
    present = matrix.notna().to_numpy()
    values = pd.Series(matrix.to_numpy(dtype=object)[present])
    numeric = pd.to_numeric(values, errors="coerce").astype(float)
    bad = values[~np.isfinite(numeric.to_numpy())]  # not a number, NaN or infinite
    if len(bad):
        raise ValueError(f"CrowdRegressor takes numeric labels; Y holds {len(bad)} that are "
                         f"not finite numbers ({listing(bad.unique()[:5].tolist())}): convert "
                         f"them, or use CrowdClassifier for class labels.")
    out = np.full(present.shape, np.nan)
    out[present] = numeric.to_numpy()
    return pd.DataFrame(out, index=matrix.index, columns=matrix.columns)


def label_cells(matrix: pd.DataFrame):
    """The present labels of a crowd matrix (row-major), and the row and column of each."""
    present = matrix.notna().to_numpy()
    rows, columns = np.nonzero(present)
    return matrix.to_numpy(dtype=object)[present], rows, columns


def present_labels(matrix: pd.DataFrame, sample_weight):
    """The present labels of a crowd matrix (row-major), the row of each and its
    weight (its item's ``sample_weight``): every present label counts once."""
    labels, rows, _ = label_cells(matrix)
    weight = np.ones(len(matrix)) if sample_weight is None else np.asarray(sample_weight,
                                                                           dtype=float)
    return labels, rows, weight[rows]
