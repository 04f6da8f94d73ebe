# Developer shortcuts. `make test` is the fast tier; `make test-all` is what CI runs (README, .ci/run).
#
#   make venv      .venv with the kit installed editable, all extras, torch pinned
#   make demo      grade the sample class (examples/submissions) into attnkit-results/
#   make test      the fast tier: every test not marked slow, then the linter
#   make test-all  every test, then the linter and the type checker
#   make tox       the full matrix: py310 … py313, lint, type (see tox.ini)
#   make clean     build outputs and caches; `make distclean` also drops .venv and .tox

PYTHON ?= python3
VENV ?= .venv
# pytest workers (pytest-xdist), a test file per worker: two, one per core of the 2-core CI machine.
# `make test TEST_JOBS=0` runs the suite in one process.
TEST_JOBS ?= 2
PIP_INSTALL = $(VENV)/bin/python -m pip install -c constraints.txt
# Re-install whenever the dependencies or the pins change.
STAMP := $(VENV)/.attnkit-installed

.PHONY: venv demo test test-all tox clean distclean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) -e ".[all]"
	@touch $@

demo: venv
	$(VENV)/bin/attnkit grade

test: venv
	$(VENV)/bin/python -m pytest -q -n $(TEST_JOBS) --dist loadfile -m "not slow"
	$(VENV)/bin/ruff check .

test-all: venv
	$(VENV)/bin/python -m pytest -q -n $(TEST_JOBS) --dist loadfile --durations=25
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy grader

tox: venv
	@$(VENV)/bin/python -m tox --version >/dev/null 2>&1 || $(PIP_INSTALL) "tox>=4.11"
	$(VENV)/bin/python -m tox $(TOXARGS)

clean:
	rm -rf build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis attnkit-results
	find . -path ./$(VENV) -prune -o -path ./.tox -prune -o -name __pycache__ -type d -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) .tox
