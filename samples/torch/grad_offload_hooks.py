"""Gradients offloaded to pinned host memory while backward runs, as CPU-offloading optimizers do: a hook on each
parameter (`register_post_accumulate_grad_hook`, run by the autograd engine's thread once the gradient is
accumulated) copies the gradient into a pinned buffer on an offload stream, non-blocking; after backward the main
thread waits for the offload stream and the host updates a float64 master copy of each parameter from the buffers.

Variants (the argument):
- (none): the offload stream waits for the stream that wrote the gradient before each copy; the main thread
  synchronizes the offload stream before the host reads the buffers.
- `no-wait`: the copies do not wait for the gradient.
- `no-sync`: the host reads the buffers without synchronizing the offload stream.

Ground truth: clean; with `no-wait`, race (the gradient's writer on the default stream || the copy reading it on
the offload stream); with `no-sync`, race (the copy into a pinned buffer || the host's read of it).
"""
import sys

import torch

variant = sys.argv[1] if len(sys.argv) > 1 else ""
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 8)).cuda()
offload = torch.cuda.Stream()
pinned = {p: torch.empty(p.shape, dtype=p.dtype, pin_memory=True) for p in model.parameters()}
master = {p: p.detach().cpu().double() for p in model.parameters()}
data = torch.randn(64, 256, device="cuda")


def offload_gradient(parameter):
    if variant != "no-wait":
        offload.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(offload):
        pinned[parameter].copy_(parameter.grad, non_blocking=True)
        parameter.grad.record_stream(offload)
    parameter.grad = None  # the gradient lives on in the offload copy only


for parameter in model.parameters():
    parameter.register_post_accumulate_grad_hook(offload_gradient)

for step in range(3):
    loss = model(data).square().mean()
    loss.backward()
    if variant != "no-sync":
        offload.synchronize()
    for parameter, buffer in pinned.items():
        master[parameter].add_(buffer.double(), alpha=-0.01)  # the host reads the pinned gradient (rule 12)
    offload.synchronize()  # the next step's copies into the buffers wait for this step's reads (host order)
print("master", round(float(sum(m.sum() for m in master.values())), 3))
if variant == "no-wait":
    print("GROUND_TRUTH race: the gradient's mm/sum (default stream) || copy_ into pinned memory (offload stream)")
elif variant == "no-sync":
    print("GROUND_TRUTH race: copy_ into a pinned buffer (offload stream) || the host's read of it (_to_copy)")
else:
    print("GROUND_TRUTH clean: each copy waits for its gradient; the host reads after the offload stream finished")
# VARIANT: no-wait
# VARIANT: no-sync
