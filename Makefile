# Two entry points: `make demo` (the main job) and `make test` (the whole suite).
# Both bootstrap everything from a clean clone: uv (from PyPI, into the pyenv
# Python that .python-version selects), then the locked environment in .venv.
PYTHON ?= python3
UV := $(PYTHON) -m uv
export UV_PYTHON_DOWNLOADS := never

.PHONY: demo test test-fast validate lint benchmark case-studies examples mutate clean docs docs-check

# --compile-bytecode, as pip does by default: ~30 s more, once, and no process
# compiles the dependencies' source (the first `crowd-models fit` on a fresh
# machine: 10-12 s against 23-24 s; benchmarks/README.md, cold_start.py)
.venv/.synced: pyproject.toml uv.lock
	@$(UV) --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet --disable-pip-version-check uv
	$(UV) sync --locked --compile-bytecode --extra dev --extra jax --extra distributed --extra docs
	@touch $@

demo: .venv/.synced
	$(UV) run --no-sync crowd-models demo

# pyproject's addopts leave the validate tier out: `pytest` alone runs the same
test: .venv/.synced
	$(UV) run --no-sync pytest

test-fast: .venv/.synced
	$(UV) run --no-sync pytest -m "not slow and not validate"

# heavier checks kept out of `make test` (its 20-minute budget on 2 cores), then
# the calibration study (hours), which writes validation/README.md
validate: .venv/.synced
	$(UV) run --no-sync pytest -m validate
	$(UV) run --no-sync python validation/study.py

lint: .venv/.synced
	$(UV) run --no-sync ruff check crowd_models tests case_studies benchmarks validation tools docs

benchmark: .venv/.synced
	for script in benchmarks/*.py; do $(UV) run --no-sync python $$script || exit 1; done

case-studies: .venv/.synced
	for script in case_studies/[!_]*.py; do $(UV) run --no-sync python $$script || exit 1; done

# runs the Example of every public function's docstring (about 6 minutes); the
# suite checks that each exists, parses and defines the names it uses, and runs
# one per public module (tests/test_examples.py)
examples: .venv/.synced
	$(UV) run --no-sync python tools/examples.py $(EXAMPLES_ARGS)

# mutation testing of the core (not part of `make test`): plants small bugs in the
# functions listed in tools/mutate.py, runs their fast tests, prints the survivors.
# A limited run: make mutate MUTATE_ARGS="--only label_switch common --jobs 2"
mutate: .venv/.synced
	$(UV) run --no-sync python tools/mutate.py $(MUTATE_ARGS)

clean:
	rm -rf .venv crowd_models_demo crowd_models_report

# the documentation site (docs/_build/html): Sphinx with myst-nb, which
# executes the getting-started notebook and the case studies (cached: a rebuild
# re-runs only the changed ones); warnings are errors. DOCS_EXECUTE=off runs
# the getting-started notebook only (CI); DOCS_EXECUTE=force re-runs every
# notebook (the cache keys on a notebook's code, not on the package).
docs: .venv/.synced
	CROWD_MODELS_DOCS_EXECUTE=$(DOCS_EXECUTE) $(UV) run --no-sync sphinx-build -W --keep-going -b html docs docs/_build/html

# the built site in headless Chromium (installed from Debian when missing, where
# apt-get can): index, a case study and an API page load with their images and
# no 404; screenshots in docs/_build/screenshots/
docs-check: docs
	@command -v chromium >/dev/null 2>&1 || (apt-get install -y -qq chromium >/dev/null 2>&1 || (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1)) || true
	$(UV) run --no-sync python tools/docs_check.py
