"""FSDP2 (`torch.distributed.fsdp.fully_shard`) on a small model, world size 1 on one GPU over NCCL, three
training steps. FSDP2 runs its all-gathers on its own streams (all-gather copy-in and all-gather), its
reduce-scatters on another, and orders them against the compute stream with events and wait_stream; parameters
and gradients are DTensors whose local shards the optimizer updates on the default stream.

Ground truth: clean (the library orders its streams itself; the program adds no stream of its own).
"""
import torch
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

from lib_support import mlp, one_rank_nccl_group, train_steps

one_rank_nccl_group()
torch.manual_seed(0)
model = mlp(64, 128, 128, 16)
for layer in model:
    if isinstance(layer, nn.Linear):
        fully_shard(layer)
fully_shard(model)
loss = train_steps(model, torch.optim.AdamW(model.parameters(), lr=1e-3))
print(f"loss {loss.item():.4f}")
torch.distributed.destroy_process_group()
print("GROUND_TRUTH clean: FSDP2 orders its all-gather and reduce-scatter streams itself")
