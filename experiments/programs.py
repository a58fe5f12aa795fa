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


def find_launcher(name, var):
    """(path, None) for the launcher NAME (heaplab-lua, heaplab-python): the one $VAR
    names, the build's (in a checkout), or one on PATH; (None, why) when there is none,
    saying where it looked and how to get one (a notebook skips on it, a test fails)."""
    path = os.environ.get(var) or (os.path.join(BUILD, name) if CHECKOUT else None)
    if path and os.path.exists(path):
        return path, None
    found = shutil.which(name)
    if found:
        return found, None
    if CHECKOUT:
        return None, (f"{name} is not built ({path}): run `make` (ninja -C build) first, "
                      f"or set {var}")
    unset = f"{var}={os.environ[var]} does not exist; " if os.environ.get(var) else ""
    return None, (f"{unset}{name} is not on PATH ({os.environ.get('PATH', '')}): the "
                  f"launchers are installed by `meson install -C build` from a checkout "
                  f"(docs/clients.md); put their folder on PATH, or set {var} to one")


def launcher(name, var):
    """The launcher NAME (find_launcher); the test fails, saying where it looked and
    how to get one, when there is none."""
    path, why = find_launcher(name, var)
    if why:
        pytest.fail(why)
    return path


#: a language's launcher and the variable that overrides where it is looked for
LAUNCHERS = {"lua": ("heaplab-lua", "HEAPLAB_LUA_LAUNCHER"),
             "python": ("heaplab-python", "HEAPLAB_PYTHON_LAUNCHER")}


def missing_launchers(languages):
    """Why the launchers of `languages` cannot run here (find_launcher's reasons,
    joined), or None when every one is found."""
    why = [find_launcher(*LAUNCHERS[lang])[1] for lang in languages]
    why = [w for w in why if w]
    return "; ".join(why) if why else None
