# Sourced by the scripts that build or run programs linking NCCL (samples/cuda/run_all.sh,
# samples/cuda-projects/nccl_tests.sh): `find_nccl_lib` sets NCCL_LIB to the folder holding libnccl.so.2, the one
# PyTorch on the GPU machine loads unless NCCL_HOME names another. Uses the caller's `die`.
# The folder with libnccl.so.2: NCCL_HOME/lib if set, else the wheel's nvidia/nccl/lib (or nvidia/cu13/lib, the
# layout of the CUDA 13 wheels that merge their libraries) in any of python3's site-packages, else the system's.
find_nccl_lib() {
  NCCL_LIB=""
  if [ -n "${NCCL_HOME:-}" ]; then
    [ -e "$NCCL_HOME/lib/libnccl.so.2" ] || die "no lib/libnccl.so.2 under NCCL_HOME=$NCCL_HOME"
    NCCL_LIB=$NCCL_HOME/lib; return 0
  fi
  NCCL_LIB=$(python3 - <<'PY' 2>/dev/null
import glob, os, site, sys
dirs = []
try:
    import nvidia.nccl
    dirs += [os.path.join(p, "lib") for p in nvidia.nccl.__path__]
except Exception:
    pass
roots = list(sys.path)
try:
    roots += site.getsitepackages() + [site.getusersitepackages()]
except Exception:
    pass
for r in roots:
    if r and os.path.isdir(r):
        dirs += [os.path.join(r, "nvidia", "nccl", "lib"), os.path.join(r, "nvidia", "cu13", "lib")]
        dirs += sorted(glob.glob(os.path.join(r, "nvidia", "*", "lib")))
for d in dirs:
    if os.path.exists(os.path.join(d, "libnccl.so.2")):
        print(os.path.realpath(d)); break
PY
)
  if [ -z "$NCCL_LIB" ]; then
    local so
    so=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 .*x86-64/ {print $NF; exit}')
    [ -n "$so" ] && NCCL_LIB=$(dirname "$(readlink -f "$so")")
  fi
  [ -n "$NCCL_LIB" ] || die "no libnccl.so.2: set NCCL_HOME, or install nvidia-nccl-cu13 for python3"
}
