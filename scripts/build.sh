#!/usr/bin/env bash
# Configures and builds tvm-tune into ./build (or $BUILD_DIR).  With CI=true warnings are errors.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
werror=OFF
[ "${CI:-}" = "true" ] && werror=ON
cmake -S . -B "$BUILD_DIR" -DTT_WERROR="$werror" "$@" > /dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
