#!/usr/bin/env bash
# Benchmark of strided views in the shadow memory: `streamtrace analyze` on a trace whose accesses are views of
# one 1 GiB float matrix (16384 x 16384) against the same trace with every access a plain range of the same
# extent. Each iteration: two streams update every other column (x[:, 0::2], x[:, 1::2]: disjoint), a third
# stream reads the whole matrix after an event from both, then one shifted view (x[:, 2::2]) races with x[:, 0::2]
# every 64th iteration. Figures go to docs/performance.md by hand.
#
#   benches/views.sh [ITERATIONS]      default 200000 (about 1 M operations)
#
# Needs a release build (cargo build --release) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
iterations=${1:-200000}
bin=target/release/streamtrace
dir=$(mktemp -d)
[ -x "$bin" ] || cargo build --release
python3 - "$iterations" "$dir" <<'PY'
import sys
iterations, out = int(sys.argv[1]), sys.argv[2]
base, rows, cols = 0x7f0000000000, 16384, 16384
size = rows * cols * 4
def view(first, step):
    # x[:, first::step]: rows x (cols/step) floats, strides (cols, step) elements.
    n = (cols - first + step - 1) // step
    extent = ((rows - 1) * cols + (n - 1) * step) * 4 + 4
    return '["%d",%d,4,[[%d,%d],[%d,%d]]]' % (base + 4 * first, extent, rows, cols, n, step), '["%d",%d]' % (base + 4 * first, extent)
for kind in ("views", "plain"):
    pick = 0 if kind == "views" else 1
    with open("%s/%s.json" % (out, kind), "w") as f:
        w = f.write
        w('{"type":"streamtrace","version":1}\n')
        for s in (1, 2, 3):
            w('{"type":"stream","id":%d,"stream_kind":"non_blocking"}\n' % s)
        w('{"type":"event","id":1}\n{"type":"event","id":2}\n{"type":"event","id":3}\n')
        w('{"type":"alloc","id":1,"addr":"%d","size":%d}\n' % (base, size))
        even, odd, shifted, whole = view(0, 2)[pick], view(1, 2)[pick], view(2, 2)[pick], '["%d",%d]' % (base, size)
        for i in range(iterations):
            w('{"type":"wait","stream":1,"event":3}\n' if i else '')
            w('{"type":"kernel","stream":1,"name":"even","reads":[%s],"writes":[%s]}\n' % (even, even))
            w('{"type":"record","event":1,"stream":1}\n')
            w('{"type":"wait","stream":2,"event":3}\n' if i else '')
            w('{"type":"kernel","stream":2,"name":"odd","reads":[%s],"writes":[%s]}\n' % (odd, odd))
            w('{"type":"record","event":2,"stream":2}\n')
            if i % 64 == 63:
                w('{"type":"kernel","stream":2,"name":"shifted","writes":[%s]}\n' % shifted)
            w('{"type":"wait","stream":3,"event":1}\n{"type":"wait","stream":3,"event":2}\n')
            w('{"type":"kernel","stream":3,"name":"sum","reads":[%s]}\n' % whole)
            w('{"type":"record","event":3,"stream":3}\n')
PY
ls -l "$dir"
for kind in plain views; do
  echo "== $kind"
  /usr/bin/time -f "wall %e s, max RSS %M kB" "$bin" analyze "$dir/$kind.json" --timing -o "$dir/$kind.txt" || [ $? -eq 1 ]
  grep -m1 '^SUMMARY' "$dir/$kind.txt" || true
done
