#!/usr/bin/env bash
# On the GPU machine, from the repository root, in one call: what the capture gaps of this branch need from a
# real driver (a host access seen through a fault after what its thread acquired; conditional graph nodes;
# call sites declared before their records). Needs .gpu/ carrying streamtrace.gz and libstreamtrace_capture.so
# (benches/gpu_env.sh) and cuda-samples.tar.gz (samples/cuda-samples/build.sh), and python3.
#   1. samples/cuda/threads_handover_read.cu, its 6 runs (samples/cuda/run_all.sh): GROUND_TRUTH against the
#      verdict, and in each trace whether the worker's host_access comes after its host_acquire.
#   2. NVIDIA's cuda-samples: graphConditionalNodes (12 records skipped before: now none, or 1, the conditional
#      node added to a capturing stream's graph), simpleCallback ROUNDS times (json.unknown_call_sites was 1 in one
#      run), asyncAPI, simpleCudaGraphs, simpleZeroCopy, UnifiedMemoryStreams (unchanged verdicts expected).
#   3. ALL_SAMPLES=1: every samples/cuda program and variant (47 runs before this branch), GROUND_TRUTH against
#      the verdict: nothing may change.
# Writes $OUT/capgaps-summary.txt (one line per run: label, exit statuses, GROUND_TRUTH or expected verdict, the
# verdict, races, and the counters skipped_inconsistent, unknown_call_sites and every data-loss counter) and
# $OUT/capgaps.tar.gz (traces, reports, logs). Each run has RUN_TIMEOUT seconds (default 120).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
export STREAMTRACE_TRACE_FORMAT=json
st=$repo/.gpu/bin/streamtrace
work=$(mktemp -d)
res=$work/capgaps
mkdir -p "$res/cuda" "$res/cuda-samples"
timeout_s=${RUN_TIMEOUT:-120}
rounds=${ROUNDS:-5}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$res/machine.txt" 2>&1

# 1 and 3: our samples, through run_all.sh (it builds, captures and runs plain; traces as NAME.json).
samples=threads_handover_read
[ -n "${ALL_SAMPLES:-}" ] && samples=$(cd samples/cuda && ls *.cu | sed 's/\.cu$//' | tr '\n' ' ')
CUDA="$samples" SAMPLE_TIMEOUT=$timeout_s bash samples/cuda/run_all.sh "$res/cuda" > "$res/cuda/run_all.txt" 2>&1
for trace in "$res/cuda"/*.json; do
  [ -e "$trace" ] || continue
  label=$(basename "$trace" .json)
  timeout "$timeout_s" "$st" analyze "$trace" --format json -o "$res/cuda/$label.report.json" > /dev/null 2> "$res/cuda/$label.analyze.err"
  echo $? > "$res/cuda/$label.analyze_status"
done

# 2: the cuda-samples named above, captured (binary traces, as gpu_cuda_samples.sh does them).
tar -xzf .gpu/cuda-samples.tar.gz -C "$work" || echo "cannot unpack .gpu/cuda-samples.tar.gz" >> "$res/machine.txt"
bin=$work/cuda-samples/bin
torch_libs=$(python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13", "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${torch_libs:+:$torch_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
runs="graphConditionalNodes asyncAPI simpleCudaGraphs simpleZeroCopy UnifiedMemoryStreams"
for r in $(seq 1 "$rounds"); do runs="$runs simpleCallback#$r"; done
for run in $runs; do
  name=${run%%#*}
  label=${run/\#/-}
  [ -x "$bin/$name" ] || { echo "no $name" > "$res/cuda-samples/$label.status"; continue; }
  dir=$work/trace-$label
  mkdir -p "$dir"
  (cd "$work" && timeout -k 5 "$timeout_s" "$bin/$name" > "$res/cuda-samples/$label.plain.out" 2>&1)
  plain=$?
  (cd "$work" && STREAMTRACE_TRACE_FORMAT=binary timeout -k 5 "$timeout_s" "$st" capture -o "$dir" -- "$bin/$name" \
    > "$res/cuda-samples/$label.captured.out" 2> "$res/cuda-samples/$label.capture.log")
  captured=$?
  echo "$plain $captured" > "$res/cuda-samples/$label.status"
  traces=("$dir"/trace.*)
  if [ -e "${traces[0]}" ]; then
    cp "${traces[0]}" "$res/cuda-samples/$label.stbin"
    timeout "$timeout_s" "$st" analyze "${traces[0]}" --format json -o "$res/cuda-samples/$label.report.json" \
      > /dev/null 2> "$res/cuda-samples/$label.analyze.err"
    echo $? > "$res/cuda-samples/$label.analyze_status"
  fi
done

python3 - "$res" > "$res/summary.txt" <<'PY'
import json, os, re, sys
res = sys.argv[1]
expected = {"graphConditionalNodes": "clean", "asyncAPI": "clean", "simpleCudaGraphs": "clean",
            "simpleZeroCopy": "clean", "UnifiedMemoryStreams": "clean (timing-only races: OpenMP futexes)",
            "simpleCallback": "clean"}
def counters(report):
    out = {}
    for t in report.get("traces", [report]) if report.get("schema") == "streamtrace.job" else [report]:
        for c in t.get("import", []):
            if c.get("count") and (c.get("severity") == "data_loss" or c["name"] in ("json.skipped_inconsistent", "json.unknown_call_sites")):
                out[c["name"]] = out.get(c["name"], 0) + c["count"]
    return out
def summary(report):
    races = timing = 0
    for t in report.get("traces", [report]) if report.get("schema") == "streamtrace.job" else [report]:
        races += t["summary"]["races"]; timing += t["summary"]["timing_only_races"]
    return f'{report.get("verdict")} | {races} ({timing} timing-only)'
def order(trace):
    # For each host_access: was every host_acquire of its thread that precedes its thread's next record before it?
    lines = [json.loads(l) for l in open(trace) if l.strip()][1:]
    notes = []
    for i, r in enumerate(lines):
        if r.get("type") != "host_access":
            continue
        t = r.get("thread")
        later = next((x for x in lines[i + 1:] if x.get("thread") == t), None)
        before = [x for x in lines[:i] if x.get("thread") == t and x.get("type") == "host_acquire"]
        notes.append(f'{r.get("fault")} access, {len(before)} acquires before it, next record of its thread: {later.get("type") if later else "none"}')
    return "; ".join(notes) or "no host_access"
def report_line(path):
    try:
        report = json.load(open(path))
        return f"{summary(report)} | {counters(report) or 'none'}"
    except Exception as e:
        return f"no report ({type(e).__name__})"
print("label | plain rc, captured rc | expected | verdict | races | counters | host accesses")
for label in sorted(f[:-5] for f in os.listdir(f"{res}/cuda") if f.endswith(".json") and not f.endswith(".report.json")):
    out = open(f"{res}/cuda/{label}.out", errors="replace").read()
    truth = re.search(r"GROUND_TRUTH (\w+)", out)
    line = report_line(f"{res}/cuda/{label}.report.json")
    print(f"{label} | see run_all.txt | {truth.group(1) if truth else 'no GROUND_TRUTH'} | {line} | {order(f'{res}/cuda/{label}.json')}")
for label in sorted(f[:-7] for f in os.listdir(f"{res}/cuda-samples") if f.endswith(".status")):
    status = open(f"{res}/cuda-samples/{label}.status").read().strip()
    line = report_line(f"{res}/cuda-samples/{label}.report.json")
    print(f"{label} | {status} | {expected.get(label.split('-')[0], '?')} | {line} | -")
PY
grep -E "DIFFERS|no ground truth" "$res/cuda/run_all.txt" >> "$res/summary.txt"
cat "$res/summary.txt"
cp "$res/summary.txt" "$OUT/capgaps-summary.txt"
tar -czf "$OUT/capgaps.tar.gz" -C "$work" capgaps && echo "packed $OUT/capgaps.tar.gz"
rm -rf "$work"
