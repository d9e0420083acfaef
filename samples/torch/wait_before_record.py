"""wait_event issued before the event is recorded: the wait orders nothing.

PyTorch creates the CUDA event at its first record, so the early wait makes no CUDA call at all: in an nsys
capture it simply does not exist (DESIGN.md rule 4), and the two kernels are unordered.
Ground truth: fill_ (s1) || mul_ (s2): race; no event wait in the trace.
"""
import torch

s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
buf = torch.empty(1 << 20, device="cuda")
torch.cuda.synchronize()
e = torch.cuda.Event()
s2.wait_event(e)  # too early: e has never been recorded
with torch.cuda.stream(s1):
    buf.fill_(1.0)
    e.record(s1)
with torch.cuda.stream(s2):
    buf.mul_(2.0)
torch.cuda.synchronize()
print("GROUND_TRUTH race: fill_ (s1) || mul_ (s2); the wait preceded the record")
