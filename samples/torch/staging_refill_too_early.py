"""A pinned staging buffer refilled on the host while the upload from it may still be queued.

Ground truth: the host-to-device copy from the pinned buffer (side stream) and the host's refill of that buffer
(`copy_` into the CPU tensor) are unordered: race (rule 12).
"""
import torch

side = torch.cuda.Stream()
staging = torch.empty(1 << 22).pin_memory()
batches = [torch.randn(1 << 22) for _ in range(2)]
torch.cuda.synchronize()
for batch in batches:
    staging.copy_(batch)  # the host refills the buffer: the previous upload may still read it
    with torch.cuda.stream(side):
        on_gpu = staging.to("cuda", non_blocking=True)
torch.cuda.synchronize()
print("GROUND_TRUTH race: memcpy HtoD from staging (side) || host copy_ into staging")
