"""Activation offloading with `torch.autograd.graph.save_on_cpu(pin_memory=True)`, three training steps: each
tensor autograd saves in forward is copied into pinned host memory (a device-to-host copy that waits for its
completion); backward copies it back with `non_blocking=True` on the compute stream, and the caching host
allocator records an event so that the pinned block is reused only once that copy is done.

Ground truth: clean.
"""
import torch
import torch.nn as nn

from lib_support import mlp

torch.manual_seed(0)
model = mlp(256, 512, 512, 8, activation=nn.GELU)
opt = torch.optim.SGD(model.parameters(), lr=1e-2)
for step in range(3):
    x = torch.randn(64, 256, device="cuda")
    with torch.autograd.graph.save_on_cpu(pin_memory=True):
        loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
torch.cuda.synchronize()
print(f"loss {loss.item():.4f}")
print("GROUND_TRUTH clean: save_on_cpu's copies are ordered on the compute stream and by the host allocator's events")
