#!/usr/bin/env bash
# On the GPU machine: online analysis (docs/capture.md) against capture-then-analyze. Captures
# benches/torch_train_loop.py and samples/torch/two_streams_no_wait.py both ways: online with --no-trace (the
# report comes from the stream; no trace file may appear) and with --no-analyze then `streamtrace analyze` of
# the files, and diffs their text reports (without the traces' names and the capture-cost line), and the wall
# time of each run. Results: $OUT/online.txt (one line per program: SAME or DIFFERENT, the times, whether a file
# was written under --no-trace), the logs and reports as $OUT/online.tar.gz. Needs the binary and library in
# .gpu/ (benches/gpu_env.sh).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
bin=$repo/.gpu/bin
OUT=${OUT:-$(mktemp -d)}
work=$(mktemp -d)
summary=$OUT/online.txt
: > "$summary"
for program in benches/torch_train_loop.py samples/torch/two_streams_no_wait.py; do
  name=$(basename "$program" .py)
  dir=$work/$name; mkdir -p "$dir"
  # Online, no trace file.
  start=$(date +%s.%N)
  timeout 600 "$bin/streamtrace" capture --no-trace -o "$dir/online" -- python3 "$repo/$program" > "$dir/online.log" 2>&1
  online_status=$?
  online_s=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
  files_written=$(ls "$dir/online"/trace.*.json 2>/dev/null | wc -l)
  # Capture, then analyze the files.
  start=$(date +%s.%N)
  timeout 600 "$bin/streamtrace" capture --no-analyze -o "$dir/offline" -- python3 "$repo/$program" > "$dir/offline-capture.log" 2>&1
  capture_s=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
  start=$(date +%s.%N)
  # From the folder the capture ran in, so that source paths are shown as the online report shows them.
  "$bin/streamtrace" analyze "$dir/offline" > "$dir/offline.log" 2>&1
  offline_status=$?
  analyze_s=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
  captured_report_words "$dir/online.log" > "$dir/online.findings"
  normalized_report "$dir/offline.log" | report_words > "$dir/offline.findings"
  if diff "$dir/offline.findings" "$dir/online.findings" > "$dir/findings.diff"; then verdict=SAME; else verdict=DIFFERENT; fi
  echo "$name: $verdict findings; online (--no-trace) ${online_s}s status $online_status, trace files written $files_written (must be 0); capture ${capture_s}s + analyze ${analyze_s}s status $offline_status; $(grep -m1 -o 'SUMMARY.*' "$dir/online.log")" | tee -a "$summary"
  grep -E "streamtrace: (cannot reach|the analyzer fell|the online analyzer)" "$dir/online.log" | sed "s/^/  $name: /" | tee -a "$summary"
done
tar -czf "$OUT/online.tar.gz" -C "$work" .
