#!/bin/bash
# Packs what bench/gpu_check.sh needs on a GPU machine that has none of this project's
# dependencies (a lent NVIDIA machine: its own image, nothing to install from): the programs built
# here (the tuner, tvm-compile and tvm-net, so that networks are exported, tuned and built there),
# OpenCL's headers, and every library they load, except the C library, libstdc++ and libgcc_s,
# which the GPU machine's newer ones replace (its OpenCL driver is linked against those).  The ICD loader,
# which the programs open at run time rather than link, is packed too.
#
# usage: scripts/gpu-bundle.sh [OUT_DIR]      (default .gpu; needs a build in $BUILD_DIR or build/)
# Writes OUT_DIR/bundle.tar.xz (about 45 MB: LLVM and its libraries are most of it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
out=${1:-$root/.gpu}
progs=("$build/bin/tvm-tune" "$build/bin/tvm-measure-cl" "$build/bin/tvm-db"
       "$build/bin/tvm-compile" "$build/bin/tvm-net"
       "$build/tests/test_opencl" "$build/bench/bench_opencl")
for p in "${progs[@]}"; do
    [ -x "$p" ] || { echo "gpu-bundle: $p is missing: build first (scripts/build.sh)" >&2; exit 1; }
done
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/include/CL" "$out"
cp "${progs[@]}" "$stage/bin/"
# tvm-compile --target opencl compiles the network runtime there with the machine's C compiler,
# which needs OpenCL's headers (gpu_check.sh puts include/ on CPATH)
cp /usr/include/CL/*.h "$stage/include/CL/"
# the tuner links its CPU anchors and checks for the linker at start
lld=$(command -v ld.lld-14 || command -v ld.lld || true)
[ -n "$lld" ] && cp -L "$lld" "$stage/bin/ld.lld"
loader=$(ldconfig -p | awk '/libOpenCL\.so\.1 .*x86-64/ && !f {print $NF; f = 1}')
[ -n "$loader" ] || { echo "gpu-bundle: no libOpenCL.so.1 (apt-get install ocl-icd-libopencl1)" >&2; exit 1; }
{ for p in "${progs[@]}"; do ldd "$p"; done; echo "x => $loader (0)"; } |
    awk '/=>/ && $3 ~ /^\// {print $3}' | sort -u |
    grep -v -E '/(libc|libm|libpthread|libdl|librt|libresolv|libstdc\+\+|libgcc_s|ld-linux-x86-64)\.so' |
    while read -r lib; do cp -L "$lib" "$stage/lib/"; done
tar -C "$stage" -cf - . | xz -T2 -6 > "$out/bundle.tar.xz.tmp"
mv "$out/bundle.tar.xz.tmp" "$out/bundle.tar.xz"
echo "gpu-bundle: $(du -h "$out/bundle.tar.xz" | cut -f1) in $out/bundle.tar.xz ($(ls "$stage/lib" | wc -l) libraries)"
