#!/usr/bin/env bash
# The model zoo (issue #54): every classification and segmentation model of torchvision 0.14,
# exported to ONNX by scripts/export_torch_models.py (random weights, nothing downloaded), built
# untuned by tvm-compile --model, run by tvm-net and checked against PyTorch's output (max |ours
# - torch| / max |torch| <= 1e-3); with --time, timed beside ONNX Runtime (bench/ort_time.js,
# when scripts/install-bench-anchors.sh installed it) and PyTorch, each the median of --repeat
# runs in a fresh process.  Prints a markdown table (docs/models.md, "The zoo") and, with --json
# FILE, writes its rows.  A model that does not import gets the reason tvm-compile gives.
#
# usage: scripts/zoo.sh [--opset N] [--batch N] [--target T] [--time] [--repeat N] [--dir DIR]
#                       [--json FILE] [--keep] [--all | MODEL ...]
#   MODEL     torchvision names (default: the zoo below, one or two sizes of each family);
#             --opset and --batch apply to all
#   --target  tvm-compile's target (default: this machine's CPU); opencl builds each model for
#             the OpenCL device (TVM_TUNE_OPENCL_DEVICE, else the first GPU, else pocl's CPU
#             device) with the default GPU schedules, and --time then times ours alone (the
#             anchors run on the CPU)
#   --all     every classification and segmentation model torchvision lists (86 in 0.14, up to
#             ViT-H/14's and RegNet-Y-128GF's 2.5 GB of weights, which export as external data)
#   --dir     where models and libraries go (default /tmp/tvm-tune-zoo); the exports stay, so a
#             second run skips them (--all: about 20 GB per opset and batch), and each library
#             goes once it is checked and timed (ViT-H/14's is 2.4 GB), unless --keep
#   --keep    keep the libraries too
# Exit status: 0 when every model imported and matched, 1 otherwise, 2 bad arguments.
set -uo pipefail
# pocl's default work-group method miscompiles some valid kernels (docs/opencl.md "pocl, the
# test device"): checked on pocl, a mismatch should be ours.  Other drivers ignore it.
export POCL_WORK_GROUP_METHOD=${POCL_WORK_GROUP_METHOD:-loops}
export POCL_WORK_GROUP_SPECIALIZATION=${POCL_WORK_GROUP_SPECIALIZATION:-0}
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${TVM_TUNE_BIN:-$here/build/bin}
py=/usr/bin/python3
opset=13 batch=1 target= time=0 repeat=20 dir=/tmp/tvm-tune-zoo json= all=0 keep=0
models=()
while [ $# -gt 0 ]; do
  case $1 in
    --opset) opset=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --target) target=$2; shift 2 ;;
    --time) time=1; shift ;;
    --repeat) repeat=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --json) json=$2; shift 2 ;;
    --all) all=1; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    -*) echo "zoo.sh: unknown option $1" >&2; exit 2 ;;
    *) models+=("$1"); shift ;;
  esac
done
if [ $all = 1 ]; then
  read -r -a models < <($py -c 'import torchvision.models as m
print(" ".join(m.list_models(module=m) + m.list_models(module=m.segmentation)))') ||
    { echo "zoo.sh: --all needs torchvision 0.14 or later (list_models)" >&2; exit 2; }
elif [ ${#models[@]} -eq 0 ]; then
  models=(alexnet convnext_tiny convnext_small densenet121 densenet161 efficientnet_b0
          efficientnet_b1 efficientnet_b3 efficientnet_v2_s googlenet inception_v3 mnasnet0_5
          mnasnet1_0 mobilenet_v2 mobilenet_v3_small mobilenet_v3_large regnet_x_400mf
          regnet_y_400mf resnet18 resnet50 resnext50_32x4d shufflenet_v2_x1_0 squeezenet1_0
          squeezenet1_1 swin_t vgg11 vit_b_16 wide_resnet50_2 fcn_resnet50 deeplabv3_resnet50
          deeplabv3_mobilenet_v3_large lraspp_mobilenet_v3_large)
fi
[ -x "$bin/tvm-compile" ] || { echo "zoo.sh: build first ($bin/tvm-compile is missing)" >&2; exit 2; }
anchors=${TVM_TUNE_ANCHORS:-/opt/tvm-tune-anchors}/node_modules/onnxruntime-node
cores=$(nproc)
mkdir -p "$dir/models" "$dir/lib"
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
isa=avx
grep -qw avx2 /proc/cpuinfo && isa=avx2
grep -qw avx512f /proc/cpuinfo && isa=avx512
targs=()
where="$cpu, $cores cores, $isa"
if [ -n "$target" ]; then
  targs=(--target "$target")
  where="$where; target $target"
fi
echo "zoo: $where; opset $opset, batch $batch, untuned (no database)"
echo
if [ $time = 1 ]; then
  echo "| model | imports | max rel. error | ours (ms) | ONNX Runtime (ms) | PyTorch (ms) | vs ONNX Runtime | vs PyTorch |"
  echo "|---|---|---|---|---|---|---|---|"
else
  echo "| model | imports | max rel. error | tasks |"
  echo "|---|---|---|---|"
fi
rows=() failed=0
field() { # the number `key` of a JSON line
  $py -c 'import json,sys; print(json.loads(sys.argv[1]).get(sys.argv[2], 0))' "$1" "$2" 2> /dev/null || echo 0
}
for m in "${models[@]}"; do
  spec=$m
  [ "$opset" != 13 ] && spec=$spec.o$opset
  [ "$batch" != 1 ] && spec=$spec.b$batch
  d=$dir/models/$spec lib=$dir/lib/${spec//./_}
  if [ ! -f "$d/output_0.npy" ] &&
     ! $py "$here/scripts/export_torch_models.py" "$dir/models" "$spec" > "$dir/$spec.export.log" 2>&1; then
    echo "| $m | export failed: $(tail -1 "$dir/$spec.export.log" | cut -c1-120) | | |"
    failed=1; continue
  fi
  if ! "$bin/tvm-compile" --model "$d/model.onnx" "${targs[@]}" -o "$lib" --quiet 2> "$dir/$spec.compile.log"; then
    why=$(grep -v '^warning' "$dir/$spec.compile.log" | tail -1 | sed "s|$d/||" | cut -c1-160)
    echo "| $m | no: $why | | |"
    rows+=("{\"model\": \"$m\", \"imports\": false}")
    failed=1; continue
  fi
  # every input the export wrote (a transformer encoder's padding mask too), in order
  ins=() inargs=()
  for k in 0 1 2 3 4 5 6 7; do
    [ -f "$d/input_$k.npy" ] && { ins+=("$d/input_$k.npy"); inargs+=(-i "$d/input_$k.npy"); }
  done
  err=$("$bin/tvm-net" run "$lib.so" "${inargs[@]}" -o "$lib.out.npy" > /dev/null 2>&1 &&
        $py -c 'import numpy as np,sys; a,b=np.load(sys.argv[1]),np.load(sys.argv[2]); print("%.1e" % (abs(a-b).max()/abs(b).max()) if a.shape==b.shape else "shape")' \
            "$lib.out.npy" "$d/output_0.npy")
  ok=yes
  $py -c 'import sys; sys.exit(0 if sys.argv[1] not in ("", "shape") and float(sys.argv[1]) <= 1e-3 else 1)' "$err" || { ok=mismatch; failed=1; }
  tasks=$("$bin/tvm-net" info "$lib.so" --json 2> /dev/null | $py -c 'import json,sys; print(len(json.load(sys.stdin)["tasks"]))' 2> /dev/null)
  [ $keep = 1 ] || rm -f "$lib.a" "$lib.out.npy"
  if [ $time = 0 ]; then
    echo "| $m | $ok | $err | $tasks |"
    rows+=("{\"model\": \"$m\", \"imports\": true, \"matches\": \"$ok\", \"max_rel_error\": \"$err\", \"tasks\": ${tasks:-0}}")
    [ $keep = 1 ] || rm -f "$lib.so" "$lib.h" "$lib.pc"
    continue
  fi
  ours=$(field "$("$bin/tvm-net" time "$lib.so" "${inargs[@]}" --repeat "$repeat" --json 2> /dev/null | tail -1)" median_s)
  torch=0 ort=0
  # the anchors run on this machine's CPU: beside an OpenCL build they would compare devices
  [ "$target" = opencl ] || torch=$(field "$($py "$here/scripts/export_torch_models.py" --time "$spec" "$d" --threads "$cores" --repeat "$repeat" 2> /dev/null | tail -1)" median_s)
  [ "$target" != opencl ] && [ -d "$anchors" ] && ort=$(field "$(node "$here/bench/ort_time.js" "$anchors" "$d/model.onnx" "$cores" "$repeat" "$d/output_0.npy" "${ins[@]}" 2> /dev/null | tail -1)" median_s)
  $py - "$m" "$ok" "$err" "$ours" "$ort" "$torch" <<'PY'
import sys
m, ok, err, ours, ort, torch = sys.argv[1:4] + [float(v) for v in sys.argv[4:]]
ms = lambda v: f"{v * 1e3:.2f}" if v > 0 else "-"
vs = lambda v: f"{v / ours:.2f}x" if v > 0 and ours > 0 else "-"
print(f"| {m} | {ok} | {err} | {ms(ours)} | {ms(ort)} | {ms(torch)} | {vs(ort)} | {vs(torch)} |")
PY
  rows+=("{\"model\": \"$m\", \"imports\": true, \"matches\": \"$ok\", \"max_rel_error\": \"$err\", \"ours_s\": $ours, \"onnxruntime_s\": $ort, \"pytorch_s\": $torch}")
  [ $keep = 1 ] || rm -f "$lib.so" "$lib.h" "$lib.pc"
done
if [ -n "$json" ]; then
  (IFS=,; echo "[${rows[*]}]") > "$json"
fi
exit $failed
