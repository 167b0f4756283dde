"""Speed of the continuous family: EM, the PyMC MAP, Student-t, the affect data.

Measures and prints; it asserts nothing about time, which depends on the
machine. Three parts:

1. ``continuous.em`` and ``build_model`` + ``cm.fit_map`` on simulated data
   (20 annotators, 5 labels per item, 5 features; 10^4 and 10^5 labels) for
   the precision, precision+bias and scale+bias variants: EM time and
   iterations, build time, MAP time (first call, with compilation, then a
   second call on the same model) and max |MAP - EM| over precision, bias,
   scale, coef and the true-value means.
2. Student-t noise (no EM; each item's integral by 64-node adaptive
   Gauss-Hermite quadrature): build + MAP time, first and second call, at
   10^3 and 10^4 labels.
3. The seven Snow et al. (2008) affect data sets: EM of the three Gaussian
   variants per emotion, total wall time.
4. One compile for every data set: ``fit_map`` and a short NUTS fit
   (``cm.sample``, nutpie) of the precision+bias model on each affect emotion
   in turn (labels of other means and spreads), the first emotion's time (it
   compiles) against the mean of the other six, with the compilations counted.

    .venv/bin/python benchmarks/continuous.py            # full run
    .venv/bin/python benchmarks/continuous.py --quick    # smaller sizes
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np

VARIANTS = {"precision": {}, "precision+bias": dict(bias=True),
            "scale+bias": dict(bias=True, scale=True)}
J = 20


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def _simulated(n_labels: int, noise: str = "gaussian"):
    from crowd_models.models import continuous

    rng = np.random.default_rng(n_labels)
    bias = rng.normal(0, 0.5, J)
    scale = rng.uniform(0.7, 1.3, J)
    return continuous.simulate(rng.gamma(4.0, 0.5, J), bias=bias - bias.mean(),
                               scale=scale / scale.mean(), n_items=n_labels // 5,
                               n_features=5, labels_per_item=5, noise=noise, rng=rng)


def _max_difference(fit, em_fit) -> float:
    from crowd_models._fits import posterior_of

    post = posterior_of(fit)
    names = [n for n in ("precision", "bias", "scale", "coef", "true_value") if n in em_fit]
    return max(float(np.abs(post[n].values - em_fit[n].values).max()) for n in names)


def gaussian_part(sizes) -> None:
    import crowd_models as cm
    from crowd_models.models import continuous

    print(f"\n1. Gaussian variants, {J} annotators, 5 labels per item, 5 features")
    print(f"{'variant':>15} {'labels':>8} {'EM s':>7} {'EM it':>6} {'build s':>8} "
          f"{'MAP 1st s':>10} {'MAP 2nd s':>10} {'max|MAP-EM|':>12}")
    for n in sizes:
        ann = _simulated(n)
        for name, kw in VARIANTS.items():
            em_fit, em_s = timed(continuous.em, ann, **kw)
            model, build_s = timed(continuous.build_model, ann, **kw)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit, first_s = timed(cm.fit_map, model, start=em_fit)
                _, second_s = timed(cm.fit_map, model, start=em_fit)
            print(f"{name:>15} {n:>8,} {em_s:7.2f} {em_fit.attrs['n_iter']:>6} {build_s:8.2f} "
                  f"{first_s:10.2f} {second_s:10.2f} {_max_difference(fit, em_fit):12.1e}")


def student_t_part(sizes) -> None:
    import crowd_models as cm
    from crowd_models.models import continuous

    print("\n2. Student-t noise (nu = 4) with bias: build_model + fit_map")
    print(f"{'labels':>8} {'build s':>8} {'MAP 1st s':>10} {'MAP 2nd s':>10} {'max|grad|':>10}")
    for n in sizes:
        ann = _simulated(n, noise="student_t")
        model, build_s = timed(continuous.build_model, ann, bias=True, noise="student_t")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit, first_s = timed(cm.fit_map, model)
            _, second_s = timed(cm.fit_map, model)
        print(f"{n:>8,} {build_s:8.2f} {first_s:10.2f} {second_s:10.2f} "
              f"{fit.attrs['max_gradient']:10.1e}")


def affect_part() -> None:
    from crowd_models.datasets import AFFECT_EMOTIONS, load_affect
    from crowd_models.models import continuous

    data = [load_affect(e) for e in AFFECT_EMOTIONS]
    t0 = time.perf_counter()
    iterations = {name: 0 for name in VARIANTS}
    for ann in data:
        for name, kw in VARIANTS.items():
            iterations[name] += continuous.em(ann, **kw).attrs["n_iter"]
    seconds = time.perf_counter() - t0
    print(f"\n3. affect, 7 emotions x 3 Gaussian variants by EM (1000 labels each): "
          f"{seconds:.2f} s; EM iterations per variant (sum over emotions): "
          + ", ".join(f"{k} {v}" for k, v in iterations.items()))


def shared_compile_part() -> None:
    import crowd_models as cm
    from crowd_models import _compiled
    from crowd_models.datasets import AFFECT_EMOTIONS, load_affect
    from crowd_models.models import continuous

    times = []
    for emotion in AFFECT_EMOTIONS:
        before = sum(_compiled.COMPILE_COUNT.values())
        model = continuous.build_model(load_affect(emotion), bias=True)
        _, seconds = timed(lambda m=model: (cm.fit_map(m), cm.sample(
            m, draws=300, tune=300, chains=2, cores=1, random_seed=1, progressbar=False)))
        times.append(seconds)
        print(f"   {emotion:9s} MAP + NUTS {seconds:6.2f} s, "
              f"{sum(_compiled.COMPILE_COUNT.values()) - before} compilations")
    rest = float(np.mean(times[1:]))
    print(f"4. one compile for every data set: first emotion {times[0]:.2f} s, the other six "
          f"{rest:.2f} s on average: ratio {times[0] / rest:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    gaussian_part([10_000] if args.quick else [10_000, 100_000])
    student_t_part([1_000] if args.quick else [1_000, 10_000])
    affect_part()
    shared_compile_part()


if __name__ == "__main__":
    main()
