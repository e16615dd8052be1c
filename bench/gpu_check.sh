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
# Environment: STEPS (default "test bench restart cublas nets"), TRIALS, SIZES (default
# "1024 2048"), STEP_TIMEOUT (s, default 200).
set -uo pipefail
out=${OUT:-/tmp/gpu-check}
trials=${TRIALS:-192}
sizes=${SIZES:-"1024 2048"}
step_timeout=${STEP_TIMEOUT:-200}
steps=" ${STEPS:-test bench restart cublas nets} "
want() { [[ $steps == *" $1 "* ]]; }
mkdir -p "$out"
summary=$out/summary.txt
say() { echo "$*" | tee -a "$summary"; }
t_start=$(date +%s)
b=/tmp/tt-gpu
if want test || want bench || want restart || want tune; then
    mkdir -p $b && tar -C $b -xJf "${BUNDLE:-.gpu/bundle.tar.xz}" || { say "no bundle: run scripts/gpu-bundle.sh here first"; exit 1; }
fi
if want nets; then
    mkdir -p $b && tar -C $b -xf .gpu/nets.tar || say "no networks: run scripts/gpu-net-bundle.sh here first"
fi
export LD_LIBRARY_PATH=$b/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$b/bin:$PWD/.gpu/bin:$PATH  # .gpu/bin: an ld.lld packed apart, if any
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

if want nets && [ -d $b/nets ]; then
    for d in $b/nets/*/; do
        m=$(basename "$d")
        lib=$d/${m//./_}.so
        say "## network $m on OpenCL (tvm-net), against PyTorch eager with CUDA"
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
        timeout $step_timeout tvm-net profile "$lib" --warmup 5 --repeat 20 > "$out/profile_$m.log" 2>&1
        sort -t'|' -k6 -rn "$out/profile_$m.log" | head -8 | tee -a "$summary"
        tail -1 "$out/profile_$m.log" | tee -a "$summary"
        timeout 120 python3 scripts/export_torch_models.py --time "$m" "$d" --device cuda --repeat 50 2>&1 | tail -1 | tee -a "$summary"
    done
fi
say "total: $(( $(date +%s) - t_start )) s"
