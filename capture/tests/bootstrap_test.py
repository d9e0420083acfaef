"""Parts of the PyTorch bootstrap (capture/python/sitecustomize.py) that need neither torch nor a GPU, with
stand-ins for torch's modules, and, where torch is installed (CPU is enough), the Python dispatch mode's records
of real ops. Run by bootstrap.rs beside this file (`cargo test -p streamtrace-capture --test bootstrap`), or
alone: `python3 capture/tests/bootstrap_test.py`.
"""
import importlib.util
import sys
import types
import unittest

from bootstrap_modules import load
from launch_ops_test import Tensor  # a stand-in for a CUDA tensor or view
from real_ops_cases import RealOpCases, torch

bootstrap = load("sitecustomize", "streamtrace_bootstrap_under_test")


class CheckpointEarlyStop(unittest.TestCase):
    """Under the Python dispatch mode's GPU trace hooks, non-reentrant checkpointing must not end a recomputation
    by raising through frames that hold CUDA tensors (the hooks would drop the exception)."""

    def with_checkpoint_module(self, early_stop):
        checkpoint = types.ModuleType("torch.utils.checkpoint")
        checkpoint._enable_checkpoint_early_stop = early_stop
        saved = sys.modules.get("torch.utils.checkpoint")
        sys.modules["torch.utils.checkpoint"] = checkpoint
        self.addCleanup(lambda: sys.modules.pop("torch.utils.checkpoint") if saved is None
                        else sys.modules.__setitem__("torch.utils.checkpoint", saved))
        return checkpoint

    def test_the_default_early_stop_is_turned_off(self):
        checkpoint = self.with_checkpoint_module(None)  # torch's default: each checkpoint's own (early_stop=True)
        bootstrap._checkpoint_recomputes_to_the_end()
        self.assertIs(checkpoint._enable_checkpoint_early_stop, False)

    def test_a_programs_own_choice_stands(self):
        for chosen in (True, False):
            checkpoint = self.with_checkpoint_module(chosen)
            bootstrap._checkpoint_recomputes_to_the_end()
            self.assertIs(checkpoint._enable_checkpoint_early_stop, chosen)

    def test_a_torch_without_the_switch_is_left_alone(self):
        checkpoint = self.with_checkpoint_module(None)
        del checkpoint._enable_checkpoint_early_stop
        bootstrap._checkpoint_recomputes_to_the_end()
        self.assertFalse(hasattr(checkpoint, "_enable_checkpoint_early_stop"))


class CallbackRegistry:
    """A stand-in for torch._utils.CallbackRegistry (the registries of torch.cuda._gpu_trace)."""

    def __init__(self, name):
        self.name, self.callback_list = name, []

    def add_callback(self, callback):
        self.callback_list.append(callback)

    def fire_callbacks(self, *args):
        for callback in self.callback_list:
            callback(*args)


class QuietGpuTraceHooks(unittest.TestCase):
    """The GPU trace hooks nothing observes must run no Python bytecode (where the GIL may change hands under a
    lock of torch's); observed ones fire as torch wrote them."""

    def trace_module(self):
        gpu_trace = types.ModuleType("torch.cuda._gpu_trace")
        gpu_trace.StreamCreationCallbacks = CallbackRegistry("stream creation")
        gpu_trace.EventRecordCallbacks = CallbackRegistry("event record")
        gpu_trace.DeviceSynchronizationCallbacks = CallbackRegistry("device synchronization")
        gpu_trace.MemoryAllocationCallbacks = CallbackRegistry("memory allocation")
        return gpu_trace

    def test_unobserved_hooks_fire_no_bytecode(self):
        gpu_trace = self.trace_module()
        allocated = []
        gpu_trace.MemoryAllocationCallbacks.add_callback(allocated.append)
        bootstrap._quiet_unobserved_gpu_trace_hooks(gpu_trace)
        for registry, args in ((gpu_trace.StreamCreationCallbacks, (7,)), (gpu_trace.EventRecordCallbacks, (1, 2)),
                               (gpu_trace.DeviceSynchronizationCallbacks, ())):
            self.assertFalse(hasattr(registry.fire_callbacks, "__code__"), registry.name)
            registry.fire_callbacks(*args)  # takes what torch passes
        gpu_trace.MemoryAllocationCallbacks.fire_callbacks(0x1000)
        self.assertEqual(allocated, [0x1000], "an observed hook still fires")

    def test_a_callback_added_later_is_fired(self):
        gpu_trace = self.trace_module()
        bootstrap._quiet_unobserved_gpu_trace_hooks(gpu_trace)
        recorded = []
        gpu_trace.EventRecordCallbacks.add_callback(lambda event, stream: recorded.append((event, stream)))
        gpu_trace.EventRecordCallbacks.fire_callbacks(1, 2)
        self.assertEqual(recorded, [(1, 2)])
        gpu_trace.EventRecordCallbacks.add_callback(lambda event, stream: recorded.append("second"))
        gpu_trace.EventRecordCallbacks.fire_callbacks(3, 4)
        self.assertEqual(recorded, [(1, 2), (3, 4), "second"])


class Extents(unittest.TestCase):
    """What the Python dispatch mode records of a tensor argument (docs/trace-format.md's access items)."""

    def test_a_contiguous_tensor_is_its_bytes(self):
        self.assertEqual(bootstrap._extent(Tensor(0x1000, 24, shape=(2, 3))), "[4096,24]")

    def test_a_strided_view_keeps_its_layout(self):
        # x[0::2] of 8 floats: 4 elements two apart, from the first to the seventh float.
        self.assertEqual(bootstrap._extent(Tensor(0x1000, 16, shape=(4,), stride=(2,))), "[4096,28,4,[[4,2]]]")

    def test_a_view_with_a_negative_stride_is_its_span_from_the_lowest_element(self):
        # x.flip(0) of 4 floats: the first element is the last float.
        self.assertEqual(bootstrap._extent(Tensor(0x100c, 16, shape=(4,), stride=(-1,))), "[4096,16]")

    def test_a_tensor_without_bytes_has_no_extent(self):
        self.assertIsNone(bootstrap._extent(Tensor(0x1000, 0, shape=(0, 3))))


@unittest.skipIf(torch is None, "needs torch (a CPU build is enough); CI installs none")
class RealOpsInThePythonMode(RealOpCases, unittest.TestCase):
    """The Python dispatch mode on real ops, CPU tensors standing in for CUDA ones (the bootstrap's `is_cuda`
    test read as true, as benches/t2_mode_cost.py does), the capture library's entry points replaced by lists;
    native_observer_test.py runs the same cases through the native observer."""

    @classmethod
    def setUpClass(cls):
        with open(bootstrap.__file__) as file:
            source = file.read().replace("value.is_cuda", "True")
        spec = importlib.util.spec_from_loader("streamtrace_bootstrap_cpu", loader=None)
        cls.module = importlib.util.module_from_spec(spec)
        cls.module.__file__ = bootstrap.__file__
        exec(compile(source, bootstrap.__file__, "exec"), cls.module.__dict__)
        lines = cls.module._SourceLines(())
        cls.mode = cls.module._start_dispatch_mode(torch, lambda: 0, cls.records.append, cls.records.append, lines)
        if cls.mode is None:
            raise unittest.SkipTest("this torch has no dispatch mode")

    @classmethod
    def tearDownClass(cls):
        cls.mode.__exit__(None, None, None)


    def test_checkpointing_recomputes_to_the_end_under_the_mode(self):
        import torch.utils.checkpoint as checkpoint
        self.assertIs(checkpoint._enable_checkpoint_early_stop, False)


if __name__ == "__main__":
    unittest.main()
