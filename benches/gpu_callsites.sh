#!/usr/bin/env bash
# On the GPU machine: what native call sites cost and show. Builds the CUDA samples with -g -lineinfo (and
# two_streams_race without -g, stripped, and at -O0), captures each (the reports name their lines), captures a
# PyTorch sample in the Python observer mode with STREAMTRACE_WALK_STATS=1, and runs ROUNDS (default 9)
# interleaved rounds of the launch benchmark plain, captured, and captured with --no-call-sites, then how the
# capture's walks went. Traces and logs come back as $OUT/callsites.tar.gz, the benchmark lines as
# $OUT/overhead.txt. Needs the binary and library in .gpu/ (benches/gpu_env.sh).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
bin=$repo/.gpu/bin
work=$(mktemp -d); build=$work/build; mkdir -p "$build" "$work/cuda" "$work/variants"
ls samples/cuda/*.cu | xargs -P 16 -I{} sh -c 'n=$(basename {} .cu); nvcc -g -lineinfo -O2 -arch=sm_90 -std=c++17 -o '"$build"'/$n {} -lpthread'
nvcc -O2 -arch=sm_90 -std=c++17 -o "$build/nog_two_streams_race" samples/cuda/two_streams_race.cu -lpthread &
nvcc -g -Xcompiler -O0 -arch=sm_90 -std=c++17 -o "$build/o0_two_streams_race" samples/cuda/two_streams_race.cu -lpthread &
nvcc -O2 -arch=sm_90 -o "$build/launches" benches/capture_launches.cu &
wait
cd "$build"
for src in "$repo"/samples/cuda/*.cu; do
  n=$(basename "$src" .cu)
  "$bin/streamtrace" capture -o "t-$n" -- "./$n" > "$work/cuda/$n.log" 2>&1
  cp t-$n/trace.*.json "$work/cuda/$n.json" 2>/dev/null
  echo "$n: $(grep -o 'GROUND_TRUTH.*' "$work/cuda/$n.log" | head -1) | $(grep -o 'SUMMARY.*' "$work/cuda/$n.log" | head -1)"
done
strip -o stripped_two_streams_race nog_two_streams_race
for variant in nog o0 stripped; do
  "$bin/streamtrace" capture -o "t-$variant" -- "./${variant}_two_streams_race" > "$work/variants/$variant.log" 2>&1
done
STREAMTRACE_WALK_STATS=1 STREAMTRACE_TORCH_OBSERVER=python timeout 120 "$bin/streamtrace" capture -o t-torch -- \
  python3 "$repo/samples/torch/two_streams_no_wait.py" > "$work/variants/torch.log" 2>&1
{
  for r in $(seq 1 "${ROUNDS:-9}"); do
    ./launches 100000 | sed "s/^/plain      /"
    "$bin/streamtrace" capture --no-analyze -o o1 -- ./launches 100000 | sed "s/^/captured   /"
    "$bin/streamtrace" capture --no-call-sites --no-analyze -o o2 -- ./launches 100000 | sed "s/^/no_sites   /"
  done
  STREAMTRACE_WALK_STATS=1 "$bin/streamtrace" capture --no-analyze -o o3 -- ./launches 100000
  "$bin/streamtrace" analyze o1/trace.*.json | grep -E "Capture cost|SUMMARY"
  "$bin/streamtrace" analyze o2/trace.*.json | grep -E "Capture cost|SUMMARY"
} 2>&1 | tee "$OUT/overhead.txt"
tar -czf "$OUT/callsites.tar.gz" -C "$work" cuda variants
