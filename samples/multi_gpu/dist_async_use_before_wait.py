"""An asynchronous all_reduce whose tensor is modified on the default stream before `work.wait()`.

Ground truth, on every rank: the all-reduce kernel (NCCL's stream) reads and writes `t`; `t.mul_(2)` on the
default stream is issued before `work.wait()` made the default stream wait for it: write-after-write race.
"""
from common import finish, start

import torch
import torch.distributed as dist

rank, device = start()
t = torch.full((1 << 20,), float(rank + 1), device=device)
work = dist.all_reduce(t, async_op=True)
t.mul_(2.0)  # too early: the all-reduce may still be reading and writing t
work.wait()
finish(rank, "race", "all_reduce (NCCL stream) || mul_ (default stream) issued before work.wait()")
