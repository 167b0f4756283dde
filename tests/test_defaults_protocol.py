"""The leave-one-set-out logic of benchmarks/defaults_out_of_sample.py on a hand-made table."""

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "defaults_out_of_sample.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("defaults_out_of_sample", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# "good" wins on a, b and the crowd c but loses badly on d; "safe" is never far below DS.
TABLE = pd.DataFrame(
    {"MV": [0.70, 0.70, 0.70, 0.70, 0.70],
     "DS": [0.80, 0.80, 0.80, 0.80, 0.90],
     "good": [0.90, 0.90, 0.90, 0.90, 0.60],
     "safe": [0.85, 0.85, 0.79, 0.79, 0.895]},
    index=["a", "b", "c/0", "c/1", "d"])
GROUPS = ["a", "b", "c", "c", "d"]


def test_mean_chooses_without_the_held_out_set(bench):
    out = bench.out_of_set(TABLE, GROUPS, "mean")
    # with d held out "good" has mean 0.90 over a, b, c (c's seeds averaged first)
    assert out.at["d", "rule"] == "good"
    assert out.at["d", "accuracy"] == pytest.approx(0.60)
    assert out.at["d", "vs_reference"] == pytest.approx(0.30)
    assert out.at["d", "vs_baseline"] == pytest.approx(0.10)
    assert out.at["d", "below_floor"]
    assert out.at["a", "rule"] == "safe"  # good over b, c, d: 0.80; safe: (0.85+0.79+0.895)/3
    # a scenario's seeds are held out together and weigh as one set
    assert out.loc[["c/0", "c/1"], "set"].tolist() == ["c", "c"]
    assert out.at["c/0", "rule"] == out.at["c/1", "rule"] == "safe"
    assert list(out.index) == list(TABLE.index)


def test_floor_and_worst_criteria(bench):
    floor = bench.out_of_set(TABLE, GROUPS, "floor")
    # without d, "good" meets the floor everywhere and has the best mean; with d in the
    # training sets only DS and safe meet it, and safe has the better mean
    assert floor.at["d", "rule"] == "good"
    assert floor.loc[["a", "b", "c/0"], "rule"].tolist() == ["safe"] * 3
    assert not floor.loc[["a", "b", "c/0", "c/1"], "below_floor"].any()
    worst = bench.out_of_set(TABLE, GROUPS, "worst")
    # worst-case shortfall against DS with d in: DS 0, safe 0.01, good 0.30
    assert worst.at["a", "rule"] == "DS"
    assert worst.at["d", "rule"] == "good"  # a, b, c: good is never below DS
    assert worst.at["a", "vs_reference"] == 0


def test_each_unit_its_own_set_by_default(bench):
    out = bench.out_of_set(TABLE.loc[["a", "b", "d"]], criterion="mean")
    assert out["set"].tolist() == ["a", "b", "d"]
    with pytest.raises(ValueError, match="two sets"):
        bench.out_of_set(TABLE.loc[["a"]])
    with pytest.raises(ValueError, match="criterion"):
        bench.out_of_set(TABLE, GROUPS, "median")
