"""Overhead benchmark: 300 steps of a small MLP fed by a side copy stream (the shape of a real input pipeline);
STEPS=N runs N (a longer loop spreads less between rounds: 300 steps of 0.5-0.7 s spread by 0.2-0.4 s on the H200).
Prints its own wall time for the training loop; run it plain, under `streamtrace capture`, under CSAN
(TORCH_CUDA_SANITIZER=1) and under nsys, and compare. A second line gives the loop's steady pace: the median of
its windows of WINDOW steps (default 100), times the steps. One slow second of the machine moves the wall time
but not that median, so it ranks runs whose wall times spread by more than they differ. COMPILE=1 runs the model
through torch.compile (default mode: Inductor's Triton kernels); its first window, which compiles, is left out of
the steady pace as the warm-up always is.
"""
import os
import time

import torch

torch.manual_seed(0)
steps = int(os.environ.get("STEPS", "300"))
window = int(os.environ.get("WINDOW", "100"))
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
forward = torch.compile(model) if os.environ.get("COMPILE") == "1" else model
copy_stream = torch.cuda.Stream()
host_x = [torch.randn(256, 512).pin_memory() for _ in range(4)]
host_y = [torch.randint(0, 10, (256,)).pin_memory() for _ in range(4)]


def fetch(i):
    with torch.cuda.stream(copy_stream):
        x = host_x[i % 4].to("cuda", non_blocking=True)
        y = host_y[i % 4].to("cuda", non_blocking=True)
    return x, y


torch.cuda.synchronize()
start = time.perf_counter()
window_ends = [start]
x, y = fetch(0)
for step in range(steps):
    if step and step % window == 0:
        window_ends.append(time.perf_counter())
    torch.cuda.current_stream().wait_stream(copy_stream)
    x.record_stream(torch.cuda.current_stream())
    y.record_stream(torch.cuda.current_stream())
    cur_x, cur_y = x, y
    x, y = fetch(step + 1)
    loss = torch.nn.functional.cross_entropy(forward(cur_x), cur_y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
torch.cuda.synchronize()
end = time.perf_counter()
print(f"train loop {steps} steps in {end - start:.3f} s")
# The last window also waits for the queued GPU work: it is left out with the first (warm-up).
windows = sorted(b - a for a, b in zip(window_ends[1:], window_ends[2:]))
if windows:
    print(f"train steady {steps} steps at {windows[len(windows) // 2] * steps / window:.3f} s")
