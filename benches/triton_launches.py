"""Times launches of a small hand-written Triton kernel (`out = x + y`, 4096 floats), as a program that launches its
own kernels in a loop pays them: the first launch (Triton's compile and, under capture, PyTorch's analysis of the
kernel's Triton IR and its import) and the steady pace (the median of 10 windows of LAUNCHES/10 launches, each
window ended by a synchronize). benches/gpu_triton_launches.sh runs it plain and under capture, with and without
Triton's launches recorded as ops.
"""
import os
import statistics
import time

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


launches = int(os.environ.get("LAUNCHES", "20000"))
n = 4096
x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
out = torch.empty_like(x)
grid = (triton.cdiv(n, 1024),)
torch.cuda.synchronize()
started = time.perf_counter()
add_kernel[grid](x, y, out, n, BLOCK=1024)
torch.cuda.synchronize()
first = time.perf_counter() - started
window = max(1, launches // 10)
paces = []
for _ in range(10):
    started = time.perf_counter()
    for _ in range(window):
        add_kernel[grid](x, y, out, n, BLOCK=1024)
    torch.cuda.synchronize()
    paces.append((time.perf_counter() - started) / window)
assert torch.allclose(out, x + y)
print("triton launches: first %.1f ms, steady %.2f us a launch (windows %s)" % (
    first * 1e3, statistics.median(paces) * 1e6, " ".join("%.2f" % (p * 1e6) for p in paces)))
