"""Shared fixtures. PyTensor compiles each new graph once (10-35 s cold), so the
models are built once per session and shared."""

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

RADIOLOGISTS = dict(
    sensitivity=[0.90, 0.80, 0.57, 0.60, 0.55],
    specificity=[0.95, 0.85, 0.62, 0.65, 0.58],
)
"""Raykar et al. (2009) sec. 7.1: five simulated radiologists."""


@pytest.fixture(autouse=True, scope="session")
def compiled_fits_only():
    """Every fit uses the compiled functions (``_compiled.QUICK_FITS = 0``), so that a
    test's compile counts and repeated fits do not depend on which structures an
    earlier run left on disk; tests/test_compiled.py tests the quick first fits."""
    from crowd_models import _compiled

    saved, _compiled.QUICK_FITS = _compiled.QUICK_FITS, 0
    yield
    _compiled.QUICK_FITS = saved


@pytest.fixture
def rng():
    return np.random.default_rng(20090614)


@pytest.fixture(scope="session")
def sim_features():
    from crowd_models.models import two_coin

    return two_coin.simulate(**RADIOLOGISTS, n_items=2000, n_features=5, intercept=-0.5,
                             rng=np.random.default_rng(1))


@pytest.fixture(scope="session")
def sim_plain():
    from crowd_models.models import two_coin

    return two_coin.simulate(**RADIOLOGISTS, n_items=2000, prevalence=0.3,
                             rng=np.random.default_rng(2))


@pytest.fixture(scope="session")
def rte():
    import crowd_models as cm

    return cm.datasets.load_rte()


@pytest.fixture(scope="session")
def rte_model(rte):
    from crowd_models.models import two_coin

    return two_coin.build_model(rte)


@pytest.fixture(scope="session")
def plain_model(sim_plain):
    from crowd_models.models import two_coin

    return two_coin.build_model(sim_plain)


def _measures(table):
    return [c[:-len("_mean")] for c in table.columns if c.endswith("_mean")]


def assert_estimates_inside_intervals(table):
    """Each finite interval holds its estimate; returns how many were checked."""
    checked = 0
    for m in _measures(table):
        mean, lo, hi = (table[f"{m}_{s}"].to_numpy() for s in ("mean", "lower", "upper"))
        finite = np.isfinite(lo) & np.isfinite(hi)
        bad = finite & ~((lo <= mean) & (mean <= hi))
        assert not bad.any(), (f"{m}: {bad.sum()} estimates outside their interval, e.g. "
                               f"{mean[bad][0]:.3f} [{lo[bad][0]:.3f}, {hi[bad][0]:.3f}]")
        checked += int(finite.sum())
    return checked


def beta_sum_quantiles(a, b, weights, probs, step=1e-4):
    """Quantiles ``probs`` of ``sum_t weights[t] X_t``, X_t ~ Beta(a[t], b[t])
    independent, by exact enumeration on a grid: each term rounded to the nearest
    multiple of ``step`` (its probabilities from the Beta's CDF), the terms'
    distributions convolved. Off the exact quantiles by at most
    ``(len(a) / 2 + 1) * step``.
    """
    from scipy import signal, stats

    pmf = np.ones(1)
    for a_t, b_t, w_t in zip(a, b, weights, strict=True):
        if w_t == 0:
            continue
        points = np.arange(int(np.ceil(w_t / step)) + 2) - 0.5
        cdf = stats.beta.cdf(np.clip(points * step / w_t, 0, 1), a_t, b_t)
        pmf = np.clip(signal.fftconvolve(pmf, np.diff(cdf)), 0, None)  # FFT: tiny negatives
    return np.searchsorted(np.cumsum(pmf) / pmf.sum(), probs) * step


@pytest.fixture
def count_compiles(monkeypatch):
    """Counts every PyTensor compilation (each FunctionMaker) made in the test."""
    import pytensor.compile.maker

    calls = []
    original = pytensor.compile.maker.FunctionMaker.__init__

    def counting(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pytensor.compile.maker.FunctionMaker, "__init__", counting)
    return calls


def assert_nuts_recovers(model, truth, *, min_cover, draws=500, seed=1):
    """NUTS recovery on a small simulated design (slow tier): four chains from
    jittered MAP starts; every free variable's rank-normalised r-hat <= 1.01, no
    divergence, and at least ``min_cover`` (a share) of the true values in
    ``truth`` (name -> array of that variable's dims) inside their central 90%
    intervals. PyMC's NUTS on the cached compiled density: nutpie compiles each
    structure anew in numba (about 10 s, not kept on disk), and its own path is
    tested in test_compiled.py. Returns the DataTree."""
    import arviz as az

    import crowd_models as cm

    idata = cm.sample(model, draws=draws, tune=draws, chains=4, random_seed=seed,
                      nuts_sampler="pymc", progressbar=False)
    post = idata.posterior.to_dataset()
    free = [v.name for v in model.free_RVs]
    rhat = az.rhat(post[free])
    worst = max(free, key=lambda n: float(rhat[n].max()))
    assert float(rhat[worst].max()) <= 1.01, (worst, float(rhat[worst].max()))
    assert int(idata.sample_stats["diverging"].sum()) == 0
    inside = []
    for name, value in truth.items():
        lo, hi = post[name].quantile([0.05, 0.95], dim=("chain", "draw")).values
        inside.append(((value >= lo) & (value <= hi)).ravel())
    inside = np.concatenate(inside)
    assert inside.mean() >= min_cover, f"{inside.sum()} of {inside.size} true values covered"
    return idata
