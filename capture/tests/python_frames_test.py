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
print("CPython %s: %d walks, layout %x, all as Python says" % (sys.version.split()[0], len(walks), version))
