#!/usr/bin/python3
"""Builds every model directory of make_models.py (model.onnx, test_data_set_*) with tvm-compile
--model and the given target, runs each data set through tvm-net and compares every output with
the expected one (max |ours - expected| / max |expected| <= 1e-3).  Prints one line per data set.

usage: check_net_models.py BIN_DIR MODELS_DIR WORK_DIR [tvm-compile options...]
"""
import glob
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def tensor(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t


def main():
    bin_dir, models, work = sys.argv[1:4]
    extra = sys.argv[4:]
    fails = 0
    for d in sorted(glob.glob(os.path.join(models, "*", "model.onnx"))):
        d = os.path.dirname(d)
        name = os.path.basename(d)
        lib = os.path.join(work, name)
        r = subprocess.run([f"{bin_dir}/tvm-compile", "--model", f"{d}/model.onnx", "-o", lib,
                            "--quiet"] + extra, capture_output=True, text=True)
        if r.returncode:
            print(f"{name}: tvm-compile failed: {r.stderr.strip()[-400:]}")
            fails += 1
            continue
        outputs = [o.name for o in onnx.load(f"{d}/model.onnx").graph.output]
        for sd in sorted(glob.glob(f"{d}/test_data_set_*")):
            args = []
            for f in sorted(glob.glob(f"{sd}/input_*.pb")):
                t = tensor(f)
                p = f"{work}/{name}_{os.path.basename(f)}.npy"
                np.save(p, numpy_helper.to_array(t))
                args += ["-i", f"{t.name}={p}" if t.name else p]
            outs = []
            for i, o in enumerate(outputs):
                outs.append(f"{work}/{name}_out{i}.npy")
                args += ["-o", f"{o}={outs[-1]}"]
            r = subprocess.run([f"{bin_dir}/tvm-net", "run", f"{lib}.so"] + args,
                               capture_output=True, text=True)
            if r.returncode:
                print(f"{name}: tvm-net run failed: {r.stderr.strip()[-400:]}")
                fails += 1
                continue
            worst = 0.0
            for i, p in enumerate(outs):
                want = numpy_helper.to_array(tensor(f"{sd}/output_{i}.pb"))
                got = np.load(p)
                if want.shape != got.shape:
                    print(f"{name}: output {i} has shape {got.shape}, expected {want.shape}")
                    fails += 1
                    continue
                scale = max(float(np.abs(want).max()), 1e-30)
                worst = max(worst, float(np.abs(got.astype(np.float64) - want).max()) / scale)
            print(f"{name}/{os.path.basename(sd)}: {len(outs)} output(s), max relative error "
                  f"{worst:.2e}")
            fails += worst > 1e-3
    sys.exit(f"check_net_models: {fails} failed" if fails else 0)


if __name__ == "__main__":
    main()
