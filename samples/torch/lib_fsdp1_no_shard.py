"""FSDP1 (`FullyShardedDataParallel`) with each Linear wrapped, world size 1 on one GPU over NCCL, three training
steps. At world size 1 FSDP1 switches to NO_SHARD (it warns): its flat parameters stay whole and each unit's
gradient is all-reduced on FSDP's post-backward stream, which waits for the compute stream; the end of backward
makes the compute stream wait for it before the optimizer reads the gradients.

Ground truth: clean.
"""
import os
import tempfile
import warnings

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp.wrap import ModuleWrapPolicy

warnings.filterwarnings("ignore")
torch.cuda.set_device(0)
store = dist.FileStore(os.path.join(tempfile.mkdtemp(), "store"), 1)
dist.init_process_group("nccl", store=store, rank=0, world_size=1, device_id=torch.device("cuda", 0))

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 16)).cuda()
model = FSDP(net, auto_wrap_policy=ModuleWrapPolicy({nn.Linear}), device_id=0, use_orig_params=True)
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
print("GROUND_TRUTH clean: FSDP1 orders its post-backward stream itself")
