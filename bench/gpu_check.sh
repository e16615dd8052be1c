#!/bin/bash
# The GPU check (issue #55, docs/opencl.md): everything that needs a real GPU, in one call of a
# few minutes, for a machine lent for 15 minutes of device time.  Run on the GPU machine from the
# repository's root, with the bundle scripts/gpu-bundle.sh packed here (that machine has none of
# our dependencies; it has NVIDIA's driver, Python and PyTorch with CUDA).
#
#   here:   scripts/gpu-bundle.sh                     # writes .gpu/bundle.tar.xz
#   there:  bash bench/gpu_check.sh                   # results in $OUT (or /tmp/gpu-check)
#
# Steps, each bounded by `timeout` so the whole call ends in time:
#   1. the device, its driver and PyTorch's versions;
#   2. test_opencl on the GPU (the code generator's schedules against the reference, the device's
#      errors as results, the worker and the binary cache);
#   3. bench_opencl --no-cpu: matmul 1024 and 2048 tuned with evo ($TRIALS trials, default 192),
#      with candidates per minute and the time of a measurement;
#   4. the same tuning run again with the binary cache filled (a restarted run builds nothing);
#   5. cuBLAS sgemm (TF32 off) for 1024, 2048 and 4096, timed with CUDA events in this call;
#   6. networks (the bundle scripts/gpu-net-bundle.sh packs, .gpu/nets.tar): each library run on
#      the GPU against PyTorch's output, timed and profiled by tvm-net, and PyTorch eager with
#      CUDA timed on the same input (CUDA events);
#   7. "tune" (not by default): a network's tasks tuned on the GPU, $TRIALS per task, from
#      .gpu/tune/NAME.tasks (scripts/gpu-net-bundle.sh --tasks: one "WEIGHT WORKLOAD" a line);
#      the records come back in $OUT/NAME.db, for tvm-compile --db here.
# Steps that need a C compiler there (tvm-compile's runtime glue; nvcc's host compiler):
#   "env": what the machine has (a C compiler, PyTorch's exporter);
#   "tiles": the fixed tilings the GPU search starts from (tt_sketch_gpu_tiled: the build's
#      default, the 128x128 large tile with scalar and 4-float fetches, double-buffered, and
#      with A's rows copied into registers by 128-bit reads)
#      measured on matmul
#      $SIZES, each checked against the reference;
#   "nets-there": the networks $NETS (export_torch_models.py specs: resnet18, resnet18.b8,
#      bert_layer, ...) exported there by PyTorch, the first ones of $TUNE_NETS tuned there
#      ($NET_TRIALS a task, evo), built by tvm-compile --target opencl (tuned, or default
#      schedules), checked against PyTorch, timed and profiled by tvm-net, and PyTorch eager with
#      CUDA timed on the same input; no 64 MiB of weights to carry;
#   "convs": cuDNN's time for each convolution of ResNet-18 (batch 1 and 8), CUDA events.
#      Networks in $WINO_NETS are built a second time with --winograd on (default schedules).
# Environment: STEPS (default "test bench restart cublas nets"), TRIALS, SIZES (default
# "1024 2048"), STEP_TIMEOUT (s, default 200), NETS, TUNE_NETS, NET_TRIALS (default 12),
# WINO_NETS (default none).
set -uo pipefail
out=${OUT:-/tmp/gpu-check}
trials=${TRIALS:-192}
sizes=${SIZES:-"1024 2048"}
step_timeout=${STEP_TIMEOUT:-200}
steps=" ${STEPS:-test bench restart cublas nets} "
# BUDGET (s): steps that would start later are skipped, so that a lease's call ends in time
want() { [[ $steps == *" $1 "* ]] && in_budget "$1"; }
in_budget() {
    [ -z "${BUDGET:-}" ] || [ $(( $(date +%s) - t_start )) -lt "$BUDGET" ] && return 0
    say "skipped $1: past the budget of $BUDGET s"
    return 1
}
mkdir -p "$out"
summary=$out/summary.txt
say() { echo "$*" | tee -a "$summary"; }
t_start=$(date +%s)
b=/tmp/tt-gpu
if want test || want bench || want restart || want tune || want tiles || want nets-there; then
    mkdir -p $b && tar -C $b -xJf "${BUNDLE:-.gpu/bundle.tar.xz}" || { say "no bundle: run scripts/gpu-bundle.sh here first"; exit 1; }
fi
if want nets; then
    mkdir -p $b && tar -C $b -xf .gpu/nets.tar || say "no networks: run scripts/gpu-net-bundle.sh here first"
fi
export LD_LIBRARY_PATH=$b/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$b/bin:$PWD/.gpu/bin:$PATH  # .gpu/bin: an ld.lld packed apart, if any
export CPATH=$b/include${CPATH:+:$CPATH}  # OpenCL's headers, for tvm-compile's runtime glue
# NVIDIA's OpenCL driver, registered with the loader (containers mount it without nvidia.icd).
icd=/tmp/tt-icd
for lib in /usr/local/nvidia/lib64/libnvidia-opencl.so.1 /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1; do
    if [ -e "$lib" ]; then
        mkdir -p $icd && echo "$lib" > $icd/nvidia.icd && export OCL_ICD_VENDORS=$icd
        break
    fi
done
export TT_CL_CACHE=/tmp/tt-cl-cache
rm -rf "$TT_CL_CACHE"
say "# GPU check, $(date -u '+%Y-%m-%d %H:%M UTC')"
say "device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
say "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
say "$(python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' 2>&1 | tail -1)"

if want env; then
    say "## env"
    say "C compiler: $(command -v cc gcc clang 2>/dev/null | tr '\n' ' ')$(cc --version 2>/dev/null | head -1)"
    say "nvcc: $(nvcc --version 2>/dev/null | tail -1)"
fi

want tiles &&
for n in $sizes; do
    w="matmul:M=$n,N=$n,K=$n"
    say "## the search's fixed starting tilings, $w (naive, default, large, large with 4-float fetches, double-buffered, A's rows in registers)"
    t0=$(date +%s)
    timeout $step_timeout tvm-tune run --target opencl --workload "$w" --strategy evo --trials 6 \
        --db "$out/tiles.db" > "$out/tiles_$n.log" 2>&1
    say "exit $? in $(( $(date +%s) - t0 )) s"
    tvm-db history --db "$out/tiles.db" --workload "$w" --target opencl --json | python3 -c '
import json, sys
for r in json.load(sys.stdin):
    c = r["config"]
    # the tuner names each fixed start in the record (extra "start", since 2026-12-01)
    start = (r.get("extra") or {}).get("start")
    kind = start or ("naive" if c == "[]" else "sampled")
    e, t, g, b, u = r["error_name"], r["fastest_s"] * 1e3, r["gflops"], r["build_s"], r["run_s"]
    print(f"  {kind:24s} {e:16s} fastest {t:9.4f} ms {g:9.0f} GFLOPS  build {b:.2f} s run {u:.2f} s")' 2>&1 | tee -a "$summary"
done

if want test; then
say "## test_opencl"
t0=$(date +%s)
timeout $step_timeout test_opencl > "$out/test_opencl.log" 2>&1
rc=$?
grep -E "^opencl|PASSED|FAILED|ERROR|LINE" "$out/test_opencl.log" | tee -a "$summary"
say "test_opencl: exit $rc in $(( $(date +%s) - t0 )) s"
fi

want bench &&
for n in $sizes; do
    w="matmul:M=$n,N=$n,K=$n"
    say "## bench_opencl $w, $trials trials of evo"
    t0=$(date +%s)
    timeout $step_timeout bench_opencl --no-cpu --trials "$trials" --db "$out/matmul$n.db" "$w" > "$out/bench_$n.log" 2>&1
    rc=$?
    grep -E "OpenCL|best" "$out/bench_$n.log" | tee -a "$summary"
    say "exit $rc in $(( $(date +%s) - t0 )) s"
done

n=${sizes%% *}
want restart && {
say "## restarted: the same $((trials / 3)) trials of matmul $n again, binary cache filled"
for run in first again; do
    t0=$(date +%s)
    timeout $step_timeout tvm-tune run --target opencl --workload "matmul:M=$n,N=$n,K=$n" --strategy evo \
        --trials $((trials / 3)) --seed 7 --db "$out/restart_$run.db" > "$out/restart_$run.log" 2>&1
    say "$run: exit $? in $(( $(date +%s) - t0 )) s; $(grep -E 'measured now' "$out/restart_$run.log" | head -1)"
    [ $run = first ] || break
    rm -f "$out/restart_first.db"*
done
}

want cublas && {
say "## cuBLAS sgemm, TF32 off, CUDA events (median and fastest of 50 calls)"
timeout 120 python3 - <<'PY' 2>&1 | tee -a "$summary"
import torch
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
for n in (1024, 2048, 4096):
    a = torch.randn(n, n, device="cuda"); b = torch.randn(n, n, device="cuda")
    for _ in range(10):
        torch.mm(a, b)
    times = []
    for _ in range(50):
        s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
        s.record(); torch.mm(a, b); e.record(); torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    med, best = times[len(times) // 2], times[0]
    print(f"cublas matmul {n}: median {med:.4f} ms ({2 * n**3 / med / 1e6:.0f} GFLOPS), fastest {best:.4f} ms")
PY
}

if want tune; then
    for f in .gpu/tune/*.tasks; do
        [ -e "$f" ] || { say "no tasks to tune: scripts/gpu-net-bundle.sh --tasks MODEL here first"; break; }
        m=$(basename "$f" .tasks)
        args=()
        while read -r weight workload; do args+=(--workload "$workload" --weight "$weight"); done < "$f"
        say "## tuning $m's $(wc -l < "$f") tasks on the GPU, $trials trials each (evo)"
        t0=$(date +%s)
        timeout $step_timeout tvm-tune run --target opencl --strategy evo --trials "$trials" \
            --db "$out/$m.db" "${args[@]}" > "$out/tune_$m.log" 2>&1
        say "exit $? in $(( $(date +%s) - t0 )) s"
        grep -E "estimated|measured now" "$out/tune_$m.log" | tail -4 | tee -a "$summary"
    done
fi

net_report() { # NAME LIBRARY MODEL_DIR [SPEC]: checked against PyTorch, timed, profiled; PyTorch
    # timed on export_torch_models.py's SPEC (default NAME; "-" for none)
    local m=$1 lib=$2 d=$3 spec=${4:-$1} t0
    t0=$(date +%s)
    timeout $step_timeout tvm-net run "$lib" -i "$d/input_0.npy" -o "$out/$m.npy" > "$out/net_$m.log" 2>&1
    say "run: exit $? in $(( $(date +%s) - t0 )) s (the first run builds the program on the driver)"
    tail -3 "$out/net_$m.log" | tee -a "$summary"
    python3 -c "
import numpy as np
a, b = np.load('$out/$m.npy'), np.load('$d/output_0.npy')
print('$m: max |ours - torch| / max |torch| =', float(np.abs(a - b).max() / np.abs(b).max()))" 2>&1 | tee -a "$summary"
    rm -f "$out/$m.npy"
    timeout $step_timeout tvm-net time "$lib" --warmup 10 --repeat 50 2>&1 | tee -a "$summary"
    # the same with the caller's pageable memory handed to the driver (no pinned buffers)
    TVM_TUNE_OPENCL_PINNED=0 timeout $step_timeout tvm-net time "$lib" --warmup 10 --repeat 50 2>&1 |
        sed 's/^/pageable: /' | tee -a "$summary"
    timeout $step_timeout tvm-net profile "$lib" --warmup 5 --repeat 20 > "$out/profile_$m.log" 2>&1
    sort -t'|' -k6 -rn "$out/profile_$m.log" | head -8 | tee -a "$summary"
    tail -1 "$out/profile_$m.log" | tee -a "$summary"
    [ "$spec" = - ] ||
        timeout 120 python3 scripts/export_torch_models.py --time "$spec" "$d" --device cuda --repeat 50 2>&1 | tail -1 | tee -a "$summary"
}

if want nets-there; then
    models=$out/models
    mkdir -p "$models"
    for m in ${NETS:-resnet18 resnet18.b8 bert_layer bert_layer.b8}; do
        in_budget "network $m" || break
        say "## network $m: exported, built and run here"
        t0=$(date +%s)
        timeout $step_timeout python3 scripts/export_torch_models.py "$models" "$m" > "$out/export_$m.log" 2>&1 ||
            { say "export failed: $(tail -2 "$out/export_$m.log")"; continue; }
        say "exported in $(( $(date +%s) - t0 )) s"
        db=()
        if [[ " ${TUNE_NETS:-resnet18} " == *" $m "* ]]; then
            t0=$(date +%s)
            timeout $step_timeout tvm-tune run --model "$models/$m/model.onnx" --target opencl --strategy evo \
                --trials "${NET_TRIALS:-12}" --db "$out/$m.db" > "$out/tune_$m.log" 2>&1
            say "tuned ${NET_TRIALS:-12} trials a task: exit $? in $(( $(date +%s) - t0 )) s"
            grep -E "estimated|measured now" "$out/tune_$m.log" | tail -3 | tee -a "$summary"
            db=(--db "$out/$m.db")
        fi
        lib=$models/$m/lib/${m//./_}
        timeout $step_timeout tvm-compile --model "$models/$m/model.onnx" --target opencl "${db[@]}" -o "$lib" \
            --quiet > "$out/compile_$m.log" 2>&1 || { say "tvm-compile failed: $(tail -3 "$out/compile_$m.log")"; continue; }
        net_report "$m" "$lib.so" "$models/$m"
        if [[ " ${WINO_NETS:-} " == *" $m "* ]] && in_budget "network $m with Winograd"; then
            # 3x3 convolutions as Winograd's F(4x4 | 2x2, 3x3), default schedules (cuDNN's
            # choice for many of them): whether --winograd should be on for GPUs too
            timeout $step_timeout tvm-compile --model "$models/$m/model.onnx" --target opencl \
                --winograd on -o "${lib}_wino" --quiet > "$out/compile_${m}_wino.log" 2>&1 &&
                net_report "$m.winograd-untuned" "${lib}_wino.so" "$models/$m" - ||
                say "tvm-compile --winograd on failed: $(tail -3 "$out/compile_${m}_wino.log")"
            rm -f "${lib}_wino.a"
        fi
        rm -f "$lib.a" "$models/$m/model.onnx"
    done
fi

if want convs; then
say "## cuDNN: each convolution of ResNet-18 (TF32 off, benchmark mode), CUDA events, median of 50"
timeout 120 python3 - <<'PY' 2>&1 | tee -a "$summary"
import torch, torchvision
torch.backends.cudnn.allow_tf32 = False
torch.backends.cudnn.benchmark = True
m = torchvision.models.resnet18(weights=None).cuda().eval()
for batch in (1, 8):
    seen, convs = set(), []
    def hook(mod, inp, out):
        key = (tuple(inp[0].shape), mod.out_channels, mod.kernel_size, mod.stride, mod.padding)
        if key not in seen:
            seen.add(key)
            convs.append((mod, inp[0].detach().clone(), key))
    hs = [c.register_forward_hook(hook) for c in m.modules() if isinstance(c, torch.nn.Conv2d)]
    with torch.inference_mode():
        m(torch.randn(batch, 3, 224, 224, device="cuda"))
    for h in hs:
        h.remove()
    with torch.inference_mode():
        for mod, x, key in convs:
            for _ in range(10):
                mod(x)
            t = []
            for _ in range(50):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record(); mod(x); e.record(); e.synchronize()
                t.append(s.elapsed_time(e))
            t.sort()
            n, c, h, w = key[0]
            print(f"cudnn b{batch} {c}x{h}x{w} -> {key[1]} k{key[2][0]} s{key[3][0]}: "
                  f"median {t[25] * 1e3:8.1f} us, fastest {t[0] * 1e3:8.1f} us")
PY
fi

if want nets && [ -d $b/nets ]; then
    for d in $b/nets/*/; do
        m=$(basename "$d")
        say "## network $m on OpenCL (tvm-net), against PyTorch eager with CUDA"
        net_report "$m" "$d/${m//./_}.so" "$d"
    done
fi
say "total: $(( $(date +%s) - t_start )) s"
