#!/usr/bin/env bash
# On the development machine (no GPU needed): builds a selection of NVIDIA's cuda-samples for sm_90 and packs them,
# with the list of what to run, into .gpu/cuda-samples.tar.gz, which benches/gpu_cuda_samples.sh runs on the GPU
# machine. The sources come from a bare clone of github.com/NVIDIA/cuda-samples (CUDA_SAMPLES_GIT, default the
# snapshot in /work/.mirror); EXPECTED.md beside this script says what each program's correct verdict is.
#
# Flags as the samples' own CMakeLists.txt (CUDA_SEPARABLE_COMPILATION, --extended-lambda, -lineinfo, C++17) plus
# host debug info (-g), so that findings name their lines, as samples/cuda/run_all.sh builds ours. The CUDA runtime
# is linked statically (nvcc's default, as real builds do); cuBLAS dynamically (the GPU machine has it).
#   GPU_DIR=...         where the binaries and the tarball go (default .gpu of this checkout)
#   NVCC=...            nvcc to use (default the PyPI nvcc under /opt/nvcc)
#   NVTX_INCLUDE=...    a folder holding nvtx3/ (cudaGraphsPerfScaling includes nvtx3/nvToolsExt.h)
#   LIBS_INCLUDE=, LIBS_DIR=  cusparse.h and libcusparse.so.12 (conjugateGradientCudaGraphs)
#   CUDA_SAMPLES_TREE=...  a folder holding the snapshot's Common/ and Samples/ instead of the git clone
#   CUDA_LIB_DIR=...    where the CUDA runtime's libraries are (default the nvcc wheel's lib/)
#   JOBS=2              builds at a time
# On the GPU machine (16 cores, the toolkit in /usr/local/cuda), from a tree carried in .gpu/:
#   CUDA_SAMPLES_TREE=.gpu/cuda-samples-src NVCC=/usr/local/cuda/bin/nvcc CUDA_LIB_DIR=/usr/local/cuda/lib64 \
#   NVTX_INCLUDE=/usr/local/cuda/include LIBS_INCLUDE=/usr/local/cuda/include LIBS_DIR=/usr/local/cuda/lib64 \
#   JOBS=16 samples/cuda-samples/build.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
git_dir=${CUDA_SAMPLES_GIT:-/work/.mirror/NVIDIA+cuda-samples/repo}
cu=/opt/nvcc/lib/python3.11/site-packages/nvidia/cu13
NVCC=${NVCC:-$cu/bin/nvcc}
# The torch environment's CUDA wheels hold what the plain nvcc wheels lack: nvtx3/ and cuSPARSE.
torch_cu=/work/venv-torch/lib/python3.11/site-packages/nvidia/cu13
NVTX_INCLUDE=${NVTX_INCLUDE:-$torch_cu/include}
LIBS_INCLUDE=${LIBS_INCLUDE:-$torch_cu/include}
LIBS_DIR=${LIBS_DIR:-$torch_cu/lib}
gpu_dir=${GPU_DIR:-$repo/.gpu}
cuda_lib_dir=${CUDA_LIB_DIR:-$cu/lib}
tree=${CUDA_SAMPLES_TREE:+$(cd "$CUDA_SAMPLES_TREE" && pwd)}
# One folder of the snapshot into the build's sources: from the tree when one is given, else from the clone.
extract() {
  if [ -n "$tree" ]; then
    mkdir -p "$src/$(dirname "$1")" && cp -r "$tree/$1" "$src/$1"
  else
    git --git-dir="$git_dir" archive HEAD "$1" 2>/dev/null | tar -x -C "$src"
  fi
}
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
# Staged apart and packed: only the tarball goes into .gpu (what the lead carries has a size limit).
out=$src/pack/cuda-samples
mkdir -p "$out/bin" "$gpu_dir"

# name | folder under Samples/ | sources in it | extra flags
samples=(
  "asyncAPI|0_Introduction/asyncAPI|asyncAPI.cu|"
  "simpleStreams|0_Introduction/simpleStreams|simpleStreams.cu|"
  "simpleCallback|0_Introduction/simpleCallback|simpleCallback.cu multithreading.cpp|"
  "simpleHyperQ|0_Introduction/simpleHyperQ|simpleHyperQ.cu|"
  "simpleMultiCopy|0_Introduction/simpleMultiCopy|simpleMultiCopy.cu|"
  "simpleZeroCopy|0_Introduction/simpleZeroCopy|simpleZeroCopy.cu|"
  "UnifiedMemoryStreams|0_Introduction/UnifiedMemoryStreams|UnifiedMemoryStreams.cu|-Xcompiler -fopenmp -lcublas -Xlinker -l:libgomp.a"
  "simpleAWBarrier|0_Introduction/simpleAWBarrier|simpleAWBarrier.cu|"
  "simpleMultiGPU|0_Introduction/simpleMultiGPU|simpleMultiGPU.cu|"
  "StreamPriorities|3_CUDA_Features/StreamPriorities|StreamPriorities.cu|"
  "simpleCudaGraphs|3_CUDA_Features/simpleCudaGraphs|simpleCudaGraphs.cu|"
  "jacobiCudaGraphs|3_CUDA_Features/jacobiCudaGraphs|jacobi.cu main.cpp|"
  "graphMemoryNodes|3_CUDA_Features/graphMemoryNodes|graphMemoryNodes.cu|"
  "graphConditionalNodes|3_CUDA_Features/graphConditionalNodes|graphConditionalNodes.cu|"
  "streamOrderedAllocation|2_Concepts_and_Techniques/streamOrderedAllocation|streamOrderedAllocation.cu|"
  "cudaGraphsPerfScaling|6_Performance/cudaGraphsPerfScaling|cudaGraphPerfScaling.cu|-I$NVTX_INCLUDE -ldl"
  "LargeKernelParameter|6_Performance/LargeKernelParameter|LargeKernelParameter.cu|"
  "conjugateGradientCudaGraphs|4_CUDA_Libraries/conjugateGradientCudaGraphs|conjugateGradientCudaGraphs.cu|-I$LIBS_INCLUDE -lcublas -L$LIBS_DIR -l:libcusparse.so.12"
)
# What the GPU script runs: "label binary args..." (a label per variant; none of these reads an input file).
cat > "$out/runs.txt" <<'RUNS'
asyncAPI asyncAPI
simpleStreams simpleStreams
simpleCallback simpleCallback
simpleHyperQ simpleHyperQ
simpleMultiCopy simpleMultiCopy
simpleZeroCopy simpleZeroCopy
simpleZeroCopy-generic simpleZeroCopy --use_generic_memory
UnifiedMemoryStreams UnifiedMemoryStreams
simpleAWBarrier simpleAWBarrier
simpleMultiGPU simpleMultiGPU
StreamPriorities StreamPriorities
simpleCudaGraphs simpleCudaGraphs
jacobiCudaGraphs jacobiCudaGraphs -gpumethod=0
jacobiCudaGraphs-update jacobiCudaGraphs -gpumethod=1
jacobiCudaGraphs-nograph jacobiCudaGraphs -gpumethod=2
graphMemoryNodes graphMemoryNodes
graphConditionalNodes graphConditionalNodes
streamOrderedAllocation streamOrderedAllocation
cudaGraphsPerfScaling cudaGraphsPerfScaling 3 1 20 4
LargeKernelParameter LargeKernelParameter
conjugateGradientCudaGraphs conjugateGradientCudaGraphs
RUNS

# git archive names an unrelated missing blob of the snapshot on stderr; what each sample needs is checked below.
extract Common
# The PyPI CUDA wheels lack cuda_profiler_api.h (asyncAPI includes it): the two declarations it holds, as the
# toolkit's header has them; the functions are in the CUDA runtime.
mkdir -p "$src/shim"
cat > "$src/shim/cuda_profiler_api.h" <<'H'
#pragma once
#include <cuda_runtime_api.h>
extern "C" {
extern __host__ cudaError_t CUDARTAPI cudaProfilerStart(void);
extern __host__ cudaError_t CUDARTAPI cudaProfilerStop(void);
}
H
commit=$(git --git-dir="$git_dir" rev-parse HEAD 2>/dev/null || cat "$tree/COMMIT" 2>/dev/null || echo unknown)
echo "cuda-samples $commit" > "$out/BUILD_INFO"
"$NVCC" --version | tail -1 >> "$out/BUILD_INFO"
for entry in "${samples[@]}"; do
  IFS='|' read -r name folder files extra <<< "$entry"
  extract "Samples/$folder"
  ( cd "$src/Samples/$folder"
    cmd="$NVCC -g -lineinfo -O2 -arch=sm_90 -std=c++17 -rdc=true --extended-lambda -I$src/Common -I$src/shim -L$cuda_lib_dir -o $out/bin/$name $files -lpthread $extra"
    echo "$name: $cmd" | sed "s|$NVCC|nvcc|; s|$out|OUT|g; s|$src|SRC|g" >> "$out/BUILD_INFO"
    $cmd ) &
  # Two at a time by default: the development machine has two cores, shared with other builders.
  [ "$(jobs -rp | wc -l)" -lt "${JOBS:-2}" ] || wait -n
done
wait
echo "built: $(ls "$out/bin" | wc -l) of ${#samples[@]}"
tar -czf "$gpu_dir/cuda-samples.tar.gz" -C "$src/pack" cuda-samples
ls -la "$gpu_dir/cuda-samples.tar.gz"
