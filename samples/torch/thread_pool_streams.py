"""Inference on a thread pool, each worker thread on a stream of its own (`concurrent.futures`), all sharing one
model's weights; the main thread collects the outputs from the futures and sums them on the default stream. A
future's result orders the host threads, not the GPU: what the worker's stream wrote must be waited for too.

Variants (the argument):
- (none): each worker synchronizes its stream before it returns its output.
- `event`: each worker records an event on its stream and returns it with the output; the default stream waits
  on it.
- `no-sync`: the workers return at once.

Ground truth: clean (the workers read the shared weights together, and the main thread uses an output only after
its worker's stream finished, which its host thread learned before handing the result over); with `event`,
clean; with `no-sync`, race (the worker's `addmm` writes the output || `sum` on the default stream reads it).
"""
import concurrent.futures
import sys
import threading

import torch

variant = sys.argv[1] if len(sys.argv) > 1 else ""
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 16)).cuda().eval()
batches = [torch.randn(32, 128, device="cuda") for _ in range(8)]
torch.cuda.synchronize()  # the weights and the batches are written before any worker starts
streams = {}  # worker thread -> its stream


def infer(batch):
    thread = threading.get_ident()
    if thread not in streams:
        streams[thread] = torch.cuda.Stream()
    stream = streams[thread]
    with torch.no_grad(), torch.cuda.stream(stream):
        out = model(batch)
        done = torch.cuda.Event()
        done.record(stream)
    if variant == "":
        stream.synchronize()
    return out, done


with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    results = [future.result() for future in [pool.submit(infer, batch) for batch in batches]]
totals = []
for out, done in results:
    if variant == "event":
        torch.cuda.current_stream().wait_event(done)
    totals.append(out.sum())
torch.cuda.synchronize()
print("totals", len(totals))
if variant == "no-sync":
    print("GROUND_TRUTH race: a worker's addmm writes its output || sum (default stream) reads it")
else:
    print("GROUND_TRUTH clean: each output is used after its worker's stream finished or was waited for")
# VARIANT: event
# VARIANT: no-sync
