"""What the lib_*.py samples share: a small MLP, a few plain training steps, and a process group of one rank
over NCCL (the distributed libraries run their streams and collectives at world size 1 too). A package, so
that the scripts that capture every samples/torch/*.py do not take it for a program."""
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn


def mlp(*widths, activation=nn.ReLU):
    """Linear layers of the given widths with an activation between each two, on the GPU."""
    layers = []
    for fan_in, fan_out in zip(widths, widths[1:]):
        layers += [nn.Linear(fan_in, fan_out), activation()]
    return nn.Sequential(*layers[:-1]).cuda()


def train_steps(model, opt, steps=3, batch=(32, 64), after_step=None):
    """`steps` steps of a squared-output loss on random batches, `after_step(step)` after each optimizer step;
    returns the last loss once the device is done."""
    for step in range(steps):
        x = torch.randn(*batch, device="cuda")
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        if after_step is not None:
            after_step(step)
    torch.cuda.synchronize()
    return loss


def one_rank_nccl_group():
    """The default process group, world size 1 over NCCL on GPU 0, through a file store (no network)."""
    torch.cuda.set_device(0)
    store = dist.FileStore(os.path.join(tempfile.mkdtemp(), "store"), 1)
    dist.init_process_group("nccl", store=store, rank=0, world_size=1, device_id=torch.device("cuda", 0))
