#!/usr/bin/env bash
# On the GPU machine: runs every sample of this folder under streamtrace capture and under PyTorch's CUDA
# sanitizer (TORCH_CUDA_SANITIZER=1), and writes the side-by-side verdicts to $1 (a Markdown table); the traces
# land beside it. Needs .gpu/bin/streamtrace and libstreamtrace_capture.so.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:-$OUT/csan-comparison.md}
dir=$(dirname "$out")
st=$repo/.gpu/bin/streamtrace
{
  echo "| sample | ground truth | streamtrace | CSAN |"
  echo "|---|---|---|---|"
  for py in "$here"/*.py; do
    name=$(basename "$py" .py)
    truth=$(python3 "$py" 2>/dev/null | grep -o 'GROUND_TRUTH [a-z]*' | cut -d' ' -f2)
    "$st" capture -o "/tmp/cmp-$name" -- python3 "$py" > "$dir/$name.capture.log" 2>&1
    cp /tmp/cmp-$name/trace.*.json "$dir/$name.json" 2>/dev/null
    races=$(grep -o 'SUMMARY: streamtrace: [0-9]* race' "$dir/$name.capture.log" | head -1 | grep -o '[0-9]*')
    TORCH_CUDA_SANITIZER=1 python3 "$py" > "$dir/$name.csan.log" 2>&1
    csan=$(grep -c 'CSAN detected a possible data race' "$dir/$name.csan.log")
    verdict() { [ "${1:-0}" -gt 0 ] && echo race || echo clean; }
    echo "| $name | $truth | $(verdict "$races") | $(verdict "$csan") |"
  done
} > "$out"
cat "$out"
