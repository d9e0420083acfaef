#!/usr/bin/env bash
# Size and speed of the HTML report on a 100,000-operation trace: the file size, and the time from navigation
# to the end of the first timeline drawing in headless Chromium (the page records it in data-first-draw-ms).
#   benches/html_report.sh [OPS]     default 100000; needs chromium
set -euo pipefail
cd "$(dirname "$0")/.."
ops=${1:-100000}
dir=$(mktemp -d)
bin=target/release/streamtrace
[ -x "$bin" ] || cargo build --release
"$bin" synth -o "$dir/trace.json" --ops "$ops" --streams 16 --ranges 1000
start=$(date +%s.%N)
"$bin" analyze "$dir/trace.json" --html "$dir/report.html" --perfetto "$dir/perfetto.json" -o /dev/null || true
end=$(date +%s.%N)
echo "analyze with both timeline reports: $(echo "$end - $start" | bc) s"
ls -l "$dir/report.html" "$dir/perfetto.json" | awk '{print $5, $9}'
for run in 1 2 3; do
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --user-data-dir="$dir/profile" --window-size=1400,800 \
    --virtual-time-budget=20000 --dump-dom "file://$dir/report.html" 2>/dev/null \
    | grep -o 'data-first-draw-ms="[0-9.]*"' | sed "s/^/run $run: /"
done
