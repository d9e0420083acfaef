"""A small data-parallel training loop (DistributedDataParallel over NCCL), correctly ordered; also the overhead
benchmark of capture on two GPUs (docs/performance.md).

Ground truth, on every rank: clean (DDP's gradient all-reduces are waited for before the optimizer step).
Prints the loop's own wall time: "ddp train loop STEPS steps in S s".
"""
import sys
import time

from common import finish, start

import torch
from torch.nn.parallel import DistributedDataParallel

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
rank, device = start()
torch.manual_seed(rank)
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).to(device)
model = DistributedDataParallel(model, device_ids=[device.index])
opt = torch.optim.SGD(model.parameters(), lr=0.01)
xs = [torch.randn(256, 512, device=device) for _ in range(4)]
ys = [torch.randint(0, 10, (256,), device=device) for _ in range(4)]
torch.cuda.synchronize()
began = time.perf_counter()
for step in range(steps):
    loss = torch.nn.functional.cross_entropy(model(xs[step % 4]), ys[step % 4])
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
torch.cuda.synchronize()
print(f"rank {rank} ddp train loop {steps} steps in {time.perf_counter() - began:.3f} s", flush=True)
finish(rank, "clean", "DDP training loop: gradients all-reduced and waited for before each step")
