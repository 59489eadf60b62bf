# moltscope: `make run` starts the embedded stack, `make test` runs the whole suite.
# Both create .venv and install everything the project needs on a fresh machine.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The CPU build of torch 2.13.0 lies on disk on our machines; pip must not pull a CUDA build.
FIND_LINKS := $(if $(wildcard /opt/wheels),--find-links /opt/wheels)
# The interpreter of a new .venv: Debian's python3.11 where the machine has it (its libpython
# linked into the executable and built optimised, as the Docker image's python:3.11 is; the
# default pyenv build, a shared libpython without --enable-optimizations, runs the society
# pipeline ~5 % slower: bench_compare --base-python), else the python3 on PATH.
PYTHON ?= $(firstword $(wildcard /usr/bin/python3.11) python3)

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(FIND_LINKS) torch==2.13.0
	$(PY) -m pip install --quiet $(FIND_LINKS) -c constraints.txt -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	HF_HUB_OFFLINE=1 $(VENV)/bin/moltscope up

test: $(STAMP)
	bash scripts/install-system-deps.sh
	$(VENV)/bin/ruff check .
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q

bench: $(STAMP)
	for b in bench/bench_*.py; do echo "== $$b"; HF_HUB_OFFLINE=1 $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) var .pytest_cache .ruff_cache
