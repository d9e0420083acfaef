"""A three-stream pipeline (load -> transform -> emit) whose second hand-over has no wait.

Ground truth: transform's write of `mid` (s2) and emit's read of it (s3) are unordered: race.
"""
import torch

s1, s2, s3 = torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.Stream()
src = torch.randn(1 << 20, device="cuda")
torch.cuda.synchronize()
loaded = torch.cuda.Event()
with torch.cuda.stream(s1):
    stage = src * 1.0
    loaded.record(s1)
s2.wait_event(loaded)
with torch.cuda.stream(s2):
    mid = stage + 1.0
with torch.cuda.stream(s3):           # missing: s3.wait_event(transformed)
    out = mid * 2.0
torch.cuda.synchronize()
print("GROUND_TRUTH race: add (s2) writes mid, mul (s3) reads it without a wait")
