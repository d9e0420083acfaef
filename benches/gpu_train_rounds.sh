#!/usr/bin/env bash
# On the GPU machine: the training-loop benchmark (benches/torch_train_loop.py) in interleaved rounds (default 5),
# plain and under tier-T2 capture (the native observer); with PYTHON_MODE=1 also through the Python dispatch mode
# (STREAMTRACE_TORCH_OBSERVER=python), with CSAN=1 also under PyTorch's CUDA sanitizer. One line per run:
# "<variant> train loop 300 steps in <s> s". The last native capture stays in /tmp/t2loop.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
st=.gpu/bin/streamtrace
for round in $(seq 1 "${1:-5}"); do
  python3 benches/torch_train_loop.py | sed "s/^/plain    /"
  $st capture --no-analyze -o /tmp/t2loop -- python3 benches/torch_train_loop.py 2>/dev/null | sed "s/^/native   /"
  if [ -n "${PYTHON_MODE:-}" ]; then
    STREAMTRACE_TORCH_OBSERVER=python $st capture --no-analyze -o /tmp/t2py -- python3 benches/torch_train_loop.py 2>/dev/null | sed "s/^/python   /"
  fi
  if [ -n "${CSAN:-}" ]; then
    TORCH_CUDA_SANITIZER=1 python3 benches/torch_train_loop.py 2>/dev/null | sed "s/^/csan     /"
  fi
done
