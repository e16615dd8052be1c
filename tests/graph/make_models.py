#!/usr/bin/python3
"""Small networks for test_network, built with the onnx package (Debian's python3-onnx) and
checked against outputs computed here with numpy, in the layout of ONNX's node tests:

    OUT/<name>/model.onnx
    OUT/<name>/test_data_set_0/input_0.pb, output_0.pb

resnet_block: Conv-BatchNorm-Relu, Conv-BatchNorm, residual Add, Relu, MaxPool, a strided 1x1
  projection, GlobalAveragePool, Flatten, Gemm (the shapes of a ResNet basic block, scaled down).
mobilenet_block: an inverted residual: 1x1 Conv + Clip(0, 6), depthwise 3x3 Conv + Clip, 1x1
  Conv, residual Add, twice with the same shapes (so two calls share each task).
bert_layer: a transformer encoder layer: Q/K/V projections, Reshape/Transpose into heads,
  scaled dot-product attention with Softmax, the output projection with a residual, LayerNorm
  written out as ReduceMean/Sub/Pow/Sqrt/Div (as older exporters do), a GELU feed-forward
  (Erf), and LayerNormalization (opset 17).
layouts: every operator that may run channels last between convolutions, and tensors that must
  keep the model's order (a second output read through a Reshape).
layernorm_outputs: LayerNormalization's Mean output read before its main output's consumer.
patch_embed: ViT's patch embedding (a Conv whose kernel is its stride, Reshape to [N, C, H*W],
  Transpose to [N, H*W, C]) before a projection: the Reshape passes the Conv's channels-last
  layout on.
channels_last_permutes: ConvNeXt's block at batch 2: a patchifying Conv, permutes to NHWC and
  back around LayerNormalization and the MLP, a layer scale and the residual; the permutes are
  views (no kernels) and the residual stream stays channels last.
channel_shuffle: ShuffleNet-V2's channel shuffle at batch 2: Concat, Reshape to [N, 2, C/2, H, W],
  Transpose of the two channel dimensions, Reshape back, Split; all of it stays channels last.
winograd_convs: 3x3 convolutions computed as Winograd F(4x4, 3x3) and F(2x2, 3x3), and left
  direct.
pad_windows: zero Pads folded into the AveragePool and the Conv that read them, and a Pad of ones
  that stays.
se_block: a squeeze-and-excitation block (depthwise Conv, GlobalAveragePool, two 1x1 Convs,
  Sigmoid, the scale Mul, the projection): the scale moves onto the projection's weights; a
  second scale whose product is read twice stays on the activation.
se_batch: the same block at batch 3 (HardSigmoid, as MobileNet-V3's): the scale stays a Mul, and
  the 1x1 Convs over the pooled [3, C, 1, 1] take the batch as their rows.
atrous_pyramid: DeepLabV3's dilated 3x3 Convs, whose padding covers most taps, computed region by
  region; and those that stay whole.
reserved_attribute: a Conv carrying an attribute named as tvm-tune's own, refused at import
  (bad/reserved_attribute.onnx, no test data).
activations, class_token, more_ops, shifted_window_mask, seq_first_matmul, diamond_epilogues,
run_time_masks: the operators and
  patterns of the model zoos (issue #54).
opset18: what opset 18 changed: GroupNormalization, Mish, Pad with an axes input, Resize of some
  axes (its axes attribute) and keeping the aspect ratio (not_larger), Split into num_outputs uneven parts, and reductions whose axes are
  an input (ReduceMax, and a LayerNorm written out with ReduceMean).
opset22: what opsets 19 to 22 changed: GroupNormalization per channel, Gelu (exact and tanh),
  Pad's wrap mode, Resize's half_pixel_symmetric, AveragePool's dilations.

Usage: make_models.py OUTDIR
"""
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(17)


def rand(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


# ---- numpy references ----

def conv2d(x, w, b=None, stride=1, pad=0, group=1, dil=1):
    """pad and dil: one for both axes, or (rows, columns)."""
    n, c, h, wd = x.shape
    co, cig, kh, kw = w.shape
    (ph, pw), (dh, dw) = (p if isinstance(p, tuple) else (p, p) for p in (pad, dil))
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // stride + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, co, oh, ow), np.float64)
    cog = co // group
    for g in range(group):
        xs = xp[:, g * cig:(g + 1) * cig]
        for o in range(g * cog, (g + 1) * cog):
            for i in range(kh):
                for j in range(kw):
                    patch = xs[:, :, i * dh:i * dh + stride * oh:stride,
                               j * dw:j * dw + stride * ow:stride]
                    out[:, o] += np.einsum("nchw,c->nhw", patch, w[o, :, i, j])
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


def batchnorm(x, s, b, m, v, eps=1e-5):
    sh = (1, -1, 1, 1)
    return (x - m.reshape(sh)) / np.sqrt(v.reshape(sh) + eps) * s.reshape(sh) + b.reshape(sh)


def maxpool(x, k, stride, pad):
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=-np.inf)
    oh = (h + 2 * pad - k) // stride + 1
    ow = (w + 2 * pad - k) // stride + 1
    out = np.full((n, c, oh, ow), -np.inf)
    for i in range(k):
        for j in range(k):
            out = np.maximum(out, xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride])
    return out


def avgpool(x, k, pad):
    """stride 1, count_include_pad = 0"""
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ones = np.pad(np.ones((h, w)), pad)
    out, cnt = np.zeros((n, c, h + 2 * pad - k + 1, w + 2 * pad - k + 1)), 0
    for i in range(k):
        for j in range(k):
            out = out + xp[:, :, i:i + out.shape[2], j:j + out.shape[3]]
            cnt = cnt + ones[i:i + out.shape[2], j:j + out.shape[3]]
    return out / cnt


def avgpool_general(x, k, stride, dil, pb, pe, include, ceil_mode=False):
    """AveragePool over the last two dims as ONNX 19 defines it (dilations, ceil mode): each
    output divides the sum of its window's taps by how many lie in the input
    (count_include_pad = 0) or in the padded input (1)."""
    n, c = x.shape[:2]
    dims = x.shape[2:]
    outs = []
    for i in range(2):
        span = dims[i] + pb[i] + pe[i] - (k[i] - 1) * dil[i] - 1
        o = (-(-span // stride[i]) if ceil_mode else span // stride[i]) + 1
        if ceil_mode and (o - 1) * stride[i] >= dims[i] + pb[i]:
            o -= 1
        outs.append(o)
    out = np.zeros((n, c, outs[0], outs[1]))
    for oy in range(outs[0]):
        for ox in range(outs[1]):
            taps = []
            for i, o in enumerate((oy, ox)):
                lo, hi = (-pb[i], dims[i] + pe[i]) if include else (0, dims[i])
                taps.append([o * stride[i] - pb[i] + t * dil[i] for t in range(k[i])
                             if lo <= o * stride[i] - pb[i] + t * dil[i] < hi])
            acc = np.zeros((n, c))
            for ty in taps[0]:
                for tx in taps[1]:
                    if 0 <= ty < dims[0] and 0 <= tx < dims[1]:
                        acc += x[:, :, ty, tx]
            out[:, :, oy, ox] = acc / (len(taps[0]) * len(taps[1]))
    return out


def conv_transpose(x, w, stride):
    """no padding; w [CI, CO, K, K]"""
    n, ci, h, wd = x.shape
    _, co, k, _ = w.shape
    out = np.zeros((n, co, (h - 1) * stride + k, (wd - 1) * stride + k))
    for i in range(k):
        for j in range(k):
            out[:, :, i:i + stride * h:stride, j:j + stride * wd:stride] += np.einsum(
                "nchw,co->nohw", x, w[:, :, i, j])
    return out


def layernorm(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def gelu(x):
    return x * 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


# ---- model building ----

class Builder:
    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def const(self, arr, name=None):
        name = name or f"c{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def op(self, kind, inputs, **attrs):
        self.n += 1
        out = f"t{self.n}"
        self.nodes.append(helper.make_node(kind, inputs, [out], name=f"{kind}_{self.n}", **attrs))
        return out

    def save(self, outdir, name, x, y, opset, more=(), check=True):
        """`more`: further outputs (tensor name, expected value), after "output".  check=False
        for opsets newer than the onnx package's checker knows (Debian 12's onnx 1.12: 17)."""
        xin = helper.make_tensor_value_info("input", TensorProto.FLOAT, list(x.shape))
        self.nodes[-1].output[0] = "output"
        outs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, list(y.shape))]
        outs += [helper.make_tensor_value_info(t, TensorProto.FLOAT, list(v.shape))
                 for t, v in more]
        graph = helper.make_graph(self.nodes, name, [xin], outs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                                  producer_name="tvm-tune tests")
        if check:
            onnx.checker.check_model(model)
        d = os.path.join(outdir, name, "test_data_set_0")
        os.makedirs(d, exist_ok=True)
        onnx.save(model, os.path.join(outdir, name, "model.onnx"))
        files = [("input_0.pb", x, "input"), ("output_0.pb", y, "output")]
        files += [(f"output_{i + 1}.pb", v, t) for i, (t, v) in enumerate(more)]
        for fname, arr, tname in files:
            with open(os.path.join(d, fname), "wb") as f:
                f.write(numpy_helper.from_array(arr.astype(np.float32), tname).SerializeToString())


def resnet_block(outdir):
    b = Builder()
    x = rand(1, 8, 16, 16)
    w1, w2, wp = rand(8, 8, 3, 3, scale=0.2), rand(8, 8, 3, 3, scale=0.2), rand(16, 8, 1, 1)
    bn = [(rand(8, scale=0.5) + 1, rand(8), rand(8, scale=0.1), np.abs(rand(8)) + 0.5)
          for _ in range(2)]
    fc, fcb = rand(10, 16, scale=0.3), rand(10)
    t = b.op("Conv", ["input", b.const(w1)], pads=[1, 1, 1, 1])
    t = b.op("BatchNormalization", [t] + [b.const(a) for a in bn[0]], epsilon=1e-5)
    t = b.op("Relu", [t])
    t = b.op("Conv", [t, b.const(w2)], pads=[1, 1, 1, 1])
    t = b.op("BatchNormalization", [t] + [b.const(a) for a in bn[1]], epsilon=1e-5)
    t = b.op("Add", [t, "input"])
    t = b.op("Relu", [t])
    t = b.op("MaxPool", [t], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    t = b.op("Conv", [t, b.const(wp)], strides=[2, 2])
    t = b.op("GlobalAveragePool", [t])
    t = b.op("Flatten", [t])
    t = b.op("Gemm", [t, b.const(fc), b.const(fcb)], transB=1)
    r = np.maximum(batchnorm(conv2d(x, w1, pad=1), *bn[0]), 0)
    r = np.maximum(batchnorm(conv2d(r, w2, pad=1), *bn[1]) + x, 0)
    r = conv2d(maxpool(r, 3, 2, 1), wp, stride=2)
    r = r.mean(axis=(2, 3)) @ fc.T + fcb
    b.save(outdir, "resnet_block", x, r, 13)


def mobilenet_block(outdir):
    b = Builder()
    x = rand(1, 8, 12, 12)
    t, r = "input", x.astype(np.float64)
    for _ in range(2):
        w1, wd, w2 = rand(32, 8, 1, 1, scale=0.3), rand(32, 1, 3, 3, scale=0.3), rand(8, 32, 1, 1,
                                                                                      scale=0.2)
        b1, bd, b2 = rand(32), rand(32), rand(8)
        lo, hi = b.const(np.float32(0)), b.const(np.float32(6))
        u = b.op("Conv", [t, b.const(w1), b.const(b1)])
        u = b.op("Clip", [u, lo, hi])
        u = b.op("Conv", [u, b.const(wd), b.const(bd)], group=32, pads=[1, 1, 1, 1])
        u = b.op("Clip", [u, lo, hi])
        u = b.op("Conv", [u, b.const(w2), b.const(b2)])
        t = b.op("Add", [u, t])
        q = np.clip(conv2d(r, w1, b1), 0, 6)
        q = np.clip(conv2d(q, wd, bd, pad=1, group=32), 0, 6)
        r = conv2d(q, w2, b2) + r
    b.save(outdir, "mobilenet_block", x, r, 13)


def layouts(outdir):
    """Every operator that may run channels last, between convolutions (docs/models.md,
    Layouts): strided and depthwise Conv, MaxPool with end padding, AveragePool, Concat, Pad and
    Slice and Split along the channels, Sigmoid, Mul by a per-channel constant, an unfolded
    BatchNormalization, ConvTranspose reading channels-last data, GlobalAveragePool and Gemm;
    and the tensors that must keep the model's order: a second graph output read through a
    Reshape."""
    b = Builder()
    x = rand(1, 3, 10, 10)
    xd = x.astype(np.float64)
    w0, b0 = rand(8, 3, 3, 3, scale=0.3), rand(8)
    a = b.op("Relu", [b.op("Conv", ["input", b.const(w0), b.const(b0)], strides=[2, 2],
                             pads=[1, 1, 1, 1])])
    ra = np.maximum(conv2d(xd, w0, b0, stride=2, pad=1), 0)                   # 1x8x5x5
    p = b.op("MaxPool", [a], kernel_shape=[2, 2], pads=[0, 0, 1, 1])
    rp = maxpool(np.pad(ra, ((0, 0), (0, 0), (0, 1), (0, 1)), constant_values=-np.inf), 2, 1, 0)
    w1 = rand(4, 8, 1, 1, scale=0.3)
    c1 = b.op("Conv", [p, b.const(w1)])
    c2 = b.op("AveragePool", [p], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    cat = b.op("Concat", [c1, c2], axis=1)                                   # 1x12x5x5
    rcat = np.concatenate([conv2d(rp, w1), avgpool(rp, 3, 1)], axis=1)
    pads = np.array([0, 1, 0, 1, 0, 1, 1, 0], np.int64)
    pd = b.op("Pad", [cat, b.const(pads), b.const(np.float32(0.5))])        # 1x14x6x6
    rpd = np.pad(rcat, ((0, 0), (1, 1), (0, 1), (1, 0)), constant_values=0.5)
    sl = b.op("Slice", [pd, b.const(np.array([1], np.int64)), b.const(np.array([13], np.int64)),
                        b.const(np.array([1], np.int64))])                   # 1x12x6x6
    rsl = rpd[:, 1:13]
    b.n += 1
    s1, s2 = f"s{b.n}a", f"s{b.n}b"
    b.nodes.append(helper.make_node("Split", [sl, b.const(np.array([4, 8], np.int64))],
                                    [s1, s2], name="split", axis=1))
    g = b.op("Sigmoid", [s1])
    rg = 1 / (1 + np.exp(-rsl[:, :4]))
    k = rand(8, 1, 1)
    m = b.op("Mul", [s2, b.const(k)])
    bn = [rand(8, scale=0.1) + 1, rand(8, scale=0.1), rand(8, scale=0.1),
          np.abs(rand(8)) + 0.5]
    nb = b.op("BatchNormalization", [m] + [b.const(v) for v in bn])
    rnb = batchnorm(rsl[:, 4:] * k, *bn)
    wd = rand(8, 1, 3, 3, scale=0.3)
    dw = b.op("Conv", [nb, b.const(wd)], group=8, pads=[1, 1, 1, 1])
    sm = b.op("Add", [dw, b.op("Concat", [g, g], axis=1)])                  # 1x8x6x6
    rsm = conv2d(rnb, wd, pad=1, group=8) + np.concatenate([rg, rg], axis=1)
    wt = rand(8, 4, 2, 2, scale=0.3)
    ct = b.op("ConvTranspose", [sm, b.const(wt)], strides=[2, 2])            # 1x4x12x12
    rct = conv_transpose(rsm, wt, 2)
    w3 = rand(6, 4, 3, 3, scale=0.3)
    q = b.op("Relu", [b.op("Conv", [ct, b.const(w3)], strides=[2, 2], pads=[1, 1, 1, 1])])
    rq = np.maximum(conv2d(rct, w3, stride=2, pad=1), 0)                      # 1x6x6x6
    w4 = rand(5, 8, 1, 1, scale=0.3)
    aux = b.op("Conv", [sm, b.const(w4)])
    b.nodes.append(helper.make_node("Reshape", [aux, b.const(np.array([1, 180], np.int64))],
                                    ["aux"], name="aux_reshape"))
    raux = conv2d(rsm, w4).reshape(1, 180)
    fc = rand(3, 6, scale=0.3)
    gp = b.op("Flatten", [b.op("GlobalAveragePool", [q])])
    b.op("Gemm", [gp, b.const(fc)], transB=1)
    r = rq.mean(axis=(2, 3)) @ fc.T
    b.save(outdir, "layouts", x, r, 13, more=[("aux", raux)])


def bert_layer(outdir):
    b = Builder()
    S, D, H, F = 16, 32, 2, 64
    x = rand(1, S, D)
    wq, wk, wv, wo = (rand(D, D, scale=0.2) for _ in range(4))
    bq, bk, bv, bo = (rand(D, scale=0.1) for _ in range(4))
    g1, be1, g2, be2 = rand(D, scale=0.1) + 1, rand(D, scale=0.1), rand(D, scale=0.1) + 1, \
        rand(D, scale=0.1)
    w1, b1, w2, b2 = rand(D, F, scale=0.2), rand(F, scale=0.1), rand(F, D, scale=0.2), \
        rand(D, scale=0.1)
    heads = b.const(np.array([1, S, H, D // H], np.int64))
    flat = b.const(np.array([1, S, D], np.int64))

    def proj(t, w, bias):
        return b.op("Add", [b.op("MatMul", [t, b.const(w)]), b.const(bias)])

    q = b.op("Transpose", [b.op("Reshape", [proj("input", wq, bq), heads])], perm=[0, 2, 1, 3])
    k = b.op("Transpose", [b.op("Reshape", [proj("input", wk, bk), heads])], perm=[0, 2, 3, 1])
    v = b.op("Transpose", [b.op("Reshape", [proj("input", wv, bv), heads])], perm=[0, 2, 1, 3])
    s = b.op("Div", [b.op("MatMul", [q, k]), b.const(np.float32(math.sqrt(D // H)))])
    a = b.op("MatMul", [b.op("Softmax", [s], axis=-1), v])
    a = b.op("Reshape", [b.op("Transpose", [a], perm=[0, 2, 1, 3]), flat])
    h = b.op("Add", [proj(a, wo, bo), "input"])
    # LayerNorm written out, as exporters before opset 17 do
    mu = b.op("ReduceMean", [h], axes=[-1])
    dv = b.op("Sub", [h, mu])
    var = b.op("ReduceMean", [b.op("Pow", [dv, b.const(np.float32(2))])], axes=[-1])
    den = b.op("Sqrt", [b.op("Add", [var, b.const(np.float32(1e-5))])])
    h1 = b.op("Add", [b.op("Mul", [b.op("Div", [dv, den]), b.const(g1)]), b.const(be1)])
    f = proj(h1, w1, b1)
    f = b.op("Mul", [b.op("Mul", [f, b.op("Add", [b.op("Erf", [b.op(
        "Div", [f, b.const(np.float32(math.sqrt(2)))])]), b.const(np.float32(1))])]),
        b.const(np.float32(0.5))])
    f = b.op("Add", [proj(f, w2, b2), h1])
    b.op("LayerNormalization", [f, b.const(g2), b.const(be2)], axis=-1, epsilon=1e-5)

    def heads_of(t):
        return t.reshape(1, S, H, D // H).transpose(0, 2, 1, 3)
    xd = x.astype(np.float64)
    qq, kk, vv = (heads_of(xd @ w + bb) for w, bb in ((wq, bq), (wk, bk), (wv, bv)))
    att = softmax(qq @ kk.transpose(0, 1, 3, 2) / math.sqrt(D // H)) @ vv
    hh = att.transpose(0, 2, 1, 3).reshape(1, S, D) @ wo + bo + xd
    hh1 = layernorm(hh, g1, be1, 1e-5)
    ff = gelu(hh1 @ w1 + b1) @ w2 + b2 + hh1
    b.save(outdir, "bert_layer", x, layernorm(ff, g2, be2, 1e-5), 17)


def layernorm_outputs(outdir):
    """LayerNormalization's Mean read by a node between it and the Relu that follows it: the
    kernel writing Mean must run before that reader, so the Relu may not join it."""
    b = Builder()
    x = rand(2, 8)
    g, be = rand(8, scale=0.1) + 1, rand(8, scale=0.1)
    b.nodes.append(helper.make_node("LayerNormalization", ["input", b.const(g), b.const(be)],
                                    ["y", "mean"], name="ln", axis=-1, epsilon=1e-5))
    m2 = b.op("Mul", ["mean", b.const(np.float32(2))])
    r = b.op("Relu", ["y"])
    b.op("Add", [r, m2])
    xd = x.astype(np.float64)
    want = np.maximum(layernorm(xd, g, be, 1e-5), 0) + 2 * xd.mean(-1, keepdims=True)
    b.save(outdir, "layernorm_outputs", x, want, 17)


def activations(outdir):
    """The elementwise operators of the model zoos (issue #54), each once between convolutions,
    channels last: HardSigmoid and HardSwish (MobileNet-V3), LeakyRelu, PRelu with a slope per
    channel, Elu, Selu, Celu, ThresholdedRelu, Softplus, Softsign, Sign, Neg, Abs, Exp, Log,
    Reciprocal, Min and Max of three inputs; opset 14, where HardSwish begins."""
    b = Builder()
    x = rand(1, 4, 6, 6)
    w1, w2 = rand(8, 4, 3, 3, scale=0.3), rand(8, 8, 1, 1, scale=0.3)
    slope = rand(8, 1, 1, scale=0.3)
    lo, hi = rand(1, 8, 1, 1, scale=0.2), rand(8, 1, 1, scale=0.2) + 0.5
    xd = x.astype(np.float64)
    t = b.op("Conv", ["input", b.const(w1)], pads=[1, 1, 1, 1])
    r = conv2d(xd, w1, pad=1)
    chain = [
        ("HardSigmoid", {"alpha": 0.25, "beta": 0.4}, lambda v: np.clip(v * 0.25 + 0.4, 0, 1)),
        ("HardSwish", {}, lambda v: v * np.clip(v / 6 + 0.5, 0, 1)),
        ("LeakyRelu", {"alpha": 0.1}, lambda v: np.where(v < 0, v * 0.1, v)),
        ("Elu", {"alpha": 0.7}, lambda v: np.where(v < 0, (np.exp(v) - 1) * 0.7, v)),
        ("Selu", {}, lambda v: np.where(v > 0, v, (np.exp(v) - 1) * 1.6732632423543772)
         * 1.0507009873554805),
        ("Celu", {"alpha": 2.0}, lambda v: np.maximum(v, 0) + np.minimum((np.exp(v / 2) - 1) * 2, 0)),
        ("Softsign", {}, lambda v: v / (1 + np.abs(v))),
        ("ThresholdedRelu", {"alpha": 0.1}, lambda v: np.where(v > 0.1, v, 0)),
        ("Neg", {}, lambda v: -v),
        ("Softplus", {}, lambda v: np.log1p(np.exp(v))),
    ]
    for kind, attrs, f in chain:
        t = b.op(kind, [t], **attrs)
        r = f(r)
    t = b.op("PRelu", [b.op("Sub", [t, b.const(np.float32(0.5))]), b.const(slope)])
    r = r - 0.5
    r = np.where(r < 0, r * slope, r)
    t = b.op("Max", [b.op("Min", [t, b.const(hi), b.const(hi * 2)]), b.const(lo)])
    r = np.maximum(np.minimum(np.minimum(r, hi), hi * 2), lo)
    t = b.op("Conv", [t, b.const(w2)])
    r = conv2d(r, w2)
    s = b.op("Sign", [t])
    a = b.op("Abs", [t])
    e = b.op("Exp", [b.op("Neg", [a])])
    lg = b.op("Log", [b.op("Add", [a, b.const(np.float32(1))])])
    rc = b.op("Reciprocal", [b.op("Add", [e, b.const(np.float32(1))])])
    b.op("Add", [b.op("Mul", [s, lg]), rc])
    r = np.sign(r) * np.log(np.abs(r) + 1) + 1 / (np.exp(-np.abs(r)) + 1)
    b.save(outdir, "activations", x, r, 14)


def class_token(outdir):
    """What torch.onnx writes for ViT's `class_token.expand(n, -1, -1)`: ConstantOfShape, Mul,
    Equal and Where on the shape, folded at import, then Expand of the class token (a constant)
    and Concat with the tokens; and an Expand of a value computed at run time (a kernel)."""
    b = Builder()
    x = rand(1, 4, 8)
    cls = rand(1, 1, 8)
    ones = b.op("ConstantOfShape", [b.const(np.array([3], dtype=np.int64))],
                value=helper.make_tensor("v", TensorProto.INT64, [1], [1]))
    neg = b.op("Mul", [ones, b.const(np.array(-1, dtype=np.int64))])
    want = b.const(np.array([1, -1, -1], dtype=np.int64))
    eq = b.op("Equal", [want, neg])
    shape = b.op("Where", [eq, ones, want])
    t = b.op("Concat", [b.op("Expand", [b.const(cls), shape]), "input"], axis=1)
    t = b.op("Relu", [t])
    m = b.op("ReduceMean", [t], axes=[1], keepdims=1)
    u = b.op("Expand", [m, b.const(np.array([1, 5, 8], dtype=np.int64))])
    b.op("Add", [t, u])
    r = np.maximum(np.concatenate([cls, x], axis=1).astype(np.float64), 0)
    r = r + r.mean(axis=1, keepdims=True)
    b.save(outdir, "class_token", x, r, 13)


def more_ops(outdir):
    """Issue #54's second batch: Floor, Ceil and Mod (on inputs a quarter and a half apart, so
    float32 and float64 round alike); Range, Equal, Not, Less, And, Greater, Or and Where folded
    at import into Tile's repeats; InstanceNormalization, a Tile of a constant (folded), DepthToSpace (CRD), Tile,
    SpaceToDepth, and ReduceSum (axes an input), ReduceMax, ReduceL2 and ReduceLogSumExp of the
    same tensor; opset 13."""
    b = Builder()
    x = ((RNG.integers(-8, 8, (1, 4, 6, 6)) + 0.5) / 4).astype(np.float32)
    w1 = rand(8, 4, 3, 3, scale=0.3)
    sc, bi = rand(8) + 1.0, rand(8)
    xd = x.astype(np.float64)
    fl = b.op("Mul", [b.op("Floor", [b.op("Mul", ["input", b.const(np.float32(2))])]),
                      b.const(np.float32(0.5))])
    t = b.op("Add", [b.op("Add", [fl, b.op("Ceil", ["input"])]),
                     b.op("Mod", ["input", b.const(np.float32(0.7))], fmod=1)])
    r = np.floor(xd * 2) * 0.5 + np.ceil(xd) + np.fmod(xd, 0.7)
    t = b.op("Conv", [t, b.const(w1)], pads=[1, 1, 1, 1])
    r = conv2d(r, w1, pad=1)
    t = b.op("InstanceNormalization", [t, b.const(sc), b.const(bi)], epsilon=1e-3)
    m = r.mean(axis=(2, 3), keepdims=True)
    v = ((r - m) ** 2).mean(axis=(2, 3), keepdims=True)
    r = (r - m) / np.sqrt(v + 1e-3) * sc.reshape(1, 8, 1, 1) + bi.reshape(1, 8, 1, 1)
    shift = rand(1, 2, 1, 1)  # a Tile of a constant: a constant
    t = b.op("Add", [t, b.op("Tile", [b.const(shift), b.const(np.array([1, 4, 1, 1]))])])
    r = r + np.tile(shift, (1, 4, 1, 1))
    t = b.op("DepthToSpace", [t], blocksize=2, mode="CRD")
    r = r.reshape(1, 2, 2, 2, 6, 6).transpose(0, 1, 4, 2, 5, 3).reshape(1, 2, 12, 12)
    i64 = lambda *v: b.const(np.array(v if len(v) > 1 else v[0], dtype=np.int64))
    rng = b.op("Range", [i64(1), i64(3), i64(1)])  # [1, 2]
    keep = b.op("Or", [b.op("And", [b.op("Not", [b.op("Equal", [rng, i64(1)])]),
                                     b.op("Less", [rng, i64(5)])]),
                       b.op("Greater", [rng, i64(9)])])  # [False, True]
    last = b.op("Where", [keep, rng, i64(1, 1)])  # [1, 2]
    t = b.op("Tile", [t, b.op("Concat", [i64(1, 1), last], axis=0)])
    r = np.tile(r, (1, 1, 1, 2))
    t = b.op("Relu", [b.op("SpaceToDepth", [t], blocksize=2)])
    r = np.maximum(r.reshape(1, 2, 6, 2, 12, 2).transpose(0, 3, 5, 1, 2, 4).reshape(1, 8, 6, 12), 0)
    s = b.op("ReduceSum", [t, i64(2, 3)], keepdims=1)
    mx = b.op("ReduceMax", [t], axes=[1], keepdims=1)
    l2 = b.op("ReduceL2", [t], axes=[3], keepdims=1)
    lse = b.op("ReduceLogSumExp", [t], axes=[1], keepdims=1)
    u = b.op("Add", [b.op("Mul", [s, b.const(np.float32(0.01))]), mx])
    b.op("Add", [b.op("Add", [t, u]), b.op("Add", [l2, lse])])
    r = (r + r.sum(axis=(2, 3), keepdims=True) * 0.01 + r.max(axis=1, keepdims=True)
         + np.sqrt((r * r).sum(axis=3, keepdims=True))
         + np.log(np.exp(r).sum(axis=1, keepdims=True)))
    b.save(outdir, "more_ops", x, r, 13)


def shifted_window_mask(outdir):
    """What torch.onnx writes for Swin's shifted-window attention mask, all of it folded at
    import: a float ConstantOfShape, ScatterND of region numbers into it, Transpose and Concat
    of constants, float Sub, Equal and Cast to bool on constants, Where; then added to the
    attention scores (the input) scaled by Pow(32, -0.5) (head_dim ** -0.5), Softmax, and Dropout in training mode with a ratio of 0 (as
    torchvision 0.14 exports it)."""
    b = Builder()
    x = rand(1, 2, 4, 4)
    zeros = b.op("ConstantOfShape", [b.const(np.array([4, 1], dtype=np.int64))],
                 value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0]))
    idx = b.op("Transpose", [b.const(np.array([[2, 3]], dtype=np.int64))], perm=[1, 0])
    region = b.op("ScatterND", [zeros, idx, b.const(np.array([[1.0], [2.0]], dtype=np.float32))])
    rows = b.op("Reshape", [region, b.const(np.array([1, 4], dtype=np.int64))])
    cols = b.op("Reshape", [region, b.const(np.array([4, 1], dtype=np.int64))])
    diff = b.op("Sub", [b.op("Concat", [rows, rows, rows, rows], axis=0), cols])
    same = b.op("Cast", [b.op("Equal", [diff, b.const(np.float32(0))])], to=TensorProto.BOOL)
    mask = b.op("Where", [same, b.const(np.float32(0)), b.const(np.float32(-100))])
    scale = b.op("Pow", [b.const(np.float32(32)), b.const(np.float32(-0.5))])
    t = b.op("Softmax", [b.op("Add", [b.op("Mul", ["input", scale]), mask])], axis=-1)
    b.op("Dropout", [t, b.const(np.float32(0)), b.const(np.array(True))])
    reg = np.array([0, 0, 1, 2], dtype=np.float64)
    m = np.where(reg[None, :] - reg[:, None] == 0, 0.0, -100.0)
    r = softmax(x.astype(np.float64) * 32 ** -0.5 + m)
    b.save(outdir, "shifted_window_mask", x, r, 13)


def seq_first_matmul(outdir):
    """A sequence-first projection as torch's MultiheadAttention exports it: [6, 1, 8] x [8, 16]
    + bias; the kernel accumulates [6, 16] (the unit dimension left out)."""
    b = Builder()
    x = rand(6, 1, 8)
    w, bias = rand(8, 16), rand(16)
    b.op("Add", [b.op("MatMul", ["input", b.const(w)]), b.const(bias)])
    b.save(outdir, "seq_first_matmul", x, x.astype(np.float64) @ w + bias, 13)


def diamond_epilogues(outdir):
    """Elementwise diamonds after a convolution join its kernel: SiLU (x * sigmoid(x)) and
    torch's opset-13 HardSwish (x * HardSigmoid(x, 1/6, 1/2)); a convolution whose result another
    convolution also reads keeps its Sigmoid apart."""
    b = Builder()
    x = rand(1, 4, 6, 6)
    w1, w2, w3 = rand(8, 4, 3, 3, scale=0.3), rand(8, 8, 1, 1, scale=0.3), rand(8, 8, 1, 1, scale=0.3)
    c1 = b.op("Conv", ["input", b.const(w1)], pads=[1, 1, 1, 1])
    r1 = conv2d(x.astype(np.float64), w1, pad=1)
    s1 = b.op("Mul", [c1, b.op("Sigmoid", [c1])])
    q1 = r1 / (1 + np.exp(-r1))
    c2 = b.op("Conv", [s1, b.const(w2)])
    r2 = conv2d(q1, w2)
    h = b.op("Mul", [c2, b.op("HardSigmoid", [c2], alpha=1 / 6, beta=0.5)])
    q2 = r2 * np.clip(r2 / 6 + 0.5, 0, 1)
    c3 = b.op("Conv", [h, b.const(w3)])
    r3 = conv2d(q2, w3)
    g3 = b.op("Sigmoid", [c3])
    c4 = b.op("Conv", [c3, b.const(w3)])
    b.op("Add", [c4, g3])
    b.save(outdir, "diamond_epilogues", x, conv2d(r3, w3) + 1 / (1 + np.exp(-r3)), 13)


def run_time_masks(outdir):
    """Bool tensors computed at run time: Greater, Less, Equal, Not, And and Or of the input
    make a mask (one kernel, a bool result), a Transpose moves it (a kernel reading and writing
    bool), and Where and Cast turn it into floats; opset 13."""
    b = Builder()
    x = ((RNG.integers(-8, 8, (2, 3, 8)) + 0.5) / 4).astype(np.float32)
    g = b.op("Greater", ["input", b.const(np.float32(0.3))])
    lt = b.op("Less", ["input", b.const(np.float32(-0.6))])
    eq = b.op("Equal", ["input", b.const(np.float32(0.375))])
    c = b.op("Or", [b.op("And", [g, b.op("Not", [eq])]), lt])
    ct = b.op("Transpose", [c], perm=[0, 2, 1])
    xt = b.op("Transpose", ["input"], perm=[0, 2, 1])
    w = b.op("Where", [ct, xt, b.op("Mul", [xt, b.const(np.float32(-2))])])
    b.op("Add", [w, b.op("Cast", [ct], to=TensorProto.FLOAT)])
    m = ((x > 0.3) & ~(x == 0.375)) | (x < -0.6)
    mt, xt_ = m.transpose(0, 2, 1), x.transpose(0, 2, 1).astype(np.float64)
    b.save(outdir, "run_time_masks", x, np.where(mt, xt_, -2 * xt_) + mt, 13)


def patch_embed(outdir):
    """ViT's patch embedding at batch 2: a 4x4 Conv of stride 4, Reshape [2, 8, 16] (Flatten(2)),
    Transpose(0, 2, 1) into tokens, a bias and a projection.  The Reshape only regroups the
    spatial dimensions, so the Conv stays channels last (its output channels the vector)."""
    b = Builder()
    x = rand(2, 3, 16, 16)
    w, bias = rand(8, 3, 4, 4, scale=0.3), rand(8)
    c = b.op("Conv", ["input", b.const(w), b.const(bias)], kernel_shape=[4, 4], strides=[4, 4])
    r = b.op("Reshape", [c, b.const(np.array([2, 8, -1], np.int64))])
    t = b.op("Transpose", [r], perm=[0, 2, 1])
    tb, wp = rand(8), rand(8, 6)
    b.op("MatMul", [b.op("Add", [t, b.const(tb)]), b.const(wp)])
    tokens = conv2d(x.astype(np.float64), w, bias, stride=4).reshape(2, 8, 16).transpose(0, 2, 1)
    b.save(outdir, "patch_embed", x, (tokens + tb) @ wp, 13)


def channels_last_permutes(outdir):
    """ConvNeXt's block at batch 2 (docstring at the top), and a Transpose that moves only a
    dimension of 1 ([2, 1, 8, 16] to [2, 8, 1, 16]), a view in both layouts; opset 17."""
    b = Builder()
    x = rand(2, 3, 8, 8)
    ws, bs = rand(8, 3, 2, 2, scale=0.4), rand(8)
    g0, b0 = rand(8, scale=0.5) + 1, rand(8, scale=0.1)
    wd, bd = rand(8, 1, 3, 3, scale=0.4), rand(8)
    g1, b1 = rand(8, scale=0.5) + 1, rand(8, scale=0.1)
    w1, c1, w2, c2 = rand(8, 16, scale=0.4), rand(16), rand(16, 8, scale=0.3), rand(8)
    gamma, wp = rand(8, 1, 1), rand(8, 8, 1, 1, scale=0.4)
    c = b.op("Conv", ["input", b.const(ws), b.const(bs)], kernel_shape=[2, 2], strides=[2, 2])
    t = b.op("Transpose", [c], perm=[0, 2, 3, 1])
    t = b.op("LayerNormalization", [t, b.const(g0), b.const(b0)], axis=-1, epsilon=1e-6)
    s = b.op("Transpose", [t], perm=[0, 3, 1, 2])
    d = b.op("Conv", [s, b.const(wd), b.const(bd)], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
             group=8)
    t = b.op("Transpose", [d], perm=[0, 2, 3, 1])
    t = b.op("LayerNormalization", [t, b.const(g1), b.const(b1)], axis=-1, epsilon=1e-6)
    t = b.op("Relu", [b.op("Add", [b.op("MatMul", [t, b.const(w1)]), b.const(c1)])])
    t = b.op("Add", [b.op("MatMul", [t, b.const(w2)]), b.const(c2)])
    t = b.op("Transpose", [t], perm=[0, 3, 1, 2])
    r = b.op("Add", [b.op("Mul", [b.const(gamma), t]), s])
    p = b.op("Conv", [r, b.const(wp)], kernel_shape=[1, 1])
    p = b.op("Reshape", [p, b.const(np.array([2, 1, 8, 16], np.int64))])
    b.op("Transpose", [p], perm=[0, 2, 1, 3])
    xs = x.astype(np.float64)
    ref = conv2d(xs, ws, bs, stride=2)
    ref = layernorm(ref.transpose(0, 2, 3, 1), g0, b0, 1e-6).transpose(0, 3, 1, 2)
    h = layernorm(conv2d(ref, wd, bd, pad=1, group=8).transpose(0, 2, 3, 1), g1, b1, 1e-6)
    h = np.maximum(h @ w1 + c1, 0) @ w2 + c2
    ref = gamma * h.transpose(0, 3, 1, 2) + ref
    ref = conv2d(ref, wp).reshape(2, 1, 8, 16).transpose(0, 2, 1, 3)
    b.save(outdir, "channels_last_permutes", x, ref, 17)


def channel_shuffle(outdir):
    """ShuffleNet-V2's channel shuffle between convolutions (docstring at the top); opset 13."""
    b = Builder()
    x = rand(2, 4, 6, 6)
    w1, w2, w3 = rand(8, 4, 1, 1), rand(8, 4, 3, 3, scale=0.3), rand(8, 8, 1, 1, scale=0.4)
    a = b.op("Relu", [b.op("Conv", ["input", b.const(w1)], kernel_shape=[1, 1])])
    c = b.op("Conv", ["input", b.const(w2)], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    cat = b.op("Concat", [a, c], axis=1)
    r = b.op("Reshape", [cat, b.const(np.array([2, 2, 8, 6, 6], np.int64))])
    t = b.op("Transpose", [r], perm=[0, 2, 1, 3, 4])
    sh = b.op("Reshape", [t, b.const(np.array([2, -1, 6, 6], np.int64))])
    b.n += 1
    s1, s2 = f"t{b.n}a", f"t{b.n}b"
    b.nodes.append(helper.make_node("Split", [sh, b.const(np.array([8, 8], np.int64))], [s1, s2],
                                    name=f"Split_{b.n}", axis=1))
    b.op("Add", [b.op("Conv", [s2, b.const(w3)], kernel_shape=[1, 1]), s1])
    xs = x.astype(np.float64)
    ref = np.concatenate([np.maximum(conv2d(xs, w1), 0), conv2d(xs, w2, pad=1)], axis=1)
    ref = ref.reshape(2, 2, 8, 6, 6).transpose(0, 2, 1, 3, 4).reshape(2, 16, 6, 6)
    b.save(outdir, "channel_shuffle", x, conv2d(ref[:, 8:], w3) + ref[:, :8], 13)


def winograd_convs(outdir):
    """3x3 convolutions the Winograd rewrite takes and leaves, at batch 2: F(4x4, 3x3) padded
    18x26 with a bias and Relu (tiles past the edge: 5 x 7 per image, 70 in all) and unpadded to
    16x24 (4 x 6 tiles, 48: the fewest taken); a stride-2 one stays direct; one of an 8x12 output
    (12 tiles of 4x4, 48 of 2x2) is F(2x2, 3x3), with a residual Add."""
    b = Builder()
    x = rand(2, 6, 18, 26)
    xd = x.astype(np.float64)
    w1, b1 = rand(8, 6, 3, 3, scale=0.3), rand(8)
    w2, w3, w4 = (rand(8, 8, 3, 3, scale=0.2) for _ in range(3))
    t = b.op("Relu", [b.op("Conv", ["input", b.const(w1), b.const(b1)], pads=[1, 1, 1, 1])])
    r = np.maximum(conv2d(xd, w1, b1, pad=1), 0)
    t = b.op("Conv", [t, b.const(w2)])
    r = conv2d(r, w2)
    t = b.op("Conv", [t, b.const(w3)], strides=[2, 2], pads=[1, 1, 1, 1])
    r = conv2d(r, w3, stride=2, pad=1)
    b.op("Add", [b.op("Conv", [t, b.const(w4)], pads=[1, 1, 1, 1]), t])
    b.save(outdir, "winograd_convs", x, conv2d(r, w4, pad=1) + r, 13)


def pad_windows(outdir):
    """Explicit zero Pads before an AveragePool (torch's avg_pool2d counting the padding, as
    Inception-V3 exports it) and before a padded Conv, which fold into the windows' pads; a Pad of
    ones before another AveragePool, which stays a Pad."""
    b = Builder()
    x = rand(1, 4, 9, 9)
    w = rand(6, 4, 3, 3, scale=0.3)
    t = b.op("Pad", ["input", b.const(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))])
    t = b.op("AveragePool", [t], kernel_shape=[3, 3])
    r = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    r = sum(r[:, :, i:i + 9, j:j + 9] for i in range(3) for j in range(3)) / 9
    t = b.op("Pad", [t, b.const(np.array([0, 0, 2, 0, 0, 0, 1, 1], np.int64))])
    t = b.op("Conv", [t, b.const(w)], pads=[1, 1, 0, 0])
    r = conv2d(np.pad(r, ((0, 0), (0, 0), (3, 1), (1, 1))), w)
    t = b.op("Pad", [t, b.const(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)),
                     b.const(np.array(1.0, np.float32))])
    b.op("AveragePool", [t], kernel_shape=[3, 3])
    h, wd = r.shape[2], r.shape[3]
    r = np.pad(r, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=1.0)
    r = sum(r[:, :, i:i + h, j:j + wd] for i in range(3) for j in range(3)) / 9
    b.save(outdir, "pad_windows", x, r, 13)


def depthwise_pooled(b, x):
    """A squeeze-and-excitation block's start: a depthwise 3x3 Conv of the input and its
    GlobalAveragePool; their names and float64 values."""
    wd = rand(x.shape[1], 1, 3, 3, scale=0.3)
    d = b.op("Conv", ["input", b.const(wd)], group=x.shape[1], pads=[1, 1, 1, 1])
    rd = conv2d(x.astype(np.float64), wd, pad=1, group=x.shape[1])
    return d, rd, b.op("GlobalAveragePool", [d]), rd.mean(axis=(2, 3), keepdims=True)


def se_block(outdir):
    """EfficientNet's squeeze-and-excitation at small size: x * s with s = sigmoid(conv(relu(
    conv(mean(x))))) of shape [1, 8, 1, 1] before a 1x1 projection of 6 channels, whose weights
    (48) are smaller than x (1152): conv(x * s, W) is computed as conv(x, W * s).  A second
    scale, whose product a residual Add also reads, stays a Mul of the activation."""
    b = Builder()
    x = rand(1, 8, 12, 12)
    d, rd, p, rp = depthwise_pooled(b, x)
    w1, b1, w2, b2 = rand(4, 8, 1, 1), rand(4), rand(8, 4, 1, 1), rand(8)
    e = b.op("Relu", [b.op("Conv", [p, b.const(w1), b.const(b1)])])
    sc = b.op("Sigmoid", [b.op("Conv", [e, b.const(w2), b.const(b2)])])
    rs = 1 / (1 + np.exp(-conv2d(np.maximum(conv2d(rp, w1, b1), 0), w2, b2)))
    wp, bp = rand(6, 8, 1, 1, scale=0.3), rand(6)
    y = b.op("Conv", [b.op("Mul", [d, sc]), b.const(wp), b.const(bp)])
    ry = conv2d(rd * rs, wp, bp)
    # the second scale: its product is read by the projection and by a residual
    m2 = b.op("Mul", [sc, d])
    wq = rand(8, 8, 1, 1, scale=0.3)
    z = b.op("Add", [b.op("Conv", [m2, b.const(wq)]), m2])
    rz = conv2d(rd * rs, wq) + rd * rs
    b.op("Concat", [y, z], axis=1)
    b.save(outdir, "se_block", x, np.concatenate([ry, rz], axis=1), 13)


def se_batch(outdir):
    """MobileNet-V3's squeeze-and-excitation at batch 3: the scale [3, 8, 1, 1] differs per image,
    so it stays a Mul of the activation, and the two 1x1 Convs over the pooled [3, C, 1, 1] take
    the batch as their rows ([1, 1, 3, C] channels last, the same memory).  A third 1x1 Conv of
    the pooled values is a graph output in the model's order, which keeps its own form."""
    b = Builder()
    x = rand(3, 8, 6, 6)
    d, rd, p, rp = depthwise_pooled(b, x)
    w1, b1, w2, b2 = rand(4, 8, 1, 1), rand(4), rand(8, 4, 1, 1), rand(8)
    w3 = rand(5, 8, 1, 1)
    pooled = b.op("Conv", [p, b.const(w3)])
    e = b.op("Relu", [b.op("Conv", [p, b.const(w1), b.const(b1)])])
    sc = b.op("HardSigmoid", [b.op("Conv", [e, b.const(w2), b.const(b2)])])
    rs = np.clip(conv2d(np.maximum(conv2d(rp, w1, b1), 0), w2, b2) * 0.2 + 0.5, 0, 1)
    wp, bp = rand(6, 8, 1, 1, scale=0.3), rand(6)
    b.op("Conv", [b.op("Mul", [d, sc]), b.const(wp), b.const(bp)])
    ry = conv2d(rd * rs, wp, bp)
    b.save(outdir, "se_batch", x, ry, 13, more=[(pooled, conv2d(rp, w3))])


def atrous_pyramid(outdir):
    """DeepLabV3's atrous pyramid, scaled down, at batch 2 over 10x9: 3x3 Convs dilated so far that
    padding covers most taps, computed region by region (conv_regions.c).  Dilation 3 and 6 (with
    a bias and Relu, and in 2 groups of 8 channels) split into 9 regions each, dilation 12 keeps
    the centre tap alone (a 1x1 Conv), a strided one dilated by 4 splits too; dilation 1 and a
    depthwise one stay whole; and a 1-D Conv (rank 3, through a Reshape) dilated by 40 over 90."""
    b = Builder()
    x = rand(2, 16, 10, 9)
    xd = x.astype(np.float64)
    outs, refs = [], []

    def branch(d, stride=1, group=1, bias=False, relu=False, co=8):
        w = rand(co, 16 // group, 3, 3, scale=0.2)
        bb = rand(co) if bias else None
        ins = ["input", b.const(w)] + ([b.const(bb)] if bias else [])
        t = b.op("Conv", ins, pads=[d, d, d, d], dilations=[d, d], strides=[stride, stride],
                 group=group)
        r = conv2d(xd, w, bb, stride=stride, pad=d, group=group, dil=d)
        if relu:
            t, r = b.op("Relu", [t]), np.maximum(r, 0)
        return t, r

    for args in ((3, 1, 1, False, False), (6, 1, 1, True, True), (6, 1, 2, False, False),
                 (12, 1, 1, True, False), (1, 1, 1, False, False)):
        t, r = branch(*args)
        outs.append(t), refs.append(r)
    t, r = branch(1, group=16, co=16)  # depthwise: stays whole
    outs.append(t), refs.append(r)
    strided, rstrided = branch(4, stride=2)
    wl = rand(8, 16, 3, scale=0.2)
    flat = b.op("Reshape", ["input", b.const(np.array([2, 16, 90], np.int64))])
    line = b.op("Conv", [flat, b.const(wl)], pads=[40, 40], dilations=[40])
    rline = conv2d(xd.reshape(2, 16, 1, 90), wl.reshape(8, 16, 1, 3), pad=(0, 40), dil=(1, 40))
    b.op("Concat", outs, axis=1)
    b.save(outdir, "atrous_pyramid", x, np.concatenate(refs, axis=1), 13,
           more=[(strided, rstrided), (line, rline.reshape(2, 8, 90))])


def reserved_attribute(outdir):
    """A Conv with an attribute whose name is tvm-tune's own (tvm_tune.first_tap, which region
    convolutions carry), refused at import: OUTDIR/bad/reserved_attribute.onnx, unchecked (the
    checker refuses it too), beside the model directories that the checks run."""
    w = numpy_helper.from_array(rand(4, 4, 3, 3), "w")
    conv = helper.make_node("Conv", ["input", "w"], ["output"], name="Conv_1", pads=[1, 1, 1, 1],
                            **{"tvm_tune.first_tap": [1, 1]})
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4, 6, 6])
          for n in ("input", "output")]
    graph = helper.make_graph([conv], "reserved_attribute", io[:1], io[1:], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    os.makedirs(os.path.join(outdir, "bad"), exist_ok=True)
    onnx.save(model, os.path.join(outdir, "bad", "reserved_attribute.onnx"))


def opset18(outdir):
    """Opset 18's changes (see the docstring at the top); onnx 1.12's checker knows opset 17
    only, so the model is saved unchecked."""
    b = Builder()
    x = rand(1, 4, 6, 6)
    w1 = rand(8, 4, 3, 3, scale=0.3)
    sc, bi = rand(2, scale=0.1) + 1.0, rand(2, scale=0.1)
    g, be = rand(2, scale=0.1) + 1.0, rand(2, scale=0.1)
    i64 = lambda *v: b.const(np.array(v, dtype=np.int64))
    t = b.op("Conv", ["input", b.const(w1)], pads=[1, 1, 1, 1])
    r = conv2d(x.astype(np.float64), w1, pad=1)
    t = b.op("GroupNormalization", [t, b.const(sc), b.const(bi)], num_groups=2, epsilon=1e-3)
    rg = r.reshape(1, 2, -1)
    rg = (rg - rg.mean(-1, keepdims=True)) / np.sqrt(rg.var(-1, keepdims=True) + 1e-3)
    r = rg.reshape(r.shape) * np.repeat(sc, 4).reshape(1, 8, 1, 1) \
        + np.repeat(bi, 4).reshape(1, 8, 1, 1)
    t = b.op("Mish", [t])
    r = r * np.tanh(np.log1p(np.exp(r)))
    t = b.op("Pad", [t, i64(1, 3), b.const(np.float32(0.25)), i64(-1)])  # 1x8x6x10
    r = np.pad(r, ((0, 0), (0, 0), (0, 0), (1, 3)), constant_values=0.25)
    t = b.op("Resize", [t, "", "", i64(12)], axes=[2], mode="nearest")  # 1x8x12x10
    r = np.repeat(r, 2, axis=2)
    b.n += 1
    parts = [f"s{b.n}{k}" for k in "abc"]
    b.nodes.append(helper.make_node("Split", [t], parts, name="split", axis=3, num_outputs=3))
    ra, rb, rc = r[..., :4], r[..., 4:8], r[..., 8:]  # ceil(10 / 3) = 4: 4, 4 and 2
    mx = b.op("ReduceMax", [parts[2], i64(3)], keepdims=1)
    t = b.op("Add", [b.op("Mul", [parts[0], parts[1]]), mx])
    r = ra * rb + rc.max(axis=3, keepdims=True)
    # not_larger: one scale, min(6 / 12, 3 / 4), for both axes: 6x2, read at 2y (half_pixel)
    t = b.op("Resize", [t, "", "", i64(6, 3)], axes=[2, 3], mode="nearest",
             keep_aspect_ratio_policy="not_larger")
    r = r[:, :, ::2, ::2]
    mu = b.op("ReduceMean", [t, i64(-1)])
    dv = b.op("Sub", [t, mu])
    var = b.op("ReduceMean", [b.op("Pow", [dv, b.const(np.float32(2))]), i64(-1)])
    den = b.op("Sqrt", [b.op("Add", [var, b.const(np.float32(1e-5))])])
    b.op("Add", [b.op("Mul", [b.op("Div", [dv, den]), b.const(g)]), b.const(be)])
    b.save(outdir, "opset18", x, layernorm(r, g, be, 1e-5), 18, check=False)


def resize_nearest_symmetric(x, axis, scale):
    """Resize's nearest (round_prefer_floor) along `axis` with half_pixel_symmetric, by ONNX's
    formula: centred when the output is shorter than in x scale."""
    n = x.shape[axis]
    length = n * scale
    out = int(math.floor(length))
    src = []
    for o in range(out):
        v = n / 2 * (1 - out / length) + (o + 0.5) / scale - 0.5
        i = math.floor(v) if v - math.floor(v) <= 0.5 else math.ceil(v)
        src.append(min(max(i, 0), n - 1))
    return np.take(x, src, axis=axis)


def opset22(outdir):
    """Opsets 19 to 22: GroupNormalization's scale and bias per channel (21), Gelu exact and
    tanh (20), Pad's wrap mode (19), Resize's half_pixel_symmetric (19) where the output is
    shorter than in x scale, and AveragePool's dilations (19); opset 22 changed only types.
    Saved unchecked (onnx 1.12)."""
    b = Builder()
    x = rand(1, 4, 6, 6)
    w1 = rand(8, 4, 3, 3, scale=0.3)
    sc, bi = rand(8, scale=0.1) + 1.0, rand(8, scale=0.1)
    t = b.op("Conv", ["input", b.const(w1)], pads=[1, 1, 1, 1])
    r = conv2d(x.astype(np.float64), w1, pad=1)
    t = b.op("GroupNormalization", [t, b.const(sc), b.const(bi)], num_groups=2)
    rg = r.reshape(1, 2, -1)
    rg = (rg - rg.mean(-1, keepdims=True)) / np.sqrt(rg.var(-1, keepdims=True) + 1e-5)
    r = rg.reshape(r.shape) * sc.reshape(1, 8, 1, 1) + bi.reshape(1, 8, 1, 1)
    t = b.op("Gelu", [t], approximate="tanh")
    r = 0.5 * r * (1 + np.tanh(math.sqrt(2 / math.pi) * (r + 0.044715 * r ** 3)))
    t = b.op("Pad", [t, b.const(np.array([0, 0, 0, 3, 0, 0, 0, 1], np.int64))], mode="wrap")
    r = np.pad(r, ((0, 0), (0, 0), (0, 0), (3, 1)), mode="wrap")  # 1x8x6x10
    t = b.op("Resize", [t, "", b.const(np.array([0.65], np.float32))], axes=[3],
             coordinate_transformation_mode="half_pixel_symmetric")  # 10 x 0.65: 6 of 6.5
    r = resize_nearest_symmetric(r, 3, float(np.float32(0.65)))
    t = b.op("Gelu", [t])
    r = gelu(r)  # 1x8x6x6
    # AveragePool's dilations (19): taps counted inside the input, then inside the padded
    # input with ceil mode's last window reaching past it; one axis dilated, the other not
    t = b.op("AveragePool", [t], kernel_shape=[3, 2], dilations=[2, 3], pads=[2, 1, 2, 2])
    r = avgpool_general(r, (3, 2), (1, 1), (2, 3), (2, 1), (2, 2), False)  # 1x8x6x6
    b.op("AveragePool", [t], kernel_shape=[2, 3], dilations=[1, 2], strides=[2, 2],
         pads=[0, 1, 1, 1], ceil_mode=1, count_include_pad=1)
    r = avgpool_general(r, (2, 3), (2, 2), (1, 2), (0, 1), (1, 1), True, True)  # 1x8x4x3
    b.save(outdir, "opset22", x, r, 22, check=False)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for make in (resnet_block, mobilenet_block, layouts, bert_layer, layernorm_outputs,
                 activations, class_token, more_ops, shifted_window_mask, seq_first_matmul,
                 diamond_epilogues, run_time_masks, patch_embed, se_block, winograd_convs, opset18,
                 opset22, channels_last_permutes, channel_shuffle, pad_windows, se_batch,
                 atrous_pyramid, reserved_attribute):
        make(sys.argv[1])
