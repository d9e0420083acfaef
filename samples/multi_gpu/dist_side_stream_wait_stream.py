"""The race-free twin of dist_side_stream_no_wait.py: the current stream waits for the side stream first.

Ground truth, on every rank: wait_stream(side) orders the default stream, and with it the collective, after the
fill_: clean.
"""
from common import finish, start

import torch
import torch.distributed as dist

rank, device = start()
side = torch.cuda.Stream()
t = torch.empty(1 << 20, device=device)
torch.cuda.synchronize()
with torch.cuda.stream(side):
    t.fill_(float(rank + 1))
torch.cuda.current_stream().wait_stream(side)
dist.all_reduce(t)
assert t[0].item() == 3.0, t[0].item()
finish(rank, "clean", "wait_stream(side) before the all_reduce")
