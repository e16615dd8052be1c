#!/usr/bin/env bash
# Quick start, step 1: install what is needed, build, and run the main job: an embedded tuning run
# of a 256x256x256 matmul on this machine (about 3 s after the build), recorded in ./tuning.db, then the
# question a build asks of the database.  Running it again resumes instead of starting over.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
workload=matmul:M=256,N=256,K=256
./build/bin/tvm-tune run --workload "$workload" --trials 64 --db tuning.db
./build/bin/tvm-db best --db tuning.db --workload "$workload" --target llvm
