#!/usr/bin/env bash
# The systemd units in deploy/systemd pass systemd-analyze verify (with ExecStart pointed at this
# build's binaries).  Skipped (77) where systemd-analyze is not installed.
# usage: test_units.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
command -v systemd-analyze > /dev/null || { echo "no systemd-analyze: skipped"; exit 77; }
work=$(mktemp -d /tmp/tt-units-XXXXXX)
trap 'rm -rf "$work"' EXIT
sed "s|/usr/local/bin|$bin|g" "$src/deploy/systemd/tvm-tracker.service" > "$work/tvm-tracker.service"
sed "s|/usr/local/bin|$bin|g" "$src/deploy/systemd/tvm-rpc-server@.service" \
  > "$work/tvm-rpc-server@.service"
cp "$work/tvm-rpc-server@.service" "$work/tvm-rpc-server@cpu.service"
systemd-analyze verify --man=no "$work/tvm-tracker.service" "$work/tvm-rpc-server@cpu.service"
echo "test_units: passed"
