"""DistributedDataParallel at world size 1 over NCCL, with small gradient buckets so that backward fills and
all-reduces several of them, three training steps. The reducer copies each gradient into its bucket on the
compute stream; ProcessGroupNCCL runs the all-reduce on its own stream after an event recorded on the compute
stream, and finalizing backward makes the compute stream wait for the all-reduce before the gradients are
copied back and read by the optimizer.

Ground truth: clean.
"""
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.cuda.set_device(0)
store = dist.FileStore(os.path.join(tempfile.mkdtemp(), "store"), 1)
dist.init_process_group("nccl", store=store, rank=0, world_size=1, device_id=torch.device("cuda", 0))

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 16)).cuda()
model = DDP(net, device_ids=[0], bucket_cap_mb=0.05)  # 50 KB buckets: one or two layers each
opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
for step in range(3):
    x = torch.randn(32, 64, device="cuda")
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
torch.cuda.synchronize()
print(f"loss {loss.item():.4f}")
dist.destroy_process_group()
print("GROUND_TRUTH clean: DDP's reducer orders its all-reduces on the NCCL stream itself")
