"""One run of a tiny MLP training loop on the CPU, plain or through streamtrace's native PyTorch observer, for
counting instructions under callgrind (no GPU needed):

    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=OUT python benches/observer_instructions.py LIB MODE [steps]
    callgrind_annotate --inclusive=yes OUT | grep -m1 closure_fcn     # the loop's own instructions

MODE is `plain` or `native`; with LD_PRELOAD=LIB as well, the capture library's interposers (capture/src/host_sync)
see every lock the program takes, as under `streamtrace capture`. The loop is benches/t2_mode_cost.py's (tiny, so that dispatch, not arithmetic,
counts), but its model is called through nn.Module as a training script's is, and the observer is given the
bootstrap's library directories (torch, the standard library's threading, capture/python): the Python line of
each op is then found by walking torch's frames up to this file's, as in a real capture. CPU tensors stand in
for CUDA ones (the observer counts all devices); the capture library is loaded but off (no CUDA program started
it), so what is counted is the observer's own work on the program's thread. Compare two runs' totals, and the
inclusive counts of the observer's callbacks (`callgrind_annotate --inclusive=yes`), per op: the run prints
how many ops it observed. The loop runs inside a ctypes callback (`closure_fcn` in _ctypes), so that its
inclusive count leaves out start-up (importing torch, building or loading the observer); one intra-op thread,
so that no OpenMP worker spins for a varying number of instructions.
"""
import ctypes
import importlib.util
import os
import sys
import threading

import torch

library = os.path.abspath(sys.argv[1])
mode = sys.argv[2]
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 250
here = os.path.dirname(os.path.abspath(__file__))
python_dir = os.path.join(here, "..", "capture", "python")


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))

    def forward(self, x):
        return self.layers(x)


torch.manual_seed(0)
torch.set_num_threads(1)
model = Mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))


def loop(n):
    for _ in range(n):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


if mode == "native":
    os.environ["CUDA_INJECTION64_PATH"] = library
    bootstrap = os.path.join(python_dir, "sitecustomize.py")
    spec = importlib.util.spec_from_file_location("streamtrace_bootstrap", bootstrap)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dirs = (os.path.dirname(torch.__file__), os.path.abspath(python_dir), os.path.dirname(threading.__file__))
    module._start_native_observer(torch, ctypes.CDLL(library), module._SourceLines(dirs), all_devices=True)
elif mode != "plain":
    sys.exit("MODE is plain or native")

ctypes.PYFUNCTYPE(None)(lambda: loop(steps))()  # the loop's instructions are the callback's, inclusive
print(f"{mode}: {steps} steps")
