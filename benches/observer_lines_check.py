"""Checks on the CPU that the native PyTorch observer writes the same records whether it reads Python lines from
the thread's own frames (capture/python/python_frames.h) or through CPython's API, and says which way it read:

    python benches/observer_lines_check.py frames > a.txt
    STREAMTRACE_PYTHON_FRAMES_API=1 python benches/observer_lines_check.py api > b.txt
    diff a.txt b.txt    # only the first line differs (the way each read)

The observer is started with Python functions in place of the capture library's entry points, so every record
it makes is printed; CPU tensors stand in for CUDA ones. The program runs ops from nn.Module code, plain
functions, a generator, a callback that C code calls (sorted's key), a thread, a method a class body defines
(the frames a walk passes on its way to the user's), and a saved-tensor hook whose clones are ops of their own
inside the ops that save tensors, a pool thread that runs only library code (its ops take the innermost library
line), and ops that change only a tensor's metadata (no extents, but a growing resize in deterministic mode
writes), and factories like a tensor (a write of the new tensor, no read); each record is printed with its extents' shapes (without their addresses).
"""
import concurrent.futures
import ctypes
import importlib.util
import json
import os
import sys
import threading

import torch

here = os.path.dirname(os.path.abspath(__file__))
python_dir = os.path.join(here, "..", "capture", "python")
spec = importlib.util.spec_from_file_location("streamtrace_bootstrap", os.path.join(python_dir, "sitecustomize.py"))
bootstrap = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bootstrap)

records = []
lock = threading.Lock()
RecordFn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t)
BeginFn = ctypes.CFUNCTYPE(ctypes.c_int)


def keep(text, length):
    with lock:
        records.append((threading.current_thread().name, text[:length].decode()))
    return 0


record_fn, begin_fn = RecordFn(keep), BeginFn(lambda: 0)
observer = bootstrap._observer_library(torch)
dirs = (os.path.dirname(torch.__file__), os.path.abspath(python_dir), os.path.dirname(threading.__file__))
files = observer.streamtrace_torch_library_files
files.argtypes = (ctypes.c_char_p,)
for path in dirs:
    files(path.encode())
error = ctypes.create_string_buffer(512)
observe = observer.streamtrace_torch_observe
observe.argtypes = (ctypes.c_void_p,) * 5 + (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t)
pointers = [ctypes.cast(f, ctypes.c_void_p).value for f in (begin_fn, begin_fn, record_fn, record_fn)]
if observe(*pointers, None, 1, error, len(error)) != 0:
    sys.exit(error.value.decode())
if hasattr(observer, "streamtrace_torch_observe_thread"):  # the callback is each thread's own: as the bootstrap does
    bootstrap._observe_new_threads(observer)
bootstrap._observe_python_inside_ops(torch, bootstrap._NativeRegions(observer))  # as the bootstrap does
way = getattr(observer, "streamtrace_torch_python_frames", lambda: 0)()
print("lines read %s" % ("from the frames (layout of CPython %x)" % way if way else "through the API"))


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))

    def forward(self, x):
        return self.layers(x)


def step(model, x):
    loss = model(x).sum()
    loss.backward()
    return loss


def generated(x):
    for scale in (1.0, 2.0):
        yield x * scale


def by_key(x):
    return float(x.sum())


class Body:
    doubled = staticmethod(lambda x: x + x)


torch.manual_seed(0)
model, x = Mlp(), torch.randn(3, 4)
for _ in range(3):
    step(model, x)
list(generated(x))
sorted([x, x + 1, x - 1], key=by_key)
Body.doubled(x)
worker = threading.Thread(target=step, args=(model, x), name="worker")
worker.start()
worker.join()
with torch.autograd.graph.saved_tensors_hooks(lambda t: t.clone(), lambda t: t):  # ops run inside an op
    step(model, x)
for _ in range(2):  # the second time from the caches
    torch.add(x, 1)
    (x * 2).relu_()
# A thread that runs library code only (torch.distributed.checkpoint's stager runs so): its ops take the innermost
# library line, here concurrent.futures' call of the function.
# So do ops of generated code (no file) that such a thread runs.
generated_code = {"torch": torch}
exec(compile("def add_one(x):\n    return torch.add(x, 1)\n", "<generated>", "exec"), generated_code)
with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="pool") as pool:
    pool.submit(torch.add, x, 1).result()
    pool.submit(generated_code["add_one"], x).result()
# Ops that change a tensor's metadata and no byte (torch.distributed.checkpoint's stager sets a tensor's storage):
# their op_ends read and write nothing.
staged = torch.empty(0)
staged.set_(x.untyped_storage(), 0, (3, 4))
staged.transpose_(0, 1)
staged.resize_(2, 2)
# ...but a resize that grows fills the bytes it adds in deterministic mode: then it writes them.
torch.use_deterministic_algorithms(True)
staged.resize_(5, 5)
torch.use_deterministic_algorithms(False)
# Factories like a tensor take its shape, dtype and device, no byte: their op_ends write the new tensor, read nothing.
torch.ones_like(x)
x.new_zeros(2)
torch.randint_like(x, torch.tensor(10))  # ...but a like-factory's other tensors are read: `high`
# Batch norm writes its running stats in training, though its schema marks them read; in eval it reads them.
norm = torch.nn.BatchNorm1d(4)
norm(x)
norm.eval()
norm(x)

for name, text in records:  # the addresses differ between runs; the ops, their lines and extents' shapes must not
    fields = json.loads(text)
    shapes = {key: [extent[1:] for extent in fields[key]] for key in ("reads", "writes") if key in fields}
    print(name, fields.get("type"), fields.get("name"), fields.get("src"), json.dumps(shapes, sort_keys=True))
