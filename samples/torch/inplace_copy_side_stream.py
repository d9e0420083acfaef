"""An in-place copy on a side stream, read by the default stream without a wait.

Ground truth: copy_ (side) writes dst, the default stream's sum reads it: race.
"""
import torch

side = torch.cuda.Stream()
dst = torch.zeros(1 << 20, device="cuda")
src = torch.randn(1 << 20, device="cuda")
torch.cuda.synchronize()
with torch.cuda.stream(side):
    dst.copy_(src)
total = dst.sum()  # default stream, no wait on side
torch.cuda.synchronize()
print("GROUND_TRUTH race: copy_ (side) writes dst while sum (default stream) reads it")
