# Two commands do all set-up on a fresh machine:
#   make demo   trains the built-in tiny model with the ScaleRL recipe on CPU and forecasts its curve
#   make test   lints (ruff) and runs the test suite's default tier (the slow end-to-end tier: make test-slow; CI runs both)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# The CPU wheel of torch first, so that the extras never pull a CUDA build.
	$(BIN)/pip install --quiet "torch==2.13.0"
	$(BIN)/pip install --quiet -e ".[train,distributed,dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/scalerl demo --out runs/demo
	@echo "scalerl is installed in $(VENV): run $(BIN)/scalerl, or 'source $(BIN)/activate' to put it on PATH"

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

# pre-commit runs the same ruff on every commit once `make hooks` installed it.
hooks: $(STAMP)
	$(BIN)/pre-commit install

test: lint
	$(BIN)/python -m pytest -q -m "not slow"

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

.PHONY: install demo lint hooks test test-slow
