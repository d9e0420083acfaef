"""The twin of views_column_slices with a column on the wrong side: s2 updates a column inside the half s1 fills.

Ground truth: fill_ of m[:, :512] on s1 and add_ of m[:, 8] on s2 are unordered and share column 8: race
(write/write). The other pairs (m[:, 512:] against m[:, :512] and m[:, 7]) share no byte.
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
    m[:, 8].add_(1.0)  # column 8 is in the left half
torch.cuda.synchronize()
print("GROUND_TRUTH race: m[:, 8] (s2) lies in m[:, :512] (s1): write-after-write on column 8")
