"""Two host threads hand a buffer over with an event and a queue: the producer thread records an event after
writing; the consumer thread's stream waits on it before reading.

Ground truth: clean.
"""
import queue
import threading

import torch

buf = torch.empty(1 << 20, device="cuda")
torch.cuda.synchronize()
handover = queue.Queue()


def producer():
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        buf.fill_(1.0)
        done = torch.cuda.Event()
        done.record(stream)
    handover.put(done)


def consumer(results):
    stream = torch.cuda.Stream()
    done = handover.get()
    stream.wait_event(done)
    with torch.cuda.stream(stream):
        results.append(buf.sum())
    stream.synchronize()


results = []
threads = [threading.Thread(target=producer), threading.Thread(target=consumer, args=(results,))]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("GROUND_TRUTH clean: the consumer's stream waits on the producer's event")
