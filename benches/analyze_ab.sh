#!/usr/bin/env bash
# Two builds of `streamtrace analyze` compared on the same synthetic traces, the way docs/performance.md's stops on
# 10 M operations measured each change:
#   1. instructions by thread (callgrind, deterministic to about 0.001% between runs) on a 1 M-operation trace:
#      the analysis thread (engine and report) and the reader's, which wall time on a shared 2-core machine is
#      too noisy to separate from a change of a few percent;
#   2. the text and JSON reports of both builds on that trace, byte for byte (a speed change changes no finding);
#   3. PAIRS interleaved runs of each build on the 10 M-operation binary trace, wall and user CPU, sorted.
#
#   benches/analyze_ab.sh BASE_BINARY NEW_BINARY [PAIRS]      PAIRS defaults to 8
#
# Traces are made once in TRACE_DIR (default /tmp/streamtrace-ab) by NEW_BINARY's `synth` and `convert`. Needs
# valgrind for step 1 (skipped, said so, without it).
set -euo pipefail
base=$(realpath "${1:?usage: analyze_ab.sh BASE_BINARY NEW_BINARY [PAIRS]}")
new=$(realpath "${2:?usage: analyze_ab.sh BASE_BINARY NEW_BINARY [PAIRS]}")
pairs=${3:-8}
dir=${TRACE_DIR:-/tmp/streamtrace-ab}
mkdir -p "$dir"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), L2 $(getconf LEVEL2_CACHE_SIZE 2>/dev/null || echo '?') bytes; load $(cut -d' ' -f1-3 /proc/loadavg)"
for ops in 1000000 10000000; do
  name=$dir/synth-$ops
  if [ ! -s "$name.stbin" ]; then
    "$new" synth -o "$name.json" --ops "$ops" --streams 16 --ranges 100000
    "$new" convert "$name.json" "$name.stbin"
  fi
done
small=$dir/synth-1000000.stbin
large=$dir/synth-10000000.stbin

# Exit status 1 means findings: the synthetic trace races on purpose.
analyze() { "$@" || [ $? -eq 1 ]; }

echo "== reports on $(basename "$small")"
for build in base new; do
  bin=${!build}
  analyze "$bin" analyze "$small" > "$dir/$build.txt"
  analyze "$bin" analyze "$small" --format json > "$dir/$build.json"
done
cmp "$dir/base.txt" "$dir/new.txt" && cmp "$dir/base.json" "$dir/new.json" && echo "text and JSON reports identical"

echo "== instructions by thread on $(basename "$small") (callgrind)"
if command -v valgrind > /dev/null; then
  for build in base new; do
    bin=${!build}
    rm -f "$dir/cg.$build".*
    analyze valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$dir/cg.$build.%p" \
      "$bin" analyze "$small" > /dev/null 2> "$dir/cg.$build.log"
    for part in "$dir/cg.$build".*-*; do
      # Thread 1 runs the analysis and the report; the others read and hand over.
      thread=${part##*-}
      total=$(awk '/^summary:|^totals:/{print $2; exit}' "$part")
      printf '%s thread %s: %s instructions\n' "$build" "$thread" "$total"
    done
  done
else
  echo "skipped: no valgrind"
fi

echo "== $pairs interleaved pairs on $(basename "$large"): wall and user seconds"
: > "$dir/pairs.txt"
for _ in $(seq "$pairs"); do
  for build in base new; do
    bin=${!build}
    /usr/bin/time -f "$build %e %U" -a -o "$dir/pairs.txt" "$bin" analyze "$large" > /dev/null || [ $? -eq 1 ]
  done
done
for build in base new; do
  walls=$(awk -v b="$build" '$1 == b {print $2}' "$dir/pairs.txt" | sort -n | xargs)
  users=$(awk -v b="$build" '$1 == b {print $3}' "$dir/pairs.txt" | sort -n | xargs)
  median=$(awk -v b="$build" '$1 == b {print $2}' "$dir/pairs.txt" | sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}')
  echo "$build wall: $walls (median $median); user: $users"
done
