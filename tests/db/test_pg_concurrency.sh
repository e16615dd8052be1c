#!/usr/bin/env bash
# A shared PostgreSQL database under the two things an operator's farm does to it (issue #53):
#
# 1. Processes of every kind start together: 8 at once (three tuning runs, a tracker, two tvm-db
#    queries, two tvm-compile builds) on an empty database, then on one at an older schema, 20
#    times.  Every one succeeds, the schema is migrated once (an empty database's tables are all
#    created by one transaction), and every measurement is stored once.
# 2. The server ends a run's session (pg_terminate_backend) at its first transaction, while it
#    waits for the migrators' lock, and at a later one, while it stores a batch.  The run
#    reconnects, finishes, and has every record exactly once.
#
# usage: test_pg_concurrency.sh BUILD_DIR PG_STATE   (PG_STATE: tests/db/pg_server.sh's state file)
set -euo pipefail
build=$1
state=$2
bin=$build/bin
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2> /dev/null | sort -V | tail -1)
export PGOPTIONS="-c client_min_messages=warning"
# a lost session is waited for this long at most (the default, 300 s, would outlast the test)
export TVM_TUNE_DB_PATIENCE=60

if [ ! -f "$state" ]; then
  echo "test_pg_concurrency: no PostgreSQL server ($state)" >&2
  [ "${CI:-}" = true ] && exit 1
  exit 77
fi
uri=$(sed -n 2p "$state")
base=${uri%/*}
port=${uri##*:}
port=${port%%/*}
psql_on() { # DATABASE SQL...: one session, each SQL a command of its own
  local d=$1
  shift
  local args=()
  for c in "$@"; do args+=(-c "$c"); done
  "$pgbin/psql" -qtAX -h 127.0.0.1 -p "$port" -U tvmtune -d "$d" "${args[@]}"
}
fresh_database() { # NAME
  psql_on tuning "DROP DATABASE IF EXISTS $1 WITH (FORCE)" "CREATE DATABASE $1" > /dev/null
}

work=$(mktemp -d /tmp/tt-pg-concurrency-XXXXXX)
source "$(dirname "$0")/../net/daemons.sh"
trap 'stop_daemons; rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# Waits up to $1 tenths of a second for the command after it to succeed.
wait_for() {
  local tenths=$1
  shift
  for _ in $(seq "$tenths"); do
    "$@" && return 0
    sleep 0.1
  done
  return 1
}

# ---- 1. eight processes at once, twenty times ----

# Each process waits for the same file, so that all eight open the database at once.
start() { # LOG COMMAND...
  local log=$1
  shift
  (
    for _ in $(seq 500); do [ -e "$dir/go" ] && break; sleep 0.01; done
    exec "$@"
  ) > "$dir/$log" 2>&1 &
}
tables="'workloads','targets','devices','jobs','records','cost_models','tt_meta','bests'"
for rep in $(seq 20); do
  name=start_$rep
  db=$base/$name
  fresh_database "$name"
  older=$((rep % 2 == 0))
  if [ "$older" = 1 ]; then
    # a database that an earlier tvm-tune left at schema 4 (before the bests table)
    "$bin/tvm-db" stats --db "$db" > /dev/null
    psql_on "$name" "DROP TABLE bests" "UPDATE tt_meta SET schema_version = 4"
  fi
  dir=$work/$rep
  mkdir -p "$dir"
  waited=()
  for k in 1 2 3; do
    start "tune$k.log" "$bin/tvm-tune" run --workload "relu:M=32,N=$((16 * k))" --trials 2 \
      --strategy random --repeat 1 --min-repeat-ms 1 --db "$db"
    waited+=($!)
  done
  start tracker.log "$bin/tvm-tracker" --port 0 --db "$db" --name "site$rep" --job-workers 1
  tracker=$!
  pids+=("$tracker")
  start db1.log "$bin/tvm-db" stats --db "$db"
  waited+=($!)
  start db2.log "$bin/tvm-db" history --db "$db" --limit 3
  waited+=($!)
  for k in 1 2; do
    start "compile$k.log" "$bin/tvm-compile" --db "$db" -o "$dir/lib$k/kernels" \
      --workload relu:M=32,N=16 --symbol relu
    waited+=($!)
  done
  touch "$dir/go"
  for p in "${waited[@]}"; do
    wait "$p" || fail "rep $rep ($([ "$older" = 1 ] && echo schema 4 || echo empty)): a process failed: $(grep -l . "$dir"/*.log | xargs tail -n 3)"
  done
  wait_line "$dir/tracker.log" "^tvm-tracker listening on" 300 > /dev/null
  kill -TERM "$tracker"
  wait "$tracker" || fail "rep $rep: the tracker exited with $?: $(cat "$dir/tracker.log")"
  version=$(psql_on "$name" "SELECT string_agg(application || ' ' || schema_version, ',') FROM tt_meta")
  [ "$version" = "tvm-tune 5" ] || fail "rep $rep: tt_meta says '$version'"
  if [ "$older" = 0 ]; then
    creators=$(psql_on "$name" "SELECT count(DISTINCT xmin::text) FROM pg_class WHERE relkind = 'r' AND relname IN ($tables)")
    [ "$creators" = 1 ] || fail "rep $rep: the schema's tables were created by $creators transactions"
  fi
  records=$(psql_on "$name" "SELECT count(*) FROM records")
  distinct=$(psql_on "$name" "SELECT count(DISTINCT (workload_id, config)) FROM records")
  [ "$records" = 6 ] && [ "$distinct" = 6 ] ||
    fail "rep $rep: $records records ($distinct distinct) where the three runs measured 6"
  "$bin/tvm-db" check --db "$db" > "$dir/check.log" 2>&1 || fail "rep $rep: $(cat "$dir/check.log")"
  grep -q "^relu = relu:M=32,N=16" "$dir/compile1.log" || fail "rep $rep: $(cat "$dir/compile1.log")"
  psql_on tuning "DROP DATABASE $name WITH (FORCE)" > /dev/null
done
echo "ok: 20 times 8 processes at once (10 on an empty database, 10 on schema 4): all succeeded, migrated once"

# ---- 2. the server ends a run's session ----

name=terminated
db=$base/$name
fresh_database "$name"
# The session's backend of the one tvm-tune process connected, once it waits for a lock.
waiting_backend() {
  local pid
  pid=$(psql_on "$name" "SELECT pid FROM pg_stat_activity WHERE application_name = 'tvm-tune' AND wait_event_type = 'Lock'")
  [ -n "$pid" ] && echo "$pid"
}
terminate() { # PID
  [ "$(psql_on "$name" "SELECT pg_terminate_backend($1)")" = t ] || fail "pg_terminate_backend($1)"
}
# A session holding a lock for as long as the test needs it (pg_sleep), ended when it is done.
hold_lock() { # SQL...
  PGAPPNAME=locker psql_on "$name" "$@" "SELECT pg_sleep(120)" > /dev/null 2>&1 &
  pids+=($!)
  wait_for 100 locking || fail "the locking session did not start"
}
locking() {
  [ -n "$(psql_on "$name" "SELECT pid FROM pg_stat_activity WHERE application_name = 'locker' AND wait_event = 'PgSleep'")" ]
}
release_lock() {
  psql_on "$name" "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'locker'" > /dev/null
}
check_run() { # LOG WORKLOAD TRIALS
  grep -q "reconnected" "$work/$1" || fail "$1: no reconnection: $(cat "$work/$1")"
  local n d
  n=$(psql_on "$name" "SELECT count(*) FROM records r JOIN workloads w ON w.id = r.workload_id WHERE w.key = '$2'")
  d=$(psql_on "$name" "SELECT count(DISTINCT r.config) FROM records r JOIN workloads w ON w.id = r.workload_id WHERE w.key = '$2'")
  [ "$n" = "$3" ] && [ "$d" = "$3" ] || fail "$1: $n records ($d distinct configs) of $3 trials"
}

# Ends the session of the run `run` (logging to $work/LOG) once it waits for the lock that
# hold_lock took, then lets the lock go; the run must finish anyway.
end_waiting_session() { # LOG WHAT
  local backend
  backend=$(wait_for 300 waiting_backend) || fail "the run never waited $2: $(cat "$work/$1")"
  terminate "$backend"
  release_lock
  wait "$run" || fail "the run whose session ended $2 failed: $(cat "$work/$1")"
}

# At the first transaction: an empty database, the migrators' lock held by another session.
hold_lock "SELECT pg_advisory_lock(1414943828)"
w1=matmul:M=16,N=16,K=16
"$bin/tvm-tune" run --workload $w1 --trials 8 --strategy random --repeat 1 --min-repeat-ms 1 \
  --db "$db" > "$work/first.log" 2>&1 &
run=$!
pids+=("$run")
end_waiting_session first.log "for the migrators' lock"
check_run first.log $w1 8
echo "ok: a session ended at the first transaction (waiting to migrate): reconnected, 8 records"

# At a later one: some batches stored, the next one waits for a lock on the records table.
w2=matmul:M=24,N=24,K=24
"$bin/tvm-tune" run --workload $w2 --trials 40 --strategy random --batch 2 --repeat 1 \
  --min-repeat-ms 20 --db "$db" > "$work/later.log" 2>&1 &
run=$!
pids+=("$run")
stored() { [ "$(psql_on "$name" "SELECT count(*) FROM records r JOIN workloads w ON w.id = r.workload_id WHERE w.key = '$w2'")" -ge 4 ]; }
wait_for 600 stored || fail "the run stored nothing: $(cat "$work/later.log")"
hold_lock "BEGIN" "LOCK TABLE records IN SHARE MODE"
end_waiting_session later.log "to store a batch"
check_run later.log $w2 40
echo "ok: a session ended at a later transaction (storing a batch): reconnected, 40 records"
psql_on tuning "DROP DATABASE $name WITH (FORCE)" > /dev/null
echo "test_pg_concurrency: passed"
