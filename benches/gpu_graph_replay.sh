#!/usr/bin/env bash
# On the GPU machine: the graph-replay loop (samples/cuda/graph_replay_loop.cu: NODES small kernels captured
# once, replayed REPLAYS times) plain and under `streamtrace capture`, ROUNDS rounds each (default 5), alternating.
# Prints each run's replay-loop seconds; the ratio of medians goes to docs/performance.md.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
rounds=${1:-5}
nodes=${NODES:-64}
replays=${REPLAYS:-20000}
build=$(mktemp -d)
nvcc -O2 -arch=sm_90 -std=c++17 -o "$build/loop" samples/cuda/graph_replay_loop.cu
for round in $(seq "$rounds"); do
  plain=$("$build/loop" "$nodes" "$replays" | sed -n 's/.*seconds=//p')
  captured=$(.gpu/bin/streamtrace capture -o "$build/trace" -- "$build/loop" "$nodes" "$replays" 2>&1 | sed -n 's/.*seconds=//p')
  echo "graph replay round $round: nodes $nodes, replays $replays: plain $plain s, captured $captured s"
done
