#!/usr/bin/env bash
# On the GPU machine: builds every sample with nvcc, runs each under `streamtrace capture`, and leaves in $1
# (default $OUT) one trace per sample (NAME.json) with the program's output (NAME.log).
# Needs the streamtrace binary and libstreamtrace_capture.so in .gpu/bin (built on the development machine).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:-$OUT}
bin=$repo/.gpu/bin
build=$(mktemp -d)
export PATH=/usr/local/cuda/bin:$PATH
for src in "$here"/*.cu; do
  name=$(basename "$src" .cu)
  nvcc -O2 -arch=sm_90 -std=c++17 -o "$build/$name" "$src" -lpthread
  "$bin/streamtrace" capture -o "$build/trace-$name" -- "$build/$name" > "$out/$name.log" 2>&1 || true
  grep GROUND_TRUTH "$out/$name.log" || { echo "$name: no ground truth line"; tail -20 "$out/$name.log"; }
  cp "$build/trace-$name"/trace.*.json "$out/$name.json"
done
