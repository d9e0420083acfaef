#!/usr/bin/env bash
# On the GPU machine, in one call: host synchronization between threads (issue 22 item 3).
#  1. Builds the threads_fill_* samples (and threads_event_handover) with nvcc through samples/cuda/run_all.sh and
#     captures every variant; each trace's verdict, host order, categories and host_release/host_acquire counts.
#  2. Captures the unsynchronized sample REPEAT more times (default 5): which category its race lands in depends
#     on how the threads happened to run; it must be a race every time.
#  3. The same samples captured with --no-host-sync (the timestamp order, as before): the `apart` variant's race
#     is missed there, which is what the interposers are for.
#  4. Re-captures the committed multi-threaded samples (cuda threads_event_handover, torch threads_queue_handover,
#     whose threads hand over through Python's queue and the GIL) and compares their verdicts with the committed
#     traces'.
#  5. Times the training loop (benches/torch_train_loop.py) and its threaded twin (benches/torch_threads_loop.py)
#     plain, captured with --no-host-sync and captured with the interposers, in ROUNDS interleaved rounds
#     (default 4), and a shell started 200 times with and without the library preloaded (a process without CUDA).
# Every run is under `timeout` (LIMIT seconds, default 120): a hang (a deadlock in the interposers) shows as exit
# 124 in the summary instead of taking the whole call. The whole script takes some 5-7 minutes.
# Results: $OUT/host_sync.txt (everything said below), $OUT/captures.tar.gz (cuda/NAME.json|log as run_all.sh
# leaves them, for samples/capture/cuda/, and the other traces).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
st=$repo/.gpu/bin/streamtrace
lib=$repo/.gpu/bin/libstreamtrace_capture.so
work=$(mktemp -d)
mkdir -p "$work/cuda" "$work/repeat" "$work/no_host_sync" "$work/torch" "$work/loops"
summary="$OUT/host_sync.txt"
limit=${LIMIT:-120}
: > "$summary"
say() { echo "$@" | tee -a "$summary"; }

# One line per trace: exit status, verdict, host order, the two race lists, and the host sync records it holds.
describe() {
  local trace=$1 label=$2 code report
  report=$(mktemp)
  "$st" analyze "$trace" --format json > "$report" 2> "$report.err"
  code=$?
  python3 - "$trace" "$report" "$code" "$label" <<'PY' | tee -a "$summary"
import json, re, sys
trace, report, code, label = sys.argv[1:]
with open(trace) as f:
    header = json.loads(f.readline())
    text = f.read()
releases, acquires = (len(re.findall(r'"type"\s*:\s*"%s"' % kind, text)) for kind in ("host_release", "host_acquire"))
try:
    r = json.load(open(report))
except Exception as e:
    print(f"{label}: exit {code}, no report ({e})")
    sys.exit()
def races(key):
    return sorted("%s %s -> %s x%d" % (x["kind"], x["earlier"]["site"]["name"][:24], x["later"]["site"]["name"][:24], x["count"]) for x in r[key])
stats = r["stats"]
print(f"{label}: exit {code} verdict {r['verdict']} host_order {r['host_order']} header host_sync {header.get('host_sync', False)}; "
      f"races {races('races')}; timing only {races('timing_only_races')}; host_release {releases} host_acquire {acquires} "
      f"(applied {stats['host_releases']}/{stats['host_acquires']}, acquires of nothing {stats['host_acquires_of_nothing']}); "
      f"threads {stats['threads']}")
PY
  rm -f "$report" "$report.err"
}

say "== 1. the samples, captured (samples/cuda/run_all.sh)"
CUDA="threads_fill_no_sync threads_fill_mutex_handover threads_fill_atomic_handover threads_event_handover" \
  bash samples/cuda/run_all.sh "$work/cuda" 2>&1 | tee -a "$summary"
for trace in "$work"/cuda/*.json; do describe "$trace" "$(basename "$trace" .json)"; done
say "   expected: threads_fill_no_sync a race (plain, or ordered only by timing if the threads did not overlap);"
say "   threads_fill_no_sync-apart ordered only by timing (exit 3); threads_fill_mutex_handover clean with host_release and"
say "   host_acquire records; threads_fill_atomic_handover clean or ordered only by timing, never a plain race;"
say "   threads_event_handover clean. Every header host_sync true."

say "== 2. the unsynchronized sample, ${REPEAT:-5} more runs"
build=$(mktemp -d)
for name in threads_fill_no_sync threads_fill_mutex_handover threads_fill_atomic_handover; do
  nvcc -g -lineinfo -O2 -arch=sm_90 -std=c++17 -o "$build/$name" "samples/cuda/$name.cu" -lpthread
done

for run in $(seq 1 "${REPEAT:-5}"); do
  timeout "$limit" "$st" capture --no-analyze -o "$work/repeat/t$run" -- "$build/threads_fill_no_sync" > "$work/repeat/run$run.log" 2>&1
  cp "$work"/repeat/t$run/trace.*.json "$work/repeat/run$run.json"
  describe "$work/repeat/run$run.json" "threads_fill_no_sync run $run"
done

say "== 3. the same with --no-host-sync (no interposers: the timestamp order)"
for args in "threads_fill_no_sync" "threads_fill_no_sync apart" "threads_fill_mutex_handover" "threads_fill_atomic_handover"; do
  set -- $args
  label=$1${2:+-$2}
  timeout "$limit" "$st" capture --no-host-sync --no-analyze -o "$work/no_host_sync/t-$label" -- "$build/$1" ${2:-} > "$work/no_host_sync/$label.log" 2>&1
  cp "$work"/no_host_sync/t-$label/trace.*.json "$work/no_host_sync/$label.json"
  describe "$work/no_host_sync/$label.json" "$label --no-host-sync"
done
say "   expected: header host_sync false, host order global, no host records; the apart variant clean (the race missed)."

say "== 4. committed multi-threaded samples, re-captured: verdicts beside the committed traces'"
describe samples/capture/cuda/threads_event_handover.json "committed cuda threads_event_handover"
for py in threads_queue_handover two_streams_no_wait host_read_too_early; do
  timeout "$limit" "$st" capture --no-analyze -o "$work/torch/t-$py" -- python3 "samples/torch/$py.py" > "$work/torch/$py.log" 2>&1
  cp "$work"/torch/t-$py/trace.*.json "$work/torch/$py.json"
  describe "$work/torch/$py.json" "torch $py, captured now"
  describe "samples/capture/torch-t2/$py.json" "torch $py, committed"
done
say "   expected: the same races and verdicts now as committed; threads_queue_handover holds host records (the GIL and"
say "   the queue's locks) and stays clean."

say "== 5. overhead: the training loops, ${ROUNDS:-4} interleaved rounds"
for round in $(seq 1 "${ROUNDS:-4}"); do
  for loop in torch_train_loop torch_threads_loop; do
    timeout "$limit" python3 "benches/$loop.py" | sed "s/^/plain          $loop: /" | tee -a "$work/loops/times.txt"
    timeout "$limit" "$st" capture --no-host-sync --no-analyze -o "$work/loops/n-$loop" -- python3 "benches/$loop.py" 2>/dev/null \
      | sed "s/^/no-host-sync   $loop: /" | tee -a "$work/loops/times.txt"
    timeout "$limit" "$st" capture --no-analyze -o "$work/loops/h-$loop" -- python3 "benches/$loop.py" 2>/dev/null \
      | sed "s/^/host-sync      $loop: /" | tee -a "$work/loops/times.txt"
  done
done
python3 - "$work/loops/times.txt" <<'PY' | tee -a "$summary"
import re, statistics, sys
times = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\S+)\s+(\S+): .* in ([0-9.]+) s", line)
    if m:
        times.setdefault((m.group(2), m.group(1)), []).append(float(m.group(3)))
for (loop, variant), t in sorted(times.items()):
    plain = statistics.median(times.get((loop, "plain"), t))
    print(f"{loop:20s} {variant:14s} median {statistics.median(t):.3f} s over {len(t)} rounds ({statistics.median(t) / plain:.3f}x plain); all {t}")
PY
for loop in torch_train_loop torch_threads_loop; do
  for variant in n h; do
    trace=$(ls "$work"/loops/$variant-$loop/trace.*.json | head -1)
    describe "$trace" "$loop ($variant: n = --no-host-sync, h = interposers)"
    "$st" analyze "$trace" | grep -E "Capture cost|Host order" | tee -a "$summary"
  done
done
say "   look for: host-sync within a few percent of no-host-sync on both loops (the GIL and the allocator's mutex are"
say "   interposed on every op); the same races and verdict with and without; the threaded loop's host records."

say "== a process without CUDA: sh -c true, 200 times"
for preload in "" "$lib"; do
  start=$(date +%s.%N)
  for i in $(seq 200); do LD_PRELOAD=$preload timeout 10 sh -c true; done
  say "LD_PRELOAD=${preload:-none}: $(python3 -c "print(f'{($(date +%s.%N) - $start) / 200 * 1e3:.2f} ms a run')")"
done

tar -czf "$OUT/captures.tar.gz" -C "$work" cuda repeat no_host_sync torch
say "== done: $summary, $OUT/captures.tar.gz"
