"""A prefetch loader done right: the default stream waits for the copy stream, and record_stream tells the
allocator the batch is used there.

Ground truth: clean.
"""
import torch

side = torch.cuda.Stream()
host = torch.randn(1 << 20).pin_memory()
for _ in range(2):
    with torch.cuda.stream(side):
        batch = host.to("cuda", non_blocking=True)
    torch.cuda.current_stream().wait_stream(side)
    batch.record_stream(torch.cuda.current_stream())
    out = batch * 2.0
torch.cuda.synchronize()
print("GROUND_TRUTH clean: wait_stream before use, record_stream for the allocator")
