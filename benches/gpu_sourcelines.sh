#!/usr/bin/env bash
# On the GPU machine (issue 28 item 1): native source lines that survive the trip to another machine.
# 1. samples/cuda/two_streams_race.cu built with -g -lineinfo and captured; then its build folder is moved away
#    (the analyzing machine has no binary) and the trace analyzed: the report must name two_streams_race.cu:9 and
#    :10 in main for the two accesses, :7 and :8 for the two streams, :5 for the allocation, from the trace's
#    frame_line records alone, and say nothing of a missing binary.
# 2. The same trace without its frame_line records (as captures before them): the report says once that the
#    binary is not on this machine and shows module+offset; with --binary-dir pointing at the moved folder it
#    names the lines again.
# 3. What writing the lines costs at exit: the program's wall time plain and captured, ROUNDS rounds (default 5).
# 4. Every CUDA sample re-captured with its lines (samples/cuda/run_all.sh) into $OUT/cuda-lines/, to replace
#    samples/capture/cuda/ if the verdicts agree (each NAME.json with NAME.out/NAME.log).
# Output: $OUT/sourcelines/ (two_streams_race.json: the trace to commit as
# samples/capture/cuda-lines/two_streams_race.json; report.txt, report-nolines.txt, report-binary-dir.txt,
# checks.txt: one PASS/FAIL line per check; cost.txt), $OUT/cuda-lines/.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
st="timeout ${STEP_TIMEOUT:-300} $repo/.gpu/bin/streamtrace"  # every run under a time limit
: "${OUT:?set OUT to the folder for the results}"
out=$OUT/sourcelines
mkdir -p "$out" "$OUT/cuda-lines"
work=$(mktemp -d /tmp/gpu-sourcelines.XXXXXX)
build=$work/build
mkdir -p "$build"
# The source is copied into the work folder, as a checkout on the GPU machine would be elsewhere than here.
mkdir -p "$work/src" && cp samples/cuda/two_streams_race.cu samples/cuda/common.cuh "$work/src/"
nvcc -g -lineinfo -O2 -arch=sm_90 -std=c++17 -o "$build/two_streams_race" "$work/src/two_streams_race.cu" -lpthread
(cd "$build" && $st capture --no-analyze -o trace -- ./two_streams_race > "$out/program.out" 2> "$out/capture.log")
cp "$build"/trace/trace.*.json "$out/two_streams_race.json"
echo "frame_line records: $(grep -c '"frame_line"' "$out/two_streams_race.json")" > "$out/checks.txt"
mv "$build" "$work/moved"
$st analyze "$out/two_streams_race.json" > "$out/report.txt" 2>&1
grep -v '"frame_line"' "$out/two_streams_race.json" > "$work/nolines.json"
$st analyze "$work/nolines.json" > "$out/report-nolines.txt" 2>&1
$st analyze "$work/nolines.json" --binary-dir "$work/moved" > "$out/report-binary-dir.txt" 2>&1
check() {  # check FILE WHAT PATTERN [absent]
  if grep -qF -- "$3" "$1"; then found=1; else found=0; fi
  if [ "${4:-}" = absent ]; then found=$((1 - found)); fi
  if [ "$found" = 1 ]; then echo "PASS $2" >> "$out/checks.txt"; else echo "FAIL $2 ($3 in $(basename "$1"))" >> "$out/checks.txt"; fi
}
for line in 5 7 8 9 10; do
  check "$out/report.txt" "line $line named without the binary" "two_streams_race.cu:$line in main"
  check "$out/report-binary-dir.txt" "line $line named through --binary-dir" "two_streams_race.cu:$line in main"
done
check "$out/report.txt" "no missing-binary note when the trace has the lines" "not on this machine" absent
check "$out/report-nolines.txt" "a missing binary is said" "not on this machine"
check "$out/report-nolines.txt" "module+offset without the binary" "two_streams_race+0x"
rounds=${ROUNDS:-5}
mv "$work/moved" "$build"
for round in $(seq "$rounds"); do
  start=$(date +%s%N); "$build/two_streams_race" > /dev/null; plain=$(( ($(date +%s%N) - start) / 1000000 ))
  start=$(date +%s%N); (cd "$build" && $st capture --no-analyze -o "trace-$round" -- ./two_streams_race > /dev/null 2>&1)
  captured=$(( ($(date +%s%N) - start) / 1000000 ))
  echo "round $round: plain ${plain} ms, captured ${captured} ms" >> "$out/cost.txt"
done
bash samples/cuda/run_all.sh "$OUT/cuda-lines" > "$OUT/cuda-lines/run_all.txt" 2>&1
for trace in "$OUT"/cuda-lines/*.json; do
  echo "$(basename "$trace" .json): $($st analyze "$trace" 2>&1 | grep -o 'SUMMARY.*' | head -1)"
done > "$OUT/cuda-lines/summaries.txt"
cat "$out/checks.txt" "$out/cost.txt"
rm -rf "$work"
