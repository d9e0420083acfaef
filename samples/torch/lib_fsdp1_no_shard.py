"""FSDP1 (`FullyShardedDataParallel`) with each Linear wrapped, world size 1 on one GPU over NCCL, three training
steps. At world size 1 FSDP1 switches to NO_SHARD (it warns): its flat parameters stay whole and each unit's
gradient is all-reduced on FSDP's post-backward stream, which waits for the compute stream; the end of backward
makes the compute stream wait for it before the optimizer reads the gradients.

Ground truth: clean.
"""
import warnings

import torch
import torch.nn as nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp.wrap import ModuleWrapPolicy

from lib_support import mlp, one_rank_nccl_group, train_steps

warnings.filterwarnings("ignore")
one_rank_nccl_group()
torch.manual_seed(0)
model = FSDP(mlp(64, 128, 128, 16), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}), device_id=0, use_orig_params=True)
loss = train_steps(model, torch.optim.AdamW(model.parameters(), lr=1e-3))
print(f"loss {loss.item():.4f}")
torch.distributed.destroy_process_group()
print("GROUND_TRUTH clean: FSDP1 orders its post-backward stream itself")
