#!/usr/bin/env bash
# On the GPU machine, in one call: every CUDA sample captured with `--exact` (samples/cuda/run_all.sh with
# CAPTURE_ARGS=--exact), the exact_* samples also with the default backend (tier T1, to compare), some PyTorch
# samples with --exact (T2 and T3 together), and what --exact costs: the launch benchmark, a memory-bound loop
# and the training loop, plain, default capture and --exact, interleaved over ROUNDS rounds (default 2).
# Everything comes back as $OUT/exact.tar.gz (exact/, default/, torch/: NAME.json, .log, .out) and the figures
# as $OUT/exact_cost.txt.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
st="timeout ${STEP_TIMEOUT:-150} .gpu/bin/streamtrace"
work=$(mktemp -d)
mkdir -p "$work/exact" "$work/default" "$work/torch"
CAPTURE_ARGS=--exact bash samples/cuda/run_all.sh "$work/exact" 2>&1 | tail -80
CUDA="${EXACT_SAMPLES:-exact_slices_per_stream exact_struct_members exact_pointer_from_memory exact_cublas_copy_race}" \
  bash samples/cuda/run_all.sh "$work/default" 2>&1 | tail -20
for name in ${TORCH_EXACT:-two_streams_no_wait views_interleaved pipeline_missing_wait}; do
  $st capture --exact -o "/tmp/te-$name" -- python3 "samples/torch/$name.py" > "$work/torch/$name.out" 2> "$work/torch/$name.log"
  echo "torch --exact $name: exit $?; $(grep -o 'SUMMARY.*' "$work/torch/$name.log" | head -1)"
  cp /tmp/te-$name/trace.*.json "$work/torch/$name.json" 2>/dev/null
done
tar -czf "$OUT/exact.tar.gz" -C "$work" exact default torch
[ "${ROUNDS:-2}" = 0 ] && exit 0
build=$(mktemp -d)
nvcc -O2 -arch=sm_90 -o "$build/launches" benches/capture_launches.cu
nvcc -O2 -arch=sm_90 -o "$build/memory" benches/exact_memory_loop.cu
{
  for round in $(seq 1 "${ROUNDS:-2}"); do
    echo "round $round"
    "$build/launches" 20000 | sed 's/^/plain   /'
    $st capture --no-analyze -o /tmp/xl -- "$build/launches" 20000 2>/dev/null | sed 's/^/default /'
    $st capture --exact --no-analyze -o /tmp/xl -- "$build/launches" 20000 2>/dev/null | sed 's/^/exact   /'
    "$build/memory" 10 | sed 's/^/plain   /'
    $st capture --no-analyze -o /tmp/xm -- "$build/memory" 10 2>/dev/null | sed 's/^/default /'
    $st capture --exact --no-analyze -o /tmp/xm -- "$build/memory" 10 2>&1 | grep -v '^streamtrace: capture' | sed 's/^/exact   /'
    python3 benches/torch_train_loop.py | sed 's/^/plain   /'
    $st capture --exact --no-analyze -o /tmp/xt -- python3 benches/torch_train_loop.py 2>/dev/null | sed 's/^/exact   /'
  done
  $st analyze /tmp/xt/trace.*.json 2>&1 | grep -E "Exact accesses|launches:|SUMMARY"
} 2>&1 | tee "$OUT/exact_cost.txt"
