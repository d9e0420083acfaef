"""FSDP2 (`torch.distributed.fsdp.fully_shard`) on a small model, world size 1 on one GPU over NCCL, three
training steps. FSDP2 runs its all-gathers on its own streams (all-gather copy-in and all-gather), its
reduce-scatters on another, and orders them against the compute stream with events and wait_stream; parameters
and gradients are DTensors whose local shards the optimizer updates on the default stream.

Ground truth: clean (the library orders its streams itself; the program adds no stream of its own).
"""
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

torch.cuda.set_device(0)
store = dist.FileStore(os.path.join(tempfile.mkdtemp(), "store"), 1)
dist.init_process_group("nccl", store=store, rank=0, world_size=1, device_id=torch.device("cuda", 0))

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 16)).cuda()
for layer in model:
    if isinstance(layer, nn.Linear):
        fully_shard(layer)
fully_shard(model)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(3):
    x = torch.randn(32, 64, device="cuda")
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
torch.cuda.synchronize()
print(f"loss {loss.item():.4f}")
dist.destroy_process_group()
print("GROUND_TRUTH clean: FSDP2 orders its all-gather and reduce-scatter streams itself")
