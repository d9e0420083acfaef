#!/usr/bin/env bash
# Benchmark of one record spread over many lines (issue 16): a graph record of NODES nodes written one node per
# line, beside the same record on one line. Reading is linear when both take about the same time.
#
#   benches/multiline_record.sh [NODES...]      default: 16000 64000
#
# BIN names the binary (default target/release/streamtrace, built when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BIN:-target/release/streamtrace}
[ -x "$bin" ] || cargo build --release
dir=$(mktemp -d)
for nodes in "${@:-16000 64000}"; do
  for nodes_n in $nodes; do
    python3 - "$nodes_n" "$dir" <<'PY'
import json, sys
n, out = int(sys.argv[1]), sys.argv[2]
head = ['{"type":"streamtrace","version":1}', '{"type":"stream","id":1}']
nodes = [json.dumps({"name": f"n{i}", "writes": [[4096 * i, 64]], "deps": [i - 1] if i else []}) for i in range(n)]
open(f"{out}/lines.json", "w").write("\n".join(head) + '\n{"type":"graph","stream":1,"name":"g","nodes":[\n' + ",\n".join(nodes) + "\n]}\n")
open(f"{out}/one.json", "w").write("\n".join(head) + '\n{"type":"graph","stream":1,"name":"g","nodes":[' + ",".join(nodes) + "]}\n")
PY
    for layout in lines one; do
      /usr/bin/time -f "$nodes_n nodes, $layout: wall %e s, max RSS %M kB" "$bin" analyze "$dir/$layout.json" -o /dev/null
    done
  done
done
rm -rf "$dir"
