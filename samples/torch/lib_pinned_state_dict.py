"""A state_dict handed off to pinned CPU buffers with `non_blocking=True` copies (the pattern checkpointing
libraries use to snapshot weights without stalling training), then serialized with torch.save. The copy into
pinned memory returns before the data has arrived, so the docs require a synchronization before the CPU reads
the buffers: here `torch.cuda.current_stream().synchronize()`. The buffers are allocated once and refilled
every step. With the argument `no-sync` the program skips that synchronization.

Ground truth: clean; with `no-sync`, race (torch.save reads the pinned buffers on the host while the
device-to-host copies may still be writing them).
"""
import io
import sys

import torch

from lib_support import mlp, train_steps

sync = "no-sync" not in sys.argv[1:]
torch.manual_seed(0)
model = mlp(64, 128, 16)
snapshot = {k: torch.empty(v.shape, dtype=v.dtype, pin_memory=True) for k, v in model.state_dict().items()}
checkpoint = io.BytesIO()


def save(step):
    for k, v in model.state_dict().items():
        snapshot[k].copy_(v, non_blocking=True)
    if sync:
        torch.cuda.current_stream().synchronize()  # the copies must land before the host reads the buffers
    checkpoint.seek(0)
    checkpoint.truncate()
    torch.save(snapshot, checkpoint)


loss = train_steps(model, torch.optim.AdamW(model.parameters(), lr=1e-3), after_step=save)
print(f"loss {loss.item():.4f} checkpoint {len(checkpoint.getvalue())} bytes")
if sync:
    print("GROUND_TRUTH clean: the stream is synchronized before torch.save reads the pinned snapshot")
else:
    print("GROUND_TRUTH race: memcpy DtoH into the pinned snapshot (default stream) || torch.save's host reads")
# VARIANT: no-sync
