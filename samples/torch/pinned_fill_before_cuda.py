"""A pinned CPU tensor filled before the program's first CUDA call, then uploaded and used in order.

Ground truth: clean. Capture must not produce a trace its analyzer refuses: the fill's op begins before CUDA
is initialized (the capture library is not yet recording) and ends after it.
"""
import torch

host = torch.empty(1 << 20).pin_memory()  # pinning initializes CUDA inside the op
host.fill_(1.0)
device = host.to("cuda")
print(float(device.sum()))
print("GROUND_TRUTH clean: a pinned tensor filled before the first CUDA call")
