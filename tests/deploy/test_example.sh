#!/usr/bin/env bash
# The deploy example end to end (issue #8): tune matmul and conv2d briefly into a database,
# tvm-compile a library for this CPU (and for OpenCL when the machine has a device), build
# deploy/examples/app.c against each with cc and pkg-config, run it (it checks the results
# against naive loops); then install the project into a prefix and build the same app from a
# CMake project that uses find_package(TvmTune) and tvm_tune_add_library, which re-runs
# tvm-compile when the database changes.
# usage: test_example.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
bin=$build/bin
work=$(mktemp -d /tmp/tt-example-XXXXXX)
trap 'rm -rf "$work"' EXIT
db=$work/tuning.db
mm=matmul:M=128,N=128,K=128
conv=conv2d_nhwc:N=1,H=28,W=28,CI=16,CO=32,K=3,S=1,P=1

"$bin/tvm-tune" run --workload "$mm" --workload "$conv" --trials 6 --strategy random \
  --repeat 2 --min-repeat-ms 1 --db "$db" > "$work/tune.log"

build_and_run() { # OUTPREFIX
  local dir name
  dir=$(dirname "$1")
  name=$(basename "$1")
  cc -O2 -o "$dir/app" "$src/deploy/examples/app.c" \
    $(PKG_CONFIG_PATH="$dir" pkg-config --cflags --libs "$name")
  "$dir/app" | tee "$dir/app.log"
  grep -q '^OK$' "$dir/app.log"
}

echo "== CPU library"
"$bin/tvm-compile" --db "$db" -o "$work/cpu/kernels" --strict \
  --workload "$mm" --symbol tuned_matmul --workload "$conv" --symbol tuned_conv2d
build_and_run "$work/cpu/kernels"
grep -q 'exact match' "$work/cpu/kernels.h"

echo "== OpenCL library"
if "$bin/tvm-tune" run --target opencl --workload "$mm" --trials 2 --strategy random \
  --repeat 1 --db "$db" > "$work/tune-cl.log" 2>&1; then
  "$bin/tvm-compile" --db "$db" --target opencl -o "$work/cl/kernels" \
    --workload "$mm" --symbol tuned_matmul --workload "$conv" --symbol tuned_conv2d \
    2> "$work/cl.warn"
  grep -q "no record of $conv for target 'opencl'" "$work/cl.warn"
  build_and_run "$work/cl/kernels"
else
  grep -q "no OpenCL device" "$work/tune-cl.log"
  echo "(no OpenCL device: skipped)"
fi

echo "== installed: CMake project with tvm_tune_add_library"
cmake --install "$build" --prefix "$work/prefix" > /dev/null
test -x "$work/prefix/bin/tvm-compile"
test -f "$work/prefix/include/tvm-tune/tvm_tune_abi.h"
PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --variable=tvm_compile tvm-tune |
  grep -q "tvm-compile"
mkdir -p "$work/app"
cp "$src/deploy/examples/app.c" "$work/app/"
cat > "$work/app/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.20)
project(app C)
find_package(TvmTune REQUIRED)
tvm_tune_add_library(kernels DB "$db" STRICT
  WORKLOADS "$mm" tuned_matmul "$conv" tuned_conv2d)
add_executable(app app.c)
target_link_libraries(app PRIVATE kernels)
CMAKE
cmake -S "$work/app" -B "$work/app/build" -DCMAKE_PREFIX_PATH="$work/prefix" > /dev/null
cmake --build "$work/app/build" > "$work/app/build1.log"
grep -q "tvm-compile kernels" "$work/app/build1.log"
"$work/app/build/app" | tee "$work/app/run.log"
grep -q '^OK$' "$work/app/run.log"
# Unchanged database: nothing to do.  A new measurement: tvm-compile runs again.
cmake --build "$work/app/build" > "$work/app/build2.log"
! grep -q "tvm-compile kernels" "$work/app/build2.log"
sleep 1
"$bin/tvm-tune" run --workload "$mm" --trials 8 --strategy random --repeat 2 \
  --min-repeat-ms 1 --db "$db" > /dev/null
cmake --build "$work/app/build" > "$work/app/build3.log"
grep -q "tvm-compile kernels" "$work/app/build3.log"
"$work/app/build/app" | grep -q '^OK$'
echo "test_example: passed"
