# grind: the two set-up commands are `make demo` and `make test` (see README.md).
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.grind-installed

.PHONY: install demo lint check test test-extras bench docs man clean

# A virtualenv with grind installed in editable mode, its Cython kernels compiled.
$(STAMP): setup.py pyproject.toml $(wildcard csrc/*.pyx csrc/*.pxd csrc/*.h)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

install: $(STAMP)

# The main job on the shipped UD English-EWT sample: make a grammar, initialise, train, parse, evaluate.
demo: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" bash bin/demo

# Static checks (a few seconds; settings in pyproject.toml [tool.ruff] and [tool.mypy]).
lint: $(STAMP)
	status=0; $(BIN)/ruff check grind tests || status=1; $(BIN)/mypy || status=1; exit $$status

# lint, then the test suite (all of it: what CI runs), in $(JOBS) worker processes (pytest-xdist).
JOBS ?= 2
test: lint
	$(BIN)/python -m pytest -q -n $(JOBS)

# The edit loop: lint, then the tests not marked slow (a few minutes on 2 cores; `make test` runs them all).
check: lint
	$(BIN)/python -m pytest -q -n $(JOBS) -m "not slow"

# The reference pages (docs/reference/COMMAND.md) and man pages (docs/man/grind-COMMAND.1), made from the
# click commands (grind/cli/docs.py); tests/test_docs.py fails while a committed page is stale.
docs: $(STAMP)
	$(BIN)/python -m grind.cli.docs docs > /dev/null

# The man pages alone (read one with `man -l docs/man/grind-train.1`).
man: $(STAMP)
	$(BIN)/python -m grind.cli.docs --man docs > /dev/null

# The tests that skip without the optional extras (Dask, matplotlib: pyproject.toml's [dask] and [plot]), with
# them installed into the venv; CI runs this after `make test`.
test-extras: $(STAMP)
	$(BIN)/python -m pip install -q 'dask[distributed]>=2023.1' 'matplotlib>=3.5'
	$(BIN)/python -m pytest -q tests/test_dask_backend.py tests/test_plot_show.py tests/test_bench_scaling.py

# E-step throughput against references measured in the same run (one core).
bench: $(STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(BIN)/python -m grind.bench

clean:
	rm -rf build demo-out bench-out .mypy_cache .ruff_cache grind/*.so grind/kernels/*.so csrc/*.c *.egg-info
