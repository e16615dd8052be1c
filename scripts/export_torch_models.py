#!/usr/bin/python3
"""Networks from PyTorch (Debian's python3-torch and python3-torchvision) exported to ONNX, with
PyTorch's own output as the reference, for tests/deploy (end to end against PyTorch) and
bench/bench_model (speed against PyTorch):

    OUT/<name>/model.onnx
    OUT/<name>/input_0.npy      the input (float32, fixed seed; input_1.npy the second, if any)
    OUT/<name>/output_0.npy     PyTorch's output for it (inference mode)

NAME          any classification model of torchvision (resnet18, mobilenet_v2, swin_t, ...;
              3x224x224, inception_v3 3x299x299) or segmentation model (fcn_resnet50,
              deeplabv3_mobilenet_v3_large, lraspp_mobilenet_v3_large: its "out")
bert_layer    a BERT-base encoder layer (hidden 768, 12 heads, feed-forward 3072, GELU,
              post-LayerNorm as Hugging Face's BertLayer), sequence 128
transformer_encoder
              torch's nn.TransformerEncoderLayer (hidden 256, 4 heads, feed-forward 512,
              batch first), sequence 64, given a key padding mask: a second input
              (input_1.npy, bool [batch, 64], True where a sequence is padding; each batch
              element a different length), compared and expanded at run time
NAME.oOPSET.bBATCH
              exported at that opset (default 13) and batch (default 1), into OUT/NAME.o17.b8

Weights are random (torchvision's initialisation, nothing is downloaded). BatchNormalization
statistics and affine parameters are randomised too, so folding them into the convolutions is
tested with values that matter.

Usage: export_torch_models.py OUT [NAME ...]      (default: resnet18, mobilenet_v2,
                                                   mobilenet_v3_small, bert_layer,
                                                   transformer_encoder, swin_t,
                                                   lraspp_mobilenet_v3_large.o17,
                                                   mobilenet_v3_small.o17.b8, resnet18.b8,
                                                   bert_layer.b8)
       export_torch_models.py --time NAME MODEL_DIR [--threads N] [--repeat N] [--device cuda]
           times PyTorch on MODEL_DIR's input: prints one JSON line (bench/bench_model; on a GPU,
           bench/gpu_check.sh: each call timed with CUDA events)
"""
import json
import math
import os
import sys
import time

import numpy as np
import torch

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


class PaddedEncoder(torch.nn.Module):
    """torch's own encoder layer given a key padding mask (True = padding): the exporter writes
    the mask's Reshape, Expand, Cast and Where, computed at run time from the bool input."""

    def __init__(self, hidden=256, heads=4, ffn=512):
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(hidden, heads, ffn, batch_first=True)

    def forward(self, x, mask):
        return self.layer(x, src_key_padding_mask=mask)


def padding_mask(batch, seq):
    """Batch element b is padding from position seq - 3 - 5b on (at least one real position)."""
    mask = torch.zeros(batch, seq, dtype=torch.bool)
    for b in range(batch):
        mask[b, max(1, seq - 3 - 5 * b):] = True
    return mask


class SegmentationOut(torch.nn.Module):
    """torchvision's segmentation models return a dict; the network's output is its "out"."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def parse(spec):
    """NAME[.oOPSET][.bBATCH] (mobilenet_v3_small.o17.b8): the network, opset and batch."""
    name, opset, batch = spec.split(".")[0], OPSET, 1
    for part in spec.split(".")[1:]:
        if part[:1] == "o" and part[1:].isdigit():
            opset = int(part[1:])
        elif part[:1] == "b" and part[1:].isdigit():
            batch = int(part[1:])
        else:
            raise SystemExit(f"export_torch_models.py: '{spec}': '{part}' is neither .oOPSET "
                             "nor .bBATCH")
    return name, opset, batch


def build(spec):
    """The network of `spec` and its input shape: ours (bert_layer), any classification model of
    torchvision (resnet18, swin_t, ...) or any segmentation model (fcn_resnet50, ...), built
    without pretrained weights (nothing is downloaded)."""
    name, _, batch = parse(spec)
    torch.manual_seed(0)
    if name == "bert_layer":
        return BertLayer(), (batch, 128, 768)
    if name == "transformer_encoder":
        return PaddedEncoder(), (batch, 64, 256)
    import torchvision  # not needed for bert_layer (a GPU machine may have PyTorch only)
    seg = torchvision.models.segmentation
    if name in seg.__dict__ and callable(seg.__dict__[name]) and not name[0].isupper():
        model = seg.__dict__[name](weights=None, weights_backbone=None)
        return SegmentationOut(model), (batch, 3, 224, 224)
    builder = torchvision.models.__dict__.get(name)
    if name.startswith("_") or name[0].isupper() or not callable(builder):
        raise SystemExit(f"export_torch_models.py: unknown network '{name}' (bert_layer, or a "
                         "model of torchvision.models or torchvision.models.segmentation)")
    size = 299 if name == "inception_v3" else 224
    kwargs = {"aux_logits": False, "init_weights": True} if name in ("googlenet",
                                                                     "inception_v3") else {}
    return builder(weights=None, **kwargs), (batch, 3, size, size)


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


def register_missing_symbolics(opset):
    """Swin-V2 zeroes the key's part of its QKV bias in place (`qkv_bias[C:2C].zero_()`), which
    torch 1.13's exporter has no symbolic for (aten::zero): zero(x) is written x * 0, which
    constant folding folds into the bias.  Registered only where the exporter lacks it."""
    try:
        from torch.onnx import symbolic_opset9 as s9
        if hasattr(s9, "zero"):
            return
        torch.onnx.register_custom_op_symbolic(
            "aten::zero", lambda g, x: g.op("Mul", x, g.op("Constant", value_t=torch.tensor(0.0))),
            opset)
    except (ImportError, AttributeError, RuntimeError):
        pass


def export(out, name):
    _, opset, _ = parse(name)
    register_missing_symbolics(opset)
    model, shape = build(name)
    model.eval()
    with torch.no_grad():
        randomise_batchnorm(model)
        randomise_zero_weights(model)
    x = torch.from_numpy(np.random.default_rng(2).standard_normal(shape).astype(np.float32))
    inputs = (x, padding_mask(shape[0], shape[1])) if isinstance(model, PaddedEncoder) else (x,)
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    with torch.inference_mode():
        y = model(*inputs)
    kwargs = dict(opset_version=opset, input_names=["input", "mask"][:len(inputs)],
                  output_names=["output"], do_constant_folding=True)
    try:  # torch 2.9 and later export through dynamo by default; ours is torch 1.13's exporter
        torch.onnx.export(model, inputs, os.path.join(d, "model.onnx"), dynamo=False, **kwargs)
    except TypeError:  # torch before 2.5 has no `dynamo`
        torch.onnx.export(model, inputs, os.path.join(d, "model.onnx"), **kwargs)
    for k, t in enumerate(inputs):
        np.save(os.path.join(d, f"input_{k}.npy"), t.numpy())
    np.save(os.path.join(d, "output_0.npy"), y.numpy())
    print(f"{name}: {d}/model.onnx, input {tuple(shape)}, output {tuple(y.shape)}")


def time_torch(name, model_dir, threads, repeat, device="cpu"):
    """PyTorch's median latency on the exported network's input, inference mode, eager.  On
    CUDA each call is timed by CUDA events (TF32 off, cuDNN's autotuner on), the input and output
    staying on the device."""
    torch.set_num_threads(threads)
    model, _ = build(name)
    model.eval()
    with torch.no_grad():
        randomise_batchnorm(model)
    inputs = [torch.from_numpy(np.load(os.path.join(model_dir, f"input_{k}.npy")))
              for k in range(8) if os.path.exists(os.path.join(model_dir, f"input_{k}.npy"))]
    cuda = device == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
        model, inputs = model.cuda(), [t.cuda() for t in inputs]
    samples = []
    with torch.inference_mode():
        for _ in range(10):
            model(*inputs)
        for _ in range(repeat):
            if cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                    enable_timing=True)
                start.record()
                model(*inputs)
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end) * 1e-3)
            else:
                t0 = time.perf_counter()
                model(*inputs)
                samples.append(time.perf_counter() - t0)
    samples.sort()
    print(json.dumps({"name": name, "median_s": samples[len(samples) // 2], "min_s": samples[0],
                      "threads": torch.get_num_threads(), "torch": torch.__version__,
                      "repeat": repeat, "device": torch.cuda.get_device_name() if cuda
                      else "cpu"}))


def main(argv):
    if len(argv) >= 3 and argv[0] == "--time":
        threads, repeat, device = os.cpu_count() or 1, 30, "cpu"
        rest = argv[3:]
        while rest:
            if rest[0] == "--threads" and len(rest) > 1:
                threads, rest = int(rest[1]), rest[2:]
            elif rest[0] == "--device" and len(rest) > 1 and rest[1] in ("cpu", "cuda"):
                device, rest = rest[1], rest[2:]
            elif rest[0] == "--repeat" and len(rest) > 1:
                repeat, rest = int(rest[1]), rest[2:]
            else:
                raise SystemExit(f"export_torch_models.py: unexpected '{rest[0]}'")
        time_torch(argv[1], argv[2], threads, repeat, device)
        return
    if not argv or argv[0].startswith("-"):
        raise SystemExit(__doc__)
    for name in argv[1:] or ["resnet18", "mobilenet_v2", "mobilenet_v3_small", "bert_layer",
                             "transformer_encoder", "transformer_encoder.o17.b2", "swin_t",
                             "lraspp_mobilenet_v3_large.o17", "mobilenet_v3_small.o17.b8",
                             "resnet18.b8", "bert_layer.b8"]:
        export(argv[0], name)


if __name__ == "__main__":
    main(sys.argv[1:])
