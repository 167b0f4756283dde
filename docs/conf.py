"""Sphinx configuration of the crowd_models site (``make docs``).

The build prepares three things before Sphinx reads the sources:

* ``api/``: the API reference, one section per public module (a module
  whose dotted path has no part starting with ``_``): its docstring, then an
  autosummary table of every public function and class defined there, so
  that nothing public is left out. A public function or class without a docstring stops the build.
* ``case_studies/``: copies of ``../case_studies/*.py`` (jupytext percent
  scripts), which myst-nb reads as notebooks and executes.
* ``validation.md`` and ``benchmarks.md`` include the repository's own
  READMEs (see those pages).

Notebooks run with myst-nb's cached execution (jupyter-cache under
``_build/.jupyter_cache``): a rebuild re-runs only the notebooks whose code
changed. The cache keys on a notebook's code cells, not on the package: after a
change to ``crowd_models`` that alters notebooks' outputs, rebuild with
``CROWD_MODELS_DOCS_EXECUTE=force`` (every notebook re-runs). ``=off`` (CI)
executes nothing but the getting-started notebook; ``CROWD_MODELS_FAST=1`` is
passed to the case studies' own quick mode.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import pkgutil
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

import crowd_models  # noqa: E402

project = "crowd_models"
author = "the crowd_models developers"
copyright = "2026, the crowd_models developers"
release = crowd_models.__version__

templates_path = ["_templates"]
extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "conf.py", "case_studies/_setup.py", "**/.ipynb_checkpoints",
                    "case_studies/figures/**"]
nitpicky = True
nitpick_ignore_regex = [(r"py:.*", r"(numpy|np|pandas|pd|xarray|xr|pymc|pm|arviz|az|"
                                   r"matplotlib|scipy|distributed|dask)\..*"),
                        (r"py:class", r".*(optional|default|array|like|callable|"
                                      r"sequence|mapping|iterable).*")]
suppress_warnings = ["mystnb.unknown_mime_type"]

html_theme = "pydata_sphinx_theme"
html_title = "crowd_models"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}

autosummary_generate = True
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
nb_custom_formats = {".py": ["jupytext.reads", {"fmt": "py:percent"}]}
nb_execution_mode = os.environ.get("CROWD_MODELS_DOCS_EXECUTE") or "cache"
if nb_execution_mode not in ("cache", "off", "force"):
    raise ValueError(f"CROWD_MODELS_DOCS_EXECUTE={nb_execution_mode!r}: use cache (the "
                     f"default), off (CI) or force (re-run every notebook).")
nb_execution_cache_path = str(HERE / "_build" / ".jupyter_cache")
nb_execution_timeout = 3600
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True
nb_execution_excludepatterns = []
if nb_execution_mode == "off":
    # CI: the getting-started notebook still runs (its output backs the README)
    nb_execution_mode = "force"
    nb_execution_excludepatterns = ["case_studies/*"]


# ------------------------------------------------------------------ API
def public_modules():
    """The package's modules whose dotted path has no part starting with ``_``."""
    modules = [crowd_models]
    for info in pkgutil.walk_packages(crowd_models.__path__, "crowd_models."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            modules.append(importlib.import_module(info.name))
    return modules


def public_names(module) -> list[str]:
    """The functions (cached ones included) and classes a public module defines, in
    source order."""
    found = []
    for name, obj in vars(module).items():
        target = inspect.unwrap(obj) if callable(obj) else obj
        if name.startswith("_") or not (inspect.isfunction(target) or inspect.isclass(obj)):
            continue
        if getattr(obj, "__module__", None) == module.__name__:
            found.append(name)
    return found


def public_constants(module) -> list[str]:
    """The upper-case names a module assigns at its top level (its settings and
    tables, e.g. ``auto.SHARING``), which docstrings refer to."""
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError):
        return []
    names = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("crowd_models._"):
            # settings that a public module takes from a private one and names
            names += [a.asname or a.name for a in node.names
                      if (a.asname or a.name).isupper() and not a.name.startswith("_")]
            continue
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) else [])
        for target in targets:
            if (isinstance(target, ast.Name) and target.id.isupper()
                    and not target.id.startswith("_") and target.id not in names):
                names.append(target.id)
    return names


def write_api(folder: Path) -> None:
    """One page with each public module's docstring and an autosummary table of its
    functions and classes; stops the build on a public function or class without a
    docstring."""
    undocumented = []
    sections = []
    for module in public_modules():
        names = public_names(module)
        undocumented += [f"{module.__name__}.{n}" for n in names
                         if not inspect.getdoc(getattr(module, n))]
        lines = [module.__name__, "-" * len(module.__name__), "",
                 f".. automodule:: {module.__name__}", "", f".. currentmodule:: {module.__name__}",
                 ""]
        if names:
            lines += [".. autosummary::", "   :toctree: generated", "",
                      *(f"   {n}" for n in names), ""]
        for constant in public_constants(module):
            lines += [f".. autodata:: {constant}", "   :no-value:", ""]
        sections.append("\n".join(lines))
    if undocumented:
        raise RuntimeError("public names without a docstring (document them, or make them "
                           "private): " + ", ".join(undocumented))
    folder.mkdir(exist_ok=True)
    head = ("API reference\n=============\n\nEvery public module, and every function and "
            "class it defines. ``import crowd_models as cm`` gives ``cm.fit_map``, "
            "``cm.sample``, ``cm.auto_fit``, ``cm.compare_models``, ``cm.ppc``, ``cm.sbc`` "
            "and the submodules.\n\n")
    text = head + "\n".join(sections)
    path = folder / "index.rst"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


# ------------------------------------------------------------ case studies
def copy_case_studies(folder: Path) -> None:
    """The case studies as notebook sources of the site (unchanged files are not
    rewritten, so the execution cache and Sphinx's own stay valid)."""
    folder.mkdir(exist_ok=True)
    for source in sorted((ROOT / "case_studies").glob("*.py")):
        target = folder / source.name
        if not target.exists() or target.read_bytes() != source.read_bytes():
            shutil.copyfile(source, target)


# ------------------------------------------------------ cross-references
def _resolve_reexport(app, env, node, contnode):
    """Resolve a reference to a name by where it is documented: ``cm.sample`` is
    ``crowd_models.inference.sample``, ``report.annotator_summary`` is
    ``crowd_models.report.summary.annotator_summary``, and a relative name is
    looked up from the referring module."""
    from sphinx.util.nodes import make_refnode

    target = node.get("reftarget", "")
    module = node.get("py:module") or ""
    domain = env.get_domain("py")
    for name in (target, f"{module}.{target}", f"crowd_models.{target}",
                 f"crowd_models.models.{target}"):
        parts = name.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except (ImportError, ValueError):  # ValueError: an empty module name
                continue
            try:
                for attr in parts[cut:]:
                    obj = getattr(obj, attr)
            except AttributeError:
                break
            home = getattr(obj, "__module__", None)
            qual = getattr(obj, "__qualname__", None)
            if home and qual:
                full = f"{home}.{qual}"
                if full in domain.objects:
                    entry = domain.objects[full]
                    return make_refnode(app.builder, node["refdoc"], entry.docname,
                                        entry.node_id, contnode, full)
            break
    return None


def setup(app):
    app.connect("missing-reference", _resolve_reexport)


write_api(HERE / "api")
copy_case_studies(HERE / "case_studies")
