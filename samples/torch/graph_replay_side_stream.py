"""A graph captured with torch.cuda.graph writes `out`; it is replayed on the default stream, then a side stream
reads `out`. With the argument `no-wait` the side stream reads without waiting (race with the replayed node);
otherwise it first waits for the default stream (clean). The capture itself ran nothing.

Ground truth: clean with the wait; race without it (sum on the side stream reads what the replayed mul writes).
"""
import sys

import torch

wait = "no-wait" not in sys.argv[1:]
x = torch.randn(1 << 20, device="cuda")
g = torch.cuda.CUDAGraph()
warm = torch.cuda.Stream()
warm.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(warm):
    out = x * 2
torch.cuda.current_stream().wait_stream(warm)
torch.cuda.synchronize()
with torch.cuda.graph(g):
    out = x * 2
g.replay()  # on the default stream
side = torch.cuda.Stream()
if wait:
    side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    total = out.sum()
torch.cuda.synchronize()
if wait:
    print("GROUND_TRUTH clean: the side stream waits for the default stream after the replay")
else:
    print("GROUND_TRUTH race: sum (side stream) reads out, written by the replayed mul node")
# VARIANT: no-wait
