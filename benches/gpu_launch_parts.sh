#!/usr/bin/env bash
# On the GPU machine: where the launch benchmark's capture overhead goes. Interleaved rounds (default 9) of
# benches/capture_launches.cu plain, with CUPTI callbacks that record nothing (STREAMTRACE_CALLBACK_NOOP=1),
# recording everything but writing nothing (STREAMTRACE_DISCARD=1), and full capture. With PIN=CPUS every run
# is confined to those CPUs (taskset). One line per run: "<variant> launches 100000 in <s> s".
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
st=.gpu/bin/streamtrace
pin=${PIN:+taskset -c $PIN}
nvcc -O2 -arch=sm_90 -o /tmp/launches benches/capture_launches.cu
for round in $(seq 1 "${1:-9}"); do
  $pin /tmp/launches 100000 | sed "s/^/plain    /"
  STREAMTRACE_CALLBACK_NOOP=1 $pin $st capture --no-analyze -o /tmp/o1 -- /tmp/launches 100000 | sed "s/^/noop     /"
  STREAMTRACE_DISCARD=1 $pin $st capture --no-analyze -o /tmp/o2 -- /tmp/launches 100000 | sed "s/^/discard  /"
  $pin $st capture --no-analyze -o /tmp/o3 -- /tmp/launches 100000 | sed "s/^/captured /"
done
$st analyze /tmp/o3/trace.*.json | grep -E "Capture cost|SUMMARY"
