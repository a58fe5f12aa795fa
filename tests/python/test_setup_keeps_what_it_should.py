"""tools/setup.sh remakes the project venv only when it was made from another
interpreter than $PYTHON (its own bin/python says so, not a marker file), and then
removes only the build folders configured with that old venv's python (README,
"Set up and run").  Runs a copy of setup.sh in a scratch folder; $PYTHON is a
wrapper whose `-m venv` makes venvs without pip and with a fresh pip stamp, so
no package is installed (the Debian packages base needs are already there)."""
import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.shares_the_machine

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BASE = os.path.realpath(getattr(sys, "_base_executable", sys.executable))

WRAPPER = f"""#!/bin/sh
if [ "$1" = -m ] && [ "$2" = venv ]; then
  {BASE} -m venv --without-pip "$3" && touch -d '+1 hour' "$3/setup-python.stamp"
  exit $?
fi
exec {BASE} "$@"
"""


def scratch_setup(tmp_path):
    """A copy of setup.sh in tmp_path, and $PYTHON's wrapper beside it."""
    if shutil.which("dpkg-query") is None:
        pytest.skip("not a Debian machine")
    (tmp_path / "tools").mkdir()
    shutil.copy2(os.path.join(ROOT, "tools", "setup.sh"), tmp_path / "tools" / "setup.sh")
    (tmp_path / "python3").write_text(WRAPPER)
    (tmp_path / "python3").chmod(0o755)


def setup(tmp_path, venv):
    env = dict(os.environ, PYTHON=str(tmp_path / "python3"), VENV=str(venv))
    env.pop("VIRTUAL_ENV", None)
    p = subprocess.run([str(tmp_path / "tools" / "setup.sh"), "base"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_setup_keeps_a_venv_of_the_same_interpreter_and_unrelated_builds(tmp_path):
    scratch_setup(tmp_path)
    # (a) a .venv the user made from the same interpreter (no marker file)
    subprocess.run([BASE, "-m", "venv", "--without-pip", str(tmp_path / ".venv")], check=True)
    (tmp_path / ".venv" / "setup-python.stamp").touch()
    os.utime(tmp_path / ".venv" / "setup-python.stamp", (2**31, 2**31))
    (tmp_path / "build-mine" / "meson-private").mkdir(parents=True)
    out = setup(tmp_path, ".venv")
    assert "making it again" not in out and "removing" not in out, out
    assert (tmp_path / "build-mine").is_dir()
    # (b) another venv, made from an interpreter that no longer runs: only the build
    # folder configured with its python goes
    other = tmp_path / "othervenv"
    subprocess.run([BASE, "-m", "venv", "--without-pip", str(other)], check=True)
    (other / "bin" / "python").unlink()
    (tmp_path / "build-other" / "meson-info").mkdir(parents=True)
    (tmp_path / "build-other" / "meson-private").mkdir(parents=True)
    (tmp_path / "build-other" / "meson-info" / "intro-tests.json").write_text(
        f'[{{"cmd": ["{other}/bin/python", "t.py"]}}]')
    (tmp_path / "build-venv" / "meson-info").mkdir(parents=True)
    (tmp_path / "build-venv" / "meson-private").mkdir(parents=True)
    (tmp_path / "build-venv" / "meson-info" / "intro-tests.json").write_text(
        f'[{{"cmd": ["{tmp_path}/.venv/bin/python", "t.py"]}}]')
    out = setup(tmp_path, other)
    assert "making it again" in out, out
    assert not (tmp_path / "build-other").exists(), out
    for d in ("build-mine", "build-venv"):
        assert (tmp_path / d).is_dir(), (d, out)
    assert os.access(other / "bin" / "python", os.X_OK)


def test_setup_gives_a_kept_venv_without_pip_its_pip(tmp_path):
    """A venv of the same interpreter made without pip (`uv venv`, `python3 -m
    venv --without-pip`) is kept, and its pip comes from ensurepip: setup.sh
    ended in "No module named pip", every run again (the review, session 26).
    The venv's python is a wrapper that records `-m pip install` (nothing is
    installed) and runs everything else, ensurepip included."""
    scratch_setup(tmp_path)
    venv = tmp_path / "nopip"
    subprocess.run([BASE, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    os.rename(py, venv / "bin" / "python.real")
    log = tmp_path / "pip-installs"
    py.write_text(f"""#!/bin/sh
if [ "$1 $2 $3" = "-m pip install" ]; then echo "$@" >> {log}; exit 0; fi
exec {venv}/bin/python.real "$@"
""")
    py.chmod(0o755)
    out = setup(tmp_path, venv)
    assert "making it again" not in out and "has no pip; installing it" in out, out
    assert log.read_text().startswith("-m pip install"), out
    p = subprocess.run([str(venv / "bin" / "python.real"), "-m", "pip", "--version"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
