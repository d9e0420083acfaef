#!/usr/bin/env bash
# Loading benchmark for nsys exports: an export of 2 million kernels made by replicating the rows of our own
# capture (samples/nsys/torch_loop_race.sqlite), read by `streamtrace analyze` (which loads and analyzes every
# row), by `streamtrace stats` (loads every row and builds its tables) and by a plain Python sqlite3 + pandas
# load of the same tables. Figures go to docs/performance.md.
#
#   benches/nsys_load.sh [KERNELS]        default 2000000; PANDAS_PYTHON names a python with pandas
#   RUNS=3 BASE=/tmp/streamtrace_base benches/nsys_load.sh
#       RUNS rounds (default 1), each: BASE analyze (if given), analyze, BASE stats, stats, pandas: an interleaved
#       comparison with another build. BIN: the build measured (default target/release/streamtrace); BIG: where
#       the export is made (kept when it exists); PIN="taskset -c 0,1" runs every load on two cores (the GPU
#       machine has pandas and 16 cores). No bc: the GPU machine has none.
set -euo pipefail
cd "$(dirname "$0")/.."
kernels=${1:-2000000}
big=${BIG:-$(mktemp -d)/big.sqlite}
bin=${BIN:-target/release/streamtrace}
base=${BASE:-}
runs=${RUNS:-1}
pin=${PIN:-}
[ -x "$bin" ] || cargo build --release
[ -f "$big" ] || python3 benches/make_big_export.py samples/nsys/torch_loop_race.sqlite "$big" "$kernels"
rows=$(for t in RUNTIME KERNEL MEMCPY MEMSET SYNCHRONIZATION CUDA_EVENT; do
  python3 -c "import sqlite3,sys; db=sqlite3.connect(sys.argv[1]); print(db.execute(\"select count(*) from sqlite_master where name='CUPTI_ACTIVITY_KIND_$t'\").fetchone()[0] and db.execute('select count(*) from CUPTI_ACTIVITY_KIND_$t').fetchone()[0])" "$big"
done | awk '{ s += $1 } END { print s }')
echo "rows in the tables streamtrace reads: $rows; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
python=${PANDAS_PYTHON:-python3}
for round in $(seq "$runs"); do
  echo "round $round (load $(cut -d' ' -f1-3 /proc/loadavg))"
  if [ -n "$base" ]; then
    $pin /usr/bin/time -f "base analyze: wall %e s, user %U s, sys %S s, max RSS %M kB" "$base" analyze "$big" -o /dev/null
  fi
  start=$(date +%s.%N)
  $pin /usr/bin/time -f "streamtrace: wall %e s, user %U s, sys %S s, max RSS %M kB" "$bin" analyze "$big" -o /dev/null
  end=$(date +%s.%N)
  echo "streamtrace: $(awk -v r="$rows" -v a="$start" -v b="$end" 'BEGIN { printf "%d", r / (b - a) }') rows/s (load and analysis)"
  if [ -n "$base" ]; then
    $pin /usr/bin/time -f "base stats: wall %e s, user %U s, sys %S s, max RSS %M kB" "$base" stats "$big" -o /dev/null
  fi
  $pin /usr/bin/time -f "streamtrace stats: wall %e s, user %U s, sys %S s, max RSS %M kB" "$bin" stats "$big" -o /dev/null
  if "$python" -c 'import pandas' 2>/dev/null; then
    $pin /usr/bin/time -f "pandas: wall %e s, user %U s, sys %S s, max RSS %M kB" "$python" benches/pandas_load.py "$big"
  else
    echo "pandas: skipped ($python cannot import pandas)"
  fi
done
