#!/usr/bin/env bash
# Builds exact_access.fatbin, the exact-access backend's device patches, from exact_access.cu, and records the
# source's hash beside it (capture's tests check that the committed fatbin was built from the committed source).
# Needs nvcc 13 and the Compute Sanitizer headers: on a machine without CUDA,
#   python3 -m venv /opt/nvcc && /opt/nvcc/bin/pip install "nvidia-cuda-nvcc==13.0.*" "nvidia-cuda-runtime==13.0.*" \
#       "nvidia-cuda-cccl==13.0.*" "nvidia-nvvm==13.0.*" "nvidia-cuda-crt==13.0.*" "nvidia-cuda-sanitizer-api==13.0.*"
#   NVCC=/opt/nvcc/lib/python3.11/site-packages/nvidia/cu13/bin/nvcc \
#       SANITIZER_INCLUDE=/opt/nvcc/lib/python3.11/site-packages/nvidia/cu13/include capture/patches/build.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
nvcc=${NVCC:-nvcc}
include=${SANITIZER_INCLUDE:-/usr/local/cuda/compute-sanitizer/include}
# Machine code for Ampere, Hopper and Blackwell, and PTX for what comes after.
"$nvcc" --fatbin --compile-as-tools-patch -I"$include" \
  -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_100,code=sm_100 \
  -gencode arch=compute_100,code=compute_100 -o "$here/exact_access.fatbin" "$here/exact_access.cu"
sha256sum "$here/exact_access.cu" | cut -d' ' -f1 > "$here/exact_access.cu.sha256"
echo "built $here/exact_access.fatbin ($(stat -c %s "$here/exact_access.fatbin") bytes)"
