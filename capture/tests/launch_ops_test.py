"""How the PyTorch bootstrap records Triton's launches as ops (capture/python/streamtrace_launch_ops.py), without
torch or a GPU: stand-ins for Inductor's CachingAutotuner, Triton's JITFunction and torch's tensors, and the
capture library's op entry points replaced by a list. Run by launch_ops.rs beside this file (`cargo test -p
streamtrace-capture --test launch_ops`), or alone: `python3 capture/tests/launch_ops_test.py`. The reading of
Triton IR itself is tested in triton_ir_test.py, with real Triton and torch where they are installed.
"""
import enum
import inspect
import json
import sys
import types
import unittest

from bootstrap_modules import load
from triton_ir_test import MATMUL_TTIR, kernel_ttir

launch_ops = load("streamtrace_launch_ops")


class Storage:
    def __init__(self, address, size):
        self.address, self.size = address, size

    def data_ptr(self):
        return self.address

    def nbytes(self):
        return self.size


class Tensor:
    """A view into a storage (`shape` and `stride` in elements, contiguous unless given): Inductor's recording takes
    the whole storage, a hand-written kernel's the view's span."""

    def __init__(self, address, size, cuda=True, shape=None, stride=None, element=4, storage_size=None):
        self.storage = Storage(address, size if storage_size is None else storage_size)
        self.address, self.is_cuda, self.element = address, cuda, element
        self.shape = tuple(shape) if shape is not None else (size // element,)
        contiguous, step = [], 1
        for n in reversed(self.shape):
            contiguous.insert(0, step)
            step *= n
        self.strides = tuple(stride) if stride is not None else tuple(contiguous)
        self.contiguous = self.strides == tuple(contiguous)

    def untyped_storage(self):
        return self.storage

    def data_ptr(self):
        return self.address

    def is_contiguous(self):
        return self.contiguous

    def numel(self):
        count = 1
        for n in self.shape:
            count *= n
        return count

    def element_size(self):
        return self.element

    def stride(self):
        return self.strides

    @property
    def nbytes(self):
        return self.numel() * self.element


class Descriptor:
    """A tensor descriptor (TMA): no tensor, though the kernel reaches memory through it."""


class JitFunction:
    def __init__(self, name, arg_names):
        self.__name__, self.arg_names = name, arg_names


HeuristicType = enum.Enum("HeuristicType", "PERSISTENT_REDUCTION POINTWISE REDUCTION SPLIT_SCAN TEMPLATE "
                                            "USER_AUTOTUNE FIXED")


class CachingAutotuner:
    """What the recording reads of Inductor's autotuner: its kernel's argument names, the buffers it mutates, its
    kind, whether it is a user's kernel, its module's file, and `run(*args, stream)`, which launches (here: notes
    the launch, and runs `inner` inside it if given)."""

    def __init__(self, name, arg_names, mutated_arg_names=(), inner=None, fails=False,
                 kind=HeuristicType.POINTWISE, custom=False, filename=None):
        self.fn = JitFunction(name, arg_names)
        self.mutated_arg_names = list(mutated_arg_names)
        self.inductor_meta = {}
        self.heuristic_type, self.custom_kernel = kind, custom
        if filename is not None:
            self.filename = filename
        self.inner, self.fails = inner, fails

    def run(self, *args, stream):
        events.append(("launch", self.fn.__name__))
        if self.inner is not None:
            self.inner.run(Tensor(0x9000, 64), stream=stream)
        if self.fails:
            raise RuntimeError("launch failed")
        return "result of " + self.fn.__name__


class Lines:
    """The bootstrap's _SourceLines, whose line here is the name of the function `depth` frames out."""

    def __init__(self):
        self.library_dirs = []

    def add_library_dir(self, path):
        self.library_dirs.append(path)

    def at(self, depth=2):
        return '"%s:1"' % sys._getframe(depth).f_code.co_name


events = []  # ("begin",), ("launch", name), ("end", record as JSON)


def begin():
    events.append(("begin",))
    return 0


def end(record):
    events.append(("end", json.loads(record)))
    return 0


def install(lines=None, nesting=None):
    heuristics = types.SimpleNamespace(CachingAutotuner=type("CachingAutotuner", (CachingAutotuner,), {}))
    launch_ops.record_inductor_launches(types.SimpleNamespace(Tensor=Tensor), heuristics, begin, end, lines or Lines(),
                                        nesting or launch_ops.LaunchNesting())
    return heuristics.CachingAutotuner


class InductorLaunches(unittest.TestCase):
    def setUp(self):
        del events[:]
        self.Autotuner = install()

    def test_inputs_only_loaded_are_reads_and_every_other_buffer_a_write(self):
        kernel = self.Autotuner("triton_poi_fused_gelu_0", ["in_out_ptr0", "in_ptr0", "in_ptr1", "out_ptr0",
                                                           "xnumel", "XBLOCK"])
        result = kernel.run(Tensor(0x1000, 256), Tensor(0x2000, 64), Tensor(0x3000, 32), Tensor(0x4000, 128), 64,
                            stream=0)
        self.assertEqual(result, "result of triton_poi_fused_gelu_0")
        self.assertEqual([e[0] for e in events], ["begin", "launch", "end"])
        record = events[2][1]
        self.assertEqual(record["type"], "op_end")
        self.assertEqual(record["name"], "triton_poi_fused_gelu_0")
        self.assertEqual(record["reads"], [[0x2000, 64], [0x3000, 32]])
        self.assertEqual(record["writes"], [[0x1000, 256], [0x4000, 128]])
        # The line of the code that called run (here this test), not of the recording's own frames.
        self.assertEqual(record["src"], "test_inputs_only_loaded_are_reads_and_every_other_buffer_a_write:1")

    def test_a_mutated_input_is_a_write(self):
        kernel = self.Autotuner("triton_poi_fused_add_1", ["in_ptr0", "in_ptr1", "xnumel"], mutated_arg_names=["in_ptr1"])
        kernel.run(Tensor(0x1000, 16), Tensor(0x2000, 16), 4, stream=0)
        record = events[-1][1]
        self.assertEqual(record["reads"], [[0x1000, 16]])
        self.assertEqual(record["writes"], [[0x2000, 16]])

    def test_a_users_kernel_keeps_its_names_and_each_buffer_may_write(self):
        kernel = self.Autotuner("add_kernel", ["x_ptr", "y_ptr", "out_ptr", "n", "BLOCK"],
                                kind=HeuristicType.USER_AUTOTUNE, custom=True)
        kernel.run(Tensor(0x1000, 16), Tensor(0x2000, 16), Tensor(0x3000, 16), 4, stream=0)
        record = events[-1][1]
        self.assertEqual(record["reads"], [])
        self.assertEqual(record["writes"], [[0x1000, 16], [0x2000, 16], [0x3000, 16]])
        # Named as Inductor names inputs, a user's kernel may still store to them.
        named = self.Autotuner("scale_kernel", ["in_ptr0", "out_ptr0"], kind=HeuristicType.POINTWISE, custom=True)
        named.run(Tensor(0x1000, 16), Tensor(0x2000, 16), stream=0)
        self.assertEqual(events[-1][1]["reads"], [])

    def test_templates_and_kernels_of_unknown_kind_may_write_every_buffer(self):
        # Flex attention's backward template adds into buffers it names as inputs.
        for kind in (HeuristicType.TEMPLATE, HeuristicType.FIXED, None):
            kernel = self.Autotuner("triton_tem_fused_flex_0", ["in_ptr0", "in_ptr1", "out_ptr0"], kind=kind)
            kernel.run(Tensor(0x1000, 16), Tensor(0x2000, 16), Tensor(0x3000, 16), stream=0)
            record = events[-1][1]
            self.assertEqual(record["reads"], [], kind)
            self.assertEqual(len(record["writes"]), 3, kind)

    def test_the_generated_codes_cache_is_library_code_and_no_other_folder(self):
        lines = Lines()
        Autotuner = install(lines)
        at_start = list(lines.library_dirs)  # the cache Inductor would use, where torch is there to say
        name = "cqu6fjshymejlljhjgvhczlxz2kpt67gmqowtx2jviz37e46tj36.py"
        Autotuner("triton_poi_0", ["in_ptr0"], filename="/tmp/other_cache/qu/" + name).run(Tensor(1, 1), stream=0)
        # A file named like a module of the cache, outside a folder named by its hash, and a user's file.
        Autotuner("triton_poi_1", ["in_ptr0"], filename="/home/me/project/models/" + name).run(Tensor(1, 1), stream=0)
        Autotuner("triton_poi_2", ["in_ptr0"], filename="/home/me/project/models/net.py").run(Tensor(1, 1), stream=0)
        self.assertEqual(lines.library_dirs, at_start + ["/tmp/other_cache"])

    def test_a_descriptor_or_host_tensor_argument_leaves_the_launch_to_its_pointer_arguments(self):
        kernel = self.Autotuner("triton_tem_fused_mm_0", ["in_ptr0", "desc", "out_ptr0"])
        self.assertEqual(kernel.run(Tensor(0x1000, 16), Descriptor(), Tensor(0x2000, 16), stream=0),
                         "result of triton_tem_fused_mm_0")
        kernel.run(Tensor(0x1000, 16), Tensor(0x5000, 128, cuda=False), Tensor(0x2000, 16), stream=0)
        self.assertEqual([e[0] for e in events], ["launch", "launch"])

    def test_empty_storages_and_scalars_name_no_bytes(self):
        kernel = self.Autotuner("triton_per_fused_sum_2", ["in_ptr0", "out_ptr0", "xnumel", "rnumel", "seed", "flag"])
        kernel.run(Tensor(0x1000, 0), Tensor(0x2000, 8), 1, 2.5, None, True, stream=0)
        record = events[-1][1]
        self.assertEqual(record["reads"], [])
        self.assertEqual(record["writes"], [[0x2000, 8]])

    def test_a_launch_inside_a_recorded_one_is_part_of_it(self):
        inner = self.Autotuner("triton_poi_inner_3", ["out_ptr0"])
        outer = self.Autotuner("triton_poi_outer_4", ["in_ptr0"], inner=inner)
        outer.run(Tensor(0x1000, 16), stream=0)
        self.assertEqual([e[0] for e in events], ["begin", "launch", "launch", "end"])
        self.assertEqual(events[-1][1]["name"], "triton_poi_outer_4")

    def test_a_failing_launch_runs_once_and_still_ends_its_op(self):
        kernel = self.Autotuner("triton_poi_fails_5", ["in_ptr0", "out_ptr0"], fails=True)
        with self.assertRaises(RuntimeError):
            kernel.run(Tensor(0x1000, 16), Tensor(0x2000, 16), stream=0)
        self.assertEqual([e[0] for e in events], ["begin", "launch", "end"])
        # The next launch is recorded again: the failed one left no launch marked as running.
        kernel.fails = False
        kernel.run(Tensor(0x1000, 16), Tensor(0x2000, 16), stream=0)
        self.assertEqual([e[0] for e in events[3:]], ["begin", "launch", "end"])

    def test_the_roles_follow_the_argument_count_of_each_launch(self):
        kernel = self.Autotuner("triton_poi_fused_6", ["in_ptr0", "out_ptr0", "xnumel"])
        kernel.run(Tensor(0x1000, 16), stream=0)
        kernel.run(Tensor(0x1000, 16), Tensor(0x2000, 16), 4, stream=0)
        self.assertEqual(events[2][1]["reads"], [[0x1000, 16]])
        self.assertEqual(events[-1][1]["writes"], [[0x2000, 16]])


class Param:
    """What the recording reads of Triton's KernelParam."""

    def __init__(self, name, constexpr=False, default=inspect.Parameter.empty):
        self.name, self.is_constexpr, self.default = name, constexpr, default
        self.has_default = default is not inspect.Parameter.empty


class JITFunction:
    """What the recording reads of Triton's JITFunction: its parameters and name, and `run(*args, grid, warmup,
    **kwargs)`, which launches (here: notes the launch and its arguments, and runs `inner` inside it if given)."""

    def __init__(self, name, params, inner=None, fails=False):
        self.fn = types.SimpleNamespace(__name__=name)
        self.__name__ = name
        self.params = params
        self.inner, self.fails = inner, fails

    def run(self, *args, grid, warmup, **kwargs):
        events.append(("launch", self.__name__, args, kwargs))
        if self.inner is not None:
            self.inner.run(Tensor(0x9000, 64), grid=grid, warmup=False)
        if self.fails:
            raise RuntimeError("launch failed")
        return getattr(self, "compiled", None) or "kernel of " + self.__name__


class Analysis:
    """A stand-in for PyTorch's analysis of a kernel's Triton IR: by kernel name, the arguments it loads from and
    stores to, given the arguments (so a constexpr may change them); counts what it was asked."""

    def __init__(self, accesses, fails=False):
        self.accesses, self.fails, self.asked = accesses, fails, []

    def __call__(self, kernel, arguments):
        self.asked.append((kernel.__name__, dict(arguments)))
        if self.fails:
            raise RuntimeError("no TTIR")
        return self.accesses(arguments)


def install_triton(analysis, nesting=None, lines=None):
    """JITFunction's run recorded (returned: the stand-in type), with `analysis`; brackets go to events."""
    jit = type("JITFunction", (JITFunction,), {})

    def bracket(name, method, args, kwargs):
        events.append(("bracket", name))
        return method(*args, **kwargs)

    launch_ops.record_triton_launches(types.SimpleNamespace(Tensor=Tensor), jit, begin, end, lines or Lines(),
                                      nesting or launch_ops.LaunchNesting(), bracket, analysis)
    return jit


# A kernel like `y = x * scale (+ y when ACCUMULATE)`, as PyTorch's analysis would see it.
SCALE_PARAMS = [Param("x_ptr"), Param("y_ptr"), Param("n"), Param("ACCUMULATE", True, False),
                Param("BLOCK", True, 1024)]


def scale_accesses(arguments):
    reads = {"x_ptr", "y_ptr"} if arguments["ACCUMULATE"] else {"x_ptr"}
    return frozenset(reads), frozenset({"y_ptr"})


class HandWrittenLaunches(unittest.TestCase):
    def setUp(self):
        del events[:]
        self.analysis = Analysis(scale_accesses)
        self.JIT = install_triton(self.analysis)

    def test_what_the_kernel_loads_is_read_and_what_it_stores_to_written(self):
        kernel = self.JIT("scale_kernel", SCALE_PARAMS)
        result = kernel.run(Tensor(0x1000, 64), Tensor(0x2000, 64), 16, grid=(1,), warmup=False, num_warps=4)
        self.assertEqual(result, "kernel of scale_kernel")
        self.assertEqual([e[0] for e in events], ["begin", "launch", "end"])
        record = events[2][1]
        self.assertEqual(record["type"], "op_end")
        self.assertEqual(record["name"], "scale_kernel")
        self.assertEqual(record["reads"], [[0x1000, 64]])
        self.assertEqual(record["writes"], [[0x2000, 64]])
        self.assertEqual(record["src"], "test_what_the_kernel_loads_is_read_and_what_it_stores_to_written:1")
        # Every parameter reached the analysis, defaults included; the launch option num_warps did not.
        self.assertEqual(sorted(self.analysis.asked[0][1]), ["ACCUMULATE", "BLOCK", "n", "x_ptr", "y_ptr"])
        self.assertEqual(self.analysis.asked[0][1]["BLOCK"], 1024)

    def test_the_compiled_kernels_triton_ir_says_and_torch_is_not_asked(self):
        kernel = self.JIT("mm", [Param("a"), Param("b"), Param("c"), Param("K"), Param("stride_k")])
        kernel.compiled = CompiledKernel(MATMUL_TTIR, MM_SIGNATURE)
        kernel.run(Tensor(0x1000, 64), Tensor(0x2000, 64), Tensor(0x3000, 64), 16, 16, grid=(1,), warmup=False)
        self.assertEqual(events[-1][1]["reads"], [[0x1000, 64], [0x2000, 64]])
        self.assertEqual(events[-1][1]["writes"], [[0x3000, 64]])
        self.assertEqual(self.analysis.asked, [])
        # Where the IR holds what this reading does not follow, every tensor counts as written: PyTorch's
        # analysis, which undercounts some of what this reading follows, is not asked.
        kernel = self.JIT("scale_kernel", SCALE_PARAMS)
        kernel.compiled = CompiledKernel(kernel_ttir(["%0 = tt.new_memory_op %x : !tt.ptr<f32> loc(#loc1)"],
                                                     SCALE_ARGUMENTS), SCALE_SIGNATURE)
        kernel.run(Tensor(0x1000, 64), Tensor(0x2000, 64), 16, grid=(1,), warmup=False)
        self.assertEqual(self.analysis.asked, [])
        self.assertEqual(events[-1][1]["writes"], [[0x1000, 64], [0x2000, 64]])

    def test_memory_no_argument_names_makes_every_tensor_written_without_asking_torch(self):
        kernel = self.JIT("scale_kernel", SCALE_PARAMS)
        kernel.compiled = CompiledKernel(kernel_ttir([
            "%0 = tt.load %x : !tt.ptr<i64> loc(#loc1)",
            "%1 = tt.int_to_ptr %0 : i64 -> !tt.ptr<f32> loc(#loc2)",
            "tt.store %1, %cst : !tt.ptr<f32> loc(#loc3)"], SCALE_ARGUMENTS), SCALE_SIGNATURE)
        kernel.run(Tensor(0x1000, 64), Tensor(0x2000, 64), 16, grid=(1,), warmup=False)
        self.assertEqual(self.analysis.asked, [])
        self.assertEqual(events[-1][1]["writes"], [[0x1000, 64], [0x2000, 64]])

    def test_each_compiled_kernel_is_read_once_whatever_the_arguments_looked_like(self):
        # Two kernels compiled for launches alike to the recording (a branch on the element type, say): each is
        # read, by its hash.
        kernel = self.JIT("scale_kernel", SCALE_PARAMS)
        stores = {"x": "tt.store %x, %cst : !tt.ptr<f32> loc(#loc1)", "y": "tt.store %y, %cst : !tt.ptr<f32> loc(#loc1)"}
        for name, hash in (("x", "h1"), ("y", "h2"), ("x", "h1")):
            kernel.compiled = CompiledKernel(kernel_ttir([stores[name]], SCALE_ARGUMENTS), SCALE_SIGNATURE, hash)
            kernel.run(Tensor(0x1000, 64), Tensor(0x2000, 64), 16, grid=(1,), warmup=False)
        self.assertEqual([e[1]["writes"] for e in events if e[0] == "end"],
                         [[[0x1000, 64]], [[0x2000, 64]], [[0x1000, 64]]])
        self.assertEqual(sorted(kernel._streamtrace_arguments.accesses), ["h1", "h2"])

    def test_a_signature_keyed_otherwise_than_by_the_kernels_parameters_is_not_read(self):
        # Older Triton keyed the signature by place and left constexprs out: the IR is not matched to it.
        kernel = self.JIT("scale_kernel", SCALE_PARAMS)
        kernel.compiled = CompiledKernel(kernel_ttir(["tt.store %x, %cst : !tt.ptr<f32> loc(#loc1)"],
                                                     SCALE_ARGUMENTS), {0: "*fp32", 1: "*fp32", 2: "i32"})
        kernel.run(Tensor(0x1000, 64), Tensor(0x2000, 64), 16, grid=(1,), warmup=False)
        self.assertEqual(len(self.analysis.asked), 1)  # PyTorch's analysis instead
        self.assertEqual(events[-1][1]["writes"], [[0x2000, 64]])

    def test_a_tensor_the_kernel_neither_loads_nor_stores_is_not_touched(self):
        JIT = install_triton(Analysis(lambda arguments: (frozenset(), frozenset({"out"}))))
        JIT("fill", [Param("out"), Param("unused"), Param("value")]).run(
            Tensor(0x1000, 64), Tensor(0x2000, 64), 1.5, grid=(1,), warmup=False)
        self.assertEqual(events[-1][1]["reads"], [])
        self.assertEqual(events[-1][1]["writes"], [[0x1000, 64]])

    def test_each_constexpr_value_is_analyzed_once_and_sizes_not_again(self):
        kernel = self.JIT("scale_kernel", SCALE_PARAMS)
        for n in (16, 32, 48):
            kernel.run(Tensor(0x1000, 64), Tensor(0x2000, 64), n, grid=(1,), warmup=False)
        kernel.run(Tensor(0x1000, 64), Tensor(0x2000, 64), 16, ACCUMULATE=True, grid=(1,), warmup=False)
        self.assertEqual(len(self.analysis.asked), 2)
        self.assertEqual(events[-1][1]["reads"], [[0x1000, 64]])  # y is read too, but written wins
        self.assertEqual(events[-1][1]["writes"], [[0x2000, 64]])
        # An int of 1 becomes a constant of Triton's code: another specialization.
        kernel.run(Tensor(0x1000, 64), Tensor(0x2000, 64), 1, grid=(1,), warmup=False)
        self.assertEqual(len(self.analysis.asked), 3)

    def test_a_view_takes_its_span_and_an_empty_one_nothing(self):
        kernel = self.JIT("scale_kernel", SCALE_PARAMS)
        # Every other column of an 8x8 float matrix: from its first element to its last, not the whole storage.
        columns = Tensor(0x1000, 256, shape=(8, 4), stride=(8, 2), storage_size=1024)
        backwards = Tensor(0x2000 + 60, 64, shape=(16,), stride=(-1,), storage_size=1024)
        kernel.run(columns, backwards, 32, grid=(1,), warmup=False)
        record = events[-1][1]
        self.assertEqual(record["reads"], [[0x1000, (7 * 8 + 3 * 2 + 1) * 4]])
        self.assertEqual(record["writes"], [[0x2000, 64]])
        kernel.run(Tensor(0x1000, 0), Tensor(0x2000, 64), 0, grid=(1,), warmup=False)
        self.assertEqual(events[-1][1]["reads"], [])

    def test_a_warm_up_compiles_without_an_op(self):
        kernel = self.JIT("scale_kernel", SCALE_PARAMS)
        kernel.run(Tensor(0x1000, 64), Tensor(0x2000, 64), 16, grid=(1,), warmup=True)
        self.assertEqual([e[0] for e in events], ["launch"])
        self.assertEqual(self.analysis.asked, [])

    def test_a_descriptor_or_host_tensor_argument_keeps_tier_t1_with_its_line(self):
        kernel = self.JIT("tma_kernel", [Param("desc"), Param("y_ptr"), Param("n")])
        kernel.run(Descriptor(), Tensor(0x2000, 64), 16, grid=(1,), warmup=False)
        kernel.run(Tensor(0x1000, 64, cuda=False), Tensor(0x2000, 64), 16, grid=(1,), warmup=False)
        self.assertEqual([e[:2] for e in events], [("bracket", "triton tma_kernel"), ("launch", "tma_kernel")] * 2)

    def test_arguments_that_do_not_bind_are_left_to_triton_once(self):
        kernel = self.JIT("scale_kernel", SCALE_PARAMS)
        kernel.run(Tensor(0x1000, 64), grid=(1,), warmup=False)  # y_ptr and n missing: Triton says so
        self.assertEqual([e[:2] for e in events], [("bracket", "triton scale_kernel"), ("launch", "scale_kernel")])

    def test_without_an_analysis_or_when_it_fails_every_tensor_is_written(self):
        importable = launch_ops.triton_access_analysis
        try:
            for analysis in (Analysis(scale_accesses, fails=True), None):
                del events[:]
                JIT = install_triton(analysis)
                if analysis is None:  # no analysis given, and this torch has none to import
                    launch_ops.triton_access_analysis = lambda torch: None
                JIT("scale_kernel", SCALE_PARAMS).run(Tensor(0x1000, 64), Tensor(0x2000, 64), 16, grid=(1,),
                                                       warmup=False)
                self.assertEqual(events[-1][1]["reads"], [], analysis)
                self.assertEqual(events[-1][1]["writes"], [[0x1000, 64], [0x2000, 64]], analysis)
        finally:
            launch_ops.triton_access_analysis = importable

    def test_a_launch_inside_a_recorded_one_is_part_of_it(self):
        inner = self.JIT("inner", [Param("out")])
        self.JIT("outer", [Param("x")], inner=inner).run(Tensor(0x1000, 16), grid=(1,), warmup=False)
        self.assertEqual([e[0] for e in events], ["begin", "launch", "launch", "end"])
        self.assertEqual(events[-1][1]["name"], "outer")

    def test_a_hand_written_launch_inside_a_compiled_one_is_part_of_it(self):
        nesting = launch_ops.LaunchNesting()
        JIT = install_triton(self.analysis, nesting)
        Autotuner = install(nesting=nesting)
        user_kernel = JIT("inner", [Param("out")])
        compiled = Autotuner("triton_poi_0", ["in_ptr0"])
        compiled.inner = types.SimpleNamespace(run=lambda tensor, stream: user_kernel.run(tensor, grid=(1,),
                                                                                           warmup=False))
        compiled.run(Tensor(0x1000, 16), stream=0)
        self.assertEqual([e[0] for e in events], ["begin", "launch", "launch", "end"])
        self.assertEqual(events[-1][1]["name"], "triton_poi_0")

    def test_a_failing_launch_runs_once_and_still_ends_its_op(self):
        kernel = self.JIT("scale_kernel", SCALE_PARAMS, fails=True)
        with self.assertRaises(RuntimeError):
            kernel.run(Tensor(0x1000, 64), Tensor(0x2000, 64), 16, grid=(1,), warmup=False)
        self.assertEqual([e[0] for e in events], ["begin", "launch", "end"])
        kernel.fails = False
        kernel.run(Tensor(0x1000, 64), Tensor(0x2000, 64), 16, grid=(1,), warmup=False)
        self.assertEqual([e[0] for e in events[3:]], ["begin", "launch", "end"])

    def test_launches_left_at_tier_t1_are_bracketed_by_kernel_name(self):
        jit = type("JITFunction", (JITFunction,), {})
        brackets = []

        def bracket(name, method, args, kwargs):
            brackets.append(name)
            return method(*args, **kwargs)

        launch_ops.bracket_triton_launches(jit, bracket)
        self.assertEqual(jit("scale_kernel", SCALE_PARAMS).run(Tensor(0x1000, 64), grid=(1,), warmup=False),
                         "kernel of scale_kernel")
        self.assertEqual(brackets, ["triton scale_kernel"])
        self.assertEqual([e[0] for e in events], ["launch"])


class CompiledKernel:
    """What the recording reads of what Triton's run returns: its Triton IR, the signature it was compiled for
    (parameter -> type, "constexpr" for those compiled in) and its hash."""

    def __init__(self, ttir, signature, hash=None):
        self.asm = {"ttir": ttir}
        self.src = types.SimpleNamespace(signature=signature)
        if hash is not None:
            self.hash = hash


MM_SIGNATURE = {"a": "*fp32", "b": "*fp32", "c": "*fp32", "K": "i32", "stride_k": "i32"}
SCALE_SIGNATURE = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "ACCUMULATE": "constexpr", "BLOCK": "constexpr"}
SCALE_ARGUMENTS = '%x: !tt.ptr<f32> loc("x"(#loc)), %y: !tt.ptr<f32> loc("y"(#loc)), %n: i32 loc("n"(#loc))'


class AnalysisAdapter(unittest.TestCase):
    """triton_access_analysis over each form of PyTorch's analysis, given as a stand-in module."""

    torch = types.SimpleNamespace(Tensor=Tensor)
    arguments = {"x_ptr": Tensor(0x1000, 64), "y_ptr": Tensor(0x2000, 64), "n": 16, "BLOCK": 64}

    def test_reads_and_writes_where_torch_says_both(self):
        def identify_accessed_tensors(kernel, kwargs, tma_descriptor_metadata):
            deps = lambda *names: [types.SimpleNamespace(name=name) for name in names]
            return types.SimpleNamespace(read_writes=types.SimpleNamespace(reads=deps("x_ptr", "y_ptr"),
                                                                           writes=deps("y_ptr")))
        wrap = types.SimpleNamespace(identify_accessed_tensors=identify_accessed_tensors)
        analyze = launch_ops.triton_access_analysis(self.torch, wrap)
        self.assertEqual(analyze(None, self.arguments), ({"x_ptr", "y_ptr"}, {"y_ptr"}))

    def test_every_tensor_not_written_is_read_where_torch_says_only_what_is_written(self):
        def with_descriptors(kernel, kwargs, tma_descriptor_metadata):
            return ["y_ptr"]

        def without(kernel, kwargs):
            return ["y_ptr"]

        for identify in (with_descriptors, without):
            analyze = launch_ops.triton_access_analysis(self.torch, types.SimpleNamespace(
                identify_mutated_tensors=identify))
            self.assertEqual(analyze(None, self.arguments), ({"x_ptr"}, {"y_ptr"}), identify.__name__)

    def test_no_analysis_in_an_older_torch(self):
        self.assertIsNone(launch_ops.triton_access_analysis(self.torch, types.SimpleNamespace()))


if __name__ == "__main__":
    unittest.main()
