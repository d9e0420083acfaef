"""The native observer's build cache (capture/python/streamtrace_observer_cache.py), without torch or a GPU: a stub
torch layout, stub CUDA headers and a stand-in compiler (this file, run as one) that writes its output in two
halves with a pause between them, so that a process reading a library while it is written would see half of
it. Run by observer_cache.rs beside this file (`cargo test -p streamtrace-capture --test observer_cache`), or
alone: `python3 capture/tests/observer_cache_test.py`.
"""
import importlib.util
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BOOTSTRAP = os.path.join(HERE, "..", "python")


def load_cache_module():
    spec = importlib.util.spec_from_file_location("streamtrace_observer_cache",
                                                  os.path.join(BOOTSTRAP, "streamtrace_observer_cache.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cache = load_cache_module()

# The stand-in compiler: `--version` prints $FAKE_CXX_VERSION; a build appends a line to $FAKE_CXX_LOG, then
# writes "OBSERVER", pauses $FAKE_CXX_PAUSE seconds and writes the rest ending in "END" to the file after -o,
# or pauses and fails with a compiler-like error when $FAKE_CXX_FAIL is set. $FAKE_CXX_CONTENT is put in the
# middle.
COMPILER = """#!%s
import os, sys, time
if sys.argv[1:] == ["--version"]:
    print(os.environ.get("FAKE_CXX_VERSION", "fake-c++ 1.0"))
    sys.exit(0)
with open(os.environ["FAKE_CXX_LOG"], "a") as log:
    log.write("build %%d\\n" %% os.getpid())
if os.environ.get("FAKE_CXX_FAIL"):
    time.sleep(float(os.environ.get("FAKE_CXX_PAUSE", "0")))
    print("torch_observer.cpp:1:1: error: " + os.environ["FAKE_CXX_FAIL"])
    sys.exit(1)
out = sys.argv[sys.argv.index("-o") + 1]
source = sys.argv[sys.argv.index("-o") - 1]
assert os.path.exists(os.path.join(os.path.dirname(source), "observer_lifetime.h")), "the header beside the source"
with open(out, "wb") as f:
    f.write(b"OBSERVER")
    f.flush()
    time.sleep(float(os.environ.get("FAKE_CXX_PAUSE", "0")))
    f.write(os.environ.get("FAKE_CXX_CONTENT", "").encode() + b"END")
""" % sys.executable


def load(path):
    """The stand-in for dlopen: a whole library is "OBSERVER...END"; one holding "BAD" does not load."""
    with open(path, "rb") as f:
        data = f.read()
    if not (data.startswith(b"OBSERVER") and data.endswith(b"END")):
        raise OSError("half a library: %r" % data)
    if b"BAD" in data:
        raise OSError("undefined symbol")
    return data


class Layout:
    """A stub torch, CUDA headers, the observer's sources and the stand-in compiler in a temporary directory."""

    def __init__(self, root):
        self.root = root
        self.torch_dir = self.make_torch("torch-a")
        self.cuda_home = self.make_cuda("cuda-a")
        self.here = self.make_sources("out-a")
        self.cache_root = os.path.join(root, "cache")
        self.log = os.path.join(root, "builds.log")
        self.compiler = os.path.join(root, "fake-c++")
        with open(self.compiler, "w") as f:
            f.write(COMPILER)
        os.chmod(self.compiler, os.stat(self.compiler).st_mode | stat.S_IEXEC)
        self.env = {"CXX": self.compiler, "CUDA_HOME": self.cuda_home, "FAKE_CXX_LOG": self.log}

    def make_torch(self, name):
        torch_dir = os.path.join(self.root, name, "torch")
        for header in cache.TORCH_HEADERS:
            os.makedirs(os.path.dirname(os.path.join(torch_dir, "include", header)), exist_ok=True)
            with open(os.path.join(torch_dir, "include", header), "w") as f:
                f.write("// stub\n")
        with open(os.path.join(torch_dir, "__init__.py"), "w") as f:
            f.write("")
        return torch_dir

    def make_cuda(self, name):
        include = os.path.join(self.root, name, "include")
        os.makedirs(os.path.join(include, "crt"))
        for header in ("cuda_runtime_api.h", "crt/host_config.h"):
            with open(os.path.join(include, header), "w") as f:
                f.write("// stub\n")
        return os.path.join(self.root, name)

    def make_sources(self, name, text=b"// the observer\n"):
        here = os.path.join(self.root, name, "python")
        os.makedirs(here)
        with open(os.path.join(here, "torch_observer.cpp"), "wb") as f:
            f.write(text)
        with open(os.path.join(here, "observer_lifetime.h"), "wb") as f:
            f.write(b"// lifetimes\n")
        with open(os.path.join(here, "python_frames.h"), "wb") as f:
            f.write(b"// frames\n")
        return here

    def builds(self):
        if not os.path.exists(self.log):
            return 0
        with open(self.log) as f:
            return len(f.read().splitlines())


def stub_torch(torch_dir, version="2.11.0+cu130", git="abc123", abi=True):
    return types.SimpleNamespace(
        __file__=os.path.join(torch_dir, "__init__.py"), __version__=version,
        _C=types.SimpleNamespace(_GLIBCXX_USE_CXX11_ABI=abi),
        version=types.SimpleNamespace(git_version=git, cuda="13.0"))


class Environment:
    """Sets environment variables for the duration of a `with`."""

    def __init__(self, values):
        self.values, self.saved = values, {}

    def __enter__(self):
        for name, value in self.values.items():
            self.saved[name] = os.environ.get(name)
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def __exit__(self, *exc):
        for name, value in self.saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def child_build(root, here, torch_dir, gate):
    """In a child process: one process's observer_library call, once the parent opens the gate (all children
    start at once, whatever their interpreter's start-up took); prints "ok", or "failed: why"."""
    recipe = cache.recipe_for(stub_torch(torch_dir), here)
    with open(os.path.join(gate, "ready-%d" % os.getpid()), "w"):
        pass
    while not os.path.exists(os.path.join(gate, "open")):
        time.sleep(0.01)
    try:
        cache.observer_library(recipe, root, load, lambda message: None)
        print("ok")
    except cache.BuildFailed as error:
        print("failed: %s" % error)


class ObserverCacheTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="st-observer-cache-")
        self.layout = Layout(self.dir)
        self.environment = Environment(dict(self.layout.env))
        self.environment.__enter__()
        self.said = []

    def tearDown(self):
        self.environment.__exit__()
        shutil.rmtree(self.dir, ignore_errors=True)

    def key(self, here=None, torch=None):
        return cache.recipe_for(torch or stub_torch(self.layout.torch_dir), here or self.layout.here).key

    def library(self, here=None, torch=None):
        recipe = cache.recipe_for(torch or stub_torch(self.layout.torch_dir), here or self.layout.here)
        return cache.observer_library(recipe, self.layout.cache_root, load, self.said.append)

    def test_the_key_ignores_the_output_directory_and_the_capture_options(self):
        other_dir = self.layout.make_sources("out-b")
        base = self.key()
        self.assertEqual(self.key(here=other_dir), base, "the same sources in another capture directory")
        with Environment({"STREAMTRACE_COST_DETAIL": "1", "STREAMTRACE_NO_CALL_SITES": "1",
                          "STREAMTRACE_OUTPUT": "/elsewhere/trace.%p.json", "STREAMTRACE_GPU_TIMES": "1"}):
            self.assertEqual(self.key(), base, "options are read when the observer runs, not built in")

    def test_the_key_follows_everything_the_build_depends_on(self):
        base = self.key()
        changed = {
            "the observer's source": self.key(here=self.layout.make_sources("out-c", b"// another observer\n")),
            "torch's version": self.key(torch=stub_torch(self.layout.torch_dir, version="2.12.0")),
            "torch's build commit": self.key(torch=stub_torch(self.layout.torch_dir, git="def456")),
            "torch's C++ ABI": self.key(torch=stub_torch(self.layout.torch_dir, abi=False)),
            "another torch installation": self.key(torch=stub_torch(self.layout.make_torch("torch-b"))),
        }
        with Environment({"FAKE_CXX_VERSION": "fake-c++ 2.0"}):
            changed["the compiler's version"] = self.key()
        with Environment({"CUDA_HOME": self.layout.make_cuda("cuda-b")}):
            changed["the CUDA headers"] = self.key()
        with open(os.path.join(self.layout.torch_dir, "include", cache.TORCH_HEADERS[0]), "w") as f:
            f.write("// torch rebuilt in place, another layout\n")
        changed["a torch header the observer reads"] = self.key()
        for what, key in changed.items():
            self.assertNotEqual(key, base, what)
        self.assertEqual(len(set(changed.values())), len(changed), changed)

    def test_a_second_capture_takes_the_built_library(self):
        first = self.library()
        second = self.library(here=self.layout.make_sources("out-b"))
        self.assertEqual((first, second, self.layout.builds()), (b"OBSERVEREND", b"OBSERVEREND", 1))
        entry = os.path.join(self.layout.cache_root, self.key())
        self.assertEqual(sorted(n for n in os.listdir(entry) if not n.startswith("build-")),
                         [cache.LOCK, cache.MANIFEST, cache.LIBRARY], "the build directory is gone")
        self.assertEqual(len([n for n in os.listdir(entry) if n.startswith("build-")]), 0)

    def test_processes_starting_at_once_build_once_and_never_see_half_a_library(self):
        processes = self.start_children(6, {"FAKE_CXX_PAUSE": "1.5"})
        outcomes = [p.communicate()[0].decode().strip() for p in processes]
        self.assertEqual(outcomes, ["ok"] * 6, outcomes)
        self.assertEqual(self.layout.builds(), 1)

    def test_processes_waiting_on_a_failed_build_give_up_with_its_reason(self):
        processes = self.start_children(4, {"FAKE_CXX_PAUSE": "1.5", "FAKE_CXX_FAIL": "no member named 'x'"})
        outcomes = [p.communicate()[0].decode().strip() for p in processes]
        self.assertEqual(self.layout.builds(), 1, outcomes)
        for outcome in outcomes:
            self.assertIn("no member named 'x'", outcome)
            self.assertTrue(outcome.startswith("failed: "), outcome)

    def start_children(self, count, env):
        environment = dict(os.environ, **env)
        gate = os.path.join(self.dir, "gate")
        os.makedirs(gate)
        children = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", self.layout.cache_root,
                                      self.layout.here, self.layout.torch_dir, gate],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=environment)
                    for _ in range(count)]
        while len(os.listdir(gate)) < count and all(child.poll() is None for child in children):
            time.sleep(0.01)
        with open(os.path.join(gate, "open"), "w"):
            pass
        return children

    def test_a_failed_build_is_not_cached_and_the_next_capture_builds(self):
        with Environment({"FAKE_CXX_FAIL": "expected ';'"}):
            with self.assertRaises(cache.BuildFailed) as failed:
                self.library()
        self.assertIn("expected ';'", str(failed.exception))
        self.assertEqual(self.library(), b"OBSERVEREND")
        self.assertEqual(self.layout.builds(), 2)
        entry = os.path.join(self.layout.cache_root, self.key())
        self.assertFalse(os.path.exists(os.path.join(entry, cache.FAILED)), "a success clears the failure")

    def test_a_library_that_does_not_load_is_never_installed(self):
        with Environment({"FAKE_CXX_CONTENT": "BAD"}):
            with self.assertRaises(cache.BuildFailed) as failed:
                self.library()
        self.assertIn("does not load", str(failed.exception))
        entry = os.path.join(self.layout.cache_root, self.key())
        self.assertIsNone(cache.installed_library(entry))
        self.assertFalse(os.path.exists(os.path.join(entry, cache.LIBRARY)))

    def test_a_corrupt_cached_library_is_built_again(self):
        self.library()
        library = os.path.join(self.layout.cache_root, self.key(), cache.LIBRARY)
        for corrupt in (b"OBSERVER", b"OBSERVERXND", b""):
            with open(library, "wb") as f:
                f.write(corrupt)
            self.assertEqual(self.library(), b"OBSERVEREND", corrupt)
        os.remove(os.path.join(self.layout.cache_root, self.key(), cache.MANIFEST))
        self.assertEqual(self.library(), b"OBSERVEREND", "a library without its manifest")
        self.assertEqual(self.layout.builds(), 5)

    def test_a_cached_library_that_stopped_loading_is_built_again(self):
        self.library()
        entry = os.path.join(self.layout.cache_root, self.key())
        calls = []

        def load_once_broken(path):
            calls.append(path)
            if len(calls) == 1:
                raise OSError("libc10.so: cannot open shared object file")
            return load(path)

        recipe = cache.recipe_for(stub_torch(self.layout.torch_dir), self.layout.here)
        self.assertEqual(cache.observer_library(recipe, self.layout.cache_root, load_once_broken, self.said.append),
                         b"OBSERVEREND")
        self.assertEqual(self.layout.builds(), 2)
        self.assertTrue(any("does not load" in message for message in self.said), self.said)
        self.assertIsNotNone(cache.installed_library(entry))

    def test_an_unwritable_cache_falls_back_to_the_capture_directory(self):
        blocked = os.path.join(self.dir, "not-a-directory")
        with open(blocked, "w") as f:
            f.write("")
        fallback = os.path.join(self.dir, "out-a", "python", "observer-cache")
        self.assertEqual(cache.usable_root(os.path.join(blocked, "observer"), fallback, self.said.append), fallback)
        self.assertTrue(os.path.isdir(fallback))
        self.assertTrue(any("cannot write the observer cache" in message for message in self.said), self.said)

    def test_the_cache_root_is_the_launchers_choice_else_the_xdg_cache(self):
        with Environment({"STREAMTRACE_OBSERVER_CACHE": "/chosen", "XDG_CACHE_HOME": "/xdg"}):
            self.assertEqual(cache.cache_root(), "/chosen")
        with Environment({"STREAMTRACE_OBSERVER_CACHE": None, "XDG_CACHE_HOME": "/xdg"}):
            self.assertEqual(cache.cache_root(), "/xdg/streamtrace/observer")
        with Environment({"STREAMTRACE_OBSERVER_CACHE": None, "XDG_CACHE_HOME": None, "HOME": "/home/u"}):
            self.assertEqual(cache.cache_root(), "/home/u/.cache/streamtrace/observer")

    def test_no_compiler_or_no_cuda_headers_is_a_reason_not_a_crash(self):
        with Environment({"CXX": os.path.join(self.dir, "no-such-compiler")}):
            with self.assertRaises(cache.BuildFailed) as failed:
                self.key()
            self.assertIn("does not run", str(failed.exception))
        if not os.path.exists("/usr/local/cuda/include/cuda_runtime_api.h"):  # else that machine's are found
            with Environment({"CUDA_HOME": os.path.join(self.dir, "nowhere")}):
                with self.assertRaises(cache.BuildFailed) as failed:
                    self.key()
                self.assertIn("no CUDA headers", str(failed.exception))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child_build(*sys.argv[2:6])
    else:
        unittest.main(verbosity=2)
