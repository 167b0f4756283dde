"""Choosing a family without gold, against the truth: on every bundled
categorical set with gold, the held-out-label ranking of ``compare_models``,
the family ``auto.choose`` takes from it, and every candidate's accuracy.

    .venv/bin/python benchmarks/model_choice.py             # every set
    .venv/bin/python benchmarks/model_choice.py --only rte dog

Labels as in ``accuracy.py`` (features dropped, repeated pairs reduced to
their first label); ``compare_models`` with its defaults (10% held out, 3
splits, seed 0). Printed per set: the ranking with each candidate's accuracy
(its EM on all labels), then one line: the best score's family, the chosen
family and the best family by accuracy, with the chosen one's shortfall.
Gold is read only to print the accuracies.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
import warnings
from pathlib import Path

import pandas as pd

from crowd_models import auto

HERE = Path(__file__).resolve().parent


def _accuracy_tools():
    spec = importlib.util.spec_from_file_location("accuracy_benchmark", HERE / "accuracy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None) -> None:
    tools = _accuracy_tools()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=list(tools.SETS), choices=tools.SETS)
    args = parser.parse_args(argv)
    lines = []
    for name in args.only:
        t0 = time.perf_counter()
        ann = tools.load(name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            table = auto.compare_models(ann)
            accuracy = {}
            for candidate in table.index:
                family, options = auto.family_of(candidate)
                accuracy[candidate] = tools._accuracy(family.em(ann, **options), ann)
        table["accuracy"] = pd.Series(accuracy)
        chosen = auto.choose(table)
        best = max(accuracy, key=accuracy.get)
        print(f"{name} ({time.perf_counter() - t0:.0f} s)")
        print(table.round(4).to_string(), flush=True)
        lines.append(f"{name:14s} best score {table.index[0]:16s} chosen {chosen:16s} "
                     f"{accuracy[chosen]:.4f}  best {best:16s} {accuracy[best]:.4f}  "
                     f"shortfall {accuracy[best] - accuracy[chosen]:.4f}")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
