"""An exponential moving average of a model's BatchNorm running statistics kept on a side stream, as EMA and
SWA code keeps its copy of the buffers: after each training step the side stream blends the running mean and
variance into its copies (`torch._foreach_lerp_`), and the next step's forward waits for it before batch norm
writes the statistics again. Batch norm writes its running statistics in training though its schema does not
mark them written.

Variants (the argument):
- (none): the side stream waits for the step before it reads the statistics.
- `no-wait`: it does not.

Ground truth: clean; with `no-wait`, race (batch norm's forward writes running_mean and running_var on the
default stream || `_foreach_lerp_` reads them on the side stream).
"""
import sys

import torch

variant = sys.argv[1] if len(sys.argv) > 1 else ""
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                            torch.nn.Flatten(), torch.nn.Linear(8 * 14 * 14, 4)).cuda().train()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.randn(16, 3, 16, 16, device="cuda")
statistics = [buffer for buffer in model.buffers() if buffer.is_floating_point()]  # running_mean, running_var
averages = [buffer.detach().clone() for buffer in statistics]
ema_stream = torch.cuda.Stream()
ema_stream.wait_stream(torch.cuda.current_stream())  # the copies were made on the default stream
for step in range(3):
    loss = model(data).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if variant != "no-wait":
        ema_stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(ema_stream):
        torch._foreach_lerp_(averages, statistics, 0.1)
    torch.cuda.current_stream().wait_stream(ema_stream)  # the next forward writes the statistics again
torch.cuda.synchronize()
print("average of the running means", round(averages[0].mean().item(), 4))
if variant == "no-wait":
    print("GROUND_TRUTH race: batch norm writes running_mean/var (default stream) || _foreach_lerp_ reads them")
else:
    print("GROUND_TRUTH clean: the side stream reads the statistics after the step that wrote them")
# VARIANT: no-wait
