#!/usr/bin/env bash
# Growth benchmarks of `streamtrace analyze`: inputs whose cost once grew faster than their size (issue 16).
# Traces come from benches/growth_traces.py; each case runs RUNS times (default 3) and prints every run's wall
# time and peak RSS, so that the spread shows (a run past LIMIT seconds, default 120, is stopped and said so).
# Figures go to docs/performance.md by hand.
#
#   benches/growth.sh [streams|active|ranges|nodes|inplace|nesting|lines|all]        BIN names the binary (default target/release/streamtrace)
#
#   streams: 100 active streams among 100, 1,000, 8,000 and 100,000 declared ones (200,000 operations), and the
#            same with the later half of the declared streams created by four threads while work runs.
#   active:  1,000, 2,000, 4,000 and 8,000 streams that each run one kernel, unordered with each other (#23);
#            then the same with every kernel also reading one shared block.
#   ranges:  one kernel with 50,000, 100,000, 200,000 and 400,000 ranges.
#   nodes:   one graph of 32k, 64k, 128k and 256k chained nodes (issue 27: once quadratic, 256k aborted).
#   inplace: one graph of 4k, 16k and 64k chained nodes all updating one buffer, and stream captures of 2k, 8k and
#            32k fork-join steps of two streams (once quadratic in the overlapping node pairs: 16k nodes 27.6 s).
#   nesting: child graphs nested 64, 128 and 256 levels deep (one child per level; the bound is 256), and 12, 14,
#            16 and 18 deep with two per level (2^depth leaves; once exponential in time).
#   lines:   250k, 500k, 1M and 2M kernels each at a source line of its own (once 0.3-0.45 KB an operation).
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
bin=${BIN:-target/release/streamtrace}
runs=${RUNS:-3}
limit=${LIMIT:-120}
dir=${GROWTH_DIR:-$(mktemp -d)}
[ -x "$bin" ] || cargo build --release
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem:/{print $2}') GiB; binary $bin"

time_case() { # NAME TRACE: RUNS runs of analyze, exit 1 (findings) accepted
  local name=$1 trace=$2
  for _ in $(seq "$runs"); do
    rc=0
    /usr/bin/time -o "$dir/time.txt" -f "%e s, max RSS %M kB" timeout "$limit" "$bin" analyze "$trace" -o /dev/null \
      2>/dev/null || rc=$?
    case $rc in
      0|1) echo "$name: $(tail -1 "$dir/time.txt")" ;;  # 1: findings (these traces race on purpose)
      124) echo "$name: did not finish in $limit s" ;;
      *) echo "$name: failed with status $rc"; exit 1 ;;
    esac
  done
}

if [ "$what" = streams ] || [ "$what" = all ]; then
  for declared in 100 1000 8000 100000; do
    python3 benches/growth_traces.py streams "$dir/streams_$declared.json" "$declared" 100 200000
    time_case "declared $declared, active 100" "$dir/streams_$declared.json"
    [ "$declared" -gt 100 ] || continue  # half of 100 declared would leave only 50 to be active
    python3 benches/growth_traces.py streams "$dir/late_$declared.json" "$declared" 100 200000 --threads 4
    time_case "declared $declared (half created during the run, 4 threads), active 100" "$dir/late_$declared.json"
  done
fi
if [ "$what" = active ] || [ "$what" = all ]; then
  for streams in 1000 2000 4000 8000; do
    python3 benches/growth_traces.py active "$dir/active_$streams.json" "$streams"
    time_case "$streams active streams, one kernel each" "$dir/active_$streams.json"
  done
  for streams in 1000 2000 4000 8000; do
    python3 benches/growth_traces.py active "$dir/shared_$streams.json" "$streams" --shared
    time_case "$streams active streams, one kernel each, all reading one block" "$dir/shared_$streams.json"
  done
fi
if [ "$what" = ranges ] || [ "$what" = all ]; then
  for ranges in 50000 100000 200000 400000; do
    python3 benches/growth_traces.py ranges "$dir/ranges_$ranges.json" "$ranges"
    time_case "one kernel, $ranges ranges" "$dir/ranges_$ranges.json"
  done
fi
if [ "$what" = nodes ] || [ "$what" = all ]; then
  for nodes in 32768 65536 131072 262144; do
    python3 benches/growth_traces.py nodes "$dir/nodes_$nodes.json" "$nodes"
    time_case "one graph, $nodes chained nodes" "$dir/nodes_$nodes.json"
  done
fi
if [ "$what" = inplace ] || [ "$what" = all ]; then
  for nodes in 4096 16384 65536; do
    python3 benches/growth_traces.py inplace "$dir/inplace_$nodes.json" "$nodes"
    time_case "one graph, $nodes chained in-place updates of one buffer" "$dir/inplace_$nodes.json"
  done
  for steps in 2000 8000 32000; do
    python3 benches/growth_traces.py forkjoin "$dir/forkjoin_$steps.json" "$steps"
    time_case "a captured graph of $steps fork-join steps" "$dir/forkjoin_$steps.json"
  done
fi
if [ "$what" = nesting ] || [ "$what" = all ]; then
  for depth in 64 128 256; do
    python3 benches/growth_traces.py nesting "$dir/nesting_$depth.json" "$depth" 1
    time_case "child graphs $depth deep, one per level" "$dir/nesting_$depth.json"
  done
  for depth in 12 14 16 18; do
    python3 benches/growth_traces.py nesting "$dir/fan_$depth.json" "$depth" 2
    time_case "child graphs $depth deep, two per level ($((1 << depth)) leaves)" "$dir/fan_$depth.json"
  done
fi
if [ "$what" = lines ] || [ "$what" = all ]; then
  for ops in 250000 500000 1000000 2000000; do
    python3 benches/growth_traces.py lines "$dir/lines_$ops.json" "$ops"
    time_case "$ops kernels, a source line each" "$dir/lines_$ops.json"
  done
fi
