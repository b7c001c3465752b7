# ddl-course: the two user commands are `make lab` and `make test` (see README.md).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.install-stamp
# JupyterLab refuses to start as root unless told; harmless for other users.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: help install lab test test-fast notebooks lint bench clean

help:
	@echo "make lab        open the course in JupyterLab (installs into .venv first)"
	@echo "make test       run every test: unit, property, notebooks (nbval)"
	@echo "make test-fast  unit tests only, no notebooks and no slow tests"
	@echo "make notebooks  re-execute every notebook in place (refreshes stored outputs)"
	@echo "make bench      run the side-by-side benchmarks in benchmarks/"
	@echo "make lint       ruff check"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Re-install only when pyproject.toml changed since the last install.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --upgrade --quiet pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

lab: $(STAMP)
	$(BIN)/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir=notebooks $(ROOT_FLAG)

# Unit and property tests, the library's doctests, and every notebook under nbval.
test: $(STAMP)
	$(BIN)/python -m pytest tests course_lib notebooks --doctest-modules --nbval-lax --nbval-current-env -p no:cacheprovider

test-fast: $(STAMP)
	$(BIN)/python -m pytest tests -m "not slow and not browser" -q

notebooks: $(STAMP)
	$(BIN)/jupyter nbconvert --to notebook --execute --inplace notebooks/*.ipynb

lint: $(STAMP)
	$(BIN)/ruff check .

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf build .pytest_cache .ruff_cache
