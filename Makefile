# Everyday commands. The virtual environment is made on first use; stamp files remember what was
# installed into it so `make up` does not reinstall every time (delete .venv to start over).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_TEST := $(VENV)/.installed-test

.PHONY: up test test-fast lint format bench clean

up: $(STAMP_RUN)
	$(BIN)/mini-n8n up

# What the suite needs beyond Python packages: podman & co. for tests/compose, chromium for the
# browser tests, prometheus for the metrics test, rabbitmq-server and nginx for tests/scale.
# Each script returns at once when it is all there; it installs it when root with apt, and
# otherwise warns (the compose tests are then skipped, naming why; the others fail, naming the
# script).
test: $(STAMP_TEST)
	scripts/ensure-podman
	scripts/ensure-chromium
	scripts/ensure-prometheus
	scripts/ensure-rabbitmq
	scripts/ensure-nginx
	scripts/ensure-nftables
	$(BIN)/pytest -q

# The packages' own tests only (no api, worker, browser or compose started): under a minute.
test-fast: $(STAMP_TEST)
	$(BIN)/pytest -q -m fast

lint: $(STAMP_TEST)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(STAMP_TEST)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# Benchmarks are not tests: each bench/*.py script prints its own figures.
# Every benchmark once; bench/compare.py is left out: it compares two commits and needs a ref.
bench: $(STAMP_TEST)
	@for script in bench/[!_]*.py; do \
		[ -e "$$script" ] || { echo "no benchmarks in bench/"; break; }; \
		[ "$$script" = bench/compare.py ] && continue; \
		echo "== $$script"; $(BIN)/python "$$script" || exit 1; \
	done

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP_RUN): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(STAMP_TEST): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	touch $@ $(STAMP_RUN)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info
