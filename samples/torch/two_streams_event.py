"""The race-free twin of two_streams_no_wait.py: an event orders the two streams both ways.

Ground truth: fill_ (s1) -> event -> mul_ (s2), and mul_ -> event -> the next fill_: clean.
"""
import torch

s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
buf = torch.empty(1 << 20, device="cuda")
torch.cuda.synchronize()
filled, multiplied = torch.cuda.Event(), torch.cuda.Event()
for _ in range(2):
    with torch.cuda.stream(s1):
        s1.wait_event(multiplied) if _ > 0 else None
        buf.fill_(1.0)
        filled.record(s1)
    with torch.cuda.stream(s2):
        s2.wait_event(filled)
        buf.mul_(2.0)
        multiplied.record(s2)
torch.cuda.synchronize()
print("GROUND_TRUTH clean: fill_ (s1) -> mul_ (s2) by event, mul_ -> next fill_ by event")
