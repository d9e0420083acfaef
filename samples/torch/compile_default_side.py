"""A torch.compile function in the default mode (Inductor: Triton kernels launched by generated code, not by
dispatcher ops, a matmul left to cuBLAS, and intermediate buffers reused inside the compiled graph) run on a side
stream, its result used on the default stream after an event recorded on the side stream (and `record_stream`,
so that the side stream's allocator does not hand the result's block out again too early). With the argument
`no-wait` the default stream uses the result without waiting on the event (race); otherwise it waits first.

Ground truth: clean with the wait; race without it: the default stream's sum reads the compiled function's
output while the side stream may still be writing it.
"""
import sys

import torch

wait = "no-wait" not in sys.argv[1:]


def f(x, w):
    h = torch.relu(x @ w)
    h = torch.sin(h) * 2 + h.cos()
    return (h - h.mean(dim=1, keepdim=True)) / (h.std(dim=1, keepdim=True) + 1e-5)


compiled = torch.compile(f)
x = torch.randn(512, 256, device="cuda")
w = torch.randn(256, 256, device="cuda")
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())  # x and w are written before the side stream reads them
totals = []
for step in range(4):  # the first call compiles; later ones run the generated code
    with torch.cuda.stream(side):
        y = compiled(x, w)
        produced = torch.cuda.Event()
        produced.record()
    if wait:
        torch.cuda.current_stream().wait_event(produced)
    y.record_stream(torch.cuda.current_stream())  # its block is not handed out again before the sum has run
    totals.append(y.sum())
torch.cuda.synchronize()
print(f"totals {[round(t.item(), 3) for t in totals]}")
if wait:
    print("GROUND_TRUTH clean: the default stream waits for the event recorded after the compiled function")
else:
    print("GROUND_TRUTH race: sum (default stream) reads the compiled function's output without a wait")
# VARIANT: no-wait
