"""The same three-stream pipeline with both hand-overs ordered by events.

Ground truth: clean.
"""
import torch

s1, s2, s3 = torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.Stream()
src = torch.randn(1 << 20, device="cuda")
torch.cuda.synchronize()
loaded, transformed = torch.cuda.Event(), torch.cuda.Event()
s1.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s1):
    stage = src * 1.0
    loaded.record(s1)
s2.wait_event(loaded)
with torch.cuda.stream(s2):
    mid = stage + 1.0
    transformed.record(s2)
s3.wait_event(transformed)
with torch.cuda.stream(s3):
    out = mid * 2.0
torch.cuda.synchronize()
print("GROUND_TRUTH clean: every hand-over waits on an event")
