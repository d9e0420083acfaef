#!/usr/bin/env bash
# On the GPU machine: tier-T2 capture with the native op observer (capture/python/torch_observer.cpp). Builds
# the observer once (timed), re-captures every PyTorch sample (with CSAN beside it when CSAN=1, through
# samples/torch/compare_csan.sh), and runs the training-loop overhead rounds (benches/gpu_train_rounds.sh, which
# reads PYTHON_MODE and CSAN too). Output in $OUT/torch-t2.tgz.
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
bash benches/gpu_train_rounds.sh "${ROUNDS:-5}" | tee $work/overhead-t2.txt
$st analyze /tmp/t2loop/trace.*.json | tail -4 | tee -a $work/overhead-t2.txt
cp /tmp/t2loop/trace.*.json $work/train_loop.json
cd /tmp && tar czf "$OUT/torch-t2.tgz" torch-t2
