#!/usr/bin/env bash
# On the GPU machine, from the repository root: NVIDIA's cuda-samples (real, correct multi-stream programs) run
# plain and under `streamtrace capture`, to compare streamtrace's verdicts with samples/cuda-samples/EXPECTED.md.
# Needs what the lead carries in .gpu/: streamtrace.gz and libstreamtrace_capture.so (benches/gpu_env.sh unpacks
# them) and cuda-samples.tar.gz (samples/cuda-samples/build.sh makes it on the development machine: sm_90
# binaries and runs.txt, one line per run: label, binary, arguments).
#
# For each run, into $OUT/cuda-samples/LABEL.*: the program plain (stdout, exit status, seconds), then captured
# (stdout, capture's stderr with the online text report, exit status, seconds), the trace (binary encoding) copied,
# and `streamtrace analyze` of it as text and JSON. Then one line per run in summary.txt: exit statuses plain and
# captured, the verdict, races and their sites, other findings, data-loss counters. Everything is packed into
# $OUT/cuda-samples.tar.gz (the device tool returns few files well); summary.txt is also printed and left in $OUT.
#   RUNS="a b"      only these labels
#   EXACT="a b"     labels also captured with --exact (tier T3), as LABEL-exact (default: the ones whose T1
#                   verdict over-approximates a kernel's slice of a block; "" for none)
#   RUN_TIMEOUT=60  seconds for each run
# One run failing (a crash, a timeout, capture refusing) never stops the others; the whole takes 3-6 minutes.
set -uo pipefail
source benches/gpu_env.sh
export STREAMTRACE_TRACE_FORMAT=binary
out=$OUT/cuda-samples
st=$PWD/.gpu/bin/streamtrace
work=$(mktemp -d)
mkdir -p "$out"
tar -xzf .gpu/cuda-samples.tar.gz -C "$work" || { echo "cannot unpack .gpu/cuda-samples.tar.gz"; exit 2; }
bin=$work/cuda-samples/bin
# cuBLAS and cuSPARSE (UnifiedMemoryStreams, conjugateGradientCudaGraphs): the toolkit's, else torch's wheels'.
torch_libs=$(python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13", "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${torch_libs:+:$torch_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
timeout_s=${RUN_TIMEOUT:-60}
exact=${EXACT-simpleStreams simpleHyperQ cudaGraphsPerfScaling}
{ cat "$work/cuda-samples/BUILD_INFO"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } \
  > "$out/build_info.txt" 2>&1

# Runs a command under the timeout; prints "STATUS SECONDS".
timed() {
  local t0 t1 rc
  t0=$(date +%s.%N)
  timeout -k 5 "$timeout_s" "$@" 3>&-
  rc=$?
  t1=$(date +%s.%N)
  echo "$rc $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')" >&3
}

# One run: LABEL CAPTURE_OPTIONS BINARY ARGS...
run_one() {
  local label=$1 options=$2 name=$3
  shift 3
  local dir=$work/trace-$label plain captured
  cd "$work"  # some samples write files into the working directory
  if [ "$options" = "" ]; then
    plain=$(timed "$bin/$name" "$@" 3>&1 > "$out/$label.plain.out" 2> "$out/$label.plain.err")
  else
    plain="- -"
  fi
  mkdir -p "$dir"
  captured=$(timed "$st" capture $options -o "$dir" -- "$bin/$name" "$@" 3>&1 \
    > "$out/$label.captured.out" 2> "$out/$label.capture.log")
  cd - > /dev/null
  echo "$plain $captured" > "$out/$label.status"
  # The trace: one per process (a sample that forks would leave several, analyzed as one job).
  local traces=("$dir"/trace.*)
  local target=$dir
  [ "${#traces[@]}" = 1 ] && target=${traces[0]}
  if [ -e "${traces[0]}" ]; then
    for t in "${traces[@]}"; do cp "$t" "$out/$label.$(basename "$t")"; done
    timeout "$timeout_s" "$st" analyze "$target" -o "$out/$label.report.txt" > /dev/null 2> "$out/$label.analyze.err"
    echo $? > "$out/$label.analyze_status"
    timeout "$timeout_s" "$st" analyze "$target" --format json -o "$out/$label.report.json" > /dev/null 2>> "$out/$label.analyze.err"
  else
    echo "no trace" > "$out/$label.analyze_status"
  fi
}

while read -r label name args; do
  [ -z "$label" ] && continue
  case " ${RUNS:-$label} " in *" $label "*) ;; *) continue ;; esac
  echo "== $label: $name $args" >&2
  # shellcheck disable=SC2086
  run_one "$label" "" "$name" $args
  case " $exact " in
    *" $label "*) run_one "$label-exact" "--exact" "$name" $args ;;
  esac
done < "$work/cuda-samples/runs.txt"

# One line per run: what the lead compares with EXPECTED.md.
python3 - "$out" > "$out/summary.txt" <<'PY'
import json, os, sys
out = sys.argv[1]
def site(occ):
    s = occ.get("site") or {}
    src = s.get("source") or {}
    # Without line tables the file is `module+offset, called from ...`: its first frame is enough here.
    where = os.path.basename(src.get("file") or "?").split(",")[0] + (f':{src["line"]}' if src.get("line") else "")
    stream = (s.get("stream") or {}).get("kind") or "host"
    return f'{s.get("name")}@{where}[{stream}]'
def reports(r):
    return r.get("traces", [r]) if r.get("schema") == "streamtrace.job" else [r]
labels = sorted(f[:-len(".status")] for f in os.listdir(out) if f.endswith(".status"))
print("label | plain rc s | captured rc s | analyze rc | verdict | races (timing-only) | waits | data loss | races")
for label in labels:
    status = (open(f"{out}/{label}.status").read().split() + ["?"] * 4)[:4]
    try:
        analyze = open(f"{out}/{label}.analyze_status").read().strip()
    except OSError:
        analyze = "?"
    line = f"{label} | {status[0]} {status[1]} | {status[2]} {status[3]} | {analyze}"
    try:
        r = json.load(open(f"{out}/{label}.report.json"))
    except Exception as e:
        print(f"{line} | no JSON report ({type(e).__name__})")
        continue
    races, timing, waits, loss, found = 0, 0, 0, [], []
    for t in reports(r):
        s = t["summary"]
        races += s["races"]; timing += s["timing_only_races"]; waits += s["unrecorded_waits"]
        loss += [f'{c["name"]}={c["count"]}' for c in t.get("import", []) if c.get("severity") == "data_loss" and c.get("count")]
        for x in t["races"] + t["timing_only_races"]:
            found.append(f'{x["kind"]} {site(x["earlier"])} / {site(x["later"])} x{x["count"]} {x.get("extent", "")}')
    print(f'{line} | {r.get("verdict")} | {races} ({timing}) | {waits} | {" ".join(loss) or "none"} | {"; ".join(found) or "-"}')
PY
cat "$out/summary.txt"
cp "$out/summary.txt" "$OUT/cuda-samples-summary.txt"
# One file back instead of a hundred: the folder goes into the tarball and leaves $OUT.
tar -czf "$OUT/cuda-samples.tar.gz" -C "$OUT" cuda-samples && rm -rf "$out" && echo "packed $OUT/cuda-samples.tar.gz"
rm -rf "$work"
