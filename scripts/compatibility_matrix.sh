#!/usr/bin/env bash
# The compatibility matrix (docs/compatibility.md), from one run of the conformance suite
# against every implementation: the original, ours on every surface (stdio and HTTP), and the
# third-party ports pyqmd-mlx 0.9.1 and jaqmd 0.2.2, each installed from PyPI into a
# throwaway venv under .cache/ports/.
#
#   scripts/compatibility_matrix.sh [REPORTS_DIR]           regenerate docs/compatibility.md
#   scripts/compatibility_matrix.sh --check [REPORTS_DIR]   the original and ours only, and
#       exit 1 when docs/compatibility.md states any of their cells otherwise (the third-party
#       ports are left out of the check: installing and running them adds about 10 minutes,
#       pyqmd-mlx starts in 3 s per case)
#   scripts/compatibility_matrix.sh --check --from-reports REPORTS_DIR   what CI runs: the
#       same check over reports the suite tests already wrote (tests/conformance/passes.py),
#       running no pass; a missing report is an error that names it
#   scripts/compatibility_matrix.sh --list   the passes the check reads, "IMPL TRANSPORT" a line
#
# Needs the original (scripts/install_original.sh) and the test models
# (scripts/prepare_models.py). About 25 minutes on two cores; the check about 12, and none
# --from-reports.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
CHECK=0 FROM_REPORTS=0 LIST=0
while [[ "${1:-}" == --* ]]; do
  case "$1" in
    --check) CHECK=1 ;;
    --from-reports) FROM_REPORTS=1 ;;
    --list) LIST=1 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if [[ "$FROM_REPORTS" == 1 && ( "$CHECK" == 0 || -z "${1:-}" ) ]]; then
  echo "--from-reports goes with --check and a REPORTS_DIR" >&2; exit 2
fi
OUT="${1:-.cache/compat-reports}"
PORTS="${QMD_PORTS_DIR:-$REPO/.cache/ports}"
PY=.venv/bin/python
columns=()
missing=()
run() {  # LABEL PROFILE [TRANSPORT]: a run with failures still writes its report
  local label="$1" impl="$2" transport="${3:-stdio}" name="$2.${3:-stdio}"
  if [[ "$LIST" == 1 ]]; then echo "$impl $transport"; return; fi
  if [[ "$FROM_REPORTS" == 1 ]]; then
    [[ -s "$OUT/$name.json" ]] || missing+=("$OUT/$name.json")
    columns+=(--report "$label=$OUT/$name.json")
    return
  fi
  mkdir -p "$OUT"
  # The arguments tests/conformance/passes.py gives a pass: either writes the same report.
  "$PY" -m conformance run --impl "$impl" --transport "$transport" --timeout 120 \
    --report-json "$OUT/$name.json" >"$OUT/$name.txt" 2>&1 || true
  [[ -s "$OUT/$name.json" ]] || { echo "no report from $name; see $OUT/$name.txt" >&2; exit 1; }
  columns+=(--report "$label=$OUT/$name.json")
  echo "$name: $(tail -1 "$OUT/$name.txt")" >&2
}
run "original 2.8.3" original-2.8.3
run "original 2.8.3" original-2.8.3 http
run "original 2.8.3" original-2.8.3-models
run "ours, --compat 2.8.3" ours-compat
run "ours, --compat 2.8.3" ours-compat http
run "ours, --compat 2.8.3" ours-compat-models
run "ours, default" ours-spec
run "ours, default" ours-spec http
run "ours, default" ours-spec-models
run "ours, default" ours-spec-rooted
for surface in memorize projmem ldims; do
  run "ours, $surface" "ours-$surface"
  run "ours, $surface" "ours-$surface" http
done
[[ "$LIST" == 1 ]] && exit 0
if (( ${#missing[@]} )); then
  printf 'no report %s: the suite test of that pass did not run or wrote none\n' "${missing[@]}" >&2
  exit 1
fi
if [[ "$CHECK" == 1 ]]; then
  exec "$PY" -m conformance matrix "${columns[@]}" --check docs/compatibility.md
fi
# Third-party ports, each from PyPI into a venv of its own.
PYQMD_DIR="$PORTS/pyqmd-mlx" bash scripts/install_pyqmd.sh >/dev/null
PYQMD_DIR="$PORTS/pyqmd-mlx" run "pyqmd-mlx 0.9.1" pyqmd-mlx
if [[ ! -x "$PORTS/jaqmd/bin/jaqmd" ]] || ! "$PORTS/jaqmd/bin/jaqmd" --version | grep -q "0.2.2"; then
  python3 -m venv "$PORTS/jaqmd"
  "$PORTS/jaqmd/bin/pip" install -q "jaqmd[mcp]==0.2.2" >&2
fi
JAQMD_DIR="$PORTS/jaqmd" run "jaqmd 0.2.2" jaqmd
"$PY" -m conformance matrix "${columns[@]}" --notes docs/compatibility-notes.md \
  --made-by "scripts/compatibility_matrix.sh" --out docs/compatibility.md
echo "wrote docs/compatibility.md" >&2
