#!/usr/bin/env bash
# Cross-compiles tvm-rpc-server for 64-bit ARM boards (docs/farm.md, "Boards") into
# ${BUILD_DIR:-build-aarch64}/bin.  Needs gcc-aarch64-linux-gnu and libjansson-dev:arm64
# (scripts/install-deps.sh installs both).
#
#   --static   a fully static executable, for user-mode emulators (qemu-aarch64), where fork()
#              of a dynamically linked process hangs.  Kernels with parallel loops crash in it
#              (libgomp cannot share a static libc): real boards take the default build.
set -euo pipefail
cd "$(dirname "$0")/.."
static=()
if [ "${1:-}" = "--static" ]; then
  shift
  static=(-DCMAKE_EXE_LINKER_FLAGS=-static)
  BUILD_DIR=${BUILD_DIR:-build-aarch64-static}
fi
BUILD_DIR=${BUILD_DIR:-build-aarch64}
cmake -S . -B "$BUILD_DIR" -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64-linux-gnu.cmake" \
  -DTT_DEVICE_ONLY=ON -DTT_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release "${static[@]}" "$@" \
  > /dev/null
# glibc's notes on static dlopen/getaddrinfo are expected; anything else is shown.
if ! cmake --build "$BUILD_DIR" -j"$(nproc)" --target tvm-rpc-server tvm-measure-cl > "$BUILD_DIR/build.log" 2>&1; then
  cat "$BUILD_DIR/build.log" >&2
  exit 1
fi
echo "build-aarch64: $BUILD_DIR/bin/tvm-rpc-server $BUILD_DIR/bin/tvm-measure-cl"
