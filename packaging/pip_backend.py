"""The PEP 517 backend of `pip install .`: maturin's, with one step before it builds the wheel.

maturin packs the streamtrace binary into the wheel's scripts (bindings "bin"), which pip installs into the
environment's bin directory. `streamtrace capture` injects libstreamtrace_capture.so, which it looks for beside
its own executable (src/cli/capture.rs); that library is another crate of the workspace (a cdylib), which maturin
does not build. So this builds it with cargo, with the profile maturin is given (release unless
MATURIN_PEP517_ARGS says `--profile NAME`) and in the same target directory, so that the crates both share are
built once, and puts it into maturin's data directory (pyproject.toml, `data`) under scripts/: it lands beside
the binary.
"""
import json
import os
import shutil
import subprocess

import maturin
from maturin import *  # noqa: F401,F403 - every other hook is maturin's own

LIBRARY = "libstreamtrace_capture.so"
DATA_SCRIPTS = os.path.join("target", "pip-data", "scripts")


def _profile(config_settings):
    """The cargo profile maturin will build with: `--profile NAME` among its arguments, else release."""
    args = maturin.get_maturin_pep517_args(config_settings)
    for i, arg in enumerate(args):
        if arg == "--profile" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--profile="):
            return arg.split("=", 1)[1]
    return "release"


def _target_dir():
    """Cargo's target directory for this workspace (CARGO_TARGET_DIR and cargo configuration included)."""
    metadata = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"], check=True, stdout=subprocess.PIPE
    ).stdout
    return json.loads(metadata)["target_directory"]


def _build_capture_library(config_settings):
    profile = _profile(config_settings)
    subprocess.run(["cargo", "build", "--profile", profile, "-p", "streamtrace-capture"], check=True)
    folder = {"dev": "debug", "test": "debug", "bench": "release"}.get(profile, profile)
    built = os.path.join(_target_dir(), folder, LIBRARY)
    os.makedirs(DATA_SCRIPTS, exist_ok=True)
    shutil.copy2(built, os.path.join(DATA_SCRIPTS, LIBRARY))


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    # maturin checks that the data directory exists before it writes the metadata; the library comes later.
    os.makedirs(DATA_SCRIPTS, exist_ok=True)
    return maturin.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _build_capture_library(config_settings)
    return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)
