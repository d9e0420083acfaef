"""The twin of staging_refill_too_early: each upload's stream is synchronized before the buffer is refilled.

Ground truth: side.synchronize() orders the host's refill after the previous upload: clean.
"""
import torch

side = torch.cuda.Stream()
staging = torch.empty(1 << 22).pin_memory()
batches = [torch.randn(1 << 22) for _ in range(2)]
torch.cuda.synchronize()
for batch in batches:
    side.synchronize()  # the previous upload is done with the buffer
    staging.copy_(batch)
    with torch.cuda.stream(side):
        on_gpu = staging.to("cuda", non_blocking=True)
torch.cuda.synchronize()
print("GROUND_TRUTH clean: side.synchronize() before each refill")
