"""Maximum-likelihood Gaussian discriminant analysis with the 14 EDDA covariance
structures (Bensmail & Celeux 1996), classes known.

Each class g has a proportion tau_g, a mean mu_g and a covariance::

    Sigma_g = lambda_g D_g A_g D_g^T        (|A_g| = 1, D_g orthogonal)

whose volume lambda, shape A and orientation D are Equal or Variable across
classes, or the structure is axis-aligned (I), named as in mclust:

    EII  lambda I                 VII  lambda_g I
    EEI  lambda A                 VEI  lambda_g A            EVI  lambda A_g     VVI  lambda_g A_g
    EEE  lambda D A D^T           VEE  lambda_g D A D^T      EVE  lambda D A_g D^T
    VVE  lambda_g D A_g D^T       EEV  lambda D_g A D_g^T    VEV  lambda_g D_g A D_g^T
    EVV  lambda D_g A_g D_g^T     VVV  Sigma_g free

With the classes known there is no EM over labels: the proportions and means
are the class frequencies and class means, and every structure reduces to
minimising, over the structured covariances,

    F = sum_g [ n_g log|Sigma_g| + tr(W_g Sigma_g^{-1}) ]

with n_g the (weighted) class size and W_g the within-class scatter matrix.
Closed forms (Celeux & Govaert 1995) exist for EII, VII, EEI, EVI, VVI, EEE,
EEV, EVV and VVV; VEI, VEE and VEV alternate shape and volumes, and EVE and
VVE run Jacobi sweeps over a common orientation (meant for a few tens of
features at most; a UserWarning flags a fit stopped by ``max_iter``).
Conventions follow mclust's EDDA (``MclustDA(modelType="EDDA")``), checked
against mclust 6.0 on iris: ``loglik`` is the mixture log-likelihood at the
parameters that maximise the classification log-likelihood
``loglik_complete``, ``df`` leaves out the proportions, and ``bic = 2 loglik -
df log n``. DEVELOPING.md ("EDDA") gives the algorithms and where mclust
itself stops short.

Singular covariances (a class with fewer points than features under VVV, a
feature constant within a class under VVI, ...) raise :class:`EddaSingularError`
(a ``ValueError``) naming the class. ``shrinkage=kappa > 0`` cures them: each
class gets kappa pseudo-observations with scatter ``kappa * S`` (a
conjugate-style prior, see :func:`fit_edda`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.special import logsumexp

from crowd_models._text import warn

__all__ = ["STRUCTURES", "EddaFit", "EddaSingularError", "fit_edda", "select_edda", "n_cov_params"]

STRUCTURES: tuple[str, ...] = (
    "EII", "VII", "EEI", "VEI", "EVI", "VVI", "EEE",
    "VEE", "EVE", "VVE", "EEV", "VEV", "EVV", "VVV",
)
"""The 14 EDDA covariance structures, in mclust's order."""

RCOND_MIN = 1e-10
"""A fitted covariance whose smallest/largest eigenvalue ratio falls below this
is treated as singular."""
_ROW_SUM_TOL = 1e-6
MULTISTART_MAX_D = 20
"""EVE/VVE start from the pooled scatter's eigenvectors, and also from each class's
when there are at most this many features."""


class EddaSingularError(ValueError):
    """The maximum-likelihood covariance is singular (or the likelihood unbounded)
    for this structure and data. A ``ValueError``; ``select_edda`` records it as
    the reason a structure failed."""


# --------------------------------------------------------------------- result


@dataclass(frozen=True, eq=False)
class EddaFit:
    """A fitted Gaussian class-conditional model (see :func:`fit_edda`)."""

    covariance: str
    classes: np.ndarray
    proportions: np.ndarray  # (G,)
    means: np.ndarray  # (G, d)
    covariances: np.ndarray  # (G, d, d)
    loglik: float
    """mclust's EDDA log-likelihood: sum_i log sum_g tau_g N(x_i | mu_g, Sigma_g)."""
    loglik_complete: float
    """The maximised (classification) log-likelihood sum_i sum_g z_ig log(tau_g N(x_i | g))."""
    df: int
    bic: float
    n: int
    converged: bool
    n_iter: int
    feature_names: tuple | None = None
    shrinkage: float = 0.0
    objective: float = field(default=np.nan, repr=False)
    """The minimised F (penalised when shrinkage > 0); for diagnostics."""

    def __repr__(self) -> str:
        return (
            f"EddaFit(covariance={self.covariance!r}, classes={list(self.classes)!r}, "
            f"n={self.n}, d={self.n_features}, loglik={self.loglik:.6g}, df={self.df}, "
            f"bic={self.bic:.6g}, converged={self.converged}, n_iter={self.n_iter})"
        )

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def n_features(self) -> int:
        return self.means.shape[1]

    def log_density(self, X) -> np.ndarray:
        """(m, G) array of log(tau_g N(x | mu_g, Sigma_g))."""
        X = _as_features(X, name="X")[0]
        if X.shape[1] != self.n_features:
            raise ValueError(
                f"X has {X.shape[1]} features, the fit was made with {self.n_features}."
            )
        return _log_density(X, self.proportions, self.means, self.covariances)

    def predict_proba(self, X) -> np.ndarray:
        """(m, G) posterior class probabilities, columns in ``classes`` order."""
        ld = self.log_density(X)
        return np.exp(ld - logsumexp(ld, axis=1, keepdims=True))

    def predict(self, X) -> np.ndarray:
        """MAP class labels (elements of ``classes``)."""
        return self.classes[np.argmax(self.log_density(X), axis=1)]

    def decompose(self):
        """(volume (G,), shape (G, d) decreasing with product 1, orientation (G, d, d))
        of each Sigma_g = volume D diag(shape) D^T, from its eigendecomposition."""
        w, v = np.linalg.eigh(self.covariances)
        w, v = w[:, ::-1], v[:, :, ::-1]
        vol = np.exp(np.mean(np.log(w), axis=1))
        return vol, w / vol[:, None], v


# ----------------------------------------------------------------- validation


def _as_features(X, name="X"):
    names = None
    if isinstance(X, pd.DataFrame):
        names = tuple(X.columns)
        X = X.to_numpy()
    elif isinstance(X, pd.Series):
        names = (X.name,)
        X = X.to_numpy()[:, None]
    try:
        X = np.asarray(X, dtype=float)
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"{name} must be a numeric (n, d) array or DataFrame; could not convert to float "
            f"({err}). Encode categorical features numerically first."
        ) from None
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n, d); got an array with shape {X.shape}.")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {X.shape}).")
    bad = ~np.isfinite(X)
    if bad.any():
        rows, cols = np.nonzero(bad)
        feat = [names[c] if names else int(c) for c in np.unique(cols)]
        raise ValueError(
            f"{name} contains {bad.sum()} NaN/inf value(s) (first at row {rows[0]}; "
            f"features {feat[:10]}). Impute or drop those rows before fitting."
        )
    return X, names


def _class_weights(y, weights, classes, n):
    """Return (classes array, Z (n, G)) from hard labels y or soft weights."""
    if weights is not None:
        if y is not None:
            raise TypeError("give either hard labels y or soft weights=, not both (pass y=None).")
        return _soft_weights(weights, classes, n)
    return _hard_weights(y, classes, n)


def _soft_weights(weights, classes, n):
    """(classes array, Z) from an (n, G) array or DataFrame of class memberships."""
    if isinstance(weights, pd.DataFrame):
        if classes is None:
            classes = list(weights.columns)
        weights = weights.to_numpy()
    try:
        Z = np.asarray(weights, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(
            "weights must be a numeric (n, G) array of class memberships."
        ) from None
    if Z.ndim != 2 or Z.shape[0] != n:
        raise ValueError(
            f"weights must have shape (n, G) = ({n}, G) to match X; got {Z.shape}."
        )
    if not np.all(np.isfinite(Z)):
        raise ValueError("weights contain NaN/inf; each row must be class probabilities.")
    if (Z < 0).any():
        raise ValueError("weights must be nonnegative; found negative memberships.")
    s = Z.sum(axis=1)
    off = np.abs(s - 1.0) > _ROW_SUM_TOL
    if off.any():
        i = int(np.argmax(off))
        raise ValueError(
            f"each row of weights must sum to 1 (soft class memberships); {off.sum()} "
            f"row(s) do not, e.g. row {i} sums to {s[i]:.6g}. Normalise with "
            f"weights / weights.sum(axis=1, keepdims=True)."
        )
    if classes is None:
        classes = np.arange(Z.shape[1])
    classes = _as_class_array(classes)
    if len(classes) != Z.shape[1]:
        raise ValueError(
            f"classes has {len(classes)} entries but weights has {Z.shape[1]} columns."
        )
    return classes, Z


def _hard_weights(y, classes, n):
    """(classes array, one-hot Z) from n class labels."""
    if y is None:
        raise TypeError("give class labels y (length n) or soft weights= (n, G).")
    if isinstance(y, pd.Series | pd.Index | pd.Categorical):
        if classes is None and isinstance(getattr(y, "dtype", None), pd.CategoricalDtype):
            classes = list(y.cat.categories if isinstance(y, pd.Series) else y.categories)
        y = np.asarray(y, dtype=object)
    else:
        y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D (one label per row of X); got shape {y.shape}.")
    if len(y) != n:
        raise ValueError(f"y has {len(y)} labels but X has {n} rows; they must match.")
    missing = pd.isna(y)
    if np.any(missing):
        raise ValueError(
            f"y has {int(np.sum(missing))} missing label(s) (first at row "
            f"{int(np.argmax(missing))}); drop those rows or give soft weights= instead."
        )
    if classes is None:
        uniq = pd.unique(pd.Series(y, dtype=object))
        try:
            classes = sorted(uniq)
        except TypeError:
            raise TypeError(
                f"cannot sort the labels {list(uniq)[:10]} (mixed types); give classes= "
                f"to fix the class order."
            ) from None
    classes = _as_class_array(classes)
    index = {c: k for k, c in enumerate(classes)}
    if len(index) != len(classes):
        raise ValueError(f"classes has duplicate entries: {list(classes)}.")
    try:
        codes = np.array([index.get(v, -1) for v in y])
    except TypeError:
        raise TypeError("labels in y must be hashable.") from None
    if (codes < 0).any():
        unknown = pd.unique(pd.Series(y[codes < 0], dtype=object))
        raise ValueError(
            f"y contains label(s) {list(unknown)[:10]} not in classes={list(classes)}."
        )
    Z = np.zeros((n, len(classes)))
    Z[np.arange(n), codes] = 1.0
    return classes, Z


def _as_class_array(classes):
    arr = np.empty(len(classes), dtype=object)
    arr[:] = list(classes)
    try:  # keep a numeric/str dtype where it is homogeneous
        typed = np.asarray(list(classes))
        if typed.ndim == 1 and typed.dtype != object and len(typed) == len(arr):
            return typed
    except (TypeError, ValueError):
        pass
    return arr


def _check_structure(covariance):
    if not isinstance(covariance, str) or covariance.upper() not in STRUCTURES:
        raise ValueError(
            f"unknown covariance structure {covariance!r}; valid names are "
            f"{', '.join(STRUCTURES)} (EEE = LDA, VVV = QDA)."
        )
    return covariance.upper()


# ------------------------------------------------------------------- counting


def n_cov_params(covariance: str, d: int, G: int) -> int:
    """Free covariance parameters of a structure (mclust's ``nVarParams``).

    Examples
    --------
    >>> from crowd_models.models import edda
    >>> edda.n_cov_params("VVV", d=5, G=3)  # three full 5 x 5 covariances: 3 * 15
    """
    covariance = _check_structure(covariance)
    rot = d * (d - 1) // 2
    return {
        "EII": 1,
        "VII": G,
        "EEI": d,
        "VEI": G + (d - 1),
        "EVI": 1 + G * (d - 1),
        "VVI": G * d,
        "EEE": d * (d + 1) // 2,
        "VEE": G + d * (d + 1) // 2 - 1,
        "EVE": 1 + G * (d - 1) + rot,
        "VVE": G * d + rot,
        "EEV": 1 + (d - 1) + G * rot,
        "VEV": G + (d - 1) + G * rot,
        "EVV": 1 + G * (d - 1) + G * rot,
        "VVV": G * d * (d + 1) // 2,
    }[covariance]


# --------------------------------------------------------------------- public


def fit_edda(
    X,
    y=None,
    covariance: str = "VEV",
    *,
    classes: Sequence[Hashable] | None = None,
    weights=None,
    shrinkage: float = 0.0,
    shrinkage_target=None,
    tol: float = 1e-10,
    max_iter: int = 1000,
) -> EddaFit:
    """Fit a Gaussian class-conditional model with a structured covariance.

    Parameters
    ----------
    X : array (n, d) or pandas.DataFrame
        Numeric features (a 1-D array is one feature).
    y : array (n,) or None, optional
        Class labels, any hashable; or None when ``weights`` is given.
    covariance : str, optional
        One of :data:`STRUCTURES` (case-insensitive).
    classes : sequence or None, optional
        The class order (also fixes classes that must be present); default the sorted
        unique labels, or ``weights``' DataFrame columns / ``range(G)``.
    weights : array (n, G), pandas.DataFrame or None, optional
        Nonnegative soft class memberships, rows summing to 1, used instead of hard
        labels (hard labels are the one-hot case). The proportions, means and scatters
        are then weighted, and the maximised ``loglik_complete`` is
        ``sum_i sum_g z_ig log(tau_g N(x_i | mu_g, Sigma_g))`` (``loglik`` stays the
        mixture log-likelihood).
    shrinkage : float, optional
        Kappa >= 0. With kappa > 0 every class receives kappa
        pseudo-observations with scatter ``kappa * S`` in the covariance step:
        the estimate maximises the log-likelihood plus, per class,
        ``-kappa/2 (log|Sigma_g| + tr(S Sigma_g^{-1}))`` (the log-density of an
        inverse-Wishart prior with scale kappa*S and kappa-d-1 degrees of freedom,
        restricted to the structure; means and proportions stay unpenalised).
        VVV then gives ``(W_g + kappa S) / (n_g + kappa)``. Any kappa > 0 makes every
        covariance nonsingular, curing small classes. ``loglik``,
        ``loglik_complete`` and ``bic`` are unpenalised, evaluated at that estimate.
    shrinkage_target : array (d, d) or None, optional
        S, a positive-definite matrix; default ``diag(var(X)) / G**(2/d)`` (mclust's
        default prior scale).
    tol, max_iter
        The iterative structures (VEI, VEE, EVE, VVE, VEV) stop when no parameter moves
        by more than ``tol`` (relative change of volumes and shapes, rotation angle of
        the orientation) in a sweep, or after ``max_iter`` sweeps (then ``converged`` is
        False).

    Raises
    ------
    ValueError
        NaN/inf features, label/row count mismatch, bad weights, unknown structure, an
        empty class; :class:`EddaSingularError` (a ValueError) when the covariance is
        singular for this structure (names the class).
    TypeError
        Non-numeric features, both or neither of y and weights.

    Examples
    --------
    >>> from crowd_models.models import edda, stacked_gaussian
    >>> ann = stacked_gaussian.simulate(1, n_items=200, rng=0)
    >>> fit = edda.fit_edda(ann.features, ann.gold_series(), covariance="VEV")
    >>> fit.predict_proba(ann.features)[:3]
    """
    covariance = _check_structure(covariance)
    X, names = _as_features(X)
    n, d = X.shape
    classes, Z = _class_weights(y, weights, classes, n)
    G = Z.shape[1]
    if not (isinstance(tol, float | int) and tol > 0):
        raise ValueError(f"tol must be a positive number; got {tol!r}.")
    if not (isinstance(max_iter, int | np.integer) and max_iter >= 1):
        raise ValueError(f"max_iter must be a positive integer; got {max_iter!r}.")

    n_g = Z.sum(axis=0)
    empty = np.flatnonzero(n_g <= 0)
    if empty.size:
        raise ValueError(
            f"class(es) [{', '.join(_label(classes[k]) for k in empty)}] have no observations; "
            f"drop them from "
            f"classes= (or the weights' columns), a Gaussian needs data to estimate its mean."
        )
    means = (Z.T @ X) / n_g[:, None]
    W = np.empty((G, d, d))
    for g in range(G):
        R = X - means[g]
        W[g] = (R * Z[:, g, None]).T @ R
        W[g] = 0.5 * (W[g] + W[g].T)

    shrinkage = float(shrinkage)
    if not np.isfinite(shrinkage) or shrinkage < 0:
        raise ValueError(f"shrinkage must be a finite number >= 0; got {shrinkage!r}.")
    Wfit, nfit = W, n_g
    if shrinkage > 0:
        S = _shrinkage_target(X, G, shrinkage_target, names)
        Wfit = W + shrinkage * S[None]
        nfit = n_g + shrinkage

    ctx = _Context(covariance, classes, names, counts=(Z > 0).sum(axis=0),
                   shrunk=shrinkage > 0)
    Sigma, objective, converged, n_iter = _fit_covariance(covariance, Wfit, nfit, tol,
                                                          max_iter, ctx)
    _check_covariances(Sigma, ctx, d)
    if not converged:
        warn(
            f"{covariance}: the iterative fit did not converge in max_iter={max_iter} sweeps "
            f"(fit.converged is False); increase max_iter or use a closed-form structure.")

    tau = n_g / n_g.sum()
    ld = _log_density(X, tau, means, Sigma)
    loglik = float(np.sum(logsumexp(ld, axis=1)))
    loglik_complete = float(np.sum(Z * ld))
    df = G * d + n_cov_params(covariance, d, G)
    bic = 2.0 * loglik - df * np.log(n)
    return EddaFit(
        covariance=covariance, classes=classes, proportions=tau, means=means,
        covariances=Sigma, loglik=loglik, loglik_complete=loglik_complete, df=int(df),
        bic=float(bic), n=n,
        converged=bool(converged), n_iter=int(n_iter), feature_names=names,
        shrinkage=shrinkage, objective=float(objective),
    )


def select_edda(
    X,
    y=None,
    structures: Sequence[str] = STRUCTURES,
    **kwargs,
) -> tuple[EddaFit, pd.DataFrame]:
    """Fit each structure and return (best fit by BIC, table).

    The table is indexed by structure with columns loglik, df, bic, converged,
    n_iter and reason; a structure whose covariance is singular gets NaN and the
    reason. Keyword arguments go to :func:`fit_edda`. Input errors (NaN features,
    bad labels) are raised, not tabulated.

    Examples
    --------
    >>> from crowd_models.models import edda, stacked_gaussian
    >>> ann = stacked_gaussian.simulate(1, n_items=200, rng=0)
    >>> best, table = edda.select_edda(ann.features, ann.gold_series())
    >>> table.sort_values("bic", ascending=False).head()
    """
    if isinstance(structures, str):
        structures = [structures]
    structures = [_check_structure(s) for s in structures]
    if not structures:
        raise ValueError(f"structures is empty; choose from {', '.join(STRUCTURES)}.")
    rows, best = [], None
    for s in structures:
        try:
            fit = fit_edda(X, y, s, **kwargs)
        except EddaSingularError as err:
            rows.append(dict(covariance=s, loglik=np.nan, df=np.nan, bic=np.nan,
                             converged=False, n_iter=0, reason=str(err)))
            continue
        rows.append(dict(covariance=s, loglik=fit.loglik, df=fit.df, bic=fit.bic,
                         converged=fit.converged, n_iter=fit.n_iter, reason=""))
        if best is None or fit.bic > best.bic:
            best = fit
    table = pd.DataFrame(rows).set_index("covariance")
    if best is None:
        lines = [f"  {s}: {r}" for s, r in table["reason"].items()]
        raise EddaSingularError("every structure failed:\n" + "\n".join(lines))
    return best, table


# ------------------------------------------------------------------ internals


@dataclass
class _Context:
    covariance: str
    classes: np.ndarray
    names: tuple | None
    counts: np.ndarray  # rows with positive weight, per class
    shrunk: bool = False

    def singular(self, detail: str, g: int | None = None) -> EddaSingularError:
        who = ("the pooled within-class scatter" if g is None
               else f"class {_label(self.classes[g])}")
        return EddaSingularError(
            f"{self.covariance}: {who}: {detail}, so the maximum-likelihood covariance is "
            f"singular. Use a simpler structure (e.g. EEE, EEI or EII share one covariance "
            f"across classes), merge or drop the class, or regularise with shrinkage=1.0 "
            f"(a conjugate-style prior; see fit_edda)."
        )

    def too_few(self, g, d):
        """Raise if class g has fewer than d + 1 points (its own scatter is singular)."""
        if not self.shrunk and self.counts[g] < d + 1:
            raise self.singular(
                f"it has {self.counts[g]} observations for {d} features (at least {d + 1} "
                f"needed for a class-specific covariance)", g)

    def feature(self, j):
        return self.names[j] if self.names else int(j)


def _label(c) -> str:
    return repr(c.item() if isinstance(c, np.generic) else c)


def _shrinkage_target(X, G, target, names):
    d = X.shape[1]
    if target is None:
        var = X.var(axis=0)
        if (var <= 0).any():
            bad = [names[j] if names else int(j) for j in np.flatnonzero(var <= 0)]
            raise ValueError(
                f"feature(s) {bad} are constant over all rows; shrinkage cannot regularise "
                f"them. Drop them."
            )
        return np.diag(var) / G ** (2.0 / d)
    S = np.asarray(target, dtype=float)
    if S.shape != (d, d) or not np.all(np.isfinite(S)) or not np.allclose(S, S.T):
        raise ValueError(f"shrinkage_target must be a finite symmetric ({d}, {d}) matrix.")
    if np.linalg.eigvalsh(S)[0] <= 0:
        raise ValueError("shrinkage_target must be positive definite.")
    return S


def _log_density(X, tau, means, Sigma):
    m, d = X.shape
    out = np.empty((m, len(tau)))
    with np.errstate(divide="ignore"):
        logtau = np.log(tau)
    for g in range(len(tau)):
        L = np.linalg.cholesky(Sigma[g])
        R = np.linalg.solve(L, (X - means[g]).T)
        logdet = 2.0 * np.sum(np.log(np.diag(L)))
        out[:, g] = logtau[g] - 0.5 * (d * np.log(2 * np.pi) + logdet + np.sum(R * R, axis=0))
    return out


def _check_covariances(Sigma, ctx, d):
    for g in range(Sigma.shape[0]):
        if not np.all(np.isfinite(Sigma[g])):
            raise ctx.singular("the fit produced non-finite values", g)
        w = np.linalg.eigvalsh(Sigma[g])
        if w[-1] <= 0 or w[0] <= RCOND_MIN * w[-1]:
            detail = f"the fitted covariance has condition number {w[-1] / max(w[0], 1e-300):.3g}"
            if ctx.counts[g] < d + 1:
                detail += f" (the class has {ctx.counts[g]} observations for {d} features)"
            raise ctx.singular(detail, g)


def _objective(Sigma, W, n):
    F = 0.0
    for g in range(len(n)):
        sign, logdet = np.linalg.slogdet(Sigma[g])
        F += n[g] * logdet + np.trace(np.linalg.solve(Sigma[g], W[g]))
    return F


def _geomean(v, axis=-1):
    return np.exp(np.mean(np.log(v), axis=axis))


def _positive(v, what, ctx, per_class, scale=0.0):
    """Raise a singular error if v (G, ...) or v (...) has entries <= RCOND_MIN * scale
    (scale: the same quantity pooled over classes, so rounding residue counts as zero)."""
    v = np.asarray(v)
    bad = ~(v > RCOND_MIN * np.asarray(scale))
    if not bad.any():
        return
    if per_class:
        g = int(np.flatnonzero(bad.reshape(bad.shape[0], -1).any(axis=1))[0])
        if v.ndim == 2:
            j = int(np.flatnonzero(bad[g])[0])
            raise ctx.singular(f"{what} of feature {_label(ctx.feature(j))} is zero", g)
        raise ctx.singular(f"{what} is zero (all its points coincide)", g)
    if v.ndim == 1 and v.size > 1:
        j = int(np.flatnonzero(bad)[0])
        raise ctx.singular(f"{what} of feature {_label(ctx.feature(j))} is zero in every class")
    raise ctx.singular(f"{what} is zero")


def _rank_check(M, what, ctx, g=None):
    w = np.linalg.eigvalsh(M)
    if w[-1] <= 0 or w[0] <= RCOND_MIN * w[-1]:
        raise ctx.singular(f"{what} is rank deficient (features collinear or constant)", g)


def _fit_covariance(name, W, n, tol, max_iter, ctx):
    """Minimise F = sum_g n_g log|Sigma_g| + tr(W_g Sigma_g^-1) under a structure.

    Returns (Sigma (G, d, d), F, converged, n_iter)."""
    G, d, _ = W.shape
    N = n.sum()
    eye = np.eye(d)
    diagW = np.einsum("gii->gi", W)  # (G, d)
    trW = diagW.sum(axis=1)
    converged, n_iter = True, 0

    if name == "EII":
        lam = trW.sum() / (N * d)
        _positive(lam, "the total within-class variance", ctx, False)
        Sigma = np.broadcast_to(lam * eye, (G, d, d)).copy()
    elif name == "VII":
        _positive(trW, "the within-class variance", ctx, True, trW.sum())
        Sigma = (trW / (n * d))[:, None, None] * eye
    elif name == "EEI":
        s = diagW.sum(axis=0) / N
        _positive(s, "the pooled within-class variance", ctx, False, s.max())
        Sigma = np.broadcast_to(np.diag(s), (G, d, d)).copy()
    elif name == "VVI":
        _positive(diagW, "the within-class variance", ctx, True, diagW.sum(axis=0))
        Sigma = np.stack([np.diag(w / ng) for w, ng in zip(diagW, n, strict=True)])
    elif name == "EVI":
        _positive(diagW, "the within-class variance", ctx, True, diagW.sum(axis=0))
        gm = _geomean(diagW)  # |diag W_g|^(1/d)
        lam = gm.sum() / N
        Sigma = np.stack([np.diag(lam * w / m) for w, m in zip(diagW, gm, strict=True)])
    elif name == "EEE":
        Wp = W.sum(axis=0)
        _rank_check(Wp, "the pooled within-class scatter", ctx)
        Sigma = np.broadcast_to(Wp / N, (G, d, d)).copy()
    elif name == "VVV":
        for g in range(G):
            ctx.too_few(g, d)
            _rank_check(W[g], "its scatter matrix", ctx, g)
        Sigma = W / n[:, None, None]
    elif name == "EVV":
        for g in range(G):
            ctx.too_few(g, d)
            _rank_check(W[g], "its scatter matrix", ctx, g)
        logdet = np.linalg.slogdet(W)[1]
        gm = np.exp(logdet / d)  # |W_g|^(1/d)
        lam = gm.sum() / N
        Sigma = lam * W / gm[:, None, None]
    elif name == "EEV":
        omega, vecs = _eig_desc(W)
        a = omega.sum(axis=0)
        _positive(a[-1:], "the smallest eigenvalue summed over classes", ctx, False, a[0])
        lam = _geomean(a) / N  # |sum Omega_g|^(1/d) / N
        A = a / _geomean(a)
        Sigma = np.einsum("gij,j,gkj->gik", vecs, lam * A, vecs)
    elif name in ("VEI", "VEV"):
        if name == "VEI":
            w, vecs = diagW, None
        else:
            w, vecs = _eig_desc(W)
            w = np.clip(w, 0.0, None)
        _positive(w.sum(axis=1), "the within-class variance", ctx, True, trW.sum())
        lam, A, F, converged, n_iter = _common_shape_vector(w, n, tol, max_iter, ctx)
        if vecs is None:
            Sigma = np.stack([np.diag(lg * A) for lg in lam])
        else:
            Sigma = np.einsum("gij,gj,gkj->gik", vecs, lam[:, None] * A, vecs)
    elif name == "VEE":
        _positive(trW, "the within-class variance", ctx, True, trW.sum())
        _rank_check(W.sum(axis=0), "the pooled within-class scatter", ctx)
        lam, C, F, converged, n_iter = _common_shape_matrix(W, n, tol, max_iter, ctx)
        Sigma = lam[:, None, None] * C
    elif name in ("EVE", "VVE"):
        # Each class's scatter must be nonsingular: VVE's likelihood is unbounded otherwise
        # (a common axis in the class's null space), and EVE's optimum then sits on the
        # singular boundary; mclust refuses both cases too.
        for g in range(G):
            ctx.too_few(g, d)
            _rank_check(W[g], "its scatter matrix", ctx, g)
        Sigma, F, converged, n_iter = _common_orientation(name, W, n, tol, max_iter, ctx)
    else:  # pragma: no cover
        raise AssertionError(name)
    Sigma = 0.5 * (Sigma + np.swapaxes(Sigma, 1, 2))
    F = _objective(Sigma, W, n) if np.all(np.isfinite(Sigma)) else np.nan
    return Sigma, F, converged, n_iter


def _eig_desc(W):
    w, v = np.linalg.eigh(W)
    return w[:, ::-1].copy(), v[:, :, ::-1].copy()


# The iterative structures stop when the parameters stop moving (relative change,
# or rotation angle, at most tol): the reported mixture log-likelihood is not
# stationary at the optimum, so it is only as accurate as the parameters.


def _common_shape_vector(w, n, tol, max_iter, ctx):
    """VEI/VEV: minimise sum_g [n_g d log lam_g + sum_k w_gk / (lam_g a_k)], prod a = 1."""
    G, d = w.shape
    lam = w.sum(axis=1) / (n * d)
    A = np.ones(d)
    for it in range(1, max_iter + 1):
        a = (w / lam[:, None]).sum(axis=0)
        _positive(a, "the within-class variance", ctx, False, a.max())
        A_new = a / _geomean(a)
        lam_new = (w / A_new).sum(axis=1) / (n * d)
        delta = max(np.max(np.abs(np.log(A_new / A))), np.max(np.abs(np.log(lam_new / lam))))
        lam, A = lam_new, A_new
        if delta <= tol:
            return lam, A, None, True, it
    return lam, A, None, False, max_iter


def _common_shape_matrix(W, n, tol, max_iter, ctx):
    """VEE: minimise sum_g [n_g d log lam_g + tr(W_g C^-1) / lam_g], |C| = 1."""
    G, d, _ = W.shape
    lam = np.einsum("gii->g", W) / (n * d)
    C = np.eye(d)
    for it in range(1, max_iter + 1):
        M = (W / lam[:, None, None]).sum(axis=0)
        _rank_check(M, "the pooled within-class scatter", ctx)
        C_new = M / np.exp(np.linalg.slogdet(M)[1] / d)
        lam_new = np.einsum("gij,ji->g", W, np.linalg.inv(C_new)) / (n * d)
        delta = max(np.max(np.abs(C_new - C)) / np.max(np.abs(C_new)),
                    np.max(np.abs(np.log(lam_new / lam))))
        lam, C = lam_new, C_new
        if delta <= tol:
            return lam, C, None, True, it
    return lam, C, None, False, max_iter


def _common_orientation(name, W, n, tol, max_iter, ctx):
    """EVE/VVE: Sigma_g = D diag(s_g) D^T with common orthogonal D.

    VVE: s_g free, s_gk = (D^T W_g D)_kk / n_g.
    EVE: s_g = lam A_g with |A_g| = 1, A_g ∝ diag(D^T W_g D), lam = sum_g |diag|^(1/d) / N.
    Jacobi sweeps over column pairs, each rotation angle exact for fixed s, then s refreshed.
    Started from the eigenvectors of the pooled scatter and of each class scatter."""
    G, d, _ = W.shape
    starts = [np.linalg.eigh(W.sum(axis=0))[1]]
    if 1 < d <= MULTISTART_MAX_D:
        starts += [np.linalg.eigh(W[g])[1] for g in range(G)]
    best = None
    for D0 in starts:
        res = _jacobi_orientation(name, W, n, D0, tol, max_iter, ctx)
        if res is not None and (best is None or res[1] < best[1] - 1e-12 * abs(res[1])):
            best = res
    if best is None:
        _positive(np.einsum("gii->g", W), "the within-class variance", ctx, True)
        raise ctx.singular("a direction with zero within-class variance was found", None)
    D, F, converged, n_iter, s = best
    Sigma = np.einsum("ij,gj,kj->gik", D, s, D)
    return Sigma, F, converged, n_iter


def _orientation_scales(name, diagM, n):
    """Eigenvalues s (G, d) given diag(D^T W_g D) = diagM (G, d)."""
    if name == "VVE":
        return diagM / n[:, None]
    gm = _geomean(diagM)
    lam = gm.sum() / n.sum()
    return lam * diagM / gm[:, None]


def _round_robin(d):
    """Pairs of column indices in d - 1 (d odd: d) rounds of disjoint pairs covering
    every pair once (a round-robin tournament schedule)."""
    players = list(range(d)) + ([-1] if d % 2 else [])
    m = len(players)
    rounds = []
    for _ in range(m - 1):
        pairs = [(players[i], players[m - 1 - i]) for i in range(m // 2)]
        pairs = [(min(a, b), max(a, b)) for a, b in pairs if a >= 0 and b >= 0]
        if pairs:
            rounds.append((np.array([a for a, _ in pairs], dtype=int),
                           np.array([b for _, b in pairs], dtype=int)))
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


def _jacobi_orientation(name, W, n, D0, tol, max_iter, ctx):
    """Jacobi sweeps for the common orientation D. Each round rotates disjoint column
    pairs (j, k) of D, each by the angle minimising F with the eigenvalues s fixed
    (F restricted to the pair is a + alpha cos 2t + beta sin 2t); the eigenvalues are
    refreshed after each round. Disjoint pairs touch disjoint columns, so a round's
    rotations are exact together. Stops when no Sigma_g moves by more than tol
    (relative Frobenius norm) in a sweep: Sigma is identified even where D is not."""
    G, d, _ = W.shape
    D = D0.copy()
    M = D.T @ W @ D  # D^T W_g D
    diagM = np.einsum("gii->gi", M)
    if not np.all(diagM > 0):
        return None
    s = _orientation_scales(name, diagM, n)
    rounds = _round_robin(d)
    converged, n_iter = False, 0
    Sigma = (D * s[:, None, :]) @ D.T
    while n_iter < max_iter:
        n_iter += 1
        for J, K in rounds:
            diff = 1.0 / s[:, J] - 1.0 / s[:, K]  # (G, m)
            alpha = 0.5 * np.sum(diff * (M[:, J, J] - M[:, K, K]), axis=0)
            beta = np.sum(diff * M[:, J, K], axis=0)
            half = 0.5 * np.arctan2(-beta, -alpha)
            c, sn = np.cos(half), np.sin(half)
            DJ, DK = D[:, J], D[:, K]
            D[:, J], D[:, K] = c * DJ + sn * DK, -sn * DJ + c * DK
            MJ, MK = M[:, :, J], M[:, :, K]
            M[:, :, J], M[:, :, K] = c * MJ + sn * MK, -sn * MJ + c * MK
            MJ, MK = M[:, J, :], M[:, K, :]
            M[:, J, :], M[:, K, :] = c[:, None] * MJ + sn[:, None] * MK, \
                -sn[:, None] * MJ + c[:, None] * MK
            diagM = np.einsum("gii->gi", M)
            if not np.all(diagM > 0):
                return None
            s = _orientation_scales(name, diagM, n)
        # re-orthonormalise against drift, refresh M from scratch
        u, _, vt = np.linalg.svd(D)
        D = u @ vt
        M = D.T @ W @ D
        diagM = np.einsum("gii->gi", M)
        if not np.all(diagM > 0):
            return None
        s = _orientation_scales(name, diagM, n)
        Sigma_new = (D * s[:, None, :]) @ D.T
        change = np.linalg.norm(Sigma_new - Sigma, axis=(1, 2)) / np.linalg.norm(Sigma, axis=(1, 2))
        Sigma = Sigma_new
        if np.max(change) <= tol:
            converged = True
            break
    F = np.sum(n[:, None] * np.log(s)) + np.sum(diagM / s)
    return D, F, converged, n_iter, s
