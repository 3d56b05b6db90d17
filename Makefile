# Quick start: `make demo` (the whole pipeline, end to end) and `make test` (every test).
# Both bootstrap whatever is missing: uv, the locked virtualenv, Chromium, the embedded PostgreSQL; the tests'
# own tools (psql, a compose client and Docker's engine, debootstrap, npm, PgBouncer, libfaketime, iproute2, stress-ng,
# Prometheus) only for the test targets.
SHELL := /bin/bash
VENV := .venv/bin
export DAGSTER_HOME ?= $(CURDIR)

.PHONY: setup setup-tests demo test test-fast test-under-load ui dev chaos lint bench mutants db-up db-down clean

setup:
	@bash scripts/bootstrap.sh

setup-tests:
	@bash scripts/bootstrap.sh --tests

demo: setup
	$(VENV)/book-pipeline demo

# ruff's rules, ruff's format and mypy strict over the package, the tests, the benchmarks and the scripts
# (pyproject.toml); the same three run as pre-commit hooks (.pre-commit-config.yaml).
define lint_steps
	$(VENV)/ruff check .
	$(VENV)/ruff format --check .
	$(VENV)/mypy
endef

# The lint first: a lint or type error fails `make test` before the suite starts.
test: setup-tests
	$(lint_steps)
	$(VENV)/pytest

# The unit tests only (marker `unit`: every *_unit.py file and the pure test files that say so; the conftest
# refuses a unit test that asks for a server fixture): no PostgreSQL, Chromium or server. 319 of the 936 tests,
# 17-19 s of CPU with the collection; 35 s wall on the shared 2-core sandbox at load 11 (2026-12-04, 2266acc).
test-fast: setup
	$(VENV)/pytest -m unit -q

# The whole suite from a fresh clone while the machine is busy, three times (scripts/test_under_load.sh).
test-under-load: setup-tests
	bash scripts/test_under_load.sh $(ARGS)

chaos: setup-tests
	$(VENV)/pytest -m chaos

ui: setup
	$(VENV)/book-pipeline ui

# The same UI and daemon through the dg CLI (`dg dev`), on the project's Dagster instance.
dev: setup
	$(VENV)/python scripts/dg_dev.py $(ARGS)

lint: setup
	$(lint_steps)

bench: setup
	$(VENV)/python benchmarks/sandbox_bench.py
	$(VENV)/python benchmarks/queue_bench.py
	$(VENV)/python benchmarks/crawl_bench.py

# Every critical mutant in scripts/mutants.yaml must be killed by its tests (JSON report; exit 1 otherwise).
mutants: setup-tests
	$(VENV)/python scripts/mutants.py

db-up: setup
	$(VENV)/book-pipeline db up

db-down:
	$(VENV)/book-pipeline db down

clean: db-down
	rm -rf .data
