"""A program that profiles itself: `torch.profiler` with CUDA activities is entered before the program's first
CUDA call, so Kineto asks CUPTI for its subscription before anything else in the process does. CUPTI takes one
subscriber a process; under `streamtrace capture` the capture keeps it (Kineto's request is refused and the
profiler goes on without GPU events), so the program's work is still recorded.

Variants (the argument):
- (none): a side stream fills a buffer, the default stream waits for it and reads it.
- `no-wait`: the default stream reads it without waiting.

Ground truth: clean; with `no-wait`, race (fill_ on the side stream || sum on the default stream).
"""
import sys

import torch

variant = sys.argv[1] if len(sys.argv) > 1 else ""
activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
with torch.profiler.profile(activities=activities) as profile:
    side = torch.cuda.Stream()
    buffer = torch.empty(1 << 20, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        buffer.fill_(2.0)
    if variant != "no-wait":
        torch.cuda.current_stream().wait_stream(side)
    total = buffer.sum()
    torch.cuda.synchronize()
print("sum", total.item(), "profiled events", len(profile.events()))
if variant == "no-wait":
    print("GROUND_TRUTH race: fill_ (side stream) || sum (default stream), no wait")
else:
    print("GROUND_TRUTH clean: the default stream waits for the side stream before the sum")
# VARIANT: no-wait
