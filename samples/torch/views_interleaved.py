"""Two side streams update the even and the odd elements of one tensor: no byte in common, no race.

Ground truth: mul_ of buf[0::2] on s1 and add_ of buf[1::2] on s2 are unordered, but the views interleave (every
even float against every odd one) and share no byte (DESIGN.md, access tier T2): clean. Before strided views were
recorded, both were taken as the whole extent of buf and reported as a race.
"""
import torch

s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
buf = torch.ones(1 << 20, device="cuda")
torch.cuda.synchronize()
for _ in range(2):
    with torch.cuda.stream(s1):
        buf[0::2].mul_(2.0)
    with torch.cuda.stream(s2):
        buf[1::2].add_(1.0)
torch.cuda.synchronize()
print("GROUND_TRUTH clean: buf[0::2] (s1) and buf[1::2] (s2) share no byte")
