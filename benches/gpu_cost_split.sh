#!/usr/bin/env bash
# On nvidia-h200-x2: where capture's cost goes, by variant and from inside. The DDP training loop
# (samples/multi_gpu/dist_ddp_train.py, STEPS steps, two ranks; DDP_SIZE: its width, depth and batch) in ROUNDS
# interleaved rounds of the VARIANTS
# (default all): plain; full capture; --no-call-sites; tier T1 only (the capture library injected without the
# PyTorch bootstrap); the observer with an empty CUPTI callback (STREAMTRACE_CALLBACK_NOOP=1); and full capture
# with its records dropped instead of written (STREAMTRACE_DISCARD=1). Then one capture with the cost split
# (STREAMTRACE_COST_DETAIL=1: the callback's time by driver call, lock waits, walks and kernel arguments, and the
# native observer's time by part), and the 100,000-launch benchmark with the cost split and LAUNCH_ROUNDS rounds
# plain / captured / --no-call-sites (SKIP_DETAIL=1 leaves out both). Lines come back in $OUT/cost_split.txt
# (OUTNAME: another name). Needs .gpu/ (benches/gpu_env.sh).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
st=$repo/.gpu/bin/streamtrace
lib=$repo/.gpu/bin/libstreamtrace_capture.so
cupti=$(ls /usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.13* | head -1)
torchrun="python3 -m torch.distributed.run --standalone --nproc_per_node=2"
ddp="samples/multi_gpu/dist_ddp_train.py ${STEPS:-300} ${DDP_SIZE:-}"
out=$OUT/${OUTNAME:-cost_split.txt}
{
  echo "clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null); $(nproc) cpus; $(grep -m1 'model name' /proc/cpuinfo)"
  # The observer is compiled on first use: once, before any round is timed.
  $st capture --no-analyze -o /tmp/warm -- $torchrun samples/multi_gpu/dist_ddp_train.py 5 > /dev/null 2>&1
  loop_lines() { grep -o 'rank [0-9] ddp.*' | sed "s/^/$1 /"; }
  variant() {
    case $1 in
      plain) $torchrun $ddp ;;
      full) $st capture --no-analyze -o /tmp/full -- $torchrun $ddp ;;
      nosites) $st capture --no-call-sites --no-analyze -o /tmp/nosites -- $torchrun $ddp ;;
      t1only) rm -rf /tmp/t1 && mkdir -p /tmp/t1
        env CUDA_INJECTION64_PATH=$lib STREAMTRACE_OUTPUT=/tmp/t1/trace.%p.json STREAMTRACE_CUPTI=$cupti $torchrun $ddp ;;
      noop) STREAMTRACE_CALLBACK_NOOP=1 $st capture --no-analyze -o /tmp/noop -- $torchrun $ddp ;;
      discard) STREAMTRACE_DISCARD=1 $st capture --no-analyze -o /tmp/discard -- $torchrun $ddp ;;
    esac 2>/dev/null | loop_lines "$(printf '%-8s' $1)"
  }
  for round in $(seq 1 "${ROUNDS:-2}"); do
    for v in ${VARIANTS:-plain full nosites t1only noop discard}; do variant $v; done
  done
  [ -z "${SKIP_DETAIL:-}" ] || exit 0
  STREAMTRACE_COST_DETAIL=1 STREAMTRACE_WALK_STATS=1 $st capture --no-analyze -o /tmp/detail -- $torchrun $ddp > /tmp/detail.log 2>&1
  loop_lines "detail  " < /tmp/detail.log
  grep "streamtrace:" /tmp/detail.log
  $st analyze /tmp/full | grep -E "Capture cost|JOB SUMMARY"
  [ ! -d /tmp/t1 ] || $st analyze /tmp/t1 | grep -E "Capture cost|JOB SUMMARY"
  nvcc -O2 -arch=sm_90 -o /tmp/launches benches/capture_launches.cu
  STREAMTRACE_COST_DETAIL=1 STREAMTRACE_WALK_STATS=1 $st capture --no-analyze -o /tmp/l0 -- /tmp/launches 100000 2>&1
  for round in $(seq 1 "${LAUNCH_ROUNDS:-5}"); do
    /tmp/launches 100000 | sed "s/^/plain      /"
    $st capture --no-analyze -o /tmp/l1 -- /tmp/launches 100000 | sed "s/^/captured   /"
    $st capture --no-call-sites --no-analyze -o /tmp/l2 -- /tmp/launches 100000 | sed "s/^/no_sites   /"
  done
} 2>&1 | tee "$out"
