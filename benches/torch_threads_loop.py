"""Overhead benchmark with host threads: benches/torch_train_loop.py's 300 steps, with the batches made by a
loader thread and handed over through a queue.Queue (as a DataLoader's pin-memory thread does), so that the GIL
and the queue's locks pass between two threads every step. Prints its own wall time for the training loop; run
it plain and under `streamtrace capture` with and without the host-synchronization interposers
(benches/gpu_host_sync.sh).
"""
import queue
import threading
import time

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
copy_stream = torch.cuda.Stream()
STEPS = 300
batches = queue.Queue(maxsize=4)


def loader():
    for step in range(STEPS + 1):
        batches.put((torch.randn(256, 512).pin_memory(), torch.randint(0, 10, (256,)).pin_memory()))


def fetch():
    host_x, host_y = batches.get()
    with torch.cuda.stream(copy_stream):
        x = host_x.to("cuda", non_blocking=True)
        y = host_y.to("cuda", non_blocking=True)
    return x, y


thread = threading.Thread(target=loader)
torch.cuda.synchronize()
start = time.perf_counter()
thread.start()
x, y = fetch()
for step in range(STEPS):
    torch.cuda.current_stream().wait_stream(copy_stream)
    x.record_stream(torch.cuda.current_stream())
    y.record_stream(torch.cuda.current_stream())
    cur_x, cur_y = x, y
    x, y = fetch()
    loss = torch.nn.functional.cross_entropy(model(cur_x), cur_y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
torch.cuda.synchronize()
thread.join()
print(f"threaded train loop {STEPS} steps in {time.perf_counter() - start:.3f} s")
