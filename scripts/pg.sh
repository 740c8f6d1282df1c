#!/usr/bin/env bash
# Throwaway PostgreSQL cluster for tests and the demo.
#   scripts/pg.sh start DIR PORT   -> prints the DATABASE_URL
#   scripts/pg.sh stop DIR
# initdb refuses root, so the cluster runs as the `postgres` user. DIR must be
# reachable by that user; when it is not (a clone under /root), a directory in
# /tmp is used instead and the choice is recorded in DIR.location.
set -euo pipefail
cmd=${1:?start|stop}; dir=${2:?directory}; port=${3:-55432}
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
[ -x "$bindir/initdb" ] || { echo "pg.sh: PostgreSQL server binaries not found (make setup)" >&2; exit 1; }
as_pg() { if [ "$(id -un)" = postgres ]; then "$@"; else runuser -u postgres -- "$@"; fi; }

case "$cmd" in
start)
  mkdir -p "$dir"
  data="$dir/data"
  if ! as_pg test -w "$dir" 2>/dev/null; then
    chown postgres: "$dir" 2>/dev/null || true
  fi
  if ! as_pg test -w "$dir" 2>/dev/null; then
    data=$(mktemp -d /tmp/p4relay-pg.XXXXXX)/data
  fi
  echo "$data" > "$dir.location"
  sock=$(dirname "$data")/sock; mkdir -p "$sock"; chown postgres: "$(dirname "$data")" "$sock"
  if [ ! -f "$data/PG_VERSION" ]; then
    as_pg "$bindir/initdb" -D "$data" -U postgres --auth=trust -E UTF8 >/dev/null
  fi
  as_pg "$bindir/pg_ctl" -D "$data" -l "$(dirname "$data")/pg.log" -w -t 30 \
    -o "-p $port -k $sock -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" start >/dev/null
  echo "postgresql+psycopg://postgres@127.0.0.1:$port/postgres"
  ;;
stop)
  [ -f "$dir.location" ] || exit 0
  data=$(cat "$dir.location")
  [ -f "$data/postmaster.pid" ] && as_pg "$bindir/pg_ctl" -D "$data" -m fast -w stop >/dev/null || true
  rm -rf "$(dirname "$data")" "$dir.location"
  ;;
*) echo "usage: pg.sh start|stop DIR [PORT]" >&2; exit 2 ;;
esac
