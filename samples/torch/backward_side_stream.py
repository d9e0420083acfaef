"""The stream semantics of backward passes, as PyTorch's CUDA notes spell them: each backward op runs on the stream
its forward op ran on, and `backward()` itself (populating the gradients, running the backward pass, using the
gradients) relates to the ops around it as any other op would, the engine making the calling stream wait for
the streams the gradients were written on. The notes' safe and unsafe examples, three steps each, the gradients
kept until the end (none is freed while another stream may still use it).

Variants (the argument):
- (none): forward, backward and the use of the gradients, all inside one side-stream context.
- `wait`: forward and backward in the side-stream context; the default stream waits for the side stream before
  it uses the gradients.
- `no-wait`: as `wait`, without the wait.
- `caller-stream`: forward on the default stream; backward called inside the side-stream context, where the
  gradients are used. The backward ops run on the default stream (their forward's); the engine makes the side
  stream, the caller's, wait for it before backward returns.

Ground truth: clean; with `wait`, clean; with `no-wait`, race (AccumulateGrad writes each gradient on the side
stream || the default stream's mul_ of it); with `caller-stream`, clean.
"""
import sys

import torch

variant = sys.argv[1] if len(sys.argv) > 1 else ""
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 8)).cuda()
data = torch.randn(64, 256, device="cuda")
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())  # the parameters and the data were written on the default stream
kept = []


def use_gradients():
    for parameter in model.parameters():
        parameter.grad.mul_(0.5)
        kept.append(parameter.grad)  # never freed before the end
        parameter.grad = None


for step in range(3):
    if variant == "caller-stream":
        loss = model(data).square().mean()
        with torch.cuda.stream(side):
            loss.backward()
            use_gradients()
        # The next step's forward reads the parameters the side stream does not write: no wait needed.
        continue
    with torch.cuda.stream(side):
        loss = model(data).square().mean()
        loss.backward()
        if variant == "":
            use_gradients()
    if variant == "wait":
        torch.cuda.current_stream().wait_stream(side)
    if variant in ("wait", "no-wait"):
        use_gradients()
        side.wait_stream(torch.cuda.current_stream())  # the next step's backward writes new gradients
torch.cuda.synchronize()
print("kept", len(kept), "gradients")
if variant == "no-wait":
    print("GROUND_TRUTH race: AccumulateGrad writes each gradient on the side stream || mul_ (default stream)")
else:
    print("GROUND_TRUTH clean: the gradients are used on the stream backward was called on, or after a wait")
# VARIANT: wait
# VARIANT: no-wait
# VARIANT: caller-stream
