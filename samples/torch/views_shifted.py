"""Two side streams update views of one tensor that are shifted by one stride: they share elements, a race.

Ground truth: fill_ of buf[0::2] on s1 and mul_ of buf[2::2] on s2 are unordered and both touch every even
float from buf[2] on: race (write/write), whatever the strided views say.
"""
import torch

s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
buf = torch.ones(1 << 20, device="cuda")
torch.cuda.synchronize()
with torch.cuda.stream(s1):
    buf[0::2].fill_(3.0)
with torch.cuda.stream(s2):
    buf[2::2].mul_(2.0)
torch.cuda.synchronize()
print("GROUND_TRUTH race: buf[0::2] (s1) and buf[2::2] (s2) share buf[2], buf[4], ...")
