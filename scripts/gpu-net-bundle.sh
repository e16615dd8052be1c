#!/bin/bash
# Packs networks built here for OpenCL, for bench/gpu_check.sh's "nets" step on a GPU machine
# (which has no C compiler for tvm-compile's runtime glue, and none of our libraries): tvm-net,
# the libraries it and the network libraries load (the ICD loader, jansson), and for each model
# of scripts/export_torch_models.py its library (tvm-compile --model --target opencl, default
# schedules, or the records of DB), its input and PyTorch's output.
#
# usage: scripts/gpu-net-bundle.sh [--db DB] MODEL...     (default: mobilenet_v2 bert_layer)
#        scripts/gpu-net-bundle.sh --tasks MODEL...
# Writes .gpu/nets.tar (uncompressed: random weights do not compress).  Mind the size: the device
# tool carries 64 MiB in all (ResNet-18's weights alone are 45 MiB).  --tasks writes instead
# .gpu/tune/MODEL.tasks, the model's tasks for --target opencl (tvm-tune tasks), which
# gpu_check.sh's "tune" step tunes on the GPU without the weights.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
out=$root/.gpu
db=()
if [ "${1:-}" = --db ]; then db=(--db "$2"); shift 2; fi
if [ "${1:-}" = --tasks ]; then
    shift
    mkdir -p "$out/tune"
    for m in "$@"; do
        models_dir=$build/tests/torch_models
        [ -f "$models_dir/$m/model.onnx" ] || /usr/bin/python3 "$root/scripts/export_torch_models.py" "$models_dir" "$m"
        "$build/bin/tvm-tune" tasks --model "$models_dir/$m/model.onnx" --target opencl --json |
            /usr/bin/python3 -c '
import json, sys
for t in json.load(sys.stdin)["tasks"]:
    print(t["weight"], t["workload"])' > "$out/tune/$m.tasks"
        echo "gpu-net-bundle: $(wc -l < "$out/tune/$m.tasks") tasks in $out/tune/$m.tasks"
    done
    exit 0
fi
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(mobilenet_v2 bert_layer)
for p in "$build/bin/tvm-net" "$build/bin/tvm-compile"; do
    [ -x "$p" ] || { echo "gpu-net-bundle: $p is missing: build first (scripts/build.sh)" >&2; exit 1; }
done
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/nets" "$out"
cp "$build/bin/tvm-net" "$stage/bin/"
loader=$(ldconfig -p | awk '/libOpenCL\.so\.1 .*x86-64/ && !f {print $NF; f = 1}')
{ ldd "$build/bin/tvm-net"; echo "x => $loader (0)"; } | awk '/=>/ && $3 ~ /^\// {print $3}' |
    grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux-x86-64)\.so' |
    while read -r lib; do cp -L "$lib" "$stage/lib/"; done
models_dir=$build/tests/torch_models
for m in "${models[@]}"; do
    [ -f "$models_dir/$m/model.onnx" ] || /usr/bin/python3 "$root/scripts/export_torch_models.py" "$models_dir" "$m"
    lib=${m//./_}
    mkdir -p "$stage/nets/$m"
    "$build/bin/tvm-compile" --model "$models_dir/$m/model.onnx" --target opencl "${db[@]}" \
        -o "$stage/nets/$m/$lib" --quiet
    rm -f "$stage/nets/$m/$lib.a"
    cp "$models_dir/$m/input_0.npy" "$models_dir/$m/output_0.npy" "$stage/nets/$m/"
done
tar -C "$stage" -cf "$out/nets.tar.tmp" .
mv "$out/nets.tar.tmp" "$out/nets.tar"
echo "gpu-net-bundle: $(du -h "$out/nets.tar" | cut -f1) in $out/nets.tar (${models[*]})"
