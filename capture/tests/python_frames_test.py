"""Run by capture/tests/python_frames.rs under each CPython it finds: python_frames_test.py PROBE_LIBRARY.

The probe (python_frames_probe.cpp) reads the calling thread's frames as the native PyTorch observer does
without the GIL (capture/python/python_frames.h). Where CPython is 3.11, 3.12 or 3.13 its layout must pass the
check, and every walk, made from frames of every kind (functions, generators, coroutines, a callback C code
calls, a class body, exec'd code, a comprehension, deep recursion, another thread), must give exactly the
frames Python gives, with the instruction of each; elsewhere no layout may be chosen.
"""
import ctypes
import sys
import sysconfig
import threading

probe_path = sys.argv[1]
with_gil, without_gil = ctypes.PyDLL(probe_path), ctypes.CDLL(probe_path)
with_gil.probe_check.restype = ctypes.c_ulong
version = with_gil.probe_check()
known = sys.version_info[:2] in ((3, 11), (3, 12), (3, 13)) and not sysconfig.get_config_var("Py_GIL_DISABLED")
if not known:
    assert version == 0, "a layout was chosen for CPython %s" % sys.version
    print("no layout for CPython %s, as expected" % sys.version.split()[0])
    sys.exit(0)
assert version == sys.hexversion & 0xFFFF0000, "CPython %s: no layout passed the check (%x)" % (sys.version, version)

buffer = ctypes.create_string_buffer(1 << 20)
walks = []
# Where code objects keep their file name, found on this module's code as the observer finds it at its start.
with_gil.probe_find_code_files.argtypes = (ctypes.py_object, ctypes.py_object, ctypes.c_char_p)
this_code = sys._getframe().f_code
assert with_gil.probe_find_code_files(this_code, this_code.co_filename, this_code.co_filename.encode()) == 1, \
    "CPython %s: no file name layout" % sys.version


def line_at(code, lasti):
    for start, end, line in code.co_lines():
        if start <= lasti < end:
            return line
    return None


# Where code objects keep their line table and first line, found on this module's code and line_at's (the
# observer finds them on its caller's frames at its start).
with_gil.probe_find_line_tables.argtypes = (ctypes.py_object, ctypes.py_object, ctypes.c_char_p, ctypes.c_size_t,
                                            ctypes.c_int, ctypes.py_object, ctypes.c_int)
other_code = line_at.__code__
assert with_gil.probe_find_line_tables(this_code, this_code.co_linetable, this_code.co_linetable,
                                       len(this_code.co_linetable), this_code.co_firstlineno, other_code,
                                       other_code.co_firstlineno) == 1, "CPython %s: no line table layout" % sys.version


def walked():
    """The walk from here (the probe called without the GIL), against Python's frames."""
    frames = without_gil.probe_walk(buffer, len(buffer)); call_line = sys._getframe().f_lineno  # noqa: E702
    assert frames >= 0, "the walk could not read the stack"
    read = [tuple(int(word) for word in line.split()) for line in buffer.value.decode().splitlines()]
    assert len(read) == frames
    expected = []
    frame = sys._getframe()
    while frame is not None:
        expected.append((id(frame.f_code), frame.f_lasti, frame.f_code))
        frame = frame.f_back
    assert len(read) == len(expected), "%d frames walked, %d in Python" % (len(read), len(expected))
    # This frame is at another instruction now; its line is the probe's call.
    assert read[0][0] == expected[0][0] and line_at(expected[0][2], read[0][1]) == call_line
    for (code, lasti), (expected_code, expected_lasti, what) in zip(read[1:], expected[1:]):
        assert (code, lasti) == (expected_code, expected_lasti), "frame of %s: %r against %r" % (
            what.co_name, (code, lasti), (expected_code, expected_lasti))
    # The line of each frame, read without the GIL from its code's own line table.
    lines = without_gil.probe_lines(buffer, len(buffer))
    assert lines == len(expected), "%d lines for %d frames" % (lines, len(expected))
    for entry, (_, _, what) in zip(buffer.value.decode().splitlines(), expected):
        lasti, line = (int(word) for word in entry.split())
        wanted = line_at(what, lasti)
        assert line == (-1 if wanted is None else wanted), "line of %s at %d: %d against %r" % (
            what.co_name, lasti, line, wanted)
    # The file of each frame, read without the GIL from its code object as the observer reads an unseen one.
    files = without_gil.probe_files(buffer, len(buffer))
    assert files == len(expected), "%d files for %d frames" % (files, len(expected))
    read_files = buffer.value.decode().splitlines()
    for file, (_, _, what) in zip(read_files, expected):
        wanted = what.co_filename if what.co_filename.isascii() else "?"
        assert file == wanted, "file of %s: %r against %r" % (what.co_name, file, wanted)
    walks.append(len(read))
    return len(read)


def nested(depth):
    return walked() if depth == 0 else nested(depth - 1)


def generator():
    yield walked()
    yield walked()


async def coroutine():
    return walked()


def by_key(item):
    walked()
    return item


nested(0)
nested(5)
nested(60)
list(generator())
try:
    coroutine().send(None)
except StopIteration:
    pass
sorted([3, 1, 2], key=by_key)
[walked() for _ in range(2)]


class Body:
    walked()


exec("walked()")
# Files named with other characters are not read without the GIL ("?"), a one-character name too (whose header
# bytes could pass for one ASCII character).
exec(compile("walked()", "\u00e9", "exec"))
exec(compile("walked()", "caf\u00e9_\u6f22.py", "exec"))
thread = threading.Thread(target=nested, args=(3,))
thread.start()
thread.join()
# The table's decoder on every instruction of every code object of a few modules of the standard library.
import inspect as inspected_module  # noqa: E402
import json  # noqa: E402
import typing  # noqa: E402

with_gil.probe_line_from_table.argtypes = (ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int)
codes = [module_code for module in (inspected_module, json.decoder, json.encoder, typing, threading)
         for module_code in (compile(open(module.__file__).read(), module.__file__, "exec"),)]
decoded = 0
while codes:
    code = codes.pop()
    codes.extend(const for const in code.co_consts if hasattr(const, "co_lines"))
    table = code.co_linetable
    for start, end, line in code.co_lines():
        for offset in range(start, end, 2):
            got = with_gil.probe_line_from_table(table, len(table), code.co_firstlineno, offset)
            assert got == (-1 if line is None else line), "%s at %d: %d against %r" % (code.co_name, offset, got, line)
            decoded += 1
assert decoded > 10000, decoded
print("CPython %s: %d walks, layout %x, %d instructions' lines, all as Python says" % (
    sys.version.split()[0], len(walks), version, decoded))
