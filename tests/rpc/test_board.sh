#!/usr/bin/env bash
# A 64-bit ARM board in the farm, emulated: tvm-rpc-server cross-compiled for aarch64 runs under
# qemu-aarch64, registers with a tvm-tracker on loopback, and measures kernels that our LLVM code
# generator cross-compiles here; their outputs are checked against the reference on the "board".
# Usage: test_board.sh BIN_DIR BUILD_DIR.  Exit 77 (skipped) without the cross tools.
set -euo pipefail
BIN=$1
BUILD=$2
SRC=$(cd "$(dirname "$0")/../.." && pwd)
for tool in aarch64-linux-gnu-gcc qemu-aarch64; do
  if ! command -v "$tool" > /dev/null; then
    echo "SKIP: $tool is not installed (scripts/install-deps.sh installs it)"
    exit 77
  fi
done
source "$(dirname "$0")/../net/daemons.sh"
WORK=$(mktemp -d /tmp/tt-board-XXXXXX)
cleanup() {
  stop_daemons
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$WORK"/*.log; do echo "--- $f" >&2; tail -20 "$f" >&2; done
  exit 1
}

# The emulator cannot fork a dynamically linked process: the board binary is the static build.
BUILD_DIR="$BUILD/aarch64-static" bash "$SRC/scripts/build-aarch64.sh" --static > "$WORK/build.log"
SERVER="$BUILD/aarch64-static/bin/tvm-rpc-server"
file "$SERVER" | grep -q "ARM aarch64" || fail "$SERVER is not an aarch64 executable"

"$BIN/tvm-tracker" --port 0 --no-jobs --quiet > "$WORK/tracker.out" &
pids+=($!)
for _ in $(seq 100); do grep -q listening "$WORK/tracker.out" && break; sleep 0.1; done
PORT=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/tracker.out")
[ -n "$PORT" ] || fail "the tracker did not start"

qemu-aarch64 -L /usr/aarch64-linux-gnu "$SERVER" --tracker "127.0.0.1:$PORT" --key board \
  --port 0 --cache "$WORK/cache" > "$WORK/server.out" 2> "$WORK/server.log" &
pids+=($!)
for _ in $(seq 200); do grep -q registered "$WORK/server.log" 2> /dev/null && break; sleep 0.1; done
grep -q registered "$WORK/server.log" || fail "the emulated board did not register"

# The board says what it is; SUMMARY (and TVM's query tool) show it.
"$BIN/tvm-tune" summary --tracker "127.0.0.1:$PORT" > "$WORK/summary.txt"
grep -q "server:board" "$WORK/summary.txt" || fail "the board is not in the server list"

# A target for this machine's CPU is refused before anything is compiled.
if "$BIN/tvm-tune" run --tracker "127.0.0.1:$PORT" --key board --workload matmul:M=8,N=8,K=8 \
  --trials 2 --db "$WORK/wrong.db" > "$WORK/wrong.log" 2>&1; then
  fail "an x86_64 target was measured on an aarch64 board"
fi
grep -q "device .* is aarch64" "$WORK/wrong.log" || fail "no clear message for the wrong target"

# Cross-compiled kernels, measured and checked on the board (one core: see build-aarch64.sh).
"$BIN/tvm-tune" run --tracker "127.0.0.1:$PORT" --key board --workload matmul:M=24,N=16,K=32 \
  --target "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -num-cores=1" --trials 6 \
  --strategy random --repeat 2 --db "$WORK/board.db" > "$WORK/run.log" 2>&1 ||
  fail "the tuning run on the board failed"
"$BIN/tvm-db" stats --db "$WORK/board.db" --json > "$WORK/stats.json"
grep -q '"records": 6' "$WORK/stats.json" || fail "expected 6 records: $(cat "$WORK/stats.json")"
grep -q '"NO_ERROR": 6' "$WORK/stats.json" || fail "board measurements failed: $(cat "$WORK/stats.json")"
"$BIN/tvm-db" history --db "$WORK/board.db" --json | grep -q '|aarch64|' ||
  fail "records do not name the aarch64 device"
echo "PASS: 6 kernels cross-compiled for aarch64, measured and checked on the emulated board"
