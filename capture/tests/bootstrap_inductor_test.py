"""How the PyTorch bootstrap (capture/python/sitecustomize.py) records torch.compile's Triton launches, without torch
or a GPU: a stand-in for Inductor's CachingAutotuner and for torch's tensors, and the capture library's op
entry points replaced by a list. Run by bootstrap_inductor.rs beside this file (`cargo test -p
streamtrace-capture --test bootstrap_inductor`), or alone: `python3 capture/tests/bootstrap_inductor_test.py`.
"""
import enum
import importlib.util
import json
import os
import sys
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def load_bootstrap():
    # Without CUDA_INJECTION64_PATH and STREAMTRACE_OUTPUT the module installs nothing when loaded.
    for name in ("CUDA_INJECTION64_PATH", "STREAMTRACE_OUTPUT"):
        os.environ.pop(name, None)
    spec = importlib.util.spec_from_file_location("streamtrace_bootstrap",
                                                  os.path.join(HERE, "..", "python", "sitecustomize.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bootstrap = load_bootstrap()


class Storage:
    def __init__(self, address, size):
        self.address, self.size = address, size

    def data_ptr(self):
        return self.address

    def nbytes(self):
        return self.size


class Tensor:
    """A view into a storage: the recording takes the whole storage."""

    def __init__(self, address, size, cuda=True):
        self.storage, self.is_cuda = Storage(address, size), cuda

    def untyped_storage(self):
        return self.storage


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


def install(lines=None):
    heuristics = types.SimpleNamespace(CachingAutotuner=type("CachingAutotuner", (CachingAutotuner,), {}))
    torch = types.SimpleNamespace(Tensor=Tensor)
    bootstrap._record_inductor_launches(torch, heuristics, begin, end, lines or Lines())
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


if __name__ == "__main__":
    unittest.main()
