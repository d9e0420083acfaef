#!/usr/bin/env bash
# On the GPU machine: tier-T2 capture with the native op observer (capture/python/torch_observer.cpp). Builds
# the observer once (timed), re-captures every PyTorch sample (with CSAN beside it when CSAN=1, through
# samples/torch/compare_csan.sh), and runs the training-loop overhead rounds: plain, native observer, and with
# PYTHON_MODE=1 the Python dispatch mode. Output in $OUT/torch-t2.tgz.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
st=.gpu/bin/streamtrace
work=/tmp/torch-t2 && mkdir -p $work
echo "== building the observer (first capture of a torch program)"
start=$(date +%s%N)
$st capture --no-analyze -o /tmp/t2build -- python3 -c "import torch; torch.ones(1, device='cuda')" 2>&1 | grep streamtrace
echo "first capture, build included: $(( ($(date +%s%N) - start) / 1000000 )) ms"
if [ -n "${CSAN:-}" ]; then
  bash samples/torch/compare_csan.sh $work/csan-comparison.md
else
  for py in samples/torch/*.py; do
    name=$(basename "$py" .py)
    $st capture -o "/tmp/cmp-$name" -- python3 "$py" > "$work/$name.capture.log" 2>&1
    cp /tmp/cmp-$name/trace.*.json "$work/$name.json"
    echo "$name: $(grep -o 'GROUND_TRUTH [a-z]*' "$work/$name.capture.log") / $(grep -o 'SUMMARY: streamtrace: [0-9]* race' "$work/$name.capture.log")"
  done
fi
for round in $(seq 1 "${ROUNDS:-5}"); do
  python3 benches/torch_train_loop.py | sed "s/^/plain    /"
  $st capture --no-analyze -o /tmp/t2loop -- python3 benches/torch_train_loop.py 2>/dev/null | sed "s/^/native   /"
  if [ -n "${PYTHON_MODE:-}" ]; then
    STREAMTRACE_TORCH_OBSERVER=python $st capture --no-analyze -o /tmp/t2py -- python3 benches/torch_train_loop.py 2>/dev/null | sed "s/^/python   /"
  fi
done | tee $work/overhead-t2.txt
$st analyze /tmp/t2loop/trace.*.json | tail -4 | tee -a $work/overhead-t2.txt
cp /tmp/t2loop/trace.*.json $work/train_loop.json
cd /tmp && tar czf "$OUT/torch-t2.tgz" torch-t2
