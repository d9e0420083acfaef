"""Two side streams write one buffer with nothing ordering them: a write/write race.

Ground truth: fill_ on s1 and mul_ on s2 are unordered in every iteration (and each iteration's fill_ is
unordered with the previous iteration's mul_): race.
"""
import torch

s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
buf = torch.empty(1 << 20, device="cuda")
torch.cuda.synchronize()
for _ in range(2):
    with torch.cuda.stream(s1):
        buf.fill_(1.0)
    with torch.cuda.stream(s2):
        buf.mul_(2.0)
torch.cuda.synchronize()
print("GROUND_TRUTH race: fill_ (s1) || mul_ (s2), no event edge")
