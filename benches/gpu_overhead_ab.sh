#!/usr/bin/env bash
# On the GPU machine: the steady-state overhead of two builds side by side (#24 item 4). ROUNDS (default 4)
# interleaved rounds of benches/torch_train_loop.py (300 steps, the loop's own wall time): plain; captured by the
# carried build (.gpu/streamtrace.gz + .gpu/libstreamtrace_capture.so); the same with --no-host-sync; captured by
# the build in OLD (default .gpu/old: libstreamtrace_capture.so, with streamtrace.gz when the binary differs too;
# say a build of main before the change); the new build with its observer reading Python lines through CPython's
# API (STREAMTRACE_PYTHON_FRAMES_API=1; API=0 leaves it out); and `nsys profile -t cuda` when nsys is on the
# PATH. NOHSYNC=0 leaves out the --no-host-sync runs. A summary gives each one's median and its ratio to plain's,
# and says whether the target holds (#24: at most 1.1x of plain and below nsys). Then one capture of the loop with the cost split
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
: > "$out.rounds"
export STEP_TIMEOUT=${STEP_TIMEOUT:-120}
limit=$STEP_TIMEOUT
loop() { # LABEL COMMAND...: one run of the loop, its line labelled (also kept in $out.rounds for the summary)
  local label=$1; shift
  timeout "$limit" "$@" 2>/dev/null | grep "train loop" | sed "s/^/$label /" | tee -a "$out.rounds"
}
{
  echo "clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null); $(nproc) cpus; perf: $(command -v perf || echo none)"
  # Each build's observer is compiled once, before anything is timed.
  echo "warm new: $(wall "$st" capture --no-analyze -o /tmp/ab-warm-new -- python3 samples/torch/two_streams_no_wait.py)"
  [ ${#old_st[@]} -gt 0 ] && echo "warm old: $(wall "${old_st[@]}" capture --no-analyze -o /tmp/ab-warm-old -- python3 samples/torch/two_streams_no_wait.py)"
  for round in $(seq 1 "${ROUNDS:-4}"); do
    loop "round $round plain      " python3 benches/torch_train_loop.py
    loop "round $round new        " "$st" capture --no-analyze -o /tmp/ab-new -- python3 benches/torch_train_loop.py
    [ "${NOHSYNC:-1}" = 1 ] && loop "round $round new-nohsync" "$st" capture --no-analyze --no-host-sync -o /tmp/ab-nohs -- python3 benches/torch_train_loop.py
    # The new build with the observer reading Python lines through CPython's API under the GIL, as before
    # python_frames.h: what reading them from the frames saves.
    [ "${API:-1}" = 1 ] && STREAMTRACE_PYTHON_FRAMES_API=1 loop "round $round new-api    " "$st" capture --no-analyze -o /tmp/ab-api -- python3 benches/torch_train_loop.py
    [ ${#old_st[@]} -gt 0 ] && loop "round $round old        " "${old_st[@]}" capture --no-analyze -o /tmp/ab-old -- python3 benches/torch_train_loop.py
    command -v nsys > /dev/null && loop "round $round nsys       " nsys profile -t cuda -o /tmp/ab-nsys-$round -f true python3 benches/torch_train_loop.py
  done
  # Medians of the rounds and their ratios to plain's, and the target (#24: at most 1.1x of plain, below nsys).
  echo "summary (seconds for the loop, median of the rounds; ratio to plain's median):"
  awk '$1 == "round" && $4 == "train" { t[$3] = t[$3] " " $(NF-1) }
    END {
      for (k in t) {
        n = split(substr(t[k], 2), v, " ")
        for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { x = v[j]; v[j] = v[j - 1]; v[j - 1] = x }
        m[k] = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
      }
      for (k in m) printf "  %-12s %.3f  %.2fx  (%s)\n", k, m[k], m[k] / m["plain"], substr(t[k], 2)
      if ("new" in m) printf "  target: capture %.2fx of plain (at most 1.10x: %s), %s nsys (%.2fx)\n", m["new"] / m["plain"],
        m["new"] / m["plain"] <= 1.10 ? "met" : "not met", !("nsys" in m) ? "no" : m["new"] < m["nsys"] ? "below" : "not below",
        ("nsys" in m) ? m["nsys"] / m["plain"] : 0
    }' "$out.rounds"
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
