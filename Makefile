# One command per job; each creates the virtual environment on a fresh machine first.
PYTHON ?= python3.11
PORT ?= 3000
TENANT ?= local
DATA_DIR ?= .threadloom
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint typecheck unit serve bench clean clean-env reset-data

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "make: $(PYTHON) not found; Threadloom needs Python 3.11 or newer: run make PYTHON=python3.X ..."; exit 1; }
	@echo "First-run set-up: creating $(VENV) with $$($(PYTHON) --version) and installing Threadloom and its test tools (2-3 minutes, once)..."
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)
	@echo "Set-up done."

## test: lint, type-check and run the whole suite (SQLite, PostgreSQL, moto, the docs); CI runs exactly this.
test: $(STAMP) lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest -n 2 -q

## serve: the HTTP API on http://127.0.0.1:$(PORT) over the embedded default (SQLite, local skills,
## in-process queue). Data stays in $(DATA_DIR); every request belongs to tenant $(TENANT). Ctrl-C stops it.
serve: $(STAMP)
	@$(BIN)/python -m threadloom.local_server --host 127.0.0.1 --port $(PORT) --data-dir $(DATA_DIR) --tenant $(TENANT)

## bench: print the speed figures quoted in the issues.
bench: $(STAMP)
	$(BIN)/python bench/append_and_history.py

## clean-env: remove the virtual environment and tool caches; the local data in $(DATA_DIR) is kept.
clean-env:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

## reset-data: delete the local server's data in $(DATA_DIR) (sessions, messages, skills); stop the server first.
reset-data:
	rm -rf $(DATA_DIR)

## clean: both of the above, so it deletes ALL local data too.
clean: clean-env reset-data
