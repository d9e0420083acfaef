"""A CUDA kernel of the program's own, built with nvcc and called through ctypes on torch tensors (as projects do
with kernels that are not PyTorch ops: no dispatcher, no RecordFunction, so tier T1 sees it at the driver, by its
pointer arguments). A side stream computes `y` and, later, a neighbour `w`; the kernel reads `y` and writes `z` on
the stream it is given. `y` and `w` are small tensors from one segment of the caching allocator: only their own
blocks may stand for what the kernel touches, never the whole segment.

Variants (the argument):
- (none): the kernel runs on PyTorch's default stream (the legacy default stream, handle 0) after
  `torch.cuda.current_stream().wait_stream(side)`; the side stream then writes `w` while the kernel may still run.
- `current-stream`: the kernel runs on the side stream itself (`torch.cuda.current_stream().cuda_stream` inside
  `torch.cuda.stream(side)`), after the op that writes `y` there.
- `no-wait`: as the first, without the wait. The side stream is non-blocking (PyTorch creates its streams so), so
  the legacy default stream does not wait for it.

Ground truth: clean, clean; with `no-wait`, race (the side stream's `mul` writes y || the kernel reads y).
"""
import ctypes
import os
import subprocess
import sys
import tempfile

import torch

KERNEL = r"""
#include <cuda_runtime.h>
__global__ void scale_into(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * in[i];
}
extern "C" int launch_scale_into(const float* in, float* out, int n, unsigned long long stream) {
  scale_into<<<(n + 255) / 256, 256, 0, reinterpret_cast<cudaStream_t>(stream)>>>(in, out, n);
  return static_cast<int>(cudaGetLastError());
}
"""


def build_kernel():
    """The kernel's library, built with nvcc into a temporary directory."""
    folder = tempfile.mkdtemp(prefix="own_kernel_")
    source, library = os.path.join(folder, "scale.cu"), os.path.join(folder, "libscale.so")
    with open(source, "w") as f:
        f.write(KERNEL)
    nvcc = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")
    subprocess.run([nvcc if os.path.exists(nvcc) else "nvcc", "-shared", "-Xcompiler", "-fPIC", "-o", library, source],
                   check=True)
    return ctypes.CDLL(library)


variant = sys.argv[1] if len(sys.argv) > 1 else ""
lib = build_kernel()


def scale_into(source, out, stream):
    status = lib.launch_scale_into(ctypes.c_void_p(source.data_ptr()), ctypes.c_void_p(out.data_ptr()),
                                   ctypes.c_int(source.numel()), ctypes.c_ulonglong(stream))
    assert status == 0, f"launch failed: {status}"


n = 1 << 16  # 256 KiB a tensor: the small pool's 2 MiB segments hold several
x = torch.randn(n, device="cuda")
y = torch.empty(n, device="cuda")
w = torch.empty(n, device="cuda")
z = torch.empty(n, device="cuda")
scale_into(x, z, 0)  # load the module outside the race
torch.cuda.synchronize()
side = torch.cuda.Stream()
with torch.cuda.stream(side):
    torch.mul(x, 3.0, out=y)
    if variant == "current-stream":
        scale_into(y, z, torch.cuda.current_stream().cuda_stream)
if variant != "current-stream":
    if variant != "no-wait":
        torch.cuda.current_stream().wait_stream(side)
    scale_into(y, z, torch.cuda.current_stream().cuda_stream)
    with torch.cuda.stream(side):
        torch.mul(x, 4.0, out=w)  # a neighbour of y in its segment, while the kernel may still read y
torch.cuda.synchronize()
assert torch.allclose(z, 6.0 * x) or variant == "no-wait"
if variant == "no-wait":
    print("GROUND_TRUTH race: mul (side stream) writes y || scale_into (legacy default stream) reads y")
else:
    print("GROUND_TRUTH clean: the kernel's stream is ordered after the op that wrote y; w is another block")
# VARIANT: current-stream
# VARIANT: no-wait
