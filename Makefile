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
.PHONY: help install install-dev demo lint test chromium bench report verify validate wheelhouse install-offline device-check \
	clean

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  make %-16s %s\n", $$1, $$2}'

# TORCH_SPEC= (empty): the venv sees the host's site-packages (its torch, torch_npu, torchvision) and pip is held
# to the host's torch by a constraint, so it never installs a torch of its own over it (it fails instead, naming
# the package that wanted another torch).
HOST_TORCH_CONSTRAINT := $(VENV)/host-torch-constraint.txt
# setuptools' one notice for an editable install through its import finder (the finder is what maps
# ascendbench.conf onto the top-level conf/): informational, filtered by its message in the build backend.
QUIET_EDITABLE := PYTHONWARNINGS="ignore:Editable installation"
$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(if $(TORCH_SPEC),,--system-site-packages) $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@if [ -n "$(TORCH_SPEC)" ]; then $(PY) -m pip install -q $(TORCH_SPEC); \
	else $(PY) -c 'import torch' 2>/dev/null || { echo "install: TORCH_SPEC= keeps the host's torch, but $(PY) \
	cannot import torch (was $(VENV) made without --system-site-packages? remove it and rerun; or install torch \
	for this python first)"; exit 2; }; \
	$(PY) -c 'import torch; print("torch==" + torch.__version__)' > $(HOST_TORCH_CONSTRAINT); \
	echo "install: keeping the host's $$(cat $(HOST_TORCH_CONSTRAINT))"; fi
	$(QUIET_EDITABLE) $(PY) -m pip install -q -e . $(if $(TORCH_SPEC),,-c $(HOST_TORCH_CONSTRAINT))
	@# An Ascend host (npu-smi or a sourced CANN): the torch_npu wheel built for its torch and CANN, torch left alone
	@if command -v npu-smi >/dev/null 2>&1 || [ -n "$$ASCEND_HOME_PATH" ]; then \
	  spec=$$($(PY) ascendbench/npu_wheels.py --spec) && $(PY) -m pip install -q --no-deps "$$spec" \
	  && echo "install: $$spec (the wheel for this torch and CANN)" || echo "install: torch_npu left as it is"; fi
	@touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(QUIET_EDITABLE) $(PY) -m pip install -q -e '.[dev]' $(if $(TORCH_SPEC),,-c $(HOST_TORCH_CONSTRAINT))
	@touch $@

install: $(VENV)/.installed ## create .venv if missing and install ascendbench into it
install-dev: $(VENV)/.installed-dev ## install with the test tools (the `dev` extra)

demo: install ## run `python -m ascendbench` with its defaults (auto device, mini preset); ARGS=... adds overrides
	$(PY) -m ascendbench $(ARGS)

lint: install-dev ## ruff check of the whole tree
	$(PY) -m ruff check .

test: install-dev chromium ## run the whole test suite; screenshots of report.html land in test-artifacts/
	ASCENDBENCH_TEST_ARTIFACTS="$${ASCENDBENCH_TEST_ARTIFACTS:-$(CURDIR)/test-artifacts}" $(PY) -m pytest $(ARGS)

# The HTML report's browser test (tests/report/test_html_browser.py) drives a system Chromium; where it is
# missing and this is root with apt-get (CI, a container), Debian's package is installed; otherwise the test
# is skipped and says why.
chromium: ## install Debian's chromium for the report.html browser test where missing (root + apt-get only)
	@command -v chromium >/dev/null 2>&1 && exit 0; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "chromium: installing Debian's package for the browser test"; \
	  apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && \
	    apt-get install -y -q chromium >/dev/null 2>&1; } || echo "chromium: could not be installed; the browser test will be skipped"; \
	else echo "chromium: not installed (needs root + apt-get here); the browser test will be skipped"; fi

bench: install ## run every benchmark of ascendbench itself (benchmarks/bench_*.py); prints measured ratios
	@set -e; for script in benchmarks/bench_*.py; do echo "== $$script"; $(PY) $$script; done

report: install ## records under outputs/ and multirun/ -> reports/report.md, CSV, plots, port/<model>.md; README=path back-fills its markers; REPORT_LANG=zh
	$(PY) -m ascendbench.report --port $(if $(REPORT_LANG),--lang $(REPORT_LANG)) $(if $(README),--readme $(README)) $(ARGS)

verify: install ## check this host: versions, devices, attention backends, LPIPS weights, hub; ARGS="--require npu"
	$(PY) -m ascendbench.verify $(ARGS)

validate: install ## every option of every config group composes and every _target_ binds (nothing is loaded)
	$(PY) -m ascendbench.validate $(ARGS)

# Every package ascendbench needs at run time (scripts/wheel_set.py: the installed requirement closure)
# but torch, torchvision, torch_npu and torch's CUDA wheels, as wheels for WHEEL_PY and WHEEL_ARCH (x86_64,
# or aarch64 for Kunpeng hosts; manylinux tags), plus ascendbench itself: `make wheelhouse` fills
# WHEELHOUSE (.whl/), which `make install-offline` (or scripts/device_check.sh, into /tmp/site) installs on
# the device host (no registry there). WHEEL_SKIP leaves packages out: imageio-ffmpeg (68 MB) by default,
# to fit a 64 MiB transfer (the mp4 files are then skipped with a warning); add what the image has.
WHEEL_SKIP ?= imageio-ffmpeg
WHEEL_PY ?= 3.12
WHEEL_ARCH ?= x86_64
WHEEL_PLATFORMS = $(foreach p,manylinux_2_28 manylinux_2_17 manylinux2014,--platform $(p)_$(WHEEL_ARCH))
WHEELHOUSE ?= .whl
wheelhouse: install ## WHEELHOUSE (.whl/): wheels a CUDA/NPU image lacks + ascendbench (WHEEL_PY=3.12, WHEEL_ARCH=x86_64|aarch64)
	@case "$(WHEEL_ARCH)" in x86_64|aarch64) ;; *) echo "WHEEL_ARCH=$(WHEEL_ARCH): use x86_64 or aarch64"; exit 2;; esac
	@mkdir -p "$(WHEELHOUSE)" && rm -f "$(WHEELHOUSE)"/*.whl
	$(PY) -m pip download -q --no-deps --only-binary=:all: --python-version $(WHEEL_PY) --implementation cp \
	  $(WHEEL_PLATFORMS) -d "$(WHEELHOUSE)" $$($(PY) scripts/wheel_set.py | \
	  grep -v -E "^($$(echo antlr4-python3-runtime $(WHEEL_SKIP) | sed 's/ /|/g'))==")
	$(PY) -m pip wheel -q --no-deps -w "$(WHEELHOUSE)" "antlr4-python3-runtime==$$($(PY) -c 'import importlib.metadata as m; print(m.version("antlr4-python3-runtime"))')"
	$(PY) -m pip wheel -q --no-deps --no-build-isolation -w "$(WHEELHOUSE)" . 2>/dev/null
	@ls "$(WHEELHOUSE)"

# On the accelerator host, with its own python (PYTHON=...) and its own torch: no index, the wheel folder only;
# torch/torchvision/torch_npu wheels are never taken from it. Then the supported floor and the requirements.
install-offline: ## install ascendbench from WHEELHOUSE=dir (no network) onto this host's own torch; PYTHON=its python
	@test -d "$(WHEELHOUSE)" || { echo "install-offline: WHEELHOUSE=$(WHEELHOUSE) is not a directory; run \
	\`make wheelhouse\` on a host with a package index and copy the folder here"; exit 2; }
	$(PYTHON) -m pip install --no-index --find-links "$(WHEELHOUSE)" --no-deps \
	  $$(ls "$(WHEELHOUSE)"/*.whl | grep -v -E '/(torch|torchvision|torch_npu)-[0-9]')
	$(PYTHON) -m ascendbench.compat

device-check: ## on an accelerator host: the prepared device check (DEVICE=cuda|npu, OUT=dir; wheels from .whl/)
	bash scripts/device_check.sh $(or $(DEVICE),cuda) $(or $(OUT),device-check)

npu-manifest: install ## pip download torch_npu wheels (VERSIONS=..., into /tmp/npu-wheels) -> tests/devices/npu_manifest/*.json
	$(PY) scripts/npu_manifest.py $(VERSIONS)

clean: ## remove outputs/, multirun/ and caches (keeps .venv)
	rm -rf outputs multirun reports .pytest_cache
