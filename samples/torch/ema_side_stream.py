"""An exponential moving average (EMA) of a model's weights kept up to date on a side stream, as training code for
diffusion and vision models does to take the EMA off the critical path: after each optimizer step the side
stream waits for the default stream, then `torch._foreach_lerp_` pulls the EMA copies toward the weights. The
next step's forward reads the same weights on the default stream while the EMA may still read them (two reads:
no race), and the next `optimizer.step()` writes them in place.

Variants (the argument):
- (none): the default stream waits for the side stream before each optimizer step, so the step's writes come
  after the EMA's reads of the step before.
- `no-wait-before-step`: that wait is left out; the forward and backward of the next step usually take longer
  than the EMA, so the program gives the right numbers, but nothing orders the step's writes after the EMA's
  reads.
- `compile`: as the first, with the model compiled (`torch.compile`, default mode): the layer norm and GELU are
  one Triton kernel of Inductor's, which reads the layer norm's weight and bias while the EMA reads them too.

Ground truth: clean; with `no-wait-before-step`, race (the optimizer's `_foreach_add_`/`addcdiv_` writes the
weights || the side stream's `_foreach_lerp_` reads them: write-after-read); with `compile`, clean.
"""
import sys

import torch

wait_before_step = "no-wait-before-step" not in sys.argv[1:]
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.LayerNorm(512), torch.nn.GELU(),
                            torch.nn.Linear(512, 64)).cuda()
ema = [p.detach().clone() for p in model.parameters()]
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
forward = torch.compile(model) if "compile" in sys.argv[1:] else model
side = torch.cuda.Stream()
x = torch.randn(128, 256, device="cuda")
for step in range(4):
    loss = forward(x).pow(2).mean()  # reads the weights on the default stream while the last EMA may read them
    loss.backward()
    if wait_before_step:
        torch.cuda.current_stream().wait_stream(side)  # the last EMA has read the weights
    opt.step()  # writes the weights in place
    opt.zero_grad(set_to_none=True)
    side.wait_stream(torch.cuda.current_stream())  # the EMA reads the weights this step wrote
    with torch.cuda.stream(side), torch.no_grad():
        torch._foreach_lerp_(ema, [p.detach() for p in model.parameters()], 0.01)
torch.cuda.current_stream().wait_stream(side)
torch.cuda.synchronize()
print(f"ema norm {sum(e.norm().item() for e in ema):.4f}")
if wait_before_step:
    print("GROUND_TRUTH clean: each optimizer step waits for the side stream's EMA of the step before")
else:
    print("GROUND_TRUTH race: optimizer.step() (default stream) writes the weights || _foreach_lerp_ (side) reads them")
# VARIANT: no-wait-before-step
# VARIANT: compile
