#!/usr/bin/env bash
# On the GPU machine: builds every sample with nvcc (with host debug info, so findings name their lines), runs each under `streamtrace capture`, and leaves in $1
# (default $OUT) one trace per sample (NAME.json) with the program's output (NAME.log).
# Needs the streamtrace binary and libstreamtrace_capture.so in .gpu/bin (built on the development machine).
# CUDA="a b" runs only those samples. A sample with a line `// VARIANT: ARG` is also run with ARG as its argument,
# into NAME-ARG.json.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:-$OUT}
bin=$repo/.gpu/bin
build=$(mktemp -d)
export PATH=/usr/local/cuda/bin:$PATH
sources=("$here"/*.cu)
[ -z "${CUDA:-}" ] || sources=($(printf "$here/%s.cu " $CUDA))
for src in "${sources[@]}"; do
  name=$(basename "$src" .cu)
  nvcc -g -lineinfo -O2 -arch=sm_90 -std=c++17 -o "$build/$name" "$src" -lpthread
  for variant in "" $(sed -n 's|^// VARIANT: ||p' "$src"); do
    label=$name${variant:+-$variant}
    "$bin/streamtrace" capture -o "$build/trace-$label" -- "$build/$name" $variant > "$out/$label.log" 2>&1 || true
    grep GROUND_TRUTH "$out/$label.log" || { echo "$label: no ground truth line"; tail -20 "$out/$label.log"; }
    cp "$build/trace-$label"/trace.*.json "$out/$label.json"
  done
done
