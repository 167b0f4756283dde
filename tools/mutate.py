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
                "beta_prior", "check_positive_precision",
                "simulation_design", "item_joint_np", "expected_counts", "dirichlet_prior"],
               ["tests/models/test_common.py", "tests/models/test_em_kernels.py"]),
    "blocks": ("crowd_models/_blocks.py",
               ["posterior_from_joint", "block_matrix", "block_posterior", "partition_block"],
               ["tests/models/test_common.py", "tests/models/test_chunked.py"]),
    "label_switch": ("crowd_models/inference.py", ["label_switched_chains"],
                     ["tests/test_label_switch.py"]),
    "two_coin": ("crowd_models/models/two_coin.py",
                 ["_log_confusion", "_log_prior_classes", "_log_prior_params", "_fit_logistic",
                  "_m_step", "_gaussian_logpdf"],
                 ["tests/models/test_two_coin.py", "-k",
                  "fixed_point or flat_priors or fit_logistic or stationary or log_posterior "
                  "or gaussian_log_prior"]),
    "dawid_skene": ("crowd_models/models/dawid_skene.py",
                    ["_one_coin_confusion", "_m_step", "_rates", "_prevalence",
                     "_log_prior_params"],
                    ["tests/models/test_em_kernels.py", "tests/models/test_dawid_skene.py", "-k",
                     "dawid_skene or em_start or recovers or two_classes"]),
    "feature_accuracy": ("crowd_models/models/feature_accuracy.py",
                         ["_joint", "_gauss", "_laplace", "_log_prior_params", "_fit_truth",
                          "_m_step"],
                         ["tests/models/test_feature_accuracy.py", "-k",
                          "optimality or log_posterior or sign_flip or support"]),
    "ordinal": ("crowd_models/models/ordinal/cumulative.py",
                ["binary_annotations", "_survival_to_classes", "class_probabilities"],
                ["tests/models/test_ordinal.py", "-k", "fixed_point or repair or negative"]),
    "ordinal_latent": ("crowd_models/models/ordinal/latent.py",
                       ["_log_cdf_pt", "_log_interval_pt", "_latent_log_confusion_pt",
                        "level_locations", "own_cutpoints", "latent_confusion"],
                       ["tests/models/test_ordinal.py", "-k",
                        "brute_force or simulate_latent"]),
    "continuous": ("crowd_models/models/continuous.py",
                   ["_items_np", "_m_step", "_bias_scale_step", "_gamma_logpdf_nojac",
                    "_normal_logpdf", "_log_prior"],
                   ["tests/models/test_continuous.py", "-k",
                    "fixed_point or flat_priors or log_posterior or recovers or map_equals_em "
                    "or local_maximum"]),
    "edda": ("crowd_models/models/edda.py",
             ["_log_density", "_objective", "_fit_covariance", "_common_shape_vector",
              "_common_shape_matrix", "_orientation_scales", "_class_weights", "_soft_weights",
              "_hard_weights"],
             ["tests/models/test_edda.py", "-k",
              "mclust or closed_forms or optimiser or weights or shrinkage or bad or constant "
              "or collinear or coincident or too_few or stationary or sweeps or residue"]),
    "data": ("crowd_models/data.py",
             ["Annotations.n_labels", "Annotations.class_counts", "Annotations.select",
              "Annotations.gold_series"],
             ["tests/test_data.py"]),
}

EQUIVALENT: dict[tuple[str, str, str], str] = {
    ('posterior_from_joint', '`0.0` -> `1.0`',
     'top = np.where(np.isfinite(top), top, 0.0)  # a row of -inf stays -inf'):
        'the shift of an all -inf row: its log-likelihood is -inf and its probabilities '
        '0/0 whatever the shift',
    ('label_switched_chains', '`1` -> `2`',
     'np.add.at(agree, (labels, ref_labels), 1)'):
        'doubles every agreement count: the assignment and its comparison with the trace '
        'are scale-free',
    ('label_switched_chains', '`.mean(` -> `.sum(`',
     'labels = post["item_class_prob"].sel(chain=chain).mean(D.DRAW).argmax('):
        'the argmax over classes of the sum over draws is that of the mean',
    ('_log_confusion', 'drop the minus of `-1`',
     'np.stack([spec, 1 - spec], axis=-1),'):
        'spec is 1-D (annotator), so axis 1 and axis -1 of the (annotator, 2) stack '
        'coincide',
    ('_log_confusion', 'drop the minus of `-1`',
     'np.stack([1 - sens, sens], axis=-1),'):
        'sens is 1-D (annotator), so axis 1 and axis -1 coincide',
    ('_fit_logistic', 'drop `+ P`',
     'hess = (X * (p * (1 - p))[:, None]).T @ X + P'):
        "the Newton matrix without the prior's curvature changes the steps, not the fixed "
        'point (the gradient keeps the prior)',
    ('_fit_logistic', '`<` -> `<=`',
     'if np.max(np.abs(step)) < tol:'):
        'a step exactly equal to the tolerance does not occur',
    ('_m_step', '`500` -> `501`',
     'max_iter=500 if start is None else 3)'):
        'an iteration cap the softmax fit does not reach',
    ('_fit_covariance', '`.sum(` -> `.mean(`',
     '_positive(trW, "the within-class variance", ctx, True, trW.sum())'):
        'the rounding-residue threshold (1e-10 of the pooled value) scaled by 1/G: a '
        'tolerance',
    ('_fit_covariance', '`.sum(` -> `.mean(`',
     '_positive(diagW, "the within-class variance", ctx, True, diagW.sum(axis=0))'):
        'the rounding-residue threshold scaled by 1/G: a tolerance',
    ('_fit_covariance', '`.sum(` -> `.mean(`',
     '_positive(w.sum(axis=1), "the within-class variance", ctx, True, trW.sum())'):
        'the rounding-residue threshold scaled by 1/G (or the checked value by 1/d): a '
        'tolerance',
    ('_fit_covariance', '`.sum(` -> `.mean(`',
     '_rank_check(W.sum(axis=0), "the pooled within-class scatter", ctx)'):
        'the rank check is scale-free (a condition number)',
    ('_fit_covariance', '`1` -> `2`',
     'Sigma = 0.5 * (Sigma + np.swapaxes(Sigma, 1, 2))'):
        'swapaxes(Sigma, 2, 2) is Sigma: symmetrising a matrix that is symmetric up to '
        'rounding',
    ('_common_shape_vector', '`/` -> `*`',
     'lam = w.sum(axis=1) / (n * d)'):
        'the start of a convex fixed-point iteration: the same optimum',
    ('_common_shape_vector', '`*` -> `/`',
     'lam = w.sum(axis=1) / (n * d)'):
        'the start of a convex fixed-point iteration: the same optimum',
    ('_common_shape_vector', '`.sum(` -> `.mean(`',
     'lam = w.sum(axis=1) / (n * d)'):
        'the start of a convex fixed-point iteration: the same optimum',
    ('_common_shape_vector', '`.sum(` -> `.mean(`',
     'a = (w / lam[:, None]).sum(axis=0)'):
        'a is divided by its geometric mean next: the factor 1/G cancels',
    ('_common_shape_vector', '`<=` -> `<`',
     'if delta <= tol:'):
        'a change exactly equal to the tolerance does not occur',
    ('_common_shape_vector', '`.max(` -> `.min(`',
     'delta = max(np.max(np.abs(np.log(A_new / A))), np.max(np.abs(np.log(lam_new / lam))))'):
        'one stopping quantity weakened; the other (shape and volumes converge together) '
        "still holds the fit to the stationarity test's 1e-9",
    ('_common_shape_matrix', '`/` -> `*`',
     'lam = np.einsum("gii->g", W) / (n * d)'):
        'the start of a convex fixed-point iteration: the same optimum',
    ('_common_shape_matrix', '`*` -> `/`',
     'lam = np.einsum("gii->g", W) / (n * d)'):
        'the start of a convex fixed-point iteration: the same optimum',
    ('_common_shape_matrix', '`.sum(` -> `.mean(`',
     'M = (W / lam[:, None, None]).sum(axis=0)'):
        'C is M over the d-th root of its determinant next: the factor 1/G cancels',
    ('_common_shape_matrix', '`<=` -> `<`',
     'if delta <= tol:'):
        'a change exactly equal to the tolerance does not occur',
    ('_common_shape_matrix', '`/` -> `*`',
     'delta = max(np.max(np.abs(C_new - C)) / np.max(np.abs(C_new)),'):
        "the shape's change measured absolutely, not relatively (|C| = 1, entries of "
        'order 1): the tolerance rescaled',
    ('_common_shape_matrix', '`.max(` -> `.min(`',
     'delta = max(np.max(np.abs(C_new - C)) / np.max(np.abs(C_new)),'):
        "one stopping quantity weakened; the volumes' change still holds the fit to the "
        "stationarity test's 1e-9",
    ('_common_shape_matrix', '`.max(` -> `.min(`',
     'np.max(np.abs(np.log(lam_new / lam))))'):
        "the volumes' stopping quantity weakened; the shape's still holds the fit to 1e-9",
    ('_soft_weights', '`>` -> `>=`',
     'off = np.abs(s - 1.0) > _ROW_SUM_TOL'):
        'a row sum off by exactly the tolerance does not occur',
    ('_hard_weights', '`1` -> `2`',
     'codes = np.array([index.get(v, -1) for v in y])'):
        'unknown labels are the negative codes, -1 or -2 alike',
    ('_bias_scale_step', '`+` -> `-`',
     'g = np.stack([tau * sums["y"], tau * sums["ym"] + scale_prec], axis=1)'):
        "the prior's linear term is the same for every annotator, so the Lagrange"
        " multiplier of the scales' mean-1 constraint absorbs it",
    ('_bias_scale_step', 'drop `+ scale_prec`',
     'g = np.stack([tau * sums["y"], tau * sums["ym"] + scale_prec], axis=1)'):
        "the prior's linear term is the same for every annotator, so the Lagrange"
        " multiplier of the scales' mean-1 constraint absorbs it",
    ('_bias_scale_step', '`+` -> `-`',
     'g = (tau * sums["ym"] + scale_prec)[:, None]'):
        "the prior's linear term is the same for every annotator, so the Lagrange"
        " multiplier of the scales' mean-1 constraint absorbs it",
    ('_bias_scale_step', 'drop `+ scale_prec`',
     'g = (tau * sums["ym"] + scale_prec)[:, None]'):
        "the prior's linear term is the same for every annotator, so the Lagrange"
        " multiplier of the scales' mean-1 constraint absorbs it",
}
"""Survivors read and found equivalent, keyed by (function, mutation, its source line
stripped): why no test can tell the mutant from the original."""

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
    known = [m for m in survivors if _equivalence(m)]
    unknown = [m for m in survivors if not _equivalence(m)]
    if known:
        print("\nequivalent survivors (EQUIVALENT gives the reason):")
        for m in known:
            print(f"  {m.path}:{m.line} {m.function}: {m.description}: {_equivalence(m)}")
    if unknown:
        print("\nsurvivors:")
        for m in unknown:
            print(f"  {m.path}:{m.line} {m.function}: {m.description}")
    return 0


def _equivalence(mutant: Mutant) -> str | None:
    """The recorded reason a surviving mutant changes nothing observable, or None."""
    line = _source(mutant.path).splitlines()[mutant.line - 1].strip()
    return EQUIVALENT.get((mutant.function, mutant.description, line))


if __name__ == "__main__":
    sys.exit(main())
