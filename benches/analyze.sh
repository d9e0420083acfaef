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
ours=() theirs=()
for round in $(seq "$rounds"); do
  # The binary trace's analysis again, so that both sides of the round's ratio ran at the same time of the run.
  line=$("$bin" analyze "$binary" --timing -o /dev/null 2>&1 >/dev/null | grep '^timing:' || true)
  echo "round $round: $line"
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
fi
