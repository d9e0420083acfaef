#!/usr/bin/env bash
# NVIDIA's nccl-tests (all_reduce_perf and friends: CUDA C++ driving NCCL collectives on non-blocking streams,
# with data initialization and checking kernels on the legacy default stream) under streamtrace, on the GPU
# machine: a real public program, correct, whose verdict must be clean (nccl-tests-EXPECTED.md beside this script
# says why, line by line). Its sources are not in this repository: `tree` writes the files the build needs (src/,
# os/, verifiable/, LICENSE.txt, of the commit below) from a bare clone of github.com/NVIDIA/nccl-tests into a
# folder carried to the GPU machine, and `build` (on the development machine, with nvcc from PyPI) puts the
# binaries in its bin/, so that the GPU machine only runs them. NCCL itself is not built: the binaries link
# libnccl.so.2 of the nvidia-nccl-cu13 wheel that the GPU machine's torch 2.11.0+cu130 requires (2.28.9), found
# at run time in python3's site-packages.
#
# On the development machine:
#   samples/cuda-projects/nccl_tests.sh tree .gpu/nccl-tests   the sources, from NCCL_TESTS_GIT
#                                         (default /work/.mirror/NVIDIA+nccl-tests/repo)
#   NVCC=/tmp/nvcc130/lib/python3.11/site-packages/nvidia/cu13/bin/nvcc NCCL_HOME=/tmp/nccl-wheel/x/nvidia/nccl \
#     samples/cuda-projects/nccl_tests.sh build                 build .gpu/nccl-tests/bin/*_perf (sm_90, -g -lineinfo)
#   samples/cuda-projects/nccl_tests.sh check                   sizes, NEEDED libraries and RPATH of the binaries
# (nvcc 13.0 from PyPI: python3 -m venv /tmp/nvcc130 && /tmp/nvcc130/bin/pip install 'nvidia-cuda-nvcc==13.0.*'
# 'nvidia-cuda-runtime==13.0.*' 'nvidia-cuda-cccl==13.0.*' 'nvidia-cuda-crt==13.0.*' 'nvidia-nvvm==13.0.*': the
# GPU machine's toolkit and driver are CUDA 13.0; NCCL headers and library: pip download --no-deps
# nvidia-nccl-cu13==2.28.9 -d /tmp/nccl-wheel, then unzip the wheel into /tmp/nccl-wheel/x.)
# On the GPU machine, from the repository root (NCCL_TESTS_SRC: the tree, default .gpu/nccl-tests):
#   bash samples/cuda-projects/nccl_tests.sh plain [TEST]        TEST (default all_reduce) without capture
#   bash samples/cuda-projects/nccl_tests.sh capture [TEST]      the same under `streamtrace capture
#                                         -o /tmp/nccl-tests-capture-TEST[-VARIANT]`
#   bash samples/cuda-projects/nccl_tests.sh plain-all | capture-all   every test of NCCL_TESTS_LIST in a row
#                                         (default: all_reduce sendrecv alltoall), one process each
#   bash samples/cuda-projects/nccl_tests.sh build               the fallback: build there, with /usr/local/cuda's
#                                         nvcc and the wheel's NCCL (both found by default)
#   bash samples/cuda-projects/nccl_tests.sh cmd [TEST]          only print the run command and its environment
#   bash samples/cuda-projects/nccl_tests.sh nccl                only say which libnccl.so.2 a run would load
# The run: TEST_perf -b 8 -e 8M -f 4 -t NTHREADS -g NGPUS -c 1 -n 5 -w 2 (11 sizes, 8 B to 8 MiB; out-of-place
# then in-place; 2 warm-up and 5 timed iterations; one checked iteration each, whose result must be 0 wrong).
# Variants (the capture folder and the default NCCL_TESTS_DEVICE stay as they are; VARIANT names the folder):
#   NGPUS=2           -g 2: one process, one host thread driving 2 GPUs (ncclGroupStart/End around both ranks)
#                     (VARIANT g2). Needs 2 GPUs (nvidia-h100-x2 / nvidia-h200-x2).
#   NTHREADS=2        -t 2 -g 1: one process, 2 host threads, one GPU each (VARIANT t2). Needs 2 GPUs too: each
#                     rank needs its own GPU, and NCCL refuses a communicator with the same GPU twice ("Duplicate
#                     GPU detected"), so it does not run on one GPU.
# Environment: NGPUS (1), NTHREADS (1), NCCL_TESTS_ARGS (replaces the size/iteration arguments above),
# NCCL_TESTS_LIST, NCCL_TESTS_SRC, NCCL_TESTS_BIN (default $NCCL_TESTS_SRC/bin), NCCL_TESTS_WORK (objects of a
# build, default /tmp/nccl-tests-build), NCCL_HOME (the NCCL with include/ and lib/: at build time the headers and
# library built against; at run time only its lib/ is used; default: the nvidia-nccl-cu13 wheel in python3's
# site-packages), NVCC, CUDA_HOME, NCCL_DEBUG (WARN), NCCL_NVLS_ENABLE (0: no NVLink multicast, see the device
# kinds' notes), ST_ARGS (extra `streamtrace capture` options), RUN_TIMEOUT (300).
set -uo pipefail
SELF=$(readlink -f "$0")
cd "$(dirname "$0")/../.."
ROOT=$PWD
NCCL_TESTS_COMMIT=a0b82b2260cf5152b9f8c061bbf7eaf0ba096432   # tag v2.19.6, 2026-07-09
NCCL_BUILT_AGAINST=2.28.9                                      # torch 2.11.0's pin: nvidia-nccl-cu13==2.28.9
SRC=${NCCL_TESTS_SRC:-$ROOT/.gpu/nccl-tests}
BIN_DIR=${NCCL_TESTS_BIN:-$SRC/bin}
W=${NCCL_TESTS_WORK:-/tmp/nccl-tests-build}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NGPUS=${NGPUS:-1}
NTHREADS=${NTHREADS:-1}
LIST=${NCCL_TESTS_LIST:-all_reduce sendrecv alltoall}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
mode=${1:-}
TEST=${2:-all_reduce}
TEST=${TEST%_perf}

# find_st: the streamtrace binary the project scripts run (sets ST); find_nccl_lib: the NCCL to run with.
source "$ROOT/samples/find_streamtrace.sh"
source "$ROOT/samples/find_nccl.sh"

die() { echo "nccl_tests.sh: $*" >&2; exit 2; }


# The version of the wheel whose lib/ that is (its dist-info beside nvidia/), or "unknown".
nccl_wheel_version() {
  local sp d
  sp=$(cd "$NCCL_LIB/../../.." 2>/dev/null && pwd) || { echo unknown; return; }
  for d in "$sp"/nvidia_nccl_cu1*-*.dist-info; do
    [ -e "$d" ] && { basename "$d" .dist-info | sed 's/^nvidia_nccl_cu[0-9]*-//'; return; }
  done
  echo unknown
}

# nvcc: NVCC, else the toolkit's, else PyPI's in /tmp/nvcc130 or /tmp/nvcc.
find_nvcc() {
  if [ -z "${NVCC:-}" ]; then
    local c
    for c in "$CUDA_HOME/bin/nvcc" /tmp/nvcc130/lib/python3*/site-packages/nvidia/cu13/bin/nvcc \
             /tmp/nvcc/lib/python3*/site-packages/nvidia/cu13/bin/nvcc; do
      [ -x "$c" ] && { NVCC=$c; break; }
    done
  fi
  [ -n "${NVCC:-}" ] && [ -x "$NVCC" ] || die "no nvcc (set NVCC)"
  # libcudart.so.13 beside it: the toolkit's lib64, or the wheel's lib/ (cu13/bin/../lib)
  CUDART_DIR=""
  local d
  for d in "$(dirname "$NVCC")/../lib64" "$(dirname "$NVCC")/../lib" "$CUDA_HOME/lib64"; do
    [ -e "$d/libcudart.so.13" ] && { CUDART_DIR=$(cd "$d" && pwd); break; }
  done
  [ -n "$CUDART_DIR" ] || die "no libcudart.so.13 beside $NVCC"
}

# What `make MPI=0 NVCC_GENCODE=-gencode=arch=compute_90,code=sm_90` in src/ runs (common.mk: -std=c++17 for
# CUDA 13, --extended-lambda, -DNCCL_OS_LINUX, -O3 -g; src/Makefile: -I$NCCL_HOME/include -I../os, links
# -lnccl -lcudart -lrt and os/'s libnccl_test_os.a; DSO=0: verifiable.o linked into each binary), plus -lineinfo
# and -Xfatbin=-compress-all: the device code (verifiable.cu's kernels for every type and op, the tests' device-API
# kernels) is 11 MB per binary uncompressed, 3-4 MB compressed; the driver inflates it at load, nothing else changes.
# -lcudart in the Makefile makes the binaries load libcudart.so.13 (nvcc's own default would be static): here
# `-cudart shared` says so without also handing nvcc's libcudart_static.a to the linker. The link goes through
# $W/lib, which holds libnccl.so and libcudart.so links (the wheels ship only the .so.N files), and the folder of
# libcudart.so.13, where nvcc's libcudadevrt.a is too (PyPI's nvcc.profile names a lib64 the wheel lacks): the
# binaries need libnccl.so.2 and libcudart.so.13 by their SONAMEs and carry no RPATH.
build() {
  [ -e "$SRC/src/common.cu" ] || die "no nccl-tests sources in $SRC (run \`$0 tree $SRC\` on the development machine)"
  find_nvcc
  if [ -z "${NCCL_HOME:-}" ]; then find_nccl_lib; NCCL_HOME=$(dirname "$NCCL_LIB"); fi
  [ -e "$NCCL_HOME/include/nccl.h" ] || die "no include/nccl.h under NCCL_HOME=$NCCL_HOME"
  [ -e "$NCCL_HOME/lib/libnccl.so.2" ] || die "no lib/libnccl.so.2 under NCCL_HOME=$NCCL_HOME"
  local hv
  hv=$(awk '/^#define NCCL_(MAJOR|MINOR|PATCH) / {printf "%s%s", sep, $3; sep="."}' "$NCCL_HOME/include/nccl.h")
  echo "== nvcc: $("$NVCC" --version | tail -1)"
  echo "== nccl-tests commit $(cat "$SRC/COMMIT" 2>/dev/null || echo '?')"
  echo "== NCCL $hv headers and library from $NCCL_HOME"
  [ "$hv" = "$NCCL_BUILT_AGAINST" ] || echo "== note: NCCL $hv, not $NCCL_BUILT_AGAINST (torch 2.11.0+cu130's pin)"
  mkdir -p "$W/obj" "$W/lib" "$BIN_DIR" || die "cannot make $W or $BIN_DIR"
  ln -sf "$NCCL_HOME/lib/libnccl.so.2" "$W/lib/libnccl.so"
  ln -sf "$CUDART_DIR/libcudart.so.13" "$W/lib/libcudart.so"
  local CXX=${CXX:-g++}
  local CXXFLAGS=(-std=c++17 -DNCCL_OS_LINUX -O3 -g)
  local NVCUFLAGS=(-ccbin "$CXX" -gencode=arch=compute_90,code=sm_90 -std=c++17 --extended-lambda -DNCCL_OS_LINUX
                   -O3 -g -lineinfo -Xfatbin=-compress-all -I"$NCCL_HOME/include" -I"$SRC/os")
  local t0=$SECONDS o=$W/obj
  set -x
  "$CXX" "${CXXFLAGS[@]}" -I"$SRC/src" -o "$o/linux.o" -c "$SRC/os/linux.cc" || die "os/linux.cc"
  rm -f "$o/libnccl_test_os.a"; ar rcs "$o/libnccl_test_os.a" "$o/linux.o" || die "ar"
  "$CXX" "${CXXFLAGS[@]}" -I"$SRC/os" -o "$o/timer.o" -c "$SRC/src/timer.cc" || die "timer.cc"
  { set +x; } 2>/dev/null
  # the objects every test shares, then each test's own, all nvcc at once; an object newer than its source, the
  # headers and this script is kept
  local f pids=() rc=0 t obj
  for f in "verifiable/verifiable.cu -Xcompiler -fPIC" src/common.cu src/util.cu $(for t in $LIST; do echo "src/$t.cu"; done); do
    # shellcheck disable=SC2086
    set -- $f
    obj=$o/$(basename "$1" .cu).o
    if [ "$obj" -nt "$SRC/$1" ] && [ "$obj" -nt "$SRC/src/common.h" ] && [ "$obj" -nt "$SRC/verifiable/verifiable.h" ] \
       && [ "$obj" -nt "$SELF" ]; then
      echo "== $obj is up to date"; continue
    fi
    echo "+ nvcc ${NVCUFLAGS[*]} ${*:2} -o $obj -c $1"
    (cd "$SRC/$(dirname "$1")" && "$NVCC" "${NVCUFLAGS[@]}" "${@:2}" -o "$obj" -c "$(basename "$1")") &
    pids+=($!)
  done
  for f in "${pids[@]}"; do wait "$f" || rc=1; done
  [ $rc = 0 ] || die "compilation failed"
  for t in $LIST; do
    local LINK=("$NVCC" -o "$BIN_DIR/${t}_perf" "${NVCUFLAGS[@]}" "$o/$t.o" "$o/common.o" "$o/util.o" "$o/timer.o"
                "$o/verifiable.o" "$o/libnccl_test_os.a" -cudart shared -L"$W/lib" -L"$CUDART_DIR" -lnccl -lrt)
    echo "+ ${LINK[*]}"
    "${LINK[@]}" || die "linking ${t}_perf failed"
  done
  echo "$hv" > "$BIN_DIR/NCCL_VERSION"
  cp "$SRC/COMMIT" "$BIN_DIR/COMMIT" 2>/dev/null
  echo "== built $(for t in $LIST; do printf '%s_perf ' "$t"; done)in $BIN_DIR in $((SECONDS - t0)) s"
  check
}

# What the binaries need: only libnccl.so.2 of NCCL, libcudart.so.13, and no RPATH/RUNPATH.
check() {
  local t b
  for t in $LIST; do
    b=$BIN_DIR/${t}_perf
    [ -x "$b" ] || { echo "== $b: missing"; continue; }
    echo "== $b: $(stat -c %s "$b") bytes; NEEDED $(readelf -d "$b" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
    if readelf -d "$b" | grep -qE 'R(UN)?PATH'; then echo "   RPATH: $(readelf -d "$b" | grep -E 'R(UN)?PATH')"; else echo "   no RPATH/RUNPATH"; fi
  done
  du -sh "$BIN_DIR" 2>/dev/null
}


# The run's environment: libnccl.so.2 and libcudart.so.13 on LD_LIBRARY_PATH (the wheel's NCCL first; cudart from
# the toolkit, else torch's nvidia/cu13/lib wheel), NCCL quiet and without NVLink multicast.
run_env() {
  find_nccl_lib
  local cudart="" d
  for d in "$CUDA_HOME/lib64" "$CUDA_HOME/targets/x86_64-linux/lib" "$NCCL_LIB/../../cu13/lib"; do
    [ -e "$d/libcudart.so.13" ] && { cudart=$(cd "$d" && pwd); break; }
  done
  if [ -z "$cudart" ] && ! ldconfig -p 2>/dev/null | grep -q 'libcudart\.so\.13 '; then
    echo "== warning: no libcudart.so.13 in $CUDA_HOME/lib64 or the cu13 wheel" >&2
  fi
  export LD_LIBRARY_PATH=$NCCL_LIB${cudart:+:$cudart}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
  export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
}

gpu_count() {
  if command -v nvidia-smi >/dev/null 2>&1; then nvidia-smi -L 2>/dev/null | grep -c '^GPU'; else echo 0; fi
}

run_args() {
  # shellcheck disable=SC2206
  ARGS=(${NCCL_TESTS_ARGS:--b 8 -e 8M -f 4 -c 1 -n 5 -w 2})
  ARGS=(-t "$NTHREADS" -g "$NGPUS" "${ARGS[@]}")
  VARIANT=""
  [ "$NGPUS" != 1 ] && VARIANT=$VARIANT-g$NGPUS
  [ "$NTHREADS" != 1 ] && VARIANT=$VARIANT-t$NTHREADS
}

# run TEST capture|plain
run() {
  local t=$1 how=$2 bin=$BIN_DIR/${1}_perf
  if [ ! -x "$bin" ]; then
    echo "== no $bin: building it here"
    LIST=$t build || die "build failed"
  fi
  run_env
  run_args
  local need=$((NGPUS * NTHREADS)) have
  have=$(gpu_count)
  if [ "$have" -gt 0 ] && [ "$need" -gt "$have" ]; then
    die "-t $NTHREADS -g $NGPUS needs $need GPUs (one per rank: NCCL refuses the same GPU twice in a communicator); $have here"
  fi
  local cmd=("$bin" "${ARGS[@]}") label=$t$VARIANT
  if [ "$how" = capture ]; then
    find_st
    # shellcheck disable=SC2206
    cmd=("$ST" capture ${ST_ARGS:-} -o "/tmp/nccl-tests-capture-$label" -- "${cmd[@]}")
    rm -rf "/tmp/nccl-tests-capture-$label"
  fi
  echo "== $how $label: NCCL from $NCCL_LIB (wheel $(nccl_wheel_version); built against $(cat "$BIN_DIR/NCCL_VERSION" 2>/dev/null || echo '?'))"
  echo "   LD_LIBRARY_PATH=$LD_LIBRARY_PATH NCCL_DEBUG=$NCCL_DEBUG NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
  echo "   ${cmd[*]}   (timeout $RUN_TIMEOUT s)"
  local t0 rc
  t0=$(date +%s.%N)
  timeout "$RUN_TIMEOUT" "${cmd[@]}" 2>&1
  rc=$?
  echo "== $how $label: exit $rc, $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s wall"
  return $rc
}

# The files the build needs, from the bare clone at NCCL_TESTS_COMMIT, into $1 (bin/ beside them is kept).
tree() {
  local out=${1:?tree needs a folder} git=${NCCL_TESTS_GIT:-/work/.mirror/NVIDIA+nccl-tests/repo}
  mkdir -p "$out" || die "cannot make $out"
  rm -rf "$out/src" "$out/os" "$out/verifiable"
  git --git-dir="$git" archive "$NCCL_TESTS_COMMIT" src os verifiable LICENSE.txt | tar -x -C "$out" \
    || die "no nccl-tests $NCCL_TESTS_COMMIT at $git"
  echo "$NCCL_TESTS_COMMIT" > "$out/COMMIT"
  echo "== nccl-tests $NCCL_TESTS_COMMIT ($(sed -n 's/#define NCCL_TESTS_VERSION "\(.*\)"/\1/p' "$out/src/common.h")) in $out"
}

case "$mode" in
  tree) tree "${2:-}" ;;
  build) build ;;
  check) check ;;
  nccl) find_nccl_lib; echo "$NCCL_LIB/libnccl.so.2 (wheel $(nccl_wheel_version))" ;;
  cmd) run_env; run_args; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH NCCL_DEBUG=$NCCL_DEBUG NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE $BIN_DIR/${TEST}_perf ${ARGS[*]}" ;;
  plain) run "$TEST" plain ;;
  capture) run "$TEST" capture ;;
  plain-all|capture-all)
    fails=0
    for t in $LIST; do run "$t" "${mode%-all}" || fails=$((fails + 1)); done
    echo "== ${mode}: $fails of $(echo $LIST | wc -w) runs exited non-zero"
    [ $fails = 0 ] ;;
  *) echo "usage: bash samples/cuda-projects/nccl_tests.sh tree DIR|build|check|nccl|cmd [TEST]|plain [TEST]|capture [TEST]|plain-all|capture-all" >&2; exit 2 ;;
esac
