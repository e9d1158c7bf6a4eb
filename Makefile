# One command per job; each creates the virtual environment on a fresh machine first.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint typecheck unit serve bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

## test: lint, type-check and run the whole suite (SQLite, PostgreSQL, moto); CI runs exactly this.
test: $(STAMP) lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest -n 2 -q

## serve: the HTTP API on http://127.0.0.1:3000 over the embedded default (SQLite, local skills, in-process queue).
serve: $(STAMP)
	$(BIN)/python -m threadloom.local_server --host 127.0.0.1 --port 3000 --data-dir .threadloom

## bench: print the speed figures quoted in the issues.
bench: $(STAMP)
	$(BIN)/python bench/append_and_history.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .threadloom
