"""Activation checkpointing (`torch.utils.checkpoint`) in a loop fed by a side copy stream: each checkpointed
block's forward runs again inside the backward pass, so ops run inside backward ops (non-reentrant: from a
saved-tensor unpack hook; reentrant: from a custom autograd Function's backward). Inputs are copied from pinned
memory on a side stream, the default stream waiting for each copy.

Variants (the argument):
- (none): non-reentrant checkpointing.
- `reentrant`: `use_reentrant=True`.
- `no-wait`: as the first, the default stream not waiting for the copy of the step's input.

Ground truth: clean; with `reentrant`, clean; with `no-wait`, race (the copy of the input on the side stream ||
the first Linear reading it on the default stream).
"""
import sys

import torch
from torch.utils.checkpoint import checkpoint

variant = sys.argv[1] if len(sys.argv) > 1 else ""
torch.manual_seed(0)
blocks = torch.nn.ModuleList(
    torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.GELU(), torch.nn.LayerNorm(256)) for _ in range(3)
).cuda()
head = torch.nn.Linear(256, 4).cuda()
opt = torch.optim.AdamW(list(blocks.parameters()) + list(head.parameters()), lr=1e-3)
copy_stream = torch.cuda.Stream()
host = [torch.randn(32, 256).pin_memory() for _ in range(2)]
inputs = [torch.empty(32, 256, device="cuda") for _ in range(2)]  # one per step parity, never freed
torch.cuda.synchronize()
for step in range(4):
    x = inputs[step % 2]
    copy_stream.wait_stream(torch.cuda.current_stream())  # the previous use of this buffer is over
    with torch.cuda.stream(copy_stream):
        x.copy_(host[step % 2], non_blocking=True)
    if variant != "no-wait":
        torch.cuda.current_stream().wait_stream(copy_stream)
    # Reentrant checkpointing needs an input that requires grad (a view of x: no kernel, no new bytes).
    h = x.detach().requires_grad_() if variant == "reentrant" else x
    for block in blocks:
        h = checkpoint(block, h, use_reentrant=(variant == "reentrant"))
    loss = head(h).square().mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
torch.cuda.synchronize()
print("loss", round(loss.item(), 4))
if variant == "no-wait":
    print("GROUND_TRUTH race: the input's copy (copy stream) || the first Linear reading it (default stream)")
else:
    print("GROUND_TRUTH clean: the default stream waits for each copy; the recomputation runs on it too")
# VARIANT: reentrant
# VARIANT: no-wait
