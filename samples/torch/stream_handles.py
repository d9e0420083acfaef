"""Streams reached by other ways than `torch.cuda.stream(...)`: a stream another library made, wrapped by
`torch.cuda.ExternalStream`; `torch.cuda.set_stream`, which changes the current stream until set back; and a host
loop that polls an event with `Event.query()` instead of waiting on the GPU. Each step the side work fills a
buffer and the default stream then sums it.

Variants (the argument):
- (none): the fill runs on an ExternalStream wrapping a stream of its own; the default stream waits for an event
  recorded after it.
- `no-wait`: as the first, without the wait.
- `set-stream`: the fill runs after `torch.cuda.set_stream(side)`, then the default stream is set back and waits
  for the side stream.
- `set-stream-no-wait`: as `set-stream`, without the wait.
- `poll`: the host polls an event recorded after the fill until `query()` returns True, then sums on the default
  stream without a GPU-side wait (a successful query orders what the host issues next).
- `poll-early`: the host polls an event recorded before the fill.

Ground truth: clean; `no-wait` race; `set-stream` clean; `set-stream-no-wait` race; `poll` clean; `poll-early`
race (fill_ on the side stream || sum on the default stream, in each race).
"""
import sys

import torch

variant = sys.argv[1] if len(sys.argv) > 1 else ""
default = torch.cuda.current_stream()
owned = torch.cuda.Stream()  # the stream "another library" made: only its handle is used below
side = torch.cuda.ExternalStream(owned.cuda_stream) if variant in ("", "no-wait") else torch.cuda.Stream()
buffer = torch.zeros(1 << 20, device="cuda")
torch.cuda.synchronize()
sums = []
for step in range(3):
    before = torch.cuda.Event()
    before.record(side)
    if variant.startswith("set-stream"):
        torch.cuda.set_stream(side)
        buffer.fill_(float(step))
        torch.cuda.set_stream(default)
    else:
        with torch.cuda.stream(side):
            buffer.fill_(float(step))
    filled = torch.cuda.Event()
    filled.record(side)
    if variant in ("", "set-stream"):
        default.wait_event(filled)
    elif variant in ("poll", "poll-early"):
        polled = filled if variant == "poll" else before
        while not polled.query():
            pass
    sums.append(buffer.sum())
    side.wait_stream(default)  # the next fill must not overwrite the buffer while the sum reads it
torch.cuda.synchronize()
print("sums", [s.item() for s in sums])
if variant in ("no-wait", "set-stream-no-wait", "poll-early"):
    print("GROUND_TRUTH race: fill_ (side stream) || sum (default stream)")
else:
    print("GROUND_TRUTH clean: the default stream or the host waits for the fill before the sum")
# VARIANT: no-wait
# VARIANT: set-stream
# VARIANT: set-stream-no-wait
# VARIANT: poll
# VARIANT: poll-early
