#!/usr/bin/env bash
# Install the third-party port pyqmd-mlx (PyPI) for its conformance profile (profiles/pyqmd-mlx).
#
#   PYQMD_DIR   where to install (default: <repo>/.tools/pyqmd-mlx, git-ignored)
#
# pyqmd-mlx loads sqlite-vec into Python's sqlite3, so it needs a Python built with loadable
# extensions: Debian's /usr/bin/python3 is (pyenv builds often are not). Its BM25 paths run on
# Linux; the MLX embedding paths need Apple Silicon. Prints the pyqmd path on stdout.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${PYQMD_DIR:-$REPO/.tools/pyqmd-mlx}"
VERSION="${PYQMD_VERSION:-0.9.1}"
PY="${PYQMD_PYTHON:-/usr/bin/python3}"

if ! "$PY" -c 'import sqlite3; sqlite3.connect(":memory:").enable_load_extension(True)' 2>/dev/null; then
  echo "$PY cannot load sqlite extensions; set PYQMD_PYTHON to one that can (Debian's python3)" >&2
  exit 1
fi
if ! "$PY" -c 'import venv, ensurepip' 2>/dev/null; then
  (apt-get update -qq && apt-get install -y -qq python3-venv) >&2
fi
if [[ ! -x "$DIR/bin/pyqmd" ]] || ! "$DIR/bin/pip" show pyqmd-mlx 2>/dev/null | grep -q "^Version: $VERSION$"; then
  "$PY" -m venv "$DIR"
  "$DIR/bin/pip" install -q "pyqmd-mlx==$VERSION" >&2
fi
echo "$DIR/bin/pyqmd"
