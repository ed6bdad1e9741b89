# The dev loop. `make test` is the full gate CI runs (scripts/test.sh); the others are its
# parts, for the minutes in between. Run `bash scripts/setup.sh` once first.
PY := .venv/bin/python
BIN := .venv/bin
export PYTHONPATH := $(CURDIR)

# What a bare `pip install -e '.[dev]'` can run: no llama.cpp and models, no original QMD,
# no PostgreSQL, no npm tools (CONTRIBUTING.md, "Test markers").
BARE := not models and not original and not postgres and not node

.PHONY: test-fast test lint gen gen-check bare help

help:
	@echo "make test-fast  unit and contract tests without models, the original, PostgreSQL, Node or slow ones"
	@echo "make lint       ruff, ruff format --check, mypy --strict, import-linter"
	@echo "make gen        regenerate what is generated (requirements, command table, ports table, ADR index)"
	@echo "make gen-check  fail if anything generated is out of date"
	@echo "make bare       every test a bare dev install can run"
	@echo "make test       the full gate CI runs (scripts/test.sh)"

test-fast:
	$(PY) -m pytest -q -m "$(BARE) and not slow" tests/unit tests/contract

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict
	$(BIN)/lint-imports

# Not here: the compatibility matrix (scripts/compatibility_matrix.sh, about 25 minutes with
# the original and the models; CI checks it).
gen:
	$(PY) scripts/gen_requirements.py
	$(PY) scripts/gen_cli_reference.py
	$(PY) scripts/gen_architecture.py
	$(PY) scripts/gen_adr_index.py

gen-check:
	$(PY) scripts/gen_requirements.py --check
	$(PY) scripts/gen_cli_reference.py --check
	$(PY) scripts/gen_architecture.py --check
	$(PY) scripts/gen_adr_index.py --check

bare:
	$(PY) -m pytest -q -m "$(BARE)"

test:
	bash scripts/test.sh
