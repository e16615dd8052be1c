#!/usr/bin/env bash
# tvm-db end to end: import real TVM logs, query, export, and the errors a user sees.
# usage: test_cli.sh BIN_DIR DATA_DIR
set -euo pipefail
bin=$1
data=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
db=$tmp/farm.db
fail() { echo "FAIL: $*" >&2; exit 1; }

# Import: counts, then idempotence.
out=$("$bin/tvm-db" import --db "$db" "$data/autoscheduler-matmul.json" "$data/autotvm-resnet_50-B1-platinum-8124m.log")
echo "$out"
grep -q "autoscheduler-matmul.json: 1 records: 1 new" <<<"$out" || fail "matmul import"
grep -q "53 records: 22 new, 31 already stored, 0 malformed" <<<"$out" || fail "autotvm import"
out=$("$bin/tvm-db" import --db "$db" --json "$data/autoscheduler-matmul.json")
grep -q '"inserted": 0, "duplicates": 1' <<<"$out" || fail "re-import not idempotent: $out"

# best --json has the fields builds use.
te='te:matmul[i,j] += A[i,k] * B[k,j]; out[i,j] = matmul[i,j] + C[i,j]; A:float32[1024,1024]; B:float32[1024,1024]; C:float32[1024,1024]'
json=$("$bin/tvm-db" best --db "$db" --workload "$te" --target "llvm -keys=cpu" --json)
for field in '"workload": ' '"target": "llvm -keys=cpu"' '"device": null' '"config": "[[\"SP\", 2, 0, 1024' '"median_s": 0.0044742' '"gflops": ' '"error_no": 0' '"match": "exact"'; do
  grep -qF "$field" <<<"$json" || fail "best --json lacks $field: $json"
done
# A target of the same family finds it as a fallback, and says so.
out=$("$bin/tvm-db" best --db "$db" --workload "$te" --target "llvm -mcpu=znver3")
grep -q "note: fallback (same target family)" <<<"$out" || fail "family fallback: $out"
if "$bin/tvm-db" best --db "$db" --workload "$te" --target "llvm -mcpu=znver3" --no-fallback 2>"$tmp/err"; then
  fail "--no-fallback should find nothing"
fi
grep -q "no error-free record" "$tmp/err" || fail "no-record message"

# Export gives back what TVM wrote, byte for byte.
"$bin/tvm-db" export --db "$db" --format autotvm -o "$tmp/out.log" 2>/dev/null
diff <(grep -v '^#' "$data/autotvm-resnet_50-B1-platinum-8124m.log" | sort -u) <(sort -u "$tmp/out.log") || fail "autotvm export differs"
"$bin/tvm-db" export --db "$db" --format ansor 2>/dev/null | diff - <(grep -v '^#' "$data/autoscheduler-matmul.json" | grep .) || fail "ansor export differs"

# history, stats, jobs, check, vacuum.
[ "$("$bin/tvm-db" history --db "$db" --limit 3 | wc -l)" = 3 ] || fail "history --limit"
"$bin/tvm-db" stats --db "$db" | grep -q "23 records" || fail "stats"
"$bin/tvm-db" stats --db "$db" --json | grep -q '"records": 23' || fail "stats --json"
"$bin/tvm-db" jobs --db "$db" | grep -q "no jobs" || fail "jobs"
"$bin/tvm-db" check --db "$db" | grep -q ": ok" || fail "check"
# The tuning curve of the imported AutoTVM task: an SVG with one line, its title escaped.
"$bin/tvm-db" plot --db "$db" --workload "$te" -o "$tmp/curve.svg" | grep -q "1 line" ||
  fail "plot"
head -c 5 "$tmp/curve.svg" | grep -q '<?xml' || fail "plot: not XML"
test "$(grep -c '<polyline' "$tmp/curve.svg")" = 1 || fail "plot: lines"
tail -n 1 "$tmp/curve.svg" | grep -q '</svg>' || fail "plot: unterminated"
"$bin/tvm-db" vacuum --db "$db" | grep -q ": ok" || fail "vacuum"

# Errors: clear messages, non-zero exits.
expect_error() {
  local want=$1; shift
  if "$@" >"$tmp/out" 2>"$tmp/err"; then fail "expected failure: $*"; fi
  grep -q -- "$want" "$tmp/err" || fail "'$want' not in: $(cat "$tmp/err")"
}
expect_error "no such database" "$bin/tvm-db" best --db "$tmp/missing.db" --workload matmul:M=1,N=1,K=1 --target llvm
expect_error "needs parameter K" "$bin/tvm-db" best --db "$db" --workload matmul:M=1,N=1 --target llvm
expect_error "unknown command" "$bin/tvm-db" frobnicate --db "$db"
expect_error "--workload W is required" "$bin/tvm-db" plot --db "$db"
expect_error "no records of matmul:M=3,N=3,K=3" "$bin/tvm-db" plot --db "$db" --workload matmul:M=3,N=3,K=3
expect_error "--db PATH is required" "$bin/tvm-db" stats
printf 'garbage\n{"i": 1}\n' > "$tmp/bad.log"
expect_error "bad.log:1: not JSON" "$bin/tvm-db" import --db "$db" "$tmp/bad.log"
head -c 5000 /dev/urandom > "$tmp/noise.db"
expect_error "not a valid tvm-tune database" "$bin/tvm-db" stats --db "$tmp/noise.db"
echo "tvm-db CLI: all checks passed"
