#!/usr/bin/env bash
# Karpathy's nanoGPT (train.py: GPT-2 training in PyTorch with mixed precision, float16 through a GradScaler or
# bfloat16, fused AdamW, batches pinned and copied with non_blocking=True, checkpoints) under streamtrace, on the
# GPU machine: a real public program, correct, whose verdict must be clean. Its sources are not in this
# repository: `tree` writes train.py, model.py, configurator.py and LICENSE of the commit below from a bare clone
# of github.com/karpathy/nanoGPT into a folder carried to the GPU machine.
#
# On the development machine:
#   samples/torch-projects/nanogpt.sh tree .gpu/nanogpt     the sources, from NANOGPT_GIT
#                                          (default /work/.mirror/karpathy+nanoGPT/repo)
# On the GPU machine, from the repository root (NANOGPT_SRC: the tree, default .gpu/nanogpt):
#   bash samples/torch-projects/nanogpt.sh plain [DTYPE]     6 iterations of a 2-layer model on random tokens
#                                          (DTYPE float16, the default, or bfloat16), evaluation every 3, compile off
#   bash samples/torch-projects/nanogpt.sh capture [DTYPE]   the same under `streamtrace capture -o /tmp/nanogpt-DTYPE`
# The random tokens (data/rand/{train,val}.bin beside train.py) are written on first use. ST_ARGS: extra
# `streamtrace capture` options. The trace of 2026-12-07 is samples/capture/torch-projects/nanogpt-float16.stbin.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
SRC=${NANOGPT_SRC:-$ROOT/.gpu/nanogpt}
NANOGPT_COMMIT=3adf61e154c3fe3fca428ad6bc3818b27a3b8291
mode=${1:-}
DTYPE=${2:-float16}

# find_st: the streamtrace binary the project scripts run (sets ST).
source "$ROOT/samples/find_streamtrace.sh"

die() { echo "nanogpt.sh: $*" >&2; exit 2; }

tree() {
  local out=${1:?tree needs a folder} git=${NANOGPT_GIT:-/work/.mirror/karpathy+nanoGPT/repo}
  mkdir -p "$out" || die "cannot make $out"
  git --git-dir="$git" archive "$NANOGPT_COMMIT" train.py model.py configurator.py LICENSE | tar -x -C "$out" \
    || die "no nanoGPT $NANOGPT_COMMIT at $git"
  echo "$NANOGPT_COMMIT" > "$out/COMMIT"
}

# nanoGPT's memory-mapped uint16 token files: 200,000 random tokens of GPT-2's vocabulary each.
data() {
  mkdir -p "$SRC/data/rand" || die "cannot make $SRC/data/rand"
  [ -e "$SRC/data/rand/val.bin" ] || python3 -c "
import numpy as np, sys
rng = np.random.default_rng(0)
for split in ('train', 'val'):
    rng.integers(0, 50000, 200000, dtype=np.uint16).tofile(sys.argv[1] + '/' + split + '.bin')" "$SRC/data/rand" \
    || die "cannot write the tokens"
}

run() {  # plain|capture
  [ -e "$SRC/train.py" ] || die "no nanoGPT in $SRC (run \`$0 tree $SRC\` on the development machine)"
  data
  local args=(--dataset=rand --n_layer=2 --n_head=2 --n_embd=64 --block_size=64 --batch_size=8 --max_iters=6
              --eval_interval=3 --eval_iters=2 --log_interval=1 --compile=False --gradient_accumulation_steps=2
              --out_dir=/tmp/nanogpt-out --wandb_log=False --dtype="$DTYPE")
  local cmd=(python3 train.py "${args[@]}")
  if [ "$1" = capture ]; then
    find_st
    rm -rf "/tmp/nanogpt-$DTYPE"
    # shellcheck disable=SC2206
    cmd=("$ST" capture ${ST_ARGS:-} -o "/tmp/nanogpt-$DTYPE" -- "${cmd[@]}")
  fi
  echo "== ${cmd[*]}"
  (cd "$SRC" && timeout 300 "${cmd[@]}")
}

case "$mode" in
  tree) tree "${2:-}" ;;
  plain | capture) run "$mode" ;;
  *) echo "usage: bash samples/torch-projects/nanogpt.sh tree DIR|plain [DTYPE]|capture [DTYPE]" >&2; exit 2 ;;
esac
