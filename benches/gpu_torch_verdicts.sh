#!/usr/bin/env bash
# On the GPU machine: every PyTorch sample (each `# VARIANT: ARG` too) captured at tier T2, JOBS at a time
# (default 8; the samples use no network port, their process groups a file store), and each verdict compared with
# the program's GROUND_TRUTH line: "race" wants at least one race, "clean" none. One line per run, then a count
# of mismatches; exits 1 when any run mismatched, printed no ground truth or timed out.
#   TORCH="a b"      only these samples (names without .py)
#   ALLOC_CONF=...   PYTORCH_CUDA_ALLOC_CONF for every run (expandable_segments:True, as real jobs often set)
#   KEEP="a b"       bring the traces of these samples (all their variants) back in $OUT/verdicts-LABEL.tar.gz
#   LABEL=...        names this pass in the output (several passes in one call)
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
st=$repo/.gpu/bin/streamtrace
label=${LABEL:-default}
work=$(mktemp -d)
[ -z "${ALLOC_CONF:-}" ] || export PYTORCH_CUDA_ALLOC_CONF=$ALLOC_CONF

# The observer is built by the first capture of a torch program; build it once before the parallel runs.
$st capture --no-analyze -o "$work/warm" -- python3 -c "import torch; torch.ones(1, device='cuda')" > /dev/null 2>&1

runs=()
programs=(samples/torch/*.py)
[ -z "${TORCH:-}" ] || programs=($(printf 'samples/torch/%s.py ' $TORCH))
for py in "${programs[@]}"; do
  grep -q GROUND_TRUTH "$py" || continue
  for variant in "" $(sed -n 's|^# VARIANT: ||p' "$py"); do
    runs+=("$py ${variant:--}")
  done
done

one() {  # SCRIPT VARIANT ("-": none)
  local py=$1 variant=${2#-} name truth races
  name=$(basename "$py" .py)${variant:+-$variant}
  timeout 300 $st capture -o "$work/$name" -- python3 "$py" $variant > "$work/$name.log" 2>&1
  local status=$?
  truth=$(grep -o 'GROUND_TRUTH [a-z]*' "$work/$name.log" | head -1 | cut -d' ' -f2)
  # A program of several processes (DataLoader workers) gets a report per trace and a job summary of them all.
  races=$(sed -n 's/^JOB SUMMARY: streamtrace: [0-9]* traces*: \([0-9]*\) race.*/\1/p' "$work/$name.log" | head -1)
  [ -n "$races" ] || races=$(grep -o '^SUMMARY: streamtrace: [0-9]* race' "$work/$name.log" | head -1 | grep -o '[0-9][0-9]*')
  local verdict=MISMATCH
  # A capture range sample's truth is per range ("whole program: ..."): samples/torch/capture_range_*.py. No
  # truth at all (the program failed or timed out) stays a mismatch.
  case "$truth" in race | clean | "") ;; *) verdict="not compared" ;; esac
  if [ "$truth" = race ] && [ "${races:-0}" -gt 0 ]; then verdict=ok; fi
  if [ "$truth" = clean ] && [ -n "$races" ] && [ "$races" -eq 0 ]; then verdict=ok; fi
  # A capture that stopped or never started finds nothing: its "clean" says nothing of the program.
  if grep -qE '^streamtrace: capture (disabled|stopped)' "$work/$name.log"; then verdict=MISMATCH truth="$truth, capture off"; fi
  echo "$label $name: truth ${truth:-none}, races ${races:-none}, exit $status: $verdict"
}
export -f one
export st work label
started=$(date +%s)
# Each line as its run ends (a call cut off by its time limit still shows those), sorted at the end.
printf '%s\n' "${runs[@]}" | xargs -P "${JOBS:-8}" -L 1 bash -c 'one "$0" "$1"' | tee "$work/ended.txt"
sort "$work/ended.txt" > "$work/verdicts.txt"
mismatches=$(grep -c ': MISMATCH$' "$work/verdicts.txt")
echo "$label: ${#runs[@]} runs in $(( $(date +%s) - started )) s, $mismatches mismatched${ALLOC_CONF:+ (PYTORCH_CUDA_ALLOC_CONF=$ALLOC_CONF)}"
for name in ${KEEP:-}; do
  for trace in "$work"/$name/trace.* "$work"/$name-*/trace.*; do
    [ -e "$trace" ] || continue
    run=$(basename "$(dirname "$trace")")
    mkdir -p "$work/keep"
    cp "$trace" "$work/keep/$run.$(basename "$trace")"
    cp "$work/$run.log" "$work/keep/$run.log"
  done
done
[ -d "$work/keep" ] && tar -czf "$OUT/verdicts-$label.tar.gz" -C "$work/keep" .
cp "$work/verdicts.txt" "$OUT/verdicts-$label.txt"
[ "$mismatches" = 0 ]
