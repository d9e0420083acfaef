#!/usr/bin/env bash
# Benchmark of `streamtrace analyze` on a synthetic trace, in JSON and in the binary encoding (the same records),
# beside PyTorch's CUDA sanitizer core replaying the same trace. Figures go to docs/performance.md by hand, with
# the machine they were measured on.
#
#   benches/analyze.sh [OPS] [CSAN_OPS]      defaults: 10000000 operations, 400000 replayed through CSAN
#
# ROUNDS=N (default 1) runs the binary trace's analysis and CSAN's replay N times, one after the other in each round,
# and prints each round's ratio and the medians: on a shared machine one run of each moves the ratio by a third.
# TRACE=PATH.json names the trace; one that exists (with its .stbin beside it) is used as it is.
# BASE=BINARY adds to each round, in alternating order, the JSON trace's analysis by this build and by BASE (an
# older build: issue 23 measures against the build it was filed on), so that one run gives each target of its
# own: the binary trace's operations/s by process wall time, the JSON speed-up over BASE, and the ratio to CSAN.
# Needs: a release build (cargo build --release); for the CSAN side, python3 with torch importable (the CPU import
# suffices), or TORCH_PYTHON naming such an interpreter. Without torch the CSAN side is skipped, said so.
set -euo pipefail
cd "$(dirname "$0")/.."
ops=${1:-10000000}
csan_ops=${2:-400000}
bin=target/release/streamtrace
trace=${TRACE:-$(mktemp -d)/synth.json}
[ -x "$bin" ] || cargo build --release
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem:/{print $2}') GiB"
binary=${trace%.json}.stbin
if [ ! -s "$trace" ] || [ ! -s "$binary" ]; then
  echo "generating $ops operations over 16 streams, 100000 live ranges -> $trace"
  "$bin" synth -o "$trace" --ops "$ops" --streams 16 --ranges 100000
  "$bin" convert "$trace" "$binary"
fi
ls -l "$trace" "$binary"
# Exit status 1 means findings (the synthetic trace races on purpose).
for input in "$trace" "$binary"; do
  echo "analyze $(basename "$input"):"
  /usr/bin/time -f "wall %e s, max RSS %M kB" "$bin" analyze "$input" --timing -o /dev/null || [ $? -eq 1 ]
done
python=${TORCH_PYTHON:-python3}
if ! "$python" -c 'import torch.cuda._sanitizer' 2>/dev/null; then
  echo "csan: skipped ($python cannot import torch.cuda._sanitizer)"
  exit 0
fi
rounds=${ROUNDS:-1}
base=${BASE:-}
# Milliseconds a command takes, process start to exit (its output dropped; exit status 1 means findings).
wall_ms() {
  local t0 t1
  t0=$(date +%s%N)
  "$@" > /dev/null 2>&1 || true
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000000))
}
ours=() theirs=() walls=() json_ours=() json_base=()
for round in $(seq "$rounds"); do
  # The binary trace's analysis again, so that both sides of the round's ratio ran at the same time of the run.
  t0=$(date +%s%N)
  line=$("$bin" analyze "$binary" --timing -o /dev/null 2>&1 >/dev/null | grep '^timing:' || true)
  walls+=($((($(date +%s%N) - t0) / 1000000)))
  operations=$(sed -E 's/^timing: ([0-9]+) operations.*/\1/' <<< "$line")
  echo "round $round: $line; process wall ${walls[-1]} ms, $((operations * 1000 / walls[-1])) operations/s"
  if [ -n "$base" ]; then
    if [ $((round % 2)) -eq 1 ]; then
      json_ours+=("$(wall_ms "$bin" analyze "$trace" -o /dev/null)")
      json_base+=("$(wall_ms "$base" analyze "$trace" -o /dev/null)")
    else
      json_base+=("$(wall_ms "$base" analyze "$trace" -o /dev/null)")
      json_ours+=("$(wall_ms "$bin" analyze "$trace" -o /dev/null)")
    fi
    echo "round $round: JSON trace ${json_ours[-1]} ms, BASE ${json_base[-1]} ms"
  fi
  csan=$("$python" benches/csan_replay.py "$trace" --limit "$csan_ops" 2>&1 | grep '^csan:')
  echo "round $round: $csan"
  ours+=("$(sed -E 's/.* = ([0-9]+) operations\/s.*/\1/' <<< "$line")")
  theirs+=("$(sed -E 's/.* = ([0-9]+) operations\/s.*/\1/' <<< "$csan")")
  echo "round $round: streamtrace ${ours[-1]} operations/s, csan ${theirs[-1]}: $((ours[-1] / theirs[-1]))x"
done
if [ "$rounds" -gt 1 ]; then
  median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : int((v[NR/2] + v[NR/2+1]) / 2)}'; }
  ratios=()
  for i in "${!ours[@]}"; do ratios+=("$((ours[i] / theirs[i]))"); done
  echo "medians of $rounds rounds: streamtrace $(median "${ours[@]}") operations/s, csan $(median "${theirs[@]}"), ratio by medians $(($(median "${ours[@]}") / $(median "${theirs[@]}")))x, median of the rounds' ratios $(median "${ratios[@]}")x"
  wall=$(median "${walls[@]}")
  echo "median process wall of the binary trace: $wall ms, $((operations * 1000 / wall)) operations/s"
  if [ -n "$base" ]; then
    mine=$(median "${json_ours[@]}") theirs_json=$(median "${json_base[@]}")
    speedup=$((theirs_json * 100 / mine))
    printf 'median JSON trace: %s ms, BASE %s ms: %d.%02dx\n' "$mine" "$theirs_json" $((speedup / 100)) $((speedup % 100))
  fi
fi
