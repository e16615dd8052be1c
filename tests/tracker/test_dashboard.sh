#!/usr/bin/env bash
# The tracker's dashboard and /metrics (docs/operations.md): a tracker with --http-port, a
# registered device and a running job; the page in headless Chromium loads and shows the device
# and the job, and a screenshot is written (BUILD_DIR/Testing/dashboard.png); /metrics is valid
# Prometheus text with the device and the running job; malformed requests get the right status.
# Skipped (77) without Chromium, except under CI=true where its absence is a failure.
# usage: test_dashboard.sh BIN_DIR BUILD_DIR
set -euo pipefail
bin=$1
build=$2
chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ]; then
  if [ "${CI:-}" = true ]; then
    echo "test_dashboard: chromium is not installed (scripts/install-deps.sh installs it)" >&2
    exit 1
  fi
  echo "test_dashboard: no chromium: skipped"
  exit 77
fi
source "$(dirname "$0")/../net/daemons.sh"
work=$(mktemp -d /tmp/tt-dash-XXXXXX)
cleanup() {
  stop_daemons
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "test_dashboard: FAILED: $*" >&2
  exit 1
}

# A raw HTTP exchange over bash's /dev/tcp (no curl needed): request text in $2.
http_raw() {
  local reply
  exec 3<> "/dev/tcp/127.0.0.1/$1"
  (printf '%b' "$2" >&3) 2> /dev/null || true # a refused request may be cut short
  reply=$(timeout 10 cat <&3 || true)
  exec 3>&-
  printf '%s' "$reply"
}
http_get() { http_raw "$1" "GET $2 HTTP/1.1\r\nHost: test\r\n\r\n"; }

cd "$work"
"$bin/tvm-tracker" --port 0 --http-port 0 --db farm.db > tracker.out 2> tracker.err &
pids+=($!)
tport=$(wait_line tracker.out "listening on" | sed 's/.*://')
hport=$(wait_line tracker.out "dashboard on" | sed 's/.*:\([0-9]*\)\/$/\1/')
"$bin/tvm-rpc-server" --tracker "127.0.0.1:$tport" --key dashcpu --port 0 --no-opencl \
  --cache "$work/cache" > server.out 2> server.err &
pids+=($!)
wait_line server.out "listening on" > /dev/null
# a job long enough to be running while the page is looked at
"$bin/tvm-tune" submit --tracker "127.0.0.1:$tport" --key dashcpu \
  --workload matmul:M=32,N=32,K=32 --trials 2000 --strategy random --min-repeat-ms 20 \
  --target 'llvm -num-cores=1' > submit.out
grep -q "job 1 submitted" submit.out || fail "submit: $(cat submit.out)"
for _ in $(seq 1 200); do
  state=$(http_get "$hport" /api/state)
  if grep -q '"state":"running"' <<< "$state" && grep -q '"measured":[1-9]' <<< "$state"; then
    break
  fi
  sleep 0.1
done
grep -q '"state":"running"' <<< "$state" || fail "the job never ran: $state"

# The page in a real browser: it loads, fetches /api/state and fills the tables.
chrome=("$chromium" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage
  --user-data-dir="$work/chrome" --window-size=1300,1000 --virtual-time-budget=5000)
timeout 120 "${chrome[@]}" --dump-dom "http://127.0.0.1:$hport/" > dom.html 2> chrome.err ||
  fail "chromium: $(tail -5 chrome.err)"
grep -q 'data-loaded="yes"' dom.html || fail "the page never rendered the state: $(head -c 2000 dom.html)"
grep -q '<td>dashcpu</td>' dom.html || fail "the device is not on the page"
grep -q 'tvm-rpc-server/0.1.0' dom.html || fail "the device's implementation is not on the page"
grep -q '<td class="ok">running</td>' dom.html || fail "the running job is not on the page"
grep -q 'matmul:M=32,N=32,K=32' dom.html || fail "the job's workload is not on the page"
grep -q 'id="curve-1"' dom.html || fail "the job's tuning curve is not on the page"
mkdir -p "$build/Testing"
shot="$build/Testing/dashboard.png"
rm -f "$shot"
timeout 120 "${chrome[@]}" --screenshot="$shot" "http://127.0.0.1:$hport/" > /dev/null 2>> chrome.err ||
  fail "chromium screenshot: $(tail -5 chrome.err)"
[ "$(head -c 8 "$shot" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$shot is not a PNG"
[ "$(stat -c %s "$shot")" -gt 10000 ] || fail "$shot is too small to show anything"
echo "test_dashboard: screenshot $shot"

# The curve itself is SVG.
svg=$(http_get "$hport" /api/jobs/1/curve.svg)
grep -q '^HTTP/1.1 200 OK' <<< "$svg" || fail "curve: $svg"
grep -q 'Content-Type: image/svg+xml' <<< "$svg" || fail "curve type: $svg"
grep -q '<svg' <<< "$svg" || fail "curve body"

# /metrics: Prometheus text exposition, with the device and the running job.
metrics=$(http_get "$hport" /metrics | tr -d '\r')
grep -q '^Content-Type: text/plain; version=0.0.4' <<< "$metrics" || fail "metrics type"
body=$(sed '1,/^$/d' <<< "$metrics")
grep -qx 'tvm_tracker_devices{key="dashcpu",health="ok"} 1' <<< "$body" || fail "metrics: device: $body"
grep -qx 'tvm_tracker_jobs{state="running"} 1' <<< "$body" || fail "metrics: running job: $body"
grep -q '^tvm_tracker_job_measured{job="1"} [1-9]' <<< "$body" || fail "metrics: job progress"
grep -q '^tvm_tune_best_gflops{workload="matmul:M=32,N=32,K=32",target="llvm -num-cores=1"} ' \
  <<< "$body" || fail "metrics: best GFLOPS"
bad=$(grep -v '^# \(HELP\|TYPE\) ' <<< "$body" |
  grep -Ev '^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? -?[0-9.e+-]+$' || true)
[ -z "$bad" ] || fail "metrics lines that are not Prometheus samples: $bad"

# What a browser or a scanner might send.
r=$(http_raw "$hport" "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
grep -q '^HTTP/1.1 405' <<< "$r" || fail "POST: $r"
r=$(http_raw "$hport" "HEAD /metrics HTTP/1.1\r\n\r\n")
grep -q '^HTTP/1.1 200' <<< "$r" && ! grep -q 'tvm_tracker' <<< "$r" || fail "HEAD: $r"
r=$(http_get "$hport" /etc/passwd)
grep -q '^HTTP/1.1 404' <<< "$r" || fail "404: $r"
r=$(http_raw "$hport" "garbage\r\n\r\n")
grep -q '^HTTP/1.1 400' <<< "$r" || fail "garbage: $r"
big=$(head -c 20000 /dev/zero | tr '\0' a)
r=$(http_raw "$hport" "GET / HTTP/1.1\r\nX-Big: $big\r\n\r\n")
grep -q '^HTTP/1.1 431' <<< "$r" || fail "oversized head: $r"
# the tracker is still serving
grep -q '"state":"running"' <<< "$(http_get "$hport" /api/state)" || fail "the dashboard died"
"$bin/tvm-tune" cancel --tracker "127.0.0.1:$tport" 1 > /dev/null
echo "test_dashboard: passed"
