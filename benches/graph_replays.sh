#!/usr/bin/env bash
# The graph-replay benchmark of `streamtrace analyze` (issue 12): a graph of a few thousand nodes launched tens of
# thousands of times, as a decode loop does, and a graph whose branches write interleaved strided views of one block
# (every pair of nodes an overlap question, none a race). Traces come from benches/graph_replays.py and
# benches/graph_views.py; each case runs RUNS times
# (default 3) and prints wall time and peak RSS. Figures go to docs/performance.md by hand.
#
#   benches/graph_replays.sh        BIN names the binary (default target/release/streamtrace)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BIN:-target/release/streamtrace}
runs=${RUNS:-3}
dir=$(mktemp -d)
[ -x "$bin" ] || cargo build --release
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem:/{print $2}') GiB; binary $bin"
for case in "2000 20000" "2000 20000 --pointers" "4000 50000" "200 1000"; do
  set -- $case
  trace="$dir/graph_$1_$2${3:-}.json"
  python3 benches/graph_replays.py "$trace" "$@"
  for _ in $(seq "$runs"); do
    rc=0
    /usr/bin/time -o "$dir/time.txt" -f "%e s, max RSS %M kB" "$bin" analyze "$trace" -o /dev/null 2>/dev/null || rc=$?
    [ "$rc" -le 1 ] || { echo "$case: failed with status $rc"; exit 1; }
    echo "nodes $1, replays $2 ${3:-}: $(tail -1 "$dir/time.txt") ($(du -h "$trace" | cut -f1) trace)"
  done
done
python3 benches/graph_views.py "$dir/graph_views.json" 16 16 2000
for _ in $(seq "$runs"); do
  /usr/bin/time -o "$dir/time.txt" -f "%e s, max RSS %M kB" "$bin" analyze "$dir/graph_views.json" -o /dev/null 2>/dev/null || true
  echo "strided views, 16 branches of 16 nodes, replays 2000: $(tail -1 "$dir/time.txt")"
done
