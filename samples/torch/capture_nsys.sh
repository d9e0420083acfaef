#!/usr/bin/env bash
# On the GPU machine: captures every sample of this folder with Nsight Systems and leaves the exports in $1
# (default: $OUT or ./nsys-out). Needs the GPU machine's notes folder copied to .gpu/ (nsys-capture.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:-${OUT:-$repo/nsys-out}}
mkdir -p "$out"
for sample in two_streams_no_wait two_streams_event prefetch_no_wait wait_before_record; do
  echo "== $sample"
  (cd "$out" && bash "$repo/.gpu/nsys-capture.sh" "$sample" python3 "$here/$sample.py") > "$out/$sample.log" 2>&1 || { tail -20 "$out/$sample.log"; exit 1; }
  grep GROUND_TRUTH "$out/$sample.log"
  rm -f "$out/$sample.nsys-rep"
done
