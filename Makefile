# The documented commands.  `make run` and `make test` each set up everything
# they need (a virtual environment with pinned packages, the agent, Chart.js
# from npm) and work on a fresh machine with Python 3.11+ and Node.js.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test setup lint format bench soak agent-zipapp guests clean

$(STAMP): requirements.txt requirements-dev.txt agent/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt
	$(BIN)/pip install --quiet -e ./agent
	touch $(STAMP)

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	touch node_modules/.installed

setup: $(STAMP) node_modules/.installed

## Run benchdb on its embedded defaults: http://127.0.0.1:8000
run: setup
	DEBUG=$${DEBUG:-true} $(BIN)/python manage.py serve

## Set up and run the whole test suite (real PostgreSQL, worker, tools, browser).
test: setup
	bash scripts/system-deps.sh
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/vermin -t=3.8- --no-tips --violations --no-parse-comments agent/benchdb_agent
	$(BIN)/python manage.py check
	$(BIN)/python manage.py makemigrations --check --dry-run
	BENCHDB_BROKER_DIR=$${BENCHDB_BROKER_DIR:-var/test-broker} $(BIN)/pytest $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

## Speed and memory figures (printed, not asserted).
bench: setup
	$(BIN)/python -m bench

## benchdb's embedded defaults used for MINUTES (default 30) on busy cores:
## uploads, visibility, moderation, pages; prints crashes, restarts, ingest,
## the longest wait and stale counts (bench/soak.py).  make soak MINUTES=5
MINUTES ?= 30
soak: setup
	$(BIN)/python -m bench.soak --minutes $(MINUTES)

## Build the real QEMU guest and run the guest matrix; bundles in var/guests
## (SERVER=http://127.0.0.1:8000 uploads them to a running benchdb).
guests: setup
	bash scripts/system-deps.sh
	$(BIN)/python -m tests.guests.matrix --out var/guests $(if $(SERVER),--server $(SERVER))

clean:
	rm -rf $(VENV) node_modules dist staticfiles
