"""Two side streams update the left and the right columns of one row-major matrix: no byte in common.

Ground truth: fill_ of m[:, :512] on s1 and mul_ of m[:, 512:] on s2 are unordered, but each row's left half and
right half are distinct bytes, and so are the single columns m[:, 7] (in the left half) and m[:, 600] (in the
right half): clean. Taken as extents, every pair would overlap (each spans nearly the whole matrix).
"""
import torch

s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
m = torch.ones(1024, 1024, device="cuda")
torch.cuda.synchronize()
with torch.cuda.stream(s1):
    m[:, :512].fill_(1.0)
    m[:, 7].add_(1.0)
with torch.cuda.stream(s2):
    m[:, 512:].mul_(2.0)
    m[:, 600].add_(1.0)
torch.cuda.synchronize()
print("GROUND_TRUTH clean: m[:, :512] and m[:, 7] (s1) share no byte with m[:, 512:] and m[:, 600] (s2)")
