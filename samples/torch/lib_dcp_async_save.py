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

from lib_support import mlp, train_steps

warnings.filterwarnings("ignore")
torch.manual_seed(0)
model = mlp(64, 128, 16)
root = tempfile.mkdtemp()
pending = []


def save(step):
    if pending:
        pending.pop().result()  # one checkpoint in flight at a time
    pending.append(dcp.async_save({"model": model.state_dict()}, checkpoint_id=os.path.join(root, f"step{step}")))


loss = train_steps(model, torch.optim.AdamW(model.parameters(), lr=1e-3), after_step=save)
pending.pop().result()
print(f"loss {loss.item():.4f} saved {sorted(os.listdir(root))}")
print("GROUND_TRUTH clean: async_save stages with blocking copies in the calling thread before it returns")
