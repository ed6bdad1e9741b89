#!/usr/bin/env bash
# The project's test command: static gates, then every test (unit, contract, integration,
# end-to-end, conformance against the original QMD and against ours), on pytest-xdist workers.
# Run scripts/setup.sh first.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
BIN=.venv/bin

# each gate says how long it took (CONTRIBUTING.md, "CI's time")
gate() {
  local start=$SECONDS rc=0
  "$@" || rc=$?
  echo "    ($((SECONDS - start)) s)"
  return "$rc"
}
# (two lines: a failure on the left of `&&` would not stop a `set -e` script)
echo "==> ruff"; gate "$BIN/ruff" check .
gate "$BIN/ruff" format --check .
echo "==> mypy --strict"; gate "$BIN/mypy" --strict
echo "==> import-linter"; gate "$BIN/lint-imports"
echo "==> spec and conformance data"
gate "$BIN/python" scripts/gen_requirements.py --check
gate "$BIN/qmd-conformance" validate
# The real model set is opt-in (QMD_SETUP_MODELS=real): its tests (the EmbeddingGemma goldens
# recorded from the original among them) run when the set is in .models/ or was asked for.
# QMD_TEST_REAL=0 leaves them out: CI runs them as a tier of their own beside this run
# (scripts/real_tier.sh, .ci/run). A later -m in "$@" takes precedence.
MARKS=(-m "not real_models")
if [[ "${QMD_TEST_REAL:-auto}" != 0 ]]; then
  if [[ "${QMD_SETUP_MODELS:-stand-in}" == real ]] || "$BIN/python" -c \
    'import sys; from pathlib import Path; from tooling.real_models import present; sys.exit(0 if present(Path(".models")) else 1)'; then
    MARKS=()
  fi
fi
# One worker per core (QMD_TEST_WORKERS overrides; 0 runs in this process). loadfile keeps a
# file's tests on one worker, so its module-scoped servers start once; the conformance suite
# passes go to whichever worker is free, the longest units first (tests/xdist_scheduling.py,
# docs/decisions/0055).
WORKERS="${QMD_TEST_WORKERS:-logical}"
echo "==> pytest (workers: $WORKERS)"
"$BIN/python" -m pytest -n "$WORKERS" --dist loadfile "${MARKS[@]}" "$@"
