#!/usr/bin/env bash
# On the GPU machine: where the training loop's CPU time goes under capture, by library and function (issue 24
# item 4), where the cost split (STREAMTRACE_COST_DETAIL) cannot see: CUPTI's dispatch, the driver, PyTorch's
# RecordFunction, the passed-on lock calls. `perf record` (user space only: the machine's perf_event_paranoid
# allows no more) samples benches/torch_train_loop.py (STEPS, default 3000) on pinned cores (PIN, default
# `taskset -c 0-7`) in each of RUNS (default: plainS t1 t1nohs plain capture): plain and captured, with and without
# the interposers, tier T1 under `python -S` as in gpu_loop_parts.sh. `perf stat` beside it gives each run's CPU
# time and context switches (STAT=0 leaves it out): a run that waits costs wall time but no samples. The samples
# take in the program's start (importing torch: 5-6 s); STEPS=15000 makes the loop most of them.
# The GPU machine has no perf: PERF_PACK (default .gpu/perfpack.tar.xz) is the development machine's perf with the
# libraries it needs (`perfpack/perf`, `perfpack/lib/`), made there by:
#   mkdir -p /tmp/perfpack/lib && cp /usr/bin/perf /tmp/perfpack/ && ldd /usr/bin/perf | awk '$3 ~ /^\// { print $3 }' |
#     grep -vE 'libc\.so|libm\.so|libstdc|libgcc_s' | xargs -I{} cp -L {} /tmp/perfpack/lib/ &&
#     tar cf - -C /tmp perfpack | xz -9 > .gpu/perfpack.tar.xz
# Reports in $OUT/perf/.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
export STREAMTRACE_TRACE_FORMAT=binary STEPS=${STEPS:-3000}
mkdir -p "$OUT/perf" /tmp/perfpack-here
python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "${PERF_PACK:-.gpu/perfpack.tar.xz}" /tmp/perfpack-here
perf=(env LD_LIBRARY_PATH=/tmp/perfpack-here/perfpack/lib /tmp/perfpack-here/perfpack/perf)
st=$repo/.gpu/bin/streamtrace
set_loop_without_site
pin=(${PIN:-taskset -c 0-7})
echo "perf_event_paranoid: $(cat /proc/sys/kernel/perf_event_paranoid)"
"${perf[@]}" --version
# The observer is compiled once, before anything is sampled.
"$st" capture --no-analyze -o /tmp/perf-warm -- python3 samples/torch/two_streams_no_wait.py > /dev/null 2>&1
with_run() { # LABEL PREFIX...: that run's command behind PREFIX
  local label=$1; shift
  case $label in
    plainS) "$@" "${no_site[@]}" ;;
    t1) "$@" "$st" capture --no-analyze -o /tmp/perf-t1 -- "${no_site[@]}" ;;
    t1nohs) "$@" "$st" capture --no-analyze --no-host-sync -o /tmp/perf-t1n -- "${no_site[@]}" ;;
    plain) "$@" python3 benches/torch_train_loop.py ;;
    capture) "$@" "$st" capture --no-analyze -o /tmp/perf-capture -- python3 benches/torch_train_loop.py ;;
    nocs) "$@" "$st" capture --no-analyze --no-call-sites -o /tmp/perf-nocs -- python3 benches/torch_train_loop.py ;;
  esac
}
for label in ${RUNS:-plainS t1 t1nohs plain capture}; do
  report=$OUT/perf/$label.txt
  {
    echo "== $label"
    if [ "${STAT:-1}" = 1 ]; then
      with_run "$label" timeout 240 "${pin[@]}" "${perf[@]}" stat -e task-clock,context-switches,cpu-migrations \
        -o /tmp/perf-$label.stat -- 2>&1 | grep -E '^train '
      grep -E 'task-clock|context-switches|cpu-migrations|elapsed|user|sys' /tmp/perf-$label.stat
    fi
    with_run "$label" timeout 240 "${pin[@]}" "${perf[@]}" record -F "${FREQ:-1999}" -o /tmp/perf-$label.data -- 2>&1 |
      grep -E '^train |samples'
    echo "-- by thread and library"
    "${perf[@]}" report -i /tmp/perf-$label.data --no-children --sort comm,dso --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -40
    echo "-- by library and function"
    "${perf[@]}" report -i /tmp/perf-$label.data --no-children --sort dso,sym --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -"${TOP:-70}"
  } > "$report" 2>&1
  head -8 "$report"
done
# Beside the samples, what the cost split counts in the same runs (the interposers' calls by kind, the lock wait).
for label in ${DETAIL_RUNS:-t1 capture}; do
  echo "== cost split: $label"
  with_run "$label" env STREAMTRACE_COST_DETAIL=1 timeout 240 "${pin[@]}" 2>&1 | grep -E "^streamtrace:|^train " |
    grep -v "^streamtrace:   cu[A-Z]"
done > "$OUT/perf/detail.txt" 2>&1
