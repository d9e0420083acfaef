#!/usr/bin/env bash
# On the GPU machine: the binary trace encoding (issue 23 item 1) in real captures. Each program below is captured
# in the default mode (which must write a binary trace.PID.stbin) and with --trace-format json, both traces are
# analyzed, and the findings (kind and both sites' names and places) and exit statuses must agree; the binary
# trace converted to JSON must give the same report as the binary itself; an online capture (--no-trace, the
# analyzer reading the binary stream as the program runs) must give the binary file's findings and write no file.
# Also prints each trace's size in both encodings (bytes per record). Results: $OUT/binary_trace.txt, one
# PASS/FAIL line per check, and the traces and logs as $OUT/binary_trace.tar.gz. Needs the binary and library in
# .gpu/ (benches/gpu_env.sh) and torch for the Python programs.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
# gpu_env.sh makes the other scripts record JSON: this one tests the default.
unset STREAMTRACE_TRACE_FORMAT
bin=$repo/.gpu/bin
OUT=${OUT:-$(mktemp -d)}
work=$(mktemp -d)
summary=$OUT/binary_trace.txt
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }
check() { # NAME CONDITION-TEXT: PASS when the last command succeeded
  if [ "$1" = 0 ]; then say "PASS $2"; else say "FAIL $2"; fi
}
# Findings of a JSON report as sorted lines: kind, earlier and later site (name, source), and the verdict.
findings() {
  python3 - "$1" <<'EOF'
import json, sys
try:
    report = json.load(open(sys.argv[1]))
except Exception as e:
    print("unreadable report:", e); sys.exit(0)
def site(side):
    s = side.get("site", {})
    return "%s @ %s" % (s.get("name"), (s.get("source") or {}).get("file"))
reports = report.get("traces", [report]) if isinstance(report, dict) else [report]
lines = []
for r in reports:
    r = r.get("report", r)
    for key in ("races", "timing_only_races", "unrecorded_waits"):
        for f in r.get(key) or []:
            lines.append("%s %s | %s -> %s" % (key, f.get("kind"), site(f.get("earlier", {})), site(f.get("later", {}))))
    lines.append("verdict %s" % r.get("verdict"))
print("\n".join(sorted(lines)))
EOF
}
# CUDA samples: races and clean twins, a graph, host synchronization between threads.
cuda=(two_streams_race two_streams_event graph_capture_fork_race threads_fill_mutex_handover)
mkdir -p "$work/build"
for name in "${cuda[@]}"; do
  nvcc -g -lineinfo -O2 -arch=sm_90 -std=c++17 -o "$work/build/$name" "samples/cuda/$name.cu" -lpthread \
    $(sed -n 's|^// LINK: ||p' "samples/cuda/$name.cu") &
done
wait
programs=()
for name in "${cuda[@]}"; do programs+=("$name:$work/build/$name"); done
for py in samples/torch/two_streams_no_wait.py samples/torch/views_interleaved.py benches/torch_train_loop.py; do
  programs+=("$(basename "$py" .py):python3 $repo/$py")
done
for entry in "${programs[@]}"; do
  name=${entry%%:*}; command=${entry#*:}
  dir=$work/$name; mkdir -p "$dir"
  # shellcheck disable=SC2086
  timeout 600 "$bin/streamtrace" capture --no-analyze -o "$dir/bin" -- $command > "$dir/bin.log" 2>&1
  timeout 600 "$bin/streamtrace" capture --no-analyze --trace-format json -o "$dir/json" -- $command > "$dir/json.log" 2>&1
  bin_trace=$(ls "$dir"/bin/trace.*.stbin 2>/dev/null | head -1)
  json_trace=$(ls "$dir"/json/trace.*.json 2>/dev/null | head -1)
  [ -n "$bin_trace" ] && [ "$(head -c 6 "$bin_trace" | tail -c 5)" = "STBIN" ] && ! ls "$dir"/bin/trace.*.json >/dev/null 2>&1
  check $? "$name: the default capture writes a binary trace.PID.stbin ($(ls "$dir/bin" | tr '\n' ' '))"
  [ -n "$json_trace" ] && [ "$(head -c 1 "$json_trace")" = "{" ]
  check $? "$name: --trace-format json writes trace.PID.json"
  [ -n "$bin_trace" ] && [ -n "$json_trace" ] || continue
  records=$(grep -c . "$json_trace")
  bin_bytes=$(stat -c %s "$bin_trace"); json_bytes=$(stat -c %s "$json_trace")
  say "SIZE $name: $records records; JSON $json_bytes bytes ($((json_bytes / records)) B/record), binary $bin_bytes bytes ($((bin_bytes / records)) B/record), ratio $(awk -v a="$json_bytes" -v b="$bin_bytes" 'BEGIN { printf "%.2f", a / b }')"
  "$bin/streamtrace" analyze "$bin_trace" --format json > "$dir/bin.report.json" 2> "$dir/bin.analyze.log"; bin_status=$?
  "$bin/streamtrace" analyze "$json_trace" --format json > "$dir/json.report.json" 2> "$dir/json.analyze.log"; json_status=$?
  findings "$dir/bin.report.json" > "$dir/bin.findings"; findings "$dir/json.report.json" > "$dir/json.findings"
  [ "$bin_status" = "$json_status" ] && diff "$dir/json.findings" "$dir/bin.findings" > "$dir/findings.diff"
  check $? "$name: binary and JSON captures give the same findings and exit status ($bin_status, $json_status; $(grep -c . "$dir/bin.findings") lines)"
  grep -E '"(json\.skipped[a-z_]*|json\.dropped_unknown_fields|json\.recording_without_closing_record)"' -A2 "$dir/bin.report.json" | grep -E '"count": [1-9]' > "$dir/bin.losses"
  [ ! -s "$dir/bin.losses" ]
  check $? "$name: the binary trace reads without skipped records"
  "$bin/streamtrace" convert "$bin_trace" "$dir/converted.json" 2> "$dir/convert.log" &&
    "$bin/streamtrace" analyze "$dir/converted.json" --format json > "$dir/converted.report.json" 2>/dev/null
  converted_status=$?
  findings "$dir/converted.report.json" > "$dir/converted.findings"
  [ "$converted_status" = "$bin_status" ] && diff "$dir/bin.findings" "$dir/converted.findings" > /dev/null
  check $? "$name: the binary trace converted to JSON reads to the same findings"
  # Online, binary stream, no file: its text report against the binary file's (as gpu_online.sh compares them).
  timeout 600 "$bin/streamtrace" capture --no-trace -o "$dir/online" -- $command > "$dir/online.log" 2>&1
  files=$(ls "$dir/online" 2>/dev/null | grep -c 'trace\.')
  # From the folder the capture ran in, so that source paths are shown as the online report shows them.
  "$bin/streamtrace" analyze "$dir/bin" > "$dir/offline.log" 2>&1
  captured_report_words "$dir/online.log" > "$dir/online.text"
  normalized_report "$dir/offline.log" | report_words > "$dir/offline.text"
  [ "$files" = 0 ] && [ -s "$dir/offline.text" ] && diff "$dir/offline.text" "$dir/online.text" > "$dir/online.diff"
  check $? "$name: online analysis of the binary stream reports what the binary file does, no file written (files $files)"
done
tar -czf "$OUT/binary_trace.tar.gz" -C "$work" .
say "$(grep -c '^PASS' "$summary") PASS, $(grep -c '^FAIL' "$summary") FAIL"
