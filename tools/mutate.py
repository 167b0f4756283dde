"""Mutation testing of the core: plant small bugs in named functions, run the fast
tests that cover them, and list the mutants no test catches (the survivors).

    .venv/bin/python tools/mutate.py                      # every target below
    .venv/bin/python tools/mutate.py --only label_switch  # targets whose name matches
    .venv/bin/python tools/mutate.py --list               # the mutants, without running
    make mutate MUTATE_ARGS="--only common --jobs 2"

Each mutant changes one AST node inside one target function: a comparison
flipped at its boundary (``<`` <-> ``<=``, ``>`` <-> ``>=``, ``==`` <-> ``!=``),
an arithmetic operator swapped (``+`` <-> ``-``, ``*`` <-> ``/``, ``**`` -> ``*``),
the right-hand term of a sum or difference dropped, a unary minus dropped, a
numeric constant changed (``0`` -> ``1``, ``n`` -> ``n + 1``, ``x`` -> ``2 x``),
``and`` <-> ``or``, or a reduction swapped (``mean`` <-> ``sum``, ``max`` <-> ``min``,
``argmax`` <-> ``argmin``). The module is rewritten with ``ast.unparse`` in a copy
of the repository (one per worker, the copy imported through PYTHONPATH), and
the target's tests run there with ``pytest -x -m "not slow"``: a failing run (or
one past the time limit) kills the mutant. Before any mutant, the tests run on
the unmutated copy and must pass. Not part of ``make test``.

Equivalent mutants (a change with no observable effect, e.g. ``>`` -> ``>=``
where equality cannot happen) survive by nature: read each survivor before
writing a test for it.
"""

from __future__ import annotations

import argparse
import ast
import copy
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# name: (module file, [function qualnames], [pytest arguments: the covering fast tests])
TARGETS = {
    "common": ("crowd_models/models/_common.py",
               ["zerosum_normal_logpdf", "beta_logpdf_nojac", "dirichlet_logpdf_nojac",
                "posterior_from_joint", "beta_prior", "check_positive_precision",
                "simulation_design", "item_joint_np"],
               ["tests/models/test_common.py", "tests/models/test_em_kernels.py"]),
    "label_switch": ("crowd_models/inference.py", ["label_switched_chains"],
                     ["tests/test_label_switch.py"]),
    "two_coin": ("crowd_models/models/two_coin.py",
                 ["_log_confusion", "_log_prior_classes", "_log_prior_params", "_fit_logistic",
                  "_m_step", "_gaussian_logpdf"],
                 ["tests/models/test_two_coin.py", "-k",
                  "fixed_point or flat_priors or fit_logistic or stationary or log_posterior "
                  "or gaussian_log_prior"]),
    "dawid_skene": ("crowd_models/models/dawid_skene.py",
                    ["_one_coin_confusion", "_expected_counts", "_m_step", "_log_prior_params"],
                    ["tests/models/test_em_kernels.py", "tests/models/test_dawid_skene.py", "-k",
                     "dawid_skene or em_start or recovers or two_classes"]),
    "feature_accuracy": ("crowd_models/models/feature_accuracy.py",
                         ["_joint", "_gauss", "_laplace", "_log_prior_params", "_fit_truth",
                          "_m_step"],
                         ["tests/models/test_feature_accuracy.py", "-k",
                          "optimality or log_posterior or sign_flip or support"]),
    "ordinal": ("crowd_models/models/ordinal.py",
                ["binary_annotations", "_survival_to_classes", "class_probabilities"],
                ["tests/models/test_ordinal.py", "-k", "fixed_point or repair or negative"]),
    "continuous": ("crowd_models/models/continuous.py",
                   ["_m_step", "_gamma_logpdf_nojac", "_normal_logpdf", "_log_prior"],
                   ["tests/models/test_continuous.py", "-k",
                    "fixed_point or flat_priors or log_posterior or recovers or map_equals_em"]),
    "edda": ("crowd_models/models/edda.py",
             ["_log_density", "_objective", "_fit_covariance", "_common_shape_vector",
              "_common_shape_matrix", "_orientation_scales", "_class_weights", "_soft_weights",
              "_hard_weights"],
             ["tests/models/test_edda.py", "-k",
              "mclust or closed_forms or optimiser or weights or shrinkage or bad or constant "
              "or collinear or coincident or too_few or stationary or sweeps"]),
    "data": ("crowd_models/data.py",
             ["Annotations.n_labels", "Annotations.class_counts", "Annotations.select",
              "Annotations.gold_series"],
             ["tests/test_data.py"]),
}

_COMPARE_FLIP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
                 ast.Eq: ast.NotEq, ast.NotEq: ast.Eq}
_BINOP_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
               ast.Pow: ast.Mult}
_CALL_SWAP = {"mean": "sum", "sum": "mean", "max": "min", "min": "max", "argmax": "argmin",
              "argmin": "argmax"}


@dataclass
class Mutant:
    target: str
    path: str
    function: str
    index: int  # the mutation point's position in the function's walk
    kind: int  # which mutation of that point
    line: int
    description: str


def _find_function(tree: ast.Module, qualname: str):
    body, node = tree.body, None
    for part in qualname.split("."):
        node = next((n for n in body if isinstance(n, ast.FunctionDef | ast.ClassDef)
                     and n.name == part), None)
        if node is None:
            raise LookupError(f"no {qualname} in this module")
        body = node.body
    return node


def _points(function) -> list[ast.AST]:
    """The nodes of a function that have mutations, in a fixed order (docstring and
    default arguments excluded)."""
    out = []
    for stmt in function.body:
        if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, str)):
            continue
        for node in ast.walk(stmt):
            if _mutations(node):
                out.append(node)
    return out


def _mutations(node) -> list[str]:
    """Descriptions of the mutations of one node (their order defines ``kind``)."""
    if isinstance(node, ast.Compare):
        return [f"`{_op(o)}` -> `{_op(_COMPARE_FLIP[type(o)]())}`" for o in node.ops
                if type(o) in _COMPARE_FLIP]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOP_SWAP:
        out = [f"`{_op(node.op)}` -> `{_op(_BINOP_SWAP[type(node.op)]())}`"]
        if isinstance(node.op, ast.Add | ast.Sub):
            out.append(f"drop `{_op(node.op)} {ast.unparse(node.right)}`")
        return out
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return [f"drop the minus of `{ast.unparse(node)}`"]
    if (isinstance(node, ast.Constant) and isinstance(node.value, int | float)
            and not isinstance(node.value, bool)):
        return [f"`{node.value!r}` -> `{_changed(node.value)!r}`"]
    if isinstance(node, ast.BoolOp):
        return [f"`{'and' if isinstance(node.op, ast.And) else 'or'}` -> "
                f"`{'or' if isinstance(node.op, ast.And) else 'and'}`"]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
            node.func.attr in _CALL_SWAP):
        return [f"`.{node.func.attr}(` -> `.{_CALL_SWAP[node.func.attr]}(`"]
    return []


def _op(op) -> str:
    return {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
            ast.NotEq: "!=", ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/",
            ast.Pow: "**"}[type(op)]


def _changed(value):
    if value == 0:
        return type(value)(1)
    return value + 1 if isinstance(value, int) else value * 2


def _apply(node, kind: int) -> ast.AST:
    """The mutated replacement of ``node``."""
    new = copy.deepcopy(node)
    if isinstance(new, ast.Compare):
        flippable = [i for i, o in enumerate(new.ops) if type(o) in _COMPARE_FLIP]
        i = flippable[kind]
        new.ops[i] = _COMPARE_FLIP[type(new.ops[i])]()
        return new
    if isinstance(new, ast.BinOp):
        if kind == 0:
            new.op = _BINOP_SWAP[type(new.op)]()
            return new
        return new.left
    if isinstance(new, ast.UnaryOp):
        return new.operand
    if isinstance(new, ast.Constant):
        new.value = _changed(new.value)
        return new
    if isinstance(new, ast.BoolOp):
        new.op = ast.Or() if isinstance(new.op, ast.And) else ast.And()
        return new
    if isinstance(new, ast.Call):
        new.func.attr = _CALL_SWAP[new.func.attr]
        return new
    raise TypeError(type(node))


class _Replace(ast.NodeTransformer):
    def __init__(self, old, new):
        self.old, self.new = old, new

    def visit(self, node):
        if node is self.old:
            return self.new
        return super().visit(node)


_SOURCES: dict[str, str] = {}
"""Each target module's text as read once: the mutants are enumerated on it and
applied to it, whatever happens to the checkout meanwhile."""


def _source(path: str) -> str:
    if path not in _SOURCES:
        _SOURCES[path] = (ROOT / path).read_text()
    return _SOURCES[path]


def enumerate_mutants(names) -> list[Mutant]:
    out = []
    for name in names:
        path, functions, _ = TARGETS[name]
        tree = ast.parse(_source(path))
        for qualname in functions:
            for index, node in enumerate(_points(_find_function(tree, qualname))):
                for kind, description in enumerate(_mutations(node)):
                    out.append(Mutant(name, path, qualname, index, kind, node.lineno,
                                      description))
    return out


def mutated_source(mutant: Mutant) -> str:
    tree = ast.parse(_source(mutant.path))
    node = _points(_find_function(tree, mutant.function))[mutant.index]
    tree = _Replace(node, _apply(node, mutant.kind)).visit(tree)
    return ast.unparse(ast.fix_missing_locations(tree))


def _copy_repo(dest: Path) -> None:
    shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(
        ".venv", ".git", "__pycache__", ".pytest_cache", "*.egg-info", "figures",
        "crowd_models_demo", "crowd_models_report"), dirs_exist_ok=True)


def _run_tests(copy_root: Path, pytest_args, timeout: float) -> tuple[str, float]:
    env = {**os.environ, "PYTHONPATH": str(copy_root), "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
           "-m", "not slow", "-W", "ignore", "-o", "addopts=", *pytest_args]
    start = time.perf_counter()
    try:
        result = subprocess.run(cmd, cwd=copy_root, env=env, capture_output=True, text=True,
                                timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", time.perf_counter() - start
    status = {0: "survived", 5: "no tests"}.get(result.returncode, "killed")
    return status, time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=None,
                        help="targets (substrings of their names) to run; default all: "
                             + ", ".join(TARGETS))
    parser.add_argument("--function", nargs="*", default=None,
                        help="only these functions (substrings of their qualnames)")
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    parser.add_argument("--max-mutants", type=int, default=None,
                        help="at most this many mutants per target (evenly spread)")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    args = parser.parse_args(argv)

    names = [n for n in TARGETS if args.only is None or any(o in n for o in args.only)]
    if not names:
        parser.error(f"no target matches {args.only}; targets: {', '.join(TARGETS)}")
    mutants = enumerate_mutants(names)
    if args.function:
        mutants = [m for m in mutants if any(f in m.function for f in args.function)]
    if args.max_mutants:
        kept = []
        for name in names:
            mine = [m for m in mutants if m.target == name]
            step = max(1, len(mine) // args.max_mutants)
            kept += mine[::step][:args.max_mutants]
        mutants = kept
    if args.list:
        for m in mutants:
            print(f"{m.path}:{m.line} {m.function}: {m.description}")
        print(f"{len(mutants)} mutants")
        return 0

    work = Path(tempfile.mkdtemp(prefix="crowd-mutate-"))
    try:
        workers = [work / f"w{i}" for i in range(max(1, args.jobs))]
        for w in workers:
            _copy_repo(w)
            for path, text in _SOURCES.items():  # the text the mutants were made from
                (w / path).write_text(text)
        limits = {}
        for name in names:  # the unmutated tests must pass, and set the time limit
            status, seconds = _run_tests(workers[0], TARGETS[name][2], timeout=1800)
            if status != "survived":
                print(f"{name}: the covering tests do not pass unmutated ({status}); "
                      f"fix that first.", file=sys.stderr)
                return 2
            limits[name] = max(120.0, 6 * seconds)  # a loaded machine slows the runs
            print(f"baseline {name}: {seconds:.0f} s", flush=True)

        free = list(workers)
        results = []

        def run(mutant):
            w = free.pop()
            target_file = w / mutant.path
            original = target_file.read_text()
            try:
                target_file.write_text(mutated_source(mutant))
                status, seconds = _run_tests(w, TARGETS[mutant.target][2],
                                             limits[mutant.target])
            except Exception as err:  # a mutant that cannot be written: say so, go on
                status, seconds = f"error: {err!r}", 0.0
            finally:
                target_file.write_text(original)
                free.append(w)
            print(f"{status:9s} {seconds:5.0f} s  {mutant.path}:{mutant.line} "
                  f"{mutant.function}: {mutant.description}", flush=True)
            return mutant, status

        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=len(workers)) as pool:
            results = list(pool.map(run, mutants))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    survivors = [m for m, s in results if s == "survived"]
    print(f"\n{len(results)} mutants in {time.perf_counter() - started:.0f} s: "
          f"{sum(s in ('killed', 'timeout') for _, s in results)} killed, "
          f"{len(survivors)} survived")
    for name in names:
        mine = [(m, s) for m, s in results if m.target == name]
        if mine:
            killed = sum(s in ("killed", "timeout") for _, s in mine)
            print(f"  {name}: {killed}/{len(mine)} killed")
    timeouts = [m for m, s in results if s == "timeout"]
    if timeouts:
        print("\ntimed out (counted as killed; a mutant that loops, or a loaded machine):")
        for m in timeouts:
            print(f"  {m.path}:{m.line} {m.function}: {m.description}")
    if survivors:
        print("\nsurvivors:")
        for m in survivors:
            print(f"  {m.path}:{m.line} {m.function}: {m.description}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
