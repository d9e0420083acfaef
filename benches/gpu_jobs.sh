#!/usr/bin/env bash
# On the GPU machine (one H200): capture ranges and the steady-state overhead (#24 items 2 and 4).
# 1. The range samples, each captured whole and in its ranges; traces and reports in $OUT/jobs/ to commit under
#    samples/capture/ranges/:
#    - samples/torch/capture_range_profiler.py with --capture-range=cudaProfilerApi: only add_/mul_ reported
#      (whole: sub_/div_ too);
#    - samples/torch/capture_range_nvtx.py with --capture-range=nvtx --nvtx-capture=step --capture-range-end=repeat:
#      two sections, the first clean, the second add_/mul_;
#    - samples/ranges/nvtx_range_push.cu (nvtxRangePushA) with --capture-range=nvtx --nvtx-capture=step: only the
#      `inside` fill/scale race;
#    - the profiler sample with --delay 0 --duration 600 (the time trigger: the whole run as one range).
# 2. The overhead run the issue asks, ROUNDS (default 3) interleaved rounds of benches/torch_train_loop.py (300
#    steps): plain, captured, and `nsys profile -t cuda` when nsys is on the PATH; then a short PyTorch script
#    (samples/torch/two_streams_no_wait.py) plain and captured into a fresh directory, process start to exit.
#    Lines in $OUT/jobs/overhead.txt.
# Needs .gpu/ (benches/gpu_env.sh). Every run under STEP_TIMEOUT seconds (exit 124: it hung).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
st=$repo/.gpu/bin/streamtrace
out=$OUT/jobs
mkdir -p "$out"
limit=${STEP_TIMEOUT:-300}
run() { timeout "$limit" "$@"; }
capture() { # NAME FLAGS... -- PROGRAM...
  local name=$1; shift
  local dir=/tmp/jobs-$name
  rm -rf "$dir"
  run "$st" capture -o "$dir" "$@" > "$out/$name.out" 2> "$out/$name.log"
  echo "$name: exit $?" | tee -a "$out/summary.txt"
  grep -h GROUND_TRUTH "$out/$name.out" | tee -a "$out/summary.txt"
  for trace in "$dir"/trace.*.json; do
    [ -f "$trace" ] || continue
    cp "$trace" "$out/$name.json"
    run "$st" analyze "$out/$name.json" > "$out/$name.report.txt"
    run "$st" analyze "$out/$name.json" --format json > "$out/$name.report.json"
    grep -E "^== |^SUMMARY|^JOB SUMMARY|data race" "$out/$name.report.txt" | sed "s/^/  /" | tee -a "$out/summary.txt"
    grep -c '"range_begin"' "$out/$name.json" | sed 's/^/  range_begin records: /' | tee -a "$out/summary.txt"
  done
}
: > "$out/summary.txt"
capture profiler_whole -- python3 samples/torch/capture_range_profiler.py
capture profiler_range --capture-range=cudaProfilerApi -- python3 samples/torch/capture_range_profiler.py
capture profiler_time --delay 0 --duration 600 -- python3 samples/torch/capture_range_profiler.py
capture nvtx_torch_whole -- python3 samples/torch/capture_range_nvtx.py
capture nvtx_torch_repeat --capture-range=nvtx --nvtx-capture=step --capture-range-end=repeat -- python3 samples/torch/capture_range_nvtx.py
build=$(mktemp -d)
if nvcc -g -lineinfo -O2 -arch=sm_90 -std=c++17 -o "$build/nvtx_range_push" samples/ranges/nvtx_range_push.cu -ldl 2> "$out/nvcc.log"; then
  capture nvtx_native_whole -- "$build/nvtx_range_push"
  capture nvtx_native_range --capture-range=nvtx --nvtx-capture=step -- "$build/nvtx_range_push"
else
  echo "nvtx_range_push.cu did not build: $(head -3 "$out/nvcc.log")" | tee -a "$out/summary.txt"
fi

# 2. Overhead, interleaved.
over=$out/overhead.txt
: > "$over"
echo "clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null); $(nproc) cpus" >> "$over"
# The observer's cache is built once, before anything is timed.
run "$st" capture --no-analyze -o /tmp/jobs-warm -- python3 samples/torch/two_streams_no_wait.py > /dev/null 2>&1
for round in $(seq 1 "${ROUNDS:-3}"); do
  run python3 benches/torch_train_loop.py 2>&1 | sed "s/^/round $round plain   /" >> "$over"
  run "$st" capture --no-analyze -o /tmp/jobs-loop -- python3 benches/torch_train_loop.py 2>/dev/null | sed "s/^/round $round capture /" >> "$over"
  if command -v nsys > /dev/null; then
    run nsys profile -t cuda -o /tmp/jobs-nsys-$round -f true python3 benches/torch_train_loop.py 2>/dev/null | grep -i "train loop" | sed "s/^/round $round nsys    /" >> "$over"
  fi
  echo "round $round short script plain:   $(wall python3 samples/torch/two_streams_no_wait.py)" >> "$over"
  fresh=$(mktemp -d)
  echo "round $round short script capture: $(wall "$st" capture -o "$fresh/trace" -- python3 samples/torch/two_streams_no_wait.py) (fresh directory)" >> "$over"
done
cat "$over"
