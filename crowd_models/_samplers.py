"""The NUTS backends behind ``sample``: PyMC's, nutpie's (cached per model
structure) and NumPyro's, each started from jittered points near the MAP."""

from __future__ import annotations

import dataclasses
import importlib.util
import threading
import warnings

import numpy as np
import pymc as pm
import pymc.backends.arviz
from pytensor.compile.sharedvalue import SharedVariable
from threadpoolctl import threadpool_limits

from crowd_models import _compiled, _kernels
from crowd_models import _dims as D
from crowd_models._points import untransformed_point

SAMPLERS = ("nutpie", "pymc", "numpyro")
"""The NUTS implementations :func:`sample` runs, the default first.

``"nutpie"`` (the default; a dependency) compiles the model's log density
into numba code once per model structure and process (about 10 s) and keeps
it: a second call, or a model of the same structure on other data, samples at
once. ``"pymc"`` is PyMC's NUTS on the cached compiled log density (a
compile of a few seconds, no more after the first model of a structure).
``"numpyro"`` (the ``crowd_models[jax]`` extra; on a GPU when JAX finds one)
goes through ``pm.sample(nuts_sampler="numpyro")`` and compiles on every
call. Measured (``benchmarks/samplers.py``, 4 chains x 1000 draws, warm, min
bulk ESS per second of the whole call): RTE two-coin nutpie 364-386, PyMC
177, NumPyro 141; dog Dawid-Skene nutpie 22.6, PyMC 22.2, NumPyro 56; web
search Dawid-Skene nutpie 0.9, PyMC 0.5, NumPyro 0.4 (under load).
BlackJAX is not offered: PyMC 6.4 passes it a ``progress_bar`` argument that
its NUTS kernel (1.6 and 1.7) does not take."""


_SAMPLER_PACKAGE = {"nutpie": "nutpie", "numpyro": "numpyro"}


def check_sampler(nuts_sampler) -> str:
    """sample's ``nuts_sampler`` (None: the default), after checking that it is installed."""
    if nuts_sampler is None:
        return SAMPLERS[0]
    if nuts_sampler not in SAMPLERS:
        raise ValueError(f"nuts_sampler={nuts_sampler!r} is unknown; use one of {list(SAMPLERS)}.")
    package = _SAMPLER_PACKAGE.get(nuts_sampler)
    if package is not None and importlib.util.find_spec(package) is None:
        extra = "crowd_models[jax]" if package == "numpyro" else package
        raise ValueError(f"nuts_sampler={nuts_sampler!r} needs the package {package!r}, which "
                         f"is not installed: pip install {extra!r}.")
    return nuts_sampler


class _NutsLogp:
    """What PyMC's NUTS calls for the log density and its gradient: the cached
    compiled function (jacobian included) on one raveled vector."""

    _raveled_inputs = True
    _extra_vars_shared: dict = {}
    dtype = "float64"
    trust_input = True

    def __init__(self, bound, shapes):
        # the compiled function and the model's data, read once for the whole run
        self.fn, self.data, self.shapes = bound.compiled.fn, bound.data, shapes
        self._slices = None

    def _pytensor_function(self, q):
        # called once per leapfrog step: slices precomputed, one concatenate
        if self._slices is None:
            ends = np.cumsum([int(np.prod(s, dtype=int)) for s in self.shapes])
            self._slices = [(slice(e - int(np.prod(s, dtype=int)), e), s)
                            for e, s in zip(ends, self.shapes, strict=True)]
        out = self.fn(*[q[sl].reshape(shape) for sl, shape in self._slices], *self.data)
        return np.asarray(out[0]), np.concatenate([np.ravel(g) for g in out[1:]])

    def set_extra_values(self, values):
        pass

    def __getstate__(self):
        # cloudpickle (PyMC's pickler for parallel chains) writes the compiled
        # function; the structure cache stays in this process
        return {"fn": self.fn, "data": self.data, "shapes": self.shapes}

    def __setstate__(self, state):
        self.__dict__.update(state, _slices=None)


def _identity(*values):
    return values


def _value_trace(ndarray_class):
    """PyMC's NDArray trace recording the value variables as they are (no compiled
    trace function). PyMC gives each chain a shallow copy of the trace it is
    handed, which would share one ``samples`` dict between the chains (every
    chain would read back the last one's draws): each copy here is a new trace."""

    class ValueTrace(ndarray_class):
        def __copy__(self):
            return type(self)(model=self.model, vars=self.vars, fn=self.fn,
                              var_shapes=self.var_shapes, var_dtypes=self.var_dtypes)

    return ValueTrace


JITTER_RETRIES = 10
"""Draws of a jittered start per chain before falling back to the start itself."""


def _jittered_starts(bound, x0, shapes, chains, rng) -> list[np.ndarray]:
    """One start per chain: ``x0`` plus U(-1, 1) on the unconstrained scale (PyMC's
    "jitter" initialisation), redrawn until the log density is finite there.
    Dispersed starts are what lets r-hat see chains that have not mixed."""
    starts = []
    for _ in range(chains):
        for _ in range(JITTER_RETRIES):
            x = x0 + rng.uniform(-1.0, 1.0, x0.size)
            if np.isfinite(float(bound(*_compiled.split_vector(x, shapes))[0])):
                break
        else:
            x = x0
        starts.append(x)
    return starts


def pymc_nuts(model, fns, parts, shapes, *, draws, tune, chains, cores, random_seed,
              target_accept, progressbar, jitter, **kwargs):
    """PyMC's NUTS on the cached compiled log density: (value-variable draws, stats)."""
    from pymc.backends.ndarray import NDArray
    from pymc.step_methods.hmc.quadpotential import QuadPotentialDiagAdapt

    bound = fns.nuts_logp_grad()
    x0 = _compiled.ravel_parts(parts)
    point = {v.name: np.asarray(p) for v, p in zip(fns.value_vars, parts, strict=True)}
    rng = np.random.default_rng(random_seed)
    starts = _jittered_starts(bound, x0, shapes, chains, rng) if jitter else [x0] * chains
    potential = QuadPotentialDiagAdapt(x0.size, np.mean(starts, axis=0), np.ones(x0.size), 10,
                                       rng=rng.spawn(1)[0])
    initvals = ([untransformed_point(model, _compiled.split_vector(x, shapes)) for x in starts]
                if jitter else untransformed_point(model, parts))
    step = pm.NUTS(vars=fns.value_vars, model=model, potential=potential,
                   target_accept=target_accept, initial_point=point,
                   logp_dlogp_func=_NutsLogp(bound, shapes), rng=rng.spawn(1)[0], **kwargs)
    trace = _value_trace(NDArray)(model=model, vars=fns.value_vars, fn=_identity,
                                  var_shapes={k: v.shape for k, v in point.items()},
                                  var_dtypes={k: v.dtype for k, v in point.items()})
    names = [v.name for v in fns.value_vars]
    # one BLAS thread: NUTS's vector operations are small, and OpenBLAS's threads
    # made each of them milliseconds slower on a loaded 2-core machine
    with warnings.catch_warnings(), threadpool_limits(1, user_api="blas"):
        warnings.filterwarnings("ignore", message=".*return_inferencedata=False.*")
        result = pm.sample(
            draws=draws, tune=tune, chains=chains, cores=cores, model=model, step=step,
            trace=trace, initvals=initvals, random_seed=rng.integers(2**31),
            progressbar=progressbar, return_inferencedata=False,
            compute_convergence_checks=False, discard_tuned_samples=True,
        )
    chain_ids = sorted(result.chains)
    value_draws = [np.stack([result.get_values(n, chains=c) for c in chain_ids]) for n in names]
    stats = {}
    for name in result.stat_names:
        try:
            values = np.stack([result.get_sampler_stats(name, chains=c) for c in chain_ids])
        except (ValueError, TypeError):
            continue
        if values.ndim >= 2 and values.dtype != object:
            stats[name] = values
    return value_draws, stats


_NUTPIE_STATS = {"depth": "tree_depth", "maxdepth_reached": "reached_max_treedepth",
                 "mean_tree_accept": "acceptance_rate", "logp": "lp"}
"""nutpie's sample statistics under PyMC's names (the others keep their own)."""


def _nutpie_model(model, bound, shapes, progressbar):
    """nutpie's compiled model for this model's structure, bound to its data.

    nutpie compiles the log density into a numba C callback (about 10 s of
    numba here, not cacheable on disk) and bakes array constants and the
    parameter sizes into it; its data (``pm.Data`` and dim lengths) are inputs.
    The compiled model is kept per structure, sizes and constant values, and a
    model with other data gets it through ``with_data``."""
    import nutpie

    shared = {v.name: v for v in bound.sources if isinstance(v, SharedVariable)}
    # the structure without the backend that linked ``bound`` (quick or compiled)
    key = (bound.compiled.key[:2], tuple(shapes), _compiled.constant_values_key(bound),
           tuple(sorted(shared)))
    compiled, hit = _compiled.cached_object(
        "nutpie", key, lambda: nutpie.compile_pymc_model(model, backend="numba", var_names=[]),
        progressbar=progressbar)
    if hit:  # nutpie's data are the shared variables its graph reads (by name)
        compiled = compiled.with_data(**{
            var.name: np.asarray(shared[var.name].get_value(borrow=True))
            for var in compiled.shared_var_keys})
    return compiled


def nutpie_nuts(model, fns, parts, shapes, *, draws, tune, chains, cores, random_seed,
                target_accept, progressbar, jitter, **kwargs):
    """nutpie's NUTS on its compiled model, cached per structure: (value-variable
    draws, stats). Each chain starts at the given point, jittered (as for PyMC's
    sampler) from the chain's own seed, so a seed gives the same chains."""
    import nutpie

    # its structure keys nutpie's cache; it vets jittered starts (a few calls: linked
    # quick where its compiled code is neither in this process nor on disk)
    with fns.few_calls():
        bound = fns.nuts_logp_grad()
    compiled = _nutpie_model(model, bound, shapes, progressbar)
    names, slices, _ = compiled.shape_info
    position = {name: sl for name, sl in zip(names, slices, strict=True)}
    ours = [v.name for v in fns.value_vars]
    if sorted(ours) != sorted(names):  # pragma: no cover - nutpie samples the value variables
        raise RuntimeError(f"nutpie's parameters {names} are not the model's {ours}")
    x0 = _compiled.ravel_parts(parts)
    lock = threading.Lock()

    def chain_start(seed):
        # nutpie calls this from its chain threads, one seed per chain
        x = x0
        if jitter:
            with lock:
                x = _jittered_starts(bound, x0, shapes, 1, np.random.default_rng(seed))[0]
        flat = np.empty(x0.size)
        for name, part in zip(ours, _compiled.split_vector(x, shapes), strict=True):
            flat[position[name]] = np.ravel(part)
        return flat

    compiled = dataclasses.replace(compiled, initial_point_func=chain_start)
    seed = int(np.random.default_rng(random_seed).integers(2**63))
    trace = nutpie.sample(compiled, draws=draws, tune=tune, chains=chains, cores=cores,
                          seed=seed, progress_bar=progressbar, save_warmup=False,
                          store_unconstrained=True, target_accept=target_accept, **kwargs)
    # transformed variables' draws are in unconstrained_posterior, the others (no
    # transform: the value is the variable) in posterior
    groups = [trace[g].to_dataset() for g in ("unconstrained_posterior", "posterior")]
    value_draws = [np.asarray(next(g[name] for g in groups if name in g).values).reshape(
        chains, draws, *shape) for name, shape in zip(ours, shapes, strict=True)]
    stats = {}
    for name, values in trace["sample_stats"].to_dataset().data_vars.items():
        if values.dims == (D.CHAIN, D.DRAW) and values.dtype != object:
            stats[_NUTPIE_STATS.get(name, name)] = np.asarray(values.values)
    return value_draws, stats


def external_nuts(model, fns, parts, nuts_sampler, *, draws, tune, chains, cores,
                  random_seed, target_accept, progressbar, **kwargs):
    """NumPyro through ``pm.sample`` (JAX; compiles on every call): (value-variable
    draws, stats)."""
    post_start = untransformed_point(model, parts)
    _kernels.register_jax()  # the long-table operation's JAX form
    idata = pm.sample(
        draws=draws, tune=tune, chains=chains, cores=cores, model=model,
        random_seed=random_seed, initvals=post_start, nuts_sampler=nuts_sampler,
        target_accept=target_accept, progressbar=progressbar,
        compute_convergence_checks=False, **kwargs,
    )
    post = idata["posterior"].to_dataset()
    to_values = fns.start()
    flat = {n: np.asarray(post[n].values) for n in fns.free_names}
    rows = [to_values(*[np.asarray(flat[n][c, d]) for n in fns.free_names])
            for c in range(chains) for d in range(draws)]
    value_draws = [np.stack([r[k] for r in rows]).reshape(chains, draws, *np.shape(rows[0][k]))
                   for k in range(len(fns.free_names))]
    stats = {}
    if "sample_stats" in idata.children:
        for name, values in idata["sample_stats"].to_dataset().data_vars.items():
            if values.dims[:2] == (D.CHAIN, D.DRAW) and values.ndim == 2:
                stats[name] = np.asarray(values.values)
    return value_draws, stats
