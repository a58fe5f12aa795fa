"""The commands the docs give, and the notebooks outside the machine they were
written on: what a reader runs first must say what is missing instead of
failing obscurely."""
import os
import subprocess
import sys

import pytest

# no assertion here depends on the machine's load (pyproject.toml's markers)
pytestmark = pytest.mark.shares_the_machine

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# heaplab made unimportable, as in a python3 it was never installed into
# (`python3 -m pytest experiments` after `make experiments`, which installs it in .venv)
WITHOUT_HEAPLAB = """
import sys
class Absent:
    def find_spec(self, name, path=None, target=None):
        if name == "heaplab" or name.startswith("heaplab."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Absent())
import pytest
sys.exit(pytest.main(sys.argv[1:]))
"""


def test_experiments_without_heaplab_say_where_it_is():
    """README: `python3 -m pytest experiments` failed on a fresh clone with a
    bare `No module named 'heaplab'`; the conftest now names the venv's
    interpreter (or how to install heaplab)."""
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    p = subprocess.run([sys.executable, "-c", WITHOUT_HEAPLAB, "experiments", "--collect-only",
                        "-q", "-p", "no:cacheprovider"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    assert "heaplab is not installed for " in out, out
    assert ("bin/python -m pytest experiments" in out and "bin/activate" in out) \
        or "make experiments" in out, out


def test_e8_notebook_skips_without_the_launchers(tmp_path):
    """The E8 notebook on a machine without heaplab-lua / heaplab-python is
    skipped with the reason, as E9's is without redis-server (it FAILed with
    `heaplab-lua is not on PATH`).  The check itself needs nbclient and
    nbformat (heaplab[notebooks]): without them it exits 2 saying so."""
    pytest.importorskip("nbclient")
    pytest.importorskip("nbformat")
    env = dict(os.environ, HEAPLAB_LUA_LAUNCHER=str(tmp_path / "no-heaplab-lua"),
               HEAPLAB_PYTHON_LAUNCHER=str(tmp_path / "no-heaplab-python"),
               PATH=os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                                    if not os.path.exists(os.path.join(p, "heaplab-lua"))))
    nb = os.path.join(ROOT, "docs", "notebooks", "e8_real_interpreters.ipynb")
    p = subprocess.run([sys.executable, "-m", "heaplab.notebooks", nb, "--check",
                        "--out", str(tmp_path / "out")],
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "skip " + nb in p.stdout and "skipped: E8 drives the launchers:" in p.stdout, p.stdout
    assert "heaplab-lua" in p.stdout and "FAIL" not in p.stdout, p.stdout


WORDS = {1: "once", 2: "twice", 3: "three times", 4: "four times", 5: "five times"}


def test_getting_started_first_heap_prints_what_the_page_says():
    """docs/getting-started.md, A first heap: the example runs, and the trims it
    prints are what the prose says (it said `1024 ...` four times; the run
    printed it three times, then 242: 3 x 1024 + 242 = the 3,314 released)."""
    with open(os.path.join(ROOT, "docs", "getting-started.md")) as f:
        text = f.read()
    section = text[text.index("## A first heap"):]
    start = section.index("```python\n") + len("```python\n")
    end = section.index("\n```", start)
    code, prose = section[start:end], section[end + 4:section.index("\n## ", end)]
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    released = int(lines[2].split()[0])
    trims = [int(line.split()[0]) for line in lines[3:]]
    assert sum(trims) == released, lines
    assert f"`{lines[2]}`" in prose, (lines, prose)      # released, warm, resident MiB, VMAs
    full, last = trims[:-1], trims[-1]
    assert set(full) == {1024}, trims
    assert f"`1024 ...` {WORDS[len(full)]} and `{last} ...`" in prose, (trims, prose)
