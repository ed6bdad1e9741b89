#!/usr/bin/env bash
# Re-record the conformance goldens from the original QMD 2.8.3, then review `git diff`.
#   scripts/record_goldens.sh [qmd-conformance record options, e.g. --case 'get.*']
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
scripts/install_original.sh >/dev/null
.venv/bin/python -m conformance record --impl original-2.8.3 "$@"
.venv/bin/python -m conformance validate
git status --short conformance/goldens
