"""The host waits for an event, then launches on another stream.

Ground truth: fill_ (s1) -> event.synchronize() -> mul on s2: clean.
"""
import torch

s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
buf = torch.empty(1 << 20, device="cuda")
torch.cuda.synchronize()
done = torch.cuda.Event()
with torch.cuda.stream(s1):
    buf.fill_(1.0)
    done.record(s1)
done.synchronize()
with torch.cuda.stream(s2):
    out = buf * 2.0
torch.cuda.synchronize()
print("GROUND_TRUTH clean: the host synchronized on the event before launching on s2")
