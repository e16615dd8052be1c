#!/usr/bin/env bash
# Whole networks against PyTorch (issue #17): torchvision's ResNet-18, MobileNet-V2 and
# MobileNet-V3-Small (HardSigmoid, HardSwish: issue #54), a BERT-base encoder layer and (issue
# #54) Swin-T (its shifted-window mask folded at import), LR-ASPP MobileNet-V3-Large at opset 17
# (segmentation: bilinear Resize) and MobileNet-V3-Small at opset 17 and batch 8, exported to
# ONNX by scripts/export_torch_models.py with PyTorch's own output, built by tvm-compile --model
# (default schedules: no tuning in a test) and run by tvm-net; the outputs must match PyTorch's
# within 1e-3 relative (max |ours - torch| / max |torch|).  torch's nn.TransformerEncoderLayer
# with a key padding mask (a bool input compared and expanded at run time) at opsets 13 and 17,
# batch 1 and 2 (sequences of different lengths).
# usage: test_torch_models.sh BUILD_DIR MODELS_DIR
set -euo pipefail
bin=$1/bin
models=$2
py=/usr/bin/python3
work=$(mktemp -d /tmp/tt-torch-XXXXXX)
trap 'rm -rf "$work"' EXIT
for name in resnet18 mobilenet_v2 mobilenet_v3_small bert_layer transformer_encoder \
    transformer_encoder.o17.b2 swin_t lraspp_mobilenet_v3_large.o17 mobilenet_v3_small.o17.b8; do
  d=$models/$name
  lib=${name//./_} # a C identifier
  "$bin/tvm-compile" --model "$d/model.onnx" -o "$work/$lib" --quiet 2> "$work/$lib.warn"
  inputs=()
  for f in "$d"/input_*.npy; do inputs+=(-i "$f"); done
  "$bin/tvm-net" run "$work/$lib.so" "${inputs[@]}" -o "$work/$lib.npy" > /dev/null
  "$py" - "$work/$lib.npy" "$d/output_0.npy" "$name" <<'PY'
import sys
import numpy as np
ours, torch, name = np.load(sys.argv[1]), np.load(sys.argv[2]), sys.argv[3]
assert ours.shape == torch.shape, (ours.shape, torch.shape)
err = float(np.abs(ours - torch).max() / np.abs(torch).max())
print(f"{name}: output {ours.shape}, max |ours - torch| / max |torch| = {err:.2e}")
sys.exit(0 if err <= 1e-3 else f"{name}: relative error {err} > 1e-3")
PY
done
echo "test_torch_models: passed"
