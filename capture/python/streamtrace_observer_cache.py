"""Builds streamtrace's native PyTorch observer (torch_observer.cpp, beside this file) once per user and machine
for each torch, compiler and set of CUDA headers, and hands the built library to every process that needs it.

Loaded by the bootstrap (sitecustomize.py) by its path, never imported by name, so that it shadows no module of
the program. The cache lives where the launcher says (STREAMTRACE_OBSERVER_CACHE; by default the user's XDG
cache, ~/.cache/streamtrace/observer), one directory per key:

    KEY/torch_observer.so   the library
    KEY/manifest.json       its size and SHA-256, and what it was built from (the key's parts, the command)
    KEY/lock                held (flock) by the one process that builds
    KEY/failed              why the last build failed

The key is a hash of what the build depends on and nothing else: the observer's source, the torch (version,
build commit, CUDA version, C++ ABI, where it lives, the headers the observer reads), the compiler (its path and
`--version`), the CUDA headers, the flags and the machine. Where the output goes and the capture's options are
not in it, so every capture of the machine shares one build.

Processes starting at once (torchrun's ranks, DataLoader workers): the first takes the lock and builds into a
temporary directory; the library is loaded there, then renamed into place and recorded in the manifest, so no
process ever sees half a library, nor one that does not load. The others wait for the lock, then take what was
installed; when the build they waited for failed, they give up with its reason (the bootstrap then records
ops in Python) rather than failing the same way one after the other. A failed build is never installed, and
the next capture tries again. A library whose bytes no longer match its manifest is built again.
"""
import errno
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import tempfile
import time

LIBRARY = "torch_observer.so"
MANIFEST = "manifest.json"
LOCK = "lock"
FAILED = "failed"
SOURCES = ("torch_observer.cpp", "observer_lifetime.h", "python_frames.h")
# How long a process waits for another one's build before it gives up (the bootstrap then records in Python).
WAIT_S = 600.0
# The torch headers whose layouts the observer depends on most: a torch rebuilt in place changes them.
TORCH_HEADERS = ("ATen/record_function.h", "c10/cuda/CUDACachingAllocator.h", "ATen/core/ivalue.h")


class BuildFailed(RuntimeError):
    """The observer could not be built (or loaded once built); the message says why."""


def cache_root():
    """The directory of the cache: STREAMTRACE_OBSERVER_CACHE (the launcher sets it), else the user's XDG cache."""
    chosen = os.environ.get("STREAMTRACE_OBSERVER_CACHE")
    if chosen:
        return chosen
    base = os.environ.get("XDG_CACHE_HOME")
    if not base or not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "streamtrace", "observer")


def usable_root(preferred, fallback, say):
    """`preferred` if this process can create and write it, else `fallback` (said once)."""
    for root in (preferred, fallback):
        try:
            os.makedirs(root, mode=0o700, exist_ok=True)
            if os.access(root, os.W_OK | os.X_OK):
                return root
        except OSError:
            pass
        if root == preferred:
            say("cannot write the observer cache %s: building into %s" % (preferred, fallback))
    return fallback


def cuda_include(torch_dir):
    """A directory with the CUDA runtime headers (the allocator's header needs them)."""
    candidates = [os.path.join(os.environ[name], "include") for name in ("CUDA_HOME", "CUDA_PATH") if name in os.environ]
    candidates.append("/usr/local/cuda/include")
    site = os.path.dirname(torch_dir)
    candidates += [os.path.join(site, "nvidia", name, "include") for name in ("cu13", "cuda_runtime")]
    candidates.append(os.path.join(site, "triton", "backends", "nvidia", "include"))  # Triton ships them too
    for candidate in candidates:
        if os.path.exists(os.path.join(candidate, "cuda_runtime_api.h")) and \
                os.path.exists(os.path.join(candidate, "crt", "host_config.h")):
            return candidate
    raise BuildFailed("no CUDA headers (set CUDA_HOME)")


def _file_identity(path):
    """(size, modification time) of a file, or None: cheap, and changed by any rewrite."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return [stat.st_size, stat.st_mtime_ns]


def _compiler_version(compiler):
    try:
        result = subprocess.run([compiler, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                timeout=60)
    except (OSError, subprocess.SubprocessError) as error:
        raise BuildFailed("the C++ compiler %s does not run (%s)" % (compiler, error))
    if result.returncode != 0:
        raise BuildFailed("%s --version failed (exit %d)" % (compiler, result.returncode))
    return result.stdout.decode(errors="replace").strip()


class Recipe:
    """How to build the observer for one torch, compiler and set of CUDA headers, and the key of the build: a hash
    of `parts`, everything the build depends on."""

    def __init__(self, compiler, sources, flags, libs, parts, torch_version):
        self.compiler = compiler
        self.sources = sources  # file name -> its bytes: what is hashed is what is compiled
        self.flags = flags
        self.libs = libs
        self.parts = parts
        self.torch_version = torch_version
        self.key = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]

    def command(self, work_dir, output):
        return [self.compiler] + self.flags + [os.path.join(work_dir, SOURCES[0]), "-o", output] + self.libs


def recipe_for(torch, here):
    """The recipe of the observer whose sources are in `here`, for this torch, the C++ compiler ($CXX, c++ or
    g++) and the CUDA headers found for it. Raises BuildFailed when something it needs is missing."""
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not compiler:
        raise BuildFailed("no C++ compiler (c++, g++ or $CXX)")
    resolved = shutil.which(compiler) or compiler
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    torch_include = os.path.join(torch_dir, "include")
    torch_lib = os.path.join(torch_dir, "lib")
    cuda = cuda_include(torch_dir)
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    sources = {}
    for name in SOURCES:
        with open(os.path.join(here, name), "rb") as source:
            sources[name] = source.read()
    # NDEBUG as libtorch was built: RecordFunction has debug-only members, and their layout must match. The
    # header beside the source is found through its quoted include, wherever the build runs.
    flags = ["-O2", "-DNDEBUG", "-std=c++20", "-shared", "-fPIC", "-D_GLIBCXX_USE_CXX11_ABI=%d" % abi,
             "-I", torch_include, "-I", cuda]
    libs = ["-L", torch_lib, "-lc10", "-lc10_cuda", "-ltorch_cpu", "-Wl,-rpath," + torch_lib]
    version = getattr(torch, "version", None)
    parts = {
        "observer": hashlib.sha256(b"".join(sources[name] for name in SOURCES)).hexdigest(),
        "torch": [torch.__version__, getattr(version, "git_version", None), getattr(version, "cuda", None), abi,
                  torch_dir],
        "torch_headers": [_file_identity(os.path.join(torch_include, name)) for name in TORCH_HEADERS],
        "compiler": [os.path.realpath(resolved), _compiler_version(compiler)],
        "cuda_headers": [cuda, _file_identity(os.path.join(cuda, "cuda_runtime_api.h"))],
        "flags": flags,
        "libs": libs,
        "machine": platform.machine(),
    }
    return Recipe(compiler, sources, flags, libs, parts, torch.__version__)


def _sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as data:
        for block in iter(lambda: data.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def installed_library(entry):
    """(path, SHA-256) of the library of cache entry `entry` if it is whole (its bytes match its manifest), else
    None."""
    library = os.path.join(entry, LIBRARY)
    try:
        with open(os.path.join(entry, MANIFEST)) as manifest:
            facts = json.load(manifest)
        if os.path.getsize(library) != facts["size"]:
            return None
        digest = _sha256_of(library)
        if digest != facts["sha256"]:
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return library, digest


def _write_atomically(path, text):
    partial = "%s.%d.tmp" % (path, os.getpid())
    with open(partial, "w") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, path)


class _BuildLock:
    """The entry's lock file, held with flock while this process builds. `waited`: another process held it when
    this one came; `asked_at`: when this one asked for it."""

    def __init__(self, path, wait_s, on_wait):
        self.path, self.wait_s, self.on_wait = path, wait_s, on_wait
        self.file = None
        self.waited = False
        self.asked_at = 0.0

    def __enter__(self):
        self.file = open(self.path, "a")
        self.asked_at = time.time()
        while True:
            try:
                fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except OSError as error:
                if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    return self  # a file system without flock: builds may repeat, installs stay whole
            if not self.waited:
                self.waited = True
                self.on_wait()
            if time.time() - self.asked_at > self.wait_s:
                self.file.close()
                raise BuildFailed("another process has been building the observer for over %d s (%s)" % (
                    self.wait_s, os.path.dirname(self.path)))
            time.sleep(0.05)

    def __exit__(self, *exc):
        self.file.close()  # closing lets the lock go


def _failure_since(entry, since):
    """Why the build that ended after `since` failed, or None when none did."""
    path = os.path.join(entry, FAILED)
    try:
        if os.path.getmtime(path) < since - 1.0:
            return None  # an older failure: the process waited for was killed, or succeeded elsewhere
        with open(path) as failed:
            return failed.read().strip() or "the build failed"
    except OSError:
        return None


def observer_library(recipe, root, load, say, wait_s=WAIT_S):
    """The observer of `recipe`, loaded by `load(path)` (which raises when the file is no usable observer): the
    cached one, or one built now into the cache under `root` (see the module doc). Raises BuildFailed."""
    entry = os.path.join(root, recipe.key)
    broken = None  # (SHA-256, why) of an installed library that did not load here
    installed = installed_library(entry)
    if installed:
        try:
            return load(installed[0])
        except Exception as error:  # it loaded when it was built: what it needs has changed since
            broken = (installed[1], error)
    os.makedirs(entry, mode=0o700, exist_ok=True)

    def say_waiting():
        say("another process is building the native PyTorch observer: waiting for it (%s)" % entry)

    with _BuildLock(os.path.join(entry, LOCK), wait_s, say_waiting) as lock:
        installed = installed_library(entry)
        if installed and (broken is None or installed[1] != broken[0]):
            return load(installed[0])  # built by the process this one waited for
        if lock.waited and installed is None:
            failure = _failure_since(entry, lock.asked_at)
            if failure:
                raise BuildFailed(failure)
        if broken is not None:
            say("the cached native observer does not load (%s): building it again" % broken[1])
        return _build(recipe, entry, load, say)


def _build(recipe, entry, load, say):
    """Builds the recipe in a temporary directory inside `entry`, loads the result, and only then installs it."""
    say("building the native PyTorch observer for torch %s (once for this torch and compiler, cached in %s)" % (
        recipe.torch_version, entry))
    work = tempfile.mkdtemp(prefix="build-", dir=entry)
    try:
        for name, text in recipe.sources.items():
            with open(os.path.join(work, name), "wb") as source:
                source.write(text)
        partial = os.path.join(work, LIBRARY)
        command = recipe.command(work, partial)
        try:
            result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            output = result.stdout.decode(errors="replace")
        except OSError as error:
            _fail(entry, "%s does not run (%s)" % (recipe.compiler, error))
        if result.returncode != 0 or not os.path.isfile(partial):
            errors = [line for line in output.splitlines() if "error" in line]
            _fail(entry, "%s failed: %s" % (os.path.basename(recipe.compiler),
                                            (errors or ["exit %d" % result.returncode])[0]))
        try:
            library = load(partial)
        except Exception as error:
            _fail(entry, "the built observer does not load: %s" % error)
        manifest = {"size": os.path.getsize(partial), "sha256": _sha256_of(partial), "parts": recipe.parts,
                    "command": command}
        os.replace(partial, os.path.join(entry, LIBRARY))
        _write_atomically(os.path.join(entry, MANIFEST), json.dumps(manifest, indent=1, sort_keys=True))
        try:
            os.remove(os.path.join(entry, FAILED))
        except OSError:
            pass
        return library
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _fail(entry, message):
    """Records why the build failed, for the processes waiting on it, and raises."""
    try:
        _write_atomically(os.path.join(entry, FAILED), message + "\n")
    except OSError:
        pass
    raise BuildFailed(message)
