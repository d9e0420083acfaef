"""A result copied to the host with non_blocking=True and read before anything waited for the copy.

Ground truth: the device-to-host copy into pinned memory (side stream) and the host's read of the CPU tensor
(`.numpy()`, then a CPU op) are unordered: race (rule 12). PyTorch's CUDA sanitizer does not see host accesses.
"""
import torch

side = torch.cuda.Stream()
x = torch.randn(1 << 22, device="cuda")
torch.cuda.synchronize()
with torch.cuda.stream(side):
    y = (x * 2.0).to("cpu", non_blocking=True)  # pinned destination: returns before the copy is done
values = y.numpy()  # the host reads bytes the copy may not have written yet
total = y.sum()
torch.cuda.synchronize()
print("GROUND_TRUTH race: memcpy DtoH (side) || host read of y (numpy, sum)")
