"""The bootstrap's modules (capture/python/, a folder that is no package), loaded from their files for this
folder's Python tests."""
import importlib.util
import os

PYTHON_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python")


def load(file_name, module_name=None):
    """The module of capture/python/FILE_NAME.py, under `module_name` (the file's name by default)."""
    spec = importlib.util.spec_from_file_location(module_name or file_name,
                                                  os.path.join(PYTHON_DIR, file_name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
