#!/usr/bin/env bash
# On the GPU machine: the OpenMP stand-ins (capture/src/host_sync/interpose/openmp.rs) and the futex stand-in
# (futex.rs).
#  1. samples/cuda/omp_halo_streams (its three variants), future_handover and cpp20_wait_handover (C++20's waits)
#     captured through run_all.sh; each trace's verdict and its host_release/host_acquire counts.
#  2. PyTorch's CPU ops, which run their parallel regions on the libgomp its wheel carries: a script of CPU
#     reductions, an elementwise op and a matmul prints the same plain and captured; where torch's libgomp is
#     (in the global scope or not), and the preloaded library's GOMP_parallel bound for libtorch_cpu; the
#     script's time plain, captured with --no-host-sync and captured, in ROUNDS rounds (default 3).
# Results: $OUT/openmp.txt, $OUT/openmp.tar.gz (cuda/NAME.json|log|out as run_all.sh leaves them).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
st=$repo/.gpu/bin/streamtrace
lib=$repo/.gpu/bin/libstreamtrace_capture.so
work=$(mktemp -d)
mkdir -p "$work/cuda"
summary="$OUT/openmp.txt"
: > "$summary"
say() { echo "$@" | tee -a "$summary"; }

say "== 1. OpenMP, future and C++20 wait CUDA samples"
CUDA="omp_halo_streams future_handover cpp20_wait_handover" bash samples/cuda/run_all.sh "$work/cuda" >> "$summary" 2>&1
for trace in "$work"/cuda/*.json; do
  name=$(basename "$trace" .json)
  $st analyze --format json "$trace" > "$work/$name.report.json" 2>/dev/null
  status=$?
  say "$name: analyze exit $status, $(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
lines = open(sys.argv[2]).read().splitlines()
print(len(r.get("races", [])), "races,", len(r.get("timing_only_races", [])), "ordered only by timing, host order", r.get("host_order"),
      "| releases", sum("\"host_release\"" in l for l in lines), "acquires", sum("\"host_acquire\"" in l for l in lines))
' "$work/$name.report.json" "$trace")"
done

say "== 2. PyTorch's CPU ops on its own libgomp"
cat > "$work/cpu_ops.py" <<'PY'
import ctypes, sys, time
import torch
torch.manual_seed(0)
started = time.perf_counter()
a = torch.randn(1 << 24)
b = torch.randn(2048, 2048)
sums = []
for _ in range(20):
    sums.append(float(a.sum()))
    sums.append(float(a.exp().mean()))
    sums.append(float((b @ b).abs().sum()))
d = torch.randn(1 << 22, device="cuda")
sums.append(float(d.cpu().sum()))
elapsed = time.perf_counter() - started
print("threads", torch.get_num_threads(), "sums", " ".join(f"{s:.6e}" for s in sums[-4:]), "distinct", len(set(sums)))
print("GOMP_parallel in the global scope:", hasattr(ctypes.CDLL(None), "GOMP_parallel"), file=sys.stderr)
print(f"elapsed {elapsed:.3f}", file=sys.stderr)
PY
plain=$(python3 "$work/cpu_ops.py" 2> "$work/plain.err")
say "plain:    $plain | $(tr '\n' ' ' < "$work/plain.err")"
captured=$($st capture --no-analyze -o "$work/torch-capture" -- python3 "$work/cpu_ops.py" 2> "$work/captured.err")
say "captured: $captured | $(grep -E 'global scope|elapsed' "$work/captured.err" | tr '\n' ' ')"
[ "$plain" = "$captured" ] && say "same output plain and captured" || say "OUTPUT DIFFERS plain and captured"
LD_PRELOAD=$lib LD_DEBUG=bindings python3 -c 'import torch; torch.randn(1 << 22).sum()' 2>&1 \
  | grep -E "normal symbol .GOMP_parallel'" | sed 's/^ *[0-9]*: *//' | sort -u | head -5 | tee -a "$summary"
for round in $(seq "${ROUNDS:-3}"); do
  line="round $round:"
  for how in plain no-host-sync capture; do
    case $how in
      plain) python3 "$work/cpu_ops.py" > /dev/null 2> "$work/t.err" ;;
      no-host-sync) $st capture --no-analyze --no-host-sync -o "$work/t-$round-$how" -- python3 "$work/cpu_ops.py" > /dev/null 2> "$work/t.err" ;;
      capture) $st capture --no-analyze -o "$work/t-$round-$how" -- python3 "$work/cpu_ops.py" > /dev/null 2> "$work/t.err" ;;
    esac
    line="$line $how $(sed -n 's/^elapsed //p' "$work/t.err")"
  done
  say "$line"
done
tar -czf "$OUT/openmp.tar.gz" -C "$work" cuda
