#!/usr/bin/env bash
# On the development machine (no GPU needed): builds a selection of NVIDIA's cuda-samples for sm_90 and packs them,
# with the list of what to run, into .gpu/cuda-samples.tar.gz, which benches/gpu_cuda_samples.sh runs on the GPU
# machine. The sources come from a bare clone of github.com/NVIDIA/cuda-samples (CUDA_SAMPLES_GIT, default the
# snapshot in /work/.mirror); EXPECTED.md beside this script says what each program's correct verdict is.
#
# Flags as the samples' own CMakeLists.txt (CUDA_SEPARABLE_COMPILATION, --extended-lambda, -lineinfo, C++17) plus
# host debug info (-g), so that findings name their lines, as samples/cuda/run_all.sh builds ours. The CUDA runtime
# is linked statically (nvcc's default, as real builds do); the libraries (cuBLAS, cuFFT, cuRAND, cuSPARSE, NVRTC)
# dynamically by their soname (the PyPI wheels have no unversioned libX.so; the GPU machine has them all).
#   GPU_DIR=...         where the binaries and the tarball go (default .gpu of this checkout)
#   NVCC=...            nvcc to use (default the PyPI nvcc under /opt/nvcc: python3 -m venv /opt/nvcc &&
#                       /opt/nvcc/bin/pip install nvidia-cuda-nvcc nvidia-cuda-runtime nvidia-cuda-nvrtc
#                       nvidia-cublas nvidia-cufft nvidia-curand nvidia-cuda-cccl; the third wave also needs
#                       nvidia-cusolver nvidia-cusparse nvidia-npp nvidia-nvjpeg nvidia-nvjitlink of CUDA 13.0, given
#                       as LIBS_INCLUDE/LIBS_DIR; pin nvidia-nvvm==13.0.* and nvidia-cuda-crt==13.0.*: a newer nvvm
#                       writes PTX 9.5, which ptxas 13.0 refuses)
#   NVTX_INCLUDE=...    a folder holding nvtx3/ (cudaGraphsPerfScaling includes nvtx3/nvToolsExt.h)
#   LIBS_INCLUDE=, LIBS_DIR=  cusparse.h and libcusparse.so.12 (conjugateGradientCudaGraphs)
#   CUDA_SAMPLES_TREE=...  a folder holding the snapshot's Common/ and Samples/ instead of the git clone
#   CUDA_LIB_DIR=...    where the CUDA runtime's libraries are (default the nvcc wheel's lib/)
#   JOBS=2              builds at a time
#   ONLY="a b"          build only these entries (names as in the list below), to try a few (the tarball then
#                       holds only those; from a CUDA_SAMPLES_TREE without some samples' folders, the files
#                       those folders give the others are left out too)
# On the GPU machine (16 cores, the toolkit in /usr/local/cuda), from a tree carried in .gpu/:
#   CUDA_SAMPLES_TREE=.gpu/cuda-samples-src NVCC=/usr/local/cuda/bin/nvcc CUDA_LIB_DIR=/usr/local/cuda/lib64 \
#   NVTX_INCLUDE=/usr/local/cuda/include LIBS_INCLUDE=/usr/local/cuda/include LIBS_DIR=/usr/local/cuda/lib64 \
#   JOBS=16 samples/cuda-samples/build.sh
# That tree is written here by `samples/cuda-samples/build.sh --tree .gpu/cuda-samples-src`: the snapshot's Common/
# (less its data/ and lib/) and the folder of every sample listed below (less doc/ and .vscode/), with COMMIT: 2.6 MB
# (0.4 MB gzipped); it needs neither a GPU nor nvcc.
#
# Driver-API samples (-lcuda) link against the toolkit's stub, CUDA_LIB_DIR/stubs/libcuda.so; the PyPI wheels have
# none, so when it is absent an equivalent link-only stub (every cu* function cuda.h declares, soname libcuda.so.1)
# is made from the nvcc's cuda.h: the binary asks for libcuda.so.1 and gets the driver's at run time either way.
# Some samples read a file at run time, found by sdkFindFilePath (Common/helper_string.h): relative to the working
# directory, first ./ then ./data/ (its other places are under ../../Samples/, outside the unpacked tarball). Those
# files (a kernel built with -fatbin or -ptx, as the sample's CMakeLists.txt does, or NVRTC's kernel source) go into
# bin/ beside the binaries, and the tarball holds, beside cuda-samples/, a link data -> cuda-samples/bin:
# gpu_cuda_samples.sh unpacks it into its working directory and runs every binary there, so ./data/ is bin/.
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
# name | folder under Samples/ | sources in it | extra flags
samples=(
  "asyncAPI|0_Introduction/asyncAPI|asyncAPI.cu|"
  "simpleStreams|0_Introduction/simpleStreams|simpleStreams.cu|"
  "simpleCallback|0_Introduction/simpleCallback|simpleCallback.cu multithreading.cpp|"
  "simpleHyperQ|0_Introduction/simpleHyperQ|simpleHyperQ.cu|"
  "simpleMultiCopy|0_Introduction/simpleMultiCopy|simpleMultiCopy.cu|"
  "simpleZeroCopy|0_Introduction/simpleZeroCopy|simpleZeroCopy.cu|"
  "UnifiedMemoryStreams|0_Introduction/UnifiedMemoryStreams|UnifiedMemoryStreams.cu|-Xcompiler -fopenmp -l:libcublas.so.13 -Xlinker -l:libgomp.a"
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
  "conjugateGradientCudaGraphs|4_CUDA_Libraries/conjugateGradientCudaGraphs|conjugateGradientCudaGraphs.cu|-I$LIBS_INCLUDE -l:libcublas.so.13 -L$LIBS_DIR -l:libcusparse.so.12"
  # Second wave. Single GPU; the IPC ones spawn their child processes from argv[0] (one child on one GPU).
  "cudaOpenMP|0_Introduction/cudaOpenMP|cudaOpenMP.cu|-Xcompiler -fopenmp -Xlinker -l:libgomp.a"
  "simpleIPC|0_Introduction/simpleIPC|simpleIPC.cu ../../../Common/helper_multiprocess.cpp|"
  "vectorAddDrv|0_Introduction/vectorAddDrv|vectorAddDrv.cpp|-lcuda"
  "simpleDrvRuntime|0_Introduction/simpleDrvRuntime|simpleDrvRuntime.cpp|-lcuda"
  "vectorAddMMAP|0_Introduction/vectorAddMMAP|vectorAddMMAP.cpp multidevicealloc_memmap.cpp|-lcuda"
  "vectorAdd_nvrtc|0_Introduction/vectorAdd_nvrtc|vectorAdd.cpp|-l:libnvrtc.so.13 -lcuda"
  "systemWideAtomics|0_Introduction/systemWideAtomics|systemWideAtomics.cu|"
  "streamOrderedAllocationIPC|2_Concepts_and_Techniques/streamOrderedAllocationIPC|streamOrderedAllocationIPC.cu ../../../Common/helper_multiprocess.cpp|-lcuda"
  "threadMigration|2_Concepts_and_Techniques/threadMigration|threadMigration.cpp|-lcuda"
  "memMapIPCDrv|3_CUDA_Features/memMapIPCDrv|memMapIpc.cpp ../../../Common/helper_multiprocess.cpp|-lcuda -lrt"
  "ptxjit|3_CUDA_Features/ptxjit|ptxjit.cpp|-lcuda"
  "cdpSimpleQuicksort|3_CUDA_Features/cdpSimpleQuicksort|cdpSimpleQuicksort.cu|-lcudadevrt"
  "graphMemoryFootprint|3_CUDA_Features/graphMemoryFootprint|graphMemoryFootprint.cu|"
  "batchCUBLAS|4_CUDA_Libraries/batchCUBLAS|batchCUBLAS.cpp|-l:libcublas.so.13"
  "simpleCUFFT|4_CUDA_Libraries/simpleCUFFT|simpleCUFFT.cu|-l:libcufft.so.12"
  # Its CMakeLists.txt links cuBLAS and cuSPARSE, which it does not call.
  "conjugateGradientMultiBlockCG|4_CUDA_Libraries/conjugateGradientMultiBlockCG|conjugateGradientMultiBlockCG.cu|"
  "simpleCUBLASXT|4_CUDA_Libraries/simpleCUBLASXT|simpleCUBLASXT.cpp|-l:libcublas.so.13"
  # cuRAND's host generator (the CPU reference in MonteCarlo_gold.cpp).
  "MonteCarloMultiGPU|5_Domain_Specific/MonteCarloMultiGPU|MonteCarlo_gold.cpp MonteCarlo_kernel.cu multithreading.cpp MonteCarloMultiGPU.cpp|-l:libcurand.so.10"
  "UnifiedMemoryPerf|6_Performance/UnifiedMemoryPerf|helperFunctions.cpp matrixMultiplyPerf.cu commonKernels.cu|"
  # Third wave: CUDA libraries with their streams (cuSOLVER, cuSPARSE, cuRAND, cuBLAS, nvJPEG, NPP, nvJitLink,
  # Thrust), compressible VMM memory, dynamic parallelism. cuSOLVER needs cuBLAS, cuSPARSE and nvJitLink beside it
  # at link time (its DT_NEEDED): all in LIBS_DIR on the GPU machine.
  "simpleAttributes|0_Introduction/simpleAttributes|simpleAttributes.cu|"
  "radixSortThrust|2_Concepts_and_Techniques/radixSortThrust|radixSortThrust.cu|"
  "conjugateGradientUM|4_CUDA_Libraries/conjugateGradientUM|main.cpp|-I$LIBS_INCLUDE -l:libcublas.so.13 -L$LIBS_DIR -l:libcusparse.so.12"
  "conjugateGradientPrecond|4_CUDA_Libraries/conjugateGradientPrecond|main.cpp|-I$LIBS_INCLUDE -l:libcublas.so.13 -L$LIBS_DIR -l:libcusparse.so.12"
  "cuSolverDn_LinearSolver|4_CUDA_Libraries/cuSolverDn_LinearSolver|cuSolverDn_LinearSolver.cpp mmio.c mmio_wrapper.cpp|-I$LIBS_INCLUDE -L$LIBS_DIR -l:libcusolver.so.12 -l:libcublas.so.13 -l:libcusparse.so.12"
  "cuSolverSp_LinearSolver|4_CUDA_Libraries/cuSolverSp_LinearSolver|cuSolverSp_LinearSolver.cpp mmio.c mmio_wrapper.cpp|-I$LIBS_INCLUDE -L$LIBS_DIR -l:libcusolver.so.12 -l:libcusparse.so.12"
  "MC_EstimatePiInlineP|2_Concepts_and_Techniques/MC_EstimatePiInlineP|src/main.cpp src/piestimator.cu src/test.cpp|-Iinc"
  "MC_SingleAsianOptionP|2_Concepts_and_Techniques/MC_SingleAsianOptionP|src/main.cpp src/pricingengine.cu src/test.cpp|-Iinc"
  "MersenneTwisterGP11213|4_CUDA_Libraries/MersenneTwisterGP11213|MersenneTwister.cpp|-l:libcurand.so.10"
  "simpleCUBLAS|4_CUDA_Libraries/simpleCUBLAS|simpleCUBLAS.cpp|-l:libcublas.so.13"
  "cudaCompressibleMemory|3_CUDA_Features/cudaCompressibleMemory|saxpy.cu compMalloc.cpp|-lcuda"
  "reduction|2_Concepts_and_Techniques/reduction|reduction.cpp reduction_kernel.cu|"
  "threadFenceReduction|2_Concepts_and_Techniques/threadFenceReduction|threadFenceReduction.cu|"
  "lineOfSight|4_CUDA_Libraries/lineOfSight|lineOfSight.cu|"
  "cdpAdvancedQuicksort|3_CUDA_Features/cdpAdvancedQuicksort|cdpAdvancedQuicksort.cu cdpBitonicSort.cu|-lcudadevrt"
  "jitLto|4_CUDA_Libraries/jitLto|jitLto.cpp|-I$LIBS_INCLUDE -l:libnvrtc.so.13 -L$LIBS_DIR -l:libnvJitLink.so.13 -lcuda"
  "binomialOptions|5_Domain_Specific/binomialOptions|binomialOptions.cpp binomialOptions_gold.cpp binomialOptions_kernel.cu|"
  "segmentationTreeThrust|2_Concepts_and_Techniques/segmentationTreeThrust|segmentationTree.cu|"
  "nvJPEG|4_CUDA_Libraries/nvJPEG|nvJPEG.cpp|-I$LIBS_INCLUDE -L$LIBS_DIR -l:libnvjpeg.so.13"
  "watershedSegmentationNPP|4_CUDA_Libraries/watershedSegmentationNPP|watershedSegmentationNPP.cpp|-I$LIBS_INCLUDE -L$LIBS_DIR -l:libnppisu.so.13 -l:libnppif.so.13 -l:libnppc.so.13"
)
# What samples read at run time, into bin/ (see above): folder under Samples/ | source there | how (an nvcc output
# option, or copy) | file name the program looks for. vectorAddDrv, simpleDrvRuntime and vectorAddMMAP all load
# vectorAdd_kernel64.fatbin (one name in one ./data/): their vectorAdd_kernel.cu are the same kernel (the latter two
# differ by a leading blank line), so vectorAddDrv's is built for the three.
companions=(
  "0_Introduction/vectorAddDrv|vectorAdd_kernel.cu|-fatbin|vectorAdd_kernel64.fatbin"
  "0_Introduction/vectorAdd_nvrtc|vectorAdd_kernel.cu|copy|vectorAdd_kernel.cu"
  "2_Concepts_and_Techniques/threadMigration|threadMigration_kernel.cu|-fatbin|threadMigration_kernel64.fatbin"
  "3_CUDA_Features/memMapIPCDrv|memMapIpc_kernel.cu|-ptx|memMapIpc_kernel64.ptx"
  "3_CUDA_Features/ptxjit|ptxjit_kernel.cu|-ptx|ptxjit_kernel64.ptx"
  # Third wave: the samples' own data (a folder copied whole; folders under ../ are the snapshot's Common/).
  "4_CUDA_Libraries/cuSolverDn_LinearSolver|gr_900_900_crg.mtx|copy|gr_900_900_crg.mtx"
  "4_CUDA_Libraries/cuSolverSp_LinearSolver|lap2D_5pt_n100.mtx|copy|lap2D_5pt_n100.mtx"
  "2_Concepts_and_Techniques/segmentationTreeThrust|data/test.ppm|copy|test.ppm"
  "2_Concepts_and_Techniques/segmentationTreeThrust|data/ref_00.ppm|copy|ref_00.ppm"
  "2_Concepts_and_Techniques/segmentationTreeThrust|data/ref_09.ppm|copy|ref_09.ppm"
  "4_CUDA_Libraries/nvJPEG|images|copy|images"
  "../Common/data|teapot_512x512_8u_Gray.raw|copy|teapot_512x512_8u_Gray.raw"
  "../Common/data|CT_skull_512x512_8u_Gray.raw|copy|CT_skull_512x512_8u_Gray.raw"
  "../Common/data|Rocks_512x512_8u_Gray.raw|copy|Rocks_512x512_8u_Gray.raw"
)

# --tree DIR: the snapshot's folders that CUDA_SAMPLES_TREE mode needs, written into DIR (to carry to the GPU machine).
if [ "${1:-}" = --tree ]; then
  dest=${2:?usage: $0 --tree DIR}
  folders=(Common)
  for entry in "${samples[@]}"; do
    IFS='|' read -r name folder files extra <<< "$entry"
    folders+=("Samples/$folder")
  done
  mkdir -p "$dest"
  git --git-dir="$git_dir" archive HEAD "${folders[@]}" 2>/dev/null \
    | tar -x -C "$dest" --exclude=doc --exclude=.vscode --exclude=Common/data --exclude=Common/lib
  # Common/data is left out but for the files a companion names (watershedSegmentationNPP's images).
  for entry in "${companions[@]}"; do
    IFS='|' read -r folder file how target <<< "$entry"
    case "$folder" in ../Common/data) git --git-dir="$git_dir" archive HEAD "Common/data/$file" | tar -x -C "$dest" ;; esac
  done
  git --git-dir="$git_dir" rev-parse HEAD > "$dest/COMMIT"
  echo "$dest: ${#folders[@]} folders, $(du -sh "$dest" | cut -f1)"
  exit 0
fi

src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
# Staged apart and packed: only the tarball goes into .gpu (what the lead carries has a size limit).
out=$src/pack/cuda-samples
mkdir -p "$out/bin" "$gpu_dir"

# What the GPU script runs: "label binary args..." (a label per variant; the first two waves read no input file, only
# the kernels packed beside the binaries; the second wave runs with default arguments, whose sizes keep each run
# short; the third wave's data files lie beside the binaries too, nvJPEG's images in data/images/).
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
cudaOpenMP cudaOpenMP
simpleIPC simpleIPC
vectorAddDrv vectorAddDrv
simpleDrvRuntime simpleDrvRuntime
vectorAddMMAP vectorAddMMAP
vectorAdd_nvrtc vectorAdd_nvrtc
systemWideAtomics systemWideAtomics
streamOrderedAllocationIPC streamOrderedAllocationIPC
threadMigration threadMigration
memMapIPCDrv memMapIPCDrv
ptxjit ptxjit
cdpSimpleQuicksort cdpSimpleQuicksort
graphMemoryFootprint graphMemoryFootprint
batchCUBLAS batchCUBLAS
simpleCUFFT simpleCUFFT
conjugateGradientMultiBlockCG conjugateGradientMultiBlockCG
simpleCUBLASXT simpleCUBLASXT
MonteCarloMultiGPU MonteCarloMultiGPU
UnifiedMemoryPerf UnifiedMemoryPerf
simpleAttributes simpleAttributes
radixSortThrust radixSortThrust -iterations=20
conjugateGradientUM conjugateGradientUM
conjugateGradientPrecond conjugateGradientPrecond
cuSolverDn_LinearSolver cuSolverDn_LinearSolver
cuSolverDn_LinearSolver-qr cuSolverDn_LinearSolver -R=qr
cuSolverSp_LinearSolver cuSolverSp_LinearSolver
MC_EstimatePiInlineP MC_EstimatePiInlineP
MC_SingleAsianOptionP MC_SingleAsianOptionP
MersenneTwisterGP11213 MersenneTwisterGP11213
simpleCUBLAS simpleCUBLAS
cudaCompressibleMemory cudaCompressibleMemory
reduction reduction
threadFenceReduction threadFenceReduction
lineOfSight lineOfSight
cdpAdvancedQuicksort cdpAdvancedQuicksort
jitLto jitLto
binomialOptions binomialOptions
segmentationTreeThrust segmentationTreeThrust
nvJPEG nvJPEG -i data/images/
nvJPEG-pipelined nvJPEG -i data/images/ -pipelined
watershedSegmentationNPP watershedSegmentationNPP
RUNS

# One folder of the snapshot into the build's sources, once: from the tree when one is given, else from the clone.
extract() {
  [ -e "$src/$1" ] && return
  if [ -n "$tree" ]; then
    mkdir -p "$src/$(dirname "$1")" && cp -r "$tree/$1" "$src/$1"
  else
    git --git-dir="$git_dir" archive HEAD "$1" 2>/dev/null | tar -x -C "$src"
  fi
}
# git archive names an unrelated missing blob of the snapshot on stderr; what each sample needs is checked below.
extract Common
mkdir -p "$src/Samples"
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
# libcuda.so to link against (see above): the toolkit's stub, else one made from cuda.h.
link_dirs="-L$cuda_lib_dir"
if [ -e "$cuda_lib_dir/stubs/libcuda.so" ]; then
  link_dirs="$link_dirs -L$cuda_lib_dir/stubs"
else
  cuda_h=$(dirname "$NVCC")/../include/cuda.h
  mkdir -p "$src/stubs"
  gcc -E -P -x c "$cuda_h" | grep -oE '\bcu[A-Za-z0-9_]+[[:space:]]*\(' | tr -d '( \t' | sort -u \
    | sed 's/.*/void &(void) {}/' > "$src/stubs/libcuda.c"
  gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$src/stubs/libcuda.so" "$src/stubs/libcuda.c"
  link_dirs="$link_dirs -L$src/stubs"
fi
commit=$(git --git-dir="$git_dir" rev-parse HEAD 2>/dev/null || cat "$tree/COMMIT" 2>/dev/null || echo unknown)
echo "cuda-samples $commit" > "$out/BUILD_INFO"
"$NVCC" --version | tail -1 >> "$out/BUILD_INFO"
selected() { [ -z "${ONLY:-}" ] || case " $ONLY " in *" $1 "*) true ;; *) false ;; esac; }
# Two at a time by default: the development machine has two cores, shared with other builders. A build that fails
# does not stop the others: the count at the end names it.
throttle() { [ "$(jobs -rp | wc -l)" -lt "${JOBS:-2}" ] || wait -n || true; }
# With ONLY, a companion whose folder a partial tree (CUDA_SAMPLES_TREE) leaves out is not wanted: skipped.
companion_wanted() { [ -z "${ONLY:-}" ] || [ -z "$tree" ] || [ -e "$tree/Samples/$1" ]; }
for entry in "${companions[@]}"; do
  IFS='|' read -r folder file how target <<< "$entry"
  companion_wanted "$folder" || continue
  extract "Samples/$folder"
  ( cd "$src/Samples/$folder"
    if [ "$how" = copy ]; then
      cmd="cp -r $file $out/bin/$target"
    else
      cmd="$NVCC -lineinfo -arch=sm_90 -std=c++17 -I$src/Common $how -o $out/bin/$target $file"
    fi
    echo "$target: $cmd" | sed "s|$NVCC|nvcc|; s|$out|OUT|g; s|$src|SRC|g" >> "$out/BUILD_INFO"
    $cmd ) &
  throttle
done
for entry in "${samples[@]}"; do
  IFS='|' read -r name folder files extra <<< "$entry"
  selected "$name" || continue
  extract "Samples/$folder"
  ( cd "$src/Samples/$folder"
    cmd="$NVCC -g -lineinfo -O2 -arch=sm_90 -std=c++17 -rdc=true --extended-lambda -I$src/Common -I$src/shim $link_dirs -o $out/bin/$name $files -lpthread $extra"
    echo "$name: $cmd" | sed "s|$NVCC|nvcc|; s|$out|OUT|g; s|$src|SRC|g" >> "$out/BUILD_INFO"
    $cmd ) &
  throttle
done
wait
built=0 wanted=0 missing=""
for entry in "${samples[@]}"; do
  IFS='|' read -r name _ <<< "$entry"
  selected "$name" || continue
  wanted=$((wanted + 1))
  if [ -x "$out/bin/$name" ]; then built=$((built + 1)); else missing="$missing $name"; fi
done
for entry in "${companions[@]}"; do
  IFS='|' read -r folder _ _ target <<< "$entry"
  companion_wanted "$folder" || continue
  [ -e "$out/bin/$target" ] || missing="$missing $target"
done
echo "built: $built of $wanted${missing:+; missing:$missing}"
# ./data/ of the working directory that gpu_cuda_samples.sh runs the binaries in is bin/ (see above).
ln -s cuda-samples/bin "$src/pack/data"
tar -czf "$gpu_dir/cuda-samples.tar.gz" -C "$src/pack" cuda-samples data
ls -la "$gpu_dir/cuda-samples.tar.gz"
