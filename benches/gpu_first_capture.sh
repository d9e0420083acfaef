#!/usr/bin/env bash
# On the GPU machine: what the first capture of a PyTorch program on a fresh machine costs, process start to
# exit. ROUNDS (default 2) rounds of a short script (samples/torch/two_streams_no_wait.py): plain; captured with
# an empty observer cache (the native observer is built); captured again into a fresh directory (cache warm);
# and in the Python dispatch mode (no build). Lines in $OUT/first_capture.txt. Needs .gpu/ (benches/gpu_env.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
source benches/gpu_env.sh
st=$PWD/.gpu/bin/streamtrace
py=${SCRIPT:-samples/torch/two_streams_no_wait.py}
work=$(mktemp -d)
{
  for r in $(seq "${ROUNDS:-2}"); do
    echo "round $r plain: $(wall python3 "$py")"
    echo "round $r capture, empty cache: $(STREAMTRACE_OBSERVER_CACHE=$work/cache-$r wall "$st" capture -o "$work/cold-$r" -- python3 "$py")"
    echo "round $r capture, warm cache, fresh directory: $(STREAMTRACE_OBSERVER_CACHE=$work/cache-1 wall "$st" capture -o "$work/warm-$r" -- python3 "$py")"
    echo "round $r capture, Python dispatch mode: $(STREAMTRACE_TORCH_OBSERVER=python wall "$st" capture -o "$work/py-$r" -- python3 "$py")"
  done
} | tee "$OUT/first_capture.txt"
