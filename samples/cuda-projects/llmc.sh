#!/usr/bin/env bash
# Karpathy's llm.c (train_gpt2.cu: GPT-2 training in CUDA C++ with cuBLASLt, bf16) under streamtrace, on the GPU
# machine: a real public program, correct, whose verdict must be clean; and a control built from the same source
# with `nvcc --default-stream per-thread`, which races where EXPECTED.md beside this script says. Its sources are
# not in this repository: `tree` writes the files the build needs (train_gpt2.cu and llmc/, of the commit below,
# with a CUDA 13 fix) from a bare clone of github.com/karpathy/llm.c into a folder carried to the GPU machine.
#
# On the development machine:
#   samples/cuda-projects/llmc.sh tree .gpu/llmc     the sources, from LLMC_GIT (default /work/.mirror/karpathy+llm.c/repo)
# On the GPU machine, from the repository root (LLMC_SRC: the tree, default .gpu/llmc):
#   bash samples/cuda-projects/llmc.sh build           build /tmp/llmc/train_gpt2cu and write the tiny data + tokenizer
#   bash samples/cuda-projects/llmc.sh plain           run a few training steps from random init (builds first if needed)
#   bash samples/cuda-projects/llmc.sh capture         the same under `streamtrace capture -o /tmp/llmc-capture`
#   bash samples/cuda-projects/llmc.sh plain-ckpt      the run plus checkpoints (device_to_file: pinned double buffer, D2H async)
#   bash samples/cuda-projects/llmc.sh capture-ckpt    that under capture (-o /tmp/llmc-capture-ckpt)
#   bash samples/cuda-projects/llmc.sh capture-resume  resume from the checkpoint of a *-ckpt run (file_to_device:
#                                         pinned double buffer, H2D async) under capture; makes it first if needed
#   bash samples/cuda-projects/llmc.sh cmd             only print the run command
# The control, /tmp/llmc/train_gpt2cu_ptds: the legacy-stream work llm.c mixes into main_stream (a kernel at
# llmc/attention.cuh:266, every cudaMemset and cudaMemcpy) then runs on the per-thread default stream, which
# nothing orders against main_stream:
#   bash samples/cuda-projects/llmc.sh build-ptds | plain-ptds | capture-ptds   (capture -o /tmp/llmc-capture-ptds)
# Environment: LLMC_WORK (default /tmp/llmc), LLMC_MODEL (default d6: 6 layers, C=384, ~30M params; llm.c's
# "dN" descriptors accept N in 6 12 24 36 48 60 72 84 only), LLMC_B (4), LLMC_T (256), LLMC_STEPS (5),
# LLMC_ACCUM (2: micro-steps per step, -d = B*T*ACCUM), ST_ARGS (extra `streamtrace capture` options),
# RUN_TIMEOUT (300). The traces of 2026-12-07 are in samples/capture/cuda-projects/ (tests/capture.rs).
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
SRC=${LLMC_SRC:-$ROOT/.gpu/llmc}
LLMC_COMMIT=f1e2ace651495b74ae22d45d1723443fd00ecd3a
W=${LLMC_WORK:-/tmp/llmc}
BIN=$W/train_gpt2cu
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
MODEL=${LLMC_MODEL:-d6}
B=${LLMC_B:-4}
T=${LLMC_T:-256}
STEPS=${LLMC_STEPS:-5}
ACCUM=${LLMC_ACCUM:-2}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
mode=${1:-}
# the per-thread-default-stream variant: its own binary, the same data
case "$mode" in *-ptds) BIN=$W/train_gpt2cu_ptds; EXTRA_NVCC=(--default-stream per-thread) ;; *) EXTRA_NVCC=() ;; esac

# find_st: the streamtrace binary the project scripts run (sets ST).
source "$ROOT/samples/find_streamtrace.sh"

die() { echo "llmc.sh: $*" >&2; exit 2; }

build() {
  mkdir -p "$W" "$W/run" "$W/data" || die "cannot make $W"
  [ -x "$NVCC" ] || die "no nvcc at $NVCC"
  echo "== nvcc: $("$NVCC" --version | tail -1)"
  echo "== llm.c commit $(cat "$SRC/COMMIT")"
  # -lnvidia-ml: llmc/mfu.h uses NVML whenever <nvml.h> is found (it is, in the toolkit). Link against the
  # toolkit's stub (SONAME libnvidia-ml.so.1: the driver's library is loaded at run time); if there is no stub
  # and no unversioned libnvidia-ml.so, make a stub of the symbols llm.c uses.
  local nvml_dir=""
  if [ -e "$CUDA_HOME/lib64/stubs/libnvidia-ml.so" ]; then
    nvml_dir=$CUDA_HOME/lib64/stubs
  elif [ -e "$CUDA_HOME/targets/x86_64-linux/lib/stubs/libnvidia-ml.so" ]; then
    nvml_dir=$CUDA_HOME/targets/x86_64-linux/lib/stubs
  elif ! ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml\.so '; then
    nvml_dir=$W/nvml-stub; mkdir -p "$nvml_dir"
    local f
    for f in nvmlDeviceGetClockInfo nvmlDeviceGetCurrentClocksThrottleReasons nvmlDeviceGetFanSpeed \
             nvmlDeviceGetHandleByIndex_v2 nvmlDeviceGetMaxClockInfo nvmlDeviceGetPowerManagementLimit \
             nvmlDeviceGetPowerUsage nvmlDeviceGetSamples nvmlDeviceGetTemperature \
             nvmlDeviceGetTemperatureThreshold nvmlErrorString nvmlInit_v2; do echo "void $f(void){}"; done > "$nvml_dir/stub.c"
    gcc -shared -fPIC -Wl,-soname,libnvidia-ml.so.1 "$nvml_dir/stub.c" -o "$nvml_dir/libnvidia-ml.so" || die "nvml stub"
  fi
  # What the Makefile's `make train_gpt2cu USE_CUDNN=0 NO_MULTI_GPU=1 NO_USE_MPI=1 GPU_COMPUTE_CAPABILITY=90`
  # runs (PRECISION=BF16 default => -DENABLE_BF16; no -DENABLE_CUDNN, -DMULTI_GPU, -DUSE_MPI), plus -g -lineinfo,
  # and an rpath to the toolkit's libraries (cuBLAS/cuBLASLt). cudart is linked statically, nvcc's default.
  BUILD_CMD=("$NVCC" --threads=0 --use_fast_math -std=c++17 -O3 -g -lineinfo
    --generate-code 'arch=compute_90,code=[compute_90,sm_90]' -DENABLE_BF16 ${EXTRA_NVCC[@]+"${EXTRA_NVCC[@]}"}
    train_gpt2.cu -L"$CUDA_HOME/lib64" ${nvml_dir:+-L"$nvml_dir"} -lcublas -lcublasLt -lnvidia-ml
    -Xlinker -rpath -Xlinker "$CUDA_HOME/lib64" -o "$BIN")
  echo "== build (in $SRC): ${BUILD_CMD[*]}"
  local t0=$SECONDS
  (cd "$SRC" && "${BUILD_CMD[@]}") || die "build failed"
  echo "== built $BIN in $((SECONDS - t0)) s"
  make_data
}

# llm.c's token files (llmc/dataloader.h): a header of 256 int32 (magic 20240520, version 1, token count), then
# the tokens as uint16. Random ids < 50257. The train loader shuffles whole B*T samples, so the file holds 64 of
# them (+1 token); val holds 8. And a tokenizer file (llmc/tokenizer.h: 256 uint32 header, magic 20240328,
# version 2, vocab 50257, EOT 50256; then each token as a length byte and its bytes), because without
# gpt2_tokenizer.bin train_gpt2.cu samples from an uninitialized eot_token (main(): `int eot_token =
# tokenizer.eot_token;` after tokenizer_init left it unset), which token_check then rejects or not by chance.
make_data() {
  mkdir -p "$W/data" "$W/run"
  python3 - "$W" "$B" "$T" <<'EOF' || die "data generation failed"
import random, struct, sys
w, B, T = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def tokens(path, nsamples, seed):
    r = random.Random(seed)
    ntok = nsamples * B * T + 1
    hdr = [0] * 256
    hdr[0], hdr[1], hdr[2] = 20240520, 1, ntok
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *hdr))
        f.write(struct.pack("<%dH" % ntok, *[r.randrange(50257) for _ in range(ntok)]))
    print("wrote %s: %d tokens" % (path, ntok))
tokens(w + "/data/train.bin", 64, 1)
tokens(w + "/data/val.bin", 8, 2)
hdr = [0] * 256
hdr[0], hdr[1], hdr[2], hdr[3] = 20240328, 2, 50257, 50256
with open(w + "/run/gpt2_tokenizer.bin", "wb") as f:
    f.write(struct.pack("<256I", *hdr))
    for i in range(50257):
        s = b"<|endoftext|>" if i == 50256 else (" t%d" % i).encode()
        f.write(bytes([len(s)]) + s)
print("wrote %s/run/gpt2_tokenizer.bin (synthetic: token i decodes to ' t<i>')" % w)
EOF
}

# The run: from random init (-e d6), B x T micro-batches, ACCUM micro-steps per step (-d), STEPS steps (-x),
# val loss at steps 0, 3 and the last (-v 3) over 2 val batches (-m 2), sampling at step 3 and the last (-s 3)
# for 8 tokens (-g 8: 7 forward passes with B=1), no checkpoints (no -o: no log dir, no checkpoint), no
# HellaSwag (its file is absent; -h 0). It runs in $W/run, where the tokenizer is.
run_args() {
  ARGS=(-i "$W/data/train.bin" -j "$W/data/val.bin" -e "$MODEL" -b "$B" -t "$T" -d $((B * T * ACCUM))
        -x "$STEPS" -v 3 -m 2 -s 3 -g 8 -h 0 -y 0)
}


# run LABEL [capture DIR] -- extra program args
run() {
  local label=$1; shift
  local capdir=""
  if [ "${1:-}" = capture ]; then capdir=$2; shift 2; fi
  [ "${1:-}" = "--" ] && shift
  [ -x "$BIN" ] && [ -e "$W/data/train.bin" ] && [ -e "$W/run/gpt2_tokenizer.bin" ] || build
  run_args
  local cmd=("$BIN" "${ARGS[@]}" "$@")
  if [ -n "$capdir" ]; then
    find_st
    # shellcheck disable=SC2206
    cmd=("$ST" capture ${ST_ARGS:-} -o "$capdir" -- "${cmd[@]}")
  fi
  echo "== $label (cwd $W/run, timeout $RUN_TIMEOUT s):"
  echo "   ${cmd[*]}"
  local t0 rc
  t0=$(date +%s.%N)
  (cd "$W/run" && timeout "$RUN_TIMEOUT" "${cmd[@]}") 2>&1
  rc=$?
  echo "== $label: exit $rc, $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s wall"
  return $rc
}

# The files the build needs, from the bare clone at LLMC_COMMIT, into $1; with the one change CUDA 13 needs: its
# cudaMemAdvise takes a cudaMemLocation where 12 took a device id (llmc/cuda_utils.cuh, only on the managed
# fallback after an out-of-memory cudaMalloc).
tree() {
  local out=${1:?tree needs a folder} git=${LLMC_GIT:-/work/.mirror/karpathy+llm.c/repo}
  mkdir -p "$out" || die "cannot make $out"
  git --git-dir="$git" archive "$LLMC_COMMIT" train_gpt2.cu llmc LICENSE | tar -x -C "$out" || die "no llm.c at $git"
  echo "$LLMC_COMMIT" > "$out/COMMIT"
  python3 - "$out/llmc/cuda_utils.cuh" <<'PY' || die "the CUDA 13 fix did not apply"
import sys
path = sys.argv[1]
text = open(path).read()
old = "cudaCheck_(cudaMemAdvise(*out, bytes, cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId), file, line);"
new = """#if CUDART_VERSION >= 13000
        cudaMemLocation host = {};
        host.type = cudaMemLocationTypeHost;
        cudaCheck_(cudaMemAdvise(*out, bytes, cudaMemAdviseSetPreferredLocation, host), file, line);
#else
        %s
#endif""" % old
assert text.count(old) == 1, "the line to fix is not there once"
open(path, "w").write(text.replace(old, new))
PY
  echo "== llm.c $LLMC_COMMIT in $out"
}

ckpt_args=(-o "$W/ckpt" -n 4)

case "$mode" in
  tree) tree "${2:-}" ;;
  build|build-ptds) build ;;
  plain-ptds) run plain-ptds ;;
  capture-ptds) run capture-ptds capture /tmp/llmc-capture-ptds ;;
  cmd) run_args; echo "cd $W/run && $BIN ${ARGS[*]}" ;;
  plain) run plain ;;
  capture) run capture capture /tmp/llmc-capture ;;
  plain-ckpt) rm -rf "$W/ckpt"; run plain-ckpt -- "${ckpt_args[@]}" ;;
  capture-ckpt) rm -rf "$W/ckpt"; run capture-ckpt capture /tmp/llmc-capture-ckpt -- "${ckpt_args[@]}" ;;
  capture-resume)
    if ! ls "$W"/ckpt/DONE_* >/dev/null 2>&1; then
      rm -rf "$W/ckpt"; run plain-ckpt -- "${ckpt_args[@]}" || die "making the checkpoint failed"
    fi
    # -y 1 resumes from the newest DONE_ step in $W/ckpt (load_state: file_to_device of m, v, master weights);
    # -x STEPS+2 trains two more steps; -n 0 writes no new checkpoint.
    STEPS=$((STEPS + 2)) run capture-resume capture /tmp/llmc-capture-resume -- \
      -o "$W/ckpt" -y 1 -n 0 ;;
  *) echo "usage: bash samples/cuda-projects/llmc.sh tree DIR|build|plain|capture|plain-ckpt|capture-ckpt|capture-resume|cmd|build-ptds|plain-ptds|capture-ptds" >&2; exit 2 ;;
esac
