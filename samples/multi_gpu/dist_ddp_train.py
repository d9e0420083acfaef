"""A small data-parallel training loop (DistributedDataParallel over NCCL), correctly ordered; also the overhead
benchmark of capture on two GPUs (docs/performance.md).

Arguments: STEPS (20), then the MLP's hidden WIDTH (1024), DEPTH in hidden layers (1) and BATCH (256). The
defaults make a loop of about 1 ms steps whose time is the host's (the capture's cost per op shows in full); a
wider, deeper model makes the GPU the bound, as in most training.

Ground truth, on every rank: clean (DDP's gradient all-reduces are waited for before the optimizer step).
Prints the loop's own wall time and its steps' host times: "ddp train loop STEPS steps in S s (step median,
90th percentile and longest in ms)": a capture that costs the same on every step moves the median, one that
stalls now and then the longest.
"""
import sys
import time

from common import finish, start

import torch
from torch.nn.parallel import DistributedDataParallel

steps, width, depth, batch = ([int(a) for a in sys.argv[1:5]] + [20, 1024, 1, 256][len(sys.argv[1:5]):])[:4]
rank, device = start()
torch.manual_seed(rank)
hidden = [layer for _ in range(depth - 1) for layer in (torch.nn.Linear(width, width), torch.nn.ReLU())]
model = torch.nn.Sequential(torch.nn.Linear(512, width), torch.nn.ReLU(), *hidden, torch.nn.Linear(width, 10)).to(device)
model = DistributedDataParallel(model, device_ids=[device.index])
opt = torch.optim.SGD(model.parameters(), lr=0.01)
xs = [torch.randn(batch, 512, device=device) for _ in range(4)]
ys = [torch.randint(0, 10, (batch,), device=device) for _ in range(4)]
torch.cuda.synchronize()
began = time.perf_counter()
ends = []
for step in range(steps):
    loss = torch.nn.functional.cross_entropy(model(xs[step % 4]), ys[step % 4])
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    ends.append(time.perf_counter())
torch.cuda.synchronize()
took = time.perf_counter() - began
step_ms = sorted(1e3 * (end - start) for start, end in zip([began] + ends, ends))
percentile = lambda q: step_ms[min(len(step_ms) - 1, int(q * len(step_ms)))]
print(f"rank {rank} ddp train loop {steps} steps in {took:.3f} s (step median {percentile(0.5):.2f} ms, "
      f"90% {percentile(0.9):.2f} ms, longest {step_ms[-1]:.2f} ms)", flush=True)
finish(rank, "clean", "DDP training loop: gradients all-reduced and waited for before each step")
