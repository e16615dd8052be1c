#!/usr/bin/env bash
# Three trackers, each with its own device and jobs, on one PostgreSQL database at once; one
# tracker killed with -9 mid-job and started again, then the database server restarted under the
# running jobs; a fourth process reading the best records throughout, as a build would.  Every job
# finishes with exactly its trials, nothing stored twice; TVM logs go in and out of the server.
#
# Then a CMake project builds a library from the shared database (tvm_tune_add_library with a
# PostgreSQL URI), and builds it again on the next build, since a server has no file to watch.
#
# usage: test_shared_farm.sh BUILD_DIR PG_STATE   (PG_STATE: tests/db/pg_server.sh's state file)
set -euo pipefail
build=$1
state=$2
bin=$build/bin
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
here=$(cd "$(dirname "$0")" && pwd)
export PGOPTIONS="-c client_min_messages=warning"

if [ ! -f "$state" ]; then
  echo "test_shared_farm: no PostgreSQL server ($state)" >&2
  [ "${CI:-}" = true ] && exit 1
  exit 77
fi
uri=$(sed -n 2p "$state")
port=${uri##*:}
port=${port%%/*}
"$pgbin/psql" -q -h 127.0.0.1 -p "$port" -U tvmtune -d tuning \
  -c "DROP DATABASE IF EXISTS shared_farm WITH (FORCE)" -c "CREATE DATABASE shared_farm" > /dev/null
db=${uri%/*}/shared_farm
sql() { "$pgbin/psql" -qtA -h 127.0.0.1 -p "$port" -U tvmtune -d shared_farm -c "$1"; }

work=$(mktemp -d /tmp/tt-shared-farm-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done
  wait 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

declare -a tport tpid
start_tracker() { # i
  local i=$1
  "$bin/tvm-tracker" --host 127.0.0.1 --port "${tport[$i]}" --port-end $((tport[$i] + 1)) \
    --db "$db" --name "site$i" --job-workers 1 --log-level warn >> "$work/tracker$i.log" 2>&1 &
  tpid[$i]=$!
  pids+=("${tpid[$i]}")
  for _ in $(seq 100); do
    "$bin/tvm-tune" jobs --tracker "127.0.0.1:${tport[$i]}" > /dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "tracker $i did not start: $(tail -5 "$work/tracker$i.log")" >&2
  exit 1
}

for i in 1 2 3; do
  tport[$i]=$(free_port)
  start_tracker "$i"
  "$bin/tvm-rpc-server" --tracker "127.0.0.1:${tport[$i]}" --key cpu --port 0 \
    --cache "$work/cache$i" --idle-timeout 20 --quiet > "$work/server$i.log" 2>&1 &
  pids+=($!)
done

# Two jobs per tracker, each on its own workload: a job's trials count what any earlier run
# measured of its workload on this kind of device (tvm-tune run --help), so jobs sharing one
# would share their progress.
declare -a jobs jtracker
submit() { # tracker workload trials
  local out
  out=$("$bin/tvm-tune" submit --tracker "127.0.0.1:${tport[$1]}" --key cpu --workload "$2" \
    --trials "$3" --strategy random --repeat 2 --min-repeat-ms 30 --target 'llvm -num-cores=1')
  local id=${out#job }
  id=${id%% *}
  jobs+=("$id")
  jtracker+=("$1")
}
submit 1 matmul:M=16,N=16,K=16 20
submit 2 matmul:M=20,N=20,K=20 24
submit 3 matmul:M=24,N=24,K=24 20
submit 1 relu:M=64,N=64 12
submit 2 matmul:M=12,N=12,K=12 16
submit 3 relu:M=32,N=32 12

# A build reading the best records throughout.
(
  ok=0 bad=0
  while [ ! -f "$work/done" ]; do
    if out=$("$bin/tvm-db" best --db "$db" --workload matmul:M=16,N=16,K=16 --target 'llvm -num-cores=1' 2>&1); then
      ok=$((ok + 1))
    elif grep -q "cannot connect to the database server\|lost the connection" <<< "$out"; then
      : # the server's restart below: a build then fails to connect and says so
    elif ! grep -q "no records\|needs migrating\|no error-free" <<< "$out"; then
      bad=$((bad + 1))
      echo "$out" >> "$work/reader.errors"
    fi
    sleep 0.2
  done
  echo "$ok $bad" > "$work/reader.result"
) &
reader=$!
pids+=("$reader")

# Kill tracker 2 with -9 once its first job has measured some, then start it again.
victim=${jobs[1]}
for _ in $(seq 600); do
  n=$(sql "SELECT count(*) FROM records WHERE job_id = $victim")
  [ "$n" -ge 4 ] && break
  sleep 0.1
done
[ "$n" -ge 4 ] || { echo "job $victim never started" >&2; exit 1; }
kill -9 "${tpid[2]}"
wait "${tpid[2]}" 2> /dev/null || true
at_kill=$(sql "SELECT count(*) FROM records WHERE job_id = $victim")
start_tracker 2

# The database server restarts under the running jobs: they wait, reconnect, and go on.
sleep 1
running=$(sql "SELECT count(*) FROM jobs WHERE state = 'running'")
bash "$here/pg_server.sh" restart "$state"
echo "database server restarted with $running jobs running"

# Every job finishes, each watched at its own tracker.
for k in "${!jobs[@]}"; do
  if ! timeout 300 "$bin/tvm-tune" watch --tracker "127.0.0.1:${tport[${jtracker[$k]}]}" \
    "${jobs[$k]}" --interval 0.3 > "$work/watch$k.log" 2>&1; then
    echo "job ${jobs[$k]} (tracker ${jtracker[$k]}) did not finish: $(tail -3 "$work/watch$k.log")" >&2
    exit 1
  fi
done
touch "$work/done"
wait "$reader" 2> /dev/null || true

fail=0
check() { # description expected actual
  if [ "$2" != "$3" ]; then
    echo "FAIL: $1: expected $2, got $3" >&2
    fail=1
  else
    echo "ok: $1 ($3)"
  fi
}
# Exactly its trials per job (nothing lost at the kill, nothing measured twice after it).
for k in "${!jobs[@]}"; do
  id=${jobs[$k]}
  want=$(sql "SELECT trials_total FROM jobs WHERE id = $id")
  check "job $id of site${jtracker[$k]}: records" "$want" "$(sql "SELECT count(*) FROM records WHERE job_id = $id")"
  check "job $id: distinct configs" "$want" "$(sql "SELECT count(DISTINCT config) FROM records r JOIN workloads w ON w.id = r.workload_id WHERE job_id = $id")"
  check "job $id: state" done "$(sql "SELECT state FROM jobs WHERE id = $id")"
  check "job $id: owner" "site${jtracker[$k]}" "$(sql "SELECT owner FROM jobs WHERE id = $id")"
done
check "job ids distinct" 6 "$(sql "SELECT count(DISTINCT id) FROM jobs")"
check "records of the killed job kept through the kill (>= $at_kill)" 1 \
  "$(sql "SELECT CASE WHEN count(*) >= $at_kill THEN 1 ELSE 0 END FROM records WHERE job_id = $victim")"
check "a tracker lists only its own jobs" 2 \
  "$("$bin/tvm-tune" jobs --tracker "127.0.0.1:${tport[3]}" --json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')"
other=$("$bin/tvm-tune" status --tracker "127.0.0.1:${tport[3]}" "$victim" 2>&1 || true)
check "another tracker's job is named as such" 1 "$(grep -c "belongs to the tracker site2" <<< "$other")"
# TVM's log formats in and out of the server; an import is idempotent there too.  (An exported
# record carries no device fingerprint, so its first import is a record of its own.)
"$bin/tvm-db" export --db "$db" -o "$work/farm.log"
exported=$(wc -l < "$work/farm.log")
check "records exported" "$(sql "SELECT count(*) FROM records")" "$exported"
inserted() { python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["inserted"])'; }
check "imported" "$exported" "$("$bin/tvm-db" import --db "$db" "$work/farm.log" --json | inserted)"
check "imported again: nothing new" 0 "$("$bin/tvm-db" import --db "$db" "$work/farm.log" --json | inserted)"
# Three trackers, a kill -9 and two imports wrote the records; each workload's best (the
# leaderboard's table) still agrees with them.
"$bin/tvm-db" check --db "$db" > "$work/check.log" 2>&1 && checked=1 || checked=0
[ "$checked" = 1 ] || cat "$work/check.log" >&2
check "tvm-db check: the bests table agrees with the records" 1 "$checked"
check "bests rows" "$(sql "SELECT count(*) FROM (SELECT DISTINCT workload_id, target_id FROM records WHERE error_no = 0 AND suspect IS NULL AND fastest_s > 0) p")" \
  "$(sql "SELECT count(*) FROM bests")"

# A build elsewhere: the installed CMake function, from the server.
cmake --install "$build" --prefix "$work/prefix" > /dev/null
mkdir -p "$work/app"
cat > "$work/app/app.c" << 'C'
#include "kernels.h"
int main(void) { return 0; }
C
cat > "$work/app/CMakeLists.txt" << CMAKE
cmake_minimum_required(VERSION 3.20)
project(app C)
find_package(TvmTune REQUIRED)
tvm_tune_add_library(kernels DB "$db" TARGET "llvm -num-cores=1" STRICT
  WORKLOADS "matmul:M=16,N=16,K=16" tuned_matmul "relu:M=64,N=64" tuned_relu)
add_executable(app app.c)
target_link_libraries(app PRIVATE kernels)
CMAKE
cmake -S "$work/app" -B "$work/app/build" -DCMAKE_PREFIX_PATH="$work/prefix" > /dev/null
cmake --build "$work/app/build" > "$work/app/build1.log" 2>&1 || { cat "$work/app/build1.log"; exit 1; }
check "CMake build from the server: tvm-compile ran" 1 "$(grep -c "tvm-compile kernels" "$work/app/build1.log")"
check "both kernels from exact records of the farm" 2 "$(grep -c "exact match" "$work/app/build/tvm-tune/kernels.h")"
cmake --build "$work/app/build" > "$work/app/build2.log" 2>&1
check "the next build asks the server again" 1 "$(grep -c "tvm-compile kernels" "$work/app/build2.log")"

read -r ok bad < "$work/reader.result"
check "the build's reads that failed" 0 "$bad"
[ "$ok" -gt 0 ] || { echo "FAIL: the build never read a best record" >&2; fail=1; }
echo "the build read the best record $ok times"
[ -f "$work/reader.errors" ] && head -5 "$work/reader.errors"
exit $fail
