#!/usr/bin/env bash
# tvm-tune run end to end: a run interrupted with Ctrl-C keeps what it measured and the same
# command resumes; bad arguments are clear errors.
# usage: test_run_cli.sh BIN_DIR
set -euo pipefail
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
db=$tmp/tuning.db
fail() { echo "FAIL: $*" >&2; exit 1; }
w=matmul:M=64,N=64,K=64
count() { "$bin/tvm-db" stats --db "$db" --json 2>/dev/null | sed -n 's/.*"records": \([0-9]*\).*/\1/p'; }

"$bin/tvm-tune" run --workload $w --trials 100000 --db "$db" --batch 2 --repeat 1 >"$tmp/out" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  [ -f "$db" ] && [ "$(count || echo 0)" -ge 4 ] 2>/dev/null && break
  sleep 0.1
done
kill -INT $pid
wait $pid || fail "interrupted run exited with status $?"
grep -q "stopped by request" "$tmp/out" || fail "no stop message: $(cat "$tmp/out")"
before=$(count)
[ "$before" -ge 4 ] || fail "only $before records after the interrupt"

# The same command resumes: it counts the earlier trials and measures only the rest.
target=$((before + 3))
"$bin/tvm-tune" run --workload $w --trials $target --db "$db" --batch 2 --repeat 1 >"$tmp/out2" 2>&1
grep -q "resuming after $before measured configs" "$tmp/out2" || fail "no resume: $(cat "$tmp/out2")"
grep -q "3 measured now, $target in all" "$tmp/out2" || fail "resume counts: $(cat "$tmp/out2")"
[ "$(count)" = "$target" ] || fail "expected $target records, found $(count)"

# A full database (here a capped one) stops the run with the reason; every record stored before
# is intact, and a run with room resumes without measuring anything twice.
full="$tmp/full.db"
fw=matmul:M=32,N=32,K=32
if "$bin/tvm-tune" run --workload $fw --trials 100 --strategy random --repeat 1 \
  --min-repeat-ms 1 --db "$full" --db-max-mb 0.08 >"$tmp/full.out" 2>&1; then
  fail "a run into a full database succeeded"
fi
grep -q "storing measurements:.*full" "$tmp/full.out" || fail "no full-disk reason: $(cat "$tmp/full.out")"
"$bin/tvm-db" check --db "$full" | grep -q ": ok" || fail "database damaged by the full disk"
kept=$("$bin/tvm-db" stats --db "$full" --json | sed -n 's/.*"records": \([0-9]*\).*/\1/p')
[ "$kept" -ge 1 ] && [ "$kept" -lt 100 ] || fail "kept $kept records"
"$bin/tvm-tune" run --workload $fw --trials 100 --strategy random --repeat 1 \
  --min-repeat-ms 1 --db "$full" >"$tmp/full2.out" 2>&1 || fail "resume after the full disk"
grep -q "resuming after $kept measured configs" "$tmp/full2.out" || fail "no resume: $(cat "$tmp/full2.out")"
[ "$("$bin/tvm-db" stats --db "$full" --json | sed -n 's/.*"records": \([0-9]*\).*/\1/p')" = 100 ] ||
  fail "records after the resume"

# Errors.
expect_error() {
  local want=$1; shift
  if "$@" >"$tmp/o" 2>"$tmp/e"; then fail "expected failure: $*"; fi
  grep -q -- "$want" "$tmp/e" || fail "'$want' not in: $(cat "$tmp/e")"
}
expect_error "give at least one --workload" "$bin/tvm-tune" run --db "$db"
expect_error "needs parameter K" "$bin/tvm-tune" run --workload matmul:M=4,N=4 --db "$db"
expect_error "not this machine" "$bin/tvm-tune" run --workload $w --target "llvm -mtriple=aarch64-linux-gnu" --db "$db"
expect_error "random, grid, ga, xgb, evo or sketch-random" "$bin/tvm-tune" run --workload $w --strategy annealing --db "$db"
expect_error "positive integer" "$bin/tvm-tune" run --workload $w --trials 0 --db "$db"
# A run that fails before measuring anything ends with its error alone, with a non-zero status:
# no summary of nothing after it (a workload that does not parse, a database it cannot open).
expect_quiet_error() {
  local want=$1; shift
  if "$@" >"$tmp/o" 2>"$tmp/e"; then fail "expected failure: $*"; fi
  grep -q -- "$want" "$tmp/e" || fail "'$want' not in: $(cat "$tmp/e")"
  ! grep -q "measured now\|no error-free measurement" "$tmp/o" "$tmp/e" ||
    fail "a summary after the error: $(cat "$tmp/o" "$tmp/e")"
}
expect_quiet_error "unknown operator" "$bin/tvm-tune" run --workload nosuchop:M=4 --db "$db"
echo "this is not a database, only text that is long enough to be read as a header........" \
  > "$tmp/garbage.db"
expect_quiet_error "not a valid tvm-tune database" "$bin/tvm-tune" run --workload $w --db "$tmp/garbage.db"
expect_quiet_error "cannot connect to the database server" "$bin/tvm-tune" run --workload $w \
  --db postgresql://nobody@127.0.0.1:1/tuning

echo "tvm-tune run CLI: all checks passed"
