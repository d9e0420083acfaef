#!/usr/bin/env bash
# On the GPU machine: builds every sample with nvcc (with host debug info, so findings name their lines), runs each under `streamtrace capture`, and leaves in $1
# (default $OUT) one trace per sample (NAME.json) with the program's output (NAME.out) and capture's (NAME.log).
# Needs the streamtrace binary and libstreamtrace_capture.so in .gpu/bin (built on the development machine).
# CUDA="a b" runs only those samples. A sample with a line `// VARIANT: ARG` is also run with ARG as its argument,
# into NAME-ARG.json; one with `// LINK: FLAGS` is linked with FLAGS (`// LINK: NCCL`: with the NCCL of python3's
# nvidia-nccl wheel, the one PyTorch loads, or NCCL_HOME's include/ and lib/); one with `// STD: c++20` is built
# for that C++ standard instead of C++17. CAPTURE_ARGS="--exact" captures with those
# options of `streamtrace capture`. Each program also runs plain: NAME.plain.out holds its output, and a line says
# whether its output and exit status were the same plain and captured.
set -euo pipefail
# The traces this script collects are JSON (trace.*.json): the committed samples stay readable text.
export STREAMTRACE_TRACE_FORMAT=${STREAMTRACE_TRACE_FORMAT:-json}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:-$OUT}
bin=$repo/.gpu/bin
build=$(mktemp -d)
export PATH=/usr/local/cuda/bin:$PATH
sources=("$here"/*.cu)
[ -z "${CUDA:-}" ] || sources=($(printf "$here/%s.cu " $CUDA))
# The flags that link NCCL (find_nccl.sh's): its headers, libnccl.so.2 (through a libnccl.so link: the wheel
# ships none) and an rpath to it.
die() { echo "run_all.sh: $*" >&2; exit 2; }
source "$here/../find_nccl.sh"
nccl_flags() {
  find_nccl_lib
  mkdir -p "$build/nccl" && ln -sf "$NCCL_LIB/libnccl.so.2" "$build/nccl/libnccl.so"
  echo "-I$NCCL_LIB/../include -L$build/nccl -lnccl -Xlinker -rpath -Xlinker $NCCL_LIB"
}
# Built all at once (the GPU machine has many cores), then run one by one.
for src in "${sources[@]}"; do
  name=$(basename "$src" .cu)
  link=$(sed -n 's|^// LINK: ||p' "$src")
  # Without NCCL the sample fails to build, and the others still run.
  [ "$link" != NCCL ] || link=$(nccl_flags) || link=""
  std=$(sed -n 's|^// STD: ||p' "$src")
  nvcc -g -lineinfo -O2 -arch=sm_90 -std=${std:-c++17} -o "$build/$name" "$src" -lpthread $link &
done
wait
for src in "${sources[@]}"; do
  name=$(basename "$src" .cu)
  for variant in "" $(sed -n 's|^// VARIANT: ||p' "$src"); do
    label=$name${variant:+-$variant}
    # The program's standard output apart from capture's report (standard error), to compare with a plain run.
    captured_status=0
    timeout "${SAMPLE_TIMEOUT:-120}" "$bin/streamtrace" capture ${CAPTURE_ARGS:-} -o "$build/trace-$label" -- "$build/$name" $variant \
      > "$out/$label.out" 2> "$out/$label.log" || captured_status=$?
    plain_status=0
    timeout "${SAMPLE_TIMEOUT:-120}" "$build/$name" $variant > "$out/$label.plain.out" 2>/dev/null || plain_status=$?
    if [ "$captured_status" = "$plain_status" ] && cmp -s "$out/$label.out" "$out/$label.plain.out"; then
      echo "$label: output and exit status $plain_status the same plain and captured"
    else
      echo "$label: DIFFERS plain (exit $plain_status) and captured (exit $captured_status)"
    fi
    grep GROUND_TRUTH "$out/$label.out" || { echo "$label: no ground truth line"; tail -20 "$out/$label.log"; }
    # One trace per sample; a sample that failed to build or run leaves none, and the others still run.
    cp "$build/trace-$label"/trace.*.json "$out/$label.json" 2>/dev/null || echo "$label: no single trace"
  done
done
