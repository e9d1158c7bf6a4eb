# One command per job; each creates the virtual environment on a fresh machine first.
# Python 3.13 is Lambda's runtime, so the suite runs on it: python3.13 on PATH, else pyenv's, else python3.11.
PYTHON ?= $(or $(shell for p in python3.13 "$$(pyenv root 2>/dev/null)"/versions/3.13*/bin/python3.13; do \
	"$$p" -c 'import sys' >/dev/null 2>&1 && { echo "$$p"; break; }; done),python3.11)
PORT ?= 3000
TENANT ?= local
DATA_DIR ?= .threadloom
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# SAM CLI lives in its own environment: its pins would fight the dev dependencies.
SAM_VENV := .venv-sam
SAM_VERSION := 1.170.0
SAM := $(SAM_VENV)/bin/sam
# checkov too: its exact pins would fight both. It installs from PyPI only and downloads nothing when it runs.
CHECKOV_VENV := .venv-checkov
CHECKOV_VERSION := 3.3.30
CHECKOV := $(CHECKOV_VENV)/bin/checkov

.PHONY: test lint typecheck unit browser-deps serve bench bench-cold-start load-test sam-build sam-validate sam-local checkov \
	template-check clean clean-env reset-data

# One set-up at a time: `make serve` and `make test` started together both wait on VENV_LOCK (flock, util-linux),
# and whoever gets it second finds the environment already built.
VENV_LOCK := $(VENV).lock
# The MCP function's pins constrain the dev environment, so its tests run the versions Lambda gets
# (tests/package/test_mcp_function.py checks they agree); a new release of one of them changes neither.
$(STAMP): pyproject.toml functions/mcp/requirements.txt
	@command -v $(PYTHON) >/dev/null || { echo "make: $(PYTHON) not found; Threadloom needs Python 3.11 or newer: run make PYTHON=python3.X ..."; exit 1; }
	@command -v flock >/dev/null || { echo "make: flock not found; install util-linux (apt-get install util-linux)"; exit 1; }
	@exec 9>$(VENV_LOCK) && flock 9 && \
	if [ -f $(STAMP) ] && [ $(STAMP) -nt pyproject.toml ] && [ $(STAMP) -nt functions/mcp/requirements.txt ]; then \
		echo "Set-up done by another make."; exit 0; fi && \
	echo "First-run set-up: creating $(VENV) with $$($(PYTHON) --version) and installing Threadloom and its test tools (2-3 minutes, once)..." && \
	{ test -x $(BIN)/python || $(PYTHON) -m venv $(VENV); } && \
	$(BIN)/python -m pip install --quiet --upgrade pip && \
	$(BIN)/python -m pip install --quiet -c functions/mcp/requirements.txt -e '.[dev]' && \
	touch $(STAMP) && \
	echo "Set-up done."

## test: lint, type-check and run the whole suite (SQLite, PostgreSQL, moto, the docs); CI runs exactly this.
test: $(STAMP) lint typecheck unit

$(SAM): Makefile
	test -x $(SAM_VENV)/bin/python || $(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(SAM_VENV)/bin/python -m pip install --quiet 'aws-sam-cli==$(SAM_VERSION)' 'cfn-lint-serverless==0.3.6'
	touch $(SAM)

## sam-validate / sam-build: what a deploy starts with (no AWS access needed; the build uses the local Python 3.13).
sam-validate: $(SAM)
	SAM_CLI_TELEMETRY=0 $(SAM) validate --lint --region eu-west-1

# The layer installs the wheel users install (layers/threadloom/Makefile): build it first, sdist then wheel.
sam-build: $(SAM) $(STAMP)
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null || { echo "make sam-build: \
	sam build needs Python 3.13 (Lambda's runtime) on PATH and found $(PYTHON); install 3.13, or run \
	$(SAM) build --use-container with Docker"; exit 1; }
	rm -rf layers/threadloom/dist
	$(BIN)/python -m build --outdir layers/threadloom/dist .
	PATH="$$(dirname "$$($(PYTHON) -c 'import sys; print(sys.executable)')"):$$PATH" SAM_CLI_TELEMETRY=0 \
		$(SAM) build --region eu-west-1 --build-dir .aws-sam/build

## sam-local: sam local start-api on port $(PORT) with the Powertools layer's ARN read from its public SSM
## parameter (needs AWS credentials and Docker; SAM CLI cannot resolve the template's {{resolve:ssm:...}}).
sam-local: $(SAM)
	layer="$$($(SAM_VENV)/bin/python -c 'import boto3, re, sys; \
	text = open("template.yaml").read(); \
	name = re.search(r"resolve:ssm:(/aws/service/powertools/[^}]+)", text).group(1); \
	print(boto3.client("ssm", region_name="eu-west-1").get_parameter(Name=name)["Parameter"]["Value"])')" && \
	SAM_CLI_TELEMETRY=0 $(SAM) local start-api --region eu-west-1 --port $(PORT) \
		--env-vars events/env.local.json --parameter-overrides "PowertoolsLayerArn=$$layer"

$(CHECKOV): Makefile
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(CHECKOV_VENV)/bin/python -m pip install --quiet 'checkov==$(CHECKOV_VERSION)'
	touch $(CHECKOV)

## checkov: every checkov finding on template.yaml is fixed or skipped in the resource's Metadata with a reason;
## a new one fails (CI). template-check: that, cfn-lint, and the SAM-expanded template for every parameter set.
checkov: $(CHECKOV)
	$(CHECKOV) --file template.yaml --framework cloudformation --compact --quiet --skip-download

template-check: $(STAMP) checkov
	$(BIN)/cfn-lint template.yaml
	$(BIN)/python -m pytest -q -n 2 -p no:cacheprovider tests/contract/test_template_expanded.py \
		tests/contract/test_deploy_template.py tests/contract/test_websocket_template.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP) browser-deps
	$(BIN)/python -m pytest -n 2 -q

## browser-deps: the inspector's browser tests need Debian's Chromium and chromedriver: installed here when
## make runs as root (as .ci/run does), else a failure that says what to run. THREADLOOM_SKIP_BROWSER=1 opts out.
browser-deps:
	@if [ "$${THREADLOOM_SKIP_BROWSER:-}" = 1 ]; then echo "THREADLOOM_SKIP_BROWSER=1: the inspector's browser tests will be skipped"; \
	elif ! { test -x "$${THREADLOOM_CHROMIUM:-/usr/bin/chromium}" && test -x "$${THREADLOOM_CHROMEDRIVER:-/usr/bin/chromedriver}"; }; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "Installing Chromium and chromedriver for the inspector's browser tests (apt-get)..." && \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
		else \
			echo "make: the inspector's browser tests need Chromium and chromedriver: run sudo apt-get install chromium chromium-driver (or THREADLOOM_SKIP_BROWSER=1 make test to skip them)"; exit 1; \
		fi; \
	fi

## serve: the HTTP API on http://127.0.0.1:$(PORT) over the embedded default (SQLite, local skills,
## in-process queue). Data stays in $(DATA_DIR); every request belongs to tenant $(TENANT). Ctrl-C stops it.
serve: $(STAMP)
	@$(BIN)/python -m threadloom.local_server --host 127.0.0.1 --port $(PORT) --data-dir $(DATA_DIR) --tenant $(TENANT)

## bench: print the speed figures quoted in the issues.
bench: $(STAMP)
	$(BIN)/python bench/append_and_history.py
	$(BIN)/python bench/history_paging.py
	$(BIN)/python bench/fork_and_branches.py
	$(BIN)/python bench/users_config.py
	$(BIN)/python bench/compaction.py --sizes 10000,100000

## load-test: 24 Lambda-like workers direct and through PgBouncer (transaction pooling) on a private PostgreSQL, then
## crashed mid-run: appends/s, p50/p99, errors by kind, recovery; about 6 minutes (needs Debian's pgbouncer).
load-test: $(STAMP)
	$(BIN)/python bench/pooler_load.py

## bench-cold-start: median import time of each Lambda handler in fresh interpreters, beside bare boto3/Powertools.
bench-cold-start: $(STAMP)
	$(BIN)/python bench/cold_start.py

## clean-env: remove the virtual environments, SAM's build folder and tool caches; the local data in $(DATA_DIR) is kept.
clean-env:
	rm -rf $(VENV) $(SAM_VENV) $(CHECKOV_VENV) .aws-sam .mypy_cache .ruff_cache .pytest_cache

## reset-data: delete the local server's data in $(DATA_DIR) (sessions, messages, skills); stop the server first.
reset-data:
	rm -rf $(DATA_DIR)

## clean: both of the above, so it deletes ALL local data too.
clean: clean-env reset-data
