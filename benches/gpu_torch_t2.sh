#!/usr/bin/env bash
# On the GPU machine: the PyTorch samples under streamtrace (tier T2) and under CSAN, side by side, and the
# training-loop overhead of tier T2 capture. Everything is packed into $OUT/torch-t2.tgz.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
work=/tmp/torch-t2 && mkdir -p $work
bash samples/torch/compare_csan.sh $work/csan-comparison.md
for round in 1 2 3; do
  python3 benches/torch_train_loop.py | sed "s/^/plain    /"
  .gpu/bin/streamtrace capture --no-analyze -o /tmp/t2loop -- python3 benches/torch_train_loop.py 2>/dev/null | sed "s/^/captured /"
  TORCH_CUDA_SANITIZER=1 python3 benches/torch_train_loop.py 2>/dev/null | sed "s/^/csan     /"
done | tee $work/overhead-t2.txt
.gpu/bin/streamtrace analyze /tmp/t2loop/trace.*.json | tail -2 | tee -a $work/overhead-t2.txt
cp /tmp/t2loop/trace.*.json $work/train_loop.json
cd /tmp && tar czf "$OUT/torch-t2.tgz" torch-t2
