"""streamtrace's PyTorch bootstrap (tier T2), put in front of the interpreter by `streamtrace capture`.

It changes nothing in the program: once the program imports torch, it records, for every op that touches CUDA
tensors, the op's name, the exact byte extents it reads and writes (from the op schema, the tensors' storage
offset, sizes, strides and element size) and the Python file and line that called it, and every block the
caching allocator hands out and takes back. Each record goes to the capture library, which writes it in order
with the CUDA calls the op makes, so the analyzer gives the op's kernels the op's read and write sets.

Ops are observed natively where possible: torch_observer.cpp, beside this file, is built once against the
program's libtorch (cached for every capture of the user by streamtrace_observer_cache.py, beside this file)
and hooks PyTorch's RecordFunction and allocator tracker. Where it cannot be built
(no C++ compiler, no CUDA headers) or STREAMTRACE_TORCH_OBSERVER=python asks for it, a Python TorchDispatchMode
does the same work at several times the cost. Without torch, or with a torch lacking what this needs, capture
stays at tier T1 and says so once.

One file of about 900 lines on purpose: Python puts exactly one sitecustomize module in front of a program, and
what it installs is one concern (tier T2 recording and the brackets around ordering calls). Beside it, what it
loads: the observer's cache (streamtrace_observer_cache.py) and Triton's launches as ops (streamtrace_launch_ops.py).
"""
import atexit
import ctypes
import enum
import functools
import importlib.abc
import importlib.util
import json
import os
import sys
import threading

_HERE = os.path.dirname(os.path.abspath(__file__))
# Lines whose creation label is kept read (generated code may create streams and events at new lines forever).
_LABELS_KEPT = 4096


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


_beside = {}  # name -> the module of this file's folder, loaded once


def _load_beside(name):
    """The module `name` of this file's folder, loaded from its file once (the folder is no package, and a module
    of the program's may have the same name)."""
    module = _beside.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location("_" + name, os.path.join(_HERE, name + ".py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _beside[name] = module
    return module


def _say(message):
    sys.stderr.write("streamtrace: %s\n" % message)


def _say_no_blocks(reason):
    _say("no caching-allocator block events (%s): findings name the driver's allocations (cudaMalloc segments, "
         "stream-ordered blocks)" % reason)


def _install(torch):
    """Starts tier T2 recording. Returns what records the ops (the native observer's library, or this thread's
    dispatch mode), or None when recording could not start (capture then stays at tier T1)."""
    global _host_memory_pinned
    library = os.environ.get("CUDA_INJECTION64_PATH")
    try:
        # PyDLL: called with the GIL held. None of these entry points waits for anything that takes the GIL (the
        # native observer calls them under it too), and letting it go and taking it again around each record is
        # two lock hand-overs that the host-synchronization interposers see, several for every Triton launch.
        capture = ctypes.PyDLL(library)
        record = capture.streamtrace_framework_record
        record.argtypes = (ctypes.c_char_p, ctypes.c_size_t)
        record.restype = ctypes.c_int
        begin = capture.streamtrace_framework_op_begin
        begin.argtypes = ()
        begin.restype = ctypes.c_int
        op_end = capture.streamtrace_framework_op_end
        op_end.argtypes = (ctypes.c_char_p, ctypes.c_size_t)
        op_end.restype = ctypes.c_int
        begin_unsited = capture.streamtrace_framework_op_begin_unsited
        begin_unsited.argtypes = ()
        begin_unsited.restype = ctypes.c_int
    except Exception as error:
        _say("cannot reach the capture library (%s): capture stays at tier T1" % error)
        return None

    try:
        pinned = capture.streamtrace_host_memory_pinned
        pinned.argtypes = (ctypes.c_uint64,)
        pinned.restype = ctypes.c_int
        _host_memory_pinned = pinned
    except AttributeError:  # a capture library older than this bootstrap: CUDA is asked instead
        pass

    def emit(line):
        """Hands one record (a JSON object; the capture library adds the thread) to the capture library."""
        data = line.encode()
        record(data, len(data))

    def end(line):
        """Hands an op's op_end record to the capture library, which ends the op on this thread."""
        data = line.encode()
        op_end(data, len(data))

    lines = _SourceLines((os.path.dirname(torch.__file__), _HERE, os.path.dirname(threading.__file__)))
    observer = None
    if os.environ.get("STREAMTRACE_TORCH_OBSERVER", "native") != "python":
        try:
            observer = _start_native_observer(torch, capture, lines)
            how = "native observer"
            regions = _NativeRegions(observer)
        except Exception as error:
            _say("no native PyTorch observer (%s): recording ops in Python, which costs more" % error)
    if observer is None:
        observer = _start_dispatch_mode(torch, begin, emit, end, lines)
        how = "Python dispatch mode"
        if observer is None:
            return None
        regions = _ModeRegions(torch, type(observer))
    try:
        _observe_python_inside_ops(torch, regions)
    except Exception as error:  # ops run by Python code inside ops then take the enclosing op's read and write sets
        _say("ops of Python code running inside ops (hooks, __torch_dispatch__, Python kernels) are not "
             "recorded as ops of their own (%s)" % error)
    bracket = _bracket_ordering_calls(torch, emit, lines)
    # STREAMTRACE_TRITON_OPS=0 leaves Triton's launches at tier T1 (to compare).
    _record_triton_launches(torch, begin_unsited, end, lines, bracket, os.environ.get("STREAMTRACE_TRITON_OPS") != "0")
    _record_host_reads(torch, emit, lines)
    _record_creation_lines(torch, emit, lines)
    _say("PyTorch %s: recording op read/write sets, allocator blocks and Python lines (tier T2, %s)" % (
        torch.__version__, how))
    return observer


class _SourceLines:
    """Finds the Python line that called into torch: the innermost frame outside the library directories."""

    def __init__(self, library_dirs):
        self.library_dirs = tuple(library_dirs)
        self.listeners = []  # called with each directory added later
        self.user_files = {}  # file -> is it the user's
        self.quoted_files = {}  # file -> its JSON-escaped name

    def add_library_dir(self, path):
        self.library_dirs += (path,)
        self.user_files.clear()
        for listener in self.listeners:
            listener(path)

    def at(self, depth=2):
        """The line of the caller `depth` frames up or further out, as a JSON string; on a stack without a user
        frame (a thread a library started), its innermost frame of a real file; else null."""
        frame = sys._getframe(depth)
        innermost = None
        while frame is not None:
            filename = frame.f_code.co_filename
            user = self.user_files.get(filename)
            if user is None:
                user = bool(filename) and not filename.startswith(self.library_dirs) and not filename.startswith("<")
                self.user_files[filename] = user
                self.quoted_files[filename] = json.dumps(filename)[1:-1]
            if user:
                return '"%s:%d"' % (self.quoted_files[filename], frame.f_lineno)
            if innermost is None and filename and not filename.startswith("<"):
                innermost = frame
            frame = frame.f_back
        if innermost is None:
            return "null"
        return '"%s:%d"' % (self.quoted_files[innermost.f_code.co_filename], innermost.f_lineno)


def _extent(tensor):
    """The bytes a tensor covers, as an item of a reads or writes list (docs/trace-format.md): "[first byte,
    length]" when it is contiguous; a strided view as "[first byte,extent,element size,[[size,stride],...]]"
    (strides in elements), so that the analyzer compares the bytes the view covers (x[0::2] and x[1::2] share
    none); a view with a negative stride as the plain extent from its lowest to its highest byte. None when it
    has no byte."""
    size = tensor.nbytes
    if not size:
        return None
    if tensor.is_contiguous():
        return "[%d,%d]" % (tensor.data_ptr(), size)
    shape, strides = tensor.shape, tensor.stride()
    low, high = _load_beside("streamtrace_launch_ops").element_bounds(shape, strides)
    element = tensor.element_size()
    span = (high - low + 1) * element
    if low < 0:
        return "[%d,%d]" % (tensor.data_ptr() + low * element, span)
    dims = ",".join("[%d,%d]" % pair for pair in zip(shape, strides))
    return "[%d,%d,%d,[%s]]" % (tensor.data_ptr(), span, element, dims)


# The capture library's table of pinned blocks (streamtrace_host_memory_pinned), once _install found it.
_host_memory_pinned = None


def _is_pinned(memory):
    """Whether a CPU tensor or storage with bytes lies in pinned memory: by the blocks the capture saw pinned (one
    lookup), else by asking CUDA (is_pinned(), a dispatcher op and several driver calls)."""
    if _host_memory_pinned is not None:
        known = _host_memory_pinned(memory.data_ptr())
        if known >= 0:
            return known == 1
    return memory.is_pinned()


def _record_host_reads(torch, emit, lines):
    """`.numpy()` and `.tolist()` hand a pinned CPU tensor's bytes to the host without a dispatcher op, and
    `torch.save` (torch.distributed.checkpoint too) reads each CPU storage it writes in C++: each is recorded as
    a host read (rule 12), with the caller's line."""
    Tensor = torch.Tensor

    def host_read(name, extent, src):
        emit('{"type":"host_access","name":"%s","reads":[%s],"writes":[],"src":%s}' % (name, extent, src))

    def reading(name, method):
        def read(self, *args, **kwargs):
            result = method(self, *args, **kwargs)  # recorded once it succeeded
            try:
                if self.device.type == "cpu" and self.numel() > 0 and _is_pinned(self):
                    extent = _extent(self)
                    if extent:
                        host_read(name, extent, lines.at())
            except Exception:
                pass  # recording must never change what the call does
            return result
        read.__name__ = getattr(method, "__name__", name)
        read.__doc__ = getattr(method, "__doc__", None)
        return read

    for name in ("numpy", "tolist"):
        method = getattr(Tensor, name, None)
        if method is not None:
            setattr(Tensor, name, reading(name, method))

    Storage = getattr(torch, "UntypedStorage", None)
    Writer = getattr(torch._C, "PyTorchFileWriter", None)
    write_record = getattr(Writer, "write_record", None)
    if Storage is None or write_record is None:
        return

    def saving(self, name, data, size, *args, **kwargs):
        result = write_record(self, name, data, size, *args, **kwargs)  # the bytes are read by now
        try:
            address = None
            if isinstance(data, Storage):
                if data.device.type == "cpu" and _is_pinned(data):
                    address = data.data_ptr()
            elif isinstance(data, int) and _host_memory_pinned is not None and _host_memory_pinned(data) == 1:
                address = data  # older torch.save, and torch.package, pass the storage's address
            if address is not None and size > 0:
                host_read("torch.save", "[%d,%d]" % (address, size), lines.at())
        except Exception:
            pass  # recording must never change what the call does
        return result

    try:
        Writer.write_record = saving
    except (AttributeError, TypeError):
        pass  # a writer class that cannot be changed: saves stay unrecorded


def _record_creation_lines(torch, emit, lines):
    """Names streams and events by the Python line that created them, for reports: a `creation` record with the
    line and its text for each `torch.cuda.Stream()` (a stream of PyTorch's pool, whose CUDA stream the capture
    declared when the pool was made) and for each `torch.cuda.Event()` once its CUDA event exists (at its first
    record). Streams wrapped by `current_stream()` or `ExternalStream` are not created by their line."""
    import linecache

    # The label of each line, read once: a loop's `wait_stream` makes a fresh event at the same line every step.
    labels = {}

    def label_of(src):
        label = labels.get(src)
        if label is None:
            path, _, number = json.loads(src).rpartition(":")
            text = linecache.getline(path, int(number)).strip() if number.isdigit() else ""
            label = json.dumps(text[:200])
            if len(labels) < _LABELS_KEPT:
                labels[src] = label
        return label

    def creation(kind, handle, src):
        if src == "null":
            return  # made where no line of the program is on the stack (FSDP's events on autograd's thread)
        emit('{"type":"creation","%s":%d,"src":%s,"label":%s}' % (kind, handle, src, label_of(src)))

    Stream, Event = torch.cuda.Stream, torch.cuda.Event
    stream_new, event_new, event_record = Stream.__new__, Event.__new__, Event.record

    def new_stream(cls, *args, **kwargs):
        stream = stream_new(cls, *args, **kwargs)
        try:
            if "stream_id" not in kwargs and "stream_ptr" not in kwargs and stream.cuda_stream:
                creation("stream", stream.cuda_stream, lines.at())
        except Exception:
            pass  # naming must never change what the call does
        return stream

    def new_event(cls, *args, **kwargs):
        event = event_new(cls, *args, **kwargs)
        try:
            event._streamtrace_src = lines.at()
        except Exception:
            pass
        return event

    def record(self, *args, **kwargs):
        result = event_record(self, *args, **kwargs)
        try:
            src = self.__dict__.pop("_streamtrace_src", None)
            if src is not None and self.cuda_event:
                creation("event", self.cuda_event, src)
        except Exception:
            pass
        return result

    Stream.__new__ = staticmethod(new_stream)
    Event.__new__ = staticmethod(new_event)
    record.__name__, record.__doc__ = event_record.__name__, event_record.__doc__
    Event.record = record


# What a library must export to be the native observer (a file that lacks one is not a usable build).
_OBSERVER_ENTRY_POINTS = ("streamtrace_torch_observe", "streamtrace_torch_observe_blocks", "streamtrace_torch_costs",
                          "streamtrace_torch_library_files", "streamtrace_torch_python_enter",
                          "streamtrace_torch_python_exit", "streamtrace_torch_frames")


def _observer_library(torch):
    """The native observer (torch_observer.cpp) built for this torch: from the cache that every capture of this
    user shares, or built into it now (about 10 s, once per torch, compiler and observer source; beside this
    file, streamtrace_observer_cache.py says how). Raises with the reason when it cannot be had."""
    cache = _load_beside("streamtrace_observer_cache")
    recipe = cache.recipe_for(torch, _HERE)

    def load(path):
        library = ctypes.PyDLL(path)  # PyDLL: its functions are called with the GIL held
        for name in _OBSERVER_ENTRY_POINTS:
            getattr(library, name)  # AttributeError: not this observer
        return library

    root = cache.usable_root(cache.cache_root(), os.path.join(_HERE, "observer-cache"), _say)
    return cache.observer_library(recipe, root, load, _say)


def _start_native_observer(torch, capture, lines, all_devices=False):
    """Starts the native observer on every thread; allocator blocks follow once CUDA is initialized."""
    observer = _observer_library(torch)
    library_files = observer.streamtrace_torch_library_files
    library_files.argtypes = (ctypes.c_char_p,)
    for path in lines.library_dirs:
        library_files(path.encode())
    lines.listeners.append(lambda path: library_files(path.encode()))
    # Where the capture library can say whether an op recorded anything, an op that did not is left out whole.
    try:
        op_recorded, op_close = capture.streamtrace_framework_op_recorded, capture.streamtrace_framework_op_close
    except AttributeError:  # a capture library older than this bootstrap: every op is written
        pass
    else:
        frames = observer.streamtrace_torch_frames
        frames.argtypes, frames.restype = (ctypes.c_void_p, ctypes.c_void_p), None
        frames(ctypes.cast(op_recorded, ctypes.c_void_p).value, ctypes.cast(op_close, ctypes.c_void_p).value)
    # Last: once ops are observed, nothing here may fail (the caller would start the Python mode beside it).
    error = ctypes.create_string_buffer(512)
    observe = observer.streamtrace_torch_observe
    observe.argtypes = (ctypes.c_void_p,) * 5 + (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t)
    entry_points = (ctypes.cast(f, ctypes.c_void_p).value for f in (
        capture.streamtrace_framework_op_begin, capture.streamtrace_framework_op_begin_unsited,
        capture.streamtrace_framework_record, capture.streamtrace_framework_op_end))
    # The pinned-block lookup, or NULL where the capture library has none (the observer then asks CUDA).
    pinned = ctypes.cast(_host_memory_pinned, ctypes.c_void_p).value if _host_memory_pinned is not None else None
    if observe(*entry_points, pinned, int(all_devices), error, len(error)) != 0:
        raise RuntimeError(error.value.decode(errors="replace"))
    # A CUDA call made outside any op (an extension's kernel through ctypes or pybind11) names its Python line
    # too: the capture library asks the observer for it.
    try:
        python_lines, line_reader = capture.streamtrace_framework_python_lines, observer.streamtrace_torch_python_line
    except AttributeError:  # a capture library older than this bootstrap: native frames only
        pass
    else:
        python_lines.argtypes, python_lines.restype = (ctypes.c_void_p,), ctypes.c_int
        python_lines(ctypes.cast(line_reader, ctypes.c_void_p).value)

    def observe_blocks():
        outcome = observer.streamtrace_torch_observe_blocks(error, len(error))
        if outcome < 0:
            _say_no_blocks(error.value.decode())
        elif outcome > 0:
            _say("this torch's allocator history differs from the ones known: blocks freed outside ops have no line")

    if os.environ.get("STREAMTRACE_COST_DETAIL"):
        atexit.register(_say_observer_costs, observer)
    try:
        torch.cuda._lazy_call(observe_blocks)  # the allocator tracks devices only once CUDA is initialized
    except Exception as error:  # ops are observed already: a failure here must not start the Python mode too
        _say_no_blocks(error)
    return observer


def _say_observer_costs(observer):
    """Says where the native observer's time went (STREAMTRACE_COST_DETAIL), at exit."""
    parts = ("op starts", "  their Python lines", "op ends", "allocator block events", "lines of blocks freed outside ops")
    costs = (ctypes.c_uint64 * (2 * len(parts)))()
    if observer.streamtrace_torch_costs(costs, len(costs)) != len(parts):
        return
    frames = getattr(observer, "streamtrace_torch_python_frames", None)
    way = frames() if frames is not None else 0
    _say("native observer cost (calls, total us, us a call; Python lines read %s):" % (
        "from the frames of CPython %d.%d" % (way >> 24, (way >> 16) & 0xFF) if way else "through the API"))
    for index, part in enumerate(parts):
        calls, ns = costs[2 * index], costs[2 * index + 1]
        _say("  %-36s %9d %12.1f %8.2f" % (part, calls, ns / 1e3, ns / 1e3 / calls if calls else 0.0))


# The c10d ops that only read the tensors of their first argument (torch_observer.cpp's c10d_writes_first_argument).
_C10D_READERS = ("c10d::send", "c10d::barrier", "c10d::monitored_barrier_", "c10d::check_for_nan")


class _Correction(enum.Enum):
    """Where an op's schema says less than its kernels do, for one argument (_SCHEMA_CORRECTIONS)."""
    WRITTEN = 1  # written, though not marked Tensor(a!)
    WRITTEN_IF_TRUE = 2  # written when the bool argument `condition` is true
    READ_IF_NONE = 3  # marked written, but only read when the argument `condition` is None


# Ops whose kernels write arguments their schemas do not mark, or mark arguments they leave alone, as (argument,
# rule, condition) by place: batch norm's running stats in training, the statistics ops, the fused
# optimizers' gradients without grad_scale (torch_observer.cpp's schema_corrections says why).
_RUNNING_STATS_IN_TRAINING = ((3, _Correction.WRITTEN_IF_TRUE, 5), (4, _Correction.WRITTEN_IF_TRUE, 5))
_SCHEMA_CORRECTIONS = {
    "aten::batch_norm": _RUNNING_STATS_IN_TRAINING,
    "aten::_batch_norm_impl_index": _RUNNING_STATS_IN_TRAINING,
    "aten::native_batch_norm": _RUNNING_STATS_IN_TRAINING,
    "aten::cudnn_batch_norm": _RUNNING_STATS_IN_TRAINING,
    "aten::miopen_batch_norm": _RUNNING_STATS_IN_TRAINING,
    "aten::instance_norm": _RUNNING_STATS_IN_TRAINING,
    "aten::batch_norm_update_stats": ((1, _Correction.WRITTEN, -1), (2, _Correction.WRITTEN, -1)),
    "aten::batch_norm_gather_stats": ((3, _Correction.WRITTEN, -1), (4, _Correction.WRITTEN, -1)),
    "aten::batch_norm_gather_stats_with_counts": ((3, _Correction.WRITTEN, -1), (4, _Correction.WRITTEN, -1)),
    "aten::_fused_adam_": ((1, _Correction.READ_IF_NONE, 13),),
    "aten::_fused_adamw_": ((1, _Correction.READ_IF_NONE, 13),),
    "aten::_fused_sgd_": ((1, _Correction.READ_IF_NONE, 10),),
}


def _writes_argument(corrections, index, written, argument):
    """Whether an op writes its argument `index` in this call: `written` as its schema marks it, unless one of
    the op's `corrections` says otherwise; `argument(i)` is the call's argument i (None where not given)."""
    for place, rule, condition in corrections:
        if place != index:
            continue
        if rule is _Correction.WRITTEN:
            written = True
        elif rule is _Correction.WRITTEN_IF_TRUE:
            written = argument(condition) is True
        elif rule is _Correction.READ_IF_NONE:
            written = written and argument(condition) is not None
    return written


# In-place ops that change what a tensor is (its storage, sizes, strides, flags) and no byte of memory, though
# their schemas mark `self` written: they read and write nothing (torch_observer.cpp's is_metadata_only).
_METADATA_ONLY_OPS = frozenset((
    "aten::set_", "aten::as_strided_", "aten::transpose_", "aten::t_", "aten::squeeze_", "aten::unsqueeze_",
    "aten::swapdims_", "aten::swapaxes_", "aten::detach_", "aten::requires_grad_", "aten::rename_",
    "aten::set_data", "aten::record_stream", "aten::sparse_resize_", "aten::sparse_resize_and_clear_",
    "aten::resize_as_sparse_", "aten::_coalesced_", "aten::shallow_copy_data_"))

# Tensor arguments an op takes only a shape, dtype and device from, never a byte, by place: factories like
# `self`, backward kernels that take the forward's input for its shape, type_as and reshape_as
# (torch_observer.cpp's shape_only_arguments says which and why).
_SELF, _SECOND = (0,), (1,)
_SHAPE_ONLY_ARGUMENTS = {
    "aten::empty_like": _SELF, "aten::zeros_like": _SELF, "aten::ones_like": _SELF, "aten::full_like": _SELF,
    "aten::rand_like": _SELF, "aten::randn_like": _SELF, "aten::randint_like": _SELF, "aten::new_empty": _SELF,
    "aten::new_empty_strided": _SELF, "aten::new_zeros": _SELF, "aten::new_ones": _SELF, "aten::new_full": _SELF,
    "aten::type_as": _SECOND, "aten::reshape_as": _SECOND,
    "aten::nll_loss_backward": _SECOND, "aten::nll_loss2d_backward": _SECOND,
    "aten::max_pool2d_with_indices_backward": _SECOND, "aten::max_pool3d_with_indices_backward": _SECOND,
    "aten::avg_pool2d_backward": _SECOND, "aten::avg_pool3d_backward": _SECOND,
    "aten::_adaptive_avg_pool2d_backward": _SECOND, "aten::_adaptive_avg_pool3d_backward": _SECOND,
    "aten::adaptive_max_pool2d_backward": _SECOND, "aten::adaptive_max_pool3d_backward": _SECOND,
    "aten::reflection_pad1d_backward": _SECOND, "aten::reflection_pad2d_backward": _SECOND,
    "aten::reflection_pad3d_backward": _SECOND, "aten::replication_pad1d_backward": _SECOND,
    "aten::replication_pad2d_backward": _SECOND, "aten::replication_pad3d_backward": _SECOND,
    "aten::gather_backward": _SECOND, "aten::masked_select_backward": _SECOND,
    "aten::native_layer_norm_backward": (6,), "aten::cudnn_batch_norm_backward": (3, 4),
}

# Resizes touch no byte either, unless deterministic mode fills what they add (torch_observer.cpp's is_resize).
_RESIZE_OPS = frozenset(("aten::resize_", "aten::resize_as_", "aten::_resize_output_"))


def _touches_no_byte(torch, name):
    """Whether the op named `name` reads and writes no byte now (deterministic mode can be switched any time)."""
    if name in _METADATA_ONLY_OPS:
        return True
    if name not in _RESIZE_OPS:
        return False
    try:
        deterministic = torch.are_deterministic_algorithms_enabled()
        fills = getattr(getattr(torch.utils, "deterministic", None), "fill_uninitialized_memory", True)
    except Exception:  # a torch without these: take the resize as a write, as before
        return False
    return not (deterministic and fills)


# A C callable that takes what torch's GPU trace hooks pass (none to two ints) and does nothing: no bytecode.
_NO_BYTECODE = functools.partial(slice, None)


def _quiet_unobserved_gpu_trace_hooks(gpu_trace):
    """Makes each of torch's GPU trace hooks that nothing observes run no Python bytecode once activated.

    Activated (torch._C._activate_gpu_trace), every hook calls its registry's fire_callbacks, Python code where
    the interpreter may hand the GIL to another thread, from C++ that may hold a lock: the stream pool is filled
    under a call_once whose stream creations each fire a hook, so a thread that takes the GIL there and asks for
    its first stream (THCPStream_pynew holds the GIL) waits for the call_once while the filling thread waits for
    the GIL. Two threads of a thread pool, each making its first stream, hung so (CSAN can too). A registry
    given a callback later (by the program, or CSAN) fires again as torch wrote it. This narrows the window, it
    does not close it: the hook's call can still run Python (a garbage collection that starts there and runs
    finalizers, a program's own `__import__`)."""
    for registry in list(vars(gpu_trace).values()):
        if type(registry).__name__ != "CallbackRegistry" or getattr(registry, "callback_list", True):
            continue
        registry.fire_callbacks = _NO_BYTECODE
        registry.add_callback = _firing_again_once_observed(registry)


def _firing_again_once_observed(registry):
    add = type(registry).add_callback

    def add_callback(callback):
        registry.__dict__.pop("fire_callbacks", None)
        registry.__dict__.pop("add_callback", None)
        add(registry, callback)
    return add_callback


def _checkpoint_recomputes_to_the_end():
    """Turns off the early stop of non-reentrant activation checkpointing, under torch's GPU trace hooks.

    Those hooks (torch._C._activate_gpu_trace) run Python from C++ at every block freed without setting a pending
    exception aside: a CUDA tensor freed while an exception unwinds Python frames drops that exception, and the
    program fails (`SystemError: ... returned NULL without setting an exception`). Non-reentrant checkpointing
    ends each recomputation inside backward so, raising through frames that hold CUDA tensors
    (torch.utils.checkpoint's _StopRecomputationError); recomputing the rest of the block instead gives the same
    gradients. A program that sets the early stop itself (set_checkpoint_early_stop) keeps its choice."""
    checkpoint = sys.modules.get("torch.utils.checkpoint") or importlib.import_module("torch.utils.checkpoint")
    if getattr(checkpoint, "_enable_checkpoint_early_stop", False) is None:
        checkpoint._enable_checkpoint_early_stop = False


def _start_dispatch_mode(torch, begin, emit, end, lines):
    """Records ops with a Python TorchDispatchMode entered on this thread and every thread started later.
    Returns this thread's mode, or None when it could not start."""
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
    except Exception as error:  # a torch without dispatch modes
        _say("this torch has no TorchDispatchMode (%s): capture stays at tier T1 (pointer arguments)" % error)
        return None
    Tensor = torch.Tensor
    get_thread = threading.get_ident
    schemas = {}  # per-op facts are computed once: the mode runs for every op of the program

    def arguments_of(func):
        """(index, written) of each of the op's arguments that can hold tensors."""
        info = schemas.get(func)
        if info is None:
            schema = func._schema
            # c10d's collectives and point-to-point ops write the tensors of their first argument whatever
            # their schemas mark (as torch_observer.cpp says); send and the barriers only read theirs.
            c10d_writer = schema.name.startswith("c10d::") and schema.name not in _C10D_READERS
            info = tuple(
                (index,
                 (argument.alias_info is not None and argument.alias_info.is_write) or (c10d_writer and index == 0))
                for index, argument in enumerate(schema.arguments)
                if "Tensor" in str(argument.type)
            )
            schemas[func] = info
        return info

    # A c10d op's process group, named as the native observer names it: reports call NCCL's stream by it.
    group_arguments = {}  # op -> (index, name) of its ProcessGroup argument, or None
    ProcessGroup = getattr(getattr(torch._C, "_distributed_c10d", None), "ProcessGroup", None)

    def group_argument(func):
        if func not in group_arguments:
            schema = func._schema
            group_arguments[func] = next(
                ((index, argument.name) for index, argument in enumerate(schema.arguments)
                 if "ProcessGroup" in str(argument.type)), None) if schema.name.startswith("c10d::") else None
        return group_arguments[func]

    def process_group_of(func, args, kwargs):
        """The group a c10d op ran in as the user knows it: its description (`default_pg`, `group_desc=` of
        new_group) when it has one, else "group" and its name; None for other ops or where this torch cannot say."""
        where = group_argument(func)
        if where is None:
            return None
        index, name = where
        try:
            value = args[index] if index < len(args) else (kwargs or {}).get(name)
            # The dispatcher hands the group over boxed (a ScriptObject): unboxed, it has its names.
            group = value if isinstance(value, ProcessGroup) else ProcessGroup.unbox(value)
            description = getattr(group, "group_desc", None)
            if description and description != "undefined":
                return str(description)
            group_name = getattr(group, "group_name", None)
            return "group %s" % group_name if group_name else None
        except Exception:  # an older torch without these names, or a group it cannot unbox: the field is left out
            return None

    def argument_value(func, args, kwargs, index):
        """The call's argument `index` (by place, else by name), None where not given."""
        if index < len(args):
            return args[index]
        arguments = func._schema.arguments
        return (kwargs or {}).get(arguments[index].name) if index < len(arguments) else None

    aliasing = {}

    def outputs_alias(func):
        """(outputs alias, view): whether the op's outputs are views of its arguments or the arguments it wrote
        (no new bytes), and whether it is a view that writes no argument either (it touches no byte at all)."""
        alias = aliasing.get(func)
        if alias is None:
            returns_alias = any(result.alias_info is not None for result in func._schema.returns)
            writes = any(written for _, written in arguments_of(func))
            alias = aliasing[func] = (returns_alias, returns_alias and not writes)
        return alias

    def add_extents(value, out, host_out):
        """Appends the bytes (see _extent) of each CUDA tensor in value (a tensor or a list of them) to out, and
        for each CPU tensor in pinned memory (which copies to and from the GPU touch) to host_out."""
        if isinstance(value, Tensor):
            if value.is_cuda:
                extent = _extent(value)
                if extent:
                    out.append(extent)
            elif value.device.type == "cpu":
                try:
                    pinned = value.numel() > 0 and _is_pinned(value)
                except Exception:  # a forked worker without CUDA, a tensor without storage: not the GPU's
                    pinned = False
                if pinned:
                    extent = _extent(value)
                    if extent:
                        host_out.append(extent)
        elif isinstance(value, (list, tuple)):
            for item in value:
                add_extents(item, out, host_out)

    # Caching-allocator blocks: torch reports each block it hands out and takes back (the hooks CSAN uses).
    # A block handed out during an op is recorded when the op returns it as an output, which gives its size,
    # its stream and the line that created it; blocks an op uses internally and frees are not recorded.
    new_blocks = {}  # thread -> blocks handed out since that thread's op began
    live_blocks = {}  # address -> block id
    next_block = [1]
    raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)

    def on_block_alloc(address):
        blocks = new_blocks.get(get_thread())
        if blocks is not None:
            blocks.append(address)

    def on_block_free(address):
        block = live_blocks.pop(address, None)
        if block is not None:
            emit('{"type":"free","id":%d,"free_kind":"pool_block","src":%s}' % (block, lines.at()))
        else:
            blocks = new_blocks.get(get_thread())
            if blocks and address in blocks:
                blocks.remove(address)

    def record_new_blocks(blocks, out, src):
        """Records each block handed out during the op that the op returns (out: its outputs)."""
        for value in out if isinstance(out, (list, tuple)) else (out,):
            if isinstance(value, Tensor) and value.is_cuda:
                address = value.data_ptr()
                if address in blocks:
                    blocks.remove(address)
                    block = next_block[0]
                    next_block[0] += 1
                    live_blocks[address] = block
                    stream = raw_stream(value.device.index) if raw_stream else 0
                    emit('{"type":"alloc","id":%d,"addr":%d,"size":%d,"alloc_kind":"pool_block","src":%s%s}' % (
                        block, address, value.untyped_storage().nbytes(), src,
                        ',"stream":%d' % stream if stream else ""))
        del blocks[:]

    blocks_recorded = False
    try:
        gpu_trace = importlib.import_module("torch.cuda._gpu_trace")
        gpu_trace.register_callback_for_memory_allocation(on_block_alloc)
        gpu_trace.register_callback_for_memory_deallocation(on_block_free)
        _quiet_unobserved_gpu_trace_hooks(gpu_trace)
        torch._C._activate_gpu_trace()
        blocks_recorded = True
    except Exception as error:
        _say_no_blocks(error)
    if blocks_recorded:
        try:
            _checkpoint_recomputes_to_the_end()
        except Exception:
            pass  # a torch without activation checkpointing

    is_pinned = torch.ops.aten.is_pinned.default

    class StreamtraceMode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is is_pinned:
                # A question about memory, asked by the recording of .numpy() and .tolist() too.
                return func(*args, **(kwargs or {}))
            begin()
            thread = get_thread()
            blocks = new_blocks.get(thread)
            if blocks is None:
                if blocks_recorded:
                    blocks = new_blocks[thread] = []
            elif blocks:
                del blocks[:]  # handed out outside any op: not attributable
            out = None
            try:
                out = func(*args, **(kwargs or {}))
                return out
            finally:
                # Extents are taken once the op has run: an op that resizes its output moves it.
                reads, writes, host_reads, host_writes = [], [], [], []
                no_byte = _touches_no_byte(torch, func._schema.name)
                shape_only = _SHAPE_ONLY_ARGUMENTS.get(func._schema.name, ())
                corrections = _SCHEMA_CORRECTIONS.get(func._schema.name)
                for index, written in () if no_byte else arguments_of(func):
                    value = argument_value(func, args, kwargs, index)
                    if value is not None:
                        if corrections:
                            written = _writes_argument(corrections, index, written,
                                                       lambda i: argument_value(func, args, kwargs, i))
                        if written:
                            add_extents(value, writes, host_writes)
                        elif index not in shape_only:
                            add_extents(value, reads, host_reads)
                returns_alias, view = outputs_alias(func)
                view = view or no_byte
                if not (returns_alias or no_byte):  # a view touches no byte; an in-place op's are counted
                    add_extents(out, writes, host_writes)
                src = lines.at()
                if blocks:
                    record_new_blocks(blocks, out, src)
                group = process_group_of(func, args, kwargs)
                end('{"type":"op_end","name":"%s","reads":[%s],"writes":[%s],"src":%s%s}' % (
                    func.__name__, ",".join(reads), ",".join(writes), src,
                    ',"process_group":%s' % json.dumps(group) if group else ""))
                if (host_reads or host_writes) and not (reads or writes or view):
                    # A CPU op on pinned memory: the host itself read or wrote it (rule 12). In an op with CUDA
                    # tensors too (a copy to or from the GPU) the pinned bytes are the copy's, not the host's.
                    emit('{"type":"host_access","name":"%s","reads":[%s],"writes":[%s],"src":%s}' % (
                        func.__name__, ",".join(host_reads), ",".join(host_writes), src))

    # Dispatch modes are per thread: every thread started from now on enters one before it runs.
    bootstrap_inner = getattr(threading.Thread, "_bootstrap_inner", None)
    if bootstrap_inner is not None:
        def run_recorded(thread):
            try:
                StreamtraceMode().__enter__()
            except Exception:
                pass  # this thread's ops stay at tier T1
            bootstrap_inner(thread)

        threading.Thread._bootstrap_inner = run_recorded
    else:
        _say("ops on threads other than the main one stay at tier T1 (no Thread._bootstrap_inner)")

    mode = StreamtraceMode()
    try:
        mode.__enter__()
    except Exception as error:
        _say("cannot enter the recording dispatch mode (%s): capture stays at tier T1" % error)
        return None
    return mode


class _NativeRegions:
    """Python code running inside an op, to the native observer: it observes the ops that code runs."""

    def __init__(self, observer):
        self.enter = observer.streamtrace_torch_python_enter
        self.enter.argtypes = ()
        self.enter.restype = ctypes.c_int
        self.exit = observer.streamtrace_torch_python_exit
        self.exit.argtypes = (ctypes.c_int,)
        self.exit.restype = None
        self.own_classes = ()


class _ModeRegions:
    """Python code running inside an op, to the Python dispatch mode. The mode records an op from inside its
    __torch_dispatch__, where torch has taken it off the thread's mode stack until the op returns: Python code
    that the op runs (a subclass's __torch_dispatch__, a Python kernel) enters a mode again for its own ops. Where
    the mode is on the stack already (a pack hook runs above the dispatch mode's key), nothing changes."""

    def __init__(self, torch, mode_class):
        from torch.utils._python_dispatch import _get_current_dispatch_mode_stack
        self.own_classes = (mode_class,)

        def enter():
            if any(isinstance(mode, mode_class) for mode in _get_current_dispatch_mode_stack()):
                return None
            mode = mode_class()
            mode.__enter__()
            return mode

        def exit(mode):
            if mode is not None:
                mode.__exit__(None, None, None)

        self.enter, self.exit = enter, exit


# torch's own dispatch classes that only trace with fake tensors (torch.compile, export): their Python code
# launches no kernel, and observing its ops would only slow compilation down.
_TRACING_ONLY = frozenset((
    "torch._subclasses.fake_tensor.FakeTensorMode", "torch._subclasses.fake_tensor.FakeTensor",
    "torch.fx.experimental.proxy_tensor.ProxyTorchDispatchMode",
    "torch._subclasses.functional_tensor.FunctionalTensorMode",
    "torch._subclasses.functional_tensor.FunctionalTensor",
))


def _observe_python_inside_ops(torch, regions):
    """Python code that runs inside an op runs ops of its own, whose kernels are theirs and not the enclosing op's
    (a saved-tensor hook that clones a tensor must not look like a write of the op's output). Brackets each way
    torch calls Python from inside an op with the recorder's regions (regions.enter() before, regions.exit(what it
    returned) after): saved-tensor hooks, the __torch_dispatch__ of tensor subclasses and dispatch modes, and
    Python kernels of ops (torch.library, custom ops). Custom autograd Functions and backward hooks run between
    ops, not inside one, and need nothing. Nothing here runs per op: only where torch calls such code."""
    import functools

    enter, exit = regions.enter, regions.exit

    def inside(function):
        """function, run as Python code inside an op."""
        if getattr(function, "_streamtrace_inside_op", False):
            return function

        @functools.wraps(function)
        def run(*args, **kwargs):
            entered = enter()
            try:
                return function(*args, **kwargs)
            finally:
                exit(entered)

        run._streamtrace_inside_op = True
        return run

    # Saved-tensor hooks: pack hooks run inside the op that saves its tensors for backward.
    autograd = torch._C._autograd
    push_hooks = autograd._push_saved_tensors_default_hooks

    def push_hooks_inside(pack_hook, unpack_hook):
        return push_hooks(inside(pack_hook), inside(unpack_hook))

    functools.update_wrapper(push_hooks_inside, push_hooks)
    autograd._push_saved_tensors_default_hooks = push_hooks_inside
    if getattr(torch.autograd, "_push_saved_tensors_default_hooks", None) is push_hooks:
        torch.autograd._push_saved_tensors_default_hooks = push_hooks_inside

    # __torch_dispatch__ of tensor subclasses and dispatch modes, defined now or later.
    from torch.utils._python_dispatch import TorchDispatchMode

    disabled = getattr(torch._C, "_disabled_torch_dispatch_impl", None)  # says "no Python dispatch": kept as it is

    def bracket_dispatch(cls):
        raw = cls.__dict__.get("__torch_dispatch__")
        if raw is None or raw is disabled or cls in regions.own_classes or \
                "%s.%s" % (cls.__module__, cls.__qualname__) in _TRACING_ONLY:
            return
        if isinstance(raw, (classmethod, staticmethod)):
            cls.__torch_dispatch__ = type(raw)(inside(raw.__func__))
        elif callable(raw):
            cls.__torch_dispatch__ = inside(raw)

    def subclasses(root):
        found, pending = [], list(root.__subclasses__())
        while pending:
            cls = pending.pop()
            found.append(cls)
            pending.extend(cls.__subclasses__())
        return found

    for root in (torch.Tensor, TorchDispatchMode):
        for cls in subclasses(root):
            bracket_dispatch(cls)

    tensor_init_subclass = torch.Tensor.__dict__.get("__init_subclass__")

    def tensor_subclass_defined(cls, **kwargs):
        if tensor_init_subclass is not None:
            tensor_init_subclass.__func__(cls, **kwargs)
        else:
            super(torch.Tensor, cls).__init_subclass__(**kwargs)
        bracket_dispatch(cls)

    torch.Tensor.__init_subclass__ = classmethod(tensor_subclass_defined)

    mode_init_subclass = TorchDispatchMode.__dict__.get("__init_subclass__")

    def mode_subclass_defined(cls, **kwargs):
        bracket_dispatch(cls)  # first: torch's own hook then wraps the bracketed function (dynamo stays out)
        if mode_init_subclass is not None:
            mode_init_subclass.__func__(cls, **kwargs)
        else:
            super(TorchDispatchMode, cls).__init_subclass__(**kwargs)

    TorchDispatchMode.__init_subclass__ = classmethod(mode_subclass_defined)

    # Python kernels of ops: torch.library's Library.impl registers them all (custom_op's among them). Meta
    # kernels only compute shapes; a fallthrough is no kernel and must stay the very function torch knows.
    library = getattr(torch.library, "Library", None)
    fallthrough = getattr(torch.library, "fallthrough_kernel", None)
    if library is not None:
        impl = library.impl

        def impl_inside(self, op_name, fn, *args, **kwargs):
            dispatch_key = args[0] if args else kwargs.get("dispatch_key", "")
            if callable(fn) and fn is not fallthrough and dispatch_key != "Meta":
                fn = inside(fn)
            return impl(self, op_name, fn, *args, **kwargs)

        library.impl = functools.wraps(impl)(impl_inside)


def _bracket_ordering_calls(torch, emit, lines):
    """Brackets the calls that order streams or the host with call_begin/call_end, so that the CUDA calls inside
    take their Python line. Returns bracket(name, method, args, kwargs), which runs one call so bracketed."""
    in_call = threading.local()  # set while a bracketed call runs: calls it makes are not bracketed again

    def bracket(name, method, args, kwargs):
        if getattr(in_call, "active", False):
            return method(*args, **kwargs)
        emit('{"type":"call_begin","name":"%s","src":%s}' % (name, lines.at(3)))
        in_call.active = True
        try:
            return method(*args, **kwargs)
        finally:
            in_call.active = False
            emit('{"type":"call_end"}')

    def bracketed(name, method):
        """method, recording a call_begin named `name` with the caller's line, and a call_end."""
        def call(*args, **kwargs):
            return bracket(name, method, args, kwargs)
        call.__name__ = getattr(method, "__name__", "call")
        call.__doc__ = getattr(method, "__doc__", None)
        return call

    cuda = torch.cuda
    owners = [
        (cuda.Event, "Event.", ("record", "wait", "synchronize", "query")),
        (cuda.Stream, "Stream.", ("wait_event", "wait_stream", "record_event", "synchronize", "query")),
        (cuda, "torch.cuda.", ("synchronize",)),
        # Graph capture and replay: a replay's launch and a capture's begin and end take the user's line.
        (getattr(cuda, "CUDAGraph", None), "CUDAGraph.", ("capture_begin", "capture_end", "replay")),
    ]
    # torch.distributed's work handles: `work.wait()` makes the current stream wait for the collective.
    owners.append((getattr(getattr(torch._C, "_distributed_c10d", None), "Work", None), "Work.", ("wait",)))
    for owner, prefix, names in owners:
        if owner is None:
            continue
        for name in names:
            method = getattr(owner, name, None)
            if method is not None:
                try:
                    setattr(owner, name, bracketed(prefix + name, method))
                except (AttributeError, TypeError) as error:  # a type that takes no new attributes
                    _say("%s%s keeps no Python line (%s)" % (prefix, name, error))
    return bracket


def _record_triton_launches(torch, begin, end, lines, bracket, as_ops):
    """Triton kernels are no dispatcher ops: each launch, torch.compile's (Inductor's CachingAutotuner) and a
    hand-written kernel's (JITFunction.run), is recorded as an op of its own (streamtrace_launch_ops.py, beside
    this file). Without `as_ops` they keep tier T1, and a hand-written kernel's launch is bracketed for its line."""
    launch_ops = _load_beside("streamtrace_launch_ops")
    nesting = launch_ops.LaunchNesting()  # one for both: a launch inside a recorded one is part of it

    def hand_written(triton):
        from triton.runtime.jit import JITFunction

        lines.add_library_dir(os.path.dirname(triton.__file__))  # the user's line, not Triton's launcher
        if as_ops:
            launch_ops.record_triton_launches(torch, JITFunction, begin, end, lines, nesting, bracket)
        else:
            launch_ops.bracket_triton_launches(JITFunction, bracket)

    if as_ops:
        after_import("torch._inductor.runtime.triton_heuristics",
                     lambda heuristics: launch_ops.record_inductor_launches(torch, heuristics, begin, end, lines,
                                                                            nesting),
                     "torch.compile's Triton kernels keep tier T1 (each pointer argument may write its whole block)")
    after_import("triton", hand_written, "Triton launches keep tier T1 (each pointer argument may write its whole "
                                         "block)")


class _AfterImport(importlib.abc.MetaPathFinder):
    """Waits for `import <name>` to finish, then calls install(module); says `what` failed if it raises."""

    def __init__(self, name, install, what):
        self.name, self.install, self.what = name, install, what

    def find_spec(self, name, path, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        original = spec.loader.exec_module

        def exec_module(module):
            original(module)
            try:
                self.install(module)
            except Exception as error:  # recording must never break the program
                _say("%s (%s)" % (self.what, error))

        spec.loader.exec_module = exec_module
        return spec


def after_import(name, install, what):
    """Runs install(module) once `name` is imported, or now if it already is."""
    if name in sys.modules:
        try:
            install(sys.modules[name])
        except Exception as error:
            _say("%s (%s)" % (what, error))
    else:
        sys.meta_path.insert(0, _AfterImport(name, install, what))


if os.environ.get("CUDA_INJECTION64_PATH") and os.environ.get("STREAMTRACE_OUTPUT"):
    after_import("torch", _install, "PyTorch recording failed to start: capture stays at tier T1")
_chain_sitecustomize()
