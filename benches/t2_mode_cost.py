"""What tier-T2 op recording costs per op, measured on the CPU (no GPU needed).

Runs a tiny MLP training loop (tiny so that dispatch overhead, not arithmetic, dominates) four ways: plain,
under a pass-through TorchDispatchMode, under streamtrace's Python recording mode and under its native observer
(both from capture/python/). CPU tensors stand in for CUDA ones (the bench swaps the Python mode's `is_cuda` test
for True and starts the native observer with all devices), and records go to the real capture library, which
drops them because no CUDA program initialized it: what is measured is the op observation itself, the part the
GPU bench cannot separate. The native observer is built (or taken from the cache) on first use and cannot be
removed once started, so it runs last.

    python benches/t2_mode_cost.py target/release/libstreamtrace_capture.so [steps]
"""
import importlib.util
import os
import sys
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

library = os.path.abspath(sys.argv[1])
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
here = os.path.dirname(os.path.abspath(__file__))
bootstrap = os.path.join(here, "..", "capture", "python", "sitecustomize.py")

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))


def loop(n):
    for _ in range(n):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


class Counting(TorchDispatchMode):
    ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        Counting.ops += 1
        return func(*args, **(kwargs or {}))


class PassThrough(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def timed(n):
    loop(50)  # warm up
    start = time.perf_counter()
    loop(n)
    return time.perf_counter() - start


with Counting():
    loop(1)
ops_per_step = Counting.ops

plain = timed(steps)
with PassThrough():
    passthrough = timed(steps)

# The bootstrap as a module, with CPU tensors counted as CUDA ones and its mode left for us to enter.
os.environ["CUDA_INJECTION64_PATH"] = library
os.environ["STREAMTRACE_TORCH_OBSERVER"] = "python"
source = open(bootstrap).read().replace("value.is_cuda", "True")
spec = importlib.util.spec_from_loader("streamtrace_bootstrap", loader=None)
module = importlib.util.module_from_spec(spec)
module.__file__ = bootstrap
exec(compile(source, bootstrap, "exec"), module.__dict__)
mode = module._install(torch)
if mode is None:
    sys.exit("the bootstrap did not install its mode")
recording = timed(steps)
mode.__exit__(None, None, None)

import ctypes  # noqa: E402

module._start_native_observer(torch, ctypes.CDLL(library), module._SourceLines(()), all_devices=True)
native = timed(steps)

ops = ops_per_step * steps
print(f"{steps} steps x {ops_per_step} ops (as the dispatch mode sees them): plain {plain:.3f} s, pass-through mode "
      f"{passthrough:.3f} s, Python recording mode {recording:.3f} s, native observer {native:.3f} s")
print(f"per op: pass-through {1e6 * (passthrough - plain) / ops:.1f} us, Python recording {1e6 * (recording - plain) / ops:.1f} us "
      f"(of which streamtrace's own {1e6 * (recording - passthrough) / ops:.1f} us), native {1e6 * (native - plain) / ops:.1f} us")
