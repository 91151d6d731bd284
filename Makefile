# Two commands do everything on a fresh machine: `make test` and `make reproduce`.
# Both create .venv and install the pinned requirements on first use.

PYTHON ?= $(shell for p in python3.11 python3.10 python3.9 python3; do \
            command -v $$p >/dev/null 2>&1 && { echo $$p; break; }; done)
# dm-reverb 0.14 ships wheels for CPython 3.9-3.11 only.
PY_VERSION := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
ifeq ($(filter 3.9 3.10 3.11,$(PY_VERSION)),)
$(error unsupported Python '$(PYTHON)' (version '$(PY_VERSION)'): use CPython 3.9, 3.10 or 3.11, e.g. make PYTHON=python3.11)
endif

VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-requirements
PROFILE ?= quick

.PHONY: test reproduce lint setup clean-venv

setup: $(STAMP)

$(STAMP): requirements.txt constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.txt -c constraints.txt
	cp requirements.txt $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .

test: lint
	# Whole files per worker: a module's expensive fixtures (trained runs) are built once. Files go out in
	# collection order, which tests/conftest.py starts with the longest.
	$(BIN)/python -m pytest -n auto --maxprocesses 4 --dist loadfile --no-loadscope-reorder tests

reproduce: $(STAMP)
	$(BIN)/python -m reproduce --profile=$(PROFILE)

clean-venv:
	rm -rf $(VENV)
