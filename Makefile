# Everyday commands. The virtual environment is made on first use; stamp files remember what was
# installed into it so `make up` does not reinstall every time (delete .venv to start over).
#
# Every machine installs the exact versions the tests ran: requirements/run.lock (`make up`, the
# Docker image) and requirements/test.lock (`make test`, CI), exact pins of every package.
# `make lock` writes both from pyproject.toml's bounds: test.lock is `pip freeze` of a clean
# virtualenv that installed the project with its test extra from the package index, run.lock that
# of one that installed the project alone under test.lock's versions. `make test-upgrade` runs
# the worker tests on the newest versions the bounds allow, in a throwaway virtualenv. Upgrading
# a dependency, step by step: docs/operate.md, "Upgrading dependencies".

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_TEST := $(VENV)/.installed-test
RUN_LOCK := requirements/run.lock
TEST_LOCK := requirements/test.lock
LOCK_VENV := .venv-lock
UPGRADE_VENV := .venv-upgrade
LOCK_HEADER := \# Written by make lock from pyproject.toml (pip freeze of a clean virtualenv): do not edit.

# The suite spends most of its time waiting on the processes it starts, so `make test` runs its
# files on three processes (pytest-xdist), a file's tests on one of them, in order, sharing the
# file's fixtures. `make test PARALLEL=` runs them one after another.
PARALLEL ?= -n 3 --dist loadfile

.PHONY: up test test-fast test-upgrade lint format bench lock clean

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
	$(BIN)/pytest -q $(PARALLEL)

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

$(STAMP_RUN): pyproject.toml $(RUN_LOCK) | $(BIN)/python
	$(BIN)/pip install -q -r $(RUN_LOCK) -e .
	touch $@

$(STAMP_TEST): pyproject.toml $(TEST_LOCK) | $(BIN)/python
	$(BIN)/pip install -q -r $(TEST_LOCK) -e '.[test]'
	touch $@ $(STAMP_RUN)

# The worker's tests and Celery's own paths through its strategy (tests/e2e/test_celery_paths.py)
# on the newest versions pyproject.toml's bounds allow, not the locked ones; the virtualenv is
# thrown away after. Run it before `make lock`: a lock is only as good as the tests it passed.
test-upgrade:
	rm -rf $(UPGRADE_VENV)
	$(PYTHON) -m venv $(UPGRADE_VENV)
	$(UPGRADE_VENV)/bin/pip install -q --upgrade --upgrade-strategy eager -e '.[test]'
	@$(UPGRADE_VENV)/bin/python -c "from importlib.metadata import version as v; \
		print('newest allowed:', *(f'{p} {v(p)}' for p in ('celery', 'kombu', 'gevent', \
		'greenlet', 'gunicorn', 'redis', 'httpx', 'httpcore')))"
	$(UPGRADE_VENV)/bin/pytest -q -p no:cacheprovider tests/worker tests/e2e/test_celery_paths.py; \
		status=$$?; rm -rf $(UPGRADE_VENV); exit $$status

lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/pip install -q '.[test]'
	{ echo '$(LOCK_HEADER)'; $(LOCK_VENV)/bin/pip freeze --exclude mini-n8n; } > $(TEST_LOCK)
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/pip install -q -c $(TEST_LOCK) .
	{ echo '$(LOCK_HEADER)'; $(LOCK_VENV)/bin/pip freeze --exclude mini-n8n; } > $(RUN_LOCK)
	rm -rf $(LOCK_VENV) build

clean:
	rm -rf $(VENV) $(LOCK_VENV) $(UPGRADE_VENV) .pytest_cache .ruff_cache build *.egg-info
