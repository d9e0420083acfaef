"""Point-to-point: rank 0 sends a buffer and overwrites it before the send is done; rank 1 reads the buffer it
receives into before the receive is done.

Ground truth: rank 0: the send (NCCL's p2p stream) reads `buf`, and `buf.fill_` on the default stream is issued
before `work.wait()`: write-after-read race. Rank 1: the receive writes `buf`, and `buf.sum()` on the default
stream reads it before `work.wait()`: read-after-write race.
"""
from common import finish, start

import torch
import torch.distributed as dist

rank, device = start()
buf = torch.full((1 << 20,), float(rank + 1), device=device)
torch.cuda.synchronize()
if rank == 0:
    work = dist.isend(buf, dst=1)
    buf.fill_(0.0)  # too early: the send may still be reading buf
    work.wait()
    finish(rank, "race", "send (NCCL stream) reads buf || fill_ (default stream) before work.wait()")
else:
    work = dist.irecv(buf, src=0)
    total = buf.sum()  # too early: the receive may still be writing buf
    work.wait()
    finish(rank, "race", "recv (NCCL stream) writes buf || sum (default stream) before work.wait()")
