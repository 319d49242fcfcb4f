# Two entry points: `make demo` runs the samples (Python, then the same in C++ through the
# C SDK), `make test` runs the test suite. Both create or refresh the virtual environment
# in .venv themselves.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/aclnn demo
	$(PY) examples/c/demo.py

test: $(STAMP)
	$(PY) -m ruff check src tests examples benchmarks tools
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .hypothesis
