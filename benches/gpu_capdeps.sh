#!/usr/bin/env bash
# On the GPU machine, from the repository root, in one call: what the recording of a capture's manual dependency
# edits (cuStreamGetCaptureInfo_v2/_v3, cuStreamUpdateCaptureDependencies and _v2) needs from a real driver. Needs
# .gpu/ carrying streamtrace.gz and libstreamtrace_capture.so (benches/gpu_env.sh), cuda-samples.tar.gz
# (samples/cuda-samples/build.sh) for part 2, and python3.
#   1. samples/cuda/capture_update_deps.cu and its variants (run_all.sh builds them with nvcc and captures them):
#      GROUND_TRUTH against the verdict (set: race between write_kernel and read_kernel; after, add: clean), the
#      capture_info / capture_deps_* records each trace holds, and json.skipped_inconsistent (0 expected). The other
#      graph samples run beside them: their verdicts must not change.
#   2. NVIDIA's graphConditionalNodes, captured in both encodings: clean, json.skipped_inconsistent 0 (1 before:
#      the conditional node added to the capturing stream's graph), and the capture_info / capture_deps_set
#      records of capturedWhileGraph.
# Writes $OUT/capdeps-summary.txt and $OUT/capdeps.tar.gz (traces, reports, logs: the JSON traces of part 1 are the
# ones to commit under samples/capture/cuda/). Each run has RUN_TIMEOUT seconds (default 120).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
export STREAMTRACE_TRACE_FORMAT=json
st=$repo/.gpu/bin/streamtrace
work=$(mktemp -d)
res=$work/capdeps
mkdir -p "$res/cuda" "$res/cuda-samples"
timeout_s=${RUN_TIMEOUT:-120}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$res/machine.txt" 2>&1
nvcc --version | tail -2 >> "$res/machine.txt" 2>&1

# 1: our samples, through run_all.sh (it builds, captures and runs plain; traces as NAME.json).
samples="capture_update_deps graph_capture_fork_race graph_capture_fork_joined graph_explicit_edge graph_replay_wait"
CUDA="$samples" SAMPLE_TIMEOUT=$timeout_s bash samples/cuda/run_all.sh "$res/cuda" > "$res/cuda/run_all.txt" 2>&1
for trace in "$res/cuda"/*.json; do
  [ -e "$trace" ] || continue
  label=$(basename "$trace" .json)
  timeout "$timeout_s" "$st" analyze "$trace" --format json -o "$res/cuda/$label.report.json" > /dev/null 2> "$res/cuda/$label.analyze.err"
  echo $? > "$res/cuda/$label.analyze_status"
  timeout "$timeout_s" "$st" analyze "$trace" > "$res/cuda/$label.report.txt" 2>&1
done

# 2: graphConditionalNodes, captured as JSON and as binary.
tar -xzf .gpu/cuda-samples.tar.gz -C "$work" || echo "cannot unpack .gpu/cuda-samples.tar.gz" >> "$res/machine.txt"
bin=$work/cuda-samples/bin/graphConditionalNodes
torch_libs=$(python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13", "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${torch_libs:+:$torch_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for encoding in json binary; do
  label=graphConditionalNodes-$encoding
  [ -x "$bin" ] || { echo "no graphConditionalNodes" > "$res/cuda-samples/$label.status"; continue; }
  dir=$work/trace-$label
  mkdir -p "$dir"
  (cd "$work" && timeout -k 5 "$timeout_s" "$bin" > "$res/cuda-samples/$label.plain.out" 2>&1)
  plain=$?
  (cd "$work" && STREAMTRACE_TRACE_FORMAT=$encoding timeout -k 5 "$timeout_s" "$st" capture -o "$dir" -- "$bin" \
    > "$res/cuda-samples/$label.captured.out" 2> "$res/cuda-samples/$label.capture.log")
  captured=$?
  echo "$plain $captured" > "$res/cuda-samples/$label.status"
  traces=("$dir"/trace.*)
  [ -e "${traces[0]}" ] || continue
  cp "${traces[0]}" "$res/cuda-samples/$label.${traces[0]##*.}"
  timeout "$timeout_s" "$st" analyze "${traces[0]}" --format json -o "$res/cuda-samples/$label.report.json" \
    > /dev/null 2> "$res/cuda-samples/$label.analyze.err"
  echo $? > "$res/cuda-samples/$label.analyze_status"
  # The binary trace as JSON, to count its records like the JSON one's.
  [ "$encoding" = binary ] && "$st" convert "${traces[0]}" "$res/cuda-samples/$label.converted.json" \
    > /dev/null 2>> "$res/cuda-samples/$label.analyze.err"
done

python3 - "$res" > "$res/summary.txt" <<'PY'
import json, os, re, sys
res = sys.argv[1]
def traces_of(report):
    return report.get("traces", [report]) if report.get("schema") == "streamtrace.job" else [report]
def counters(report):
    out = {}
    for t in traces_of(report):
        for c in t.get("import", []):
            if c.get("count") and (c.get("severity") == "data_loss" or c["name"] in ("json.skipped_inconsistent", "graphs.failed_captures")):
                out[c["name"]] = out.get(c["name"], 0) + c["count"]
    return out or "none"
def verdict(path):
    try:
        report = json.load(open(path))
    except Exception as e:
        return f"no report ({type(e).__name__})"
    races = sum(t["summary"]["races"] for t in traces_of(report))
    return f'{report.get("verdict")} | {races} races | {counters(report)}'
def records(path):
    kinds = {}
    try:
        for line in open(path):
            kind = re.search(r'"type":"(capture_info|capture_deps_set|capture_deps_add|graph_node)"', line)
            if kind:
                kinds[kind.group(1)] = kinds.get(kind.group(1), 0) + 1
    except OSError:
        return "no trace"
    return ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) or "none of them"
print("label | expected | verdict | races | counters | capture records")
for label in sorted(f[:-5] for f in os.listdir(f"{res}/cuda") if f.endswith(".json") and not f.endswith(".report.json")):
    out = open(f"{res}/cuda/{label}.out", errors="replace").read()
    truth = re.search(r"GROUND_TRUTH (\w+)", out)
    print(f"{label} | {truth.group(1) if truth else 'no GROUND_TRUTH'} | {verdict(f'{res}/cuda/{label}.report.json')} | {records(f'{res}/cuda/{label}.json')}")
for encoding in ("json", "binary"):
    label = f"graphConditionalNodes-{encoding}"
    trace = f"{res}/cuda-samples/{label}." + ("json" if encoding == "json" else "converted.json")
    status = open(f"{res}/cuda-samples/{label}.status").read().strip() if os.path.exists(f"{res}/cuda-samples/{label}.status") else "not run"
    print(f"{label} (plain rc, captured rc: {status}) | clean, skipped_inconsistent 0 | {verdict(f'{res}/cuda-samples/{label}.report.json')} | {records(trace)}")
PY
grep -E "DIFFERS|no ground truth" "$res/cuda/run_all.txt" >> "$res/summary.txt"
# The racing pair of the SET run, as the text report names it.
grep -m2 -E "^WARNING: streamtrace|by graph node" "$res/cuda/capture_update_deps.report.txt" >> "$res/summary.txt" 2>/dev/null
cat "$res/summary.txt"
cp "$res/summary.txt" "$OUT/capdeps-summary.txt"
tar -czf "$OUT/capdeps.tar.gz" -C "$work" capdeps && echo "packed $OUT/capdeps.tar.gz"
rm -rf "$work"
