# Two entry points: `make demo` runs the samples (Python, then the same in C++ through the
# C SDK), `make test` runs the test suite. Both create or refresh the virtual environment
# in .venv themselves: `demo` installs the runtime dependencies only, `test` and `bench`
# add the test extras (PyTorch, pytest, ...). The suite runs in JOBS processes (pytest-xdist;
# `make test JOBS=0` runs it in one).
PYTHON  ?= python3
VENV    ?= .venv
PY      := $(VENV)/bin/python
PIP     := $(PY) -m pip install --quiet --disable-pip-version-check
RUNTIME := $(VENV)/.installed-runtime
EXTRAS  := $(VENV)/.installed-test
JOBS    ?= 2

.PHONY: demo test bench clean

$(RUNTIME): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) -e .
	touch $(RUNTIME)

$(EXTRAS): $(RUNTIME)
	$(PIP) -e '.[test]'
	touch $(EXTRAS)

demo: $(RUNTIME)
	$(VENV)/bin/aclnn demo
	$(PY) examples/c/demo.py

test: $(EXTRAS)
	$(PY) -m ruff check src tests examples benchmarks tools
	$(PY) -m pytest -q -n $(JOBS) --dist worksteal

bench: $(EXTRAS)
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .hypothesis
