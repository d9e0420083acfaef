"""DistributedDataParallel at world size 1 over NCCL, with small gradient buckets so that backward fills and
all-reduces several of them, three training steps. The reducer copies each gradient into its bucket on the
compute stream; ProcessGroupNCCL runs the all-reduce on its own stream after an event recorded on the compute
stream, and finalizing backward makes the compute stream wait for the all-reduce before the gradients are
copied back and read by the optimizer.

Ground truth: clean.
"""
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

from lib_support import mlp, one_rank_nccl_group, train_steps

one_rank_nccl_group()
torch.manual_seed(0)
model = DDP(mlp(64, 128, 128, 16), device_ids=[0], bucket_cap_mb=0.05)  # 50 KB buckets: one or two layers each
loss = train_steps(model, torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9))
print(f"loss {loss.item():.4f}")
torch.distributed.destroy_process_group()
print("GROUND_TRUTH clean: DDP's reducer orders its all-reduces on the NCCL stream itself")
