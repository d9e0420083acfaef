#!/usr/bin/env bash
# On the GPU machine: what recording a hand-written Triton kernel's launches as ops costs
# (benches/triton_launches.py): plain, captured (each launch an op, its reads and writes from PyTorch's analysis of
# the kernel's Triton IR), and captured with STREAMTRACE_TRITON_OPS=0 (the launches at tier T1, bracketed for
# their line), ROUNDS interleaved rounds (default 3), PIN as in gpu_loop_parts.sh. Lines in
# $OUT/triton_launches.txt.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
export STREAMTRACE_TRACE_FORMAT=binary
st=$repo/.gpu/bin/streamtrace
pin=(${PIN:-})
mkdir -p "$OUT"
{
  # The observer is compiled once, before anything is timed.
  "$st" capture --no-analyze -o /tmp/tl-warm -- python3 samples/torch/two_streams_no_wait.py > /dev/null 2>&1
  for round in $(seq 1 "${ROUNDS:-3}"); do
    for mode in plain ops t1; do
      case $mode in
        plain) run=(python3 benches/triton_launches.py) ;;
        ops) run=("$st" capture --no-analyze -o /tmp/tl-ops -- python3 benches/triton_launches.py) ;;
        t1) run=(env STREAMTRACE_TRITON_OPS=0 "$st" capture --no-analyze -o /tmp/tl-t1 -- python3 benches/triton_launches.py) ;;
      esac
      started=$(date +%s%N)
      line=$(timeout 240 "${pin[@]}" "${run[@]}" 2>/dev/null | grep '^triton launches')
      echo "round $round $mode: $line; process $(( ($(date +%s%N) - started) / 1000000 )) ms"
    done
  done
} 2>&1 | tee "$OUT/triton_launches.txt"
