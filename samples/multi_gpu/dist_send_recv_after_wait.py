"""The race-free twin of dist_send_recv_before_wait.py: both ranks wait for their point-to-point op first.

Ground truth, on every rank: work.wait() orders the default stream after the send or receive: clean.
"""
from common import finish, start

import torch
import torch.distributed as dist

rank, device = start()
buf = torch.full((1 << 20,), float(rank + 1), device=device)
torch.cuda.synchronize()
if rank == 0:
    work = dist.isend(buf, dst=1)
    work.wait()
    buf.fill_(0.0)
else:
    work = dist.irecv(buf, src=0)
    work.wait()
    assert buf.sum().item() == float(1 << 20)
finish(rank, "clean", "work.wait() before the buffer is touched")
