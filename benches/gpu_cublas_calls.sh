#!/usr/bin/env bash
# On the GPU machine: what the capture adds to a cuBLAS call (benches/cublas_calls.cu, 20,000 64x64 gemms), plain,
# captured, and captured with another capture library (OLD_LIB, say the build before the cuBLAS stand-ins,
# capture/src/cublas.rs), in ROUNDS interleaved rounds (default 3). Prints one line per run: the steady time per
# call (median window of 1,000) and the whole process's wall time.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
st=$repo/.gpu/bin/streamtrace
work=$(mktemp -d)
nvcc -O2 -arch=sm_90 -o "$work/cublas_calls" benches/cublas_calls.cu -lcublas || exit 2
for round in $(seq "${ROUNDS:-3}"); do
  for how in plain capture ${OLD_LIB:+old}; do
    t0=$(date +%s.%N)
    case $how in
      plain) line=$("$work/cublas_calls") ;;
      capture) line=$($st capture --no-analyze -o "$work/c-$round" -- "$work/cublas_calls" 2>/dev/null) ;;
      old) line=$(STREAMTRACE_CAPTURE_LIB=$OLD_LIB $st capture --no-analyze -o "$work/o-$round" -- "$work/cublas_calls" 2>/dev/null) ;;
    esac
    t1=$(date +%s.%N)
    echo "round $round $how: $line process s $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')"
  done
done
