"""The twin of host_read_too_early: the host waits on an event recorded after the copy before reading.

Ground truth: event.synchronize() orders the host's read after the device-to-host copy: clean.
"""
import torch

side = torch.cuda.Stream()
x = torch.randn(1 << 22, device="cuda")
torch.cuda.synchronize()
done = torch.cuda.Event()
with torch.cuda.stream(side):
    y = (x * 2.0).to("cpu", non_blocking=True)
    done.record()
done.synchronize()
values = y.numpy()
total = y.sum()
print("GROUND_TRUTH clean: event.synchronize() before the host reads y")
