#!/usr/bin/env bash
# On the GPU machine: captures samples/torch/lib_*.py (PyTorch's own libraries that use streams, events, pinned
# memory and threads inside: FSDP, DDP, DCP, DataLoader, save_on_cpu, CUDA graphs, AMP) and their VARIANTs side
# by side, each within CAP_TIMEOUT seconds, and prints each one's ground truth beside streamtrace's summary.
# Traces and logs in $OUT/torch-libraries.tgz (JSON traces, as samples/capture/torch-t2 keeps them).
set -uo pipefail
cd "$(dirname "$0")/.."
source benches/gpu_env.sh
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
work=/tmp/torch-libraries && rm -rf $work && mkdir -p $work
st=.gpu/bin/streamtrace
one() {  # SCRIPT [VARIANT]
  local py=$1 variant=${2:-} name start rc
  name=$(basename "$py" .py)${variant:+-$variant}
  start=$(date +%s)
  timeout "${CAP_TIMEOUT:-120}" $st capture -o /tmp/lib-$name -- python3 "$py" $variant > $work/$name.log 2>&1
  rc=$?
  for t in /tmp/lib-$name/trace.*; do [ -e "$t" ] && cp "$t" "$work/$name.$(basename "$t")"; done
  echo "$name: exit $rc after $(( $(date +%s) - start )) s, $(ls /tmp/lib-$name 2>/dev/null | wc -l) traces;" \
    "$(grep -o 'GROUND_TRUTH [a-z]*' $work/$name.log | head -1) / $(grep -o 'SUMMARY: streamtrace: [0-9]* race' $work/$name.log | head -1)"
}
# The observer is built once first, so that the captures side by side do not all wait on its lock.
$st capture --no-analyze -o /tmp/lib-build -- python3 -c "import torch; torch.ones(1, device='cuda')" > $work/build.log 2>&1
for py in ${PROGRAMS:-samples/torch/lib_*.py}; do
  for variant in "" $(sed -n 's|^# VARIANT: ||p' "$py"); do
    one "$py" "$variant" &
  done
done
wait
cd /tmp && tar czf "$OUT/torch-libraries.tgz" torch-libraries
