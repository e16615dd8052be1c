#!/usr/bin/python3
"""Networks from PyTorch (Debian's python3-torch and python3-torchvision) exported to ONNX, with
PyTorch's own output as the reference, for tests/deploy (end to end against PyTorch) and
bench/bench_model (speed against PyTorch):

    OUT/<name>/model.onnx
    OUT/<name>/input_0.npy      the input (float32, fixed seed)
    OUT/<name>/output_0.npy     PyTorch's output for it (inference mode)

resnet18      torchvision's ResNet-18, batch 1, 3x224x224
mobilenet_v2  torchvision's MobileNet-V2, batch 1, 3x224x224
mobilenet_v3_small, mobilenet_v3_large
              torchvision's MobileNet-V3 (HardSigmoid, HardSwish), batch 1, 3x224x224
vit_b_16      torchvision's ViT-B/16 (its class token's Expand), batch 1, 3x224x224
bert_layer    a BERT-base encoder layer (hidden 768, 12 heads, feed-forward 3072, GELU,
              post-LayerNorm as Hugging Face's BertLayer), batch 1, sequence 128

Weights are random (torchvision's initialisation, nothing is downloaded). BatchNormalization
statistics and affine parameters are randomised too, so folding them into the convolutions is
tested with values that matter.

Usage: export_torch_models.py OUT [NAME ...]      (default: resnet18, mobilenet_v2,
                                                   mobilenet_v3_small, bert_layer;
                                                   mobilenet_v3_large and vit_b_16 on
                                                   request)
       export_torch_models.py --time NAME MODEL_DIR [--threads N] [--repeat N]
           times PyTorch on MODEL_DIR's input: prints one JSON line (bench/bench_model)
"""
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torchvision

OPSET = 13  # the exporter of torch 1.13 writes LayerNorm and GELU decomposed below opset 17


class BertLayer(torch.nn.Module):
    """Hugging Face's BertLayer in inference: self-attention, output projection with residual and
    LayerNorm, GELU feed-forward with residual and LayerNorm."""

    def __init__(self, hidden=768, heads=12, ffn=3072):
        super().__init__()
        self.heads, self.dh = heads, hidden // heads
        self.q = torch.nn.Linear(hidden, hidden)
        self.k = torch.nn.Linear(hidden, hidden)
        self.v = torch.nn.Linear(hidden, hidden)
        self.o = torch.nn.Linear(hidden, hidden)
        self.ln1 = torch.nn.LayerNorm(hidden, eps=1e-12)
        self.up = torch.nn.Linear(hidden, ffn)
        self.down = torch.nn.Linear(ffn, hidden)
        self.ln2 = torch.nn.LayerNorm(hidden, eps=1e-12)

    def split(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.dh).permute(0, 2, 1, 3)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dh)
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
        ctx = ctx.permute(0, 2, 1, 3).reshape(b, s, h)
        x = self.ln1(self.o(ctx) + x)
        return self.ln2(self.down(torch.nn.functional.gelu(self.up(x))) + x)


def build(name):
    torch.manual_seed(0)
    if name == "resnet18":
        return torchvision.models.resnet18(), (1, 3, 224, 224)
    if name == "mobilenet_v2":
        return torchvision.models.mobilenet_v2(), (1, 3, 224, 224)
    if name == "bert_layer":
        return BertLayer(), (1, 128, 768)
    if name in ("mobilenet_v3_small", "mobilenet_v3_large", "vit_b_16"):
        return getattr(torchvision.models, name)(), (1, 3, 224, 224)
    raise SystemExit(f"export_torch_models.py: unknown network '{name}' "
                     "(resnet18, mobilenet_v2, mobilenet_v3_small, mobilenet_v3_large, "
                     "vit_b_16, bert_layer)")


def randomise_batchnorm(model):
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(c, generator=g) * 0.5 + 0.75)
            m.weight.data.copy_(torch.rand(c, generator=g) * 0.5 + 0.75)
            m.bias.data.copy_(torch.randn(c, generator=g) * 0.1)


def randomise_zero_weights(model):
    """Weights that torchvision initialises to zeros (ViT's classifier head) would make every
    output 0, and the comparison with PyTorch vacuous."""
    g = torch.Generator().manual_seed(3)
    for p in model.parameters():
        if p.dim() >= 2 and not p.any():
            p.copy_(torch.randn(p.shape, generator=g) * 0.02)


def export(out, name):
    model, shape = build(name)
    model.eval()
    with torch.no_grad():
        randomise_batchnorm(model)
        randomise_zero_weights(model)
    x = torch.from_numpy(np.random.default_rng(2).standard_normal(shape).astype(np.float32))
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    with torch.inference_mode():
        y = model(x)
    torch.onnx.export(model, (x,), os.path.join(d, "model.onnx"), opset_version=OPSET,
                      input_names=["input"], output_names=["output"], do_constant_folding=True)
    np.save(os.path.join(d, "input_0.npy"), x.numpy())
    np.save(os.path.join(d, "output_0.npy"), y.numpy())
    print(f"{name}: {d}/model.onnx, input {tuple(shape)}, output {tuple(y.shape)}")


def time_torch(name, model_dir, threads, repeat):
    """PyTorch's median latency on the exported network's input, inference mode."""
    torch.set_num_threads(threads)
    model, _ = build(name)
    model.eval()
    with torch.no_grad():
        randomise_batchnorm(model)
    x = torch.from_numpy(np.load(os.path.join(model_dir, "input_0.npy")))
    samples = []
    with torch.inference_mode():
        for _ in range(10):
            model(x)
        for _ in range(repeat):
            t0 = time.perf_counter()
            model(x)
            samples.append(time.perf_counter() - t0)
    samples.sort()
    print(json.dumps({"name": name, "median_s": samples[len(samples) // 2], "threads":
                      torch.get_num_threads(), "torch": torch.__version__, "repeat": repeat}))


def main(argv):
    if len(argv) >= 3 and argv[0] == "--time":
        threads, repeat = os.cpu_count() or 1, 30
        rest = argv[3:]
        while rest:
            if rest[0] == "--threads" and len(rest) > 1:
                threads, rest = int(rest[1]), rest[2:]
            elif rest[0] == "--repeat" and len(rest) > 1:
                repeat, rest = int(rest[1]), rest[2:]
            else:
                raise SystemExit(f"export_torch_models.py: unexpected '{rest[0]}'")
        time_torch(argv[1], argv[2], threads, repeat)
        return
    if not argv or argv[0].startswith("-"):
        raise SystemExit(__doc__)
    for name in argv[1:] or ["resnet18", "mobilenet_v2", "mobilenet_v3_small", "bert_layer"]:
        export(argv[0], name)


if __name__ == "__main__":
    main(sys.argv[1:])
