"""Two streams write one buffer; only record_stream is called, which keeps the memory alive but orders nothing.

Ground truth: fill_ on s1 and mul_ on s2 are unordered: race.
"""
import torch

s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
buf = torch.empty(1 << 20, device="cuda")
torch.cuda.synchronize()
with torch.cuda.stream(s1):
    buf.fill_(1.0)
buf.record_stream(s2)
with torch.cuda.stream(s2):
    buf.mul_(2.0)
torch.cuda.synchronize()
print("GROUND_TRUTH race: fill_ (s1) || mul_ (s2); record_stream orders nothing")
