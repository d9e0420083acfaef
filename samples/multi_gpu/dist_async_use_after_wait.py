"""The race-free twin of dist_async_use_before_wait.py: `work.wait()` comes before the tensor is touched.

Ground truth, on every rank: work.wait() makes the default stream wait for the all-reduce; mul_ after it: clean.
"""
from common import finish, start

import torch
import torch.distributed as dist

rank, device = start()
t = torch.full((1 << 20,), float(rank + 1), device=device)
work = dist.all_reduce(t, async_op=True)
work.wait()
t.mul_(2.0)
assert t[0].item() == 6.0, t[0].item()
finish(rank, "clean", "work.wait() orders mul_ after the all_reduce")
