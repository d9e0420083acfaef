"""A hand-written Triton kernel writes a tensor on one stream while a torch op reads it on another. The Triton
launch is not a dispatcher op, so CSAN does not see it; streamtrace sees it at the driver (tier T1).

Ground truth: the Triton kernel (s1) and the torch op reading y (s2) are unordered: race.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2.0, mask=mask)


n = 1 << 20
x = torch.randn(n, device="cuda")
y = torch.empty(n, device="cuda")
scale_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)  # warm up and compile outside the race
torch.cuda.synchronize()
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
with torch.cuda.stream(s1):
    scale_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
with torch.cuda.stream(s2):
    total = y.sum()
torch.cuda.synchronize()
print("GROUND_TRUTH race: scale_kernel (Triton, s1) writes y while y.sum() (s2) reads it")
