"""A torch.compile(mode="reduce-overhead") function (CUDA graphs under Inductor) run on a side stream, its
result used on the default stream. With the argument `no-wait` the default stream uses the result without
waiting for the side stream (race); otherwise it waits first (clean).

Ground truth: clean with the wait; race without it: the default stream's sum reads the compiled function's
output while the side stream may still be writing it.
"""
import sys

import torch

wait = "no-wait" not in sys.argv[1:]


def f(x):
    return torch.sin(x) * 2 + 1


compiled = torch.compile(f, mode="reduce-overhead")
x = torch.randn(1 << 20, device="cuda")
side = torch.cuda.Stream()
for step in range(4):  # the first calls compile and record the graph; later ones replay it
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = compiled(x)
        y = y.clone()  # reduce-overhead outputs are overwritten by the next replay: keep a copy
    if wait:
        torch.cuda.current_stream().wait_stream(side)
    total = y.sum()
torch.cuda.synchronize()
if wait:
    print("GROUND_TRUTH clean: the default stream waits for the side stream before using the result")
else:
    print("GROUND_TRUTH race: sum (default stream) reads the clone made on the side stream without a wait")
# VARIANT: no-wait
