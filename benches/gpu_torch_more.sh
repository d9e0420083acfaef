#!/usr/bin/env bash
# On the GPU machine: the PyTorch samples named on the command line under streamtrace capture and under CSAN;
# their traces, logs and a verdict table are packed into $OUT/torch-more.tgz.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
work=/tmp/torch-more && mkdir -p $work
for name in "$@"; do
  py=samples/torch/$name.py
  .gpu/bin/streamtrace capture -o /tmp/m-$name -- python3 $py > $work/$name.capture.log 2>&1
  cp /tmp/m-$name/trace.*.json $work/$name.json
  TORCH_CUDA_SANITIZER=1 python3 $py > $work/$name.csan.log 2>&1
  races=$(grep -o 'SUMMARY: streamtrace: [0-9]* race' $work/$name.capture.log | head -1 | grep -o '[0-9]*')
  csan=$(grep -c 'CSAN detected a possible data race' $work/$name.csan.log)
  truth=$(grep -o 'GROUND_TRUTH [a-z]*' $work/$name.capture.log | cut -d' ' -f2)
  echo "| $name | $truth | $([ "${races:-0}" -gt 0 ] && echo race || echo clean) | $([ "$csan" -gt 0 ] && echo race || echo clean) |"
done | tee $work/table.md
cd /tmp && tar czf "$OUT/torch-more.tgz" torch-more
