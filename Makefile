# Two commands on a fresh machine with Python 3.11 and make:
#   make run   - create .venv, install, run the main job on the built-in default cluster
#   make test  - create .venv, install with the test extras, run the test suite
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e ".[analysis,test,distributed,traces]"
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/flowsolver study

test: $(STAMP)
	$(BIN)/python -m pytest -q --durations=25 topologies flowsolver tests --nbmake notebooks

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) build *.egg-info
