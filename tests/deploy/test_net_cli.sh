#!/usr/bin/env bash
# Networks as libraries (issue #17): tvm-compile --model builds the ResNet block of make_models.py;
# its header compiles warning-free as C99 and C++11; an application links the archive through
# pkg-config and through an installed CMake package (tvm_tune_add_network) and gets what numpy
# computed (NAME_run_profiled too); tvm-net info/run/time/profile read and write .npy, and
# compare times two builds alternately; bad input
# (a wrong shape, a file that is not .npy, a name that is no C identifier, --strict without records, a truncated model) is
# refused with the reason and leaves nothing behind.
# usage: test_net_cli.sh BUILD_DIR SOURCE_DIR MODELS_DIR
set -euo pipefail
build=$1
src=$2
models=$3
bin=$build/bin
py=/usr/bin/python3
work=$(mktemp -d /tmp/tt-netcli-XXXXXX)
trap 'rm -rf "$work"' EXIT
model=$models/resnet_block/model.onnx
data=$models/resnet_block/test_data_set_0

expect_fail() { # STATUS PATTERN COMMAND...: exits with STATUS, says PATTERN on stderr
  local want=$1 pattern=$2 rc=0
  shift 2
  "$@" > "$work/out.log" 2> "$work/err.log" || rc=$?
  if [ "$rc" != "$want" ] || ! grep -q -- "$pattern" "$work/err.log"; then
    echo "FAIL: $* exited $rc (wanted $want), stderr:" >&2
    cat "$work/err.log" >&2
    exit 1
  fi
}

echo "== build"
# rb's 8 channels are fewer than 3 vectors of any x86 target, so its 3x3 convolutions would stay
# direct by default: --winograd on takes them (the library has both forms to check)
"$bin/tvm-compile" --model "$model" --winograd on -o "$work/lib/rb" > "$work/build.log" \
  2> "$work/build.err"
grep -q "wrote $work/lib/rb.a" "$work/build.log"
grep -q "every task of .* gets the default schedule" "$work/build.err"
for f in rb.a rb.so rb.h rb.pc; do test -s "$work/lib/$f"; done
# nothing else is left in the output directory (the work directory is gone)
[ "$(ls -A "$work/lib" | wc -l)" = 4 ]
grep -q "int rb_run(const float \*input, float \*output);" "$work/lib/rb.h"
grep -q "#define RB_INPUT0_SHAPE {1, 8, 16, 16}" "$work/lib/rb.h"
grep -q "DEFAULT schedule" "$work/lib/rb.h"

echo "== the header compiles warning-free as C99 and C++11"
printf '#include "rb.h"\nint main(void) { return RB_NUM_INPUTS - 1; }\n' > "$work/h.c"
cc -std=c99 -Wall -Wextra -pedantic -Werror -fsyntax-only -I"$work/lib" "$work/h.c"
cp "$work/h.c" "$work/h.cc"
c++ -std=c++11 -Wall -Wextra -pedantic -Werror -fsyntax-only -I"$work/lib" "$work/h.cc"

echo "== the test data as .npy"
"$py" - "$data" "$work" <<'PY'
import sys, numpy as np, onnx
from onnx import numpy_helper
d, w = sys.argv[1], sys.argv[2]
for n in ("input_0", "output_0"):
    t = onnx.TensorProto()
    t.ParseFromString(open(f"{d}/{n}.pb", "rb").read())
    np.save(f"{w}/{n}.npy", numpy_helper.to_array(t))
np.save(f"{w}/wrong_shape.npy", np.zeros((1, 8, 16, 15), np.float32))
np.save(f"{w}/wrong_type.npy", np.zeros((1, 8, 16, 16), np.float64))
PY

echo "== an application through pkg-config"
cat > "$work/app.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rb.h"
static int seen[64], nseen;
static void hook(void *ctx, int call)
{
    if (nseen < 64)
        seen[nseen++] = call;
    (void)ctx;
}
int main(int argc, char **argv)
{
    static float in[RB_INPUT0_ELEMENTS], out[RB_OUTPUT0_ELEMENTS], again[RB_OUTPUT0_ELEMENTS];
    FILE *f = fopen(argv[1], "rb");
    /* the .npy written by numpy: a 128-byte header, then the floats */
    if (!f || fseek(f, 128, SEEK_SET) || fread(in, sizeof(float), RB_INPUT0_ELEMENTS, f) !=
                                            RB_INPUT0_ELEMENTS)
        return 3;
    fclose(f);
    if (rb_run(in, out))
        return 4;
    void *ws = aligned_alloc(64, RB_WORKSPACE_BYTES);
    if (rb_run_workspace(ws, in, again) || memcmp(out, again, sizeof(out)))
        return 5;
    if (rb_run(NULL, out) != -1)
        return 6;
    /* the profiled run: the same outputs, the hook before every call and after the last */
    const void *ins[1] = {in};
    void *outs[1] = {again};
    if (rb_run_profiled(NULL, ins, outs, hook, NULL) || memcmp(out, again, sizeof(out)) ||
        nseen < 2)
        return 7;
    for (int k = 0; k < nseen; k++)
        if (seen[k] != k)
            return 8;
    f = fopen(argv[2], "wb");
    fwrite(out, sizeof(float), RB_OUTPUT0_ELEMENTS, f);
    fclose(f);
    free(ws);
    (void)argc;
    puts(strstr(rb_info(), "\"tasks\"") ? "OK" : "no info");
    return 0;
}
C
cc -O2 -o "$work/app" "$work/app.c" $(PKG_CONFIG_PATH="$work/lib" pkg-config --cflags --libs rb)
"$work/app" "$work/input_0.npy" "$work/app_out.bin" | grep -q '^OK$'
"$py" -c "
import numpy as np, sys
got = np.fromfile('$work/app_out.bin', np.float32).reshape(1, 10)
want = np.load('$work/output_0.npy')
err = np.abs(got - want).max() / np.abs(want).max()
sys.exit(0 if err < 1e-4 else f'app: relative error {err}')"

echo "== tvm-net"
"$bin/tvm-net" info "$work/lib/rb.so" > "$work/info.log"
grep -q "input  input .*float32\[1, 8, 16, 16\]" "$work/info.log"
grep -q "ConvWinograd+Add+Relu" "$work/info.log"
"$bin/tvm-net" info "$work/lib/rb.so" --json | "$py" -c "
import json, sys
i = json.load(sys.stdin)
assert i['name'] == 'rb' and len(i['tasks']) == 6 and i['estimate_s'] is None, i"
(cd "$work" && "$bin/tvm-net" run lib/rb.so -i input=input_0.npy) | grep -q "output.npy"
"$bin/tvm-net" run "$work/lib/rb.so" -i "$work/input_0.npy" -o "$work/ours.npy" > /dev/null
"$py" -c "
import numpy as np, sys
a, b = np.load('$work/ours.npy'), np.load('$work/output_0.npy')
c = np.load('$work/output.npy')
err = np.abs(a - b).max() / np.abs(b).max()
sys.exit(0 if err < 1e-4 and (a == c).all() else f'tvm-net run: relative error {err}')"
"$bin/tvm-net" time "$work/lib/rb.so" --warmup 1 --repeat 3 > "$work/time.log"
grep -q "median .* ms over 3 runs" "$work/time.log"
grep -q "no estimate" "$work/time.log"
"$bin/tvm-net" profile "$work/lib/rb.so" --warmup 1 --repeat 3 > "$work/profile.log"
grep -q "rb: 6 kernel calls of 6 tasks, medians of 3 runs" "$work/profile.log"
grep -q "|    5 | Gemm .*| *default |" "$work/profile.log"
grep -q "^calls .* ms (the sum of their medians), run .* ms" "$work/profile.log"
"$bin/tvm-net" profile "$work/lib/rb.so" --warmup 0 --repeat 2 --json | "$py" -c "
import json, sys
p = json.load(sys.stdin)
assert len(p['tasks']) == 6 and all(t['network_s'] > 0 for t in p['tasks']), p
assert abs(sum(t['network_s'] for t in p['tasks']) - p['calls_s']) < 1e-9, p
assert p['estimate_s'] == 0 and p['run_s'] > 0, p"
expect_fail 1 "is float32\[1, 8, 16, 15\]; input 0 'input' is float32\[1, 8, 16, 16\]" \
  "$bin/tvm-net" run "$work/lib/rb.so" -i "$work/wrong_shape.npy"
expect_fail 1 "is float64" "$bin/tvm-net" run "$work/lib/rb.so" -i "$work/wrong_type.npy"
expect_fail 1 "not a .npy file" "$bin/tvm-net" run "$work/lib/rb.so" -i "$work/app.c"
expect_fail 2 "input 0 'input' has no file" "$bin/tvm-net" run "$work/lib/rb.so"
expect_fail 2 "none is named 'nope'" "$bin/tvm-net" run "$work/lib/rb.so" \
  -i "$work/input_0.npy" -i nope=x.npy
expect_fail 1 "not a network built by tvm-compile --model" \
  "$bin/tvm-net" info "$work/lib/rb.so" --name other
expect_fail 2 "unknown command" "$bin/tvm-net" frobnicate "$work/lib/rb.so"

echo "== bad builds leave nothing"
expect_fail 1 "not a C identifier" "$bin/tvm-compile" --model "$model" -o "$work/bad/rb-1"
test ! -e "$work/bad/rb-1.a"
"$py" -c "import sqlite3; sqlite3.connect('$work/empty.db').close()"
"$bin/tvm-tune" run --workload matmul:M=16,N=16,K=16 --trials 1 --strategy random \
  --db "$work/empty.db" > /dev/null
expect_fail 1 "task 0 (ConvWinograd+Relu, from node 0 .*no record of te:" \
  "$bin/tvm-compile" --model "$model" --winograd on --db "$work/empty.db" --strict -o "$work/strict/rb"
[ -z "$(ls -A "$work/strict" 2> /dev/null)" ]
# a database without the Winograd tasks' records (tuned before the rewrite): one note says what to do
"$bin/tvm-compile" --model "$model" --winograd on --db "$work/empty.db" -o "$work/old/rb" \
  2> "$work/old.log"
grep -q "note: 2 Winograd convolution tasks (ConvWinograd...) have no records of their own in .*empty.db: tune them .* or build with --winograd off" "$work/old.log"
test -e "$work/old/rb.so"
# two builds of one network side by side: the default build and the one with the empty database
"$bin/tvm-net" compare "$work/lib/rb.so" "$work/old/rb.so" --warmup 1 --repeat 8 --block 2 \
  -i "$work/input_0.npy" > "$work/compare.log"
grep -q "^A rb (.*lib/rb.so): median .* ms over 8 runs" "$work/compare.log"
grep -q "^B rb (.*old/rb.so): median .* ms over 8 runs" "$work/compare.log"
grep -q "^B / A = [0-9.]* (B [a-z]*); B faster in [0-4] of 4 block pairs .* 8 blocks of 2 runs each" \
  "$work/compare.log"
"$bin/tvm-net" compare "$work/lib/rb.so" "$work/old/rb.so" --warmup 0 --repeat 3 --json |
  "$py" -c "
import json, sys
d = json.load(sys.stdin)
assert d['a']['median_s'] > 0 and d['b']['median_s'] > 0, d
assert abs(d['b_over_a'] - d['b']['median_s'] / d['a']['median_s']) < 1e-3 * d['b_over_a'], d
assert d['block_pairs'] == 1 and d['runs'] == 10 and d['block'] == 10, d
assert d['output_difference'] < 1e-4, d  # the same network, other schedules"
"$bin/tvm-compile" --model "$models/mobilenet_block/model.onnx" -o "$work/mb/mb" 2> /dev/null > /dev/null
expect_fail 1 "take or give different tensors .*not two builds of one network" \
  "$bin/tvm-net" compare "$work/lib/rb.so" "$work/mb/mb.so" --repeat 2
expect_fail 2 "two libraries, A.so B.so, are needed" "$bin/tvm-net" compare "$work/lib/rb.so"
expect_fail 2 "writes no outputs" \
  "$bin/tvm-net" compare "$work/lib/rb.so" "$work/old/rb.so" -o "$work/x.npy"
head -c 300 "$model" > "$work/truncated.onnx"
expect_fail 1 "truncated.onnx" "$bin/tvm-compile" --model "$work/truncated.onnx" -o "$work/t/rb"
test ! -e "$work/t/rb.a"
# opsets 18 to 22's new operators, attributes and inputs, wrong, and opset 23: each named,
# and nothing written
"$py" - "$work" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
def save(name, node, shape, inits=(), opset=18):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, None)
    g = helper.make_graph([node], name, [x], [y], [numpy_helper.from_array(np.asarray(v), k)
                                                 for k, v in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(m, f"{sys.argv[1]}/{name}.onnx")
i64 = lambda *v: np.array(v, np.int64)
save("split", helper.make_node("Split", ["x"], ["a", "b", "c"], "the_node", axis=1,
                               num_outputs=3), [1, 2])
save("pad", helper.make_node("Pad", ["x", "p", "", "ax"], ["y"]), [1, 4],
     [("p", i64(1, 1, 1, 1)), ("ax", i64(1, -1))])
save("resize", helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear", antialias=1),
     [1, 1, 8, 8], [("s", np.array([1, 1, 0.5, 0.5], np.float32))])
save("group_norm", helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3),
     [1, 8, 4, 4], [("s", np.ones(3, np.float32)), ("b", np.zeros(3, np.float32))])
save("gelu", helper.make_node("Gelu", ["x"], ["y"], approximate="erf"), [1, 4], opset=20)
save("group_norm21", helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2),
     [1, 8, 4, 4], [("s", np.ones(2, np.float32)), ("b", np.zeros(2, np.float32))], opset=21)
save("wrap18", helper.make_node("Pad", ["x", "p"], ["y"], mode="wrap"), [1, 4],
     [("p", i64(0, 1, 0, 1))])
save("opset23", helper.make_node("Relu", ["x"], ["y"]), [1, 4], opset=23)
PY
expect_fail 1 "node 0 'the_node' (Split): num_outputs 3 does not split dimension 1 (2) into 3" \
  "$bin/tvm-compile" --model "$work/split.onnx" -o "$work/o18/m"
expect_fail 1 "(Pad): axis 1 is padded twice" "$bin/tvm-compile" --model "$work/pad.onnx" -o "$work/o18/m"
expect_fail 1 "(Resize): antialias (opset 18) of a linear downscale is not supported" \
  "$bin/tvm-compile" --model "$work/resize.onnx" -o "$work/o18/m"
expect_fail 1 "(GroupNormalization): num_groups 3 does not divide the 8 channels" \
  "$bin/tvm-compile" --model "$work/group_norm.onnx" -o "$work/o18/m"
expect_fail 1 "(Gelu): approximate 'erf' is not none or tanh" \
  "$bin/tvm-compile" --model "$work/gelu.onnx" -o "$work/o18/m"
expect_fail 1 "(GroupNormalization): input 1 must have the 8 channels' values (opset 21)" \
  "$bin/tvm-compile" --model "$work/group_norm21.onnx" -o "$work/o18/m"
expect_fail 1 "(Pad): mode 'wrap' is of opset 19, the model's is 18" \
  "$bin/tvm-compile" --model "$work/wrap18.onnx" -o "$work/o18/m"
expect_fail 1 "opset 23" "$bin/tvm-compile" --model "$work/opset23.onnx" -o "$work/o18/m"
test ! -e "$work/o18"
expect_fail 2 "--model takes -o OUTDIR/NAME and no --workload" \
  "$bin/tvm-compile" --model "$model" --workload matmul:M=1,N=1,K=1 --symbol mm -o "$work/x/y"
expect_fail 1 "networks build for CPU (llvm) and GPU (opencl) targets, not 'cuda'" \
  "$bin/tvm-compile" --model "$model" --target cuda -o "$work/cl/rb"
test ! -e "$work/cl/rb.a"

echo "== tvm-tune lower --time"
# the default schedule (its weights packed: layout_rewrite) timed as the tuner times a candidate
wl=matmul:M=64,N=96,K=80
"$bin/tvm-tune" lower --workload "$wl" --default --time --cache-flush=network > "$work/time.log"
grep -q "packed" "$work/time.log"
line=$(grep "^time: " "$work/time.log")
"$py" -c "
import re, sys
m = re.match(r'time: median ([0-9.]+) ms, fastest ([0-9.]+) ms, ([0-9.]+) GFLOPS at the median \(([0-9]+) samples of ([0-9]+) calls?, cache flush network\)$', sys.argv[1])
assert m, sys.argv[1]
med, best, gf, n, calls = float(m[1]), float(m[2]), float(m[3]), int(m[4]), int(m[5])
assert 0 < best <= med and gf > 0 and 5 <= n <= 64 and calls >= 1, sys.argv[1]" "$line"
expect_fail 1 "runs on this CPU only" "$bin/tvm-tune" lower --workload "$wl" --default --time \
  --target "llvm -mtriple=aarch64-linux-gnu"
expect_fail 2 "--cache-flush takes inputs, constants, network or off, got 'all'" \
  "$bin/tvm-tune" lower --workload "$wl" --default --time --cache-flush=all
# the network's size decides where its weights wait: the share of it that stays in the last-level
# cache from one run to the next (probed; said here, so that a busy machine does not decide),
# none beyond the cache (1 TiB)
"$bin/tvm-tune" lower --workload "$wl" --default --time --cache-flush=network \
  --network-mib 1048576 | grep -q "cache flush network)$"
TVM_TUNE_LLC_SHARE=1 "$bin/tvm-tune" lower --workload "$wl" --default --time \
  --cache-flush=network --network-mib 1 | grep -q "cache flush network-llc)$"
TVM_TUNE_LLC_SHARE=0.5 "$bin/tvm-tune" lower --workload "$wl" --default --time \
  --cache-flush=network --network-mib 1 | grep -q "cache flush network-llc-50)$"
expect_fail 2 "--network-mib goes with --time --cache-flush=network" \
  "$bin/tvm-tune" lower --workload "$wl" --default --time --network-mib 1
expect_fail 2 "--network-mib needs a positive size, got 'x'" \
  "$bin/tvm-tune" lower --workload "$wl" --default --time --cache-flush=network --network-mib x

echo "== tvm-tune lower --default --target opencl"
# what a GPU build takes without records: a classifier head's reduction shared by 64 threads a
# work-group (one output each), a matmul tiled within -max_num_threads=16 (the naive binding
# before 2026-12-01), each checked against the definition
head='te:t0[i0,i1] += x0[i0,r0] * w1[i1,r0]; out[i0,i1] = t0[i0,i1] + w2[i1]; t0:float32[1,1000]; x0:float32[1,512]; w1:const float32[1000,512]; out:float32[1,1000]; w2:const float32[1000]; r0:512'
"$bin/tvm-tune" lower --workload "$head" --default --target opencl --check > "$work/gpu.log"
grep -q "^# default schedule: the GPU default tiling (up to 256 work-items a group)" "$work/gpu.log"
grep -q "for r0.1 in 0..64 threadIdx.x" "$work/gpu.log"
grep -q "for i0@i1@ in 0..1000 blockIdx.x" "$work/gpu.log"
grep -q "^check: OK" "$work/gpu.log"
"$bin/tvm-tune" lower --workload matmul:M=64,N=64,K=64 --default \
  --target "opencl -max_num_threads=16" --check > "$work/gpu16.log"
grep -q "^# default schedule: the GPU default tiling (up to 16 work-items a group)" "$work/gpu16.log"
grep -q "^check: OK" "$work/gpu16.log"
expect_fail 1 "runs on this CPU only (target 'llvm'), not 'opencl'" \
  "$bin/tvm-tune" lower --workload "$head" --default --target opencl --time
# a product over a prime length (ViT's 197 tokens): tiles of 32 rows padded, the last moved back
# to end with the axis (no guard on the outputs), the reduction's last round guarded
"$bin/tvm-tune" lower --workload matmul:M=37,N=64,K=37 --default --target opencl --check \
  > "$work/gpuprime.log"
grep -q "^# default schedule: the GPU default tiling" "$work/gpuprime.log"
grep -q 'C\[min(' "$work/gpuprime.log"
grep -q "if k.0 \* 8 + .* < 37:" "$work/gpuprime.log"
grep -q "^check: OK" "$work/gpuprime.log"

echo "== tvm-tune tasks --target opencl: each task's untuned form"
"$bin/tvm-tune" tasks --model "$model" --target opencl > "$work/gputasks.log"
grep -q "| Share  | Untuned      |$" "$work/gputasks.log"
grep -q "| Conv+Add+Relu .* | tiled        |$" "$work/gputasks.log"
grep -q "| Gemm .* | cross-thread |$" "$work/gputasks.log"
grep -q "| MaxPool .* | naive        |$" "$work/gputasks.log"
"$bin/tvm-tune" tasks --model "$model" --target opencl --json | $py -c "
import json, sys
t = json.load(sys.stdin)['tasks']
assert all(x['default'] in ('tiled', 'cross-thread', 'naive') for x in t), t
"
"$bin/tvm-tune" tasks --model "$model" --json | $py -c "
import json, sys
assert all('default' not in x for x in json.load(sys.stdin)['tasks'])
"

echo "== installed: tvm_tune_add_network"
cmake --install "$build" --prefix "$work/prefix" > /dev/null
test -x "$work/prefix/bin/tvm-net"
mkdir -p "$work/cm"
sed 's/"rb.h"/"rb.h"/' "$work/app.c" > "$work/cm/app.c"
cat > "$work/cm/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.20)
project(netapp C)
find_package(TvmTune REQUIRED)
tvm_tune_add_network(rb MODEL "$model" LAYOUT model)
add_executable(app app.c)
target_link_libraries(app PRIVATE rb)
CMAKE
cmake -S "$work/cm" -B "$work/cm/build" -DCMAKE_PREFIX_PATH="$work/prefix" > /dev/null
cmake --build "$work/cm/build" > "$work/cm/build.log" 2>&1
grep -q "tvm-compile network rb" "$work/cm/build.log"
"$work/cm/build/app" "$work/input_0.npy" "$work/cm_out.bin" | grep -q '^OK$'
grep -q -- "--layout model" "$work/cm/build/build.ninja" "$work/cm/build/Makefile" \
  "$work/cm/build/CMakeFiles/"*/build.make 2> /dev/null
# the model's layout sums in another order: the same values within rounding
"$py" -c "
import numpy as np, sys
a = np.fromfile('$work/cm_out.bin', np.float32)
b = np.fromfile('$work/app_out.bin', np.float32)
sys.exit(0 if np.abs(a - b).max() <= 1e-5 * np.abs(b).max() else 'LAYOUT model: other values')"
echo "test_net_cli: passed"
