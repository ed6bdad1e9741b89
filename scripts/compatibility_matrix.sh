#!/usr/bin/env bash
# Regenerate docs/compatibility.md: run the conformance suite against every implementation
# with --report-json, then build the matrix from the reports.
#   scripts/compatibility_matrix.sh [REPORTS_DIR]   (default .cache/compat-reports)
# Needs the original (scripts/install_original.sh), the test models (scripts/prepare_models.py)
# and pyqmd-mlx (scripts/install_pyqmd.sh; its column is left out when it is not installed).
# About 20 minutes on two cores, most of it pyqmd-mlx (a 3 s start per case) and the models.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
OUT="${1:-.cache/compat-reports}"
mkdir -p "$OUT"
PY=.venv/bin/python
run() {  # a run with failures still writes its report; only a missing report is fatal
  "$PY" -m conformance run --impl "$1" --timeout 120 --report-json "$OUT/$1.json" \
    >"$OUT/$1.txt" 2>&1 || true
  [[ -s "$OUT/$1.json" ]] || { echo "no report from $1; see $OUT/$1.txt" >&2; exit 1; }
}
for impl in original-2.8.3 original-2.8.3-models ours-compat ours-compat-models ours-spec ours-spec-models; do
  run "$impl"
done
columns=(
  --report "original 2.8.3=$OUT/original-2.8.3.json"
  --report "original 2.8.3=$OUT/original-2.8.3-models.json"
  --report "ours, --compat 2.8.3=$OUT/ours-compat.json"
  --report "ours, --compat 2.8.3=$OUT/ours-compat-models.json"
  --report "ours, default=$OUT/ours-spec.json"
  --report "ours, default=$OUT/ours-spec-models.json"
)
if [[ -x "${PYQMD_DIR:-.tools/pyqmd-mlx}/bin/pyqmd" || -n "${PYQMD_BIN:-}" ]]; then
  run pyqmd-mlx
  columns+=(--report "pyqmd-mlx 0.9.1=$OUT/pyqmd-mlx.json")
fi
"$PY" -m conformance matrix "${columns[@]}" --notes docs/compatibility-notes.md \
  --made-by "scripts/compatibility_matrix.sh" --out docs/compatibility.md
echo "wrote docs/compatibility.md" >&2
