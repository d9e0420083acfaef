#!/usr/bin/env bash
# On the GPU machine: several of the benches/gpu_*.sh scripts in one call, each under its own time limit and
# with its own result folder, packed at the end into $OUT/session.tar.gz (the device tool brings back at most
# eight files), with each part's text summaries also copied to $OUT as PART.txt.
# usage: gpu_session.sh PART[:SECONDS] ...   PART is a script benches/gpu_PART.sh, or `cuda:NAME,NAME[:S]` to
# capture those samples/cuda programs with both backends (samples/cuda/run_all.sh).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
results=$(mktemp -d)
for part in "$@"; do
  IFS=: read -r name arg limit <<< "$part"
  dir=$results/$name; mkdir -p "$dir"
  started=$(date +%s)
  if [ "$name" = cuda ]; then
    # cuda:NAME,NAME[:SECONDS]
    names=${arg//,/ }; limit=${limit:-120}
    mkdir -p "$dir/exact" "$dir/default"
    CUDA="$names" CAPTURE_ARGS=--exact timeout "$limit" bash samples/cuda/run_all.sh "$dir/exact" > "$dir/cuda.txt" 2>&1
    CUDA="$names" timeout "$limit" bash samples/cuda/run_all.sh "$dir/default" >> "$dir/cuda.txt" 2>&1
  else
    limit=${arg:-300}
    OUT=$dir timeout "$limit" bash "benches/gpu_$name.sh" > "$dir/$name.log" 2>&1
  fi
  echo "== $name: exit $? after $(( $(date +%s) - started )) s"
  for txt in "$dir"/*.txt; do [ -f "$txt" ] && cp "$txt" "$OUT/$name-$(basename "$txt")"; done
  tail -25 "$dir"/*.log 2>/dev/null | tail -25
done
tar -czf "$OUT/session.tar.gz" -C "$results" .
ls "$OUT"
