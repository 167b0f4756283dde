"""Predicting the truth of new items from a fit's classifier: ``cm.predict``.

A family that learns a classifier of the truth from the items' features
(two-coin, Dawid-Skene and cumulative ordinal with features, feature-dependent
accuracy; continuous, a regression of the true value) gives its module a
``predict_draws(posterior, features)``: the class probabilities of each new
item under each draw of the fit, (sample, item, class), or for the continuous
family the true value's mean (sample, item) and sd (sample,). This module
checks the features against those the fit was trained on and summarises the
draws, the same way for every such family (the fit's feature standardisation
applied first) and every kind of fit (EM, MAP, its
Laplace draws, NUTS, a fit reloaded with ``cm.open_fit``).
"""

from __future__ import annotations

from importlib import import_module

import numpy as np
import pandas as pd
import xarray as xr

from crowd_models import _dims as D
from crowd_models._fits import check_ci_prob, equal_tailed, has_laplace, posterior_of
from crowd_models._text import listing
from crowd_models.inference import laplace_fit
from crowd_models.models import _registry
from crowd_models.models._common import scaled_features


def _feature_matrix(features, names: list) -> tuple[np.ndarray, np.ndarray]:
    """(features as an (item, feature) matrix in the fit's order, the item ids)."""
    if isinstance(features, pd.DataFrame):
        columns = [str(c) for c in features.columns]
        missing = [n for n in names if n not in columns]
        extra = [c for c in columns if c not in names]
        if missing or extra:
            raise ValueError(
                f"the features' columns must be those the fit was trained on, "
                f"{listing(names)}; "
                + (f"missing: {listing(missing)}" if missing else "")
                + ("; " if missing and extra else "")
                + (f"not in the fit: {listing(extra)}" if extra else "")
                + ". Select and name the columns as in training.")
        frame = features.set_axis(columns, axis=1)[names]
        X, items = frame.to_numpy(dtype=float), frame.index.to_numpy()
    else:
        X = np.asarray(features, dtype=float)
        if X.ndim != 2 or X.shape[1] != len(names):
            raise ValueError(f"features must be an (item, feature) array with the fit's "
                             f"{len(names)} features ({listing(names)}), got shape "
                             f"{X.shape}; or pass a DataFrame with those columns.")
        items = np.arange(X.shape[0])
    if not np.all(np.isfinite(X)):
        rows = np.flatnonzero(~np.isfinite(X).all(axis=1))
        raise ValueError(f"the features of {len(rows)} item(s) are missing or not finite "
                         f"(rows {listing(rows.tolist())}); fill or drop them first.")
    return X, items


def predict(fit, features, *, ci_prob: float = 0.9) -> xr.Dataset:
    """The truth of new items from a fit's classifier, with its uncertainty.

    Parameters
    ----------
    fit : xarray.Dataset or xarray.DataTree
        An EM Dataset, a ``fit_map`` DataTree (its Laplace draws where it has
        them) or a ``sample`` DataTree, of a family with a classifier of the
        features (two-coin, Dawid-Skene, cumulative ordinal, feature-dependent
        accuracy; continuous, a regression), or any of them
        reloaded with ``cm.open_fit``.
    features : pandas.DataFrame or array-like
        The new items' features: a DataFrame with the fit's feature columns (in
        any order; its index names the items), or an (item, feature) array in
        the fit's feature order, on the scale the training features were
        given in: the fit's standardisation (``attrs["feature_center"]`` and
        ``attrs["feature_scale"]``, from the training items) is applied here.
    ci_prob : float, default 0.9
        Probability of the equal-tailed intervals.

    Returns
    -------
    xarray.Dataset
        Over (``item``, ``true_class``): ``prob``, each class's probability (the
        mean over the fit's draws); with several draws also ``prob_lower`` and
        ``prob_upper``, its equal-tailed interval, and ``prob_best``, the share
        of draws in which the class is the most probable. For a continuous fit,
        over ``item``: the predictive distribution of each new item's true
        value (Normal around the regression per draw, a mixture over the
        draws), ``value`` (its mean), ``value_sd`` and ``value_lower``,
        ``value_upper`` (its equal-tailed interval), in the labels' units.
        ``attrs``: the fit's ``family`` and ``variant``, ``draws`` and
        ``ci_prob``.

    Raises
    ------
    ValueError
        If the fit has no classifier (fitted without features), its family has
        none, or the features do not match the fit's.

    Examples
    --------
    >>> import numpy as np
    >>> from crowd_models.models import two_coin
    >>> ann = two_coin.simulate([0.9, 0.8, 0.7], [0.9, 0.8, 0.7], n_items=300, n_features=3, rng=0)
    >>> new = np.random.default_rng(1).standard_normal((5, 3))
    >>> cm.predict(two_coin.em(ann), new)["prob"]
    """
    ci_prob = check_ci_prob(ci_prob)
    source = laplace_fit(fit) if has_laplace(fit) else fit
    post = posterior_of(source)
    family, variant = fit.attrs.get("family"), fit.attrs.get("variant", "")
    record = _registry.find(family, variant or "")
    if record is None:
        raise ValueError(f"this fit does not name a family of the registry (attrs family="
                         f"{family!r}, variant={variant!r}); fit it with a family's em, "
                         f"fit_map or sample.")
    module = import_module(record.module_name)
    if not hasattr(module, "predict_draws"):
        raise ValueError(f"the {record.title} model has no classifier of the features to "
                         f"predict with.")
    if "classifier" in fit.attrs:
        how = (f"{record.module_name}.classifiers_predict(those estimators, features)"
               if hasattr(module, "classifiers_predict") else "that estimator's predict_proba")
        raise ValueError(f"this {record.title} fit's classifier is the scikit-learn estimator "
                         f"its em was given ({fit.attrs['classifier']}), fitted in place: "
                         f"predict new items with {how}.")
    if "coef" not in post:
        raise ValueError(f"this {record.title} fit has no classifier: it was fitted without "
                         f"features. Refit with the items' features to predict new ones.")
    names = [str(n) for n in post[D.FEATURE].values]
    X, items = _feature_matrix(features, names)
    X = scaled_features(fit, X)
    attrs = {"family": family, "variant": variant or "", "ci_prob": ci_prob}
    if record.labels == "continuous":
        return _true_values(*module.predict_draws(post, X), items, ci_prob, attrs)
    draws = module.predict_draws(post, X)
    classes = posterior_of(fit)["item_class_prob"][D.TRUE_CLASS].values  # Laplace draws lack it
    dims = (D.ITEM, D.TRUE_CLASS)
    out = {"prob": (dims, draws.mean(axis=0))}
    if len(draws) > 1:
        lower, upper = equal_tailed(draws, ci_prob)
        best = draws.argmax(axis=-1)[..., None] == np.arange(draws.shape[-1])
        out.update(prob_lower=(dims, lower), prob_upper=(dims, upper),
                   prob_best=(dims, best.mean(axis=0)))
    return xr.Dataset(out, coords={D.ITEM: items, D.TRUE_CLASS: classes},
                      attrs={**attrs, "draws": len(draws)})


def _true_values(mean: np.ndarray, sd: np.ndarray, items, ci_prob: float,
                 attrs: dict) -> xr.Dataset:
    """The predictive distribution of new items' true values, a mixture over the
    draws of Normal(mean[s], sd[s]^2): its mean, sd (total variance) and
    equal-tailed interval (the mixture's quantiles, by bisection of its CDF)."""
    from scipy.stats import norm

    center = mean.mean(axis=0)
    spread = np.sqrt(np.mean(sd ** 2) + mean.var(axis=0))
    bounds = []
    for q in ((1 - ci_prob) / 2, (1 + ci_prob) / 2):
        low = (mean - 10 * sd[:, None]).min(axis=0)
        high = (mean + 10 * sd[:, None]).max(axis=0)
        for _ in range(80):  # the CDF is increasing: halve the bracket
            mid = (low + high) / 2
            below = norm.cdf((mid - mean) / sd[:, None]).mean(axis=0) < q
            low, high = np.where(below, mid, low), np.where(below, high, mid)
        bounds.append((low + high) / 2)
    out = {"value": ((D.ITEM,), center), "value_sd": ((D.ITEM,), spread),
           "value_lower": ((D.ITEM,), bounds[0]), "value_upper": ((D.ITEM,), bounds[1])}
    return xr.Dataset(out, coords={D.ITEM: items}, attrs={**attrs, "draws": len(mean)})
