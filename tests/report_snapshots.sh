#!/usr/bin/env bash
# Writes the text and JSON report of every committed trace into DIR, one pair of files per trace, so that two
# builds can be compared byte for byte (`diff -r A B`): a change that must not alter any report is checked with
#   tests/report_snapshots.sh target/release/streamtrace /tmp/before   (on the old build)
#   tests/report_snapshots.sh target/release/streamtrace /tmp/after    (on the new one)
#   diff -r /tmp/before /tmp/after
# usage: tests/report_snapshots.sh STREAMTRACE_BINARY DIR
set -euo pipefail
bin=$(realpath "$1")
out=$2
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
cd "$repo"
traces=$(find samples -name '*.json' -path 'samples/*' ! -name 'README*' | sort; find samples -name '*.sqlite' | sort;
         find samples/capture/multi_gpu -mindepth 1 -maxdepth 1 -type d | sort)
for trace in $traces; do
  # Only traces: skip JSON files that are not streamtrace traces (none today, but a report must not be mistaken).
  name=$(echo "$trace" | tr '/' '_')
  for format in text json; do
    status=0
    "$bin" analyze "$trace" --format "$format" > "$out/$name.$format" 2> "$out/$name.$format.stderr" || status=$?
    echo "exit $status" >> "$out/$name.$format.stderr"
  done
done
echo "$(ls "$out" | wc -l) files in $out"
