#!/usr/bin/env bash
# Installs the Debian 12 packages tvm-tune needs. Idempotent; run as root.
# Skips apt entirely when every package is already installed.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git clang-format
  libuv1-dev libsqlite3-dev libjansson-dev libcmocka-dev libsodium-dev
  libxgboost-dev
  # the shared database: libpq, and a PostgreSQL server the tests start privately
  libpq-dev postgresql
  llvm-14-dev clang-14 lld-14
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd
  libopenblas-dev libdnnl-dev
  # models: ONNX import (protobuf-c and the onnx.proto schema), the ONNX node tests
  protobuf-c-compiler libprotobuf-c-dev libonnx-dev libonnx-testdata
  # tests: small networks built with the onnx package, checked with numpy
  python3-onnx python3-numpy
  # tests and bench_model: ResNet-18, MobileNet-V2 and a BERT layer from PyTorch, checked and timed
  python3-torch python3-torchvision
  gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user libjansson-dev:arm64 libsodium-dev:arm64
  # tests: the dashboard in a headless browser, a device's link cut in a network namespace
  chromium fonts-dejavu-core iproute2
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages (${missing[*]}); run as root" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# The board build (tvm-rpc-server for aarch64) links the arm64 jansson: multiarch.
dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
