#!/usr/bin/env bash
# On the GPU machine: the steady-state overhead of two builds side by side (#24 item 4). ROUNDS (default 4)
# interleaved rounds of benches/torch_train_loop.py (300 steps, the loop's own wall time): plain; captured by the
# carried build (.gpu/streamtrace.gz + .gpu/libstreamtrace_capture.so); the same with --no-host-sync; captured by
# the build in OLD (default .gpu/old: libstreamtrace_capture.so, with streamtrace.gz when the binary differs too;
# say a build of main before the change); and `nsys profile -t cuda` when nsys is on the PATH. Then one capture of the loop with the cost split
# (STREAMTRACE_COST_DETAIL=1: the callback by driver call, the interposers' counts, the observer's parts), and
# SHORT_ROUNDS (default 3) rounds of a short PyTorch script plain and captured into a fresh directory, process
# start to exit; and LAUNCH_ROUNDS (default 5) rounds of the launch benchmark (benches/capture_launches.cu, 100,000
# launches) plain, by the new build and by the old one. Lines in $OUT/overhead_ab.txt. Needs .gpu/ (benches/gpu_env.sh).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
st=$repo/.gpu/bin/streamtrace
old=${OLD:-$repo/.gpu/old}
old_st=()
if [ -f "$old/streamtrace.gz" ]; then
  mkdir -p "$old/bin" && gunzip -c "$old/streamtrace.gz" > "$old/bin/streamtrace" && chmod +x "$old/bin/streamtrace"
  cp "$old/libstreamtrace_capture.so" "$old/bin/"
  old_st=("$old/bin/streamtrace")
elif [ -f "$old/libstreamtrace_capture.so" ]; then
  old_st=(env "STREAMTRACE_CAPTURE_LIB=$old/libstreamtrace_capture.so" "$st")
fi
out=$OUT/overhead_ab.txt
mkdir -p "$OUT"
export STEP_TIMEOUT=${STEP_TIMEOUT:-120}
limit=$STEP_TIMEOUT
loop() { # LABEL COMMAND...: one run of the loop, its line labelled
  local label=$1; shift
  timeout "$limit" "$@" 2>/dev/null | grep "train loop" | sed "s/^/$label /"
}
{
  echo "clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null); $(nproc) cpus; perf: $(command -v perf || echo none)"
  # Each build's observer is compiled once, before anything is timed.
  echo "warm new: $(wall "$st" capture --no-analyze -o /tmp/ab-warm-new -- python3 samples/torch/two_streams_no_wait.py)"
  [ ${#old_st[@]} -gt 0 ] && echo "warm old: $(wall "${old_st[@]}" capture --no-analyze -o /tmp/ab-warm-old -- python3 samples/torch/two_streams_no_wait.py)"
  for round in $(seq 1 "${ROUNDS:-4}"); do
    loop "round $round plain      " python3 benches/torch_train_loop.py
    loop "round $round new        " "$st" capture --no-analyze -o /tmp/ab-new -- python3 benches/torch_train_loop.py
    loop "round $round new-nohsync" "$st" capture --no-analyze --no-host-sync -o /tmp/ab-nohs -- python3 benches/torch_train_loop.py
    [ ${#old_st[@]} -gt 0 ] && loop "round $round old        " "${old_st[@]}" capture --no-analyze -o /tmp/ab-old -- python3 benches/torch_train_loop.py
    command -v nsys > /dev/null && loop "round $round nsys       " nsys profile -t cuda -o /tmp/ab-nsys-$round -f true python3 benches/torch_train_loop.py
  done
  echo "cost split of one capture of the loop (new build):"
  STREAMTRACE_COST_DETAIL=1 timeout "$limit" "$st" capture --no-analyze -o /tmp/ab-detail -- python3 benches/torch_train_loop.py 2>&1 | grep -E "streamtrace:|train loop" | head -60
  for round in $(seq 1 "${SHORT_ROUNDS:-3}"); do
    echo "round $round short script plain:   $(wall python3 samples/torch/two_streams_no_wait.py)"
    fresh=$(mktemp -d)
    echo "round $round short script capture: $(wall "$st" capture -o "$fresh/trace" -- python3 samples/torch/two_streams_no_wait.py) (fresh directory, with analysis)"
  done
  if nvcc -O2 -arch=sm_90 -o /tmp/ab-launches benches/capture_launches.cu 2> /tmp/ab-nvcc.log; then
    for round in $(seq 1 "${LAUNCH_ROUNDS:-5}"); do
      /tmp/ab-launches 100000 | sed "s/^/round $round launches plain /"
      "$st" capture --no-analyze -o /tmp/ab-l-new -- /tmp/ab-launches 100000 | sed "s/^/round $round launches new   /"
      [ ${#old_st[@]} -gt 0 ] && "${old_st[@]}" capture --no-analyze -o /tmp/ab-l-old -- /tmp/ab-launches 100000 | sed "s/^/round $round launches old   /"
    done
  else
    echo "capture_launches.cu did not build: $(head -3 /tmp/ab-nvcc.log)"
  fi
} 2>&1 | tee "$out"
