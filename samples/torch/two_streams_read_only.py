"""Two streams only read one tensor (each writes its own result): never a race.

At tier T1 the results live in the same caching-allocator segment as the input, so block-level analysis cannot
tell them apart; tier T2's exact extents can. Ground truth: clean.
"""
import torch

s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
x = torch.randn(1 << 20, device="cuda")
torch.cuda.synchronize()
with torch.cuda.stream(s1):
    a = x.sum()
with torch.cuda.stream(s2):
    b = x.max()
torch.cuda.synchronize()
print("GROUND_TRUTH clean: x.sum() on s1 and x.max() on s2 only read x")
