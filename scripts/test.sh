#!/usr/bin/env bash
# Quick start, step 2: install what is needed, build, and run the whole test suite with CTest.
# With CI=true (or --sanitize) the suite runs a second time in an ASan+UBSan build.
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize=0
[ "${CI:-}" = "true" ] && sanitize=1
[ "${1:-}" = "--sanitize" ] && sanitize=1
bash scripts/install-deps.sh
bash scripts/build.sh
(cd build && ctest --output-on-failure -j "$(nproc)")
if [ "$sanitize" = 1 ]; then
  echo "== ASan + UBSan build =="
  # -O1, as ASan's documentation advises for speed (-O0 ran the suite a fifth slower).  A 32 MiB
  # quarantine (256 by default) still holds freed memory back far longer than any one object
  # lives, and halved test_search, which clones and frees states by the thousand: with a large
  # quarantine each allocation is a fresh page to fault in.
  BUILD_DIR=build-asan bash scripts/build.sh -DTT_ASAN=ON -DTT_UBSAN=ON -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_C_FLAGS_DEBUG="-g -O1"
  (cd build-asan &&
    ASAN_OPTIONS=detect_leaks=1:quarantine_size_mb=32 ctest --output-on-failure -j "$(nproc)")
fi
