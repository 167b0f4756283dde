"""Fits on disk: :func:`save_fit` writes any fit (an EM Dataset, a MAP, Laplace or
NUTS DataTree) to a netCDF file, and :func:`open_fit` reads it back as the same
kind of object, ready for every report function.

netCDF attributes cannot hold an empty list, a dict, a boolean or None, and give
a list of ints back as an array, so such attributes are stored as JSON text and
named (itself as JSON) in the attribute ``json_attrs``; :func:`open_fit` decodes
them. ``stages`` (a MAP fit's optimiser stages) is JSON text in memory already
and stays so.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import xarray as xr

ENGINE = "h5netcdf"
"""The netCDF engine fits are written and read with."""


def _json_default(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


def netcdf_attrs(attrs: dict) -> dict:
    """Attributes as netCDF can store them.

    Parameters
    ----------
    attrs : dict
        A fit's attributes.

    Returns
    -------
    dict
        Lists, tuples, dicts, booleans and None as JSON text, named (with
        ``stages``, already JSON) in ``json_attrs``; other values as they are.

    Examples
    --------
    >>> from crowd_models.saved import netcdf_attrs
    >>> netcdf_attrs({"chains": [], "method": "map"})["json_attrs"]
    """
    out, as_json = {}, []
    for key, value in attrs.items():
        if isinstance(value, list | tuple | dict | bool | np.bool_) or value is None:
            out[key] = json.dumps(value, default=_json_default)
            as_json.append(key)
        else:
            out[key] = value
    if isinstance(out.get("stages"), str) and "stages" not in as_json:
        as_json.append("stages")
    out["json_attrs"] = json.dumps(sorted(as_json))
    return out


def save_fit(fit, path, attrs: dict | None = None) -> None:
    """Write a fit to a netCDF file, with ``attrs`` added to its own attributes.

    Parameters
    ----------
    fit : xarray.Dataset or xarray.DataTree
        An EM fit, or a MAP, Laplace or NUTS fit.
    path : str or Path
        The file to write (replaced if it exists).
    attrs : dict, optional
        More attributes to record (the command line records its command, the
        priors and the method).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from crowd_models.models import two_coin
    >>> fit = two_coin.em(cm.datasets.load_rte())
    >>> cm.save_fit(fit, pathlib.Path(tempfile.mkdtemp()) / "fit.nc")
    """
    saved = fit.copy()
    saved.attrs = netcdf_attrs({**fit.attrs, **(attrs or {})})
    for node in saved.subtree if isinstance(saved, xr.DataTree) else ():
        encoded = netcdf_attrs(node.attrs)
        if node is not saved and encoded["json_attrs"] != "[]":  # an average's components
            node.attrs = encoded
    saved.to_netcdf(Path(path), engine=ENGINE)


def _decoded(attrs) -> dict:
    """Attributes as :func:`netcdf_attrs` stored them, decoded."""
    attrs = dict(attrs)
    encoded = json.loads(attrs.pop("json_attrs", "[]"))
    for key in encoded:
        if key != "stages" and isinstance(attrs.get(key), str):
            attrs[key] = json.loads(attrs[key])
    return attrs


def open_fit(path):
    """Read a fit written by :func:`save_fit` or ``crowd-models fit`` (its ``fit.nc``).

    Parameters
    ----------
    path : str or Path
        The netCDF file.

    Returns
    -------
    xarray.Dataset or xarray.DataTree
        What was saved: an EM fit's Dataset, or a DataTree with a ``posterior``
        group, loaded into memory (the file is closed), its JSON attributes
        decoded (lists, dicts, booleans, None), so that every report function
        reads it as it read the fit before it was saved.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from crowd_models.models import two_coin
    >>> ann = cm.datasets.load_rte()
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "fit.nc"
    >>> cm.save_fit(two_coin.em(ann), path)
    >>> table = cm.report.annotator_summary(cm.open_fit(path))
    """
    tree = xr.open_datatree(Path(path), engine=ENGINE)
    try:
        tree.load()
    finally:
        tree.close()
    attrs = _decoded(tree.attrs)
    for node in tree.subtree:
        if node is not tree and "json_attrs" in node.attrs:
            node.attrs = _decoded(node.attrs)
    if "posterior" in tree.children:
        tree.attrs = attrs
        return tree
    dataset = tree.to_dataset()
    dataset.attrs = attrs
    return dataset
