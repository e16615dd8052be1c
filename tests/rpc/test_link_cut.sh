#!/usr/bin/env bash
# A device whose network link is cut silently in the middle of a tuning run (issue #9): the
# device runs in a network namespace this test creates, joined to the host by a veth pair;
# taking the pair's far end down drops every packet without a reset or a close.  The run must
# notice (keepalive, within seconds, not the measurement timeout), measure the lost candidate on
# the other device, and finish with exactly its trials; the tracker must let the silent device go
# (keepalive on its connection too) and take it back once the link returns.  Skipped (77) where network
# namespaces cannot be made (no root, no CAP_NET_ADMIN, no iproute2).
# usage: test_link_cut.sh BIN_DIR
set -euo pipefail
bin=$1
ns=ttcut$$
host_if=tth$$
dev_if=ttd$$
net=10.231.$((($$ % 200) + 20))
if ! command -v ip > /dev/null || ! ip netns add "$ns" 2> /dev/null; then
  echo "test_link_cut: cannot create a network namespace here: skipped"
  exit 77
fi
source "$(dirname "$0")/../net/daemons.sh"
work=$(mktemp -d /tmp/tt-cut-XXXXXX)
cleanup() {
  stop_daemons
  ip link del "$host_if" 2> /dev/null || true
  ip netns del "$ns" 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "test_link_cut: FAILED: $*" >&2
  for f in "$work"/*.err; do echo "--- $f" >&2; tail -20 "$f" >&2; done
  exit 1
}
# SUMMARY through tvm-tune (authenticated), the --devices table.
devices() { "$bin/tvm-tune" summary --tracker "$net.1:$tport" --devices 2> /dev/null || true; }

ip link add "$host_if" type veth peer name "$dev_if"
ip link set "$dev_if" netns "$ns"
ip addr add "$net.1/30" dev "$host_if"
ip link set "$host_if" up
ip netns exec "$ns" ip addr add "$net.2/30" dev "$dev_if"
ip netns exec "$ns" ip link set "$dev_if" up
ip netns exec "$ns" ip link set lo up

cd "$work"
"$bin/tvm-tune" keygen farm.key > /dev/null
export TVM_TUNE_AUTH_KEY_FILE=$work/farm.key
"$bin/tvm-tracker" --host "$net.1" --port 0 --no-jobs > tracker.out 2> tracker.err &
pids+=($!)
tport=$(wait_line tracker.out "listening on" 150 | sed 's/.*://')
# device A across the link, device B on this side
ip netns exec "$ns" "$bin/tvm-rpc-server" --tracker "$net.1:$tport" --key cut --host "$net.2" \
  --port 0 --no-opencl --cache "$work/cache-a" > a.out 2> a.err &
pids+=($!)
"$bin/tvm-rpc-server" --tracker "$net.1:$tport" --key cut --host "$net.1" --port 0 --no-opencl \
  --cache "$work/cache-b" > b.out 2> b.err &
pids+=($!)
for _ in $(seq 1 100); do
  [ "$(devices | grep -c 'tvm-rpc-server')" -ge 2 ] && break
  sleep 0.1
done
[ "$(devices | grep -c 'tvm-rpc-server')" -ge 2 ] || fail "both devices never registered: $(devices)"

# Slow candidates (min-repeat-ms) so the cut lands inside sessions on both devices.
trials=24
"$bin/tvm-tune" run --workload matmul:M=32,N=32,K=32 --trials $trials --strategy random \
  --min-repeat-ms 150 --repeat 2 --target 'llvm -num-cores=1' --tracker "$net.1:$tport" \
  --key cut --device-wait 120 --db run.db > run.out 2> run.err &
run=$!
pids+=($run)
for _ in $(seq 1 200); do
  grep -q "session with" a.err && break
  sleep 0.05
done
grep -q "session with" a.err || fail "device A never measured"
sleep 0.5
cut_at=$(date +%s)
ip netns exec "$ns" ip link set "$dev_if" down # silently: no FIN, no RST, nothing
echo "test_link_cut: link of device A cut"

# The tracker lets A go: its connection dies of unanswered keepalives (about 15 s), or, had A
# been idle and heartbeating, it would be marked stale after 6 s.  Either way it is not handed
# out.
gone=no
for _ in $(seq 1 400); do
  if ! devices | grep "$net.2" | grep -vq stale; then
    gone=yes
    break
  fi
  sleep 0.1
done
[ $gone = yes ] || fail "the tracker still offers device A: $(devices)"
echo "test_link_cut: the tracker let device A go $(($(date +%s) - cut_at)) s after the cut"

if ! timeout 300 tail --pid=$run -f /dev/null; then fail "the run never ended"; fi
wait $run || fail "the run failed: $(tail -5 run.err)"
took=$(($(date +%s) - cut_at))
records=$("$bin/tvm-db" stats --db run.db --json | sed -n 's/.*"records": \([0-9]*\).*/\1/p' | head -1)
[ "$records" = "$trials" ] || fail "$records records, not $trials"
ok=$("$bin/tvm-db" stats --db run.db --json | tr -d ' \n' | sed -n 's/.*"NO_ERROR":\([0-9]*\).*/\1/p')
[ "$ok" = "$trials" ] ||
  fail "$ok error-free records of $trials: the cut became a result: $("$bin/tvm-db" history --db run.db 2>&1 | grep -v NO_ERROR | tail -3)"
grep -q "session lost (device $net.2" run.err || fail "the run did not report the lost device"
echo "test_link_cut: the run finished $took s after the cut, $records error-free records"

# The link returns: A registers again by itself (its reconnection backoff is at most 30 s).
ip netns exec "$ns" ip link set "$dev_if" up
back=no
for _ in $(seq 1 600); do
  if devices | grep "$net.2" | grep -qv stale; then
    back=yes
    break
  fi
  sleep 0.1
done
[ $back = yes ] || fail "device A never came back: $(devices)"
echo "test_link_cut: passed"
