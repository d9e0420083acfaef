#!/usr/bin/env bash
# On the GPU machine: both overhead benchmarks, each program printing the wall time of its own measured loop:
# the launch benchmark's rounds (benches/gpu_launch_parts.sh) and the training loop's (benches/
# gpu_train_rounds.sh; CSAN=1 adds PyTorch's CUDA sanitizer). Default 5 rounds each.
set -uo pipefail
# The traces this script collects are JSON (trace.*.json): the committed samples stay readable text.
export STREAMTRACE_TRACE_FORMAT=${STREAMTRACE_TRACE_FORMAT:-json}
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/gpu_launch_parts.sh" "${1:-5}"
bash "$here/gpu_train_rounds.sh" "${1:-5}"
