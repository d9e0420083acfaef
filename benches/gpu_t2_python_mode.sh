#!/usr/bin/env bash
# On the GPU machine: the fallback of tier T2, the Python dispatch mode (STREAMTRACE_TORCH_OBSERVER=python), on
# the samples that exercise its parts (allocator blocks and their reuse, a Triton launch, threads). The traces
# go to $OUT/python-mode/ for samples/capture/torch-t2-python-mode/.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
mkdir -p "$OUT/python-mode"
for name in block_reuse_without_record_stream triton_kernel_race threads_queue_handover; do
  STREAMTRACE_TORCH_OBSERVER=python .gpu/bin/streamtrace capture -o "/tmp/py-$name" -- python3 "samples/torch/$name.py" \
    > "$OUT/python-mode/$name.log" 2>&1
  cp /tmp/py-$name/trace.*.json "$OUT/python-mode/$name.json"
  echo "$name: $(grep -o 'GROUND_TRUTH [a-z]*' "$OUT/python-mode/$name.log") / $(grep -o 'SUMMARY: streamtrace: [0-9]* race' "$OUT/python-mode/$name.log") / $(grep -c 'Python dispatch mode' "$OUT/python-mode/$name.log")"
done
