#!/usr/bin/env bash
# On the GPU machine (issue 24 items 1 and 5), one run for both:
# 1. The nested-op samples (samples/torch/saved_hook_clone_*.py) captured with the native observer and with the
#    Python dispatch mode, into $OUT/torch-t2/ and $OUT/torch-t2-python-mode/ (the traces and their capture
#    logs, named as samples/capture/ names them), each with its ground truth, the verdict and how the clones'
#    op records nest in mul's.
# 2. The native observer's cache: benches/torch_train_loop.py (a short PyTorch script) timed from process start to
#    exit, plain; captured into a fresh directory with an empty observer cache (cold: the build included); into
#    another fresh directory, warm; and into a third one with other options (--no-call-sites,
#    STREAMTRACE_COST_DETAIL=1), warm. ROUNDS interleaved rounds (default 3), then a table with the medians
#    and their ratios to plain. Each run's observer line (built, waited, loaded) is checked: a warm run that
#    builds is a failure of the cache and is said so.
# Output: $OUT/torch-t2/, $OUT/torch-t2-python-mode/, $OUT/observer-cache.txt (the table).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
st="timeout ${STEP_TIMEOUT:-300} $repo/.gpu/bin/streamtrace"  # every run under a time limit
: "${OUT:?set OUT to the folder for the results}"
mkdir -p "$OUT/torch-t2" "$OUT/torch-t2-python-mode"
work=$(mktemp -d /tmp/gpu-observer.XXXXXX)

# How the clones' op records sit in the trace: `clone.default` ends inside an open `mul.Tensor` frame of its thread.
nesting() {
  python3 - "$1" <<'EOF'
import json, sys
open_ops, nested, top = {}, 0, 0
for line in open(sys.argv[1]):
    try:
        record = json.loads(line)
    except ValueError:
        continue
    kind, thread = record.get("type"), record.get("thread")
    if kind == "op_begin":
        open_ops.setdefault(thread, []).append(None)
    elif kind == "op_end" and open_ops.get(thread):
        open_ops[thread].pop()
        if record.get("name") == "clone.default":
            nested, top = (nested + 1, top) if open_ops[thread] else (nested, top + 1)
print("clone ops nested in an op: %d, at top level: %d" % (nested, top))
EOF
}

echo "== nested-op samples"
for mode in native python; do
  dest=$OUT/torch-t2 && [ $mode = python ] && dest=$OUT/torch-t2-python-mode
  for name in saved_hook_clone_after_wait saved_hook_clone_no_wait; do
    dir=$work/sample-$mode-$name
    if [ $mode = python ]; then
      STREAMTRACE_TORCH_OBSERVER=python $st capture -o "$dir" -- python3 "samples/torch/$name.py" > "$dest/$name.capture.log" 2>&1
    else
      $st capture -o "$dir" -- python3 "samples/torch/$name.py" > "$dest/$name.capture.log" 2>&1
    fi
    cp "$dir"/trace.*.json "$dest/$name.json"
    echo "$mode $name: $(grep -o 'GROUND_TRUTH [a-z]*' "$dest/$name.capture.log") / $(grep -o 'SUMMARY: streamtrace: [0-9]* race' "$dest/$name.capture.log") / $(nesting "$dest/$name.json") / $(grep -o 'tier T2, [A-Za-z ]*' "$dest/$name.capture.log" | head -1)"
    $st analyze --format json "$dest/$name.json" | python3 -c '
import json, sys
for race in json.load(sys.stdin)["races"]:
    a, b = race["earlier"]["site"], race["later"]["site"]
    print("   %s: %s %s line %s || %s %s line %s, allocation %s" % (race["kind"], a.get("region"), a["stream"].get("kind"),
          (a.get("source") or {}).get("line"), b.get("region"), b["stream"].get("kind"), (b.get("source") or {}).get("line"),
          (race.get("allocation") or {}).get("label")))'
  done
done

echo "== observer cache: benches/torch_train_loop.py, process start to exit, ${ROUNDS:-3} interleaved rounds"
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
table=$OUT/observer-cache.txt
: > "$work/times"
for round in $(seq 1 "${ROUNDS:-3}"); do
  cache=$work/cache-$round  # empty: the first capture of the round builds into it
  start=$(date +%s%N); timeout "${STEP_TIMEOUT:-300}" python3 benches/torch_train_loop.py > /dev/null 2>&1; echo "plain $(ms "$start")" >> "$work/times"
  for variant in cold warm warm-other-options; do
    log=$work/$variant-$round.log
    start=$(date +%s%N)
    if [ $variant = warm-other-options ]; then
      STREAMTRACE_OBSERVER_CACHE=$cache STREAMTRACE_COST_DETAIL=1 $st capture --no-call-sites -o "$work/out-$variant-$round" -- \
        python3 benches/torch_train_loop.py > "$log" 2>&1
    else
      STREAMTRACE_OBSERVER_CACHE=$cache $st capture -o "$work/out-$variant-$round" -- python3 benches/torch_train_loop.py > "$log" 2>&1
    fi
    echo "$variant $(ms "$start")" >> "$work/times"
    built=$(grep -c 'building the native PyTorch observer' "$log")
    native=$(grep -c 'tier T2, native observer' "$log")
    echo "round $round $variant: $(tail -1 "$work/times" | cut -d' ' -f2) ms, observer built $built time(s), native observer $native"
    if [ "$variant" != cold ] && [ "$built" != 0 ]; then echo "   CACHE MISS: a warm capture built the observer"; fi
    if [ "$native" = 0 ]; then echo "   NO NATIVE OBSERVER:"; grep streamtrace "$log" | head -5; fi
  done
done
python3 - "$work/times" <<'EOF' | tee "$table"
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    variant, ms = line.split()
    runs.setdefault(variant, []).append(int(ms) / 1000)
plain = statistics.median(runs["plain"])
print("| run | per round (s) | median (s) | of plain |")
print("|---|---|---|---|")
for variant in ("plain", "cold", "warm", "warm-other-options"):
    times = runs.get(variant, [])
    if times:
        median = statistics.median(times)
        print("| %s | %s | %.2f | %.2fx |" % (variant, " ".join("%.2f" % t for t in times), median, median / plain))
EOF
grep -h "native observer cost" -A6 "$work"/warm-other-options-1.log | head -7
rm -rf "$work"
