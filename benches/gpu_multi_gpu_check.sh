#!/usr/bin/env bash
# On nvidia-h200-x2 (issue 14), in one call, as the variables ask:
# - DIAG=1: the exit check of two-GPU NCCL programs with the observer as main had it (a backtrace of any
#   SIGSEGV: benches/diag/segv_backtrace.c, and Python's faulthandler), with STREAMTRACE_DISABLE=1 too, and which
#   calls record the events NCCL and c10d wait on (benches/diag/event_calls.c, a CUPTI injection of its own);
# - MARKED=N: N runs of main's observer with a note of every callback that runs after its statics or the
#   thread's thread-locals were destroyed ($G/marked/torch_observer.cpp, made from main's for the diagnosis);
# - EXITS=N: N more exit checks of this build's observer (torchrun, both ranks must exit 0);
# - unless SKIP_SAMPLES=1: every two-GPU sample plain and captured (samples/multi_gpu/run_all.sh);
# - ROUNDS=N: the DDP training loop (samples/multi_gpu/dist_ddp_train.py, STEPS steps) plain and captured, in
#   N interleaved rounds: one line per rank and run, "<variant> rank R ddp train loop S steps in T s".
# Everything comes back as $OUT/multi_gpu.tar.gz, the timings also as $OUT/overhead.txt.
# Reads from $G (default .gpu-14 in the repository): streamtrace.gz, libstreamtrace_capture.so, and old/ (main's
# capture library, sitecustomize.py and torch_observer.cpp).
set -uo pipefail
# The traces this script collects are JSON (trace.*.json): the committed samples stay readable text.
export STREAMTRACE_TRACE_FORMAT=${STREAMTRACE_TRACE_FORMAT:-json}
repo=$(cd "$(dirname "$0")/.." && pwd)
g=$(cd "${G:-$repo/.gpu-14}" && pwd)
cd "$repo"
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $g/bin && gunzip -c $g/streamtrace.gz > $g/bin/streamtrace && chmod +x $g/bin/streamtrace
cp $g/libstreamtrace_capture.so $g/bin/
st=$g/bin/streamtrace
res=$(mktemp -d)/multi_gpu
mkdir -p "$res/events"
torchrun="python3 -m torch.distributed.run --standalone --nproc_per_node=2"
nvidia-smi -L
python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
gcc -O2 -shared -fPIC benches/diag/segv_backtrace.c -o /tmp/segv.so -ldl || echo "segv_backtrace: gcc failed"
cupti=$(ls /usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.13* | head -1)
main_observer() {  # $1: folder with sitecustomize.py and torch_observer.cpp; the rest: the command
  local py=/tmp/observer-$(basename "$1")
  mkdir -p $py/py && cp "$1"/sitecustomize.py "$1"/torch_observer.cpp $py/py/
  shift
  env CUDA_INJECTION64_PATH=$g/old/libstreamtrace_capture.so STREAMTRACE_OUTPUT=$py/trace.%p.json \
    STREAMTRACE_CUPTI=$cupti PYTHONPATH=$py/py PYTHONFAULTHANDLER=1 LD_PRELOAD=/tmp/segv.so "$@"
}
if [ -n "${DIAG:-}" ]; then
  gcc -O2 -shared -fPIC -I/usr/local/cuda/include benches/diag/event_calls.c -o /tmp/event_calls.so \
    -L/usr/local/cuda/targets/x86_64-linux/lib -lcupti -lpthread || echo "event_calls: gcc failed"
  for round in 1 2; do
    main_observer $g/old $torchrun benches/nccl_exit_check.py > "$res/old_capture_$round.log" 2>&1
    echo "main's observer, exit check round $round: exit $?"
  done
  main_observer $g/old env STREAMTRACE_DISABLE=1 $torchrun benches/nccl_exit_check.py > "$res/old_disabled.log" 2>&1
  echo "main's observer, STREAMTRACE_DISABLE=1: exit $?"
  main_observer $g/old $torchrun samples/multi_gpu/dist_async_use_after_wait.py > "$res/old_async_after_wait.log" 2>&1
  echo "main's observer, dist_async_use_after_wait: exit $?"
  for program in benches/nccl_exit_check.py samples/multi_gpu/dist_async_use_before_wait.py; do
    CUDA_INJECTION64_PATH=/tmp/event_calls.so EVENT_CALLS_DIR="$res/events" $torchrun $program > "$res/events/$(basename $program .py).log" 2>&1
    echo "event_calls on $program: exit $?"
  done
  grep -h "NEVER RECORDED\|attribute" "$res"/events/events.*.log | sort | uniq -c | sort -rn | head -20
fi
if [ -n "${MARKED:-}" ]; then
  for round in $(seq 1 "$MARKED"); do
    main_observer $g/marked $torchrun samples/multi_gpu/dist_async_use_after_wait.py > "$res/marked_$round.log" 2>&1
    echo "main's observer, marked, dist_async_use_after_wait round $round: exit $?"
    grep -h "observer-late\|segv_backtrace\|corrupted\|free()" "$res/marked_$round.log" | sort | uniq -c | head -12
  done
fi
for round in $(seq 1 "${EXITS:-0}"); do
  for program in samples/multi_gpu/dist_async_use_after_wait.py benches/nccl_exit_check.py; do
    LD_PRELOAD=/tmp/segv.so $st capture --no-analyze -o /tmp/exits -- $torchrun $program > "$res/exit_$round.log" 2>&1
    echo "this build's observer, exit check round $round, $(basename $program): exit $?"
  done
done
grep -h "segv_backtrace" -A12 "$res"/*.log | head -40
[ -n "${SKIP_SAMPLES:-}" ] || BIN=$g/bin bash samples/multi_gpu/run_all.sh "$res/samples"
for round in $(seq 1 "${ROUNDS:-0}"); do
  $torchrun samples/multi_gpu/dist_ddp_train.py "${STEPS:-300}" 2>/dev/null | grep -o 'rank [0-9] ddp.*' | sed 's/^/plain    /'
  $st capture --no-analyze -o /tmp/ddp -- $torchrun samples/multi_gpu/dist_ddp_train.py "${STEPS:-300}" 2>/dev/null | grep -o 'rank [0-9] ddp.*' | sed 's/^/captured /'
done | tee "$OUT/overhead.txt"
[ "${ROUNDS:-0}" = 0 ] || $st analyze /tmp/ddp | grep -E "Capture cost|JOB SUMMARY" | tee -a "$OUT/overhead.txt"
tar -czf "$OUT/multi_gpu.tar.gz" -C "$(dirname "$res")" multi_gpu
