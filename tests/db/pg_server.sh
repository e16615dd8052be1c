#!/usr/bin/env bash
# A private PostgreSQL server for the tests: pg_server.sh start STATE | stop STATE | restart STATE
#
# start: initdb into a new temporary directory (as the unprivileged user `nobody` when run as
# root: the server refuses to run as root), on a free loopback port, trust authentication on
# 127.0.0.1 only, a database `tuning` owned by the superuser `tvmtune`; writes the directory and
# the URI (postgresql://tvmtune@127.0.0.1:PORT/tuning) to STATE, two lines.
# Exit status 77 when no server can be started (skipped locally); under CI=true it is 1.
# Tests run it with fsync off (nothing to lose); TT_PG_FSYNC=on makes commits durable, as a
# benchmark against SQLite's synchronous=FULL must.
set -euo pipefail

cmd=${1:?usage: pg_server.sh start|stop|restart STATE}
state=${2:?usage: pg_server.sh start|stop|restart STATE}

unavailable() {
  echo "pg_server: $*" >&2
  if [ "${CI:-}" = true ]; then exit 1; fi
  exit 77
}

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
as_server=()
if [ "$(id -u)" -eq 0 ]; then as_server=(runuser -u nobody --); fi

case $cmd in
start)
  [ -n "$bin" ] && [ -x "$bin/initdb" ] || unavailable "no PostgreSQL server installed (scripts/install-deps.sh installs postgresql)"
  dir=$(mktemp -d /tmp/tt-pg-XXXXXX)
  chmod 755 "$dir"
  [ ${#as_server[@]} -eq 0 ] || chown nobody "$dir"
  "${as_server[@]}" "$bin/initdb" -D "$dir/data" -U tvmtune --auth=trust -E UTF8 --no-sync \
    > "$dir/initdb.log" 2>&1 || unavailable "initdb failed: $(tail -3 "$dir/initdb.log")"
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "${as_server[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=${TT_PG_FSYNC:-off} -c max_connections=200" \
    start > /dev/null || unavailable "the server did not start: $(tail -3 "$dir/server.log")"
  "$bin/createdb" -h 127.0.0.1 -p "$port" -U tvmtune tuning
  printf '%s\npostgresql://tvmtune@127.0.0.1:%s/tuning\n' "$dir" "$port" > "$state"
  echo "pg_server: PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port ($dir)"
  ;;
stop)
  [ -f "$state" ] || exit 0
  dir=$(head -1 "$state")
  if [ -d "$dir/data" ]; then
    "${as_server[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop > /dev/null 2>&1 || true
  fi
  case $dir in /tmp/tt-pg-*) rm -rf "$dir" ;; esac
  rm -f "$state"
  ;;
restart)
  dir=$(head -1 "$state")
  "${as_server[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -m immediate -w -t 60 \
    restart > /dev/null
  ;;
*)
  echo "usage: pg_server.sh start|stop|restart STATE" >&2
  exit 2
  ;;
esac
