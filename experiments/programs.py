"""The real-interpreter programs E8 and E10 run, and the launchers that run them.

The client programs live in tests/clients/programs (make test runs them at a small
size, the experiments at full size); the installed package has a copy beside this
file, in client_programs/ (bindings/python/meson.build).  The launchers are, in a
checkout, the build's (build/clients, or $BUILD/clients); else an override named
by an environment variable, or the first on PATH (meson install puts them there).
"""
import os
import shutil

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# a checkout has tests/clients/programs; the installed package has client_programs/
CHECKOUT = os.path.isdir(os.path.join(ROOT, "tests", "clients", "programs"))
PROGRAMS = (os.path.join(ROOT, "tests", "clients", "programs") if CHECKOUT
            else os.path.join(HERE, "client_programs"))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"), "clients")


def launcher(name, var):
    """The launcher NAME (heaplab-lua, heaplab-python): the one $VAR names, the build's
    (in a checkout), or one on PATH; the test fails, saying where it looked and how to
    get one, when there is none."""
    path = os.environ.get(var) or (os.path.join(BUILD, name) if CHECKOUT else None)
    if path and os.path.exists(path):
        return path
    found = shutil.which(name)
    if found:
        return found
    if CHECKOUT:
        pytest.fail(f"{name} is not built ({path}): run `make` (ninja -C build) first, "
                    f"or set {var}")
    unset = f"{var}={os.environ[var]} does not exist; " if os.environ.get(var) else ""
    pytest.fail(f"{unset}{name} is not on PATH ({os.environ.get('PATH', '')}): the launchers are "
                f"installed by `meson install -C build` from a checkout (docs/clients.md); "
                f"put their folder on PATH, or set {var} to one")
