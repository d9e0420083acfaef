"""A loop with torch.cuda.profiler.start()/stop() around steps 2-4, and a missing wait in step 0 (outside the
range) and in step 3 (inside it). `streamtrace capture --capture-range=cudaProfilerApi` records only the range.

Ground truth: captured whole, two races: `sub_` (default stream) / `div_` (side stream) on `early` in step 0, and
`add_` (default) / `mul_` (side) on `late` in step 3. With --capture-range=cudaProfilerApi only the second.
"""
import torch

side = torch.cuda.Stream()
early = torch.zeros(1 << 20, device="cuda")
late = torch.zeros(1 << 20, device="cuda")
work = torch.zeros(1 << 20, device="cuda")
torch.cuda.synchronize()
for step in range(6):
    if step == 2:
        torch.cuda.profiler.start()
    if step == 0:
        early.sub_(1.0)
        with torch.cuda.stream(side):
            early.div_(2.0)  # no wait for sub_: a race outside the range
    elif step == 3:
        late.add_(1.0)
        with torch.cuda.stream(side):
            late.mul_(2.0)  # no wait for add_: a race inside the range
    else:
        work.add_(1.0)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            work.mul_(2.0)  # waited: clean
        torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    if step == 4:
        torch.cuda.profiler.stop()
print("GROUND_TRUTH whole run: races sub_/div_ (step 0) and add_/mul_ (step 3); --capture-range=cudaProfilerApi: only add_/mul_")
