"""A collective issued on a tensor a side stream is still producing.

Ground truth, on every rank: c10d orders the collective after the current (default) stream only (a synchronous
collective runs on it, in torch 2.11), not after the side stream whose fill_ writes `t`: the all-reduce reads
and writes `t` unordered with that write: race.
"""
from common import finish, start

import torch
import torch.distributed as dist

rank, device = start()
side = torch.cuda.Stream()
t = torch.empty(1 << 20, device=device)
torch.cuda.synchronize()
with torch.cuda.stream(side):
    t.fill_(float(rank + 1))  # produced on the side stream
dist.all_reduce(t)  # no wait_stream(side): the collective may read t before the fill_ is done
finish(rank, "race", "fill_ (side stream) || all_reduce (NCCL stream) without wait_stream")
