#!/usr/bin/env bash
# On the GPU machine: the two overhead benchmarks in interleaved rounds (default 5), each program printing the
# wall time of its own measured loop. Launch benchmark: plain, CUPTI callbacks recording nothing
# (STREAMTRACE_CALLBACK_NOOP=1) and full capture; training loop: plain and tier-T2 capture, and with CSAN=1
# under PyTorch's CUDA sanitizer too.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
st=.gpu/bin/streamtrace
nvcc -O2 -arch=sm_90 -o /tmp/launches benches/capture_launches.cu
for round in $(seq 1 "${1:-5}"); do
  /tmp/launches 100000 | sed "s/^/plain    /"
  STREAMTRACE_CALLBACK_NOOP=1 $st capture --no-analyze -o /tmp/o1 -- /tmp/launches 100000 | sed "s/^/noop     /"
  $st capture --no-analyze -o /tmp/o2 -- /tmp/launches 100000 | sed "s/^/captured /"
  python3 benches/torch_train_loop.py | sed "s/^/plain    /"
  $st capture --no-analyze -o /tmp/o3 -- python3 benches/torch_train_loop.py 2>/dev/null | sed "s/^/t2       /"
  if [ -n "${CSAN:-}" ]; then
    TORCH_CUDA_SANITIZER=1 python3 benches/torch_train_loop.py 2>/dev/null | sed "s/^/csan     /"
  fi
done
