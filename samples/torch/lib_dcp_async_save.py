"""`torch.distributed.checkpoint.async_save` in a training loop, one process without a process group (DCP then
saves as a single process and says so): with no stager given, async_save stages the state_dict to CPU memory in
the calling thread (blocking device-to-host copies) and writes the files from a background thread while
training goes on; the next save waits for the previous one's future, and the last one is awaited at the end.

Ground truth: clean.
"""
import os
import tempfile
import warnings

import torch
import torch.distributed.checkpoint as dcp
import torch.nn as nn

warnings.filterwarnings("ignore")
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 16)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
root = tempfile.mkdtemp()
pending = None
for step in range(3):
    x = torch.randn(32, 64, device="cuda")
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    if pending is not None:
        pending.result()  # one checkpoint in flight at a time
    pending = dcp.async_save({"model": model.state_dict()}, checkpoint_id=os.path.join(root, f"step{step}"))
pending.result()
torch.cuda.synchronize()
print(f"loss {loss.item():.4f} saved {sorted(os.listdir(root))}")
print("GROUND_TRUTH clean: async_save stages with blocking copies in the calling thread before it returns")
