"""torch.cuda.graph with a side stream forked inside the capture and joined only at the capture's end: the
capture stream reads `a` while the side stream may still be adding to it.

Ground truth: race inside the graph, at every replay: add_ (side stream) writes a, mul (capture stream) reads
it, with no dependency path between the two nodes.
"""
import torch

x = torch.randn(1 << 20, device="cuda")
side = torch.cuda.Stream()
g = torch.cuda.CUDAGraph()
# Warm up on a side stream first, as PyTorch's docs ask before capturing.
warm = torch.cuda.Stream()
warm.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(warm):
    a = x * 2
    a.add_(1)
    b = a * 3
torch.cuda.current_stream().wait_stream(warm)
torch.cuda.synchronize()
with torch.cuda.graph(g):
    a = x * 2
    side.wait_stream(torch.cuda.current_stream())  # fork the side stream into the capture
    with torch.cuda.stream(side):
        a.add_(1)  # writes a on the side stream
    b = a * 3  # reads a: nothing orders it after add_
    torch.cuda.current_stream().wait_stream(side)  # the join a capture needs to end
for _ in range(3):
    g.replay()
torch.cuda.synchronize()
print("GROUND_TRUTH race: add_ (side stream) writes a, mul (capture stream) reads it inside the graph, 3 replays")
