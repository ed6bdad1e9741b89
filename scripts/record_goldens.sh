#!/usr/bin/env bash
# Re-record the conformance goldens from the original QMD 2.8.3, then review `git diff`.
#   scripts/record_goldens.sh [--models|--real] [qmd-conformance record options, e.g. --case 'get.*']
# --models records the model-backed goldens (local-models fixture, profile
# original-2.8.3-models; needs the GGUF files in .models/, see scripts/prepare_models.py).
# --real records the real-model goldens (real-models fixture, profile original-2.8.3-real;
# needs `scripts/prepare_models.py --set real`); the CLI ones come from
# scripts/record_real_cli_goldens.py.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
IMPL=original-2.8.3
if [[ "${1:-}" == "--models" ]]; then
  IMPL=original-2.8.3-models
  shift
  set -- --jobs 1 --timeout 120 "$@"  # a model call of the original can take a while on CPU
elif [[ "${1:-}" == "--real" ]]; then
  IMPL=original-2.8.3-real
  shift
  set -- --jobs 1 --timeout 600 "$@"  # EmbeddingGemma and a 1.5B model on CPU
fi
scripts/install_original.sh >/dev/null
.venv/bin/python -m conformance record --impl "$IMPL" "$@"
.venv/bin/python -m conformance validate
git status --short conformance/goldens
