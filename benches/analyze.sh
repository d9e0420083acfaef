#!/usr/bin/env bash
# Benchmark of `streamtrace analyze` on a synthetic trace, in JSON and in the binary encoding (the same records),
# beside PyTorch's CUDA sanitizer core replaying the same trace. Figures go to docs/performance.md by hand, with
# the machine they were measured on.
#
#   benches/analyze.sh [OPS] [CSAN_OPS]      defaults: 10000000 operations, 400000 replayed through CSAN
#
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
echo "generating $ops operations over 16 streams, 100000 live ranges -> $trace"
"$bin" synth -o "$trace" --ops "$ops" --streams 16 --ranges 100000
binary=${trace%.json}.stbin
"$bin" convert "$trace" "$binary"
ls -l "$trace" "$binary"
# Exit status 1 means findings (the synthetic trace races on purpose).
for input in "$trace" "$binary"; do
  echo "analyze $(basename "$input"):"
  /usr/bin/time -f "wall %e s, max RSS %M kB" "$bin" analyze "$input" --timing -o /dev/null || [ $? -eq 1 ]
done
python=${TORCH_PYTHON:-python3}
if "$python" -c 'import torch.cuda._sanitizer' 2>/dev/null; then
  "$python" benches/csan_replay.py "$trace" --limit "$csan_ops" 2>&1 | grep '^csan:'
else
  echo "csan: skipped ($python cannot import torch.cuda._sanitizer)"
fi
