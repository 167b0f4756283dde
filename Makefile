# Two entry points: `make demo` (the main job) and `make test` (the whole suite).
# Both bootstrap everything from a clean clone: uv (from PyPI, into the pyenv
# Python that .python-version selects), then the locked environment in .venv.
PYTHON ?= python3
UV := $(PYTHON) -m uv
export UV_PYTHON_DOWNLOADS := never

.PHONY: demo test test-fast validate lint benchmark case-studies examples mutate clean

.venv/.synced: pyproject.toml uv.lock
	@$(UV) --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet --disable-pip-version-check uv
	$(UV) sync --locked --extra dev --extra jax --extra distributed
	@touch $@

demo: .venv/.synced
	$(UV) run --no-sync crowd-models demo

test: .venv/.synced
	$(UV) run --no-sync pytest -m "not validate"

test-fast: .venv/.synced
	$(UV) run --no-sync pytest -m "not slow and not validate"

# heavier checks kept out of `make test` (its 20-minute budget on 2 cores), then
# the calibration study (hours), which writes validation/README.md
validate: .venv/.synced
	$(UV) run --no-sync pytest -m validate
	$(UV) run --no-sync python validation/study.py

lint: .venv/.synced
	$(UV) run --no-sync ruff check crowd_models tests case_studies benchmarks validation

benchmark: .venv/.synced
	for script in benchmarks/*.py; do $(UV) run --no-sync python $$script || exit 1; done

case-studies: .venv/.synced
	for script in case_studies/[!_]*.py; do $(UV) run --no-sync python $$script || exit 1; done

# runs the Example of every public function's docstring (about 6 minutes); the
# suite checks only that each exists, parses and defines the names it uses
examples: .venv/.synced
	$(UV) run --no-sync python tools/examples.py $(EXAMPLES_ARGS)

# mutation testing of the core (not part of `make test`): plants small bugs in the
# functions listed in tools/mutate.py, runs their fast tests, prints the survivors.
# A limited run: make mutate MUTATE_ARGS="--only label_switch common --jobs 2"
mutate: .venv/.synced
	$(UV) run --no-sync python tools/mutate.py $(MUTATE_ARGS)

clean:
	rm -rf .venv crowd_models_demo crowd_models_report
