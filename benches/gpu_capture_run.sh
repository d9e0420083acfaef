#!/usr/bin/env bash
# On the GPU machine, in one call: the CUDA samples under capture (samples/cuda/run_all.sh; SKIP_CUDA=1 leaves
# them out), the PyTorch samples under capture (TORCH="a b" picks some, SKIP_TORCH=1 none), and the overhead
# benchmarks (benches/gpu_launch_parts.sh and benches/gpu_train_rounds.sh, ROUNDS rounds each, default 5; ROUNDS=0
# leaves them out). The device tool brings back at most 8 files, so
# the traces and logs come back as one archive, $OUT/captures.tar.gz (cuda/NAME.json|log, torch/NAME.json|log),
# and the benchmark lines as $OUT/overhead.txt.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
work=$(mktemp -d)
mkdir -p "$work/cuda" "$work/torch"
[ -n "${SKIP_CUDA:-}" ] || bash samples/cuda/run_all.sh "$work/cuda" 2>&1 | tail -40
if [ -z "${SKIP_TORCH:-}" ]; then
  programs=(samples/torch/*.py)
  [ -z "${TORCH:-}" ] || programs=($(printf 'samples/torch/%s.py ' $TORCH))
  for py in "${programs[@]}"; do
    # A program with a line `# VARIANT: ARG` also runs with ARG, into NAME-ARG.json.
    for variant in "" $(sed -n 's|^# VARIANT: ||p' "$py"); do
      name=$(basename "$py" .py)${variant:+-$variant}
      .gpu/bin/streamtrace capture -o "/tmp/t-$name" -- python3 "$py" $variant > "$work/torch/$name.log" 2>&1
      cp /tmp/t-$name/trace.*.json "$work/torch/$name.json" 2>/dev/null
      echo "torch $name: $(grep -c . "$work/torch/$name.json" 2>/dev/null) records; $(grep -o 'SUMMARY.*races' "$work/torch/$name.log" | head -1)"
    done
  done
fi
tar -czf "$OUT/captures.tar.gz" -C "$work" cuda torch
[ "${ROUNDS:-5}" = 0 ] && exit 0
{
  bash benches/gpu_launch_parts.sh "${ROUNDS:-5}"
  bash benches/gpu_train_rounds.sh "${ROUNDS:-5}"
  .gpu/bin/streamtrace analyze /tmp/t2loop/trace.*.json | grep -E "Capture cost|tier|SUMMARY|warning"
} 2>&1 | tee "$OUT/overhead.txt"
