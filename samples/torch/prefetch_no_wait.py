"""A side-stream prefetch consumed on the default stream without waiting for it: a read-after-write race.

Ground truth: the host-to-device copy on the side stream and the kernel reading its result on the default
(legacy) stream are unordered: race. (PyTorch's side streams are non-blocking, so the legacy default stream's
barrier does not order them.)
"""
import torch

side = torch.cuda.Stream()
host = torch.randn(1 << 20).pin_memory()
for _ in range(2):
    with torch.cuda.stream(side):
        batch = host.to("cuda", non_blocking=True)
    out = batch * 2.0  # default stream, no wait_stream(side)
    torch.cuda.synchronize()
print("GROUND_TRUTH race: memcpy HtoD (side) || mul (default stream)")
