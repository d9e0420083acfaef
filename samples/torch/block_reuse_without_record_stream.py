"""A tensor read on a side stream is freed without record_stream; its caching-allocator block is reused at once
by a new tensor written on the default stream. CSAN forgets a tensor's history when it is freed and misses this.

Ground truth: the side stream's read of `a` and the default stream's fill_ of `b` (same bytes): race.
"""
import torch

side = torch.cuda.Stream()
a = torch.randn(1 << 20, device="cuda")
torch.cuda.synchronize()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    total = a.sum()          # reads a on the side stream
del a                        # freed without a.record_stream(side): the block is free for the default stream
b = torch.empty(1 << 20, device="cuda")
b.fill_(3.0)                 # reuses a's block while the side stream may still read it
torch.cuda.synchronize()
print("GROUND_TRUTH race: sum (side) reads the block that fill_ (default stream) writes after the free")
