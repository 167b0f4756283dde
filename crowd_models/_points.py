"""A PyMC model's compiled functions and points: starts, supports, and the
DataTree groups that hold a point or draws (the ground under fit_map and sample)."""

from __future__ import annotations

import contextlib

import numpy as np
import pymc as pm
import pymc.backends.arviz
import pytensor
import pytensor.tensor as pt
import xarray as xr
from pytensor.compile.builders import OpFromGraph
from pytensor.compile.rewriting import inline_ofg_node
from pytensor.graph.replace import vectorize_graph
from pytensor.graph.rewriting.basic import dfs_rewriter, node_rewriter
from pytensor.graph.rewriting.utils import rewrite_graph

from crowd_models import _compiled
from crowd_models import _dims as D
from crowd_models._fits import posterior_of
from crowd_models._text import warn

BOUNDARY = 1e-10
"""Start values on a boundary of their support are moved this far inside."""


# ------------------------------------------------------ the model's functions
class _Functions:
    """The compiled functions of one model, each fetched from the structure cache
    on first use (see :mod:`crowd_models._compiled`) and kept on the model."""

    def __init__(self, model: pm.Model):
        self.model = model
        self.value_vars = list(model.continuous_value_vars)
        if len(self.value_vars) != len(model.value_vars):
            raise ValueError("fit_map and sample need a model whose free variables are all "
                             "continuous (the families sum the discrete truth out).")
        self.free_names = [model.values_to_rvs[v].name for v in self.value_vars]
        self._bound = {}
        self._loss = None
        self.progressbar = False  # set by fit_map/sample: show compiles
        self.quick = False  # True in fit_map (fit_scope), "few" in few_calls

    @contextlib.contextmanager
    def fit_scope(self):
        """One fit's requests: the functions it asks for may be linked quick (see
        ``_compiled.QUICK_FITS``); those a previous fit got quick are asked for
        again, so that a later fit gets the compiled ones once the quick fits are
        spent."""
        self._bound = {k: b for k, b in self._bound.items() if not b.compiled.quick}
        self.quick = True
        try:
            yield self
        finally:
            self.quick = False

    @contextlib.contextmanager
    def few_calls(self):
        """Requests for a handful of calls (nutpie's start checks): quick whenever the
        compiled function is neither in this process nor on disk."""
        previous, self.quick = self.quick, "few"
        try:
            yield self
        finally:
            self.quick = previous

    def _get(self, kind, build):
        bound = self._bound.get(kind)
        if bound is not None and bound.compiled.quick and not self.quick:
            bound = None  # a quick function outside a fit (sample's many calls): compile
        if bound is None:
            # graphs are rebuilt for every model (to look the compiled function up):
            # without PyTensor's stack capture per node, which costs as much as the
            # rest of the building (it only annotates errors in these graphs)
            with pytensor.config.change_flags(traceback__limit=0):
                inputs, outputs = build()
            bound = self._bound[kind] = _compiled.model_function(
                self.model, kind, inputs, outputs, progressbar=self.progressbar,
                quick=self.quick)
        else:
            bound.refresh()
        return bound

    def _map_loss(self):
        """(minus the log density without the Jacobian, its gradient, each observed
        variable's element-wise log density): one PyMC logp construction shared by
        the MAP's functions."""
        if self._loss is None:
            model = self.model
            terms = model.logp(jacobian=False, sum=False)  # free, observed, potentials
            loss = -pt.add(*[pt.sum(t) for t in terms])
            n_free = len(model.free_RVs)
            self._loss = (loss, pt.grad(loss, self.value_vars),
                          terms[n_free:n_free + len(model.observed_RVs)])
        return self._loss

    def logp_grad(self):
        def build():
            loss, grads, _ = self._map_loss()
            return self.value_vars, [loss, *grads]
        return self._get("logp_grad", build)

    def nuts_logp_grad(self):
        """The log density with the transforms' Jacobian (what NUTS samples) and its gradient."""
        def build():
            logp = self.model.logp()
            return self.value_vars, [logp, *pt.grad(logp, self.value_vars)]
        return self._get("nuts_logp_grad", build)

    def hessp(self):
        def build():
            _, grads, _ = self._map_loss()
            ps, hp = _compiled.hessp_graph(grads, self.value_vars)
            return [*self.value_vars, *ps], hp
        return self._get("hessp", build)

    def start(self):
        """Untransformed free-variable values -> the value variables (transformed)."""
        def build():
            model, ins, outs = self.model, [], []
            for name in self.free_names:
                rv = model[name]
                value = rv.type(name=name)
                transform = model.rvs_to_transforms.get(rv)
                ins.append(value)
                outs.append(value if transform is None else
                            transform.forward(value, *rv.owner.inputs))
            return ins, outs
        return self._get("start", build)

    def constrained(self):
        """Value variables -> free variables and the deterministics without an item
        dim (what the Laplace draws keep; the item-level ones would be draws x items)."""
        def build():
            model = self.model
            names = self.constrained_names()
            unobserved = {v.name: v for v in model.unobserved_value_vars if v.name in names}
            return self.value_vars, [unobserved[n] for n in names]
        return self._get("constrained", build)

    def constrained_names(self):
        """The names :meth:`constrained` returns, in order."""
        dims = self.model.named_vars_to_dims
        dets = [d.name for d in self.model.deterministics
                if D.ITEM not in (dims.get(d.name) or ())]
        return [*self.free_names, *dets]

    def point_names(self):
        model = self.model
        return (self.free_names, [d.name for d in model.deterministics],
                [o.name for o in model.observed_RVs])

    def _point_graph(self):
        model = self.model
        free, dets, _ = self.point_names()
        wanted = set(free) | set(dets)
        unobserved = {v.name: v for v in model.unobserved_value_vars if v.name in wanted}
        outs = [unobserved[n] for n in (*free, *dets)]
        outs += self._map_loss()[2]  # the observed variables' terms
        return self.value_vars, outs

    def point(self):
        """Value variables -> free variables, deterministics and each observed
        variable's element-wise log-likelihood."""
        return self._get("point", self._point_graph)

    def point_draws(self):
        """:meth:`point` over draws: each value variable with a leading draw axis,
        and so each output (``vectorize_graph``); raises NotImplementedError
        where an operation of the graph has no batched form."""
        def build():
            values, outs = self._point_graph()
            # inner graphs inlined (LogSumExp): PyTensor batches an operation with an
            # inner graph by looping over the draws in Python
            outs = rewrite_graph(outs, include=(), custom_rewrite=dfs_rewriter(_inline),
                                 clone=True)
            drawn = [pt.tensor(name=v.name, dtype=v.dtype, shape=(None, *v.type.shape))
                     for v in values]
            return drawn, vectorize_graph(outs, replace=dict(zip(values, drawn, strict=True)))
        return self._get("point_draws", build)


@node_rewriter([OpFromGraph])
def _inline(fgraph, node):
    return inline_ofg_node(node)


def functions_of(model: pm.Model) -> _Functions:
    """The model's compiled functions, made on first use and kept on the model."""
    fns = model.__dict__.get("_crowd_functions")
    if fns is None:
        fns = model.__dict__["_crowd_functions"] = _Functions(model)
    return fns


def _expected_shapes(model: pm.Model, names) -> dict:
    """Each free variable's shape from its dims (None where it has none)."""
    lengths = {}
    for d, v in model.dim_lengths.items():
        if hasattr(v, "get_value"):
            lengths[d] = int(v.get_value())
        elif model.coords.get(d) is not None:
            lengths[d] = len(model.coords[d])
    out = {}
    for name in names:
        dims = model.named_vars_to_dims.get(name)
        rv = model[name]
        if dims:
            out[name] = (tuple(lengths[d] for d in dims) if all(d in lengths for d in dims)
                         else None)
        elif rv.type.ndim == 0:
            out[name] = ()
        else:
            out[name] = None
    return out


def _start_point(model: pm.Model, start) -> dict | None:
    """Untransformed start values by variable name, from an EM fit or a dict,
    checked against the variables' shapes."""
    if start is None:
        return None
    if isinstance(start, xr.DataTree):
        start = posterior_of(start)
    names = [rv.name for rv in model.free_RVs]
    if isinstance(start, xr.Dataset):
        point = {}
        for name in names:
            if name in start:
                value = start[name]
                value = value.isel({d: 0 for d in (D.CHAIN, D.DRAW) if d in value.dims})
                point[name] = np.asarray(value.values, dtype=float)
    elif isinstance(start, dict):
        unknown = set(start) - set(names)
        if unknown:
            raise ValueError(
                f"start names unknown variables {sorted(unknown)}; the model's free variables "
                f"are {names}."
            )
        point = {}
        for name, value in start.items():
            try:
                point[name] = np.asarray(value, dtype=float)
            except (TypeError, ValueError):
                raise TypeError(f"start[{name!r}] must be numeric, got {value!r}.") from None
    else:
        raise TypeError(
            f"start must be None (the model's majority-vote start), an EM Dataset, a fit "
            f"DataTree or a dict, got {type(start).__name__}."
        )
    for name, shape in _expected_shapes(model, point).items():
        value = point[name]
        if shape is not None and value.shape != shape:
            if value.ndim == 0 and len(shape) >= 1:
                raise ValueError(
                    f"start[{name!r}] is a number, but {name} has shape {shape} "
                    f"(dims {model.named_vars_to_dims.get(name)}); give an array of that shape."
                )
            raise ValueError(
                f"start[{name!r}] has shape {value.shape}, but {name} has shape {shape} "
                f"(dims {model.named_vars_to_dims.get(name)})."
            )
        if not np.all(np.isfinite(value)):
            raise ValueError(f"start[{name!r}] holds non-finite values.")
    return _inside_support(model, point)


def _inside_support(model: pm.Model, point: dict) -> dict:
    """Move boundary values (an EM fit with flat priors can hold exact 0 or 1)
    just inside the support, where the unconstrained transforms are finite."""
    transforms = {rv.name: model.rvs_to_transforms.get(rv) for rv in model.free_RVs}
    out = {}
    for name, value in point.items():
        kind = type(transforms.get(name)).__name__
        value = np.asarray(value, dtype=float)
        support = {"SimplexTransform": ("a simplex (entries >= 0 summing to 1 over the last "
                                        "axis)", lambda v: np.all(v >= 0) and np.allclose(
                                            v.sum(axis=-1), 1, atol=1e-6)),
                   "LogOddsTransform": ("[0, 1]", lambda v: np.all((v >= 0) & (v <= 1))),
                   "LogTransform": ("[0, inf)", lambda v: np.all(v >= 0))}.get(kind)
        if not np.all(np.isfinite(value)) or (support and not support[1](value)):
            raise ValueError(
                f"start[{name!r}] lies outside the support of {name}"
                + (f", {support[0]}" if support else "") + f": got values from "
                f"{np.nanmin(value):.4g} to {np.nanmax(value):.4g}"
                + ("" if np.all(np.isfinite(value)) else " and non-finite ones")
                + ". Give values inside it (or start=None for the majority-vote start).")
        if kind == "SimplexTransform":
            value = np.clip(value, BOUNDARY, None)
            value = value / value.sum(axis=-1, keepdims=True)
        elif kind == "LogOddsTransform":
            value = np.clip(value, BOUNDARY, 1 - BOUNDARY)
        elif kind == "LogTransform":
            value = np.clip(value, BOUNDARY, None)
        out[name] = value
    return out


def unconstrained_start(model: pm.Model, start) -> list[np.ndarray]:
    """The value variables (transformed scale) at ``start``: a fit, a dict (missing
    variables from ``model.crowd_start``, else PyMC's initial point) or None."""
    fns = functions_of(model)
    point = _start_point(model, start) or {}
    missing = [n for n in fns.free_names if n not in point]
    if missing:
        crowd = _start_point(model, getattr(model, "crowd_start", None)) or {}
        point = {**{n: crowd[n] for n in missing if n in crowd}, **point}
        missing = [n for n in fns.free_names if n not in point]
    values = fns.start()(*[np.asarray(point.get(n, 0.0), dtype=float) for n in fns.free_names])
    if missing:  # PyMC's default initial point, on the transformed scale
        default = model.initial_point()
        values = [np.asarray(default[v.name]) if n in missing else x
                  for n, v, x in zip(fns.free_names, fns.value_vars, values, strict=True)]
    return [np.asarray(v, dtype=float) for v in values]


def annotator_label_counts(model) -> np.ndarray | None:
    """Labels per annotator from the model's long table (None without one)."""
    if "annotator_idx" not in model.named_vars or D.ANNOTATOR not in model.coords:
        return None
    codes = np.asarray(model["annotator_idx"].get_value(borrow=True))
    return np.bincount(codes, minlength=len(model.coords[D.ANNOTATOR]))


def n_observed(model: pm.Model) -> int:
    """The number of observed elements (items, for the families)."""
    obs = pm.backends.arviz.find_observations(model)
    return max(1, sum(int(np.size(v)) for v in obs.values()))


def _coords(model: pm.Model, dims, shape) -> dict:
    out = {}
    for d, size in zip(dims, shape, strict=True):
        values = model.coords.get(d)
        out[d] = np.asarray(values) if values is not None and len(values) == size else (
            np.arange(size))
    return out


def group_dataset(model: pm.Model, values: dict, sample_dims: tuple) -> xr.Dataset:
    """A Dataset of named arrays whose leading axes are ``sample_dims``, with the
    model's dims and coords."""
    data, coords = {}, {}
    for name, value in values.items():
        value = np.asarray(value)
        rest = value.shape[len(sample_dims):]
        dims = tuple(model.named_vars_to_dims.get(name) or ()) or tuple(
            f"{name}_dim_{i}" for i in range(len(rest)))
        data[name] = ((*sample_dims, *dims), value)
        coords.update(_coords(model, dims, rest))
    for d, size in zip(sample_dims, next(iter(values.values())).shape if values else (),
                       strict=False):
        coords[d] = np.arange(size)
    return xr.Dataset(data, coords=coords)


def data_groups(model: pm.Model) -> dict:
    """``observed_data`` and ``constant_data`` of the model."""
    out = {}
    for group, values in (("observed_data", pm.backends.arviz.find_observations(model)),
                          ("constant_data", pm.backends.arviz.find_constants(model))):
        if values:
            arrays = {k: np.asarray(v) for k, v in values.items()}
            out[group] = xr.DataTree(group_dataset(model, arrays, ()))
    return out


DRAW_CHUNK = 2**20
""":func:`_over_draws` evaluates as many draws at once as make this many output
values (RTE two-coin: about 390 of 4,000 draws)..."""
VECTORISED_VALUES = 2**26
"""... and leaves draws whose outputs hold more values than this to the compiled
function, where the vectorised graph's NumPy costs as much as numba's compile
and the compiled draws. 4,000 draws after nutpie's compile, on a fresh machine
(loaded): RTE two-coin (1.1e7 values) 2.2 s against 6.6-6.8 s; dog's full
Dawid-Skene (2.3e7) 4.3 s against 14.4 s (12.1 s of compile); web search's
(8.2e7) 19.8 s against 19.4 s."""


def _over_draws(fns: _Functions, flat) -> list | None:
    """The point function's outputs over all draws (``flat``: each value variable's
    draws on a leading axis), from its vectorised form on PyTensor's Python backend
    in chunks of draws; None where the compiled per-draw function is at hand (in
    this process or on disk, or quick fits are off), the graph has no batched
    form or the draws' outputs hold more than :data:`VECTORISED_VALUES` values.
    A sampler's first call on a fresh machine so skips compiling the point
    function (RTE two-coin: 7 s of numba for 4,000 draws)."""
    with fns.few_calls():
        if not flat or not fns.point().compiled.quick:
            return None
        try:
            batched = fns.point_draws()
        except NotImplementedError:
            return None
    first = batched(*[p[:1] for p in flat])
    per_draw = max(1, sum(np.size(o) for o in first))
    if per_draw * len(flat[0]) > VECTORISED_VALUES:
        return None
    step = max(1, DRAW_CHUNK // per_draw)
    chunks = [first, *(batched(*[p[i:i + step] for p in flat])
                       for i in range(1, len(flat[0]), step))]
    return [np.concatenate([c[k] for c in chunks]) for k in range(len(first))]


def point_outputs(model: pm.Model, value_parts, sample_shape=()) -> tuple[dict, dict]:
    """(posterior values, element-wise log-likelihoods) at the value variables;
    with ``sample_shape``, every part carries those leading axes and the compiled
    point function is applied draw by draw, or the vectorised one to many draws at
    once where the compiled one is not at hand (:func:`_over_draws`)."""
    fns = functions_of(model)
    free, dets, observed = fns.point_names()
    names = [*free, *dets]
    if not sample_shape:
        outs = fns.point()(*value_parts)
        post = {n: np.asarray(o)[None, None] for n, o in zip(names, outs, strict=False)}
        ll = {n: np.asarray(o)[None, None] for n, o in zip(observed, outs[len(names):],
                                                           strict=True)}
        return post, ll
    flat = [np.reshape(p, (-1, *np.shape(p)[len(sample_shape):])) for p in value_parts]
    stacked = _over_draws(fns, flat)
    if stacked is None:  # the compiled function, draw by draw
        f = fns.point()
        rows = [f(*[np.asarray(p[i]) for p in flat])
                for i in range(flat[0].shape[0] if flat else 0)]
        stacked = [np.stack([r[k] for r in rows]) for k in range(len(names) + len(observed))]
    shaped = [s.reshape(*sample_shape, *s.shape[1:]) for s in stacked]
    return (dict(zip(names, shaped[:len(names)], strict=True)),
            dict(zip(observed, shaped[len(names):], strict=True)))


def point_tree(model: pm.Model, value_parts) -> xr.DataTree:
    """A one-draw DataTree at the value variables: posterior, log_likelihood, data, family."""
    post, ll = point_outputs(model, value_parts)
    groups = {"posterior": xr.DataTree(group_dataset(model, post, (D.CHAIN, D.DRAW))),
              "log_likelihood": xr.DataTree(group_dataset(model, ll, (D.CHAIN, D.DRAW)))}
    tree = xr.DataTree(children={**groups, **data_groups(model)})
    tree.attrs.update(family_attrs(model))
    return tree


def family_attrs(model: pm.Model) -> dict:
    """The ``family`` and ``variant`` a family's factory recorded on the model
    (``model.crowd_family``), with the standardised features' centre and scale
    (``model.crowd_feature_scaling``), as a fit's attrs; none for a model
    without them."""
    recorded = getattr(model, "crowd_family", None)
    scaling = getattr(model, "crowd_feature_scaling", {})
    return {**scaling} if recorded is None else {"family": recorded[0], "variant": recorded[1],
                                                 **scaling}


def check_protocol(model: pm.Model) -> None:
    """Warn when a model that observes ``item_labels``, as every family's does, has
    lost the hooks its factory attached (a model rebuilt by ``pm.do`` or
    ``pm.observe`` keeps none)."""
    if hasattr(model, "crowd_family") or D.OBSERVED not in {
            v.name for v in model.observed_RVs}:
        return
    warn(f"this model observes {D.OBSERVED!r} like a crowd_models family's but carries none "
         f"of the hooks its factory attached (crowd_start, crowd_em, crowd_family), as a "
         f"model rebuilt by pm.do or pm.observe does: fit_map starts at PyMC's initial "
         f"point, skips the comparison with the family's EM, and the fit records no family. "
         f"Pass start= (the original model's crowd_start, or an EM fit), or set the new "
         f"model's crowd_start and crowd_family from the original's.")


def check_count(value, name: str, minimum: int) -> int:
    """``value`` as an int, after checking that it is an integer of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an integer, got {value!r}.")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}.")
    return int(value)


def untransformed_point(model, parts) -> dict:
    """The start for ``pm.sample(initvals=...)``: one dict, so that PyMC compiles one
    small initial-point function (its only compilation in a warm call) for all chains."""
    fns = functions_of(model)
    return dict(zip(fns.free_names, _untransform(model, parts), strict=True))


def _untransform(model, parts):
    """Free-variable values at value-variable values ``parts`` (one point)."""
    fns = functions_of(model)
    outs = fns.point()(*parts)
    return [np.asarray(o) for o in outs[:len(fns.free_names)]]
