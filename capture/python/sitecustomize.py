"""streamtrace's PyTorch bootstrap (tier T2), put in front of the interpreter by `streamtrace capture`.

It changes nothing in the program: once the program imports torch, a TorchDispatchMode records, for every op
that touches CUDA tensors, the op's name, the exact byte extents it reads and writes (from the op schema, the
tensors' storage offset, sizes, strides and element size) and the Python file and line that called it. Each
record goes to the capture library, which writes it in order with the CUDA calls the op makes, so the analyzer
gives the op's kernels the op's read and write sets. Without torch, or with a torch lacking what this needs,
capture stays at tier T1 and says so once.
"""
import ctypes
import importlib.abc
import importlib.util
import json
import os
import sys
import threading

_HERE = os.path.dirname(os.path.abspath(__file__))


def _chain_sitecustomize():
    """Runs the sitecustomize this one shadows, if the environment has one."""
    paths = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    for path in paths:
        candidate = os.path.join(path or ".", "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_streamtrace_chained_sitecustomize", candidate)
            if spec and spec.loader:
                spec.loader.exec_module(importlib.util.module_from_spec(spec))
            return


def _say(message):
    sys.stderr.write("streamtrace: %s\n" % message)


def _user_frame(skip_dirs):
    frame = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(skip_dirs) and not filename.startswith("<"):
            return "%s:%d" % (filename, frame.f_lineno)
        frame = frame.f_back
    return None


def _install(torch):
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
    except Exception as error:  # a torch without dispatch modes
        _say("this torch has no TorchDispatchMode (%s): capture stays at tier T1 (pointer arguments)" % error)
        return
    library = os.environ.get("CUDA_INJECTION64_PATH")
    try:
        record = ctypes.CDLL(library).streamtrace_framework_record
        record.argtypes = (ctypes.c_char_p, ctypes.c_size_t)
        record.restype = ctypes.c_int
    except Exception as error:
        _say("cannot reach the capture library (%s): capture stays at tier T1" % error)
        return
    skip_dirs = (os.path.dirname(torch.__file__), _HERE, os.path.dirname(threading.__file__))
    Tensor = torch.Tensor
    # Per-op and per-file facts are computed once: the mode runs for every op of the program.
    schemas = {}
    user_files = {}
    quoted_files = {}

    def arguments_of(func):
        info = schemas.get(func)
        if info is None:
            info = tuple(
                (index, argument.name, argument.alias_info is not None and argument.alias_info.is_write)
                for index, argument in enumerate(func._schema.arguments)
            )
            schemas[func] = info
        return info

    def add_extents(value, out):
        """Appends "[first byte,length]" for each CUDA tensor in value (a tensor or a list of them)."""
        if isinstance(value, Tensor):
            if value.is_cuda and value.numel():
                if value.is_contiguous():
                    out.append("[%d,%d]" % (value.data_ptr(), value.numel() * value.element_size()))
                else:
                    span = 1
                    for n, stride in zip(value.shape, value.stride()):
                        if stride < 0:
                            return
                        span += (n - 1) * stride
                    out.append("[%d,%d]" % (value.data_ptr(), span * value.element_size()))
        elif isinstance(value, (list, tuple)):
            for item in value:
                add_extents(item, out)

    def source_line():
        frame = sys._getframe(2)
        while frame is not None:
            filename = frame.f_code.co_filename
            user = user_files.get(filename)
            if user is None:
                user = not filename.startswith(skip_dirs) and not filename.startswith("<")
                user_files[filename] = user
                quoted_files[filename] = json.dumps(filename)[1:-1]
            if user:
                return '"%s:%d"' % (quoted_files[filename], frame.f_lineno)
            frame = frame.f_back
        return "null"

    class StreamtraceMode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            reads, writes = [], []
            for index, name, written in arguments_of(func):
                if index < len(args):
                    value = args[index]
                elif name in kwargs:
                    value = kwargs[name]
                else:
                    continue
                add_extents(value, writes if written else reads)
            tid = threading.get_native_id()
            line = '{"type":"op_begin","thread":%d,"name":"%s","reads":[%s],"writes":[%s],"src":%s}' % (
                tid, func.__name__, ",".join(reads), ",".join(writes), source_line())
            record(line.encode(), len(line))
            outputs = []
            try:
                out = func(*args, **kwargs)
                add_extents(out, outputs)
                return out
            finally:
                line = '{"type":"op_end","thread":%d,"writes":[%s]}' % (tid, ",".join(outputs))
                record(line.encode(), len(line))

    mode = StreamtraceMode()
    try:
        mode.__enter__()
    except Exception as error:
        _say("cannot enter the recording dispatch mode (%s): capture stays at tier T1" % error)
        return
    _say("PyTorch %s: recording op read/write sets and source lines (tier T2)" % torch.__version__)


class _AfterTorchImport(importlib.abc.MetaPathFinder):
    """Waits for `import torch` to finish, then installs the recording mode."""

    def find_spec(self, name, path, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        original = spec.loader.exec_module

        def exec_module(module):
            original(module)
            try:
                _install(module)
            except Exception as error:  # recording must never break the program
                _say("PyTorch recording failed to start (%s): capture stays at tier T1" % error)

        spec.loader.exec_module = exec_module
        return spec


if os.environ.get("CUDA_INJECTION64_PATH") and os.environ.get("STREAMTRACE_OUTPUT"):
    sys.meta_path.insert(0, _AfterTorchImport())
_chain_sitecustomize()
