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


# ---- 2 and 9: protocol variables --------------------------------------------------------

EXPERIMENTS = os.path.join(ROOT, "experiments")


@pytest.mark.shares_the_machine
@pytest.mark.parametrize("var, value, needle", [
    ("HEAPLAB_E10_N", "abc", "HEAPLAB_E10_N='abc': expected a comma list of whole numbers, "
                             "each in 2..100000"),
    ("HEAPLAB_E10_N", "0", "HEAPLAB_E10_N='0'"),
    ("HEAPLAB_E10_OBJECTS", "2.5", "HEAPLAB_E10_OBJECTS='2.5': expected a whole number in "
                                   "100000..50000000"),
    ("HEAPLAB_E1_FILL_MIB", "nan", "HEAPLAB_E1_FILL_MIB='nan': expected a number in 16..4096 MiB"),
    ("HEAPLAB_E1_FILL_MIB", "inf", "HEAPLAB_E1_FILL_MIB='inf'"),
    ("HEAPLAB_E1_FILL_MIB", "1", "HEAPLAB_E1_FILL_MIB='1'"),     # under the 4 MiB warm cache
])
def test_a_bad_protocol_variable_fails_the_test_that_reads_it_naming_it(tmp_path, var, value,
                                                                       needle):
    """A bad protocol variable aborted every selection at collection
    ("Interrupted: 1 error during collection", `invalid literal for int()`,
    no variable named), or ran out of range (HEAPLAB_E1_FILL_MIB=1:
    "returned -0.0%", as if a defect; HEAPLAB_E10_N=0 failed inside the
    arm).  Now the suite collects, and the experiment's test fails before
    any arm runs, naming the variable, its value and the range."""
    env = {var: value, "HEAPLAB_RESULTS": str(tmp_path / "results")}
    p = _pytest(EXPERIMENTS, "-q", "-p", "no:cacheprovider", "--collect-only", env=env)
    assert p.returncode == 0 and "error" not in p.stdout.lower(), p.stdout + p.stderr
    test = {"HEAPLAB_E10_N": "test_e10_sparse_survivors.py::test_e10_sparse_survivors",
            "HEAPLAB_E10_OBJECTS": "test_e10_sparse_survivors.py::"
                                   "test_e10_sparse_survivors_on_real_interpreters",
            "HEAPLAB_E1_FILL_MIB": "test_e1_page_floor.py"}[var]
    p = _pytest(EXPERIMENTS, "-q", "-p", "no:cacheprovider", test, env=env)
    assert p.returncode == 1, p.stdout + p.stderr
    assert needle in p.stdout, p.stdout
    # no arm ran: the check comes first
    assert " ... " not in p.stdout, p.stdout


def test_protocol_variables_are_one_checker():
    from heaplab.harness import ProtocolVariable
    v = ProtocolVariable("HEAPLAB_X_MIB", 192, 16, 4096, "MiB")
    assert v.value({}) == 192 and v.value({"HEAPLAB_X_MIB": ""}) == 192
    assert v.value({"HEAPLAB_X_MIB": "32"}) == 32.0
    for bad in ("abc", "nan", "inf", "-inf", "8", "5000"):
        with pytest.raises(ValueError, match=r"HEAPLAB_X_MIB='.*': expected a number in "
                                             r"16\.\.4096 MiB"):
            v.value({"HEAPLAB_X_MIB": bad})
    n = ProtocolVariable("HEAPLAB_X_N", 10, 2, 100, integer=True)
    assert n.value({"HEAPLAB_X_N": "1e1"}) == 10
    with pytest.raises(ValueError, match="whole number"):
        n.value({"HEAPLAB_X_N": "2.5"})
    many = ProtocolVariable("HEAPLAB_X_NS", (10, 100), 2, 1000, integer=True, many=True)
    assert many.value({"HEAPLAB_X_NS": "3,30"}) == (3, 30)
    assert many.value_or_default({"HEAPLAB_X_NS": "abc"}) == (10, 100)
    # every experiment takes its variables from one table, through this checker
    sys.path.insert(0, EXPERIMENTS)
    try:
        import protocol
    finally:
        sys.path.remove(EXPERIMENTS)
    names = {p.var for p in vars(protocol).values() if isinstance(p, ProtocolVariable)}
    assert {"HEAPLAB_E1_FILL_MIB", "HEAPLAB_E10_N", "HEAPLAB_E10_OBJECTS", "HEAPLAB_E8_MIB",
            "HEAPLAB_E9_KEYS"} <= names, names
    for path in os.listdir(EXPERIMENTS):
        if path.startswith("test_e") and path.endswith(".py"):
            src = open(os.path.join(EXPERIMENTS, path)).read()
            assert "env_number(" not in src and 'environ.get("HEAPLAB_E' not in src, path


SMALL_E1 = {"HEAPLAB_E1_FILL_MIB": "16", "HEAPLAB_E1_TEXTURES_MIB": "8"}


def test_overridden_sizes_are_recorded_and_the_table_says_so(tmp_path):
    """HEAPLAB_E1_FILL_MIB=32 was not recorded (params {}), and table.txt
    printed the seed's 192 MB figures beside the small run's results as if
    comparable.  The arm JSON now records the sizes run (params["protocol"],
    and protocol_overridden), and the table's seed cells say the run's
    sizes were not the protocol's."""
    import json
    results = tmp_path / "results"
    p = _pytest(EXPERIMENTS, "-q", "-p", "no:cacheprovider", "test_e1_page_floor.py",
                env=dict(SMALL_E1, HEAPLAB_RESULTS=str(results)), timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    on = json.loads((results / "E1" / "on.json").read_text())
    assert on["params"]["protocol"] == {"HEAPLAB_E1_FILL_MIB": 16.0,
                                        "HEAPLAB_E1_TEXTURES_MIB": 8.0}, on["params"]
    assert on["protocol_overridden"] == on["params"]["protocol"]
    table = (results / "table.txt").read_text()
    seeded = [ln for ln in table.splitlines() if "466,224 -> 287,824 KB" in ln]
    assert seeded and all("this run: HEAPLAB_E1_FILL_MIB=16.0, HEAPLAB_E1_TEXTURES_MIB=8.0"
                          in ln for ln in seeded), table
