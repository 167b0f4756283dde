"""Find and run the ``Examples`` sections of the public functions' docstrings.

``python tools/examples.py`` runs every example, each docstring's lines in a
fresh namespace that holds only ``cm`` (``import crowd_models as cm``), so an
example must define every other name it uses. Printed values are not compared
(fits differ in their last digits across machines); an example passes when
its code runs. ``--only NAME`` runs the examples whose qualified name contains
NAME. ``make examples`` calls it; the test suite checks that every public
function has an example and that each one parses (``tests/test_house.py``),
and runs one example per public module (``tests/test_examples.py``).
"""

from __future__ import annotations

import argparse
import ast
import builtins
import doctest
import importlib
import inspect
import os
import pkgutil
import sys
import tempfile
import time
import traceback
import types

import crowd_models

HEADING = "Examples"
"""numpydoc's heading; a docstring that writes ``Example`` has none (numpydoc warns)."""


def public_modules() -> list[types.ModuleType]:
    """The package's modules whose dotted path has no part starting with ``_``."""
    modules = [crowd_models]
    for info in pkgutil.walk_packages(crowd_models.__path__, "crowd_models."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        modules.append(importlib.import_module(info.name))
    return modules


def public_functions() -> dict[str, types.FunctionType]:
    """``module.name`` -> function, for every module-level public function
    defined in a public module (re-exports are listed once, where defined)."""
    found = {}
    for module in public_modules():
        for name, obj in vars(module).items():
            if name.startswith("_") or not inspect.isfunction(obj):
                continue
            if obj.__module__ != module.__name__:
                continue
            found[f"{module.__name__}.{name}"] = obj
    return found


def example_section(doc: str | None) -> str | None:
    """The text under a docstring's ``Examples`` heading, or None."""
    lines = inspect.cleandoc(doc or "").splitlines()
    for i, line in enumerate(lines[:-1]):
        if line.strip() == HEADING and set(lines[i + 1].strip()) == {"-"}:
            return "\n".join(lines[i + 2:])
    return None


def example_source(doc: str | None) -> str | None:
    """The code of a docstring's example, one statement per line, or None."""
    section = example_section(doc)
    if section is None:
        return None
    examples = doctest.DocTestParser().get_examples(section)
    return "".join(example.source for example in examples)


def undefined_names(source: str) -> list[str]:
    """Names an example loads without defining them first (``cm`` and the
    builtins are given): a static check that it is self-contained."""
    defined = {"cm", *dir(builtins)}
    missing = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            defined.add(node.id)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id not in defined and node.id not in missing:
                missing.append(node.id)
    return missing


def run(source: str) -> None:
    """Execute an example's code as a script (the last expression's value is dropped)."""
    tree = ast.parse(source)
    exec(compile(tree, "<example>", "exec"), {"cm": crowd_models, "__name__": "__example__"})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run the examples whose name contains this")
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    failed = []
    os.chdir(tempfile.mkdtemp(prefix="crowd_models_examples_"))  # examples may write files
    for name, function in sorted(public_functions().items()):
        if args.only not in name:
            continue
        source = example_source(function.__doc__)
        if source is None:
            print(f"NO EXAMPLE  {name}")
            failed.append(name)
            continue
        start = time.perf_counter()
        try:
            run(source)
        except Exception:  # noqa: BLE001 - every failure is reported, then counted
            print(f"FAILED      {name}\n{traceback.format_exc()}")
            failed.append(name)
        else:
            print(f"ok {time.perf_counter() - start:6.1f} s  {name}")
        plt.close("all")
    print(f"{len(failed)} failed: {', '.join(failed)}" if failed else "all examples ran")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
