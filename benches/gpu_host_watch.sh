#!/usr/bin/env bash
# On the GPU machine: everything the host watch (docs/capture.md, host watch; issue 22 items 1-2 and host
# functions) needs to know from a real driver, in one run. Results under $OUT (or $1):
#   machine.txt        kernel, driver, GPU
#   probe.txt          what benches/host_watch_probe.cu found, plain and captured, and the verdicts read from its
#                      trace: are CPU page faults on managed memory delivered, at which time against the program's
#                      own clock and how late; is cudaMallocHost memory a shared mapping; did the host-function
#                      trampoline run (a fault inside it carried `host_func`)
#   samples.txt        each new sample (and variant): program output and exit status plain vs captured, the
#                      GROUND_TRUTH line and the analyzer's verdict, and the host_access records of its trace;
#                      the traces as NAME.json (for samples/capture/cuda/) and NAME.log
#   cost.txt           benches/host_watch_loop.cu (a pinned buffer refilled every iteration): microseconds an
#                      iteration plain, captured with --no-host-watch and captured with the host watch, both modes
# Needs .gpu/ carrying the streamtrace binary and libstreamtrace_capture.so (benches/gpu_env.sh) and python3.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
out=${1:-$OUT}
mkdir -p "$out"
bin=$repo/.gpu/bin
st=$bin/streamtrace
lib=$bin/libstreamtrace_capture.so
build=$(mktemp -d)
# The host watch keeps its SIGSEGV handler first only when the library is preloaded; until `streamtrace capture`
# preloads it itself (issue 22 item 3), this script does (the streamtrace binary ignores it: the host watch is
# asked for in the program's environment only).
capture() { LD_PRELOAD=${PRELOAD-$lib} "$st" capture "$@"; }

{
  uname -a
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
  nvcc --version | tail -2
  lsmod 2>/dev/null | grep -E "^nvidia" || echo "lsmod: no nvidia modules listed"
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt"

flags=(-g -lineinfo -O2 -arch=sm_90 -std=c++17)
for src in benches/host_watch_probe.cu benches/host_watch_loop.cu; do
  nvcc "${flags[@]}" -o "$build/$(basename "$src" .cu)" "$src" || { echo "cannot build $src"; exit 1; }
done
samples=(managed_host_read pinned_d2h_read pinned_staging_refill host_func_cross_stream)
for name in "${samples[@]}"; do
  nvcc "${flags[@]}" -Isamples/cuda -o "$build/$name" "samples/cuda/$name.cu" -lpthread || { echo "cannot build $name"; exit 1; }
done

# Reads a trace: host_access records (by fault kind, with host_func), host_func records, the host_watch record.
cat > "$build/trace_facts.py" <<'PY'
import json, sys
path = sys.argv[1]
probe = {}
if len(sys.argv) > 2:
    for line in open(sys.argv[2]):
        parts = line.split()
        if parts[:1] == ["PROBE"] and len(parts) > 1:
            probe[parts[1]] = parts[2:]
records = [json.loads(l) for l in open(path) if l.strip()]
accesses = [r for r in records if r.get("type") == "host_access"]
funcs = [r for r in records if r.get("type") == "host_func"]
watch = [r for r in records if r.get("type") == "host_watch"]
print(f"  host_access records: {len(accesses)} "
      f"(guard {sum(1 for a in accesses if a.get('fault') == 'guard')}, managed {sum(1 for a in accesses if a.get('fault') == 'managed')}, "
      f"in host functions {sum(1 for a in accesses if 'host_func' in a)})")
for a in accesses:
    print("   ", json.dumps({k: a[k] for k in a if k in ("name", "reads", "writes", "fault", "host_func", "thread", "time", "site")}))
print(f"  host_func records: {len(funcs)}", "".join(f"\n    {json.dumps(f)}" for f in funcs))
print("  host_watch:", json.dumps(watch[-1]) if watch else "none (the process did not exit normally?)")
if "managed_touch" in probe:
    t0, t1, address = int(probe["managed_touch"][0]), int(probe["managed_touch"][1]), int(probe["managed_touch"][2], 16)
    page = address & ~4095
    hits = [a for a in accesses if a.get("fault") == "managed"
            and any(int(str(r[0]), 0) <= address < int(str(r[0]), 0) + r[1] for r in a.get("reads", []))]
    print(f"  managed faults delivered: {'yes' if hits else 'no'} (the probe touched page {page:#x} between {t0} and {t1} ns)")
    for a in hits:
        t = a.get("time", 0)
        print(f"    fault time {t}: {t - t0:+d} ns from the probe's stamp before the touch, {t - t1:+d} ns from the one after")
if "host_func" in probe:
    print("  host function: main and driver thread ids", " ".join(probe["host_func"]))
    print("  trampoline took (a fault inside the host function came with host_func):",
          "yes" if any("host_func" in a for a in accesses) else "no")
PY

echo "== probe" | tee "$out/probe.txt"
"$build/host_watch_probe" > "$build/probe.plain.log" 2>&1; echo "plain exit $?" >> "$out/probe.txt"
STREAMTRACE_HOST_WATCH_STATS=1 capture -o "$build/trace-probe" -- "$build/host_watch_probe" > "$build/probe.captured.log" 2> "$build/probe.captured.err"
echo "captured exit $?" >> "$out/probe.txt"
{
  echo "-- plain output"; cat "$build/probe.plain.log"
  echo "-- captured output"; cat "$build/probe.captured.log"
  echo "-- capture's messages"; grep -E "^streamtrace" "$build/probe.captured.err"
  trace=$(ls "$build"/trace-probe/trace.*.json | head -1)
  echo "-- trace $trace"
  python3 "$build/trace_facts.py" "$trace" "$build/probe.captured.log"
  cp "$trace" "$out/host_watch_probe.json"
  echo "-- the same with a longer hold (5 s) for managed faults, to see whether the 1 s default lost any"
  STREAMTRACE_HOST_WATCH_DELAY_MS=5000 capture --no-analyze -o "$build/trace-probe5" -- "$build/host_watch_probe" > "$build/probe5.log" 2>&1
  python3 "$build/trace_facts.py" "$(ls "$build"/trace-probe5/trace.*.json | head -1)" "$build/probe5.log" | grep -E "managed|fault time"
} >> "$out/probe.txt" 2>&1
cat "$out/probe.txt"

echo "== samples" | tee "$out/samples.txt"
for name in "${samples[@]}"; do
  for variant in "" $(sed -n 's|^// VARIANT: ||p' "samples/cuda/$name.cu"); do
    label=$name${variant:+-$variant}
    "$build/$name" $variant > "$build/$label.plain" 2>&1; plain=$?
    capture -o "$build/trace-$label" -- "$build/$name" $variant > "$build/$label.out" 2> "$build/$label.err"; captured=$?
    cat "$build/$label.out" "$build/$label.err" > "$out/$label.log"
    trace=$(ls "$build/trace-$label"/trace.*.json 2>/dev/null | head -1)
    [ -n "$trace" ] && cp "$trace" "$out/$label.json"
    verdict=$("$st" analyze "$out/$label.json" > /dev/null 2>&1; echo $?)
    {
      echo "-- $label: exit plain $plain, captured $captured; output $(cmp -s "$build/$label.plain" "$build/$label.out" && echo same || echo DIFFERS)"
      grep GROUND_TRUTH "$build/$label.out" || echo "   no ground truth line"
      echo "   analyze exit $verdict (0 clean, 1 findings)"
      grep -E "^WARNING|^  (Read|Write|Previous)|^Host watch|^warning|^streamtrace: (host|capture)" "$build/$label.err" | sed 's/^/   /'
      [ -n "$trace" ] && python3 "$build/trace_facts.py" "$trace"
      cmp -s "$build/$label.plain" "$build/$label.out" || diff "$build/$label.plain" "$build/$label.out" | head -10
    } >> "$out/samples.txt" 2>&1
  done
done
cat "$out/samples.txt"

echo "== cost: microseconds an iteration, 5 rounds each" | tee "$out/cost.txt"
for mode in synced early; do
  for round in 1 2 3 4 5; do
    p=$("$build/host_watch_loop" $mode 20000 | sed -n 's/.*us_per_iteration=//p')
    n=$(capture --no-analyze --no-host-watch -o "$build/trace-loop-off" -- "$build/host_watch_loop" $mode 20000 2>/dev/null | sed -n 's/.*us_per_iteration=//p')
    w=$(capture --no-analyze -o "$build/trace-loop-on" -- "$build/host_watch_loop" $mode 20000 2>/dev/null | sed -n 's/.*us_per_iteration=//p')
    echo "$mode round $round: plain $p, captured --no-host-watch $n, captured with host watch $w" | tee -a "$out/cost.txt"
  done
  python3 "$build/trace_facts.py" "$(ls "$build"/trace-loop-on/trace.*.json | head -1)" | grep -E "host_watch|host_access records" | tee -a "$out/cost.txt"
done
