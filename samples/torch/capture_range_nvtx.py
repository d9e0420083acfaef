"""A loop whose steps 1 and 3 run inside `torch.cuda.nvtx.range("step")`, with a missing wait in step 0 (outside
every range) and in step 3. `streamtrace capture --capture-range=nvtx --nvtx-capture=step
--capture-range-end=repeat` records the two ranges, each its own report section.

Ground truth: captured whole, two races: `sub_` / `div_` on `early` (step 0) and `add_` / `mul_` on `late` (step
3). With the NVTX ranges: section 1 (step 1) clean, section 2 (step 3) the add_/mul_ race.
"""
import torch

side = torch.cuda.Stream()
early = torch.zeros(1 << 20, device="cuda")
late = torch.zeros(1 << 20, device="cuda")
work = torch.zeros(1 << 20, device="cuda")
torch.cuda.synchronize()


def step_body(step):
    if step == 0:
        early.sub_(1.0)
        with torch.cuda.stream(side):
            early.div_(2.0)  # no wait: a race outside the ranges
    elif step == 3:
        late.add_(1.0)
        with torch.cuda.stream(side):
            late.mul_(2.0)  # no wait: a race inside the second range
    else:
        work.add_(1.0)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            work.mul_(2.0)
        torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()


for step in range(5):
    if step in (1, 3):
        with torch.cuda.nvtx.range("step"):
            step_body(step)
    else:
        step_body(step)
print("GROUND_TRUTH whole run: races sub_/div_ and add_/mul_; --capture-range=nvtx --nvtx-capture=step repeat: range 1 clean, range 2 add_/mul_")
