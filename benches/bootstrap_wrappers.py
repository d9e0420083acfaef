"""What each Python wrapper of the capture's bootstrap costs one call, in one process (issue 24 item 4).

Run it plain (`python3 benches/bootstrap_wrappers.py`); under capture at tier T1 (`streamtrace capture --
python3 -S benches/bootstrap_wrappers.py SITE_PACKAGES`: no site, so no bootstrap); and under capture with the
bootstrap imported by hand (the same with BOOTDIR=a capture's DIR/python in the environment): torch is imported
first and the methods the bootstrap wraps are kept, then the bootstrap installs its wrappers; each call below is
timed with the wrappers, then again with the kept methods put back. So the difference of a call's two lines is
what the wrappers add to it, and the plain run's line against the others is what the capture library adds to
its calls. Prints microseconds per call, the median of REPEATS (default 7)
runs of N (default 4000) calls each.
"""
import os
import statistics
import sys
import time

if len(sys.argv) > 1:
    sys.path.append(sys.argv[1])
import torch  # noqa: E402  (the bootstrap's wrappers come after what they wrap is kept)

cuda = torch.cuda
N = int(os.environ.get("N", "4000"))
REPEATS = int(os.environ.get("REPEATS", "7"))
WRAPPED = [
    (cuda.Stream, ("__new__", "wait_event", "wait_stream", "record_event", "synchronize", "query")),
    (cuda.Event, ("__new__", "record", "wait", "synchronize", "query")),
]
kept = [(owner, name, owner.__dict__[name]) for owner, names in WRAPPED for name in names if name in owner.__dict__]
kept_synchronize = cuda.synchronize

side = cuda.Stream()
current = cuda.current_stream()
reused = cuda.Event()
tensor = torch.zeros(256, device="cuda")


def timed(label, body):
    body()  # the first call pays what is made once (a CUDA event, a cache entry)
    per_call = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(N):
            body()
        per_call.append((time.perf_counter() - start) / N * 1e6)
    cuda.synchronize()
    print("%-28s %8.2f us" % (label, statistics.median(per_call)), flush=True)


def calls(how):
    timed(how + " current_device", lambda: cuda.current_device())
    timed(how + " current_stream", lambda: cuda.current_stream())
    timed(how + " add_ (an op, a kernel)", lambda: tensor.add_(1))
    timed(how + " Event()", lambda: cuda.Event())
    timed(how + " Event().record()", lambda: cuda.Event().record())
    timed(how + " record+wait_event", lambda: (reused.record(side), current.wait_event(reused)))
    timed(how + " wait_stream", lambda: current.wait_stream(side))

    def stream_context():
        with cuda.stream(side):
            pass

    timed(how + " with stream(side)", stream_context)


boot = os.environ.get("BOOTDIR")
if boot and os.environ.get("CUDA_INJECTION64_PATH"):
    # Only BOOTDIR's bootstrap: another on the path (the capture's own) would chain to it and back.
    sys.path = [p for p in sys.path if not os.path.exists(os.path.join(p or ".", "sitecustomize.py"))]
    sys.path.insert(0, boot)
    import sitecustomize  # noqa: E402  (torch is imported: it installs its wrappers now)

    calls("wrapped")
    lines = sitecustomize._SourceLines((os.path.dirname(torch.__file__),))
    timed("wrapped lines.at()", lambda: lines.at(1))
    import ctypes
    capture = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])
    record = capture.streamtrace_framework_record
    record.argtypes = (ctypes.c_char_p, ctypes.c_size_t)
    record.restype = ctypes.c_int
    begin, end = b'{"type":"call_begin","name":"bench","src":null}', b'{"type":"call_end"}'
    timed("wrapped emit pair", lambda: (record(begin, len(begin)), record(end, len(end))))
    pydll_record = ctypes.PyDLL(os.environ["CUDA_INJECTION64_PATH"]).streamtrace_framework_record
    pydll_record.argtypes = (ctypes.c_char_p, ctypes.c_size_t)
    pydll_record.restype = ctypes.c_int
    timed("wrapped emit pair (PyDLL)", lambda: (pydll_record(begin, len(begin)), pydll_record(end, len(end))))
    for owner, name, method in kept:
        setattr(owner, name, method)
    cuda.synchronize = kept_synchronize
    calls("unwrapped")
else:
    calls("T1" if os.environ.get("CUDA_INJECTION64_PATH") else "plain")
