"""Two CUDA graphs captured into one memory pool (`torch.cuda.graph(g2, pool=g1.pool())`), as inference servers
capture a graph per batch size: the second graph's temporaries take the blocks the first graph's temporaries
gave back during its capture. Replayed one after the other on one stream, that sharing is safe; replayed on two
streams at once, the two graphs write the same bytes.

Variants (the argument):
- (none): g1 and g2 replayed in turn on the default stream, three times.
- `side`: g2 replayed on a side stream that waits for nothing g1 did.

Ground truth: clean; with `side`, race: the graphs' blocks in the pool overlap (each `sum`'s reduction
workspace and semaphores come from the pool too, and g2's output and workspace sit on what g1 gave back), and the
program prints whether the two `mul` temporaries share one.
"""
import sys

import torch

variant = sys.argv[1] if len(sys.argv) > 1 else ""
n = 1 << 20
x = torch.randn(n, device="cuda")
y = torch.randn(n, device="cuda")
addresses = {}


def first():
    temporary = x * 2.0
    addresses["g1"] = (temporary.data_ptr(), temporary.data_ptr() + temporary.nbytes)
    return temporary.sum()


def second():
    temporary = y * 3.0
    addresses["g2"] = (temporary.data_ptr(), temporary.data_ptr() + temporary.nbytes)
    return temporary.sum()


# Warm up on a side stream, as torch.cuda.graph's documentation asks.
warm = torch.cuda.Stream()
warm.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(warm):
    first(), second()
torch.cuda.current_stream().wait_stream(warm)

g1, g2 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
with torch.cuda.graph(g1):
    out1 = first()
with torch.cuda.graph(g2, pool=g1.pool()):
    out2 = second()
shared = addresses["g1"][0] < addresses["g2"][1] and addresses["g2"][0] < addresses["g1"][1]

side = torch.cuda.Stream()
for _ in range(3):
    g1.replay()
    if variant == "side":
        with torch.cuda.stream(side):
            g2.replay()
    else:
        g2.replay()
    side.wait_stream(torch.cuda.current_stream())
    torch.cuda.current_stream().wait_stream(side)
torch.cuda.synchronize()
print("temporaries share bytes:", shared, "results", round(out1.item(), 1), round(out2.item(), 1))
if variant == "side":
    print("GROUND_TRUTH race: g1 and g2 (side stream) write the pool blocks they share at the same time")
else:
    print("GROUND_TRUTH clean: the graphs that share the pool's blocks replay in turn on one stream")
# VARIANT: side
