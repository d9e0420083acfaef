"""Exit check for two-GPU NCCL programs under capture (issue 14): an all-reduce per rank, then the process ends
without destroying its process group, as many scripts do, so that NCCL's and c10d's threads are still running
while the process exits. Run under torchrun with 2 processes; every rank must exit 0 with and without capture.
"""
import os

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
torch.cuda.set_device(device)
dist.init_process_group("nccl", device_id=device)
t = torch.full((1 << 20,), float(rank + 1), device=device)
for _ in range(8):
    dist.all_reduce(t)
torch.cuda.synchronize()
print(f"rank {rank}: {t[0].item()}", flush=True)
