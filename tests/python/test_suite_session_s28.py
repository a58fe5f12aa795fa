"""The experiment suite as users run it (session 28's hunt of
`python -m pytest experiments`): the project's pytest configuration, the
protocol variables, the records and tables a session leaves, and what a
session stopped by a signal leaves running.  Each test runs a child pytest
or the harness against the installed package."""
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _pytest(cwd, *args, env=None, timeout=120):
    e = dict(os.environ)
    e.pop("PYTEST_XDIST_WORKER", None)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "pytest", *args], cwd=cwd, env=e,
                          capture_output=True, text=True, timeout=timeout)


# ---- 5: --lf ---------------------------------------------------------------------------

@pytest.mark.shares_the_machine
def test_last_failed_reruns_only_the_failures_under_the_projects_configuration(tmp_path):
    """pyproject.toml's addopts had `-p no:cacheprovider`: no cache was
    written, so `--lf` silently ran the whole suite again, and adding `-p
    cacheprovider` crashed ("option names {'--lf'} already added").  Under
    the project's own configuration the second session reruns the failure
    only."""
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), tmp_path / "pyproject.toml")
    (tmp_path / "test_two.py").write_text(
        "def test_passes():\n    pass\n\ndef test_fails():\n    assert False\n")
    p = _pytest(tmp_path, "-q", "test_two.py")
    assert p.returncode == 1 and "1 failed, 1 passed" in p.stdout, p.stdout + p.stderr
    p = _pytest(tmp_path, "-q", "--lf", "test_two.py")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "1 failed, 1 deselected" in p.stdout, p.stdout + p.stderr
    assert (tmp_path / ".pytest_cache").is_dir()
    # the tree's .gitignore keeps it out of git
    assert re.search(r"^/?\.pytest_cache/?$", open(os.path.join(ROOT, ".gitignore")).read(),
                     re.M)
