#!/usr/bin/env bash
# On the GPU machine: where the training loop's capture cost goes, by part (#24 item 4). ROUNDS (default 3)
# interleaved rounds of benches/torch_train_loop.py at STEPS steps (default 3000: 300 spread between rounds by more
# than the capture adds), binary traces, the loop's own wall time: plain; plain under `python -S` (no site, so
# the capture's bootstrap cannot load: the baseline of the T1 runs); captured by the carried build; the same with
# --no-host-sync; tier T1 only (`python -S` under capture: no observer), with and without the interposers, and
# without them with CUPTI's callbacks taken but nothing recorded (STREAMTRACE_CALLBACK_NOOP); --no-call-sites;
# "floor", in every round: the mechanisms alone, CUPTI's callbacks and the observer's RecordFunction callbacks (with
# inputs and outputs) and allocator events taken but nothing recorded (STREAMTRACE_CALLBACK_NOOP and
# STREAMTRACE_OBSERVER_NOOP, --no-host-sync; the bootstrap's Python wrappers still run); the
# build in OLD (a directory holding an older libstreamtrace_capture.so), when given; and `nsys profile -t cuda`
# when nsys is on the PATH. Medians and their ratio to plain's, then one capture with the cost split
# (STREAMTRACE_COST_DETAIL=1: observer parts, driver calls, the interposers' bookkeeping by function).
# PARTS=0 leaves out the plainS/nohs/t1 runs (the build against OLD and nsys only). COMPILE=1 runs the loop's model
# through torch.compile, and adds a capture with Inductor's launches left at tier T1 (STREAMTRACE_TRITON_OPS=0:
# what recording each launch as an op costs). PIN, when set, prefixes every
# timed run (PIN="taskset -c 0-7": the same cores each time). Each run gives the loop's wall time and its steady
# pace (the median window of the loop, benches/torch_train_loop.py), which one slow second does not move. Lines in
# $OUT/loop_parts.txt.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
export STREAMTRACE_TRACE_FORMAT=binary STEPS=${STEPS:-3000}
st=$repo/.gpu/bin/streamtrace
set_loop_without_site
mkdir -p "$OUT"
out=$OUT/loop_parts.txt
rounds=$out.rounds
: > "$rounds"
pin=(${PIN:-})
loop() { # LABEL COMMAND...: one run of the loop, its wall line labelled LABEL and its steady line LABEL/steady
  local label=$1; shift
  timeout 240 "${pin[@]}" "$@" 2>/dev/null |
    awk -v r="$round" -v l="$label" '/^train loop/ { print "round", r, l, $0 } /^train steady/ { print "round", r, l "/steady", $0 }' |
    tee -a "$rounds"
}
{
  # The observer is compiled once, before anything is timed.
  "$st" capture --no-analyze -o /tmp/parts-warm -- python3 samples/torch/two_streams_no_wait.py > /dev/null 2>&1
  for round in $(seq 1 "${ROUNDS:-3}"); do
    loop plain python3 benches/torch_train_loop.py
    loop capture "$st" capture --no-analyze -o /tmp/parts-capture -- python3 benches/torch_train_loop.py
    loop floor env STREAMTRACE_CALLBACK_NOOP=1 STREAMTRACE_OBSERVER_NOOP=1 "$st" capture --no-analyze --no-host-sync -o /tmp/parts-floor -- python3 benches/torch_train_loop.py
    if [ "${COMPILE:-}" = 1 ]; then
      loop inductorT1 env STREAMTRACE_TRITON_OPS=0 "$st" capture --no-analyze -o /tmp/parts-inductor-t1 -- python3 benches/torch_train_loop.py
    fi
    if [ -n "${OLD:-}" ]; then
      loop old env "STREAMTRACE_CAPTURE_LIB=$OLD/libstreamtrace_capture.so" "$st" capture --no-analyze -o /tmp/parts-old -- python3 benches/torch_train_loop.py
    fi
    if [ "${PARTS:-1}" = 1 ]; then
      loop plainS "${no_site[@]}"
      loop nohs "$st" capture --no-analyze --no-host-sync -o /tmp/parts-nohs -- python3 benches/torch_train_loop.py
      loop t1 "$st" capture --no-analyze -o /tmp/parts-t1 -- "${no_site[@]}"
      loop t1nohs "$st" capture --no-analyze --no-host-sync -o /tmp/parts-t1n -- "${no_site[@]}"
      loop t1noop env STREAMTRACE_CALLBACK_NOOP=1 "$st" capture --no-analyze --no-host-sync -o /tmp/parts-t1o -- "${no_site[@]}"
      loop nocs "$st" capture --no-analyze --no-call-sites -o /tmp/parts-nocs -- python3 benches/torch_train_loop.py
    fi
    command -v nsys > /dev/null && loop nsys nsys profile -t cuda -o /tmp/parts-nsys-$round -f true python3 benches/torch_train_loop.py
  done
  echo "medians (seconds for the loop, and its steady pace: LABEL/steady; ratio to plain's; the rounds):"
  awk '$1 == "round" { t[$3] = t[$3] " " $(NF-1) }
    END {
      for (k in t) {
        n = split(substr(t[k], 2), v, " ")
        for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { x = v[j]; v[j] = v[j - 1]; v[j - 1] = x }
        m[k] = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
      }
      for (k in m) printf "  %-15s %.3f  %.2fx  (%s)\n", k, m[k], m[k] / m[k ~ /steady/ ? "plain/steady" : "plain"], substr(t[k], 2)
    }' "$rounds" | sort
  echo "cost split of one capture of the loop:"
  STREAMTRACE_COST_DETAIL=1 timeout 240 "$st" capture --no-analyze -o /tmp/parts-detail -- python3 benches/torch_train_loop.py 2>&1 |
    grep -E "streamtrace:|train loop" | grep -v "^streamtrace:   cu[A-Z]"
} 2>&1 | tee "$out"
