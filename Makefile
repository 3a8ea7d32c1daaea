# Two commands on a fresh machine with Python 3.11 and make:
#   make run   - create .venv, install, run the main job on the built-in default cluster
#   make test  - create .venv, install with the test extras, run the test suite
# and
#   make docs  - the same set-up with the docs extra, build the documentation site into site/
#                in strict mode (a broken link or reference fails the build)
#   make notebook - the same set-up with JupyterLab, open notebooks/ in it
#   make notebooks-refresh - re-execute notebooks/ and store their outputs (after changing them)
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test docs notebook notebooks-refresh bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e ".[analysis,test,distributed,traces]"
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/flowsolver study

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=25 --nbmake notebooks topologies flowsolver tests

DOCS_STAMP := $(VENV)/.installed-docs

$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[docs]"
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

NOTEBOOK_STAMP := $(VENV)/.installed-notebook

$(NOTEBOOK_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[notebook]"
	touch $(NOTEBOOK_STAMP)

notebook: $(NOTEBOOK_STAMP)
	$(BIN)/jupyter lab notebooks/

notebooks-refresh: $(STAMP)
	$(BIN)/python notebooks/refresh.py

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) build site *.egg-info
