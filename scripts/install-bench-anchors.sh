#!/usr/bin/env bash
# Installs the benchmark anchors that Debian does not package (the others, OpenBLAS, oneDNN and
# PyTorch, come from scripts/install-deps.sh).  For benchmarks only: no test needs them.
#
#   ONNX Runtime (CPU), the engine most ONNX models are deployed with: npm's onnxruntime-node
#   carries its CPU library, bin/napi-v6/linux/x64/libonnxruntime.so.1, and the Node binding
#   bench/ort_time.js uses.  Its install script only fetches GPU binaries from outside the npm
#   registry, so it is skipped (--ignore-scripts).
#
# Where: $TVM_TUNE_ANCHORS (default /opt/tvm-tune-anchors); bench_model looks there, or in
# $TVM_TUNE_ANCHORS when set.  Idempotent: does nothing when the version is there.
set -euo pipefail
ORT_VERSION=1.30.0
dest=${TVM_TUNE_ANCHORS:-/opt/tvm-tune-anchors}
have=$(node -p "require('$dest/node_modules/onnxruntime-node/package.json').version" 2> /dev/null || true)
if [ "$have" = "$ORT_VERSION" ]; then
  echo "install-bench-anchors: onnxruntime-node $ORT_VERSION present in $dest"
  exit 0
fi
if ! command -v npm > /dev/null; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-bench-anchors: npm is missing; run as root (it installs Debian's npm)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends nodejs npm
fi
mkdir -p "$dest"
echo "install-bench-anchors: onnxruntime-node $ORT_VERSION into $dest"
(cd "$dest" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error \
  "onnxruntime-node@$ORT_VERSION")
lib="$dest/node_modules/onnxruntime-node/bin/napi-v6/linux/$(uname -m | sed 's/x86_64/x64/; s/aarch64/arm64/')/libonnxruntime.so.1"
[ -f "$lib" ] || { echo "install-bench-anchors: no CPU library at $lib" >&2; exit 1; }
node -e "require('$dest/node_modules/onnxruntime-node')" ||
  { echo "install-bench-anchors: the Node binding does not load" >&2; exit 1; }
echo "install-bench-anchors: ONNX Runtime $ORT_VERSION ready ($lib)"
