#!/usr/bin/env bash
# On the GPU machine: overhead of capture (benches/gpu_overhead_rounds.sh, with CSAN beside), capture beside
# another CUPTI client (nsys), and a program that forks and execs. Results in $OUT.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source benches/gpu_env.sh
st=.gpu/bin/streamtrace
nvcc -O2 -arch=sm_90 -std=c++17 -o /tmp/race samples/cuda/two_streams_race.cu
CSAN=1 bash benches/gpu_overhead_rounds.sh 5 > "$OUT/overhead.txt" 2>&1
cat "$OUT/overhead.txt"
echo "== beside nsys (another CUPTI client)"
H=/opt/nvidia/nsight-compute/2025.3.1/host
mkdir -p /tmp/libdw && dpkg -x .gpu/libdw1_*.deb /tmp/libdw
LD_LIBRARY_PATH=/tmp/libdw/usr/lib/x86_64-linux-gnu:$H/target-linux-x64 $H/target-linux-x64/nsys profile -t cuda -s none --cpuctxsw=none -o /tmp/both --force-overwrite true \
  $st capture -o /tmp/b5 -- /tmp/race > "$OUT/beside_nsys.txt" 2>&1; echo "exit $?" >> "$OUT/beside_nsys.txt"
grep -E "streamtrace|GROUND|exit" "$OUT/beside_nsys.txt" | head
echo "== fork and exec"
cat > /tmp/forker.py <<'PY'
import os, subprocess, sys
import torch
x = torch.ones(4, device="cuda"); torch.cuda.synchronize()
pid = os.fork()
if pid == 0:
    os._exit(0)          # a forked child that makes no CUDA call
os.waitpid(pid, 0)
subprocess.run(["/tmp/race"], check=True)   # a child process with CUDA work: its own trace
print("forker done")
PY
$st capture -o /tmp/b6 -- python3 /tmp/forker.py > "$OUT/fork_exec.txt" 2>&1; echo "exit $?" >> "$OUT/fork_exec.txt"
ls -la /tmp/b6 >> "$OUT/fork_exec.txt"
cat "$OUT/fork_exec.txt" | grep -vE "^\s+at |^$" | head -40
tar czf "$OUT/traces.tgz" /tmp/b5 /tmp/b6 2>/dev/null
