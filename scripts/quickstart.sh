#!/usr/bin/env bash
# Quick start, step 1: install what is needed, build, and run the main job.
#
# The main job today lowers a tiled 128x128x128 matmul to the loop IR, prints it, and checks it
# against the naive definition in the interpreter.  (When the CPU code generator and the tuner
# land, this becomes an embedded tuning run writing ./tuning.db.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
./build/bin/tvm-tune lower --workload matmul:M=128,N=128,K=128 \
    --steps examples/matmul-tiled.json --check
