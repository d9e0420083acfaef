"""Triton launches recorded as ops (tier T2), for the PyTorch bootstrap (sitecustomize.py, beside this file).

A Triton kernel is no dispatcher op: the native observer never sees it, and at tier T1 each of its pointer
arguments stands for a write of its whole allocator block, so two streams that only read one weight, or write two
halves of one tensor, would race. Each launch is recorded here as an op of its own instead (an op_begin_unsited,
then an op_end naming what it reads and writes and the user's line), so that its kernel takes those sets:
- torch.compile's generated kernels, launched by Inductor's CachingAutotuner: Inductor's argument names say
  which buffers a kernel only loads (record_inductor_launches);
- hand-written kernels launched through `JITFunction.run` (`kernel[grid](...)`, under `triton.autotune` and
  `triton.heuristics` too): the Triton IR of the kernel the launch compiled says which arguments it loads from
  and which it stores to (streamtrace_triton_ir.py); where there is no IR to read, PyTorch's own analysis of it,
  the one torch.compile runs on a user's kernels (record_triton_launches).
A launch with an argument that is neither a CUDA tensor nor a number (a TMA tensor descriptor, a host tensor)
keeps tier T1: its kernel reaches memory that no tensor argument names.
"""
import importlib.util
import inspect
import logging
import os
import threading


def _beside(name):
    """A module of the bootstrap's folder, loaded from its file (the folder is no package)."""
    spec = importlib.util.spec_from_file_location(
        "_streamtrace_" + name, os.path.join(os.path.dirname(os.path.abspath(__file__)), "streamtrace_%s.py" % name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


triton_ir = _beside("triton_ir")

# Arguments of a kernel that are no memory (sizes, strides, seeds, flags).
_SCALARS = (int, float, bool, type(None))


class LaunchNesting(threading.local):
    """Whether a recorded launch is running on this thread: a launch inside it (an autotuner's benchmark, a
    launcher calling another) is part of it."""
    active = False


def _as_op(begin, end, nesting, run, args, kwargs, record_of):
    """Runs run(*args, **kwargs) as one op, ended by the record record_of(what run returned; None when it raised).
    Recording never breaks the launch: a begin that fails leaves the launch outside any op, an end that fails
    leaves the launch's own outcome standing."""
    try:
        begin()
    except Exception:
        return run(*args, **kwargs)
    nesting.active = True
    result = None
    try:
        result = run(*args, **kwargs)
        return result
    finally:
        nesting.active = False
        try:
            end(record_of(result))
        except Exception:
            pass


def _op_end(name, reads, writes, src):
    return '{"type":"op_end","name":"%s","reads":[%s],"writes":[%s],"src":%s}' % (
        name, ",".join(reads), ",".join(writes), src)


# ---- torch.compile's generated kernels ---------------------------------------------------------------------

# The kinds of Inductor's kernels whose code its KernelArgs wrote: a buffer such a kernel stores to is named
# `out_ptrN` or `in_out_ptrN`, never `in_ptrN`. Templates (matmul, flex attention, whose backward adds into
# buffers named as inputs) and foreach kernels (autotuned as templates) and a user's Triton kernels are not held
# to it.
_GENERATED_KINDS = frozenset(("POINTWISE", "REDUCTION", "PERSISTENT_REDUCTION", "SPLIT_SCAN"))


def inductor_argument_roles(kind, custom, arg_names, mutated_arg_names, count):
    """Which of a kernel's first `count` arguments it only reads, for a kernel of Inductor's heuristic `kind`
    (the name of its HeuristicType), `custom` when it is a user's: the buffers a generated kernel (_GENERATED_KINDS)
    only loads are named `in_ptrN`, unless `mutated_arg_names` lists them. Any other kernel may write each of its
    buffers."""
    if custom or kind not in _GENERATED_KINDS:
        return (False,) * count
    mutated = frozenset(mutated_arg_names or ())
    return tuple(index < len(arg_names) and arg_names[index].startswith("in_ptr") and arg_names[index] not in mutated
                 for index in range(count))


def record_inductor_launches(torch, heuristics, begin, end, lines, nesting):
    """Records each launch through Inductor's `CachingAutotuner.run` as an op named after its kernel: the storages
    of the tensors it only reads (inductor_argument_roles), the storages of the ones it writes, and the user's
    line that ran the compiled code. Whole storages, not views: a generated kernel indexes its buffers by the
    layouts it was compiled for."""
    Tensor = torch.Tensor
    autotuner = heuristics.CachingAutotuner
    run = autotuner.run
    generated_roots = set()  # folders of generated code counted as library code

    def generated_code_is_library(root):
        """The line of an op or launch in the generated code's files is the user's that ran them."""
        root = root and os.path.abspath(root)
        if root and root not in generated_roots:
            generated_roots.add(root)
            lines.add_library_dir(root)

    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
        # Where Inductor's cache_dir() puts them, read without calling it: it sets the variable and makes the folder.
        generated_code_is_library(os.environ.get("TORCHINDUCTOR_CACHE_DIR") or default_cache_dir())
    except Exception:
        pass  # each kernel's module says where (roles)

    def roles(tuner, count):
        cached = tuner.__dict__.get("_streamtrace_roles")
        if cached is None or len(cached) != count:
            meta = getattr(tuner, "inductor_meta", None) or {}
            mutated = getattr(tuner, "mutated_arg_names", None) or meta.get("mutated_arg_names", ())
            kind = getattr(getattr(tuner, "heuristic_type", None), "name", None)
            custom = getattr(tuner, "custom_kernel", False)
            cached = inductor_argument_roles(kind, custom, tuner.fn.arg_names, mutated, count)
            tuner._streamtrace_roles = cached
            # A module of generated code is CACHE/xy/cxy....py, named by its hash (a cache other than the one
            # at start: a temporary cache directory); a file named otherwise is no cache's.
            folder, name = os.path.split(getattr(tuner, "filename", None) or "")
            if len(name) > 40 and name.endswith(".py") and os.path.basename(folder) == name[1:3]:
                generated_code_is_library(os.path.dirname(folder))
        return cached

    def op_record(tuner, args):
        """The launch's op_end record, or None where its arguments cannot say what it touches."""
        reads, writes = [], []
        for arg, read_only in zip(args, roles(tuner, len(args))):
            if isinstance(arg, Tensor) and arg.is_cuda:
                storage = arg.untyped_storage()
                size = storage.nbytes()
                if size:
                    (reads if read_only else writes).append("[%d,%d]" % (storage.data_ptr(), size))
            elif not isinstance(arg, _SCALARS):
                return None
        return _op_end(tuner.fn.__name__, reads, writes, lines.at(3))

    def recorded_run(self, *args, **kwargs):
        record = None
        if not nesting.active:
            try:
                record = op_record(self, args)
            except Exception:
                pass  # this launch keeps tier T1
        if record is None:
            return run(self, *args, **kwargs)
        return _as_op(begin, end, nesting, run, (self,) + args, kwargs, lambda _: record)

    recorded_run.__name__, recorded_run.__doc__ = run.__name__, run.__doc__
    autotuner.run = recorded_run


# ---- Hand-written kernels ----------------------------------------------------------------------------------

def kernel_name(kernel):
    """A JITFunction's name: its Python function's."""
    return getattr(kernel, "__name__", None) or getattr(getattr(kernel, "fn", None), "__name__", None) or "kernel"


def bracket_triton_launches(jit_function, bracket):
    """Leaves each launch through `jit_function.run` at tier T1, bracketed by `bracket(name, run, args, kwargs)`
    as `triton <kernel>` so that it takes the Python line of the launch."""
    run = jit_function.run

    def bracketed_run(self, *args, **kwargs):
        return bracket("triton " + kernel_name(self), run, (self,) + args, kwargs)

    bracketed_run.__name__, bracketed_run.__doc__ = run.__name__, run.__doc__
    jit_function.run = bracketed_run


def element_bounds(shape, strides):
    """How far a view's lowest and highest elements lie from its first one, in elements (strides in elements; a
    view with no element has none)."""
    low = high = 0
    for n, stride in zip(shape, strides):
        if stride < 0:
            low += (n - 1) * stride
        else:
            high += (n - 1) * stride
    return low, high


def _span(tensor):
    """The bytes from a CUDA tensor's lowest element to its highest, as an item of a reads or writes list, or None
    when it has none. The whole span, not a strided view's elements: a kernel is handed the first element's
    address and may index any element the view's strides reach."""
    if tensor.is_contiguous():
        size = tensor.numel() * tensor.element_size()
        return "[%d,%d]" % (tensor.data_ptr(), size) if size else None
    shape = tensor.shape
    if 0 in shape:
        return None
    low, high = element_bounds(shape, tensor.stride())
    element = tensor.element_size()
    return "[%d,%d]" % (tensor.data_ptr() + low * element, (high - low + 1) * element)


def _specialization(value, constexpr):
    """What of an argument's value can change the kernel's code, and so what it reads and writes: a constexpr's
    value, whether an int is 1 (Triton makes it a constant) and whether it needs 64 bits, whether an argument is
    None, a tensor's element type (code may branch on it); not sizes or addresses."""
    if constexpr:
        try:
            hash(value)
            return ("constexpr", value)
        except TypeError:
            return ("constexpr", repr(value))
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return (value == 1, -2 ** 31 <= value < 2 ** 31)
    return (type(value).__name__, str(getattr(value, "dtype", "")))


class KernelArguments:
    """A JITFunction's parameters, read once: their names, which are constexprs, and their defaults."""

    def __init__(self, kernel):
        params = kernel.params
        self.names = [param.name for param in params]
        self.constexpr = [bool(param.is_constexpr) for param in params]
        empty = inspect.Parameter.empty
        self.defaults = [param.default if getattr(param, "has_default", param.default is not empty) else empty
                         for param in params]
        self.accesses = {}  # specialization -> (names read, names written), or None: every tensor written

    def bound(self, args, kwargs):
        """Every parameter's value for a launch with these arguments (launch options in kwargs left out), or None
        where they do not bind (Triton will say why)."""
        if len(args) > len(self.names):
            return None
        values = list(args)
        for index in range(len(args), len(self.names)):
            value = kwargs.get(self.names[index], self.defaults[index])
            if value is inspect.Parameter.empty:
                return None
            values.append(value)
        return values


class _QuietOnThisThread(logging.Filter):
    """Drops a logger's records on the thread that analyzes a kernel: PyTorch warns when its analysis gives up
    (then every tensor counts as written), which the program did not ask for."""

    def __init__(self):
        super().__init__()
        self.state = threading.local()

    def filter(self, record):
        return not getattr(self.state, "on", False)


def triton_access_analysis(torch, wrap=None):
    """analyze(kernel, arguments by name) -> (names read, names written), from PyTorch's analysis of the kernel's
    Triton IR for these arguments (torch._higher_order_ops.triton_kernel_wrap, or `wrap`; about 10 ms a kernel,
    and importing it, with the parts of Dynamo and Inductor it needs, 3-4 s at the first launch on the GPU
    machine); None where this torch has none. Where the analysis says only
    what is written (identify_mutated_tensors, in the torch releases before identify_accessed_tensors), every other
    tensor counts as read."""
    if wrap is None:
        from torch._higher_order_ops import triton_kernel_wrap as wrap

    quiet = _QuietOnThisThread()
    if isinstance(getattr(wrap, "log", None), logging.Logger):
        wrap.log.addFilter(quiet)

    def quietly(identify, *args):
        quiet.state.on = True
        try:
            return identify(*args)
        finally:
            quiet.state.on = False

    accessed = getattr(wrap, "identify_accessed_tensors", None)
    if accessed is not None:
        def analyze(kernel, arguments):
            found = quietly(accessed, kernel, arguments, {}).read_writes
            return frozenset(dep.name for dep in found.reads), frozenset(dep.name for dep in found.writes)
        return analyze
    mutated = getattr(wrap, "identify_mutated_tensors", None)
    if mutated is None:
        return None
    takes_descriptors = len(inspect.signature(mutated).parameters) >= 3

    def analyze_writes(kernel, arguments):
        written = frozenset(quietly(mutated, kernel, arguments, {}) if takes_descriptors
                            else quietly(mutated, kernel, arguments))
        tensors = frozenset(name for name, value in arguments.items() if isinstance(value, torch.Tensor))
        return tensors - written, written
    return analyze_writes


def _compiled_ttir(compiled, parameters):
    """(the Triton IR text, the Python names of its function's arguments in order) of what JITFunction.run
    returned (a CompiledKernel: its IR, and the signature it was compiled for, whose parameters other than its
    constexprs are the IR function's arguments), or None. The signature must name the kernel's `parameters`, in
    order, as Triton 3 does (older Triton keyed it by place, and left constexprs out)."""
    asm = getattr(compiled, "asm", None)
    signature = getattr(getattr(compiled, "src", None), "signature", None)
    if asm is None or not isinstance(signature, dict) or list(signature) != list(parameters):
        return None
    try:
        text = asm["ttir"]
    except Exception:
        return None
    kinds = list(signature.values())
    if not isinstance(text, str) or any(not isinstance(kind, str) or kind.startswith("(") for kind in kinds):
        return None  # a tuple parameter is several arguments in the IR
    return text, [name for name, kind in signature.items() if kind != "constexpr"]


def record_triton_launches(torch, jit_function, begin, end, lines, nesting, bracket, analysis=None):
    """Records each launch through `jit_function.run` (Triton's JITFunction) as an op named after the kernel:
    the spans of the CUDA tensors it loads from and of those it stores to, and the user's line of the launch.
    What a kernel loads and stores is read once for each compiled kernel, from the Triton IR of the kernel the
    launch compiled (triton_ir.ttir_accesses); where a launch returns no IR to read (a Triton without the
    signature this reading needs), by `analysis` (triton_access_analysis's by default). A launch
    whose arguments cannot say what it touches keeps tier T1, bracketed by `bracket(name, run, args, kwargs)` so
    that it still takes the Python line. A warm-up (compiling without launching) records nothing."""
    Tensor = torch.Tensor
    run = jit_function.run
    analyzers = []  # PyTorch's analysis, made when first needed: importing it costs seconds

    def analyzed(kernel, facts, values):
        """PyTorch's analysis of the kernel for these arguments, or None."""
        if not analyzers:
            try:
                analyzers.append(analysis or triton_access_analysis(torch))
            except Exception:
                analyzers.append(None)
        if analyzers[0] is None:
            return None
        try:
            return analyzers[0](kernel, dict(zip(facts.names, values)))
        except Exception:
            return None  # every tensor counts as written

    def accesses(kernel, facts, values, compiled):
        """(names read, names written) of this launch's kernel, or None: every tensor counts as written. Read once
        for each compiled kernel (by its hash; else by the launch's specialization)."""
        if compiled is None:
            return None  # the launch failed, or compiles elsewhere: nothing to read, and nothing kept
        key = getattr(compiled, "hash", None)
        if not isinstance(key, str):
            key = tuple([_specialization(value, constexpr) for value, constexpr in zip(values, facts.constexpr)])
        found = facts.accesses.get(key, False)
        if found is False:
            ir = _compiled_ttir(compiled, facts.names)
            if ir is None:
                found = analyzed(kernel, facts, values)  # no IR to read here: PyTorch's analysis
            else:
                found = triton_ir.ttir_accesses(*ir)
                if isinstance(found, triton_ir.Unfollowed):
                    found = None
            facts.accesses[key] = found
        return found

    def launch_facts(kernel, args, kwargs):
        """(the kernel's parameters, their values, [(name, span)] of its tensors), or None where its arguments
        cannot say what it touches."""
        facts = kernel.__dict__.get("_streamtrace_arguments")
        if facts is None:
            facts = kernel._streamtrace_arguments = KernelArguments(kernel)
        values = facts.bound(args, kwargs)
        if values is None:
            return None
        spans = []
        for name, value, constexpr in zip(facts.names, values, facts.constexpr):
            if constexpr or isinstance(value, _SCALARS):
                continue
            if not (isinstance(value, Tensor) and value.is_cuda):
                return None
            span = _span(value)
            if span is not None:
                spans.append((name, span))
        return facts, values, spans

    def op_record(kernel, launch, src, compiled):
        """The launch's op_end record."""
        facts, values, spans = launch
        try:
            found = accesses(kernel, facts, values, compiled)
        except Exception:
            found = None
        reads, writes = [], []
        for name, span in spans:
            if found is None or name in found[1]:
                writes.append(span)
            elif name in found[0]:
                reads.append(span)
        return _op_end(kernel_name(kernel), reads, writes, src)

    def recorded_run(self, *args, **kwargs):
        if nesting.active or kwargs.get("warmup"):
            return run(self, *args, **kwargs)
        try:
            launch = launch_facts(self, args, kwargs)
            src = lines.at(2)
        except Exception:
            launch = None
        if launch is None:
            return bracket("triton " + kernel_name(self), run, (self,) + args, kwargs)
        # What run returns is the compiled kernel, whose IR says what it touches (None when the launch raised).
        return _as_op(begin, end, nesting, run, (self,) + args, kwargs,
                      lambda compiled: op_record(self, launch, src, compiled))

    recorded_run.__name__, recorded_run.__doc__ = run.__name__, run.__doc__
    jit_function.run = recorded_run
