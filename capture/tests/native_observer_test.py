"""The native PyTorch observer (capture/python/torch_observer.cpp) on real ops, where torch is installed (a CPU
build is enough) and the bootstrap can build the observer (a C++ compiler): the cases of real_ops_cases.py,
which bootstrap_test.py runs through the Python dispatch mode. The observer is started as
benches/observer_lines_check.py starts it, all devices counted, with Python functions in place of the capture
library's entry points. Run by native_observer.rs beside this file (`cargo test -p streamtrace-capture --test
native_observer`), or alone: `python3 capture/tests/native_observer_test.py`. Once started, the observer stays
for the process: this file runs nothing else.
"""
import ctypes
import inspect
import os
import sys
import threading
import unittest

from bootstrap_modules import PYTHON_DIR, load
from real_ops_cases import RealOpCases, torch

RecordFn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t)
BeginFn = ctypes.CFUNCTYPE(ctypes.c_int)


@unittest.skipIf(torch is None, "needs torch (a CPU build is enough); CI installs none")
class RealOpsInTheNativeObserver(RealOpCases, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        bootstrap = load("sitecustomize", "streamtrace_bootstrap_native")
        try:
            observer = bootstrap._observer_library(torch)
        except Exception as error:  # no compiler or headers here
            raise unittest.SkipTest("the native observer cannot be built here (%s)" % error)

        def keep(text, length):
            cls.records.append(text[:length].decode())
            return 0

        cls.callbacks = (RecordFn(keep), BeginFn(lambda: 0))  # kept alive for the process
        record, begin = cls.callbacks
        files = observer.streamtrace_torch_library_files
        files.argtypes = (ctypes.c_char_p,)
        for path in (os.path.dirname(torch.__file__), os.path.abspath(PYTHON_DIR), os.path.dirname(threading.__file__)):
            files(path.encode())
        observe = observer.streamtrace_torch_observe
        observe.argtypes = (ctypes.c_void_p,) * 5 + (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t)
        pointers = [ctypes.cast(f, ctypes.c_void_p).value for f in (begin, begin, record, record)]
        error = ctypes.create_string_buffer(512)
        if observe(*pointers, None, 1, error, len(error)) != 0:
            raise unittest.SkipTest("the native observer did not start: %s" % error.value.decode())
        cls.observer = observer

    def test_the_python_line_of_a_call_outside_ops_is_read_with_and_without_the_gil(self):
        # As the capture library asks from inside a CUDA call: through a PyDLL handle the GIL stays held (a
        # pybind11 extension's call), through a CDLL handle of the same library it is let go (a ctypes call). The
        # reader calls no Python API either way; it reads the thread's frames, and a code object this thread has
        # not run an op in is read for its file and line from the object itself (its line table decoded, as the
        # observer learned to read it at its start).
        held = self.observer.streamtrace_torch_python_line
        released = getattr(ctypes.CDLL(self.observer._name), "streamtrace_torch_python_line")
        for reader in (held, released):
            reader.argtypes, reader.restype = (ctypes.c_char_p, ctypes.c_size_t), ctypes.c_size_t
        out = ctypes.create_string_buffer(480)
        here = os.path.abspath(__file__)

        def check(length, line):
            self.assertEqual(out.raw[:length].decode(), "%s:%d" % (here, line))

        check(held(out, len(out)), inspect.currentframe().f_lineno)
        check(released(out, len(out)), inspect.currentframe().f_lineno)

        # A pending exception stays pending (the reader never clears one).
        try:
            raise KeyError("pending")
        except KeyError:
            check(held(out, len(out)), inspect.currentframe().f_lineno)
            self.assertIs(sys.exc_info()[0], KeyError)

        def unseen():  # a ctypes wrapper that runs no op before its call
            return released(out, len(out)), inspect.currentframe().f_lineno

        check(*unseen())

        # One call instruction runs an op, then the reader with the GIL held, then without: the line the op
        # learned is given on every CPython.
        lines = []
        for function, arguments in ((torch.ones, (1,)), (held, (out, len(out))), (released, (out, len(out)))):
            result, line = function(*arguments), inspect.currentframe().f_lineno
            if function is not torch.ones:
                lines.append(out.raw[:result].decode())
        self.assertEqual(lines, ["%s:%d" % (here, line)] * 2)
        self.assertEqual(held(out, 4), 0, "a line longer than the buffer is not cut")



if __name__ == "__main__":
    unittest.main()
