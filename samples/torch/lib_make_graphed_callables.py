"""`torch.cuda.make_graphed_callables` on a small module, then three training steps. The call warms the module
up on a side stream, then captures forward and backward into two CUDA graphs; every step copies the batch into
the graphs' static input, replays forward and backward on the default stream, and steps the optimizer there.

Ground truth: clean.
"""
import torch

from lib_support import mlp

torch.manual_seed(0)
model = mlp(64, 128, 16)
opt = torch.optim.SGD(model.parameters(), lr=1e-2)
sample = torch.randn(32, 64, device="cuda")
graphed = torch.cuda.make_graphed_callables(model, (sample,))
for step in range(3):
    opt.zero_grad(set_to_none=True)
    x = torch.randn(32, 64, device="cuda")
    loss = graphed(x).pow(2).mean()
    loss.backward()
    opt.step()
torch.cuda.synchronize()
print(f"loss {loss.item():.4f}")
print("GROUND_TRUTH clean: graphs captured after a synchronized warm-up, replayed on the default stream")
