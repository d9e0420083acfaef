#!/usr/bin/env bash
# On the GPU machine, in one call: the CUDA samples under capture (samples/cuda/run_all.sh), the PyTorch samples
# under capture, and the overhead benchmarks plain and under capture. Everything lands in $OUT.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
mkdir -p "$OUT/cuda" "$OUT/torch"
bash samples/cuda/run_all.sh "$OUT/cuda" 2>&1 | tail -40
for py in samples/torch/*.py; do
  name=$(basename "$py" .py)
  .gpu/bin/streamtrace capture -o "/tmp/t-$name" -- python3 "$py" > "$OUT/torch/$name.log" 2>&1
  cp /tmp/t-$name/trace.*.json "$OUT/torch/$name.json" 2>/dev/null
  echo "torch $name: $(grep -c . "$OUT/torch/$name.json" 2>/dev/null) records; $(grep -o 'SUMMARY.*races' "$OUT/torch/$name.log" | head -1)"
done
nvcc -O2 -arch=sm_90 -o /tmp/launches benches/capture_launches.cu
for round in 1 2 3; do
  /tmp/launches 100000 | sed "s/^/plain    /"
  .gpu/bin/streamtrace capture --no-analyze -o /tmp/bench-l -- /tmp/launches 100000 | sed "s/^/captured /"
  python3 benches/torch_train_loop.py | sed "s/^/plain    /"
  .gpu/bin/streamtrace capture --no-analyze -o /tmp/bench-t -- python3 benches/torch_train_loop.py | sed "s/^/captured /"
done 2>&1 | tee "$OUT/overhead.txt"
ls -la /tmp/bench-l /tmp/bench-t
