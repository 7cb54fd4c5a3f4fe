# What the README's commands call. `make demo` is the main job; `make test` runs every test.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint typecheck unit

$(BIN)/accelbench: pyproject.toml
	scripts/setup-venv.sh $(PYTHON) $(VENV)
	touch $@

setup: $(BIN)/accelbench

demo: setup
	$(BIN)/accelbench demo

lint: setup
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: setup
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest tests/unit -q

test: setup lint typecheck
	scripts/test-prereqs.sh $(BIN)
	$(BIN)/pytest -q
