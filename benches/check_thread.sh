#!/usr/bin/env bash
# The shadow check on a thread of its own (`--check-thread on`) against the check on the engine's thread (`off`), by
# the cores the analysis may use (taskset), interleaved, on the 10 M-operation synthetic trace of benches/analyze.sh.
# Figures go to docs/performance.md by hand, with the machine they were measured on.
#
#   benches/check_thread.sh [ROUNDS] [CORE SETS...]    defaults: 3 rounds; 0-1 0-2 0-3 (cores as taskset takes them)
#
# Needs: a release build (cargo build --release), taskset. The trace is generated once into TRACE (default: a fresh
# temporary folder) and converted to the binary encoding. The reports of both settings are compared at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
shift || true
core_sets=("$@")
[ ${#core_sets[@]} -gt 0 ] || core_sets=(0-1 0-2 0-3)
bin=target/release/streamtrace
[ -x "$bin" ] || cargo build --release
dir=$(mktemp -d)
trace=${TRACE:-$dir/synth.stbin}
if [ ! -e "$trace" ]; then
  "$bin" synth -o "$dir/synth.json" --ops 10000000 --streams 16 --ranges 100000 >/dev/null
  "$bin" convert "$dir/synth.json" "$trace" >/dev/null
  rm -f "$dir/synth.json"
fi
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
for round in $(seq "$rounds"); do
  for cores in "${core_sets[@]}"; do
    for mode in off on; do
      # Exit status 1 means findings (the synthetic trace races on purpose).
      /usr/bin/time -f "cores=$cores $mode round=$round: wall %e s, user %U s, max RSS %M kB" \
        taskset -c "$cores" "$bin" analyze "$trace" --check-thread "$mode" -o "$dir/report-$mode.txt" || [ $? -eq 1 ]
    done
  done
done
cmp "$dir/report-off.txt" "$dir/report-on.txt" && echo "the reports of both settings are the same"
rm -rf "$dir"
