"""The mode search behind ``fit_map`` (:class:`ModeSearch`): scaled L-BFGS, the
Newton polish, the boundary check and the Laplace approximation, and the settings
of fit_map's comparison with the family's EM."""

from __future__ import annotations

import dataclasses

import numpy as np
import xarray as xr
from pymc.distributions.transforms import Ordered
from pymc.logprob.utils import ParameterValueError
from scipy.linalg import cho_solve, solve_triangular
from scipy.optimize import OptimizeResult, minimize
from threadpoolctl import threadpool_limits

from crowd_models import _compiled
from crowd_models import _dims as D
from crowd_models._gaussian import difference_hessian, inverse_from_factor, positive_definite_factor
from crowd_models._points import group_dataset
from crowd_models._text import warn

MAX_GRADIENT = 1e-6
"""fit_map warns when the optimiser stops with a gradient entry (on the
unconstrained scale) larger than this times the number of observed items: the
point is not a mode (the optimiser stalled, or the density is unbounded, as in
a centred hierarchical model). The log posterior is a sum over items, so its
gradient grows with their number; the per-item scale keeps the criterion from
firing on large data sets whose fit agrees with EM to 1e-7."""


POLISH_GRADIENT = 1e-9
"""fit_map follows L-BFGS with a Newton polish (:func:`_newton_polish`: CG on
forward-difference Hessian-vector products) when L-BFGS stops with a gradient
entry above this times the number of observed items. L-BFGS stops once the
objective's changes near float64 precision (where its line searches fail), which
on flat ridges (the dog data) left 1e-5 differences from the EM fixed point; the
polish takes them to ~1e-10."""


EM_AGREEMENT = 1e-9
"""fit_map's optimum and the family's EM optimum (from the same start) count as
one mode when their log posteriors agree to this relative tolerance."""


POLISH_GAIN = 1e-6
"""fit_map skips polishing the optimiser's point when the family's EM reached a
log posterior higher by more than this relative amount: near a mode, where the
polish runs, it raises the log posterior by far less (1e-9 relative on the
web search data), so the EM's mode is the one returned, polished."""


POLISH_RADIUS = 10.0
"""The trust-krylov polish's largest trust radius on the unconstrained scale
(scipy's default, 1000, let trial steps reach values where PyMC's parameter
checks fail): it starts next to a mode, where steps are small."""


HESSP_STEP = 6e-6
"""Relative step of the central-difference Hessian-vector products given to
scipy's Hessian-vector methods with ``exact_hessp=False`` (about the cube root of
float64 precision)."""


LBFGS_FTOL = 1e-12
"""fit_map's default L-BFGS-B ``ftol`` when the Newton polish follows (1e-15
without it): L-BFGS stops once an iteration lowers the objective by less than
this relative amount, a few iterations above the objective's rounding, where
its line searches start to fail and each failure costs up to 20 evaluations;
the polish's Newton steps, which need the gradient only, finish from there."""


LBFGS_MAXCOR = 30
"""fit_map's default L-BFGS-B memory (scipy's is 10): on the ill-conditioned
Dawid-Skene and latent ordinal posteriors of web search it saves a third of the
evaluations (1008 -> 672, 743 -> 449 with 40)."""


PROBE_STEP = 1e-6
"""Relative step of the forward difference behind the curvature probe."""


PROBE_SEED = 20261201
"""Seed of the probe's random signs (fixed: fit_map is deterministic)."""


PROBE_AGREEMENT = 0.9
"""The share of coordinates on which the curvature probe's two estimates must
agree (within a factor 2, positive) for fit_map to use them."""


CURVATURE_FLOOR = 1e-6
"""The probe's curvature estimates are floored at this times their largest
(the scales of the variables then span at most a factor 1000)."""


FORWARD_STEP = 1e-7
"""Relative step of the polish's forward-difference Hessian-vector products
(about the square root of float64 precision)."""


NEWTON_CG_RTOL = 1e-4
"""The polish solves each Newton system to this relative residual."""


POLISH_TARGET = 1.0
"""The Newton polish stops once the largest gradient entry is this times the
polish threshold (:data:`POLISH_GRADIENT` per observed item); with the Jacobi
preconditioner one step usually lands far below it."""


NEWTON_CG_PRODUCTS = 50
"""At most this many Hessian-vector products per Jacobi-preconditioned Newton system."""


NEWTON_CG_PRODUCTS_PLAIN = 100
"""At most this many per unpreconditioned Newton system (Dawid-Skene, the latent
ordinal model: ill-conditioned, each step cuts the gradient about 10-fold)."""


NEWTON_STEPS = 6
"""At most this many Newton steps in the polish."""


NEWTON_HALVINGS = 4
"""Times the polish halves a Newton step that does not reduce the gradient."""


NEWTON_XTOL = 1e-9
"""The polish stops once the distance left to the mode, estimated as the last
step's largest relative move times the factor by which it cut the largest
gradient entry, is below this."""


_METHOD_OPTIONS = {
    "L-BFGS-B": ("ftol", "gtol", "maxiter", "maxfun", "maxcor", "maxls"),
    "BFGS": ("gtol", "maxiter", "norm", "xrtol"),
    "CG": ("gtol", "maxiter", "norm"),
    "Newton-CG": ("xtol", "maxiter"),
    "trust-krylov": ("gtol", "maxiter", "inexact"),
    "trust-ncg": ("gtol", "maxiter"),
    "TNC": ("ftol", "gtol", "xtol", "maxfun"),
    "SLSQP": ("ftol", "maxiter"),
    "Powell": ("ftol", "xtol", "maxiter", "maxfev"),
    "Nelder-Mead": ("fatol", "xatol", "maxiter", "maxfev"),
}
"""The scipy.optimize.minimize methods fit_map accepts and the options each takes."""


_USES_GRADIENT = {"L-BFGS-B", "BFGS", "CG", "Newton-CG", "trust-krylov", "trust-ncg", "TNC",
                  "SLSQP"}


_USES_HESSP = {"Newton-CG", "trust-krylov", "trust-ncg"}


def check_method(method: str, options: dict) -> str:
    """fit_map's ``method`` in scipy's spelling, after checking it and its ``options``."""
    canonical = {m.lower(): m for m in _METHOD_OPTIONS}
    if not isinstance(method, str) or method.lower() not in canonical:
        raise ValueError(f"method={method!r} is not one fit_map supports; use one of "
                         f"{list(_METHOD_OPTIONS)}.")
    method = canonical[method.lower()]
    unknown = set(options) - set(_METHOD_OPTIONS[method])
    if unknown:
        raise TypeError(f"fit_map(method={method!r}) got unknown option(s) {sorted(unknown)}; "
                        f"it takes {list(_METHOD_OPTIONS[method])}.")
    return method


def _objective(fns, shapes, *, jacobian=False):
    """The negative log posterior and its gradient on one raveled vector, counting
    calls; with ``jacobian``, the negative log density of the unconstrained
    variables (the transforms' log Jacobian added, what NUTS samples)."""
    f = fns.nuts_logp_grad() if jacobian else fns.logp_grad()
    sign = -1.0 if jacobian else 1.0

    def fun(x):
        fun.calls += 1
        out = f(*_compiled.split_vector(x, shapes))
        return sign * float(out[0]), sign * _compiled.ravel_parts(out[1:])

    fun.calls = 0
    return fun


def _curvature_probe(fun, x, g) -> np.ndarray | None:
    """The Hessian's diagonal at ``x`` from two gradient evaluations, or None where
    that estimate is not to be trusted.

    With a random sign vector v, ``v * (H @ v)`` has expectation diag(H) (its
    error is the rows' off-diagonal sums); ``H @ v`` comes from a forward
    difference of the gradient. Two independent probes must agree within a
    factor 2, and be positive, on :data:`PROBE_AGREEMENT` of the coordinates
    (a Hessian close to diagonal, as the two-coin family's); their mean is
    returned, floored at :data:`CURVATURE_FLOOR` times its largest entry.
    Elsewhere (Dawid-Skene's simplex rows, whose coordinates are strongly
    coupled) the estimate would mislead a preconditioner: None.
    """
    if x.size == 0:
        return None
    rng = np.random.default_rng(PROBE_SEED)
    step = PROBE_STEP * (1.0 + float(np.linalg.norm(x)) / np.sqrt(x.size))
    estimates = []
    for _ in range(2):
        signs = np.where(rng.random(x.size) < 0.5, -1.0, 1.0)
        try:
            _, g1 = fun(x + step * signs)
        except ParameterValueError:
            return None
        estimates.append(signs * (g1 - g) / step)
    first, second = estimates
    if not (np.all(np.isfinite(first)) and np.all(np.isfinite(second))):
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = first / second
    if np.mean((ratio > 0.5) & (ratio < 2.0) & (first > 0)) < PROBE_AGREEMENT:
        return None
    diag = np.abs(first + second) / 2
    if not np.any(diag > 0):
        return None
    return np.maximum(diag, CURVATURE_FLOOR * float(np.max(diag)))


def _lbfgs_scale(diag, g) -> np.ndarray:
    """L-BFGS's variable scale: x = x0 + scale * z with Hessian about I * c**2 in z,
    c = |g / sqrt(diag)|, so that its first step (unit length in z) is the
    Newton step of the diagonal model."""
    inv_root = 1.0 / np.sqrt(diag)
    c = float(np.linalg.norm(g * inv_root))
    return inv_root * (c if np.isfinite(c) and c > 0 else 1.0)


def _optimise(fns, x0, shapes, method, options, *, exact_hessp=True, progressbar=False,
              label="MAP", scale=None, fun=None):
    """scipy.optimize.minimize of the negative log posterior on the compiled functions.

    Methods that use Hessian-vector products get the compiled exact one, or
    with ``exact_hessp=False`` central differences of the gradient (step
    ``HESSP_STEP`` times the scale of x over |p|: relative error ~1e-10, and
    no Hessian graph to compile). With ``scale`` (a vector), the optimiser
    works on z with x = x0 + scale * z (a diagonal preconditioner); the result
    is reported in x, with the unscaled gradient, and ``gtol`` keeps its
    meaning on the unscaled gradient.
    """
    fun = _objective(fns, shapes) if fun is None else fun
    if scale is not None:
        base, unscaled = x0, fun
        options = dict(options)
        if "gtol" in options:  # |scale * g| <= gtol * min(scale) implies |g| <= gtol
            options["gtol"] = options["gtol"] * float(np.min(scale))

        def fun(z):
            value, grad = unscaled(base + scale * z)
            return value, scale * grad

        x0 = np.zeros_like(base)

    kwargs = {}
    if method in _USES_GRADIENT:
        kwargs["jac"] = True
    if method in _USES_HESSP and exact_hessp:
        h = fns.hessp()

        def hessp(x, p):
            return _compiled.ravel_parts(h(*_compiled.split_vector(x, shapes),
                                           *_compiled.split_vector(p, shapes)))
        kwargs["hessp"] = hessp
    elif method in _USES_HESSP:
        def hessp(x, p):
            norm = float(np.linalg.norm(p))
            if norm == 0:
                return np.zeros_like(p)
            step = HESSP_STEP * (1.0 + float(np.linalg.norm(x)) / np.sqrt(x.size)) / norm
            return (fun(x + step * p)[1] - fun(x - step * p)[1]) / (2 * step)
        kwargs["hessp"] = hessp
    objective = fun if method in _USES_GRADIENT else (lambda x: fun(x)[0])
    progress = _Progress(progressbar, f"{label} ({method})")
    if progress.bar is not None:
        kwargs["callback"] = lambda intermediate_result: progress.update(
            float(intermediate_result.fun))
    try:
        with np.errstate(all="ignore"):
            res = minimize(objective, x0, method=method, options=options, **kwargs)
    finally:
        progress.close()
    if scale is not None:
        res.x = base + scale * res.x
        res.jac = None
        fun = unscaled
    if method not in _USES_GRADIENT or getattr(res, "jac", None) is None:
        res.jac = fun(res.x)[1]
    return res


def _conjugate_gradient(hessp, g, precondition, rtol, max_iter):
    """Preconditioned CG for H d = -g, stopped at a relative residual of ``rtol``, after
    ``max_iter`` products, or at a direction of non-positive curvature: (d, products)."""
    d = np.zeros_like(g)
    r = -g
    z = precondition(r)
    p = z.copy()
    rz = float(r @ z)
    target = rtol * float(np.linalg.norm(r))
    for k in range(1, max_iter + 1):
        hp = hessp(p)
        curvature = float(p @ hp)
        if not np.isfinite(curvature) or curvature <= 0:
            return (d if k > 1 else p), k  # the preconditioned gradient, or CG so far
        alpha = rz / curvature
        d = d + alpha * p
        r = r - alpha * hp
        if float(np.linalg.norm(r)) <= target:
            return d, k
        z = precondition(r)
        rz_new = float(r @ z)
        p = z + (rz_new / rz) * p
        rz = rz_new
    return d, max_iter


def _newton_polish(fun, x, value, grad, *, gtol, progressbar=False):
    """Newton steps from a point near a mode: H d = -g by CG on forward-difference
    Hessian-vector products (one gradient each), Jacobi-preconditioned from
    :func:`_curvature_probe` where it trusts its estimate at the start (at most
    :data:`NEWTON_CG_PRODUCTS` products, the probe renewed each step), else
    unpreconditioned (at most :data:`NEWTON_CG_PRODUCTS_PLAIN`). A step is halved
    up to :data:`NEWTON_HALVINGS` times until the largest gradient entry falls
    and the objective does not rise above its rounding. Stops at ``gtol``, once
    the distance left to the mode is estimated below :data:`NEWTON_XTOL`, when no
    step helps, or after :data:`NEWTON_STEPS` steps. Returns a scipy
    OptimizeResult, or None where no step helped (the caller falls back)."""
    calls = fun.calls
    max_grad = float(np.max(np.abs(grad)))
    message, success, steps = "no step reduced the gradient", False, 0
    diag = _curvature_probe(fun, x, grad)
    jacobi = diag is not None
    products = NEWTON_CG_PRODUCTS if jacobi else NEWTON_CG_PRODUCTS_PLAIN
    progress = _Progress(progressbar, "polish (Newton-CG)")
    try:
        while steps < NEWTON_STEPS:
            if max_grad <= gtol:
                message, success = "the largest gradient entry is below gtol", True
                break
            if jacobi and steps:
                diag = _curvature_probe(fun, x, grad)
                if diag is None:
                    break

            def hessp(p, x=x, grad=grad):
                norm = float(np.linalg.norm(p))
                if norm == 0:
                    return np.zeros_like(p)
                step = FORWARD_STEP * (1.0 + float(np.linalg.norm(x)) / np.sqrt(x.size)) / norm
                return (fun(x + step * p)[1] - grad) / step

            direction, _ = _conjugate_gradient(
                hessp, grad, (lambda r, d=diag: r / d) if jacobi else (lambda r: r),
                NEWTON_CG_RTOL, products)
            if not np.all(np.isfinite(direction)):
                message = "the Newton direction is not finite"
                break
            slack = 1e-12 * max(1.0, abs(value))
            for _ in range(NEWTON_HALVINGS + 1):
                trial = x + direction
                new_value, new_grad = fun(trial)
                new_max = float(np.max(np.abs(new_grad))) if np.all(np.isfinite(new_grad)) else (
                    np.inf)
                if np.isfinite(new_value) and new_value <= value + slack and new_max < max_grad:
                    break
                direction = direction / 2
            else:
                break
            steps += 1
            moved = float(np.max(np.abs(trial - x) / (1.0 + np.abs(x))))
            # the distance left, if the error shrinks as the gradient did (Newton's
            # quadratic convergence shrinks it faster)
            left = moved * new_max / max_grad
            x, value, grad, max_grad = trial, new_value, new_grad, new_max
            progress.update(value)
            if left <= NEWTON_XTOL:
                message, success = ("converged: the distance left to the mode, estimated from "
                                    "the last step and the gradient's fall, is below xtol"), True
                break
        else:
            message = f"stopped after {NEWTON_STEPS} Newton steps"
    finally:
        progress.close()
    if not steps:
        return None
    if not success and message == "no step reduced the gradient":
        success = True  # the gradient fell as far as rounding lets it
        message = "converged: no further step reduced the gradient (rounding)"
    return OptimizeResult(x=x, fun=value, jac=grad, success=success, status=0 if success else 1,
                          message=message, nit=steps, nfev=fun.calls - calls,
                          preconditioner="jacobi" if jacobi else "none")


BOUNDARY_Z = 20.0
"""fit_map warns when a constrained parameter's unconstrained value exceeds this
in magnitude (a probability within about 2e-9 of 0 or 1, a positive one
below 2e-9): the mode sits on the edge of the support."""


def _largest(grad) -> float:
    """The largest gradient entry in magnitude (0 for a model without parameters)."""
    return float(np.max(np.abs(grad))) if np.size(grad) else 0.0


def _stage(method, res, max_grad) -> dict:
    """One optimiser run, as reported in ``attrs["stages"]``."""
    return {"method": method, "success": bool(res.success), "message": str(res.message),
            "iterations": int(res.get("nit", -1)), "evaluations": int(res.get("nfev", -1)),
            "log_posterior": -float(res.fun), "max_gradient": max_grad}


def _equal_pairs(model, name: str, gaps: np.ndarray) -> str:
    """The neighbouring values of an ordered variable whose gap is at the boundary,
    by their coordinates (``">2" and ">3"``), or by position without dims."""
    dims = model.named_vars_to_dims.get(name)
    coords = model.coords.get(dims[-1]) if dims else None  # None: a dim with a length only
    labels = ([str(c) for c in coords] if coords is not None
              else [f"[{k}]" for k in range(gaps.shape[-1] + 1)])
    pairs = sorted({int(k) for k in np.nonzero(gaps)[-1]})
    return ", ".join(f"{labels[k]!r} and {labels[k + 1]!r}" for k in pairs)


def _variable_names(fns, shapes) -> list[str]:
    """The raveled point's entries by name: ``v`` for a scalar, ``v[i]`` for an array."""
    names = []
    for v, shape in zip(fns.value_vars, shapes, strict=True):
        size = int(np.prod(shape, dtype=int))
        names += [v.name] if shape == () else [f"{v.name}[{i}]" for i in range(size)]
    return names


class _Progress:
    """The optimiser's progress on the terminal (rich, which PyMC's bars use):
    iterations and the log posterior, updated from scipy's callback."""

    def __init__(self, enabled: bool, what: str):
        self.bar = None
        if enabled:
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self.bar = Progress(SpinnerColumn(), TextColumn("{task.description}"),
                                TimeElapsedColumn(), transient=False)
            self.task = self.bar.add_task(f"{what}: starting")
            self.what, self.n = what, 0
            self.bar.start()

    def update(self, fun: float) -> None:
        if self.bar is not None:
            self.n += 1
            self.bar.update(self.task, description=f"{self.what}: iteration {self.n}, "
                                                   f"log posterior {-fun:.6g}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


@dataclasses.dataclass(frozen=True)
class Mode:
    """A point the mode search reached: scipy's ``result`` there (the final stage's),
    its largest gradient entry on the unconstrained scale, the optimiser runs that led
    to it (``attrs["stages"]``), the polish that finished it (its name, or False where
    L-BFGS's point stands) and whether the polish has been tried on it."""

    result: OptimizeResult
    max_gradient: float
    stages: tuple = ()
    polished: str | bool = False
    polish_tried: bool = False

    @property
    def point(self) -> np.ndarray:
        """The unconstrained point, raveled."""
        return np.asarray(self.result.x, dtype=float)

    @property
    def log_posterior(self) -> float:
        """``model.logp(jacobian=False)`` at the point: what fit_map maximises."""
        return -float(self.result.fun)


class ModeSearch:
    """fit_map's search for the posterior mode of one model (``fns``, its compiled
    functions; ``shapes``, its value variables'): :meth:`climb` from a start,
    :meth:`polish` near a mode, the checks and ``optimizer_result`` of the mode reached,
    and :meth:`laplace` at it. ``method``, ``options`` (checked by :func:`check_method`),
    ``ftol`` and ``gtol`` (None: the defaults) are fit_map's; the polish follows
    L-BFGS-B only, when the user has not set its budget (``maxiter``)."""

    def __init__(self, fns, shapes, method: str, options: dict, *, ftol, gtol, polish: bool,
                 n_observed: int, progressbar: bool):
        self.fns, self.shapes, self.method = fns, shapes, method
        self.gtol = 1e-9 if gtol is None else gtol
        self.polishes = polish and method == "L-BFGS-B" and "maxiter" not in options
        # the scaled L-BFGS-B stops earlier by default when the polish may follow
        self.scaled_ftol = LBFGS_FTOL if self.polishes and ftol is None else None
        # scipy's options: the user's, else the tolerances and (L-BFGS-B) find_MAP's budget
        defaults = {"ftol": 1e-15 if ftol is None else ftol, "gtol": self.gtol}
        if method == "L-BFGS-B":
            budget = 200 * max(sum(int(np.prod(s, dtype=int)) for s in shapes), 1)
            defaults.update(maxiter=budget, maxfun=budget, maxcor=LBFGS_MAXCOR)
        self.options = {**{k: v for k, v in defaults.items() if k in _METHOD_OPTIONS[method]},
                        **options}
        self.n_observed, self.progressbar = n_observed, progressbar
        self.fun = _objective(fns, shapes)

    def converged(self, mode: Mode) -> bool:
        """Whether ``mode``'s largest gradient entry is within :data:`MAX_GRADIENT` per item."""
        return mode.max_gradient <= MAX_GRADIENT * self.n_observed

    def climb(self, x0_parts) -> Mode:
        """One optimiser run from ``x0_parts`` (the value variables, unconstrained).

        L-BFGS-B runs on variables scaled by the curvature probe at the start (a
        diagonal preconditioner; two gradient evaluations) where the probe is to be
        trusted (:func:`_curvature_probe`), with ``ftol`` = :data:`LBFGS_FTOL` when the
        polish may follow: on the two-coin family, whose curvatures differ by orders
        of magnitude between parameters with few and many labels, that saves most of
        its iterations. Where the scaled run stops short of a mode, plain L-BFGS-B
        continues from its point."""
        fun, method, calls = self.fun, self.method, self.fun.calls
        x0 = _compiled.ravel_parts(x0_parts)
        with np.errstate(all="ignore"):
            f0, g0 = fun(x0)
        if not np.isfinite(f0):
            raise ValueError("the log posterior is not finite at the start; give a start "
                             "inside the priors' support (fit_map(model, start=...)).")
        with threadpool_limits(1, user_api="blas"), np.errstate(all="ignore"):
            scale = None
            if method == "L-BFGS-B" and np.all(np.isfinite(g0)):
                diag = _curvature_probe(fun, x0, g0)
                scale = None if diag is None else _lbfgs_scale(diag, g0)
            options = self.options if scale is None or self.scaled_ftol is None else {
                **self.options, "ftol": self.scaled_ftol}
            res = _optimise(self.fns, x0, self.shapes, method, options,
                            progressbar=self.progressbar, scale=scale, fun=fun)
        max_grad = _largest(res.jac)
        stages = [{**_stage(method, res, max_grad), "scaled": scale is not None,
                   "evaluations": fun.calls - calls}]  # the start and the probe included
        if scale is not None and max_grad > MAX_GRADIENT * self.n_observed:
            # the probe's curvatures misled it (a start on the edge of the support,
            # where the curvature vanishes): plain L-BFGS-B from its point
            calls = fun.calls
            with threadpool_limits(1, user_api="blas"), np.errstate(all="ignore"):
                res = _optimise(self.fns, np.asarray(res.x, dtype=float), self.shapes, method,
                                self.options, progressbar=self.progressbar, fun=fun)
            max_grad = _largest(res.jac)
            stages.append({**_stage(method, res, max_grad), "scaled": False,
                           "evaluations": fun.calls - calls})
        return Mode(res, max_grad, tuple(stages))

    def polish(self, mode: Mode) -> Mode:
        """``mode`` after the polish, which runs once on a mode and only where fit_map
        polishes: when L-BFGS-B's largest gradient entry lies between
        :data:`POLISH_GRADIENT` and :data:`MAX_GRADIENT` per observed item, Newton-CG
        (:func:`_newton_polish`, to :data:`POLISH_TARGET` times the first), else
        ``trust-krylov`` where no Newton step helps. Its point is kept where it
        reaches a smaller gradient without lowering the log posterior."""
        if mode.polish_tried or not self.polishes:
            return mode
        res, max_grad, fun = mode.result, mode.max_gradient, self.fun
        tried = dataclasses.replace(mode, polish_tried=True)
        if not POLISH_GRADIENT * self.n_observed < max_grad <= MAX_GRADIENT * self.n_observed:
            return tried
        calls = fun.calls
        target = max(min(self.gtol, 1e-10), POLISH_TARGET * POLISH_GRADIENT * self.n_observed)
        try:
            with threadpool_limits(1, user_api="blas"), np.errstate(all="ignore"):
                name, res2 = "newton-cg", _newton_polish(
                    fun, mode.point, float(res.fun), np.asarray(res.jac, dtype=float),
                    gtol=target, progressbar=self.progressbar)
                if res2 is None:  # no Newton step helped
                    name, res2 = "trust-krylov", _optimise(
                        self.fns, res.x, self.shapes, "trust-krylov",
                        {"gtol": min(self.gtol, 1e-10), "max_trust_radius": POLISH_RADIUS},
                        exact_hessp=False, progressbar=self.progressbar, label="polish",
                        fun=fun)
        except ParameterValueError as error:
            # a trial step where one of PyMC's parameter checks fails (a ZeroSumNormal's
            # zero mean, checked to 1e-9, lost to rounding far out): the polish is
            # optional, L-BFGS's point stands
            return dataclasses.replace(tried, stages=(*mode.stages, {
                "method": "polish", "success": False, "message": f"stopped: {error}",
                "iterations": -1, "evaluations": fun.calls - calls,
                "log_posterior": mode.log_posterior, "max_gradient": max_grad}))
        grad2 = float(np.max(np.abs(res2.jac)))
        stages = (*mode.stages, {**_stage(name, res2, grad2), "evaluations": fun.calls - calls})
        if grad2 < max_grad and res2.fun <= res.fun + 1e-12 * max(1.0, abs(res.fun)):
            return Mode(res2, grad2, stages, name, polish_tried=True)
        return dataclasses.replace(tried, stages=stages)

    def check_boundary(self, mode: Mode) -> None:
        """Warn when ``mode`` puts transformed parameters on the edge of their support:
        a rate at 0 or 1, or two neighbouring values of an ordered parameter (cut
        points) equal, which gives the level between them no probability."""
        model = self.fns.model
        intended = set(getattr(model, "crowd_sparse", ()))  # exact zeros the prior is built for
        edges, merged = [], []
        for var, part in zip(self.fns.value_vars, self.parts(mode), strict=True):
            rv = model.values_to_rvs[var]
            transform = model.rvs_to_transforms.get(rv)
            if transform is None or rv.name in intended:
                continue
            part = np.asarray(part)
            if isinstance(transform, Ordered):  # [first value, log of each gap]
                gaps = part[..., 1:] < -BOUNDARY_Z
                if gaps.any():
                    merged.append(f"{rv.name} {_equal_pairs(model, rv.name, gaps)}")
                continue
            hit = np.abs(part) > BOUNDARY_Z
            if hit.any():
                edges.append(f"{rv.name} ({int(hit.sum())} of {hit.size})")
        if edges:
            warn(
                f"the MAP sits on the boundary of the support for {', '.join(edges)} (a rate "
                f"of 0 or 1, which flat priors allow): it is not an interior mode, and "
                f"curvature-based intervals there mean nothing. Use the default priors, or "
                f"cm.sample for the uncertainty.")
        if merged:
            warn(
                f"the MAP sets neighbouring cut points equal, {'; '.join(merged)}: the "
                f"level between them gets probability 0 on every item, new ones included, "
                f"and curvature-based intervals there mean nothing. The fit has merged two "
                f"levels. Check that the labels use every level; compare another variant or "
                f"family (ordinal: variant='cumulative'), or use cm.sample.")

    def parts(self, mode: Mode) -> list[np.ndarray]:
        """``mode``'s point as the value variables' arrays."""
        return _compiled.split_vector(mode.point, self.shapes)

    def result_dataset(self, mode: Mode) -> xr.Dataset:
        """``optimizer_result``: the final stage's scipy result at ``mode``, by variable."""
        res, per = mode.result, ("variables",)
        return xr.Dataset(
            {"x": (per, np.asarray(res.x, dtype=float)), "jac": (per, np.asarray(res.jac)),
             "fun": float(res.fun), "success": bool(res.success), "status": int(res.status),
             "message": str(res.message), "nit": int(res.get("nit", -1)),
             "nfev": int(res.get("nfev", -1)), "method": mode.polished or self.method},
            coords={"variables": _variable_names(self.fns, self.shapes)},
        )

    def laplace(self, mode: Mode, draws: int, random_seed) -> tuple | None:
        """The Laplace approximation at the mode of the unconstrained variables' density
        (``logp(jacobian=True)``) next to ``mode``: (``draws`` draws from it, the
        Gaussian's ``mean`` and ``covariance``), or None with a UserWarning where the
        Hessian there is not positive definite.

        That mode: L-BFGS-B from the MAP point (close to it: the two objectives differ
        by the log Jacobian, O(1) against a log-likelihood that grows with the data),
        then one Newton step with the difference Hessian, which is then taken at the
        mode as the approximation's precision."""
        fns, shapes = self.fns, self.shapes
        fun = _objective(fns, shapes, jacobian=True)
        with threadpool_limits(1, user_api="blas"), np.errstate(all="ignore"):
            value, grad = fun(mode.point)
            x = mode.point
            if np.isfinite(value) and x.size:
                res = minimize(fun, x, jac=True, method="L-BFGS-B",
                               options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 200 * x.size,
                                        "maxcor": LBFGS_MAXCOR})
                x = np.asarray(res.x, dtype=float)
            hess = difference_hessian(fun, x)
        chol, detail = positive_definite_factor(hess)
        if chol is None:
            warn(
                f"laplace=True: the Hessian of the negative log density of the unconstrained "
                f"variables at its mode is not positive definite{detail}: the mode sits on a "
                f"ridge or on the edge of the support, where a Gaussian approximation does "
                f"not exist. No Laplace draws were made; use cm.sample for the uncertainty.")
            return None
        # one Newton step to the mode, then draws x + L^-T z (covariance H^-1)
        if x.size:
            x = x - cho_solve((chol, True), fun(x)[1])
        z = np.random.default_rng(random_seed).standard_normal((draws, x.size))
        values = x + solve_triangular(chol, z.T, lower=True, trans="T").T
        to_constrained = fns.constrained()
        rows = [to_constrained(*_compiled.split_vector(v, shapes)) for v in values]
        post = {name: np.stack([np.asarray(r[k]) for r in rows])[None]
                for k, name in enumerate(fns.constrained_names())}
        laplace = group_dataset(fns.model, post, (D.CHAIN, D.DRAW))
        laplace.attrs.update(method="laplace", density="logp(jacobian=True), unconstrained",
                             log_density_at_mode=-float(fun(x)[0]), draws=draws)
        names = _variable_names(fns, shapes)
        gaussian = xr.Dataset(
            {"mean": (("variables",), x),
             "covariance": (("variables", "variables_"), inverse_from_factor(chol))},
            coords={"variables": names, "variables_": names},
        )
        return laplace, gaussian
