"""Compiled log-density functions, built once per model structure.

A family's model keeps its data out of the graph (``pm.Data`` and the
symbolic dim lengths), but PyMC still bakes array-valued prior parameters
into it as constants, and ``pm.find_MAP``/``pm.sample`` rewrite and compile
the graph anew on every call. Here each graph a fit needs (log density and
gradient, a Hessian-vector product, the start transform, the point outputs)
has its data, dim lengths and every non-scalar constant replaced by explicit
inputs, and is compiled once per *structure*: the graph's operations and
their wiring, the input types and the remaining scalar constants. Two models
of the same family, options and prior structure share one compiled function,
whatever their data or numbers of items and annotators; a model of another
variant or prior structure gets a graph with another key, hence its own
function. :data:`COMPILE_COUNT` counts the compilations (tests use it).

Numba compiles a function the first time it is called, and on a machine whose
PyTensor compile directory does not hold the structure's code that costs far
more than the fit (RTE two-coin: about 27 s for the log density and gradient,
7 s for the point function, against 0.2 s of fitting). ``fit_map`` therefore
asks for its functions with ``quick=True``: while a structure's compiled code
is not known to be on disk (a marker file beside PyTensor's cache, written once
a compiled function of the structure has run), the first :data:`QUICK_FITS`
fits of the structure in a process get it linked on PyTensor's Python backend
(NumPy ``perform`` of each operation, nothing compiled; :data:`QUICK_MODE`),
and the next one compiles it, which also fills the disk cache for later
processes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pytensor.compile.mode import Mode
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.rewriting.db import RewriteDatabaseQuery
from pytensor.graph.traversal import graph_inputs, io_toposort
from pytensor.link.vm import VMLinker
from pytensor.tensor.type import TensorType
from pytensor.tensor.type_other import NoneTypeT

__all__ = ["model_function", "COMPILE_COUNT", "clear_cache", "QUICK_FITS", "QUICK_MODE"]

COMPILE_COUNT: Counter = Counter()
"""Compilations made here, by kind of function (``"logp_grad"``, ``"hessp"``,
``"start"``, ``"point"``); those linked in :data:`QUICK_MODE` are also counted
under ``"quick"``."""



def _quick_fits_setting(text: str) -> int:
    """``CROWD_MODELS_QUICK_FITS`` as a count of fits."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"CROWD_MODELS_QUICK_FITS must be a whole number >= 0 (fits of a "
                         f"structure per process on PyTensor's Python backend), got {text!r}.")
    return value


QUICK_FITS = _quick_fits_setting(os.environ.get("CROWD_MODELS_QUICK_FITS", "1"))
"""How many fits of a structure per process run on :data:`QUICK_MODE` while its
compiled code is not on disk (0: none, every fit compiles). The environment
variable ``CROWD_MODELS_QUICK_FITS`` sets it at import."""

MARKER_DIR = None
"""Where the markers of compiled structures go: None for ``crowd_models/`` in
PyTensor's ``base_compiledir`` (beside its numba cache; tests point it elsewhere)."""

QUICK_MODE = Mode(VMLinker(use_cloop=False, c_thunks=False),
                  RewriteDatabaseQuery(include=["fast_compile", "py_only"]))
"""PyTensor's Python backend with its quick rewrites: each operation's NumPy
``perform``, nothing handed to numba or a C compiler (the functions are linked
with ``config.cxx`` empty, so that operations with an inner graph, such as
``LogSumExp``, link theirs in Python too)."""

_CACHE: dict = {}
_QUICK_SERVED: Counter = Counter()  # structure key -> quick fits served in this process
_LOCK = threading.Lock()


def clear_cache() -> None:
    """Forget every compiled function (the next fit of each structure compiles)."""
    with _LOCK:
        _CACHE.clear()
        _QUICK_SERVED.clear()


@dataclass
class _Compiled:
    fn: object  # the pytensor Function
    key: tuple  # the structure it was compiled for
    quick: bool = False  # linked in QUICK_MODE
    marker: object = None  # the on-disk marker to write after the first call, if any


@dataclass
class BoundFunction:
    """A cached compiled function and the model variables that feed its data inputs.

    ``bound(*values)`` calls the compiled function with ``values`` (one array
    per input the caller named) followed by the model's data, read when the
    function was bound or last :meth:`refresh`-ed (``pm.set_data`` between
    fits is seen by the next fit).
    """

    compiled: _Compiled
    sources: list
    cache_hit: bool

    def __post_init__(self):
        self.refresh()

    def refresh(self) -> None:
        self.data = [np.asarray(v.get_value(borrow=True) if isinstance(v, SharedVariable)
                                else v.data) for v in self.sources]

    def __call__(self, *values):
        out = self.compiled.fn(*values, *self.data)
        if self.compiled.marker is not None:  # the first call compiled (numba) and cached it
            _write_marker(self.compiled.marker)
            self.compiled.marker = None
        return out


def _generic_type(var: Variable) -> TensorType:
    """The variable's tensor type with every static length other than 1 unknown
    (a length-1 axis keeps its broadcasting meaning)."""
    shape = tuple(1 if s == 1 else None for s in var.type.shape)
    return TensorType(var.type.dtype, shape=shape)


def _structure_key(inputs, outputs) -> tuple:
    """A hashable description of the graph: input types, then each node's op
    and the positions of its inputs, scalar constants by value."""
    position = {var: i for i, var in enumerate(inputs)}
    key: list = [tuple(("in", var.type) for var in inputs)]
    for node in io_toposort(inputs, outputs):
        refs = []
        for var in node.inputs:
            if var not in position:
                if not isinstance(var, Constant):  # pragma: no cover - inputs cover the rest
                    raise RuntimeError(f"graph input {var} was not lifted")
                position[var] = len(position)
                # None (SpecifyShape's unknown length) by name: its type prints its address
                key.append(("const", "None" if isinstance(var.type, NoneTypeT)
                            else var.signature()))
            refs.append(position[var])
        key.append((node.op, tuple(refs)))
        for out in node.outputs:
            position[out] = len(position)
    key.append(("out", tuple(position[o] for o in outputs)))
    return tuple(key)


def _lift(inputs, outputs):
    """Rebuild the graph with ``inputs``, shared variables and array constants as
    placeholders of generic types: (placeholders, outputs, the variables that feed
    the data placeholders). Each *use* of an array constant gets its own
    placeholder: PyMC may or may not reuse one constant object for equal values
    (two Beta priors with the same parameters), and the structure must not
    depend on that."""
    memo, placeholders, sources = {}, [], []
    for var in inputs:
        memo[var] = _generic_type(var)(name=var.name)
        placeholders.append(memo[var])

    def lifted(var):
        placeholder = _generic_type(var)(name=var.name)
        placeholders.append(placeholder)
        sources.append(var)
        return placeholder

    def check(var):
        if not (isinstance(var, SharedVariable | Constant) and isinstance(var.type, TensorType)):
            raise ValueError(
                f"the graph needs {var} ({var.type}), which is neither a value variable "
                f"nor tensor data; pass it as an input."
            )

    for var in graph_inputs(outputs):
        if var not in memo and not isinstance(var, Constant):
            check(var)
            memo[var] = lifted(var)
    for node in io_toposort(list(memo), outputs):
        new_inputs = []
        for var in node.inputs:
            if var in memo:
                new_inputs.append(memo[var])
            elif isinstance(var, Constant) and getattr(var.type, "ndim", 0) >= 1:
                check(var)
                new_inputs.append(lifted(var))
            else:  # a scalar constant: part of the structure
                new_inputs.append(var)
        new_node = node.clone_with_new_inputs(new_inputs, strict=False)
        memo.update(zip(node.outputs, new_node.outputs, strict=True))
    new_outputs = []
    for out in outputs:
        if out not in memo:  # an output that is a constant
            memo[out] = lifted(out) if getattr(out.type, "ndim", 0) >= 1 else out
        new_outputs.append(memo[out])
    return placeholders, new_outputs, sources


def model_function(model: pm.Model, kind: str, inputs, outputs, *, mode=None,
                   progressbar: bool = False, quick: bool = False) -> BoundFunction:
    """Compile (or fetch) ``outputs`` as a function of ``inputs`` and the model's data.

    ``inputs`` are the symbolic variables the caller will pass (value
    variables, or placeholders); every other graph input (shared data, dim
    lengths, array constants) becomes a trailing input whose value is bound
    from ``model``. The compiled function is looked up by the structure of the
    lifted graph, so it serves every model with the same structure.

    ``quick=True`` (one fit's request, with ``mode=None``): where neither this
    process nor the disk cache (its marker) holds the compiled function yet and
    the structure has served fewer than :data:`QUICK_FITS` such requests in this
    process, the function is linked in :data:`QUICK_MODE` instead (nothing to
    compile). Ask once per fit: each request counts as one fit. ``quick="few"``
    (a caller that makes a handful of calls, such as nutpie's start checks): the
    same, whatever the count, as long as :data:`QUICK_FITS` is not 0.
    """
    outputs = list(outputs)
    inputs = list(inputs)
    sym_inputs, new_outputs, sources = _lift(inputs, outputs)
    key = (kind, _structure_key(sym_inputs, new_outputs), str(mode))
    with _LOCK:
        compiled = _CACHE.get(key)
        hit = compiled is not None
        if not hit and quick and mode is None and QUICK_FITS > 0 and (
                quick == "few" or _QUICK_SERVED[key] < QUICK_FITS):
            marker = _marker_path(key)
            if marker is None or not marker.exists():
                if quick != "few":
                    _QUICK_SERVED[key] += 1
                return BoundFunction(_quick_function(kind, key, sym_inputs, new_outputs),
                                     sources, False)
        if not hit:
            with _status(progressbar, f"compiling the {kind} function (once per model "
                                      f"structure and process)"):
                fn = pytensor.function(sym_inputs, new_outputs, mode=mode,
                                       on_unused_input="ignore", trust_input=True)
            compiled = _Compiled(fn, key, marker=_marker_path(key))
            _CACHE[key] = compiled
            COMPILE_COUNT[kind] += 1
    return BoundFunction(compiled, sources, hit)


def _quick_function(kind, key, sym_inputs, outputs) -> _Compiled:
    """The structure's function in :data:`QUICK_MODE`, linked once per process
    (called with the lock held)."""
    quick_key = (*key[:2], "quick")
    compiled = _CACHE.get(quick_key)
    if compiled is None:
        # with no C compiler named, operations with an inner graph link it in Python too
        with pytensor.config.change_flags(cxx=""):
            fn = pytensor.function(sym_inputs, outputs, mode=QUICK_MODE,
                                   on_unused_input="ignore", trust_input=True)
        compiled = _CACHE[quick_key] = _Compiled(fn, quick_key, quick=True)
        COMPILE_COUNT[kind] += 1
        COMPILE_COUNT["quick"] += 1
    return compiled


def _marker_path(key):
    """The file whose presence says that PyTensor's disk cache holds the compiled
    code of structure ``key`` (in the compile directory, beside that cache, so that
    emptying the one empties the other), or None where the key cannot be named
    the same way in another process. A stale marker (another PyTensor, a cache
    emptied by hand) only costs the compile the quick path avoids."""
    import numba

    try:
        text = repr((key, pytensor.__version__, numba.__version__, pytensor.config.mode,
                     pytensor.config.linker))
    except Exception:  # pragma: no cover - an op without a printable form
        return None
    if " at 0x" in text:  # an object printed by its address: not the same name next time
        return None
    digest = hashlib.sha256(text.encode()).hexdigest()
    folder = (Path(pytensor.config.base_compiledir) / "crowd_models" if MARKER_DIR is None
              else Path(MARKER_DIR))
    return folder / f"{digest}.compiled"


def _write_marker(path) -> None:
    """Create the marker file ``path`` (quietly nothing where the directory is not
    writable: the next process then runs its first fits quick again)."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()


def constant_values_key(bound: BoundFunction) -> tuple:
    """The values of the array constants a bound function's structure left out
    (per-annotator prior arrays): part of the key for code that bakes them in."""
    return tuple((str(v.type), np.shape(v.data),
                  hashlib.sha256(np.ascontiguousarray(v.data).tobytes()).hexdigest())
                 for v in bound.sources if isinstance(v, Constant))


def cached_object(kind: str, key: tuple, build, *, progressbar: bool = False):
    """``build()`` once per ``key`` and process (another library's compiled model,
    e.g. nutpie's), counted in :data:`COMPILE_COUNT` under ``kind``; cleared with
    :func:`clear_cache`. Returns (object, whether it was cached)."""
    with _LOCK:
        obj = _CACHE.get((kind, key))
        if obj is not None:
            return obj, True
        with _status(progressbar, f"compiling the {kind} model (once per model structure "
                                  f"and process)"):
            obj = _CACHE[(kind, key)] = build()
        COMPILE_COUNT[kind] += 1
        return obj, False


def _status(enabled: bool, message: str):
    """A spinner with ``message`` on the terminal while a compile runs (rich)."""
    if not enabled:
        return contextlib.nullcontext()
    from rich.console import Console

    return Console(stderr=True).status(message)


def ravel_parts(parts) -> np.ndarray:
    """Concatenate arrays into one float64 vector."""
    return np.concatenate([np.ravel(np.asarray(p, dtype=float)) for p in parts]) if parts else (
        np.zeros(0))


def split_vector(x: np.ndarray, shapes) -> list[np.ndarray]:
    """The inverse of :func:`ravel_parts` for the given shapes."""
    out, offset = [], 0
    for shape in shapes:
        size = int(np.prod(shape, dtype=int))
        out.append(x[offset:offset + size].reshape(shape))
        offset += size
    return out


def hessp_graph(grads, value_vars):
    """Symbolic Hessian-vector product from a loss's gradient ``grads`` (one per value
    variable): (placeholders p, H @ p per variable)."""
    ps = [v.type(name=f"{v.name}_p") for v in value_vars]
    inner = pt.add(*[pt.sum(g * p) for g, p in zip(grads, ps, strict=True)])
    return ps, pt.grad(inner, value_vars)
