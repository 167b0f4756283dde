"""The size rule of ARCHITECTURE.md: a module over 700 lines or a function over 80
(docstring left out) is named, with its reason, in its "Sizes" section."""

import ast
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "crowd_models"


def _sizes_section() -> str:
    text = (ROOT / "ARCHITECTURE.md").read_text()
    return text.split("## Sizes")[1].split("\n## ")[0]


def _function_lengths(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = node.end_lineno - node.lineno + 1
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and (
                    isinstance(first.value.value, str)):
                length -= first.end_lineno - first.lineno + 1
            yield node.name, length


def test_long_modules_and_functions_are_argued_for():
    section = _sizes_section()
    named = set(re.findall(r"`([\w./]+)`", section))
    long_modules, long_functions = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if len(path.read_text().splitlines()) > 700 and not (
                str(rel) in named or path.name in named
                or f"models/{path.name}" in named):
            long_modules.append(str(rel))
        module = path.stem if path.stem != "__init__" else path.parent.name
        for name, length in _function_lengths(path):
            if length > 80 and f"{module}.{name}" not in named:
                long_functions.append(f"{module}.{name} ({length})")
    assert not long_modules, f"modules over 700 lines not in ARCHITECTURE.md: {long_modules}"
    assert not long_functions, (
        f"functions over 80 lines not in ARCHITECTURE.md's Sizes section: {long_functions}")


def _examples_tool():
    spec = importlib.util.spec_from_file_location("examples_tool", ROOT / "tools" / "examples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_public_function_has_a_self_contained_example():
    """ARCHITECTURE's docstring rule, checked statically (``make examples`` runs them)."""
    tool = _examples_tool()
    functions = tool.public_functions()
    assert "crowd_models.models.two_coin.build_model" in functions
    assert "crowd_models.report.summary.annotator_summary" in functions
    assert not any(name.split(".")[-1].startswith("_") for name in functions)
    problems = []
    for name, function in sorted(functions.items()):
        source = tool.example_source(function.__doc__)
        if not source:
            problems.append(f"{name}: no Examples section")
            continue
        try:
            undefined = tool.undefined_names(source)
        except SyntaxError as err:
            problems.append(f"{name}: example does not parse ({err})")
            continue
        if undefined:
            problems.append(f"{name}: example uses names it does not define: {undefined}")
    assert not problems, "\n".join(problems)


def test_the_example_check_can_fail():
    tool = _examples_tool()
    assert tool.undefined_names("from crowd_models.models import two_coin\n"
                                "fit = two_coin.em(ann)\n") == ["ann"]
    assert tool.undefined_names("ann = cm.datasets.load_rte()\n"
                                "f = lambda x: x + len(ann.items)\n") == []
    assert tool.example_source("Summary.\n\nParameters\n----------\nx : int\n") is None
    doc = "Summary.\n\n    Examples\n    --------\n    >>> a = (1 +\n    ...      2)\n    >>> a\n"
    assert tool.example_source(doc) == "a = (1 +\n     2)\na\n"
    # numpydoc does not know "Example": such a section is not found
    assert tool.example_source(doc.replace("Examples", "Example")) is None


def test_private_helpers_have_no_numpydoc_sections():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("_"):
                doc = ast.get_docstring(node) or ""
                if re.search(r"^(Parameters|Returns)\n-{3,}", doc, flags=re.M):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not offenders, "private helpers with numpydoc sections:\n" + "\n".join(offenders)
