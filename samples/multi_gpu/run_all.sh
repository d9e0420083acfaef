#!/usr/bin/env bash
# On a machine with two GPUs: runs every sample of this folder plain and under `streamtrace capture`, and leaves
# in $1 (default $OUT) one folder per sample (NAME/trace.*.json, one trace per process) with the program's
# output plain (NAME/plain.log) and captured (NAME/capture.log), and prints one line per sample: both exit
# statuses, whether the program's own output was the same, and capture's verdicts.
# PyTorch samples run under torchrun, one process per GPU; the CUDA samples are built with nvcc.
# BIN names the folder holding the streamtrace binary and libstreamtrace_capture.so (default .gpu/bin);
# JOBS captures run at once (default 4; the first runs alone, to build the native observer once).
set -uo pipefail
# The traces this script collects are JSON (trace.*.json): the committed samples stay readable text.
export STREAMTRACE_TRACE_FORMAT=${STREAMTRACE_TRACE_FORMAT:-json}
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$OUT}
bin=${BIN:-$here/../../.gpu/bin}
jobs=${JOBS:-4}
build=$(mktemp -d)
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
# NVLink multicast stays off on shared machines (KINDS.md of the GPU machines).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
torchrun=(python3 -m torch.distributed.run --standalone --nproc_per_node=2)

command_of() {  # the command line of sample $1
  case $1 in
    *.py) echo "${torchrun[@]} $here/$1" ;;
    *.cu) echo "$build/$(basename "$1" .cu)" ;;
  esac
}

# The program's own output, comparable between runs: its standard output without timings, a line per print
# (two ranks printing at once may share a line) in a fixed order.
own_output() { sed 's/GROUND_TRUTH/\nGROUND_TRUTH/g; s/rank \([0-9]*\) ddp/\nrank \1 ddp/g' "$1" | grep -v '^streamtrace' | grep -v ' in [0-9.]* s\( (.*)\)\?$' | grep -v '^$' | sort; }

run_one() {  # runs sample $1 plain and captured; prints its line
  local name=${1%.*} dir=$out/${1%.*} cmd
  cmd=$(command_of "$1")
  mkdir -p "$dir"
  $cmd > "$dir/plain.log" 2> "$dir/plain.err"
  local plain=$?
  "$bin/streamtrace" capture -o "$build/trace-$name" -- $cmd > "$dir/capture.log" 2> "$dir/capture.err"
  local captured=$?
  cp "$build/trace-$name"/trace.*.json "$dir/" 2>/dev/null
  local same=same
  diff <(own_output "$dir/plain.log") <(own_output "$dir/capture.log") > /dev/null || same=DIFFERENT
  echo "$name: plain exit $plain, captured exit $captured, output $same; $(grep -h 'JOB SUMMARY\|^SUMMARY' "$dir/capture.err" | sed 's/ in \/.*//; s/;.*//' | tr '\n' ' ')"
}

for src in "$here"/*.cu; do
  nvcc -O2 -arch=sm_90 -std=c++17 -o "$build/$(basename "$src" .cu)" "$src" || echo "$(basename "$src"): nvcc failed"
done
samples=($(cd "$here" && ls dist_*.py *.cu))
run_one "${samples[0]}"
printf '%s\n' "${samples[@]:1}" | xargs -P "$jobs" -I{} bash -c "$(declare -f command_of own_output run_one); $(declare -p torchrun); here='$here' out='$out' bin='$bin' build='$build' run_one {}"
