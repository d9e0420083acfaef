#!/usr/bin/env bash
# On the GPU machine: what each part of the PyTorch bootstrap's Python dispatch mode (capture/python/
# sitecustomize.py, STREAMTRACE_TORCH_OBSERVER=python) costs on the training-loop benchmark. Runs the loop plain
# and under the capture library with the bootstrap whole and with one part cut out at a time (by editing a copy
# of its text; an edit that no longer finds its text stops the script), three interleaved rounds. Output: one
# line per run, "<variant> train loop 300 steps in <s>".
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
work=$(mktemp -d)
variant() {  # name, then python that edits the text in `s`
  mkdir -p "$work/$1"
  python3 - "$work/$1/sitecustomize.py" "$2" <<'PY'
import sys
s = open("capture/python/sitecustomize.py").read()
def cut(old, new):
    global s
    assert old in s, "the bootstrap no longer has: " + old
    s = s.replace(old, new)
exec(sys.argv[2])
open(sys.argv[1], "w").write(s)
PY
}
variant full 'pass' || exit 1
variant no_blocks 'cut("        torch._C._activate_gpu_trace()\n", "        raise RuntimeError(\"cut\")\n")' || exit 1
variant no_brackets 'cut("setattr(owner, name, bracketed(lambda args, fixed=prefix + name: fixed, method))", "pass")' || exit 1
variant no_mode 'cut("        mode.__enter__()\n", "        pass\n")' || exit 1
variants="full no_blocks no_brackets no_mode"
if [ -n "${OLD_BOOTSTRAP:-}" ]; then  # another version of the bootstrap to compare with, such as the last release's
  mkdir -p "$work/previous" && cp "$OLD_BOOTSTRAP" "$work/previous/sitecustomize.py" && variants="$variants previous"
fi
for round in 1 2 3; do
  python3 benches/torch_train_loop.py | sed "s/^/plain       /"
  for v in $variants; do
    mkdir -p "$work/out-$v"
    STREAMTRACE_TORCH_OBSERVER=python CUDA_INJECTION64_PATH=$repo/.gpu/bin/libstreamtrace_capture.so STREAMTRACE_OUTPUT="$work/out-$v/trace.%p.json" \
      PYTHONPATH="$work/$v" python3 benches/torch_train_loop.py 2>/dev/null | sed "s/^/$(printf '%-11s' $v) /"
  done
done
wc -c "$work"/out-*/trace.*.json
