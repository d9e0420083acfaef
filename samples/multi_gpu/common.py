"""Shared by the two-GPU PyTorch samples: one process per GPU under torchrun, NCCL between them.

Each sample prints one GROUND_TRUTH line per rank; `run_all.sh` runs them plain and under `streamtrace capture`.
"""
import os

import torch
import torch.distributed as dist


def start():
    """Joins the job torchrun started: this process's rank, on the GPU of its local rank."""
    rank = int(os.environ["RANK"])
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    return rank, device


def finish(rank, verdict, what):
    """Prints the rank's ground truth and leaves the job."""
    torch.cuda.synchronize()
    dist.barrier()
    print(f"GROUND_TRUTH rank {rank} {verdict}: {what}", flush=True)
    dist.destroy_process_group()
