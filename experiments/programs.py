"""The real-interpreter programs E8 and E10 run, and the launchers that run them.

The client programs live in tests/clients/programs (make test runs them at a small
size, the experiments at full size); the launchers are the build's
(build/clients, or $BUILD/clients), an override named by an environment
variable, or the first on PATH.
"""
import os
import shutil

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = os.path.join(ROOT, "tests", "clients", "programs")
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"), "clients")


def launcher(name, var):
    """The built launcher NAME (heaplab-lua, heaplab-python), the one $VAR names, or
    one on PATH; the test fails, saying how to build it, when there is none."""
    path = os.environ.get(var) or os.path.join(BUILD, name)
    if os.path.exists(path):
        return path
    found = shutil.which(name)
    if found:
        return found
    pytest.fail(f"{name} is not built ({path}): run `make` (ninja -C build) first, "
                f"or set {var}")
