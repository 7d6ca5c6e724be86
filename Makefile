# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SAMPLE_DB := build/sample/state.db
HERMES_DB := $(or $(HERMES_HOME),$(HOME)/.hermes)/state.db

.PHONY: run test install uninstall docs services hermes-env lint typecheck lock clean

# Installing says what it does (it takes a minute or two the first time) and is quiet otherwise.
$(BIN)/python:
	@echo "Creating a virtual environment in $(VENV) ..."
	@$(PYTHON) -m venv $(VENV)

# An install under the distribution name `kindling` (an unrelated project's name on the package index) would put
# a second copy of kindling's entry points beside this checkout's `kindling-agent`: it is removed first.
DROP_OTHER_DIST = $(BIN)/pip uninstall -q -y kindling >/dev/null 2>&1 || true; rm -rf src/kindling.egg-info

$(VENV)/.run-installed: requirements.lock pyproject.toml | $(BIN)/python
	@echo "Installing kindling's dependencies into $(VENV) (pinned in requirements.lock; a minute or two) ..."
	@$(BIN)/pip install -q -r requirements.lock
	@$(DROP_OTHER_DIST)
	@echo "Installing kindling itself into $(VENV) (editable) ..."
	@$(BIN)/pip install -q --no-deps -e .
	@touch $@
	@echo "Installed: $(BIN)/kindling"

# Constrained by the lock, so a dev dependency pyproject.toml gained since the lock was made still installs.
$(VENV)/.dev-installed: requirements-dev.lock pyproject.toml | $(BIN)/python
	@echo "Installing kindling's development dependencies into $(VENV) (requirements-dev.lock; a few minutes) ..."
	@$(BIN)/pip install -q -r requirements-dev.lock
	@$(DROP_OTHER_DIST)
	@echo "Installing kindling itself into $(VENV) (editable) ..."
	@$(BIN)/pip install -q -c requirements-dev.lock -e '.[dev]'
	@touch $@ $(VENV)/.run-installed
	@echo "Installed: $(BIN)/kindling and the test tools"

## run: install, then run kindling's main job on your Hermes sessions (else your Claude Code / Codex
##      sessions in ~/.claude, ~/.codex; else the bundled sample data):
##      count the sessions, report failure rates, build a template, show the warm start for a task
TASK ?= Fix the failing test in the parser module
run: $(VENV)/.run-installed
	@set -e; SRC="$(HERMES_DB)"; WHY=""; \
	if [ ! -f "$$SRC" ]; then \
	  WHY="No $$SRC"; \
	elif ! FOUND=$$($(BIN)/kindling sessions "$$SRC" --json 2>&1); then \
	  WHY="$$SRC cannot be read ($$(echo "$$FOUND" | tail -n 1))"; \
	elif ! echo "$$FOUND" | grep -q '"sessions": [1-9]'; then \
	  WHY="$$SRC holds no sessions yet"; \
	fi; \
	if [ -n "$$WHY" ]; then \
	  AGENTS=""; \
	  for HOME_DIR in "$${CLAUDE_CONFIG_DIR:-$$HOME/.claude}" "$${CODEX_HOME:-$$HOME/.codex}"; do \
	    if [ -d "$$HOME_DIR" ] && FOUND=$$($(BIN)/kindling sessions "$$HOME_DIR" --json 2>/dev/null) \
	      && echo "$$FOUND" | grep -q '"sessions": [1-9]'; then AGENTS="$$AGENTS $$HOME_DIR"; fi; \
	  done; \
	  if [ -n "$$AGENTS" ]; then \
	    SRC="$${AGENTS# }"; WHY=""; \
	    echo "No Hermes sessions ($$(echo "$(HERMES_DB)")), but coding-agent sessions in $$SRC: reading them (read-only)."; \
	  fi; \
	fi; \
	if [ -n "$$WHY" ]; then \
	  SRC="$(SAMPLE_DB)"; export KINDLING_HOME="$(CURDIR)/build/sample/kindling"; \
	  echo "$$WHY: using the bundled sample data ($$SRC); state goes to $$KINDLING_HOME."; \
	  $(BIN)/kindling sample "$$SRC" --quiet >/dev/null; \
	elif [ "$$SRC" = "$(HERMES_DB)" ]; then \
	  echo "Reading your Hermes sessions in $$SRC (read-only)."; \
	fi; \
	echo "kindling writes its state (template 'main') to $${KINDLING_HOME:-$$HOME/.kindling}; an unchanged rebuild adds no new version."; \
	$(BIN)/kindling sessions $$SRC; \
	$(BIN)/kindling stats $$SRC; \
	$(BIN)/kindling build main $$SRC --tag main; \
	echo; echo "Warm start for the task: $(TASK)"; \
	$(BIN)/kindling warm --auto --task "$(TASK)" --budget 1200

## test: install dev extras, start or install what the tests need, lint, type-check, build the docs site
##      (strict: a broken link or page fails), run the whole suite
test: $(VENV)/.dev-installed services hermes-env lint typecheck docs
	$(BIN)/python -m pytest

## install: put `kindling` on your PATH: its own virtual environment under $(PREFIX)/share/kindling-agent and a link
##      in $(PREFIX)/bin (or /usr/local/bin, as root, when $(PREFIX)/bin is not on the PATH; BINDIR=DIR chooses)
PREFIX ?= $(HOME)/.local
install:
	@PYTHON="$(PYTHON)" PREFIX="$(PREFIX)" BINDIR="$(BINDIR)" scripts/install

## uninstall: remove what `make install` put in place
uninstall:
	@PYTHON="$(PYTHON)" PREFIX="$(PREFIX)" BINDIR="$(BINDIR)" scripts/install --uninstall

## docs: build the documentation site (mkdocs-material) into build/site; `$(BIN)/mkdocs serve` previews it
docs: $(VENV)/.dev-installed
	@# Not --quiet: it hides the warnings that --strict turns into a failed build.
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir build/site

## hermes-env: Hermes Agent $(HERMES_VERSION) (pinned, with its dependencies) in its own cached virtual environment
##      under build/, with kindling installed into it so Hermes finds the plugin; the plugin's end-to-end tests run it
HERMES_VERSION := 0.19.0
HERMES_VENV := build/hermes-$(HERMES_VERSION)
HERMES_PYTHON ?= $(PYTHON)
hermes-env: $(HERMES_VENV)/.installed

$(HERMES_VENV)/.installed: tests/hermes/requirements.lock pyproject.toml
	rm -rf $(HERMES_VENV)
	$(HERMES_PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Hermes Agent needs Python 3.11 or later: set HERMES_PYTHON")'
	$(HERMES_PYTHON) -m venv $(HERMES_VENV)
	$(HERMES_VENV)/bin/pip install -q -r tests/hermes/requirements.lock
	@# Constrained by the lock, so a dependency pyproject.toml gained since the lock was made still installs.
	$(HERMES_VENV)/bin/pip install -q -c tests/hermes/requirements.lock -e .
	touch $@

## services: start the local PostgreSQL server when it is down, install Debian's chromium when it is missing
services:
	@scripts/test-services

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(VENV)/.dev-installed
	$(BIN)/mypy

## lock: re-pin dependencies after changing pyproject.toml, and the Hermes test environment's (needs uv: pip install uv)
lock:
	uv pip compile pyproject.toml --extra plot --universal --python-version 3.10 -o requirements.lock
	uv pip compile pyproject.toml --extra dev --universal --python-version 3.10 -o requirements-dev.lock
	uv pip compile pyproject.toml tests/hermes/requirements.in --python-version 3.11 -o tests/hermes/requirements.lock

clean:
	rm -rf $(VENV) build .pytest_cache .mypy_cache .ruff_cache
