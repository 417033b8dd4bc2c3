# ascendbench: `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch is installed first, on its own line: this pair runs on CPU here and carries torchvision for
# lpips. Hosts that bring their own torch (+ torch_npu on Ascend) run `make install TORCH_SPEC=`.
TORCH_SPEC ?= torch==2.14.1 torchvision==0.29.1
ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help install install-dev demo lint test bench report verify validate clean

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  make %-12s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@if [ -n "$(TORCH_SPEC)" ]; then $(PY) -m pip install -q $(TORCH_SPEC); fi
	$(PY) -m pip install -q -e .
	@touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[dev]'
	@touch $@

install: $(VENV)/.installed ## create .venv if missing and install ascendbench into it
install-dev: $(VENV)/.installed-dev ## install with the test tools (the `dev` extra)

demo: install ## run `python -m ascendbench` with its defaults (auto device, mini preset); ARGS=... adds overrides
	$(PY) -m ascendbench $(ARGS)

lint: install-dev ## ruff check of the whole tree
	$(PY) -m ruff check .

test: install-dev ## run the whole test suite
	$(PY) -m pytest $(ARGS)

bench: install ## run every benchmark of ascendbench itself (benchmarks/bench_*.py); prints measured ratios
	@set -e; for script in benchmarks/bench_*.py; do echo "== $$script"; $(PY) $$script; done

report: install ## records under outputs/ and multirun/ -> reports/report.md, CSV, plots; README=path back-fills its markers
	$(PY) -m ascendbench.report $(if $(README),--readme $(README)) $(ARGS)

verify: install ## check this host: versions, devices, attention backends, LPIPS weights, hub; ARGS="--require npu"
	$(PY) -m ascendbench.verify $(ARGS)

validate: install ## every option of every config group composes and every _target_ binds (nothing is loaded)
	$(PY) -m ascendbench.validate $(ARGS)

clean: ## remove outputs/, multirun/ and caches (keeps .venv)
	rm -rf outputs multirun reports .pytest_cache
