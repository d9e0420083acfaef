#!/usr/bin/env bash
# On nvidia-h200-x2 (issue 14), in one call: the exit check of two-GPU NCCL programs with the observer as main
# had it (a backtrace of any SIGSEGV: benches/diag/segv_backtrace.c, Python's faulthandler) and as this build has
# it, with STREAMTRACE_DISABLE=1 too; which calls record the events NCCL and c10d wait on
# (benches/diag/event_calls.c, a CUPTI injection of its own); then every two-GPU sample plain and captured
# (samples/multi_gpu/run_all.sh). Everything comes back as $OUT/multi_gpu.tar.gz.
# Reads from $G (default .gpu-14 in the repository): streamtrace.gz, libstreamtrace_capture.so, and old/ (main's capture library,
# sitecustomize.py and torch_observer.cpp). SKIP_DIAG=1 runs the samples only.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
g=$(cd "${G:-$repo/.gpu-14}" && pwd)
cd "$repo"
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $g/bin && gunzip -c $g/streamtrace.gz > $g/bin/streamtrace && chmod +x $g/bin/streamtrace
cp $g/libstreamtrace_capture.so $g/bin/
res=$(mktemp -d)/multi_gpu
mkdir -p "$res/events"
torchrun="python3 -m torch.distributed.run --standalone --nproc_per_node=2"
nvidia-smi -L
python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
if [ -z "${SKIP_DIAG:-}" ]; then
  gcc -O2 -shared -fPIC benches/diag/segv_backtrace.c -o /tmp/segv.so -ldl || echo "segv_backtrace: gcc failed"
  gcc -O2 -shared -fPIC -I/usr/local/cuda/include benches/diag/event_calls.c -o /tmp/event_calls.so \
    -L/usr/local/cuda/targets/x86_64-linux/lib -lcupti -lpthread || echo "event_calls: gcc failed"
  cupti=$(ls /usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.13* | head -1)
  mkdir -p /tmp/old/py && cp $g/old/sitecustomize.py $g/old/torch_observer.cpp /tmp/old/py/
  old_env=(CUDA_INJECTION64_PATH=$g/old/libstreamtrace_capture.so STREAMTRACE_OUTPUT=/tmp/old/trace.%p.json
           STREAMTRACE_CUPTI=$cupti PYTHONPATH=/tmp/old/py PYTHONFAULTHANDLER=1 LD_PRELOAD=/tmp/segv.so)
  for round in 1 2; do
    env "${old_env[@]}" $torchrun benches/nccl_exit_check.py > "$res/old_capture_$round.log" 2>&1
    echo "main's observer, exit check round $round: exit $?"
  done
  env "${old_env[@]}" STREAMTRACE_DISABLE=1 $torchrun benches/nccl_exit_check.py > "$res/old_disabled.log" 2>&1
  echo "main's observer, STREAMTRACE_DISABLE=1: exit $?"
  env "${old_env[@]}" $torchrun samples/multi_gpu/dist_async_use_after_wait.py > "$res/old_async_after_wait.log" 2>&1
  echo "main's observer, dist_async_use_after_wait: exit $?"
  mkdir -p "$res/old_traces" && cp /tmp/old/trace.*.json "$res/old_traces/" 2>/dev/null
  for t in /tmp/old/trace.*.json; do $g/bin/streamtrace analyze "$t" > "$res/old_traces/$(basename "$t" .json).txt" 2>&1; done
  grep -h -A3 "never recorded" "$res"/old_traces/*.txt | head -30
  for program in benches/nccl_exit_check.py samples/multi_gpu/dist_async_use_before_wait.py; do
    CUDA_INJECTION64_PATH=/tmp/event_calls.so EVENT_CALLS_DIR="$res/events" $torchrun $program > "$res/events/$(basename $program .py).log" 2>&1
    echo "event_calls on $program: exit $?"
  done
  grep -h "NEVER RECORDED\|attribute" "$res"/events/events.*.log | sort | uniq -c | sort -rn | head -20
  for round in 1 2; do
    LD_PRELOAD=/tmp/segv.so PYTHONFAULTHANDLER=1 $g/bin/streamtrace capture -o /tmp/new -- $torchrun benches/nccl_exit_check.py > "$res/new_capture_$round.log" 2>&1
    echo "this build's observer, exit check round $round: exit $?"
  done
  grep -h "SUMMARY\|never recorded" "$res/new_capture_1.log"
  STREAMTRACE_DISABLE=1 LD_PRELOAD=/tmp/segv.so $g/bin/streamtrace capture -o /tmp/new-off -- $torchrun benches/nccl_exit_check.py > "$res/new_disabled.log" 2>&1
  echo "this build's observer, STREAMTRACE_DISABLE=1: exit $?"
  grep -h "segv_backtrace" -A12 "$res"/*.log | head -60
fi
BIN=$g/bin bash samples/multi_gpu/run_all.sh "$res/samples"
tar -czf "$OUT/multi_gpu.tar.gz" -C "$(dirname "$res")" multi_gpu
