#!/usr/bin/env bash
# Regenerates the pictures in docs/ from committed traces and the shared nsys corpus: the HTML report of a
# PyTorch race, a CUDA-graph race, a two-rank job and a 2-GPU FSDP nsys export, taken in headless Chromium, and
# the --png timeline picture of the PyTorch race.
#
#   docs/screenshots/make.sh [BINARY]
#
# BINARY defaults to target/release/streamtrace, else target/debug/streamtrace. Needs Chromium (or Chrome) on
# PATH. With Node (22+, or 20 with --experimental-websocket) the pictures are taken through the DevTools
# protocol with the pointer over the picked race, so that they show a tooltip; without it, by Chromium's own
# --screenshot, without one. The FSDP export comes from STREAMTRACE_SHARED/nsys-public (default ../shared, beside
# the checkout); without it that picture is left as it is.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
bin=${1:-}
if [[ -z $bin ]]; then
  for candidate in target/release/streamtrace target/debug/streamtrace; do
    [[ -x $candidate ]] && { bin=$candidate; break; }
  done
fi
[[ -n $bin && -x $bin ]] || { echo "make.sh: no streamtrace binary (cargo build --release, or name one)" >&2; exit 2; }
chromium=""
for name in chromium chromium-browser google-chrome google-chrome-stable; do
  command -v "$name" >/dev/null && { chromium=$(command -v "$name"); break; }
done
[[ -n $chromium ]] || { echo "make.sh: no Chromium or Chrome on PATH" >&2; exit 2; }
shared=${STREAMTRACE_SHARED:-$root/../shared}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

node_flags=()
have_node=false
if command -v node >/dev/null; then
  if node -e 'process.exit(typeof WebSocket === "function" ? 0 : 1)' 2>/dev/null; then
    have_node=true
  elif node --experimental-websocket -e 'process.exit(typeof WebSocket === "function" ? 0 : 1)' 2>/dev/null; then
    have_node=true; node_flags=(--experimental-websocket)
  fi
fi

# shot HTML PNG: the page at 1500x850, its first finding picked.
shot() {
  local html=$1 png=$2
  if $have_node && node "${node_flags[@]}" docs/screenshots/shoot.mjs "$chromium" "file://$html" "$png" 1500 850; then
    :
  else
    $have_node && echo "make.sh: the DevTools shot failed; taking $png without a tooltip" >&2
    "$chromium" --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
      --user-data-dir="$work/profile" --virtual-time-budget=5000 --window-size=1500,850 \
      --screenshot="$png" "file://$html" >/dev/null 2>&1
  fi
  echo "wrote $png"
}

# report TRACE NAME: its HTML report (analyze exits 1 on findings: that is what these traces are for).
report() {
  local status=0
  "$bin" analyze "$1" --html "$work/$2.html" >/dev/null || status=$?
  [[ $status -le 1 ]] || { echo "make.sh: analyze $1 exited $status" >&2; exit 1; }
  shot "$work/$2.html" "docs/$2.png"
}

report samples/capture/torch-t2/pipeline_missing_wait.json html-report
report samples/capture/torch-t2/graph_capture_unjoined.json html-graph-race
report samples/capture/multi_gpu/dist_send_recv_before_wait html-two-ranks
if [[ -f $shared/nsys-public/nsysai_h100_2gpu_1s.sqlite ]]; then
  report "$shared/nsys-public/nsysai_h100_2gpu_1s.sqlite" html-nsys-fsdp
else
  echo "make.sh: $shared/nsys-public/nsysai_h100_2gpu_1s.sqlite is absent: docs/html-nsys-fsdp.png left as it is" >&2
fi
status=0
"$bin" analyze samples/capture/torch-t2/pipeline_missing_wait.json --png docs/timeline.png >/dev/null || status=$?
[[ $status -le 1 ]] || { echo "make.sh: the --png picture failed (a TrueType font? STREAMTRACE_FONT)" >&2; exit 1; }
echo "wrote docs/timeline.png"
